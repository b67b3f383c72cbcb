"""Property-based fuzzing of the public Python API.

Random shapes, dtypes (float32, float64), layouts (C, Fortran, strided) and
values (NaN, infinities, subnormals, +-1e300, +-1e-300, ordinary numbers)
and random parameters go into every public entry point; each call must
either raise one of the library's documented exceptions
(:class:`~randfeat_rs.InvalidInputError`, a ``ValueError``, or
:class:`~randfeat_rs.InvalidDtypeError`, a ``TypeError``) or return a finite
result of the documented shape and dtype. Nothing may crash the
interpreter or raise anything else.

``make test`` runs a short profile (``RANDFEAT_FUZZ_EXAMPLES``, default 20
examples per test); ``make fuzz`` runs 1,700 per test (11,900 cases).
"""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import randfeat_rs as rf
from randfeat_rs import (
    ExactGPR,
    LocalizedMaclaurinGPR,
    MaclaurinFeatures,
    NystroemFeatures,
    PolynomialSketch,
    RandomBinningFeatures,
    RandomFeatureGPR,
    RandomFourierFeatures,
    SparseGPR,
)

EXAMPLES = int(os.environ.get("RANDFEAT_FUZZ_EXAMPLES", "20"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=EXAMPLES <= 20,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
# The library's own errors subclass these, and scikit-learn's input
# validation raises them too.
DOCUMENTED = (ValueError, TypeError)

SPECIAL = [
    0.0,
    -0.0,
    np.nan,
    np.inf,
    -np.inf,
    5e-324,
    -5e-324,
    2.2e-308,
    1e-300,
    -1e-300,
    1e300,
    -1e300,
    1.0,
    -1.0,
]
VALUES = st.one_of(
    st.sampled_from(SPECIAL),
    st.floats(-10.0, 10.0),
    st.floats(-10.0, 10.0),
    st.floats(-10.0, 10.0),
)


def quiet():
    """A fresh floating-point error context for one call.

    scikit-learn's finiteness check sums the input, which warns on inf - inf
    before it raises its ValueError; the warning is not the library's. NumPy
    (2.4+) lets an ``errstate`` be entered only once, so each use needs its
    own; the ``with`` stays outside the ``try`` so that an error from the
    harness itself is never taken for a documented one.
    """
    return np.errstate(invalid="ignore", over="ignore")


KERNELS = ["gaussian", "laplacian", "matern12", "matern32", "matern52"]


@st.composite
def arrays(draw, n_rows=None, n_cols=None, dtype=None):
    """A 2-D array of fuzzed values, dtype and memory layout."""
    n = draw(st.integers(1, 7)) if n_rows is None else n_rows
    d = draw(st.integers(1, 4)) if n_cols is None else n_cols
    dtype = draw(st.sampled_from([np.float64, np.float32])) if dtype is None else dtype
    # Ordinary values, ordinary values at an extreme scale (all finite), or
    # any mix of special values.
    mode = draw(st.sampled_from(["ordinary", "scaled", "special"]))
    element = VALUES if mode == "special" else st.floats(-3.0, 3.0)
    values = np.array([draw(element) for _ in range(2 * n * d)], dtype=np.float64)
    if mode == "scaled":
        values *= draw(st.sampled_from([1e-300, 1e-150, 1e-30, 1e30, 1e150, 1e300]))
    with np.errstate(over="ignore"):
        base = values.astype(dtype).reshape(2 * n, d)
    layout = draw(st.sampled_from(["C", "F", "strided"]))
    if layout == "strided":
        return base[::2]
    base = base[:n]
    return np.asfortranarray(base) if layout == "F" else np.ascontiguousarray(base)


def _finite(out, shape, dtype):
    event("result checked")
    assert out.shape == shape, (out.shape, shape)
    assert out.dtype == dtype, (out.dtype, dtype)
    assert np.isfinite(out).all(), out


@FUZZ
@given(
    x=arrays(),
    data=st.data(),
    kernel=st.sampled_from(KERNELS),
    log_ls=st.floats(-300.0, 300.0),
)
def test_fuzz_kernel_matrix(x, data, kernel, log_ls):
    y = data.draw(arrays(n_cols=x.shape[1]))
    with quiet():
        try:
            k = rf.kernel_matrix(x, y, kernel=kernel, length_scale=10.0**log_ls)
        except DOCUMENTED as e:
            event(f"documented {type(e).__name__}")
            return
    _finite(k, (x.shape[0], y.shape[0]), np.float64)
    assert (k >= 0).all() and (k <= 1).all()


TRANSFORMERS = {
    "rff": lambda n, k, s: RandomFourierFeatures(n, kernel=k, random_state=s),
    "rff-structured": lambda n, k, s: RandomFourierFeatures(
        n, kernel=k, sampler="structured", random_state=s
    ),
    "sketch": lambda n, k, s: PolynomialSketch(n, degree=1 + s % 3, random_state=s),
    "sketch-gaussian": lambda n, k, s: PolynomialSketch(
        n, degree=1 + s % 3, sketch="gaussian", random_state=s
    ),
    "maclaurin": lambda n, k, s: MaclaurinFeatures(n, max_degree=4, random_state=s),
    "nystroem": lambda n, k, s: NystroemFeatures(n, kernel=k, random_state=s),
}


@FUZZ
@given(
    x=arrays(),
    data=st.data(),
    name=st.sampled_from(sorted(TRANSFORMERS)),
    n=st.integers(1, 12),
    kernel=st.sampled_from(KERNELS),
    seed=st.integers(0, 2**32 - 1),
)
def test_fuzz_dense_transformers(x, data, name, n, kernel, seed):
    xt = data.draw(arrays(n_cols=x.shape[1], dtype=x.dtype))
    est = TRANSFORMERS[name](n, kernel, seed)
    with quiet(), warnings.catch_warnings():
        # The structured sampler warns, by design, that it is biased for
        # fewer than 16 (padded) features; every input here has at most 4.
        warnings.filterwarnings(
            "ignore", message="sampler='structured' is noticeably biased", category=UserWarning
        )
        # The Maclaurin allocation warns, by design, when subsample pairs give
        # non-finite statistics: the Gaussian map centers X at its mean, so a
        # single row of 1e150 at length_scale=1 puts every pair out of range.
        warnings.filterwarnings(
            "ignore", message=".*non-finite Maclaurin statistics", category=RuntimeWarning
        )
        try:
            phi = est.fit(x).transform(xt)
        except DOCUMENTED as e:
            event(f"documented {type(e).__name__}")
            return
    _finite(phi, (xt.shape[0], len(est.get_feature_names_out())), x.dtype)


@FUZZ
@given(
    x=arrays(),
    data=st.data(),
    n=st.integers(1, 12),
    kernel=st.sampled_from(["gaussian", "laplacian", "matern12"]),
    seed=st.integers(0, 2**32 - 1),
)
def test_fuzz_binning(x, data, n, kernel, seed):
    xt = data.draw(arrays(n_cols=x.shape[1], dtype=x.dtype))
    est = RandomBinningFeatures(n, kernel=kernel, random_state=seed)
    with quiet():
        try:
            z = est.fit(x).transform(xt)
        except DOCUMENTED as e:
            event(f"documented {type(e).__name__}")
            return
    event("result checked")
    assert z.shape[0] == xt.shape[0] and z.dtype == x.dtype
    assert np.isfinite(z.data).all()


REGRESSORS = {
    "rf-gpr": lambda s: RandomFeatureGPR(RandomFourierFeatures(8), random_state=s),
    "rf-gpr-default": lambda s: RandomFeatureGPR(random_state=s),
    "exact-gpr": lambda s: ExactGPR(optimize=(), random_state=s),
    "sparse-gpr": lambda s: SparseGPR(n_inducing=4, optimize=(), random_state=s),
    "localized": lambda s: LocalizedMaclaurinGPR(8, random_state=s),
}


@FUZZ
@given(
    x=arrays(dtype=np.float64),
    data=st.data(),
    name=st.sampled_from(sorted(REGRESSORS)),
    seed=st.integers(0, 2**32 - 1),
)
def test_fuzz_regressors(x, data, name, seed):
    y = data.draw(arrays(n_rows=x.shape[0], n_cols=1, dtype=np.float64))[:, 0]
    xt = data.draw(arrays(n_cols=x.shape[1]))
    est = REGRESSORS[name](seed)
    with quiet():
        try:
            mean, std = est.fit(x, y).predict(xt, return_std=True)
        except DOCUMENTED as e:
            event(f"documented {type(e).__name__}")
            return
    _finite(mean, (xt.shape[0],), np.float64)
    _finite(std, (xt.shape[0],), np.float64)
    assert (std >= 0).all()


@FUZZ
@given(data=st.data(), n=st.integers(1, 7))
def test_fuzz_metrics(data, n):
    a, b, c, e = (data.draw(arrays(n_rows=n, n_cols=1))[:, 0] for _ in range(4))
    for f, args in [
        (rf.rmse, (a, b)),
        (rf.mean_nll, (a, b, c)),
        (rf.kl_divergence, (a, b, c, e)),
    ]:
        with quiet():
            try:
                v = f(*args)
            except DOCUMENTED as e:
                event(f"documented {type(e).__name__}")
                continue
        event("result checked")
        assert isinstance(v, float) and np.isfinite(v), (f.__name__, v)
    k1 = data.draw(arrays(n_rows=n, n_cols=n))
    k2 = data.draw(arrays(n_rows=n, n_cols=n))
    with quiet():
        try:
            v = rf.relative_frobenius_error(k1, k2)
        except DOCUMENTED as e:
            event(f"documented {type(e).__name__}")
            return
    event("result checked")
    assert isinstance(v, float) and np.isfinite(v) and v >= 0


@FUZZ
@given(
    data=st.data(),
    d=st.integers(1, 6),
    degree=st.integers(-2, 40),
    n=st.integers(-1, 64),
    sketch=st.sampled_from(["gaussian", "rademacher", "tensor_srht", "tensor_sketch"]),
    complex_weights=st.booleans(),
)
def test_fuzz_sketch_variance(data, d, degree, n, sketch, complex_weights):
    x = data.draw(arrays(n_rows=1, n_cols=d))[0]
    y = data.draw(arrays(n_rows=1, n_cols=d))[0]
    with quiet():
        try:
            v = rf.sketch_variance(
                x, y, degree=degree, n_components=n, sketch=sketch, complex_weights=complex_weights
            )
        except DOCUMENTED as e:
            event(f"documented {type(e).__name__}")
            return
    event("result checked")
    assert isinstance(v, float) and np.isfinite(v) and v >= 0


def _tame(a):
    """Finite values of moderate size (no subnormals), where a fit must work."""
    a = np.asarray(a, dtype=np.float64)
    small = (a != 0) & (np.abs(a) < 1e-100)
    return bool(np.isfinite(a).all() and (np.abs(a) <= 1e3).all() and not small.any())


@FUZZ
@given(
    x=arrays(),
    data=st.data(),
    n_components=st.integers(1, 12),
    length_scale=st.sampled_from(["scale", 1e-300, 1e-3, 0.3, 1.0, 5.0, 1e300]),
    noise=st.sampled_from([None, 1e-300, 1e-8, 0.01, 1.0, 1e300]),
    threshold=st.sampled_from([None, "auto", 1e-300, 0.01, 0.25, 1.0, 4.0, 1e300]),
    n_clusters=st.sampled_from([None, 1, 2, 5]),
    centers=st.sampled_from(["clusters", "test"]),
    sketch=st.sampled_from(["tensor_srht", "gaussian", "rademacher"]),
    seed=st.integers(0, 2**32 - 1),
)
def test_fuzz_localized_predict(
    x, data, n_components, length_scale, noise, threshold, n_clusters, centers, sketch, seed
):
    # The localized GP's prediction paths: nearest centroid (any threshold,
    # cluster count or "auto") and a GP at every test point; test inputs of
    # either dtype and any layout, sometimes with the wrong number of columns.
    y = data.draw(arrays(n_rows=x.shape[0], n_cols=1, dtype=np.float64))[:, 0]
    cols = data.draw(st.sampled_from([x.shape[1], x.shape[1], x.shape[1] + 1]))
    xt = data.draw(arrays(n_cols=cols))
    est = LocalizedMaclaurinGPR(
        n_components,
        length_scale=length_scale,
        noise_variance=noise,
        threshold=threshold,
        n_clusters=n_clusters,
        centers=centers,
        sketch=sketch,
        max_degree=4,
        random_state=seed,
    )
    # (The optimized allocation refuses a single row.)
    tame = (
        x.shape[0] >= 2
        and _tame(x)
        and _tame(y)
        and _tame(xt)
        and cols == x.shape[1]
        and length_scale != 1e-300
        and noise not in (1e-300, 1e300)
        and threshold != 1e300
    )
    with quiet():
        try:
            est.fit(x, y)
            mean, std = est.predict(xt, return_std=True)
            noisy_mean, noisy_std = est.predict_noisy(xt)
        except DOCUMENTED as e:
            event(f"documented {type(e).__name__}")
            assert not tame, f"a fit or prediction of ordinary data failed: {e!r}"
            return
    for out in (mean, std, noisy_mean, noisy_std):
        _finite(out, (xt.shape[0],), np.float64)
    assert (std >= 0).all() and (noisy_std >= std).all()
    np.testing.assert_array_equal(noisy_mean, mean)


@FUZZ
@given(data=st.data(), k=st.integers(0, 6), normalized=st.booleans(), near_max=st.booleans())
def test_fuzz_fwht(data, k, normalized, near_max):
    """The transform passes NaN and infinities through (it is not a model);
    a finite input's normalized transform, which keeps the norm, is finite
    wherever the exact result is below the dtype's maximum, and equals it
    to the rounding of ``log2 n`` stages."""
    n = 2**k
    x = data.draw(arrays(n_cols=n))
    if near_max:
        # Entries near the float range, where the unnormalized sums overflow.
        big = np.finfo(x.dtype).max / data.draw(st.sampled_from([1.5, 3.0, 64.0]))
        x = np.where(np.abs(x) > 1.0, np.sign(x) * big, x).astype(x.dtype)
    with quiet():
        try:
            out = rf.fwht(x, normalized=normalized)
        except DOCUMENTED as e:
            event(f"documented {type(e).__name__}")
            return
    assert out.shape == x.shape and out.dtype == x.dtype
    if not (normalized and np.isfinite(x).all()):
        return
    event("result checked")
    h = np.array([[(-1) ** bin(i & j).count("1") for j in range(n)] for i in range(n)])
    exact = (x.astype(np.longdouble) @ h.T.astype(np.longdouble)) / np.sqrt(np.longdouble(n))
    fmax = np.longdouble(np.finfo(x.dtype).max)
    representable = np.abs(exact) < fmax * (1 - 1e-5)
    assert np.isfinite(out[representable]).all(), (x, out)
    scale = np.sqrt((x.astype(np.longdouble) ** 2).sum(axis=1, keepdims=True))
    err = np.abs(out.astype(np.longdouble) - exact) / np.maximum(scale, np.finfo(x.dtype).tiny)
    eps = np.finfo(x.dtype).eps
    assert (err[representable & np.isfinite(out)] <= 4 * (k + 1) * eps).all(), (x, out)


def test_fuzzing_regressions():
    """The exact inputs fuzzing found, each once (the Rust unit tests cover more)."""
    # ln(var_q / var_p) overflowed: 0.5 * [ln(1e300 / 1e-12) - 1], var_p floored.
    v = rf.kl_divergence([0.0], [0.0], [0.0], [1e300])
    assert v == pytest.approx(0.5 * (312 * np.log(10) - 1), rel=1e-12)
    # The squares of 1e300 entries overflowed to NaN.
    k = np.array([[1e300, 0.0], [0.0, 1e300]])
    kh = np.array([[1e300, 1e299], [1e299, 1e300]])
    assert rf.relative_frobenius_error(kh, k) == pytest.approx(np.sqrt(0.01), rel=1e-14)
    assert rf.rmse([0.0] * 6, [0.0] * 5 + [1e300]) == pytest.approx(1e300 / np.sqrt(6))
    # 0 * inf in |x|^2 |y|^2 for a zero x; a variance of (1e150)^4 is refused.
    for sketch in ["gaussian", "rademacher", "tensor_srht", "tensor_sketch"]:
        v = rf.sketch_variance(
            [0.0, 0.0, 0.0], [0.0, 0.0, 1e300], degree=2, n_components=3, sketch=sketch
        )
        assert v == 0.0
    with pytest.raises(rf.InvalidInputError, match="overflow"):
        rf.sketch_variance(
            [0.0, 0.0, 1.0], [0.0, 0.0, 1e150], degree=2, n_components=1, sketch="gaussian"
        )
    # Rounding left -2.7e-20.
    v = rf.sketch_variance(
        [0.5968072426887456],
        [-0.19743264543855576],
        degree=2,
        n_components=2,
        sketch="tensor_srht",
        complex_weights=True,
    )
    assert v == 0.0
