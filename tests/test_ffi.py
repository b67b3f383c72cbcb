"""The FFI edge: panics become exceptions, thread control, fork safety."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import randfeat_rs as rf
from randfeat_rs import _core


def test_panic_surfaces_as_exception_not_abort():
    with pytest.raises(rf.RustPanicError, match="deliberate panic"):
        _core._debug_panic()
    # The process and the pool are still usable afterwards.
    np.testing.assert_array_equal(rf.fwht(np.array([1.0, 1.0])), [2.0, 0.0])


def test_exception_tree():
    assert issubclass(rf.InvalidInputError, ValueError)
    assert issubclass(rf.InvalidDtypeError, TypeError)
    for cls in (
        rf.InvalidInputError,
        rf.InvalidDtypeError,
        rf.RustPanicError,
        rf.NotPositiveDefiniteError,
        rf.GpuError,
    ):
        assert issubclass(cls, rf.RandfeatError)


def test_set_num_threads_roundtrip_and_results_identical(set_num_threads):
    x = np.random.default_rng(0).standard_normal((64, 1 << 12))
    set_num_threads(1)
    assert rf.get_num_threads() == 1
    one = rf.fwht(x)
    set_num_threads(2)
    assert rf.get_num_threads() == 2
    two = rf.fwht(x)
    np.testing.assert_array_equal(one, two)
    long = np.random.default_rng(1).standard_normal(1 << 17)
    set_num_threads(1)
    a = rf.fwht(long)
    set_num_threads(2)
    np.testing.assert_array_equal(a, rf.fwht(long))


@pytest.mark.parametrize("bad", [0, -1, 2.5, "2", True, 1025, 65536, 2**63, 2**64])
def test_set_num_threads_rejects(bad):
    with pytest.raises(rf.InvalidInputError):
        rf.set_num_threads(bad)


def test_set_num_threads_accepts_up_to_1024():
    n = rf.get_num_threads()
    try:
        rf.set_num_threads(1024)
        assert rf.get_num_threads() == 1024
    finally:
        rf.set_num_threads(n)


def test_env_var_sets_threads():
    code = "import randfeat_rs as rf; print(rf.get_num_threads())"
    env = dict(os.environ, RANDFEAT_NUM_THREADS="3")
    out = subprocess.run(
        [sys.executable, "-W", "error", "-c", code],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "3"


@pytest.mark.parametrize("value", ["0", "abc", "1.5", "1025", "70000"])
def test_an_unusable_env_var_warns_at_import(value):
    """It was ignored in silence (the pool took all cores)."""
    code = (
        "import warnings; warnings.simplefilter('error')\n"
        "try:\n    import randfeat_rs\nexcept RuntimeWarning as w:\n    print(w)"
    )
    env = dict(os.environ, RANDFEAT_NUM_THREADS=value)
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == (
        f"RANDFEAT_NUM_THREADS={value!r} is not a number of threads "
        "(an integer from 1 to 1024); using all cores"
    ).replace("'", '"')


def _child(q):
    x = np.arange(1 << 17, dtype=np.float64)
    y = rf.fwht(np.tile(np.arange(8.0), (1000, 1)))
    q.put((float(rf.fwht(x)[0]), float(y[0, 0])))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX-only")
@pytest.mark.filterwarnings("ignore:.*fork.*:DeprecationWarning")
def test_forked_child_does_not_deadlock(run_forked):
    # Warm the pool in the parent so the child inherits a pool with threads.
    rf.fwht(np.random.default_rng(0).standard_normal((256, 1024)))
    exitcode, (first, batch_first) = run_forked(_child)
    assert exitcode == 0
    n = 1 << 17
    assert first == n * (n - 1) / 2
    assert batch_first == 28.0


def _fitted_map():
    X = np.random.default_rng(0).standard_normal((20, 3))
    return X, rf.RandomFourierFeatures(16, random_state=0).fit(X)._feature_map()


@pytest.mark.parametrize(
    "make, got",
    [
        (lambda X: X.astype(np.int64), "a 2-D int64 array"),
        (lambda X: X.astype(np.float16), "a 2-D float16 array"),
        (lambda X: X[0], "a 1-D float64 array"),
        (lambda X: X.tolist(), "list"),
    ],
)
def test_the_float_extractor_names_what_it_got(make, got):
    # The one float32/float64 argument type of the bindings: anything else is
    # a TypeError naming the argument, the accepted types and what came.
    X, fmap = _fitted_map()
    want = f"argument 'x': expected a 2-D float32 or float64 array, got {got}"
    with pytest.raises(TypeError, match=want):
        fmap.transform(make(X), "cpu")


def test_pickled_state_is_checked_before_it_is_read():
    X, fmap = _fitted_map()
    load, (state,) = fmap.__reduce__()
    assert state.startswith(b"RFRS\x01\x00")
    np.testing.assert_array_equal(load(state).transform(X, "cpu"), fmap.transform(X, "cpu"))
    for bad, message in [
        (state[:4] + b"\x02\x00" + state[6:], "pickled with state version 2; .* reads version 1"),
        (b"junk", "not a pickled randfeat_rs object"),
        (state[:5], "truncated"),
        (state[:-5], "cannot be read as a FeatureMap"),
        (state + b"\x00", "goes on for 1 byte after the FeatureMap it holds"),
    ]:
        with pytest.raises(rf.InvalidInputError, match=message):
            _core.FeatureMap._from_state(bad)
    with pytest.raises(rf.InvalidInputError, match="holds a FeatureMap, not a BinningMap"):
        _core.BinningMap._from_state(state)


# Fits whose random parameters are gigabytes: under a 4 GiB address-space
# limit each must raise the library's error naming the parameter, not abort
# ("memory allocation failed", exit code 134) or panic.
_MEMORY_LIMIT_CHILD = """
import resource
resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))
import numpy as np
import randfeat_rs as rf
X = np.random.default_rng(0).standard_normal((6, 5))
fits = [
    lambda: rf.RandomFourierFeatures(2**28, variant="cos_bias").fit(X),
    lambda: rf.PolynomialSketch(2**28, sketch="rademacher").fit(X),
    lambda: rf.PolynomialSketch(2**30).fit(X),
    lambda: rf.RandomBinningFeatures(2**28).fit(X),
    lambda: rf.RandomFourierFeatures(2**24).fit(X).transform(np.zeros((64, 5))),
    lambda: rf.kernel_matrix(np.zeros((2**17, 1))),
]
for fit in fits:
    try:
        fit()
        print("no error")
    except rf.InvalidInputError as e:
        print("InvalidInputError", str(e).split(":")[0])
"""


@pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_AS is enforced on Linux")
def test_fits_beyond_an_address_space_limit_raise():
    env = dict(os.environ, RANDFEAT_NUM_THREADS="2", OPENBLAS_NUM_THREADS="1")
    out = subprocess.run(
        [sys.executable, "-c", _MEMORY_LIMIT_CHILD],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.splitlines()
    names = ["n_components"] * 3 + ["n_grids", "n_components", "X"]
    assert lines == [f"InvalidInputError invalid value for `{n}`" for n in names], out.stdout
