//! The Gram kernel of the GP hot paths (`src/linalg/syrk.rs`) against faer's
//! triangular matmul on the same feature-major data. Run with `make bench`.
//! Throughput is in multiply-adds of the lower triangle (`D(D+1)/2 · K`), so
//! GFLOP/s = 2 · Gelem/s (peak of one Zen 5 core: about 83 GFLOP/s in f64).
//!
//! - one centroid block of the localized GP: `D = 64, K = 256` and
//!   `D = 256, K = 128`, one thread;
//! - the feature GP's shape, `D = 1,024`, `K = 2,048`, one thread (the
//!   feature GP keeps faer's parallel GEMM: it was faster there).

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use faer::{MatMut, MatRef, Par};
use randfeat_rs::linalg::add_lower_gram;
use randfeat_rs::linalg::syrk::{gemm_nt, Isa};
use std::hint::black_box;

fn data(n: usize) -> Vec<f64> {
    (0..n)
        .map(|i| ((i * 7919) % 1000) as f64 / 1000.0 - 0.5)
        .collect()
}

fn faer_lower(at: &[f64], d: usize, k: usize, g: &mut [f64], par: Par) {
    let lhs = MatRef::from_row_major_slice(at, d, k);
    add_lower_gram(MatMut::from_row_major_slice_mut(g, d, d), lhs, par);
}

fn centroid_block(c: &mut Criterion) {
    let mut grp = c.benchmark_group("gram_centroid_block");
    let isa = Isa::detect();
    for (d, k) in [(64usize, 256usize), (256, 128), (256, 512), (1024, 2048)] {
        let at = data(d * k);
        let mut g = vec![0.0; d * d];
        grp.throughput(Throughput::Elements((d * (d + 1) / 2 * k) as u64));
        grp.sample_size(if d >= 1024 { 10 } else { 100 });
        let id = format!("D{d}_K{k}");
        grp.bench_with_input(BenchmarkId::new("syrk", &id), &d, |b, _| {
            b.iter(|| gemm_nt(isa, black_box(&at), k, 0..d, &at, k, d, k, &mut g, d, true))
        });
        grp.bench_with_input(BenchmarkId::new("faer", &id), &d, |b, _| {
            b.iter(|| faer_lower(black_box(&at), d, k, &mut g, Par::Seq))
        });
    }
    grp.finish();
}

criterion_group!(benches, centroid_block);
criterion_main!(benches);
