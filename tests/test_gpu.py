"""GPU kernels (wgpu) against the CPU / float64 references, and device selection.

These tests run for real: `make test` installs Mesa's software Vulkan driver
(lavapipe) when the machine has no Vulkan driver, so an absent adapter is a
failure, not a skip. Sizes are small because a software rasterizer is slow.
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
import scipy.linalg

import randfeat_rs as rf
from randfeat_rs import GpuError, InvalidInputError
from randfeat_rs import gpu as rgpu

U32 = 2.0**-24  # unit roundoff of float32


def gamma(k: int) -> float:
    return k * U32 / (1 - k * U32)


def test_gpu_info_describes_the_adapter(gpu_adapter):
    info = gpu_adapter
    assert isinstance(info["name"], str) and info["name"]
    assert info["backend"] in {"vulkan", "metal", "dx12"}
    assert info["device_type"] in {"discrete", "integrated", "virtual", "cpu", "other"}
    assert info["software"] == (info["device_type"] == "cpu")
    assert info["fwht_block"] >= 1024 and info["fwht_block"] & (info["fwht_block"] - 1) == 0
    assert info["limits"]["max_storage_buffer_binding_size"] > 0
    assert info["dispatches"] == rgpu.dispatch_count()
    assert rgpu.is_available()


def fwht_bound(x: np.ndarray, scale: float) -> np.ndarray:
    """Per-row bound on |gpu - exact|: log2(n) rounded additions of
    magnitude <= sum_j |x_j| each (plus the float32 rounding of the input)."""
    n = x.shape[-1]
    levels = max(np.log2(n), 1.0) + 2
    return gamma(int(levels)) * np.abs(x.astype(np.float64)).sum(axis=-1, keepdims=True) * scale


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("normalized", [False, True])
def test_fwht_gpu_matches_exact(gpu_adapter, dtype, normalized):
    block = gpu_adapter["fwht_block"]
    rng = np.random.default_rng(3)
    # n = 1, small, the shared-memory limit, and twice/four times it (global passes);
    # row counts not multiples of the workgroup.
    for rows, n in [(3, 1), (5, 8), (37, 256), (2, block), (3, 2 * block), (1, 4 * block)]:
        x = rng.standard_normal((rows, n)).astype(dtype)
        scale = 1 / np.sqrt(n) if normalized else 1.0
        if n <= 256:
            exact = (x.astype(np.float64) @ scipy.linalg.hadamard(n).astype(np.float64)) * scale
        else:  # the float64 CPU transform (checked against scipy in test_fwht.py)
            exact = rf.fwht(x.astype(np.float64)) * scale
        before = rgpu.dispatch_count()
        got = rf.fwht(x, normalized=normalized, device="gpu")
        assert rgpu.dispatch_count() > before, "the GPU path did not run"
        assert got.dtype == dtype and got.shape == x.shape
        assert np.all(np.abs(got - exact) <= fwht_bound(x, scale)), (rows, n)


@pytest.mark.usefixtures("gpu_adapter")
def test_fwht_gpu_1d_out_inplace_and_deterministic():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((9, 64)).astype(np.float32)
    want = rf.fwht(x, device="gpu")
    np.testing.assert_array_equal(rf.fwht(x, device="gpu"), want)  # same order of sums
    out = np.empty_like(x)
    assert rf.fwht(x, out=out, device="gpu") is out
    np.testing.assert_array_equal(out, want)
    y = x.copy()
    assert rf.fwht(y, out=y, device="gpu") is y
    np.testing.assert_array_equal(y, want)
    np.testing.assert_array_equal(rf.fwht(x[2], device="gpu"), want[2])
    np.testing.assert_allclose(want, rf.fwht(x), rtol=0, atol=fwht_bound(x, 1.0).max())


@pytest.mark.usefixtures("gpu_adapter")
def test_fwht_gpu_empty_and_bad_input():
    for dtype in (np.float32, np.float64):
        e = rf.fwht(np.zeros((0, 8), dtype), device="gpu")
        assert e.shape == (0, 8) and e.dtype == dtype
    with pytest.raises(InvalidInputError, match="power of two"):
        rf.fwht(np.ones((2, 6)), device="gpu")
    with pytest.raises(InvalidInputError, match="device"):
        rf.fwht(np.ones(4), device="tpu")


def check_gram(a: np.ndarray, b: np.ndarray, got: np.ndarray) -> None:
    """The documented bound |G - A^T B| <= gamma_64 |A|^T |B| (entrywise)."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    exact = a64.T @ b64
    bound = gamma(64) * (np.abs(a64).T @ np.abs(b64))
    assert got.dtype == np.float64 and got.shape == exact.shape
    assert np.all(np.abs(got - exact) <= bound)


@pytest.mark.usefixtures("gpu_adapter")
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gram_matches_within_pairwise_bound(dtype):
    rng = np.random.default_rng(5)
    # N not a multiple of 16 / 256 / the 4096-row split; D not a multiple of the 64 tile.
    for n, d in [(1, 1), (77, 5), (4099, 70), (300, 130)]:
        phi = rng.uniform(-1, 1, (n, d)).astype(dtype)
        y = rng.standard_normal(n).astype(dtype)
        before = rgpu.dispatch_count()
        g, b = rgpu.gram(phi, y)
        assert rgpu.dispatch_count() > before
        check_gram(phi, phi, g)
        np.testing.assert_array_equal(g, g.T)
        assert b is not None and b.shape == (d,)
        check_gram(phi, y[:, None], b[:, None])
        y2 = rng.standard_normal((n, 3)).astype(dtype)
        g2, b2 = rgpu.gram(phi, y2)
        np.testing.assert_array_equal(g2, g)
        assert b2 is not None
        check_gram(phi, y2, b2)


@pytest.mark.usefixtures("gpu_adapter")
def test_gram_empty_and_errors():
    g, b = rgpu.gram(np.zeros((0, 3), np.float32))
    assert b is None
    np.testing.assert_array_equal(g, np.zeros((3, 3)))
    g, b = rgpu.gram(np.zeros((4, 0)), np.ones(4))
    assert g.shape == (0, 0) and b is not None and b.shape == (0,)
    with pytest.raises(InvalidInputError, match="rows of y"):
        rgpu.gram(np.ones((4, 2)), np.ones(3))
    with pytest.raises(InvalidInputError, match="phi"):
        rgpu.gram(np.ones(4))


def rff_reference(x, w, phases, variant, scale):
    proj = x.astype(np.float64) @ w.astype(np.float64).T
    if variant == "cos_bias":
        return scale * np.cos(proj + phases.astype(np.float64))
    return scale * np.hstack([np.cos(proj), np.sin(proj)])


@pytest.mark.usefixtures("gpu_adapter")
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("variant", ["cos_bias", "cos_sin"])
def test_rff_matches_reference_to_1e4(dtype, variant):
    rng = np.random.default_rng(6)
    # d not a multiple of the 16-wide step, m (and so D) and N not multiples of 64.
    for n, d, m in [(1, 1, 1), (70, 3, 65), (130, 37, 20)]:
        x = rng.standard_normal((n, d)).astype(dtype)
        w = (rng.standard_normal((m, d)) / 0.8).astype(dtype)
        phases = rng.uniform(0, 2 * np.pi, m).astype(dtype) if variant == "cos_bias" else None
        scale = np.sqrt(2.0 / m)
        before = rgpu.dispatch_count()
        got = rgpu.rff_features(x, w, phases, variant=variant, scale=scale)
        assert rgpu.dispatch_count() > before
        want = rff_reference(x, w, phases, variant, scale)
        assert got.dtype == dtype and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-4 * scale)


@pytest.mark.usefixtures("gpu_adapter")
def test_rff_empty_and_errors():
    w = np.ones((5, 4), np.float32)
    out = rgpu.rff_features(np.zeros((0, 4), np.float32), w, variant="cos_sin")
    assert out.shape == (0, 10) and out.dtype == np.float32
    with pytest.raises(InvalidInputError, match="phases"):
        rgpu.rff_features(np.ones((2, 4)), w)
    with pytest.raises(InvalidInputError, match="phases"):
        rgpu.rff_features(np.ones((2, 4)), w, np.zeros(5), variant="cos_sin")
    with pytest.raises(InvalidInputError, match="length of phases"):
        rgpu.rff_features(np.ones((2, 4)), w, np.zeros(3))
    with pytest.raises(InvalidInputError, match="columns of W"):
        rgpu.rff_features(np.ones((2, 3)), w, np.zeros(5))
    with pytest.raises(InvalidInputError, match="variant"):
        rgpu.rff_features(np.ones((2, 4)), w, np.zeros(5), variant="sin")
    with pytest.raises(InvalidInputError, match="scale"):
        rgpu.rff_features(np.ones((2, 4)), w, variant="cos_sin", scale=np.inf)


def max_binding_floats(info: dict) -> int:
    """The most float32 one binding holds on the adapter."""
    lim = info["limits"]
    return min(lim["max_storage_buffer_binding_size"], lim["max_buffer_size"]) // 4


def test_gram_beyond_a_binding_is_refused_before_allocating(gpu_adapter):
    # D^2 = 4e10 floats: refused before D x D float64 (320 GB) is allocated.
    with pytest.raises(GpuError, match="largest binding"):
        rgpu.gram(np.ones((1, 200_000), np.float32))
    # Phi^T Phi fits, with Phi^T y of this many targets it does not.
    d = 4096
    t = max_binding_floats(gpu_adapter) // d - d + 1
    with pytest.raises(GpuError, match="largest binding"):
        rgpu.gram(np.ones((1, d), np.float32), np.ones((1, t), np.float32))


@pytest.mark.usefixtures("gpu_adapter")
def test_gram_refuses_float32_overflow_and_non_finite_input():
    # Finite in float64, but the products (1e40) overflow float32 on the device.
    phi = np.array([[1e20, 1.0], [2.0, 3.0]])
    with pytest.raises(InvalidInputError, match=r"`phi`.*float32"):
        rgpu.gram(phi, np.ones(2))
    with pytest.raises(InvalidInputError, match=r"`phi`.*float32"):
        rgpu.gram(np.array([[1e10], [1.0]]), np.array([1e30, 1.0]))
    with pytest.raises(InvalidInputError, match="`phi`"):
        rgpu.gram(np.array([[np.nan, 1.0]]))
    with pytest.raises(InvalidInputError, match="`y`"):
        rgpu.gram(np.ones((2, 2)), np.array([1.0, np.inf]))


@pytest.mark.usefixtures("gpu_adapter")
def test_rff_large_projections_stay_within_the_scale():
    """Arguments up to float32's largest: the features stay in [-scale, scale]
    and within scale * (gamma_1 |t| + 2^-23 |t| + 1e-6) (the documented bound for
    d = 1 without phases) of the float64 cos/sin of the float32 argument."""
    t = np.array([1e3, 5.1e4, 1e6, 5e7, 1e9, 1e10, 1e20, 3e38, np.finfo(np.float32).max])
    t = np.concatenate([t, -t, np.geomspace(1, 3e38, 200)]).astype(np.float32)
    scale = 0.5
    got = rgpu.rff_features(t[:, None], np.ones((1, 1), np.float32), variant="cos_sin", scale=scale)
    t64 = np.abs(t.astype(np.float64))[:, None]
    assert np.abs(got).max() <= scale
    want = scale * np.hstack(
        [np.cos(t.astype(np.float64))[:, None], np.sin(t.astype(np.float64))[:, None]]
    )
    tol = scale * (gamma(1) * t64 + 2 * U32 * t64 + 1e-6)
    assert np.all(np.abs(got - want) <= tol)


@pytest.mark.usefixtures("gpu_adapter")
def test_rff_refuses_non_finite_x_and_float32_overflow():
    w = np.ones((1, 1))
    for bad in (np.nan, np.inf):
        with pytest.raises(InvalidInputError, match="`x`"):
            rgpu.rff_features(np.array([[bad]]), w, variant="cos_sin")
    # Finite in float64, beyond float32's range on the device.
    with pytest.raises(InvalidInputError, match=r"`x`.*float32"):
        rgpu.rff_features(np.array([[1e39]]), w, variant="cos_sin")


@pytest.mark.usefixtures("gpu_adapter")
def test_rff_output_too_large_names_x():
    # 1e6 x 2e6 float32 (8 TB): refused naming an argument of this function.
    big = np.ones((1_000_000, 1), np.float32)
    with pytest.raises(InvalidInputError, match="`x`") as err:
        rgpu.rff_features(big, big, variant="cos_sin")
    assert "n_components" not in str(err.value)


@pytest.mark.usefixtures("gpu_adapter")
def test_fwht_rows_longer_than_the_chunk_cap(set_gpu_chunk_bytes):
    # A row of 4096 floats under a 4096-byte cap runs as one-row chunks.
    x = np.random.default_rng(9).standard_normal((3, 4096))
    whole = rf.fwht(x, device="gpu")
    set_gpu_chunk_bytes(4096)
    np.testing.assert_array_equal(rf.fwht(x, device="gpu"), whole)


def test_set_chunk_bytes_refuses_values_out_of_range():
    for bad in (-1, 100, 2**64, 2**70):
        with pytest.raises(InvalidInputError, match=f"got {bad}"):
            rgpu.set_chunk_bytes(bad)


def _gpu_in_child(q) -> None:
    try:
        rgpu.rff_features(np.ones((2, 1)), np.ones((1, 1)), variant="cos_sin")
        q.put("no error")
    except GpuError as e:
        q.put(str(e))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX-only")
@pytest.mark.filterwarnings("ignore:.*fork.*:DeprecationWarning")
@pytest.mark.usefixtures("gpu_adapter")
def test_forked_child_gets_a_gpu_error_instead_of_hanging(run_forked):
    # The parent's context exists (the fixture made it); the child inherits it.
    rgpu.rff_features(np.ones((2, 1)), np.ones((1, 1)), variant="cos_sin")
    _, msg = run_forked(_gpu_in_child)
    assert "forked" in msg and "spawn" in msg, msg


@pytest.mark.usefixtures("gpu_adapter")
def test_streaming_in_small_chunks(set_gpu_chunk_bytes):
    """A 4 KiB chunk cap forces many chunks; results keep their bounds."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((50, 256)).astype(np.float32)
    phi = rng.uniform(-1, 1, (600, 20)).astype(np.float32)
    w = rng.standard_normal((40, 256)).astype(np.float32)
    whole = rf.fwht(x, device="gpu")
    set_gpu_chunk_bytes(4096)
    np.testing.assert_array_equal(rf.fwht(x, device="gpu"), whole)
    g, _ = rgpu.gram(phi)
    check_gram(phi, phi, g)
    # Many chunks through the double-buffered Gram path, with targets.
    yy = rng.standard_normal((600, 2)).astype(np.float32)
    g, gy = rgpu.gram(phi, yy)
    check_gram(phi, phi, g)
    check_gram(phi, yy, gy)
    feats = rgpu.rff_features(x / 16, w, variant="cos_sin", scale=0.5)
    want = rff_reference(x / 16, w, None, "cos_sin", 0.5)
    np.testing.assert_allclose(feats, want, rtol=0, atol=0.5e-4)
    with pytest.raises(InvalidInputError, match="4096"):
        rgpu.set_chunk_bytes(100)


@pytest.mark.usefixtures("gpu_adapter")
def test_gpu_env_off_errors_and_auto_falls_back(monkeypatch):
    x = np.random.default_rng(8).standard_normal((4, 16))
    monkeypatch.setenv("RANDFEAT_GPU", "off")
    assert rf.gpu_info() is None and not rgpu.is_available()
    before = rgpu.dispatch_count()
    with pytest.raises(GpuError, match="no GPU adapter"):
        rf.fwht(x, device="gpu")
    with pytest.raises(GpuError, match="RANDFEAT_GPU=off"):
        rgpu.gram(x)
    with pytest.raises(GpuError):
        rgpu.rff_features(x, x, variant="cos_sin")
    assert rgpu.resolve_device("auto") == "cpu"
    np.testing.assert_array_equal(rf.fwht(x, device="auto"), rf.fwht(x))
    assert rgpu.dispatch_count() == before, "auto must not touch the GPU when it is hidden"


def test_auto_uses_hardware_only_unless_software_allowed(gpu_adapter, monkeypatch):
    info = gpu_adapter
    x = np.random.default_rng(9).standard_normal((4, 16)).astype(np.float32)
    expected = "cpu" if info["software"] else "gpu"
    assert rgpu.resolve_device("auto") == expected
    before = rgpu.dispatch_count()
    rf.fwht(x, device="auto")
    assert (rgpu.dispatch_count() > before) == (expected == "gpu")
    monkeypatch.setenv("RANDFEAT_GPU", "software")
    assert rgpu.resolve_device("auto") == "gpu"
    before = rgpu.dispatch_count()
    got = rf.fwht(x, device="auto")
    assert rgpu.dispatch_count() > before
    np.testing.assert_allclose(got, rf.fwht(x), rtol=0, atol=fwht_bound(x, 1.0).max())
    assert rgpu.resolve_device("cpu") == "cpu"
    with pytest.raises(InvalidInputError, match="device"):
        rgpu.resolve_device("cuda")


def test_no_vulkan_driver_is_a_clear_gpu_error():
    """A fresh process whose Vulkan loader finds no driver: "gpu" raises, "auto" falls back."""
    code = (
        "import numpy as np, randfeat_rs as rf\n"
        "assert rf.gpu_info() is None\n"
        "x = np.ones((2, 4))\n"
        "assert (rf.fwht(x, device='auto') == rf.fwht(x)).all()\n"
        "try:\n"
        "    rf.fwht(x, device='gpu')\n"
        "except rf.GpuError as e:\n"
        "    print(e)\n"
    )
    env = dict(os.environ)
    env.pop("RANDFEAT_GPU", None)
    env["VK_ICD_FILENAMES"] = "/nonexistent/icd.json"
    env["VK_DRIVER_FILES"] = "/nonexistent/icd.json"
    res = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert res.returncode == 0, res.stderr
    assert "no GPU adapter found" in res.stdout
