"""Plumbing shared by the randfeat_rs estimators (scikit-learn conventions).

Estimators follow ``sklearn/kernel_approximation.py``: ``__init__`` only
stores its arguments, ``_parameter_constraints`` declares them (the compiled
core checks the rest), ``fit`` is wrapped in ``_fit_context``, input goes
through ``validate_data``. A fit makes a handle of the compiled core (a
fitted Rust struct: a feature map, a GP) that the estimator keeps in a
private attribute: its numerics run in Rust, it pickles by value (nothing
is refitted or redrawn on unpickling), and the fitted parameters are
visible as NumPy attributes ending in ``_`` that read it.

Shared pieces:

- :func:`keep_state_on_failure`: a ``fit`` that raises leaves the
  estimator as it was before the call;
- :class:`RandomStateMixin`: one way to store the seed, ``seed_``, drawn
  once in ``fit`` from ``random_state``;
- :class:`DeviceMixin`: the ``device`` parameter and its fitted ``device_``,
  resolved in Rust;
- :class:`RandomFeaturesBase`: the transformers; :class:`DenseFeaturesBase`:
  those whose fitted map is a ``_core.FeatureMap``.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, ClassVar, Optional, TypeVar

import numpy as np
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils._param_validation import StrOptions
from sklearn.utils.validation import check_is_fitted

from . import gpu
from ._validation import seed_from_random_state, validate_numeric_data
from .exceptions import InvalidInputError

#: The values of every ``device`` parameter.
DEVICES = ("cpu", "gpu", "auto")

_Fit = TypeVar("_Fit", bound=Callable[..., Any])


def keep_state_on_failure(fit: _Fit) -> _Fit:
    """Wrap a ``fit`` method so that, when it raises (``KeyboardInterrupt``
    included), the estimator's attributes are put back as they were before
    the call.

    A fit sets its fitted attributes step by step (``n_features_in_`` and
    ``classes_`` while validating, the model last); without this, a refit
    that fails part-way would leave attributes of the new data beside the
    model of the old, and a first fit that fails would leave some fitted
    attributes but no model. With it, a failed refit keeps the previous
    model whole and a failed first fit leaves the estimator unfitted
    (``NotFittedError``). It restores the attribute dictionary: attributes
    that the call set or replaced go back, but an object it mutated in place
    is not copied beforehand, so a method that adds to a fitted object
    works on a copy of it (``RandomFeatureGPR.partial_fit``).

    Parameters
    ----------
    fit : callable
        The method, ``fit(self, *args, **kwargs)``.

    Returns
    -------
    callable
        The wrapped method (same signature and docstring).
    """

    @functools.wraps(fit)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        state = dict(self.__dict__)
        try:
            return fit(self, *args, **kwargs)
        except BaseException:
            self.__dict__.clear()
            self.__dict__.update(state)
            raise

    return wrapper  # type: ignore[return-value]


def map_param(name: str) -> property:
    """A read-only fitted attribute: the parameter ``name`` of the fitted map
    (a new object on every access; an ``AttributeError`` before ``fit``)."""
    return property(lambda self: self._param(name), doc=f"The fitted map's ``{name}``.")


class RandomStateMixin:
    """The seed of an estimator with a ``random_state`` parameter.

    ``fit`` calls :meth:`_fit_seed` once; the 64-bit seed it draws from
    ``random_state`` is the fitted attribute ``seed_``, and every random
    parameter of the fit is drawn from it in Rust.
    """

    random_state: Any

    def _fit_seed(self) -> int:
        """Draw ``seed_`` from ``random_state`` and return it."""
        self.seed_ = seed_from_random_state(self.random_state)
        return self.seed_


class DeviceMixin:
    """The ``device`` parameter ("cpu", "gpu" or "auto") and ``device_``.

    ``fit`` calls :meth:`_resolve_device` once; the fitted ``device_`` is
    "cpu" or "gpu", decided in Rust: by the fitted feature map's
    ``resolve_device`` (the map knows which of its configurations have a GPU
    kernel), by the adapter alone for a model with a GPU path of its own, or
    "cpu" for a configuration without one (with an error for "gpu").
    """

    #: The ``_parameter_constraints`` entry of ``device``.
    _device_constraint: ClassVar[list] = [StrOptions(set(DEVICES))]

    device: str

    def _resolve_device(self, feature_map: Any = None, unsupported: Optional[str] = None) -> None:
        """Set ``device_`` from ``device``.

        Parameters
        ----------
        feature_map : _core.FeatureMap or None
            The fitted map whose kernels run the work; None when the
            estimator's own GPU path (or none) decides.
        unsupported : str or None
            Why this configuration has no GPU path (None: it has one).

        Raises
        ------
        InvalidInputError
            If ``device="gpu"`` and the configuration has no GPU path.
        GpuError
            If ``device="gpu"`` and no adapter is usable.
        """
        if feature_map is not None:
            self.device_ = feature_map.resolve_device(self.device)
        elif unsupported is not None:
            if self.device == "gpu":
                raise InvalidInputError(f'`device="gpu"` is not available: {unsupported}')
            self.device_ = "cpu"
        else:
            self.device_ = gpu.resolve_device(self.device)


class RandomFeaturesBase(
    RandomStateMixin, ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator
):
    """Base class of the random-feature transformers.

    Subclasses implement ``fit`` (drawing from :meth:`_fit_seed`) and
    ``transform``, and set ``_n_features_out`` (the output width) in ``fit``.
    """

    def _validate_input(self, X: Any, *, reset: bool) -> np.ndarray:
        """Validate ``X``: 2-D, finite, float32 kept as float32, else float64, C order.

        With ``reset=True`` (in ``fit``) records ``n_features_in_``; with
        ``reset=False`` (in ``transform``) checks the feature count against it.
        """
        return validate_numeric_data(
            self,
            X,
            reset=reset,
            dtype=[np.float64, np.float32],
            order="C",
            ensure_min_samples=1 if reset else 0,
        )

    def _check_transform_input(self, X: Any) -> np.ndarray:
        """``check_is_fitted`` then ``_validate_input(X, reset=False)``."""
        check_is_fitted(self)
        return self._validate_input(X, reset=False)

    def __sklearn_tags__(self):  # type: ignore[no-untyped-def]
        tags = super().__sklearn_tags__()
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags


class DenseFeaturesBase(DeviceMixin, RandomFeaturesBase):
    """A transformer whose fitted map is a ``_core.FeatureMap``.

    ``fit`` stores the map in ``_map`` (see :meth:`_set_map`); the transform,
    the device choice and the GPU paths run through it in Rust, and
    :class:`~randfeat_rs.RandomFeatureGPR` accumulates its statistics
    through it.
    """

    _map: Any

    def _set_map(self, feature_map: Any) -> None:
        """Keep the fitted ``feature_map``, its width and its device."""
        self._map = feature_map
        self._n_features_out = int(feature_map.n_components)
        self._resolve_device(feature_map)

    def _feature_map(self) -> Any:
        """The fitted ``_core.FeatureMap``."""
        check_is_fitted(self)
        return self._map

    def _param(self, name: str) -> Any:
        """The fitted map's parameter ``name`` (see ``_core.FeatureMap.param``)."""
        if "_map" not in self.__dict__:
            raise AttributeError(name)
        return self._map.param(name)

    def transform(self, X: Any) -> np.ndarray:
        """Map ``X`` to the features.

        Parameters
        ----------
        X : array_like of shape (n_samples, n_features_in_)
            float32 input gives float32 output; anything else is float64.

        Returns
        -------
        ndarray of shape (n_samples, n_components)
        """
        X = self._check_transform_input(X)
        return self._map.transform(X, self.device_)
