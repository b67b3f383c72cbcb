//! Bindings of [`crate::gpu`]: device info and counters, the GPU FWHT, the
//! Gram accumulation and the RFF kernel on float32/float64 arrays.

use numpy::{PyArray2, PyReadonlyArray1, PyReadonlyArray2, PyReadwriteArray2, ToPyArray};
use pyo3::prelude::*;
use pyo3::types::{PyAny, PyDict};

use super::ffi;
use super::maclaurin::PyMaclaurinMap;
use super::sketch::PyPolySketch;
use crate::fourier::Variant;
use crate::gpu::{self, Device, Gram};
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

/// Caps the bytes of one streamed chunk (>= 4096).
#[pyfunction]
fn gpu_set_chunk_bytes(py: Python<'_>, nbytes: i64) -> PyResult<()> {
    ffi::map_result(py, gpu::set_chunk_bytes(u64::try_from(nbytes).unwrap_or(0)))
}

/// Resolves "cpu" | "gpu" | "auto" to the device that runs ("cpu" or "gpu").
#[pyfunction]
fn resolve_device(py: Python<'_>, device: &str) -> PyResult<&'static str> {
    let dev = ffi::map_result(py, Device::parse("device", device))?;
    let got = ffi::call(py, || gpu::resolve(dev))?;
    Ok(if got == Device::Gpu { "gpu" } else { "cpu" })
}

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
            let res = ffi::call_with_output(py, rows, cols, |dst| {
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
    if x.downcast::<PyArray2<f32>>().is_ok() {
        fwht_typed::<f32>(py, x, out, normalized)
    } else {
        fwht_typed::<f64>(py, x, out, normalized)
    }
}

fn gram_typed<'py, T: Real + numpy::Element>(
    py: Python<'py>,
    phi: &Bound<'py, PyAny>,
    y: Option<&Bound<'py, PyAny>>,
) -> PyResult<(Bound<'py, PyAny>, Option<Bound<'py, PyAny>>)> {
    let phi: PyReadonlyArray2<'py, T> = phi.extract()?;
    let y: Option<PyReadonlyArray2<'py, T>> = y.map(|y| y.extract()).transpose()?;
    let (pv, yv) = (phi.as_array(), y.as_ref().map(|y| y.as_array()));
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
    phi: &Bound<'py, PyAny>,
    y: Option<&Bound<'py, PyAny>>,
) -> PyResult<(Bound<'py, PyAny>, Option<Bound<'py, PyAny>>)> {
    if phi.downcast::<PyArray2<f32>>().is_ok() {
        gram_typed::<f32>(py, phi, y)
    } else {
        gram_typed::<f64>(py, phi, y)
    }
}

fn rff_typed<'py, T: Real + numpy::Element>(
    py: Python<'py>,
    x: &Bound<'py, PyAny>,
    w: &Bound<'py, PyAny>,
    phases: Option<&Bound<'py, PyAny>>,
    variant: Variant,
    scale: f64,
) -> PyResult<Bound<'py, PyAny>> {
    let x: PyReadonlyArray2<'py, T> = x.extract()?;
    let w: PyReadonlyArray2<'py, T> = w.extract()?;
    let b: Option<PyReadonlyArray1<'py, T>> = phases.map(|b| b.extract()).transpose()?;
    let (xv, wv, bv) = (x.as_array(), w.as_array(), b.as_ref().map(|b| b.as_array()));
    let cols = variant.n_columns(wv.nrows());
    let out = ffi::call_with_output(py, xv.nrows(), cols, |dst| {
        gpu::rff_features_into(xv, wv, bv, variant, T::from_f64_lossy(scale), dst)
    })?;
    Ok(out.into_any())
}

/// Random Fourier features on the GPU ("cos_bias" or "cos_sin").
#[pyfunction]
#[pyo3(signature = (x, w, phases, variant, scale))]
fn gpu_rff<'py>(
    py: Python<'py>,
    x: &Bound<'py, PyAny>,
    w: &Bound<'py, PyAny>,
    phases: Option<&Bound<'py, PyAny>>,
    variant: &str,
    scale: f64,
) -> PyResult<Bound<'py, PyAny>> {
    let variant = ffi::map_result(py, Variant::from_name(variant))?;
    if x.downcast::<PyArray2<f32>>().is_ok() {
        rff_typed::<f32>(py, x, w, phases, variant, scale)
    } else {
        rff_typed::<f64>(py, x, w, phases, variant, scale)
    }
}

fn sketch_typed<T: Real + numpy::Element>(
    py: Python<'_>,
    sketch: &PyPolySketch,
    x: &Bound<'_, PyAny>,
    out: &Bound<'_, PyAny>,
    bias: f64,
    length_scale: f64,
) -> PyResult<()> {
    let x: PyReadonlyArray2<'_, T> = x.extract()?;
    let mut out: PyReadwriteArray2<'_, T> = out.extract()?;
    let (src, dst) = (x.as_array(), out.as_array_mut());
    ffi::call(py, || {
        gpu::sketch_features_into(&sketch.inner, src, bias, length_scale, dst)
    })
}

/// Writes the features of `(x.y / l^2 + c)^n` of a fitted sketch for the
/// rows of `x` into `out` (shape (n, width), x's dtype), on the GPU.
#[pyfunction]
#[pyo3(signature = (sketch, x, out, bias, length_scale))]
fn gpu_sketch_transform(
    py: Python<'_>,
    sketch: PyRef<'_, PyPolySketch>,
    x: &Bound<'_, PyAny>,
    out: &Bound<'_, PyAny>,
    bias: f64,
    length_scale: f64,
) -> PyResult<()> {
    if x.downcast::<PyArray2<f32>>().is_ok() {
        sketch_typed::<f32>(py, &sketch, x, out, bias, length_scale)
    } else {
        sketch_typed::<f64>(py, &sketch, x, out, bias, length_scale)
    }
}

type GramPair<'py> = (Bound<'py, PyAny>, Option<Bound<'py, PyAny>>);

fn gram_pair(py: Python<'_>, g: Gram) -> GramPair<'_> {
    (
        g.phi_t_phi.to_pyarray(py).into_any(),
        g.phi_t_y.map(|b| b.to_pyarray(py).into_any()),
    )
}

/// (Phi^T Phi, Phi^T y or None) in float64 for the sketch features Phi of
/// `x`, computed on the GPU without Phi leaving the device.
#[pyfunction]
#[pyo3(signature = (sketch, x, y, bias, length_scale))]
fn gpu_sketch_gram<'py>(
    py: Python<'py>,
    sketch: PyRef<'_, PyPolySketch>,
    x: &Bound<'py, PyAny>,
    y: Option<PyReadonlyArray2<'py, f64>>,
    bias: f64,
    length_scale: f64,
) -> PyResult<GramPair<'py>> {
    let yv = y.as_ref().map(|y| y.as_array());
    let sk = &sketch.inner;
    let g = if x.downcast::<PyArray2<f32>>().is_ok() {
        let x: PyReadonlyArray2<'py, f32> = x.extract()?;
        let xv = x.as_array();
        ffi::call(py, || gpu::sketch_gram(sk, xv, bias, length_scale, yv))?
    } else {
        let x: PyReadonlyArray2<'py, f64> = x.extract()?;
        let xv = x.as_array();
        ffi::call(py, || gpu::sketch_gram(sk, xv, bias, length_scale, yv))?
    };
    Ok(gram_pair(py, g))
}

/// (Phi^T Phi, Phi^T y or None) in float64 for the random Fourier features
/// Phi of `x`, computed on the GPU without Phi leaving the device.
#[pyfunction]
#[pyo3(signature = (x, y, w, phases, variant, scale))]
#[allow(clippy::too_many_arguments)]
fn gpu_rff_gram<'py>(
    py: Python<'py>,
    x: &Bound<'py, PyAny>,
    y: Option<PyReadonlyArray2<'py, f64>>,
    w: PyReadonlyArray2<'py, f64>,
    phases: Option<PyReadonlyArray1<'py, f64>>,
    variant: &str,
    scale: f64,
) -> PyResult<GramPair<'py>> {
    let variant = ffi::map_result(py, Variant::from_name(variant))?;
    let (wv, bv) = (w.as_array(), phases.as_ref().map(|b| b.as_array()));
    let yv = y.as_ref().map(|y| y.as_array());
    let g = if x.downcast::<PyArray2<f32>>().is_ok() {
        let x: PyReadonlyArray2<'py, f32> = x.extract()?;
        let xv = x.as_array();
        ffi::call(py, || gpu::rff_gram(xv, wv, bv, variant, scale, yv))?
    } else {
        let x: PyReadonlyArray2<'py, f64> = x.extract()?;
        let xv = x.as_array();
        ffi::call(py, || gpu::rff_gram(xv, wv, bv, variant, scale, yv))?
    };
    Ok(gram_pair(py, g))
}

fn maclaurin_typed<'py, T: Real + numpy::Element>(
    py: Python<'py>,
    map: &PyMaclaurinMap,
    x: &Bound<'py, PyAny>,
    center: Option<Vec<f64>>,
) -> PyResult<Bound<'py, PyAny>> {
    let x: PyReadonlyArray2<'py, T> = x.extract()?;
    let src = x.as_array();
    let out = ffi::call_with_output(py, src.nrows(), map.inner.width(), |dst| {
        gpu::maclaurin_features_into(&map.inner, src, center.as_deref(), dst)
    })?;
    Ok(out.into_any())
}

/// `Phi(x)` of a fitted Maclaurin map on the GPU, with the fitted center or
/// with `center` when given; x's dtype.
#[pyfunction]
#[pyo3(signature = (map, x, center=None))]
fn gpu_maclaurin_transform<'py>(
    py: Python<'py>,
    map: PyRef<'_, PyMaclaurinMap>,
    x: &Bound<'py, PyAny>,
    center: Option<Vec<f64>>,
) -> PyResult<Bound<'py, PyAny>> {
    if x.downcast::<PyArray2<f32>>().is_ok() {
        maclaurin_typed::<f32>(py, &map, x, center)
    } else {
        maclaurin_typed::<f64>(py, &map, x, center)
    }
}

fn maclaurin_gram_typed<'py, T: Real + numpy::Element>(
    py: Python<'py>,
    map: &PyMaclaurinMap,
    x: &Bound<'py, PyAny>,
    y: Option<PyReadonlyArray2<'py, f64>>,
) -> PyResult<GramPair<'py>> {
    let x: PyReadonlyArray2<'py, T> = x.extract()?;
    let (xv, yv) = (x.as_array(), y.as_ref().map(|y| y.as_array()));
    let g = ffi::call(py, || gpu::maclaurin_gram(&map.inner, xv, None, yv))?;
    Ok((
        g.phi_t_phi.to_pyarray(py).into_any(),
        g.phi_t_y.map(|b| b.to_pyarray(py).into_any()),
    ))
}

/// (Phi^T Phi, Phi^T y or None) in float64 for the Maclaurin features Phi
/// of `x` (fitted center), computed on the GPU without Phi leaving the device.
#[pyfunction]
#[pyo3(signature = (map, x, y))]
fn gpu_maclaurin_gram<'py>(
    py: Python<'py>,
    map: PyRef<'_, PyMaclaurinMap>,
    x: &Bound<'py, PyAny>,
    y: Option<PyReadonlyArray2<'py, f64>>,
) -> PyResult<GramPair<'py>> {
    if x.downcast::<PyArray2<f32>>().is_ok() {
        maclaurin_gram_typed::<f32>(py, &map, x, y)
    } else {
        maclaurin_gram_typed::<f64>(py, &map, x, y)
    }
}

/// None when the fitted Maclaurin map has a GPU kernel, else the reason.
#[pyfunction]
fn gpu_maclaurin_unsupported(map: PyRef<'_, PyMaclaurinMap>) -> Option<String> {
    gpu::check_maclaurin(&map.inner)
        .err()
        .map(|e| e.to_string())
}

pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(gpu_info, m)?)?;
    m.add_function(wrap_pyfunction!(gpu_dispatch_count, m)?)?;
    m.add_function(wrap_pyfunction!(gpu_set_chunk_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(resolve_device, m)?)?;
    m.add_function(wrap_pyfunction!(gpu_fwht, m)?)?;
    m.add_function(wrap_pyfunction!(gpu_gram, m)?)?;
    m.add_function(wrap_pyfunction!(gpu_rff, m)?)?;
    m.add_function(wrap_pyfunction!(gpu_sketch_transform, m)?)?;
    m.add_function(wrap_pyfunction!(gpu_sketch_gram, m)?)?;
    m.add_function(wrap_pyfunction!(gpu_rff_gram, m)?)?;
    m.add_function(wrap_pyfunction!(gpu_maclaurin_transform, m)?)?;
    m.add_function(wrap_pyfunction!(gpu_maclaurin_gram, m)?)?;
    m.add_function(wrap_pyfunction!(gpu_maclaurin_unsupported, m)?)?;
    Ok(())
}
