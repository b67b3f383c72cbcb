//! FWHT benchmarks. Run with `make bench`.
//!
//! - single vectors (2^10, 2^14, 2^20), one thread: throughput is reported in
//!   "elements" = n * log2(n), so 1 / (Gelem/s) is ns per element per log2 n,
//!   the unit of the FFHT reference figures; each size twice: in a buffer
//!   from the default allocator (glibc and NumPy start large buffers 16
//!   bytes past a cache line, so 512-bit accesses straddle two lines) and in
//!   a 64-byte-aligned buffer (FFHT's AVX code is meant for aligned arrays,
//!   its Python wrapper ships `create_aligned`: the like-for-like case of
//!   its reference figures);
//! - the 10,000 x 1,024 batch on all threads, in place and out of place
//!   (into an output written before), and its memcpy baseline;
//! - thread scaling on a cache-resident 256 x 1,024 batch (1 vs 2 threads).

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use ndarray::Array2;
use randfeat_rs::fwht::{fwht, fwht_rows, fwht_rows_into};
use randfeat_rs::{Parallelism, Real};
use std::hint::black_box;

fn data<T: Real>(n: usize) -> Vec<T> {
    (0..n)
        .map(|i| T::from_f64_lossy(((i * 7919) % 1000) as f64 / 1000.0 - 0.5))
        .collect()
}

fn single<T: Real>(c: &mut Criterion) {
    let mut g = c.benchmark_group(format!("fwht_single_{}", T::DTYPE));
    let pad = 64 / std::mem::size_of::<T>();
    for k in [10u32, 14, 20] {
        let n = 1usize << k;
        let mut x = data::<T>(n);
        g.throughput(Throughput::Elements((n as u64) * k as u64));
        g.bench_with_input(BenchmarkId::from_parameter(format!("2^{k}")), &k, |b, _| {
            b.iter(|| fwht(black_box(&mut x), false, Parallelism::Sequential).unwrap())
        });
        let mut buf = data::<T>(n + pad);
        let off = buf.as_ptr().align_offset(64);
        let xa = &mut buf[off..off + n];
        let id = BenchmarkId::from_parameter(format!("2^{k} aligned64"));
        g.bench_with_input(id, &k, |b, _| {
            b.iter(|| fwht(black_box(&mut *xa), false, Parallelism::Sequential).unwrap())
        });
    }
    g.finish();
}

fn batch<T: Real>(c: &mut Criterion) {
    let mut g = c.benchmark_group(format!("fwht_batch_10000x1024_{}", T::DTYPE));
    g.sample_size(20);
    let mut x = Array2::from_shape_vec((10_000, 1024), data::<T>(10_000 * 1024)).unwrap();
    let src = x.clone();
    g.bench_function("fwht_rows_inplace", |b| {
        b.iter(|| fwht_rows(black_box(x.view_mut()), false, Parallelism::Rayon).unwrap())
    });
    let mut dst = x.clone();
    g.bench_function("fwht_rows_into", |b| {
        b.iter(|| {
            fwht_rows_into(
                black_box(src.view()),
                dst.view_mut(),
                false,
                Parallelism::Rayon,
            )
            .unwrap()
        })
    });
    g.bench_function("memcpy_same_array", |b| {
        b.iter(|| {
            x.as_slice_mut()
                .unwrap()
                .copy_from_slice(black_box(src.as_slice().unwrap()))
        })
    });
    g.finish();
}

fn threads(c: &mut Criterion) {
    let mut g = c.benchmark_group("fwht_threads_256x1024_float64");
    let mut x = Array2::from_shape_vec((256, 1024), data::<f64>(256 * 1024)).unwrap();
    for t in [1usize, 2] {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(t)
            .build()
            .unwrap();
        g.bench_with_input(BenchmarkId::new("threads", t), &t, |b, _| {
            b.iter(|| {
                pool.install(|| {
                    fwht_rows(black_box(x.view_mut()), true, Parallelism::Rayon).unwrap()
                })
            })
        });
    }
    g.finish();
}

criterion_group!(
    benches,
    single::<f64>,
    single::<f32>,
    batch::<f64>,
    batch::<f32>,
    threads
);
criterion_main!(benches);
