//! The choice of the clustering threshold `θ` (the `threshold="auto"` of
//! the Python estimator, `docs/math/localized.rst`, "Choosing the
//! threshold"). The localized GP approximates the exact GP with the same
//! hyperparameters, and `θ` trades its cost for its fidelity, so the default
//! criterion scores every candidate of a grid by its fidelity to the exact
//! GP: the mean KL divergence of its leave-one-out predictions to the exact
//! GP's, on the training rows (a seeded subsample of at most 1,000 when
//! there are more); the most faithful candidate wins, the first in grid
//! order on a tie (so the fewest clusters). K-fold cross-validation of the
//! log predictive density is the other criterion. The candidates and the
//! criterion are values ([`ThresholdSearch`]), so another grid or score is a
//! new value or a new [`ThresholdCriterion`] variant.

use faer::MatRef;
use ndarray::{ArrayView1, ArrayView2, Axis};
use rand::seq::SliceRandom;

use super::{LocalizedConfig, LocalizedMaclaurinGp};
use crate::error::{Error, Result};
use crate::gp::cluster::nearest;
use crate::gp::metrics;
use crate::kernels::StationaryKernel;
use crate::linalg::{as_faer, Cholesky};
use crate::progress::Monitor;
use crate::real::Real;
use crate::rng::substream;
use crate::threads::Parallelism;

/// The default candidates `θ/l`, in order of preference (fewest clusters
/// first); `None` is one cluster (the vanilla optimized Maclaurin GP).
pub const DEFAULT_THRESHOLDS: [Option<f64>; 6] =
    [None, Some(4.0), Some(2.0), Some(1.0), Some(0.5), Some(0.25)];

/// The number of cross-validation folds of
/// [`ThresholdCriterion::CrossValidatedLogDensity`] in
/// [`ThresholdSearch::cross_validated`].
pub const DEFAULT_FOLDS: usize = 5;

/// The default bound on the rows scored (the rows of the exact GP of
/// [`ThresholdCriterion::ExactGpFidelity`]; the held-out rows over all folds
/// of [`ThresholdCriterion::CrossValidatedLogDensity`]).
pub const DEFAULT_MAX_SCORED: usize = 1000;

/// The stream of the fit's seed that draws the folds or the subsample
/// (apart from the streams of the map, so they do not change the weights).
const STREAM_SPLIT: u64 = 1 << 40;

/// How the candidate thresholds are scored and chosen.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum ThresholdCriterion {
    /// K-fold cross-validation (higher is better). `m = min(N, max_scored)`
    /// rows drawn from the fit's seed are split into `K = min(n_folds, m)`
    /// folds of sizes differing by at most one; for each fold the model is
    /// fitted on all the other `N − |fold|` rows and predicts the fold. A
    /// candidate's score is the mean over the `m` scored rows of
    /// `ln N(y_i; μ*_i, v*_i + σ_n²)` (minus [`metrics::nll_terms`]; a
    /// prediction that overflows scores `−∞`), and its standard error that of
    /// the mean of its per-row differences to the best candidate's terms
    /// (paired, so what the rows share cancels; reported, to judge which
    /// differences the data resolve). The choice is the best score, the
    /// first candidate on a tie. With fewer than 2 rows to fit on in some fold, no
    /// candidate is scored.
    CrossValidatedLogDensity {
        /// The number of folds `K >= 2`.
        n_folds: usize,
        /// The most rows scored over all folds, `>= 2` (the cost of the
        /// predictions; every fit uses the other rows).
        max_scored: usize,
    },
    /// Fidelity to the exact GP with the same hyperparameters (lower is
    /// better; the default). On `m = min(N, max_rows)` rows (all of them, or
    /// a subsample drawn from the fit's seed), the exact GP and every
    /// candidate are fitted (the same seed, so the same map draws), and
    /// every row `i` gets both models' leave-one-out predictive
    /// distributions of its noisy target: the exact GP's
    /// `μ = y_i − [K_y⁻¹y]_i/[K_y⁻¹]_ii`, `v = 1/[K_y⁻¹]_ii`; the
    /// candidate's, its centroids kept, from the GP of its nearest centroid
    /// with the leverage `h_i = v*_i/σ_n²` of the row in that GP's
    /// statistics (0 when the row is beyond the cutoff),
    /// `μ = y_i − (y_i − μ*_i)/(1 − h_i)`, `v = v*_i/(1 − h_i) + σ_n²`
    /// (`docs/math/localized.rst`, "Choosing the threshold"). A candidate
    /// scores the mean over rows of `KL(candidate ‖ exact)`
    /// ([`metrics::kl_term`]; `+∞` for a row whose prediction overflows or
    /// whose leverage rounds to 1), and its standard error that of the mean
    /// of its per-row differences to the best candidate's terms. The choice
    /// is the lowest score, the first candidate on a tie. With fewer than 2
    /// rows, no candidate is scored.
    ExactGpFidelity {
        /// The most rows of the exact GP, `>= 2` (its cost is
        /// `O(max_rows³)` time and `2·max_rows²` float64).
        max_rows: usize,
    },
}

impl ThresholdCriterion {
    /// A short description (the Python estimator's `auto_criterion_`).
    pub fn name(&self) -> String {
        match self {
            Self::ExactGpFidelity { max_rows } => format!(
                "mean leave-one-out KL divergence to the exact GP, lower is better \
                 (at most {max_rows} rows)"
            ),
            Self::CrossValidatedLogDensity {
                n_folds,
                max_scored,
            } => format!(
                "{n_folds}-fold cross-validated mean log predictive density, higher is \
                 better (at most {max_scored} rows scored)"
            ),
        }
    }

    /// Whether a higher score is better (the log density) rather than a
    /// lower one (the KL divergence).
    pub fn higher_is_better(&self) -> bool {
        matches!(self, Self::CrossValidatedLogDensity { .. })
    }

    /// What a score is, for the progress messages.
    fn score_name(&self) -> &'static str {
        match self {
            Self::ExactGpFidelity { .. } => "mean leave-one-out KL to the exact GP",
            Self::CrossValidatedLogDensity { .. } => "cross-validated log predictive density",
        }
    }
}

/// The search of `θ`: the candidates (in units of the length scale, `None`
/// for one cluster) and the criterion.
#[derive(Clone, Debug, PartialEq)]
pub struct ThresholdSearch {
    /// The candidates, in order of preference on a tie.
    pub candidates: Vec<Option<f64>>,
    /// How each is scored.
    pub criterion: ThresholdCriterion,
}

impl Default for ThresholdSearch {
    /// [`DEFAULT_THRESHOLDS`] scored by
    /// [`ThresholdCriterion::ExactGpFidelity`] on at most
    /// [`DEFAULT_MAX_SCORED`] rows.
    fn default() -> Self {
        Self {
            candidates: DEFAULT_THRESHOLDS.to_vec(),
            criterion: ThresholdCriterion::ExactGpFidelity {
                max_rows: DEFAULT_MAX_SCORED,
            },
        }
    }
}

/// The outcome of a [`ThresholdSearch`].
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct ThresholdChoice {
    /// The chosen `θ/l` (`None`: one cluster; also when nothing was scored).
    pub best: Option<f64>,
    /// Every candidate with its score (lower or higher is better as
    /// [`ThresholdCriterion::higher_is_better`] says), in the order of the
    /// candidates (empty when the data are too few to score).
    pub scores: Vec<(Option<f64>, f64)>,
    /// The standard error of every candidate's score difference to the best
    /// score (0 for the best), in the order of `scores`.
    pub std_errors: Vec<f64>,
    /// The criterion that gave the scores.
    pub criterion: ThresholdCriterion,
}

impl ThresholdSearch {
    /// [`DEFAULT_THRESHOLDS`] scored by
    /// [`ThresholdCriterion::CrossValidatedLogDensity`] with
    /// [`DEFAULT_FOLDS`] folds and at most [`DEFAULT_MAX_SCORED`] rows.
    pub fn cross_validated() -> Self {
        Self {
            candidates: DEFAULT_THRESHOLDS.to_vec(),
            criterion: ThresholdCriterion::CrossValidatedLogDensity {
                n_folds: DEFAULT_FOLDS,
                max_scored: DEFAULT_MAX_SCORED,
            },
        }
    }

    /// Scores every candidate for `config` (its `threshold` is replaced by
    /// each candidate; its `n_clusters` still bounds the clustering) on
    /// `(x, y)` and returns the choice with all the scores. `seed` is the
    /// model's seed (the fits use it as [`LocalizedMaclaurinGp::fit`] does).
    /// `monitor` is passed to every fit and prediction, and gets one message
    /// per candidate.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] for an empty grid, a candidate that is
    /// not a finite `θ > 0`, fewer than 2 folds, scored rows or exact-GP
    /// rows; a length of `y` that differs from the rows of `x`; the errors
    /// of the fits and predictions (and of the exact GP's memory check).
    pub fn run<T: Real>(
        &self,
        x: ArrayView2<'_, T>,
        y: ArrayView1<'_, f64>,
        config: &LocalizedConfig,
        seed: u64,
        par: Parallelism,
        monitor: &Monitor,
    ) -> Result<ThresholdChoice> {
        if self.candidates.is_empty() {
            return Err(Error::invalid("threshold", "no candidate thresholds"));
        }
        if let Some(t) = self
            .candidates
            .iter()
            .flatten()
            .find(|t| !(t.is_finite() && **t > 0.0))
        {
            return Err(Error::invalid(
                "threshold",
                format!("candidates must be finite numbers > 0, got {t}"),
            ));
        }
        if y.len() != x.nrows() {
            return Err(Error::ShapeMismatch {
                name: "length of y (the number of rows of X)",
                expected: x.nrows(),
                got: y.len(),
            });
        }
        let criterion = self.criterion;
        let fits = Fits {
            config,
            seed,
            par,
            monitor,
        };
        let terms = match criterion {
            ThresholdCriterion::ExactGpFidelity { max_rows } => {
                if max_rows < 2 {
                    return Err(Error::invalid(
                        "max_rows",
                        format!("must be >= 2, got {max_rows}"),
                    ));
                }
                self.fidelity_terms(x, y, &fits, max_rows)?
            }
            ThresholdCriterion::CrossValidatedLogDensity {
                n_folds,
                max_scored,
            } => {
                if n_folds < 2 {
                    return Err(Error::invalid(
                        "n_folds",
                        format!("must be >= 2, got {n_folds}"),
                    ));
                }
                if max_scored < 2 {
                    return Err(Error::invalid(
                        "max_scored",
                        format!("must be >= 2, got {max_scored}"),
                    ));
                }
                self.cross_validated_terms(x, y, &fits, n_folds, max_scored)?
            }
        };
        let Some(terms) = terms else {
            return Ok(ThresholdChoice {
                best: None,
                scores: Vec::new(),
                std_errors: Vec::new(),
                criterion,
            });
        };
        let mean = |t: &[f64]| t.iter().sum::<f64>() / t.len() as f64;
        let scores: Vec<f64> = terms.iter().map(|t| mean(t)).collect();
        let higher = criterion.higher_is_better();
        let better = |a: f64, b: f64| if higher { a > b } else { a < b };
        let top = (0..scores.len())
            .reduce(|a, b| if better(scores[b], scores[a]) { b } else { a })
            .unwrap_or(0);
        let std_errors: Vec<f64> = terms
            .iter()
            .map(|t| paired_std_error(t, &terms[top]))
            .collect();
        for (c, &theta) in self.candidates.iter().enumerate() {
            monitor.message(format!(
                "threshold {}: {} {:.4} (standard error of the difference to the best {:.4}){}",
                theta.map_or_else(|| "one cluster".to_string(), |t| t.to_string()),
                criterion.score_name(),
                scores[c],
                std_errors[c],
                if c == top { ", chosen" } else { "" }
            ));
        }
        Ok(ThresholdChoice {
            best: self.candidates[top],
            scores: self.candidates.iter().copied().zip(scores).collect(),
            std_errors,
            criterion,
        })
    }

    /// The per-row KL divergences of [`ThresholdCriterion::ExactGpFidelity`],
    /// `terms[c][i]` for candidate `c` and row `i` of the subsample (in row
    /// order); `None` with fewer than 2 rows.
    fn fidelity_terms<T: Real>(
        &self,
        x: ArrayView2<'_, T>,
        y: ArrayView1<'_, f64>,
        fits: &Fits<'_>,
        max_rows: usize,
    ) -> Result<Option<Vec<Vec<f64>>>> {
        let (config, seed, par, monitor) = (fits.config, fits.seed, fits.par, fits.monitor);
        let n = x.nrows();
        if n < 2 {
            return Ok(None);
        }
        let m = n.min(max_rows);
        crate::alloc::check_alloc(
            "max_rows",
            &format!("the exact GP's kernel matrix and its inverse on {m} rows (float64)"),
            &[2, m, m],
            8,
        )?;
        let rows: Vec<usize> = if m < n {
            let mut order: Vec<usize> = (0..n).collect();
            order.shuffle(&mut substream(seed, STREAM_SPLIT));
            let mut rows = order[..m].to_vec();
            rows.sort_unstable();
            rows
        } else {
            (0..n).collect()
        };
        let (xs, ys) = (x.select(Axis(0), &rows), y.select(Axis(0), &rows));
        let noise = config.noise_variance;
        let mut exact: Option<(Vec<f64>, Vec<f64>)> = None;
        let mut terms = Vec::with_capacity(self.candidates.len());
        for &theta in &self.candidates {
            // The fit checks the data before the exact GP uses them.
            let gp = fits.fit(xs.view(), ys.view(), theta)?;
            if exact.is_none() {
                exact = Some(exact_loo(gp.x.view(), gp.y.view(), config, par)?);
            }
            let (mu_e, var_e) = exact
                .as_ref()
                .ok_or_else(|| Error::Internal("the exact GP is fitted".into()))?;
            // Every row by its nearest centroid, as `predict` assigns it, and
            // its squared distance there, summed as the centroid's
            // statistics sum it (so the cutoff test is theirs).
            let near = nearest(gp.centroids.view(), gp.x.view(), par, monitor)?;
            let dist_sq: Vec<f64> = near
                .iter()
                .zip(gp.x.rows())
                .map(|(&c, row)| {
                    row.iter()
                        .zip(gp.centroids.row(c))
                        .map(|(a, b)| (a - b) * (a - b))
                        .sum::<f64>()
                })
                .collect();
            // A prediction that overflows (refused as an invalid `X`) scores
            // +∞; other errors (an interruption) end the search.
            let p = match gp.predict(gp.x.view(), true, par, monitor) {
                Ok(p) => p,
                Err(Error::InvalidParameter { .. }) => {
                    terms.push(vec![f64::INFINITY; m]);
                    continue;
                }
                Err(e) => return Err(e),
            };
            let var = p
                .var
                .ok_or_else(|| Error::Internal("the prediction has no variance".into()))?;
            let row_terms = (0..m)
                .map(|i| {
                    // Centered units: the target mean cancels in the KL.
                    let (yc, mu) = (gp.y[i], p.mean[i] - gp.y_mean);
                    let v = var[i].max(0.0);
                    let (mu_loo, v_loo) = if dist_sq[i] < gp.cutoff_sq {
                        let keep = 1.0 - v / noise;
                        if keep.is_nan() || keep <= 0.0 {
                            return f64::INFINITY;
                        }
                        (yc - (yc - mu) / keep, v / keep)
                    } else {
                        (mu, v)
                    };
                    let t = metrics::kl_term(mu_loo, v_loo + noise, mu_e[i], var_e[i]);
                    if t.is_finite() {
                        t
                    } else {
                        f64::INFINITY
                    }
                })
                .collect();
            terms.push(row_terms);
        }
        Ok(Some(terms))
    }

    /// The per-row log densities of
    /// [`ThresholdCriterion::CrossValidatedLogDensity`], `terms[c][i]` for
    /// candidate `c` and scored row `i` (rows in fold order); `None` when some
    /// fold leaves fewer than 2 rows to fit on.
    fn cross_validated_terms<T: Real>(
        &self,
        x: ArrayView2<'_, T>,
        y: ArrayView1<'_, f64>,
        fits: &Fits<'_>,
        n_folds: usize,
        max_scored: usize,
    ) -> Result<Option<Vec<Vec<f64>>>> {
        let (config, seed, par, monitor) = (fits.config, fits.seed, fits.par, fits.monitor);
        let n = x.nrows();
        let m = n.min(max_scored);
        let k = n_folds.min(m);
        // The folds are the `m` first rows of the permutation, cut at
        // `j·m/K`; the largest has `⌈m/K⌉` rows.
        if k < 2 || n - m.div_ceil(k) < 2 {
            return Ok(None);
        }
        let mut order: Vec<usize> = (0..n).collect();
        order.shuffle(&mut substream(seed, STREAM_SPLIT));
        let mut terms = vec![Vec::with_capacity(m); self.candidates.len()];
        let mut in_fold = vec![false; n];
        for j in 0..k {
            let mut val = order[j * m / k..(j + 1) * m / k].to_vec();
            val.sort_unstable();
            val.iter().for_each(|&i| in_fold[i] = true);
            let train: Vec<usize> = (0..n).filter(|&i| !in_fold[i]).collect();
            val.iter().for_each(|&i| in_fold[i] = false);
            let (x_train, y_train) = (x.select(Axis(0), &train), y.select(Axis(0), &train));
            let (x_val, y_val) = (x.select(Axis(0), &val), y.select(Axis(0), &val));
            for (&theta, out) in self.candidates.iter().zip(&mut terms) {
                let gp = fits.fit(x_train.view(), y_train.view(), theta)?;
                // A prediction that overflows (refused as an invalid `X`)
                // scores -∞; other errors (an interruption) end the search.
                let p = match gp.predict(x_val.view(), true, par, monitor) {
                    Ok(p) => p,
                    Err(Error::InvalidParameter { .. }) => {
                        out.extend(std::iter::repeat_n(f64::NEG_INFINITY, val.len()));
                        continue;
                    }
                    Err(e) => return Err(e),
                };
                let var = p
                    .var
                    .ok_or_else(|| Error::Internal("the prediction has no variance".into()))?;
                let noisy = var.mapv(|v| v.max(0.0) + config.noise_variance);
                let nll = metrics::nll_terms(y_val.view(), p.mean.view(), noisy.view())?;
                out.extend(nll.iter().map(|t| -t));
            }
        }
        Ok(Some(terms))
    }
}

/// What every candidate's fit shares: the settings (the threshold
/// replaced), the seed, the parallelism and the monitor.
struct Fits<'a> {
    config: &'a LocalizedConfig,
    seed: u64,
    par: Parallelism,
    monitor: &'a Monitor,
}

impl Fits<'_> {
    /// The model of the candidate `θ/l = theta` on `(x, y)`.
    fn fit<T: Real>(
        &self,
        x: ArrayView2<'_, T>,
        y: ArrayView1<'_, f64>,
        theta: Option<f64>,
    ) -> Result<LocalizedMaclaurinGp> {
        let cfg = LocalizedConfig {
            threshold: theta,
            ..self.config.clone()
        };
        LocalizedMaclaurinGp::fit(x, y, &cfg, self.seed, self.par, self.monitor)
    }
}

/// The exact GP's leave-one-out predictive means and noisy variances at its
/// training rows (`docs/math/gp.rst`; Rasmussen & Williams Eq. 5.12): with
/// `K_y = K + σ_n² I` (the jitter ladder of [`Cholesky::shifted`]),
/// `μ_i = y_i − [K_y⁻¹y]_i/[K_y⁻¹]_ii` and `v_i = 1/[K_y⁻¹]_ii`, for the
/// Gaussian kernel of `config` and the (centered) targets `y`.
fn exact_loo(
    x: ArrayView2<'_, f64>,
    y: ArrayView1<'_, f64>,
    config: &LocalizedConfig,
    par: Parallelism,
) -> Result<(Vec<f64>, Vec<f64>)> {
    let kernel =
        StationaryKernel::gaussian(vec![config.map.length_scale], config.map.kernel_variance);
    let chol = {
        let k = kernel.cross(x, x, par);
        let k: MatRef<'_, f64> = as_faer(k.view());
        Cholesky::shifted(k, config.noise_variance, par)?
    };
    let alpha = chol.solve_vec(y, par);
    Ok(chol
        .inverse_diagonal(par)
        .into_iter()
        .enumerate()
        .map(|(i, d)| (y[i] - alpha[i] / d, 1.0 / d))
        .unzip())
}

/// The standard error of the mean of `a_i − b_i`,
/// `sqrt(Σ (d_i − d̄)² / (m (m − 1)))` (0 for `a = b`; `∞` when a term is
/// not finite).
fn paired_std_error(a: &[f64], b: &[f64]) -> f64 {
    let m = a.len();
    if a == b {
        return 0.0;
    }
    if m < 2 || a.iter().chain(b).any(|v| !v.is_finite()) {
        return f64::INFINITY;
    }
    let d: Vec<f64> = a.iter().zip(b).map(|(x, y)| x - y).collect();
    let mean = d.iter().sum::<f64>() / m as f64;
    let ss: f64 = d.iter().map(|v| (v - mean) * (v - mean)).sum();
    (ss / (m as f64 * (m as f64 - 1.0))).sqrt()
}

#[cfg(test)]
mod tests {
    use ndarray::{Array1, Array2};
    use rand::Rng as _;
    use rand_distr::StandardNormal;

    use super::*;
    use crate::maclaurin::map::MaclaurinConfig;
    use crate::maclaurin::MaclaurinKernel;
    use crate::rng::seeded;

    fn data(n: usize, seed: u64) -> (Array2<f64>, Array1<f64>) {
        let mut rng = seeded(seed);
        let x = Array2::from_shape_fn((n, 2), |_| 2.0 * rng.sample::<f64, _>(StandardNormal));
        let y = x.map_axis(Axis(1), |r| (2.0 * r[0]).sin() + 0.3 * r[1]);
        (x, y)
    }

    fn config() -> LocalizedConfig {
        let mut map = MaclaurinConfig::new(MaclaurinKernel::Gaussian, 16);
        map.length_scale = 0.7;
        LocalizedConfig {
            map,
            noise_variance: 0.01,
            threshold: None,
            n_clusters: None,
            tol: 1e-12,
            center_y: true,
            device: crate::gpu::Device::Cpu,
        }
    }

    fn run(search: &ThresholdSearch, x: &Array2<f64>, y: &Array1<f64>) -> Result<ThresholdChoice> {
        search.run(
            x.view(),
            y.view(),
            &config(),
            5,
            Parallelism::Rayon,
            &Monitor::default(),
        )
    }

    /// The scores, standard errors and choice written out: the folds of
    /// the split stream, each candidate fitted on the other rows, the mean
    /// of `ln N(y; μ, v + σ_n²)` over the scored rows, the paired standard
    /// errors and the best score (the first on a tie).
    fn oracle(
        candidates: &[Option<f64>],
        x: &Array2<f64>,
        y: &Array1<f64>,
        n_folds: usize,
        max_scored: usize,
    ) -> (Vec<f64>, Vec<f64>, Option<f64>) {
        let n = x.nrows();
        let m = n.min(max_scored);
        let mut order: Vec<usize> = (0..n).collect();
        order.shuffle(&mut substream(5, STREAM_SPLIT));
        let mut terms = vec![Vec::new(); candidates.len()];
        for j in 0..n_folds {
            let mut val = order[j * m / n_folds..(j + 1) * m / n_folds].to_vec();
            val.sort_unstable();
            let train: Vec<usize> = (0..n).filter(|i| !val.contains(i)).collect();
            let (xt, yt) = (x.select(Axis(0), &train), y.select(Axis(0), &train));
            let (xv, yv) = (x.select(Axis(0), &val), y.select(Axis(0), &val));
            for (&theta, out) in candidates.iter().zip(&mut terms) {
                let cfg = LocalizedConfig {
                    threshold: theta,
                    ..config()
                };
                let seq = Parallelism::Sequential;
                let gp = LocalizedMaclaurinGp::fit(
                    xt.view(),
                    yt.view(),
                    &cfg,
                    5,
                    seq,
                    &Monitor::default(),
                )
                .unwrap();
                let p = gp
                    .predict(xv.view(), true, seq, &Monitor::default())
                    .unwrap();
                let var = p.var.unwrap();
                for i in 0..val.len() {
                    let v = var[i].max(0.0) + 0.01;
                    let r = yv[i] - p.mean[i];
                    out.push(-0.5 * (2.0 * std::f64::consts::PI * v).ln() - r * r / (2.0 * v));
                }
            }
        }
        let scores: Vec<f64> = terms
            .iter()
            .map(|t| t.iter().sum::<f64>() / m as f64)
            .collect();
        let top = scores.iter().copied().fold(f64::MIN, f64::max);
        let best = scores.iter().position(|&s| s == top).unwrap();
        let se: Vec<f64> = terms
            .iter()
            .map(|t| {
                let d: Vec<f64> = t.iter().zip(&terms[best]).map(|(a, b)| a - b).collect();
                let mean = d.iter().sum::<f64>() / m as f64;
                let var = d.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (m as f64 - 1.0);
                (var / m as f64).sqrt()
            })
            .collect();
        (scores, se, candidates[best])
    }

    #[test]
    fn scores_are_the_cross_validated_log_density_and_the_best_wins() {
        let (x, y) = data(90, 1);
        let cv = ThresholdSearch::cross_validated();
        let choice = run(&cv, &x, &y).unwrap();
        let grid: Vec<Option<f64>> = choice.scores.iter().map(|s| s.0).collect();
        assert_eq!(grid, DEFAULT_THRESHOLDS.to_vec());
        let (scores, se, best) = oracle(&DEFAULT_THRESHOLDS, &x, &y, DEFAULT_FOLDS, 1000);
        for (c, &(theta, score)) in choice.scores.iter().enumerate() {
            assert!(
                (score - scores[c]).abs() <= 1e-12 * scores[c].abs().max(1.0),
                "{theta:?}: {score} vs {}",
                scores[c]
            );
            assert!(
                (choice.std_errors[c] - se[c]).abs() <= 1e-9 * se[c].max(1e-12),
                "{theta:?}: {} vs {}",
                choice.std_errors[c],
                se[c]
            );
        }
        assert_eq!(choice.best, best);
        assert!(choice.std_errors.contains(&0.0));
        // Bit-identical when repeated, and each score does not depend on the
        // other candidates.
        assert_eq!(run(&cv, &x, &y).unwrap(), choice);
        let alone = ThresholdSearch {
            candidates: vec![Some(1.0)],
            ..ThresholdSearch::cross_validated()
        };
        let one = run(&alone, &x, &y).unwrap();
        assert_eq!(one.scores, vec![choice.scores[3]]);
        assert_eq!(one.best, Some(1.0));

        // At most `max_scored` rows are scored; every fit uses the others.
        let few = ThresholdSearch {
            candidates: vec![None, Some(1.0)],
            criterion: ThresholdCriterion::CrossValidatedLogDensity {
                n_folds: 3,
                max_scored: 30,
            },
        };
        let (scores, se, best) = oracle(&few.candidates, &x, &y, 3, 30);
        let got = run(&few, &x, &y).unwrap();
        assert!((got.scores[0].1 - scores[0]).abs() <= 1e-12 * scores[0].abs().max(1.0));
        assert!((got.scores[1].1 - scores[1]).abs() <= 1e-12 * scores[1].abs().max(1.0));
        assert!((got.std_errors[0] - se[0]).abs() <= 1e-9 * se[0].max(1e-12));
        assert_eq!(got.best, best);
    }

    #[test]
    fn the_standard_error_is_that_of_the_paired_differences() {
        assert_eq!(paired_std_error(&[1.0, 2.0], &[1.0, 2.0]), 0.0);
        // d = (1, 3): mean 2, sum of squares 2, sqrt(2 / (2·1)) = 1.
        assert_eq!(paired_std_error(&[2.0, 5.0], &[1.0, 2.0]), 1.0);
        assert_eq!(
            paired_std_error(&[f64::NEG_INFINITY, 1.0], &[0.0, 1.0]),
            f64::INFINITY
        );
    }

    #[test]
    fn a_tie_goes_to_the_first_candidate() {
        // One cluster at most: every threshold fits the same model.
        let (x, y) = data(40, 2);
        let cfg = LocalizedConfig {
            n_clusters: Some(1),
            ..config()
        };
        let criteria = [
            ThresholdSearch::default().criterion,
            ThresholdSearch::cross_validated().criterion,
        ];
        for (candidates, criterion) in [vec![Some(4.0), Some(0.5)], vec![Some(0.5), Some(4.0)]]
            .into_iter()
            .flat_map(|c| criteria.map(|k| (c.clone(), k)))
        {
            let search = ThresholdSearch {
                candidates: candidates.clone(),
                criterion,
            };
            let choice = search
                .run(
                    x.view(),
                    y.view(),
                    &cfg,
                    5,
                    Parallelism::Rayon,
                    &Monitor::default(),
                )
                .unwrap();
            assert_eq!(choice.scores[0].1, choice.scores[1].1);
            assert_eq!(choice.best, candidates[0]);
        }
    }

    #[test]
    fn too_few_rows_score_nothing_and_bad_searches_are_refused() {
        let none = |search: &ThresholdSearch| ThresholdChoice {
            best: None,
            scores: Vec::new(),
            std_errors: Vec::new(),
            criterion: search.criterion,
        };
        let (fidelity, cv) = (
            ThresholdSearch::default(),
            ThresholdSearch::cross_validated(),
        );
        let (x, y) = data(1, 3);
        assert_eq!(run(&fidelity, &x, &y).unwrap(), none(&fidelity));
        // Two rows: each left out of the exact GP and the candidates once.
        let (x, y) = data(2, 3);
        assert_eq!(run(&fidelity, &x, &y).unwrap().scores.len(), 6);
        assert_eq!(run(&cv, &x, &y).unwrap(), none(&cv));
        // Three rows: three folds of one row, each fitted on two.
        let (x, y) = data(3, 3);
        assert_eq!(run(&cv, &x, &y).unwrap().scores.len(), 6);

        let (x, y) = data(20, 4);
        let with =
            |candidates: Vec<Option<f64>>, n_folds: usize, max_scored: usize| ThresholdSearch {
                candidates,
                criterion: ThresholdCriterion::CrossValidatedLogDensity {
                    n_folds,
                    max_scored,
                },
            };
        for (search, name) in [
            (with(vec![], 5, 100), "threshold"),
            (with(vec![Some(-1.0)], 5, 100), "threshold"),
            (with(vec![None, Some(f64::NAN)], 5, 100), "threshold"),
            (with(vec![None], 1, 100), "n_folds"),
            (with(vec![None], 5, 1), "max_scored"),
            (
                ThresholdSearch {
                    candidates: vec![None],
                    criterion: ThresholdCriterion::ExactGpFidelity { max_rows: 1 },
                },
                "max_rows",
            ),
        ] {
            match run(&search, &x, &y).unwrap_err() {
                Error::InvalidParameter { name: got, .. } => assert_eq!(got, name),
                other => panic!("{other:?}"),
            }
        }
        let short = y.slice(ndarray::s![..19]).to_owned();
        for search in [fidelity, cv] {
            assert!(matches!(
                run(&search, &x, &short).unwrap_err(),
                Error::ShapeMismatch { .. }
            ));
        }
    }

    /// `KL(N(μp, vp) ‖ N(μq, vq))`, written out.
    fn kl(mp: f64, vp: f64, mq: f64, vq: f64) -> f64 {
        0.5 * ((vq / vp).ln() + (vp + (mp - mq).powi(2)) / vq - 1.0)
    }

    /// `a⁻¹ b` for a symmetric positive definite `a`.
    fn solve(a: &Array2<f64>, b: &[f64]) -> Vec<f64> {
        let chol = Cholesky::new(as_faer(a.view()), Parallelism::Sequential).unwrap();
        chol.solve_vec(ndarray::ArrayView1::from(b), Parallelism::Sequential)
    }

    /// The fidelity scores written out without the leave-one-out identities,
    /// on the rows `rows` of `(x, y)`: for every row, the exact GP refitted on
    /// the other rows, and the candidate's GP at the nearest centroid rebuilt
    /// from the features of the other rows within the cutoff; the mean of
    /// `KL(candidate ‖ exact)` of the noisy targets.
    fn fidelity_oracle(
        candidates: &[Option<f64>],
        x: &Array2<f64>,
        y: &Array1<f64>,
        rows: &[usize],
    ) -> Vec<f64> {
        let (x, y) = (x.select(Axis(0), rows), y.select(Axis(0), rows));
        let n = x.nrows();
        let cfg0 = config();
        let (l, s2, noise) = (cfg0.map.length_scale, cfg0.map.kernel_variance, 0.01);
        let yc = y.mapv(|v| v - y.mean().unwrap());
        let sq = |a: ndarray::ArrayView1<f64>, b: ndarray::ArrayView1<f64>| {
            a.iter().zip(b).map(|(p, q)| (p - q) * (p - q)).sum::<f64>()
        };
        let k = |a, b| s2 * (-sq(a, b) / (2.0 * l * l)).exp();
        let exact: Vec<(f64, f64)> = (0..n)
            .map(|i| {
                let others: Vec<usize> = (0..n).filter(|&j| j != i).collect();
                let ky = Array2::from_shape_fn((n - 1, n - 1), |(a, b)| {
                    k(x.row(others[a]), x.row(others[b])) + if a == b { noise } else { 0.0 }
                });
                let ks: Vec<f64> = others.iter().map(|&j| k(x.row(i), x.row(j))).collect();
                let yo: Vec<f64> = others.iter().map(|&j| yc[j]).collect();
                let (a, b) = (solve(&ky, &yo), solve(&ky, &ks));
                let dot = |p: &[f64], q: &[f64]| p.iter().zip(q).map(|(u, v)| u * v).sum::<f64>();
                (dot(&ks, &a), s2 - dot(&ks, &b) + noise)
            })
            .collect();
        let seq = Parallelism::Sequential;
        candidates
            .iter()
            .map(|&theta| {
                let cfg = LocalizedConfig {
                    threshold: theta,
                    ..config()
                };
                let gp = LocalizedMaclaurinGp::fit(
                    x.view(),
                    y.view(),
                    &cfg,
                    5,
                    seq,
                    &Monitor::default(),
                )
                .unwrap();
                let cs = gp.centroids();
                let width = gp.map().width();
                let terms: Vec<f64> = (0..n)
                    .map(|i| {
                        let d: Vec<f64> = cs.rows().into_iter().map(|c| sq(x.row(i), c)).collect();
                        let c = (0..d.len()).fold(0, |b, c| if d[c] < d[b] { c } else { b });
                        let center = cs.row(c).to_vec();
                        let used: Vec<usize> = (0..n)
                            .filter(|&j| j != i && sq(x.row(j), cs.row(c)) < gp.cutoff_sq())
                            .collect();
                        let mut phi = Array2::<f64>::zeros((n, width));
                        gp.map()
                            .transform_centered_into(x.view(), &center, phi.view_mut(), seq)
                            .unwrap();
                        let mut a = Array2::<f64>::eye(width);
                        let mut b = vec![0.0; width];
                        for &j in &used {
                            for p in 0..width {
                                b[p] += phi[[j, p]] * yc[j] / noise;
                                for q in 0..width {
                                    a[[p, q]] += phi[[j, p]] * phi[[j, q]] / noise;
                                }
                            }
                        }
                        let f = phi.row(i).to_vec();
                        let (w, g) = (solve(&a, &b), solve(&a, &f));
                        let mu: f64 = f.iter().zip(&w).map(|(u, v)| u * v).sum();
                        let v: f64 = f.iter().zip(&g).map(|(u, v)| u * v).sum();
                        kl(mu, v + noise, exact[i].0, exact[i].1)
                    })
                    .collect();
                terms.iter().sum::<f64>() / n as f64
            })
            .collect()
    }

    #[test]
    fn fidelity_scores_are_the_leave_one_out_kl_to_the_exact_gp() {
        // 40 rows over a few length scales: the small thresholds make many
        // rows centroids, each predicted at itself with its centroids kept.
        let (x, y) = data(40, 6);
        let search = ThresholdSearch::default();
        let choice = run(&search, &x, &y).unwrap();
        assert_eq!(
            choice.criterion.name().split(',').next(),
            Some("mean leave-one-out KL divergence to the exact GP")
        );
        let all: Vec<usize> = (0..40).collect();
        let want = fidelity_oracle(&DEFAULT_THRESHOLDS, &x, &y, &all);
        for (&(theta, got), &w) in choice.scores.iter().zip(&want) {
            assert!(
                (got - w).abs() <= 1e-7 * w.abs().max(1e-3),
                "{theta:?}: {got} vs {w}"
            );
        }
        let lowest = want.iter().copied().fold(f64::INFINITY, f64::min);
        let best = DEFAULT_THRESHOLDS[want.iter().position(|&w| w == lowest).unwrap()];
        assert_eq!(choice.best, best);
        assert!(choice.std_errors.iter().all(|&s| s >= 0.0));
        assert_eq!(
            choice.std_errors[want.iter().position(|&w| w == lowest).unwrap()],
            0.0
        );
        // Candidates with many clusters make centroids of training rows.
        let gp = LocalizedMaclaurinGp::fit(
            x.view(),
            y.view(),
            &LocalizedConfig {
                threshold: Some(0.25),
                ..config()
            },
            5,
            Parallelism::Rayon,
            &Monitor::default(),
        )
        .unwrap();
        assert!(gp.centroids().nrows() > 10);

        // Deterministic, and each score does not depend on the others.
        assert_eq!(run(&search, &x, &y).unwrap(), choice);
        let alone = ThresholdSearch {
            candidates: vec![Some(1.0)],
            ..ThresholdSearch::default()
        };
        assert_eq!(run(&alone, &x, &y).unwrap().scores, vec![choice.scores[3]]);

        // More rows than `max_rows`: the exact GP and the candidates on a
        // subsample drawn from the seed's split stream.
        let few = ThresholdSearch {
            candidates: vec![None, Some(1.0)],
            criterion: ThresholdCriterion::ExactGpFidelity { max_rows: 25 },
        };
        let mut order: Vec<usize> = (0..40).collect();
        order.shuffle(&mut substream(5, STREAM_SPLIT));
        let mut rows = order[..25].to_vec();
        rows.sort_unstable();
        let want = fidelity_oracle(&few.candidates, &x, &y, &rows);
        let got = run(&few, &x, &y).unwrap();
        for (&(theta, got), &w) in got.scores.iter().zip(&want) {
            assert!(
                (got - w).abs() <= 1e-7 * w.abs().max(1e-3),
                "{theta:?}: {got} vs {w}"
            );
        }
    }
}
