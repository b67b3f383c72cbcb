//! The hyperparameter fit of the sparse GP (see docs/math/sparse_gp.rst,
//! section Fitting): VFE's bound or FITC's log marginal likelihood as an
//! [`Objective`] of the log hyperparameters (and optionally of the
//! inducing inputs), maximized by [`optimize::maximize`], the optimizer of
//! the exact GP (L-BFGS, restarts, coarse to fine).
//!
//! The inducing inputs are chosen once, at the initial hyperparameters
//! ([`select_inducing`]). With `optimize_inducing` the fit has two stages:
//! the hyperparameters with `Z` fixed (with the restarts, which draw within
//! a factor 10 of the start in log space, a perturbation that has no
//! meaning for input coordinates), then one L-BFGS run over the
//! hyperparameters and `Z` together from that optimum.
//!
//! [`fit_sparse`] evaluates over rows in memory; [`fit_sparse_blocks`]
//! runs the same fit on rows held elsewhere (Dask workers), every
//! evaluation two reductions of sums that add up over blocks (the
//! statistics, then the gradient sums; docs/math/sparse_gp.rst, section
//! Streaming).
//!
//! Devices (see docs/math/sparse_gp.rst, section Devices): the optimizer's
//! evaluations (the bound and its gradient, two passes over the rows) run on
//! the CPU in float64. With [`SparseGpConfig::device`] resolved to the GPU
//! (VFE only), the model's statistics at the final hyperparameters (`K_uf
//! K_fu`, `K_uf y`) are computed once more on the GPU and the model's bound,
//! weights and factors are solved from them on the CPU in float64; with
//! nothing to optimize that GPU pass is the fit's only pass over the rows.

use std::sync::Mutex;

use ndarray::{Array1, Array2, ArrayView1, ArrayView2, Axis, CowArray, Ix1, Ix2};

use super::bound::{bound, Bound};
use super::gradient::{finish, Gradient, GradientSums};
use super::inducing::{select_inducing, InducingInit};
use super::model::SparseGp;
#[cfg(test)]
use super::objective::evaluate;
use super::objective::{default_chunk_rows, evaluate_in};
use super::prior::InducingPrior;
use super::stats::{Method, SparseStats, FITC_CPU_ONLY};
use crate::error::{Error, Result};
use crate::gp::exact::check_training_data;
use crate::gp::optimize::{
    self, DataScale, Evaluation, HyperInit, LogParams, Objective, OptimizerConfig,
};
use crate::gpu::{self, Device};
use crate::kernels::{Kernel, StationaryKernel};
use crate::progress::Monitor;
use crate::threads::Parallelism;

/// What [`fit_sparse`] fits and how.
#[derive(Clone, Debug)]
pub struct SparseGpConfig {
    /// The kernel.
    pub kernel: Kernel,
    /// VFE (Titsias' bound) or FITC.
    pub method: Method,
    /// The number of inducing inputs `M` (clamped to the number of rows;
    /// ignored for [`InducingInit::Given`]).
    pub n_inducing: usize,
    /// How the inducing inputs are chosen.
    pub inducing: InducingInit,
    /// The starting (or fixed) hyperparameters and which are optimized.
    pub hyper: HyperInit,
    /// Also optimize the inducing inputs (a second stage, see the module
    /// documentation).
    pub optimize_inducing: bool,
    /// Restarts, seed (also of the inducing-input selection), iterations
    /// and the coarse-to-fine threshold.
    pub optimizer: OptimizerConfig,
    /// Subtract the training-target mean (docs/math/gp.rst).
    pub center: bool,
    /// Rows per chunk of the passes over the data; `None`:
    /// [`default_chunk_rows`].
    pub chunk_rows: Option<usize>,
    /// The data's scale: a fit with free hyperparameters starts from the
    /// given ones or from the same with the free length scales, the free
    /// variances or both at this scale, whichever has the highest value on
    /// the coarsest level. `None`: computed from the rows in memory
    /// ([`DataScale::of`]); a fit on rows held elsewhere
    /// ([`fit_sparse_blocks`]) then starts from the given values.
    pub data_scale: Option<DataScale>,
    /// Where the model's statistics are computed (see the module
    /// documentation): `Cpu`, `Gpu` (VFE only; an error without a usable
    /// adapter) or `Auto` (the GPU when [`gpu::resolve`] picks it and the
    /// method is VFE, else the CPU; the CPU also when the GPU's float32
    /// statistics fail, see [`Error::GpuStatisticsNotPositiveDefinite`]).
    pub device: Device,
}

impl Default for SparseGpConfig {
    /// The Gaussian kernel, VFE, 256 inducing inputs by greedy conditional
    /// variance, every hyperparameter fitted from the default
    /// initialization, `Z` fixed, the default optimizer, centered targets.
    fn default() -> Self {
        Self {
            kernel: Kernel::Gaussian,
            method: Method::Vfe,
            n_inducing: 256,
            inducing: InducingInit::GreedyVariance,
            hyper: HyperInit::default(),
            optimize_inducing: false,
            optimizer: OptimizerConfig::default(),
            center: true,
            chunk_rows: None,
            device: Device::Cpu,
            data_scale: None,
        }
    }
}

/// The device that computes the model's statistics for `method`: `Cpu` or
/// `Gpu` (see [`SparseGpConfig::device`]).
///
/// # Errors
/// `Gpu` only: [`Error::InvalidParameter`] (`device`) for FITC; as
/// [`gpu::resolve`].
pub fn resolve_device(method: Method, device: Device) -> Result<Device> {
    match (method, device) {
        (_, Device::Cpu) | (Method::Fitc, Device::Auto) => Ok(Device::Cpu),
        (Method::Fitc, Device::Gpu) => Err(Error::invalid("device", FITC_CPU_ONLY)),
        (Method::Vfe, d) => gpu::resolve(d),
    }
}

/// Where the rows of a [`SparseObjective`] are, and how one evaluation's
/// two passes over them (the statistics, then with the bound's adjoints the
/// gradient sums; docs/math/sparse_gp.rst, section Streaming) run.
pub(crate) trait SparseRows: Sync + Sized {
    /// The number of rows.
    fn n_rows(&self) -> usize;

    /// The objective of `method` at `prior` (the targets centered with
    /// `center`) and, with `want_grad`, its adjoints and its gradient in
    /// the log hyperparameters and `Z` (without it, rows in memory get
    /// the first pass only).
    fn evaluate(
        &self,
        prior: &InducingPrior,
        method: Method,
        center: bool,
        want_grad: bool,
        monitor: &Monitor,
    ) -> Result<(Bound, Option<Gradient>)>;

    /// The rows `rows` (the optimizer's coarse level), or `None` when these
    /// rows cannot be subsampled so.
    fn subsample(&self, rows: &[usize]) -> Option<Self>;
}

/// Rows in memory: both passes over row chunks ([`evaluate_in`]).
pub(crate) struct InMemory<'a> {
    x: CowArray<'a, f64, Ix2>,
    y: CowArray<'a, f64, Ix1>,
    chunk_rows: usize,
    par: Parallelism,
    /// The kernel blocks' memory, kept between evaluations.
    scratch: Mutex<Vec<f64>>,
}

impl SparseRows for InMemory<'_> {
    fn n_rows(&self) -> usize {
        self.x.nrows()
    }

    fn evaluate(
        &self,
        prior: &InducingPrior,
        method: Method,
        center: bool,
        want_grad: bool,
        monitor: &Monitor,
    ) -> Result<(Bound, Option<Gradient>)> {
        let mut scratch = self.scratch.lock().unwrap_or_else(|e| e.into_inner());
        let e = evaluate_in(
            &mut scratch,
            prior,
            method,
            self.x.view(),
            self.y.view(),
            center,
            self.chunk_rows,
            want_grad,
            self.par,
            monitor,
        )?;
        Ok((e.bound, e.gradient))
    }

    fn subsample(&self, rows: &[usize]) -> Option<Self> {
        Some(Self {
            x: self.x.select(Axis(0), rows).into(),
            y: self.y.select(Axis(0), rows).into(),
            chunk_rows: self.chunk_rows,
            par: self.par,
            scratch: Mutex::new(Vec::new()),
        })
    }
}

/// Rows held elsewhere (e.g. in the blocks of Dask workers), of the coarse
/// level `level` (0: all `n_rows` rows; level `j + 1` keeps the rows `0, 4,
/// 8, …` of level `j`, as the in-memory subsample): `sums(prior, level,
/// want_grad)` gives the merged statistics of all rows of the level and,
/// with `want_grad`, the merged gradient sums of the second pass with those
/// statistics' adjoints (two reductions; one without it); the bound and the
/// gradient are finished here.
pub(crate) struct BlockRows<'a, F> {
    n_rows: usize,
    level: usize,
    sums: &'a F,
    par: Parallelism,
}

impl<F> SparseRows for BlockRows<'_, F>
where
    F: Fn(&InducingPrior, usize, bool) -> Result<(SparseStats, Option<GradientSums>)> + Sync,
{
    fn n_rows(&self) -> usize {
        self.n_rows
    }

    fn evaluate(
        &self,
        prior: &InducingPrior,
        method: Method,
        center: bool,
        want_grad: bool,
        monitor: &Monitor,
    ) -> Result<(Bound, Option<Gradient>)> {
        monitor.check()?;
        let (stats, sums) = (self.sums)(prior, self.level, want_grad)?;
        stats.validate()?;
        let (m, d) = prior.z.dim();
        let kuu = match method {
            Method::Vfe => 0,
            Method::Fitc => m,
        };
        let sums_fit = match &sums {
            Some(s) => {
                s.by_inducing.dim() == (m, d)
                    && s.by_length_scale.len() == d
                    && s.row_kuu.dim() == (kuu, kuu)
            }
            None => !want_grad,
        };
        if stats.n != self.n_rows as u64
            || stats.method != method
            || stats.n_inducing() != m
            || !sums_fit
        {
            return Err(Error::invalid(
                "sums",
                format!(
                    "an evaluation needs the {} statistics{} of all {} rows of level {} under \
                     the requested prior (got {} rows{})",
                    method.name(),
                    if want_grad { " and gradient sums" } else { "" },
                    self.n_rows,
                    self.level,
                    stats.n,
                    if want_grad && sums.is_none() {
                        ", no gradient sums"
                    } else {
                        ""
                    },
                ),
            ));
        }
        let b = crate::threads::install(|| bound(&stats, prior, center, want_grad, self.par))??;
        let g = match (&b.adjoint, &sums) {
            (Some(adj), Some(sums)) => Some(crate::threads::install(|| {
                finish(adj, prior, sums, self.par)
            })?),
            _ => None,
        };
        Ok((b, g))
    }

    fn subsample(&self, rows: &[usize]) -> Option<Self> {
        let strided =
            rows.len() == self.n_rows / 4 && rows.iter().enumerate().all(|(i, &r)| r == 4 * i);
        strided.then(|| Self {
            n_rows: rows.len(),
            level: self.level + 1,
            sums: self.sums,
            par: self.par,
        })
    }
}

/// The sparse-GP objective as an [`Objective`]: the coordinates are `θ =
/// (ln of the free hyperparameters, vec(Z / l))` (`Z` row-major, each
/// column over its length scale) when `optimize_inducing`, else the free
/// log hyperparameters only (`Z` fixed). In units of the length scale a
/// step in `Z` changes the kernel as a step in `ln l` does, whatever `l`
/// is, which L-BFGS's scaled identity start needs. An evaluation's fit is
/// the model at `θ`.
pub(crate) struct SparseObjective<R> {
    rows: R,
    kernel: Kernel,
    method: Method,
    params: LogParams,
    /// The inducing inputs when fixed, the layout of `θ`'s tail otherwise.
    z: Array2<f64>,
    optimize_inducing: bool,
    center: bool,
    par: Parallelism,
}

impl<R> SparseObjective<R> {
    /// The hyperparameters and inducing inputs at `θ`.
    fn prior(&self, theta: &[f64]) -> Result<InducingPrior> {
        let n_hyper = self.params.free.len();
        let z_len = if self.optimize_inducing {
            self.z.len()
        } else {
            0
        };
        if theta.len() != n_hyper + z_len {
            return Err(Error::ShapeMismatch {
                name: "number of optimizer coordinates",
                expected: n_hyper + z_len,
                got: theta.len(),
            });
        }
        let v = self.params.at(&theta[..n_hyper])?;
        let k = self.params.n_length_scales();
        let kernel = StationaryKernel {
            kernel: self.kernel,
            length_scale: v[..k].to_vec(),
            variance: v[k],
        };
        let z = if self.optimize_inducing {
            // θ's tail is Z / l: each coordinate in units of its length
            // scale, so that a step in it moves the kernel as much whatever
            // l is, as the log hyperparameters do.
            let mut z = Array2::from_shape_vec(self.z.dim(), theta[n_hyper..].to_vec())
                .map_err(|e| Error::Internal(e.to_string()))?;
            for mut row in z.rows_mut() {
                for (a, v) in row.iter_mut().enumerate() {
                    *v *= kernel.length_scale_of(a);
                }
            }
            z
        } else {
            self.z.clone()
        };
        InducingPrior::new(kernel, v[k + 1], z.view(), self.par)
    }

    /// The start `θ₀` at the initial hyperparameters and inducing inputs
    /// (`Z / l` with `optimize_inducing`).
    fn start(&self) -> Vec<f64> {
        let mut t = self.params.start();
        if self.optimize_inducing {
            let k = self.params.n_length_scales();
            for row in self.z.rows() {
                for (a, v) in row.iter().enumerate() {
                    t.push(v / self.params.values[a.min(k - 1)]);
                }
            }
        }
        t
    }
}

impl<R: SparseRows> SparseObjective<R> {
    /// The model at `θ` without the gradient: over rows in memory, the
    /// statistics pass alone (a third of an evaluation's multiply-adds).
    fn model(&self, theta: &[f64], monitor: &Monitor) -> Result<SparseGp> {
        let prior = self.prior(theta)?;
        let (b, _) = self
            .rows
            .evaluate(&prior, self.method, self.center, false, monitor)?;
        Ok(SparseGp::from_bound(self.method, prior, b, 0))
    }
}

impl<R: SparseRows> Objective for SparseObjective<R> {
    type Fit = SparseGp;

    fn n_rows(&self) -> usize {
        self.rows.n_rows()
    }

    /// VFE's value is a lower bound on the GP's LML ("bound"); FITC's is
    /// the LML of the FITC model, not of the GP ("FITC LML").
    fn value_name(&self) -> &'static str {
        match self.method {
            Method::Vfe => "bound",
            Method::Fitc => "FITC LML",
        }
    }

    fn evaluate(&self, theta: &[f64], monitor: &Monitor) -> Result<Evaluation<SparseGp>> {
        let prior = self.prior(theta)?;
        let (b, g) = self
            .rows
            .evaluate(&prior, self.method, self.center, true, monitor)?;
        let g = g.ok_or_else(|| Error::Internal("an evaluation without its gradient".into()))?;
        let mut hyper = g.hyper.clone();
        if self.optimize_inducing {
            // Z = W l with W = Z / l the coordinates: ∂F/∂ln l_a gains
            // Σ_m ∂F/∂z_ma z_ma, and ∂F/∂w_ma = ∂F/∂z_ma l_a.
            let k = self.params.n_length_scales();
            for (gz, z) in g.inducing.rows().into_iter().zip(prior.z.rows()) {
                for (a, (gv, zv)) in gz.iter().zip(z).enumerate() {
                    hyper[a.min(k - 1)] += gv * zv;
                }
            }
        }
        let mut grad = self.params.select(&hyper);
        if self.optimize_inducing {
            for gz in g.inducing.rows() {
                for (a, gv) in gz.iter().enumerate() {
                    grad.push(gv * prior.params.length_scale_of(a));
                }
            }
        }
        Ok(Evaluation {
            value: b.value,
            grad,
            fit: SparseGp::from_bound(self.method, prior, b, 0),
        })
    }

    /// The objective from the statistics alone (the first pass: a third of
    /// an evaluation's multiply-adds).
    fn value(&self, theta: &[f64], monitor: &Monitor) -> Result<f64> {
        Ok(self.model(theta, monitor)?.objective)
    }

    /// The coarse levels: the same objective on a subset of the rows, only
    /// with `Z` fixed (with `Z` free the subsample's Hessian would take
    /// `M·d` evaluations) and at least `M` rows. An evaluation costs about
    /// `1.5 n M²` multiply-adds in the passes plus a fixed `O(M³)` for the
    /// factors of `K_uu` and `B` and the adjoints: on fewer rows than
    /// inducing inputs the fixed part dominates, so such a level costs
    /// nearly what the level above it does.
    fn subsample(&self, rows: &[usize]) -> Result<Option<Self>> {
        if self.optimize_inducing || rows.len() < self.z.nrows() {
            return Ok(None);
        }
        Ok(self.rows.subsample(rows).map(|r| Self {
            rows: r,
            kernel: self.kernel,
            method: self.method,
            params: self.params.clone(),
            z: self.z.clone(),
            optimize_inducing: false,
            center: self.center,
            par: self.par,
        }))
    }
}

impl SparseObjective<InMemory<'_>> {
    /// The model at `prior` from statistics computed on the GPU (one pass
    /// over the rows), solved on the CPU in float64.
    fn model_on_gpu(&self, prior: InducingPrior, n_iter: u64) -> Result<SparseGp> {
        let stats =
            SparseStats::of_rows_gpu(self.method, &prior, self.rows.x.view(), self.rows.y.view())?;
        let m = prior.n_inducing();
        // The prior is factored already, so a failure here is the float32
        // statistics' (`B` indefinite, or the trace guard of [`bound`]).
        let b = bound(&stats, &prior, self.center, false, self.par).map_err(|e| match e {
            Error::NotPositiveDefinite { .. } | Error::InducingNotPositiveDefinite { .. } => {
                Error::GpuStatisticsNotPositiveDefinite { m }
            }
            other => other,
        })?;
        let mut gp = SparseGp::from_bound(self.method, prior, b, n_iter);
        gp.on_gpu = true;
        Ok(gp)
    }
}

/// The `M × M` float64 matrices a sparse GP evaluation holds at once (an
/// upper bound for the size check of [`fit_sparse`]).
const SPARSE_MATRICES: usize = 8;

/// Fits the sparse GP on `(x, y)`: the initial hyperparameters of
/// `cfg.hyper` (docs/math/gp.rst, exact GP), the inducing inputs chosen
/// with them, then L-BFGS on the objective of `cfg.method` over the
/// hyperparameters in `cfg.hyper.optimize` ([`optimize::maximize`], with
/// `n_restarts` restarts) and, with `cfg.optimize_inducing`, a second run
/// over those and `Z` together. The best evaluation's model is returned (no
/// refit); with nothing to optimize, the model at the initial values.
/// With `cfg.device` resolved to the GPU ([`resolve_device`]), the returned
/// model's statistics are computed on the GPU at the optimum (see the
/// module documentation).
///
/// `monitor` gets the stages "inducing inputs" and "optimizer runs" and one
/// message per run; every evaluation checks it before each chunk.
///
/// # Errors
/// [`Error::ShapeMismatch`] / [`Error::InvalidParameter`] /
/// [`Error::NonFinite`] for bad training data or configuration (see
/// [`select_inducing`], [`HyperInit::resolve`]);
/// [`Error::InducingNotPositiveDefinite`] when `K_uu` cannot be factored at
/// the start; [`Error::Interrupted`] once `monitor` is cancelled; as
/// [`resolve_device`] and [`SparseStats::of_rows_gpu`] on the GPU, and
/// with `Device::Gpu` [`Error::GpuStatisticsNotPositiveDefinite`] when
/// `K_uu` is too ill-conditioned for the GPU's float32 statistics
/// (`Device::Auto` computes them on the CPU instead).
pub fn fit_sparse(
    x: ArrayView2<'_, f64>,
    y: ArrayView1<'_, f64>,
    cfg: &SparseGpConfig,
    par: Parallelism,
    monitor: &Monitor,
) -> Result<SparseGp> {
    check_training_data(x, y)?;
    let device = resolve_device(cfg.method, cfg.device)?;
    let chunk_rows = cfg
        .chunk_rows
        .unwrap_or_else(|| default_chunk_rows(cfg.n_inducing));
    if chunk_rows == 0 {
        return Err(Error::invalid("chunk_size", "must be >= 1, got 0"));
    }
    // The M × chunk kernel blocks with their slopes and adjoints, M =
    // min(n_inducing, N); a chunk holds at most the N rows there are.
    let m = cfg.n_inducing.min(x.nrows());
    let block = chunk_rows.min(x.nrows());
    crate::alloc::check_alloc(
        "chunk_size",
        &format!("the sparse GP's kernel blocks of {m} x {block} float64"),
        &[3, m, block],
        8,
    )?;
    let rows = InMemory {
        x: x.reborrow().into(),
        y: y.reborrow().into(),
        chunk_rows,
        par,
        scratch: Mutex::new(Vec::new()),
    };
    let mut obj = start_objective(rows, x, y, m, cfg, par, monitor)?;
    // With `Auto`, statistics too ill-conditioned for the GPU's float32
    // are computed again on the CPU in float64.
    let falls_back = |r: &Result<SparseGp>| {
        cfg.device == Device::Auto
            && matches!(r, Err(Error::GpuStatisticsNotPositiveDefinite { .. }))
    };
    let mut device = device;
    if device == Device::Gpu && obj.params.free.is_empty() && !cfg.optimize_inducing {
        // Nothing to optimize: the GPU pass is the only one.
        monitor.check()?;
        let r = obj.model_on_gpu(obj.prior(&[])?, 0);
        if !falls_back(&r) {
            return r;
        }
        device = Device::Cpu;
    }
    let gp = optimize_from(&mut obj, cfg, monitor)?;
    if device == Device::Gpu {
        monitor.check()?;
        let prior = InducingPrior::new(
            gp.params.clone(),
            gp.noise_variance,
            gp.inducing.view(),
            par,
        )?;
        let r = obj.model_on_gpu(prior, gp.n_iter);
        return if falls_back(&r) { Ok(gp) } else { r };
    }
    Ok(gp)
}

/// [`fit_sparse`] on `n_rows` rows of `d` columns held elsewhere: the same
/// optimizer, restarts, coarse levels and (with `cfg.optimize_inducing`)
/// second stage, every evaluation the reductions of `sums(prior, level,
/// want_grad)`: the merged statistics of all rows of the coarse level
/// `level` under `prior` (0: all rows; level `j + 1` keeps the rows `0, 4,
/// 8, …` of level `j`), and, with `want_grad`, the merged gradient sums of
/// the second pass with the adjoints of those statistics' bound (`None`
/// without it: the comparison of starts and a fit with nothing to optimize
/// need the value alone). The inducing inputs must be given
/// ([`InducingInit::Given`]) and so must every hyperparameter (the starts
/// of the free ones): the defaults would read the rows.
///
/// # Errors
/// [`Error::InvalidParameter`] for inducing inputs to be chosen, a missing
/// hyperparameter or no rows, and as [`fit_sparse`]; the errors of `sums`.
pub fn fit_sparse_blocks<F>(
    n_rows: usize,
    d: usize,
    cfg: &SparseGpConfig,
    sums: &F,
    par: Parallelism,
    monitor: &Monitor,
) -> Result<SparseGp>
where
    F: Fn(&InducingPrior, usize, bool) -> Result<(SparseStats, Option<GradientSums>)> + Sync,
{
    if n_rows == 0 {
        return Err(Error::invalid("X", "needs at least one training row"));
    }
    if cfg.device == Device::Gpu {
        return Err(Error::invalid(
            "device",
            "a fit on rows held elsewhere computes its sums where the rows are, on the CPU",
        ));
    }
    let InducingInit::Given(z) = &cfg.inducing else {
        return Err(Error::invalid(
            "inducing",
            "a fit on rows held elsewhere needs the inducing inputs as an array",
        ));
    };
    for (name, given) in [
        ("length_scale", cfg.hyper.length_scale.is_some()),
        ("kernel_variance", cfg.hyper.kernel_variance.is_some()),
        ("noise_variance", cfg.hyper.noise_variance.is_some()),
    ] {
        if !given {
            return Err(Error::invalid(
                name,
                "a fit on rows held elsewhere needs its value (the start when optimized)",
            ));
        }
    }
    // Every value and the inducing inputs are given: the rows are not read.
    let none = Array2::zeros((0, d));
    let rows = BlockRows {
        n_rows,
        level: 0,
        sums,
        par,
    };
    let m = z.nrows();
    let mut obj = start_objective(
        rows,
        none.view(),
        Array1::zeros(0).view(),
        m,
        cfg,
        par,
        monitor,
    )?;
    optimize_from(&mut obj, cfg, monitor)
}

/// The objective at the start of a fit on `rows`: the hyperparameters of
/// `cfg.hyper` resolved on `(x, y)` and the inducing inputs chosen with them
/// (a fit on rows held elsewhere passes no rows, every value and `Z` being
/// given), after the size check of the `m × m` matrices of an evaluation
/// (`K_uu`, its factor, the statistics and their adjoints). With free
/// hyperparameters and the data's scale (`cfg.data_scale`, or that of
/// rows in memory), the start is the best of
/// [`optimize::start_candidates`] on the coarsest level, each with the
/// inducing inputs chosen at its length scales; a start that cannot be
/// evaluated there, or whose inducing inputs cannot be chosen, is passed
/// over.
fn start_objective<R: SparseRows>(
    rows: R,
    x: ArrayView2<'_, f64>,
    y: ArrayView1<'_, f64>,
    m: usize,
    cfg: &SparseGpConfig,
    par: Parallelism,
    monitor: &Monitor,
) -> Result<SparseObjective<R>> {
    crate::alloc::check_alloc(
        "n_inducing",
        &format!("the sparse GP's {SPARSE_MATRICES} matrices of {m} x {m} float64"),
        &[SPARSE_MATRICES, m, m],
        8,
    )?;
    let params = cfg.hyper.resolve(x, y, cfg.center)?;
    let k = params.n_length_scales();
    let data = match &cfg.data_scale {
        _ if params.free.is_empty() => None,
        Some(scale) => Some(scale.values(&params)?),
        None if x.nrows() > 0 => Some(cfg.hyper.data_scale(x, y, &params)?.values(&params)?),
        None => None,
    };
    let candidates = match &data {
        Some(data) => optimize::start_candidates(&params, data),
        None => vec![params.values.clone()],
    };
    let choose = |v: &[f64]| {
        let kernel = StationaryKernel {
            kernel: cfg.kernel,
            length_scale: v[..k].to_vec(),
            variance: v[k],
        };
        select_inducing(
            x,
            cfg.n_inducing,
            &cfg.inducing,
            &kernel,
            cfg.optimizer.seed,
            par,
            monitor,
        )
    };
    // The inducing inputs of each start: chosen again only where the choice
    // depends on the length scales (greedy variance) and they differ.
    let mut zs: Vec<std::result::Result<Array2<f64>, String>> = Vec::new();
    for (i, v) in candidates.iter().enumerate() {
        let same = (0..i).find(|&j| {
            !matches!(cfg.inducing, InducingInit::GreedyVariance) || candidates[j][..k] == v[..k]
        });
        let z = match same.map(|j| zs[j].clone()) {
            Some(z) => z,
            None => match choose(v) {
                Ok(z) => Ok(z),
                Err(e) if i == 0 || matches!(e, Error::Interrupted) => return Err(e),
                Err(e) => Err(e.to_string()),
            },
        };
        zs.push(z);
    }
    let mut obj = SparseObjective {
        rows,
        kernel: cfg.kernel,
        method: cfg.method,
        params,
        z: zs[0].clone().map_err(Error::Internal)?,
        optimize_inducing: false,
        center: cfg.center,
        par,
    };
    if candidates.len() > 1 {
        let given = obj.params.clone();
        let mut coarse = optimize::coarsest(&obj, &cfg.optimizer)?;
        let value_name = obj.value_name();
        let best = optimize::best_named_start(
            &optimize::start_names(&given, &candidates),
            value_name,
            |i| {
                monitor.check()?;
                let level = coarse.as_mut().unwrap_or(&mut obj);
                level.z = zs[i].clone().map_err(|e| Error::invalid("inducing", e))?;
                level.params.values = candidates[i].clone();
                Ok((level.value(&level.start(), monitor)?, level.n_rows()))
            },
            monitor,
        )?;
        obj.params.values = candidates[best].clone();
        obj.z = zs
            .swap_remove(best)
            .map_err(|e| Error::invalid("inducing", e))?;
    }
    Ok(obj)
}

/// The optimum of `obj` (the model at the start when nothing is free, from
/// the statistics alone) and, with `cfg.optimize_inducing`, the second
/// stage over the hyperparameters and `Z` from there: the tail of
/// [`fit_sparse`] and [`fit_sparse_blocks`].
fn optimize_from<R: SparseRows>(
    obj: &mut SparseObjective<R>,
    cfg: &SparseGpConfig,
    monitor: &Monitor,
) -> Result<SparseGp> {
    let free = !obj.params.free.is_empty();
    if !free && !cfg.optimize_inducing {
        monitor.check()?;
        return obj.model(&[], monitor);
    }
    // The second stage starts at the first stage's optimum, or, with
    // nothing free, at the start itself.
    let mut n_iter = 0;
    if free {
        let opt = optimize::maximize(&*obj, &obj.start(), &cfg.optimizer, monitor)?;
        let mut gp = opt.fit;
        gp.n_iter = opt.n_iter;
        if !cfg.optimize_inducing {
            return Ok(gp);
        }
        obj.params.values = params_at(&obj.params, &gp);
        obj.z = gp.inducing.clone();
        n_iter = gp.n_iter;
    }
    obj.optimize_inducing = true;
    let joint = OptimizerConfig {
        n_restarts: 0,
        ..cfg.optimizer.clone()
    };
    let opt = optimize::maximize(&*obj, &obj.start(), &joint, monitor)?;
    let mut gp = opt.fit;
    gp.n_iter = n_iter + opt.n_iter;
    Ok(gp)
}

/// The hyperparameter vector `(l.., σ², σ_n²)` of a fitted model, in the
/// layout of `params` (one length scale, or one per dimension).
fn params_at(params: &LogParams, gp: &SparseGp) -> Vec<f64> {
    let mut v: Vec<f64> = (0..params.n_length_scales())
        .map(|a| gp.params.length_scale_of(a))
        .collect();
    v.push(gp.params.variance);
    v.push(gp.noise_variance);
    v
}

#[cfg(test)]
mod tests {
    use ndarray::s;
    use rand::Rng as _;

    use super::super::gradient::accumulate_gradient;
    use super::*;

    const PAR: Parallelism = Parallelism::Rayon;
    use crate::gp::optimize::Hyper;

    fn data(n: usize, d: usize, seed: u64) -> (Array2<f64>, Array1<f64>) {
        let mut rng = crate::rng::seeded(seed);
        let x = Array2::from_shape_fn((n, d), |_| rng.random_range(-2.0..2.0));
        let y = x
            .rows()
            .into_iter()
            .map(|r| {
                (3.0_f64 * r[0]).sin()
                    + (2.0 * r[r.len() - 1]).cos()
                    + 0.1 * rng.random_range(-1.0..1.0)
            })
            .collect();
        (x, y)
    }

    /// The objective and gradient (w.r.t. the logs of all hyperparameters
    /// and `Z`) of a fitted model's own parameters, recomputed with the
    /// fit's chunks.
    fn reevaluate(gp: &SparseGp, x: &Array2<f64>, y: &Array1<f64>) -> (f64, Vec<f64>, Array2<f64>) {
        let pr = InducingPrior::new(
            gp.params.clone(),
            gp.noise_variance,
            gp.inducing.view(),
            Parallelism::Rayon,
        )
        .unwrap();
        let e = evaluate(
            &pr,
            gp.method,
            x.view(),
            y.view(),
            true,
            default_chunk_rows(gp.inducing.nrows()),
            true,
            Parallelism::Rayon,
            &Monitor::default(),
        )
        .unwrap();
        let g = e.gradient.unwrap();
        (e.bound.value, g.hyper, g.inducing)
    }

    fn config(method: Method, kernel: Kernel, ard: bool) -> SparseGpConfig {
        SparseGpConfig {
            kernel,
            method,
            n_inducing: 12,
            hyper: HyperInit {
                ard,
                ..Default::default()
            },
            optimizer: OptimizerConfig {
                n_restarts: 1,
                seed: 5,
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn fit(cfg: &SparseGpConfig, x: &Array2<f64>, y: &Array1<f64>) -> SparseGp {
        fit_sparse(
            x.view(),
            y.view(),
            cfg,
            Parallelism::Rayon,
            &Monitor::default(),
        )
        .unwrap()
    }

    #[test]
    fn the_fit_ends_at_a_stationary_point_above_the_start() {
        let (x, y) = data(150, 2, 1);
        for (method, kernel, ard) in [
            (Method::Vfe, Kernel::Gaussian, false),
            (Method::Vfe, Kernel::Matern52, true),
            (Method::Fitc, Kernel::Gaussian, true),
            (Method::Fitc, Kernel::Matern32, false),
        ] {
            let cfg = config(method, kernel, ard);
            let gp = fit(&cfg, &x, &y);
            // The start: the initial hyperparameters with no free entry.
            let fixed = SparseGpConfig {
                hyper: HyperInit {
                    optimize: vec![],
                    ..cfg.hyper.clone()
                },
                ..cfg.clone()
            };
            let start = fit(&fixed, &x, &y);
            assert_eq!(start.n_iter, 0);
            assert_eq!(start.inducing, gp.inducing, "the same selection");
            assert!(
                gp.objective > start.objective + 1.0,
                "{method:?} {kernel:?}: {} vs start {}",
                gp.objective,
                start.objective
            );
            // The model is the best evaluation's own: its objective and a
            // gradient that vanishes (the optimizer's tolerance is 1e−7 on
            // the gradient of objective / N).
            let (value, grad, _) = reevaluate(&gp, &x, &y);
            assert_eq!(
                value.to_bits(),
                gp.objective.to_bits(),
                "{method:?} {kernel:?}"
            );
            let norm = grad.iter().map(|g| g * g).sum::<f64>().sqrt() / x.nrows() as f64;
            assert!(
                norm < 1e-4,
                "{method:?} {kernel:?}: |grad|/N = {norm} {grad:?} {:?} {} {} {} iters {} jit {}",
                gp.params,
                gp.noise_variance,
                gp.objective,
                start.objective,
                gp.n_iter,
                gp.jitter()
            );
            assert!(gp.n_iter > 0);
            assert_eq!(gp.params.length_scale.len(), if ard { 2 } else { 1 });
        }
    }

    #[test]
    fn a_boundary_optimum_never_reports_a_bound_above_the_exact_lml() {
        // A linear trend: the bound grows towards l, σ² → ∞, where K_uu
        // becomes numerically singular. The fit stops there instead of
        // following the rounding error of the trace term (which, unguarded,
        // reports a "bound" of 10⁴ nats over an LML of 300); what rounding
        // the guard lets through (`1e−4 N` nats in the trace term, and the
        // other terms' own) stays within `1e−3 N` of VFE ≤ LML.
        let mut rng = crate::rng::seeded(9);
        let x = Array2::from_shape_fn((150, 2), |_| rng.random_range(-2.0..2.0));
        let y: Array1<f64> = x
            .rows()
            .into_iter()
            .map(|r| 0.3 * r.sum() + 0.05 * rng.random_range(-1.0..1.0))
            .collect();
        for kernel in [Kernel::Gaussian, Kernel::Matern52] {
            let gp = fit(&config(Method::Vfe, kernel, true), &x, &y);
            let ex = crate::gp::exact::log_marginal_likelihood(
                x.view(),
                (&y - y.mean().unwrap()).view(),
                &gp.params,
                gp.noise_variance,
                false,
                Parallelism::Rayon,
            )
            .unwrap();
            assert!(
                gp.objective <= ex.lml + 1e-3 * x.nrows() as f64,
                "{kernel:?}: {} vs {}",
                gp.objective,
                ex.lml
            );
        }
    }

    #[test]
    fn the_joint_objective_gradient_matches_central_differences() {
        // The second stage's coordinates: the free log hyperparameters
        // (none, one or one per dimension) and Z / l row-major (with l
        // fixed, the chain rule through Z = (Z / l) l only scales).
        let (x, y) = data(60, 3, 4);
        for (kernel, ard, optimize) in [
            (Kernel::Gaussian, false, true),
            (Kernel::Matern32, true, true),
            (Kernel::Gaussian, true, false),
        ] {
            let mut cfg = config(Method::Vfe, kernel, ard);
            cfg.n_inducing = 5;
            cfg.inducing = InducingInit::Random;
            if !optimize {
                cfg.hyper.optimize = vec![];
            }
            let rows = InMemory {
                x: x.view().into(),
                y: y.view().into(),
                chunk_rows: 17,
                par: PAR,
                scratch: Mutex::new(Vec::new()),
            };
            let mut obj =
                start_objective(rows, x.view(), y.view(), 5, &cfg, PAR, &Monitor::default())
                    .unwrap();
            obj.optimize_inducing = true;
            let theta = obj.start();
            let monitor = Monitor::default();
            let at = |t: &[f64]| obj.evaluate(t, &monitor).unwrap();
            let e = at(&theta);
            // The start reproduces the inducing inputs.
            let z = e.fit.inducing.clone();
            assert!((&z - &obj.z)
                .iter()
                .all(|v| v.abs() <= 1e-12 * (1.0 + z.len() as f64)));
            let h = 1e-5;
            for j in 0..theta.len() {
                let (mut tp, mut tm) = (theta.clone(), theta.clone());
                tp[j] += h;
                tm[j] -= h;
                let fd = (at(&tp).value - at(&tm).value) / (2.0 * h);
                assert!(
                    (fd - e.grad[j]).abs() < 1e-5 * (1.0 + fd.abs()),
                    "{kernel:?} ard {ard} θ_{j}: fd {fd} vs {}",
                    e.grad[j]
                );
            }
        }
    }

    #[test]
    fn fits_are_deterministic() {
        let (x, y) = data(120, 3, 2);
        for inducing in [
            InducingInit::GreedyVariance,
            InducingInit::KMeans,
            InducingInit::Random,
        ] {
            let cfg = SparseGpConfig {
                inducing,
                ..config(Method::Vfe, Kernel::Gaussian, true)
            };
            let a = fit(&cfg, &x, &y);
            let b = fit(&cfg, &x, &y);
            assert_eq!(a.objective.to_bits(), b.objective.to_bits());
            assert_eq!(a.inducing, b.inducing);
            assert_eq!(a.params, b.params);
            assert_eq!(a.weights, b.weights);
        }
    }

    #[test]
    fn optimizing_the_inducing_inputs_raises_the_bound() {
        let (x, y) = data(120, 2, 3);
        for method in [Method::Vfe, Method::Fitc] {
            let cfg = SparseGpConfig {
                n_inducing: 6,
                inducing: InducingInit::Random,
                ..config(method, Kernel::Gaussian, false)
            };
            let fixed = fit(&cfg, &x, &y);
            let free = fit(
                &SparseGpConfig {
                    optimize_inducing: true,
                    ..cfg.clone()
                },
                &x,
                &y,
            );
            assert!(
                free.objective > fixed.objective + 1.0,
                "{method:?}: {} vs {}",
                free.objective,
                fixed.objective
            );
            assert_ne!(free.inducing, fixed.inducing);
            assert!(free.n_iter > fixed.n_iter);
            // A stationary point in Z as well.
            let (_, _, gz) = reevaluate(&free, &x, &y);
            let norm = gz.iter().map(|g| g * g).sum::<f64>().sqrt() / x.nrows() as f64;
            assert!(norm < 1e-4, "{method:?}: |grad_Z|/N = {norm}");
        }
    }

    #[test]
    fn progress_messages_name_the_bound_or_the_fitc_lml() {
        let (x, y) = data(60, 2, 5);
        for (method, name) in [(Method::Vfe, "bound"), (Method::Fitc, "FITC LML")] {
            let monitor = Monitor::new();
            // A given kernel variance: its start and the data's are compared.
            let mut cfg = config(method, Kernel::Gaussian, false);
            cfg.hyper.kernel_variance = Some(5.0);
            fit_sparse(x.view(), y.view(), &cfg, Parallelism::Rayon, &monitor).unwrap();
            let messages = monitor.take_messages();
            let run = messages.iter().find(|m| m.starts_with("run 1/")).unwrap();
            assert!(run.contains(&format!(": {name} = ")), "{run}");
            let starts: Vec<_> = messages
                .iter()
                .filter(|m| m.starts_with("start "))
                .collect();
            assert_eq!(starts.len(), 2, "{messages:?}");
            assert!(
                starts[0].contains(", kernel variance 5.000000e0: ")
                    && starts.iter().all(|m| m.contains(&format!(": {name} = "))),
                "{starts:?}"
            );
            assert!(
                messages
                    .iter()
                    .any(|m| m.ends_with(&format!(" {name} evaluations"))),
                "{messages:?}"
            );
        }
    }

    #[test]
    fn fixed_hyperparameters_stay_fixed_and_the_bound_stays_below_the_exact_lml() {
        let (x, y) = data(80, 2, 4);
        let cfg = SparseGpConfig {
            hyper: HyperInit {
                noise_variance: Some(0.02),
                optimize: vec![Hyper::LengthScale, Hyper::KernelVariance],
                ..Default::default()
            },
            ..config(Method::Vfe, Kernel::Gaussian, false)
        };
        let gp = fit(&cfg, &x, &y);
        assert_eq!(gp.noise_variance, 0.02);
        let ex = crate::gp::exact::log_marginal_likelihood(
            x.view(),
            (&y - y.mean().unwrap()).view(),
            &gp.params,
            gp.noise_variance,
            false,
            Parallelism::Rayon,
        )
        .unwrap();
        assert!(
            gp.objective <= ex.lml + 1e-9,
            "{} vs {}",
            gp.objective,
            ex.lml
        );
    }

    /// A kernel-variance start far above the targets' variance makes the
    /// bound's trace term, `−(tr K_ff − tr Q_ff)/(2σ_n²)`, and so its
    /// gradient, 1e3-1e4 times larger per row than at the default start.
    /// L-BFGS's unscaled first step then jumped by that much in log space,
    /// onto the flat plateau of long length scales and vanishing kernel
    /// variance where only noise is left (the noise variance ends at the
    /// targets' variance) and the run stops. The first step is now at most
    /// a factor e, and such starts reach the signal. Further off (1e8), the
    /// bound could not be formed at the start (`K_uu` too ill-conditioned
    /// for a signal-to-noise ratio of 1e9); the fit now starts at the
    /// targets' variance, whose bound is higher on the coarsest level.
    #[test]
    fn a_kernel_variance_start_far_too_large_does_not_end_in_noise() {
        let mut rng = crate::rng::seeded(12);
        let x: Array2<f64> = Array2::from_shape_fn((900, 3), |_| rng.random_range(-2.0..2.0));
        let y: Array1<f64> = x
            .rows()
            .into_iter()
            .map(|r| r.sum().sin() + 0.1 * rng.random_range(-1.0..1.0))
            .collect();
        let var_y = y.var(0.0);
        let config = |kernel_variance: Option<f64>| SparseGpConfig {
            n_inducing: 48,
            hyper: HyperInit {
                kernel_variance,
                ..Default::default()
            },
            optimizer: OptimizerConfig {
                n_restarts: 0,
                ..Default::default()
            },
            ..Default::default()
        };
        let default = fit(&config(None), &x, &y);
        assert!(
            default.noise_variance < 0.1 * var_y,
            "{}",
            default.noise_variance
        );
        for factor in [1e3, 1e4, 1e6, 1e8] {
            let gp = fit(&config(Some(factor * var_y)), &x, &y);
            assert!(
                gp.noise_variance < 0.1 * var_y,
                "start {factor}: noise {} of a target variance {var_y}, bound {} against {}",
                gp.noise_variance,
                gp.objective,
                default.objective
            );
        }
    }

    /// Rows in memory that record the `want_grad` of every evaluation.
    struct Recorded<'a> {
        rows: InMemory<'a>,
        asked: Mutex<Vec<bool>>,
    }

    impl SparseRows for Recorded<'_> {
        fn n_rows(&self) -> usize {
            self.rows.n_rows()
        }

        fn evaluate(
            &self,
            prior: &InducingPrior,
            method: Method,
            center: bool,
            want_grad: bool,
            monitor: &Monitor,
        ) -> Result<(Bound, Option<Gradient>)> {
            self.asked.lock().unwrap().push(want_grad);
            self.rows
                .evaluate(prior, method, center, want_grad, monitor)
        }

        fn subsample(&self, _rows: &[usize]) -> Option<Self> {
            None
        }
    }

    /// The start objective of `cfg` (12 inducing inputs) on `(x, y)` in
    /// chunks of 32 rows, its rows recording what every evaluation asks.
    fn recorded_objective<'a>(
        x: &'a Array2<f64>,
        y: &'a Array1<f64>,
        cfg: &SparseGpConfig,
        monitor: &Monitor,
    ) -> SparseObjective<Recorded<'a>> {
        let rows = Recorded {
            rows: InMemory {
                x: x.view().into(),
                y: y.view().into(),
                chunk_rows: 32,
                par: PAR,
                scratch: Mutex::new(Vec::new()),
            },
            asked: Mutex::new(Vec::new()),
        };
        start_objective(rows, x.view(), y.view(), 12, cfg, PAR, monitor).unwrap()
    }

    #[test]
    fn a_fit_with_nothing_to_optimize_makes_the_statistics_pass_alone() {
        let (x, y) = data(90, 2, 6);
        for method in [Method::Vfe, Method::Fitc] {
            for optimize_inducing in [false, true] {
                let cfg = SparseGpConfig {
                    hyper: HyperInit {
                        length_scale: Some(vec![0.9]),
                        kernel_variance: Some(1.3),
                        noise_variance: Some(0.05),
                        optimize: vec![],
                        ..Default::default()
                    },
                    optimize_inducing,
                    optimizer: OptimizerConfig {
                        max_iter: 3,
                        ..config(method, Kernel::Gaussian, false).optimizer
                    },
                    ..config(method, Kernel::Gaussian, false)
                };
                let monitor = Monitor::default();
                let mut obj = recorded_objective(&x, &y, &cfg, &monitor);
                let gp = optimize_from(&mut obj, &cfg, &monitor).unwrap();
                let asked = obj.rows.asked.lock().unwrap().clone();
                if optimize_inducing {
                    // The stage over Z starts at once: every evaluation is
                    // the optimizer's, with its gradient.
                    assert!(!asked.is_empty() && asked.iter().all(|&g| g), "{asked:?}");
                } else {
                    assert_eq!(asked, [false]);
                    // The model is the one an evaluation with the gradient
                    // gives, to the bit.
                    let e = obj.evaluate(&[], &monitor).unwrap();
                    assert_eq!(gp.objective.to_bits(), e.fit.objective.to_bits());
                    assert_eq!(gp.weights, e.fit.weights);
                    assert_eq!(gp.n_iter, 0);
                }
            }
        }
    }

    #[test]
    fn the_comparison_of_starts_computes_values_alone() {
        // Given length scale and variances away from the data's: four
        // starts compared (rows without coarse levels: on all rows), each
        // from the statistics pass alone, then the optimizer's evaluations
        // with their gradients.
        let (x, y) = data(90, 2, 6);
        for method in [Method::Vfe, Method::Fitc] {
            let cfg = SparseGpConfig {
                hyper: HyperInit {
                    length_scale: Some(vec![0.3]),
                    kernel_variance: Some(50.0),
                    noise_variance: Some(0.5),
                    ..Default::default()
                },
                optimizer: OptimizerConfig {
                    max_iter: 3,
                    n_restarts: 0,
                    ..config(method, Kernel::Gaussian, false).optimizer
                },
                ..config(method, Kernel::Gaussian, false)
            };
            let monitor = Monitor::new();
            let mut obj = recorded_objective(&x, &y, &cfg, &monitor);
            let asked = obj.rows.asked.lock().unwrap().clone();
            assert_eq!(asked, [false; 4], "{method:?}");
            // The value is the one an evaluation with the gradient gives,
            // to the bit.
            let start = obj.start();
            let value = obj.value(&start, &monitor).unwrap();
            assert_eq!(
                value.to_bits(),
                obj.evaluate(&start, &monitor).unwrap().value.to_bits()
            );
            obj.rows.asked.lock().unwrap().clear();
            optimize_from(&mut obj, &cfg, &monitor).unwrap();
            let asked = obj.rows.asked.lock().unwrap().clone();
            assert!(!asked.is_empty() && asked.iter().all(|&g| g), "{asked:?}");
        }
    }

    #[test]
    fn coarse_levels_and_chunks_reach_the_same_optimum() {
        // 1,200 rows: a coarse level of 300 rows first. The fit without
        // coarse levels and one-row-at-a-time chunks end at the same
        // optimum (to the optimizer's tolerance).
        let (x, y) = data(1200, 2, 6);
        let cfg = SparseGpConfig {
            n_inducing: 16,
            optimizer: OptimizerConfig {
                n_restarts: 0,
                ..Default::default()
            },
            ..config(Method::Vfe, Kernel::Gaussian, false)
        };
        let a = fit(&cfg, &x, &y);
        let b = fit(
            &SparseGpConfig {
                chunk_rows: Some(333),
                optimizer: OptimizerConfig {
                    coarse_min_rows: usize::MAX,
                    ..cfg.optimizer.clone()
                },
                ..cfg.clone()
            },
            &x,
            &y,
        );
        assert!(
            (a.objective - b.objective).abs() < 1e-6 * a.objective.abs(),
            "{} vs {}",
            a.objective,
            b.objective
        );
    }

    #[test]
    fn coarse_levels_keep_at_least_as_many_rows_as_inducing_inputs() {
        // 1,200 rows: the coarse level of 300 rows runs for M = 16, not for
        // M = 301 (it would cost about what all rows do).
        let (x, y) = data(1200, 4, 6);
        for (m, coarse) in [(16, true), (301, false)] {
            let cfg = SparseGpConfig {
                n_inducing: m,
                inducing: InducingInit::Random,
                optimizer: OptimizerConfig {
                    n_restarts: 0,
                    ..Default::default()
                },
                ..config(Method::Vfe, Kernel::Gaussian, false)
            };
            let monitor = Monitor::new();
            fit_sparse(x.view(), y.view(), &cfg, Parallelism::Rayon, &monitor).unwrap();
            let messages = monitor.take_messages();
            let level = |rows: &str| messages.iter().any(|t| t.contains(rows));
            assert_eq!(level("300 rows"), coarse, "M = {m}: {messages:?}");
            assert!(level("1200 rows"), "M = {m}: {messages:?}");
        }
    }

    /// The statistics and (with `want_grad`) gradient sums of the coarse
    /// level `level` of `(x, y)` (rows `0, 4, 8, …` of the level above)
    /// under `prior`, each pass over one block or three merged: what a
    /// distributed evaluation's reductions give.
    fn level_sums(
        x: &Array2<f64>,
        y: &Array1<f64>,
        method: Method,
        prior: &InducingPrior,
        level: usize,
        want_grad: bool,
        three_blocks: bool,
    ) -> Result<(SparseStats, Option<GradientSums>)> {
        let (mut x, mut y) = (x.clone(), y.clone());
        for _ in 0..level {
            let rows: Vec<usize> = (0..x.nrows() / 4).map(|i| 4 * i).collect();
            x = x.select(Axis(0), &rows);
            y = y.select(Axis(0), &rows);
        }
        let n = x.nrows();
        let cuts: Vec<usize> = if three_blocks {
            vec![0, n / 3, n / 3, n]
        } else {
            vec![0, n]
        };
        let blocks = || {
            cuts.windows(2)
                .map(|w| (x.slice(s![w[0]..w[1], ..]), y.slice(s![w[0]..w[1]])))
        };
        let mut scratch = Vec::new();
        let mut stats = SparseStats::new(method, prior.n_inducing());
        for (xb, yb) in blocks() {
            let mut part = SparseStats::new(method, prior.n_inducing());
            part.accumulate(prior, xb, yb, &mut scratch, PAR)?;
            stats.merge(&part)?;
        }
        if !want_grad {
            return Ok((stats, None));
        }
        let b = bound(&stats, prior, true, true, PAR)?;
        let adj = b.adjoint.as_ref().unwrap();
        let (m, d) = prior.z.dim();
        let mut sums = GradientSums::new(method, m, d);
        for (xb, yb) in blocks() {
            let mut part = GradientSums::new(method, m, d);
            accumulate_gradient(&mut part, adj, prior, xb, yb, b.y_mean, &mut scratch, PAR)?;
            sums.merge(&part)?;
        }
        Ok((stats, Some(sums)))
    }

    #[test]
    fn the_fit_on_block_sums_follows_the_in_memory_fit() {
        // 700 rows and coarse levels from 128 rows on: a coarse level below
        // the full one, a restart and (once) the stage over Z.
        let (x, y) = data(700, 2, 8);
        let z = x.select(Axis(0), &(0..14).map(|i| 50 * i).collect::<Vec<_>>());
        // FITC with per-dimension length scales is multimodal here: a path
        // that rounding moves may end at another local optimum, so it is
        // checked on one block only.
        for (method, ard, optimize_inducing, uneven) in [
            (Method::Vfe, false, false, true),
            (Method::Fitc, true, false, false),
            (Method::Vfe, false, true, true),
        ] {
            let cfg = SparseGpConfig {
                inducing: InducingInit::Given(z.clone()),
                hyper: HyperInit {
                    length_scale: Some(vec![0.7]),
                    kernel_variance: Some(0.8),
                    noise_variance: Some(0.1),
                    ard,
                    ..Default::default()
                },
                optimize_inducing,
                optimizer: OptimizerConfig {
                    n_restarts: 1,
                    seed: 5,
                    coarse_min_rows: 128,
                    ..Default::default()
                },
                ..config(method, Kernel::Gaussian, ard)
            };
            let in_memory = fit(&cfg, &x, &y);
            // The in-memory fit's data scale, which rows held elsewhere do
            // not give.
            let cfg = SparseGpConfig {
                data_scale: Some(DataScale::of(x.view(), y.view(), ard).unwrap()),
                ..cfg
            };
            let case = format!("{method:?} ard {ard} Z {optimize_inducing}");
            // One block (the in-memory fit's one chunk): the same sums, so
            // the same evaluations bit for bit and the same path.
            let one = |prior: &InducingPrior, level: usize, want_grad: bool| {
                level_sums(&x, &y, method, prior, level, want_grad, false)
            };
            let blocks = fit_sparse_blocks(700, 2, &cfg, &one, PAR, &Monitor::default()).unwrap();
            assert_eq!(blocks.n_iter, in_memory.n_iter, "{case}");
            assert_eq!(
                blocks.objective.to_bits(),
                in_memory.objective.to_bits(),
                "{case}"
            );
            assert_eq!(blocks.params, in_memory.params, "{case}");
            assert_eq!(blocks.inducing, in_memory.inducing, "{case}");
            // Three blocks: the sums in another order (about 1e−15 relative
            // each). The fit ends where L-BFGS's steps meet the bound's
            // rounding noise, so the tail of the path (and the iteration
            // count) may differ, but not the optimum: the stop leaves
            // `‖g‖²/2 ≤ 5e−15` per row to gain in the preconditioned
            // variables. The two endpoints are the same optimum when the
            // in-memory bound rates them equally, to 1e−9 relative, and the
            // blocks' endpoint is stationary for it: they can then differ
            // only along directions in which the bound is that flat (here,
            // with Z free, a few 1e−6 relative in the noise variance and
            // 1e−5 in Z).
            if !uneven {
                continue;
            }
            let three = |prior: &InducingPrior, level: usize, want_grad: bool| {
                level_sums(&x, &y, method, prior, level, want_grad, true)
            };
            let blocks = fit_sparse_blocks(700, 2, &cfg, &three, PAR, &Monitor::default()).unwrap();
            assert!(
                (blocks.objective - in_memory.objective).abs() < 1e-9 * in_memory.objective.abs(),
                "{case}: {} vs {}",
                blocks.objective,
                in_memory.objective
            );
            let (value, grad, grad_z) = reevaluate(&blocks, &x, &y);
            assert!(
                (value - in_memory.objective).abs() < 1e-9 * in_memory.objective.abs(),
                "{case}: the in-memory bound at the blocks' end {value} vs {}",
                in_memory.objective
            );
            let mut norm2: f64 = grad.iter().map(|g| g * g).sum();
            if optimize_inducing {
                norm2 += grad_z.iter().map(|g| g * g).sum::<f64>();
            }
            let norm = norm2.sqrt() / x.nrows() as f64;
            assert!(norm < 1e-4, "{case}: |grad|/N = {norm}");
        }
    }

    #[test]
    fn the_fit_on_block_sums_asks_for_gradient_sums_only_where_needed() {
        // Given values away from the data's scale: the comparison of the
        // four starts asks for the statistics alone, every optimizer
        // evaluation for the gradient sums too, and a fit with nothing to
        // optimize for the statistics once.
        let (x, y) = data(200, 2, 9);
        let asked = Mutex::new(Vec::new());
        let sums = |prior: &InducingPrior, level: usize, want_grad: bool| {
            asked.lock().unwrap().push(want_grad);
            level_sums(&x, &y, Method::Vfe, prior, level, want_grad, true)
        };
        let start = SparseGpConfig {
            inducing: InducingInit::Given(x.slice(s![..8, ..]).to_owned()),
            hyper: HyperInit {
                length_scale: Some(vec![1.0]),
                kernel_variance: Some(1e4),
                noise_variance: Some(0.1),
                ..Default::default()
            },
            optimizer: OptimizerConfig {
                n_restarts: 0,
                max_iter: 5,
                ..Default::default()
            },
            data_scale: Some(DataScale::of(x.view(), y.view(), false).unwrap()),
            ..config(Method::Vfe, Kernel::Gaussian, false)
        };
        fit_sparse_blocks(200, 2, &start, &sums, PAR, &Monitor::default()).unwrap();
        let got = std::mem::take(&mut *asked.lock().unwrap());
        assert_eq!(got[..4], [false; 4], "{got:?}");
        assert!(got.len() > 4 && got[4..].iter().all(|&g| g), "{got:?}");
        let fixed = SparseGpConfig {
            hyper: HyperInit {
                optimize: vec![],
                ..start.hyper.clone()
            },
            ..start.clone()
        };
        fit_sparse_blocks(200, 2, &fixed, &sums, PAR, &Monitor::default()).unwrap();
        assert_eq!(*asked.lock().unwrap(), [false]);
        // Sums that leave out the gradient sums an evaluation asked for.
        let none = |prior: &InducingPrior, level: usize, _: bool| {
            level_sums(&x, &y, Method::Vfe, prior, level, false, true)
        };
        let e = fit_sparse_blocks(200, 2, &start, &none, PAR, &Monitor::default()).unwrap_err();
        assert!(e.to_string().contains("no gradient sums"), "{e}");
    }

    #[test]
    fn the_fit_on_block_sums_refuses_what_needs_the_rows() {
        let (x, y) = data(40, 2, 9);
        let sums = |prior: &InducingPrior, level: usize, want_grad: bool| {
            level_sums(&x, &y, Method::Vfe, prior, level, want_grad, true)
        };
        let given = SparseGpConfig {
            inducing: InducingInit::Given(x.slice(s![..4, ..]).to_owned()),
            hyper: HyperInit {
                length_scale: Some(vec![1.0]),
                kernel_variance: Some(1.0),
                noise_variance: Some(0.1),
                ..Default::default()
            },
            ..config(Method::Vfe, Kernel::Gaussian, false)
        };
        let run = |cfg: &SparseGpConfig, n: usize| {
            fit_sparse_blocks(n, 2, cfg, &sums, PAR, &Monitor::default()).unwrap_err()
        };
        let chosen = SparseGpConfig {
            inducing: InducingInit::KMeans,
            ..given.clone()
        };
        assert!(run(&chosen, 40).to_string().contains("inducing"));
        let no_noise = SparseGpConfig {
            hyper: HyperInit {
                noise_variance: None,
                ..given.hyper.clone()
            },
            ..given.clone()
        };
        assert!(run(&no_noise, 40).to_string().contains("noise_variance"));
        assert!(run(&given, 0).to_string().contains("training row"));
        // Sums of other rows than announced.
        assert!(run(&given, 41).to_string().contains("all 41 rows"));
        // Sums of the other method.
        let fitc = SparseGpConfig {
            method: Method::Fitc,
            ..given.clone()
        };
        assert!(run(&fitc, 40).to_string().contains("fitc statistics"));
    }

    #[test]
    fn bad_input_and_cancellation() {
        let (x, y) = data(30, 2, 7);
        let cfg = config(Method::Vfe, Kernel::Gaussian, false);
        let run = |cfg: &SparseGpConfig, x: ArrayView2<'_, f64>, y: ArrayView1<'_, f64>| {
            fit_sparse(x, y, cfg, Parallelism::Rayon, &Monitor::default())
        };
        let mut xn = x.clone();
        xn[(3, 1)] = f64::NAN;
        assert_eq!(
            run(&cfg, xn.view(), y.view()).unwrap_err(),
            Error::NonFinite { name: "X" }
        );
        assert!(matches!(
            run(&cfg, x.view(), y.slice(s![..29])).unwrap_err(),
            Error::ShapeMismatch { .. }
        ));
        let zero = SparseGpConfig {
            n_inducing: 0,
            ..cfg.clone()
        };
        assert!(run(&zero, x.view(), y.view())
            .unwrap_err()
            .to_string()
            .contains("n_inducing"));
        let wide = SparseGpConfig {
            inducing: InducingInit::Given(Array2::zeros((4, 3))),
            ..cfg.clone()
        };
        assert!(matches!(
            run(&wide, x.view(), y.view()).unwrap_err(),
            Error::ShapeMismatch {
                expected: 2,
                got: 3,
                ..
            }
        ));
        // M > N is clamped to N.
        let many = SparseGpConfig {
            n_inducing: 500,
            ..cfg.clone()
        };
        assert_eq!(run(&many, x.view(), y.view()).unwrap().inducing.nrows(), 30);
        let monitor = Monitor::default();
        monitor.cancel();
        assert_eq!(
            fit_sparse(x.view(), y.view(), &cfg, Parallelism::Rayon, &monitor).unwrap_err(),
            Error::Interrupted
        );
    }

    /// Fixed hyperparameters, `n` rows of [`data`] in 8 dimensions, `m`
    /// random inducing rows, the Gaussian kernel with length scale `l`,
    /// noise variance 1e−3.
    fn conditioning_case(n: usize, m: usize, l: f64) -> (Array2<f64>, Array1<f64>, SparseGpConfig) {
        let (x, y) = data(n, 8, 3);
        let cfg = SparseGpConfig {
            n_inducing: m,
            inducing: InducingInit::Random,
            hyper: HyperInit {
                length_scale: Some(vec![l]),
                kernel_variance: Some(1.0),
                noise_variance: Some(1e-3),
                ard: false,
                optimize: vec![],
            },
            ..Default::default()
        };
        (x, y, cfg)
    }

    /// With a length scale far beyond the inputs' spread, `K_uu` has
    /// `κ ≈ 1e13`: the rounding of the kernel-space statistics reached `B`
    /// through `L^{−1}` and `B` could not be factored. Whitened statistics
    /// keep the bound accurate: the fit succeeds, and its bound is a lower
    /// bound of the exact log marginal likelihood.
    #[test]
    fn a_nearly_singular_k_uu_gets_whitened_statistics_and_a_true_lower_bound() {
        let (x, y, cfg) = conditioning_case(100, 50, 230.0);
        let gp = fit_sparse(
            x.view(),
            y.view(),
            &cfg,
            Parallelism::Rayon,
            &Monitor::default(),
        )
        .unwrap();
        let prior = InducingPrior::new(
            gp.params.clone(),
            gp.noise_variance,
            gp.inducing.view(),
            Parallelism::Rayon,
        )
        .unwrap();
        assert!(prior.whiten() && prior.jitter() == 0.0);
        // The bound is of the centered targets.
        let yc = &y - y.mean().unwrap_or(0.0);
        let exact = crate::gp::exact::log_marginal_likelihood(
            x.view(),
            yc.view(),
            &gp.params,
            gp.noise_variance,
            false,
            Parallelism::Rayon,
        )
        .unwrap()
        .lml;
        assert!(
            gp.objective.is_finite() && gp.objective <= exact,
            "{} > {exact}",
            gp.objective
        );
    }

    /// Inducing inputs too ill-conditioned for float32 statistics (the
    /// length scale against the inputs' spread of the Python test, whose
    /// `K_uu` has a condition number of about 1e11, with the noise variance
    /// 1e−3: the
    /// rounding of the GPU's kernel values leaves `B` indefinite or the
    /// Nyström trace above the kernel's) are refused on the GPU with the
    /// error that names the float32 statistics, while the CPU fits them;
    /// the fall-back of `Auto` is tested in tests/test_gpu_sparse_gp.py (it
    /// needs a hardware adapter, or RANDFEAT_GPU=software set for the
    /// process).
    #[cfg(feature = "gpu")]
    #[test]
    fn statistics_too_ill_conditioned_for_float32_are_refused_on_the_gpu() {
        let (x, y, cfg) = conditioning_case(100, 50, 65.0);
        let cpu = fit(&cfg, &x, &y);
        assert!(!cpu.on_gpu && cpu.objective.is_finite());
        let on_gpu = SparseGpConfig {
            device: Device::Gpu,
            ..cfg
        };
        let err = fit_sparse(
            x.view(),
            y.view(),
            &on_gpu,
            Parallelism::Rayon,
            &Monitor::default(),
        )
        .unwrap_err();
        assert_eq!(err, Error::GpuStatisticsNotPositiveDefinite { m: 50 });
        let msg = err.to_string();
        assert!(
            msg.contains("M = 50") && msg.contains("float32") && msg.contains("device=\"cpu\""),
            "{msg}"
        );
    }

    /// The GPU path's mechanics: the optimizer's path is the CPU's (the same
    /// hyperparameters, inducing inputs and iterations), the final statistics
    /// run on the device, and FITC is refused. (The accuracy of the GPU
    /// statistics is checked against its bound in `crate::gpu`'s tests, the
    /// bound and predictions against their first-order bounds in
    /// tests/test_gpu_sparse_gp.py; here only a sanity check of 1e-4.)
    #[cfg(feature = "gpu")]
    #[test]
    fn the_gpu_computes_the_final_statistics_of_vfe_only() {
        let (x, y) = data(200, 2, 8);
        let cfg = config(Method::Vfe, Kernel::Matern52, true);
        let cpu = fit(&cfg, &x, &y);
        let on_gpu = SparseGpConfig {
            device: Device::Gpu,
            ..cfg.clone()
        };
        let before = gpu::dispatch_count();
        let g = fit(&on_gpu, &x, &y);
        assert!(gpu::dispatch_count() > before);
        assert!(g.on_gpu && !cpu.on_gpu);
        assert_eq!(g.params, cpu.params);
        assert_eq!(g.inducing, cpu.inducing);
        assert_eq!(g.n_iter, cpu.n_iter);
        assert!(
            (g.objective - cpu.objective).abs() < 1e-4 * cpu.objective.abs(),
            "{} vs {}",
            g.objective,
            cpu.objective
        );
        let fixed = SparseGpConfig {
            hyper: HyperInit {
                optimize: vec![],
                ..on_gpu.hyper.clone()
            },
            ..on_gpu.clone()
        };
        let before = gpu::dispatch_count();
        assert_eq!(fit(&fixed, &x, &y).n_iter, 0);
        assert!(gpu::dispatch_count() > before);
        for device in [Device::Gpu, Device::Auto] {
            let fitc = SparseGpConfig {
                method: Method::Fitc,
                device,
                ..cfg.clone()
            };
            let r = fit_sparse(
                x.view(),
                y.view(),
                &fitc,
                Parallelism::Rayon,
                &Monitor::default(),
            );
            match device {
                Device::Gpu => assert!(matches!(
                    r.unwrap_err(),
                    Error::InvalidParameter { name: "device", .. }
                )),
                _ => assert!(r.is_ok()),
            }
        }
    }
}
