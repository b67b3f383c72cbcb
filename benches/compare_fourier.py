"""Random Fourier features side by side: randfeat_rs against scikit-learn's
RBFSampler and Nystroem, same data, same threads, in one run.

Prints a markdown table (medians) and the machine line; the numbers go to
BENCHMARKS.md. Run through ``make bench``. Goals (issue 4): float64 >= 5x and
float32 >= 3x faster than RBFSampler at N = 100,000, d = 64, D = 4,096;
the structured sampler >= 10x faster than RBFSampler at N = 20,000,
d = 1,024, D = 4,096.
"""

from __future__ import annotations

import gc
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from sklearn.kernel_approximation import Nystroem, RBFSampler
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).parent))
from _common import machine_line, median_time

import randfeat_rs as rf

THREADS = 2
ROWS: list[str] = []


def timed(label: str, fn, repeats: int) -> float:
    t = median_time(lambda: (fn(), gc.collect()), repeats=repeats, warmup=1)
    print(f"  {label}: {t:.3f} s", flush=True)
    return t


def case(n: int, d: int, dim: int, dtype, samplers: tuple[str, ...], repeats: int) -> None:
    name = f"N = {n:,}, d = {d:,}, D = {dim:,}, {np.dtype(dtype).name}"
    print(f"\n{name}", flush=True)
    x = np.random.default_rng(0).standard_normal((n, d)).astype(dtype)
    ell = float(np.sqrt(d))
    ref = timed(
        "sklearn RBFSampler",
        lambda: RBFSampler(gamma=0.5 / ell**2, n_components=dim, random_state=0).fit_transform(x),
        repeats,
    )
    ROWS.append(f"| {name} | sklearn RBFSampler | {ref:.3f} | 1.0x | |")
    for sampler in samplers:
        for variant in ("cos_bias", "cos_sin"):
            est = rf.RandomFourierFeatures(
                dim, length_scale=ell, sampler=sampler, variant=variant, random_state=0
            )
            t = timed(f"randfeat_rs {sampler}/{variant}", lambda e=est: e.fit_transform(x), repeats)
            goal = ""
            if sampler == "structured":
                goal = ">= 10x"
            elif d == 64:
                goal = ">= 5x" if dtype == np.float64 else ">= 3x"
            ROWS.append(
                f"| {name} | randfeat_rs {sampler}, {variant} | {t:.3f} | {ref / t:.1f}x | {goal} |"
            )


def first_touch_2_threads(n: int, dim: int) -> np.ndarray:
    """A fresh float32 ``n x dim`` array whose halves are first written by
    two threads at once (np.copyto releases the GIL), as the transform's two
    threads write their own rows."""
    out = np.empty((n, dim), np.float32)
    halves = (out[: n // 2], out[n // 2 :])
    with ThreadPoolExecutor(2) as pool:
        list(pool.map(lambda h: np.copyto(h, 1.0), halves))
    return out


def floor_case(n: int, d: int, dim: int) -> None:
    """What any float32 map of this size must pay (issue 4's 3x goal): the
    first touch of a fresh N x D output (the kernel zeroes its pages) on one
    and on two threads, a refill of a touched one, and the GEMM alone
    (NumPy/BLAS into a touched output: 2 N d D flops)."""
    name = f"float32 floor, N = {n:,}, d = {d}, D = {dim:,}"
    print(f"\n{name}", flush=True)
    x = np.random.default_rng(0).standard_normal((n, d)).astype(np.float32)
    w = np.random.default_rng(1).standard_normal((dim, d)).astype(np.float32)
    fresh = timed(
        "fresh output, first touch (np.ones, 1 thread)", lambda: np.ones((n, dim), np.float32), 3
    )
    fresh2 = timed(
        "fresh output, first touch (np.empty + np.copyto of each half, 2 threads)",
        lambda: first_touch_2_threads(n, dim),
        3,
    )
    out = np.ones((n, dim), np.float32)
    refill = timed("touched output, refill (fill, 1 thread)", lambda: out.fill(2.0), 3)
    gemm = timed("GEMM alone, BLAS, into the touched output", lambda: np.matmul(x, w.T, out=out), 3)
    gflops = 2 * n * d * dim / gemm / 1e9
    print(f"  GEMM: {gflops:.0f} GFLOP/s", flush=True)
    for label, t in (
        ("first touch, 1 thread", fresh),
        ("first touch, 2 threads", fresh2),
        ("refill", refill),
        (f"BLAS GEMM ({gflops:.0f} GFLOP/s)", gemm),
    ):
        ROWS.append(f"| {name} | {label} | {t:.3f} | | |")


def nystroem_case(n: int, d: int, m: int, repeats: int) -> None:
    name = f"Nystroem N = {n:,}, d = {d}, m = {m:,}, float64"
    print(f"\n{name}", flush=True)
    x = np.random.default_rng(1).standard_normal((n, d))
    ell = float(np.sqrt(d))
    ref = timed(
        "sklearn Nystroem",
        lambda: Nystroem(gamma=0.5 / ell**2, n_components=m, random_state=0).fit_transform(x),
        repeats,
    )
    ours = timed(
        "randfeat_rs NystroemFeatures",
        lambda: rf.NystroemFeatures(m, length_scale=ell, random_state=0).fit_transform(x),
        repeats,
    )
    ROWS.append(f"| {name} | sklearn Nystroem | {ref:.3f} | 1.0x | |")
    ROWS.append(f"| {name} | randfeat_rs NystroemFeatures | {ours:.3f} | {ref / ours:.1f}x | |")


def main() -> None:
    rf.set_num_threads(THREADS)
    print(f"Machine: {machine_line()}")
    with threadpool_limits(THREADS):
        case(100_000, 64, 4096, np.float64, ("mc",), repeats=3)
        case(100_000, 64, 4096, np.float32, ("mc",), repeats=3)
        floor_case(100_000, 64, 4096)
        case(20_000, 1024, 4096, np.float64, ("mc", "structured"), repeats=3)
        nystroem_case(100_000, 64, 1024, repeats=3)
    print("\n| case | method | time (s) | speed-up vs sklearn | goal |")
    print("|---|---|---|---|---|")
    print("\n".join(ROWS))


if __name__ == "__main__":
    main()
