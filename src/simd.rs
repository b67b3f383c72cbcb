//! Run-time selection of the instruction set, written once for the crate.
//!
//! [`Isa`] names an instruction set as a value; [`Isa::detect`] is the one
//! run-time probe of the CPU. The wheel is built for baseline x86-64 (no
//! `target-cpu` flags) and still runs wide code on wide CPUs: each kernel
//! is compiled once per instruction set and the CPU's widest is called.
//!
//! - Kernels with explicit registers are written once, generic over a
//!   `Simd` token (the instruction set as a type, with its registers
//!   `Simd::F64`, `Simd::F32`, both `Vector`s), as an operation that
//!   implements `WithSimd`. `Isa::dispatch` runs it compiled for an
//!   instruction set; `Simd::vectorize` does the same from code that
//!   already holds a token (a rayon task of a wide kernel).
//! - Kernels written as plain loops, which the compiler vectorizes once per
//!   instruction set, are defined with `widest_simd!`.
//!
//! The target features of each instruction set are spelled in one place,
//! `isa_target!`, which every function compiled for one goes through.

/// An x86-64 instruction set the kernels are compiled for (chosen at run
/// time: the wheel runs on any x86-64, no `target-cpu` flags).
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
        static CACHE: AtomicU8 = AtomicU8::new(u8::MAX);
        if let Some(isa) = Self::NARROWEST_FIRST.get(usize::from(CACHE.load(Ordering::Relaxed))) {
            return *isa;
        }
        let isa = Self::probe();
        CACHE.store(isa.rank(), Ordering::Relaxed);
        isa
    }

    /// Every instruction set, narrowest first (indexed by [`Isa::rank`]).
    const NARROWEST_FIRST: [Isa; 3] = [Isa::Portable, Isa::Avx2, Isa::Avx512];

    /// The position in [`Isa::NARROWEST_FIRST`]: a CPU that runs one
    /// instruction set runs every narrower one.
    fn rank(self) -> u8 {
        match self {
            Isa::Portable => 0,
            Isa::Avx2 => 1,
            Isa::Avx512 => 2,
        }
    }

    /// The CPU's widest instruction set, from the feature flags: every
    /// feature that `isa_target!` enables for it.
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

    /// Whether this CPU can run code compiled for this instruction set.
    pub fn is_available(self) -> bool {
        self.rank() <= Isa::detect().rank()
    }

    /// Every instruction set this CPU can run, narrowest first (for tests
    /// and benchmarks that force each).
    pub fn available() -> Vec<Self> {
        Self::NARROWEST_FIRST
            .into_iter()
            .filter(|isa| isa.is_available())
            .collect()
    }

    /// Runs `op` compiled for this instruction set.
    ///
    /// # Panics
    /// If this CPU cannot run it (see [`Isa::is_available`]).
    // Inlined into every caller: the FWHT dispatches once per L1 block,
    // and an out-of-line dispatch costs a copy of `op` and a second call.
    #[inline(always)]
    pub(crate) fn dispatch<R, W: AnySimd<R>>(self, op: W) -> R {
        assert!(self.is_available(), "this CPU cannot run {self:?} code");
        match self {
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => Avx512(()).vectorize(op),
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => Avx2(()).vectorize(op),
            _ => Portable.vectorize(op),
        }
    }

    /// [`Isa::dispatch`] for an operation that has no portable build: `None`
    /// for [`Isa::Portable`] (and everywhere off x86-64).
    ///
    /// # Panics
    /// If this CPU cannot run the instruction set.
    #[inline(always)]
    pub(crate) fn dispatch_wide<R, W: WideSimd<R>>(self, op: W) -> Option<R> {
        assert!(self.is_available(), "this CPU cannot run {self:?} code");
        match self {
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => Some(Avx512(()).vectorize(op)),
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => Some(Avx2(()).vectorize(op)),
            _ => {
                let _ = op;
                None
            }
        }
    }
}

/// Compiles the function that follows for an instruction set:
/// `isa_target! { Avx512 fn f() { .. } }` is `f` with the target features
/// of [`Isa::Avx512`] enabled. The one place that spells them: AVX-512F
/// with AVX2 and FMA; AVX2 with FMA ([`Isa::detect`] checks each).
macro_rules! isa_target {
    (Avx512 $($item:tt)*) => {
        #[target_feature(enable = "avx512f,avx2,fma")]
        $($item)*
    };
    (Avx2 $($item:tt)*) => {
        #[target_feature(enable = "avx2,fma")]
        $($item)*
    };
}

/// An instruction set as a type: a zero-sized token. Code generic over it
/// is compiled once per instruction set, with its registers [`Simd::F64`]
/// and [`Simd::F32`]. A token of a wide instruction set is made only by
/// [`Isa::dispatch`] after checking the CPU, so holding one proves that
/// the CPU runs its instructions.
///
/// # Safety
/// `F64` and `F32` are registers of the token's instruction set, and a
/// token exists only on a CPU that supports it.
pub(crate) unsafe trait Simd: Copy + Send + Sync + 'static {
    /// A register of `f64` lanes.
    type F64: Vector<T = f64, Simd = Self>;
    /// A register of `f32` lanes.
    type F32: Vector<T = f32, Simd = Self>;
    /// Runs `op` compiled for this instruction set (its target features
    /// enabled, so the `#[inline(always)]` code of `op` is vectorized for it).
    fn vectorize<W: WithSimd<Self>>(self, op: W) -> W::Output;
}

/// An operation written once for every instruction set `S` (faer's `pulp`
/// style): [`Isa::dispatch`] and [`Simd::vectorize`] call
/// [`WithSimd::with_simd`] inside a function compiled for `S`. Its
/// implementations are `#[inline(always)]`, as is the code they call, so
/// that all of it is compiled there.
pub(crate) trait WithSimd<S: Simd> {
    /// What the operation returns.
    type Output;
    /// Runs the operation (`simd` proves that the CPU supports `S`).
    fn with_simd(self, simd: S) -> Self::Output;
}

/// The portable token: plain scalar code (any CPU).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Portable;

// SAFETY: scalars are the registers of portable code, which any CPU runs.
unsafe impl Simd for Portable {
    type F64 = f64;
    type F32 = f32;
    #[inline(always)]
    fn vectorize<W: WithSimd<Self>>(self, op: W) -> W::Output {
        op.with_simd(self)
    }
}

/// Defines the token of a wide instruction set and its compiled entry.
#[cfg(target_arch = "x86_64")]
macro_rules! wide_token {
    ($isa:ident, $f64:ty, $f32:ty) => {
        #[doc = concat!("The token of [`Isa::", stringify!($isa), "`] (made only by [`Isa::dispatch`]).")]
        #[derive(Clone, Copy, Debug)]
        pub(crate) struct $isa(());

        // SAFETY: the registers are those of the instruction set; a token is
        // made only by `Isa::dispatch`, after checking the CPU.
        unsafe impl Simd for $isa {
            type F64 = $f64;
            type F32 = $f32;
            #[inline(always)]
            fn vectorize<W: WithSimd<Self>>(self, op: W) -> W::Output {
                isa_target! { $isa
                    fn run<W: WithSimd<$isa>>(simd: $isa, op: W) -> W::Output {
                        op.with_simd(simd)
                    }
                }
                // SAFETY: the token exists, so the CPU supports the
                // instruction set.
                unsafe { run(self, op) }
            }
        }
    };
}

#[cfg(target_arch = "x86_64")]
wide_token!(Avx512, x86::F64x8, x86::F32x16);
#[cfg(target_arch = "x86_64")]
wide_token!(Avx2, x86::F64x4, x86::F32x8);

/// An operation with a build for every instruction set of the target
/// (returning `R`): what [`Isa::dispatch`] runs.
#[cfg(target_arch = "x86_64")]
pub(crate) trait AnySimd<R>:
    WithSimd<Portable, Output = R> + WithSimd<Avx2, Output = R> + WithSimd<Avx512, Output = R>
{
}
#[cfg(target_arch = "x86_64")]
impl<R, W> AnySimd<R> for W where
    W: WithSimd<Portable, Output = R> + WithSimd<Avx2, Output = R> + WithSimd<Avx512, Output = R>
{
}
/// An operation with a build for every instruction set of the target
/// (returning `R`): what [`Isa::dispatch`] runs.
#[cfg(not(target_arch = "x86_64"))]
pub(crate) trait AnySimd<R>: WithSimd<Portable, Output = R> {}
#[cfg(not(target_arch = "x86_64"))]
impl<R, W: WithSimd<Portable, Output = R>> AnySimd<R> for W {}

/// An operation with a build for every wide instruction set of the target
/// (returning `R`): what [`Isa::dispatch_wide`] runs.
#[cfg(target_arch = "x86_64")]
pub(crate) trait WideSimd<R>:
    WithSimd<Avx2, Output = R> + WithSimd<Avx512, Output = R>
{
}
#[cfg(target_arch = "x86_64")]
impl<R, W> WideSimd<R> for W where W: WithSimd<Avx2, Output = R> + WithSimd<Avx512, Output = R> {}
/// An operation with a build for every wide instruction set of the target
/// (returning `R`): what [`Isa::dispatch_wide`] runs (none off x86-64).
#[cfg(not(target_arch = "x86_64"))]
pub(crate) trait WideSimd<R> {}
#[cfg(not(target_arch = "x86_64"))]
impl<R, W> WideSimd<R> for W {}

/// Defines `$vis fn $name(args) -> ret` (optionally generic, `$name<T:
/// Bound>`) that runs `$body(args)` compiled for the widest instruction set
/// of this CPU ([`Isa::detect`], target features from `isa_target!`).
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
                isa_target! { Avx512
                    fn avx512 $(<$($g: $bound),+>)? ($($arg: $ty),*) $(-> $ret)? {
                        $body($($arg),*)
                    }
                }
                isa_target! { Avx2
                    fn avx2 $(<$($g: $bound),+>)? ($($arg: $ty),*) $(-> $ret)? {
                        $body($($arg),*)
                    }
                }
                match $crate::simd::Isa::detect() {
                    // SAFETY: the CPU supports AVX-512F, AVX2 and FMA (Isa::detect).
                    $crate::simd::Isa::Avx512 => return unsafe { avx512($($arg),*) },
                    // SAFETY: the CPU supports AVX2 and FMA (Isa::detect).
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
/// the fused Fourier projection, the Gram tiles). The x86-64 register types
/// are in [`x86`]; a scalar is the one-lane register of portable code.
///
/// # Safety
/// Implementations are only called on a CPU that has the instruction set
/// [`Vector::Simd`] (from code compiled for it, so that they inline).
pub(crate) unsafe trait Vector: Copy {
    /// The lane type.
    type T: crate::real::Real;
    /// The instruction set whose register this is.
    type Simd: Simd;
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

/// Implements [`Vector`] for a scalar type: the one-lane register of
/// [`Portable`].
macro_rules! scalar_vector {
    ($t:ty) => {
        // SAFETY: plain scalar code (any CPU). Its `fmadd` rounds twice (a
        // fused `mul_add` is a library call on CPUs without FMA), which only
        // the portable kernels use.
        unsafe impl Vector for $t {
            type T = $t;
            type Simd = Portable;
            const LANES: usize = 1;
            #[inline(always)]
            unsafe fn zero() -> Self {
                0.0
            }
            #[inline(always)]
            unsafe fn splat(p: *const $t) -> Self {
                // SAFETY: the caller's contract.
                unsafe { *p }
            }
            #[inline(always)]
            unsafe fn load(p: *const $t) -> Self {
                // SAFETY: the caller's contract.
                unsafe { *p }
            }
            #[inline(always)]
            unsafe fn store(self, p: *mut $t) {
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
    };
}

scalar_vector!(f64);
scalar_vector!(f32);

/// The x86-64 registers of [`Isa::Avx512`] (`F64x8`, `F32x16`) and
/// [`Isa::Avx2`] (`F64x4`, `F32x8`); each method is compiled for its
/// instruction set (`isa_target!`), so that it inlines into the kernels
/// compiled for the same one.
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86 {
    use super::Vector;
    use std::arch::x86_64::*;

    macro_rules! vector {
        ($name:ident, $reg:ty, $t:ty, $lanes:literal, $isa:ident,
         $zero:ident, $set1:ident, $load:ident, $store:ident,
         $add:ident, $sub:ident, $fmadd:ident) => {
            #[doc = concat!("One register of [`Isa::", stringify!($isa), "`](super::Isa::", stringify!($isa), ").")]
            #[derive(Clone, Copy)]
            pub(crate) struct $name(pub(crate) $reg);

            // SAFETY: every method is compiled with the instruction set it
            // uses; callers guarantee the CPU has it.
            unsafe impl Vector for $name {
                type T = $t;
                type Simd = super::$isa;
                const LANES: usize = $lanes;
                isa_target! { $isa
                    #[inline]
                    unsafe fn zero() -> Self {
                        Self($zero())
                    }
                }
                isa_target! { $isa
                    #[inline]
                    unsafe fn splat(p: *const $t) -> Self {
                        // SAFETY: the caller's contract (`p` readable).
                        Self($set1(unsafe { *p }))
                    }
                }
                isa_target! { $isa
                    #[inline]
                    unsafe fn load(p: *const $t) -> Self {
                        // SAFETY: the caller's contract (LANES readable elements).
                        Self(unsafe { $load(p) })
                    }
                }
                isa_target! { $isa
                    #[inline]
                    unsafe fn store(self, p: *mut $t) {
                        // SAFETY: the caller's contract (LANES writable elements).
                        unsafe { $store(p, self.0) }
                    }
                }
                isa_target! { $isa
                    #[inline]
                    unsafe fn add(self, o: Self) -> Self {
                        Self($add(self.0, o.0))
                    }
                }
                isa_target! { $isa
                    #[inline]
                    unsafe fn sub(self, o: Self) -> Self {
                        Self($sub(self.0, o.0))
                    }
                }
                isa_target! { $isa
                    #[inline]
                    unsafe fn fmadd(self, b: Self, c: Self) -> Self {
                        Self($fmadd(self.0, b.0, c.0))
                    }
                }
            }
        };
    }

    vector!(
        F64x8,
        __m512d,
        f64,
        8,
        Avx512,
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
        Avx512,
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
        Avx2,
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
        Avx2,
        _mm256_setzero_ps,
        _mm256_set1_ps,
        _mm256_loadu_ps,
        _mm256_storeu_ps,
        _mm256_add_ps,
        _mm256_sub_ps,
        _mm256_fmadd_ps
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lanes of the `f64` and `f32` registers of the token it runs with.
    struct Lanes;

    impl<S: Simd> WithSimd<S> for Lanes {
        type Output = (usize, usize);
        fn with_simd(self, _: S) -> (usize, usize) {
            (S::F64::LANES, S::F32::LANES)
        }
    }

    #[test]
    fn available_instruction_sets_end_at_the_detected_one() {
        let available = Isa::available();
        assert_eq!(available.first(), Some(&Isa::Portable));
        assert_eq!(available.last(), Some(&Isa::detect()));
        for isa in Isa::NARROWEST_FIRST {
            assert_eq!(isa.is_available(), available.contains(&isa), "{isa:?}");
        }
    }

    #[test]
    fn dispatch_runs_the_token_of_each_instruction_set() {
        for isa in Isa::available() {
            let want = match isa {
                Isa::Avx512 => (8, 16),
                Isa::Avx2 => (4, 8),
                Isa::Portable => (1, 1),
            };
            assert_eq!(isa.dispatch(Lanes), want, "{isa:?}");
            let wide = isa.dispatch_wide(Lanes);
            assert_eq!(wide, (isa != Isa::Portable).then_some(want), "{isa:?}");
        }
    }
}
