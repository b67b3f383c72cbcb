//! The expected softmax of independent Gaussian latents, deterministically
//! (see docs/math/classification.rst, section "Probabilities").
//!
//! `p_c = E[exp(f_c) / Σ_j exp(f_j)]` with independent `f_j ~ N(μ_j, v_j)`
//! has no closed form, and a product rule over the `C` latents costs
//! `Q^C`. The Gumbel-max identity turns it into one-dimensional integrals:
//! with `g_j` independent standard Gumbel variables,
//! `softmax(f)_c = P(c = argmax_j (f_j + g_j) | f)`, so with `u_j = f_j + g_j`
//! (independent, each a Gaussian plus a Gumbel)
//!
//! ```text
//! p_c = P(u_c > u_j for all j ≠ c) = ∫ q_c(x) Π_{j≠c} Q_j(x) dx,
//! Q_j(x) = E_z[F(x − μ_j − √v_j z)],  q_j(x) = E_z[F'(x − μ_j − √v_j z)],
//! ```
//!
//! `F(t) = exp(−e^{−t})` the Gumbel distribution function and
//! `F'(t) = e^{−t} F(t)` its density, `z ~ N(0, 1)`. Each expectation over
//! `z` uses the fixed Gauss–Hermite rule of [`NODES`] nodes, the integral
//! over `x` the trapezoid rule of step [`STEP`] on
//! `[min_j(μ_j − 8√v_j) − 4, max_j(μ_j + 8√v_j) + 30]` (the Gumbel density
//! is below `1e−13` outside `[−4, 30]` and the rule's weights beyond 8
//! standard deviations below `1e−15`). The integrand is entire and
//! decays at both ends, so the trapezoid error is of order
//! `exp(−π²/STEP) ≈ 3e−9`; the Gauss–Hermite error grows with the latent
//! standard deviations (the softmax varies on the scale `1/√v_j` in `z`):
//! against the same scheme with 64 nodes and step 0.25 the largest
//! difference is about `3e−5` at `v ≤ 16` and `1e−4` at `v = 30`, and
//! against 10⁶-sample Monte Carlo the results agree to its sampling error.
//! The probabilities are finally divided by their sum (which the
//! quadrature gets to about `1e−8`), so each row sums to 1 to rounding. The
//! cost is `O(C · NODES)` exponentials per grid point, about
//! `(Δμ + 16 max √v + 34)/STEP` grid points per test row.

use std::sync::OnceLock;

use ndarray::{Array2, ArrayView1, ArrayView2, ArrayViewMut1, Axis};
use rayon::prelude::*;

use crate::error::{check_finite, Error, Result};
use crate::threads::Parallelism;

/// Gauss–Hermite nodes per latent.
pub const NODES: usize = 32;
/// Step of the trapezoid rule over the Gumbel-shifted variable.
pub const STEP: f64 = 0.5;
/// Half-width of the integration range around the means, in standard
/// deviations.
const SPREAD: f64 = 8.0;
/// Extra range below the lowest and above the highest latent: the
/// standard Gumbel density is below `1e−13` outside `[−LEFT, RIGHT]`.
const LEFT: f64 = 4.0;
const RIGHT: f64 = 30.0;
/// `e^{−t}` is capped at `e^{EXP_CAP}` (where `F(t)` is already 0), so it
/// never overflows.
const EXP_CAP: f64 = 700.0;

/// The Gauss–Hermite rule for `E[h(z)]`, `z ~ N(0, 1)`: nodes and weights
/// (summing to 1), by the Golub–Welsch eigenvalue method on the Jacobi
/// matrix of the Hermite polynomials (off-diagonal `√(k/2)`; nodes `√2 t_q`
/// for its eigenvalues `t_q`, weights the squared first components of its
/// eigenvectors).
fn hermite_rule() -> &'static (Vec<f64>, Vec<f64>) {
    static RULE: OnceLock<(Vec<f64>, Vec<f64>)> = OnceLock::new();
    RULE.get_or_init(|| {
        let jacobi = faer::Mat::<f64>::from_fn(NODES, NODES, |i, j| {
            if i.abs_diff(j) == 1 {
                (i.max(j) as f64 / 2.0).sqrt()
            } else {
                0.0
            }
        });
        let (nodes, weights) = match jacobi.self_adjoint_eigen(faer::Side::Lower) {
            Ok(evd) => {
                let (u, t) = (evd.U(), evd.S().column_vector());
                (
                    (0..NODES)
                        .map(|q| std::f64::consts::SQRT_2 * t[q])
                        .collect(),
                    (0..NODES).map(|q| u[(0, q)] * u[(0, q)]).collect(),
                )
            }
            // A symmetric tridiagonal eigenproblem of fixed size converges.
            Err(_) => (vec![0.0], vec![1.0]),
        };
        (nodes, weights)
    })
}

/// Scratch of one test row: the shifted nodes `μ_j + √v_j z_q` (`C × NODES`)
/// and the per-class `Q_j(x)`, `q_j(x)`, suffix products and sums.
#[derive(Default)]
struct Scratch {
    nodes: Vec<f64>,
    cdf: Vec<f64>,
    pdf: Vec<f64>,
    suffix: Vec<f64>,
}

/// `p` (length `C`) for the means `mu` and variances `var` of one row.
fn row(mu: &[f64], var: &[f64], p: &mut [f64], s: &mut Scratch) {
    let (z, w) = hermite_rule();
    let c = mu.len();
    s.nodes.clear();
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for (&m, &v) in mu.iter().zip(var) {
        let sd = v.sqrt();
        s.nodes.extend(z.iter().map(|zq| m + sd * zq));
        lo = lo.min(m - SPREAD * sd);
        hi = hi.max(m + SPREAD * sd);
    }
    let (lo, hi) = (lo - LEFT, hi + RIGHT);
    let points = ((hi - lo) / STEP).ceil() as usize + 1;
    s.cdf.resize(c, 0.0);
    s.pdf.resize(c, 0.0);
    s.suffix.resize(c + 1, 1.0);
    p.fill(0.0);
    for i in 0..points {
        let x = lo + i as f64 * STEP;
        for j in 0..c {
            let (mut cdf, mut pdf) = (0.0, 0.0);
            for (a, wq) in s.nodes[j * NODES..(j + 1) * NODES].iter().zip(w) {
                let e = (a - x).min(EXP_CAP).exp();
                let f = (-e).exp();
                cdf += wq * f;
                pdf += wq * e * f;
            }
            s.cdf[j] = cdf;
            s.pdf[j] = pdf;
        }
        // p_c += q_c Π_{j<c} Q_j Π_{j>c} Q_j (prefix and suffix products,
        // no division by a Q_j that may be 0).
        s.suffix[c] = 1.0;
        for j in (0..c).rev() {
            s.suffix[j] = s.suffix[j + 1] * s.cdf[j];
        }
        let mut prefix = 1.0;
        for (j, pj) in p.iter_mut().enumerate() {
            *pj += s.pdf[j] * prefix * s.suffix[j + 1];
            prefix *= s.cdf[j];
        }
    }
    let total: f64 = p.iter().sum();
    p.iter_mut().for_each(|v| *v /= total);
}

/// `p_ic = E[softmax(f_i)_c]` for independent `f_ic ~ N(mean_ic, var_ic)`
/// (`m × C` each), by the quadrature of the module docs; rows sum to 1.
/// Deterministic: the same input gives the same bits for any thread count.
///
/// # Errors
/// [`Error::ShapeMismatch`] when `var` and `mean` differ in shape;
/// [`Error::InvalidParameter`] for no classes or a negative variance;
/// [`Error::NonFinite`] for non-finite inputs.
pub fn expected_softmax(
    mean: ArrayView2<'_, f64>,
    var: ArrayView2<'_, f64>,
    par: Parallelism,
) -> Result<Array2<f64>> {
    for (name, expected, got) in [
        ("rows of the latent variances", mean.nrows(), var.nrows()),
        ("columns of the latent variances", mean.ncols(), var.ncols()),
    ] {
        if got != expected {
            return Err(Error::ShapeMismatch {
                name,
                expected,
                got,
            });
        }
    }
    if mean.ncols() == 0 {
        return Err(Error::invalid("mean", "needs at least one class"));
    }
    check_finite("latent means", mean.iter())?;
    check_finite("latent variances", var.iter())?;
    if let Some(v) = var.iter().find(|&&v| v < 0.0) {
        return Err(Error::invalid(
            "var",
            format!("latent variances must be >= 0, got {v}"),
        ));
    }
    let mut p = Array2::<f64>::zeros(mean.dim());
    let one = |s: &mut Scratch,
               out: ArrayViewMut1<'_, f64>,
               m: ArrayView1<'_, f64>,
               v: ArrayView1<'_, f64>| {
        let (m, v) = (m.to_vec(), v.to_vec());
        let mut out = out;
        let mut row_p = vec![0.0; m.len()];
        row(&m, &v, &mut row_p, s);
        out.assign(&ArrayView1::from(&row_p));
    };
    if par.is_parallel() {
        p.axis_iter_mut(Axis(0))
            .into_par_iter()
            .zip(mean.axis_iter(Axis(0)))
            .zip(var.axis_iter(Axis(0)))
            .for_each_init(Scratch::default, |s, ((out, m), v)| one(s, out, m, v));
    } else {
        let mut s = Scratch::default();
        for ((out, m), v) in p
            .axis_iter_mut(Axis(0))
            .zip(mean.axis_iter(Axis(0)))
            .zip(var.axis_iter(Axis(0)))
        {
            one(&mut s, out, m, v);
        }
    }
    Ok(p)
}
