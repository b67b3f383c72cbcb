"""Dirichlet-based GP classifiers: RandomFeatureGPC and ExactGPC.

The closed-form oracles (the label transform, the exact latents of
docs/math/classification.rst, the Monte Carlo error of the expected softmax) are tested
in Rust (src/gp/dirichlet/tests.rs); here: the scikit-learn contract, label
handling, the Nystroem-equals-exact property through the Python API,
pickling and bad input.
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from sklearn.utils.estimator_checks import parametrize_with_checks

from randfeat_rs import (
    ExactGPC,
    InvalidInputError,
    NystroemFeatures,
    RandomFeatureGPC,
    RandomFeatureGPR,
    RandomFourierFeatures,
)


def two_blobs(n=60, seed=0):
    rng = np.random.default_rng(seed)
    X = np.vstack([rng.normal(-3, 0.5, (n, 2)), rng.normal(3, 0.5, (n, 2))])
    return X, np.repeat([0, 1], n)


def three_classes(n=30, seed=1):
    rng = np.random.default_rng(seed)
    centers = np.array([[0.0, 3.0], [-3.0, -2.0], [3.0, -2.0]])
    X = np.vstack([rng.normal(c, 0.7, (n, 2)) for c in centers])
    return X, np.repeat([0, 1, 2], n)


def classifiers():
    return [
        RandomFeatureGPC(RandomFourierFeatures(300, length_scale=1.5, random_state=0)),
        ExactGPC(length_scale=1.5),
    ]


@pytest.mark.parametrize("clf", classifiers(), ids=["features", "exact"])
def test_well_separated_classes_are_learned_with_confident_probabilities(clf):
    X, y = two_blobs()
    Xt, yt = two_blobs(seed=7)
    clf.fit(X, y)
    assert clf.score(Xt, yt) == 1.0
    proba = clf.predict_proba(Xt)
    assert proba.shape == (Xt.shape[0], 2)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=0, atol=1e-14)
    # Far inside a blob the true class is near certain; halfway between the
    # blobs (symmetric data) the classifier hesitates.
    assert proba[np.arange(yt.size), yt].min() > 0.9
    mid = clf.predict_proba([[0.0, 0.0]])[0]
    assert 0.2 < mid[0] < 0.8
    # Deterministic: the same input gives the same bits.
    np.testing.assert_array_equal(clf.predict_proba(Xt), proba)
    scores = clf.decision_function(Xt)
    mean, var = clf.predict_latent(Xt)
    np.testing.assert_array_equal(scores, np.log(proba[:, 1]) - np.log(proba[:, 0]))
    assert mean.shape == var.shape == proba.shape
    assert (var > 0).all()
    # The latent means rank the classes as the probabilities do here.
    np.testing.assert_array_equal(np.argmax(mean, axis=1), yt)


def test_nystroem_features_of_every_training_point_equal_the_exact_classifier():
    X, y = three_classes(n=12)
    length_scale = 1.2
    exact = ExactGPC(length_scale=length_scale, alpha_epsilon=0.05).fit(X, y)
    nys = NystroemFeatures(n_components=X.shape[0], length_scale=length_scale, random_state=0)
    feat = RandomFeatureGPC(nys, alpha_epsilon=0.05, chunk_size=7).fit(X, y)
    # The Nystroem kernel equals the exact one on its landmarks (all training
    # points), so the latents there agree up to rounding.
    me, ve = exact.predict_latent(X)
    mf, vf = feat.predict_latent(X)
    np.testing.assert_allclose(mf, me, rtol=0, atol=1e-8)
    np.testing.assert_allclose(vf, ve, rtol=0, atol=1e-8)
    np.testing.assert_allclose(
        feat.log_marginal_likelihood_, exact.log_marginal_likelihood_, rtol=1e-8
    )


@pytest.mark.parametrize("make", [RandomFeatureGPC, ExactGPC], ids=["features", "exact"])
def test_label_encoding_and_class_order_do_not_change_the_model(make):
    X, y = three_classes()
    Xt, _ = three_classes(seed=5)
    base = make().fit(X, y)
    p = base.predict_proba(Xt)
    # The same classes as strings, floats or other integers: same model.
    for labels in (np.array(["x", "y", "z"]), np.array([-1.0, 0.0, 7.0]), np.array([10, 20, 30])):
        clf = make().fit(X, labels[y])
        np.testing.assert_array_equal(clf.classes_, labels)
        np.testing.assert_array_equal(clf.predict_proba(Xt), p)
        np.testing.assert_array_equal(clf.predict(Xt), labels[base.predict(Xt)])
    # Names in another order: the columns follow classes_ (sorted names).
    perm = np.array([2, 0, 1])
    names = np.array(["a", "b", "c"])
    clf = make().fit(X, names[perm[y]])
    np.testing.assert_allclose(clf.predict_proba(Xt)[:, perm], p, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(clf.predict(Xt), names[perm[base.predict(Xt)]])


@pytest.mark.parametrize("make", [RandomFeatureGPC, ExactGPC], ids=["features", "exact"])
def test_pickle_keeps_the_fitted_model_by_value(make):
    X, y = three_classes()
    clf = make().fit(X, y)
    back = pickle.loads(pickle.dumps(clf))
    np.testing.assert_array_equal(back.predict_proba(X), clf.predict_proba(X))
    np.testing.assert_array_equal(back.decision_function(X), clf.decision_function(X))


def test_float32_inputs_are_accepted():
    X, y = two_blobs()
    p64 = RandomFeatureGPC().fit(X, y).predict_proba(X)
    p32 = RandomFeatureGPC().fit(X.astype(np.float32), y).predict_proba(X.astype(np.float32))
    assert p32.dtype == np.float64
    np.testing.assert_allclose(p32, p64, atol=1e-4)


@pytest.mark.parametrize("make", [RandomFeatureGPC, ExactGPC], ids=["features", "exact"])
def test_bad_input_is_refused(make):
    X, y = two_blobs(n=10)
    with pytest.raises(ValueError, match="at least 2 classes"):
        make().fit(X, np.zeros(X.shape[0]))
    with pytest.raises(ValueError, match="NaN"):
        make().fit(X, np.where(np.arange(y.size) == 3, np.nan, y))
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        make().fit(X, y[:-1])
    for bad in (0.0, -0.5):
        with pytest.raises(ValueError, match="alpha_epsilon"):
            make(alpha_epsilon=bad).fit(X, y)
    with pytest.raises(ValueError, match="features"):
        make().fit(X, y).predict(X[:, :1])


@pytest.mark.parametrize("make", [RandomFeatureGPC, ExactGPC], ids=["features", "exact"])
def test_device_is_the_cpu(make):
    X, y = two_blobs(n=10)
    assert make().fit(X, y).device_ == "cpu"
    assert make(device="auto").fit(X, y).device_ == "cpu"
    with pytest.raises(InvalidInputError, match='device="gpu"'):
        make(device="gpu").fit(X, y)
    with pytest.raises(ValueError, match="device"):
        make(device="tpu").fit(X, y)


def test_exact_handle_refuses_float32_and_foreign_state():
    X, y = two_blobs(n=10)
    model = ExactGPC().fit(X, y)._model
    with pytest.raises(InvalidInputError, match="x"):
        model.predict_latent(X.astype(np.float32))
    with pytest.raises(TypeError, match="float32 or float64"):
        model.predict_latent(X.astype(np.int64))
    other = RandomFeatureGPR(RandomFourierFeatures(8, random_state=0), noise_variance=0.1)
    state = other.fit(X, y.astype(np.float64))._gp.__reduce__()[1][0]
    with pytest.raises(InvalidInputError, match="not a DirichletGPC"):
        type(model)._from_state(state)


@parametrize_with_checks([RandomFeatureGPC(), ExactGPC()])
def test_sklearn_compatible(estimator, check):
    check(estimator)
