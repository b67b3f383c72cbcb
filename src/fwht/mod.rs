//! Fast Walsh–Hadamard transform (`docs/math/fwht.rst`).
//!
//! `H` is the unnormalized Hadamard matrix in Sylvester order,
//! `H[i, j] = (-1)^popcount(i & j)`, the ordering of `scipy.linalg.hadamard`.
//! The transform costs `n log2 n` additions; `H H = n I`, and the normalized
//! transform `H / sqrt(n)` is orthogonal and its own inverse.
//!
//! Results are bit-identical for any thread count and any SIMD level: each
//! output is the same sequence of additions whatever the work split.
//!
//! ```
//! use randfeat_rs::fwht::fwht;
//! use randfeat_rs::Parallelism;
//! let mut v = [1.0_f64, 2.0, 3.0, 4.0];
//! fwht(&mut v, false, Parallelism::Sequential).unwrap();
//! assert_eq!(v, [10.0, -2.0, -4.0, 0.0]);
//! ```

mod butterfly;
mod simd;
mod wide;

use ndarray::{ArrayView1, ArrayView2, ArrayViewMut1, ArrayViewMut2, Axis};
use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::real::Real;
use crate::threads::Parallelism;
use butterfly::{block_len, l2_block_len, strip_width, Strip};

/// Vectors at least this long are split over threads internally (blocks in
/// phase 1, column strips in phase 2).
pub const PARALLEL_LEN: usize = 1 << 16;

/// Elements per rayon task when a batch is split over rows.
const MIN_TASK_ELEMS: usize = 1 << 14;

/// Batches with fewer elements than this are never split over threads (a
/// task holds at least `MIN_TASK_ELEMS` elements and a single vector splits
/// only from [`PARALLEL_LEN`] on), so a caller may run them with
/// [`Parallelism::Sequential`] without entering a pool: same work, same bits.
pub const SPLIT_MIN_ELEMS: usize = 2 * MIN_TASK_ELEMS;

/// Checks that `len` is a power of two; `Error::NotPowerOfTwo` otherwise
/// (`Error::InvalidParameter` beyond the largest power of two).
pub fn check_power_of_two(len: usize) -> Result<()> {
    if len.is_power_of_two() {
        return Ok(());
    }
    match len.checked_next_power_of_two() {
        Some(next) => Err(Error::NotPowerOfTwo {
            len,
            next: next.max(1),
        }),
        None => Err(Error::invalid(
            "len",
            format!("length {len} is not a power of two, and none as large fits in usize"),
        )),
    }
}

/// In-place transform `x <- H x` (or `H x / sqrt(n)` when `normalized`) of a
/// vector whose length is a power of two. With [`Parallelism::Rayon`],
/// vectors of at least [`PARALLEL_LEN`] elements are split over threads.
pub fn fwht<T: Real>(x: &mut [T], normalized: bool, par: Parallelism) -> Result<()> {
    check_power_of_two(x.len())?;
    let factor = normalized.then(|| norm_factor::<T>(x.len()));
    transform_slice(x, factor, par);
    Ok(())
}

/// In-place transform of every row of `x` (`docs/math/fwht.rst`: one
/// independent transform per row). The row length must be a power of two. Rows
/// need not be contiguous (a strided row is copied to a buffer and back). With
/// [`Parallelism::Rayon`] the rows are split over threads; a batch with fewer
/// rows than threads and long rows splits each row instead.
pub fn fwht_rows<T: Real>(
    mut x: ArrayViewMut2<T>,
    normalized: bool,
    par: Parallelism,
) -> Result<()> {
    let n = x.ncols();
    check_power_of_two(n)?;
    let factor = normalized.then(|| norm_factor::<T>(n));
    if rows_in_parallel(x.nrows(), n, par) {
        x.axis_iter_mut(Axis(0))
            .into_par_iter()
            .with_min_len((MIN_TASK_ELEMS / n).max(1))
            .for_each(|row| transform_row(row, factor, Parallelism::Sequential));
    } else {
        for row in x.axis_iter_mut(Axis(0)) {
            transform_row(row, factor, par);
        }
    }
    Ok(())
}

/// Out-of-place row-wise transform: `dst[i] <- H src[i]` (normalized on
/// request). `src` may have any strides and is read once; `dst` must have the
/// same shape. Contiguous rows are read by the first pass of the transform
/// itself (no copy before it); the results are bit-identical to copying
/// `src` into `dst` and transforming in place.
pub fn fwht_rows_into<T: Real>(
    src: ArrayView2<T>,
    mut dst: ArrayViewMut2<T>,
    normalized: bool,
    par: Parallelism,
) -> Result<()> {
    if src.dim() != dst.dim() {
        let (expected, got) = if src.nrows() != dst.nrows() {
            (src.nrows(), dst.nrows())
        } else {
            (src.ncols(), dst.ncols())
        };
        return Err(Error::ShapeMismatch {
            name: "shape of out",
            expected,
            got,
        });
    }
    let n = src.ncols();
    check_power_of_two(n)?;
    let factor = normalized.then(|| norm_factor::<T>(n));
    if rows_in_parallel(src.nrows(), n, par) {
        dst.axis_iter_mut(Axis(0))
            .into_par_iter()
            .zip(src.axis_iter(Axis(0)))
            .with_min_len((MIN_TASK_ELEMS / n).max(1))
            .for_each(|(d, s)| transform_row_into(s, d, factor, Parallelism::Sequential));
    } else {
        for (d, s) in dst.axis_iter_mut(Axis(0)).zip(src.axis_iter(Axis(0))) {
            transform_row_into(s, d, factor, par);
        }
    }
    Ok(())
}

fn rows_in_parallel(rows: usize, n: usize, par: Parallelism) -> bool {
    par.is_parallel() && rows >= 2 && (n < PARALLEL_LEN || rows >= rayon::current_num_threads())
}

fn norm_factor<T: Real>(n: usize) -> T {
    T::from_f64_lossy(1.0 / (n as f64).sqrt())
}

fn scale<T: Real>(x: &mut [T], factor: T) {
    x.iter_mut().for_each(|v| *v *= factor);
}

/// Whether the unnormalized transform of `x` could overflow where the
/// normalized one does not: each of its intermediate values is a signed sum
/// of at most `n` entries, so none can once every `|x_i| ≤ MAX / n`.
fn may_overflow<T: Real>(x: &[T]) -> bool {
    let limit = T::max_value() / T::from_f64_lossy(x.len() as f64);
    x.iter().any(|v| v.is_nan() || v.abs() > limit)
}

/// `x <- H x`, then times `factor` when given (the normalized transform).
/// Entries large enough to overflow the sums of the unnormalized transform
/// (see [`may_overflow`]) are first scaled by `1/n` (a power of two: exact)
/// and the result by `n · factor = sqrt(n)` instead, so that a normalized
/// transform, which keeps the norm, returns finite values wherever the
/// exact ones are (below `MAX` in magnitude).
fn transform_slice<T: Real>(x: &mut [T], factor: Option<T>, par: Parallelism) {
    match factor {
        Some(f) if may_overflow(x) => {
            let n = T::from_f64_lossy(x.len() as f64);
            scale(x, n.recip());
            transform(x, par);
            scale(x, n * f);
        }
        Some(f) => {
            transform(x, par);
            scale(x, f);
        }
        None => transform(x, par),
    }
}

/// `dst <- H src` for one row: from `src` straight into `dst` when both are
/// contiguous, else through a copy into `dst` and the in-place transform.
fn transform_row_into<T: Real>(
    src: ArrayView1<T>,
    mut dst: ArrayViewMut1<T>,
    factor: Option<T>,
    par: Parallelism,
) {
    if let (Some(s), Some(d)) = (src.as_slice(), dst.as_slice_mut())
        && (factor.is_none() || !may_overflow(s))
    {
        transform_from(Some(s), d, par);
        if let Some(f) = factor {
            scale(d, f);
        }
        return;
    }
    dst.assign(&src);
    transform_row(dst, factor, par);
}

fn transform_row<T: Real>(mut row: ArrayViewMut1<T>, factor: Option<T>, par: Parallelism) {
    match row.as_slice_mut() {
        Some(s) => transform_slice(s, factor, par),
        None => {
            let mut buf = row.to_vec();
            transform_slice(&mut buf, factor, par);
            row.iter_mut().zip(buf).for_each(|(r, b)| *r = b);
        }
    }
}

/// `buf = H (x ⊙ mul)`: `x` multiplied by `mul` element by element,
/// zero-padded to `buf.len()` (a power of two, not checked), then the
/// unnormalized transform on one thread: the signed, padded FWHT of the
/// SRHT-type maps (TensorSRHT, SORF). Inlined into its callers, so its loops
/// vectorize with their instruction set (one rounding per product).
#[inline(always)]
pub(crate) fn signed_transform<T: Real>(buf: &mut [T], x: &[T], mul: &[T]) {
    for ((b, &v), &m) in buf.iter_mut().zip(x).zip(mul) {
        *b = v * m;
    }
    buf[x.len()..].fill(T::zero());
    transform(buf, Parallelism::Sequential);
}

/// The transform of a power-of-two-length vector (length already checked).
pub(crate) fn transform<T: Real>(x: &mut [T], par: Parallelism) {
    transform_from(None, x, par)
}

/// `x <- H src` when `src` is given (of `x`'s length: the first pass of
/// each L1 block reads its part of `src`), else `x <- H x`.
fn transform_from<T: Real>(src: Option<&[T]>, x: &mut [T], par: Parallelism) {
    let n = x.len();
    let b = block_len::<T>();
    if n <= b {
        small(src, x);
        return;
    }
    let parallel = par.is_parallel() && n >= PARALLEL_LEN;
    let l2 = l2_block_len::<T>();
    if n <= l2 {
        blocked(src, x, b, parallel);
        return;
    }
    let run = |(i, c): (usize, &mut [T])| blocked(part(src, i, l2), c, b, false);
    if parallel {
        x.par_chunks_exact_mut(l2).enumerate().for_each(run);
    } else {
        x.chunks_exact_mut(l2).enumerate().for_each(run);
    }
    phase2(x, l2, parallel);
}

/// Block `i` of `len` elements of the source, if any.
fn part<T>(src: Option<&[T]>, i: usize, len: usize) -> Option<&[T]> {
    src.map(|s| &s[i * len..(i + 1) * len])
}

/// The whole transform of an L1-sized vector, from `src` if given.
fn small<T: Real>(src: Option<&[T]>, x: &mut [T]) {
    match src {
        Some(s) => simd::small_into(s, x),
        None => simd::small(x),
    }
}

/// Phase 1 (L1 blocks of `b`, from `src` if given) and phase 2 (the stages
/// between them) on a vector of at most [`l2_block_len`] elements.
fn blocked<T: Real>(src: Option<&[T]>, x: &mut [T], b: usize, parallel: bool) {
    let run = |(i, c): (usize, &mut [T])| small(part(src, i, b), c);
    if parallel {
        x.par_chunks_exact_mut(b).enumerate().for_each(run);
    } else {
        x.chunks_exact_mut(b).enumerate().for_each(run);
    }
    phase2(x, b, parallel);
}

/// A raw pointer that may cross threads; phase 2 hands disjoint column
/// strips of one vector to different threads.
struct SharedPtr<T>(*mut T);
// SAFETY: only used to give each task a pointer to its own disjoint strip.
unsafe impl<T: Send> Send for SharedPtr<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Sync for SharedPtr<T> {}
impl<T> SharedPtr<T> {
    fn get(&self) -> *mut T {
        self.0
    }
}

/// Bytes of the alignment that phase 2 gives its wide strips: one cache
/// line, so no load or store of a 512-bit register straddles two lines.
const ALIGN_BYTES: usize = 64;

/// The column ranges `(start, width)` of phase 2 over rows of `b` elements
/// starting at address `addr`: strips of `width` columns that start on a
/// cache-line boundary, plus, when the rows do not start on one, the
/// columns before the first boundary and after the last one as two narrow
/// strips of their own. A misaligned vector (glibc's and NumPy's large
/// allocations start 16 bytes past a page) would otherwise split every
/// register load and store of phase 2 over two lines. Any partition of the
/// columns gives the same bits: the stages act on each column alone.
fn strip_ranges<T>(addr: usize, b: usize, width: usize) -> Vec<(usize, usize)> {
    let size = std::mem::size_of::<T>();
    let line = ALIGN_BYTES / size;
    let head = if addr.is_multiple_of(size) {
        (ALIGN_BYTES - addr % ALIGN_BYTES) % ALIGN_BYTES / size
    } else {
        0
    };
    #[cfg(test)]
    let head = if tests::ALIGN_STRIPS.load(std::sync::atomic::Ordering::Relaxed) {
        head
    } else {
        0
    };
    if head == 0 || b < 2 * line {
        return (0..b / width).map(|s| (s * width, width)).collect();
    }
    let end = b - line + head;
    let mut out = vec![(0, head)];
    out.extend((head..end).step_by(width).map(|c| (c, width.min(end - c))));
    out.push((end, b - end));
    out
}

/// Stages between blocks of length `b` (`x.len()` a multiple of `b`).
fn phase2<T: Real>(x: &mut [T], b: usize, parallel: bool) {
    let rows = x.len() / b;
    let mut width = strip_width::<T>(rows, b);
    if parallel {
        // At least one strip per thread (a 1 MiB strip covers all of 2^17 f64).
        let threads = rayon::current_num_threads().next_power_of_two();
        width = width.min(b / threads).max(1);
    }
    let ranges = strip_ranges::<T>(x.as_ptr() as usize, b, width);
    let base = SharedPtr(x.as_mut_ptr());
    let run = |&(col, width): &(usize, usize)| {
        let strip = Strip {
            // SAFETY: col < b <= x.len(), inside the allocation.
            ptr: unsafe { base.get().add(col) },
            rows,
            row_len: b,
            width,
        };
        // SAFETY: the ranges partition the columns [0, b) of every block, so
        // strips are disjoint; `x` is borrowed mutably for the call.
        unsafe { simd::strip(&strip) }
    };
    if parallel {
        ranges.par_iter().for_each(run);
    } else {
        ranges.iter().for_each(run);
    }
}

#[cfg(test)]
mod tests;
