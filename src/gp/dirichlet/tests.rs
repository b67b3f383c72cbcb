use ndarray::{array, Array1, Array2};
use rand::Rng as _;
use rand_distr::{Distribution, StandardNormal};

use super::*;
use crate::kernels::Kernel;
use crate::kernels::StationaryKernel;
use crate::nystroem::NystroemFeatures;

const PAR: Parallelism = Parallelism::Rayon;
const MEMORY: u64 = 1 << 30;

fn random(rows: usize, cols: usize, seed: u64) -> Array2<f64> {
    let mut rng = crate::rng::seeded(seed);
    Array2::from_shape_fn((rows, cols), |_| rng.random_range(-1.0..1.0))
}

fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol
}

#[test]
fn label_transform_matches_the_oracle() {
    let t = LabelTransform::new(0.01).unwrap();
    assert!(close(t.noise_in, 0.688184391218, 1e-11), "{}", t.noise_in);
    assert!(close(t.noise_out, 4.615120516841, 1e-11), "{}", t.noise_out);
    assert!(
        close(t.target_in, -0.334141864756, 1e-11),
        "{}",
        t.target_in
    );
    assert!(
        close(t.target_out, -6.912730444409, 1e-11),
        "{}",
        t.target_out
    );
    assert_eq!(t.noise_and_target(true), (t.noise_in, t.target_in));
    assert_eq!(t.noise_and_target(false), (t.noise_out, t.target_out));
    for bad in [0.0, -0.1, f64::NAN, f64::INFINITY] {
        let err = LabelTransform::new(bad).unwrap_err().to_string();
        assert!(err.contains("alpha_epsilon"), "{err}");
    }
}

/// `ΦᵀΣ_c⁻¹Φ + I` and `ΦᵀΣ_c⁻¹(ỹ_c − m_c)` of class `c` by one weighted
/// pass over all rows.
fn weighted_pass(
    phi: &Array2<f64>,
    labels: &[usize],
    c: usize,
    t: &LabelTransform,
) -> (Array2<f64>, Array1<f64>) {
    let (n, d) = phi.dim();
    let n_in = labels.iter().filter(|&&k| k == c).count();
    let mean = t.prior_mean(n_in as u64, n as u64);
    let mut a = Array2::<f64>::eye(d);
    let mut b = Array1::<f64>::zeros(d);
    for (row, &k) in phi.rows().into_iter().zip(labels) {
        let (noise, target) = t.noise_and_target(k == c);
        for i in 0..d {
            b[i] += row[i] * (target - mean) / noise;
            for j in 0..d {
                a[(i, j)] += row[i] * row[j] / noise;
            }
        }
    }
    (a, b)
}

#[test]
fn one_pass_grams_equal_separate_weighted_passes() {
    let (n, d, c) = (157, 9, 4);
    let phi = random(n, d, 1);
    let mut rng = crate::rng::seeded(2);
    let labels: Vec<usize> = (0..n).map(|_| rng.random_range(0..c)).collect();
    // Accumulated in uneven chunks, half of them merged from a second set.
    let mut stats = ClassStats::new(c, d);
    let mut other = ClassStats::new(c, d);
    for (k, (lo, hi)) in [(0, 40), (40, 41), (41, 100), (100, n)]
        .into_iter()
        .enumerate()
    {
        let target = if k % 2 == 0 { &mut stats } else { &mut other };
        target
            .accumulate(phi.slice(s![lo..hi, ..]), &labels[lo..hi], PAR)
            .unwrap();
    }
    stats.merge(&other).unwrap();
    assert_eq!(stats.n(), n as u64);
    let model = DirichletGpc::fit(&stats, 0.01, PAR).unwrap();
    for (class, gp) in model.classes.iter().enumerate() {
        let (a, b) = weighted_pass(&phi, &labels, class, &model.transform);
        let l = gp.chol.l_array();
        let llt = l.dot(&l.t());
        let scale = a.iter().fold(0.0_f64, |m, v| m.max(v.abs()));
        assert!(
            (&llt - &a).iter().all(|v| v.abs() < 1e-12 * scale),
            "class {class}"
        );
        let ab = a.dot(&gp.coef);
        assert!((&ab - &b)
            .iter()
            .all(|v| v.abs() < 1e-10 * (1.0 + b.iter().fold(0.0_f64, |m, x| m.max(x.abs())))));
    }
    // f32 features: the same statistics up to the input rounding.
    let mut s32 = ClassStats::new(c, d);
    s32.accumulate(phi.mapv(|v| v as f32).view(), &labels, PAR)
        .unwrap();
    assert_eq!(s32.n(), stats.n());
}

#[test]
fn exact_classifier_matches_the_oracle() {
    let x = array![[0.0], [1.0], [2.0], [3.0]];
    let kernel = StationaryKernel {
        kernel: crate::kernels::Kernel::Gaussian,
        length_scale: vec![1.0],
        variance: 1.0,
    };
    let gpc = ExactGpc::fit(x.view(), &[0, 0, 1, 1], 2, kernel, 0.01, MEMORY, PAR).unwrap();
    for c in &gpc.classes {
        assert!(close(c.mean, -3.623436154582, 1e-11), "{}", c.mean);
    }
    let (mu, var) = gpc
        .predict_latent(array![[0.2], [1.5]].view(), true, PAR)
        .unwrap();
    let var = var.unwrap();
    let want_mu = [[-1.149555040, -4.330470630], [-2.457512550, -2.457512550]];
    let want_var = [[0.335595240, 0.751448530], [0.472347780, 0.472347780]];
    for i in 0..2 {
        for c in 0..2 {
            assert!(
                close(mu[(i, c)], want_mu[i][c], 1e-8),
                "{i} {c}: {}",
                mu[(i, c)]
            );
            assert!(
                close(var[(i, c)], want_var[i][c], 1e-8),
                "{i} {c}: {}",
                var[(i, c)]
            );
        }
    }
    let p = expected_softmax(mu.view(), var.view(), PAR).unwrap();
    // The oracle's Monte Carlo estimate has a standard error below 2e-4.
    assert!(close(p[(0, 0)], 0.939, 1e-3), "{}", p[(0, 0)]);
    assert!(close(p[(1, 0)], 0.5, 1e-14) && close(p[(1, 1)], 0.5, 1e-14));
}

#[test]
fn classes_sharing_the_cross_covariance_predict_as_each_class_alone() {
    // Three classes over more test points than one prediction block: each
    // class's column equals its own exact GP's prediction, to the bit.
    let x = random(60, 2, 3);
    let labels: Vec<usize> = (0..60).map(|i| (i * 7) % 3).collect();
    let kernel = StationaryKernel {
        kernel: Kernel::Matern52,
        length_scale: vec![0.7, 1.3],
        variance: 1.5,
    };
    let gpc = ExactGpc::fit(x.view(), &labels, 3, kernel.clone(), 0.05, MEMORY, PAR).unwrap();
    let xs = random(1100, 2, 4);
    let (mu, var) = gpc.predict_latent(xs.view(), true, PAR).unwrap();
    let var = var.unwrap();
    for (c, class) in gpc.classes.iter().enumerate() {
        let (m1, v1) = crate::gp::exact::predict_exact(
            x.view(),
            &class.chol,
            class.coef.view(),
            class.mean,
            &kernel,
            xs.view(),
            true,
            PAR,
        )
        .unwrap();
        assert_eq!(mu.column(c), m1, "class {c}: means");
        assert_eq!(var.column(c), v1.unwrap(), "class {c}: variances");
    }
    let (mu_only, none) = gpc.predict_latent(xs.view(), false, PAR).unwrap();
    assert!(none.is_none());
    assert_eq!(mu_only, mu);
}

#[test]
fn nystroem_features_of_every_point_reproduce_the_exact_classifier() {
    let (n, d) = (15, 2);
    let x = random(n, d, 3).mapv(|v| 2.0 * v);
    let labels: Vec<usize> = (0..n).map(|i| i % 3).collect();
    let xs = random(25, d, 4).mapv(|v| 2.5 * v);
    // Landmarks at every training and test point: the Nyström kernel equals
    // the exact one on all of them (only there).
    let l = 0.8;
    let all = ndarray::concatenate(Axis(0), &[x.view(), xs.view()]).unwrap();
    let (map, _) =
        NystroemFeatures::fit(all.view(), all.nrows(), Kernel::Gaussian, &[l], 0).unwrap();
    let kernel = StationaryKernel {
        kernel: crate::kernels::Kernel::Gaussian,
        length_scale: vec![l],
        variance: 1.0,
    };
    let exact = ExactGpc::fit(x.view(), &labels, 3, kernel, 0.05, MEMORY, PAR).unwrap();
    let feat = DirichletGpc::fit_map(
        &map,
        x.view(),
        &labels,
        3,
        0.05,
        Device::Cpu,
        4,
        PAR,
        &Monitor::default(),
    )
    .unwrap();
    let (me, ve) = exact.predict_latent(xs.view(), true, PAR).unwrap();
    let (mf, vf) = feat
        .predict_latent_map(
            &map,
            xs.view(),
            true,
            Device::Cpu,
            7,
            PAR,
            &Monitor::default(),
        )
        .unwrap();
    assert!((&me - &mf).iter().all(|v| v.abs() < 1e-8), "means");
    assert!(
        (&ve.unwrap() - &vf.unwrap()).iter().all(|v| v.abs() < 1e-8),
        "variances"
    );
    assert!(
        close(exact.lml(), feat.lml(), 1e-8 * exact.lml().abs()),
        "{} {}",
        exact.lml(),
        feat.lml()
    );
    for (a, b) in exact.classes.iter().zip(&feat.classes) {
        assert!(close(a.lml, b.lml, 1e-8 * a.lml.abs()));
        assert_eq!(a.mean, b.mean);
    }
}

/// `E[softmax(f)]` by `samples` draws of `f` (seeded).
fn monte_carlo(mu: &[f64], var: &[f64], samples: usize, seed: u64) -> Vec<f64> {
    let mut rng = crate::rng::seeded(seed);
    let c = mu.len();
    let sd: Vec<f64> = var.iter().map(|v| v.sqrt()).collect();
    let mut acc = vec![0.0; c];
    let mut f = vec![0.0; c];
    for _ in 0..samples {
        for j in 0..c {
            let z: f64 = StandardNormal.sample(&mut rng);
            f[j] = mu[j] + sd[j] * z;
        }
        let top = f.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v));
        let total: f64 = f.iter().map(|v| (v - top).exp()).sum();
        for j in 0..c {
            acc[j] += (f[j] - top).exp() / total;
        }
    }
    acc.iter().map(|a| a / samples as f64).collect()
}

#[test]
fn expected_softmax_matches_monte_carlo() {
    // Latents as a Dirichlet GP produces them (means between the two
    // targets, variances up to a few times the prior's), plus extremes.
    let mut rng = crate::rng::seeded(5);
    let mut rows: Vec<(Vec<f64>, Vec<f64>)> = Vec::new();
    for &c in &[2usize, 3, 5, 10] {
        for _ in 0..3 {
            let mu = (0..c).map(|_| rng.random_range(-7.0..0.0)).collect();
            let var = (0..c).map(|_| rng.random_range(0.0..9.0)).collect();
            rows.push((mu, var));
        }
    }
    rows.push((vec![-0.3, -6.9, -6.9], vec![0.01, 0.01, 0.01]));
    rows.push((vec![-3.0, -3.0], vec![16.0, 0.0]));
    rows.push((vec![1.0, 0.0, -1.0, 2.0], vec![0.0, 0.0, 0.0, 0.0]));
    let (mut sum_diff, mut max_diff, mut count) = (0.0_f64, 0.0_f64, 0);
    for (k, (mu, var)) in rows.iter().enumerate() {
        let m = Array2::from_shape_vec((1, mu.len()), mu.clone()).unwrap();
        let v = Array2::from_shape_vec((1, mu.len()), var.clone()).unwrap();
        let p = expected_softmax(m.view(), v.view(), PAR).unwrap();
        let sum: f64 = p.iter().sum();
        assert!(close(sum, 1.0, 1e-14), "row {k}: {sum}");
        let mc = monte_carlo(mu, var, 1_000_000, k as u64);
        for (a, b) in p.iter().zip(&mc) {
            let diff = (a - b).abs();
            sum_diff += diff;
            max_diff = max_diff.max(diff);
            count += 1;
        }
    }
    let mean_diff = sum_diff / count as f64;
    assert!(mean_diff <= 1e-3, "mean abs diff {mean_diff}");
    assert!(max_diff <= 5e-3, "max abs diff {max_diff}");
}

#[test]
fn expected_softmax_is_exact_without_variance_and_symmetric() {
    let mu = array![[1.0, 0.0, -1.0, 2.0], [0.5, 0.5, 0.5, 0.5]];
    let p = expected_softmax(mu.view(), Array2::zeros((2, 4)).view(), PAR).unwrap();
    for (i, row) in mu.rows().into_iter().enumerate() {
        let total: f64 = row.iter().map(|v| v.exp()).sum();
        for (j, v) in row.iter().enumerate() {
            assert!(close(p[(i, j)], v.exp() / total, 1e-7), "{i} {j}");
        }
    }
    // Permuting the classes permutes the probabilities; threads change nothing.
    let mu = array![[-1.0, -4.0, -2.0]];
    let var = array![[0.3, 2.0, 5.0]];
    let p = expected_softmax(mu.view(), var.view(), PAR).unwrap();
    let perm = [2, 0, 1];
    let mu_p = Array2::from_shape_fn((1, 3), |(_, j)| mu[(0, perm[j])]);
    let var_p = Array2::from_shape_fn((1, 3), |(_, j)| var[(0, perm[j])]);
    let pp = expected_softmax(mu_p.view(), var_p.view(), Parallelism::Sequential).unwrap();
    for j in 0..3 {
        assert!(close(pp[(0, j)], p[(0, perm[j])], 1e-14));
    }
    let seq = expected_softmax(mu.view(), var.view(), Parallelism::Sequential).unwrap();
    assert_eq!(seq, p);
}

#[test]
fn bad_inputs_are_refused() {
    let x = random(6, 2, 7);
    let kernel = StationaryKernel {
        kernel: crate::kernels::Kernel::Gaussian,
        length_scale: vec![1.0],
        variance: 1.0,
    };
    let labels = [0, 1, 0, 1, 0, 1];
    let fit = |labels: &[usize], c: usize, eps: f64| {
        ExactGpc::fit(x.view(), labels, c, kernel.clone(), eps, MEMORY, PAR)
    };
    assert!(fit(&labels, 2, 0.0)
        .unwrap_err()
        .to_string()
        .contains("alpha_epsilon"));
    assert!(fit(&[0; 6], 1, 0.01)
        .unwrap_err()
        .to_string()
        .contains("at least 2 classes"));
    assert!(fit(&[0, 1, 2, 0, 1, 0], 2, 0.01)
        .unwrap_err()
        .to_string()
        .contains("out of range"));
    assert!(matches!(
        fit(&labels[..5], 2, 0.01),
        Err(Error::ShapeMismatch { .. })
    ));
    assert!(
        ExactGpc::fit(x.view(), &labels, 2, kernel.clone(), 0.01, 100, PAR)
            .unwrap_err()
            .to_string()
            .contains("RandomFeatureGPC")
    );
    let mut xnan = x.clone();
    xnan[(2, 1)] = f64::NAN;
    assert!(ExactGpc::fit(xnan.view(), &labels, 2, kernel, 0.01, MEMORY, PAR).is_err());
    let mut stats = ClassStats::new(2, 2);
    assert!(matches!(
        stats.accumulate(x.view(), &labels[..4], PAR),
        Err(Error::ShapeMismatch { .. })
    ));
    assert!(stats
        .accumulate(x.view(), &[0, 1, 0, 1, 0, 2], PAR)
        .is_err());
    assert!(DirichletGpc::fit(&stats, 0.01, PAR).is_err());
    stats.accumulate(x.view(), &labels, PAR).unwrap();
    assert!(DirichletGpc::fit(&stats, -1.0, PAR).is_err());
    assert!(DirichletGpc::fit(&ClassStats::new(1, 2), 0.01, PAR).is_err());
    assert!(stats.merge(&ClassStats::new(3, 2)).is_err());
    let m = Array2::zeros((2, 3));
    assert!(expected_softmax(m.view(), Array2::zeros((2, 2)).view(), PAR).is_err());
    assert!(expected_softmax(m.view(), Array2::from_elem((2, 3), -1.0).view(), PAR).is_err());
    assert!(expected_softmax(m.view(), Array2::from_elem((2, 3), f64::NAN).view(), PAR).is_err());
}

#[test]
fn a_chunk_is_added_to_every_class_or_to_none() {
    // Class 1's rows would overflow its sums, class 0's would not: the
    // chunk is refused and class 0 keeps its statistics too.
    let x = random(6, 2, 7);
    let labels = [0, 1, 0, 1, 0, 1];
    let mut stats = ClassStats::new(2, 2);
    stats.accumulate(x.view(), &labels, PAR).unwrap();
    let before: Vec<Array2<f64>> = stats.classes.iter().map(|c| c.gram.clone()).collect();
    let mut bad = random(4, 2, 8);
    bad.row_mut(1).fill(1e200);
    let e = stats
        .accumulate(bad.view(), &[0, 1, 0, 0], PAR)
        .unwrap_err();
    assert!(e.to_string().contains("`X`"), "{e}");
    assert_eq!(stats.n(), 6);
    for (c, g) in stats.classes.iter().zip(&before) {
        assert_eq!(&c.gram, g);
    }
}

#[test]
fn classes_of_other_widths_are_refused() {
    // Each class is valid alone; together they disagree in width (the
    // class sums panicked on the broadcast).
    let (mut a, mut b) = (FeatureStats::new(2), FeatureStats::new(3));
    a.n = 1;
    b.n = 1;
    let stats = ClassStats {
        classes: vec![a, b],
    };
    let e = DirichletGpc::fit(&stats, 0.01, PAR).unwrap_err();
    assert!(
        matches!(
            e,
            Error::ShapeMismatch {
                expected: 2,
                got: 3,
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn a_merge_changes_every_class_or_none() {
    // Class 1's merged sums would overflow, class 0's would not: the merge
    // is refused and class 0 keeps its statistics too.
    let x = random(4, 2, 7);
    let mut big = x.clone();
    big.row_mut(1).fill(5e153);
    let labels = [0, 1, 0, 0];
    let mut stats = ClassStats::new(2, 2);
    stats.accumulate(big.view(), &labels, PAR).unwrap();
    for _ in 0..2 {
        let copy = stats.clone();
        stats.merge(&copy).unwrap();
    }
    let before: Vec<Array2<f64>> = stats.classes.iter().map(|c| c.gram.clone()).collect();
    let copy = stats.clone();
    let e = stats.merge(&copy).unwrap_err();
    assert!(e.to_string().contains("`X`"), "{e}");
    assert_eq!(stats.n(), 16);
    for (c, g) in stats.classes.iter().zip(&before) {
        assert_eq!(&c.gram, g);
    }
}

#[cfg(feature = "serde")]
#[test]
fn fitted_classifiers_round_trip_through_serde() {
    let x = random(20, 2, 8);
    let labels: Vec<usize> = (0..20).map(|i| i % 2).collect();
    let mut stats = ClassStats::new(2, 2);
    stats.accumulate(x.view(), &labels, PAR).unwrap();
    let model = DirichletGpc::fit(&stats, 0.01, PAR).unwrap();
    let mut bytes = Vec::new();
    ciborium::into_writer(&model, &mut bytes).unwrap();
    let back: DirichletGpc = ciborium::from_reader(bytes.as_slice()).unwrap();
    let xs = random(5, 2, 9);
    assert_eq!(
        model.predict_latent(xs.view(), true, PAR).unwrap(),
        back.predict_latent(xs.view(), true, PAR).unwrap()
    );
}

#[test]
fn expected_softmax_is_bounded_for_extreme_latents() {
    // Means far apart: the highest wins; huge equal variances and equal
    // means: equal probabilities by symmetry. Each row integrates over at
    // most 34 · C · NODES length, so these finish as fast as moderate rows.
    let mu = array![
        [1e9, 0.0],
        [0.0, 1e9],
        [1e9, 0.0],
        [5.0, 5.0],
        [-3e20, -3e20],
        [1e300, -1e300],
        [1e20, 1e20 - 1e10],
        [1.7e308, -1.7e308],
    ];
    let var = array![
        [1.0, 1.0],
        [1.0, 1.0],
        [1e10, 1e10],
        [1e10, 1e10],
        [1e40, 1e40],
        [1e300, 1e300],
        [1e-10, 1e-10],
        [1.0, 1.0],
    ];
    let p = expected_softmax(mu.view(), var.view(), PAR).unwrap();
    for (i, row) in p.rows().into_iter().enumerate() {
        assert!(row.iter().all(|v| v.is_finite()), "row {i}: {row}");
        assert!(close(row.sum(), 1.0, 1e-14), "row {i}: {row}");
    }
    assert_eq!(p.row(0).to_vec(), vec![1.0, 0.0]);
    assert_eq!(p.row(1).to_vec(), vec![0.0, 1.0]);
    // 1e9 apart with standard deviations 1e5.
    assert!(close(p[(2, 0)], 1.0, 1e-10), "{}", p.row(2));
    for i in [3, 4] {
        assert!(close(p[(i, 0)], 0.5, 1e-12), "row {i}: {}", p.row(i));
    }
    for i in [5, 6, 7] {
        assert_eq!(p.row(i).to_vec(), vec![1.0, 0.0], "row {i}");
    }
    // Three classes, one far below two equal ones with huge variances.
    let mu = array![[0.0, 0.0, -1e12]];
    let var = array![[1e12, 1e12, 1.0]];
    let p = expected_softmax(mu.view(), var.view(), PAR).unwrap();
    assert!(close(p[(0, 0)], p[(0, 1)], 1e-12), "{p}");
    assert!(close(p[(0, 0)] + p[(0, 1)], 1.0, 1e-14), "{p}");
}

/// `E[σ(d)]` for `d ~ N(m, s²)` by the trapezoid rule over `d` on
/// `m ± 14 s` (with margin for the logistic's tails), the step small against
/// both the logistic's scale 1 and `s`: for two classes
/// `E[softmax(f)_1] = E[σ(f_1 − f_2)]` with `f_1 − f_2 ~ N(μ_1 − μ_2, v_1 + v_2)`.
fn logistic_normal(m: f64, s: f64) -> f64 {
    let h = (s / 40.0).min(0.02);
    let (lo, hi) = (m - 14.0 * s - 40.0, m + 14.0 * s + 40.0);
    let n = ((hi - lo) / h).ceil() as usize;
    let h = (hi - lo) / n as f64;
    let (mut num, mut den) = (0.0, 0.0);
    for i in 0..=n {
        let d = lo + i as f64 * h;
        let z = (d - m) / s;
        let phi = (-0.5 * z * z).exp();
        num += phi / (1.0 + (-d).exp());
        den += phi;
    }
    num / den
}

#[test]
fn expected_softmax_of_two_classes_matches_the_logistic_normal_integral() {
    // Latent variances from far below to far above the Gumbel scale: the
    // Gauss–Hermite expectations alone lost accuracy from v ≈ 30 on (1e-3
    // at v = 30, 0.03 at 1,000, 0.075 at 1e6); wide latents are integrated
    // over the Gumbel variable, also beside a narrow one (rows that mixed
    // the two kept the Gauss–Hermite rule for both: 3e-5 at (0.6, 16), 8e-4
    // at (0.3, 30), 0.06 at (0.01, 1,000)).
    let mut worst: f64 = 0.0;
    for &(v1, v2) in &[
        (0.3, 0.3),
        (1.0, 1.0),
        (4.0, 9.0),
        (30.0, 30.0),
        (100.0, 100.0),
        (1000.0, 1000.0),
        (1e4, 1e4),
        (1e6, 1e6),
        (1.0, 400.0),
        (0.6, 16.0),
        (0.3, 30.0),
        (0.01, 1000.0),
        (0.0, 1e4),
        (1e6, 0.5),
    ] {
        for &dm in &[0.0, 0.7, -5.0, 50.0] {
            let m = Array2::from_shape_vec((1, 2), vec![dm - 3.0, -3.0]).unwrap();
            let v = Array2::from_shape_vec((1, 2), vec![v1, v2]).unwrap();
            let p = expected_softmax(m.view(), v.view(), PAR).unwrap();
            let want = logistic_normal(dm, (v1 + v2).sqrt());
            worst = worst.max((p[(0, 0)] - want).abs());
        }
    }
    // Each trapezoid rule of the wide rows errs by about exp(-π²/0.5) ≈ 3e-9
    // (1.4e-8 at most is measured, at v = (1, 0) and dm = 3), Gauss–Hermite
    // below 1e-9 at v ≤ 0.3.
    assert!(worst < 2e-8, "worst {worst:e}");
}
