//! Stationary kernels and their spectral densities (`docs/math/fourier.rst`,
//! "Spectral representation"), and exact kernel matrices ([`kernel_matrix`]).
//! The random Fourier features ([`crate::fourier`]) sample the spectral
//! densities; the Nyström features ([`crate::nystroem`]) evaluate the kernels;
//! the GP models differentiate them in the length scale(s) and the inputs
//! ([`Kernel::profile_slope`], [`Kernel::distance_slope`]; per-dimension
//! length scales through [`Kernel::distance`] of scaled inputs).
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

use ndarray::{Array1, Array2, ArrayView1, ArrayView2, ArrayViewMut1, ArrayViewMut2, Axis};
use rand::Rng;
use rand_distr::{ChiSquared, Distribution, Open01, StandardNormal};
use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::linalg::gemm;
use crate::threads::Parallelism;

/// `x / l` as the product `x · (1/l)` (one division per length scale, not
/// per entry), or as the division itself where `1/l` overflows (subnormal
/// `l`, where `0 · ∞` would give NaN).
#[inline(always)]
pub(crate) fn divide_by(x: f64, l: f64) -> f64 {
    let inv = 1.0 / l;
    if inv.is_finite() {
        x * inv
    } else {
        x / l
    }
}

/// The midpoint of each column's range over the rows of `x`,
/// `c_a = min_a/2 + max_a/2` (halved first, so that no sum overflows): the
/// center that the kernels subtract before dividing by the length scales.
/// The kernels are shift invariant, and `(x − c)/l` keeps the digits of
/// `x − y` that `x/l − y/l` loses for inputs far from the origin (a
/// rounding of `ε |x − c| / l` instead of `ε |x| / l`); every row in the
/// range has `|x_a − c_a| ≤ (max_a − min_a)/2`, so no centered value
/// overflows. Zeros where there are no rows (NaN is skipped: callers check
/// their inputs finite).
pub fn midrange(x: ArrayView2<'_, f64>) -> Vec<f64> {
    let d = x.ncols();
    let mut lo = vec![f64::INFINITY; d];
    let mut hi = vec![f64::NEG_INFINITY; d];
    for row in x.rows() {
        for ((l, h), &v) in lo.iter_mut().zip(hi.iter_mut()).zip(row) {
            *l = l.min(v);
            *h = h.max(v);
        }
    }
    lo.iter()
        .zip(&hi)
        .map(|(&l, &h)| if l <= h { l / 2.0 + h / 2.0 } else { 0.0 })
        .collect()
}

/// The distance `ρ` beyond which every profile is 0 in `f64` (`exp(−√ρ)`
/// underflows for `ρ > 745²`): [`Kernel::profile`] clamps `ρ` there, so an
/// infinite distance gives 0 instead of the Matérn `(1 + ∞) · 0 = NaN`.
const MAX_DISTANCE: f64 = 1e6;

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
        let dist = dist.min(MAX_DISTANCE);
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

    /// The kernel's distance `ρ` of already scaled inputs `u = x/l`,
    /// `w = y/l` (per-dimension length scales allowed): `Σ_a (u_a − w_a)²`
    /// for the Euclidean kernels, `Σ_a |u_a − w_a|` for the Laplacian, so
    /// that `k = profile(ρ)`.
    ///
    /// # Panics
    /// When `u` and `w` differ in length.
    pub fn distance(self, u: &[f64], w: &[f64]) -> f64 {
        assert_eq!(u.len(), w.len(), "the two inputs differ in length");
        if self.uses_l1() {
            u.iter().zip(w).map(|(a, b)| (a - b).abs()).sum()
        } else {
            u.iter().zip(w).map(|(a, b)| (a - b) * (a - b)).sum()
        }
    }

    /// `ψ(ρ) = −dκ/dρ`, the slope of [`Kernel::profile`] `κ` in the
    /// distance `ρ` it takes, with `r = √ρ` for the Euclidean kernels:
    ///
    /// | kernel | `κ(ρ)` | `ψ(ρ)` |
    /// |---|---|---|
    /// | `gaussian` | `exp(−ρ/2)` | `exp(−ρ/2)/2` |
    /// | `laplacian` | `exp(−ρ)` | `exp(−ρ)` |
    /// | `matern12` | `exp(−r)` | `exp(−r)/(2r)` |
    /// | `matern32` | `(1 + √3 r) exp(−√3 r)` | `(3/2) exp(−√3 r)` |
    /// | `matern52` | `(1 + √5 r + 5r²/3) exp(−√5 r)` | `(5/6)(1 + √5 r) exp(−√5 r)` |
    ///
    /// With `δ = (x − y)/l` and [`Kernel::distance_slope`] `e'(δ_a)` (the
    /// derivative of the distance's per-dimension term `e(δ_a)`, `δ_a²` or
    /// `|δ_a|`), the derivatives of `k(x, y) = κ(ρ)` are
    ///
    /// `∂k/∂ln l_a = ψ(ρ) δ_a e'(δ_a)` and `∂k/∂y_a = −∂k/∂x_a = ψ(ρ) e'(δ_a) / l_a`
    ///
    /// (one shared length scale: the sum over `a` of the first). Matérn 1/2
    /// has no derivative at `ρ = 0`, where `ψ` is infinite; there this
    /// returns 0, the limit of `ψ δ_a e'(δ_a)` (and a subgradient in the
    /// inputs).
    pub fn profile_slope(self, dist: f64) -> f64 {
        self.profile_and_slope(dist).1
    }

    /// `ψ(ρ)/κ(ρ)` where it is the same constant `c` at every distance: ½
    /// for the Gaussian (`κ = e^{−ρ/2}`) and 1 for the Laplacian (`κ =
    /// e^{−ρ}`); `None` for the Matérn kernels. [`Kernel::profile_and_slope`]
    /// then returns `ψ = c · κ` exactly (`c` is a power of 2), so a caller
    /// holding `σ² κ` has `σ² ψ` without computing it.
    pub fn constant_slope_ratio(self) -> Option<f64> {
        match self {
            Kernel::Gaussian => Some(0.5),
            Kernel::Laplacian => Some(1.0),
            Kernel::Matern12 | Kernel::Matern32 | Kernel::Matern52 => None,
        }
    }

    /// `(κ(ρ), ψ(ρ))` of [`Kernel::profile`] and [`Kernel::profile_slope`]
    /// together, through the vectorizable `vexp::exp` (within 2 ulp
    /// of `f64::exp`), so that a loop over a slice of distances vectorizes
    /// when the kernel is a constant of the loop.
    #[inline(always)]
    pub fn profile_and_slope(self, dist: f64) -> (f64, f64) {
        let dist = dist.min(MAX_DISTANCE);
        match self {
            Kernel::Gaussian => {
                let e = crate::vexp::exp(-0.5 * dist);
                (e, 0.5 * e)
            }
            Kernel::Laplacian => {
                let e = crate::vexp::exp(-dist);
                (e, e)
            }
            Kernel::Matern12 => {
                let r = dist.sqrt();
                let e = crate::vexp::exp(-r);
                (e, if dist > 0.0 { e / (2.0 * r) } else { 0.0 })
            }
            Kernel::Matern32 => {
                let a = (3.0 * dist).sqrt();
                let e = crate::vexp::exp(-a);
                ((1.0 + a) * e, 1.5 * e)
            }
            Kernel::Matern52 => {
                let a = (5.0 * dist).sqrt();
                let e = crate::vexp::exp(-a);
                ((1.0 + a + 5.0 * dist / 3.0) * e, 5.0 / 6.0 * (1.0 + a) * e)
            }
        }
    }

    /// `e'(δ)`, the derivative of the per-dimension term of
    /// [`Kernel::distance`] in the scaled difference `δ`: `2δ` for the
    /// Euclidean kernels, `sign(δ)` (0 at 0) for the Laplacian. See
    /// [`Kernel::profile_slope`].
    pub fn distance_slope(self, delta: f64) -> f64 {
        if self.uses_l1() {
            if delta > 0.0 {
                1.0
            } else if delta < 0.0 {
                -1.0
            } else {
                0.0
            }
        } else {
            2.0 * delta
        }
    }

    /// The normalized kernel `k(x, y)` with length scale `l`, from the
    /// differences scaled one by one, `δ_a = (x_a − y_a)/l`: identical
    /// inputs are at distance exactly 0 (`k = 1`) at every scale, and no
    /// `l²` underflows or overflows on the way.
    ///
    /// # Panics
    /// When `x` and `y` differ in length.
    pub fn eval(self, x: &[f64], y: &[f64], l: f64) -> f64 {
        assert_eq!(x.len(), y.len(), "the two inputs differ in length");
        let dist = if self.uses_l1() {
            x.iter()
                .zip(y)
                .map(|(a, b)| ((a - b) / l).abs())
                .sum::<f64>()
        } else {
            x.iter()
                .zip(y)
                .map(|(a, b)| {
                    let t = (a - b) / l;
                    t * t
                })
                .sum::<f64>()
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

/// A kernel of the module table with its hyperparameters:
/// `k(x, y) = σ² κ(ρ)`, `ρ` the kernel's distance ([`Kernel::distance`]) of
/// the inputs divided by one length scale (`length_scale.len() == 1`) or by
/// one per dimension (ARD, `length_scale.len() == d`). With `δ = (x − y)/l`
/// its derivatives are `∂k/∂ln l_a = σ² ψ(ρ) δ_a e'(δ_a)` and
/// `∂k/∂ln σ² = k` ([`Kernel::profile_slope`], [`Kernel::distance_slope`]).
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct StationaryKernel {
    /// The normalized kernel `κ`.
    pub kernel: Kernel,
    /// Length scales: one value, or one per input dimension.
    pub length_scale: Vec<f64>,
    /// The kernel (signal) variance `σ²`.
    pub variance: f64,
}

impl StationaryKernel {
    /// The Gaussian kernel with these hyperparameters.
    pub fn gaussian(length_scale: Vec<f64>, variance: f64) -> Self {
        Self {
            kernel: Kernel::Gaussian,
            length_scale,
            variance,
        }
    }

    /// Checks the parameters against an input dimension `d`.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] naming `length_scale` (a count other than
    /// 1 or `d`, or a value that is not finite and `> 0`) or
    /// `kernel_variance`.
    pub fn validate(&self, d: usize) -> Result<()> {
        let k = self.length_scale.len();
        if k != 1 && k != d {
            return Err(Error::invalid(
                "length_scale",
                format!("needs 1 value or one per input dimension ({d}), got {k}"),
            ));
        }
        let positive = |name: &'static str, v: f64| {
            if v.is_finite() && v > 0.0 {
                Ok(())
            } else {
                Err(Error::invalid(
                    name,
                    format!("must be finite and > 0, got {v:?}"),
                ))
            }
        };
        for &l in &self.length_scale {
            positive("length_scale", l)?;
        }
        positive("kernel_variance", self.variance)
    }

    /// The length scale of dimension `a` (the one length scale for every
    /// `a` when there is one).
    ///
    /// # Panics
    /// When there are per-dimension length scales and `a` is not below
    /// their number ([`Self::validate`] checks that number against `d`).
    pub fn length_scale_of(&self, a: usize) -> f64 {
        self.length_scale[if self.length_scale.len() == 1 { 0 } else { a }]
    }

    /// The input centered and divided by the length scale(s):
    /// `u = (x − c) / l` (a product with `1/l`, or the division where `1/l`
    /// overflows), with `c` a point near the inputs (see [`midrange`]).
    ///
    /// # Panics
    /// When `center` does not have one value per column of `x`, and as
    /// [`Self::length_scale_of`]: per-dimension length scales fewer than
    /// the columns of `x` ([`Self::validate`] checks their number).
    pub fn scale(&self, x: ArrayView2<'_, f64>, center: &[f64]) -> Array2<f64> {
        assert_eq!(center.len(), x.ncols(), "one center value per column");
        let ls: Vec<f64> = (0..x.ncols()).map(|a| self.length_scale_of(a)).collect();
        let mut u = x.to_owned();
        for mut row in u.rows_mut() {
            for ((v, &l), &c) in row.iter_mut().zip(&ls).zip(center) {
                *v = divide_by(*v - c, l);
            }
        }
        u
    }

    /// The kernel's distance `ρ` of `x` and `y` from the differences scaled
    /// one by one, `δ_a = (x_a − y_a)/l_a`: finite or `+∞` whenever the
    /// inputs are finite, also when `x/l` itself overflows.
    fn distance_unscaled(&self, x: ArrayView1<'_, f64>, y: ArrayView1<'_, f64>) -> f64 {
        let l1 = self.kernel.uses_l1();
        x.iter()
            .zip(y)
            .enumerate()
            .map(|(a, (p, q))| {
                let t = (p - q) / self.length_scale_of(a);
                if l1 {
                    t.abs()
                } else {
                    t * t
                }
            })
            .sum()
    }

    /// The cross-covariance `k(A, B)` (`|A| × |B|`, row-major), computed
    /// pairwise from the inputs centered on the [`midrange`] of `B` and
    /// scaled (no `‖a‖² + ‖b‖² − 2aᵀb` cancellation: identical rows give
    /// exactly `σ²`), rows in parallel. The center depends on `B` alone,
    /// so a row of `A` gets the same values whatever rows come with it.
    /// Where the scaled inputs overflow (`|x|/l` beyond the float range) the
    /// distance is recomputed from the scaled differences.
    ///
    /// # Panics
    /// When `a` and `b` differ in their number of columns, or there are
    /// per-dimension length scales of another number (see
    /// [`Self::length_scale_of`]).
    pub fn cross(
        &self,
        a: ArrayView2<'_, f64>,
        b: ArrayView2<'_, f64>,
        par: Parallelism,
    ) -> Array2<f64> {
        let mut k = Array2::<f64>::zeros((a.nrows(), b.nrows()));
        self.cross_into(a, b, k.view_mut(), par);
        k
    }

    /// [`Self::cross`] written into `k` (`|A| × |B|`).
    ///
    /// # Panics
    /// As [`Self::cross`], and when `k` has another shape.
    pub fn cross_into(
        &self,
        a: ArrayView2<'_, f64>,
        b: ArrayView2<'_, f64>,
        mut k: ArrayViewMut2<'_, f64>,
        par: Parallelism,
    ) {
        assert_eq!(a.ncols(), b.ncols(), "the two inputs differ in width");
        assert_eq!(k.dim(), (a.nrows(), b.nrows()), "the output's shape");
        let center = midrange(b);
        let ua = self.scale(a, &center);
        let ub = self.scale(b, &center);
        let (kernel, variance) = (self.kernel, self.variance);
        let fill = |(i, (mut row, ui)): (usize, (ArrayViewMut1<'_, f64>, ArrayView1<'_, f64>))| {
            for (j, (kj, vj)) in row.iter_mut().zip(ub.rows()).enumerate() {
                let mut rho = match (ui.as_slice(), vj.as_slice()) {
                    (Some(p), Some(q)) => kernel.distance(p, q),
                    _ => kernel.distance(&ui.to_vec(), &vj.to_vec()),
                };
                if rho.is_nan() {
                    rho = self.distance_unscaled(a.row(i), b.row(j));
                }
                *kj = variance * kernel.profile(rho);
            }
        };
        if par.is_parallel() {
            k.axis_iter_mut(Axis(0))
                .into_par_iter()
                .zip(ua.axis_iter(Axis(0)))
                .enumerate()
                .for_each(fill);
        } else {
            k.axis_iter_mut(Axis(0))
                .zip(ua.axis_iter(Axis(0)))
                .enumerate()
                .for_each(fill);
        }
    }
}

/// The length scale `l = √(d · Var(X) / 2)` of scikit-learn's
/// `gamma="scale"`: `γ = 1 / (d · Var(X))` in `exp(−γ ‖x − y‖²)`, which is
/// the Gaussian kernel `exp(−‖x − y‖² / (2l²))` of this `l`; `Var(X)` is the
/// variance of all entries of `X` (`N × d`). On standardized data
/// `l = √(d/2)`, so the typical squared distance `2d` between two rows is
/// `4l²` and the kernel neither vanishes nor saturates. 1 when `X` has no
/// entries or no spread (or a spread beyond the float range).
pub fn scale_length_scale<T: crate::real::Real>(x: ArrayView2<'_, T>) -> f64 {
    let count = x.len() as f64;
    if x.is_empty() {
        return 1.0;
    }
    let mean = x.iter().map(|v| v.to_f64_exact()).sum::<f64>() / count;
    let var = x
        .iter()
        .map(|v| {
            let t = v.to_f64_exact() - mean;
            t * t
        })
        .sum::<f64>()
        / count;
    let l = (x.ncols() as f64 * var / 2.0).sqrt();
    if l.is_finite() && l > 0.0 {
        l
    } else {
        1.0
    }
}

/// `K[i, j] = k(x_i, y_j)` in `f64` (rows of `x` and `y` are samples).
///
/// # Panics
/// When `x` and `y` differ in their number of columns.
pub fn kernel_matrix(
    x: ArrayView2<f64>,
    y: ArrayView2<f64>,
    kernel: Kernel,
    l: f64,
) -> Array2<f64> {
    assert_eq!(x.ncols(), y.ncols(), "the two inputs differ in width");
    let mut k = Array2::zeros((x.nrows(), y.nrows()));
    kernel_block(x, y, kernel, l, k.view_mut());
    k
}

/// [`kernel_matrix`] written into `k` (`|x| × |y|`).
///
/// The Gaussian kernel goes through a GEMM: with `c` the [`midrange`] of
/// the rows of `y` (the kernel is translation invariant; a row of `x` gets
/// the same values whatever rows come with it) and the scaled inputs
/// `u = (x − c)/l`, `w = (y − c)/l`, `ρ = ‖u‖² + ‖w‖² − 2uᵀw`. That form
/// cancels when `ρ` is small against `‖u‖² + ‖w‖²` (rounding error about
/// `d ε (‖u‖² + ‖w‖²)`), so every pair with `ρ ≤ 2⁻¹⁰ (‖u‖² + ‖w‖²)` (or a
/// non-finite `ρ`: norms beyond the float range) is recomputed from the
/// differences, as [`Kernel::eval`] does: identical rows give exactly 1 at
/// every scale of the inputs and of `l`, and the rest keep a relative error
/// of about `2¹⁰ d ε ρ/2` in the kernel. The other kernels are evaluated
/// pairwise by [`Kernel::eval`].
pub(crate) fn kernel_block(
    x: ArrayView2<f64>,
    y: ArrayView2<f64>,
    kernel: Kernel,
    l: f64,
    mut k: ArrayViewMut2<f64>,
) {
    let direct =
        |xr: ArrayView1<'_, f64>, yr: ArrayView1<'_, f64>| match (xr.as_slice(), yr.as_slice()) {
            (Some(a), Some(b)) => kernel.eval(a, b, l),
            _ => kernel.eval(&xr.to_vec(), &yr.to_vec(), l),
        };
    if kernel != Kernel::Gaussian || y.nrows() == 0 {
        for (xr, mut row) in x.rows().into_iter().zip(k.rows_mut()) {
            for (yr, v) in y.rows().into_iter().zip(row.iter_mut()) {
                *v = direct(xr, yr);
            }
        }
        return;
    }
    let center = Array1::from(midrange(y));
    let scaled = |a: ArrayView2<'_, f64>| {
        let mut u = a.to_owned();
        for mut r in u.rows_mut() {
            r.zip_mut_with(&center, |v, &c| *v = (*v - c) / l);
        }
        u
    };
    let (u, w) = (scaled(x), scaled(y));
    gemm(u.view(), w.t(), k.view_mut());
    let un: Vec<f64> = u.rows().into_iter().map(|r| r.dot(&r)).collect();
    let wn: Vec<f64> = w.rows().into_iter().map(|r| r.dot(&r)).collect();
    for (i, mut row) in k.rows_mut().into_iter().enumerate() {
        for (j, v) in row.iter_mut().enumerate() {
            let norms = un[i] + wn[j];
            let rho = norms - 2.0 * *v;
            *v = if rho > CANCELLATION_GUARD * norms && rho.is_finite() {
                kernel.profile(rho)
            } else {
                direct(x.row(i), y.row(j))
            };
        }
    }
}

/// The relative size `ρ / (‖u‖² + ‖w‖²)` under which [`kernel_block`]
/// recomputes a squared distance from the differences (`2⁻¹⁰`).
const CANCELLATION_GUARD: f64 = 1.0 / 1024.0;

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// `n × d` inputs on the grid `2⁻¹⁰ ℤ` in `[−2, 2)`, and the same
    /// inputs shifted by `2³⁰` (41 significant bits: exact in `f64`). The
    /// kernels are shift invariant, and centering on the [`midrange`]
    /// (exact on this grid) gives both the same centered inputs, so every
    /// kernel value, and everything computed from them, has the same bits.
    /// Divided by a length scale before being centered, the shifted inputs
    /// lose about 30 bits of their differences.
    pub(crate) fn shifted_grid(n: usize, d: usize, seed: u64) -> (Array2<f64>, Array2<f64>) {
        let mut rng = crate::rng::seeded(seed);
        let x = Array2::from_shape_fn((n, d), |_| {
            f64::from(rng.random_range(-2048..2048)) / 1024.0
        });
        let shifted = &x + 2f64.powi(30);
        (x, shifted)
    }

    #[test]
    fn midrange_is_exact_and_never_overflows() {
        let a = ndarray::array![
            [1.0, -f64::MAX, 3.0],
            [2.0, f64::MAX, 3.0],
            [-4.0, 0.0, 5.0]
        ];
        assert_eq!(midrange(a.slice(ndarray::s![..2, ..])), vec![1.5, 0.0, 3.0]);
        assert_eq!(midrange(a.view()), vec![-1.0, 0.0, 4.0]);
        let tall = ndarray::array![[f64::MAX], [f64::MAX]];
        assert_eq!(midrange(tall.view()), vec![f64::MAX]);
        let none = Array2::<f64>::zeros((0, 2));
        assert_eq!(midrange(none.view()), vec![0.0, 0.0]);
        assert!(midrange(Array2::<f64>::zeros((3, 0)).view()).is_empty());
    }

    #[test]
    fn kernels_of_shifted_inputs_have_the_same_bits() {
        let (a, a_far) = shifted_grid(9, 3, 1);
        let (b, b_far) = shifted_grid(6, 3, 2);
        // Test points partly outside the range of the data.
        let (b, b_far) = (&b + 1.0, &b_far + 1.0);
        for kernel in ALL {
            for ls in [vec![0.7], vec![0.7, 1.3, 2.1]] {
                let sk = StationaryKernel {
                    kernel,
                    length_scale: ls,
                    variance: 1.3,
                };
                let par = Parallelism::Sequential;
                let near = sk.cross(a.view(), b.view(), par);
                assert_eq!(sk.cross(a_far.view(), b_far.view(), par), near);
                assert!(near.iter().any(|&v| v > 0.1 && v < 1.0));
            }
            let near = kernel_matrix(a.view(), a.view(), kernel, 0.7);
            assert_eq!(kernel_matrix(a_far.view(), a_far.view(), kernel, 0.7), near);
        }
    }

    const ALL: [Kernel; 5] = [
        Kernel::Gaussian,
        Kernel::Laplacian,
        Kernel::Matern12,
        Kernel::Matern32,
        Kernel::Matern52,
    ];

    /// `k(x, y)` with one length scale per dimension, through
    /// [`Kernel::distance`] of the scaled inputs.
    fn k_ard(kernel: Kernel, x: &[f64], y: &[f64], l: &[f64]) -> f64 {
        let u: Vec<f64> = x.iter().zip(l).map(|(a, s)| a / s).collect();
        let w: Vec<f64> = y.iter().zip(l).map(|(a, s)| a / s).collect();
        kernel.profile(kernel.distance(&u, &w))
    }

    #[test]
    fn distance_of_scaled_inputs_is_eval() {
        let (x, y) = ([0.3, -1.2, 0.7], [1.1, 0.4, -0.2]);
        for kernel in ALL {
            let l = 0.8;
            assert!(
                (k_ard(kernel, &x, &y, &[l; 3]) - kernel.eval(&x, &y, l)).abs() < 1e-15,
                "{kernel:?}"
            );
        }
    }

    #[test]
    fn slopes_match_central_differences() {
        // Derivatives in ln l_a and y_a of the ARD kernel against central
        // differences (step h: truncation O(h²) ~ 1e-10, rounding ~1e-16/h).
        let x = [0.3, -1.2, 0.7];
        let y = [1.1, 0.4, -0.2];
        let l = [0.8, 1.7, 0.6];
        let h = 1e-5_f64;
        for kernel in ALL {
            let u: Vec<f64> = x.iter().zip(&l).map(|(a, s)| a / s).collect();
            let w: Vec<f64> = y.iter().zip(&l).map(|(a, s)| a / s).collect();
            let psi = kernel.profile_slope(kernel.distance(&u, &w));
            for a in 0..3 {
                let delta = u[a] - w[a];
                let e1 = kernel.distance_slope(delta);
                let (mut lp, mut lm) = (l, l);
                lp[a] *= h.exp();
                lm[a] *= (-h).exp();
                let fd = (k_ard(kernel, &x, &y, &lp) - k_ard(kernel, &x, &y, &lm)) / (2.0 * h);
                let an = psi * delta * e1;
                assert!((fd - an).abs() < 1e-9, "{kernel:?} ln l_{a}: {fd} vs {an}");
                let (mut yp, mut ym) = (y, y);
                yp[a] += h;
                ym[a] -= h;
                let fd = (k_ard(kernel, &x, &yp, &l) - k_ard(kernel, &x, &ym, &l)) / (2.0 * h);
                let an = psi * e1 / l[a];
                assert!((fd - an).abs() < 1e-9, "{kernel:?} y_{a}: {fd} vs {an}");
            }
        }
    }

    #[test]
    fn a_constant_slope_ratio_is_the_slope_over_the_value_exactly() {
        for kernel in ALL {
            if let Some(c) = kernel.constant_slope_ratio() {
                for dist in [0.0, 1e-12, 0.3, 2.0, 40.0, 700.0] {
                    let (k, p) = kernel.profile_and_slope(dist);
                    assert_eq!(p, c * k, "{kernel:?} {dist}");
                }
            }
        }
    }

    #[test]
    fn profile_and_slope_value_is_the_profile() {
        for kernel in ALL {
            for dist in [0.0, 1e-12, 0.3, 2.0, 40.0] {
                let (k, _) = kernel.profile_and_slope(dist);
                let want = kernel.profile(dist);
                assert!(
                    (k - want).abs() <= 4.0 * f64::EPSILON * want,
                    "{kernel:?} {dist}"
                );
            }
        }
    }

    /// Rows of a 7 × 3 design at unit scale, two of them identical.
    fn design() -> Array2<f64> {
        let mut x = Array2::from_shape_fn((7, 3), |(i, j)| ((i * 3 + j) as f64 * 0.37).sin());
        let r = x.row(2).to_owned();
        x.row_mut(5).assign(&r);
        x
    }

    #[test]
    fn kernel_matrix_is_exact_at_zero_distance_at_every_scale() {
        // The diagonal and the identical rows 2 and 5 give exactly k(0) = 1,
        // whatever the scale of the inputs and of the length scale (the GEMM
        // form ‖x‖² + ‖y‖² − 2xᵀy cancels there); the rest matches the
        // pairwise evaluation of the scaled problem.
        let x = design();
        for (s, l) in [
            (1e30, 1.0),
            (1e-30, 1.0),
            (1.0, 1e-6),
            (1.0, 1e-300),
            (1e150, 1e150),
            (1e-300, 1e-300),
            (1e300, 1.0),
            (1e6, 1.0),
        ] {
            let xs = x.mapv(|v| v * s);
            for kernel in ALL {
                let k = kernel_matrix(xs.view(), xs.view(), kernel, l);
                for i in 0..7 {
                    assert_eq!(k[(i, i)], 1.0, "{kernel:?} s={s} l={l} row {i}");
                }
                assert_eq!(k[(2, 5)], 1.0, "{kernel:?} s={s} l={l}");
                assert_eq!(k[(5, 2)], 1.0, "{kernel:?} s={s} l={l}");
                assert!(k.iter().all(|v| v.is_finite() && (0.0..=1.0).contains(v)));
            }
        }
    }

    #[test]
    fn kernel_matrix_off_diagonal_matches_pairwise_evaluation() {
        // At unit scale and with an offset far from the origin (1e6, where
        // the uncentered GEMM form loses 12 digits), the GEMM path agrees
        // with Kernel::eval to ~1e-12.
        let x = design();
        let y = x.mapv(|v| 0.8 * v + 0.1);
        for offset in [0.0, 1e6] {
            let (xo, yo) = (x.mapv(|v| v + offset), y.mapv(|v| v + offset));
            for kernel in ALL {
                let k = kernel_matrix(xo.view(), yo.view(), kernel, 0.9);
                for i in 0..7 {
                    for j in 0..7 {
                        let want = kernel.eval(
                            xo.row(i).as_slice().unwrap(),
                            yo.row(j).as_slice().unwrap(),
                            0.9,
                        );
                        assert!(
                            (k[(i, j)] - want).abs() <= 1e-9 * want.max(1e-300) + 1e-15,
                            "{kernel:?} offset {offset} ({i}, {j}): {} vs {want}",
                            k[(i, j)]
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn stationary_cross_is_exact_at_zero_distance_at_every_scale() {
        // The exact GP's and the Dirichlet GPC's kernel: σ² on the diagonal,
        // also when x/l overflows (1e300 / 1e-10) and for subnormal l.
        let x = design();
        for (s, l) in [
            (1e30, 1.0),
            (1.0, 1e-6),
            (1e300, 1e-10),
            (1e-300, 1e-310),
            (1.0, 1e-310),
        ] {
            let xs = x.mapv(|v| v * s);
            for kernel in ALL {
                for ls in [vec![l], vec![l, 2.0 * l, 0.5 * l]] {
                    let sk = StationaryKernel {
                        kernel,
                        length_scale: ls,
                        variance: 1.7,
                    };
                    let k = sk.cross(xs.view(), xs.view(), Parallelism::Sequential);
                    for i in 0..7 {
                        assert_eq!(k[(i, i)], 1.7, "{kernel:?} s={s} l={l} row {i}");
                    }
                    assert_eq!(k[(2, 5)], 1.7);
                    assert!(k.iter().all(|v| v.is_finite() && (0.0..=1.7).contains(v)));
                }
            }
        }
    }

    #[test]
    fn scale_length_scale_is_sklearns_gamma_scale() {
        // γ = 1/(d Var X), l = 1/√(2γ) = √(d Var X / 2).
        let x = ndarray::array![[1.0, -1.0, 3.0], [-1.0, 1.0, -3.0]];
        let var = (1.0 + 1.0 + 9.0) / 3.0;
        assert!((scale_length_scale(x.view()) - (3.0 * var / 2.0_f64).sqrt()).abs() < 1e-15);
        assert_eq!(scale_length_scale(Array2::<f64>::ones((4, 2)).view()), 1.0);
        assert_eq!(scale_length_scale(Array2::<f32>::zeros((0, 2)).view()), 1.0);
        assert_eq!(
            scale_length_scale(ndarray::array![[1e300], [-1e300]].view()),
            1.0
        );
    }

    /// Finite values of every magnitude: ordinary, subnormal, near the
    /// float range, exact zeros.
    fn value() -> impl proptest::strategy::Strategy<Value = f64> {
        use proptest::prelude::*;
        prop_oneof![
            -3.0..3.0f64,
            (
                -3.0..3.0f64,
                prop::sample::select(vec![1e-300, 1e-150, 1e30, 1e150, 1e300])
            )
                .prop_map(|(v, s)| v * s),
            prop::sample::select(vec![0.0, -0.0, 5e-324, -5e-324, 1e308, -1e308]),
        ]
    }

    proptest::proptest! {
        #[test]
        fn fuzz_kernel_matrix_is_a_finite_kernel(
            xs in proptest::collection::vec(value(), 1..24),
            d in 1usize..4,
            kernel in proptest::sample::select(ALL.to_vec()),
            log_l in -300.0..300.0f64,
        ) {
            let n = xs.len() / d;
            proptest::prop_assume!(n >= 1);
            let x = Array2::from_shape_vec((n, d), xs[..n * d].to_vec()).unwrap();
            let l = 10f64.powf(log_l);
            let k = kernel_matrix(x.view(), x.view(), kernel, l);
            for i in 0..n {
                proptest::prop_assert_eq!(k[(i, i)], 1.0);
            }
            proptest::prop_assert!(k.iter().all(|v| v.is_finite() && (0.0..=1.0).contains(v)));
            let sk = StationaryKernel { kernel, length_scale: vec![l], variance: 2.0 };
            let c = sk.cross(x.view(), x.view(), Parallelism::Sequential);
            for i in 0..n {
                proptest::prop_assert_eq!(c[(i, i)], 2.0);
            }
            proptest::prop_assert!(c.iter().all(|v| v.is_finite() && (0.0..=2.0).contains(v)));
            let s = scale_length_scale(x.view());
            proptest::prop_assert!(s.is_finite() && s > 0.0);
        }

        #[test]
        fn fuzz_size_checks_never_overflow(
            dims in proptest::collection::vec(proptest::num::usize::ANY, 0..4),
            elem in 1usize..16,
            limit in proptest::num::u64::ANY,
        ) {
            match crate::alloc::check_within("n_components", "x", &dims, elem, limit) {
                Ok(b) => proptest::prop_assert!(b <= limit),
                Err(e) => proptest::prop_assert!(e.to_string().contains("`n_components`")),
            }
        }
    }

    #[test]
    fn slope_at_zero_distance() {
        // Smooth kernels: ψ(0) = −κ'(0); Matérn 1/2 reports 0 (see the docs).
        assert_eq!(Kernel::Gaussian.profile_slope(0.0), 0.5);
        assert_eq!(Kernel::Laplacian.profile_slope(0.0), 1.0);
        assert_eq!(Kernel::Matern12.profile_slope(0.0), 0.0);
        assert_eq!(Kernel::Matern32.profile_slope(0.0), 1.5);
        assert_eq!(Kernel::Matern52.profile_slope(0.0), 5.0 / 6.0);
        assert_eq!(Kernel::Laplacian.distance_slope(0.0), 0.0);
        assert_eq!(Kernel::Laplacian.distance_slope(-0.1), -1.0);
        assert_eq!(Kernel::Gaussian.distance_slope(-0.1), -0.2);
    }
}
