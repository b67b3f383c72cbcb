//! Explicit-register butterfly passes (x86-64), written once for any SIMD
//! register type [`Butterfly`] (f64 or f32 lanes, 256- or 512-bit) and compiled
//! per instruction set by the entry points in `simd.rs`.
//!
//! A pass of radix `R = 2^s` loads `R` registers that lie `h` elements apart,
//! runs the `s` stages with distances `h, 2h, …` on them in registers and
//! stores them once, so `s` stages cost one sweep over memory. The first pass
//! of a vector also runs the stages inside each register (distances below the
//! lane count, [`Butterfly::in_register`]) on the freshly loaded registers, so the
//! first `log2(lanes) + s` stages share one load and one store.
//!
//! Within every output the stages run in the textbook order (distance 1, 2,
//! 4, …) with the same additions, so the results are bit-identical to the
//! textbook loop of `docs/math/fwht.rst` and to the portable kernels.

use super::kernel::Strip;
use crate::simd::Vector;

/// A SIMD register with the stages of a butterfly that lie inside it.
///
/// # Safety
/// Implementations are only called from functions compiled with the
/// instruction set they need, on a CPU that has it.
pub(super) unsafe trait Butterfly: Vector {
    /// Most stages per pass (log2 of the radix): 3 (radix 8) for every type
    /// now; radix 16, which 32 AVX-512 registers would hold, measured no
    /// faster (BENCHMARKS.md, FWHT section).
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

/// One radix-`R` column: loads the registers at `p + k * stride`
/// (`k < R`), runs the in-register stages first when `FIRST`, then the
/// `log2 R` stages across the registers, and stores them back.
///
/// # Safety
/// `p + k * stride + [0, LANES)` must be valid for reads and writes for
/// every `k < R`; the CPU must support `V`'s instruction set.
#[inline(always)]
unsafe fn column<V: Butterfly, const R: usize, const FIRST: bool>(p: *mut V::T, stride: usize) {
    // SAFETY: in bounds by the caller's contract.
    let mut v: [V; R] = std::array::from_fn(|k| unsafe { V::load(p.add(k * stride)) });
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
        unsafe { r.store(p.add(k * stride)) };
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
/// `h, …, h << (take - 1)` on `n` elements at `x` (`n` a multiple of
/// `h << take`, `h` a multiple of the lane count), plus the in-register
/// stages when `FIRST`.
///
/// # Safety
/// `x[..n]` valid for reads and writes; `V`'s instruction set available.
#[inline(always)]
unsafe fn contiguous_pass<V: Butterfly, const FIRST: bool>(
    x: *mut V::T,
    n: usize,
    h: usize,
    take: u32,
) {
    #[inline(always)]
    unsafe fn go<V: Butterfly, const R: usize, const FIRST: bool>(
        x: *mut V::T,
        n: usize,
        h: usize,
    ) {
        for b in (0..n).step_by(R * h) {
            for j in (0..h).step_by(V::LANES) {
                // SAFETY: b + j + (R - 1) h + LANES <= b + R h <= n.
                unsafe { column::<V, R, FIRST>(x.add(b + j), h) }
            }
        }
    }
    // SAFETY: forwarded.
    unsafe {
        match take {
            0 => go::<V, 1, FIRST>(x, n, h),
            1 => go::<V, 2, FIRST>(x, n, h),
            2 => go::<V, 4, FIRST>(x, n, h),
            3 => go::<V, 8, FIRST>(x, n, h),
            _ => go::<V, 16, FIRST>(x, n, h),
        }
    }
}

/// The whole transform of a power-of-two vector of at least `V::LANES`
/// elements (L1-sized in practice): a first pass fused with the in-register
/// stages, then radix passes of at most `V::MAX_STAGES` stages.
///
/// # Safety
/// The CPU must support `V`'s instruction set.
#[inline(always)]
pub(super) unsafe fn small<V: Butterfly>(x: &mut [V::T]) {
    let n = x.len();
    debug_assert!(n.is_power_of_two() && n >= V::LANES);
    let p = x.as_mut_ptr();
    let mut left = (n / V::LANES).trailing_zeros();
    let mut h = V::LANES;
    let take = next_take(left, V::MAX_STAGES);
    // SAFETY: `p[..n]` is `x`; the instruction set is the caller's contract.
    unsafe { contiguous_pass::<V, true>(p, n, h, take) };
    left -= take;
    h <<= take;
    while left > 0 {
        let take = next_take(left, V::MAX_STAGES);
        // SAFETY: as above.
        unsafe { contiguous_pass::<V, false>(p, n, h, take) };
        left -= take;
        h <<= take;
    }
}

/// Phase 2 on one strip (see [`Strip`]): all stages between rows, in radix
/// passes of at most `V::MAX_STAGES` stages over the strip's columns.
///
/// # Safety
/// As [`super::kernel::strip`]; `width` a multiple of `V::LANES`; the CPU
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
                    // SAFETY: as above.
                    unsafe { column::<V, R, false>(row.add(j), stride) }
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
