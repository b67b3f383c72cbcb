"""`make demo`: every feature map of randfeat_rs on the shipped yacht data.

Part 1 fits each feature map on the standardized UCI yacht inputs (308 x 6)
and prints the relative Frobenius error of its Gram matrix against the exact
kernel, with the fit + transform time. Part 2 fits GP regressors on a
200 / 108 split: the exact GP with marginal-likelihood hyperparameters is the
reference; the feature-space GPs reuse its hyperparameters and are judged by
their mean KL divergence to it (ALGORITHMS.md 7.3) and their test RMSE.
"""

from __future__ import annotations

import time

import numpy as np

import randfeat_rs as rf
from randfeat_rs.datasets import load_yacht


def gram_error(Z, K) -> float:
    Z = Z.toarray() if hasattr(Z, "toarray") else Z
    return rf.relative_frobenius_error(Z @ Z.T, K)


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def part1(X: np.ndarray) -> None:
    d2 = ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1)
    ell = float(np.median(np.sqrt(d2[np.triu_indices(len(X), 1)])))
    k_gauss = rf.kernel_matrix(X, kernel="gaussian", length_scale=ell)
    k_lap = rf.kernel_matrix(X, kernel="laplacian", length_scale=ell)
    k_poly = (X @ X.T / ell**2 + 1.0) ** 3
    D = 512
    rows = [
        (
            "RFF mc, cos_sin",
            "gaussian",
            lambda: rf.RandomFourierFeatures(D, length_scale=ell, sampler="mc", random_state=0),
            k_gauss,
        ),
        (
            "RFF orthogonal",
            "gaussian",
            lambda: rf.RandomFourierFeatures(
                D, length_scale=ell, sampler="orthogonal", random_state=0
            ),
            k_gauss,
        ),
        (
            "RFF moment matching",
            "gaussian",
            lambda: rf.RandomFourierFeatures(
                D, length_scale=ell, sampler="moment_matching", random_state=0
            ),
            k_gauss,
        ),
        (
            "RFF quasi-Monte Carlo",
            "gaussian",
            lambda: rf.RandomFourierFeatures(D, length_scale=ell, sampler="qmc", random_state=0),
            k_gauss,
        ),
        (
            "Nystroem (m = D)",
            "gaussian",
            lambda: rf.NystroemFeatures(D, length_scale=ell, random_state=0),
            k_gauss,
        ),
        (
            "Maclaurin, optimized",
            "gaussian",
            lambda: rf.MaclaurinFeatures(D, length_scale=ell, random_state=0),
            k_gauss,
        ),
        (
            "Maclaurin, Kar-Karnick",
            "gaussian",
            lambda: rf.MaclaurinFeatures(D, length_scale=ell, allocation="random", random_state=0),
            k_gauss,
        ),
        (
            "PolynomialSketch TensorSRHT",
            "poly deg 3",
            lambda: rf.PolynomialSketch(D, degree=3, bias=1.0, length_scale=ell, random_state=0),
            k_poly,
        ),
        (
            "PolynomialSketch TensorSketch",
            "poly deg 3",
            lambda: rf.PolynomialSketch(
                D, degree=3, bias=1.0, length_scale=ell, sketch="tensor_sketch", random_state=0
            ),
            k_poly,
        ),
        (
            "random binning (P = D)",
            "laplacian",
            lambda: rf.RandomBinningFeatures(D, length_scale=ell, random_state=0),
            k_lap,
        ),
    ]
    print(
        f"Part 1: kernel approximation on yacht (308 x 6, standardized), "
        f"length scale = median distance = {ell:.2f}, D = {D}"
    )
    print(f"{'feature map':<32}{'kernel':<12}{'rel. Frobenius error':>22}{'time [ms]':>11}")
    for name, kernel, make, K in rows:
        Z, dt = timed(lambda make=make: make().fit_transform(X))
        print(f"{name:<32}{kernel:<12}{gram_error(Z, K):>22.4f}{dt * 1e3:>11.1f}")


def part2(X: np.ndarray, y: np.ndarray) -> None:
    rng = np.random.default_rng(0)
    idx = rng.permutation(len(X))
    tr, te = idx[:200], idx[200:]
    mu, sd = X[tr].mean(0), X[tr].std(0)
    Xtr, Xte = (X[tr] - mu) / sd, (X[te] - mu) / sd
    ym, ys = y[tr].mean(), y[tr].std()
    ytr, yte = (y[tr] - ym) / ys, (y[te] - ym) / ys

    exact, t_fit = timed(lambda: rf.ExactGPR(random_state=0).fit(Xtr, ytr))
    (m_ref, s_ref), t_pred = timed(lambda: exact.predict_noisy(Xte))
    ell, sig2, noise = exact.length_scale_, exact.kernel_variance_, exact.noise_variance_
    print(
        f"\nPart 2: GP regression on yacht (200 train / 108 test, standardized); exact GP "
        f"LML fit: length scale {float(np.ravel(ell)[0]):.2f}, kernel variance {sig2:.3f}, "
        f"noise variance {noise:.4f}"
    )
    print(f"{'model':<34}{'KL to exact':>12}{'RMSE':>8}{'fit [s]':>9}{'predict [s]':>13}")
    print(
        f"{'ExactGPR (reference)':<34}{0.0:>12.4f}{rf.rmse(yte, m_ref):>8.4f}"
        f"{t_fit:>9.3f}{t_pred:>13.4f}"
    )
    D = 256
    maps = [
        (
            "RFF GP (orthogonal)",
            rf.RandomFourierFeatures(
                D,
                length_scale=float(np.ravel(ell)[0]),
                kernel_variance=sig2,
                sampler="orthogonal",
                random_state=0,
            ),
        ),
        (
            "Maclaurin GP (optimized)",
            rf.MaclaurinFeatures(
                D, length_scale=float(np.ravel(ell)[0]), kernel_variance=sig2, random_state=0
            ),
        ),
    ]
    for name, fmap in maps:
        gp = rf.RandomFeatureGPR(fmap, noise_variance=noise)
        _, t_fit = timed(lambda gp=gp: gp.fit(Xtr, ytr))
        (m, s), t_pred = timed(lambda gp=gp: gp.predict_noisy(Xte))
        kl = rf.kl_divergence(m, s**2, m_ref, s_ref**2)
        print(
            f"{name + f' (D = {D})':<34}{kl:>12.4f}{rf.rmse(yte, m):>8.4f}"
            f"{t_fit:>9.3f}{t_pred:>13.4f}"
        )
    for threshold in (1.0, "auto"):
        gp = rf.LocalizedMaclaurinGPR(
            D,
            length_scale=float(np.ravel(ell)[0]),
            kernel_variance=sig2,
            noise_variance=noise,
            threshold=threshold,
            random_state=0,
        )
        _, t_fit = timed(lambda gp=gp: gp.fit(Xtr, ytr))
        (m, s), t_pred = timed(lambda gp=gp: gp.predict_noisy(Xte))
        kl = rf.kl_divergence(m, s**2, m_ref, s_ref**2)
        name = f"Localized (theta={threshold}, {gp.n_clusters_} cl.)"
        print(f"{name:<34}{kl:>12.4f}{rf.rmse(yte, m):>8.4f}{t_fit:>9.3f}{t_pred:>13.4f}")


def main() -> None:
    X, y = load_yacht()
    Xs = (X - X.mean(axis=0)) / X.std(axis=0)
    part1(Xs)
    part2(X, y)


if __name__ == "__main__":
    main()
