//! Tests of the assembled feature map (`docs/math/maclaurin.rst`, "The
//! truncated random map", "Kar & Karnick's random Maclaurin features" and
//! "Assembly"; `docs/math/localized.rst`, "The exactness property").

use approx::assert_relative_eq;
use ndarray::{array, Array1, Array2, ArrayView1};
use rand::Rng as _;
use rand_distr::StandardNormal;

use super::map::{AllocationStrategy, MaclaurinConfig, MaclaurinMap};
use super::*;
use crate::progress::Monitor;
use crate::sketch::variance::{sketch_variance, PairStats};
use crate::sketch::{padded_dim, SketchKind};
use crate::threads::Parallelism;

fn gaussian_data(n: usize, d: usize, seed: u64) -> Array2<f64> {
    let mut rng = crate::rng::seeded(seed);
    Array2::from_shape_fn((n, d), |_| rng.sample::<f64, _>(StandardNormal))
}

fn config(kernel: MaclaurinKernel, d: usize) -> MaclaurinConfig {
    MaclaurinConfig::new(kernel, d)
}

/// The map of `cfg` fitted to `x` with `seed`, on one thread.
fn fitted(x: &Array2<f64>, cfg: &MaclaurinConfig, seed: u64) -> MaclaurinMap {
    MaclaurinMap::fit(
        x.view(),
        cfg,
        seed,
        Parallelism::Sequential,
        &Monitor::default(),
    )
    .unwrap()
}

fn dot(a: ArrayView1<f64>, b: ArrayView1<f64>) -> f64 {
    a.dot(&b)
}

#[test]
fn explicit_one_dimensional_oracles() {
    // Φ(x)ᵀΦ(x) = σ² e^{−x̃²} Σ_{n≤p} x̃^{2n}/n! (docs/math/maclaurin.rst,
    // "Checks"), center 0.
    let x = array![[0.0], [1.0]];
    for (t, p, want) in [
        (1.0, 1, 0.7357588823),
        (1.0, 2, 0.9196986029),
        (2.0, 3, 0.4334701204),
    ] {
        let cfg = config(MaclaurinKernel::Gaussian, p + 1);
        let map = fitted(&x, &cfg, 0);
        assert_eq!(map.degree(), p as u32);
        let row = array![[t]];
        let mut out = Array2::zeros((1, p + 1));
        map.transform_centered_into(row.view(), &[0.0], out.view_mut(), Parallelism::Sequential)
            .unwrap();
        assert_relative_eq!(dot(out.row(0), out.row(0)), want, max_relative = 1e-9);
    }
    // Overflow-safe: a far point under a long expansion stays finite.
    let cfg = config(MaclaurinKernel::Gaussian, 60);
    let map = fitted(&x, &cfg, 0);
    let far: Array2<f64> = map
        .transform(array![[400.0]].view(), Parallelism::Sequential)
        .unwrap();
    assert!(far.iter().all(|v| v.is_finite()));
}

/// The explicit `d = 1` map of the polynomial kernel has a column for each
/// degree with a nonzero coefficient, so it is the exact kernel
/// `(xy/l² + c)^q` once `D` covers them, zero columns after them. It took
/// the degrees `0..D` whatever their coefficients: without bias and
/// `D <= q` every column was zero.
#[test]
fn explicit_one_dimensional_polynomial_map_takes_the_nonzero_degrees() {
    let x = array![[0.5], [-1.2], [2.0]];
    let exact = |bias: f64, q: i32| {
        Array2::from_shape_fn((3, 3), |(i, j)| {
            (x[(i, 0)] * x[(j, 0)] / 2.25 + bias).powi(q)
        })
    };
    // (bias, q, D, allocation, degree)
    for (bias, q, width, counts, degree) in [
        (0.0, 3, 1, vec![0, 0, 0, 1], 3),
        (0.0, 3, 3, vec![0, 0, 0, 1], 3),
        (1.0, 2, 3, vec![1, 1, 1], 2),
        (1.0, 2, 8, vec![1, 1, 1], 2),
        (0.5, 4, 5, vec![1, 1, 1, 1, 1], 4),
    ] {
        let mut cfg = config(
            MaclaurinKernel::Polynomial {
                degree: q as u32,
                bias,
            },
            width,
        );
        cfg.length_scale = 1.5;
        cfg.max_degree = 2;
        let map = fitted(&x, &cfg, 0);
        assert!(map.is_explicit_1d());
        assert_eq!(map.allocation(), counts.as_slice(), "{bias} {q} {width}");
        assert_eq!(map.degree(), degree);
        let phi = map.transform(x.view(), Parallelism::Sequential).unwrap();
        let used = counts.iter().sum::<usize>();
        assert!(phi.slice(ndarray::s![.., used..]).iter().all(|&v| v == 0.0));
        let k = phi.dot(&phi.t());
        let want = exact(bias, q);
        for (a, b) in k.iter().zip(want.iter()) {
            assert_relative_eq!(*a, *b, max_relative = 1e-12);
        }
        let rebuilt = MaclaurinMap::rebuild(&cfg, 1, counts.clone(), None, 0).unwrap();
        assert_eq!(
            rebuilt
                .transform(x.view(), Parallelism::Sequential)
                .unwrap(),
            phi
        );
        let mut degrees = map.column_degrees();
        degrees.truncate(used);
        let want: Vec<u32> = (0..=degree).filter(|&n| counts[n as usize] == 1).collect();
        assert_eq!(degrees, want);
        // The allocation the map had before: one count per column.
        if counts != vec![1; width] {
            assert!(MaclaurinMap::rebuild(&cfg, 1, vec![1; width], None, 0).is_err());
        }
    }
    // Fewer columns than degrees: the lowest ones (the truncated series).
    let cfg = config(
        MaclaurinKernel::Polynomial {
            degree: 3,
            bias: 1.0,
        },
        2,
    );
    let map = fitted(&x, &cfg, 0);
    assert_eq!(map.allocation(), &[1, 1]);
}

#[test]
fn exact_at_the_center() {
    // Φ(0) = σ e_0 for the Gaussian kernel, whatever the draw
    // (docs/math/localized.rst, "The exactness property").
    let x = gaussian_data(50, 5, 1);
    for (kind, complex, h01) in [
        (SketchKind::TensorSrht, false, false),
        (SketchKind::Rademacher, true, true),
        (SketchKind::Gaussian, false, true),
    ] {
        let mut cfg = config(MaclaurinKernel::Gaussian, 41);
        cfg.kernel_variance = 2.5;
        cfg.sketch = kind;
        cfg.complex = complex;
        cfg.h01 = h01;
        let map =
            MaclaurinMap::fit(x.view(), &cfg, 3, Parallelism::Rayon, &Monitor::default()).unwrap();
        let c = x.row(7).to_vec();
        let mut out = Array2::zeros((1, 41));
        map.transform_centered_into(
            x.slice(ndarray::s![7..8, ..]),
            &c,
            out.view_mut(),
            Parallelism::Rayon,
        )
        .unwrap();
        assert_relative_eq!(out[[0, 0]], 2.5_f64.sqrt(), max_relative = 1e-15);
        assert!(out.iter().skip(1).all(|&v| v == 0.0));
    }
}

#[test]
fn layout_widths_and_rebuild() {
    let x = gaussian_data(40, 6, 2);
    // Complex weights with an odd budget: trailing zero column.
    let mut cfg = config(MaclaurinKernel::Gaussian, 30);
    cfg.complex = true;
    let map =
        MaclaurinMap::fit(x.view(), &cfg, 5, Parallelism::Rayon, &Monitor::default()).unwrap();
    let out = map.transform(x.view(), Parallelism::Rayon).unwrap();
    assert_eq!(out.ncols(), 30);
    assert!(out.column(29).iter().all(|&v| v == 0.0));
    let alloc = map.allocation();
    assert_eq!(alloc[0], 1);
    assert_eq!(alloc.iter().skip(1).sum::<usize>(), 14);
    // h01: columns 1..=d are σ g(x) √a_1 x̃.
    let mut cfg = config(MaclaurinKernel::Gaussian, 30);
    cfg.h01 = true;
    cfg.length_scale = 2.0;
    cfg.kernel_variance = 4.0;
    let map =
        MaclaurinMap::fit(x.view(), &cfg, 5, Parallelism::Rayon, &Monitor::default()).unwrap();
    let out = map.transform(x.view(), Parallelism::Rayon).unwrap();
    let c = map.center().unwrap().to_vec();
    for i in [0, 13] {
        let xt: Vec<f64> = (0..6).map(|a| (x[[i, a]] - c[a]) / 2.0).collect();
        let g = (-0.5 * xt.iter().map(|v| v * v).sum::<f64>()).exp();
        assert_relative_eq!(out[[i, 0]], 2.0 * g, max_relative = 1e-14);
        for a in 0..6 {
            assert_relative_eq!(out[[i, 1 + a]], 2.0 * g * xt[a], max_relative = 1e-14);
        }
    }
    assert_eq!(map.allocation()[1], 6);
    // Rebuilding from (allocation, center, seed) gives the same columns.
    let again = MaclaurinMap::rebuild(&cfg, 6, map.allocation().to_vec(), Some(c), 5).unwrap();
    assert_eq!(again.transform(x.view(), Parallelism::Rayon).unwrap(), out);
    // f32 gives the same map in single precision.
    let x32 = x.mapv(|v| v as f32);
    let out32 = map.transform(x32.view(), Parallelism::Rayon).unwrap();
    for (a, b) in out32.iter().zip(&out) {
        assert!((*a as f64 - b).abs() < 1e-4 * (1.0 + b.abs()));
    }
}

#[test]
fn thread_count_invariance() {
    let x = gaussian_data(300, 20, 4);
    let cfg = config(MaclaurinKernel::Gaussian, 200);
    let one = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    let two = rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .unwrap();
    let run = |pool: &rayon::ThreadPool| {
        pool.install(|| {
            let m = MaclaurinMap::fit(x.view(), &cfg, 9, Parallelism::Rayon, &Monitor::default())
                .unwrap();
            (
                m.allocation().to_vec(),
                m.objective(),
                m.transform(x.view(), Parallelism::Rayon).unwrap(),
            )
        })
    };
    assert_eq!(run(&one), run(&two));
}

#[test]
fn bad_inputs() {
    let x = gaussian_data(10, 3, 5);
    let fit = |cfg: &MaclaurinConfig| {
        MaclaurinMap::fit(
            x.view(),
            cfg,
            0,
            Parallelism::Sequential,
            &Monitor::default(),
        )
    };
    let base = config(MaclaurinKernel::Gaussian, 20);
    let mut c = base.clone();
    c.h01 = true;
    c.n_components = 3; // constant + 3 linear columns do not fit
    assert!(fit(&c).is_err());
    let mut c = base.clone();
    c.length_scale = 0.0;
    assert!(fit(&c).is_err());
    let mut c = base.clone();
    c.kernel_variance = f64::NAN;
    assert!(fit(&c).is_err());
    let mut c = base.clone();
    c.n_subsample = 1;
    assert!(fit(&c).is_err());
    let mut c = base.clone();
    c.sketch = SketchKind::TensorSketch;
    assert!(fit(&c).is_err());
    let mut c = base.clone();
    c.min_degree = 5;
    c.max_degree = 3;
    assert!(fit(&c).is_err());
    let mut c = config(
        MaclaurinKernel::Polynomial {
            degree: 2,
            bias: 0.0,
        },
        20,
    );
    c.h01 = true;
    assert!(fit(&c).is_err());
    let mut c = base.clone();
    c.allocation = AllocationStrategy::Explicit(vec![1, 5, 5]); // width 11 != 20
    assert!(fit(&c).is_err());
    c.allocation = AllocationStrategy::Explicit(vec![0, 10, 10]); // the constant is missing
    assert!(fit(&c).is_err());
    c.allocation = AllocationStrategy::Explicit(vec![1, 10, 9]);
    assert!(fit(&c).is_ok());
    let mut nan = x.clone();
    nan[[0, 0]] = f64::NAN;
    assert!(MaclaurinMap::fit(
        nan.view(),
        &base,
        0,
        Parallelism::Sequential,
        &Monitor::default()
    )
    .is_err());
    let map = fit(&base).unwrap();
    let wrong = gaussian_data(2, 4, 0);
    assert!(map
        .transform(wrong.view(), Parallelism::Sequential)
        .is_err());
    let dot_kernel = fit(&config(MaclaurinKernel::Exponential, 20)).unwrap();
    let mut out = Array2::zeros((10, 20));
    assert!(dot_kernel
        .transform_centered_into(
            x.view(),
            &[1.0, 0.0, 0.0],
            out.view_mut(),
            Parallelism::Sequential
        )
        .is_err());
}

/// `T` independent estimates of one pair (seeds `0..T`).
fn estimates(
    cfg: &MaclaurinConfig,
    fit_x: &Array2<f64>,
    pair: &Array2<f64>,
    t: u64,
) -> Array1<f64> {
    (0..t)
        .map(|seed| {
            let map = fitted(fit_x, cfg, seed);
            let f = map.transform(pair.view(), Parallelism::Sequential).unwrap();
            dot(f.row(0), f.row(1))
        })
        .collect()
}

#[test]
fn unbiased_for_the_truncated_kernel() {
    // E[Φ(x)ᵀΦ(y)] = k_p(x, y) (docs/math/maclaurin.rst, "The truncated random
    // map"), explicit allocation, 4 standard errors of the mean with the
    // closed-form variance σ⁴ g² g² Σ a_n² Var_n(D_n).
    let fit_x = array![[0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]];
    let pair = array![[0.5, -0.3, 0.8, 0.1], [0.2, 0.6, 0.4, -0.7]];
    let p = PairStats::new(
        pair.row(0).as_slice().unwrap(),
        pair.row(1).as_slice().unwrap(),
    );
    let g = (-0.5 * (pair.row(0).dot(&pair.row(0)) + pair.row(1).dot(&pair.row(1)))).exp();
    let counts = vec![1, 3, 4, 2];
    for (kind, complex) in [
        (SketchKind::Rademacher, false),
        (SketchKind::TensorSrht, false),
        (SketchKind::Gaussian, true),
    ] {
        let mut cfg = config(MaclaurinKernel::Gaussian, if complex { 19 } else { 10 });
        cfg.sketch = kind;
        cfg.complex = complex;
        cfg.kernel_variance = 1.7;
        cfg.allocation = AllocationStrategy::Explicit(counts.clone());
        let mean = estimates(&cfg, &fit_x, &pair, 3000).mean().unwrap();
        let a = MaclaurinKernel::Gaussian.coefficients(3);
        let kp: f64 = 1.7 * g * (0..=3).map(|n| a[n] * p.m.powi(n as i32)).sum::<f64>();
        let var: f64 = (1..=3)
            .map(|n| {
                let v = sketch_variance(
                    kind,
                    complex,
                    n as u32,
                    counts[n],
                    padded_dim(4).unwrap(),
                    &p,
                )
                .unwrap()
                .real_part;
                a[n] * a[n] * v
            })
            .sum::<f64>()
            * (1.7 * g).powi(2);
        let se = (var / 3000.0).sqrt();
        assert!(
            (mean - kp).abs() < 4.0 * se,
            "{kind:?}: {mean} vs {kp} (se {se})"
        );
    }
}

#[test]
fn kar_karnick_map_is_unbiased_for_the_series() {
    // docs/math/maclaurin.rst, "Kar & Karnick's random Maclaurin features": E =
    // Σ_{n ∈ support ∪ {0}} a_n m^n; variance from the closed form.
    let fit_x = array![[0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]];
    let pair = array![[0.3, -0.2, 0.5, 0.1], [-0.1, 0.4, 0.2, 0.3]];
    let mut cfg = config(MaclaurinKernel::Exponential, 8);
    cfg.sketch = SketchKind::Rademacher;
    cfg.allocation = AllocationStrategy::Random;
    cfg.max_degree = 6;
    let est = estimates(&cfg, &fit_x, &pair, 4000);
    let t = est.len() as f64;
    let mean = est.mean().unwrap();
    let var = est.var(1.0);
    let m4 = est.mapv(|e| (e - mean).powi(4)).mean().unwrap();
    let (want_mean, want_var) = (1.0 + 0.0202013, 0.0237843);
    assert!(
        (mean - want_mean).abs() < 4.0 * (want_var / t).sqrt(),
        "{mean}"
    );
    // Standard error of the sample variance from the sample's fourth moment.
    let se_var = ((m4 - var * var) / t).sqrt();
    assert!((var - want_var).abs() < 4.0 * se_var, "{var} ± {se_var}");
}

/// Measured mean squared kernel error over the subsample's pairs.
fn pair_error(map: &MaclaurinMap, x: &Array2<f64>, l: f64) -> f64 {
    let f = map.transform(x.view(), Parallelism::Sequential).unwrap();
    let n = x.nrows();
    let (mut sum, mut cnt) = (0.0, 0.0);
    for i in 0..n {
        for j in (i + 1)..n {
            let d2: f64 = (&x.row(i) - &x.row(j)).mapv(|v| v * v).sum();
            let k = (-0.5 * d2 / (l * l)).exp();
            sum += (dot(f.row(i), f.row(j)) - k).powi(2);
            cnt += 1.0;
        }
    }
    sum / cnt
}

#[test]
fn objective_predicts_the_measured_error() {
    // 4 oracle: for unstructured sketches the average over draws of
    // avg[(k̂ − k)²] equals J exactly in expectation. With R = 800 draws the
    // mean must be within 10% of J. The standard error of the mean (from the
    // draws) must make that band at least 4 SE for Rademacher sketches and
    // 2.5 SE for the heavy-tailed Gaussian sketches (products of Gaussians:
    // their sample SE itself fluctuates, so 4 SE would need ~4x the draws).
    let x = gaussian_data(40, 3, 6);
    let l = 1.5;
    for (kind, n_se) in [(SketchKind::Rademacher, 4.0), (SketchKind::Gaussian, 2.5)] {
        let mut cfg = config(MaclaurinKernel::Gaussian, 24);
        cfg.sketch = kind;
        cfg.length_scale = l;
        let j = fitted(&x, &cfg, 0).objective().unwrap();
        let errs: Array1<f64> = (0..800)
            .map(|seed| {
                let m = fitted(&x, &cfg, seed);
                pair_error(&m, &x, l)
            })
            .collect();
        let mean = errs.mean().unwrap();
        let se = errs.std(1.0) / (errs.len() as f64).sqrt();
        eprintln!("{kind:?}: measured {mean} ± {se} vs J {j}");
        assert!(n_se * se < 0.1 * j, "{kind:?}: se {se} vs J {j}");
        assert!(
            (mean / j - 1.0).abs() < 0.1,
            "{kind:?}: measured {mean} vs J {j}"
        );
    }
}

/// A subnormal length scale, whose reciprocal overflows: `x̃ = (x − c)/l`
/// is formed by division, exactly for a power of two (`(x − c) · (1/l)`
/// gave `0 · ∞ = NaN` and was refused as non-finite `X`), so the features
/// are those of the unscaled data; an `x̃` beyond the float range is the
/// features' overflow, naming `X`.
#[test]
fn subnormal_length_scales_divide() {
    // Multiples of 1/4 in 16 rows: they and their mean (the center) are
    // exact at every power-of-two scale down to 2^-1068.
    let units = Array2::from_shape_fn((16, 3), |(i, j)| ((7 * i + 3 * j) % 11) as f64 / 4.0 - 1.25);
    let l = crate::real::times_pow2(1.0, -1040);
    let fit = |x: &Array2<f64>, l: f64| {
        let mut cfg = config(MaclaurinKernel::Gaussian, 16);
        cfg.length_scale = l;
        fitted(x, &cfg, 3)
    };
    let want = fit(&units, 1.0)
        .transform(units.view(), Parallelism::Sequential)
        .unwrap();
    let tiny = units.mapv(|v| v * l);
    let map = fit(&tiny, l);
    assert_eq!(
        map.transform(tiny.view(), Parallelism::Sequential).unwrap(),
        want
    );
    let e = map
        .transform(units.view(), Parallelism::Sequential)
        .unwrap_err();
    assert!(
        matches!(e, crate::Error::InvalidParameter { name: "X", .. })
            && e.to_string().contains("overflow"),
        "{e}"
    );
}
