use ndarray::Array2;
use rand::Rng as _;

use super::*;
use crate::gp::sparse::InducingInit;

const PAR: Parallelism = Parallelism::Rayon;

fn data(n: usize, seed: u64) -> (Array2<f64>, Vec<usize>) {
    let mut rng = crate::rng::seeded(seed);
    let x = Array2::from_shape_fn((n, 2), |_| rng.random_range(-2.0..2.0));
    let labels = x
        .rows()
        .into_iter()
        .map(|r| {
            let v = (2.0_f64 * r[0]).sin() + r[1];
            if v < -0.5 {
                0
            } else if v < 0.7 {
                1
            } else {
                2
            }
        })
        .collect();
    (x, labels)
}

fn objective<'a>(
    x: &'a Array2<f64>,
    labels: &'a [usize],
    z: Array2<f64>,
    ls: Vec<f64>,
    kernel: Kernel,
) -> SparseGpcBound<'a> {
    SparseGpcBound {
        x: x.view().into(),
        labels: Cow::Borrowed(labels),
        n_classes: 3,
        kernel,
        params: FreeHypers {
            length_scale: true,
            kernel_variance: true,
        }
        .params(ls, 1.3)
        .unwrap(),
        z,
        alpha_epsilon: 0.03,
        chunk_rows: 11,
        par: PAR,
    }
}

/// Asserts that the gradient of `obj` at its start equals central
/// differences of step `h` to 1e-5 relative.
fn assert_central_differences(obj: &SparseGpcBound<'_>, h: f64, case: &str) {
    let theta = obj.params.start();
    let e = obj.evaluate(&theta, &Monitor::default()).unwrap();
    // The bound alone (no gradient pass) is the evaluation's, to the bit.
    let v = obj.value(&theta, &Monitor::default()).unwrap();
    assert_eq!(v.to_bits(), e.value.to_bits(), "{case}");
    for i in 0..theta.len() {
        let at = |d: f64| {
            let mut t = theta.clone();
            t[i] += d;
            obj.evaluate(&t, &Monitor::default()).unwrap().value
        };
        let fd = (at(h) - at(-h)) / (2.0 * h);
        assert!(
            (e.grad[i] - fd).abs() < 1e-5 * (1.0 + fd.abs()),
            "{case} coordinate {i}: analytic {} vs central difference {fd}",
            e.grad[i]
        );
    }
}

#[test]
fn the_gradient_of_the_summed_bound_matches_central_differences() {
    let (x, labels) = data(70, 1);
    let z = x.select(Axis(0), &[0, 5, 9, 17, 23, 31, 40, 52]);
    for (ls, kernel) in [
        (vec![0.8], Kernel::Gaussian),
        (vec![0.7, 1.2], Kernel::Gaussian),
        (vec![0.9], Kernel::Matern52),
    ] {
        let obj = objective(&x, &labels, z.clone(), ls.clone(), kernel);
        assert_central_differences(&obj, 1e-5, &format!("{kernel:?} {ls:?}"));
    }
}

/// A Gaussian-kernel classifier of length scale `l` and kernel variance 1
/// on `m` inducing inputs chosen by k-means.
fn kmeans_config(l: f64, m: usize, chunk_rows: Option<usize>) -> SparseGpcConfig {
    SparseGpcConfig {
        kernel: StationaryKernel {
            kernel: Kernel::Gaussian,
            length_scale: vec![l],
            variance: 1.0,
        },
        n_inducing: m,
        inducing: InducingInit::KMeans,
        alpha_epsilon: 0.01,
        seed: 4,
        chunk_rows,
    }
}

/// The optimizer with one restart.
fn one_restart() -> OptimizerConfig {
    OptimizerConfig {
        n_restarts: 1,
        seed: 3,
        ..Default::default()
    }
}

#[test]
fn the_fit_raises_the_bound_to_a_stationary_point() {
    let (x, labels) = data(200, 2);
    let cfg = kmeans_config(3.0, 15, None);
    let optimizer = one_restart();
    let run = |free| {
        fit_sparse_gpc(
            x.view(),
            &labels,
            3,
            &cfg,
            free,
            &optimizer,
            PAR,
            &Monitor::default(),
        )
        .unwrap()
    };
    let (start, n0) = run(FreeHypers::default());
    assert_eq!(n0, 0);
    let both = FreeHypers {
        length_scale: true,
        kernel_variance: true,
    };
    let (fitted, n_iter) = run(both);
    assert!(n_iter > 0);
    assert_eq!(
        fitted.inducing, start.inducing,
        "Z chosen once, at the start"
    );
    assert!(
        fitted.bound() > start.bound() + 1.0,
        "{} vs start {}",
        fitted.bound(),
        start.bound()
    );
    // The gradient there vanishes (to the optimizer's tolerance on the
    // gradient of bound / N).
    let obj = objective(
        &x,
        &labels,
        fitted.inducing.clone(),
        fitted.params.length_scale.clone(),
        Kernel::Gaussian,
    );
    let obj = SparseGpcBound {
        params: both
            .params(fitted.params.length_scale.clone(), fitted.params.variance)
            .unwrap(),
        alpha_epsilon: 0.01,
        chunk_rows: default_chunk(&fitted),
        ..obj
    };
    let e = obj
        .evaluate(&obj.params.start(), &Monitor::default())
        .unwrap();
    assert!((e.value - fitted.bound()).abs() < 1e-9 * fitted.bound().abs());
    let norm = e.grad.iter().map(|g| g * g).sum::<f64>().sqrt() / x.nrows() as f64;
    assert!(norm < 1e-4, "gradient norm / N = {norm}");
    // Only the length scale: the kernel variance stays.
    let (ls_only, _) = run(FreeHypers {
        length_scale: true,
        kernel_variance: false,
    });
    assert_eq!(ls_only.params.variance, 1.0);
    assert!(ls_only.bound() > start.bound());
}

fn default_chunk(gpc: &SparseGpc) -> usize {
    crate::gp::sparse::default_chunk_rows(gpc.inducing.nrows())
}

#[test]
fn the_gradient_on_an_ill_conditioned_k_uu_matches_central_differences() {
    // Twelve inducing inputs close together on a line, a long length scale
    // and a large kernel variance (as the sparse classifier's test of the
    // bound there): the statistics are whitened.
    let (x, labels) = data(300, 4);
    let z = Array2::from_shape_fn((12, 2), |(i, j)| {
        let s = -1.0 + 2.0 * i as f64 / 11.0;
        if j == 0 {
            s
        } else {
            0.3 * s
        }
    });
    let mut obj = objective(&x, &labels, z, vec![2.5], Kernel::Gaussian);
    obj.params = FreeHypers {
        length_scale: true,
        kernel_variance: true,
    }
    .params(vec![2.5], 40.0)
    .unwrap();
    assert!(obj.prior(&obj.params.start()).unwrap().whiten());
    assert_central_differences(&obj, 1e-4, "ill-conditioned");
}

/// Asserts that the gradient of `obj` at its start equals Richardson-combined
/// central differences of step `h` within their own error: 1e−6 relative
/// plus 4 times the value's rounding (the largest change of the bound under
/// moves of `Z` by 1e−12) over `h`.
fn assert_richardson_differences(obj: &SparseGpcBound<'_>, h: f64, case: &str) {
    let theta = obj.params.start();
    let e = obj.evaluate(&theta, &Monitor::default()).unwrap();
    let f0 = e.value;
    let delta = (1..=8)
        .map(|k| {
            let mut zk = obj.z.clone();
            zk[(0, 0)] += k as f64 * 1e-12;
            let moved = SparseGpcBound {
                z: zk,
                x: obj.x.view().into(),
                labels: Cow::Borrowed(&obj.labels),
                params: obj.params.clone(),
                ..*obj
            };
            (moved.value(&theta, &Monitor::default()).unwrap() - f0).abs()
        })
        .fold(0.0, f64::max);
    for i in 0..theta.len() {
        let at = |d: f64| {
            let mut t = theta.clone();
            t[i] += d;
            obj.value(&t, &Monitor::default()).unwrap()
        };
        let d = |step: f64| (at(step) - at(-step)) / (2.0 * step);
        let fd = (4.0 * d(h / 2.0) - d(h)) / 3.0;
        let tol = 1e-6 * (1.0 + fd.abs()) + 4.0 * delta / h;
        assert!(
            (e.grad[i] - fd).abs() < tol,
            "{case} coordinate {i}: analytic {} vs differences {fd} (tolerance {tol})",
            e.grad[i]
        );
    }
}

/// 40 of 1,500 rows as inducing inputs, with length scales and kernel
/// variances up to `l = 6`, `σ² = 1e3` (whitened statistics, three of them
/// with a jitter), two length scales, and the Matérn kernels: the gradient
/// matches the differences within their error. Formed from kernel-space
/// matrices of order `κ(K_uu)/σ²` that cancel to order 1 (`K_uu⁻¹ − Σ⁻¹`, `K_uu⁻¹SK_uu⁻¹`, `ααᵀ`), and with
/// the second pass multiplying the kernel columns, the slope in `ln l` at
/// the first point was off by 1.3 (of −1,820; the tolerance there is 0.29).
#[test]
fn the_gradient_is_accurate_where_k_uu_is_very_ill_conditioned() {
    let (x, labels) = data(1500, 8);
    let rows: Vec<usize> = (0..40).map(|i| 37 * i).collect();
    let z = x.select(Axis(0), &rows);
    for (ls, variance, kernel) in [
        (vec![2.5], 40.0, Kernel::Gaussian),
        (vec![4.5], 100.0, Kernel::Gaussian),
        (vec![6.0], 1e3, Kernel::Gaussian),
        (vec![3.0, 5.0], 100.0, Kernel::Gaussian),
        (vec![8.0], 100.0, Kernel::Matern52),
        (vec![20.0], 1e3, Kernel::Matern32),
    ] {
        let mut obj = objective(&x, &labels, z.clone(), ls.clone(), kernel);
        obj.chunk_rows = 256;
        obj.params = FreeHypers {
            length_scale: true,
            kernel_variance: true,
        }
        .params(ls.clone(), variance)
        .unwrap();
        assert!(obj.prior(&obj.params.start()).unwrap().whiten());
        assert_richardson_differences(
            &obj,
            1e-3,
            &format!("{kernel:?} l = {ls:?}, σ² = {variance}"),
        );
    }
}

#[test]
fn the_fit_reports_its_runs_and_names_its_bound() {
    // Given length scale 1 and the data's scale: two starts to compare.
    let (x, labels) = data(300, 5);
    let cfg = kmeans_config(1.0, 10, Some(64));
    let optimizer = one_restart();
    let monitor = Monitor::default();
    let free = FreeHypers {
        length_scale: true,
        kernel_variance: false,
    };
    fit_sparse_gpc(x.view(), &labels, 3, &cfg, free, &optimizer, PAR, &monitor).unwrap();
    // The stage is the optimizer's runs, all done: an evaluation's pass
    // over the rows is not a stage of its own.
    assert_eq!(
        monitor.snapshot(),
        ("optimizer runs".to_string(), 2, 2),
        "{:?}",
        monitor.take_messages()
    );
    let messages = monitor.take_messages();
    let starts: Vec<&String> = messages
        .iter()
        .filter(|m| m.starts_with("start "))
        .collect();
    assert_eq!(starts.len(), 2, "{messages:?}");
    assert!(
        starts.iter().all(|m| m.contains(": bound = ")),
        "{messages:?}"
    );
}
