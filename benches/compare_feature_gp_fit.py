"""Marginal-likelihood fit of the feature-space GP; run through ``make bench``.

RandomFeatureGPR(optimize=...) at N = 100,000, d = 8, D = 1,024
(RandomFourierFeatures, cos_sin, 512 frequencies; x ~ N(0, I),
y = sin(sum(x) / 2) + 0.1 noise, float64): the time of one evaluation of the
log marginal likelihood and its gradient in (ln l, ln s2, ln sn2) (two
streamed passes over the rows, the Woodbury form; see docs/math/gp.rst,
feature-space GP), and of the whole fit (L-BFGS from the transformer's
hyperparameters, coarse to fine, no restarts).

The library a user would otherwise pick is GPyTorch: ScaleKernel(RFFKernel(
num_samples=512)) with ExactMarginalLogLikelihood, which needs PyTorch and is
not installed by ``make bench``; its figure on this machine type (2 cores,
float64, torch.set_num_threads(2)) is printed from ANCHOR_GPYTORCH_STEP_S
(a forward and backward pass, i.e. one evaluation with its gradient) for the
ratio. Goals: >= 8x faster per evaluation, the whole fit under 30 s.

With one length scale the fit does not evaluate the gradient: it profiles
out the kernel and noise variances (maximized exactly at each length scale
from the eigendecomposition of Phi^T Phi) and searches the length scale by
parabolic interpolation, coarse to fine (docs/math/gp.rst, "Profiled fit"),
so its unit of work is one statistics pass (N D^2 / 2 multiply-adds, the
packed Gram kernel) and one D x D eigendecomposition: timed here as a fit
with the length scale fixed. The LML-and-gradient evaluation is what a fit
with per-dimension length scales (ard=True) spends per L-BFGS evaluation.

An evaluation is bound by its multiply-adds, N D^2 / 2 for Phi^T Phi (the
packed Gram kernel) and N D^2 for Phi A^{-1} (faer's GEMM) in the second
pass: 1.57e11, printed beside the time as the rate it implies, to be read
against the 2-thread f64 FMA rate of ``cargo bench --bench floor``
(f64_fma_peak) taken in the same state of the host. Accumulating Phi^T dPhi
in the first pass instead needs the same N D^2 (the trace term is a D x D
product over N rows either way).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Callable

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _common import machine_line, median_time

import randfeat_rs as rf
from randfeat_rs import _core

N, D_IN, D_FEAT = 100_000, 8, 1024
ANCHOR_GPYTORCH_STEP_S = 18.1
CHUNK = 2048


def data() -> tuple[np.ndarray, np.ndarray]:
    """The N x d inputs x ~ N(0, I) and targets sin(sum(x) / 2) + 0.1 noise (seeded)."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((N, D_IN))
    return X, np.sin(X.sum(1) / 2) + 0.1 * rng.standard_normal(N)


def lml_evaluation(X: np.ndarray, y: np.ndarray) -> Callable[[], object]:
    """A callable running one LML-and-gradient evaluation of the D-feature GP on (X, y)."""
    rff = rf.RandomFourierFeatures(D_FEAT, length_scale=2.0, random_state=0).fit(X)
    return lambda: _core.feature_gp_lml(
        rff._feature_map(),
        X,
        y,
        drawn_length_scale=[2.0],
        length_scale=[2.5],
        kernel_variance=0.5,
        noise_variance=0.02,
        center=True,
        chunk_size=CHUNK,
    )


def main() -> None:
    print(f"Machine: {machine_line()}")
    print(f"Load average: {os.getloadavg()}\n")
    X, y = data()
    evaluation = lml_evaluation(X, y)
    per_eval = median_time(evaluation, repeats=3, warmup=1)
    fmas = 1.5 * N * D_FEAT**2
    print(f"One LML + gradient evaluation (N = {N:,}, d = {D_IN}, D = {D_FEAT:,}):")
    print(
        f"  randfeat_rs          {per_eval:8.2f} s   "
        f"({fmas:.3g} multiply-adds: {fmas / per_eval / 1e9:.1f} G/s)"
    )
    print(
        f"  GPyTorch (anchor)    {ANCHOR_GPYTORCH_STEP_S:8.2f} s   "
        f"ratio {ANCHOR_GPYTORCH_STEP_S / per_eval:5.1f}x (goal >= 8x)"
    )

    profiled = median_time(
        lambda: rf.RandomFeatureGPR(
            rf.RandomFourierFeatures(D_FEAT, length_scale=2.1, random_state=0),
            optimize=("kernel_variance", "noise_variance"),
            n_restarts=0,
            chunk_size=CHUNK,
        ).fit(X, y),
        repeats=3,
        warmup=0,
    )
    gram = 0.5 * N * D_FEAT**2
    print(
        f"  profiled evaluation  {profiled:8.2f} s   "
        f"(one statistics pass, {gram:.3g} multiply-adds, and the eigendecomposition: "
        f"{gram / profiled / 1e9:.1f} G/s; ratio to the anchor step "
        f"{ANCHOR_GPYTORCH_STEP_S / profiled:.1f}x)"
    )

    t0 = time.perf_counter()
    gp = rf.RandomFeatureGPR(
        rf.RandomFourierFeatures(D_FEAT, length_scale=2.0, random_state=0),
        optimize=("length_scale", "kernel_variance", "noise_variance"),
        n_restarts=0,
        chunk_size=CHUNK,
    ).fit(X, y)
    fit_s = time.perf_counter() - t0
    print(f"\nWhole fit (profiled, coarse to fine, no restarts): {fit_s:.1f} s (goal < 30 s)")
    print(
        f"  {gp.n_iter_} length scales tried; length_scale {gp.length_scale_:.3f}, "
        f"kernel_variance {gp.kernel_variance_:.3f}, noise_variance {gp.noise_variance_:.4f}, "
        f"LML {gp.log_marginal_likelihood_:.1f}"
    )


if __name__ == "__main__":
    main()
