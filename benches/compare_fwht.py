"""FWHT side by side: randfeat_rs against the best vectorized NumPy FWHTs.

Prints a markdown table (medians of at least 5 runs) and the machine line;
the numbers go to BENCHMARKS.md. Run through ``make bench``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Callable

import numpy as np
import scipy.linalg

sys.path.insert(0, str(Path(__file__).parent))
from _common import machine_line, median_time, numpy_butterfly

import randfeat_rs as rf


def numpy_kronecker(x: np.ndarray) -> np.ndarray:
    """H_n = H_a (x) H_b: two batched GEMMs with small Hadamard matrices."""
    rows, n = x.shape
    a = 1 << (n.bit_length() - 1) // 2
    b = n // a
    ha = scipy.linalg.hadamard(a).astype(x.dtype)
    hb = scipy.linalg.hadamard(b).astype(x.dtype)
    x3 = x.reshape(rows, a, b)
    return np.matmul(ha, x3 @ hb.T).reshape(rows, n)


def allocation_time(fn: Callable[[], np.ndarray], repeats: int) -> float:
    """Median wall time of ``fn()``, which returns a new array, in seconds
    over ``repeats`` runs; each result is freed after its clock stops."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        y = fn()
        times.append(time.perf_counter() - t0)
        del y
    return float(np.median(times))


def main() -> None:
    print(f"Machine: {machine_line()}\n")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((10_000, 1024))
    for fn in (numpy_butterfly, numpy_kronecker):
        np.testing.assert_allclose(fn(x[:4]), rf.fwht(x[:4]), atol=1e-9)

    # Thread scaling and the in-place pass first: NumPy's BLAS threads keep
    # spinning for a while after a GEMM and would steal the second core.
    xin = x.copy()
    t_inplace = median_time(lambda: rf.fwht(xin, out=xin), repeats=9)
    dst = np.empty_like(x)
    t_copy = median_time(lambda: np.copyto(dst, x), repeats=9)
    print(
        f"\nIn place, 10,000 x 1,024 float64 (80 MB): {t_inplace * 1e3:.2f} ms; "
        f"np.copyto of the same array: {t_copy * 1e3:.2f} ms; "
        f"ratio {t_inplace / t_copy:.2f} (goal <= 1.3)"
    )

    # A new array: the transform against a copy of the input, both into
    # fresh memory (the first touch of its pages is part of either), in
    # alternating rounds so that machine noise hits both alike.
    rounds: dict[str, list[float]] = {"fwht": [], "copy": []}
    for _ in range(7):
        rounds["fwht"].append(allocation_time(lambda: rf.fwht(x), 5))
        rounds["copy"].append(allocation_time(x.copy, 5))
    t_new, t_clone = (float(np.median(v)) for v in rounds.values())
    ratio = float(np.median(np.divide(rounds["fwht"], rounds["copy"])))
    print(
        f"New array, 10,000 x 1,024 float64: rf.fwht(x) {t_new * 1e3:.2f} ms; "
        f"x.copy() {t_clone * 1e3:.2f} ms; ratio {ratio:.2f} (goal <= 1.3)"
    )

    small = rng.standard_normal((256, 1024))
    old = rf.get_num_threads()

    def loop(calls: int) -> None:
        for _ in range(calls):
            rf.fwht(small, out=small, normalized=True)

    # The goal's case: the batch transformed repeatedly in place, timed as the
    # mean call of a loop of 200 (the pool stays awake between calls); beside
    # it the median of single calls, which also pays for waking the parked
    # pool each time and swings with the host's scheduling. The two settings
    # are interleaved so that machine noise hits both alike.
    runs: dict[tuple[str, int], list[float]] = {}
    for _ in range(5):
        for t in (1, 2):
            rf.set_num_threads(t)
            runs.setdefault(("loop", t), []).append(median_time(lambda: loop(200), 3) / 200)
            runs.setdefault(("single", t), []).append(median_time(lambda: loop(1), 41))
    rf.set_num_threads(old)
    res = {k: float(np.median(v)) for k, v in runs.items()}
    for kind, label, goal in (
        ("loop", "repeatedly (loops of 200 calls)", " (goal >= 1.8)"),
        ("single", "single calls", ""),
    ):
        one, two = res[(kind, 1)], res[(kind, 2)]
        print(
            f"Cache-resident 256 x 1,024 float64 in place, {label}: 1 thread "
            f"{one * 1e6:.0f} us, 2 threads {two * 1e6:.0f} us per call, "
            f"speed-up {one / two:.2f}x{goal}"
        )

    print(
        "| case | randfeat_rs | NumPy butterfly | NumPy Kronecker (GEMM) | speed-up vs best NumPy |"
    )
    print("|---|---|---|---|---|")
    for dtype in (np.float64, np.float32):
        xd = x.astype(dtype)
        t_rf = median_time(lambda xd=xd: rf.fwht(xd), repeats=9)
        t_bf = median_time(lambda xd=xd: numpy_butterfly(xd), repeats=5)
        t_kr = median_time(lambda xd=xd: numpy_kronecker(xd), repeats=5)
        print(
            f"| 10,000 x 1,024 {np.dtype(dtype).name}, new array | {t_rf * 1e3:.2f} ms | "
            f"{t_bf * 1e3:.1f} ms | {t_kr * 1e3:.1f} ms | {min(t_bf, t_kr) / t_rf:.1f}x |"
        )


if __name__ == "__main__":
    main()
