//! Bindings of the feature-space GP's marginal-likelihood fit for rows
//! that live in blocks elsewhere (docs/math/gp.rst, feature-space GP,
//! "Distributed evaluation"): the per-block sums of one evaluation
//! (`_core.FeatureLmlSums`: computed from one block, merged exactly,
//! pickled by value), the second pass of an evaluation with a free length
//! scale (`_core.FeatureLmlGradientPass`) and the optimizer that
//! asks Python callables for the merged sums of every evaluation
//! (`_core.feature_gp_optimize_blocks`).

use numpy::{IntoPyArray, PyArray1, PyReadonlyArray1, PyReadonlyArray2};
use pyo3::prelude::*;
use pyo3::types::PyType;

use super::feature_map::PyFeatureMap;
use super::ffi;
use super::gp::{fitted, lml_config, parse_optimize, Fitted};
use crate::gp::{fit_feature_gp_blocks, GradientPass, HyperMap, LmlSums};
use crate::progress::Monitor;
use crate::threads::Parallelism;

/// The sums over rows of one evaluation of the feature-space log marginal
/// likelihood (see [`LmlSums`]), pickled by value.
#[pyclass(module = "randfeat_rs._core", name = "FeatureLmlSums")]
pub(super) struct PyLmlSums {
    inner: LmlSums,
}

#[pymethods]
impl PyLmlSums {
    /// The sums of the rows `(x, y)` of one block under the fitted random
    /// Fourier or Maclaurin map `features` (a Fourier map drawn at
    /// `drawn_length_scale`) at the hyperparameters `values = (l..,
    /// kernel_variance, noise_variance)`, `chunk_size` rows transformed at
    /// a time.
    #[staticmethod]
    #[pyo3(signature = (x, y, *, features, drawn_length_scale, values, chunk_size))]
    #[allow(clippy::too_many_arguments)]
    fn of_rows(
        py: Python<'_>,
        x: PyReadonlyArray2<'_, f64>,
        y: PyReadonlyArray1<'_, f64>,
        features: PyRef<'_, PyFeatureMap>,
        drawn_length_scale: Vec<f64>,
        values: Vec<f64>,
        chunk_size: usize,
    ) -> PyResult<Self> {
        let map = hyper_map(py, &features, drawn_length_scale)?;
        let (xv, yv) = (x.as_array(), y.as_array());
        let inner = ffi::call_monitored(py, None, |monitor| {
            LmlSums::of_rows(
                &map,
                &values,
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
    /// noise_variance)`, the length-scale entries 0 (those are the summed
    /// `of_rows` of `gradient_pass`); `center_y` subtracts the target mean.
    #[pyo3(signature = (*, center_y))]
    fn log_marginal_likelihood(&self, py: Python<'_>, center_y: bool) -> PyResult<(f64, Vec<f64>)> {
        let sums = &self.inner;
        let (grad, gp) = ffi::call(py, || sums.evaluate(center_y, Parallelism::Rayon))?;
        Ok((gp.lml, grad))
    }

    /// The second reduction of an evaluation with a free length scale: the
    /// pass of these (all rows') sums' solve, whose summed `of_rows` over
    /// all rows are the length-scale entries of the gradient; `center_y` as
    /// in `log_marginal_likelihood`.
    #[pyo3(signature = (*, center_y))]
    fn gradient_pass(&self, py: Python<'_>, center_y: bool) -> PyResult<PyGradientPass> {
        let sums = &self.inner;
        let inner = ffi::call(py, || sums.gradient_pass(center_y, Parallelism::Rayon))?;
        Ok(PyGradientPass { inner })
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

/// The map of `features` drawn at `length_scale` (one value, or one per
/// input dimension), whose hyperparameters move with the draw fixed.
fn hyper_map(
    py: Python<'_>,
    features: &PyFeatureMap,
    length_scale: Vec<f64>,
) -> PyResult<HyperMap> {
    ffi::map_result(py, HyperMap::new(features.inner.clone(), length_scale))
}

/// The second reduction of an evaluation with a free length scale (see
/// [`GradientPass`]): the driver's solve, sent to every block, pickled
/// by value.
#[pyclass(module = "randfeat_rs._core", name = "FeatureLmlGradientPass", frozen)]
pub(super) struct PyGradientPass {
    inner: GradientPass,
}

#[pymethods]
impl PyGradientPass {
    /// The length-scale gradient's sums of the rows `(x, y)` of one block
    /// under the fitted random Fourier map `features` drawn at
    /// `drawn_length_scale`, `chunk_size` rows transformed at a time: one
    /// entry per length scale, then the number of rows (float64; the
    /// entries of blocks add up to those of their rows together).
    #[pyo3(signature = (x, y, *, features, drawn_length_scale, chunk_size))]
    fn of_rows<'py>(
        &self,
        py: Python<'py>,
        x: PyReadonlyArray2<'_, f64>,
        y: PyReadonlyArray1<'_, f64>,
        features: PyRef<'_, PyFeatureMap>,
        drawn_length_scale: Vec<f64>,
        chunk_size: usize,
    ) -> PyResult<Bound<'py, PyArray1<f64>>> {
        let map = hyper_map(py, &features, drawn_length_scale)?;
        let (xv, yv, pass) = (x.as_array(), y.as_array(), &self.inner);
        let out = ffi::call_monitored(py, None, |monitor| {
            pass.of_rows(&map, xv, yv, chunk_size, Parallelism::Rayon, monitor)
        })?;
        Ok(out.into_pyarray(py))
    }

    /// Pickles the pass by value (see [`ffi::reduce`]).
    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<ffi::Reduced<'py>> {
        ffi::reduce(slf, &slf.get().inner)
    }

    /// The pass of a pickled payload (see [`ffi::from_state`]), checked by
    /// [`GradientPass::validate`].
    #[classmethod]
    fn _from_state(cls: &Bound<'_, PyType>, state: &[u8]) -> PyResult<Self> {
        let inner: GradientPass = ffi::from_state::<Self, _>(cls.py(), state)?;
        ffi::map_result(cls.py(), inner.validate())?;
        Ok(Self { inner })
    }
}

/// Fits the hyperparameters of the feature-space GP of a fitted random
/// Fourier or Maclaurin map on rows held elsewhere
/// ([`fit_feature_gp_blocks`]): the optimizer, restarts and coarse levels
/// of `feature_gp_optimize`, every evaluation the `FeatureLmlSums` of all
/// rows that `evaluate(values, level)` returns (level 0: all `n_rows` rows;
/// level `j + 1`: the rows `0, 4, 8, ...` of level `j`) and, with a free
/// length scale outside the profiled search (per-dimension ones), the summed
/// `FeatureLmlGradientPass.of_rows` of all rows of the level that
/// `gradient_pass(pass, level)` returns. `noise_variance` is the fixed or
/// initial noise variance; `data_length_scale` the median pairwise distance
/// of the inputs (`median_pairwise_distance` of a strided sample of the
/// rows; with `ard` one per dimension, `spread_length_scales`), the start
/// of a free length scale when its LML is higher than at the map's
/// (`None`: the map's). Runs on the calling thread with the GIL (the
/// callables run there); Ctrl-C is checked before every call. Returns what
/// `feature_gp_optimize` returns.
#[pyfunction]
#[pyo3(signature = (features, *, evaluate, gradient_pass, n_rows, length_scale, noise_variance, optimize, n_restarts, seed, center, ard=false, data_length_scale=None, progress=None))]
#[allow(clippy::too_many_arguments)]
fn feature_gp_optimize_blocks<'py>(
    py: Python<'py>,
    features: PyRef<'py, PyFeatureMap>,
    evaluate: Py<PyAny>,
    gradient_pass: Py<PyAny>,
    n_rows: usize,
    length_scale: Vec<f64>,
    noise_variance: f64,
    optimize: Vec<String>,
    n_restarts: usize,
    seed: u64,
    center: bool,
    ard: bool,
    data_length_scale: Option<Vec<f64>>,
    progress: Option<Py<PyAny>>,
) -> PyResult<Fitted<'py>> {
    let optimize = parse_optimize(py, &optimize)?;
    let map = hyper_map(py, &features, length_scale)?;
    let mut cfg = lml_config(
        Some(noise_variance),
        ard,
        optimize,
        n_restarts,
        seed,
        center,
        1,
    );
    cfg.data_length_scale = data_length_scale;
    let monitor = Monitor::new();
    let calls = ffi::Callbacks::new(&monitor, progress.as_ref());
    let sums = |values: &[f64], level: usize| {
        calls.call(|py| {
            let out = evaluate.bind(py).call1((values.to_vec(), level))?;
            let sums = out.downcast::<PyLmlSums>()?;
            let inner = sums.borrow().inner.clone();
            Ok(inner)
        })
    };
    let pass = |pass: &GradientPass, level: usize| {
        calls.call(|py| {
            let payload = Py::new(
                py,
                PyGradientPass {
                    inner: pass.clone(),
                },
            )?;
            let out = gradient_pass.bind(py).call1((payload, level))?;
            let sums: PyReadonlyArray1<'_, f64> = out.extract()?;
            Ok(sums.as_array().to_vec())
        })
    };
    let fit = fit_feature_gp_blocks(
        &map,
        n_rows,
        &cfg,
        &sums,
        &pass,
        Parallelism::Rayon,
        &monitor,
    );
    let fit = calls.finish(py, fit)?;
    Ok(fitted(py, fit))
}

/// Registers `FeatureLmlSums`, `FeatureLmlGradientPass` and
/// `feature_gp_optimize_blocks`.
pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyLmlSums>()?;
    m.add_class::<PyGradientPass>()?;
    m.add_function(wrap_pyfunction!(feature_gp_optimize_blocks, m)?)
}
