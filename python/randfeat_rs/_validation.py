"""Input checks shared by the public functions and estimators."""

from __future__ import annotations

from typing import Any

import numpy as np

from .exceptions import InvalidDtypeError, InvalidInputError

FLOAT_DTYPES = (np.float64, np.float32)


def float_array(x: Any, name: str, ndims: tuple[int, ...] = (1, 2)) -> np.ndarray:
    """Return ``x`` as a float32/float64 ndarray without copying it.

    Raises
    ------
    InvalidDtypeError
        If the dtype is not float32 or float64.
    InvalidInputError
        If the number of dimensions is not one of ``ndims``.
    """
    arr = np.asarray(x)
    if arr.dtype not in FLOAT_DTYPES:
        raise InvalidDtypeError(f"`{name}` must have dtype float32 or float64, got {arr.dtype}")
    if arr.ndim not in ndims:
        expected = " or ".join(f"{d}-D" for d in ndims)
        raise InvalidInputError(f"`{name}` must be {expected}, got {arr.ndim}-D")
    return arr


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
