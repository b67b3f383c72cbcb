//! Maclaurin coefficients of the supported kernels (`docs/math/maclaurin.rst`,
//! "Dot-product kernels and their series" and "The Gaussian kernel through the
//! exponential kernel").

use crate::error::{Error, Result};

/// A kernel written as `σ² g(x) g(y) Σ_n a_n (x̃ᵀỹ)^n`
/// (`docs/math/maclaurin.rst`, "Dot-product kernels and their series" and "The
/// Gaussian kernel through the exponential kernel").
///
/// The length scale `l` and the kernel variance `σ²` are kept apart (see
/// [`super::MaclaurinConfig`]); this type fixes the series `a_n` and the
/// prefactor `g`.
#[derive(Clone, Copy, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum MaclaurinKernel {
    /// `σ² exp(−‖x − y‖²/(2l²))` = exponential series with the prefactor
    /// `g(x) = exp(−‖x̃‖²/2)` (`docs/math/maclaurin.rst`, "The Gaussian kernel
    /// through the exponential kernel"); the only kernel that may be centered.
    Gaussian,
    /// `σ² exp(xᵀy/l²)`: `a_n = 1/n!`.
    Exponential,
    /// `σ² (xᵀy/l² + c)^q`: `a_n = C(q, n) c^{q−n}` for `n ≤ q`, else 0.
    Polynomial {
        /// The kernel degree `q >= 1`.
        degree: u32,
        /// The bias `c >= 0`.
        bias: f64,
    },
}

impl MaclaurinKernel {
    /// Parses the Python spelling ("gaussian", "exponential", "polynomial");
    /// `degree` and `bias` are used by the polynomial kernel only.
    pub fn parse(name: &str, degree: u32, bias: f64) -> Result<Self> {
        let k = match name {
            "gaussian" => Self::Gaussian,
            "exponential" => Self::Exponential,
            "polynomial" => Self::Polynomial { degree, bias },
            other => {
                return Err(Error::invalid(
                    "kernel",
                    format!(
                        "unknown kernel {other:?}; expected \"gaussian\", \"exponential\" or \
                         \"polynomial\""
                    ),
                ))
            }
        };
        k.validate()?;
        Ok(k)
    }

    /// The kernel of the Python options: `degree` is required by (and
    /// allowed for) the polynomial kernel only, and a nonzero `bias` too.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] naming `degree` or `bias` when one is
    /// given where it does not apply (or `degree` is missing), or as
    /// [`Self::parse`].
    pub fn from_options(name: &str, degree: Option<u32>, bias: f64) -> Result<Self> {
        match (name, degree) {
            ("polynomial", Some(q)) => Self::parse(name, q, bias),
            ("polynomial", None) => Err(Error::invalid(
                "degree",
                "is required for kernel='polynomial'",
            )),
            (_, Some(q)) => Err(Error::invalid(
                "degree",
                format!("applies to kernel='polynomial' only, got degree={q} with kernel={name:?}"),
            )),
            (_, None) if bias != 0.0 => Err(Error::invalid(
                "bias",
                format!("applies to kernel='polynomial' only, got bias={bias}"),
            )),
            (_, None) => Self::parse(name, 1, 0.0),
        }
    }

    /// Checks the polynomial parameters: `1 <= q <=`
    /// [`crate::sketch::MAX_DEGREE`] (as the polynomial sketches), finite
    /// `c >= 0`, and coefficients `C(q, n) c^{q−n}` that are finite (a bias
    /// of `1e200` at `q = 2` is not).
    pub fn validate(&self) -> Result<()> {
        if let Self::Polynomial { degree, bias } = *self {
            crate::sketch::check_degree(degree)?;
            if !bias.is_finite() || bias < 0.0 {
                return Err(Error::invalid(
                    "bias",
                    format!("must be a finite number >= 0, got {bias}"),
                ));
            }
            if let Some(n) = (0..=degree).find(|&n| !self.coefficient(n).is_finite()) {
                return Err(Error::invalid(
                    "bias",
                    format!(
                        "the kernel's coefficient C({degree}, {n}) bias^{} overflows float64 at \
                         bias = {bias:e}: lower the bias or the degree",
                        degree - n
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The coefficient `a_n` (`docs/math/maclaurin.rst`, "Dot-product kernels
    /// and their series"): `1/n!` for the exponential series, `C(q, n) c^{q−n}`
    /// (with `c⁰ = 1`) for the polynomial kernel.
    pub fn coefficient(&self, n: u32) -> f64 {
        match *self {
            Self::Gaussian | Self::Exponential => (-ln_factorial(n)).exp(),
            Self::Polynomial { degree, bias } => {
                if n > degree {
                    0.0
                } else {
                    binomial(degree, n) * bias.powi((degree - n) as i32)
                }
            }
        }
    }

    /// `a_0, …, a_p` (`p + 1` values: the maps bound `p` by their
    /// `max_degree` check before calling this).
    pub fn coefficients(&self, p: u32) -> Vec<f64> {
        (0..=p).map(|n| self.coefficient(n)).collect()
    }

    /// Whether the kernel has the Gaussian prefactor `g` (and may be centered).
    pub fn is_gaussian(&self) -> bool {
        matches!(self, Self::Gaussian)
    }

    /// `ln g(z) = −‖z‖²/2` for the Gaussian kernel, 0 otherwise, from `‖z‖²`.
    pub fn ln_prefactor(&self, sq_norm: f64) -> f64 {
        if self.is_gaussian() {
            -0.5 * sq_norm
        } else {
            0.0
        }
    }

    /// The largest degree with a non-zero coefficient (`q` for the
    /// polynomial kernel), `None` for the infinite exponential series.
    pub fn max_degree(&self) -> Option<u32> {
        match *self {
            Self::Polynomial { degree, .. } => Some(degree),
            _ => None,
        }
    }

    /// The normalized kernel `k/σ²` of a scaled pair from `m = z_iᵀz_j` and
    /// the squared norms (`docs/math/maclaurin.rst`, "Pair statistics"):
    /// `exp(−‖z_i − z_j‖²/2)`, `exp(m)` or `(m + c)^q`.
    pub fn target(&self, m: f64, sq_i: f64, sq_j: f64) -> f64 {
        match *self {
            Self::Gaussian => (m - 0.5 * (sq_i + sq_j)).exp(),
            Self::Exponential => m.exp(),
            Self::Polynomial { degree, bias } => (m + bias).powi(degree as i32),
        }
    }
}

/// `ln n!` (exact summation; `n` is a small truncation degree).
pub fn ln_factorial(n: u32) -> f64 {
    (2..=n).map(|k| (k as f64).ln()).sum()
}

fn binomial(q: u32, n: u32) -> f64 {
    let n = n.min(q - n);
    (0..n).fold(1.0, |acc, k| acc * (q - k) as f64 / (k + 1) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use approx::assert_relative_eq;

    #[test]
    fn coefficient_oracles() {
        let poly = MaclaurinKernel::Polynomial {
            degree: 3,
            bias: 0.5,
        };
        let a = poly.coefficients(5);
        let want = [0.125, 0.75, 1.5, 1.0, 0.0, 0.0];
        for (g, w) in a.iter().zip(want) {
            assert_relative_eq!(*g, w, max_relative = 1e-14);
        }
        assert_relative_eq!(
            MaclaurinKernel::Exponential.coefficient(4),
            1.0 / 24.0,
            max_relative = 1e-14
        );
        assert_eq!(MaclaurinKernel::Gaussian.coefficient(0), 1.0);
        let homogeneous = MaclaurinKernel::Polynomial {
            degree: 2,
            bias: 0.0,
        };
        assert_eq!(homogeneous.coefficients(2), vec![0.0, 0.0, 1.0]);
    }

    #[test]
    fn gaussian_target_matches_prefactor_form() {
        // k/σ² = g(x) g(y) exp(xᵀy) (docs/math/maclaurin.rst, "The Gaussian
        // kernel through the exponential kernel").
        let (x, y) = ([0.3, -1.2], [0.7, 0.4]);
        let m: f64 = x[0] * y[0] + x[1] * y[1];
        let (sx, sy) = (x[0] * x[0] + x[1] * x[1], y[0] * y[0] + y[1] * y[1]);
        let d2 = (x[0] - y[0]).powi(2) + (x[1] - y[1]).powi(2);
        let k = MaclaurinKernel::Gaussian;
        assert_relative_eq!(k.target(m, sx, sy), (-0.5 * d2).exp(), max_relative = 1e-14);
        let g = (k.ln_prefactor(sx) + k.ln_prefactor(sy)).exp();
        assert_relative_eq!(k.target(m, sx, sy), g * m.exp(), max_relative = 1e-14);
    }

    #[test]
    fn bad_kernels() {
        assert!(MaclaurinKernel::parse("laplacian", 2, 1.0).is_err());
        assert!(MaclaurinKernel::parse("polynomial", 0, 1.0).is_err());
        assert!(MaclaurinKernel::parse("polynomial", 2, -1.0).is_err());
        assert!(MaclaurinKernel::parse("polynomial", 2, f64::NAN).is_err());
        assert!(MaclaurinKernel::parse("exponential", 0, -1.0).is_ok());
    }
}
