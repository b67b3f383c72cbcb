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
