"""Polynomial sketches: closed-form oracles (docs/math/sketches.rst, "Variances"),
statistics, the paper's claims, the transformer API, dtypes, pickling and errors."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from sklearn.utils.estimator_checks import parametrize_with_checks

from randfeat_rs import (
    InvalidDtypeError,
    InvalidInputError,
    PolynomialSketch,
    _core,
    sketch_variance,
)

VARIANTS = [
    ("gaussian", False),
    ("gaussian", True),
    ("rademacher", False),
    ("rademacher", True),
    ("tensor_srht", False),
    ("tensor_srht", True),
    ("tensor_sketch", False),
]


def kernel(x, y, degree, bias=0.0, length_scale=1.0):
    return (x @ y / length_scale**2 + bias) ** degree


def estimates(x, y, degree, n_components, sketch, complex_weights, bias, length_scale, seed, reps):
    return _core._sketch_estimates(
        np.asarray(x, float),
        np.asarray(y, float),
        degree=degree,
        n_components=n_components,
        sketch=sketch,
        complex_weights=complex_weights,
        bias=bias,
        length_scale=length_scale,
        seed=seed,
        reps=reps,
    )


# The worked examples of docs/math/sketches.rst (real-part variances),
# n_components in real columns.
EXAMPLE_A = ([1.0, 1, 0, 0], [1.0, 0, 1, 0], 2, 6)
EXAMPLE_B = ([0.5, -1, 0.3], [0.2, 0.7, -0.4], 3, 5)
ORACLES = {
    ("gaussian", False): (35 / 6, 1.481274),
    ("rademacher", False): (2.5, 0.134362),
    ("gaussian", True): (2.25, 0.384057),
    ("rademacher", True): (1.25, 0.066467),
    ("tensor_srht", False): (19 / 9, 0.093899),
    ("tensor_srht", True): (19 / 18, 0.046117),
    ("tensor_sketch", False): (2.5, 0.133219),
}


@pytest.mark.parametrize(("sketch", "cw"), VARIANTS)
def test_worked_oracles(sketch, cw):
    a, b = ORACLES[(sketch, cw)]
    # Complex maps: n_components real columns = 2 x the complex features of
    # docs/math/sketches.rst, "Worked examples".
    scale = 2 if cw else 1
    x, y, n, d = EXAMPLE_A
    got = sketch_variance(x, y, degree=n, n_components=scale * d, sketch=sketch, complex_weights=cw)
    assert got == pytest.approx(a, abs=5e-7)
    x, y, n, d = EXAMPLE_B
    got = sketch_variance(x, y, degree=n, n_components=scale * d, sketch=sketch, complex_weights=cw)
    assert got == pytest.approx(b, abs=5e-7)


@pytest.mark.parametrize(("sketch", "cw"), VARIANTS)
@pytest.mark.parametrize("d", [4, 5])
def test_unbiased_degrees_1_to_4(sketch, cw, d):
    """Mean of R = 2,000 sketches within 4 closed-form standard errors."""
    rng = np.random.default_rng(d)
    x, y = rng.uniform(-1, 1, d), rng.uniform(-1, 1, d)
    bias, ls, reps = 0.3, 1.2, 2000
    for degree in range(1, 5):
        e = estimates(x, y, degree, 12, sketch, cw, bias, ls, 40 + degree, reps)
        var = sketch_variance(
            x,
            y,
            degree=degree,
            n_components=12,
            sketch=sketch,
            complex_weights=cw,
            bias=bias,
            length_scale=ls,
        )
        want = kernel(x, y, degree, bias, ls)
        assert abs(e.mean() - want) <= 4 * np.sqrt(var / reps) + 1e-12, (degree, e.mean(), want)


def exact_variance(x, y, degree, n_components, sketch, cw):
    """The closed form of docs/math/sketches.rst, "Variances", in exact rational
    arithmetic from the float inputs (bias 0, length scale 1)."""
    x, y = [Fraction(v) for v in x], [Fraction(v) for v in y]
    m = sum(a * b for a, b in zip(x, y))
    nu = sum(a * a for a in x) * sum(b * b for b in y)
    s = sum(a * a * b * b for a, b in zip(x, y))
    n, m2 = degree, m * m
    if sketch == "tensor_sketch":
        d = n_components
        e = 2 if d % 2 == 0 else 1
        m_r, m_c, p_c = nu + 2 * m2 - 2 * s, nu + m2 - s, 2 * m2 - s
        return (e * (m_r**n - m2**n) + (d - e) * (m_c**n - m2**n + p_c**n - m2**n)) / d**2
    q, kappa = (Fraction(1, 2), 1) if cw else (1, 1)
    r2 = (2 * q - 1) ** 2
    d = n_components // 2 if cw else n_components
    big_m = nu + (1 + r2) * (m2 - s) + (kappa - 1) * s
    pm = r2 * (nu - s) + 2 * (m2 - s) + kappa * s
    v = (big_m**n - m2**n + pm**n - m2**n) / (2 * d)
    if sketch == "tensor_srht":
        dp = 1 << (len(x) - 1).bit_length()
        c = m2 - (nu - s + r2 * (m2 - s)) / (dp - 1)
        pc = m2 - ((m2 - s) + r2 * (nu - s)) / (dp - 1)
        blocks, r = divmod(d, dp)
        pairs = Fraction(blocks * dp * (dp - 1) + r * (r - 1), d * d)
        v += pairs * (c**n - m2**n + pc**n - m2**n) / 2
    return v


@pytest.mark.parametrize(("sketch", "cw"), [v for v in VARIANTS if v[0] != "gaussian"])
@pytest.mark.parametrize("small", [1e-3, 1e-5, 1e-8])
def test_variance_keeps_its_relative_accuracy_where_one_coordinate_dominates(sketch, cw, small):
    # With one dominant coordinate, m², ‖x‖²‖y‖² and Σ x_a² y_a² agree to
    # about 2 log10(1/small) digits, and the variance is their difference:
    # O(small²) of the kernel for the Rademacher-type weights. Formed
    # directly it was rounding noise, clamped to exactly 0.
    x = np.array([1.0, small, -2 * small, 0.5 * small, 3 * small])
    y = np.array([-0.8, 2 * small, small, -small, 0.7 * small])
    for degree in (1, 2, 3):
        nc = 10 if cw else 7
        got = sketch_variance(
            x, y, degree=degree, n_components=nc, sketch=sketch, complex_weights=cw
        )
        want = float(exact_variance(x, y, degree, nc, sketch, cw))
        assert want > 0
        # The sums over distinct coordinates carry a relative error of a few
        # units of 5 ε (5 coordinates), and the powers' differences keep it.
        assert got == pytest.approx(want, rel=1e-13, abs=0), (degree, got, want)


@pytest.mark.parametrize(("sketch", "cw"), [v for v in VARIANTS if v[0] != "gaussian"])
def test_empirical_variance_within_10_percent(sketch, cw):
    """Worked example B. R = 20,000: 10% is 7-14 sampling standard deviations
    of the variance estimate for these Rademacher-type sketches (measured,
    see the Rust tests, which also cover the heavy-tailed Gaussian sketches
    with R up to 800,000)."""
    x, y, n, d = EXAMPLE_B
    nc = 2 * d if cw else d
    e = estimates(x, y, n, nc, sketch, cw, 0.0, 1.0, 3, 20000)
    want = sketch_variance(x, y, degree=n, n_components=nc, sketch=sketch, complex_weights=cw)
    se = np.sqrt((np.mean((e - e.mean()) ** 4) - e.var() ** 2) / e.size)
    assert 0.1 * want >= 3 * se
    assert abs(e.var(ddof=1) - want) <= 0.1 * want


def test_paper_claims(capsys):
    """002/000: TensorSRHT <= Rademacher at odd degree on random pairs;
    complex < real for non-negative inputs at degree >= 2 (same real width)."""
    rng = np.random.default_rng(0)
    worst_srht, worst_complex = 0.0, 0.0
    for _ in range(200):
        d = int(rng.integers(2, 40))
        x, y = rng.standard_normal(d), rng.standard_normal(d)
        for n in (1, 3, 5):
            for nc in (7, 64):
                t = sketch_variance(x, y, degree=n, n_components=nc, sketch="tensor_srht")
                r = sketch_variance(x, y, degree=n, n_components=nc, sketch="rademacher")
                assert t <= r * (1 + 1e-12)
                worst_srht = max(worst_srht, t / r)
        xp, yp = np.abs(x), np.abs(y)
        for n in (2, 3, 4):
            for sk in ("rademacher", "tensor_srht", "gaussian"):
                c = sketch_variance(
                    xp, yp, degree=n, n_components=64, sketch=sk, complex_weights=True
                )
                r = sketch_variance(xp, yp, degree=n, n_components=64, sketch=sk)
                assert c < r
                worst_complex = max(worst_complex, c / r)
    with capsys.disabled():
        print(
            f"\n[paper claims] TensorSRHT/Rademacher variance (odd degree) max ratio "
            f"{worst_srht:.4f}; complex/real (non-negative, degree >= 2) max ratio "
            f"{worst_complex:.4f}"
        )


@pytest.mark.parametrize(
    ("sketch", "cw"), [("tensor_srht", False), ("tensor_srht", True), ("rademacher", False)]
)
def test_gram_error_falls_as_inverse_sqrt_d(sketch, cw):
    rng = np.random.default_rng(1)
    X = rng.standard_normal((200, 30)) / np.sqrt(30)
    K = kernel(X, X.T, 3, bias=1.0)
    errs = []
    for D in (256, 1024, 4096):
        F = PolynomialSketch(
            D, degree=3, bias=1.0, sketch=sketch, complex_weights=cw, random_state=0
        ).fit_transform(X)
        errs.append(np.linalg.norm(F @ F.T - K) / np.linalg.norm(K))
    # Each 4x increase of D should halve the error (allow 1.4x to 2.9x).
    ratios = [errs[i] / errs[i + 1] for i in range(2)]
    assert all(1.4 < r < 2.9 for r in ratios), (errs, ratios)


def test_degree_one_srht_exact_and_zero_column():
    rng = np.random.default_rng(2)
    X = rng.standard_normal((10, 8))
    F = PolynomialSketch(16, degree=1, random_state=3).fit_transform(X)
    np.testing.assert_allclose(F @ F.T, X @ X.T, atol=1e-12)
    F = PolynomialSketch(33, degree=1, complex_weights=True, random_state=3).fit_transform(X)
    assert F.shape == (10, 33) and not F[:, -1].any()
    np.testing.assert_allclose(F @ F.T, X @ X.T, atol=1e-12)


@pytest.mark.parametrize(("sketch", "cw"), VARIANTS)
def test_dtypes_and_random_params(sketch, cw):
    # Pickling, refitting and thread counts: test_common.py.
    rng = np.random.default_rng(4)
    X = rng.standard_normal((70, 9))
    ps = PolynomialSketch(21, degree=3, bias=0.5, sketch=sketch, complex_weights=cw, random_state=5)
    F = ps.fit_transform(X)
    assert F.dtype == np.float64 and F.shape == (70, 21)
    F32 = ps.transform(X.astype(np.float32))
    assert F32.dtype == np.float32
    np.testing.assert_allclose(F32, F, rtol=1e-3, atol=1e-4 * np.abs(F).max())
    params = ps.random_params_
    assert all(isinstance(v, np.ndarray) for v in params.values())


def test_errors_name_the_argument():
    X = np.ones((3, 4))
    cases = [
        ({"degree": 0}, "degree"),
        ({"n_components": 0}, "n_components"),
        ({"sketch": "srht"}, "sketch"),
        ({"bias": -1.0}, "bias"),
        ({"length_scale": 0.0}, "length_scale"),
        ({"sketch": "tensor_sketch", "complex_weights": True}, "complex_weights"),
        ({"n_components": 1, "complex_weights": True}, "n_components"),
    ]
    for kwargs, name in cases:
        params = {"n_components": 8, **kwargs}
        with pytest.raises(ValueError, match=name):
            PolynomialSketch(**params).fit(X)
    # NaN, infinity and the wrong number of features: test_common.py.
    x = [1.0, 2.0]
    with pytest.raises(InvalidInputError, match="degree"):
        sketch_variance(x, x, degree=0, n_components=4, sketch="rademacher")
    with pytest.raises(InvalidInputError, match="n_components"):
        sketch_variance(x, x, degree=2, n_components=0, sketch="rademacher")
    with pytest.raises(InvalidInputError, match="sketch"):
        sketch_variance(x, x, degree=2, n_components=4, sketch="nope")
    with pytest.raises(InvalidInputError, match="complex_weights"):
        sketch_variance(
            x, x, degree=2, n_components=4, sketch="tensor_sketch", complex_weights=True
        )
    with pytest.raises(InvalidInputError, match="length"):
        sketch_variance(x, [1.0], degree=2, n_components=4, sketch="rademacher")
    with pytest.raises(InvalidInputError, match="bias"):
        sketch_variance(x, x, degree=2, n_components=4, sketch="rademacher", bias=-1.0)
    with pytest.raises(InvalidInputError, match="finite"):
        sketch_variance([np.nan, 1.0], x, degree=2, n_components=4, sketch="rademacher")


@pytest.mark.parametrize("n_components", [2**32, 2**32 + 8, 2**40])
def test_tensor_sketch_refuses_more_features_than_32_bit_hashes_address(n_components):
    # 2**32 left the hash range empty (a panic) and 2**32 + 8 wrapped to 8.
    X = np.ones((3, 4))
    sk = PolynomialSketch(n_components, sketch="tensor_sketch")
    with pytest.raises(InvalidInputError, match=r"n_components.*4294967295"):
        sk.fit(X)
    x = [1.0, 2.0]
    with pytest.raises(InvalidInputError, match=r"n_components.*4294967295"):
        sketch_variance(x, x, degree=2, n_components=n_components, sketch="tensor_sketch")


def test_tensor_sketch_variance_at_the_widest_sketch():
    # D = 2**32 - 1 (odd: e = 1): the closed form, no refusal.
    x = [1.0, 2.0]
    v = sketch_variance(x, x, degree=2, n_components=2**32 - 1, sketch="tensor_sketch")
    assert 0 < v < 1e-6


@pytest.mark.parametrize("sketch", ["tensor_srht", "rademacher", "gaussian", "tensor_sketch"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_degree_is_bounded(sketch, dtype):
    """Degrees up to 32 give finite features for ||x'|| about 1; above, a clear error."""
    X = (np.random.default_rng(0).standard_normal((5, 4)) / 2).astype(dtype)
    top = _core.MAX_POLYNOMIAL_DEGREE
    assert top == 32
    Z = PolynomialSketch(16, degree=top, sketch=sketch, random_state=0).fit_transform(X)
    assert Z.dtype == dtype and np.isfinite(Z).all()
    for degree in (top + 1, 10**6, 10**12):
        with pytest.raises(ValueError, match=r"'degree' parameter .* range \[1, 32\]"):
            PolynomialSketch(16, degree=degree, sketch=sketch).fit(X)
        with pytest.raises(InvalidInputError, match=r"degree.*between 1 and 32.*overflow"):
            sketch_variance(X[0], X[1], degree=degree, n_components=16, sketch=sketch)


# Complex weights need n_components >= 2 (two real columns per feature), but
# several sklearn checks force n_components = 1, so the complex variant is
# covered by the tests above instead of here.
@parametrize_with_checks(
    [
        PolynomialSketch(16, random_state=0),
        PolynomialSketch(15, degree=3, bias=1.0, sketch="rademacher", random_state=0),
        PolynomialSketch(16, sketch="tensor_sketch", random_state=0),
        PolynomialSketch(16, sketch="gaussian", length_scale=2.0, random_state=0),
    ]
)
def test_sklearn_compatible(estimator, check):
    check(estimator)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"degree": True}, InvalidDtypeError, "`degree` must be an integer"),
        ({"n_components": True}, InvalidDtypeError, "`n_components` must be an integer"),
        ({"degree": 2.0}, InvalidDtypeError, "`degree` must be an integer"),
        ({"complex_weights": "no"}, InvalidDtypeError, "`complex_weights` must be a bool"),
        ({"n_components": 2**70}, InvalidInputError, "`n_components`.*too large"),
        ({"degree": 2**70}, InvalidInputError, "`degree`.*too large"),
        ({"sketch": None}, InvalidDtypeError, "`sketch` must be one of 'gaussian'"),
        ({"sketch": "srht"}, InvalidInputError, "srht"),
        ({"bias": "a"}, InvalidDtypeError, "`bias` must be a real number, got str"),
        ({"bias": True}, InvalidDtypeError, "`bias` must be a real number, got bool"),
        ({"length_scale": None}, InvalidDtypeError, "`length_scale` must be a real number"),
        ({"length_scale": 1j}, InvalidDtypeError, "`length_scale` must be a real number"),
    ],
)
def test_sketch_variance_refuses_non_integers_and_huge_counts(kwargs, error, match):
    x = [1.0, 2.0]
    params = {"degree": 2, "n_components": 4, "sketch": "gaussian", **kwargs}
    with pytest.raises(error, match=match):
        sketch_variance(x, x, **params)
