//! Run-time choice of the instruction set. The kernels in `kernel.rs` are
//! `#[inline(always)]` generic code; here each entry point is compiled once
//! per x86-64 level (AVX-512, AVX2, baseline SSE2) and the widest one the
//! CPU supports is picked on first use. Wheels are built for baseline x86-64
//! (no `target-cpu=native`) and still run the wide code on wide CPUs. Other
//! architectures use their baseline (NEON on aarch64).
//!
//! The stages whose butterflies lie inside one SIMD register (distances
//! below the lane count) are written with explicit permutes: per stage,
//! `p = partner lanes`, `out = v + p` in the lower lane of each pair and
//! `p − v` in the upper one. Those are the same additions, in the same
//! order, as the textbook loop, so the choice of level never changes a
//! result (no FMA, no reassociation anywhere).

use super::kernel::{self, Strip};
use crate::real::Real;

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::*;
    use std::any::TypeId;
    use std::arch::x86_64::*;
    use std::sync::atomic::{AtomicU8, Ordering};

    #[derive(Clone, Copy, PartialEq, Eq, Debug)]
    pub(crate) enum Level {
        Sse2 = 1,
        Avx2 = 2,
        Avx512 = 3,
    }

    static LEVEL: AtomicU8 = AtomicU8::new(0);

    pub(crate) fn level() -> Level {
        match LEVEL.load(Ordering::Relaxed) {
            1 => Level::Sse2,
            2 => Level::Avx2,
            3 => Level::Avx512,
            _ => {
                let l = if std::is_x86_feature_detected!("avx512f") {
                    Level::Avx512
                } else if std::is_x86_feature_detected!("avx2") {
                    Level::Avx2
                } else {
                    Level::Sse2
                };
                LEVEL.store(l as u8, Ordering::Relaxed);
                l
            }
        }
    }

    /// The slice as `&mut [U]` when `T` is `U` (`Real` is only `f32`/`f64`).
    fn cast<T: 'static, U: 'static>(x: &mut [T]) -> Option<&mut [U]> {
        if TypeId::of::<T>() == TypeId::of::<U>() {
            // SAFETY: T and U are the same type.
            Some(unsafe { &mut *(x as *mut [T] as *mut [U]) })
        } else {
            None
        }
    }

    /// In-register stages 1, 2, 4 of every 8-double vector.
    #[target_feature(enable = "avx512f")]
    fn in_vector_f64_avx512(x: &mut [f64]) {
        for c in x.chunks_exact_mut(8) {
            let p = c.as_mut_ptr();
            // SAFETY: `c` holds exactly 8 doubles; unaligned load/store.
            unsafe {
                let mut v = _mm512_loadu_pd(p);
                let s = _mm512_permute_pd::<0x55>(v);
                v = _mm512_mask_sub_pd(_mm512_add_pd(v, s), 0xAA, s, v);
                let s = _mm512_permutex_pd::<0x4E>(v);
                v = _mm512_mask_sub_pd(_mm512_add_pd(v, s), 0xCC, s, v);
                let s = _mm512_shuffle_f64x2::<0x4E>(v, v);
                v = _mm512_mask_sub_pd(_mm512_add_pd(v, s), 0xF0, s, v);
                _mm512_storeu_pd(p, v);
            }
        }
    }

    /// In-register stages 1, 2, 4, 8 of every 16-float vector.
    #[target_feature(enable = "avx512f")]
    fn in_vector_f32_avx512(x: &mut [f32]) {
        for c in x.chunks_exact_mut(16) {
            let p = c.as_mut_ptr();
            // SAFETY: `c` holds exactly 16 floats; unaligned load/store.
            unsafe {
                let mut v = _mm512_loadu_ps(p);
                let s = _mm512_permute_ps::<0xB1>(v);
                v = _mm512_mask_sub_ps(_mm512_add_ps(v, s), 0xAAAA, s, v);
                let s = _mm512_permute_ps::<0x4E>(v);
                v = _mm512_mask_sub_ps(_mm512_add_ps(v, s), 0xCCCC, s, v);
                let s = _mm512_shuffle_f32x4::<0xB1>(v, v);
                v = _mm512_mask_sub_ps(_mm512_add_ps(v, s), 0xF0F0, s, v);
                let s = _mm512_shuffle_f32x4::<0x4E>(v, v);
                v = _mm512_mask_sub_ps(_mm512_add_ps(v, s), 0xFF00, s, v);
                _mm512_storeu_ps(p, v);
            }
        }
    }

    /// In-register stages 1, 2 of every 4-double vector.
    #[target_feature(enable = "avx2")]
    fn in_vector_f64_avx2(x: &mut [f64]) {
        for c in x.chunks_exact_mut(4) {
            let p = c.as_mut_ptr();
            // SAFETY: `c` holds exactly 4 doubles; unaligned load/store.
            unsafe {
                let mut v = _mm256_loadu_pd(p);
                let s = _mm256_permute_pd::<0b0101>(v);
                v = _mm256_blend_pd::<0b1010>(_mm256_add_pd(v, s), _mm256_sub_pd(s, v));
                let s = _mm256_permute2f128_pd::<0x01>(v, v);
                v = _mm256_blend_pd::<0b1100>(_mm256_add_pd(v, s), _mm256_sub_pd(s, v));
                _mm256_storeu_pd(p, v);
            }
        }
    }

    /// In-register stages 1, 2, 4 of every 8-float vector.
    #[target_feature(enable = "avx2")]
    fn in_vector_f32_avx2(x: &mut [f32]) {
        for c in x.chunks_exact_mut(8) {
            let p = c.as_mut_ptr();
            // SAFETY: `c` holds exactly 8 floats; unaligned load/store.
            unsafe {
                let mut v = _mm256_loadu_ps(p);
                let s = _mm256_permute_ps::<0xB1>(v);
                v = _mm256_blend_ps::<0xAA>(_mm256_add_ps(v, s), _mm256_sub_ps(s, v));
                let s = _mm256_permute_ps::<0x4E>(v);
                v = _mm256_blend_ps::<0xCC>(_mm256_add_ps(v, s), _mm256_sub_ps(s, v));
                let s = _mm256_permute2f128_ps::<0x01>(v, v);
                v = _mm256_blend_ps::<0xF0>(_mm256_add_ps(v, s), _mm256_sub_ps(s, v));
                _mm256_storeu_ps(p, v);
            }
        }
    }

    #[target_feature(enable = "avx512f")]
    pub(crate) fn small_avx512<T: Real>(x: &mut [T]) {
        let lanes = 64 / std::mem::size_of::<T>();
        if x.len() < lanes {
            return kernel::small(x);
        }
        if let Some(d) = cast::<T, f64>(x) {
            in_vector_f64_avx512(d);
        } else if let Some(f) = cast::<T, f32>(x) {
            in_vector_f32_avx512(f);
        } else {
            return kernel::small(x);
        }
        kernel::small_from(x, lanes)
    }

    #[target_feature(enable = "avx2")]
    pub(crate) fn small_avx2<T: Real>(x: &mut [T]) {
        let lanes = 32 / std::mem::size_of::<T>();
        if x.len() < lanes {
            return kernel::small(x);
        }
        if let Some(d) = cast::<T, f64>(x) {
            in_vector_f64_avx2(d);
        } else if let Some(f) = cast::<T, f32>(x) {
            in_vector_f32_avx2(f);
        } else {
            return kernel::small(x);
        }
        kernel::small_from(x, lanes)
    }

    /// # Safety
    /// As [`kernel::strip`]; the CPU must support AVX-512F.
    #[target_feature(enable = "avx512f")]
    pub(crate) unsafe fn strip_avx512<T: Real>(s: &Strip<T>) {
        // SAFETY: forwarded from the caller.
        unsafe { kernel::strip(s) }
    }
    /// # Safety
    /// As [`kernel::strip`]; the CPU must support AVX2.
    #[target_feature(enable = "avx2")]
    pub(crate) unsafe fn strip_avx2<T: Real>(s: &Strip<T>) {
        // SAFETY: forwarded from the caller.
        unsafe { kernel::strip(s) }
    }
}

/// Name of the instruction set the kernels run with ("avx512f", "avx2",
/// "sse2" or "baseline").
pub fn simd_level() -> &'static str {
    #[cfg(target_arch = "x86_64")]
    {
        match x86::level() {
            x86::Level::Avx512 => "avx512f",
            x86::Level::Avx2 => "avx2",
            x86::Level::Sse2 => "sse2",
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        "baseline"
    }
}

/// The whole transform of an L1-sized power-of-two vector.
pub(super) fn small<T: Real>(x: &mut [T]) {
    #[cfg(target_arch = "x86_64")]
    {
        match x86::level() {
            // SAFETY: the level was detected on this CPU.
            x86::Level::Avx512 => unsafe { x86::small_avx512(x) },
            // SAFETY: as above.
            x86::Level::Avx2 => unsafe { x86::small_avx2(x) },
            x86::Level::Sse2 => kernel::small(x),
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    kernel::small(x)
}

/// Phase 2 of the blocked transform on one strip.
///
/// # Safety
/// As [`kernel::strip`].
pub(super) unsafe fn strip<T: Real>(s: &Strip<T>) {
    #[cfg(target_arch = "x86_64")]
    {
        match x86::level() {
            // SAFETY: the level was detected on this CPU; the rest is the caller's contract.
            x86::Level::Avx512 => unsafe { x86::strip_avx512(s) },
            // SAFETY: as above.
            x86::Level::Avx2 => unsafe { x86::strip_avx2(s) },
            // SAFETY: the caller's contract.
            x86::Level::Sse2 => unsafe { kernel::strip(s) },
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    // SAFETY: the caller's contract.
    unsafe {
        kernel::strip(s)
    }
}

/// Test hook: runs `small` at every level this CPU supports, so the tests
/// compare each level with the textbook loop bit for bit.
#[cfg(test)]
pub(super) fn small_all_levels<T: Real>(x: &[T]) -> Vec<Vec<T>> {
    let mut out = Vec::new();
    let mut portable = x.to_vec();
    kernel::small(&mut portable);
    out.push(portable);
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("avx2") {
            let mut v = x.to_vec();
            // SAFETY: AVX2 detected.
            unsafe { x86::small_avx2(&mut v) };
            out.push(v);
        }
        if std::is_x86_feature_detected!("avx512f") {
            let mut v = x.to_vec();
            // SAFETY: AVX-512F detected.
            unsafe { x86::small_avx512(&mut v) };
            out.push(v);
        }
    }
    out
}

/// Test hook for timing: 0 = portable code compiled for AVX-512,
/// 1 = AVX2 path, 2 = AVX-512 path.
#[cfg(test)]
pub(super) fn time_level(x: &mut [f64], lvl: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx512f")]
        fn portable_avx512(x: &mut [f64]) {
            kernel::small(x)
        }
        // SAFETY: this hook is only run on the AVX-512 development machine.
        unsafe {
            match lvl {
                0 => portable_avx512(x),
                1 => x86::small_avx2(x),
                _ => x86::small_avx512(x),
            }
        }
    }
}
