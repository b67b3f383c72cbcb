"""Sparse GP (SparseGPR, VFE) fit and evaluation speed; run through ``make bench``.

1. kin8nm (7,372 training / 820 test rows of the shipped copy, a seeded
   permutation; inputs and targets standardized by the training set),
   M = 512 inducing inputs, the Gaussian kernel: with a random subset of
   the training rows (fixed), one length scale and one per dimension
   (ARD); with k-means centres (fixed) and ARD, each fitted to
   convergence (L-BFGS, coarse to fine, no restarts); and with ARD and
   the inducing inputs trained from the random subset
   (``optimize_inducing=True``) for a budget of ``max_iter=20`` L-BFGS
   iterations per run, as GPyTorch trains its inducing inputs for 100
   Adam steps. Printed: the fit time, its bound per row, and the test
   RMSE and mean negative log predictive density of the noisy predictive
   (standardized units).

   The library a user would otherwise pick is GPyTorch's SGPR
   (InducingPointKernel, M = 512 random training rows, Adam lr 0.1, 100
   steps; GPyTorch's default moves the inducing inputs with the other
   parameters, and whether its kernel had ARD is not recorded), which
   needs PyTorch and is not installed by ``make bench``; its figures on this
   machine type (2 cores, float64, torch.set_num_threads(2)) are printed
   from the ANCHOR_* constants for the ratio. Goals: >= 10x faster with an
   equal or better bound, RMSE and NLL no worse.

2. N = 1,000,000, d = 8 (x ~ N(0, I), y = sin(sum(x) / 2) + 0.1 noise),
   M = 1,024: one evaluation of the bound and its gradient (both streamed
   passes over the rows, ``_common.sparse_evaluation``), in a subprocess
   that reports its resident-memory high-water mark (VmHWM); then, in the
   same process, the fit with nothing to optimize (``optimize=()``), which
   makes the statistics pass alone.
   An evaluation is bound by N M^2 / 2 multiply-adds for the statistics'
   Gram (the packed kernel) and N M^2 for the gradient's product with the
   adjoint (faer's GEMM): the rate those imply is printed beside a float64
   GEMM's rate measured in the same run (NumPy's BLAS, the same threads),
   to be read also against the 2-thread f64 FMA rate of
   ``cargo bench --bench floor`` (f64_fma_peak). Goals: within 2x of the
   floor of N M^2 multiply-adds at that rate, peak memory under 1 GB.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _common import machine_line, median_time

import randfeat_rs as rf
from randfeat_rs.datasets import load_kin8nm

N_TRAIN, M_KIN = 7372, 512
ANCHOR_SGPR_FIT_S = 47.4
ANCHOR_SGPR_LOSS = 0.383
ANCHOR_SGPR_RMSE = 0.300
ANCHOR_SGPR_NLL = 0.212

N_BIG, D_BIG, M_BIG = 1_000_000, 8, 1024

# One bound-and-gradient evaluation at N_BIG in a fresh interpreter, so that
# VmHWM is the evaluation's (and its data's) own.
_BIG_EVALUATION = f"""
import json, sys, time, numpy as np
sys.path.insert(0, {str(Path(__file__).resolve().parent)!r})
import randfeat_rs as rf
from _common import sparse_evaluation
rng = np.random.default_rng(0)
X = rng.standard_normal(({N_BIG}, {D_BIG}))
y = np.sin(X.sum(1) / 2) + 0.1 * rng.standard_normal({N_BIG})
kw = dict(length_scale=2.0, kernel_variance=1.0, noise_variance=0.01)
z = X[rng.choice({N_BIG}, {M_BIG}, replace=False)]
t0 = time.perf_counter()
bound, _ = sparse_evaluation(X, y, z, **kw)
seconds = time.perf_counter() - t0
hwm = 0
with open("/proc/self/status") as fh:
    for line in fh:
        if line.startswith("VmHWM:"):
            hwm = int(line.split()[1]) * 1024
gp = rf.SparseGPR(inducing=z, optimize=(), **kw)
t0 = time.perf_counter()
gp.fit(X, y)
fit_seconds = time.perf_counter() - t0
print(json.dumps({{"seconds": seconds, "vmhwm": hwm, "bound": bound, "fit": fit_seconds,
                  "fit_bound": gp.log_marginal_likelihood_}}))
"""


def kin8nm() -> None:
    X, y = load_kin8nm()
    perm = np.random.default_rng(0).permutation(len(y))
    tr, te = perm[:N_TRAIN], perm[N_TRAIN:]
    mu, sd = X[tr].mean(0), X[tr].std(0)
    X = (X - mu) / sd
    ym, ys = y[tr].mean(), y[tr].std()
    y = (y - ym) / ys
    print(f"kin8nm, M = {M_KIN}, Gaussian kernel, {N_TRAIN:,} train / {len(te)} test:")
    print("                                         fit (s)   -bound/N   test RMSE   test NLL")
    arms = {
        "random Z (fixed)": {"inducing": "random"},
        "random Z (fixed), ARD": {"inducing": "random", "ard": True},
        "k-means Z (fixed), ARD": {"inducing": "kmeans", "ard": True},
        "random Z trained, ARD, max_iter=20": {
            "inducing": "random",
            "ard": True,
            "optimize_inducing": True,
            "max_iter": 20,
        },
    }
    for name, kwargs in arms.items():
        t0 = time.perf_counter()
        gp = rf.SparseGPR(M_KIN, random_state=0, **kwargs).fit(X[tr], y[tr])
        fit_s = time.perf_counter() - t0
        loss = -gp.log_marginal_likelihood_ / N_TRAIN
        mean, std = gp.predict_noisy(X[te])
        rmse = float(np.sqrt(np.mean((mean - y[te]) ** 2)))
        nll = float(np.mean(0.5 * np.log(2 * np.pi * std**2) + (y[te] - mean) ** 2 / (2 * std**2)))
        print(
            f"  {name:<38}{fit_s:8.2f}   {loss:8.3f}   {rmse:9.3f}   {nll:8.3f}   "
            f"ratio {ANCHOR_SGPR_FIT_S / fit_s:5.1f}x (goal >= 10x), "
            f"{gp.n_iter_} L-BFGS iterations"
        )
    print(
        f"  {'GPyTorch SGPR, Z trained (anchor)':<38}{ANCHOR_SGPR_FIT_S:8.2f}   "
        f"{ANCHOR_SGPR_LOSS:8.3f}   {ANCHOR_SGPR_RMSE:9.3f}   {ANCHOR_SGPR_NLL:8.3f}   "
        "(100 Adam steps)"
    )


def gemm_rate() -> float:
    """Multiply-adds per second of a 2048^3 float64 GEMM (NumPy's BLAS)."""
    rng = np.random.default_rng(1)
    a = rng.standard_normal((2048, 2048))
    b = rng.standard_normal((2048, 2048))
    return 2048**3 / median_time(lambda: a @ b, repeats=5, warmup=1)


def big_evaluation() -> None:
    out = subprocess.run(
        [sys.executable, "-c", _BIG_EVALUATION], check=True, capture_output=True, text=True
    ).stdout
    r = json.loads(out.strip().splitlines()[-1])
    fmas = 1.5 * N_BIG * M_BIG**2
    floor = N_BIG * M_BIG**2
    rate = gemm_rate()
    print(
        f"\nOne bound + gradient evaluation, N = {N_BIG:,}, d = {D_BIG}, M = {M_BIG:,} "
        "(a fresh process):"
    )
    print(
        f"  {r['seconds']:.2f} s: {fmas:.3g} multiply-adds at {fmas / r['seconds'] / 1e9:.1f} G/s; "
        f"NumPy float64 GEMM in this run {rate / 1e9:.1f} G/s"
    )
    print(
        f"  against the floor of N M^2 = {floor:.3g} multiply-adds at that GEMM rate "
        f"({floor / rate:.2f} s): {r['seconds'] / (floor / rate):.2f}x (goal <= 2x; see also "
        "f64_fma_peak of cargo bench --bench floor)"
    )
    print(f"  peak resident memory (VmHWM) {r['vmhwm'] / 2**20:.0f} MiB (goal < 1 GB)")
    print(
        f"  the fit with optimize=() (the statistics pass alone): {r['fit']:.2f} s, "
        f"{r['seconds'] / r['fit']:.2f}x faster than the evaluation; its bound "
        f"{r['fit_bound']:.6f} against the evaluation's {r['bound']:.6f}"
    )


def main() -> None:
    print(f"Machine: {machine_line()}")
    print(f"Load average: {os.getloadavg()}\n")
    kin8nm()
    big_evaluation()


if __name__ == "__main__":
    main()
