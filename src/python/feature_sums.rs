//! Bindings of the feature-space GP's marginal-likelihood fit for rows
//! that live in blocks elsewhere (docs/math/gp.rst, feature-space GP,
//! "Distributed evaluation"): the per-block sums of one evaluation
//! (`_core.FeatureLmlSums`: computed from one block, merged exactly,
//! pickled by value) and the optimizer that asks a Python callable for the
//! merged sums of every evaluation (`_core.feature_gp_optimize_blocks`).

use std::sync::Mutex;

use numpy::{PyReadonlyArray1, PyReadonlyArray2};
use pyo3::prelude::*;
use pyo3::types::PyType;

use super::feature_map::PyFeatureMap;
use super::ffi;
use super::gp::{fitted, lml_config, parse_optimize, Fitted};
use crate::error::{Error, Result};
use crate::gp::{fit_feature_gp_blocks, HyperMap, LmlSums};
use crate::progress::Monitor;
use crate::threads::Parallelism;

/// The sums over rows of one evaluation of the feature-space log marginal
/// likelihood and its gradient (see [`LmlSums`]), pickled by value.
#[pyclass(module = "randfeat_rs._core", name = "FeatureLmlSums")]
pub(super) struct PyLmlSums {
    inner: LmlSums,
}

#[pymethods]
impl PyLmlSums {
    /// The sums of the rows `(x, y)` of one block under the fitted random
    /// Fourier or Maclaurin map `features` (a Fourier map drawn at
    /// `drawn_length_scale`) at the hyperparameters `values = (l..,
    /// kernel_variance, noise_variance)`, with the length-scale parts when
    /// `gradient`, `chunk_size` rows transformed at a time.
    #[staticmethod]
    #[pyo3(signature = (x, y, *, features, drawn_length_scale, values, gradient, chunk_size))]
    #[allow(clippy::too_many_arguments)]
    fn of_rows(
        py: Python<'_>,
        x: PyReadonlyArray2<'_, f64>,
        y: PyReadonlyArray1<'_, f64>,
        features: PyRef<'_, PyFeatureMap>,
        drawn_length_scale: f64,
        values: Vec<f64>,
        gradient: bool,
        chunk_size: usize,
    ) -> PyResult<Self> {
        let map = ffi::map_result(
            py,
            HyperMap::new(features.inner.clone(), vec![drawn_length_scale]),
        )?;
        let (xv, yv) = (x.as_array(), y.as_array());
        let inner = ffi::call_monitored(py, None, |monitor| {
            LmlSums::of_rows(
                &map,
                &values,
                gradient,
                xv,
                yv,
                chunk_size,
                Parallelism::Rayon,
                monitor,
            )
        })?;
        Ok(Self { inner })
    }

    /// Adds the sums of other rows at the same hyperparameters (exact).
    fn merge(&mut self, py: Python<'_>, other: PyRef<'_, PyLmlSums>) -> PyResult<()> {
        ffi::map_result(py, self.inner.merge(&other.inner))
    }

    /// An independent copy.
    fn copy(&self) -> Self {
        Self {
            inner: self.inner.clone(),
        }
    }

    /// The number of rows.
    #[getter]
    fn n(&self) -> u64 {
        self.inner.stats.n
    }

    /// The log marginal likelihood of these (all rows') sums and its
    /// gradient with respect to `(ln l.., ln kernel_variance, ln
    /// noise_variance)` (the length-scale entries 0 without the
    /// length-scale parts); `center_y` subtracts the target mean.
    #[pyo3(signature = (*, center_y))]
    fn log_marginal_likelihood(&self, py: Python<'_>, center_y: bool) -> PyResult<(f64, Vec<f64>)> {
        let sums = &self.inner;
        let (grad, gp) = ffi::call(py, || sums.evaluate(center_y, Parallelism::Rayon))?;
        Ok((gp.lml, grad))
    }

    /// Pickles the sums by value (see [`ffi::reduce`]).
    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<ffi::Reduced<'py>> {
        ffi::reduce(slf, &slf.borrow().inner)
    }

    /// The sums of a pickled payload (see [`ffi::from_state`]), checked by
    /// [`LmlSums::validate`].
    #[classmethod]
    fn _from_state(cls: &Bound<'_, PyType>, state: &[u8]) -> PyResult<Self> {
        let inner: LmlSums = ffi::from_state::<Self, _>(cls.py(), state)?;
        ffi::map_result(cls.py(), inner.validate())?;
        Ok(Self { inner })
    }
}

/// Fits the hyperparameters of the feature-space GP of a fitted random
/// Fourier or Maclaurin map on rows held elsewhere
/// ([`fit_feature_gp_blocks`]): the optimizer, restarts and coarse levels
/// of `feature_gp_optimize`, every evaluation the `FeatureLmlSums` of all
/// rows that `evaluate(values, level, gradient)` returns (level 0: all
/// `n_rows` rows; level `j + 1`: the rows `0, 4, 8, ...` of level `j`).
/// `noise_variance` is the fixed or initial noise variance. Runs on the
/// calling thread with the GIL (the callable runs there); Ctrl-C is checked
/// before every evaluation. Returns what `feature_gp_optimize` returns.
#[pyfunction]
#[pyo3(signature = (features, *, evaluate, n_rows, length_scale, noise_variance, optimize, n_restarts, seed, center, ard=false, progress=None))]
#[allow(clippy::too_many_arguments)]
fn feature_gp_optimize_blocks<'py>(
    py: Python<'py>,
    features: PyRef<'py, PyFeatureMap>,
    evaluate: Py<PyAny>,
    n_rows: usize,
    length_scale: f64,
    noise_variance: f64,
    optimize: Vec<String>,
    n_restarts: usize,
    seed: u64,
    center: bool,
    ard: bool,
    progress: Option<Py<PyAny>>,
) -> PyResult<Fitted<'py>> {
    let optimize = parse_optimize(py, &optimize)?;
    let map = ffi::map_result(
        py,
        HyperMap::new(features.inner.clone(), vec![length_scale]),
    )?;
    let cfg = lml_config(
        Some(noise_variance),
        ard,
        optimize,
        n_restarts,
        seed,
        center,
        1,
    );
    let monitor = Monitor::new();
    // A Python exception of the callable (or Ctrl-C) ends the fit as an
    // interruption and is raised as it is.
    let raised: Mutex<Option<PyErr>> = Mutex::new(None);
    let sums = |values: &[f64], level: usize, gradient: bool| -> Result<LmlSums> {
        Python::attach(|py| {
            let call = || -> PyResult<LmlSums> {
                py.check_signals()?;
                if let Some(p) = &progress {
                    ffi::report(&monitor, p.bind(py))?;
                }
                let out = evaluate
                    .bind(py)
                    .call1((values.to_vec(), level, gradient))?;
                let sums = out.downcast::<PyLmlSums>()?;
                let inner = sums.borrow().inner.clone();
                Ok(inner)
            };
            call().map_err(|e| {
                monitor.cancel();
                *raised.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
                Error::Interrupted
            })
        })
    };
    let fit = fit_feature_gp_blocks(&map, n_rows, &cfg, &sums, Parallelism::Rayon, &monitor);
    if let Some(e) = raised.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(e);
    }
    if let Some(p) = &progress {
        ffi::report(&monitor, p.bind(py))?;
    }
    Ok(fitted(py, ffi::map_result(py, fit)?))
}

/// Registers `FeatureLmlSums` and `feature_gp_optimize_blocks`.
pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyLmlSums>()?;
    m.add_function(wrap_pyfunction!(feature_gp_optimize_blocks, m)?)
}
