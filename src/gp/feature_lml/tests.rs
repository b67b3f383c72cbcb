//! Oracles of the feature-space GP's marginal-likelihood fit: the LML and
//! every gradient against central differences (fixed random draw), the LML
//! and the closed-form gradients against the direct `N × N` computation
//! with the low-rank kernel `K = ΦΦᵀ`, chunked against one pass, the fixed
//! draw at the map's own hyperparameters bit for bit, the fit's kept GP
//! against a refit, and bad input.

use ndarray::{Array1, Array2};
use rand::Rng as _;

use super::*;
use crate::fourier::{FourierConfig, Sampler};
use crate::gp::optimize::{median_pairwise_distance, per_dimension_length_scales};
use crate::kernels::Kernel;
use crate::linalg::Cholesky;
use crate::maclaurin::{MaclaurinConfig, MaclaurinKernel};
use crate::nystroem::NystroemFeatures;
use crate::sketch::{PolySketch, PolynomialFeatures, SketchKind};
use crate::stats::ShiftedSums as _;

const PAR: Parallelism = Parallelism::Rayon;

/// `ln 2π`.
const LN_2PI: f64 = 1.837_877_066_409_345_5;

fn random(rows: usize, cols: usize, seed: u64) -> Array2<f64> {
    let mut rng = crate::rng::seeded(seed);
    Array2::from_shape_fn((rows, cols), |_| rng.random_range(-1.5..1.5))
}

fn targets(x: &Array2<f64>) -> Array1<f64> {
    x.rows()
        .into_iter()
        .enumerate()
        .map(|(i, r)| (1.7 * r[0]).sin() + 0.3 * r.sum() + 0.05 * ((i * 7 % 11) as f64 - 5.0))
        .collect()
}

/// A Fourier map of `width` features on `d` inputs (length scale 1.3,
/// kernel variance 0.8, seed 5).
pub(super) fn fourier(
    d: usize,
    kernel: Kernel,
    sampler: Sampler,
    variant: Variant,
    width: usize,
) -> HyperMap {
    let cfg = FourierConfig {
        n_components: width,
        kernel,
        length_scale: 1.3,
        kernel_variance: 0.8,
        sampler,
        variant,
    };
    let map = FourierFeatures::fit(&cfg, d, 5).unwrap();
    HyperMap::new(map.into(), vec![1.3]).unwrap()
}

/// The Maclaurin map of `cfg` fitted on `x` (seed 9).
pub(super) fn maclaurin(x: &Array2<f64>, cfg: MaclaurinConfig) -> HyperMap {
    let map = MaclaurinMap::fit(x.view(), &cfg, 9, PAR, &Monitor::default()).unwrap();
    HyperMap::Maclaurin(map)
}

/// Every map of the oracles, with whether it takes per-dimension length
/// scales, on inputs `x` (`d = 3`, or 1 for the explicit Maclaurin map).
fn cases(x: &Array2<f64>, x1: &Array2<f64>) -> Vec<(&'static str, HyperMap, Array2<f64>)> {
    let d = x.ncols();
    let mut gauss = MaclaurinConfig::new(MaclaurinKernel::Gaussian, 24);
    gauss.length_scale = 1.1;
    gauss.kernel_variance = 0.9;
    let mut poly = MaclaurinConfig::new(
        MaclaurinKernel::Polynomial {
            degree: 3,
            bias: 0.7,
        },
        26,
    );
    poly.h01 = true;
    poly.complex = true;
    let mut expo = MaclaurinConfig::new(MaclaurinKernel::Exponential, 20);
    expo.length_scale = 1.6;
    let mut one = MaclaurinConfig::new(MaclaurinKernel::Gaussian, 9);
    one.length_scale = 0.9;
    vec![
        (
            "rff gaussian cos_sin",
            fourier(d, Kernel::Gaussian, Sampler::Mc, Variant::CosSin, 31),
            x.clone(),
        ),
        (
            "rff matern32 cos_bias",
            fourier(d, Kernel::Matern32, Sampler::Mc, Variant::CosBias, 24),
            x.clone(),
        ),
        (
            "rff matern52 orthogonal",
            fourier(
                d,
                Kernel::Matern52,
                Sampler::Orthogonal,
                Variant::CosSin,
                24,
            ),
            x.clone(),
        ),
        (
            "rff matern12 cos_bias",
            fourier(d, Kernel::Matern12, Sampler::Mc, Variant::CosBias, 20),
            x.clone(),
        ),
        (
            "rff structured",
            fourier(
                d,
                Kernel::Gaussian,
                Sampler::Structured,
                Variant::CosSin,
                32,
            ),
            x.clone(),
        ),
        ("maclaurin gaussian", maclaurin(x, gauss), x.clone()),
        (
            "maclaurin polynomial h01 complex",
            maclaurin(x, poly),
            x.clone(),
        ),
        ("maclaurin exponential", maclaurin(x, expo), x.clone()),
        ("maclaurin gaussian d = 1", maclaurin(x1, one), x1.clone()),
    ]
}

/// The hyperparameters `(l.., σ², σ_n²)` of the oracles: away from the
/// map's own ones, so the rescaling is exercised.
fn values(ard: bool, d: usize) -> Vec<f64> {
    let mut v: Vec<f64> = if ard {
        (0..d).map(|a| 0.7 + 0.4 * a as f64).collect()
    } else {
        vec![0.9]
    };
    v.extend([1.4, 0.07]);
    v
}

fn all_free(values: Vec<f64>) -> LogParams {
    let free = (0..values.len()).collect();
    LogParams { values, free }
}

#[test]
fn lml_and_every_gradient_match_central_differences() {
    let x = random(37, 3, 1);
    let x1 = random(29, 1, 2);
    let mut bad = Vec::new();
    for (name, map, x) in cases(&x, &x1) {
        let y = targets(&x);
        for ard in [false, true] {
            if ard && !map.supports_ard() {
                continue;
            }
            let params = all_free(values(ard, x.ncols()));
            let obj =
                FeatureLml::new(&map, x.view(), y.view(), params.clone(), true, 7, PAR).unwrap();
            let theta = params.start();
            let e = obj.evaluate(&theta, &Monitor::default()).unwrap();
            assert_eq!(e.grad.len(), theta.len());
            let h = 1e-5;
            for p in 0..theta.len() {
                let mut tp = theta.clone();
                tp[p] += h;
                let mut tm = theta.clone();
                tm[p] -= h;
                let f = |t: &[f64]| obj.evaluate(t, &Monitor::default()).unwrap().value;
                let fd = (f(&tp) - f(&tm)) / (2.0 * h);
                // Central differences err by O(h² f''') + O(eps |f| / h).
                if (fd - e.grad[p]).abs() >= 1e-6 * (1.0 + fd.abs()) {
                    bad.push(format!(
                        "{name} ard {ard} param {p}: fd {fd} vs {}",
                        e.grad[p]
                    ));
                }
            }
        }
    }
    assert!(bad.is_empty(), "{bad:#?}");
}

#[test]
fn lml_equals_the_direct_computation_with_the_low_rank_kernel() {
    // 7.1 with K = ΦΦᵀ: LML = −½ yᵀα − ½ ln det K_y − (N/2) ln 2π, and the
    // closed-form gradients ∂/∂ln σ² = ½ tr[(ααᵀ − K_y⁻¹) K] (Φ scales by
    // σ) and ∂/∂ln σ_n² = ½ σ_n² (αᵀα − tr K_y⁻¹).
    let x = random(37, 3, 3);
    let x1 = random(29, 1, 4);
    for (name, map, x) in cases(&x, &x1) {
        let y = targets(&x);
        let n = x.nrows();
        for ard in [false, true] {
            if ard && !map.supports_ard() {
                continue;
            }
            let v = values(ard, x.ncols());
            let k = v.len() - 2;
            let params = all_free(v.clone());
            let obj =
                FeatureLml::new(&map, x.view(), y.view(), params.clone(), true, 11, PAR).unwrap();
            let e = obj.evaluate(&params.start(), &Monitor::default()).unwrap();
            let at = map.at(&v[..k], v[k]).unwrap();
            let mut phi = Array2::<f64>::zeros((n, at.n_components()));
            FeatureMap::transform_into(&at, x.view(), phi.view_mut(), PAR).unwrap();
            let yc = &y - y.mean().unwrap();
            let kmat = phi.dot(&phi.t());
            let ky = &kmat + &(Array2::<f64>::eye(n) * v[k + 1]);
            let chol = Cholesky::new(as_faer(ky.view()), Parallelism::Sequential).unwrap();
            let alpha = Array1::from(chol.solve_vec(yc.view(), Parallelism::Sequential));
            let lml = -0.5 * yc.dot(&alpha) - 0.5 * chol.log_det() - 0.5 * n as f64 * LN_2PI;
            assert!(
                (e.value - lml).abs() < 1e-10 * (1.0 + lml.abs()),
                "{name}: {} vs {lml}",
                e.value
            );
            let inv = chol.inverse(Parallelism::Sequential);
            let m = Array2::from_shape_fn((n, n), |(i, j)| alpha[i] * alpha[j] - inv[(i, j)]);
            let g_kv = 0.5 * (&m * &kmat).sum();
            let g_nv = 0.5 * v[k + 1] * (alpha.dot(&alpha) - inv.diag().sum());
            for (got, want) in [(e.grad[k], g_kv), (e.grad[k + 1], g_nv)] {
                assert!(
                    (got - want).abs() < 1e-8 * (1.0 + want.abs()),
                    "{name}: {got} vs {want}"
                );
            }
        }
    }
}

#[test]
fn chunked_accumulation_equals_one_pass() {
    let x = random(50, 3, 5);
    let x1 = random(29, 1, 6);
    for (name, map, x) in cases(&x, &x1) {
        let y = targets(&x);
        let ard = map.supports_ard();
        let params = all_free(values(ard, x.ncols()));
        let one = FeatureLml::new(
            &map,
            x.view(),
            y.view(),
            params.clone(),
            true,
            x.nrows(),
            PAR,
        )
        .unwrap();
        let theta = params.start();
        let e1 = one.evaluate(&theta, &Monitor::default()).unwrap();
        for chunk in [1, 7, 16] {
            let obj = FeatureLml::new(&map, x.view(), y.view(), params.clone(), true, chunk, PAR)
                .unwrap();
            let e = obj.evaluate(&theta, &Monitor::default()).unwrap();
            // Different summation orders of the same sums.
            assert!(
                (e.value - e1.value).abs() < 1e-10 * e1.value.abs(),
                "{name}"
            );
            for (a, b) in e.grad.iter().zip(&e1.grad) {
                assert!(
                    (a - b).abs() < 1e-9 * (1.0 + b.abs()),
                    "{name} chunk {chunk}: {a} vs {b}"
                );
            }
        }
    }
}

#[test]
fn the_draw_is_fixed_and_the_map_at_its_own_hyperparameters_is_the_map() {
    let x = random(40, 3, 7);
    let x1 = random(20, 1, 8);
    for (name, map, x) in cases(&x, &x1) {
        let (l0, kv0) = map.hyperparameters();
        let at = map.at(&l0, kv0).unwrap();
        let width = map.n_components();
        let (mut a, mut b) = (
            Array2::<f64>::zeros((x.nrows(), width)),
            Array2::<f64>::zeros((x.nrows(), width)),
        );
        FeatureMap::transform_into(&at, x.view(), a.view_mut(), PAR).unwrap();
        match &map {
            HyperMap::Fourier { map, .. } => {
                FeatureMap::transform_into(map, x.view(), b.view_mut(), PAR)
            }
            HyperMap::Maclaurin(m) => FeatureMap::transform_into(m, x.view(), b.view_mut(), PAR),
        }
        .unwrap();
        assert_eq!(a, b, "{name}");
        // Twice the length scale on twice the inputs: the same features
        // (the draw does not move; exact up to rounding of the rescaling).
        let l2: Vec<f64> = l0.iter().map(|l| 2.0 * l).collect();
        let at2 = map.at(&l2, kv0).unwrap();
        let x2 = &x * 2.0;
        FeatureMap::transform_into(&at2, x2.view(), b.view_mut(), PAR).unwrap();
        if let HyperMap::Maclaurin(m) = &map {
            // The Gaussian map's center is the training mean: shift it too.
            if m.center().is_some() {
                continue;
            }
        }
        assert!((&a - &b).iter().all(|v| v.abs() < 1e-12), "{name}");
    }
}

#[test]
fn maclaurin_at_other_hyperparameters_equals_a_rebuild() {
    let x = random(60, 3, 9);
    let mut cfg = MaclaurinConfig::new(MaclaurinKernel::Gaussian, 30);
    cfg.h01 = false;
    let map = MaclaurinMap::fit(x.view(), &cfg, 4, PAR, &Monitor::default()).unwrap();
    let moved = map.with_kernel_parameters(0.6, 2.5).unwrap();
    let mut c2 = map.config().clone();
    c2.length_scale = 0.6;
    c2.kernel_variance = 2.5;
    let rebuilt = MaclaurinMap::rebuild(
        &c2,
        3,
        map.allocation().to_vec(),
        map.center().map(|c| c.to_vec()),
        map.seed(),
    )
    .unwrap();
    assert_eq!(
        moved.transform(x.view(), PAR).unwrap(),
        rebuilt.transform(x.view(), PAR).unwrap()
    );
    assert!(map.with_kernel_parameters(-1.0, 1.0).is_err());
    assert_eq!(map.column_degrees().len(), 30);
}

#[test]
fn the_fit_keeps_its_best_evaluation_and_reaches_a_stationary_point() {
    let x = random(300, 2, 10);
    let y = targets(&x);
    for (map, ard) in [
        (
            fourier(2, Kernel::Gaussian, Sampler::Mc, Variant::CosSin, 64),
            false,
        ),
        (
            fourier(
                2,
                Kernel::Matern52,
                Sampler::Orthogonal,
                Variant::CosBias,
                48,
            ),
            true,
        ),
        (
            maclaurin(&x, MaclaurinConfig::new(MaclaurinKernel::Gaussian, 40)),
            false,
        ),
    ] {
        let cfg = FeatureLmlConfig {
            ard,
            optimizer: OptimizerConfig {
                n_restarts: 1,
                coarse_min_rows: 128,
                ..Default::default()
            },
            chunk_rows: 64,
            ..Default::default()
        };
        let monitor = Monitor::new();
        let fit = fit_feature_gp(&map, x.view(), y.view(), &cfg, PAR, &monitor).unwrap();
        assert!(fit.n_iter > 0);
        assert_eq!(fit.length_scale.len(), if ard { 2 } else { 1 });
        let messages = monitor.take_messages();
        assert!(
            messages.iter().any(|m| m.starts_with("run 2/2: LML = ")),
            "{messages:?}"
        );
        // The kept GP is the refit of the map at the optimum: bit for bit
        // from the L-BFGS path (ARD); from the profiled search (one length
        // scale) its statistics are those at unit kernel variance scaled by
        // σ², which equal the refit's up to rounding.
        let refit = FeatureGp::fit_map(
            &fit.map,
            x.view(),
            y.view(),
            fit.gp.noise_variance,
            true,
            crate::gpu::Device::Cpu,
            64,
            PAR,
            &Monitor::default(),
        )
        .unwrap();
        if ard {
            assert_eq!((refit.lml, &refit.beta), (fit.gp.lml, &fit.gp.beta));
        } else {
            assert!((refit.lml - fit.gp.lml).abs() < 1e-12 * refit.lml.abs());
            let scale = refit.beta.iter().fold(0.0_f64, |m, v| m.max(v.abs()));
            for (a, b) in refit.beta.iter().zip(&fit.gp.beta) {
                assert!((a - b).abs() < 1e-10 * scale, "{a} vs {b}");
            }
        }
        // A stationary point: the gradient of −LML/N is small.
        let mut v = fit.length_scale.clone();
        v.extend([fit.kernel_variance, fit.gp.noise_variance]);
        let params = all_free(v);
        let obj = FeatureLml::new(&map, x.view(), y.view(), params.clone(), true, 64, PAR).unwrap();
        let e = obj.evaluate(&params.start(), &Monitor::default()).unwrap();
        assert!((e.value - fit.gp.lml).abs() < 1e-12 * e.value.abs());
        let gnorm = e.grad.iter().map(|g| g * g).sum::<f64>().sqrt();
        assert!(gnorm < 1e-4 * x.nrows() as f64, "|grad| = {gnorm}");
    }
}

#[test]
fn fixed_hyperparameters_stay_and_no_optimization_is_the_plain_fit() {
    let x = random(80, 3, 11);
    let y = targets(&x);
    let map = fourier(3, Kernel::Gaussian, Sampler::Mc, Variant::CosSin, 40);
    let cfg = FeatureLmlConfig {
        noise_variance: Some(0.05),
        optimize: vec![Hyper::LengthScale],
        optimizer: OptimizerConfig {
            n_restarts: 0,
            ..Default::default()
        },
        ..Default::default()
    };
    let fit = fit_feature_gp(&map, x.view(), y.view(), &cfg, PAR, &Monitor::default()).unwrap();
    assert_eq!((fit.kernel_variance, fit.gp.noise_variance), (0.8, 0.05));
    assert_ne!(fit.length_scale, vec![1.3]);
    let none = FeatureLmlConfig {
        noise_variance: Some(0.05),
        optimize: vec![],
        chunk_rows: 30,
        ..Default::default()
    };
    let fit = fit_feature_gp(&map, x.view(), y.view(), &none, PAR, &Monitor::default()).unwrap();
    assert_eq!(fit.n_iter, 0);
    let HyperMap::Fourier { map: rff, .. } = &map else {
        unreachable!()
    };
    let plain = FeatureGp::fit_map(
        rff,
        x.view(),
        y.view(),
        0.05,
        true,
        crate::gpu::Device::Cpu,
        30,
        PAR,
        &Monitor::default(),
    )
    .unwrap();
    assert_eq!((plain.lml, &plain.beta), (fit.gp.lml, &fit.gp.beta));
}

#[test]
fn unsupported_maps_and_bad_input_are_clear_errors() {
    let x = random(30, 3, 12);
    let y = targets(&x);
    let nys = NystroemFeatures::fit(x.view(), 10, Kernel::Gaussian, &[1.0], 0)
        .unwrap()
        .0;
    let sk = PolySketch::draw(
        SketchKind::Gaussian,
        false,
        2,
        4,
        16,
        &mut crate::rng::seeded(1),
    )
    .unwrap();
    let poly = PolynomialFeatures::new(sk, 0.5, 1.0, 16).unwrap();
    for map in [AnyFeatureMap::from(nys), AnyFeatureMap::from(poly)] {
        let e = HyperMap::new(map, vec![1.0]).unwrap_err().to_string();
        assert!(
            e.contains("features")
                && e.contains("RandomFourierFeatures")
                && e.contains("MaclaurinFeatures"),
            "{e}"
        );
    }
    let mac = maclaurin(&x, MaclaurinConfig::new(MaclaurinKernel::Gaussian, 20));
    let ard = FeatureLmlConfig {
        ard: true,
        ..Default::default()
    };
    let e = fit_feature_gp(&mac, x.view(), y.view(), &ard, PAR, &Monitor::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("ard") && e.contains("RandomFourierFeatures"),
        "{e}"
    );
    let rff = fourier(3, Kernel::Gaussian, Sampler::Mc, Variant::CosSin, 20);
    let zero = FeatureLmlConfig {
        chunk_rows: 0,
        ..Default::default()
    };
    assert!(
        fit_feature_gp(&rff, x.view(), y.view(), &zero, PAR, &Monitor::default())
            .unwrap_err()
            .to_string()
            .contains("chunk_size")
    );
    let x2 = random(30, 2, 13);
    assert!(matches!(
        fit_feature_gp(
            &rff,
            x2.view(),
            y.view(),
            &FeatureLmlConfig::default(),
            PAR,
            &Monitor::default()
        ),
        Err(Error::ShapeMismatch { .. })
    ));
    let mut xn = x.clone();
    xn[(3, 1)] = f64::NAN;
    assert_eq!(
        fit_feature_gp(
            &rff,
            xn.view(),
            y.view(),
            &FeatureLmlConfig::default(),
            PAR,
            &Monitor::default()
        )
        .unwrap_err(),
        Error::NonFinite { name: "X" }
    );
    assert!(HyperMap::new(
        match rff {
            HyperMap::Fourier { map, .. } => map.into(),
            HyperMap::Maclaurin(_) => unreachable!(),
        },
        vec![1.0, 2.0]
    )
    .is_err());
    let cancelled = Monitor::new();
    cancelled.cancel();
    let rff = fourier(3, Kernel::Gaussian, Sampler::Mc, Variant::CosSin, 20);
    assert_eq!(
        fit_feature_gp(
            &rff,
            x.view(),
            y.view(),
            &FeatureLmlConfig::default(),
            PAR,
            &cancelled
        )
        .unwrap_err(),
        Error::Interrupted
    );
}

#[test]
fn with_many_features_the_optimum_approaches_the_exact_gp() {
    // The Gaussian kernel sampled with m = 512 frequency pairs deviates
    // from the exact one entrywise with variance at most σ⁴/(2m) (a
    // standard deviation of ~0.03 σ²), so both the fitted hyperparameters
    // and the log marginal likelihood move by a few per cent; with
    // m = 8 they move by much more.
    let x = random(200, 2, 14);
    let y = targets(&x);
    let n = x.nrows() as f64;
    let optimizer = OptimizerConfig {
        n_restarts: 0,
        coarse_min_rows: usize::MAX,
        ..Default::default()
    };
    let exact_cfg = crate::gp::ExactGpConfig {
        hyper: HyperInit {
            length_scale: Some(vec![1.3]),
            kernel_variance: Some(0.8),
            ..Default::default()
        },
        optimizer: optimizer.clone(),
        ..Default::default()
    };
    let exact =
        crate::gp::fit_exact(x.view(), y.view(), &exact_cfg, PAR, &Monitor::default()).unwrap();
    let gap = |width: usize| {
        let map = fourier(2, Kernel::Gaussian, Sampler::Mc, Variant::CosSin, width);
        let cfg = FeatureLmlConfig {
            optimizer: optimizer.clone(),
            ..Default::default()
        };
        let fit = fit_feature_gp(&map, x.view(), y.view(), &cfg, PAR, &Monitor::default()).unwrap();
        let log_gap = [
            fit.length_scale[0] / exact.kernel.length_scale[0],
            fit.kernel_variance / exact.kernel.variance,
            fit.gp.noise_variance / exact.noise_variance,
        ]
        .iter()
        .map(|r| r.ln().abs())
        .fold(0.0, f64::max);
        // The exact LML at the feature-space optimum: at most the exact
        // maximum, and close to it when the optima are close.
        let kernel = crate::kernels::StationaryKernel::gaussian(
            fit.length_scale.clone(),
            fit.kernel_variance,
        );
        let at =
            crate::gp::ExactGp::fit(x.view(), y.view(), kernel, fit.gp.noise_variance, true, PAR)
                .unwrap();
        (
            log_gap,
            exact.lml - at.lml,
            (fit.gp.lml - exact.lml).abs() / n,
        )
    };
    let big = gap(1024);
    let small = gap(16);
    eprintln!(
        "exact lml {} | D = 1024: {big:?} | D = 16: {small:?}",
        exact.lml
    );
    assert!(big.0 < 0.15, "hyperparameters: {big:?}");
    assert!(big.1 > -1e-6 && big.1 < 0.5, "exact LML lost: {big:?}");
    assert!(big.2 < 0.03, "LML per row: {big:?}");
    assert!(big.1 < small.1 && big.2 < small.2, "{big:?} vs {small:?}");
}

// --- Sums over blocks (sums.rs) ---------------------------------------------------------------

/// The sums of the rows `x`, `y` in blocks cut at `cuts` (empty blocks
/// included), merged left to right.
fn merged_sums(
    map: &HyperMap,
    v: &[f64],
    x: &Array2<f64>,
    y: &Array1<f64>,
    cuts: &[usize],
) -> LmlSums {
    let mut bounds = vec![0];
    bounds.extend_from_slice(cuts);
    bounds.push(x.nrows());
    let mut out = LmlSums::new(v.to_vec(), map.n_components()).unwrap();
    for w in bounds.windows(2) {
        let (lo, hi) = (w[0], w[1]);
        let block = LmlSums::of_rows(
            map,
            v,
            x.slice(s![lo..hi, ..]),
            y.slice(s![lo..hi]),
            5,
            PAR,
            &Monitor::default(),
        )
        .unwrap();
        out.merge(&block).unwrap();
    }
    out
}

fn assert_close(name: &str, a: &[f64], b: &[f64], rel: f64) {
    let scale = b.iter().fold(0.0f64, |m, v| m.max(v.abs())).max(1.0);
    for (i, (p, q)) in a.iter().zip(b).enumerate() {
        assert!((p - q).abs() <= rel * scale, "{name} [{i}]: {p} vs {q}");
    }
}

#[test]
fn merged_block_sums_equal_one_pass_and_give_the_in_process_lml_and_variance_gradients() {
    let x = random(61, 3, 21);
    let x1 = random(29, 1, 22);
    for (name, map, x) in cases(&x, &x1) {
        let y = targets(&x);
        for ard in [false, true] {
            if ard && !map.supports_ard() {
                continue;
            }
            let v = values(ard, x.ncols());
            let one = LmlSums::of_rows(
                &map,
                &v,
                x.view(),
                y.view(),
                x.nrows(),
                PAR,
                &Monitor::default(),
            )
            .unwrap();
            // Blocks of other target means (other shifts), one empty.
            let merged = merged_sums(
                &map,
                &v,
                &x,
                &y,
                &[3, 3, x.nrows() / 3, 2 * x.nrows() / 3 + 1],
            );
            assert_eq!(merged.stats.n, x.nrows() as u64);
            assert_close(
                name,
                merged.stats.gram.as_slice().unwrap(),
                one.stats.gram.as_slice().unwrap(),
                1e-13,
            );
            let recentered = |s: &LmlSums| {
                let mut s = s.stats.clone();
                s.reshift(0.0);
                s
            };
            let (m0, o0) = (recentered(&merged), recentered(&one));
            assert_close(
                name,
                m0.phi_y.as_slice().unwrap(),
                o0.phi_y.as_slice().unwrap(),
                1e-13,
            );
            // The LML and variance gradients of the sums are those of the
            // streamed two-pass evaluation; the length-scale entries are
            // left to the second reduction (`a_block_evaluation_…`).
            let k = v.len() - 2;
            let params = all_free(v.clone());
            let obj =
                FeatureLml::new(&map, x.view(), y.view(), params.clone(), true, 7, PAR).unwrap();
            let e = obj.evaluate(&params.start(), &Monitor::default()).unwrap();
            for center in [true, false] {
                let (grad, gp) = merged.evaluate(center, PAR).unwrap();
                assert!(grad[..k].iter().all(|&g| g == 0.0), "{name}");
                if center {
                    assert!((gp.lml - e.value).abs() < 1e-11 * e.value.abs(), "{name}");
                    assert_close(name, &grad[k..], &e.grad[k..], 1e-10);
                } else {
                    let obj =
                        FeatureLml::new(&map, x.view(), y.view(), params.clone(), false, 7, PAR)
                            .unwrap();
                    let e = obj.evaluate(&params.start(), &Monitor::default()).unwrap();
                    assert!((gp.lml - e.value).abs() < 1e-11 * e.value.abs(), "{name}");
                    assert_close(name, &grad[k..], &e.grad[k..], 1e-10);
                }
            }
        }
    }
}

/// The sums of the coarse level `level` of `(x, y)` (rows `0, 4, 8, …` of
/// the level above, as [`Objective::subsample`] takes them).
fn level_sums(
    map: &HyperMap,
    x: &Array2<f64>,
    y: &Array1<f64>,
    v: &[f64],
    level: usize,
) -> Result<LmlSums> {
    let (x, y) = level_rows(x, y, level);
    let (a, b) = x.view().split_at(Axis(0), x.nrows() / 3);
    let (ya, yb) = y.view().split_at(Axis(0), y.len() / 3);
    let m = Monitor::default();
    let mut s = LmlSums::of_rows(map, v, a, ya, 64, PAR, &m)?;
    s.merge(&LmlSums::of_rows(map, v, b, yb, 64, PAR, &m)?)?;
    Ok(s)
}

/// The rows of the coarse level `level` of `(x, y)`.
fn level_rows(x: &Array2<f64>, y: &Array1<f64>, level: usize) -> (Array2<f64>, Array1<f64>) {
    let (mut x, mut y) = (x.clone(), y.clone());
    for _ in 0..level {
        let rows: Vec<usize> = (0..x.nrows() / 4).map(|i| 4 * i).collect();
        x = x.select(Axis(0), &rows);
        y = y.select(Axis(0), &rows);
    }
    (x, y)
}

/// The summed [`GradientPass::of_rows`] of the coarse level `level` of
/// `(x, y)` in two blocks.
fn level_pass(
    map: &HyperMap,
    x: &Array2<f64>,
    y: &Array1<f64>,
    pass: &GradientPass,
    level: usize,
) -> Result<Vec<f64>> {
    let (x, y) = level_rows(x, y, level);
    let (a, b) = x.view().split_at(Axis(0), x.nrows() / 3);
    let (ya, yb) = y.view().split_at(Axis(0), y.len() / 3);
    let m = Monitor::default();
    let mut out = pass.of_rows(map, a, ya, 64, PAR, &m)?;
    for (o, v) in out.iter_mut().zip(pass.of_rows(map, b, yb, 64, PAR, &m)?) {
        *o += v;
    }
    Ok(out)
}

#[test]
fn a_block_evaluation_equals_the_in_process_one() {
    // The statistics' solve, then the second pass over blocks (one of
    // them empty, the pass pickled), with one length scale and with one
    // per dimension. The same sums as the
    // in-process evaluation's, added in another order: rounding of about
    // 1e−15 relative per sum, amplified by the D × D solve (condition
    // ≲ 1e2 here).
    let x = random(61, 3, 21);
    let x1 = random(29, 1, 22);
    for (name, map, x) in cases(&x, &x1) {
        let y = targets(&x);
        let cuts = [0, 20, 20, x.nrows()];
        let m = Monitor::default();
        let blocks = || {
            cuts.windows(2)
                .map(|w| (x.slice(s![w[0]..w[1], ..]), y.slice(s![w[0]..w[1]])))
        };
        let sums = |v: &[f64], _: usize| -> Result<LmlSums> {
            let mut out = LmlSums::new(v.to_vec(), map.n_components())?;
            for (xb, yb) in blocks() {
                out.merge(&LmlSums::of_rows(&map, v, xb, yb, 5, PAR, &m)?)?;
            }
            Ok(out)
        };
        let pass = |p: &GradientPass, _: usize| -> Result<Vec<f64>> {
            let p = pickled(p);
            let mut out = vec![0.0; p.values.len() - 1];
            for (xb, yb) in blocks() {
                let part = p.of_rows(&map, xb, yb, 5, PAR, &m)?;
                assert_eq!(part[part.len() - 1], xb.nrows() as f64);
                for (o, v) in out.iter_mut().zip(part) {
                    *o += v;
                }
            }
            Ok(out)
        };
        for ard in [false, true] {
            if ard && !map.supports_ard() {
                continue;
            }
            let params = all_free(values(ard, x.ncols()));
            for center in [true, false] {
                let obj = FeatureLml::new(&map, x.view(), y.view(), params.clone(), center, 7, PAR)
                    .unwrap();
                let e = obj.evaluate(&params.start(), &m).unwrap();
                let on_blocks = BlockLml {
                    map: &map,
                    params: params.clone(),
                    center,
                    n_rows: x.nrows(),
                    level: 0,
                    sums: &sums,
                    pass: &pass,
                    par: PAR,
                };
                let b = on_blocks.evaluate(&params.start(), &m).unwrap();
                let case = format!("{name} ard {ard} center {center}");
                assert!((b.value - e.value).abs() < 1e-12 * e.value.abs(), "{case}");
                assert_close(&case, &b.grad, &e.grad, 1e-12);
            }
        }
    }
    // Bad passes are refused.
    let map = fourier(3, Kernel::Gaussian, Sampler::Mc, Variant::CosSin, 16);
    let x = random(10, 3, 23);
    let y = targets(&x);
    let m = Monitor::default();
    let pass = GradientPass {
        values: values(true, 3),
        beta: Array1::zeros(16),
        a_inv: Array2::eye(16),
        y_mean: 0.0,
    };
    let narrow = GradientPass {
        beta: Array1::zeros(8),
        a_inv: Array2::eye(8),
        ..pass.clone()
    };
    let err = narrow
        .of_rows(&map, x.view(), y.view(), 4, PAR, &m)
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::ShapeMismatch {
                expected: 16,
                got: 8,
                ..
            }
        ),
        "{err}"
    );
    let skew = GradientPass {
        a_inv: Array2::eye(15),
        ..pass.clone()
    };
    assert!(skew.of_rows(&map, x.view(), y.view(), 4, PAR, &m).is_err());
    let nan = GradientPass {
        y_mean: f64::NAN,
        ..pass.clone()
    };
    assert!(matches!(
        nan.of_rows(&map, x.view(), y.view(), 4, PAR, &m)
            .unwrap_err(),
        Error::NonFinite { .. }
    ));
    let err = pass
        .of_rows(&map, x.view(), y.view(), 0, PAR, &m)
        .unwrap_err();
    assert!(err.to_string().contains("chunk_size"), "{err}");
}

/// A value through serde's round trip (CBOR, as the pickled payload of a
/// task), exact for `f64`.
#[cfg(feature = "serde")]
fn pickled<T: serde::Serialize + serde::de::DeserializeOwned>(v: &T) -> T {
    let mut bytes = Vec::new();
    ciborium::into_writer(v, &mut bytes).unwrap();
    ciborium::from_reader(bytes.as_slice()).unwrap()
}

#[cfg(not(feature = "serde"))]
fn pickled<T: Clone>(v: &T) -> T {
    v.clone()
}

#[test]
fn the_fit_on_block_sums_reaches_the_in_process_optimum() {
    let unit = random(700, 2, 23);
    let y = targets(&unit);
    // The inputs also 1,000 times larger than the maps' length scales
    // suit: both fits start from the data's scale.
    for (map, ard, scale) in [
        (
            fourier(2, Kernel::Gaussian, Sampler::Mc, Variant::CosSin, 40),
            false,
            1.0,
        ),
        (
            fourier(2, Kernel::Gaussian, Sampler::Mc, Variant::CosSin, 40),
            false,
            1e3,
        ),
        (
            fourier(2, Kernel::Matern52, Sampler::Mc, Variant::CosBias, 32),
            true,
            1.0,
        ),
        (
            fourier(2, Kernel::Matern52, Sampler::Mc, Variant::CosBias, 32),
            true,
            1e3,
        ),
        (
            maclaurin(&unit, MaclaurinConfig::new(MaclaurinKernel::Gaussian, 30)),
            false,
            1.0,
        ),
    ] {
        let x = &unit * scale;
        let cfg = FeatureLmlConfig {
            ard,
            noise_variance: Some(crate::gp::initial_noise_variance(y.view()).unwrap()),
            optimizer: OptimizerConfig {
                n_restarts: 1,
                coarse_min_rows: 128,
                ..Default::default()
            },
            chunk_rows: 64,
            ..Default::default()
        };
        let fit = fit_feature_gp(&map, x.view(), y.view(), &cfg, PAR, &Monitor::new()).unwrap();
        let sums = |v: &[f64], level: usize| level_sums(&map, &x, &y, v, level);
        let pass = |p: &GradientPass, level: usize| level_pass(&map, &x, &y, p, level);
        // The caller's data scale: the in-process fit's own.
        let on_blocks = FeatureLmlConfig {
            data_length_scale: Some(if ard {
                per_dimension_length_scales(x.view())
            } else {
                vec![median_pairwise_distance(x.view())]
            }),
            ..cfg.clone()
        };
        let blocks = fit_feature_gp_blocks(
            &map,
            x.nrows(),
            &on_blocks,
            &sums,
            &pass,
            PAR,
            &Monitor::new(),
        )
        .unwrap();
        if scale > 1.0 {
            // Far from where a start at the map's length scale ends.
            let own =
                fit_feature_gp_blocks(&map, x.nrows(), &cfg, &sums, &pass, PAR, &Monitor::new())
                    .unwrap();
            assert!(
                own.gp.lml < fit.gp.lml - 0.1 * x.nrows() as f64,
                "{}",
                own.gp.lml
            );
        }
        // The same evaluations up to the summation order: the same path
        // for L-BFGS (ARD). The profiled search (one length scale) ends
        // where its parabola's promise meets the tolerance (here 3.5e−8
        // nats), judged from values that agree to ~1e−13 relative, so a
        // level can end one evaluation earlier or later (it does here).
        if ard {
            assert_eq!(blocks.n_iter, fit.n_iter);
        } else {
            let (a, b) = (blocks.n_iter, fit.n_iter);
            assert!(a.abs_diff(b) <= 2, "{a} vs {b}");
        }
        let rel = |a: f64, b: f64| (a - b).abs() / b.abs();
        assert!(
            rel(blocks.gp.lml, fit.gp.lml) < 1e-10,
            "{} vs {}",
            blocks.gp.lml,
            fit.gp.lml
        );
        for (a, b) in blocks.length_scale.iter().zip(&fit.length_scale) {
            assert!(rel(*a, *b) < 1e-6, "{a} vs {b}");
        }
        assert!(rel(blocks.kernel_variance, fit.kernel_variance) < 1e-6);
        assert!(rel(blocks.gp.noise_variance, fit.gp.noise_variance) < 1e-6);
        assert_eq!(blocks.stats.n, fit.stats.n);
    }
}

#[test]
fn block_sums_refuse_bad_input() {
    let x = random(40, 3, 24);
    let y = targets(&x);
    let m = Monitor::default();
    let map = fourier(3, Kernel::Gaussian, Sampler::Mc, Variant::CosSin, 16);
    let of = |v: &[f64]| LmlSums::of_rows(&map, v, x.view(), y.view(), 8, PAR, &m);
    // Sums at other hyperparameters do not merge.
    let mut a = of(&values(false, 3)).unwrap();
    let mut v = values(false, 3);
    v[0] *= 2.0;
    let err = a.merge(&of(&v).unwrap()).unwrap_err().to_string();
    assert!(err.contains("other hyperparameters"), "{err}");
    // Two length scales for three dimensions; a negative variance.
    assert!(of(&[1.0, 1.0, 1.0, 0.1]).is_err());
    let err = of(&[1.0, -1.0, 0.1]).unwrap_err().to_string();
    assert!(err.contains("kernel_variance"), "{err}");
    // Per-dimension length scales for the Maclaurin map.
    let mac = maclaurin(&x, MaclaurinConfig::new(MaclaurinKernel::Gaussian, 12));
    let err = LmlSums::of_rows(&mac, &values(true, 3), x.view(), y.view(), 8, PAR, &m)
        .unwrap_err()
        .to_string();
    assert!(err.contains("ard"), "{err}");
    // Sums too large to be held refuse before allocating.
    let err = LmlSums::check_size(8192).unwrap_err().to_string();
    assert!(
        err.contains("n_components") && err.contains("512 MiB"),
        "{err}"
    );
    assert!(LmlSums::check_size(4096).is_ok());
    // A fit without the initial noise variance, or with sums of other rows.
    let cfg = FeatureLmlConfig::default();
    let sums = |v: &[f64], _: usize| LmlSums::of_rows(&map, v, x.view(), y.view(), 8, PAR, &m);
    let pass = |p: &GradientPass, _: usize| p.of_rows(&map, x.view(), y.view(), 8, PAR, &m);
    let err =
        fit_feature_gp_blocks(&map, 40, &cfg, &sums, &pass, PAR, &Monitor::new()).unwrap_err();
    assert!(err.to_string().contains("noise_variance"), "{err}");
    let cfg = FeatureLmlConfig {
        noise_variance: Some(0.1),
        ..Default::default()
    };
    let err =
        fit_feature_gp_blocks(&map, 41, &cfg, &sums, &pass, PAR, &Monitor::new()).unwrap_err();
    assert!(err.to_string().contains("all 41 rows"), "{err}");
    // With per-dimension length scales, a second pass over other rows.
    let cfg = FeatureLmlConfig {
        noise_variance: Some(0.1),
        ard: true,
        ..Default::default()
    };
    let short = |p: &GradientPass, _: usize| {
        p.of_rows(&map, x.slice(s![..39, ..]), y.slice(s![..39]), 8, PAR, &m)
    };
    let err =
        fit_feature_gp_blocks(&map, 40, &cfg, &sums, &short, PAR, &Monitor::new()).unwrap_err();
    assert!(err.to_string().contains("all 40 rows"), "{err}");
}
