//! The sparse-GP objective from the streamed statistics: VFE's collapsed
//! bound or FITC's log marginal likelihood, the predictive pieces, and the
//! adjoints (derivatives with respect to the statistics and `K_uu`) that
//! the gradient's second pass contracts (see docs/math/sparse_gp.rst,
//! sections VFE, FITC and Gradients).
//!
//! Both methods share the stable form with `L = chol(K_uu)`:
//! `C = L^{−1} S L^{−ᵀ}` (VFE: divided by `σ_n²`), `B = I + C`,
//! `L_B = chol(B)` (`B ⪰ I`, well conditioned), `c = L_B^{−1} L^{−1} b`
//! (VFE: divided by `σ_n²`), where `S`, `b` are the (weighted) statistics
//! of [`SparseStats`] and `b` uses the centered targets.
//!
//! VFE: `F = −(N/2) ln 2π − Σ ln (L_B)_ii − (N/2) ln σ_n² − yᵀy/(2σ_n²)
//! + ½ cᵀc − Σ k_ff/(2σ_n²) + ½ tr C`.
//!
//! FITC: `ln p = −(N/2) ln 2π − Σ ln (L_B)_ii − ½ Σ ln Λ_i − ½ yᵀΛ^{−1}y
//! + ½ cᵀc`.
//!
//! Derivatives (with `Σ = K_uu + S/σ_n²` for VFE, `K_uu + S` for FITC, and
//! `α = Σ^{−1} b`): VFE
//! `∂F/∂S = (K_uu^{−1} − Σ^{−1})/(2σ_n²) − ααᵀ/(2σ_n⁶)`,
//! `∂F/∂b = α/σ_n⁴`,
//! `∂F/∂K_uu = ½(K_uu^{−1} − Σ^{−1}) − ααᵀ/(2σ_n⁴) − K_uu^{−1} S K_uu^{−1}/(2σ_n²)`;
//! FITC (per row, through `Λ_i`) in [`super::gradient`].

use ndarray::{Array1, Array2, ArrayView1};

use super::prior::InducingPrior;
use super::stats::{Method, SparseStats};
use crate::error::{Error, Result};
use crate::linalg::{as_faer, as_faer_mut, Cholesky};
use crate::threads::Parallelism;

/// `ln 2π`.
const LN_2PI: f64 = 1.837_877_066_409_345_5;

/// The objective at one prior, with what prediction and the gradient need.
#[derive(Clone, Debug)]
pub struct Bound {
    /// VFE's `F` or FITC's `ln p`.
    pub value: f64,
    /// `L_B`.
    pub chol_b: Cholesky,
    /// The predictive-mean weights `Σ^{−1} b` (VFE: `/σ_n²`): `μ* = k_*ᵀ
    /// weights + ȳ`.
    pub weights: Array1<f64>,
    /// The target offset `ȳ` (0 without centering).
    pub y_mean: f64,
    /// The adjoints for the gradient (when requested).
    pub adjoint: Option<Adjoint>,
}

/// Derivatives of the objective with respect to its inputs at one prior
/// (see the module docs), consumed by [`super::gradient`].
#[derive(Clone, Debug)]
pub struct Adjoint {
    /// The method the adjoint belongs to.
    pub method: Method,
    /// VFE: `2 ∂F/∂S` (the data part's `∂F/∂K_fu = 2 K_fu ∂F/∂S + y (∂F/∂b)ᵀ`),
    /// or with [`Adjoint::left_whitened`] `2 (∂F/∂S) L`;
    /// FITC: `B^{−1}` (the pass works in the whitened columns `L^{−1} k_i`).
    pub(crate) left: Array2<f64>,
    /// VFE: whether the second pass multiplies [`Adjoint::left`] with the
    /// whitened columns `L^{−1} k_i` instead of the kernel columns `k_i`.
    /// Statistics whitened for a large `κ(K_uu)` ([`InducingPrior::whiten`])
    /// ask for it: `2 ∂F/∂S` has entries of order `κ/(σ² σ_n²)`, and its
    /// product with `k_i` cancels to order `1/σ_n²`, with rounding errors of
    /// order `κ u` relative; `L^{−ᵀ}` applied to the product with `L^{−1} k_i`
    /// loses only the triangular solves' `√κ u`.
    pub(crate) left_whitened: bool,
    /// VFE: `∂F/∂b`; FITC: `Lᵀβ = B^{−1} L^{−1} b` with `β = Σ^{−1} b`.
    pub(crate) vector: Array1<f64>,
    /// VFE: `∂F/∂K_uu`. FITC: `Lᵀ(∂F/∂K_uu)L` without the rows' part,
    /// which [`super::gradient::finish`] adds before applying `L^{−ᵀ}` and
    /// `L^{−1}` once: the two parts are matrices of order `κ(K_uu)/σ²` in
    /// kernel space that cancel to order 1, while whitened they are of
    /// order 1 themselves.
    pub(crate) d_kuu: Array2<f64>,
    /// VFE: the whole `∂F/∂ln σ²` (`K_uu`'s part included); FITC: 0 (it
    /// comes from the rows and `K_uu`, added by [`super::gradient::finish`]).
    pub(crate) d_log_variance: f64,
    /// `∂F/∂ln σ_n²` (FITC: 0, all of it comes from the rows).
    pub(crate) d_log_noise: f64,
}

/// `L^{−1} X L^{−ᵀ}` (`lower`) or `L^{−ᵀ} X L^{−1}` for a symmetric `X`,
/// symmetrized.
pub(crate) fn sandwich(
    chol: &Cholesky,
    x: &Array2<f64>,
    lower: bool,
    par: Parallelism,
) -> Array2<f64> {
    let solve = |a: faer::MatMut<'_, f64>| {
        if lower {
            chol.solve_lower_in_place(a, par);
        } else {
            chol.solve_upper_in_place(a, par);
        }
    };
    let mut a = x.clone();
    solve(as_faer_mut(a.view_mut()));
    // (L^{−1} X)ᵀ = X L^{−ᵀ}; solving on the transposed view leaves the
    // transpose of L^{−1} X L^{−ᵀ} in `a`, the same matrix up to rounding.
    solve(as_faer_mut(a.view_mut().reversed_axes()));
    symmetrize(&mut a);
    a
}

/// `a ← (a + aᵀ)/2` for a square `a`, in square tiles (a row of one tile
/// meets a column of its mirror: tiles keep both in the cache).
fn symmetrize(a: &mut Array2<f64>) {
    const TILE: usize = 32;
    let n = a.nrows();
    if !a.is_standard_layout() {
        *a = a.as_standard_layout().into_owned();
    }
    let v = a.as_slice_mut().unwrap_or_default();
    for ib in (0..n).step_by(TILE) {
        for jb in (0..=ib).step_by(TILE) {
            for i in ib..(ib + TILE).min(n) {
                for j in jb..(jb + TILE).min(i) {
                    let m = 0.5 * (v[i * n + j] + v[j * n + i]);
                    v[i * n + j] = m;
                    v[j * n + i] = m;
                }
            }
        }
    }
}

/// `L^{−1} v` (`lower`) or `L^{−ᵀ} v`.
pub(crate) fn solve_vec(
    chol: &Cholesky,
    v: ArrayView1<'_, f64>,
    lower: bool,
    par: Parallelism,
) -> Array1<f64> {
    let mut x = v.to_owned();
    let n = x.len();
    let m = faer::MatMut::from_column_major_slice_mut(x.as_slice_mut().unwrap_or_default(), n, 1);
    if lower {
        chol.solve_lower_in_place(m, par);
    } else {
        chol.solve_upper_in_place(m, par);
    }
    x
}

/// The statistics whitened by `L = chol(K_uu)`: `(L^{−1} S L^{−ᵀ}, L^{−1} b)`
/// for the Gram `S` of `stats` and its (centered) vector `b`.
pub(crate) fn whitened(
    stats: &SparseStats,
    b: Array1<f64>,
    l: &Cholesky,
    par: Parallelism,
) -> (Array2<f64>, Array1<f64>) {
    let gram = stats.gram_symmetric();
    if stats.whitened {
        (gram, b)
    } else {
        (
            sandwich(l, &gram, true, par),
            solve_vec(l, b.view(), true, par),
        )
    }
}

/// The excess of `tr(Q_ff)` over `Σ k_ff` that [`bound`] accepts as
/// rounding, in the bound's units per row (`excess / 2σ_n²` nats over
/// `N`).
pub(crate) const TRACE_TOL: f64 = 1e-4;

/// The objective of `stats` under `prior` (and, with `want_grad`, its
/// adjoints). `center` subtracts the training mean of the targets.
///
/// # Errors
/// [`Error::ShapeMismatch`] when the statistics have another `M`;
/// [`Error::InvalidParameter`] when they hold no row;
/// [`Error::InducingNotPositiveDefinite`] when `B` cannot be factored
/// (`B ⪰ I` in exact arithmetic, but the rounding of `S` reaches it
/// through `L^{−1}`, so `K_uu` is numerically singular at its jitter), or
/// when VFE's `tr(Q_ff)` exceeds `Σ k_ff` by more than `2σ_n² · 1e−4 N`,
/// or the data fit `yᵀ(Q_ff + Λ)^{−1} y` is below 0 by more than
/// `2 · 1e−4 N` (the same cause); an optimizer then backs off.
pub fn bound(
    stats: &SparseStats,
    prior: &InducingPrior,
    center: bool,
    want_grad: bool,
    par: Parallelism,
) -> Result<Bound> {
    let m = prior.n_inducing();
    if stats.n_inducing() != m {
        return Err(Error::ShapeMismatch {
            name: "number of inducing inputs of the statistics",
            expected: m,
            got: stats.n_inducing(),
        });
    }
    if stats.n == 0 {
        return Err(Error::invalid("X", "needs at least one training row"));
    }
    let vfe = stats.method == Method::Vfe;
    let s = prior.noise_variance;
    let n = stats.n as f64;
    let (b, yy) = stats.centered(center);
    let y_mean = if center { stats.y_mean() } else { 0.0 };
    let l = &prior.chol;
    // C = L^{−1} S L^{−ᵀ} (VFE: / σ_n²), B = I + C.
    let (mut cmat, e) = whitened(stats, b, l, par);
    if vfe {
        cmat.mapv_inplace(|v| v / s);
    }
    let mut bmat = cmat.clone();
    bmat.diag_mut().mapv_inplace(|v| v + 1.0);
    let chol_b = Cholesky::new(as_faer(bmat.view()), par).map_err(|e| match e {
        Error::NotPositiveDefinite { .. } => Error::InducingNotPositiveDefinite {
            m,
            jitter: prior.jitter(),
        },
        other => other,
    })?;
    let scale = if vfe { 1.0 / s } else { 1.0 };
    let c = solve_vec(&chol_b, e.view(), true, par) * scale;
    // tr(Q_ff) = σ_n² tr(C) ≤ Σ k_ff in exact arithmetic. Past that (by
    // more than rounding), L^{−1} has lost the accuracy the trace term
    // needs (K_uu numerically singular for its own jitter), and the
    // negative trace term would reward the rounding error by 1/σ_n².
    if vfe && (s * cmat.diag().sum() - stats.kff_sum) / (2.0 * s) > TRACE_TOL * n {
        return Err(Error::InducingNotPositiveDefinite {
            m,
            jitter: prior.jitter(),
        });
    }
    let half_log_det_b = 0.5 * chol_b.log_det();
    let ctc = c.dot(&c);
    // The data fit yᵀ(Q_ff + Λ)^{−1} y = yᵀΛ^{−1}y − cᵀc is ≥ 0 in exact
    // arithmetic (Λ = σ_n² I for VFE). Below 0 by more than rounding, the
    // same loss of accuracy has reached c (the bound would reward it).
    let data_fit = if vfe { yy / s } else { yy } - ctc;
    if data_fit / 2.0 < -TRACE_TOL * n {
        return Err(Error::InducingNotPositiveDefinite {
            m,
            jitter: prior.jitter(),
        });
    }
    let value = if vfe {
        -0.5 * n * LN_2PI - half_log_det_b - 0.5 * n * s.ln() - yy / (2.0 * s) + 0.5 * ctc
            - stats.kff_sum / (2.0 * s)
            + 0.5 * cmat.diag().sum()
    } else {
        -0.5 * n * LN_2PI - half_log_det_b - 0.5 * stats.log_lambda_sum - 0.5 * yy + 0.5 * ctc
    };
    // Σ^{−1} b = L^{−ᵀ} L_B^{−ᵀ} c · (VFE: σ_n²).
    let t = solve_vec(&chol_b, c.view(), false, par);
    let alpha = solve_vec(l, t.view(), false, par) / scale;
    let weights = &alpha * scale;
    let adjoint = if want_grad {
        Some(adjoint(
            stats, prior, &cmat, &chol_b, &alpha, &e, &t, yy, par,
        ))
    } else {
        None
    };
    Ok(Bound {
        value,
        chol_b,
        weights,
        y_mean,
        adjoint,
    })
}

/// The adjoints of [`bound`] (see the module docs), formed from the
/// whitened statistics (`C`, `e = L^{−1} b`, `β̃ = B^{−1} e` (VFE: `/σ_n²`))
/// with `L^{−1}` applied last: matrices such as `K_uu^{−1}` and `Σ^{−1}`
/// have entries of order `κ(K_uu)/σ²`, and sums or differences of them
/// (or of their products with the kernel-space `S` and `b`) cancel to
/// terms of order 1, losing the digits the gradient needs at large `κ`.
///
/// VFE: with `H = B^{−1}C² + β̃β̃ᵀ` (symmetric: `B = I + C` and `C`
/// commute), `2 ∂F/∂S = L^{−ᵀ}(I − B^{−1} − β̃β̃ᵀ)L^{−1}/σ_n²`,
/// `∂F/∂K_uu = −½ L^{−ᵀ} H L^{−1}`, and, since the kernel variance scales
/// `K_uu` (its jitter included), `K_uf` and `Σ k_ff` alike, the whole
/// `∂F/∂ln σ² = ½ tr H − Σ k_ff/(2σ_n²)`.
#[allow(clippy::too_many_arguments)]
fn adjoint(
    stats: &SparseStats,
    prior: &InducingPrior,
    cmat: &Array2<f64>,
    chol_b: &Cholesky,
    alpha: &Array1<f64>,
    e: &Array1<f64>,
    beta: &Array1<f64>,
    yy: f64,
    par: Parallelism,
) -> Adjoint {
    let l = &prior.chol;
    let s = prior.noise_variance;
    let n = stats.n as f64;
    match stats.method {
        Method::Vfe => {
            let WhitenedAdjoint { i_minus, bbt, h } = WhitenedAdjoint::new(cmat, chol_b, beta, par);
            // 2 ∂F/∂S, or its product with L for whitened columns.
            let p0 = &i_minus - &bbt;
            let left_whitened = stats.whitened;
            let left = if left_whitened {
                let mut a = p0;
                l.solve_upper_in_place(as_faer_mut(a.view_mut()), par);
                a / s
            } else {
                sandwich(l, &p0, false, par) / s
            };
            let d_kuu = sandwich(l, &h, false, par) * -0.5;
            let tr_h = h.diag().sum();
            // ∂F/∂σ_n² (see docs/math/sparse_gp.rst, section Gradients),
            // with tr(B^{−1}C) − tr C = −tr(B^{−1}C²).
            let tr_binv_c2 = tr_h - beta.dot(beta);
            let d_noise = -tr_binv_c2 / (2.0 * s) - n / (2.0 * s) + yy / (2.0 * s * s)
                - e.dot(beta) / (s * s)
                + beta.dot(&cmat.dot(beta)) / (2.0 * s)
                + stats.kff_sum / (2.0 * s * s);
            Adjoint {
                method: Method::Vfe,
                left,
                left_whitened,
                vector: alpha / (s * s),
                d_kuu,
                d_log_variance: 0.5 * tr_h - stats.kff_sum / (2.0 * s),
                d_log_noise: s * d_noise,
            }
        }
        Method::Fitc => {
            let binv = chol_b.inverse(par);
            // K_uu^{−1} − Σ^{−1} = L^{−ᵀ}(I − B^{−1})L^{−1} and α = L^{−ᵀ}β̃:
            // Lᵀ(∂F/∂K_uu)L without the rows' part is ½(I − B^{−1} − β̃β̃ᵀ).
            let mut d_kuu = (&binv + &outer(beta)) * -0.5;
            d_kuu.diag_mut().mapv_inplace(|v| v + 0.5);
            Adjoint {
                method: Method::Fitc,
                left: binv,
                left_whitened: false,
                vector: beta.clone(),
                d_kuu,
                d_log_variance: 0.0,
                d_log_noise: 0.0,
            }
        }
    }
}

/// The whitened matrices of VFE's adjoints (see [`adjoint`]) for `C`, the
/// factor of `B = I + C` and `β̃ = B^{−1}e`: `I − B^{−1}`, `β̃β̃ᵀ` and
/// `H = B^{−1}C² + β̃β̃ᵀ`, with which `2 ∂F/∂S = L^{−ᵀ}(I − B^{−1} −
/// β̃β̃ᵀ)L^{−1}` and `∂F/∂K_uu = −½ L^{−ᵀ}HL^{−1}` (VFE: the first over
/// `σ_n²`; the sparse classifier's classes: noise-weighted statistics).
pub(crate) struct WhitenedAdjoint {
    /// `I − B^{−1}`.
    pub(crate) i_minus: Array2<f64>,
    /// `β̃β̃ᵀ`.
    pub(crate) bbt: Array2<f64>,
    /// `H`.
    pub(crate) h: Array2<f64>,
}

impl WhitenedAdjoint {
    /// The three matrices (`O(M³)`).
    pub(crate) fn new(
        cmat: &Array2<f64>,
        chol_b: &Cholesky,
        beta: &Array1<f64>,
        par: Parallelism,
    ) -> Self {
        let mut i_minus = -chol_b.inverse(par);
        i_minus.diag_mut().mapv_inplace(|v| v + 1.0);
        let bbt = outer(beta);
        // B^{−1}C² = (I − B^{−1}) C (B and C commute).
        let mut h = i_minus.dot(cmat);
        symmetrize(&mut h);
        h += &bbt;
        Self { i_minus, bbt, h }
    }
}

/// `v vᵀ`.
fn outer(v: &Array1<f64>) -> Array2<f64> {
    let n = v.len();
    Array2::from_shape_fn((n, n), |(i, j)| v[i] * v[j])
}
