//! Hyperparameters of the Dirichlet GP classifiers (docs/math/classification.rst,
//! "Hyperparameters"): the length scale(s) and kernel variance maximize the
//! sum over classes of the log marginal likelihood of the transformed
//! heteroscedastic regressions, `Σ_c LML_c`, through the generic L-BFGS
//! path of [`crate::gp::optimize::maximize`] (restarts, best run kept).
//!
//! **Feature space** ([`DirichletLml`]). For one class with noise `Σ_c`,
//! `A_c = ΦᵀΣ_c⁻¹Φ + I`, `w_c = A_c⁻¹b_c` and `α_c = Σ_c⁻¹(r_c − Φw_c)`
//! (`r_c = ỹ_c − m_c`), the gradient of `LML_c` in the features is
//! `α_c w_cᵀ − Σ_c⁻¹ΦA_c⁻¹` (the homoscedastic formula of docs/math/gp.rst
//! with `σ_n²` replaced by `Σ_c`). Row `i` has noise `σ²₀` in every class
//! but its own, so the sum over classes is
//!
//! ```text
//! R_i = Σ_c α_ic w_c − φ_i (Σ_c A_c⁻¹)/σ²₀ − (1/σ²₁ − 1/σ²₀) φ_i A_{y_i}⁻¹
//! ```
//!
//! (`O(D²)` a row whatever `C`), contracted with `∂φ_i/∂ln l` by the map
//! (a second pass over the rows). The kernel variance scales `Φ` by `σ`:
//! `∂/∂ln σ² = ½ Σ_c (w_cᵀw_c − D + tr A_c⁻¹)` from the statistics alone.
//!
//! **Nyström features** `Φ = K_XZ T` (`T = K_ZZ^{−1/2}`, landmarks `Z`
//! fixed) move with the length scale through `K`: with `S = Σ_c S_c` the
//! summed `ααᵀ − C⁻¹` and `R = SΦ` as above, `½ tr(S ∂Q)` for
//! `Q = K_XZ K_ZZ⁻¹ K_ZX` is
//!
//! ```text
//! ∂/∂ln l = Σ_ij (R T)_ij ∂K(x_i, z_j)/∂ln l − ½ Σ_jk H_jk ∂K(z_j, z_k)/∂ln l,
//! H = T (Σ_c w_c w_cᵀ − I + A_c⁻¹) T
//! ```
//!
//! (`RᵀΦ = Σ_c ΦᵀS_cΦ = Σ_c (w_c w_cᵀ − I + A_c⁻¹)`), exact while no
//! eigenvalue of `K_ZZ` is clipped. With every training row a landmark
//! `ΦΦᵀ = K`, so the objective is the exact model's.
//!
//! **Exact kernel** ([`ExactDirichletLml`]): with `W = Σ_c (α_cα_cᵀ −
//! (K + Σ_c)⁻¹)`, `∂/∂ln l_a = ½ Σ_ij W_ij K_ij (x_ia − x_ja)²/l_a²` and
//! `∂/∂ln σ² = ½ Σ_ij W_ij K_ij` (Gaussian kernel). Every class differs
//! from `B = K + σ²₀ I` only on its own `n_c` rows, where the noise is
//! smaller by `g = σ²₀ − σ²₁ > 0`: `K + Σ_c = B − g P_cP_cᵀ`, so with one
//! factor and inverse of `B`, `U_c = B⁻¹P_c` and the `n_c × n_c`
//! `S_c = I/g − P_cᵀB⁻¹P_c` (positive definite: its eigenvalues are at
//! least `1/g − 1/σ²₀ = σ²₁/(σ²₀ g)`) Woodbury and the determinant lemma give
//!
//! ```text
//! (K + Σ_c)⁻¹ = B⁻¹ + U_c S_c⁻¹ U_cᵀ,   ln det(K + Σ_c) = ln det B + n_c ln g + ln det S_c
//! ```
//!
//! (`O(N³ + N² Σ_c n_c) = O(N³)` an evaluation instead of `C` factors and
//! inverses of `N × N` matrices); the per-class factors that prediction
//! needs are formed once, at the optimum.

use std::borrow::Cow;

use faer::Accum;
use ndarray::{s, Array1, Array2, ArrayView2, Axis, CowArray, Ix2};
use rayon::prelude::*;

use super::{
    exact::fit_classes, rows_by_class, ClassStats, DirichletGpc, ExactGpc, LabelTransform, LN_2PI,
};
use crate::error::{Error, Result};
use crate::feature_map::AnyFeatureMap;
use crate::gp::exact::{check_training_data, dot_sq, kernel_matrix_symmetric};
use crate::gp::feature_lml::{HyperMap, MapAt};
use crate::gp::optimize::{
    self, data_length_scales, median_pairwise_distance, Evaluation, LogParams, Objective,
    OptimizerConfig,
};
use crate::kernels::{Kernel, StationaryKernel};
use crate::linalg::{as_faer, as_faer_mut, faer_par, gemm, matmul_monitored, Cholesky};
use crate::nystroem::NystroemFeatures;
use crate::progress::Monitor;
use crate::threads::Parallelism;

/// The hyperparameters a classifier fit may optimize.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FreeHypers {
    /// Optimize the length scale(s).
    pub length_scale: bool,
    /// Optimize the kernel variance.
    pub kernel_variance: bool,
}

impl FreeHypers {
    /// From hyperparameter names: `"length_scale"`, `"kernel_variance"`.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] (`optimize`) for any other name.
    pub fn from_names<S: AsRef<str>>(names: &[S]) -> Result<Self> {
        let mut free = Self::default();
        for name in names {
            match name.as_ref() {
                "length_scale" => free.length_scale = true,
                "kernel_variance" => free.kernel_variance = true,
                other => {
                    return Err(Error::invalid(
                        "optimize",
                        format!(
                            "unknown hyperparameter {other:?} for a classifier; expected \
                             \"length_scale\" or \"kernel_variance\" (the noise is the label \
                             transform's)"
                        ),
                    ))
                }
            }
        }
        Ok(free)
    }

    /// The optimizer's parameters `(l.., σ², ·)` (the last slot, the noise
    /// of the regression models, is fixed and unused).
    pub(crate) fn params(self, length_scale: Vec<f64>, kernel_variance: f64) -> Result<LogParams> {
        for &l in &length_scale {
            super::check_positive("length_scale", l)?;
        }
        super::check_positive("kernel_variance", kernel_variance)?;
        let k = length_scale.len();
        let mut free = Vec::new();
        if self.length_scale {
            free.extend(0..k);
        }
        if self.kernel_variance {
            free.push(k);
        }
        let mut values = length_scale;
        values.push(kernel_variance);
        values.push(1.0);
        Ok(LogParams { values, free })
    }
}

/// A fitted feature map whose kernel hyperparameters move with its random
/// draw (or landmarks) fixed.
#[derive(Clone, Debug)]
pub enum GpcMap {
    /// Random Fourier or Maclaurin features ([`HyperMap`]).
    Movable(HyperMap),
    /// Nyström features: the landmarks stay, `K_ZZ^{−1/2}` is formed again
    /// at every length scale; no kernel variance (it is 1).
    Nystroem(NystroemFeatures),
}

impl GpcMap {
    /// Wraps a fitted map; `length_scale` is the one a Fourier map was drawn
    /// at: one value, or one per input dimension (then fitted per
    /// dimension).
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] (`features`) for a polynomial sketch;
    /// the errors of [`HyperMap::new`].
    pub fn new(map: AnyFeatureMap, length_scale: Vec<f64>) -> Result<Self> {
        match map {
            AnyFeatureMap::Nystroem(m) => Ok(GpcMap::Nystroem(m)),
            AnyFeatureMap::Polynomial(_) => Err(Error::invalid(
                "features",
                "optimize needs a feature map whose hyperparameters can move with its random \
                 draw fixed: RandomFourierFeatures, MaclaurinFeatures or NystroemFeatures; got \
                 a polynomial sketch",
            )),
            other => Ok(GpcMap::Movable(HyperMap::new(other, length_scale)?)),
        }
    }

    /// The input dimension `d`.
    pub fn n_features_in(&self) -> usize {
        match self {
            GpcMap::Movable(m) => m.n_features_in(),
            GpcMap::Nystroem(m) => m.landmarks.ncols(),
        }
    }

    /// The output width `D`.
    pub fn n_components(&self) -> usize {
        match self {
            GpcMap::Movable(m) => m.n_components(),
            GpcMap::Nystroem(m) => m.landmarks.nrows(),
        }
    }

    /// The length scale(s) and kernel variance the map was fitted at.
    pub fn hyperparameters(&self) -> (Vec<f64>, f64) {
        match self {
            GpcMap::Movable(m) => m.hyperparameters(),
            GpcMap::Nystroem(m) => (m.length_scale.clone(), 1.0),
        }
    }

    /// The map at `length_scale` (one value, or one per input dimension for
    /// random Fourier features) and `kernel_variance`.
    ///
    /// # Errors
    /// Invalid hyperparameters; per-dimension length scales for the
    /// Maclaurin or Nyström map; a kernel variance other than 1 for Nyström
    /// features.
    pub fn at(&self, length_scale: &[f64], kernel_variance: f64) -> Result<AnyFeatureMap> {
        Ok(match self {
            GpcMap::Movable(m) => m.at(length_scale, kernel_variance)?,
            GpcMap::Nystroem(m) => {
                if kernel_variance != 1.0 {
                    return Err(no_nystroem_variance());
                }
                if length_scale == m.length_scale.as_slice() {
                    return Ok(m.clone().into());
                }
                let &[length_scale] = length_scale else {
                    return Err(nystroem_one_length_scale());
                };
                nystroem_at(m, length_scale)?.into()
            }
        })
    }
}

fn nystroem_one_length_scale() -> Error {
    Error::invalid(
        "optimize",
        "the classifier fits one length scale for NystroemFeatures: give the transformer one \
         length scale, or leave \"length_scale\" out of optimize",
    )
}

fn no_nystroem_variance() -> Error {
    Error::invalid(
        "optimize",
        "NystroemFeatures have no kernel variance (their kernel is normalized); optimize only \
         \"length_scale\" with them",
    )
}

/// The Nyström map of the same landmarks, in the same order, at another
/// length scale (`K_ZZ^{−1/2}` formed again).
fn nystroem_at(map: &NystroemFeatures, length_scale: f64) -> Result<NystroemFeatures> {
    let m = map.landmarks.nrows();
    let (fit, idx) =
        NystroemFeatures::fit(map.landmarks.view(), m, map.kernel, &[length_scale], 0)?;
    // `fit` permuted the landmarks (row a of its map is landmark idx[a]).
    let mut norm = Array2::zeros((m, m));
    for (a, &ia) in idx.iter().enumerate() {
        for (b, &ib) in idx.iter().enumerate() {
            norm[(ia, ib)] = fit.normalization[(a, b)];
        }
    }
    NystroemFeatures::from_parts(map.landmarks.clone(), norm, map.kernel, vec![length_scale])
}

/// `∂k(u, v)/∂ln l` of a normalized kernel with one length scale at the
/// scaled distance `ρ` ([`Kernel::distance`]): `ψ(ρ) Σ_a δ_a e'(δ_a)`,
/// which is `2ρψ(ρ)` for the Euclidean kernels and `ρψ(ρ)` for the
/// Laplacian ([`Kernel::profile_slope`]).
fn kernel_dlog_l(kernel: Kernel, rho: f64) -> f64 {
    let factor = if kernel.uses_l1() { 1.0 } else { 2.0 };
    factor * rho * kernel.profile_slope(rho)
}

/// `Σ_ij a_ij ∂k(x_i, z_j)/∂ln l` for a Nyström map of one length scale
/// (the fit refuses a free length scale of a map with several).
fn nystroem_contract(
    map: &NystroemFeatures,
    x: ArrayView2<'_, f64>,
    a: ArrayView2<'_, f64>,
) -> f64 {
    let inv_l = 1.0 / map.length_scale[0];
    let z = map.landmarks.mapv(|v| v * inv_l);
    let mut total = 0.0;
    let mut u = vec![0.0; x.ncols()];
    for (xr, ar) in x.rows().into_iter().zip(a.rows()) {
        for (ui, &v) in u.iter_mut().zip(xr) {
            *ui = v * inv_l;
        }
        for (zr, &aij) in z.rows().into_iter().zip(ar) {
            let rho = map.kernel.distance(&u, zr.as_slice().unwrap_or(&[]));
            total += aij * kernel_dlog_l(map.kernel, rho);
        }
    }
    total
}

/// The map at one `θ` with its length-scale contraction.
enum At {
    Movable(Box<MapAt>),
    Nystroem(NystroemFeatures),
}

impl At {
    fn new(map: &GpcMap, length_scale: &[f64], kernel_variance: f64) -> Result<Self> {
        Ok(match (map, map.at(length_scale, kernel_variance)?) {
            (GpcMap::Nystroem(_), AnyFeatureMap::Nystroem(m)) => At::Nystroem(m),
            (_, any) => At::Movable(Box::new(MapAt::new(any)?)),
        })
    }

    fn transform(
        &self,
        x: ArrayView2<'_, f64>,
        out: ndarray::ArrayViewMut2<'_, f64>,
        par: Parallelism,
    ) -> Result<()> {
        match self {
            At::Movable(m) => m.transform(x, out, par),
            At::Nystroem(m) => m.transform_into(x, out, par),
        }
    }

    /// Adds `Σ_i ⟨R_i, ∂φ_i/∂ln l⟩` of a chunk to `out[0]` (for Nyström
    /// features the first term of the module docs).
    fn contract(
        &self,
        x: ArrayView2<'_, f64>,
        phi: ArrayView2<'_, f64>,
        r: ArrayView2<'_, f64>,
        buf: &mut Array2<f64>,
        out: &mut [f64],
        par: Parallelism,
    ) -> Result<()> {
        match self {
            At::Movable(m) => m.contract(x, phi, r, buf, out, par),
            At::Nystroem(m) => {
                let mut rt = Array2::zeros(r.dim());
                gemm(r, m.normalization.view(), rt.view_mut());
                out[0] += nystroem_contract(m, x, rt.view());
                Ok(())
            }
        }
    }

    /// The term of the length-scale gradient that is not a sum over rows
    /// (Nyström: `−½ Σ_jk H_jk ∂K(z_j, z_k)/∂ln l`), given
    /// `G = Σ_c (w_c w_cᵀ − I + A_c⁻¹)`.
    fn finish(&self, g: &Array2<f64>) -> f64 {
        match self {
            At::Movable(_) => 0.0,
            At::Nystroem(m) => {
                let t = &m.normalization;
                let h = t.dot(g).dot(t);
                -0.5 * nystroem_contract(m, m.landmarks.view(), h.view())
            }
        }
    }
}

/// The summed class log marginal likelihood of the feature-space
/// classifier and its gradient as an [`Objective`] of the free log
/// hyperparameters `(ln l, ln σ²)`; an evaluation's fit is the classifier.
pub struct DirichletLml<'a> {
    map: &'a GpcMap,
    x: CowArray<'a, f64, Ix2>,
    labels: Cow<'a, [usize]>,
    n_classes: usize,
    alpha_epsilon: f64,
    params: LogParams,
    chunk_rows: usize,
    par: Parallelism,
}

impl<'a> DirichletLml<'a> {
    /// The objective of `map` on inputs `x` with labels in `0..n_classes`.
    ///
    /// # Errors
    /// Shape mismatches, non-finite inputs, bad labels, `α_ε ≤ 0`,
    /// `chunk_rows = 0`, a kernel variance to optimize for Nyström features.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        map: &'a GpcMap,
        x: ArrayView2<'a, f64>,
        labels: &'a [usize],
        n_classes: usize,
        alpha_epsilon: f64,
        params: LogParams,
        chunk_rows: usize,
        par: Parallelism,
    ) -> Result<Self> {
        LabelTransform::new(alpha_epsilon)?;
        check_inputs(x, labels, n_classes)?;
        Error::check_n_features(map.n_features_in(), x.ncols())?;
        if chunk_rows == 0 {
            return Err(Error::invalid("chunk_size", "must be >= 1, got 0"));
        }
        if let GpcMap::Nystroem(m) = &map {
            if params.free.contains(&params.n_length_scales()) {
                return Err(no_nystroem_variance());
            }
            if m.length_scale.len() > 1 && params.free.iter().any(|&i| i < params.n_length_scales())
            {
                return Err(nystroem_one_length_scale());
            }
        }
        Ok(Self {
            map,
            x: x.into(),
            labels: Cow::Borrowed(labels),
            n_classes,
            alpha_epsilon,
            params,
            chunk_rows,
            par,
        })
    }

    /// The classifier and, with `want_grad`, the gradient over `(ln l..,
    /// ln σ², ln 1)` at `values` (zeros without it: the second pass over the
    /// rows is skipped).
    fn lml(
        &self,
        values: &[f64],
        want_grad: bool,
        monitor: &Monitor,
    ) -> Result<(Vec<f64>, DirichletGpc)> {
        let par = self.par;
        let k = self.params.n_length_scales();
        let at = At::new(self.map, &values[..k], values[k])?;
        let d = self.map.n_components();
        let rows = self.chunk_rows.min(self.x.nrows());
        let mut phi = crate::gp::feature_lml::chunk_buffer(rows, d)?;
        let mut stats = ClassStats::new(self.n_classes, d);
        for (i, xc) in self
            .x
            .axis_chunks_iter(Axis(0), self.chunk_rows)
            .enumerate()
        {
            monitor.check()?;
            let (start, c) = (i * self.chunk_rows, xc.nrows());
            let mut p = phi.slice_mut(s![..c, ..]);
            at.transform(xc, p.view_mut(), par)?;
            stats.accumulate(p.view(), &self.labels[start..start + c], par)?;
        }
        let gpc = DirichletGpc::fit_monitored(&stats, self.alpha_epsilon, par, monitor)?;
        let mut grad = vec![0.0; k + 2];
        if !want_grad || self.params.free.is_empty() {
            return Ok((grad, gpc));
        }
        monitor.check()?;
        let a_inv: Vec<Array2<f64>> = gpc.classes.iter().map(|c| c.chol.inverse(par)).collect();
        grad[k] = 0.5
            * gpc
                .classes
                .iter()
                .zip(&a_inv)
                .map(|(c, ai)| c.coef.dot(&c.coef) - d as f64 + ai.diag().sum())
                .sum::<f64>();
        if !self.params.free.iter().any(|&i| i < k) {
            return Ok((grad, gpc));
        }
        let t = gpc.transform;
        let n_classes = self.n_classes;
        let mut w = Array2::<f64>::zeros((d, n_classes));
        let mut a_sum = Array2::<f64>::zeros((d, d));
        let mut g = Array2::<f64>::zeros((d, d));
        for (j, (c, ai)) in gpc.classes.iter().zip(&a_inv).enumerate() {
            w.column_mut(j).assign(&c.coef);
            a_sum += ai;
            g += ai;
            for i in 0..d {
                g[(i, i)] -= 1.0;
            }
            let wc = c.coef.view().insert_axis(Axis(1));
            g += &wc.dot(&wc.t());
        }
        let shift = 1.0 / t.noise_in - 1.0 / t.noise_out;
        let mut buf = Array2::<f64>::zeros((0, 0));
        for (i, xc) in self
            .x
            .axis_chunks_iter(Axis(0), self.chunk_rows)
            .enumerate()
        {
            monitor.check()?;
            let (start, c) = (i * self.chunk_rows, xc.nrows());
            let labels = &self.labels[start..start + c];
            let mut p = phi.slice_mut(s![..c, ..]);
            at.transform(xc, p.view_mut(), par)?;
            let p = p.view();
            // α_ic = (ỹ_ic − m_c − φ_i·w_c)/σ²_ic.
            let mut alpha = p.dot(&w);
            for (mut row, &k) in alpha.rows_mut().into_iter().zip(labels) {
                for (j, v) in row.iter_mut().enumerate() {
                    let (noise, target) = t.noise_and_target(j == k);
                    *v = (target - gpc.classes[j].mean - *v) / noise;
                }
            }
            let mut r = alpha.dot(&w.t());
            r.scaled_add(-1.0 / t.noise_out, &p.dot(&a_sum));
            for (k, ai) in a_inv.iter().enumerate() {
                let idx: Vec<usize> = (0..c).filter(|&i| labels[i] == k).collect();
                if idx.is_empty() {
                    continue;
                }
                let part = p.select(Axis(0), &idx).dot(ai);
                for (row, &i) in part.rows().into_iter().zip(&idx) {
                    r.row_mut(i).scaled_add(-shift, &row);
                }
            }
            at.contract(xc, p, r.view(), &mut buf, &mut grad[..k], par)?;
        }
        grad[0] += at.finish(&g);
        Ok((grad, gpc))
    }
}

impl Objective for DirichletLml<'_> {
    type Fit = DirichletGpc;

    fn n_rows(&self) -> usize {
        self.x.nrows()
    }

    fn evaluate(&self, theta: &[f64], monitor: &Monitor) -> Result<Evaluation<Self::Fit>> {
        let values = self.params.at(theta)?;
        let (grad, gpc) = self.lml(&values, true, monitor)?;
        Ok(Evaluation {
            value: gpc.lml(),
            grad: self.params.select(&grad),
            fit: gpc,
        })
    }

    /// The LML from the statistics pass alone.
    fn value(&self, theta: &[f64], monitor: &Monitor) -> Result<f64> {
        Ok(self.lml(&self.params.at(theta)?, false, monitor)?.1.lml())
    }

    fn subsample(&self, rows: &[usize]) -> Result<Option<Self>> {
        Ok(Some(Self {
            map: self.map,
            x: self.x.select(Axis(0), rows).into(),
            labels: Cow::Owned(rows.iter().map(|&i| self.labels[i]).collect()),
            n_classes: self.n_classes,
            alpha_epsilon: self.alpha_epsilon,
            params: self.params.clone(),
            chunk_rows: self.chunk_rows,
            par: self.par,
        }))
    }
}

/// Inputs finite, labels as long as the rows and in range.
fn check_inputs(x: ArrayView2<'_, f64>, labels: &[usize], n_classes: usize) -> Result<()> {
    let codes = ndarray::Array1::from_iter(labels.iter().map(|&k| k as f64));
    check_training_data(x, codes.view())?;
    super::check_labels(labels, n_classes)
}

/// What a classifier's hyperparameter fit needs besides the data.
#[derive(Clone, Debug, PartialEq)]
pub struct GpcOptimizeConfig {
    /// `α_ε > 0`.
    pub alpha_epsilon: f64,
    /// The hyperparameters to optimize.
    pub free: FreeHypers,
    /// Restarts, seed, iterations and the coarse-to-fine threshold.
    pub optimizer: OptimizerConfig,
    /// Rows transformed at a time (feature space).
    pub chunk_rows: usize,
}

/// A feature-space classifier with fitted hyperparameters.
#[derive(Clone, Debug)]
pub struct FittedDirichletGpc {
    /// The map at the fitted hyperparameters.
    pub map: AnyFeatureMap,
    /// The fitted length scale(s): one, or one per input dimension for a
    /// map drawn with them.
    pub length_scale: Vec<f64>,
    /// The fitted kernel variance.
    pub kernel_variance: f64,
    /// The classifier on that map (its [`DirichletGpc::lml`] is the value
    /// at the optimum).
    pub model: DirichletGpc,
    /// L-BFGS iterations spent over all runs.
    pub n_iter: u64,
}

/// Fits the hyperparameters of the feature-space classifier on `map` by
/// maximizing `Σ_c LML_c` ([`DirichletLml`], [`optimize::maximize`]) from
/// the map's own length scale and kernel variance (the length scale at the
/// median pairwise distance of `x` instead when better, see
/// docs/math/classification.rst, "Hyperparameters"); the best evaluation's
/// classifier is returned with the map at the optimum (no refit).
///
/// # Errors
/// As [`DirichletLml::new`]; [`Error::Interrupted`] once `monitor` is
/// cancelled.
pub fn fit_dirichlet_gpc(
    map: &GpcMap,
    x: ArrayView2<'_, f64>,
    labels: &[usize],
    n_classes: usize,
    cfg: &GpcOptimizeConfig,
    par: Parallelism,
    monitor: &Monitor,
) -> Result<FittedDirichletGpc> {
    let (l0, kv0) = map.hyperparameters();
    let params = cfg.free.params(l0, kv0)?;
    let k = params.n_length_scales();
    let obj = DirichletLml::new(
        map,
        x.view(),
        labels,
        n_classes,
        cfg.alpha_epsilon,
        params.clone(),
        cfg.chunk_rows,
        par,
    )?;
    let data = if k == 1 {
        vec![median_pairwise_distance(x)]
    } else {
        data_length_scales(x, true)
    };
    let start = optimize::better_start(
        &obj,
        &params,
        &optimize::with_length_scales(&params, &data),
        &cfg.optimizer,
        monitor,
    )?;
    let (theta, model, n_iter) =
        maximize_or_evaluate(&obj, &params, &start, &cfg.optimizer, monitor)?;
    let v = params.at(&theta)?;
    Ok(FittedDirichletGpc {
        map: map.at(&v[..k], v[k])?,
        length_scale: v[..k].to_vec(),
        kernel_variance: v[k],
        model,
        n_iter,
    })
}

/// [`optimize::maximize`] from `start`, or one evaluation when nothing in
/// `params` is free.
fn maximize_or_evaluate<O: Objective>(
    obj: &O,
    params: &LogParams,
    start: &[f64],
    cfg: &OptimizerConfig,
    monitor: &Monitor,
) -> Result<(Vec<f64>, O::Fit, u64)> {
    if params.free.is_empty() {
        monitor.check()?;
        return Ok((Vec::new(), obj.evaluate(&[], monitor)?.fit, 0));
    }
    let opt = optimize::maximize(obj, start, cfg, monitor)?;
    Ok((opt.theta, opt.fit, opt.n_iter))
}

/// The summed class log marginal likelihood of the exact classifier
/// (Gaussian kernel, one or per-dimension length scales) and its gradient
/// as an [`Objective`] of the free log hyperparameters `(ln l.., ln σ²)`.
pub struct ExactDirichletLml<'a> {
    x: CowArray<'a, f64, Ix2>,
    labels: Cow<'a, [usize]>,
    n_classes: usize,
    alpha_epsilon: f64,
    params: LogParams,
    par: Parallelism,
}

impl<'a> ExactDirichletLml<'a> {
    /// The objective on inputs `x` with labels in `0..n_classes`.
    ///
    /// # Errors
    /// Shape mismatches, non-finite inputs, bad labels, `α_ε ≤ 0`, a
    /// length-scale count other than 1 or `d`.
    pub fn new(
        x: ArrayView2<'a, f64>,
        labels: &'a [usize],
        n_classes: usize,
        alpha_epsilon: f64,
        params: LogParams,
        par: Parallelism,
    ) -> Result<Self> {
        LabelTransform::new(alpha_epsilon)?;
        check_inputs(x, labels, n_classes)?;
        let k = params.n_length_scales();
        StationaryKernel::gaussian(params.values[..k].to_vec(), params.values[k])
            .validate(x.ncols())?;
        Ok(Self {
            x: x.into(),
            labels: Cow::Borrowed(labels),
            n_classes,
            alpha_epsilon,
            params,
            par,
        })
    }

    /// The exact classifier at `values` (a Cholesky factor of `K + Σ_c`
    /// per class, what prediction needs).
    fn model(&self, values: &[f64], monitor: &Monitor) -> Result<ExactGpc> {
        let k = values.len() - 2;
        let kernel = StationaryKernel::gaussian(values[..k].to_vec(), values[k]);
        let transform = LabelTransform::new(self.alpha_epsilon)?;
        let x = self.x.view();
        let kmat = kernel_matrix_symmetric(x, &kernel, self.par, monitor)?;
        let classes = fit_classes(
            kmat,
            &self.labels,
            self.n_classes,
            &transform,
            self.par,
            monitor,
        )?;
        Ok(ExactGpc {
            x_train: x.to_owned(),
            kernel,
            transform,
            classes,
        })
    }

    /// The summed class log marginal likelihood at `values` and, with
    /// `want_grad`, its gradient (else zeros), every class from one factor
    /// of `B = K + σ²₀ I` (see the module docs, "Exact kernel").
    fn lml(&self, values: &[f64], want_grad: bool, monitor: &Monitor) -> Result<(f64, Vec<f64>)> {
        let par = self.par;
        let k = values.len() - 2;
        let kernel = StationaryKernel::gaussian(values[..k].to_vec(), values[k]);
        let t = LabelTransform::new(self.alpha_epsilon)?;
        let x = self.x.view();
        let n = x.nrows();
        let kmat = kernel_matrix_symmetric(x, &kernel, par, monitor)?;
        let b = Cholesky::shifted_monitored(as_faer(kmat.view()), t.noise_out, par, monitor)?;
        let b_inv = b.inverse_monitored(par, monitor)?;
        // σ²₀ − σ²₁ > 0: a row of the class has the smaller noise.
        let gap = t.noise_out - t.noise_in;
        let want_grad = want_grad && !self.params.free.is_empty();
        let mut w = Array2::<f64>::zeros(if want_grad { (n, n) } else { (0, 0) });
        let mut alphas = Array2::<f64>::zeros((n, self.n_classes));
        let mut value = 0.0;
        for (c, idx) in rows_by_class(&self.labels, self.n_classes)
            .iter()
            .enumerate()
        {
            monitor.check()?;
            let mean = t.prior_mean(idx.len() as u64, n as u64);
            let mut r = Array1::from_elem(n, t.target_out - mean);
            for &i in idx {
                r[i] = t.target_in - mean;
            }
            let beta = b_inv.dot(&r);
            let mut alpha = beta.clone();
            let mut log_det = b.log_det();
            if !idx.is_empty() {
                // K + Σ_c = B − gap·P Pᵀ (P the columns of the class's rows):
                // (K + Σ_c)⁻¹ = B⁻¹ + U S⁻¹ Uᵀ with U = B⁻¹P and
                // S = I/gap − PᵀB⁻¹P, positive definite (its eigenvalues are
                // at least 1/gap − 1/σ²₀ > 0), and
                // det(K + Σ_c) = det B · gapⁿᶜ · det S.
                let u = b_inv.select(Axis(1), idx);
                let mut s_mat = u.select(Axis(0), idx).mapv(|v| -v);
                for i in 0..idx.len() {
                    s_mat[(i, i)] += 1.0 / gap;
                }
                let s_chol = Cholesky::shifted_monitored(as_faer(s_mat.view()), 0.0, par, monitor)?;
                let beta_c = Array1::from_iter(idx.iter().map(|&i| beta[i]));
                let z = Array1::from(s_chol.solve_vec(beta_c.view(), par));
                alpha += &u.dot(&z);
                log_det += idx.len() as f64 * gap.ln() + s_chol.log_det();
                if want_grad {
                    // W −= U S⁻¹ Uᵀ (the −B⁻¹ of every class is added below).
                    let s_inv = s_chol.inverse_monitored(par, monitor)?;
                    let mut v = Array2::<f64>::zeros(u.dim());
                    matmul_monitored(
                        as_faer_mut(v.view_mut()),
                        Accum::Replace,
                        as_faer(u.view()),
                        as_faer(s_inv.view()),
                        1.0,
                        faer_par(par),
                        monitor,
                    )?;
                    matmul_monitored(
                        as_faer_mut(w.view_mut()),
                        Accum::Add,
                        as_faer(v.view()),
                        as_faer(u.t()),
                        -1.0,
                        faer_par(par),
                        monitor,
                    )?;
                }
            }
            value -= 0.5 * (r.dot(&alpha) + log_det + n as f64 * LN_2PI);
            alphas.column_mut(c).assign(&alpha);
        }
        let mut grad = vec![0.0; values.len()];
        if want_grad {
            monitor.check()?;
            // W = Σ_c (α_cα_cᵀ − (K + Σ_c)⁻¹).
            w.scaled_add(-(self.n_classes as f64), &b_inv);
            matmul_monitored(
                as_faer_mut(w.view_mut()),
                Accum::Add,
                as_faer(alphas.view()),
                as_faer(alphas.t()),
                1.0,
                faer_par(par),
                monitor,
            )?;
            // M = W ⊙ K (symmetric).
            w *= &kmat;
            grad[k] = 0.5 * w.sum();
            if self.params.free.iter().any(|&i| i < k) {
                let per_dim = lower_sq_contraction(x, &w, par);
                // ½ Σ_ij over the symmetric sum = the strict lower triangle.
                if k == 1 {
                    grad[0] = per_dim.iter().sum::<f64>() / (values[0] * values[0]);
                } else {
                    for (a, pd) in per_dim.iter().enumerate() {
                        grad[a] = pd / (values[a] * values[a]);
                    }
                }
            }
        }
        Ok((value, grad))
    }
}

/// `out[a] = Σ_{j<i} m_j (x_ja − x_ia)²` for one row `i = m.len()` of the
/// strict lower triangle, from `xt = Xᵀ` (`d × n` row-major), each sum with
/// [`dot_sq`]'s eight partial sums (no FMA contraction: the same bits at
/// every SIMD level).
#[inline(always)]
fn lower_row_sq_body(m: &[f64], xt: &[f64], n: usize, out: &mut [f64]) {
    let i = m.len();
    for (o, row) in out.iter_mut().zip(xt.chunks_exact(n)) {
        *o = dot_sq(m, &row[..i], row[i]);
    }
}

widest_simd! {
    /// [`lower_row_sq_body`] with the widest SIMD the CPU offers.
    fn lower_row_sq(m: &[f64], xt: &[f64], n: usize, out: &mut [f64]) = lower_row_sq_body;
}

/// `Σ_i Σ_{j<i} M_ij (x_ia − x_ja)²` for every dimension `a` (`M` square,
/// `N × N`; its strict lower triangle is read): the length-scale gradient
/// of the exact classifier before the division by `l_a²`. Rows in parallel,
/// their terms summed in row order: the result does not depend on the
/// thread count.
fn lower_sq_contraction(x: ArrayView2<'_, f64>, m: &Array2<f64>, par: Parallelism) -> Vec<f64> {
    let (n, d) = x.dim();
    let mut per_dim = vec![0.0; d];
    if n == 0 || d == 0 {
        return per_dim;
    }
    let xt = x.t().as_standard_layout().into_owned();
    let xs = xt.as_slice().unwrap_or_default();
    let m = m.as_standard_layout();
    let ms = m.as_slice().unwrap_or_default();
    let row = |i: usize| -> Vec<f64> {
        let mut out = vec![0.0; d];
        lower_row_sq(&ms[i * n..i * n + i], xs, n, &mut out);
        out
    };
    let rows: Vec<Vec<f64>> = if par.is_parallel() {
        (1..n).into_par_iter().map(row).collect()
    } else {
        (1..n).map(row).collect()
    };
    for r in &rows {
        for (acc, v) in per_dim.iter_mut().zip(r) {
            *acc += v;
        }
    }
    per_dim
}

/// An evaluation has no fit: the factors of `K + Σ_c` that prediction
/// needs are formed once, at the optimum ([`fit_exact_gpc`]).
impl Objective for ExactDirichletLml<'_> {
    type Fit = ();

    fn n_rows(&self) -> usize {
        self.x.nrows()
    }

    fn evaluate(&self, theta: &[f64], monitor: &Monitor) -> Result<Evaluation<Self::Fit>> {
        let values = self.params.at(theta)?;
        let (value, grad) = self.lml(&values, true, monitor)?;
        Ok(Evaluation {
            value,
            grad: self.params.select(&grad),
            fit: (),
        })
    }

    /// The LML without the gradient's `N × N` products (`W` of every
    /// class and its contraction with the kernel's derivatives).
    fn value(&self, theta: &[f64], monitor: &Monitor) -> Result<f64> {
        Ok(self.lml(&self.params.at(theta)?, false, monitor)?.0)
    }

    fn subsample(&self, rows: &[usize]) -> Result<Option<Self>> {
        Ok(Some(Self {
            x: self.x.select(Axis(0), rows).into(),
            labels: Cow::Owned(rows.iter().map(|&i| self.labels[i]).collect()),
            n_classes: self.n_classes,
            alpha_epsilon: self.alpha_epsilon,
            params: self.params.clone(),
            par: self.par,
        }))
    }
}

/// An exact classifier with fitted hyperparameters.
#[derive(Clone, Debug)]
pub struct FittedExactGpc {
    /// The classifier at the optimum (its kernel holds the fitted length
    /// scale(s) and kernel variance).
    pub model: ExactGpc,
    /// L-BFGS iterations spent over all runs.
    pub n_iter: u64,
}

/// Fits the hyperparameters of the exact classifier (Gaussian kernel) from
/// `length_scale` and `kernel_variance` (a free length scale from the
/// median pairwise distance of `x` instead when better, see
/// docs/math/classification.rst) by maximizing `Σ_c LML_c`
/// ([`ExactDirichletLml`], [`optimize::maximize`]), then factors every
/// class at the optimum (or at the given values when nothing is free). It
/// holds `C + 1` (while optimizing at least 5) float64 `N × N` matrices and
/// refuses to start when they exceed `memory_bytes`.
///
/// # Errors
/// As [`ExactDirichletLml::new`]; too little memory;
/// [`Error::Interrupted`] once `monitor` is cancelled.
#[allow(clippy::too_many_arguments)]
pub fn fit_exact_gpc(
    x: ArrayView2<'_, f64>,
    labels: &[usize],
    n_classes: usize,
    length_scale: Vec<f64>,
    kernel_variance: f64,
    cfg: &GpcOptimizeConfig,
    memory_bytes: u64,
    par: Parallelism,
    monitor: &Monitor,
) -> Result<FittedExactGpc> {
    let params = cfg.free.params(length_scale, kernel_variance)?;
    // The kernel and a factor per class; while optimizing the kernel, the
    // factor of B, its inverse (and faer's copy of it) and W.
    let n_matrices = if params.free.is_empty() {
        n_classes.saturating_add(1)
    } else {
        n_classes.saturating_add(1).max(5)
    };
    super::exact::check_memory(x.nrows(), n_matrices, memory_bytes)?;
    let obj = ExactDirichletLml::new(
        x.view(),
        labels,
        n_classes,
        cfg.alpha_epsilon,
        params.clone(),
        par,
    )?;
    let (theta, n_iter) = if params.free.is_empty() {
        (Vec::new(), 0)
    } else {
        // The data's scale per column with per-dimension length scales.
        let data = data_length_scales(x, params.n_length_scales() > 1);
        let start = optimize::better_start(
            &obj,
            &params,
            &optimize::with_length_scales(&params, &data),
            &cfg.optimizer,
            monitor,
        )?;
        let opt = optimize::maximize(&obj, &start, &cfg.optimizer, monitor)?;
        (opt.theta, opt.n_iter)
    };
    monitor.check()?;
    let model = obj.model(&params.at(&theta)?, monitor)?;
    Ok(FittedExactGpc { model, n_iter })
}

#[cfg(test)]
#[path = "optimize_tests.rs"]
mod tests;
