//! A branch-free `exp` for the kernel matrices of the exact GP
//! (`docs/math/gp.rst`, "Exact GP": `K_ij = σ² exp(−½ r²_ij)`, `N²/2`
//! exponentials per LML evaluation), the Gaussian weights of the localized GP
//! (`docs/math/localized.rst`, "Training") and the Maclaurin pair statistics
//! (`docs/math/maclaurin.rst`, "Pair statistics"), written so that a loop over
//! a slice vectorizes (see `widest_simd!`).
//!
//! `exp(x) = 2^n · exp(r)` with `n = round(x / ln 2)` and
//! `r = x − n ln 2` (`|r| ≤ ½ ln 2`, the product `n ln 2` in two parts so it
//! is exact), `exp(r)` by its Taylor polynomial of degree 13 (truncation
//! below `6e−18` relative) and `2^n` built from its exponent bits. Plain
//! multiplies and adds (no FMA contraction in Rust), so every instruction
//! set gives the same bits; the error is within 2 ulp of the true value
//! (tested against the correctly rounded reference of `f64::exp` to that
//! bound). Results below `f64::MIN_POSITIVE` (`x < −708.3964`) are 0.

/// `1.5 · 2^52`: adding it rounds a double of magnitude below `2^51` to an
/// integer, which then sits in the low mantissa bits.
const SHIFT: f64 = 6_755_399_441_055_744.0;
/// `ln 2` split so that `n · LN2_HI` is exact for `|n| < 2^20` (fdlibm).
const LN2_HI: f64 = f64::from_bits(0x3FE6_2E42_FEE0_0000);
/// `ln 2 − LN2_HI`.
const LN2_LO: f64 = f64::from_bits(0x3DEA_39EF_3579_3C76);
/// `ln f64::MIN_POSITIVE = −1022 ln 2`: below it the result is returned as 0.
const MIN_ARG: f64 = -708.396_418_532_264_1;
/// Above this the result overflows: clamped here (the GP never goes there).
const MAX_ARG: f64 = 709.78;

/// `1 / k!` for `k = 0 … 13`.
const INV_FACT: [f64; 14] = {
    let mut c = [1.0; 14];
    let mut k = 1;
    while k < 14 {
        c[k] = c[k - 1] / k as f64;
        k += 1;
    }
    c
};

/// `exp(x)` (see the module docs); `#[inline(always)]` so that loops over
/// slices in callers compiled for a wide instruction set vectorize.
#[inline(always)]
pub(crate) fn exp(x: f64) -> f64 {
    let xc = x.clamp(MIN_ARG, MAX_ARG);
    let t = xc * std::f64::consts::LOG2_E + SHIFT;
    let n = t - SHIFT;
    let r = (xc - n * LN2_HI) - n * LN2_LO;
    let mut p = INV_FACT[13];
    for c in INV_FACT[..13].iter().rev() {
        p = p * r + c;
    }
    // The integer n sits in the low bits of t; 2^n from its exponent field.
    let k = (t.to_bits() as i64).wrapping_sub(SHIFT.to_bits() as i64);
    let scale = f64::from_bits(((k + 1023) as u64) << 52);
    if x < MIN_ARG {
        0.0
    } else {
        p * scale
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Distance in ulps between two positive finite doubles.
    fn ulps(a: f64, b: f64) -> u64 {
        (a.to_bits() as i64 - b.to_bits() as i64).unsigned_abs()
    }

    #[test]
    fn within_two_ulp_of_the_reference_over_the_range() {
        let mut worst = 0;
        // A dense sweep of the GP's range (−½ r², r² up to ~1,400) and
        // beyond, plus the points where n changes.
        let mut xs: Vec<f64> = (0..200_000)
            .map(|i| -708.0 * (i as f64 / 200_000.0))
            .collect();
        xs.extend((-1022..=1023).map(|n| n as f64 * std::f64::consts::LN_2));
        xs.extend([0.0, -0.0, 1e-300, -1e-300, 1.0, -1.0, 700.0, 709.0, -708.0]);
        for x in xs {
            let (got, want) = (exp(x), x.exp());
            if want >= f64::MIN_POSITIVE && want.is_finite() {
                worst = worst.max(ulps(got, want));
            }
        }
        assert!(worst <= 2, "worst error {worst} ulp");
        assert_eq!(exp(0.0), 1.0);
    }

    #[test]
    fn underflow_is_zero_and_tiny_arguments_are_one() {
        for x in [-708.397, -745.0, -1e4, f64::NEG_INFINITY] {
            assert_eq!(exp(x), 0.0, "{x}");
        }
        assert_eq!(exp(-1e-20), 1.0);
        assert!(exp(-708.396) >= f64::MIN_POSITIVE);
    }
}
