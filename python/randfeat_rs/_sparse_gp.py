"""Sparse Gaussian-process regression with inducing inputs (docs/math/sparse_gp.rst).

:class:`SparseGPR` summarizes the ``N`` training rows by ``M`` inducing
inputs and fits Titsias' collapsed variational bound (VFE) or the FITC
marginal likelihood, with analytic gradients, in Rust. The objective and
its gradient are sums over row chunks, so a fit costs ``O(N M^2 + M^3)``
time and ``O(M^2 + chunk M)`` memory whatever ``N``.
"""

from __future__ import annotations

import warnings
from typing import Any, Optional

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin, _fit_context
from sklearn.utils._param_validation import StrOptions
from sklearn.utils.validation import check_is_fitted

from . import _core
from ._base import DeviceMixin, RandomStateMixin, keep_state_on_failure
from ._fourier import KERNELS
from ._gp import GaussianPredictionMixin, KernelHyperparametersMixin
from ._progress import progress_printer
from ._validation import (
    MAX_COUNT,
    Count,
    RealNumber,
    inducing_inputs,
    length_scale_values,
    regression_targets,
    user_stacklevel,
    validate_numeric_data,
)

__all__ = ["SparseGPR"]

_HYPERPARAMETERS = ("length_scale", "kernel_variance", "noise_variance")

#: The inducing-input selections ``inducing`` accepts by name.
INDUCING = ("greedy_variance", "kmeans", "random")

#: The approximations ``method`` accepts.
METHODS = ("vfe", "fitc")

#: Why FITC has no GPU path (the message of ``device="gpu"``).
FITC_CPU_ONLY = (
    "method='fitc' has no GPU path (its per-row weights need a triangular solve per row, "
    "which stays on the CPU in float64); use method='vfe' or device='cpu'"
)


class SparseGPR(
    GaussianPredictionMixin,
    KernelHyperparametersMixin,
    DeviceMixin,
    RandomStateMixin,
    RegressorMixin,
    BaseEstimator,
):
    """Sparse Gaussian-process regression with ``M`` inducing inputs.

    The prior is a GP with the stationary kernel ``k(x, x') =
    kernel_variance * kappa(rho)`` of :class:`ExactGPR` (``rho`` the
    distance scaled by one length scale, or one per dimension with
    ``ard=True``) plus ``noise_variance`` on the diagonal; the targets are
    centered by their training mean. ``M`` inducing inputs ``Z`` summarize
    the data through the Nystroem covariance ``Q = K_fu K_uu^{-1} K_uf``:

    - ``method="vfe"`` maximizes Titsias' (2009) collapsed variational
      bound ``log N(y | 0, Q + s^2 I) - tr(K - Q) / (2 s^2)``, a lower bound
      on the exact log marginal likelihood;
    - ``method="fitc"`` maximizes the log marginal likelihood of the model
      with covariance ``Q + diag(K - Q) + s^2 I`` (Snelson & Ghahramani,
      2006).

    With ``Z`` equal to the training inputs both equal the exact GP. The
    inducing inputs are chosen once at the initial hyperparameters (greedy
    conditional variance by default, Burt et al. 2020); the hyperparameters
    in ``optimize`` (and, with ``optimize_inducing=True``, ``Z`` in a second
    stage) are fitted by L-BFGS with analytic gradients, the optimizer of
    :class:`ExactGPR` (restarts and coarse-to-fine fits included). See
    docs/math/sparse_gp.rst.

    Parameters
    ----------
    n_inducing : int, default=256
        Number of inducing inputs ``M`` (>= 1). Values above the number of
        training rows ``N`` are clamped to ``N``; the greedy selection may
        also stop earlier, once the chosen inputs explain the kernel on the
        training rows (every remaining conditional variance below ``1e-10
        kernel_variance``). Ignored when ``inducing`` is an array.
    inducing : {"greedy_variance", "kmeans", "random"} or array-like of shape (M, n_features), \
default="greedy_variance"
        How the inducing inputs are chosen: the row of largest conditional
        variance given those chosen so far (a pivoted incomplete Cholesky of
        ``K``), k-means centers (k-means++ then Lloyd), a random subset of
        the rows, or the given inputs. The selections draw from
        ``random_state``.
    method : {"vfe", "fitc"}, default="vfe"
        The approximation (see above).
    kernel : {"gaussian", "laplacian", "matern12", "matern32", "matern52"}, default="gaussian"
        The stationary kernel, as in :class:`ExactGPR` and
        :class:`RandomFourierFeatures`.
    length_scale : float or array-like of shape (n_features,), default=None
        Fixed (when not optimized) or initial length scale(s). ``None``: the
        median pairwise distance of (a subsample of) the training inputs;
        with ``ard=True``, per column that distance for the columns divided
        by their standard deviations, times the column's standard deviation
        (so a column in other units starts on its own scale).
    ard : bool, default=False
        One fitted length scale per input dimension. Fixed length scales
        (``optimize`` without ``"length_scale"``) may be one per dimension
        either way.
    kernel_variance : float, default=None
        Fixed or initial kernel variance. ``None``: the variance of ``y``
        (1 when all targets are equal). Within ``1e-100..1e100``: the
        statistics scale as its square, and beyond that range float64 cannot
        hold them (an ``InvalidInputError`` asks to rescale ``y``).
    noise_variance : float, default=None
        Fixed or initial noise variance. ``None``: 0.1 times the variance
        of ``y`` (0.1 when all targets are equal).
    optimize : tuple of str, default=("length_scale", "kernel_variance", "noise_variance")
        The hyperparameters fitted by maximizing the objective; an empty
        tuple fits none (with ``optimize_inducing=False`` the fit then makes
        one pass over the rows, the statistics, and no gradient). Each may
        factor ``e^40`` from its initialization (on the data's scale, so
        the fit follows the units of ``X`` and ``y``): a maximum beyond
        that ends the fit at the edge of the range. Given initial values
        are compared with the defaults (the data's scale): the fit starts
        from them, or from the same with the free length scales, the free
        variances or both at the defaults, whichever has the highest log
        marginal likelihood on the coarsest row subset. A fit raises
        :class:`~randfeat_rs.InvalidInputError` for targets that are
        constant after centering and for targets of variance outside
        ``1e-40..1e40`` (also on dask arrays), as
        :class:`~randfeat_rs.ExactGPR` does.
    optimize_inducing : bool, default=False
        After the hyperparameter fit, one L-BFGS run over the
        hyperparameters and the inducing inputs together.
    n_restarts : int, default=0
        Additional L-BFGS runs from starts drawn uniformly (in log space)
        within a factor 10 of the initialization.
    max_iter : int, default=500
        Maximum L-BFGS iterations per run.
    chunk_size : int, default=None
        Rows per chunk of the passes over the data (memory ``O(chunk_size
        M)``). ``None``: ``2**18 / M`` rows, at least 256.
    center_y : bool, default=True
        Subtract the training-target mean (zero prior mean on the rest).
    device : {"cpu", "gpu", "auto"}, default="cpu"
        Where the model's statistics ``K_uf K_fu`` and ``K_uf y`` (the
        ``O(N M^2)`` pass over the rows) are computed. ``"gpu"``: the kernel
        block ``K_fu`` and its Gram are computed on the GPU in float32
        (reduced in float64), at the final hyperparameters; the bound, the
        weights and every solve stay on the CPU in float64, and so does the
        hyperparameter fit (each L-BFGS evaluation's bound and gradient), so
        the GPU pays off with fixed hyperparameters (``optimize=()``), where
        its pass is the fit's only one. The float32 rounding of the
        statistics is amplified in the solves by the conditioning of
        ``K_uu`` (see docs/math/sparse_gp.rst, section Devices): with many
        close inducing inputs, a long length scale or a small noise variance
        the model drifts from the float64 one, and past that ``fit`` raises
        a :class:`~randfeat_rs.NotPositiveDefiniteError` that names the
        float32 statistics. A :class:`~randfeat_rs.GpuError` when no adapter
        is usable, an :class:`~randfeat_rs.InvalidInputError` for
        ``method="fitc"`` (no GPU path). ``"auto"``: the GPU when a hardware
        adapter is usable and ``method="vfe"``, else the CPU; when the
        GPU's float32 statistics fail, the CPU's float64 ones with a
        ``RuntimeWarning``.
    random_state : int, RandomState instance or None, default=None
        Seeds the inducing-input selection and the restart draws.
    verbose : bool, default=False
        Print the progress of the fit to ``sys.stderr``.

    Attributes
    ----------
    seed_ : int
        The 64-bit seed drawn from ``random_state`` at ``fit``.
    length_scale_ : float or ndarray of shape (n_features,)
        Fitted length scale(s) (an array with ``ard=True`` or fixed
        per-dimension values).
    kernel_variance_ : float
        Fitted kernel variance.
    noise_variance_ : float
        Fitted noise variance.
    inducing_points_ : ndarray of shape (M, n_features), float64
        The inducing inputs (fitted with ``optimize_inducing=True``).
    log_marginal_likelihood_ : float
        The objective at the fitted parameters, of the centered targets:
        VFE's lower bound on the log marginal likelihood, or FITC's log
        marginal likelihood.
    jitter_ : float
        Jitter added to the diagonal of ``K_uu`` (0 normally): when it cannot
        be factored, or when it factors but is numerically singular (see
        the "Accuracy" section of the sparse GP's math page).
    n_iter_ : int
        L-BFGS iterations spent, over all runs and stages.
    y_mean_ : float
        Training-target mean, added back to predictions (0 with
        ``center_y=False``).
    device_ : str
        The device the model's statistics were computed on: "cpu" or "gpu".
    n_features_in_ : int
        Number of input features.

    Raises
    ------
    NotPositiveDefiniteError
        From ``fit``, when ``K_uu`` cannot be factored even with the largest
        jitter, or when no float64 computation of the bound would keep its
        digits at the given hyperparameters (a kernel variance many orders
        above the noise variance with a nearly singular ``K_uu``); the
        message names ``M``, the jitter and how to re-initialize. A fit that
        optimizes backs off from such points instead. With
        ``device="gpu"``, also when ``K_uu`` is too ill-conditioned for the
        GPU's float32 statistics (the message says so and names ``M``).

    Examples
    --------
    >>> import numpy as np
    >>> from randfeat_rs import SparseGPR
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(0, 5, (500, 1))
    >>> y = np.sin(X[:, 0]) + 0.05 * rng.standard_normal(500)
    >>> gp = SparseGPR(n_inducing=20, random_state=0).fit(X, y)
    >>> mean, std = gp.predict(np.array([[2.5]]), return_std=True)
    >>> bool(abs(mean[0] - np.sin(2.5)) < 0.05 and std[0] < 0.05)
    True
    """

    _parameter_constraints: dict = {  # noqa: RUF012
        "n_inducing": [Count(1, MAX_COUNT)],
        "inducing": [StrOptions(set(INDUCING)), "array-like"],
        "method": [StrOptions(set(METHODS))],
        "kernel": [StrOptions(set(KERNELS))],
        "length_scale": [None, RealNumber(0, None, closed="neither"), "array-like"],
        "ard": ["boolean"],
        "kernel_variance": [None, RealNumber(0, None, closed="neither")],
        "noise_variance": [None, RealNumber(0, None, closed="neither")],
        "optimize": [tuple, list],
        "optimize_inducing": ["boolean"],
        "n_restarts": [Count(0, MAX_COUNT)],
        "max_iter": [Count(1, MAX_COUNT)],
        "chunk_size": [None, Count(1, MAX_COUNT)],
        "center_y": ["boolean"],
        "device": DeviceMixin._device_constraint,
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    def __init__(
        self,
        n_inducing: int = 256,
        *,
        inducing: Any = "greedy_variance",
        method: str = "vfe",
        kernel: str = "gaussian",
        length_scale: Any = None,
        ard: bool = False,
        kernel_variance: Optional[float] = None,
        noise_variance: Optional[float] = None,
        optimize: Any = _HYPERPARAMETERS,
        optimize_inducing: bool = False,
        n_restarts: int = 0,
        max_iter: int = 500,
        chunk_size: Optional[int] = None,
        center_y: bool = True,
        device: str = "cpu",
        random_state: Any = None,
        verbose: bool = False,
    ) -> None:
        self.n_inducing = n_inducing
        self.inducing = inducing
        self.method = method
        self.kernel = kernel
        self.length_scale = length_scale
        self.ard = ard
        self.kernel_variance = kernel_variance
        self.noise_variance = noise_variance
        self.optimize = optimize
        self.optimize_inducing = optimize_inducing
        self.n_restarts = n_restarts
        self.max_iter = max_iter
        self.chunk_size = chunk_size
        self.center_y = center_y
        self.device = device
        self.random_state = random_state
        self.verbose = verbose

    @keep_state_on_failure
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X: Any, y: Any) -> SparseGPR:
        """Choose the inducing inputs and fit the hyperparameters and the GP.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training inputs (float32 is kept and converted exactly in Rust,
            anything else becomes float64).
        y : array-like of shape (n_samples,)
            Training targets.

        Returns
        -------
        self : SparseGPR
            The fitted estimator.
        """
        X, y = validate_numeric_data(
            self, X, y, dtype=[np.float64, np.float32], order="C", y_numeric=True
        )
        y = regression_targets(y)
        self._resolve_device(unsupported=FITC_CPU_ONLY if self.method == "fitc" else None)
        inducing = inducing_inputs(self.inducing)
        ls = None if self.length_scale is None else length_scale_values(self.length_scale)
        with progress_printer(type(self).__name__, bool(self.verbose)) as progress:
            self._gp = _core.SparseGp.fit(
                X,
                y,
                n_inducing=int(self.n_inducing),
                inducing=inducing,
                method=self.method,
                kernel=self.kernel,
                length_scale=ls,
                kernel_variance=self.kernel_variance,
                noise_variance=self.noise_variance,
                ard=bool(self.ard),
                optimize=[str(n) for n in self.optimize],
                optimize_inducing=bool(self.optimize_inducing),
                n_restarts=int(self.n_restarts),
                max_iter=int(self.max_iter),
                center_y=bool(self.center_y),
                chunk_size=None if self.chunk_size is None else int(self.chunk_size),
                seed=self._fit_seed(),
                # "auto" goes to Rust as such: it falls back to the CPU when
                # the GPU's float32 statistics fail.
                device="auto" if self.device == "auto" else self.device_,
                progress=progress,
            )
        picked, self.device_ = self.device_, "gpu" if self._gp.on_gpu else "cpu"
        if picked != self.device_:
            warnings.warn(
                "SparseGPR(device='auto'): the GPU's float32 statistics were not accurate "
                "enough for these inducing inputs (K_uu too ill-conditioned); the model's "
                "statistics were computed on the CPU in float64 instead",
                RuntimeWarning,
                stacklevel=user_stacklevel(),
            )
        return self

    @property
    def inducing_points_(self) -> np.ndarray:
        """The inducing inputs, shape (M, n_features)."""
        return self._fitted_gp().inducing_points

    @property
    def jitter_(self) -> float:
        """Jitter added to the diagonal of ``K_uu``."""
        return float(self._fitted_gp().jitter)

    def _predict(self, X: Any, std: Optional[str]) -> tuple[np.ndarray, Any]:
        check_is_fitted(self)
        X = validate_numeric_data(self, X, reset=False, dtype=[np.float64, np.float32], order="C")
        return self._gp.predict(X, std=std)
