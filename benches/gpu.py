"""GPU kernels vs the CPU path (and PyTorch on CUDA when installed).

Times, transfers included, every case of ISSUE 8:
- FWHT of 100,000 x 4,096 (float32);
- TensorSRHT degree 3 (PolynomialSketch) at N = 1,000,000, d = 256, D = 4,096;
- random Fourier features (RandomFourierFeatures, cos_bias) at N = 1,000,000,
  d = 64, D = 8,192;
- Gram accumulation Phi^T Phi and Phi^T y at N = 1,000,000, D = 2,048;
- MaclaurinFeatures (Gaussian kernel, TensorSRHT, optimized allocation) at
  N = 1,000,000, d = 8, D = 4,096;
- the localized GP on kin8nm (standardized, theta = 0.5 l: 760 clusters,
  D = 256), fit + predict, the per-centroid statistics on the GPU
  (``device="gpu"``) vs the CPU; below ``--scale 0.01`` the training rows
  and the cluster count are cut to ``100 * scale`` of the full problem;
- SparseGPR with fixed hyperparameters at N = 1,000,000, d = 8, M = 1,024
  (issue 20's ``device=``): the statistics ``K_uf K_fu``, ``K_uf y`` on the
  GPU (only X crosses the bus) vs the CPU path.

Large N is processed in row blocks (the time of one block times the number of
blocks), as a streaming fit would. ``--scale`` multiplies every N (default:
1 on a hardware GPU; 0.001 on a software rasterizer such as Mesa's lavapipe,
where the figures are a functional check only, not a performance claim).

The CPU columns: randfeat_rs's CPU path (FWHT, PolynomialSketch,
RandomFourierFeatures, MaclaurinFeatures, LocalizedMaclaurinGPR) and NumPy
(BLAS) for Phi^T Phi. PyTorch-CUDA arms exist where the same math is a few
tensor ops (FWHT, TensorSRHT, RFF, Gram); none for the Maclaurin map and the
localized GP (their pipelines are this library's own); for SparseGPR the
PyTorch arm computes the two statistics only.
Goal (ISSUE 8, on an H200): >= 20x the 16-core CPU path at N = 1e6 and >= half
the throughput of the same math in PyTorch-CUDA.
"""

from __future__ import annotations

import argparse
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


def torch_fwht_t(torch, t):
    """Unnormalized FWHT of the last axis of a CUDA tensor (rows x n)."""
    rows, n = t.shape
    h = 1
    while h < n:
        v = t.view(rows, n // (2 * h), 2, h)
        a, b = v[:, :, 0, :], v[:, :, 1, :]
        t = torch.stack((a + b, a - b), dim=2).view(rows, n)
        h *= 2
    return t


def torch_fwht(torch, x: np.ndarray) -> np.ndarray:
    return torch_fwht_t(torch, torch.from_numpy(x).cuda()).cpu().numpy()


def torch_srht(torch, x: np.ndarray, params: dict, nf: int) -> np.ndarray:
    """TensorSRHT (docs/math/sketches.rst), real, with the sketch's own parameters."""
    mul = torch.from_numpy(1.0 - 2.0 * params["sign_codes"].astype(np.float32)).cuda()
    perm = torch.from_numpy(params["permutations"].astype(np.int64)).cuda()
    blocks, degree, dp = mul.shape
    t = torch.from_numpy(x).cuda()
    n = t.shape[0]
    t = torch.nn.functional.pad(t, (0, dp - t.shape[1]))
    out = None
    for j in range(degree):
        u = (t[:, None, :] * mul[None, :, j, :]).reshape(n * blocks, dp)
        u = torch_fwht_t(torch, u).view(n, blocks, dp)
        v = torch.gather(u, 2, perm[None, :, j, :].expand(n, blocks, dp)).reshape(n, -1)[:, :nf]
        out = v if out is None else out * v
    return (out / np.sqrt(nf)).cpu().numpy()


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


def blocks_of(total: int, cap: int) -> tuple[int, int]:
    """(rows per block, blocks) covering ``total`` rows in blocks of at most ``cap``."""
    rows = max(1, min(total, cap))
    return rows, -(-total // rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--scale",
        type=float,
        default=None,
        help="fraction of the issue's N (default: 1 on a hardware GPU, 0.001 otherwise)",
    )
    args = parser.parse_args()
    print(machine_line())
    info = gpu.info()
    torch = torch_cuda()
    if info is None:
        print("no GPU adapter: GPU column skipped (CPU only)")
        software = True
    else:
        software = bool(info["software"])
        print(f"GPU: {info['name']} ({info['backend']}, {info['device_type']}, {info['driver']})")
    scale = args.scale if args.scale is not None else (0.001 if software else 1.0)
    if software:
        print(
            "software rasterizer (or no GPU): the GPU figures are a functional check only, "
            "not a performance claim"
        )
    print(f"--scale {scale:g}: every N is {scale:g} x the issue's")
    repeats = 1 if software else 5
    rng = np.random.default_rng(0)
    on_gpu = info is not None
    print(
        f"{'kernel (total over blocks)':<34} {'CPU':>11} {'GPU':>11} {'torch-CUDA':>11} "
        f"{'GPU/CPU':>8} {'GPU/torch':>8}"
    )

    fwht_rows, fwht_blocks = blocks_of(int(100_000 * scale), 25_000)
    x = rng.standard_normal((fwht_rows, 4_096)).astype(np.float32)
    bench(
        f"FWHT {fwht_rows * fwht_blocks:,} x 4,096",
        fwht_blocks,
        lambda: rf.fwht(x),
        (lambda: rf.fwht(x, device="gpu")) if on_gpu else None,
        (lambda: torch_fwht(torch, x)) if torch else None,
        repeats,
    )

    srht_rows, srht_blocks = blocks_of(int(1_000_000 * scale), 31_250)
    xs = (rng.standard_normal((srht_rows, 256)) / 16).astype(np.float32)
    kw = dict(degree=3, sketch="tensor_srht", random_state=0)
    ps_cpu = rf.PolynomialSketch(4_096, **kw).fit(xs[:1])
    ps_gpu = rf.PolynomialSketch(4_096, device="gpu", **kw).fit(xs[:1]) if on_gpu else None
    params = ps_cpu.random_params_
    bench(
        f"TensorSRHT n=3 N={srht_rows * srht_blocks:,} d=256 D=4,096",
        srht_blocks,
        lambda: ps_cpu.transform(xs),
        (lambda: ps_gpu.transform(xs)) if ps_gpu is not None else None,
        (lambda: torch_srht(torch, xs, params, 4_096)) if torch else None,
        repeats,
    )

    rff_rows, rff_blocks = blocks_of(int(1_000_000 * scale), 31_250)
    xr = rng.standard_normal((rff_rows, 64)).astype(np.float32)
    kw = dict(variant="cos_bias", length_scale=8.0, random_state=0)
    rff_cpu = rf.RandomFourierFeatures(8_192, **kw).fit(xr[:1])
    rff_gpu = rf.RandomFourierFeatures(8_192, device="gpu", **kw).fit(xr[:1]) if on_gpu else None
    w = rff_cpu.frequencies_.astype(np.float32)
    b = rff_cpu.phases_.astype(np.float32)
    rscale = rff_cpu.scale_

    def torch_rff():
        t = torch.from_numpy(xr).cuda()
        return (
            (rscale * torch.cos(t @ torch.from_numpy(w).cuda().T + torch.from_numpy(b).cuda()))
            .cpu()
            .numpy()
        )

    bench(
        f"RFF N={rff_rows * rff_blocks:,} d=64 D=8,192",
        rff_blocks,
        lambda: rff_cpu.transform(xr),
        (lambda: rff_gpu.transform(xr)) if rff_gpu is not None else None,
        torch_rff if torch else None,
        repeats,
    )

    gram_rows, gram_blocks = blocks_of(int(1_000_000 * scale), 62_500)
    phi = rng.uniform(-1, 1, (gram_rows, 2_048)).astype(np.float32)
    y = rng.standard_normal(gram_rows).astype(np.float32)

    def torch_gram():
        p = torch.from_numpy(phi).cuda()
        t = torch.from_numpy(y).cuda()
        return (p.T @ p).double().cpu().numpy(), (p.T @ t).double().cpu().numpy()

    bench(
        f"Gram N={gram_rows * gram_blocks:,} D=2,048",
        gram_blocks,
        lambda: (phi.T @ phi, phi.T @ y),
        (lambda: gpu.gram(phi, y)) if on_gpu else None,
        torch_gram if torch else None,
        repeats,
    )

    mac_rows, mac_blocks = blocks_of(int(1_000_000 * scale), 31_250)
    xm = (rng.standard_normal((mac_rows, 8)) / 2).astype(np.float32)
    kw = dict(length_scale=2.0, random_state=0)
    mac_cpu = rf.MaclaurinFeatures(4_096, **kw).fit(xm[:2_000])
    mac_gpu = rf.MaclaurinFeatures(4_096, device="gpu", **kw).fit(xm[:2_000]) if on_gpu else None
    bench(
        f"Maclaurin N={mac_rows * mac_blocks:,} d=8 D=4,096",
        mac_blocks,
        lambda: mac_cpu.transform(xm),
        (lambda: mac_gpu.transform(xm)) if mac_gpu is not None else None,
        None,
        repeats,
    )

    localized(scale, on_gpu, repeats)
    sparse(scale, on_gpu, torch, repeats)
    if on_gpu:
        print(f"GPU dispatches recorded: {gpu.dispatch_count()}")


def localized(scale: float, on_gpu: bool, repeats: int) -> None:
    """kin8nm, 90/10 split, standardized inputs, l = 1.84, noise 0.0034,
    theta = 0.5 l (760 clusters on all rows), D = 256: fit + predict."""
    from randfeat_rs.datasets import load_kin8nm

    X, y = load_kin8nm()
    perm = np.random.default_rng(0).permutation(len(y))
    tr, te = perm[:7_372], perm[7_372:]
    frac = min(1.0, 100 * scale)
    tr, te = tr[: max(200, int(len(tr) * frac))], te[: max(50, int(len(te) * frac))]
    mu, sd = X[tr].mean(0), X[tr].std(0)
    Xtr, Xte = (X[tr] - mu) / sd, (X[te] - mu) / sd
    ytr = y[tr]
    n_clusters = None if frac == 1.0 else max(2, round(760 * frac))
    kw = dict(
        length_scale=1.84,
        kernel_variance=float(ytr.var()),
        noise_variance=0.0034,
        threshold=0.5,
        n_clusters=n_clusters,
        random_state=0,
    )

    means = {}

    def run(device: str):
        gp = rf.LocalizedMaclaurinGPR(256, device=device, **kw).fit(Xtr, ytr)
        means[device] = gp.predict(Xte)
        return gp

    gp = run("cpu")
    name = f"localized GP kin8nm N={len(tr):,} {gp.n_clusters_} cl. D=256"
    gpu_fn = (lambda: run("gpu")) if on_gpu else None
    before = gpu.dispatch_count() if on_gpu else 0
    bench(name, 1, lambda: run("cpu"), gpu_fn, None, repeats)
    if on_gpu:
        # median_time runs one warm-up call before the timed repeats.
        per_fit = (gpu.dispatch_count() - before) // (repeats + 1)
        diff = float(np.abs(means["gpu"] - means["cpu"]).max())
        print(
            f"  localized GP: max |mean GPU - mean CPU| = {diff:.2e} (targets sd {ytr.std():.3f}); "
            f"{per_fit} GPU dispatches per fit + predict (centroids batched)"
        )


def sparse(scale: float, on_gpu: bool, torch, repeats: int) -> None:
    """SparseGPR with fixed hyperparameters (``optimize=()``), Gaussian kernel
    with l = 1, N = 1,000,000, d = 8, M = 1,024 random inducing rows (K_uu's
    condition number is printed: the float32 statistics need it moderate,
    docs/math/sparse_gp.rst, section Devices): the fit, whose cost
    is the statistics ``K_uf K_fu``, ``K_uf y`` (N M^2 multiply-adds). Only
    ``X`` (N x 8) crosses the bus. The PyTorch-CUDA arm computes the same two
    statistics in float32 row blocks (no solve: M^3 is 1e-3 of the work)."""
    n = int(1_000_000 * scale)
    m = max(16, min(1_024, n // 4))
    rng = np.random.default_rng(1)
    X = rng.standard_normal((n, 8))
    y = np.sin(X.sum(1) / 2) + 0.1 * rng.standard_normal(n)
    kw = dict(
        inducing="random",
        length_scale=1.0,
        kernel_variance=1.0,
        noise_variance=0.01,
        optimize=(),
        random_state=0,
    )
    fits = {}

    def run(device: str):
        fits[device] = rf.SparseGPR(m, device=device, **kw).fit(X, y)

    run("cpu")
    z = fits["cpu"].inducing_points_
    kuu = np.exp(-0.5 * ((z[:, None, :] - z[None]) ** 2).sum(-1))
    print(f"  SparseGPR: condition number of K_uu {np.linalg.cond(kuu):.1e}")

    def torch_stats():
        zt = torch.from_numpy(z).float().cuda()
        s = torch.zeros((m, m), dtype=torch.float32, device="cuda")
        b = torch.zeros(m, dtype=torch.float32, device="cuda")
        yc = y - y.mean()
        for lo in range(0, n, 65_536):
            xt = torch.from_numpy(X[lo : lo + 65_536]).float().cuda()
            k = torch.exp(-0.5 * torch.cdist(xt, zt) ** 2)
            s += k.T @ k
            b += k.T @ torch.from_numpy(yc[lo : lo + 65_536]).float().cuda()
        return s.double().cpu().numpy(), b.double().cpu().numpy()

    bench(
        f"SparseGPR fit N={n:,} d=8 M={m:,} fixed",
        1,
        lambda: run("cpu"),
        (lambda: run("gpu")) if on_gpu else None,
        torch_stats if torch else None,
        repeats,
    )
    if on_gpu:
        Xt = rng.standard_normal((1_000, 8))
        diff = float(np.abs(fits["gpu"].predict(Xt) - fits["cpu"].predict(Xt)).max())
        rel = abs(fits["gpu"].log_marginal_likelihood_ / fits["cpu"].log_marginal_likelihood_ - 1)
        print(f"  SparseGPR: max |mean GPU - mean CPU| = {diff:.2e}; bound rel. diff {rel:.1e}")
        conditioning()


def conditioning() -> None:
    """The GPU's float32 statistics against the conditioning of K_uu: N =
    4,000, d = 8 (its own seeded draw, whatever --scale), M = 512 random
    rows, noise variance 0.01, l = 1 ... 8; the bound's distance from the
    float64 one, or the refusal."""
    rng = np.random.default_rng(2)
    X = rng.standard_normal((4_000, 8))
    y = np.sin(X.sum(1) / 2) + 0.1 * rng.standard_normal(4_000)
    for ls in (1.0, 2.0, 4.0, 8.0):
        kw = dict(
            inducing="random",
            length_scale=ls,
            kernel_variance=1.0,
            noise_variance=0.01,
            optimize=(),
            random_state=0,
        )
        cpu = rf.SparseGPR(512, **kw).fit(X, y)
        z = cpu.inducing_points_ / ls
        cond = np.linalg.cond(np.exp(-0.5 * ((z[:, None, :] - z[None]) ** 2).sum(-1)))
        try:
            g = rf.SparseGPR(512, device="gpu", **kw).fit(X, y)
            rel = abs(g.log_marginal_likelihood_ / cpu.log_marginal_likelihood_ - 1)
            verdict = f"bound rel. diff {rel:.1e}"
        except rf.NotPositiveDefiniteError:
            verdict = "refused (NotPositiveDefiniteError)"
        print(f"  SparseGPR N=4,000 M=512 l={ls:g}: cond(K_uu) {cond:.1e}, {verdict}")


if __name__ == "__main__":
    main()
