//! Kar & Karnick random Maclaurin features (`docs/math/maclaurin.rst`, "Kar &
//! Karnick's random Maclaurin features"): the degree of every feature is drawn
//! from `P(N = n) ∝ b^{−(n+1)}` on a support of degrees.

use rand::Rng as _;

use crate::error::{Error, Result};
use crate::rng::Rng;

/// The importance measure `P(n) ∝ b^{−(n+1)}` over the support: degrees
/// `n_0..=p_max` (`n_0 = 2` in h01 mode, else 1) with `a_n ≠ 0`, normalized.
/// Index = degree; entries outside the support are 0. Errors: `b <= 1`, an
/// empty support.
pub fn degree_probabilities(coefs: &[f64], h01: bool, base: f64) -> Result<Vec<f64>> {
    if !(base > 1.0 && base.is_finite()) {
        return Err(Error::invalid("base", format!("must be > 1, got {base}")));
    }
    let n0 = if h01 { 2 } else { 1 };
    let mut probs: Vec<f64> = (0..coefs.len())
        .map(|n| {
            if n >= n0 && coefs[n] != 0.0 {
                base.powi(-(n as i32 + 1))
            } else {
                0.0
            }
        })
        .collect();
    let total: f64 = probs.iter().sum();
    if total == 0.0 {
        return Err(Error::invalid(
            "max_degree",
            "the random Maclaurin support is empty: no degree with a non-zero coefficient",
        ));
    }
    probs.iter_mut().for_each(|p| *p /= total);
    Ok(probs)
}

/// Draws the degrees of `budget` features i.i.d. from `probs` and returns
/// the count per degree (index = degree).
///
/// # Errors
/// [`Error::InvalidParameter`] naming `probs` when a probability is not a
/// finite number `≥ 0`, or when `budget > 0` and none is positive (see
/// [`degree_probabilities`]).
pub fn draw_counts(probs: &[f64], budget: usize, rng: &mut Rng) -> Result<Vec<usize>> {
    if let Some(p) = probs.iter().find(|p| !(p.is_finite() && **p >= 0.0)) {
        return Err(Error::invalid(
            "probs",
            format!("every probability must be a finite number >= 0, got {p}"),
        ));
    }
    let mut counts = vec![0usize; probs.len()];
    if budget == 0 {
        return Ok(counts);
    }
    let Some(last) = probs.iter().rposition(|&p| p > 0.0) else {
        return Err(Error::invalid(
            "probs",
            "no degree has a positive probability, so no feature can be drawn",
        ));
    };
    for _ in 0..budget {
        let u: f64 = rng.random();
        let mut acc = 0.0;
        let mut pick = last;
        for (n, &p) in probs.iter().enumerate() {
            acc += p;
            if p > 0.0 && u < acc {
                pick = n;
                break;
            }
        }
        counts[pick] += 1;
    }
    Ok(counts)
}

/// The scale of a degree-`n` block with `count` features (each already
/// normalized by `1/√count`): `√(a_n · count / (P(n) · budget))`.
pub fn block_scale(coef: f64, prob: f64, count: usize, budget: usize) -> f64 {
    (coef * count as f64 / (prob * budget as f64)).sqrt()
}

/// Closed-form variance of the Kar & Karnick estimate for unstructured real
/// sketches (`docs/math/maclaurin.rst`, "Kar & Karnick's random Maclaurin
/// features"), without the prefactor `σ⁴ g² g²`:
/// `[Σ_n (a_n²/P(n)) M^n − K_1²] / D'` with `K_1 = Σ_n a_n m^n` over the
/// support.
pub fn variance(coefs: &[f64], probs: &[f64], big_m: f64, m: f64, budget: usize) -> f64 {
    let (mut second, mut k1) = (0.0, 0.0);
    for (n, (&a, &p)) in coefs.iter().zip(probs).enumerate() {
        if p > 0.0 {
            second += a * a / p * big_m.powi(n as i32);
            k1 += a * m.powi(n as i32);
        }
    }
    (second - k1 * k1) / budget as f64
}
