//! Bindings of [`crate::gp::dirichlet`]: the per-class statistics
//! (`DirichletClassStats`, accumulated from feature chunks), the fitted
//! feature-space or exact classifier (`DirichletGPC`: a handle on the Rust
//! struct that pickles by value, nothing refitted on loading) and the
//! expected softmax.

use numpy::{IntoPyArray, PyArray2, PyReadonlyArray1, PyReadonlyArray2};
use pyo3::prelude::*;
use pyo3::types::{PyAny, PyBytes, PyType};
use pyo3::{PyClass, PyTypeInfo};
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::ffi;
use crate::error::Error;
use crate::gp::dirichlet::{expected_softmax as softmax, ClassStats, DirichletGpc, ExactGpc};
use crate::gp::GaussianKernel;
use crate::real::Real;
use crate::system::available_memory_bytes;
use crate::threads::Parallelism;

type Arr2<'py> = Bound<'py, PyArray2<f64>>;
/// Latent means and variances (`m x C` each).
type Latents = (ndarray::Array2<f64>, Option<ndarray::Array2<f64>>);
/// What `__reduce__` returns: the class's `_from_state` and its argument.
type Reduced<'py> = (Bound<'py, PyAny>, (Bound<'py, PyBytes>,));

/// The pickled form of the class `C`'s struct: its class name, a NUL,
/// then the struct in CBOR (exact for every `f64`).
fn to_state<'py, C: PyTypeInfo, T: Serialize + Sync>(
    py: Python<'py>,
    value: &T,
) -> PyResult<Bound<'py, PyBytes>> {
    let bytes = ffi::call_inline(py, || {
        let mut out = C::NAME.as_bytes().to_vec();
        out.push(0);
        ciborium::into_writer(value, &mut out)
            .map_err(|e| Error::Internal(format!("serializing {}: {e}", C::NAME)))?;
        Ok(out)
    })?;
    Ok(PyBytes::new(py, &bytes))
}

/// The struct of a payload of [`to_state`] for the class `C` (an
/// `InvalidInputError` naming `state` for any other bytes).
fn from_state<C: PyTypeInfo, T: DeserializeOwned + Send>(
    py: Python<'_>,
    state: &[u8],
) -> PyResult<T> {
    ffi::call_inline(py, || {
        let body = state
            .strip_prefix(C::NAME.as_bytes())
            .and_then(|rest| rest.strip_prefix(&[0]))
            .ok_or_else(|| Error::invalid("state", format!("is not a pickled {}", C::NAME)))?;
        ciborium::from_reader(body)
            .map_err(|e| Error::invalid("state", format!("cannot be read as a {}: {e}", C::NAME)))
    })
}

/// `(type(slf)._from_state, (to_state(value),))`.
fn reduce<'py, C: PyClass + PyTypeInfo, T: Serialize + Sync>(
    slf: &Bound<'py, C>,
    value: &T,
) -> PyResult<Reduced<'py>> {
    let load = slf.as_any().get_type().getattr("_from_state")?;
    Ok((load, (to_state::<C, T>(slf.py(), value)?,)))
}

/// Class codes `0..C` from an int64 array (negative codes refused).
fn labels(py: Python<'_>, y: &PyReadonlyArray1<'_, i64>) -> PyResult<Vec<usize>> {
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

fn is_f32(x: &Bound<'_, PyAny>) -> bool {
    x.downcast::<PyArray2<f32>>().is_ok()
}

/// Per-class feature statistics of a Dirichlet GP classifier: for every
/// class the Gram and column sums of its rows' features.
#[pyclass(module = "randfeat_rs._core", name = "DirichletClassStats")]
struct PyClassStats {
    inner: ClassStats,
}

fn accumulate_typed<T: Real + numpy::Element>(
    py: Python<'_>,
    stats: &mut ClassStats,
    phi: &Bound<'_, PyAny>,
    labels: &[usize],
) -> PyResult<()> {
    let phi: PyReadonlyArray2<'_, T> = phi.extract()?;
    let pv = phi.as_array();
    ffi::call(py, || stats.accumulate(pv, labels, Parallelism::Rayon))
}

#[pymethods]
impl PyClassStats {
    /// Empty statistics for `n_classes` classes and `n_features` features.
    #[new]
    fn new(n_classes: usize, n_features: usize) -> Self {
        Self {
            inner: ClassStats::new(n_classes, n_features),
        }
    }

    /// Adds a chunk: features `phi` (float32/float64, `n x D`) and class
    /// codes `y` (int64, `n`, each in `0..n_classes`).
    fn accumulate(
        &mut self,
        py: Python<'_>,
        phi: &Bound<'_, PyAny>,
        y: PyReadonlyArray1<'_, i64>,
    ) -> PyResult<()> {
        let codes = labels(py, &y)?;
        if is_f32(phi) {
            accumulate_typed::<f32>(py, &mut self.inner, phi, &codes)
        } else {
            accumulate_typed::<f64>(py, &mut self.inner, phi, &codes)
        }
    }

    /// The number of rows accumulated.
    #[getter]
    fn n_samples(&self) -> u64 {
        self.inner.n()
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

fn predict_features<T: Real + numpy::Element>(
    py: Python<'_>,
    model: &DirichletGpc,
    phi: &Bound<'_, PyAny>,
) -> PyResult<Latents> {
    let phi: PyReadonlyArray2<'_, T> = phi.extract()?;
    let pv = phi.as_array();
    ffi::call(py, || model.predict_latent(pv, true, Parallelism::Rayon))
}

#[pymethods]
impl PyDirichletGpc {
    /// Fits every class from per-class feature statistics with
    /// `alpha_epsilon`.
    #[staticmethod]
    fn fit(py: Python<'_>, stats: PyRef<'_, PyClassStats>, alpha_epsilon: f64) -> PyResult<Self> {
        let stats = &stats.inner;
        let model = ffi::call(py, || {
            DirichletGpc::fit(stats, alpha_epsilon, Parallelism::Rayon)
        })?;
        Ok(Self {
            inner: Model::Features(model),
        })
    }

    /// Fits the exact classifier on inputs `x` (`N x d`) with class codes
    /// `y` in `0..n_classes` and the Gaussian kernel of `length_scale` (one
    /// value or one per column) and `kernel_variance`.
    #[staticmethod]
    #[pyo3(signature = (x, y, *, n_classes, length_scale, kernel_variance, alpha_epsilon))]
    fn fit_exact(
        py: Python<'_>,
        x: PyReadonlyArray2<'_, f64>,
        y: PyReadonlyArray1<'_, i64>,
        n_classes: usize,
        length_scale: Vec<f64>,
        kernel_variance: f64,
        alpha_epsilon: f64,
    ) -> PyResult<Self> {
        let codes = labels(py, &y)?;
        let xv = x.as_array();
        let kernel = GaussianKernel {
            length_scale,
            variance: kernel_variance,
        };
        let model = ffi::call(py, || {
            ExactGpc::fit(
                xv,
                &codes,
                n_classes,
                kernel,
                alpha_epsilon,
                available_memory_bytes(),
                Parallelism::Rayon,
            )
        })?;
        Ok(Self {
            inner: Model::Exact(model),
        })
    }

    /// Latent means and variances (`m x C` each): at test features `phi`
    /// (float32/float64, `m x D`) for a feature-space model, at test inputs
    /// (float64, `m x d`) for an exact one.
    fn predict_latent<'py>(
        &self,
        py: Python<'py>,
        x: &Bound<'py, PyAny>,
    ) -> PyResult<(Arr2<'py>, Option<Arr2<'py>>)> {
        let (mean, var) = match &self.inner {
            Model::Features(m) if is_f32(x) => predict_features::<f32>(py, m, x)?,
            Model::Features(m) => predict_features::<f64>(py, m, x)?,
            Model::Exact(m) => {
                let x: PyReadonlyArray2<'_, f64> = x.extract()?;
                let xv = x.as_array();
                ffi::call(py, || m.predict_latent(xv, true, Parallelism::Rayon))?
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

    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<Reduced<'py>> {
        reduce(slf, &slf.get().inner)
    }

    /// The model of a pickled payload.
    #[classmethod]
    fn _from_state(cls: &Bound<'_, PyType>, state: &[u8]) -> PyResult<Self> {
        Ok(Self {
            inner: from_state::<Self, _>(cls.py(), state)?,
        })
    }
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
