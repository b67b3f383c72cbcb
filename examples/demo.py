"""`make demo`: the feature maps that exist, on the shipped yacht data.

Prints a table of kernel-approximation error and time. Later issues turn it
into the GP demo.
"""

from __future__ import annotations

import time

import numpy as np

import randfeat_rs as rf
from randfeat_rs.datasets import load_yacht


def main() -> None:
    X, _ = load_yacht()
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    n_pad = 8
    Xp = np.zeros((X.shape[0], n_pad))
    Xp[:, : X.shape[1]] = X
    t0 = time.perf_counter()
    Z = rf.fwht(Xp, normalized=True)
    dt = time.perf_counter() - t0
    gram_err = np.linalg.norm(Z @ Z.T - Xp @ Xp.T) / np.linalg.norm(Xp @ Xp.T)
    print("yacht (308 x 6, standardized, zero-padded to 8)")
    print(f"{'map':<28}{'rel. Frobenius error':>22}{'time [ms]':>12}")
    print(f"{'orthonormal FWHT (exact)':<28}{gram_err:>22.2e}{dt * 1e3:>12.3f}")
    ps = rf.PolynomialSketch(2048, degree=3, bias=1.0, length_scale=3.0, random_state=0)
    t0 = time.perf_counter()
    F = ps.fit_transform(X)
    dt = time.perf_counter() - t0
    K = (X @ X.T / 9.0 + 1.0) ** 3
    gram_err = np.linalg.norm(F @ F.T - K) / np.linalg.norm(K)
    print(f"{'TensorSRHT poly n=3, D=2048':<28}{gram_err:>22.2e}{dt * 1e3:>12.3f}")


if __name__ == "__main__":
    main()
