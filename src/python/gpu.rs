//! Bindings of [`crate::gpu`]: device info and counters, the GPU FWHT, the
//! Gram accumulation and the RFF kernel on float32/float64 arrays (the
//! feature maps of the estimators run on the GPU through
//! `_core.FeatureMap`, [`super::feature_map`]).

use ndarray::ArrayView2;
use numpy::{PyReadonlyArray1, PyReadonlyArray2, PyReadwriteArray2, ToPyArray};
use pyo3::prelude::*;
use pyo3::types::{PyAny, PyDict};

use super::ffi::{self, with_float_view, FloatArray2};
use crate::fourier::Variant;
use crate::gpu;
use crate::real::Real;

/// The adapter in use as a dict, or None when no adapter is usable.
#[pyfunction]
fn gpu_info(py: Python<'_>) -> PyResult<Option<Bound<'_, PyDict>>> {
    let Some(info) = ffi::call(py, || Ok(gpu::gpu_info()))? else {
        return Ok(None);
    };
    let d = PyDict::new(py);
    d.set_item("name", info.name)?;
    d.set_item("backend", info.backend)?;
    d.set_item("device_type", info.device_type)?;
    d.set_item("driver", info.driver)?;
    d.set_item("software", info.software)?;
    d.set_item("fwht_block", info.fwht_block)?;
    let limits = PyDict::new(py);
    for (k, v) in info.limits {
        limits.set_item(k, v)?;
    }
    d.set_item("limits", limits)?;
    d.set_item("dispatches", gpu::dispatch_count())?;
    Ok(Some(d))
}

/// Compute dispatches recorded on the GPU by this process.
#[pyfunction]
fn gpu_dispatch_count() -> u64 {
    gpu::dispatch_count()
}

/// Caps the bytes of one streamed chunk (>= 4096; the Python wrapper
/// checks the range first).
#[pyfunction]
fn gpu_set_chunk_bytes(py: Python<'_>, nbytes: u64) -> PyResult<()> {
    ffi::map_result(py, gpu::set_chunk_bytes(nbytes))
}

/// Resolves "cpu" | "gpu" | "auto" to the device that runs ("cpu" or "gpu").
#[pyfunction]
fn resolve_device(py: Python<'_>, device: &str) -> PyResult<&'static str> {
    let dev = ffi::device(py, device)?;
    let got = ffi::call(py, || gpu::resolve(dev))?;
    Ok(ffi::device_name(got))
}

/// `out` (when given and not `x` itself) must have `x`'s dtype.
fn fwht_typed<'py, T: Real + numpy::Element>(
    py: Python<'py>,
    x: &Bound<'py, PyAny>,
    out: Option<&Bound<'py, PyAny>>,
    normalized: bool,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    match out {
        None => {
            let x: PyReadonlyArray2<'py, T> = x.extract()?;
            let src = x.as_array();
            let (rows, cols) = src.dim();
            let res = ffi::call_with_output(py, "X", rows, cols, |dst| {
                gpu::fwht_rows_into(src, dst, normalized)
            })?;
            Ok(Some(res.into_any()))
        }
        Some(o) if o.is(x) => {
            let mut x: PyReadwriteArray2<'py, T> = x.extract()?;
            let view = x.as_array_mut();
            ffi::call(py, || gpu::fwht_rows(view, normalized))?;
            Ok(None)
        }
        Some(o) => {
            let x: PyReadonlyArray2<'py, T> = x.extract()?;
            let mut o: PyReadwriteArray2<'py, T> = o.extract()?;
            let (src, dst) = (x.as_array(), o.as_array_mut());
            ffi::call(py, || gpu::fwht_rows_into(src, dst, normalized))?;
            Ok(None)
        }
    }
}

/// Row-wise FWHT of a 2-D float array on the GPU: into a new array (out
/// None), in place (out is x) or into `out`; returns the new array or None.
#[pyfunction]
#[pyo3(signature = (x, out=None, normalized=false))]
fn gpu_fwht<'py>(
    py: Python<'py>,
    x: &Bound<'py, PyAny>,
    out: Option<&Bound<'py, PyAny>>,
    normalized: bool,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    // The dtype from a read-only borrow that ends here: the in-place case
    // borrows `x` for writing.
    let is_f32 = matches!(x.extract::<FloatArray2<'py>>()?, FloatArray2::F32(_));
    if is_f32 {
        fwht_typed::<f32>(py, x, out, normalized)
    } else {
        fwht_typed::<f64>(py, x, out, normalized)
    }
}

/// `y` (when given) must have `phi`'s dtype.
fn gram_typed<'py, T: Real + numpy::Element>(
    py: Python<'py>,
    pv: ArrayView2<'_, T>,
    y: Option<&Bound<'py, PyAny>>,
) -> PyResult<(Bound<'py, PyAny>, Option<Bound<'py, PyAny>>)> {
    let y: Option<PyReadonlyArray2<'py, T>> = y.map(|y| y.extract()).transpose()?;
    let yv = y.as_ref().map(|y| y.as_array());
    let g = ffi::call(py, || gpu::gram(pv, yv))?;
    Ok((
        g.phi_t_phi.to_pyarray(py).into_any(),
        g.phi_t_y.map(|b| b.to_pyarray(py).into_any()),
    ))
}

/// (Phi^T Phi, Phi^T y or None) in float64, accumulated on the GPU.
#[pyfunction]
#[pyo3(signature = (phi, y=None))]
#[allow(clippy::type_complexity)]
fn gpu_gram<'py>(
    py: Python<'py>,
    phi: FloatArray2<'py>,
    y: Option<&Bound<'py, PyAny>>,
) -> PyResult<(Bound<'py, PyAny>, Option<Bound<'py, PyAny>>)> {
    with_float_view!(phi, |pv| gram_typed(py, pv, y))
}

/// `w` and `phases` must have `x`'s dtype.
fn rff_typed<'py, T: Real + numpy::Element>(
    py: Python<'py>,
    xv: ArrayView2<'_, T>,
    w: &Bound<'py, PyAny>,
    phases: Option<&Bound<'py, PyAny>>,
    variant: Variant,
    scale: f64,
) -> PyResult<Bound<'py, PyAny>> {
    let w: PyReadonlyArray2<'py, T> = w.extract()?;
    let b: Option<PyReadonlyArray1<'py, T>> = phases.map(|b| b.extract()).transpose()?;
    let (wv, bv) = (w.as_array(), b.as_ref().map(|b| b.as_array()));
    let cols = variant.n_columns(wv.nrows());
    // An output too large names `x`: its rows are what to split.
    let out = ffi::call_with_output(py, "x", xv.nrows(), cols, |dst| {
        gpu::rff_features_into(xv, wv, bv, variant, T::from_f64_lossy(scale), dst)
    })?;
    Ok(out.into_any())
}

/// Random Fourier features on the GPU ("cos_bias" or "cos_sin").
#[pyfunction]
#[pyo3(signature = (x, w, phases=None, *, variant, scale))]
fn gpu_rff<'py>(
    py: Python<'py>,
    x: FloatArray2<'py>,
    w: &Bound<'py, PyAny>,
    phases: Option<&Bound<'py, PyAny>>,
    variant: &str,
    scale: f64,
) -> PyResult<Bound<'py, PyAny>> {
    let variant = ffi::map_result(py, Variant::from_name(variant))?;
    with_float_view!(x, |xv| rff_typed(py, xv, w, phases, variant, scale))
}

pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(gpu_info, m)?)?;
    m.add_function(wrap_pyfunction!(gpu_dispatch_count, m)?)?;
    m.add_function(wrap_pyfunction!(gpu_set_chunk_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(resolve_device, m)?)?;
    m.add_function(wrap_pyfunction!(gpu_fwht, m)?)?;
    m.add_function(wrap_pyfunction!(gpu_gram, m)?)?;
    m.add_function(wrap_pyfunction!(gpu_rff, m)?)?;
    Ok(())
}
