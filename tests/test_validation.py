"""Every public function refuses what it cannot compute with, by name.

Complex data is never truncated to its real part, non-real dtypes (bool,
object, strings, datetimes) and scipy.sparse matrices get a TypeError that
names the argument, and non-numbers where numbers are expected say what was
expected.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest
import scipy.sparse

import randfeat_rs as rf
from randfeat_rs import InvalidDtypeError, InvalidInputError

RNG = np.random.default_rng(0)
M = RNG.standard_normal((4, 3))
V = RNG.standard_normal(4)
VAR = 1.0 + RNG.random(4)
K = rf.kernel_matrix(M)

# (function, its valid keyword arguments, the array arguments to spoil).
CALLS: list[tuple[Callable[..., Any], dict[str, Any]]] = [
    (lambda X, Y: rf.kernel_matrix(X, Y), {"X": M, "Y": M}),
    (rf.rmse, {"y_true": V, "y_pred": V}),
    (rf.mean_nll, {"y_true": V, "mean": V, "var": VAR}),
    (rf.kl_divergence, {"mean_p": V, "var_p": VAR, "mean_q": V, "var_q": VAR}),
    (rf.relative_frobenius_error, {"K_approx": K, "K_exact": K}),
    (
        lambda x, y: rf.sketch_variance(x, y, degree=2, n_components=8, sketch="gaussian"),
        {"x": V, "y": V},
    ),
    (lambda x: rf.fwht(x), {"x": V}),
]
CASES = [(f, kw, name) for f, kw in CALLS for name in kw]
IDS = [f"{getattr(f, '__name__', 'fn')}-{name}" for f, _, name in CASES]


def _spoiled(kw: dict[str, Any], name: str, value: Any) -> dict[str, Any]:
    return {**kw, name: value}


def test_public_functions_are_covered() -> None:
    """Every module-level function of ``__all__`` that takes data is listed above."""
    functions = {
        n for n in rf.__all__ if callable(getattr(rf, n)) and not isinstance(getattr(rf, n), type)
    }
    without_data = {"get_num_threads", "gpu_info", "set_num_threads"}
    covered = {
        "kernel_matrix",
        "rmse",
        "mean_nll",
        "kl_divergence",
        "relative_frobenius_error",
        "sketch_variance",
        "fwht",
    }
    assert functions == covered | without_data


@pytest.mark.parametrize(("f", "kw", "name"), CASES, ids=IDS)
def test_valid_call_runs(f: Callable[..., Any], kw: dict[str, Any], name: str) -> None:
    f(**kw)


@pytest.mark.parametrize(("f", "kw", "name"), CASES, ids=IDS)
@pytest.mark.parametrize(
    "spoil",
    [
        lambda a: a + 1j,
        lambda a: a.astype(np.complex64),
        lambda a: a > 0,
        lambda a: a.astype(object),
        lambda a: a.astype(str),
        lambda a: np.zeros(a.shape, dtype="datetime64[s]"),
    ],
    ids=["complex128", "complex64", "bool", "object", "str", "datetime"],
)
def test_non_real_dtype_is_a_type_error_naming_the_argument(
    f: Callable[..., Any], kw: dict[str, Any], name: str, spoil: Callable[[Any], Any]
) -> None:
    with pytest.raises(InvalidDtypeError, match=f"`{name}`"):
        f(**_spoiled(kw, name, spoil(kw[name])))


def test_complex_is_not_truncated() -> None:
    """The defect that was: ``rmse(y + 1j, y)`` returned 0.0."""
    with pytest.raises(TypeError, match=r"`y_true`.*complex128"):
        rf.rmse(V + 1j, V)


@pytest.mark.parametrize(("f", "kw", "name"), CASES, ids=IDS)
def test_sparse_is_refused_with_what_was_expected(
    f: Callable[..., Any], kw: dict[str, Any], name: str
) -> None:
    arr = np.atleast_2d(kw[name])
    with pytest.raises(InvalidDtypeError, match=rf"`{name}` must be a dense array.*toarray"):
        f(**_spoiled(kw, name, scipy.sparse.csr_matrix(arr)))


@pytest.mark.parametrize(("f", "kw", "name"), CASES, ids=IDS)
def test_ragged_is_refused_by_name(f: Callable[..., Any], kw: dict[str, Any], name: str) -> None:
    with pytest.raises(InvalidInputError, match=f"`{name}` must be an array of numbers"):
        f(**_spoiled(kw, name, [[1.0, 2.0], [3.0]]))


@pytest.mark.parametrize("value", ["abc", None, 1j, True, [1.0, "a"]])
def test_kernel_matrix_length_scale_must_be_a_real_number(value: Any) -> None:
    with pytest.raises(InvalidDtypeError, match="`length_scale` must hold real numbers"):
        rf.kernel_matrix(M, length_scale=value)


@pytest.mark.parametrize("value", [0.0, -1.0, np.inf, np.nan, [1.0, 2.0, np.nan]])
def test_kernel_matrix_length_scale_range(value: float) -> None:
    with pytest.raises(InvalidInputError, match="`length_scale`: must be finite and > 0"):
        rf.kernel_matrix(M, length_scale=value)


def test_kernel_matrix_length_scale_is_one_value_or_one_per_column() -> None:
    assert M.shape[1] == 3
    np.testing.assert_array_equal(
        rf.kernel_matrix(M, length_scale=[1.5]), rf.kernel_matrix(M, length_scale=1.5)
    )
    assert rf.kernel_matrix(M, length_scale=[1.5, 2.0, 0.5]).shape == (M.shape[0],) * 2
    with pytest.raises(InvalidInputError, match=r"`length_scale`.*one per input dimension"):
        rf.kernel_matrix(M, length_scale=[1.0, 2.0])
    with pytest.raises(InvalidInputError, match="`length_scale` must be 0-D or 1-D"):
        rf.kernel_matrix(M, length_scale=[[1.0, 2.0]])


def test_integer_data_is_accepted_as_real() -> None:
    """Integer dtypes hold real numbers: converted, not refused."""
    xi = np.arange(6).reshape(3, 2)
    np.testing.assert_array_equal(rf.kernel_matrix(xi), rf.kernel_matrix(xi.astype(float)))
    assert rf.rmse(np.array([0, 0]), np.array([3, 4])) == pytest.approx(np.sqrt(12.5))
    assert rf.kernel_matrix(M, length_scale=np.float32(2.0)).shape == (4, 4)


# ------------------------------------------- methods that take data outside fit


def _stats_accumulate(y: Any) -> Any:
    return rf.SufficientStatistics(3).accumulate(M, y)


def _stats_from_features(y: Any) -> Any:
    rff = rf.RandomFourierFeatures(8, random_state=0).fit(M)
    return rf.SufficientStatistics.from_features(rff, M, y)


def _exact_gp() -> rf.ExactGPR:
    return rf.ExactGPR(optimize=(), length_scale=1.0, kernel_variance=1.0, noise_variance=0.1).fit(
        M, V
    )


METHOD_CALLS: list[tuple[Callable[[Any], Any], Any, str]] = [
    (_stats_accumulate, V, "y"),
    (_stats_from_features, V, "y"),
    (lambda theta: _exact_gp().log_marginal_likelihood(theta), np.log([1.0, 1.0, 0.1]), "theta"),
    (lambda L: setattr(_exact_gp(), "L_", L), None, "L_"),
]


@pytest.mark.parametrize(("f", "valid", "name"), METHOD_CALLS, ids=[c[2] for c in METHOD_CALLS])
@pytest.mark.parametrize(
    "spoil",
    [lambda a: a + 1j, lambda a: a > 0, lambda a: a.astype(object), lambda a: a.astype(str)],
    ids=["complex", "bool", "object", "str"],
)
def test_methods_refuse_non_real_data_by_name(
    f: Callable[[Any], Any], valid: Any, name: str, spoil: Callable[[Any], Any]
) -> None:
    """The defect that was: ``accumulate(phi, y + 5j)`` and
    ``log_marginal_likelihood(theta + 3j)`` dropped the imaginary part."""
    if valid is None:
        valid = _exact_gp().L_
    f(valid)
    with pytest.raises(InvalidDtypeError, match=f"`{name}`"):
        f(spoil(np.asarray(valid)))


def test_a_factor_of_the_wrong_shape_is_refused_by_name() -> None:
    with pytest.raises(InvalidInputError, match="`L_` must be 2-D, got 1-D"):
        _exact_gp().L_ = np.ones(4)


@pytest.mark.parametrize("chunk_size", [0, -1, True, 2.5])
def test_from_features_checks_chunk_size(chunk_size: Any) -> None:
    rff = rf.RandomFourierFeatures(8, random_state=0).fit(M)
    with pytest.raises(InvalidInputError, match="`chunk_size` must be an integer >= 1"):
        rf.SufficientStatistics.from_features(rff, M, V, chunk_size=chunk_size)


def test_statistics_too_large_for_memory_name_n_features() -> None:
    with pytest.raises(InvalidInputError, match="`n_features`"):
        rf.SufficientStatistics(2**40)


REGRESSORS = [
    lambda: rf.ExactGPR(optimize=()),
    lambda: rf.RandomFeatureGPR(random_state=0),
    lambda: rf.SparseGPR(3, optimize=(), random_state=0),
    lambda: rf.LocalizedMaclaurinGPR(8, random_state=0),
]


@pytest.mark.parametrize("make", REGRESSORS, ids=["exact", "features", "sparse", "localized"])
def test_regressors_refuse_targets_that_are_not_numbers(make: Callable[[], Any]) -> None:
    """String targets were parsed (``"0.5"`` taken as 0.5); scikit-learn's
    conventions stand for the rest: bool targets are 0 and 1."""
    X = RNG.standard_normal((12, 2))
    y = np.sin(X[:, 0])
    with pytest.raises(InvalidDtypeError, match="`y` must hold numbers"):
        make().fit(X, y.astype(str))
    with pytest.raises(ValueError, match=r"[Cc]omplex"):
        make().fit(X, y + 1j)
    np.testing.assert_array_equal(
        make().fit(X, y > 0).predict(X), make().fit(X, (y > 0).astype(float)).predict(X)
    )


HYPERPARAMETER_EXTREMES = [
    (
        lambda X, y: rf.MaclaurinFeatures(8, length_scale=1e-320, random_state=0).fit(X),
        "`length_scale`: X / length_scale overflows",
    ),
    (
        lambda X, y: rf.RandomFeatureGPR(noise_variance=1e-320, random_state=0).fit(X, y),
        "`hyperparameters`: the matrix to factor",
    ),
    (
        lambda X, y: rf.ExactGPR(length_scale=1e-320, optimize=()).fit(X, y),
        "`hyperparameters`: the matrix to factor",
    ),
    (
        lambda X, y: (
            rf.LocalizedMaclaurinGPR(8, kernel_variance=1.7e308, random_state=0)
            .fit(X, y)
            .predict(X)
        ),
        "`X`: the sums of the features' products",
    ),
]


@pytest.mark.parametrize(("f", "message"), HYPERPARAMETER_EXTREMES)
def test_hyperparameters_beyond_float64_at_these_inputs_say_so(
    f: Callable[[Any, Any], Any], message: str
) -> None:
    """These used to name an internal array (`matrix`, `gram`) or blame a
    finite `X` for containing NaN."""
    X = RNG.standard_normal((40, 3))
    with pytest.raises(InvalidInputError, match=message):
        f(X, np.sin(X[:, 0]))


ESTIMATORS = [
    lambda: rf.RandomFourierFeatures(8, random_state=0),
    lambda: rf.NystroemFeatures(4, random_state=0),
    lambda: rf.MaclaurinFeatures(8, random_state=0),
    lambda: rf.PolynomialSketch(8, random_state=0),
    lambda: rf.RandomBinningFeatures(4, random_state=0),
    lambda: rf.LocalizedMaclaurinGPR(8, random_state=0),
    lambda: rf.ExactGPR(optimize=()),
    lambda: rf.SparseGPR(3, optimize=(), random_state=0),
    lambda: rf.RandomFeatureGPR(random_state=0),
    lambda: rf.ExactGPC(optimize=()),
    lambda: rf.SparseGPC(3, optimize=(), random_state=0),
    lambda: rf.RandomFeatureGPC(rf.RandomFourierFeatures(8, random_state=0)),
]


@pytest.mark.parametrize("make", ESTIMATORS, ids=lambda make: type(make()).__name__)
@pytest.mark.parametrize(
    "spoil",
    [
        lambda a: a.astype(str),
        lambda a: a.astype(bytes),
        lambda a: a.astype(str).astype(object),
        lambda a: a.astype(str).tolist(),
    ],
    ids=["str", "bytes", "object-str", "list-str"],
)
def test_estimators_refuse_inputs_of_strings(make: Callable[[], Any], spoil: Any) -> None:
    """Numeric strings in ``X`` were parsed (``"0.5"`` taken as 0.5) by
    scikit-learn's validation, asked for a float dtype."""
    X = RNG.standard_normal((12, 2))
    y = (X[:, 0] > 0).astype(float)
    est = make()
    fit = (lambda X: est.fit(X, y)) if hasattr(est, "predict") else est.fit
    with pytest.raises(InvalidDtypeError, match="`X` must hold numbers, got strings or bytes"):
        fit(spoil(X))
    fit(X.astype(object))  # object arrays of numbers pass, as in scikit-learn
    apply = est.predict if hasattr(est, "predict") else est.transform
    with pytest.raises(InvalidDtypeError, match="`X`"):
        apply(spoil(X))


def test_regressors_refuse_object_targets_of_strings() -> None:
    X = RNG.standard_normal((12, 2))
    y = np.sin(X[:, 0]).astype(str).astype(object)
    for make in REGRESSORS:
        with pytest.raises(InvalidDtypeError, match="`y` must hold numbers"):
            make().fit(X, y)


@pytest.mark.parametrize("make", ESTIMATORS, ids=lambda make: type(make()).__name__)
def test_estimators_take_data_frames_and_refuse_their_string_columns(
    make: Callable[[], Any],
) -> None:
    """A data frame's numeric columns (and a Series of targets) fit as the
    array does; a column of strings, object or pandas' string dtype, is
    refused by name."""
    pd = pytest.importorskip("pandas")
    X = RNG.standard_normal((12, 2))
    y = (X[:, 0] > 0).astype(float)
    frame = pd.DataFrame(X, columns=["a", "b"])
    est = make()
    supervised = hasattr(est, "predict")
    fitted = est.fit(frame, pd.Series(y)) if supervised else est.fit(frame)
    out = fitted.predict(frame) if supervised else fitted.transform(frame)
    again = make().fit(X, y) if supervised else make().fit(X)
    want = again.predict(X) if supervised else again.transform(X)
    if scipy.sparse.issparse(out):  # RandomBinningFeatures
        out, want = out.toarray(), want.toarray()
    np.testing.assert_array_equal(out, want)
    for column in (X[:, 1].astype(str).astype(object), pd.array(X[:, 1].astype(str), "string")):
        spoiled = frame.assign(b=column)
        with pytest.raises(InvalidDtypeError, match="`X` must hold numbers"):
            make().fit(spoiled, y) if supervised else make().fit(spoiled)
