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
   against the in-process fit with fixed hyperparameters (one evaluation
   with the gradient), on ``N / 10`` and ``N / 100`` rows respectively.

Peak memory per worker: the largest VmHWM (peak resident set) of the
worker processes after the fits. Goal (issue): dask throughput >= 85% of
the in-process one, peak worker memory < 1 GB, at N = 20,000,000.

Usage: ``python benches/compare_dask.py [--n 20000000] [--chunk-mb 160]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _common import machine_line

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
    args = parser.parse_args()

    import distributed

    import randfeat_rs as rf
    from randfeat_rs import dask as rdask

    chunk_rows = max(1, int(args.chunk_mb * 1e6 / (8 * D_IN)))
    n_mem = max(args.n // 10, 1)
    print(machine_line())
    print(f"load average before: {os.getloadavg()}")
    rff = rf.RandomFourierFeatures(D_FEAT, length_scale=1.0, random_state=0)
    gp = rf.RandomFeatureGPR(rff, noise_variance=NOISE)

    # In-process arm: an in-memory array, 2 threads.
    before = rf.get_num_threads()
    rf.set_num_threads(2)
    Xm, ym = _memory_rows(n_mem, 1)
    t0 = time.perf_counter()
    gp.fit(Xm, ym)
    t_mem = time.perf_counter() - t0
    rf.set_num_threads(before)
    del Xm, ym

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
        n_sp = max(args.n // 10, 1)
        n_sp_mem = max(args.n // 100, 1)
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
        sgp.fit(Xs, ys)
        t_sp_mem = time.perf_counter() - t0
        rf.set_num_threads(before)
        Xd, yd = _lazy_rows(n_sp, chunk_rows, 4)
        t0 = time.perf_counter()
        rdask.sparse_objective(sgp, Xd, yd)
        t_sp_dask = time.perf_counter() - t0
        peak = max(client.run(_vm_hwm_bytes).values())
        r_mem, r_dask = n_sp_mem / t_sp_mem, n_sp / t_sp_dask
        print(f"\nSparseGPR (VFE), M = {z.shape[0]}, one bound-and-gradient evaluation")
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
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
