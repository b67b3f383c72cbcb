//! Compressed sparse row output of the binning map (the layout of
//! `scipy.sparse.csr_matrix`), built from per-row column slots.

use rayon::prelude::*;

use crate::error::Result;
use crate::progress::Monitor;
use crate::real::Real;
use crate::threads::Parallelism;

/// A column slot that holds no entry (an unseen bin in vocabulary mode).
pub(crate) const EMPTY: u64 = u64::MAX;

/// Rows per parallel task when building the CSR arrays.
const BLOCK_ROWS: usize = 2048;

/// Integer index arrays of a CSR matrix: `int32` when every index, the
/// number of stored values and both dimensions fit in `i32` (what SciPy
/// itself picks, so it keeps the arrays without a copy), `int64` otherwise.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CsrIndex {
    /// 32-bit indices.
    I32(Vec<i32>),
    /// 64-bit indices.
    I64(Vec<i64>),
}

impl CsrIndex {
    /// Number of entries.
    pub fn len(&self) -> usize {
        match self {
            CsrIndex::I32(v) => v.len(),
            CsrIndex::I64(v) => v.len(),
        }
    }

    /// True when there are no entries.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Entry `i` widened to `u64`; the arrays never hold negative values.
    pub fn get(&self, i: usize) -> u64 {
        match self {
            CsrIndex::I32(v) => v[i] as u64,
            CsrIndex::I64(v) => v[i] as u64,
        }
    }
}

/// A sparse `n_rows × n_cols` matrix in CSR form: row `i` stores the values
/// `data[indptr[i]..indptr[i+1]]` in the columns `indices[indptr[i]..indptr[i+1]]`
/// (sorted, no duplicates).
#[derive(Clone, Debug, PartialEq)]
pub struct CsrMatrix<T> {
    /// Number of rows.
    pub n_rows: usize,
    /// Number of columns.
    pub n_cols: u64,
    /// Row pointers, `n_rows + 1` entries starting at 0.
    pub indptr: CsrIndex,
    /// Column of every stored value.
    pub indices: CsrIndex,
    /// Stored values.
    pub data: Vec<T>,
}

impl<T: Real> CsrMatrix<T> {
    /// The dense `n_rows × n_cols` matrix (for tests and small problems).
    ///
    /// # Panics
    /// When the fields are inconsistent (a row pointer past the stored
    /// values, a column index `≥ n_cols`: the transforms never build such a
    /// matrix), or `n_rows × n_cols` overflows.
    pub fn to_dense(&self) -> ndarray::Array2<T> {
        let mut out = ndarray::Array2::zeros((self.n_rows, self.n_cols as usize));
        for i in 0..self.n_rows {
            for k in self.indptr.get(i) as usize..self.indptr.get(i + 1) as usize {
                out[[i, self.indices.get(k) as usize]] += self.data[k];
            }
        }
        out
    }
}

impl<T: Real> CsrMatrix<T> {
    /// The rows of `pieces` (matrices of `n_cols` columns, e.g. the
    /// features of consecutive row ranges) stacked in order: the matrix of
    /// all their rows, with `int32` indices where the whole fits them (the
    /// rule of the transforms). Each piece is freed once copied; one piece
    /// is returned as it is.
    pub fn vstack(mut pieces: Vec<CsrMatrix<T>>, n_cols: u64) -> CsrMatrix<T> {
        if pieces.len() == 1
            && let Some(one) = pieces.pop()
        {
            return one;
        }
        let n_rows: usize = pieces.iter().map(|m| m.n_rows).sum();
        let nnz: usize = pieces.iter().map(|m| m.data.len()).sum();
        let fits_i32 = [n_rows as u64, n_cols, nnz as u64]
            .iter()
            .all(|&v| v <= i32::MAX as u64);
        let (indptr, indices, data) = if fits_i32 {
            let (p, i, d) = stacked::<T, i32>(pieces, n_rows, nnz);
            (CsrIndex::I32(p), CsrIndex::I32(i), d)
        } else {
            let (p, i, d) = stacked::<T, i64>(pieces, n_rows, nnz);
            (CsrIndex::I64(p), CsrIndex::I64(i), d)
        };
        CsrMatrix {
            n_rows,
            n_cols,
            indptr,
            indices,
            data,
        }
    }
}

/// The row pointers, column indices (in the integer type `I`) and values
/// of [`CsrMatrix::vstack`]: every piece's row pointers shifted by the
/// values stored before it.
fn stacked<T: Real, I: IndexInt>(
    pieces: Vec<CsrMatrix<T>>,
    n_rows: usize,
    nnz: usize,
) -> (Vec<I>, Vec<I>, Vec<T>) {
    let mut indptr = Vec::with_capacity(n_rows + 1);
    let mut indices = Vec::with_capacity(nnz);
    let mut data = Vec::with_capacity(nnz);
    indptr.push(I::from_u64(0));
    for m in pieces {
        let before = data.len() as u64;
        indptr.extend((1..=m.n_rows).map(|i| I::from_u64(before + m.indptr.get(i))));
        indices.extend((0..m.indices.len()).map(|k| I::from_u64(m.indices.get(k))));
        data.extend_from_slice(&m.data);
    }
    (indptr, indices, data)
}

trait IndexInt: Copy + Default + Send + Sync {
    fn from_u64(v: u64) -> Self;
}
impl IndexInt for i32 {
    #[inline(always)]
    fn from_u64(v: u64) -> Self {
        v as i32
    }
}
impl IndexInt for i64 {
    #[inline(always)]
    fn from_u64(v: u64) -> Self {
        v as i64
    }
}

/// Sorts each row of `slots` (`n_rows × width`, row-major, [`EMPTY`] for no
/// entry) and merges equal columns: a column that occurs `m` times in a row
/// stores `m · value`. Returns the CSR matrix.
///
/// # Errors
/// [`Error::Interrupted`] once `monitor` is cancelled (checked per block of
/// rows).
pub(crate) fn from_slots<T: Real>(
    slots: &mut [u64],
    width: usize,
    n_cols: u64,
    value: T,
    par: Parallelism,
    monitor: &Monitor,
) -> Result<CsrMatrix<T>> {
    let n_rows = slots.len().checked_div(width).unwrap_or(0);
    let mut counts = vec![0usize; n_rows];
    let count_block = |(block, cnt): (&mut [u64], &mut [usize])| -> Result<()> {
        monitor.check()?;
        for (row, c) in block.chunks_mut(width).zip(cnt.iter_mut()) {
            row.sort_unstable();
            *c = distinct_present(row);
        }
        Ok(())
    };
    if par.is_parallel() {
        slots
            .par_chunks_mut(width * BLOCK_ROWS)
            .zip(counts.par_chunks_mut(BLOCK_ROWS))
            .try_for_each(count_block)?;
    } else {
        slots
            .chunks_mut(width * BLOCK_ROWS)
            .zip(counts.chunks_mut(BLOCK_ROWS))
            .try_for_each(count_block)?;
    }
    monitor.check()?;
    let mut indptr = Vec::with_capacity(n_rows + 1);
    let mut nnz = 0usize;
    indptr.push(0u64);
    for c in &counts {
        nnz += c;
        indptr.push(nnz as u64);
    }
    let fits_i32 = [n_rows as u64, n_cols, nnz as u64]
        .iter()
        .all(|&v| v <= i32::MAX as u64);
    let slots = &*slots;
    if fits_i32 {
        let (indices, data) = fill::<T, i32>(slots, width, &indptr, nnz, value, par);
        Ok(CsrMatrix {
            n_rows,
            n_cols,
            indptr: CsrIndex::I32(indptr.iter().map(|&v| v as i32).collect()),
            indices: CsrIndex::I32(indices),
            data,
        })
    } else {
        let (indices, data) = fill::<T, i64>(slots, width, &indptr, nnz, value, par);
        Ok(CsrMatrix {
            n_rows,
            n_cols,
            indptr: CsrIndex::I64(indptr.iter().map(|&v| v as i64).collect()),
            indices: CsrIndex::I64(indices),
            data,
        })
    }
}

/// Number of distinct non-[`EMPTY`] values of a sorted row.
fn distinct_present(row: &[u64]) -> usize {
    let mut n = 0;
    let mut prev = EMPTY;
    for &c in row {
        if c != EMPTY && c != prev {
            n += 1;
        }
        prev = c;
    }
    n
}

fn fill<T: Real, I: IndexInt>(
    slots: &[u64],
    width: usize,
    indptr: &[u64],
    nnz: usize,
    value: T,
    par: Parallelism,
) -> (Vec<I>, Vec<T>) {
    let mut indices = vec![I::default(); nnz];
    let mut data = vec![T::zero(); nnz];
    let n_rows = indptr.len() - 1;
    // Split the outputs at block boundaries so that blocks write disjoint slices.
    let mut jobs = Vec::with_capacity(n_rows.div_ceil(BLOCK_ROWS));
    let (mut rest_i, mut rest_d) = (&mut indices[..], &mut data[..]);
    for start in (0..n_rows).step_by(BLOCK_ROWS) {
        let end = (start + BLOCK_ROWS).min(n_rows);
        let len = (indptr[end] - indptr[start]) as usize;
        let (bi, ri) = rest_i.split_at_mut(len);
        let (bd, rd) = rest_d.split_at_mut(len);
        rest_i = ri;
        rest_d = rd;
        jobs.push((&slots[start * width..end * width], bi, bd));
    }
    let fill_block = |(block, out_i, out_d): (&[u64], &mut [I], &mut [T])| {
        let mut k = 0;
        for row in block.chunks(width) {
            let mut prev = EMPTY;
            for &c in row {
                if c == EMPTY {
                    continue;
                }
                if c == prev {
                    out_d[k - 1] += value;
                } else {
                    out_i[k] = I::from_u64(c);
                    out_d[k] = value;
                    k += 1;
                }
                prev = c;
            }
        }
    };
    if par.is_parallel() {
        jobs.into_par_iter().for_each(fill_block);
    } else {
        jobs.into_iter().for_each(fill_block);
    }
    (indices, data)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`from_slots`] with a monitor that is never cancelled.
    fn built<T: Real>(
        slots: &mut [u64],
        width: usize,
        n_cols: u64,
        value: T,
        par: Parallelism,
    ) -> CsrMatrix<T> {
        from_slots(slots, width, n_cols, value, par, &Monitor::new()).unwrap()
    }

    #[test]
    fn merges_sorts_and_skips_empty() {
        let mut slots = vec![5, 1, 5, EMPTY, EMPTY, EMPTY, 0, 2, 1];
        let m = built(&mut slots, 3, 6, 0.5_f64, Parallelism::Sequential);
        assert_eq!(m.indptr, CsrIndex::I32(vec![0, 2, 2, 5]));
        assert_eq!(m.indices, CsrIndex::I32(vec![1, 5, 0, 1, 2]));
        assert_eq!(m.data, vec![0.5, 1.0, 0.5, 0.5, 0.5]);
        let mut slots = vec![5, 1, 5, EMPTY, EMPTY, EMPTY, 0, 2, 1];
        assert_eq!(built(&mut slots, 3, 6, 0.5_f64, Parallelism::Rayon), m);
    }

    #[test]
    fn wide_matrices_get_int64_indices() {
        let big = i32::MAX as u64 + 10;
        let mut slots = vec![big - 1, 3];
        let m = built(&mut slots, 2, big, 1.0_f32, Parallelism::Sequential);
        assert_eq!(m.indptr, CsrIndex::I64(vec![0, 2]));
        assert_eq!(m.indices, CsrIndex::I64(vec![3, big as i64 - 1]));
    }

    #[test]
    fn stacked_pieces_equal_the_whole() {
        let rows = vec![5, 1, 5, EMPTY, EMPTY, EMPTY, 0, 2, 1, 4, 4, 3];
        let whole = built(&mut rows.clone(), 3, 6, 0.5_f64, Parallelism::Sequential);
        for cut in [0, 1, 2, 3, 4] {
            let (a, b) = rows.split_at(3 * cut);
            let pieces = vec![
                built(&mut a.to_vec(), 3, 6, 0.5_f64, Parallelism::Sequential),
                built(&mut b.to_vec(), 3, 6, 0.5_f64, Parallelism::Sequential),
            ];
            assert_eq!(CsrMatrix::vstack(pieces, 6), whole, "cut after {cut} rows");
        }
        // Pieces whose columns only the whole cannot index with int32.
        let big = i32::MAX as u64 + 10;
        let pieces = vec![
            built(&mut [3], 1, big, 1.0_f32, Parallelism::Sequential),
            built(&mut [big - 1], 1, big, 1.0_f32, Parallelism::Sequential),
        ];
        let m = CsrMatrix::vstack(pieces, big);
        assert_eq!(m.indptr, CsrIndex::I64(vec![0, 1, 2]));
        assert_eq!(m.indices, CsrIndex::I64(vec![3, big as i64 - 1]));
        let empty = CsrMatrix::<f64>::vstack(Vec::new(), 6);
        assert_eq!((empty.n_rows, empty.indptr), (0, CsrIndex::I32(vec![0])));
    }

    #[test]
    fn empty_input() {
        let mut slots: Vec<u64> = vec![];
        let m = built(&mut slots, 4, 7, 1.0_f64, Parallelism::Rayon);
        assert_eq!(m.n_rows, 0);
        assert_eq!(m.indptr, CsrIndex::I32(vec![0]));
        assert!(m.indices.is_empty() && m.data.is_empty());
    }
}
