"""Dirichlet-based Gaussian-process classifiers (Milios et al. 2018).

Every class becomes a GP regression with heteroscedastic Gaussian noise on
transformed labels, solved in closed form (see docs/math/classification.rst):
with ``alpha = onehot(y) + alpha_epsilon``, class ``c`` regresses the
targets ``log(alpha) - noise / 2`` with noise variances
``log(1 / alpha + 1)`` (a lognormal matched to the mean and variance of a
Gamma(alpha, 1) draw, so that normalized exponentials of the latents follow
the Dirichlet posterior of the class probabilities). Class probabilities
are the expectation of the softmax of the independent Gaussian latents,
computed deterministically in Rust by a fixed quadrature (same input, same
probabilities).

:class:`RandomFeatureGPC` solves the regressions in the space of any
feature transformer: one pass over the rows gives every class (per-class
Grams ``Phi_k^T Phi_k``, ``O(N D^2)`` in total), memory ``O(C D^2)``.
:class:`ExactGPC` is the same model with the exact Gaussian kernel
(``O(N^3)``, small ``N``), the reference for the approximations.
:class:`SparseGPC` solves the regressions on the inducing-point model of
:class:`SparseGPR` (Titsias' variational bound with the per-row noise): one
pass over the rows gives every class (``O(N M^2)`` in total), memory
``O(C M^2)``.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, _fit_context, clone
from sklearn.preprocessing import LabelEncoder
from sklearn.utils._param_validation import HasMethods, StrOptions
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted

from . import _core
from ._base import DenseFeaturesBase, DeviceMixin, RandomStateMixin, keep_state_on_failure
from ._fourier import KERNELS, NystroemFeatures, RandomFourierFeatures
from ._gp import _features_chunk, _kernel_from_features, maclaurin_refits, seeded_clone
from ._maclaurin import MaclaurinFeatures
from ._progress import progress_printer
from ._sparse_gp import INDUCING
from ._validation import (
    MAX_COUNT,
    Count,
    RealNumber,
    fitted_length_scale,
    inducing_inputs,
    length_scale_values,
    validate_numeric_data,
)
from .exceptions import InvalidInputError

__all__ = ["ALPHA_EPSILON_GRID", "ExactGPC", "RandomFeatureGPC", "SparseGPC"]

#: The candidates of ``alpha_epsilon="auto"``, smallest first.
ALPHA_EPSILON_GRID = (0.001, 0.003, 0.01, 0.03, 0.1)

#: The share of every class's rows held out to choose ``alpha_epsilon``.
_HELD_OUT_SHARE = 0.2

#: The hyperparameters ``optimize`` may name.
_CLASSIFIER_HYPERPARAMETERS = ("length_scale", "kernel_variance")

_COMMON_CONSTRAINTS: dict = {
    "alpha_epsilon": [RealNumber(0, None, closed="neither"), StrOptions({"auto"})],
    "optimize": [None, tuple, list],
    "n_restarts": [Count(0, MAX_COUNT)],
    "random_state": ["random_state"],
    "verbose": ["verbose"],
    "device": DeviceMixin._device_constraint,
}


#: Why the classifiers have no GPU path (the message of ``device="gpu"``).
GPC_CPU_ONLY = (
    "the Dirichlet GP classifiers accumulate their per-class statistics and solve on the CPU"
)


def _held_out_rows(codes: np.ndarray, seed: int) -> np.ndarray:
    """A boolean mask of the held-out rows: a seeded ``_HELD_OUT_SHARE`` of
    every class's rows (rounded down), so both parts keep the class mix."""
    rng = np.random.default_rng(seed)
    held = np.zeros(codes.shape[0], dtype=bool)
    for k in np.unique(codes):
        rows = np.flatnonzero(codes == k)
        held[rng.permutation(rows)[: int(_HELD_OUT_SHARE * rows.size)]] = True
    if not held.any() or np.unique(codes[~held]).size < 2:
        raise ValueError(
            "alpha_epsilon='auto' holds out a fifth of every class's rows and needs at least "
            f"5 rows of some class and 2 classes left to fit on; got {codes.shape[0]} rows"
        )
    return held


def _mean_log_probability(proba: np.ndarray, codes: np.ndarray) -> float:
    """``mean_i log p_i[y_i]``, probabilities floored at the smallest normal float64."""
    p = proba[np.arange(codes.shape[0]), codes]
    return float(np.mean(np.log(np.maximum(p, np.finfo(np.float64).tiny))))


class _DirichletClassifier(RandomStateMixin, DeviceMixin, ClassifierMixin, BaseEstimator):
    """The label encoding, the choice of ``alpha_epsilon`` and the
    predictions shared by both classifiers.

    Subclasses implement ``_fit_rows(X, codes, alpha_epsilon, progress)``
    (a fit on some rows, returned as a dict of fitted attributes without
    setting any), ``_candidates(X, codes, held, progress)`` (the held-out
    mean log predictive probability of every ``ALPHA_EPSILON_GRID`` value
    for a model fitted on the other rows) and ``_latent(X)`` (latent means
    and variances, each of shape (n_samples, n_classes)).
    """

    alpha_epsilon: Any
    optimize: Any
    verbose: bool

    def _optimize_names(self) -> list[str]:
        """The hyperparameter names of ``optimize`` (empty for None), checked."""
        if self.optimize is None:
            return []
        names = [str(n) for n in self.optimize]
        for n in names:
            if n not in _CLASSIFIER_HYPERPARAMETERS:
                raise InvalidInputError(
                    f"`optimize` contains {n!r}; expected a subset of "
                    f"{list(_CLASSIFIER_HYPERPARAMETERS)} (the noise is the label transform's)"
                )
        return names

    def _fit_all(self, X: np.ndarray, codes: np.ndarray) -> None:
        """Choose ``alpha_epsilon_`` (held out, for "auto") and fit on all rows."""
        self._fit_seed()
        with progress_printer(type(self).__name__, bool(self.verbose)) as progress:
            if isinstance(self.alpha_epsilon, str):
                held = _held_out_rows(codes, self.seed_)
                scores = np.asarray(self._candidates(X, codes, held, progress), dtype=np.float64)
                self.alpha_epsilon_scores_ = scores
                self.alpha_epsilon_ = float(ALPHA_EPSILON_GRID[int(np.argmax(scores))])
                if progress is not None:
                    progress.message(
                        f"alpha_epsilon = {self.alpha_epsilon_:g} (held-out mean log "
                        f"probability {scores.max():.4f})"
                    )
            else:
                self.__dict__.pop("alpha_epsilon_scores_", None)
                self.alpha_epsilon_ = float(self.alpha_epsilon)
            fitted = self._fit_rows(X, codes, self.alpha_epsilon_, progress)
        for name, value in fitted.items():
            setattr(self, name, value)
        self.log_marginal_likelihood_ = float(sum(self._model.class_lml))

    def _fit_rows(
        self, X: np.ndarray, codes: np.ndarray, alpha_epsilon: float, progress: Any
    ) -> dict:
        raise NotImplementedError

    def _candidates(
        self, X: np.ndarray, codes: np.ndarray, held: np.ndarray, progress: Any
    ) -> list[float]:
        """Fit every grid value on the kept rows, score on the held-out ones
        (the subclass may share work between the candidates)."""
        scores = []
        for alpha in ALPHA_EPSILON_GRID:
            fitted = self._fit_rows(X[~held], codes[~held], alpha, progress)
            proba = self._proba_of(fitted, X[held])
            scores.append(_mean_log_probability(proba, codes[held]))
        return scores

    def _proba_of(self, fitted: dict, X: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _encode_labels(self, y: Any) -> np.ndarray:
        """``classes_`` from any labels; the class codes ``0..C-1`` as int64."""
        check_classification_targets(y)
        encoder = LabelEncoder().fit(y)
        self.classes_ = encoder.classes_
        if self.classes_.shape[0] < 2:
            raise ValueError(
                f"`y` must hold at least 2 classes to train a classifier, "
                f"got 1 class: {self.classes_[0]!r}"
            )
        return encoder.transform(y).astype(np.int64)

    def _latent(self, X: Any) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError

    def predict_latent(self, X: Any) -> tuple[np.ndarray, np.ndarray]:
        """Posterior means and variances of the class latents.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Test inputs.

        Returns
        -------
        mean : ndarray of shape (n_samples, n_classes), float64
            Latent means (in the order of ``classes_``).
        var : ndarray of shape (n_samples, n_classes), float64
            Latent variances.
        """
        check_is_fitted(self)
        return self._latent(X)

    def decision_function(self, X: Any) -> np.ndarray:
        """Log class probabilities (the log of :meth:`predict_proba`).

        The latent means themselves (:meth:`predict_latent`) can rank the
        classes differently from the probabilities when the latent variances
        differ, so the scores are the log-probabilities, which scikit-learn's
        contract (the same ranking as :meth:`predict_proba`) needs.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Test inputs.

        Returns
        -------
        scores : ndarray of shape (n_samples, n_classes) or (n_samples,), float64
            ``log p_c`` for the classes of ``classes_``; with two classes the
            log-odds ``log p_1 - log p_0`` (positive favours ``classes_[1]``),
            scikit-learn's binary convention. Probabilities are floored at
            the smallest normal float64 before the log.
        """
        log_p = np.log(np.maximum(self.predict_proba(X), np.finfo(np.float64).tiny))
        return log_p[:, 1] - log_p[:, 0] if log_p.shape[1] == 2 else log_p

    def predict_proba(self, X: Any) -> np.ndarray:
        """Class probabilities: the expected softmax of the Gaussian latents.

        ``p_c = E[exp(f_c) / sum_j exp(f_j)]`` with independent
        ``f_j ~ N(mean_j, var_j)``, computed by a fixed quadrature (no random
        draws; for two classes within 2e-8 of the exact one-dimensional
        integral at latent variances from 0 to 1e6, equal or not, and
        against 10^6-sample Monte Carlo below 1e-3 on average), so the same
        input always gives the same probabilities.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Test inputs.

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes), float64
            Probabilities in the order of ``classes_``; every row sums to 1.
        """
        mean, var = self.predict_latent(X)
        return _core.expected_softmax(mean, var)

    def predict(self, X: Any) -> np.ndarray:
        """The most probable class (the argmax of :meth:`predict_proba`).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Test inputs.

        Returns
        -------
        y : ndarray of shape (n_samples,)
            Labels from ``classes_``.
        """
        proba = self.predict_proba(X)
        return self.classes_[np.argmax(proba, axis=1)]


class RandomFeatureGPC(_DirichletClassifier):
    """Dirichlet-based GP classifier in the feature space of any transformer.

    Each class ``c`` is a feature-space GP regression on the transformed
    labels (module docs) with heteroscedastic noise ``Sigma_c``:
    ``A_c = Phi^T Sigma_c^{-1} Phi + I``, latent mean
    ``m_c + phi*^T A_c^{-1} Phi^T Sigma_c^{-1} (y_c - m_c)``, latent variance
    ``phi*^T A_c^{-1} phi*`` (``m_c`` the mean of the class's targets). The
    noise takes two values per class, so every ``A_c`` comes from the
    per-class Grams ``Phi_k^T Phi_k`` of one pass over the rows
    (``chunk_size`` rows transformed at a time, accumulated in Rust):
    ``O(N D^2)`` for all classes, memory ``O(C D^2)``.

    Parameters
    ----------
    features : transformer, default=None
        Any scikit-learn style transformer with dense float output (this
        library's feature maps, ``sklearn.kernel_approximation.RBFSampler``,
        ...), cloned and fitted on the training inputs. Its kernel is the
        latents' prior covariance. When it has a ``random_state`` parameter
        left at ``None`` and ``random_state`` below is not ``None``, the
        clone gets ``seed_ % 2**32`` as its ``random_state``, so the outer
        ``random_state`` fixes the whole fit (as in
        :class:`RandomFeatureGPR`). ``None``:
        ``RandomFourierFeatures(n_components=256)`` (Gaussian kernel, length
        scale 1, kernel variance 1) with the ``random_state``
        ``seed_ % 2**32``.
    alpha_epsilon : float or "auto", default=0.01
        The Dirichlet prior concentration ``alpha_epsilon > 0`` added to the
        one-hot labels: smaller values give sharper (more confident)
        probabilities. ``"auto"``: the value of ``ALPHA_EPSILON_GRID``
        (0.001, 0.003, 0.01, 0.03, 0.1) with the highest mean log predictive
        probability on a held-out fifth of every class's rows (drawn from
        ``random_state``) for a model fitted on the other rows (with
        ``optimize``, optimized at every candidate); then the model is
        fitted on all rows with it.
    optimize : tuple of str or None, default=None
        Hyperparameters to fit, a subset of ("length_scale",
        "kernel_variance"): they maximize the sum over classes of the log
        marginal likelihood of the transformed heteroscedastic regressions
        (docs/math/classification.rst, "Hyperparameters") by L-BFGS with
        analytic gradients from the transformer's own values, the random
        draw fixed; a free length scale starts from the median pairwise
        distance of the inputs instead when the summed LML there is higher
        on the coarsest subsample (a transformer's default length scale 1
        suits inputs of unit scale only). Needs :class:`RandomFourierFeatures`,
        :class:`MaclaurinFeatures` or :class:`NystroemFeatures` (its
        landmarks fixed; length scale only). A :class:`RandomFourierFeatures`
        transformer with one length scale per input dimension has each
        fitted (automatic relevance determination), from its own values.
        A :class:`MaclaurinFeatures`
        map whose fitted length scale ends more than 10x from its own is
        refitted there and the fit runs again (at most twice; the higher
        LML is kept), as in :class:`RandomFeatureGPR`. The rows are held in
        float64.
    n_restarts : int, default=2
        Random restarts of the optimizer after the run from the start.
    random_state : int, RandomState instance or None, default=None
        Seeds the optimizer's restarts, the held-out split of
        ``alpha_epsilon="auto"`` and, through ``seed_``, the transformer
        (see ``features``).
    chunk_size : int, default=2048
        Rows transformed and accumulated at a time.
    verbose : bool, default=False
        Print the progress of the fit (optimizer runs, the choice of
        ``alpha_epsilon``) to ``sys.stderr``. Ctrl-C interrupts the fit with
        ``KeyboardInterrupt``.
    device : {"cpu", "gpu", "auto"}, default="cpu"
        Accepted for a uniform API; the classifier runs on the CPU, so
        ``"auto"`` gives ``device_ = "cpu"`` and ``"gpu"`` raises
        :class:`~randfeat_rs.InvalidInputError`. The transformer computes its
        features on its own ``device``.

    Attributes
    ----------
    alpha_epsilon_ : float
        The ``alpha_epsilon`` used (chosen for "auto").
    alpha_epsilon_scores_ : ndarray of shape (5,), float64
        With ``alpha_epsilon="auto"`` only: the held-out mean log predictive
        probability of every value of ``ALPHA_EPSILON_GRID``.
    classes_ : ndarray of shape (n_classes,)
        The class labels.
    device_ : str
        Always "cpu" (see ``device``).
    features_ : transformer
        The fitted clone of ``features`` (with ``optimize``: at the fitted
        hyperparameters, its random draw kept).
    kernel_variance_ : float or None
        The kernel variance of ``features_`` (fitted with ``optimize``);
        None when the transformer does not say.
    length_scale_ : float, ndarray of shape (n_features,) or None
        The length scale(s) of ``features_`` (fitted with ``optimize``); None
        when the transformer does not say.
    log_marginal_likelihood_ : float
        The summed log marginal likelihood of the class regressions.
    n_features_in_ : int
        Number of input features.
    n_iter_ : int
        L-BFGS iterations spent over all runs of the final fit (0 without
        ``optimize``).
    seed_ : int
        The 64-bit seed drawn from ``random_state``: for the transformer's
        ``random_state`` (see ``features``), the restarts and the held-out
        split.

    Examples
    --------
    >>> import numpy as np
    >>> from randfeat_rs import RandomFeatureGPC, RandomFourierFeatures
    >>> rng = np.random.default_rng(0)
    >>> X = np.vstack([rng.normal(-2, 1, (100, 2)), rng.normal(2, 1, (100, 2))])
    >>> y = np.repeat(["a", "b"], 100)
    >>> features = RandomFourierFeatures(200, length_scale=2.0, random_state=0)
    >>> clf = RandomFeatureGPC(features).fit(X, y)
    >>> clf.predict([[-2.0, -2.0], [2.0, 2.0]]).tolist()
    ['a', 'b']
    >>> proba = clf.predict_proba([[0.0, 0.0]])
    >>> float(proba.sum())
    1.0
    """

    _parameter_constraints: dict = {  # noqa: RUF012
        "features": [None, HasMethods(["fit", "transform"])],
        "chunk_size": [Count(1, MAX_COUNT)],
        **_COMMON_CONSTRAINTS,
    }

    def __init__(
        self,
        features: Any = None,
        *,
        alpha_epsilon: Any = 0.01,
        optimize: Any = None,
        n_restarts: int = 2,
        random_state: Any = None,
        chunk_size: int = 2048,
        verbose: bool = False,
        device: str = "cpu",
    ) -> None:
        self.features = features
        self.alpha_epsilon = alpha_epsilon
        self.optimize = optimize
        self.n_restarts = n_restarts
        self.random_state = random_state
        self.chunk_size = chunk_size
        self.verbose = verbose
        self.device = device

    @keep_state_on_failure
    @_fit_context(prefer_skip_nested_validation=False)
    def fit(self, X: Any, y: Any) -> RandomFeatureGPC:
        """Fit the transformer clone on ``X``, accumulate the per-class statistics, solve.

        With ``optimize`` the hyperparameters are fitted first; with
        ``alpha_epsilon="auto"`` every candidate is fitted on four fifths of
        the rows and scored on the rest before the final fit.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training inputs (float32 is kept as float32 for the transformer
            unless ``optimize`` is set).
        y : array-like of shape (n_samples,)
            Class labels (any hashable values, at least two classes).

        Returns
        -------
        self : RandomFeatureGPC
            The fitted estimator.
        """
        self._resolve_device(unsupported=GPC_CPU_ONLY)
        X, y = validate_numeric_data(self, X, y, dtype=[np.float64, np.float32], order="C")
        codes = self._encode_labels(y)
        self._optimize_names()
        self._fit_all(X, codes)
        return self

    def _unfitted_features(self) -> Any:
        """The default map, or a clone of ``features`` seeded as
        :func:`seeded_clone` says, both from ``seed_`` (drawn by the fit)."""
        if self.features is None:
            return RandomFourierFeatures(n_components=256, random_state=self.seed_ % (1 << 32))
        return seeded_clone(self.features, self.random_state, lambda: self.seed_)

    def _fitted_features(self, X: np.ndarray) -> Any:
        return self._unfitted_features().fit(X)

    def _stats(self, features: Any, X: np.ndarray, codes: np.ndarray, progress: Any) -> Any:
        """The per-class statistics of the rows ``X`` (one pass)."""
        # This library's maps know their width: the per-class D x D
        # statistics are sized (and refused when they cannot be held) before
        # any chunk is transformed.
        fmap = features._feature_map() if isinstance(features, DenseFeaturesBase) else None
        stats = (
            None
            if fmap is None
            else _core.DirichletClassStats(self.classes_.shape[0], fmap.n_components)
        )
        n, step = X.shape[0], int(self.chunk_size)
        for lo in range(0, n, step):
            phi = _features_chunk(features, X[lo : lo + step])
            if stats is None:
                stats = _core.DirichletClassStats(self.classes_.shape[0], phi.shape[1])
            stats.accumulate(phi, codes[lo : lo + step])
            if progress is not None:
                progress("rows accumulated", min(lo + step, n), n, [])
        return stats

    def _fit_rows(
        self, X: np.ndarray, codes: np.ndarray, alpha_epsilon: float, progress: Any
    ) -> dict:
        features = self._fitted_features(X)
        names = self._optimize_names()
        if not names:
            stats = self._stats(features, X, codes, progress)
            model = _core.DirichletGPC.fit(stats, alpha_epsilon, progress=progress)
            ls, kv = _kernel_from_features(features)
            return {
                "_model": model,
                "features_": features,
                "length_scale_": ls,
                "kernel_variance_": kv,
                "n_iter_": 0,
            }
        if not isinstance(features, (RandomFourierFeatures, MaclaurinFeatures, NystroemFeatures)):
            raise InvalidInputError(
                "`optimize` needs a feature map whose hyperparameters can move with its random "
                "draw fixed: randfeat_rs.RandomFourierFeatures, MaclaurinFeatures or "
                f"NystroemFeatures, got {type(features).__name__}"
            )
        x64 = np.ascontiguousarray(X, dtype=np.float64)

        def fit_at(f: Any) -> tuple:
            return _core.DirichletGPC.fit_optimized(
                f._feature_map(),
                x64,
                codes,
                n_classes=self.classes_.shape[0],
                length_scale=length_scale_values(f.length_scale),
                alpha_epsilon=alpha_epsilon,
                optimize=names,
                n_restarts=int(self.n_restarts),
                seed=self.seed_,
                chunk_size=int(self.chunk_size),
                progress=progress,
            )

        # A MaclaurinFeatures map is refitted where the fitted length scale
        # ends far from its own, as in RandomFeatureGPR.
        features, (model, ls, kv, fmap, _), n_iter = maclaurin_refits(
            features,
            fit_at,
            lambda f, length_scale: clone(f).set_params(length_scale=length_scale).fit(X),
            progress,
            length_scale=lambda fitted: float(fitted[1][0]),
            lml=lambda fitted: float(sum(fitted[0].class_lml)),
            n_iter=lambda fitted: int(fitted[4]),
        )
        moved = copy.copy(features)
        # One fitted length scale per dimension for a transformer drawn with them.
        length_scale = fitted_length_scale(ls)
        moved.length_scale = length_scale
        if hasattr(moved, "kernel_variance"):
            moved.kernel_variance = float(kv)
        moved._set_map(fmap)
        return {
            "_model": model,
            "features_": moved,
            "length_scale_": length_scale,
            "kernel_variance_": float(kv),
            "n_iter_": int(n_iter),
        }

    def _candidates(
        self, X: np.ndarray, codes: np.ndarray, held: np.ndarray, progress: Any
    ) -> list[float]:
        if self._optimize_names():
            return super()._candidates(X, codes, held, progress)
        # The statistics and the held-out features do not depend on alpha_epsilon.
        features = self._fitted_features(X[~held])
        stats = self._stats(features, X[~held], codes[~held], progress)
        phi = _features_chunk(features, X[held])
        scores = []
        for alpha in ALPHA_EPSILON_GRID:
            mean, var = _core.DirichletGPC.fit(stats, alpha).predict_latent(phi)
            proba = _core.expected_softmax(mean, var)
            scores.append(_mean_log_probability(proba, codes[held]))
        return scores

    def _proba_of(self, fitted: dict, X: np.ndarray) -> np.ndarray:
        mean, var = self._latent_of(fitted["_model"], fitted["features_"], X)
        return _core.expected_softmax(mean, var)

    def _latent_of(self, model: Any, features: Any, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        step = int(self.chunk_size)
        parts = [
            model.predict_latent(_features_chunk(features, X[lo : lo + step]))
            for lo in range(0, X.shape[0], step)
        ]
        if not parts:
            n = self.classes_.shape[0]
            return np.zeros((0, n)), np.zeros((0, n))
        return np.vstack([m for m, _ in parts]), np.vstack([v for _, v in parts])

    def _latent(self, X: Any) -> tuple[np.ndarray, np.ndarray]:
        X = validate_numeric_data(self, X, reset=False, dtype=[np.float64, np.float32], order="C")
        return self._latent_of(self._model, self.features_, X)


class ExactGPC(_DirichletClassifier):
    """Dirichlet-based GP classifier with the exact Gaussian kernel.

    The model of :class:`RandomFeatureGPC` with the kernel matrix itself:
    per class the exact GP with ``K + Sigma_c`` (``O(N^3)`` time, ``C + 1``
    matrices of ``N x N`` float64 held, at least 5 with ``optimize``;
    refused when they exceed the available memory). The reference for the
    feature-space approximations.

    Parameters
    ----------
    length_scale : float or array-like of shape (n_features,), default=1.0
        Length scale(s) ``l`` of ``k(x, x') = kernel_variance *
        exp(-|x - x'|^2 / (2 l^2))`` (one per input column: ARD); the start
        with ``optimize``, unless the median pairwise distance of the inputs
        (every length scale at it) is a better one (see ``optimize``).
    kernel_variance : float, default=1.0
        The kernel variance (the latents' prior variance); the start with
        ``optimize``.
    alpha_epsilon : float or "auto", default=0.01
        The Dirichlet prior concentration ``alpha_epsilon > 0``; ``"auto"``
        chooses it as :class:`RandomFeatureGPC` does.
    optimize : tuple of str or None, default=None
        Hyperparameters to fit, a subset of ("length_scale",
        "kernel_variance"), by the summed class log marginal likelihood
        (docs/math/classification.rst, "Hyperparameters"; L-BFGS with
        analytic gradients). A free length scale starts from the median
        pairwise distance of the inputs instead of ``length_scale`` when
        the summed LML is higher there on the coarsest subsample of the
        coarse-to-fine runs (the default 1 suits inputs of unit scale
        only).
    n_restarts : int, default=2
        Random restarts of the optimizer after the run from the start.
    random_state : int, RandomState instance or None, default=None
        Seeds the optimizer's restarts and the held-out split of
        ``alpha_epsilon="auto"``.
    verbose : bool, default=False
        Print the progress of the fit to ``sys.stderr``. Ctrl-C interrupts
        the fit with ``KeyboardInterrupt``.
    device : {"cpu", "gpu", "auto"}, default="cpu"
        Accepted for a uniform API; the classifier runs on the CPU, so
        ``"auto"`` gives ``device_ = "cpu"`` and ``"gpu"`` raises
        :class:`~randfeat_rs.InvalidInputError`.

    Attributes
    ----------
    alpha_epsilon_ : float
        The ``alpha_epsilon`` used (chosen for "auto").
    alpha_epsilon_scores_ : ndarray of shape (5,), float64
        With ``alpha_epsilon="auto"`` only: the held-out mean log predictive
        probability of every value of ``ALPHA_EPSILON_GRID``.
    classes_ : ndarray of shape (n_classes,)
        The class labels.
    device_ : str
        Always "cpu" (see ``device``).
    kernel_variance_ : float
        The kernel variance used (fitted with ``optimize``).
    length_scale_ : float or ndarray of shape (n_features,)
        The length scale(s) used (fitted with ``optimize``).
    log_marginal_likelihood_ : float
        The summed log marginal likelihood of the class regressions.
    n_features_in_ : int
        Number of input features.
    n_iter_ : int
        L-BFGS iterations spent over all runs of the final fit (0 without
        ``optimize``).
    seed_ : int
        The 64-bit seed drawn from ``random_state``.

    Examples
    --------
    >>> import numpy as np
    >>> from randfeat_rs import ExactGPC
    >>> X = np.array([[0.0], [1.0], [2.0], [3.0]])
    >>> clf = ExactGPC().fit(X, [0, 0, 1, 1])
    >>> np.round(clf.predict_proba([[0.2]]), 2).tolist()
    [[0.94, 0.06]]
    """

    _parameter_constraints: dict = {  # noqa: RUF012
        "length_scale": [RealNumber(0, None, closed="neither"), "array-like"],
        "kernel_variance": [RealNumber(0, None, closed="neither")],
        **_COMMON_CONSTRAINTS,
    }

    def __init__(
        self,
        *,
        length_scale: Any = 1.0,
        kernel_variance: float = 1.0,
        alpha_epsilon: Any = 0.01,
        optimize: Any = None,
        n_restarts: int = 2,
        random_state: Any = None,
        verbose: bool = False,
        device: str = "cpu",
    ) -> None:
        self.length_scale = length_scale
        self.kernel_variance = kernel_variance
        self.alpha_epsilon = alpha_epsilon
        self.optimize = optimize
        self.n_restarts = n_restarts
        self.random_state = random_state
        self.verbose = verbose
        self.device = device

    @keep_state_on_failure
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X: Any, y: Any) -> ExactGPC:
        """Fit the hyperparameters in ``optimize``, then factor ``K + Sigma_c`` for every class.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training inputs (computed in float64).
        y : array-like of shape (n_samples,)
            Class labels (any hashable values, at least two classes).

        Returns
        -------
        self : ExactGPC
            The fitted estimator.
        """
        self._resolve_device(unsupported=GPC_CPU_ONLY)
        X, y = validate_numeric_data(self, X, y, dtype=np.float64, order="C")
        codes = self._encode_labels(y)
        self._optimize_names()
        self._fit_all(X, codes)
        return self

    def _fit_rows(
        self, X: np.ndarray, codes: np.ndarray, alpha_epsilon: float, progress: Any
    ) -> dict:
        model, n_iter = _core.DirichletGPC.fit_exact(
            X,
            codes,
            n_classes=self.classes_.shape[0],
            length_scale=length_scale_values(self.length_scale),
            kernel_variance=float(self.kernel_variance),
            alpha_epsilon=alpha_epsilon,
            optimize=self._optimize_names(),
            n_restarts=int(self.n_restarts),
            seed=self.seed_,
            progress=progress,
        )
        return {
            "_model": model,
            "length_scale_": fitted_length_scale(
                model.length_scale, np.ndim(self.length_scale) > 0
            ),
            "kernel_variance_": float(model.kernel_variance),
            "n_iter_": int(n_iter),
        }

    def _proba_of(self, fitted: dict, X: np.ndarray) -> np.ndarray:
        mean, var = fitted["_model"].predict_latent(X)
        return _core.expected_softmax(mean, var)

    def _latent(self, X: Any) -> tuple[np.ndarray, np.ndarray]:
        X = validate_numeric_data(self, X, reset=False, dtype=np.float64, order="C")
        return self._model.predict_latent(X)


class SparseGPC(_DirichletClassifier):
    """Dirichlet-based GP classifier on the inducing-point model.

    The model of :class:`ExactGPC` with ``M`` inducing inputs ``Z`` (the
    sparse GP of :class:`SparseGPR`): each class's transformed regression,
    with its per-row noise ``Sigma_c``, is solved under Titsias' collapsed
    variational bound ``log N(r_c | 0, Q + Sigma_c) - tr(Sigma_c^{-1}(K -
    Q)) / 2`` (``Q = K_fu K_uu^{-1} K_uf``, ``r_c`` the class's centered
    targets), a lower bound on its log marginal likelihood. The noise takes
    two values per class, so every class's statistics (``K_uf Sigma_c^{-1}
    K_fu`` and the rest) are weighted sums of per-class sums of one pass
    over the rows in chunks: ``O(N M^2)`` for all classes, memory ``O(C
    M^2)`` (docs/math/classification.rst, "Inducing points"). With ``Z``
    the training inputs it is :class:`ExactGPC`. Where ``K_uu`` is nearly
    singular the sums are taken in the whitened basis ``L^{-1} k(Z, x)`` and
    ``K_uu`` gets a jitter, as in :class:`SparseGPR`, so that the reported
    bound is the bound.

    Parameters
    ----------
    n_inducing : int, default=256
        Number of inducing inputs ``M`` (>= 1), clamped to the number of
        training rows; the greedy selection may stop earlier, once the chosen
        inputs explain the kernel on the training rows. Ignored when
        ``inducing`` is an array.
    inducing : {"greedy_variance", "kmeans", "random"} or array-like of shape (M, n_features), \
default="greedy_variance"
        How the inducing inputs are chosen (as in :class:`SparseGPR`): greedy
        conditional variance under the kernel, k-means centers, a random
        subset of the rows (drawn from ``random_state``), or the given inputs.
    kernel : {"gaussian", "laplacian", "matern12", "matern32", "matern52"}, default="gaussian"
        The stationary kernel, as in :class:`SparseGPR`.
    length_scale : float or array-like of shape (n_features,), default=1.0
        Length scale(s) of the kernel (one per input column: ARD).
    kernel_variance : float, default=1.0
        The kernel variance (the latents' prior variance).
    alpha_epsilon : float or "auto", default=0.01
        The Dirichlet prior concentration ``alpha_epsilon > 0``; ``"auto"``
        chooses it as :class:`RandomFeatureGPC` does.
    optimize : tuple of str or None, default=None
        Hyperparameters to fit, a subset of ("length_scale",
        "kernel_variance"), from the given values by the summed VFE bound of
        the classes (L-BFGS with analytic gradients, a second pass over the
        rows per evaluation), the inducing inputs fixed where they were
        chosen at the start. A free length scale starts from the given one
        or the median pairwise distance of the inputs (per column with one
        length scale per column, as :class:`SparseGPR`'s ARD start),
        whichever has the higher bound with inducing inputs chosen there
        (the default 1 suits inputs of unit scale only).
    n_restarts : int, default=2
        Random restarts of the optimizer after the run from the start.
    chunk_size : int, default=None
        Rows per chunk of the pass over the data (memory ``O(chunk_size
        M)``). ``None``: ``2**18 / M`` rows, at least 256.
    random_state : int, RandomState instance or None, default=None
        Seeds the inducing-input selection, the optimizer's restarts and the
        held-out split of ``alpha_epsilon="auto"``.
    verbose : bool, default=False
        Print the progress of the fit to ``sys.stderr``. Ctrl-C interrupts
        the fit with ``KeyboardInterrupt``.
    device : {"cpu", "gpu", "auto"}, default="cpu"
        Accepted for a uniform API; the classifier runs on the CPU, so
        ``"auto"`` gives ``device_ = "cpu"`` and ``"gpu"`` raises
        :class:`~randfeat_rs.InvalidInputError`.

    Attributes
    ----------
    alpha_epsilon_ : float
        The ``alpha_epsilon`` used (chosen for "auto").
    alpha_epsilon_scores_ : ndarray of shape (5,), float64
        With ``alpha_epsilon="auto"`` only: the held-out mean log predictive
        probability of every value of ``ALPHA_EPSILON_GRID``.
    classes_ : ndarray of shape (n_classes,)
        The class labels.
    device_ : str
        Always "cpu" (see ``device``).
    inducing_points_ : ndarray of shape (M, n_features), float64
        The inducing inputs.
    jitter_ : float
        Jitter added to the diagonal of ``K_uu`` (0 normally): where it
        cannot be factored, or is numerically singular for the smallest
        per-row noise of the class regressions.
    kernel_variance_ : float
        The kernel variance used (fitted with ``optimize``).
    length_scale_ : float or ndarray of shape (n_features,)
        The length scale(s) used (fitted with ``optimize``).
    log_marginal_likelihood_ : float
        The summed VFE bound of the class regressions (at most their summed
        log marginal likelihood).
    n_features_in_ : int
        Number of input features.
    n_iter_ : int
        L-BFGS iterations spent over all runs of the final fit (0 without
        ``optimize``).
    seed_ : int
        The 64-bit seed drawn from ``random_state``.

    Raises
    ------
    NotPositiveDefiniteError
        From ``fit``, when ``K_uu`` cannot be factored even with the largest
        jitter, or is so ill-conditioned for the kernel variance that no
        float64 computation of the bound keeps its digits (fewer inducing
        inputs, a shorter length scale or a smaller kernel variance help).

    Examples
    --------
    >>> import numpy as np
    >>> from randfeat_rs import SparseGPC
    >>> rng = np.random.default_rng(0)
    >>> X = np.vstack([rng.normal(-2, 1, (200, 2)), rng.normal(2, 1, (200, 2))])
    >>> y = np.repeat(["a", "b"], 200)
    >>> clf = SparseGPC(n_inducing=20, length_scale=2.0, random_state=0).fit(X, y)
    >>> clf.predict([[-2.0, -2.0], [2.0, 2.0]]).tolist()
    ['a', 'b']
    >>> float(clf.predict_proba([[0.0, 0.0]]).sum())
    1.0
    """

    _parameter_constraints: dict = {  # noqa: RUF012
        "n_inducing": [Count(1, MAX_COUNT)],
        "inducing": [StrOptions(set(INDUCING)), "array-like"],
        "kernel": [StrOptions(set(KERNELS))],
        "length_scale": [RealNumber(0, None, closed="neither"), "array-like"],
        "kernel_variance": [RealNumber(0, None, closed="neither")],
        "chunk_size": [None, Count(1, MAX_COUNT)],
        **_COMMON_CONSTRAINTS,
    }

    def __init__(
        self,
        n_inducing: int = 256,
        *,
        inducing: Any = "greedy_variance",
        kernel: str = "gaussian",
        length_scale: Any = 1.0,
        kernel_variance: float = 1.0,
        alpha_epsilon: Any = 0.01,
        optimize: Any = None,
        n_restarts: int = 2,
        chunk_size: Any = None,
        random_state: Any = None,
        verbose: bool = False,
        device: str = "cpu",
    ) -> None:
        self.n_inducing = n_inducing
        self.inducing = inducing
        self.kernel = kernel
        self.length_scale = length_scale
        self.kernel_variance = kernel_variance
        self.alpha_epsilon = alpha_epsilon
        self.optimize = optimize
        self.n_restarts = n_restarts
        self.chunk_size = chunk_size
        self.random_state = random_state
        self.verbose = verbose
        self.device = device

    @keep_state_on_failure
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X: Any, y: Any) -> SparseGPC:
        """Choose the inducing inputs, accumulate the per-class statistics, solve every class.

        With ``optimize`` the hyperparameters are fitted first; with
        ``alpha_epsilon="auto"`` every candidate is fitted on four
        fifths of the rows and scored on the rest before the final fit.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training inputs (float32 is kept and converted exactly in Rust,
            anything else becomes float64).
        y : array-like of shape (n_samples,)
            Class labels (any hashable values, at least two classes).

        Returns
        -------
        self : SparseGPC
            The fitted estimator.
        """
        self._resolve_device(unsupported=GPC_CPU_ONLY)
        X, y = validate_numeric_data(self, X, y, dtype=[np.float64, np.float32], order="C")
        codes = self._encode_labels(y)
        self._optimize_names()
        self._fit_all(X, codes)
        return self

    def _fit_rows(
        self, X: np.ndarray, codes: np.ndarray, alpha_epsilon: float, progress: Any
    ) -> dict:
        model, n_iter = _core.SparseDirichletGPC.fit(
            X,
            codes,
            n_classes=self.classes_.shape[0],
            n_inducing=int(self.n_inducing),
            inducing=inducing_inputs(self.inducing),
            kernel=self.kernel,
            length_scale=length_scale_values(self.length_scale),
            kernel_variance=float(self.kernel_variance),
            alpha_epsilon=alpha_epsilon,
            chunk_size=None if self.chunk_size is None else int(self.chunk_size),
            seed=self.seed_,
            optimize=self._optimize_names(),
            n_restarts=int(self.n_restarts),
            progress=progress,
        )
        return {
            "_model": model,
            "length_scale_": fitted_length_scale(
                model.length_scale, np.ndim(self.length_scale) > 0
            ),
            "kernel_variance_": float(model.kernel_variance),
            "n_iter_": int(n_iter),
        }

    def _proba_of(self, fitted: dict, X: np.ndarray) -> np.ndarray:
        mean, var = fitted["_model"].predict_latent(X)
        return _core.expected_softmax(mean, var)

    def _latent(self, X: Any) -> tuple[np.ndarray, np.ndarray]:
        X = validate_numeric_data(self, X, reset=False, dtype=[np.float64, np.float32], order="C")
        return self._model.predict_latent(X)

    @property
    def inducing_points_(self) -> np.ndarray:
        """The inducing inputs, shape (M, n_features)."""
        check_is_fitted(self)
        return self._model.inducing_points

    @property
    def jitter_(self) -> float:
        """Jitter added to the diagonal of ``K_uu``."""
        check_is_fitted(self)
        return float(self._model.jitter)
