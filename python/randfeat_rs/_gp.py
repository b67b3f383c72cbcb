"""Gaussian-process regressors (docs/math/gp.rst).

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

import copy
from numbers import Integral, Real
from typing import Any, Callable, Optional

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin, _fit_context, clone
from sklearn.utils._param_validation import HasMethods, StrOptions
from sklearn.utils.validation import check_is_fitted

from . import _core
from ._base import DenseFeaturesBase, DeviceMixin, RandomStateMixin, keep_state_on_failure
from ._fourier import KERNELS, RandomFourierFeatures
from ._maclaurin import MaclaurinFeatures
from ._progress import ProgressPrinter, progress_printer
from ._validation import (
    MAX_COUNT,
    Count,
    RealNumber,
    fitted_length_scale,
    float_array,
    length_scale_values,
    real_array,
    regression_targets,
    validate_numeric_data,
)
from .exceptions import InvalidInputError

__all__ = ["ExactGPR", "RandomFeatureGPR", "SufficientStatistics"]

_HYPERPARAMETERS = ("length_scale", "kernel_variance", "noise_variance")


class GaussianPredictionMixin:
    """``predict`` and ``predict_noisy`` of the GP regressors.

    A regressor supplies ``_predict(X, std) -> (mean, std or None)``, whose
    handle computes the standard deviation in Rust: of the latent function
    for ``std="latent"``, of a noisy observation for ``std="noisy"``.
    """

    def _predict(self, X: Any, std: Optional[str]) -> tuple[np.ndarray, Any]:
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
        mean, std = self._predict(X, "latent" if return_std else None)
        return (mean, std) if return_std else mean

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
        return self._predict(X, "noisy")


class GpHandleMixin:
    """The fitted attributes of the regressors whose ``fit`` leaves a GP
    handle of the compiled core (``_core.ExactGp``, ``_core.FeatureGp`` or
    ``_core.SparseGp``) in ``_gp``: each reads the handle.
    """

    _gp: Any

    def _fitted_gp(self) -> Any:
        """The fitted GP handle (an ``AttributeError`` before ``fit``)."""
        if "_gp" not in self.__dict__:
            raise AttributeError("the GP is not fitted")
        return self._gp

    @property
    def y_mean_(self) -> float:
        """Training-target mean added back to predictions."""
        return float(self._fitted_gp().y_mean)

    @property
    def log_marginal_likelihood_(self) -> float:
        """Log marginal likelihood of the (centered) training targets (for
        ``SparseGPR(method="vfe")`` its lower bound)."""
        return float(self._fitted_gp().log_marginal_likelihood_value)


class FittedGpMixin(GpHandleMixin):
    """:class:`GpHandleMixin` with the factor of the fitted system: assigning
    ``L_`` replaces the handle's factor (checked in Rust). The class
    docstrings say what the factor factorizes.
    """

    @property
    def L_(self) -> np.ndarray:
        """Lower Cholesky factor of the fitted system, column-major."""
        return self._fitted_gp().chol

    @L_.setter
    def L_(self, value: Any) -> None:
        self._gp = self._fitted_gp().with_factor(real_array(value, "L_", ndims=(2,)))


class KernelHyperparametersMixin(GpHandleMixin):
    """The fitted hyperparameters of a stationary-kernel GP handle
    (``_core.ExactGp``, ``_core.SparseGp``) and the optimizer's iterations;
    the estimator has an ``ard`` parameter.
    """

    ard: bool

    @property
    def length_scale_(self) -> Any:
        """Fitted length scale (an array of one per feature with ``ard=True``
        or fixed per-feature values)."""
        return fitted_length_scale(self._fitted_gp().length_scale, self.ard)

    @property
    def kernel_variance_(self) -> float:
        """Fitted kernel variance."""
        return float(self._fitted_gp().kernel_variance)

    @property
    def noise_variance_(self) -> float:
        """Fitted noise variance."""
        return float(self._fitted_gp().noise_variance)

    @property
    def n_iter_(self) -> int:
        """L-BFGS iterations spent, over all runs."""
        return int(self._fitted_gp().n_iter)


EXACT_GP_CPU_ONLY = (
    "ExactGPR runs on the CPU in float64: its N x N kernel matrix, Cholesky factor and "
    "log marginal likelihood need float64 accuracy that the float32 GPU kernels cannot "
    "give; the approximate models RandomFeatureGPR (with RandomFourierFeatures, "
    "PolynomialSketch or MaclaurinFeatures) and LocalizedMaclaurinGPR run on the GPU"
)


class ExactGPR(
    GaussianPredictionMixin,
    FittedGpMixin,
    KernelHyperparametersMixin,
    RandomStateMixin,
    DeviceMixin,
    RegressorMixin,
    BaseEstimator,
):
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
    Rust), from the initialization of docs/math/gp.rst, "Exact GP", and ``n_restarts``
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
        median pairwise distance of (a subsample of) the training inputs;
        with ``ard=True``, per column that distance for the columns divided
        by their standard deviations, times the column's standard deviation
        (so a column in other units starts on its own scale).
    kernel_variance : float, default=None
        Fixed or initial kernel variance. ``None``: the variance of ``y``
        (1 when all targets are equal).
    noise_variance : float, default=None
        Fixed or initial noise variance. ``None``: 0.1 times the variance
        of ``y`` (0.1 when all targets are equal; the rule of every GP
        regressor here).
    ard : bool, default=False
        One fitted length scale per input dimension. Fixed length scales
        (``optimize`` without ``"length_scale"``) may be one per dimension
        either way.
    optimize : tuple of str, default=("length_scale", "kernel_variance", "noise_variance")
        The hyperparameters fitted by maximizing the log marginal
        likelihood; an empty tuple fits none. Each may move by at most a
        factor ``e^40`` from its initialization (on the data's scale, so
        the fit follows the units of ``X`` and ``y``): a maximum beyond
        that ends the fit at the edge of the range. Given initial values
        are compared with the defaults (the data's scale): the fit starts
        from them, or from the same with the free length scales, the free
        variances or both at the defaults, whichever has the highest log
        marginal likelihood on the coarsest row subset. A fit raises
        :class:`~randfeat_rs.InvalidInputError` for targets that are
        constant after centering (all equal; all zero with
        ``center_y=False``), whose likelihood has no maximum, and for
        targets of variance outside ``1e-40..1e40`` (rescale them). Rows
        repeated with equal targets have no maximum either (the LML grows
        without bound as the length scale and the noise variance shrink):
        remove or average exact duplicates, or fix ``noise_variance``.
        The fit evaluates the LML only where float64 holds it to about
        ``1e-6`` nats per row: targets without noise, whose LML grows as
        the noise variance shrinks, end the fit where ``K_y`` becomes too
        ill-conditioned for that (a noise variance near ``1e-10`` times
        the kernel variance), and a fixed ``noise_variance`` below about
        ``1e-9`` times the kernel variance may leave no such point (an
        :class:`~randfeat_rs.InvalidInputError` naming it).
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
    seed_ : int
        The 64-bit seed drawn from ``random_state`` at ``fit`` (the restart
        draws).
    length_scale_ : float or ndarray of shape (n_features,)
        Fitted length scale(s) (an array with ``ard=True`` or fixed
        per-dimension values).
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
        the factorization needed it), column-major. Assigning a factor
        replaces the one predictions use (checked: square, with a positive
        finite diagonal).
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
        "length_scale": [None, RealNumber(0, None, closed="neither"), "array-like"],
        "kernel_variance": [None, RealNumber(0, None, closed="neither")],
        "noise_variance": [None, RealNumber(0, None, closed="neither")],
        "ard": ["boolean"],
        "optimize": [tuple, list],
        "n_restarts": [Count(0, MAX_COUNT)],
        "max_iter": [Count(1, MAX_COUNT)],
        "random_state": ["random_state"],
        "center_y": ["boolean"],
        "verbose": ["verbose"],
        "device": DeviceMixin._device_constraint,
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

    @keep_state_on_failure
    @_fit_context(prefer_skip_nested_validation=True)
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
        self._resolve_device(unsupported=EXACT_GP_CPU_ONLY)
        X, y = validate_numeric_data(self, X, y, dtype=np.float64, order="C", y_numeric=True)
        y = regression_targets(y)
        ls = None if self.length_scale is None else length_scale_values(self.length_scale)
        with progress_printer(type(self).__name__, bool(self.verbose)) as progress:
            self._gp = _core.ExactGp.fit(
                X,
                y,
                length_scale=ls,
                kernel_variance=self.kernel_variance,
                noise_variance=self.noise_variance,
                ard=bool(self.ard),
                optimize=[str(n) for n in self.optimize],
                n_restarts=int(self.n_restarts),
                max_iter=int(self.max_iter),
                center_y=bool(self.center_y),
                seed=self._fit_seed(),
                kernel=self.kernel,
                progress=progress,
            )
        return self

    @property
    def alpha_(self) -> np.ndarray:
        """``(K + noise_variance I)^{-1} (y - y_mean_)``."""
        return self._fitted_gp().alpha

    @property
    def X_train_(self) -> np.ndarray:
        """Training inputs."""
        return self._fitted_gp().x_train

    @property
    def y_train_(self) -> np.ndarray:
        """Training targets."""
        return self._fitted_gp().y_train

    def _predict(self, X: Any, std: Optional[str]) -> tuple[np.ndarray, Any]:
        check_is_fitted(self)
        X = validate_numeric_data(self, X, reset=False, dtype=np.float64, order="C")
        return self._gp.predict(X, std=std)

    def log_marginal_likelihood(self, theta: Any = None, eval_gradient: bool = False) -> Any:
        """Log marginal likelihood of the centered training targets.

        Parameters
        ----------
        theta : array-like, default=None
            Log hyperparameters ``(ln l_1, ..., ln l_k, ln kernel_variance,
            ln noise_variance)`` (``k`` = 1, or ``n_features_in_`` with
            ``ard=True`` or fixed per-feature length scales); ``None``: the
            fitted ones.
        eval_gradient : bool, default=False
            Also return the gradient with respect to ``theta``.

        Returns
        -------
        lml : float
        grad : ndarray of shape (len(theta),)
            Only with ``eval_gradient=True``.
        """
        check_is_fitted(self)
        if theta is not None:
            theta = real_array(theta, "theta", ndims=(0, 1)).ravel().tolist()
        lml, grad = self._gp.log_marginal_likelihood(theta, bool(eval_gradient))
        return (lml, grad) if eval_gradient else lml


class SufficientStatistics:
    """Sufficient statistics of a feature-space GP fit (docs/math/gp.rst, "Feature-space GP").

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
        if (
            isinstance(n_features, (bool, np.bool_))
            or not isinstance(n_features, Integral)
            or n_features < 1
        ):
            raise InvalidInputError(f"`n_features` must be an integer >= 1, got {n_features!r}")
        if n_features >= 2**63:
            raise InvalidInputError(
                f"`n_features` = {n_features} is beyond any memory: its Gram matrix has "
                "n_features^2 entries"
            )
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

        Returns
        -------
        SufficientStatistics
        """
        if not Count(1, MAX_COUNT).is_satisfied_by(chunk_size):
            raise InvalidInputError(f"`chunk_size` must be an integer >= 1, got {chunk_size!r}")
        X = np.asarray(X)
        y = _as_targets(y, X.shape[0])
        stats: Optional[SufficientStatistics] = None
        for lo in range(0, X.shape[0], chunk_size):
            phi = _features_chunk(features, X[lo : lo + chunk_size])
            if stats is None:
                stats = cls._for_map(phi.shape[1])
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
        phi = _feature_block(phi, "phi")
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

    @classmethod
    def _for_map(cls, n_components: int) -> SufficientStatistics:
        """Empty statistics for a feature map's ``n_components`` features (a
        width too large for memory is refused naming ``n_components``)."""
        return cls._wrap(_core.FeatureStats.for_map(int(n_components)))

    @classmethod
    def _wrap(cls, stats: Any) -> SufficientStatistics:
        """Statistics around a ``_core.FeatureStats`` (not copied)."""
        new = cls.__new__(cls)
        new._stats = stats
        return new

    def copy(self) -> SufficientStatistics:
        """An independent copy."""
        new = SufficientStatistics.__new__(SufficientStatistics)
        new._stats = self._stats.copy()
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
        return self._stats.phi_y

    @property
    def y_shift(self) -> float:
        """The shift ``s`` the target sums are kept relative to (the first
        chunk's target mean; merging re-shifts exactly)."""
        return float(self._stats.y_shift)

    @property
    def phi_y_shifted(self) -> np.ndarray:
        """``Phi^T (y - y_shift)``, shape (D,): the form the statistics keep
        (``phi_y`` adds ``y_shift * phi_sum`` back)."""
        return self._stats.phi_y_shifted

    @property
    def y_mean(self) -> float:
        """Mean of the accumulated targets (0 when empty)."""
        return float(self._stats.y_mean)

    def __repr__(self) -> str:
        return f"SufficientStatistics(n_features={self.n_features}, n_samples={self.n_samples})"


def _as_targets(y: Any, n: int) -> np.ndarray:
    y = real_array(y, "y")
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
    if phi.ndim != 2 or phi.shape[0] != X.shape[0]:
        raise InvalidInputError(
            f"the transformer returned shape {phi.shape} for {X.shape[0]} rows; "
            "expected (n_rows, n_components)"
        )
    return _feature_block(phi, "the transformer's output")


def _feature_block(phi: Any, name: str) -> np.ndarray:
    """``phi`` as a C-contiguous 2-D float32/float64 array: float32 and
    float64 kept, integers converted to float64, any other dtype (complex
    included, which would lose its imaginary part) refused."""
    phi = np.asarray(phi)
    if phi.dtype in (np.float32, np.float64):
        return np.ascontiguousarray(float_array(phi, name, (2,)))
    return real_array(phi, name, (2,))


def _optimize_names(optimize: Any) -> list[str]:
    """The hyperparameter names of an ``optimize`` parameter, checked."""
    names = [str(n) for n in optimize]
    for n in names:
        if n not in _HYPERPARAMETERS:
            raise InvalidInputError(
                f"`optimize` contains {n!r}; expected a subset of {list(_HYPERPARAMETERS)}"
            )
    return names


def _at_hyperparameters(
    features: Any, length_scale: Any, kernel_variance: float, feature_map: Any
) -> Any:
    """A copy of a fitted RandomFourierFeatures or MaclaurinFeatures holding
    ``feature_map``, the ``_core.FeatureMap`` Rust formed at other kernel
    hyperparameters with the random draw kept (the Fourier frequencies
    rescaled, the structured sampler keeping its signs; the Maclaurin map
    rebuilt from its allocation, center and seed at the new settings)."""
    new = copy.copy(features)
    new.length_scale = length_scale
    new.kernel_variance = kernel_variance
    new._set_map(feature_map)
    return new


#: A marginal-likelihood fit whose length scale ends more than this factor
#: from the one a MaclaurinFeatures map was fitted at is run again with the
#: map refitted there: the map's allocation (its truncation degree and
#: features per degree) is chosen for the size of the inputs at its own
#: length scale and stays fixed during a fit, so it can be far from right
#: at the optimum.
MACLAURIN_REFIT_FACTOR = 10.0

#: The most refits of a MaclaurinFeatures map in one marginal-likelihood fit.
MACLAURIN_MAX_REFITS = 2


def fit_with_maclaurin_refits(
    features: Any,
    fit_at: Callable[[Any], tuple],
    refit: Callable[[Any, float], Any],
    center: bool,
    progress: Optional[ProgressPrinter],
) -> tuple[Any, tuple]:
    """A marginal-likelihood fit that refits a MaclaurinFeatures map.

    ``fit_at(f)`` fits the hyperparameters of the fitted transformer ``f``
    (what ``_core.feature_gp_optimize`` returns); the rest as
    :func:`maclaurin_refits`. Returns the transformer of the kept fit and
    that fit, its ``n_iter`` summed over all fits.
    """
    features, fitted, n_iter = maclaurin_refits(
        features,
        fit_at,
        refit,
        progress,
        length_scale=lambda fitted: float(fitted[0][0]),
        lml=lambda fitted: _fitted_lml(fitted, center),
        n_iter=lambda fitted: int(fitted[5]),
    )
    return features, (*fitted[:5], n_iter)


def maclaurin_refits(
    features: Any,
    fit_at: Callable[[Any], Any],
    refit: Callable[[Any, float], Any],
    progress: Optional[ProgressPrinter],
    *,
    length_scale: Callable[[Any], float],
    lml: Callable[[Any], float],
    n_iter: Callable[[Any], int],
) -> tuple[Any, Any, int]:
    """``fit_at(features)``, with a MaclaurinFeatures map refitted where the
    fitted length scale ends far from its own.

    For MaclaurinFeatures, while the fitted length scale
    (``length_scale(fitted)``) lies more than
    :data:`MACLAURIN_REFIT_FACTOR` from ``f.length_scale`` (at most
    :data:`MACLAURIN_MAX_REFITS` times), ``refit(f, l)`` fits the map again
    at that length scale ``l`` and ``fit_at`` runs on it; its result is kept
    when its log marginal likelihood (``lml(fitted)``) is higher. Returns
    the transformer of the kept fit, that fit, and the iterations
    (``n_iter(fitted)``) of all fits.
    """
    fitted = fit_at(features)
    total = n_iter(fitted)
    if isinstance(features, MaclaurinFeatures):
        for _ in range(MACLAURIN_MAX_REFITS):
            at = length_scale(fitted)
            if abs(np.log(at / float(features.length_scale))) <= np.log(MACLAURIN_REFIT_FACTOR):
                break
            if progress is not None:
                progress.message(
                    f"refitting the Maclaurin map at length scale {at:.6e} "
                    f"(fitted at {float(features.length_scale):.6e})"
                )
            other = refit(features, at)
            again = fit_at(other)
            total += n_iter(again)
            if lml(again) <= lml(fitted):
                break
            features, fitted = other, again
    return features, fitted, total


def _fitted_lml(fitted: tuple, center: bool) -> float:
    """The log marginal likelihood of a fit ``_core.feature_gp_optimize``
    returns: its statistics solved at its noise variance."""
    return float(
        fitted[4].fit(noise_variance=fitted[2], center_y=center).log_marginal_likelihood_value
    )


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
    elif isinstance(ls, (list, tuple, np.ndarray)):
        # Per-dimension length scales (RandomFourierFeatures).
        ls = np.array(ls, dtype=np.float64)
    return ls, (float(kv) if isinstance(kv, Real) else None)


def seeded_clone(features: Any, random_state: Any, seed: Callable[[], int]) -> Any:
    """An unfitted clone of a random-feature estimator's transformer.

    When the transformer has a ``random_state`` parameter left at ``None``
    and the estimator's ``random_state`` is not ``None``, the clone gets
    ``seed() % 2**32`` as its ``random_state``, so the estimator's
    ``random_state`` fixes the transformer's draw too.

    Parameters
    ----------
    features : transformer
        The estimator's ``features`` parameter.
    random_state : int, RandomState instance or None
        The estimator's ``random_state`` parameter.
    seed : callable
        Returns the estimator's 64-bit ``seed_`` (called only when needed).

    Returns
    -------
    transformer
        The clone.
    """
    features = clone(features)
    params = features.get_params(deep=False)
    if random_state is not None and "random_state" in params and params["random_state"] is None:
        features.set_params(random_state=seed() % (1 << 32))
    return features


class RandomFeatureGPR(
    GaussianPredictionMixin,
    FittedGpMixin,
    RandomStateMixin,
    DeviceMixin,
    RegressorMixin,
    BaseEstimator,
):
    """Feature-space GP regression over any transformer (docs/math/gp.rst, "Feature-space GP").

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
    features : transformer or None, default=None
        Any scikit-learn style transformer with dense float output (e.g.
        this library's feature maps, or ``sklearn.kernel_approximation.RBFSampler``).
        It is cloned and fitted on the training inputs; when it has a
        ``random_state`` parameter left at ``None`` and ``random_state``
        below is not ``None``, the clone gets ``seed_ % 2**32`` as its
        ``random_state``, so the outer ``random_state`` fixes the whole fit.
        ``None``: ``RandomFourierFeatures(length_scale=l)`` (Gaussian kernel,
        100 features) with the length scale of scikit-learn's
        ``gamma="scale"``, ``l = sqrt(n_features * X.var() / 2)`` (1 for
        constant ``X``), which suits standardized inputs, and the
        ``random_state`` ``seed_ % 2**32``.
    noise_variance : float, default=None
        Observation noise variance. ``None``: 0.1 times the variance of the
        targets of the first fit (the initialization of docs/math/gp.rst, section Exact GP;
        0.1 when they are all equal), as :class:`ExactGPR`.
    chunk_size : int, default=2048
        Rows transformed and accumulated at a time.
    center_y : bool, default=True
        Subtract the training-target mean (zero prior mean on the rest).
    optimize : tuple of str or None, default=None
        Hyperparameters (a subset of ``("length_scale", "kernel_variance",
        "noise_variance")``) that :meth:`fit` sets by maximizing the
        feature-space log marginal likelihood (see docs/math/gp.rst,
        feature-space GP), in Rust, every evaluation streamed over
        ``chunk_size`` rows (``O(N D^2)`` time, ``O(D^2 + chunk_size D)``
        memory). With one length scale the kernel and noise variances are
        profiled out (maximized exactly at each length scale from the
        eigenvalues of ``Phi^T Phi``) and the length scale is searched by
        parabolic interpolation, coarse to fine, one pass over the rows per
        length scale tried; with ``ard=True``, L-BFGS with analytic
        gradients as in :class:`ExactGPR`. Both restart ``n_restarts``
        times. The random draw of the fitted
        transformer stays fixed: the frequencies of
        :class:`~randfeat_rs.RandomFourierFeatures` are rescaled by the
        length scale, the inputs of :class:`~randfeat_rs.MaclaurinFeatures`
        are (its allocation and sketches stay). The fit starts from the
        transformer's ``length_scale`` and ``kernel_variance`` and from
        ``noise_variance`` (with ``ard=True`` the free variances start at
        their maximum at the start length scales, on the targets' scale);
        the others stay fixed. A free length scale starts instead from the
        median pairwise distance of the inputs (:class:`ExactGPR`'s start)
        when the LML, maximized over the free variances on the coarsest
        subsample, is higher there: a transformer at its default
        ``length_scale=1`` on inputs in thousands would start where its
        features are noise to the targets, and stop there. A
        MaclaurinFeatures map whose fitted length scale ends more than a
        factor 10 from its own is fitted again there (its allocation is
        chosen for the inputs' size at its length scale) and the fit runs
        again from it, at most twice, keeping the fit of the higher LML.
        Each may move by at most a factor ``e^40``
        from its start, except that with one length scale and both
        variances free the kernel variance follows the noise variance's
        (which may) times a ratio within ``e^-80..e^80`` (its start does
        not enter); constant targets and targets of variance outside
        ``1e-40..1e40`` are refused as in :class:`ExactGPR`. Other
        transformers raise
        :class:`~randfeat_rs.InvalidInputError`. ``None`` or an empty
        tuple: no fit, the transformer's kernel as given (any transformer).
        The fit runs on the CPU in float64; :meth:`partial_fit` adds rows at
        the fitted hyperparameters.
    ard : bool, default=False
        With ``optimize`` naming ``"length_scale"`` and
        :class:`~randfeat_rs.RandomFourierFeatures`: one length scale per
        input dimension (automatic relevance determination), each starting
        from the start length scale above; the frequencies are
        rescaled per dimension, ``W_ja l0 / l_a`` (``l0`` the transformer's
        ``length_scale``, one value or one per dimension, which is also
        where each starts). :attr:`length_scale_` is
        then an array of shape (n_features,) and so is the ``length_scale``
        of ``features_`` (a clone of it refitted draws the same map).
        Other settings raise :class:`~randfeat_rs.InvalidInputError`. A
        transformer with per-dimension length scales and ``ard=False`` keeps
        them when ``optimize`` leaves the length scale out, and raises
        :class:`~randfeat_rs.InvalidInputError` when it names it.
    n_restarts : int, default=2
        Random restarts of the optimizer after the run from the
        initialization (within a factor 10 of it), as in :class:`ExactGPR`.
    random_state : int, RandomState instance or None, default=None
        Seed of the restart draws and, through ``seed_``, of the transformer
        (see ``features``).
    verbose : bool, default=False
        Print progress (rows accumulated, optimizer runs) to ``sys.stderr``.
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
        and the transformer has a GPU kernel, else the CPU. With ``optimize``
        the statistics come from the fit, on the CPU in float64: ``"auto"``
        gives ``device_ = "cpu"`` and ``"gpu"`` raises
        :class:`~randfeat_rs.InvalidInputError`. Predictions use the
        transformer's own ``device``.

    Attributes
    ----------
    device_ : str
        The device the statistics were accumulated on: "cpu" or "gpu".
    features_ : transformer
        The fitted clone of ``features``.
    stats_ : SufficientStatistics
        The accumulated statistics.
    noise_variance_ : float
        The noise variance used (fitted when ``optimize`` names it).
    length_scale_, kernel_variance_ : float, ndarray or None
        The kernel the transformer approximates, when it says (its
        ``length_scale``/``kernel_variance``, or ``1/sqrt(2 gamma)`` and 1
        for ``RBFSampler``); ``None`` otherwise. With ``optimize``, the
        fitted values (``features_`` is the transformer at them);
        ``length_scale_`` has shape (n_features,) with ``ard=True``.
    n_iter_ : int
        Optimizer iterations over all runs (0 without ``optimize``): the
        length scales tried on all levels (one length scale), or L-BFGS
        iterations (``ard=True``).
    seed_ : int
        The 64-bit seed drawn from ``random_state``, when the fit draws one:
        for the transformer's ``random_state`` (see ``features``) and, with
        ``optimize``, for the restart draws (the same seed for both).
    L_ : ndarray of shape (D, D)
        Lower Cholesky factor of ``A`` (column-major, as the solves read it).
        Assigning a factor replaces the one predictions use (checked:
        square, with a positive finite diagonal).
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

    The hyperparameters fitted by the marginal likelihood:

    >>> from randfeat_rs import RandomFourierFeatures
    >>> rff = RandomFourierFeatures(256, random_state=0)
    >>> gp = RandomFeatureGPR(rff, optimize=("length_scale", "kernel_variance",
    ...                                      "noise_variance"), random_state=0).fit(X, y)
    >>> bool(0.005 < gp.noise_variance_ < 0.02)
    True
    """

    _parameter_constraints: dict = {  # noqa: RUF012
        "features": [None, HasMethods(["fit", "transform"])],
        "noise_variance": [None, RealNumber(0, None, closed="neither")],
        "chunk_size": [Count(1, MAX_COUNT)],
        "center_y": ["boolean"],
        "optimize": [None, tuple, list],
        "ard": ["boolean"],
        "n_restarts": [Count(0, MAX_COUNT)],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
        "device": DeviceMixin._device_constraint,
    }

    def __init__(
        self,
        features: Any = None,
        *,
        noise_variance: Optional[float] = None,
        chunk_size: int = 2048,
        center_y: bool = True,
        optimize: Any = None,
        ard: bool = False,
        n_restarts: int = 2,
        random_state: Any = None,
        verbose: bool = False,
        device: str = "cpu",
    ) -> None:
        self.features = features
        self.noise_variance = noise_variance
        self.chunk_size = chunk_size
        self.center_y = center_y
        self.optimize = optimize
        self.ard = ard
        self.n_restarts = n_restarts
        self.random_state = random_state
        self.verbose = verbose
        self.device = device

    def _feature_map(self) -> Any:
        """The fitted transformer's ``_core.FeatureMap``, or None when it is
        not one of this library's dense maps."""
        f = self.features_
        return f._feature_map() if isinstance(f, DenseFeaturesBase) else None

    def _validate_xy(self, X: Any, y: Any, reset: bool) -> tuple[np.ndarray, np.ndarray]:
        X, y = validate_numeric_data(
            self, X, y, reset=reset, dtype=[np.float64, np.float32], order="C", y_numeric=True
        )
        return X, regression_targets(y)

    def _resolve_features_device(self) -> None:
        """``device_`` from the fitted transformer's map (which knows its GPU
        kernels); a transformer of another library has none."""
        fmap = self._feature_map()
        unsupported = (
            None
            if fmap is not None
            else "the transformer must be randfeat_rs.RandomFourierFeatures, PolynomialSketch "
            f"or MaclaurinFeatures, got {type(self.features_).__name__}"
        )
        self._resolve_device(fmap, unsupported)

    def _start(self, X: np.ndarray, y: np.ndarray) -> None:
        """Fit the transformer clone on ``X``, resolve the device, start empty
        statistics and set the noise variance (from ``y`` when None)."""
        self.__dict__.pop("seed_", None)
        self.features_ = self._unfitted_features(lambda: _core.scale_length_scale(X)).fit(X)
        self._resolve_features_device()
        self.stats_ = None
        self.n_iter_ = 0
        if self.noise_variance is None:
            self.noise_variance_ = float(_core.initial_noise_variance(y))
        else:
            self.noise_variance_ = float(self.noise_variance)

    def _unfitted_features(self, default_length_scale: Callable[[], float]) -> Any:
        """The default map (at ``default_length_scale()``, the data's), or a
        clone of ``features``; either gets ``seed_ % 2**32`` (drawn here) as
        its ``random_state`` when it has none and ``random_state`` is not
        None (always for the default map)."""
        if self.features is None:
            return RandomFourierFeatures(
                length_scale=float(default_length_scale()),
                random_state=self._fit_seed() % (1 << 32),
            )
        return seeded_clone(self.features, self.random_state, self._fit_seed)

    def _accumulate(self, X: np.ndarray, y: np.ndarray) -> None:
        fmap = self._feature_map()
        if self.device_ == "gpu" and X.shape[0] > 0:
            # Phi^T [y - s, 1] on the device (Phi stays there), merged in Rust.
            if self.stats_ is None:
                self.stats_ = SufficientStatistics._for_map(fmap.n_components)
            fmap.accumulate(self.stats_._stats, X, y, "gpu", int(self.chunk_size))
            if self.verbose:
                ProgressPrinter(type(self).__name__).message(
                    f"{X.shape[0]} rows accumulated on the GPU ({self.stats_.n_samples} in total)"
                )
            return
        n = X.shape[0]
        step = int(self.chunk_size)
        if self.stats_ is None and fmap is not None:
            # Refuses a width whose D x D statistics cannot be held before
            # any chunk is transformed.
            self.stats_ = SufficientStatistics._for_map(fmap.n_components)
        with progress_printer(type(self).__name__, bool(self.verbose)) as progress:
            for lo in range(0, n, step):
                phi = _features_chunk(self.features_, X[lo : lo + step])
                if self.stats_ is None:
                    self.stats_ = SufficientStatistics._for_map(phi.shape[1])
                self.stats_.accumulate(phi, y[lo : lo + step])
                if progress is not None:
                    progress("rows accumulated", min(lo + step, n), n, [])

    def _solve(self) -> None:
        self._gp = self.stats_._stats.fit(
            noise_variance=self.noise_variance_, center_y=bool(self.center_y)
        )
        self.length_scale_, self.kernel_variance_ = _kernel_from_features(self.features_)

    @property
    def coef_(self) -> np.ndarray:
        """``A^{-1} Phi^T (y - y_mean_) / noise_variance``."""
        return self._fitted_gp().beta

    @keep_state_on_failure
    @_fit_context(prefer_skip_nested_validation=False)
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
        X, y = self._validate_xy(X, y, reset=True)
        self._check_ard()
        fits = self._fits_hyperparameters()
        if fits and self.device == "gpu":
            raise InvalidInputError(
                '`device="gpu"` is not available with `optimize`: the marginal-likelihood fit '
                'computes its statistics on the CPU in float64; use device="cpu" or "auto", '
                "or fit without optimize"
            )
        self._start(X, y)
        if not fits:
            self._accumulate(X, y)
        else:
            # The statistics come from the float64 fit on the CPU (and
            # partial_fit adds rows to them there).
            self.device_ = "cpu"
            self._optimize(X, y)
        self._solve()
        return self

    def _fits_hyperparameters(self) -> bool:
        """Whether ``optimize`` names a hyperparameter (None and an empty
        tuple fit none)."""
        return self.optimize is not None and len(_optimize_names(self.optimize)) > 0

    def _check_ard(self) -> None:
        """``ard=True`` needs ``optimize`` to name the length scale."""
        if self.ard and (
            self.optimize is None or "length_scale" not in _optimize_names(self.optimize)
        ):
            raise InvalidInputError(
                "`ard=True` fits one length scale per input dimension and needs `optimize` "
                f"to name 'length_scale', got optimize={self.optimize!r}"
            )

    def _optimizable_features(self) -> Any:
        """The fitted transformer, checked to be one whose hyperparameters
        the marginal-likelihood fit can move (and per dimension with ``ard``)."""
        f = self.features_
        if self.ard and not isinstance(f, RandomFourierFeatures):
            raise InvalidInputError(
                "`ard=True` needs randfeat_rs.RandomFourierFeatures (MaclaurinFeatures has one "
                f"length scale: it rescales the inputs), got {type(f).__name__}"
            )
        if not isinstance(f, (RandomFourierFeatures, MaclaurinFeatures)):
            raise InvalidInputError(
                "`optimize` needs a feature map whose hyperparameters can move with its random "
                "draw fixed: randfeat_rs.RandomFourierFeatures or MaclaurinFeatures, got "
                f"{type(f).__name__}"
            )
        return f

    def _set_optimum(self, f: Any, fitted: tuple) -> None:
        """Keep what a marginal-likelihood fit of the transformer ``f``
        returns (``_core.feature_gp_optimize`` and its block form): the
        transformer at the optimum, the statistics there, the noise
        variance and the iterations."""
        ls, kv, nv, fmap, stats, n_iter = fitted
        length_scale = fitted_length_scale(ls, self.ard)
        self.features_ = _at_hyperparameters(f, length_scale, float(kv), fmap)
        self.stats_ = SufficientStatistics._wrap(stats)
        self.noise_variance_ = float(nv)
        self.n_iter_ = int(n_iter)

    def _optimize(self, X: np.ndarray, y: np.ndarray) -> None:
        """Fit the hyperparameters in ``optimize`` in Rust; keep the transformer
        at the optimum and the statistics of all rows there."""
        names = _optimize_names(self.optimize)
        x64 = np.ascontiguousarray(X, dtype=np.float64)
        with progress_printer(type(self).__name__, bool(self.verbose)) as progress:

            def fit_at(f: Any) -> tuple:
                return _core.feature_gp_optimize(
                    f._feature_map(),
                    x64,
                    y,
                    length_scale=length_scale_values(f.length_scale),
                    noise_variance=None if self.noise_variance is None else self.noise_variance_,
                    optimize=names,
                    n_restarts=int(self.n_restarts),
                    seed=self.seed_ if "seed_" in self.__dict__ else self._fit_seed(),
                    center=bool(self.center_y),
                    chunk_size=int(self.chunk_size),
                    ard=bool(self.ard),
                    progress=progress,
                )

            f, fitted = fit_with_maclaurin_refits(
                self._optimizable_features(),
                fit_at,
                lambda f, length_scale: clone(f).set_params(length_scale=length_scale).fit(X),
                bool(self.center_y),
                progress,
            )
        self._set_optimum(f, fitted)

    @keep_state_on_failure
    @_fit_context(prefer_skip_nested_validation=False)
    def partial_fit(self, X: Any, y: Any) -> RandomFeatureGPR:
        """Add rows to the fit (the first call also fits the transformer clone).

        The statistics of all rows seen so far are kept, so the model after
        several calls equals one fit on the concatenated rows (with the
        transformer fitted on the first batch, and, when ``noise_variance``
        is None, the noise initialized from the first batch). ``optimize``
        does not apply here: the rows are added at the hyperparameters of
        ``features_`` (those fitted by a previous :meth:`fit`, if any). A
        batch that is refused or interrupted adds none of its rows.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training inputs.
        y : array-like of shape (n_samples,)
            Training targets.

        Returns
        -------
        self : RandomFeatureGPR
        """
        first = not hasattr(self, "features_")
        X, y = self._validate_xy(X, y, reset=first)
        if first:
            self._start(X, y)
        elif self.stats_ is not None:
            # Rows go into a copy, so that a batch refused (or interrupted)
            # part-way adds none of its rows: the state restored on failure
            # holds the statistics as they were.
            self.stats_ = self.stats_.copy()
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

        Raises
        ------
        InvalidInputError
            If ``stats`` is not a :class:`SufficientStatistics`, or, for this
            library's transformers, holds another number of features than
            ``features`` maps to.
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
        fmap = model._feature_map()
        if fmap is not None and fmap.n_components != stats.n_features:
            raise InvalidInputError(
                f"`stats` hold {stats.n_features} features, but `features` maps to "
                f"{fmap.n_components}: they must come from this transformer"
            )
        model._resolve_features_device()
        model.stats_ = stats.copy()
        model.noise_variance_ = float(noise_variance)
        n_in = n_features_in if n_features_in is not None else features.n_features_in_
        model.n_features_in_ = int(n_in)
        model.n_iter_ = 0
        model._solve()
        return model

    def _predict(self, X: Any, std: Optional[str]) -> tuple[np.ndarray, Any]:
        check_is_fitted(self)
        X = validate_numeric_data(self, X, reset=False, dtype=[np.float64, np.float32], order="C")
        step = int(self.chunk_size)
        parts = [
            self._gp.predict(_features_chunk(self.features_, X[lo : lo + step]), std=std)
            for lo in range(0, X.shape[0], step)
        ]
        if not parts:
            return np.zeros(0), (None if std is None else np.zeros(0))
        mean = np.concatenate([m for m, _ in parts])
        return mean, (None if std is None else np.concatenate([s for _, s in parts]))

    def __sklearn_tags__(self):  # type: ignore[no-untyped-def]
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = False
        return tags
