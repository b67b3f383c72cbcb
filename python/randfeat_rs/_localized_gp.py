"""The localized Maclaurin GP (docs/math/localized.rst, 000 Algorithm 1).

One optimized Maclaurin allocation and one set of random sketch weights are
shared by every centroid; farthest-point clustering places centroids at most
``threshold * length_scale`` from every training input; each centroid gets
its own feature-space GP on the map shifted to it, and each test point is
predicted by its nearest centroid (or, with ``centers="test"``, by a GP
centered at the test point itself). The work is in Rust
(``src/gp/localized/``).
"""

from __future__ import annotations

import math
from typing import Any, Optional

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin, _fit_context
from sklearn.utils._param_validation import StrOptions
from sklearn.utils.validation import check_is_fitted

from . import _core
from ._base import DeviceMixin, RandomStateMixin, keep_state_on_failure
from ._gp import GaussianPredictionMixin
from ._progress import progress_printer
from ._validation import (
    MAX_COUNT,
    MAX_DEGREE_COUNT,
    Count,
    RealNumber,
    regression_targets,
    validate_numeric_data,
)

__all__ = ["LocalizedMaclaurinGPR"]

TEST_CENTERS_CPU_ONLY = (
    "centers='test' builds one GP per test point on the CPU; the GPU path batches the "
    "cluster centroids (use centers='clusters')"
)


class LocalizedMaclaurinGPR(
    GaussianPredictionMixin, RandomStateMixin, DeviceMixin, RegressorMixin, BaseEstimator
):
    """Localized Maclaurin GP regression with the Gaussian kernel.

    The Gaussian kernel ``kernel_variance * exp(-|x - x'|^2 / (2 l^2))`` is
    approximated by optimized Maclaurin features (docs/math/maclaurin.rst, "Assembly") of width
    ``n_components``, expanded around several centroids (docs/math/localized.rst):

    1. the allocation of features to degrees is optimized on the training
       rows centered at their mean, and the random sketch weights are drawn
       once (both from ``random_state``, before and independently of the
       clustering, so ``threshold`` never changes them);
    2. farthest-point clustering, starting from the training mean, adds the
       training input farthest from all centroids until every input lies
       within ``threshold * length_scale`` of one, or there are
       ``n_clusters`` centroids;
    3. centroid ``c`` gets the feature-space GP (docs/math/gp.rst, "Feature-space GP") on
       ``Phi(x - c)``; a test point is predicted by its nearest centroid's
       GP. At ``x* = c`` the cross-covariances and the prior variance are
       exact (docs/math/localized.rst, "The exactness property").

    The per-centroid GPs are built in Rust, in parallel, the first time a
    test point needs them (then cached): predictions equal those of a model
    that builds every centroid's GP at fit, at the cost of the centroids
    actually used. A training row whose feature vector at ``c`` has a norm
    bound below ``tol * sqrt(kernel_variance)`` (a rigorous bound:
    ``exp(-r^2/2)`` times a polynomial in ``r = |x - c| / l`` from the sketch
    weights' norms) is skipped, so a centroid's cost scales with its
    neighbourhood. ``centers="test"`` instead builds a GP centered at every
    test point (the exact ``k_p*`` of 000 section 3.2; ``O(N* (N D^2 +
    D^3))``, for small test sets).

    Parameters
    ----------
    n_components : int, default=100
        Feature-map width ``D`` (>= 1).
    length_scale : float or "scale", default="scale"
        Kernel length scale ``l > 0``. ``"scale"``: the length scale of
        scikit-learn's ``gamma="scale"`` for the training inputs,
        ``l = sqrt(n_features * X.var() / 2)`` (1 for constant ``X``), which
        suits standardized inputs (``length_scale_`` is the value used).
        The fit squares distances in input units, so it refuses a length
        scale outside ``[1e-150, 1e150]`` and inputs beyond ``1e150`` in
        magnitude (an :class:`~randfeat_rs.InvalidInputError` that says to
        rescale ``X`` and the length scale together, which changes nothing
        else).
    kernel_variance : float, default=1.0
        Kernel variance ``sigma^2 > 0``.
    noise_variance : float, default=None
        Observation noise variance ``sigma_n^2 > 0``. ``None``: 0.1 times the
        variance of the targets (0.1 when they are all equal), as
        :class:`ExactGPR` and :class:`RandomFeatureGPR`.
    threshold : float, "auto" or None, default=None
        Clustering threshold ``theta`` in units of ``length_scale`` (> 0).
        ``None``: one cluster unless ``n_clusters`` is given (then the
        ``n_clusters`` farthest points). ``"auto"``: chosen in Rust from
        ``(one cluster, 4, 2, 1, 0.5, 0.25)`` by fidelity to the exact GP
        with the same hyperparameters: on the training rows (a subsample of
        1,000 drawn from the seed when there are more) the exact GP and
        every candidate are fitted, and each candidate's score is the mean
        KL divergence of its leave-one-out predictive distributions to the
        exact GP's; the lowest score wins (the fewest clusters on a tie),
        and the model is then fitted on all rows. See docs/math/localized.rst,
        "Choosing the threshold".
    n_clusters : int, default=None
        Maximum number of centroids (>= 1).
    centers : {"clusters", "test"}, default="clusters"
        ``"test"``: no clustering, a GP centered at every test point.
    sketch : {"tensor_srht", "gaussian", "rademacher"}, default="tensor_srht"
        Polynomial sketch of every degree.
    complex_weights : bool, default=False
        Complex sketch weights (``[Re | Im]`` blocks).
    max_degree : int, default=10
        Largest truncation degree searched by the allocation.
    n_subsample : int, default=2000
        Rows of the allocation's pair statistics.
    tol : float, default=1e-12
        Relative tolerance of the skipping of negligible rows (0 keeps all).
    center_y : bool, default=True
        Subtract the training-target mean (zero prior mean on the rest).
    random_state : int, RandomState instance or None, default=None
        Seeds the allocation subsample, the sketch weights and the
        ``threshold="auto"`` subsample.
    verbose : bool, default=False
        Print progress to ``sys.stderr``: the allocation, the clustering, the
        centroid GPs built, the prediction.
    device : {"cpu", "gpu", "auto"}, default="cpu"
        Where the per-centroid statistics are computed. ``"gpu"``: the
        training data go to the GPU once; centroids are processed in
        batches (sized from the adapter's limits), one set of dispatches
        and one read-back per batch: for each centroid ``c`` of a batch its
        neighbourhood's rows are gathered and centered there (``X`` and
        ``c`` shifted and scaled in float64 on the host, their difference
        and the row factor in float32), the features ``Phi(x - c)`` and
        ``Phi.T Phi``, ``Phi.T y`` are computed on the GPU in float32,
        the partial sums added in float64 on the host, and the solves run
        on the CPU in float64;
        predictions then differ from the CPU path
        by the float32 feature and Gram rounding (see
        :func:`randfeat_rs.gpu.gram`). ``"auto"``: the GPU when a hardware
        adapter is usable, else the CPU. ``centers="test"`` runs on the CPU
        (one GP per test point): ``"gpu"`` is an error there.

    Attributes
    ----------
    length_scale_, kernel_variance_, noise_variance_ : float
        The hyperparameters used.
    centroids_ : ndarray of shape (n_clusters_, n_features_in_), float64
        The centroids; row 0 is the training mean (empty with ``centers="test"``).
    n_clusters_ : int
        Number of centroids (0 with ``centers="test"``).
    threshold_ : float or None
        ``theta / l`` used; ``math.inf`` when only ``n_clusters`` bounds the
        clustering, ``None`` for one cluster or ``centers="test"``.
    allocation_ : ndarray of shape (truncation_degree_ + 1,), int64
        Features per degree of the shared map (index = degree).
    truncation_degree_ : int
        Truncation degree ``p`` of the shared map.
    auto_scores_ : dict
        Only with ``threshold="auto"``: the mean leave-one-out KL divergence
        to the exact GP (lower is better) for every ``theta / l`` of the grid
        (``None``: one cluster), in grid order; empty with fewer than 2 rows.
    auto_std_errors_ : dict
        Only with ``threshold="auto"``: the standard error of every
        candidate's score difference to the best score (0 for the best;
        from the paired per-row differences), to judge which differences
        the data resolve.
    auto_criterion_ : str
        Only with ``threshold="auto"``: the name of the criterion.
    cutoff_sq_ : float
        Squared distance from a centroid beyond which a training row's
        features are negligible (below ``tol``) and skipped; ``inf`` with
        ``tol=0``.
    seed_ : int
        The 64-bit seed drawn from ``random_state`` at ``fit``; the
        allocation subsample, the sketch weights and the ``"auto"``
        subsample were drawn from it.
    y_mean_ : float
        Target mean added back to predictions (0 with ``center_y=False``).
    device_ : str
        The device the centroid statistics are computed on: "cpu" or "gpu".
    n_features_in_ : int
        Number of input features.

    Examples
    --------
    >>> import numpy as np
    >>> from randfeat_rs import LocalizedMaclaurinGPR
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-6, 6, (400, 2))
    >>> y = np.sin(2 * X[:, 0]) + 0.05 * rng.standard_normal(400)
    >>> gp = LocalizedMaclaurinGPR(64, length_scale=0.7, noise_variance=0.0025,
    ...                            threshold=1.0, random_state=0).fit(X, y)
    >>> mean, std = gp.predict(X[:5], return_std=True)
    >>> bool(np.abs(mean - np.sin(2 * X[:5, 0])).max() < 0.2)
    True
    """

    _parameter_constraints: dict = {  # noqa: RUF012
        "n_components": [Count(1, MAX_COUNT)],
        "length_scale": [RealNumber(0, None, closed="neither"), StrOptions({"scale"})],
        "kernel_variance": [RealNumber(0, None, closed="neither")],
        "noise_variance": [None, RealNumber(0, None, closed="neither")],
        "threshold": [None, StrOptions({"auto"}), RealNumber(0, None, closed="neither")],
        "n_clusters": [None, Count(1, MAX_COUNT)],
        "centers": [StrOptions({"clusters", "test"})],
        "sketch": [StrOptions({"tensor_srht", "gaussian", "rademacher"})],
        "complex_weights": ["boolean"],
        "max_degree": [Count(1, MAX_DEGREE_COUNT)],
        "n_subsample": [Count(2, MAX_COUNT)],
        "tol": [RealNumber(0, None, closed="left")],
        "center_y": ["boolean"],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
        "device": DeviceMixin._device_constraint,
    }

    def __init__(
        self,
        n_components: int = 100,
        *,
        length_scale: Any = "scale",
        kernel_variance: float = 1.0,
        noise_variance: Optional[float] = None,
        threshold: Any = None,
        n_clusters: Optional[int] = None,
        centers: str = "clusters",
        sketch: str = "tensor_srht",
        complex_weights: bool = False,
        max_degree: int = 10,
        n_subsample: int = 2000,
        tol: float = 1e-12,
        center_y: bool = True,
        random_state: Any = None,
        verbose: bool = False,
        device: str = "cpu",
    ) -> None:
        self.n_components = n_components
        self.length_scale = length_scale
        self.kernel_variance = kernel_variance
        self.noise_variance = noise_variance
        self.threshold = threshold
        self.n_clusters = n_clusters
        self.centers = centers
        self.sketch = sketch
        self.complex_weights = complex_weights
        self.max_degree = max_degree
        self.n_subsample = n_subsample
        self.tol = tol
        self.center_y = center_y
        self.random_state = random_state
        self.verbose = verbose
        self.device = device

    @keep_state_on_failure
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X: Any, y: Any) -> LocalizedMaclaurinGPR:
        """Allocation, random weights and clustering (GPs are built on use).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training inputs (float32 or float64; computations in float64).
        y : array-like of shape (n_samples,)
            Training targets.

        Returns
        -------
        self : LocalizedMaclaurinGPR
            The fitted estimator.
        """
        X, y = validate_numeric_data(
            self, X, y, dtype=[np.float64, np.float32], order="C", y_numeric=True
        )
        y = regression_targets(y)
        test = self.centers == "test"
        self._resolve_device(unsupported=TEST_CENTERS_CPU_ONLY if test else None)
        if isinstance(self.length_scale, str):
            self.length_scale_ = float(_core.scale_length_scale(X))
        else:
            self.length_scale_ = float(self.length_scale)
        self.kernel_variance_ = float(self.kernel_variance)
        if self.noise_variance is None:
            self.noise_variance_ = float(_core.initial_noise_variance(y))
        else:
            self.noise_variance_ = float(self.noise_variance)
        n_clusters = 1 if test else self.n_clusters
        with progress_printer(type(self).__name__, bool(self.verbose)) as progress:
            self._gp = _core.LocalizedMaclaurinGp.fit(
                X,
                y,
                n_components=int(self.n_components),
                length_scale=self.length_scale_,
                kernel_variance=self.kernel_variance_,
                noise_variance=self.noise_variance_,
                threshold=None if test else self.threshold,
                n_clusters=None if n_clusters is None else int(n_clusters),
                sketch=self.sketch,
                complex_weights=bool(self.complex_weights),
                max_degree=int(self.max_degree),
                n_subsample=int(self.n_subsample),
                tol=float(self.tol),
                center_y=bool(self.center_y),
                seed=self._fit_seed(),
                device=self.device_,
                progress=progress,
            )
        # The mode predictions use: the fit's, whatever `centers` is set
        # to afterwards.
        self._at_test_points = test
        threshold = self._gp.threshold
        if test or (threshold is None and self.n_clusters is None):
            self.threshold_ = None
        else:
            self.threshold_ = math.inf if threshold is None else float(threshold)
        return self

    @property
    def centroids_(self) -> np.ndarray:
        """The centroids, shape ``(n_clusters_, n_features_in_)``."""
        gp = self._fitted_gp()
        if self._at_test_points:
            return np.zeros((0, self.n_features_in_))
        return gp.centroids

    @property
    def n_clusters_(self) -> int:
        """Number of centroids."""
        return int(self.centroids_.shape[0])

    @property
    def allocation_(self) -> np.ndarray:
        """Features per degree of the shared map (index = degree)."""
        return self._fitted_gp().allocation

    @property
    def truncation_degree_(self) -> int:
        """Truncation degree ``p`` of the shared map."""
        return int(self._fitted_gp().truncation_degree)

    @property
    def y_mean_(self) -> float:
        """Target mean added back to predictions."""
        return float(self._fitted_gp().y_mean)

    @property
    def cutoff_sq_(self) -> float:
        """Squared distance beyond which training rows are skipped."""
        return float(self._fitted_gp().cutoff_sq)

    @property
    def auto_scores_(self) -> dict:
        """Score of every candidate threshold (``threshold="auto"`` only)."""
        scores = self._fitted_gp().threshold_scores
        if scores is None:
            raise AttributeError("auto_scores_ exists with threshold='auto' only")
        return dict(scores)

    @property
    def auto_std_errors_(self) -> dict:
        """Standard error of every candidate's difference to the best score."""
        errors = self._fitted_gp().threshold_std_errors
        if errors is None:
            raise AttributeError("auto_std_errors_ exists with threshold='auto' only")
        return dict(zip(self.auto_scores_, errors))

    @property
    def auto_criterion_(self) -> str:
        """The criterion that scored the candidate thresholds."""
        name = self._fitted_gp().threshold_criterion
        if name is None:
            raise AttributeError("auto_criterion_ exists with threshold='auto' only")
        return str(name)

    def _fitted_gp(self) -> Any:
        """The fitted ``_core.LocalizedMaclaurinGp`` (an ``AttributeError``
        before ``fit``)."""
        if "_gp" not in self.__dict__:
            raise AttributeError("the GP is not fitted")
        return self._gp

    def _predict_raw(self, X: Any, std: Optional[str]) -> tuple[Any, ...]:
        """The core's ``(mean, std, n_built, build_s, predict_s)``."""
        check_is_fitted(self)
        X = validate_numeric_data(self, X, reset=False, dtype=[np.float64, np.float32], order="C")
        with progress_printer(type(self).__name__, bool(self.verbose)) as progress:
            return self._gp.predict(
                X, std=std, at_test_points=self._at_test_points, progress=progress
            )

    def _predict(self, X: Any, std: Optional[str]) -> tuple[np.ndarray, Any]:
        mean, std_out, *_ = self._predict_raw(X, std)
        return mean, std_out

    def _predict_timed(self, X: Any) -> tuple[np.ndarray, np.ndarray, dict[str, float]]:
        """Mean, the noisy observation's std and the cost split (benchmarks)."""
        mean, std, n_built, build_s, predict_s = self._predict_raw(X, "noisy")
        alloc_s, cluster_s = self._gp.timings
        timings = {
            "allocation": alloc_s,
            "clustering": cluster_s,
            "centroid_fits": build_s,
            "predict": predict_s,
            "n_built": float(n_built),
        }
        return mean, std, timings

    def __sklearn_tags__(self):  # type: ignore[no-untyped-def]
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = False
        return tags
