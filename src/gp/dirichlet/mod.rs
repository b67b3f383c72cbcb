//! Dirichlet-based GP classification (Milios et al. 2018; 002 Appendix D.4;
//! see docs/math/classification.rst): every class becomes a GP regression
//! with heteroscedastic Gaussian noise on transformed labels, solved in
//! closed form, and the class probabilities are the expected softmax of the
//! independent Gaussian latents.
//!
//! **Label transform** ([`LabelTransform`]). With one-hot labels `Y` and
//! `α_ε > 0`, `α_ic = Y_ic + α_ε` are the parameters of a Dirichlet
//! posterior over the class probabilities; each of its Gamma(α_ic, 1)
//! components is approximated by a lognormal with the same mean and
//! variance, `exp(N(ỹ, σ²))`: matching `E = α` and `Var = α` gives
//! `σ² = ln(1/α + 1)` and `ỹ = ln α − σ²/2`. So class `c` observes
//! `ỹ_ic = f_c(x_i) + ε_ic`, `ε_ic ~ N(0, σ²_ic)`, with a GP prior on `f_c`
//! of constant mean `m_c` (the mean of `ỹ_{·c}`). Only two (noise, target)
//! pairs occur per class: `(σ²₁, ỹ₁)` at `α = 1 + α_ε` for the rows of the
//! class, `(σ²₀, ỹ₀)` at `α = α_ε` for the others.
//!
//! **Feature space in one pass** ([`ClassStats`], [`DirichletGpc`]). With
//! features `Φ` (`N × D`), per-class Grams `G_k = Φ_kᵀΦ_k` and column sums
//! `s_k = Φ_kᵀ1` over the rows of class `k`, `G = Σ_k G_k`, `s = Σ_k s_k`,
//! the feature-space GP of class `c` (the Woodbury form of the exact GP
//! with `K = ΦΦᵀ` and noise `Σ_c`) is
//!
//! ```text
//! A_c = ΦᵀΣ_c⁻¹Φ + I = G/σ²₀ + (1/σ²₁ − 1/σ²₀) G_c + I
//! b_c = ΦᵀΣ_c⁻¹(ỹ_c − m_c) = ((ỹ₀ − m_c)/σ²₀)(s − s_c) + ((ỹ₁ − m_c)/σ²₁) s_c
//! μ*_c = m_c + φ*ᵀA_c⁻¹b_c,   v*_c = φ*ᵀA_c⁻¹φ*
//! ```
//!
//! so one pass over the rows (`O(N D²)` in total, not `C` times that) and
//! `C` Cholesky factors of `D × D` matrices (`O(C D³)` time, `O(C D²)`
//! memory) fit every class. The exact-kernel model ([`ExactGpc`], small
//! `N`) factors `K + Σ_c` instead.
//!
//! **Probabilities** ([`expected_softmax`]): `p_c = E[softmax(f)_c]` for
//! independent `f_j ~ N(μ*_j, v*_j)`, computed deterministically by a fixed
//! quadrature (see its docs for the method and its error).

mod exact;
pub mod optimize;
pub mod softmax;
pub mod sparse;
pub mod sparse_optimize;
#[cfg(test)]
mod tests;

pub use exact::ExactGpc;
pub use softmax::expected_softmax;
pub use sparse::{SparseClassStats, SparseGpc, SparseGpcConfig};

use ndarray::{s, Array1, Array2, ArrayView2, Axis};

use super::features::predict_features;
use super::{check_positive, MeanAndVariance};
use crate::error::{Error, Result};
use crate::feature_map::{self, FeatureMap};
use crate::gpu::Device;
use crate::linalg::{as_faer, Cholesky};
use crate::progress::Monitor;
use crate::real::{finite_max_abs, Real};
use crate::stats::FeatureStats;
use crate::threads::Parallelism;

/// `ln 2π`.
const LN_2PI: f64 = 1.837_877_066_409_345_5;

/// The Dirichlet label transform of a given `α_ε` (see the module docs):
/// the noise variance `σ² = ln(1/α + 1)` and target `ỹ = ln α − σ²/2` of a
/// row in its class (`α = 1 + α_ε`) and out of it (`α = α_ε`).
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct LabelTransform {
    /// `α_ε > 0`.
    pub alpha_epsilon: f64,
    /// `σ²₁ = ln(1/(1 + α_ε) + 1)`, the noise of a row in the class.
    pub noise_in: f64,
    /// `σ²₀ = ln(1/α_ε + 1)`, the noise of a row of another class.
    pub noise_out: f64,
    /// `ỹ₁ = ln(1 + α_ε) − σ²₁/2`.
    pub target_in: f64,
    /// `ỹ₀ = ln α_ε − σ²₀/2`.
    pub target_out: f64,
}

impl LabelTransform {
    /// The transform for `alpha_epsilon`.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] unless `alpha_epsilon` is finite and `> 0`.
    pub fn new(alpha_epsilon: f64) -> Result<Self> {
        check_positive("alpha_epsilon", alpha_epsilon)?;
        let pair = |alpha: f64| {
            let noise = (1.0 / alpha).ln_1p();
            (noise, alpha.ln() - 0.5 * noise)
        };
        let (noise_in, target_in) = pair(1.0 + alpha_epsilon);
        let (noise_out, target_out) = pair(alpha_epsilon);
        Ok(Self {
            alpha_epsilon,
            noise_in,
            noise_out,
            target_in,
            target_out,
        })
    }

    /// The prior mean `m_c = (n_c ỹ₁ + (N − n_c) ỹ₀)/N` of a class with
    /// `n_c` of the `N` rows (the mean of its targets).
    pub fn prior_mean(&self, n_class: u64, n: u64) -> f64 {
        let frac = n_class as f64 / n as f64;
        frac * self.target_in + (1.0 - frac) * self.target_out
    }

    /// The noise variance and target of a row that is (`in_class`) or is not
    /// of the class.
    pub fn noise_and_target(&self, in_class: bool) -> (f64, f64) {
        if in_class {
            (self.noise_in, self.target_in)
        } else {
            (self.noise_out, self.target_out)
        }
    }
}

/// Checks class labels: at least two classes, every label `< n_classes`.
pub(crate) fn check_labels(labels: &[usize], n_classes: usize) -> Result<()> {
    if n_classes < 2 {
        return Err(Error::invalid(
            "y",
            format!("classification needs at least 2 classes, got {n_classes}"),
        ));
    }
    match labels.iter().find(|&&k| k >= n_classes) {
        Some(k) => Err(Error::invalid(
            "y",
            format!("class label {k} is out of range for {n_classes} classes"),
        )),
        None => Ok(()),
    }
}

/// The row indices of every class, in row order (labels checked by
/// [`check_labels`]).
pub(crate) fn rows_by_class(labels: &[usize], n_classes: usize) -> Vec<Vec<usize>> {
    let mut rows: Vec<Vec<usize>> = vec![Vec::new(); n_classes];
    for (i, &k) in labels.iter().enumerate() {
        rows[k].push(i);
    }
    rows
}

/// Per-class sufficient statistics of a feature-space Dirichlet GP: for
/// every class `k` the Gram `G_k = Φ_kᵀΦ_k` (lower triangle), the column
/// sums `s_k = Φ_kᵀ1` and the count `n_k` of its rows, as a
/// [`FeatureStats`] of the class's rows (its target statistics unused).
/// Accumulated over row chunks and merged exactly.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct ClassStats {
    /// One set of statistics per class.
    pub classes: Vec<FeatureStats>,
}

impl ClassStats {
    /// Empty statistics for `n_classes` classes and `D` features.
    pub fn new(n_classes: usize, n_features: usize) -> Self {
        Self {
            classes: (0..n_classes)
                .map(|_| FeatureStats::new(n_features))
                .collect(),
        }
    }

    /// The number of classes `C`.
    pub fn n_classes(&self) -> usize {
        self.classes.len()
    }

    /// The number of features `D`.
    pub fn n_features(&self) -> usize {
        self.classes.first().map_or(0, FeatureStats::n_features)
    }

    /// The number of rows `N` over all classes.
    pub fn n(&self) -> u64 {
        // Saturating: counts near u64::MAX (edited or loaded statistics)
        // stay nonzero instead of wrapping to 0.
        self.classes.iter().fold(0u64, |t, s| t.saturating_add(s.n))
    }

    /// Adds a row chunk: features `phi` (`n × D`) and class labels
    /// (`n`, each `< C`). The rows of each class are gathered and added to
    /// its statistics, so the chunk costs `O(n D²)` whatever `C`.
    ///
    /// # Errors
    /// [`Error::ShapeMismatch`] for `labels` of the wrong length, `phi`
    /// of the wrong width or statistics whose fields disagree in shape;
    /// [`Error::InvalidParameter`] (`y`) for a label out of range;
    /// [`Error::NonFinite`] for non-finite features; [`Error::InvalidParameter`]
    /// (`X`) where a class's sums would overflow the float64 range (features
    /// beyond about `1e154`; see `FeatureStats::accumulate`). Nothing is
    /// changed then.
    pub fn accumulate<T: Real>(
        &mut self,
        phi: ArrayView2<'_, T>,
        labels: &[usize],
        par: Parallelism,
    ) -> Result<()> {
        if labels.len() != phi.nrows() {
            return Err(Error::ShapeMismatch {
                name: "length of y (the number of rows of X)",
                expected: phi.nrows(),
                got: labels.len(),
            });
        }
        check_labels(labels, self.n_classes())?;
        // Every refusal before the first class changes: a chunk is added to
        // all the classes or to none.
        for stats in &self.classes {
            stats.check_accumulate(phi.ncols())?;
        }
        let max_abs = finite_max_abs(phi, par).ok_or(Error::NonFinite { name: "features" })?;
        let rows = rows_by_class(labels, self.n_classes());
        // The class parts (the whole chunk when one class has every row),
        // each checked against its class's sums before any is added.
        let parts: Vec<Option<Array2<T>>> = rows
            .iter()
            .map(|idx| (idx.len() < phi.nrows()).then(|| phi.select(Axis(0), idx)))
            .collect();
        let part_of = |k: usize| parts[k].as_ref().map_or(phi.view(), |p| p.view());
        let checked = self
            .classes
            .iter()
            .enumerate()
            .filter(|&(k, _)| !rows[k].is_empty())
            .map(|(k, stats)| {
                let zeros = Array1::<f64>::zeros(rows[k].len());
                Ok((k, stats.check_chunk(part_of(k), zeros.view(), max_abs)?))
            })
            .collect::<Result<Vec<_>>>()?;
        for (k, chunk) in checked {
            self.classes[k].add_chunk(part_of(k), &chunk, par)?;
        }
        Ok(())
    }

    /// Adds the statistics of other rows of the same map and classes.
    ///
    /// # Errors
    /// [`Error::ShapeMismatch`] for another number of classes or features,
    /// or statistics whose fields disagree in shape; nothing is changed
    /// then.
    pub fn merge(&mut self, other: &ClassStats) -> Result<()> {
        if other.n_classes() != self.n_classes() {
            return Err(Error::ShapeMismatch {
                name: "number of classes of the statistics to merge",
                expected: self.n_classes(),
                got: other.n_classes(),
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
}

/// Adds the rows `(x, labels)` to `stats` through any [`FeatureMap`]:
/// `chunk_rows` rows at a time are transformed on `device` into one reused
/// buffer ([`feature_map::transform_into`]) and added by
/// [`ClassStats::accumulate`], so every row is transformed once. `monitor`
/// gets the stage "rows accumulated" and is checked before every chunk.
///
/// # Errors
/// As [`feature_map::transform_into`] and [`ClassStats::accumulate`];
/// [`Error::InvalidParameter`] for `chunk_rows = 0`, [`Error::ShapeMismatch`]
/// for statistics of another width than the map's;
/// [`Error::Interrupted`] once `monitor` is cancelled.
#[allow(clippy::too_many_arguments)]
pub fn accumulate_classes<M: FeatureMap, T: Real>(
    map: &M,
    x: ArrayView2<'_, T>,
    labels: &[usize],
    stats: &mut ClassStats,
    device: Device,
    chunk_rows: usize,
    par: Parallelism,
    monitor: &Monitor,
) -> Result<()> {
    if stats.n_features() != map.n_components() {
        return Err(Error::ShapeMismatch {
            name: "number of features of the statistics",
            expected: map.n_components(),
            got: stats.n_features(),
        });
    }
    if labels.len() != x.nrows() {
        return Err(Error::ShapeMismatch {
            name: "length of y (the number of rows of X)",
            expected: x.nrows(),
            got: labels.len(),
        });
    }
    let chunks = feature_map::Chunks {
        device,
        chunk_rows,
        par,
        monitor,
    };
    chunks.for_each(map, x, "rows accumulated", |start, phi| {
        stats.accumulate(phi, &labels[start..start + phi.nrows()], par)
    })
}

/// The fitted latent GP of one class: a Cholesky factor `L`, coefficients
/// and the prior mean `m_c`, with its log marginal likelihood. In feature
/// space (`D × D`) `L L ᵀ = A_c` and the coefficients are `A_c⁻¹b_c`; in
/// the exact model (`N × N`) `L Lᵀ = K + Σ_c` and they are
/// `(K + Σ_c)⁻¹(ỹ_c − m_c)`.
#[derive(Clone, Debug)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct LatentGp {
    /// The factor `L`.
    pub chol: Cholesky,
    /// The coefficients of the predictive mean.
    pub coef: Array1<f64>,
    /// The constant prior mean `m_c`.
    pub mean: f64,
    /// The heteroscedastic log marginal likelihood of the class's targets.
    pub lml: f64,
}

/// A fitted feature-space Dirichlet GP classifier (see the module docs):
/// one [`LatentGp`] per class, all from one pass of [`ClassStats`].
#[derive(Clone, Debug)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct DirichletGpc {
    /// The label transform.
    pub transform: LabelTransform,
    /// The class latents, in class order (`A_c = L Lᵀ`, coefficients
    /// `A_c⁻¹b_c`).
    pub classes: Vec<LatentGp>,
}

impl DirichletGpc {
    /// Fits every class from one set of per-class statistics (the formulas
    /// of the module docs). The log marginal likelihood of class `c` is the
    /// Woodbury form of the exact one,
    /// `−½[rᵀΣ_c⁻¹r − b_cᵀA_c⁻¹b_c] − ½ ln det A_c − ½ Σ_i ln σ²_ic −
    /// (N/2) ln 2π` with `r = ỹ_c − m_c`.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] for `α_ε ≤ 0`, fewer than two classes or
    /// no rows; the statistics' own checks.
    pub fn fit(stats: &ClassStats, alpha_epsilon: f64, par: Parallelism) -> Result<Self> {
        Self::fit_monitored(stats, alpha_epsilon, par, &Monitor::default())
    }

    /// [`DirichletGpc::fit`] that checks `monitor` before every class's
    /// factorization.
    ///
    /// # Errors
    /// As [`DirichletGpc::fit`]; [`Error::Interrupted`] once `monitor` is
    /// cancelled.
    pub fn fit_monitored(
        stats: &ClassStats,
        alpha_epsilon: f64,
        par: Parallelism,
        monitor: &Monitor,
    ) -> Result<Self> {
        let transform = LabelTransform::new(alpha_epsilon)?;
        let n_classes = stats.n_classes();
        check_labels(&[], n_classes)?;
        let d = stats.n_features();
        for s in &stats.classes {
            s.validate()?;
            Error::check_sizes(
                d,
                [("number of features of a class's statistics", s.n_features())],
            )?;
        }
        let n = stats.n();
        if n == 0 {
            return Err(Error::invalid("X", "needs at least one training row"));
        }
        let mut gram = Array2::<f64>::zeros((d, d));
        let mut sum = Array1::<f64>::zeros(d);
        for s in &stats.classes {
            gram += &s.gram;
            sum += &s.phi_sum;
        }
        let LabelTransform {
            noise_in,
            noise_out,
            target_in,
            target_out,
            ..
        } = transform;
        let classes = stats
            .classes
            .iter()
            .map(|sc| {
                monitor.check()?;
                let mean = transform.prior_mean(sc.n, n);
                // Only the lower triangles are read (Cholesky::new).
                let mut a = gram.mapv(|v| v / noise_out);
                a.scaled_add(1.0 / noise_in - 1.0 / noise_out, &sc.gram);
                for i in 0..d {
                    a[(i, i)] += 1.0;
                }
                let chol = Cholesky::new(as_faer(a.view()), par)?;
                let (r_in, r_out) = (target_in - mean, target_out - mean);
                let mut b = (&sum - &sc.phi_sum).mapv(|v| v * r_out / noise_out);
                b.scaled_add(r_in / noise_in, &sc.phi_sum);
                let coef = Array1::from(chol.solve_vec(b.view(), par));
                let (n_in, n_out) = (sc.n as f64, (n - sc.n) as f64);
                let data_fit = n_in * r_in * r_in / noise_in + n_out * r_out * r_out / noise_out
                    - b.dot(&coef);
                let log_noise = n_in * noise_in.ln() + n_out * noise_out.ln();
                let lml = -0.5 * (data_fit + chol.log_det() + log_noise + n as f64 * LN_2PI);
                Ok(LatentGp {
                    chol,
                    coef,
                    mean,
                    lml,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Self { transform, classes })
    }

    /// Fits on the features `Φ(x)` of any [`FeatureMap`] with class labels
    /// in `0..n_classes`: [`accumulate_classes`], then [`DirichletGpc::fit`].
    ///
    /// # Errors
    /// As [`accumulate_classes`] and [`DirichletGpc::fit`].
    #[allow(clippy::too_many_arguments)]
    pub fn fit_map<M: FeatureMap, T: Real>(
        map: &M,
        x: ArrayView2<'_, T>,
        labels: &[usize],
        n_classes: usize,
        alpha_epsilon: f64,
        device: Device,
        chunk_rows: usize,
        par: Parallelism,
        monitor: &Monitor,
    ) -> Result<Self> {
        LabelTransform::new(alpha_epsilon)?;
        check_labels(labels, n_classes)?;
        FeatureStats::check_size("n_components", map.n_components(), n_classes)?;
        let mut stats = ClassStats::new(n_classes, map.n_components());
        accumulate_classes(map, x, labels, &mut stats, device, chunk_rows, par, monitor)?;
        Self::fit(&stats, alpha_epsilon, par)
    }

    /// The number of classes `C`.
    pub fn n_classes(&self) -> usize {
        self.classes.len()
    }

    /// The summed log marginal likelihood of the classes (`docs/math/classification.rst`,
    /// "Hyperparameters": the objective of the hyperparameters).
    pub fn lml(&self) -> f64 {
        self.classes.iter().map(|c| c.lml).sum()
    }

    /// Latent means `μ*` (`m × C`) and, with `want_var`, variances `v*`
    /// (`m × C`) at test features `phi` (`m × D`), class by class through
    /// [`predict_features`].
    ///
    /// # Errors
    /// As [`predict_features`].
    pub fn predict_latent<T: Real>(
        &self,
        phi: ArrayView2<'_, T>,
        want_var: bool,
        par: Parallelism,
    ) -> Result<(Array2<f64>, Option<Array2<f64>>)> {
        let per_class = self
            .classes
            .iter()
            .map(|c| predict_features(c.chol.l(), c.coef.view(), c.mean, phi, want_var, par))
            .collect::<Result<Vec<_>>>()?;
        Ok(stack_classes(phi.nrows(), per_class))
    }

    /// [`DirichletGpc::predict_latent`] at the rows of `x` through the map
    /// the model was fitted on, `chunk_rows` rows at a time transformed on
    /// `device` (the stage "rows predicted" of `monitor`, checked before
    /// every chunk).
    ///
    /// # Errors
    /// As [`feature_map::transform_into`] and
    /// [`DirichletGpc::predict_latent`]; [`Error::InvalidParameter`] for
    /// `chunk_rows = 0`; [`Error::Interrupted`] once `monitor` is cancelled.
    #[allow(clippy::too_many_arguments)]
    pub fn predict_latent_map<M: FeatureMap, T: Real>(
        &self,
        map: &M,
        x: ArrayView2<'_, T>,
        want_var: bool,
        device: Device,
        chunk_rows: usize,
        par: Parallelism,
        monitor: &Monitor,
    ) -> Result<(Array2<f64>, Option<Array2<f64>>)> {
        let (n, c) = (x.nrows(), self.n_classes());
        let mut mean = Array2::zeros((n, c));
        let mut var = want_var.then(|| Array2::zeros((n, c)));
        let chunks = feature_map::Chunks {
            device,
            chunk_rows,
            par,
            monitor,
        };
        chunks.for_each(map, x, "rows predicted", |start, phi| {
            let rows = start..start + phi.nrows();
            let (m, v) = self.predict_latent(phi, want_var, par)?;
            mean.slice_mut(s![rows.clone(), ..]).assign(&m);
            if let (Some(var), Some(v)) = (var.as_mut(), v) {
                var.slice_mut(s![rows, ..]).assign(&v);
            }
            Ok(())
        })?;
        Ok((mean, var))
    }
}

/// Per-class `(mean, variance)` columns stacked into `m × C` matrices.
pub(crate) fn stack_classes(
    m: usize,
    per_class: Vec<MeanAndVariance>,
) -> (Array2<f64>, Option<Array2<f64>>) {
    let c = per_class.len();
    let mut mean = Array2::zeros((m, c));
    let mut var: Option<Array2<f64>> = None;
    for (j, (mu, v)) in per_class.into_iter().enumerate() {
        mean.column_mut(j).assign(&mu);
        if let Some(v) = v {
            var.get_or_insert_with(|| Array2::zeros((m, c)))
                .column_mut(j)
                .assign(&v);
        }
    }
    (mean, var)
}
