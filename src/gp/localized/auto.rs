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
