"""Random binning features: oracles of docs/math/binning.rst, the sparse contract, bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse
from sklearn.linear_model import Ridge, SGDClassifier
from sklearn.pipeline import make_pipeline
from sklearn.svm import LinearSVC
from sklearn.utils.estimator_checks import parametrize_with_checks

from randfeat_rs import InvalidInputError, RandomBinningFeatures, _core
from randfeat_rs._binning import _to_csr

DTYPES = [np.float64, np.float32]


def laplacian_gram(X, Y, length_scale):
    return np.exp(-np.abs(X[:, None, :] - Y[None, :, :]).sum(-1) / length_scale)


def binomial_moments(p, k):
    """Mean, variance and 4th central moment of Binomial(p, k) / p."""
    j = np.arange(p + 1)
    pmf = np.array([math.comb(p, i) * k**i * (1 - k) ** (p - i) for i in j])
    v = j / p
    mean = pmf @ v
    return mean, pmf @ (v - mean) ** 2, pmf @ (v - mean) ** 4


# --- statistical oracles -------------------------------------------------------------------


def test_worked_example_binomial_mean_and_variance():
    # sigma_L = 0.7, ||x - y||_1 = 1.25, k = 0.1676772488, P = 5: Var = 0.0279123178.
    X = np.array([[0.3, -0.2, 0.5], [-0.1, 0.4, 0.25]])
    k = math.exp(-1.25 / 0.7)
    assert k == pytest.approx(0.1676772488, abs=1e-10)
    mean, var, mu4 = binomial_moments(5, k)
    assert mean == pytest.approx(k, abs=1e-12)
    assert var == pytest.approx(0.0279123178, abs=1e-10)
    reps = 4000
    est = np.empty(reps)
    for s in range(reps):
        Z = RandomBinningFeatures(5, length_scale=0.7, random_state=s).fit_transform(X)
        est[s] = (Z[0] @ Z[1].T).toarray()[0, 0]
    se_mean = math.sqrt(var / reps)
    se_var = math.sqrt((mu4 - var**2) / reps)
    assert abs(est.mean() - k) < 4 * se_mean
    assert abs(est.var(ddof=1) - var) < 4 * se_var
    # Every estimate is a multiple of 1/P (Binomial support).
    np.testing.assert_allclose(est * 5, np.round(est * 5), atol=1e-12)


def test_hat_kernel_given_pitch():
    # delta = 1 in every grid, |x - y| = 0.3: collision probability 0.7 (only u is random).
    p = 100_000
    rng = np.random.default_rng(5)
    pitches = np.ones((p, 1))
    shifts = rng.uniform(0, 1, (p, 1))
    _, csr = _core.BinningMap.fit_grids(
        np.array([[0.2], [0.5]]), pitches=pitches, shifts=shifts, hash_seed=7
    )
    Z = _to_csr(csr, 2)
    rate = (Z[0] @ Z[1].T).toarray()[0, 0]
    assert abs(rate - 0.7) < 4 * math.sqrt(0.7 * 0.3 / p)


def test_gamma_mixture_of_hats_is_laplacian():
    # E[max(0, 1 - a/delta)] = exp(-a/sigma) = 0.5647181220 for a = 0.4, sigma = 0.7.
    k = 0.5647181220
    assert math.exp(-0.4 / 0.7) == pytest.approx(k, abs=1e-10)
    p = 100_000
    est = RandomBinningFeatures(p, length_scale=0.7, random_state=3)
    Z = est.fit_transform(np.array([[1.0], [1.4]]))
    rate = (Z[0] @ Z[1].T).toarray()[0, 0]
    assert abs(rate - k) < 4 * math.sqrt(k * (1 - k) / p)
    # Gamma(2, 0.7): mean 1.4, variance 0.98; shifts in [0, delta).
    assert abs(est.pitches_.mean() - 1.4) < 4 * math.sqrt(0.98 / p)
    assert np.all((est.shifts_ >= 0) & (est.shifts_ < est.pitches_))


def test_gram_converges_at_binomial_rate():
    # E||K_hat - K||_F^2 = sum_{i != j} k_ij (1 - k_ij) / P (the diagonal is exact).
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, (15, 3))
    K = laplacian_gram(X, X, 1.5)
    s = (K * (1 - K)).sum()
    reps = 150
    for p in (4, 32, 256):
        errs = np.empty(reps)
        for r in range(reps):
            Z = RandomBinningFeatures(p, length_scale=1.5, random_state=1000 * p + r)
            G = Z.fit_transform(X)
            G = (G @ G.T).toarray()
            np.testing.assert_allclose(np.diag(G), 1.0)
            errs[r] = ((G - K) ** 2).sum()
        se = errs.std(ddof=1) / math.sqrt(reps)
        assert abs(errs.mean() - s / p) < 4 * se, (p, errs.mean(), s / p, se)


def test_hashing_agrees_with_vocabulary_up_to_ideal_hash_bias():
    # Same grids in both modes (same seed). Given the grids, an ideal hash adds
    # E[K_h - K_v] = (1 - K_v)/B + (P - 1)/B off the diagonal and (P - 1)/B on it.
    rng = np.random.default_rng(1)
    X = rng.uniform(-2, 2, (40, 4))
    p, b = 10, 1000
    off = ~np.eye(len(X), dtype=bool)
    reps = 60
    gaps, diag_gaps = np.empty(reps), np.empty(reps)
    for r in range(reps):
        Zv = RandomBinningFeatures(p, random_state=r).fit_transform(X)
        Zh = RandomBinningFeatures(p, hashing=b, random_state=r).fit_transform(X)
        Kv, Kh = (Zv @ Zv.T).toarray(), (Zh @ Zh.T).toarray()
        bias = (1 - Kv) / b + (p - 1) / b
        gaps[r] = (Kh - Kv - bias)[off].mean()
        diag_gaps[r] = (np.diag(Kh) - 1 - (p - 1) / b).mean()
    for g in (gaps, diag_gaps):
        assert abs(g.mean()) < 4 * g.std(ddof=1) / math.sqrt(reps)
    # With 2**61 columns collisions have probability ~1e-16: the maps agree exactly.
    Zv = RandomBinningFeatures(p, random_state=0).fit_transform(X)
    Zh = RandomBinningFeatures(p, hashing=2**61, random_state=0).fit_transform(X)
    assert Zh.indices.dtype == np.int64 and Zh.shape[1] == 2**61
    # Relabel the used columns compactly (a 2**61-wide product is too big for SciPy).
    used, compact = np.unique(Zh.indices, return_inverse=True)
    Zc = scipy.sparse.csr_matrix((Zh.data, compact, Zh.indptr), shape=(len(X), len(used)))
    assert len(used) == Zv.shape[1]
    np.testing.assert_array_equal((Zv @ Zv.T).toarray(), (Zc @ Zc.T).toarray())


def test_hashing_within_row_collision_rate():
    # A row loses a non-zero when two of its P hashed columns coincide:
    # P(no coincidence) = prod_{j < P} (1 - j/B) under an ideal hash.
    rng = np.random.default_rng(2)
    X = rng.uniform(-50, 50, (20_000, 2))
    p, b = 10, 1000
    Z = RandomBinningFeatures(p, hashing=b, length_scale=0.5, random_state=4).fit_transform(X)
    q = 1 - np.prod(1 - np.arange(p) / b)
    frac = (np.diff(Z.indptr) < p).mean()
    assert abs(frac - q) < 4 * math.sqrt(q * (1 - q) / len(X))


# --- sparse structure, dtypes, no copy -----------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
def test_vocabulary_structure(dtype):
    rng = np.random.default_rng(3)
    X = rng.standard_normal((500, 5)).astype(dtype)
    p = 12
    est = RandomBinningFeatures(p, length_scale=0.8, random_state=0)
    Z = est.fit_transform(X)
    assert isinstance(Z, scipy.sparse.csr_matrix)
    assert Z.dtype == dtype and Z.shape == (500, est.grid_offsets_[-1])
    assert Z.indices.dtype == np.int32 and Z.indptr.dtype == np.int32
    np.testing.assert_array_equal(Z.indptr, np.arange(501) * p)
    assert np.all(Z.data == dtype(1 / np.sqrt(p)))
    assert Z.has_canonical_format
    # Row i's k-th value lies in grid k's columns; grids are numbered by first appearance.
    cols = Z.indices.reshape(500, p)
    off = est.grid_offsets_.astype(np.int64)
    assert np.all((cols >= off[:-1]) & (cols < off[1:]))
    np.testing.assert_array_equal(cols[0], off[:-1])
    for g in range(p):
        first = np.unique(cols[:, g], return_index=True)[1]
        assert np.all(np.diff(first) > 0)
    np.testing.assert_allclose(Z.multiply(Z).sum(axis=1), 1.0, rtol=1e-6)
    assert est.vocabulary_.dtype == np.uint64 and len(est.vocabulary_) == Z.shape[1]
    # fit().transform() equals fit_transform() bit for bit.
    Z2 = RandomBinningFeatures(p, length_scale=0.8, random_state=0).fit(X).transform(X)
    for a in ("data", "indices", "indptr"):
        np.testing.assert_array_equal(getattr(Z, a), getattr(Z2, a))
    # Kernel estimates against training rows are exact at transform; unseen bins give nothing.
    Xn = np.vstack([X[:3] + dtype(0.01), np.full((1, 5), 1e3, dtype=dtype)])
    Zn = est.transform(Xn)
    assert Zn.dtype == dtype and Zn.shape == (4, Z.shape[1])
    assert Zn[3].nnz == 0
    assert Zn[:3].nnz <= 3 * p


@pytest.mark.parametrize("dtype", DTYPES)
def test_hashing_structure(dtype):
    rng = np.random.default_rng(4)
    X = rng.standard_normal((300, 3)).astype(dtype)
    p, b = 8, 40
    with pytest.warns(UserWarning, match="hashing=40 < 100"):
        est = RandomBinningFeatures(p, hashing=b, random_state=1).fit(X)
    assert not hasattr(est, "vocabulary_")
    Z = est.transform(X)
    assert Z.shape == (300, b) and Z.dtype == dtype and Z.has_canonical_format
    unit = dtype(1 / np.sqrt(p))
    np.testing.assert_allclose(Z.data / unit, np.round(Z.data / unit), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(Z.sum(axis=1)).ravel(), p * unit, rtol=1e-6)
    np.testing.assert_array_equal(
        est.get_feature_names_out()[:2], ["randombinningfeatures0", "randombinningfeatures1"]
    )


def test_arrays_come_from_rust_without_copy():
    X = np.random.default_rng(5).standard_normal((50, 3))
    _, csr = _core.BinningMap.fit(X, n_grids=6, kernel="laplacian", length_scale=1.0, seed=0)
    Z = _to_csr(csr, 50)
    for got, made in zip((Z.data, Z.indices, Z.indptr), csr[:3]):
        assert np.shares_memory(got, made)
    # Through the estimator: the arrays' memory is owned by a Rust container.
    for mode in (None, 10_000, 2**40):
        Z = RandomBinningFeatures(6, hashing=mode, random_state=0).fit(X).transform(X)
        for arr in (Z.data, Z.indices, Z.indptr):
            owner = arr
            while isinstance(owner, np.ndarray):  # views of views: follow the base chain
                owner = owner.base
            assert type(owner).__name__ == "PySliceContainer", (mode, owner)
    assert Z.indices.dtype == np.int64 and Z.indptr.dtype == np.int64


@pytest.mark.parametrize("hashing", [None, 10_000])
def test_large_inputs_transformed_in_row_ranges_equal_the_parts(hashing):
    # 200,000 rows in 100 grids of 10 dimensions are more than one piece of
    # work, so the keys and features are computed in row ranges that
    # Ctrl-C can stop between; the stacked ranges must equal the features
    # of the parts computed alone, with the indices' int32 type kept.
    X = np.random.default_rng(7).standard_normal((200_000, 10))
    features = RandomBinningFeatures(100, hashing=hashing, random_state=0)
    Z_fit = features.fit_transform(X)
    Z = features.transform(X)
    parts = scipy.sparse.vstack([features.transform(X[:70_001]), features.transform(X[70_001:])])
    for got in (Z, Z_fit):
        assert got.indices.dtype == np.int32 and got.indptr.dtype == np.int32
        np.testing.assert_array_equal(got.indptr, parts.indptr)
        np.testing.assert_array_equal(got.indices, parts.indices)
        np.testing.assert_array_equal(got.data, parts.data)


def test_input_dtypes_and_layouts():
    X = np.arange(40, dtype=np.int64).reshape(10, 4)
    Z = RandomBinningFeatures(3, random_state=0).fit_transform(X)
    assert Z.dtype == np.float64
    Xf = np.asfortranarray(np.random.default_rng(6).standard_normal((20, 4)))
    a = RandomBinningFeatures(5, random_state=0).fit_transform(Xf)
    b = RandomBinningFeatures(5, random_state=0).fit_transform(np.ascontiguousarray(Xf))
    assert (a != b).nnz == 0
    # float32 and float64 versions of the same values give the same columns.
    X32 = np.random.default_rng(7).standard_normal((100, 4)).astype(np.float32)
    z32 = RandomBinningFeatures(9, random_state=2).fit_transform(X32)
    z64 = RandomBinningFeatures(9, random_state=2).fit_transform(X32.astype(np.float64))
    np.testing.assert_array_equal(z32.indices, z64.indices)


# --- pipelines -----------------------------------------------------------------------------


def _checkerboard(n, d, seed):
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 4, (n, d))
    return X, (np.floor(X).sum(axis=1) % 2).astype(int)


def test_pipeline_ridge_fits_step_function():
    X, y = _checkerboard(3000, 2, 0)
    Xt, yt = _checkerboard(1000, 2, 1)
    model = make_pipeline(
        RandomBinningFeatures(200, length_scale=0.5, random_state=0), Ridge(alpha=0.1)
    )
    model.fit(X, y.astype(float))
    assert model.score(Xt, yt.astype(float)) > 0.5


@pytest.mark.parametrize(
    "clf", [SGDClassifier(alpha=1e-5, random_state=0), LinearSVC(C=1.0)], ids=["sgd", "svc"]
)
def test_pipeline_classifiers(clf):
    X, y = _checkerboard(3000, 2, 2)
    Xt, yt = _checkerboard(1000, 2, 3)
    model = make_pipeline(RandomBinningFeatures(200, length_scale=0.5, random_state=1), clf)
    model.fit(X, y)
    assert model.score(Xt, yt) > 0.85
    hashed = make_pipeline(
        RandomBinningFeatures(200, length_scale=0.5, hashing=2**20, random_state=1), clf
    )
    assert hashed.fit(X, y).score(Xt, yt) > 0.85


# --- scikit-learn contract -----------------------------------------------------------------


@parametrize_with_checks(
    [
        RandomBinningFeatures(20, random_state=0),
        RandomBinningFeatures(20, hashing=4000, random_state=0),
    ]
)
def test_sklearn_compatible(estimator, check):
    check(estimator)


# --- bad input -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"n_grids": 0}, "n_grids"),
        ({"n_grids": -3}, "n_grids"),
        ({"n_grids": 2.5}, "n_grids"),
        ({"length_scale": 0.0}, "length_scale"),
        ({"length_scale": -1.0}, "length_scale"),
        ({"hashing": 0}, "hashing"),
        ({"kernel": "gaussian"}, "kernel"),
    ],
)
def test_bad_parameters(kwargs, name):
    params = {"n_grids": 4, **kwargs}
    with pytest.raises(ValueError, match=name):
        RandomBinningFeatures(**params).fit(np.zeros((3, 2)))


@pytest.mark.parametrize("length_scale", [np.inf, np.nan])
def test_non_finite_length_scale(length_scale):
    with pytest.raises(ValueError, match="length_scale"):
        RandomBinningFeatures(4, length_scale=length_scale).fit(np.zeros((3, 2)))
    # The core rejects it too, and every other bad argument of the draw.
    X = np.zeros((3, 2))
    draw = dict(n_grids=4, kernel="laplacian", length_scale=1.0, seed=0)
    with pytest.raises(InvalidInputError, match="length_scale"):
        _core.BinningMap.fit(X, **{**draw, "length_scale": length_scale})
    with pytest.raises(InvalidInputError, match="n_grids"):
        _core.BinningMap.fit(X, **{**draw, "n_grids": 0})
    with pytest.raises(InvalidInputError, match="kernel"):
        _core.BinningMap.fit(X, **{**draw, "kernel": "gaussian"})
    with pytest.raises(InvalidInputError, match="hashing"):
        _core.BinningMap.fit(X, **draw, hashing=0)


def test_length_scales_whose_pitches_overflow_name_the_length_scale():
    # Pitches are length_scale times Gamma(2, 1) draws: at 1.7e308 some
    # overflow. The refusal names the parameter (it named the internal
    # `pitches`), and a tiny length scale's message shows the numbers in
    # scientific notation instead of 320 decimal digits.
    X = np.full((3, 2), 0.5)
    with pytest.raises(InvalidInputError, match=r"`length_scale`.*overflow"):
        RandomBinningFeatures(4, length_scale=1.7e308, random_state=0).fit(X)
    with pytest.raises(InvalidInputError, match=r"`X`: .*\de-3\d\d\) .*length_scale") as e:
        RandomBinningFeatures(4, length_scale=1e-320, random_state=0).fit(X)
    assert len(str(e.value)) < 400
    assert (
        RandomBinningFeatures(4, length_scale=1e300, random_state=0).fit_transform(X).shape[0] == 3
    )


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_input_in_the_core(bad):
    # The estimator's errors: test_common.py.
    X = np.zeros((4, 3))
    X[1, 2] = bad
    # The core checks too (for callers that bypass scikit-learn's validation).
    for hashing in (None, 100):
        fitted, _ = _core.BinningMap.fit(
            np.zeros((4, 3)),
            n_grids=4,
            kernel="laplacian",
            length_scale=1.0,
            seed=0,
            hashing=hashing,
        )
        with pytest.raises(InvalidInputError, match="`X` contains NaN or infinite"):
            fitted.transform(X)


@pytest.mark.parametrize("hashing", [None, 1000])
def test_bin_coordinate_overflow(hashing):
    X = np.array([[0.0, 1e300], [1.0, 2.0]])
    with pytest.raises(InvalidInputError, match=r"exceeds 2\^62"):
        RandomBinningFeatures(3, hashing=hashing, random_state=0).fit_transform(X)
    est = RandomBinningFeatures(3, hashing=hashing, random_state=0).fit(X[1:])
    with pytest.raises(InvalidInputError, match=r"length_scale"):
        est.transform(np.array([[-1e200, 0.0]], dtype=np.float64))
    # Tiny length scale, moderate input: the same error.
    with pytest.raises(InvalidInputError, match="64 bits"):
        RandomBinningFeatures(3, length_scale=1e-300, random_state=0).fit(np.ones((2, 2)))


def test_wrong_width_in_the_core():
    # The estimator's errors (and not fitted): test_common.py.
    fitted, _ = _core.BinningMap.fit(
        np.zeros((5, 3)), n_grids=4, kernel="laplacian", length_scale=1.0, seed=0
    )
    with pytest.raises(InvalidInputError, match="number of features of X: expected 3, got 4"):
        fitted.transform(np.zeros((2, 4)))


@pytest.mark.parametrize("method", ["fit", "fit_transform"])
def test_hashing_warning_points_at_the_callers_line(method):
    rb = RandomBinningFeatures(4, hashing=10, random_state=0)
    with pytest.warns(UserWarning, match="hash collisions") as record:
        getattr(rb, method)(np.ones((3, 2)))
    assert record[0].filename == __file__
