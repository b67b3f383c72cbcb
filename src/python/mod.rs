//! PyO3 bindings (feature `python`): argument translation only.
//!
//! One binding style:
//! - Every fitted struct the Python estimators use is a `#[pyclass]` handle
//!   over the core struct (`FeatureMap` over
//!   [`crate::feature_map::AnyFeatureMap`], `BinningMap`, `FeatureStats`,
//!   `FeatureGp`, `ExactGp`, `LocalizedMaclaurinGp`, `SparseGp`). It is made by a static
//!   method that fits (keyword arguments), exposes the fitted parameters as
//!   getters returning NumPy arrays, computes through its methods, and
//!   pickles by value through serde (`__reduce__` and `_from_state`, see
//!   [`ffi`]): nothing is refitted or redrawn on unpickling.
//! - Arguments that take rows in float32 or float64 are [`ffi::FloatArray2`]
//!   (or [`ffi::FloatArrayMut2`]), dispatched once by [`ffi::with_float_view!`]
//!   to the generic core.
//! - Every call goes through [`ffi::call`] (long work: [`ffi::call_monitored`]
//!   or [`ffi::call_rows`], which also watch for Ctrl-C and report
//!   progress), which releases the GIL, runs the work in the library's
//!   thread pool, catches panics and maps [`crate::Error`] to the exception
//!   tree of `randfeat_rs.exceptions`.

mod binning;
mod feature_map;
mod feature_sums;
mod ffi;
mod fourier;
mod fwht;
mod gp;
mod gpc;
#[cfg(feature = "gpu")]
mod gpu;
mod localized_gp;
mod maclaurin;
mod sketch;
mod sparse_gp;
mod sparse_gpc;
mod sparse_stats;

use pyo3::prelude::*;

/// Sets the number of threads every randfeat_rs call uses (1 to rayon's
/// limit); any other integer, however large, is an `InvalidInputError`.
#[pyfunction]
fn set_num_threads(py: Python<'_>, n: &Bound<'_, PyAny>) -> PyResult<()> {
    let count = n
        .extract::<usize>()
        .map_err(|_| ffi::to_pyerr(py, crate::threads::invalid_thread_count(n)))?;
    ffi::map_result(py, crate::threads::set_num_threads(count))
}

/// The number of threads randfeat_rs calls use.
#[pyfunction]
fn get_num_threads() -> usize {
    crate::threads::get_num_threads()
}

/// Why `RANDFEAT_NUM_THREADS` is ignored (set, but not a thread count), or
/// `None`.
#[pyfunction]
fn ignored_env_threads() -> Option<String> {
    crate::threads::ignored_env_threads()
}

/// The SIMD instruction set the kernels selected on this CPU.
#[pyfunction]
fn simd_level() -> &'static str {
    crate::simd::Isa::detect().name()
}

/// Test hook: panics inside the FFI helper, to prove that a Rust panic
/// surfaces as a Python exception rather than an abort.
#[pyfunction]
fn _debug_panic(py: Python<'_>) -> PyResult<()> {
    ffi::call(py, || -> crate::Result<()> {
        panic!("deliberate panic from _debug_panic")
    })
}

/// Test hook: a long Rust loop without numerics inside the monitored FFI
/// call, to test Ctrl-C and progress reports. Sleeps `seconds` in steps of
/// 1 ms, checking the monitor before each (the stage "milliseconds", one
/// unit per step, after the message "waiting"); returns the seconds it ran.
#[pyfunction]
#[pyo3(signature = (seconds, progress=None))]
fn _debug_wait(py: Python<'_>, seconds: f64, progress: Option<&Bound<'_, PyAny>>) -> PyResult<f64> {
    ffi::call_monitored(py, progress, |monitor: &crate::Monitor| {
        let t0 = std::time::Instant::now();
        let steps = (seconds * 1e3).max(0.0) as u64;
        monitor.message("waiting");
        monitor.stage("milliseconds", steps);
        for _ in 0..steps {
            monitor.check()?;
            std::thread::sleep(std::time::Duration::from_millis(1));
            monitor.advance(1);
        }
        Ok(t0.elapsed().as_secs_f64())
    })
}

/// The compiled core of randfeat_rs.
#[pymodule]
#[pyo3(name = "_core")]
fn core_module(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_function(wrap_pyfunction!(set_num_threads, m)?)?;
    m.add_function(wrap_pyfunction!(get_num_threads, m)?)?;
    m.add_function(wrap_pyfunction!(ignored_env_threads, m)?)?;
    m.add_function(wrap_pyfunction!(simd_level, m)?)?;
    m.add_function(wrap_pyfunction!(_debug_panic, m)?)?;
    m.add_function(wrap_pyfunction!(_debug_wait, m)?)?;
    fwht::register(m)?;
    binning::register(m)?;
    gp::register(m)?;
    gpc::register(m)?;
    fourier::register(m)?;
    #[cfg(feature = "gpu")]
    gpu::register(m)?;
    sketch::register(m)?;
    localized_gp::register(m)?;
    sparse_gp::register(m)?;
    sparse_gpc::register(m)?;
    sparse_stats::register(m)?;
    feature_map::register(m)?;
    feature_sums::register(m)?;
    Ok(())
}
