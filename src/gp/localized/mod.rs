//! The localized Maclaurin GP (`docs/math/localized.rst`, 000 Algorithm 1): one
//! optimized allocation and one set of random sketch weights, shared by
//! every centroid; one feature-space GP (`docs/math/gp.rst`, "Feature-space
//! GP") per centroid `c` on the map `Φ(x − c)`; each test point predicted by
//! its nearest centroid, or (the `centers = test` mode) by a GP centered at the
//! test point itself, which makes its cross-covariances and prior variance
//! exact (`docs/math/localized.rst`, "The exactness property").
//!
//! Beyond the paper: a training row whose feature vector at `c` is
//! negligible is skipped. With `r² = ‖x − c‖²/l²` the map satisfies
//! `‖Φ(x − c)‖² ≤ σ² e^{−r²} (1 + Σ_n b_n r^{2n})` (see [`NormBound`]); a row
//! is skipped when this bound is below `(tol·σ)²`, so `tol` is relative to
//! the prior scale `σ` (the norm of `Φ(0)`). The bound decreases for
//! `r² ≥ p`, so it reduces to one distance cutoff per model: a centroid's
//! cost is that of its neighbourhood, not of all `N` rows.
//!
//! The model is here; the bound ([`NormBound`]), the per-centroid
//! statistics (their feature kernels and the projection cache) and the
//! choice of the threshold ([`ThresholdSearch`]) are in their own files.
//!
//! The model is specific to the Maclaurin map rather than generic over
//! [`crate::feature_map::CenteredFeatureMap`]: the bound is computed from
//! the sketch weights of its degree blocks, the centroid statistics reuse
//! the training rows' sketch-factor projections (`v_j(x − c) = v_j(x) −
//! v_j(c)`, a property of the linear sketch factors, not of a centered map
//! in general), and the GPU path runs the Maclaurin kernels of
//! [`crate::gpu::localized_gps`]. Another centered map would share only the
//! clustering and the per-centroid GP of [`FeatureGp`].

use std::sync::OnceLock;
use std::time::Instant;

use ndarray::{s, Array1, Array2, ArrayView1, ArrayView2, Axis};
use rayon::prelude::*;

use super::cluster::{farthest_point, nearest};
use super::features::FeatureGp;
use super::{check_positive, MeanAndVariance};
use crate::error::{Error, Result};
use crate::gpu::Device;
use crate::maclaurin::{MaclaurinConfig, MaclaurinKernel, MaclaurinMap};
use crate::progress::Monitor;
use crate::real::{all_finite, all_finite_scaled, Real};
use crate::stats::{FeatureStats, ShiftedSums as _};
use crate::threads::Parallelism;

mod auto;
mod centroid_stats;
mod norm_bound;
#[cfg(feature = "serde")]
mod stored;

#[cfg(test)]
mod tests;

pub use auto::{
    ThresholdChoice, ThresholdCriterion, ThresholdSearch, DEFAULT_FOLDS, DEFAULT_MAX_SCORED,
    DEFAULT_THRESHOLDS,
};
use centroid_stats::{group_size, project_rows_t, CentroidScratch};

/// Test points per block of one centroid's predictions: a block's features
/// take `PREDICT_ROWS × width` values, whatever the number of test points
/// near the centroid.
const PREDICT_ROWS: usize = 4096;
pub use norm_bound::NormBound;

/// Settings of [`LocalizedMaclaurinGp`] (`docs/math/localized.rst`,
/// "Training").
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct LocalizedConfig {
    /// The Maclaurin map (Gaussian kernel; `l`, `σ²`, `D`, sketch, ...).
    pub map: MaclaurinConfig,
    /// Noise variance `σ_n² > 0`.
    pub noise_variance: f64,
    /// Clustering threshold `θ` in units of the length scale (`θ/l`), `> 0`.
    pub threshold: Option<f64>,
    /// Maximum number of centroids (`>= 1`).
    pub n_clusters: Option<usize>,
    /// Rows whose feature-norm bound is below `tol·σ` are skipped (`>= 0`;
    /// 0 keeps every row).
    pub tol: f64,
    /// Subtract the training-target mean (`docs/math/gp.rst`).
    pub center_y: bool,
    /// Where the per-centroid statistics are accumulated: [`Device::Gpu`]
    /// runs [`crate::gpu::localized_gps`] (resolved by the caller: `Auto` is
    /// treated as `Cpu`).
    pub device: Device,
}

impl LocalizedConfig {
    /// Default settings for `n_components` features, those of Python's
    /// `LocalizedMaclaurinGPR`: the Gaussian-kernel map of
    /// [`MaclaurinConfig::new`] (`l = σ² = 1`, TensorSRHT, optimized
    /// allocation), `σ_n² = 1`, no threshold and no cap (one cluster, the
    /// plain Maclaurin GP at the training mean), `tol = 1e-12`, centered
    /// targets, the CPU. Set the fields that differ:
    ///
    /// ```
    /// use randfeat_rs::gp::localized::LocalizedConfig;
    ///
    /// let mut cfg = LocalizedConfig::new(64);
    /// cfg.map.length_scale = 0.5;
    /// cfg.noise_variance = 0.01;
    /// cfg.threshold = Some(1.0); // a centroid within 1·l of every input
    /// assert_eq!(cfg.map.n_components, 64);
    /// ```
    pub fn new(n_components: usize) -> Self {
        Self {
            map: MaclaurinConfig::new(MaclaurinKernel::Gaussian, n_components),
            noise_variance: 1.0,
            threshold: None,
            n_clusters: None,
            tol: 1e-12,
            center_y: true,
            device: Device::Cpu,
        }
    }
}

/// Predictions for some test rows: `(rows, means, latent variances)`.
type Part = (Vec<usize>, Array1<f64>, Option<Array1<f64>>);

/// Wall-clock seconds of the fit phases (the two run side by side when
/// the fit is parallel, so they may add up to more than the fit).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct FitTimings {
    /// Centering, pair statistics, allocation and weight draws
    /// (`docs/math/maclaurin.rst`, "Optimized allocation").
    pub allocation: f64,
    /// Farthest-point clustering (`docs/math/localized.rst`, "Training" step
    /// 3).
    pub clustering: f64,
}

/// A prediction with its cost split.
#[derive(Clone, Debug)]
pub struct LocalizedPrediction {
    /// Predictive mean `μ*` (with the target mean added back).
    pub mean: Array1<f64>,
    /// Latent variance `v*` (when asked for).
    pub var: Option<Array1<f64>>,
    /// Per-centroid (or per-test-point) GPs built by this call.
    pub n_built: usize,
    /// Seconds spent building them (`docs/math/localized.rst`, "Training" step
    /// 4).
    pub build_seconds: f64,
    /// Seconds spent on assignment and the predictive formulas
    /// (`docs/math/localized.rst`, "Prediction").
    pub predict_seconds: f64,
}

/// A fitted localized Maclaurin GP (`docs/math/localized.rst`).
///
/// The per-centroid GPs (`L_c`, `β_c` of `docs/math/localized.rst`, "Training"
/// step 4) are built on first use (by [`Self::build_all`] or by a prediction
/// that assigns a test point to the centroid), in parallel over centroids, and
/// cached: a centroid's GP depends only on the fitted data, map and centroid,
/// so predictions are the same as with every GP built at fit, at the cost of
/// the centroids that are actually used.
///
/// With the feature "serde" it is stored by value (the centroid GPs built
/// so far included) and loaded without a refit.
#[derive(Debug)]
pub struct LocalizedMaclaurinGp {
    config: LocalizedConfig,
    map: MaclaurinMap,
    x: Array2<f64>,
    /// `Xᵀ` (`d × N`), so distances to a centroid vectorize over rows.
    xt: Array2<f64>,
    y: Array1<f64>,
    y_mean: f64,
    centroids: Array2<f64>,
    cutoff_sq: f64,
    projections: Option<Vec<Array2<f64>>>,
    predictors: Vec<OnceLock<FeatureGp>>,
    timings: FitTimings,
}

impl LocalizedMaclaurinGp {
    /// Fits: the training mean, the optimized allocation on the rows
    /// centered there and the random weights (all drawn from `seed` before
    /// and independently of the clustering, so `θ` never changes them),
    /// then the farthest-point clustering with `θ·l` and/or `n_clusters`.
    ///
    /// `monitor` gets the stage "centroids" of the clustering (the
    /// allocation, which runs beside it, is cancelled with it but not
    /// reported) and a message each for the allocation and the clustering;
    /// every part checks it between blocks of work.
    pub fn fit<T: Real>(
        x: ArrayView2<'_, T>,
        y: ArrayView1<'_, f64>,
        config: &LocalizedConfig,
        seed: u64,
        par: Parallelism,
        monitor: &Monitor,
    ) -> Result<Self> {
        check_positive("noise_variance", config.noise_variance)?;
        if !config.map.kernel.is_gaussian() {
            return Err(Error::invalid(
                "kernel",
                "the localized GP needs the Gaussian kernel (only it may be centered)",
            ));
        }
        if let Some(t) = config.threshold
            && !(t.is_finite() && t > 0.0)
        {
            return Err(Error::invalid(
                "threshold",
                format!("must be a finite number > 0 (in units of the length scale), got {t}"),
            ));
        }
        if config.n_clusters == Some(0) {
            return Err(Error::invalid("n_clusters", "must be >= 1, got 0"));
        }
        if !(config.tol.is_finite() && config.tol >= 0.0) {
            return Err(Error::invalid(
                "tol",
                format!("must be a finite number >= 0, got {}", config.tol),
            ));
        }
        if y.len() != x.nrows() {
            return Err(Error::ShapeMismatch {
                name: "length of y (the number of rows of X)",
                expected: x.nrows(),
                got: y.len(),
            });
        }
        if y.iter().any(|v| !v.is_finite()) {
            return Err(Error::NonFinite { name: "y" });
        }
        // The allocation (parallel over pair blocks) and the clustering
        // (sequential passes) are independent: run them side by side. The
        // clustering starts from the training mean, computed here as the
        // map computes its center (checked equal below).
        // (Non-finite rows would keep the clustering going forever.)
        if !all_finite(x, par) {
            return Err(Error::NonFinite { name: "X" });
        }
        // Refuse sizes that cannot work before the clustering starts beside
        // the allocation: the map, the projections of the rows on it
        // (`N × D` float64) and one cluster's feature-space GP.
        MaclaurinMap::check_config(&config.map, x.ncols())?;
        check_squared_scale(x, config.map.length_scale, par)?;
        let width = config.map.n_components;
        crate::alloc::check_alloc(
            "n_components",
            &format!(
                "the projections of the {} training rows on {width} features (float64)",
                x.nrows()
            ),
            &[x.nrows(), width],
            8,
        )?;
        crate::stats::FeatureStats::check_size("n_components", width, 1)?;
        let center = training_mean(x);
        let l = config.map.length_scale;
        let allocate = || {
            let t0 = Instant::now();
            let map = MaclaurinMap::fit(x, &config.map, seed, par, &monitor.linked());
            (map, t0.elapsed().as_secs_f64())
        };
        let cluster = || {
            let t1 = Instant::now();
            let centroids = farthest_point(
                x,
                &center,
                config.threshold.map(|t| t * l),
                config.n_clusters,
                par,
                monitor,
            );
            (centroids, t1.elapsed().as_secs_f64())
        };
        let ((map, allocation), (centroids, clustering)) = if par.is_parallel() {
            rayon::join(allocate, cluster)
        } else {
            (allocate(), cluster())
        };
        let map = map?;
        let centroids = centroids?;
        if map.center() != Some(&center[..]) {
            return Err(Error::Internal(
                "the clustering's start differs from the map's center".into(),
            ));
        }
        monitor.message(format!(
            "allocation {:?} (degree {}) in {allocation:.3} s",
            map.allocation(),
            map.degree()
        ));
        monitor.message(format!(
            "{} centroid(s) in {clustering:.3} s",
            centroids.nrows()
        ));
        let y_mean = if config.center_y && !y.is_empty() {
            y.sum() / y.len() as f64
        } else {
            0.0
        };
        let cutoff_sq = NormBound::of(&map).cutoff(config.tol) * l * l;
        let predictors = (0..centroids.nrows()).map(|_| OnceLock::new()).collect();
        let x = x.mapv(|v| v.to_f64_exact());
        let projections = project_rows_t(&map, x.view(), 1.0 / l, par, monitor)?;
        Ok(Self {
            config: config.clone(),
            projections,
            xt: x.t().as_standard_layout().into_owned(),
            x,
            y: y.mapv(|v| v - y_mean),
            y_mean,
            centroids,
            cutoff_sq,
            predictors,
            timings: FitTimings {
                allocation,
                clustering,
            },
            map,
        })
    }

    /// The settings the model was fitted with.
    pub fn config(&self) -> &LocalizedConfig {
        &self.config
    }

    /// The shared feature map.
    pub fn map(&self) -> &MaclaurinMap {
        &self.map
    }

    /// The centroids (`|C| × d`; row 0 is the training mean).
    pub fn centroids(&self) -> ArrayView2<'_, f64> {
        self.centroids.view()
    }

    /// The training-target mean added back to predictions (0 without centering).
    pub fn y_mean(&self) -> f64 {
        self.y_mean
    }

    /// The fit's timings.
    pub fn timings(&self) -> FitTimings {
        self.timings
    }

    /// The squared distance beyond which a training row is skipped (∞ when
    /// `tol = 0`).
    pub fn cutoff_sq(&self) -> f64 {
        self.cutoff_sq
    }

    /// The feature-space GP (`docs/math/gp.rst`, "Feature-space GP") on
    /// `Φ(X − c)`, built from the rows within the cutoff (the prior, `L = I`
    /// and `β = 0`, when there are none). Returns it and the rows used.
    /// `monitor` is checked between row blocks.
    pub fn build_at(&self, c: &[f64], monitor: &Monitor) -> Result<(FeatureGp, usize)> {
        self.build_with(c, &mut CentroidScratch::default(), monitor)
    }

    /// [`Self::build_at`] with caller-owned scratch buffers.
    fn build_with(
        &self,
        c: &[f64],
        scratch: &mut CentroidScratch,
        monitor: &Monitor,
    ) -> Result<(FeatureGp, usize)> {
        let (stats, used) = self.centroid_stats(c, scratch, monitor)?;
        Ok((self.gp_from(&stats, used)?, used))
    }

    /// The GP of a centroid from its statistics (the prior when no row is
    /// used).
    fn gp_from(&self, stats: &FeatureStats, used: usize) -> Result<FeatureGp> {
        let noise = self.config.noise_variance;
        if used == 0 {
            return FeatureGp::prior(self.map.width(), noise);
        }
        // The statistics are summed here, not through the checked
        // `FeatureStats::accumulate` alone: sums beyond the float range (a
        // kernel variance near it) are refused as overflow, naming the cure.
        stats.check_sums()?;
        FeatureGp::fit(stats, noise, false, Parallelism::Sequential)
    }

    /// Builds the GPs of the listed centroids that are not built yet, in
    /// parallel over centroids (each one sequential, so the result does not
    /// depend on the thread count). Returns how many were built. `monitor`
    /// gets the stage "centroid GPs" (one unit per GP built) and is checked
    /// between row blocks (on the GPU: before each centroid is packed).
    fn ensure_built(&self, which: &[usize], par: Parallelism, monitor: &Monitor) -> Result<usize> {
        let todo: Vec<usize> = which
            .iter()
            .copied()
            .filter(|&c| self.predictors[c].get().is_none())
            .collect();
        let total = todo.len();
        if total == 0 {
            return Ok(0);
        }
        monitor.stage("centroid GPs", total as u64);
        if self.config.device == Device::Gpu {
            let mut scratch = CentroidScratch::default();
            let neighbours = |k: usize| -> Result<Vec<u32>> {
                monitor.check()?;
                let c = self
                    .centroids
                    .row(k)
                    .to_slice()
                    .ok_or_else(|| Error::Internal("centroid rows are contiguous".into()))?;
                self.distances(c, &mut scratch, 0)?;
                let n = self.x.nrows();
                Ok((0..n)
                    .filter(|&i| scratch.dd[i] < self.cutoff_sq)
                    .map(|i| i as u32)
                    .collect())
            };
            let gps = crate::gpu::localized_gps(
                &self.map,
                self.x.view(),
                self.y.view(),
                self.centroids.view(),
                &todo,
                neighbours,
                |stats, used| {
                    let gp = self.gp_from(stats, used);
                    monitor.advance(1);
                    gp
                },
                par,
            )?;
            for (&c, gp) in todo.iter().zip(gps) {
                let _ = self.predictors[c].set(gp);
            }
            monitor.message(format!("built {total}/{total} centroid GPs on the GPU"));
            return Ok(total);
        }
        let group = group_size(self.map.width());
        let work = |scratch: &mut CentroidScratch, ids: &[usize]| -> Result<()> {
            monitor.check()?;
            let cs = ids
                .iter()
                .map(|&c| self.centroids.row(c).to_slice())
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| Error::Internal("centroid rows are contiguous".into()))?;
            for (&c, (stats, used)) in ids.iter().zip(self.group_stats(&cs, scratch, monitor)?) {
                let _ = self.predictors[c].set(self.gp_from(&stats, used)?);
                monitor.advance(1);
            }
            Ok(())
        };
        if par.is_parallel() {
            todo.par_chunks(group)
                .try_for_each_init(CentroidScratch::default, work)?;
        } else {
            let mut scratch = CentroidScratch::default();
            todo.chunks(group)
                .try_for_each(|ids| work(&mut scratch, ids))?;
        }
        Ok(total)
    }

    /// Builds every centroid's GP (000 Algorithm 1 precomputes them all),
    /// reporting to and checking `monitor` as [`Self::predict`] does.
    pub fn build_all(&self, par: Parallelism, monitor: &Monitor) -> Result<usize> {
        let all: Vec<usize> = (0..self.centroids.nrows()).collect();
        self.ensure_built(&all, par, monitor)
    }

    /// Predicts `x` (`m × d`) by the nearest centroid's GP
    /// (`docs/math/localized.rst`, "Prediction"): builds the GPs of the
    /// centroids used, then `μ* = φ*ᵀβ_c + ȳ` and `v* = ‖L_c^{−1}φ*‖²` with
    /// `φ* = Φ(x* − c)`. Parallel over centroids; deterministic. `monitor` gets
    /// the stage "centroid GPs" when GPs are built and a summary message, and
    /// is checked between row blocks of every build and before every centroid's
    /// predictions.
    pub fn predict<T: Real>(
        &self,
        x: ArrayView2<'_, T>,
        want_var: bool,
        par: Parallelism,
        monitor: &Monitor,
    ) -> Result<LocalizedPrediction> {
        Error::check_n_features(self.x.ncols(), x.ncols())?;
        if !all_finite(x, par) {
            return Err(Error::NonFinite { name: "X" });
        }
        let t0 = Instant::now();
        let assign = nearest(self.centroids.view(), x, par, monitor)?;
        let mut groups: Vec<Vec<usize>> = vec![Vec::new(); self.centroids.nrows()];
        for (i, &c) in assign.iter().enumerate() {
            groups[c].push(i);
        }
        let used: Vec<usize> = (0..groups.len())
            .filter(|&c| !groups[c].is_empty())
            .collect();
        let t_assign = t0.elapsed().as_secs_f64();
        let t1 = Instant::now();
        let n_built = self.ensure_built(&used, par, monitor)?;
        let build_seconds = t1.elapsed().as_secs_f64();
        let t2 = Instant::now();
        let work = |&c: &usize| -> Result<(usize, Array1<f64>, Option<Array1<f64>>)> {
            monitor.check()?;
            let gp = self.predictors[c]
                .get()
                .ok_or_else(|| Error::Internal("centroid GP not built".into()))?;
            let center = self.centroids.row(c).to_vec();
            let group = &groups[c];
            let mut phi = crate::alloc::try_zeros2::<T>(
                "n_components",
                "a block of the test points' features",
                group.len().min(PREDICT_ROWS),
                self.map.width(),
            )?;
            let mut mean = Vec::with_capacity(group.len());
            let mut var = want_var.then(|| Vec::with_capacity(group.len()));
            for block in group.chunks(PREDICT_ROWS) {
                monitor.check()?;
                let mut p = phi.slice_mut(s![..block.len(), ..]);
                self.map.transform_centered_into(
                    x.select(Axis(0), block).view(),
                    &center,
                    p.view_mut(),
                    Parallelism::Sequential,
                )?;
                let (m, v) = gp.predict(p.view(), want_var, Parallelism::Sequential)?;
                mean.extend(m);
                if let (Some(all), Some(v)) = (var.as_mut(), v) {
                    all.extend(v);
                }
            }
            Ok((c, Array1::from(mean), var.map(Array1::from)))
        };
        let parts: Vec<_> = if par.is_parallel() {
            used.par_iter().map(work).collect::<Result<_>>()?
        } else {
            used.iter().map(work).collect::<Result<_>>()?
        };
        let (mean, var) = self.scatter(
            x.nrows(),
            want_var,
            parts.into_iter().map(|(c, m, v)| (groups[c].clone(), m, v)),
        );
        let predict_seconds = t_assign + t2.elapsed().as_secs_f64();
        monitor.message(format!(
            "predicted {} point(s) with {} centroid GP(s) \
             ({n_built} built in {build_seconds:.3} s, prediction {predict_seconds:.3} s)",
            x.nrows(),
            used.len()
        ));
        Ok(LocalizedPrediction {
            mean,
            var,
            n_built,
            build_seconds,
            predict_seconds,
        })
    }

    /// The `centers = test` mode: a GP centered at every test point itself
    /// (the exact `k_p*` of 000 section 3.2; cost `O(N* (N D² + D³))`, for
    /// small test sets). Nothing is cached. Parallel over test points.
    /// `monitor` gets the stage "test-point GPs" (one unit per point) and is
    /// checked between row blocks of every build.
    pub fn predict_at_test_points<T: Real>(
        &self,
        x: ArrayView2<'_, T>,
        want_var: bool,
        par: Parallelism,
        monitor: &Monitor,
    ) -> Result<LocalizedPrediction> {
        Error::check_n_features(self.x.ncols(), x.ncols())?;
        if !all_finite(x, par) {
            return Err(Error::NonFinite { name: "X" });
        }
        let m = x.nrows();
        let t0 = Instant::now();
        monitor.stage("test-point GPs", m as u64);
        let work = |scratch: &mut CentroidScratch, i: usize| -> Result<Part> {
            let row = x.slice(ndarray::s![i..i + 1, ..]);
            let center: Vec<f64> = row.iter().map(|v| v.to_f64_exact()).collect();
            let (gp, _) = self.build_with(&center, scratch, monitor)?;
            let mut phi = Array2::<T>::zeros((1, self.map.width()));
            self.map.transform_centered_into(
                row,
                &center,
                phi.view_mut(),
                Parallelism::Sequential,
            )?;
            let (mu, v) = gp.predict(phi.view(), want_var, Parallelism::Sequential)?;
            monitor.advance(1);
            Ok((vec![i], mu, v))
        };
        let parts: Vec<_> = if par.is_parallel() {
            (0..m)
                .into_par_iter()
                .map_init(CentroidScratch::default, work)
                .collect::<Result<_>>()?
        } else {
            let mut scratch = CentroidScratch::default();
            (0..m)
                .map(|i| work(&mut scratch, i))
                .collect::<Result<_>>()?
        };
        let (mean, var) = self.scatter(m, want_var, parts.into_iter());
        let build_seconds = t0.elapsed().as_secs_f64();
        Ok(LocalizedPrediction {
            mean,
            var,
            n_built: m,
            build_seconds,
            predict_seconds: 0.0,
        })
    }

    /// Writes per-group results (mean without the target mean) into full
    /// arrays and adds the target mean back.
    fn scatter(
        &self,
        m: usize,
        want_var: bool,
        parts: impl Iterator<Item = Part>,
    ) -> MeanAndVariance {
        let mut mean = Array1::from_elem(m, self.y_mean);
        let mut var = want_var.then(|| Array1::<f64>::zeros(m));
        for (rows, mu, v) in parts {
            for (k, &i) in rows.iter().enumerate() {
                mean[i] += mu[k];
                if let (Some(var), Some(v)) = (var.as_mut(), v.as_ref()) {
                    var[i] = v[k];
                }
            }
        }
        (mean, var)
    }
}

/// The column means of `x` (summed in row order, then divided by `N`): the
/// center of the Gaussian map, [`MaclaurinMap::center`].
fn training_mean<T: Real>(x: ArrayView2<'_, T>) -> Vec<f64> {
    let mut sum = vec![0.0; x.ncols()];
    for row in x.rows() {
        for (s, v) in sum.iter_mut().zip(row) {
            *s += v.to_f64_exact();
        }
    }
    let n = x.nrows() as f64;
    sum.iter().map(|s| s / n).collect()
}

/// The widest magnitude of the length scale and of the inputs (`1e±150`)
/// that [`LocalizedMaclaurinGp::fit`] takes: the clustering, the cutoff and
/// the Gaussian weights square distances and the length scale in input
/// units, so beyond it the squares leave the normal float range (`l²`
/// underflows to 0 or `‖x − c‖²` overflows) and every row would be dropped
/// as negligible, leaving the prior without an error.
pub const SCALE_RANGE: (f64, f64) = (1e-150, 1e150);

/// Refuses a length scale outside [`SCALE_RANGE`] and inputs beyond its
/// upper end, with the remedy (rescaling both together changes nothing
/// else: the kernel depends on `x / l` only). The inputs are scanned by
/// [`all_finite_scaled`]: `|v| · MAX/1e150` stays finite exactly for
/// `|v| <= 1e150` (up to the rounding of the quotient; for `f32` the
/// quotient is 0 and every finite value passes, as none reaches 1e150).
fn check_squared_scale<T: Real>(
    x: ArrayView2<'_, T>,
    length_scale: f64,
    par: Parallelism,
) -> Result<()> {
    let (lo, hi) = SCALE_RANGE;
    if !(lo..=hi).contains(&length_scale) {
        return Err(Error::invalid(
            "length_scale",
            format!(
                "must be between {lo:e} and {hi:e} for the localized GP, which squares \
                 distances in input units; got {length_scale:e}: rescale X and the length \
                 scale together"
            ),
        ));
    }
    let scale = T::from_f64_lossy(T::max_value().to_f64_exact() / hi);
    if !all_finite_scaled(x, scale, par) {
        let largest = x.iter().fold(0.0_f64, |m, v| m.max(v.to_f64_exact().abs()));
        return Err(Error::invalid(
            "X",
            format!(
                "values up to {hi:e} in magnitude are supported by the localized GP, which \
                 squares distances in input units; got {largest:e}: rescale X and the length \
                 scale together"
            ),
        ));
    }
    Ok(())
}
