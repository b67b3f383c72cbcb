"""Polynomial sketches: the ``PolynomialSketch`` transformer and ``sketch_variance``."""

from __future__ import annotations

from numbers import Integral, Real
from typing import Any, ClassVar

import numpy as np
from sklearn.base import _fit_context
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from . import _core
from ._base import RandomFeaturesBase
from .exceptions import InvalidInputError
from .gpu import DEVICES

SKETCHES = ("gaussian", "rademacher", "tensor_srht", "tensor_sketch")


def _n_sketch_features(n_components: int, complex_weights: bool) -> int:
    """Sketch features for ``n_components`` real columns (ALGORITHMS.md 9.2)."""
    return n_components // 2 if complex_weights else n_components


def _check_sketch_options(sketch: str, n_components: int, complex_weights: bool) -> None:
    if sketch not in SKETCHES:
        raise InvalidInputError(f"`sketch` must be one of {SKETCHES}, got {sketch!r}")
    if complex_weights and sketch == "tensor_sketch":
        raise InvalidInputError(
            "`complex_weights=True` is not available with sketch='tensor_sketch'; "
            "use 'gaussian', 'rademacher' or 'tensor_srht'"
        )
    if complex_weights and n_components < 2:
        raise InvalidInputError(
            "`n_components` must be >= 2 with complex_weights=True "
            f"(two real columns per complex feature), got {n_components}"
        )


class PolynomialSketch(RandomFeaturesBase):
    """Random features for the polynomial kernel ``(x . y / l**2 + c) ** degree``.

    A polynomial sketch (ALGORITHMS.md section 2): each feature is a product
    of ``degree`` random projections of ``x' = (sqrt(c), x / l)`` (no bias
    coordinate when ``c = 0``), scaled so that ``transform(X) @ transform(Y).T``
    is an unbiased estimate of the kernel matrix. Its variance has a closed
    form, :func:`sketch_variance`.

    Parameters
    ----------
    n_components : int
        Number of output columns D (>= 1; >= 2 with complex weights).
    degree : int, default=2
        Kernel degree n >= 1.
    bias : float, default=0.0
        Kernel bias c >= 0.
    length_scale : float, default=1.0
        Length scale l > 0.
    sketch : {"tensor_srht", "rademacher", "gaussian", "tensor_sketch"}, default="tensor_srht"
        The construction: structured TensorSRHT (random signs, FWHT and
        permutations; lowest variance, O(n D log d) per row), dense
        Rademacher or Gaussian weights (O(n D d)), or TensorSketch
        (CountSketch + FFT).
    complex_weights : bool, default=False
        Use complex weights (not with TensorSketch). The output then holds
        ``floor(n_components / 2)`` complex features as ``[Re | Im]`` column
        blocks, plus one zero column when ``n_components`` is odd, so the
        dot product of two rows is the real part of the complex estimate
        (ALGORITHMS.md 9). Lower variance for non-negative data.
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
        The 64-bit seed the parameters were drawn from.
    n_sketch_features_ : int
        Number of (complex, with ``complex_weights``) sketch features.
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
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "degree": [Interval(Integral, 1, None, closed="left")],
        "bias": [Interval(Real, 0, None, closed="left")],
        "length_scale": [Interval(Real, 0, None, closed="neither")],
        "sketch": [StrOptions(set(SKETCHES))],
        "complex_weights": ["boolean"],
        "random_state": ["random_state"],
        "device": [StrOptions(set(DEVICES))],
    }

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
        _check_sketch_options(self.sketch, self.n_components, self.complex_weights)
        self._fmap = None
        self.seed_ = self._seed()
        self.n_sketch_features_ = _n_sketch_features(self.n_components, self.complex_weights)
        self._n_features_out = self.n_components
        self._sketch = self._draw()
        self.device_ = self._feature_map().resolve_device(self.device)
        return self

    def _draw(self) -> Any:
        dim = self.n_features_in_ + (1 if self.bias > 0 else 0)
        return _core.PolySketch(
            self.sketch,
            bool(self.complex_weights),
            int(self.degree),
            dim,
            self.n_sketch_features_,
            self.seed_,
        )

    def _core_sketch(self) -> Any:
        # Dropped by pickling and re-drawn, bit for bit, from ``seed_``.
        if getattr(self, "_sketch", None) is None:
            self._sketch = self._draw()
        return self._sketch

    def __getstate__(self) -> dict:
        state = dict(super().__getstate__())
        state.pop("_sketch", None)
        return state

    def transform(self, X: Any) -> np.ndarray:
        """Map ``X`` to the sketch features.

        Parameters
        ----------
        X : array_like of shape (n_samples, n_features)
            float32 or float64 (other dtypes become float64); finite.

        Returns
        -------
        ndarray of shape (n_samples, n_components)
            float32 for float32 input, else float64.
        """
        X = self._check_transform_input(X)
        if self.device_ == "gpu":
            return self._feature_map().transform(X, "gpu")
        sk = self._core_sketch()
        out = np.empty((X.shape[0], self.n_components), dtype=X.dtype)
        width = sk.width
        if width < self.n_components:
            out[:, width:] = 0
        sk.transform(X, out[:, :width], float(self.bias), float(self.length_scale))
        return out

    def _build_feature_map(self) -> Any:
        """The fitted map as a ``_core.FeatureMap`` (device choice, GPU paths)."""
        return _core.FeatureMap.polynomial(
            self._core_sketch(), float(self.bias), float(self.length_scale), self.n_components
        )

    @property
    def random_params_(self) -> dict:
        """The random parameters as NumPy arrays (see the class docstring)."""
        check_is_fitted(self)
        return dict(self._core_sketch().params())

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

    The variance (ALGORITHMS.md 2.5) over the random draw of the parameters
    of ``PolynomialSketch(n_components, degree=degree, bias=bias,
    length_scale=length_scale, sketch=sketch, complex_weights=complex_weights)``
    of ``transform(x) @ transform(y)``. With complex weights that estimate is
    the real part of the complex estimate with ``floor(n_components / 2)``
    complex features, and this is its variance (the real-part variance).

    Parameters
    ----------
    x, y : array_like of shape (d,)
        The pair (converted to float64); finite.
    degree : int
        Kernel degree >= 1.
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

    Examples
    --------
    >>> from randfeat_rs import sketch_variance
    >>> round(sketch_variance([1, 1, 0, 0], [1, 0, 1, 0], degree=2, n_components=6,
    ...                       sketch="rademacher"), 6)
    2.5
    """
    xa = np.asarray(x, dtype=np.float64)
    ya = np.asarray(y, dtype=np.float64)
    if xa.ndim != 1 or ya.ndim != 1:
        raise InvalidInputError("`x` and `y` must be 1-D arrays")
    if xa.shape != ya.shape:
        raise InvalidInputError(f"`y` must have the length of `x` ({xa.size}), got {ya.size}")
    if not (np.all(np.isfinite(xa)) and np.all(np.isfinite(ya))):
        raise InvalidInputError("`x` and `y` must be finite (no NaN or inf)")
    if isinstance(degree, bool) or not isinstance(degree, (int, np.integer)) or degree < 1:
        raise InvalidInputError(f"`degree` must be an integer >= 1, got {degree!r}")
    if (
        isinstance(n_components, bool)
        or not isinstance(n_components, (int, np.integer))
        or n_components < 1
    ):
        raise InvalidInputError(f"`n_components` must be an integer >= 1, got {n_components!r}")
    _check_sketch_options(sketch, int(n_components), bool(complex_weights))
    nf = _n_sketch_features(int(n_components), bool(complex_weights))
    return _core.sketch_variance(
        xa, ya, int(degree), nf, sketch, bool(complex_weights), float(bias), float(length_scale)
    )
