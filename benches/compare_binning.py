"""Random binning side by side: randfeat_rs against a straightforward NumPy + dict version.

The same map (docs/math/binning.rst: same pitches and shifts, bins numbered
per grid in order of first appearance) on 200,000 x 16 rows with P = 50
grids. The NumPy version computes each grid's bins with one vectorized
``floor`` and numbers them with a Python dict keyed by bin tuples, which is
what a user would write. Goal: randfeat_rs at least 20x faster.

Prints a markdown table (randfeat_rs: medians of 5 runs; the NumPy version, which
takes minutes, once: it checked equal outputs just before) and the machine line; the numbers go to
BENCHMARKS.md. Run through ``make bench``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import scipy.sparse

sys.path.insert(0, str(Path(__file__).parent))
from _common import machine_line, median_time

import randfeat_rs as rf

GOAL = 20.0


def numpy_dict_fit_transform(
    X: np.ndarray, pitches: np.ndarray, shifts: np.ndarray
) -> tuple[scipy.sparse.csr_matrix, list[dict]]:
    """Vocabulary-mode random binning with NumPy bins and one dict per grid."""
    n, p = X.shape[0], pitches.shape[0]
    cols = np.empty((n, p), dtype=np.int64)
    vocabs: list[dict] = []
    offset = 0
    for g in range(p):
        bins = np.floor((X - shifts[g]) / pitches[g]).astype(np.int64)
        vocab: dict = {}
        ids = [vocab.setdefault(key, len(vocab)) for key in map(tuple, bins.tolist())]
        cols[:, g] = np.asarray(ids) + offset
        offset += len(vocab)
        vocabs.append(vocab)
    data = np.full(n * p, 1 / np.sqrt(p), dtype=X.dtype)
    indptr = np.arange(0, n * p + 1, p)
    return scipy.sparse.csr_matrix((data, cols.ravel(), indptr), shape=(n, offset)), vocabs


def numpy_dict_transform(
    X: np.ndarray, pitches: np.ndarray, shifts: np.ndarray, vocabs: list[dict]
) -> scipy.sparse.csr_matrix:
    """Transform of new rows with the dict vocabularies (unseen bins dropped)."""
    n, p = X.shape[0], pitches.shape[0]
    rows, cols = [], []
    offset = 0
    for g in range(p):
        bins = np.floor((X - shifts[g]) / pitches[g]).astype(np.int64)
        vocab = vocabs[g]
        ids = np.array([vocab.get(key, -1) for key in map(tuple, bins.tolist())])
        hit = np.flatnonzero(ids >= 0)
        rows.append(hit)
        cols.append(ids[hit] + offset)
        offset += len(vocab)
    r, c = np.concatenate(rows), np.concatenate(cols)
    data = np.full(len(r), 1 / np.sqrt(p), dtype=X.dtype)
    return scipy.sparse.csr_matrix((data, (r, c)), shape=(n, offset))


def main() -> None:
    print(f"Machine: {machine_line()}\n")
    rng = np.random.default_rng(0)
    n, d, p = 200_000, 16, 50
    X = rng.standard_normal((n, d))
    Xnew = rng.standard_normal((n, d))
    # length_scale 4: about 10,000 occupied bins per grid; ~98% of new rows' bins were seen.
    est = rf.RandomBinningFeatures(p, length_scale=4.0, random_state=0)
    Z = est.fit_transform(X)
    Zb, vocabs = numpy_dict_fit_transform(X, est.pitches_, est.shifts_)
    assert Z.shape == Zb.shape and (Z != Zb).nnz == 0, "the two maps differ"
    Zn, Znb = est.transform(Xnew), numpy_dict_transform(Xnew, est.pitches_, est.shifts_, vocabs)
    assert Zn.shape == Znb.shape and (Zn != Znb).nnz == 0, "the two transforms differ"
    print(
        f"{n} x {d} rows, P = {p} grids, {Z.shape[1]} occupied bins, "
        f"{Zn.nnz / (n * p):.0%} of new rows' bins seen at fit\n"
    )

    hashed = rf.RandomBinningFeatures(p, length_scale=4.0, hashing=2**24, random_state=0).fit(X)
    rows = [
        (
            "fit_transform (vocabulary)",
            median_time(lambda: est.fit_transform(X), repeats=5),
            median_time(
                lambda: numpy_dict_fit_transform(X, est.pitches_, est.shifts_),
                repeats=1,
                warmup=0,
            ),
        ),
        (
            "transform of new rows (vocabulary)",
            median_time(lambda: est.transform(Xnew), repeats=5),
            median_time(
                lambda: numpy_dict_transform(Xnew, est.pitches_, est.shifts_, vocabs),
                repeats=1,
                warmup=0,
            ),
        ),
    ]
    t_hash = median_time(lambda: hashed.transform(Xnew), repeats=5)
    print("| operation | randfeat_rs | NumPy + dict | speed-up (goal >= 20x) |")
    print("|---|---|---|---|")
    for name, t_rf, t_np in rows:
        ok = "met" if t_np / t_rf >= GOAL else "NOT met"
        print(f"| {name} | {t_rf * 1e3:.0f} ms | {t_np * 1e3:.0f} ms | {t_np / t_rf:.1f}x ({ok}) |")
    print(f"| transform, hashing=2**24 (no baseline) | {t_hash * 1e3:.0f} ms | | |")


if __name__ == "__main__":
    main()
