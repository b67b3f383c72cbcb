//! Bindings of [`crate::gp::localized`]: the fitted localized Maclaurin GP
//! as an opaque handle (`_core.LocalizedMaclaurinGp`). Its state is a
//! deterministic function of the training data, the settings and the seed,
//! so the Python estimator pickles those and fits again on unpickling.

use numpy::{IntoPyArray, PyArray1, PyArray2, PyReadonlyArray1, PyReadonlyArray2};
use pyo3::prelude::*;
use pyo3::types::PyAny;

use super::ffi;
use crate::gp::localized::{LocalizedConfig, LocalizedMaclaurinGp, LocalizedPrediction};
use crate::gpu::Device;
use crate::maclaurin::map::MaclaurinConfig;
use crate::maclaurin::MaclaurinKernel;
use crate::progress::Monitor;
use crate::real::Real;
use crate::sketch::SketchKind;
use crate::threads::Parallelism;

/// A fitted localized Maclaurin GP (ALGORITHMS.md 8).
#[pyclass(name = "LocalizedMaclaurinGp", module = "randfeat_rs._core", frozen)]
pub(crate) struct PyLocalizedGp {
    inner: LocalizedMaclaurinGp,
}

fn is_f32(x: &Bound<'_, PyAny>) -> bool {
    x.downcast::<PyArray2<f32>>().is_ok()
}

fn fit_typed<T: Real + numpy::Element>(
    py: Python<'_>,
    x: &Bound<'_, PyAny>,
    y: PyReadonlyArray1<'_, f64>,
    cfg: &LocalizedConfig,
    seed: u64,
    progress: Option<&Bound<'_, PyAny>>,
) -> PyResult<LocalizedMaclaurinGp> {
    let x: PyReadonlyArray2<'_, T> = x.extract()?;
    let (xv, yv) = (x.as_array(), y.as_array());
    ffi::call_monitored(py, progress, |monitor: &Monitor| {
        LocalizedMaclaurinGp::fit(xv, yv, cfg, seed, Parallelism::Rayon, monitor)
    })
}

fn predict_typed<T: Real + numpy::Element>(
    py: Python<'_>,
    gp: &LocalizedMaclaurinGp,
    x: &Bound<'_, PyAny>,
    want_var: bool,
    at_test_points: bool,
    progress: Option<&Bound<'_, PyAny>>,
) -> PyResult<LocalizedPrediction> {
    let x: PyReadonlyArray2<'_, T> = x.extract()?;
    let xv = x.as_array();
    ffi::call_monitored(py, progress, |monitor: &Monitor| {
        if at_test_points {
            gp.predict_at_test_points(xv, want_var, Parallelism::Rayon, monitor)
        } else {
            gp.predict(xv, want_var, Parallelism::Rayon, monitor)
        }
    })
}

type Prediction<'py> = (
    Bound<'py, PyArray1<f64>>,
    Option<Bound<'py, PyArray1<f64>>>,
    usize,
    f64,
    f64,
);

#[pymethods]
impl PyLocalizedGp {
    /// Fits (allocation, random weights, clustering) on `x` (float32 or
    /// float64, 2-D, C order) and `y` (float64). `threshold` is `θ/l`.
    /// `progress`, when given, is called as `progress(stage, done, total,
    /// messages)` while it runs.
    #[staticmethod]
    #[pyo3(signature = (x, y, n_components, length_scale, kernel_variance, noise_variance,
                        threshold, n_clusters, sketch, complex_weights, max_degree, n_subsample,
                        tol, center_y, seed, device="cpu", progress=None))]
    #[allow(clippy::too_many_arguments)]
    fn fit(
        py: Python<'_>,
        x: &Bound<'_, PyAny>,
        y: PyReadonlyArray1<'_, f64>,
        n_components: usize,
        length_scale: f64,
        kernel_variance: f64,
        noise_variance: f64,
        threshold: Option<f64>,
        n_clusters: Option<usize>,
        sketch: &str,
        complex_weights: bool,
        max_degree: u32,
        n_subsample: usize,
        tol: f64,
        center_y: bool,
        seed: u64,
        device: &str,
        progress: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        // "gpu" accumulates the per-centroid statistics on the GPU; the
        // caller resolves "auto" first ("auto" here means the CPU).
        let device = match ffi::map_result(py, Device::parse("device", device))? {
            Device::Gpu => Device::Gpu,
            _ => Device::Cpu,
        };
        let sketch = ffi::map_result(py, SketchKind::parse(sketch))?;
        let mut map = MaclaurinConfig::new(MaclaurinKernel::Gaussian, n_components);
        map.length_scale = length_scale;
        map.kernel_variance = kernel_variance;
        map.sketch = sketch;
        map.complex = complex_weights;
        map.max_degree = max_degree;
        map.min_degree = map.min_degree.min(max_degree);
        map.n_subsample = n_subsample;
        let cfg = LocalizedConfig {
            map,
            noise_variance,
            threshold,
            n_clusters,
            tol,
            center_y,
            device,
        };
        let inner = if is_f32(x) {
            fit_typed::<f32>(py, x, y, &cfg, seed, progress)?
        } else {
            fit_typed::<f64>(py, x, y, &cfg, seed, progress)?
        };
        Ok(Self { inner })
    }

    /// The centroids (`n_clusters × d`; row 0 is the training mean).
    #[getter]
    fn centroids<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray2<f64>> {
        self.inner.centroids().to_owned().into_pyarray(py)
    }

    /// Features per degree (index = degree) of the shared map.
    #[getter]
    fn allocation(&self) -> Vec<usize> {
        self.inner.map().allocation().to_vec()
    }

    /// Truncation degree `p` of the shared map.
    #[getter]
    fn degree(&self) -> u32 {
        self.inner.map().degree()
    }

    /// The target mean added back to predictions.
    #[getter]
    fn y_mean(&self) -> f64 {
        self.inner.y_mean()
    }

    /// `(allocation seconds, clustering seconds)` of the fit.
    #[getter]
    fn timings(&self) -> (f64, f64) {
        let t = self.inner.timings();
        (t.allocation, t.clustering)
    }

    /// Squared distance beyond which training rows are skipped (inf: none).
    #[getter]
    fn cutoff_sq(&self) -> f64 {
        self.inner.cutoff_sq()
    }

    /// Builds every centroid's GP now (they are otherwise built on first
    /// use); returns how many were built. `progress` as in `fit`.
    #[pyo3(signature = (progress=None))]
    fn build_all(&self, py: Python<'_>, progress: Option<&Bound<'_, PyAny>>) -> PyResult<usize> {
        ffi::call_monitored(py, progress, |monitor: &Monitor| {
            self.inner.build_all(Parallelism::Rayon, monitor)
        })
    }

    /// Predicts `x` (float32 or float64): `(mean, latent variance or None,
    /// GPs built, build seconds, prediction seconds)`; `at_test_points`
    /// centers a GP at every test point. `progress` as in `fit`.
    #[pyo3(signature = (x, return_var, at_test_points, progress=None))]
    fn predict<'py>(
        &self,
        py: Python<'py>,
        x: &Bound<'py, PyAny>,
        return_var: bool,
        at_test_points: bool,
        progress: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Prediction<'py>> {
        let gp = &self.inner;
        let p = if is_f32(x) {
            predict_typed::<f32>(py, gp, x, return_var, at_test_points, progress)?
        } else {
            predict_typed::<f64>(py, gp, x, return_var, at_test_points, progress)?
        };
        Ok((
            p.mean.into_pyarray(py),
            p.var.map(|v| v.into_pyarray(py)),
            p.n_built,
            p.build_seconds,
            p.predict_seconds,
        ))
    }
}

pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyLocalizedGp>()?;
    Ok(())
}
