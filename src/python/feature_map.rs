//! Bindings of [`crate::feature_map`]: `_core.FeatureMap`, a handle on any
//! fitted dense map ([`AnyFeatureMap`]) built from what an estimator stores,
//! with the device resolved, the transform run and the statistics
//! accumulated on either device in Rust.

use ndarray::{s, ArrayView1, ArrayView2};
use numpy::{PyArray2, PyReadonlyArray1, PyReadonlyArray2};
use pyo3::prelude::*;
use pyo3::types::PyAny;

use super::ffi;
use super::gp::PyFeatureStats;
use super::maclaurin::PyMaclaurinMap;
use super::sketch::PyPolySketch;
use crate::error::Error;
use crate::feature_map::{self, AnyFeatureMap, FeatureMap};
use crate::fourier::{FourierFeatures, Projection, Variant};
use crate::gpu::Device;
use crate::kernels::Kernel;
use crate::nystroem::NystroemFeatures;
use crate::progress::Monitor;
use crate::real::Real;
use crate::sketch::PolynomialFeatures;
use crate::threads::Parallelism;

/// A fitted dense feature map (random Fourier, polynomial sketch, Maclaurin
/// or Nyström features).
#[pyclass(name = "FeatureMap", module = "randfeat_rs._core", frozen)]
pub(super) struct PyFeatureMap {
    pub(super) inner: AnyFeatureMap,
}

fn device(py: Python<'_>, name: &str) -> PyResult<Device> {
    ffi::map_result(py, Device::parse("device", name))
}

fn device_name(d: Device) -> &'static str {
    if d == Device::Gpu {
        "gpu"
    } else {
        "cpu"
    }
}

/// A rough count of the floating-point operations per row of a CPU
/// transform (it sizes the row ranges of [`ffi::call_rows`]).
fn row_flops(map: &AnyFeatureMap) -> f64 {
    let (d, width) = (map.n_features_in(), map.n_components());
    let per_column = match map {
        // A projection of the input and a cosine.
        AnyFeatureMap::Fourier(_) => 2 * d + 20,
        // A projection of the input per degree.
        AnyFeatureMap::Polynomial(p) => 2 * d * p.sketch().degree() as usize,
        AnyFeatureMap::Maclaurin(m) => 2 * d * m.degree().max(1) as usize,
        // A kernel value against a landmark, then a row of K_mm^{-1/2}.
        AnyFeatureMap::Nystroem(_) => 3 * d + 2 * width,
    };
    (width * per_column) as f64
}

fn transform_typed<'py, T: Real + numpy::Element>(
    py: Python<'py>,
    map: &AnyFeatureMap,
    x: &Bound<'py, PyAny>,
    device: Device,
    center: Option<Vec<f64>>,
) -> PyResult<Bound<'py, PyAny>> {
    let x: PyReadonlyArray2<'py, T> = x.extract()?;
    let src = x.as_array();
    let par = Parallelism::Rayon;
    let transform =
        |src: ArrayView2<'_, T>, dst: ndarray::ArrayViewMut2<'_, T>| match (&center, map) {
            (None, _) => feature_map::transform_into(map, src, dst, device, par),
            (Some(c), AnyFeatureMap::Maclaurin(m)) => {
                feature_map::transform_centered_into(m, src, c, dst, device, par)
            }
            (Some(_), _) => Err(Error::invalid(
                "center",
                "only Maclaurin features can be centered",
            )),
        };
    let (rows, cols) = (src.nrows(), map.n_components());
    // On the CPU in row ranges, with a check for Ctrl-C between two; the GPU
    // streams its own chunks in one call.
    let out = if device == Device::Cpu {
        ffi::call_rows_with_output(py, rows, cols, row_flops(map), None, |r, dst| {
            transform(src.slice(s![r, ..]), dst)
        })?
    } else {
        ffi::call_with_output(py, rows, cols, |dst| transform(src, dst))?
    };
    Ok(out.into_any())
}

fn accumulate_typed<T: Real + numpy::Element>(
    py: Python<'_>,
    map: &AnyFeatureMap,
    stats: &mut PyFeatureStats,
    x: &Bound<'_, PyAny>,
    y: ndarray::ArrayView1<'_, f64>,
    device: Device,
    chunk_rows: usize,
) -> PyResult<()> {
    let x: PyReadonlyArray2<'_, T> = x.extract()?;
    let xv = x.as_array();
    let stats = &mut stats.inner;
    ffi::call_monitored(py, None, |monitor: &Monitor| {
        let par = Parallelism::Rayon;
        feature_map::accumulate(map, xv, y, stats, device, chunk_rows, par, monitor)
    })
}

/// The fitted map of the arrays `RandomFourierFeatures` stores (the SORF
/// signs for the structured sampler, else the dense frequencies).
fn fourier_map(
    frequencies: ArrayView2<'_, f64>,
    phases: Option<ArrayView1<'_, f64>>,
    signs: Option<ArrayView2<'_, f64>>,
    length_scale: f64,
    kernel_variance: f64,
    variant: Variant,
    n_components: usize,
) -> crate::Result<FourierFeatures> {
    let (m, d) = frequencies.dim();
    let projection = match signs {
        Some(s) => Projection::Structured {
            signs: s.to_owned(),
            n_features: d,
            n_frequencies: m,
            length_scale,
        },
        None => Projection::Dense(frequencies.to_owned()),
    };
    let phases = phases.map(|b| b.to_owned());
    FourierFeatures::from_parts(projection, phases, variant, n_components, kernel_variance)
}

/// The fitted map of the arrays `NystroemFeatures` stores.
fn nystroem_map(
    landmarks: ArrayView2<'_, f64>,
    normalization: ArrayView2<'_, f64>,
    kernel: &str,
    length_scale: f64,
) -> crate::Result<NystroemFeatures> {
    NystroemFeatures::from_parts(
        landmarks.to_owned(),
        normalization.to_owned(),
        Kernel::from_name(kernel)?,
        length_scale,
    )
}

fn is_f32(x: &Bound<'_, PyAny>) -> bool {
    x.downcast::<PyArray2<f32>>().is_ok()
}

#[pymethods]
impl PyFeatureMap {
    /// Random Fourier features from the arrays `RandomFourierFeatures`
    /// stores (`signs` for the structured sampler, else None).
    #[staticmethod]
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (frequencies, phases, signs, length_scale, kernel_variance, variant, n_components))]
    fn fourier(
        py: Python<'_>,
        frequencies: PyReadonlyArray2<'_, f64>,
        phases: Option<PyReadonlyArray1<'_, f64>>,
        signs: Option<PyReadonlyArray2<'_, f64>>,
        length_scale: f64,
        kernel_variance: f64,
        variant: &str,
        n_components: usize,
    ) -> PyResult<Self> {
        let map = Variant::from_name(variant).and_then(|variant| {
            fourier_map(
                frequencies.as_array(),
                phases.as_ref().map(|b| b.as_array()),
                signs.as_ref().map(|s| s.as_array()),
                length_scale,
                kernel_variance,
                variant,
                n_components,
            )
        });
        Ok(Self {
            inner: ffi::map_result(py, map)?.into(),
        })
    }

    /// The polynomial-kernel map of a fitted sketch, with `n_components`
    /// output columns (zero columns beyond the sketch's width).
    #[staticmethod]
    fn polynomial(
        py: Python<'_>,
        sketch: PyRef<'_, PyPolySketch>,
        bias: f64,
        length_scale: f64,
        n_components: usize,
    ) -> PyResult<Self> {
        let map = PolynomialFeatures::new(sketch.inner.clone(), bias, length_scale, n_components);
        Ok(Self {
            inner: ffi::map_result(py, map)?.into(),
        })
    }

    /// The map of a fitted `MaclaurinMap`.
    #[staticmethod]
    fn maclaurin(map: PyRef<'_, PyMaclaurinMap>) -> Self {
        Self {
            inner: map.inner.clone().into(),
        }
    }

    /// Nyström features from the arrays `NystroemFeatures` stores.
    #[staticmethod]
    fn nystroem(
        py: Python<'_>,
        landmarks: PyReadonlyArray2<'_, f64>,
        normalization: PyReadonlyArray2<'_, f64>,
        kernel: &str,
        length_scale: f64,
    ) -> PyResult<Self> {
        let map = nystroem_map(
            landmarks.as_array(),
            normalization.as_array(),
            kernel,
            length_scale,
        );
        Ok(Self {
            inner: ffi::map_result(py, map)?.into(),
        })
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

    /// The device "cpu" | "gpu" | "auto" runs on for this map: "cpu" or
    /// "gpu" (InvalidInputError when the map has no GPU kernel and "gpu" was
    /// asked, GpuError when no adapter is usable).
    fn resolve_device(&self, py: Python<'_>, device: &str) -> PyResult<&'static str> {
        let requested = self::device(py, device)?;
        let map = &self.inner;
        let got = ffi::call(py, || feature_map::resolve_device(map, requested))?;
        Ok(device_name(got))
    }

    /// `Phi(x)` on `device` (x's dtype); with `center`, `Phi(x - center)`
    /// (Maclaurin features of the Gaussian kernel).
    #[pyo3(signature = (x, device, center=None))]
    fn transform<'py>(
        &self,
        py: Python<'py>,
        x: &Bound<'py, PyAny>,
        device: &str,
        center: Option<Vec<f64>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let device = self::device(py, device)?;
        if is_f32(x) {
            transform_typed::<f32>(py, &self.inner, x, device, center)
        } else {
            transform_typed::<f64>(py, &self.inner, x, device, center)
        }
    }

    /// Adds the statistics of `(Phi(x), y)` to `stats` on `device`
    /// (`chunk_rows` rows at a time on the CPU; on the GPU `Phi` stays on
    /// the device).
    fn accumulate(
        &self,
        py: Python<'_>,
        mut stats: PyRefMut<'_, PyFeatureStats>,
        x: &Bound<'_, PyAny>,
        y: PyReadonlyArray1<'_, f64>,
        device: &str,
        chunk_rows: usize,
    ) -> PyResult<()> {
        let device = self::device(py, device)?;
        let yv = y.as_array();
        if is_f32(x) {
            accumulate_typed::<f32>(py, &self.inner, &mut stats, x, yv, device, chunk_rows)
        } else {
            accumulate_typed::<f64>(py, &self.inner, &mut stats, x, yv, device, chunk_rows)
        }
    }
}

pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyFeatureMap>()?;
    Ok(())
}
