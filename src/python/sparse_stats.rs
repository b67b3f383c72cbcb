//! Bindings of the sparse GP's streamed sums for fits whose rows live in
//! blocks elsewhere (docs/math/sparse_gp.rst, section Streaming): the
//! prior of an evaluation (`_core.SparsePrior`: inducing inputs, kernel
//! hyperparameters, noise, and the factor of `K_uu`), the first pass's
//! statistics ([`SparseStats`], `_core.SparseStats`) and the second pass's
//! gradient sums ([`GradientSums`], `_core.SparseGradientSums`), each
//! computed from one block of rows, merged exactly, pickled by value, and
//! finished into the model or the objective's gradient; and the optimizer
//! of the in-memory fit on such evaluations
//! (`_core.sparse_gp_optimize_blocks`).

use ndarray::{s, Array2, ArrayView1, ArrayView2};
use numpy::{IntoPyArray, PyArray2, PyReadonlyArray1};
use pyo3::prelude::*;
use pyo3::types::PyType;

use super::ffi::{self, FloatArray2};
use super::gp::parse_optimize;
use super::sparse_gp::{rows_f64, PySparseGp};
use crate::error::{Error, Result};
use crate::gp::optimize::{DataScale, HyperInit, OptimizerConfig};
use crate::gp::sparse::{
    accumulate_gradient, bound, default_chunk_rows, finish, fit_sparse_blocks, Adjoint,
    Bound as SparseBound, GradientSums, InducingInit, InducingPrior, Method, SparseGp,
    SparseGpConfig, SparseStats,
};
use crate::kernels::{Kernel, StationaryKernel};
use crate::progress::Monitor;
use crate::threads::Parallelism;

/// The values that define a [`PySparsePrior`] (its pickled form).
#[derive(Clone, serde::Serialize, serde::Deserialize)]
struct PriorValues {
    z: Array2<f64>,
    params: StationaryKernel,
    noise: f64,
}

impl PriorValues {
    /// `K_uu` and its factor ([`InducingPrior::new`], which checks the
    /// values).
    fn build(&self) -> Result<InducingPrior> {
        InducingPrior::new(
            self.params.clone(),
            self.noise,
            self.z.view(),
            Parallelism::Rayon,
        )
    }
}

/// The prior of one sparse-GP evaluation: inducing inputs `Z` (`M x d`),
/// kernel and hyperparameters, noise variance, and the factor of `K_uu`
/// (docs/math/sparse_gp.rst, section Notation). Pickled by its values;
/// loading refactors `K_uu` (`O(M^3)`, deterministic).
#[pyclass(module = "randfeat_rs._core", name = "SparsePrior", frozen)]
pub(super) struct PySparsePrior {
    values: PriorValues,
    built: InducingPrior,
}

#[pymethods]
impl PySparsePrior {
    /// The prior of kernel `kernel` with `length_scale` (one value, or one
    /// per input column) and `kernel_variance`, noise `noise_variance` and
    /// inducing inputs `inducing` (float32 or float64, `M x d`).
    #[new]
    #[pyo3(signature = (*, inducing, kernel, length_scale, kernel_variance, noise_variance))]
    fn new(
        py: Python<'_>,
        inducing: FloatArray2<'_>,
        kernel: &str,
        length_scale: Vec<f64>,
        kernel_variance: f64,
        noise_variance: f64,
    ) -> PyResult<Self> {
        let params = StationaryKernel {
            kernel: ffi::map_result(py, Kernel::from_name(kernel))?,
            length_scale,
            variance: kernel_variance,
        };
        let values = PriorValues {
            z: rows_f64(inducing),
            params,
            noise: noise_variance,
        };
        Self::from_values(py, values)
    }

    /// The number of inducing inputs `M`.
    #[getter]
    fn n_inducing(&self) -> usize {
        self.built.n_inducing()
    }

    /// Pickles the prior by its values (see [`ffi::reduce`]).
    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<ffi::Reduced<'py>> {
        ffi::reduce(slf, &slf.get().values)
    }

    /// The prior of a pickled payload (see [`ffi::from_state`]), checked
    /// and factored again.
    #[classmethod]
    fn _from_state(cls: &Bound<'_, PyType>, state: &[u8]) -> PyResult<Self> {
        let values: PriorValues = ffi::from_state::<Self, _>(cls.py(), state)?;
        Self::from_values(cls.py(), values)
    }
}

impl PySparsePrior {
    /// Checks the values and factors `K_uu`.
    fn from_values(py: Python<'_>, values: PriorValues) -> PyResult<Self> {
        let built = ffi::call(py, || values.build())?;
        Ok(Self { values, built })
    }
}

/// The rows per chunk of a pass over a block: `chunk_size`, or
/// [`default_chunk_rows`] for `M` inducing inputs.
fn chunk_rows(chunk_size: Option<usize>, m: usize) -> Result<usize> {
    match chunk_size.unwrap_or_else(|| default_chunk_rows(m)) {
        0 => Err(Error::invalid("chunk_size", "must be >= 1, got 0")),
        c => Ok(c),
    }
}

/// The adjoints of a bound evaluated for the gradient.
fn adjoint(b: &SparseBound) -> Result<&Adjoint> {
    b.adjoint
        .as_ref()
        .ok_or_else(|| Error::Internal("a bound without its adjoint".into()))
}

/// Calls `f` on the consecutive chunks of `step` rows of `(x, y)`.
///
/// # Errors
/// [`Error::ShapeMismatch`] when `y` and `x` differ in length; `f`'s.
fn for_chunks(
    x: ArrayView2<'_, f64>,
    y: ArrayView1<'_, f64>,
    step: usize,
    mut f: impl FnMut(ArrayView2<'_, f64>, ArrayView1<'_, f64>) -> Result<()>,
) -> Result<()> {
    if y.len() != x.nrows() {
        return Err(Error::ShapeMismatch {
            name: "length of y (the number of rows of X)",
            expected: x.nrows(),
            got: y.len(),
        });
    }
    for start in (0..x.nrows()).step_by(step) {
        let stop = (start + step).min(x.nrows());
        f(x.slice(s![start..stop, ..]), y.slice(s![start..stop]))?;
    }
    Ok(())
}

/// The first pass's statistics of a sparse GP (docs/math/sparse_gp.rst,
/// section Streaming), pickled by value.
#[pyclass(module = "randfeat_rs._core", name = "SparseStats")]
pub(super) struct PySparseStats {
    inner: SparseStats,
}

#[pymethods]
impl PySparseStats {
    /// The statistics of the rows `(x, y)` (`x` float32 or float64, `n x
    /// d`) under `method` ("vfe" or "fitc") and `prior`, accumulated
    /// `chunk_size` rows at a time (None: `2^18 / M`, at least 256).
    #[staticmethod]
    #[pyo3(signature = (x, y, *, prior, method, chunk_size=None))]
    fn of_rows(
        py: Python<'_>,
        x: FloatArray2<'_>,
        y: PyReadonlyArray1<'_, f64>,
        prior: PyRef<'_, PySparsePrior>,
        method: &str,
        chunk_size: Option<usize>,
    ) -> PyResult<Self> {
        let method = ffi::map_result(py, Method::from_name(method))?;
        let x = rows_f64(x);
        let (xv, yv, prior) = (x.view(), y.as_array(), &prior.built);
        let inner = ffi::call(py, || {
            let step = chunk_rows(chunk_size, prior.n_inducing())?;
            let mut stats = SparseStats::new(method, prior.n_inducing());
            let mut scratch = Vec::new();
            for_chunks(xv, yv, step, |xc, yc| {
                stats.accumulate(prior, xc, yc, &mut scratch, Parallelism::Rayon)
            })?;
            Ok(stats)
        })?;
        Ok(Self { inner })
    }

    /// Adds the statistics of other rows under the same prior (exact).
    fn merge(&mut self, py: Python<'_>, other: PyRef<'_, PySparseStats>) -> PyResult<()> {
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
        self.inner.n
    }

    /// The mean of the accumulated targets (0 when empty).
    #[getter]
    fn y_mean(&self) -> f64 {
        self.inner.y_mean()
    }

    /// The approximation, "vfe" or "fitc".
    #[getter]
    fn method(&self) -> &'static str {
        self.inner.method.name()
    }

    /// The sparse GP of the merged statistics at `prior` (no optimization;
    /// `center_y` subtracts the target mean): the model `SparseGp.fit`
    /// gives on the same rows with these fixed hyperparameters and
    /// inducing inputs.
    #[pyo3(signature = (*, prior, center_y))]
    fn fit(
        &self,
        py: Python<'_>,
        prior: PyRef<'_, PySparsePrior>,
        center_y: bool,
    ) -> PyResult<PySparseGp> {
        let (stats, prior) = (&self.inner, &prior.built);
        let inner = ffi::call(py, || {
            let b = bound(stats, prior, center_y, false, Parallelism::Rayon)?;
            let gp = SparseGp::from_bound(stats.method, prior.clone(), b, 0);
            gp.validate()?;
            Ok(gp)
        })?;
        Ok(PySparseGp { inner })
    }

    /// The second pass over the rows `(x, y)` of one block: the gradient
    /// sums at `prior`, with the adjoints of the bound of these (merged,
    /// all rows') statistics.
    #[pyo3(signature = (x, y, *, prior, center_y, chunk_size=None))]
    fn gradient_sums(
        &self,
        py: Python<'_>,
        x: FloatArray2<'_>,
        y: PyReadonlyArray1<'_, f64>,
        prior: PyRef<'_, PySparsePrior>,
        center_y: bool,
        chunk_size: Option<usize>,
    ) -> PyResult<PySparseGradientSums> {
        let x = rows_f64(x);
        let (xv, yv, prior) = (x.view(), y.as_array(), &prior.built);
        let stats = &self.inner;
        let inner = ffi::call(py, || {
            let step = chunk_rows(chunk_size, prior.n_inducing())?;
            let b = bound(stats, prior, center_y, true, Parallelism::Rayon)?;
            let adj = adjoint(&b)?;
            let (m, d) = prior.z.dim();
            let mut sums = GradientSums::new(stats.method, m, d);
            let mut scratch = Vec::new();
            for_chunks(xv, yv, step, |xc, yc| {
                let par = Parallelism::Rayon;
                accumulate_gradient(&mut sums, adj, prior, xc, yc, b.y_mean, &mut scratch, par)
            })?;
            Ok(sums)
        })?;
        Ok(PySparseGradientSums { inner })
    }

    /// The objective of these (all rows') statistics at `prior` and its
    /// gradient from the merged second-pass `sums`: `(value, d/d(ln l_1,
    /// ..., ln l_k, ln kernel_variance, ln noise_variance), d/dZ)`.
    #[pyo3(signature = (sums, *, prior, center_y))]
    fn objective<'py>(
        &self,
        py: Python<'py>,
        sums: PyRef<'_, PySparseGradientSums>,
        prior: PyRef<'_, PySparsePrior>,
        center_y: bool,
    ) -> PyResult<(f64, Vec<f64>, Bound<'py, PyArray2<f64>>)> {
        let (stats, sums, prior) = (&self.inner, &sums.inner, &prior.built);
        let (value, g) = ffi::call(py, || {
            let b = bound(stats, prior, center_y, true, Parallelism::Rayon)?;
            let adj = adjoint(&b)?;
            if sums.by_inducing.dim() != prior.z.dim() {
                return Err(Error::ShapeMismatch {
                    name: "number of inducing inputs of the gradient sums",
                    expected: prior.n_inducing(),
                    got: sums.by_inducing.nrows(),
                });
            }
            Ok((b.value, finish(adj, prior, sums, Parallelism::Rayon)))
        })?;
        Ok((value, g.hyper, g.inducing.into_pyarray(py)))
    }

    /// Pickles the statistics by value (see [`ffi::reduce`]).
    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<ffi::Reduced<'py>> {
        ffi::reduce(slf, &slf.borrow().inner)
    }

    /// The statistics of a pickled payload (see [`ffi::from_state`]),
    /// checked by [`SparseStats::validate`].
    #[classmethod]
    fn _from_state(cls: &Bound<'_, PyType>, state: &[u8]) -> PyResult<Self> {
        let inner: SparseStats = ffi::from_state::<Self, _>(cls.py(), state)?;
        ffi::map_result(cls.py(), inner.validate())?;
        Ok(Self { inner })
    }
}

/// The second pass's sums of a sparse GP's gradient (docs/math/sparse_gp.rst,
/// section Streaming), pickled by value.
#[pyclass(module = "randfeat_rs._core", name = "SparseGradientSums")]
pub(super) struct PySparseGradientSums {
    inner: GradientSums,
}

#[pymethods]
impl PySparseGradientSums {
    /// Adds the sums of other rows (exact).
    fn merge(&mut self, py: Python<'_>, other: PyRef<'_, PySparseGradientSums>) -> PyResult<()> {
        ffi::map_result(py, self.inner.merge(&other.inner))
    }

    /// An independent copy.
    fn copy(&self) -> Self {
        Self {
            inner: self.inner.clone(),
        }
    }

    /// Pickles the sums by value (see [`ffi::reduce`]).
    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<ffi::Reduced<'py>> {
        ffi::reduce(slf, &slf.borrow().inner)
    }

    /// The sums of a pickled payload (see [`ffi::from_state`]): one
    /// length-scale sum per column of the inducing-input sums, and a
    /// square (FITC) or empty (VFE) `K_uu` part.
    #[classmethod]
    fn _from_state(cls: &Bound<'_, PyType>, state: &[u8]) -> PyResult<Self> {
        let inner: GradientSums = ffi::from_state::<Self, _>(cls.py(), state)?;
        let (m, d) = inner.by_inducing.dim();
        let kuu = inner.row_kuu.nrows();
        let checks = [
            (
                "number of length-scale sums",
                d,
                inner.by_length_scale.len(),
            ),
            ("columns of the K_uu sums", kuu, inner.row_kuu.ncols()),
            ("rows of the K_uu sums", if kuu == 0 { 0 } else { m }, kuu),
        ];
        for (name, expected, got) in checks {
            if expected != got {
                return ffi::map_result(
                    cls.py(),
                    Err(Error::ShapeMismatch {
                        name,
                        expected,
                        got,
                    }),
                );
            }
        }
        Ok(Self { inner })
    }
}

/// Fits a sparse GP's hyperparameters (and with `optimize_inducing` its
/// inducing inputs) on `n_rows` rows of `n_features` columns held
/// elsewhere ([`fit_sparse_blocks`]): the optimizer, restarts, coarse
/// levels and stages of `SparseGp.fit` from the given inducing inputs
/// (`M x d`) and hyperparameters, every evaluation the pair `(SparseStats,
/// SparseGradientSums)` of all rows that `evaluate(prior, level,
/// want_grad)` returns for a `SparsePrior` (level 0: all rows; level `j +
/// 1`: the rows `0, 4, 8, ...` of level `j`); without `want_grad` (the
/// comparison of starts) the value alone is needed and the sums may be
/// `None`. Runs on the calling thread with the GIL (the
/// callable runs there); Ctrl-C is checked before every evaluation.
/// `progress` as in `SparseGp.fit`. `data_length_scale` (one value or one
/// per length scale) and `data_target_variance`, given together, are the
/// data's scale ([`DataScale`]) the fit may start from instead.
#[pyfunction]
#[pyo3(signature = (*, evaluate, n_rows, inducing, method, kernel, length_scale, kernel_variance,
                    noise_variance, ard, optimize, optimize_inducing, n_restarts, max_iter,
                    center_y, seed, data_length_scale=None, data_target_variance=None,
                    progress=None))]
#[allow(clippy::too_many_arguments)]
fn sparse_gp_optimize_blocks(
    py: Python<'_>,
    evaluate: Py<PyAny>,
    n_rows: usize,
    inducing: FloatArray2<'_>,
    method: &str,
    kernel: &str,
    length_scale: Vec<f64>,
    kernel_variance: f64,
    noise_variance: f64,
    ard: bool,
    optimize: Vec<String>,
    optimize_inducing: bool,
    n_restarts: usize,
    max_iter: u64,
    center_y: bool,
    seed: u64,
    data_length_scale: Option<Vec<f64>>,
    data_target_variance: Option<f64>,
    progress: Option<Py<PyAny>>,
) -> PyResult<PySparseGp> {
    let data_scale = match (data_length_scale, data_target_variance) {
        (Some(length_scale), Some(target_variance)) => Some(DataScale {
            length_scale,
            target_variance,
        }),
        (None, None) => None,
        _ => {
            return ffi::map_result(
                py,
                Err(Error::invalid(
                    "data_length_scale",
                    "needs data_target_variance with it (the data's scale is both or neither)",
                )),
            )
        }
    };
    let z = rows_f64(inducing);
    let d = z.ncols();
    let cfg = SparseGpConfig {
        kernel: ffi::map_result(py, Kernel::from_name(kernel))?,
        method: ffi::map_result(py, Method::from_name(method))?,
        n_inducing: z.nrows(),
        inducing: InducingInit::Given(z),
        hyper: HyperInit {
            length_scale: Some(length_scale),
            kernel_variance: Some(kernel_variance),
            noise_variance: Some(noise_variance),
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
        chunk_rows: None,
        device: crate::gpu::Device::Cpu,
        data_scale,
    };
    let monitor = Monitor::new();
    let calls = ffi::Callbacks::new(&monitor, progress.as_ref());
    let sums = |prior: &InducingPrior, level: usize, want_grad: bool| {
        calls.call(|py| {
            let prior = Py::new(
                py,
                PySparsePrior {
                    values: PriorValues {
                        z: prior.z.clone(),
                        params: prior.params.clone(),
                        noise: prior.noise_variance,
                    },
                    built: prior.clone(),
                },
            )?;
            let out = evaluate.bind(py).call1((prior, level, want_grad))?;
            let (stats, sums): (
                PyRef<'_, PySparseStats>,
                Option<PyRef<'_, PySparseGradientSums>>,
            ) = out.extract()?;
            Ok((stats.inner.clone(), sums.map(|s| s.inner.clone())))
        })
    };
    let fit = fit_sparse_blocks(n_rows, d, &cfg, &sums, Parallelism::Rayon, &monitor);
    let inner = calls.finish(py, fit)?;
    Ok(PySparseGp { inner })
}

/// Registers `SparsePrior`, `SparseStats`, `SparseGradientSums` and
/// `sparse_gp_optimize_blocks`.
pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PySparsePrior>()?;
    m.add_class::<PySparseStats>()?;
    m.add_class::<PySparseGradientSums>()?;
    m.add_function(wrap_pyfunction!(sparse_gp_optimize_blocks, m)?)
}
