"""FWHT: oracles of docs/math/fwht.rst, the API contract, bad input."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import randfeat_rs as rf
from randfeat_rs import InvalidDtypeError, InvalidInputError

DTYPES = [np.float64, np.float32]
TOL = {np.float64: 1e-10, np.float32: 1e-3}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("k", range(11))
def test_matches_scipy_hadamard(dtype, k):
    n = 1 << k
    rng = np.random.default_rng(k)
    x = rng.standard_normal((5, n)).astype(dtype)
    h = scipy.linalg.hadamard(n).astype(np.float64)
    got = rf.fwht(x)
    assert got.dtype == dtype and got.shape == x.shape
    np.testing.assert_allclose(got, x.astype(np.float64) @ h.T, rtol=0, atol=TOL[dtype] * n)
    got1 = rf.fwht(x[0])
    assert got1.shape == (n,)
    np.testing.assert_allclose(got1, h @ x[0].astype(np.float64), atol=TOL[dtype] * n)


def test_worked_oracles():
    np.testing.assert_array_equal(rf.fwht(np.array([1.0, 2, 3, 4])), [10, -2, -4, 0])
    np.testing.assert_array_equal(
        rf.fwht(np.array([1, -1, 2, 0.5, 0, 3, -2, 1])),
        [4.5, -2.5, 1.5, 0.5, 0.5, 9.5, -6.5, 0.5],
    )


@pytest.mark.parametrize("dtype", DTYPES)
def test_twice_is_n_times_and_normalized_preserves_norm(dtype):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((7, 256)).astype(dtype)
    np.testing.assert_allclose(rf.fwht(rf.fwht(x)), 256 * x, rtol=TOL[dtype] * 10)
    y = rf.fwht(x, normalized=True)
    np.testing.assert_allclose(
        np.linalg.norm(y, axis=1), np.linalg.norm(x, axis=1), rtol=TOL[dtype]
    )
    np.testing.assert_allclose(rf.fwht(y, normalized=True), x, atol=TOL[dtype] * 10)


@pytest.mark.parametrize("dtype", DTYPES)
def test_inplace_and_out_agree_with_new(dtype):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((9, 64)).astype(dtype)
    want = rf.fwht(x, normalized=True)
    out = np.empty_like(x)
    assert rf.fwht(x, normalized=True, out=out) is out
    np.testing.assert_array_equal(out, want)
    y = x.copy()
    assert rf.fwht(y, normalized=True, out=y) is y
    np.testing.assert_array_equal(y, want)
    v = x[3].copy()
    rf.fwht(v, out=v)
    np.testing.assert_array_equal(v, rf.fwht(x[3]))


def test_input_not_modified_output_c_contiguous():
    x = np.arange(16, dtype=np.float64).reshape(2, 8)
    before = x.copy()
    y = rf.fwht(x)
    np.testing.assert_array_equal(x, before)
    assert y.flags.c_contiguous and y.flags.writeable


@pytest.mark.parametrize("dtype", DTYPES)
def test_non_contiguous_input(dtype):
    rng = np.random.default_rng(2)
    wide = rng.standard_normal((6, 64)).astype(dtype)
    strided = wide[:, ::2]
    fortran = np.asfortranarray(wide[:, :32])
    reversed_rows = wide[::-1, :32]
    for x in (strided, fortran, reversed_rows):
        np.testing.assert_array_equal(rf.fwht(x), rf.fwht(np.ascontiguousarray(x)))
    # In place on a strided view touches only that view.
    w = wide.copy()
    rf.fwht(w[:, ::2], out=w[:, ::2])
    np.testing.assert_array_equal(w[:, ::2], rf.fwht(strided))
    np.testing.assert_array_equal(w[:, 1::2], wide[:, 1::2])
    # The same strided / Fortran-order object as `x` and `out`.
    for view in (wide.copy()[:, ::2], np.asfortranarray(wide[:, :32])):
        want = rf.fwht(np.ascontiguousarray(view))
        assert rf.fwht(view, out=view) is view
        np.testing.assert_array_equal(view, want)


def test_empty_batch():
    for dtype in DTYPES:
        out = rf.fwht(np.zeros((0, 16), dtype=dtype))
        assert out.shape == (0, 16) and out.dtype == dtype


def test_long_vector_uses_blocked_path():
    n = 1 << 18
    x = np.random.default_rng(3).standard_normal(n)
    y = rf.fwht(x)
    np.testing.assert_allclose(rf.fwht(y), n * x, rtol=1e-9, atol=1e-7)


@pytest.mark.parametrize("n", [0, 3, 6, 12, 1000])
def test_not_power_of_two(n):
    nxt = 1 if n == 0 else 1 << (n - 1).bit_length()
    with pytest.raises(InvalidInputError, match=rf"length {n} .*next power of two is {nxt}"):
        rf.fwht(np.zeros((2, n)))
    with pytest.raises(ValueError):
        rf.fwht(np.zeros(n))


@pytest.mark.parametrize(
    "bad",
    [
        np.zeros(8, dtype=np.int64),
        np.zeros(8, dtype=np.complex128),
        ["a"] * 8,
        np.zeros(8, dtype=np.float16),
    ],
)
def test_bad_dtype(bad):
    with pytest.raises(InvalidDtypeError, match="float32 or float64"):
        rf.fwht(bad)
    with pytest.raises(TypeError):
        rf.fwht(bad)


@pytest.mark.parametrize("shape", [(), (2, 2, 4)])
def test_bad_ndim(shape):
    with pytest.raises(InvalidInputError, match="1-D or 2-D"):
        rf.fwht(np.zeros(shape))


def test_bad_out():
    x = np.zeros((2, 8))
    with pytest.raises(InvalidDtypeError):
        rf.fwht(x, out=np.zeros((2, 8), dtype=np.float32))
    with pytest.raises(InvalidDtypeError):
        rf.fwht(x, out=[0.0] * 16)
    with pytest.raises(InvalidInputError, match="shape"):
        rf.fwht(x, out=np.zeros((2, 4)))
    ro = np.zeros((2, 8))
    ro.flags.writeable = False
    with pytest.raises(InvalidInputError, match="read-only"):
        rf.fwht(x, out=ro)
    with pytest.raises(InvalidInputError, match="read-only"):
        rf.fwht(ro, out=ro)
    big = np.zeros((3, 8))
    with pytest.raises(InvalidInputError, match="overlaps"):
        rf.fwht(big[:2], out=big[1:])


@pytest.mark.parametrize(
    ("src", "dst"),
    [
        (np.s_[:, :4], np.s_[:, 4:]),  # column halves: interleaved address ranges
        (np.s_[:, 4:], np.s_[:, :4]),
        (np.s_[:2], np.s_[2:]),  # row halves
        (np.s_[:, ::2], np.s_[:, 1::2]),  # even and odd columns
    ],
)
def test_out_disjoint_from_x_in_one_buffer(src, dst):
    buf = np.random.default_rng(5).standard_normal((4, 8))
    x = buf[src].copy()
    other = buf[src].copy()  # what the source holds before and after
    res = rf.fwht(buf[src], out=buf[dst])
    assert res.base is buf or res.base is buf.base
    np.testing.assert_allclose(buf[dst], x @ scipy.linalg.hadamard(x.shape[1]), atol=1e-12)
    np.testing.assert_array_equal(buf[src], other)


def test_out_disjoint_1d_halves():
    a = np.arange(8.0)
    rf.fwht(a[:4], out=a[4:])
    np.testing.assert_array_equal(a, [0, 1, 2, 3, 6, -2, -4, 0])


@settings(max_examples=60, deadline=None)
@given(
    arr=hnp.arrays(
        dtype=st.sampled_from([np.float32, np.float64]),
        shape=st.tuples(st.integers(0, 5), st.integers(0, 7).map(lambda k: 1 << k)),
        elements=st.floats(-1e3, 1e3, width=32),
    ),
    normalized=st.booleans(),
)
def test_property_matches_dense(arr, normalized):
    n = arr.shape[1]
    h = scipy.linalg.hadamard(n).astype(np.float64)
    if normalized:
        h /= np.sqrt(n)
    want = arr.astype(np.float64) @ h.T
    got = rf.fwht(arr, normalized=normalized)
    assert got.dtype == arr.dtype
    tol = 1e-9 if arr.dtype == np.float64 else 1e-4
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * (1 + np.abs(arr).max(initial=0)) * n)
