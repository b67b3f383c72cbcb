"""Gaussian-process regressors (ALGORITHMS.md section 7).

:class:`ExactGPR` is the exact GP with the kernels of
:class:`~randfeat_rs.RandomFourierFeatures` and a log-marginal-likelihood
hyperparameter fit (L-BFGS in Rust); it is the reference every
approximation is judged against. :class:`RandomFeatureGPR`
is the feature-space GP over any fitted transformer: it streams row chunks
through the transformer and accumulates ``Phi^T Phi`` and ``Phi^T y`` in
Rust (never an ``N x D`` matrix), so its :class:`SufficientStatistics`
merge exactly across chunks, calls and machines.
"""

from __future__ import annotations

from numbers import Integral, Real
from typing import Any, Optional

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin, clone
from sklearn.utils._param_validation import HasMethods, Interval, StrOptions
from sklearn.utils.validation import check_is_fitted, validate_data

from . import _core
from ._base import RandomFeaturesBase
from ._fourier import KERNELS
from ._progress import ProgressPrinter, progress_printer
from ._validation import seed_from_random_state
from .exceptions import InvalidInputError
from .gpu import DEVICES, _fitted_device

__all__ = ["ExactGPR", "RandomFeatureGPR", "SufficientStatistics"]

_HYPERPARAMETERS = ("length_scale", "kernel_variance", "noise_variance")


def _positive_or_none(value: Any, name: str) -> Optional[float]:
    if value is None:
        return None
    v = float(value)
    if not (np.isfinite(v) and v > 0):
        raise InvalidInputError(f"`{name}` must be finite and > 0, got {value!r}")
    return v


class GaussianPredictionMixin:
    """``predict`` and ``predict_noisy`` of the GP regressors.

    A regressor supplies ``_predict(X, return_var) -> (mean, var or None)``
    (the latent variance) and the fitted ``noise_variance_``.
    """

    noise_variance_: float

    def _predict(self, X: Any, return_var: bool) -> tuple[np.ndarray, Optional[np.ndarray]]:
        raise NotImplementedError

    def predict(self, X: Any, return_std: bool = False) -> Any:
        """Predictive mean and, optionally, the latent function's std.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Test inputs.
        return_std : bool, default=False
            Also return the standard deviation of the latent ``f(x)`` (as
            scikit-learn's GaussianProcessRegressor with the noise in
            ``alpha``); :meth:`predict_noisy` gives the observation's.

        Returns
        -------
        mean : ndarray of shape (n_samples,), float64
        std : ndarray of shape (n_samples,), float64
            Only with ``return_std=True``.
        """
        mean, var = self._predict(X, return_std)
        if return_std:
            return mean, np.sqrt(np.maximum(var, 0.0))
        return mean

    def predict_noisy(self, X: Any) -> tuple[np.ndarray, np.ndarray]:
        """Predictive mean and std of a noisy observation ``y = f(x) + eps``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Test inputs.

        Returns
        -------
        mean : ndarray of shape (n_samples,), float64
        std : ndarray of shape (n_samples,), float64
            ``sqrt(var_f + noise_variance_)``.
        """
        mean, var = self._predict(X, True)
        return mean, np.sqrt(np.maximum(var, 0.0) + self.noise_variance_)


EXACT_GP_CPU_ONLY = (
    "ExactGPR runs on the CPU in float64: its N x N kernel matrix, Cholesky factor and "
    "log marginal likelihood need float64 accuracy that the float32 GPU kernels cannot "
    "give; the approximate models RandomFeatureGPR (with RandomFourierFeatures, "
    "PolynomialSketch or MaclaurinFeatures) and LocalizedMaclaurinGPR run on the GPU"
)


class ExactGPR(GaussianPredictionMixin, RegressorMixin, BaseEstimator):
    """Exact Gaussian-process regression with a stationary kernel.

    The kernel is ``k(x, x') = kernel_variance * kappa(rho)`` with ``kappa``
    one of the kernels of :class:`~randfeat_rs.RandomFourierFeatures` and
    ``rho`` the distance of the inputs divided by one length scale
    (``ard=False``) or by one per input dimension (``ard=True``): for the
    Gaussian kernel ``exp(-sum_a (x_a - x'_a)**2 / (2 l_a**2))``; the
    approximate models with the same kernel are judged against this one.
    ``noise_variance`` is added on the diagonal. The
    targets are centered by their training mean (zero prior mean on the
    rest). Hyperparameters listed in ``optimize`` maximize the log marginal
    likelihood (L-BFGS over their logarithms, with analytic gradients, in
    Rust), from the initialization of ALGORITHMS.md 7.1 and ``n_restarts``
    random starts; the others stay at their given (or initial) values. From
    1,024 training rows on, each run first fits every fourth row (recursively)
    and continues on all rows from that optimum, preconditioned by its
    Hessian, which saves most of the full-size evaluations.

    This is the only model that builds an ``N x N`` matrix (``O(N^2)``
    memory, ``O(N^3)`` time): a fit whose matrices would not fit in memory is
    refused with a message pointing to :class:`RandomFeatureGPR` and
    ``LocalizedMaclaurinGPR``.

    Parameters
    ----------
    kernel : {"gaussian", "laplacian", "matern12", "matern32", "matern52"}, default="gaussian"
        With ``r`` the Euclidean distance of the scaled inputs
        ``x_a / l_a``: ``"gaussian"`` ``exp(-r^2/2)``; ``"laplacian"``
        ``exp(-sum_a |x_a - x'_a| / l_a)``; ``"matern12"`` ``exp(-r)``,
        ``"matern32"`` ``(1 + sqrt(3) r) exp(-sqrt(3) r)``, ``"matern52"``
        ``(1 + sqrt(5) r + 5 r^2 / 3) exp(-sqrt(5) r)``: the kernels of
        :class:`~randfeat_rs.RandomFourierFeatures`, so every approximation
        has its exact reference. The log marginal likelihood has analytic
        gradients for each (at zero distance, e.g. repeated inputs, the
        length-scale derivative of every kernel is 0).
    length_scale : float or array-like of shape (n_features,), default=None
        Fixed (when not optimized) or initial length scale(s). ``None``: the
        median pairwise distance of (a subsample of) the training inputs.
    kernel_variance : float, default=None
        Fixed or initial kernel variance. ``None``: the variance of ``y``.
    noise_variance : float, default=None
        Fixed or initial noise variance. ``None``: 0.1 times the variance
        of ``y``.
    ard : bool, default=False
        One length scale per input dimension.
    optimize : tuple of str, default=("length_scale", "kernel_variance", "noise_variance")
        The hyperparameters fitted by maximizing the log marginal
        likelihood; an empty tuple fits none.
    n_restarts : int, default=2
        Additional L-BFGS runs from starts drawn uniformly (in log space)
        within a factor 10 of the initialization.
    max_iter : int, default=500
        Maximum L-BFGS iterations per run.
    random_state : int, RandomState instance or None, default=None
        Seeds the restart draws.
    center_y : bool, default=True
        Subtract the training-target mean (zero prior mean on the rest);
        ``False`` uses a zero prior mean on the raw targets.
    verbose : bool, default=False
        Print the progress of the fit to ``sys.stderr`` (optimizer runs done,
        and per run and subsample level: LML, iterations, evaluations).
    device : {"cpu", "gpu", "auto"}, default="cpu"
        Accepted for a uniform API; the exact GP always runs on the CPU, so
        ``"auto"`` gives ``device_ = "cpu"`` and ``"gpu"`` raises
        :class:`~randfeat_rs.InvalidInputError`. Its work is the ``N x N``
        kernel matrix, its Cholesky factor and the log marginal likelihood
        with its gradients, all in float64: the GPU kernels are float32 (WGSL
        has no portable float64), and a float32 kernel matrix carries a
        relative error of about ``1e-7 * cond(K + noise I)``, which for the
        ill-conditioned matrices of a reference GP (``cond`` up to ``1e7`` or
        more) would leave no correct digit in the solve and the LML, the
        accuracy this reference model exists for. The approximate models run
        on the GPU: ``RandomFeatureGPR`` (with ``RandomFourierFeatures``,
        ``PolynomialSketch`` or ``MaclaurinFeatures``) and
        ``LocalizedMaclaurinGPR``.

    Attributes
    ----------
    device_ : str
        Always "cpu" (see ``device``).
    length_scale_ : float or ndarray of shape (n_features,)
        Fitted length scale(s) (an array with ``ard=True``).
    kernel_variance_ : float
        Fitted kernel variance.
    noise_variance_ : float
        Fitted noise variance.
    log_marginal_likelihood_ : float
        Log marginal likelihood of the centered training targets at the
        fitted hyperparameters.
    n_iter_ : int
        L-BFGS iterations spent, over all runs (0 when nothing is optimized).
    X_train_ : ndarray of shape (n_samples, n_features), float64
        Training inputs.
    y_train_ : ndarray of shape (n_samples,), float64
        Training targets.
    L_ : ndarray of shape (n_samples, n_samples)
        Lower Cholesky factor of ``K + noise_variance I`` (plus jitter if
        the factorization needed it), column-major.
    alpha_ : ndarray of shape (n_samples,)
        ``(K + noise_variance I)^{-1} (y - y_mean_)``.
    y_mean_ : float
        Training-target mean, added back to predictions (0 with
        ``center_y=False``).
    n_features_in_ : int
        Number of input features.

    Examples
    --------
    >>> import numpy as np
    >>> from randfeat_rs import ExactGPR
    >>> X = np.linspace(0, 5, 40)[:, None]
    >>> y = np.sin(X[:, 0])
    >>> gp = ExactGPR(random_state=0).fit(X, y)
    >>> mean, std = gp.predict(np.array([[2.5]]), return_std=True)
    >>> bool(abs(mean[0] - np.sin(2.5)) < 1e-2 and std[0] < 0.05)
    True
    """

    _parameter_constraints: dict = {  # noqa: RUF012
        "kernel": [StrOptions(set(KERNELS))],
        "length_scale": [None, Interval(Real, 0, None, closed="neither"), "array-like"],
        "kernel_variance": [None, Interval(Real, 0, None, closed="neither")],
        "noise_variance": [None, Interval(Real, 0, None, closed="neither")],
        "ard": ["boolean"],
        "optimize": [tuple, list],
        "n_restarts": [Interval(Integral, 0, None, closed="left")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "random_state": ["random_state"],
        "center_y": ["boolean"],
        "verbose": ["verbose"],
        "device": [StrOptions(set(DEVICES))],
    }

    def __init__(
        self,
        *,
        kernel: str = "gaussian",
        length_scale: Any = None,
        kernel_variance: Optional[float] = None,
        noise_variance: Optional[float] = None,
        ard: bool = False,
        optimize: Any = _HYPERPARAMETERS,
        n_restarts: int = 2,
        max_iter: int = 500,
        random_state: Any = None,
        center_y: bool = True,
        verbose: bool = False,
        device: str = "cpu",
    ) -> None:
        self.kernel = kernel
        self.length_scale = length_scale
        self.kernel_variance = kernel_variance
        self.noise_variance = noise_variance
        self.ard = ard
        self.optimize = optimize
        self.n_restarts = n_restarts
        self.max_iter = max_iter
        self.random_state = random_state
        self.center_y = center_y
        self.verbose = verbose
        self.device = device

    def _optimize_list(self) -> list[str]:
        names = [str(n) for n in self.optimize]
        for n in names:
            if n not in _HYPERPARAMETERS:
                raise InvalidInputError(
                    f"`optimize` contains {n!r}; expected a subset of {list(_HYPERPARAMETERS)}"
                )
        return names

    def fit(self, X: Any, y: Any) -> ExactGPR:
        """Fit the hyperparameters (those in ``optimize``) and the GP.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training inputs (converted to float64).
        y : array-like of shape (n_samples,)
            Training targets.

        Returns
        -------
        self : ExactGPR
            The fitted estimator.
        """
        self._validate_params()
        self.device_ = _fitted_device(self.device, EXACT_GP_CPU_ONLY)
        X, y = validate_data(self, X, y, dtype=np.float64, order="C", y_numeric=True)
        y = np.ascontiguousarray(y, dtype=np.float64)
        ls = None
        if self.length_scale is not None:
            ls = [float(v) for v in np.atleast_1d(np.asarray(self.length_scale, dtype=np.float64))]
        with progress_printer(type(self).__name__, bool(self.verbose)) as progress:
            ls_, kv, nv, y_mean, lml, alpha, chol, n_iter = _core.exact_gp_fit(
                X,
                y,
                ls,
                _positive_or_none(self.kernel_variance, "kernel_variance"),
                _positive_or_none(self.noise_variance, "noise_variance"),
                bool(self.ard),
                self._optimize_list(),
                int(self.n_restarts),
                seed_from_random_state(self.random_state),
                int(self.max_iter),
                progress,
                bool(self.center_y),
                kernel=self.kernel,
            )
        self.length_scale_ = ls_ if self.ard else float(ls_[0])
        self.kernel_variance_ = float(kv)
        self.noise_variance_ = float(nv)
        self.y_mean_ = float(y_mean)
        self.log_marginal_likelihood_ = float(lml)
        self.n_iter_ = int(n_iter)
        self.alpha_ = alpha
        self.L_ = chol
        self.X_train_ = X
        self.y_train_ = y
        return self

    def _predict(self, X: Any, return_var: bool) -> tuple[np.ndarray, Optional[np.ndarray]]:
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=np.float64, order="C")
        return _core.exact_gp_predict(
            self.X_train_,
            self.L_,
            self.alpha_,
            self.y_mean_,
            [float(v) for v in np.atleast_1d(self.length_scale_)],
            self.kernel_variance_,
            X,
            return_var,
            kernel=self.kernel,
        )

    def log_marginal_likelihood(self, theta: Any = None, eval_gradient: bool = False) -> Any:
        """Log marginal likelihood of the centered training targets.

        Parameters
        ----------
        theta : array-like, default=None
            Log hyperparameters ``(ln l_1, ..., ln l_k, ln kernel_variance,
            ln noise_variance)`` (``k`` = 1, or ``n_features_in_`` with
            ``ard=True``); ``None``: the fitted ones.
        eval_gradient : bool, default=False
            Also return the gradient with respect to ``theta``.

        Returns
        -------
        lml : float
        grad : ndarray of shape (len(theta),)
            Only with ``eval_gradient=True``.
        """
        check_is_fitted(self)
        if theta is None:
            theta = np.concatenate(
                [
                    np.log(np.atleast_1d(self.length_scale_)),
                    [np.log(self.kernel_variance_), np.log(self.noise_variance_)],
                ]
            )
        theta = np.asarray(theta, dtype=np.float64).ravel()
        k = theta.size - 2
        if k not in (1, self.n_features_in_):
            raise InvalidInputError(
                f"`theta` must have length 3 or {self.n_features_in_ + 2}, got {theta.size}"
            )
        yc = self.y_train_ - self.y_mean_
        lml, grad = _core.exact_gp_lml(
            self.X_train_,
            np.ascontiguousarray(yc),
            [float(v) for v in np.exp(theta[:k])],
            float(np.exp(theta[k])),
            float(np.exp(theta[k + 1])),
            bool(eval_gradient),
            kernel=self.kernel,
        )
        return (lml, grad) if eval_gradient else lml


class SufficientStatistics:
    """Sufficient statistics of a feature-space GP fit (ALGORITHMS.md 7.2).

    ``Phi^T Phi``, ``Phi^T y``, the feature column sums and the target sums
    (kept relative to a shift, so the target mean can be subtracted at the
    end). They add up exactly over row chunks, so statistics computed on
    different chunks, processes or machines (with the same fitted feature
    map) :meth:`merge` into those of the concatenated data.

    Parameters
    ----------
    n_features : int
        Number of features ``D`` of the feature map.

    Examples
    --------
    >>> import numpy as np
    >>> from randfeat_rs import SufficientStatistics
    >>> rng = np.random.default_rng(0)
    >>> phi, y = rng.standard_normal((10, 3)), rng.standard_normal(10)
    >>> a = SufficientStatistics(3).accumulate(phi[:4], y[:4])
    >>> b = SufficientStatistics(3).accumulate(phi[4:], y[4:])
    >>> bool(np.allclose(a.merge(b).gram, phi.T @ phi))
    True
    """

    def __init__(self, n_features: int) -> None:
        if isinstance(n_features, bool) or not isinstance(n_features, (int, np.integer)):
            raise InvalidInputError(f"`n_features` must be an integer >= 1, got {n_features!r}")
        if n_features < 1:
            raise InvalidInputError(f"`n_features` must be >= 1, got {n_features}")
        self._stats = _core.FeatureStats(int(n_features))

    @classmethod
    def from_features(
        cls, features: Any, X: Any, y: Any, *, chunk_size: int = 2048
    ) -> SufficientStatistics:
        """Statistics of ``features.transform(X)`` and ``y``, over row chunks.

        Parameters
        ----------
        features : fitted transformer
            Any fitted transformer with a dense float output.
        X : array-like of shape (n_samples, n_features_in)
        y : array-like of shape (n_samples,)
        chunk_size : int, default=2048
            Rows transformed at a time.
        """
        X = np.asarray(X)
        y = _as_targets(y, X.shape[0])
        stats: Optional[SufficientStatistics] = None
        for lo in range(0, X.shape[0], chunk_size):
            phi = _features_chunk(features, X[lo : lo + chunk_size])
            if stats is None:
                stats = cls(phi.shape[1])
            stats.accumulate(phi, y[lo : lo + chunk_size])
        if stats is None:
            raise InvalidInputError("`X` needs at least one row")
        return stats

    def accumulate(self, phi: Any, y: Any) -> SufficientStatistics:
        """Add a chunk: features ``phi`` of shape (n, D) and targets ``y`` of shape (n,).

        Returns
        -------
        self : SufficientStatistics
        """
        phi = np.asarray(phi)
        if phi.ndim != 2:
            raise InvalidInputError(f"`phi` must be 2-D, got {phi.ndim}-D")
        if phi.dtype not in (np.float32, np.float64):
            phi = phi.astype(np.float64)
        phi = np.ascontiguousarray(phi)
        y = _as_targets(y, phi.shape[0])
        self._stats.accumulate(phi, y)
        return self

    def merge(self, other: SufficientStatistics) -> SufficientStatistics:
        """Add the statistics of other rows (exact); returns ``self``."""
        if not isinstance(other, SufficientStatistics):
            raise InvalidInputError(
                f"`other` must be a SufficientStatistics, got {type(other).__name__}"
            )
        if other is self:
            other = other.copy()
        self._stats.merge(other._stats)
        return self

    def copy(self) -> SufficientStatistics:
        """An independent copy."""
        new = SufficientStatistics.__new__(SufficientStatistics)
        new.__setstate__(self.__getstate__())
        return new

    @property
    def n_features(self) -> int:
        """Number of features ``D``."""
        return int(self._stats.n_features)

    @property
    def n_samples(self) -> int:
        """Number of rows accumulated."""
        return int(self._stats.n)

    @property
    def gram(self) -> np.ndarray:
        """``Phi^T Phi``, shape (D, D) (a full symmetric copy)."""
        return self._stats.gram

    @property
    def phi_sum(self) -> np.ndarray:
        """``Phi^T 1``, the feature column sums, shape (D,) (a copy)."""
        return self._stats.phi_sum

    @property
    def phi_y(self) -> np.ndarray:
        """``Phi^T y`` (uncentered), shape (D,)."""
        return self._stats.phi_y + self._stats.y_shift * self._stats.phi_sum

    @property
    def y_mean(self) -> float:
        """Mean of the accumulated targets (0 when empty)."""
        n = self._stats.n
        return float(self._stats.y_shift + self._stats.y_sum / n) if n else 0.0

    def __getstate__(self) -> dict:
        s = self._stats
        return {
            "gram": s.gram,
            "phi_y": s.phi_y,
            "phi_sum": s.phi_sum,
            "n": s.n,
            "y_shift": s.y_shift,
            "y_sum": s.y_sum,
            "y_sq_sum": s.y_sq_sum,
        }

    def __setstate__(self, state: dict) -> None:
        self._stats = _core.FeatureStats.from_arrays(
            np.ascontiguousarray(state["gram"], dtype=np.float64),
            np.ascontiguousarray(state["phi_y"], dtype=np.float64),
            np.ascontiguousarray(state["phi_sum"], dtype=np.float64),
            int(state["n"]),
            float(state["y_shift"]),
            float(state["y_sum"]),
            float(state["y_sq_sum"]),
        )

    def __repr__(self) -> str:
        return f"SufficientStatistics(n_features={self.n_features}, n_samples={self.n_samples})"


def _as_targets(y: Any, n: int) -> np.ndarray:
    y = np.asarray(y, dtype=np.float64)
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.ndim != 1:
        raise InvalidInputError(f"`y` must be 1-D, got shape {y.shape}")
    if y.shape[0] != n:
        raise InvalidInputError(
            f"`y` has {y.shape[0]} values but the features have {n} rows; they must match"
        )
    return np.ascontiguousarray(y)


def _features_chunk(features: Any, X: np.ndarray) -> np.ndarray:
    """``features.transform(X)`` as a C-contiguous float32/float64 array."""
    phi = features.transform(X)
    if hasattr(phi, "toarray"):
        phi = phi.toarray()
    phi = np.asarray(phi)
    if phi.dtype not in (np.float32, np.float64):
        phi = phi.astype(np.float64)
    if phi.ndim != 2 or phi.shape[0] != X.shape[0]:
        raise InvalidInputError(
            f"the transformer returned shape {phi.shape} for {X.shape[0]} rows; "
            "expected (n_rows, n_components)"
        )
    return np.ascontiguousarray(phi)


def _kernel_from_features(features: Any) -> tuple[Any, Optional[float]]:
    """The (length_scale, kernel_variance) a fitted transformer approximates, if it says."""
    ls = getattr(features, "length_scale_", getattr(features, "length_scale", None))
    kv = getattr(features, "kernel_variance_", getattr(features, "kernel_variance", None))
    gamma = getattr(features, "_gamma", getattr(features, "gamma", None))
    if ls is None and isinstance(gamma, Real) and gamma > 0:
        # scikit-learn's RBFSampler: exp(-gamma |x - y|^2), l = 1 / sqrt(2 gamma).
        ls = 1.0 / np.sqrt(2.0 * float(gamma))
        kv = 1.0 if kv is None else kv
    if isinstance(ls, Real):
        ls = float(ls)
    return ls, (float(kv) if isinstance(kv, Real) else None)


class RandomFeatureGPR(GaussianPredictionMixin, RegressorMixin, BaseEstimator):
    """Feature-space GP regression over any transformer (ALGORITHMS.md 7.2).

    With a feature map ``Phi`` (kernel ``Phi(x)^T Phi(y)``) the GP costs
    ``O(N D^2 + D^3)``: ``A = Phi^T Phi / noise_variance + I``,
    mean ``phi*^T A^{-1} Phi^T y / noise_variance``, latent variance
    ``phi*^T A^{-1} phi*``. ``fit`` clones ``features``, fits the clone on
    ``X``, then transforms ``X`` ``chunk_size`` rows at a time and adds each
    chunk's ``Phi^T Phi`` and ``Phi^T y`` in Rust (multithreaded GEMM), so
    memory stays ``O(chunk_size D + D^2)``. The statistics
    (:attr:`stats_`) merge exactly: :meth:`partial_fit` adds rows, and
    :meth:`from_stats` builds a model from statistics merged elsewhere.

    Parameters
    ----------
    features : transformer
        Any scikit-learn style transformer with dense float output (e.g.
        this library's feature maps, or ``sklearn.kernel_approximation.RBFSampler``).
        It is cloned and fitted on the training inputs.
    noise_variance : float, default=None
        Observation noise variance. ``None``: 0.1 times the variance of the
        targets of the first fit (the initialization of ALGORITHMS.md 7.1).
    chunk_size : int, default=2048
        Rows transformed and accumulated at a time.
    center_y : bool, default=True
        Subtract the training-target mean (zero prior mean on the rest).
    verbose : bool, default=False
        Print progress (rows accumulated) to ``sys.stderr``.
    device : {"cpu", "gpu", "auto"}, default="cpu"
        Where the statistics are accumulated. ``"gpu"``: when ``features``
        is this library's :class:`~randfeat_rs.RandomFourierFeatures`,
        :class:`~randfeat_rs.PolynomialSketch` or
        :class:`~randfeat_rs.MaclaurinFeatures` (not TensorSketch), the
        features and ``Phi^T Phi``, ``Phi^T y`` are computed on the GPU
        (float32, partial sums reduced in float64 on the host) without
        ``Phi`` leaving the device; a :class:`~randfeat_rs.GpuError` when no
        adapter is usable, :class:`~randfeat_rs.InvalidInputError` for other
        transformers. ``"auto"``: the GPU when a hardware adapter is usable
        and the transformer has a GPU kernel, else the CPU. Predictions use
        the transformer's own ``device``.

    Attributes
    ----------
    device_ : str
        The device the statistics were accumulated on: "cpu" or "gpu".
    features_ : transformer
        The fitted clone of ``features``.
    stats_ : SufficientStatistics
        The accumulated statistics.
    noise_variance_ : float
        The noise variance used.
    length_scale_, kernel_variance_ : float, ndarray or None
        The kernel the transformer approximates, when it says (its
        ``length_scale``/``kernel_variance``, or ``1/sqrt(2 gamma)`` and 1
        for ``RBFSampler``); ``None`` otherwise.
    L_ : ndarray of shape (D, D)
        Lower Cholesky factor of ``A`` (column-major, as the solves read it).
    coef_ : ndarray of shape (D,)
        ``A^{-1} Phi^T (y - y_mean_) / noise_variance``.
    y_mean_ : float
        Target mean added back to predictions (0 with ``center_y=False``).
    log_marginal_likelihood_ : float
        Feature-space log marginal likelihood of the (centered) targets.
    n_features_in_ : int
        Number of input features.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.kernel_approximation import RBFSampler
    >>> from randfeat_rs import RandomFeatureGPR
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-3, 3, (2000, 1))
    >>> y = np.sin(X[:, 0]) + 0.1 * rng.standard_normal(2000)
    >>> features = RBFSampler(gamma=0.5, n_components=200, random_state=0)
    >>> gp = RandomFeatureGPR(features, noise_variance=0.01).fit(X, y)
    >>> mean, std = gp.predict(np.array([[0.5]]), return_std=True)
    >>> bool(abs(mean[0] - np.sin(0.5)) < 0.05)
    True
    """

    _parameter_constraints: dict = {  # noqa: RUF012
        "features": [HasMethods(["fit", "transform"])],
        "noise_variance": [None, Interval(Real, 0, None, closed="neither")],
        "chunk_size": [Interval(Integral, 1, None, closed="left")],
        "center_y": ["boolean"],
        "verbose": ["verbose"],
        "device": [StrOptions(set(DEVICES))],
    }

    def __init__(
        self,
        features: Any,
        *,
        noise_variance: Optional[float] = None,
        chunk_size: int = 2048,
        center_y: bool = True,
        verbose: bool = False,
        device: str = "cpu",
    ) -> None:
        self.features = features
        self.noise_variance = noise_variance
        self.chunk_size = chunk_size
        self.center_y = center_y
        self.verbose = verbose
        self.device = device

    def _feature_map(self) -> Any:
        """The fitted transformer as a ``_core.FeatureMap``, or None when it is
        not one of this library's dense maps."""
        f = self.features_
        return f._feature_map() if isinstance(f, RandomFeaturesBase) else None

    def _resolve_device(self) -> None:
        fmap = self._feature_map()
        if fmap is None:
            self.device_ = _fitted_device(
                self.device,
                "the transformer must be randfeat_rs.RandomFourierFeatures, PolynomialSketch "
                f"or MaclaurinFeatures, got {type(self.features_).__name__}",
            )
        else:  # the map says which of its configurations have a GPU kernel
            self.device_ = fmap.resolve_device(self.device)

    def _accumulate_gpu(self, X: np.ndarray, y: np.ndarray) -> None:
        # Rust computes Phi^T [y - s, 1] on the device (Phi stays there) and
        # merges the shifted statistics exactly.
        fmap = self._feature_map()
        if getattr(self, "stats_", None) is None:
            self.stats_ = SufficientStatistics(fmap.n_components)
        fmap.accumulate(self.stats_._stats, X, y, "gpu", int(self.chunk_size))
        if self.verbose:
            ProgressPrinter(type(self).__name__).message(
                f"{X.shape[0]} rows accumulated on the GPU ({self.stats_.n_samples} in total)"
            )

    def _validate_xy(self, X: Any, y: Any, reset: bool) -> tuple[np.ndarray, np.ndarray]:
        X, y = validate_data(
            self, X, y, reset=reset, dtype=[np.float64, np.float32], order="C", y_numeric=True
        )
        return X, np.ascontiguousarray(y, dtype=np.float64)

    def _accumulate(self, X: np.ndarray, y: np.ndarray) -> None:
        if getattr(self, "device_", "cpu") == "gpu" and X.shape[0] > 0:
            self._accumulate_gpu(X, y)
            return
        n = X.shape[0]
        step = int(self.chunk_size)
        with progress_printer(type(self).__name__, bool(self.verbose)) as progress:
            for lo in range(0, n, step):
                phi = _features_chunk(self.features_, X[lo : lo + step])
                if getattr(self, "stats_", None) is None:
                    self.stats_ = SufficientStatistics(phi.shape[1])
                self.stats_.accumulate(phi, y[lo : lo + step])
                if progress is not None:
                    progress("rows accumulated", min(lo + step, n), n, [])

    def _solve(self) -> None:
        if self.noise_variance_ is None:
            raise InvalidInputError("noise_variance could not be initialized")
        chol, coef, y_mean, lml = self.stats_._stats.fit(self.noise_variance_, bool(self.center_y))
        self.L_ = chol
        self.coef_ = coef
        self.y_mean_ = float(y_mean)
        self.log_marginal_likelihood_ = float(lml)
        self.length_scale_, self.kernel_variance_ = _kernel_from_features(self.features_)

    def _init_noise(self, y: np.ndarray) -> None:
        if self.noise_variance is not None:
            self.noise_variance_ = float(self.noise_variance)
        else:
            var = float(np.var(y)) if y.size > 1 else 0.0
            self.noise_variance_ = 0.1 * var if var > 0 else 0.1

    def fit(self, X: Any, y: Any) -> RandomFeatureGPR:
        """Fit the transformer clone on ``X``, accumulate the statistics, solve.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training inputs (float32 is kept as float32 for the transformer).
        y : array-like of shape (n_samples,)
            Training targets.

        Returns
        -------
        self : RandomFeatureGPR
            The fitted estimator.
        """
        self._validate_params()
        X, y = self._validate_xy(X, y, reset=True)
        self.features_ = clone(self.features).fit(X)
        self._resolve_device()
        self.stats_ = None
        self._init_noise(y)
        self._accumulate(X, y)
        self._solve()
        return self

    def partial_fit(self, X: Any, y: Any) -> RandomFeatureGPR:
        """Add rows to the fit (the first call also fits the transformer clone).

        The statistics of all rows seen so far are kept, so the model after
        several calls equals one fit on the concatenated rows (with the
        transformer fitted on the first batch, and, when ``noise_variance``
        is None, the noise initialized from the first batch).

        Returns
        -------
        self : RandomFeatureGPR
        """
        first = not hasattr(self, "features_")
        if first:
            self._validate_params()
        X, y = self._validate_xy(X, y, reset=first)
        if first:
            self.features_ = clone(self.features).fit(X)
            self._resolve_device()
            self.stats_ = None
            self._init_noise(y)
        self._accumulate(X, y)
        self._solve()
        return self

    @classmethod
    def from_stats(
        cls,
        features: Any,
        stats: SufficientStatistics,
        *,
        noise_variance: float,
        n_features_in: Optional[int] = None,
        center_y: bool = True,
        chunk_size: int = 2048,
    ) -> RandomFeatureGPR:
        """A fitted model from an already fitted transformer and its statistics.

        Parameters
        ----------
        features : fitted transformer
            The feature map the statistics were computed with (used as is).
        stats : SufficientStatistics
            E.g. statistics merged from several machines.
        noise_variance : float
            Observation noise variance.
        n_features_in : int, default=None
            Number of input features; ``None``: ``features.n_features_in_``.

        Returns
        -------
        RandomFeatureGPR
            A fitted estimator (``features`` is its ``features_``).
        """
        if not isinstance(stats, SufficientStatistics):
            raise InvalidInputError(
                f"`stats` must be a SufficientStatistics, got {type(stats).__name__}"
            )
        check_is_fitted(features)
        model = cls(
            features, noise_variance=noise_variance, center_y=center_y, chunk_size=chunk_size
        )
        model._validate_params()
        model.features_ = features
        model.stats_ = stats.copy()
        model.noise_variance_ = float(noise_variance)
        n_in = n_features_in if n_features_in is not None else features.n_features_in_
        model.n_features_in_ = int(n_in)
        model._solve()
        return model

    def _predict(self, X: Any, return_var: bool) -> tuple[np.ndarray, Optional[np.ndarray]]:
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=[np.float64, np.float32], order="C")
        means, variances = [], []
        step = int(self.chunk_size)
        for lo in range(0, X.shape[0], step):
            phi = _features_chunk(self.features_, X[lo : lo + step])
            m, v = _core.feature_gp_predict(self.L_, self.coef_, self.y_mean_, phi, return_var)
            means.append(m)
            variances.append(v)
        if not means:
            return np.zeros(0), (np.zeros(0) if return_var else None)
        mean = np.concatenate(means)
        return mean, (np.concatenate(variances) if return_var else None)

    def __sklearn_tags__(self):  # type: ignore[no-untyped-def]
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = False
        return tags
