//! The feature-space LML and its gradient from sums over rows (see
//! docs/math/gp.rst, feature-space GP, "Distributed evaluation"): for fits
//! whose rows live in blocks elsewhere (Dask workers). The statistics
//! [`FeatureStats`] at the hyperparameters of an evaluation merge exactly
//! over blocks ([`LmlSums`]); from them the driver's `D × D` solve gives
//! the LML and its variance gradients ([`LmlSums::evaluate`]). The
//! length-scale gradient needs the products of every row's features with
//! the solve, so when a length scale is free the solve goes back to the
//! blocks, each adding its rows' part of the in-process second pass
//! ([`GradientPass`]): two reductions, each block at the in-process cost
//! per row. [`fit_feature_gp_blocks`] runs the in-process optimizer
//! ([`super::fit_feature_gp`]'s profiled search with one length scale, its
//! L-BFGS with per-dimension ones, restarts and coarse levels) on such
//! evaluations.

use ndarray::{s, Array1, Array2, ArrayView1, ArrayView2, Axis};

use super::{no_ard, FeatureLmlConfig, FittedFeatureGp, HyperMap, MapAt, SecondPass};
use crate::error::{check_finite, Error, Result};
use crate::gp::features::FeatureGp;
use crate::gp::optimize::{Evaluation, HyperInit, LogParams, Objective};
use crate::progress::Monitor;
use crate::stats::FeatureStats;
use crate::threads::Parallelism;

/// The largest [`LmlSums`] accepted: 256 MiB, i.e. `D²` float64 (`D =
/// 4,096` features). Every block's task and every merge of the tree
/// reduction holds a few of them.
pub const MAX_SUMS_BYTES: usize = 256 << 20;

/// The sums over rows that determine the feature-space LML and its
/// variance gradients at the hyperparameters `values` (see the module
/// docs): the statistics `ΦᵀΦ`, `Φᵀ(y − s)`, `Φᵀ1` and the target sums of
/// the features at `values`. Merged exactly, so the sums of blocks equal
/// those of their concatenated rows.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct LmlSums {
    /// The hyperparameters `(l.., σ², σ_n²)` the features were computed at.
    pub values: Vec<f64>,
    /// `ΦᵀΦ`, `Φᵀ(y − s)`, `Φᵀ1` and the target sums.
    pub stats: FeatureStats,
}

impl LmlSums {
    /// Empty sums of `D = n_features` features at `values` (`(l.., σ²,
    /// σ_n²)`).
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] when the sums exceed [`MAX_SUMS_BYTES`]
    /// or cannot be allocated.
    pub fn new(values: Vec<f64>, n_features: usize) -> Result<Self> {
        Self::check_size(n_features)?;
        Ok(Self {
            values,
            stats: FeatureStats::new(n_features),
        })
    }

    /// Refuses sums of `D = n_features` features beyond
    /// [`MAX_SUMS_BYTES`], `D²` float64, naming `n_components`.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] as in [`LmlSums::new`].
    pub fn check_size(n_features: usize) -> Result<()> {
        let bytes = (n_features as u128).pow(2) * 8;
        if bytes > MAX_SUMS_BYTES as u128 {
            let mib = bytes >> 20;
            let reason = format!(
                "the per-block sums of the marginal likelihood take D^2 float64 for D = \
                 {n_features} features ({mib} MiB), more than the {} MiB allowed; use fewer \
                 components",
                MAX_SUMS_BYTES >> 20,
            );
            return Err(Error::invalid("n_components", reason));
        }
        crate::alloc::check_alloc(
            "n_components",
            "the sums of the marginal likelihood (float64)",
            &[n_features, n_features],
            8,
        )
        .map(|_| ())
    }

    /// The sums of the rows `(x, y)` under `map` at `values` (`(l.., σ²,
    /// σ_n²)`), `chunk_rows` rows transformed at a time.
    ///
    /// # Errors
    /// Shape mismatches, non-finite data, `chunk_rows = 0` (as
    /// [`super::FeatureLml::new`], but a block may have no rows); invalid
    /// hyperparameters;
    /// [`Error::Interrupted`] once `monitor` is cancelled.
    pub fn of_rows(
        map: &HyperMap,
        values: &[f64],
        x: ArrayView2<'_, f64>,
        y: ArrayView1<'_, f64>,
        chunk_rows: usize,
        par: Parallelism,
        monitor: &Monitor,
    ) -> Result<Self> {
        // A block may be empty (its sums are zero).
        check_block(map, x, y)?;
        let k = check_values(map, values)?;
        if chunk_rows == 0 {
            return Err(Error::invalid("chunk_size", "must be >= 1, got 0"));
        }
        let dim = map.n_components();
        let mut sums = Self::new(values.to_vec(), dim)?;
        let rows = chunk_rows.min(x.nrows());
        let mut phi = super::chunk_buffer(rows, dim)?;
        let at = MapAt::new(map.at(&values[..k], values[k])?)?;
        for (xc, yc) in x
            .axis_chunks_iter(Axis(0), chunk_rows)
            .zip(y.axis_chunks_iter(Axis(0), chunk_rows))
        {
            monitor.check()?;
            let mut p = phi.slice_mut(s![..xc.nrows(), ..]);
            at.transform(xc, p.view_mut(), par)?;
            sums.stats.accumulate(p.view(), yc, par)?;
        }
        Ok(sums)
    }

    /// Adds the sums of other rows at the same hyperparameters (exact).
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] for sums at other hyperparameters or of
    /// another shape.
    pub fn merge(&mut self, other: &LmlSums) -> Result<()> {
        if other.values != self.values {
            return Err(Error::invalid(
                "sums",
                "the sums to merge were computed at other hyperparameters",
            ));
        }
        if other.stats.n_features() != self.stats.n_features() {
            return Err(Error::invalid(
                "sums",
                "the sums to merge have another number of features",
            ));
        }
        self.stats.merge(&other.stats)
    }

    /// Checks the shapes and values of sums built from outside (e.g.
    /// deserialized).
    ///
    /// # Errors
    /// [`Error::ShapeMismatch`] or [`Error::NonFinite`].
    pub fn validate(&self) -> Result<()> {
        self.stats.validate()?;
        check_finite("values", self.values.iter())
    }

    /// The LML of all rows' sums, the fitted GP, and the gradient over the
    /// hyperparameters `(ln l.., ln σ², ln σ_n²)` with the length-scale
    /// entries 0 (those are the sums of [`LmlSums::gradient_pass`] over the
    /// rows): the values [`super::FeatureLml`] gives from the same rows.
    ///
    /// # Errors
    /// No rows; a failed factorization.
    pub fn evaluate(&self, center: bool, par: Parallelism) -> Result<(Vec<f64>, FeatureGp)> {
        self.evaluate_with_inverse(center, par)
            .map(|(grad, gp, _)| (grad, gp))
    }

    /// The second pass of the per-dimension length-scale gradient for the
    /// solve of these (all rows') statistics (see [`GradientPass`]).
    ///
    /// # Errors
    /// As [`LmlSums::evaluate`].
    pub fn gradient_pass(&self, center: bool, par: Parallelism) -> Result<GradientPass> {
        let (_, gp, a_inv) = self.evaluate_with_inverse(center, par)?;
        Ok(self.pass_of(&gp, a_inv, center))
    }

    /// The [`GradientPass`] of `gp`, the GP of these sums, and its `A^{−1}`.
    fn pass_of(&self, gp: &FeatureGp, a_inv: Array2<f64>, center: bool) -> GradientPass {
        GradientPass {
            values: self.values.clone(),
            beta: gp.beta.clone(),
            a_inv,
            y_mean: if center { self.stats.y_mean() } else { 0.0 },
        }
    }

    /// [`LmlSums::evaluate`], with `A^{−1}`.
    fn evaluate_with_inverse(
        &self,
        center: bool,
        par: Parallelism,
    ) -> Result<(Vec<f64>, FeatureGp, Array2<f64>)> {
        let k = self.values.len() - 2;
        let nv = self.values[k + 1];
        let gp = FeatureGp::fit(&self.stats, nv, center, par)?;
        let mut grad = vec![0.0; k + 2];
        let a_inv = gp.chol.inverse(par);
        variance_gradients(&self.stats, &gp, &a_inv, center, &mut grad[k..]);
        Ok((grad, gp, a_inv))
    }
}

/// The second reduction of a distributed evaluation with a free length
/// scale: what the driver's solve of the first reduction's statistics sends
/// to every block (`w`, `A^{−1}`, the subtracted target mean, at `values`),
/// so that each block adds its rows' part of the length-scale gradient with
/// the in-process second pass (`O(n D² + n D d)` per block of `n` rows; a
/// one-reduction evaluation would need the products `ΦᵀG_a` per length
/// scale from every block, `n D²` each). Pickled by value.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct GradientPass {
    /// The hyperparameters `(l.., σ², σ_n²)` of the evaluation.
    pub values: Vec<f64>,
    /// `w` (`D`).
    pub beta: Array1<f64>,
    /// `A^{−1}` (`D × D`).
    pub a_inv: Array2<f64>,
    /// The target mean subtracted (0 without centering).
    pub y_mean: f64,
}

impl GradientPass {
    /// The length-scale gradient's sums of the rows `(x, y)` under `map`,
    /// `chunk_rows` rows transformed at a time: `k` entries (one per length
    /// scale) followed by the number of rows, so that the sums of blocks
    /// add up to those of all rows.
    ///
    /// # Errors
    /// As [`LmlSums::of_rows`]; [`Error::ShapeMismatch`] for a `w` or
    /// `A^{−1}` of another width than the map's.
    pub fn of_rows(
        &self,
        map: &HyperMap,
        x: ArrayView2<'_, f64>,
        y: ArrayView1<'_, f64>,
        chunk_rows: usize,
        par: Parallelism,
        monitor: &Monitor,
    ) -> Result<Vec<f64>> {
        check_block(map, x, y)?;
        self.validate()?;
        let k = check_values(map, &self.values)?;
        if self.beta.len() != map.n_components() {
            return Err(Error::ShapeMismatch {
                name: "length of the weights of the gradient pass",
                expected: map.n_components(),
                got: self.beta.len(),
            });
        }
        if chunk_rows == 0 {
            return Err(Error::invalid("chunk_size", "must be >= 1, got 0"));
        }
        crate::alloc::check_alloc(
            "chunk_size",
            "two chunks of features (float64)",
            &[2, chunk_rows.min(x.nrows()), map.n_components()],
            8,
        )?;
        let mut out = vec![0.0; k + 1];
        let at = MapAt::new(map.at(&self.values[..k], self.values[k])?)?;
        let pass = SecondPass {
            map: &at,
            beta: self.beta.view(),
            a_inv: self.a_inv.view(),
            y_mean: self.y_mean,
            noise_variance: self.values[k + 1],
        };
        pass.add_rows(x, y, chunk_rows, par, monitor, &mut out[..k])?;
        out[k] = x.nrows() as f64;
        Ok(out)
    }

    /// Checks the shapes and values of a pass built from outside (e.g.
    /// deserialized): `A^{−1}` square of the width of `w`, all finite.
    ///
    /// # Errors
    /// [`Error::ShapeMismatch`] or [`Error::NonFinite`].
    pub fn validate(&self) -> Result<()> {
        let d = self.beta.len();
        if self.a_inv.dim() != (d, d) {
            return Err(Error::ShapeMismatch {
                name: "size of the inverse of the gradient pass",
                expected: d,
                got: self.a_inv.nrows(),
            });
        }
        if self.values.len() < 3 {
            return Err(Error::ShapeMismatch {
                name: "number of hyperparameters of the gradient pass",
                expected: 3,
                got: self.values.len(),
            });
        }
        check_finite("beta", self.beta.iter())?;
        check_finite("a_inv", self.a_inv.iter())?;
        check_finite("y_mean", std::iter::once(&self.y_mean))?;
        check_finite("values", self.values.iter())
    }
}

/// The number of length scales `k` of `values` (`(l.., σ², σ_n²)`) for
/// `map`, the values checked.
fn check_values(map: &HyperMap, values: &[f64]) -> Result<usize> {
    let d = map.n_features_in();
    let k = values.len().saturating_sub(2);
    if k != 1 && k != d {
        return Err(Error::ShapeMismatch {
            name: "number of length scales",
            expected: d,
            got: k,
        });
    }
    if k != 1 && !map.supports_ard() {
        return Err(no_ard());
    }
    for (i, &v) in values.iter().enumerate() {
        let name = crate::gp::optimize::HYPER_NAMES[if i < k { 0 } else { i + 1 - k }];
        crate::gp::check_positive(name, v)?;
    }
    Ok(k)
}

/// `∂LML/∂ln σ²` and `∂LML/∂ln σ_n²` (see the module docs of
/// [`super`]) into `out[0]` and `out[1]`, from the statistics, their GP and
/// `A^{−1}`.
pub(super) fn variance_gradients(
    stats: &FeatureStats,
    gp: &FeatureGp,
    a_inv: &Array2<f64>,
    center: bool,
    out: &mut [f64],
) {
    let nv = gp.noise_variance;
    let trace_inv: f64 = a_inv.diag().sum();
    let (b, yty) = stats.centered(center);
    let w = &gp.beta;
    let (n, d) = (stats.n as f64, stats.n_features() as f64);
    let wtw = w.dot(w);
    let wtb = w.dot(&b);
    let r2 = (yty - wtb - nv * wtw).max(0.0);
    out[0] = 0.5 * (wtw - d + trace_inv);
    out[1] = 0.5 * (r2 / nv - (n - d) - trace_inv);
}

/// The feature-space LML as an [`Objective`] whose evaluations come from
/// reductions over rows held elsewhere, of the coarse level `level` (0: all
/// `N` rows; level `j + 1` keeps the rows `0, 4, 8, …` of level `j`,
/// `⌊n_j/4⌋` of them, as [`super::FeatureLml`]'s subsample):
/// `sums(values, level)` gives the merged [`LmlSums`] of all rows at
/// `values` and, when a length scale is free, `pass(p, level)` the summed
/// [`GradientPass::of_rows`] of all rows for the pass `p` of the driver's
/// solve (two reductions, each block at the cost of the in-process passes).
pub struct BlockLml<'a, F, G> {
    pub(super) map: &'a HyperMap,
    pub(super) params: LogParams,
    pub(super) center: bool,
    pub(super) n_rows: usize,
    pub(super) level: usize,
    pub(super) sums: &'a F,
    pub(super) pass: &'a G,
    pub(super) par: Parallelism,
}

impl<F, G> Objective for BlockLml<'_, F, G>
where
    F: Fn(&[f64], usize) -> Result<LmlSums> + Sync,
    G: Fn(&GradientPass, usize) -> Result<Vec<f64>> + Sync,
{
    type Fit = (FeatureGp, FeatureStats);

    fn n_rows(&self) -> usize {
        self.n_rows
    }

    fn evaluate(&self, theta: &[f64], monitor: &Monitor) -> Result<Evaluation<Self::Fit>> {
        monitor.check()?;
        let values = self.params.at(theta)?;
        let k = self.params.n_length_scales();
        // A free length scale: its gradient from a second reduction.
        let second = self.params.free.iter().any(|&i| i < k);
        let sums = (self.sums)(&values, self.level)?;
        let dim = self.map.n_components();
        check_complete(&sums, &values, self.n_rows, self.level, dim)?;
        let (mut grad, gp, a_inv) =
            crate::threads::install(|| sums.evaluate_with_inverse(self.center, self.par))??;
        if second {
            monitor.check()?;
            let pass = sums.pass_of(&gp, a_inv, self.center);
            let out = (self.pass)(&pass, self.level)?;
            check_finite("length-scale sums", out.iter())?;
            if out.len() != k + 1 || out[k] != self.n_rows as f64 {
                return Err(incomplete_sums(self.n_rows, self.level));
            }
            grad[..k].copy_from_slice(&out[..k]);
        }
        Ok(Evaluation {
            value: gp.lml,
            grad: self.params.select(&grad),
            fit: (gp, sums.stats),
        })
    }

    fn subsample(&self, rows: &[usize]) -> Result<Option<Self>> {
        let strided =
            rows.len() == self.n_rows / 4 && rows.iter().enumerate().all(|(i, &r)| r == 4 * i);
        Ok(strided.then(|| Self {
            map: self.map,
            params: self.params.clone(),
            center: self.center,
            n_rows: rows.len(),
            level: self.level + 1,
            sums: self.sums,
            pass: self.pass,
            par: self.par,
        }))
    }
}

/// The error for sums that are not those of all `n_rows` rows of `level`
/// at the requested hyperparameters.
fn incomplete_sums(n_rows: usize, level: usize) -> Error {
    Error::invalid(
        "sums",
        format!(
            "an evaluation needs the sums of all {n_rows} rows of level {level} at the \
             requested hyperparameters"
        ),
    )
}

/// Checks that `sums` (given back by the caller's reduction) are valid and
/// those of all `n_rows` rows of `level` at `values`, of `dim` features.
///
/// # Errors
/// As [`LmlSums::validate`]; [`incomplete_sums`] otherwise.
fn check_complete(
    sums: &LmlSums,
    values: &[f64],
    n_rows: usize,
    level: usize,
    dim: usize,
) -> Result<()> {
    sums.validate()?;
    if sums.values != values || sums.stats.n != n_rows as u64 || sums.stats.n_features() != dim {
        return Err(incomplete_sums(n_rows, level));
    }
    Ok(())
}

/// [`super::fit_feature_gp`] on rows held elsewhere: the same start
/// (`cfg.noise_variance` must be given: `0.1 var(y)` is the caller's to
/// compute, and so is `cfg.data_length_scale`, without which a free
/// length scale starts from the map's), optimizer, restarts and coarse levels, every evaluation the
/// reductions `sums` and (per-dimension length scales) `pass` over `n_rows`
/// rows (see [`BlockLml`]); the map at the optimum, its GP and statistics.
///
/// # Errors
/// [`Error::InvalidParameter`] without `cfg.noise_variance`, for sums too
/// large ([`LmlSums::check_size`]) and as [`super::fit_feature_gp`]; the
/// errors of `sums` and `pass`.
pub fn fit_feature_gp_blocks<F, G>(
    map: &HyperMap,
    n_rows: usize,
    cfg: &FeatureLmlConfig,
    sums: &F,
    pass: &G,
    par: Parallelism,
    monitor: &Monitor,
) -> Result<FittedFeatureGp>
where
    F: Fn(&[f64], usize) -> Result<LmlSums> + Sync,
    G: Fn(&GradientPass, usize) -> Result<Vec<f64>> + Sync,
{
    if n_rows == 0 {
        return Err(Error::invalid("X", "needs at least one training row"));
    }
    if cfg.ard && !map.supports_ard() {
        return Err(no_ard());
    }
    let Some(noise) = cfg.noise_variance else {
        return Err(Error::invalid(
            "noise_variance",
            "a fit on rows held elsewhere needs the initial noise variance",
        ));
    };
    let d = map.n_features_in();
    let (l0, kv0) = map.hyperparameters();
    let init = HyperInit {
        length_scale: Some(l0),
        kernel_variance: Some(kv0),
        noise_variance: Some(noise),
        ard: cfg.ard,
        optimize: cfg.optimize.clone(),
    };
    // Every value is given: the rows are not read.
    let params = init.resolve(
        Array2::zeros((0, d)).view(),
        Array1::zeros(0).view(),
        cfg.center,
    )?;
    LmlSums::check_size(map.n_components())?;
    super::check_data_length_scale(cfg, params.n_length_scales())?;
    if params.n_length_scales() == 1 && !params.free.is_empty() {
        // The profiled search: the statistics at unit kernel variance.
        let levels =
            super::profiled::level_rows(n_rows, cfg.optimizer.coarse_min_rows, map.n_components());
        let stats_at = |l: f64, level: usize, monitor: &Monitor| {
            monitor.check()?;
            let values = vec![l, 1.0, noise];
            let s = sums(&values, level)?;
            let rows = levels.get(level).copied().unwrap_or(0);
            check_complete(&s, &values, rows, level, map.n_components())?;
            Ok(s.stats)
        };
        return super::profiled::fit(map, &params, cfg, n_rows, &stats_at, par, monitor);
    }
    let k = params.n_length_scales();
    let mut params = params;
    if params.free.contains(&0) {
        // The start candidates as one length scale for every dimension,
        // compared on the coarsest level.
        let levels =
            super::profiled::level_rows(n_rows, cfg.optimizer.coarse_min_rows, map.n_components());
        let coarsest = levels.len() - 1;
        let candidates = crate::gp::optimize::length_scale_starts(
            &params.values[..k],
            cfg.data_length_scale.clone(),
        );
        let best = crate::gp::optimize::best_start(
            &candidates,
            |l| {
                monitor.check()?;
                let mut values = l.clone();
                values.extend([1.0, noise]);
                let s = sums(&values, coarsest)?;
                check_complete(&s, &values, levels[coarsest], coarsest, map.n_components())?;
                super::profiled::profiled_lml(&params, &s.stats, cfg.center, par)
            },
            "LML",
            levels[coarsest],
            monitor,
        )?;
        params.values[..k].copy_from_slice(&candidates[best]);
    }
    let params = if super::needs_variance_start(&params) {
        // The statistics at the start length scales, unit kernel variance.
        let mut values = params.values.clone();
        values[k] = 1.0;
        let s = sums(&values, 0)?;
        check_complete(&s, &values, n_rows, 0, map.n_components())?;
        super::profiled::variance_start(&params, &s.stats, cfg.center, par)?
    } else {
        params
    };
    let obj = BlockLml {
        map,
        params,
        center: cfg.center,
        n_rows,
        level: 0,
        sums,
        pass,
        par,
    };
    super::optimize_objective(map, &obj.params, &obj, cfg, monitor)
}

/// The checks of one block of rows for `map`: as many targets as rows,
/// finite values, and `map`'s input width (an empty block is valid).
fn check_block(map: &HyperMap, x: ArrayView2<'_, f64>, y: ArrayView1<'_, f64>) -> Result<()> {
    if x.nrows() != y.len() {
        return Err(Error::ShapeMismatch {
            name: "length of y (the number of rows of X)",
            expected: x.nrows(),
            got: y.len(),
        });
    }
    check_finite("X", x.iter())?;
    check_finite("y", y.iter())?;
    Error::check_n_features(map.n_features_in(), x.ncols())
}
