//! Bindings of [`crate::sketch`]: the closed-form `sketch_variance`, the
//! Monte Carlo helper used by tests, and the random parameters of a fitted
//! sketch as NumPy arrays (the fitted map itself is a `_core.FeatureMap`,
//! drawn by `FeatureMap.polynomial`).

use numpy::{IntoPyArray, PyArray1, PyReadonlyArray1};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use super::ffi;
use crate::error::Error;
use crate::sketch::estimates::pair_estimates;
use crate::sketch::variance::polynomial_kernel_variance;
use crate::sketch::{
    check_degree, sketch_features_for, PolySketch, SketchKind, SketchParams, MAX_DEGREE,
};

/// The random parameters of `sketch` as a dict of NumPy arrays: "weights"
/// (`degree x features x dim`) of the dense sketches, "sign_codes" and
/// "permutations" of TensorSRHT, "hashes" and "signs" of TensorSketch.
pub(super) fn sketch_params<'py>(
    py: Python<'py>,
    sketch: &PolySketch,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    let n = sketch.degree() as usize;
    let shape_error = || ffi::to_pyerr(py, Error::Internal("parameter shape".into()));
    match sketch.params() {
        SketchParams::Dense { weights } => {
            let (r, c) = weights[0].dim();
            let mut w = ndarray::Array3::<f64>::zeros((n, r, c));
            for (mut dst, src) in w.outer_iter_mut().zip(weights) {
                dst.assign(src);
            }
            d.set_item("weights", w.into_pyarray(py))?;
        }
        SketchParams::Srht {
            d_pad,
            codes,
            perms,
        } => {
            let b = codes.len() / (n * d_pad);
            let codes = ndarray::Array1::from(codes.to_vec())
                .into_shape_with_order((b, n, d_pad))
                .map_err(|_| shape_error())?;
            let perms = ndarray::Array1::from(perms.to_vec())
                .into_shape_with_order((b, n, d_pad))
                .map_err(|_| shape_error())?;
            d.set_item("sign_codes", codes.into_pyarray(py))?;
            d.set_item("permutations", perms.into_pyarray(py))?;
        }
        SketchParams::Count { hashes, negative } => {
            let dim = sketch.dim();
            let h = ndarray::Array1::from(hashes.to_vec())
                .into_shape_with_order((n, dim))
                .map_err(|_| shape_error())?;
            let s =
                ndarray::Array1::from_iter(negative.iter().map(|&ng| if ng { -1i8 } else { 1 }))
                    .into_shape_with_order((n, dim))
                    .map_err(|_| shape_error())?;
            d.set_item("hashes", h.into_pyarray(py))?;
            d.set_item("signs", s.into_pyarray(py))?;
        }
    }
    Ok(d)
}

/// A count argument `>= min` (an `InvalidInputError` naming it otherwise).
fn count(py: Python<'_>, name: &'static str, v: i64, min: i64) -> PyResult<usize> {
    if v < min {
        return Err(ffi::to_pyerr(
            py,
            Error::invalid(name, format!("must be >= {min}, got {v}")),
        ));
    }
    usize::try_from(v).map_err(|_| ffi::to_pyerr(py, Error::invalid(name, "too large")))
}

/// The kernel degree argument (`1 ..= MAX_DEGREE`, [`check_degree`]).
fn degree(py: Python<'_>, v: i64) -> PyResult<u32> {
    let d = count(py, "degree", v, 1)? as u64;
    ffi::map_result(py, check_degree(d))?;
    // check_degree bounds d by MAX_DEGREE, a u32.
    Ok(u32::try_from(d).unwrap_or(MAX_DEGREE))
}

/// The sketch kind and its number of features for `n_components` real
/// columns (see [`sketch_features_for`]).
fn sketch_features(
    py: Python<'_>,
    sketch: &str,
    n_components: i64,
    complex: bool,
) -> PyResult<(SketchKind, usize)> {
    let kind = ffi::map_result(py, SketchKind::parse(sketch))?;
    let nc = count(py, "n_components", n_components, 1)?;
    Ok((kind, ffi::map_result(py, sketch_features_for(nc, complex))?))
}

/// Real-part variance of the estimate of `(x.y / l^2 + c)^n` by the
/// features of `PolynomialSketch` with `n_components` real columns
/// (docs/math/sketches.rst, section Variance).
#[pyfunction]
#[pyo3(signature = (x, y, *, degree, n_components, sketch, complex_weights, bias, length_scale))]
#[allow(clippy::too_many_arguments)]
fn sketch_variance(
    py: Python<'_>,
    x: PyReadonlyArray1<'_, f64>,
    y: PyReadonlyArray1<'_, f64>,
    degree: i64,
    n_components: i64,
    sketch: &str,
    complex_weights: bool,
    bias: f64,
    length_scale: f64,
) -> PyResult<f64> {
    let degree = self::degree(py, degree)?;
    let (kind, nf) = sketch_features(py, sketch, n_components, complex_weights)?;
    let (x, y) = (x.as_array().to_vec(), y.as_array().to_vec());
    ffi::call(py, || {
        polynomial_kernel_variance(
            kind,
            complex_weights,
            degree,
            nf,
            &x,
            &y,
            bias,
            length_scale,
        )
    })
}

/// Test helper: the estimates of one pair under `reps` independent sketches
/// of `PolynomialSketch` with `n_components` real columns (sketch `r` from
/// substream `r` of `seed`).
#[pyfunction]
#[pyo3(signature = (x, y, *, degree, n_components, sketch, complex_weights, bias, length_scale,
                    seed, reps))]
#[allow(clippy::too_many_arguments)]
fn _sketch_estimates<'py>(
    py: Python<'py>,
    x: PyReadonlyArray1<'py, f64>,
    y: PyReadonlyArray1<'py, f64>,
    degree: i64,
    n_components: i64,
    sketch: &str,
    complex_weights: bool,
    bias: f64,
    length_scale: f64,
    seed: u64,
    reps: i64,
) -> PyResult<Bound<'py, PyArray1<f64>>> {
    let degree = self::degree(py, degree)?;
    let (kind, nf) = sketch_features(py, sketch, n_components, complex_weights)?;
    let reps = count(py, "reps", reps, 1)?;
    let (x, y) = (x.as_array(), y.as_array());
    let v = ffi::call(py, || {
        pair_estimates(
            kind,
            complex_weights,
            degree,
            nf,
            x,
            y,
            bias,
            length_scale,
            seed,
            reps,
        )
    })?;
    Ok(v.into_pyarray(py))
}

pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("MAX_POLYNOMIAL_DEGREE", MAX_DEGREE)?;
    m.add_function(wrap_pyfunction!(sketch_variance, m)?)?;
    m.add_function(wrap_pyfunction!(_sketch_estimates, m)?)?;
    Ok(())
}
