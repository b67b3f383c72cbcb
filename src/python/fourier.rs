//! Bindings of [`crate::fourier`] and [`crate::nystroem`]: the fits, which
//! return the arrays `RandomFourierFeatures` and `NystroemFeatures` store
//! (so the estimators pickle as plain NumPy arrays; their transforms run
//! through `_core.FeatureMap`), and the exact kernel matrix.

use numpy::{IntoPyArray, PyArray1, PyArray2, PyReadonlyArray1, PyReadonlyArray2};
use pyo3::prelude::*;
use pyo3::types::PyAny;

use super::ffi;
use crate::fourier::{FourierConfig, FourierFeatures, Projection, Sampler, Variant};
use crate::kernels::Kernel;
use crate::nystroem::NystroemFeatures;
use crate::real::Real;

/// `(landmark indices, K_mm^{-1/2})` returned by `nystroem_fit`.
type NystroemArrays<'py> = (Bound<'py, PyArray1<i64>>, Bound<'py, PyArray2<f64>>);

type FitArrays<'py> = (
    Bound<'py, PyArray2<f64>>,
    Option<Bound<'py, PyArray1<f64>>>,
    Option<Bound<'py, PyArray2<f64>>>,
);

/// Draws the random parameters of a random Fourier feature map: returns
/// `(frequencies (m, d), phases (m,) or None, sorf_signs (3 blocks, d') or None)`.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn rff_fit<'py>(
    py: Python<'py>,
    n_features: usize,
    n_components: usize,
    kernel: &str,
    length_scale: f64,
    kernel_variance: f64,
    sampler: &str,
    variant: &str,
    seed: u64,
) -> PyResult<FitArrays<'py>> {
    let cfg = ffi::map_result(
        py,
        (|| {
            Ok(FourierConfig {
                n_components,
                kernel: Kernel::from_name(kernel)?,
                length_scale,
                kernel_variance,
                sampler: Sampler::from_name(sampler)?,
                variant: Variant::from_name(variant)?,
            })
        })(),
    )?;
    let (w, b, signs) = ffi::call(py, || {
        let map = FourierFeatures::fit(&cfg, n_features, seed)?;
        let signs = match &map.projection {
            Projection::Structured { signs, .. } => Some(signs.clone()),
            Projection::Dense(_) => None,
        };
        Ok((map.frequencies(), map.phases.clone(), signs))
    })?;
    Ok((
        w.into_pyarray(py),
        b.map(|b| b.into_pyarray(py)),
        signs.map(|s| s.into_pyarray(py)),
    ))
}

fn nystroem_fit_typed<'py, T: Real + numpy::Element>(
    py: Python<'py>,
    x: &Bound<'py, PyAny>,
    n_components: usize,
    kernel: Kernel,
    length_scale: f64,
    seed: u64,
) -> PyResult<NystroemArrays<'py>> {
    let x: PyReadonlyArray2<'py, T> = x.extract()?;
    let src = x.as_array();
    let (map, idx) = ffi::call(py, || {
        NystroemFeatures::fit(src, n_components, kernel, length_scale, seed)
    })?;
    let idx: Vec<i64> = idx.into_iter().map(|i| i as i64).collect();
    Ok((idx.into_pyarray(py), map.normalization.into_pyarray(py)))
}

/// Fits Nyström features: returns `(landmark row indices (m,), K_mm^{-1/2} (m, m))`.
#[pyfunction]
fn nystroem_fit<'py>(
    py: Python<'py>,
    x: &Bound<'py, PyAny>,
    n_components: usize,
    kernel: &str,
    length_scale: f64,
    seed: u64,
) -> PyResult<NystroemArrays<'py>> {
    let kernel = ffi::map_result(py, Kernel::from_name(kernel))?;
    if x.downcast::<PyArray2<f32>>().is_ok() {
        nystroem_fit_typed::<f32>(py, x, n_components, kernel, length_scale, seed)
    } else {
        nystroem_fit_typed::<f64>(py, x, n_components, kernel, length_scale, seed)
    }
}

/// The exact kernel matrix `K[i, j] = k(x_i, y_j)` (float64), for tests and
/// comparisons.
#[pyfunction]
fn kernel_matrix<'py>(
    py: Python<'py>,
    x: PyReadonlyArray2<'py, f64>,
    y: PyReadonlyArray2<'py, f64>,
    kernel: &str,
    length_scale: f64,
) -> PyResult<Bound<'py, PyArray2<f64>>> {
    let kernel = ffi::map_result(py, Kernel::from_name(kernel))?;
    let (xa, ya) = (x.as_array(), y.as_array());
    let k = ffi::call(py, || {
        if xa.ncols() != ya.ncols() {
            return Err(crate::Error::ShapeMismatch {
                name: "number of features of Y",
                expected: xa.ncols(),
                got: ya.ncols(),
            });
        }
        Ok(crate::kernels::kernel_matrix(xa, ya, kernel, length_scale))
    })?;
    Ok(k.into_pyarray(py))
}

pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(rff_fit, m)?)?;
    m.add_function(wrap_pyfunction!(nystroem_fit, m)?)?;
    m.add_function(wrap_pyfunction!(kernel_matrix, m)?)?;
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
