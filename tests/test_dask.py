"""randfeat_rs.dask on a real distributed.LocalCluster (2 worker processes).

Transforms and predictions are compared bit for bit with the in-memory
calls on the same rows (each block is the same Rust call on the same rows).
Fits are compared with the in-process fit to 1e-10 relative: the
statistics are the same sums added in another order (block by block, then
a tree), whose rounding is about 1e-15 relative for the well-conditioned
problems here.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import numpy as np
import pytest
import scipy.sparse
from sklearn.base import clone
from sklearn.exceptions import DataConversionWarning, NotFittedError

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

import dask  # noqa: E402

import randfeat_rs as rf  # noqa: E402
from randfeat_rs import dask as rdask  # noqa: E402

# A fault that leaves a worker's result undeserializable on the driver (as
# infinite statistics once did) makes distributed wait for it forever: each
# test fails after 5 minutes instead (the slowest takes about 30 s here).
pytestmark = pytest.mark.timeout(300)

RTOL = 1e-10
# Uneven row chunks, a last short one included.
CHUNKS = (70, 130, 45, 155)
N = sum(CHUNKS)


@pytest.fixture(scope="module")
def client() -> Iterator[distributed.Client]:
    """A LocalCluster of 2 single-threaded worker processes and its client
    (the default scheduler of every dask call while it is open). Closed
    when this file's tests end, so that no scheduler thread or worker
    process outlives them into the other files (signal and fork tests)."""
    with (
        distributed.LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            dashboard_address=":0",
            silence_logs=50,
            env={"RANDFEAT_NUM_THREADS": "1"},
        ) as cluster,
        distributed.Client(cluster) as c,
    ):
        yield c


def _data(n: int = N, d: int = 3, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.uniform(-2, 2, (n, d))
    y = np.sin(2 * x[:, 0]) + np.cos(x[:, -1]) + 0.1 * rng.standard_normal(n)
    return x, y


def _dask(x: np.ndarray, chunks: tuple = CHUNKS) -> da.Array:
    return da.from_array(x, chunks=(chunks, *x.shape[1:]))


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300))


def test_importing_the_package_leaves_dask_out() -> None:
    code = "import sys, randfeat_rs; print('dask' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# --- transforms -----------------------------------------------------------------------------


def _transformers(x: np.ndarray) -> list:
    return [
        rf.RandomFourierFeatures(64, random_state=0).fit(x),
        rf.RandomFourierFeatures(64, sampler="structured", variant="cos_bias", random_state=1).fit(
            np.hstack([x] * 6)[:, :16]
        ),
        rf.NystroemFeatures(n_components=20, random_state=0).fit(x),
        rf.PolynomialSketch(degree=2, n_components=32, random_state=0).fit(x),
        rf.PolynomialSketch(degree=3, n_components=32, sketch="tensor_sketch", random_state=0).fit(
            x
        ),
        rf.MaclaurinFeatures(n_components=40, random_state=0).fit(x),
    ]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_dense_transforms_equal_the_in_memory_transform(client, dtype) -> None:
    x, _ = _data()
    for est in _transformers(x):
        xi = x if est.n_features_in_ == x.shape[1] else np.hstack([x] * 6)[:, :16]
        xi = xi.astype(dtype)
        # A chunking along features too: merged into whole rows.
        X = da.from_array(xi, chunks=(CHUNKS, (1, xi.shape[1] - 1)))
        Z = rdask.transform(est, X)
        want = est.transform(xi)
        assert Z.shape == want.shape, type(est).__name__
        assert Z.chunks == (CHUNKS, (want.shape[1],))
        assert Z.dtype == want.dtype and Z._meta.dtype == want.dtype
        assert isinstance(Z._meta, np.ndarray)
        got = Z.compute()
        np.testing.assert_array_equal(got, want, err_msg=type(est).__name__)


def test_binning_gives_csr_blocks(client) -> None:
    x, _ = _data()
    est = rf.RandomBinningFeatures(n_grids=8, length_scale=1.0, random_state=0).fit(x)
    Z = rdask.transform(est, _dask(x))
    want = est.transform(x)
    assert isinstance(Z._meta, scipy.sparse.csr_matrix)
    assert Z.chunks == (CHUNKS, (want.shape[1],)) and Z.dtype == want.dtype
    blocks = dask.compute(*Z.to_delayed().ravel())
    assert all(isinstance(b, scipy.sparse.csr_matrix) for b in blocks)
    got = scipy.sparse.vstack(blocks).tocsr()
    assert (got != want).nnz == 0


def test_transform_of_an_unfitted_transformer_and_of_non_dask_input() -> None:
    x, _ = _data(20)
    with pytest.raises(NotFittedError):
        rdask.transform(rf.RandomFourierFeatures(8), _dask(x, (20,)))
    est = rf.RandomFourierFeatures(8, random_state=0).fit(x)
    with pytest.raises(TypeError, match="`X` must be a dask"):
        rdask.transform(est, x)
    with pytest.raises(ValueError, match="2-D"):
        rdask.transform(est, da.from_array(x[:, 0], chunks=5))


# --- fits -----------------------------------------------------------------------------------


def test_feature_gpr_fit_equals_the_in_process_fit(client) -> None:
    x, y = _data()
    rff = rf.RandomFourierFeatures(48, length_scale=0.8, random_state=0)
    for noise in (0.05, None):
        est = rf.RandomFeatureGPR(rff, noise_variance=noise, chunk_size=64)
        ref = rf.RandomFeatureGPR(rff, noise_variance=noise, chunk_size=64).fit(x, y)
        # y chunked differently from X: aligned to X's row chunks.
        got = rdask.fit(est, _dask(x), da.from_array(y, chunks=100))
        assert "stats_" not in est.__dict__
        assert got.stats_.n_samples == N
        assert _rel(got.stats_.gram, ref.stats_.gram) < RTOL
        assert _rel(got.stats_.phi_y, ref.stats_.phi_y) < RTOL
        assert abs(got.noise_variance_ - ref.noise_variance_) <= RTOL * ref.noise_variance_
        assert _rel(got.coef_, ref.coef_) < RTOL
        assert abs(got.log_marginal_likelihood_ - ref.log_marginal_likelihood_) < RTOL * abs(
            ref.log_marginal_likelihood_
        )
        xt, _ = _data(50, seed=1)
        m, s = rdask.predict(got, _dask(xt, (20, 30)), return_std=True)
        m_ref, s_ref = ref.predict(xt, return_std=True)
        assert m.chunks == ((20, 30),) and m.dtype == np.float64
        assert _rel(m.compute(), m_ref) < RTOL and _rel(s.compute(), s_ref) < RTOL


def test_a_fitted_transformer_is_used_as_it_is(client) -> None:
    x, y = _data()
    nys = rf.NystroemFeatures(n_components=24, random_state=0).fit(x[::7])
    # optimize=() fits nothing, as optimize=None (any transformer).
    for optimize in (None, ()):
        gp = rf.RandomFeatureGPR(nys, noise_variance=0.1, optimize=optimize)
        got = rdask.fit(gp, _dask(x), _dask(y))
        np.testing.assert_array_equal(got.features_.transform(x[:5]), nys.transform(x[:5]))
        want = rf.SufficientStatistics.from_features(nys, x, y)
        assert _rel(got.stats_.gram, want.gram) < RTOL
        assert _rel(got.stats_.phi_y, want.phi_y) < RTOL
    with pytest.raises(ValueError, match="take 3 input features, `X` has 2"):
        rdask.fit(rf.RandomFeatureGPR(nys), _dask(x[:, :2]), _dask(y))


def test_fitted_model_predicts_lazily_bit_for_bit(client) -> None:
    x, y = _data()
    gp = rf.RandomFeatureGPR(rf.RandomFourierFeatures(32, random_state=0), noise_variance=0.1)
    gp.fit(x, y)
    X = _dask(x)
    mean = rdask.predict(gp, X)
    np.testing.assert_array_equal(mean.compute(), gp.predict(x))
    m, s = rdask.predict_noisy(gp, X)
    want = gp.predict_noisy(x)
    np.testing.assert_array_equal(m.compute(), want[0])
    np.testing.assert_array_equal(s.compute(), want[1])


def test_lazy_outputs_take_rows_of_unknown_chunk_sizes(client) -> None:
    # Boolean indexing leaves the row-chunk sizes unknown: the per-block
    # outputs need none of them (fits, which count rows, refuse them: see
    # test_bad_inputs_of_fit).
    x, y = _data()
    keep = x[:, 0] > -0.5
    X = _dask(x)[_dask(keep)]
    assert np.isnan(X.chunks[0][0])
    rff = rf.RandomFourierFeatures(32, random_state=0).fit(x)
    np.testing.assert_array_equal(rdask.transform(rff, X).compute(), rff.transform(x[keep]))
    gp = rf.RandomFeatureGPR(rff, noise_variance=0.1).fit(x, y)
    np.testing.assert_array_equal(rdask.predict(gp, X).compute(), gp.predict(x[keep]))
    mean, std = rdask.predict(gp, X, return_std=True)
    want = gp.predict(x[keep], return_std=True)
    np.testing.assert_array_equal(mean.compute(), want[0])
    np.testing.assert_array_equal(std.compute(), want[1])
    gpc = rf.RandomFeatureGPC(rff).fit(x, y > 0)
    np.testing.assert_array_equal(rdask.predict_proba(gpc, X).compute(), gpc.predict_proba(x[keep]))
    latent = [a.compute() for a in rdask.predict_latent(gpc, X)]
    for got, ref in zip(latent, gpc.predict_latent(x[keep])):
        np.testing.assert_array_equal(got, ref)


def test_lazy_outputs_take_blocks_that_a_mask_empties(client) -> None:
    """The predictors refuse zero rows, so a block emptied by a mask failed
    at compute; it gives an empty block, as the transform does."""
    x, y = _data()
    keep = np.ones(N, dtype=bool)
    keep[CHUNKS[0] : CHUNKS[0] + CHUNKS[1]] = False  # the second block
    keep[::11] = False
    X = _dask(x)[_dask(keep)]
    rff = rf.RandomFourierFeatures(32, random_state=0).fit(x)
    gp = rf.RandomFeatureGPR(rff, noise_variance=0.1).fit(x, y)
    np.testing.assert_array_equal(rdask.predict(gp, X).compute(), gp.predict(x[keep]))
    for got, want in [
        (rdask.predict(gp, X, return_std=True), gp.predict(x[keep], return_std=True)),
        (rdask.predict_noisy(gp, X), gp.predict_noisy(x[keep])),
    ]:
        for a, b in zip(got, want):
            np.testing.assert_array_equal(a.compute(), b)
    gpc = rf.RandomFeatureGPC(rff).fit(x, y > 0)
    np.testing.assert_array_equal(rdask.predict(gpc, X).compute(), gpc.predict(x[keep]))
    np.testing.assert_array_equal(rdask.predict_proba(gpc, X).compute(), gpc.predict_proba(x[keep]))
    for a, b in zip(rdask.predict_latent(gpc, X), gpc.predict_latent(x[keep])):
        np.testing.assert_array_equal(a.compute(), b)


def test_lazy_pairs_check_their_input_when_built() -> None:
    """A wrong feature count (or a keyword the estimator does not take)
    failed only inside the workers at compute."""
    x, y = _data()
    gp = rf.RandomFeatureGPR(rf.RandomFourierFeatures(16, random_state=0), noise_variance=0.1)
    gp.fit(x, y)
    with pytest.raises(ValueError, match="features"):
        rdask.predict_noisy(gp, _dask(x[:, :2]))
    gpc = rf.RandomFeatureGPC(rf.RandomFourierFeatures(16, random_state=0)).fit(x, y > 0)
    with pytest.raises(TypeError, match="return_std"):
        rdask.predict(gpc, _dask(x), return_std=True)
    with pytest.raises(ValueError, match="features"):
        rdask.predict_latent(gpc, _dask(x[:, :2]))


@pytest.mark.parametrize("optimize", [None, ("noise_variance",)])
def test_feature_gpr_fit_draws_the_transformer_as_in_process(client, optimize) -> None:
    """The default map (features=None) failed on dask arrays, and an
    unseeded transformer was not seeded from random_state, so the fit
    differed from the in-memory one and from run to run."""
    x, y = _data()
    for features in (None, rf.RandomFourierFeatures(24)):
        est = rf.RandomFeatureGPR(features, optimize=optimize, random_state=3)
        ref = clone(est).fit(x, y)
        got = rdask.fit(est, _dask(x), _dask(y))
        assert got.seed_ == ref.seed_
        assert got.features_.random_state == ref.features_.random_state == ref.seed_ % 2**32
        assert got.features_.length_scale == pytest.approx(ref.features_.length_scale, rel=1e-12)
        xt, _ = _data(50, seed=1)
        assert _rel(rdask.predict(got, _dask(xt, (20, 30))).compute(), ref.predict(xt)) < 1e-8


def test_fits_refuse_targets_with_nan_or_infinity_as_in_memory(client) -> None:
    x, y = _data()
    fits = [
        rf.RandomFeatureGPR(rf.RandomFourierFeatures(16, random_state=0)),
        rf.RandomFeatureGPR(
            rf.RandomFourierFeatures(16, random_state=0), optimize=("noise_variance",)
        ),
        rf.SparseGPR(inducing=x[::50], optimize=()),
        rf.SparseGPR(inducing=x[::50], random_state=0),
    ]
    for bad in (np.nan, np.inf):
        yb = y.copy()
        yb[5] = bad
        for est in fits:
            with pytest.raises(ValueError) as in_memory:
                clone(est).fit(x, yb)
            with pytest.raises(ValueError) as on_dask:
                rdask.fit(est, _dask(x), _dask(yb))
            assert str(on_dask.value) == str(in_memory.value)


def test_a_column_vector_y_is_raveled_with_the_in_memory_warning(client) -> None:
    x, y = _data()
    gp = rf.RandomFeatureGPR(rf.RandomFourierFeatures(16, random_state=0), noise_variance=0.1)
    with pytest.warns(DataConversionWarning, match="column-vector y") as in_memory:
        rf.RandomFeatureGPR(**gp.get_params(deep=False)).fit(x, y[:, None])
    with pytest.warns(DataConversionWarning, match="column-vector y") as on_dask:
        got = rdask.fit(gp, _dask(x), _dask(y[:, None]))
    assert str(on_dask[0].message) == str(in_memory[0].message)
    assert on_dask[0].filename == __file__
    np.testing.assert_array_equal(got.coef_, rdask.fit(gp, _dask(x), _dask(y)).coef_)


def test_sparse_gpr_fit_equals_the_in_process_fit(client) -> None:
    x, y = _data()
    z = x[::25]
    for method in ("vfe", "fitc"):
        est = rf.SparseGPR(
            inducing=z,
            method=method,
            length_scale=0.9,
            kernel_variance=1.2,
            noise_variance=0.05,
            optimize=(),
            chunk_size=50,
        )
        ref = rf.SparseGPR(**est.get_params()).fit(x, y)
        got = rdask.fit(est, _dask(x), _dask(y))
        assert abs(got.log_marginal_likelihood_ - ref.log_marginal_likelihood_) < RTOL * abs(
            ref.log_marginal_likelihood_
        )
        xt, _ = _data(40, seed=2)
        m, s = rdask.predict(got, _dask(xt, (15, 25)), return_std=True)
        m_ref, s_ref = ref.predict(xt, return_std=True)
        assert _rel(m.compute(), m_ref) < RTOL and _rel(s.compute(), s_ref) < RTOL
        assert got.n_iter_ == 0 and got.y_mean_ == pytest.approx(ref.y_mean_, rel=RTOL)


def test_gpc_fit_equals_the_in_process_fit(client) -> None:
    rng = np.random.default_rng(3)
    x = rng.normal(size=(N, 2))
    labels = np.array(["a", "b", "c"])[(x[:, 0] > 0).astype(int) + (x[:, 1] > 1).astype(int)]
    features = rf.RandomFourierFeatures(40, length_scale=1.5, random_state=0)
    ref = rf.RandomFeatureGPC(features, chunk_size=64).fit(x, labels)
    got = rdask.fit(rf.RandomFeatureGPC(features, chunk_size=64), _dask(x), _dask(labels))
    assert got.classes_.tolist() == ["a", "b", "c"]
    assert abs(got.log_marginal_likelihood_ - ref.log_marginal_likelihood_) < RTOL * abs(
        ref.log_marginal_likelihood_
    )
    xt = rng.normal(size=(30, 2))
    proba = rdask.predict_proba(got, _dask(xt, (10, 20)))
    assert proba.chunks == ((10, 20), (3,)) and proba.dtype == np.float64
    assert _rel(proba.compute(), ref.predict_proba(xt)) < RTOL
    pred = rdask.predict(got, _dask(xt, (10, 20)))
    assert pred.dtype == ref.classes_.dtype
    np.testing.assert_array_equal(pred.compute(), ref.predict(xt))
    mean, var = rdask.predict_latent(got, _dask(xt, (10, 20)))
    mean_ref, var_ref = ref.predict_latent(xt)
    assert _rel(mean.compute(), mean_ref) < RTOL and _rel(var.compute(), var_ref) < RTOL


def _gpc_data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(3)
    x = rng.normal(size=(N, 2))
    return x, np.array(["a", "b", "c"])[(x[:, 0] > 0).astype(int) + (x[:, 1] > 1).astype(int)]


@pytest.mark.parametrize(
    "features",
    [None, rf.RandomFourierFeatures(40, length_scale=1.5)],
    ids=["default", "unseeded"],
)
def test_gpc_fit_seeds_and_reports_as_the_in_process_fit(client, features) -> None:
    x, labels = _gpc_data()
    est = rf.RandomFeatureGPC(features, alpha_epsilon=0.05, random_state=4, chunk_size=64)
    ref = clone(est).fit(x, labels)
    got = rdask.fit(est, _dask(x), _dask(labels))
    for name in ("alpha_epsilon_", "seed_", "length_scale_", "kernel_variance_", "n_iter_"):
        assert getattr(got, name) == getattr(ref, name), name
    assert got.features_.random_state == ref.features_.random_state == got.seed_ % (1 << 32)
    xt = np.random.default_rng(5).normal(size=(30, 2))
    assert (
        _rel(rdask.predict_proba(got, _dask(xt, (10, 20))).compute(), ref.predict_proba(xt)) < RTOL
    )


def test_gpc_fit_refuses_what_it_cannot_fit(client) -> None:
    x, labels = _gpc_data()
    rff = rf.RandomFourierFeatures(40, random_state=0)
    for kw, match in [
        (dict(alpha_epsilon="auto"), "alpha_epsilon"),
        (dict(optimize=("length_scale",)), "optimize"),
        (dict(optimize=("noise",)), "optimize"),
    ]:
        with pytest.raises(rf.InvalidInputError, match=match):
            rdask.fit(rf.RandomFeatureGPC(rff, **kw), _dask(x), _dask(labels))


def test_class_statistics_pickle_and_merge_exactly() -> None:
    rng = np.random.default_rng(0)
    phi, codes = rng.standard_normal((30, 4)), rng.integers(0, 3, 30)
    whole = rf._core.DirichletClassStats(3, 4)
    whole.accumulate(phi, codes)
    a, b = rf._core.DirichletClassStats(3, 4), rf._core.DirichletClassStats(3, 4)
    a.accumulate(phi[:11], codes[:11])
    b.accumulate(phi[11:], codes[11:])
    merged = pickle.loads(pickle.dumps(a)).copy()
    merged.merge(pickle.loads(pickle.dumps(b)))
    assert merged.n_samples == 30 and a.n_samples == 11
    fa, fb = rf._core.DirichletGPC.fit(merged, 0.01), rf._core.DirichletGPC.fit(whole, 0.01)
    np.testing.assert_allclose(fa.class_lml, fb.class_lml, rtol=1e-12)
    with pytest.raises(rf.InvalidInputError, match="classes"):
        merged.merge(rf._core.DirichletClassStats(2, 4))


# --- hyperparameters -----------------------------------------------------------------------


def _sparse(x: np.ndarray, **kw) -> rf.SparseGPR:
    base = dict(inducing=x[::40], length_scale=0.7, kernel_variance=0.8, noise_variance=0.1)
    return rf.SparseGPR(**{**base, **kw})


@pytest.mark.parametrize("method", ["vfe", "fitc"])
def test_sparse_objective_and_gradient(client, method) -> None:
    x, y = _data()
    X, Y = _dask(x), _dask(y)
    est = _sparse(x, method=method, optimize=())
    value, grad = rdask.sparse_objective(est, X, Y)
    ref = rf.SparseGPR(**est.get_params()).fit(x, y)
    assert abs(value - ref.log_marginal_likelihood_) < RTOL * abs(value)
    # Central differences of the in-process objective in the log
    # hyperparameters: truncation (h^2 / 6) times the third derivative and rounding eps |F| / h,
    # both below 1e-7 |F| at h = 1e-4 for these smooth objectives.
    h = 1e-4
    names = ("length_scale", "kernel_variance", "noise_variance")
    for i, name in enumerate(names):
        v = est.get_params()[name]
        up = _sparse(x, method=method, optimize=(), **{name: v * np.exp(h)}).fit(x, y)
        down = _sparse(x, method=method, optimize=(), **{name: v * np.exp(-h)}).fit(x, y)
        fd = (up.log_marginal_likelihood_ - down.log_marginal_likelihood_) / (2 * h)
        assert abs(grad[i] - fd) < 1e-6 * abs(value), (name, grad[i], fd)


def test_sparse_on_dask_arrays_runs_on_the_cpu(client) -> None:
    x, y = _data()
    X, Y = _dask(x), _dask(y)
    assert rdask.fit(_sparse(x, optimize=(), device="auto"), X, Y).device_ == "cpu"
    est = _sparse(x, n_restarts=0, max_iter=2, device="auto")
    assert rdask.fit(est, X, Y).device_ == "cpu"
    for optimize in ((), ("noise_variance",)):
        with pytest.raises(rf.InvalidInputError, match="workers' CPUs"):
            rdask.fit(_sparse(x, optimize=optimize, device="gpu"), X, Y)


def test_sparse_fit_refuses_targets_beyond_the_float64_range(client) -> None:
    # As in memory (tests/test_extremes.py): a variance of the targets
    # outside 1e-40..1e40 is refused before the first evaluation; beyond
    # it the bound's gradient overflowed into a NaN-matrix error.
    x, y = _data()
    for scale in (1e21, 1e-21):
        s2 = scale**2
        est = _sparse(x, kernel_variance=0.8 * s2, noise_variance=0.1 * s2, max_iter=2)
        with pytest.raises(rf.InvalidInputError, match=r"variance .* outside 1e-40\.\.1e40"):
            rdask.fit(est, _dask(x), _dask(scale * y))
    # Fixed hyperparameters: no fit, no refusal.
    est = _sparse(x, kernel_variance=0.8e42, noise_variance=0.1e42, optimize=())
    assert np.isfinite(rdask.fit(est, _dask(x), _dask(1e21 * y)).log_marginal_likelihood_)


@pytest.mark.parametrize("scale", [1e160, 1e-155, 1e-200])
def test_fits_refuse_targets_whose_variance_leaves_float64_as_in_memory(client, scale) -> None:
    # var(y) overflows (1e160), its default noise variance is subnormal
    # (1e-155) or it underflows to 0 (1e-200). Before, the default noise
    # variance was taken from the reduced variance as is (infinite,
    # subnormal, or 0.1 as for constant targets), an underflowed variance
    # read as constant targets in the checks of a hyperparameter fit, and
    # at 1e160 the statistics of a block held infinite sums, which the
    # driver failed to deserialize: the fit never returned.
    x, y = _data()
    fits = [
        rf.RandomFeatureGPR(rf.RandomFourierFeatures(16, random_state=0)),
        rf.RandomFeatureGPR(rf.RandomFourierFeatures(16, random_state=0), noise_variance=0.1),
        rf.RandomFeatureGPR(
            rf.RandomFourierFeatures(16, random_state=0), optimize=("noise_variance",)
        ),
        # Its starts are given; a fit refuses the targets' variance.
        rf.SparseGPR(
            inducing=x[:8], length_scale=1.0, kernel_variance=1.0, noise_variance=0.1, max_iter=2
        ),
        rf.SparseGPR(
            inducing=x[:8], length_scale=1.0, kernel_variance=1.0, noise_variance=0.1, optimize=()
        ),
    ]
    for est in fits:
        try:
            ref = type(est)(**est.get_params(deep=False)).fit(x, scale * y)
        except rf.InvalidInputError as in_memory:
            with pytest.raises(rf.InvalidInputError) as on_dask:
                rdask.fit(est, _dask(x), _dask(scale * y))
            assert "`y`" in str(on_dask.value)
            assert str(on_dask.value) == str(in_memory)
        else:
            # Fixed hyperparameters on tiny targets: fitted, as in memory.
            assert scale < 1
            got = rdask.fit(est, _dask(x), _dask(scale * y))
            assert _rel(got.predict(x[:20]), ref.predict(x[:20])) < RTOL


# Uneven row chunks of a few thousand rows: enough for the optimizer's
# coarse levels (from 1,024 rows on).
OPT_CHUNKS = (700, 1100, 450, 750)


def test_fits_refuse_constant_targets_as_in_memory(client) -> None:
    # The residual after centering is 0: no maximum (see test_extremes).
    x, _ = _data()
    flat = np.full(N, 1.5)
    fits = [
        rf.SparseGPR(inducing=x[:8], length_scale=1.0, kernel_variance=1.0, noise_variance=0.1),
        rf.RandomFeatureGPR(
            rf.RandomFourierFeatures(16, random_state=0), optimize=("noise_variance",)
        ),
        rf.RandomFeatureGPR(
            rf.RandomFourierFeatures(16, random_state=0),
            optimize=("length_scale", "kernel_variance", "noise_variance"),
            ard=True,
        ),
        # No variance free: the statistics' variance start does not run.
        rf.RandomFeatureGPR(
            rf.RandomFourierFeatures(16, random_state=0), optimize=("length_scale",), ard=True
        ),
    ]
    for est in fits:
        with pytest.raises(rf.InvalidInputError) as in_memory:
            type(est)(**est.get_params(deep=False)).fit(x, flat)
        with pytest.raises(rf.InvalidInputError) as on_dask:
            rdask.fit(est, _dask(x), _dask(flat))
        assert "are constant" in str(on_dask.value)
        assert str(on_dask.value) == str(in_memory.value)
    # Uncentered, nonzero constant targets are fitted.
    sparse = fits[0].set_params(center_y=False, optimize=("noise_variance",))
    assert np.isfinite(rdask.fit(sparse, _dask(x), _dask(flat)).log_marginal_likelihood_)


# Inputs 1,000 times larger than the transformer's length scale suits:
# both fits start from the data's scale, the in-memory fit's median
# pairwise distance taken on the driver from the same rows; the Maclaurin
# map is refitted where its first fit ends.
@pytest.mark.parametrize(
    ("ard", "scale", "transformer"),
    [
        (False, 1.0, "rff"),
        (True, 1.0, "rff"),
        (False, 1e3, "rff"),
        (True, 1e3, "rff"),
        (True, 1.0, "rff_per_dimension"),
        (False, 1e3, "maclaurin"),
    ],
)
def test_feature_gpr_hyperparameter_fit_reaches_the_in_process_optimum(
    client, ard, scale, transformer
) -> None:
    x, y = _data(sum(OPT_CHUNKS), seed=3)
    x = x * scale
    # 128 components: with 64 the LML of one length scale keeps growing
    # along the ridge of a growing length scale and kernel variance up to
    # the variance ratio the float64 statistics resolve, where its rounding
    # noise (~1e-3 nats) would set the last digits compared below.
    if transformer == "rff":
        features = rf.RandomFourierFeatures(128, length_scale=0.8, random_state=0)
    elif transformer == "rff_per_dimension":
        # Drawn at one length scale per dimension, where the fit starts (a
        # start from which both runs take the same path to the last digits:
        # from some others, e.g. (0.8, 1.5, 3.0), the length scale of the
        # dimension y does not depend on runs through the flat region at
        # ~1e6 on paths that part at the rounding of the sums, and end
        # 4e-7 nats apart).
        features = rf.RandomFourierFeatures(128, length_scale=[1.0, 2.0, 0.5], random_state=0)
    else:
        features = rf.MaclaurinFeatures(128, random_state=0)
    est = rf.RandomFeatureGPR(
        features,
        optimize=("length_scale", "kernel_variance", "noise_variance"),
        ard=ard,
        n_restarts=1,
        chunk_size=256,
        random_state=0,
    )
    ref = rf.RandomFeatureGPR(**est.get_params(deep=False)).fit(x, y)
    got = rdask.fit(est, _dask(x, OPT_CHUNKS), _dask(y, OPT_CHUNKS))
    # The same optimizer on the same evaluations up to the rounding of the
    # summation order (about 1e-13 relative in the LML): the same path for
    # L-BFGS (ARD). The profiled search of one length scale ends where its
    # parabola's promise meets the tolerance, judged from those values, so
    # on another CPU's rounding a level may end one evaluation earlier or
    # later.
    if ard:
        assert got.n_iter_ == ref.n_iter_ > 0
    else:
        assert abs(got.n_iter_ - ref.n_iter_) <= 2 and ref.n_iter_ > 0
    lml, lml_ref = got.log_marginal_likelihood_, ref.log_marginal_likelihood_
    assert abs(lml - lml_ref) < RTOL * abs(lml_ref)
    assert np.shape(got.length_scale_) == ((3,) if ard else ())
    # The variances in the optimizer's coordinates (the logs); the length
    # scales as 1 / l, on which the model depends (through x / l): with ARD
    # the length scale of the dimension y does not depend on runs off to
    # ~1e6, where the LML is flat in it and rounding sets its last digits
    # (ln l to about 1e-6). The Maclaurin fit ends on a flatter ridge of
    # length scale and kernel variance (a kernel variance of ~75): a level
    # that ends one evaluation apart moves them by up to ~1e-5.
    atol = 1e-5 if transformer == "maclaurin" else 1e-6
    np.testing.assert_allclose(
        np.log([got.kernel_variance_, got.noise_variance_]),
        np.log([ref.kernel_variance_, ref.noise_variance_]),
        rtol=0,
        atol=atol,
    )
    np.testing.assert_allclose(
        scale / np.atleast_1d(got.length_scale_),
        scale / np.atleast_1d(ref.length_scale_),
        rtol=0,
        atol=atol,
    )
    if transformer == "maclaurin":
        # Refitted at the same length scale on the same rows.
        np.testing.assert_array_equal(got.features_.allocation_, ref.features_.allocation_)
        assert (
            ref.n_iter_
            > rf.RandomFeatureGPR(**est.get_params(deep=False)).fit(x / scale, y).n_iter_
        )
    assert got.stats_.n_samples == x.shape[0]
    assert _rel(got.predict(x[:50]), ref.predict(x[:50])) < 1e-7


def test_a_sparse_fit_from_far_starts_starts_at_the_data_scale_as_in_process(
    client, monkeypatch
) -> None:
    # Starts 1e3 and 1e7 times the data's length scale and variance: both
    # fits compare them with the data's scale (the median pairwise distance
    # of the same strided rows, and var(y)) on the coarsest level and take
    # the default start's path. From the given starts the fit on dask
    # arrays ended in noise.
    x, y = _data(sum(OPT_CHUNKS), seed=3)
    kw = dict(inducing=x[::60], n_restarts=0, random_state=0)
    est = rf.SparseGPR(length_scale=1e3, kernel_variance=1e7, noise_variance=0.1, **kw)
    ref = rf.SparseGPR(**est.get_params()).fit(x, y)
    default = rf.SparseGPR(**kw).fit(x, y)
    assert ref.log_marginal_likelihood_ == default.log_marginal_likelihood_
    # Every reduction of the statistics, and those followed by the gradient
    # sums' (the optimizer's evaluations).
    calls = {"stats": 0, "passes": 0}

    def counted(name: str, fn):
        def call(*args):
            calls[name] += 1
            return fn(*args)

        return call

    monkeypatch.setattr(rdask, "_sparse_stats", counted("stats", rdask._sparse_stats))
    monkeypatch.setattr(rdask, "_sparse_passes", counted("passes", rdask._sparse_passes))
    got = rdask.fit(est, _dask(x, OPT_CHUNKS), _dask(y, OPT_CHUNKS))
    # Of the four starts (given, data length scale, data variances, both),
    # the given one cannot be evaluated (its K_uu is singular) and is passed
    # over before any reduction; the other three are compared by their
    # statistics alone.
    assert calls["passes"] > 0
    assert calls["stats"] == calls["passes"] + 3
    # As in the test below: the same optimum to the bound's rounding noise.
    lml, lml_ref = got.log_marginal_likelihood_, ref.log_marginal_likelihood_
    assert abs(lml - lml_ref) < 1e-9 * abs(lml_ref)
    assert got.noise_variance_ < 0.1 * np.var(y)


@pytest.mark.parametrize("optimize", [(), ("length_scale", "kernel_variance", "noise_variance")])
def test_sparse_hyperparameters_left_none_take_the_in_process_defaults(client, optimize) -> None:
    # The median pairwise distance of the same strided rows, var(y) and
    # 0.1 var(y), the moments reduced in another order: with fixed
    # hyperparameters the in-process model to the summation order, with a
    # fit its optimum to the bound's rounding noise (as below).
    x, y = _data(sum(OPT_CHUNKS), seed=3)
    est = rf.SparseGPR(inducing=x[::60], optimize=optimize, n_restarts=0)
    ref = rf.SparseGPR(**est.get_params()).fit(x, y)
    got = rdask.fit(est, _dask(x, OPT_CHUNKS), _dask(y, OPT_CHUNKS))
    lml, lml_ref = got.log_marginal_likelihood_, ref.log_marginal_likelihood_
    assert abs(lml - lml_ref) < 1e-9 * abs(lml_ref)
    if not optimize:
        for name in ("length_scale_", "kernel_variance_", "noise_variance_"):
            np.testing.assert_allclose(getattr(got, name), getattr(ref, name), rtol=1e-12)
        value, _ = rdask.sparse_objective(est, _dask(x, OPT_CHUNKS), _dask(y, OPT_CHUNKS))
        assert abs(value - lml_ref) < 1e-9 * abs(lml_ref)


def test_the_data_length_scales_on_dask_arrays_are_the_in_process_starts(client) -> None:
    # Per column with ARD (one column in other units), from the same
    # strided rows; the columns' spreads are reduced in another order.
    x, y = _data(sum(OPT_CHUNKS), seed=3)
    x[:, 1] *= 1e3
    X = _dask(x, OPT_CHUNKS)
    for ard in (False, True):
        start = rf.SparseGPR(inducing=x[:5], ard=ard, optimize=()).fit(x, y).length_scale_
        got = rdask._data_length_scales(X, ard)
        np.testing.assert_allclose(got, np.broadcast_to(start, len(got)), rtol=1e-12)
    assert len(got) == 3 and got[1] > 100 * got[0]


def test_sparse_hyperparameter_fit_reaches_the_in_process_optimum(client) -> None:
    x, y = _data(sum(OPT_CHUNKS), seed=3)
    # 50 inducing inputs: the optimum is interior (length scale 2.1) with a
    # well-conditioned K_uu. (With 20 the bound keeps rising along a ridge
    # of long length scales and large kernel variances, where K_uu is nearly
    # singular, and where along it a path stops depends on rounding.)
    est = rf.SparseGPR(
        inducing=x[::60],
        length_scale=0.7,
        kernel_variance=0.8,
        noise_variance=0.1,
        n_restarts=1,
        random_state=0,
    )
    ref = rf.SparseGPR(**est.get_params()).fit(x, y)
    got = rdask.fit(est, _dask(x, OPT_CHUNKS), _dask(y, OPT_CHUNKS))
    # The optimizer of the in-process fit (restarts, a coarse level of 750
    # rows) on the same evaluations up to the rounding of the summation
    # order (about 1e-15 relative per sum). The fit ends where L-BFGS's
    # steps meet the bound's rounding noise, so the end of the path (and the
    # iteration count) may differ but not the optimum: a run stops when a
    # steepest-descent step could gain (||g||^2 / 2) no more than the bound's
    # rounding noise around its best point.
    assert got.n_iter_ > 0 and ref.n_iter_ > 0
    lml, lml_ref = got.log_marginal_likelihood_, ref.log_marginal_likelihood_
    assert abs(lml - lml_ref) < 1e-9 * abs(lml_ref)
    names = ("length_scale", "kernel_variance", "noise_variance")
    theta = np.log([getattr(got, f"{n}_") for n in names])
    theta_ref = np.log([getattr(ref, f"{n}_") for n in names])

    # The two optima apart only along directions where the bound is as flat
    # as the comparison above allows: the bound's own curvature (central
    # differences, step 1e-3, of the in-process bound per row) over the step
    # between them, -1/2 dt' H dt N, within the same 1e-9 of the bound.
    def per_row(t):
        fixed = dict(length_scale=np.exp(t[0]), kernel_variance=np.exp(t[1]))
        fixed.update(noise_variance=np.exp(t[2]), optimize=())
        gp = rf.SparseGPR(inducing=est.inducing, **fixed).fit(x, y)
        return gp.log_marginal_likelihood_ / len(y)

    h, e = 1e-3, np.eye(3)
    hess = np.array(
        [
            [
                (
                    per_row(theta_ref + h * (e[i] + e[j]))
                    - per_row(theta_ref + h * (e[i] - e[j]))
                    - per_row(theta_ref - h * (e[i] - e[j]))
                    + per_row(theta_ref - h * (e[i] + e[j]))
                )
                / (4 * h * h)
                for j in range(3)
            ]
            for i in range(3)
        ]
    )
    step = theta - theta_ref
    assert -0.5 * step @ hess @ step * len(y) < 1e-9 * abs(lml_ref)
    np.testing.assert_array_equal(got.inducing_points_, est.inducing)
    # The cluster's model is the in-process model at its hyperparameters
    # (the same sums in another order).
    at_got = rf.SparseGPR(inducing=est.inducing, optimize=(), **dict(zip(names, np.exp(theta))))
    assert _rel(got.predict(x[:50]), at_got.fit(x, y).predict(x[:50])) < 1e-9


def test_an_ard_evaluation_on_the_cluster_equals_the_in_process_one(client) -> None:
    # The two reductions of an evaluation with per-dimension length scales
    # (the statistics; then the second pass with the driver's solve) against
    # the in-process evaluation: the same sums added in another order, about
    # 1e-15 relative each, amplified by the D x D solve (condition <~ 1e2).
    x, y = _data()
    fmap = rf.RandomFourierFeatures(32, length_scale=0.8, random_state=0).fit(x)._feature_map()
    values = [0.7, 1.1, 1.5, 1.2, 0.05]
    X, Y = _dask(x), _dask(y)
    sums = rdask._reduced(rdask._feature_lml_block, (fmap, [0.8], values, 64), X, Y)
    lml, grad = sums.log_marginal_likelihood(center_y=True)
    second = sums.gradient_pass(center_y=True)
    ls = rdask._reduced(rdask._gradient_pass_block, (second, fmap, [0.8], 64), X, Y)
    assert ls.shape == (4,) and ls[-1] == N
    ref_lml, ref_grad = rf._core.feature_gp_lml(
        fmap,
        x,
        y,
        drawn_length_scale=[0.8],
        length_scale=values[:3],
        kernel_variance=values[3],
        noise_variance=values[4],
        center=True,
        chunk_size=64,
    )
    assert abs(lml - ref_lml) < 1e-12 * abs(ref_lml)
    assert _rel([*ls[:3], *grad[3:]], ref_grad) < 1e-12


def test_feature_lml_sums_merge_and_pickle_by_value() -> None:
    x, y = _data(90)
    fmap = rf.RandomFourierFeatures(16, length_scale=0.8, random_state=0).fit(x)._feature_map()
    kw = dict(features=fmap, drawn_length_scale=[0.8], values=[0.7, 1.2, 0.05], chunk_size=32)
    sums = rf._core.FeatureLmlSums
    one = sums.of_rows(x, y, **kw)
    a = sums.of_rows(x[:40], y[:40], **kw)
    a.merge(pickle.loads(pickle.dumps(sums.of_rows(x[40:], y[40:], **kw))))
    assert a.n == one.n == 90
    v1, g1 = one.log_marginal_likelihood(center_y=True)
    v, g = a.log_marginal_likelihood(center_y=True)
    assert abs(v - v1) < RTOL * abs(v1) and _rel(g, g1) < RTOL and len(g) == 3
    # The length-scale entry comes from the second reduction (gradient_pass).
    assert g[0] == g1[0] == 0.0 and g[1] != 0.0
    other = sums.of_rows(x, y, **{**kw, "values": [1.0, 1.2, 0.05]})
    with pytest.raises(rf.InvalidInputError, match="other hyperparameters"):
        a.merge(other)


# --- bad input ------------------------------------------------------------------------------


def test_bad_inputs_of_fit() -> None:
    x, y = _data(40)
    gp = rf.RandomFeatureGPR(rf.RandomFourierFeatures(8, random_state=0), noise_variance=0.1)
    with pytest.raises(TypeError, match="`X` must be a dask"):
        rdask.fit(gp, x, _dask(y, (40,)))
    with pytest.raises(TypeError, match="`y` must be a dask"):
        rdask.fit(gp, _dask(x, (40,)), y)
    with pytest.raises(ValueError, match="40 rows but `y` has 39"):
        rdask.fit(gp, _dask(x, (40,)), _dask(y[:39], (39,)))
    X = _dask(x, (40,))[da.from_array(np.ones(40, bool), chunks=40)]
    with pytest.raises(ValueError, match="unknown row-chunk sizes"):
        rdask.fit(gp, X, _dask(y, (40,)))
    with pytest.raises(TypeError, match="`estimator` must be"):
        rdask.fit(rf.ExactGPR(), _dask(x, (40,)), _dask(y, (40,)))
    # Non-real data is refused as the in-memory estimators refuse it, not
    # cast: complex inputs or targets, and regression targets that are
    # strings.
    with pytest.raises(rf.InvalidDtypeError, match="`X` must hold real numbers"):
        rdask.fit(gp, _dask(x + 1j, (40,)), _dask(y, (40,)))
    with pytest.raises(rf.InvalidDtypeError, match="`y` must hold real numbers or labels"):
        rdask.fit(gp, _dask(x, (40,)), _dask(y + 1j, (40,)))
    for est in (gp, rf.SparseGPR(inducing=x[:4], optimize=())):
        with pytest.raises(rf.InvalidDtypeError, match="`y` must hold numbers"):
            rdask.fit(est, _dask(x, (40,)), _dask(y.astype(str), (40,)))
    with pytest.raises(rf.InvalidDtypeError, match="`y` must hold numbers"):
        rdask.sparse_objective(
            rf.SparseGPR(inducing=x[:4]), _dask(x, (40,)), _dask(y.astype(str), (40,))
        )
    # The marginal-likelihood fit's refusals are those of the in-memory fit.
    for est in (
        rf.RandomFeatureGPR(rf.PolynomialSketch(8, random_state=0), optimize=("noise_variance",)),
        rf.RandomFeatureGPR(
            rf.MaclaurinFeatures(8, random_state=0), optimize=("length_scale",), ard=True
        ),
        rf.RandomFeatureGPR(rf.RandomFourierFeatures(8, random_state=0), ard=True),
    ):
        with pytest.raises(rf.InvalidInputError) as in_memory:
            rf.RandomFeatureGPR(**est.get_params(deep=False)).fit(x, y)
        with pytest.raises(rf.InvalidInputError) as on_dask:
            rdask.fit(est, _dask(x, (40,)), _dask(y, (40,)))
        assert str(on_dask.value) == str(in_memory.value)
    with pytest.raises(rf.InvalidInputError, match="inducing inputs as an array"):
        rdask.fit(rf.SparseGPR(optimize=()), _dask(x, (40,)), _dask(y, (40,)))


def test_feature_chunked_fit_input_equals_row_chunked(client) -> None:
    x, y = _data()
    gp = rf.RandomFeatureGPR(rf.RandomFourierFeatures(16, random_state=0), noise_variance=0.1)
    a = rdask.fit(gp, da.from_array(x, chunks=(CHUNKS, (1, 2))), _dask(y))
    b = rdask.fit(gp, _dask(x), _dask(y))
    np.testing.assert_array_equal(a.coef_, b.coef_)


# --- fault tolerance ------------------------------------------------------------------------


def _slow(block: np.ndarray) -> np.ndarray:
    time.sleep(0.15)
    return block


def test_a_worker_killed_mid_fit_does_not_change_the_result(client) -> None:
    x, y = _data(800, seed=5)
    chunks = (50,) * 16
    gp = rf.RandomFeatureGPR(rf.RandomFourierFeatures(32, random_state=0), noise_variance=0.1)
    ref = rf.RandomFeatureGPR(rf.RandomFourierFeatures(32, random_state=0), noise_variance=0.1)
    ref.fit(x, y)
    X = _dask(x, chunks).map_blocks(_slow, dtype=x.dtype)
    result: dict = {}

    def run() -> None:
        result["model"] = rdask.fit(gp, X, _dask(y, chunks))

    worker = threading.Thread(target=run)
    worker.start()
    # Wait until both workers hold finished blocks, then kill one's process.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        held = client.has_what()
        if len(held) == 2 and all(len(keys) >= 2 for keys in held.values()):
            break
        time.sleep(0.02)
    else:
        pytest.fail("the workers never held finished blocks")
    pids = client.run(os.getpid)
    victim = sorted(pids)[0]
    assert worker.is_alive(), "the fit ended before a worker could be killed"
    os.kill(pids[victim], 9)
    worker.join(120)
    assert not worker.is_alive()
    # The nanny started a new process in place of the killed one.
    client.wait_for_workers(2, timeout=60)
    assert pids[victim] not in client.run(os.getpid).values()
    got = result["model"]
    assert got.stats_.n_samples == 800
    assert _rel(got.stats_.gram, ref.stats_.gram) < RTOL
    assert _rel(got.coef_, ref.coef_) < RTOL
