use ndarray::{Array1, Array2};
use rand::Rng as _;

use super::*;
use crate::gp::dirichlet::ExactGpc;
use crate::gp::sparse::kernel_matrix;
use crate::kernels::Kernel;
use crate::linalg::as_faer;

const PAR: Parallelism = Parallelism::Rayon;

fn random(rows: usize, cols: usize, seed: u64, half: f64) -> Array2<f64> {
    let mut rng = crate::rng::seeded(seed);
    Array2::from_shape_fn((rows, cols), |_| rng.random_range(-half..half))
}

/// Three classes by the sign pattern of the first input column.
fn labels_of(x: &Array2<f64>) -> Vec<usize> {
    x.rows()
        .into_iter()
        .map(|r| {
            if r[0] < -0.7 {
                0
            } else if r[0] < 0.9 {
                1
            } else {
                2
            }
        })
        .collect()
}

fn kernel(ls: &[f64], variance: f64) -> StationaryKernel {
    StationaryKernel {
        kernel: Kernel::Gaussian,
        length_scale: ls.to_vec(),
        variance,
    }
}

fn config(k: StationaryKernel, z: Array2<f64>, alpha: f64) -> SparseGpcConfig {
    SparseGpcConfig {
        kernel: k,
        n_inducing: z.nrows(),
        inducing: InducingInit::Given(z),
        alpha_epsilon: alpha,
        seed: 0,
        chunk_rows: Some(7),
    }
}

fn fit(x: &Array2<f64>, labels: &[usize], cfg: &SparseGpcConfig) -> SparseGpc {
    SparseGpc::fit(x.view(), labels, 3, cfg, PAR, &Monitor::default()).unwrap()
}

#[test]
fn inducing_at_the_data_is_the_exact_classifier() {
    // Z = X: Q_ff = K_ff, so the bound is the exact LML (trace term 0) and
    // the latents are the exact classifier's.
    let x = random(25, 2, 1, 2.0);
    let labels = labels_of(&x);
    let xs = random(9, 2, 2, 2.5);
    for (ls, variance, alpha) in [(vec![0.9], 1.0, 0.01), (vec![0.7, 1.3], 2.5, 0.1)] {
        let k = kernel(&ls, variance);
        let exact = ExactGpc::fit(x.view(), &labels, 3, k.clone(), alpha, 1 << 30, PAR).unwrap();
        let sparse = fit(&x, &labels, &config(k, x.clone(), alpha));
        assert_eq!(sparse.chol_uu.jitter(), 0.0);
        let (em, ev) = exact.predict_latent(xs.view(), true, PAR).unwrap();
        let (sm, sv) = sparse.predict_latent(xs.view(), true, PAR).unwrap();
        let (ev, sv) = (ev.unwrap(), sv.unwrap());
        for ((a, b), what) in em
            .iter()
            .zip(&sm)
            .map(|p| (p, "mean"))
            .chain(ev.iter().zip(&sv).map(|p| (p, "variance")))
        {
            assert!((a - b).abs() < 1e-8, "{what}: exact {a} vs sparse {b}");
        }
        for (e, s) in exact.classes.iter().zip(&sparse.classes) {
            assert!((e.mean - s.mean).abs() < 1e-12);
            assert!(
                (e.lml - s.bound).abs() < 1e-8 * (1.0 + e.lml.abs()),
                "{} vs {}",
                e.lml,
                s.bound
            );
        }
    }
}

/// Dense `K_uf Σ_c⁻¹ K_fu`, `K_uf Σ_c⁻¹ ỹ_c`, `ỹ_cᵀΣ_c⁻¹ỹ_c`, `Σ ln σ²`,
/// `Σ k_ii/σ²` and `Σ q_ii/σ²` of class `c` by one weighted pass over all
/// rows.
#[allow(clippy::type_complexity)]
fn weighted_pass(
    kuf: &Array2<f64>,
    q_diag: &Array1<f64>,
    labels: &[usize],
    c: usize,
    t: &LabelTransform,
    variance: f64,
) -> (Array2<f64>, Array1<f64>, f64, f64, f64, f64) {
    let m = kuf.nrows();
    let mut g = Array2::<f64>::zeros((m, m));
    let mut b = Array1::<f64>::zeros(m);
    let (mut yy, mut logs, mut kk, mut qq) = (0.0, 0.0, 0.0, 0.0);
    for (i, &k) in labels.iter().enumerate() {
        let (noise, target) = t.noise_and_target(k == c);
        let col = kuf.column(i);
        for a in 0..m {
            b[a] += col[a] * target / noise;
            for bb in 0..m {
                g[(a, bb)] += col[a] * col[bb] / noise;
            }
        }
        yy += target * target / noise;
        logs += noise.ln();
        kk += variance / noise;
        qq += q_diag[i] / noise;
    }
    (g, b, yy, logs, kk, qq)
}

#[test]
fn one_pass_statistics_equal_separately_weighted_passes() {
    let x = random(60, 3, 3, 2.0);
    let labels = labels_of(&x);
    let z = random(8, 3, 4, 2.0);
    let k = kernel(&[1.1], 1.7);
    let prior = InducingPrior::new(k.clone(), 1.0, z.view(), PAR).unwrap();
    // In chunks of 7 rows and in one piece, merged from two halves.
    let mut chunked = SparseClassStats::new(3, 8);
    let mut scratch = Vec::new();
    for start in (0..60).step_by(7) {
        let stop = (start + 7).min(60);
        chunked
            .accumulate(
                &prior,
                x.slice(s![start..stop, ..]),
                &labels[start..stop],
                &mut scratch,
                PAR,
            )
            .unwrap();
    }
    let mut halves = SparseClassStats::new(3, 8);
    let mut other = SparseClassStats::new(3, 8);
    halves
        .accumulate(
            &prior,
            x.slice(s![..30, ..]),
            &labels[..30],
            &mut scratch,
            PAR,
        )
        .unwrap();
    other
        .accumulate(
            &prior,
            x.slice(s![30.., ..]),
            &labels[30..],
            &mut scratch,
            PAR,
        )
        .unwrap();
    halves.merge(&other).unwrap();
    let kuf = kernel_matrix(&k, z.view(), x.view(), PAR);
    let kuu_inv = prior.chol().inverse(PAR);
    let q_diag = Array1::from_iter(kuf.columns().into_iter().map(|c| c.dot(&kuu_inv.dot(&c))));
    let t = LabelTransform::new(0.03).unwrap();
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-10 * (1.0 + b.abs());
    for stats in [&chunked, &halves] {
        assert_eq!(stats.n(), 60);
        for c in 0..3 {
            let w = stats.class_stats(c, &t);
            let (g, b, yy, logs, kk, qq) = weighted_pass(&kuf, &q_diag, &labels, c, &t, 1.7);
            let gs = w.gram_symmetric();
            assert!(gs.iter().zip(&g).all(|(&a, &b)| close(a, b)), "gram {c}");
            assert!(w.k_y.iter().zip(&b).all(|(&a, &b)| close(a, b)), "k_y {c}");
            assert!(close(w.wyy_sum, yy) && close(w.log_lambda_sum, logs));
            assert!(close(w.kff_sum, kk));
            // Σ q_ii/σ²_ic from the per-class traces.
            let tr = sandwich(prior.chol(), &gs, true, PAR).diag().sum();
            assert!(close(tr, qq), "{tr} vs {qq}");
        }
    }
}

/// The VFE bound of class `c` by its dense definition
/// `ln N(r | 0, Q + Σ) − ½ tr(Σ⁻¹(K − Q))`.
fn dense_bound(
    x: &Array2<f64>,
    labels: &[usize],
    z: &Array2<f64>,
    k: &StationaryKernel,
    t: &LabelTransform,
    c: usize,
) -> f64 {
    let n = x.nrows();
    let kuf = kernel_matrix(k, z.view(), x.view(), PAR);
    let kuu = kernel_matrix(k, z.view(), z.view(), PAR);
    let l = Cholesky::new(as_faer(kuu.view()), PAR).unwrap();
    let mut q = Array2::<f64>::zeros((n, n));
    for i in 0..n {
        let a = Array1::from(l.solve_vec(kuf.column(i), PAR));
        for j in 0..n {
            q[(i, j)] = kuf.column(j).dot(&a);
        }
    }
    bound_of_q(q, labels, k.variance, t, c)
}

/// `ln N(r | 0, Q + Σ) − ½ tr(Σ⁻¹(K − Q))` of class `c` for the Nyström
/// matrix `Q` (`k_ii = variance`).
fn bound_of_q(
    q: Array2<f64>,
    labels: &[usize],
    variance: f64,
    t: &LabelTransform,
    c: usize,
) -> f64 {
    let n = labels.len();
    let n_in = labels.iter().filter(|&&k| k == c).count();
    let mean = t.prior_mean(n_in as u64, n as u64);
    let mut cov = q.clone();
    let mut r = Array1::<f64>::zeros(n);
    let mut trace = 0.0;
    for (i, &k) in labels.iter().enumerate() {
        let (noise, target) = t.noise_and_target(k == c);
        cov[(i, i)] += noise;
        r[i] = target - mean;
        trace += (variance - q[(i, i)]) / noise;
    }
    let lc = Cholesky::new(as_faer(cov.view()), PAR).unwrap();
    let alpha = Array1::from(lc.solve_vec(r.view(), PAR));
    -0.5 * (r.dot(&alpha) + lc.log_det() + n as f64 * crate::gp::dirichlet::LN_2PI) - 0.5 * trace
}

#[test]
fn the_bound_is_its_dense_definition_and_below_the_exact_lml() {
    let x = random(40, 2, 5, 2.0);
    let labels = labels_of(&x);
    let k = kernel(&[0.8], 1.7);
    for (seed, m) in [(6, 3), (7, 10), (8, 20)] {
        let z = random(m, 2, seed, 2.0);
        let t = LabelTransform::new(0.01).unwrap();
        let sparse = fit(&x, &labels, &config(k.clone(), z.clone(), 0.01));
        let exact = ExactGpc::fit(x.view(), &labels, 3, k.clone(), 0.01, 1 << 30, PAR).unwrap();
        for c in 0..3 {
            let f = sparse.classes[c].bound;
            let dense = dense_bound(&x, &labels, &z, &k, &t, c);
            assert!(
                (f - dense).abs() < 1e-8 * (1.0 + dense.abs()),
                "M = {m}, class {c}: {f} vs dense {dense}"
            );
            assert!(
                f <= exact.classes[c].lml + 1e-9,
                "M = {m}, class {c}: bound {f} > LML {}",
                exact.classes[c].lml
            );
        }
        assert!(sparse.bound() <= exact.lml());
    }
}

#[test]
fn selected_inducing_inputs_and_the_default_chunks_fit() {
    let x = random(300, 2, 9, 2.0);
    let labels = labels_of(&x);
    for init in [
        InducingInit::GreedyVariance,
        InducingInit::KMeans,
        InducingInit::Random,
    ] {
        let cfg = SparseGpcConfig {
            kernel: kernel(&[0.8], 1.0),
            n_inducing: 20,
            inducing: init.clone(),
            alpha_epsilon: 0.01,
            seed: 3,
            chunk_rows: None,
        };
        let gp = fit(&x, &labels, &cfg);
        assert_eq!(gp.inducing.nrows(), 20, "{init:?}");
        gp.validate().unwrap();
        // The rows are classified by their latent means.
        let (mean, var) = gp.predict_latent(x.view(), true, PAR).unwrap();
        let correct = mean
            .rows()
            .into_iter()
            .zip(&labels)
            .filter(|(r, k)| {
                let best = (0..3).max_by(|&a, &b| r[a].total_cmp(&r[b])).unwrap();
                best == **k
            })
            .count();
        assert!(correct >= 285, "{init:?}: {correct} of 300");
        assert!(var.unwrap().iter().all(|&v| (0.0..=1.0).contains(&v)));
    }
}

#[test]
fn bad_input_is_refused_with_the_argument_named() {
    let x = random(30, 2, 10, 2.0);
    let labels = labels_of(&x);
    let cfg = SparseGpcConfig {
        kernel: kernel(&[1.0], 1.0),
        n_inducing: 5,
        inducing: InducingInit::Random,
        alpha_epsilon: 0.01,
        seed: 0,
        chunk_rows: None,
    };
    let run = |x: &Array2<f64>, labels: &[usize], n_classes: usize, cfg: &SparseGpcConfig| {
        SparseGpc::fit(x.view(), labels, n_classes, cfg, PAR, &Monitor::default())
            .unwrap_err()
            .to_string()
    };
    assert!(run(&x, &labels, 1, &cfg).contains("at least 2 classes"));
    assert!(run(&x, &labels[..29], 3, &cfg).contains("length of y"));
    let mut xn = x.clone();
    xn[(4, 1)] = f64::NAN;
    assert!(run(&xn, &labels, 3, &cfg).contains('X'));
    for alpha in [0.0, -1.0, f64::NAN] {
        let bad = SparseGpcConfig {
            alpha_epsilon: alpha,
            ..cfg.clone()
        };
        assert!(run(&x, &labels, 3, &bad).contains("alpha_epsilon"));
    }
    let none = SparseGpcConfig {
        n_inducing: 0,
        ..cfg.clone()
    };
    assert!(run(&x, &labels, 3, &none).contains("n_inducing"));
    let mut wrong = labels.clone();
    wrong[0] = 3;
    assert!(run(&x, &wrong, 3, &cfg).contains("out of range"));
    let monitor = Monitor::default();
    monitor.cancel();
    assert_eq!(
        SparseGpc::fit(x.view(), &labels, 3, &cfg, PAR, &monitor).unwrap_err(),
        Error::Interrupted
    );
}

/// [`dense_bound`] from the whitened columns `A = L⁻¹K_uf` of the factor
/// `L` of `K_uu + εI` (`Q = AᵀA`, accurate whatever `K_uu`'s conditioning:
/// the form GPflow computes).
fn dense_whitened_bound(
    x: &Array2<f64>,
    labels: &[usize],
    z: &Array2<f64>,
    k: &StationaryKernel,
    jitter: f64,
    t: &LabelTransform,
    c: usize,
) -> f64 {
    let mut a = kernel_matrix(k, z.view(), x.view(), PAR);
    let kuu = kernel_matrix(k, z.view(), z.view(), PAR);
    let l = Cholesky::with_jitter(as_faer(kuu.view()), jitter, PAR).unwrap();
    l.solve_lower_in_place(crate::linalg::as_faer_mut(a.view_mut()), PAR);
    bound_of_q(a.t().dot(&a), labels, k.variance, t, c)
}

#[test]
fn ill_conditioned_inducing_inputs_give_the_true_bound() {
    // Twelve inducing inputs close together on a line under a long length
    // scale and a large kernel variance: K_uu's condition number is far
    // past what kernel-space sums K_uf Σ⁻¹ K_fu can carry through L⁻¹.
    let x = random(300, 2, 21, 2.0);
    let labels = labels_of(&x);
    let z = Array2::from_shape_fn((12, 2), |(i, j)| {
        let s = -1.0 + 2.0 * i as f64 / 11.0;
        if j == 0 {
            s
        } else {
            0.3 * s
        }
    });
    let k = kernel(&[2.5], 40.0);
    let t = LabelTransform::new(0.01).unwrap();
    let prior = InducingPrior::new(k.clone(), t.noise_in, z.view(), PAR).unwrap();
    assert!(prior.whiten(), "the case must need whitened statistics");
    let sparse = fit(&x, &labels, &config(k.clone(), z.clone(), 0.01));
    for c in 0..3 {
        let f = sparse.classes[c].bound;
        let dense = dense_whitened_bound(&x, &labels, &z, &k, prior.jitter(), &t, c);
        assert!(
            (f - dense).abs() < 1e-8 * x.nrows() as f64,
            "class {c}: {f} vs dense whitened {dense}"
        );
    }
}
