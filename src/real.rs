//! The scalar trait that lets one generic function serve `f32` and `f64`.

use std::any::TypeId;
use std::fmt::{Debug, Display};
use std::iter::Sum;
use std::mem::ManuallyDrop;

use ndarray::{ArrayView, ArrayViewMut, Dimension};

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
    + bytemuck::Zeroable
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

/// Whether `T` and `U` are the same type (for a generic `T: Real`: whether
/// it is `f32`, or `f64`).
#[inline(always)]
pub(crate) fn same_type<T: 'static, U: 'static>() -> bool {
    TypeId::of::<T>() == TypeId::of::<U>()
}

/// `x` as a `B` when `T` and `U` are the same type, else `None`: the one
/// reinterpretation behind the typed casts below, which hand a generic
/// `T: Real` to code written for `f32` or `f64`.
///
/// # Safety
/// `B` must be `A` with `T` replaced by `U` (`A = &'a [T]`, `B = &'a [U]`;
/// `A = ArrayView2<'a, T>`, `B = ArrayView2<'a, U>`), so that `A` and `B`
/// are one type whenever `T` and `U` are.
#[inline(always)]
unsafe fn recast<T: 'static, U: 'static, A, B>(x: A) -> Option<B> {
    if !same_type::<T, U>() {
        return None;
    }
    let x = ManuallyDrop::new(x);
    // SAFETY: `T` is `U`, so `A` is `B` (the caller's contract): this moves
    // the value out as its own type (`x` is never dropped).
    Some(unsafe { std::mem::transmute_copy::<ManuallyDrop<A>, B>(&x) })
}

/// `x` as `&[U]` when `T` is `U`.
#[inline(always)]
pub(crate) fn cast_slice<T: 'static, U: 'static>(x: &[T]) -> Option<&[U]> {
    // SAFETY: `&[U]` is `&[T]` with `T` replaced by `U`.
    unsafe { recast::<T, U, _, _>(x) }
}

/// `x` as `&mut [U]` when `T` is `U`.
#[inline(always)]
pub(crate) fn cast_slice_mut<T: 'static, U: 'static>(x: &mut [T]) -> Option<&mut [U]> {
    // SAFETY: `&mut [U]` is `&mut [T]` with `T` replaced by `U`.
    unsafe { recast::<T, U, _, _>(x) }
}

/// `x` as an array view of `U` when `T` is `U`.
#[inline(always)]
pub(crate) fn cast_view<T: 'static, U: 'static, D: Dimension>(
    x: ArrayView<'_, T, D>,
) -> Option<ArrayView<'_, U, D>> {
    // SAFETY: `ArrayView<U, D>` is `ArrayView<T, D>` with `T` replaced by `U`.
    unsafe { recast::<T, U, _, _>(x) }
}

/// `x` as a mutable array view of `U` when `T` is `U`.
#[inline(always)]
pub(crate) fn cast_view_mut<T: 'static, U: 'static, D: Dimension>(
    x: ArrayViewMut<'_, T, D>,
) -> Option<ArrayViewMut<'_, U, D>> {
    // SAFETY: `ArrayViewMut<U, D>` is `ArrayViewMut<T, D>` with `T` replaced
    // by `U`.
    unsafe { recast::<T, U, _, _>(x) }
}

/// Elements per parallel task of [`all_finite`].
const FINITE_TASK: usize = 1 << 16;

/// The largest `|v|` of `x` in `f64` (0 for no entries), or `None` when an
/// entry is not finite: the scan of [`all_finite`] with the maximum taken
/// along, in the same parallel blocks.
pub fn finite_max_abs<T: Real>(
    x: ndarray::ArrayView2<'_, T>,
    par: crate::threads::Parallelism,
) -> Option<f64> {
    use rayon::prelude::*;
    // Runs of 256 without a dependency chain between the comparisons, as
    // in `finite_slice_body`.
    let slice = |s: &[T]| -> Option<f64> {
        let max = T::max_value();
        s.chunks(256).try_fold(0.0f64, |m, c| {
            let (ok, cm) = c.iter().fold((true, T::zero()), |(ok, cm), &v| {
                let a = v.abs();
                (ok & (a <= max), if a > cm { a } else { cm })
            });
            ok.then(|| m.max(cm.to_f64_exact()))
        })
    };
    match x.as_slice_memory_order() {
        Some(s) if par.is_parallel() && s.len() > FINITE_TASK => s
            .par_chunks(FINITE_TASK)
            .map(slice)
            .try_reduce(|| 0.0, |a, b| Some(a.max(b))),
        Some(s) => slice(s),
        None => x.rows().into_iter().try_fold(0.0f64, |m, r| {
            let v = match r.as_slice() {
                Some(s) => slice(s)?,
                None => slice(&r.to_vec())?,
            };
            Some(m.max(v))
        }),
    }
}

/// Whether every entry of `x` is finite: [`all_finite_scaled`] with scale 1.
/// Contiguous arrays are scanned in parallel blocks with
/// [`Parallelism::Rayon`](crate::threads::Parallelism), others row by row.
pub fn all_finite<T: Real>(
    x: ndarray::ArrayView2<'_, T>,
    par: crate::threads::Parallelism,
) -> bool {
    all_finite_scaled(x, T::one(), par)
}

/// Whether every `v·scale` of `x` is finite (`scale >= 0`): [`all_finite`]
/// when `scale = 1`; with a larger `scale`, also that no `|v|·scale`
/// overflows (a bound on what a linear map of `x` can reach).
pub fn all_finite_scaled<T: Real>(
    x: ndarray::ArrayView2<'_, T>,
    scale: T,
    par: crate::threads::Parallelism,
) -> bool {
    use rayon::prelude::*;
    match x.as_slice_memory_order() {
        Some(s) if par.is_parallel() && s.len() > FINITE_TASK => {
            s.par_chunks(FINITE_TASK).all(|c| finite_slice(c, scale))
        }
        Some(s) => finite_slice(s, scale),
        // E.g. a column block of a wider array: row by row.
        None => x.rows().into_iter().all(|r| match r.as_slice() {
            Some(s) => finite_slice(s, scale),
            None => r.iter().all(|v| (*v * scale).is_finite()),
        }),
    }
}

/// `|v·scale| <= MAX` for every `v` of `x` (false for ±∞ and NaN, whose
/// comparisons fail): independent comparisons AND-ed in runs of 256, a loop
/// the compiler vectorizes without a dependency chain, stopping at the
/// first run that fails.
#[inline(always)]
fn finite_slice_body<T: Real>(x: &[T], scale: T) -> bool {
    let max = T::max_value();
    x.chunks(256).all(|c| {
        c.iter()
            .fold(true, |ok, &v| ok & ((v * scale).abs() <= max))
    })
}

widest_simd! {
    /// [`finite_slice_body`] with the widest SIMD the CPU offers: the check
    /// that the sketches and the Maclaurin map run on every feature they
    /// write.
    pub(crate) fn finite_slice<T: Real>(x: &[T], scale: T) -> bool = finite_slice_body;
}

/// `v · 2^e` for any integer `e`: exact unless the result leaves the normal
/// range (`2f64.powi(e)` alone overflows beyond `e = 1023`).
pub(crate) fn times_pow2(v: f64, e: i32) -> f64 {
    // Three steps of one direction, each factor inside the normal range for
    // |e| <= 3069.
    let e = e.clamp(-3000, 3000);
    let third = e / 3;
    v * 2f64.powi(third) * 2f64.powi(third) * 2f64.powi(e - 2 * third)
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
    fn casts_succeed_exactly_for_the_same_type() {
        let mut v = vec![1.0_f64, 2.0, 3.0];
        assert!(same_type::<f64, f64>() && !same_type::<f64, f32>());
        assert_eq!(cast_slice::<f64, f64>(&v), Some(&[1.0, 2.0, 3.0][..]));
        assert!(cast_slice::<f64, f32>(&v).is_none());
        cast_slice_mut::<f64, f64>(&mut v).unwrap()[1] = 5.0;
        assert!(cast_slice_mut::<f64, f32>(&mut v).is_none());
        assert_eq!(v, [1.0, 5.0, 3.0]);
        let a = Array2::from_shape_fn((3, 4), |(i, j)| (10 * i + j) as f32);
        let t = cast_view::<f32, f32, _>(a.t()).unwrap();
        assert_eq!(t, a.t());
        assert!(std::ptr::eq(t.as_ptr(), a.as_ptr()));
        assert!(cast_view::<f32, f64, _>(a.view()).is_none());
        let mut b = a.clone();
        cast_view_mut::<f32, f32, _>(b.slice_mut(s![1.., ..;2]))
            .unwrap()
            .fill(-1.0);
        assert!(cast_view_mut::<f32, f64, _>(b.view_mut()).is_none());
        assert_eq!(b[(2, 2)], -1.0);
        assert_eq!(b[(2, 1)], a[(2, 1)]);
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
