//! Bindings of [`crate::gp::sparse`]: the fitted sparse GP with inducing
//! inputs (VFE or FITC, docs/math/sparse_gp.rst) as a handle
//! (`_core.SparseGp`), fitted by a static method with keyword arguments
//! that map to [`SparseGpConfig`], and pickled by value (nothing is
//! refitted on unpickling).

use ndarray::Array2;
use numpy::{IntoPyArray, PyArray1, PyArray2, PyReadonlyArray1};
use pyo3::prelude::*;
use pyo3::types::{PyAny, PyType};

use super::ffi::{self, with_float_view, FloatArray2};
use super::gp::{parse_optimize, prediction, Prediction, StdKind};
use crate::gp::optimize::{HyperInit, OptimizerConfig};
use crate::gp::sparse::{fit_sparse, InducingInit, Method, SparseGp, SparseGpConfig};
use crate::kernels::Kernel;
use crate::progress::Monitor;
use crate::real::Real as _;
use crate::threads::Parallelism;

/// The rows of a float32 or float64 array as float64 (the sparse GP's
/// solves and sums are float64; float32 converts exactly).
pub(super) fn rows_f64(x: FloatArray2<'_>) -> Array2<f64> {
    with_float_view!(x, |v| v.mapv(|e| e.to_f64_exact()))
}

/// The `inducing` argument: a selection name (`"greedy_variance"`,
/// `"kmeans"`, `"random"`) or the inducing inputs themselves (a 2-D float
/// array, `M x d`).
pub(super) fn inducing_init(py: Python<'_>, inducing: &Bound<'_, PyAny>) -> PyResult<InducingInit> {
    if let Ok(name) = inducing.extract::<String>() {
        return ffi::map_result(py, InducingInit::from_name(&name));
    }
    let z: FloatArray2<'_> = inducing.extract()?;
    Ok(InducingInit::Given(rows_f64(z)))
}

/// A fitted sparse GP (docs/math/sparse_gp.rst), pickled by value.
#[pyclass(name = "SparseGp", module = "randfeat_rs._core", frozen)]
pub(super) struct PySparseGp {
    pub(super) inner: SparseGp,
}

#[pymethods]
impl PySparseGp {
    /// Chooses the inducing inputs, fits the hyperparameters in `optimize`
    /// (and with `optimize_inducing` the inducing inputs) by maximizing
    /// the objective of `method` (VFE's bound or FITC's log marginal
    /// likelihood) from the given values, or the initialization of
    /// docs/math/gp.rst for those that are None, and returns the model at
    /// the optimum (see [`fit_sparse`]). `inducing` is a selection name or
    /// an `M x d` array; `n_inducing` (clamped to the number of rows) is
    /// ignored for an array. `chunk_size` is the rows per chunk of the
    /// passes over the data (None: `2^18 / M`, at least 256). `device`
    /// "gpu" computes the model's statistics at the fitted hyperparameters
    /// on the GPU (VFE only; the optimizer's evaluations stay on the CPU),
    /// "auto" when an adapter is picked, falling back to the CPU when the
    /// float32 statistics fail (see [`SparseGpConfig::device`]).
    /// `progress`,
    /// when given, is called as `progress(stage, done, total, messages)`
    /// while the fit runs.
    #[staticmethod]
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (x, y, *, n_inducing, inducing, method, kernel, length_scale,
                        kernel_variance, noise_variance, ard, optimize, optimize_inducing,
                        n_restarts, max_iter, center_y, chunk_size, seed, device="cpu",
                        progress=None))]
    fn fit(
        py: Python<'_>,
        x: FloatArray2<'_>,
        y: PyReadonlyArray1<'_, f64>,
        n_inducing: usize,
        inducing: &Bound<'_, PyAny>,
        method: &str,
        kernel: &str,
        length_scale: Option<Vec<f64>>,
        kernel_variance: Option<f64>,
        noise_variance: Option<f64>,
        ard: bool,
        optimize: Vec<String>,
        optimize_inducing: bool,
        n_restarts: usize,
        max_iter: u64,
        center_y: bool,
        chunk_size: Option<usize>,
        seed: u64,
        device: &str,
        progress: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let cfg = SparseGpConfig {
            kernel: ffi::map_result(py, Kernel::from_name(kernel))?,
            method: ffi::map_result(py, Method::from_name(method))?,
            n_inducing,
            inducing: inducing_init(py, inducing)?,
            hyper: HyperInit {
                length_scale,
                kernel_variance,
                noise_variance,
                ard,
                optimize: parse_optimize(py, &optimize)?,
            },
            optimize_inducing,
            optimizer: OptimizerConfig {
                n_restarts,
                seed,
                max_iter,
                ..OptimizerConfig::default()
            },
            center: center_y,
            chunk_rows: chunk_size,
            device: ffi::device(py, device)?,
            data_scale: None,
        };
        let x = rows_f64(x);
        let (xv, yv) = (x.view(), y.as_array());
        let inner = ffi::call_monitored(py, progress, |monitor: &Monitor| {
            fit_sparse(xv, yv, &cfg, Parallelism::Rayon, monitor)
        })?;
        Ok(Self { inner })
    }

    /// The length scale(s): one value, or one per input dimension.
    #[getter]
    fn length_scale<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<f64>> {
        self.inner.params.length_scale.clone().into_pyarray(py)
    }

    /// The kernel variance.
    #[getter]
    fn kernel_variance(&self) -> f64 {
        self.inner.params.variance
    }

    /// The noise variance.
    #[getter]
    fn noise_variance(&self) -> f64 {
        self.inner.noise_variance
    }

    /// The inducing inputs `Z` (`M x d`, a copy).
    #[getter]
    fn inducing_points<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray2<f64>> {
        self.inner.inducing.clone().into_pyarray(py)
    }

    /// The jitter added to the diagonal of `K_uu` (0 normally).
    #[getter]
    fn jitter(&self) -> f64 {
        self.inner.jitter()
    }

    /// Whether the model's statistics were computed on the GPU.
    #[getter]
    fn on_gpu(&self) -> bool {
        self.inner.on_gpu
    }

    /// The objective at the fitted parameters, of the centered targets:
    /// VFE's lower bound on the log marginal likelihood, or FITC's log
    /// marginal likelihood.
    #[getter]
    fn log_marginal_likelihood_value(&self) -> f64 {
        self.inner.objective
    }

    /// The training-target mean added back to predictions.
    #[getter]
    fn y_mean(&self) -> f64 {
        self.inner.y_mean
    }

    /// L-BFGS iterations of the fit, over all runs and stages.
    #[getter]
    fn n_iter(&self) -> u64 {
        self.inner.n_iter
    }

    /// Predictive mean at the rows of `x` (float32 or float64) and, with
    /// `std` "latent" or "noisy", the standard deviation of the latent
    /// function or of a noisy observation (docs/math/sparse_gp.rst, section
    /// Prediction).
    #[pyo3(signature = (x, *, std=None))]
    fn predict<'py>(
        &self,
        py: Python<'py>,
        x: FloatArray2<'py>,
        std: Option<&str>,
    ) -> PyResult<Prediction<'py>> {
        let std = StdKind::parse(py, std)?;
        let (gp, x) = (&self.inner, rows_f64(x));
        let xv = x.view();
        let p = ffi::call(py, || gp.predict(xv, std.is_some(), Parallelism::Rayon))?;
        Ok(prediction(py, p, std, gp.noise_variance))
    }

    /// Pickles the GP by value (see [`ffi::reduce`]).
    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<ffi::Reduced<'py>> {
        ffi::reduce(slf, &slf.get().inner)
    }

    /// The GP of a pickled payload (see [`ffi::from_state`]), checked by
    /// [`SparseGp::validate`].
    #[classmethod]
    fn _from_state(cls: &Bound<'_, PyType>, state: &[u8]) -> PyResult<Self> {
        let inner: SparseGp = ffi::from_state::<Self, _>(cls.py(), state)?;
        ffi::map_result(cls.py(), inner.validate())?;
        Ok(Self { inner })
    }
}

/// Registers `SparseGp`.
pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PySparseGp>()
}
