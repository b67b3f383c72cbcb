"""Input checks shared by the public functions and estimators."""

from __future__ import annotations

import os
import sys
from numbers import Integral, Real
from typing import Any

import joblib
import numpy as np
import scipy.sparse
import sklearn
from sklearn.utils._param_validation import Interval
from sklearn.utils.validation import validate_data

from .exceptions import InvalidDtypeError, InvalidInputError

FLOAT_DTYPES = (np.float64, np.float32)

#: The dtype kinds that hold real numbers: floats, signed and unsigned
#: integers. Complex (``"c"``), bool (``"b"``), object, strings, bytes,
#: datetimes and structured dtypes hold no real number to compute with.
_REAL_KINDS = "fiu"


def _dense(x: Any, name: str) -> np.ndarray:
    """``np.asarray(x)``, refusing sparse matrices and ragged sequences by name."""
    if scipy.sparse.issparse(x):
        raise InvalidDtypeError(
            f"`{name}` must be a dense array, got a scipy.sparse {type(x).__name__}; "
            "convert it with `.toarray()`"
        )
    try:
        return np.asarray(x)
    except (ValueError, TypeError) as e:
        raise InvalidInputError(
            f"`{name}` must be an array of numbers (a rectangular nested sequence): {e}"
        ) from None


def _check_ndim(arr: np.ndarray, name: str, ndims: tuple[int, ...]) -> None:
    if arr.ndim not in ndims:
        expected = " or ".join(f"{d}-D" for d in ndims)
        raise InvalidInputError(f"`{name}` must be {expected}, got {arr.ndim}-D")


def float_array(x: Any, name: str, ndims: tuple[int, ...] = (1, 2)) -> np.ndarray:
    """Return ``x`` as a float32/float64 ndarray without copying it.

    Raises
    ------
    InvalidDtypeError
        If ``x`` is a scipy.sparse matrix or its dtype is not float32 or
        float64 (a :class:`TypeError`).
    InvalidInputError
        If ``x`` is ragged or the number of dimensions is not one of ``ndims``.
    """
    arr = _dense(x, name)
    if arr.dtype not in FLOAT_DTYPES:
        raise InvalidDtypeError(f"`{name}` must have dtype float32 or float64, got {arr.dtype}")
    _check_ndim(arr, name, ndims)
    return arr


def real_array(x: Any, name: str, ndims: tuple[int, ...] = (1, 2)) -> np.ndarray:
    """Return ``x`` as a C-contiguous float64 ndarray, refusing non-real data.

    Floating and integer dtypes are converted (without a copy when ``x`` is
    already C-contiguous float64); every other dtype is refused instead of
    being cast, so complex data is never silently truncated to its real part.

    Raises
    ------
    InvalidDtypeError
        If ``x`` is a scipy.sparse matrix, or its dtype is complex, bool,
        object, a string or any other dtype without real numbers (a
        :class:`TypeError` naming the argument).
    InvalidInputError
        If ``x`` is ragged or the number of dimensions is not one of ``ndims``.
    """
    arr = _dense(x, name)
    if arr.dtype.kind not in _REAL_KINDS:
        raise InvalidDtypeError(
            f"`{name}` must hold real numbers (a float or integer dtype), got dtype {arr.dtype}"
        )
    _check_ndim(arr, name, ndims)
    return np.ascontiguousarray(arr, dtype=np.float64)


def regression_targets(y: np.ndarray) -> np.ndarray:
    """A regressor's ``y``, as ``validate_data(..., y_numeric=True)`` returns
    it, as a C-contiguous float64 array; targets that are not numbers
    (strings) are refused instead of parsed.

    ``validate_data`` has already refused complex targets and converted an
    object array of numbers; bool targets are taken as 0 and 1, as
    scikit-learn's regressors take them.

    Raises
    ------
    InvalidDtypeError
        If ``y`` holds strings, bytes or another dtype without numbers.
    """
    check_regression_dtype(y.dtype)
    return np.ascontiguousarray(y, dtype=np.float64)


def check_regression_dtype(dtype: np.dtype) -> None:
    """Refuses a regressor's targets of a dtype without numbers (strings,
    bytes, objects left unconverted); real numbers and bool pass.

    Raises
    ------
    InvalidDtypeError
        If ``dtype`` is not a real-number or bool dtype.
    """
    if dtype.kind not in _REAL_KINDS + "b":
        raise InvalidDtypeError(f"`y` must hold numbers, got dtype {dtype}")


def _holds_text(a: np.ndarray) -> bool:
    """Whether ``a`` holds strings or bytes: by its dtype, or, for an object
    array, by its entries."""
    if a.dtype.kind in "SU":
        return True
    return a.dtype.kind == "O" and any(isinstance(v, (str, bytes)) for v in a.ravel())


def refuse_text(x: Any, name: str) -> None:
    """Refuses strings and bytes in an estimator's ``X`` (or a regressor's
    ``y``), which scikit-learn's validation would parse (``"0.5"`` taken as
    0.5) when asked for a float dtype.

    An ndarray is checked by its dtype (its entries too when it is an object
    array), a data frame by its columns of object or extension dtypes, any
    other sequence as ``np.asarray`` makes it; sparse matrices pass (their
    dtypes are numbers, and the estimators refuse them by name).

    Raises
    ------
    InvalidDtypeError
        If ``x`` holds strings or bytes (a :class:`TypeError` naming ``name``).
    """
    if scipy.sparse.issparse(x):
        return
    if hasattr(x, "columns") and hasattr(x, "dtypes"):  # a data frame
        text = any(
            not isinstance(dt, np.dtype) or dt.kind in "OSU" for dt in x.dtypes
        ) and _holds_text(np.asarray(x, dtype=object))
    else:
        try:
            text = _holds_text(np.asarray(x))
        except (ValueError, TypeError):
            return  # ragged: left to the validation that follows, which names it
    if text:
        raise InvalidDtypeError(f"`{name}` must hold numbers, got strings or bytes")


def validate_numeric_data(estimator: Any, X: Any, y: Any = "no_validation", **kwargs: Any) -> Any:
    """scikit-learn's ``validate_data`` for an estimator's numeric ``X``,
    after :func:`refuse_text` has refused strings in ``X`` (and in ``y``
    with ``y_numeric=True``, a regressor's targets).

    Raises
    ------
    InvalidDtypeError
        If ``X`` (or numeric ``y``) holds strings or bytes.
    """
    refuse_text(X, "X")
    if kwargs.get("y_numeric"):
        refuse_text(y, "y")
    return validate_data(estimator, X, y, **kwargs)


def length_scale_values(length_scale: Any) -> list[float]:
    """A ``length_scale`` parameter, one number or one per input column, as a list.

    Raises
    ------
    InvalidDtypeError
        If it holds anything but real numbers (a :class:`TypeError`).
    InvalidInputError
        If it is ragged or has more than one dimension.
    """
    return real_array(length_scale, "length_scale", (0, 1)).reshape(-1).tolist()


def fitted_length_scale(values: Any, per_dimension: bool = False) -> Any:
    """Length scale(s) as the estimators report them: a float for one value,
    else (or always, with ``per_dimension``, e.g. ``ard=True``) a float64
    array of one per input dimension."""
    ls = np.asarray(values, dtype=np.float64).reshape(-1)
    return ls if per_dimension or ls.size > 1 else float(ls[0])


def inducing_inputs(inducing: Any) -> Any:
    """An ``inducing`` parameter: a selection name as it is, given inputs as
    a C-contiguous float64 array of shape (M, n_features).

    Raises
    ------
    InvalidDtypeError
        If the inputs hold anything but real numbers (complex, strings...; a
        :class:`TypeError`).
    InvalidInputError
        If they are ragged or not 2-D.
    """
    if isinstance(inducing, str):
        return inducing
    return real_array(inducing, "inducing", (2,))


def real_scalar(v: Any, name: str) -> float:
    """Return the real number ``v`` as a float.

    Raises
    ------
    InvalidDtypeError
        If ``v`` is not a real number (a string, complex, bool, None, an
        array...; a :class:`TypeError` naming the argument).
    """
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, Real):
        raise InvalidDtypeError(f"`{name}` must be a real number, got {type(v).__name__} {v!r}")
    return float(v)


def seed_from_random_state(random_state: Any) -> int:
    """Turn a scikit-learn style ``random_state`` into a 64-bit seed.

    ``None`` draws fresh entropy, an int is used as it is (mod 2**64), and a
    ``numpy.random.RandomState`` or ``Generator`` supplies the seed.
    """
    if random_state is None:
        return int(np.random.SeedSequence().entropy) % (1 << 64)
    if isinstance(random_state, (int, np.integer)) and not isinstance(random_state, bool):
        return int(random_state) % (1 << 64)
    if isinstance(random_state, np.random.RandomState):
        return int(random_state.randint(0, 2**63 - 1, dtype=np.int64))
    if isinstance(random_state, np.random.Generator):
        return int(random_state.integers(0, 2**63 - 1, dtype=np.int64))
    raise InvalidInputError(
        "`random_state` must be None, an int, a numpy RandomState or Generator, "
        f"got {type(random_state).__name__}"
    )


#: The package directories whose frames a warning skips to reach the user's
#: call: this package's and scikit-learn's (``fit`` is wrapped by
#: ``_fit_context`` and ``fit_transform`` may come from ``TransformerMixin``),
#: and joblib's, through which a scikit-learn ``Pipeline`` fits its steps.
_INTERNAL_DIRS = tuple(
    os.path.dirname(f) + os.sep
    for f in (__file__, sklearn.__file__, joblib.__file__)
    if f is not None
)


def user_stacklevel() -> int:
    """The ``stacklevel`` of a ``warnings.warn`` in the caller that names the user's line.

    Counts the frames from the caller of this function outwards to the first
    one outside randfeat_rs and scikit-learn, so the warning points at the
    user's ``fit`` (or ``fit_transform``) call however many of their wrappers
    lie between.
    """
    frame = sys._getframe(1)
    level = 1
    while frame.f_back is not None and frame.f_code.co_filename.startswith(_INTERNAL_DIRS):
        frame = frame.f_back
        level += 1
    return level


#: The largest count the compiled core takes (a platform ``intp``, also the
#: largest column index of a scipy.sparse matrix): larger integers are
#: refused by the parameter validation, naming the parameter, instead of
#: overflowing in the conversion.
MAX_COUNT = int(np.iinfo(np.intp).max)

#: The largest degree the compiled core takes (an unsigned 32-bit integer).
MAX_DEGREE_COUNT = 2**32 - 1


class RealNumber(Interval):
    """A real interval constraint that refuses bools.

    scikit-learn's ``Interval(Real, ...)`` accepts ``True`` as 1.0; a length
    scale or variance given as a bool is a mistake, refused like any other
    non-number (as :func:`real_scalar` refuses it).
    """

    def __init__(self, left: float, right: float | None, *, closed: str) -> None:
        super().__init__(Real, left, right, closed=closed)

    def is_satisfied_by(self, val: Any) -> bool:
        """Whether ``val`` is a real number (not a bool) in the interval."""
        return not isinstance(val, (bool, np.bool_)) and super().is_satisfied_by(val)


class Count(Interval):
    """An integer interval constraint that refuses bools.

    scikit-learn's ``Interval(Integral, ...)`` accepts ``True`` as 1; a count
    given as a bool is a mistake, refused like any other non-integer.
    """

    def __init__(self, left: int, right: int) -> None:
        super().__init__(Integral, left, right, closed="both")

    def is_satisfied_by(self, val: Any) -> bool:
        """Whether ``val`` is an integer (not a bool) in the interval."""
        return not isinstance(val, (bool, np.bool_)) and super().is_satisfied_by(val)
