"""Random Fourier features and Nystroem landmark features (docs/math/fourier.rst)."""

from __future__ import annotations

import warnings
from typing import Any, Optional

import numpy as np
from sklearn.base import _fit_context
from sklearn.utils._param_validation import StrOptions

from . import _core
from ._base import DenseFeaturesBase, keep_state_on_failure, map_param
from ._validation import (
    MAX_COUNT,
    Count,
    RealNumber,
    length_scale_values,
    real_array,
    user_stacklevel,
)
from .exceptions import InvalidInputError

KERNELS = ("gaussian", "laplacian", "matern12", "matern32", "matern52")
SAMPLERS = ("mc", "antithetic", "orthogonal", "structured", "moment_matching", "qmc")
VARIANTS = ("cos_bias", "cos_sin")


class RandomFourierFeatures(DenseFeaturesBase):
    """Random Fourier features of a stationary kernel (Rahimi & Recht).

    ``phi(x) . phi(y)`` is an estimate of ``kernel_variance * k(x - y)``. The
    frequencies ``w_j`` are drawn from the kernel's spectral density at
    ``fit``; ``transform`` computes ``X W^T`` and the cosines and sines
    multithreaded, in ``X``'s precision: for dense frequencies and
    ``n_features_in_ <= 256`` on a CPU with AVX2 + FMA or AVX-512 in one fused
    pass (projection, cosine and scale in registers, each output written
    once), otherwise as a GEMM followed by a vectorized cosine kernel.

    Parameters
    ----------
    n_components : int, default=100
        Output width ``D`` (>= 1).
    kernel : {"gaussian", "laplacian", "matern12", "matern32", "matern52"}, default="gaussian"
        With ``r = ||x - y||_2 / length_scale``: ``"gaussian"`` is
        ``exp(-r^2/2)`` (frequencies ``N(0, I / l^2)``); ``"laplacian"`` is
        ``exp(-||x - y||_1 / l)`` (i.i.d. Cauchy coordinates);
        ``"matern12"`` ``exp(-r)``, ``"matern32"``
        ``(1 + sqrt(3) r) exp(-sqrt(3) r)``, ``"matern52"``
        ``(1 + sqrt(5) r + 5 r^2 / 3) exp(-sqrt(5) r)`` (multivariate t
        frequencies with 1, 3, 5 degrees of freedom).
    length_scale : float or array-like of shape (n_features,), default=1.0
        Length scale ``l > 0``, or one per input dimension (automatic
        relevance determination): the kernel of the rescaled inputs
        ``x_a / l_a`` at length scale 1, so ``r`` above becomes
        ``||(x - y) / l||_2`` (``sum_a |x_a - y_a| / l_a`` for
        ``"laplacian"``). Per-dimension values draw the frequencies at
        length scale 1 and divide column ``a`` by ``l_a``; the structured
        sampler's draw is then formed into dense frequencies
        (``O(D d)`` per row, like the other samplers).
    kernel_variance : float, default=1.0
        Kernel variance ``sigma^2 > 0``; every feature is scaled by ``sigma``.
    sampler : {"mc", "antithetic", "orthogonal", "structured", "moment_matching", "qmc"}, \
default="mc"
        How the frequencies are drawn: i.i.d. (``"mc"``); pairs ``w, -w``
        (``"antithetic"``, needs an even number of frequencies; with
        ``cos_sin`` it does not reduce the variance, see docs/math/fourier.rst,
        "Frequency samplers");
        orthogonal blocks (``"orthogonal"``, ORF; the kernels with a radially
        symmetric spectral density, Gaussian and Matérn, not ``"laplacian"``,
        whose frequencies have i.i.d. Cauchy coordinates); ``H D H D H D`` blocks
        applied with the fast Walsh-Hadamard transform (``"structured"``,
        SORF, Gaussian only, ``O(D log d)`` per row; slightly biased, and
        a warning is given for fewer than 16 padded features); exact
        sample mean 0 and covariance ``I / l^2`` (``"moment_matching"``,
        Gaussian only, needs more frequencies than features); scrambled
        Sobol points through the inverse CDF (``"qmc"``, Gaussian and
        Laplacian, ``n_features <= 1025``, 1024 with ``cos_bias``, whose
        phases use one more Sobol dimension; a power-of-two number of
        frequencies keeps the balance properties, a warning is given
        otherwise).
    variant : {"cos_sin", "cos_bias"}, default="cos_sin"
        ``"cos_sin"``: ``m = D // 2`` frequencies, columns
        ``sigma [cos(W x) | sin(W x)] / sqrt(m)`` (a trailing zero column
        when ``D`` is odd). ``"cos_bias"``: ``D`` frequencies and phases
        ``b ~ U[0, 2 pi)``, columns ``sigma sqrt(2 / D) cos(W x + b)``.
        ``D = 1`` holds no cosine/sine pair: ``"cos_sin"`` then draws the
        ``"cos_bias"`` feature ``sigma sqrt(2) cos(w . x + b)`` (one
        frequency, one phase), whose estimate stays unbiased
        (docs/math/fourier.rst, "Edge cases and cost").
    random_state : int, RandomState instance or None, default=None
        Seeds the draw of every random parameter.
    device : {"cpu", "gpu", "auto"}, default="cpu"
        Where ``transform`` runs. ``"gpu"``: on the GPU in float32 from
        ``frequencies_`` (for ``"structured"``, the formed frequencies), a
        :class:`~randfeat_rs.GpuError` at ``fit`` when no adapter is usable;
        ``"auto"``: the GPU when a hardware adapter is usable, else the CPU.

    Attributes
    ----------
    device_ : str
        The device ``transform`` runs on: "cpu" or "gpu".
    seed_ : int
        The 64-bit seed drawn from ``random_state`` at ``fit``; every random
        parameter was drawn from it.
    frequencies_ : ndarray of shape (n_frequencies, n_features_in_), float64
        The frequencies ``W`` (for ``"structured"``, formed for inspection;
        the transform uses ``sorf_signs_``).
    phases_ : ndarray of shape (n_frequencies,) or None
        The ``cos_bias`` phases; ``None`` for ``cos_sin`` with
        ``n_components >= 2``.
    sorf_signs_ : ndarray of shape (3 * n_blocks, d_padded) or None
        The ``D1, D2, D3`` sign vectors of each SORF block; ``None``
        otherwise (and with per-dimension length scales).
    n_frequencies_ : int
        ``m``: ``n_components // 2`` for ``cos_sin``, ``n_components`` for
        ``cos_bias`` and for ``n_components = 1``.
    scale_ : float
        The column scale ``sigma * sqrt(2 / D)`` or ``sigma / sqrt(m)``.
    n_features_in_ : int
        Number of input features.

    Examples
    --------
    >>> import numpy as np
    >>> from randfeat_rs import RandomFourierFeatures
    >>> X = np.random.default_rng(0).standard_normal((4, 3))
    >>> rff = RandomFourierFeatures(2048, length_scale=2.0, random_state=0).fit(X)
    >>> rff.frequencies_.shape
    (1024, 3)
    >>> Phi = rff.transform(X)
    >>> K = np.exp(-((X[:, None] - X[None]) ** 2).sum(-1) / 8)
    >>> bool(np.abs(Phi @ Phi.T - K).max() < 0.1)
    True
    """

    _parameter_constraints: dict = {  # noqa: RUF012
        "n_components": [Count(1, MAX_COUNT)],
        "kernel": [StrOptions(set(KERNELS))],
        "length_scale": [RealNumber(0, None, closed="neither"), "array-like"],
        "kernel_variance": [RealNumber(0, None, closed="neither")],
        "sampler": [StrOptions(set(SAMPLERS))],
        "variant": [StrOptions(set(VARIANTS))],
        "random_state": ["random_state"],
        "device": DenseFeaturesBase._device_constraint,
    }

    frequencies_ = map_param("frequencies")
    phases_ = map_param("phases")
    sorf_signs_ = map_param("sorf_signs")
    n_frequencies_ = map_param("n_frequencies")
    scale_ = map_param("scale")

    def __init__(
        self,
        n_components: int = 100,
        *,
        kernel: str = "gaussian",
        length_scale: Any = 1.0,
        kernel_variance: float = 1.0,
        sampler: str = "mc",
        variant: str = "cos_sin",
        random_state: Any = None,
        device: str = "cpu",
    ) -> None:
        self.n_components = n_components
        self.kernel = kernel
        self.length_scale = length_scale
        self.kernel_variance = kernel_variance
        self.sampler = sampler
        self.variant = variant
        self.random_state = random_state
        self.device = device

    @keep_state_on_failure
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X: Any, y: Any = None) -> RandomFourierFeatures:
        """Draw the frequencies (and phases) for the features of ``X``.

        Parameters
        ----------
        X : array_like of shape (n_samples, n_features)
            Training data; only its number of features is used.
        y : None
            Ignored.

        Returns
        -------
        self : RandomFourierFeatures
        """
        X = self._validate_input(X, reset=True)
        d = X.shape[1]
        fmap = _core.FeatureMap.fourier(
            d,
            n_components=int(self.n_components),
            kernel=self.kernel,
            length_scale=length_scale_values(self.length_scale),
            kernel_variance=float(self.kernel_variance),
            sampler=self.sampler,
            variant=self.variant,
            seed=self._fit_seed(),
        )
        self._set_map(fmap)
        m = int(fmap.param("n_frequencies"))
        if self.sampler == "structured" and 1 << max(d - 1, 0).bit_length() < 16:
            warnings.warn(
                "sampler='structured' is noticeably biased for fewer than 16 (padded) "
                f"features; n_features={d}",
                UserWarning,
                stacklevel=user_stacklevel(),
            )
        if self.sampler == "qmc" and m > 0 and m & (m - 1):
            warnings.warn(
                f"sampler='qmc' keeps its balance properties for a power-of-two number of "
                f"frequencies; got {m}",
                UserWarning,
                stacklevel=user_stacklevel(),
            )
        return self


class NystroemFeatures(DenseFeaturesBase):
    """Nystroem landmark features ``phi(x) = K_mm^{-1/2} k_m(x)``.

    ``Phi Phi^T = K_nm K_mm^+ K_mn``, the low-rank Nystroem approximation of
    the kernel matrix. The landmarks are ``min(n_components, n_samples)``
    training rows drawn without replacement; ``K_mm^{-1/2}`` comes from a
    symmetric eigendecomposition in which eigenvalues below
    ``m * eps * lambda_max`` are dropped (a pseudo-inverse square root), so
    with every training row as a landmark the exact Gram matrix is
    reproduced.

    Parameters
    ----------
    n_components : int, default=100
        Number of landmarks ``m`` (>= 1; capped at ``n_samples``).
    kernel : {"gaussian", "laplacian", "matern12", "matern32", "matern52"}, default="gaussian"
        The kernel, as in :class:`RandomFourierFeatures` (normalized, ``k(0) = 1``).
    length_scale : float or array-like of shape (n_features,), default=1.0
        Length scale ``l > 0``, or one per input dimension: the kernel of
        the rescaled inputs ``x_a / l_a``, as in
        :class:`RandomFourierFeatures`.
    random_state : int, RandomState instance or None, default=None
        Seeds the choice of landmarks.
    device : {"cpu", "gpu", "auto"}, default="cpu"
        Where ``transform`` runs. Nystroem features have no GPU kernel:
        ``"gpu"`` raises :class:`~randfeat_rs.InvalidInputError` at ``fit``
        and ``"auto"`` gives the CPU (the parameter keeps the API of the
        other feature maps uniform).

    Attributes
    ----------
    device_ : str
        Always "cpu" (see ``device``).
    seed_ : int
        The 64-bit seed drawn from ``random_state`` at ``fit``.
    components_ : ndarray of shape (n_components_, n_features_in_), float64
        The landmarks.
    component_indices_ : ndarray of shape (n_components_,), int64
        Their row indices in the training data.
    normalization_ : ndarray of shape (n_components_, n_components_), float64
        ``K_mm^{-1/2}``.
    n_components_ : int
        ``min(n_components, n_samples)``, the output width.
    n_features_in_ : int
        Number of input features.

    Examples
    --------
    >>> import numpy as np
    >>> from randfeat_rs import NystroemFeatures
    >>> X = np.random.default_rng(0).standard_normal((50, 3))
    >>> Phi = NystroemFeatures(50, random_state=0).fit_transform(X)
    >>> K = np.exp(-((X[:, None] - X[None]) ** 2).sum(-1) / 2)
    >>> bool(np.abs(Phi @ Phi.T - K).max() < 1e-8)
    True
    """

    _parameter_constraints: dict = {  # noqa: RUF012
        "n_components": [Count(1, MAX_COUNT)],
        "kernel": [StrOptions(set(KERNELS))],
        "length_scale": [RealNumber(0, None, closed="neither"), "array-like"],
        "random_state": ["random_state"],
        "device": DenseFeaturesBase._device_constraint,
    }

    components_ = map_param("landmarks")
    normalization_ = map_param("normalization")

    def __init__(
        self,
        n_components: int = 100,
        *,
        kernel: str = "gaussian",
        length_scale: Any = 1.0,
        random_state: Any = None,
        device: str = "cpu",
    ) -> None:
        self.n_components = n_components
        self.kernel = kernel
        self.length_scale = length_scale
        self.random_state = random_state
        self.device = device

    @keep_state_on_failure
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X: Any, y: Any = None) -> NystroemFeatures:
        """Choose the landmarks among the rows of ``X`` and form ``K_mm^{-1/2}``.

        Parameters
        ----------
        X : array_like of shape (n_samples, n_features)
            Training data.
        y : None
            Ignored.

        Returns
        -------
        self : NystroemFeatures
        """
        X = self._validate_input(X, reset=True)
        fmap, idx = _core.FeatureMap.nystroem(
            X,
            n_components=int(self.n_components),
            kernel=self.kernel,
            length_scale=length_scale_values(self.length_scale),
            seed=self._fit_seed(),
        )
        self.component_indices_ = idx
        self.n_components_ = int(fmap.n_components)
        self._set_map(fmap)
        return self


def kernel_matrix(
    X: Any, Y: Optional[Any] = None, *, kernel: str = "gaussian", length_scale: Any = 1.0
) -> np.ndarray:
    """The exact kernel matrix ``K[i, j] = k(x_i, y_j)`` (float64).

    Parameters
    ----------
    X : array_like of shape (n, d)
        Dense real data (float or integer dtype).
    Y : array_like of shape (n_y, d), optional
        Defaults to ``X``.
    kernel : str, default="gaussian"
        One of the kernels of :class:`RandomFourierFeatures`.
    length_scale : float or array-like of shape (d,), default=1.0
        Length scale ``l > 0``, or one per input dimension (the kernel of
        the rescaled inputs ``x_a / l_a``, as in
        :class:`RandomFourierFeatures`).

    Returns
    -------
    ndarray of shape (n, n_y)

    Raises
    ------
    InvalidDtypeError
        If ``X`` or ``Y`` is a scipy.sparse matrix or holds no real numbers
        (complex, bool, object, strings), or ``length_scale`` is not a real
        number (a :class:`TypeError` naming the argument).
    InvalidInputError
        If ``X`` or ``Y`` is ragged or not 2-D, their widths differ, a value
        is not finite, a length scale is not finite and > 0, their number is
        neither 1 nor ``d``, or the kernel is unknown (a
        :class:`ValueError`).
    """
    ls = length_scale_values(length_scale)
    if not isinstance(kernel, str):
        raise InvalidInputError(f"unknown kernel {kernel!r}; expected one of {list(KERNELS)}")
    x = real_array(X, "X", (2,))
    y = x if Y is None else real_array(Y, "Y", (2,))
    return _core.kernel_matrix(x, y, kernel, ls)
