"""Shared helpers of the comparison scripts: timing, the machine line, a NumPy FWHT."""

from __future__ import annotations

import os
import platform
import statistics
import time
from typing import Callable

import numpy as np


def machine_line() -> str:
    """One line naming the CPU, cores and library versions, for BENCHMARKS.md."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    import randfeat_rs as rf

    return (
        f"{cpu}, {os.cpu_count()} cores, {platform.system()} {platform.release()}, "
        f"Python {platform.python_version()}, NumPy {np.__version__}, "
        f"randfeat_rs {rf.__version__} ({rf._core.simd_level()}, {rf.get_num_threads()} threads)"
    )


def median_time(fn: Callable[[], object], repeats: int = 7, warmup: int = 1) -> float:
    """Median wall time of ``fn()`` in seconds over ``repeats`` runs."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def numpy_butterfly(x: np.ndarray) -> np.ndarray:
    """Reshape-based radix-2 butterflies, one vectorized NumPy pass per stage."""
    y = np.array(x, dtype=x.dtype, copy=True)
    rows, n = y.shape
    h = 1
    while h < n:
        v = y.reshape(rows, n // (2 * h), 2, h)
        a = v[:, :, 0, :].copy()
        b = v[:, :, 1, :]
        v[:, :, 0, :] += b
        np.subtract(a, b, out=v[:, :, 1, :])
        h *= 2
    return y


def sparse_evaluation(
    X: np.ndarray,
    y: np.ndarray,
    inducing: np.ndarray,
    *,
    length_scale: float,
    kernel_variance: float,
    noise_variance: float,
) -> tuple[float, list[float]]:
    """One bound-and-gradient evaluation of ``SparseGPR``'s VFE objective
    (Gaussian kernel, centered targets) on rows in memory, what each L-BFGS
    evaluation of ``SparseGPR.fit`` costs: the statistics pass, the
    gradient pass at their bound's adjoints, and the bound with its
    gradient (the core's row-block API, with the default chunks; the
    ``O(M^3)`` bound is computed once more than in a fit's evaluation). A
    fit with ``optimize=()`` makes the statistics pass alone."""
    from randfeat_rs import _core

    prior = _core.SparsePrior(
        inducing=inducing,
        kernel="gaussian",
        length_scale=[float(length_scale)],
        kernel_variance=float(kernel_variance),
        noise_variance=float(noise_variance),
    )
    stats = _core.SparseStats.of_rows(X, y, prior=prior, method="vfe")
    sums = stats.gradient_sums(X, y, prior=prior, center_y=True)
    value, grad, _ = stats.objective(sums, prior=prior, center_y=True)
    return float(value), list(grad)
