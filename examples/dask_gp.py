"""A GP fitted out of core with dask (docs/guide/dask.rst).

``RandomFeatureGPR`` (random Fourier features, D = 1,024) on N rows
generated lazily by ``dask.array.random`` in blocks of about 160 MB, on a
LocalCluster of 2 single-threaded worker processes: each block's
``Phi^T Phi`` and ``Phi^T y`` are computed on a worker and tree-reduced;
the driver receives the 1,024 x 1,024 statistics only. Then lazy
predictions on new rows.

Point it at a real cluster by replacing the LocalCluster with
``distributed.Client("tcp://scheduler:8786")`` (or a dask-jobqueue /
dask-kubernetes cluster), and raise ``--n``.

Usage: ``python examples/dask_gp.py [--n 20000000]``.
"""

from __future__ import annotations

import argparse
import time

import dask.array as da
import distributed
import numpy as np

import randfeat_rs as rf
from randfeat_rs import dask as rdask


def target(X: da.Array) -> da.Array:
    """The noise-free function of the 8 inputs."""
    return da.sin(0.5 * X.sum(axis=1))


def main() -> None:
    parser = argparse.ArgumentParser(description="out-of-core RandomFeatureGPR on dask")
    parser.add_argument("--n", type=int, default=20_000_000, help="training rows")
    args = parser.parse_args()
    d = 8
    chunk_rows = 160_000_000 // (8 * d)
    with (
        distributed.LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            dashboard_address=":0",
            silence_logs=40,
            env={"RANDFEAT_NUM_THREADS": "1"},
        ) as cluster,
        distributed.Client(cluster),
    ):
        rng = da.random.default_rng(0)
        X = rng.uniform(-2.0, 2.0, (args.n, d), chunks=(chunk_rows, d))
        y = target(X) + 0.1 * rng.standard_normal(args.n, chunks=chunk_rows)
        features = rf.RandomFourierFeatures(1024, length_scale=2.0, random_state=0)
        t0 = time.perf_counter()
        gp = rdask.fit(rf.RandomFeatureGPR(features, noise_variance=0.01), X, y)
        seconds = time.perf_counter() - t0
        print(
            f"fitted on {gp.stats_.n_samples:,} rows in {seconds:.1f} s "
            f"({gp.stats_.n_samples / seconds:,.0f} rows/s), "
            f"{len(X.chunks[0])} blocks of up to {chunk_rows:,} rows"
        )
        Xt = da.random.default_rng(1).uniform(-2.0, 2.0, (100_000, d), chunks=(25_000, d))
        mean, std = rdask.predict(gp, Xt, return_std=True)
        rmse, mean_std = da.compute(da.sqrt(((mean - target(Xt)) ** 2).mean()), std.mean())
        print(f"test RMSE against the noise-free function: {float(rmse):.4f} (noise std 0.1)")
        print(f"mean predictive std of the latent function: {float(mean_std):.4f}")
        assert np.isfinite(rmse)


if __name__ == "__main__":
    main()
