//! The inducing inputs with their kernel matrix: `K_uu = k(Z, Z) + ε I`
//! and its Cholesky factor `L`, through the jitter ladder of the exact GP
//! (see docs/math/sparse_gp.rst, section Notation).

use ndarray::{Array2, ArrayView2};

use super::kernel_blocks::kernel_matrix;
use crate::error::{check_finite, Error, Result};
use crate::gp::check_positive;
use crate::kernels::{midrange, StationaryKernel};
use crate::linalg::{as_faer, Cholesky, JITTER_LADDER};
use crate::threads::Parallelism;

/// The hyperparameters and inducing inputs of one sparse-GP evaluation,
/// with what every pass over the data needs: the center `c` (the
/// [`midrange`] of `Z`), the scaled inducing inputs `W = (Z − c)/l` and the
/// factor `L` of `K_uu + ε I`. The jitter `ε` is the
/// first rung of the ladder (0, then `(1e−10, …, 1e−4) · σ²`) at which the
/// factorization succeeds and leaves `K_uu + ε I` numerically regular (see
/// `factor_kuu`); it is proportional to `σ²`, so `K_uu + ε I` scales with
/// the kernel variance as `K_uu` does.
#[derive(Clone, Debug)]
pub struct InducingPrior {
    /// The kernel and its hyperparameters.
    pub params: StationaryKernel,
    /// The noise variance `σ_n²`.
    pub noise_variance: f64,
    /// The inducing inputs `Z` (`M × d`).
    pub z: Array2<f64>,
    /// The center `c` that every scaled input is taken from.
    pub(crate) center: Vec<f64>,
    /// `(Z − c) / l` (`M × d`).
    pub(crate) w: Array2<f64>,
    /// The factor `L` of `K_uu + ε I`.
    pub(crate) chol: Cholesky,
    /// See [`InducingPrior::whiten`].
    pub(crate) whiten: bool,
}

impl InducingPrior {
    /// Builds `K_uu` and factors it.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] for bad hyperparameters (a kernel
    /// variance outside [`KERNEL_VARIANCE_RANGE`] included) or no inducing
    /// input, [`Error::ShapeMismatch`] for a length-scale count that does
    /// not match `Z`'s width, [`Error::NonFinite`] for NaN in `Z`, and
    /// [`Error::InducingNotPositiveDefinite`] when the last jitter fails.
    pub fn new(
        params: StationaryKernel,
        noise_variance: f64,
        z: ArrayView2<'_, f64>,
        par: Parallelism,
    ) -> Result<Self> {
        let (m, d) = z.dim();
        if m == 0 {
            return Err(Error::invalid(
                "n_inducing",
                "needs at least one inducing input",
            ));
        }
        params.validate(d)?;
        check_variance_scale(params.variance)?;
        check_positive("noise_variance", noise_variance)?;
        check_finite("inducing", z.iter())?;
        let center = midrange(z);
        let w = params.scale(z, &center);
        let kuu = kernel_matrix(&params, z, z, par);
        let (chol, kappa) = factor_kuu(&kuu, params.variance, noise_variance, par)?;
        let whiten = needs_whitening(kappa, params.variance, noise_variance);
        Ok(Self {
            params,
            noise_variance,
            z: z.to_owned(),
            center,
            w,
            chol,
            whiten,
        })
    }

    /// Whether VFE statistics under this prior enter the kernel columns as
    /// `L^{−1} k_i` (see [`crate::gp::sparse::SparseStats::whitened`]).
    ///
    /// The bound needs `C = L^{−1} S L^{−ᵀ} / σ_n²`. Formed from the
    /// float64 sum `S = Σ k_i k_iᵀ`, the rounding of `S` (relative `u`)
    /// reaches `C` amplified by `‖K_uu^{−1}‖`; summing the whitened columns
    /// `L^{−1} k_i` instead costs one triangular solve per row chunk
    /// (`M² / 2` multiply-adds per row, a third more than the Gram) and
    /// leaves `C` accurate to the backward error of that solve
    /// (`√κ(K_uu)` instead of `κ(K_uu)`). The kernel-space statistics are
    /// used while the bound's rounding stays below [`WHITEN_ROW_TOL`] per
    /// row by the estimate `100 u κ σ² / σ_n²` (`κ = σ² tr(K_uu^{−1})`).
    pub fn whiten(&self) -> bool {
        self.whiten
    }

    /// The number of inducing inputs `M`.
    pub fn n_inducing(&self) -> usize {
        self.z.nrows()
    }

    /// The jitter `ε` added to the diagonal of `K_uu` (0 normally).
    pub fn jitter(&self) -> f64 {
        self.chol.jitter()
    }

    /// The factor `L` of `K_uu + ε I`.
    pub fn chol(&self) -> &Cholesky {
        &self.chol
    }
}

/// The kernel variances `σ²` a sparse GP computes with. Its statistics
/// are sums of products of kernel values, `S = K_uf K_fu ∝ σ⁴`, which past
/// `σ² ≈ 10^±150` leave float64's normal range (the bound then ignores the
/// data, or cannot be formed); `10^±100` leaves room for the sums over rows
/// and for kernel values below `σ²`. A hyperparameter fit stays far inside:
/// it starts at the targets' variance (`10^±40` at most) and moves it by
/// `e^±40` at most.
pub const KERNEL_VARIANCE_RANGE: (f64, f64) = (1e-100, 1e100);

/// Refuses a kernel variance outside [`KERNEL_VARIANCE_RANGE`].
///
/// # Errors
/// [`Error::InvalidParameter`] naming `kernel_variance`.
fn check_variance_scale(variance: f64) -> Result<()> {
    let (lo, hi) = KERNEL_VARIANCE_RANGE;
    if (lo..=hi).contains(&variance) {
        return Ok(());
    }
    Err(Error::invalid(
        "kernel_variance",
        format!(
            "{variance:e} is outside {lo:e}..{hi:e}: the sparse GP's statistics scale as its \
             square and leave the float64 range; rescale y (and the variances with it)"
        ),
    ))
}

/// The largest rounding of the bound per row (in nats) that the
/// kernel-space statistics may bring (see [`InducingPrior::whiten`]).
pub const WHITEN_ROW_TOL: f64 = 1e-6;

/// Whether the kernel-space statistics could round the bound by more than
/// [`WHITEN_ROW_TOL`] per row: the estimate `100 u κ σ² / σ_n²` with
/// `κ = σ² tr(K_uu^{−1})` (see [`factor_kuu`]) and `u` the float64
/// epsilon. `S`'s entries are sums of `σ⁴`-sized products,
/// rounded by `u` relative, and `L^{−1}` amplifies that by up to
/// `κ / σ²`; the bound weighs `C` by `1 / σ_n²` per row. The factor 100
/// covers the constants that the estimate leaves out: the kernel-space
/// bound's deviation from the whitened one measured 30 to 100 times
/// `u κ σ² / σ_n²` per row over length scales that move `κ` from 1e4 to
/// 1e8 (3,000 rows in 3-d, 20 inducing inputs).
fn needs_whitening(kappa: f64, variance: f64, noise_variance: f64) -> bool {
    100.0 * f64::EPSILON * kappa * variance / noise_variance > WHITEN_ROW_TOL
}

/// `K_uu` whose `κ = σ² tr(K_uu^{−1})` (between the condition number and
/// `M` times it) exceeds this is numerically singular: its factor and the
/// solves with it have lost all but two digits (`100 u κ > 1`), whitened
/// or not, and the bound would reward their rounding.
const KAPPA_MAX: f64 = 1.0 / (100.0 * f64::EPSILON);

/// Whether even whitened statistics could round the bound by more than
/// [`WHITEN_ROW_TOL`] per row: the estimate `u √κ σ² / (10 σ_n²)`. The
/// triangular solve's backward error reaches `L^{−1} k_i` amplified by up
/// to `κ(L) = √κ(K_uu)`, and `C` weighs it by `σ² / σ_n²` per row; the
/// factor 1/10 is the largest ratio of the measured rounding to `u √κ σ² /
/// σ_n²`. It was measured against the bound in 80-bit extended precision
/// from exact kernel values, on 400-row data sets in 1 to 8 dimensions
/// with 10 to 40 inducing rows, Gaussian and Matérn 5/2 kernels, and noise
/// variances near the targets' own noise; at the end points of default
/// fits the ratio was 1e−3 to 1e−2. A noise variance far below the
/// targets' residuals rounds the data-fit term `y^T y / σ_n² − c^T c` by
/// more, whatever `κ`; its bound then lies far below the fit's.
fn whitened_too_coarse(kappa: f64, variance: f64, noise_variance: f64) -> bool {
    0.1 * f64::EPSILON * kappa.sqrt() * variance / noise_variance > WHITEN_ROW_TOL
}

/// `σ² tr(A^{−1})` for the factor of `A` (`⅓ M³` flops, see
/// [`Cholesky::inverse_diagonal`]).
fn kappa(chol: &Cholesky, variance: f64, par: Parallelism) -> f64 {
    variance * chol.inverse_diagonal(par).iter().sum::<f64>()
}

/// Factors `K_uu` (`M × M`, kernel variance `σ²`) through the jitter ladder
/// and returns the factor with its `κ` (see [`kappa`]). A rung is taken
/// when the factorization fails, and also when it succeeds with `κ` above
/// [`KAPPA_MAX`] (numerically singular: `K_uu + ε I` with `ε = 1e−10 σ²`
/// has `κ ≤ 1e10 M`) or so large for `σ² / σ_n²` that even whitened
/// statistics would round the bound (see [`whitened_too_coarse`]). The
/// jittered bound is still a lower bound of the exact log marginal
/// likelihood (it is Titsias' bound for the inducing variables
/// `u + ε^{1/2} ξ`). A failure at the last rung becomes
/// [`Error::InducingNotPositiveDefinite`] naming `M` and that jitter.
fn factor_kuu(
    kuu: &Array2<f64>,
    variance: f64,
    noise_variance: f64,
    par: Parallelism,
) -> Result<(Cholesky, f64)> {
    let singular = |jitter: f64| Error::InducingNotPositiveDefinite {
        m: kuu.nrows(),
        jitter,
    };
    let last = JITTER_LADDER[JITTER_LADDER.len() - 1] * variance;
    let mut chol = Cholesky::new(as_faer(kuu.view()), par).map_err(|e| match e {
        Error::NotPositiveDefinite { .. } => singular(last),
        other => other,
    })?;
    let mut rungs = JITTER_LADDER.iter().map(|e| e * variance);
    loop {
        let k = kappa(&chol, variance, par);
        if k <= KAPPA_MAX && !whitened_too_coarse(k, variance, noise_variance) {
            return Ok((chol, k));
        }
        let jitter = chol.jitter();
        let Some(next) = rungs.find(|&r| r > jitter) else {
            return Err(singular(last));
        };
        chol = Cholesky::with_jitter(as_faer(kuu.view()), next, par).map_err(|e| match e {
            Error::NotPositiveDefinite { .. } => singular(last),
            other => other,
        })?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_matrix_beyond_the_ladder_is_reported_with_m_and_the_jitter() {
        // Kernel matrices are positive semi-definite, so in practice only
        // rounding beyond 1e−4 σ² fails; an indefinite matrix stands in.
        let bad = ndarray::array![[1.0, 2.0, 0.0], [2.0, 1.0, 0.0], [0.0, 0.0, 1.0]];
        let err = factor_kuu(&bad, 1.0, 0.1, Parallelism::Sequential).unwrap_err();
        assert_eq!(
            err,
            Error::InducingNotPositiveDefinite { m: 3, jitter: 1e-4 }
        );
        let msg = err.to_string();
        assert!(
            msg.contains("M = 3")
                && msg.contains("1e-4")
                && msg.contains("n_inducing")
                && msg.contains("greedy_variance")
                && msg.contains("length_scale"),
            "{msg}"
        );
    }

    /// Inducing inputs on a line, `K_uu` (Gaussian kernel) with the length
    /// scale `ls`.
    fn line(ls: f64, variance: f64, noise: f64) -> Result<InducingPrior> {
        let z = Array2::from_shape_fn((12, 1), |(i, _)| i as f64 / 11.0);
        let params = StationaryKernel {
            kernel: crate::kernels::Kernel::Gaussian,
            length_scale: vec![ls],
            variance,
        };
        InducingPrior::new(params, noise, z.view(), Parallelism::Sequential)
    }

    #[test]
    fn conditioning_picks_the_statistics_and_the_jitter() {
        // Well conditioned: kernel space, no jitter.
        let p = line(0.1, 1.0, 0.1).unwrap();
        assert!(!p.whiten() && p.jitter() == 0.0);
        // κ about 1.5e6 with σ² / σ_n² = 1e2: whitened, still no jitter.
        let p = line(0.2, 1.0, 0.01).unwrap();
        assert!(p.whiten() && p.jitter() == 0.0, "{}", p.jitter());
        // σ² / σ_n² = 1e7: u √κ σ² / σ_n² is about 3e−6, its tenth below
        // the tolerance: still no jitter.
        let p = line(0.2, 1.0, 1e-7).unwrap();
        assert!(p.whiten() && p.jitter() == 0.0, "{}", p.jitter());
        // σ² / σ_n² = 1e8: about 3e−5, a jitter.
        let p = line(0.2, 1.0, 1e-8).unwrap();
        assert!(p.jitter() > 0.0);
        // κ about 4e14: the factorization succeeds but κ is beyond
        // 1 / (100 u); the ladder adds a jitter.
        let p = line(0.5, 2.0, 1.0).unwrap();
        assert!(p.jitter() >= 1e-10 * 2.0, "{}", p.jitter());
        let inv = p.chol().inverse_lower(Parallelism::Sequential);
        let k = 2.0 * (0..12).map(|i| inv[(i, i)]).sum::<f64>();
        assert!(k <= KAPPA_MAX, "{k}");
        // σ² / σ_n² = 1e14: no rung leaves a float64 bound a digit.
        let err = line(0.1, 1e12, 1e-2).unwrap_err();
        assert!(
            matches!(err, Error::InducingNotPositiveDefinite { m: 12, .. }),
            "{err}"
        );
    }
}
