"""Type stubs of the compiled core (checked with mypy stubtest)."""

from typing import final

import numpy as np
from numpy.typing import NDArray

# Keep in step with the functions registered in src/python/ (stubtest checks it).
__all__ = [
    "MaclaurinMap",
    "__version__",
    "_debug_panic",
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

# Maclaurin features (src/python/maclaurin.rs)
@final
class MaclaurinMap:
    @staticmethod
    def fit(
        x: NDArray[np.floating],
        n_components: int,
        kernel: str,
        degree: int,
        bias: float,
        length_scale: float,
        kernel_variance: float,
        sketch: str,
        complex_weights: bool,
        allocation: str,
        explicit: list[int] | None,
        min_degree: int,
        max_degree: int,
        n_subsample: int,
        h01: bool,
        seed: int,
    ) -> MaclaurinMap: ...
    @staticmethod
    def build(
        dim: int,
        counts: list[int],
        center: list[float] | None,
        n_components: int,
        kernel: str,
        degree: int,
        bias: float,
        length_scale: float,
        kernel_variance: float,
        sketch: str,
        complex_weights: bool,
        allocation: str,
        min_degree: int,
        max_degree: int,
        n_subsample: int,
        h01: bool,
        seed: int,
    ) -> MaclaurinMap: ...
    @property
    def allocation(self) -> list[int]: ...
    @property
    def degree(self) -> int: ...
    @property
    def objective(self) -> float | None: ...
    @property
    def center(self) -> list[float] | None: ...
    @property
    def dropped_pairs(self) -> tuple[int, int]: ...
    @property
    def width(self) -> int: ...
    def transform(
        self, x: NDArray[np.floating], center: list[float] | None = None
    ) -> NDArray[np.floating]: ...
