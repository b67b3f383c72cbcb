//! Metrics of `docs/math/gp.rst`, "Metrics": KL divergence between predictive
//! Gaussians, RMSE, mean negative log predictive density, and the relative
//! Frobenius error of a Gram matrix.

use ndarray::{ArrayView1, ArrayView2};

use super::check_finite;
use crate::error::{Error, Result};

/// Variances are floored here before logs and divisions (`docs/math/gp.rst`,
/// "Metrics").
pub const VARIANCE_FLOOR: f64 = 1e-12;

/// `ln 2π`.
const LN_2PI: f64 = 1.837_877_066_409_345_5;

fn same_len(name: &'static str, expected: usize, got: usize) -> Result<()> {
    if expected == got {
        Ok(())
    } else {
        Err(Error::ShapeMismatch {
            name,
            expected,
            got,
        })
    }
}

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
    same_len("length of var_p", n, var_p.len())?;
    same_len("length of mean_q", n, mu_q.len())?;
    same_len("length of var_q", n, var_q.len())?;
    check_finite("mean_p", mu_p.iter())?;
    check_finite("mean_q", mu_q.iter())?;
    check_variances("var_p", var_p)?;
    check_variances("var_q", var_q)?;
    let s: f64 = (0..n)
        .map(|i| kl_term(mu_p[i], var_p[i], mu_q[i], var_q[i]))
        .sum();
    Ok(s / n as f64)
}

/// One point's `KL(N(μ_p, v_p) ‖ N(μ_q, v_q)) = ½[ln(v_q/v_p) + (v_p + (μ_p − μ_q)²)/v_q − 1]`,
/// variances floored at 1e−12, unchecked (the term of [`kl_divergence`]).
pub fn kl_term(mu_p: f64, var_p: f64, mu_q: f64, var_q: f64) -> f64 {
    let vp = var_p.max(VARIANCE_FLOOR);
    let vq = var_q.max(VARIANCE_FLOOR);
    let dm = mu_p - mu_q;
    0.5 * ((vq / vp).ln() + (vp + dm * dm) / vq - 1.0)
}

/// `√(mean_i (y_i − μ_i)²)`.
pub fn rmse(y_true: ArrayView1<'_, f64>, y_pred: ArrayView1<'_, f64>) -> Result<f64> {
    non_empty(y_true.len())?;
    same_len("length of y_pred", y_true.len(), y_pred.len())?;
    check_finite("y_true", y_true.iter())?;
    check_finite("y_pred", y_pred.iter())?;
    let s: f64 = y_true
        .iter()
        .zip(y_pred.iter())
        .map(|(a, b)| (a - b) * (a - b))
        .sum();
    Ok((s / y_true.len() as f64).sqrt())
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
    Ok(terms.iter().sum::<f64>() / terms.len() as f64)
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
    same_len("length of mean", n, mean.len())?;
    same_len("length of var", n, var.len())?;
    check_finite("y_true", y_true.iter())?;
    check_finite("mean", mean.iter())?;
    check_variances("var", var)?;
    Ok((0..n)
        .map(|i| {
            let v = var[i].max(VARIANCE_FLOOR);
            let r = y_true[i] - mean[i];
            0.5 * (LN_2PI + v.ln()) + r * r / (2.0 * v)
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
    let num: f64 = k_approx
        .iter()
        .zip(k_exact.iter())
        .map(|(a, b)| (a - b) * (a - b))
        .sum();
    let den: f64 = k_exact.iter().map(|b| b * b).sum();
    if den == 0.0 {
        return Err(Error::invalid("K_exact", "has zero Frobenius norm"));
    }
    Ok((num / den).sqrt())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::array;

    #[test]
    fn oracles() {
        let kl = |a: f64, b: f64, c: f64, d: f64| {
            kl_divergence(
                array![a].view(),
                array![b].view(),
                array![c].view(),
                array![d].view(),
            )
            .unwrap()
        };
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
}
