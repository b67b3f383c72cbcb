//! Stationary kernels and their spectral densities (`docs/math/fourier.rst`,
//! "Spectral representation"), and exact kernel matrices ([`kernel_matrix`]).
//! The random Fourier features ([`crate::fourier`]) sample the spectral
//! densities; the Nyström features ([`crate::nystroem`]) evaluate the kernels.
//!
//! Every kernel is normalized, `k(0) = 1`; the kernel variance `σ²` scales it
//! (features are multiplied by `σ`). With `l` the length scale and
//! `r = ‖x − y‖₂ / l`:
//!
//! | name | kernel | spectral density `p(ω)` and sampler |
//! |---|---|---|
//! | `gaussian` | `exp(−r²/2)` | `N(0, I/l²)` |
//! | `laplacian` | `exp(−‖x − y‖₁ / l)` | product of Cauchy(0, `1/l`): `ω_a = tan(π(u − ½))/l` |
//! | `matern12` | `exp(−r)` | multivariate t, 1 degree of freedom |
//! | `matern32` | `(1 + √3 r) exp(−√3 r)` | multivariate t, 3 degrees of freedom |
//! | `matern52` | `(1 + √5 r + 5r²/3) exp(−√5 r)` | multivariate t, 5 degrees of freedom |
//!
//! Matérn `ν`: `p(ω) ∝ (2ν/l² + ‖ω‖²)^{−(ν + d/2)}`, the multivariate t
//! density with `2ν` degrees of freedom and scale matrix `I/l²`. It is
//! sampled as `ω = z · sqrt(2ν / u) / l` with `z ~ N(0, I_d)` and
//! `u ~ χ²(2ν)` independent (a Gaussian scale mixture). Matérn 1/2 is the
//! exponential kernel in the Euclidean norm; `laplacian` uses the `ℓ1`
//! norm, whose density factorizes over coordinates.

use ndarray::{Array2, ArrayView2, ArrayViewMut2};
use rand::Rng;
use rand_distr::{ChiSquared, Distribution, Open01, StandardNormal};

use crate::error::{Error, Result};
use crate::linalg::gemm;

/// A normalized stationary kernel (see the module table).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum Kernel {
    /// `exp(−‖x − y‖²/(2l²))`.
    Gaussian,
    /// `exp(−‖x − y‖₁/l)`.
    Laplacian,
    /// Matérn ν = 1/2: `exp(−r)`.
    Matern12,
    /// Matérn ν = 3/2: `(1 + √3 r) exp(−√3 r)`.
    Matern32,
    /// Matérn ν = 5/2: `(1 + √5 r + 5r²/3) exp(−√5 r)`.
    Matern52,
}

/// The kernel names accepted by [`Kernel::from_name`].
pub const KERNEL_NAMES: [&str; 5] = ["gaussian", "laplacian", "matern12", "matern32", "matern52"];

impl Kernel {
    /// Parses a kernel name (one of [`KERNEL_NAMES`]).
    pub fn from_name(name: &str) -> Result<Self> {
        Ok(match name {
            "gaussian" => Kernel::Gaussian,
            "laplacian" => Kernel::Laplacian,
            "matern12" => Kernel::Matern12,
            "matern32" => Kernel::Matern32,
            "matern52" => Kernel::Matern52,
            _ => {
                return Err(Error::invalid(
                    "kernel",
                    format!("unknown kernel {name:?}; expected one of {KERNEL_NAMES:?}"),
                ))
            }
        })
    }

    /// The kernel's name.
    pub fn name(self) -> &'static str {
        match self {
            Kernel::Gaussian => "gaussian",
            Kernel::Laplacian => "laplacian",
            Kernel::Matern12 => "matern12",
            Kernel::Matern32 => "matern32",
            Kernel::Matern52 => "matern52",
        }
    }

    /// The Matérn degrees of freedom `2ν` of the t spectral density.
    fn t_dof(self) -> Option<f64> {
        match self {
            Kernel::Matern12 => Some(1.0),
            Kernel::Matern32 => Some(3.0),
            Kernel::Matern52 => Some(5.0),
            _ => None,
        }
    }

    /// The kernel as a function of the scaled distance: `r² = ‖x − y‖₂²/l²`
    /// for the Euclidean kernels, `r = ‖x − y‖₁/l` passed as `dist` for the
    /// Laplacian (see [`Kernel::uses_l1`]).
    pub fn profile(self, dist: f64) -> f64 {
        match self {
            Kernel::Gaussian => (-0.5 * dist).exp(),
            Kernel::Laplacian => (-dist).exp(),
            Kernel::Matern12 => (-dist.sqrt()).exp(),
            Kernel::Matern32 => {
                let a = (3.0 * dist).sqrt();
                (1.0 + a) * (-a).exp()
            }
            Kernel::Matern52 => {
                let a = (5.0 * dist).sqrt();
                (1.0 + a + 5.0 * dist / 3.0) * (-a).exp()
            }
        }
    }

    /// True for the Laplacian (`ℓ1` distance); false for the others, which
    /// take the squared Euclidean distance in [`Kernel::profile`].
    pub fn uses_l1(self) -> bool {
        matches!(self, Kernel::Laplacian)
    }

    /// The normalized kernel `k(x, y)` with length scale `l`.
    pub fn eval(self, x: &[f64], y: &[f64], l: f64) -> f64 {
        let dist = if self.uses_l1() {
            x.iter().zip(y).map(|(a, b)| (a - b).abs()).sum::<f64>() / l
        } else {
            x.iter().zip(y).map(|(a, b)| (a - b) * (a - b)).sum::<f64>() / (l * l)
        };
        self.profile(dist)
    }

    /// Draws one frequency `ω ~ p` into `out` (length `d`) for length scale `l`.
    pub fn sample_frequency<R: Rng + ?Sized>(self, rng: &mut R, l: f64, out: &mut [f64]) {
        match self {
            Kernel::Gaussian => {
                for o in out.iter_mut() {
                    let z: f64 = StandardNormal.sample(rng);
                    *o = z / l;
                }
            }
            Kernel::Laplacian => {
                for o in out.iter_mut() {
                    let u: f64 = Open01.sample(rng);
                    *o = (std::f64::consts::PI * (u - 0.5)).tan() / l;
                }
            }
            Kernel::Matern12 | Kernel::Matern32 | Kernel::Matern52 => {
                let dof = self.t_dof().unwrap_or(1.0);
                for o in out.iter_mut() {
                    *o = StandardNormal.sample(rng);
                }
                // ChiSquared::new fails only for a non-positive dof; dof is 1, 3 or 5.
                let u = ChiSquared::new(dof).map_or(dof, |c| c.sample(rng));
                let f = (dof / u).sqrt() / l;
                out.iter_mut().for_each(|o| *o *= f);
            }
        }
    }
}

/// `K[i, j] = k(x_i, y_j)` in `f64` (rows of `x` and `y` are samples).
pub fn kernel_matrix(
    x: ArrayView2<f64>,
    y: ArrayView2<f64>,
    kernel: Kernel,
    l: f64,
) -> Array2<f64> {
    let mut k = Array2::zeros((x.nrows(), y.nrows()));
    kernel_block(x, y, kernel, l, k.view_mut());
    k
}

/// [`kernel_matrix`] written into `k` (`|x| × |y|`): the Gaussian kernel
/// through the GEMM form `‖x‖² + ‖y‖² − 2xᵀy` (clipped at 0), the others
/// pairwise by [`Kernel::eval`].
pub(crate) fn kernel_block(
    x: ArrayView2<f64>,
    y: ArrayView2<f64>,
    kernel: Kernel,
    l: f64,
    mut k: ArrayViewMut2<f64>,
) {
    if kernel == Kernel::Gaussian {
        // ‖x − y‖² = ‖x‖² + ‖y‖² − 2 xᵀy through a GEMM (smooth at 0).
        gemm(x, y.t(), k.view_mut());
        let xn: Vec<f64> = x.rows().into_iter().map(|r| r.dot(&r)).collect();
        let yn: Vec<f64> = y.rows().into_iter().map(|r| r.dot(&r)).collect();
        let inv = 1.0 / (l * l);
        for (i, mut row) in k.rows_mut().into_iter().enumerate() {
            for (j, v) in row.iter_mut().enumerate() {
                let d2 = (xn[i] + yn[j] - 2.0 * *v).max(0.0);
                *v = kernel.profile(d2 * inv);
            }
        }
    } else {
        for (xr, mut row) in x.rows().into_iter().zip(k.rows_mut()) {
            for (yr, v) in y.rows().into_iter().zip(row.iter_mut()) {
                match (xr.as_slice(), yr.as_slice()) {
                    (Some(a), Some(b)) => *v = kernel.eval(a, b, l),
                    _ => *v = kernel.eval(&xr.to_vec(), &yr.to_vec(), l),
                }
            }
        }
    }
}
