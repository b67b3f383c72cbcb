//! The choice of the clustering threshold `θ` (the `threshold="auto"` of
//! the Python estimator): every candidate of a grid is fitted on a seeded
//! split of the training rows and scored on the rows held out; the best
//! score wins, the first candidate in grid order on a tie (so the fewest
//! clusters). The candidates and the criterion are values
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

/// The default candidates `θ/l`; `None` is one cluster (the vanilla
/// optimized Maclaurin GP).
pub const DEFAULT_THRESHOLDS: [Option<f64>; 6] =
    [None, Some(4.0), Some(2.0), Some(1.0), Some(0.5), Some(0.25)];

/// The default fraction of the training rows held out to score candidates.
pub const DEFAULT_VALIDATION_FRACTION: f64 = 0.2;

/// The stream of the fit's seed that draws the held-out split (apart from
/// the streams of the map, so the split does not change the weights).
const STREAM_SPLIT: u64 = 1 << 40;

/// How a candidate threshold is scored (higher is better).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ThresholdCriterion {
    /// The mean log predictive density of the held-out noisy targets,
    /// `mean_i ln N(y_i; μ*_i, v*_i + σ_n²)` (minus [`metrics::mean_nll`]),
    /// with the model fitted on the other rows. The held-out rows are
    /// `max(1, round(fraction · N))` rows drawn from the fit's seed; with
    /// fewer than 2 rows left to fit on, no candidate is scored.
    HeldOutLogDensity {
        /// The fraction of the rows held out, in `(0, 1)`.
        validation_fraction: f64,
    },
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
    /// [`DEFAULT_THRESHOLDS`] scored by [`ThresholdCriterion::HeldOutLogDensity`]
    /// on [`DEFAULT_VALIDATION_FRACTION`] of the rows.
    fn default() -> Self {
        Self {
            candidates: DEFAULT_THRESHOLDS.to_vec(),
            criterion: ThresholdCriterion::HeldOutLogDensity {
                validation_fraction: DEFAULT_VALIDATION_FRACTION,
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
}

impl ThresholdSearch {
    /// Scores every candidate for `config` (its `threshold` is replaced by
    /// each candidate; its `n_clusters` still bounds the clustering) on
    /// `(x, y)` and returns the best with all the scores. `seed` is the
    /// model's seed (the fits use it as [`LocalizedMaclaurinGp::fit`] does).
    /// `monitor` is passed to every fit and prediction, and gets one message
    /// per candidate.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] for an empty grid, a candidate that is
    /// not a finite `θ > 0` or a fraction outside `(0, 1)`; a length of `y`
    /// that differs from the rows of `x`; the errors of the fits and
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
        let ThresholdCriterion::HeldOutLogDensity {
            validation_fraction,
        } = self.criterion;
        if !(validation_fraction > 0.0 && validation_fraction < 1.0) {
            return Err(Error::invalid(
                "validation_fraction",
                format!("must be in (0, 1), got {validation_fraction}"),
            ));
        }
        let n = x.nrows();
        let n_val = ((validation_fraction * n as f64).round() as usize).max(1);
        if n < n_val + 2 {
            return Ok(ThresholdChoice {
                best: None,
                scores: Vec::new(),
            });
        }
        let mut order: Vec<usize> = (0..n).collect();
        order.shuffle(&mut substream(seed, STREAM_SPLIT));
        let (val, train) = order.split_at_mut(n_val);
        val.sort_unstable();
        train.sort_unstable();
        let (x_train, y_train) = (x.select(Axis(0), train), y.select(Axis(0), train));
        let (x_val, y_val) = (x.select(Axis(0), val), y.select(Axis(0), val));
        let mut scores = Vec::with_capacity(self.candidates.len());
        let mut best: Option<(Option<f64>, f64)> = None;
        for &theta in &self.candidates {
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
            let p = gp.predict(x_val.view(), true, par, monitor)?;
            let var = p
                .var
                .ok_or_else(|| Error::Internal("the prediction has no variance".into()))?;
            let noisy = var.mapv(|v| v.max(0.0) + config.noise_variance);
            let score = -metrics::mean_nll(y_val.view(), p.mean.view(), noisy.view())?;
            monitor.message(format!(
                "threshold {}: held-out log predictive density {score:.4}",
                theta.map_or_else(|| "one cluster".to_string(), |t| t.to_string())
            ));
            if best.is_none_or(|(_, s)| score > s) {
                best = Some((theta, score));
            }
            scores.push((theta, score));
        }
        Ok(ThresholdChoice {
            best: best.and_then(|(t, _)| t),
            scores,
        })
    }
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

    #[test]
    fn scores_are_the_held_out_log_density_and_the_best_wins() {
        let (x, y) = data(90, 1);
        let choice = run(&ThresholdSearch::default(), &x, &y).unwrap();
        let grid: Vec<Option<f64>> = choice.scores.iter().map(|s| s.0).collect();
        assert_eq!(grid, DEFAULT_THRESHOLDS.to_vec());
        // The oracle: the 18 held-out rows (round(0.2 * 90)) of the split
        // stream, each candidate fitted on the other 72 rows, and the mean of
        // ln N(y; mu, v + sigma_n^2) written out.
        let mut order: Vec<usize> = (0..90).collect();
        order.shuffle(&mut substream(5, STREAM_SPLIT));
        let (val, train) = order.split_at_mut(18);
        val.sort_unstable();
        train.sort_unstable();
        let (xt, yt) = (x.select(Axis(0), train), y.select(Axis(0), train));
        let (xv, yv) = (x.select(Axis(0), val), y.select(Axis(0), val));
        for &(theta, score) in &choice.scores {
            let cfg = LocalizedConfig {
                threshold: theta,
                ..config()
            };
            let gp = LocalizedMaclaurinGp::fit(
                xt.view(),
                yt.view(),
                &cfg,
                5,
                Parallelism::Sequential,
                &Monitor::default(),
            )
            .unwrap();
            let p = gp
                .predict(
                    xv.view(),
                    true,
                    Parallelism::Sequential,
                    &Monitor::default(),
                )
                .unwrap();
            let var = p.var.unwrap();
            let want = (0..18)
                .map(|i| {
                    let v = var[i].max(0.0) + 0.01;
                    let r = yv[i] - p.mean[i];
                    -0.5 * (2.0 * std::f64::consts::PI * v).ln() - r * r / (2.0 * v)
                })
                .sum::<f64>()
                / 18.0;
            assert!(
                (score - want).abs() <= 1e-12 * want.abs().max(1.0),
                "{theta:?}: {score} vs {want}"
            );
        }
        let top = choice.scores.iter().map(|s| s.1).fold(f64::MIN, f64::max);
        let first_best = choice.scores.iter().find(|s| s.1 == top).unwrap().0;
        assert_eq!(choice.best, first_best);
        // Bit-identical when repeated, and each score does not depend on the
        // other candidates.
        assert_eq!(run(&ThresholdSearch::default(), &x, &y).unwrap(), choice);
        let alone = ThresholdSearch {
            candidates: vec![Some(1.0)],
            ..ThresholdSearch::default()
        };
        let one = run(&alone, &x, &y).unwrap();
        assert_eq!(one.scores, vec![choice.scores[3]]);
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
        };
        assert_eq!(run(&ThresholdSearch::default(), &x, &y).unwrap(), none);
        let (x, y) = data(3, 3);
        assert_eq!(
            run(&ThresholdSearch::default(), &x, &y)
                .unwrap()
                .scores
                .len(),
            6
        );

        let (x, y) = data(20, 4);
        let with = |candidates: Vec<Option<f64>>, fraction: f64| ThresholdSearch {
            candidates,
            criterion: ThresholdCriterion::HeldOutLogDensity {
                validation_fraction: fraction,
            },
        };
        for (search, name) in [
            (with(vec![], 0.2), "threshold"),
            (with(vec![Some(-1.0)], 0.2), "threshold"),
            (with(vec![None, Some(f64::NAN)], 0.2), "threshold"),
            (with(vec![None], 0.0), "validation_fraction"),
            (with(vec![None], 1.0), "validation_fraction"),
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
