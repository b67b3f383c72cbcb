//! Bindings of [`crate::gp`] and [`crate::stats`]: the handles of the
//! fitted exact GP (`_core.ExactGp`) and feature-space GP
//! (`_core.FeatureGp`), the mergeable sufficient statistics
//! (`_core.FeatureStats`), each pickled by value; the default noise
//! variance; the exact-GP log marginal likelihood of given data; the
//! marginal-likelihood fit of a feature map's hyperparameters and one
//! evaluation of it; and the metrics.

use ndarray::{Array1, ArrayView2};
use numpy::{IntoPyArray, PyArray1, PyArray2, PyReadonlyArray1, PyReadonlyArray2};
use pyo3::prelude::*;
use pyo3::types::{PyAny, PyType};

use super::feature_map::PyFeatureMap;
use super::ffi::{self, with_float_view, FloatArray2};
use crate::error::{Error, Result};
use crate::gp::exact::{check_exact_size, log_marginal_likelihood};
use crate::gp::feature_lml::FeatureLml;
use crate::gp::optimize::{LogParams, Objective, HYPER_NAMES};
use crate::gp::OptimizerConfig;
use crate::gp::{self, metrics, ExactGp, ExactGpConfig, FeatureGp, Hyper, HyperInit};
use crate::gp::{
    check_positive, fit_exact, fit_feature_gp, FeatureLmlConfig, FittedFeatureGp, HyperMap,
};
use crate::kernels::{Kernel, StationaryKernel};
use crate::linalg::Cholesky;
use crate::stats::FeatureStats;
use crate::system::available_memory_bytes;
use crate::threads::Parallelism;

type Arr1<'py> = Bound<'py, PyArray1<f64>>;
type Arr2<'py> = Bound<'py, PyArray2<f64>>;

/// A prediction: the mean and, when asked for, a standard deviation.
pub(super) type Prediction<'py> = (Arr1<'py>, Option<Arr1<'py>>);

/// The standard deviation a GP prediction returns (`std=` argument of the
/// handles' `predict`): of the latent function, or of a noisy observation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum StdKind {
    /// `sqrt(v*)`, the latent function's.
    Latent,
    /// `sqrt(v* + sigma_n^2)`, a noisy observation's.
    Noisy,
}

impl StdKind {
    /// Parses `std=`: None, "latent" or "noisy".
    pub(super) fn parse(py: Python<'_>, name: Option<&str>) -> PyResult<Option<Self>> {
        match name {
            None => Ok(None),
            Some("latent") => Ok(Some(Self::Latent)),
            Some("noisy") => Ok(Some(Self::Noisy)),
            Some(other) => Err(ffi::to_pyerr(
                py,
                Error::invalid(
                    "std",
                    format!("expected None, \"latent\" or \"noisy\", got {other:?}"),
                ),
            )),
        }
    }

    /// The standard deviations of the latent variances `var` (clipped at 0)
    /// for a model with noise variance `noise`.
    pub(super) fn of(self, var: Array1<f64>, noise: f64) -> Array1<f64> {
        match self {
            Self::Latent => var.mapv_into(|v| v.max(0.0).sqrt()),
            Self::Noisy => var.mapv_into(|v| (v.max(0.0) + noise).sqrt()),
        }
    }
}

/// The NumPy form of a prediction `(mean, latent variance)` with the
/// standard deviation `std` asks for.
pub(super) fn prediction<'py>(
    py: Python<'py>,
    (mean, var): gp::MeanAndVariance,
    std: Option<StdKind>,
    noise: f64,
) -> Prediction<'py> {
    let std = std.zip(var).map(|(k, v)| k.of(v, noise).into_pyarray(py));
    (mean.into_pyarray(py), std)
}

/// The hyperparameters named in `optimize=` ("length_scale",
/// "kernel_variance", "noise_variance").
pub(super) fn parse_optimize(py: Python<'_>, optimize: &[String]) -> PyResult<Vec<Hyper>> {
    ffi::map_result(
        py,
        optimize
            .iter()
            .map(|s| Hyper::from_name(s))
            .collect::<crate::Result<Vec<_>>>(),
    )
}

/// The default noise variance of the GP regressors for targets `y`: 0.1
/// times their variance, 0.1 when they are all equal; refused when the
/// targets vary with a variance beyond the float64 range (see
/// `gp::initial_noise_variance`).
#[pyfunction]
fn initial_noise_variance(py: Python<'_>, y: PyReadonlyArray1<'_, f64>) -> PyResult<f64> {
    gp::initial_noise_variance(y.as_array()).map_err(|e| ffi::to_pyerr(py, e))
}

/// The default noise variance of the GP regressors for targets whose rows
/// are held elsewhere, from their moments: `var` their population variance,
/// `constant` whether they are all equal (their minimum is their maximum);
/// as `initial_noise_variance` of the same targets (see
/// `gp::initial_noise_variance_of`).
#[pyfunction]
#[pyo3(signature = (*, var, constant))]
fn initial_noise_variance_of(py: Python<'_>, var: f64, constant: bool) -> PyResult<f64> {
    gp::initial_noise_variance_of((!constant).then_some(var)).map_err(|e| ffi::to_pyerr(py, e))
}

/// The median pairwise Euclidean distance of (a strided subsample of at
/// most 500 rows of) `x`, 1 when those rows coincide: the data's length
/// scale, where the GP regressors start their length scales
/// (`gp::optimize::median_pairwise_distance`).
#[pyfunction]
fn median_pairwise_distance(py: Python<'_>, x: PyReadonlyArray2<'_, f64>) -> PyResult<f64> {
    let x = x.as_array();
    crate::error::check_finite("X", x.iter()).map_err(|e| ffi::to_pyerr(py, e))?;
    Ok(gp::optimize::median_pairwise_distance(x))
}

/// The per-dimension data length scales of inputs held elsewhere from a
/// strided subsample `rows` (at most 500 rows, as `median_pairwise_distance`
/// takes them) and the columns' standard deviations `spread`
/// (`gp::optimize::spread_length_scales`).
#[pyfunction]
fn spread_length_scales(
    py: Python<'_>,
    rows: PyReadonlyArray2<'_, f64>,
    spread: Vec<f64>,
) -> PyResult<Vec<f64>> {
    let rows = rows.as_array();
    let checked = crate::error::check_finite("X", rows.iter())
        .and_then(|()| crate::error::Error::check_n_features(rows.ncols(), spread.len()));
    checked.map_err(|e| ffi::to_pyerr(py, e))?;
    Ok(gp::optimize::spread_length_scales(rows, &spread))
}

/// Refuses a hyperparameter fit on `n` targets of mean `mean` and variance
/// `var`, all equal when `constant` (their minimum is their maximum), that
/// are constant after the model's centering (`center`; see
/// `gp::check_targets_vary`) or vary with a variance outside
/// `1e-40..1e40` (see `gp::check_target_scale`; one that underflowed to 0
/// included): the checks of the in-memory fits, for fits on rows held
/// elsewhere, whose moments their caller reduces.
#[pyfunction]
#[pyo3(signature = (*, n, mean, var, constant, center))]
fn check_fit_targets(
    py: Python<'_>,
    n: usize,
    mean: f64,
    var: f64,
    constant: bool,
    center: bool,
) -> PyResult<()> {
    let check = || {
        if n > 0 && constant && (center || mean == 0.0) {
            return Err(gp::constant_targets(n));
        }
        if constant || n == 0 {
            return Ok(());
        }
        gp::check_target_scale(var)
    };
    check().map_err(|e| ffi::to_pyerr(py, e))
}

/// A fitted exact GP and its training targets (for the log marginal
/// likelihood at other hyperparameters).
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
struct ExactGpState {
    gp: ExactGp,
    y_train: Array1<f64>,
}

/// A factor to replace `current`, the fitted one: square with a positive
/// finite diagonal ([`Cholesky::from_lower`]) and of the same size (the
/// system it factors has one row per training row, or per feature).
fn replacement_factor(current: &Cholesky, l: ArrayView2<'_, f64>) -> Result<Cholesky> {
    let chol = Cholesky::from_lower(l)?;
    if chol.dim() != current.dim() {
        return Err(Error::ShapeMismatch {
            name: "size of the Cholesky factor (that of the fitted one)",
            expected: current.dim(),
            got: chol.dim(),
        });
    }
    Ok(chol)
}

/// A fitted exact GP with a stationary kernel (docs/math/gp.rst, section
/// Exact GP), pickled by value with its kernel.
#[pyclass(name = "ExactGp", module = "randfeat_rs._core", frozen)]
pub(super) struct PyExactGp {
    inner: ExactGpState,
}

#[pymethods]
impl PyExactGp {
    /// Fits the hyperparameters in `optimize` by the log marginal
    /// likelihood (from the given values, or the initialization of
    /// docs/math/gp.rst, section Exact GP, for those that are None) and the
    /// GP with the stationary kernel named `kernel` ("gaussian",
    /// "laplacian", "matern12", "matern32", "matern52"). `progress`, when
    /// given, is called as `progress(stage, done, total, messages)` while
    /// the fit runs.
    #[staticmethod]
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (x, y, *, length_scale, kernel_variance, noise_variance, ard, optimize,
                        n_restarts, max_iter, center_y, seed, kernel="gaussian", progress=None))]
    fn fit(
        py: Python<'_>,
        x: PyReadonlyArray2<'_, f64>,
        y: PyReadonlyArray1<'_, f64>,
        length_scale: Option<Vec<f64>>,
        kernel_variance: Option<f64>,
        noise_variance: Option<f64>,
        ard: bool,
        optimize: Vec<String>,
        n_restarts: usize,
        max_iter: u64,
        center_y: bool,
        seed: u64,
        kernel: &str,
        progress: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let kernel = ffi::map_result(py, Kernel::from_name(kernel))?;
        let optimize = parse_optimize(py, &optimize)?;
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
            center: center_y,
            memory_budget: Some(available_memory_bytes()),
        };
        let (xv, yv) = (x.as_array(), y.as_array());
        let gp = ffi::call_monitored(py, progress, |monitor| {
            fit_exact(xv, yv, &cfg, Parallelism::Rayon, monitor)
        })?;
        Ok(Self {
            inner: ExactGpState {
                gp,
                y_train: yv.to_owned(),
            },
        })
    }

    /// The kernel's name ("gaussian", "laplacian", "matern12", "matern32"
    /// or "matern52").
    #[getter]
    fn kernel(&self) -> &'static str {
        self.inner.gp.kernel.kernel.name()
    }

    /// The length scale(s): one value, or one per input dimension.
    #[getter]
    fn length_scale<'py>(&self, py: Python<'py>) -> Arr1<'py> {
        Array1::from(self.inner.gp.kernel.length_scale.clone()).into_pyarray(py)
    }

    /// The kernel variance.
    #[getter]
    fn kernel_variance(&self) -> f64 {
        self.inner.gp.kernel.variance
    }

    /// The noise variance.
    #[getter]
    fn noise_variance(&self) -> f64 {
        self.inner.gp.noise_variance
    }

    /// The training-target mean added back to predictions.
    #[getter]
    fn y_mean(&self) -> f64 {
        self.inner.gp.y_mean
    }

    /// The log marginal likelihood of the centered targets.
    #[getter]
    fn log_marginal_likelihood_value(&self) -> f64 {
        self.inner.gp.lml
    }

    /// L-BFGS iterations of the hyperparameter fit.
    #[getter]
    fn n_iter(&self) -> u64 {
        self.inner.gp.n_iter
    }

    /// `alpha = K_y^{-1} (y - y_mean)` (a copy).
    #[getter]
    fn alpha<'py>(&self, py: Python<'py>) -> Arr1<'py> {
        self.inner.gp.alpha.clone().into_pyarray(py)
    }

    /// The lower Cholesky factor of `K_y` (column-major copy).
    #[getter]
    fn chol<'py>(&self, py: Python<'py>) -> Arr2<'py> {
        self.inner.gp.chol.l_array().into_pyarray(py)
    }

    /// The training inputs (a copy).
    #[getter]
    fn x_train<'py>(&self, py: Python<'py>) -> Arr2<'py> {
        self.inner.gp.x_train.clone().into_pyarray(py)
    }

    /// The training targets (a copy).
    #[getter]
    fn y_train<'py>(&self, py: Python<'py>) -> Arr1<'py> {
        self.inner.y_train.clone().into_pyarray(py)
    }

    /// The same GP with the Cholesky factor `chol` (its lower triangle is
    /// read; checked by [`replacement_factor`]).
    fn with_factor(&self, py: Python<'_>, chol: PyReadonlyArray2<'_, f64>) -> PyResult<Self> {
        let l = chol.as_array();
        let chol = ffi::call(py, || replacement_factor(&self.inner.gp.chol, l))?;
        let mut inner = self.inner.clone();
        inner.gp.chol = chol;
        Ok(Self { inner })
    }

    /// Predictive mean at the rows of `x` and, with `std` "latent" or
    /// "noisy", the standard deviation of the latent function or of a
    /// noisy observation.
    #[pyo3(signature = (x, *, std=None))]
    fn predict<'py>(
        &self,
        py: Python<'py>,
        x: PyReadonlyArray2<'py, f64>,
        std: Option<&str>,
    ) -> PyResult<Prediction<'py>> {
        let std = StdKind::parse(py, std)?;
        let (gp, xv) = (&self.inner.gp, x.as_array());
        let p = ffi::call(py, || gp.predict(xv, std.is_some(), Parallelism::Rayon))?;
        Ok(prediction(py, p, std, gp.noise_variance))
    }

    /// The log marginal likelihood of the centered training targets at the
    /// log hyperparameters `theta = (ln l_1, ..., ln l_k, ln kernel_variance,
    /// ln noise_variance)` (`k` the fitted model's number of length scales:
    /// 1, or one per feature with ARD; None: the fitted ones, exactly), with
    /// its gradient with respect to `theta`.
    #[pyo3(signature = (theta=None, eval_gradient=false))]
    fn log_marginal_likelihood<'py>(
        &self,
        py: Python<'py>,
        theta: Option<Vec<f64>>,
        eval_gradient: bool,
    ) -> PyResult<(f64, Arr1<'py>)> {
        let gp = &self.inner.gp;
        let (kernel, noise) = match theta {
            None => (gp.kernel.clone(), gp.noise_variance),
            Some(t) => {
                // One length scale, or one per feature with ARD: as fitted.
                let k = gp.kernel.length_scale.len();
                if t.len() != k + 2 {
                    let ard = if k == 1 {
                        ""
                    } else {
                        " (one length scale per feature)"
                    };
                    let reason = format!("must have length {}{ard}, got {}", k + 2, t.len());
                    return Err(ffi::to_pyerr(py, Error::invalid("theta", reason)));
                }
                let kernel = StationaryKernel {
                    kernel: gp.kernel.kernel,
                    length_scale: t[..k].iter().map(|v| v.exp()).collect(),
                    variance: t[k].exp(),
                };
                (kernel, t[k + 1].exp())
            }
        };
        let y_mean = gp.y_mean;
        let yc = self.inner.y_train.mapv(|v| v - y_mean);
        let (xv, ycv) = (gp.x_train.view(), yc.view());
        let e = ffi::call(py, || {
            log_marginal_likelihood(xv, ycv, &kernel, noise, eval_gradient, Parallelism::Rayon)
        })?;
        Ok((e.lml, Array1::from(e.grad).into_pyarray(py)))
    }

    /// Pickles the GP by value (see [`ffi::reduce`]).
    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<ffi::Reduced<'py>> {
        ffi::reduce(slf, &slf.get().inner)
    }

    /// The GP of a pickled payload (see [`ffi::from_state`]).
    #[classmethod]
    fn _from_state(cls: &Bound<'_, PyType>, state: &[u8]) -> PyResult<Self> {
        Ok(Self {
            inner: ffi::from_state::<Self, _>(cls.py(), state)?,
        })
    }
}

/// The exact-GP log marginal likelihood of `y` (as given, not centered) on
/// `x` with the stationary kernel named `kernel` and its gradient with
/// respect to `(ln l.., ln sigma^2, ln sigma_n^2)`.
#[pyfunction]
#[pyo3(signature = (x, y, *, length_scale, kernel_variance, noise_variance, eval_gradient=false,
                    kernel="gaussian"))]
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

/// Fits the length scale(s), kernel variance and noise variance of the
/// feature-space GP of a fitted random Fourier or Maclaurin map by
/// maximizing its log marginal likelihood (docs/math/gp.rst, feature-space
/// GP), the random draw fixed. `length_scale` is the one the Fourier map
/// was drawn at, one value or one per input dimension (the Maclaurin map
/// knows its own); `ard` fits one length
/// scale per input dimension (Fourier maps). Returns `(length_scale,
/// kernel_variance, noise_variance, feature_map, stats, n_iter)`: the
/// length scale(s) as an array, the map at the optimum (its random draw
/// kept) and the statistics of all rows there.
#[pyfunction]
#[pyo3(signature = (features, x, y, *, length_scale, noise_variance, optimize, n_restarts, seed, center, chunk_size, ard=false, progress=None))]
#[allow(clippy::too_many_arguments)]
fn feature_gp_optimize<'py>(
    py: Python<'py>,
    features: PyRef<'py, PyFeatureMap>,
    x: PyReadonlyArray2<'py, f64>,
    y: PyReadonlyArray1<'py, f64>,
    length_scale: Vec<f64>,
    noise_variance: Option<f64>,
    optimize: Vec<String>,
    n_restarts: usize,
    seed: u64,
    center: bool,
    chunk_size: usize,
    ard: bool,
    progress: Option<&Bound<'py, PyAny>>,
) -> PyResult<Fitted<'py>> {
    let optimize = parse_optimize(py, &optimize)?;
    let map = ffi::map_result(py, HyperMap::new(features.inner.clone(), length_scale))?;
    let cfg = lml_config(
        noise_variance,
        ard,
        optimize,
        n_restarts,
        seed,
        center,
        chunk_size,
    );
    let (xv, yv) = (x.as_array(), y.as_array());
    let fit = ffi::call_monitored(py, progress, |monitor| {
        fit_feature_gp(&map, xv, yv, &cfg, Parallelism::Rayon, monitor)
    })?;
    Ok(fitted(py, fit))
}

/// What the feature-space marginal-likelihood fits return: `(length_scale,
/// kernel_variance, noise_variance, feature_map, stats, n_iter)`.
pub(super) type Fitted<'py> = (Arr1<'py>, f64, f64, PyFeatureMap, PyFeatureStats, u64);

/// The Python form of a fitted feature-space GP ([`Fitted`]).
pub(super) fn fitted(py: Python<'_>, fit: FittedFeatureGp) -> Fitted<'_> {
    (
        Array1::from(fit.length_scale).into_pyarray(py),
        fit.kernel_variance,
        fit.gp.noise_variance,
        PyFeatureMap { inner: fit.map },
        PyFeatureStats { inner: fit.stats },
        fit.n_iter,
    )
}

/// The configuration of a feature-space marginal-likelihood fit: the
/// default optimizer with `n_restarts` and `seed`.
pub(super) fn lml_config(
    noise_variance: Option<f64>,
    ard: bool,
    optimize: Vec<Hyper>,
    n_restarts: usize,
    seed: u64,
    center: bool,
    chunk_rows: usize,
) -> FeatureLmlConfig {
    FeatureLmlConfig {
        noise_variance,
        ard,
        optimize,
        optimizer: OptimizerConfig {
            n_restarts,
            seed,
            ..FeatureLmlConfig::default().optimizer
        },
        center,
        chunk_rows,
        data_length_scale: None,
    }
}

/// One evaluation of the feature-space log marginal likelihood of a fitted
/// random Fourier or Maclaurin map (drawn at `drawn_length_scale`; the
/// Maclaurin map knows its own) at `(length_scale, kernel_variance,
/// noise_variance)`, the random draw fixed, and its gradient with respect
/// to `(ln l.., ln σ², ln σ_n²)` (docs/math/gp.rst, feature-space GP):
/// `length_scale` holds one value, or one per input dimension (Fourier
/// maps).
#[pyfunction]
#[pyo3(signature = (features, x, y, *, drawn_length_scale, length_scale, kernel_variance, noise_variance, center, chunk_size))]
#[allow(clippy::too_many_arguments)]
fn feature_gp_lml<'py>(
    py: Python<'py>,
    features: PyRef<'py, PyFeatureMap>,
    x: PyReadonlyArray2<'py, f64>,
    y: PyReadonlyArray1<'py, f64>,
    drawn_length_scale: Vec<f64>,
    length_scale: Vec<f64>,
    kernel_variance: f64,
    noise_variance: f64,
    center: bool,
    chunk_size: usize,
) -> PyResult<(f64, Arr1<'py>)> {
    let map = ffi::map_result(
        py,
        HyperMap::new(features.inner.clone(), drawn_length_scale),
    )?;
    let (xv, yv) = (x.as_array(), y.as_array());
    let e = ffi::call_monitored(py, None, |monitor| {
        let k = length_scale.len();
        for &v in &length_scale {
            check_positive(HYPER_NAMES[0], v)?;
        }
        check_positive(HYPER_NAMES[1], kernel_variance)?;
        check_positive(HYPER_NAMES[2], noise_variance)?;
        let mut values = length_scale;
        values.extend([kernel_variance, noise_variance]);
        let params = LogParams {
            values,
            free: (0..k + 2).collect(),
        };
        let theta = params.start();
        let obj = FeatureLml::new(&map, xv, yv, params, center, chunk_size, Parallelism::Rayon)?;
        obj.evaluate(&theta, monitor)
    })?;
    Ok((e.value, Array1::from(e.grad).into_pyarray(py)))
}

/// Sufficient statistics of a feature-space GP (`docs/math/gp.rst`, "Feature-space GP"),
/// accumulated over row chunks and merged exactly; pickled by value.
#[pyclass(module = "randfeat_rs._core", name = "FeatureStats")]
pub(super) struct PyFeatureStats {
    pub(super) inner: FeatureStats,
}

impl PyFeatureStats {
    /// Empty statistics for `d >= 1` features, refusals naming `param`.
    fn empty(py: Python<'_>, param: &'static str, d: usize) -> PyResult<Self> {
        if d == 0 {
            return Err(ffi::to_pyerr(
                py,
                Error::invalid(param, "must be >= 1, got 0"),
            ));
        }
        ffi::map_result(py, FeatureStats::check_size(param, d, 1))?;
        Ok(Self {
            inner: FeatureStats::new(d),
        })
    }
}

#[pymethods]
impl PyFeatureStats {
    /// Empty statistics for `n_features >= 1` features.
    #[new]
    fn new(py: Python<'_>, n_features: usize) -> PyResult<Self> {
        Self::empty(py, "n_features", n_features)
    }

    /// Empty statistics for the `n_components` features of a feature map:
    /// [`Self::new`] with its refusals naming `n_components`, the map's
    /// parameter.
    #[staticmethod]
    fn for_map(py: Python<'_>, n_components: usize) -> PyResult<Self> {
        Self::empty(py, "n_components", n_components)
    }

    /// Adds a chunk: features `phi` (float32/float64, `n x D`), targets `y`.
    fn accumulate(
        &mut self,
        py: Python<'_>,
        phi: FloatArray2<'_>,
        y: PyReadonlyArray1<'_, f64>,
    ) -> PyResult<()> {
        let (stats, yv) = (&mut self.inner, y.as_array());
        // The features are this call's argument `phi`.
        let named = |r: Result<()>| match r {
            Err(Error::NonFinite { name: "features" }) => Err(Error::NonFinite { name: "phi" }),
            other => other,
        };
        with_float_view!(phi, |p| ffi::call(py, || named(stats.accumulate(
            p,
            yv,
            Parallelism::Rayon
        ))))
    }

    /// Adds another set of statistics (exact).
    fn merge(&mut self, py: Python<'_>, other: PyRef<'_, PyFeatureStats>) -> PyResult<()> {
        ffi::map_result(py, self.inner.merge(&other.inner))
    }

    /// An independent copy.
    fn copy(&self) -> Self {
        Self {
            inner: self.inner.clone(),
        }
    }

    /// Fits the feature-space GP with noise variance `noise_variance`;
    /// `center_y` subtracts the target mean.
    #[pyo3(signature = (*, noise_variance, center_y))]
    fn fit(&self, py: Python<'_>, noise_variance: f64, center_y: bool) -> PyResult<PyFeatureGp> {
        let stats = &self.inner;
        let gp = ffi::call(py, || {
            FeatureGp::fit(stats, noise_variance, center_y, Parallelism::Rayon)
        })?;
        Ok(PyFeatureGp { inner: gp })
    }

    /// `Phi^T Phi` (a full symmetric copy).
    #[getter]
    fn gram<'py>(&self, py: Python<'py>) -> Arr2<'py> {
        self.inner.gram_symmetric().into_pyarray(py)
    }

    /// `Phi^T y`, of the targets as given.
    #[getter]
    fn phi_y<'py>(&self, py: Python<'py>) -> Arr1<'py> {
        self.inner.centered(false).0.into_pyarray(py)
    }

    /// `Phi^T (y - y_shift)`, the form the statistics keep (a copy).
    #[getter]
    fn phi_y_shifted<'py>(&self, py: Python<'py>) -> Arr1<'py> {
        self.inner.phi_y.clone().into_pyarray(py)
    }

    /// `Phi^T 1`, the feature column sums (a copy).
    #[getter]
    fn phi_sum<'py>(&self, py: Python<'py>) -> Arr1<'py> {
        self.inner.phi_sum.clone().into_pyarray(py)
    }

    /// Number of rows.
    #[getter]
    fn n(&self) -> u64 {
        self.inner.n
    }

    /// The target shift the sums are kept relative to.
    #[getter]
    fn y_shift(&self) -> f64 {
        self.inner.y_shift
    }

    /// The mean of the accumulated targets (0 when empty).
    #[getter]
    fn y_mean(&self) -> f64 {
        self.inner.y_mean()
    }

    /// Number of features.
    #[getter]
    fn n_features(&self) -> usize {
        self.inner.n_features()
    }

    /// Pickles the statistics by value (see [`ffi::reduce`]).
    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<ffi::Reduced<'py>> {
        ffi::reduce(slf, &slf.borrow().inner)
    }

    /// The statistics of a pickled payload (see [`ffi::from_state`]).
    #[classmethod]
    fn _from_state(cls: &Bound<'_, PyType>, state: &[u8]) -> PyResult<Self> {
        let inner: FeatureStats = ffi::from_state::<Self, _>(cls.py(), state)?;
        ffi::map_result(cls.py(), inner.validate())?;
        Ok(Self { inner })
    }
}

/// A fitted feature-space GP (docs/math/gp.rst, section Feature-space GP):
/// `L_A`, `beta`, the target mean and the noise variance; pickled by value.
#[pyclass(name = "FeatureGp", module = "randfeat_rs._core", frozen)]
pub(super) struct PyFeatureGp {
    inner: FeatureGp,
}

#[pymethods]
impl PyFeatureGp {
    /// The lower Cholesky factor `L_A` of `A = Phi^T Phi / sigma_n^2 + I`
    /// (column-major copy).
    #[getter]
    fn chol<'py>(&self, py: Python<'py>) -> Arr2<'py> {
        self.inner.chol.l_array().into_pyarray(py)
    }

    /// `beta = A^{-1} Phi^T (y - y_mean) / sigma_n^2` (a copy).
    #[getter]
    fn beta<'py>(&self, py: Python<'py>) -> Arr1<'py> {
        self.inner.beta.clone().into_pyarray(py)
    }

    /// The target mean added back to predictions.
    #[getter]
    fn y_mean(&self) -> f64 {
        self.inner.y_mean
    }

    /// The noise variance.
    #[getter]
    fn noise_variance(&self) -> f64 {
        self.inner.noise_variance
    }

    /// The feature-space log marginal likelihood of the centered targets.
    #[getter]
    fn log_marginal_likelihood_value(&self) -> f64 {
        self.inner.lml
    }

    /// The same GP with the Cholesky factor `chol` (its lower triangle is
    /// read; checked by [`replacement_factor`]).
    fn with_factor(&self, py: Python<'_>, chol: PyReadonlyArray2<'_, f64>) -> PyResult<Self> {
        let l = chol.as_array();
        let chol = ffi::call(py, || replacement_factor(&self.inner.chol, l))?;
        let mut inner = self.inner.clone();
        inner.chol = chol;
        Ok(Self { inner })
    }

    /// Predictive mean for test features `phi` (float32/float64, `m x D`)
    /// and, with `std` "latent" or "noisy", the standard deviation.
    #[pyo3(signature = (phi, *, std=None))]
    fn predict<'py>(
        &self,
        py: Python<'py>,
        phi: FloatArray2<'py>,
        std: Option<&str>,
    ) -> PyResult<Prediction<'py>> {
        let std = StdKind::parse(py, std)?;
        let gp = &self.inner;
        let p = with_float_view!(phi, |v| ffi::call(py, || gp.predict(
            v,
            std.is_some(),
            Parallelism::Rayon
        )))?;
        Ok(prediction(py, p, std, gp.noise_variance))
    }

    /// Pickles the GP by value (see [`ffi::reduce`]).
    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<ffi::Reduced<'py>> {
        ffi::reduce(slf, &slf.get().inner)
    }

    /// The GP of a pickled payload (see [`ffi::from_state`]).
    #[classmethod]
    fn _from_state(cls: &Bound<'_, PyType>, state: &[u8]) -> PyResult<Self> {
        Ok(Self {
            inner: ffi::from_state::<Self, _>(cls.py(), state)?,
        })
    }
}

/// Mean KL divergence between predictive Gaussians (`docs/math/gp.rst`, "Metrics").
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
    m.add_function(wrap_pyfunction!(initial_noise_variance, m)?)?;
    m.add_function(wrap_pyfunction!(initial_noise_variance_of, m)?)?;
    m.add_function(wrap_pyfunction!(median_pairwise_distance, m)?)?;
    m.add_function(wrap_pyfunction!(spread_length_scales, m)?)?;
    m.add_function(wrap_pyfunction!(check_fit_targets, m)?)?;
    m.add_function(wrap_pyfunction!(exact_gp_lml, m)?)?;
    m.add_function(wrap_pyfunction!(feature_gp_optimize, m)?)?;
    m.add_function(wrap_pyfunction!(feature_gp_lml, m)?)?;
    m.add_function(wrap_pyfunction!(kl_divergence, m)?)?;
    m.add_function(wrap_pyfunction!(rmse, m)?)?;
    m.add_function(wrap_pyfunction!(mean_nll, m)?)?;
    m.add_function(wrap_pyfunction!(relative_frobenius_error, m)?)?;
    m.add_class::<PyFeatureStats>()?;
    m.add_class::<PyFeatureGp>()?;
    m.add_class::<PyExactGp>()?;
    Ok(())
}
