"""Polynomial sketches: the ``PolynomialSketch`` transformer and ``sketch_variance``."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from sklearn.base import _fit_context
from sklearn.utils._param_validation import StrOptions

from . import _core
from ._base import DenseFeaturesBase, keep_state_on_failure, map_param
from ._validation import MAX_COUNT, Count, RealNumber, real_array, real_scalar
from .exceptions import InvalidDtypeError, InvalidInputError

SKETCHES = ("gaussian", "rademacher", "tensor_srht", "tensor_sketch")


class PolynomialSketch(DenseFeaturesBase):
    """Random features for the polynomial kernel ``(x . y / l**2 + c) ** degree``.

    A polynomial sketch (docs/math/sketches.rst): each feature is a product
    of ``degree`` random projections of ``x' = (sqrt(c), x / l)`` (no bias
    coordinate when ``c = 0``), scaled so that ``transform(X) @ transform(Y).T``
    is an unbiased estimate of the kernel matrix. Its variance has a closed
    form, :func:`sketch_variance`.

    Parameters
    ----------
    n_components : int, default=100
        Number of output columns D (>= 1; >= 2 with complex weights).
    degree : int, default=2
        Kernel degree ``1 <= n <= 32`` (``_core.MAX_POLYNOMIAL_DEGREE``).
        Each feature is a product of ``n`` random projections of
        ``x' = (sqrt(c), x / l)``, of magnitude about ``||x'||**n``, and the
        relative variance of the estimate grows like ``3**n / D``
        (docs/math/sketches.rst, "Variances"): at ``n = 32`` float32
        features stay finite for ``||x'||**2 <= 16`` and a usable estimate
        of dense inputs already needs about ``3**32`` features, so higher
        degrees are refused. Scale the inputs (``length_scale``) so that
        ``||x'||`` is about 1 for high degrees.
    bias : float, default=0.0
        Kernel bias c >= 0.
    length_scale : float, default=1.0
        Length scale l > 0.
    sketch : {"tensor_srht", "rademacher", "gaussian", "tensor_sketch"}, default="tensor_srht"
        The construction: structured TensorSRHT (random signs, FWHT and
        permutations; for odd degrees a variance at most the Rademacher
        sketch's, O(n D log d) per row), dense
        Rademacher or Gaussian weights (O(n D d)), or TensorSketch
        (CountSketch + FFT).
    complex_weights : bool, default=False
        Use complex weights (not with TensorSketch). The output then holds
        ``floor(n_components / 2)`` complex features as ``[Re | Im]`` column
        blocks, plus one zero column when ``n_components`` is odd, so the
        dot product of two rows is the real part of the complex estimate
        (docs/math/conventions.rst, "Complex features and their real
        representation"). Lower variance for non-negative data.
    random_state : int, RandomState instance or None, default=None
        Seeds all random parameters (drawn at ``fit``).
    device : {"cpu", "gpu", "auto"}, default="cpu"
        Where ``transform`` runs. ``"gpu"``: on the GPU in float32 (same
        random parameters; not with TensorSketch), a
        :class:`~randfeat_rs.GpuError` at ``fit`` when no adapter is usable;
        ``"auto"``: the GPU when a hardware adapter is usable and the sketch
        has a GPU kernel, else the CPU (see :mod:`randfeat_rs.gpu`).

    Attributes
    ----------
    device_ : str
        The device ``transform`` runs on: "cpu" or "gpu".
    n_features_in_ : int
        Number of input columns d.
    seed_ : int
        The 64-bit seed drawn from ``random_state`` at ``fit``; the
        parameters were drawn from it.
    n_sketch_features_ : int
        Number of (complex, with ``complex_weights``) sketch features:
        ``n_components``, or ``n_components // 2`` with complex weights.
    random_params_ : dict of ndarray
        The random parameters (weights; or TensorSRHT sign codes and
        permutations; or TensorSketch hashes and signs), computed on access.

    Examples
    --------
    >>> import numpy as np
    >>> from randfeat_rs import PolynomialSketch
    >>> X = np.random.default_rng(0).standard_normal((5, 10))
    >>> ps = PolynomialSketch(256, degree=2, bias=1.0, random_state=0).fit(X)
    >>> ps.transform(X).shape
    (5, 256)
    """

    _parameter_constraints: ClassVar[dict] = {
        "n_components": [Count(1, MAX_COUNT)],
        "degree": [Count(1, _core.MAX_POLYNOMIAL_DEGREE)],
        "bias": [RealNumber(0, None, closed="left")],
        "length_scale": [RealNumber(0, None, closed="neither")],
        "sketch": [StrOptions(set(SKETCHES))],
        "complex_weights": ["boolean"],
        "random_state": ["random_state"],
        "device": DenseFeaturesBase._device_constraint,
    }

    n_sketch_features_ = map_param("n_sketch_features")
    random_params_ = map_param("random_params")

    def __init__(
        self,
        n_components: int = 100,
        *,
        degree: int = 2,
        bias: float = 0.0,
        length_scale: float = 1.0,
        sketch: str = "tensor_srht",
        complex_weights: bool = False,
        random_state: Any = None,
        device: str = "cpu",
    ) -> None:
        self.n_components = n_components
        self.degree = degree
        self.bias = bias
        self.length_scale = length_scale
        self.sketch = sketch
        self.complex_weights = complex_weights
        self.random_state = random_state
        self.device = device

    @keep_state_on_failure
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X: Any, y: Any = None) -> PolynomialSketch:
        """Draw the random parameters for inputs with ``X.shape[1]`` columns.

        Parameters
        ----------
        X : array_like of shape (n_samples, n_features)
            Training data (only its number of columns is used); finite.
        y : None
            Ignored.

        Returns
        -------
        self : PolynomialSketch
        """
        X = self._validate_input(X, reset=True)
        fmap = _core.FeatureMap.polynomial(
            X.shape[1],
            n_components=int(self.n_components),
            degree=int(self.degree),
            bias=float(self.bias),
            length_scale=float(self.length_scale),
            sketch=self.sketch,
            complex_weights=bool(self.complex_weights),
            seed=self._fit_seed(),
        )
        self._set_map(fmap)
        return self

    def __sklearn_tags__(self):  # type: ignore[no-untyped-def]
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = False
        return tags


def sketch_variance(
    x: Any,
    y: Any,
    *,
    degree: int,
    n_components: int,
    sketch: str,
    complex_weights: bool = False,
    bias: float = 0.0,
    length_scale: float = 1.0,
) -> float:
    """Closed-form variance of the sketch estimate of ``(x . y / l**2 + c) ** degree``.

    The variance (docs/math/sketches.rst, "Variances") over the random draw of the parameters
    of ``PolynomialSketch(n_components, degree=degree, bias=bias,
    length_scale=length_scale, sketch=sketch, complex_weights=complex_weights)``
    of ``transform(x) @ transform(y)``. With complex weights that estimate is
    the real part of the complex estimate with ``floor(n_components / 2)``
    complex features, and this is its variance (the real-part variance).

    Parameters
    ----------
    x, y : array_like of shape (d,)
        The pair: real numbers (float or integer dtype, converted to
        float64), finite.
    degree : int
        Kernel degree ``1 <= degree <= 32`` (see :class:`PolynomialSketch`).
    n_components : int
        Output columns of the transformer (>= 1; >= 2 with complex weights).
    sketch : {"gaussian", "rademacher", "tensor_srht", "tensor_sketch"}
        The construction.
    complex_weights : bool, default=False
        Complex weights (not with TensorSketch).
    bias : float, default=0.0
        Kernel bias c >= 0.
    length_scale : float, default=1.0
        Length scale l > 0.

    Returns
    -------
    float
        The variance.

    Raises
    ------
    InvalidDtypeError
        If ``x`` or ``y`` is a scipy.sparse matrix or holds no real numbers
        (complex, bool, object, strings; a :class:`TypeError` naming it),
        ``degree`` or ``n_components`` is not an integer (a bool included),
        ``bias`` or ``length_scale`` is not a real number, ``sketch`` is not a
        string, or ``complex_weights`` is not a bool.
    InvalidInputError
        If ``x`` or ``y`` is not 1-D or a parameter is out of range, such as
        a degree above 32, or the variance itself (it grows as
        ``(|x| |y| / length_scale**2) ** (2 * degree)``) exceeds the float
        range (a :class:`ValueError`).

    Examples
    --------
    >>> from randfeat_rs import sketch_variance
    >>> round(sketch_variance([1, 1, 0, 0], [1, 0, 1, 0], degree=2, n_components=6,
    ...                       sketch="rademacher"), 6)
    2.5
    """
    for name, v in (("degree", degree), ("n_components", n_components)):
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
            raise InvalidDtypeError(f"`{name}` must be an integer, got {type(v).__name__} {v!r}")
        if v > MAX_COUNT:
            raise InvalidInputError(f"invalid value for `{name}`: {v} is too large")
    if not isinstance(complex_weights, (bool, np.bool_)):
        raise InvalidDtypeError(
            f"`complex_weights` must be a bool, got {type(complex_weights).__name__} "
            f"{complex_weights!r}"
        )
    if not isinstance(sketch, str):
        raise InvalidDtypeError(
            f"`sketch` must be one of {', '.join(map(repr, SKETCHES))}, "
            f"got {type(sketch).__name__} {sketch!r}"
        )
    xa = real_array(x, "x", (1,))
    ya = real_array(y, "y", (1,))
    return _core.sketch_variance(
        xa,
        ya,
        degree=int(degree),
        n_components=int(n_components),
        sketch=sketch,
        complex_weights=bool(complex_weights),
        bias=real_scalar(bias, "bias"),
        length_scale=real_scalar(length_scale, "length_scale"),
    )
