//! The FWHT's operations for [`crate::simd`]. The plain-loop passes of
//! `butterfly.rs` (SSE2 and other architectures) and the explicit-register
//! passes of `wide.rs` (AVX2, AVX-512) are `#[inline(always)]` generic code;
//! each operation here is written once over the [`Simd`] token and run
//! through [`Isa::dispatch`], which compiles it per instruction set and
//! calls the one the CPU supports ([`Isa::detect`]).
//!
//! The register types (`F64x8`, `F32x16`, `F64x4`, `F32x8`) define the
//! stages whose butterflies lie inside one register (distances below the
//! lane count) with explicit permutes: per stage, `p = partner lanes`,
//! `out = v + p` in the lower lane of each pair and `p − v` in the upper one
//! (AVX-512: one `fma(v, ±1, p)`, exact because `v * ±1` is). Those are the
//! same additions, in the same order, as the textbook loop, so the choice of
//! instruction set never changes a result (no reassociation anywhere).

use super::butterfly::{self, Strip};
use super::wide::{self, Butterfly};
use crate::real::{same_type, Real};
use crate::simd::{Isa, Portable, Simd, Vector, WithSimd};

/// The instruction sets with explicit butterfly registers (AVX2, AVX-512).
trait Wide: Simd<F64: Butterfly, F32: Butterfly> {}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{wide, Wide};
    use crate::simd::x86::{F32x16, F32x8, F64x4, F64x8};
    use crate::simd::{Avx2, Avx512};
    use std::arch::x86_64::*;

    impl Wide for Avx512 {}
    impl Wide for Avx2 {}

    /// Implements `wide::Butterfly` for a register type of
    /// `crate::simd::x86`: its stages per pass and its in-register stages.
    macro_rules! butterfly {
        ($name:ident, $max:expr, $isa:ident, |$v:ident| $body:block) => {
            // SAFETY: compiled for the register's instruction set, which its
            // callers run on.
            unsafe impl wide::Butterfly for $name {
                const MAX_STAGES: u32 = $max;
                isa_target! { $isa
                    #[inline]
                    unsafe fn in_register(self) -> Self {
                        let $v = self.0;
                        Self($body)
                    }
                }
            }
        };
    }

    /// `+1` in the lanes `i` with `i & h == 0`, `-1` in the others.
    const fn signs<const N: usize>(h: usize) -> [f64; N] {
        let mut a = [1.0; N];
        let mut i = 0;
        while i < N {
            if i & h != 0 {
                a[i] = -1.0;
            }
            i += 1;
        }
        a
    }
    const S8: [[f64; 8]; 3] = [signs(1), signs(2), signs(4)];
    /// The `f32` copy of a sign table.
    const fn narrow<const N: usize>(a: [f64; N]) -> [f32; N] {
        let mut b = [0.0; N];
        let mut i = 0;
        while i < N {
            b[i] = a[i] as f32;
            i += 1;
        }
        b
    }
    const S16: [[f32; 16]; 4] = [
        narrow(signs(1)),
        narrow(signs(2)),
        narrow(signs(4)),
        narrow(signs(8)),
    ];

    // AVX-512, per in-register stage with distance h: `s` = the partner lanes,
    // then one `fma(v, ±1, s)`: `s + v` in the lower lane of each pair and
    // `s - v` in the upper one. `v * ±1` is exact, so the single rounding of
    // the FMA gives the textbook sum / difference bit for bit, in 2
    // instructions instead of 3 (add, masked subtract).
    butterfly!(F64x8, 3, Avx512, |v| {
        // SAFETY: the sign tables hold 8 doubles each.
        let sg = |k: usize| unsafe { _mm512_loadu_pd(S8[k].as_ptr()) };
        let s = _mm512_permute_pd::<0x55>(v);
        let v = _mm512_fmadd_pd(v, sg(0), s);
        let s = _mm512_permutex_pd::<0x4E>(v);
        let v = _mm512_fmadd_pd(v, sg(1), s);
        let s = _mm512_shuffle_f64x2::<0x4E>(v, v);
        _mm512_fmadd_pd(v, sg(2), s)
    });
    butterfly!(F32x16, 3, Avx512, |v| {
        // SAFETY: the sign tables hold 16 floats each.
        let sg = |k: usize| unsafe { _mm512_loadu_ps(S16[k].as_ptr()) };
        let s = _mm512_permute_ps::<0xB1>(v);
        let v = _mm512_fmadd_ps(v, sg(0), s);
        let s = _mm512_permute_ps::<0x4E>(v);
        let v = _mm512_fmadd_ps(v, sg(1), s);
        let s = _mm512_shuffle_f32x4::<0xB1>(v, v);
        let v = _mm512_fmadd_ps(v, sg(2), s);
        let s = _mm512_shuffle_f32x4::<0x4E>(v, v);
        _mm512_fmadd_ps(v, sg(3), s)
    });
    butterfly!(F64x4, 3, Avx2, |v| {
        let s = _mm256_permute_pd::<0b0101>(v);
        let v = _mm256_blend_pd::<0b1010>(_mm256_add_pd(v, s), _mm256_sub_pd(s, v));
        let s = _mm256_permute2f128_pd::<0x01>(v, v);
        _mm256_blend_pd::<0b1100>(_mm256_add_pd(v, s), _mm256_sub_pd(s, v))
    });
    butterfly!(F32x8, 3, Avx2, |v| {
        let s = _mm256_permute_ps::<0xB1>(v);
        let v = _mm256_blend_ps::<0xAA>(_mm256_add_ps(v, s), _mm256_sub_ps(s, v));
        let s = _mm256_permute_ps::<0x4E>(v);
        let v = _mm256_blend_ps::<0xCC>(_mm256_add_ps(v, s), _mm256_sub_ps(s, v));
        let s = _mm256_permute2f128_ps::<0x01>(v, v);
        _mm256_blend_ps::<0xF0>(_mm256_add_ps(v, s), _mm256_sub_ps(s, v))
    });
}

/// `dst <- H src` for a power-of-two `n` by the explicit-register passes
/// of `S` (`src == dst`: in place), when `T` has a register of at most `n`
/// lanes; returns whether it did.
///
/// # Safety
/// `src` valid for `n` reads, `dst` for `n` reads and writes, the same
/// elements or disjoint; the CPU supports `S`.
#[inline(always)]
unsafe fn wide_small<S: Wide, T: Real>(src: *const T, dst: *mut T, n: usize) -> bool {
    // SAFETY (both): the caller's contract, with the pointers of type `f64`
    // (`f32`) when `T` is.
    if same_type::<T, f64>() && n >= S::F64::LANES {
        unsafe { wide::small::<S::F64>(src.cast(), dst.cast(), n) };
        return true;
    }
    if same_type::<T, f32>() && n >= S::F32::LANES {
        unsafe { wide::small::<S::F32>(src.cast(), dst.cast(), n) };
        return true;
    }
    false
}

/// The whole transform of an L1-sized power-of-two vector in place.
struct Small<'a, T>(&'a mut [T]);

impl<S: Wide, T: Real> WithSimd<S> for Small<'_, T> {
    type Output = ();
    #[inline(always)]
    fn with_simd(self, _: S) {
        let x = self.0;
        let p = x.as_mut_ptr();
        // SAFETY: `p` is `x`, in place; the token proves the instruction set.
        if !unsafe { wide_small::<S, T>(p, p, x.len()) } {
            butterfly::small(x)
        }
    }
}

impl<T: Real> WithSimd<Portable> for Small<'_, T> {
    type Output = ();
    #[inline(always)]
    fn with_simd(self, _: Portable) {
        butterfly::small(self.0)
    }
}

/// The whole transform `dst <- H src` of an L1-sized power-of-two vector
/// (the lengths equal): the first pass reads `src`.
struct SmallInto<'a, T> {
    src: &'a [T],
    dst: &'a mut [T],
}

impl<S: Wide, T: Real> WithSimd<S> for SmallInto<'_, T> {
    type Output = ();
    #[inline(always)]
    fn with_simd(self, _: S) {
        let SmallInto { src, dst } = self;
        // SAFETY: two borrows of `dst.len()` elements, disjoint; the token
        // proves the instruction set.
        if !unsafe { wide_small::<S, T>(src.as_ptr(), dst.as_mut_ptr(), dst.len()) } {
            dst.copy_from_slice(src);
            butterfly::small(dst)
        }
    }
}

impl<T: Real> WithSimd<Portable> for SmallInto<'_, T> {
    type Output = ();
    #[inline(always)]
    fn with_simd(self, _: Portable) {
        self.dst.copy_from_slice(self.src);
        butterfly::small(self.dst)
    }
}

/// Phase 2 of the blocked transform on one strip. Made only by
/// [`strip_on`], whose caller guarantees the contract of
/// [`butterfly::strip`].
struct StripOp<'a, T>(&'a Strip<T>);

impl<S: Wide, T: Real> WithSimd<S> for StripOp<'_, T> {
    type Output = ();
    #[inline(always)]
    fn with_simd(self, _: S) {
        let s = self.0;
        // SAFETY (all): the contract of `butterfly::strip` (see `StripOp`);
        // the token proves the instruction set; the wide passes only when
        // the strip width is a multiple of the lanes.
        unsafe {
            match (s.cast::<f64>(), s.cast::<f32>()) {
                (Some(d), _) if s.width.is_multiple_of(S::F64::LANES) => wide::strip::<S::F64>(&d),
                (_, Some(f)) if s.width.is_multiple_of(S::F32::LANES) => wide::strip::<S::F32>(&f),
                _ => butterfly::strip(s),
            }
        }
    }
}

impl<T: Real> WithSimd<Portable> for StripOp<'_, T> {
    type Output = ();
    #[inline(always)]
    fn with_simd(self, _: Portable) {
        // SAFETY: the contract of `butterfly::strip` (see `StripOp`).
        unsafe { butterfly::strip(self.0) }
    }
}

/// `x <- H x` for an L1-sized power-of-two vector, with the passes of `isa`
/// (panics if this CPU lacks it).
fn small_on<T: Real>(isa: Isa, x: &mut [T]) {
    isa.dispatch(Small(x))
}

/// Phase 2 of the blocked transform on one strip with the passes of `isa`
/// (panics if this CPU lacks it).
///
/// # Safety
/// As [`butterfly::strip`].
unsafe fn strip_on<T: Real>(isa: Isa, s: &Strip<T>) {
    isa.dispatch(StripOp(s))
}

/// Whether `isa` has a register of `T` at most `n` lanes wide, so that
/// [`wide_small`] takes the `n`-point vector (the register widths of the
/// `Wide` implementations: 64 bytes for AVX-512, 32 for AVX2).
#[inline(always)]
fn fills_a_register<T>(isa: Isa, n: usize) -> bool {
    let bytes = n * std::mem::size_of::<T>();
    match isa {
        Isa::Avx512 => bytes >= 64,
        Isa::Avx2 => bytes >= 32,
        Isa::Portable => false,
    }
}

/// `x <- H x` for an L1-sized power-of-two vector, with the widest
/// instruction set of this CPU. A vector narrower than that instruction
/// set's register gets the plain loop under every instruction set (see
/// `Small`), so it runs inline, in the caller's own build, without the
/// dispatched call: the TensorSRHT of an 8-column input makes one such
/// transform of 8 points per factor and row, and the call cost more than
/// its three stages. The same loop either way, so the same bits.
#[inline(always)]
pub(super) fn small<T: Real>(x: &mut [T]) {
    let isa = Isa::detect();
    if fills_a_register::<T>(isa, x.len()) {
        small_on(isa, x)
    } else {
        butterfly::small(x)
    }
}

/// `dst <- H src` for an L1-sized power-of-two vector, with the widest
/// instruction set of this CPU: the first pass reads `src` (no copy
/// before it).
///
/// # Panics
/// If the lengths differ.
pub(super) fn small_into<T: Real>(src: &[T], dst: &mut [T]) {
    let isa = Isa::detect();
    if fills_a_register::<T>(isa, dst.len()) {
        small_into_on(isa, src, dst)
    } else {
        // As in `small`: the plain loop inline.
        dst.copy_from_slice(src);
        butterfly::small(dst)
    }
}

/// `dst <- H src` for an L1-sized power-of-two vector, with the passes of
/// `isa` (panics if this CPU lacks it, or if the lengths differ).
fn small_into_on<T: Real>(isa: Isa, src: &[T], dst: &mut [T]) {
    assert_eq!(src.len(), dst.len(), "small_into: lengths");
    isa.dispatch(SmallInto { src, dst })
}

/// Phase 2 of the blocked transform on one strip, with the widest
/// instruction set of this CPU.
///
/// # Safety
/// As [`butterfly::strip`].
pub(super) unsafe fn strip<T: Real>(s: &Strip<T>) {
    // SAFETY: the caller's contract.
    unsafe { strip_on(Isa::detect(), s) }
}

/// Test hook: runs `small` with every instruction set this CPU supports
/// (narrowest first), in place and out of place, so the tests compare each
/// with the textbook loop bit for bit.
#[cfg(test)]
pub(super) fn small_all_levels<T: Real>(x: &[T]) -> Vec<Vec<T>> {
    let mut out = Vec::new();
    for isa in Isa::available() {
        let mut v = x.to_vec();
        small_on(isa, &mut v);
        out.push(v);
        let mut w = vec![T::nan(); x.len()];
        small_into_on(isa, x, &mut w);
        out.push(w);
    }
    out
}

/// Test hook: phase 2 (all strips of `width` columns over `rows` rows of
/// `row_len`) with every instruction set this CPU supports, on copies of `x`.
#[cfg(test)]
pub(super) fn phase2_all_levels<T: Real>(
    x: &[T],
    rows: usize,
    row_len: usize,
    width: usize,
) -> Vec<Vec<T>> {
    Isa::available()
        .into_iter()
        .map(|isa| {
            let mut v = x.to_vec();
            for s in 0..row_len / width {
                let strip = Strip {
                    // SAFETY: s * width < row_len <= v.len().
                    ptr: unsafe { v.as_mut_ptr().add(s * width) },
                    rows,
                    row_len,
                    width,
                };
                // SAFETY: the strip lies inside `v`, one strip at a time.
                unsafe { strip_on(isa, &strip) };
            }
            v
        })
        .collect()
}
