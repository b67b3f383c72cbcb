//! The inducing inputs with their kernel matrix: `K_uu = k(Z, Z) + ε I`
//! and its Cholesky factor `L`, through the jitter ladder of the exact GP
//! (see docs/math/sparse_gp.rst, section Notation).

use ndarray::{Array2, ArrayView2};

use super::kernel_blocks::kernel_matrix;
use crate::error::{check_finite, Error, Result};
use crate::gp::check_positive;
use crate::kernels::StationaryKernel;
use crate::linalg::{as_faer, Cholesky, JITTER_LADDER};
use crate::threads::Parallelism;

/// The hyperparameters and inducing inputs of one sparse-GP evaluation,
/// with what every pass over the data needs: the scaled inducing inputs
/// `W = Z/l` and the factor `L` of `K_uu + ε I`. The jitter `ε` is the
/// first rung of the ladder (0, then `(1e−10, …, 1e−4) · σ²`) at which the
/// factorization succeeds; it is proportional to `σ²`, so `K_uu + ε I`
/// scales with the kernel variance as `K_uu` does.
#[derive(Clone, Debug)]
pub struct InducingPrior {
    /// The kernel and its hyperparameters.
    pub params: StationaryKernel,
    /// The noise variance `σ_n²`.
    pub noise_variance: f64,
    /// The inducing inputs `Z` (`M × d`).
    pub z: Array2<f64>,
    /// `Z / l` (`M × d`).
    pub(crate) w: Array2<f64>,
    /// `K_uu + ε I` (full, symmetric).
    pub(crate) kuu: Array2<f64>,
    /// Its factor `L`.
    pub(crate) chol: Cholesky,
}

impl InducingPrior {
    /// Builds `K_uu` and factors it.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] for bad hyperparameters or no inducing
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
        check_positive("noise_variance", noise_variance)?;
        check_finite("inducing", z.iter())?;
        let w = params.scale(z);
        let mut kuu = kernel_matrix(&params, z, z, par);
        let chol = factor_kuu(&kuu, params.variance, par)?;
        let jitter = chol.jitter();
        kuu.diag_mut().mapv_inplace(|v| v + jitter);
        Ok(Self {
            params,
            noise_variance,
            z: z.to_owned(),
            w,
            kuu,
            chol,
        })
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

/// Factors `K_uu` (`M × M`, kernel variance `σ²`) through the jitter ladder;
/// a failure at the last rung becomes
/// [`Error::InducingNotPositiveDefinite`] naming `M` and that jitter.
fn factor_kuu(kuu: &Array2<f64>, variance: f64, par: Parallelism) -> Result<Cholesky> {
    Cholesky::new(as_faer(kuu.view()), par).map_err(|e| match e {
        Error::NotPositiveDefinite { .. } => Error::InducingNotPositiveDefinite {
            m: kuu.nrows(),
            jitter: JITTER_LADDER[JITTER_LADDER.len() - 1] * variance,
        },
        other => other,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_matrix_beyond_the_ladder_is_reported_with_m_and_the_jitter() {
        // Kernel matrices are positive semi-definite, so in practice only
        // rounding beyond 1e−4 σ² fails; an indefinite matrix stands in.
        let bad = ndarray::array![[1.0, 2.0, 0.0], [2.0, 1.0, 0.0], [0.0, 0.0, 1.0]];
        let err = factor_kuu(&bad, 1.0, Parallelism::Sequential).unwrap_err();
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
}
