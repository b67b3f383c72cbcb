"""Optimized Maclaurin random features (docs/math/maclaurin.rst)."""

from __future__ import annotations

import warnings
from typing import Any, ClassVar, Optional

import numpy as np
from sklearn.base import _fit_context
from sklearn.utils._param_validation import StrOptions

from . import _core
from ._base import DenseFeaturesBase, keep_state_on_failure, map_param
from ._progress import progress_printer
from ._validation import MAX_COUNT, MAX_DEGREE_COUNT, Count, RealNumber, real_array, user_stacklevel

__all__ = ["MaclaurinFeatures"]


class MaclaurinFeatures(DenseFeaturesBase):
    """Random Maclaurin features for the Gaussian and dot-product kernels.

    The kernel is written as its Maclaurin series
    ``k(x, y) = sigma^2 g(x) g(y) sum_n a_n (x~ . y~)^n`` with ``x~ = x / l``
    (``(x - center) / l`` for the Gaussian kernel, whose prefactor is
    ``g(x) = exp(-|x~|^2 / 2)``). Degree ``n`` is approximated by a
    polynomial sketch with ``D_n`` features; the truncation degree ``p``
    and the counts ``D_n`` are chosen at fit by the incremental algorithm of
    Wacker et al. (2022), which minimizes the expected squared kernel error
    on a subsample of the training rows. Output columns:
    ``[constant | h01 linear (d) | degree blocks ascending | (zero column)]``,
    complex blocks as ``[Re | Im]``. With one input feature the explicit map
    ``(g(x) sqrt(a_n) x~^n)`` is used (nothing random), one column for each
    of the first ``n_components`` degrees ``n`` with ``a_n != 0``: degrees
    ``0 .. n_components - 1`` for the Gaussian and exponential kernels; for
    the polynomial kernel those up to ``degree`` (only ``degree`` itself
    without ``bias``), the exact kernel once ``n_components`` covers them,
    with zero columns after the last.

    Parameters
    ----------
    n_components : int, default=100
        Output width ``D`` (real columns).
    kernel : {"gaussian", "exponential", "polynomial"}, default="gaussian"
        ``sigma^2 exp(-|x - y|^2 / (2 l^2))``, ``sigma^2 exp(x.y / l^2)`` or
        ``sigma^2 (x.y / l^2 + bias)^degree``.
    length_scale : float, default=1.0
        ``l > 0``.
    kernel_variance : float, default=1.0
        ``sigma^2 > 0``.
    bias : float, default=0.0
        ``c >= 0`` of the polynomial kernel (polynomial kernel only).
    degree : int, default=None
        Degree ``1 <= q <= 32`` of the polynomial kernel (required for it,
        not allowed for the others), as for :class:`PolynomialSketch`; the
        kernel's coefficients ``C(q, n) bias^(q - n)`` must be finite.
    sketch : {"tensor_srht", "rademacher", "gaussian", "tensor_sketch"}, default="tensor_srht"
        The polynomial sketch of every degree ("tensor_sketch" only with
        ``allocation="random"`` or an explicit allocation).
    complex_weights : bool, default=False
        Complex sketches (two real columns per feature).
    allocation : "optimized", "random" or array-like of int, default="optimized"
        "optimized": the incremental algorithm and the search over ``p``.
        "random": Kar & Karnick degrees drawn with ``P(n) = 2^-n`` on
        ``1..max_degree``. An array: features per degree, index = degree,
        in the format of ``allocation_`` (entry 0 the constant column, entry
        1 the ``d`` linear columns in h01 mode); its width must equal
        ``n_components``.
    max_degree : int, default=10
        Largest truncation degree searched (the random support's maximum);
        the explicit map of one input feature takes its degrees from
        ``n_components`` instead.
    min_degree : int, default=2
        Smallest truncation degree searched.
    n_subsample : int, default=2000
        Rows of the subsample of the pair statistics (``>= 2``).
    h01 : bool, default=False
        Use the exact linear map (``d`` columns) instead of a degree-1 sketch.
    random_state : int, RandomState instance or None, default=None
        Seed of the subsample and of every random sketch.
    verbose : bool, default=False
        Print progress to ``sys.stderr``: the pair statistics and the search
        over the truncation degree of the optimized allocation and the
        allocation chosen, and the rows of a ``transform`` that runs longer
        than half a second (on the CPU).
    device : {"cpu", "gpu", "auto"}, default="cpu"
        Where ``transform`` runs. ``"gpu"``: the degree blocks run through
        the GPU sketch kernels (the same random parameters, bit for bit),
        in float32, with the centering, ``x~`` and the row factor
        ``sigma g(x~)`` computed in float64 on the host; results come back in
        the input's dtype. ``"auto"``: the GPU when a hardware adapter is
        usable, else the CPU. The fit (allocation, sketches) runs on the CPU.
        No GPU kernel: ``sketch="tensor_sketch"`` and the explicit map of one
        input feature (``"gpu"`` raises, ``"auto"`` gives the CPU).

    Attributes
    ----------
    allocation_ : ndarray of shape (truncation_degree_ + 1,), dtype int64
        Features per degree, index = degree: entry 0 is the constant column
        (1 if the kernel has a constant term), entry 1 in h01 mode the ``d``
        exact linear columns, other entries sketch features (complex
        features with complex weights). For one input feature: 1 for each
        degree of the explicit map, 0 for the degrees between them.
    truncation_degree_ : int
        Truncation degree ``p`` of the series (not the polynomial kernel's
        ``degree``).
    objective_ : float
        The minimized objective ``sigma^4 J`` (predicted mean squared kernel
        error over pairs of distinct training rows); NaN unless optimized.
    center_ : ndarray of shape (n_features_in_,) or None
        Training mean (Gaussian kernel); None for dot-product kernels.
    device_ : str
        The device ``transform`` runs on: "cpu" or "gpu".
    seed_ : int
        The 64-bit seed drawn from ``random_state`` at ``fit``; the
        subsample and every sketch were drawn from it.
    n_features_in_ : int
        Number of input features.

    Examples
    --------
    >>> import numpy as np
    >>> from randfeat_rs import MaclaurinFeatures
    >>> X = np.random.default_rng(0).normal(size=(200, 8))
    >>> mf = MaclaurinFeatures(256, length_scale=3.0, random_state=0).fit(X)
    >>> mf.transform(X).shape
    (200, 256)
    >>> int(mf.allocation_.sum())  # 1 constant + 255 sketch features
    256
    """

    _parameter_constraints: ClassVar[dict] = {
        "n_components": [Count(1, MAX_COUNT)],
        "kernel": [StrOptions({"gaussian", "exponential", "polynomial"})],
        "length_scale": [RealNumber(0, None, closed="neither")],
        "kernel_variance": [RealNumber(0, None, closed="neither")],
        "bias": [RealNumber(0, None, closed="left")],
        "degree": [Count(1, MAX_DEGREE_COUNT), None],
        "sketch": [StrOptions({"tensor_srht", "rademacher", "gaussian", "tensor_sketch"})],
        "complex_weights": ["boolean"],
        "allocation": [StrOptions({"optimized", "random"}), "array-like"],
        "max_degree": [Count(1, MAX_DEGREE_COUNT)],
        "min_degree": [Count(1, MAX_DEGREE_COUNT)],
        "n_subsample": [Count(2, MAX_COUNT)],
        "h01": ["boolean"],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
        "device": DenseFeaturesBase._device_constraint,
    }

    allocation_ = map_param("allocation")
    truncation_degree_ = map_param("truncation_degree")
    objective_ = map_param("objective")
    center_ = map_param("center")

    def __init__(
        self,
        n_components: int = 100,
        *,
        kernel: str = "gaussian",
        length_scale: float = 1.0,
        kernel_variance: float = 1.0,
        bias: float = 0.0,
        degree: Optional[int] = None,
        sketch: str = "tensor_srht",
        complex_weights: bool = False,
        allocation: Any = "optimized",
        max_degree: int = 10,
        min_degree: int = 2,
        n_subsample: int = 2000,
        h01: bool = False,
        random_state: Any = None,
        verbose: bool = False,
        device: str = "cpu",
    ) -> None:
        self.n_components = n_components
        self.kernel = kernel
        self.length_scale = length_scale
        self.kernel_variance = kernel_variance
        self.bias = bias
        self.degree = degree
        self.sketch = sketch
        self.complex_weights = complex_weights
        self.allocation = allocation
        self.max_degree = max_degree
        self.min_degree = min_degree
        self.n_subsample = n_subsample
        self.h01 = h01
        self.random_state = random_state
        self.verbose = verbose
        self.device = device

    @keep_state_on_failure
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X: Any, y: Any = None) -> MaclaurinFeatures:
        """Choose the allocation on a subsample of ``X`` and draw the sketches.

        Parameters
        ----------
        X : array_like of shape (n_samples, n_features)
            Training data (float32 or float64; other dtypes become float64).
            The optimized allocation needs ``n_samples >= 2`` unless
            ``n_features == 1``.
        y : ignored

        Returns
        -------
        self : MaclaurinFeatures
        """
        X = self._validate_input(X, reset=True)
        allocation = self.allocation
        if not isinstance(allocation, str):
            allocation = np.asarray(allocation)
        with progress_printer(type(self).__name__, bool(self.verbose)) as progress:
            fmap = _core.FeatureMap.maclaurin(
                X,
                n_components=int(self.n_components),
                kernel=self.kernel,
                degree=None if self.degree is None else int(self.degree),
                bias=float(self.bias),
                length_scale=float(self.length_scale),
                kernel_variance=float(self.kernel_variance),
                sketch=self.sketch,
                complex_weights=bool(self.complex_weights),
                allocation=allocation,
                min_degree=int(self.min_degree),
                max_degree=int(self.max_degree),
                n_subsample=int(self.n_subsample),
                h01=bool(self.h01),
                seed=self._fit_seed(),
                progress=progress,
            )
        message = fmap.param("dropped_pairs_warning")
        if message is not None:
            warnings.warn(message, RuntimeWarning, stacklevel=user_stacklevel())
        self._set_map(fmap)
        return self

    def transform(self, X: Any) -> np.ndarray:
        """Map ``X`` to the random features.

        Parameters
        ----------
        X : array_like of shape (n_samples, n_features_in_)

        Returns
        -------
        ndarray of shape (n_samples, n_components), dtype of ``X``
            ``Phi(X)`` with ``Phi(x) . Phi(y)`` an estimate of the truncated kernel.
        """
        X = self._check_transform_input(X)
        with progress_printer(type(self).__name__, bool(self.verbose), delay=0.5) as progress:
            return self._map.transform(X, self.device_, progress=progress)

    def transform_centered(self, X: Any, center: Any) -> np.ndarray:
        """Map ``X`` with the expansion centered at ``center`` (Gaussian kernel only).

        The Gaussian kernel is shift invariant, so ``Phi(x - c) . Phi(y - c)``
        estimates the same kernel for any ``c``; the estimate is most accurate
        near ``c`` (the localized GP of docs/math/localized.rst uses this).

        Parameters
        ----------
        X : array_like of shape (n_samples, n_features_in_)
        center : array_like of shape (n_features_in_,)

        Returns
        -------
        ndarray of shape (n_samples, n_components), dtype of ``X``

        Raises
        ------
        InvalidDtypeError
            If ``center`` holds no real numbers (a :class:`TypeError`).
        InvalidInputError
            If ``center`` is not 1-D, its length is not ``n_features_in_`` or
            it is not finite, or the kernel is not Gaussian (a
            :class:`ValueError`).
        """
        X = self._check_transform_input(X)
        c = real_array(center, "center", (1,))
        with progress_printer(type(self).__name__, bool(self.verbose), delay=0.5) as progress:
            return self._map.transform(X, self.device_, c, progress=progress)
