"""`make demo`: every feature map and GP of randfeat_rs on the shipped data.

Part 1 fits each feature map on the standardized UCI yacht inputs (308 x 6)
and prints the relative Frobenius error of its Gram matrix against the exact
kernel, with the fit + transform time. Parts 2 and 3 fit GP regressors: the
exact GP with marginal-likelihood hyperparameters is the reference; the
feature-space GPs (RFF, Maclaurin, localized Maclaurin) reuse its
hyperparameters, while SparseGPR (inducing inputs, VFE bound) and the RFF GP
with ``optimize`` fit their own (those the exact GP fits), and all are
judged by their mean KL divergence to it (docs/math/gp.rst, "Metrics"),
their test RMSE and their fit and predict times. Part 2 is yacht on a
200 / 108 split, standardized and with the raw inputs of 000; part 3 is
000's sinc example, whose figure is saved to ``examples/output``.
"""

from __future__ import annotations

import time
from pathlib import Path

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


def gp_table(
    title: str,
    exact: rf.ExactGPR,
    data: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    D: int,
    localized: list[tuple[str, dict]],
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Fit the exact GP and the feature-space GPs on its hyperparameters; print one table.

    Returns each model's noisy predictive mean and std on the test inputs (for figures).
    """
    Xtr, ytr, Xte, yte = data
    _, t_fit = timed(lambda: exact.fit(Xtr, ytr))
    (m_ref, s_ref), t_pred = timed(lambda: exact.predict_noisy(Xte))
    ell = float(np.ravel(exact.length_scale_)[0])
    sig2, noise = exact.kernel_variance_, exact.noise_variance_
    print(
        f"\n{title}\nexact GP: length scale {ell:.3f}, kernel variance {sig2:.3f}, "
        f"noise variance {noise:.4f}; KL is the mean over the test points"
    )
    print(f"{'model':<48}{'KL to exact':>12}{'RMSE':>8}{'fit [s]':>9}{'predict [s]':>13}")
    print(
        f"{'ExactGPR (reference)':<48}{0.0:>12.4f}{rf.rmse(yte, m_ref):>8.4f}"
        f"{t_fit:>9.3f}{t_pred:>13.4f}"
    )
    center_y = exact.center_y
    models: list[tuple[str, object]] = [
        (
            "RFF GP (orthogonal)",
            rf.RandomFeatureGPR(
                rf.RandomFourierFeatures(
                    D, length_scale=ell, kernel_variance=sig2, sampler="orthogonal", random_state=0
                ),
                noise_variance=noise,
                center_y=center_y,
            ),
        ),
        (
            "Maclaurin GP (optimized)",
            rf.RandomFeatureGPR(
                rf.MaclaurinFeatures(D, length_scale=ell, kernel_variance=sig2, random_state=0),
                noise_variance=noise,
                center_y=center_y,
            ),
        ),
    ]
    # The GPs that fit their own hyperparameters (those the exact GP fits,
    # from the defaults; the others as the exact GP has them).
    fitted = tuple(exact.optimize)

    def own(name: str, value: float) -> float | None:
        return None if name in fitted else value

    n_inducing = min(D, 64)
    models += [
        (
            f"SparseGPR (VFE, M = {n_inducing}, own hyp.)",
            rf.SparseGPR(
                n_inducing,
                length_scale=own("length_scale", ell),
                kernel_variance=own("kernel_variance", sig2),
                noise_variance=own("noise_variance", noise),
                optimize=fitted,
                center_y=center_y,
                random_state=0,
            ),
        ),
        (
            "RFF GP (own hyp. by its LML)",
            rf.RandomFeatureGPR(
                rf.RandomFourierFeatures(
                    D,
                    length_scale=own("length_scale", ell) or 1.0,
                    kernel_variance=own("kernel_variance", sig2) or 1.0,
                    sampler="orthogonal",
                    random_state=0,
                ),
                noise_variance=own("noise_variance", noise),
                optimize=fitted,
                n_restarts=0,
                center_y=center_y,
            ),
        ),
    ]
    for name, kw in localized:
        gp = rf.LocalizedMaclaurinGPR(
            D,
            length_scale=ell,
            kernel_variance=sig2,
            noise_variance=noise,
            center_y=center_y,
            random_state=0,
            **kw,
        )
        models.append((f"Localized, {name}", gp))
    predictions = {"ExactGPR": (m_ref, s_ref)}
    for name, gp in models:
        _, t_fit = timed(lambda gp=gp: gp.fit(Xtr, ytr))
        (m, s), t_pred = timed(lambda gp=gp: gp.predict_noisy(Xte))
        if hasattr(gp, "n_clusters_") and gp.centers != "test":
            name += f" ({gp.n_clusters_} cl.)"
        kl = rf.kl_divergence(m, s**2, m_ref, s_ref**2)
        label = name if isinstance(gp, rf.SparseGPR) else f"{name}, D = {D}"
        print(f"{label:<48}{kl:>12.4f}{rf.rmse(yte, m):>8.4f}{t_fit:>9.3f}{t_pred:>13.4f}")
        predictions[name] = (m, s)
    return predictions


def split(X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, ...]:
    """The 200 / 108 yacht split of 000 (a fixed permutation)."""
    idx = np.random.default_rng(0).permutation(len(X))
    tr, te = idx[:200], idx[200:]
    return X[tr], y[tr], X[te], y[te]


def part2(X: np.ndarray, y: np.ndarray) -> None:
    Xtr, ytr, Xte, yte = split(X, y)
    mu, sd = Xtr.mean(0), Xtr.std(0)
    ym, ys = ytr.mean(), ytr.std()
    gp_table(
        "Part 2a: GP regression on yacht (200 train / 108 test, standardized), every "
        "hyperparameter by marginal likelihood",
        rf.ExactGPR(random_state=0),
        ((Xtr - mu) / sd, (ytr - ym) / ys, (Xte - mu) / sd, (yte - ym) / ys),
        256,
        [("theta = 1 l", {"threshold": 1.0}), ('threshold="auto"', {"threshold": "auto"})],
    )
    gp_table(
        "Part 2b: yacht with raw inputs and the paper's length scale 0.31 (000 section 4): "
        "one set of Maclaurin features cannot cover the data, localized ones can",
        rf.ExactGPR(
            length_scale=0.31, optimize=("kernel_variance", "noise_variance"), random_state=0
        ),
        (Xtr, ytr, Xte, yte),
        256,
        [
            ("one cluster", {"n_clusters": 1}),
            ("theta = 1 l", {"threshold": 1.0}),
            ('threshold="auto"', {"threshold": "auto"}),
        ],
    )


def part3(out_dir: Path) -> None:
    """sinc (000 Fig. 2): 50 points, D = 10; the figure goes to ``out_dir/sinc.png``."""
    rng = np.random.default_rng(8)
    X = rng.uniform(-1.5, 1.5, (50, 1))
    y = np.sinc(5 * X[:, 0]) + 0.1 * rng.standard_normal(50)
    grid = np.linspace(-2.25, 2.25, 400)[:, None]
    truth = np.sinc(5 * grid[:, 0])
    # The paper's setting: noise variance fixed at 0.01 and a zero prior mean.
    exact = rf.ExactGPR(
        noise_variance=0.01,
        optimize=("length_scale", "kernel_variance"),
        center_y=False,
        random_state=0,
    )
    pred = gp_table(
        "Part 3: sinc(5x), 50 noisy points, 400 grid points on [-2.25, 2.25] (RMSE against "
        "the noiseless function)",
        exact,
        (X, y, grid, truth),
        10,
        [
            ("k_p (one center)", {"n_clusters": 1}),
            ("k_p* (center = test point)", {"centers": "test"}),
        ],
    )
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    m_ref, s_ref = pred.pop("ExactGPR")
    fig, axes = plt.subplots(1, len(pred), figsize=(4 * len(pred), 3.4), sharey=True)
    for ax, (name, (m, s)) in zip(axes, pred.items()):
        ax.fill_between(grid[:, 0], m_ref - 2 * s_ref, m_ref + 2 * s_ref, color="0.85")
        ax.plot(grid[:, 0], m_ref, "k", lw=1, label="exact GP")
        ax.plot(grid[:, 0], m, "C1", lw=1.5, label="approximation")
        ax.plot(grid[:, 0], m - 2 * s, "C1--", lw=0.8)
        ax.plot(grid[:, 0], m + 2 * s, "C1--", lw=0.8)
        ax.plot(X[:, 0], y, "k.", ms=4)
        ax.set_title(name, fontsize=9)
        ax.set_ylim(-1.5, 1.8)
    axes[0].legend(loc="lower left", fontsize=7)
    fig.tight_layout()
    out_dir.mkdir(parents=True, exist_ok=True)
    fig.savefig(out_dir / "sinc.png", dpi=110)
    plt.close(fig)
    print(f"\nfigure: {out_dir / 'sinc.png'}")


def main() -> None:
    X, y = load_yacht()
    Xs = (X - X.mean(axis=0)) / X.std(axis=0)
    part1(Xs)
    part2(X, y)
    part3(Path(__file__).resolve().parent / "output")


if __name__ == "__main__":
    main()
