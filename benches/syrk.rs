//! The packed Gram kernel of the GP hot paths (`src/linalg/syrk.rs`) against
//! faer's triangular matmul on the same data. Run with `make bench`.
//! Throughput is in multiply-adds of the lower triangle (`D(D+1)/2 · K`), so
//! GFLOP/s = 2 · Gelem/s; the ceiling is the machine's `f64` FMA peak
//! (`f64_fma_peak` of `benches/floor.rs`, in the same unit).
//!
//! - localized GP centroid blocks, one thread, feature-major rows (`Φᵀ`):
//!   `D = 64, K = 256`, `D = 256, K = 128`, `D = 256, K = 512`;
//! - the feature GP's chunk, `D = 1,024`, `K = 2,048`, sample-major (`Φ`
//!   as `RandomFeatureGPR` gets it), on 1 and 2 threads;
//! - the sparse GP's chunk, `D = 1,024` inducing inputs by `K = 256` rows,
//!   feature-major (`K_uf`), on 2 threads.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use faer::linalg::matmul::triangular::{matmul, BlockStructure};
use faer::{Accum, MatMut, MatRef, Par};
use randfeat_rs::linalg::syrk::{gram_lower, Isa, Layout};
use randfeat_rs::threads::Parallelism;
use std::hint::black_box;

fn data(n: usize) -> Vec<f64> {
    (0..n)
        .map(|i| ((i * 7919) % 1000) as f64 / 1000.0 - 0.5)
        .collect()
}

/// `lower(G) += A Aᵀ` through faer's triangular GEMM (the library baseline).
fn faer_lower(g: MatMut<'_, f64>, a: MatRef<'_, f64>, par: Par) {
    matmul(
        g,
        BlockStructure::TriangularLower,
        Accum::Add,
        a,
        BlockStructure::Rectangular,
        a.transpose(),
        BlockStructure::Rectangular,
        1.0,
        par,
    );
}

/// Runs `f` in `pool` when it has several threads, else on the bench thread
/// (entering a pool from outside costs two context switches per call, a
/// large part of a small block's time).
fn in_pool<R: Send>(pool: &rayon::ThreadPool, threads: usize, f: impl FnOnce() -> R + Send) -> R {
    if threads > 1 {
        pool.install(f)
    } else {
        f()
    }
}

fn gram(c: &mut Criterion) {
    let mut grp = c.benchmark_group("gram_lower");
    let isa = Isa::detect();
    // The feature GP's chunk is sample-major (`Φ`), a centroid block and
    // the sparse GP's kernel block feature-major (`Φᵀ`, `K_uf`).
    for (d, k, threads, sample_major) in [
        (64usize, 256usize, 1usize, false),
        (256, 128, 1, false),
        (256, 512, 1, false),
        (1024, 2048, 1, true),
        (1024, 2048, 2, true),
        (1024, 256, 2, false),
    ] {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        let layout = if sample_major {
            Layout::SampleMajor { ld: d }
        } else {
            Layout::FeatureMajor { ld: k }
        };
        let a = data(d * k);
        let mut g = vec![0.0; d * d];
        grp.throughput(Throughput::Elements((d * (d + 1) / 2 * k) as u64));
        grp.sample_size(if d >= 1024 { 10 } else { 100 });
        let id = format!("D{d}_K{k}_t{threads}");
        let par = if threads > 1 {
            Parallelism::Rayon
        } else {
            Parallelism::Sequential
        };
        grp.bench_with_input(BenchmarkId::new("packed", &id), &d, |b, _| {
            b.iter(|| {
                in_pool(&pool, threads, || {
                    gram_lower(
                        isa,
                        black_box(&a),
                        layout,
                        d,
                        k,
                        &[],
                        &mut g,
                        d,
                        &mut [],
                        par,
                    )
                })
            })
        });
        let fpar = if threads > 1 {
            Par::rayon(threads)
        } else {
            Par::Seq
        };
        grp.bench_with_input(BenchmarkId::new("faer", &id), &d, |b, _| {
            b.iter(|| {
                in_pool(&pool, threads, || {
                    let lhs = if sample_major {
                        MatRef::from_row_major_slice(black_box(&a), k, d).transpose()
                    } else {
                        MatRef::from_row_major_slice(black_box(&a), d, k)
                    };
                    faer_lower(MatMut::from_row_major_slice_mut(&mut g, d, d), lhs, fpar)
                })
            })
        });
    }
    grp.finish();
}

criterion_group!(benches, gram);
criterion_main!(benches);
