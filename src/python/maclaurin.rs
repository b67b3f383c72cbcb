//! Bindings of [`crate::maclaurin`]: the fitted map as an opaque handle
//! (`_core.MaclaurinMap`), built by `fit` or rebuilt from its fitted
//! allocation, center and seed by `build` (used after unpickling).

use ndarray::s;
use numpy::{PyArray2, PyReadonlyArray2};
use pyo3::prelude::*;
use pyo3::types::PyAny;

use super::ffi;
use crate::maclaurin::map::{AllocationStrategy, MaclaurinConfig, MaclaurinMap};
use crate::maclaurin::MaclaurinKernel;
use crate::progress::Monitor;
use crate::real::Real;
use crate::sketch::SketchKind;
use crate::threads::Parallelism;

/// The map's settings as the Python side passes them: one dict (the
/// estimator's `_core_settings()`), shared by `fit` and `build`.
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
struct Settings {
    n_components: usize,
    kernel: String,
    degree: u32,
    bias: f64,
    length_scale: f64,
    kernel_variance: f64,
    sketch: String,
    complex_weights: bool,
    min_degree: u32,
    max_degree: u32,
    n_subsample: usize,
    h01: bool,
}

impl Settings {
    /// Translates the settings and the allocation mode (`explicit` holds
    /// the counts of `"explicit"`) into a [`MaclaurinConfig`].
    fn config(
        self,
        allocation: &str,
        explicit: Option<Vec<usize>>,
    ) -> crate::Result<MaclaurinConfig> {
        let kernel = MaclaurinKernel::parse(&self.kernel, self.degree, self.bias)?;
        let allocation = match (allocation, explicit) {
            ("optimized", None) => AllocationStrategy::Optimized,
            ("random", None) => AllocationStrategy::Random,
            ("explicit", Some(c)) => AllocationStrategy::Explicit(c),
            (other, _) => {
                return Err(crate::Error::invalid(
                    "allocation",
                    format!(
                        "expected \"optimized\", \"random\" or an array of counts, got {other:?}"
                    ),
                ))
            }
        };
        Ok(MaclaurinConfig {
            n_components: self.n_components,
            kernel,
            length_scale: self.length_scale,
            kernel_variance: self.kernel_variance,
            sketch: SketchKind::parse(&self.sketch)?,
            complex: self.complex_weights,
            allocation,
            min_degree: self.min_degree,
            max_degree: self.max_degree,
            n_subsample: self.n_subsample,
            h01: self.h01,
        })
    }
}

/// A fitted Maclaurin feature map (ALGORITHMS.md 3.3, 4.7).
#[pyclass(name = "MaclaurinMap", module = "randfeat_rs._core", frozen)]
pub(crate) struct PyMaclaurinMap {
    pub(crate) inner: MaclaurinMap,
}

fn is_f32(x: &Bound<'_, PyAny>) -> bool {
    x.downcast::<PyArray2<f32>>().is_ok()
}

fn fit_typed<T: Real + numpy::Element>(
    py: Python<'_>,
    x: &Bound<'_, PyAny>,
    cfg: &MaclaurinConfig,
    seed: u64,
    progress: Option<&Bound<'_, PyAny>>,
) -> PyResult<MaclaurinMap> {
    let x: PyReadonlyArray2<'_, T> = x.extract()?;
    let view = x.as_array();
    ffi::call_monitored(py, progress, |monitor: &Monitor| {
        MaclaurinMap::fit(view, cfg, seed, Parallelism::Rayon, monitor)
    })
}

fn transform_typed<'py, T: Real + numpy::Element>(
    py: Python<'py>,
    map: &MaclaurinMap,
    x: &Bound<'py, PyAny>,
    center: Option<Vec<f64>>,
    progress: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let x: PyReadonlyArray2<'py, T> = x.extract()?;
    let src = x.as_array();
    // Per output column, one projection of the input per degree.
    let row_flops = (map.width() * 2 * map.dim() * map.degree().max(1) as usize) as f64;
    let out = ffi::call_rows_with_output(
        py,
        src.nrows(),
        map.width(),
        row_flops,
        progress,
        |r, dst| {
            let rows = src.slice(s![r, ..]);
            match &center {
                Some(c) => map.transform_centered_into(rows, c, dst, Parallelism::Rayon),
                None => map.transform_into(rows, dst, Parallelism::Rayon),
            }
        },
    )?;
    Ok(out.into_any())
}

#[pymethods]
impl PyMaclaurinMap {
    /// Fits the map on `x` (float32/float64, 2-D, C order): center,
    /// allocation and random sketches from `seed`. `progress`, when given,
    /// is called as `progress(stage, done, total, messages)` while it runs.
    #[staticmethod]
    #[pyo3(signature = (x, settings, allocation, explicit, seed, progress=None))]
    fn fit(
        py: Python<'_>,
        x: &Bound<'_, PyAny>,
        settings: Settings,
        allocation: &str,
        explicit: Option<Vec<usize>>,
        seed: u64,
        progress: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let cfg = ffi::map_result(py, settings.config(allocation, explicit))?;
        let inner = if is_f32(x) {
            fit_typed::<f32>(py, x, &cfg, seed, progress)?
        } else {
            fit_typed::<f64>(py, x, &cfg, seed, progress)?
        };
        Ok(Self { inner })
    }

    /// Rebuilds a fitted map from its allocation (index = degree), center
    /// and seed: the same random sketches as the original fit.
    #[staticmethod]
    #[pyo3(signature = (dim, counts, center, settings, allocation, seed))]
    fn build(
        py: Python<'_>,
        dim: usize,
        counts: Vec<usize>,
        center: Option<Vec<f64>>,
        settings: Settings,
        allocation: &str,
        seed: u64,
    ) -> PyResult<Self> {
        let explicit = (allocation == "explicit").then(|| counts.clone());
        let cfg = ffi::map_result(py, settings.config(allocation, explicit))?;
        let inner = ffi::call(py, || {
            MaclaurinMap::rebuild(&cfg, dim, counts, center, seed)
        })?;
        Ok(Self { inner })
    }

    /// Features per degree (index = degree).
    #[getter]
    fn allocation(&self) -> Vec<usize> {
        self.inner.allocation().to_vec()
    }

    /// Truncation degree `p`.
    #[getter]
    fn degree(&self) -> u32 {
        self.inner.degree()
    }

    /// The optimized objective (predicted mean squared kernel error), or None.
    #[getter]
    fn objective(&self) -> Option<f64> {
        self.inner.objective()
    }

    /// The center (Gaussian kernel), or None.
    #[getter]
    fn center(&self) -> Option<Vec<f64>> {
        self.inner.center().map(<[f64]>::to_vec)
    }

    /// `(pairs, most pairs dropped from one term)` of the pair statistics.
    #[getter]
    fn dropped_pairs(&self) -> (u64, u64) {
        self.inner.dropped_pairs()
    }

    /// Output width.
    #[getter]
    fn width(&self) -> usize {
        self.inner.width()
    }

    /// `Φ(x)` with the fitted center, or with `center` when given;
    /// `progress` as in `fit`.
    #[pyo3(signature = (x, center=None, progress=None))]
    fn transform<'py>(
        &self,
        py: Python<'py>,
        x: &Bound<'py, PyAny>,
        center: Option<Vec<f64>>,
        progress: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        if is_f32(x) {
            transform_typed::<f32>(py, &self.inner, x, center, progress)
        } else {
            transform_typed::<f64>(py, &self.inner, x, center, progress)
        }
    }
}

pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyMaclaurinMap>()?;
    Ok(())
}
