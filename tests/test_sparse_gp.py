"""SparseGPR: the exact-GP oracles of docs/math/sparse_gp.rst, the fit, the
estimator contract and bad input."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from sklearn.utils.estimator_checks import parametrize_with_checks

from randfeat_rs import ExactGPR, InvalidInputError, NotPositiveDefiniteError, SparseGPC, SparseGPR

# Fixed hyperparameters of the oracle tests.
FIXED = dict(length_scale=0.9, kernel_variance=1.3, noise_variance=0.05, optimize=())


def _data(n: int = 40, d: int = 3, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2.0, 2.0, (n, d))
    y = np.sin(2.0 * X[:, 0]) + 0.5 * X[:, -1] + 0.1 * rng.standard_normal(n)
    return X, y


# --------------------------------------------- oracles: Z = X is the exact GP


@pytest.mark.parametrize("method", ["vfe", "fitc"])
@pytest.mark.parametrize("kernel", ["gaussian", "matern32"])
def test_inducing_inputs_at_the_training_rows_give_the_exact_gp(method, kernel):
    # With Z = X, Q = K: the VFE trace term and the FITC diagonal correction
    # vanish and both objectives are the exact log marginal likelihood, with
    # the exact predictions. Both sides are float64 solves of the same
    # system in a different order; with cond(K + 0.05 I) below 1e3 here the
    # difference is a few hundred ulps, far inside 1e-9.
    X, y = _data()
    Xt = _data(15, seed=1)[0]
    exact = ExactGPR(kernel=kernel, **FIXED).fit(X, y)
    sparse = SparseGPR(inducing=X, method=method, kernel=kernel, **FIXED).fit(X, y)
    assert sparse.jitter_ == 0.0
    np.testing.assert_array_equal(sparse.inducing_points_, X)
    assert sparse.log_marginal_likelihood_ == pytest.approx(
        exact.log_marginal_likelihood_, rel=0, abs=1e-9
    )
    mean_e, std_e = exact.predict(Xt, return_std=True)
    mean_s, std_s = sparse.predict(Xt, return_std=True)
    np.testing.assert_allclose(mean_s, mean_e, rtol=0, atol=1e-9)
    np.testing.assert_allclose(std_s, std_e, rtol=0, atol=1e-9)
    _, noisy_e = exact.predict_noisy(Xt)
    mean_n, noisy_s = sparse.predict_noisy(Xt)
    np.testing.assert_array_equal(mean_n, mean_s)
    np.testing.assert_allclose(noisy_s, noisy_e, rtol=0, atol=1e-9)
    np.testing.assert_allclose(noisy_s**2, std_s**2 + FIXED["noise_variance"], rtol=1e-12)


@pytest.mark.parametrize("seed", range(5))
def test_vfe_bound_is_below_the_exact_log_marginal_likelihood(seed):
    # Titsias' bound: F = LML - KL(q || posterior) <= LML for every Z.
    X, y = _data(seed=seed)
    exact = ExactGPR(**FIXED).fit(X, y)
    for m in (1, 5, 20):
        gp = SparseGPR(m, inducing="random", random_state=seed, **FIXED).fit(X, y)
        assert gp.inducing_points_.shape == (m, 3)
        assert gp.log_marginal_likelihood_ <= exact.log_marginal_likelihood_


def test_fit_improves_the_bound():
    X, y = _data(200)
    start = SparseGPR(20, random_state=0, optimize=()).fit(X, y)
    fitted = SparseGPR(20, random_state=0).fit(X, y)
    # The same Z: chosen at the same initial hyperparameters with the same seed.
    np.testing.assert_array_equal(fitted.inducing_points_, start.inducing_points_)
    assert fitted.n_iter_ >= 1
    assert fitted.log_marginal_likelihood_ > start.log_marginal_likelihood_ + 1.0
    joint = SparseGPR(20, random_state=0, optimize_inducing=True).fit(X, y)
    assert joint.log_marginal_likelihood_ >= fitted.log_marginal_likelihood_
    assert not np.array_equal(joint.inducing_points_, fitted.inducing_points_)


def test_fixed_hyperparameters_stay_and_ard_gives_one_length_scale_per_dimension():
    X, y = _data()
    fixed = {**FIXED, "length_scale": [0.5, 1.0, 2.0]}
    gp = SparseGPR(10, ard=True, random_state=0, **fixed).fit(X, y)
    np.testing.assert_array_equal(gp.length_scale_, [0.5, 1.0, 2.0])
    assert gp.kernel_variance_ == 1.3
    assert gp.noise_variance_ == 0.05
    assert gp.n_iter_ == 0
    fitted = SparseGPR(10, ard=True, random_state=0).fit(X, y)
    assert fitted.length_scale_.shape == (3,)
    assert isinstance(SparseGPR(10, random_state=0).fit(X, y).length_scale_, float)


# ------------------------------------------------------------ the contract


@pytest.mark.parametrize("inducing", ["greedy_variance", "kmeans", "random"])
def test_deterministic_under_random_state(inducing):
    X, y = _data(150)
    a = SparseGPR(12, inducing=inducing, random_state=3).fit(X, y)
    b = SparseGPR(12, inducing=inducing, random_state=3).fit(X, y)
    np.testing.assert_array_equal(a.inducing_points_, b.inducing_points_)
    np.testing.assert_array_equal(a.predict(X), b.predict(X))
    assert a.log_marginal_likelihood_ == b.log_marginal_likelihood_
    if inducing != "greedy_variance":
        c = SparseGPR(12, inducing=inducing, random_state=4).fit(X, y)
        assert not np.array_equal(a.inducing_points_, c.inducing_points_)


def test_pickle_keeps_the_fit_by_value():
    X, y = _data(100)
    gp = SparseGPR(15, method="fitc", random_state=0).fit(X, y)
    back = pickle.loads(pickle.dumps(gp))
    for name in ("length_scale_", "kernel_variance_", "noise_variance_", "jitter_", "n_iter_"):
        assert getattr(back, name) == getattr(gp, name)
    assert back.log_marginal_likelihood_ == gp.log_marginal_likelihood_
    np.testing.assert_array_equal(back.inducing_points_, gp.inducing_points_)
    for a, b in zip(gp.predict_noisy(X), back.predict_noisy(X)):
        np.testing.assert_array_equal(a, b)


def test_float32_input_is_converted_exactly():
    X, y = _data(80)
    X32 = X.astype(np.float32)
    a = SparseGPR(10, random_state=0).fit(X32, y)
    b = SparseGPR(10, random_state=0).fit(X32.astype(np.float64), y)
    assert a.log_marginal_likelihood_ == b.log_marginal_likelihood_
    mean32, std32 = a.predict(X32[:7], return_std=True)
    mean64, std64 = b.predict(X32[:7].astype(np.float64), return_std=True)
    assert mean32.dtype == np.float64 and std32.dtype == np.float64
    np.testing.assert_array_equal(mean32, mean64)
    np.testing.assert_array_equal(std32, std64)


def test_n_inducing_above_n_is_clamped_to_n():
    X, y = _data(30)
    gp = SparseGPR(500, inducing="random", random_state=0, **FIXED).fit(X, y)
    assert gp.inducing_points_.shape == (30, 3)
    # All rows are the inducing inputs: the exact GP.
    exact = ExactGPR(**FIXED).fit(X, y)
    assert gp.log_marginal_likelihood_ == pytest.approx(exact.log_marginal_likelihood_, abs=1e-9)


@pytest.mark.parametrize("make", [SparseGPR, SparseGPC], ids=["regressor", "classifier"])
def test_chunk_size_above_n_is_one_chunk_of_n_rows(make):
    # The memory check sized the kernel blocks by chunk_size, not by the
    # rows a chunk can hold: 10**12 was refused (175 TiB) on 30 rows.
    X, y = _data(30)
    if make is SparseGPC:
        y = (y > np.median(y)).astype(int)
    kw = dict(inducing="random", random_state=0, optimize=())
    one = make(8, chunk_size=30, **kw).fit(X, y)
    huge = make(8, chunk_size=10**12, **kw).fit(X, y)
    out = "predict_proba" if make is SparseGPC else "predict"
    np.testing.assert_array_equal(getattr(huge, out)(X), getattr(one, out)(X))


# --------------------------------------------------------------- bad input


def test_bad_input_names_the_argument():
    X, y = _data(30)
    with pytest.raises(ValueError, match="n_inducing"):
        SparseGPR(0).fit(X, y)
    with pytest.raises(InvalidInputError, match="inducing"):
        SparseGPR(inducing=X[:5, :2]).fit(X, y)
    with pytest.raises(ValueError, match="inducing"):
        SparseGPR(inducing=X[0]).fit(X, y)
    Z = X[:5].copy()
    Z[2, 1] = np.nan
    with pytest.raises(InvalidInputError, match="inducing"):
        SparseGPR(inducing=Z).fit(X, y)
    Xn = X.copy()
    Xn[3, 0] = np.nan
    with pytest.raises(ValueError, match="X"):
        SparseGPR(5).fit(Xn, y)
    yn = y.copy()
    yn[0] = np.inf
    with pytest.raises(ValueError, match="y"):
        SparseGPR(5).fit(X, yn)
    for name, value in [("kernel", "rbf"), ("method", "sor"), ("inducing", "grid")]:
        with pytest.raises(ValueError, match=name):
            SparseGPR(5, **{name: value}).fit(X, y)
    with pytest.raises(InvalidInputError, match="optimize"):
        SparseGPR(5, optimize=("length",)).fit(X, y)
    with pytest.raises(InvalidInputError, match="length_scale"):
        SparseGPR(5, length_scale=[1.0, 2.0]).fit(X, y)
    gp = SparseGPR(5, random_state=0).fit(X, y)
    with pytest.raises(ValueError, match="3 features"):
        gp.predict(X[:, :2])


def _vfe_bound_whitened(X, y, Z, length_scale, kernel_variance, noise_variance, jitter):
    """Titsias' bound (Gaussian kernel, centered targets) from the whitened
    columns A = L^-1 K_uf / sigma_n, dense: the numerically stable form."""
    from scipy.linalg import solve_triangular

    def k(a, b):
        d2 = ((a[:, None, :] - b[None, :, :]) ** 2).sum(-1)
        return kernel_variance * np.exp(-0.5 * d2 / length_scale**2)

    n, m = len(y), len(Z)
    yc = y - y.mean()
    L = np.linalg.cholesky(k(Z, Z) + jitter * np.eye(m))
    A = solve_triangular(L, k(Z, X), lower=True) / np.sqrt(noise_variance)
    LB = np.linalg.cholesky(np.eye(m) + A @ A.T)
    c = solve_triangular(LB, A @ yc, lower=True) / np.sqrt(noise_variance)
    return (
        -0.5 * n * np.log(2 * np.pi * noise_variance)
        - np.log(np.diag(LB)).sum()
        - 0.5 * yc @ yc / noise_variance
        + 0.5 * c @ c
        - 0.5 * n * kernel_variance / noise_variance
        + 0.5 * (A**2).sum()
    )


@pytest.mark.parametrize("n_restarts", [0, 2])
def test_fits_on_ill_conditioned_inducing_inputs_report_their_true_bound(n_restarts):
    # With 20 inducing inputs for 3,000 rows in 3-d, the bound rises from
    # the start (0.7, 0.8, 0.1) towards long length scales and large kernel
    # variances, where K_uu is nearly singular (condition 1e8 and beyond).
    # There the optimizer used to end at points where the rounding of the
    # float64 statistics, amplified by K_uu^-1, made the computed bound
    # thousands of nats higher than the bound itself, or to stop at the
    # first point it could not evaluate, below the noise-only model. The
    # fit's bound must be the stable dense computation's at its own
    # hyperparameters and jitter (they agree to about 1e-9 per row), and
    # better than the noise-only model (kernel variance -> 0).
    rng = np.random.default_rng(3)
    X = rng.uniform(-2, 2, (3000, 3))
    y = np.sin(2 * X[:, 0]) + np.cos(X[:, -1]) + 0.1 * rng.standard_normal(3000)
    Z = X[::150]
    params = dict(inducing=Z, length_scale=0.7, kernel_variance=0.8, noise_variance=0.1)
    gp = SparseGPR(**params, n_restarts=n_restarts, random_state=0).fit(X, y)
    ref = _vfe_bound_whitened(
        X, y, Z, gp.length_scale_, gp.kernel_variance_, gp.noise_variance_, gp.jitter_
    )
    assert abs(gp.log_marginal_likelihood_ - ref) < 1e-8 * len(y)
    noise_only = -0.5 * len(y) * (np.log(2 * np.pi * y.var()) + 1)
    assert gp.log_marginal_likelihood_ > noise_only + 1000


def test_a_bound_that_float64_cannot_resolve_is_refused():
    # Kernel variance / noise variance = 8e9 with a condition number of
    # K_uu near 1e13: no float64 computation of the bound keeps a digit
    # there (a dense whitened one included), so the evaluation is refused
    # with the re-initialization advice rather than reported.
    rng = np.random.default_rng(3)
    X = rng.uniform(-2, 2, (3000, 3))
    y = np.sin(2 * X[:, 0]) + np.cos(X[:, -1]) + 0.1 * rng.standard_normal(3000)
    gp = SparseGPR(
        inducing=X[::150],
        length_scale=61.1,
        kernel_variance=4.5e8,
        noise_variance=0.056,
        optimize=(),
    )
    with pytest.raises(NotPositiveDefiniteError, match="M = 20"):
        gp.fit(X, y)


@pytest.mark.parametrize("length_scale", [0.4, 0.45])
def test_inducing_inputs_at_the_rows_give_the_exact_gp_where_whitening_resolves_it(
    length_scale,
):
    # Twenty rows on a line with Z = X, so the VFE bound is the exact log
    # marginal likelihood. K_uu has kappa = sigma^2 tr(K_uu^-1) of 3e11 and
    # 6e12 and the noise is 1e-4 of the kernel variance: the whitened
    # statistics' rounding estimate u sqrt(kappa) sigma^2 / sigma_n^2 is
    # 1.2e-6 and 5.5e-6 per row, a tenth of it inside the 1e-6 tolerance.
    # The bound must be evaluated without a jitter, and equal the exact GP's
    # (the 1e-8); a jitter of 1e-10 sigma^2 moves it by 8e-6.
    rng = np.random.default_rng(0)
    X = np.sort(rng.uniform(-2, 2, (20, 1)), axis=0)
    y = np.sin(2 * X[:, 0]) + 1e-2 * rng.standard_normal(20)
    params = dict(length_scale=length_scale, kernel_variance=1.0, noise_variance=1e-4, optimize=())
    exact = ExactGPR(**params).fit(X, y)
    sparse = SparseGPR(inducing=X, **params).fit(X, y)
    assert sparse.jitter_ == 0.0
    assert sparse.log_marginal_likelihood_ == pytest.approx(
        exact.log_marginal_likelihood_, rel=0, abs=1e-8
    )


def _fitc_dense(X, y, Z, length_scale, kernel_variance, noise_variance, jitter):
    """FITC's ln N(y - mean | 0, Q_ff + Lambda) from the dense N x N matrix,
    with Q_ff = A^T A, A = L^-1 K_uf (L the factor of K_uu + jitter I)."""

    def k(a, b):
        d2 = ((a[:, None, :] - b[None, :, :]) ** 2).sum(-1)
        return kernel_variance * np.exp(-0.5 * d2 / length_scale**2)

    L = np.linalg.cholesky(k(Z, Z) + jitter * np.eye(len(Z)))
    A = np.linalg.solve(L, k(Z, X))
    C = A.T @ A
    np.fill_diagonal(C, kernel_variance + noise_variance)
    yc = y - y.mean()
    Lc = np.linalg.cholesky(C)
    a = np.linalg.solve(Lc, yc)
    return -0.5 * a @ a - np.log(np.diag(Lc)).sum() - 0.5 * len(y) * np.log(2 * np.pi)


@pytest.mark.parametrize("length_scale", [2.0, 3.0, 4.0])
def test_fitc_is_accurate_where_k_uu_is_ill_conditioned(length_scale):
    # Eight inducing inputs spread over the inputs' span of 6 with length
    # scales of 2 to 4: K_uu has condition numbers of 6e5 to 1e10 (a jitter
    # from 3 on). FITC's statistics are sums over the whitened columns
    # L^-1 k(Z, x_i); summed in kernel space, their rounding reached the
    # likelihood through K_uu^-1 and reported it up to 1.8 nats high.
    rng = np.random.default_rng(3)
    X = np.sort(rng.uniform(-3, 3, (80, 1)), axis=0)
    y = np.sin(X[:, 0]) + 1e-3 * rng.standard_normal(80)
    Z = np.linspace(-3, 3, 8)[:, None]
    gp = SparseGPR(
        inducing=Z,
        method="fitc",
        length_scale=length_scale,
        kernel_variance=1.0,
        noise_variance=1e-6,
        optimize=(),
    ).fit(X, y)
    ref = _fitc_dense(X, y, Z, length_scale, 1.0, 1e-6, gp.jitter_)
    assert abs(gp.log_marginal_likelihood_ - ref) < 1e-6


@pytest.mark.parametrize("scale", [1e-120, 1e120])
def test_kernel_variances_beyond_the_statistics_range_are_refused(scale):
    # S = K_uf K_fu scales as the kernel variance squared: near 1e-150 it
    # underflowed and the model predicted its prior whatever the data, near
    # 1e150 it overflowed into an error about non-finite values. Such
    # variances are refused naming the parameter and the remedy.
    X, y = _data()
    gp = SparseGPR(
        10, length_scale=1.5, kernel_variance=scale, noise_variance=0.01 * scale, optimize=()
    )
    with pytest.raises(InvalidInputError, match=r"kernel_variance.*rescale y"):
        gp.fit(X, y * np.sqrt(scale))
    # At the edge of the range the fit is the unit-scale one, rescaled.
    edge = 1e-100 if scale < 1 else 1e100
    Z = X[:10]
    unit = SparseGPR(
        inducing=Z, length_scale=1.5, kernel_variance=1.0, noise_variance=0.01, optimize=()
    )
    scaled = SparseGPR(
        inducing=Z, length_scale=1.5, kernel_variance=edge, noise_variance=0.01 * edge, optimize=()
    )
    Xt = _data(5, seed=1)[0]
    mean, std = scaled.fit(X, y * np.sqrt(edge)).predict(Xt, return_std=True)
    want_mean, want_std = unit.fit(X, y).predict(Xt, return_std=True)
    np.testing.assert_allclose(mean, want_mean * np.sqrt(edge), rtol=1e-9)
    np.testing.assert_allclose(std, want_std * np.sqrt(edge), rtol=1e-9)


@parametrize_with_checks([SparseGPR()])
def test_sklearn_compatible(estimator, check):
    check(estimator)


@pytest.mark.parametrize("model", ["sparse", "exact"])
@pytest.mark.parametrize(
    "start, scale",
    [
        ({"kernel_variance": 1e6}, 1.0),
        ({"noise_variance": 1e-8}, 1.0),
        ({"length_scale": 1.0}, 1e4),
        ({"length_scale": 1.0}, 1e-4),
    ],
)
def test_a_start_far_from_the_data_scale_is_replaced_by_the_data_scale(model, start, scale):
    # Given starts far from the data's scale, the fit starts from the
    # default (the data's) start, whose bound or LML is higher on the
    # coarsest level, and takes the default fit's path. From the given
    # starts the sparse fit ended in noise (bound -866 against 400: a kernel
    # variance 1e6 times var(y), or a length scale 1e4 times off, which the
    # exact fit did too) or could not start (noise 1e-8: K_uu too
    # ill-conditioned for a signal-to-noise ratio of 1e8).
    rng = np.random.default_rng(0)
    X = rng.standard_normal((800, 3)) * scale
    y = np.sin(X.sum(1) / scale) + 0.1 * rng.standard_normal(800)

    def fit(**kw):
        if model == "sparse":
            return SparseGPR(64, n_restarts=0, random_state=0, **kw).fit(X, y)
        return ExactGPR(n_restarts=0, **kw).fit(X, y)

    default, given = fit(), fit(**start)
    assert given.log_marginal_likelihood_ == default.log_marginal_likelihood_
    assert given.noise_variance_ == default.noise_variance_


@pytest.mark.parametrize("model", ["sparse", "exact"])
def test_an_ard_fit_follows_the_units_of_every_column(model):
    # One column in units 1,000 times smaller: the per-column starts (and
    # the inducing inputs greedy selection picks there) are the unit fit's,
    # scaled, so the fit is too. From one start for all columns, the median
    # pairwise distance (about 1e3, the scaled column's), the sparse fit
    # ended 0.3 nats per row below: its inducing inputs spread along that
    # column only.
    rng = np.random.default_rng(0)
    X = rng.standard_normal((800, 3))
    y = np.sin(X.sum(1)) + 0.1 * rng.standard_normal(800)
    scale = np.array([1e3, 1.0, 1.0])

    def fit(X):
        if model == "sparse":
            return SparseGPR(64, ard=True, n_restarts=0, random_state=0).fit(X, y)
        return ExactGPR(ard=True, n_restarts=0).fit(X, y)

    unit, scaled = fit(X), fit(X * scale)
    # The same optimum up to the rounding of the rescaled inputs. The paths
    # can part by rounding (the sparse fits take 15 and 16 iterations) and
    # stop where an iteration gains less than 1e-12 per row, which fixes
    # ln l to about sqrt(2e-12 / c) = 1e-6 along a direction of per-row
    # curvature c (1.6 to 1.9 along each ln l here; less along their
    # combinations): 1e-5 relative.
    assert scaled.log_marginal_likelihood_ == pytest.approx(unit.log_marginal_likelihood_, rel=1e-9)
    np.testing.assert_allclose(scaled.length_scale_ / scale, unit.length_scale_, rtol=1e-5)
