"""randfeat_rs: random features for kernel methods and Gaussian processes.

A Rust core (rayon threads, run-time SIMD) behind a NumPy / scikit-learn API.
See the README for the quick start and ``ALGORITHMS.md`` for the mathematics.
"""

from __future__ import annotations

import numpy as np

from . import _core
from ._fwht import fwht
from ._maclaurin import MaclaurinFeatures
from .exceptions import (
    GpuError,
    InvalidDtypeError,
    InvalidInputError,
    NotPositiveDefiniteError,
    RandfeatError,
    RustPanicError,
)

__version__: str = _core.__version__

__all__ = [
    "GpuError",
    "InvalidDtypeError",
    "InvalidInputError",
    "MaclaurinFeatures",
    "NotPositiveDefiniteError",
    "RandfeatError",
    "RustPanicError",
    "fwht",
    "get_num_threads",
    "set_num_threads",
]


def set_num_threads(n: int) -> None:
    """Set the number of threads randfeat_rs uses (``n >= 1``).

    The default is the ``RANDFEAT_NUM_THREADS`` environment variable, or all
    cores. Takes effect at the next call.

    Raises
    ------
    InvalidInputError
        If ``n < 1`` or not an integer.
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise InvalidInputError(f"`n` must be an integer >= 1, got {n!r}")
    _core.set_num_threads(int(n))


def get_num_threads() -> int:
    """Return the number of threads randfeat_rs uses."""
    return _core.get_num_threads()
