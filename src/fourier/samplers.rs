//! Frequency samplers (`docs/math/fourier.rst`, "Frequency samplers"). Each
//! produces the frequency matrix `W` (`m × d`, rows `w_j`), except
//! `structured`, whose blocks are kept as sign vectors and applied through the
//! FWHT (see [`super::features::Projection::Structured`]).
//!
//! Support by kernel: `mc` and `antithetic` work for every kernel;
//! `orthogonal` works for the kernels with a radially symmetric spectral
//! density, Gaussian and Matérn (ORF rows get a Haar direction and the norm of
//! a fresh spectral sample, which has the density's law only when the density
//! depends on `‖w‖` alone; the Laplacian's product of Cauchy coordinates does
//! not, so it is refused); `structured` and `moment_matching` are Gaussian-only (SORF's fixed row norm `√d'/l` and
//! the whitening to `N(0, I/l²)` are Gaussian constructions; the Matérn t
//! densities with 1 or 3 degrees of freedom have no finite covariance to
//! match); `qmc` covers the kernels with an explicit inverse CDF per
//! coordinate, Gaussian (`Φ^{-1}`) and Laplacian (`tan(π(u − ½))`).

use faer::Mat;
use ndarray::{Array1, Array2, Axis};
use rand::Rng;
use rand_distr::{Distribution, StandardNormal};

use super::qmc::{inverse_normal_cdf, sobol_points, to_unit};
use crate::error::{Error, Result};
use crate::kernels::{divide_by, Kernel};

/// How the frequencies are drawn (`docs/math/fourier.rst`, "Frequency
/// samplers").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sampler {
    /// I.i.d. rows from the spectral density.
    Mc,
    /// Pairs `w, −w` (needs an even number of frequencies).
    Antithetic,
    /// Orthogonal random features: Haar-orthogonal blocks of `d` rows.
    Orthogonal,
    /// SORF: `(1/(d' l)) H D₁ H D₂ H D₃` blocks through the FWHT (Gaussian).
    Structured,
    /// Moment matching (003, Algorithm 1): exact sample mean 0 and
    /// covariance `I/l²` (Gaussian; needs more frequencies than features).
    MomentMatching,
    /// Scrambled Sobol points through the inverse CDF.
    Qmc,
}

/// The sampler names accepted by [`Sampler::from_name`].
pub const SAMPLER_NAMES: [&str; 6] = [
    "mc",
    "antithetic",
    "orthogonal",
    "structured",
    "moment_matching",
    "qmc",
];

impl Sampler {
    /// Parses a sampler name (one of [`SAMPLER_NAMES`]).
    pub fn from_name(name: &str) -> Result<Self> {
        Ok(match name {
            "mc" => Sampler::Mc,
            "antithetic" => Sampler::Antithetic,
            "orthogonal" => Sampler::Orthogonal,
            "structured" => Sampler::Structured,
            "moment_matching" => Sampler::MomentMatching,
            "qmc" => Sampler::Qmc,
            _ => {
                return Err(Error::invalid(
                    "sampler",
                    format!("unknown sampler {name:?}; expected one of {SAMPLER_NAMES:?}"),
                ))
            }
        })
    }

    /// The sampler's name.
    pub fn name(self) -> &'static str {
        match self {
            Sampler::Mc => "mc",
            Sampler::Antithetic => "antithetic",
            Sampler::Orthogonal => "orthogonal",
            Sampler::Structured => "structured",
            Sampler::MomentMatching => "moment_matching",
            Sampler::Qmc => "qmc",
        }
    }

    /// Checks that the sampler supports `kernel` with `m` frequencies in `d`
    /// dimensions (see the module docs).
    pub fn check(self, kernel: Kernel, m: usize, d: usize) -> Result<()> {
        let gaussian_only = matches!(self, Sampler::Structured | Sampler::MomentMatching);
        if gaussian_only && kernel != Kernel::Gaussian {
            return Err(Error::invalid(
                "sampler",
                format!(
                    "sampler {:?} supports only kernel \"gaussian\", got {:?}",
                    self.name(),
                    kernel.name()
                ),
            ));
        }
        if self == Sampler::Orthogonal && kernel == Kernel::Laplacian {
            return Err(Error::invalid(
                "sampler",
                "sampler \"orthogonal\" supports kernels \"gaussian\", \"matern12\", \
                 \"matern32\" and \"matern52\" (radially symmetric spectral densities), got \
                 \"laplacian\", whose spectral density is a product of Cauchy coordinates; \
                 use sampler \"mc\", \"antithetic\" or \"qmc\"",
            ));
        }
        if self == Sampler::Qmc && !matches!(kernel, Kernel::Gaussian | Kernel::Laplacian) {
            return Err(Error::invalid(
                "sampler",
                format!(
                    "sampler \"qmc\" supports kernels \"gaussian\" and \"laplacian\", got {:?}",
                    kernel.name()
                ),
            ));
        }
        if self == Sampler::Antithetic && !m.is_multiple_of(2) {
            return Err(Error::invalid(
                "n_components",
                format!(
                    "the antithetic sampler needs an even number of frequencies, got {m} \
                     (cos_sin uses n_components // 2 frequencies)"
                ),
            ));
        }
        if self == Sampler::MomentMatching && m <= d {
            return Err(Error::invalid(
                "n_components",
                format!(
                    "moment matching needs more frequencies than features (the sample \
                     covariance of m <= d frequencies is singular): got {m} frequencies for \
                     n_features = {d}; use n_components >= {} with cos_sin or >= {} with cos_bias",
                    // u128: exact for every usize d.
                    2 * d as u128 + 2,
                    d as u128 + 1
                ),
            ));
        }
        Ok(())
    }
}

/// The frequency matrix `W` (`m × d` zeros), allocated fallibly: a size the
/// system refuses is an error naming `n_components` instead of an abort.
fn zeros(m: usize, d: usize) -> Result<Array2<f64>> {
    crate::alloc::try_zeros2(
        "n_components",
        &format!("the random Fourier features' frequencies ({m} x {d} float64)"),
        m,
        d,
    )
}

/// `m × d` i.i.d. spectral samples. Errors: a matrix the system cannot
/// allocate.
pub fn mc<R: Rng + ?Sized>(
    kernel: Kernel,
    m: usize,
    d: usize,
    l: f64,
    rng: &mut R,
) -> Result<Array2<f64>> {
    let mut w = zeros(m, d)?;
    for mut row in w.axis_iter_mut(Axis(0)) {
        if let Some(r) = row.as_slice_mut() {
            kernel.sample_frequency(rng, l, r);
        }
    }
    Ok(w)
}

/// Antithetic pairs: rows `0..m/2` i.i.d., rows `m/2 + j = −row j` (`m` even).
/// Errors: a matrix the system cannot allocate.
pub fn antithetic<R: Rng + ?Sized>(
    kernel: Kernel,
    m: usize,
    d: usize,
    l: f64,
    rng: &mut R,
) -> Result<Array2<f64>> {
    let mut w = zeros(m, d)?;
    let (mut head, mut tail) = w.view_mut().split_at(Axis(0), m / 2);
    for (mut row, mut neg) in head.axis_iter_mut(Axis(0)).zip(tail.axis_iter_mut(Axis(0))) {
        if let Some(r) = row.as_slice_mut() {
            kernel.sample_frequency(rng, l, r);
        }
        neg.zip_mut_with(&row, |n, &v| *n = -v);
    }
    Ok(w)
}

/// Orthogonal random features: per block of `d` rows a Haar-distributed
/// orthogonal `Q` (QR of a Gaussian matrix with the signs of `diag R`
/// fixed), each row scaled by the norm of a fresh spectral sample (chi with
/// `d` degrees of freedom over `l` for the Gaussian). First `m` rows of the
/// stacked blocks. Each row has the spectral law only for a radially
/// symmetric density (Gaussian, Matérn): [`Sampler::check`] refuses the
/// Laplacian. The norm is that of the sample at length scale 1, and each
/// entry is divided by `l` last: the squares of a sample already divided by
/// `l` overflow or underflow for `l` beyond about `1e±154`. Errors: a
/// matrix the system cannot allocate.
pub fn orthogonal<R: Rng + ?Sized>(
    kernel: Kernel,
    m: usize,
    d: usize,
    l: f64,
    rng: &mut R,
) -> Result<Array2<f64>> {
    let mut w = zeros(m, d)?;
    let mut radius_buf = vec![0.0; d];
    for b0 in (0..m).step_by(d) {
        let g_vals: Vec<f64> = (0..d * d).map(|_| StandardNormal.sample(rng)).collect();
        let g = Mat::from_fn(d, d, |i, j| g_vals[i * d + j]);
        let (q, r_diag) = crate::linalg::orthogonal_factor(g);
        let rows = d.min(m - b0);
        for i in 0..rows {
            kernel.sample_frequency(rng, 1.0, &mut radius_buf);
            let radius = radius_buf.iter().map(|v| v * v).sum::<f64>().sqrt();
            for j in 0..d {
                // Column j of Q times sign(R_jj) (sign(0) := 1).
                let sign = if r_diag[j] < 0.0 { -1.0 } else { 1.0 };
                w[(b0 + i, j)] = divide_by(radius * q[(i, j)] * sign, l);
            }
        }
    }
    Ok(w)
}

/// Moment matching (003, Algorithm 1; `docs/math/fourier.rst`, "Frequency
/// samplers"): whitens `m` Gaussian draws so that `(1/m) Σ w_j = 0` and
/// `(1/m) Σ w_j w_jᵀ = I/l²` exactly: `w_j = L^{-1}(g_j − μ̂)/l` with
/// `L Lᵀ = Σ̂` (1/m normalization, lower Cholesky factor). Needs `m > d`
/// (checked by [`Sampler::check`]); a numerically failed Cholesky factorization
/// is also an error.
pub fn moment_matching<R: Rng + ?Sized>(
    m: usize,
    d: usize,
    l: f64,
    rng: &mut R,
) -> Result<Array2<f64>> {
    Sampler::MomentMatching.check(Kernel::Gaussian, m, d)?;
    let mut g = mc(Kernel::Gaussian, m, d, 1.0, rng)?;
    let mean = g.mean_axis(Axis(0)).unwrap_or_else(|| Array1::zeros(d));
    g -= &mean;
    let gc = Mat::from_fn(m, d, |i, j| g[(i, j)]);
    let cov = gc.transpose() * &gc * faer::Scale(1.0 / m as f64);
    let llt = cov.llt(faer::Side::Lower).map_err(|_| {
        Error::invalid(
            "n_components",
            format!(
                "moment matching failed: the sample covariance of the {m} frequencies is \
                 numerically singular in {d} dimensions; use more frequencies"
            ),
        )
    })?;
    let mut rhs = gc.transpose().to_owned();
    faer::linalg::triangular_solve::solve_lower_triangular_in_place(
        llt.L(),
        rhs.as_mut(),
        faer::Par::Seq,
    );
    let mut w = zeros(m, d)?;
    w.indexed_iter_mut()
        .for_each(|((i, j), v)| *v = rhs[(j, i)] / l);
    Ok(w)
}

/// Scrambled (or, with `scramble = None`, plain) Sobol frequencies:
/// `w_j = F^{-1}(u_j)/l` coordinate-wise, `F^{-1}` the inverse normal CDF
/// (Gaussian) or `tan(π(u − ½))` (Laplacian). With `with_phase` one more
/// Sobol dimension gives the `cos_bias` phases `b_j = 2π u_{j,d}`. The
/// unscrambled sequence skips its first point (the origin).
pub fn qmc<R: Rng + ?Sized>(
    kernel: Kernel,
    m: usize,
    d: usize,
    l: f64,
    with_phase: bool,
    scramble: Option<&mut R>,
) -> Result<(Array2<f64>, Option<Array1<f64>>)> {
    Sampler::Qmc.check(kernel, m, d)?;
    let dim = d + usize::from(with_phase);
    let skip = usize::from(scramble.is_none());
    let pts = sobol_points(m + skip, dim, scramble)?;
    let inv = |u: f64| match kernel {
        Kernel::Laplacian => (std::f64::consts::PI * (u - 0.5)).tan(),
        _ => inverse_normal_cdf(u),
    };
    let at = |i: usize, j: usize| to_unit(pts[(i + skip) * dim + j]);
    let mut w = zeros(m, d)?;
    w.indexed_iter_mut()
        .for_each(|((i, j), v)| *v = inv(at(i, j)) / l);
    let phases =
        with_phase.then(|| Array1::from_shape_fn(m, |i| 2.0 * std::f64::consts::PI * at(i, d)));
    Ok((w, phases))
}

/// `3·blocks × d'` random signs (±1) of the SORF blocks `D₁, D₂, D₃`
/// (rows `3b, 3b + 1, 3b + 2` of block `b`).
pub fn sorf_signs<R: Rng + ?Sized>(blocks: usize, d_pad: usize, rng: &mut R) -> Array2<f64> {
    Array2::from_shape_fn((3 * blocks, d_pad), |_| {
        if rng.random::<bool>() {
            1.0
        } else {
            -1.0
        }
    })
}
