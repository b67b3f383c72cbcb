//! Bindings of [`crate::sketch`]: the fitted `PolySketch` class, the
//! closed-form `sketch_variance`, and the Monte Carlo helper used by tests.

use ndarray::s;
use numpy::{IntoPyArray, PyArray1, PyReadonlyArray1, PyReadonlyArray2, PyReadwriteArray2};
use pyo3::prelude::*;
use pyo3::types::{PyAny, PyDict};

use super::ffi;
use crate::error::Error;
use crate::real::Real;
use crate::sketch::estimates::pair_estimates;
use crate::sketch::variance::polynomial_kernel_variance;
use crate::sketch::{polynomial_features_into, PolySketch, SketchKind, SketchParams};
use crate::threads::Parallelism;

fn count(py: Python<'_>, name: &'static str, v: i64, min: i64) -> PyResult<usize> {
    if v < min {
        return Err(ffi::to_pyerr(
            py,
            Error::invalid(name, format!("must be >= {min}, got {v}")),
        ));
    }
    usize::try_from(v).map_err(|_| ffi::to_pyerr(py, Error::invalid(name, "too large")))
}

fn degree(py: Python<'_>, v: i64) -> PyResult<u32> {
    let d = count(py, "degree", v, 1)?;
    u32::try_from(d).map_err(|_| ffi::to_pyerr(py, Error::invalid("degree", "too large")))
}

/// A fitted polynomial sketch (ALGORITHMS.md 2.2–2.4): its random
/// parameters, drawn from `seed`, and a transform.
#[pyclass(name = "PolySketch", module = "randfeat_rs._core", frozen)]
pub(super) struct PyPolySketch {
    pub(super) inner: PolySketch,
}

fn transform_typed<T: Real + numpy::Element>(
    py: Python<'_>,
    sk: &PolySketch,
    x: &Bound<'_, PyAny>,
    out: &Bound<'_, PyAny>,
    bias: f64,
    length_scale: f64,
) -> PyResult<()> {
    let x: PyReadonlyArray2<'_, T> = x.extract()?;
    let mut out: PyReadwriteArray2<'_, T> = out.extract()?;
    let src = x.as_array();
    let mut dst = out.as_array_mut();
    // The ranges below slice `out` by the rows of `x`.
    ffi::map_result(
        py,
        Error::check_out_shape((src.nrows(), dst.ncols()), dst.dim()),
    )?;
    // Per output column, one projection of the input per degree.
    let row_flops = (dst.ncols() * 2 * src.ncols() * sk.degree() as usize) as f64;
    ffi::call_rows(py, src.nrows(), row_flops, None, |r| {
        polynomial_features_into(
            sk,
            src.slice(s![r.clone(), ..]),
            bias,
            length_scale,
            dst.slice_mut(s![r, ..]),
            Parallelism::Rayon,
        )
    })
}

#[pymethods]
impl PyPolySketch {
    /// Draws a sketch: `kind` is "gaussian", "rademacher", "tensor_srht" or
    /// "tensor_sketch"; `dim` the (augmented) input dimension.
    #[new]
    #[pyo3(signature = (kind, complex, degree, dim, n_features, seed))]
    fn new(
        py: Python<'_>,
        kind: &str,
        complex: bool,
        degree: i64,
        dim: i64,
        n_features: i64,
        seed: u64,
    ) -> PyResult<Self> {
        let kind = ffi::map_result(py, SketchKind::parse(kind))?;
        let degree = self::degree(py, degree)?;
        let dim = count(py, "dim", dim, 1)?;
        let nf = count(py, "n_components", n_features, 1)?;
        let inner = ffi::call(py, || {
            PolySketch::draw(
                kind,
                complex,
                degree,
                dim,
                nf,
                &mut crate::rng::seeded(seed),
            )
        })?;
        Ok(Self { inner })
    }

    /// Output columns (n_features, or 2 * n_features for complex sketches).
    #[getter]
    fn width(&self) -> usize {
        self.inner.width()
    }

    /// The (augmented) input dimension.
    #[getter]
    fn dim(&self) -> usize {
        self.inner.dim()
    }

    /// Writes the features of `(x.y / l^2 + c)^n` for the rows of `x` into
    /// `out` (shape (n, width), same dtype as `x`, rows contiguous).
    #[pyo3(signature = (x, out, bias, length_scale))]
    fn transform(
        &self,
        py: Python<'_>,
        x: &Bound<'_, PyAny>,
        out: &Bound<'_, PyAny>,
        bias: f64,
        length_scale: f64,
    ) -> PyResult<()> {
        if x.downcast::<numpy::PyArray2<f32>>().is_ok() {
            transform_typed::<f32>(py, &self.inner, x, out, bias, length_scale)
        } else {
            transform_typed::<f64>(py, &self.inner, x, out, bias, length_scale)
        }
    }

    /// The random parameters as a dict of NumPy arrays.
    fn params<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        let n = self.inner.degree() as usize;
        match self.inner.params() {
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
                let codes =
                    ndarray::Array1::from(codes.to_vec()).into_shape_with_order((b, n, d_pad));
                let perms =
                    ndarray::Array1::from(perms.to_vec()).into_shape_with_order((b, n, d_pad));
                let (Ok(codes), Ok(perms)) = (codes, perms) else {
                    return Err(ffi::to_pyerr(py, Error::Internal("parameter shape".into())));
                };
                d.set_item("sign_codes", codes.into_pyarray(py))?;
                d.set_item("permutations", perms.into_pyarray(py))?;
            }
            SketchParams::Count { hashes, negative } => {
                let dim = self.inner.dim();
                let h = ndarray::Array1::from(hashes.to_vec()).into_shape_with_order((n, dim));
                let s = ndarray::Array1::from_iter(
                    negative.iter().map(|&ng| if ng { -1i8 } else { 1 }),
                )
                .into_shape_with_order((n, dim));
                let (Ok(h), Ok(s)) = (h, s) else {
                    return Err(ffi::to_pyerr(py, Error::Internal("parameter shape".into())));
                };
                d.set_item("hashes", h.into_pyarray(py))?;
                d.set_item("signs", s.into_pyarray(py))?;
            }
        }
        Ok(d)
    }
}

/// Real-part variance of the estimate of `(x.y / l^2 + c)^n` with
/// `n_features` (real or complex) sketch features (ALGORITHMS.md 2.5).
#[pyfunction]
#[pyo3(signature = (x, y, degree, n_features, sketch, complex, bias, length_scale))]
#[allow(clippy::too_many_arguments)]
fn sketch_variance(
    py: Python<'_>,
    x: PyReadonlyArray1<'_, f64>,
    y: PyReadonlyArray1<'_, f64>,
    degree: i64,
    n_features: i64,
    sketch: &str,
    complex: bool,
    bias: f64,
    length_scale: f64,
) -> PyResult<f64> {
    let kind = ffi::map_result(py, SketchKind::parse(sketch))?;
    let degree = self::degree(py, degree)?;
    let nf = count(py, "n_components", n_features, 1)?;
    let (x, y) = (x.as_array().to_vec(), y.as_array().to_vec());
    ffi::call(py, || {
        polynomial_kernel_variance(kind, complex, degree, nf, &x, &y, bias, length_scale)
    })
}

/// Test helper: the estimates of one pair under `reps` independent sketches
/// (sketch `r` from substream `r` of `seed`).
#[pyfunction]
#[pyo3(signature = (x, y, degree, n_features, sketch, complex, bias, length_scale, seed, reps))]
#[allow(clippy::too_many_arguments)]
fn _sketch_estimates<'py>(
    py: Python<'py>,
    x: PyReadonlyArray1<'py, f64>,
    y: PyReadonlyArray1<'py, f64>,
    degree: i64,
    n_features: i64,
    sketch: &str,
    complex: bool,
    bias: f64,
    length_scale: f64,
    seed: u64,
    reps: i64,
) -> PyResult<Bound<'py, PyArray1<f64>>> {
    let kind = ffi::map_result(py, SketchKind::parse(sketch))?;
    let degree = self::degree(py, degree)?;
    let nf = count(py, "n_components", n_features, 1)?;
    let reps = count(py, "reps", reps, 1)?;
    let (x, y) = (x.as_array(), y.as_array());
    let v = ffi::call(py, || {
        pair_estimates(
            kind,
            complex,
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
    m.add_class::<PyPolySketch>()?;
    m.add_function(wrap_pyfunction!(sketch_variance, m)?)?;
    m.add_function(wrap_pyfunction!(_sketch_estimates, m)?)?;
    Ok(())
}
