"""MaclaurinFeatures: API, bad input, and measured comparisons.

The exact oracles of docs/math/maclaurin.rst (pair statistics, incremental
algorithm, end-to-end allocations, the objective's statistical oracle, unbiasedness) are
tested in Rust (src/maclaurin/tests.rs, map_tests.rs). Dtypes, pickling,
thread counts and the errors for bad data are checked in test_common.py. The
comparisons at the end print their measured numbers (run ``pytest -s`` to see
them).
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.kernel_approximation import RBFSampler
from sklearn.metrics.pairwise import rbf_kernel
from sklearn.utils.estimator_checks import parametrize_with_checks

from randfeat_rs import InvalidDtypeError, InvalidInputError, MaclaurinFeatures


def _data(n=60, d=5, seed=0):
    return np.random.default_rng(seed).standard_normal((n, d))


@parametrize_with_checks(
    [
        MaclaurinFeatures(40, random_state=0),
        MaclaurinFeatures(
            40, kernel="polynomial", degree=3, bias=1.0, sketch="rademacher", random_state=0
        ),
        MaclaurinFeatures(40, allocation="random", complex_weights=True, random_state=0),
    ]
)
def test_sklearn_compatible(estimator, check):
    check(estimator)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_fitted_attributes_and_dtypes(dtype):
    X = _data().astype(dtype)
    mf = MaclaurinFeatures(64, length_scale=2.0, random_state=1).fit(X)
    Z = mf.transform(X)
    assert Z.dtype == dtype and Z.shape == (60, 64)
    assert mf.allocation_.dtype == np.int64
    assert mf.allocation_[0] == 1 and mf.allocation_.sum() == 64
    assert mf.truncation_degree_ == len(mf.allocation_) - 1 and mf.truncation_degree_ >= 2
    assert np.isfinite(mf.objective_) and mf.objective_ > 0
    np.testing.assert_allclose(mf.center_, X.astype(np.float64).mean(axis=0), rtol=1e-6)
    # Constant column: sigma * g(x) (Gaussian kernel, a_0 = 1).
    xt = (X.astype(np.float64) - mf.center_) / 2.0
    np.testing.assert_allclose(Z[:, 0], np.exp(-0.5 * (xt**2).sum(1)), rtol=1e-5)


def test_dot_product_kernels_have_no_center():
    X = _data() * 0.3
    mf = MaclaurinFeatures(50, kernel="exponential", random_state=0).fit(X)
    assert mf.center_ is None
    with pytest.raises(InvalidInputError, match="center"):
        mf.transform_centered(X, np.ones(5))
    poly = MaclaurinFeatures(
        30, kernel="polynomial", degree=2, bias=0.0, sketch="rademacher", random_state=0
    ).fit(X)
    # c = 0: no constant, every feature on degree q.
    np.testing.assert_array_equal(poly.allocation_, [0, 0, 30])


def test_explicit_allocation_roundtrip_and_random():
    X = _data()
    mf = MaclaurinFeatures(64, sketch="rademacher", random_state=3).fit(X)
    again = MaclaurinFeatures(
        64, sketch="rademacher", allocation=mf.allocation_, random_state=3
    ).fit(X)
    np.testing.assert_array_equal(again.transform(X), mf.transform(X))
    assert np.isnan(again.objective_)
    rnd = MaclaurinFeatures(64, allocation="random", max_degree=6, random_state=0).fit(X)
    assert rnd.allocation_.sum() == 64 and rnd.truncation_degree_ <= 6


def test_localized_centers_exact():
    # Phi(0) = sigma e_0 (docs/math/localized.rst, "The exactness property"): the
    # kernel with the center is exact.
    X = _data()
    mf = MaclaurinFeatures(33, kernel_variance=2.0, random_state=0).fit(X)
    c = X[4]
    Zc = mf.transform_centered(X, c)
    np.testing.assert_allclose(Zc[4], np.r_[np.sqrt(2.0), np.zeros(32)], atol=1e-15)
    exact = 2.0 * rbf_kernel(X, c[None, :], gamma=0.5)[:, 0]
    np.testing.assert_allclose(Zc @ Zc[4], exact, rtol=1e-12)
    with pytest.raises(InvalidInputError, match="center"):
        mf.transform_centered(X, np.ones(3))


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"n_components": 3, "h01": True}, InvalidInputError, "n_components"),
        ({"n_components": 10, "kernel": "polynomial"}, InvalidInputError, "degree"),
        ({"n_components": 10, "degree": 3}, InvalidInputError, "degree"),
        ({"n_components": 10, "bias": 1.0}, InvalidInputError, "bias"),
        (
            {"n_components": 10, "kernel": "polynomial", "degree": 2, "h01": True},
            InvalidInputError,
            "h01",
        ),
        ({"n_components": 10, "sketch": "tensor_sketch"}, InvalidInputError, "sketch"),
        (
            {
                "n_components": 10,
                "sketch": "tensor_sketch",
                "complex_weights": True,
                "allocation": "random",
            },
            InvalidInputError,
            "complex_weights",
        ),
        ({"n_components": 10, "n_subsample": 1}, ValueError, "n_subsample"),
        ({"n_components": 10, "length_scale": 0.0}, ValueError, "length_scale"),
        ({"n_components": 10, "kernel_variance": -1.0}, ValueError, "kernel_variance"),
        ({"n_components": 10, "min_degree": 5, "max_degree": 3}, InvalidInputError, "min_degree"),
        ({"n_components": 10, "allocation": [1, 4]}, InvalidInputError, "allocation"),
        ({"n_components": 10, "allocation": [[1, 4]]}, InvalidInputError, "allocation"),
        ({"n_components": 10, "allocation": "greedy"}, ValueError, "allocation"),
        ({"n_components": 0}, ValueError, "n_components"),
    ],
)
def test_bad_input(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        MaclaurinFeatures(**kwargs).fit(_data())


def test_dropped_pairs_warn():
    # exp(x.y) overflows for the first pair: 1 of 6 pairs (> 5%) is dropped.
    X = np.array([[30.0, 0.0], [30.0, 1.0], [0.1, 0.2], [0.0, 0.1]])
    with pytest.warns(RuntimeWarning, match="non-finite"):
        MaclaurinFeatures(20, kernel="exponential", sketch="rademacher", random_state=0).fit(X)


def _gram_error(Z, K):
    return np.linalg.norm(Z @ Z.T - K) / np.linalg.norm(K)


def _compare(X, length_scale, n_components, sketch, repeats=5):
    K = rbf_kernel(X, gamma=0.5 / length_scale**2)
    errs = {}
    for name in ["optimized", "random"]:
        errs[name] = np.mean(
            [
                _gram_error(
                    MaclaurinFeatures(
                        n_components,
                        length_scale=length_scale,
                        sketch=sketch,
                        allocation=name,
                        random_state=s,
                    ).fit_transform(X),
                    K,
                )
                for s in range(repeats)
            ]
        )
    errs["rff"] = np.mean(
        [
            _gram_error(
                RBFSampler(
                    gamma=0.5 / length_scale**2, n_components=n_components, random_state=s
                ).fit_transform(X),
                K,
            )
            for s in range(repeats)
        ]
    )
    return errs


def test_optimized_beats_random_on_yacht(yacht):
    X, _ = yacht
    errs = _compare(X, np.sqrt(X.shape[1]), 256, "tensor_srht")
    print(f"\nyacht, l = sqrt(d), D = 256, relative Gram error (mean of 5): {errs}")
    assert errs["optimized"] < errs["random"]


def test_optimized_beats_random_on_1024d():
    X = np.random.default_rng(0).standard_normal((300, 1024))
    errs = _compare(X, np.sqrt(1024.0), 1024, "tensor_srht", repeats=3)
    print(f"\n1,024-d Gaussian data, l = 32, D = 1024, relative Gram error: {errs}")
    assert errs["optimized"] < errs["random"]


def test_maclaurin_vs_rff_across_length_scales(yacht):
    # No assertion on the winner: the table shows the regime where each wins
    # (Maclaurin for long length scales, RFF for short ones). The RFF here is
    # scikit-learn's RBFSampler.
    X, _ = yacht
    rows = []
    for factor in [0.25, 0.5, 1.0, 2.0, 4.0]:
        ell = factor * np.sqrt(X.shape[1])
        errs = _compare(X, ell, 256, "tensor_srht", repeats=3)
        rows.append((ell, errs["optimized"], errs["rff"]))
        assert np.isfinite(errs["optimized"]) and np.isfinite(errs["rff"])
    print("\nyacht, D = 256: length_scale | optimized Maclaurin | RBFSampler")
    for ell, mac, rff in rows:
        print(f"  {ell:7.3f} | {mac:.4f} | {rff:.4f}")


@pytest.mark.parametrize(
    ("center", "error", "match"),
    [
        (np.zeros((1, 3)), InvalidInputError, "`center` must be 1-D"),
        (np.zeros(2), InvalidInputError, "length of center"),
        (np.array([np.nan, 0.0, 0.0]), InvalidInputError, "`center` contains NaN"),
        (np.zeros(3) + 1j, InvalidDtypeError, "`center` must hold real numbers"),
    ],
)
def test_transform_centered_refuses_a_bad_center(center, error, match):
    x = np.random.default_rng(0).standard_normal((6, 3))
    mf = MaclaurinFeatures(16, random_state=0).fit(x)
    with pytest.raises(error, match=match):
        mf.transform_centered(x, center)
    np.testing.assert_array_equal(
        mf.transform_centered(x, [0, 0, 0]), mf.transform_centered(x, np.zeros(3))
    )


@pytest.mark.parametrize(
    ("bias", "degree", "n_components", "allocation"),
    [(0.0, 3, 3, [0, 0, 0, 1]), (1.0, 2, 8, [1, 1, 1]), (0.5, 4, 5, [1, 1, 1, 1, 1])],
)
def test_one_input_polynomial_map_is_the_exact_kernel(bias, degree, n_components, allocation):
    """With one input feature the map has a column for each degree with a
    nonzero coefficient: the exact polynomial kernel, zero columns after.
    Without bias and ``n_components <= degree`` every column was zero."""
    x = np.array([[0.5], [-1.2], [2.0]])
    mf = MaclaurinFeatures(
        n_components, kernel="polynomial", degree=degree, bias=bias, length_scale=1.5
    ).fit(x)
    np.testing.assert_array_equal(mf.allocation_, allocation)
    assert mf.truncation_degree_ == len(allocation) - 1
    phi = mf.transform(x)
    used = sum(allocation)
    assert not phi[:, used:].any()
    np.testing.assert_allclose(phi @ phi.T, (x @ x.T / 2.25 + bias) ** degree, rtol=1e-12)
