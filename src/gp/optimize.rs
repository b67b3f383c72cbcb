//! Hyperparameter fitting of the exact GP (ALGORITHMS.md 7.1): maximize the
//! log marginal likelihood over the log parameters with L-BFGS (argmin's
//! `LBFGS` with the Moré–Thuente line search) from the initialization of
//! 7.1 and `n_restarts` random starts; the best optimum wins.
//!
//! Coarse to fine: from [`COARSE_MIN_ROWS`] rows on, a run first fits every
//! fourth row (recursively) and continues on all rows from that optimum in
//! variables preconditioned by the subsample's Hessian (see
//! `run_coarse_to_fine`); the fitted model keeps the factor of its best
//! evaluation (no refit).
//!
//! The objective handed to L-BFGS is `−LML / N` (the same optimum; the
//! scaling keeps the first, unscaled steepest-descent step of L-BFGS short
//! in log space). Every evaluation computes the value and the gradient
//! together (one Cholesky) and caches them for the line search. The best
//! point ever evaluated is kept, so a run that stops on a line-search
//! failure near the optimum still contributes its best point.

use std::sync::Mutex;

use argmin::core::{CostFunction, Executor, Gradient, State, TerminationReason};
use argmin::solver::linesearch::MoreThuenteLineSearch;
use argmin::solver::quasinewton::LBFGS;
use ndarray::{Array1, Array2, ArrayView1, ArrayView2, Axis};
use rand::Rng as _;

use super::check_positive;
use super::exact::{
    check_exact_size, check_training_data, lml_and_factor, ExactGp, GaussianKernel, Workspace,
};
use crate::error::{Error, Result};
use crate::linalg::Cholesky;
use crate::progress::Monitor;
use crate::threads::Parallelism;

/// A hyperparameter of the exact GP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hyper {
    /// The length scale(s) `l`.
    LengthScale,
    /// The kernel variance `σ²`.
    KernelVariance,
    /// The noise variance `σ_n²`.
    NoiseVariance,
}

/// What [`fit_exact`] fits and where it starts.
#[derive(Clone, Debug)]
pub struct ExactGpConfig {
    /// Fixed or initial length scale(s): one value, or one per dimension
    /// with `ard`. `None`: the median pairwise distance (7.1).
    pub length_scale: Option<Vec<f64>>,
    /// Fixed or initial kernel variance. `None`: `var(y)`
    /// ([`super::target_variance_scale`]: 1 when the targets are all equal).
    pub kernel_variance: Option<f64>,
    /// Fixed or initial noise variance. `None`:
    /// [`super::initial_noise_variance`], `0.1 var(y)`.
    pub noise_variance: Option<f64>,
    /// One length scale per input dimension.
    pub ard: bool,
    /// The hyperparameters that are optimized; the others stay fixed.
    pub optimize: Vec<Hyper>,
    /// Random restarts after the run from the initialization.
    pub n_restarts: usize,
    /// Seed of the restart draws.
    pub seed: u64,
    /// Maximum L-BFGS iterations per run.
    pub max_iter: u64,
    /// Subtract the training-target mean (ALGORITHMS.md 7).
    pub center: bool,
    /// From this many training rows on, every run first fits a strided
    /// quarter of the rows (recursively) and starts from that optimum with
    /// its Hessian as preconditioner (see `run_coarse_to_fine`);
    /// `usize::MAX` fits on all rows directly.
    pub coarse_min_rows: usize,
    /// Bytes the `N × N` matrices may take ([`check_exact_size`]); `None`
    /// does not check.
    pub memory_budget: Option<u64>,
}

impl Default for ExactGpConfig {
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
            n_restarts: 2,
            seed: 0,
            max_iter: 500,
            center: true,
            coarse_min_rows: COARSE_MIN_ROWS,
            memory_budget: None,
        }
    }
}

/// Rows used for the median pairwise distance (an evenly strided subsample).
const MEDIAN_ROWS: usize = 500;

/// The median pairwise Euclidean distance of (a strided subsample of at
/// most 500 rows of) `x`; 1 when all those rows coincide.
pub fn median_pairwise_distance(x: ArrayView2<'_, f64>) -> f64 {
    let n = x.nrows();
    let step = n.div_ceil(MEDIAN_ROWS).max(1);
    let rows: Vec<_> = (0..n).step_by(step).map(|i| x.row(i)).collect();
    let mut d = Vec::with_capacity(rows.len() * rows.len().saturating_sub(1) / 2);
    for i in 0..rows.len() {
        for j in 0..i {
            d.push(
                rows[i]
                    .iter()
                    .zip(rows[j].iter())
                    .map(|(a, b)| (a - b) * (a - b))
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
        *m
    } else {
        1.0
    }
}

/// One cached evaluation: `(point, cost, gradient)`.
type Evaluation = (Vec<f64>, f64, Vec<f64>);

struct Objective<'a> {
    x: ArrayView2<'a, f64>,
    y: ArrayView1<'a, f64>,
    /// The hyperparameters `(l.., σ², σ_n²)`; the fixed ones are used as
    /// given (no `exp(ln v)` rounding), the free ones replaced by `exp(θ)`.
    values: Vec<f64>,
    /// Indices of the free entries of `values`.
    free: Vec<usize>,
    /// The optimizer's variables `p` map to the free log parameters as
    /// `origin + C p` (`C` row-major, `free × free`; `None`: `p` itself).
    /// With `C Cᵀ ≈ H^{−1}`, L-BFGS's first step is a Newton step.
    precond: Option<(Vec<f64>, Array2<f64>)>,
    par: Parallelism,
    /// Checked before every evaluation that is not cached.
    monitor: &'a Monitor,
    /// The last [`CACHE_LEN`] evaluations `(point, cost, gradient)`.
    cache: Mutex<std::collections::VecDeque<Evaluation>>,
    /// Number of LML evaluations (each one Cholesky and one inverse).
    evals: std::sync::atomic::AtomicU64,
    /// The best point of the current L-BFGS segment `(cost, p)`.
    best: Mutex<Option<(f64, Vec<f64>)>>,
    /// The best evaluation ever, with its factor (see [`BestFit`]).
    best_fit: Mutex<Option<BestFit>>,
    /// The `N × N` buffers every evaluation reuses (see [`Workspace`]).
    workspace: Mutex<Workspace>,
}

/// The best evaluation of an [`Objective`] with what a fitted [`ExactGp`]
/// keeps (the factor of `K_y` and `α`), so the fit needs no final refit.
struct BestFit {
    cost: f64,
    /// The optimizer's variables.
    p: Vec<f64>,
    lml: f64,
    chol: Cholesky,
    alpha: Vec<f64>,
}

/// Evaluations remembered for the line search's repeated requests.
const CACHE_LEN: usize = 8;

/// Log parameters beyond this magnitude are refused (`e^±40` spans any
/// sensible scale).
const MAX_ABS_LOG: f64 = 40.0;

impl<'a> Objective<'a> {
    fn new(
        x: ArrayView2<'a, f64>,
        y: ArrayView1<'a, f64>,
        values: Vec<f64>,
        free: Vec<usize>,
        precond: Option<(Vec<f64>, Array2<f64>)>,
        par: Parallelism,
        monitor: &'a Monitor,
    ) -> Self {
        Self {
            x,
            y,
            values,
            free,
            precond,
            par,
            monitor,
            cache: Mutex::new(std::collections::VecDeque::with_capacity(CACHE_LEN)),
            evals: std::sync::atomic::AtomicU64::new(0),
            best: Mutex::new(None),
            best_fit: Mutex::new(None),
            workspace: Mutex::new(Workspace::default()),
        }
    }

    /// The free log parameters at the optimizer's variables `p`.
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

    /// All hyperparameters `(l.., σ², σ_n²)` with the free ones `exp(θ)`.
    fn params(&self, theta: &[f64]) -> Vec<f64> {
        let mut v = self.values.clone();
        for (&i, &t) in self.free.iter().zip(theta) {
            v[i] = t.exp();
        }
        v
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
        if theta
            .iter()
            .any(|v| !v.is_finite() || v.abs() > MAX_ABS_LOG)
        {
            return Err(Error::invalid(
                "hyperparameters",
                "the optimizer left the range e^-40..e^40",
            ));
        }
        let v = self.params(&theta);
        let k = v.len() - 2;
        let kernel = GaussianKernel {
            length_scale: v[..k].to_vec(),
            variance: v[k],
        };
        let (e, chol, alpha) = {
            let mut ws = self.workspace.lock().unwrap_or_else(|e| e.into_inner());
            lml_and_factor(
                self.x,
                self.y,
                &kernel,
                v[k + 1],
                true,
                self.par,
                self.monitor,
                &mut ws,
            )?
        };
        let n = self.x.nrows() as f64;
        let cost = -e.lml / n;
        let mut grad: Vec<f64> = self.free.iter().map(|&i| -e.grad[i] / n).collect();
        if let Some((_, c)) = &self.precond {
            // The chain rule through θ = origin + C p: ∇_p = Cᵀ ∇_θ.
            grad = c.t().dot(&Array1::from(grad)).to_vec();
        }
        self.evals
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        {
            let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
            if cache.len() == CACHE_LEN {
                cache.pop_front();
            }
            cache.push_back((p.to_vec(), cost, grad.clone()));
        }
        let mut best = self.best.lock().unwrap_or_else(|e| e.into_inner());
        if best.as_ref().is_none_or(|(c, _)| cost < *c) {
            *best = Some((cost, p.to_vec()));
        }
        let mut best_fit = self.best_fit.lock().unwrap_or_else(|e| e.into_inner());
        if best_fit.as_ref().is_none_or(|b| cost < b.cost) {
            *best_fit = Some(BestFit {
                cost,
                p: p.to_vec(),
                lml: e.lml,
                chol,
                alpha,
            });
        }
        Ok((cost, grad))
    }
}

struct Problem<'a, 'b>(&'b Objective<'a>);

impl CostFunction for Problem<'_, '_> {
    type Param = Vec<f64>;
    type Output = f64;
    fn cost(&self, p: &Vec<f64>) -> std::result::Result<f64, argmin::core::Error> {
        Ok(self.0.eval(p)?.0)
    }
}

impl Gradient for Problem<'_, '_> {
    type Param = Vec<f64>;
    type Gradient = Vec<f64>;
    fn gradient(&self, p: &Vec<f64>) -> std::result::Result<Vec<f64>, argmin::core::Error> {
        Ok(self.0.eval(p)?.1)
    }
}

/// L-BFGS stops when the gradient norm of `−LML/N` falls below this, or
/// when an iteration changes `−LML/N` by less than [`TOL_COST`]. Both sit
/// above the rounding noise of the LML of an ill-conditioned `K_y` (about
/// 1e−11 relative), where further iterations only burn evaluations.
const TOL_GRAD: f64 = 1e-7;

/// See [`TOL_GRAD`].
const TOL_COST: f64 = 1e-12;

/// At most this many L-BFGS segments per run (see [`run_lbfgs`]).
const MAX_SEGMENTS: usize = 20;

/// Runs L-BFGS from `start`; returns the best point evaluated (objective
/// `−LML/N`, free log parameters) and the iteration count, or the error of
/// the first evaluation when not even the start could be evaluated.
///
/// argmin's L-BFGS ends a run when its line search fails (e.g. on a
/// non-descent direction from stale curvature pairs), which can happen far
/// from a stationary point. Only then is the run continued from its best
/// point with fresh memory; it ends when a segment converges (gradient below
/// [`TOL_GRAD`] or a cost change below [`TOL_COST`]), brings no decrease, or
/// `max_iter` iterations are spent.
fn run_lbfgs(obj: &Objective<'_>, start: Vec<f64>, max_iter: u64) -> Result<(f64, Vec<f64>, u64)> {
    let (mut best_c, mut g) = obj.eval(&start)?;
    let mut best_p = start;
    let mut total = 0u64;
    for _ in 0..MAX_SEGMENTS {
        if total >= max_iter || g.iter().map(|v| v * v).sum::<f64>().sqrt() <= TOL_GRAD {
            break;
        }
        *obj.best.lock().unwrap_or_else(|e| e.into_inner()) = None;
        let solver = LBFGS::new(MoreThuenteLineSearch::new(), 10)
            .with_tolerance_grad(TOL_GRAD)
            .and_then(|s| s.with_tolerance_cost(TOL_COST))
            .map_err(|e| Error::Internal(e.to_string()))?;
        let p0 = best_p.clone();
        let r = Executor::new(Problem(obj), solver)
            .configure(|s| s.param(p0).max_iters(max_iter - total))
            .run();
        // Only a line-search failure (`SolverExit`) or an evaluation error
        // warrants a fresh segment; a converged run or the iteration limit
        // ends the run (restarting a converged run only re-spends
        // evaluations on a steepest-descent probe of the optimum).
        let resume = match &r {
            Ok(r) => matches!(
                r.state().get_termination_reason(),
                Some(TerminationReason::SolverExit(_))
            ),
            Err(_) => true,
        };
        total += r.map(|r| r.state().get_iter()).unwrap_or(0).max(1);
        // A cancel ends the segment with an evaluation error; end the run.
        obj.monitor.check()?;
        let seg = obj.best.lock().unwrap_or_else(|e| e.into_inner()).take();
        match seg {
            Some((c, p)) if c < best_c - TOL_COST * best_c.abs().max(1.0) => {
                best_c = c;
                best_p = p;
                if !resume {
                    break;
                }
                g = obj.eval(&best_p)?.1;
            }
            _ => break,
        }
    }
    Ok((best_c, best_p, total))
}

/// Default of [`ExactGpConfig::coarse_min_rows`]: below 1,024 rows a fit is
/// cheap and the quarter-size subsample (< 256 rows) too small to say much.
pub const COARSE_MIN_ROWS: usize = 1024;

/// Step of the forward differences of the subsample's gradient that give
/// its Hessian (in log parameters; the gradient is exact, so the error is
/// `O(h)` times the third derivative, ample for a preconditioner).
const HESSIAN_STEP: f64 = 1e-4;

/// Eigenvalues of that Hessian are raised to at least this fraction of the
/// largest (flat or, off a clean optimum, negative directions would
/// otherwise get unbounded steps).
const HESSIAN_FLOOR: f64 = 1e-4;

/// What every run of one fit shares.
struct RunSpec<'a> {
    /// The hyperparameters `(l.., σ², σ_n²)` (the fixed ones' values).
    values: &'a [f64],
    free: &'a [usize],
    max_iter: u64,
    coarse_min_rows: usize,
    par: Parallelism,
    /// Receives one message per level and run, and the cancellation.
    monitor: &'a Monitor,
}

/// The result of one optimizer run.
struct Run {
    /// `−LML/N` at `theta`.
    cost: f64,
    /// The free log parameters.
    theta: Vec<f64>,
    /// L-BFGS iterations, over all levels.
    iters: u64,
    /// The LML, factor and `α` at `theta` (all rows).
    fit: BestFit,
}

/// One optimizer run from `start` (free log parameters), coarse to fine.
///
/// With at least `coarse_min_rows` rows it first runs (recursively) on the
/// strided subsample of every fourth row (`1/64` of the cost per
/// evaluation), takes the Hessian `H` of that subsample's `−LML/m` at its
/// optimum (forward differences of the analytic gradient, one subsample
/// evaluation per free parameter) and runs L-BFGS on all rows from that
/// optimum in the variables `p` with `θ = θ_sub + H^{−1/2} p`: the
/// per-row LML of a subsample has nearly the same optimum and curvature as
/// the full one, so L-BFGS's first step is close to a Newton step and a few
/// full-size evaluations converge. If the subsample fails (e.g. its
/// Cholesky), the run starts from `start` on all rows as before.
fn run_coarse_to_fine<'a>(
    spec: &RunSpec<'_>,
    x: ArrayView2<'a, f64>,
    y: ArrayView1<'a, f64>,
    start: Vec<f64>,
) -> Result<Run> {
    let n = x.nrows();
    let mut iters = 0;
    let mut precond = None;
    if n >= spec.coarse_min_rows.max(4) {
        let rows: Vec<usize> = (0..n / 4).map(|i| 4 * i).collect();
        let xs = x.select(Axis(0), &rows);
        let ys = y.select(Axis(0), &rows);
        let coarse =
            run_coarse_to_fine(spec, xs.view(), ys.view(), start.clone()).and_then(|run| {
                let c = hessian_inverse_root(spec, xs.view(), ys.view(), &run.theta)?;
                Ok((run, c))
            });
        match coarse {
            Ok((run, c)) => {
                spec.monitor.message(format!(
                    "  {} rows: LML = {:.6} after {} L-BFGS iterations; \
                     {} rows: {} LML evaluations for its Hessian",
                    rows.len(),
                    -run.cost * rows.len() as f64,
                    run.iters,
                    rows.len(),
                    spec.free.len() + 1
                ));
                iters += run.iters;
                precond = c.map(|c| (run.theta, c));
            }
            Err(Error::Interrupted) => return Err(Error::Interrupted),
            Err(e) => {
                spec.monitor.message(format!(
                    "  {} rows failed ({e}); starting on all rows",
                    rows.len()
                ));
            }
        }
    }
    let p0 = match &precond {
        Some((origin, _)) => vec![0.0; origin.len()],
        None => start,
    };
    let obj = Objective::new(
        x.view(),
        y.view(),
        spec.values.to_vec(),
        spec.free.to_vec(),
        precond,
        spec.par,
        spec.monitor,
    );
    let (_, _, it) = run_lbfgs(&obj, p0, spec.max_iter)?;
    spec.monitor.message(format!(
        "  {n} rows: {} LML evaluations",
        obj.evals.load(std::sync::atomic::Ordering::Relaxed)
    ));
    // The best point evaluated (what run_lbfgs returns, or an evaluation
    // below its tolerance-sized improvement threshold), with its factor.
    let fit = obj
        .best_fit
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take()
        .ok_or_else(|| Error::Internal("an L-BFGS run without evaluations".into()))?;
    Ok(Run {
        cost: fit.cost,
        theta: obj.theta(&fit.p),
        iters: iters + it,
        fit,
    })
}

/// `C = V Λ^{−1/2}` for the Hessian `H = V Λ Vᵀ` of `−LML/m` on `(x, y)` at
/// the free log parameters `theta` (so `C Cᵀ = H^{−1}`), eigenvalues floored
/// at [`HESSIAN_FLOOR`] times the largest; `None` when `H` has no positive
/// curvature at all.
fn hessian_inverse_root<'a>(
    spec: &RunSpec<'_>,
    x: ArrayView2<'a, f64>,
    y: ArrayView1<'a, f64>,
    theta: &[f64],
) -> Result<Option<Array2<f64>>> {
    let obj = Objective::new(
        x.view(),
        y.view(),
        spec.values.to_vec(),
        spec.free.to_vec(),
        None,
        spec.par,
        spec.monitor,
    );
    let k = theta.len();
    let g0 = obj.eval(theta)?.1;
    let mut h = faer::Mat::<f64>::zeros(k, k);
    for j in 0..k {
        let mut t = theta.to_vec();
        t[j] += HESSIAN_STEP;
        let g = obj.eval(&t)?.1;
        for i in 0..k {
            h[(i, j)] = (g[i] - g0[i]) / HESSIAN_STEP;
        }
    }
    let h = faer::Mat::<f64>::from_fn(k, k, |i, j| 0.5 * (h[(i, j)] + h[(j, i)]));
    let Ok(evd) = h.self_adjoint_eigen(faer::Side::Lower) else {
        return Ok(None);
    };
    let lam = evd.S().column_vector();
    let top = (0..k).map(|i| lam[i]).fold(f64::NEG_INFINITY, f64::max);
    if !(top.is_finite() && top > 0.0) {
        return Ok(None);
    }
    let u = evd.U();
    Ok(Some(Array2::from_shape_fn((k, k), |(i, j)| {
        u[(i, j)] / lam[j].abs().max(HESSIAN_FLOOR * top).sqrt()
    })))
}

/// Fits the exact GP: initialization of ALGORITHMS.md 7.1, L-BFGS on the
/// log marginal likelihood over the hyperparameters in `cfg.optimize`
/// (from the initialization, then `cfg.n_restarts` starts drawn uniformly
/// within a factor 10 of it in each free parameter), the best run kept.
///
/// `monitor` gets the stage "optimizer runs" (one unit per run) and one
/// message per run and subsample level; every LML evaluation checks it
/// (before it starts and between its factorization, inverse and gradient).
pub fn fit_exact(
    x: ArrayView2<'_, f64>,
    y: ArrayView1<'_, f64>,
    cfg: &ExactGpConfig,
    par: Parallelism,
    monitor: &Monitor,
) -> Result<ExactGp> {
    check_training_data(x, y)?;
    if let Some(bytes) = cfg.memory_budget {
        check_exact_size(x.nrows(), bytes)?;
    }
    let (n, d) = x.dim();
    let y_mean = if cfg.center { y.sum() / n as f64 } else { 0.0 };
    let yc: Array1<f64> = y.mapv(|v| v - y_mean);
    let var_y = super::target_variance_scale(y);
    let n_ls = if cfg.ard { d } else { 1 };
    let ls = match &cfg.length_scale {
        None => vec![median_pairwise_distance(x); n_ls],
        Some(v) if v.len() == n_ls => v.clone(),
        Some(v) if v.len() == 1 => vec![v[0]; n_ls],
        Some(v) => {
            return Err(Error::invalid(
                "length_scale",
                format!(
                    "needs 1 value{}, got {}",
                    if cfg.ard {
                        format!(" or one per input dimension ({d})")
                    } else {
                        " (set ard=True for one per dimension)".into()
                    },
                    v.len()
                ),
            ))
        }
    };
    for &l in &ls {
        check_positive("length_scale", l)?;
    }
    let kv = cfg.kernel_variance.unwrap_or(var_y);
    let nv = cfg
        .noise_variance
        .unwrap_or_else(|| super::initial_noise_variance(y));
    check_positive("kernel_variance", kv)?;
    check_positive("noise_variance", nv)?;
    // Fixed parameters keep their exact values (no exp(ln v) rounding).
    let mut values: Vec<f64> = ls;
    values.push(kv);
    values.push(nv);
    let mut free = Vec::new();
    if cfg.optimize.contains(&Hyper::LengthScale) {
        free.extend(0..n_ls);
    }
    if cfg.optimize.contains(&Hyper::KernelVariance) {
        free.push(n_ls);
    }
    if cfg.optimize.contains(&Hyper::NoiseVariance) {
        free.push(n_ls + 1);
    }
    let k = values.len() - 2;
    if free.is_empty() {
        let kernel = GaussianKernel {
            length_scale: values[..k].to_vec(),
            variance: values[k],
        };
        monitor.check()?;
        return ExactGp::fit(x, y, kernel, values[k + 1], cfg.center, par);
    }
    let start0: Vec<f64> = free.iter().map(|&i| values[i].ln()).collect();
    let mut rng = crate::rng::seeded(cfg.seed);
    let mut best: Option<Run> = None;
    let mut first_err = None;
    let mut n_iter = 0u64;
    let spec = RunSpec {
        values: &values,
        free: &free,
        max_iter: cfg.max_iter,
        coarse_min_rows: cfg.coarse_min_rows,
        par,
        monitor,
    };
    let runs = cfg.n_restarts + 1;
    monitor.stage("optimizer runs", runs as u64);
    for r in 0..runs {
        let start: Vec<f64> = if r == 0 {
            start0.clone()
        } else {
            start0
                .iter()
                .map(|v| v + std::f64::consts::LN_10 * rng.random_range(-1.0..=1.0))
                .collect()
        };
        match run_coarse_to_fine(&spec, x.view(), yc.view(), start) {
            Ok(run) => {
                n_iter += run.iters;
                monitor.message(format!(
                    "run {}/{runs}: LML = {:.6} after {} L-BFGS iterations",
                    r + 1,
                    run.fit.lml,
                    run.iters,
                ));
                // Only the best run's factor is kept (bounds the memory).
                if best.as_ref().is_none_or(|b| run.cost < b.cost) {
                    best = Some(run);
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
    let Some(run) = best else {
        return Err(first_err.unwrap_or_else(|| Error::Internal("no optimizer run".into())));
    };
    for (&i, t) in free.iter().zip(&run.theta) {
        values[i] = t.exp();
    }
    // The best evaluation's own factor: the same values, targets and
    // formulas as ExactGp::fit, so no refit is needed.
    Ok(ExactGp {
        x_train: x.to_owned(),
        kernel: GaussianKernel {
            length_scale: values[..k].to_vec(),
            variance: values[k],
        },
        noise_variance: values[k + 1],
        y_mean,
        alpha: Array1::from(run.fit.alpha),
        chol: run.fit.chol,
        lml: run.fit.lml,
        n_iter,
    })
}

#[cfg(test)]
mod tests {
    use super::super::exact::log_marginal_likelihood;
    use super::*;

    /// `n` rows of a smooth function of 2 inputs in `[-2, 2)` with noise
    /// (deterministic: the inputs are a scrambled grid, the noise a residue
    /// pattern).
    fn data(n: usize) -> (Array2<f64>, Array1<f64>) {
        let x = Array2::from_shape_fn((n, 2), |(i, j)| {
            ((i * 37 + j * 101) % (n - 1)) as f64 * 4.0 / n as f64 - 2.0
        });
        let y = x
            .rows()
            .into_iter()
            .enumerate()
            .map(|(i, r)| {
                (1.3 * r[0]).sin() * (0.7 * r[1]).cos() + 0.1 * (((i * 13) % 11) as f64 - 5.0) / 5.0
            })
            .collect();
        (x, y)
    }

    #[test]
    fn optimum_has_zero_gradient_and_beats_restarts() {
        let (x, y) = data(40);
        for ard in [false, true] {
            let cfg = ExactGpConfig {
                ard,
                n_restarts: 2,
                seed: 3,
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
            let e = log_marginal_likelihood(
                x.view(),
                yc.view(),
                &gp.kernel,
                gp.noise_variance,
                true,
                Parallelism::Rayon,
            )
            .unwrap();
            assert!((e.lml - gp.lml).abs() < 1e-9);
            let gnorm = e.grad.iter().map(|g| g * g).sum::<f64>().sqrt();
            assert!(
                gnorm < 1e-4 * x.nrows() as f64,
                "ard {ard}: |grad| = {gnorm}"
            );
            assert_eq!(gp.kernel.length_scale.len(), if ard { 2 } else { 1 });
        }
    }

    #[test]
    fn coarse_to_fine_reaches_the_direct_optimum() {
        let (x, y) = data(240);
        for ard in [false, true] {
            let direct = ExactGpConfig {
                ard,
                n_restarts: 0,
                coarse_min_rows: usize::MAX,
                ..Default::default()
            };
            // 240 -> 60 rows (60 < 64 stops the recursion): one coarse level.
            let coarse = ExactGpConfig {
                coarse_min_rows: 64,
                ..direct.clone()
            };
            let a = fit_exact(
                x.view(),
                y.view(),
                &direct,
                Parallelism::Rayon,
                &Monitor::default(),
            )
            .unwrap();
            let b = fit_exact(
                x.view(),
                y.view(),
                &coarse,
                Parallelism::Rayon,
                &Monitor::default(),
            )
            .unwrap();
            // The same optimum: LMLs agree to the optimizer's tolerance, and
            // the coarse-to-fine one is a stationary point of the full LML.
            assert!(
                (a.lml - b.lml).abs() < 1e-8 * a.lml.abs(),
                "ard {ard}: {} vs {}",
                a.lml,
                b.lml
            );
            let yc = y.mapv(|v| v - b.y_mean);
            let e = log_marginal_likelihood(
                x.view(),
                yc.view(),
                &b.kernel,
                b.noise_variance,
                true,
                Parallelism::Rayon,
            )
            .unwrap();
            let gnorm = e.grad.iter().map(|g| g * g).sum::<f64>().sqrt();
            assert!(
                gnorm < 1e-4 * x.nrows() as f64,
                "ard {ard}: |grad| = {gnorm}"
            );
        }
    }

    #[test]
    fn kept_factor_equals_a_refit() {
        // The fit keeps its best evaluation's factor instead of refitting:
        // it must be the refit's, bit for bit, fixed parameters included.
        let (x, y) = data(240);
        for (ard, optimize) in [
            (false, ExactGpConfig::default().optimize),
            (true, vec![Hyper::LengthScale, Hyper::NoiseVariance]),
        ] {
            let cfg = ExactGpConfig {
                ard,
                optimize,
                kernel_variance: Some(0.7),
                n_restarts: 1,
                coarse_min_rows: 64,
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
            let refit = ExactGp::fit(
                x.view(),
                y.view(),
                gp.kernel.clone(),
                gp.noise_variance,
                true,
                Parallelism::Rayon,
            )
            .unwrap();
            assert_eq!(gp.lml, refit.lml);
            assert_eq!(gp.alpha, refit.alpha);
            assert_eq!(gp.chol.l_array(), refit.chol.l_array());
            assert_eq!(gp.y_mean, refit.y_mean);
            if !ard {
                assert_ne!(gp.kernel.variance, 0.7);
            } else {
                assert_eq!(gp.kernel.variance, 0.7);
            }
        }
    }

    #[test]
    fn hessian_preconditioner_inverts_the_curvature() {
        let (x, y) = data(240);
        // At the LML optimum, where the Hessian of −LML/N is positive definite.
        let cfg = ExactGpConfig {
            n_restarts: 0,
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
        let spec = RunSpec {
            values: &values,
            free: &free,
            max_iter: 100,
            coarse_min_rows: usize::MAX,
            par: Parallelism::Sequential,
            monitor: &monitor,
        };
        let c = hessian_inverse_root(&spec, x.view(), yc.view(), &theta)
            .unwrap()
            .unwrap();
        // Cᵀ H C = I for the central-difference Hessian H (to the O(h)
        // error of the forward differences behind C).
        let obj = Objective::new(
            x.view(),
            yc.view(),
            values.clone(),
            free.clone(),
            None,
            Parallelism::Sequential,
            &monitor,
        );
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
    fn fixed_parameters_stay_fixed() {
        let (x, y) = data(40);
        let cfg = ExactGpConfig {
            noise_variance: Some(0.05),
            kernel_variance: Some(2.0),
            optimize: vec![Hyper::LengthScale],
            n_restarts: 0,
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
        assert_eq!(gp.noise_variance, 0.05);
        assert_eq!(gp.kernel.variance, 2.0);
        let none = ExactGpConfig {
            length_scale: Some(vec![0.7]),
            optimize: vec![],
            ..Default::default()
        };
        let gp = fit_exact(
            x.view(),
            y.view(),
            &none,
            Parallelism::Rayon,
            &Monitor::default(),
        )
        .unwrap();
        assert_eq!(gp.kernel.length_scale, vec![0.7]);
        let bad = ExactGpConfig {
            length_scale: Some(vec![0.7, 0.2, 0.1]),
            ..Default::default()
        };
        assert!(fit_exact(
            x.view(),
            y.view(),
            &bad,
            Parallelism::Rayon,
            &Monitor::default()
        )
        .unwrap_err()
        .to_string()
        .contains("length_scale"));
    }

    #[test]
    fn runs_are_reported_and_a_cancel_stops_the_fit() {
        let (x, y) = data(240);
        let cfg = ExactGpConfig {
            n_restarts: 1,
            coarse_min_rows: 64,
            ..Default::default()
        };
        let monitor = Monitor::new();
        fit_exact(x.view(), y.view(), &cfg, Parallelism::Rayon, &monitor).unwrap();
        assert_eq!(monitor.snapshot(), ("optimizer runs".to_string(), 2, 2));
        let messages = monitor.take_messages();
        // Per run: the subsample's evaluations, its optimum, the full level.
        assert_eq!(messages.len(), 8, "{messages:?}");
        assert!(messages[0].starts_with("  60 rows: ") && messages[0].ends_with("LML evaluations"));
        assert!(messages[1].starts_with("  60 rows: LML = "));
        assert!(messages[2].starts_with("  240 rows: "));
        assert!(messages[3].starts_with("run 1/2: LML = "));
        assert!(messages[7].starts_with("run 2/2: LML = "));
        // Cancelled before the start, on the coarse-to-fine and the direct
        // path, and with nothing to optimize.
        let none = ExactGpConfig {
            optimize: vec![],
            ..cfg.clone()
        };
        for c in [
            &cfg,
            &ExactGpConfig {
                coarse_min_rows: usize::MAX,
                ..cfg.clone()
            },
            &none,
        ] {
            let cancelled = Monitor::new();
            cancelled.cancel();
            let r = fit_exact(x.view(), y.view(), c, Parallelism::Rayon, &cancelled);
            assert_eq!(r.unwrap_err(), Error::Interrupted);
        }
        // Cancelled from another thread once the first of many runs is done:
        // the fit stops with the error instead of returning the runs so far.
        let many = ExactGpConfig {
            n_restarts: 200,
            ..cfg
        };
        let monitor = Monitor::new();
        let r = std::thread::scope(|s| {
            s.spawn(|| {
                while monitor.snapshot().1 == 0 {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                monitor.cancel();
            });
            fit_exact(x.view(), y.view(), &many, Parallelism::Rayon, &monitor)
        });
        assert_eq!(r.unwrap_err(), Error::Interrupted);
        assert!(monitor.snapshot().1 < 201);
    }

    #[test]
    fn the_memory_budget_refuses_a_fit_that_would_not_fit() {
        let (x, y) = data(40);
        let small = ExactGpConfig {
            memory_budget: Some(40 * 40 * 8),
            ..Default::default()
        };
        let msg = fit_exact(
            x.view(),
            y.view(),
            &small,
            Parallelism::Rayon,
            &Monitor::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(msg.contains("RandomFeatureGPR"), "{msg}");
        let ample = ExactGpConfig {
            memory_budget: Some(1 << 30),
            n_restarts: 0,
            ..Default::default()
        };
        assert!(fit_exact(
            x.view(),
            y.view(),
            &ample,
            Parallelism::Rayon,
            &Monitor::default()
        )
        .is_ok());
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
    }
}
