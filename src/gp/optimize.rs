//! Hyperparameter fitting of the exact GP (ALGORITHMS.md 7.1): maximize the
//! log marginal likelihood over the log parameters with L-BFGS (argmin's
//! `LBFGS` with the Moré–Thuente line search) from the initialization of
//! 7.1 and `n_restarts` random starts; the best optimum wins.
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
use ndarray::{Array1, ArrayView1, ArrayView2};
use rand::Rng as _;

use super::check_positive;
use super::exact::{check_training_data, log_marginal_likelihood, ExactGp, GaussianKernel};
use crate::error::{Error, Result};
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
    /// Fixed or initial kernel variance. `None`: `var(y)`.
    pub kernel_variance: Option<f64>,
    /// Fixed or initial noise variance. `None`: `0.1 var(y)`.
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
    /// Print one line per run to stderr.
    pub verbose: bool,
    /// Subtract the training-target mean (ALGORITHMS.md 7).
    pub center: bool,
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
            verbose: false,
            center: true,
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
    /// The full log parameter vector `(ln l.., ln σ², ln σ_n²)`.
    template: Vec<f64>,
    /// Indices of the free entries of `template`.
    free: Vec<usize>,
    par: Parallelism,
    /// The last [`CACHE_LEN`] evaluations `(point, cost, gradient)`.
    cache: Mutex<std::collections::VecDeque<Evaluation>>,
    /// Number of LML evaluations (each one Cholesky and one inverse).
    evals: std::sync::atomic::AtomicU64,
    best: Mutex<Option<(f64, Vec<f64>)>>,
}

/// Evaluations remembered for the line search's repeated requests.
const CACHE_LEN: usize = 8;

/// Log parameters beyond this magnitude are refused (`e^±40` spans any
/// sensible scale).
const MAX_ABS_LOG: f64 = 40.0;

impl Objective<'_> {
    fn full(&self, p: &[f64]) -> Vec<f64> {
        let mut t = self.template.clone();
        for (&i, &v) in self.free.iter().zip(p) {
            t[i] = v;
        }
        t
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
        if p.iter().any(|v| !v.is_finite() || v.abs() > MAX_ABS_LOG) {
            return Err(Error::invalid(
                "hyperparameters",
                "the optimizer left the range e^-40..e^40",
            ));
        }
        let t = self.full(p);
        let k = t.len() - 2;
        let kernel = GaussianKernel {
            length_scale: t[..k].iter().map(|v| v.exp()).collect(),
            variance: t[k].exp(),
        };
        let e = log_marginal_likelihood(self.x, self.y, &kernel, t[k + 1].exp(), true, self.par)?;
        let n = self.x.nrows() as f64;
        let cost = -e.lml / n;
        let grad: Vec<f64> = self.free.iter().map(|&i| -e.grad[i] / n).collect();
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

/// Fits the exact GP: initialization of ALGORITHMS.md 7.1, L-BFGS on the
/// log marginal likelihood over the hyperparameters in `cfg.optimize`
/// (from the initialization, then `cfg.n_restarts` starts drawn uniformly
/// within a factor 10 of it in each free parameter), the best run kept.
pub fn fit_exact(
    x: ArrayView2<'_, f64>,
    y: ArrayView1<'_, f64>,
    cfg: &ExactGpConfig,
    par: Parallelism,
) -> Result<ExactGp> {
    check_training_data(x, y)?;
    let (n, d) = x.dim();
    let y_mean = if cfg.center { y.sum() / n as f64 } else { 0.0 };
    let yc: Array1<f64> = y.mapv(|v| v - y_mean);
    let y_avg = y.sum() / n as f64;
    let var_y = y.iter().map(|v| (v - y_avg) * (v - y_avg)).sum::<f64>() / n as f64;
    let var_y = if var_y > 0.0 { var_y } else { 1.0 };
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
    let nv = cfg.noise_variance.unwrap_or(0.1 * var_y);
    check_positive("kernel_variance", kv)?;
    check_positive("noise_variance", nv)?;
    let mut template: Vec<f64> = ls.iter().map(|v| v.ln()).collect();
    template.push(kv.ln());
    template.push(nv.ln());
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
    let mut theta = template.clone();
    let mut n_iter = 0u64;
    if !free.is_empty() {
        let obj = Objective {
            x: x.view(),
            y: yc.view(),
            template: template.clone(),
            free: free.clone(),
            par,
            cache: Mutex::new(std::collections::VecDeque::with_capacity(CACHE_LEN)),
            evals: std::sync::atomic::AtomicU64::new(0),
            best: Mutex::new(None),
        };
        let start0: Vec<f64> = free.iter().map(|&i| template[i]).collect();
        let mut rng = crate::rng::seeded(cfg.seed);
        let mut best: Option<(f64, Vec<f64>)> = None;
        let mut first_err = None;
        for r in 0..=cfg.n_restarts {
            let start: Vec<f64> = if r == 0 {
                start0.clone()
            } else {
                start0
                    .iter()
                    .map(|v| v + std::f64::consts::LN_10 * rng.random_range(-1.0..=1.0))
                    .collect()
            };
            match run_lbfgs(&obj, start, cfg.max_iter) {
                Ok((c, p, iters)) => {
                    n_iter += iters;
                    if cfg.verbose {
                        eprintln!(
                            "ExactGPR: run {}/{}: LML = {:.6} after {iters} L-BFGS iterations \
                             ({} LML evaluations so far)",
                            r + 1,
                            cfg.n_restarts + 1,
                            -c * n as f64,
                            obj.evals.load(std::sync::atomic::Ordering::Relaxed)
                        );
                    }
                    if best.as_ref().is_none_or(|(bc, _)| c < *bc) {
                        best = Some((c, p));
                    }
                }
                Err(e) => {
                    if cfg.verbose {
                        eprintln!("ExactGPR: run {}/{} failed: {e}", r + 1, cfg.n_restarts + 1);
                    }
                    first_err.get_or_insert(e);
                }
            }
        }
        match best {
            Some((_, p)) => theta = obj.full(&p),
            None => {
                return Err(first_err.unwrap_or_else(|| Error::Internal("no optimizer run".into())))
            }
        }
    }
    // Fixed parameters keep their exact values (no exp(ln v) rounding).
    let mut values: Vec<f64> = ls;
    values.push(kv);
    values.push(nv);
    for &i in &free {
        values[i] = theta[i].exp();
    }
    let k = values.len() - 2;
    let kernel = GaussianKernel {
        length_scale: values[..k].to_vec(),
        variance: values[k],
    };
    let mut gp = ExactGp::fit(x, y, kernel, values[k + 1], cfg.center, par)?;
    gp.n_iter = n_iter;
    Ok(gp)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::Array2;

    fn data() -> (Array2<f64>, Array1<f64>) {
        let x = Array2::from_shape_fn((40, 2), |(i, j)| {
            ((i * 17 + j * 29) % 41) as f64 / 10.0 - 2.0
        });
        let y = x
            .rows()
            .into_iter()
            .enumerate()
            .map(|(i, r)| (1.5 * r[0]).sin() + 0.1 * r[1] + 0.05 * ((i * 7 % 5) as f64 - 2.0))
            .collect();
        (x, y)
    }

    #[test]
    fn optimum_has_zero_gradient_and_beats_restarts() {
        let (x, y) = data();
        for ard in [false, true] {
            let cfg = ExactGpConfig {
                ard,
                n_restarts: 2,
                seed: 3,
                ..Default::default()
            };
            let gp = fit_exact(x.view(), y.view(), &cfg, Parallelism::Rayon).unwrap();
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
    fn fixed_parameters_stay_fixed() {
        let (x, y) = data();
        let cfg = ExactGpConfig {
            noise_variance: Some(0.05),
            kernel_variance: Some(2.0),
            optimize: vec![Hyper::LengthScale],
            n_restarts: 0,
            ..Default::default()
        };
        let gp = fit_exact(x.view(), y.view(), &cfg, Parallelism::Rayon).unwrap();
        assert_eq!(gp.noise_variance, 0.05);
        assert_eq!(gp.kernel.variance, 2.0);
        let none = ExactGpConfig {
            length_scale: Some(vec![0.7]),
            optimize: vec![],
            ..Default::default()
        };
        let gp = fit_exact(x.view(), y.view(), &none, Parallelism::Rayon).unwrap();
        assert_eq!(gp.kernel.length_scale, vec![0.7]);
        let bad = ExactGpConfig {
            length_scale: Some(vec![0.7, 0.2, 0.1]),
            ..Default::default()
        };
        assert!(fit_exact(x.view(), y.view(), &bad, Parallelism::Rayon)
            .unwrap_err()
            .to_string()
            .contains("length_scale"));
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
