//! The FFI edge: the helpers every binding uses. [`call`] runs short work
//! with the GIL released; [`call_monitored`] runs long work while the
//! calling thread watches for Ctrl-C and reports progress to Python;
//! [`call_rows`] does the same for work split over row ranges.

use std::any::Any;
use std::ops::Range;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

use numpy::{PyArray2, PyArrayMethods};
use pyo3::prelude::*;
use pyo3::types::PyType;

use crate::error::Error;
use crate::progress::Monitor;

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

/// How long the calling thread of [`call_monitored`] waits for the work
/// between two checks for Ctrl-C and progress reports.
const POLL_INTERVAL: Duration = Duration::from_millis(100);

/// Runs `f` with the GIL released, in the library's pool, with panics
/// caught, while the calling thread watches it: `f` runs on a pool worker
/// with a fresh [`Monitor`]; the calling thread waits for it in slices of
/// [`POLL_INTERVAL`], and after each it takes the GIL to run Python's signal
/// handlers (`check_signals`, where Ctrl-C raises `KeyboardInterrupt`) and,
/// when `progress` is given, to call `progress(stage, done, total,
/// messages)` with the monitor's snapshot and the messages queued since the
/// last call. When a handler or the callback raises, the monitor is
/// cancelled, the work stops at its next [`Monitor::check`], and that
/// exception is returned. `progress` gets a last call once the work is done.
pub(crate) fn call_monitored<T, F>(
    py: Python<'_>,
    progress: Option<&Bound<'_, PyAny>>,
    f: F,
) -> PyResult<T>
where
    T: Send,
    F: FnOnce(&Monitor) -> crate::Result<T> + Send,
{
    let monitor = Monitor::new();
    let callback = progress.map(|p| p.clone().unbind());
    let (outcome, raised) = py.detach(|| watch(&monitor, callback.as_ref(), f));
    if let Some(e) = raised {
        return Err(e);
    }
    if let Some(cb) = &callback {
        report(&monitor, cb.bind(py))?;
    }
    map_result(py, outcome)
}

/// The body of [`call_monitored`] without the GIL: spawns `f` into the
/// library's pool and waits for its result, polling Python between slices.
/// Returns the work's result and the exception raised while polling, if any.
fn watch<T, F>(
    monitor: &Monitor,
    callback: Option<&Py<PyAny>>,
    f: F,
) -> (crate::Result<T>, Option<PyErr>)
where
    T: Send,
    F: FnOnce(&Monitor) -> crate::Result<T> + Send,
{
    let (tx, rx) = mpsc::channel();
    let scoped = crate::threads::in_place_scope(|s| {
        s.spawn(move |_| {
            let r = catch_unwind(AssertUnwindSafe(|| f(monitor)))
                .unwrap_or_else(|p| Err(Error::Internal(panic_message(p))));
            // The receiver lives until the scope ends, after this job.
            let _ = tx.send(r);
        });
        let mut raised = None;
        loop {
            match rx.recv_timeout(POLL_INTERVAL) {
                Ok(r) => return (r, raised),
                Err(RecvTimeoutError::Timeout) => {
                    if raised.is_none() {
                        if let Err(e) = Python::attach(|py| poll(py, monitor, callback)) {
                            monitor.cancel();
                            raised = Some(e);
                        }
                    }
                }
                Err(RecvTimeoutError::Disconnected) => {
                    let lost = Error::Internal("the worker ended without a result".into());
                    return (Err(lost), raised);
                }
            }
        }
    });
    scoped.unwrap_or_else(|e| (Err(e), None))
}

/// One poll of [`call_monitored`]: Python's signal handlers, then the
/// progress callback.
fn poll(py: Python<'_>, monitor: &Monitor, callback: Option<&Py<PyAny>>) -> PyResult<()> {
    py.check_signals()?;
    if let Some(cb) = callback {
        report(monitor, cb.bind(py))?;
    }
    Ok(())
}

/// Calls `callback(stage, done, total, messages)` with the monitor's state.
fn report(monitor: &Monitor, callback: &Bound<'_, PyAny>) -> PyResult<()> {
    let (stage, done, total) = monitor.snapshot();
    callback.call1((stage, done, total, monitor.take_messages()))?;
    Ok(())
}

/// Work of at most this many floating-point operations (roughly 0.05 to
/// 0.5 s) runs in one piece in [`call_rows`].
const ONE_PIECE_FLOPS: f64 = (1u64 << 30) as f64;

/// Floating-point operations of the first piece of [`call_rows`] when the
/// work is split.
const FIRST_PIECE_FLOPS: f64 = (1u64 << 28) as f64;

/// The least rows of a piece of [`call_rows`] (when its work allows), per
/// pool thread: enough that the maps' own parallel row chunks keep every
/// thread busy.
const PIECE_ROWS_PER_THREAD: usize = 2048;

/// The duration [`call_rows`] sizes its pieces after the first for.
const PIECE_SECONDS: f64 = 0.1;

/// Runs `f` on consecutive row ranges that cover `0..rows` through
/// [`call_monitored`], which sees a Ctrl-C between two ranges. `row_flops`
/// is a rough count of the floating-point operations per row: work of up
/// to [`ONE_PIECE_FLOPS`] is one range; larger work starts with a range of
/// about [`FIRST_PIECE_FLOPS`] and sizes the next ones from the measured
/// time, to [`PIECE_SECONDS`] each. For row-wise maps, whose rows do not
/// depend on each other, the result does not depend on the ranges.
/// `progress` gets the stage "rows".
pub(crate) fn call_rows<F>(
    py: Python<'_>,
    rows: usize,
    row_flops: f64,
    progress: Option<&Bound<'_, PyAny>>,
    mut f: F,
) -> PyResult<()>
where
    F: FnMut(Range<usize>) -> crate::Result<()> + Send,
{
    call_monitored(py, progress, |monitor| {
        monitor.stage("rows", rows as u64);
        let row_flops = row_flops.max(1.0);
        let mut len = if rows as f64 * row_flops <= ONE_PIECE_FLOPS {
            rows
        } else {
            (FIRST_PIECE_FLOPS / row_flops) as usize
        };
        let least = (PIECE_ROWS_PER_THREAD * rayon::current_num_threads()).min(len.max(1));
        // At least one call, so that an empty input is checked as before.
        let mut start = 0;
        loop {
            monitor.check()?;
            let end = start + len.max(least).min(rows - start);
            let t0 = Instant::now();
            f(start..end)?;
            monitor.advance((end - start) as u64);
            let scale = PIECE_SECONDS / t0.elapsed().as_secs_f64().max(1e-6);
            len = ((end - start) as f64 * scale.min(8.0)) as usize;
            start = end;
            if start >= rows {
                return Ok(());
            }
        }
    })
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

/// Runs `f` through [`call_rows`] on the matching row ranges of a fresh
/// `rows x cols` output array (see [`output_array`]) and returns the array.
pub(crate) fn call_rows_with_output<'py, T, F>(
    py: Python<'py>,
    rows: usize,
    cols: usize,
    row_flops: f64,
    progress: Option<&Bound<'_, PyAny>>,
    f: F,
) -> PyResult<Bound<'py, PyArray2<T>>>
where
    T: numpy::Element + Send,
    F: Fn(Range<usize>, ndarray::ArrayViewMut2<'_, T>) -> crate::Result<()> + Send,
{
    let out = output_array::<T>(py, rows, cols);
    {
        let mut rw = out.readwrite();
        let mut view = rw.as_array_mut();
        call_rows(py, rows, row_flops, progress, move |r| {
            f(r.clone(), view.slice_mut(ndarray::s![r, ..]))
        })?;
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
        Error::NotPositiveDefinite { .. } | Error::InducingNotPositiveDefinite { .. } => {
            "NotPositiveDefiniteError"
        }
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
