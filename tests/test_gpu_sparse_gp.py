"""``SparseGPR(device=...)``: the model's statistics ``K_uf K_fu``, ``K_uf y``
on the GPU against the float64 CPU model, within first-order bounds derived
from the float32 rounding of docs/math/sparse_gp.rst, section Devices; the
device choice, its errors and pickling.

Like tests/test_gpu.py these run for real on Mesa's lavapipe (installed by
`make test`), so an absent adapter is a failure; sizes are small.
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from randfeat_rs import (
    GpuError,
    InvalidInputError,
    NotPositiveDefiniteError,
    SparseGPR,
    kernel_matrix,
)
from randfeat_rs import gpu as rgpu

U32 = 2.0**-24


def gamma(k: int) -> float:
    return k * U32 / (1 - k * U32)


def value_bounds(kernel: str, u: np.ndarray, w: np.ndarray) -> np.ndarray:
    """``eps[i, m]``: the relative error bound of the float32 kernel value
    ``k(x_i, z_m)`` from the scaled, centered inputs ``u`` (N x d) and ``w``
    (M x d), as docs/math/sparse_gp.rst, section Devices, states it (the
    same bound as the Rust test of ``gpu::inducing_gram``)."""
    delta = u[:, None, :] - w[None, :, :]
    e = 1.01 * U32 * (np.abs(u)[:, None, :] + np.abs(w)[None, :, :] + np.abs(delta))
    if kernel == "laplacian":
        rho = np.abs(delta).sum(-1)
        spread = e.sum(-1)
    else:
        rho = (delta**2).sum(-1)
        spread = (2 * np.abs(delta) * e + e**2).sum(-1)
    d_rho = spread + gamma(u.shape[1] + 1) * (rho + spread)
    if kernel == "gaussian":
        d_log = 0.5 * d_rho
    elif kernel == "laplacian":
        d_log = d_rho
    else:
        c = {"matern12": 1.0, "matern32": 3.0, "matern52": 5.0}[kernel]
        ratio = np.divide(d_rho, np.sqrt(rho), out=np.full_like(rho, np.inf), where=rho > 0)
        d_log = np.sqrt(c) * np.minimum(np.sqrt(d_rho), ratio) + 7 * U32 * np.sqrt(c * rho)
    return np.expm1(d_log) + 12 * U32


def model_bounds(gp: SparseGPR, X: np.ndarray, y: np.ndarray, Xt: np.ndarray) -> dict:
    """First-order bounds on how far the GPU model's bound, predictive mean
    and latent variance may lie from the float64 model with the same
    hyperparameters and inducing inputs: the entrywise bounds ``B_S``,
    ``B_b`` on the float32 statistics (every kernel is positive, so
    ``|S~ - S| <= sum_i k_im k_im' ((1 + eps_im)(1 + eps_im')(1 + gamma_64) - 1)``,
    and ``b`` with ``u`` for the rounding of ``y - mean(y)``), pushed
    through ``w = Sigma^{-1} b / s``, ``Sigma = K_uu + S / s``
    (``s`` the noise variance): ``|d mu| <= |Sigma^{-1} k_*|^T (B_b + B_S |w|) / s``,
    ``|d v| <= |Sigma^{-1} k_*|^T B_S |Sigma^{-1} k_*| / s``, and
    ``|dF| <= <|dF/dS|, B_S> + <|dF/db|, B_b>`` with the adjoints of
    src/gp/sparse/bound.rs, ``dF/dS = (K_uu^{-1} - Sigma^{-1}) / (2 s) - a a^T / (2 s^3)``,
    ``dF/db = a / s^2``, ``a = Sigma^{-1} b``."""
    ls = np.broadcast_to(gp.length_scale_, (X.shape[1],))
    z = gp.inducing_points_
    var, s = gp.kernel_variance_, gp.noise_variance_

    def k(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return var * kernel_matrix(a / ls, b / ls, kernel=gp.kernel, length_scale=1.0)

    kf = k(X, z)
    center = (z / ls).mean(0)
    eps = value_bounds(gp.kernel, X / ls - center, z / ls - center)
    kp = kf * (1 + eps)
    yc = y - y.mean()
    # The compensated Gram's accumulation error (src/gpu/gram.rs).
    acc = U32 + 3 * len(X) * U32**2
    b_s = (1 + acc) * (kp.T @ kp) - kf.T @ kf
    b_b = (1 + acc) * (1 + U32) * (kp.T @ np.abs(yc)) - kf.T @ np.abs(yc)
    kuu = k(z, z) + gp.jitter_ * np.eye(len(z))
    S, b = kf.T @ kf, kf.T @ yc
    sigma = kuu + S / s
    a = np.linalg.solve(sigma, b)
    w = a / s
    p = np.abs(np.linalg.solve(sigma, k(Xt, z).T))
    d_s = (np.linalg.inv(kuu) - np.linalg.inv(sigma)) / (2 * s) - np.outer(a, a) / (2 * s**3)
    return {
        "mean": p.T @ (b_b + b_s @ np.abs(w)) / s,
        "var": (p * (b_s @ p)).sum(0) / s,
        "lml": (np.abs(d_s) * b_s).sum() + np.abs(a / s**2) @ b_b,
        "stats": np.abs(b_s).max() / np.abs(S).max(),
    }


def _data(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2.0, 2.0, (n, 3)) + 30.0
    y = np.sin(2.0 * X[:, 0]) + 0.5 * X[:, 2] + 0.1 * rng.standard_normal(n)
    return X, y


@pytest.mark.usefixtures("gpu_adapter")
@pytest.mark.parametrize(
    "kernel, length_scale",
    [("gaussian", 1.1), ("laplacian", 2.5), ("matern32", [0.9, 1.4, 2.0])],
)
def test_gpu_model_matches_cpu_within_the_float32_bounds(kernel, length_scale):
    # Fixed hyperparameters: the GPU pass is the fit's only one. Data far from
    # the origin (the centering keeps the float32 differences accurate). The
    # factor 2 on the first-order bounds covers the second-order terms (the
    # relative perturbation of the statistics is below 1e-5 here, see
    # "stats").
    X, y = _data(400, 0)
    Xt = _data(30, 1)[0]
    kw = dict(
        n_inducing=25,
        inducing="random",
        kernel=kernel,
        length_scale=length_scale,
        ard=isinstance(length_scale, list),
        kernel_variance=1.3,
        noise_variance=0.05,
        optimize=(),
        random_state=3,
    )
    cpu = SparseGPR(**kw).fit(X, y)
    before = rgpu.dispatch_count()
    gpu = SparseGPR(device="gpu", **kw).fit(X, y)
    assert rgpu.dispatch_count() > before, "the statistics must run on the GPU"
    assert cpu.device_ == "cpu" and gpu.device_ == "gpu"
    np.testing.assert_array_equal(gpu.inducing_points_, cpu.inducing_points_)
    bounds = model_bounds(cpu, X, y, Xt)
    assert bounds["stats"] < 1e-5
    mu_c, sd_c = cpu.predict(Xt, return_std=True)
    before = rgpu.dispatch_count()
    mu_g, sd_g = gpu.predict(Xt, return_std=True)
    assert rgpu.dispatch_count() == before, "predictions run on the CPU in float64"
    assert np.all(np.abs(mu_g - mu_c) <= 2 * bounds["mean"])
    assert np.all(np.abs(sd_g**2 - sd_c**2) <= 2 * bounds["var"] + 1e-14)
    lml_c, lml_g = cpu.log_marginal_likelihood_, gpu.log_marginal_likelihood_
    assert abs(lml_g - lml_c) <= 2 * bounds["lml"]
    # The bounds are worst cases (every rounding aligned; here 10^2 to 10^3
    # times the observed differences) but not vacuous: within 10% of the
    # targets' scale for the mean and 2% of the bound itself.
    assert np.all(bounds["mean"] < 0.1 * np.abs(y).max())
    assert bounds["lml"] < 0.02 * abs(lml_c)


@pytest.mark.usefixtures("gpu_adapter")
def test_fitted_hyperparameters_are_the_cpu_fit_and_pickling_keeps_the_model():
    # The L-BFGS evaluations run on the CPU in float64: the same path, the
    # same hyperparameters; only the final statistics come from the GPU.
    X, y = _data(300, 2)
    kw = dict(n_inducing=20, random_state=0)
    cpu = SparseGPR(**kw).fit(X, y)
    gpu = SparseGPR(device="gpu", **kw).fit(X, y)
    assert gpu.device_ == "gpu"
    assert gpu.n_iter_ == cpu.n_iter_ > 0
    np.testing.assert_array_equal(gpu.length_scale_, cpu.length_scale_)
    assert gpu.noise_variance_ == cpu.noise_variance_
    bounds = model_bounds(cpu, X, y, X[:10])
    assert abs(gpu.log_marginal_likelihood_ - cpu.log_marginal_likelihood_) <= 2 * bounds["lml"]
    back = pickle.loads(pickle.dumps(gpu))
    assert back.device_ == "gpu"
    np.testing.assert_array_equal(back.predict(X[:10]), gpu.predict(X[:10]))
    assert back.log_marginal_likelihood_ == gpu.log_marginal_likelihood_


@pytest.mark.usefixtures("gpu_adapter")
def test_device_choice_errors_and_fallbacks(monkeypatch):
    X, y = _data(60, 3)
    kw = dict(n_inducing=8, optimize=(), random_state=0)
    # A software adapter (lavapipe) is picked by "auto" only when allowed.
    plain = "cpu" if rgpu.info()["software"] else "gpu"
    assert SparseGPR(device="auto", **kw).fit(X, y).device_ == plain
    monkeypatch.setenv("RANDFEAT_GPU", "software")
    before = rgpu.dispatch_count()
    assert SparseGPR(device="auto", **kw).fit(X, y).device_ == "gpu"
    assert rgpu.dispatch_count() > before
    # FITC has no GPU path: an error for "gpu", the CPU for "auto".
    with pytest.raises(InvalidInputError, match="method='fitc' has no GPU path"):
        SparseGPR(method="fitc", device="gpu", **kw).fit(X, y)
    assert SparseGPR(method="fitc", device="auto", **kw).fit(X, y).device_ == "cpu"
    monkeypatch.setenv("RANDFEAT_GPU", "off")
    before = rgpu.dispatch_count()
    with pytest.raises(GpuError, match="RANDFEAT_GPU=off"):
        SparseGPR(device="gpu", **kw).fit(X, y)
    auto = SparseGPR(device="auto", **kw).fit(X, y)
    assert auto.device_ == "cpu"
    np.testing.assert_array_equal(auto.predict(X), SparseGPR(**kw).fit(X, y).predict(X))
    assert rgpu.dispatch_count() == before, "nothing may run on a hidden GPU"
    with pytest.raises(ValueError, match="device"):
        SparseGPR(device="cuda", **kw).fit(X, y)


def test_statistics_too_ill_conditioned_for_float32_are_refused_and_auto_falls_back(monkeypatch):
    # K_uu's condition number is about 1e11 and the noise variance 1e-3: the
    # float32 rounding of the kernel values leaves I + L^-1 S L^-T / noise
    # indefinite or the Nystrom trace above the kernel's (the CPU fits it).
    rng = np.random.default_rng(1)
    X = rng.standard_normal((100, 8))
    y = np.sin(X.sum(1) / 2) + 0.1 * rng.standard_normal(100)
    kw = dict(
        n_inducing=50,
        inducing="random",
        length_scale=56.0,
        kernel_variance=1.0,
        noise_variance=1e-3,
        optimize=(),
        random_state=0,
    )
    cpu = SparseGPR(**kw).fit(X, y)
    with pytest.raises(NotPositiveDefiniteError, match=r"float32 statistics .* M = 50"):
        SparseGPR(device="gpu", **kw).fit(X, y)
    monkeypatch.setenv("RANDFEAT_GPU", "software")
    before = rgpu.dispatch_count()
    with pytest.warns(RuntimeWarning, match="computed on the CPU in float64"):
        auto = SparseGPR(device="auto", **kw).fit(X, y)
    assert rgpu.dispatch_count() > before, "the GPU was tried first"
    assert auto.device_ == "cpu"
    assert auto.log_marginal_likelihood_ == cpu.log_marginal_likelihood_
    np.testing.assert_array_equal(auto.predict(X), cpu.predict(X))
    # With the hyperparameters fitted, the fall-back keeps the CPU's optimum.
    fitted = {**kw, "optimize": ("kernel_variance",), "max_iter": 5}
    ref = SparseGPR(**fitted).fit(X, y)
    with pytest.warns(RuntimeWarning):
        auto = SparseGPR(device="auto", **fitted).fit(X, y)
    assert auto.device_ == "cpu" and auto.n_iter_ == ref.n_iter_
    np.testing.assert_array_equal(auto.predict(X), ref.predict(X))
