"""
Centroids of the localized GP
=============================

Farthest-point clustering puts a centroid within ``threshold * length_scale``
of every training input. Left: the centroids for threshold 2 on 2-D data
spread over many length scales, each with the disc of radius ``2 l`` it
covers (the first centroid is the training mean; a smaller threshold extends
the same sequence of farthest points). Right: the test RMSE against the
threshold; one cluster is the plain optimized Maclaurin GP, which cannot
cover data this wide. See :ref:`math-localized-training`.
"""

import matplotlib.pyplot as plt
import numpy as np

import randfeat_rs as rf

rng = np.random.default_rng(0)


def target(X):
    return np.sin(2 * X[:, 0]) * np.cos(X[:, 1])


X = rng.uniform(-5, 5, (800, 2))
y = target(X) + 0.05 * rng.standard_normal(len(X))
X_test = rng.uniform(-5, 5, (500, 2))
kw = dict(length_scale=1.0, noise_variance=0.0025, random_state=0)

thresholds = [None, 4.0, 2.0, 1.0, 0.5]
errors, counts, fitted = [], [], {}
for threshold in thresholds:
    gp = rf.LocalizedMaclaurinGPR(64, threshold=threshold, **kw).fit(X, y)
    fitted[threshold] = gp
    errors.append(rf.rmse(target(X_test), gp.predict(X_test)))
    counts.append(gp.n_clusters_)
    print(f"threshold {threshold}: {gp.n_clusters_} clusters, test RMSE {errors[-1]:.3f}")

fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4.3))
left.plot(X[:, 0], X[:, 1], ".", color="0.7", ms=3)
centroids = fitted[2.0].centroids_
for k, (cx, cy) in enumerate(centroids):
    left.add_patch(plt.Circle((cx, cy), 2.0, fill=False, color="C0", alpha=0.4))
    left.text(cx, cy, str(k), ha="center", va="center", fontsize=7, color="C3")
left.set_xlim(-7, 7)
left.set_ylim(-7, 7)
left.set_aspect("equal")
left.set_title(f"threshold 2: {len(centroids)} centroids (numbered in order)")
labels = ["one" if t is None else str(t) for t in thresholds]
right.bar(labels, errors)
for i, n in enumerate(counts):
    right.text(i, errors[i], f"{n} cl.", ha="center", va="bottom", fontsize=8)
right.set_xlabel("threshold (units of the length scale)")
right.set_ylabel("test RMSE")
right.set_title("D = 64 features per centroid")
fig.tight_layout()
plt.show()
