//! The feature-space GP (`docs/math/gp.rst`, "Feature-space GP") on any
//! explicit real feature map `Φ`: fitted from the sufficient statistics of
//! [`crate::stats`] (accumulated over row chunks, merged exactly), then one
//! `D × D` Cholesky.

use faer::{MatMut, MatRef, Par};
use ndarray::{s, Array1, Array2, ArrayView1, ArrayView2};
use rayon::prelude::*;

use super::{check_positive, MeanAndVariance};
use crate::error::{Error, Result};
use crate::feature_map::{self, FeatureMap};
use crate::gpu::Device;
use crate::linalg::{as_faer, mirror_lower, Cholesky};
use crate::progress::Monitor;
use crate::real::{all_finite, Real};
use crate::stats::FeatureStats;
use crate::threads::Parallelism;

/// `ln 2π`.
const LN_2PI: f64 = 1.837_877_066_409_345_5;

/// A fitted feature-space GP (`docs/math/gp.rst`, "Feature-space GP"):
/// `L_A = chol(ΦᵀΦ/σ_n² + I)` and `β = A^{−1}Φᵀ(y − ȳ)/σ_n²`; predictions
/// `μ* = φ*ᵀβ + ȳ`, `v* = ‖L_A^{−1}φ*‖²`, `v*_y = v* + σ_n²`.
#[derive(Clone, Debug)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct FeatureGp {
    /// The factor `L_A`.
    pub chol: Cholesky,
    /// `β = A^{−1}Φᵀ(y − ȳ)/σ_n²`.
    pub beta: Array1<f64>,
    /// The target mean added back to predictions (0 without centering).
    pub y_mean: f64,
    /// The noise variance `σ_n²`.
    pub noise_variance: f64,
    /// The feature-space log marginal likelihood of the centered targets.
    pub lml: f64,
}

impl FeatureGp {
    /// The prior GP of a `width`-feature map (no data: `A = I`, `β = 0`), what
    /// a localized-GP centroid without rows predicts
    /// (`docs/math/localized.rst`).
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] for a noise variance that is not finite
    /// and `> 0`, or a width whose `width × width` factor exceeds the memory
    /// available.
    pub fn prior(width: usize, noise_variance: f64) -> Result<Self> {
        check_positive("noise_variance", noise_variance)?;
        FeatureStats::check_size("n_components", width, 1)?;
        let eye = Array2::<f64>::eye(width);
        Ok(FeatureGp {
            chol: Cholesky::new(as_faer(eye.view()), Parallelism::Sequential)?,
            beta: Array1::zeros(width),
            y_mean: 0.0,
            noise_variance,
            lml: 0.0,
        })
    }

    /// Fits from sufficient statistics; `center` subtracts the target mean
    /// (the default of `docs/math/gp.rst`). The LML uses the matrix determinant
    /// lemma (`docs/math/gp.rst`, "Feature-space GP").
    pub fn fit(
        stats: &FeatureStats,
        noise_variance: f64,
        center: bool,
        par: Parallelism,
    ) -> Result<Self> {
        check_positive("noise_variance", noise_variance)?;
        stats.validate()?;
        if stats.n == 0 {
            return Err(Error::invalid("X", "needs at least one training row"));
        }
        let d = stats.n_features();
        let mut a = stats.gram.mapv(|v| v / noise_variance);
        mirror_lower(a.view_mut());
        for i in 0..d {
            a[(i, i)] += 1.0;
        }
        let chol = Cholesky::new(as_faer(a.view()), par)?;
        drop(a);
        let (b, yty) = stats.centered(center);
        let beta_raw = chol.solve_vec(b.view(), par);
        let quad: f64 = b.iter().zip(&beta_raw).map(|(p, q)| p * q).sum();
        let n = stats.n as f64;
        let lml = -(yty - quad / noise_variance) / (2.0 * noise_variance)
            - 0.5 * chol.log_det()
            - 0.5 * n * noise_variance.ln()
            - 0.5 * n * LN_2PI;
        let beta = Array1::from(beta_raw).mapv(|v| v / noise_variance);
        Ok(Self {
            chol,
            beta,
            y_mean: if center { stats.y_mean() } else { 0.0 },
            noise_variance,
            lml,
        })
    }

    /// Predictive mean and latent variance (`None` unless `want_var`) for
    /// test features `phi` (`m × D`); see [`predict_features`].
    pub fn predict<T: Real>(
        &self,
        phi: ArrayView2<'_, T>,
        want_var: bool,
        par: Parallelism,
    ) -> Result<MeanAndVariance> {
        predict_features(
            self.chol.l(),
            self.beta.view(),
            self.y_mean,
            phi,
            want_var,
            par,
        )
    }

    /// Fits on the features `Φ(x)` of any [`FeatureMap`]: the statistics of
    /// [`feature_map::accumulate`] on `device` (`chunk_rows` rows at a time
    /// on the CPU, reported to and checked against `monitor`), then
    /// [`FeatureGp::fit`].
    ///
    /// # Errors
    /// As [`feature_map::accumulate`] and [`FeatureGp::fit`].
    #[allow(clippy::too_many_arguments)]
    pub fn fit_map<M: FeatureMap, T: Real>(
        map: &M,
        x: ArrayView2<'_, T>,
        y: ArrayView1<'_, f64>,
        noise_variance: f64,
        center: bool,
        device: Device,
        chunk_rows: usize,
        par: Parallelism,
        monitor: &Monitor,
    ) -> Result<Self> {
        FeatureStats::check_size("n_components", map.n_components(), 1)?;
        let mut stats = FeatureStats::new(map.n_components());
        feature_map::accumulate(map, x, y, &mut stats, device, chunk_rows, par, monitor)?;
        Self::fit(&stats, noise_variance, center, par)
    }

    /// Predicts at the rows of `x` through any [`FeatureMap`] (the map the
    /// GP was fitted on): `chunk_rows` rows at a time are transformed on
    /// `device` ([`feature_map::transform_into`]) and predicted by
    /// [`FeatureGp::predict`].
    ///
    /// # Errors
    /// As [`feature_map::transform_into`] and [`FeatureGp::predict`];
    /// [`Error::InvalidParameter`] for `chunk_rows = 0`;
    /// [`Error::Interrupted`] once `monitor` is cancelled (it is checked
    /// before every chunk, and gets the stage "rows predicted").
    #[allow(clippy::too_many_arguments)]
    pub fn predict_map<M: FeatureMap, T: Real>(
        &self,
        map: &M,
        x: ArrayView2<'_, T>,
        want_var: bool,
        device: Device,
        chunk_rows: usize,
        par: Parallelism,
        monitor: &Monitor,
    ) -> Result<MeanAndVariance> {
        let n = x.nrows();
        let mut mean = Array1::zeros(n);
        let mut var = want_var.then(|| Array1::zeros(n));
        let chunks = feature_map::Chunks {
            device,
            chunk_rows,
            par,
            monitor,
        };
        chunks.for_each(map, x, "rows predicted", |start, phi| {
            let rows = start..start + phi.nrows();
            let (m, v) = self.predict(phi, want_var, par)?;
            mean.slice_mut(s![rows.clone()]).assign(&m);
            if let (Some(var), Some(v)) = (var.as_mut(), v) {
                var.slice_mut(s![rows]).assign(&v);
            }
            Ok(())
        })?;
        Ok((mean, var))
    }
}

/// Test rows per task of the variance solve: one `D × 256` right-hand side
/// (2 MB at `D = 1,024`) solved sequentially per rayon task, the tasks
/// independent, where faer's own parallel solve of one wide block would
/// synchronize its threads at every level of its recursion.
const PREDICT_BLOCK: usize = 256;

/// Feature-space prediction from stored pieces (`docs/math/gp.rst`,
/// "Feature-space GP"): `μ* = φ*ᵀβ + ȳ` and `v* = ‖L_A^{−1}φ*‖²` (a triangular
/// solve with `PREDICT_BLOCK` test rows as right-hand sides per task). `l` is
/// the factor `L_A` (`D × D`, any strides; only its lower triangle is read).
pub fn predict_features<T: Real>(
    l: MatRef<'_, f64>,
    beta: ArrayView1<'_, f64>,
    y_mean: f64,
    phi: ArrayView2<'_, T>,
    want_var: bool,
    par: Parallelism,
) -> Result<MeanAndVariance> {
    let d = l.nrows();
    Error::check_sizes(
        d,
        [
            (
                "columns of the Cholesky factor (it must be square)",
                l.ncols(),
            ),
            ("length of the fitted coefficients", beta.len()),
            (
                "number of features (columns of the test features)",
                phi.ncols(),
            ),
        ],
    )?;
    if !all_finite(phi, par) {
        return Err(Error::NonFinite { name: "features" });
    }
    let beta = beta.to_vec();
    let m = phi.nrows();
    // Plain vectors: every task writes its own disjoint stretch of both
    // (`var` stays zero and is dropped without variances).
    let mut mean = vec![0.0; m];
    let mut var = vec![0.0; m];
    let dot = |x: &[f64], y: &[f64]| x.iter().zip(y).map(|(a, b)| a * b).sum::<f64>();
    // One task: the rows from `start` (`means.len()` of them).
    let block = |buf: &mut Vec<f64>, start: usize, means: &mut [f64], vars: &mut [f64]| {
        let b = means.len();
        // Φ*ᵀ as a D × b column-major matrix: column j is test row j.
        buf.resize(d * b, 0.0);
        for (j, row) in phi
            .slice(ndarray::s![start..start + b, ..])
            .rows()
            .into_iter()
            .enumerate()
        {
            let col = &mut buf[j * d..(j + 1) * d];
            for (o, x) in col.iter_mut().zip(row) {
                *o = x.to_f64_exact();
            }
            means[j] = dot(col, &beta) + y_mean;
        }
        if want_var && d > 0 {
            faer::linalg::triangular_solve::solve_lower_triangular_in_place(
                l,
                MatMut::from_column_major_slice_mut(&mut buf[..d * b], d, b),
                Par::Seq,
            );
            for (v, c) in vars.iter_mut().zip(buf.chunks_exact(d)) {
                *v = dot(c, c);
            }
        }
    };
    if par.is_parallel() {
        mean.par_chunks_mut(PREDICT_BLOCK)
            .zip(var.par_chunks_mut(PREDICT_BLOCK))
            .enumerate()
            .for_each_init(Vec::new, |buf, (t, (mc, vc))| {
                block(buf, t * PREDICT_BLOCK, mc, vc)
            });
    } else {
        let mut buf = Vec::new();
        let tasks = mean
            .chunks_mut(PREDICT_BLOCK)
            .zip(var.chunks_mut(PREDICT_BLOCK));
        for (t, (mc, vc)) in tasks.enumerate() {
            block(&mut buf, t * PREDICT_BLOCK, mc, vc);
        }
    }
    let (mean, var) = (Array1::from(mean), want_var.then(|| Array1::from(var)));
    crate::gp::check_prediction(&mean, var.as_ref())?;
    Ok((mean, var))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn random_phi(n: usize, d: usize, seed: u64) -> Array2<f64> {
        use rand::Rng as _;
        let mut rng = crate::rng::seeded(seed);
        Array2::from_shape_fn((n, d), |_| rng.random_range(-1.0..1.0))
    }

    /// The exact GP of `docs/math/gp.rst`, "Exact GP" with `K = ΦΦᵀ` (centered
    /// targets), by brute force.
    fn exact_with_gram(
        phi: &Array2<f64>,
        y: &Array1<f64>,
        phis: &Array2<f64>,
        nv: f64,
    ) -> (f64, Array1<f64>, Array1<f64>) {
        let n = phi.nrows();
        let ym = y.mean().unwrap();
        let yc = y.mapv(|v| v - ym);
        let ky = phi.dot(&phi.t()) + Array2::<f64>::eye(n) * nv;
        let chol = Cholesky::new(as_faer(ky.view()), Parallelism::Sequential).unwrap();
        let alpha = Array1::from(chol.solve_vec(yc.view(), Parallelism::Sequential));
        let lml = -0.5 * yc.dot(&alpha) - 0.5 * chol.log_det() - 0.5 * n as f64 * LN_2PI;
        let ks = phi.dot(&phis.t());
        let mu = ks.t().dot(&alpha) + ym;
        let mut var = Array1::zeros(phis.nrows());
        for j in 0..phis.nrows() {
            let kj = ks.column(j).to_owned();
            let s = Array1::from(chol.solve_vec(kj.view(), Parallelism::Sequential));
            var[j] = phis.row(j).dot(&phis.row(j)) - kj.dot(&s);
        }
        (lml, mu, var)
    }

    #[test]
    fn feature_space_equals_exact_with_k_equal_phi_phi_t() {
        for (n, d) in [(7, 4), (30, 12), (5, 9)] {
            let phi = random_phi(n, d, n as u64);
            let y: Array1<f64> = (0..n).map(|i| (i as f64).sin() + 3.0).collect();
            let phis = random_phi(6, d, 99);
            let nv = 0.3;
            let mut st = FeatureStats::new(d);
            st.accumulate(phi.view(), y.view(), Parallelism::Rayon)
                .unwrap();
            let gp = FeatureGp::fit(&st, nv, true, Parallelism::Rayon).unwrap();
            let (mu, var) = gp.predict(phis.view(), true, Parallelism::Rayon).unwrap();
            let (lml, mu_e, var_e) = exact_with_gram(&phi, &y, &phis, nv);
            assert!(
                (gp.lml - lml).abs() < 1e-10 * (1.0 + lml.abs()),
                "{} vs {lml}",
                gp.lml
            );
            assert!((&mu - &mu_e).iter().all(|v| v.abs() < 1e-10));
            assert!((&var.unwrap() - &var_e).iter().all(|v| v.abs() < 1e-10));
        }
    }

    #[test]
    fn merged_and_chunked_statistics_equal_one_pass() {
        let (n, d) = (50, 6);
        let phi = random_phi(n, d, 1);
        let y: Array1<f64> = (0..n).map(|i| 1e3 + (i as f64 * 0.7).cos()).collect();
        let mut one = FeatureStats::new(d);
        one.accumulate(phi.view(), y.view(), Parallelism::Rayon)
            .unwrap();
        let mut a = FeatureStats::new(d);
        let mut b = FeatureStats::new(d);
        a.accumulate(
            phi.slice(ndarray::s![..13, ..]),
            y.slice(ndarray::s![..13]),
            Parallelism::Rayon,
        )
        .unwrap();
        a.accumulate(
            phi.slice(ndarray::s![13..20, ..]),
            y.slice(ndarray::s![13..20]),
            Parallelism::Rayon,
        )
        .unwrap();
        b.accumulate(
            phi.slice(ndarray::s![20.., ..]),
            y.slice(ndarray::s![20..]),
            Parallelism::Sequential,
        )
        .unwrap();
        a.merge(&b).unwrap();
        assert_eq!(a.n, 50);
        assert!((a.y_mean() - one.y_mean()).abs() < 1e-12);
        let phis = random_phi(4, d, 5);
        let g1 = FeatureGp::fit(&one, 0.1, true, Parallelism::Rayon).unwrap();
        let g2 = FeatureGp::fit(&a, 0.1, true, Parallelism::Rayon).unwrap();
        assert!((g1.lml - g2.lml).abs() < 1e-9 * g1.lml.abs());
        let (m1, v1) = g1.predict(phis.view(), true, Parallelism::Rayon).unwrap();
        let (m2, v2) = g2.predict(phis.view(), true, Parallelism::Rayon).unwrap();
        assert!((&m1 - &m2).iter().all(|v| v.abs() < 1e-9));
        assert!((&v1.unwrap() - &v2.unwrap())
            .iter()
            .all(|v| v.abs() < 1e-12));
        // Merging into empty statistics copies; merging empties changes nothing.
        let mut e = FeatureStats::new(d);
        e.merge(&one).unwrap();
        e.merge(&FeatureStats::new(d)).unwrap();
        assert_eq!(e, one);
        assert!(e.merge(&FeatureStats::new(d + 1)).is_err());
    }

    #[test]
    fn blocked_prediction_matches_one_solve_per_row_any_threads_and_layout() {
        // More test rows than one task holds, and a partial last task.
        let (n, d, m) = (40, 7, 2 * PREDICT_BLOCK + 37);
        let phi = random_phi(n, d, 3);
        let y: Array1<f64> = (0..n).map(|i| (i as f64 * 0.4).sin()).collect();
        let mut st = FeatureStats::new(d);
        st.accumulate(phi.view(), y.view(), Parallelism::Sequential)
            .unwrap();
        let gp = FeatureGp::fit(&st, 0.2, true, Parallelism::Sequential).unwrap();
        let phis = random_phi(m, d, 4);
        let (mu, var) = gp.predict(phis.view(), true, Parallelism::Rayon).unwrap();
        let var = var.unwrap();
        let (mu_s, var_s) = gp
            .predict(phis.view(), true, Parallelism::Sequential)
            .unwrap();
        assert_eq!(mu, mu_s);
        assert_eq!(Some(var.clone()), var_s);
        // The factor as Python stores it (any layout) gives the same values.
        let l = gp.chol.l_array();
        let l_rows = l.as_standard_layout().into_owned();
        for lv in [l.view(), l_rows.view()] {
            let (mu_l, var_l) = predict_features(
                as_faer(lv),
                gp.beta.view(),
                gp.y_mean,
                phis.view(),
                true,
                Parallelism::Rayon,
            )
            .unwrap();
            assert!((&mu_l - &mu).iter().all(|v| v.abs() < 1e-12));
            assert!((&var_l.unwrap() - &var).iter().all(|v| v.abs() < 1e-12));
        }
        // Mean only: the same means, no variances.
        let (mu_only, none) = gp.predict(phis.view(), false, Parallelism::Rayon).unwrap();
        assert_eq!(mu_only, mu);
        assert!(none.is_none());
        // Each row against its own solve v = φᵀ A⁻¹ φ.
        for j in [0, PREDICT_BLOCK - 1, PREDICT_BLOCK, m - 1] {
            let row = phis.row(j);
            let x = gp.chol.solve_vec(row, Parallelism::Sequential);
            let want: f64 = row.iter().zip(&x).map(|(a, b)| a * b).sum();
            assert!((var[j] - want).abs() < 1e-12 * (1.0 + want), "row {j}");
            let mean = row.dot(&gp.beta) + gp.y_mean;
            assert!((mu[j] - mean).abs() < 1e-12 * (1.0 + mean.abs()), "row {j}");
        }
    }

    #[test]
    fn fit_and_predict_through_a_feature_map_equal_the_statistics_path() {
        use crate::fourier::{FourierConfig, FourierFeatures};
        let (n, d) = (120, 3);
        let x = random_phi(n, d, 6);
        let y: Array1<f64> = (0..n).map(|i| (i as f64 * 0.3).sin() + 2.0).collect();
        let xs = random_phi(300, d, 7);
        let map = FourierFeatures::fit(&FourierConfig::new(33), d, 1).unwrap();
        let par = Parallelism::Rayon;
        let gp = FeatureGp::fit_map(
            &map,
            x.view(),
            y.view(),
            0.1,
            true,
            Device::Cpu,
            50,
            par,
            &Monitor::default(),
        )
        .unwrap();
        // The statistics path: the same chunks transformed and added.
        let mut stats = FeatureStats::new(33);
        for k0 in (0..n).step_by(50) {
            let k1 = (k0 + 50).min(n);
            let phi = map.transform(x.slice(s![k0..k1, ..]), par).unwrap();
            stats
                .accumulate(phi.view(), y.slice(s![k0..k1]), par)
                .unwrap();
        }
        let want = FeatureGp::fit(&stats, 0.1, true, par).unwrap();
        assert_eq!((gp.beta.clone(), gp.lml), (want.beta.clone(), want.lml));
        let phis = map.transform(xs.view(), par).unwrap();
        let (mu, var) = want.predict(phis.view(), true, par).unwrap();
        let var = var.unwrap();
        // One chunk: the same call; smaller chunks: the same rows' values.
        let (m1, v1) = gp
            .predict_map(
                &map,
                xs.view(),
                true,
                Device::Cpu,
                300,
                par,
                &Monitor::default(),
            )
            .unwrap();
        assert_eq!((m1, v1), (mu.clone(), Some(var.clone())));
        let (m2, v2) = gp
            .predict_map(
                &map,
                xs.view(),
                true,
                Device::Cpu,
                37,
                par,
                &Monitor::default(),
            )
            .unwrap();
        assert!((&m2 - &mu).iter().all(|v| v.abs() < 1e-12));
        assert!((&v2.unwrap() - &var).iter().all(|v| v.abs() < 1e-12));
        let (m3, none) = gp
            .predict_map(
                &map,
                xs.view(),
                false,
                Device::Cpu,
                37,
                par,
                &Monitor::default(),
            )
            .unwrap();
        assert_eq!(m3, m2);
        assert!(none.is_none());
        assert!(gp
            .predict_map(
                &map,
                xs.view(),
                true,
                Device::Cpu,
                0,
                par,
                &Monitor::default()
            )
            .is_err());
    }

    #[test]
    fn bad_inputs() {
        let mut st = FeatureStats::new(3);
        assert!(FeatureGp::fit(&st, 0.1, true, Parallelism::Rayon).is_err());
        let phi = random_phi(4, 2, 0);
        let y = Array1::zeros(4);
        assert!(matches!(
            st.accumulate(phi.view(), y.view(), Parallelism::Rayon),
            Err(Error::ShapeMismatch { .. })
        ));
        let phi = random_phi(4, 3, 0);
        let ynan = Array1::from(vec![0.0, f64::NAN, 0.0, 0.0]);
        assert_eq!(
            st.accumulate(phi.view(), ynan.view(), Parallelism::Rayon),
            Err(Error::NonFinite { name: "y" })
        );
        st.accumulate(phi.view(), y.view(), Parallelism::Rayon)
            .unwrap();
        assert!(FeatureGp::fit(&st, -1.0, true, Parallelism::Rayon)
            .unwrap_err()
            .to_string()
            .contains("noise_variance"));
        let gp = FeatureGp::fit(&st, 1.0, true, Parallelism::Rayon).unwrap();
        assert!(gp
            .predict(random_phi(2, 5, 0).view(), true, Parallelism::Rayon)
            .is_err());
    }
}
