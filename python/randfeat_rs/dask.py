"""Dask arrays in and out: transforms, fits and predictions on data that do
not fit one machine (``pip install randfeat_rs[dask]``; see docs/guide/dask.rst).

Functions, not estimator methods: the estimators stay plain scikit-learn
estimators, and this module is the one place that imports dask (``import
randfeat_rs`` never does). Every function takes a :mod:`dask.array` input,
chunked along rows (a chunking along features is merged into whole rows
first), and runs on whatever scheduler is active: the threads of the local
process by default, or a cluster once a ``distributed.Client`` exists.

- :func:`transform`, :func:`predict`, :func:`predict_noisy`,
  :func:`predict_proba`, :func:`predict_latent` are lazy: one task per row
  block applies the fitted estimator (which travels to the workers by
  pickle, by value), with the output chunks, dtype and ``meta`` known
  before anything is computed.
- :func:`fit` fits :class:`~randfeat_rs.RandomFeatureGPR`,
  :class:`~randfeat_rs.SparseGPR` and :class:`~randfeat_rs.RandomFeatureGPC`:
  each row block's sufficient statistics are computed on a worker, merged
  by a tree reduction (never on one machine before the last merge), and the
  model is solved on the driver from the merged ``D x D`` (or ``M x M``)
  statistics. The statistics merge exactly, so the model equals the fit of
  one process on the same rows up to the rounding of the summation order
  (about ``1e-15`` relative in the statistics, times the condition number
  of the system solved from them in the model). A merge never modifies its inputs, so tasks
  that Dask recomputes after losing a worker cannot count rows twice.
- ``fit(RandomFeatureGPR(optimize=...), X, y)`` and ``fit(SparseGPR(optimize=...),
  X, y)`` fit the hyperparameters with the optimizer of the in-memory fit
  (L-BFGS, restarts, coarse levels, in Rust on the driver), the input
  blocks persisted on the workers. Every evaluation of the feature-space
  GP's log marginal likelihood is one tree reduction of the per-block
  statistics (``D^2`` float64) and a ``D x D`` solve on the driver (with one
  length scale, the profiled search over it); with ``ard=True`` a second
  reduction, with the solve sent to the blocks, gives the per-dimension
  length-scale gradient. Every evaluation of the
  sparse GP's bound and its gradient is two tree reductions (the
  statistics, then the gradient sums).
- :func:`sparse_objective` is one such evaluation of a
  :class:`~randfeat_rs.SparseGPR`'s objective and gradient.
"""

from __future__ import annotations

import copy
import math
import warnings
from typing import Any, Callable, Optional

import dask
import dask.array as da
import numpy as np
import scipy.sparse
from sklearn.base import clone
from sklearn.exceptions import DataConversionWarning, NotFittedError
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted

from . import _core
from ._gp import (
    RandomFeatureGPR,
    _features_chunk,
    _kernel_from_features,
    _optimize_names,
    fit_with_maclaurin_refits,
)
from ._gpc import GPC_CPU_ONLY, RandomFeatureGPC
from ._progress import progress_printer
from ._sparse_gp import SparseGPR
from ._validation import (
    check_regression_dtype,
    inducing_inputs,
    length_scale_values,
    user_stacklevel,
)
from .exceptions import InvalidDtypeError, InvalidInputError

__all__ = [
    "fit",
    "predict",
    "predict_latent",
    "predict_noisy",
    "predict_proba",
    "sparse_objective",
    "transform",
]

#: Fan-in of the tree reductions: statistics merged per task.
SPLIT_EVERY = 8

#: The rows an unfitted transformer of a fit is fitted on.
FIT_ROWS = 10_000

#: Why a SparseGPR on dask arrays has no GPU path (the message of ``device="gpu"``).
SPARSE_DASK_CPU_ONLY = (
    "a SparseGPR on dask arrays computes its statistics on the workers' CPUs in float64"
)


# --- input checks -------------------------------------------------------------------------


def _rows(X: Any, name: str = "X", *, known_rows: bool = True) -> da.Array:
    """``X`` as a 2-D dask array chunked along rows only (a chunking along
    features is merged into whole rows), with known row-chunk sizes when
    ``known_rows`` (fits count rows; the lazy per-block outputs do not)."""
    if not isinstance(X, da.Array):
        raise TypeError(
            f"`{name}` must be a dask.array.Array, got {type(X).__name__}; wrap in-memory "
            f"data with dask.array.from_array({name}, chunks=...) or call the estimator directly"
        )
    if X.ndim != 2:
        raise ValueError(f"`{name}` must be 2-D (n_samples, n_features), got {X.ndim}-D")
    if X.dtype.kind not in "fiub":
        # As the estimators' own validation: numbers (bool as 0 and 1);
        # complex data is refused, not cast to its real part.
        raise InvalidDtypeError(f"`{name}` must hold real numbers, got dtype {X.dtype}")
    if known_rows and any(np.isnan(c) for c in X.chunks[0]):
        raise ValueError(
            f"`{name}` has unknown row-chunk sizes; call {name}.compute_chunk_sizes() first"
        )
    if len(X.chunks[1]) > 1:
        X = X.rechunk({1: -1})
    return X


def _targets(y: Any, X: da.Array) -> da.Array:
    """``y`` as a 1-D dask array with the row chunks of ``X`` (rechunked
    when they differ)."""
    if not isinstance(y, da.Array):
        raise TypeError(
            f"`y` must be a dask.array.Array (row-chunked like `X`), got {type(y).__name__}"
        )
    if y.ndim == 2 and y.shape[1] == 1:
        # As the in-memory fits (scikit-learn's column_or_1d).
        warnings.warn(
            "A column-vector y was passed when a 1d array was expected. Please change the "
            "shape of y to (n_samples, ), for example using ravel().",
            DataConversionWarning,
            stacklevel=user_stacklevel(),
        )
        y = y[:, 0]
    if y.ndim != 1:
        raise ValueError(f"`y` must be 1-D (n_samples,), got shape {y.shape}")
    if y.dtype.kind == "c":
        raise InvalidDtypeError(f"`y` must hold real numbers or labels, got dtype {y.dtype}")
    if any(np.isnan(c) for c in y.chunks[0]):
        raise ValueError("`y` has unknown chunk sizes; call y.compute_chunk_sizes() first")
    if y.shape[0] != X.shape[0]:
        raise ValueError(f"`X` has {X.shape[0]} rows but `y` has {y.shape[0]} values")
    if y.chunks[0] != X.chunks[0]:
        y = y.rechunk({0: X.chunks[0]})
    return y


def _float_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype the estimators compute in: float32 kept, else float64."""
    return np.dtype(np.float32) if dtype == np.float32 else np.dtype(np.float64)


def _block_rows(x: np.ndarray) -> np.ndarray:
    """A row block as a C-contiguous float32/float64 array."""
    return np.ascontiguousarray(x, dtype=_float_dtype(x.dtype))


# --- transforms and predictions --------------------------------------------------------------


def _template(estimator: Any, method: str, d: int, dtype: np.dtype, **kwargs: Any) -> Any:
    """The output of ``estimator.<method>`` on zero rows (one row if the
    estimator refuses none), sliced to zero rows: the ``meta`` of the
    lazy result, with its dtype, type and width. Called when the graph is
    built, it also checks the feature count and ``kwargs`` up front."""
    fn = getattr(estimator, method)
    try:
        out = fn(np.zeros((0, d), dtype=dtype), **kwargs)
    except ValueError:
        out = fn(np.zeros((1, d), dtype=dtype), **kwargs)
    if isinstance(out, tuple):
        return tuple(o[:0] for o in out)
    return out[:0]


def _apply(x: np.ndarray, estimator: Any, method: str, **kwargs: Any) -> Any:
    """``estimator.<method>(x)`` on one row block (a worker task); a block
    of no rows (a boolean mask can empty one) gives the empty output that
    the predictors, which refuse zero rows, do not."""
    x = _block_rows(x)
    if x.shape[0] == 0:
        return _template(estimator, method, x.shape[1], x.dtype, **kwargs)
    return getattr(estimator, method)(x, **kwargs)


def transform(estimator: Any, X: Any) -> da.Array:
    """``estimator.transform`` of a dask array, lazily (one task per row block).

    Parameters
    ----------
    estimator : fitted transformer
        Any fitted transformer of this library (or another with a
        ``transform``); it travels to the workers by pickle.
    X : dask.array.Array of shape (n_samples, n_features)
        Chunked along rows (chunks along features are merged into whole
        rows first); the row-chunk sizes may be unknown (e.g. after
        boolean indexing), and so are the output's then.

    Returns
    -------
    dask.array.Array of shape (n_samples, n_components)
        The row chunks of ``X`` and one chunk of all ``n_components``
        columns; float32 for float32 input, else float64. For
        :class:`~randfeat_rs.RandomBinningFeatures` every block is a
        ``scipy.sparse.csr_matrix`` (and so is ``meta``).

    Examples
    --------
    >>> import dask.array as da
    >>> from randfeat_rs import RandomFourierFeatures
    >>> from randfeat_rs.dask import transform
    >>> X = da.random.default_rng(0).standard_normal((1000, 3), chunks=(300, 3))
    >>> rff = RandomFourierFeatures(64, random_state=0).fit(X[:10].compute())
    >>> Z = transform(rff, X)
    >>> Z.shape, Z.chunks[0], Z.dtype.name
    ((1000, 64), (300, 300, 300, 100), 'float64')
    """
    check_is_fitted(estimator)
    return _map_rows(estimator, "transform", X)


def _map_rows(estimator: Any, method: str, X: Any) -> da.Array:
    """``estimator.<method>`` of every row block of ``X``, lazily: a 2-D
    output (columns in one chunk; scipy.sparse blocks as CSR) or a 1-D one."""
    X = _rows(X, known_rows=False)
    meta = _template(estimator, method, X.shape[1], _float_dtype(X.dtype))
    if scipy.sparse.issparse(meta):
        meta = scipy.sparse.csr_matrix(meta)
    if meta.ndim == 1:
        chunks: tuple = (X.chunks[0],)
        return X.map_blocks(
            _apply, estimator, method, chunks=chunks, drop_axis=1, dtype=meta.dtype, meta=meta
        )
    chunks = (X.chunks[0], (meta.shape[1],))
    return X.map_blocks(_apply, estimator, method, chunks=chunks, dtype=meta.dtype, meta=meta)


def _for_prediction(estimator: Any) -> Any:
    """The fitted estimator as shipped to the workers for predictions: a
    RandomFeatureGPR without its training statistics (``stats_``, as large
    as its factor and not read by predictions), others as they are. The
    graph holds one copy, sent once per computation."""
    check_is_fitted(estimator)
    if isinstance(estimator, RandomFeatureGPR) and "stats_" in estimator.__dict__:
        estimator = copy.copy(estimator)
        del estimator.stats_
    return estimator


def _apply_pair(x: np.ndarray, estimator: Any, method: str, **kwargs: Any) -> np.ndarray:
    """The two outputs of ``estimator.<method>`` on a row block, as the
    columns of one ``(n, 2)`` block (see :func:`_apply`)."""
    a, b = _apply(x, estimator, method, **kwargs)
    return np.column_stack([a, b])


def _pair(estimator: Any, method: str, X: Any, **kwargs: Any) -> tuple[da.Array, da.Array]:
    """The two 1-D outputs of ``estimator.<method>`` of every row block."""
    estimator = _for_prediction(estimator)
    X = _rows(X, known_rows=False)
    a, b = _template(estimator, method, X.shape[1], _float_dtype(X.dtype), **kwargs)
    meta = np.column_stack([a, b])
    both = X.map_blocks(
        _apply_pair,
        estimator,
        method,
        chunks=(X.chunks[0], (2,)),
        dtype=meta.dtype,
        meta=meta,
        **kwargs,
    )
    return both[:, 0], both[:, 1]


def predict(estimator: Any, X: Any, return_std: bool = False) -> Any:
    """``estimator.predict`` of a dask array, lazily.

    Parameters
    ----------
    estimator : fitted estimator
        A regressor or classifier (for the standard deviation, one of this
        library's GP regressors).
    X : dask.array.Array of shape (n_samples, n_features)
    return_std : bool, default=False
        Also return the latent function's standard deviation.

    Returns
    -------
    mean : dask.array.Array of shape (n_samples,)
        Predictions (labels of ``classes_`` for a classifier).
    std : dask.array.Array of shape (n_samples,), float64
        Only with ``return_std=True``.
    """
    if return_std:
        return _pair(estimator, "predict", X, return_std=True)
    return _map_rows(_for_prediction(estimator), "predict", X)


def predict_noisy(estimator: Any, X: Any) -> tuple[da.Array, da.Array]:
    """``estimator.predict_noisy`` (mean and std of a noisy observation) of
    a dask array, lazily.

    Returns
    -------
    mean, std : dask.array.Array of shape (n_samples,), float64
    """
    return _pair(estimator, "predict_noisy", X)


def predict_proba(estimator: Any, X: Any) -> da.Array:
    """``estimator.predict_proba`` of a dask array, lazily.

    Returns
    -------
    dask.array.Array of shape (n_samples, n_classes), float64
    """
    return _map_rows(_for_prediction(estimator), "predict_proba", X)


def predict_latent(estimator: Any, X: Any) -> tuple[da.Array, da.Array]:
    """``estimator.predict_latent`` (a GP classifier's latent means and
    variances) of a dask array, lazily.

    Returns
    -------
    mean, var : dask.array.Array of shape (n_samples, n_classes), float64
    """
    estimator = _for_prediction(estimator)
    X = _rows(X, known_rows=False)
    mean, var = _template(estimator, "predict_latent", X.shape[1], _float_dtype(X.dtype))
    meta = np.hstack([mean, var])
    c = mean.shape[1]
    both = X.map_blocks(
        _apply_latent,
        estimator,
        chunks=(X.chunks[0], (2 * c,)),
        dtype=meta.dtype,
        meta=meta,
    )
    return both[:, :c], both[:, c:]


def _apply_latent(x: np.ndarray, estimator: Any) -> np.ndarray:
    """Latent means and variances of a row block, side by side (see
    :func:`_apply`)."""
    mean, var = _apply(x, estimator, "predict_latent")
    return np.hstack([mean, var])


# --- tree reduction ---------------------------------------------------------------------------


def _merged(parts: list[Any]) -> Any:
    """The merge of some statistics (None for empty blocks), into a copy:
    the inputs stay as they are, so a recomputed task gives the same sum.
    Statistics are the library's mergeable sums or float64 arrays (added)."""
    parts = [p for p in parts if p is not None]
    if not parts:
        return None
    out = parts[0].copy()
    for p in parts[1:]:
        if isinstance(out, np.ndarray):
            out += p
        else:
            out.merge(p)
    return out


def _tree_reduce(parts: list[Any], split_every: int = SPLIT_EVERY) -> Any:
    """A delayed tree of :func:`_merged` over delayed statistics."""
    merge = dask.delayed(_merged, pure=True)
    while len(parts) > 1:
        parts = [merge(parts[i : i + split_every]) for i in range(0, len(parts), split_every)]
    return parts[0] if parts else dask.delayed(None)


def _blocks(X: da.Array, y: da.Array) -> list[tuple[Any, Any]]:
    """The delayed row blocks of ``X`` and ``y``, pairwise."""
    xb = X.to_delayed().ravel()
    yb = y.to_delayed().ravel()
    return list(zip(xb, yb))


# --- fits ----------------------------------------------------------------------------------


def _gpr_block(model: RandomFeatureGPR, x: np.ndarray, y: np.ndarray) -> Any:
    """The statistics of one row block under the fitted transformer (a
    worker task); None for an empty block."""
    if x.shape[0] == 0:
        return None
    x, y = model._validate_xy(x, y, reset=False)
    work = copy.copy(model)
    work.stats_ = None
    work.verbose = False
    work._accumulate(x, y)
    return work.stats_


def _gpc_block(model: RandomFeatureGPC, x: np.ndarray, y: np.ndarray) -> Any:
    """The per-class statistics of one row block (a worker task)."""
    if x.shape[0] == 0:
        return None
    x = _block_rows(x)
    n_classes = len(model.classes_)
    codes = np.minimum(np.searchsorted(model.classes_, y), n_classes - 1).astype(np.int64)
    if np.any(model.classes_[codes] != y):
        raise ValueError("`y` holds a label missing from the classes found in it")
    stats = None
    step = int(model.chunk_size)
    for lo in range(0, x.shape[0], step):
        phi = _features_chunk(model.features_, x[lo : lo + step])
        if stats is None:
            stats = _core.DirichletClassStats(n_classes, phi.shape[1])
        stats.accumulate(phi, codes[lo : lo + step])
    return stats


def _sparse_prior(model: SparseGPR, X: da.Array, scale: _DataScale) -> dict:
    """The prior of a SparseGPR fitted on dask arrays: its inducing inputs
    (an array) and hyperparameters as the keyword arguments of
    ``_core.SparsePrior``, those left None at the in-memory fit's defaults
    (the data's ``scale``)."""
    z = model.inducing
    if isinstance(z, str):
        raise InvalidInputError(
            "a SparseGPR fitted on dask arrays needs its inducing inputs as an array "
            "(`inducing`, e.g. chosen on a subsample in memory)"
        )
    d = int(X.shape[1])
    z = inducing_inputs(z)
    if z.shape[1] != d:
        raise ValueError(
            f"`inducing` must have shape (M, {d}) for `X` with {d} features, got {z.shape}"
        )
    if model.length_scale is None:
        ls = scale.length_scales()
    else:
        ls = length_scale_values(model.length_scale)
    if model.ard and len(ls) == 1:
        ls = ls * d
    return {
        "inducing": z,
        "kernel": model.kernel,
        "length_scale": ls,
        "kernel_variance": (
            scale.kernel_variance()
            if model.kernel_variance is None
            else float(model.kernel_variance)
        ),
        "noise_variance": (
            scale.noise_variance() if model.noise_variance is None else float(model.noise_variance)
        ),
    }


class _DataScale:
    """The data's scale of a fit on dask arrays, computed once when first
    asked: the length scales of :func:`_data_length_scales` and the targets'
    moments, whose defaults (``var(y)`` and ``0.1 var(y)``, refused as in
    memory for a variance beyond float64's range) are the in-memory fit's."""

    def __init__(self, X: da.Array, y: da.Array, ard: bool) -> None:
        self._X, self._y, self._ard = X, y, ard
        self._ls: Optional[list] = None
        self._moments: Optional[dict] = None

    def length_scales(self) -> list:
        if self._ls is None:
            self._ls = _data_length_scales(self._X, self._ard)
        return self._ls

    def moments(self) -> dict:
        if self._moments is None:
            self._moments = _target_moments(self._y)
        return self._moments

    def noise_variance(self) -> float:
        return _initial_noise_variance(self.moments())

    def kernel_variance(self) -> float:
        # The refusal of a variance beyond the float64 range first.
        self.noise_variance()
        return 1.0 if self.moments()["constant"] else float(self.moments()["var"])


def _sparse_block(
    prior: Any, method: str, chunk: Optional[int], x: np.ndarray, y: np.ndarray
) -> Any:
    """The sparse GP's statistics of one row block (a worker task)."""
    if x.shape[0] == 0:
        return None
    return _core.SparseStats.of_rows(
        _block_rows(x),
        np.ascontiguousarray(y, dtype=np.float64),
        prior=prior,
        method=method,
        chunk_size=chunk,
    )


def _reduce_blocks(block_fn: Callable, static: tuple, X: da.Array, y: da.Array) -> Any:
    """The delayed tree-reduced statistics of ``block_fn(*static, x, y)``."""
    fn = dask.delayed(block_fn, pure=True)
    shared = [dask.delayed(s, pure=True) if not _is_plain(s) else s for s in static]
    return _tree_reduce([fn(*shared, xb, yb) for xb, yb in _blocks(X, y)])


def _is_plain(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float))


def _reduced(block_fn: Callable, static: tuple, X: da.Array, y: da.Array) -> Any:
    """The merged statistics of ``block_fn(*static, x, y)`` over the blocks,
    computed (one tree reduction); a ValueError when there are no rows."""
    (stats,) = dask.compute(_reduce_blocks(block_fn, static, X, y))
    if stats is None:
        raise ValueError("`X` needs at least one row")
    return stats


def _target_moments(y: da.Array) -> dict:
    """The mean and population variance of ``y`` and whether its entries
    are all equal, computed (one pass): the moments the in-memory fits'
    target checks and defaults use. Equal targets are told by their range,
    not by a zero variance, which is also what a variance that underflows
    gives."""
    if int(y.shape[0]) == 0:
        return {"mean": 0.0, "var": 0.0, "constant": True}
    y64 = y.astype(np.float64)
    mean, var, lo, hi, nan, inf = dask.compute(
        da.mean(y64),
        da.var(y64),
        da.min(y64),
        da.max(y64),
        da.isnan(y64).any(),
        da.isinf(y64).any(),
    )
    # The in-memory fits' refusals (scikit-learn's), before any moment.
    if nan:
        raise ValueError("Input y contains NaN.")
    if inf:
        raise ValueError("Input y contains infinity or a value too large for dtype('float64').")
    return {"mean": float(mean), "var": float(var), "constant": bool(lo == hi)}


def _check_fit_targets(y: da.Array, moments: dict, center: bool) -> None:
    """The in-memory fits' refusals of constant targets and of targets
    beyond float64's range for a hyperparameter fit, from ``y``'s
    :func:`_target_moments`."""
    _core.check_fit_targets(n=int(y.shape[0]), center=center, **moments)


def _initial_noise_variance(moments: dict) -> float:
    """``0.1 var(y)`` (0.1 for constant targets), refused as in the
    in-memory fits for targets that vary with a variance beyond float64's
    range."""
    return _core.initial_noise_variance_of(var=moments["var"], constant=moments["constant"])


def fit(estimator: Any, X: Any, y: Any, *, persist: bool = True) -> Any:
    """Fit a GP model on dask arrays: per-block statistics on the workers,
    merged by a tree reduction, solved on the driver.

    The estimator is cloned (its parameters kept) and returned fitted, equal
    to ``estimator.fit(X.compute(), y.compute())`` up to the rounding of
    the summation order under the conditions below; the rows are never
    collected on one machine, the driver receives the merged statistics
    only (``O(D^2)``, or ``O(M^2)`` for the sparse GP).

    - :class:`~randfeat_rs.RandomFeatureGPR` without ``optimize``: a
      fitted ``features`` is used as it is; an unfitted one's clone is
      fitted on the first :data:`FIT_ROWS` (10,000) rows, which equals
      the in-memory fit for the transformers that only use the number of
      features, such as :class:`~randfeat_rs.RandomFourierFeatures`,
      :class:`~randfeat_rs.PolynomialSketch` and scikit-learn's
      ``RBFSampler`` (a data-dependent one, e.g. Nystroem landmarks, sees
      those rows only; fit it on a sample of your choice and pass it
      fitted). ``noise_variance=None`` takes ``0.1 var(y)`` over all
      rows.
    - :class:`~randfeat_rs.RandomFeatureGPR` with ``optimize`` (a
      :class:`~randfeat_rs.RandomFourierFeatures` or
      :class:`~randfeat_rs.MaclaurinFeatures` transformer, fitted as
      above): the in-memory optimizer (L-BFGS, ``n_restarts`` restarts,
      coarse-to-fine levels, in Rust on the driver) with every evaluation
      of the marginal likelihood one tree reduction of the per-block
      statistics, ``D^2`` float64 (refused beyond 256 MiB), and a ``D x D``
      solve on the driver: with one length scale the profiled search over
      it (the variances maximized in closed form); with ``ard=True`` and
      the length scales free, L-BFGS, a second reduction sending ``w`` and
      ``A^-1`` of that solve to the blocks, which return their part of the
      per-dimension gradient (``n_features`` floats each), at the cost of
      the in-memory evaluation's second pass. It follows the in-memory fit's path (the
      same evaluations up to the rounding of the summation order) to its
      optimum, with the same ``n_iter_``.
    - :class:`~randfeat_rs.RandomFeatureGPC`: the classes are the distinct
      labels of ``y`` (one pass over ``y``), the transformer as above (an
      unfitted one, or the default map, seeded from ``seed_`` as the
      in-memory fit seeds it), ``alpha_epsilon`` a value and ``optimize``
      None: ``"auto"`` and ``optimize`` need passes this fit does not make
      (choose them in memory on a sample and pass the fitted ``features_``
      and ``alpha_epsilon_``). The fitted attributes are those of the
      in-memory fit.
    - :class:`~randfeat_rs.SparseGPR`: the inducing inputs as an array
      (``inducing``, e.g. chosen on a subsample in memory); hyperparameters
      left None take the in-memory defaults (the median pairwise distance
      of every ``ceil(N / 500)``-th row, per column with ``ard``, over the
      columns' standard deviations; ``var(y)`` and ``0.1 var(y)``), and
      given starts are compared with them as in memory.
      With fixed hyperparameters one pass; with ``optimize`` (and
      ``optimize_inducing``) the optimizer of the in-memory fit
      (restarts, coarse levels, the stage over the inducing inputs) with
      every evaluation of the bound and its gradient two tree reductions:
      the statistics (``O(M^2)`` to the driver), then, with the prior sent
      back to the workers, the gradient sums. It reaches the in-memory
      optimum; the end of the path (in the bound's rounding noise) and
      ``n_iter_`` can differ with the summation order.

    Parameters
    ----------
    estimator : RandomFeatureGPR, SparseGPR or RandomFeatureGPC
        The unfitted model (its parameters are used; it is not modified).
    X : dask.array.Array of shape (n_samples, n_features)
        Training inputs, chunked along rows.
    y : dask.array.Array of shape (n_samples,)
        Targets or labels; rechunked to the row chunks of ``X`` when they
        differ.
    persist : bool, default=True
        For hyperparameter fits (``optimize``): persist ``X`` and ``y`` on
        the workers for the optimizer's evaluations (``False``: every
        evaluation recomputes or reloads the blocks, for data larger than
        the cluster's memory). Other fits make one pass and ignore it.

    Returns
    -------
    The fitted clone of ``estimator``.

    Raises
    ------
    TypeError
        For a non-dask ``X`` or ``y``, an ``X`` without real numbers,
        regression targets that are not numbers, or an estimator this
        function does not fit.
    ValueError
        For arrays of mismatched lengths or unknown chunk sizes.
    InvalidInputError
        For a configuration that needs all rows in one place (see above).
    """
    X = _rows(X)
    y = _targets(y, X)
    if isinstance(estimator, (SparseGPR, RandomFeatureGPR)):
        check_regression_dtype(y.dtype)
    if isinstance(estimator, SparseGPR):
        return _fit_sparse(estimator, X, y, persist)
    if isinstance(estimator, RandomFeatureGPR):
        return _fit_feature_gpr(estimator, X, y, persist)
    if isinstance(estimator, RandomFeatureGPC):
        return _fit_gpc(estimator, X, y)
    raise TypeError(
        "`estimator` must be a RandomFeatureGPR, SparseGPR or RandomFeatureGPC, got "
        f"{type(estimator).__name__}"
    )


def _is_fitted(estimator: Any) -> bool:
    """Whether scikit-learn's ``check_is_fitted`` accepts ``estimator``."""
    try:
        check_is_fitted(estimator)
    except NotFittedError:
        return False
    return True


def _fitted_features(features: Any, X: da.Array) -> Any:
    """The transformer of a fit on dask arrays: a fitted one as it is (a
    copy), an unfitted one's clone fitted on the first :data:`FIT_ROWS`
    rows of ``X`` (brought to the driver)."""
    if not _is_fitted(features):
        if X.shape[0] == 0:
            raise ValueError("`X` needs at least one row")
        return clone(features).fit(_block_rows(X[:FIT_ROWS].compute()))
    n_in = getattr(features, "n_features_in_", X.shape[1])
    if n_in != X.shape[1]:
        raise ValueError(f"the fitted `features` take {n_in} input features, `X` has {X.shape[1]}")
    return copy.deepcopy(features)


def _scale_length_scale(X: da.Array) -> float:
    """The default map's length scale over all rows of ``X`` (one pass), as
    ``_core.scale_length_scale`` gives it in memory: ``sqrt(d var / 2)``
    with ``var`` the population variance of every entry, 1 when that is not
    finite and positive."""
    var = float(da.var(X.astype(np.float64)).compute())
    length_scale = math.sqrt(X.shape[1] * var / 2)
    return length_scale if math.isfinite(length_scale) and length_scale > 0 else 1.0


def _fit_feature_gpr(
    estimator: RandomFeatureGPR, X: da.Array, y: da.Array, persist: bool
) -> RandomFeatureGPR:
    model = clone(estimator)
    model._validate_params()
    model._check_ard()
    model.__dict__.pop("seed_", None)
    # The estimator's own transformer (clone() unfits the model's copy): a
    # fitted one as it is; the default map, or an unfitted one's clone,
    # seeded from seed_ as the in-memory fit seeds it.
    features = estimator.features
    if features is None or not _is_fitted(features):
        features = model._unfitted_features(lambda: _scale_length_scale(X))
    model.features_ = _fitted_features(features, X)
    model._resolve_features_device()
    model.n_features_in_ = int(X.shape[1])
    model.n_iter_ = 0
    if model._fits_hyperparameters():
        _optimize_feature_gpr(model, X, y, persist)
    else:
        if model.noise_variance is None:
            # Before the statistics, as in memory: targets whose default
            # noise variance is not a float64 are refused as such (a pass
            # over y alone).
            model.noise_variance_ = _initial_noise_variance(_target_moments(y))
        else:
            model.noise_variance_ = float(model.noise_variance)
        (stats,) = dask.compute(_reduce_blocks(_gpr_block, (model,), X, y))
        if stats is None:
            raise ValueError("`X` needs at least one row")
        model.stats_ = stats
    model._solve()
    return model


def _feature_lml_block(
    fmap: Any,
    drawn_length_scale: list,
    values: list,
    chunk: int,
    x: np.ndarray,
    y: np.ndarray,
) -> Any:
    """The sums of the feature-space LML of one row block at ``values`` (a
    worker task); None for an empty block."""
    if x.shape[0] == 0:
        return None
    return _core.FeatureLmlSums.of_rows(
        np.ascontiguousarray(x, dtype=np.float64),
        np.ascontiguousarray(y, dtype=np.float64),
        features=fmap,
        drawn_length_scale=drawn_length_scale,
        values=values,
        chunk_size=chunk,
    )


def _gradient_pass_block(
    second: Any, fmap: Any, drawn_length_scale: list, chunk: int, x: np.ndarray, y: np.ndarray
) -> Any:
    """One row block's part of the per-dimension length-scale gradient
    (the entries, then the row count) for the driver's solve ``second`` (a
    worker task); None for an empty block."""
    if x.shape[0] == 0:
        return None
    return second.of_rows(
        np.ascontiguousarray(x, dtype=np.float64),
        np.ascontiguousarray(y, dtype=np.float64),
        features=fmap,
        drawn_length_scale=drawn_length_scale,
        chunk_size=chunk,
    )


def _level(levels: list, level: int) -> tuple[da.Array, da.Array]:
    """The rows of the optimizer's coarse level ``level``: ``levels[0]`` is
    ``(X, y)``, level ``j + 1`` the strided rows ``0, 4, 8, ...`` of level
    ``j`` (``n_j // 4`` of them), as the in-memory subsample; added to
    ``levels`` as they are first asked for."""
    while len(levels) <= level:
        xl, yl = levels[-1]
        stop = 4 * (xl.shape[0] // 4)
        levels.append((xl[:stop:4], yl[:stop:4]))
    return levels[level]


def _optimize_feature_gpr(model: RandomFeatureGPR, X: da.Array, y: da.Array, persist: bool) -> None:
    """The marginal-likelihood fit of ``model.optimize`` on dask arrays: the
    in-memory optimizer (``_core.feature_gp_optimize_blocks``: L-BFGS,
    restarts and coarse levels in Rust) asks for the merged per-block sums
    of every evaluation, one tree reduction each (two with ``ard=True``),
    over ``X`` and ``y`` persisted on the workers (with ``persist``), on
    the coarse levels of :func:`_level`."""
    names = _optimize_names(model.optimize)
    f = model._optimizable_features()
    if persist:
        X, y = dask.persist(X, y)
    if model.noise_variance is None or names:
        moments = _target_moments(y)
    # In the in-memory order: the default first, then the fit's checks.
    if model.noise_variance is None:
        noise = _initial_noise_variance(moments)
    else:
        noise = float(model.noise_variance)
    if names:
        _check_fit_targets(y, moments, bool(model.center_y))
    chunk = int(model.chunk_size)
    levels = [(X, y)]
    data_length_scale = None
    if "length_scale" in names:
        data_length_scale = _data_length_scales(X, bool(model.ard))

    with progress_printer(type(model).__name__, bool(model.verbose)) as progress:

        def fit_at(f: Any) -> tuple:
            fmap = f._feature_map()
            drawn = length_scale_values(f.length_scale)

            def evaluate(values: list, level: int) -> Any:
                xl, yl = _level(levels, level)
                return _reduced(_feature_lml_block, (fmap, drawn, values, chunk), xl, yl)

            def gradient_pass(second: Any, level: int) -> Any:
                xl, yl = _level(levels, level)
                return _reduced(_gradient_pass_block, (second, fmap, drawn, chunk), xl, yl)

            return _core.feature_gp_optimize_blocks(
                fmap,
                evaluate=evaluate,
                gradient_pass=gradient_pass,
                n_rows=int(X.shape[0]),
                length_scale=drawn,
                noise_variance=noise,
                optimize=names,
                n_restarts=int(model.n_restarts),
                seed=model._fit_seed(),
                center=bool(model.center_y),
                ard=bool(model.ard),
                data_length_scale=data_length_scale,
                progress=progress,
            )

        def refit(f: Any, length_scale: float) -> Any:
            # Fitted as an unfitted transformer is (_fitted_features).
            return (
                clone(f)
                .set_params(length_scale=length_scale)
                .fit(_block_rows(X[:FIT_ROWS].compute()))
            )

        f, fitted = fit_with_maclaurin_refits(f, fit_at, refit, bool(model.center_y), progress)
    model._set_optimum(f, fitted)


def _fit_gpc(estimator: RandomFeatureGPC, X: da.Array, y: da.Array) -> RandomFeatureGPC:
    model = clone(estimator)
    model._validate_params()
    model._resolve_device(unsupported=GPC_CPU_ONLY)
    if model._optimize_names():
        raise InvalidInputError(
            "fit(RandomFeatureGPC) on dask arrays solves at the transformer's "
            f"hyperparameters in one pass and cannot fit optimize={model.optimize!r}: fit "
            "RandomFeatureGPC(optimize=...) in memory on a sample and pass its fitted "
            "`features_` with optimize=None"
        )
    if isinstance(model.alpha_epsilon, str):
        raise InvalidInputError(
            "fit(RandomFeatureGPC) on dask arrays needs `alpha_epsilon` as a value, got "
            f"{model.alpha_epsilon!r} (which scores every candidate on held-out rows): "
            "choose it in memory on a sample (its fitted `alpha_epsilon_`)"
        )
    classes = np.asarray(da.unique(y).compute())
    check_classification_targets(classes)
    if classes.shape[0] < 2:
        raise ValueError(
            "`y` must hold at least 2 classes to train a classifier, "
            f"got {classes.shape[0]} class(es)"
        )
    model.classes_ = classes
    model._fit_seed()
    features = estimator.features
    if features is None or not _is_fitted(features):
        # Seeded from seed_ as the in-memory fit seeds it.
        features = model._unfitted_features()
    model.features_ = _fitted_features(features, X)
    model.n_features_in_ = int(X.shape[1])
    model.alpha_epsilon_ = float(model.alpha_epsilon)
    stats = _reduced(_gpc_block, (model,), X, y)
    model._model = _core.DirichletGPC.fit(stats, model.alpha_epsilon_)
    model.length_scale_, model.kernel_variance_ = _kernel_from_features(model.features_)
    model.n_iter_ = 0
    model.log_marginal_likelihood_ = float(sum(model._model.class_lml))
    return model


def _fit_sparse(estimator: SparseGPR, X: da.Array, y: da.Array, persist: bool) -> SparseGPR:
    model = clone(estimator)
    model._validate_params()
    model._resolve_device(unsupported=SPARSE_DASK_CPU_ONLY)
    d = int(X.shape[1])
    seed = model._fit_seed()
    if len(model.optimize) == 0 and not model.optimize_inducing:
        prior = _core.SparsePrior(**_sparse_prior(model, X, _DataScale(X, y, bool(model.ard))))
        stats = _sparse_stats(model, prior, X, y)
        model._gp = stats.fit(prior=prior, center_y=bool(model.center_y))
    else:
        model._gp = _optimize_sparse(model, seed, X, y, persist)
    model.n_features_in_ = d
    return model


def _optimize_sparse(model: SparseGPR, seed: int, X: da.Array, y: da.Array, persist: bool) -> Any:
    """The fitted ``_core.SparseGp`` of the hyperparameter fit on dask
    arrays: the in-memory optimizer (``_core.sparse_gp_optimize_blocks``:
    L-BFGS, restarts, coarse levels and the stage over the inducing inputs
    in Rust) asks for the statistics and gradient sums of every evaluation
    (two tree reductions; the statistics alone where it compares starts)
    over ``X`` and ``y`` persisted on the workers
    (with ``persist``), on the coarse levels of :func:`_level`. The start
    is the given values, those left None at the data's scale, compared
    with the data's scale as in memory."""
    if persist:
        X, y = dask.persist(X, y)
    scale = _DataScale(X, y, bool(model.ard))
    if model.optimize:
        # In the in-memory order: the fit's refusals of the targets first.
        _check_fit_targets(y, scale.moments(), bool(model.center_y))
    start = _sparse_prior(model, X, scale)
    levels = [(X, y)]
    data_scale = {}
    if model.optimize:
        data_scale = {
            "data_length_scale": scale.length_scales(),
            "data_target_variance": scale.kernel_variance(),
        }

    def evaluate(prior: Any, level: int, want_grad: bool) -> tuple[Any, Any]:
        xl, yl = _level(levels, level)
        if not want_grad:
            # The comparison of starts: the statistics' reduction alone.
            return _sparse_stats(model, prior, xl, yl), None
        return _sparse_passes(model, prior, xl, yl)

    with progress_printer(type(model).__name__, bool(model.verbose)) as progress:
        return _core.sparse_gp_optimize_blocks(
            evaluate=evaluate,
            n_rows=int(X.shape[0]),
            inducing=start["inducing"],
            method=model.method,
            kernel=start["kernel"],
            length_scale=start["length_scale"],
            kernel_variance=start["kernel_variance"],
            noise_variance=start["noise_variance"],
            ard=bool(model.ard),
            optimize=[str(n) for n in model.optimize],
            optimize_inducing=bool(model.optimize_inducing),
            n_restarts=int(model.n_restarts),
            max_iter=int(model.max_iter),
            center_y=bool(model.center_y),
            seed=seed,
            progress=progress,
            **data_scale,
        )


def _data_length_scales(X: da.Array, ard: bool) -> list:
    """The length scales of the data's scale that the in-memory fits start
    from: the median pairwise distance of every ``ceil(N / 500)``-th row,
    with ``ard`` per column (each column on its own standard deviation)."""
    step = max(1, -(-int(X.shape[0]) // 500))
    sample = np.asarray(X[::step].compute(), dtype=np.float64)
    if not ard:
        return [_core.median_pairwise_distance(sample)]
    spread = np.asarray(da.std(X.astype(np.float64), axis=0).compute(), dtype=np.float64)
    return _core.spread_length_scales(sample, [float(s) for s in spread])


def _sparse_stats(model: SparseGPR, prior: Any, X: da.Array, y: da.Array) -> Any:
    """The tree-reduced first-pass statistics, computed."""
    chunk = None if model.chunk_size is None else int(model.chunk_size)
    return _reduced(_sparse_block, (prior, model.method, chunk), X, y)


def _sparse_gradient_block(
    stats: Any, prior: Any, center: bool, chunk: Optional[int], x: np.ndarray, y: np.ndarray
) -> Any:
    """The second pass's gradient sums of one row block (a worker task)."""
    if x.shape[0] == 0:
        return None
    return stats.gradient_sums(
        _block_rows(x),
        np.ascontiguousarray(y, dtype=np.float64),
        prior=prior,
        center_y=center,
        chunk_size=chunk,
    )


def _sparse_passes(model: SparseGPR, prior: Any, X: da.Array, y: da.Array) -> tuple[Any, Any]:
    """The statistics at ``prior`` and the gradient sums of their bound's
    adjoints: two tree reductions."""
    center = bool(model.center_y)
    chunk = None if model.chunk_size is None else int(model.chunk_size)
    stats = _sparse_stats(model, prior, X, y)
    sums = _reduced(_sparse_gradient_block, (stats, prior, center, chunk), X, y)
    return stats, sums


def sparse_objective(estimator: SparseGPR, X: Any, y: Any) -> tuple[float, np.ndarray]:
    """One distributed evaluation of a :class:`~randfeat_rs.SparseGPR`'s
    objective and its gradient at the estimator's fixed prior.

    The objective of ``estimator.method`` (VFE's bound or FITC's log
    marginal likelihood, of the centered targets with ``center_y=True``)
    at ``inducing`` (an array) and the given ``length_scale``,
    ``kernel_variance`` and ``noise_variance`` (those left None at the
    in-memory fit's defaults): the value the in-memory fit reports as
    ``log_marginal_likelihood_`` with ``optimize=()``.

    Returns
    -------
    value : float
    gradient : ndarray of shape (k + 2,)
        With respect to ``(ln l_1, ..., ln l_k, ln kernel_variance, ln
        noise_variance)`` (``k`` = 1, or ``n_features`` with ``ard=True``).
    """
    X = _rows(X)
    y = _targets(y, X)
    check_regression_dtype(y.dtype)
    if not isinstance(estimator, SparseGPR):
        raise TypeError(f"`estimator` must be a SparseGPR, got {type(estimator).__name__}")
    estimator._validate_params()
    scale = _DataScale(X, y, bool(estimator.ard))
    prior = _core.SparsePrior(**_sparse_prior(estimator, X, scale))
    stats, sums = _sparse_passes(estimator, prior, X, y)
    value, grad, _ = stats.objective(sums, prior=prior, center_y=bool(estimator.center_y))
    return float(value), np.asarray(grad)
