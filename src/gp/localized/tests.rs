//! Oracles of `docs/math/localized.rst` for [`LocalizedMaclaurinGp`].

use approx::assert_relative_eq;
use ndarray::{array, Array1, Array2};
use rand::Rng as _;
use rand_distr::StandardNormal;

use super::*;
use crate::linalg::{as_faer, Cholesky};
use crate::maclaurin::MaclaurinKernel;
use crate::progress::Monitor;
use crate::rng::seeded;
use crate::sketch::SketchKind;

fn data(n: usize, d: usize, seed: u64) -> (Array2<f64>, Array1<f64>) {
    let mut rng = seeded(seed);
    let x = Array2::from_shape_fn((n, d), |_| rng.sample::<f64, _>(StandardNormal));
    let y = x.map_axis(Axis(1), |r| (2.0 * r[0]).sin() + 0.3 * r.sum());
    (x, y)
}

fn config(d_feat: usize, sketch: SketchKind, complex: bool) -> LocalizedConfig {
    let mut map = MaclaurinConfig::new(MaclaurinKernel::Gaussian, d_feat);
    map.length_scale = 0.8;
    map.kernel_variance = 1.7;
    map.sketch = sketch;
    map.complex = complex;
    LocalizedConfig {
        map,
        noise_variance: 0.05,
        threshold: None,
        n_clusters: None,
        tol: 1e-12,
        center_y: true,
        device: crate::gpu::Device::Cpu,
    }
}

/// Exact-GP prediction with the kernel `k*` exact and the training Gram
/// `Φ_c Φ_cᵀ`: `μ = k*ᵀ(ΦΦᵀ + σ_n² I)^{−1} y`, `v = σ² − k*ᵀ(…)^{−1} k*`.
fn exactness_oracle(gp: &LocalizedMaclaurinGp, c: &[f64], cfg: &LocalizedConfig) -> (f64, f64) {
    let x = &gp.x;
    let phi = {
        let mut out = Array2::<f64>::zeros((x.nrows(), gp.map.width()));
        gp.map
            .transform_centered_into(x.view(), c, out.view_mut(), Parallelism::Sequential)
            .unwrap();
        out
    };
    let mut k = phi.dot(&phi.t());
    for i in 0..k.nrows() {
        k[(i, i)] += cfg.noise_variance;
    }
    let chol = Cholesky::new(as_faer(k.view()), Parallelism::Sequential).unwrap();
    let l2 = cfg.map.length_scale.powi(2);
    let s2 = cfg.map.kernel_variance;
    let kstar: Array1<f64> = x.map_axis(Axis(1), |r| {
        let dd: f64 = r.iter().zip(c).map(|(a, b)| (a - b) * (a - b)).sum();
        s2 * (-dd / (2.0 * l2)).exp()
    });
    let alpha = chol.solve_vec(gp.y.view(), Parallelism::Sequential);
    let w = chol.solve_vec(kstar.view(), Parallelism::Sequential);
    let mu = kstar.iter().zip(&alpha).map(|(a, b)| a * b).sum::<f64>() + gp.y_mean;
    let v = s2 - kstar.iter().zip(&w).map(|(a, b)| a * b).sum::<f64>();
    (mu, v)
}

#[test]
fn exact_at_a_centroid_for_every_sketch_and_seed() {
    let (x, y) = data(60, 3, 1);
    for (sketch, complex) in [
        (SketchKind::TensorSrht, false),
        (SketchKind::TensorSrht, true),
        (SketchKind::Gaussian, false),
        (SketchKind::Rademacher, false),
        (SketchKind::Rademacher, true),
    ] {
        for seed in [3, 17, 99] {
            let mut cfg = config(24, sketch, complex);
            cfg.threshold = Some(1.5);
            let gp = LocalizedMaclaurinGp::fit(
                x.view(),
                y.view(),
                &cfg,
                seed,
                Parallelism::Rayon,
                &Monitor::default(),
            )
            .unwrap();
            assert!(gp.centroids().nrows() > 2);
            let cs = gp.centroids().slice(ndarray::s![..3, ..]).to_owned();
            let pred = gp
                .predict(cs.view(), true, Parallelism::Rayon, &Monitor::default())
                .unwrap();
            let var = pred.var.unwrap();
            for c in 0..3 {
                let (mu, v) = exactness_oracle(&gp, cs.row(c).as_slice().unwrap(), &cfg);
                assert_relative_eq!(pred.mean[c], mu, epsilon = 1e-8, max_relative = 1e-8);
                assert_relative_eq!(var[c], v, epsilon = 1e-8, max_relative = 1e-7);
            }
        }
    }
}

#[test]
fn far_from_the_data_reverts_to_the_prior_only_when_centered_there() {
    let (x, y) = data(40, 2, 2);
    let mut cfg = config(16, SketchKind::TensorSrht, false);
    cfg.center_y = false;
    let gp = LocalizedMaclaurinGp::fit(
        x.view(),
        y.view(),
        &cfg,
        5,
        Parallelism::Rayon,
        &Monitor::default(),
    )
    .unwrap();
    let far = array![[40.0, -35.0]];
    let local = gp
        .predict_at_test_points(far.view(), true, Parallelism::Rayon, &Monitor::default())
        .unwrap();
    // Every training row is beyond the cutoff: the GP is the prior itself.
    assert_eq!(local.mean[0], 0.0);
    assert_relative_eq!(
        local.var.unwrap()[0],
        cfg.map.kernel_variance,
        max_relative = 1e-12
    );
    let vanilla = gp
        .predict(far.view(), true, Parallelism::Rayon, &Monitor::default())
        .unwrap();
    assert!(vanilla.var.unwrap()[0] < 1e-100);
    assert!(vanilla.mean[0].abs() < 1e-100);
}

#[test]
fn one_cluster_is_the_vanilla_maclaurin_gp() {
    let (x, y) = data(80, 4, 3);
    let (xt, _) = data(10, 4, 4);
    let cfg = config(32, SketchKind::TensorSrht, false);
    let gp = LocalizedMaclaurinGp::fit(
        x.view(),
        y.view(),
        &cfg,
        11,
        Parallelism::Rayon,
        &Monitor::default(),
    )
    .unwrap();
    assert_eq!(gp.centroids().nrows(), 1);
    let pred = gp
        .predict(xt.view(), true, Parallelism::Rayon, &Monitor::default())
        .unwrap();
    // The vanilla feature GP (docs/math/gp.rst, "Feature-space GP") on the map
    // fitted with the same seed.
    let map = MaclaurinMap::fit(
        x.view(),
        &cfg.map,
        11,
        Parallelism::Rayon,
        &Monitor::default(),
    )
    .unwrap();
    let phi = map.transform(x.view(), Parallelism::Rayon).unwrap();
    let mut stats = FeatureStats::new(map.width());
    stats
        .accumulate(phi.view(), y.view(), Parallelism::Rayon)
        .unwrap();
    let vanilla = FeatureGp::fit(&stats, cfg.noise_variance, true, Parallelism::Rayon).unwrap();
    let phit = map.transform(xt.view(), Parallelism::Rayon).unwrap();
    let (m, v) = vanilla
        .predict(phit.view(), true, Parallelism::Rayon)
        .unwrap();
    for i in 0..10 {
        assert_relative_eq!(pred.mean[i], m[i], epsilon = 1e-10, max_relative = 1e-10);
        assert_relative_eq!(
            pred.var.as_ref().unwrap()[i],
            v.as_ref().unwrap()[i],
            epsilon = 1e-10,
            max_relative = 1e-10
        );
    }
    // n_clusters = 1 with a threshold is the same model.
    let mut one = cfg.clone();
    one.threshold = Some(0.1);
    one.n_clusters = Some(1);
    let gp1 = LocalizedMaclaurinGp::fit(
        x.view(),
        y.view(),
        &one,
        11,
        Parallelism::Rayon,
        &Monitor::default(),
    )
    .unwrap();
    let p1 = gp1
        .predict(xt.view(), true, Parallelism::Rayon, &Monitor::default())
        .unwrap();
    assert_eq!(p1.mean, pred.mean);
}

#[test]
fn truncation_matches_the_untruncated_fit() {
    // Spread data (l = 0.8 against a range of ±30): most rows are skipped.
    let (x0, y) = data(300, 2, 6);
    let x = x0.mapv(|v| 10.0 * v);
    let (xt0, _) = data(40, 2, 7);
    let xt = xt0.mapv(|v| 10.0 * v);
    let mut cfg = config(32, SketchKind::TensorSrht, false);
    cfg.threshold = Some(2.0);
    let mut full = cfg.clone();
    full.tol = 0.0;
    let a = LocalizedMaclaurinGp::fit(
        x.view(),
        y.view(),
        &cfg,
        8,
        Parallelism::Rayon,
        &Monitor::default(),
    )
    .unwrap();
    let b = LocalizedMaclaurinGp::fit(
        x.view(),
        y.view(),
        &full,
        8,
        Parallelism::Rayon,
        &Monitor::default(),
    )
    .unwrap();
    assert!(a.cutoff_sq().is_finite() && b.cutoff_sq().is_infinite());
    let c = a.centroids().row(3).to_vec();
    let (_, used) = a.build_at(&c, &Monitor::default()).unwrap();
    assert!(
        used < x.nrows() / 2,
        "only {used} of {} rows skipped",
        x.nrows()
    );
    for (pa, pb) in [
        (
            a.predict(xt.view(), true, Parallelism::Rayon, &Monitor::default())
                .unwrap(),
            b.predict(xt.view(), true, Parallelism::Rayon, &Monitor::default())
                .unwrap(),
        ),
        (
            a.predict_at_test_points(xt.view(), true, Parallelism::Rayon, &Monitor::default())
                .unwrap(),
            b.predict_at_test_points(xt.view(), true, Parallelism::Rayon, &Monitor::default())
                .unwrap(),
        ),
    ] {
        for i in 0..xt.nrows() {
            assert_relative_eq!(pa.mean[i], pb.mean[i], epsilon = 1e-8);
            assert_relative_eq!(
                pa.var.as_ref().unwrap()[i],
                pb.var.as_ref().unwrap()[i],
                epsilon = 1e-8
            );
        }
    }
}

#[test]
fn norm_bound_holds() {
    let (x, y) = data(50, 5, 9);
    for (sketch, complex) in [
        (SketchKind::TensorSrht, false),
        (SketchKind::TensorSrht, true),
        (SketchKind::Gaussian, true),
        (SketchKind::Rademacher, false),
    ] {
        let cfg = config(40, sketch, complex);
        let gp = LocalizedMaclaurinGp::fit(
            x.view(),
            y.view(),
            &cfg,
            1,
            Parallelism::Rayon,
            &Monitor::default(),
        )
        .unwrap();
        let bound = NormBound::of(&gp.map);
        let xs = x.mapv(|v| 3.0 * v);
        let phi = gp.map.transform(xs.view(), Parallelism::Rayon).unwrap();
        let center = gp.map.center().unwrap();
        for (r, p) in xs.rows().into_iter().zip(phi.rows()) {
            let s: f64 = r
                .iter()
                .zip(center)
                .map(|(a, b)| ((a - b) / cfg.map.length_scale).powi(2))
                .sum();
            let norm_sq: f64 = p.iter().map(|v| v * v).sum();
            let b = cfg.map.kernel_variance * bound.ln_bound(s).exp();
            assert!(norm_sq <= b * (1.0 + 1e-12), "{norm_sq} > {b}");
        }
    }
    let x1 = array![[0.0], [1.0], [2.0]];
    let y1 = array![0.0, 1.0, 0.0];
    let cfg = config(6, SketchKind::TensorSrht, false);
    let gp = LocalizedMaclaurinGp::fit(
        x1.view(),
        y1.view(),
        &cfg,
        1,
        Parallelism::Rayon,
        &Monitor::default(),
    )
    .unwrap();
    let bound = NormBound::of(&gp.map);
    assert_eq!(bound.terms.len(), 5);
    let cut = bound.cutoff(1e-6);
    assert!(bound.ln_bound(cut) < 2.0 * 1e-6f64.ln());
    assert!(bound.ln_bound(cut * 0.999) >= 2.0 * 1e-6f64.ln());
}

#[test]
fn theta_does_not_change_shared_centroids() {
    let (x, y) = data(120, 3, 10);
    let (xt, _) = data(30, 3, 11);
    let mut a = config(24, SketchKind::TensorSrht, false);
    a.threshold = Some(1.0);
    let mut b = a.clone();
    b.threshold = Some(2.5);
    let ga = LocalizedMaclaurinGp::fit(
        x.view(),
        y.view(),
        &a,
        4,
        Parallelism::Rayon,
        &Monitor::default(),
    )
    .unwrap();
    let gb = LocalizedMaclaurinGp::fit(
        x.view(),
        y.view(),
        &b,
        4,
        Parallelism::Rayon,
        &Monitor::default(),
    )
    .unwrap();
    let pa = ga
        .predict(xt.view(), false, Parallelism::Rayon, &Monitor::default())
        .unwrap();
    let pb = gb
        .predict(xt.view(), false, Parallelism::Rayon, &Monitor::default())
        .unwrap();
    let na = nearest(
        ga.centroids(),
        xt.view(),
        Parallelism::Sequential,
        &Monitor::default(),
    )
    .unwrap();
    let nb = nearest(
        gb.centroids(),
        xt.view(),
        Parallelism::Sequential,
        &Monitor::default(),
    )
    .unwrap();
    let mut shared = 0;
    for i in 0..xt.nrows() {
        if ga.centroids().row(na[i]) == gb.centroids().row(nb[i]) {
            assert_eq!(pa.mean[i], pb.mean[i]);
            shared += 1;
        }
    }
    assert!(shared > 0);
}

#[test]
fn thread_count_and_build_order_invariance() {
    let (x, y) = data(150, 3, 12);
    let (xt, _) = data(50, 3, 13);
    let mut cfg = config(24, SketchKind::TensorSrht, false);
    cfg.threshold = Some(1.0);
    let a = LocalizedMaclaurinGp::fit(
        x.view(),
        y.view(),
        &cfg,
        4,
        Parallelism::Rayon,
        &Monitor::default(),
    )
    .unwrap();
    let b = LocalizedMaclaurinGp::fit(
        x.view(),
        y.view(),
        &cfg,
        4,
        Parallelism::Sequential,
        &Monitor::default(),
    )
    .unwrap();
    b.build_all(Parallelism::Sequential, &Monitor::default())
        .unwrap();
    let pa = a
        .predict(xt.view(), true, Parallelism::Rayon, &Monitor::default())
        .unwrap();
    let pb = b
        .predict(
            xt.view(),
            true,
            Parallelism::Sequential,
            &Monitor::default(),
        )
        .unwrap();
    assert_eq!(pb.n_built, 0);
    assert_eq!(pa.mean, pb.mean);
    assert_eq!(pa.var, pb.var);
    let xt32 = xt.mapv(|v| v as f32);
    let p32 = a
        .predict(xt32.view(), true, Parallelism::Rayon, &Monitor::default())
        .unwrap();
    for i in 0..xt.nrows() {
        assert_relative_eq!(p32.mean[i], pa.mean[i], epsilon = 1e-4);
    }
}

#[test]
fn bad_inputs() {
    let (x, y) = data(20, 2, 14);
    let cfg = config(16, SketchKind::TensorSrht, false);
    let fit = |c: &LocalizedConfig| {
        LocalizedMaclaurinGp::fit(
            x.view(),
            y.view(),
            c,
            1,
            Parallelism::Rayon,
            &Monitor::default(),
        )
    };
    let mut c = cfg.clone();
    c.noise_variance = 0.0;
    assert!(fit(&c).is_err());
    let mut c = cfg.clone();
    c.threshold = Some(-1.0);
    assert!(fit(&c).is_err());
    let mut c = cfg.clone();
    c.n_clusters = Some(0);
    assert!(fit(&c).is_err());
    let mut c = cfg.clone();
    c.tol = f64::NAN;
    assert!(fit(&c).is_err());
    let mut c = cfg.clone();
    c.map.kernel = MaclaurinKernel::Exponential;
    assert!(fit(&c).is_err());
    // A NaN in X is refused before the clustering (which runs beside the
    // allocation and would otherwise never reach the threshold).
    let mut bad = x.clone();
    bad[[3, 1]] = f64::NAN;
    let mut c = cfg.clone();
    c.threshold = Some(0.5);
    for par in [Parallelism::Rayon, Parallelism::Sequential] {
        assert!(matches!(
            LocalizedMaclaurinGp::fit(bad.view(), y.view(), &c, 1, par, &Monitor::default()),
            Err(Error::NonFinite { name: "X" })
        ));
    }
    let short = y.slice(ndarray::s![..5]).to_owned();
    assert!(LocalizedMaclaurinGp::fit(
        x.view(),
        short.view(),
        &cfg,
        1,
        Parallelism::Rayon,
        &Monitor::default()
    )
    .is_err());
    let gp = fit(&cfg).unwrap();
    let wrong = Array2::<f64>::zeros((3, 3));
    assert!(gp
        .predict(wrong.view(), false, Parallelism::Rayon, &Monitor::default())
        .is_err());
    let nan = array![[f64::NAN, 0.0]];
    assert!(gp
        .predict(nan.view(), false, Parallelism::Rayon, &Monitor::default())
        .is_err());
    assert!(gp
        .predict_at_test_points(nan.view(), false, Parallelism::Rayon, &Monitor::default())
        .is_err());
}

/// `Φᵀy` in the raw (shift 0) form `b + s f`.
fn raw_phi_y(s: &FeatureStats) -> Array1<f64> {
    &s.phi_y + &(&s.phi_sum * s.y_shift)
}

/// Largest absolute difference, relative to the largest entry of `b`.
fn rel_diff<'a>(a: impl IntoIterator<Item = &'a f64>, b: &[f64]) -> f64 {
    let scale = b.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    a.into_iter()
        .zip(b)
        .fold(0.0f64, |m, (x, y)| m.max((x - y).abs()))
        / scale
}

#[test]
fn cached_projections_give_the_statistics_of_the_map_at_any_center() {
    let (x, y) = data(300, 5, 15);
    for (sketch, complex, d_feat) in [
        (SketchKind::TensorSrht, false, 40),
        (SketchKind::TensorSrht, true, 41),
        (SketchKind::Gaussian, false, 30),
        (SketchKind::Rademacher, true, 31),
        // Wider (D = 160: 20 row panels of the packed Gram kernel).
        (SketchKind::TensorSrht, false, 160),
    ] {
        let cfg = config(d_feat, sketch, complex);
        let mut gp = LocalizedMaclaurinGp::fit(
            x.view(),
            y.view(),
            &cfg,
            2,
            Parallelism::Rayon,
            &Monitor::default(),
        )
        .unwrap();
        assert!(gp.projections.is_some(), "small problems are cached");
        let c = [0.3, -1.0, 0.5, 2.0, 0.0];
        let dd: Vec<f64> = x
            .rows()
            .into_iter()
            .map(|r| r.iter().zip(&c).map(|(a, b)| (a - b) * (a - b)).sum())
            .collect();
        let mut sorted = dd.clone();
        sorted.sort_by(f64::total_cmp);
        let mut scratch = CentroidScratch::default();
        // Every row (the contiguous path), then only the nearer half (the
        // gathered path, several blocks when D is small).
        for cutoff in [f64::INFINITY, sorted[150]] {
            gp.cutoff_sq = cutoff;
            let rows: Vec<usize> = (0..x.nrows()).filter(|&i| dd[i] < cutoff).collect();
            let (fast, used) = gp
                .centroid_stats(&c, &mut scratch, &Monitor::default())
                .unwrap();
            assert_eq!(used, rows.len());
            let mut slow = FeatureStats::new(gp.map.width());
            gp.stats_by_transform(&c, &rows, &mut slow, &Monitor::default())
                .unwrap();
            assert_eq!(fast.n, slow.n);
            // The features agree to rounding (a few ulps of each factor);
            // the statistics are sums of 300 products of them.
            let g = slow.gram.as_slice().unwrap();
            assert!(rel_diff(fast.gram.iter(), g) < 1e-12, "{sketch:?}");
            let b = raw_phi_y(&slow);
            assert!(rel_diff(raw_phi_y(&fast).iter(), b.as_slice().unwrap()) < 1e-12);
            let f = slow.phi_sum.as_slice().unwrap();
            assert!(rel_diff(fast.phi_sum.iter(), f) < 1e-12);
            let ys: f64 = rows.iter().map(|&i| gp.y[i]).sum();
            assert_relative_eq!(fast.y_sum, ys, epsilon = 1e-12);
            assert_relative_eq!(
                fast.y_sum + fast.y_shift * fast.n as f64,
                slow.y_sum + slow.y_shift * slow.n as f64,
                epsilon = 1e-10
            );
        }
        // A group shares one pass over the cache (when every row is used)
        // and gives exactly the one-by-one statistics.
        let (c2, c3) = ([1.0, 0.0, -0.5, 0.2, 1.5], [-0.7, 0.4, 0.0, -1.2, 0.3]);
        let group = gp
            .group_stats(&[&c, &c2, &c3], &mut scratch, &Monitor::default())
            .unwrap();
        for (cq, (gs, gu)) in [&c[..], &c2[..], &c3[..]].into_iter().zip(&group) {
            let (one, ou) = gp
                .centroid_stats(cq, &mut scratch, &Monitor::default())
                .unwrap();
            assert_eq!(*gu, ou);
            assert_eq!(gs, &one);
        }
    }
}

#[test]
fn progress_is_reported_and_a_cancel_stops_every_phase() {
    let (x, y) = data(300, 3, 21);
    let mut cfg = config(24, SketchKind::TensorSrht, false);
    cfg.n_clusters = Some(12);
    let monitor = Monitor::new();
    let gp = LocalizedMaclaurinGp::fit(x.view(), y.view(), &cfg, 3, Parallelism::Rayon, &monitor)
        .unwrap();
    assert_eq!(monitor.snapshot(), ("centroids".to_string(), 12, 12));
    let messages = monitor.take_messages();
    assert_eq!(messages.len(), 2, "{messages:?}");
    assert!(messages[0].starts_with("allocation ["));
    assert!(messages[1].starts_with("12 centroid(s) in "));
    // Two test rows at two different centroids: two GPs built.
    let xt = gp.centroids().select(Axis(0), &[2, 7]);
    let p = gp
        .predict(xt.view(), true, Parallelism::Rayon, &monitor)
        .unwrap();
    assert_eq!(p.n_built, 2);
    assert_eq!(monitor.snapshot(), ("centroid GPs".to_string(), 2, 2));
    let messages = monitor.take_messages();
    assert_eq!(messages.len(), 1);
    assert!(messages[0].starts_with("predicted 2 point(s) with 2 centroid GP(s) (2 built in "));
    gp.predict_at_test_points(xt.view(), false, Parallelism::Rayon, &monitor)
        .unwrap();
    assert_eq!(monitor.snapshot(), ("test-point GPs".to_string(), 2, 2));

    let cancelled = Monitor::new();
    cancelled.cancel();
    for par in [Parallelism::Sequential, Parallelism::Rayon] {
        let interrupted = |r: Result<()>| assert_eq!(r.unwrap_err(), Error::Interrupted);
        interrupted(
            LocalizedMaclaurinGp::fit(x.view(), y.view(), &cfg, 3, par, &cancelled).map(|_| ()),
        );
        interrupted(gp.build_all(par, &cancelled).map(|_| ()));
        interrupted(gp.predict(xt.view(), false, par, &cancelled).map(|_| ()));
        interrupted(
            gp.predict_at_test_points(xt.view(), false, par, &cancelled)
                .map(|_| ()),
        );
        let c = gp.centroids().row(4).to_vec();
        interrupted(gp.build_at(&c, &cancelled).map(|_| ()));
    }
    // Nothing was left half-built: every GP builds and predicts as before.
    assert_eq!(
        gp.build_all(Parallelism::Rayon, &Monitor::default())
            .unwrap(),
        10
    );
    let again = gp
        .predict(xt.view(), true, Parallelism::Rayon, &Monitor::default())
        .unwrap();
    assert_eq!(again.mean, p.mean);
    assert_eq!(again.var, p.var);
}
