//! Hyperparameter fitting of the GP models (`docs/math/gp.rst`): maximize
//! a log marginal likelihood (or a bound on it) over the logs of the
//! hyperparameters with L-BFGS (argmin's `LBFGS` with the Moré–Thuente
//! line search) from an initialization and `n_restarts` random starts; the
//! best optimum wins.
//!
//! A model implements [`Objective`]: the value and its gradient with
//! respect to the optimizer's coordinates `θ` (the logs of the free
//! hyperparameters, see [`LogParams`]) and what a fitted model keeps from
//! an evaluation; [`maximize`] does the rest.
//!
//! Coarse to fine: from [`OptimizerConfig::coarse_min_rows`] rows on (and for
//! objectives that offer [`Objective::subsample`]), a run first fits every
//! fourth row (recursively) and continues on all rows from that optimum in
//! variables preconditioned by the subsample's Hessian (see
//! `run_coarse_to_fine`); the result keeps the fit of its best evaluation
//! (no refit).
//!
//! The objective handed to L-BFGS is `−value / N` (the same optimum; the
//! scaling keeps the first, unscaled steepest-descent step of L-BFGS short
//! in log space). Every evaluation computes the value and the gradient
//! together and caches them for the line search. The best point ever
//! evaluated is kept, so a run that stops on a line-search failure near the
//! optimum still contributes its best point.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use argmin::core::observers::{Observe, ObserverMode};
use argmin::core::{CostFunction, Executor, Gradient, State, TerminationReason, KV};
use argmin::solver::linesearch::MoreThuenteLineSearch;
use argmin::solver::quasinewton::LBFGS;
use ndarray::{s, Array1, Array2, ArrayView1, ArrayView2};
use rand::Rng as _;

use super::check_positive;
use crate::error::{Error, Result};
use crate::kernels::midrange;
use crate::progress::Monitor;

/// A hyperparameter of the stationary-kernel GP models.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hyper {
    /// The length scale(s) `l`.
    LengthScale,
    /// The kernel variance `σ²`.
    KernelVariance,
    /// The noise variance `σ_n²`.
    NoiseVariance,
}

/// The names [`Hyper::from_name`] accepts, in the order of the parameter
/// vector `(l.., σ², σ_n²)`.
pub const HYPER_NAMES: [&str; 3] = ["length_scale", "kernel_variance", "noise_variance"];

impl Hyper {
    /// Parses a hyperparameter name (one of [`HYPER_NAMES`]).
    pub fn from_name(name: &str) -> Result<Self> {
        match name {
            "length_scale" => Ok(Hyper::LengthScale),
            "kernel_variance" => Ok(Hyper::KernelVariance),
            "noise_variance" => Ok(Hyper::NoiseVariance),
            other => Err(Error::invalid(
                "optimize",
                format!("unknown hyperparameter {other:?}; expected one of {HYPER_NAMES:?}"),
            )),
        }
    }
}

/// A function of hyperparameters to maximize (a log marginal likelihood or
/// a bound on it), in the optimizer's coordinates `θ` (for the GP models
/// the logs of the free hyperparameters, see [`LogParams`]).
pub trait Objective: Sync {
    /// What an evaluation leaves behind that a fitted model keeps (e.g. the
    /// exact GP's Cholesky factor), so the best evaluation needs no refit.
    type Fit: Send;

    /// The number of rows `N`: the optimizer minimizes `−value / N`.
    fn n_rows(&self) -> usize;

    /// What the value is called in progress messages: `"LML"` (the
    /// default, a log marginal likelihood) or e.g. `"bound"` for a lower
    /// bound on it.
    fn value_name(&self) -> &'static str {
        "LML"
    }

    /// The value at `θ` and its gradient with respect to `θ` (one entry per
    /// coordinate), with the fit. Long evaluations check `monitor` between
    /// their pieces of work.
    ///
    /// # Errors
    /// Any error of the model (e.g. a failed factorization, or `θ` out of
    /// range); [`Error::Interrupted`] once `monitor` is cancelled.
    fn evaluate(&self, theta: &[f64], monitor: &Monitor) -> Result<Evaluation<Self::Fit>>;

    /// The value at `θ` alone, what a comparison of starts needs. The
    /// default is [`Objective::evaluate`]'s; an objective whose gradient
    /// costs more than its value (a second pass over the rows, or the
    /// inverse of a factor) computes the value without it.
    ///
    /// # Errors
    /// As [`Objective::evaluate`].
    fn value(&self, theta: &[f64], monitor: &Monitor) -> Result<f64> {
        Ok(self.evaluate(theta, monitor)?.value)
    }

    /// The same objective on the rows `rows` (strictly increasing), for the
    /// coarse levels of a run; `None` (the default) when the objective has
    /// no coarse level.
    ///
    /// # Errors
    /// As the objective's construction.
    fn subsample(&self, rows: &[usize]) -> Result<Option<Self>>
    where
        Self: Sized,
    {
        let _ = rows;
        Ok(None)
    }
}

/// One evaluation of an [`Objective`].
#[derive(Clone, Debug)]
pub struct Evaluation<F> {
    /// The value (e.g. the log marginal likelihood).
    pub value: f64,
    /// Its gradient with respect to `θ`.
    pub grad: Vec<f64>,
    /// What a fitted model keeps.
    pub fit: F,
}

/// How far (in the log) the optimizer may move a hyperparameter from its
/// start: `e^±40` around a start on the data's own scale (the median
/// pairwise distance, `var(y)`) spans any sensible value whatever the units
/// of `x` and `y`, and a run beyond it has diverged (e.g. the noise
/// variance of noiseless targets towards 0).
pub(crate) const MAX_ABS_LOG: f64 = 40.0;

/// The hyperparameters `(l.., σ², σ_n²)` of a stationary-kernel GP and which
/// of them are free: the optimizer's coordinates are `θ = ln values[free]`.
#[derive(Clone, Debug, PartialEq)]
pub struct LogParams {
    /// All hyperparameters, natural scale: the fixed ones are used as given
    /// (no `exp(ln v)` rounding), the free ones are the start.
    pub values: Vec<f64>,
    /// Indices of the free entries of `values`, ascending.
    pub free: Vec<usize>,
}

impl LogParams {
    /// The number of length scales (`values.len() − 2`).
    pub fn n_length_scales(&self) -> usize {
        self.values.len() - 2
    }

    /// The start `θ₀ = ln values[free]`.
    pub fn start(&self) -> Vec<f64> {
        self.free.iter().map(|&i| self.values[i].ln()).collect()
    }

    /// All hyperparameters at `θ`: the free ones `exp(θ)`, the fixed ones as
    /// given.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] when a coordinate is not finite or more
    /// than 40 from its start `ln values[i]` (the optimizer moved the
    /// hyperparameter beyond `e^±40` times its start: a run that diverged).
    pub fn at(&self, theta: &[f64]) -> Result<Vec<f64>> {
        if theta.len() != self.free.len() {
            return Err(Error::ShapeMismatch {
                name: "number of free hyperparameters",
                expected: self.free.len(),
                got: theta.len(),
            });
        }
        for (&i, &t) in self.free.iter().zip(theta) {
            let start = self.values[i];
            if !t.is_finite() || (t - start.ln()).abs() > MAX_ABS_LOG {
                return Err(left_the_range(self.name(i), start));
            }
        }
        let mut v = self.values.clone();
        for (&i, &t) in self.free.iter().zip(theta) {
            v[i] = t.exp();
        }
        Ok(v)
    }

    /// The name of hyperparameter `i`: the length scales, then the kernel
    /// and the noise variance.
    fn name(&self, i: usize) -> &'static str {
        match i.checked_sub(self.n_length_scales()) {
            None => "length_scale",
            Some(0) => "kernel_variance",
            Some(_) => "noise_variance",
        }
    }

    /// `g[free]` of a gradient `g` over all hyperparameters.
    pub fn select(&self, grad: &[f64]) -> Vec<f64> {
        self.free.iter().map(|&i| grad[i]).collect()
    }
}

/// The error of an optimizer that moved hyperparameter `name` beyond
/// `e^±`[`MAX_ABS_LOG`] times its `start`.
pub(crate) fn left_the_range(name: &str, start: f64) -> Error {
    Error::invalid(
        "hyperparameters",
        format!(
            "the optimizer moved {name} beyond e^±{MAX_ABS_LOG} times its start {start:.4e}: \
             the marginal likelihood keeps rising towards 0 or infinity there; fix {name} \
             (leave it out of `optimize`) or start it nearer the data's scale"
        ),
    )
}

/// Where the hyperparameters of a stationary-kernel GP start and which are
/// fitted (the initialization of docs/math/gp.rst, exact GP).
#[derive(Clone, Debug, PartialEq)]
pub struct HyperInit {
    /// Fixed or initial length scale(s): one value, or one per dimension
    /// (fitted ones only with `ard`). `None`: the median pairwise distance
    /// (`docs/math/gp.rst`, "Exact GP"); with `ard`,
    /// [`per_dimension_length_scales`].
    pub length_scale: Option<Vec<f64>>,
    /// Fixed or initial kernel variance. `None`: `var(y)`
    /// ([`super::target_variance_scale`]: 1 when the targets are all equal).
    pub kernel_variance: Option<f64>,
    /// Fixed or initial noise variance. `None`:
    /// [`super::initial_noise_variance`], `0.1 var(y)`.
    pub noise_variance: Option<f64>,
    /// One fitted length scale per input dimension.
    pub ard: bool,
    /// The hyperparameters that are optimized; the others stay fixed.
    pub optimize: Vec<Hyper>,
}

impl Default for HyperInit {
    fn default() -> Self {
        Self {
            length_scale: None,
            kernel_variance: None,
            noise_variance: None,
            ard: false,
            optimize: vec![
                Hyper::LengthScale,
                Hyper::KernelVariance,
                Hyper::NoiseVariance,
            ],
        }
    }
}

impl HyperInit {
    /// The hyperparameters for training data `(x, y)`: the given values, the
    /// defaults for the missing ones (median pairwise distance of `x`, per
    /// column with `ard`,
    /// `var(y)` and `0.1 var(y)`, with `var(y) = 1` for constant targets),
    /// and the free indices of `optimize`; `center` is whether the model
    /// subtracts the target mean.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] for a length-scale count other than 1 (or
    /// `d` with `ard` or a fixed length scale), for values that are not finite and `> 0`, and, with
    /// something to fit, for targets whose variance is outside
    /// `10^−40..10^40` or that are constant after the centering `center`
    /// (all equal; all zero without centering), which have no maximum; for
    /// default variances of targets whose variance leaves the float64 range
    /// ([`super::target_variance_scale`]).
    pub fn resolve(
        &self,
        x: ArrayView2<'_, f64>,
        y: ArrayView1<'_, f64>,
        center: bool,
    ) -> Result<LogParams> {
        let d = x.ncols();
        let free_length_scale = self.optimize.contains(&Hyper::LengthScale);
        // A fixed length scale may be one per dimension whatever `ard`, which
        // says how many are fitted.
        let n_ls = match &self.length_scale {
            _ if self.ard => d,
            Some(v) if !free_length_scale && v.len() == d => d,
            _ => 1,
        };
        let ls = match &self.length_scale {
            None => data_length_scales(x, self.ard),
            Some(v) if v.len() == n_ls => v.clone(),
            Some(v) if v.len() == 1 => vec![v[0]; n_ls],
            Some(v) => {
                return Err(Error::invalid(
                    "length_scale",
                    format!(
                        "needs 1 value{}, got {}",
                        if self.ard || !free_length_scale {
                            format!(" or one per input dimension ({d})")
                        } else {
                            " to be fitted (set ard=True to fit one per dimension)".into()
                        },
                        v.len()
                    ),
                ))
            }
        };
        for &l in &ls {
            check_positive("length_scale", l)?;
        }
        let fits = [
            (Hyper::LengthScale, 0..n_ls),
            (Hyper::KernelVariance, n_ls..n_ls + 1),
            (Hyper::NoiseVariance, n_ls + 1..n_ls + 2),
        ];
        let free: Vec<usize> = fits
            .into_iter()
            .filter(|(h, _)| self.optimize.contains(h))
            .flat_map(|(_, r)| r)
            .collect();
        // The fit's refusals of the targets first: the defaults below come
        // from the same variance, and their refusal names less of the cause.
        if !free.is_empty() && !y.is_empty() {
            super::check_fit_target_scale(y)?;
            super::check_targets_vary(y, center)?;
        }
        let kv = match self.kernel_variance {
            Some(kv) => kv,
            None => super::target_variance_scale(y)?,
        };
        let nv = match self.noise_variance {
            Some(nv) => nv,
            None => super::initial_noise_variance(y)?,
        };
        check_positive("kernel_variance", kv)?;
        check_positive("noise_variance", nv)?;
        let mut values = ls;
        values.push(kv);
        values.push(nv);
        Ok(LogParams { values, free })
    }

    /// [`DataScale::of`] `(x, y)`, the defaults `params` (this
    /// initialization's [`HyperInit::resolve`] on the same data) holds
    /// taken from there rather than computed again.
    ///
    /// # Errors
    /// As [`DataScale::of`].
    pub(crate) fn data_scale(
        &self,
        x: ArrayView2<'_, f64>,
        y: ArrayView1<'_, f64>,
        params: &LogParams,
    ) -> Result<DataScale> {
        let k = params.n_length_scales();
        Ok(DataScale {
            length_scale: match self.length_scale {
                None => params.values[..k].to_vec(),
                Some(_) => data_length_scales(x, self.ard),
            },
            target_variance: match self.kernel_variance {
                None => params.values[k],
                Some(_) => super::target_variance_scale(y)?,
            },
        })
    }
}

/// Rows used for the median pairwise distance (an evenly strided subsample).
const MEDIAN_ROWS: usize = 500;

/// The power of two at or above `m` (`2^−1022..2^1023`; 1 for `m` not
/// finite and `> 0`): dividing by it is exact (barring underflow), so sums
/// of squares of values up to `m` divided by it neither overflow nor round
/// otherwise than the unscaled ones.
fn power_of_two_above(m: f64) -> f64 {
    if m.is_finite() && m > 0.0 {
        2f64.powi((m.log2().ceil() as i32).clamp(-1022, 1023))
    } else {
        1.0
    }
}

/// The median pairwise Euclidean distance of (a strided subsample of at
/// most 500 rows of) `x`; 1 when all those rows coincide. The rows are
/// divided by the power of two above the columns' largest half-range
/// `(max − min)/2` first (and the distance multiplied back), so inputs
/// whose squared distances overflow float64 get their distance too, and a
/// column far from the origin (a constant `1e200`) does not push the
/// others' differences below the float range; the power is kept within
/// `2^1000` of the largest magnitude, so that no quotient overflows.
/// Dividing by a power of two is exact, so other inputs get the same bits
/// as without.
pub fn median_pairwise_distance(x: ArrayView2<'_, f64>) -> f64 {
    let n = x.nrows();
    let step = n.div_ceil(MEDIAN_ROWS).max(1);
    let rows: Vec<_> = (0..n).step_by(step).map(|i| x.row(i)).collect();
    let (mut half_range, mut largest) = (0.0f64, 0.0f64);
    for a in 0..x.ncols() {
        let (lo, hi) = rows
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), r| {
                (lo.min(r[a]), hi.max(r[a]))
            });
        half_range = half_range.max(hi / 2.0 - lo / 2.0);
        largest = largest.max(lo.abs()).max(hi.abs());
    }
    let scale = power_of_two_above(half_range).max(power_of_two_above(largest) * 2f64.powi(-1000));
    let mut d = Vec::with_capacity(rows.len() * rows.len().saturating_sub(1) / 2);
    for i in 0..rows.len() {
        for j in 0..i {
            d.push(
                rows[i]
                    .iter()
                    .zip(rows[j].iter())
                    .map(|(a, b)| (a / scale - b / scale).powi(2))
                    .sum::<f64>()
                    .sqrt(),
            );
        }
    }
    if d.is_empty() {
        return 1.0;
    }
    let mid = d.len() / 2;
    let (_, m, _) = d.select_nth_unstable_by(mid, |a, b| a.total_cmp(b));
    if *m > 0.0 {
        *m * scale
    } else {
        1.0
    }
}

/// The data's length scales of inputs `x`: [`per_dimension_length_scales`]
/// with `ard` (one per dimension), else [`median_pairwise_distance`] (one
/// for every dimension).
pub fn data_length_scales(x: ArrayView2<'_, f64>, ard: bool) -> Vec<f64> {
    if ard {
        per_dimension_length_scales(x)
    } else {
        vec![median_pairwise_distance(x)]
    }
}

/// The per-dimension starts of an ARD fit: with `s_a` the standard
/// deviation of column `a` (1 for a column without spread), the median
/// pairwise distance `m` of the inputs with every column divided by its
/// `s_a`, times `s_a`: `l_a = m s_a`. On columns of one spread every start
/// is the median pairwise distance; a column in other units (metres beside
/// millimetres) starts on its own scale, so the fit, and the inducing
/// inputs chosen at the start, follow the units of every column.
pub fn per_dimension_length_scales(x: ArrayView2<'_, f64>) -> Vec<f64> {
    let n = x.nrows() as f64;
    let spread: Vec<f64> = x
        .columns()
        .into_iter()
        .zip(midrange(x))
        .map(|(c, mid)| {
            // About the column's midrange (no digits lost to an offset), in
            // units of the power of two above the centered magnitude, as
            // median_pairwise_distance.
            let scale = power_of_two_above(c.fold(0.0, |m: f64, v| m.max((v - mid).abs())));
            let mean = c.iter().map(|v| (v - mid) / scale).sum::<f64>() / n;
            let var = c
                .iter()
                .map(|v| ((v - mid) / scale - mean).powi(2))
                .sum::<f64>()
                / n;
            var.sqrt() * scale
        })
        .collect();
    // The rows median_pairwise_distance takes.
    let step = x.nrows().div_ceil(MEDIAN_ROWS).max(1);
    spread_length_scales(x.slice(s![..;step, ..]), &spread)
}

/// [`per_dimension_length_scales`] from the columns' standard deviations
/// `spread` (any that is not finite and `> 0` taken as 1) and the rows
/// `rows` the median is taken on (a strided subsample of at most 500 rows
/// of the inputs, as [`median_pairwise_distance`] takes them), for inputs
/// held elsewhere.
pub fn spread_length_scales(rows: ArrayView2<'_, f64>, spread: &[f64]) -> Vec<f64> {
    let spread: Vec<f64> = spread
        .iter()
        .map(|&sd| if sd.is_finite() && sd > 0.0 { sd } else { 1.0 })
        .collect();
    // Centered first, so that columns far from the origin keep the digits
    // of their differences.
    let center = midrange(rows);
    let scaled = Array2::from_shape_fn(rows.raw_dim(), |(i, a)| {
        (rows[(i, a)] - center[a]) / spread[a]
    });
    let m = median_pairwise_distance(scaled.view());
    spread.iter().map(|s| m * s).collect()
}

/// How [`maximize`] runs.
#[derive(Clone, Debug, PartialEq)]
pub struct OptimizerConfig {
    /// Random restarts after the run from the initialization, drawn
    /// uniformly within a factor 10 of it in each coordinate (`±ln 10`).
    pub n_restarts: usize,
    /// Seed of the restart draws.
    pub seed: u64,
    /// Maximum L-BFGS iterations per run.
    pub max_iter: u64,
    /// From this many rows on, every run first fits a strided quarter of
    /// the rows (recursively) and starts from that optimum with its Hessian
    /// as preconditioner (see `run_coarse_to_fine`); `usize::MAX` fits on
    /// all rows directly.
    pub coarse_min_rows: usize,
    /// L-BFGS stops when the norm of the gradient of `−value/N` in its
    /// variables falls below this ([`TOL_GRAD`] by default). In the
    /// variables of a coarse-to-fine run (`θ = θ_sub + H^{−1/2} p`) a norm
    /// `g` leaves about `g²/2` per row to gain.
    pub tol_grad: f64,
}

impl OptimizerConfig {
    /// Checks the settings a caller may have set: a run count that fits
    /// (`n_restarts + 1`) and a gradient tolerance that is a number `>= 0`.
    /// Every optimizer run ([`maximize`] and the fits) checks it first.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] naming `n_restarts` or `tol_grad`.
    pub fn validate(&self) -> Result<()> {
        if self.n_restarts == usize::MAX {
            return Err(Error::invalid(
                "n_restarts",
                format!("must be below {}, got {}", usize::MAX, self.n_restarts),
            ));
        }
        if self.tol_grad.is_nan() || self.tol_grad < 0.0 {
            return Err(Error::invalid(
                "tol_grad",
                format!("must be a number >= 0, got {:?}", self.tol_grad),
            ));
        }
        Ok(())
    }
}

impl Default for OptimizerConfig {
    fn default() -> Self {
        Self {
            n_restarts: 2,
            seed: 0,
            max_iter: 500,
            coarse_min_rows: COARSE_MIN_ROWS,
            tol_grad: TOL_GRAD,
        }
    }
}

/// Default of [`OptimizerConfig::coarse_min_rows`]: below 1,024 rows a fit
/// is cheap and the quarter-size subsample (< 256 rows) too small to say
/// much.
pub const COARSE_MIN_ROWS: usize = 1024;

/// The best run of [`maximize`].
#[derive(Clone, Debug)]
pub struct Optimum<F> {
    /// The optimizer's coordinates at the optimum.
    pub theta: Vec<f64>,
    /// The value there.
    pub value: f64,
    /// The fit of that evaluation.
    pub fit: F,
    /// L-BFGS iterations spent, over all runs and levels.
    pub n_iter: u64,
}

/// One cached evaluation: `(point, cost, gradient)`.
type Cached = (Vec<f64>, f64, Vec<f64>);

/// An [`Objective`] as L-BFGS sees it: `−value/N` in (optionally
/// preconditioned) variables `p`, with a cache for the line search, an
/// evaluation count and the best evaluation.
struct Tracked<'a, O: Objective> {
    obj: &'a O,
    /// The optimizer's variables `p` map to `θ` as `origin + C p` (`C`
    /// row-major, square; `None`: `p` itself). With `C Cᵀ ≈ H^{−1}`,
    /// L-BFGS's first step is a Newton step.
    precond: Option<(Vec<f64>, Array2<f64>)>,
    /// Checked before every evaluation that is not cached.
    monitor: &'a Monitor,
    /// The last [`CACHE_LEN`] evaluations.
    cache: Mutex<VecDeque<Cached>>,
    /// Number of evaluations of the objective.
    evals: AtomicU64,
    /// The best point of the current L-BFGS segment `(p, cost, gradient)`.
    best: Mutex<Option<Cached>>,
    /// Set when the line search asked for a point within [`STALL_STEP`]
    /// of the segment's best point (see [`Tracked::eval_step`]).
    stalled: AtomicBool,
    /// The last point of the current L-BFGS segment that could not be
    /// evaluated (see [`backtrack`]).
    failed: Mutex<Option<Vec<f64>>>,
    /// The best evaluation ever, with its fit.
    best_fit: Mutex<Option<BestFit<O::Fit>>>,
}

/// The best evaluation of a [`Tracked`] objective.
struct BestFit<F> {
    cost: f64,
    /// The optimizer's variables.
    p: Vec<f64>,
    value: f64,
    fit: F,
}

/// Evaluations remembered for the line search's repeated requests.
const CACHE_LEN: usize = 8;

impl<'a, O: Objective> Tracked<'a, O> {
    fn new(obj: &'a O, precond: Option<(Vec<f64>, Array2<f64>)>, monitor: &'a Monitor) -> Self {
        Self {
            obj,
            precond,
            monitor,
            cache: Mutex::new(VecDeque::with_capacity(CACHE_LEN)),
            evals: AtomicU64::new(0),
            best: Mutex::new(None),
            stalled: AtomicBool::new(false),
            failed: Mutex::new(None),
            best_fit: Mutex::new(None),
        }
    }

    /// `θ` at the optimizer's variables `p`.
    fn theta(&self, p: &[f64]) -> Vec<f64> {
        match &self.precond {
            None => p.to_vec(),
            Some((origin, c)) => origin
                .iter()
                .zip(c.rows())
                .map(|(o, row)| o + row.iter().zip(p).map(|(a, b)| a * b).sum::<f64>())
                .collect(),
        }
    }

    fn eval(&self, p: &[f64]) -> Result<(f64, Vec<f64>)> {
        if let Some((_, c, g)) = self
            .cache
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .find(|(q, _, _)| q.as_slice() == p)
        {
            return Ok((*c, g.clone()));
        }
        self.monitor.check()?;
        let theta = self.theta(p);
        let e = match self.obj.evaluate(&theta, self.monitor) {
            Ok(e) => e,
            Err(e) => {
                if e != Error::Interrupted {
                    *self.failed.lock().unwrap_or_else(|e| e.into_inner()) = Some(p.to_vec());
                }
                return Err(e);
            }
        };
        let n = self.obj.n_rows() as f64;
        let cost = -e.value / n;
        let mut grad: Vec<f64> = e.grad.iter().map(|g| -g / n).collect();
        if let Some((_, c)) = &self.precond {
            // The chain rule through θ = origin + C p: ∇_p = Cᵀ ∇_θ.
            grad = c.t().dot(&Array1::from(grad)).to_vec();
        }
        self.evals.fetch_add(1, Ordering::Relaxed);
        {
            let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
            if cache.len() == CACHE_LEN {
                cache.pop_front();
            }
            cache.push_back((p.to_vec(), cost, grad.clone()));
        }
        let mut best = self.best.lock().unwrap_or_else(|e| e.into_inner());
        if best.as_ref().is_none_or(|(_, c, _)| cost < *c) {
            *best = Some((p.to_vec(), cost, grad.clone()));
        }
        let mut best_fit = self.best_fit.lock().unwrap_or_else(|e| e.into_inner());
        if best_fit.as_ref().is_none_or(|b| cost < b.cost) {
            *best_fit = Some(BestFit {
                cost,
                p: p.to_vec(),
                value: e.value,
                fit: e.fit,
            });
        }
        Ok((cost, grad))
    }

    /// [`Tracked::eval`] for the line search: a new point within
    /// [`STALL_STEP`] (relative) of the segment's best point ends the
    /// segment instead (an error, with `stalled` set). A line search that
    /// has shrunk its steps that far found no decrease where the objective
    /// is smooth: it is fighting the rounding noise of the value (or a
    /// non-descent direction, which a fresh segment repairs).
    fn eval_step(&self, p: &[f64]) -> Result<(f64, Vec<f64>)> {
        let near = self
            .best
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .is_some_and(|(b, _, _)| {
                let dist = distance(p, b);
                dist > 0.0 && dist <= STALL_STEP * norm(b).max(1.0)
            });
        if near {
            self.stalled.store(true, Ordering::Relaxed);
            return Err(Error::Internal("the line search stalled".into()));
        }
        self.eval(p)
    }

    /// The rounding noise of the cost near the segment's best point `b`:
    /// the largest deviation of a remembered evaluation within
    /// [`NOISE_RADIUS`] (relative) of `b` from the first-order model
    /// `c(b) + g(b)·(q − b)` (at that distance the model's own error is
    /// `O(radius²)`, far below the noise); 0 when there is none.
    fn noise_near(&self, best: &Cached) -> f64 {
        let (b, cb, gb) = best;
        let radius = NOISE_RADIUS * norm(b).max(1.0);
        self.cache
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter(|(q, _, _)| distance(q, b) <= radius)
            .map(|(q, c, _)| {
                let lin: f64 = gb
                    .iter()
                    .zip(q.iter().zip(b))
                    .map(|(g, (x, y))| g * (x - y))
                    .sum();
                (c - cb - lin).abs()
            })
            .fold(0.0, f64::max)
    }
}

/// `‖a − b‖`.
fn distance(a: &[f64], b: &[f64]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y) * (x - y))
        .sum::<f64>()
        .sqrt()
}

/// `‖a‖`.
fn norm(a: &[f64]) -> f64 {
    a.iter().map(|x| x * x).sum::<f64>().sqrt()
}

/// A line-search step shorter than this (relative to the best point's
/// norm, at least 1) ends the segment (see [`Tracked::eval_step`]).
const STALL_STEP: f64 = 1e-8;

/// Evaluations within this distance (relative, as [`STALL_STEP`]) of a
/// segment's best point measure the cost's rounding noise there (see
/// [`Tracked::noise_near`]).
const NOISE_RADIUS: f64 = 1e-6;

/// Counts the iterations of an L-BFGS segment, also of one that ends with
/// an error (argmin returns no state then).
struct IterCount(Arc<AtomicU64>);

impl<I: State> Observe<I> for IterCount {
    fn observe_iter(
        &mut self,
        state: &I,
        _kv: &KV,
    ) -> std::result::Result<(), argmin::core::Error> {
        // Called before the iteration counter moves on.
        self.0.store(state.get_iter() + 1, Ordering::Relaxed);
        Ok(())
    }
}

/// The cost of an L-BFGS segment: the tracked objective's `−value/N`
/// times a positive `scale` (see [`run_lbfgs`]).
struct Problem<'a, 'b, O: Objective> {
    obj: &'b Tracked<'a, O>,
    scale: f64,
}

impl<O: Objective> CostFunction for Problem<'_, '_, O> {
    type Param = Vec<f64>;
    type Output = f64;
    fn cost(&self, p: &Vec<f64>) -> std::result::Result<f64, argmin::core::Error> {
        Ok(self.scale * self.obj.eval_step(p)?.0)
    }
}

impl<O: Objective> Gradient for Problem<'_, '_, O> {
    type Param = Vec<f64>;
    type Gradient = Vec<f64>;
    fn gradient(&self, p: &Vec<f64>) -> std::result::Result<Vec<f64>, argmin::core::Error> {
        let g = self.obj.eval_step(p)?.1;
        Ok(g.into_iter().map(|v| self.scale * v).collect())
    }
}

/// The longest first step of an L-BFGS run (steepest descent, `−g`):
/// a factor `e` in the hyperparameters. A start far from the optimum (a
/// sparse-GP bound at a kernel variance 1e3 times too large has gradients
/// of 1e3 per row) would otherwise jump by `‖g‖` in log space, onto the
/// flat all-noise plateau of long length scales, where the run ends.
/// L-BFGS-B (and so scikit-learn's GP) starts every run with a unit step.
const MAX_FIRST_STEP: f64 = 1.0;

/// L-BFGS stops when the gradient norm of `−value/N` falls below this, or
/// when an iteration changes `−value/N` by less than [`TOL_COST`]. Both sit
/// above the rounding noise of the LML of an ill-conditioned `K_y` (about
/// 1e−11 relative), where further iterations only burn evaluations.
pub const TOL_GRAD: f64 = 1e-7;

/// See [`TOL_GRAD`].
pub const TOL_COST: f64 = 1e-12;

/// At most this many L-BFGS segments per run (see [`run_lbfgs`]).
const MAX_SEGMENTS: usize = 20;

/// Runs L-BFGS from `start`; returns the best point evaluated (objective
/// `−value/N`, optimizer variables) and the iteration count, or the error
/// of the first evaluation when not even the start could be evaluated.
///
/// argmin's L-BFGS ends a run when its line search fails (e.g. on a
/// non-descent direction from stale curvature pairs), which can happen far
/// from a stationary point. Only then is the run continued from its best
/// point with fresh memory; it ends when a segment converges (gradient below
/// [`TOL_GRAD`] or a cost change below [`TOL_COST`]), brings no decrease, or
/// `max_iter` iterations are spent.
///
/// Near the optimum of an objective with rounding noise above those
/// tolerances (e.g. a sparse-GP bound with a nearly singular `K_uu`), the
/// line search keeps shrinking its steps in search of a decrease that the
/// noise hides: a step shorter than [`STALL_STEP`] ends the segment, and
/// the run ends when the gain a fresh steepest-descent step could bring
/// (`‖g‖²/2`) is below the noise measured around the best point
/// ([`Tracked::noise_near`]).
fn run_lbfgs<O: Objective>(
    obj: &Tracked<'_, O>,
    start: Vec<f64>,
    max_iter: u64,
    tol_grad: f64,
) -> Result<(f64, Vec<f64>, u64)> {
    let (mut best_c, mut g) = obj.eval(&start)?;
    let mut best_p = start;
    let mut total = 0u64;
    for segment in 0..MAX_SEGMENTS {
        if total >= max_iter || norm(&g) <= tol_grad {
            break;
        }
        *obj.best.lock().unwrap_or_else(|e| e.into_inner()) =
            Some((best_p.clone(), best_c, g.clone()));
        obj.stalled.store(false, Ordering::Relaxed);
        *obj.failed.lock().unwrap_or_else(|e| e.into_inner()) = None;
        // The first segment's cost is scaled so that its first step, `−g`,
        // is at most MAX_FIRST_STEP long; the tolerances with it, so they
        // keep their meaning. Later steps do not depend on the scale
        // (L-BFGS's initial Hessian `sᵀy/yᵀy` divides it out). A later
        // segment starts where a line search failed, near the best point.
        let scale = if segment == 0 {
            (MAX_FIRST_STEP / norm(&g)).min(1.0)
        } else {
            1.0
        };
        let solver = LBFGS::new(MoreThuenteLineSearch::new(), 10)
            .with_tolerance_grad(scale * tol_grad)
            .and_then(|s| s.with_tolerance_cost(scale * TOL_COST))
            .map_err(|e| Error::Internal(e.to_string()))?;
        let p0 = best_p.clone();
        let iters = Arc::new(AtomicU64::new(0));
        let r = Executor::new(Problem { obj, scale }, solver)
            .configure(|s| s.param(p0).max_iters(max_iter - total))
            .add_observer(IterCount(Arc::clone(&iters)), ObserverMode::Always)
            .run();
        // Only a line-search failure (`SolverExit`), a stall or an
        // evaluation error warrants a fresh segment; a converged run or the
        // iteration limit ends the run (restarting a converged run only
        // re-spends evaluations on a steepest-descent probe of the optimum).
        let resume = match &r {
            Ok(r) => matches!(
                r.state().get_termination_reason(),
                Some(TerminationReason::SolverExit(_))
            ),
            Err(_) => true,
        };
        total += iters.load(Ordering::Relaxed).max(1);
        // A cancel ends the segment with an evaluation error; end the run.
        obj.monitor.check()?;
        let seg = obj.best.lock().unwrap_or_else(|e| e.into_inner()).take();
        let failed = obj.failed.lock().unwrap_or_else(|e| e.into_inner()).take();
        match seg {
            Some(b) if b.1 < best_c - TOL_COST * best_c.abs().max(1.0) => {
                // A fresh segment starts with a steepest-descent step, which
                // gains about ‖g‖²/2 in the (roughly Hessian-scaled)
                // variables; below the cost's rounding noise it cannot
                // make measurable progress.
                let noise = obj.noise_near(&b);
                (best_p, best_c, g) = b;
                if !resume || 0.5 * norm(&g).powi(2) <= noise {
                    break;
                }
            }
            // A segment without a decrease that ended at a point that cannot
            // be evaluated: its next segment would take the same first step.
            _ => match failed.map(|f| backtrack(obj, &best_p, best_c, &g, &f)) {
                Some(Ok(Some(b))) => (best_p, best_c, g) = b,
                Some(Err(e)) => return Err(e),
                _ => break,
            },
        }
    }
    Ok((best_c, best_p, total))
}

/// The Armijo constant of [`backtrack`]: a step must gain at least this
/// fraction of what the first-order model promises.
const ARMIJO: f64 = 1e-4;

/// Backs off from a point `failed` that could not be evaluated (e.g. a
/// sparse-GP bound whose `K_uu` is numerically singular there) towards the
/// best point `(p, c, g)`. Tries the step `d = failed − p` (or, when `d` is
/// not a descent direction, the steepest-descent step `−g` of the same
/// length), then each coordinate's part of that steepest-descent step
/// alone (largest `|g_i|` first), halving each until a point can be
/// evaluated and gains at least [`ARMIJO`] times the first-order model's
/// promise (Armijo's condition). Returns the first such point, or `None`
/// when every step falls below [`STALL_STEP`] first.
///
/// argmin's line search ends a segment at the first point it cannot
/// evaluate, and a fresh segment from the same best point would take the
/// same steepest-descent step: without this, a run that meets such a
/// region (a cost of `+∞` there, for the optimizer) ends wherever it was.
/// The region is typically bounded in one parameter (a noise variance too
/// small for a length scale, say), so a step that crosses into it along a
/// diagonal can still make progress along the other coordinates.
fn backtrack<O: Objective>(
    obj: &Tracked<'_, O>,
    p: &[f64],
    c: f64,
    g: &[f64],
    failed: &[f64],
) -> Result<Option<Cached>> {
    let dot = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f64>();
    let d: Vec<f64> = failed.iter().zip(p).map(|(f, x)| f - x).collect();
    let len = norm(&d);
    let scale = len / norm(g).max(f64::MIN_POSITIVE);
    let steepest: Vec<f64> = g.iter().map(|v| -v * scale).collect();
    // The failed step itself is known to fail: its halves come first.
    let mut tries = vec![(
        if dot(g, &d) < 0.0 {
            d
        } else {
            steepest.clone()
        },
        0.5,
    )];
    let mut order: Vec<usize> = (0..g.len()).filter(|&i| g[i] != 0.0).collect();
    order.sort_by(|&i, &j| g[j].abs().total_cmp(&g[i].abs()));
    if order.len() > 1 {
        for i in order {
            let mut e = vec![0.0; g.len()];
            e[i] = steepest[i];
            tries.push((e, 1.0));
        }
    }
    let min_step = STALL_STEP * norm(p).max(1.0);
    for (d, mut t) in tries {
        let (slope, len) = (dot(g, &d), norm(&d));
        while t * len > min_step {
            let q: Vec<f64> = p.iter().zip(&d).map(|(x, v)| x + t * v).collect();
            match obj.eval(&q) {
                Ok((cq, gq)) if cq <= c + ARMIJO * t * slope => return Ok(Some((q, cq, gq))),
                Err(Error::Interrupted) => return Err(Error::Interrupted),
                _ => t *= 0.5,
            }
        }
    }
    Ok(None)
}

/// Step of the forward differences of the subsample's gradient that give
/// its Hessian (in log parameters; the gradient is exact, so the error is
/// `O(h)` times the third derivative, ample for a preconditioner).
const HESSIAN_STEP: f64 = 1e-4;

/// Eigenvalues of that Hessian are raised to at least this fraction of the
/// largest (flat or, off a clean optimum, negative directions would
/// otherwise get unbounded steps).
const HESSIAN_FLOOR: f64 = 1e-4;

/// The result of one optimizer run.
struct Run<F> {
    /// `−value/N` at `theta`.
    cost: f64,
    /// The optimizer's coordinates.
    theta: Vec<f64>,
    /// L-BFGS iterations, over all levels.
    iters: u64,
    /// The best evaluation (all rows).
    fit: BestFit<F>,
}

/// One optimizer run from `start` (coordinates `θ`), coarse to fine.
///
/// With at least `coarse_min_rows` rows (and an objective with a
/// subsample) it first runs (recursively) on the strided subsample of every
/// fourth row (`1/64` of the cost per evaluation of an `O(N³)` objective),
/// takes the Hessian `H` of that subsample's `−value/m` at its optimum
/// (forward differences of the analytic gradient, one subsample evaluation
/// per coordinate) and runs L-BFGS on all rows from that optimum in the
/// variables `p` with `θ = θ_sub + H^{−1/2} p`: the per-row value of a
/// subsample has nearly the same optimum and curvature as the full one, so
/// L-BFGS's first step is close to a Newton step and a few full-size
/// evaluations converge. If the subsample fails (e.g. its Cholesky), or all
/// rows cannot be evaluated at its optimum, the run starts from `start` on
/// all rows.
fn run_coarse_to_fine<O: Objective>(
    obj: &O,
    start: Vec<f64>,
    cfg: &OptimizerConfig,
    monitor: &Monitor,
) -> Result<Run<O::Fit>> {
    let n = obj.n_rows();
    let mut iters = 0;
    let mut precond = None;
    if n >= cfg.coarse_min_rows.max(4) {
        let rows: Vec<usize> = (0..n / 4).map(|i| 4 * i).collect();
        let coarse = obj.subsample(&rows).and_then(|sub| {
            let Some(sub) = sub else {
                return Ok(None);
            };
            let run = run_coarse_to_fine(&sub, start.clone(), cfg, monitor)?;
            let c = hessian_inverse_root(&sub, &run.theta, monitor)?;
            Ok(Some((run, c)))
        });
        match coarse {
            Ok(None) => {}
            Ok(Some((run, c))) => {
                let name = obj.value_name();
                monitor.message(format!(
                    "  {} rows: {name} = {:.6} after {} L-BFGS iterations; \
                     {} rows: {} {name} evaluations for its Hessian",
                    rows.len(),
                    -run.cost * rows.len() as f64,
                    run.iters,
                    rows.len(),
                    start.len() + 1
                ));
                iters += run.iters;
                precond = c.map(|c| (run.theta, c));
            }
            Err(Error::Interrupted) => return Err(Error::Interrupted),
            Err(e) => {
                monitor.message(format!(
                    "  {} rows failed ({e}); starting on all rows",
                    rows.len()
                ));
            }
        }
    }
    let p0 = match &precond {
        Some((origin, _)) => vec![0.0; origin.len()],
        None => start.clone(),
    };
    let coarse_start = precond.is_some();
    let mut tracked = Tracked::new(obj, precond, monitor);
    let it = match run_lbfgs(&tracked, p0, cfg.max_iter, cfg.tol_grad) {
        Ok((_, _, it)) => it,
        // The subsample's optimum can be a point where all rows cannot be
        // evaluated (e.g. a kernel variance near 0 that the subsample
        // tolerates): then, as when the subsample fails, start on all rows
        // from `start`.
        Err(e) if coarse_start && e != Error::Interrupted => {
            monitor.message(format!(
                "  {n} rows failed at the subsample's optimum ({e}); starting from the start"
            ));
            tracked = Tracked::new(obj, None, monitor);
            run_lbfgs(&tracked, start, cfg.max_iter, cfg.tol_grad)?.2
        }
        Err(e) => return Err(e),
    };
    monitor.message(format!(
        "  {n} rows: {} {} evaluations",
        tracked.evals.load(Ordering::Relaxed),
        obj.value_name()
    ));
    // The best point evaluated (what run_lbfgs returns, or an evaluation
    // below its tolerance-sized improvement threshold), with its fit.
    let fit = tracked
        .best_fit
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take()
        .ok_or_else(|| Error::Internal("an L-BFGS run without evaluations".into()))?;
    Ok(Run {
        cost: fit.cost,
        theta: tracked.theta(&fit.p),
        iters: iters + it,
        fit,
    })
}

/// `C = V Λ^{−1/2}` for the Hessian `H = V Λ Vᵀ` of `−value/m` of `obj` at
/// `theta` (so `C Cᵀ = H^{−1}`), eigenvalues floored at [`HESSIAN_FLOOR`]
/// times the largest; `None` when `H` has no positive curvature at all.
fn hessian_inverse_root<O: Objective>(
    obj: &O,
    theta: &[f64],
    monitor: &Monitor,
) -> Result<Option<Array2<f64>>> {
    let tracked = Tracked::new(obj, None, monitor);
    let k = theta.len();
    let g0 = tracked.eval(theta)?.1;
    let mut h = faer::Mat::<f64>::zeros(k, k);
    for j in 0..k {
        let mut t = theta.to_vec();
        t[j] += HESSIAN_STEP;
        let g = tracked.eval(&t)?.1;
        for i in 0..k {
            h[(i, j)] = (g[i] - g0[i]) / HESSIAN_STEP;
        }
    }
    let h = faer::Mat::<f64>::from_fn(k, k, |i, j| 0.5 * (h[(i, j)] + h[(j, i)]));
    let Ok((u, lam)) = crate::linalg::symmetric_eigen(h.as_ref()) else {
        return Ok(None);
    };
    let top = (0..k).map(|i| lam[i]).fold(f64::NEG_INFINITY, f64::max);
    if !(top.is_finite() && top > 0.0) {
        return Ok(None);
    }
    Ok(Some(Array2::from_shape_fn((k, k), |(i, j)| {
        u[(i, j)] / lam[j].abs().max(HESSIAN_FLOOR * top).sqrt()
    })))
}

/// Fits the exact GP: initialization of `docs/math/gp.rst`, "Exact GP", L-BFGS
/// on the log marginal likelihood over the hyperparameters in `cfg.optimize`
/// (from the initialization, then `cfg.n_restarts` starts drawn uniformly
/// within a factor 10 of it in each free parameter), the best run kept.
///
/// `monitor` gets the stage "optimizer runs" (one unit per run) and one
/// message per run and subsample level; every evaluation checks it.
///
/// # Errors
/// [`Error::Interrupted`] once `monitor` is cancelled; the first run's error
/// when every run failed.
pub fn maximize<O: Objective>(
    obj: &O,
    start: &[f64],
    cfg: &OptimizerConfig,
    monitor: &Monitor,
) -> Result<Optimum<O::Fit>> {
    let (run, n_iter) = best_of_runs(start, cfg, monitor, |start| {
        let run = run_coarse_to_fine(obj, start, cfg, monitor)?;
        let summary = format!(
            "{} = {:.6} after {} L-BFGS iterations",
            obj.value_name(),
            run.fit.value,
            run.iters
        );
        Ok(RunOutcome {
            score: -run.cost,
            iters: run.iters,
            summary,
            run,
        })
    })?;
    Ok(Optimum {
        theta: run.theta,
        value: run.fit.value,
        fit: run.fit.fit,
        n_iter,
    })
}

/// The length scales a fit may start from: the given ones, then the data's
/// scale `data` when known and different: one value for every length scale
/// (the median pairwise distance of the inputs,
/// [`median_pairwise_distance`]) or one per length scale
/// ([`per_dimension_length_scales`]).
pub(crate) fn length_scale_starts(given: &[f64], data: Option<Vec<f64>>) -> Vec<Vec<f64>> {
    let mut c = vec![given.to_vec()];
    if let Some(mut d) = data {
        if d.len() == 1 {
            d = vec![d[0]; given.len()];
        }
        if d != given {
            c.push(d);
        }
    }
    c
}

/// The index of the start a fit runs from: the candidate of `candidates`
/// (length scales; the given ones first) of the highest `value_at` (a log
/// marginal likelihood, or a bound on it, called `value_name` in the
/// messages, on a coarse subsample of `rows` rows), the first on ties. A
/// candidate that cannot be evaluated is passed over; the first is kept
/// when none can (its run then reports why).
///
/// Length scales far from the inputs' scale (the default 1 for inputs in
/// thousands, say) put a fit where the kernel or its features see no
/// structure in the targets and the value is flat, and a run stops at a
/// spurious maximum there; the data's scale is the exact GP's start.
///
/// # Errors
/// [`Error::Interrupted`] once `monitor` is cancelled.
pub(crate) fn best_start(
    candidates: &[Vec<f64>],
    value_at: impl Fn(&Vec<f64>) -> Result<f64>,
    value_name: &str,
    rows: usize,
    monitor: &Monitor,
) -> Result<usize> {
    let names: Vec<String> = candidates.iter().map(|l| length_scale_name(l)).collect();
    best_named_start(
        &names,
        value_name,
        |i| Ok((value_at(&candidates[i])?, rows)),
        monitor,
    )
}

/// `length scale l` or `length scales [l_1, …]`.
fn length_scale_name(l: &[f64]) -> String {
    match l {
        [one] => format!("length scale {one:.6e}"),
        many => format!("length scales {many:.6?}"),
    }
}

/// [`best_start`] over candidates named `names`, `value_at(i)` the value
/// (called `value_name` in the messages) of the `i`-th and the number of
/// rows it was computed on.
pub(crate) fn best_named_start(
    names: &[String],
    value_name: &str,
    mut value_at: impl FnMut(usize) -> Result<(f64, usize)>,
    monitor: &Monitor,
) -> Result<usize> {
    let mut best: Option<(usize, f64)> = None;
    for (i, name) in names.iter().enumerate() {
        match value_at(i) {
            Ok((v, rows)) => {
                monitor.message(format!(
                    "start {name}: {value_name} = {v:.6} on {rows} rows"
                ));
                if best.is_none_or(|(_, b)| v > b) {
                    best = Some((i, v));
                }
            }
            Err(Error::Interrupted) => return Err(Error::Interrupted),
            Err(e) => monitor.message(format!("start {name}: {e}")),
        }
    }
    Ok(best.map_or(0, |(i, _)| i))
}

/// The data's scale, where a fit may start instead of the given starts:
/// the length scales of [`HyperInit`]'s defaults (the median pairwise
/// distance, or one per column with ARD) and the targets' variance, whose
/// defaults are the kernel variance `var(y)` and the noise variance
/// `0.1 var(y)`.
#[derive(Clone, Debug, PartialEq)]
pub struct DataScale {
    /// One length scale for every dimension, or one per dimension.
    pub length_scale: Vec<f64>,
    /// `var(y)` ([`super::target_variance_scale`]: 1 for targets all equal).
    pub target_variance: f64,
}

impl DataScale {
    /// The scale of training data `(x, y)`: [`data_length_scales`] and
    /// [`super::target_variance_scale`].
    ///
    /// # Errors
    /// As [`super::target_variance_scale`].
    pub fn of(x: ArrayView2<'_, f64>, y: ArrayView1<'_, f64>, ard: bool) -> Result<Self> {
        Ok(Self {
            length_scale: data_length_scales(x, ard),
            target_variance: super::target_variance_scale(y)?,
        })
    }

    /// The hyperparameters `(l.., σ², σ_n²)` at this scale, in the layout of
    /// `params`: its length-scale count, `var(y)` and `0.1 var(y)`.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] for a length-scale count other than 1 or
    /// `params`' count, or values that are not finite and `> 0`.
    pub fn values(&self, params: &LogParams) -> Result<Vec<f64>> {
        let k = params.n_length_scales();
        let mut v = match self.length_scale.len() {
            1 => vec![self.length_scale[0]; k],
            n if n == k => self.length_scale.clone(),
            n => {
                return Err(Error::invalid(
                    "data_length_scale",
                    format!("needs 1 value or {k}, got {n}"),
                ))
            }
        };
        v.push(self.target_variance);
        v.push(0.1 * self.target_variance);
        for (i, &x) in v.iter().enumerate() {
            check_positive(
                if i < k {
                    "data_length_scale"
                } else {
                    "data_target_variance"
                },
                x,
            )?;
        }
        Ok(v)
    }
}

/// The starts a fit may run from: the given hyperparameters `params`, then
/// the same with its free length scales, its free variances, or both at
/// `data` (the data's scale in the layout of `params.values`, see
/// [`DataScale::values`]), each once.
pub(crate) fn start_candidates(params: &LogParams, data: &[f64]) -> Vec<Vec<f64>> {
    let k = params.n_length_scales();
    let at = |lengths: bool, variances: bool| -> Vec<f64> {
        let mut v = params.values.clone();
        for &i in &params.free {
            if (i < k && lengths) || (i >= k && variances) {
                v[i] = data[i];
            }
        }
        v
    };
    let mut c: Vec<Vec<f64>> = Vec::with_capacity(4);
    for (lengths, variances) in [(false, false), (true, false), (false, true), (true, true)] {
        let v = at(lengths, variances);
        if !c.contains(&v) {
            c.push(v);
        }
    }
    c
}

/// The names of [`start_candidates`]' starts: their length scales, and the
/// variances that differ between them.
pub(crate) fn start_names(params: &LogParams, candidates: &[Vec<f64>]) -> Vec<String> {
    let k = params.n_length_scales();
    candidates
        .iter()
        .map(|v| {
            let mut name = length_scale_name(&v[..k]);
            for i in k..v.len() {
                if candidates.iter().any(|c| c[i] != v[i]) {
                    name.push_str(&format!(
                        ", {} {:.6e}",
                        params.name(i).replace('_', " "),
                        v[i]
                    ));
                }
            }
            name
        })
        .collect()
}

/// The coarsest subsample of `obj` of its coarse-to-fine runs (rows `0, 4,
/// 8, …` of the level above, down to `cfg.coarse_min_rows`), `None`
/// without coarse levels.
///
/// # Errors
/// The errors of building the subsamples.
pub(crate) fn coarsest<O: Objective>(obj: &O, cfg: &OptimizerConfig) -> Result<Option<O>> {
    let mut coarse: Option<O> = None;
    loop {
        let n = coarse.as_ref().map_or(obj.n_rows(), O::n_rows);
        if n < cfg.coarse_min_rows.max(4) {
            break;
        }
        let rows: Vec<usize> = (0..n / 4).map(|i| 4 * i).collect();
        let next = match &coarse {
            Some(c) => c.subsample(&rows)?,
            None => obj.subsample(&rows)?,
        };
        match next {
            Some(sub) => coarse = Some(sub),
            None => break,
        }
    }
    Ok(coarse)
}

/// [`maximize`]'s start: the log hyperparameters `params` start at, or
/// one of the other [`start_candidates`] with the data's scale `data`
/// (in the layout of `params.values`), whichever has the highest value of
/// `obj` ([`Objective::value`], no gradient) on the coarsest subsample its
/// coarse-to-fine runs use ([`coarsest`]; [`best_start`]'s rule).
///
/// # Errors
/// [`Error::Interrupted`]; the errors of building the subsamples.
pub(crate) fn better_start<O: Objective>(
    obj: &O,
    params: &LogParams,
    data: &[f64],
    cfg: &OptimizerConfig,
    monitor: &Monitor,
) -> Result<Vec<f64>> {
    let candidates = start_candidates(params, data);
    let at = |i: usize| LogParams {
        values: candidates[i].clone(),
        free: params.free.clone(),
    };
    if candidates.len() == 1 {
        return Ok(params.start());
    }
    let coarse = coarsest(obj, cfg)?;
    let level = coarse.as_ref().unwrap_or(obj);
    let best = best_named_start(
        &start_names(params, &candidates),
        level.value_name(),
        |i| {
            monitor.check()?;
            Ok((level.value(&at(i).start(), monitor)?, level.n_rows()))
        },
        monitor,
    )?;
    Ok(at(best).start())
}

/// `params.values` with the length scales at `data` (one value for every
/// length scale, or one per length scale): the data start of a fit whose
/// variances have no data default.
pub(crate) fn with_length_scales(params: &LogParams, data: &[f64]) -> Vec<f64> {
    let k = params.n_length_scales();
    let mut v = params.values.clone();
    for (a, l) in v[..k].iter_mut().enumerate() {
        *l = data[a.min(data.len() - 1)];
    }
    v
}

/// What one optimizer run of [`best_of_runs`] gives back.
pub(crate) struct RunOutcome<R> {
    /// The run's result.
    pub run: R,
    /// Its score: the best of the runs has the largest (the first of
    /// equals).
    pub score: f64,
    /// The iterations (or evaluations) it spent.
    pub iters: u64,
    /// How it ended, for the progress message `run i/n: {summary}`.
    pub summary: String,
}

/// The restarts of an optimizer: `n_restarts + 1` runs of `run`, the first
/// from `start`, every other from `start` moved by `ln 10 · U(−1, 1)` in
/// each coordinate (a decade either way, drawn from `seed`). Each run is
/// reported to `monitor`; the best run and the iterations of all are kept.
///
/// # Errors
/// [`Error::Interrupted`] at once; when every run fails, the first run's
/// error.
pub(crate) fn best_of_runs<R>(
    start: &[f64],
    cfg: &OptimizerConfig,
    monitor: &Monitor,
    mut run: impl FnMut(Vec<f64>) -> Result<RunOutcome<R>>,
) -> Result<(R, u64)> {
    cfg.validate()?;
    let mut rng = crate::rng::seeded(cfg.seed);
    let mut best: Option<RunOutcome<R>> = None;
    let mut first_err = None;
    let mut n_iter = 0u64;
    let runs = cfg.n_restarts + 1;
    monitor.stage("optimizer runs", runs as u64);
    for r in 0..runs {
        let start: Vec<f64> = if r == 0 {
            start.to_vec()
        } else {
            start
                .iter()
                .map(|v| v + std::f64::consts::LN_10 * rng.random_range(-1.0..=1.0))
                .collect()
        };
        match run(start) {
            Ok(out) => {
                n_iter += out.iters;
                monitor.message(format!("run {}/{runs}: {}", r + 1, out.summary));
                // Only the best run is kept (bounds the memory).
                if best.as_ref().is_none_or(|b| out.score > b.score) {
                    best = Some(out);
                }
            }
            Err(Error::Interrupted) => return Err(Error::Interrupted),
            Err(e) => {
                monitor.message(format!("run {}/{runs} failed: {e}", r + 1));
                first_err.get_or_insert(e);
            }
        }
        monitor.advance(1);
    }
    match best {
        Some(out) => Ok((out.run, n_iter)),
        None => Err(first_err.unwrap_or_else(|| Error::Internal("no optimizer run".into()))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gp::exact::data_for_tests as data;
    use crate::gp::exact::fit::{fit_exact, ExactGpConfig, ExactLml};
    use crate::threads::Parallelism;

    /// `value = −½ Σ_i w_i (θ_i − c_i)²` summed over `n` rows (`n` copies):
    /// a quadratic with its maximum at `c`.
    struct Quadratic {
        c: Vec<f64>,
        w: Vec<f64>,
        n: usize,
        subsampled: bool,
    }

    impl Objective for Quadratic {
        type Fit = usize;
        fn n_rows(&self) -> usize {
            self.n
        }
        fn evaluate(&self, theta: &[f64], monitor: &Monitor) -> Result<Evaluation<usize>> {
            monitor.check()?;
            let n = self.n as f64;
            let value = -0.5
                * n
                * theta
                    .iter()
                    .zip(&self.c)
                    .zip(&self.w)
                    .map(|((t, c), w)| w * (t - c) * (t - c))
                    .sum::<f64>();
            let grad = theta
                .iter()
                .zip(&self.c)
                .zip(&self.w)
                .map(|((t, c), w)| -n * w * (t - c))
                .collect();
            Ok(Evaluation {
                value,
                grad,
                fit: self.n,
            })
        }
        fn subsample(&self, rows: &[usize]) -> Result<Option<Self>> {
            Ok(self.subsampled.then(|| Quadratic {
                c: self.c.clone(),
                w: self.w.clone(),
                n: rows.len(),
                subsampled: true,
            }))
        }
    }

    /// [`Quadratic`] that cannot be evaluated where `θ_0 > wall`.
    struct Walled(Quadratic, f64);

    impl Objective for Walled {
        type Fit = usize;
        fn n_rows(&self) -> usize {
            self.0.n
        }
        fn evaluate(&self, theta: &[f64], monitor: &Monitor) -> Result<Evaluation<usize>> {
            if theta[0] > self.1 {
                return Err(Error::InducingNotPositiveDefinite { m: 1, jitter: 0.0 });
            }
            self.0.evaluate(theta, monitor)
        }
    }

    #[test]
    fn the_start_is_the_candidate_of_the_highest_lml() {
        let monitor = Monitor::new();
        let lml = |l: &Vec<f64>| match l[0] {
            1.0 => Ok(-5.0),
            2.0 => Ok(-3.0),
            3.0 => Err(Error::invalid("kernel_variance", "left the range")),
            _ => Ok(-3.0),
        };
        let c = |v: &[f64]| v.iter().map(|&l| vec![l]).collect::<Vec<_>>();
        assert_eq!(
            best_start(&c(&[1.0, 2.0]), lml, "LML", 10, &monitor).unwrap(),
            1
        );
        // Ties keep the first (the given one); one that cannot be
        // evaluated is passed over, and the first is kept when none can.
        assert_eq!(
            best_start(&c(&[2.0, 4.0]), lml, "LML", 10, &monitor).unwrap(),
            0
        );
        assert_eq!(
            best_start(&c(&[3.0, 1.0]), lml, "LML", 10, &monitor).unwrap(),
            1
        );
        assert_eq!(best_start(&c(&[3.0]), lml, "LML", 10, &monitor).unwrap(), 0);
        assert_eq!(
            best_start(&[vec![2.0, 5.0]], lml, "LML", 10, &monitor).unwrap(),
            0
        );
        let messages = monitor.take_messages();
        assert!(
            messages.contains(&"start length scale 2.000000e0: LML = -3.000000 on 10 rows".into()),
            "{messages:?}"
        );
        assert!(
            messages.contains(
                &"start length scales [2.000000, 5.000000]: LML = -3.000000 on 10 rows".into()
            ),
            "{messages:?}"
        );
        assert!(
            messages
                .iter()
                .any(|m| m.starts_with("start length scale 3.000000e0: ")
                    && m.contains("left the range")),
            "{messages:?}"
        );
        let interrupted = |_: &Vec<f64>| Err(Error::Interrupted);
        assert!(matches!(
            best_start(&c(&[1.0, 2.0]), interrupted, "LML", 10, &monitor),
            Err(Error::Interrupted)
        ));
        // The data's scale is a candidate only when it differs from the
        // given length scales (one for every dimension).
        assert_eq!(
            length_scale_starts(&[1.5], Some(vec![1.5])),
            vec![vec![1.5]]
        );
        assert_eq!(length_scale_starts(&[1.5], None), vec![vec![1.5]]);
        assert_eq!(
            length_scale_starts(&[1.5, 2.0], Some(vec![1.5])),
            vec![vec![1.5, 2.0], vec![1.5, 1.5]]
        );
        // One per length scale, as given.
        assert_eq!(
            length_scale_starts(&[1.5, 2.0], Some(vec![1.5, 2.0])),
            vec![vec![1.5, 2.0]]
        );
        assert_eq!(
            length_scale_starts(&[1.5, 2.0], Some(vec![3.0, 2.0])),
            vec![vec![1.5, 2.0], vec![3.0, 2.0]]
        );
    }

    #[test]
    fn a_data_scale_start_is_taken_when_better_on_the_coarsest_rows() {
        // ln l, ln σ², ln σ_n² all free, the maximum at ln l = ln 7; 5,000
        // rows subsample to 1,250 and then 312, the coarsest level.
        let obj = Quadratic {
            c: vec![7f64.ln(), 0.0, 0.0],
            w: vec![1.0; 3],
            n: 5000,
            subsampled: true,
        };
        let params = LogParams {
            values: vec![1.0, 2.0, 0.5],
            free: vec![0, 1, 2],
        };
        let cfg = OptimizerConfig::default();
        let monitor = Monitor::new();
        let start = params.start();
        let moved = better_start(
            &obj,
            &params,
            &with_length_scales(&params, &[6.0]),
            &cfg,
            &monitor,
        )
        .unwrap();
        assert_eq!(moved, vec![6f64.ln(), start[1], start[2]]);
        let messages = monitor.take_messages();
        assert!(
            messages
                .iter()
                .any(|m| m.starts_with("start length scale 6.000000e0: LML = ")
                    && m.ends_with(" on 312 rows")),
            "{messages:?}"
        );
        // A worse data scale, the same one, or a fixed length scale: the
        // given start.
        assert_eq!(
            better_start(
                &obj,
                &params,
                &with_length_scales(&params, &[1e3]),
                &cfg,
                &monitor
            )
            .unwrap(),
            start
        );
        assert_eq!(
            better_start(
                &obj,
                &params,
                &with_length_scales(&params, &[1.0]),
                &cfg,
                &monitor
            )
            .unwrap(),
            start
        );
        let fixed = LogParams {
            free: vec![1, 2],
            ..params.clone()
        };
        assert_eq!(
            better_start(
                &obj,
                &fixed,
                &with_length_scales(&fixed, &[6.0]),
                &cfg,
                &monitor
            )
            .unwrap(),
            fixed.start()
        );
        // Without coarse levels, on all rows.
        let flat = Quadratic {
            subsampled: false,
            ..obj
        };
        better_start(
            &flat,
            &params,
            &with_length_scales(&params, &[6.0]),
            &cfg,
            &monitor,
        )
        .unwrap();
        assert!(monitor
            .take_messages()
            .iter()
            .any(|m| m.ends_with(" on 5000 rows")));
    }

    #[test]
    fn the_start_candidates_move_the_free_length_scales_and_variances() {
        // Two length scales, σ², σ_n²; the data: (3, 3), var(y) = 2.
        let data = DataScale {
            length_scale: vec![3.0],
            target_variance: 2.0,
        };
        let all = LogParams {
            values: vec![1.0, 1.5, 5.0, 0.5],
            free: vec![0, 1, 2, 3],
        };
        let d = data.values(&all).unwrap();
        assert_eq!(d, vec![3.0, 3.0, 2.0, 0.2]);
        assert_eq!(
            start_candidates(&all, &d),
            vec![
                vec![1.0, 1.5, 5.0, 0.5],
                vec![3.0, 3.0, 5.0, 0.5],
                vec![1.0, 1.5, 2.0, 0.2],
                vec![3.0, 3.0, 2.0, 0.2],
            ]
        );
        // Fixed entries stay as given; candidates equal to one before are
        // left out (the variances already at the data's).
        let some = LogParams {
            values: vec![1.0, 1.5, 2.0, 0.5],
            free: vec![0, 1, 2],
        };
        assert_eq!(
            start_candidates(&some, &d),
            vec![vec![1.0, 1.5, 2.0, 0.5], vec![3.0, 3.0, 2.0, 0.5]]
        );
        let at_data = LogParams {
            values: d.clone(),
            free: vec![0, 1, 2, 3],
        };
        assert_eq!(start_candidates(&at_data, &d), vec![d.clone()]);
        // The names show the variances only where the candidates differ.
        assert_eq!(
            start_names(&some, &start_candidates(&some, &d)),
            vec![
                "length scales [1.000000, 1.500000]".to_string(),
                "length scales [3.000000, 3.000000]".to_string(),
            ]
        );
        assert_eq!(
            start_names(&all, &start_candidates(&all, &d))[2],
            "length scales [1.000000, 1.500000], kernel variance 2.000000e0, \
             noise variance 2.000000e-1"
        );
        // One length scale per dimension, and refusals.
        let per = DataScale {
            length_scale: vec![3.0, 4.0],
            ..data.clone()
        };
        assert_eq!(per.values(&all).unwrap()[..2], [3.0, 4.0]);
        let three = DataScale {
            length_scale: vec![1.0; 3],
            ..data.clone()
        };
        assert!(three.values(&all).is_err());
        let nan = DataScale {
            target_variance: f64::NAN,
            ..data
        };
        assert!(nan.values(&all).is_err());
    }

    #[test]
    fn a_start_at_the_data_variances_is_taken_when_better() {
        // The maximum at ln σ² = ln 2, ln σ_n² = ln 0.2 (the data's
        // variances); the given variances are 1e6 times off.
        let obj = Quadratic {
            c: vec![0.0, 2f64.ln(), 0.2f64.ln()],
            w: vec![1.0; 3],
            n: 5000,
            subsampled: true,
        };
        let params = LogParams {
            values: vec![1.0, 2e6, 0.2e-6],
            free: vec![0, 1, 2],
        };
        let data = DataScale {
            length_scale: vec![1.0],
            target_variance: 2.0,
        }
        .values(&params)
        .unwrap();
        let monitor = Monitor::new();
        let start = better_start(&obj, &params, &data, &OptimizerConfig::default(), &monitor);
        let want = [0.0, 2f64.ln(), 0.2f64.ln()];
        assert_eq!(start.unwrap(), want);
        // A given start that cannot be evaluated is passed over.
        let walled = Walled(obj, -1.0);
        let params = LogParams {
            values: vec![1.0, 2.0, 0.2],
            free: vec![0, 1, 2],
        };
        let data = with_length_scales(&params, &[0.1]);
        let start = better_start(
            &walled,
            &params,
            &data,
            &OptimizerConfig::default(),
            &monitor,
        );
        assert_eq!(start.unwrap(), [0.1f64.ln(), 2f64.ln(), 0.2f64.ln()]);
    }

    /// The maximum `(3, −1)` lies beyond a region that cannot be evaluated
    /// (`θ_0 > 1.5`), which L-BFGS's first step enters: the run backs off
    /// and ends at the best point that can be evaluated, `(1.5, −1)` (it
    /// used to end at the start).
    #[test]
    fn points_that_cannot_be_evaluated_are_backed_off_from() {
        let obj = Walled(
            Quadratic {
                c: vec![3.0, -1.0],
                w: vec![1.0, 1.0],
                n: 100,
                subsampled: false,
            },
            1.5,
        );
        let cfg = OptimizerConfig {
            n_restarts: 0,
            ..Default::default()
        };
        let opt = maximize(&obj, &[0.0, 0.0], &cfg, &Monitor::new()).unwrap();
        assert!((opt.theta[0] - 1.5).abs() < 1e-6, "{:?}", opt.theta);
        assert!((opt.theta[1] + 1.0).abs() < 1e-6, "{:?}", opt.theta);
    }

    #[test]
    fn optimizer_settings_from_a_caller_are_checked() {
        // A run count that wraps (no run at all) and gradient tolerances
        // that are not numbers >= 0 are the caller's, refused by name
        // (they were internal errors, or NaN was taken).
        let bad = [
            (
                OptimizerConfig {
                    n_restarts: usize::MAX,
                    ..Default::default()
                },
                "n_restarts",
            ),
            (
                OptimizerConfig {
                    tol_grad: -1.0,
                    ..Default::default()
                },
                "tol_grad",
            ),
            (
                OptimizerConfig {
                    tol_grad: f64::NAN,
                    ..Default::default()
                },
                "tol_grad",
            ),
        ];
        for (cfg, name) in bad {
            let e = best_of_runs(
                &[0.0],
                &cfg,
                &Monitor::new(),
                |_| -> Result<RunOutcome<()>> { unreachable!("no run starts") },
            )
            .unwrap_err();
            assert!(e.to_string().contains(&format!("`{name}`")), "{e}");
        }
        assert!(OptimizerConfig::default().validate().is_ok());
    }

    #[test]
    fn best_of_runs_keeps_the_best_run_and_the_first_error() {
        let cfg = OptimizerConfig {
            n_restarts: 4,
            seed: 7,
            ..Default::default()
        };
        let outcome = |start: Vec<f64>, score: f64| RunOutcome {
            run: start,
            score,
            iters: 3,
            summary: format!("score {score}"),
        };
        // Scores 0, 1, 2, 2, 1 by run: the best is the first of the two 2s;
        // the restarts lie within a decade of the start.
        let monitor = Monitor::new();
        let mut starts = Vec::new();
        let scores = [0.0, 1.0, 2.0, 2.0, 1.0];
        let (best, iters) = best_of_runs(&[1.0, -2.0], &cfg, &monitor, |s| {
            starts.push(s.clone());
            Ok(outcome(s, scores[starts.len() - 1]))
        })
        .unwrap();
        assert_eq!(iters, 15);
        assert_eq!(starts[0], vec![1.0, -2.0]);
        assert_eq!(best, starts[2]);
        assert_ne!(starts[2], starts[3]);
        for s in &starts[1..] {
            assert!((s[0] - 1.0).abs() <= std::f64::consts::LN_10);
            assert!((s[1] + 2.0).abs() <= std::f64::consts::LN_10);
        }
        let messages = monitor.take_messages();
        assert!(
            messages.iter().any(|m| m == "run 3/5: score 2"),
            "{messages:?}"
        );
        // The same seed draws the same starts.
        let mut again = Vec::new();
        best_of_runs(&[1.0, -2.0], &cfg, &Monitor::new(), |s| {
            again.push(s.clone());
            Ok(outcome(s, 0.0))
        })
        .unwrap();
        assert_eq!(again, starts);
        // Failed runs are skipped; when all fail, the first error.
        let mut n = 0;
        let (best, iters) = best_of_runs(&[0.0], &cfg, &Monitor::new(), |s| {
            n += 1;
            if n % 2 == 1 {
                Err(Error::invalid("run", format!("{n}")))
            } else {
                Ok(outcome(s, n as f64))
            }
        })
        .unwrap();
        assert_eq!((best.len(), iters), (1, 6));
        // Every run failing with `make(run number)`: the error returned and
        // the runs tried.
        let failing = |make: &dyn Fn(usize) -> Error| {
            let mut n = 0;
            let out = best_of_runs(
                &[0.0],
                &cfg,
                &Monitor::new(),
                |_| -> Result<RunOutcome<()>> {
                    n += 1;
                    Err(make(n))
                },
            );
            (out.err().unwrap(), n)
        };
        let (err, n) = failing(&|n| Error::invalid("run", format!("failure {n}")));
        assert!(err.to_string().contains("failure 1") && n == 5, "{err}");
        // An interruption stops at once.
        let (err, n) = failing(&|_| Error::Interrupted);
        assert!(matches!(err, Error::Interrupted) && n == 1);
    }

    #[test]
    fn a_quadratic_is_maximized_with_and_without_coarse_levels() {
        for subsampled in [false, true] {
            let obj = Quadratic {
                c: vec![0.3, -1.2, 2.0],
                w: vec![1.0, 30.0, 0.2],
                n: 5000,
                subsampled,
            };
            let monitor = Monitor::new();
            let cfg = OptimizerConfig {
                n_restarts: 1,
                ..Default::default()
            };
            let opt = maximize(&obj, &[0.0, 0.0, 0.0], &cfg, &monitor).unwrap();
            for (t, c) in opt.theta.iter().zip(&obj.c) {
                assert!((t - c).abs() < 1e-5, "{:?}", opt.theta);
            }
            // The fit of the best evaluation is the one on all rows.
            assert_eq!(opt.fit, 5000);
            let messages = monitor.take_messages();
            // Coarse levels: 5000 -> 1250 -> 312 rows (312 < 1024 stops).
            let levels = if subsampled { 3 } else { 1 };
            // Per run: one message per level's evaluations, one per coarse
            // optimum and the run's summary.
            assert_eq!(messages.len(), 2 * 2 * levels, "{messages:?}");
        }
    }

    #[test]
    fn log_params_map_the_free_coordinates_and_refuse_the_range() {
        let p = LogParams {
            values: vec![0.5, 2.0, 0.1],
            free: vec![0, 2],
        };
        assert_eq!(p.n_length_scales(), 1);
        let t = p.start();
        assert_eq!(t, vec![0.5f64.ln(), 0.1f64.ln()]);
        let v = p.at(&[0.0, 1.0]).unwrap();
        assert_eq!(v, vec![1.0, 2.0, 1.0f64.exp()]);
        assert_eq!(p.select(&[1.0, 2.0, 3.0]), vec![1.0, 3.0]);
        // The range is e^±40 around each start: ln 0.5 ± 40 and ln 0.1 ± 40.
        assert!(p.at(&[0.5f64.ln() + 39.9, 0.1f64.ln() - 39.9]).is_ok());
        let e = p.at(&[0.5f64.ln() + 40.1, 0.0]).unwrap_err().to_string();
        assert!(e.contains("length_scale") && e.contains("5.0000e-1"), "{e}");
        let e = p.at(&[0.0, 0.1f64.ln() - 40.1]).unwrap_err().to_string();
        assert!(
            e.contains("noise_variance") && e.contains("1.0000e-1"),
            "{e}"
        );
        assert!(p.at(&[f64::NAN, 0.0]).is_err());
        assert!(p.at(&[0.0]).is_err());
    }

    #[test]
    fn init_resolves_defaults_and_names() {
        let x = ndarray::array![[0.0, 0.0], [1.0, 0.0], [3.0, 0.0]];
        let y = ndarray::array![1.0, 2.0, 3.0];
        let p = HyperInit::default()
            .resolve(x.view(), y.view(), true)
            .unwrap();
        let var = 2.0 / 3.0;
        assert_eq!(p.values, vec![2.0, var, 0.1 * var]);
        assert_eq!(p.free, vec![0, 1, 2]);
        let ard = HyperInit {
            ard: true,
            length_scale: Some(vec![0.5]),
            optimize: vec![Hyper::NoiseVariance],
            ..Default::default()
        };
        let p = ard.resolve(x.view(), y.view(), true).unwrap();
        assert_eq!(p.values[..2], [0.5, 0.5]);
        assert_eq!(p.free, vec![3]);
        // Fixed length scales may be one per dimension without `ard`; fitted
        // ones may not.
        let fixed = HyperInit {
            length_scale: Some(vec![0.5, 2.0]),
            optimize: vec![Hyper::KernelVariance, Hyper::NoiseVariance],
            ..Default::default()
        };
        let p = fixed.resolve(x.view(), y.view(), true).unwrap();
        assert_eq!(p.values[..2], [0.5, 2.0]);
        assert_eq!(p.free, vec![2, 3]);
        let fitted = HyperInit {
            optimize: vec![Hyper::LengthScale],
            ..fixed
        };
        let e = fitted
            .resolve(x.view(), y.view(), true)
            .unwrap_err()
            .to_string();
        assert!(e.contains("length_scale") && e.contains("ard=True"), "{e}");
        assert_eq!(
            Hyper::from_name("kernel_variance"),
            Ok(Hyper::KernelVariance)
        );
        let e = Hyper::from_name("lengthscale").unwrap_err().to_string();
        assert!(e.contains("optimize") && e.contains("length_scale"), "{e}");
    }

    #[test]
    fn the_data_scale_of_a_resolved_init_is_the_datas() {
        // Defaults taken from the resolved values, given values computed:
        // the same bits as DataScale::of either way.
        let (x, y) = data(50);
        for ard in [false, true] {
            for given in [false, true] {
                let init = HyperInit {
                    ard,
                    length_scale: given.then(|| vec![0.3]),
                    kernel_variance: given.then_some(40.0),
                    ..Default::default()
                };
                let params = init.resolve(x.view(), y.view(), true).unwrap();
                let got = init.data_scale(x.view(), y.view(), &params).unwrap();
                assert_eq!(got, DataScale::of(x.view(), y.view(), ard).unwrap());
            }
        }
    }

    #[test]
    fn hessian_preconditioner_inverts_the_curvature() {
        let (x, y) = data(240);
        // At the LML optimum, where the Hessian of −LML/N is positive definite.
        let cfg = ExactGpConfig {
            optimizer: OptimizerConfig {
                n_restarts: 0,
                ..Default::default()
            },
            ..Default::default()
        };
        let gp = fit_exact(
            x.view(),
            y.view(),
            &cfg,
            Parallelism::Rayon,
            &Monitor::default(),
        )
        .unwrap();
        let yc = y.mapv(|v| v - gp.y_mean);
        let values = vec![
            gp.kernel.length_scale[0],
            gp.kernel.variance,
            gp.noise_variance,
        ];
        let theta: Vec<f64> = values.iter().map(|v| v.ln()).collect();
        let free = vec![0, 1, 2];
        let monitor = Monitor::default();
        let params = LogParams { values, free };
        let lml = ExactLml::new(
            x.view(),
            yc.view(),
            crate::kernels::Kernel::Gaussian,
            params,
            Parallelism::Sequential,
        );
        let c = hessian_inverse_root(&lml, &theta, &monitor)
            .unwrap()
            .unwrap();
        // Cᵀ H C = I for the central-difference Hessian H (to the O(h)
        // error of the forward differences behind C).
        let obj = Tracked::new(&lml, None, &monitor);
        let h = 1e-5;
        let mut hess = Array2::<f64>::zeros((3, 3));
        for j in 0..3 {
            let mut tp = theta.clone();
            tp[j] += h;
            let mut tm = theta.clone();
            tm[j] -= h;
            let (gp, gm) = (obj.eval(&tp).unwrap().1, obj.eval(&tm).unwrap().1);
            for i in 0..3 {
                hess[(i, j)] = (gp[i] - gm[i]) / (2.0 * h);
            }
        }
        let id = c.t().dot(&hess).dot(&c);
        for i in 0..3 {
            for j in 0..3 {
                let want = if i == j { 1.0 } else { 0.0 };
                assert!((id[(i, j)] - want).abs() < 1e-3, "{id}");
            }
        }
    }

    #[test]
    fn the_exact_lml_alone_is_the_evaluations() {
        // Without the inverse, the same factor and so the same bits.
        let (x, y) = data(60);
        for free in [vec![0, 1, 2], vec![1]] {
            let params = LogParams {
                values: vec![0.7, 1.3, 0.05],
                free,
            };
            let theta = params.start();
            let obj = ExactLml::new(
                x.view(),
                y.view(),
                crate::kernels::Kernel::Matern32,
                params,
                Parallelism::Rayon,
            );
            let monitor = Monitor::default();
            let e = obj.evaluate(&theta, &monitor).unwrap();
            let v = obj.value(&theta, &monitor).unwrap();
            assert_eq!(v.to_bits(), e.value.to_bits());
        }
    }

    #[test]
    fn median_distance() {
        let x = ndarray::array![[0.0], [1.0], [3.0]];
        // Distances 1, 3, 2: the median is 2.
        assert_eq!(median_pairwise_distance(x.view()), 2.0);
        assert_eq!(
            median_pairwise_distance(ndarray::array![[1.0], [1.0]].view()),
            1.0
        );
        // Inputs whose squared distances overflow or underflow float64 get
        // the median of their units, exactly (a power of two apart); so do
        // the per-column starts.
        for c in [2f64.powi(600), 2f64.powi(-600)] {
            let big = x.mapv(|v| v * c);
            assert_eq!(median_pairwise_distance(big.view()), 2.0 * c);
            let two = ndarray::array![[0.0, 1.0], [1.0, 5.0], [3.0, 2.0]];
            let got = per_dimension_length_scales(two.mapv(|v| v * c).view());
            let want = per_dimension_length_scales(two.view());
            assert_eq!(got, want.iter().map(|l| l * c).collect::<Vec<_>>());
        }
        // A constant column far from the origin changes no distance: the
        // same bits as without it (it used to push the others' squared
        // differences below the float range, and the start fell back to 1).
        let two = ndarray::array![[0.0, 1.0], [1.0, 5.0], [3.0, 2.0]];
        for c in [1e200, -1e300, f64::MAX] {
            let with = ndarray::concatenate![
                ndarray::Axis(1),
                two.view(),
                ndarray::Array2::from_elem((3, 1), c)
            ];
            assert_eq!(
                median_pairwise_distance(with.view()),
                median_pairwise_distance(two.view())
            );
            let starts = per_dimension_length_scales(with.view());
            assert_eq!(&starts[..2], &per_dimension_length_scales(two.view())[..]);
        }
    }

    #[test]
    fn per_dimension_starts_follow_the_units_of_every_column() {
        // Columns of standard deviations 2 and 1 (and a constant one, taken
        // as spread 1): divided by them, the rows (0,0), (1,1), (0,2) have
        // distances √2, 2, √2 (median √2), so the starts are √2 times 2, 1
        // and 1.
        let x = ndarray::array![[0.0, 0.0, 5.0], [2.0, 1.0, 5.0], [0.0, 2.0, 5.0]];
        let sd = |c: [f64; 3]| {
            let m = c.iter().sum::<f64>() / 3.0;
            (c.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / 3.0).sqrt()
        };
        let (s0, s1) = (sd([0.0, 2.0, 0.0]), sd([0.0, 1.0, 2.0]));
        let scaled = ndarray::array![
            [0.0, 0.0, 5.0],
            [2.0 / s0, 1.0 / s1, 5.0],
            [0.0, 2.0 / s1, 5.0]
        ];
        let m = median_pairwise_distance(scaled.view());
        let got = per_dimension_length_scales(x.view());
        let want = [m * s0, m * s1, m];
        for (g, w) in got.iter().zip(want) {
            assert!((g - w).abs() <= 1e-15 * w, "{got:?} vs {want:?}");
        }
        // A column in other units starts on its own scale; the others as
        // before.
        let mut y = x.clone();
        y.column_mut(0).mapv_inplace(|v| v * 1e3);
        let moved = per_dimension_length_scales(y.view());
        assert!((moved[0] / got[0] / 1e3 - 1.0).abs() < 1e-14, "{moved:?}");
        assert_eq!(&moved[1..], &got[1..]);
        // Columns of one spread: every start is the median pairwise
        // distance.
        let z = ndarray::array![[0.0, 1.0], [1.0, 0.0], [2.0, 2.0], [3.0, 3.0]];
        for l in per_dimension_length_scales(z.view()) {
            assert!((l - median_pairwise_distance(z.view())).abs() < 1e-14 * l);
        }
    }
}
