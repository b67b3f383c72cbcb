//! The FFI edge: the helpers every binding uses.
//!
//! - Running work: [`call`] runs short work with the GIL released;
//!   [`call_monitored`] runs long work while the calling thread watches for
//!   Ctrl-C and reports progress to Python; [`call_rows`] does the same for
//!   work split over row ranges.
//! - Input arrays: [`FloatArray2`] is the one argument type of every
//!   binding that takes float32 or float64 rows, and [`with_float_view!`]
//!   the one dispatch from it to generic code (compiled for both types).
//! - Pickling: a fitted handle (`#[pyclass]` over a core struct with serde)
//!   pickles by value with two methods, both one line:
//!
//!   ```ignore
//!   fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<ffi::Reduced<'py>> {
//!       ffi::reduce(slf, &slf.get().inner) // `slf.borrow()` for a mutable class
//!   }
//!   #[classmethod]
//!   fn _from_state(cls: &Bound<'_, PyType>, state: &[u8]) -> PyResult<Self> {
//!       Ok(Self { inner: ffi::from_state::<Self, _>(cls.py(), state)? })
//!   }
//!   ```
//!
//!   The payload ([`to_state`]) is the class name and [`STATE_VERSION`] in a
//!   header, then the struct in CBOR (exact for every `f64`); loading checks
//!   the header and runs the struct's own checks, and never refits.
//! - Errors: [`to_pyerr`] maps the core's [`Error`] to the exception tree of
//!   `randfeat_rs.exceptions` (Ctrl-C to `KeyboardInterrupt`).

use std::any::Any;
use std::ops::Range;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use numpy::npyffi::{npy_intp, NpyTypes, PY_ARRAY_API};
use numpy::{
    PyArray2, PyArrayDescrMethods, PyArrayMethods, PyReadonlyArray2, PyReadwriteArray2,
    PyUntypedArrayMethods,
};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyType};
use pyo3::{PyClass, PyTypeInfo};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::error::Error;
use crate::gpu::Device;
use crate::progress::Monitor;
use crate::row_pieces::{Plan, RowWork};
use crate::Parallelism;

/// A 2-D float32 or float64 NumPy array (any strides), read in place: the
/// argument type of every binding that takes rows in either precision.
/// Other dtypes and dimensions are a `TypeError` (the Python layer converts
/// them before it calls the core).
pub(crate) enum FloatArray2<'py> {
    /// A float32 array.
    F32(PyReadonlyArray2<'py, f32>),
    /// A float64 array.
    F64(PyReadonlyArray2<'py, f64>),
}

impl<'py> FromPyObject<'py> for FloatArray2<'py> {
    fn extract_bound(ob: &Bound<'py, PyAny>) -> PyResult<Self> {
        if let Ok(a) = ob.downcast::<PyArray2<f64>>() {
            return Ok(Self::F64(a.try_readonly()?));
        }
        if let Ok(a) = ob.downcast::<PyArray2<f32>>() {
            return Ok(Self::F32(a.try_readonly()?));
        }
        Err(not_a_float_array(ob))
    }
}

/// The `TypeError` for an argument that is not a 2-D float32 or float64
/// array.
fn not_a_float_array(ob: &Bound<'_, PyAny>) -> PyErr {
    let got = match ob.downcast::<numpy::PyUntypedArray>() {
        Ok(a) => format!("a {}-D {} array", a.ndim(), a.dtype()),
        Err(_) => ob
            .get_type()
            .name()
            .map_or_else(|_| "another type".to_string(), |n| n.to_string()),
    };
    PyTypeError::new_err(format!(
        "expected a 2-D float32 or float64 array, got {got}"
    ))
}

impl FloatArray2<'_> {
    /// `(rows, columns)`.
    pub(crate) fn dim(&self) -> (usize, usize) {
        match self {
            Self::F32(a) => a.as_array().dim(),
            Self::F64(a) => a.as_array().dim(),
        }
    }
}

/// A writeable 2-D float32 or float64 NumPy array (any strides), written in
/// place: the argument type of the bindings that transform in place. Other
/// dtypes and dimensions, and read-only arrays, are a `TypeError`.
pub(crate) enum FloatArrayMut2<'py> {
    /// A float32 array.
    F32(PyReadwriteArray2<'py, f32>),
    /// A float64 array.
    F64(PyReadwriteArray2<'py, f64>),
}

impl<'py> FromPyObject<'py> for FloatArrayMut2<'py> {
    fn extract_bound(ob: &Bound<'py, PyAny>) -> PyResult<Self> {
        if let Ok(a) = ob.downcast::<PyArray2<f64>>() {
            return Ok(Self::F64(a.try_readwrite()?));
        }
        if let Ok(a) = ob.downcast::<PyArray2<f32>>() {
            return Ok(Self::F32(a.try_readwrite()?));
        }
        Err(not_a_float_array(ob))
    }
}

/// Evaluates `$body` with `$view` bound to the `ndarray::ArrayView2` of a
/// [`FloatArray2`] (or, written `mut $array`, the `ArrayViewMut2` of a
/// [`FloatArrayMut2`]): the one float32/float64 dispatch of the bindings.
/// The body is compiled once per element type, so it calls the generic code
/// of the core (the element type is inferred from the view).
macro_rules! with_float_view {
    (mut $array:expr, |$view:ident| $body:expr) => {
        match $array {
            $crate::python::ffi::FloatArrayMut2::F32(mut a) => {
                let $view = a.as_array_mut();
                $body
            }
            $crate::python::ffi::FloatArrayMut2::F64(mut a) => {
                let $view = a.as_array_mut();
                $body
            }
        }
    };
    ($array:expr, |$view:ident| $body:expr) => {
        match $array {
            $crate::python::ffi::FloatArray2::F32(a) => {
                let $view = a.as_array();
                $body
            }
            $crate::python::ffi::FloatArray2::F64(a) => {
                let $view = a.as_array();
                $body
            }
        }
    };
}
pub(crate) use with_float_view;

/// Parses a `device=` argument ("cpu", "gpu" or "auto").
pub(crate) fn device(py: Python<'_>, name: &str) -> PyResult<Device> {
    map_result(py, Device::parse("device", name))
}

/// The name of a resolved device: "cpu" or "gpu".
pub(crate) fn device_name(d: Device) -> &'static str {
    if d == Device::Gpu {
        "gpu"
    } else {
        "cpu"
    }
}

/// The version of the payload layout of pickled handles ([`to_state`]).
/// A payload of another version is refused with a clear error instead of
/// being misread; it changes when a stored struct changes incompatibly.
pub(crate) const STATE_VERSION: u16 = 1;

/// The first bytes of every payload of [`to_state`].
const STATE_MAGIC: &[u8; 4] = b"RFRS";

/// What `__reduce__` returns: the class's `_from_state` and its argument.
pub(crate) type Reduced<'py> = (Bound<'py, PyAny>, (Bound<'py, PyBytes>,));

/// The pickled form of the handle class `C`'s fitted struct `value`:
/// `b"RFRS"`, [`STATE_VERSION`] (2 bytes, little endian), the length and
/// UTF-8 bytes of the class name, then `value` in CBOR. Serialized without
/// the GIL.
pub(crate) fn to_state<'py, C: PyTypeInfo, T: Serialize + Sync>(
    py: Python<'py>,
    value: &T,
) -> PyResult<Bound<'py, PyBytes>> {
    let bytes = call_inline(py, || {
        let name = C::NAME.as_bytes();
        let mut out = Vec::with_capacity(64);
        out.extend_from_slice(STATE_MAGIC);
        out.extend_from_slice(&STATE_VERSION.to_le_bytes());
        out.push(u8::try_from(name.len()).map_err(|_| Error::Internal("class name".into()))?);
        out.extend_from_slice(name);
        ciborium::into_writer(value, &mut out)
            .map_err(|e| Error::Internal(format!("serializing {}: {e}", C::NAME)))?;
        Ok(out)
    })?;
    Ok(PyBytes::new(py, &bytes))
}

/// The fitted struct of a payload of [`to_state`] for class `C`: the header
/// is checked (an `InvalidInputError` for another class, another
/// [`STATE_VERSION`] or bytes that are not such a payload), then the struct
/// is deserialized with its own checks. Nothing is refitted.
pub(crate) fn from_state<C: PyTypeInfo, T: DeserializeOwned + Send>(
    py: Python<'_>,
    state: &[u8],
) -> PyResult<T> {
    let bad = |what: String| Error::invalid("state", what);
    let parsed = call_inline(py, || {
        let rest = state
            .strip_prefix(STATE_MAGIC)
            .ok_or_else(|| bad("not a pickled randfeat_rs object".into()))?;
        let (version, rest) = rest
            .split_first_chunk::<2>()
            .ok_or_else(|| bad("truncated".into()))?;
        let version = u16::from_le_bytes(*version);
        if version != STATE_VERSION {
            return Err(bad(format!(
                "pickled with state version {version}; this randfeat_rs {} reads version \
                 {STATE_VERSION} (refit the model with this version)",
                env!("CARGO_PKG_VERSION")
            )));
        }
        let (&len, rest) = rest.split_first().ok_or_else(|| bad("truncated".into()))?;
        let (name, body) = rest
            .split_at_checked(usize::from(len))
            .ok_or_else(|| bad("truncated".into()))?;
        if name != C::NAME.as_bytes() {
            return Err(bad(format!(
                "holds a {}, not a {}",
                String::from_utf8_lossy(name),
                C::NAME
            )));
        }
        let mut rest = body;
        let value = ciborium::from_reader(&mut rest)
            .map_err(|e| bad(format!("cannot be read as a {}: {e}", C::NAME)))?;
        // A payload is one value: bytes after it are damage, not data.
        match rest.len() {
            0 => Ok(value),
            n => Err(bad(format!(
                "goes on for {n} byte{} after the {} it holds (damaged)",
                if n == 1 { "" } else { "s" },
                C::NAME
            ))),
        }
    })?;
    Ok(parsed)
}

/// `__reduce__` of a handle: `(type(slf)._from_state, (to_state(value),))`,
/// so that pickle stores the fitted struct by value.
pub(crate) fn reduce<'py, C: PyClass + PyTypeInfo, T: Serialize + Sync>(
    slf: &Bound<'py, C>,
    value: &T,
) -> PyResult<Reduced<'py>> {
    let py = slf.py();
    let load = slf.as_any().get_type().getattr("_from_state")?;
    Ok((load, (to_state::<C, T>(py, value)?,)))
}

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
                    if raised.is_none()
                        && let Err(e) = Python::attach(|py| poll(py, monitor, callback))
                    {
                        monitor.cancel();
                        raised = Some(e);
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
pub(crate) fn report(monitor: &Monitor, callback: &Bound<'_, PyAny>) -> PyResult<()> {
    let (stage, done, total) = monitor.snapshot();
    callback.call1((stage, done, total, monitor.take_messages()))?;
    Ok(())
}

/// Calls into Python from a Rust computation that runs on the calling
/// thread with the GIL held (an optimizer asking a Python callable for the
/// reductions of a distributed evaluation): every call first checks Ctrl-C
/// and reports progress; a `NotPositiveDefiniteError` is the call's
/// [`Error::NotPositiveDefinite`], any other Python exception cancels the
/// monitor, ends the computation as [`Error::Interrupted`] and is kept, to
/// be raised as it is by [`Callbacks::finish`].
pub(crate) struct Callbacks<'a> {
    monitor: &'a Monitor,
    progress: Option<&'a Py<PyAny>>,
    raised: Mutex<Option<PyErr>>,
}

impl<'a> Callbacks<'a> {
    /// Callbacks reporting `monitor` to `progress` (when given).
    pub(crate) fn new(monitor: &'a Monitor, progress: Option<&'a Py<PyAny>>) -> Self {
        Self {
            monitor,
            progress,
            raised: Mutex::new(None),
        }
    }

    /// `f` with the GIL, after the Ctrl-C check and the progress report.
    ///
    /// # Errors
    /// [`Error::Interrupted`] for a Python exception (kept) or Ctrl-C.
    pub(crate) fn call<T>(&self, f: impl FnOnce(Python<'_>) -> PyResult<T>) -> crate::Result<T> {
        Python::attach(|py| {
            let run = || -> PyResult<T> {
                py.check_signals()?;
                if let Some(p) = self.progress {
                    report(self.monitor, p.bind(py))?;
                }
                f(py)
            };
            run().map_err(|e| {
                // A factorization that fails in a reduction fails the
                // evaluation, as it would in memory: the optimizer handles
                // it (the pivot is not carried over).
                let numerical = py
                    .import("randfeat_rs.exceptions")
                    .and_then(|m| m.getattr("NotPositiveDefiniteError"))
                    .is_ok_and(|cls| e.matches(py, cls).unwrap_or(false));
                if numerical {
                    return Error::NotPositiveDefinite { index: 0 };
                }
                self.monitor.cancel();
                *self.raised.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
                Error::Interrupted
            })
        })
    }

    /// The outcome of the computation: the kept Python exception if a call
    /// raised one, else `outcome` after a last progress report.
    pub(crate) fn finish<T>(self, py: Python<'_>, outcome: crate::Result<T>) -> PyResult<T> {
        if let Some(e) = self.raised.into_inner().unwrap_or_else(|p| p.into_inner()) {
            return Err(e);
        }
        if let Some(p) = self.progress {
            report(self.monitor, p.bind(py))?;
        }
        map_result(py, outcome)
    }
}

/// Runs `f` on consecutive row ranges that cover `0..rows`, cut as
/// [`crate::row_pieces`] plans for rows of about `row_flops` floating-point
/// operations and `row_bytes` bytes of output each: tiny work without
/// `progress` is one range on the calling thread with
/// [`Parallelism::Sequential`] (see [`call_inline`]); work of one piece
/// without `progress` is one range in the pool through plain [`call`];
/// anything else runs in pieces through [`call_monitored`], which sees a
/// Ctrl-C between two of them, each with [`Parallelism::Rayon`]. For
/// row-wise maps, whose rows do not depend on each other, the result does
/// not depend on the ranges. `progress` gets the stage "rows".
pub(crate) fn call_rows<F>(
    py: Python<'_>,
    rows: usize,
    row_flops: f64,
    row_bytes: f64,
    progress: Option<&Bound<'_, PyAny>>,
    mut f: F,
) -> PyResult<()>
where
    F: FnMut(Range<usize>, Parallelism) -> crate::Result<()> + Send,
{
    let work = RowWork {
        rows,
        row_flops,
        row_bytes,
        threads: crate::threads::get_num_threads(),
    };
    match work.plan(progress.is_some()) {
        Plan::Inline => return call_inline(py, || f(0..rows, Parallelism::Sequential)),
        // Nothing to check between ranges or to report, so the pool runs
        // it without the watching thread's hand-offs.
        Plan::OnePiece => return call(py, || f(0..rows, Parallelism::Rayon)),
        Plan::Split => {}
    }
    call_monitored(py, progress, |monitor| {
        monitor.stage("rows", rows as u64);
        let mut pieces = work.pieces();
        while let Some(range) = pieces.next_range() {
            monitor.check()?;
            let t0 = Instant::now();
            f(range.clone(), Parallelism::Rayon)?;
            monitor.advance(range.len() as u64);
            pieces.done(range, t0.elapsed().as_secs_f64());
        }
        Ok(())
    })
}

/// Allocates an uninitialized C-order `rows x cols` NumPy array for Rust to
/// fill. NumPy's allocator asks the kernel for huge pages on large arrays,
/// which makes the first write to a fresh 100 MB output several times
/// cheaper than a plain Rust allocation. Callers must write every element
/// before the array is returned to Python. An output larger than the
/// memory available is refused first ([`crate::alloc::check_alloc`], naming
/// `param`: `n_components` for a feature map's output, `X` for an output
/// of `X`'s shape), and an allocation NumPy fails is the same error, not a
/// panic.
pub(crate) fn output_array<'py, T: numpy::Element>(
    py: Python<'py>,
    param: &'static str,
    rows: usize,
    cols: usize,
) -> PyResult<Bound<'py, PyArray2<T>>> {
    let what =
        format!("the output of {rows} rows x {cols} columns (transform fewer rows at a time)");
    let elem = std::mem::size_of::<T>();
    let checked = crate::alloc::check_alloc(param, &what, &[rows, cols], elem);
    let bytes = map_result(py, checked)?;
    let refused = || {
        to_pyerr(
            py,
            crate::alloc::too_large(
                param,
                &what,
                Some(bytes),
                crate::system::available_memory_bytes(),
            ),
        )
    };
    let mut dims = [
        npy_intp::try_from(rows).map_err(|_| refused())?,
        npy_intp::try_from(cols).map_err(|_| refused())?,
    ];
    // SAFETY: NumPy's array constructor with a dtype reference it steals,
    // two dimensions that live through the call, default (C) strides and no
    // data (NumPy allocates it). It returns a new reference or NULL with a
    // Python error set, which `from_owned_ptr_or_err` takes. The array is
    // fully written by the caller before Python sees it (documented contract
    // above); T is a plain float type.
    let array = unsafe {
        let ptr = PY_ARRAY_API.PyArray_NewFromDescr(
            py,
            PY_ARRAY_API.get_type_object(py, NpyTypes::PyArray_Type),
            T::get_dtype(py).into_dtype_ptr(),
            2,
            dims.as_mut_ptr(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            0,
            std::ptr::null_mut(),
        );
        Bound::from_owned_ptr_or_err(py, ptr)
    };
    // NumPy's MemoryError becomes the size error naming `param`.
    let array = array.map_err(|_| refused())?;
    // SAFETY: the object was just created as a 2-D array of T.
    Ok(unsafe { array.cast_into_unchecked() })
}

/// Runs `f` through [`call`] on a mutable view of a fresh output array (see
/// [`output_array`], which names `param` when it is too large) and returns
/// the array.
pub(crate) fn call_with_output<'py, T, F>(
    py: Python<'py>,
    param: &'static str,
    rows: usize,
    cols: usize,
    f: F,
) -> PyResult<Bound<'py, PyArray2<T>>>
where
    T: numpy::Element + Send,
    F: FnOnce(ndarray::ArrayViewMut2<'_, T>) -> crate::Result<()> + Send,
{
    let out = output_array::<T>(py, param, rows, cols)?;
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
    param: &'static str,
    rows: usize,
    cols: usize,
    row_flops: f64,
    progress: Option<&Bound<'_, PyAny>>,
    f: F,
) -> PyResult<Bound<'py, PyArray2<T>>>
where
    T: numpy::Element + Send,
    F: Fn(Range<usize>, ndarray::ArrayViewMut2<'_, T>, Parallelism) -> crate::Result<()> + Send,
{
    let out = output_array::<T>(py, param, rows, cols)?;
    {
        let mut rw = out.readwrite();
        let mut view = rw.as_array_mut();
        let row_bytes = (cols * std::mem::size_of::<T>()) as f64;
        call_rows(py, rows, row_flops, row_bytes, progress, move |r, par| {
            f(r.clone(), view.slice_mut(ndarray::s![r, ..]), par)
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
        Error::NotPositiveDefinite { .. }
        | Error::InducingNotPositiveDefinite { .. }
        | Error::GpuStatisticsNotPositiveDefinite { .. } => "NotPositiveDefiniteError",
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
