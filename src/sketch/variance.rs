//! Closed-form moments and variances of the polynomial sketches
//! (`docs/math/sketches.rst`, "Variances"). Everything is `f64` and per pair
//! `(x, y)` of already scaled (augmented, padded) vectors, described by
//! `m = xᵀy`, `ν = ‖x‖²‖y‖²`, `s = Σ_a x_a² y_a²`, and the two sums over
//! distinct coordinates `ν − s` and `m² − s`, kept apart so that the
//! variances keep their relative accuracy where one coordinate dominates
//! (there `ν`, `m²` and `s` agree to many digits and their differences,
//! formed directly, would be rounding noise).

use super::SketchKind;
use crate::error::{Error, Result};
use crate::real::times_pow2;

/// A scalar weight law with `E z = 0`, `E|z|² = 1` (`docs/math/sketches.rst`,
/// "The generic sketch of degree n").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WeightLaw {
    /// N(0, 1): `q = 1`, `κ = 3`.
    Gaussian,
    /// ±1: `q = 1`, `κ = 1`.
    Rademacher,
    /// (a + ib)/√2 with a, b ~ N(0, 1): `q = ½`, `κ = 2`.
    ComplexGaussian,
    /// Uniform on {1, −1, i, −i} (same moments as the unit circle): `q = ½`, `κ = 1`.
    ComplexRademacher,
}

impl WeightLaw {
    /// The law a sketch draws its weights from. TensorSRHT and TensorSketch
    /// use unit-modulus (Rademacher-type) weights.
    pub fn of(kind: SketchKind, complex: bool) -> Self {
        match (kind, complex) {
            (SketchKind::Gaussian, false) => Self::Gaussian,
            (SketchKind::Gaussian, true) => Self::ComplexGaussian,
            (_, false) => Self::Rademacher,
            (_, true) => Self::ComplexRademacher,
        }
    }

    /// `q = E[(Re z)²]`.
    pub fn q(self) -> f64 {
        match self {
            Self::Gaussian | Self::Rademacher => 1.0,
            Self::ComplexGaussian | Self::ComplexRademacher => 0.5,
        }
    }

    /// `κ = E[|z|⁴]`.
    pub fn kappa(self) -> f64 {
        match self {
            Self::Gaussian => 3.0,
            Self::ComplexGaussian => 2.0,
            Self::Rademacher | Self::ComplexRademacher => 1.0,
        }
    }
}

/// The pair statistics `m = xᵀy`, `ν = ‖x‖²‖y‖²`, `s = Σ x_a² y_a²`, with
/// `ν − s = Σ_{a≠b} x_a² y_b²` and `m² − s = Σ_{a≠b} x_a y_a x_b y_b`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PairStats {
    /// Dot product `xᵀy`.
    pub m: f64,
    /// Product of squared norms `‖x‖²‖y‖²`.
    pub nu: f64,
    /// `Σ_a x_a² y_a²`.
    pub s: f64,
    /// `ν − s = Σ_{a≠b} x_a² y_b² ≥ 0`.
    pub nu_off: f64,
    /// `m² − s = Σ_{a≠b} x_a y_a x_b y_b`, `|m² − s| ≤ ν − s`.
    pub m2_off: f64,
}

impl PairStats {
    /// Computes the statistics of a pair of equal-length vectors, the sums
    /// over distinct coordinates from prefix sums (`ν − s = Σ_b (y_b² X_b +
    /// x_b² Y_b)` and `m² − s = 2 Σ_b t_b T_b` with `t = x ∘ y` and `X_b`,
    /// `Y_b`, `T_b` the sums of `x_a²`, `y_a²`, `t_a` over `a < b`): no
    /// difference of the near-equal `ν`, `m²` and `s`.
    ///
    /// # Panics
    /// When `x` and `y` differ in length.
    pub fn new(x: &[f64], y: &[f64]) -> Self {
        assert_eq!(x.len(), y.len(), "the two vectors differ in length");
        let (mut m, mut xx, mut yy, mut s) = (0.0, 0.0, 0.0, 0.0);
        let (mut nu_off, mut m_off) = (0.0, 0.0);
        for (&a, &b) in x.iter().zip(y) {
            let (a2, b2, t) = (a * a, b * b, a * b);
            nu_off += b2 * xx + a2 * yy;
            m_off += t * m;
            m += t;
            xx += a2;
            yy += b2;
            s += a2 * b2;
        }
        Self {
            m,
            nu: xx * yy,
            s,
            nu_off,
            m2_off: 2.0 * m_off,
        }
    }

    /// The statistics from the three sums alone, the differences formed
    /// directly (accurate unless one coordinate dominates; what a caller
    /// that holds only `m`, `ν` and `s` can do).
    pub fn from_sums(m: f64, nu: f64, s: f64) -> Self {
        Self {
            m,
            nu,
            s,
            nu_off: nu - s,
            m2_off: m * m - s,
        }
    }
}

/// Per-factor moments of one unstructured feature:
/// `M = E|(wᵀx) conj(wᵀy)|² = ν + (1 + (2q−1)²)(m² − s) + (κ − 1)s` and
/// `Pm = E[((wᵀx) conj(wᵀy))²] = (2q−1)²(ν − s) + 2(m² − s) + κs`.
pub fn unstructured_moments(law: WeightLaw, p: &PairStats) -> (f64, f64) {
    let m2 = p.m * p.m;
    let (dm, dp) = unstructured_excess(law, p);
    (m2 + dm, m2 + dp)
}

/// [`unstructured_moments`] less `m²`, from the sums over distinct
/// coordinates: `M − m² = (ν − s) + (2q−1)²(m² − s) + (κ − 1)s` and
/// `Pm − m² = (2q−1)²(ν − s) + (m² − s) + (κ − 1)s`.
fn unstructured_excess(law: WeightLaw, p: &PairStats) -> (f64, f64) {
    let r2 = (2.0 * law.q() - 1.0).powi(2);
    let diag = (law.kappa() - 1.0) * p.s;
    (
        p.nu_off + r2 * p.m2_off + diag,
        r2 * p.nu_off + p.m2_off + diag,
    )
}

/// TensorSRHT cross moments of two distinct features of one block, for the
/// padded dimension `d_pad >= 2`:
/// `C = m² − [ν − s + (2q−1)²(m² − s)]/(d'−1)`,
/// `Pc = m² − [(m² − s) + (2q−1)²(ν − s)]/(d'−1)`.
/// For `d_pad = 1` there are no such pairs; the function returns `(m², m²)`
/// so that every covariance term vanishes.
pub fn srht_cross_moments(law: WeightLaw, p: &PairStats, d_pad: usize) -> (f64, f64) {
    let m2 = p.m * p.m;
    let (dc, dp) = srht_cross_excess(law, p, d_pad);
    (m2 + dc, m2 + dp)
}

/// [`srht_cross_moments`] less `m²`: `C − m² = −[(ν − s) + (2q−1)²(m² −
/// s)]/(d'−1)` and `Pc − m² = −[(m² − s) + (2q−1)²(ν − s)]/(d'−1)`; `(0, 0)`
/// for `d_pad < 2`.
fn srht_cross_excess(law: WeightLaw, p: &PairStats, d_pad: usize) -> (f64, f64) {
    if d_pad < 2 {
        return (0.0, 0.0);
    }
    let r2 = (2.0 * law.q() - 1.0).powi(2);
    let k = (d_pad - 1) as f64;
    (
        -(p.nu_off + r2 * p.m2_off) / k,
        -(p.m2_off + r2 * p.nu_off) / k,
    )
}

/// `(b + δ)ⁿ − bⁿ = δ Σ_{k<n} (b + δ)^k b^{n−1−k}`: the difference of the
/// powers from the difference `δ` of their bases, without the cancellation
/// of forming both powers when `|δ| ≪ b`.
fn power_excess(b: f64, delta: f64, n: i32) -> f64 {
    let a = b + delta;
    let (mut sum, mut ak) = (0.0, 1.0);
    for k in 0..n {
        sum += ak * b.powi(n - 1 - k);
        ak *= a;
    }
    delta * sum
}

/// `c(D, d') = ⌊D/d'⌋·d'(d'−1) + r(r−1)` with `r = D mod d'`: the ordered
/// pairs of distinct TensorSRHT features that share a block.
pub fn srht_pair_count(n_features: usize, d_pad: usize) -> f64 {
    if d_pad == 0 {
        return 0.0;
    }
    let (q, r) = (n_features / d_pad, n_features % d_pad);
    (q as f64) * (d_pad as f64) * (d_pad as f64 - 1.0) + (r as f64) * (r as f64 - 1.0).max(0.0)
}

/// Variance of a degree-`n` sketch estimate of `(xᵀy)^n` with
/// `n_features` features (complex features for complex sketches).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SketchVariance {
    /// `E|k̂ − E k̂|²`; `None` for TensorSketch (real only). Equals
    /// `real_part` for real sketches.
    pub complex: Option<f64>,
    /// `Var(Re k̂)`: the variance of the estimate randfeat_rs returns
    /// (the dot product of the real [Re | Im] rows,
    /// `docs/math/conventions.rst`, "Complex features and their real
    /// representation").
    pub real_part: f64,
}

/// The closed-form variance table of `docs/math/sketches.rst`, "Variances".
///
/// `d_pad` is the padded input dimension `d'` (only TensorSRHT uses it).
/// Errors: `degree = 0`, `n_features = 0`, complex TensorSketch, a
/// TensorSketch with more than [`super::MAX_TENSOR_SKETCH_FEATURES`]
/// features.
pub fn sketch_variance(
    kind: SketchKind,
    complex: bool,
    degree: u32,
    n_features: usize,
    d_pad: usize,
    p: &PairStats,
) -> Result<SketchVariance> {
    if degree == 0 {
        return Err(Error::invalid("degree", "must be >= 1"));
    }
    if n_features == 0 {
        return Err(Error::invalid("n_components", "must be >= 1"));
    }
    let n = degree as i32;
    let d = n_features as f64;
    let m2 = p.m * p.m;
    // The excess of each moment's n-th power over m^2n (from the moment's
    // excess over m², see power_excess).
    let excess = |delta: f64| power_excess(m2, delta, n);
    if kind == SketchKind::TensorSketch {
        if complex {
            return Err(Error::invalid(
                "complex_weights",
                "TensorSketch has no complex variant",
            ));
        }
        super::tensor_sketch_width(n_features)?;
        let e = if n_features.is_multiple_of(2) {
            2.0
        } else {
            1.0
        };
        // M_r = ν + 2m² − 2s, M_c = ν + m² − s and P_c = 2m² − s, each less m².
        let m_r = excess(p.nu_off + p.m2_off);
        let m_c = excess(p.nu_off);
        let p_c = excess(p.m2_off);
        let v = (e * m_r + (d - e) * (m_c + p_c)) / (d * d);
        return Ok(SketchVariance {
            complex: None,
            // >= 0 but for rounding (see below).
            real_part: at_least_zero(v),
        });
    }
    let law = WeightLaw::of(kind, complex);
    let (big_m, pm) = unstructured_excess(law, p);
    let (big_m, pm) = (excess(big_m), excess(pm));
    let mut complex_var = big_m / d;
    let mut real_var = (big_m + pm) / (2.0 * d);
    if kind == SketchKind::TensorSrht {
        let (c, pc) = srht_cross_excess(law, p, d_pad);
        let (c, pc) = (excess(c), excess(pc));
        let pairs = srht_pair_count(n_features, d_pad) / (d * d);
        complex_var += pairs * c;
        real_var += pairs * (c + pc) / 2.0;
    }
    // Each variance is >= 0 in exact arithmetic; the TensorSRHT cross terms
    // are negative, and where they cancel the diagonal ones (an estimate
    // that is exact, e.g. a degree-1 sketch of D = d' features) rounding
    // can leave the sum a few ulps below zero: clamp at 0.
    Ok(SketchVariance {
        complex: Some(at_least_zero(complex_var)),
        real_part: at_least_zero(real_var),
    })
}

/// `v`, or 0 for a negative `v` (NaN stays NaN, unlike `f64::max`).
fn at_least_zero(v: f64) -> f64 {
    if v < 0.0 {
        0.0
    } else {
        v
    }
}

/// Real-part variance of the estimate of `(xᵀy/l² + c)^n`
/// (`docs/math/sketches.rst`, "Target kernels" and "Variances") by a sketch
/// with `n_features` (real or complex) features: the pair statistics are those
/// of the augmented vectors `(√c, x/l)`, and `d'` is the padded augmented
/// dimension. Errors: lengths differ, NaN or infinite entries, a degree
/// outside `1..=`[`super::MAX_DEGREE`], bad bias or length scale, and those of
/// [`sketch_variance`].
#[allow(clippy::too_many_arguments)]
pub fn polynomial_kernel_variance(
    kind: SketchKind,
    complex: bool,
    degree: u32,
    n_features: usize,
    x: &[f64],
    y: &[f64],
    bias: f64,
    length_scale: f64,
) -> Result<f64> {
    if x.len() != y.len() {
        return Err(Error::ShapeMismatch {
            name: "length of y",
            expected: x.len(),
            got: y.len(),
        });
    }
    super::check_degree(degree)?;
    super::check_kernel_params(bias, length_scale)?;
    if x.iter().any(|v| !v.is_finite()) {
        return Err(Error::NonFinite { name: "x" });
    }
    if y.iter().any(|v| !v.is_finite()) {
        return Err(Error::NonFinite { name: "y" });
    }
    let aug = |v: &[f64]| -> Vec<f64> {
        let head = (bias > 0.0).then(|| bias.sqrt());
        head.into_iter()
            .chain(v.iter().map(|t| t / length_scale))
            .collect()
    };
    let (xa, ya) = (aug(x), aug(y));
    if xa.iter().chain(&ya).any(|v| !v.is_finite()) {
        return Err(Error::invalid(
            "x",
            "x / length_scale or y / length_scale overflows the float range",
        ));
    }
    // Every moment of the table is homogeneous of degree 2 in x and in y, so
    // the variance of the pair (x/2^a, y/2^b) times 2^(2n(a + b)) is the
    // pair's: with 2^a and 2^b near the norms the statistics are O(1) (the
    // products of squared norms of 1e300 entries overflow, 0·inf is NaN for
    // a zero x) and powers of two keep ordinary inputs bit for bit.
    let (ea, xs) = scale_to_unit_norm(&xa);
    let (eb, ys) = scale_to_unit_norm(&ya);
    let p = PairStats::new(&xs, &ys);
    let d_pad = super::padded_dim(xa.len())?;
    let v = sketch_variance(kind, complex, degree, n_features, d_pad, &p)?.real_part;
    let v = times_pow2(v, 2 * degree as i32 * (ea + eb));
    if !v.is_finite() {
        return Err(Error::invalid(
            "x",
            "the variance overflows the float range: it grows as (|x| |y| / length_scale^2)^(2 degree)",
        ));
    }
    Ok(v)
}

/// `(e, v / 2^e)` with `2^e` the power of two at or below `‖v‖` (`e = 0`
/// for a zero vector): exact, and the scaled norm lies in `[1, 2)`.
fn scale_to_unit_norm(v: &[f64]) -> (i32, Vec<f64>) {
    let max = v.iter().fold(0.0_f64, |m, t| m.max(t.abs()));
    if max == 0.0 {
        return (0, v.to_vec());
    }
    let e_max = max.log2().floor() as i32;
    let ss: f64 = v
        .iter()
        .map(|&t| {
            let u = times_pow2(t, -e_max);
            u * u
        })
        .sum();
    // ‖v‖ = 2^e_max √ss with 1 <= ss < 4d.
    let e = e_max + (0.5 * ss.log2()).floor() as i32;
    (e, v.iter().map(|&t| times_pow2(t, -e)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use approx::assert_relative_eq;
    use SketchKind::*;

    #[allow(clippy::too_many_arguments)]
    fn check(
        kind: SketchKind,
        complex: bool,
        p: &PairStats,
        n: u32,
        dd: usize,
        dp: usize,
        cv: f64,
        rv: f64,
    ) {
        // The oracles are printed with 6 decimals: half a unit of the last digit.
        let v = sketch_variance(kind, complex, n, dd, dp, p).unwrap();
        assert_relative_eq!(v.complex.unwrap(), cv, epsilon = 5e-7, max_relative = 1e-12);
        assert_relative_eq!(v.real_part, rv, epsilon = 5e-7, max_relative = 1e-12);
    }

    #[test]
    fn worked_example_a() {
        let p = PairStats::new(&[1.0, 1.0, 0.0, 0.0], &[1.0, 0.0, 1.0, 0.0]);
        assert_eq!((p.m, p.nu, p.s), (1.0, 4.0, 1.0));
        assert_eq!(srht_pair_count(6, 4), 14.0);
        check(Gaussian, false, &p, 2, 6, 4, 35.0 / 6.0, 35.0 / 6.0);
        check(Rademacher, false, &p, 2, 6, 4, 2.5, 2.5);
        check(Gaussian, true, &p, 2, 6, 4, 4.0, 2.25);
        check(Rademacher, true, &p, 2, 6, 4, 2.5, 1.25);
        check(TensorSrht, false, &p, 2, 6, 4, 19.0 / 9.0, 19.0 / 9.0);
        check(TensorSrht, true, &p, 2, 6, 4, 19.0 / 9.0, 19.0 / 18.0);
        let ts = sketch_variance(TensorSketch, false, 2, 6, 4, &p).unwrap();
        assert!(ts.complex.is_none());
        assert_relative_eq!(ts.real_part, 2.5, max_relative = 1e-12);
    }

    #[test]
    fn worked_example_b() {
        let p = PairStats::new(&[0.5, -1.0, 0.3], &[0.2, 0.7, -0.4]);
        assert_relative_eq!(p.m, -0.72, max_relative = 1e-12);
        assert_relative_eq!(p.nu, 0.9246, max_relative = 1e-12);
        assert_relative_eq!(p.s, 0.5144, max_relative = 1e-12);
        assert_eq!(srht_pair_count(5, 4), 12.0);
        let (c, _) = srht_cross_moments(WeightLaw::Rademacher, &p, 4);
        assert_relative_eq!(c, 0.380333, epsilon = 5e-7);
        let (c, pc) = srht_cross_moments(WeightLaw::ComplexRademacher, &p, 4);
        assert_relative_eq!(c, 0.381667, epsilon = 5e-7);
        assert_relative_eq!(pc, 0.517067, epsilon = 5e-7);
        check(Gaussian, false, &p, 3, 5, 4, 1.481274, 1.481274);
        check(Rademacher, false, &p, 3, 5, 4, 0.134362, 0.134362);
        check(Gaussian, true, &p, 3, 5, 4, 0.573074, 0.384057);
        check(Rademacher, true, &p, 3, 5, 4, 0.132283, 0.066467);
        check(TensorSrht, false, &p, 3, 5, 4, 0.093899, 0.093899);
        check(TensorSrht, true, &p, 3, 5, 4, 0.092099, 0.046117);
        let ts = sketch_variance(TensorSketch, false, 3, 5, 4, &p).unwrap();
        assert_relative_eq!(ts.real_part, 0.133219, epsilon = 5e-7);
    }

    #[test]
    fn tensor_sketch_examples() {
        let p = PairStats::new(&[0.5, 1.0, 0.3, 0.2, 0.1], &[0.2, 0.7, 0.4, 0.9, 0.3]);
        assert_relative_eq!(p.m, 1.13, max_relative = 1e-12);
        for (n, d, want) in [(2, 7, 1.392761), (2, 8, 1.251136), (1, 6, 0.398600)] {
            let v = sketch_variance(TensorSketch, false, n, d, 8, &p).unwrap();
            assert_relative_eq!(v.real_part, want, epsilon = 5e-7);
        }
    }

    #[test]
    fn deterministic_properties() {
        let p = PairStats::new(&[0.5, -1.0, 0.3, 0.8], &[0.2, 0.7, -0.4, 0.1]);
        // Degree 1 TensorSRHT with d' | D is exact.
        let v = sketch_variance(TensorSrht, false, 1, 8, 4, &p).unwrap();
        assert!(v.real_part.abs() < 1e-12);
        // Rademacher <= Gaussian; TensorSRHT <= Rademacher for odd degree.
        for n in 1..=5 {
            let g = sketch_variance(Gaussian, false, n, 7, 4, &p)
                .unwrap()
                .real_part;
            let r = sketch_variance(Rademacher, false, n, 7, 4, &p)
                .unwrap()
                .real_part;
            let t = sketch_variance(TensorSrht, false, n, 7, 4, &p)
                .unwrap()
                .real_part;
            assert!(r <= g + 1e-15);
            if n % 2 == 1 {
                assert!(t <= r + 1e-15);
            }
        }
        // Zero vector: zero variance.
        let z = PairStats::new(&[0.0, 0.0], &[1.0, 2.0]);
        for kind in [Gaussian, Rademacher, TensorSrht, TensorSketch] {
            assert_eq!(
                sketch_variance(kind, false, 3, 5, 2, &z).unwrap().real_part,
                0.0
            );
        }
        // d = 1: Rademacher-type sketches are exact, Gaussian is not.
        let one = PairStats::new(&[0.7], &[-1.3]);
        assert!(
            sketch_variance(Rademacher, false, 3, 4, 1, &one)
                .unwrap()
                .real_part
                .abs()
                < 1e-12
        );
        assert!(
            sketch_variance(Rademacher, true, 3, 4, 1, &one)
                .unwrap()
                .real_part
                .abs()
                < 1e-12
        );
        assert!(
            sketch_variance(TensorSrht, false, 3, 4, 1, &one)
                .unwrap()
                .real_part
                .abs()
                < 1e-12
        );
        assert!(
            sketch_variance(Gaussian, false, 3, 4, 1, &one)
                .unwrap()
                .real_part
                > 0.0
        );
    }

    #[test]
    fn errors() {
        let p = PairStats::new(&[1.0], &[1.0]);
        assert!(sketch_variance(Gaussian, false, 0, 4, 1, &p).is_err());
        assert!(sketch_variance(Gaussian, false, 2, 0, 1, &p).is_err());
        assert!(sketch_variance(TensorSketch, true, 2, 4, 1, &p).is_err());
        assert!(SketchKind::parse("srht").is_err());
        assert_eq!(SketchKind::parse("tensor_srht").unwrap(), TensorSrht);
    }

    /// Fuzzing found NaN for a zero `x` against 1e300 entries (0·inf in
    /// `‖x‖²‖y‖²`) and a variance of −2.7e-20 from rounding.
    #[test]
    fn extreme_pairs_and_rounding() {
        let var = |kind, complex, degree, nf, x: &[f64], y: &[f64]| {
            polynomial_kernel_variance(kind, complex, degree, nf, x, y, 0.0, 1.0)
        };
        for kind in [Gaussian, Rademacher, TensorSrht, TensorSketch] {
            let v = var(kind, false, 2, 3, &[0.0, 0.0, 0.0], &[0.0, 1e300, 0.0]).unwrap();
            assert_eq!(v, 0.0, "{kind:?}");
            // Homogeneity: scaling x by 1e200 and y by 1e-200 changes nothing.
            let a = var(kind, false, 3, 5, &[1.0, -0.5, 2.0], &[0.25, 1.0, 1.0]).unwrap();
            let b = var(
                kind,
                false,
                3,
                5,
                &[1e200, -0.5e200, 2e200],
                &[0.25e-200, 1e-200, 1e-200],
            )
            .unwrap();
            assert_relative_eq!(a, b, max_relative = 1e-12);
            // Powers of two scale exactly.
            let t = 2f64.powi(100);
            let c = var(
                kind,
                false,
                3,
                5,
                &[t, -0.5 * t, 2.0 * t],
                &[0.25, 1.0, 1.0],
            )
            .unwrap();
            assert_eq!(c, a * 2f64.powi(2 * 3 * 100));
        }
        // (xᵀy)⁴ of 1e150 norms: a variance near 1e600 is refused.
        let e = var(Gaussian, false, 2, 1, &[0.0, 0.0, 1.0], &[0.0, 0.0, 1e150]).unwrap_err();
        assert!(e.to_string().contains("overflow"), "{e}");
        // x / length_scale itself overflowing is refused too.
        assert!(
            polynomial_kernel_variance(Gaussian, false, 1, 1, &[1e300], &[1.0], 0.0, 1e-300)
                .is_err()
        );
        let nf = crate::sketch::sketch_features_for(2, true).unwrap();
        let v = var(
            TensorSrht,
            true,
            2,
            nf,
            &[0.5968072426887456],
            &[-0.19743264543855576],
        )
        .unwrap();
        assert_eq!(v, 0.0);
    }
}
