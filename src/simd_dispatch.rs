//! Run-time selection of the widest SIMD level for kernels written as plain
//! loops (the compiler vectorizes them once per instruction set).

/// Defines `$vis fn $name(args) -> ret` that runs `$body(args)` compiled for
/// AVX-512F when the CPU has it, else for AVX2, else for the target's
/// baseline (the wheel runs on any x86-64; no `target-cpu=native`).
///
/// `$body` must be an `#[inline(always)]` function, so that each copy is
/// vectorized for its instruction set, and must not rely on FMA contraction,
/// so that every copy gives the same bits.
macro_rules! widest_simd {
    (
        $(#[$attr:meta])*
        $vis:vis fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)? = $body:path;
    ) => {
        $(#[$attr])*
        $vis fn $name($($arg: $ty),*) $(-> $ret)? {
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f")]
                fn avx512($($arg: $ty),*) $(-> $ret)? {
                    $body($($arg),*)
                }
                #[target_feature(enable = "avx2")]
                fn avx2($($arg: $ty),*) $(-> $ret)? {
                    $body($($arg),*)
                }
                if std::is_x86_feature_detected!("avx512f") {
                    // SAFETY: the CPU supports AVX-512F (checked above).
                    return unsafe { avx512($($arg),*) };
                }
                if std::is_x86_feature_detected!("avx2") {
                    // SAFETY: the CPU supports AVX2 (checked above).
                    return unsafe { avx2($($arg),*) };
                }
            }
            $body($($arg),*)
        }
    };
}
