//! The fitted sparse GP and its predictions (see docs/math/sparse_gp.rst,
//! section Prediction): with `k_u* = k(Z, x*)`, `t = L^{−1} k_u*` and
//! `s = L_B^{−1} t`,
//!
//! `μ* = k_u*ᵀ w + ȳ`, `v* = k** − tᵀt + sᵀs`, `v*_y = v* + σ_n²`,
//!
//! where `w = Σ^{−1} b` (VFE: divided by `σ_n²`) are the bound's weights.

use faer::MatMut;
use ndarray::{s, Array1, Array2, ArrayView2};

use super::bound::Bound;
use super::kernel_blocks::{cross_block, scaled_t};
use super::prior::InducingPrior;
use super::stats::Method;
use crate::error::{check_finite, Error, Result};
use crate::gp::MeanAndVariance;
use crate::kernels::{midrange, StationaryKernel};
use crate::linalg::Cholesky;
use crate::threads::Parallelism;

/// A fitted sparse GP (VFE or FITC).
#[derive(Clone, Debug)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct SparseGp {
    /// The approximation.
    pub method: Method,
    /// The kernel and its hyperparameters.
    pub params: StationaryKernel,
    /// The noise variance `σ_n²`.
    pub noise_variance: f64,
    /// The inducing inputs `Z` (`M × d`).
    pub inducing: Array2<f64>,
    /// The factor `L` of `K_uu + ε I` (its jitter is [`SparseGp::jitter`]).
    pub chol_uu: Cholesky,
    /// The factor `L_B` of `B = I + C`.
    pub chol_b: Cholesky,
    /// The predictive-mean weights `w`.
    pub weights: Array1<f64>,
    /// The target mean added back to predictions (0 without centering).
    pub y_mean: f64,
    /// The objective at the fitted parameters (VFE's bound on the log
    /// marginal likelihood, FITC's log marginal likelihood) of the
    /// centered targets.
    pub objective: f64,
    /// L-BFGS iterations spent on the fit (0 without optimization).
    pub n_iter: u64,
    /// Whether the statistics behind the factors and weights were computed
    /// on the GPU (float32, docs/math/sparse_gp.rst, section Devices).
    #[cfg_attr(feature = "serde", serde(default))]
    pub on_gpu: bool,
}

/// Test points per block of [`SparseGp::predict`] (bounds the `M × block`
/// cross-covariance).
const PREDICT_BLOCK: usize = 1024;

impl SparseGp {
    /// The fitted model of an evaluation: its prior and its bound.
    pub fn from_bound(method: Method, prior: InducingPrior, bound: Bound, n_iter: u64) -> Self {
        Self {
            method,
            params: prior.params,
            noise_variance: prior.noise_variance,
            inducing: prior.z,
            chol_uu: prior.chol,
            chol_b: bound.chol_b,
            weights: bound.weights,
            y_mean: bound.y_mean,
            objective: bound.value,
            n_iter,
            on_gpu: false,
        }
    }

    /// The jitter added to the diagonal of `K_uu` (0 normally).
    pub fn jitter(&self) -> f64 {
        self.chol_uu.jitter()
    }

    /// Checks a model built from outside (e.g. deserialized or edited), in
    /// `O(M + d)`: shapes of the factors and weights against `M`, the
    /// hyperparameters and the target mean. [`Self::predict`] calls it.
    ///
    /// # Errors
    /// [`Error::ShapeMismatch`], [`Error::InvalidParameter`] or
    /// [`Error::NonFinite`] (`y_mean`).
    pub fn validate(&self) -> Result<()> {
        let (m, d) = self.inducing.dim();
        self.params.validate(d)?;
        crate::gp::check_positive("noise_variance", self.noise_variance)?;
        crate::error::check_finite("y_mean", [self.y_mean].iter())?;
        Error::check_sizes(
            m,
            [
                ("order of the inducing factor", self.chol_uu.dim()),
                ("order of the factor of B", self.chol_b.dim()),
                ("length of the weights", self.weights.len()),
            ],
        )?;
        Ok(())
    }

    /// Predictive mean `μ*` and, with `want_var`, the latent variance `v*`
    /// (clipped at 0) at the rows of `xs`. The noisy variance is
    /// `v* + σ_n²`.
    ///
    /// # Errors
    /// [`Error::ShapeMismatch`] for `xs` of the wrong width,
    /// [`Error::NonFinite`] for NaN in it; the errors of [`Self::validate`]
    /// for a model whose fields disagree.
    pub fn predict(
        &self,
        xs: ArrayView2<'_, f64>,
        want_var: bool,
        par: Parallelism,
    ) -> Result<MeanAndVariance> {
        self.validate()?;
        let rows = xs.nrows();
        let mut mean = Array1::<f64>::zeros(rows);
        let mut var = want_var.then(|| Array1::<f64>::zeros(rows));
        let blocks = TestBlocks {
            params: &self.params,
            inducing: self.inducing.view(),
            chol_uu: &self.chol_uu,
        };
        blocks.for_each(xs, want_var, par, |start, kv, latent| {
            let stop = start + kv.ncols();
            let mu = kv.t().dot(&self.weights);
            mean.slice_mut(s![start..stop])
                .iter_mut()
                .zip(&mu)
                .for_each(|(o, v)| *o = v + self.y_mean);
            if let (Some(var), Some((t, tt))) = (var.as_mut(), latent) {
                let ss = solved_norms(&self.chol_b, t, kv.ncols(), par);
                for (j, o) in var.slice_mut(s![start..stop]).iter_mut().enumerate() {
                    *o = (self.params.variance - tt[j] + ss[j]).max(0.0);
                }
            }
        })?;
        crate::gp::check_prediction(&mean, var.as_ref())?;
        Ok((mean, var))
    }
}

/// The pieces of a prediction at blocks of test rows shared by every model
/// on the same inducing inputs (the sparse GP, each class of the sparse
/// classifier): the kernel, `Z` and the factor `L` of `K_uu`.
pub(crate) struct TestBlocks<'a> {
    /// The kernel and its hyperparameters.
    pub params: &'a StationaryKernel,
    /// The inducing inputs `Z` (`M × d`).
    pub inducing: ArrayView2<'a, f64>,
    /// The factor `L` of `K_uu + ε I`.
    pub chol_uu: &'a Cholesky,
}

impl TestBlocks<'_> {
    /// Calls `f(start, k_u*, latent)` for every block of at most
    /// [`PREDICT_BLOCK`] rows of `xs` from row `start`: `k_u* = k(Z, x*)`
    /// (`M × b`) and, with `want_var`, `latent = (t, tᵀt)` with `t =
    /// L^{−1} k_u*` (`M × b` row-major) and its column norms.
    ///
    /// # Errors
    /// [`Error::ShapeMismatch`] for `xs` of the wrong width,
    /// [`Error::NonFinite`] for NaN in it.
    pub(crate) fn for_each(
        &self,
        xs: ArrayView2<'_, f64>,
        want_var: bool,
        par: Parallelism,
        mut f: impl FnMut(usize, ArrayView2<'_, f64>, Option<(&[f64], &[f64])>),
    ) -> Result<()> {
        let (m, d) = self.inducing.dim();
        Error::check_n_features(d, xs.ncols())?;
        check_finite("X", xs.iter())?;
        // The center of the fit's passes (see InducingPrior).
        let center = midrange(self.inducing);
        let w = self.params.scale(self.inducing, &center);
        let rows = xs.nrows();
        let mut kb = Vec::new();
        let mut t = Vec::new();
        for start in (0..rows).step_by(PREDICT_BLOCK) {
            let stop = (start + PREDICT_BLOCK).min(rows);
            let b = stop - start;
            let ut = scaled_t(self.params, xs.slice(s![start..stop, ..]), &center);
            kb.resize(m * b, 0.0);
            cross_block(self.params, w.view(), ut.view(), &mut kb, None, par);
            let kv =
                ArrayView2::from_shape((m, b), &kb).map_err(|e| Error::Internal(e.to_string()))?;
            if want_var {
                t.clone_from(&kb);
                let tm = MatMut::from_row_major_slice_mut(&mut t, m, b);
                self.chol_uu.solve_lower_in_place(tm, par);
                let tt = column_norms(&t, b);
                f(start, kv, Some((&t, &tt)));
            } else {
                f(start, kv, None);
            }
        }
        Ok(())
    }
}

/// `‖L_B^{−1} t_j‖²` for each column `j` of the `M × b` row-major `t`.
pub(crate) fn solved_norms(chol: &Cholesky, t: &[f64], b: usize, par: Parallelism) -> Vec<f64> {
    let mut u = t.to_vec();
    let m = u.len() / b.max(1);
    chol.solve_lower_in_place(MatMut::from_row_major_slice_mut(&mut u, m, b), par);
    column_norms(&u, b)
}

/// `Σ_m a[m·b + j]²` for each column `j` of an `M × b` row-major matrix.
fn column_norms(a: &[f64], b: usize) -> Vec<f64> {
    let mut out = vec![0.0; b];
    for row in a.chunks_exact(b) {
        for (o, &v) in out.iter_mut().zip(row) {
            *o += v * v;
        }
    }
    out
}
