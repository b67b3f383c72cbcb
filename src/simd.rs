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
    /// The widest instruction set this CPU supports (probed once, then one
    /// relaxed atomic load: the FWHT asks once per vector).
    pub fn detect() -> Self {
        use std::sync::atomic::{AtomicU8, Ordering};
        const ORDER: [Isa; 3] = [Isa::Avx512, Isa::Avx2, Isa::Portable];
        static CACHE: AtomicU8 = AtomicU8::new(u8::MAX);
        if let Some(isa) = ORDER.get(usize::from(CACHE.load(Ordering::Relaxed))) {
            return *isa;
        }
        let isa = Self::probe();
        let code = ORDER.iter().position(|i| *i == isa).unwrap_or(2);
        CACHE.store(code as u8, Ordering::Relaxed);
        isa
    }

    /// The CPU's widest instruction set, from the feature flags.
    fn probe() -> Self {
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

/// Defines `$vis fn $name(args) -> ret` (optionally generic, `$name<T:
/// Bound>`) that runs `$body(args)` compiled for
/// AVX-512F when [`Isa::detect`] finds [`Isa::Avx512`], for AVX2 on
/// [`Isa::Avx2`], else for the target's baseline (the wheel runs on any x86-64; no `target-cpu=native`).
///
/// `$body` must be an `#[inline(always)]` function, so that each copy is
/// vectorized for its instruction set, and must not rely on FMA contraction,
/// so that every copy gives the same bits.
macro_rules! widest_simd {
    (
        $(#[$attr:meta])*
        $vis:vis fn $name:ident $(<$($g:ident: $bound:path),+>)? ($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)? = $body:path;
    ) => {
        $(#[$attr])*
        $vis fn $name $(<$($g: $bound),+>)? ($($arg: $ty),*) $(-> $ret)? {
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f")]
                fn avx512 $(<$($g: $bound),+>)? ($($arg: $ty),*) $(-> $ret)? {
                    $body($($arg),*)
                }
                #[target_feature(enable = "avx2")]
                fn avx2 $(<$($g: $bound),+>)? ($($arg: $ty),*) $(-> $ret)? {
                    $body($($arg),*)
                }
                match $crate::simd::Isa::detect() {
                    // SAFETY: the CPU supports AVX-512F (Isa::detect).
                    $crate::simd::Isa::Avx512 => return unsafe { avx512($($arg),*) },
                    // SAFETY: the CPU supports AVX2 (Isa::detect).
                    $crate::simd::Isa::Avx2 => return unsafe { avx2($($arg),*) },
                    $crate::simd::Isa::Portable => {}
                }
            }
            $body($($arg),*)
        }
    };
}

/// Asks the CPU to bring the cache lines of `data` into L1 ahead of use
/// (`prefetcht0`, one a 64-byte line; a hint with no effect on results, and
/// nothing off x86-64). For reads the hardware prefetchers miss: many short
/// runs far apart.
#[inline(always)]
pub(crate) fn prefetch<T>(data: &[T]) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let bytes = std::mem::size_of_val(data);
        let p = data.as_ptr().cast::<i8>();
        for off in (0..bytes).step_by(64) {
            // SAFETY: SSE is baseline on x86-64; a prefetch never faults,
            // and `p + off` is inside `data`.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(p.add(off)) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = data;
}

/// One SIMD register of [`Vector::LANES`] lanes of [`Vector::T`] and the
/// lane-wise operations of the hand-written kernels (the FWHT butterflies,
/// the fused Fourier projection). The x86-64 register types are in [`x86`].
///
/// # Safety
/// Implementations are only called from functions compiled with the
/// instruction set they need, on a CPU that has it.
pub(crate) unsafe trait Vector: Copy {
    /// The lane type.
    type T: crate::real::Real;
    /// Lanes per register (a power of two).
    const LANES: usize;
    /// All lanes zero.
    unsafe fn zero() -> Self;
    /// All lanes `*p`.
    unsafe fn splat(p: *const Self::T) -> Self;
    /// Unaligned load of `LANES` elements.
    unsafe fn load(p: *const Self::T) -> Self;
    /// Unaligned store of `LANES` elements.
    unsafe fn store(self, p: *mut Self::T);
    /// Lane-wise `self + o`.
    unsafe fn add(self, o: Self) -> Self;
    /// Lane-wise `self - o`.
    unsafe fn sub(self, o: Self) -> Self;
    /// Lane-wise `self · b + c`, fused (one rounding) on the SIMD registers.
    unsafe fn fmadd(self, b: Self, c: Self) -> Self;
}

// SAFETY: plain scalar code (any CPU). The portable "register" of one
// lane; its `fmadd` rounds twice (a fused `mul_add` is a library call on
// CPUs without FMA), which only the portable kernels use.
unsafe impl Vector for f64 {
    type T = f64;
    const LANES: usize = 1;
    #[inline(always)]
    unsafe fn zero() -> Self {
        0.0
    }
    #[inline(always)]
    unsafe fn splat(p: *const f64) -> Self {
        // SAFETY: the caller's contract.
        unsafe { *p }
    }
    #[inline(always)]
    unsafe fn load(p: *const f64) -> Self {
        // SAFETY: the caller's contract.
        unsafe { *p }
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut f64) {
        // SAFETY: the caller's contract.
        unsafe { *p = self }
    }
    #[inline(always)]
    unsafe fn add(self, o: Self) -> Self {
        self + o
    }
    #[inline(always)]
    unsafe fn sub(self, o: Self) -> Self {
        self - o
    }
    #[inline(always)]
    unsafe fn fmadd(self, b: Self, c: Self) -> Self {
        self * b + c
    }
}

/// The x86-64 registers of [`Isa::Avx512`] (`F64x8`, `F32x16`) and
/// [`Isa::Avx2`] (`F64x4`, `F32x8`); each method is compiled for its
/// instruction set's features (the same feature lists as the kernels'
/// entry points, so the methods inline there).
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86 {
    use super::Vector;
    use std::arch::x86_64::*;

    macro_rules! vector {
        ($name:ident, $reg:ty, $t:ty, $lanes:literal, $feat:literal,
         $zero:ident, $set1:ident, $load:ident, $store:ident,
         $add:ident, $sub:ident, $fmadd:ident) => {
            /// One register of the instruction set named in its methods.
            #[derive(Clone, Copy)]
            pub(crate) struct $name(pub(crate) $reg);

            // SAFETY: every method is compiled with the instruction set it
            // uses; callers guarantee the CPU has it.
            unsafe impl Vector for $name {
                type T = $t;
                const LANES: usize = $lanes;
                #[inline]
                #[target_feature(enable = $feat)]
                unsafe fn zero() -> Self {
                    Self($zero())
                }
                #[inline]
                #[target_feature(enable = $feat)]
                unsafe fn splat(p: *const $t) -> Self {
                    // SAFETY: the caller's contract (`p` readable).
                    Self($set1(unsafe { *p }))
                }
                #[inline]
                #[target_feature(enable = $feat)]
                unsafe fn load(p: *const $t) -> Self {
                    // SAFETY: the caller's contract (LANES readable elements).
                    Self(unsafe { $load(p) })
                }
                #[inline]
                #[target_feature(enable = $feat)]
                unsafe fn store(self, p: *mut $t) {
                    // SAFETY: the caller's contract (LANES writable elements).
                    unsafe { $store(p, self.0) }
                }
                #[inline]
                #[target_feature(enable = $feat)]
                unsafe fn add(self, o: Self) -> Self {
                    Self($add(self.0, o.0))
                }
                #[inline]
                #[target_feature(enable = $feat)]
                unsafe fn sub(self, o: Self) -> Self {
                    Self($sub(self.0, o.0))
                }
                #[inline]
                #[target_feature(enable = $feat)]
                unsafe fn fmadd(self, b: Self, c: Self) -> Self {
                    Self($fmadd(self.0, b.0, c.0))
                }
            }
        };
    }

    vector!(
        F64x8,
        __m512d,
        f64,
        8,
        "avx512f,avx2,fma",
        _mm512_setzero_pd,
        _mm512_set1_pd,
        _mm512_loadu_pd,
        _mm512_storeu_pd,
        _mm512_add_pd,
        _mm512_sub_pd,
        _mm512_fmadd_pd
    );
    vector!(
        F32x16,
        __m512,
        f32,
        16,
        "avx512f,avx2,fma",
        _mm512_setzero_ps,
        _mm512_set1_ps,
        _mm512_loadu_ps,
        _mm512_storeu_ps,
        _mm512_add_ps,
        _mm512_sub_ps,
        _mm512_fmadd_ps
    );
    vector!(
        F64x4,
        __m256d,
        f64,
        4,
        "avx2,fma",
        _mm256_setzero_pd,
        _mm256_set1_pd,
        _mm256_loadu_pd,
        _mm256_storeu_pd,
        _mm256_add_pd,
        _mm256_sub_pd,
        _mm256_fmadd_pd
    );
    vector!(
        F32x8,
        __m256,
        f32,
        8,
        "avx2,fma",
        _mm256_setzero_ps,
        _mm256_set1_ps,
        _mm256_loadu_ps,
        _mm256_storeu_ps,
        _mm256_add_ps,
        _mm256_sub_ps,
        _mm256_fmadd_ps
    );
}
