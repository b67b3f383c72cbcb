//! The scalar trait that lets one generic function serve `f32` and `f64`.

use std::fmt::{Debug, Display};
use std::iter::Sum;

/// A real floating-point scalar: implemented for `f32` and `f64` only.
///
/// Feature maps are generic over `Real` and return the input's precision;
/// linear solves (Cholesky, GP fits) are always done in `f64`.
pub trait Real:
    num_traits::Float
    + num_traits::FromPrimitive
    + num_traits::NumAssign
    + ndarray::LinalgScalar
    + ndarray::ScalarOperand
    + Sum
    + Default
    + Debug
    + Display
    + Send
    + Sync
    + 'static
{
    /// The type's name as NumPy spells it ("float32" or "float64").
    const DTYPE: &'static str;
    /// Converts from `f64`, rounding to the nearest representable value.
    fn from_f64_lossy(v: f64) -> Self;
    /// Widens (or copies) to `f64`.
    fn to_f64_exact(self) -> f64;
}

impl Real for f32 {
    const DTYPE: &'static str = "float32";
    #[inline(always)]
    fn from_f64_lossy(v: f64) -> Self {
        v as f32
    }
    #[inline(always)]
    fn to_f64_exact(self) -> f64 {
        self as f64
    }
}

impl Real for f64 {
    const DTYPE: &'static str = "float64";
    #[inline(always)]
    fn from_f64_lossy(v: f64) -> Self {
        v
    }
    #[inline(always)]
    fn to_f64_exact(self) -> f64 {
        self
    }
}

/// Elements per parallel task of [`all_finite`].
const FINITE_TASK: usize = 1 << 16;

/// Whether every entry of `x` is finite. `v − v` is `0` for a finite `v`
/// and NaN for ±∞ and NaN, so the entries' `v − v` summed in 8 lanes (a
/// branch-free loop the compiler vectorizes) is `0` exactly when all are
/// finite; contiguous arrays are scanned in parallel blocks with
/// [`Parallelism::Rayon`](crate::threads::Parallelism), others element by element.
pub fn all_finite<T: Real>(
    x: ndarray::ArrayView2<'_, T>,
    par: crate::threads::Parallelism,
) -> bool {
    use rayon::prelude::*;
    // `v - v` is the finiteness test itself (NaN for ±∞ and NaN, else 0).
    #[allow(clippy::eq_op)]
    fn block<T: Real>(x: &[T]) -> bool {
        let mut lanes = [T::zero(); 8];
        let mut chunks = x.chunks_exact(8);
        for c in &mut chunks {
            for (l, v) in lanes.iter_mut().zip(c) {
                *l += *v - *v;
            }
        }
        let rest = chunks
            .remainder()
            .iter()
            .fold(T::zero(), |s, v| s + (*v - *v));
        lanes.iter().fold(rest, |s, l| s + *l) == T::zero()
    }
    match x.as_slice_memory_order() {
        Some(s) if par.is_parallel() && s.len() > FINITE_TASK => {
            s.par_chunks(FINITE_TASK).all(block)
        }
        Some(s) => s.chunks(FINITE_TASK).all(block),
        None => x.iter().all(|v| v.is_finite()),
    }
}

/// Row `xr` as a slice: the row itself when it is contiguous, else a copy in
/// `buf` (for kernels written over slices).
pub(crate) fn row_slice<'s, 'a: 's, T: Copy>(
    xr: ndarray::ArrayView1<'a, T>,
    buf: &'s mut Vec<T>,
) -> &'s [T] {
    match xr.to_slice() {
        Some(xs) => xs,
        None => {
            buf.clear();
            buf.extend(xr.iter().copied());
            buf
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::threads::Parallelism;
    use ndarray::{s, Array2};

    #[test]
    fn all_finite_finds_every_non_finite_entry() {
        for par in [Parallelism::Sequential, Parallelism::Rayon] {
            let x = Array2::from_shape_fn((300, 257), |(i, j)| (i * 257 + j) as f64 * 1e300);
            assert!(all_finite(x.view(), par));
            assert!(all_finite(x.mapv(|v| (v * 1e-270) as f32).view(), par));
            assert!(all_finite(x.slice(s![.., 1..]), par), "non-contiguous view");
            for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
                for (i, j) in [(0, 0), (150, 100), (299, 256), (255, 7)] {
                    let mut y = x.clone();
                    y[(i, j)] = bad;
                    assert!(!all_finite(y.view(), par), "{bad} at ({i}, {j})");
                    assert!(!all_finite(y.mapv(|v| (v * 1e-270) as f32).view(), par));
                    assert!(!all_finite(y.slice(s![.., 1..]), par) || j == 0);
                }
            }
        }
    }

    #[test]
    fn row_slice_borrows_contiguous_rows_and_copies_strided_ones() {
        let a = ndarray::Array2::from_shape_fn((3, 4), |(i, j)| (10 * i + j) as f64);
        let mut buf = Vec::new();
        let row = row_slice(a.row(1), &mut buf);
        assert_eq!(row, &[10.0, 11.0, 12.0, 13.0]);
        assert!(std::ptr::eq(row.as_ptr(), &a[(1, 0)]));
        let col = row_slice(a.column(2), &mut buf);
        assert_eq!(col, &[2.0, 12.0, 22.0]);
        assert!(std::ptr::eq(col.as_ptr(), buf.as_ptr()));
    }
}
