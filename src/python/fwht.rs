//! Bindings of [`crate::fwht`]: `fwht`, `fwht_into`, `fwht_inplace` on 2-D
//! float32/float64 arrays (the Python wrapper reshapes 1-D input).

use numpy::{PyArray2, PyArrayMethods, PyReadonlyArray2, PyReadwriteArray2};
use pyo3::prelude::*;
use pyo3::types::PyAny;

use super::ffi;
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
    x: &Bound<'py, PyAny>,
    normalized: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let x: PyReadonlyArray2<'py, T> = x.extract()?;
    let src = x.as_array();
    let (rows, cols) = src.dim();
    let out = ffi::output_array::<T>(py, rows, cols);
    {
        let mut rw = out.readwrite();
        let dst = rw.as_array_mut();
        run(py, src.len(), move |par| {
            fwht_rows_into(src, dst, normalized, par)
        })?;
    }
    Ok(out.into_any())
}

fn into_typed<'py, T: Real + numpy::Element>(
    py: Python<'py>,
    x: &Bound<'py, PyAny>,
    out: &Bound<'py, PyAny>,
    normalized: bool,
) -> PyResult<()> {
    let x: PyReadonlyArray2<'py, T> = x.extract()?;
    let mut out: PyReadwriteArray2<'py, T> = out.extract()?;
    let src = x.as_array();
    let dst = out.as_array_mut();
    run(py, src.len(), |par| {
        fwht_rows_into(src, dst, normalized, par)
    })
}

fn inplace_typed<'py, T: Real + numpy::Element>(
    py: Python<'py>,
    x: &Bound<'py, PyAny>,
    normalized: bool,
) -> PyResult<()> {
    let mut x: PyReadwriteArray2<'py, T> = x.extract()?;
    let view = x.as_array_mut();
    run(py, view.len(), |par| fwht_rows(view, normalized, par))
}

fn is_f32(x: &Bound<'_, PyAny>) -> bool {
    x.downcast::<PyArray2<f32>>().is_ok()
}

/// Row-wise FWHT of a 2-D float array into a new array.
#[pyfunction]
#[pyo3(signature = (x, normalized=false))]
fn fwht<'py>(
    py: Python<'py>,
    x: &Bound<'py, PyAny>,
    normalized: bool,
) -> PyResult<Bound<'py, PyAny>> {
    if is_f32(x) {
        new_typed::<f32>(py, x, normalized)
    } else {
        new_typed::<f64>(py, x, normalized)
    }
}

/// Row-wise FWHT of `x` written into `out` (same shape and dtype, writeable,
/// not overlapping `x`).
#[pyfunction]
#[pyo3(signature = (x, out, normalized=false))]
fn fwht_into<'py>(
    py: Python<'py>,
    x: &Bound<'py, PyAny>,
    out: &Bound<'py, PyAny>,
    normalized: bool,
) -> PyResult<()> {
    if is_f32(x) {
        into_typed::<f32>(py, x, out, normalized)
    } else {
        into_typed::<f64>(py, x, out, normalized)
    }
}

/// Row-wise FWHT of `x` in place (`x` writeable).
#[pyfunction]
#[pyo3(signature = (x, normalized=false))]
fn fwht_inplace<'py>(py: Python<'py>, x: &Bound<'py, PyAny>, normalized: bool) -> PyResult<()> {
    if is_f32(x) {
        inplace_typed::<f32>(py, x, normalized)
    } else {
        inplace_typed::<f64>(py, x, normalized)
    }
}

pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(fwht, m)?)?;
    m.add_function(wrap_pyfunction!(fwht_into, m)?)?;
    m.add_function(wrap_pyfunction!(fwht_inplace, m)?)?;
    Ok(())
}
