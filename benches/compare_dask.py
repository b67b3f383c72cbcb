"""Out-of-core fits on dask against in-process fits (docs/guide/dask.rst), in `make bench`.

1. RandomFeatureGPR with RandomFourierFeatures (D = 1,024, d = 8): the
   dask arm fits ``N`` rows generated lazily by ``dask.array.random`` in
   blocks of ``--chunk-mb`` MB (never all in memory) on a LocalCluster of 2
   worker processes with 1 thread each (``RANDFEAT_NUM_THREADS=1``); the
   in-process arm fits an in-memory array of ``N / 10`` rows with 2 threads
   (the same 2 cores). Throughput = rows per second of the fit; the dask
   arm's time includes generating the rows on the workers.
2. SparseGPR (M = 512): one evaluation of the VFE bound and its gradient,
   the dask arm's two tree reductions (:func:`randfeat_rs.dask.sparse_objective`)
   over the same ``N`` lazily generated rows and blocks as arm 1, against
   the in-process fit with fixed hyperparameters (one evaluation with the
   gradient: both streamed passes) on ``N / 10`` rows in memory.
3. RandomFeatureGPR(ard=True) (RFF, D = 256, d = 8): one evaluation of the
   log marginal likelihood and its per-dimension gradient on ``--ard-n``
   rows (200,000), in memory with 2 threads against the dask arm on the
   rows persisted on the 2 workers: the two reductions of the fit
   (statistics, then the second pass with the driver's solve).

Peak memory per worker: the largest VmHWM (peak resident set) of the
worker processes after the fits. Goal (issue): dask throughput >= 85% of
the in-process one, peak worker memory < 1 GB, at N = 20,000,000.

Usage: ``python benches/compare_dask.py [--n 20000000] [--chunk-mb 160] [--ard-n 200000]
[--arms out-of-core,ard]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _common import machine_line, sparse_evaluation

D_IN, D_FEAT, M = 8, 1024, 512
NOISE = 0.01


def _vm_hwm_bytes() -> int:
    """This process's peak resident set (VmHWM)."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def _lazy_rows(n: int, chunk_rows: int, seed: int):  # type: ignore[no-untyped-def]
    import dask.array as da

    rng = da.random.default_rng(seed)
    X = rng.uniform(-2.0, 2.0, (n, D_IN), chunks=(chunk_rows, D_IN))
    y = da.sin(X[:, 0]) + da.cos(X[:, 1]) + 0.1 * rng.standard_normal(n, chunks=chunk_rows)
    return X, y


def _memory_rows(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2.0, 2.0, (n, D_IN))
    y = np.sin(X[:, 0]) + np.cos(X[:, 1]) + 0.1 * rng.standard_normal(n)
    return X, y


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20_000_000, help="rows of the dask arm")
    parser.add_argument("--chunk-mb", type=float, default=160.0, help="MB per block of X")
    parser.add_argument("--ard-n", type=int, default=200_000, help="rows of the ARD evaluation")
    parser.add_argument(
        "--arms", default="out-of-core,ard", help="comma-separated: out-of-core (1, 2), ard (3)"
    )
    args = parser.parse_args()
    arms = set(args.arms.split(","))

    import distributed

    import randfeat_rs as rf

    chunk_rows = max(1, int(args.chunk_mb * 1e6 / (8 * D_IN)))
    print(machine_line())
    print(f"load average before: {os.getloadavg()}")
    before = rf.get_num_threads()
    with (
        distributed.LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            dashboard_address=":0",
            silence_logs=40,
            env={"RANDFEAT_NUM_THREADS": "1"},
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        if "out-of-core" in arms:
            _out_of_core(args, client, chunk_rows, before)
        if "ard" in arms:
            _ard_evaluation(args.ard_n, before)
    print(f"load average after: {os.getloadavg()}")


def _out_of_core(args: argparse.Namespace, client: Any, chunk_rows: int, before: int) -> None:
    """Arms 1 and 2."""
    import randfeat_rs as rf
    from randfeat_rs import dask as rdask

    n_mem = max(args.n // 10, 1)
    rff = rf.RandomFourierFeatures(D_FEAT, length_scale=1.0, random_state=0)
    gp = rf.RandomFeatureGPR(rff, noise_variance=NOISE)
    # In-process arm: an in-memory array, 2 threads.
    rf.set_num_threads(2)
    Xm, ym = _memory_rows(n_mem, 1)
    t0 = time.perf_counter()
    gp.fit(Xm, ym)
    t_mem = time.perf_counter() - t0
    rf.set_num_threads(before)
    del Xm, ym
    X, y = _lazy_rows(args.n, chunk_rows, 2)
    # Warm the workers (imports, thread pools) on a small fit.
    rdask.fit(gp, X[: 2 * chunk_rows // 100], y[: 2 * chunk_rows // 100])
    t0 = time.perf_counter()
    model = rdask.fit(gp, X, y)
    t_dask = time.perf_counter() - t0
    assert model.stats_.n_samples == args.n
    peak = max(client.run(_vm_hwm_bytes).values())

    rate_mem, rate_dask = n_mem / t_mem, args.n / t_dask
    print(
        f"\nRandomFeatureGPR, RFF D = {D_FEAT}, d = {D_IN}; blocks of {chunk_rows:,} rows "
        f"({args.chunk_mb:g} MB), {len(X.chunks[0])} blocks"
    )
    print(
        f"  in-process, {n_mem:>12,} rows in memory, 2 threads: {t_mem:8.2f} s "
        f"{rate_mem:12,.0f} rows/s"
    )
    print(
        f"  dask, 2 workers x 1 thread, {args.n:>12,} rows lazy: {t_dask:8.2f} s "
        f"{rate_dask:12,.0f} rows/s"
    )
    print(f"  throughput ratio dask / in-process: {rate_dask / rate_mem:.3f} (goal >= 0.85)")
    print(f"  peak worker memory (VmHWM): {peak / 2**20:,.0f} MiB (goal < 1,024 MiB)")

    # SparseGPR: one bound-and-gradient evaluation.
    n_sp = args.n
    n_sp_mem = max(args.n // 10, 1)
    Xs, ys = _memory_rows(n_sp_mem, 3)
    z = Xs[:: max(n_sp_mem // M, 1)][:M]
    sgp = rf.SparseGPR(
        inducing=z,
        length_scale=1.0,
        kernel_variance=1.0,
        noise_variance=NOISE,
        optimize=(),
    )
    rf.set_num_threads(2)
    t0 = time.perf_counter()
    sparse_evaluation(Xs, ys, z, length_scale=1.0, kernel_variance=1.0, noise_variance=NOISE)
    t_sp_mem = time.perf_counter() - t0
    rf.set_num_threads(before)
    Xd, yd = _lazy_rows(n_sp, chunk_rows, 4)
    t0 = time.perf_counter()
    rdask.sparse_objective(sgp, Xd, yd)
    t_sp_dask = time.perf_counter() - t0
    peak = max(client.run(_vm_hwm_bytes).values())
    r_mem, r_dask = n_sp_mem / t_sp_mem, n_sp / t_sp_dask
    print(
        f"\nSparseGPR (VFE), M = {z.shape[0]}, one bound-and-gradient evaluation; "
        f"{len(Xd.chunks[0])} blocks"
    )
    print(
        f"  in-process, {n_sp_mem:>12,} rows in memory, 2 threads: {t_sp_mem:8.2f} s "
        f"{r_mem:12,.0f} rows/s"
    )
    print(
        f"  dask, 2 workers x 1 thread, {n_sp:>12,} rows lazy: {t_sp_dask:8.2f} s "
        f"{r_dask:12,.0f} rows/s"
    )
    print(f"  throughput ratio dask / in-process: {r_dask / r_mem:.3f}")
    print(f"  peak worker memory (VmHWM): {peak / 2**20:,.0f} MiB")


def _ard_evaluation(n: int, before: int) -> None:
    """Arm 3: one ARD evaluation, in memory against the cluster."""
    import dask
    import dask.array as da

    import randfeat_rs as rf
    from randfeat_rs import dask as rdask

    d_feat, chunk = 256, 2048
    Xm, ym = _memory_rows(n, 5)
    fmap = rf.RandomFourierFeatures(d_feat, length_scale=1.0, random_state=0).fit(Xm)
    fmap = fmap._feature_map()
    ls = [0.8 + 0.1 * a for a in range(D_IN)]
    values = [*ls, 1.0, NOISE]
    rf.set_num_threads(2)
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        rf._core.feature_gp_lml(
            fmap,
            Xm,
            ym,
            drawn_length_scale=[1.0],
            length_scale=ls,
            kernel_variance=1.0,
            noise_variance=NOISE,
            center=True,
            chunk_size=chunk,
        )
        times.append(time.perf_counter() - t0)
    t_mem = min(times)
    rf.set_num_threads(before)
    # Blocks of n / 8 rows, persisted on the workers.
    X, y = dask.persist(da.from_array(Xm, chunks=(n // 8, D_IN)), da.from_array(ym, n // 8))
    dask.compute(X.sum(), y.sum())
    del Xm, ym

    def two() -> None:
        sums = rdask._reduced(rdask._feature_lml_block, (fmap, [1.0], values, chunk), X, y)
        sums.log_marginal_likelihood(center_y=True)
        second = sums.gradient_pass(center_y=True)
        rdask._reduced(rdask._gradient_pass_block, (second, fmap, [1.0], chunk), X, y)

    def best(f) -> float:  # type: ignore[no-untyped-def]
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            f()
            times.append(time.perf_counter() - t0)
        return min(times)

    t_two = best(two)
    print(f"\nRandomFeatureGPR(ard=True), RFF D = {d_feat}, d = {D_IN}: one LML-and-gradient")
    print(f"evaluation of {n:,} rows (minimum of 3)")
    print(f"  in-process, in memory, 2 threads:                  {t_mem:8.2f} s")
    print(f"  dask, 2 workers x 1 thread, two reductions:        {t_two:8.2f} s")
    print(f"  ratio dask / in-process: {t_two / t_mem:.2f}")


if __name__ == "__main__":
    main()
