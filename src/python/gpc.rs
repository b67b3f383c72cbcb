//! Bindings of [`crate::gp::dirichlet`]: the per-class statistics
//! (`DirichletClassStats`, accumulated from feature chunks), the fitted
//! feature-space or exact classifier (`DirichletGPC`: a handle on the Rust
//! struct that pickles by value, nothing refitted on loading) and the
//! expected softmax.

use numpy::{IntoPyArray, PyArray1, PyArray2, PyReadonlyArray1, PyReadonlyArray2};
use pyo3::prelude::*;
use pyo3::types::PyType;

use super::feature_map::PyFeatureMap;
use super::ffi::{self, with_float_view, FloatArray2};
use crate::error::Error;
use crate::gp::dirichlet::optimize::{
    fit_dirichlet_gpc, fit_exact_gpc, FreeHypers, GpcMap, GpcOptimizeConfig,
};
use crate::gp::dirichlet::{expected_softmax as softmax, ClassStats, DirichletGpc, ExactGpc};
use crate::gp::OptimizerConfig;
use crate::progress::Monitor;
use crate::system::available_memory_bytes;
use crate::threads::Parallelism;

type Arr2<'py> = Bound<'py, PyArray2<f64>>;

/// Class codes `0..C` from an int64 array (negative codes refused).
pub(super) fn labels(py: Python<'_>, y: &PyReadonlyArray1<'_, i64>) -> PyResult<Vec<usize>> {
    let codes = y
        .as_array()
        .iter()
        .map(|&k| {
            usize::try_from(k)
                .map_err(|_| Error::invalid("y", format!("class codes must be >= 0, got {k}")))
        })
        .collect::<crate::Result<Vec<_>>>();
    ffi::map_result(py, codes)
}

/// Per-class feature statistics of a Dirichlet GP classifier: for every
/// class the Gram and column sums of its rows' features.
#[pyclass(module = "randfeat_rs._core", name = "DirichletClassStats")]
struct PyClassStats {
    inner: ClassStats,
}

#[pymethods]
impl PyClassStats {
    /// Empty statistics for `n_classes` classes and `n_features` features.
    #[new]
    fn new(py: Python<'_>, n_classes: usize, n_features: usize) -> PyResult<Self> {
        ffi::map_result(
            py,
            crate::stats::FeatureStats::check_size("n_components", n_features, n_classes),
        )?;
        Ok(Self {
            inner: ClassStats::new(n_classes, n_features),
        })
    }

    /// Adds a chunk: features `phi` (float32/float64, `n x D`) and class
    /// codes `y` (int64, `n`, each in `0..n_classes`).
    fn accumulate(
        &mut self,
        py: Python<'_>,
        phi: FloatArray2<'_>,
        y: PyReadonlyArray1<'_, i64>,
    ) -> PyResult<()> {
        let codes = labels(py, &y)?;
        let stats = &mut self.inner;
        with_float_view!(phi, |p| ffi::call(py, || stats.accumulate(
            p,
            &codes,
            Parallelism::Rayon
        )))
    }

    /// The number of rows accumulated.
    #[getter]
    fn n_samples(&self) -> u64 {
        self.inner.n()
    }

    /// Adds the statistics of other rows of the same feature map and
    /// classes (exact: the result equals the statistics of the
    /// concatenated rows).
    fn merge(&mut self, py: Python<'_>, other: PyRef<'_, PyClassStats>) -> PyResult<()> {
        ffi::map_result(py, self.inner.merge(&other.inner))
    }

    /// An independent copy.
    fn copy(&self) -> Self {
        Self {
            inner: self.inner.clone(),
        }
    }

    /// Pickles the statistics by value (see [`ffi::reduce`]).
    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<ffi::Reduced<'py>> {
        ffi::reduce(slf, &slf.borrow().inner)
    }

    /// The statistics of a pickled payload (see [`ffi::from_state`]),
    /// checked class by class, all of one width.
    #[classmethod]
    fn _from_state(cls: &Bound<'_, PyType>, state: &[u8]) -> PyResult<Self> {
        let py = cls.py();
        let inner: ClassStats = ffi::from_state::<Self, _>(py, state)?;
        let d = inner.n_features();
        for stats in &inner.classes {
            ffi::map_result(py, stats.validate())?;
            if stats.n_features() != d {
                return ffi::map_result(
                    py,
                    Err(Error::ShapeMismatch {
                        name: "number of features of a class's statistics",
                        expected: d,
                        got: stats.n_features(),
                    }),
                );
            }
        }
        Ok(Self { inner })
    }
}

/// A fitted Dirichlet GP classifier: in feature space, or with the exact
/// kernel.
#[derive(serde::Serialize, serde::Deserialize)]
enum Model {
    Features(DirichletGpc),
    Exact(ExactGpc),
}

/// A fitted Dirichlet GP classifier (one latent GP per class), in feature
/// space (`fit`) or with the exact Gaussian kernel (`fit_exact`).
#[pyclass(module = "randfeat_rs._core", name = "DirichletGPC", frozen)]
struct PyDirichletGpc {
    inner: Model,
}

#[pymethods]
impl PyDirichletGpc {
    /// Fits every class from per-class feature statistics with
    /// `alpha_epsilon`. `progress`, when given, is called as
    /// `progress(stage, done, total, messages)`; Ctrl-C interrupts the fit
    /// between classes.
    #[staticmethod]
    #[pyo3(signature = (stats, alpha_epsilon, progress=None))]
    fn fit(
        py: Python<'_>,
        stats: PyRef<'_, PyClassStats>,
        alpha_epsilon: f64,
        progress: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let stats = &stats.inner;
        let model = ffi::call_monitored(py, progress, |monitor: &Monitor| {
            DirichletGpc::fit_monitored(stats, alpha_epsilon, Parallelism::Rayon, monitor)
        })?;
        Ok(Self {
            inner: Model::Features(model),
        })
    }

    /// Fits the exact classifier on inputs `x` (`N x d`) with class codes
    /// `y` in `0..n_classes` and the Gaussian kernel of `length_scale` (one
    /// value or one per column) and `kernel_variance`; the hyperparameters
    /// named in `optimize` (`"length_scale"`, `"kernel_variance"`) maximize
    /// the summed class log marginal likelihood from there (`n_restarts`
    /// restarts drawn from `seed`). `progress`, when given, is called as
    /// `progress(stage, done, total, messages)`; Ctrl-C interrupts the fit.
    /// Returns the classifier and the L-BFGS iterations spent.
    #[staticmethod]
    #[pyo3(signature = (x, y, *, n_classes, length_scale, kernel_variance, alpha_epsilon,
                        optimize=Vec::new(), n_restarts=0, seed=0, progress=None))]
    #[allow(clippy::too_many_arguments)]
    fn fit_exact(
        py: Python<'_>,
        x: PyReadonlyArray2<'_, f64>,
        y: PyReadonlyArray1<'_, i64>,
        n_classes: usize,
        length_scale: Vec<f64>,
        kernel_variance: f64,
        alpha_epsilon: f64,
        optimize: Vec<String>,
        n_restarts: usize,
        seed: u64,
        progress: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<(Self, u64)> {
        let codes = labels(py, &y)?;
        let cfg = optimize_config(py, alpha_epsilon, &optimize, n_restarts, seed, 1)?;
        let xv = x.as_array();
        let fit = ffi::call_monitored(py, progress, |monitor: &Monitor| {
            fit_exact_gpc(
                xv,
                &codes,
                n_classes,
                length_scale,
                kernel_variance,
                &cfg,
                available_memory_bytes(),
                Parallelism::Rayon,
                monitor,
            )
        })?;
        Ok((
            Self {
                inner: Model::Exact(fit.model),
            },
            fit.n_iter,
        ))
    }

    /// Fits the feature-space classifier on the features of `features` (a
    /// fitted random Fourier, Maclaurin or Nyström map) with its length
    /// scale (and kernel variance) named in `optimize` fitted by the summed
    /// class log marginal likelihood, the random draw (or the landmarks)
    /// fixed; `length_scale` is the one a Fourier map was drawn at (one
    /// value, or one per input dimension, then fitted per dimension).
    /// Inputs `x` (float64, `N x d`), class codes `y` in `0..n_classes`,
    /// `chunk_size` rows transformed at a time. `progress` as in
    /// `fit_exact`; Ctrl-C interrupts. Returns the classifier, the fitted
    /// length scale(s) and kernel variance, the map at the optimum and the
    /// L-BFGS iterations spent.
    #[staticmethod]
    #[pyo3(signature = (features, x, y, *, n_classes, length_scale, alpha_epsilon, optimize,
                        n_restarts, seed, chunk_size, progress=None))]
    #[allow(clippy::too_many_arguments)]
    fn fit_optimized(
        py: Python<'_>,
        features: PyRef<'_, PyFeatureMap>,
        x: PyReadonlyArray2<'_, f64>,
        y: PyReadonlyArray1<'_, i64>,
        n_classes: usize,
        length_scale: Vec<f64>,
        alpha_epsilon: f64,
        optimize: Vec<String>,
        n_restarts: usize,
        seed: u64,
        chunk_size: usize,
        progress: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<(Self, Vec<f64>, f64, PyFeatureMap, u64)> {
        let codes = labels(py, &y)?;
        let cfg = optimize_config(py, alpha_epsilon, &optimize, n_restarts, seed, chunk_size)?;
        let map = ffi::map_result(py, GpcMap::new(features.inner.clone(), length_scale))?;
        let xv = x.as_array();
        let fit = ffi::call_monitored(py, progress, |monitor: &Monitor| {
            fit_dirichlet_gpc(
                &map,
                xv,
                &codes,
                n_classes,
                &cfg,
                Parallelism::Rayon,
                monitor,
            )
        })?;
        Ok((
            Self {
                inner: Model::Features(fit.model),
            },
            fit.length_scale,
            fit.kernel_variance,
            PyFeatureMap { inner: fit.map },
            fit.n_iter,
        ))
    }

    /// The exact classifier's length scale(s) (one value, or one per input
    /// dimension); None for a feature-space model.
    #[getter]
    fn length_scale<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyArray1<f64>>> {
        match &self.inner {
            Model::Exact(m) => Some(m.kernel.length_scale.clone().into_pyarray(py)),
            Model::Features(_) => None,
        }
    }

    /// The exact classifier's kernel variance; None for a feature-space
    /// model.
    #[getter]
    fn kernel_variance(&self) -> Option<f64> {
        match &self.inner {
            Model::Exact(m) => Some(m.kernel.variance),
            Model::Features(_) => None,
        }
    }

    /// Latent means and variances (`m x C` each): at test features `phi`
    /// (float32/float64, `m x D`) for a feature-space model, at test inputs
    /// (float64, `m x d`) for an exact one.
    fn predict_latent<'py>(
        &self,
        py: Python<'py>,
        x: FloatArray2<'py>,
    ) -> PyResult<(Arr2<'py>, Option<Arr2<'py>>)> {
        let (mean, var) = match (&self.inner, x) {
            (Model::Features(m), x) => with_float_view!(x, |v| ffi::call(py, || m
                .predict_latent(v, true, Parallelism::Rayon)))?,
            (Model::Exact(m), FloatArray2::F64(x)) => {
                let xv = x.as_array();
                ffi::call(py, || m.predict_latent(xv, true, Parallelism::Rayon))?
            }
            (Model::Exact(_), FloatArray2::F32(_)) => {
                return ffi::map_result(
                    py,
                    Err(Error::invalid(
                        "x",
                        "must be float64 for the exact classifier",
                    )),
                )
            }
        };
        Ok((mean.into_pyarray(py), var.map(|v| v.into_pyarray(py))))
    }

    /// The per-class log marginal likelihoods.
    #[getter]
    fn class_lml(&self) -> Vec<f64> {
        let classes = match &self.inner {
            Model::Features(m) => &m.classes,
            Model::Exact(m) => &m.classes,
        };
        classes.iter().map(|c| c.lml).collect()
    }

    /// Pickles the classifier by value (see [`ffi::reduce`]).
    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<ffi::Reduced<'py>> {
        ffi::reduce(slf, &slf.get().inner)
    }

    /// The classifier of a pickled payload (see [`ffi::from_state`]).
    #[classmethod]
    fn _from_state(cls: &Bound<'_, PyType>, state: &[u8]) -> PyResult<Self> {
        Ok(Self {
            inner: ffi::from_state::<Self, _>(cls.py(), state)?,
        })
    }
}

/// The optimizer settings of a classifier fit.
fn optimize_config(
    py: Python<'_>,
    alpha_epsilon: f64,
    optimize: &[String],
    n_restarts: usize,
    seed: u64,
    chunk_rows: usize,
) -> PyResult<GpcOptimizeConfig> {
    let free = ffi::map_result(py, FreeHypers::from_names(optimize))?;
    Ok(GpcOptimizeConfig {
        alpha_epsilon,
        free,
        optimizer: OptimizerConfig {
            n_restarts,
            seed,
            ..OptimizerConfig::default()
        },
        chunk_rows,
    })
}

/// `E[softmax(f)]` (`m x C`) for independent Gaussian latents of means
/// `mean` and variances `var` (`m x C` each), by a fixed quadrature; rows
/// sum to 1.
#[pyfunction]
fn expected_softmax<'py>(
    py: Python<'py>,
    mean: PyReadonlyArray2<'py, f64>,
    var: PyReadonlyArray2<'py, f64>,
) -> PyResult<Arr2<'py>> {
    let (m, v) = (mean.as_array(), var.as_array());
    let p = ffi::call(py, || softmax(m, v, Parallelism::Rayon))?;
    Ok(p.into_pyarray(py))
}

pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyClassStats>()?;
    m.add_class::<PyDirichletGpc>()?;
    m.add_function(wrap_pyfunction!(expected_softmax, m)?)?;
    Ok(())
}
