"""The contract every estimator keeps, checked on each one the same way.

Every public estimator, in the configurations worth covering, is one entry
of ``ESTIMATORS``: an id, a factory of the unfitted estimator (fixed seed),
and the size of the synthetic data it is tested on. A new estimator is
covered by adding its entries. Each test below runs on every entry:

- float32 in gives float32 out for the transformers (any other dtype gives
  float64), the regressors and classifiers predict float64, and float32 results agree with
  float64 ones to float32 accuracy;
- a pickle round trip keeps every fitted attribute and gives bit-identical
  outputs (also when ``random_state=None`` drew the seed);
- fitting and transforming / predicting with 1, 2 or the default number of
  threads gives bit-identical results;
- ``get_params``/``set_params``/``clone`` round trip, and a fresh estimator
  with the same parameters reproduces the fit bit for bit;
- Fortran-ordered and strided input give the C-order results;
- a fit interrupted after validating new data keeps the previous model
  (the transformers and ``LocalizedMaclaurinGPR``; the GP models' own files
  test theirs);
- bad input is refused with the errors the library documents: scikit-learn's
  ``NotFittedError`` before ``fit``, and a ``ValueError`` that names ``X``
  (or ``y``) for NaN or infinity, for the wrong number of features (naming
  the expected number), for 1-D or 3-D input, for complex input
  (scikit-learn's ``check_complex_data`` asks for a ValueError, not a
  TypeError), for a fit on no rows, and for ``X`` and ``y`` of different
  lengths; a transform of no rows gives an empty result of the right width.

The estimator-specific behaviour (oracles, fitted attributes, accuracy
bounds, device fallbacks, parameter validation) is tested in the
estimator's own file, and scikit-learn's ``parametrize_with_checks`` suites
stay there too.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable
from functools import cache, partial
from typing import Any, NamedTuple, Optional

import numpy as np
import pytest
import scipy.sparse
from sklearn.base import BaseEstimator, clone, is_classifier, is_regressor
from sklearn.exceptions import NotFittedError
from sklearn.kernel_approximation import RBFSampler
from sklearn.utils.validation import check_is_fitted

import randfeat_rs as rf
from randfeat_rs import (
    ExactGPC,
    ExactGPR,
    LocalizedMaclaurinGPR,
    MaclaurinFeatures,
    NystroemFeatures,
    PolynomialSketch,
    RandomBinningFeatures,
    RandomFeatureGPC,
    RandomFeatureGPR,
    RandomFourierFeatures,
    SparseGPC,
    SparseGPR,
    SufficientStatistics,
)
from randfeat_rs._validation import RealNumber


class Case(NamedTuple):
    id: str
    make: Callable[[], Any]
    n_samples: int = 120
    n_features: int = 5
    # Rows of the thread-count test, where there must be enough work to split
    # between threads (default: n_samples).
    thread_rows: Optional[int] = None


SAMPLERS = ["mc", "antithetic", "orthogonal", "structured", "moment_matching", "qmc"]
SKETCHES = [
    ("gaussian", False),
    ("gaussian", True),
    ("rademacher", False),
    ("rademacher", True),
    ("tensor_srht", False),
    ("tensor_srht", True),
    ("tensor_sketch", False),
]
# The GPU configurations of test_gpu_estimators.py: (sketch, complex_weights, degree).
GPU_SKETCHES = [
    ("gaussian", False, 2),
    ("gaussian", True, 3),
    ("rademacher", False, 3),
    ("rademacher", True, 1),
    ("tensor_srht", False, 3),
    ("tensor_srht", True, 2),
]
GPU_MACLAURIN = {
    "srht": dict(n_components=37, length_scale=1.7),
    "srht-complex": dict(
        n_components=40, length_scale=2.0, complex_weights=True, kernel_variance=1.3
    ),
    "rademacher-h01": dict(
        n_components=35,
        kernel="polynomial",
        degree=3,
        bias=1.0,
        length_scale=1.5,
        sketch="rademacher",
        complex_weights=True,
        h01=True,
        allocation=[1, 5, 10, 4],
    ),
}
LOCALIZED = dict(length_scale=0.8, kernel_variance=1.7, noise_variance=0.05)


def _cw(complex_weights: bool) -> str:
    return "-complex" if complex_weights else ""


ESTIMATORS = [
    # Every sampler with both variants; d = 16 keeps the structured sampler
    # unbiased and D = 256 gives qmc a power-of-two number of frequencies.
    *(
        Case(
            f"rff-{sampler}-{variant}",
            partial(RandomFourierFeatures, 256, sampler=sampler, variant=variant, random_state=5),
            300,
            16,
        )
        for sampler in SAMPLERS
        for variant in ("cos_sin", "cos_bias")
    ),
    Case("rff-laplacian", partial(RandomFourierFeatures, 64, kernel="laplacian", random_state=1)),
    Case(
        "nystroem-matern32", partial(NystroemFeatures, 64, kernel="matern32", random_state=0), 300
    ),
    # D = 21: odd (a zero column with complex weights), not a multiple of d' = 10.
    *(
        Case(
            f"sketch-{sketch}{_cw(cw)}",
            partial(
                PolynomialSketch,
                21,
                degree=3,
                bias=0.5,
                sketch=sketch,
                complex_weights=cw,
                random_state=5,
            ),
            70,
            9,
        )
        for sketch, cw in SKETCHES
    ),
    # The defaults: TensorSRHT, degree 2, no bias.
    Case("sketch-defaults", partial(PolynomialSketch, 16, random_state=0)),
    Case("maclaurin", partial(MaclaurinFeatures, 300, random_state=0), 500, 30),
    *(
        Case(
            f"maclaurin-{allocation}-complex",
            partial(
                MaclaurinFeatures, 48, allocation=allocation, complex_weights=True, random_state=7
            ),
            60,
        )
        for allocation in ("optimized", "random")
    ),
    Case(
        "maclaurin-polynomial",
        partial(
            MaclaurinFeatures,
            40,
            kernel="polynomial",
            degree=3,
            bias=1.0,
            sketch="rademacher",
            random_state=0,
        ),
        60,
    ),
    *(
        Case(
            f"binning{'-hashing' if hashing else ''}",
            partial(RandomBinningFeatures, 16, hashing=hashing, random_state=5),
            2000,
            6,
            thread_rows=20_000,
        )
        for hashing in (None, 100_000)
    ),
    Case("exact-gpr", partial(ExactGPR, n_restarts=1, random_state=0), 100, 6),
    *(
        Case(f"sparse-gpr-{method}", partial(SparseGPR, 30, method=method, random_state=0), 300, 6)
        for method in ("vfe", "fitc")
    ),
    Case(
        "rf-gpr-fourier",
        lambda: RandomFeatureGPR(
            RandomFourierFeatures(64, random_state=0), noise_variance=0.1, chunk_size=40
        ),
        100,
        6,
    ),
    Case(
        "rf-gpr-rbfsampler",
        lambda: RandomFeatureGPR(RBFSampler(n_components=300, random_state=2), noise_variance=0.1),
        100,
        6,
    ),
    Case("exact-gpc", partial(ExactGPC, length_scale=2.0, random_state=0), 100, 6),
    Case("sparse-gpc", partial(SparseGPC, 30, length_scale=2.0, random_state=0), 100, 6),
    Case(
        "rf-gpc-fourier",
        lambda: RandomFeatureGPC(
            RandomFourierFeatures(64, length_scale=2.0, random_state=0),
            chunk_size=40,
            random_state=0,
        ),
        100,
        6,
    ),
    *(
        Case(
            f"localized-{centers}",
            partial(
                LocalizedMaclaurinGPR,
                24,
                threshold=0.7,
                centers=centers,
                random_state=6,
                **LOCALIZED,
            ),
            200,
            3,
        )
        for centers in ("clusters", "test")
    ),
    # device="gpu": the transform, or the statistics, run on the GPU.
    *(
        Case(
            f"sketch-{sketch}{_cw(cw)}-gpu",
            partial(
                PolynomialSketch,
                21,
                degree=degree,
                bias=0.5,
                length_scale=1.5,
                sketch=sketch,
                complex_weights=cw,
                random_state=3,
                device="gpu",
            ),
            70,
        )
        for sketch, cw, degree in GPU_SKETCHES
    ),
    Case(
        "rff-cos_sin-gpu",
        partial(
            RandomFourierFeatures,
            33,
            length_scale=2.0,
            kernel_variance=1.7,
            random_state=4,
            device="gpu",
        ),
        70,
        16,
    ),
    *(
        Case(
            f"maclaurin-{name}-gpu",
            partial(MaclaurinFeatures, random_state=2, device="gpu", **params),
            70,
        )
        for name, params in GPU_MACLAURIN.items()
    ),
    Case(
        "rf-gpr-fourier-gpu",
        lambda: RandomFeatureGPR(
            RandomFourierFeatures(33, length_scale=1.5, random_state=0),
            noise_variance=0.1,
            device="gpu",
        ),
        300,
        4,
    ),
    Case(
        "localized-gpu",
        partial(
            LocalizedMaclaurinGPR,
            24,
            length_scale=1.2,
            noise_variance=0.05,
            threshold=1.5,
            tol=0.0,
            max_degree=4,
            random_state=4,
            device="gpu",
        ),
        150,
        3,
    ),
    Case(
        "sparse-gpr-vfe-gpu",
        partial(SparseGPR, 30, optimize=(), random_state=0, device="gpu"),
        300,
        6,
    ),
]


def _on_gpu(case: Case) -> bool:
    params = case.make().get_params()
    return any(v == "gpu" for k, v in params.items() if k == "device" or k.endswith("__device"))


def _case_fixture(cases: list[Case]) -> Any:
    @pytest.fixture(params=cases, ids=[c.id for c in cases])
    def fixture(request: pytest.FixtureRequest) -> Case:
        if _on_gpu(request.param):
            request.getfixturevalue("gpu_adapter")
        return request.param

    return fixture


case = _case_fixture(ESTIMATORS)


def _supervised(est: Any) -> bool:
    """A regressor or a classifier (fitted on ``X`` and ``y``)."""
    return is_regressor(est) or is_classifier(est)


transformer_case = _case_fixture([c for c in ESTIMATORS if not _supervised(c.make())])
supervised_case = _case_fixture([c for c in ESTIMATORS if _supervised(c.make())])
# The estimators whose every fit draws its seed (``_fit_seed``) after
# validating the data; the GP models' failed fits are tested in their files.
seeded_fit_case = _case_fixture(
    [
        c
        for c in ESTIMATORS
        if not _supervised(c.make()) or isinstance(c.make(), LocalizedMaclaurinGPR)
    ]
)


class Data(NamedTuple):
    X: np.ndarray
    y: np.ndarray
    X_test: np.ndarray


def _data(case: Case, n_samples: Optional[int] = None) -> Data:
    rng = np.random.default_rng(0)
    n, d = n_samples or case.n_samples, case.n_features
    X = rng.standard_normal((n, d))
    y = np.sin(2 * X[:, 0]) + 0.3 * X.sum(axis=1) + 0.1 * rng.standard_normal(n)
    if is_classifier(case.make()):  # three classes, labels 0.0, 1.0, 2.0
        y = np.digitize(y, np.quantile(y, [1 / 3, 2 / 3])).astype(np.float64)
    return Data(X, y, rng.standard_normal((max(n // 4, 10), d)))


def _fit(est: Any, X: Any, y: np.ndarray) -> Any:
    return est.fit(X, y) if _supervised(est) else est.fit(X)


@cache
def _fitted(case: Case) -> Any:
    """The case's estimator fitted on its float64 data, shared by the tests
    that only read it (errors are raised before anything is computed)."""
    X, y, _ = _data(case)
    return _fit(case.make(), X, y)


def _outputs(est: Any, X: Any) -> list[Any]:
    """What a fitted estimator computes for ``X``: the features, the
    predictive mean with the latent and the observation std, or the class
    probabilities with the latent means and variances."""
    if is_classifier(est):
        return [est.predict_proba(X), *est.predict_latent(X)]
    if is_regressor(est):
        mean, std = est.predict(X, return_std=True)
        return [mean, std, est.predict_noisy(X)[1]]
    return [est.transform(X)]


def _fitted_attributes(est: Any) -> dict[str, Any]:
    """The public fitted attributes (names ending in ``_``), properties included
    (a property of the class that this configuration does not have, e.g. the
    vocabulary of a hashing binning map, raises ``AttributeError``)."""
    names = [n for n in dir(est) if n.endswith("_") and not n.startswith("_")]
    return {n: getattr(est, n) for n in names if hasattr(est, n)}


def _assert_same(a: Any, b: Any, what: str = "") -> None:
    """``a`` and ``b`` are equal bit for bit (arrays with their dtypes,
    sparse matrices, fitted estimators through their fitted attributes)."""
    if scipy.sparse.issparse(a):
        assert scipy.sparse.issparse(b) and a.format == b.format and a.shape == b.shape, what
        for attr in ("data", "indices", "indptr"):
            _assert_same(getattr(a, attr), getattr(b, attr), f"{what}.{attr}")
    elif isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray) and a.dtype == b.dtype, what
        np.testing.assert_array_equal(a, b, err_msg=what)
    elif isinstance(a, BaseEstimator):
        assert type(a) is type(b), what
        _assert_same(_fitted_attributes(a), _fitted_attributes(b), what)
    elif isinstance(a, SufficientStatistics):
        for attr in ("n_samples", "y_mean", "gram", "phi_y", "phi_sum"):
            _assert_same(getattr(a, attr), getattr(b, attr), f"{what}.{attr}")
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), what
        for k in a:
            _assert_same(a[k], b[k], f"{what}[{k!r}]")
    elif isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b), what
        for i, (u, v) in enumerate(zip(a, b)):
            _assert_same(u, v, f"{what}[{i}]")
    elif isinstance(a, float) and np.isnan(a):
        assert isinstance(b, float) and np.isnan(b), what
    else:
        assert a == b, (what, a, b)


def _width(est: Any, X: np.ndarray) -> int:
    return int(est.transform(X[:1]).shape[1])


def _raises(exc: type[BaseException], *patterns: str) -> Any:
    """``pytest.raises(exc)`` whose message matches every regex in ``patterns``."""
    return pytest.raises(exc, match="(?s)" + "".join(f"(?=.*(?:{p}))" for p in patterns))


# --- dtypes -------------------------------------------------------------------------------


def test_float32_and_float64_preserved(case):
    """Transformers: the output has the dtype of the input of ``transform``
    when it is float32 or float64 (whatever ``fit`` saw), else float64.
    Regressors and classifiers: predictions are float64 for any input dtype."""
    X, y, X_test = _data(case)
    n_test = X_test.shape[0]
    for est in (_fitted(case), _fit(case.make(), X.astype(np.float32), y)):
        for dtype in (np.float64, np.float32, np.int64):
            for out in _outputs(est, (X_test * 3).astype(dtype)):
                if is_classifier(est):
                    assert out.dtype == np.float64 and out.shape == (n_test, 3)
                elif is_regressor(est):
                    assert out.dtype == np.float64 and out.shape == (n_test,)
                else:
                    assert out.dtype == (np.float32 if dtype == np.float32 else np.float64)
                    assert out.shape == (n_test, _width(est, X))
    if not _supervised(est):
        n_components = est.get_params().get("n_components")
        assert n_components is None or _width(est, X) == n_components
        Z = case.make().fit_transform(X.astype(np.float32))
        assert Z.dtype == np.float32 and Z.shape == (X.shape[0], _width(est, X))


def test_float32_close_to_float64(case):
    """float32 input gives the float64 result to float32 accuracy."""
    _, _, X_test = _data(case)
    est = _fitted(case)
    X32 = X_test.astype(np.float32)
    for got, want in zip(_outputs(est, X32), _outputs(est, X32.astype(np.float64))):
        if scipy.sparse.issparse(want):  # the same bins, the values to float32 accuracy
            np.testing.assert_array_equal(got.indptr, want.indptr)
            np.testing.assert_array_equal(got.indices, want.indices)
            got, want = got.data, want.data
        scale = np.abs(want).max()
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3 * scale)


# --- pickling -------------------------------------------------------------------------------


def test_pickle_round_trip_is_bit_identical(case):
    """Every fitted attribute survives pickling, and the outputs are the
    same bits; with ``random_state=None``, so the drawn seed is kept too."""
    X, y, X_test = _data(case)
    est = case.make()
    est.set_params(
        **{k: None for k in est.get_params() if k == "random_state" or k.endswith("__random_state")}
    )
    _fit(est, X, y)
    assert "n_features_in_" in _fitted_attributes(est)
    if _on_gpu(case):
        assert est.device_ == "gpu"
    inputs = [X, X_test, X_test.astype(np.float32)]
    before = [_outputs(est, Z) for Z in inputs]
    back = pickle.loads(pickle.dumps(est))
    _assert_same(_fitted_attributes(back), _fitted_attributes(est))
    for Z, want in zip(inputs, before):
        _assert_same(_outputs(back, Z), want)
    # A second round trip of the copy (which has run) gives the same again.
    again = pickle.loads(pickle.dumps(back))
    _assert_same(_outputs(again, X_test), before[1])


# --- threads --------------------------------------------------------------------------------


def test_thread_count_invariance(case, set_num_threads):
    """Fits and outputs with 1, 2 or the default number of threads are
    bit-identical (every random parameter is drawn at fit, from the seed)."""
    X, y, X_test = _data(case, case.thread_rows)
    runs = []
    for n in (1, 2, rf.get_num_threads()):
        set_num_threads(n)
        est = case.make()
        if _supervised(est):
            first = _outputs(est.fit(X, y), X_test)
        else:
            first = [est.fit_transform(X), est.transform(X_test.astype(np.float32))]
        runs.append((first, _outputs(est, X[::-1]), _fitted_attributes(est)))
    for n, run in zip((2, "default"), runs[1:]):
        _assert_same(run, runs[0], f"{n} threads")


# --- parameters -----------------------------------------------------------------------------


def test_params_round_trip_and_refit(case):
    """``get_params``/``set_params``/``clone`` round trip, a clone is not
    fitted, and an estimator built from the same parameters reproduces the
    fit bit for bit."""
    X, y, X_test = _data(case)
    est = case.make()
    params = est.get_params(deep=False)
    assert est.set_params(**params) is est
    deep = est.get_params(deep=True)
    for copy in (clone(est), type(est)(**params)):
        got = copy.get_params(deep=True)
        assert got.keys() == deep.keys()
        for k, v in deep.items():
            if isinstance(v, BaseEstimator):
                assert type(got[k]) is type(v) and got[k].get_params() == v.get_params()
            else:
                _assert_same(got[k], v, k)
    fitted = _fitted(case)
    with pytest.raises(NotFittedError):
        check_is_fitted(clone(fitted))
    X32 = X.astype(np.float32)
    for again, Xd, want in [
        (type(est)(**params), X, fitted),
        (clone(fitted), X32, _fit(case.make(), X32, y)),
    ]:
        if _supervised(again):
            again.fit(Xd, y)
        else:  # fit_transform gives fit(X).transform(X)
            _assert_same(again.fit_transform(Xd), want.transform(Xd))
        _assert_same(_fitted_attributes(again), _fitted_attributes(want))
        for Z in (X_test, X_test.astype(np.float32)):
            _assert_same(_outputs(again, Z), _outputs(want, Z))


# --- input layouts --------------------------------------------------------------------------


def test_memory_layout_does_not_change_the_output(case):
    """Fortran-ordered and strided input give the C-order result."""
    X, y, X_test = _data(case)
    ref = _fitted(case)
    est = _fit(case.make(), np.asfortranarray(X), y)
    _assert_same(_fitted_attributes(est), _fitted_attributes(ref))
    want = _outputs(ref, X_test)
    for Z in (np.asfortranarray(X_test), np.repeat(X_test, 2, axis=1)[:, ::2]):
        _assert_same(_outputs(ref, Z), want)


# --- bad input ------------------------------------------------------------------------------


def test_not_fitted(case):
    X, _, _ = _data(case)
    with pytest.raises(NotFittedError):
        _outputs(case.make(), X)


def test_non_finite_input_is_refused(case):
    X, y, X_test = _data(case)
    for bad in (np.nan, np.inf, -np.inf):
        word = "NaN" if np.isnan(bad) else "NaN|infinity"
        X_bad = X.copy()
        X_bad[1, 0] = bad
        with _raises(ValueError, r"\bX\b", word):
            _fit(case.make(), X_bad, y)
        T_bad = X_test.copy()
        T_bad[-1, -1] = bad
        for dtype in (np.float64, np.float32):
            with _raises(ValueError, r"\bX\b", word):
                _outputs(_fitted(case), T_bad.astype(dtype))
        if _supervised(_fitted(case)):
            y_bad = y.copy()
            y_bad[3] = bad
            with _raises(ValueError, r"\by\b", word):
                case.make().fit(X, y_bad)


def test_wrong_number_of_features_is_refused(case):
    X, _, X_test = _data(case)
    d = X.shape[1]
    for Z in (np.hstack([X_test, X_test[:, :1]]), X_test[:, : d - 1]):
        with _raises(ValueError, rf"\b{d} features"):
            _outputs(_fitted(case), Z)


NOT_2D = r"2D|2-D|dim"


def test_not_2d_is_refused(case):
    X, y, _ = _data(case)
    for Z in (X[:, 0], X[:, :, None]):
        with _raises(ValueError, NOT_2D):
            _fit(case.make(), Z, y)
        with _raises(ValueError, NOT_2D):
            _outputs(_fitted(case), Z)


def test_complex_input_is_refused(case):
    X, y, X_test = _data(case)
    with _raises(ValueError, "[Cc]omplex"):
        _fit(case.make(), X + 0j, y)
    with _raises(ValueError, "[Cc]omplex"):
        _outputs(_fitted(case), X_test + 1j)


def test_a_failed_fit_keeps_the_previous_model(seeded_fit_case, monkeypatch):
    """A fit interrupted after it validated new data (here by a
    ``KeyboardInterrupt`` where it draws its seed) leaves a fitted estimator
    as it was, and a fresh one unfitted: no attribute of the new data (such
    as ``n_features_in_``) beside the previous model."""
    case = seeded_fit_case
    X, y, X_test = _data(case)
    est = _fit(case.make(), X, y)
    attributes, outputs = _fitted_attributes(est), _outputs(est, X_test)

    def interrupted(self: Any) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(type(est), "_fit_seed", interrupted)
    wider = np.hstack([X, X[:, :1]])
    with pytest.raises(KeyboardInterrupt):
        _fit(est, wider, y)
    if not _supervised(est):
        with pytest.raises(KeyboardInterrupt):
            est.fit_transform(wider)
    _assert_same(_fitted_attributes(est), attributes, "fitted attributes")
    _assert_same(_outputs(est, X_test), outputs, "outputs")
    fresh = case.make()
    with pytest.raises(KeyboardInterrupt):
        _fit(fresh, X, y)
    with pytest.raises(NotFittedError):
        _outputs(fresh, X_test)


def test_fit_on_no_rows_is_refused(case):
    X, y, _ = _data(case)
    with _raises(ValueError, r"0 sample|n_samples\s*=\s*0"):
        _fit(case.make(), X[:0], y[:0])


def test_transform_of_no_rows(transformer_case):
    X, _, _ = _data(transformer_case)
    est = _fitted(transformer_case)
    width = _width(est, X)
    for dtype in (np.float64, np.float32):
        Z = est.transform(np.zeros((0, X.shape[1]), dtype))
        assert Z.shape == (0, width) and Z.dtype == dtype
        if scipy.sparse.issparse(Z):
            assert Z.nnz == 0


def test_inconsistent_numbers_of_samples_are_refused(supervised_case):
    X, y, _ = _data(supervised_case)
    with _raises(ValueError, "inconsistent numbers of samples"):
        supervised_case.make().fit(X, y[:-1])


@pytest.mark.parametrize(
    "cls",
    [
        RandomFourierFeatures,
        NystroemFeatures,
        MaclaurinFeatures,
        PolynomialSketch,
        RandomBinningFeatures,
    ],
)
def test_random_state_is_documented_as_validated(cls):
    # The docstring lists what the parameter validation accepts: a numpy
    # Generator is refused, so it is not offered.
    assert "random_state : int, RandomState instance or None, default=None" in cls.__doc__
    est = cls(8) if cls is not RandomBinningFeatures else cls(2)
    est.set_params(random_state=np.random.default_rng(0))
    with pytest.raises(ValueError, match="random_state"):
        est.fit(np.ones((4, 3)))


@pytest.mark.parametrize(
    ("make", "param"),
    [
        (lambda v: RandomFourierFeatures(v), "n_components"),
        (lambda v: NystroemFeatures(v), "n_components"),
        (lambda v: MaclaurinFeatures(v), "n_components"),
        (lambda v: MaclaurinFeatures(16, max_degree=v), "max_degree"),
        (lambda v: PolynomialSketch(v), "n_components"),
        (lambda v: RandomBinningFeatures(v), "n_grids"),
        (lambda v: RandomBinningFeatures(4, hashing=v), "hashing"),
        (lambda v: LocalizedMaclaurinGPR(v), "n_components"),
        (lambda v: LocalizedMaclaurinGPR(16, n_clusters=v), "n_clusters"),
        (lambda v: LocalizedMaclaurinGPR(16, max_degree=v), "max_degree"),
        (lambda v: LocalizedMaclaurinGPR(16, n_subsample=v), "n_subsample"),
        (lambda v: PolynomialSketch(8, degree=v), "degree"),
        (lambda v: ExactGPR(n_restarts=v), "n_restarts"),
        (lambda v: ExactGPR(max_iter=v), "max_iter"),
        (lambda v: SparseGPR(v), "n_inducing"),
        (lambda v: SparseGPR(4, n_restarts=v), "n_restarts"),
        (lambda v: SparseGPR(4, max_iter=v), "max_iter"),
        (lambda v: SparseGPR(4, chunk_size=v), "chunk_size"),
        (lambda v: RandomFeatureGPR(RandomFourierFeatures(8), chunk_size=v), "chunk_size"),
        (lambda v: RandomFeatureGPR(RandomFourierFeatures(8), n_restarts=v), "n_restarts"),
        (lambda v: ExactGPC(n_restarts=v), "n_restarts"),
        (lambda v: SparseGPC(v), "n_inducing"),
        (lambda v: SparseGPC(4, n_restarts=v), "n_restarts"),
        (lambda v: SparseGPC(4, chunk_size=v), "chunk_size"),
        (lambda v: RandomFeatureGPC(RandomFourierFeatures(8), chunk_size=v), "chunk_size"),
        (lambda v: RandomFeatureGPC(RandomFourierFeatures(8), n_restarts=v), "n_restarts"),
    ],
)
@pytest.mark.parametrize("value", [2**64, True])
def test_counts_beyond_the_core_or_given_as_bools_are_refused(make, param, value):
    # 2**64 overflowed the conversion to the core (a bare OverflowError);
    # True passed as 1.
    with pytest.raises(ValueError, match=f"'{param}' parameter"):
        _fit(make(value), np.ones((4, 3)), np.arange(4.0))


@pytest.mark.parametrize(
    "make",
    [
        lambda: RandomFourierFeatures(8),
        lambda: NystroemFeatures(4),
        lambda: MaclaurinFeatures(8),
        lambda: PolynomialSketch(8),
        lambda: RandomBinningFeatures(4),
        lambda: LocalizedMaclaurinGPR(16),
        lambda: ExactGPR(),
        lambda: SparseGPR(4),
        lambda: RandomFeatureGPR(RandomFourierFeatures(8)),
        lambda: ExactGPC(),
        lambda: SparseGPC(4),
        lambda: RandomFeatureGPC(RandomFourierFeatures(8)),
    ],
    ids=lambda make: type(make()).__name__,
)
def test_real_parameters_given_as_bools_are_refused(make):
    """scikit-learn's ``Interval(Real, ...)`` took ``kernel_variance=True``
    as 1.0, where ``length_scale=True`` was refused."""
    est = make()
    names = [
        name
        for name, constraints in type(est)._parameter_constraints.items()
        if any(isinstance(c, RealNumber) for c in constraints)
    ]
    assert names
    for name in names:
        with pytest.raises(ValueError, match=f"'{name}' parameter"):
            _fit(clone(est).set_params(**{name: True}), np.ones((4, 3)), np.arange(4.0))
