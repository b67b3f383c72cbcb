//! Bindings of [`crate::fwht`]: `fwht`, `fwht_into`, `fwht_inplace` on 2-D
//! float32/float64 arrays (the Python wrapper reshapes 1-D input).

use ndarray::{ArrayView2, ArrayViewMut2};
use numpy::{PyArray2, PyArrayMethods};
use pyo3::prelude::*;
use pyo3::types::PyAny;

use super::ffi::{self, with_float_view, FloatArray2, FloatArrayMut2};
use crate::error::Error;
use crate::fwht::{fwht_rows, fwht_rows_into, SPLIT_MIN_ELEMS};
use crate::real::Real;
use crate::threads::Parallelism;

/// Runs `f` through the library's pool, or on the calling thread for a
/// batch of `elems` elements too small to split (waking the pool would cost
/// more than the transform; the result is the same).
fn run<F>(py: Python<'_>, elems: usize, f: F) -> PyResult<()>
where
    F: FnOnce(Parallelism) -> crate::Result<()> + Send,
{
    if elems < SPLIT_MIN_ELEMS {
        ffi::call_inline(py, || f(Parallelism::Sequential))
    } else {
        ffi::call(py, || f(Parallelism::Rayon))
    }
}

fn new_typed<'py, T: Real + numpy::Element>(
    py: Python<'py>,
    src: ArrayView2<'_, T>,
    normalized: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let (rows, cols) = src.dim();
    let out = ffi::output_array::<T>(py, "X", rows, cols)?;
    {
        let mut rw = out.readwrite();
        let dst = rw.as_array_mut();
        run(py, src.len(), move |par| {
            fwht_rows_into(src, dst, normalized, par)
        })?;
    }
    Ok(out.into_any())
}

/// `out` must have `src`'s dtype (a `TypeError` otherwise) and must not be
/// read-only or share `src`'s buffer as NumPy's borrow tracking sees it (an
/// `InvalidInputError` otherwise; the Python wrapper copies `x` first when
/// the two share a buffer without overlapping).
fn into_typed<'py, T: Real + numpy::Element>(
    py: Python<'py>,
    src: ArrayView2<'_, T>,
    out: &Bound<'py, PyAny>,
    normalized: bool,
) -> PyResult<()> {
    let out: Bound<'py, PyArray2<T>> = out.extract()?;
    let mut out = out.try_readwrite().map_err(|e| {
        ffi::to_pyerr(
            py,
            Error::invalid(
                "out",
                format!("cannot be written while `x` is read ({e}); pass a copy of `x`"),
            ),
        )
    })?;
    let dst = out.as_array_mut();
    run(py, src.len(), |par| {
        fwht_rows_into(src, dst, normalized, par)
    })
}

fn inplace_typed<T: Real + numpy::Element>(
    py: Python<'_>,
    view: ArrayViewMut2<'_, T>,
    normalized: bool,
) -> PyResult<()> {
    run(py, view.len(), |par| fwht_rows(view, normalized, par))
}

/// Row-wise FWHT of a 2-D float array into a new array.
#[pyfunction]
#[pyo3(signature = (x, normalized=false))]
fn fwht<'py>(
    py: Python<'py>,
    x: FloatArray2<'py>,
    normalized: bool,
) -> PyResult<Bound<'py, PyAny>> {
    with_float_view!(x, |v| new_typed(py, v, normalized))
}

/// Row-wise FWHT of `x` written into `out` (same shape and dtype, writeable,
/// not overlapping `x`).
#[pyfunction]
#[pyo3(signature = (x, out, normalized=false))]
fn fwht_into<'py>(
    py: Python<'py>,
    x: FloatArray2<'py>,
    out: &Bound<'py, PyAny>,
    normalized: bool,
) -> PyResult<()> {
    with_float_view!(x, |v| into_typed(py, v, out, normalized))
}

/// Row-wise FWHT of `x` in place (`x` writeable).
#[pyfunction]
#[pyo3(signature = (x, normalized=false))]
fn fwht_inplace(py: Python<'_>, x: FloatArrayMut2<'_>, normalized: bool) -> PyResult<()> {
    with_float_view!(mut x, |v| inplace_typed(py, v, normalized))
}

pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(fwht, m)?)?;
    m.add_function(wrap_pyfunction!(fwht_into, m)?)?;
    m.add_function(wrap_pyfunction!(fwht_inplace, m)?)?;
    Ok(())
}
