//! Run-time choice of the instruction set. The portable kernels of
//! `butterfly.rs` (SSE2 and other architectures) and the explicit-register
//! kernels of `wide.rs` (AVX2, AVX-512) are `#[inline(always)]` generic code;
//! here each entry point is compiled once per instruction set of
//! [`crate::simd::Isa`] (AVX-512, AVX2 + FMA, baseline SSE2) and the widest
//! one the CPU supports ([`Isa::detect`]) is called. Wheels are built for
//! baseline x86-64 (no `target-cpu=native`) and still run the wide code on
//! wide CPUs. Other architectures use their baseline (NEON on aarch64).
//!
//! The register types (`F64x8`, `F32x16`, `F64x4`, `F32x8`) define the
//! stages whose butterflies lie inside one register (distances below the
//! lane count) with explicit permutes: per stage, `p = partner lanes`,
//! `out = v + p` in the lower lane of each pair and `p − v` in the upper one
//! (AVX-512: one `fma(v, ±1, p)`, exact because `v * ±1` is). Those are the
//! same additions, in the same order, as the textbook loop, so the choice of
//! instruction set never changes a result (no reassociation anywhere).

use super::butterfly::{self, Strip};
#[cfg(target_arch = "x86_64")]
use super::wide;
use crate::real::Real;
use crate::simd::Isa;

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::*;
    use crate::real::{cast_slice_mut as cast, same_type};
    use crate::simd::x86::{F32x16, F32x8, F64x4, F64x8};
    use std::arch::x86_64::*;

    /// Implements `wide::Butterfly` for a register type of
    /// `crate::simd::x86`: its stages per pass and its in-register stages.
    macro_rules! butterfly {
        ($name:ident, $max:expr, $feat:literal, |$v:ident| $body:block) => {
            // SAFETY: compiled with `$feat`; callers run only where
            // `Isa::detect` found it.
            unsafe impl wide::Butterfly for $name {
                const MAX_STAGES: u32 = $max;
                #[inline]
                #[target_feature(enable = $feat)]
                unsafe fn in_register(self) -> Self {
                    let $v = self.0;
                    Self($body)
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
    butterfly!(F64x8, 3, "avx512f,avx2,fma", |v| {
        // SAFETY: the sign tables hold 8 doubles each.
        let sg = |k: usize| unsafe { _mm512_loadu_pd(S8[k].as_ptr()) };
        let s = _mm512_permute_pd::<0x55>(v);
        let v = _mm512_fmadd_pd(v, sg(0), s);
        let s = _mm512_permutex_pd::<0x4E>(v);
        let v = _mm512_fmadd_pd(v, sg(1), s);
        let s = _mm512_shuffle_f64x2::<0x4E>(v, v);
        _mm512_fmadd_pd(v, sg(2), s)
    });
    butterfly!(F32x16, 3, "avx512f,avx2,fma", |v| {
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
    butterfly!(F64x4, 3, "avx2,fma", |v| {
        let s = _mm256_permute_pd::<0b0101>(v);
        let v = _mm256_blend_pd::<0b1010>(_mm256_add_pd(v, s), _mm256_sub_pd(s, v));
        let s = _mm256_permute2f128_pd::<0x01>(v, v);
        _mm256_blend_pd::<0b1100>(_mm256_add_pd(v, s), _mm256_sub_pd(s, v))
    });
    butterfly!(F32x8, 3, "avx2,fma", |v| {
        let s = _mm256_permute_ps::<0xB1>(v);
        let v = _mm256_blend_ps::<0xAA>(_mm256_add_ps(v, s), _mm256_sub_ps(s, v));
        let s = _mm256_permute_ps::<0x4E>(v);
        let v = _mm256_blend_ps::<0xCC>(_mm256_add_ps(v, s), _mm256_sub_ps(s, v));
        let s = _mm256_permute2f128_ps::<0x01>(v, v);
        _mm256_blend_ps::<0xF0>(_mm256_add_ps(v, s), _mm256_sub_ps(s, v))
    });

    /// The strip as a strip of `U` when `T` is `U`.
    fn cast_strip<T: 'static, U: 'static>(s: &Strip<T>) -> Option<Strip<U>> {
        same_type::<T, U>().then(|| Strip {
            ptr: s.ptr.cast::<U>(),
            rows: s.rows,
            row_len: s.row_len,
            width: s.width,
        })
    }

    #[target_feature(enable = "avx512f,avx2,fma")]
    pub(crate) fn small_avx512<T: Real>(x: &mut [T]) {
        if x.len() >= 64 / std::mem::size_of::<T>() {
            // SAFETY (both): AVX-512F is enabled here.
            if let Some(d) = cast::<T, f64>(x) {
                return unsafe { wide::small::<F64x8>(d) };
            } else if let Some(f) = cast::<T, f32>(x) {
                return unsafe { wide::small::<F32x16>(f) };
            }
        }
        butterfly::small(x)
    }

    #[target_feature(enable = "avx2,fma")]
    pub(crate) fn small_avx2<T: Real>(x: &mut [T]) {
        if x.len() >= 32 / std::mem::size_of::<T>() {
            // SAFETY (both): AVX2 is enabled here.
            if let Some(d) = cast::<T, f64>(x) {
                return unsafe { wide::small::<F64x4>(d) };
            } else if let Some(f) = cast::<T, f32>(x) {
                return unsafe { wide::small::<F32x8>(f) };
            }
        }
        butterfly::small(x)
    }

    /// # Safety
    /// As [`butterfly::strip`]; the CPU must support AVX-512F.
    #[target_feature(enable = "avx512f,avx2,fma")]
    pub(crate) unsafe fn strip_avx512<T: Real>(s: &Strip<T>) {
        // SAFETY (all): forwarded from the caller; the wide kernel only
        // when the strip width is a multiple of the lanes.
        unsafe {
            let lanes = 64 / std::mem::size_of::<T>();
            match (cast_strip::<T, f64>(s), cast_strip::<T, f32>(s)) {
                (Some(d), _) if s.width.is_multiple_of(lanes) => wide::strip::<F64x8>(&d),
                (_, Some(f)) if s.width.is_multiple_of(lanes) => wide::strip::<F32x16>(&f),
                _ => butterfly::strip(s),
            }
        }
    }
    /// # Safety
    /// As [`butterfly::strip`]; the CPU must support AVX2.
    #[target_feature(enable = "avx2,fma")]
    pub(crate) unsafe fn strip_avx2<T: Real>(s: &Strip<T>) {
        // SAFETY (all): as in `strip_avx512`.
        unsafe {
            let lanes = 32 / std::mem::size_of::<T>();
            match (cast_strip::<T, f64>(s), cast_strip::<T, f32>(s)) {
                (Some(d), _) if s.width.is_multiple_of(lanes) => wide::strip::<F64x4>(&d),
                (_, Some(f)) if s.width.is_multiple_of(lanes) => wide::strip::<F32x8>(&f),
                _ => butterfly::strip(s),
            }
        }
    }
}

/// The whole transform of an L1-sized power-of-two vector with the kernels
/// of `isa`.
///
/// # Safety
/// The CPU must support `isa` ([`Isa::detect`] / [`Isa::available`]).
unsafe fn small_on<T: Real>(isa: Isa, x: &mut [T]) {
    match isa {
        // SAFETY: the caller's contract.
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => unsafe { x86::small_avx512(x) },
        // SAFETY: the caller's contract.
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => unsafe { x86::small_avx2(x) },
        _ => butterfly::small(x),
    }
}

/// Phase 2 of the blocked transform on one strip with the kernels of `isa`.
///
/// # Safety
/// As [`butterfly::strip`]; the CPU must support `isa`.
unsafe fn strip_on<T: Real>(isa: Isa, s: &Strip<T>) {
    // SAFETY (all): the caller's contract.
    unsafe {
        match isa {
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => x86::strip_avx512(s),
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => x86::strip_avx2(s),
            _ => butterfly::strip(s),
        }
    }
}

/// The whole transform of an L1-sized power-of-two vector, with the widest
/// instruction set of this CPU.
pub(super) fn small<T: Real>(x: &mut [T]) {
    // SAFETY: the instruction set was detected on this CPU.
    unsafe { small_on(Isa::detect(), x) }
}

/// Phase 2 of the blocked transform on one strip, with the widest
/// instruction set of this CPU.
///
/// # Safety
/// As [`butterfly::strip`].
pub(super) unsafe fn strip<T: Real>(s: &Strip<T>) {
    // SAFETY: the instruction set was detected on this CPU; the rest is the
    // caller's contract.
    unsafe { strip_on(Isa::detect(), s) }
}

/// Test hook: runs `small` with every instruction set this CPU supports
/// (narrowest first), so the tests compare each with the textbook loop bit
/// for bit.
#[cfg(test)]
pub(super) fn small_all_levels<T: Real>(x: &[T]) -> Vec<Vec<T>> {
    Isa::available()
        .into_iter()
        .map(|isa| {
            let mut v = x.to_vec();
            // SAFETY: `available` lists instruction sets of this CPU.
            unsafe { small_on(isa, &mut v) };
            v
        })
        .collect()
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
                // SAFETY: the strip lies inside `v`, one strip at a time;
                // `available` lists instruction sets of this CPU.
                unsafe { strip_on(isa, &strip) };
            }
            v
        })
        .collect()
}

/// Test hook for timing: the portable kernels compiled for AVX-512 (the
/// control of `compare_levels_timing`), baseline code elsewhere.
#[cfg(test)]
pub(super) fn time_portable<T: Real>(x: &mut [T]) {
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx512f")]
        fn portable_avx512<T: Real>(x: &mut [T]) {
            butterfly::small(x)
        }
        if std::is_x86_feature_detected!("avx512f") {
            // SAFETY: AVX-512F detected.
            return unsafe { portable_avx512(x) };
        }
    }
    butterfly::small(x)
}
