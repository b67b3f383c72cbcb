"""
Localized Maclaurin GP on sinc
==============================

The experiment of 000 Fig. 2: 50 noisy observations of ``sinc(5x)``, the
exact GP (its hyperparameters by marginal likelihood) and three approximate
GPs with ``D = 10`` features on those hyperparameters: random Fourier
features, the Maclaurin GP expanded at the training mean (``k_p``), which
collapses away from it, and the localized GP with a center at every test
point (``k_p*``), which is close to exact. The legend gives the mean KL
divergence to the exact GP. See :ref:`math-localized`.
"""

import matplotlib.pyplot as plt
import numpy as np

import randfeat_rs as rf

rng = np.random.default_rng(0)
x = rng.uniform(-1.5, 1.5, 50)
y = np.sinc(5 * x) + 0.1 * rng.standard_normal(50)
X = x[:, None]
xt = np.linspace(-2.25, 2.25, 400)
Xt = xt[:, None]

exact = rf.ExactGPR(random_state=0).fit(X, y)
hyper = dict(
    length_scale=exact.length_scale_,
    kernel_variance=exact.kernel_variance_,
    noise_variance=exact.noise_variance_,
)
m_q, s_q = exact.predict_noisy(Xt)

rff_map = rf.RandomFourierFeatures(
    10,
    length_scale=hyper["length_scale"],
    kernel_variance=hyper["kernel_variance"],
    random_state=0,
)
models = {
    "RFF": rf.RandomFeatureGPR(rff_map, noise_variance=hyper["noise_variance"]),
    "k_p (one center)": rf.LocalizedMaclaurinGPR(10, random_state=0, **hyper),
    "k_p* (center = test point)": rf.LocalizedMaclaurinGPR(
        10, centers="test", random_state=0, **hyper
    ),
}

fig, axes = plt.subplots(1, 3, figsize=(12, 3.5), sharey=True)
for ax, (name, model) in zip(axes, models.items()):
    model.fit(X, y)
    m_p, s_p = model.predict_noisy(Xt)
    kl = rf.kl_divergence(m_p, s_p**2, m_q, s_q**2)
    print(f"{name}: mean KL to the exact GP {kl:.4f}")
    ax.fill_between(xt, m_q - 2 * s_q, m_q + 2 * s_q, color="0.85", label="exact GP ±2 sd")
    ax.plot(xt, m_q, "k-", lw=1)
    ax.plot(xt, m_p, "C3-", label=f"{name}, KL {kl:.3f}")
    ax.plot(xt, m_p - 2 * s_p, "C3:", lw=1)
    ax.plot(xt, m_p + 2 * s_p, "C3:", lw=1)
    ax.plot(x, y, "k.", ms=4)
    ax.set_title(name)
    ax.set_ylim(-1.5, 1.8)
    ax.legend(loc="lower center", fontsize=7)
fig.tight_layout()
plt.show()
