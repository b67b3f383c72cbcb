"""Type stubs of the compiled core (checked with mypy stubtest)."""

import numpy as np
from numpy.typing import NDArray

# Keep in step with the functions registered in src/python/ (stubtest checks it).
__all__ = [
    "__version__",
    "_debug_panic",
    "binning_draw",
    "binning_fit",
    "binning_transform",
    "binning_transform_hashed",
    "fwht",
    "fwht_inplace",
    "fwht_into",
    "get_num_threads",
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

# Random binning (src/python/binning.rs). CSR tuples are (data, indices, indptr, n_cols).
def binning_draw(
    kernel: str, length_scale: float, n_grids: int, n_features: int, seed: int
) -> tuple[NDArray[np.float64], NDArray[np.float64], int]: ...
def binning_fit(
    x: NDArray[np.floating],
    pitches: NDArray[np.float64],
    shifts: NDArray[np.float64],
    hash_seed: int,
) -> tuple[
    NDArray[np.uint64],
    NDArray[np.uint64],
    tuple[NDArray[np.floating], NDArray[np.integer], NDArray[np.integer], int],
]: ...
def binning_transform(
    x: NDArray[np.floating],
    pitches: NDArray[np.float64],
    shifts: NDArray[np.float64],
    hash_seed: int,
    keys: NDArray[np.uint64],
    offsets: NDArray[np.uint64],
) -> tuple[NDArray[np.floating], NDArray[np.integer], NDArray[np.integer], int]: ...
def binning_transform_hashed(
    x: NDArray[np.floating],
    pitches: NDArray[np.float64],
    shifts: NDArray[np.float64],
    hash_seed: int,
    n_columns: int,
) -> tuple[NDArray[np.floating], NDArray[np.integer], NDArray[np.integer], int]: ...
