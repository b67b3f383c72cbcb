//! Bindings of [`crate::gp::dirichlet::sparse`]: the Dirichlet GP
//! classifier on the inducing-point model (`SparseDirichletGPC`, a handle
//! on the Rust struct that pickles by value, nothing refitted on loading),
//! fitted by a static method with keyword arguments that map to
//! [`SparseGpcConfig`].

use numpy::{IntoPyArray, PyArray1, PyArray2, PyReadonlyArray1};
use pyo3::prelude::*;
use pyo3::types::{PyAny, PyType};

use super::ffi::{self, FloatArray2};
use super::gpc::labels;
use super::sparse_gp::{inducing_init, rows_f64};
use crate::gp::dirichlet::optimize::FreeHypers;
use crate::gp::dirichlet::sparse_optimize::fit_sparse_gpc;
use crate::gp::dirichlet::{SparseGpc, SparseGpcConfig};
use crate::gp::OptimizerConfig;
use crate::kernels::{Kernel, StationaryKernel};
use crate::progress::Monitor;
use crate::threads::Parallelism;

type Arr2<'py> = Bound<'py, PyArray2<f64>>;

/// A fitted Dirichlet GP classifier on the inducing-point model
/// (docs/math/classification.rst, "Inducing points"), pickled by value.
#[pyclass(module = "randfeat_rs._core", name = "SparseDirichletGPC", frozen)]
struct PySparseGpc {
    inner: SparseGpc,
}

#[pymethods]
impl PySparseGpc {
    /// Fits every class on inputs `x` (float32/float64, `N x d`) with class
    /// codes `y` in `0..n_classes`: the inducing inputs (`inducing`: a
    /// selection name, "greedy_variance", "kmeans" or "random", drawn from
    /// `seed`, or an `M x d` array; `n_inducing` clamped to the number of
    /// rows, ignored for an array) chosen with the kernel `kernel` of
    /// `length_scale` (one value or one per column) and `kernel_variance`,
    /// then one pass of the per-class statistics in chunks of `chunk_size`
    /// rows (None: `2^18 / M`, at least 256) and a VFE solve per class. The
    /// hyperparameters named in `optimize` (`"length_scale"`,
    /// `"kernel_variance"`) maximize the summed bound from there, `Z` fixed
    /// (`n_restarts` restarts drawn from `seed`). `progress`, when given, is
    /// called as `progress(stage, done, total, messages)`; Ctrl-C interrupts
    /// the fit. Returns the classifier and the L-BFGS iterations spent.
    #[staticmethod]
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (x, y, *, n_classes, n_inducing, inducing, kernel, length_scale,
                        kernel_variance, alpha_epsilon, chunk_size, seed, optimize=Vec::new(),
                        n_restarts=0, progress=None))]
    fn fit(
        py: Python<'_>,
        x: FloatArray2<'_>,
        y: PyReadonlyArray1<'_, i64>,
        n_classes: usize,
        n_inducing: usize,
        inducing: &Bound<'_, PyAny>,
        kernel: &str,
        length_scale: Vec<f64>,
        kernel_variance: f64,
        alpha_epsilon: f64,
        chunk_size: Option<usize>,
        seed: u64,
        optimize: Vec<String>,
        n_restarts: usize,
        progress: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<(Self, u64)> {
        let free = ffi::map_result(py, FreeHypers::from_names(&optimize))?;
        let optimizer = OptimizerConfig {
            n_restarts,
            seed,
            ..OptimizerConfig::default()
        };
        let codes = labels(py, &y)?;
        let cfg = SparseGpcConfig {
            kernel: StationaryKernel {
                kernel: ffi::map_result(py, Kernel::from_name(kernel))?,
                length_scale,
                variance: kernel_variance,
            },
            n_inducing,
            inducing: inducing_init(py, inducing)?,
            alpha_epsilon,
            seed,
            chunk_rows: chunk_size,
        };
        let x = rows_f64(x);
        let xv = x.view();
        let (inner, n_iter) = ffi::call_monitored(py, progress, |monitor: &Monitor| {
            fit_sparse_gpc(
                xv,
                &codes,
                n_classes,
                &cfg,
                free,
                &optimizer,
                Parallelism::Rayon,
                monitor,
            )
        })?;
        Ok((Self { inner }, n_iter))
    }

    /// Latent means and variances (`m x C` each) at the rows of `x`
    /// (float32/float64, `m x d`).
    fn predict_latent<'py>(
        &self,
        py: Python<'py>,
        x: FloatArray2<'py>,
    ) -> PyResult<(Arr2<'py>, Option<Arr2<'py>>)> {
        let (gp, x) = (&self.inner, rows_f64(x));
        let xv = x.view();
        let (mean, var) = ffi::call(py, || gp.predict_latent(xv, true, Parallelism::Rayon))?;
        Ok((mean.into_pyarray(py), var.map(|v| v.into_pyarray(py))))
    }

    /// The per-class VFE bounds (each at most the class's exact log
    /// marginal likelihood).
    #[getter]
    fn class_lml(&self) -> Vec<f64> {
        self.inner.classes.iter().map(|c| c.bound).collect()
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

    /// The inducing inputs `Z` (`M x d`, a copy).
    #[getter]
    fn inducing_points<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray2<f64>> {
        self.inner.inducing.clone().into_pyarray(py)
    }

    /// The jitter added to the diagonal of `K_uu` (0 normally).
    #[getter]
    fn jitter(&self) -> f64 {
        self.inner.chol_uu.jitter()
    }

    /// Pickles the classifier by value (see [`ffi::reduce`]).
    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<ffi::Reduced<'py>> {
        ffi::reduce(slf, &slf.get().inner)
    }

    /// The classifier of a pickled payload (see [`ffi::from_state`]),
    /// checked by [`SparseGpc::validate`].
    #[classmethod]
    fn _from_state(cls: &Bound<'_, PyType>, state: &[u8]) -> PyResult<Self> {
        let inner: SparseGpc = ffi::from_state::<Self, _>(cls.py(), state)?;
        ffi::map_result(cls.py(), inner.validate())?;
        Ok(Self { inner })
    }
}

/// Registers `SparseDirichletGPC`.
pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PySparseGpc>()
}
