"""randfeat_rs: random features for kernel methods and Gaussian processes.

A Rust core (rayon threads, run-time SIMD) behind a NumPy / scikit-learn API.
See the README for the quick start and the documentation's pages docs/math/
for the mathematics.
"""

from __future__ import annotations

import warnings

import numpy as np

from . import _core, gpu
from ._binning import RandomBinningFeatures
from ._fourier import NystroemFeatures, RandomFourierFeatures, kernel_matrix
from ._fwht import fwht
from ._gp import ExactGPR, RandomFeatureGPR, SufficientStatistics
from ._gpc import ALPHA_EPSILON_GRID, ExactGPC, RandomFeatureGPC, SparseGPC
from ._localized_gp import LocalizedMaclaurinGPR
from ._maclaurin import MaclaurinFeatures
from ._metrics import kl_divergence, mean_nll, relative_frobenius_error, rmse
from ._sketch import PolynomialSketch, sketch_variance
from ._sparse_gp import SparseGPR
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
    "ALPHA_EPSILON_GRID",
    "ExactGPC",
    "ExactGPR",
    "GpuError",
    "InvalidDtypeError",
    "InvalidInputError",
    "LocalizedMaclaurinGPR",
    "MaclaurinFeatures",
    "NotPositiveDefiniteError",
    "NystroemFeatures",
    "PolynomialSketch",
    "RandfeatError",
    "RandomBinningFeatures",
    "RandomFeatureGPC",
    "RandomFeatureGPR",
    "RandomFourierFeatures",
    "RustPanicError",
    "SparseGPC",
    "SparseGPR",
    "SufficientStatistics",
    "fwht",
    "get_num_threads",
    "gpu",
    "gpu_info",
    "kernel_matrix",
    "kl_divergence",
    "mean_nll",
    "relative_frobenius_error",
    "rmse",
    "set_num_threads",
    "sketch_variance",
]


gpu_info = gpu.info

# An unusable RANDFEAT_NUM_THREADS leaves the pool at all cores; say so.
_ignored = _core.ignored_env_threads()
if _ignored is not None:
    warnings.warn(_ignored, RuntimeWarning, stacklevel=2)


def set_num_threads(n: int) -> None:
    """Set the number of threads randfeat_rs uses (``1 <= n <= 1024``).

    The default is the ``RANDFEAT_NUM_THREADS`` environment variable, or all
    cores. Takes effect at the next call.

    Raises
    ------
    InvalidInputError
        If ``n`` is not an integer, or is below 1 or above the thread pool's
        limit of 1024 threads (threads beyond the cores only share them).
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise InvalidInputError(f"`n` must be an integer >= 1, got {n!r}")
    _core.set_num_threads(int(n))


def get_num_threads() -> int:
    """Return the number of threads randfeat_rs uses."""
    return _core.get_num_threads()
