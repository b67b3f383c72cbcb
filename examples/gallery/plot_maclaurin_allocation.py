"""
Optimized Maclaurin features
============================

The optimized allocation chooses how many features each degree of the
Maclaurin series of the Gaussian kernel gets (left: the allocation for
``D = 256`` on the standardized yacht data, most features on low degrees).
Right: the relative Frobenius error of the Gram matrix against ``D`` for the
optimized allocation and Kar & Karnick's random one (mean over three seeds).
See :ref:`math-maclaurin-optimized`.
"""

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.ticker import NullFormatter

import randfeat_rs as rf
from randfeat_rs.datasets import load_yacht

X, _ = load_yacht()
X = (X - X.mean(0)) / X.std(0)
length_scale = 3.0
K = rf.kernel_matrix(X, length_scale=length_scale)

mf = rf.MaclaurinFeatures(256, length_scale=length_scale, random_state=0).fit(X)
print("degree:", mf.truncation_degree_, "features per degree:", mf.allocation_.tolist())

widths = [32, 64, 128, 256, 512]
results = {}
for allocation in ("optimized", "random"):
    errors = []
    for D in widths:
        runs = []
        for seed in range(3):
            m = rf.MaclaurinFeatures(
                D, length_scale=length_scale, allocation=allocation, random_state=seed
            )
            Z = m.fit_transform(X)
            runs.append(rf.relative_frobenius_error(Z @ Z.T, K))
        errors.append(np.mean(runs))
    results[allocation] = errors
    print(f"{allocation:>9}: error {errors[-1]:.4f} at D = {widths[-1]}")

fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.5))
left.bar(np.arange(len(mf.allocation_)), mf.allocation_)
left.set_xlabel("degree n")
left.set_ylabel("features D_n")
left.set_title(f"optimized allocation, D = 256 (p = {mf.truncation_degree_})")
for allocation, errors in results.items():
    right.loglog(widths, errors, "o-", label=allocation)
right.set_xticks(widths, [str(w) for w in widths])
right.xaxis.set_minor_formatter(NullFormatter())
right.set_xlabel("number of features D")
right.set_ylabel("relative Frobenius error")
right.set_title("yacht, Gaussian kernel, l = 3")
right.legend()
fig.tight_layout()
plt.show()
