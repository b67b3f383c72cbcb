"""Plumbing shared by every randfeat_rs transformer (scikit-learn conventions).

Estimators follow ``sklearn/kernel_approximation.py``: ``__init__`` only
stores its arguments, ``_parameter_constraints`` declares them, ``fit`` is
wrapped in ``_fit_context``, input goes through ``validate_data``. Fitted
random parameters are stored as NumPy arrays in attributes ending in ``_``
and handed to stateless functions of the compiled core at transform time,
so every fitted estimator pickles and its parameters are visible.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from ._validation import seed_from_random_state


class RandomFeaturesBase(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Base class of the dense random-feature transformers.

    Subclasses implement ``fit`` (drawing parameters from ``self._seed()``)
    and ``transform``, set ``_n_features_out`` (the output width) in
    ``fit``, and the dense maps implement ``_feature_map``.
    """

    def _validate_input(self, X: Any, *, reset: bool) -> np.ndarray:
        """Validate ``X``: 2-D, finite, float32 kept as float32, else float64, C order.

        With ``reset=True`` (in ``fit``) records ``n_features_in_``; with
        ``reset=False`` (in ``transform``) checks the feature count against it.
        """
        return validate_data(
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

    def _feature_map(self) -> Any:
        """The fitted map as a ``_core.FeatureMap`` (the transforms, the device
        choice and the GPU paths run through it in Rust), or None for a map
        that is not a dense feature map of the core. Built once per fit from
        the fitted attributes and dropped when pickled."""
        fmap = self.__dict__.get("_fmap")
        if fmap is None:
            fmap = self._build_feature_map()
            self._fmap = fmap
        return fmap

    def _build_feature_map(self) -> Any:
        """A new ``_core.FeatureMap`` of the fitted attributes (None: not a
        dense map of the core)."""
        return None

    def __getstate__(self) -> dict:
        state = dict(super().__getstate__())
        state.pop("_fmap", None)
        return state

    def _seed(self) -> int:
        """The 64-bit seed for the Rust ChaCha stream, from ``random_state``."""
        return seed_from_random_state(self.random_state)

    def __sklearn_tags__(self):  # type: ignore[no-untyped-def]
        tags = super().__sklearn_tags__()
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags
