//! The hardware floor under the float32 goal of `RandomFourierFeatures`
//! (N = 100,000, d = 64, D = 4,096, `cos_bias`: 3x faster than
//! scikit-learn's `RBFSampler`). Any transform of that size must do
//! `N·D·d` = 2.6e10 multiply-adds and write a fresh 1.64 GB output (NumPy
//! hands out new pages, which the kernel zeroes on first touch, as huge
//! pages: NumPy advises `MADV_HUGEPAGE`). This bench does exactly that work
//! and nothing else, on 2 threads in 96-row items as the fused kernel does:
//! 64 independent-chain `f32` FMAs per 16 output values, register-only (no
//! loads, no cosine), then one store.
//!
//! - `touched`: into an output written before (the compute floor: the
//!   projection at 100% of the FMA peak);
//! - `fresh`: into a new huge-page-advised mapping every iteration (compute
//!   plus first touch; the unmapping is not timed).
//!
//! `fresh` is what the float32 transform cannot beat; BENCHMARKS.md sets it
//! against the goal. Beside it, `rff_f32_library`: the library's own
//! `FourierFeatures::transform_into` (fused kernel, `cos_bias` and
//! `cos_sin`, D = 4,096 outputs either way) into the same two kinds of
//! output, so the gap to the floor is read off one run.
//!
//! Also `f64_fma_peak`: the `f64` multiply-add rate of 2 threads (12
//! independent FMA chains each, register-only, in the widest vectors the
//! CPU has: 8 lanes with AVX-512F, 4 with AVX2 + FMA), in elements (lane
//! multiply-adds) per second: the ceiling of every Gram kernel, from which
//! BENCHMARKS.md derives the floors under the localized-GP and sparse-GP
//! goals.
//!
//! Run with `make bench` (x86-64 Linux; the float32 groups need AVX-512F,
//! `f64_fma_peak` AVX2 + FMA).

use criterion::{criterion_group, criterion_main, Criterion};

const ROWS: usize = 100_000;
const COLS: usize = 4_096;
const D_IN: usize = 64;
/// Rows per work item (the fused kernel's 16 groups of 6 rows).
const ITEM_ROWS: usize = 96;

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
mod work {
    use super::*;
    use criterion::Throughput;
    use ndarray::{Array2, ArrayViewMut2};
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;
    use rand_distr::{Distribution, StandardNormal};
    use randfeat_rs::fourier::{FourierConfig, FourierFeatures, Variant};
    use randfeat_rs::simd::Isa;
    use randfeat_rs::Parallelism;
    use rayon::prelude::*;
    use std::arch::x86_64::*;
    use std::time::{Duration, Instant};

    /// `d` FMAs on each of 8 registers, then 8 stores, per 128 outputs.
    ///
    /// # Safety
    /// AVX-512F.
    #[target_feature(enable = "avx512f")]
    unsafe fn item(out: &mut [f32]) {
        let m = _mm512_set1_ps(1.000_000_1);
        for blk in out.chunks_exact_mut(128) {
            let mut v = [_mm512_set1_ps(1.0); 8];
            for _ in 0..D_IN {
                for a in v.iter_mut() {
                    *a = _mm512_fmadd_ps(*a, m, m);
                }
            }
            for (q, a) in v.iter().enumerate() {
                // SAFETY: `blk` holds 128 values, 16 per store.
                unsafe { _mm512_storeu_ps(blk.as_mut_ptr().add(16 * q), *a) };
            }
        }
    }

    /// The work over the whole output, on the current rayon pool.
    pub fn run(out: &mut [f32]) {
        out.par_chunks_mut(ITEM_ROWS * COLS)
            // SAFETY: the caller checked AVX-512F.
            .for_each(|c| unsafe { item(c) });
    }

    /// Standard normal `ROWS x D_IN` input (fixed seed), as the comparison
    /// script's.
    fn input() -> Array2<f32> {
        let mut rng = ChaCha8Rng::seed_from_u64(0);
        Array2::from_shape_simple_fn((ROWS, D_IN), || StandardNormal.sample(&mut rng))
    }

    /// Lane multiply-adds per thread of one `f64_fma_peak` iteration.
    const PEAK_CHAIN_STEPS: usize = 1 << 20;

    /// Independent FMA chains per thread of `f64_fma_peak`.
    const PEAK_CHAINS: usize = 12;

    /// `PEAK_CHAIN_STEPS` steps of 12 independent 8-lane FMA chains; returns
    /// a lane sum so the work is not optimized away.
    ///
    /// # Safety
    /// AVX-512F.
    #[target_feature(enable = "avx512f")]
    unsafe fn chains() -> f64 {
        let m = _mm512_set1_pd(0.999_999_9);
        let mut v = [_mm512_set1_pd(1.0); PEAK_CHAINS];
        for _ in 0..PEAK_CHAIN_STEPS {
            for a in v.iter_mut() {
                *a = _mm512_fmadd_pd(*a, m, m);
            }
        }
        v.iter().map(|a| _mm512_reduce_add_pd(*a)).sum()
    }

    /// [`chains`] in 4-lane AVX2 vectors.
    ///
    /// # Safety
    /// AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    unsafe fn chains_avx2() -> f64 {
        let m = _mm256_set1_pd(0.999_999_9);
        let mut v = [_mm256_set1_pd(1.0); PEAK_CHAINS];
        for _ in 0..PEAK_CHAIN_STEPS {
            for a in v.iter_mut() {
                *a = _mm256_fmadd_pd(*a, m, m);
            }
        }
        let mut lanes = [0.0; 4];
        v.iter()
            .map(|a| {
                // SAFETY: `lanes` holds the vector's 4 lanes.
                unsafe { _mm256_storeu_pd(lanes.as_mut_ptr(), *a) };
                lanes.iter().sum::<f64>()
            })
            .sum()
    }

    /// The `f64_fma_peak` group in the widest vectors of `isa`.
    fn fma_peak(c: &mut Criterion, pool: &rayon::ThreadPool, isa: Isa) {
        let (lanes, run): (usize, unsafe fn() -> f64) = match isa {
            Isa::Avx512 => (8, chains),
            Isa::Avx2 => (4, chains_avx2),
            Isa::Portable => return,
        };
        let mut grp = c.benchmark_group("f64_fma_peak");
        grp.throughput(Throughput::Elements(
            (2 * PEAK_CHAINS * lanes * PEAK_CHAIN_STEPS) as u64,
        ));
        grp.bench_function("2_threads", |b| {
            b.iter(|| {
                pool.install(|| {
                    // SAFETY: `isa` was detected on this CPU.
                    rayon::join(|| unsafe { run() }, || unsafe { run() })
                })
            })
        });
        grp.finish();
    }

    /// A fresh anonymous mapping of the output, advised for huge pages as
    /// NumPy advises its large arrays.
    pub struct Fresh {
        ptr: *mut libc::c_void,
        len: usize,
    }

    impl Fresh {
        pub fn new() -> Self {
            let len = ROWS * COLS * std::mem::size_of::<f32>();
            // SAFETY: an anonymous private mapping; checked below.
            let ptr = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                )
            };
            assert!(ptr != libc::MAP_FAILED, "mmap of the output failed");
            // SAFETY: the range was just mapped. Advice only: ignore errors.
            unsafe { libc::madvise(ptr, len, libc::MADV_HUGEPAGE) };
            Self { ptr, len }
        }

        pub fn as_mut_slice(&mut self) -> &mut [f32] {
            // SAFETY: the mapping holds `len` bytes of zero-initialized f32s.
            unsafe { std::slice::from_raw_parts_mut(self.ptr as *mut f32, ROWS * COLS) }
        }
    }

    impl Drop for Fresh {
        fn drop(&mut self) {
            // SAFETY: unmapping our own mapping once.
            unsafe { libc::munmap(self.ptr, self.len) };
        }
    }

    /// Total time of `iters` calls of `fill`, each into a new [`Fresh`]
    /// mapping (its creation not timed).
    fn time_fresh(iters: u64, fill: impl Fn(&mut [f32])) -> Duration {
        let mut total = Duration::ZERO;
        for _ in 0..iters {
            let mut out = Fresh::new();
            let slice = out.as_mut_slice();
            let t = Instant::now();
            fill(slice);
            total += t.elapsed();
        }
        total
    }

    pub fn bench(c: &mut Criterion) {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .expect("a 2-thread pool");
        let isa = Isa::detect();
        fma_peak(c, &pool, isa);
        if isa != Isa::Avx512 {
            eprintln!("floor: the float32 groups need AVX-512F; skipped");
            return;
        }
        let mut grp = c.benchmark_group("rff_f32_floor");
        grp.sample_size(10);
        let mut touched = vec![0.0f32; ROWS * COLS];
        grp.bench_function("touched", |b| b.iter(|| pool.install(|| run(&mut touched))));
        grp.bench_function("fresh", |b| {
            b.iter_custom(|iters| time_fresh(iters, |out| pool.install(|| run(out))))
        });
        grp.finish();
        let mut grp = c.benchmark_group("rff_f32_library");
        grp.sample_size(10);
        let x = input();
        for variant in [Variant::CosBias, Variant::CosSin] {
            let cfg = FourierConfig {
                variant,
                length_scale: (D_IN as f64).sqrt(),
                ..FourierConfig::new(COLS)
            };
            let map = FourierFeatures::fit(&cfg, D_IN, 0).expect("a valid map");
            let apply = |out: &mut [f32]| {
                let out = ArrayViewMut2::from_shape((ROWS, COLS), out).expect("ROWS x COLS");
                pool.install(|| map.transform_into(x.view(), out, Parallelism::Rayon))
                    .expect("a valid transform");
            };
            grp.bench_function(format!("{variant:?}/touched"), |b| {
                b.iter(|| apply(&mut touched))
            });
            grp.bench_function(format!("{variant:?}/fresh"), |b| {
                b.iter_custom(|iters| time_fresh(iters, apply))
            });
        }
        grp.finish();
    }
}

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
fn floor(c: &mut Criterion) {
    work::bench(c);
}

#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
fn floor(_c: &mut Criterion) {
    eprintln!("floor: x86-64 Linux only; skipped");
}

criterion_group!(benches, floor);
criterion_main!(benches);
