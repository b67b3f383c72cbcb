"""``device=`` on the estimators: PolynomialSketch, RandomFourierFeatures and
RandomFeatureGPR on the GPU against their CPU paths, and the error and
fallback paths.

Like tests/test_gpu.py these run for real on Mesa's lavapipe (installed by
`make test`), so an absent adapter is a failure; sizes are small.
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.kernel_approximation import RBFSampler
from sklearn.utils.estimator_checks import parametrize_with_checks

import randfeat_rs as rf
from randfeat_rs import (
    GpuError,
    InvalidInputError,
    PolynomialSketch,
    RandomFeatureGPR,
    RandomFourierFeatures,
)
from randfeat_rs import gpu as rgpu

U32 = 2.0**-24


def gamma(k: int) -> float:
    return k * U32 / (1 - k * U32)


@pytest.fixture(autouse=True)
def _default_env(monkeypatch):
    monkeypatch.delenv("RANDFEAT_GPU", raising=False)


def need_gpu() -> None:
    if rf.gpu_info() is None:
        pytest.fail("no GPU adapter: `make test` installs Mesa's lavapipe (mesa-vulkan-drivers)")


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


@pytest.mark.parametrize(("sketch", "complex_weights", "degree"), SKETCHES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_polynomial_sketch_gpu_matches_cpu(sketch, complex_weights, degree, dtype):
    need_gpu()
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
    # The random parameters are the CPU's, bit for bit.
    for k, v in cpu.random_params_.items():
        np.testing.assert_array_equal(gpu.random_params_[k], v)
    # Pickling keeps the device and the exact transform; empty input works.
    again = pickle.loads(pickle.dumps(gpu))
    assert again.device_ == "gpu"
    np.testing.assert_array_equal(again.transform(X), got)
    assert gpu.transform(X[:0]).shape == (0, 21)


@pytest.mark.parametrize(
    ("variant", "sampler", "n_components"),
    [("cos_sin", "mc", 33), ("cos_bias", "orthogonal", 20), ("cos_sin", "structured", 32)],
)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fourier_gpu_matches_cpu(variant, sampler, n_components, dtype):
    need_gpu()
    X = np.random.default_rng(2).standard_normal((70, 16)).astype(dtype)
    kw = dict(length_scale=2.0, kernel_variance=1.7, variant=variant, sampler=sampler)
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
    ]


@pytest.mark.parametrize("features", gpr_features(), ids=lambda f: type(f).__name__)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gpr_gpu_statistics_match_cpu(features, dtype):
    """Features and Phi^T Phi, Phi^T y on the device equal the CPU
    accumulation of the same (float32) features to the pairwise bound
    gamma_64 (|Phi|^T |Phi|) of gpu.gram."""
    need_gpu()
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
    yc = y - gp.stats_._stats.y_shift
    bound_y = gamma(64) * (a.T @ np.abs(yc))
    ref_phi_y = s_ref._stats.phi_y + (s_ref._stats.y_shift - s_gpu._stats.y_shift) * (
        s_ref._stats.phi_sum
    )
    assert np.all(np.abs(s_gpu._stats.phi_y - ref_phi_y) <= bound_y + 1e-300)
    assert np.all(np.abs(s_gpu._stats.phi_sum - s_ref._stats.phi_sum) <= gamma(64) * a.sum(0))
    # partial_fit on the GPU merges exactly like the CPU path.
    gp2 = RandomFeatureGPR(features, noise_variance=0.1, device="gpu")
    gp2.partial_fit(X[:100], y[:100]).partial_fit(X[100:], y[100:])
    assert gp2.stats_.n_samples == 300
    assert np.all(np.abs(gp2.stats_.gram - s_ref.gram) <= gamma(64) * (a.T @ a) + 1e-300)


def test_gpu_hidden_errors_and_auto_falls_back(monkeypatch):
    need_gpu()
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


def test_auto_with_software_allowed_uses_the_gpu(monkeypatch):
    need_gpu()
    monkeypatch.setenv("RANDFEAT_GPU", "software")
    X = np.random.default_rng(7).standard_normal((10, 3))
    assert PolynomialSketch(8, device="auto").fit(X).device_ == "gpu"


def test_configurations_without_a_gpu_kernel():
    need_gpu()
    X = np.random.default_rng(8).standard_normal((10, 3))
    with pytest.raises(InvalidInputError, match="tensor_sketch"):
        PolynomialSketch(8, sketch="tensor_sketch", device="gpu").fit(X)
    ps = PolynomialSketch(8, sketch="tensor_sketch", device="auto").fit(X)
    assert ps.device_ == "cpu"
    with pytest.raises(InvalidInputError, match="RBFSampler"):
        RandomFeatureGPR(RBFSampler(n_components=8), device="gpu").fit(X, X[:, 0])
    gp = RandomFeatureGPR(RBFSampler(n_components=8), device="auto").fit(X, X[:, 0])
    assert gp.device_ == "cpu"
    with pytest.raises(ValueError, match="device"):
        RandomFourierFeatures(8, device="cuda").fit(X)


# The GPU path keeps the scikit-learn contract (dtype, subset and order
# invariance: every row is computed independently on the device). cos_bias:
# some checks force n_components = 1, which cos_sin rejects.
@parametrize_with_checks(
    [
        PolynomialSketch(16, degree=3, bias=1.0, device="gpu", random_state=0),
        PolynomialSketch(15, sketch="gaussian", device="gpu", random_state=0),
        RandomFourierFeatures(16, variant="cos_bias", device="gpu", random_state=0),
    ]
)
def test_sklearn_compatible_on_gpu(estimator, check):
    check(estimator)
