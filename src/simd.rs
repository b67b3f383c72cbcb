//! Run-time selection of the instruction set: [`Isa`] for the hand-written
//! intrinsic kernels, and `widest_simd!` for kernels written as plain loops
//! (the compiler vectorizes them once per instruction set).

/// An x86-64 instruction set the hand-written kernels are compiled for
/// (chosen at run time: the wheel runs on any x86-64, no `target-cpu`
/// flags).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Isa {
    /// AVX-512F (with AVX2 and FMA, which every AVX-512 CPU has).
    Avx512,
    /// AVX2 + FMA.
    Avx2,
    /// Neither: plain scalar code (any CPU).
    Portable,
}

impl Isa {
    /// The widest instruction set this CPU supports.
    pub fn detect() -> Self {
        #[cfg(target_arch = "x86_64")]
        {
            let avx2_fma =
                std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma");
            if avx2_fma && std::is_x86_feature_detected!("avx512f") {
                return Isa::Avx512;
            }
            if avx2_fma {
                return Isa::Avx2;
            }
        }
        Isa::Portable
    }

    /// The name `randfeat_rs.simd_level()` reports: `"avx512f"`, `"avx2"`,
    /// `"sse2"` (x86-64 without AVX2 + FMA) or `"baseline"` (other
    /// architectures).
    pub fn name(self) -> &'static str {
        match self {
            Isa::Avx512 => "avx512f",
            Isa::Avx2 => "avx2",
            Isa::Portable if cfg!(target_arch = "x86_64") => "sse2",
            Isa::Portable => "baseline",
        }
    }

    /// Every instruction set this CPU can run, narrowest first (for tests
    /// and benchmarks that force each).
    pub fn available() -> Vec<Self> {
        match Isa::detect() {
            Isa::Avx512 => vec![Isa::Portable, Isa::Avx2, Isa::Avx512],
            Isa::Avx2 => vec![Isa::Portable, Isa::Avx2],
            Isa::Portable => vec![Isa::Portable],
        }
    }
}

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
