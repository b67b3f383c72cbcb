//! Bindings of [`crate::gp`]: the exact GP (fit, predict, LML with
//! gradient), the feature-space sufficient statistics (a class that
//! accumulates row chunks and merges), the feature-space prediction, and the
//! metrics. Fitted state travels as NumPy arrays (the Python estimators
//! store them), so every call here is stateless except `FeatureStats`.

use ndarray::Array1;
use numpy::{IntoPyArray, PyArray1, PyArray2, PyReadonlyArray1, PyReadonlyArray2};
use pyo3::prelude::*;
use pyo3::types::PyAny;

use super::ffi;
use crate::gp::exact::{check_exact_size, log_marginal_likelihood, predict_exact};
use crate::gp::features::predict_features;
use crate::gp::OptimizerConfig;
use crate::gp::{fit_exact, metrics, ExactGpConfig, FeatureGp, Hyper, HyperInit};
use crate::kernels::{Kernel, StationaryKernel};
use crate::linalg::{as_faer, check_factor, Cholesky};
use crate::real::Real;
use crate::stats::FeatureStats;
use crate::system::available_memory_bytes;
use crate::threads::Parallelism;

type Arr1<'py> = Bound<'py, PyArray1<f64>>;
type Arr2<'py> = Bound<'py, PyArray2<f64>>;

/// Fits the exact GP (ALGORITHMS.md 7.1). Returns `(length_scale,
/// kernel_variance, noise_variance, y_mean, lml, alpha, chol, n_iter)`.
/// `progress`, when not None, is called as `progress(stage, done, total,
/// messages)` while the fit runs.
#[pyfunction]
#[pyo3(signature = (x, y, length_scale, kernel_variance, noise_variance, ard, optimize, n_restarts, seed, max_iter, progress, center, *, kernel="gaussian"))]
#[allow(clippy::too_many_arguments, clippy::type_complexity)]
fn exact_gp_fit<'py>(
    py: Python<'py>,
    x: PyReadonlyArray2<'py, f64>,
    y: PyReadonlyArray1<'py, f64>,
    length_scale: Option<Vec<f64>>,
    kernel_variance: Option<f64>,
    noise_variance: Option<f64>,
    ard: bool,
    optimize: Vec<String>,
    n_restarts: usize,
    seed: u64,
    max_iter: u64,
    progress: Option<&Bound<'py, PyAny>>,
    center: bool,
    kernel: &str,
) -> PyResult<(Arr1<'py>, f64, f64, f64, f64, Arr1<'py>, Arr2<'py>, u64)> {
    let kernel = ffi::map_result(py, Kernel::from_name(kernel))?;
    let optimize = ffi::map_result(
        py,
        optimize
            .iter()
            .map(|s| Hyper::from_name(s))
            .collect::<crate::Result<Vec<_>>>(),
    )?;
    let cfg = ExactGpConfig {
        kernel,
        hyper: HyperInit {
            length_scale,
            kernel_variance,
            noise_variance,
            ard,
            optimize,
        },
        optimizer: OptimizerConfig {
            n_restarts,
            seed,
            max_iter,
            ..OptimizerConfig::default()
        },
        center,
        memory_budget: Some(available_memory_bytes()),
    };
    let (xv, yv) = (x.as_array(), y.as_array());
    let gp = ffi::call_monitored(py, progress, |monitor| {
        fit_exact(xv, yv, &cfg, Parallelism::Rayon, monitor)
    })?;
    let chol = gp.chol.l_array();
    Ok((
        Array1::from(gp.kernel.length_scale).into_pyarray(py),
        gp.kernel.variance,
        gp.noise_variance,
        gp.y_mean,
        gp.lml,
        gp.alpha.into_pyarray(py),
        chol.into_pyarray(py),
        gp.n_iter,
    ))
}

/// Exact-GP prediction from stored fitted arrays: `(mean, latent variance
/// or None)`.
#[pyfunction]
#[pyo3(signature = (x_train, chol, alpha, y_mean, length_scale, kernel_variance, x, return_var, *, kernel="gaussian"))]
#[allow(clippy::too_many_arguments)]
fn exact_gp_predict<'py>(
    py: Python<'py>,
    x_train: PyReadonlyArray2<'py, f64>,
    chol: PyReadonlyArray2<'py, f64>,
    alpha: PyReadonlyArray1<'py, f64>,
    y_mean: f64,
    length_scale: Vec<f64>,
    kernel_variance: f64,
    x: PyReadonlyArray2<'py, f64>,
    return_var: bool,
    kernel: &str,
) -> PyResult<(Arr1<'py>, Option<Arr1<'py>>)> {
    let kernel = StationaryKernel {
        kernel: ffi::map_result(py, Kernel::from_name(kernel))?,
        length_scale,
        variance: kernel_variance,
    };
    let (xt, l, a, xs) = (
        x_train.as_array(),
        chol.as_array(),
        alpha.as_array(),
        x.as_array(),
    );
    let (mean, var) = ffi::call(py, || {
        let chol = Cholesky::from_lower(l)?;
        predict_exact(
            xt,
            &chol,
            a,
            y_mean,
            &kernel,
            xs,
            return_var,
            Parallelism::Rayon,
        )
    })?;
    Ok((mean.into_pyarray(py), var.map(|v| v.into_pyarray(py))))
}

/// The exact-GP log marginal likelihood of `y` (as given, not centered) and
/// its gradient with respect to `(ln l.., ln σ², ln σ_n²)`.
#[pyfunction]
#[pyo3(signature = (x, y, length_scale, kernel_variance, noise_variance, eval_gradient, *, kernel="gaussian"))]
#[allow(clippy::too_many_arguments)]
fn exact_gp_lml<'py>(
    py: Python<'py>,
    x: PyReadonlyArray2<'py, f64>,
    y: PyReadonlyArray1<'py, f64>,
    length_scale: Vec<f64>,
    kernel_variance: f64,
    noise_variance: f64,
    eval_gradient: bool,
    kernel: &str,
) -> PyResult<(f64, Arr1<'py>)> {
    let kernel = StationaryKernel {
        kernel: ffi::map_result(py, Kernel::from_name(kernel))?,
        length_scale,
        variance: kernel_variance,
    };
    let (xv, yv) = (x.as_array(), y.as_array());
    let e = ffi::call(py, || {
        check_exact_size(xv.nrows(), available_memory_bytes())?;
        log_marginal_likelihood(
            xv,
            yv,
            &kernel,
            noise_variance,
            eval_gradient,
            Parallelism::Rayon,
        )
    })?;
    Ok((e.lml, Array1::from(e.grad).into_pyarray(py)))
}

/// Sufficient statistics of a feature-space GP (ALGORITHMS.md 7.2),
/// accumulated over row chunks and merged exactly.
#[pyclass(module = "randfeat_rs._core", name = "FeatureStats")]
pub(super) struct PyFeatureStats {
    pub(super) inner: FeatureStats,
}

fn accumulate_typed<'py, T: Real + numpy::Element>(
    py: Python<'py>,
    stats: &mut FeatureStats,
    phi: &Bound<'py, PyAny>,
    y: ndarray::ArrayView1<'_, f64>,
) -> PyResult<()> {
    let phi: PyReadonlyArray2<'py, T> = phi.extract()?;
    let pv = phi.as_array();
    ffi::call(py, || stats.accumulate(pv, y, Parallelism::Rayon))
}

fn is_f32(x: &Bound<'_, PyAny>) -> bool {
    x.downcast::<PyArray2<f32>>().is_ok()
}

#[pymethods]
impl PyFeatureStats {
    /// Empty statistics for `n_features` features.
    #[new]
    fn new(n_features: usize) -> Self {
        Self {
            inner: FeatureStats::new(n_features),
        }
    }

    /// Statistics from their arrays (the inverse of the getters).
    #[staticmethod]
    #[allow(clippy::too_many_arguments)]
    fn from_arrays(
        py: Python<'_>,
        gram: PyReadonlyArray2<'_, f64>,
        phi_y: PyReadonlyArray1<'_, f64>,
        phi_sum: PyReadonlyArray1<'_, f64>,
        n: u64,
        y_shift: f64,
        y_sum: f64,
        y_sq_sum: f64,
    ) -> PyResult<Self> {
        let inner = FeatureStats {
            gram: gram.as_array().to_owned(),
            phi_y: phi_y.as_array().to_owned(),
            phi_sum: phi_sum.as_array().to_owned(),
            n,
            y_shift,
            y_sum,
            y_sq_sum,
        };
        ffi::map_result(py, inner.validate())?;
        Ok(Self { inner })
    }

    /// Adds a chunk: features `phi` (float32/float64, `n x D`), targets `y`.
    fn accumulate<'py>(
        &mut self,
        py: Python<'py>,
        phi: &Bound<'py, PyAny>,
        y: PyReadonlyArray1<'py, f64>,
    ) -> PyResult<()> {
        let yv = y.as_array();
        if is_f32(phi) {
            accumulate_typed::<f32>(py, &mut self.inner, phi, yv)
        } else {
            accumulate_typed::<f64>(py, &mut self.inner, phi, yv)
        }
    }

    /// Adds another set of statistics (exact).
    fn merge(&mut self, py: Python<'_>, other: PyRef<'_, PyFeatureStats>) -> PyResult<()> {
        ffi::map_result(py, self.inner.merge(&other.inner))
    }

    /// Fits the GP: `(chol, beta, y_mean, lml)`.
    #[allow(clippy::type_complexity)]
    fn fit<'py>(
        &self,
        py: Python<'py>,
        noise_variance: f64,
        center: bool,
    ) -> PyResult<(Arr2<'py>, Arr1<'py>, f64, f64)> {
        let stats = &self.inner;
        let gp = ffi::call(py, || {
            FeatureGp::fit(stats, noise_variance, center, Parallelism::Rayon)
        })?;
        Ok((
            gp.chol.l_array().into_pyarray(py),
            gp.beta.into_pyarray(py),
            gp.y_mean,
            gp.lml,
        ))
    }

    /// `Phi^T Phi` (a full symmetric copy).
    #[getter]
    fn gram<'py>(&self, py: Python<'py>) -> Arr2<'py> {
        self.inner.gram_symmetric().into_pyarray(py)
    }

    /// `Phi^T (y - y_shift)` (a copy).
    #[getter]
    fn phi_y<'py>(&self, py: Python<'py>) -> Arr1<'py> {
        self.inner.phi_y.clone().into_pyarray(py)
    }

    /// `Phi^T 1` (a copy).
    #[getter]
    fn phi_sum<'py>(&self, py: Python<'py>) -> Arr1<'py> {
        self.inner.phi_sum.clone().into_pyarray(py)
    }

    /// Number of rows.
    #[getter]
    fn n(&self) -> u64 {
        self.inner.n
    }

    /// The target shift.
    #[getter]
    fn y_shift(&self) -> f64 {
        self.inner.y_shift
    }

    /// `sum(y - y_shift)`.
    #[getter]
    fn y_sum(&self) -> f64 {
        self.inner.y_sum
    }

    /// `sum((y - y_shift)^2)`.
    #[getter]
    fn y_sq_sum(&self) -> f64 {
        self.inner.y_sq_sum
    }

    /// Number of features.
    #[getter]
    fn n_features(&self) -> usize {
        self.inner.n_features()
    }
}

fn predict_features_typed<'py, T: Real + numpy::Element>(
    py: Python<'py>,
    l: ndarray::ArrayView2<'_, f64>,
    beta: ndarray::ArrayView1<'_, f64>,
    y_mean: f64,
    phi: &Bound<'py, PyAny>,
    return_var: bool,
) -> PyResult<(Array1<f64>, Option<Array1<f64>>)> {
    let phi: PyReadonlyArray2<'py, T> = phi.extract()?;
    let pv = phi.as_array();
    ffi::call(py, || {
        check_factor(l)?;
        predict_features(as_faer(l), beta, y_mean, pv, return_var, Parallelism::Rayon)
    })
}

/// Feature-space GP prediction from stored arrays: `(mean, latent variance
/// or None)`.
#[pyfunction]
#[pyo3(signature = (chol, beta, y_mean, phi, return_var))]
fn feature_gp_predict<'py>(
    py: Python<'py>,
    chol: PyReadonlyArray2<'py, f64>,
    beta: PyReadonlyArray1<'py, f64>,
    y_mean: f64,
    phi: &Bound<'py, PyAny>,
    return_var: bool,
) -> PyResult<(Arr1<'py>, Option<Arr1<'py>>)> {
    let (l, b) = (chol.as_array(), beta.as_array());
    let (mean, var) = if is_f32(phi) {
        predict_features_typed::<f32>(py, l, b, y_mean, phi, return_var)?
    } else {
        predict_features_typed::<f64>(py, l, b, y_mean, phi, return_var)?
    };
    Ok((mean.into_pyarray(py), var.map(|v| v.into_pyarray(py))))
}

/// Mean KL divergence between predictive Gaussians (ALGORITHMS.md 7.3).
#[pyfunction]
fn kl_divergence(
    py: Python<'_>,
    mean_p: PyReadonlyArray1<'_, f64>,
    var_p: PyReadonlyArray1<'_, f64>,
    mean_q: PyReadonlyArray1<'_, f64>,
    var_q: PyReadonlyArray1<'_, f64>,
) -> PyResult<f64> {
    let (a, b, c, d) = (
        mean_p.as_array(),
        var_p.as_array(),
        mean_q.as_array(),
        var_q.as_array(),
    );
    ffi::call(py, || metrics::kl_divergence(a, b, c, d))
}

/// Root mean squared error.
#[pyfunction]
fn rmse(
    py: Python<'_>,
    y_true: PyReadonlyArray1<'_, f64>,
    y_pred: PyReadonlyArray1<'_, f64>,
) -> PyResult<f64> {
    let (a, b) = (y_true.as_array(), y_pred.as_array());
    ffi::call(py, || metrics::rmse(a, b))
}

/// Mean negative log predictive density.
#[pyfunction]
fn mean_nll(
    py: Python<'_>,
    y_true: PyReadonlyArray1<'_, f64>,
    mean: PyReadonlyArray1<'_, f64>,
    var: PyReadonlyArray1<'_, f64>,
) -> PyResult<f64> {
    let (a, b, c) = (y_true.as_array(), mean.as_array(), var.as_array());
    ffi::call(py, || metrics::mean_nll(a, b, c))
}

/// Relative Frobenius error of a Gram matrix.
#[pyfunction]
fn relative_frobenius_error(
    py: Python<'_>,
    k_approx: PyReadonlyArray2<'_, f64>,
    k_exact: PyReadonlyArray2<'_, f64>,
) -> PyResult<f64> {
    let (a, b) = (k_approx.as_array(), k_exact.as_array());
    ffi::call(py, || metrics::relative_frobenius_error(a, b))
}

pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(exact_gp_fit, m)?)?;
    m.add_function(wrap_pyfunction!(exact_gp_predict, m)?)?;
    m.add_function(wrap_pyfunction!(exact_gp_lml, m)?)?;
    m.add_function(wrap_pyfunction!(feature_gp_predict, m)?)?;
    m.add_function(wrap_pyfunction!(kl_divergence, m)?)?;
    m.add_function(wrap_pyfunction!(rmse, m)?)?;
    m.add_function(wrap_pyfunction!(mean_nll, m)?)?;
    m.add_function(wrap_pyfunction!(relative_frobenius_error, m)?)?;
    m.add_class::<PyFeatureStats>()?;
    Ok(())
}
