"""Type stubs of the compiled core (checked with mypy stubtest)."""

import numpy as np
from numpy.typing import NDArray

# Keep in step with the functions registered in src/python/ (stubtest checks it).
__all__ = [
    "__version__",
    "_debug_panic",
    "_inverse_normal_cdf",
    "_sobol_points",
    "fwht",
    "fwht_inplace",
    "fwht_into",
    "get_num_threads",
    "kernel_matrix",
    "nystroem_fit",
    "nystroem_transform",
    "rff_fit",
    "rff_transform",
    "set_num_threads",
    "simd_level",
]
__version__: str

def set_num_threads(n: int) -> None: ...
def get_num_threads() -> int: ...
def simd_level() -> str: ...
def _debug_panic() -> None: ...
def fwht(x: NDArray[np.floating], normalized: bool = False) -> NDArray[np.floating]: ...
def fwht_into(
    x: NDArray[np.floating], out: NDArray[np.floating], normalized: bool = False
) -> None: ...
def fwht_inplace(x: NDArray[np.floating], normalized: bool = False) -> None: ...

# --- fourier (src/python/fourier.rs) ---
def rff_fit(
    n_features: int,
    n_components: int,
    kernel: str,
    length_scale: float,
    kernel_variance: float,
    sampler: str,
    variant: str,
    seed: int,
) -> tuple[NDArray[np.float64], NDArray[np.float64] | None, NDArray[np.float64] | None]: ...
def rff_transform(
    x: NDArray[np.floating],
    frequencies: NDArray[np.float64],
    phases: NDArray[np.float64] | None,
    signs: NDArray[np.float64] | None,
    length_scale: float,
    kernel_variance: float,
    variant: str,
    n_components: int,
) -> NDArray[np.floating]: ...
def nystroem_fit(
    x: NDArray[np.floating], n_components: int, kernel: str, length_scale: float, seed: int
) -> tuple[NDArray[np.int64], NDArray[np.float64]]: ...
def nystroem_transform(
    x: NDArray[np.floating],
    landmarks: NDArray[np.float64],
    normalization: NDArray[np.float64],
    kernel: str,
    length_scale: float,
) -> NDArray[np.floating]: ...
def kernel_matrix(
    x: NDArray[np.float64], y: NDArray[np.float64], kernel: str, length_scale: float
) -> NDArray[np.float64]: ...
def _sobol_points(n: int, dim: int) -> NDArray[np.float64]: ...
def _inverse_normal_cdf(p: NDArray[np.float64]) -> NDArray[np.float64]: ...
