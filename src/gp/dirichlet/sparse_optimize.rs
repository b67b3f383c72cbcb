//! Hyperparameters of the sparse classifier (docs/math/classification.rst,
//! "Inducing points"): the length scale(s) and kernel variance maximize the
//! summed VFE bound `Σ_c F_c` by the generic L-BFGS path of
//! [`optimize::maximize`], the inducing inputs fixed where they were chosen
//! at the initial hyperparameters.
//!
//! The noise `Σ_c` does not move with the hyperparameters, so per class
//! (with `Σ = K_uu + S_c`, `α_c = Σ⁻¹b_c`, the FITC-form statistics `S_c`,
//! `b_c` of [`SparseClassStats::class_stats`])
//!
//! ```text
//! ∂F_c/∂S_c = ½(K_uu⁻¹ − Σ⁻¹) − ½α_cα_cᵀ =: P_c,   ∂F_c/∂b_c = α_c,
//! ∂F_c/∂K_uu = ½(K_uu⁻¹ − Σ⁻¹) − ½α_cα_cᵀ − ½K_uu⁻¹S_cK_uu⁻¹,
//! ```
//!
//! and `∂F_c/∂k_i = σ_ic⁻² (2P_c k_i + r_ic α_c)` for the row's kernel
//! column `k_i`. Summed over the classes it depends on the row only
//! through its true class `k`: `2(P/σ²₀ + ω P_k) k_i + v_k` with `P =
//! Σ_c P_c`, `ω = 1/σ²₁ − 1/σ²₀` and `v_k = Σ_c (ỹ₀ − m_c)α_c/σ²₀ +
//! ((ỹ₁ − m_k)/σ²₁ − (ỹ₀ − m_k)/σ²₀) α_k`: the sparse GP's VFE adjoint
//! (`2 ∂F/∂S`, `∂F/∂b`, unit targets) of class `k`, contracted with the
//! kernel's slopes by [`accumulate_gradient`] over that class's rows (a
//! second pass, `O(N M²)` for all classes).
//!
//! The matrices are formed as the sparse GP's VFE adjoints are, from the
//! whitened statistics `C_c = L⁻¹S_cL⁻ᵀ`, `e_c = L⁻¹b_c`, `β̃_c = B_c⁻¹e_c`
//! (`B_c = I + C_c`) with `L⁻¹` applied last: `P_c = L⁻ᵀP̃_cL⁻¹` with
//! `P̃_c = ½(I − B_c⁻¹ − β̃_cβ̃_cᵀ)`, `∂F_c/∂K_uu = −½L⁻ᵀH_cL⁻¹` with
//! `H_c = B_c⁻¹C_c² + β̃_cβ̃_cᵀ`, and the whole slope in `ln σ²` is
//! `Σ_c (½ tr H_c − ½ Σ_i k_ii/σ²_ic)` (every statistic scales with a power
//! of `σ²`). The kernel-space matrices have entries of order `κ(K_uu)/σ²`
//! that cancel to order 1 and lose the digits the gradient needs at large
//! `κ`; where the statistics are whitened, the second pass also multiplies
//! `2(P̃/σ²₀ + ωP̃_k)` with the whitened columns `L⁻¹k_i`.

use std::borrow::Cow;

use ndarray::{s, Array1, Array2, ArrayView2, Axis, CowArray, Ix2};

use super::optimize::FreeHypers;
use super::rows_by_class;
use super::sparse::{
    accumulate_rows, checked_inducing, class_prior, SparseClassStats, SparseGpc, SparseGpcConfig,
};
use crate::error::{Error, Result};
use crate::gp::optimize::{
    self, data_length_scales, Evaluation, LogParams, Objective, OptimizerConfig,
};
use crate::gp::sparse::bound::{sandwich, solve_vec, whitened, Adjoint, WhitenedAdjoint};
use crate::gp::sparse::{accumulate_gradient, finish, GradientSums, InducingPrior, Method};
use crate::kernels::{Kernel, StationaryKernel};
use crate::linalg::as_faer_mut;
use crate::progress::Monitor;
use crate::threads::Parallelism;

/// The gradient of `Σ_c F_c` of the fitted `gpc` (from `stats` of the rows
/// `(x, labels)` under `prior`) with respect to `(ln l.., ln σ², ln σ_n²)`
/// (the last entry 0: no noise variance), by the module docs' adjoints and
/// a second pass over every class's rows in chunks of `chunk_rows`.
///
/// # Errors
/// As [`accumulate_gradient`]; [`Error::Interrupted`](crate::error::Error::Interrupted) once `monitor` is
/// cancelled.
#[allow(clippy::too_many_arguments)]
pub(crate) fn bound_gradient(
    stats: &SparseClassStats,
    prior: &InducingPrior,
    gpc: &SparseGpc,
    x: ArrayView2<'_, f64>,
    labels: &[usize],
    chunk_rows: usize,
    par: Parallelism,
    monitor: &Monitor,
) -> Result<Vec<f64>> {
    let t = &gpc.transform;
    let l = prior.chol();
    let (m, d) = prior.z.dim();
    let (a1, a0) = (1.0 / t.noise_in, 1.0 / t.noise_out);
    // The whitened P̃_c = Lᵀ P_c L, summed and per class, and Σ_c H_c.
    let mut p_sum = Array2::<f64>::zeros((m, m));
    let mut per_class = Vec::with_capacity(gpc.n_classes());
    let mut h_sum = Array2::<f64>::zeros((m, m));
    let mut d_log_variance = 0.0;
    let mut v_out = Array1::<f64>::zeros(m);
    for (c, lat) in gpc.classes.iter().enumerate() {
        monitor.check()?;
        let w = stats.class_stats(c, t);
        let (b, _) = w.centered(true);
        let (cmat, e) = whitened(&w, b, l, par);
        // β̃ = B⁻¹ L⁻¹ b (α_c = L⁻ᵀ β̃).
        let half = solve_vec(&lat.chol_b, e.view(), true, par);
        let beta = solve_vec(&lat.chol_b, half.view(), false, par);
        let WhitenedAdjoint { i_minus, bbt, h } =
            WhitenedAdjoint::new(&cmat, &lat.chol_b, &beta, par);
        // S ∝ σ⁴, b ∝ σ², K_uu ∝ σ² (its jitter included) and Σ k_ii/σ²_ic
        // ∝ σ²: the whole slope in ln σ² (as the sparse GP's VFE bound).
        d_log_variance += 0.5 * h.diag().sum() - 0.5 * w.kff_sum;
        h_sum += &h;
        v_out.scaled_add((t.target_out - lat.mean) * a0, &lat.weights);
        let p = (&i_minus - &bbt) * 0.5;
        p_sum += &p;
        per_class.push(p);
    }
    // Whitened statistics ask the second pass for whitened columns: the
    // adjoint times L⁻¹k_i, with L⁻ᵀ applied to the product.
    let whiten = prior.whiten();
    let mut sums = GradientSums::new(Method::Vfe, m, d);
    let mut scratch = Vec::new();
    for (k, rows) in rows_by_class(labels, gpc.n_classes()).iter().enumerate() {
        let lat = &gpc.classes[k];
        let mut vector = v_out.clone();
        let own = (t.target_in - lat.mean) * a1 - (t.target_out - lat.mean) * a0;
        vector.scaled_add(own, &lat.weights);
        let mut left = (&p_sum * a0 + &(&per_class[k] * (a1 - a0))) * 2.0;
        if whiten {
            l.solve_upper_in_place(as_faer_mut(left.view_mut()), par);
        } else {
            left = sandwich(l, &left, false, par);
        }
        let adjoint = Adjoint {
            method: Method::Vfe,
            left,
            left_whitened: whiten,
            vector,
            d_kuu: Array2::zeros((0, 0)),
            d_log_variance: 0.0,
            d_log_noise: 0.0,
        };
        let xk = x.select(Axis(0), rows);
        let ones = Array1::<f64>::ones(rows.len());
        for start in (0..rows.len()).step_by(chunk_rows) {
            monitor.check()?;
            let stop = (start + chunk_rows).min(rows.len());
            accumulate_gradient(
                &mut sums,
                &adjoint,
                prior,
                xk.slice(s![start..stop, ..]),
                ones.slice(s![start..stop]),
                0.0,
                &mut scratch,
                par,
            )?;
        }
    }
    let total = Adjoint {
        method: Method::Vfe,
        left: Array2::zeros((0, 0)),
        left_whitened: false,
        vector: Array1::zeros(0),
        d_kuu: sandwich(l, &h_sum, false, par) * -0.5,
        d_log_variance,
        d_log_noise: 0.0,
    };
    Ok(finish(&total, prior, &sums, par).hyper)
}

/// `Σ_c F_c` as an [`Objective`] of the free log hyperparameters, `Z`
/// fixed; an evaluation's fit is the classifier there.
pub(crate) struct SparseGpcBound<'a> {
    x: CowArray<'a, f64, Ix2>,
    labels: Cow<'a, [usize]>,
    n_classes: usize,
    kernel: Kernel,
    params: LogParams,
    z: Array2<f64>,
    alpha_epsilon: f64,
    chunk_rows: usize,
    par: Parallelism,
}

impl SparseGpcBound<'_> {
    /// The prior at `θ`.
    fn prior(&self, theta: &[f64]) -> Result<InducingPrior> {
        let v = self.params.at(theta)?;
        let k = self.params.n_length_scales();
        let kernel = StationaryKernel {
            kernel: self.kernel,
            length_scale: v[..k].to_vec(),
            variance: v[k],
        };
        class_prior(kernel, self.alpha_epsilon, self.z.view(), self.par)
    }

    /// The prior at `θ`, the statistics of the rows under it and the
    /// classifier they give (the first pass of an evaluation).
    fn classifier(
        &self,
        theta: &[f64],
        monitor: &Monitor,
    ) -> Result<(InducingPrior, SparseClassStats, SparseGpc)> {
        let prior = self.prior(theta)?;
        // A monitor that shares only the cancellation: the rows of an
        // evaluation are not a stage of the fit (whose stage is the
        // optimizer's runs).
        let stats = accumulate_rows(
            &prior,
            self.x.view(),
            &self.labels,
            self.n_classes,
            self.chunk_rows,
            self.par,
            &monitor.linked(),
        )?;
        let gpc =
            SparseGpc::from_stats(&stats, prior.clone(), self.alpha_epsilon, self.par, monitor)?;
        Ok((prior, stats, gpc))
    }
}

impl Objective for SparseGpcBound<'_> {
    type Fit = SparseGpc;

    fn n_rows(&self) -> usize {
        self.x.nrows()
    }

    fn value_name(&self) -> &'static str {
        "bound"
    }

    fn evaluate(&self, theta: &[f64], monitor: &Monitor) -> Result<Evaluation<SparseGpc>> {
        let (prior, stats, gpc) = self.classifier(theta, monitor)?;
        let grad = bound_gradient(
            &stats,
            &prior,
            &gpc,
            self.x.view(),
            &self.labels,
            self.chunk_rows,
            self.par,
            monitor,
        )?;
        Ok(Evaluation {
            value: gpc.bound(),
            grad: self.params.select(&grad),
            fit: gpc,
        })
    }

    /// The bound from the statistics pass alone.
    fn value(&self, theta: &[f64], monitor: &Monitor) -> Result<f64> {
        Ok(self.classifier(theta, monitor)?.2.bound())
    }

    /// The coarse levels: the same bound on a subset of the rows.
    fn subsample(&self, rows: &[usize]) -> Result<Option<Self>> {
        Ok(Some(Self {
            x: self.x.select(Axis(0), rows).into(),
            labels: Cow::Owned(rows.iter().map(|&i| self.labels[i]).collect()),
            n_classes: self.n_classes,
            kernel: self.kernel,
            params: self.params.clone(),
            z: self.z.clone(),
            alpha_epsilon: self.alpha_epsilon,
            chunk_rows: self.chunk_rows,
            par: self.par,
        }))
    }
}

/// Fits the sparse classifier with the hyperparameters in `free` fitted:
/// the inducing inputs chosen at `cfg`'s kernel (a free length scale: at
/// `cfg`'s or at the median pairwise distance of `x`, whichever gives the
/// higher bound there), then L-BFGS on `Σ_c F_c` from there ([`optimize::maximize`], `optimizer.n_restarts` restarts);
/// the best evaluation's classifier and the L-BFGS iterations. With
/// nothing free, [`SparseGpc::fit`] (0 iterations).
///
/// # Errors
/// As [`SparseGpc::fit`]; [`crate::Error::InvalidParameter`] for a kernel
/// variance or length scale that is not positive.
#[allow(clippy::too_many_arguments)]
pub fn fit_sparse_gpc(
    x: ArrayView2<'_, f64>,
    labels: &[usize],
    n_classes: usize,
    cfg: &SparseGpcConfig,
    free: FreeHypers,
    optimizer: &OptimizerConfig,
    par: Parallelism,
    monitor: &Monitor,
) -> Result<(SparseGpc, u64)> {
    if free == FreeHypers::default() {
        return Ok((SparseGpc::fit(x, labels, n_classes, cfg, par, monitor)?, 0));
    }
    // The bound from the inducing inputs chosen at the length scales `l`.
    let bound_at = |l: &[f64]| -> Result<SparseGpcBound<'_>> {
        let mut at = cfg.clone();
        at.kernel.length_scale = l.to_vec();
        let (z, chunk_rows) = checked_inducing(x, labels, n_classes, &at, par, monitor)?;
        Ok(SparseGpcBound {
            x: x.reborrow().into(),
            labels: Cow::Borrowed(labels),
            n_classes,
            kernel: cfg.kernel.kernel,
            params: free.params(l.to_vec(), cfg.kernel.variance)?,
            z,
            alpha_epsilon: cfg.alpha_epsilon,
            chunk_rows,
            par,
        })
    };
    let given = &cfg.kernel.length_scale;
    // The data's scale: per column with per-dimension length scales (the
    // inducing inputs then follow the units of every column).
    let data = free
        .length_scale
        .then(|| data_length_scales(x, given.len() > 1));
    let candidates = optimize::length_scale_starts(given, data);
    // With a free length scale the run starts from the given length scales
    // or the data's scale, inducing inputs chosen at each, whichever bound
    // is higher there (see `optimize::best_start`); a data-scale start
    // whose inducing inputs cannot be chosen is passed over.
    let mut objs = vec![Ok(bound_at(&candidates[0])?)];
    objs.extend(
        candidates[1..]
            .iter()
            .map(|l| bound_at(l).map_err(|e| e.to_string())),
    );
    let best = if candidates.len() == 1 {
        0
    } else {
        optimize::best_start(
            &candidates,
            |l| {
                let i = candidates.iter().position(|c| c == l).unwrap_or(0);
                let obj = objs[i]
                    .as_ref()
                    .map_err(|e| Error::invalid("inducing", e.clone()))?;
                obj.value(&obj.params.start(), monitor)
            },
            "bound",
            x.nrows(),
            monitor,
        )?
    };
    let obj = objs
        .swap_remove(best)
        .map_err(|e| Error::invalid("inducing", e))?;
    let opt = optimize::maximize(&obj, &obj.params.start(), optimizer, monitor)?;
    Ok((opt.fit, opt.n_iter))
}

#[cfg(test)]
#[path = "sparse_optimize_tests.rs"]
mod tests;
