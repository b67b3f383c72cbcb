"""``device=`` on the estimators: PolynomialSketch, RandomFourierFeatures,
MaclaurinFeatures, RandomFeatureGPR and LocalizedMaclaurinGPR on the GPU
against their CPU paths, ExactGPR's CPU-only ``device``, and the error and
fallback paths.

Like tests/test_gpu.py these run for real on Mesa's lavapipe (installed by
`make test`), so an absent adapter is a failure; sizes are small.
"""

from __future__ import annotations

import math
from functools import partial

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.kernel_approximation import RBFSampler
from sklearn.utils.estimator_checks import parametrize_with_checks

from randfeat_rs import (
    ExactGPR,
    GpuError,
    InvalidInputError,
    LocalizedMaclaurinGPR,
    MaclaurinFeatures,
    PolynomialSketch,
    RandomFeatureGPR,
    RandomFourierFeatures,
)
from randfeat_rs import gpu as rgpu

U32 = 2.0**-24


def gamma(k: int) -> float:
    return k * U32 / (1 - k * U32)


def sketch_tolerance(ps: PolynomialSketch, X: np.ndarray) -> np.ndarray:
    """Per-row bound on |gpu - cpu|: 1e-4 * prod_j M_j / sqrt(D), with M_j
    the largest sum_a |x'_a w_{j,ia}| of a factor (||x'||_1 for TensorSRHT),
    i.e. a relative accuracy of 1e-4 on the scale of the products."""
    xa = X.astype(np.float64) / ps.length_scale
    if ps.bias > 0:
        xa = np.hstack([np.full((X.shape[0], 1), np.sqrt(ps.bias)), xa])
    if ps.sketch == "tensor_srht":
        mass = np.abs(xa).sum(axis=1)
    else:
        w = ps.random_params_["weights"]  # (degree, rows, d')
        mass = np.max(np.abs(xa) @ np.abs(w).reshape(-1, w.shape[2]).T, axis=1)
    return 1e-4 * mass**ps.degree / np.sqrt(ps.n_sketch_features_)


SKETCHES = [
    ("gaussian", False, 2),
    ("gaussian", True, 3),
    ("rademacher", False, 3),
    ("rademacher", True, 1),
    ("tensor_srht", False, 3),
    ("tensor_srht", True, 2),
]


@pytest.mark.usefixtures("gpu_adapter")
@pytest.mark.parametrize(("sketch", "complex_weights", "degree"), SKETCHES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_polynomial_sketch_gpu_matches_cpu(sketch, complex_weights, degree, dtype):
    # d = 5 (+ bias: d' = 8), D = 21 (odd: a zero column with complex
    # weights; not a multiple of d'), N = 70 (not a multiple of 64 or 256).
    X = np.random.default_rng(1).standard_normal((70, 5)).astype(dtype)
    kw = dict(
        degree=degree,
        bias=0.5,
        length_scale=1.5,
        sketch=sketch,
        complex_weights=complex_weights,
        random_state=3,
    )
    cpu = PolynomialSketch(21, **kw).fit(X)
    gpu = PolynomialSketch(21, device="gpu", **kw).fit(X)
    assert cpu.device_ == "cpu" and gpu.device_ == "gpu"
    before = rgpu.dispatch_count()
    got = gpu.transform(X)
    assert rgpu.dispatch_count() > before, "device='gpu' must run on the GPU"
    want = cpu.transform(X.astype(np.float64))
    assert got.dtype == dtype and got.shape == want.shape
    tol = sketch_tolerance(cpu, X)[:, None] + 4 * U32 * np.abs(want)
    assert np.all(np.abs(got - want) <= tol)
    # The random parameters are the CPU's, bit for bit. (Pickling and empty
    # input on the GPU: test_common.py.)
    for k, v in cpu.random_params_.items():
        np.testing.assert_array_equal(gpu.random_params_[k], v)


@pytest.mark.usefixtures("gpu_adapter")
@pytest.mark.parametrize(
    ("variant", "sampler", "n_components", "length_scale"),
    [
        ("cos_sin", "mc", 33, 2.0),
        ("cos_bias", "orthogonal", 20, 2.0),
        ("cos_sin", "structured", 32, 2.0),
        # One per dimension: the structured draw formed into dense frequencies.
        ("cos_sin", "structured", 32, np.linspace(1.0, 3.0, 16)),
        ("cos_bias", "mc", 20, np.linspace(1.0, 3.0, 16)),
    ],
)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fourier_gpu_matches_cpu(variant, sampler, n_components, length_scale, dtype):
    X = np.random.default_rng(2).standard_normal((70, 16)).astype(dtype)
    kw = dict(length_scale=length_scale, kernel_variance=1.7, variant=variant, sampler=sampler)
    cpu = RandomFourierFeatures(n_components, random_state=4, **kw).fit(X)
    gpu = RandomFourierFeatures(n_components, random_state=4, device="gpu", **kw).fit(X)
    assert gpu.device_ == "gpu"
    before = rgpu.dispatch_count()
    got = gpu.transform(X)
    assert rgpu.dispatch_count() > before
    want = cpu.transform(X.astype(np.float64))
    assert got.dtype == dtype and got.shape == want.shape
    # The documented bound of gpu.rff_features: 1e-4 * |scale| for
    # projections of moderate size (here |x . w| < 20).
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-4 * cpu.scale_)
    if n_components % 2:
        assert np.all(got[:, -1] == 0)


def gpr_features():
    return [
        RandomFourierFeatures(33, length_scale=1.5, random_state=0),
        PolynomialSketch(21, degree=2, bias=1.0, sketch="tensor_srht", random_state=0),
        PolynomialSketch(
            17, degree=3, bias=0.5, sketch="rademacher", complex_weights=True, random_state=0
        ),
        MaclaurinFeatures(27, length_scale=2.0, random_state=0),
    ]


@pytest.mark.usefixtures("gpu_adapter")
@pytest.mark.parametrize("features", gpr_features(), ids=lambda f: type(f).__name__)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gpr_gpu_statistics_match_cpu(features, dtype):
    """Features and Phi^T Phi, Phi^T y on the device equal the CPU
    accumulation of the same (float32) features to the pairwise bound
    gamma_64 (|Phi|^T |Phi|) of gpu.gram."""
    rng = np.random.default_rng(5)
    X = rng.standard_normal((300, 4)).astype(dtype)
    y = np.sin(X.sum(axis=1)) + 0.1 * rng.standard_normal(300)
    before = rgpu.dispatch_count()
    gp = RandomFeatureGPR(features, noise_variance=0.1, device="gpu").fit(X, y)
    assert gp.device_ == "gpu" and rgpu.dispatch_count() > before
    # Reference: the same float32 features (the transformer on the GPU),
    # accumulated on the CPU in float64.
    ref = RandomFeatureGPR(
        clone(features).set_params(device="gpu"), noise_variance=0.1, chunk_size=64
    )
    ref.fit(X, y)
    assert ref.device_ == "cpu"
    phi = ref.features_.transform(X).astype(np.float64)
    a = np.abs(phi)
    s_gpu, s_ref = gp.stats_, ref.stats_
    assert s_gpu.n_samples == s_ref.n_samples == 300
    assert np.all(np.abs(s_gpu.gram - s_ref.gram) <= gamma(64) * (a.T @ a) + 1e-300)
    yc = y - gp.stats_.y_shift
    bound_y = gamma(64) * (a.T @ np.abs(yc))
    ref_phi_y = s_ref.phi_y_shifted + (s_ref.y_shift - s_gpu.y_shift) * (s_ref.phi_sum)
    assert np.all(np.abs(s_gpu.phi_y_shifted - ref_phi_y) <= bound_y + 1e-300)
    assert np.all(np.abs(s_gpu.phi_sum - s_ref.phi_sum) <= gamma(64) * a.sum(0))
    # partial_fit on the GPU merges exactly like the CPU path (the features
    # are fitted on the first batch: MaclaurinFeatures' center and allocation
    # depend on it, so the reference is fitted the same way).
    gp2 = RandomFeatureGPR(features, noise_variance=0.1, device="gpu")
    gp2.partial_fit(X[:100], y[:100]).partial_fit(X[100:], y[100:])
    ref2 = RandomFeatureGPR(
        clone(features).set_params(device="gpu"), noise_variance=0.1, chunk_size=64
    )
    ref2.partial_fit(X[:100], y[:100]).partial_fit(X[100:], y[100:])
    assert gp2.device_ == "gpu" and ref2.device_ == "cpu"
    assert gp2.stats_.n_samples == ref2.stats_.n_samples == 300
    a2 = np.abs(ref2.features_.transform(X).astype(np.float64))
    assert np.all(np.abs(gp2.stats_.gram - ref2.stats_.gram) <= gamma(64) * (a2.T @ a2) + 1e-300)


@pytest.mark.usefixtures("gpu_adapter")
def test_gpu_hidden_errors_and_auto_falls_back(monkeypatch):
    X = np.random.default_rng(6).standard_normal((20, 3))
    y = X[:, 0]
    monkeypatch.setenv("RANDFEAT_GPU", "off")
    before = rgpu.dispatch_count()
    for est in (PolynomialSketch(8, device="gpu"), RandomFourierFeatures(8, device="gpu")):
        with pytest.raises(GpuError, match="RANDFEAT_GPU=off"):
            est.fit(X)
    with pytest.raises(GpuError, match="RANDFEAT_GPU=off"):
        RandomFeatureGPR(RandomFourierFeatures(8), device="gpu").fit(X, y)
    for est in (
        PolynomialSketch(8, device="auto", random_state=0),
        RandomFourierFeatures(8, device="auto", random_state=0),
    ):
        est.fit(X)
        assert est.device_ == "cpu"
        cpu = type(est)(8, random_state=0).fit(X)
        np.testing.assert_array_equal(est.transform(X), cpu.transform(X))
    gp = RandomFeatureGPR(RandomFourierFeatures(8, random_state=0), device="auto").fit(X, y)
    assert gp.device_ == "cpu"
    assert rgpu.dispatch_count() == before, "nothing may run on a hidden GPU"


@pytest.mark.usefixtures("gpu_adapter")
def test_auto_with_software_allowed_uses_the_gpu(monkeypatch):
    monkeypatch.setenv("RANDFEAT_GPU", "software")
    X = np.random.default_rng(7).standard_normal((10, 3))
    assert PolynomialSketch(8, device="auto").fit(X).device_ == "gpu"


@pytest.mark.usefixtures("gpu_adapter")
def test_configurations_without_a_gpu_kernel():
    X = np.random.default_rng(8).standard_normal((10, 3))
    with pytest.raises(InvalidInputError, match="tensor_sketch"):
        PolynomialSketch(8, sketch="tensor_sketch", device="gpu").fit(X)
    ps = PolynomialSketch(8, sketch="tensor_sketch", device="auto").fit(X)
    assert ps.device_ == "cpu"
    ts = PolynomialSketch(8, sketch="tensor_sketch")
    with pytest.raises(InvalidInputError, match="tensor_sketch"):
        RandomFeatureGPR(ts, device="gpu").fit(X, X[:, 0])
    assert RandomFeatureGPR(ts, device="auto").fit(X, X[:, 0]).device_ == "cpu"
    with pytest.raises(InvalidInputError, match="RBFSampler"):
        RandomFeatureGPR(RBFSampler(n_components=8), device="gpu").fit(X, X[:, 0])
    gp = RandomFeatureGPR(RBFSampler(n_components=8), device="auto").fit(X, X[:, 0])
    assert gp.device_ == "cpu"
    with pytest.raises(ValueError, match="device"):
        RandomFourierFeatures(8, device="cuda").fit(X)


def maclaurin_row_bound(mf: MaclaurinFeatures, X: np.ndarray, center: np.ndarray) -> np.ndarray:
    """Per-row bound on |gpu - cpu| of MaclaurinFeatures with Rademacher or
    TensorSRHT sketches. Every weight has modulus 1, so each factor's
    sum_a |x~_a w_a| is at most M = ||x~||_1, and a factor computed in f32
    (x~ rounded: 1 rounding; a length-d dot product or a length-d' FWHT: at
    most d' + 1; a complex multiply: 3) is within gamma_(d'+5) M of its
    exact value. A degree-n block (n factors, the scale and the row factor
    sigma g: 3 more roundings) is then within
    gamma_(n (d' + 5) + 3) sigma g sqrt(a_n) M^n / sqrt(D_n) of the f64
    value, and the constant and h01 columns within gamma_4 sigma g (1 + |x~|)."""
    assert mf.sketch in ("rademacher", "tensor_srht")
    d = X.shape[1]
    dpad = 1 << (d - 1).bit_length()
    xt = (X.astype(np.float64) - center) / mf.length_scale
    m = np.abs(xt).sum(axis=1)
    sigma = np.sqrt(mf.kernel_variance)
    if mf.kernel == "gaussian":
        g = sigma * np.exp(-0.5 * (xt**2).sum(axis=1))
        coef = [1 / math.factorial(n) for n in range(len(mf.allocation_))]
    else:  # polynomial: a_n = binom(q, n) c^(q - n)
        q, c = mf.degree, mf.bias
        g = np.full(X.shape[0], sigma)
        coef = [math.comb(q, n) * c ** (q - n) for n in range(len(mf.allocation_))]
    first = 2 if mf.h01 else 1
    bound = gamma(4) * g * (1 + np.abs(xt).max(axis=1))
    for n in range(first, len(mf.allocation_)):
        dn = int(mf.allocation_[n])
        if dn:
            bound += gamma(n * (dpad + 5) + 3) * g * np.sqrt(coef[n]) * m**n / np.sqrt(dn)
    return bound


MACLAURIN = [
    dict(n_components=37, kernel="gaussian", length_scale=1.7, sketch="tensor_srht"),
    dict(
        n_components=40,
        kernel="gaussian",
        length_scale=2.0,
        sketch="tensor_srht",
        complex_weights=True,
        kernel_variance=1.3,
    ),
    # h01 + explicit allocation + complex + a zero column (1 + 5 + 2 * 14 = 34 of 35).
    dict(
        n_components=35,
        kernel="polynomial",
        degree=3,
        bias=1.0,
        length_scale=1.5,
        sketch="rademacher",
        complex_weights=True,
        h01=True,
        allocation=[1, 5, 10, 4],
    ),
]


@pytest.mark.usefixtures("gpu_adapter")
@pytest.mark.parametrize("params", MACLAURIN, ids=["srht", "srht-complex", "rademacher-h01"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_maclaurin_gpu_matches_cpu(set_gpu_chunk_bytes, params, dtype):
    # d = 5 (d' = 8), N = 70: not multiples of d', the 64 tile or the 256
    # workgroup; D not a multiple of d'.
    X = np.random.default_rng(11).standard_normal((70, 5)).astype(dtype)
    cpu = MaclaurinFeatures(random_state=2, **params).fit(X)
    gpu = MaclaurinFeatures(random_state=2, device="gpu", **params).fit(X)
    assert cpu.device_ == "cpu" and gpu.device_ == "gpu"
    np.testing.assert_array_equal(gpu.allocation_, cpu.allocation_)
    before = rgpu.dispatch_count()
    got = gpu.transform(X)
    assert rgpu.dispatch_count() > before, "device='gpu' must run on the GPU"
    want = cpu.transform(X.astype(np.float64))
    assert got.dtype == dtype and got.shape == want.shape
    center = np.zeros(5) if cpu.center_ is None else cpu.center_
    tol = maclaurin_row_bound(cpu, X, center)[:, None] + 4 * U32 * np.abs(want)
    assert np.all(np.abs(got - want) <= tol)
    if params["kernel"] == "gaussian":
        c = np.linspace(-0.5, 0.5, 5)
        got_c = gpu.transform_centered(X, c)
        want_c = cpu.transform_centered(X.astype(np.float64), c)
        tol_c = maclaurin_row_bound(cpu, X, c)[:, None] + 4 * U32 * np.abs(want_c)
        assert np.all(np.abs(got_c - want_c) <= tol_c)
    # Chunked streaming gives the same rows bit for bit. (Pickling and empty
    # input on the GPU: test_common.py.)
    set_gpu_chunk_bytes(4096)
    np.testing.assert_array_equal(gpu.transform(X), got)


@pytest.mark.usefixtures("gpu_adapter")
def test_maclaurin_device_errors_and_fallback(monkeypatch):
    X = np.random.default_rng(12).standard_normal((30, 3))
    x1 = X[:, :1]
    # No GPU kernel: the explicit map of one feature, TensorSketch blocks.
    with pytest.raises(InvalidInputError, match="one-dimensional"):
        MaclaurinFeatures(6, device="gpu").fit(x1)
    assert MaclaurinFeatures(6, device="auto").fit(x1).device_ == "cpu"
    # ... and RandomFeatureGPR over such a map neither.
    with pytest.raises(InvalidInputError, match="one-dimensional"):
        RandomFeatureGPR(MaclaurinFeatures(6), device="gpu").fit(x1, X[:, 0])
    gp = RandomFeatureGPR(MaclaurinFeatures(6), device="auto").fit(x1, X[:, 0])
    assert gp.device_ == "cpu"
    ts = dict(sketch="tensor_sketch", allocation="random", kernel="exponential")
    with pytest.raises(InvalidInputError, match="tensor_sketch"):
        MaclaurinFeatures(16, device="gpu", **ts).fit(X)
    assert MaclaurinFeatures(16, device="auto", **ts).fit(X).device_ == "cpu"
    with pytest.raises(ValueError, match="device"):
        MaclaurinFeatures(16, device="cuda").fit(X)
    # (A wrong number of features fails as on the CPU: test_common.py.)
    mf = MaclaurinFeatures(16, device="gpu", random_state=0).fit(X)
    # Hidden GPU: "gpu" is a GpuError, "auto" the CPU (and nothing runs there).
    monkeypatch.setenv("RANDFEAT_GPU", "off")
    before = rgpu.dispatch_count()
    with pytest.raises(GpuError, match="RANDFEAT_GPU=off"):
        MaclaurinFeatures(16, device="gpu").fit(X)
    with pytest.raises(GpuError, match="RANDFEAT_GPU=off"):
        mf.transform(X)
    auto = MaclaurinFeatures(16, device="auto", random_state=0).fit(X)
    assert auto.device_ == "cpu"
    cpu = MaclaurinFeatures(16, random_state=0).fit(X)
    np.testing.assert_array_equal(auto.transform(X), cpu.transform(X))
    with pytest.raises(GpuError, match="RANDFEAT_GPU=off"):
        LocalizedMaclaurinGPR(16, device="gpu").fit(X, X[:, 0])
    assert LocalizedMaclaurinGPR(16, device="auto").fit(X, X[:, 0]).device_ == "cpu"
    assert rgpu.dispatch_count() == before, "nothing may run on a hidden GPU"


def localized_bound(gp_cpu, X, y, Xt, n_components, noise, seed, max_degree):
    """|mu_gpu - mu_cpu| and |v_gpu - v_cpu| bounds per test point.

    Each centroid uses the training rows within the fitted cutoff (all N
    rows with tol = 0), the same on both paths. The GPU features of the
    centroid map satisfy |dPhi_ri| <= t_r (``maclaurin_row_bound``) and the
    Gram adds gamma_64 (|Phi|^T |Phi|) (gpu.gram), so entrywise
    |dG| <= t^T|Phi| + |Phi|^T t + t^T t + g64 (|Phi|+t)^T(|Phi|+t) and
    |d(Phi^T y)| <= (t + g64 (|Phi| + t))^T |y|. With A = G / s2 + I,
    k = ||A^-1|| = 1 / lambda_min(A) <= 1, b = Phi^T y / s2, beta = A^-1 b
    (all f64 from the CPU map) and e = ||dA|| <= ||dG||_F / s2 < 1 / k:
    ||d beta|| <= k (||db|| + e ||beta||) / (1 - k e), so
    |d mu*| <= ||phi*|| ||d beta|| and |d v*| <= ||phi*||^2 k^2 e / (1 - k e)
    (phi* is computed on the CPU in f64 in both paths)."""
    mf = MaclaurinFeatures(
        n_components, length_scale=gp_cpu.length_scale, max_degree=max_degree, random_state=seed
    ).fit(X)
    np.testing.assert_array_equal(mf.allocation_, gp_cpu.allocation_)
    cents = gp_cpu.centroids_
    nearest = np.argmin(((Xt[:, None, :] - cents[None]) ** 2).sum(-1), axis=1)
    yc = y - gp_cpu.y_mean_
    g64 = gamma(64)
    out_mu, out_v = np.zeros(len(Xt)), np.zeros(len(Xt))
    cutoff_sq = gp_cpu.cutoff_sq_
    for k, c in enumerate(cents):
        near = ((X - c) ** 2).sum(axis=1) < cutoff_sq
        phi = mf.transform_centered(X[near], c)
        a = np.abs(phi)
        t = maclaurin_row_bound(mf, X[near], c)[:, None] * np.ones_like(phi)
        big = a + t
        dg = t.T @ a + a.T @ t + t.T @ t + g64 * big.T @ big
        db = np.linalg.norm((t + g64 * big).T @ np.abs(yc[near])) / noise
        amat = phi.T @ phi / noise + np.eye(phi.shape[1])
        kappa = 1 / np.linalg.eigvalsh(amat)[0]
        beta = np.linalg.solve(amat, phi.T @ yc[near] / noise)
        e = np.linalg.norm(dg) / noise
        assert kappa * e < 0.5, "the test problem must keep the perturbation bound finite"
        dbeta = kappa * (db + e * np.linalg.norm(beta)) / (1 - kappa * e)
        for i in np.flatnonzero(nearest == k):
            ps = np.linalg.norm(mf.transform_centered(Xt[i : i + 1], c))
            out_mu[i] = ps * dbeta
            out_v[i] = ps**2 * kappa**2 * e / (1 - kappa * e)
    return out_mu, out_v


@pytest.mark.usefixtures("gpu_adapter")
def test_localized_gpu_matches_cpu():
    rng = np.random.default_rng(13)
    X = rng.uniform(-3, 3, (150, 3))
    y = np.sin(X[:, 0]) + 0.1 * X[:, 1] + 0.05 * rng.standard_normal(150)
    Xt = rng.uniform(-3, 3, (25, 3))
    kw = dict(
        length_scale=1.2,
        noise_variance=0.05,
        threshold=1.5,
        tol=0.0,
        max_degree=4,
        random_state=4,
    )
    cpu = LocalizedMaclaurinGPR(24, **kw).fit(X, y)
    gpu = LocalizedMaclaurinGPR(24, device="gpu", **kw).fit(X, y)
    assert cpu.device_ == "cpu" and gpu.device_ == "gpu"
    assert gpu.n_clusters_ == cpu.n_clusters_ >= 3
    np.testing.assert_array_equal(gpu.centroids_, cpu.centroids_)
    before = rgpu.dispatch_count()
    mu_g, sd_g = gpu.predict(Xt, return_std=True)
    assert rgpu.dispatch_count() > before, "the centroid statistics must run on the GPU"
    mu_c, sd_c = cpu.predict(Xt, return_std=True)
    bound_mu, bound_v = localized_bound(cpu, X, y, Xt, 24, 0.05, 4, 4)
    assert np.all(np.abs(mu_g - mu_c) <= bound_mu)
    assert np.all(np.abs(sd_g**2 - sd_c**2) <= bound_v + 1e-12)
    # With the norm-bound skipping on, each centroid's rows are a proper
    # subset, gathered on the device through its index list.
    kw_skip = dict(kw, length_scale=0.6, tol=1e-6)
    cpu_s = LocalizedMaclaurinGPR(24, **kw_skip).fit(X, y)
    gpu_s = LocalizedMaclaurinGPR(24, device="gpu", **kw_skip).fit(X, y)
    d2 = ((X[None, :, :] - cpu_s.centroids_[:, None, :]) ** 2).sum(-1)
    used = (d2 < cpu_s.cutoff_sq_).sum(axis=1)
    assert used.min() > 0 and used.max() < len(X), "the cutoff must drop rows"
    bound_mu, bound_v = localized_bound(cpu_s, X, y, Xt, 24, 0.05, 4, 4)
    mu_gs, sd_gs = gpu_s.predict(Xt, return_std=True)
    mu_cs, sd_cs = cpu_s.predict(Xt, return_std=True)
    assert np.all(np.abs(mu_gs - mu_cs) <= bound_mu)
    assert np.all(np.abs(sd_gs**2 - sd_cs**2) <= bound_v + 1e-12)
    # (Pickling keeps the device: test_common.py.) centers="test" has no GPU path.
    with pytest.raises(InvalidInputError, match="centers='test'"):
        LocalizedMaclaurinGPR(24, centers="test", device="gpu").fit(X, y)
    assert LocalizedMaclaurinGPR(24, centers="test", device="auto").fit(X, y).device_ == "cpu"


def test_exact_gpr_device_is_cpu_only():
    X = np.random.default_rng(14).standard_normal((20, 2))
    y = X[:, 0]
    with pytest.raises(InvalidInputError, match="float64"):
        ExactGPR(device="gpu").fit(X, y)
    with pytest.raises(InvalidInputError, match="LocalizedMaclaurinGPR"):
        ExactGPR(device="gpu").fit(X, y)
    gp = ExactGPR(device="auto", optimize=(), random_state=0).fit(X, y)
    assert gp.device_ == "cpu"
    ref = ExactGPR(optimize=(), random_state=0).fit(X, y)
    assert ref.device_ == "cpu"
    np.testing.assert_array_equal(gp.predict(X), ref.predict(X))
    with pytest.raises(ValueError, match="device"):
        ExactGPR(device="cuda").fit(X, y)


def test_random_feature_gpr_with_optimize_says_its_statistics_are_the_cpus():
    # The marginal-likelihood fit computes the statistics on the CPU in
    # float64: device="gpu" reported device_ = "gpu" for statistics that
    # were bit for bit the CPU's.
    X = np.random.default_rng(15).standard_normal((40, 2))
    y = np.sin(X[:, 0])

    def make(device):
        return RandomFeatureGPR(
            RandomFourierFeatures(32, random_state=0),
            optimize=("length_scale",),
            device=device,
            random_state=0,
        )

    with pytest.raises(InvalidInputError, match='`device="gpu"` is not available with `optimize`'):
        make("gpu").fit(X, y)
    auto, cpu = make("auto").fit(X, y), make("cpu").fit(X, y)
    assert auto.device_ == cpu.device_ == "cpu"
    np.testing.assert_array_equal(auto.predict(X), cpu.predict(X))


# The GPU path keeps the scikit-learn contract (dtype, subset and order
# invariance: every row is computed independently on the device).
@parametrize_with_checks(
    [
        MaclaurinFeatures(16, allocation="random", device="gpu", random_state=0),
        PolynomialSketch(16, degree=3, bias=1.0, device="gpu", random_state=0),
        PolynomialSketch(15, sketch="gaussian", device="gpu", random_state=0),
        RandomFourierFeatures(16, device="gpu", random_state=0),
        RandomFourierFeatures(16, variant="cos_bias", device="gpu", random_state=0),
    ]
)
def test_sklearn_compatible_on_gpu(estimator, check):
    check(estimator)


@pytest.mark.usefixtures("gpu_adapter")
@pytest.mark.parametrize(
    "make",
    [
        lambda: PolynomialSketch(16, degree=2, device="gpu", random_state=0),
        lambda: MaclaurinFeatures(16, device="gpu", random_state=0),
    ],
    ids=["sketch", "maclaurin"],
)
def test_gpu_features_that_overflow_are_refused(make):
    # The GPU computes in float32: a row far beyond the length scale
    # overflows there, and the transform refuses it as the CPU does.
    rng = np.random.default_rng(0)
    X = rng.standard_normal((64, 4))
    est = make().fit(X)
    far = X.copy()
    far[17, 0] = 1e30
    with pytest.raises(ValueError, match=r"`X`.*overflow"):
        est.transform(far)
    assert np.isfinite(est.transform(X)).all()


@pytest.mark.usefixtures("gpu_adapter")
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fourier_gpu_far_rows(dtype):
    # Rows far beyond the length scale: the GPU's features stay within the
    # scale (the cosines' range reduction holds for every float32 argument).
    rng = np.random.default_rng(0)
    X = rng.standard_normal((20, 4)).astype(dtype)
    est = RandomFourierFeatures(64, random_state=0, device="gpu").fit(X)
    far = X.copy()
    far[3, 0], far[7, 1], far[11, 2] = 1e9, -1e10, 1e30
    # (|cos| <= 1 times the float32 scale, at most scale_ (1 + u)).
    assert np.abs(est.transform(far)).max() <= est.scale_ * (1 + U32)
    # Beyond float32's range on the GPU: refused naming X and float32, not
    # with the polynomial sketches' message about `degree`.
    if dtype == np.float64:
        far[3, 0] = 1e39
        with pytest.raises(InvalidInputError, match=r"`X`.*float32") as err:
            est.transform(far)
        assert "degree" not in str(err.value)


@pytest.mark.usefixtures("gpu_adapter")
def test_gpu_statistics_beyond_float32_name_the_gpus_float32():
    # Targets past float32's range: the CPU sums them in float64, the GPU's
    # float32 products overflow, and the refusal says so (not float64's range).
    rng = np.random.default_rng(0)
    X = rng.standard_normal((50, 3))
    y = np.sin(X[:, 0]) * 1e39
    make = partial(RandomFeatureGPR, RandomFourierFeatures(16, random_state=0), noise_variance=1e76)
    assert np.isfinite(make(device="cpu").fit(X, y).predict(X[:2])).all()
    with pytest.raises(InvalidInputError, match=r"GPU's float32 products.*float32's range"):
        make(device="gpu").fit(X, y)
