//! Metrics of `docs/math/gp.rst`, "Metrics": KL divergence between predictive
//! Gaussians, RMSE, mean negative log predictive density, and the relative
//! Frobenius error of a Gram matrix.

use ndarray::{ArrayView1, ArrayView2};

use super::check_finite;
use crate::error::{Error, Result};
use crate::real::times_pow2;

/// Variances are floored here before logs and divisions (`docs/math/gp.rst`,
/// "Metrics").
pub const VARIANCE_FLOOR: f64 = 1e-12;

/// `ln 2π`.
const LN_2PI: f64 = 1.837_877_066_409_345_5;

fn non_empty(n: usize) -> Result<()> {
    if n == 0 {
        Err(Error::invalid("y_true", "needs at least one value"))
    } else {
        Ok(())
    }
}

fn check_variances(name: &'static str, v: ArrayView1<'_, f64>) -> Result<()> {
    check_finite(name, v.iter())?;
    if v.iter().any(|&x| x < 0.0) {
        return Err(Error::invalid(name, "variances must be >= 0"));
    }
    Ok(())
}

/// Mean over points of `KL(N(μ_p, v_p) ‖ N(μ_q, v_q)) = ½[ln(v_q/v_p) +
/// (v_p + (μ_p − μ_q)²)/v_q − 1]`, variances floored at 1e−12. The papers'
/// convention: `p` the approximation, `q` the exact GP, both with the noisy
/// predictive variances (the caller passes the variances it wants).
pub fn kl_divergence(
    mu_p: ArrayView1<'_, f64>,
    var_p: ArrayView1<'_, f64>,
    mu_q: ArrayView1<'_, f64>,
    var_q: ArrayView1<'_, f64>,
) -> Result<f64> {
    let n = mu_p.len();
    non_empty(n).map_err(|_| Error::invalid("mean_p", "needs at least one value"))?;
    Error::check_sizes(
        n,
        [
            ("length of var_p", var_p.len()),
            ("length of mean_q", mu_q.len()),
            ("length of var_q", var_q.len()),
        ],
    )?;
    check_finite("mean_p", mu_p.iter())?;
    check_finite("mean_q", mu_q.iter())?;
    check_variances("var_p", var_p)?;
    check_variances("var_q", var_q)?;
    let term = |i: usize| kl_term(mu_p[i], var_p[i], mu_q[i], var_q[i]);
    let mut mean = (0..n).map(term).sum::<f64>() / n as f64;
    if !mean.is_finite() {
        // The sum of finite terms overflowed: average without summing them whole.
        mean = (0..n).map(|i| term(i) / n as f64).sum();
    }
    if !mean.is_finite() {
        return Err(Error::invalid(
            "mean_p",
            "the KL divergence overflows the float range: the means differ by far more \
             than the standard deviations, or var_p is far above var_q",
        ));
    }
    Ok(mean)
}

/// One point's `KL(N(μ_p, v_p) ‖ N(μ_q, v_q)) = ½[ln(v_q/v_p) + (v_p + (μ_p − μ_q)²)/v_q − 1]`,
/// variances floored at 1e−12, unchecked (the term of [`kl_divergence`]).
///
/// Computed as `½(ln v_q − ln v_p) + (½v_p)/v_q + 2((½μ_p − ½μ_q)/√v_q)² − ½`
/// so that no intermediate overflows for finite arguments (`v_q/v_p` does
/// for `v_q = 1e300`, `v_p` floored, and `μ_p − μ_q` for opposite ±1e308):
/// the term is infinite only when its value exceeds the float range.
pub fn kl_term(mu_p: f64, var_p: f64, mu_q: f64, var_q: f64) -> f64 {
    let vp = var_p.max(VARIANCE_FLOOR);
    let vq = var_q.max(VARIANCE_FLOOR);
    let r = (0.5 * mu_p - 0.5 * mu_q) / vq.sqrt();
    0.5 * (vq.ln() - vp.ln()) + (0.5 * vp) / vq + 2.0 * r * r - 0.5
}

/// `√(mean_i (y_i − μ_i)²)`.
pub fn rmse(y_true: ArrayView1<'_, f64>, y_pred: ArrayView1<'_, f64>) -> Result<f64> {
    non_empty(y_true.len())?;
    Error::check_sizes(y_true.len(), [("length of y_pred", y_pred.len())])?;
    check_finite("y_true", y_true.iter())?;
    check_finite("y_pred", y_pred.iter())?;
    // The differences times h (see `difference_factor`), scaled by a power
    // of two (exact): the squares of 1e300 errors would overflow a plain sum.
    let pairs = || y_true.iter().zip(y_pred.iter());
    let h = difference_factor(pairs());
    let (e, s) = scaled_sum_of_squares(|| pairs().map(|(a, b)| h * a - h * b));
    let r = times_pow2((s / y_true.len() as f64).sqrt() / h, e);
    if !r.is_finite() {
        return Err(Error::invalid(
            "y_pred",
            "the root mean squared error overflows the float range",
        ));
    }
    Ok(r)
}

/// Mean negative log predictive density `mean_i [½ ln(2π v_i) + (y_i − μ_i)²/(2 v_i)]`
/// (`v_i` the noisy predictive variance, floored at 1e−12): the mean of
/// [`nll_terms`].
pub fn mean_nll(
    y_true: ArrayView1<'_, f64>,
    mean: ArrayView1<'_, f64>,
    var: ArrayView1<'_, f64>,
) -> Result<f64> {
    let terms = nll_terms(y_true, mean, var)?;
    let n = terms.len() as f64;
    let mut m = terms.iter().sum::<f64>() / n;
    if !m.is_finite() {
        // The sum of finite terms overflowed: average without summing them whole.
        m = terms.iter().map(|t| t / n).sum();
    }
    if !m.is_finite() {
        return Err(Error::invalid(
            "mean",
            "the mean negative log density overflows the float range: the errors are \
             far beyond the predictive standard deviations",
        ));
    }
    Ok(m)
}

/// The negative log predictive density of every point,
/// `½ ln(2π v_i) + (y_i − μ_i)²/(2 v_i)` (`v_i` floored at 1e−12).
///
/// # Errors
/// Empty or unequal lengths, non-finite targets or means, negative or
/// non-finite variances.
pub fn nll_terms(
    y_true: ArrayView1<'_, f64>,
    mean: ArrayView1<'_, f64>,
    var: ArrayView1<'_, f64>,
) -> Result<Vec<f64>> {
    let n = y_true.len();
    non_empty(n)?;
    Error::check_sizes(
        n,
        [("length of mean", mean.len()), ("length of var", var.len())],
    )?;
    check_finite("y_true", y_true.iter())?;
    check_finite("mean", mean.iter())?;
    check_variances("var", var)?;
    Ok((0..n)
        .map(|i| {
            // (y − μ)²/(2v) as 2((y/2 − μ/2)/√v)², which overflows only
            // when its value does.
            let v = var[i].max(VARIANCE_FLOOR);
            let r = (0.5 * y_true[i] - 0.5 * mean[i]) / v.sqrt();
            0.5 * (LN_2PI + v.ln()) + 2.0 * r * r
        })
        .collect())
}

/// `‖K̂ − K‖_F / ‖K‖_F`.
pub fn relative_frobenius_error(
    k_approx: ArrayView2<'_, f64>,
    k_exact: ArrayView2<'_, f64>,
) -> Result<f64> {
    if k_approx.dim() != k_exact.dim() {
        let (a, b) = (k_approx.dim(), k_exact.dim());
        return Err(Error::ShapeMismatch {
            name: if a.0 != b.0 {
                "rows of K_approx"
            } else {
                "columns of K_approx"
            },
            expected: if a.0 != b.0 { b.0 } else { b.1 },
            got: if a.0 != b.0 { a.0 } else { a.1 },
        });
    }
    check_finite("K_approx", k_approx.iter())?;
    check_finite("K_exact", k_exact.iter())?;
    // Both norms are taken of entries scaled by a power of two near their
    // largest magnitude (exact, so ordinary inputs give the unscaled result
    // bit for bit): squares of entries near 1e300 would overflow. The
    // differences are taken times h (see `difference_factor`).
    let pairs = || k_approx.iter().zip(k_exact.iter());
    let h = difference_factor(pairs());
    let (num_scale, num) = scaled_sum_of_squares(|| pairs().map(|(a, b)| h * a - h * b));
    let (den_scale, den) = scaled_sum_of_squares(|| k_exact.iter().copied());
    if den == 0.0 {
        return Err(Error::invalid("K_exact", "has zero Frobenius norm"));
    }
    // ‖K̂ − K‖ = 2^num_scale·√num/h and ‖K‖ = 2^den_scale·√den.
    let ratio = times_pow2((num / den).sqrt() / h, num_scale - den_scale);
    if !ratio.is_finite() {
        return Err(Error::invalid(
            "K_approx",
            "the relative Frobenius error overflows the float range",
        ));
    }
    Ok(ratio)
}

/// The factor `h` of the differences `h·a_i − h·b_i` of finite values that
/// the metrics sum: 1 (the differences themselves, each correctly rounded
/// and exact for subnormal values) unless one of them overflows (opposite
/// values near 1e308), then ½ (halving loses the last bit of subnormal
/// values, which only matters where no difference is that large).
fn difference_factor<'a>(mut pairs: impl Iterator<Item = (&'a f64, &'a f64)>) -> f64 {
    if pairs.any(|(a, b)| !(a - b).is_finite()) {
        0.5
    } else {
        1.0
    }
}

/// `(e, Σ (v / 2^e)²)` with `2^e` the power of two at or below the largest
/// `|v|` (`e = 0` when every value is zero), so the sum cannot overflow.
fn scaled_sum_of_squares<I: Iterator<Item = f64>>(values: impl Fn() -> I) -> (i32, f64) {
    let max = values().fold(0.0_f64, |m, v| m.max(v.abs()));
    if max == 0.0 {
        return (0, 0.0);
    }
    let e = max.log2().floor() as i32;
    (
        e,
        values()
            .map(|v| {
                let t = times_pow2(v, -e);
                t * t
            })
            .sum(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::array;

    /// `kl_divergence` of one pair of means and variances.
    fn kl_one(a: f64, b: f64, c: f64, d: f64) -> Result<f64> {
        kl_divergence(
            array![a].view(),
            array![b].view(),
            array![c].view(),
            array![d].view(),
        )
    }

    #[test]
    fn oracles() {
        let kl = |a: f64, b: f64, c: f64, d: f64| kl_one(a, b, c, d).unwrap();
        assert!((kl(0.0, 1.0, 1.0, 2.0) - 0.3465735903).abs() < 1e-10);
        assert!((kl(1.0, 0.5, 0.0, 1.0) - 0.5965735903).abs() < 1e-10);
        assert_eq!(kl(0.3, 0.7, 0.3, 0.7), 0.0);
        // The floor keeps a zero variance finite.
        assert!(kl(0.0, 0.0, 0.0, 1.0).is_finite());
        let m = mean_nll(
            array![1.0, 2.0].view(),
            array![1.0, 2.0].view(),
            array![1.0, 1.0].view(),
        )
        .unwrap();
        assert!((m - 0.9189385332).abs() < 1e-10);
        assert!(
            (rmse(array![0.0, 0.0].view(), array![3.0, 4.0].view()).unwrap() - 12.5_f64.sqrt())
                .abs()
                < 1e-15
        );
        let k = array![[1.0, 0.0], [0.0, 1.0]];
        let kh = array![[1.0, 0.1], [0.1, 1.0]];
        assert!(
            (relative_frobenius_error(kh.view(), k.view()).unwrap() - (0.02_f64 / 2.0).sqrt())
                .abs()
                < 1e-15
        );
    }

    #[test]
    fn bad_inputs() {
        assert!(matches!(
            rmse(array![1.0].view(), array![1.0, 2.0].view()),
            Err(Error::ShapeMismatch { .. })
        ));
        assert!(rmse(array![f64::NAN].view(), array![1.0].view()).is_err());
        assert!(
            mean_nll(array![1.0].view(), array![1.0].view(), array![-1.0].view())
                .unwrap_err()
                .to_string()
                .contains("var")
        );
        assert!(kl_divergence(
            array![].view(),
            array![].view(),
            array![].view(),
            array![].view()
        )
        .is_err());
        assert!(relative_frobenius_error(array![[1.0]].view(), array![[0.0]].view()).is_err());
        assert!(relative_frobenius_error(array![[1.0, 2.0]].view(), array![[1.0]].view()).is_err());
    }

    /// Fuzzing found `ln(v_q/v_p)` overflowing to inf for `v_q = 1e300` over
    /// a floored `v_p`, `NaN` from the squares of 1e300 entries in the
    /// Frobenius error and inf from those of 1e300 errors in the RMSE.
    #[test]
    fn extreme_values_stay_finite() {
        let kl = kl_one;
        // ½[ln(1e300/1e-12) + 1e-12/1e300 − 1] = ½[312 ln 10 − 1].
        let v = kl(0.0, 0.0, 0.0, 1e300).unwrap();
        assert!((v - 0.5 * (312.0 * 10f64.ln() - 1.0)).abs() < 1e-12, "{v}");
        // (μ_p − μ_q)² overflows, the KL (≈ 2e100) does not.
        let v = kl(1e200, 1.0, -1e200, 1e300).unwrap();
        assert!((v / 2e100 - 1.0).abs() < 1e-12, "{v}");
        // A KL beyond the float range is refused, not returned as inf.
        assert!(kl(1e300, 1.0, -1e300, 1.0)
            .unwrap_err()
            .to_string()
            .contains("overflow"));
        assert!(kl(0.0, 1e300, 0.0, 0.0).is_err());

        let k = array![[1e300, 0.0], [0.0, 1e300]];
        let kh = array![[1e300, 1e299], [1e299, 1e300]];
        let e = relative_frobenius_error(kh.view(), k.view()).unwrap();
        assert!((e - (0.02_f64 / 2.0).sqrt()).abs() < 1e-15, "{e}");
        let e = relative_frobenius_error(array![[-1e308]].view(), array![[1e308]].view()).unwrap();
        assert_eq!(e, 2.0);
        // Tiny reference, huge difference: a finite ratio of 1e300.
        let e = relative_frobenius_error(array![[1e100]].view(), array![[1e-200]].view()).unwrap();
        assert!((e / 1e300 - 1.0).abs() < 1e-12, "{e}");
        let e = relative_frobenius_error(array![[5e-324]].view(), array![[5e-324]].view()).unwrap();
        assert_eq!(e, 0.0);
        // Subnormal differences are exact (halves lost them: 5e-324 / 2
        // rounds to 0, giving 1 and 0 here).
        let e = relative_frobenius_error(array![[5e-324]].view(), array![[1e-323]].view()).unwrap();
        assert_eq!(e, 0.5);
        assert_eq!(
            rmse(array![5e-324].view(), array![0.0].view()).unwrap(),
            5e-324
        );
        // rmse and mean_nll of 1e300 errors (fuzzing: rmse gave inf).
        let r = rmse(array![0.0, 0.0].view(), array![0.0, 1e300].view()).unwrap();
        assert!((r / (1e300 / 2f64.sqrt()) - 1.0).abs() < 1e-15, "{r}");
        assert!(rmse(array![1e308].view(), array![-1e308].view())
            .unwrap_err()
            .to_string()
            .contains("overflow"));
        let m = mean_nll(
            array![0.0].view(),
            array![1e300].view(),
            array![1e300].view(),
        )
        .unwrap();
        assert!((m / 5e299 - 1.0).abs() < 1e-12, "{m}");
        assert!(mean_nll(array![0.0].view(), array![1e300].view(), array![1.0].view()).is_err());
        assert!(
            relative_frobenius_error(array![[1e300]].view(), array![[1e-300]].view())
                .unwrap_err()
                .to_string()
                .contains("overflow")
        );
    }
}
