//! The hot loop of random Fourier features: `cos` and `sin` of a whole row
//! of projections at once, vectorized (compiled per instruction set through
//! [`crate::simd`]).
//!
//! Method (per element, in `f64`; `f32` data below):
//! 1. Cody–Waite reduction `r = x − k π/2`, `k = round(2x/π)`, with `π/2`
//!    split in three parts (the first two have 33 significant bits, so
//!    `k · part` is exact for `|k| < 2^20`); `|r| ≤ π/4`.
//! 2. Minimax polynomials of degree 13 (sin) and 14 (cos) on `[−π/4, π/4]`
//!    (the coefficients of fdlibm's `__kernel_sin` / `__kernel_cos`).
//! 3. The quadrant `k mod 4` swaps and negates the two results through bit
//!    operations (no branches), so the loop vectorizes.
//!
//! The rounding uses the `1.5·2^52` trick and the quadrant is read from the
//! mantissa bits, so every step is an add, multiply or bit operation that
//! LLVM vectorizes; no FMA is used, so the result is the same bit pattern at
//! every SIMD level. Rows holding an angle with `|x| > FAST_LIMIT` take the
//! `std` path instead (the reduction above loses accuracy far out). The
//! accuracy against `std` is tested below (a few `f64` ulps).
//!
//! For `f32` data both variants have their own kernels in `f32` arithmetic,
//! 16 lanes per AVX-512 register. `cos_bias`, `cos(x + b)` (`cos_f32`): the
//! sum `x + b` is rounded to `f32` (an error of the size the `f32` GEMM
//! already makes in `x`), reduced by `π` with fused multiply-adds, and the
//! cosine taken by a degree-12 polynomial. `cos_sin` (`sincos_f32`): the
//! reduction by `π/2` and the quadrant logic above, in `f32` with fused
//! multiply-adds, and Taylor polynomials of degree 9 and 10. Both errors
//! are a few `f32` ulps (bounds derived and tested below). The range
//! `|x| ≤ FAST_LIMIT` is checked in blocks of [`RANGE_BLOCK`] angles as they
//! are computed, not in a separate pass. `mul_add` is hardware FMA on x86-64 (AVX2+FMA or AVX-512) and
//! correctly rounded everywhere else, so the bits do not depend on the
//! SIMD level either.

// The fdlibm coefficients are kept digit for digit as published.
#![allow(clippy::excessive_precision)]

use crate::real::{cast_slice, cast_slice_mut, Real};
use crate::simd::{Isa, Simd, WithSimd};

/// Largest `|x|` the vectorized reduction accepts (`k < 2^17`).
pub const FAST_LIMIT: f64 = 1.0e5;

const FRAC_2_PI: f64 = std::f64::consts::FRAC_2_PI;
const PIO2_1: f64 = 1.570_796_326_734_125_6e0; // first 33 bits of pi/2
const PIO2_2: f64 = 6.077_100_506_303_966e-11; // next 33 bits
const PIO2_3: f64 = 2.022_266_248_711_166_5e-21; // the rest
const ROUND_MAGIC: f64 = 6_755_399_441_055_744.0; // 1.5 * 2^52

const S1: f64 = -1.666_666_666_666_663_2e-1;
const S2: f64 = 8.333_333_333_322_49e-3;
const S3: f64 = -1.984_126_982_985_795e-4;
const S4: f64 = 2.755_731_370_707_006_8e-6;
const S5: f64 = -2.505_076_025_340_686_3e-8;
const S6: f64 = 1.589_690_995_211_55e-10;
const C1: f64 = 4.166_666_666_666_660_2e-2;
const C2: f64 = -1.388_888_888_887_411e-3;
const C3: f64 = 2.480_158_728_947_673e-5;
const C4: f64 = -2.755_731_435_139_066_3e-7;
const C5: f64 = 2.087_572_321_298_175e-9;
const C6: f64 = -1.135_964_755_778_819_5e-11;

/// `(sin x, cos x)` for `|x| ≤ FAST_LIMIT`, branch-free.
#[inline(always)]
pub(super) fn sincos_fast(x: f64) -> (f64, f64) {
    let t = x * FRAC_2_PI + ROUND_MAGIC;
    let q = t.to_bits();
    let k = t - ROUND_MAGIC;
    let r = ((x - k * PIO2_1) - k * PIO2_2) - k * PIO2_3;
    let z = r * r;
    let s = r + r * z * (S1 + z * (S2 + z * (S3 + z * (S4 + z * (S5 + z * S6)))));
    let c = (1.0 - 0.5 * z) + z * z * (C1 + z * (C2 + z * (C3 + z * (C4 + z * (C5 + z * C6)))));
    let (sb, cb) = (s.to_bits(), c.to_bits());
    let swap = 0u64.wrapping_sub(q & 1);
    let sin_bits = (cb & swap) | (sb & !swap);
    let cos_bits = (sb & swap) | (cb & !swap);
    let sin_sign = (q & 2) << 62;
    let cos_sign = (q.wrapping_add(1) & 2) << 62;
    (
        f64::from_bits(sin_bits ^ sin_sign),
        f64::from_bits(cos_bits ^ cos_sign),
    )
}

const PI_1: f32 = std::f32::consts::PI;
const PI_2: f32 = (std::f64::consts::PI - PI_1 as f64) as f32;
const PI_3: f32 = (std::f64::consts::PI - PI_1 as f64 - PI_2 as f64) as f32;
const ROUND_MAGIC_F32: f32 = 12_582_912.0; // 1.5 * 2^23

/// `x = k·p + r` in `f32` with `k = round(x·inv_p)` (the `1.5·2^23` trick:
/// the low bits of the returned word hold `k` modulo `2^22`, so its last
/// one or two bits give the parity or the quadrant) and `r`
/// by the three-part Cody–Waite split `p = parts[0] + parts[1] + parts[2]`,
/// one fused multiply-add a part. Returns `(bits of k + 1.5·2^23, r)`.
#[inline(always)]
fn reduce_f32(x: f32, inv_p: f32, parts: [f32; 3]) -> (u32, f32) {
    let t = x.mul_add(inv_p, ROUND_MAGIC_F32);
    let k = t - ROUND_MAGIC_F32;
    let r = (-k).mul_add(parts[0], x);
    let r = (-k).mul_add(parts[1], r);
    (t.to_bits(), (-k).mul_add(parts[2], r))
}

/// `cos x` in `f32` for `|x| ≤ FAST_LIMIT`, branch-free: `x = kπ + r` with
/// `k = round(x/π)` (the `1.5·2^23` trick; the parity of `k` is the last
/// mantissa bit), `r` by a three-part Cody–Waite reduction with fused
/// multiply-adds (`|r| ≤ π/2`), then `cos x = (−1)^k cos r` with the Taylor
/// polynomial of `cos r` to degree 12 (truncation `(π/2)^14/14! < 6.5e-9`).
/// Rounding error: at most `9·2^-24` absolute: three roundings of `r`, each
/// `≤ 2^-24 π/2`, times `|sin r| ≤ 1` (`4.72·2^-24`); the rounding of
/// `z = r²` times `|d cos/dz| z ≤ 1.24` (`1.24·2^-24`); the Horner steps,
/// `2^-24 (1 + 2.47·0.5 + 2.47²·0.042 + …) < 2.5·2^-24` (`z ≤ 2.47`).
#[inline(always)]
pub(super) fn cos_f32(x: f32) -> f32 {
    let (q, r) = reduce_f32(x, std::f32::consts::FRAC_1_PI, [PI_1, PI_2, PI_3]);
    let z = r * r;
    let p = z.mul_add(1.0 / 479_001_600.0, -1.0 / 3_628_800.0);
    let p = z.mul_add(p, 1.0 / 40_320.0);
    let p = z.mul_add(p, -1.0 / 720.0);
    let p = z.mul_add(p, 1.0 / 24.0);
    let p = z.mul_add(p, -0.5);
    let c = z.mul_add(p, 1.0);
    f32::from_bits(c.to_bits() ^ ((q & 1) << 31))
}

const FRAC_2_PI_F32: f32 = std::f32::consts::FRAC_2_PI;
const PIO2_1_F32: f32 = std::f32::consts::FRAC_PI_2;
const PIO2_2_F32: f32 = (std::f64::consts::FRAC_PI_2 - PIO2_1_F32 as f64) as f32;
const PIO2_3_F32: f32 =
    (std::f64::consts::FRAC_PI_2 - PIO2_1_F32 as f64 - PIO2_2_F32 as f64) as f32;

/// Absolute error bound of the `f32` sine and cosine that the `cos_sin`
/// variant takes of `f32` angles (the crate-private `sincos_f32`) against
/// the exact values at the `f32` argument: `5·2^-24` rounding plus `2.2e-9`
/// truncation, derived in that function's doc comment.
pub const SINCOS_F32_BOUND: f64 = 5.0 / 16_777_216.0 + 2.2e-9;

/// `(sin x, cos x)` in `f32` for `|x| ≤ FAST_LIMIT`, branch-free (the
/// `cos_sin` variant of `f32` data): `x = kπ/2 + r` with `k = round(2x/π)`
/// (the `1.5·2^23` trick; `k mod 4` is in the last two mantissa bits), `r`
/// by a three-part Cody–Waite reduction with fused multiply-adds, then the
/// Taylor polynomials of `sin r` to degree 9 and `cos r` to degree 10 and
/// the quadrant swap and signs of [`sincos_fast`].
///
/// Error, at most [`SINCOS_F32_BOUND`] absolute. `2/π` rounded to `f32`
/// can move `k` by one only when `2x/π` is within `|x|·2^-24·2/π < 0.004`
/// of a half-integer, so `|r| ≤ 0.7914 < 0.8`. Truncation: `0.8^11/11! <
/// 2.2e-9` (sine), `0.8^12/12! < 1.5e-10` (cosine). Rounding, in units of
/// `u = 2^-24`: the three reduction steps each round a value of magnitude
/// `< 0.8` (`2.4u`; the split of `π/2` is exact to `2^-72` relative, times
/// `k < 2^16`: negligible), carried with slope `≤ 1`; `z = r²` rounded
/// (`0.64u`) times `|∂/∂z| ≤ 0.134` (sine) or `0.5` (cosine); the Horner
/// steps and `r·z` (sine `< 0.45u`, cosine `< 0.4u`); the last fused
/// multiply-add rounds the result (`≤ 0.72u` for `|sin r| ≤ sin 0.8`, `≤ u`
/// for the cosine). Sum: sine `< 3.7u`, cosine `< 4.1u`, both `< 5u`.
#[inline(always)]
pub(super) fn sincos_f32(x: f32) -> (f32, f32) {
    let (q, r) = reduce_f32(x, FRAC_2_PI_F32, [PIO2_1_F32, PIO2_2_F32, PIO2_3_F32]);
    let z = r * r;
    let ps = z.mul_add(1.0 / 362_880.0, -1.0 / 5_040.0);
    let ps = z.mul_add(ps, 1.0 / 120.0);
    let ps = z.mul_add(ps, -1.0 / 6.0);
    let s = (r * z).mul_add(ps, r);
    let pc = z.mul_add(-1.0 / 3_628_800.0, 1.0 / 40_320.0);
    let pc = z.mul_add(pc, -1.0 / 720.0);
    let pc = z.mul_add(pc, 1.0 / 24.0);
    let pc = z.mul_add(pc, -0.5);
    let c = z.mul_add(pc, 1.0);
    let (sb, cb) = (s.to_bits(), c.to_bits());
    let swap = 0u32.wrapping_sub(q & 1);
    let sin_bits = (cb & swap) | (sb & !swap);
    let cos_bits = (sb & swap) | (cb & !swap);
    let sin_sign = (q & 2) << 30;
    let cos_sign = (q.wrapping_add(1) & 2) << 30;
    (
        f32::from_bits(sin_bits ^ sin_sign),
        f32::from_bits(cos_bits ^ cos_sign),
    )
}

/// Angles per range check of the `f32` shifted cosine: a block is computed
/// by the `f32` cosine kernel into a stack buffer while `|x| ≤ FAST_LIMIT` is checked,
/// and recomputed through `std` (in `f64`) if the check fails.
pub const RANGE_BLOCK: usize = 64;

/// `c[j] <- scale·cos(c[j] + b[j])` in `f32` (`b.len() == c.len()`), block
/// by block (see [`RANGE_BLOCK`]): one pass over the row.
#[inline(always)]
fn cos_shift_f32(c: &mut [f32], b: &[f32], scale: f32) {
    const LIMIT: f32 = FAST_LIMIT as f32;
    let mut buf = [0.0_f32; RANGE_BLOCK];
    for (cb, bb) in c.chunks_mut(RANGE_BLOCK).zip(b.chunks(RANGE_BLOCK)) {
        let mut out_of_range = 0_u32;
        for ((o, cv), bj) in buf.iter_mut().zip(cb.iter()).zip(bb) {
            let a = cv + bj;
            // A NaN is not flagged: both paths give NaN for it.
            out_of_range |= u32::from(a.abs() > LIMIT);
            *o = cos_f32(a) * scale;
        }
        if out_of_range == 0 {
            cb.copy_from_slice(&buf[..cb.len()]);
        } else {
            for (cv, bj) in cb.iter_mut().zip(bb) {
                *cv = (f64::from(*cv + bj).cos() * f64::from(scale)) as f32;
            }
        }
    }
}

/// `c[j] <- scale·cos(c[j])`, `s[j] <- scale·sin(c[j])` in `f32`
/// ([`sincos_f32`]), block by block with the range check of
/// [`cos_shift_f32`].
#[inline(always)]
fn sincos_f32_row(c: &mut [f32], s: &mut [f32], scale: f32) {
    const LIMIT: f32 = FAST_LIMIT as f32;
    let (mut cbuf, mut sbuf) = ([0.0_f32; RANGE_BLOCK], [0.0_f32; RANGE_BLOCK]);
    for (cb, sb) in c.chunks_mut(RANGE_BLOCK).zip(s.chunks_mut(RANGE_BLOCK)) {
        let mut out_of_range = 0_u32;
        for ((co, so), a) in cbuf.iter_mut().zip(sbuf.iter_mut()).zip(cb.iter()) {
            // A NaN is not flagged: both paths give NaN for it.
            out_of_range |= u32::from(a.abs() > LIMIT);
            let (sn, cs) = sincos_f32(*a);
            *co = cs * scale;
            *so = sn * scale;
        }
        if out_of_range == 0 {
            sb.copy_from_slice(&sbuf[..cb.len()]);
            cb.copy_from_slice(&cbuf[..cb.len()]);
        } else {
            for (cv, sv) in cb.iter_mut().zip(sb.iter_mut()) {
                let (sn, cs) = f64::from(*cv).sin_cos();
                *cv = (cs * f64::from(scale)) as f32;
                *sv = (sn * f64::from(scale)) as f32;
            }
        }
    }
}

#[inline(always)]
fn max_abs<T: Real>(x: &[T]) -> f64 {
    x.iter().fold(0.0_f64, |m, v| m.max(v.to_f64_exact().abs()))
}

/// `c[j] <- scale·cos(c[j])`, `s[j] <- scale·sin(c[j])` (the `cos_sin`
/// variant, ALGORITHMS.md 5.2). `s` must be at least as long as `c`.
#[inline(always)]
fn sincos_body<T: Real>(c: &mut [T], s: &mut [T], scale: f64) {
    let s = &mut s[..c.len()];
    if let (Some(c), Some(s)) = (cast_slice_mut(c), cast_slice_mut(s)) {
        return sincos_f32_row(c, s, scale as f32);
    }
    if max_abs(c) <= FAST_LIMIT {
        for (cv, sv) in c.iter_mut().zip(s.iter_mut()) {
            let (sn, cs) = sincos_fast(cv.to_f64_exact());
            *cv = T::from_f64_lossy(cs * scale);
            *sv = T::from_f64_lossy(sn * scale);
        }
    } else {
        for (cv, sv) in c.iter_mut().zip(s.iter_mut()) {
            let (sn, cs) = cv.to_f64_exact().sin_cos();
            *cv = T::from_f64_lossy(cs * scale);
            *sv = T::from_f64_lossy(sn * scale);
        }
    }
}

/// `c[j] <- scale·cos(c[j] + b[j])` (the `cos_bias` variant, ALGORITHMS.md
/// 5.2). `b` must be at least as long as `c`.
#[inline(always)]
fn cos_shift_body<T: Real>(c: &mut [T], b: &[T], scale: f64) {
    let b = &b[..c.len()];
    if let (Some(c), Some(b)) = (cast_slice_mut(c), cast_slice(b)) {
        return cos_shift_f32(c, b, scale as f32);
    }
    let big = c
        .iter()
        .zip(b)
        .fold(0.0_f64, |m, (v, bj)| m.max((*v + *bj).to_f64_exact().abs()));
    if big <= FAST_LIMIT {
        for (cv, bj) in c.iter_mut().zip(b) {
            let (_, cs) = sincos_fast((*cv + *bj).to_f64_exact());
            *cv = T::from_f64_lossy(cs * scale);
        }
    } else {
        for (cv, bj) in c.iter_mut().zip(b) {
            *cv = T::from_f64_lossy((*cv + *bj).to_f64_exact().cos() * scale);
        }
    }
}

/// `c[j] <- scale·cos(c[j])`, `s[j] <- scale·sin(c[j])` as an operation
/// of [`crate::simd`].
struct SinCos<'a, T> {
    c: &'a mut [T],
    s: &'a mut [T],
    scale: f64,
}

impl<S: Simd, T: Real> WithSimd<S> for SinCos<'_, T> {
    type Output = ();
    #[inline(always)]
    fn with_simd(self, _: S) {
        sincos_body(self.c, self.s, self.scale)
    }
}

/// `c[j] <- scale·cos(c[j] + b[j])` as an operation of [`crate::simd`].
struct CosShift<'a, T> {
    c: &'a mut [T],
    b: &'a [T],
    scale: f64,
}

impl<S: Simd, T: Real> WithSimd<S> for CosShift<'_, T> {
    type Output = ();
    #[inline(always)]
    fn with_simd(self, _: S) {
        cos_shift_body(self.c, self.b, self.scale)
    }
}

/// Scaled cosine and sine of a row of angles: `s[j] <- scale·sin(c[j])`,
/// then `c[j] <- scale·cos(c[j])`, with the widest SIMD the CPU offers.
/// Results do not depend on the SIMD level.
///
/// # Panics
/// If `s` is shorter than `c`.
pub fn sincos_scaled<T: Real>(c: &mut [T], s: &mut [T], scale: f64) {
    sincos_scaled_on(Isa::detect(), c, s, scale)
}

/// [`sincos_scaled`] with the instruction set `isa` (panics if this CPU
/// lacks it).
fn sincos_scaled_on<T: Real>(isa: Isa, c: &mut [T], s: &mut [T], scale: f64) {
    assert!(s.len() >= c.len(), "sincos_scaled: s shorter than c");
    isa.dispatch(SinCos { c, s, scale })
}

/// Scaled shifted cosine of a row: `c[j] <- scale·cos(c[j] + b[j])`, the
/// sum rounded to `T` (for `f32`, see the module docs).
///
/// # Panics
/// If `b` is shorter than `c`.
pub fn cos_shift_scaled<T: Real>(c: &mut [T], b: &[T], scale: f64) {
    cos_shift_scaled_on(Isa::detect(), c, b, scale)
}

/// [`cos_shift_scaled`] with the instruction set `isa` (panics if this CPU
/// lacks it).
fn cos_shift_scaled_on<T: Real>(isa: Isa, c: &mut [T], b: &[T], scale: f64) {
    assert!(b.len() >= c.len(), "cos_shift_scaled: b shorter than c");
    isa.dispatch(CosShift { c, b, scale })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    fn angles(n: usize, range: f64) -> Vec<f64> {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        (0..n)
            .map(|_| range * (2.0 * rng.random::<f64>() - 1.0))
            .collect()
    }

    #[test]
    fn f64_matches_std_to_a_few_ulps() {
        for &(range, tol) in &[
            (1.0, 2.5e-16),
            (10.0, 2.5e-16),
            (1e3, 2.5e-16),
            (FAST_LIMIT, 2.5e-16),
        ] {
            let x = angles(20_000, range);
            let mut c = x.clone();
            let mut s = vec![0.0; x.len()];
            sincos_scaled(&mut c, &mut s, 1.0);
            let mut err = 0.0_f64;
            for (i, &xi) in x.iter().enumerate() {
                let (sn, cs) = xi.sin_cos();
                err = err.max((s[i] - sn).abs()).max((c[i] - cs).abs());
            }
            assert!(err <= tol, "range {range}: max abs error {err:e}");
        }
    }

    /// Every instruction set of this CPU gives the bits of the portable
    /// build, `f32` and `f64`, both variants, fast and `std` blocks alike.
    #[test]
    fn every_instruction_set_gives_the_same_bits() {
        fn check<T: Real>() {
            let n = 5 * RANGE_BLOCK + 11;
            let mut x: Vec<T> = angles(n, 300.0)
                .into_iter()
                .map(T::from_f64_lossy)
                .collect();
            x[2 * RANGE_BLOCK + 3] = T::from_f64_lossy(4.0e6);
            let b: Vec<T> = angles(n, 3.0).into_iter().map(T::from_f64_lossy).collect();
            let run = |isa: Isa| {
                let (mut c, mut s) = (x.clone(), vec![T::zero(); n]);
                sincos_scaled_on(isa, &mut c, &mut s, 0.7);
                let mut d = x.clone();
                cos_shift_scaled_on(isa, &mut d, &b, 1.3);
                (c, s, d)
            };
            let want = run(Isa::Portable);
            for isa in Isa::available() {
                assert!(run(isa) == want, "{} {isa:?}", T::DTYPE);
            }
        }
        check::<f32>();
        check::<f64>();
    }

    #[test]
    fn quadrant_boundaries_and_special_points() {
        let mut x: Vec<f64> = (-40..=40)
            .map(|k| k as f64 * std::f64::consts::FRAC_PI_4)
            .collect();
        x.extend([0.0, -0.0, 1e-300, 0.5, -0.5]);
        let mut c = x.clone();
        let mut s = vec![0.0; x.len()];
        sincos_scaled(&mut c, &mut s, 1.0);
        for (i, &xi) in x.iter().enumerate() {
            assert!((c[i] - xi.cos()).abs() <= 2.5e-16, "cos({xi})");
            assert!((s[i] - xi.sin()).abs() <= 2.5e-16, "sin({xi})");
        }
    }

    #[test]
    fn large_arguments_take_the_std_path() {
        let x: Vec<f64> = vec![1.0, 3.0e7, -1.0e12];
        let mut c = x.clone();
        let mut s = vec![0.0; 3];
        sincos_scaled(&mut c, &mut s, 2.0);
        for i in 0..3 {
            assert_eq!(c[i], 2.0 * x[i].cos());
            assert_eq!(s[i], 2.0 * x[i].sin());
        }
    }

    #[test]
    fn f32_and_shifted_cosine() {
        let x = angles(5_000, 50.0);
        let mut c: Vec<f32> = x.iter().map(|&v| v as f32).collect();
        let mut s = vec![0.0_f32; x.len()];
        let x32 = c.clone();
        sincos_scaled(&mut c, &mut s, 0.5);
        for i in 0..x.len() {
            let v = x32[i] as f64;
            assert!((c[i] as f64 - 0.5 * v.cos()).abs() <= SINCOS_F32_BOUND_HALF);
            assert!((s[i] as f64 - 0.5 * v.sin()).abs() <= SINCOS_F32_BOUND_HALF);
        }
        let b: Vec<f64> = angles(x.len(), 3.0);
        let mut c = x.clone();
        cos_shift_scaled(&mut c, &b, 1.5);
        for i in 0..x.len() {
            assert!((c[i] - 1.5 * (x[i] + b[i]).cos()).abs() <= 1e-15);
        }
    }

    /// The bound of `cos_f32` (module docs) for `0.5 cos(x + b)`: `9·2^-24`
    /// rounding plus `6.5e-9` truncation, halved, plus the output rounding
    /// (half an `f32` ulp of a value `≤ 0.5`, `2^-26`).
    const F32_BOUND_HALF: f64 = 0.5 * (9.0 / 16_777_216.0 + 6.5e-9) + 1.0 / 67_108_864.0;

    /// The bound of `sincos_f32` for `0.5 sin x`, `0.5 cos x`: its
    /// [`SINCOS_F32_BOUND`] halved plus the rounding of the product by the
    /// scale (at most `2^-24 · 0.5`).
    const SINCOS_F32_BOUND_HALF: f64 = 0.5 * SINCOS_F32_BOUND + 1.0 / 33_554_432.0;

    #[test]
    fn f32_sincos_within_its_error_bound() {
        // Against the f64 sine and cosine of the same f32 angle.
        let check = |x: &[f32], what: &str| {
            let mut c = x.to_vec();
            let mut s = vec![0.0_f32; x.len()];
            sincos_scaled(&mut c, &mut s, 0.5);
            let mut worst = 0.0_f64;
            for i in 0..x.len() {
                let (sn, cs) = f64::from(x[i]).sin_cos();
                let err = (f64::from(c[i]) - 0.5 * cs)
                    .abs()
                    .max((f64::from(s[i]) - 0.5 * sn).abs());
                assert!(
                    err <= SINCOS_F32_BOUND_HALF,
                    "{what}: x = {}: {err:e}",
                    x[i]
                );
                worst = worst.max(err);
            }
            println!("{what}: max error {worst:.3e} (bound {SINCOS_F32_BOUND_HALF:.3e})");
        };
        for range in [1.0, 50.0, FAST_LIMIT - 7.0] {
            let x: Vec<f32> = angles(20_000, range).iter().map(|&v| v as f32).collect();
            check(&x, &format!("range {range}"));
        }
        // Quadrant boundaries (multiples of pi/4: the swaps and signs) and
        // the f32 neighbours of the largest multiples of pi/2 in range.
        let mut x: Vec<f32> = (-80..=80)
            .map(|k| k as f32 * std::f32::consts::FRAC_PI_4)
            .collect();
        let top = (FAST_LIMIT / std::f64::consts::FRAC_PI_2).floor();
        for k in [top, top - 1.0, -top] {
            let v = (k * std::f64::consts::FRAC_PI_2) as f32;
            x.extend([
                v,
                f32::from_bits(v.to_bits() + 1),
                f32::from_bits(v.to_bits() - 1),
            ]);
        }
        x.extend([0.0, -0.0, 1e-30, 0.5, -0.5]);
        check(&x, "special points");
    }

    #[test]
    fn f32_sincos_out_of_range_block_takes_std() {
        let n = 2 * RANGE_BLOCK + 3;
        let mut x: Vec<f32> = angles(n, 20.0).iter().map(|&v| v as f32).collect();
        x[n - 2] = -2.0e6;
        let mut c = x.clone();
        let mut s = vec![0.0_f32; n];
        sincos_scaled(&mut c, &mut s, 0.5);
        for i in 0..n {
            let (sn, cs) = f64::from(x[i]).sin_cos();
            if i >= 2 * RANGE_BLOCK {
                assert_eq!(
                    (c[i], s[i]),
                    ((0.5 * cs) as f32, (0.5 * sn) as f32),
                    "std at {i}"
                );
            } else {
                let err = (f64::from(c[i]) - 0.5 * cs).abs();
                assert!(err <= SINCOS_F32_BOUND_HALF, "fast path at {i}: {err:e}");
            }
        }
    }

    #[test]
    fn f32_shifted_cosine_out_of_range_block_takes_std() {
        // One angle beyond FAST_LIMIT sends its block of RANGE_BLOCK angles
        // through std; the other blocks (and the ragged tail) stay fast.
        let n = 3 * RANGE_BLOCK + 7;
        let mut x: Vec<f32> = angles(n, 20.0).iter().map(|&v| v as f32).collect();
        x[RANGE_BLOCK + 5] = 3.0e7;
        let b: Vec<f32> = angles(n, 3.0).iter().map(|v| (v + 3.0) as f32).collect();
        let mut c = x.clone();
        cos_shift_scaled(&mut c, &b, 0.5);
        for i in 0..n {
            let want = 0.5 * f64::from(x[i] + b[i]).cos();
            if (RANGE_BLOCK..2 * RANGE_BLOCK).contains(&i) {
                assert_eq!(c[i], want as f32, "std path at {i}");
            } else {
                let err = (f64::from(c[i]) - want).abs();
                assert!(err <= F32_BOUND_HALF, "fast path at {i}: {err:e}");
            }
        }
    }

    #[test]
    fn f32_shifted_cosine_within_its_error_bound() {
        // Against the f64 cosine of the same f32 sum x + b.
        for range in [1.0, 50.0, FAST_LIMIT - 7.0] {
            let x: Vec<f32> = angles(20_000, range).iter().map(|&v| v as f32).collect();
            let b: Vec<f32> = angles(x.len(), 3.0)
                .iter()
                .map(|v| (v + 3.0) as f32)
                .collect();
            let mut c = x.clone();
            cos_shift_scaled(&mut c, &b, 0.5);
            let mut worst = 0.0_f64;
            for i in 0..x.len() {
                let want = 0.5 * f64::from(x[i] + b[i]).cos();
                worst = worst.max((f64::from(c[i]) - want).abs());
            }
            println!("range {range}: max error {worst:.3e} (bound {F32_BOUND_HALF:.3e})");
            assert!(
                worst <= F32_BOUND_HALF,
                "range {range}: max error {worst:e}"
            );
        }
        // Quadrant boundaries: multiples of pi/2 (the sign flips at odd k).
        let x: Vec<f32> = (-40..=40)
            .map(|k| k as f32 * std::f32::consts::FRAC_PI_2)
            .collect();
        let b = vec![0.0_f32; x.len()];
        let mut c = x.clone();
        cos_shift_scaled(&mut c, &b, 0.5);
        for i in 0..x.len() {
            let want = 0.5 * f64::from(x[i]).cos();
            assert!(
                (f64::from(c[i]) - want).abs() <= F32_BOUND_HALF,
                "cos({})",
                x[i]
            );
        }
    }
}
