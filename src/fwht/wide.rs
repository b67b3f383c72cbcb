//! Explicit-register butterfly passes, written once for any SIMD
//! register type [`Butterfly`] (f64 or f32 lanes, 256- or 512-bit) and compiled
//! per instruction set through the operations of `simd.rs`.
//!
//! A pass of radix `R = 2^s` loads `R` registers that lie `h` elements apart,
//! runs the `s` stages with distances `h, 2h, …` on them in registers and
//! stores them once, so `s` stages cost one sweep over memory. The first pass
//! of a vector also runs the stages inside each register (distances below the
//! lane count, [`Butterfly::in_register`]) on the freshly loaded registers, so the
//! first `log2(lanes) + s` stages share one load and one store. The first
//! pass may load from another vector than the one it stores to: an
//! out-of-place transform reads its source once, in that pass, with no copy
//! before it.
//!
//! Within every output the stages run in the textbook order (distance 1, 2,
//! 4, …) with the same additions, so the results are bit-identical to the
//! textbook loop of ALGORITHMS.md section 1 and to the portable kernels.

use super::butterfly::Strip;
use crate::simd::Vector;

/// A SIMD register with the stages of a butterfly that lie inside it.
///
/// # Safety
/// Implementations are only called from functions compiled with the
/// instruction set they need, on a CPU that has it.
pub(super) unsafe trait Butterfly: Vector {
    /// Most stages per pass (log2 of the radix).
    const MAX_STAGES: u32;
    /// The stages with distances `1, 2, …, LANES / 2` inside the register.
    unsafe fn in_register(self) -> Self;
}

/// The stages with distances `1, 2, …, R / 2` (in registers) across `v`.
#[inline(always)]
unsafe fn butterflies<V: Butterfly, const R: usize>(v: &mut [V; R]) {
    let mut h = 1;
    while h < R {
        for i in 0..R {
            if i & h == 0 {
                let (a, b) = (v[i], v[i + h]);
                // SAFETY: the caller runs with `V`'s instruction set.
                unsafe {
                    v[i] = a.add(b);
                    v[i + h] = a.sub(b);
                }
            }
        }
        h *= 2;
    }
}

/// One radix-`R` column: loads the registers at `src + k * stride`
/// (`k < R`), runs the in-register stages first when `FIRST`, then the
/// `log2 R` stages across the registers, and stores them at
/// `dst + k * stride`.
///
/// # Safety
/// `src + k * stride + [0, LANES)` must be valid for reads and
/// `dst + k * stride + [0, LANES)` for writes for every `k < R`, each pair
/// the same elements or disjoint; the CPU must support `V`'s instruction set.
#[inline(always)]
unsafe fn column<V: Butterfly, const R: usize, const FIRST: bool>(
    src: *const V::T,
    dst: *mut V::T,
    stride: usize,
) {
    // SAFETY: in bounds by the caller's contract.
    let mut v: [V; R] = std::array::from_fn(|k| unsafe { V::load(src.add(k * stride)) });
    if FIRST {
        for r in v.iter_mut() {
            // SAFETY: the caller runs with `V`'s instruction set.
            *r = unsafe { r.in_register() };
        }
    }
    // SAFETY: as above.
    unsafe { butterflies(&mut v) };
    for (k, r) in v.into_iter().enumerate() {
        // SAFETY: in bounds by the caller's contract.
        unsafe { r.store(dst.add(k * stride)) };
    }
}

/// Stages to take in the next pass when `left` remain: the fewest passes of
/// at most `max` stages, split as evenly as possible (larger ones first).
fn next_take(left: u32, max: u32) -> u32 {
    match left.div_ceil(max) {
        0 => 0,
        passes => left.div_ceil(passes),
    }
}

/// A radix-`2^take` pass over a contiguous vector: stages with distances
/// `h, …, h << (take - 1)` on the `n` elements at `src`, stored at `dst`
/// (`n` a multiple of `h << take`, `h` a multiple of the lane count), plus
/// the in-register stages when `FIRST`.
///
/// # Safety
/// `src[..n]` valid for reads, `dst[..n]` for writes, the same elements or
/// disjoint; `V`'s instruction set available.
#[inline(always)]
unsafe fn contiguous_pass<V: Butterfly, const FIRST: bool>(
    src: *const V::T,
    dst: *mut V::T,
    n: usize,
    h: usize,
    take: u32,
) {
    #[inline(always)]
    unsafe fn go<V: Butterfly, const R: usize, const FIRST: bool>(
        src: *const V::T,
        dst: *mut V::T,
        n: usize,
        h: usize,
    ) {
        for b in (0..n).step_by(R * h) {
            for j in (0..h).step_by(V::LANES) {
                // SAFETY: b + j + (R - 1) h + LANES <= b + R h <= n.
                unsafe { column::<V, R, FIRST>(src.add(b + j), dst.add(b + j), h) }
            }
        }
    }
    // SAFETY: forwarded.
    unsafe {
        match take {
            0 => go::<V, 1, FIRST>(src, dst, n, h),
            1 => go::<V, 2, FIRST>(src, dst, n, h),
            2 => go::<V, 4, FIRST>(src, dst, n, h),
            3 => go::<V, 8, FIRST>(src, dst, n, h),
            _ => go::<V, 16, FIRST>(src, dst, n, h),
        }
    }
}

/// The whole transform `dst <- H src` of a power-of-two vector of `n ≥
/// V::LANES` elements (L1-sized in practice): a first pass from `src` to
/// `dst` fused with the in-register stages, then radix passes of at most
/// `V::MAX_STAGES` stages on `dst`. `src == dst` transforms in place.
///
/// # Safety
/// `src[..n]` valid for reads, `dst[..n]` for reads and writes, the same
/// elements or disjoint; the CPU must support `V`'s instruction set.
#[inline(always)]
pub(super) unsafe fn small<V: Butterfly>(src: *const V::T, dst: *mut V::T, n: usize) {
    debug_assert!(n.is_power_of_two() && n >= V::LANES);
    let mut left = (n / V::LANES).trailing_zeros();
    let mut h = V::LANES;
    let take = next_take(left, V::MAX_STAGES);
    // SAFETY: the caller's contract.
    unsafe { contiguous_pass::<V, true>(src, dst, n, h, take) };
    left -= take;
    h <<= take;
    while left > 0 {
        let take = next_take(left, V::MAX_STAGES);
        // SAFETY: as above; from here on in place.
        unsafe { contiguous_pass::<V, false>(dst, dst, n, h, take) };
        left -= take;
        h <<= take;
    }
}

/// Phase 2 on one strip (see [`Strip`]): all stages between rows, in radix
/// passes of at most `V::MAX_STAGES` stages over the strip's columns.
///
/// # Safety
/// As [`super::butterfly::strip`]; `width` a multiple of `V::LANES`; the CPU
/// must support `V`'s instruction set.
#[inline(always)]
pub(super) unsafe fn strip<V: Butterfly>(s: &Strip<V::T>) {
    #[inline(always)]
    unsafe fn go<V: Butterfly, const R: usize>(s: &Strip<V::T>, hr: usize) {
        let stride = hr * s.row_len;
        for g in (0..s.rows).step_by(R * hr) {
            for o in 0..hr {
                // SAFETY: row g + o + (R - 1) hr < rows, columns < width.
                let row = unsafe { s.ptr.add((g + o) * s.row_len) };
                for j in (0..s.width).step_by(V::LANES) {
                    // SAFETY: as above (in place).
                    unsafe { column::<V, R, false>(row.add(j), row.add(j), stride) }
                }
            }
        }
    }
    debug_assert!(s.width.is_multiple_of(V::LANES));
    let mut left = s.rows.trailing_zeros();
    let mut hr = 1;
    while left > 0 {
        let take = next_take(left, V::MAX_STAGES);
        // SAFETY: forwarded from the caller.
        unsafe {
            match take {
                1 => go::<V, 2>(s, hr),
                2 => go::<V, 4>(s, hr),
                3 => go::<V, 8>(s, hr),
                _ => go::<V, 16>(s, hr),
            }
        }
        left -= take;
        hr <<= take;
    }
}

#[cfg(test)]
mod tests {
    use super::next_take;

    #[test]
    fn pass_split_is_even_and_bounded() {
        for max in [3, 4] {
            assert_eq!(next_take(0, max), 0);
            for left in 1..40 {
                let (mut l, mut passes) = (left, 0);
                while l > 0 {
                    let t = next_take(l, max);
                    assert!(t >= 1 && t <= max && t <= l);
                    l -= t;
                    passes += 1;
                }
                assert_eq!(passes, left.div_ceil(max), "left {left} max {max}");
            }
        }
    }
}
