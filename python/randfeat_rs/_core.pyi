"""Type stubs of the compiled core (checked with mypy stubtest)."""

from typing import Any, Optional

import numpy as np
from numpy.typing import NDArray

# Keep in step with the functions registered in src/python/ (stubtest checks it).
__all__ = [
    "__version__",
    "_debug_panic",
    "fwht",
    "fwht_inplace",
    "fwht_into",
    "get_num_threads",
    "gpu_dispatch_count",
    "gpu_fwht",
    "gpu_gram",
    "gpu_info",
    "gpu_rff",
    "gpu_set_chunk_bytes",
    "resolve_device",
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

# GPU (src/python/gpu.rs; present when built with the `gpu` feature, as the wheel is).
def gpu_info() -> Optional[dict[str, Any]]: ...
def gpu_dispatch_count() -> int: ...
def gpu_set_chunk_bytes(nbytes: int) -> None: ...
def resolve_device(device: str) -> str: ...
def gpu_fwht(
    x: NDArray[np.floating], out: Optional[NDArray[np.floating]] = None, normalized: bool = False
) -> Optional[NDArray[np.floating]]: ...
def gpu_gram(
    phi: NDArray[np.floating], y: Optional[NDArray[np.floating]] = None
) -> tuple[NDArray[np.float64], Optional[NDArray[np.float64]]]: ...
def gpu_rff(
    x: NDArray[np.floating],
    w: NDArray[np.floating],
    phases: Optional[NDArray[np.floating]],
    variant: str,
    scale: float,
) -> NDArray[np.floating]: ...
