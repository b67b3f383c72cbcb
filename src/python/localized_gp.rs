//! Bindings of [`crate::gp::localized`]: the fitted localized Maclaurin GP
//! as a handle (`_core.LocalizedMaclaurinGp`), fitted with a given
//! threshold or with the threshold chosen in Rust ("auto",
//! [`ThresholdSearch`]), and pickled by value (the centroid GPs built so
//! far included; nothing is refitted on unpickling).

use numpy::{IntoPyArray, PyArray1, PyArray2, PyReadonlyArray1};
use pyo3::prelude::*;
use pyo3::types::{PyAny, PyType};

use super::ffi::{self, with_float_view, FloatArray2};
use super::gp::{prediction, StdKind};
use crate::error::Error;
use crate::gp::localized::{
    LocalizedConfig, LocalizedMaclaurinGp, ThresholdChoice, ThresholdSearch,
};
use crate::gpu::Device;
use crate::maclaurin::map::MaclaurinConfig;
use crate::maclaurin::MaclaurinKernel;
use crate::progress::Monitor;
use crate::sketch::SketchKind;
use crate::threads::Parallelism;

/// A fitted model and, when its threshold was chosen by the search, the
/// search's outcome.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct LocalizedState {
    gp: LocalizedMaclaurinGp,
    search: Option<ThresholdChoice>,
}

/// A fitted localized Maclaurin GP (docs/math/localized.rst), pickled by value.
#[pyclass(name = "LocalizedMaclaurinGp", module = "randfeat_rs._core", frozen)]
pub(crate) struct PyLocalizedGp {
    inner: LocalizedState,
}

/// The `threshold` argument: `θ/l`, None, or "auto" (chosen by the
/// default [`ThresholdSearch`]).
enum Threshold {
    Fixed(Option<f64>),
    Auto,
}

impl Threshold {
    fn extract(arg: &Bound<'_, PyAny>) -> PyResult<Self> {
        if arg.is_none() {
            return Ok(Self::Fixed(None));
        }
        if let Ok(s) = arg.extract::<String>() {
            if s == "auto" {
                return Ok(Self::Auto);
            }
            let reason = format!("expected a number > 0, None or \"auto\", got {s:?}");
            return Err(ffi::to_pyerr(arg.py(), Error::invalid("threshold", reason)));
        }
        Ok(Self::Fixed(Some(arg.extract::<f64>()?)))
    }
}

/// `(mean, std or None, GPs built, build seconds, prediction seconds)`.
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
    /// float64) and `y` (float64). `threshold` is `θ/l`, None, or "auto":
    /// chosen among `(one cluster, 4, 2, 1, 0.5, 0.25)` by the default
    /// [`ThresholdSearch`] (the best 5-fold cross-validated log predictive
    /// density, folds drawn from `seed`), then the model is fitted on all
    /// rows. `device` "gpu" accumulates the centroid
    /// statistics on the GPU ("auto" is resolved by the caller; here it
    /// means the CPU). `progress`, when given, is called as
    /// `progress(stage, done, total, messages)` while it runs.
    #[staticmethod]
    #[pyo3(signature = (x, y, *, n_components, length_scale, kernel_variance, noise_variance,
                        threshold, n_clusters, sketch, complex_weights, max_degree, n_subsample,
                        tol, center_y, seed, device="cpu", progress=None))]
    #[allow(clippy::too_many_arguments)]
    fn fit(
        py: Python<'_>,
        x: FloatArray2<'_>,
        y: PyReadonlyArray1<'_, f64>,
        n_components: usize,
        length_scale: f64,
        kernel_variance: f64,
        noise_variance: f64,
        threshold: &Bound<'_, PyAny>,
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
        let threshold = Threshold::extract(threshold)?;
        let device = match ffi::device(py, device)? {
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
        let mut cfg = LocalizedConfig {
            map,
            noise_variance,
            threshold: None,
            n_clusters,
            tol,
            center_y,
            device,
        };
        let yv = y.as_array();
        let inner = with_float_view!(x, |v| ffi::call_monitored(py, progress, |m: &Monitor| {
            let par = Parallelism::Rayon;
            let search = match threshold {
                Threshold::Fixed(t) => {
                    cfg.threshold = t;
                    None
                }
                Threshold::Auto => {
                    let choice = ThresholdSearch::default().run(v, yv, &cfg, seed, par, m)?;
                    cfg.threshold = choice.best;
                    Some(choice)
                }
            };
            let gp = LocalizedMaclaurinGp::fit(v, yv, &cfg, seed, par, m)?;
            Ok(LocalizedState { gp, search })
        }))?;
        Ok(Self { inner })
    }

    /// The centroids (`n_clusters × d`; row 0 is the training mean).
    #[getter]
    fn centroids<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray2<f64>> {
        self.inner.gp.centroids().to_owned().into_pyarray(py)
    }

    /// Features per degree (index = degree) of the shared map.
    #[getter]
    fn allocation<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<i64>> {
        let counts: Vec<i64> = self
            .inner
            .gp
            .map()
            .allocation()
            .iter()
            .map(|&c| c as i64)
            .collect();
        counts.into_pyarray(py)
    }

    /// Truncation degree `p` of the shared map.
    #[getter]
    fn truncation_degree(&self) -> u32 {
        self.inner.gp.map().degree()
    }

    /// The target mean added back to predictions.
    #[getter]
    fn y_mean(&self) -> f64 {
        self.inner.gp.y_mean()
    }

    /// The clustering threshold `θ/l` the model was fitted with (None: only
    /// `n_clusters` bounds the clustering, or one cluster).
    #[getter]
    fn threshold(&self) -> Option<f64> {
        self.inner.gp.config().threshold
    }

    /// With `threshold="auto"`: every candidate `θ/l` (None: one cluster)
    /// with its score (the mean leave-one-out KL divergence to the exact
    /// GP), in grid order; None otherwise.
    #[getter]
    fn threshold_scores(&self) -> Option<Vec<(Option<f64>, f64)>> {
        self.inner.search.as_ref().map(|c| c.scores.clone())
    }

    /// With `threshold="auto"`: the standard error of every candidate's
    /// score difference to the best score, in grid order; None otherwise.
    #[getter]
    fn threshold_std_errors(&self) -> Option<Vec<f64>> {
        self.inner.search.as_ref().map(|c| c.std_errors.clone())
    }

    /// With `threshold="auto"`: the name of the criterion that scored the
    /// candidates; None otherwise.
    #[getter]
    fn threshold_criterion(&self) -> Option<String> {
        self.inner.search.as_ref().map(|c| c.criterion.name())
    }

    /// `(allocation seconds, clustering seconds)` of the fit.
    #[getter]
    fn timings(&self) -> (f64, f64) {
        let t = self.inner.gp.timings();
        (t.allocation, t.clustering)
    }

    /// Squared distance beyond which training rows are skipped (inf: none).
    #[getter]
    fn cutoff_sq(&self) -> f64 {
        self.inner.gp.cutoff_sq()
    }

    /// Builds every centroid's GP now (they are otherwise built on first
    /// use); returns how many were built. `progress` as in `fit`.
    #[pyo3(signature = (progress=None))]
    fn build_all(&self, py: Python<'_>, progress: Option<&Bound<'_, PyAny>>) -> PyResult<usize> {
        let gp = &self.inner.gp;
        ffi::call_monitored(py, progress, |monitor: &Monitor| {
            gp.build_all(Parallelism::Rayon, monitor)
        })
    }

    /// Predicts `x` (float32 or float64): `(mean, std or None, GPs built,
    /// build seconds, prediction seconds)`, the standard deviation of the
    /// latent function (`std="latent"`) or of a noisy observation
    /// (`std="noisy"`); `at_test_points` centers a GP at every test point.
    /// `progress` as in `fit`.
    #[pyo3(signature = (x, *, std=None, at_test_points=false, progress=None))]
    fn predict<'py>(
        &self,
        py: Python<'py>,
        x: FloatArray2<'py>,
        std: Option<&str>,
        at_test_points: bool,
        progress: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Prediction<'py>> {
        let std = StdKind::parse(py, std)?;
        let (gp, want_var) = (&self.inner.gp, std.is_some());
        let p = with_float_view!(x, |v| ffi::call_monitored(py, progress, |m: &Monitor| {
            if at_test_points {
                gp.predict_at_test_points(v, want_var, Parallelism::Rayon, m)
            } else {
                gp.predict(v, want_var, Parallelism::Rayon, m)
            }
        }))?;
        let noise = gp.config().noise_variance;
        let (mean, std) = prediction(py, (p.mean, p.var), std, noise);
        Ok((mean, std, p.n_built, p.build_seconds, p.predict_seconds))
    }

    /// Pickles the model by value (see [`ffi::reduce`]).
    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<ffi::Reduced<'py>> {
        ffi::reduce(slf, &slf.get().inner)
    }

    /// The model of a pickled payload (see [`ffi::from_state`]).
    #[classmethod]
    fn _from_state(cls: &Bound<'_, PyType>, state: &[u8]) -> PyResult<Self> {
        Ok(Self {
            inner: ffi::from_state::<Self, _>(cls.py(), state)?,
        })
    }
}

pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyLocalizedGp>()?;
    Ok(())
}
