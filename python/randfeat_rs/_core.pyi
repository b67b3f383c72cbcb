"""Type stubs of the compiled core (checked with mypy stubtest)."""

import numpy as np
from numpy.typing import NDArray
from typing_extensions import final

# Keep in step with the functions registered in src/python/ (stubtest checks it).
__all__ = [
    "FeatureStats",
    "__version__",
    "_debug_panic",
    "exact_gp_fit",
    "exact_gp_lml",
    "exact_gp_predict",
    "feature_gp_predict",
    "fwht",
    "fwht_inplace",
    "fwht_into",
    "get_num_threads",
    "kl_divergence",
    "mean_nll",
    "relative_frobenius_error",
    "rmse",
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
    verbose: bool,
    center: bool,
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
) -> tuple[NDArray[np.float64], NDArray[np.float64] | None]: ...
def exact_gp_lml(
    x: NDArray[np.float64],
    y: NDArray[np.float64],
    length_scale: list[float],
    kernel_variance: float,
    noise_variance: float,
    eval_gradient: bool,
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
