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
//! `z` uses the fixed Gauss–Hermite rule of [`NODES`] nodes `z_q`, the
//! integral over `x` the trapezoid rule of step [`STEP`] on the part of
//! `[max_j(μ_j − 8√v_j) − 4, max_j(μ_j + 8√v_j) + 30]` within `[−4, 30]` of
//! some node `μ_j + √v_j z_q` with `|z_q| ≤ 8`. Outside it the integrand has
//! mass below `1e−13`: the Gumbel density is below `1e−13` outside
//! `[−4, 30]`, the rule's weights beyond 8 standard deviations are below
//! `1e−15`, and below the range's start the class with the highest
//! `μ_j − 8√v_j` exceeds `x` with probability `1 − 1e−15`, so no class wins
//! there. The integrand is entire and decays at both ends of each span, so
//! the trapezoid error is of order `exp(−π²/STEP) ≈ 3e−9`; the Gauss–Hermite
//! error grows with the latent standard deviations (the softmax varies on
//! the scale `1/√v_j` in `z`): against the same scheme with 64 nodes and
//! step 0.25 the largest difference is about `3e−5` at `v ≤ 16` and `1e−4`
//! at `v = 30`. The latents with `v_j ≥ 1` of a row are therefore
//! integrated over the Gumbel variable instead (`wide_row`, the others
//! keeping the Gauss–Hermite rule on the same grid), which is within about
//! `1e−8` at any variances; against 10⁶-sample Monte Carlo
//! the results agree to its sampling error. The probabilities are finally divided by their sum
//! (which the quadrature gets to about `1e−8`), so each row sums to 1 to
//! rounding. The range is at most `C · NODES` windows of length 34, so a
//! row costs at most `34 · C · NODES / STEP` grid points of `O(C · NODES)`
//! exponentials each, whatever the scale of the means and variances
//! (about `(16 max √v + 34)/STEP` points when the nodes overlap, fewer
//! when they are spread out); the means are taken relative to their
//! maximum and each span's points relative to its start, so the points are
//! resolved at any magnitude.

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
/// deviations: the nodes `z_q` beyond it (weights below `1e−15`) get no
/// window.
const SPREAD: f64 = 8.0;
/// The window of a node `a` is `[a − LEFT, a + RIGHT]`: the standard Gumbel
/// density is below `1e−13` outside `[−LEFT, RIGHT]`.
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
        let (nodes, weights) = match crate::linalg::symmetric_eigen(jacobi.as_ref()) {
            Ok((u, t)) => (
                (0..NODES)
                    .map(|q| std::f64::consts::SQRT_2 * t[q])
                    .collect(),
                (0..NODES).map(|q| u[(0, q)] * u[(0, q)]).collect(),
            ),
            // A symmetric tridiagonal eigenproblem of fixed size converges.
            Err(_) => (vec![0.0], vec![1.0]),
        };
        (nodes, weights)
    })
}

/// Scratch of one test row: the shifted nodes `μ_j + √v_j z_q − max_k μ_k`
/// (`C × NODES`), the same relative to the anchor of the current span, the
/// spans of the integration range, and the per-class `Q_j(x)`, `q_j(x)` and
/// suffix products.
#[derive(Default)]
struct Scratch {
    nodes: Vec<f64>,
    local: Vec<f64>,
    spans: Vec<Span>,
    cdf: Vec<f64>,
    pdf: Vec<f64>,
    suffix: Vec<f64>,
}

/// `[anchor + start, anchor + end]`, with `anchor` a node and the offsets
/// small, so that its points stay resolved when `|anchor|` is so large that
/// `anchor ± 34` would round to `anchor`.
#[derive(Clone, Copy)]
struct Span {
    anchor: f64,
    start: f64,
    end: f64,
}

/// The integration range of one row (see the module docs), as disjoint
/// spans in increasing order, in `s.spans`; the nodes in `s.nodes`.
///
/// The probabilities are invariant under a common shift of the means, so
/// the nodes are taken relative to `max_k μ_k`. The window
/// `[a − LEFT, a + RIGHT]` of each node `a = μ_j + √v_j z_q` with
/// `|z_q| ≤ SPREAD` is cut below at `max_j(μ_j − SPREAD √v_j) − LEFT`; no
/// window reaches above `max_j(μ_j + SPREAD √v_j) + RIGHT`. There are at most
/// `C · NODES` windows, so the spans are at most `(LEFT + RIGHT) · C · NODES`
/// long in all.
fn spans(mu: &[f64], var: &[f64], s: &mut Scratch) {
    let (z, _) = hermite_rule();
    let top = mu.iter().fold(f64::NEG_INFINITY, |a, &m| a.max(m));
    s.nodes.clear();
    let mut floor = f64::NEG_INFINITY;
    for (&m, &v) in mu.iter().zip(var) {
        let (m, sd) = (m - top, v.sqrt());
        s.nodes.extend(z.iter().map(|zq| m + sd * zq));
        floor = floor.max(m - SPREAD * sd);
    }
    s.spans.clear();
    for (&anchor, zq) in s.nodes.iter().zip(z.iter().cycle()) {
        let start = (floor - anchor - LEFT).max(-LEFT);
        if zq.abs() <= SPREAD && start < RIGHT {
            s.spans.push(Span {
                anchor,
                start,
                end: RIGHT,
            });
        }
    }
    // The window starts increase with the anchors.
    s.spans.sort_by(|a, b| a.anchor.total_cmp(&b.anchor));
    let mut merged = 0;
    for k in 0..s.spans.len() {
        let next = s.spans[k];
        if merged > 0 {
            let last = &mut s.spans[merged - 1];
            let shift = next.anchor - last.anchor;
            if shift + next.start <= last.end {
                last.end = last.end.max(shift + next.end);
                continue;
            }
        }
        s.spans[merged] = next;
        merged += 1;
    }
    s.spans.truncate(merged);
}

/// Step of the trapezoid rules of [`wide_row`], over the Gumbel variable
/// and (times the smallest latent standard deviation) over `x`: their
/// errors are of order `exp(−π²/WIDE_STEP) ≈ 3e−9`.
const WIDE_STEP: f64 = 0.5;

/// The trapezoid rule for `E[h(g)]`, `g` standard Gumbel: nodes `g_k` of
/// step [`WIDE_STEP`] on `[−LEFT, RIGHT]` (the density is below `1e−13`
/// outside) and weights `WIDE_STEP · F'(g_k)`, normalized to sum 1. The
/// density is entire and analytic in the strip `|Im g| < π/2`, so the
/// rule's error is of order `exp(−π²/WIDE_STEP)` for integrands that vary
/// on the scale 1 or more.
fn gumbel_rule() -> &'static (Vec<f64>, Vec<f64>) {
    static RULE: OnceLock<(Vec<f64>, Vec<f64>)> = OnceLock::new();
    RULE.get_or_init(|| {
        let n = ((LEFT + RIGHT) / WIDE_STEP).round() as usize + 1;
        let nodes: Vec<f64> = (0..n).map(|k| -LEFT + k as f64 * WIDE_STEP).collect();
        let mut weights: Vec<f64> = nodes.iter().map(|&g| (-g - (-g).exp()).exp()).collect();
        let total: f64 = weights.iter().sum();
        weights.iter_mut().for_each(|w| *w /= total);
        (nodes, weights)
    })
}

/// Latent standard deviations from which a latent's expectations are taken
/// over the Gumbel variable instead of the Gaussian one ([`wide_row`]).
const WIDE_SD: f64 = 1.0;
/// The most points [`wide_row`] takes (its step follows the smallest
/// scale, its range the largest standard deviation); rows that need more
/// are left to the Gauss–Hermite scheme.
const MAX_WIDE_POINTS: f64 = 16_384.0;

/// `p` for a row with at least one latent standard deviation of at least
/// [`WIDE_SD`], or `false` (nothing written) when it would take more than
/// [`MAX_WIDE_POINTS`] points. The Gauss–Hermite rule resolves the Gumbel
/// function `F(x − μ − √v z)` only where it varies slowly in `z`, on the
/// scale `1/√v`; for wide latents the expectations are taken over the
/// Gumbel variable instead: `Q_j(x) = E_g[Φ((x − μ_j − g)/√v_j)]` and
/// `q_j(x) = E_g[φ((x − μ_j − g)/√v_j)]/√v_j`, whose integrands vary in
/// `g` on the scale `√v_j ≥ 1` ([`gumbel_rule`]). The narrow latents keep
/// the Gauss–Hermite expectations, which vary in `x` on the Gumbel scale 1
/// or more. The outer trapezoid rule over `x` takes the step `WIDE_STEP`
/// times the smallest of those scales (`√v_j` for a wide latent, 1 for a
/// narrow one: every `Q_j`, `q_j` varies on that scale or more) on the
/// whole range of the module docs.
fn wide_row(mu: &[f64], var: &[f64], p: &mut [f64], s: &mut Scratch) -> bool {
    let (g, w) = gumbel_rule();
    let (z, wz) = hermite_rule();
    let c = mu.len();
    let top = mu.iter().fold(f64::NEG_INFINITY, |a, &m| a.max(m));
    let (mut lo, mut hi, mut min_scale) = (f64::NEG_INFINITY, f64::NEG_INFINITY, f64::INFINITY);
    s.local.clear();
    for (&m, &v) in mu.iter().zip(var) {
        let (m, sd) = (m - top, v.sqrt());
        lo = lo.max(m - SPREAD * sd);
        hi = hi.max(m + SPREAD * sd);
        min_scale = min_scale.min(if sd >= WIDE_SD { sd } else { 1.0 });
        s.local.push(m);
    }
    let (lo, hi) = (lo - LEFT, hi + RIGHT);
    let h = WIDE_STEP * min_scale;
    let points = ((hi - lo) / h).ceil() + 1.0;
    if points.is_nan() || points > MAX_WIDE_POINTS {
        return false;
    }
    s.cdf.resize(c, 0.0);
    s.pdf.resize(c, 0.0);
    s.suffix.resize(c + 1, 1.0);
    p.fill(0.0);
    let inv_sqrt_2pi = 1.0 / (2.0 * std::f64::consts::PI).sqrt();
    for i in 0..points as usize {
        let x = lo + i as f64 * h;
        for (((m, v), q), d) in s.local.iter().zip(var).zip(&mut s.cdf).zip(&mut s.pdf) {
            let sd = v.sqrt();
            let (mut cdf, mut pdf) = (0.0, 0.0);
            if sd >= WIDE_SD {
                for (gk, wk) in g.iter().zip(w) {
                    let t = (x - m - gk) / sd;
                    cdf += wk * 0.5 * libm::erfc(-t * std::f64::consts::FRAC_1_SQRT_2);
                    pdf += wk * (-0.5 * t * t).exp();
                }
                *q = cdf;
                *d = pdf * inv_sqrt_2pi / sd;
            } else {
                (*q, *d) = hermite_expectations(z.iter().map(|zq| m + sd * zq - x), wz);
            }
        }
        accumulate_point(&s.cdf, &s.pdf, &mut s.suffix, p);
    }
    let total: f64 = p.iter().sum();
    p.iter_mut().for_each(|v| *v /= total);
    true
}

/// The Gauss–Hermite expectations `(Q_j(x), q_j(x))` of one latent at one
/// point, from the offsets `μ_j + √v_j z_q − x` of its nodes and the rule's
/// weights: `Σ_q w_q F(−a_q)` and `Σ_q w_q F'(−a_q)`, with `e^{a_q}` capped
/// at `e^{EXP_CAP}` (where `F` is already 0).
fn hermite_expectations(offsets: impl Iterator<Item = f64>, w: &[f64]) -> (f64, f64) {
    let (mut cdf, mut pdf) = (0.0, 0.0);
    for (a, wq) in offsets.zip(w) {
        let e = a.min(EXP_CAP).exp();
        let f = (-e).exp();
        cdf += wq * f;
        pdf += wq * e * f;
    }
    (cdf, pdf)
}

/// `p_c += q_c Π_{j<c} Q_j Π_{j>c} Q_j` at one point (prefix and suffix
/// products, no division by a `Q_j` that may be 0).
fn accumulate_point(cdf: &[f64], pdf: &[f64], suffix: &mut [f64], p: &mut [f64]) {
    let c = cdf.len();
    suffix[c] = 1.0;
    for j in (0..c).rev() {
        suffix[j] = suffix[j + 1] * cdf[j];
    }
    let mut prefix = 1.0;
    for (j, pj) in p.iter_mut().enumerate() {
        *pj += pdf[j] * prefix * suffix[j + 1];
        prefix *= cdf[j];
    }
}

/// `p` (length `C`) for the means `mu` and variances `var` of one row:
/// [`wide_row`] when a latent standard deviation is at least [`WIDE_SD`]
/// and the row's range allows, else the trapezoid rule of step
/// [`STEP`] on each span of [`spans`], in coordinates relative to the
/// span's anchor, over the Gauss–Hermite expectations.
fn row(mu: &[f64], var: &[f64], p: &mut [f64], s: &mut Scratch) {
    if var.iter().any(|&v| v >= WIDE_SD * WIDE_SD) && wide_row(mu, var, p, s) {
        return;
    }
    let (_, w) = hermite_rule();
    let c = mu.len();
    spans(mu, var, s);
    s.cdf.resize(c, 0.0);
    s.pdf.resize(c, 0.0);
    s.suffix.resize(c + 1, 1.0);
    p.fill(0.0);
    for k in 0..s.spans.len() {
        let span = s.spans[k];
        s.local.clear();
        s.local.extend(s.nodes.iter().map(|a| a - span.anchor));
        // At most (LEFT + RIGHT) · C · NODES / STEP points in all.
        let points = ((span.end - span.start) / STEP).ceil() as usize + 1;
        for i in 0..points {
            let t = span.start + i as f64 * STEP;
            for j in 0..c {
                let nodes = s.local[j * NODES..(j + 1) * NODES].iter().map(|a| a - t);
                (s.cdf[j], s.pdf[j]) = hermite_expectations(nodes, w);
            }
            accumulate_point(&s.cdf, &s.pdf, &mut s.suffix, p);
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
            format!("latent variances must be >= 0, got {v:?}"),
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
