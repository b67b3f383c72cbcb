"""Sizes that cannot work are refused fast, and kernels stay exact at extreme scales.

- Every size argument (``n_components``, ``n_grids``, ``n_inducing``,
  ``max_degree``, ``degree``) is checked against the memory it would take
  before anything is allocated: a :class:`ValueError` naming the argument
  and the size in bytes, within a second, instead of an abort of the
  interpreter or a run of minutes.
- Kernel evaluations give exactly the kernel variance at zero distance at
  every scale of the inputs and of the length scale, and every model is
  equivariant under scaling the inputs and the length scale together (the
  ``|x|^2 + |y|^2 - 2 x.y`` cancellation and the ``1/l`` overflow broke
  both).
- Hyperparameter fits follow the units of the targets: scaling ``y`` by
  ``c`` scales the fitted variances by ``c^2`` and shifts the log marginal
  likelihood by ``-N ln c``, for ``c`` far from 1 (the optimizer's range is
  relative to data-scaled starts, not absolute).
"""

from __future__ import annotations

import time

import numpy as np
import pytest

import randfeat_rs as rf
from randfeat_rs import (
    ExactGPC,
    ExactGPR,
    LocalizedMaclaurinGPR,
    MaclaurinFeatures,
    NystroemFeatures,
    PolynomialSketch,
    RandomBinningFeatures,
    RandomFeatureGPC,
    RandomFeatureGPR,
    RandomFourierFeatures,
    SparseGPC,
    SparseGPR,
)

HUGE = 10**12
rng = np.random.default_rng(0)
X = rng.standard_normal((40, 5))
Y = np.sin(X[:, 0]) + 0.1 * X[:, 1]
LABELS = (X[:, 0] > 0).astype(int)
# Many rows without copying them: a broadcast view, made contiguous (40 MB)
# by the estimators' validation.
X_TALL = np.broadcast_to(X[:1], (10**6, 5))
Y_TALL = np.zeros(10**6)


def _refused(fit, match):
    """``fit()`` raises a ValueError matching ``match`` that gives a byte size,
    within two seconds."""
    t0 = time.perf_counter()
    with pytest.raises(ValueError, match=match) as info:
        fit()
    elapsed = time.perf_counter() - t0
    assert elapsed < 2.0, f"refused after {elapsed:.1f} s"
    return str(info.value)


SIZE_CASES = {
    "rff": (lambda: RandomFourierFeatures(HUGE).fit(X), "n_components"),
    "rff-structured": (
        lambda: RandomFourierFeatures(HUGE, sampler="structured").fit(X),
        "n_components",
    ),
    **{
        f"sketch-{s}": (
            lambda s=s: PolynomialSketch(HUGE, sketch=s).fit_transform(X),
            "n_components",
        )
        for s in ["gaussian", "rademacher", "tensor_srht"]
    },
    # The widest TensorSketch its 32-bit hashes allow (wider ones are refused
    # for that, test_sketch.py): an output of terabytes.
    "sketch-tensor_sketch": (
        lambda: PolynomialSketch(2**32 - 1, sketch="tensor_sketch").fit_transform(X),
        "n_components",
    ),
    "maclaurin": (lambda: MaclaurinFeatures(HUGE).fit(X), "n_components"),
    "maclaurin-1d": (lambda: MaclaurinFeatures(HUGE).fit(X[:, :1]), "n_components"),
    "maclaurin-random": (
        lambda: MaclaurinFeatures(HUGE, allocation="random").fit(X),
        "n_components",
    ),
    "binning": (lambda: RandomBinningFeatures(HUGE).fit(X), "n_grids"),
    "nystroem-tall": (lambda: NystroemFeatures(HUGE).fit(X_TALL), "n_components"),
    "rfgpr-map": (
        lambda: RandomFeatureGPR(RandomFourierFeatures(HUGE)).fit(X, Y),
        "n_components",
    ),
    # A map that fits, statistics (D x D) that do not.
    "rfgpr-stats": (
        lambda: RandomFeatureGPR(RandomFourierFeatures(10**6, random_state=0)).fit(X, Y),
        "n_components",
    ),
    "rfgpr-optimize": (
        lambda: RandomFeatureGPR(
            RandomFourierFeatures(10**6, random_state=0),
            optimize=("length_scale",),
            random_state=0,
        ).fit(X, Y),
        "n_components",
    ),
    "rfgpc-stats": (
        lambda: RandomFeatureGPC(RandomFourierFeatures(10**6, random_state=0)).fit(X, LABELS),
        "n_components",
    ),
    "localized": (lambda: LocalizedMaclaurinGPR(HUGE).fit(X, Y), "n_components"),
    "localized-stats": (
        lambda: LocalizedMaclaurinGPR(10**6, random_state=0).fit(X, Y),
        "n_components",
    ),
    "sparse-tall": (
        lambda: SparseGPR(n_inducing=HUGE, optimize=()).fit(X_TALL, Y_TALL),
        "n_inducing",
    ),
    "stats": (lambda: rf.SufficientStatistics(10**7), "n_features"),
}


@pytest.mark.parametrize("case", SIZE_CASES, ids=list(SIZE_CASES))
def test_huge_sizes_are_refused_fast_with_the_bytes(case):
    fit, name = SIZE_CASES[case]
    msg = _refused(fit, rf"`{name}`")
    assert "bytes" in msg and f"lower {name}" in msg, msg


@pytest.mark.parametrize(
    "fit",
    [
        lambda: MaclaurinFeatures(16, max_degree=10**6).fit(X),
        lambda: MaclaurinFeatures(16, max_degree=33).fit(X),
        lambda: LocalizedMaclaurinGPR(16, max_degree=10**6).fit(X, Y),
    ],
    ids=["maclaurin", "maclaurin-33", "localized"],
)
def test_max_degree_is_bounded(fit):
    msg = _refused(fit, "`max_degree`")
    assert "must be <= 32" in msg, msg


def test_max_degree_32_is_accepted():
    phi = MaclaurinFeatures(16, max_degree=32, random_state=0).fit_transform(X)
    assert phi.shape == (40, 16) and np.isfinite(phi).all()


def test_sketch_variance_shows_the_degree_given():
    with pytest.raises(ValueError, match="got 1000000000000"):
        rf.sketch_variance(X[0], X[1], degree=10**12, n_components=8, sketch="gaussian")


KERNELS = ["gaussian", "laplacian", "matern12", "matern32", "matern52"]
SCALES = [(1e30, 1.0), (1e-30, 1.0), (1.0, 1e-6), (1.0, 1e-300), (1e300, 1.0), (1e150, 1e150)]


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize(("scale", "length_scale"), SCALES)
def test_kernel_matrix_is_one_at_zero_distance(kernel, scale, length_scale):
    Xs = np.vstack([X[:8], X[3:4]]) * scale
    K = rf.kernel_matrix(Xs, kernel=kernel, length_scale=length_scale)
    np.testing.assert_array_equal(np.diag(K), 1.0)
    assert K[3, 8] == 1.0 and K[8, 3] == 1.0
    assert np.isfinite(K).all() and (K >= 0).all() and (K <= 1).all()


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("scale", [1e30, 1e-30])
def test_kernel_matrix_is_scale_equivariant(kernel, scale):
    want = rf.kernel_matrix(X[:10], X[5:], kernel=kernel, length_scale=1.3)
    got = rf.kernel_matrix(X[:10] * scale, X[5:] * scale, kernel=kernel, length_scale=1.3 * scale)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-14)


def _scaled_pair(make, scale):
    """Outputs of ``make(length_scale)`` fitted on (X, 1.1) and on (X s, 1.1 s)."""
    return make(1.1, X), make(1.1 * scale, X * scale)


MODELS = {
    "nystroem": lambda ls, x: (
        NystroemFeatures(20, length_scale=ls, random_state=0).fit(x).transform(x)
    ),
    "nystroem-matern12": lambda ls, x: (
        NystroemFeatures(20, kernel="matern12", length_scale=ls, random_state=0).fit(x).transform(x)
    ),
    "exact-gpr": lambda ls, x: (
        ExactGPR(length_scale=ls, kernel_variance=1.5, noise_variance=0.01, optimize=())
        .fit(x, Y)
        .predict(x, return_std=True)
    ),
    "exact-gpr-matern52": lambda ls, x: (
        ExactGPR(
            kernel="matern52",
            length_scale=ls,
            kernel_variance=1.5,
            noise_variance=0.01,
            optimize=(),
        )
        .fit(x, Y)
        .predict(x, return_std=True)
    ),
    "sparse-gpr": lambda ls, x: (
        SparseGPR(
            n_inducing=12,
            length_scale=ls,
            kernel_variance=1.5,
            noise_variance=0.01,
            optimize=(),
            random_state=0,
        )
        .fit(x, Y)
        .predict(x, return_std=True)
    ),
    "exact-gpc": lambda ls, x: ExactGPC(length_scale=ls).fit(x, LABELS).predict_proba(x),
    "rf-gpr": lambda ls, x: (
        RandomFeatureGPR(
            RandomFourierFeatures(64, length_scale=ls, random_state=0), noise_variance=0.01
        )
        .fit(x, Y)
        .predict(x, return_std=True)
    ),
    "localized": lambda ls, x: (
        LocalizedMaclaurinGPR(
            32, length_scale=ls, noise_variance=0.01, threshold=1.0, random_state=0
        )
        .fit(x, Y)
        .predict(x, return_std=True)
    ),
}


@pytest.mark.parametrize("model", MODELS, ids=list(MODELS))
@pytest.mark.parametrize("scale", [1e30, 1e-30])
def test_models_are_scale_equivariant(model, scale):
    want, got = _scaled_pair(MODELS[model], scale)
    want, got = (want, got) if isinstance(want, tuple) else ((want,), (got,))
    for w, g in zip(want, got):
        np.testing.assert_allclose(g, w, rtol=1e-8, atol=1e-10)


# Inputs on the grid 2^-10 Z and the same inputs shifted by 2^30 (41 bits:
# exact in float64), with the fits and outputs that must not tell them apart.
GRID = np.random.default_rng(4).integers(-2048, 2048, (60, 3)) / 1024.0
GRID_Y = np.sin(GRID[:, 0]) + 0.3 * GRID[:, 1] + 0.1 * np.random.default_rng(5).standard_normal(60)
GRID_LABELS = (GRID[:, 0] + 0.2 * GRID[:, 2] > 0).astype(int)
SHIFTED = {
    "kernel-matrix": lambda x: rf.kernel_matrix(
        x[:20], x[30:], kernel="matern32", length_scale=[0.7, 1.1, 1.9]
    ),
    "nystroem-ard": lambda x: (
        NystroemFeatures(15, length_scale=[0.7, 1.1, 1.9], random_state=0).fit(x).transform(x)
    ),
    "exact-gpr": lambda x: ExactGPR(kernel="matern52", random_state=0).fit(x, GRID_Y),
    "exact-gpr-ard": lambda x: ExactGPR(ard=True, random_state=0).fit(x, GRID_Y),
    "sparse-gpr": lambda x: SparseGPR(n_inducing=15, random_state=0).fit(x, GRID_Y),
    "sparse-gpr-fitc": lambda x: SparseGPR(
        n_inducing=15, method="fitc", kernel="laplacian", random_state=0
    ).fit(x, GRID_Y),
    "exact-gpc": lambda x: ExactGPC(
        length_scale=0.7, optimize=("length_scale", "kernel_variance"), random_state=0
    ).fit(x, GRID_LABELS),
    "sparse-gpc": lambda x: SparseGPC(
        n_inducing=15,
        length_scale=0.7,
        optimize=("length_scale", "kernel_variance"),
        random_state=0,
    ).fit(x, GRID_LABELS),
}


@pytest.mark.parametrize("make", SHIFTED, ids=list(SHIFTED))
def test_inputs_far_from_the_origin_keep_their_digits(make):
    # Timestamps and coordinates sit far from the origin. Every kernel is
    # shift invariant and is computed from inputs centered before they are
    # divided by the length scales, so the shifted data gives the same
    # kernel values, fits and predictions. Divided first, the shifted inputs
    # lost about 30 bits of their differences: relative errors near 1e-7.
    shift = 2.0**30
    near, far = SHIFTED[make](GRID), SHIFTED[make](GRID + shift)
    if isinstance(near, np.ndarray):
        np.testing.assert_allclose(far, near, rtol=1e-13, atol=0)
        return
    np.testing.assert_allclose(
        far.log_marginal_likelihood_, near.log_marginal_likelihood_, rtol=1e-13
    )
    test = GRID[:10] + 0.5
    if hasattr(near, "predict_proba"):
        got, want = far.predict_proba(test + shift), near.predict_proba(test)
    else:
        got, want = far.predict(test + shift, return_std=True), near.predict(test, return_std=True)
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize(
    "make",
    [
        lambda: PolynomialSketch(8, degree=2, random_state=0),
        lambda: PolynomialSketch(8, degree=2, sketch="gaussian", random_state=0),
        lambda: PolynomialSketch(8, degree=3, sketch="tensor_sketch", random_state=0),
        lambda: MaclaurinFeatures(8, random_state=0),
    ],
    ids=["sketch", "gaussian-sketch", "tensor-sketch", "maclaurin"],
)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_overflowing_product_features_are_refused(make, dtype):
    # Products of projections of rows far beyond the length scale overflow
    # (in the output's precision): a ValueError naming X instead of infinite
    # features, whichever row of a parallel transform overflows.
    est = make().fit(X)
    big = 1e300 if dtype == np.float64 else 1e30
    far = np.tile(X, (400, 1)).astype(dtype)
    far[2_345, 0] = big
    with pytest.raises(ValueError, match=r"`X`.*overflow"):
        est.transform(far)
    assert np.isfinite(est.transform(X.astype(dtype))).all()


@pytest.mark.parametrize(
    "make",
    [
        lambda v: RandomFourierFeatures(8, kernel_variance=v, random_state=0),
        lambda v: MaclaurinFeatures(8, kernel_variance=v, random_state=0),
    ],
    ids=["fourier", "maclaurin"],
)
@pytest.mark.parametrize(
    ("refused", "held", "message"),
    [
        (1e80, 1e70, r"`kernel_variance`.*float32"),
        (1e-90, 1e-70, r"`kernel_variance`.*smallest normal.*float32"),
    ],
    ids=["above", "below"],
)
def test_float32_features_beyond_float32_name_the_kernel_variance(make, refused, held, message):
    # Every feature carries sqrt(kernel_variance): 1e40 at 1e80, beyond
    # float32 whatever X, and 1e-45 at 1e-90, below float32's smallest normal
    # number (1.2e-38: the features would be subnormal or zero). The refusal
    # names the kernel variance, not X. float64 holds those features, and
    # float32 the ones at 1e70 and 1e-70.
    Xs = X.astype(np.float32)
    est = make(refused).fit(Xs)
    with pytest.raises(ValueError, match=message):
        est.transform(Xs)
    wide = est.transform(X)
    assert np.isfinite(wide).all() and np.abs(wide).max() > 0
    Z = make(held).fit(Xs).transform(Xs)
    assert np.isfinite(Z).all() and np.abs(Z).max() >= np.finfo(np.float32).tiny


@pytest.mark.parametrize("kernel", ["gaussian", "matern32"])
@pytest.mark.parametrize("scale", [1e-200, 1e-160, 1e160, 1e200])
def test_orthogonal_features_follow_extreme_length_scales(kernel, scale):
    # The orthogonal sampler took the norm of frequencies already divided by
    # the length scale, whose squares under- or overflow beyond 1e+-154:
    # every frequency was 0 at l = 1e200 (all features equal) and infinite
    # at l = 1e-160 (refused at transform). The features of (X s, l s) are
    # those of (X, l): each term of w.x moves by at most 5 roundings of
    # itself (1/l, w/l, X s and the products), the sums by d - 1 roundings of
    # sum |w_a x_a| each way, and the cosines and the scale add 2 eps.
    def make(ls):
        return RandomFourierFeatures(
            64, sampler="orthogonal", kernel=kernel, length_scale=ls, random_state=0
        )

    unit = make(1.0).fit(X)
    want = unit.transform(X)
    got = make(scale).fit(X * scale).transform(X * scale)
    reach = (np.abs(X) @ np.abs(unit.frequencies_).T).max()
    d, eps = X.shape[1], np.finfo(float).eps
    tol = np.sqrt(1 / 32) * ((d + 2) * reach + 4) * eps
    np.testing.assert_allclose(got, want, rtol=0, atol=tol)


def test_length_scales_beyond_the_maps_range_are_refused_by_name():
    # Frequencies z / l that overflow are refused at fit, naming the length
    # scale (the transform refused them, naming a `projection` argument that
    # does not exist).
    with pytest.raises(ValueError, match=r"`length_scale`.*frequencies.*overflow"):
        RandomFourierFeatures(8, length_scale=5e-324, random_state=0).fit(X)
    # The sketches form x / l by division where 1/l overflows: an x / l
    # beyond the float range is the features' overflow (X was called NaN or
    # infinite), and one within it gives the features.
    sk = PolynomialSketch(8, length_scale=1e-310, random_state=0).fit(X)
    with pytest.raises(ValueError, match=r"`X`.*features overflow"):
        sk.transform(X)
    # float32: 1/l = 2^130 overflows float32, x / l = X 2^20 does not (powers
    # of two: exactly the features of X 2^20 at length scale 1).
    Xs = X.astype(np.float32)
    sk = PolynomialSketch(8, length_scale=2.0**-130, random_state=0).fit(Xs)
    want = PolynomialSketch(8, random_state=0).fit(Xs).transform(Xs * np.float32(2.0**20))
    np.testing.assert_array_equal(sk.transform(Xs * np.float32(2.0**-110)), want)
    with pytest.raises(ValueError, match=r"`X`.*features overflow"):
        PolynomialSketch(8, length_scale=1e-39, random_state=0).fit(Xs).transform(Xs)


ALL_HYPER = ("length_scale", "kernel_variance", "noise_variance")
FITS = {
    "exact-gpr": lambda: ExactGPR(random_state=0),
    "exact-gpr-ard": lambda: ExactGPR(ard=True, random_state=0),
    "sparse-gpr": lambda: SparseGPR(n_inducing=20, random_state=0),
    "rf-gpr": lambda: RandomFeatureGPR(
        RandomFourierFeatures(256, random_state=0), optimize=ALL_HYPER, random_state=0
    ),
    "rf-gpr-ard": lambda: RandomFeatureGPR(
        RandomFourierFeatures(256, random_state=0), optimize=ALL_HYPER, ard=True, random_state=0
    ),
}


@pytest.mark.parametrize("fit", FITS, ids=list(FITS))
@pytest.mark.parametrize("exponent", [40, -40])
def test_fitted_hyperparameters_follow_the_units_of_y(fit, exponent):
    # Targets in units 2^40 (about 1e12) apart: an exact power of two, so
    # the data differ only in their exponent. The fits start on the
    # targets' scale (var(y); the random-feature fit profiles both
    # variances at its start) and their range is relative to it, so they
    # reach the same optimum; before, a range of e^+-40 in absolute units
    # refused the small targets (a variance of 2^-80 is e^-55) and the
    # random-feature fit with per-dimension length scales stopped at a
    # poor optimum near its unit kernel variance for the large ones.
    r = np.random.default_rng(3)
    x = r.uniform(-3, 3, (60, 2))
    y = np.sin(x[:, 0]) + 0.5 * np.cos(x[:, 1]) + 0.05 * r.standard_normal(60)
    c = 2.0**exponent
    base, scaled = FITS[fit]().fit(x, y), FITS[fit]().fit(x, c * y)
    # Tolerances are the optimizer's: it stops where the gradient is small,
    # which fixes the LML to far better than the hyperparameters.
    np.testing.assert_allclose(
        scaled.log_marginal_likelihood_ + len(y) * np.log(c),
        base.log_marginal_likelihood_,
        rtol=0,
        atol=1e-4,
    )
    np.testing.assert_allclose(scaled.length_scale_, base.length_scale_, rtol=1e-3)
    np.testing.assert_allclose(scaled.kernel_variance_ / c**2, base.kernel_variance_, rtol=1e-3)
    np.testing.assert_allclose(scaled.noise_variance_ / c**2, base.noise_variance_, rtol=1e-3)
    np.testing.assert_allclose(scaled.predict(x) / c, base.predict(x), rtol=0, atol=1e-4)


@pytest.mark.parametrize("fit", FITS, ids=list(FITS))
@pytest.mark.parametrize("scale", [1e21, 1e-21])
def test_fits_refuse_targets_beyond_the_float64_range_of_their_sums(fit, scale):
    # Variance 1e+-42 of the targets: outside 1e-40..1e40, where the sparse
    # bound's gradient overflowed (a NaN matrix) and the random-feature
    # fits returned a NaN or a meaningless marginal likelihood.
    with pytest.raises(rf.InvalidInputError, match=r"variance .* outside 1e-40\.\.1e40"):
        FITS[fit]().fit(X, scale * Y)
    # A fit with nothing to optimize is not refused.
    if fit.startswith("exact"):
        ExactGPR(length_scale=1.0, noise_variance=1e-3 * scale**2, optimize=()).fit(X, scale * Y)


@pytest.mark.parametrize(
    "make",
    [
        *FITS.values(),
        lambda: RandomFeatureGPR(RandomFourierFeatures(64, random_state=0)),
        lambda: LocalizedMaclaurinGPR(16, random_state=0),
        lambda: ExactGPR(optimize=()),
    ],
    ids=[*FITS, "rf-gpr-fixed", "localized", "exact-fixed"],
)
@pytest.mark.parametrize("scale", [1e160, 1e-155, 1e-200])
def test_targets_whose_variance_leaves_the_float64_range_are_refused(make, scale):
    # var(y) overflows (1e160), its default noise variance 0.1 var(y) is
    # subnormal, with an infinite reciprocal (1e-155), or it underflows to 0
    # (1e-200). The default variances come from var(y), so even a fit with
    # nothing to optimize is refused, naming y. Before, 1e-200 fitted
    # silently to the prior (the variance counted as that of constant
    # targets) and the others blamed kernel_variance, noise_variance or an
    # internal "matrix".
    with pytest.raises(rf.InvalidInputError, match=r"`y`: .*variance.*rescale y"):
        make().fit(X, scale * Y)


@pytest.mark.parametrize(
    "make",
    [
        lambda: ExactGPR(length_scale=1.0, noise_variance=0.1, optimize=()),
        lambda: RandomFeatureGPR(RandomFourierFeatures(64, random_state=0), noise_variance=0.1),
        lambda: SparseGPR(
            n_inducing=8, length_scale=1.0, kernel_variance=1.0, noise_variance=0.1, optimize=()
        ),
        lambda: SparseGPR(
            n_inducing=8,
            method="fitc",
            length_scale=1.0,
            kernel_variance=1.0,
            noise_variance=0.1,
            optimize=(),
        ),
    ],
    ids=["exact", "random-feature", "sparse-vfe", "sparse-fitc"],
)
@pytest.mark.parametrize("scale", [1e155, 1e300])
def test_fixed_fits_refuse_targets_whose_squares_overflow(make, scale):
    # Nothing is derived from var(y) here, but the likelihood's y^T K^-1 y
    # (or the statistics' sums of squares) overflows: the exact and sparse
    # GPs reported a NaN log marginal likelihood as fitted, and the
    # random-feature GP blamed its internal "`y statistics`".
    with pytest.raises(rf.InvalidInputError, match=r"`y`: .*overflow.*rescale y"):
        make().fit(X, scale * Y)
    # Large targets whose squares stay in range fit, with a finite likelihood.
    assert np.isfinite(make().fit(X, 1e100 * Y).log_marginal_likelihood_)


@pytest.mark.parametrize("fit", FITS, ids=list(FITS))
@pytest.mark.parametrize("only", [None, "length_scale", "noise_variance"])
def test_fits_refuse_constant_targets(fit, only):
    # After centering the residual is 0: the marginal likelihood grows
    # without bound as the variances shrink (or the length scale grows).
    # Before, every fit but the profiled one ended at the optimizer's range
    # (the noise variance at e^-40 of its start) and reported it as fitted.
    est = FITS[fit]()
    if only is not None:
        # ARD needs the length scales free: with the noise variance too.
        ard = fit.endswith("ard") and only != "length_scale"
        est.set_params(optimize=("length_scale", only) if ard else (only,))
    n = len(X)
    with pytest.raises(rf.InvalidInputError, match=rf"`y`.* {n} training target\(s\) are constant"):
        est.fit(X, np.full(n, 2.5))
    # Not constant: one target differs.
    y = np.full(n, 2.5)
    y[7] = 2.6
    assert np.isfinite(FITS[fit]().fit(X, y).log_marginal_likelihood_)
    # Without centering, only all-zero targets are constant.
    with pytest.raises(rf.InvalidInputError, match="are constant"):
        FITS[fit]().set_params(center_y=False).fit(X, np.zeros(n))
    # Fixed hyperparameters: a model, predicting the constant.
    fixed = FITS[fit]().set_params(optimize=(), ard=False).fit(X, np.full(n, 2.5))
    np.testing.assert_allclose(fixed.predict(X[:5]), 2.5, rtol=0, atol=1e-12)


@pytest.mark.parametrize("fit", FITS, ids=list(FITS))
@pytest.mark.parametrize("exponent", [540, -540])
def test_fitted_length_scales_follow_the_units_of_x_past_the_square_root_of_the_range(
    fit, exponent
):
    # Inputs in units 2^540 (about 1e163) apart, whose squared distances
    # overflow (or underflow) float64: the data's length scale (the median
    # pairwise distance, per column with ARD) is taken in units of the
    # inputs' magnitude, so the fits start, and end, where they do on the
    # unit inputs. Before, the start was infinite (ExactGPR refused the
    # inputs) or 0 (taken as 1), and the random-feature fits ended at the
    # targets' noise.
    r = np.random.default_rng(3)
    x = r.uniform(-3, 3, (60, 2))
    y = np.sin(x[:, 0]) + 0.5 * np.cos(x[:, 1]) + 0.05 * r.standard_normal(60)
    c = 2.0**exponent
    base, scaled = FITS[fit]().fit(x, y), FITS[fit]().fit(c * x, y)
    # Tolerances are the optimizer's, as for the units of y.
    np.testing.assert_allclose(
        scaled.log_marginal_likelihood_, base.log_marginal_likelihood_, rtol=0, atol=1e-4
    )
    np.testing.assert_allclose(scaled.length_scale_ / c, base.length_scale_, rtol=1e-3)
    np.testing.assert_allclose(scaled.noise_variance_, base.noise_variance_, rtol=1e-3)
    np.testing.assert_allclose(scaled.predict(c * x), base.predict(x), rtol=0, atol=1e-4)
