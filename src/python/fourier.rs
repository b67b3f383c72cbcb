//! Bindings of [`crate::kernels`] and [`crate::fourier`]: the exact kernel
//! matrix and the test hooks of the QMC sampler (the random Fourier and
//! Nyström maps are `_core.FeatureMap`s, fitted by `FeatureMap.fourier` and
//! `FeatureMap.nystroem`).

use numpy::{IntoPyArray, PyArray1, PyArray2, PyReadonlyArray1, PyReadonlyArray2};
use pyo3::prelude::*;

use super::ffi::{self, with_float_view, FloatArray2};
use crate::error::check_finite;
use crate::kernels::{Kernel, StationaryKernel};
use crate::threads::Parallelism;

/// The exact kernel matrix `K[i, j] = k(x_i, y_j)` (float64), for tests and
/// comparisons, at one length scale or one per input dimension. Errors:
/// widths that differ, a non-finite value in `x` or `y`, length scales of
/// another count or not finite and `> 0`, an output larger than the memory
/// available (naming `X`).
#[pyfunction]
fn kernel_matrix<'py>(
    py: Python<'py>,
    x: PyReadonlyArray2<'py, f64>,
    y: PyReadonlyArray2<'py, f64>,
    kernel: &str,
    length_scale: Vec<f64>,
) -> PyResult<Bound<'py, PyArray2<f64>>> {
    let kernel = ffi::map_result(py, Kernel::from_name(kernel))?;
    let (xa, ya) = (x.as_array(), y.as_array());
    let stationary = StationaryKernel {
        kernel,
        length_scale,
        variance: 1.0,
    };
    ffi::call(py, || {
        if xa.ncols() != ya.ncols() {
            return Err(crate::Error::ShapeMismatch {
                name: "number of features of Y",
                expected: xa.ncols(),
                got: ya.ncols(),
            });
        }
        stationary.validate(xa.ncols())?;
        check_finite("X", xa.iter())?;
        check_finite("Y", ya.iter())
    })?;
    ffi::call_with_output(py, "X", xa.nrows(), ya.nrows(), |k| {
        match stationary.length_scale.as_slice() {
            [l] => crate::kernels::kernel_block(xa, ya, kernel, *l, k),
            _ => stationary.cross_into(xa, ya, k, Parallelism::Rayon),
        }
        Ok(())
    })
}

/// The length scale `sqrt(d Var(X) / 2)` of scikit-learn's `gamma="scale"`
/// (1 for data without spread): the default of the estimators whose
/// `length_scale` is "scale".
#[pyfunction]
fn scale_length_scale(py: Python<'_>, x: FloatArray2<'_>) -> PyResult<f64> {
    with_float_view!(x, |v| ffi::call(py, || Ok(
        crate::kernels::scale_length_scale(v)
    )))
}

pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(kernel_matrix, m)?)?;
    m.add_function(wrap_pyfunction!(scale_length_scale, m)?)?;
    m.add_function(wrap_pyfunction!(_sobol_points, m)?)?;
    m.add_function(wrap_pyfunction!(_inverse_normal_cdf, m)?)?;
    Ok(())
}

/// Test hook: the first `n` unscrambled Sobol points in `dim` dimensions
/// (including the origin), float64 `(n, dim)`.
#[pyfunction]
fn _sobol_points<'py>(
    py: Python<'py>,
    n: usize,
    dim: usize,
) -> PyResult<Bound<'py, PyArray2<f64>>> {
    let pts = ffi::call(py, || {
        crate::fourier::qmc::sobol_points::<crate::rng::Rng>(n, dim, None)
    })?;
    let u = ndarray::Array2::from_shape_fn((n, dim), |(i, j)| {
        pts[i * dim + j] as f64 / 4_294_967_296.0
    });
    Ok(u.into_pyarray(py))
}

/// Test hook: Wichura's AS241 inverse normal CDF applied elementwise.
#[pyfunction]
fn _inverse_normal_cdf<'py>(
    py: Python<'py>,
    p: PyReadonlyArray1<'py, f64>,
) -> Bound<'py, PyArray1<f64>> {
    p.as_array()
        .mapv(crate::fourier::qmc::inverse_normal_cdf)
        .into_pyarray(py)
}
