"""GPU kernels vs the CPU path (and PyTorch on CUDA when installed).

Times, transfers included, the kernels that run on the GPU:
- FWHT of 100,000 x 4,096 (float32);
- Gram accumulation Phi^T Phi and Phi^T y at N = 1,000,000, D = 2,048;
- random Fourier features (cos_bias) at N = 1,000,000, d = 64, D = 8,192.

Large N is processed in row blocks (the time of one block times the number of
blocks), as a streaming fit would. When the adapter is a software rasterizer
(e.g. Mesa's lavapipe in CI) the sizes are scaled down automatically and the
figures are a functional check only, not a performance claim.

The CPU columns: randfeat_rs's FWHT; NumPy (BLAS) for Phi^T Phi and for
cos(X W^T + b), since the CPU Gram and RFF estimators live elsewhere.
Goal (ISSUE 8, on an H200): >= 20x the 16-core CPU path at N = 1e6 and >= half
the throughput of the same math in PyTorch-CUDA.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable, Optional

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine_line, median_time

import randfeat_rs as rf
from randfeat_rs import gpu


def torch_cuda():
    """The torch module when CUDA is usable, else None (with the reason printed)."""
    try:
        import torch
    except ImportError:
        print("PyTorch not installed: PyTorch-CUDA column skipped")
        return None
    if not torch.cuda.is_available():
        print("PyTorch has no CUDA device: PyTorch-CUDA column skipped")
        return None
    return torch


def torch_fwht(torch, x: np.ndarray) -> np.ndarray:
    t = torch.from_numpy(x).cuda()
    rows, n = t.shape
    h = 1
    while h < n:
        v = t.view(rows, n // (2 * h), 2, h)
        a, b = v[:, :, 0, :], v[:, :, 1, :]
        t = torch.stack((a + b, a - b), dim=2).view(rows, n)
        h *= 2
    return t.cpu().numpy()


def row(name: str, blocks: int, cpu: float, gpu_t: Optional[float], torch_t: Optional[float]):
    def fmt(t: Optional[float]) -> str:
        return "-" if t is None else f"{t * blocks:9.3f} s"

    speed = "-" if gpu_t is None else f"{cpu / gpu_t:6.2f}x"
    vs_torch = "-" if gpu_t is None or torch_t is None else f"{torch_t / gpu_t:5.2f}"
    print(f"{name:<34} {fmt(cpu):>11} {fmt(gpu_t):>11} {fmt(torch_t):>11} {speed:>8} {vs_torch:>8}")


def bench(name, blocks, cpu: Callable, gpu_fn: Optional[Callable], torch_fn, repeats):
    cpu_t = median_time(cpu, repeats=repeats)
    gpu_t = None if gpu_fn is None else median_time(gpu_fn, repeats=repeats)
    torch_t = None if torch_fn is None else median_time(torch_fn, repeats=repeats)
    row(name, blocks, cpu_t, gpu_t, torch_t)


def main() -> None:
    print(machine_line())
    info = gpu.info()
    torch = torch_cuda()
    if info is None:
        print("no GPU adapter: GPU column skipped (CPU only)")
        software = True
    else:
        software = bool(info["software"])
        print(f"GPU: {info['name']} ({info['backend']}, {info['device_type']}, {info['driver']})")
    # (rows per block, blocks) for each kernel; scaled down on a software rasterizer.
    if software:
        print(
            "software rasterizer (or no GPU): sizes scaled down; the GPU figures are a "
            "functional check only, not a performance claim"
        )
        fwht_rows, fwht_n, fwht_blocks = 2_000, 4_096, 1
        gram_rows, gram_d, gram_blocks = 8_192, 512, 1
        rff_rows, rff_d, rff_m, rff_blocks = 4_096, 64, 1_024, 1
        repeats = 3
    else:
        fwht_rows, fwht_n, fwht_blocks = 25_000, 4_096, 4
        gram_rows, gram_d, gram_blocks = 62_500, 2_048, 16
        rff_rows, rff_d, rff_m, rff_blocks = 31_250, 64, 8_192, 32
        repeats = 5
    rng = np.random.default_rng(0)
    on_gpu = info is not None
    print(
        f"{'kernel (total over blocks)':<34} {'CPU':>11} {'GPU':>11} {'torch-CUDA':>11} "
        f"{'GPU/CPU':>8} {'GPU/torch':>8}"
    )

    x = rng.standard_normal((fwht_rows, fwht_n)).astype(np.float32)
    bench(
        f"FWHT {fwht_rows * fwht_blocks:,} x {fwht_n:,}",
        fwht_blocks,
        lambda: rf.fwht(x),
        (lambda: rf.fwht(x, device="gpu")) if on_gpu else None,
        (lambda: torch_fwht(torch, x)) if torch else None,
        repeats,
    )

    phi = rng.uniform(-1, 1, (gram_rows, gram_d)).astype(np.float32)
    y = rng.standard_normal(gram_rows).astype(np.float32)

    def torch_gram():
        p = torch.from_numpy(phi).cuda()
        t = torch.from_numpy(y).cuda()
        return (p.T @ p).double().cpu().numpy(), (p.T @ t).double().cpu().numpy()

    bench(
        f"Gram N={gram_rows * gram_blocks:,} D={gram_d:,}",
        gram_blocks,
        lambda: (phi.T @ phi, phi.T @ y),
        (lambda: gpu.gram(phi, y)) if on_gpu else None,
        torch_gram if torch else None,
        repeats,
    )

    xr = rng.standard_normal((rff_rows, rff_d)).astype(np.float32)
    w = rng.standard_normal((rff_m, rff_d)).astype(np.float32)
    b = rng.uniform(0, 2 * np.pi, rff_m).astype(np.float32)
    scale = float(np.sqrt(2.0 / rff_m))

    def torch_rff():
        t = torch.from_numpy(xr).cuda()
        return (
            (scale * torch.cos(t @ torch.from_numpy(w).cuda().T + torch.from_numpy(b).cuda()))
            .cpu()
            .numpy()
        )

    bench(
        f"RFF N={rff_rows * rff_blocks:,} d={rff_d} D={rff_m:,}",
        rff_blocks,
        lambda: scale * np.cos(xr @ w.T + b),
        (lambda: gpu.rff_features(xr, w, b, variant="cos_bias", scale=scale)) if on_gpu else None,
        torch_rff if torch else None,
        repeats,
    )
    if on_gpu:
        print(f"GPU dispatches recorded: {gpu.dispatch_count()}")


if __name__ == "__main__":
    main()
