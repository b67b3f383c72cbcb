//! The choice of the clustering threshold `θ` (the `threshold="auto"` of
//! the Python estimator, `docs/math/localized.rst`, "Choosing the
//! threshold"): every candidate of a grid is scored by K-fold
//! cross-validation, the mean log predictive density of the held-out noisy
//! targets; the best score wins, the first candidate in grid order on a tie
//! (so the fewest clusters). The candidates and the criterion are values
//! ([`ThresholdSearch`]), so another grid or score is a new value or a new
//! [`ThresholdCriterion`] variant.

use ndarray::{ArrayView1, ArrayView2, Axis};
use rand::seq::SliceRandom;

use super::{LocalizedConfig, LocalizedMaclaurinGp};
use crate::error::{Error, Result};
use crate::gp::metrics;
use crate::progress::Monitor;
use crate::real::Real;
use crate::rng::substream;
use crate::threads::Parallelism;

/// The default candidates `θ/l`, in order of preference (fewest clusters
/// first); `None` is one cluster (the vanilla optimized Maclaurin GP).
pub const DEFAULT_THRESHOLDS: [Option<f64>; 6] =
    [None, Some(4.0), Some(2.0), Some(1.0), Some(0.5), Some(0.25)];

/// The default number of cross-validation folds.
pub const DEFAULT_FOLDS: usize = 5;

/// The default bound on the rows scored over all folds (the rest of the
/// rows only ever fit).
pub const DEFAULT_MAX_SCORED: usize = 1000;

/// The stream of the fit's seed that draws the folds (apart from the
/// streams of the map, so the folds do not change the weights).
const STREAM_SPLIT: u64 = 1 << 40;

/// How the candidate thresholds are scored (higher is better) and chosen.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum ThresholdCriterion {
    /// K-fold cross-validation. `m = min(N, max_scored)` rows drawn from
    /// the fit's seed are split into `K = min(n_folds, m)` folds of sizes
    /// differing by at most one; for each fold the model is fitted on all
    /// the other `N − |fold|` rows and predicts the fold. A candidate's
    /// score is the mean over the `m` scored rows of
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
}

impl ThresholdCriterion {
    /// A short description (the Python estimator's `auto_criterion_`).
    pub fn name(&self) -> String {
        match self {
            Self::CrossValidatedLogDensity {
                n_folds,
                max_scored,
            } => format!(
                "{n_folds}-fold cross-validated mean log predictive density \
                 (at most {max_scored} rows scored)"
            ),
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
    /// [`ThresholdCriterion::CrossValidatedLogDensity`] with
    /// [`DEFAULT_FOLDS`] folds and [`DEFAULT_MAX_SCORED`] rows.
    fn default() -> Self {
        Self {
            candidates: DEFAULT_THRESHOLDS.to_vec(),
            criterion: ThresholdCriterion::CrossValidatedLogDensity {
                n_folds: DEFAULT_FOLDS,
                max_scored: DEFAULT_MAX_SCORED,
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
    /// Every candidate with its score, in the order of the candidates
    /// (empty when the data are too few to hold rows out).
    pub scores: Vec<(Option<f64>, f64)>,
    /// The standard error of every candidate's score difference to the best
    /// score (0 for the best), in the order of `scores`.
    pub std_errors: Vec<f64>,
    /// The criterion that gave the scores.
    pub criterion: ThresholdCriterion,
}

impl ThresholdSearch {
    /// Scores every candidate for `config` (its `threshold` is replaced by
    /// each candidate; its `n_clusters` still bounds the clustering) on
    /// `(x, y)` and returns the choice with all the scores. `seed` is the
    /// model's seed (the fits use it as [`LocalizedMaclaurinGp::fit`] does).
    /// `monitor` is passed to every fit and prediction, and gets one message
    /// per candidate.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] for an empty grid, a candidate that is
    /// not a finite `θ > 0`, fewer than 2 folds or scored rows; a length of
    /// `y` that differs from the rows of `x`; the errors of the fits and
    /// predictions.
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
        let ThresholdCriterion::CrossValidatedLogDensity {
            n_folds,
            max_scored,
        } = criterion;
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
        let nothing = ThresholdChoice {
            best: None,
            scores: Vec::new(),
            std_errors: Vec::new(),
            criterion,
        };
        let n = x.nrows();
        let m = n.min(max_scored);
        let k = n_folds.min(m);
        // The folds are the `m` first rows of the permutation, cut at
        // `j·m/K`; the largest has `⌈m/K⌉` rows.
        if k < 2 || n - m.div_ceil(k) < 2 {
            return Ok(nothing);
        }
        let mut order: Vec<usize> = (0..n).collect();
        order.shuffle(&mut substream(seed, STREAM_SPLIT));
        // `terms[c][i]`: candidate `c`'s log density of scored row `i`
        // (rows in fold order).
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
                let cfg = LocalizedConfig {
                    threshold: theta,
                    ..config.clone()
                };
                let gp = LocalizedMaclaurinGp::fit(
                    x_train.view(),
                    y_train.view(),
                    &cfg,
                    seed,
                    par,
                    monitor,
                )?;
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
        let mean = |t: &[f64]| t.iter().sum::<f64>() / t.len() as f64;
        let scores: Vec<f64> = terms.iter().map(|t| mean(t)).collect();
        let top = (0..scores.len())
            .reduce(|a, b| if scores[b] > scores[a] { b } else { a })
            .unwrap_or(0);
        let std_errors: Vec<f64> = terms
            .iter()
            .map(|t| paired_std_error(t, &terms[top]))
            .collect();
        for (c, &theta) in self.candidates.iter().enumerate() {
            monitor.message(format!(
                "threshold {}: cross-validated log predictive density {:.4} \
                 (standard error of the difference to the best {:.4}){}",
                theta.map_or_else(|| "one cluster".to_string(), |t| t.to_string()),
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
        let choice = run(&ThresholdSearch::default(), &x, &y).unwrap();
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
        assert_eq!(run(&ThresholdSearch::default(), &x, &y).unwrap(), choice);
        let alone = ThresholdSearch {
            candidates: vec![Some(1.0)],
            ..ThresholdSearch::default()
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
        for candidates in [vec![Some(4.0), Some(0.5)], vec![Some(0.5), Some(4.0)]] {
            let search = ThresholdSearch {
                candidates: candidates.clone(),
                ..ThresholdSearch::default()
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
        let (x, y) = data(2, 3);
        let none = ThresholdChoice {
            best: None,
            scores: Vec::new(),
            std_errors: Vec::new(),
            criterion: ThresholdSearch::default().criterion,
        };
        assert_eq!(run(&ThresholdSearch::default(), &x, &y).unwrap(), none);
        // Three rows: three folds of one row, each fitted on two.
        let (x, y) = data(3, 3);
        assert_eq!(
            run(&ThresholdSearch::default(), &x, &y)
                .unwrap()
                .scores
                .len(),
            6
        );

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
        ] {
            match run(&search, &x, &y).unwrap_err() {
                Error::InvalidParameter { name: got, .. } => assert_eq!(got, name),
                other => panic!("{other:?}"),
            }
        }
        let short = y.slice(ndarray::s![..19]).to_owned();
        assert!(matches!(
            run(&ThresholdSearch::default(), &x, &short).unwrap_err(),
            Error::ShapeMismatch { .. }
        ));
    }
}
