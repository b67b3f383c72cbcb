"""Random binning features (docs/math/binning.rst): sparse maps of the Laplacian kernel."""

from __future__ import annotations

import warnings
from typing import Any, ClassVar

import numpy as np
import scipy.sparse
from sklearn.base import _fit_context
from sklearn.utils._param_validation import StrOptions

from . import _core
from ._base import RandomFeaturesBase, keep_state_on_failure
from ._validation import MAX_COUNT, Count, RealNumber, user_stacklevel

__all__ = ["RandomBinningFeatures"]


class RandomBinningFeatures(RandomFeaturesBase):
    """Random binning features of the Laplacian kernel (Rahimi & Recht, 2007).

    ``P = n_grids`` random grids cut the input space into axis-aligned
    boxes: grid ``p`` has, per input dimension ``a``, a pitch
    ``delta ~ Gamma(2, length_scale)`` and a shift ``u ~ U[0, delta)``, and a
    row ``x`` falls in the bin ``floor((x - u) / delta)`` (a vector of 64-bit
    integers). Each grid contributes one non-zero ``1/sqrt(P)`` in the column
    of the row's bin, so ``z(x) @ z(y)`` is the fraction of grids in which
    ``x`` and ``y`` share a bin, an unbiased estimate of the Laplacian kernel
    ``exp(-||x - y||_1 / length_scale)`` with variance ``k (1 - k) / P``.

    The output is a ``scipy.sparse.csr_matrix`` whose arrays are built in
    Rust and handed to SciPy without a copy (``int32`` indices when they fit,
    ``int64`` otherwise). It suits linear models on sparse input (``Ridge``,
    ``SGDClassifier``, ``LinearSVC``), and wins over random Fourier features
    on non-smooth or memorization-heavy targets.

    Two column modes:

    - ``hashing=None`` (vocabulary): ``fit`` numbers the bins occupied by the
      training rows, grid by grid, in order of first appearance. Training
      rows get exactly ``P`` non-zeros. At ``transform``, a bin that no
      training row occupied contributes nothing (the row has fewer than ``P``
      non-zeros): kernel estimates against training rows stay exact, only two
      new rows sharing an unseen bin lose that collision. Bins are identified
      by a seeded 64-bit hash of (grid, bin vector); two distinct bins of one
      grid merge only if their hashes collide (probability about
      ``n_bins**2 / 2**65``).
    - ``hashing=B`` (hashing trick): ``B`` columns shared by all grids,
      column ``hash(grid, bin) mod B``; no vocabulary, stateless transform.
      Values of one row that land in the same column add, which biases the
      estimate to ``k + (1 - k)/B + (P - 1)/B``: keep ``B`` much larger than
      ``P`` (a ``UserWarning`` is raised at fit when ``B < 100 P``).

    Parameters
    ----------
    n_grids : int
        Number of random grids ``P`` (>= 1): non-zeros per training row.
    kernel : {"laplacian"}, default="laplacian"
        The kernel ``exp(-||x - y||_1 / length_scale)``.
    length_scale : float, default=1.0
        Length scale ``l > 0`` of the kernel.
    hashing : int or None, default=None
        ``None`` for vocabulary mode, or the number of hashed columns ``B``.
    random_state : int, RandomState instance or None, default=None
        Seeds the grids (and the bin hash).

    Attributes
    ----------
    seed_ : int
        The 64-bit seed drawn from ``random_state`` at ``fit``; the grids
        were drawn from it.
    pitches_ : ndarray of shape (n_grids, n_features_in_), float64
        Grid pitches ``delta``.
    shifts_ : ndarray of shape (n_grids, n_features_in_), float64
        Grid shifts ``u`` in ``[0, delta)``.
    hash_seed_ : int
        Seed of the 64-bit bin hash.
    vocabulary_ : ndarray of shape (n_columns,), uint64
        Vocabulary mode only (absent in hashing mode): the hash of the bin
        behind each column.
    grid_offsets_ : ndarray of shape (n_grids + 1,), uint64
        Vocabulary mode only (absent in hashing mode): grid ``p`` owns
        columns ``grid_offsets_[p]:grid_offsets_[p + 1]``.
    n_features_in_ : int
        Number of input features.

    Examples
    --------
    >>> import numpy as np
    >>> from randfeat_rs import RandomBinningFeatures
    >>> X = np.random.default_rng(0).standard_normal((100, 3))
    >>> Z = RandomBinningFeatures(50, length_scale=2.0, random_state=0).fit_transform(X)
    >>> Z.shape[0], Z.nnz, Z.dtype
    (100, 5000, dtype('float64'))
    >>> bool(np.allclose((Z @ Z.T).diagonal(), 1.0))
    True
    """

    _parameter_constraints: ClassVar[dict] = {
        "n_grids": [Count(1, MAX_COUNT)],
        "kernel": [StrOptions({"laplacian"})],
        "length_scale": [RealNumber(0, None, closed="neither")],
        "hashing": [None, Count(1, MAX_COUNT)],
        "random_state": ["random_state"],
    }

    def __init__(
        self,
        n_grids: int,
        *,
        kernel: str = "laplacian",
        length_scale: float = 1.0,
        hashing: int | None = None,
        random_state: Any = None,
    ) -> None:
        self.n_grids = n_grids
        self.kernel = kernel
        self.length_scale = length_scale
        self.hashing = hashing
        self.random_state = random_state

    @property
    def pitches_(self) -> np.ndarray:
        """Grid pitches ``delta``, shape ``(n_grids, n_features_in_)``."""
        return self._fitted_map().pitches

    @property
    def shifts_(self) -> np.ndarray:
        """Grid shifts ``u``, shape ``(n_grids, n_features_in_)``."""
        return self._fitted_map().shifts

    @property
    def hash_seed_(self) -> int:
        """Seed of the 64-bit bin hash."""
        return self._fitted_map().hash_seed

    @property
    def vocabulary_(self) -> np.ndarray:
        """The hash of the bin behind each column (vocabulary mode)."""
        return self._vocabulary_part("vocabulary")

    @property
    def grid_offsets_(self) -> np.ndarray:
        """The first column of each grid, then the total (vocabulary mode)."""
        return self._vocabulary_part("grid_offsets")

    def _fitted_map(self) -> Any:
        """The fitted ``_core.BinningMap`` (an ``AttributeError`` before ``fit``)."""
        if "_map" not in self.__dict__:
            raise AttributeError("the map is not fitted")
        return self._map

    def _vocabulary_part(self, name: str) -> np.ndarray:
        value = getattr(self._fitted_map(), name)
        if value is None:
            raise AttributeError(f"{name}_ exists in vocabulary mode only (hashing=None)")
        return value

    def _fit(self, X: Any) -> scipy.sparse.csr_matrix | None:
        """Draw the grids (and learn the vocabulary); return the training features if known."""
        X = self._validate_input(X, reset=True)
        self._map, csr = _core.BinningMap.fit(
            X,
            n_grids=int(self.n_grids),
            kernel=self.kernel,
            length_scale=float(self.length_scale),
            seed=self._fit_seed(),
            hashing=None if self.hashing is None else int(self.hashing),
        )
        self._n_features_out = int(self._map.n_columns)
        if self.hashing is not None and self.hashing < 100 * self.n_grids:
            warnings.warn(
                f"hashing={self.hashing} < 100 * n_grids = {100 * self.n_grids}: hash "
                "collisions bias the kernel estimate by about n_grids / hashing "
                f"= {self.n_grids / self.hashing:.3g}",
                UserWarning,
                stacklevel=user_stacklevel(),
            )
        return None if csr is None else _to_csr(csr, X.shape[0])

    @keep_state_on_failure
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X: Any, y: Any = None) -> RandomBinningFeatures:
        """Draw the grids and, in vocabulary mode, learn the occupied bins of ``X``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training rows (finite; float32 stays float32, anything else becomes float64).
        y : None
            Ignored.

        Returns
        -------
        self : RandomBinningFeatures
        """
        self._fit(X)
        return self

    @keep_state_on_failure
    @_fit_context(prefer_skip_nested_validation=True)
    def fit_transform(self, X: Any, y: Any = None) -> scipy.sparse.csr_matrix:
        """``fit(X).transform(X)``, computed in one pass over ``X``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training rows.
        y : None
            Ignored.

        Returns
        -------
        Z : scipy.sparse.csr_matrix of shape (n_samples, n_columns), dtype of X
            Exactly ``n_grids`` stored values ``1/sqrt(n_grids)`` per row in
            vocabulary mode.
        """
        Z = self._fit(X)
        if Z is None:
            return self.transform(X)
        return Z

    def transform(self, X: Any) -> scipy.sparse.csr_matrix:
        """Map ``X`` to its sparse bin indicators.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features_in_)
            Rows to map (finite).

        Returns
        -------
        Z : scipy.sparse.csr_matrix of shape (n_samples, n_columns), dtype of X
            ``n_columns`` is the vocabulary size or ``hashing``. Values are
            ``1/sqrt(n_grids)`` (or multiples of it where hashed bins share a
            column); unseen bins (vocabulary mode) store nothing.
        """
        X = self._check_transform_input(X)
        return _to_csr(self._map.transform(X), X.shape[0])


def _to_csr(csr: tuple, n_rows: int) -> scipy.sparse.csr_matrix:
    """Wrap Rust-made ``(data, indices, indptr, n_cols)`` in a csr_matrix without copying."""
    data, indices, indptr, n_cols = csr
    return scipy.sparse.csr_matrix((data, indices, indptr), shape=(n_rows, int(n_cols)), copy=False)
