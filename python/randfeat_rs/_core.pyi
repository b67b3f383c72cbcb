"""Type stubs of the compiled core (checked with mypy stubtest)."""

from typing import Any, Callable, Optional, final

import numpy as np
from numpy.typing import NDArray

# The progress callback of the long calls: (stage, done, total, messages).
_Progress = Callable[[str, int, int, list[str]], object]

# Keep in step with the functions registered in src/python/ (stubtest checks it).
__all__ = [
    "FeatureMap",
    "FeatureStats",
    "LocalizedMaclaurinGp",
    "MaclaurinMap",
    "PolySketch",
    "__version__",
    "_debug_panic",
    "_debug_wait",
    "_inverse_normal_cdf",
    "_sketch_estimates",
    "_sobol_points",
    "binning_draw",
    "binning_fit",
    "binning_transform",
    "binning_transform_hashed",
    "exact_gp_fit",
    "exact_gp_lml",
    "exact_gp_predict",
    "feature_gp_predict",
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
    "kernel_matrix",
    "kl_divergence",
    "mean_nll",
    "nystroem_fit",
    "relative_frobenius_error",
    "resolve_device",
    "rff_fit",
    "rmse",
    "set_num_threads",
    "simd_level",
    "sketch_variance",
]
__version__: str

def set_num_threads(n: int) -> None: ...
def get_num_threads() -> int: ...
def simd_level() -> str: ...
def _debug_panic() -> None: ...
def _debug_wait(seconds: float, progress: _Progress | None = None) -> float: ...
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

# --- Gaussian processes (src/python/gp.rs) ---
def exact_gp_fit(
    x: NDArray[np.float64],
    y: NDArray[np.float64],
    length_scale: list[float] | None,
    kernel_variance: float | None,
    noise_variance: float | None,
    ard: bool,
    optimize: list[str],
    n_restarts: int,
    seed: int,
    max_iter: int,
    progress: _Progress | None,
    center: bool,
    *,
    kernel: str = "gaussian",
) -> tuple[
    NDArray[np.float64],
    float,
    float,
    float,
    float,
    NDArray[np.float64],
    NDArray[np.float64],
    int,
]: ...
def exact_gp_predict(
    x_train: NDArray[np.float64],
    chol: NDArray[np.float64],
    alpha: NDArray[np.float64],
    y_mean: float,
    length_scale: list[float],
    kernel_variance: float,
    x: NDArray[np.float64],
    return_var: bool,
    *,
    kernel: str = "gaussian",
) -> tuple[NDArray[np.float64], NDArray[np.float64] | None]: ...
def exact_gp_lml(
    x: NDArray[np.float64],
    y: NDArray[np.float64],
    length_scale: list[float],
    kernel_variance: float,
    noise_variance: float,
    eval_gradient: bool,
    *,
    kernel: str = "gaussian",
) -> tuple[float, NDArray[np.float64]]: ...
def feature_gp_predict(
    chol: NDArray[np.float64],
    beta: NDArray[np.float64],
    y_mean: float,
    phi: NDArray[np.floating],
    return_var: bool,
) -> tuple[NDArray[np.float64], NDArray[np.float64] | None]: ...
def kl_divergence(
    mean_p: NDArray[np.float64],
    var_p: NDArray[np.float64],
    mean_q: NDArray[np.float64],
    var_q: NDArray[np.float64],
) -> float: ...
def rmse(y_true: NDArray[np.float64], y_pred: NDArray[np.float64]) -> float: ...
def mean_nll(
    y_true: NDArray[np.float64], mean: NDArray[np.float64], var: NDArray[np.float64]
) -> float: ...
def relative_frobenius_error(
    k_approx: NDArray[np.float64], k_exact: NDArray[np.float64]
) -> float: ...

@final
class FeatureStats:
    def __new__(cls, n_features: int) -> FeatureStats: ...
    @staticmethod
    def from_arrays(
        gram: NDArray[np.float64],
        phi_y: NDArray[np.float64],
        phi_sum: NDArray[np.float64],
        n: int,
        y_shift: float,
        y_sum: float,
        y_sq_sum: float,
    ) -> FeatureStats: ...
    def accumulate(self, phi: NDArray[np.floating], y: NDArray[np.float64]) -> None: ...
    def merge(self, other: FeatureStats) -> None: ...
    def fit(
        self, noise_variance: float, center: bool
    ) -> tuple[NDArray[np.float64], NDArray[np.float64], float, float]: ...
    @property
    def gram(self) -> NDArray[np.float64]: ...
    @property
    def phi_y(self) -> NDArray[np.float64]: ...
    @property
    def phi_sum(self) -> NDArray[np.float64]: ...
    @property
    def n(self) -> int: ...
    @property
    def y_shift(self) -> float: ...
    @property
    def y_sum(self) -> float: ...
    @property
    def y_sq_sum(self) -> float: ...
    @property
    def n_features(self) -> int: ...

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
def nystroem_fit(
    x: NDArray[np.floating], n_components: int, kernel: str, length_scale: float, seed: int
) -> tuple[NDArray[np.int64], NDArray[np.float64]]: ...
def kernel_matrix(
    x: NDArray[np.float64], y: NDArray[np.float64], kernel: str, length_scale: float
) -> NDArray[np.float64]: ...
def _sobol_points(n: int, dim: int) -> NDArray[np.float64]: ...
def _inverse_normal_cdf(p: NDArray[np.float64]) -> NDArray[np.float64]: ...

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

# Maclaurin features (src/python/maclaurin.rs)
@final
class MaclaurinMap:
    @staticmethod
    def fit(
        x: NDArray[np.floating],
        settings: dict[str, Any],
        allocation: str,
        explicit: list[int] | None,
        seed: int,
        progress: _Progress | None = None,
    ) -> MaclaurinMap: ...
    @staticmethod
    def build(
        dim: int,
        counts: list[int],
        center: list[float] | None,
        settings: dict[str, Any],
        allocation: str,
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
        self,
        x: NDArray[np.floating],
        center: list[float] | None = None,
        progress: _Progress | None = None,
    ) -> NDArray[np.floating]: ...

# Localized Maclaurin GP (src/python/localized_gp.rs)
@final
class LocalizedMaclaurinGp:
    @staticmethod
    def fit(
        x: NDArray[np.floating],
        y: NDArray[np.float64],
        n_components: int,
        length_scale: float,
        kernel_variance: float,
        noise_variance: float,
        threshold: float | None,
        n_clusters: int | None,
        sketch: str,
        complex_weights: bool,
        max_degree: int,
        n_subsample: int,
        tol: float,
        center_y: bool,
        seed: int,
        device: str = "cpu",
        progress: _Progress | None = None,
    ) -> LocalizedMaclaurinGp: ...
    @property
    def centroids(self) -> NDArray[np.float64]: ...
    @property
    def allocation(self) -> list[int]: ...
    @property
    def degree(self) -> int: ...
    @property
    def y_mean(self) -> float: ...
    @property
    def timings(self) -> tuple[float, float]: ...
    @property
    def cutoff_sq(self) -> float: ...
    def build_all(self, progress: _Progress | None = None) -> int: ...
    def predict(
        self,
        x: NDArray[np.floating],
        return_var: bool,
        at_test_points: bool,
        progress: _Progress | None = None,
    ) -> tuple[NDArray[np.float64], NDArray[np.float64] | None, int, float, float]: ...

# Any dense feature map (src/python/feature_map.rs)
@final
class FeatureMap:
    @staticmethod
    def fourier(
        frequencies: NDArray[np.float64],
        phases: Optional[NDArray[np.float64]],
        signs: Optional[NDArray[np.float64]],
        length_scale: float,
        kernel_variance: float,
        variant: str,
        n_components: int,
    ) -> FeatureMap: ...
    @staticmethod
    def polynomial(
        sketch: PolySketch, bias: float, length_scale: float, n_components: int
    ) -> FeatureMap: ...
    @staticmethod
    def maclaurin(map: MaclaurinMap) -> FeatureMap: ...
    @staticmethod
    def nystroem(
        landmarks: NDArray[np.float64],
        normalization: NDArray[np.float64],
        kernel: str,
        length_scale: float,
    ) -> FeatureMap: ...
    @property
    def n_features_in(self) -> int: ...
    @property
    def n_components(self) -> int: ...
    def resolve_device(self, device: str) -> str: ...
    def transform(
        self, x: NDArray[np.floating], device: str, center: Optional[list[float]] = None
    ) -> NDArray[np.floating]: ...
    def accumulate(
        self,
        stats: FeatureStats,
        x: NDArray[np.floating],
        y: NDArray[np.float64],
        device: str,
        chunk_rows: int,
    ) -> None: ...
