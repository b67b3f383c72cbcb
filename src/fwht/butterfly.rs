//! The butterfly passes of the FWHT (ALGORITHMS.md section 1) as plain
//! loops, written once for any [`Real`] and compiled per instruction set
//! through the operations of `simd.rs`.
//!
//! All stages commute, so any grouping of stages gives bit-identical results
//! to the textbook loop: every output is the same sequence of additions.
//! Three groupings are used:
//! - `radix8`/`radix4`/`radix2`: 3, 2 or 1 stages in one sweep over a
//!   group of 8, 4 or 2 sub-vectors (`width` contiguous columns each), which
//!   cuts the passes over memory by up to three;
//! - `in_chunk_stages`: the first stages (distances below one 256-bit
//!   vector) on every contiguous chunk, portable code; with AVX2 and
//!   AVX-512 the explicit-register passes of `wide.rs` replace this file;
//! - `blocked`: for vectors longer than one L1-sized block, phase 1
//!   transforms each block, phase 2 runs the remaining stages over column
//!   strips that fit in L2 (`strip`); vectors longer than one L2-sized
//!   block ([`l2_block_len`]) run this on each L2 block, then phase 2 once
//!   more over the whole vector with the L2 blocks as rows.

use crate::real::{same_type, Real};

/// Elements per L1-resident block: 16 KiB of data.
pub(super) const fn block_len<T>() -> usize {
    (16 * 1024) / std::mem::size_of::<T>()
}

/// Elements per L2-resident block: 1 MiB of data (one L2 of a Zen 5 core).
/// Longer vectors are transformed one such block at a time (phase 1 and
/// phase 2 inside it, from L2), then the stages between blocks run as
/// phase 2 over the whole vector: for n = 2^20 f64 one radix-8 sweep, so the
/// 8 MB vector crosses L3 twice.
pub(super) const fn l2_block_len<T>() -> usize {
    (1024 * 1024) / std::mem::size_of::<T>()
}

/// Bytes of one phase-2 strip (about one L2).
const STRIP_BYTES: usize = 1024 * 1024;
/// Narrowest strip in elements (keeps the inner loop vector-wide).
const MIN_STRIP: usize = 16;

#[inline(always)]
fn bf<T: Real>(a: T, b: T) -> (T, T) {
    (a + b, a - b)
}

/// Stage with distance 1 between two equal-length sub-vectors.
#[inline(always)]
fn radix2_cols<T: Real>(q0: &mut [T], q1: &mut [T]) {
    for (a, b) in q0.iter_mut().zip(q1.iter_mut()) {
        (*a, *b) = bf(*a, *b);
    }
}

/// Two stages over four equal-length sub-vectors.
#[inline(always)]
fn radix4_cols<T: Real>(q0: &mut [T], q1: &mut [T], q2: &mut [T], q3: &mut [T]) {
    let n = q0.len();
    let (q1, q2, q3) = (&mut q1[..n], &mut q2[..n], &mut q3[..n]);
    for j in 0..n {
        let (b0, b1) = bf(q0[j], q1[j]);
        let (b2, b3) = bf(q2[j], q3[j]);
        (q0[j], q2[j]) = bf(b0, b2);
        (q1[j], q3[j]) = bf(b1, b3);
    }
}

/// Three stages over eight equal-length sub-vectors.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn radix8_cols<T: Real>(
    q0: &mut [T],
    q1: &mut [T],
    q2: &mut [T],
    q3: &mut [T],
    q4: &mut [T],
    q5: &mut [T],
    q6: &mut [T],
    q7: &mut [T],
) {
    let n = q0.len();
    let (q1, q2, q3) = (&mut q1[..n], &mut q2[..n], &mut q3[..n]);
    let (q4, q5, q6, q7) = (&mut q4[..n], &mut q5[..n], &mut q6[..n], &mut q7[..n]);
    for j in 0..n {
        let (b0, b1) = bf(q0[j], q1[j]);
        let (b2, b3) = bf(q2[j], q3[j]);
        let (b4, b5) = bf(q4[j], q5[j]);
        let (b6, b7) = bf(q6[j], q7[j]);
        let (c0, c2) = bf(b0, b2);
        let (c1, c3) = bf(b1, b3);
        let (c4, c6) = bf(b4, b6);
        let (c5, c7) = bf(b5, b7);
        (q0[j], q4[j]) = bf(c0, c4);
        (q1[j], q5[j]) = bf(c1, c5);
        (q2[j], q6[j]) = bf(c2, c6);
        (q3[j], q7[j]) = bf(c3, c7);
    }
}

/// Splits `blk` (length `k * h`) into its `k` consecutive sub-vectors.
#[inline(always)]
fn split<T, const K: usize>(blk: &mut [T], h: usize) -> [&mut [T]; K] {
    let mut rest = blk;
    std::array::from_fn(|_| {
        let (head, tail) = std::mem::take(&mut rest).split_at_mut(h);
        rest = tail;
        head
    })
}

/// Runs stages with distances `h, 2h, …` (as many as `stages`) on `x`,
/// whose length is a multiple of `h << stages`, in sweeps of at most three.
#[inline(always)]
fn contiguous_stages<T: Real>(x: &mut [T], mut h: usize, mut stages: u32) {
    while stages > 0 {
        let take = stages.min(3);
        let span = h << take;
        for blk in x.chunks_exact_mut(span) {
            match take {
                3 => {
                    let [q0, q1, q2, q3, q4, q5, q6, q7] = split::<T, 8>(blk, h);
                    radix8_cols(q0, q1, q2, q3, q4, q5, q6, q7);
                }
                2 => {
                    let [q0, q1, q2, q3] = split::<T, 4>(blk, h);
                    radix4_cols(q0, q1, q2, q3);
                }
                _ => {
                    let [q0, q1] = split::<T, 2>(blk, h);
                    radix2_cols(q0, q1);
                }
            }
        }
        h = span;
        stages -= take;
    }
}

/// The stages with distances `1 … N/2` on every contiguous chunk of `N`
/// elements (`N` a power of two), as straight-line butterflies that the
/// SLP vectorizer turns into in-register shuffles.
#[inline(always)]
fn in_chunk_stages<T: Real, const N: usize>(x: &mut [T]) {
    let (chunks, _) = x.as_chunks_mut::<N>();
    for c in chunks {
        let mut h = 1;
        while h < N {
            for i in 0..N {
                if i & h == 0 {
                    (c[i], c[i + h]) = bf(c[i], c[i + h]);
                }
            }
            h *= 2;
        }
    }
}

/// The whole transform of a power-of-two-length vector that fits in L1,
/// with the portable in-chunk stages (the SSE2 / non-x86 path).
#[inline(always)]
pub(super) fn small<T: Real>(x: &mut [T]) {
    let n = x.len();
    // One 256-bit vector per chunk: the size the SLP vectorizer handles well.
    let base = 32 / std::mem::size_of::<T>();
    if n < base {
        contiguous_stages(x, 1, n.trailing_zeros());
        return;
    }
    match base {
        8 => in_chunk_stages::<T, 8>(x),
        _ => in_chunk_stages::<T, 4>(x),
    }
    small_from(x, base);
}

/// The stages with distances `h0, 2 h0, …, n/2` of a vector whose stages
/// below `h0` are done (`h0` a power of two, `h0 <= n`).
#[inline(always)]
pub(super) fn small_from<T: Real>(x: &mut [T], h0: usize) {
    let stages = x.len().trailing_zeros() - h0.trailing_zeros();
    contiguous_stages(x, h0, stages);
}

/// A view of phase 2: `rows` rows of `row_len` elements, of which the
/// columns `[col, col + width)` belong to this strip.
pub(super) struct Strip<T> {
    /// Pointer to element (0, col).
    pub ptr: *mut T,
    /// Number of rows (a power of two).
    pub rows: usize,
    /// Distance between rows, in elements.
    pub row_len: usize,
    /// Columns in the strip (`width <= row_len`).
    pub width: usize,
}

impl<T: 'static> Strip<T> {
    /// The same strip as a strip of `U` when `T` is `U`.
    pub(super) fn cast<U: 'static>(&self) -> Option<Strip<U>> {
        same_type::<T, U>().then(|| Strip {
            ptr: self.ptr.cast::<U>(),
            rows: self.rows,
            row_len: self.row_len,
            width: self.width,
        })
    }
}

/// Phase 2 on one strip: all stages between rows (distances
/// `row_len, 2 row_len, …`) for the strip's columns.
///
/// # Safety
/// `ptr + r * row_len + c` for `r < rows`, `c < width` must be valid for
/// reads and writes, and no other thread may touch those elements meanwhile.
#[inline(always)]
pub(super) unsafe fn strip<T: Real>(s: &Strip<T>) {
    let mut hr = 1usize;
    let mut stages = s.rows.trailing_zeros();
    // SAFETY (for every slice below): each slice covers `width` columns of one
    // row of the strip; the rows of one group are distinct, so the slices are
    // disjoint, and the caller guarantees exclusive access to all of them.
    let row =
        |r: usize| unsafe { std::slice::from_raw_parts_mut(s.ptr.add(r * s.row_len), s.width) };
    while stages > 0 {
        let take = stages.min(3);
        let span = hr << take;
        for g in (0..s.rows).step_by(span) {
            for o in 0..hr {
                let r = g + o;
                match take {
                    3 => radix8_cols(
                        row(r),
                        row(r + hr),
                        row(r + 2 * hr),
                        row(r + 3 * hr),
                        row(r + 4 * hr),
                        row(r + 5 * hr),
                        row(r + 6 * hr),
                        row(r + 7 * hr),
                    ),
                    2 => radix4_cols(row(r), row(r + hr), row(r + 2 * hr), row(r + 3 * hr)),
                    _ => radix2_cols(row(r), row(r + hr)),
                }
            }
        }
        hr = span;
        stages -= take;
    }
}

/// Strip width for a vector of `rows` blocks of `row_len` elements.
pub(super) fn strip_width<T>(rows: usize, row_len: usize) -> usize {
    let w = STRIP_BYTES / (rows * std::mem::size_of::<T>()).max(1);
    let w = if w == 0 {
        MIN_STRIP
    } else {
        1usize << w.ilog2()
    };
    w.clamp(MIN_STRIP.min(row_len), row_len)
}
