"""Calibration of GP classifiers on the digits: a reliability diagram.

RandomFeatureGPC (Dirichlet-based, closed form, its length scale and kernel
variance fitted by the marginal likelihood, ``alpha_epsilon`` chosen on
held-out rows) against scikit-learn's ``GaussianProcessClassifier``
(Laplace approximation, one-vs-rest, kernel fitted by its marginal
likelihood) on scikit-learn's shipped digits (1,797 images of 8 x 8 pixels,
10 classes; inputs / 16, centered by the training mean).

To keep the example short, scikit-learn's classifier is trained on the
first 200 training rows only (its fit grows like N^3 per class and optimizer
step; on 200 rows it still takes most of the example's two to three minutes
on 2 cores, against seconds for RandomFeatureGPC); RandomFeatureGPC (512
random Fourier features) is trained on all 1,400 and, for a like-for-like
line, on the same 200 rows. ``benches/compare_gpc.py`` compares both on the
full training set.

Usage::

    python examples/gpc_calibration.py reliability.png

writes the reliability diagram (the accuracy of the predicted class against
the predicted probability, in ten bins) to the given file and prints the
accuracy, the mean test negative log-likelihood and the expected calibration
error of every model.
"""

from __future__ import annotations

import sys
import time

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_digits
from sklearn.gaussian_process import GaussianProcessClassifier
from sklearn.gaussian_process.kernels import RBF, ConstantKernel

import randfeat_rs as rf

N_TRAIN, N_SKLEARN, N_BINS = 1_400, 200, 10


def digits() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The digits split 1,400 / 397 by a seeded permutation, inputs / 16 centered."""
    X, y = load_digits(return_X_y=True)
    perm = np.random.default_rng(0).permutation(X.shape[0])
    X = X[perm] / 16.0
    y = y[perm]
    mean = X[:N_TRAIN].mean(axis=0)
    return X[:N_TRAIN] - mean, y[:N_TRAIN], X[N_TRAIN:] - mean, y[N_TRAIN:]


def reliability(proba: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """Per-bin mean confidence and accuracy of the predicted class, and the
    expected calibration error (the bin-size-weighted mean gap)."""
    conf = proba.max(axis=1)
    hit = proba.argmax(axis=1) == y
    edges = np.linspace(0.0, 1.0, N_BINS + 1)
    which = np.clip(np.digitize(conf, edges[1:-1]), 0, N_BINS - 1)
    mean_conf = np.full(N_BINS, np.nan)
    accuracy = np.full(N_BINS, np.nan)
    ece = 0.0
    for b in range(N_BINS):
        sel = which == b
        if sel.any():
            mean_conf[b] = conf[sel].mean()
            accuracy[b] = hit[sel].mean()
            ece += sel.mean() * abs(mean_conf[b] - accuracy[b])
    return mean_conf, accuracy, ece


def main(path: str) -> None:
    Xtr, ytr, Xte, yte = digits()

    def random_feature_gpc() -> rf.RandomFeatureGPC:
        return rf.RandomFeatureGPC(
            rf.RandomFourierFeatures(512, length_scale=2.0, random_state=0),
            optimize=("length_scale", "kernel_variance"),
            alpha_epsilon="auto",
            n_restarts=0,
            random_state=0,
        )

    models = {
        "RandomFeatureGPC (1,400 rows)": (random_feature_gpc, N_TRAIN),
        "RandomFeatureGPC (200 rows)": (random_feature_gpc, N_SKLEARN),
        "sklearn GaussianProcessClassifier (200 rows)": (
            lambda: GaussianProcessClassifier(ConstantKernel(1.0) * RBF(8.0), random_state=0),
            N_SKLEARN,
        ),
    }
    fig, ax = plt.subplots(figsize=(5.5, 5.0))
    ax.plot([0, 1], [0, 1], color="gray", linestyle=":", label="perfect calibration")
    for name, (make, n) in models.items():
        t0 = time.perf_counter()
        clf = make().fit(Xtr[:n], ytr[:n])
        seconds = time.perf_counter() - t0
        proba = clf.predict_proba(Xte)
        nll = -np.mean(np.log(np.maximum(proba[np.arange(yte.size), yte], 1e-300)))
        conf, acc, ece = reliability(proba, yte)
        print(
            f"{name}: fit {seconds:.1f} s, accuracy {np.mean(proba.argmax(1) == yte):.3f}, "
            f"mean test NLL {nll:.3f}, ECE {ece:.3f}"
        )
        ax.plot(conf, acc, marker="o", label=f"{name}, ECE {ece:.3f}")
    ax.set_xlabel("predicted probability of the predicted class")
    ax.set_ylabel("accuracy")
    ax.set_title("Digits: reliability diagram (397 test images)")
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"wrote {path}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(f"usage: {sys.argv[0]} OUTPUT.png")
    main(sys.argv[1])
