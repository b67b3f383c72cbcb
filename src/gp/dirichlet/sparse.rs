//! The Dirichlet GP classifier on the inducing-point model (see
//! docs/math/classification.rst, "Inducing points"): every class's
//! transformed regression (heteroscedastic noise `Σ_c`) under Titsias'
//! collapsed variational bound with `M` inducing inputs `Z`,
//!
//! ```text
//! F_c = ln N(r_c | 0, Q_ff + Σ_c) − ½ tr(Σ_c⁻¹(K_ff − Q_ff)),   r_c = ỹ_c − m_c,
//! ```
//!
//! `Q_ff = K_fu K_uu⁻¹ K_uf`. Its data enter through `K_uf Σ_c⁻¹ K_fu`,
//! `K_uf Σ_c⁻¹ r_c`, `r_cᵀΣ_c⁻¹r_c`, `Σ ln σ²_ic`, `Σ k_ii/σ²_ic` and
//! `Σ q_ii/σ²_ic`. The noise takes two values per class (in class `σ²₁`,
//! out `σ²₀`), so all of them come from per-true-class sums of one pass
//! over the rows ([`SparseClassStats`]: `G_k = K_u,k K_k,u`, `s_k =
//! K_u,k 1`, `n_k`, `Σ_{i∈k} k_ii` over the rows of class `k`) as weighted
//! sums, e.g. `K_uf Σ_c⁻¹ K_fu = G/σ²₀ + (1/σ²₁ − 1/σ²₀) G_c` with `G =
//! Σ_k G_k`: `O(N M²)` for every class together, not `C` times that.
//!
//! The first term is the log likelihood of the FITC form of
//! [`crate::gp::sparse::bound()`] with the diagonal `Λ = Σ_c` (its statistics
//! weighted by `1/Λ`, [`SparseClassStats::class_stats`]); the trace term
//! is added from `G_k` (`Σ_{i∈k} q_ii = tr(L⁻¹ G_k L⁻ᵀ)`). Predictions are
//! those of the sparse GP with the same `B_c = I + L⁻¹ K_uf Σ_c⁻¹ K_fu L⁻ᵀ`:
//! `μ*_c = m_c + k_*ᵀ w_c`, `v*_c = k** − ‖L⁻¹k_*‖² + ‖L_{B_c}⁻¹L⁻¹k_*‖²`.

use ndarray::{s, Array1, Array2, ArrayView2, Axis};

use super::{check_labels, rows_by_class, LabelTransform};
use crate::error::{check_finite, Error, Result};
use crate::gp::exact::check_training_data;
use crate::gp::sparse::bound::{sandwich, TRACE_TOL};
use crate::gp::sparse::model::{solved_norms, TestBlocks};
use crate::gp::sparse::{
    bound, default_chunk_rows, select_inducing, InducingInit, InducingPrior, Method, SparseStats,
};
use crate::kernels::StationaryKernel;
use crate::linalg::Cholesky;
use crate::progress::Monitor;
use crate::threads::Parallelism;

/// Per-true-class statistics of the sparse classifier: for every class `k`
/// a [`SparseStats`] of its rows with unit weights (VFE) and zero targets:
/// `gram = G_k`, `k_sum = s_k`, `n = n_k`, `kff_sum = Σ_{i∈k} k_ii` (see
/// the module docs). Accumulated over row chunks under one
/// [`InducingPrior`] and merged exactly.
#[derive(Clone, Debug, PartialEq)]
pub struct SparseClassStats {
    /// One set of statistics per class.
    pub classes: Vec<SparseStats>,
}

impl SparseClassStats {
    /// Empty statistics for `n_classes` classes and `M` inducing inputs.
    pub fn new(n_classes: usize, n_inducing: usize) -> Self {
        Self {
            classes: (0..n_classes)
                .map(|_| SparseStats::new(Method::Vfe, n_inducing))
                .collect(),
        }
    }

    /// The number of rows `N` over all classes.
    pub fn n(&self) -> u64 {
        // Saturating, as `ClassStats::n`.
        self.classes.iter().fold(0u64, |t, s| t.saturating_add(s.n))
    }

    /// Adds a row chunk `x` (`n × d`) with class labels (`n`, each `< C`):
    /// the rows of each class are gathered and added to its statistics, so
    /// every row's kernel block is computed once whatever `C`. `scratch` is
    /// reused between chunks.
    ///
    /// # Errors
    /// [`Error::ShapeMismatch`] for `labels` of the wrong length, `x` of
    /// the wrong width or statistics of another `M`;
    /// [`Error::InvalidParameter`] (`y`) for a label out of range or
    /// statistics of another prior; [`Error::NonFinite`] for NaN in `x`.
    /// Nothing is changed then.
    pub fn accumulate(
        &mut self,
        prior: &InducingPrior,
        x: ArrayView2<'_, f64>,
        labels: &[usize],
        scratch: &mut Vec<f64>,
        par: Parallelism,
    ) -> Result<()> {
        if labels.len() != x.nrows() {
            return Err(Error::ShapeMismatch {
                name: "length of y (the number of rows of X)",
                expected: x.nrows(),
                got: labels.len(),
            });
        }
        check_labels(labels, self.classes.len())?;
        // Every refusal before the first class changes: a chunk is added to
        // all the classes or to none.
        Error::check_n_features(prior.z.ncols(), x.ncols())?;
        check_finite("X", x.iter())?;
        for stats in &self.classes {
            stats.check_accumulate(prior)?;
        }
        let rows = rows_by_class(labels, self.classes.len());
        for (stats, idx) in self.classes.iter_mut().zip(&rows) {
            if idx.is_empty() {
                continue;
            }
            // Checked above, for the whole chunk.
            let zeros = Array1::<f64>::zeros(idx.len());
            if idx.len() == x.nrows() {
                stats.add_checked(prior, x, zeros.view(), scratch, par)?;
            } else {
                let part = x.select(Axis(0), idx);
                stats.add_checked(prior, part.view(), zeros.view(), scratch, par)?;
            }
        }
        Ok(())
    }

    /// Adds the statistics of other rows under the same prior.
    ///
    /// # Errors
    /// [`Error::ShapeMismatch`] for another number of classes or `M`,
    /// [`Error::InvalidParameter`] for statistics of another prior; nothing
    /// is changed then.
    pub fn merge(&mut self, other: &SparseClassStats) -> Result<()> {
        if other.classes.len() != self.classes.len() {
            return Err(Error::ShapeMismatch {
                name: "number of classes of the statistics to merge",
                expected: self.classes.len(),
                got: other.classes.len(),
            });
        }
        for (a, b) in self.classes.iter().zip(&other.classes) {
            a.check_merge(b)?;
        }
        // On a copy: a class whose sums would overflow leaves every class
        // as it was.
        let mut merged = self.clone();
        for (a, b) in merged.classes.iter_mut().zip(&other.classes) {
            a.merge(b)?;
        }
        *self = merged;
        Ok(())
    }

    /// The statistics of class `c`'s regression with the per-row weights
    /// `1/σ²_ic` of `transform` (the weighted sums of the module docs), in
    /// the weighted (FITC) form of [`SparseStats`] with `Λ = Σ_c`: `gram =
    /// K_uf Σ_c⁻¹ K_fu`, `k_y = K_uf Σ_c⁻¹ ỹ_c`, `k_sum = K_uf Σ_c⁻¹ 1`,
    /// the weighted target sums, `log_lambda_sum = Σ ln σ²_ic` and
    /// `kff_sum = Σ k_ii/σ²_ic`.
    ///
    /// # Panics
    /// When `c` is not a class.
    pub fn class_stats(&self, c: usize, transform: &LabelTransform) -> SparseStats {
        let m = self.classes[c].n_inducing();
        let mut gram = Array2::<f64>::zeros((m, m));
        let mut k_sum = Array1::<f64>::zeros(m);
        let mut kff = 0.0;
        for s in &self.classes {
            gram += &s.gram;
            k_sum += &s.k_sum;
            kff += s.kff_sum;
        }
        let sc = &self.classes[c];
        let (a1, a0) = (1.0 / transform.noise_in, 1.0 / transform.noise_out);
        let (t1, t0) = (transform.target_in, transform.target_out);
        let n = self.n();
        let (n1, n0) = (sc.n as f64, (n - sc.n) as f64);
        gram.mapv_inplace(|v| v * a0);
        gram.scaled_add(a1 - a0, &sc.gram);
        // Σ over rows out of the class of k_i: s − s_c.
        let out_sum = &k_sum - &sc.k_sum;
        let mut k_y = out_sum.mapv(|v| v * t0 * a0);
        k_y.scaled_add(t1 * a1, &sc.k_sum);
        let mut w_k = out_sum.mapv(|v| v * a0);
        w_k.scaled_add(a1, &sc.k_sum);
        SparseStats {
            method: Method::Fitc,
            gram,
            k_y,
            k_sum: w_k,
            n,
            y_shift: 0.0,
            y_sum: n1 * t1 + n0 * t0,
            w_sum: n1 * a1 + n0 * a0,
            wy_sum: n1 * t1 * a1 + n0 * t0 * a0,
            wyy_sum: n1 * t1 * t1 * a1 + n0 * t0 * t0 * a0,
            kff_sum: sc.kff_sum * a1 + (kff - sc.kff_sum) * a0,
            log_lambda_sum: n1 * transform.noise_in.ln() + n0 * transform.noise_out.ln(),
            // Weighted sums of whitened statistics are whitened (a class
            // without rows holds zeros either way).
            whitened: self.classes.iter().any(|s| s.whitened),
        }
    }
}

/// The fitted latent GP of one class on the inducing-point model.
#[derive(Clone, Debug)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct SparseLatent {
    /// The factor `L_B` of `B_c = I + L⁻¹ K_uf Σ_c⁻¹ K_fu L⁻ᵀ`.
    pub chol_b: Cholesky,
    /// The predictive-mean weights `w_c = (K_uu + K_uf Σ_c⁻¹ K_fu)⁻¹
    /// K_uf Σ_c⁻¹ r_c`.
    pub weights: Array1<f64>,
    /// The constant prior mean `m_c`.
    pub mean: f64,
    /// The class's VFE bound `F_c` (at most its exact log marginal
    /// likelihood).
    pub bound: f64,
}

/// What [`SparseGpc::fit`] fits.
#[derive(Clone, Debug)]
pub struct SparseGpcConfig {
    /// The kernel and its (fixed) hyperparameters.
    pub kernel: StationaryKernel,
    /// The number of inducing inputs `M` (clamped to the number of rows;
    /// ignored for [`InducingInit::Given`]).
    pub n_inducing: usize,
    /// How the inducing inputs are chosen.
    pub inducing: InducingInit,
    /// `α_ε > 0`.
    pub alpha_epsilon: f64,
    /// The seed of the inducing-input selection.
    pub seed: u64,
    /// Rows per chunk of the pass over the data; `None`:
    /// [`default_chunk_rows`].
    pub chunk_rows: Option<usize>,
}

/// A fitted Dirichlet GP classifier on the inducing-point model (see the
/// module docs): the kernel, `Z`, the factor of `K_uu` and one
/// [`SparseLatent`] per class.
#[derive(Clone, Debug)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct SparseGpc {
    /// The label transform.
    pub transform: LabelTransform,
    /// The kernel and its hyperparameters.
    pub params: StationaryKernel,
    /// The inducing inputs `Z` (`M × d`).
    pub inducing: Array2<f64>,
    /// The factor `L` of `K_uu + ε I` (the jitter ladder of the sparse GP).
    pub chol_uu: Cholesky,
    /// The class latents, in class order.
    pub classes: Vec<SparseLatent>,
}

/// The `M × M` float64 matrices per class a fit holds (the statistics and
/// the factor `L_B`), and those held once (`K_uu`, its factor and inverse
/// pieces, the summed and weighted statistics).
const MATRICES_PER_CLASS: usize = 2;
/// See [`MATRICES_PER_CLASS`].
const SHARED_MATRICES: usize = 8;

impl SparseGpc {
    /// Fits every class from the per-true-class statistics under `prior`
    /// (the module docs): per class the FITC-form evaluation of
    /// [`bound()`] with `Λ = Σ_c` and centered targets, plus the trace term
    /// `−½ Σ_i (k_ii − q_ii)/σ²_ic`. `monitor` is checked before every
    /// class.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] for `α_ε ≤ 0`, fewer than two classes or
    /// no rows; [`Error::ShapeMismatch`] for statistics of another `M`;
    /// [`Error::InducingNotPositiveDefinite`] when `Σ_i q_ii/σ²_ic` exceeds
    /// `Σ_i k_ii/σ²_ic` by more than rounding (`K_uu` numerically singular
    /// at its jitter); [`Error::Interrupted`] once `monitor` is cancelled.
    pub fn from_stats(
        stats: &SparseClassStats,
        prior: InducingPrior,
        alpha_epsilon: f64,
        par: Parallelism,
        monitor: &Monitor,
    ) -> Result<Self> {
        let transform = LabelTransform::new(alpha_epsilon)?;
        check_labels(&[], stats.classes.len())?;
        let n = stats.n();
        if n == 0 {
            return Err(Error::invalid("X", "needs at least one training row"));
        }
        let l = prior.chol();
        // Σ_{i∈k} q_ii = tr(L⁻¹ G_k L⁻ᵀ) for every true class k (whitened
        // statistics hold L⁻¹ G_k L⁻ᵀ).
        let q_sums = stats
            .classes
            .iter()
            .map(|s| {
                monitor.check()?;
                if s.n_inducing() != prior.n_inducing() {
                    return Err(Error::ShapeMismatch {
                        name: "number of inducing inputs of the statistics",
                        expected: prior.n_inducing(),
                        got: s.n_inducing(),
                    });
                }
                Ok(if s.whitened {
                    s.gram.diag().sum()
                } else {
                    sandwich(l, &s.gram_symmetric(), true, par).diag().sum()
                })
            })
            .collect::<Result<Vec<f64>>>()?;
        let q_total: f64 = q_sums.iter().sum();
        let (a1, a0) = (1.0 / transform.noise_in, 1.0 / transform.noise_out);
        let classes = (0..stats.classes.len())
            .map(|c| {
                monitor.check()?;
                let weighted = stats.class_stats(c, &transform);
                let b = bound(&weighted, &prior, true, false, par)?;
                let q_weighted = q_sums[c] * a1 + (q_total - q_sums[c]) * a0;
                let excess = 0.5 * (q_weighted - weighted.kff_sum);
                if excess > TRACE_TOL * n as f64 {
                    return Err(Error::InducingNotPositiveDefinite {
                        m: prior.n_inducing(),
                        jitter: prior.jitter(),
                    });
                }
                Ok(SparseLatent {
                    chol_b: b.chol_b,
                    weights: b.weights,
                    mean: b.y_mean,
                    bound: b.value + excess,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            transform,
            params: prior.params,
            inducing: prior.z,
            chol_uu: prior.chol,
            classes,
        })
    }

    /// Fits on inputs `x` with labels in `0..n_classes`: the inducing
    /// inputs of `cfg` chosen with its kernel ([`select_inducing`]), `K_uu`
    /// factored through the jitter ladder, one pass of
    /// [`SparseClassStats`] in chunks, then [`SparseGpc::from_stats`].
    /// `monitor` gets the stages "inducing inputs" and "rows accumulated"
    /// and is checked before every chunk.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] for `α_ε ≤ 0`, `n_inducing = 0`,
    /// `chunk_rows = 0`, fewer than two classes, a label out of range, an
    /// invalid kernel or too little memory; [`Error::ShapeMismatch`] when
    /// `labels` and `x` differ in length or a given `Z` in width;
    /// [`Error::NonFinite`] for non-finite inputs;
    /// [`Error::InducingNotPositiveDefinite`] when `K_uu` cannot be
    /// factored; [`Error::Interrupted`] once `monitor` is cancelled.
    pub fn fit(
        x: ArrayView2<'_, f64>,
        labels: &[usize],
        n_classes: usize,
        cfg: &SparseGpcConfig,
        par: Parallelism,
        monitor: &Monitor,
    ) -> Result<Self> {
        let (z, chunk_rows) = checked_inducing(x, labels, n_classes, cfg, par, monitor)?;
        let prior = class_prior(cfg.kernel.clone(), cfg.alpha_epsilon, z.view(), par)?;
        let stats = accumulate_rows(&prior, x, labels, n_classes, chunk_rows, par, monitor)?;
        Self::from_stats(&stats, prior, cfg.alpha_epsilon, par, monitor)
    }

    /// The number of classes `C`.
    pub fn n_classes(&self) -> usize {
        self.classes.len()
    }

    /// The summed VFE bound of the classes (at most the summed exact log
    /// marginal likelihood).
    pub fn bound(&self) -> f64 {
        self.classes.iter().map(|c| c.bound).sum()
    }

    /// Checks a model built from outside (e.g. deserialized or edited), in
    /// `O(C + d)`: the kernel against `Z`'s width, the orders of the
    /// factors and weights against `M` and the class means.
    /// [`Self::predict_latent`] calls it.
    ///
    /// # Errors
    /// [`Error::ShapeMismatch`], [`Error::InvalidParameter`] or
    /// [`Error::NonFinite`] (the class means).
    pub fn validate(&self) -> Result<()> {
        let (m, d) = self.inducing.dim();
        self.params.validate(d)?;
        check_labels(&[], self.classes.len())?;
        let mut orders = vec![("order of the inducing factor", self.chol_uu.dim())];
        for c in &self.classes {
            orders.push(("order of a class's factor of B", c.chol_b.dim()));
            orders.push(("length of a class's weights", c.weights.len()));
        }
        Error::check_all_sizes(m, orders)?;
        crate::error::check_finite("class means", self.classes.iter().map(|c| &c.mean))
    }

    /// Latent means `μ*` (`m × C`) and, with `want_var`, variances `v*`
    /// (`m × C`, clipped at 0) at the rows of `xs` (see the module docs):
    /// the cross-covariance `k(Z, x*)` and `L⁻¹k(Z, x*)` of a block of test
    /// rows serve every class.
    ///
    /// # Errors
    /// [`Error::ShapeMismatch`] for `xs` of the wrong width,
    /// [`Error::NonFinite`] for NaN in it; the errors of [`Self::validate`]
    /// for a model whose fields disagree.
    pub fn predict_latent(
        &self,
        xs: ArrayView2<'_, f64>,
        want_var: bool,
        par: Parallelism,
    ) -> Result<(Array2<f64>, Option<Array2<f64>>)> {
        self.validate()?;
        let (rows, n_classes) = (xs.nrows(), self.n_classes());
        let mut mean = Array2::<f64>::zeros((rows, n_classes));
        let mut var = want_var.then(|| Array2::<f64>::zeros((rows, n_classes)));
        let blocks = TestBlocks {
            params: &self.params,
            inducing: self.inducing.view(),
            chol_uu: &self.chol_uu,
        };
        blocks.for_each(xs, want_var, par, |start, kv, latent| {
            let stop = start + kv.ncols();
            for (j, c) in self.classes.iter().enumerate() {
                let mu = kv.t().dot(&c.weights) + c.mean;
                mean.slice_mut(s![start..stop, j]).assign(&mu);
                if let (Some(var), Some((t, tt))) = (var.as_mut(), latent) {
                    let ss = solved_norms(&c.chol_b, t, kv.ncols(), par);
                    for (i, o) in var.slice_mut(s![start..stop, j]).iter_mut().enumerate() {
                        *o = (self.params.variance - tt[i] + ss[i]).max(0.0);
                    }
                }
            }
        })?;
        Ok((mean, var))
    }
}

/// The prior of the class regressions under `kernel` at the inducing
/// inputs `z`: `K_uu`'s factor (the jitter ladder) and the choice of
/// whitened statistics (see [`InducingPrior::whiten`]). Both weigh the
/// statistics' rounding against the noise; the class evaluations use the
/// per-row noise of their statistics, of which the smallest, `σ²₁` (rows
/// in the class), stands in for the prior's noise variance.
///
/// # Errors
/// As [`LabelTransform::new`] and [`InducingPrior::new`].
pub(crate) fn class_prior(
    kernel: StationaryKernel,
    alpha_epsilon: f64,
    z: ArrayView2<'_, f64>,
    par: Parallelism,
) -> Result<InducingPrior> {
    let noise = LabelTransform::new(alpha_epsilon)?.noise_in;
    InducingPrior::new(kernel, noise, z, par)
}

/// Checks the training data and `cfg` of a sparse classifier fit (see
/// [`SparseGpc::fit`] for the errors) and chooses the inducing inputs with
/// `cfg`'s kernel; returns them with the rows per chunk.
pub(crate) fn checked_inducing(
    x: ArrayView2<'_, f64>,
    labels: &[usize],
    n_classes: usize,
    cfg: &SparseGpcConfig,
    par: Parallelism,
    monitor: &Monitor,
) -> Result<(Array2<f64>, usize)> {
    LabelTransform::new(cfg.alpha_epsilon)?;
    let codes = Array1::from_iter(labels.iter().map(|&k| k as f64));
    check_training_data(x, codes.view())?;
    check_labels(labels, n_classes)?;
    cfg.kernel.validate(x.ncols())?;
    let m = match &cfg.inducing {
        InducingInit::Given(z) => z.nrows(),
        _ => cfg.n_inducing.min(x.nrows()),
    };
    let chunk_rows = cfg.chunk_rows.unwrap_or_else(|| default_chunk_rows(m));
    if chunk_rows == 0 {
        return Err(Error::invalid("chunk_size", "must be >= 1, got 0"));
    }
    crate::alloc::check_alloc(
        "n_inducing",
        &format!("the sparse classifier's matrices of {m} x {m} float64"),
        &[
            MATRICES_PER_CLASS
                .saturating_mul(n_classes)
                .saturating_add(SHARED_MATRICES),
            m,
            m,
        ],
        8,
    )?;
    // A chunk holds at most the N rows there are.
    let block = chunk_rows.min(x.nrows());
    crate::alloc::check_alloc(
        "chunk_size",
        &format!("the sparse classifier's kernel blocks of {m} x {block} float64"),
        &[2, m, block],
        8,
    )?;
    let z = select_inducing(
        x,
        cfg.n_inducing,
        &cfg.inducing,
        &cfg.kernel,
        cfg.seed,
        par,
        monitor,
    )?;
    Ok((z, chunk_rows))
}

/// The per-true-class statistics of the rows `x` under `prior`, in chunks of
/// `chunk_rows` rows (the stage "rows accumulated" of `monitor`, checked
/// before every chunk).
///
/// # Errors
/// As [`SparseClassStats::accumulate`]; [`Error::Interrupted`] once
/// `monitor` is cancelled.
pub(crate) fn accumulate_rows(
    prior: &InducingPrior,
    x: ArrayView2<'_, f64>,
    labels: &[usize],
    n_classes: usize,
    chunk_rows: usize,
    par: Parallelism,
    monitor: &Monitor,
) -> Result<SparseClassStats> {
    let mut stats = SparseClassStats::new(n_classes, prior.n_inducing());
    let mut scratch = Vec::new();
    let n = x.nrows();
    monitor.stage("rows accumulated", n as u64);
    for start in (0..n).step_by(chunk_rows) {
        monitor.check()?;
        let stop = (start + chunk_rows).min(n);
        stats.accumulate(
            prior,
            x.slice(s![start..stop, ..]),
            &labels[start..stop],
            &mut scratch,
            par,
        )?;
        monitor.advance((stop - start) as u64);
    }
    Ok(stats)
}

#[cfg(test)]
#[path = "sparse_tests.rs"]
mod tests;
