//! The Dirichlet GP classifier with the exact Gaussian kernel (small `N`):
//! per class `c` the exact GP of `docs/math/gp.rst`, "Exact GP", with the heteroscedastic
//! noise `Σ_c`, `L_c L_cᵀ = K + Σ_c`, `α_c = (K + Σ_c)⁻¹(ỹ_c − m_c)`. The
//! reference for the feature-space model ([`super::DirichletGpc`]).

use ndarray::{Array1, Array2, ArrayView2};

use super::{check_labels, stack_classes, LabelTransform, LatentGp, LN_2PI};
use crate::error::{Error, Result};
use crate::gp::exact::{check_training_data, predict_exact_all, ExactPieces};
use crate::kernels::StationaryKernel;
use crate::linalg::{as_faer, Cholesky};
use crate::progress::Monitor;
use crate::threads::Parallelism;

/// Refuses an exact classifier on `n` rows that holds `n_matrices` float64
/// `N × N` matrices when they exceed `memory_bytes`.
pub(crate) fn check_memory(n: usize, n_matrices: usize, memory_bytes: u64) -> Result<()> {
    let need = (n_matrices as u128) * (n as u128) * (n as u128) * 8;
    if need > u128::from(memory_bytes) {
        return Err(Error::invalid(
            "X",
            format!(
                "the exact classifier with N = {n} rows needs about {:.1} GiB but only {:.1} GiB \
                 of memory is available; use the feature-space classifier (RandomFeatureGPC) \
                 instead",
                need as f64 / f64::from(1u32 << 30),
                memory_bytes as f64 / f64::from(1u32 << 30)
            ),
        ));
    }
    Ok(())
}

/// The class latents of the exact classifier from the kernel matrix `k`
/// (`N × N`, its diagonal overwritten): per class the factor of `K + Σ_c`, `α_c = (K + Σ_c)⁻¹(ỹ_c −
/// m_c)` and `LML_c = −½ r_cᵀα_c − ½ ln det(K + Σ_c) − (N/2) ln 2π`.
/// `monitor` is checked before every class.
///
/// # Errors
/// A failed factorization; [`Error::Interrupted`] once `monitor` is
/// cancelled.
pub(crate) fn fit_classes(
    mut k: Array2<f64>,
    labels: &[usize],
    n_classes: usize,
    transform: &LabelTransform,
    par: Parallelism,
    monitor: &Monitor,
) -> Result<Vec<LatentGp>> {
    let n = labels.len();
    let diag: Vec<f64> = (0..n).map(|i| k[(i, i)]).collect();
    (0..n_classes)
        .map(|c| {
            monitor.check()?;
            let n_in = labels.iter().filter(|&&k| k == c).count();
            let mean = transform.prior_mean(n_in as u64, n as u64);
            let mut r = Array1::<f64>::zeros(n);
            for (i, &label) in labels.iter().enumerate() {
                let (noise, target) = transform.noise_and_target(label == c);
                k[(i, i)] = diag[i] + noise;
                r[i] = target - mean;
            }
            let chol = Cholesky::shifted_monitored(as_faer(k.view()), 0.0, par, monitor)?;
            let coef = Array1::from(chol.solve_vec(r.view(), par));
            let lml = -0.5 * (r.dot(&coef) + chol.log_det() + n as f64 * LN_2PI);
            Ok(LatentGp {
                chol,
                coef,
                mean,
                lml,
            })
        })
        .collect()
}

/// A fitted exact Dirichlet GP classifier: the training inputs, the kernel
/// and one [`LatentGp`] (an `N × N` factor of `K + Σ_c`) per class.
#[derive(Clone, Debug)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct ExactGpc {
    /// Training inputs (`N × d`).
    pub x_train: Array2<f64>,
    /// The kernel.
    pub kernel: StationaryKernel,
    /// The label transform.
    pub transform: LabelTransform,
    /// The class latents, in class order.
    pub classes: Vec<LatentGp>,
}

impl ExactGpc {
    /// Fits every class on inputs `x` with labels in `0..n_classes`. It
    /// holds `C + 1` float64 `N × N` matrices (the kernel and one factor per
    /// class) and refuses to start when they exceed `memory_bytes`.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] for `α_ε ≤ 0`, fewer than two classes, a
    /// label out of range, an invalid kernel or too little memory;
    /// [`Error::ShapeMismatch`] when `labels` and `x` differ in length;
    /// [`Error::NonFinite`] for non-finite inputs.
    pub fn fit(
        x: ArrayView2<'_, f64>,
        labels: &[usize],
        n_classes: usize,
        kernel: StationaryKernel,
        alpha_epsilon: f64,
        memory_bytes: u64,
        par: Parallelism,
    ) -> Result<Self> {
        let transform = LabelTransform::new(alpha_epsilon)?;
        let n = x.nrows();
        let codes = Array1::from_iter(labels.iter().map(|&k| k as f64));
        check_training_data(x, codes.view())?;
        check_labels(labels, n_classes)?;
        kernel.validate(x.ncols())?;
        check_memory(n, n_classes.saturating_add(1), memory_bytes)?;
        let monitor = Monitor::default();
        let k = crate::gp::exact::kernel_matrix_symmetric(x, &kernel, par, &monitor)?;
        let classes = fit_classes(k, labels, n_classes, &transform, par, &monitor)?;
        Ok(Self {
            x_train: x.to_owned(),
            kernel,
            transform,
            classes,
        })
    }

    /// The number of classes `C`.
    pub fn n_classes(&self) -> usize {
        self.classes.len()
    }

    /// The summed log marginal likelihood of the classes.
    pub fn lml(&self) -> f64 {
        self.classes.iter().map(|c| c.lml).sum()
    }

    /// Latent means `μ*` (`m × C`) and, with `want_var`, variances `v*`
    /// (`m × C`) at the rows of `xs`, every class through
    /// [`predict_exact_all`] (the classes share the kernel and the training
    /// rows, so the cross-covariance is computed once).
    ///
    /// # Errors
    /// As [`predict_exact_all`].
    pub fn predict_latent(
        &self,
        xs: ArrayView2<'_, f64>,
        want_var: bool,
        par: Parallelism,
    ) -> Result<(Array2<f64>, Option<Array2<f64>>)> {
        let fits: Vec<ExactPieces<'_>> = self
            .classes
            .iter()
            .map(|c| ExactPieces {
                chol: &c.chol,
                alpha: c.coef.view(),
                y_mean: c.mean,
            })
            .collect();
        let per_class =
            predict_exact_all(self.x_train.view(), &fits, &self.kernel, xs, want_var, par)?;
        Ok(stack_classes(xs.nrows(), per_class))
    }
}
