//! The hyperparameter fit of the exact GP (see docs/math/gp.rst, exact GP):
//! the log marginal likelihood of [`super::log_marginal_likelihood`] as an
//! [`Objective`] of the log hyperparameters, maximized by
//! [`optimize::maximize`] (L-BFGS, restarts, coarse to fine).

use std::sync::Mutex;

use ndarray::{Array1, ArrayView1, ArrayView2, Axis, CowArray, Ix1, Ix2};

use super::{
    check_exact_size, check_training_data, lml_and_factor, lml_rounding, ExactGp, LmlEval,
    Workspace,
};
use crate::error::{Error, Result};
use crate::gp::optimize::{self, Evaluation, HyperInit, LogParams, Objective, OptimizerConfig};
use crate::kernels::{Kernel, StationaryKernel};
use crate::linalg::Cholesky;
use crate::progress::Monitor;
use crate::threads::Parallelism;

/// What [`fit_exact`] fits and how.
#[derive(Clone, Debug)]
pub struct ExactGpConfig {
    /// The kernel.
    pub kernel: Kernel,
    /// The starting (or fixed) hyperparameters and which are optimized.
    pub hyper: HyperInit,
    /// Restarts, seed, iterations and the coarse-to-fine threshold.
    pub optimizer: OptimizerConfig,
    /// Subtract the training-target mean (docs/math/gp.rst).
    pub center: bool,
    /// Bytes the `N × N` matrices may take ([`check_exact_size`]); `None`
    /// does not check.
    pub memory_budget: Option<u64>,
}

impl Default for ExactGpConfig {
    /// The Gaussian kernel, every hyperparameter fitted from the default
    /// initialization, the default optimizer, centered targets, no memory
    /// check.
    fn default() -> Self {
        Self {
            kernel: Kernel::Gaussian,
            hyper: HyperInit::default(),
            optimizer: OptimizerConfig::default(),
            center: true,
            memory_budget: None,
        }
    }
}

/// The exact GP's log marginal likelihood and its gradient as an
/// [`Objective`] of the free log hyperparameters; an evaluation's fit is
/// the factor of `K_y` and `α`.
pub(crate) struct ExactLml<'a> {
    x: CowArray<'a, f64, Ix2>,
    /// Targets, already centered.
    y: CowArray<'a, f64, Ix1>,
    kernel: Kernel,
    params: LogParams,
    par: Parallelism,
    /// The `N × N` buffers every evaluation reuses (see [`Workspace`]).
    workspace: Mutex<Workspace>,
}

impl<'a> ExactLml<'a> {
    /// The objective on training inputs `x` and centered targets `y`.
    pub(crate) fn new(
        x: ArrayView2<'a, f64>,
        y: ArrayView1<'a, f64>,
        kernel: Kernel,
        params: LogParams,
        par: Parallelism,
    ) -> Self {
        Self {
            x: x.into(),
            y: y.into(),
            kernel,
            params,
            par,
            workspace: Mutex::new(Workspace::default()),
        }
    }
}

impl ExactLml<'_> {
    /// The LML at `θ` (with its gradient when `want_grad`), its factor and
    /// `α = K⁻¹y`.
    fn lml(
        &self,
        theta: &[f64],
        want_grad: bool,
        monitor: &Monitor,
    ) -> Result<(LmlEval, Cholesky, Vec<f64>)> {
        let v = self.params.at(theta)?;
        let k = v.len() - 2;
        let kernel = StationaryKernel {
            kernel: self.kernel,
            length_scale: v[..k].to_vec(),
            variance: v[k],
        };
        let noise = v[k + 1];
        let mut ws = self.workspace.lock().unwrap_or_else(|e| e.into_inner());
        let (e, chol, alpha) = lml_and_factor(
            self.x.view(),
            self.y.view(),
            &kernel,
            noise,
            want_grad,
            self.par,
            monitor,
            &mut ws,
        )?;
        drop(ws);
        // The value alone has no inverse at hand: its diagonal (a third of
        // the inverse's work) gives the trace.
        let trace_inv = match e.trace_inv {
            Some(t) => t,
            None => chol
                .inverse_diagonal_monitored(self.par, monitor)?
                .iter()
                .sum(),
        };
        check_accuracy(&kernel, noise, &e, trace_inv, self.x.nrows())?;
        Ok((e, chol, alpha))
    }
}

/// The most estimated rounding of the LML, in nats per row
/// ([`lml_rounding`]), at which the fit evaluates it; the sparse GP's
/// statistics keep the same accuracy (docs/math/sparse_gp.rst, Accuracy).
const MAX_ROUNDING_PER_ROW: f64 = 1e-6;

/// Refuses an evaluation whose LML float64 cannot give: one the factor
/// needed a jitter for (its value is another model's), or whose estimated
/// rounding exceeds [`MAX_ROUNDING_PER_ROW`]. Noise variances far below
/// the kernel variance (targets without noise, rows repeated with equal
/// targets) make `K_y` so ill-conditioned that the LML's rounding, not the
/// data, makes its maximum; the optimizer passes over such points as over
/// a failed factorization (docs/math/gp.rst, "Exact GP").
fn check_accuracy(
    kernel: &StationaryKernel,
    noise: f64,
    e: &LmlEval,
    trace_inv: f64,
    n: usize,
) -> Result<()> {
    let rounding = lml_rounding(kernel.variance + noise, trace_inv) / n as f64;
    if e.jitter == 0.0 && rounding <= MAX_ROUNDING_PER_ROW {
        return Ok(());
    }
    let why = if e.jitter > 0.0 {
        "K_y = K + noise_variance I is not positive definite in float64".to_string()
    } else {
        format!(
            "K_y = K + noise_variance I is too ill-conditioned: its rounding is about \
             {rounding:.1e} nats per row, above {MAX_ROUNDING_PER_ROW:e}"
        )
    };
    Err(Error::invalid(
        "noise_variance",
        format!(
            "the log marginal likelihood at length_scale {:?}, kernel_variance {:e}, \
             noise_variance {noise:e} has no float64 value: {why}; a noise_variance far below \
             the kernel_variance does this (targets without noise, or repeated rows with equal \
             targets): start from a larger noise_variance, or fix it at 1e-9 times the \
             kernel_variance or more",
            kernel.length_scale, kernel.variance
        ),
    ))
}

impl Objective for ExactLml<'_> {
    type Fit = (Cholesky, Vec<f64>);

    fn n_rows(&self) -> usize {
        self.x.nrows()
    }

    fn evaluate(&self, theta: &[f64], monitor: &Monitor) -> Result<Evaluation<Self::Fit>> {
        let (e, chol, alpha) = self.lml(theta, true, monitor)?;
        Ok(Evaluation {
            value: e.lml,
            grad: self.params.select(&e.grad),
            fit: (chol, alpha),
        })
    }

    /// The LML from the factor and the diagonal of its inverse (the
    /// accuracy check's trace), without the full inverse: two thirds of an
    /// evaluation's `O(N³)` work.
    fn value(&self, theta: &[f64], monitor: &Monitor) -> Result<f64> {
        Ok(self.lml(theta, false, monitor)?.0.lml)
    }

    fn subsample(&self, rows: &[usize]) -> Result<Option<Self>> {
        Ok(Some(Self {
            x: self.x.select(Axis(0), rows).into(),
            y: self.y.select(Axis(0), rows).into(),
            kernel: self.kernel,
            params: self.params.clone(),
            par: self.par,
            workspace: Mutex::new(Workspace::default()),
        }))
    }
}

/// Fits the exact GP: the initialization of docs/math/gp.rst (exact GP),
/// then L-BFGS on the log marginal likelihood over the hyperparameters in
/// `cfg.hyper.optimize` ([`optimize::maximize`]), the best run kept with
/// its factor (no refit). The first run starts from the initialization,
/// or from the same with the free length scales, the free variances or
/// both at the data's defaults ([`optimize::DataScale`]), whichever has
/// the highest LML on the coarsest subsample; `n_restarts` more start
/// uniformly within a factor 10 of it in each free parameter.
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
    let n = x.nrows();
    let y_mean = if cfg.center { y.sum() / n as f64 } else { 0.0 };
    let yc: Array1<f64> = y.mapv(|v| v - y_mean);
    let params = cfg.hyper.resolve(x, y, cfg.center)?;
    let k = params.n_length_scales();
    let kernel = |v: &[f64]| StationaryKernel {
        kernel: cfg.kernel,
        length_scale: v[..k].to_vec(),
        variance: v[k],
    };
    if params.free.is_empty() {
        let v = &params.values;
        return ExactGp::fit_monitored(x, y, kernel(v), v[k + 1], cfg.center, par, monitor);
    }
    let obj = ExactLml::new(x.view(), yc.view(), cfg.kernel, params.clone(), par);
    let data = cfg.hyper.data_scale(x, y, &params)?.values(&params)?;
    let start = optimize::better_start(&obj, &params, &data, &cfg.optimizer, monitor)?;
    let opt = optimize::maximize(&obj, &start, &cfg.optimizer, monitor)?;
    let v = params.at(&opt.theta)?;
    let (chol, alpha) = opt.fit;
    // The best evaluation's own factor: the same values, targets and
    // formulas as ExactGp::fit, so no refit is needed.
    Ok(ExactGp {
        x_train: x.to_owned(),
        kernel: kernel(&v),
        noise_variance: v[k + 1],
        y_mean,
        alpha: Array1::from(alpha),
        chol,
        lml: opt.value,
        n_iter: opt.n_iter,
    })
}

#[cfg(test)]
mod tests {
    use super::super::log_marginal_likelihood;
    use super::*;
    use crate::error::Error;
    use crate::gp::exact::data_for_tests as data;
    use crate::gp::optimize::Hyper;

    #[test]
    fn optimum_has_zero_gradient_and_beats_restarts() {
        let (x, y) = data(40);
        for ard in [false, true] {
            let cfg = ExactGpConfig {
                hyper: HyperInit {
                    ard,
                    ..Default::default()
                },
                optimizer: OptimizerConfig {
                    n_restarts: 2,
                    seed: 3,
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
                hyper: HyperInit {
                    ard,
                    ..Default::default()
                },
                optimizer: OptimizerConfig {
                    n_restarts: 0,
                    coarse_min_rows: usize::MAX,
                    ..Default::default()
                },
                ..Default::default()
            };
            // 240 -> 60 rows (60 < 64 stops the recursion): one coarse level.
            let coarse = ExactGpConfig {
                optimizer: OptimizerConfig {
                    coarse_min_rows: 64,
                    ..direct.optimizer.clone()
                },
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
            (false, HyperInit::default().optimize),
            (true, vec![Hyper::LengthScale, Hyper::NoiseVariance]),
        ] {
            let cfg = ExactGpConfig {
                hyper: HyperInit {
                    ard,
                    optimize,
                    kernel_variance: Some(0.7),
                    ..Default::default()
                },
                optimizer: OptimizerConfig {
                    n_restarts: 1,
                    coarse_min_rows: 64,
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
    fn fixed_parameters_stay_fixed() {
        let (x, y) = data(40);
        let cfg = ExactGpConfig {
            hyper: HyperInit {
                noise_variance: Some(0.05),
                kernel_variance: Some(2.0),
                optimize: vec![Hyper::LengthScale],
                ..Default::default()
            },
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
        assert_eq!(gp.noise_variance, 0.05);
        assert_eq!(gp.kernel.variance, 2.0);
        let none = ExactGpConfig {
            hyper: HyperInit {
                length_scale: Some(vec![0.7]),
                optimize: vec![],
                ..Default::default()
            },
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
            hyper: HyperInit {
                length_scale: Some(vec![0.7, 0.2, 0.1]),
                ..Default::default()
            },
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
            optimizer: OptimizerConfig {
                n_restarts: 1,
                coarse_min_rows: 64,
                ..Default::default()
            },
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
            hyper: HyperInit {
                optimize: vec![],
                ..Default::default()
            },
            ..cfg.clone()
        };
        for c in [
            &cfg,
            &ExactGpConfig {
                optimizer: OptimizerConfig {
                    coarse_min_rows: usize::MAX,
                    ..cfg.optimizer.clone()
                },
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
            optimizer: OptimizerConfig {
                n_restarts: 200,
                ..cfg.optimizer.clone()
            },
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
            optimizer: OptimizerConfig {
                n_restarts: 0,
                ..Default::default()
            },
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
}
