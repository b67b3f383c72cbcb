//! One bound-and-gradient evaluation of the sparse GP (VFE, Gaussian
//! kernel, `M = 1,024`, `d = 8`, default chunks) on 2 threads, whole and
//! pass by pass, against the floor of the N = 1,000,000 goal
//! (BENCHMARKS.md, "Sparse GP"). Throughput is in multiply-adds of the two
//! products, so each figure reads directly against `f64_fma_peak` of
//! `benches/floor.rs`:
//!
//! - `statistics`: the first pass, `K_uf K_fu` (`N M²/2`);
//! - `gradient`: the second pass at fixed adjoints, the product with the
//!   adjoint (`N M²`) and the contraction with the kernel's slopes;
//! - `between_passes`: the `O(M³)` work that does not grow with `N`, the
//!   bound with its adjoints and the gradient's parts through `K_uu`;
//! - `evaluation`: both passes and the work between them (`1.5 N M²`
//!   multiply-adds in the passes), as `SparseGPR.fit` runs it.
//!
//! `N = 32,768` here: the passes' time per row is that of `N = 1,000,000`
//! (the chunks are the same), and a sample takes seconds. An evaluation at
//! `N` rows therefore takes `N / 32,768` times the two passes plus
//! `between_passes`. Run with `make bench`.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use ndarray::{s, Array1, Array2};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, StandardNormal};
use randfeat_rs::gp::sparse::{
    accumulate_gradient, bound, default_chunk_rows, evaluate, finish, GradientSums, InducingPrior,
    Method, SparseStats,
};
use randfeat_rs::kernels::StationaryKernel;
use randfeat_rs::progress::Monitor;
use randfeat_rs::threads::Parallelism;

const N: usize = 32_768;
const D: usize = 8;
const M: usize = 1024;

fn sparse(c: &mut Criterion) {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .expect("a 2-thread pool");
    // The data of `benches/compare_sparse_gp.py`'s N = 1e6 evaluation:
    // x ~ N(0, I), y = sin(Σx / 2) + 0.1 noise, Z a subset of the rows.
    let mut rng = ChaCha8Rng::seed_from_u64(0);
    let mut normal = || -> f64 { StandardNormal.sample(&mut rng) };
    let x = Array2::from_shape_simple_fn((N, D), &mut normal);
    let y = Array1::from_iter(
        x.rows()
            .into_iter()
            .map(|r| (r.sum() / 2.0).sin() + 0.1 * normal()),
    );
    let z = x.slice(s![..M, ..]).to_owned();
    let par = Parallelism::Rayon;
    let prior = pool
        .install(|| {
            InducingPrior::new(
                StationaryKernel::gaussian(vec![2.0], 1.0),
                0.01,
                z.view(),
                par,
            )
        })
        .expect("a factorable K_uu");
    let chunk = default_chunk_rows(M);
    let chunks = || (0..N).step_by(chunk).map(|a| a..(a + chunk).min(N));
    let monitor = Monitor::new();
    let fmas = (N * M * M) as u64;

    let mut scratch = Vec::new();
    let mut statistics = || {
        let mut st = SparseStats::new(Method::Vfe, M);
        for r in chunks() {
            st.accumulate(
                &prior,
                x.slice(s![r.clone(), ..]),
                y.slice(s![r]),
                &mut scratch,
                par,
            )
            .expect("valid chunks");
        }
        st
    };
    let stats = pool.install(&mut statistics);
    let b = pool
        .install(|| bound(&stats, &prior, true, true, par))
        .expect("a bound");
    let adjoint = b.adjoint.as_ref().expect("adjoints were requested");

    let mut grp = c.benchmark_group("sparse_vfe_m1024");
    grp.sample_size(10);
    grp.throughput(Throughput::Elements(fmas / 2));
    grp.bench_function("statistics", |bch| {
        bch.iter(|| pool.install(&mut statistics))
    });
    grp.throughput(Throughput::Elements(fmas));
    let gradient_pass = |scratch: &mut Vec<f64>| {
        let mut sums = GradientSums::new(Method::Vfe, M, D);
        for r in chunks() {
            accumulate_gradient(
                &mut sums,
                adjoint,
                &prior,
                x.slice(s![r.clone(), ..]),
                y.slice(s![r]),
                b.y_mean,
                scratch,
                par,
            )
            .expect("valid chunks");
        }
        sums
    };
    let mut scratch = Vec::new();
    grp.bench_function("gradient", |bch| {
        bch.iter(|| pool.install(|| gradient_pass(&mut scratch)))
    });
    grp.throughput(Throughput::Elements(fmas * 3 / 2));
    grp.bench_function("evaluation", |bch| {
        bch.iter(|| {
            pool.install(|| {
                evaluate(
                    &prior,
                    Method::Vfe,
                    x.view(),
                    y.view(),
                    true,
                    chunk,
                    true,
                    par,
                    &monitor,
                )
                .expect("an evaluation")
            })
        })
    });
    let sums = pool.install(|| gradient_pass(&mut scratch));
    grp.finish();
    // No throughput: this work does not grow with the rows.
    let mut fixed = c.benchmark_group("sparse_vfe_m1024_fixed");
    fixed.sample_size(10);
    fixed.bench_function("between_passes", |bch| {
        bch.iter(|| {
            pool.install(|| {
                let b = bound(&stats, &prior, true, true, par).expect("a bound");
                let adjoint = b.adjoint.as_ref().expect("adjoints were requested");
                finish(adjoint, &prior, &sums, par)
            })
        })
    });
    fixed.finish();
}

criterion_group!(benches, sparse);
criterion_main!(benches);
