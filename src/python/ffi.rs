//! The FFI edge: one helper that every binding uses.

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};

use numpy::{PyArray2, PyArrayMethods};
use pyo3::prelude::*;
use pyo3::types::PyType;

use crate::error::Error;

/// Runs `f` with the GIL released, inside the library's thread pool, with
/// panics caught; maps the outcome to a Python result.
pub(crate) fn call<T, F>(py: Python<'_>, f: F) -> PyResult<T>
where
    T: Send,
    F: FnOnce() -> crate::Result<T> + Send,
{
    let outcome = py.detach(|| {
        catch_unwind(AssertUnwindSafe(|| crate::threads::install(f)))
            .unwrap_or_else(|p| Err(Error::Internal(panic_message(p))))
            .and_then(|r| r)
    });
    map_result(py, outcome)
}

/// Like [`call`] but runs `f` on the calling thread, without entering the
/// library's pool (no hand-off to a worker and back): for jobs too small to
/// split, which the caller runs with [`crate::Parallelism::Sequential`].
pub(crate) fn call_inline<T, F>(py: Python<'_>, f: F) -> PyResult<T>
where
    T: Send,
    F: FnOnce() -> crate::Result<T> + Send,
{
    let outcome = py.detach(|| {
        catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|p| Err(Error::Internal(panic_message(p))))
    });
    map_result(py, outcome)
}

/// Allocates an uninitialized C-order `rows x cols` NumPy array for Rust to
/// fill. NumPy's allocator asks the kernel for huge pages on large arrays,
/// which makes the first write to a fresh 100 MB output several times
/// cheaper than a plain Rust allocation. Callers must write every element
/// before the array is returned to Python.
pub(crate) fn output_array<'py, T: numpy::Element>(
    py: Python<'py>,
    rows: usize,
    cols: usize,
) -> Bound<'py, PyArray2<T>> {
    // SAFETY: the array is fully written by the caller before Python sees it
    // (documented contract above); T is a plain float type.
    unsafe { PyArray2::<T>::new(py, [rows, cols], false) }
}

/// Runs `f` through [`call`] on a mutable view of a fresh output array (see
/// [`output_array`]) and returns the array.
pub(crate) fn call_with_output<'py, T, F>(
    py: Python<'py>,
    rows: usize,
    cols: usize,
    f: F,
) -> PyResult<Bound<'py, PyArray2<T>>>
where
    T: numpy::Element + Send,
    F: FnOnce(ndarray::ArrayViewMut2<'_, T>) -> crate::Result<()> + Send,
{
    let out = output_array::<T>(py, rows, cols);
    {
        let mut rw = out.readwrite();
        let view = rw.as_array_mut();
        call(py, move || f(view))?;
    }
    Ok(out)
}

/// Maps a core result to a Python result (see [`to_pyerr`]).
pub(crate) fn map_result<T>(py: Python<'_>, r: crate::Result<T>) -> PyResult<T> {
    r.map_err(|e| to_pyerr(py, e))
}

fn panic_message(p: Box<dyn Any + Send>) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic payload".to_string()
    }
}

/// The exception class (in `randfeat_rs.exceptions`) for each error but
/// [`Error::Interrupted`], which is Python's own `KeyboardInterrupt`.
fn class_name(e: &Error) -> &'static str {
    match e {
        Error::NotPowerOfTwo { .. }
        | Error::ShapeMismatch { .. }
        | Error::InvalidParameter { .. }
        | Error::NonFinite { .. } => "InvalidInputError",
        Error::NotPositiveDefinite { .. } => "NotPositiveDefiniteError",
        Error::ThreadPool(_) | Error::Interrupted => "RandfeatError",
        Error::Gpu(_) => "GpuError",
        Error::Internal(_) => "RustPanicError",
    }
}

/// Converts a core error into an instance of its Python exception class.
pub(crate) fn to_pyerr(py: Python<'_>, e: Error) -> PyErr {
    if e == Error::Interrupted {
        return pyo3::exceptions::PyKeyboardInterrupt::new_err(());
    }
    let msg = e.to_string();
    let class = py
        .import("randfeat_rs.exceptions")
        .and_then(|m| m.getattr(class_name(&e)))
        .and_then(|c| c.downcast_into::<PyType>().map_err(PyErr::from));
    match class {
        Ok(cls) => PyErr::from_type(cls, msg),
        // The package is always importable when the extension is; this is a
        // last resort that still gives the user the message.
        Err(_) => pyo3::exceptions::PyRuntimeError::new_err(msg),
    }
}
