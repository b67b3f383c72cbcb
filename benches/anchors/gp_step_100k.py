"""An objective-and-gradient evaluation against a GPyTorch step; run by ``make bench-anchors``.

Data of ``benches/compare_feature_gp_fit.py``: N = 100,000, d = 8,
x ~ N(0, I), y = sin(sum(x) / 2) + 0.1 noise, float64, 2 threads on each
side.

- Sparse GP, M = 512 inducing inputs (a random subset of the rows):
  GPyTorch's SGPR (``InducingPointKernel``) Adam step (forward, backward
  through the bound per row, the inducing inputs included, and the update)
  against one evaluation of randfeat_rs's VFE bound and its gradient (the
  hyperparameters and the inducing inputs: the two streamed passes over the
  rows of ``SparseStats.of_rows``, ``gradient_sums`` and ``objective``).
- Feature-space GP, D = 1,024 features (512 frequencies, cosines and
  sines): GPyTorch's ``ScaleKernel(RFFKernel(num_samples=512))`` with
  ``ExactMarginalLogLikelihood``, one Adam step, against one evaluation of
  the log marginal likelihood and its gradient of randfeat_rs's
  ``RandomFeatureGPR(optimize=...)`` (the evaluation timed by
  ``compare_feature_gp_fit.py``).

GPyTorch: the median of three steps (each printed); randfeat_rs: the median
of three evaluations after one warm-up. Also printed: the process's
resident-memory high-water mark after each arm (the arms run in the order
printed, so each figure bounds that arm's peak from above). Goal (issue):
``RandomFeatureGPR(optimize=...)`` at least 8x faster per evaluation than
the RFFKernel anchor (its figure on this machine type: 18.1 s a step; the
SGPR's: 11.5 s a step).
"""

from __future__ import annotations

import resource
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from _common import median_time, sparse_evaluation
from _gpytorch_models import GPyTorchRFFGPR, GPyTorchSGPR, setup_torch
from compare_feature_gp_fit import ANCHOR_GPYTORCH_STEP_S, D_FEAT, D_IN, N, data, lml_evaluation

M = 512
N_STEPS = 3
ANCHOR_SGPR_STEP_S = 11.5


def peak_mib() -> float:
    """The process's resident-memory high-water mark so far, MiB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def sparse_seconds(X: np.ndarray, y: np.ndarray, z: np.ndarray) -> float:
    """Median seconds of one VFE bound-and-gradient evaluation of randfeat_rs."""
    kw = dict(length_scale=2.0, kernel_variance=1.0, noise_variance=0.01)
    return median_time(lambda: sparse_evaluation(X, y, z, **kw), repeats=3, warmup=1)


def main() -> None:
    setup_torch()
    X, y = data()
    z = X[np.random.default_rng(1).choice(N, M, replace=False)]

    rows = []
    ours_sparse = sparse_seconds(X, y, z)
    rows.append(("randfeat_rs SparseGPR, M = 512: evaluation", ours_sparse, [], peak_mib()))
    print(f"  SparseGPR evaluation {ours_sparse:.2f} s", flush=True)
    ours_feature = median_time(lml_evaluation(X, y), repeats=3, warmup=1)
    name = "randfeat_rs RandomFeatureGPR, D = 1,024: evaluation"
    rows.append((name, ours_feature, [], peak_mib()))
    print(f"  RandomFeatureGPR evaluation {ours_feature:.2f} s", flush=True)
    sgpr_step, sgpr_times = GPyTorchSGPR(z, train_inducing=True).build(X, y).step_time(N_STEPS)
    rows.append(("GPyTorch SGPR, M = 512: Adam step", sgpr_step, sgpr_times, peak_mib()))
    print(f"  GPyTorch SGPR step {sgpr_step:.2f} s", flush=True)
    rff_step, rff_times = GPyTorchRFFGPR(D_FEAT // 2).build(X, y).step_time(N_STEPS)
    rows.append(("GPyTorch RFFKernel, D = 1,024: Adam step", rff_step, rff_times, peak_mib()))
    print(f"  GPyTorch RFFKernel step {rff_step:.2f} s", flush=True)

    print(f"\nN = {N:,}, d = {D_IN}, float64")
    print(f"{'arm':<52} {'median s':>9} {'peak RSS MiB':>13}  steps (s)")
    for name, seconds, times, peak in rows:
        steps = ", ".join(f"{t:.2f}" for t in times)
        print(f"{name:<52} {seconds:9.2f} {peak:13.0f}  {steps}")
    print(
        f"GPyTorch SGPR step / SparseGPR evaluation: {sgpr_step / ours_sparse:.1f}x "
        f"(anchor figure {ANCHOR_SGPR_STEP_S} s: {ANCHOR_SGPR_STEP_S / ours_sparse:.1f}x)"
    )
    print(
        f"GPyTorch RFFKernel step / RandomFeatureGPR evaluation: {rff_step / ours_feature:.1f}x "
        f"(goal >= 8x; anchor figure {ANCHOR_GPYTORCH_STEP_S} s: "
        f"{ANCHOR_GPYTORCH_STEP_S / ours_feature:.1f}x)"
    )


if __name__ == "__main__":
    main()
