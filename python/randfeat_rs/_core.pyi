"""Type stubs of the compiled core (checked with mypy stubtest)."""

from typing import final

import numpy as np
from numpy.typing import NDArray

# Keep in step with the functions registered in src/python/ (stubtest checks it).
__all__ = [
    "PolySketch",
    "__version__",
    "_debug_panic",
    "_sketch_estimates",
    "fwht",
    "fwht_inplace",
    "fwht_into",
    "get_num_threads",
    "set_num_threads",
    "simd_level",
    "sketch_variance",
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

# Polynomial sketches (src/python/sketch.rs).
@final
class PolySketch:
    def __new__(
        cls, kind: str, complex: bool, degree: int, dim: int, n_features: int, seed: int
    ) -> PolySketch: ...
    @property
    def width(self) -> int: ...
    @property
    def dim(self) -> int: ...
    def transform(
        self,
        x: NDArray[np.floating],
        out: NDArray[np.floating],
        bias: float,
        length_scale: float,
    ) -> None: ...
    def params(self) -> dict[str, NDArray[np.generic]]: ...

def sketch_variance(
    x: NDArray[np.float64],
    y: NDArray[np.float64],
    degree: int,
    n_features: int,
    sketch: str,
    complex: bool,
    bias: float,
    length_scale: float,
) -> float: ...
def _sketch_estimates(
    x: NDArray[np.float64],
    y: NDArray[np.float64],
    degree: int,
    n_features: int,
    sketch: str,
    complex: bool,
    bias: float,
    length_scale: float,
    seed: int,
    reps: int,
) -> NDArray[np.float64]: ...
