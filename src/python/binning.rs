//! Bindings of [`crate::binning`]: the fitted map as a handle
//! (`_core.BinningMap`: the grids with a vocabulary or hashed columns),
//! pickled by value. The CSR arrays are Rust vectors handed to NumPy
//! without a copy (`IntoPyArray`).

use numpy::{IntoPyArray, PyArray2, PyReadonlyArray2};
use pyo3::prelude::*;
use pyo3::types::{PyAny, PyTuple, PyType};

use super::ffi::{self, with_float_view, FloatArray2};
use crate::binning::{
    kernel_by_name, BinColumns, BinningGrids, BinningMap, CsrIndex, CsrMatrix, Vocabulary,
};
use crate::real::Real;
use crate::threads::Parallelism;

/// A fitted random binning map (docs/math/binning.rst), pickled by value.
#[pyclass(name = "BinningMap", module = "randfeat_rs._core", frozen)]
pub(super) struct PyBinningMap {
    inner: BinningMap,
}

fn index_array<'py>(py: Python<'py>, v: CsrIndex) -> Bound<'py, PyAny> {
    match v {
        CsrIndex::I32(v) => v.into_pyarray(py).into_any(),
        CsrIndex::I64(v) => v.into_pyarray(py).into_any(),
    }
}

/// `(data, indices, indptr, n_cols)`, the arrays owned by Rust buffers.
fn csr_tuple<'py, T: Real + numpy::Element>(
    py: Python<'py>,
    m: CsrMatrix<T>,
) -> PyResult<Bound<'py, PyTuple>> {
    let data = m.data.into_pyarray(py).into_any();
    let indices = index_array(py, m.indices);
    let indptr = index_array(py, m.indptr);
    let n_cols = m.n_cols.into_pyobject(py)?.into_any();
    PyTuple::new(py, [data, indices, indptr, n_cols])
}

/// A rough count of the work per row of the keys of `grids` (a hash step
/// per grid and dimension, and a sort of the row's `P` keys), in the units
/// of [`ffi::call_rows`]: hashing and sorting run at about a scalar
/// operation a cycle, well below the floating-point rate those units
/// assume, hence the factor.
fn key_row_flops(grids: &BinningGrids) -> f64 {
    let (np, d) = (grids.n_grids() as f64, grids.n_features() as f64);
    64.0 * np * (d + np.log2() + 1.0)
}

/// `BinningMap::fit` on `x`, as `(handle, training features or None)`. In
/// vocabulary mode the keys of `x` are computed in row ranges that Ctrl-C
/// can stop between ([`ffi::call_rows`]), then numbered under a monitor
/// that Ctrl-C cancels ([`ffi::call_monitored`]).
fn fit_view<'py, T: Real + numpy::Element>(
    py: Python<'py>,
    grids: BinningGrids,
    x: ndarray::ArrayView2<'_, T>,
    hashing: Option<u64>,
) -> PyResult<(PyBinningMap, Option<Bound<'py, PyTuple>>)> {
    if hashing.is_some() {
        let (inner, _) = ffi::call(py, || {
            BinningMap::fit(grids, x, hashing, Parallelism::Rayon)
        })?;
        return Ok((PyBinningMap { inner }, None));
    }
    let np = grids.n_grids();
    let mut keys = ffi::map_result(py, grids.key_buffer(x.nrows()))?;
    let slots = &mut keys[..];
    let g = &grids;
    // The output of a row: its `P` 64-bit keys.
    let row_bytes = (8 * np) as f64;
    ffi::call_rows(
        py,
        x.nrows(),
        key_row_flops(g),
        row_bytes,
        None,
        |r, par| {
            let out = &mut slots[r.start * np..r.end * np];
            g.keys_into(x.slice(ndarray::s![r, ..]), out, par)
        },
    )?;
    let (vocabulary, z) = ffi::call_monitored(py, None, |monitor| {
        Vocabulary::from_keys::<T>(keys, np, Parallelism::Rayon, monitor)
    })?;
    let inner = BinningMap::with_vocabulary(grids, vocabulary);
    Ok((PyBinningMap { inner }, Some(csr_tuple(py, z)?)))
}

/// What the fits return: the handle and, in vocabulary mode, the training
/// features `(data, indices, indptr, n_cols)`.
type Fitted<'py> = (PyBinningMap, Option<Bound<'py, PyTuple>>);

#[pymethods]
impl PyBinningMap {
    /// Draws `n_grids` grids for `kernel` from `seed` and fits the map on
    /// `x`: the vocabulary of `x` when `hashing` is None (the training
    /// features are returned too), else `hashing` hashed columns (`x` is not
    /// read, None is returned for the features).
    #[staticmethod]
    #[pyo3(signature = (x, *, n_grids, kernel, length_scale, seed, hashing=None))]
    fn fit<'py>(
        py: Python<'py>,
        x: FloatArray2<'py>,
        n_grids: usize,
        kernel: &str,
        length_scale: f64,
        seed: u64,
        hashing: Option<u64>,
    ) -> PyResult<Fitted<'py>> {
        let d = x.dim().1;
        let grids = ffi::call(py, || {
            let k = kernel_by_name(kernel, length_scale)?;
            BinningGrids::draw(k.as_ref(), n_grids, d, seed)
        })?;
        with_float_view!(x, |v| fit_view(py, grids, v, hashing))
    }

    /// The map of given grids (`pitches` and `shifts`, `n_grids x d`, and
    /// the bin-hash seed) fitted on `x`, as in `fit`.
    #[staticmethod]
    #[pyo3(signature = (x, *, pitches, shifts, hash_seed, hashing=None))]
    fn fit_grids<'py>(
        py: Python<'py>,
        x: FloatArray2<'py>,
        pitches: PyReadonlyArray2<'py, f64>,
        shifts: PyReadonlyArray2<'py, f64>,
        hash_seed: u64,
        hashing: Option<u64>,
    ) -> PyResult<Fitted<'py>> {
        let (p, s) = (pitches.as_array(), shifts.as_array());
        let grids = ffi::call(py, || {
            BinningGrids::from_parts(p.to_owned(), s.to_owned(), hash_seed)
        })?;
        with_float_view!(x, |v| fit_view(py, grids, v, hashing))
    }

    /// Grid pitches `delta`, `n_grids x d` (a copy).
    #[getter]
    fn pitches<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray2<f64>> {
        self.inner.grids().pitches().clone().into_pyarray(py)
    }

    /// Grid shifts `u`, `n_grids x d` (a copy).
    #[getter]
    fn shifts<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray2<f64>> {
        self.inner.grids().shifts().clone().into_pyarray(py)
    }

    /// Seed of the 64-bit bin hash.
    #[getter]
    fn hash_seed(&self) -> u64 {
        self.inner.grids().hash_seed()
    }

    /// Vocabulary mode: the bin key of every column (None when hashed).
    #[getter]
    fn vocabulary<'py>(&self, py: Python<'py>) -> Option<Bound<'py, numpy::PyArray1<u64>>> {
        match self.inner.columns() {
            BinColumns::Vocabulary(v) => Some(v.keys().to_vec().into_pyarray(py)),
            BinColumns::Hashed(_) => None,
        }
    }

    /// Vocabulary mode: the first column of each grid and the total
    /// (`n_grids + 1` entries; None when hashed).
    #[getter]
    fn grid_offsets<'py>(&self, py: Python<'py>) -> Option<Bound<'py, numpy::PyArray1<u64>>> {
        match self.inner.columns() {
            BinColumns::Vocabulary(v) => Some(v.offsets().to_vec().into_pyarray(py)),
            BinColumns::Hashed(_) => None,
        }
    }

    /// The number of output columns.
    #[getter]
    fn n_columns(&self) -> u64 {
        self.inner.n_columns()
    }

    /// The features of `x` (float32/float64): `(data, indices, indptr,
    /// n_cols)`.
    fn transform<'py>(
        &self,
        py: Python<'py>,
        x: FloatArray2<'py>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let map = &self.inner;
        with_float_view!(x, |v| {
            // Row ranges that Ctrl-C can stop between, stacked.
            let mut pieces = Vec::new();
            // The output of a row: `P` column indices and values (and the
            // keys they come from), at most 16 bytes each.
            let row_bytes = (16 * map.grids().n_grids()) as f64;
            let row_flops = key_row_flops(map.grids());
            ffi::call_rows(py, v.nrows(), row_flops, row_bytes, None, |r, par| {
                pieces.push(map.transform(v.slice(ndarray::s![r, ..]), par)?);
                Ok(())
            })?;
            csr_tuple(py, CsrMatrix::vstack(pieces, map.n_columns()))
        })
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
    m.add_class::<PyBinningMap>()?;
    Ok(())
}
