"""Type stubs of the compiled core (checked with mypy stubtest)."""

from collections.abc import Sequence
from typing import Any, Callable, Optional, final

import numpy as np
from numpy.typing import NDArray

# The progress callback of the long calls: (stage, done, total, messages).
_Progress = Callable[[str, int, int, list[str]], object]

# Keep in step with the functions registered in src/python/ (stubtest checks it).
__all__ = [
    "MAX_POLYNOMIAL_DEGREE",
    "BinningMap",
    "DirichletClassStats",
    "DirichletGPC",
    "ExactGp",
    "FeatureGp",
    "FeatureLmlGradientPass",
    "FeatureLmlSums",
    "FeatureMap",
    "FeatureStats",
    "LocalizedMaclaurinGp",
    "SparseDirichletGPC",
    "SparseGp",
    "SparseGradientSums",
    "SparsePrior",
    "SparseStats",
    "__version__",
    "_debug_panic",
    "_debug_wait",
    "_inverse_normal_cdf",
    "_sketch_estimates",
    "_sobol_points",
    "check_fit_targets",
    "exact_gp_lml",
    "expected_softmax",
    "feature_gp_lml",
    "feature_gp_optimize",
    "feature_gp_optimize_blocks",
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
    "ignored_env_threads",
    "initial_noise_variance",
    "initial_noise_variance_of",
    "kernel_matrix",
    "kl_divergence",
    "mean_nll",
    "median_pairwise_distance",
    "relative_frobenius_error",
    "resolve_device",
    "rmse",
    "scale_length_scale",
    "set_num_threads",
    "simd_level",
    "sketch_variance",
    "sparse_gp_optimize_blocks",
    "spread_length_scales",
]
__version__: str

def set_num_threads(n: int) -> None: ...
def get_num_threads() -> int: ...
def ignored_env_threads() -> str | None: ...
def simd_level() -> str: ...
def _debug_panic() -> None: ...
def _debug_wait(seconds: float, progress: _Progress | None = None) -> float: ...
def fwht(x: NDArray[np.floating], normalized: bool = False) -> NDArray[np.floating]: ...
def fwht_into(
    x: NDArray[np.floating], out: NDArray[np.floating], normalized: bool = False
) -> None: ...
def fwht_inplace(x: NDArray[np.floating], normalized: bool = False) -> None: ...

# Random binning (src/python/binning.rs). CSR tuples are (data, indices, indptr, n_cols).
_Csr = tuple[NDArray[np.floating], NDArray[np.integer], NDArray[np.integer], int]

@final
class BinningMap:
    @staticmethod
    def fit(
        x: NDArray[np.floating],
        *,
        n_grids: int,
        kernel: str,
        length_scale: float,
        seed: int,
        hashing: int | None = None,
    ) -> tuple[BinningMap, _Csr | None]: ...
    @staticmethod
    def fit_grids(
        x: NDArray[np.floating],
        *,
        pitches: NDArray[np.float64],
        shifts: NDArray[np.float64],
        hash_seed: int,
        hashing: int | None = None,
    ) -> tuple[BinningMap, _Csr | None]: ...
    @property
    def pitches(self) -> NDArray[np.float64]: ...
    @property
    def shifts(self) -> NDArray[np.float64]: ...
    @property
    def hash_seed(self) -> int: ...
    @property
    def vocabulary(self) -> NDArray[np.uint64] | None: ...
    @property
    def grid_offsets(self) -> NDArray[np.uint64] | None: ...
    @property
    def n_columns(self) -> int: ...
    def transform(self, x: NDArray[np.floating]) -> _Csr: ...
    def __reduce__(self) -> tuple[Any, tuple[bytes]]: ...
    @classmethod
    def _from_state(cls, state: bytes) -> BinningMap: ...

# --- Gaussian processes (src/python/gp.rs) ---
# A prediction: the mean and, with std="latent" or "noisy", the std.
_Prediction = tuple[NDArray[np.float64], NDArray[np.float64] | None]

def initial_noise_variance(y: NDArray[np.float64]) -> float: ...
def initial_noise_variance_of(*, var: float, constant: bool) -> float: ...
def check_fit_targets(*, n: int, mean: float, var: float, constant: bool, center: bool) -> None: ...
def exact_gp_lml(
    x: NDArray[np.float64],
    y: NDArray[np.float64],
    *,
    length_scale: list[float],
    kernel_variance: float,
    noise_variance: float,
    eval_gradient: bool = False,
    kernel: str = "gaussian",
) -> tuple[float, NDArray[np.float64]]: ...
def feature_gp_lml(
    features: FeatureMap,
    x: NDArray[np.float64],
    y: NDArray[np.float64],
    *,
    drawn_length_scale: list[float],
    length_scale: Sequence[float] | NDArray[np.float64],
    kernel_variance: float,
    noise_variance: float,
    center: bool,
    chunk_size: int,
) -> tuple[float, NDArray[np.float64]]: ...
def feature_gp_optimize(
    features: FeatureMap,
    x: NDArray[np.float64],
    y: NDArray[np.float64],
    *,
    length_scale: list[float],
    noise_variance: float | None,
    optimize: list[str],
    n_restarts: int,
    seed: int,
    center: bool,
    chunk_size: int,
    ard: bool = False,
    progress: _Progress | None = None,
) -> tuple[NDArray[np.float64], float, float, FeatureMap, FeatureStats, int]: ...
def feature_gp_optimize_blocks(
    features: FeatureMap,
    *,
    evaluate: Callable[[list[float], int], FeatureLmlSums],
    gradient_pass: Callable[[FeatureLmlGradientPass, int], NDArray[np.float64]],
    n_rows: int,
    length_scale: list[float],
    noise_variance: float,
    optimize: list[str],
    n_restarts: int,
    seed: int,
    center: bool,
    ard: bool = False,
    data_length_scale: list[float] | None = None,
    progress: _Progress | None = None,
) -> tuple[NDArray[np.float64], float, float, FeatureMap, FeatureStats, int]: ...
def median_pairwise_distance(x: NDArray[np.float64]) -> float: ...
def spread_length_scales(rows: NDArray[np.float64], spread: list[float]) -> list[float]: ...
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
class ExactGp:
    @staticmethod
    def fit(
        x: NDArray[np.float64],
        y: NDArray[np.float64],
        *,
        length_scale: list[float] | None,
        kernel_variance: float | None,
        noise_variance: float | None,
        ard: bool,
        optimize: list[str],
        n_restarts: int,
        max_iter: int,
        center_y: bool,
        seed: int,
        kernel: str = "gaussian",
        progress: _Progress | None = None,
    ) -> ExactGp: ...
    @property
    def kernel(self) -> str: ...
    @property
    def length_scale(self) -> NDArray[np.float64]: ...
    @property
    def kernel_variance(self) -> float: ...
    @property
    def noise_variance(self) -> float: ...
    @property
    def y_mean(self) -> float: ...
    @property
    def log_marginal_likelihood_value(self) -> float: ...
    @property
    def n_iter(self) -> int: ...
    @property
    def alpha(self) -> NDArray[np.float64]: ...
    @property
    def chol(self) -> NDArray[np.float64]: ...
    @property
    def x_train(self) -> NDArray[np.float64]: ...
    @property
    def y_train(self) -> NDArray[np.float64]: ...
    def with_factor(self, chol: NDArray[np.float64]) -> ExactGp: ...
    def predict(self, x: NDArray[np.float64], *, std: str | None = None) -> _Prediction: ...
    def log_marginal_likelihood(
        self, theta: list[float] | None = None, eval_gradient: bool = False
    ) -> tuple[float, NDArray[np.float64]]: ...
    def __reduce__(self) -> tuple[Any, tuple[bytes]]: ...
    @classmethod
    def _from_state(cls, state: bytes) -> ExactGp: ...

@final
class FeatureStats:
    def __new__(cls, n_features: int) -> FeatureStats: ...
    @staticmethod
    def for_map(n_components: int) -> FeatureStats: ...
    def accumulate(self, phi: NDArray[np.floating], y: NDArray[np.float64]) -> None: ...
    def merge(self, other: FeatureStats) -> None: ...
    def copy(self) -> FeatureStats: ...
    def fit(self, *, noise_variance: float, center_y: bool) -> FeatureGp: ...
    @property
    def gram(self) -> NDArray[np.float64]: ...
    @property
    def phi_y(self) -> NDArray[np.float64]: ...
    @property
    def phi_y_shifted(self) -> NDArray[np.float64]: ...
    @property
    def phi_sum(self) -> NDArray[np.float64]: ...
    @property
    def n(self) -> int: ...
    @property
    def y_shift(self) -> float: ...
    @property
    def y_mean(self) -> float: ...
    @property
    def n_features(self) -> int: ...
    def __reduce__(self) -> tuple[Any, tuple[bytes]]: ...
    @classmethod
    def _from_state(cls, state: bytes) -> FeatureStats: ...

@final
class FeatureGp:
    @property
    def chol(self) -> NDArray[np.float64]: ...
    @property
    def beta(self) -> NDArray[np.float64]: ...
    @property
    def y_mean(self) -> float: ...
    @property
    def noise_variance(self) -> float: ...
    @property
    def log_marginal_likelihood_value(self) -> float: ...
    def with_factor(self, chol: NDArray[np.float64]) -> FeatureGp: ...
    def predict(self, phi: NDArray[np.floating], *, std: str | None = None) -> _Prediction: ...
    def __reduce__(self) -> tuple[Any, tuple[bytes]]: ...
    @classmethod
    def _from_state(cls, state: bytes) -> FeatureGp: ...

# --- Dirichlet GP classification (src/python/gpc.rs) ---
@final
class DirichletClassStats:
    def __new__(cls, n_classes: int, n_features: int) -> DirichletClassStats: ...
    def accumulate(self, phi: NDArray[np.floating], y: NDArray[np.int64]) -> None: ...
    @property
    def n_samples(self) -> int: ...
    def merge(self, other: DirichletClassStats) -> None: ...
    def copy(self) -> DirichletClassStats: ...
    def __reduce__(self) -> tuple[Any, tuple[bytes]]: ...
    @classmethod
    def _from_state(cls, state: bytes) -> DirichletClassStats: ...

@final
class DirichletGPC:
    @staticmethod
    def fit(
        stats: DirichletClassStats, alpha_epsilon: float, progress: _Progress | None = None
    ) -> DirichletGPC: ...
    @staticmethod
    def fit_exact(
        x: NDArray[np.float64],
        y: NDArray[np.int64],
        *,
        n_classes: int,
        length_scale: list[float],
        kernel_variance: float,
        alpha_epsilon: float,
        optimize: list[str] = ...,
        n_restarts: int = 0,
        seed: int = 0,
        progress: _Progress | None = None,
    ) -> tuple[DirichletGPC, int]: ...
    @staticmethod
    def fit_optimized(
        features: FeatureMap,
        x: NDArray[np.float64],
        y: NDArray[np.int64],
        *,
        n_classes: int,
        length_scale: list[float],
        alpha_epsilon: float,
        optimize: list[str],
        n_restarts: int,
        seed: int,
        chunk_size: int,
        progress: _Progress | None = None,
    ) -> tuple[DirichletGPC, list[float], float, FeatureMap, int]: ...
    @property
    def length_scale(self) -> Optional[NDArray[np.float64]]: ...
    @property
    def kernel_variance(self) -> Optional[float]: ...
    def predict_latent(
        self, x: NDArray[np.floating]
    ) -> tuple[NDArray[np.float64], Optional[NDArray[np.float64]]]: ...
    @property
    def class_lml(self) -> list[float]: ...
    def __reduce__(self) -> tuple[Any, tuple[bytes]]: ...
    @classmethod
    def _from_state(cls, state: bytes) -> DirichletGPC: ...

# The Dirichlet GP classifier on the inducing-point model (src/python/sparse_gpc.rs)
@final
class SparseDirichletGPC:
    @staticmethod
    def fit(
        x: NDArray[np.floating],
        y: NDArray[np.int64],
        *,
        n_classes: int,
        n_inducing: int,
        inducing: str | NDArray[np.floating],
        kernel: str,
        length_scale: list[float],
        kernel_variance: float,
        alpha_epsilon: float,
        chunk_size: int | None,
        seed: int,
        optimize: list[str] = ...,
        n_restarts: int = 0,
        progress: _Progress | None = None,
    ) -> tuple[SparseDirichletGPC, int]: ...
    def predict_latent(
        self, x: NDArray[np.floating]
    ) -> tuple[NDArray[np.float64], Optional[NDArray[np.float64]]]: ...
    @property
    def class_lml(self) -> list[float]: ...
    @property
    def length_scale(self) -> NDArray[np.float64]: ...
    @property
    def kernel_variance(self) -> float: ...
    @property
    def inducing_points(self) -> NDArray[np.float64]: ...
    @property
    def jitter(self) -> float: ...
    def __reduce__(self) -> tuple[Any, tuple[bytes]]: ...
    @classmethod
    def _from_state(cls, state: bytes) -> SparseDirichletGPC: ...

def expected_softmax(
    mean: NDArray[np.float64], var: NDArray[np.float64]
) -> NDArray[np.float64]: ...

# --- kernels and the QMC sampler (src/python/fourier.rs) ---
def kernel_matrix(
    x: NDArray[np.float64], y: NDArray[np.float64], kernel: str, length_scale: list[float]
) -> NDArray[np.float64]: ...
def scale_length_scale(x: NDArray[np.floating]) -> float: ...
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
    phases: Optional[NDArray[np.floating]] = None,
    *,
    variant: str,
    scale: float,
) -> NDArray[np.floating]: ...

# Polynomial sketches (src/python/sketch.rs).
MAX_POLYNOMIAL_DEGREE: int

def sketch_variance(
    x: NDArray[np.float64],
    y: NDArray[np.float64],
    *,
    degree: int,
    n_components: int,
    sketch: str,
    complex_weights: bool,
    bias: float,
    length_scale: float,
) -> float: ...
def _sketch_estimates(
    x: NDArray[np.float64],
    y: NDArray[np.float64],
    *,
    degree: int,
    n_components: int,
    sketch: str,
    complex_weights: bool,
    bias: float,
    length_scale: float,
    seed: int,
    reps: int,
) -> NDArray[np.float64]: ...

# Sparse GP with inducing inputs (src/python/sparse_gp.rs)
@final
class SparseGp:
    @staticmethod
    def fit(
        x: NDArray[np.floating],
        y: NDArray[np.float64],
        *,
        n_inducing: int,
        inducing: str | NDArray[np.floating],
        method: str,
        kernel: str,
        length_scale: list[float] | None,
        kernel_variance: float | None,
        noise_variance: float | None,
        ard: bool,
        optimize: list[str],
        optimize_inducing: bool,
        n_restarts: int,
        max_iter: int,
        center_y: bool,
        chunk_size: int | None,
        seed: int,
        device: str = "cpu",
        progress: _Progress | None = None,
    ) -> SparseGp: ...
    @property
    def length_scale(self) -> NDArray[np.float64]: ...
    @property
    def kernel_variance(self) -> float: ...
    @property
    def noise_variance(self) -> float: ...
    @property
    def inducing_points(self) -> NDArray[np.float64]: ...
    @property
    def jitter(self) -> float: ...
    @property
    def on_gpu(self) -> bool: ...
    @property
    def log_marginal_likelihood_value(self) -> float: ...
    @property
    def y_mean(self) -> float: ...
    @property
    def n_iter(self) -> int: ...
    def predict(self, x: NDArray[np.floating], *, std: str | None = None) -> _Prediction: ...
    def __reduce__(self) -> tuple[Any, tuple[bytes]]: ...
    @classmethod
    def _from_state(cls, state: bytes) -> SparseGp: ...

# Streamed sums of the sparse GP, one block of rows at a time (src/python/sparse_stats.rs)
@final
class SparsePrior:
    def __new__(
        cls,
        *,
        inducing: NDArray[np.floating],
        kernel: str,
        length_scale: list[float],
        kernel_variance: float,
        noise_variance: float,
    ) -> SparsePrior: ...
    @property
    def n_inducing(self) -> int: ...
    def __reduce__(self) -> tuple[Any, tuple[bytes]]: ...
    @classmethod
    def _from_state(cls, state: bytes) -> SparsePrior: ...

@final
class SparseStats:
    @staticmethod
    def of_rows(
        x: NDArray[np.floating],
        y: NDArray[np.float64],
        *,
        prior: SparsePrior,
        method: str,
        chunk_size: int | None = None,
    ) -> SparseStats: ...
    def merge(self, other: SparseStats) -> None: ...
    def copy(self) -> SparseStats: ...
    @property
    def n(self) -> int: ...
    @property
    def y_mean(self) -> float: ...
    @property
    def method(self) -> str: ...
    def fit(self, *, prior: SparsePrior, center_y: bool) -> SparseGp: ...
    def gradient_sums(
        self,
        x: NDArray[np.floating],
        y: NDArray[np.float64],
        *,
        prior: SparsePrior,
        center_y: bool,
        chunk_size: int | None = None,
    ) -> SparseGradientSums: ...
    def objective(
        self, sums: SparseGradientSums, *, prior: SparsePrior, center_y: bool
    ) -> tuple[float, list[float], NDArray[np.float64]]: ...
    def __reduce__(self) -> tuple[Any, tuple[bytes]]: ...
    @classmethod
    def _from_state(cls, state: bytes) -> SparseStats: ...

@final
class SparseGradientSums:
    def merge(self, other: SparseGradientSums) -> None: ...
    def copy(self) -> SparseGradientSums: ...
    def __reduce__(self) -> tuple[Any, tuple[bytes]]: ...
    @classmethod
    def _from_state(cls, state: bytes) -> SparseGradientSums: ...

def sparse_gp_optimize_blocks(
    *,
    evaluate: Callable[[SparsePrior, int, bool], tuple[SparseStats, SparseGradientSums | None]],
    n_rows: int,
    inducing: NDArray[np.floating],
    method: str,
    kernel: str,
    length_scale: list[float],
    kernel_variance: float,
    noise_variance: float,
    ard: bool,
    optimize: list[str],
    optimize_inducing: bool,
    n_restarts: int,
    max_iter: int,
    center_y: bool,
    seed: int,
    data_length_scale: list[float] | None = None,
    data_target_variance: float | None = None,
    progress: _Progress | None = None,
) -> SparseGp: ...

# Feature-space GP sums over blocks (src/python/feature_sums.rs)
@final
class FeatureLmlSums:
    @staticmethod
    def of_rows(
        x: NDArray[np.float64],
        y: NDArray[np.float64],
        *,
        features: FeatureMap,
        drawn_length_scale: list[float],
        values: list[float],
        chunk_size: int,
    ) -> FeatureLmlSums: ...
    def merge(self, other: FeatureLmlSums) -> None: ...
    def copy(self) -> FeatureLmlSums: ...
    @property
    def n(self) -> int: ...
    def log_marginal_likelihood(self, *, center_y: bool) -> tuple[float, list[float]]: ...
    def gradient_pass(self, *, center_y: bool) -> FeatureLmlGradientPass: ...
    def __reduce__(self) -> tuple[Any, tuple[bytes]]: ...
    @classmethod
    def _from_state(cls, state: bytes) -> FeatureLmlSums: ...

@final
class FeatureLmlGradientPass:
    def of_rows(
        self,
        x: NDArray[np.float64],
        y: NDArray[np.float64],
        *,
        features: FeatureMap,
        drawn_length_scale: list[float],
        chunk_size: int,
    ) -> NDArray[np.float64]: ...
    def __reduce__(self) -> tuple[Any, tuple[bytes]]: ...
    @classmethod
    def _from_state(cls, state: bytes) -> FeatureLmlGradientPass: ...

# Localized Maclaurin GP (src/python/localized_gp.rs)
@final
class LocalizedMaclaurinGp:
    @staticmethod
    def fit(
        x: NDArray[np.floating],
        y: NDArray[np.float64],
        *,
        n_components: int,
        length_scale: float,
        kernel_variance: float,
        noise_variance: float,
        threshold: float | str | None,
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
    def allocation(self) -> NDArray[np.int64]: ...
    @property
    def truncation_degree(self) -> int: ...
    @property
    def y_mean(self) -> float: ...
    @property
    def threshold(self) -> float | None: ...
    @property
    def threshold_scores(self) -> list[tuple[float | None, float]] | None: ...
    @property
    def threshold_std_errors(self) -> list[float] | None: ...
    @property
    def threshold_criterion(self) -> str | None: ...
    @property
    def timings(self) -> tuple[float, float]: ...
    @property
    def cutoff_sq(self) -> float: ...
    def build_all(self, progress: _Progress | None = None) -> int: ...
    def predict(
        self,
        x: NDArray[np.floating],
        *,
        std: str | None = None,
        at_test_points: bool = False,
        progress: _Progress | None = None,
    ) -> tuple[NDArray[np.float64], NDArray[np.float64] | None, int, float, float]: ...
    def __reduce__(self) -> tuple[Any, tuple[bytes]]: ...
    @classmethod
    def _from_state(cls, state: bytes) -> LocalizedMaclaurinGp: ...

# Any dense feature map (src/python/feature_map.rs)
@final
class FeatureMap:
    @staticmethod
    def fourier(
        n_features_in: int,
        *,
        n_components: int,
        kernel: str,
        length_scale: list[float],
        kernel_variance: float,
        sampler: str,
        variant: str,
        seed: int,
    ) -> FeatureMap: ...
    @staticmethod
    def polynomial(
        n_features_in: int,
        *,
        n_components: int,
        degree: int,
        bias: float,
        length_scale: float,
        sketch: str,
        complex_weights: bool,
        seed: int,
    ) -> FeatureMap: ...
    @staticmethod
    def maclaurin(
        x: NDArray[np.floating],
        *,
        n_components: int,
        kernel: str,
        degree: int | None,
        bias: float,
        length_scale: float,
        kernel_variance: float,
        sketch: str,
        complex_weights: bool,
        allocation: str | NDArray[np.integer] | list[int],
        min_degree: int,
        max_degree: int,
        n_subsample: int,
        h01: bool,
        seed: int,
        progress: _Progress | None = None,
    ) -> FeatureMap: ...
    @staticmethod
    def nystroem(
        x: NDArray[np.floating],
        *,
        n_components: int,
        kernel: str,
        length_scale: list[float],
        seed: int,
    ) -> tuple[FeatureMap, NDArray[np.int64]]: ...
    @property
    def n_features_in(self) -> int: ...
    @property
    def n_components(self) -> int: ...
    @property
    def kind(self) -> str: ...
    def param(self, name: str) -> Any: ...
    def resolve_device(self, device: str) -> str: ...
    def transform(
        self,
        x: NDArray[np.floating],
        device: str,
        center: Optional[NDArray[np.float64]] = None,
        progress: _Progress | None = None,
    ) -> NDArray[np.floating]: ...
    def accumulate(
        self,
        stats: FeatureStats,
        x: NDArray[np.floating],
        y: NDArray[np.float64],
        device: str,
        chunk_rows: int,
    ) -> None: ...
    def __reduce__(self) -> tuple[Any, tuple[bytes]]: ...
    @classmethod
    def _from_state(cls, state: bytes) -> FeatureMap: ...
