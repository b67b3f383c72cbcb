//! Bindings of [`crate::feature_map`]: `_core.FeatureMap`, the handle of
//! every fitted dense map ([`AnyFeatureMap`]). Its static methods fit one
//! (random Fourier features, a polynomial sketch, Maclaurin or Nyström
//! features); the estimators hold it, read its fitted parameters through
//! [`PyFeatureMap::param`], transform and accumulate statistics on either
//! device through it, and pickle it by value.

use ndarray::{s, ArrayView2, ArrayViewMut2};
use numpy::{IntoPyArray, PyReadonlyArray1};
use pyo3::prelude::*;
use pyo3::types::{PyAny, PyType};

use super::ffi::{self, with_float_view, FloatArray2};
use super::gp::PyFeatureStats;
use super::maclaurin::{allocation_strategy, dropped_pairs_warning};
use super::sketch::sketch_params;
use crate::error::Error;
use crate::feature_map::{self, AnyFeatureMap, FeatureMap};
use crate::fourier::{FourierConfig, FourierFeatures, Projection, Sampler, Variant};
use crate::gpu::Device;
use crate::kernels::Kernel;
use crate::maclaurin::map::{MaclaurinConfig, MaclaurinMap};
use crate::maclaurin::MaclaurinKernel;
use crate::nystroem::NystroemFeatures;
use crate::progress::Monitor;
use crate::real::Real;
use crate::sketch::{PolynomialConfig, PolynomialFeatures, SketchKind};
use crate::threads::Parallelism;

/// A fitted dense feature map (random Fourier, polynomial sketch, Maclaurin
/// or Nyström features), pickled by value.
#[pyclass(name = "FeatureMap", module = "randfeat_rs._core", frozen)]
pub(super) struct PyFeatureMap {
    pub(super) inner: AnyFeatureMap,
}

/// `Φ(x)` (or `Φ(x − center)`) into a new array of `x`'s dtype: on the CPU
/// in row ranges with a check for Ctrl-C between two (and progress reports
/// when `progress` is given); the GPU streams its own chunks in one call.
fn transform_view<'py, T: Real + numpy::Element>(
    py: Python<'py>,
    map: &AnyFeatureMap,
    x: ArrayView2<'_, T>,
    device: Device,
    center: Option<&[f64]>,
    progress: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    // Features that overflow (products of projections far beyond the length
    // scale) are refused by the core's transforms.
    let transform =
        |src: ArrayView2<'_, T>, dst: ArrayViewMut2<'_, T>, par: Parallelism| match (center, map) {
            (None, _) => feature_map::transform_into(map, src, dst, device, par),
            (Some(c), AnyFeatureMap::Maclaurin(m)) => {
                feature_map::transform_centered_into(m, src, c, dst, device, par)
            }
            (Some(_), _) => Err(Error::invalid(
                "center",
                "only Maclaurin features can be centered",
            )),
        };
    let (rows, cols) = (x.nrows(), map.n_components());
    let out = if device == Device::Cpu {
        ffi::call_rows_with_output(
            py,
            "n_components",
            rows,
            cols,
            map.row_flops(),
            progress,
            |r, dst, par| transform(x.slice(s![r, ..]), dst, par),
        )?
    } else {
        ffi::call_with_output(py, "n_components", rows, cols, |dst| {
            transform(x, dst, Parallelism::Rayon)
        })?
    };
    Ok(out.into_any())
}

/// The Fourier map's fitted parameter `name`.
fn fourier_param<'py>(
    py: Python<'py>,
    m: &FourierFeatures,
    name: &str,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    Ok(Some(match name {
        "frequencies" => m.frequencies().into_pyarray(py).into_any(),
        "phases" => m
            .phases
            .clone()
            .map(|b| b.into_pyarray(py))
            .into_pyobject(py)?
            .into_any(),
        "sorf_signs" => match &m.projection {
            Projection::Structured { signs, .. } => signs.clone().into_pyarray(py).into_any(),
            Projection::Dense(_) => py.None().into_bound(py),
        },
        "n_frequencies" => m.n_frequencies().into_pyobject(py)?.into_any(),
        "scale" => m.scale().into_pyobject(py)?.into_any(),
        _ => return Ok(None),
    }))
}

/// The Maclaurin map's fitted parameter `name`.
fn maclaurin_param<'py>(
    py: Python<'py>,
    m: &MaclaurinMap,
    name: &str,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    Ok(Some(match name {
        "allocation" => {
            let counts: Vec<i64> = m.allocation().iter().map(|&c| c as i64).collect();
            counts.into_pyarray(py).into_any()
        }
        "truncation_degree" => m.degree().into_pyobject(py)?.into_any(),
        "objective" => m
            .objective()
            .unwrap_or(f64::NAN)
            .into_pyobject(py)?
            .into_any(),
        "center" => m
            .center()
            .map(|c| c.to_vec().into_pyarray(py))
            .into_pyobject(py)?
            .into_any(),
        "dropped_pairs_warning" => dropped_pairs_warning(m).into_pyobject(py)?.into_any(),
        _ => return Ok(None),
    }))
}

#[pymethods]
impl PyFeatureMap {
    /// Random Fourier features for rows of `n_features_in` columns at the
    /// length scale(s) `length_scale` (one value, or one per input
    /// dimension), every random parameter drawn from `seed`
    /// (docs/math/fourier.rst).
    #[staticmethod]
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (n_features_in, *, n_components, kernel, length_scale, kernel_variance,
                        sampler, variant, seed))]
    fn fourier(
        py: Python<'_>,
        n_features_in: usize,
        n_components: usize,
        kernel: &str,
        length_scale: Vec<f64>,
        kernel_variance: f64,
        sampler: &str,
        variant: &str,
        seed: u64,
    ) -> PyResult<Self> {
        let cfg = ffi::map_result(
            py,
            (|| {
                Ok(FourierConfig {
                    n_components,
                    kernel: Kernel::from_name(kernel)?,
                    length_scale: 1.0,
                    kernel_variance,
                    sampler: Sampler::from_name(sampler)?,
                    variant: Variant::from_name(variant)?,
                })
            })(),
        )?;
        let map = ffi::call(py, || {
            FourierFeatures::fit_with_length_scales(&cfg, n_features_in, &length_scale, seed)
        })?;
        Ok(Self { inner: map.into() })
    }

    /// The polynomial-kernel map `(x.y / l^2 + c)^degree` of a sketch for
    /// rows of `n_features_in` columns, with `n_components` output columns
    /// (a trailing zero column for an odd width with complex weights), its
    /// random parameters drawn from `seed` (docs/math/sketches.rst).
    #[staticmethod]
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (n_features_in, *, n_components, degree, bias, length_scale, sketch,
                        complex_weights, seed))]
    fn polynomial(
        py: Python<'_>,
        n_features_in: usize,
        n_components: usize,
        degree: u32,
        bias: f64,
        length_scale: f64,
        sketch: &str,
        complex_weights: bool,
        seed: u64,
    ) -> PyResult<Self> {
        let cfg = PolynomialConfig {
            n_components,
            degree,
            bias,
            length_scale,
            sketch: ffi::map_result(py, SketchKind::parse(sketch))?,
            complex: complex_weights,
        };
        let map = ffi::call(py, || PolynomialFeatures::draw(&cfg, n_features_in, seed))?;
        Ok(Self { inner: map.into() })
    }

    /// Maclaurin features fitted on `x` (float32/float64): the center, the
    /// allocation ("optimized", "random" or counts per degree) and the
    /// random sketches from `seed` (docs/math/maclaurin.rst). `progress`,
    /// when given, is called as `progress(stage, done, total, messages)`
    /// while it runs.
    #[staticmethod]
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (x, *, n_components, kernel, degree, bias, length_scale, kernel_variance,
                        sketch, complex_weights, allocation, min_degree, max_degree, n_subsample,
                        h01, seed, progress=None))]
    fn maclaurin(
        py: Python<'_>,
        x: FloatArray2<'_>,
        n_components: usize,
        kernel: &str,
        degree: Option<u32>,
        bias: f64,
        length_scale: f64,
        kernel_variance: f64,
        sketch: &str,
        complex_weights: bool,
        allocation: &Bound<'_, PyAny>,
        min_degree: u32,
        max_degree: u32,
        n_subsample: usize,
        h01: bool,
        seed: u64,
        progress: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let allocation = allocation_strategy(allocation)?;
        let cfg = ffi::map_result(
            py,
            (|| {
                Ok(MaclaurinConfig {
                    n_components,
                    kernel: MaclaurinKernel::from_options(kernel, degree, bias)?,
                    length_scale,
                    kernel_variance,
                    sketch: SketchKind::parse(sketch)?,
                    complex: complex_weights,
                    allocation,
                    min_degree,
                    max_degree,
                    n_subsample,
                    h01,
                })
            })(),
        )?;
        let map = with_float_view!(x, |v| ffi::call_monitored(py, progress, |m: &Monitor| {
            MaclaurinMap::fit(v, &cfg, seed, Parallelism::Rayon, m)
        }))?;
        Ok(Self { inner: map.into() })
    }

    /// Nyström features on `min(n_components, n)` landmark rows of `x`
    /// drawn from `seed`, at `length_scale` (one value or one per column):
    /// returns the map and the landmarks' row indices.
    #[staticmethod]
    #[pyo3(signature = (x, *, n_components, kernel, length_scale, seed))]
    fn nystroem<'py>(
        py: Python<'py>,
        x: FloatArray2<'_>,
        n_components: usize,
        kernel: &str,
        length_scale: Vec<f64>,
        seed: u64,
    ) -> PyResult<(Self, Bound<'py, numpy::PyArray1<i64>>)> {
        let kernel = ffi::map_result(py, Kernel::from_name(kernel))?;
        let (map, idx) = with_float_view!(x, |v| ffi::call(py, || {
            NystroemFeatures::fit(v, n_components, kernel, &length_scale, seed)
        }))?;
        let idx: Vec<i64> = idx.into_iter().map(|i| i as i64).collect();
        Ok((Self { inner: map.into() }, idx.into_pyarray(py)))
    }

    /// Input columns.
    #[getter]
    fn n_features_in(&self) -> usize {
        self.inner.n_features_in()
    }

    /// Output columns.
    #[getter]
    fn n_components(&self) -> usize {
        self.inner.n_components()
    }

    /// The kind of map: "fourier", "polynomial", "maclaurin" or "nystroem".
    #[getter]
    fn kind(&self) -> &'static str {
        match self.inner {
            AnyFeatureMap::Fourier(_) => "fourier",
            AnyFeatureMap::Polynomial(_) => "polynomial",
            AnyFeatureMap::Maclaurin(_) => "maclaurin",
            AnyFeatureMap::Nystroem(_) => "nystroem",
        }
    }

    /// The fitted parameter `name` of this kind of map, a new object:
    /// Fourier: "frequencies" (formed for the structured sampler),
    /// "phases", "sorf_signs", "n_frequencies", "scale"; polynomial:
    /// "n_sketch_features", "random_params"; Maclaurin: "allocation",
    /// "truncation_degree", "objective" (NaN unless optimized), "center",
    /// "dropped_pairs_warning" (the warning the dropped subsample pairs
    /// call for, or None); Nyström: "landmarks", "normalization".
    fn param<'py>(&self, py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyAny>> {
        let value = match &self.inner {
            AnyFeatureMap::Fourier(m) => fourier_param(py, m, name)?,
            AnyFeatureMap::Polynomial(p) => match name {
                "n_sketch_features" => Some(p.sketch().n_features().into_pyobject(py)?.into_any()),
                "random_params" => Some(sketch_params(py, p.sketch())?.into_any()),
                _ => None,
            },
            AnyFeatureMap::Maclaurin(m) => maclaurin_param(py, m, name)?,
            AnyFeatureMap::Nystroem(m) => match name {
                "landmarks" => Some(m.landmarks.clone().into_pyarray(py).into_any()),
                "normalization" => Some(m.normalization.clone().into_pyarray(py).into_any()),
                _ => None,
            },
        };
        value.ok_or_else(|| {
            let reason = format!("the {} map has no parameter {name:?}", self.kind());
            ffi::to_pyerr(py, Error::invalid("name", reason))
        })
    }

    /// The device "cpu" | "gpu" | "auto" runs on for this map: "cpu" or
    /// "gpu" (InvalidInputError when the map has no GPU kernel and "gpu" was
    /// asked, GpuError when no adapter is usable).
    fn resolve_device(&self, py: Python<'_>, device: &str) -> PyResult<&'static str> {
        let requested = ffi::device(py, device)?;
        let map = &self.inner;
        let got = ffi::call(py, || feature_map::resolve_device(map, requested))?;
        Ok(ffi::device_name(got))
    }

    /// `Phi(x)` on `device` (x's dtype); with `center`, `Phi(x - center)`
    /// (Maclaurin features of the Gaussian kernel). `progress` as in
    /// `maclaurin` (CPU transforms report the stage "rows").
    #[pyo3(signature = (x, device, center=None, progress=None))]
    fn transform<'py>(
        &self,
        py: Python<'py>,
        x: FloatArray2<'py>,
        device: &str,
        center: Option<PyReadonlyArray1<'py, f64>>,
        progress: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let device = ffi::device(py, device)?;
        let center = center.as_ref().map(|c| c.as_array().to_vec());
        let (map, center) = (&self.inner, center.as_deref());
        with_float_view!(x, |v| transform_view(py, map, v, device, center, progress))
    }

    /// Adds the statistics of `(Phi(x), y)` to `stats` on `device`
    /// (`chunk_rows` rows at a time on the CPU; on the GPU `Phi` stays on
    /// the device).
    fn accumulate(
        &self,
        py: Python<'_>,
        mut stats: PyRefMut<'_, PyFeatureStats>,
        x: FloatArray2<'_>,
        y: PyReadonlyArray1<'_, f64>,
        device: &str,
        chunk_rows: usize,
    ) -> PyResult<()> {
        let device = ffi::device(py, device)?;
        let (map, yv, stats) = (&self.inner, y.as_array(), &mut stats.inner);
        with_float_view!(x, |v| ffi::call_monitored(py, None, |m: &Monitor| {
            feature_map::accumulate(map, v, yv, stats, device, chunk_rows, Parallelism::Rayon, m)
        }))
    }

    /// Pickles the map by value (see [`ffi::reduce`]).
    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<ffi::Reduced<'py>> {
        ffi::reduce(slf, &slf.get().inner)
    }

    /// The map of a pickled payload (see [`ffi::from_state`]).
    #[classmethod]
    fn _from_state(cls: &Bound<'_, PyType>, state: &[u8]) -> PyResult<Self> {
        Ok(Self {
            inner: ffi::from_state::<Self, _>(cls.py(), state)?,
        })
    }
}

pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyFeatureMap>()?;
    Ok(())
}
