"""002 Fig. 7 on digits: KL to the exact GP classifier against wall-clock time.

The experiment of 002 Section 6.3 (its Fig. 7, there on FashionMNIST and a
P100 GPU) on scikit-learn's shipped digits (1,797 x 64, 10 classes; split
1,400 / 397 by the seeded permutation of ``compare_gpc.py``) on this
machine's CPU: the Dirichlet GP classifier (docs/math/classification.rst,
``alpha_epsilon = 0.01``) with the polynomial kernel of 002 Eq. 57 with
``a = 2`` on the unit sphere,

    k(x, y) = s2 * (1 - |x - y|^2 / 4)^p = s2 * ((1 + x . y) / 2)^p,

inputs divided by 16 ("non-centered"; non-negative) or also centered by the
training mean ("centered"), then unit-normalized (002 Section 6.1.2), and
``s2`` the variance of the transformed training targets of all classes (as
002 sets the kernel variance to the variance of the labels). Approximations:
:class:`randfeat_rs.RandomFeatureGPC` on :class:`randfeat_rs.PolynomialSketch`
features (Rademacher and TensorSRHT, real and complex weights) with
``bias = s / 2`` and ``length_scale = sqrt(2 / s)``, ``s = s2^(1/p)``, which
is exactly this kernel; D real output columns (D / 2 complex features with
complex weights).

Metric (002 Section 6.1.3 and Appendix D.5, docs/math/gp.rst "Metrics"): the
KL divergence ``KL(approximate || exact)`` of the latent Gaussians at the
test inputs, averaged over the test points and the classes. Time: the
approximation's ``fit`` (drawing the sketch, the features, the per-class
statistics, the factors) plus its ``predict_latent`` on the test inputs,
as 002 times the features and the posterior. Medians over seeds.

The exact reference: :class:`randfeat_rs.ExactGPC` has only the Gaussian
kernel, so the exact latents are computed here from the kernel matrices
(one Cholesky factor of ``K + Sigma_c`` per class, the formulas of
docs/math/classification.rst, "Exact kernel"). The same code with the
Gaussian kernel is first checked against ``ExactGPC``'s latents.

Writes ``benches/results/paper_002_fig7.png`` and prints the table;
``--quick`` runs fewer feature counts and seeds (a smoke run).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from scipy.linalg import cho_solve, cholesky, solve_triangular
from sklearn.datasets import load_digits

sys.path.insert(0, str(Path(__file__).parent))
from _common import machine_line

import randfeat_rs as rf

RESULTS = Path(__file__).resolve().parent / "results"
N_TRAIN = 1_400
ALPHA_EPSILON = 0.01
DEGREES = (3, 7)
SKETCHES = {
    "Rademacher": ("rademacher", False),
    "Rademacher comp.": ("rademacher", True),
    "TensorSRHT": ("tensor_srht", False),
    "TensorSRHT comp.": ("tensor_srht", True),
}


def digits(centered: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The split of compare_gpc.py, inputs / 16 (centered), unit-normalized."""
    X, y = load_digits(return_X_y=True)
    perm = np.random.default_rng(0).permutation(X.shape[0])
    X = X[perm] / 16.0
    y = y[perm]
    if centered:
        X = X - X[:N_TRAIN].mean(axis=0)
    X = X / np.linalg.norm(X, axis=1, keepdims=True)
    return X[:N_TRAIN], y[:N_TRAIN], X[N_TRAIN:], y[N_TRAIN:]


def targets(codes: np.ndarray, c: int) -> tuple[np.ndarray, np.ndarray]:
    """The Dirichlet label transform of class ``c``: targets and noise variances."""
    alpha = (codes == c) + ALPHA_EPSILON
    noise = np.log1p(1.0 / alpha)
    return np.log(alpha) - noise / 2, noise


def exact_latents(
    K: np.ndarray, Ks: np.ndarray, kss: np.ndarray, codes: np.ndarray, n_classes: int
) -> tuple[np.ndarray, np.ndarray]:
    """Exact latent means and variances (m x C) from ``K = k(X, X)``,
    ``Ks = k(X, X*)`` and ``kss = diag k(X*, X*)``: per class
    ``L L^T = K + Sigma_c``, mean ``m_c + Ks^T (K + Sigma_c)^-1 (y_c - m_c)``,
    variance ``kss - |L^-1 Ks|^2`` (clipped at 0)."""
    mean = np.empty((Ks.shape[1], n_classes))
    var = np.empty_like(mean)
    for c in range(n_classes):
        yc, noise = targets(codes, c)
        m = yc.mean()
        L = cholesky(K + np.diag(noise), lower=True)
        mean[:, c] = m + Ks.T @ cho_solve((L, True), yc - m)
        v = solve_triangular(L, Ks, lower=True)
        var[:, c] = np.maximum(kss - np.einsum("ij,ij->j", v, v), 0.0)
    return mean, var


def check_reference(Xtr, ytr, Xte) -> float:
    """Max |difference| of the exact latents above and ExactGPC's (Gaussian kernel)."""
    length_scale, kernel_variance = 0.7, 3.0

    def k(a, b):
        d2 = (a * a).sum(1)[:, None] + (b * b).sum(1)[None, :] - 2 * a @ b.T
        return kernel_variance * np.exp(-np.maximum(d2, 0) / (2 * length_scale**2))

    mean, var = exact_latents(
        k(Xtr, Xtr), k(Xtr, Xte), np.full(Xte.shape[0], kernel_variance), ytr, 10
    )
    clf = rf.ExactGPC(
        length_scale=length_scale, kernel_variance=kernel_variance, alpha_epsilon=ALPHA_EPSILON
    ).fit(Xtr, ytr)
    m2, v2 = clf.predict_latent(Xte)
    return float(max(np.abs(mean - m2).max(), np.abs(var - v2).max()))


def kernel_variance(codes: np.ndarray, n_classes: int) -> float:
    """The variance of the transformed targets of all classes (002's ``sigma^2``)."""
    return float(np.concatenate([targets(codes, c)[0] for c in range(n_classes)]).var())


def run(Ds: list[int], seeds: list[int]) -> list[dict]:
    rows = []
    for centered in (False, True):
        Xtr, ytr, Xte, _ = digits(centered)
        s2 = kernel_variance(ytr, 10)
        G, Gs = Xtr @ Xtr.T, Xtr @ Xte.T
        for p in DEGREES:
            K, Ks = s2 * ((1 + G) / 2) ** p, s2 * ((1 + Gs) / 2) ** p
            kss = s2 * ((1 + (Xte * Xte).sum(1)) / 2) ** p
            t0 = time.perf_counter()
            mean_q, var_q = exact_latents(K, Ks, kss, ytr, 10)
            exact_s = time.perf_counter() - t0
            s = s2 ** (1.0 / p)
            for name, (sketch, complex_weights) in SKETCHES.items():
                for D in Ds:
                    kls, times = [], []
                    for seed in seeds:
                        features = rf.PolynomialSketch(
                            D,
                            degree=p,
                            bias=s / 2,
                            length_scale=float(np.sqrt(2 / s)),
                            sketch=sketch,
                            complex_weights=complex_weights,
                            random_state=seed,
                        )
                        t0 = time.perf_counter()
                        clf = rf.RandomFeatureGPC(features, alpha_epsilon=ALPHA_EPSILON)
                        clf.fit(Xtr, ytr)
                        mean_p, var_p = clf.predict_latent(Xte)
                        times.append(time.perf_counter() - t0)
                        kls.append(
                            rf.kl_divergence(
                                mean_p.ravel(), var_p.ravel(), mean_q.ravel(), var_q.ravel()
                            )
                        )
                    rows.append(
                        {
                            "data": "centered" if centered else "non-centered",
                            "degree": p,
                            "sketch": name,
                            "D": D,
                            "kl": statistics.median(kls),
                            "seconds": statistics.median(times),
                            "exact_seconds": exact_s,
                        }
                    )
                    r = rows[-1]
                    print(
                        f"  {r['data']:<13} p={p:<2} {name:<17} D={D:<5} "
                        f"KL {r['kl']:9.4g}  {r['seconds']:7.3f} s",
                        flush=True,
                    )
    return rows


def plot(rows: list[dict], path: Path) -> None:
    datas = ("non-centered", "centered")
    fig, axes = plt.subplots(
        len(DEGREES), len(datas), figsize=(10, 4 * len(DEGREES)), squeeze=False
    )
    styles = {
        "Rademacher": ("tab:blue", "--", "o"),
        "Rademacher comp.": ("tab:blue", "-", "s"),
        "TensorSRHT": ("tab:red", "--", "o"),
        "TensorSRHT comp.": ("tab:red", "-", "s"),
    }
    for i, p in enumerate(DEGREES):
        for j, data in enumerate(datas):
            ax = axes[i][j]
            for name, (color, ls, marker) in styles.items():
                pts = [
                    r
                    for r in rows
                    if r["degree"] == p and r["data"] == data and r["sketch"] == name
                ]
                ax.plot(
                    [r["seconds"] for r in pts],
                    [r["kl"] for r in pts],
                    color=color,
                    linestyle=ls,
                    marker=marker,
                    label=name,
                )
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel("wall-clock time of fit + predict_latent (s)")
            ax.set_ylabel("KL to the exact GP (latents)")
            ax.set_title(f"digits, {data}, degree p = {p}")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer D and seeds")
    args = parser.parse_args()
    Ds = [256, 1024] if args.quick else [128, 256, 512, 1024, 2048]
    seeds = [0] if args.quick else [0, 1, 2]
    print(machine_line())
    print(f"Load average: {os.getloadavg()}")
    Xtr, ytr, Xte, _ = digits(centered=True)
    err = check_reference(Xtr, ytr, Xte)
    print(f"exact reference against ExactGPC (Gaussian kernel): max |difference| {err:.2e}")
    if err > 1e-6:
        raise SystemExit("the exact reference does not reproduce ExactGPC")
    rows = run(Ds, seeds)
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / "paper_002_fig7.png"
    plot(rows, path)
    print(
        f"\ndigits {N_TRAIN} / 397, 10 classes, alpha_epsilon {ALPHA_EPSILON}; median of "
        f"{len(seeds)} seed(s); time = fit + predict_latent; exact reference "
        f"{rows[0]['exact_seconds']:.2f} s"
    )
    print(f"{'data':<13} {'p':>2} {'sketch':<17} {'D':>5} {'KL':>10} {'seconds':>8}")
    for r in rows:
        print(
            f"{r['data']:<13} {r['degree']:>2} {r['sketch']:<17} {r['D']:>5} "
            f"{r['kl']:10.4g} {r['seconds']:8.3f}"
        )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
