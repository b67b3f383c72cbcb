//! The feature-norm bound of the localized GP (`docs/math/localized.rst`,
//! "Skipping negligible rows"): a rigorous upper bound on `‖Φ(x − c)‖²` of a fitted Maclaurin
//! map as a function of `‖x − c‖²/l²`, and the distance cutoff beyond which a
//! training row's features are negligible at a centroid.

use crate::maclaurin::map::MaclaurinMap;
use crate::sketch::SketchParams;

/// The rigorous bound `‖Φ(x̃)‖² ≤ σ² e^{−s} (1 + Σ_n b_n s^n)`, `s = ‖x̃‖²`.
///
/// For a sketched block of degree `n` with scale `√a_n`, `b_n = a_n M_n²`
/// where `‖φ_n(u)‖² ≤ M_n² ‖u‖^{2n}` for every `u`:
/// - dense sketches (`docs/math/sketches.rst`, "The generic sketch of degree
///   n"): feature `i` is `Π_j ⟨w_ij, u⟩/√D`, so by Cauchy–Schwarz
///   `M_n² = (1/D) Σ_i Π_j ‖w_ij‖²` (complex: `|w|²` summed over real and
///   imaginary parts);
/// - TensorSRHT (`docs/math/sketches.rst`, "TensorSRHT"): in each block
///   `Σ_r |v_0[r]|² = d'‖u‖²` and every `|v_j[r]|² ≤ d'‖u‖²`, so with
///   `B = ⌈D/d'⌉` blocks `M_n² = B d'^n / D`;
/// - TensorSketch (`docs/math/sketches.rst`, "TensorSketch"):
///   `‖C_j u‖_1 ≤ ‖u‖_1 ≤ √d‖u‖` and Young's inequality for the circular
///   convolution give `M_n² = d^n`.
///
/// The explicit `d = 1` map is bounded exactly: `b_n = 1/n!`, `n = 1..=p`.
#[derive(Clone, Debug, PartialEq)]
pub struct NormBound {
    /// `(n, b_n)` for every sketched degree.
    pub terms: Vec<(u32, f64)>,
}

impl NormBound {
    /// The bound's coefficients for a fitted Gaussian-kernel map.
    pub fn of(map: &MaclaurinMap) -> Self {
        if map.is_explicit_1d() {
            let mut b = 1.0;
            let terms = (1..=map.degree())
                .map(|n| {
                    b /= f64::from(n);
                    (n, b)
                })
                .collect();
            return Self { terms };
        }
        let terms = map
            .sketch_blocks()
            .map(|(scale, sk)| {
                let n = sk.degree();
                let m_sq = match sk.params() {
                    SketchParams::Dense { weights } => {
                        let nf = sk.n_features();
                        let mut sum = 0.0;
                        for i in 0..nf {
                            let mut prod = 1.0;
                            for w in weights {
                                let mut sq: f64 = w.row(i).iter().map(|v| v * v).sum();
                                if sk.is_complex() {
                                    sq += w.row(nf + i).iter().map(|v| v * v).sum::<f64>();
                                }
                                prod *= sq;
                            }
                            sum += prod;
                        }
                        sum / nf as f64
                    }
                    SketchParams::Srht { d_pad, .. } => {
                        let nf = sk.n_features();
                        let blocks = nf.div_ceil(d_pad) as f64;
                        blocks * (d_pad as f64).powi(n as i32) / nf as f64
                    }
                    SketchParams::Count { .. } => (sk.dim() as f64).powi(n as i32),
                };
                (n, scale * scale * m_sq)
            })
            .collect();
        Self { terms }
    }

    /// `ln(e^{−s}(1 + Σ b_n s^n))`, the log of the bound divided by `σ²`.
    pub fn ln_bound(&self, s: f64) -> f64 {
        let poly: f64 = self.terms.iter().map(|&(n, b)| b * s.powi(n as i32)).sum();
        poly.ln_1p() - s
    }

    /// The smallest `s* ≥ p` (p the largest degree) with
    /// `ln_bound(s) < 2 ln tol` for every `s ≥ s*` (the bound decreases for
    /// `s ≥ p` because `Σ n b_n s^{n−1} ≤ (p/s) Σ b_n s^n`); found by
    /// doubling and bisection. `∞` when `tol = 0`.
    pub fn cutoff(&self, tol: f64) -> f64 {
        if tol <= 0.0 {
            return f64::INFINITY;
        }
        let target = 2.0 * tol.ln();
        let p = self.terms.iter().map(|t| t.0).max().unwrap_or(0);
        let lo0 = f64::from(p).max(1e-300);
        if self.ln_bound(lo0) < target {
            return lo0;
        }
        let (mut lo, mut hi) = (lo0, 2.0 * lo0.max(1.0));
        while self.ln_bound(hi) >= target {
            lo = hi;
            hi *= 2.0;
            if !hi.is_finite() {
                return f64::INFINITY;
            }
        }
        for _ in 0..200 {
            let mid = 0.5 * (lo + hi);
            if mid <= lo || mid >= hi {
                break;
            }
            if self.ln_bound(mid) < target {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        hi
    }
}
