//! Run-time choice of the instruction set. The kernels in `kernel.rs` are
//! `#[inline(always)]` generic code; here each entry point is compiled once
//! per x86-64 level (AVX-512, AVX2, baseline SSE2) and the widest one the
//! CPU supports is picked on first use. Wheels are built for baseline x86-64
//! (no `target-cpu=native`) and still run the wide code on wide CPUs. Other
//! architectures use their baseline (NEON on aarch64).
//!
//! The choice cannot change results: the kernels use only additions and
//! subtractions in a fixed order (no FMA, no reassociation).

use super::kernel::{self, Strip};
use crate::real::Real;

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::*;
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

    #[target_feature(enable = "avx512f")]
    pub(crate) fn small_avx512<T: Real>(x: &mut [T]) {
        kernel::small(x)
    }
    #[target_feature(enable = "avx2")]
    pub(crate) fn small_avx2<T: Real>(x: &mut [T]) {
        kernel::small(x)
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
