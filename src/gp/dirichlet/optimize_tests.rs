//! Oracles of the classifiers' hyperparameter fit: every analytic gradient
//! against central differences (fixed random draw or landmarks), and the
//! optimum of the feature-space classifier on Nyström features of every
//! training point against the exact classifier's.

use ndarray::Array2;
use rand::Rng as _;

use super::*;
use crate::fourier::{FourierConfig, FourierFeatures, Sampler, Variant};
use crate::maclaurin::{MaclaurinConfig, MaclaurinKernel, MaclaurinMap};

const PAR: Parallelism = Parallelism::Rayon;

fn random(rows: usize, cols: usize, seed: u64) -> Array2<f64> {
    let mut rng = crate::rng::seeded(seed);
    Array2::from_shape_fn((rows, cols), |_| rng.random_range(-1.5..1.5))
}

/// Three classes in three noisy bands of the first coordinate.
fn labels(x: &Array2<f64>) -> Vec<usize> {
    x.rows()
        .into_iter()
        .enumerate()
        .map(|(i, r)| {
            let band = ((r[0] + 1.5) * 1.0).floor().clamp(0.0, 2.0) as usize;
            if i % 9 == 0 {
                (band + 1) % 3
            } else {
                band
            }
        })
        .collect()
}

/// Central differences of `obj` at `theta` against its analytic gradient,
/// relative to the gradient's norm.
fn check_gradient<O: Objective>(obj: &O, theta: &[f64], what: &str) {
    let monitor = Monitor::default();
    let e = obj.evaluate(theta, &monitor).unwrap();
    // The value alone (no gradient pass) is the evaluation's, to the bit.
    let v = obj.value(theta, &monitor).unwrap();
    assert_eq!(
        v.to_bits(),
        e.value.to_bits(),
        "{what}: value {v} vs {}",
        e.value
    );
    let scale = e.grad.iter().map(|g| g * g).sum::<f64>().sqrt().max(1.0);
    let h = 1e-5;
    for i in 0..theta.len() {
        let mut tp = theta.to_vec();
        let mut tm = theta.to_vec();
        tp[i] += h;
        tm[i] -= h;
        let fd = (obj.evaluate(&tp, &monitor).unwrap().value
            - obj.evaluate(&tm, &monitor).unwrap().value)
            / (2.0 * h);
        assert!(
            (fd - e.grad[i]).abs() <= 1e-6 * scale,
            "{what}, coordinate {i}: analytic {} vs differences {fd}",
            e.grad[i]
        );
    }
}

fn all_free(l: Vec<f64>, kv: f64) -> LogParams {
    FreeHypers {
        length_scale: true,
        kernel_variance: true,
    }
    .params(l, kv)
    .unwrap()
}

#[test]
fn feature_gradients_match_central_differences() {
    let x = random(70, 3, 1);
    let y = labels(&x);
    let fourier = |variant| {
        let cfg = FourierConfig {
            n_components: 24,
            kernel: Kernel::Gaussian,
            length_scale: 1.2,
            kernel_variance: 0.9,
            sampler: Sampler::Mc,
            variant,
        };
        let map = FourierFeatures::fit(&cfg, 3, 5).unwrap();
        GpcMap::new(map.into(), vec![1.2]).unwrap()
    };
    let mut mc = MaclaurinConfig::new(MaclaurinKernel::Gaussian, 20);
    mc.length_scale = 1.4;
    let mac = MaclaurinMap::fit(x.view(), &mc, 3, PAR, &Monitor::default()).unwrap();
    let maps = [
        ("rff cos_sin", fourier(Variant::CosSin)),
        ("rff cos_bias", fourier(Variant::CosBias)),
        ("maclaurin", GpcMap::new(mac.into(), vec![1.4]).unwrap()),
    ];
    for (name, map) in &maps {
        let obj = DirichletLml::new(
            map,
            x.view(),
            &y,
            3,
            0.05,
            all_free(vec![1.0], 1.0),
            16,
            PAR,
        )
        .unwrap();
        // Away from the drawn hyperparameters, chunked (16 rows).
        check_gradient(&obj, &[0.9_f64.ln(), 1.3_f64.ln()], name);
    }
    // One length scale per dimension: a Fourier map drawn with them.
    let cfg = FourierConfig {
        n_components: 24,
        kernel: Kernel::Matern52,
        length_scale: 1.0,
        kernel_variance: 0.9,
        sampler: Sampler::Orthogonal,
        variant: Variant::CosSin,
    };
    let drawn = vec![0.8, 1.5, 1.1];
    let ard = FourierFeatures::fit_with_length_scales(&cfg, 3, &drawn, 5).unwrap();
    let map = GpcMap::new(ard.into(), drawn).unwrap();
    let obj = DirichletLml::new(
        &map,
        x.view(),
        &y,
        3,
        0.05,
        all_free(vec![1.0; 3], 1.0),
        16,
        PAR,
    )
    .unwrap();
    let theta = [0.9_f64.ln(), 1.7_f64.ln(), 0.6_f64.ln(), 1.3_f64.ln()];
    check_gradient(&obj, &theta, "rff matern52, three length scales");
    let (nys, _) = NystroemFeatures::fit(x.view(), 30, Kernel::Matern52, &[0.9], 2).unwrap();
    let map = GpcMap::new(nys.into(), vec![0.9]).unwrap();
    let mut params = all_free(vec![0.9], 1.0);
    params.free = vec![0];
    let obj = DirichletLml::new(&map, x.view(), &y, 3, 0.05, params, 16, PAR).unwrap();
    check_gradient(&obj, &[1.1_f64.ln()], "nystroem matern52, 30 landmarks");
}

#[test]
fn exact_gradients_match_central_differences() {
    let x = random(40, 2, 2);
    let y = labels(&x);
    for ls in [vec![1.0], vec![0.7, 1.6]] {
        let obj =
            ExactDirichletLml::new(x.view(), &y, 3, 0.02, all_free(ls.clone(), 1.0), PAR).unwrap();
        let mut theta: Vec<f64> = ls.iter().map(|l| l.ln()).collect();
        theta.push(0.8_f64.ln());
        check_gradient(&obj, &theta, &format!("exact, {} length scales", ls.len()));
    }
}

#[test]
fn exact_objective_equals_the_per_class_factors() {
    // Classes 0..3 from the bands, one class of a single row, one empty.
    let x = random(40, 2, 5);
    let mut y = labels(&x);
    y[7] = 3;
    let monitor = Monitor::default();
    for (ls, kv, alpha_epsilon) in [(0.9, 1.3, 0.02), (2.5, 0.4, 0.3)] {
        let obj =
            ExactDirichletLml::new(x.view(), &y, 5, alpha_epsilon, all_free(vec![ls], kv), PAR)
                .unwrap();
        let value = obj.evaluate(&[ls.ln(), kv.ln()], &monitor).unwrap().value;
        let kernel = StationaryKernel::gaussian(vec![ls], kv);
        let model = ExactGpc::fit(x.view(), &y, 5, kernel, alpha_epsilon, 1 << 30, PAR).unwrap();
        assert!(
            (value - model.lml()).abs() < 1e-10 * model.lml().abs(),
            "{value} vs {}",
            model.lml()
        );
    }
}

#[test]
fn nystroem_of_every_point_reaches_the_exact_optimum() {
    let x = random(45, 2, 3);
    let y = labels(&x);
    let (nys, _) = NystroemFeatures::fit(x.view(), 45, Kernel::Gaussian, &[1.0], 0).unwrap();
    let map = GpcMap::new(nys.into(), vec![1.0]).unwrap();
    let cfg = GpcOptimizeConfig {
        alpha_epsilon: 0.05,
        free: FreeHypers {
            length_scale: true,
            kernel_variance: false,
        },
        optimizer: OptimizerConfig {
            n_restarts: 0,
            ..OptimizerConfig::default()
        },
        chunk_rows: 64,
    };
    let monitor = Monitor::default();
    let feat = fit_dirichlet_gpc(&map, x.view(), &y, 3, &cfg, PAR, &monitor).unwrap();
    let exact = fit_exact_gpc(
        x.view(),
        &y,
        3,
        vec![1.0],
        1.0,
        &cfg,
        1 << 30,
        PAR,
        &monitor,
    )
    .unwrap();
    let le = exact.model.kernel.length_scale[0];
    assert!(
        (feat.length_scale[0] / le - 1.0).abs() < 1e-4,
        "{:?} vs {le}",
        feat.length_scale
    );
    assert!(
        (feat.model.lml() - exact.model.lml()).abs() < 1e-7 * exact.model.lml().abs(),
        "{} vs {}",
        feat.model.lml(),
        exact.model.lml()
    );
    assert!(feat.n_iter > 0 && exact.n_iter > 0);
    // The optimum is a stationary point of both objectives.
    let mut params = cfg.free.params(vec![le], 1.0).unwrap();
    params.free = vec![0];
    let obj = ExactDirichletLml::new(x.view(), &y, 3, 0.05, params, PAR).unwrap();
    let g = obj.evaluate(&[le.ln()], &monitor).unwrap().grad[0];
    assert!(g.abs() < 1e-3, "{g}");
}

#[test]
fn bad_hyperparameter_requests_are_refused() {
    let x = random(20, 2, 4);
    let y = labels(&x);
    let err = FreeHypers::from_names(&["noise_variance"])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("optimize") && err.contains("noise_variance"),
        "{err}"
    );
    let (nys, _) = NystroemFeatures::fit(x.view(), 10, Kernel::Gaussian, &[1.0], 0).unwrap();
    let map = GpcMap::new(nys.into(), vec![1.0]).unwrap();
    let err = DirichletLml::new(
        &map,
        x.view(),
        &y,
        3,
        0.05,
        all_free(vec![1.0], 1.0),
        8,
        PAR,
    )
    .err()
    .unwrap()
    .to_string();
    assert!(err.contains("kernel variance"), "{err}");
    let err = FreeHypers::default()
        .params(vec![-1.0], 1.0)
        .unwrap_err()
        .to_string();
    assert!(err.contains("length_scale"), "{err}");
}
