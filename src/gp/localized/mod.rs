//! The localized Maclaurin GP (ALGORITHMS.md 8, 000 Algorithm 1): one
//! optimized allocation and one set of random sketch weights, shared by
//! every centroid; one feature-space GP (7.2) per centroid `c` on the map
//! `Φ(x − c)`; each test point predicted by its nearest centroid, or (the
//! `centers = test` mode) by a GP centered at the test point itself, which
//! makes its cross-covariances and prior variance exact (8.4).
//!
//! Beyond the paper: a training row whose feature vector at `c` is
//! negligible is skipped. With `r² = ‖x − c‖²/l²` the map satisfies
//! `‖Φ(x − c)‖² ≤ σ² e^{−r²} (1 + Σ_n b_n r^{2n})` (see [`NormBound`]); a row
//! is skipped when this bound is below `(tol·σ)²`, so `tol` is relative to
//! the prior scale `σ` (the norm of `Φ(0)`). The bound decreases for
//! `r² ≥ p`, so it reduces to one distance cutoff per model: a centroid's
//! cost is that of its neighbourhood, not of all `N` rows.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::Instant;

use ndarray::{Array1, Array2, ArrayView1, ArrayView2, Axis};
use rayon::prelude::*;

use super::check_positive;
use super::cluster::{farthest_point, nearest, sq_dists_t};
use super::features::FeatureGp;
use crate::error::{Error, Result};
use crate::gpu::Device;
use crate::linalg::syrk::{gram_lower, Isa, Layout};
use crate::maclaurin::map::{MaclaurinConfig, MaclaurinMap};
use crate::real::{all_finite, Real};
use crate::sketch::SketchParams;
use crate::stats::FeatureStats;
use crate::threads::Parallelism;
use crate::vexp;

/// Training rows mapped and accumulated at a time per centroid (fixed, so
/// results never depend on the thread count).
const CHUNK: usize = 1024;

/// Rows per feature block of [`LocalizedMaclaurinGp::centroid_stats`]: a
/// group's `G × D × B` features (about 2^16 entries, 512 KiB; measured
/// faster than 2^17 at `D = 64`) stay in L2 while their Grams are
/// accumulated, but never fewer than 256 rows: each block reads and writes
/// every centroid's `D × D` lower triangle once, and at `D ≥ 128` that
/// traffic outweighs the features' fit in L2 (kin8nm, 760 centroids:
/// centroid fits 5-9% faster at 256 rows than at 128 for `D = 128` and
/// `256`). Depends only on `D`, so results never depend on the thread count
/// or the grouping.
fn block_rows(width: usize) -> usize {
    ((1usize << 16) / (width.max(1) * group_size(width))).clamp(256, 1024)
}

/// Centroids that share one pass over the factor-projection cache (see
/// [`LocalizedMaclaurinGp::group_stats`]): the cache (`N × Σ_n n·D_n`
/// entries) is read from L3 or memory, once per group instead of once per
/// centroid, which otherwise costs as much as the Gram itself.
fn group_size(width: usize) -> usize {
    (256 / width.max(1)).clamp(4, 8)
}

/// Largest cache of training-row factor projections, in `f64` entries
/// (256 MiB); beyond it every centroid maps its rows from scratch.
const PROJECTION_CACHE_LIMIT: usize = 1 << 25;

/// Settings of [`LocalizedMaclaurinGp`] (ALGORITHMS.md 8.2).
#[derive(Clone, Debug, PartialEq)]
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
    /// Subtract the training-target mean (ALGORITHMS.md 7).
    pub center_y: bool,
    /// Progress to stderr.
    pub verbose: bool,
    /// Where the per-centroid statistics are accumulated: [`Device::Gpu`]
    /// runs [`crate::gpu::localized_gps`] (resolved by the caller: `Auto` is
    /// treated as `Cpu`).
    pub device: Device,
}

/// The rigorous bound `‖Φ(x̃)‖² ≤ σ² e^{−s} (1 + Σ_n b_n s^n)`, `s = ‖x̃‖²`.
///
/// For a sketched block of degree `n` with scale `√a_n`, `b_n = a_n M_n²`
/// where `‖φ_n(u)‖² ≤ M_n² ‖u‖^{2n}` for every `u`:
/// - dense sketches (2.2): feature `i` is `Π_j ⟨w_ij, u⟩/√D`, so by
///   Cauchy–Schwarz `M_n² = (1/D) Σ_i Π_j ‖w_ij‖²` (complex: `|w|²` summed
///   over real and imaginary parts);
/// - TensorSRHT (2.3): in each block `Σ_r |v_0[r]|² = d'‖u‖²` and every
///   `|v_j[r]|² ≤ d'‖u‖²`, so with `B = ⌈D/d'⌉` blocks `M_n² = B d'^n / D`;
/// - TensorSketch (2.4): `‖C_j u‖_1 ≤ ‖u‖_1 ≤ √d‖u‖` and Young's inequality
///   for the circular convolution give `M_n² = d^n`.
///
/// The explicit `d = 1` map is bounded exactly: `b_n = 1/n!`, `n = 1..=p`.
#[derive(Clone, Debug, PartialEq)]
pub struct NormBound {
    /// `(n, b_n)` for every sketched degree.
    pub terms: Vec<(u32, f64)>,
}

impl NormBound {
    /// The bound's coefficients for a fitted Gaussian-kernel map.
    pub fn of(map: &MaclaurinMap) -> Self {
        if map.is_explicit_1d() {
            let mut b = 1.0;
            let terms = (1..=map.degree())
                .map(|n| {
                    b /= f64::from(n);
                    (n, b)
                })
                .collect();
            return Self { terms };
        }
        let terms = map
            .sketch_blocks()
            .map(|(scale, sk)| {
                let n = sk.degree();
                let m_sq = match sk.params() {
                    SketchParams::Dense { weights } => {
                        let nf = sk.n_features();
                        let mut sum = 0.0;
                        for i in 0..nf {
                            let mut prod = 1.0;
                            for w in weights {
                                let mut sq: f64 = w.row(i).iter().map(|v| v * v).sum();
                                if sk.is_complex() {
                                    sq += w.row(nf + i).iter().map(|v| v * v).sum::<f64>();
                                }
                                prod *= sq;
                            }
                            sum += prod;
                        }
                        sum / nf as f64
                    }
                    SketchParams::Srht { d_pad, .. } => {
                        let nf = sk.n_features();
                        let blocks = nf.div_ceil(d_pad) as f64;
                        blocks * (d_pad as f64).powi(n as i32) / nf as f64
                    }
                    SketchParams::Count { .. } => (sk.dim() as f64).powi(n as i32),
                };
                (n, scale * scale * m_sq)
            })
            .collect();
        Self { terms }
    }

    /// `ln(e^{−s}(1 + Σ b_n s^n))`, the log of the bound divided by `σ²`.
    pub fn ln_bound(&self, s: f64) -> f64 {
        let poly: f64 = self.terms.iter().map(|&(n, b)| b * s.powi(n as i32)).sum();
        poly.ln_1p() - s
    }

    /// The smallest `s* ≥ p` (p the largest degree) with
    /// `ln_bound(s) < 2 ln tol` for every `s ≥ s*` (the bound decreases for
    /// `s ≥ p` because `Σ n b_n s^{n−1} ≤ (p/s) Σ b_n s^n`); found by
    /// doubling and bisection. `∞` when `tol = 0`.
    pub fn cutoff(&self, tol: f64) -> f64 {
        if tol <= 0.0 {
            return f64::INFINITY;
        }
        let target = 2.0 * tol.ln();
        let p = self.terms.iter().map(|t| t.0).max().unwrap_or(0);
        let lo0 = f64::from(p).max(1e-300);
        if self.ln_bound(lo0) < target {
            return lo0;
        }
        let (mut lo, mut hi) = (lo0, 2.0 * lo0.max(1.0));
        while self.ln_bound(hi) >= target {
            lo = hi;
            hi *= 2.0;
            if !hi.is_finite() {
                return f64::INFINITY;
            }
        }
        for _ in 0..200 {
            let mid = 0.5 * (lo + hi);
            if mid <= lo || mid >= hi {
                break;
            }
            if self.ln_bound(mid) < target {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        hi
    }
}

/// Predictions for some test rows: `(rows, means, latent variances)`.
type Part = (Vec<usize>, Array1<f64>, Option<Array1<f64>>);

/// Wall-clock seconds of the fit phases (the two run side by side when
/// the fit is parallel, so they may add up to more than the fit).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct FitTimings {
    /// Centering, pair statistics, allocation and weight draws (4.2–4.7).
    pub allocation: f64,
    /// Farthest-point clustering (8.2 step 3).
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
    /// Seconds spent building them (8.2 step 4).
    pub build_seconds: f64,
    /// Seconds spent on assignment and the predictive formulas (8.3).
    pub predict_seconds: f64,
}

/// A fitted localized Maclaurin GP (ALGORITHMS.md 8).
///
/// The per-centroid GPs (`L_c`, `β_c` of 8.2 step 4) are built on first use
/// (by [`Self::build_all`] or by a prediction that assigns a test point to
/// the centroid), in parallel over centroids, and cached: a centroid's GP
/// depends only on the fitted data, map and centroid, so predictions are
/// the same as with every GP built at fit, at the cost of the centroids that
/// are actually used.
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
    pub fn fit<T: Real>(
        x: ArrayView2<'_, T>,
        y: ArrayView1<'_, f64>,
        config: &LocalizedConfig,
        seed: u64,
        par: Parallelism,
    ) -> Result<Self> {
        check_positive("noise_variance", config.noise_variance)?;
        if !config.map.kernel.is_gaussian() {
            return Err(Error::invalid(
                "kernel",
                "the localized GP needs the Gaussian kernel (only it may be centered)",
            ));
        }
        if let Some(t) = config.threshold {
            if !(t.is_finite() && t > 0.0) {
                return Err(Error::invalid(
                    "threshold",
                    format!("must be a finite number > 0 (in units of the length scale), got {t}"),
                ));
            }
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
        let center = training_mean(x);
        let l = config.map.length_scale;
        let verbose = config.verbose;
        let allocate = || {
            let t0 = Instant::now();
            let map = MaclaurinMap::fit(x, &config.map, seed, par);
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
                |k| {
                    if verbose && k.is_multiple_of(1000) {
                        eprintln!("LocalizedMaclaurinGP: clustering, {k} centroids so far");
                    }
                },
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
        if verbose {
            eprintln!(
                "LocalizedMaclaurinGP: allocation {:?} (degree {}) in {allocation:.3} s",
                map.allocation(),
                map.degree()
            );
            eprintln!(
                "LocalizedMaclaurinGP: {} centroid(s) in {clustering:.3} s",
                centroids.nrows()
            );
        }
        let y_mean = if config.center_y && !y.is_empty() {
            y.sum() / y.len() as f64
        } else {
            0.0
        };
        let cutoff_sq = NormBound::of(&map).cutoff(config.tol) * l * l;
        let predictors = (0..centroids.nrows()).map(|_| OnceLock::new()).collect();
        let x = x.mapv(|v| v.to_f64_exact());
        let projections = project_rows_t(&map, x.view(), 1.0 / l, par)?;
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

    /// The feature-space GP (7.2) on `Φ(X − c)`, built from the rows within
    /// the cutoff (the prior, `L = I` and `β = 0`, when there are none).
    /// Returns it and the rows used.
    pub fn build_at(&self, c: &[f64]) -> Result<(FeatureGp, usize)> {
        self.build_with(c, &mut CentroidScratch::default())
    }

    /// [`Self::build_at`] with caller-owned scratch buffers.
    fn build_with(&self, c: &[f64], scratch: &mut CentroidScratch) -> Result<(FeatureGp, usize)> {
        let (stats, used) = self.centroid_stats(c, scratch)?;
        Ok((self.gp_from(&stats, used)?, used))
    }

    /// The GP of a centroid from its statistics (the prior when no row is
    /// used).
    fn gp_from(&self, stats: &FeatureStats, used: usize) -> Result<FeatureGp> {
        let noise = self.config.noise_variance;
        if used == 0 {
            return FeatureGp::prior(self.map.width(), noise);
        }
        FeatureGp::fit(stats, noise, false, Parallelism::Sequential)
    }

    /// The sufficient statistics at centroid `c` (8.2 step 4): `ΦᵀΦ`,
    /// `Φᵀy`, `Φᵀ1` and the target sums (shift 0; `y` is already centered
    /// by the training mean) of `Φ = Φ(X_c − c)`, `X_c` the training rows
    /// within the cutoff, and the number of those rows. Sequential (the
    /// caller parallelizes over centroids) and deterministic: fixed row
    /// blocks of `block_rows` rows, each block's features built
    /// feature-major from the cached factor projections and its lower Gram
    /// and `Φᵀ[y | 1]` accumulated in one pass of the packed kernel of
    /// [`crate::linalg::syrk`].
    /// This is the one per-centroid computation;
    /// everything after it is `D × D` work. [`Self::group_stats`] computes
    /// the same for several centroids in one pass over the cache.
    pub fn centroid_stats(
        &self,
        c: &[f64],
        scratch: &mut CentroidScratch,
    ) -> Result<(FeatureStats, usize)> {
        let n = self.x.nrows();
        self.distances(c, scratch, 0)?;
        let cutoff = self.cutoff_sq;
        let CentroidScratch { dd, rows, .. } = &mut *scratch;
        rows.clear();
        rows.extend((0..n).filter(|&i| dd[i] < cutoff));
        let used = rows.len();
        if used == 0 {
            return Ok((FeatureStats::new(self.map.width()), 0));
        }
        let stats = match &self.projections {
            Some(proj) => self
                .stats_from_projections(proj, &[c], scratch)?
                .pop()
                .ok_or_else(|| Error::Internal("one centroid, one result".into()))?,
            None => {
                let mut stats = FeatureStats::new(self.map.width());
                self.stats_by_transform(c, &scratch.rows, &mut stats)?;
                stats
            }
        };
        Ok((stats, used))
    }

    /// [`Self::centroid_stats`] of every centroid in `cs`. When every
    /// training row is within the cutoff of every one of them (the usual
    /// case when the data span a few length scales) they share one pass
    /// over the factor-projection cache (each cached block is read once for
    /// the group instead of once per centroid); the results are the same as
    /// one by one.
    pub fn group_stats(
        &self,
        cs: &[&[f64]],
        scratch: &mut CentroidScratch,
    ) -> Result<Vec<(FeatureStats, usize)>> {
        let n = self.x.nrows();
        let mut shared = cs.len() > 1 && n > 0 && self.projections.is_some();
        for (q, c) in cs.iter().enumerate() {
            if !shared {
                break;
            }
            self.distances(c, scratch, q)?;
            let cutoff = self.cutoff_sq;
            shared = scratch.dd[q * n..(q + 1) * n].iter().all(|&v| v < cutoff);
        }
        match (&self.projections, shared) {
            (Some(proj), true) => {
                scratch.rows.clear();
                scratch.rows.extend(0..n);
                Ok(self
                    .stats_from_projections(proj, cs, scratch)?
                    .into_iter()
                    .map(|s| (s, n))
                    .collect())
            }
            _ => cs.iter().map(|c| self.centroid_stats(c, scratch)).collect(),
        }
    }

    /// Squared distances of every training row to `c` into
    /// `scratch.dd[q·N..(q + 1)·N]`.
    fn distances(&self, c: &[f64], scratch: &mut CentroidScratch, q: usize) -> Result<()> {
        let (n, d) = self.x.dim();
        Error::check_n_features(d, c.len())?;
        let xt = self
            .xt
            .as_slice()
            .ok_or_else(|| Error::Internal("Xᵀ is contiguous".into()))?;
        if scratch.dd.len() < (q + 1) * n {
            scratch.dd.resize((q + 1) * n, 0.0);
        }
        sq_dists_t(xt, n, c, &mut scratch.dd[q * n..(q + 1) * n]);
        Ok(())
    }

    /// The statistics of the centroids `cs` over the rows `scratch.rows`
    /// (every row when there are several centroids) from the cached factor
    /// projections (`v_j(x − c) = v_j(x) − v_j(c)`, see
    /// [`crate::sketch::PolySketch::factor_projections_into`]), in the layout
    /// of ALGORITHMS.md 4.7: `σ g · [1 | √a_n φ_n((x − c)/l) … | (0)]`, every
    /// feature multiplied in the order of
    /// [`crate::sketch::PolySketch::combine_factors`] (the factor scale `1/l`
    /// is applied to the cached and the centroid's projections instead of
    /// their difference, so the features agree with the map's to rounding).
    /// `scratch.dd` holds the squared distances to each centroid
    /// (`|cs| × N`).
    fn stats_from_projections(
        &self,
        proj: &[Array2<f64>],
        cs: &[&[f64]],
        scratch: &mut CentroidScratch,
    ) -> Result<Vec<FeatureStats>> {
        let n = self.x.nrows();
        let width = self.map.width();
        let inv_l = 1.0 / self.config.map.length_scale;
        let sigma = self.config.map.kernel_variance.sqrt();
        let mut shifts = Vec::with_capacity(cs.len());
        for c in cs {
            let view = ArrayView2::from_shape((1, c.len()), c)
                .map_err(|e| Error::Internal(e.to_string()))?;
            let mut sc = project_rows(&self.map, view, Parallelism::Sequential)?
                .ok_or_else(|| Error::Internal("no factor projections of the centroid".into()))?;
            // Scaled by 1/l, as the cache.
            for p in &mut sc {
                p.mapv_inplace(|v| v * inv_l);
            }
            shifts.push(sc);
        }
        let mut blocks = Vec::with_capacity(proj.len());
        for (k, ((scale, sk), p)) in self.map.sketch_blocks().zip(proj).enumerate() {
            let p = p
                .as_slice()
                .ok_or_else(|| Error::Internal("projection caches are contiguous".into()))?;
            let shift = shifts
                .iter()
                .map(|s| s[k].as_slice())
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| Error::Internal("centroid projections are contiguous".into()))?;
            blocks.push(FactorBlock {
                proj: p,
                n,
                shift,
                width: sk.width(),
                n_features: sk.n_features(),
                degree: sk.degree() as usize,
                complex: sk.is_complex(),
                init: 1.0 / (sk.n_features() as f64).sqrt(),
                scale,
            });
        }
        let b = block_rows(width);
        let g_count = cs.len();
        let isa = Isa::detect();
        let CentroidScratch {
            dd,
            rows,
            phit,
            g,
            gs,
            rhs,
            tmp,
            out,
        } = scratch;
        let used = rows.len();
        let contiguous = used == n;
        phit.resize(g_count * width * b, 0.0);
        g.resize(g_count * b, 0.0);
        gs.resize(g_count * b, 0.0);
        rhs.resize(2 * b, 0.0);
        let max_degree = blocks.iter().map(|k| k.degree).max().unwrap_or(0);
        tmp.resize(max_degree.max(2) * b, 0.0);
        out.resize(2 * width, 0.0);
        let mut all: Vec<FeatureStats> = (0..g_count).map(|_| FeatureStats::new(width)).collect();
        let (mut y_sum, mut y_sq_sum) = (0.0, 0.0);
        for k0 in (0..used).step_by(b) {
            let m = b.min(used - k0);
            let idx = &rows[k0..k0 + m];
            let (ys, ones) = rhs[..2 * m].split_at_mut(m);
            for (k, &i) in idx.iter().enumerate() {
                let yi = self.y[i];
                ys[k] = yi;
                ones[k] = 1.0;
                y_sum += yi;
                y_sq_sum += yi * yi;
            }
            for q in 0..g_count {
                let dq = &dd[q * n..(q + 1) * n];
                let gq = &mut g[q * m..(q + 1) * m];
                if contiguous {
                    gq.copy_from_slice(&dq[k0..k0 + m]);
                } else {
                    for (gk, &i) in gq.iter_mut().zip(idx) {
                        *gk = dq[i];
                    }
                }
                gaussian_weights(gq, sigma, inv_l);
            }
            let phit = &mut phit[..g_count * width * m];
            let src = if contiguous {
                Rows::Contiguous(k0)
            } else {
                Rows::Gather(idx)
            };
            fill_features(
                &blocks,
                src,
                g_count,
                &g[..g_count * m],
                phit,
                tmp,
                &mut gs[..g_count * m],
            );
            // `rhs` holds `y` then `1` over the block: a 2 × m row-major B
            // (for faer: an m × 2 column-major matrix).
            let rhs_m = &rhs[..2 * m];
            for (stats, ph) in all.iter_mut().zip(phit.chunks_exact(width * m)) {
                // Lower triangle of the block's Gram, then Φᵀ[y | 1].
                let gram = stats
                    .gram
                    .as_slice_mut()
                    .ok_or_else(|| Error::Internal("standard-layout Gram".into()))?;
                out.fill(0.0);
                let fm = Layout::FeatureMajor { ld: m };
                gram_lower(
                    isa,
                    ph,
                    fm,
                    width,
                    m,
                    rhs_m,
                    gram,
                    width,
                    out,
                    Parallelism::Sequential,
                );
                for k in 0..width {
                    stats.phi_y[k] += out[2 * k];
                    stats.phi_sum[k] += out[2 * k + 1];
                }
            }
        }
        for stats in &mut all {
            stats.n = used as u64;
            stats.y_shift = 0.0;
            stats.y_sum = y_sum;
            stats.y_sq_sum = y_sq_sum;
        }
        Ok(all)
    }

    /// [`Self::centroid_stats`] through the map itself (the explicit `d = 1`
    /// map, or no projection cache), in fixed row chunks.
    fn stats_by_transform(
        &self,
        c: &[f64],
        rows: &[usize],
        stats: &mut FeatureStats,
    ) -> Result<()> {
        let d = self.x.ncols();
        let width = self.map.width();
        let len = CHUNK.min(rows.len());
        let mut xs = Array2::<f64>::zeros((len, d));
        let mut phi = Array2::<f64>::zeros((len, width));
        let mut ys = Array1::<f64>::zeros(len);
        for chunk in rows.chunks(CHUNK) {
            let m = chunk.len();
            for (k, &i) in chunk.iter().enumerate() {
                ys[k] = self.y[i];
                xs.row_mut(k).assign(&self.x.row(i));
            }
            let mut pv = phi.slice_mut(ndarray::s![..m, ..]);
            self.map.transform_centered_into(
                xs.slice(ndarray::s![..m, ..]),
                c,
                pv.view_mut(),
                Parallelism::Sequential,
            )?;
            stats.accumulate(
                pv.view(),
                ys.slice(ndarray::s![..m]),
                Parallelism::Sequential,
            )?;
        }
        Ok(())
    }

    /// Builds the GPs of the listed centroids that are not built yet, in
    /// parallel over centroids (each one sequential, so the result does not
    /// depend on the thread count). Returns how many were built.
    fn ensure_built(&self, which: &[usize], par: Parallelism) -> Result<usize> {
        let todo: Vec<usize> = which
            .iter()
            .copied()
            .filter(|&c| self.predictors[c].get().is_none())
            .collect();
        let total = todo.len();
        if self.config.device == Device::Gpu {
            let mut scratch = CentroidScratch::default();
            let neighbours = |k: usize| -> Result<Vec<u32>> {
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
                |stats, used| self.gp_from(stats, used),
                par,
            )?;
            for (&c, gp) in todo.iter().zip(gps) {
                let _ = self.predictors[c].set(gp);
            }
            if self.config.verbose {
                eprintln!("LocalizedMaclaurinGP: built {total}/{total} centroid GPs on the GPU");
            }
            return Ok(total);
        }
        let step = total.div_ceil(10).max(1);
        let done = AtomicUsize::new(0);
        let verbose = self.config.verbose;
        let group = group_size(self.map.width());
        let work = |scratch: &mut CentroidScratch, ids: &[usize]| -> Result<()> {
            let cs = ids
                .iter()
                .map(|&c| self.centroids.row(c).to_slice())
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| Error::Internal("centroid rows are contiguous".into()))?;
            for (&c, (stats, used)) in ids.iter().zip(self.group_stats(&cs, scratch)?) {
                let _ = self.predictors[c].set(self.gp_from(&stats, used)?);
                let k = done.fetch_add(1, Ordering::Relaxed) + 1;
                if verbose && (k.is_multiple_of(step) || k == total) {
                    eprintln!("LocalizedMaclaurinGP: built {k}/{total} centroid GPs");
                }
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

    /// Builds every centroid's GP (000 Algorithm 1 precomputes them all).
    pub fn build_all(&self, par: Parallelism) -> Result<usize> {
        let all: Vec<usize> = (0..self.centroids.nrows()).collect();
        self.ensure_built(&all, par)
    }

    /// Predicts `x` (`m × d`) by the nearest centroid's GP (8.3): builds the
    /// GPs of the centroids used, then `μ* = φ*ᵀβ_c + ȳ` and
    /// `v* = ‖L_c^{−1}φ*‖²` with `φ* = Φ(x* − c)`. Parallel over centroids;
    /// deterministic.
    pub fn predict<T: Real>(
        &self,
        x: ArrayView2<'_, T>,
        want_var: bool,
        par: Parallelism,
    ) -> Result<LocalizedPrediction> {
        Error::check_n_features(self.x.ncols(), x.ncols())?;
        if !all_finite(x, par) {
            return Err(Error::NonFinite { name: "X" });
        }
        let t0 = Instant::now();
        let assign = nearest(self.centroids.view(), x, par)?;
        let mut groups: Vec<Vec<usize>> = vec![Vec::new(); self.centroids.nrows()];
        for (i, &c) in assign.iter().enumerate() {
            groups[c].push(i);
        }
        let used: Vec<usize> = (0..groups.len())
            .filter(|&c| !groups[c].is_empty())
            .collect();
        let t_assign = t0.elapsed().as_secs_f64();
        let t1 = Instant::now();
        let n_built = self.ensure_built(&used, par)?;
        let build_seconds = t1.elapsed().as_secs_f64();
        let t2 = Instant::now();
        let work = |&c: &usize| -> Result<(usize, Array1<f64>, Option<Array1<f64>>)> {
            let gp = self.predictors[c]
                .get()
                .ok_or_else(|| Error::Internal("centroid GP not built".into()))?;
            let rows = x.select(Axis(0), &groups[c]);
            let center = self.centroids.row(c).to_vec();
            let mut phi = Array2::<T>::zeros((rows.nrows(), self.map.width()));
            self.map.transform_centered_into(
                rows.view(),
                &center,
                phi.view_mut(),
                Parallelism::Sequential,
            )?;
            let (m, v) = gp.predict(phi.view(), want_var, Parallelism::Sequential)?;
            Ok((c, m, v))
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
        if self.config.verbose {
            eprintln!(
                "LocalizedMaclaurinGP: predicted {} point(s) with {} centroid GP(s) \
                 ({n_built} built in {build_seconds:.3} s, prediction {predict_seconds:.3} s)",
                x.nrows(),
                used.len()
            );
        }
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
    pub fn predict_at_test_points<T: Real>(
        &self,
        x: ArrayView2<'_, T>,
        want_var: bool,
        par: Parallelism,
    ) -> Result<LocalizedPrediction> {
        Error::check_n_features(self.x.ncols(), x.ncols())?;
        if !all_finite(x, par) {
            return Err(Error::NonFinite { name: "X" });
        }
        let m = x.nrows();
        let t0 = Instant::now();
        let step = m.div_ceil(10).max(1);
        let done = AtomicUsize::new(0);
        let work = |scratch: &mut CentroidScratch, i: usize| -> Result<Part> {
            let row = x.slice(ndarray::s![i..i + 1, ..]);
            let center: Vec<f64> = row.iter().map(|v| v.to_f64_exact()).collect();
            let (gp, _) = self.build_with(&center, scratch)?;
            let mut phi = Array2::<T>::zeros((1, self.map.width()));
            self.map.transform_centered_into(
                row,
                &center,
                phi.view_mut(),
                Parallelism::Sequential,
            )?;
            let (mu, v) = gp.predict(phi.view(), want_var, Parallelism::Sequential)?;
            let k = done.fetch_add(1, Ordering::Relaxed) + 1;
            if self.config.verbose && (k.is_multiple_of(step) || k == m) {
                eprintln!("LocalizedMaclaurinGP: {k}/{m} test-point GPs");
            }
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
    ) -> (Array1<f64>, Option<Array1<f64>>) {
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

/// Reusable buffers of [`LocalizedMaclaurinGp::centroid_stats`] (one per
/// worker thread, so building a centroid allocates nothing large).
#[derive(Debug, Default)]
pub struct CentroidScratch {
    dd: Vec<f64>,
    rows: Vec<usize>,
    phit: Vec<f64>,
    g: Vec<f64>,
    gs: Vec<f64>,
    rhs: Vec<f64>,
    tmp: Vec<f64>,
    out: Vec<f64>,
}

/// One sketched block's cached factor projections (`degree·width × N`,
/// row-major) and those of each centroid of a group (`degree·width` each).
struct FactorBlock<'a> {
    proj: &'a [f64],
    /// `N`, the length of a cached factor row.
    n: usize,
    shift: Vec<&'a [f64]>,
    width: usize,
    n_features: usize,
    degree: usize,
    complex: bool,
    /// `1/√D_n`, the sketch's normalization.
    init: f64,
    /// `√a_n`, the block scale.
    scale: f64,
}

/// Which training rows a feature block covers.
#[derive(Clone, Copy)]
enum Rows<'a> {
    /// Rows `k0..k0 + m` (every row is used).
    Contiguous(usize),
    /// The listed rows.
    Gather(&'a [usize]),
}

/// Factor row `row` of `proj` (`· × n`) at the block's rows: a slice of the
/// cache, or gathered into `tmp`.
#[inline(always)]
fn factor_row<'a>(
    proj: &'a [f64],
    row: usize,
    n: usize,
    rows: Rows<'_>,
    m: usize,
    tmp: &'a mut [f64],
) -> &'a [f64] {
    match rows {
        Rows::Contiguous(k0) => &proj[row * n + k0..row * n + k0 + m],
        Rows::Gather(idx) => {
            let src = &proj[row * n..(row + 1) * n];
            for (t, &i) in tmp[..m].iter_mut().zip(idx) {
                *t = src[i];
            }
            &tmp[..m]
        }
    }
}

/// `w ← σ exp(−w/(2l²))` in place (squared distances to Gaussian weights,
/// ALGORITHMS.md 8.2), with the vector `exp` of [`crate::vexp`].
#[inline(always)]
fn gaussian_weights_body(w: &mut [f64], sigma: f64, inv_l: f64) {
    for v in w.iter_mut() {
        *v = sigma * vexp::exp(-0.5 * *v * inv_l * inv_l);
    }
}

widest_simd! {
    /// [`gaussian_weights_body`] with the widest SIMD the CPU offers.
    fn gaussian_weights(w: &mut [f64], sigma: f64, inv_l: f64) = gaussian_weights_body;
}

/// The `degree` factor rows of one feature over a block of rows: factor
/// `j` at block row `k` is `src[first + j·step + k]`.
struct Factors<'a> {
    src: &'a [f64],
    first: usize,
    step: usize,
    degree: usize,
}

/// Rows per register tile of [`feature_row`] (four AVX-512 registers, so
/// four independent multiply chains).
const FEATURE_TILE: usize = 32;

/// One real feature over a block of rows, for one centroid:
/// `out_k = (init · Π_j (v_jk − s_j)) · gs_k` with `s_j = shift[j·w]` (the
/// cached and the centroid's projections, both already scaled by `1/l`)
/// and `gs_k = g_k · scale`, multiplied in this order (that of
/// [`crate::sketch::PolySketch::combine_factors`]), the product kept in
/// registers over a tile of rows.
#[inline(always)]
fn feature_row(
    f: &Factors<'_>,
    shift: &[f64],
    w: usize,
    b: &FactorBlock<'_>,
    gs: &[f64],
    out: &mut [f64],
) {
    const L: usize = FEATURE_TILE;
    let m = out.len();
    let tiles = m / L * L;
    for i in (0..tiles).step_by(L) {
        let mut acc = [b.init; L];
        for j in 0..f.degree {
            let s = shift[j * w];
            let v = &f.src[f.first + j * f.step + i..f.first + j * f.step + i + L];
            for (a, &x) in acc.iter_mut().zip(v) {
                *a *= x - s;
            }
        }
        for ((o, a), &gk) in out[i..i + L].iter_mut().zip(acc).zip(&gs[i..i + L]) {
            *o = a * gk;
        }
    }
    for k in tiles..m {
        let mut a = b.init;
        for j in 0..f.degree {
            a *= f.src[f.first + j * f.step + k] - shift[j * w];
        }
        out[k] = a * gs[k];
    }
}

/// Fills the feature-major blocks `phit` (`G` blocks of `D × m`; `g` holds
/// `G` rows of `m` weights `σ e^{−‖x − c_q‖²/2l²}`): row 0 is `g_q`, then
/// every sketched block's features `g_q·√a_n·(1/√D_n)·Π_j (v_j − s_qj)`
/// (`v`, `s` the cached and the centroid's projections scaled by `1/l`;
/// complex products when complex), the remaining rows 0. A real feature is
/// built in registers by [`feature_row`] (one store per entry; its factor
/// rows, when the block's rows are contiguous, are prefetched from the
/// cache while the previous feature is built, then read from L1 by every
/// centroid of the group);
/// a complex one in passes over its two rows, each factor row read once for
/// the whole group. Per feature the products are those of
/// [`crate::sketch::PolySketch::combine_factors`] in the same order. `gs`
/// is scratch for `g_q·√a_n`.
#[inline(always)]
fn fill_body(
    blocks: &[FactorBlock<'_>],
    rows: Rows<'_>,
    groups: usize,
    g: &[f64],
    phit: &mut [f64],
    tmp: &mut [f64],
    gs: &mut [f64],
) {
    let m = g.len() / groups;
    let width = phit.len() / (groups * m).max(1);
    for (ph, gq) in phit.chunks_exact_mut(width * m).zip(g.chunks_exact(m)) {
        ph[..m].copy_from_slice(gq);
    }
    let mut col = 1;
    for b in blocks {
        let (w, n) = (b.width, b.n);
        // `g · √a_n`, once per block and centroid.
        for (o, &gk) in gs.iter_mut().zip(g) {
            *o = gk * b.scale;
        }
        if b.complex {
            let nf = b.n_features;
            for r in 0..nf {
                for ph in phit.chunks_exact_mut(width * m) {
                    ph[(col + r) * m..(col + r + 1) * m].fill(b.init);
                    ph[(col + nf + r) * m..(col + nf + r + 1) * m].fill(0.0);
                }
                for j in 0..b.degree {
                    let (tr, ti) = tmp.split_at_mut(m);
                    let vr = factor_row(b.proj, j * w + r, n, rows, m, tr);
                    let vi = factor_row(b.proj, j * w + nf + r, n, rows, m, ti);
                    for (ph, s) in phit.chunks_exact_mut(width * m).zip(&b.shift) {
                        let (sr, si) = (s[j * w + r], s[j * w + nf + r]);
                        let (lo, hi) = ph.split_at_mut((col + nf + r) * m);
                        let re = &mut lo[(col + r) * m..(col + r + 1) * m];
                        let im = &mut hi[..m];
                        for (((re, im), a), c) in re.iter_mut().zip(im.iter_mut()).zip(vr).zip(vi) {
                            let u = a - sr;
                            let q = c - si;
                            let (x, y) = (*re, *im);
                            *re = x * u - y * q;
                            *im = x * q + y * u;
                        }
                    }
                }
                for (ph, gq) in phit.chunks_exact_mut(width * m).zip(gs.chunks_exact(m)) {
                    for row in [col + r, col + nf + r] {
                        for (o, gk) in ph[row * m..(row + 1) * m].iter_mut().zip(gq) {
                            *o *= gk;
                        }
                    }
                }
            }
        } else {
            for r in 0..w {
                let row = col + r;
                // Factor `j` of feature `r` at block row `k` is
                // `src[first + j·step + k]`: in the cache, or gathered.
                let (src, first, step): (&[f64], usize, usize) = match rows {
                    Rows::Contiguous(k0) => {
                        let (first, step) = (r * n + k0, w * n);
                        // The next feature's factor rows (`n` further on),
                        // while this one's are multiplied out for the group.
                        if r + 1 < w {
                            for j in 0..b.degree {
                                let at = first + n + j * step;
                                crate::simd::prefetch(&b.proj[at..at + m]);
                            }
                        }
                        (b.proj, first, step)
                    }
                    Rows::Gather(idx) => {
                        for (j, t) in tmp.chunks_exact_mut(m).take(b.degree).enumerate() {
                            let src = &b.proj[(j * w + r) * n..(j * w + r + 1) * n];
                            for (t, &i) in t.iter_mut().zip(idx) {
                                *t = src[i];
                            }
                        }
                        (&tmp[..], 0, m)
                    }
                };
                let factors = Factors {
                    src,
                    first,
                    step,
                    degree: b.degree,
                };
                for ((ph, s), gq) in phit
                    .chunks_exact_mut(width * m)
                    .zip(&b.shift)
                    .zip(gs.chunks_exact(m))
                {
                    let shift = &s[r..];
                    let out = &mut ph[row * m..(row + 1) * m];
                    feature_row(&factors, shift, w, b, gq, out);
                }
            }
        }
        col += w;
    }
    for ph in phit.chunks_exact_mut(width * m) {
        ph[col * m..].fill(0.0);
    }
}

widest_simd! {
    /// [`fill_body`] with the widest SIMD the CPU offers (no FMA contraction,
    /// so the result does not depend on the SIMD level).
    fn fill_features(
        blocks: &[FactorBlock<'_>],
        rows: Rows<'_>,
        groups: usize,
        g: &[f64],
        phit: &mut [f64],
        tmp: &mut [f64],
        gs: &mut [f64],
    ) = fill_body;
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

/// The factor projections of every row of `x` for every sketched block of
/// the map (one `n × degree·width` matrix per block), or `None` for the
/// explicit `d = 1` map and when they would exceed
/// [`PROJECTION_CACHE_LIMIT`]. Parallel over fixed row chunks.
fn project_rows(
    map: &MaclaurinMap,
    x: ArrayView2<'_, f64>,
    par: Parallelism,
) -> Result<Option<Vec<Array2<f64>>>> {
    let cols: usize = map
        .sketch_blocks()
        .map(|(_, sk)| sk.degree() as usize * sk.width())
        .sum();
    if map.is_explicit_1d() || x.nrows().saturating_mul(cols) > PROJECTION_CACHE_LIMIT {
        return Ok(None);
    }
    let mut out = Vec::new();
    for (_, sk) in map.sketch_blocks() {
        let mut p = Array2::<f64>::zeros((x.nrows(), sk.degree() as usize * sk.width()));
        let pairs: Vec<_> = x
            .axis_chunks_iter(Axis(0), CHUNK)
            .zip(p.axis_chunks_iter_mut(Axis(0), CHUNK))
            .collect();
        if par.is_parallel() {
            pairs
                .into_par_iter()
                .try_for_each(|(xc, pc)| sk.factor_projections_into(xc, pc))?;
        } else {
            pairs
                .into_iter()
                .try_for_each(|(xc, pc)| sk.factor_projections_into(xc, pc))?;
        }
        out.push(p);
    }
    Ok(Some(out))
}

/// [`project_rows`] transposed and multiplied by `scale` (the factor scale
/// `1/l`, applied once here instead of per centroid): one
/// `degree·width × n` matrix per block (row `j·width + r` holds factor `j`,
/// feature `r` of every row of `x`), so the per-centroid feature blocks are
/// built with unit stride over rows.
fn project_rows_t(
    map: &MaclaurinMap,
    x: ArrayView2<'_, f64>,
    scale: f64,
    par: Parallelism,
) -> Result<Option<Vec<Array2<f64>>>> {
    Ok(project_rows(map, x, par)?.map(|blocks| {
        blocks
            .into_iter()
            .map(|p| {
                let mut q = p.t().as_standard_layout().into_owned();
                q.mapv_inplace(|v| v * scale);
                q
            })
            .collect()
    }))
}

#[cfg(test)]
mod tests;
