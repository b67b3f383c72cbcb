//! Bindings of [`crate::binning`]: draw the grids, fit a vocabulary, and
//! transform in vocabulary or hashing mode. The CSR arrays are Rust vectors
//! handed to NumPy without a copy (`IntoPyArray`).

use numpy::{IntoPyArray, PyArray2, PyReadonlyArray1, PyReadonlyArray2};
use pyo3::prelude::*;
use pyo3::types::{PyAny, PyTuple};

use super::ffi;
use crate::binning::{
    hashed_transform, kernel_by_name, BinningGrids, CsrIndex, CsrMatrix, Vocabulary,
};
use crate::real::Real;
use crate::threads::Parallelism;

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

fn grids_from(
    pitches: PyReadonlyArray2<'_, f64>,
    shifts: PyReadonlyArray2<'_, f64>,
    hash_seed: u64,
) -> crate::Result<BinningGrids> {
    BinningGrids::from_parts(
        pitches.as_array().to_owned(),
        shifts.as_array().to_owned(),
        hash_seed,
    )
}

fn is_f32(x: &Bound<'_, PyAny>) -> bool {
    x.downcast::<PyArray2<f32>>().is_ok()
}

/// `(pitches, shifts, hash_seed)` of freshly drawn grids.
type DrawnGrids<'py> = (Bound<'py, PyArray2<f64>>, Bound<'py, PyArray2<f64>>, u64);

/// Draws `n_grids` grids for `kernel`: returns `(pitches, shifts, hash_seed)`.
#[pyfunction]
fn binning_draw<'py>(
    py: Python<'py>,
    kernel: &str,
    length_scale: f64,
    n_grids: i64,
    n_features: i64,
    seed: u64,
) -> PyResult<DrawnGrids<'py>> {
    let n_grids = usize::try_from(n_grids).unwrap_or(0);
    let n_features = usize::try_from(n_features).unwrap_or(0);
    let kernel = kernel.to_owned();
    let grids = ffi::call(py, move || {
        let k = kernel_by_name(&kernel, length_scale)?;
        BinningGrids::draw(k.as_ref(), n_grids, n_features, seed)
    })?;
    let hash_seed = grids.hash_seed();
    Ok((
        grids.pitches().clone().into_pyarray(py),
        grids.shifts().clone().into_pyarray(py),
        hash_seed,
    ))
}

fn fit_typed<'py, T: Real + numpy::Element>(
    py: Python<'py>,
    x: &Bound<'py, PyAny>,
    grids: BinningGrids,
) -> PyResult<Bound<'py, PyTuple>> {
    let x: PyReadonlyArray2<'py, T> = x.extract()?;
    let view = x.as_array();
    let (vocab, z) = ffi::call(py, || Vocabulary::fit(&grids, view, Parallelism::Rayon))?;
    let keys = vocab.keys().to_vec().into_pyarray(py).into_any();
    let offsets = vocab.offsets().to_vec().into_pyarray(py).into_any();
    let csr = csr_tuple(py, z)?.into_any();
    PyTuple::new(py, [keys, offsets, csr])
}

/// Learns the vocabulary of `x`: returns `(keys, offsets, (data, indices,
/// indptr, n_cols))`, the last being the training features.
#[pyfunction]
fn binning_fit<'py>(
    py: Python<'py>,
    x: &Bound<'py, PyAny>,
    pitches: PyReadonlyArray2<'py, f64>,
    shifts: PyReadonlyArray2<'py, f64>,
    hash_seed: u64,
) -> PyResult<Bound<'py, PyTuple>> {
    let grids = ffi::map_result(py, grids_from(pitches, shifts, hash_seed))?;
    if is_f32(x) {
        fit_typed::<f32>(py, x, grids)
    } else {
        fit_typed::<f64>(py, x, grids)
    }
}

fn transform_typed<'py, T: Real + numpy::Element>(
    py: Python<'py>,
    x: &Bound<'py, PyAny>,
    grids: BinningGrids,
    keys: Vec<u64>,
    offsets: Vec<u64>,
) -> PyResult<Bound<'py, PyTuple>> {
    let x: PyReadonlyArray2<'py, T> = x.extract()?;
    let view = x.as_array();
    let z = ffi::call(py, || {
        Vocabulary::from_parts(keys, offsets)?.transform(&grids, view, Parallelism::Rayon)
    })?;
    csr_tuple(py, z)
}

/// Vocabulary-mode features of `x`: `(data, indices, indptr, n_cols)`.
#[pyfunction]
fn binning_transform<'py>(
    py: Python<'py>,
    x: &Bound<'py, PyAny>,
    pitches: PyReadonlyArray2<'py, f64>,
    shifts: PyReadonlyArray2<'py, f64>,
    hash_seed: u64,
    keys: PyReadonlyArray1<'py, u64>,
    offsets: PyReadonlyArray1<'py, u64>,
) -> PyResult<Bound<'py, PyTuple>> {
    let grids = ffi::map_result(py, grids_from(pitches, shifts, hash_seed))?;
    let keys = keys.as_array().to_vec();
    let offsets = offsets.as_array().to_vec();
    if is_f32(x) {
        transform_typed::<f32>(py, x, grids, keys, offsets)
    } else {
        transform_typed::<f64>(py, x, grids, keys, offsets)
    }
}

fn hashed_typed<'py, T: Real + numpy::Element>(
    py: Python<'py>,
    x: &Bound<'py, PyAny>,
    grids: BinningGrids,
    n_columns: u64,
) -> PyResult<Bound<'py, PyTuple>> {
    let x: PyReadonlyArray2<'py, T> = x.extract()?;
    let view = x.as_array();
    let z = ffi::call(py, || {
        hashed_transform(&grids, view, n_columns, Parallelism::Rayon)
    })?;
    csr_tuple(py, z)
}

/// Hashing-mode features of `x` with `n_columns` columns:
/// `(data, indices, indptr, n_cols)`.
#[pyfunction]
fn binning_transform_hashed<'py>(
    py: Python<'py>,
    x: &Bound<'py, PyAny>,
    pitches: PyReadonlyArray2<'py, f64>,
    shifts: PyReadonlyArray2<'py, f64>,
    hash_seed: u64,
    n_columns: u64,
) -> PyResult<Bound<'py, PyTuple>> {
    let grids = ffi::map_result(py, grids_from(pitches, shifts, hash_seed))?;
    if is_f32(x) {
        hashed_typed::<f32>(py, x, grids, n_columns)
    } else {
        hashed_typed::<f64>(py, x, grids, n_columns)
    }
}

pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(binning_draw, m)?)?;
    m.add_function(wrap_pyfunction!(binning_fit, m)?)?;
    m.add_function(wrap_pyfunction!(binning_transform, m)?)?;
    m.add_function(wrap_pyfunction!(binning_transform_hashed, m)?)?;
    Ok(())
}
