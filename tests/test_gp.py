"""GP regression: the oracles of docs/math/gp.rst, the estimator contract, bad input."""

from __future__ import annotations

import math
import pickle
from fractions import Fraction
from functools import partial

import numpy as np
import pytest
import scipy.optimize
from sklearn.exceptions import NotFittedError
from sklearn.kernel_approximation import RBFSampler
from sklearn.preprocessing import FunctionTransformer
from sklearn.utils.estimator_checks import parametrize_with_checks

import randfeat_rs as rf
from randfeat_rs import (
    ExactGPR,
    InvalidInputError,
    RandomFeatureGPR,
    SufficientStatistics,
    _core,
)
from randfeat_rs.datasets import load_kin8nm

X3 = np.array([[0.0], [1.0], [2.0]])
Y3 = np.array([0.0, 1.0, 0.0])


def _project(X, W):
    """A deterministic feature map (module level so that it pickles)."""
    return np.tanh(X @ W)


def deterministic_features(d_in: int, d_out: int, seed: int = 0) -> FunctionTransformer:
    W = np.random.default_rng(seed).standard_normal((d_in, d_out))
    return FunctionTransformer(_project, kw_args={"W": W})


# ------------------------------------------------ oracles of docs/math/gp.rst, "Exact GP"


def test_three_point_lml_and_gradient_oracle():
    lml, grad = _core.exact_gp_lml(
        X3, Y3, length_scale=[1.0], kernel_variance=1.0, noise_variance=0.1, eval_gradient=True
    )
    assert lml == pytest.approx(-3.493578023553, abs=1e-9)
    np.testing.assert_allclose(
        grad, [-0.844481859005, -0.560780034555, 0.052045961570], rtol=0, atol=1e-9
    )


def test_three_point_prediction_oracle():
    gp = ExactGPR(
        length_scale=1.0, kernel_variance=1.0, noise_variance=0.1, optimize=(), center_y=False
    ).fit(X3, Y3)
    assert gp.log_marginal_likelihood_ == pytest.approx(-3.493578023553, abs=1e-9)
    mean, std = gp.predict(np.array([[0.5]]), return_std=True)
    assert mean[0] == pytest.approx(0.574547829524, abs=1e-9)
    assert std[0] ** 2 == pytest.approx(0.082395236285, abs=1e-9)
    mean_y, std_y = gp.predict_noisy(np.array([[0.5]]))
    assert mean_y[0] == mean[0]
    assert std_y[0] ** 2 == pytest.approx(0.182395236285, abs=1e-9)
    lml, grad = gp.log_marginal_likelihood(eval_gradient=True)
    assert lml == pytest.approx(-3.493578023553, abs=1e-9)
    np.testing.assert_allclose(grad[2], 0.052045961570, atol=1e-9)


@pytest.mark.parametrize("ard", [False, True])
def test_gradients_match_central_differences(yacht_subset, ard):
    X, y = yacht_subset(60)
    d = X.shape[1]
    rng = np.random.default_rng(1)
    theta = np.concatenate(
        [np.log(rng.uniform(0.8, 3.0, d if ard else 1)), [np.log(1.3), np.log(0.05)]]
    )

    def f(t):
        k = t.size - 2
        return _core.exact_gp_lml(
            X,
            y,
            length_scale=list(np.exp(t[:k])),
            kernel_variance=float(np.exp(t[k])),
            noise_variance=float(np.exp(t[k + 1])),
            eval_gradient=True,
        )

    _, grad = f(theta)
    h = 1e-5
    for p in range(theta.size):
        e = np.zeros_like(theta)
        e[p] = h
        fd = (f(theta + e)[0] - f(theta - e)[0]) / (2 * h)
        # Central differences: O(h^2 f''') + O(eps |f| / h) ~ 1e-7 here.
        assert grad[p] == pytest.approx(fd, abs=1e-6 * (1 + abs(fd)))


@pytest.mark.parametrize("ard", [False, True])
def test_lml_optimum_matches_scipy_lbfgsb_on_the_same_objective(yacht_subset, ard):
    X, y = yacht_subset(120)
    yc = y - y.mean()
    d = X.shape[1]
    # The same initialization (docs/math/gp.rst, "Exact GP") as the Rust fit.
    diffs = np.sqrt(((X[:, None, :] - X[None, :, :]) ** 2).sum(-1))
    med = np.median(diffs[np.tril_indices(X.shape[0], -1)])
    var_y = yc.var()
    t0 = np.concatenate(
        [np.full(d if ard else 1, np.log(med)), [np.log(var_y), np.log(0.1 * var_y)]]
    )

    def neg(t):
        k = t.size - 2
        lml, g = _core.exact_gp_lml(
            X,
            yc,
            length_scale=list(np.exp(t[:k])),
            kernel_variance=float(np.exp(t[k])),
            noise_variance=float(np.exp(t[k + 1])),
            eval_gradient=True,
        )
        return -lml, -g

    def lbfgsb(start):
        return scipy.optimize.minimize(
            neg,
            start,
            jac=True,
            method="L-BFGS-B",
            bounds=[(-25.0, 25.0)] * len(start),  # keeps exp() finite; far from the optima
            options={"gtol": 1e-9, "ftol": 1e-15, "maxiter": 3000},
        )

    # Both optimizers from the same starts: the initialization of
    # docs/math/gp.rst, "Exact GP", and 4 seeded starts within a factor 10 of it
    # (ExactGPR starts at its given hyperparameters when n_restarts=0).
    rng = np.random.default_rng(11)
    starts = [t0] + [t0 + np.log(10) * rng.uniform(-1, 1, t0.size) for _ in range(4)]
    k = t0.size - 2
    fits = []
    for s0 in starts:
        ours = ExactGPR(
            length_scale=np.exp(s0[:k]) if ard else float(np.exp(s0[0])),
            kernel_variance=float(np.exp(s0[k])),
            noise_variance=float(np.exp(s0[k + 1])),
            ard=ard,
            n_restarts=0,
        ).fit(X, y)
        fits.append((ours, lbfgsb(s0)))
    best_ours = max(f[0].log_marginal_likelihood_ for f in fits)
    best_scipy = max(-f[1].fun for f in fits)
    # Ours finds an optimum at least as good as scipy's best from the same starts ...
    assert best_ours >= best_scipy - 1e-8 * abs(best_scipy)
    agree = 0
    for ours, res in fits:
        theta = np.concatenate(
            [
                np.log(np.atleast_1d(ours.length_scale_)),
                [np.log(ours.kernel_variance_), np.log(ours.noise_variance_)],
            ]
        )
        # ... every run ends at a stationary point of the same objective:
        # polishing with L-BFGS-B does not improve it ...
        polished = lbfgsb(theta)
        assert -polished.fun <= ours.log_marginal_likelihood_ + 1e-8 * abs(polished.fun)
        # ... and where scipy reached the same optimum, the LMLs agree tightly.
        if abs(-res.fun - ours.log_marginal_likelihood_) < 1e-7 * abs(res.fun):
            agree += 1
    assert agree >= 1
    gp = max((f[0] for f in fits), key=lambda g: g.log_marginal_likelihood_)
    # And the fitted model's own LML method agrees with the attribute.
    assert gp.log_marginal_likelihood() == pytest.approx(gp.log_marginal_likelihood_, rel=1e-12)


def test_coarse_to_fine_fit_reaches_scipys_optimum_on_1100_rows():
    # From 1,024 rows on, a run first fits every fourth row and starts the
    # full fit from that optimum, preconditioned by its Hessian; the result
    # must still be the optimum scipy's L-BFGS-B finds on the same objective
    # from the initialization of docs/math/gp.rst, "Exact GP".
    X, y = load_kin8nm()
    idx = np.random.default_rng(0).permutation(X.shape[0])[:1100]
    X = np.ascontiguousarray((X[idx] - X[idx].mean(0)) / X[idx].std(0))
    y = np.ascontiguousarray(y[idx])
    yc = y - y.mean()
    diffs = np.sqrt(((X[::3, None, :] - X[None, ::3, :]) ** 2).sum(-1))
    med = np.median(diffs[np.tril_indices(diffs.shape[0], -1)])
    t0 = np.log([med, yc.var(), 0.1 * yc.var()])

    def neg(t):
        lml, g = _core.exact_gp_lml(
            X,
            yc,
            length_scale=[float(np.exp(t[0]))],
            kernel_variance=float(np.exp(t[1])),
            noise_variance=float(np.exp(t[2])),
            eval_gradient=True,
        )
        return -lml, -g

    def lbfgsb(start):
        return scipy.optimize.minimize(
            neg, start, jac=True, method="L-BFGS-B", options={"gtol": 1e-9, "ftol": 1e-15}
        )

    ours = ExactGPR(
        length_scale=float(med),
        kernel_variance=float(yc.var()),
        noise_variance=float(0.1 * yc.var()),
        n_restarts=0,
    ).fit(X, y)
    ref = lbfgsb(t0)
    lml = ours.log_marginal_likelihood_
    assert lml >= -ref.fun - 1e-8 * abs(ref.fun)
    theta = np.log([ours.length_scale_, ours.kernel_variance_, ours.noise_variance_])
    assert -lbfgsb(theta).fun <= lml + 1e-8 * abs(lml)


# ------------------------------------------------- ExactGPR: the kernel choice

_MATERN_NU = {"matern12": 0.5, "matern32": 1.5, "matern52": 2.5}


def _sklearn_lml(kernel, X, yc, ls, kv, nv):
    """The LML and its gradient in (ln l.., ln kv, ln nv) by scikit-learn's
    GaussianProcessRegressor for the Gaussian and Matern kernels (its own
    kernel code), by NumPy from the l1 distances for the Laplacian."""
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import RBF, ConstantKernel, Matern, WhiteKernel

    if kernel == "laplacian":
        d1 = (np.abs(X[:, None, :] - X[None, :, :]) / ls).sum(-1)
        K = kv * np.exp(-d1) + nv * np.eye(X.shape[0])
        L = np.linalg.cholesky(K)
        alpha = np.linalg.solve(K, yc)
        lml = -0.5 * yc @ alpha - np.log(np.diag(L)).sum() - 0.5 * X.shape[0] * np.log(2 * np.pi)
        return lml, None
    base = RBF(ls) if kernel == "gaussian" else Matern(ls, nu=_MATERN_NU[kernel])
    k = ConstantKernel(kv) * base + WhiteKernel(nv)
    gpr = GaussianProcessRegressor(k, alpha=0.0, optimizer=None).fit(X, yc)
    # scikit-learn's theta is (ln kv, ln l.., ln nv).
    lml, g = gpr.log_marginal_likelihood(gpr.kernel_.theta, eval_gradient=True)
    return lml, np.concatenate([g[1:-1], g[:1], g[-1:]])


@pytest.mark.parametrize("kernel", ["gaussian", "laplacian", "matern12", "matern32", "matern52"])
@pytest.mark.parametrize("ard", [False, True])
def test_every_kernel_matches_an_independent_lml(yacht_subset, kernel, ard):
    X, y = yacht_subset(50)
    yc = y - y.mean()
    d = X.shape[1]
    ls = np.linspace(0.7, 2.1, d) if ard else np.array([1.3])
    kv, nv = 0.8, 0.05
    ours = ExactGPR(
        kernel=kernel,
        length_scale=ls if ard else float(ls[0]),
        kernel_variance=kv,
        noise_variance=nv,
        ard=ard,
        optimize=(),
    ).fit(X, y)
    theta = np.concatenate([np.log(ls), [np.log(kv), np.log(nv)]])
    lml, grad = ours.log_marginal_likelihood(theta, eval_gradient=True)
    assert lml == pytest.approx(ours.log_marginal_likelihood_, rel=1e-12)
    ref, ref_grad = _sklearn_lml(kernel, X, yc, ls, kv, nv)
    assert lml == pytest.approx(ref, rel=1e-10)
    if ref_grad is not None:
        np.testing.assert_allclose(grad, ref_grad, rtol=1e-7, atol=1e-8)
    # The predictive mean at the training points is K (K + nv I)^{-1} yc + mean.
    mean = ours.predict(X[:5])
    assert np.all(np.isfinite(mean))


@pytest.mark.parametrize("kernel", ["gaussian", "laplacian", "matern32"])
def test_fixed_per_dimension_length_scales_need_no_ard(yacht_subset, kernel):
    # ``ard`` says how many length scales are fitted; fixed ones may be one
    # per dimension either way (the kernel of the rescaled inputs).
    X, y = yacht_subset(50)
    ls = np.linspace(0.7, 2.1, X.shape[1])
    kv, nv = 0.8, 0.05
    gp = ExactGPR(
        kernel=kernel, length_scale=ls, kernel_variance=kv, noise_variance=nv, optimize=()
    ).fit(X, y)
    np.testing.assert_array_equal(gp.length_scale_, ls)
    ref, _ = _sklearn_lml(kernel, X, y - y.mean(), ls, kv, nv)
    assert gp.log_marginal_likelihood_ == pytest.approx(ref, rel=1e-10)
    # The sparse GP takes them too: with every row an inducing input, the
    # exact GP's.
    sparse = rf.SparseGPR(
        inducing=X,
        kernel=kernel,
        length_scale=ls,
        kernel_variance=kv,
        noise_variance=nv,
        optimize=(),
    ).fit(X, y)
    np.testing.assert_array_equal(sparse.length_scale_, ls)
    assert sparse.jitter_ == 0
    assert sparse.log_marginal_likelihood_ == pytest.approx(ref, abs=1e-8)
    # The variances fitted around them.
    fitted = ExactGPR(
        kernel=kernel, length_scale=ls, optimize=("kernel_variance", "noise_variance")
    ).fit(X, y)
    np.testing.assert_array_equal(fitted.length_scale_, ls)
    assert fitted.log_marginal_likelihood_ >= gp.log_marginal_likelihood_
    with pytest.raises(InvalidInputError, match=r"length_scale.*set ard=True"):
        ExactGPR(kernel=kernel, length_scale=ls).fit(X, y)


@pytest.mark.parametrize("kernel", ["laplacian", "matern12", "matern32", "matern52"])
def test_every_kernel_fits_to_a_stationary_point(yacht_subset, kernel):
    X, y = yacht_subset(60)
    gp = ExactGPR(kernel=kernel, n_restarts=1, random_state=0).fit(X, y)
    theta = np.log([gp.length_scale_, gp.kernel_variance_, gp.noise_variance_])
    lml, grad = gp.log_marginal_likelihood(theta, eval_gradient=True)
    assert lml == pytest.approx(gp.log_marginal_likelihood_, rel=1e-12)
    # The gradient of -LML/N that L-BFGS stops on is below 1e-4 per row.
    assert np.linalg.norm(grad) < 1e-4 * X.shape[0]
    # A pickled model keeps its kernel: the handle's, and the same
    # predictions and LML at other hyperparameters (a Gaussian kernel would
    # change both).
    back = pickle.loads(pickle.dumps(gp))
    assert back._gp.kernel == kernel
    np.testing.assert_array_equal(back.predict(X[:7]), gp.predict(X[:7]))
    assert back.log_marginal_likelihood(theta + 0.3) == gp.log_marginal_likelihood(theta + 0.3)
    assert gp.log_marginal_likelihood(theta + 0.3) != ExactGPR(n_restarts=0).fit(
        X, y
    ).log_marginal_likelihood(theta + 0.3)


def test_unknown_kernel_is_a_clear_error(yacht_subset):
    X, y = yacht_subset(20)
    with pytest.raises(ValueError, match="kernel"):
        ExactGPR(kernel="rbf").fit(X, y)
    with pytest.raises(InvalidInputError, match=r"unknown kernel .rbf.*matern52"):
        _core.exact_gp_lml(
            X, y, length_scale=[1.0], kernel_variance=1.0, noise_variance=0.1, kernel="rbf"
        )


def test_optimize_subset_keeps_the_rest_fixed(yacht_subset):
    X, y = yacht_subset(80)
    gp = ExactGPR(noise_variance=0.02, kernel_variance=0.9, optimize=("length_scale",)).fit(X, y)
    assert gp.noise_variance_ == 0.02 and gp.kernel_variance_ == 0.9
    gp2 = ExactGPR(length_scale=[1.0, 2.0, 1.0, 1.0, 1.0, 3.0], ard=True, optimize=[]).fit(X, y)
    np.testing.assert_array_equal(gp2.length_scale_, [1.0, 2.0, 1.0, 1.0, 1.0, 3.0])


def test_restarts_never_worse_and_seeded(yacht_subset):
    X, y = yacht_subset(80)
    a = ExactGPR(n_restarts=0).fit(X, y)
    b = ExactGPR(n_restarts=3, random_state=5).fit(X, y)
    c = ExactGPR(n_restarts=3, random_state=5).fit(X, y)
    assert b.log_marginal_likelihood_ >= a.log_marginal_likelihood_ - 1e-9
    assert b.log_marginal_likelihood_ == c.log_marginal_likelihood_


# ---------------------------------------- feature space (docs/math/gp.rst, "Feature-space GP")


def exact_with_gram(phi, y, phis, nv):
    """The exact GP (docs/math/gp.rst) with K = Phi Phi^T, centered targets, by brute force."""
    ym = y.mean()
    Ky = phi @ phi.T + nv * np.eye(len(y))
    L = np.linalg.cholesky(Ky)
    a = np.linalg.solve(Ky, y - ym)
    lml = -0.5 * (y - ym) @ a - np.log(np.diag(L)).sum() - 0.5 * len(y) * np.log(2 * np.pi)
    ks = phi @ phis.T
    mean = ks.T @ a + ym
    var = (phis**2).sum(1) - np.einsum("ij,ij->j", ks, np.linalg.solve(Ky, ks))
    return lml, mean, var


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_feature_space_equals_exact_with_k_equal_phi_phi_t(dtype):
    rng = np.random.default_rng(3)
    X = rng.standard_normal((57, 3)).astype(dtype)
    y = np.sin(X[:, 0].astype(np.float64)) + 2.0
    Xs = rng.standard_normal((9, 3)).astype(dtype)
    feats = deterministic_features(3, 12)
    gp = RandomFeatureGPR(feats, noise_variance=0.2, chunk_size=10).fit(X, y)
    phi = feats.fit_transform(X).astype(np.float64)
    phis = feats.transform(Xs).astype(np.float64)
    lml, mean, var = exact_with_gram(phi, y, phis, 0.2)
    m, s = gp.predict(Xs, return_std=True)
    tol = 1e-10
    assert gp.log_marginal_likelihood_ == pytest.approx(lml, rel=tol)
    np.testing.assert_allclose(m, mean, rtol=0, atol=tol)
    np.testing.assert_allclose(s**2, var, rtol=0, atol=tol)
    _, sy = gp.predict_noisy(Xs)
    np.testing.assert_allclose(sy**2, var + 0.2, atol=tol)


def test_rbfsampler_features_equal_numpy_reference():
    rng = np.random.default_rng(4)
    X = rng.uniform(-2, 2, (3000, 4))
    y = np.cos(X).sum(1) + 0.1 * rng.standard_normal(3000)
    Xs = rng.uniform(-2, 2, (50, 4))
    sampler = RBFSampler(gamma=0.3, n_components=150, random_state=0)
    gp = RandomFeatureGPR(sampler, noise_variance=0.01, chunk_size=700).fit(X, y)
    phi = gp.features_.transform(X)
    phis = gp.features_.transform(Xs)
    A = phi.T @ phi / 0.01 + np.eye(150)
    coef = np.linalg.solve(A, phi.T @ (y - y.mean())) / 0.01
    mean = phis @ coef + y.mean()
    var = np.einsum("ij,ji->i", phis, np.linalg.solve(A, phis.T))
    m, s = gp.predict(Xs, return_std=True)
    np.testing.assert_allclose(m, mean, atol=1e-8)
    np.testing.assert_allclose(s**2, var, atol=1e-10)
    assert gp.length_scale_ == pytest.approx(1 / np.sqrt(0.6))
    assert gp.kernel_variance_ == 1.0
    assert gp.stats_.n_samples == 3000


def test_merged_statistics_and_partial_fit_equal_one_fit():
    rng = np.random.default_rng(5)
    X = rng.standard_normal((400, 2))
    y = 100.0 + X[:, 0] ** 2 + 0.1 * rng.standard_normal(400)
    Xs = rng.standard_normal((20, 2))
    one = RandomFeatureGPR(deterministic_features(2, 16), noise_variance=0.05).fit(X, y)
    feats = one.features_
    parts = [
        SufficientStatistics.from_features(feats, X[a:b], y[a:b], chunk_size=37)
        for a, b in [(0, 150), (150, 151), (151, 400)]
    ]
    merged = parts[0].copy().merge(parts[1]).merge(parts[2])
    assert merged.n_samples == 400
    np.testing.assert_allclose(merged.gram, one.stats_.gram, rtol=1e-12, atol=1e-10)
    np.testing.assert_allclose(merged.phi_y, one.stats_.phi_y, rtol=1e-12)
    assert merged.y_mean == pytest.approx(y.mean(), rel=1e-14)
    model = RandomFeatureGPR.from_stats(feats, merged, noise_variance=0.05)
    pf = RandomFeatureGPR(deterministic_features(2, 16), noise_variance=0.05)
    for a, b in [(0, 100), (100, 333), (333, 400)]:
        pf.partial_fit(X[a:b], y[a:b])
    want_m, want_s = one.predict(Xs, return_std=True)
    for other in (model, pf):
        m, s = other.predict(Xs, return_std=True)
        np.testing.assert_allclose(m, want_m, rtol=0, atol=1e-9)
        np.testing.assert_allclose(s, want_s, rtol=0, atol=1e-10)
        assert other.log_marginal_likelihood_ == pytest.approx(
            one.log_marginal_likelihood_, rel=1e-10
        )


def test_from_stats_refuses_statistics_of_another_width():
    # Statistics of D = 10 features for a map of D = 40 were accepted, and
    # the mismatch surfaced only at predict.
    rng = np.random.default_rng(5)
    X, y = rng.standard_normal((30, 2)), rng.standard_normal(30)
    feats = rf.RandomFourierFeatures(40, random_state=0).fit(X)
    narrow = SufficientStatistics(10).accumulate(rng.standard_normal((30, 10)), y)
    with pytest.raises(InvalidInputError, match=r"`stats` hold 10 features.*maps to 40"):
        RandomFeatureGPR.from_stats(feats, narrow, noise_variance=0.1)
    right = SufficientStatistics.from_features(feats, X, y)
    RandomFeatureGPR.from_stats(feats, right, noise_variance=0.1).predict(X)


def test_sufficient_statistics_api_and_pickle():
    rng = np.random.default_rng(6)
    phi = rng.standard_normal((30, 4))
    y = rng.standard_normal(30)
    st = SufficientStatistics(4).accumulate(phi, y)
    np.testing.assert_allclose(st.gram, phi.T @ phi, atol=1e-12)
    np.testing.assert_allclose(st.phi_y, phi.T @ y, atol=1e-12)
    np.testing.assert_allclose(st.phi_sum, phi.sum(0), atol=1e-12)
    back = pickle.loads(pickle.dumps(st))
    np.testing.assert_array_equal(back.gram, st.gram)
    assert back.n_samples == 30 and "n_samples=30" in repr(back)
    for bad in (0, -1, 2.5, True):
        with pytest.raises(InvalidInputError, match="n_features"):
            SufficientStatistics(bad)
    with pytest.raises(InvalidInputError, match=r"n_features.*beyond any memory"):
        SufficientStatistics(2**70)
    # Complex or string features are refused, not cut to their real part;
    # integer features are converted, float32 ones kept.
    for bad in (phi * 1j, phi.astype(str)):
        with pytest.raises(TypeError, match=r"phi.*real numbers"):
            SufficientStatistics(4).accumulate(bad, y)
    with pytest.raises(TypeError, match=r"transformer's output.*real numbers"):
        RandomFeatureGPR(FunctionTransformer(lambda X: X * 1j)).fit(phi, y)
    ints = np.arange(8).reshape(2, 4)
    np.testing.assert_array_equal(
        SufficientStatistics(4).accumulate(ints, y[:2]).gram, (ints.T @ ints).astype(float)
    )
    with pytest.raises(ValueError, match="number of features"):
        st.accumulate(phi[:, :3], y)
    with pytest.raises(InvalidInputError, match="`y` has 29 values"):
        st.accumulate(phi, y[:29])
    # The error names the argument (it used to name `features`).
    with pytest.raises(ValueError, match="`phi` contains NaN"):
        st.accumulate(np.full((2, 4), np.nan), y[:2])
    with pytest.raises(ValueError, match="statistics to merge"):
        st.merge(SufficientStatistics(5).accumulate(rng.standard_normal((2, 5)), y[:2]))
    with pytest.raises(InvalidInputError, match="SufficientStatistics"):
        st.merge("nope")


# -------------------------------------------------------- metrics (docs/math/gp.rst, "Metrics")


def test_metric_oracles():
    assert rf.kl_divergence([0.0], [1.0], [1.0], [2.0]) == pytest.approx(0.5 * np.log(2), abs=1e-12)
    assert rf.kl_divergence([1.0], [0.5], [0.0], [1.0]) == pytest.approx(0.5965735903, abs=1e-10)
    assert rf.kl_divergence([0.3, 1], [0.7, 2], [0.3, 1], [0.7, 2]) == 0.0
    assert np.isfinite(rf.kl_divergence([0.0], [0.0], [0.0], [1.0]))  # variance floor
    assert rf.mean_nll([1.0, 2.0], [1.0, 2.0], [1.0, 1.0]) == pytest.approx(0.9189385332, abs=1e-10)
    assert rf.rmse([0.0, 0.0], [3.0, 4.0]) == pytest.approx(np.sqrt(12.5), rel=1e-15)
    K = np.eye(2)
    assert rf.relative_frobenius_error(K + 0.1 * (1 - K), K) == pytest.approx(0.1, rel=1e-14)


def test_metrics_keep_the_digits_of_subnormal_differences():
    # Differences of subnormal values are exact in float64; formed of halves
    # (0.5 * a - 0.5 * b), 5e-324 / 2 rounded to 0 and the metrics lost them.
    # The oracle is exact rational arithmetic (numpy's norms underflow here).
    def exact_frobenius(a, b):
        num = sum((Fraction(p) - Fraction(q)) ** 2 for p, q in zip(a.flat, b.flat))
        return math.sqrt(num / sum(Fraction(q) ** 2 for q in b.flat))

    eps = np.finfo(float).eps
    for a, b in [(5e-324, 0.0), (1.5e-323, 0.0), (3e-310, 1e-310)]:
        # One difference: the RMSE is |a - b|, here a float64 (its square
        # underflows, so the oracle takes no square root).
        assert rf.rmse([a], [b]) == float(abs(Fraction(a) - Fraction(b)))
    assert rf.relative_frobenius_error([[5e-324]], [[1e-323]]) == 0.5
    # Differences of one unit 2^-1074 each: ||d||^2 / ||K||^2 = 3 / 20. The
    # squares and sums of the scaled entries are exact, then one rounding
    # each for the ratio and the square root, here and in the oracle.
    k = np.array([[1e-323, 0.0], [0.0, 2e-323]])
    kh = np.array([[5e-324, 5e-324], [0.0, 1.5e-323]])
    got = rf.relative_frobenius_error(kh, k)
    assert got == pytest.approx(exact_frobenius(kh, k), rel=2 * eps)


def test_metric_bad_input():
    with pytest.raises(ValueError, match="length of y_pred"):
        rf.rmse([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="NaN"):
        rf.rmse([np.nan], [1.0])
    with pytest.raises(ValueError, match="var"):
        rf.mean_nll([1.0], [1.0], [-1.0])
    with pytest.raises(ValueError, match="1-D"):
        rf.kl_divergence(np.zeros((2, 2)), [1.0], [1.0], [1.0])
    with pytest.raises(ValueError, match="2-D"):
        rf.relative_frobenius_error([1.0], [1.0])


# ---------------------------------------------------------------- contract
# (pickling, thread counts, dtypes and the errors for bad data: test_common.py)


def test_verbose_progress(yacht_subset, capfd):
    X, y = yacht_subset(60)
    ExactGPR(n_restarts=1, verbose=True).fit(X, y)
    RandomFeatureGPR(
        RBFSampler(n_components=20), noise_variance=0.1, chunk_size=25, verbose=True
    ).fit(X, y)
    err = capfd.readouterr().err
    assert "ExactGPR: run 2/2: LML =" in err
    assert "RandomFeatureGPR: 50/60 rows accumulated" in err


def test_bad_inputs(yacht_subset):
    X, y = yacht_subset(30)
    for kw in ({"noise_variance": 0.0}, {"kernel_variance": -1.0}, {"length_scale": -2.0}):
        with pytest.raises(ValueError, match=next(iter(kw))):
            ExactGPR(**kw).fit(X, y)
    with pytest.raises(ValueError, match="noise_variance"):
        RandomFeatureGPR(RBFSampler(), noise_variance=-1.0).fit(X, y)
    with pytest.raises(ValueError, match="optimize"):
        ExactGPR(optimize=("length_scale", "bogus")).fit(X, y)
    with pytest.raises(ValueError, match=r"length_scale.*one per input dimension"):
        ExactGPR(ard=True, length_scale=[1.0, 2.0]).fit(X, y)
    with pytest.raises(ValueError, match="features"):
        RandomFeatureGPR("not a transformer").fit(X, y)
    gp = ExactGPR(n_restarts=0).fit(X, y)
    with pytest.raises(InvalidInputError, match="theta"):
        gp.log_marginal_likelihood(np.zeros(5))
    # theta has the fitted model's length scales: one without ARD, one per
    # feature with it (a per-feature theta was the LML of another kernel).
    assert X.shape[1] > 1
    with pytest.raises(InvalidInputError, match=r"theta.*must have length 3"):
        gp.log_marginal_likelihood(np.zeros(X.shape[1] + 2))
    ard = ExactGPR(ard=True, optimize=()).fit(X, y)
    with pytest.raises(InvalidInputError, match=r"theta.*one length scale per feature"):
        ard.log_marginal_likelihood(np.zeros(3))
    assert np.isfinite(ard.log_marginal_likelihood(np.zeros(X.shape[1] + 2)))


def test_a_corrupted_stored_factor_is_a_clear_error(yacht_subset):
    # Assigning L_ replaces the factor the predictions use (it lives in the
    # fitted Rust handle and is checked there): a zero or NaN diagonal entry,
    # or a non-square factor, must be refused, never solved with.
    X, y = yacht_subset(30)
    for est in (
        ExactGPR(n_restarts=0),
        RandomFeatureGPR(RBFSampler(n_components=8, random_state=0), noise_variance=0.1),
    ):
        est.fit(X, y)
        good = est.L_.copy()
        want = est.predict(X, return_std=True)
        for bad in (0.0, np.nan, -1.0):
            corrupted = good.copy()
            corrupted[2, 2] = bad
            with pytest.raises(InvalidInputError, match="diagonal entry 2 of the Cholesky"):
                est.L_ = corrupted
        with pytest.raises(ValueError, match="square"):
            est.L_ = good[:, :-1]
        # A valid factor of another system's size (the fit's N or D rows).
        n = good.shape[0]
        with pytest.raises(ValueError, match=rf"size of the Cholesky factor.*expected {n}, got 3"):
            est.L_ = np.eye(3)
        # The refused factors left the fitted one in place.
        np.testing.assert_array_equal(est.predict(X, return_std=True)[1], want[1])
        est.L_ = good
        assert np.all(np.isfinite(est.predict(X, return_std=True)[1]))


def test_too_large_n_is_refused_naming_the_approximations():
    X = np.zeros((400_000, 1))
    with pytest.raises(ValueError, match=r"RandomFeatureGPR.*LocalizedMaclaurinGPR"):
        ExactGPR().fit(X, np.zeros(400_000))


def test_jitter_rescues_duplicate_points_with_tiny_noise():
    X = np.repeat(np.linspace(0, 1, 5)[:, None], 4, axis=0)
    y = np.sin(X[:, 0])
    gp = ExactGPR(length_scale=1.0, kernel_variance=1.0, noise_variance=1e-14, optimize=()).fit(
        X, y
    )
    assert np.all(np.isfinite(gp.predict(X)))


def _exact_lml_longdouble(X, y, length_scale, kernel_variance, noise_variance):
    """The Gaussian-kernel LML of the centered targets in 80-bit extended precision
    (NumPy's longdouble: 11 more bits than float64), by an unblocked Cholesky."""
    ld = np.longdouble
    x = X.astype(ld) / ld(length_scale)
    yc = y.astype(ld) - y.astype(ld).mean()
    d2 = ((x[:, None, :] - x[None, :, :]) ** 2).sum(-1)
    K = ld(kernel_variance) * np.exp(-d2 / 2) + ld(noise_variance) * np.eye(len(y), dtype=ld)
    n = len(y)
    L = np.zeros_like(K)
    for j in range(n):
        v = K[j:, j] - L[j:, :j] @ L[j, :j]
        L[j, j] = np.sqrt(v[0])
        L[j + 1 :, j] = v[1:] / L[j, j]
    z = np.zeros(n, dtype=ld)
    for i in range(n):
        z[i] = (yc[i] - L[i, :i] @ z[:i]) / L[i, i]
    return -0.5 * (z @ z) - np.log(np.diag(L)).sum() - 0.5 * n * np.log(2 * np.pi, dtype=ld)


@pytest.mark.parametrize("n", [15, 20, 30])
def test_a_fit_on_targets_without_noise_reports_an_lml_float64_holds(n):
    # Without noise the LML grows as the noise variance shrinks, until K_y is
    # too ill-conditioned for float64 and its rounding makes a spurious
    # maximum (1 to 1.6 nats above the true LML at noise_variance ~ 1e-16
    # kernel_variance). The fit stops where the estimated rounding reaches
    # 1e-6 nats per row, so the reported LML is the true one to that.
    X = np.linspace(0, 5, n)[:, None]
    y = np.sin(X[:, 0])
    gp = ExactGPR(random_state=0).fit(X, y)
    exact = _exact_lml_longdouble(X, y, gp.length_scale_, gp.kernel_variance_, gp.noise_variance_)
    assert abs(gp.log_marginal_likelihood_ - float(exact)) <= 1e-6 * n
    # A fixed noise variance whose K_y float64 cannot factor for any length
    # scale the fit tries is refused by name, not fitted to rounding.
    with pytest.raises(InvalidInputError, match=r"noise_variance.*has no float64 value"):
        ExactGPR(length_scale=2.0, noise_variance=1e-20, optimize=("kernel_variance",)).fit(X, y)


# ------------------------------------- marginal-likelihood fit of the feature-space GP

ALL_HYPER = ("length_scale", "kernel_variance", "noise_variance")


def _lml_direct(phi, y, noise_variance):
    """The LML of the centered targets with the low-rank kernel K = Phi Phi^T,
    the N x N way (no Woodbury)."""
    yc = y - y.mean()
    Ky = phi @ phi.T + noise_variance * np.eye(len(y))
    L = np.linalg.cholesky(Ky)
    a = np.linalg.solve(Ky, yc)
    return -0.5 * yc @ a - np.log(np.diag(L)).sum() - 0.5 * len(y) * np.log(2 * np.pi)


def _smooth_data(n, d, seed):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1.5, 1.5, (n, d))
    y = np.sin(1.7 * X[:, 0]) + 0.3 * X.sum(1) + 0.1 * rng.standard_normal(n)
    return X, y


# The structured sampler's bias warning for d = 3 says nothing about these identities.
@pytest.mark.filterwarnings("ignore:sampler='structured' is noticeably biased")
@pytest.mark.parametrize(
    ("sampler", "variant"),
    [("mc", "cos_sin"), ("orthogonal", "cos_bias"), ("structured", "cos_sin")],
)
def test_optimized_rff_lml_equals_the_direct_low_rank_computation(sampler, variant):
    X, y = _smooth_data(150, 3, 0)
    rff = rf.RandomFourierFeatures(64, sampler=sampler, variant=variant, random_state=1)
    gp = RandomFeatureGPR(rff, optimize=ALL_HYPER, n_restarts=0, chunk_size=37).fit(X, y)
    assert gp.n_iter_ > 0
    assert gp.length_scale_ != 1.0 and gp.features_.length_scale == gp.length_scale_
    phi = gp.features_.transform(X)
    lml = _lml_direct(phi, y, gp.noise_variance_)
    assert gp.log_marginal_likelihood_ == pytest.approx(lml, rel=1e-10)
    # The random draw is kept: the frequencies of the fitted map are the
    # drawn ones times l0 / l (an exact identity up to rounding).
    l0 = rff.length_scale
    base = rf.RandomFourierFeatures(64, sampler=sampler, variant=variant, random_state=1).fit(X)
    np.testing.assert_allclose(
        gp.features_.frequencies_, base.frequencies_ * (l0 / gp.length_scale_), rtol=1e-13
    )


def test_optimized_rff_is_a_stationary_point_of_an_independent_lml():
    # The LML as a function of (ln l, ln s2, ln sn2) computed in NumPy from the
    # fitted frequencies (rescaled by l* / l): its central-difference gradient
    # at the optimum is ~0 (L-BFGS stops at |grad of -LML/N| ~ 1e-5..1e-8).
    X, y = _smooth_data(300, 2, 2)
    rff = rf.RandomFourierFeatures(80, random_state=3)
    gp = RandomFeatureGPR(rff, optimize=ALL_HYPER, n_restarts=1, random_state=0).fit(X, y)
    W, m = gp.features_.frequencies_, gp.features_.frequencies_.shape[0]
    l_star = gp.length_scale_

    def lml(theta):
        ls, kv, nv = np.exp(theta)
        u = X @ (W * (l_star / ls)).T
        phi = np.sqrt(kv / m) * np.hstack([np.cos(u), np.sin(u)])
        return _lml_direct(phi, y, nv)

    t0 = np.log([l_star, gp.kernel_variance_, gp.noise_variance_])
    assert lml(t0) == pytest.approx(gp.log_marginal_likelihood_, rel=1e-10)
    h = 1e-5
    grad = [(lml(t0 + h * e) - lml(t0 - h * e)) / (2 * h) for e in np.eye(3)]
    assert np.max(np.abs(grad)) < 1e-3 * len(y), grad


@pytest.mark.parametrize("length_scale", [[0.8], [0.7, 1.6, 2.4]])
def test_one_evaluation_and_its_gradient_match_numpy_central_differences(length_scale):
    # One length scale, or one per dimension (ARD): the frequencies drawn
    # at 1.3 are rescaled column by column, W_ja 1.3 / l_a.
    X, y = _smooth_data(90, 3, 8)
    rff = rf.RandomFourierFeatures(40, length_scale=1.3, random_state=2).fit(X)
    W, m = rff.frequencies_, rff.frequencies_.shape[0]
    k = len(length_scale)

    def lml(theta):
        ls, (kv, nv) = np.exp(theta[:k]), np.exp(theta[k:])
        u = X @ (W * (1.3 / ls)).T
        return _lml_direct(np.sqrt(kv / m) * np.hstack([np.cos(u), np.sin(u)]), y, nv)

    args = {"drawn_length_scale": [1.3], "center": True, "chunk_size": 16}
    t0 = np.log([*length_scale, 1.7, 0.05])
    value, grad = _core.feature_gp_lml(
        rff._feature_map(),
        X,
        y,
        length_scale=length_scale,
        kernel_variance=1.7,
        noise_variance=0.05,
        **args,
    )
    assert value == pytest.approx(lml(t0), rel=1e-10)
    h = 1e-5
    fd = [(lml(t0 + h * e) - lml(t0 - h * e)) / (2 * h) for e in np.eye(k + 2)]
    # Central differences err by O(h^2 f''') + O(eps |f| / h), ~1e-7 here.
    np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-6)
    for name, bad in [
        ("noise_variance", {"length_scale": length_scale, "noise_variance": -1.0}),
        ("length_scale", {"length_scale": [-1.0] * k, "noise_variance": 0.05}),
    ]:
        with pytest.raises(InvalidInputError, match=name):
            _core.feature_gp_lml(rff._feature_map(), X, y, kernel_variance=1.7, **bad, **args)


def test_ard_fit_approaches_the_exact_ard_optimum():
    # The second input is irrelevant: the exact GP's ARD optimum gives it a
    # long length scale, and so does the feature-space fit with many
    # frequencies. As in the scalar test, what converges is the exact LML
    # at the feature-space optimum (the Gram error is O(1/sqrt(m))).
    rng = np.random.default_rng(11)
    X = rng.uniform(-1.5, 1.5, (120, 2))
    y = np.sin(1.7 * X[:, 0]) + 0.1 * rng.standard_normal(120)
    exact = ExactGPR(ard=True, n_restarts=0).fit(X, y)
    rff = rf.RandomFourierFeatures(1024, random_state=0)
    gp = RandomFeatureGPR(rff, optimize=ALL_HYPER, ard=True, n_restarts=0).fit(X, y)
    assert gp.length_scale_.shape == (2,) and gp.features_.length_scale.shape == (2,)
    assert gp.length_scale_[1] > 3 * gp.length_scale_[0]
    assert abs(np.log(gp.noise_variance_ / exact.noise_variance_)) < 0.1
    at = ExactGPR(
        length_scale=gp.length_scale_,
        kernel_variance=gp.kernel_variance_,
        noise_variance=gp.noise_variance_,
        ard=True,
        optimize=(),
    ).fit(X, y)
    shortfall = exact.log_marginal_likelihood_ - at.log_marginal_likelihood_
    # The exact optimum is the maximum; the shortfall is quadratic in the
    # optimum's O(1/sqrt(m)) shift, well under 1e-2 per row at m = 512.
    assert -1e-6 < shortfall < 0.01 * len(y), shortfall
    # The transformer at the optimum is the one the statistics were taken with.
    again = RandomFeatureGPR.from_stats(gp.features_, gp.stats_, noise_variance=gp.noise_variance_)
    np.testing.assert_allclose(again.predict(X[:5]), gp.predict(X[:5]), rtol=1e-12)


# The structured sampler's bias warning for d = 3 says nothing about the map.
@pytest.mark.filterwarnings("ignore:sampler='structured' is noticeably biased")
@pytest.mark.parametrize("sampler", ["mc", "structured", "qmc"])
def test_an_ard_fitted_transformer_is_refitted_and_fitted_again_as_it_is(sampler):
    from sklearn.base import clone

    X, y = _smooth_data(150, 3, 4)
    rff = rf.RandomFourierFeatures(64, length_scale=0.8, sampler=sampler, random_state=0)
    gp = RandomFeatureGPR(rff, optimize=ALL_HYPER, ard=True, n_restarts=0).fit(X, y)
    ls = gp.length_scale_
    assert ls.shape == (3,) and np.ptp(np.log(ls)) > 0.5
    # A clone refitted draws the same map: the unit frequencies with column a
    # divided by l_a, where the fit rescaled the draw at 0.8 by 0.8 / l_a
    # (the frequencies a few roundings apart, and so the projections).
    again = clone(gp.features_).fit(X)
    w = gp.features_.frequencies_
    np.testing.assert_allclose(again.frequencies_, w, rtol=8e-16, atol=0)
    eps = np.finfo(np.float64).eps
    tol = gp.features_.scale_ * 16 * eps * (np.abs(X) @ np.abs(w).T).max()
    np.testing.assert_allclose(again.transform(X), gp.features_.transform(X), rtol=0, atol=tol)
    # Fitted again with its length scales fixed (no ard needed): the LML is
    # the direct N x N one of its features at the fitted noise variance.
    fixed = RandomFeatureGPR(gp.features_, optimize=("noise_variance",)).fit(X, y)
    np.testing.assert_array_equal(fixed.length_scale_, ls)
    phi = fixed.features_.transform(X)
    assert fixed.log_marginal_likelihood_ == pytest.approx(
        _lml_direct(phi, y, fixed.noise_variance_), rel=1e-10
    )
    # With ard=True the fit starts from its length scales: at the optimum.
    refit = RandomFeatureGPR(gp.features_, optimize=ALL_HYPER, ard=True, n_restarts=0).fit(X, y)
    assert refit.log_marginal_likelihood_ >= gp.log_marginal_likelihood_ - 1e-6
    np.testing.assert_allclose(np.log(refit.length_scale_), np.log(ls), atol=1e-3)
    # One shared length scale cannot be fitted from three.
    with pytest.raises(InvalidInputError, match=r"length_scale.*set ard=True"):
        RandomFeatureGPR(gp.features_, optimize=ALL_HYPER).fit(X, y)


def test_ard_needs_length_scale_in_optimize_and_fourier_features():
    X, y = _smooth_data(40, 2, 7)
    rff = rf.RandomFourierFeatures(16, random_state=0)
    for optimize in (None, ("noise_variance",)):
        with pytest.raises(InvalidInputError, match="ard=True"):
            RandomFeatureGPR(rff, optimize=optimize, ard=True).fit(X, y)
    mac = rf.MaclaurinFeatures(16, kernel="gaussian", random_state=0)
    with pytest.raises(InvalidInputError, match="RandomFourierFeatures"):
        RandomFeatureGPR(mac, optimize=ALL_HYPER, ard=True).fit(X, y)


def test_an_ard_fit_refuses_a_variance_start_beyond_reach_as_the_isotropic_fit_does():
    # The noise variance's maximum at the start length scales lies beyond
    # e^40 times a start of 1e-20 (or 1e-300): the run could not reach it.
    # The ARD fit used to start there anyway and end at the edge of the
    # range (an LML of -24.5 against 37.9 from the default start, or
    # -1.5e299), silently; it now refuses the start as the fit with one
    # length scale does.
    rng = np.random.default_rng(0)
    X = rng.standard_normal((100, 3))
    y = np.sin(X.sum(1)) + 0.1 * rng.standard_normal(100)
    rff = rf.RandomFourierFeatures(64, random_state=0)
    for noise in (1e-20, 1e-300):
        for ard in (False, True):
            gp = RandomFeatureGPR(
                rff, noise_variance=noise, optimize=ALL_HYPER, ard=ard, random_state=0
            )
            with pytest.raises(InvalidInputError, match=r"moved noise_variance beyond e\^"):
                gp.fit(X, y)
    fitted = RandomFeatureGPR(rff, optimize=ALL_HYPER, ard=True, random_state=0).fit(X, y)
    assert fitted.log_marginal_likelihood_ > 30.0


def test_a_length_scale_fit_with_both_variances_fixed_keeps_to_resolved_lmls():
    # With both variances fixed, the LML at a length scale where their
    # ratio exceeds what the float64 statistics resolve is their rounding
    # (Q(r) cancels below 0: an LML near +1e306), which the search used to
    # follow: this Maclaurin fit ended at length scale 8.6e-35 with an LML
    # of -20350 against -256 at its start. Such length scales now count as
    # ones that cannot be evaluated.
    rng = np.random.default_rng(0)
    X = rng.standard_normal((300, 3))
    y = np.sin(X.sum(1)) + 0.1 * rng.standard_normal(300)
    mac = rf.MaclaurinFeatures(128, kernel="exponential", random_state=0)
    start = RandomFeatureGPR(mac, noise_variance=0.1 * y.var()).fit(X, y)
    fitted = RandomFeatureGPR(mac, optimize=("length_scale",), random_state=0).fit(X, y)
    assert fitted.log_marginal_likelihood_ >= start.log_marginal_likelihood_
    # A ratio that no length scale resolves (1e18 on 300 rows) is refused.
    rff = rf.RandomFourierFeatures(256, kernel_variance=1e6, random_state=0)
    gp = RandomFeatureGPR(rff, noise_variance=1e-12, optimize=("length_scale",), random_state=0)
    with pytest.raises(InvalidInputError, match=r"ratio 1\.000e18 exceeds .* resolve"):
        gp.fit(X[:, :1], np.sin(3 * X[:, 0]))


def test_optimized_maclaurin_lml_equals_the_direct_low_rank_computation():
    X, y = _smooth_data(150, 3, 4)
    mac = rf.MaclaurinFeatures(48, kernel="gaussian", random_state=0)
    gp = RandomFeatureGPR(mac, optimize=ALL_HYPER, n_restarts=0).fit(X, y)
    assert gp.n_iter_ > 0 and gp.features_.length_scale == gp.length_scale_
    # The allocation is the one fitted at the initial length scale.
    np.testing.assert_array_equal(gp.features_.allocation_, mac.fit(X).allocation_)
    lml = _lml_direct(gp.features_.transform(X), y, gp.noise_variance_)
    assert gp.log_marginal_likelihood_ == pytest.approx(lml, rel=1e-10)


@pytest.mark.parametrize("scale", [1e4, 1e-4])
@pytest.mark.parametrize("kind", ["rff", "rff_ard", "maclaurin"])
def test_the_fit_follows_the_units_of_the_inputs(kind, scale):
    # The transformers at their default length scale 1, inputs 1e4 times
    # larger (or smaller) than that suits: the fit is the one on the unit
    # inputs with the length scales scaled, as ExactGPR's is. The Fourier
    # fit starts from the data's scale (the features of (s x, s l) are
    # those of (x, l)); the Maclaurin map, whose allocation is chosen at
    # its own length scale, is also refitted where the fit ends.
    X, y = _smooth_data(400, 2, 6)

    def fit(X):
        if kind == "maclaurin":
            f = rf.MaclaurinFeatures(48, random_state=0)
        else:
            f = rf.RandomFourierFeatures(48, random_state=0)
        return RandomFeatureGPR(f, optimize=ALL_HYPER, ard=kind == "rff_ard", n_restarts=0).fit(
            X, y
        )

    unit, scaled = fit(X), fit(X * scale)
    if kind == "maclaurin":
        # Another allocation (chosen at a length scale the unit fit's
        # optimum is near, not at it): another model, as good within a
        # few hundredths of a nat per row.
        assert scaled.log_marginal_likelihood_ > unit.log_marginal_likelihood_ - 0.05 * len(y)
        assert abs(np.log(scaled.length_scale_ / scale / unit.length_scale_)) < 0.2
        assert scaled.n_iter_ > unit.n_iter_
        return
    # Both runs end at the same maximum within their stopping rules: the
    # profiled search when its parabola promises at most 5e-11 nats per row;
    # L-BFGS (ARD) when the gradient of -LML/N is below 1e-5, which leaves
    # |g|^2 / (2 kappa) per row to gain, up to 5e-9 along directions of
    # curvature kappa down to 1e-2 (the flat ridges of length scale and
    # kernel variance).
    per_row = 5e-9 if kind == "rff_ard" else 1e-10
    assert abs(scaled.log_marginal_likelihood_ - unit.log_marginal_likelihood_) < per_row * len(y)
    np.testing.assert_allclose(
        np.atleast_1d(scaled.length_scale_) / scale, np.atleast_1d(unit.length_scale_), rtol=1e-3
    )
    np.testing.assert_allclose(
        [scaled.kernel_variance_, scaled.noise_variance_],
        [unit.kernel_variance_, unit.noise_variance_],
        rtol=1e-3,
    )


def test_with_many_features_the_optimum_approaches_exact_gpr():
    # The LML is flat along a ridge where the length scale and the kernel
    # variance grow together, so the fitted pair scatters along it from draw
    # to draw; what converges is the exact LML at the feature-space optimum.
    # Its shortfall from the exact maximum is quadratic in the optimum's
    # shift, which is O(1/sqrt(m)) (the Gram error), so it shrinks like 1/m:
    # from m = 32 to m = 512 frequencies by ~16x on average (asserted: 4x).
    # The noise variance (the residual level) is well determined by both.
    X, y = _smooth_data(200, 2, 5)
    exact = ExactGPR(length_scale=1.0, n_restarts=0).fit(X, y)

    def shortfall(n_components, seed):
        rff = rf.RandomFourierFeatures(n_components, random_state=seed)
        gp = RandomFeatureGPR(rff, optimize=ALL_HYPER, n_restarts=0).fit(X, y)
        at = ExactGPR(
            length_scale=gp.length_scale_,
            kernel_variance=gp.kernel_variance_,
            noise_variance=gp.noise_variance_,
            optimize=(),
        ).fit(X, y)
        return gp, exact.log_marginal_likelihood_ - at.log_marginal_likelihood_

    big, small = [shortfall(1024, s) for s in range(3)], [shortfall(64, s) for s in range(3)]
    for gp, loss in big:
        assert loss > -1e-6  # the exact optimum is the maximum
        assert abs(np.log(gp.noise_variance_ / exact.noise_variance_)) < 0.05
        # The LML itself: the Gram error moves it by a few per cent per row.
        assert abs(gp.log_marginal_likelihood_ - exact.log_marginal_likelihood_) < 0.03 * len(y)
    mean_big = np.mean([loss for _, loss in big])
    mean_small = np.mean([loss for _, loss in small])
    assert mean_big < mean_small / 4, (mean_big, mean_small)


def test_optimize_subset_keeps_the_rest_and_the_model_pickles():
    X, y = _smooth_data(120, 2, 6)
    rff = rf.RandomFourierFeatures(32, kernel_variance=0.7, random_state=0)
    gp = RandomFeatureGPR(rff, noise_variance=0.05, optimize=["length_scale"], n_restarts=0).fit(
        X, y
    )
    assert (gp.kernel_variance_, gp.noise_variance_) == (0.7, 0.05)
    assert gp.length_scale_ != 1.0
    again = pickle.loads(pickle.dumps(gp))
    np.testing.assert_array_equal(again.predict(X[:7]), gp.predict(X[:7]))
    # No optimize: the transformer as given, no iterations.
    plain = RandomFeatureGPR(rff, noise_variance=0.05).fit(X, y)
    assert plain.n_iter_ == 0 and plain.length_scale_ == 1.0


@pytest.mark.parametrize(
    "features",
    [
        RBFSampler(n_components=20, random_state=0),
        rf.NystroemFeatures(n_components=20, random_state=0),
        rf.RandomFourierFeatures(16, random_state=0),
    ],
    ids=["RBFSampler", "NystroemFeatures", "RandomFourierFeatures"],
)
def test_an_empty_optimize_fits_nothing_as_none_does(features):
    # optimize=() names no hyperparameter: the fit is optimize=None's, with
    # any transformer (it used to be refused for those without a
    # marginal-likelihood fit).
    X, y = _smooth_data(40, 2, 7)
    plain = RandomFeatureGPR(features, noise_variance=0.05).fit(X, y)
    empty = RandomFeatureGPR(features, noise_variance=0.05, optimize=()).fit(X, y)
    assert empty.n_iter_ == 0
    assert empty.log_marginal_likelihood_ == plain.log_marginal_likelihood_
    np.testing.assert_array_equal(empty.predict(X[:5]), plain.predict(X[:5]))


def test_optimize_bad_input_is_a_clear_error():
    X, y = _smooth_data(40, 2, 7)
    with pytest.raises(InvalidInputError, match="RandomFourierFeatures or MaclaurinFeatures"):
        RandomFeatureGPR(RBFSampler(n_components=20), optimize=ALL_HYPER).fit(X, y)
    # With ard=True the error names the one transformer that has a length
    # scale per dimension (it used to name MaclaurinFeatures too).
    for features in (RBFSampler(n_components=20), rf.MaclaurinFeatures(16, random_state=0)):
        with pytest.raises(InvalidInputError, match=r"`ard=True` needs .*RandomFourierFeatures \("):
            RandomFeatureGPR(features, optimize=ALL_HYPER, ard=True).fit(X, y)
    rff = rf.RandomFourierFeatures(16, random_state=0)
    with pytest.raises(InvalidInputError, match=r"optimize.*'lengthscale'"):
        RandomFeatureGPR(rff, optimize=["lengthscale"]).fit(X, y)
    with pytest.raises(ValueError, match="n_restarts"):
        RandomFeatureGPR(rff, optimize=ALL_HYPER, n_restarts=-1).fit(X, y)
    Xn = X.copy()
    Xn[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        RandomFeatureGPR(rff, optimize=ALL_HYPER).fit(Xn, y)


@parametrize_with_checks(
    [
        # Defaults: the RandomFourierFeatures of sklearn's gamma="scale",
        # seeded from the outer random_state (check_fit_idempotent).
        RandomFeatureGPR(),
        ExactGPR(n_restarts=0, random_state=0),
        RandomFeatureGPR(
            RBFSampler(gamma=0.1, n_components=200, random_state=0), noise_variance=0.01
        ),
        RandomFeatureGPR(
            rf.RandomFourierFeatures(64, random_state=0),
            optimize=ALL_HYPER,
            n_restarts=0,
            random_state=0,
        ),
    ]
)
def test_sklearn_compatible(estimator, check):
    check(estimator)


def test_default_features_and_random_state_pass_down():
    # features=None: RandomFourierFeatures at scikit-learn's gamma="scale"
    # length scale sqrt(d Var(X) / 2), seeded from the outer random_state.
    rng = np.random.default_rng(5)
    X = rng.standard_normal((60, 4)) * 3.0
    y = np.sin(X[:, 0])
    gp = RandomFeatureGPR(random_state=7).fit(X, y)
    assert isinstance(gp.features_, rf.RandomFourierFeatures)
    assert gp.features_.length_scale == pytest.approx(np.sqrt(4 * X.var() / 2), rel=1e-12)
    assert gp.features_.random_state == gp.seed_ % 2**32
    again = RandomFeatureGPR(random_state=7).fit(X, y)
    np.testing.assert_array_equal(gp.predict(X), again.predict(X))
    # A transformer left at random_state=None gets the outer seed; one with
    # its own seed keeps it.
    a = RandomFeatureGPR(rf.RandomFourierFeatures(16), random_state=3).fit(X, y)
    b = RandomFeatureGPR(rf.RandomFourierFeatures(16), random_state=3).fit(X, y)
    np.testing.assert_array_equal(a.predict(X), b.predict(X))
    assert a.features_.random_state == a.seed_ % 2**32
    own = RandomFeatureGPR(rf.RandomFourierFeatures(16, random_state=11), random_state=3)
    assert own.fit(X, y).features_.random_state == 11
    assert RandomFeatureGPR(rf.RandomFourierFeatures(16)).fit(X, y).features_.random_state is None


@pytest.mark.parametrize(
    "make",
    [
        ExactGPR,
        partial(RandomFeatureGPR, rf.RandomFourierFeatures(50, random_state=0)),
        partial(rf.SparseGPR, 10),
    ],
    ids=["exact", "features", "sparse"],
)
def test_a_failed_fit_keeps_the_previous_model(make):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 2))
    y = np.sin(X[:, 0])
    gp = make(random_state=0).fit(X, y)
    names = ("n_features_in_", "seed_", "length_scale_", "kernel_variance_", "noise_variance_")
    # RandomFeatureGPR draws no seed_ for a seeded transformer.
    before = {name: getattr(gp, name, None) for name in names}
    mean = gp.predict(X)
    # Fails after the new width (3 columns) is read.
    with pytest.raises(InvalidInputError, match="optimize"):
        gp.set_params(optimize=("bogus",)).fit(np.hstack([X, X[:, :1]]), y)
    for name, value in before.items():
        assert getattr(gp, name, None) == value, name
    np.testing.assert_array_equal(gp.predict(X), mean)
    fresh = make(optimize=("bogus",))
    with pytest.raises(InvalidInputError, match="optimize"):
        fresh.fit(X, y)
    with pytest.raises(NotFittedError):
        fresh.predict(X)
    assert not [k for k in vars(fresh) if k.endswith("_") and not k.startswith("__")]


def test_a_refused_partial_fit_chunk_leaves_the_statistics_as_they_were():
    # Targets whose sums overflow, then features whose sums do: each chunk
    # is refused and the next chunks add as if it had not been offered.
    rng = np.random.default_rng(3)
    X = rng.normal(size=(60, 2))
    y = np.sin(X[:, 0])
    gp = RandomFeatureGPR(deterministic_features(2, 8), noise_variance=0.1)
    gp.partial_fit(X[:30], y[:30])
    with pytest.raises(InvalidInputError, match="`y`"):
        gp.partial_fit(X[30:35], np.full(5, 1e200))
    # One row of features 3e153 has sums of 9e306, thirty more 2.8e308.
    huge = SufficientStatistics(8).accumulate(np.full((1, 8), 3e153), [1.0])
    gram = huge.gram
    with pytest.raises(InvalidInputError, match="`X`"):
        huge.accumulate(np.full((30, 8), 3e153), np.ones(30))
    assert huge.n_samples == 1
    np.testing.assert_array_equal(huge.gram, gram)
    gp.partial_fit(X[30:], y[30:])
    one = RandomFeatureGPR(deterministic_features(2, 8), noise_variance=0.1).fit(X, y)
    assert gp.stats_.n_samples == 60
    np.testing.assert_allclose(gp.predict(X[:5]), one.predict(X[:5]), rtol=1e-10, atol=1e-12)


def test_a_partial_fit_batch_refused_part_way_adds_none_of_its_rows():
    # The batch's third chunk of 5 rows has targets whose sums overflow:
    # its first two chunks are not kept either.
    rng = np.random.default_rng(4)
    X = rng.normal(size=(45, 2))
    y = np.sin(X[:, 0])
    make = partial(RandomFeatureGPR, deterministic_features(2, 8), noise_variance=0.1, chunk_size=5)
    gp = make().partial_fit(X[:20], y[:20])
    bad = y[20:35].copy()
    bad[-1] = 1e200
    with pytest.raises(InvalidInputError, match="`y`"):
        gp.partial_fit(X[20:35], bad)
    assert gp.stats_.n_samples == 20
    gp.partial_fit(X[35:], y[35:])
    want = make().partial_fit(X[:20], y[:20]).partial_fit(X[35:], y[35:])
    assert gp.stats_.n_samples == want.stats_.n_samples == 30
    np.testing.assert_array_equal(gp.stats_.gram, want.stats_.gram)
    np.testing.assert_array_equal(gp.predict(X[:5]), want.predict(X[:5]))


def test_a_failed_first_partial_fit_leaves_the_model_unfitted():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 2))
    gp = RandomFeatureGPR(RBFSampler(random_state=0), device="gpu")
    with pytest.raises(InvalidInputError, match="RBFSampler"):
        gp.partial_fit(X, X[:, 0])
    assert not hasattr(gp, "features_")
    gp.set_params(device="cpu").partial_fit(X, X[:, 0])
    assert gp.features_.n_features_in_ == 2


@pytest.mark.parametrize("make", [ExactGPR, partial(rf.SparseGPR, 5)], ids=["exact", "sparse"])
def test_length_scale_must_be_a_number_or_one_per_column(make):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(20, 2))
    y = np.sin(X[:, 0])
    with pytest.raises(InvalidInputError, match=r"length_scale.*0-D or 1-D"):
        make(length_scale=[[1.0, 1.0]], ard=True).fit(X, y)
    with pytest.raises(rf.InvalidDtypeError, match="length_scale"):
        make(length_scale=[1.0 + 1j, 1.0], ard=True).fit(X, y)
    gp = make(length_scale=np.array([1.0, 2.0]), ard=True, optimize=()).fit(X, y)
    np.testing.assert_array_equal(gp.length_scale_, [1.0, 2.0])


def test_sparse_gp_refuses_non_real_inducing_inputs():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(20, 2))
    for bad in (X[:4] + 1j, np.array([["a", "b"]])):
        with pytest.raises(rf.InvalidDtypeError, match="inducing"):
            rf.SparseGPR(inducing=bad).fit(X, X[:, 0])
