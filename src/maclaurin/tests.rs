//! Oracles of `docs/math/maclaurin.rst`, "Kar & Karnick's random Maclaurin
//! features" and "Optimized allocation" for the allocation machinery.

use approx::assert_relative_eq;
use ndarray::{array, Array2};
use rand::Rng as _;

use super::allocate::{
    expected_variance, incremental, variance_part, Allocation, DegreeTerm, Problem, VarianceModel,
};
use super::*;
use crate::progress::Monitor;
use crate::sketch::variance::{unstructured_moments, PairStats, WeightLaw};
use crate::threads::Parallelism;

fn close(got: &[f64], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(want) {
        assert_relative_eq!(*g, *w, max_relative = tol);
    }
}

fn term(degree: u32, coef: f64, var: f64, cov: f64) -> DegreeTerm {
    DegreeTerm {
        degree,
        coef,
        var,
        cov,
    }
}

#[test]
fn incremental_unstructured_oracle() {
    let terms = [
        term(1, 1.0, 1.0, 0.0),
        term(2, 0.5, 2.0, 0.0),
        term(3, 1.0 / 6.0, 4.0, 0.0),
    ];
    let (counts, part) = incremental(&terms, 6, VarianceModel::Unstructured).unwrap();
    assert_eq!(counts, vec![3, 2, 1]);
    assert_relative_eq!(part, 25.0 / 36.0, max_relative = 1e-12);
}

#[test]
fn incremental_srht_surrogate_oracle() {
    let model = VarianceModel::TensorSrht { d_pad: 4 };
    let v1: Vec<f64> = (1..=9)
        .map(|d| expected_variance(2.0, -2.0 / 3.0, d, model))
        .collect();
    let want = [2.0, 2.0 / 3.0, 2.0 / 9.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0];
    for (g, w) in v1.iter().zip(want) {
        assert!((g - w).abs() < 1e-12, "{v1:?}");
    }
    for d in 1..=9 {
        assert_relative_eq!(
            expected_variance(3.0, 0.5, d, model),
            4.5 / d as f64,
            max_relative = 1e-12
        );
    }
    let terms = [term(1, 1.0, 2.0, -2.0 / 3.0), term(2, 1.0, 3.0, 0.5)];
    let (counts, part) = incremental(&terms, 10, model).unwrap();
    assert_eq!(counts, vec![4, 6]);
    assert_relative_eq!(part, 0.75, max_relative = 1e-12);
}

/// The six rows of the end-to-end example of `docs/math/maclaurin.rst`,
/// "Checks", centered by their mean.
fn example_rows() -> Array2<f64> {
    let x = array![
        [0.0, 0.0],
        [1.0, 0.0],
        [0.0, 1.0],
        [1.0, 1.0],
        [0.5, -0.5],
        [-1.0, 0.5]
    ];
    let mean = x.mean_axis(ndarray::Axis(0)).unwrap();
    close(mean.as_slice().unwrap(), &[0.25, 1.0 / 3.0], 1e-15);
    &x - &mean
}

fn example_stats(law: WeightLaw, srht: bool) -> PairStatistics {
    let spec = StatsSpec {
        kernel: MaclaurinKernel::Gaussian,
        p_max: 5,
        law,
        srht_d_pad: srht.then_some(2),
    };
    pair_statistics(
        example_rows().view(),
        spec,
        Parallelism::Sequential,
        &Monitor::default(),
    )
    .unwrap()
}

#[test]
fn end_to_end_pair_statistics() {
    let real = example_stats(WeightLaw::Rademacher, true);
    assert_eq!(real.n_pairs, 15);
    assert_eq!(real.max_dropped, 0);
    close(
        &real.bias,
        &[
            2.9433784772e-02,
            2.4928638741e-03,
            1.8244813866e-04,
            9.9276235425e-06,
            3.7775409528e-07,
            1.0268399444e-08,
        ],
        1e-9,
    );
    close(
        &real.var[1..],
        &[
            4.7296977804e-02,
            4.6839027728e-02,
            4.9380890813e-02,
            5.7206932319e-02,
            7.0396699314e-02,
        ],
        1e-9,
    );
    close(
        &real.cov[1..],
        &[
            -4.7296977804e-02,
            7.4280465459e-04,
            -1.5142663782e-02,
            2.6866322066e-04,
            -1.2320406676e-02,
        ],
        1e-9,
    );
    let gauss = example_stats(WeightLaw::Gaussian, false);
    assert!(gauss.cov.iter().all(|&c| c == 0.0));
    close(
        &gauss.var[1..],
        &[
            1.3058819395e-01,
            2.0736240382e-01,
            4.3289628353e-01,
            1.1048225486e+00,
            3.1071048323e+00,
        ],
        1e-9,
    );
    let complex = example_stats(WeightLaw::ComplexRademacher, true);
    close(
        &complex.var[1..],
        &[
            2.3648488902e-02,
            2.4550297742e-02,
            2.4013215619e-02,
            2.7482568800e-02,
            3.4032297535e-02,
        ],
        1e-9,
    );
    close(
        &complex.cov[1..],
        &[
            -2.3648488902e-02,
            1.5021862047e-03,
            -5.7211792847e-03,
            -3.7141408711e-04,
            -4.7629999684e-03,
        ],
        1e-9,
    );
    // The pass does not depend on the thread count or on the block split.
    let spec = StatsSpec {
        kernel: MaclaurinKernel::Gaussian,
        p_max: 5,
        law: WeightLaw::Rademacher,
        srht_d_pad: Some(2),
    };
    let par = pair_statistics(
        example_rows().view(),
        spec,
        Parallelism::Rayon,
        &Monitor::default(),
    )
    .unwrap();
    assert_eq!(par, real);
}

fn solve(stats: &PairStatistics, h01: bool, budget: usize, model: VarianceModel) -> Allocation {
    let coefs = MaclaurinKernel::Gaussian.coefficients(5);
    Problem {
        stats,
        coefs: &coefs,
        p_min: 2,
        p_max: 5,
        h01,
        budget,
        model,
    }
    .solve(&Monitor::default())
    .unwrap()
}

/// (statistics, h01, budget, model, allocation, objective) of one table row.
type Row<'a> = (
    &'a PairStatistics,
    bool,
    usize,
    VarianceModel,
    Vec<usize>,
    f64,
);

#[test]
fn end_to_end_allocations() {
    let srht = VarianceModel::TensorSrht { d_pad: 2 };
    let un = VarianceModel::Unstructured;
    let real = example_stats(WeightLaw::Rademacher, true);
    let gauss = example_stats(WeightLaw::Gaussian, false);
    let complex = example_stats(WeightLaw::ComplexRademacher, true);
    let rows: [Row; 6] = [
        (&real, false, 9, un, vec![0, 6, 3], 1.196853008340e-02),
        (&gauss, false, 9, un, vec![0, 6, 3], 3.922734744815e-02),
        (&real, false, 9, srht, vec![0, 2, 7], 1.881799295194e-03),
        (&complex, false, 4, un, vec![0, 3, 1], 1.420285220811e-02),
        (&complex, false, 4, srht, vec![0, 2, 2], 3.439008631962e-03),
        (&real, true, 7, un, vec![0, 0, 7], 1.855270557531e-03),
    ];
    for (stats, h01, budget, model, counts, j) in rows {
        let a = solve(stats, h01, budget, model);
        assert_eq!(a.best.degree, 2);
        assert_eq!(a.best.counts, counts);
        assert_relative_eq!(a.best.objective, j, max_relative = 1e-9);
    }
    let a = solve(&real, false, 9, un);
    let others: Vec<(u32, Vec<usize>, f64)> = a.candidates[1..]
        .iter()
        .map(|c| (c.degree, c.counts.clone(), c.objective))
        .collect();
    let want = [
        (3, vec![0, 5, 3, 1], 1.4744267e-02),
        (4, vec![0, 5, 2, 1, 1], 1.6785661e-02),
        (5, vec![0, 4, 2, 1, 1, 1], 1.9155031e-02),
    ];
    for ((p, c, j), (wp, wc, wj)) in others.iter().zip(want) {
        assert_eq!((*p, c), (wp, &wc));
        assert_relative_eq!(*j, wj, max_relative = 1e-7);
    }
}

fn all_compositions(total: usize, parts: usize, out: &mut Vec<Vec<usize>>, cur: &mut Vec<usize>) {
    if parts == 1 {
        cur.push(total);
        out.push(cur.clone());
        cur.pop();
        return;
    }
    for first in 1..=(total - (parts - 1)) {
        cur.push(first);
        all_compositions(total - first, parts - 1, out, cur);
        cur.pop();
    }
}

#[test]
fn incremental_is_the_exhaustive_optimum_and_monotone() {
    let mut rng = crate::rng::seeded(11);
    for trial in 0..60 {
        let parts = 1 + trial % 4;
        let terms: Vec<DegreeTerm> = (0..parts)
            .map(|k| {
                term(
                    k as u32 + 1,
                    rng.random_range(0.05..2.0),
                    rng.random_range(0.01..5.0),
                    0.0,
                )
            })
            .collect();
        let mut last = f64::INFINITY;
        for budget in parts..=12 {
            let (counts, part) = incremental(&terms, budget, VarianceModel::Unstructured).unwrap();
            assert_eq!(counts.iter().sum::<usize>(), budget);
            let mut all = Vec::new();
            all_compositions(budget, parts, &mut all, &mut Vec::new());
            let best = all
                .iter()
                .map(|c| variance_part(&terms, c, VarianceModel::Unstructured))
                .fold(f64::INFINITY, f64::min);
            assert!(part <= best * (1.0 + 1e-12), "{part} > {best}");
            // Greedy runs are nested in the budget, so J_cur over the steps of
            // one run is this sequence: it never increases.
            assert!(part <= last * (1.0 + 1e-15));
            last = part;
        }
    }
}

#[test]
fn allocation_edge_cases() {
    let real = example_stats(WeightLaw::Rademacher, false);
    // Budget 0: no sketches.
    let a = solve(&real, false, 0, VarianceModel::Unstructured);
    assert_eq!(a.best.degree, 0);
    // Budget 1: no p in [2, 5] is feasible, the largest feasible p (1) is used.
    let a = solve(&real, false, 1, VarianceModel::Unstructured);
    assert_eq!((a.best.degree, a.best.counts.clone()), (1, vec![0, 1]));
    // Polynomial kernel, c = 0: only degree q is sketched.
    let spec = StatsSpec {
        kernel: MaclaurinKernel::Polynomial {
            degree: 3,
            bias: 0.0,
        },
        p_max: 10,
        law: WeightLaw::Rademacher,
        srht_d_pad: None,
    };
    let stats = pair_statistics(
        example_rows().view(),
        spec,
        Parallelism::Sequential,
        &Monitor::default(),
    )
    .unwrap();
    let coefs = spec.kernel.coefficients(10);
    let a = Problem {
        stats: &stats,
        coefs: &coefs,
        p_min: 2,
        p_max: 10,
        h01: false,
        budget: 5,
        model: VarianceModel::Unstructured,
    }
    .solve(&Monitor::default())
    .unwrap();
    assert_eq!((a.best.degree, a.best.counts), (3, vec![0, 0, 0, 5]));
    assert!(a.best.objective.is_finite());
    // Fewer than two rows.
    assert!(pair_statistics(
        example_rows().slice(ndarray::s![..1, ..]),
        spec,
        Parallelism::Sequential,
        &Monitor::default()
    )
    .is_err());
}

#[test]
fn overflowing_pairs_are_dropped_and_counted() {
    // Exponential kernel with huge dot products: the powers overflow for some pairs.
    let z = array![[30.0, 0.0], [30.0, 1.0], [0.1, 0.2], [0.0, 0.1]];
    let spec = StatsSpec {
        kernel: MaclaurinKernel::Exponential,
        p_max: 10,
        law: WeightLaw::Rademacher,
        srht_d_pad: None,
    };
    let stats =
        pair_statistics(z.view(), spec, Parallelism::Sequential, &Monitor::default()).unwrap();
    assert_eq!(stats.n_pairs, 6);
    // exp(900) overflows: the pair (0, 1) is dropped from every bias term.
    assert!(stats.max_dropped >= 1);
    assert!(stats.needs_warning());
    assert!(stats.bias.iter().all(|b| b.is_finite()));
    // Rows far from the data under the Gaussian kernel stay finite in log space.
    let spec = StatsSpec {
        kernel: MaclaurinKernel::Gaussian,
        ..spec
    };
    let stats = pair_statistics(
        (&z * 20.0).view(),
        spec,
        Parallelism::Sequential,
        &Monitor::default(),
    )
    .unwrap();
    assert_eq!(stats.max_dropped, 0);
    assert!(!stats.needs_warning());
}

#[test]
fn kar_karnick_closed_form_oracle() {
    let coefs = MaclaurinKernel::Exponential.coefficients(6);
    let probs = random::degree_probabilities(&coefs, false, 2.0).unwrap();
    assert_eq!(probs[0], 0.0);
    assert_relative_eq!(probs[1] / probs[2], 2.0, max_relative = 1e-14);
    let x = [0.3, -0.2, 0.5, 0.1];
    let y = [-0.1, 0.4, 0.2, 0.3];
    let p = PairStats::new(&x, &y);
    let (big_m, _) = unstructured_moments(WeightLaw::Rademacher, &p);
    let var = random::variance(&coefs, &probs, big_m, p.m, 7);
    assert_relative_eq!(var, 0.0237843, max_relative = 1e-5);
    let mean: f64 = (1..=6).map(|n| coefs[n] * p.m.powi(n as i32)).sum();
    assert_relative_eq!(mean, 0.0202013, max_relative = 1e-5);
    assert!(random::degree_probabilities(&coefs, false, 1.0).is_err());
    assert!(random::degree_probabilities(&[1.0, 1.0], true, 2.0).is_err());
}

/// Statistical oracle of `docs/math/maclaurin.rst`, "Kar & Karnick's random
/// Maclaurin features": Kar & Karnick degrees drawn by [`random::draw_counts`],
/// Rademacher features built here; the mean and variance of `T` independent
/// estimates match the closed forms within 4 standard errors (the standard
/// error of the variance from the sample's fourth central moment).
#[test]
fn degree_draws_refuse_probabilities_that_are_not_numbers_at_least_zero() {
    let mut rng = crate::rng::seeded(5);
    for bad in [f64::NAN, -0.5, f64::INFINITY] {
        let err = random::draw_counts(&[0.5, bad, 0.5], 3, &mut rng).unwrap_err();
        assert!(err.to_string().contains("probs"), "{err}");
    }
}

#[test]
fn kar_karnick_statistical_oracle() {
    let coefs = MaclaurinKernel::Exponential.coefficients(6);
    let probs = random::degree_probabilities(&coefs, false, 2.0).unwrap();
    let x = [0.3, -0.2, 0.5, 0.1];
    let y = [-0.1, 0.4, 0.2, 0.3];
    let budget = 7;
    let t = 40_000;
    let mut rng = crate::rng::seeded(5);
    let mut est = Vec::with_capacity(t);
    for _ in 0..t {
        let counts = random::draw_counts(&probs, budget, &mut rng).unwrap();
        let mut k = 0.0;
        for (n, &c) in counts.iter().enumerate() {
            if c == 0 {
                continue;
            }
            let scale = random::block_scale(coefs[n], probs[n], c, budget).powi(2) / c as f64;
            for _ in 0..c {
                let (mut fx, mut fy) = (1.0, 1.0);
                for _ in 0..n {
                    let w: Vec<f64> = (0..4)
                        .map(|_| if rng.random::<bool>() { 1.0 } else { -1.0 })
                        .collect();
                    fx *= w.iter().zip(&x).map(|(a, b)| a * b).sum::<f64>();
                    fy *= w.iter().zip(&y).map(|(a, b)| a * b).sum::<f64>();
                }
                k += scale * fx * fy;
            }
        }
        est.push(k);
    }
    let tf = t as f64;
    let mean = est.iter().sum::<f64>() / tf;
    let var = est.iter().map(|e| (e - mean).powi(2)).sum::<f64>() / (tf - 1.0);
    let m4 = est.iter().map(|e| (e - mean).powi(4)).sum::<f64>() / tf;
    let (want_mean, want_var) = (0.0202013, 0.0237843);
    assert!(
        (mean - want_mean).abs() < 4.0 * (want_var / tf).sqrt(),
        "mean {mean}"
    );
    let se_var = ((m4 - var * var) / tf).sqrt();
    assert!(
        (var - want_var).abs() < 4.0 * se_var,
        "var {var} ± {se_var}"
    );
}

#[test]
fn allocation_reports_progress_and_stops_on_a_cancel() {
    let x = Array2::from_shape_fn((300, 3), |(i, j)| ((i * 7 + j * 3) % 11) as f64 / 11.0);
    let cfg = MaclaurinConfig::new(MaclaurinKernel::Gaussian, 32);
    let monitor = Monitor::new();
    let map = MaclaurinMap::fit(x.view(), &cfg, 0, Parallelism::Rayon, &monitor).unwrap();
    // The last stage is the search over p; before it, the pair statistics
    // of 300 rows: 3 blocks of 128 rows, 6 block pairs.
    let (stage, done, total) = monitor.snapshot();
    assert_eq!(stage, "candidate degrees");
    assert!(total >= 1 && done == total);
    let messages = monitor.take_messages();
    assert_eq!(
        messages,
        vec![format!(
            "allocation {:?} (degree {}) from 44850 pairs of 300 rows",
            map.allocation(),
            map.degree()
        )]
    );
    let z = x.mapv(|v| v - 0.5);
    let spec = StatsSpec {
        kernel: MaclaurinKernel::Gaussian,
        p_max: 5,
        law: WeightLaw::Rademacher,
        srht_d_pad: None,
    };
    let stats_monitor = Monitor::new();
    pair_statistics(z.view(), spec, Parallelism::Rayon, &stats_monitor).unwrap();
    assert_eq!(
        stats_monitor.snapshot(),
        ("blocks of pair statistics".to_string(), 6, 6)
    );
    for par in [Parallelism::Sequential, Parallelism::Rayon] {
        let cancelled = Monitor::new();
        cancelled.cancel();
        let r = pair_statistics(z.view(), spec, par, &cancelled);
        assert_eq!(r.unwrap_err(), crate::Error::Interrupted);
        let r = MaclaurinMap::fit(x.view(), &cfg, 0, par, &cancelled);
        assert_eq!(r.unwrap_err(), crate::Error::Interrupted);
    }
}
