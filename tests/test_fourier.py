"""Random Fourier features and Nystroem: the checks of docs/math/fourier.rst,
the seeds' claims (003 moment matching, ORF), the estimator contract, bad input.

The single-pair statistical oracles of docs/math/fourier.rst, "Variances" (means
and closed-form variances, antithetic, ORF, SORF, moment matching, kernel
samplers) also run in Rust (src/fourier/tests.rs) with 20,000 replicates; here
they are checked through the Python API on fewer replicates.
"""

from __future__ import annotations

import pickle
import warnings

import numpy as np
import pytest
import scipy.special
from scipy.stats import qmc
from sklearn.base import clone
from sklearn.kernel_approximation import Nystroem
from sklearn.linear_model import Ridge
from sklearn.pipeline import make_pipeline
from sklearn.utils.estimator_checks import parametrize_with_checks

import randfeat_rs as rf
from randfeat_rs import NystroemFeatures, RandomFourierFeatures, _core

XP = np.array([[0.3, -0.2, 0.5], [-0.1, 0.4, 0.2]])
L = 0.8
K = 0.6209141198
KERNELS = ["gaussian", "laplacian", "matern12", "matern32", "matern52"]
DTYPES = [np.float64, np.float32]


def _estimates(t, **kw):
    out = np.empty(t)
    for i in range(t):
        phi = RandomFourierFeatures(random_state=i, length_scale=L, **kw).fit_transform(XP)
        out[i] = phi[0] @ phi[1]
    return out


def _check_mean_var(v, mean, var):
    """Mean within 4 standard errors; variance within 4 standard errors of
    the sample variance (estimated from the fourth central moment)."""
    t = len(v)
    s2 = v.var(ddof=1)
    se_mean = np.sqrt(s2 / t)
    m4 = ((v - v.mean()) ** 4).mean()
    se_var = np.sqrt((m4 - s2**2) / t)
    assert abs(v.mean() - mean) < 4 * se_mean, (v.mean(), mean, se_mean)
    assert abs(s2 - var) < 4 * se_var, (s2, var, se_var)


def test_kernel_oracle():
    k = rf.kernel_matrix(XP, length_scale=L)
    assert abs(k[0, 1] - K) < 1e-10


def test_closed_form_variances_through_python():
    k2 = K * K
    v = _estimates(2000, n_components=8, variant="cos_bias")
    _check_mean_var(v, K, (1 + 0.5 * k2 * k2 - k2) / 8)
    assert abs((1 + 0.5 * k2 * k2 - k2) / 8 - 0.0860980026) < 1e-9
    v = _estimates(2000, n_components=8, variant="cos_sin")
    _check_mean_var(v, K, (1 - k2) ** 2 / 8)
    assert abs((1 - k2) ** 2 / 8 - 0.0471960053) < 1e-9
    v = _estimates(2000, n_components=8, sampler="antithetic")
    _check_mean_var(v, K, (1 - k2) ** 2 / 4)
    assert abs((1 - k2) ** 2 / 4 - 0.0943920105) < 1e-9
    assert abs((1 - k2) / 4 - 0.1536164140) < 1e-9  # complex variance, checked in Rust


# Per-dimension length scales (docs/math/fourier.rst, "Length scales per
# dimension").
LS = np.array([0.8, 1.6, 0.5])


def _ard_kernel(kernel, x, y, ls):
    """The kernel of per-dimension length scales (checked against NumPy below)."""
    return rf.kernel_matrix(x, y, kernel=kernel, length_scale=ls)


def _profile(kernel, r):
    """The normalized kernel of the scaled distance r (docs/math/fourier.rst)."""
    if kernel == "gaussian":
        return np.exp(-(r**2) / 2)
    if kernel in ("laplacian", "matern12"):
        return np.exp(-r)
    if kernel == "matern32":
        return (1 + np.sqrt(3) * r) * np.exp(-np.sqrt(3) * r)
    return (1 + np.sqrt(5) * r + 5 * r**2 / 3) * np.exp(-np.sqrt(5) * r)


@pytest.mark.parametrize("kernel", KERNELS)
def test_kernel_matrix_takes_one_length_scale_per_dimension(kernel):
    rng = np.random.default_rng(4)
    x, y = rng.standard_normal((7, 3)), rng.standard_normal((5, 3))
    delta = (x[:, None, :] - y[None, :, :]) / LS
    r = np.abs(delta).sum(-1) if kernel == "laplacian" else np.sqrt((delta**2).sum(-1))
    got = rf.kernel_matrix(x, y, kernel=kernel, length_scale=LS)
    np.testing.assert_allclose(got, _profile(kernel, r), rtol=1e-13, atol=0)
    # Equal values are the one length scale.
    np.testing.assert_allclose(
        rf.kernel_matrix(x, y, kernel=kernel, length_scale=[0.9] * 3),
        rf.kernel_matrix(x, y, kernel=kernel, length_scale=0.9),
        rtol=1e-13,
        atol=0,
    )
    for bad, match in [([1.0, 2.0], r"one per input dimension \(3\), got 2"), ([1, 0, 1], "> 0")]:
        with pytest.raises(rf.InvalidInputError, match=f"length_scale.*{match}"):
            rf.kernel_matrix(x, y, kernel=kernel, length_scale=bad)


@pytest.mark.parametrize(
    ("sampler", "kernel"),
    [
        ("mc", "gaussian"),
        ("mc", "laplacian"),
        ("mc", "matern32"),
        ("antithetic", "matern52"),
        ("orthogonal", "gaussian"),
        ("orthogonal", "matern12"),
        ("structured", "gaussian"),
        ("moment_matching", "gaussian"),
        ("qmc", "gaussian"),
        ("qmc", "laplacian"),
    ],
)
@pytest.mark.parametrize("variant", ["cos_sin", "cos_bias"])
def test_per_dimension_length_scales_rescale_the_unit_draw(sampler, kernel, variant):
    x = np.random.default_rng(3).standard_normal((40, 3))
    kw = {"kernel": kernel, "sampler": sampler, "variant": variant, "random_state": 5}
    with warnings.catch_warnings():
        # The structured sampler's warning for d' < 16 (tested above).
        warnings.simplefilter("ignore", UserWarning)
        ard = RandomFourierFeatures(64, length_scale=LS, **kw).fit(x)
        unit = RandomFourierFeatures(64, length_scale=1.0, **kw).fit(x)
    # Column a of the unit draw divided by l_a (a multiplication by 1 / l_a:
    # one rounding apart); the phases are the unit draw's.
    np.testing.assert_allclose(ard.frequencies_, unit.frequencies_ / LS, rtol=4e-16, atol=0)
    if variant == "cos_bias":
        np.testing.assert_array_equal(ard.phases_, unit.phases_)
    # The structured draw is formed into dense frequencies.
    assert ard.sorf_signs_ is None
    # The projections agree to a few roundings of their terms (each term's
    # factors are one or two roundings apart, and the sums may be taken in
    # another order): 8 eps sum_a |w_ja x_a / l_a| (plus the phase) moves a
    # cosine or sine by at most that times the column scale.
    eps = np.finfo(np.float64).eps
    bound = np.abs(x / LS) @ np.abs(unit.frequencies_).T + 2 * np.pi
    tol = ard.scale_ * 8 * eps * (bound if variant == "cos_bias" else np.hstack([bound, bound]))
    assert np.all(np.abs(ard.transform(x) - unit.transform(x / LS)) <= tol)


def test_per_dimension_length_scales_estimate_the_ard_kernel():
    # The closed-form mean and variance of docs/math/fourier.rst, "Variances",
    # at k of the rescaled pair.
    k = _ard_kernel("gaussian", XP[:1], XP[1:], LS)[0, 0]
    out = np.empty(2000)
    for i in range(out.size):
        phi = RandomFourierFeatures(8, length_scale=LS, random_state=i).fit_transform(XP)
        out[i] = phi[0] @ phi[1]
    _check_mean_var(out, k, (1 - k * k) ** 2 / 8)


@pytest.mark.parametrize("kernel", KERNELS)
def test_per_dimension_length_scales_approach_the_ard_kernel_matrix(kernel):
    x = np.random.default_rng(1).standard_normal((60, 3))
    k = _ard_kernel(kernel, x, x, LS)
    # The isotropic kernel at the mean length scale is another kernel: the
    # features must approach k, not it.
    other = rf.kernel_matrix(x, kernel=kernel, length_scale=float(LS.mean()))
    assert np.linalg.norm(other - k) > 3.0

    def err(n):
        return np.mean(
            [
                np.linalg.norm(p @ p.T - k)
                for p in (
                    RandomFourierFeatures(
                        n, kernel=kernel, length_scale=LS, random_state=s
                    ).fit_transform(x)
                    for s in range(4)
                )
            ]
        )

    # Monte Carlo error scales like 1/sqrt(D): a factor 8 expected, 3 asked.
    assert err(8192) < err(128) / 3


def test_one_length_scale_in_a_list_is_the_scalar():
    x = np.random.default_rng(2).standard_normal((10, 3))
    a = RandomFourierFeatures(32, length_scale=[0.7], random_state=0).fit(x)
    b = RandomFourierFeatures(32, length_scale=0.7, random_state=0).fit(x)
    np.testing.assert_array_equal(a.frequencies_, b.frequencies_)
    # Equal values per dimension: the same kernel, the frequencies to rounding.
    c = RandomFourierFeatures(32, length_scale=[0.7] * 3, random_state=0).fit(x)
    np.testing.assert_allclose(c.frequencies_, b.frequencies_, rtol=4e-16, atol=0)


@pytest.mark.parametrize(
    ("length_scale", "match"),
    [
        ([1.0, 2.0], r"length_scale.*one per input dimension \(3\), got 2"),
        ([1.0, -1.0, 1.0], "length_scale.*> 0"),
        ([1.0, 0.0, 1.0], "length_scale.*> 0"),
        ([1.0, np.nan, 1.0], "length_scale.*> 0"),
        ([1.0, np.inf, 1.0], "length_scale.*> 0"),
        ([[1.0, 2.0, 3.0]], "length_scale.*1-D"),
        ([], r"length_scale.*got 0"),
    ],
)
def test_bad_per_dimension_length_scales(length_scale, match):
    with pytest.raises(rf.InvalidInputError, match=match):
        RandomFourierFeatures(8, length_scale=length_scale).fit(np.zeros((3, 3)))
    with pytest.raises(TypeError, match="length_scale"):
        RandomFourierFeatures(8, length_scale=["a", "b", "c"]).fit(np.zeros((3, 3)))


def test_antithetic_identity():
    rff = RandomFourierFeatures(8, sampler="antithetic", length_scale=L, random_state=3).fit(XP)
    w = rff.frequencies_
    assert w.shape == (4, 3)
    np.testing.assert_array_equal(w[2:], -w[:2])
    phi = rff.transform(XP)
    half = np.cos(w[:2] @ (XP[0] - XP[1])).mean()
    assert abs(phi[0] @ phi[1] - half) < 1e-14


def test_orthogonal_blocks():
    rff = RandomFourierFeatures(40, sampler="orthogonal", random_state=0).fit(np.zeros((2, 7)))
    w = rff.frequencies_
    for b in range(0, 20, 7):
        g = w[b : b + 7] @ w[b : b + 7].T
        np.testing.assert_allclose(g - np.diag(np.diag(g)), 0, atol=1e-12)


@pytest.mark.parametrize("d", [16, 20])
def test_structured_blocks(d):
    ell = 1.3
    rff = RandomFourierFeatures(2 * 64, sampler="structured", length_scale=ell, random_state=0).fit(
        np.zeros((1, d))
    )
    dp = 1 << (d - 1).bit_length()
    assert rff.sorf_signs_.shape == (3 * (64 // dp + (64 % dp > 0)), dp)
    assert set(np.unique(rff.sorf_signs_)) == {-1.0, 1.0}
    w = rff.frequencies_
    if d == dp:
        for b in range(0, 64, dp):
            np.testing.assert_allclose(
                w[b : b + dp] @ w[b : b + dp].T, dp / ell**2 * np.eye(dp), atol=1e-10
            )
    x = np.random.default_rng(0).standard_normal((9, d))
    dense = np.hstack([np.cos(x @ w.T), np.sin(x @ w.T)]) / np.sqrt(64)
    np.testing.assert_allclose(rff.transform(x), dense, atol=1e-12)


def test_structured_small_d_warns():
    with pytest.warns(UserWarning, match="biased"):
        RandomFourierFeatures(16, sampler="structured").fit(np.zeros((1, 3)))


def test_moment_matching_exact_moments():
    ell = 0.6
    x = np.zeros((1, 20))
    rff = RandomFourierFeatures(2 * 64, sampler="moment_matching", length_scale=ell, random_state=1)
    w = rff.fit(x).frequencies_
    np.testing.assert_allclose(w.mean(0), 0, atol=1e-10)
    np.testing.assert_allclose(w.T @ w / 64, np.eye(20) / ell**2, atol=1e-10)


def test_moment_matching_too_few_frequencies():
    with pytest.raises(ValueError, match="more frequencies than features"):
        RandomFourierFeatures(40, sampler="moment_matching").fit(np.zeros((2, 20)))
    with pytest.raises(ValueError, match=r"n_components >= 42"):
        RandomFourierFeatures(41, sampler="moment_matching").fit(np.zeros((2, 20)))
    RandomFourierFeatures(42, sampler="moment_matching").fit(np.zeros((2, 20)))


def test_sobol_matches_scipy_unscrambled():
    oracle = [
        (0, 0),
        (0.5, 0.5),
        (0.75, 0.25),
        (0.25, 0.75),
        (0.375, 0.375),
        (0.875, 0.875),
        (0.625, 0.125),
        (0.125, 0.625),
    ]
    np.testing.assert_array_equal(_core._sobol_points(8, 2), oracle)
    for dim in [1, 5, 37, 300, 1025]:
        want = qmc.Sobol(dim, scramble=False).random(256)
        np.testing.assert_array_equal(_core._sobol_points(256, dim), want)
    with pytest.raises(ValueError, match="1025"):
        _core._sobol_points(4, 1026)


def test_inverse_normal_cdf():
    got = _core._inverse_normal_cdf(np.array([0.975, 0.25, 1e-10]))
    np.testing.assert_allclose(
        got, [1.959963984540054, -0.6744897501960817, -6.361340902404056], rtol=1e-15
    )
    p = np.concatenate([np.linspace(1e-6, 1 - 1e-6, 2001), np.logspace(-300, -7, 50)])
    np.testing.assert_allclose(_core._inverse_normal_cdf(p), scipy.special.ndtri(p), rtol=1e-14)


def test_qmc_sampler_marginals_and_warning():
    rff = RandomFourierFeatures(2 * 1024, sampler="qmc", random_state=0).fit(np.zeros((1, 4)))
    w = rff.frequencies_
    # A scrambled Sobol net: each 1-D projection puts one point in each of
    # the 1024 equiprobable normal cells.
    cells = np.floor(scipy.special.ndtr(w) * 1024).astype(int)
    for j in range(4):
        assert len(np.unique(cells[:, j])) == 1024
    with pytest.warns(UserWarning, match="power-of-two"):
        RandomFourierFeatures(2 * 100, sampler="qmc").fit(np.zeros((1, 4)))
    b = RandomFourierFeatures(64, sampler="qmc", variant="cos_bias", random_state=0).fit(
        np.zeros((1, 4))
    )
    assert b.phases_.shape == (64,) and np.all((b.phases_ > 0) & (b.phases_ < 2 * np.pi))


# --- the seeds' claims (003 LR500 setup, yacht) --------------------------


def _bandwidth(x):
    """Average distance to the 10th nearest neighbour (003)."""
    sq = (x**2).sum(1)
    d2 = np.maximum(sq[:, None] + sq[None] - 2 * x @ x.T, 0)
    return float(np.sqrt(np.sort(d2, axis=1)[:, 10]).mean())


def _gram_errors(x, ell, samplers, sizes, seeds):
    k = rf.kernel_matrix(x, length_scale=ell)
    kn = np.linalg.norm(k)
    out = {}
    for s in samplers:
        for n in sizes:
            errs = []
            for seed in seeds:
                phi = RandomFourierFeatures(n, sampler=s, length_scale=ell, random_state=seed)
                p = phi.fit_transform(x)
                errs.append(np.linalg.norm(p @ p.T - k) / kn)
            out[s, n] = float(np.mean(errs))
    return out


def _report(name, errs, sizes):
    print(f"\n{name}: relative Frobenius Gram error, mean over seeds")
    for n in sizes:
        row = ", ".join(f"{s} {errs[s, n]:.4f}" for s in ("mc", "orthogonal", "moment_matching"))
        print(f"  D = {n}: {row}")


def test_seed_claims_lr500():
    """003: on LR500 (500-d correlated Gaussian, bandwidth = mean 10-NN
    distance) moment matching beats MC; ORF too (000/ORF literature)."""
    rng = np.random.default_rng(500)
    a = rng.standard_normal((500, 500))
    corr = a @ a.T
    dsd = np.sqrt(np.diag(corr))
    corr = corr / dsd[:, None] / dsd[None]
    x = rng.multivariate_normal(np.zeros(500), corr, size=600, method="cholesky")
    ell = _bandwidth(x)
    sizes = (1024, 2048)
    errs = _gram_errors(x, ell, ("mc", "orthogonal", "moment_matching"), sizes, range(5))
    _report(f"LR500-style (N = 600, d = 500, l = {ell:.2f})", errs, sizes)
    for n in sizes:
        assert errs["moment_matching", n] < errs["mc", n]
        assert errs["orthogonal", n] < errs["mc", n]


def test_seed_claims_yacht(yacht):
    x, _ = yacht
    ell = _bandwidth(x)
    sizes = (1024, 2048)
    errs = _gram_errors(x, ell, ("mc", "orthogonal", "moment_matching"), sizes, range(5))
    _report(f"yacht (N = 308, d = 6, standardized, l = {ell:.2f})", errs, sizes)
    for n in sizes:
        assert errs["moment_matching", n] < errs["mc", n]
        assert errs["orthogonal", n] < errs["mc", n]


@pytest.mark.parametrize("kernel", KERNELS)
def test_each_kernel_gram_error_falls_with_d(kernel):
    x = np.random.default_rng(1).standard_normal((80, 4))
    k = rf.kernel_matrix(x, kernel=kernel, length_scale=2.0)

    def err(n):
        return np.mean(
            [
                np.linalg.norm(p @ p.T - k)
                for p in (
                    RandomFourierFeatures(
                        n, kernel=kernel, length_scale=2.0, random_state=s
                    ).fit_transform(x)
                    for s in range(4)
                )
            ]
        )

    # Monte Carlo error scales like 1/sqrt(D): a factor 8 expected, 3 asked.
    assert err(8192) < err(128) / 3


def test_kernel_variance_scales_features():
    a = RandomFourierFeatures(64, random_state=0).fit_transform(XP)
    b = RandomFourierFeatures(64, kernel_variance=4.0, random_state=0).fit_transform(XP)
    np.testing.assert_allclose(b, 2 * a, rtol=1e-15)


@pytest.mark.parametrize("kernel", KERNELS)
def test_nystroem_all_points_is_exact(kernel):
    x = np.random.default_rng(2).standard_normal((60, 3))
    ny = NystroemFeatures(100, kernel=kernel, length_scale=1.5, random_state=0).fit(x)
    assert ny.n_components_ == 60 and ny.components_.shape == (60, 3)
    phi = ny.transform(x)
    k = rf.kernel_matrix(x, kernel=kernel, length_scale=1.5)
    np.testing.assert_allclose(phi @ phi.T, k, atol=1e-8)


@pytest.mark.parametrize("kernel", KERNELS)
def test_nystroem_per_dimension_length_scales(kernel):
    """One length scale per dimension: the map of the rescaled inputs
    ``(x - c) / l`` at length scale 1 (the same bits, with the division
    computed as the kernels compute it, a product with ``1 / l``; ``c`` the
    midrange of the landmarks), exact with every row a landmark against the
    anisotropic kernel matrix; float32 inputs as float64 ones."""
    x = np.random.default_rng(4).standard_normal((40, 3))
    ls = np.array([0.5, 2.0, 1.3])
    ny = NystroemFeatures(15, kernel=kernel, length_scale=ls, random_state=0).fit(x)
    z = ny.components_
    c = z.min(axis=0) / 2 + z.max(axis=0) / 2
    scaled = (x - c) * (1 / ls)
    unit = NystroemFeatures(15, kernel=kernel, length_scale=1.0, random_state=0).fit(scaled)
    np.testing.assert_array_equal(ny.component_indices_, unit.component_indices_)
    np.testing.assert_array_equal(ny.transform(x), unit.transform(scaled))
    np.testing.assert_array_equal(ny.components_, x[ny.component_indices_])
    full = NystroemFeatures(40, kernel=kernel, length_scale=ls, random_state=0).fit(x)
    phi = full.transform(x)
    k = rf.kernel_matrix(x, kernel=kernel, length_scale=ls)
    np.testing.assert_allclose(phi @ phi.T, k, atol=1e-8)
    f32 = ny.transform(x.astype(np.float32))
    assert f32.dtype == np.float32
    np.testing.assert_allclose(
        f32, ny.transform(x.astype(np.float32).astype(np.float64)), rtol=1e-6, atol=1e-6
    )
    refit = clone(ny).fit(x)
    np.testing.assert_array_equal(refit.transform(x), ny.transform(x))
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(ny)).transform(x), ny.transform(x))
    with pytest.raises(ValueError, match=r"`length_scale`.*one per input dimension \(3\), got 2"):
        NystroemFeatures(5, length_scale=[1.0, 2.0]).fit(x)
    with pytest.raises(ValueError, match="length_scale"):
        NystroemFeatures(5, length_scale=[1.0, 0.0, 2.0]).fit(x)


def test_nystroem_agrees_with_sklearn_gram():
    x = np.random.default_rng(3).standard_normal((200, 5))
    ours = NystroemFeatures(50, length_scale=2.0, random_state=0).fit(x)
    theirs = Nystroem(kernel="rbf", gamma=1 / 8, n_components=50)
    theirs.fit(x[ours.component_indices_])  # same landmarks, all 50 of them
    np.testing.assert_allclose(
        ours.transform(x) @ ours.transform(x).T,
        theirs.transform(x) @ theirs.transform(x).T,
        atol=1e-8,
    )


# --- estimator contract -------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "sampler", ["mc", "antithetic", "orthogonal", "structured", "moment_matching", "qmc"]
)
@pytest.mark.parametrize("variant", ["cos_sin", "cos_bias"])
def test_fitted_attributes_shapes_and_dtypes(dtype, sampler, variant):
    # Pickling, refitting and thread counts: test_common.py.
    x = np.random.default_rng(4).standard_normal((300, 16)).astype(dtype)
    rff = RandomFourierFeatures(256, sampler=sampler, variant=variant, random_state=5).fit(x)
    m = 128 if variant == "cos_sin" else 256
    assert rff.frequencies_.shape == (m, 16) and rff.frequencies_.dtype == np.float64
    assert rff.n_frequencies_ == m
    assert (rff.phases_ is None) == (variant == "cos_sin")
    assert (rff.sorf_signs_ is None) == (sampler != "structured")
    phi = rff.transform(x)
    assert phi.shape == (300, 256) and phi.dtype == dtype
    ref = rff.transform(x.astype(np.float64))
    np.testing.assert_allclose(phi, ref, atol=1e-5 if dtype == np.float32 else 0)


@pytest.mark.parametrize("sampler", ["mc", "orthogonal", "qmc"])
def test_one_cos_sin_component_is_the_cos_bias_feature(sampler):
    """docs/math/fourier.rst, "Edge cases and cost": D = 1 has no cos/sin pair."""
    kw = {"sampler": sampler, "length_scale": L, "random_state": 3}
    one = RandomFourierFeatures(1, **kw).fit(XP)
    ref = RandomFourierFeatures(1, variant="cos_bias", **kw).fit(XP)
    assert one.n_frequencies_ == 1 and one.phases_.shape == (1,)
    np.testing.assert_array_equal(one.frequencies_, ref.frequencies_)
    np.testing.assert_array_equal(one.transform(XP), ref.transform(XP))
    assert one.transform(XP).shape == (2, 1)


def test_one_cos_sin_component_is_unbiased():
    """Mean k and the cos_bias variance 1 + k^4 / 2 - k^2 at D = 1."""
    v = _estimates(4000, n_components=1)
    _check_mean_var(v, K, 1 + K**4 / 2 - K**2)


def test_odd_n_components_cos_sin_has_zero_column():
    phi = RandomFourierFeatures(9, random_state=0).fit_transform(XP)
    assert phi.shape == (2, 9)
    np.testing.assert_array_equal(phi[:, 8], 0)


@parametrize_with_checks(
    [
        RandomFourierFeatures(),
        RandomFourierFeatures(64, sampler="orthogonal", variant="cos_bias", kernel="matern52"),
        # The checks set n_components = 1, which the antithetic sampler (pairs
        # w, -w) cannot fill; its cos_sin path is covered by the oracles above.
        RandomFourierFeatures(64, sampler="qmc", kernel="laplacian"),
        NystroemFeatures(),
    ]
)
def test_sklearn_compatible(estimator, check):
    check(estimator)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"length_scale": 0.0}, "length_scale"),
        ({"length_scale": -1.0}, "length_scale"),
        ({"kernel_variance": 0.0}, "kernel_variance"),
        ({"n_components": 0}, "n_components"),
        ({"n_components": 0, "variant": "cos_bias"}, "n_components"),
        ({"kernel": "rbf"}, "kernel"),
        ({"sampler": "sobol"}, "sampler"),
        ({"variant": "cos"}, "variant"),
        ({"n_components": 6, "sampler": "antithetic"}, "even number"),
        ({"sampler": "structured", "kernel": "laplacian"}, "gaussian"),
        ({"sampler": "moment_matching", "kernel": "matern32"}, "gaussian"),
        ({"sampler": "qmc", "kernel": "matern12"}, "qmc"),
        ({"sampler": "orthogonal", "kernel": "laplacian"}, "orthogonal.*matern52"),
    ],
)
def test_bad_parameters(kwargs, match):
    with pytest.raises(ValueError, match=match):
        RandomFourierFeatures(**kwargs).fit(np.zeros((3, 2)))


def test_orthogonal_sampler_refuses_the_laplacian():
    """ORF needs a radially symmetric spectral density (docs/math/fourier.rst)."""
    rff = RandomFourierFeatures(64, sampler="orthogonal", kernel="laplacian")
    with pytest.raises(rf.InvalidInputError, match='supports kernels "gaussian"'):
        rff.fit(np.zeros((3, 2)))


@pytest.mark.parametrize("kernel", ["gaussian", "matern12", "matern32", "matern52"])
def test_orthogonal_sampler_takes_the_radial_kernels(kernel):
    rff = RandomFourierFeatures(64, sampler="orthogonal", kernel=kernel, random_state=0)
    assert rff.fit(np.zeros((3, 2))).frequencies_.shape == (32, 2)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_kernel_matrix_refuses_non_finite_values(bad):
    x = np.zeros((3, 2))
    x[1, 0] = bad
    with pytest.raises(rf.InvalidInputError, match="`X` contains NaN or infinite"):
        rf.kernel_matrix(x)
    with pytest.raises(rf.InvalidInputError, match="`Y` contains NaN or infinite"):
        rf.kernel_matrix(np.zeros((2, 2)), x, kernel="laplacian")


def test_kernel_matrix_refuses_an_output_beyond_memory():
    # 2**22 rows: a 2**22 x 2**22 float64 output, 128 TiB, refused before
    # anything is allocated (it aborted the process).
    x = np.zeros((1 << 22, 1))
    with pytest.raises(
        rf.InvalidInputError, match=r"`X`.*4194304 rows x 4194304 columns.*140737488355328 bytes"
    ):
        rf.kernel_matrix(x)


def test_bad_data():
    # NaN, infinity and the wrong number of features: test_common.py.
    with pytest.raises(ValueError, match="1025"):
        RandomFourierFeatures(8, sampler="qmc").fit(np.zeros((1, 1026)))
    with pytest.raises(ValueError, match="1025"):
        RandomFourierFeatures(8, sampler="qmc", variant="cos_bias").fit(np.zeros((1, 1025)))
    with pytest.raises(ValueError, match="length_scale"):
        NystroemFeatures(length_scale=0).fit(np.zeros((3, 2)))
    with pytest.raises(ValueError, match="kernel"):
        NystroemFeatures(kernel="poly").fit(np.zeros((3, 2)))
    with pytest.raises(ValueError, match="length_scale"):
        rf.kernel_matrix(np.zeros((2, 2)), length_scale=-1)


@pytest.mark.parametrize("kernel", [None, 3])
def test_kernel_matrix_refuses_a_kernel_that_is_not_a_name(kernel):
    with pytest.raises(rf.InvalidInputError, match="unknown kernel"):
        rf.kernel_matrix(np.zeros((2, 2)), kernel=kernel)


@pytest.mark.parametrize(
    ("kwargs", "n_features"),
    [({"sampler": "structured"}, 3), ({"sampler": "qmc", "n_components": 12}, 3)],
)
@pytest.mark.parametrize("method", ["fit", "fit_transform"])
def test_sampler_warnings_point_at_the_callers_line(kwargs, n_features, method):
    x = np.random.default_rng(0).standard_normal((5, n_features))
    rff = RandomFourierFeatures(**{"n_components": 8, "random_state": 0, **kwargs})
    with pytest.warns(UserWarning, match="sampler=") as record:
        getattr(rff, method)(x)
    assert record[0].filename == __file__


def test_sampler_warnings_point_at_the_callers_line_through_a_pipeline():
    # A Pipeline fits its steps through joblib's Memory wrapper.
    x = np.random.default_rng(0).standard_normal((20, 3))
    pipe = make_pipeline(RandomFourierFeatures(12, sampler="qmc", random_state=0), Ridge())
    with pytest.warns(UserWarning, match="sampler='qmc'") as record:
        pipe.fit(x, x[:, 0])
    assert record[0].filename == __file__
