//! The gradient's second pass over the rows (see docs/math/sparse_gp.rst,
//! section Gradients): with the adjoints of [`fn@super::bound`] fixed, every
//! row chunk contributes `Σ_{m,i} (∂F/∂K_fu)_im ∂k(x_i, z_m)/∂θ` to the
//! gradient in the log length scales and the inducing inputs (and, for
//! FITC, the per-row terms of `Λ_i`). The sums of [`GradientSums`] add up
//! over chunks and machines; [`finish`] adds the parts through `K_uu` and
//! returns the gradient.
//!
//! VFE: `∂F/∂k_i = 2 (∂F/∂S) k_i + (∂F/∂b) y_i`, one `M × M` by `M × n`
//! product per chunk; with statistics whitened for a large `κ(K_uu)`, a
//! triangular solve first, and the product takes `L^{−1} k_i` (see
//! `Adjoint::left_whitened`).
//!
//! FITC: with `Σ = K_uu + K_uf Λ^{−1} K_fu`, `β = Σ^{−1} b`, `a_i =
//! K_uu^{−1} k_i` and the residual `r_i = y_i − βᵀ k_i`,
//! `g_i = ∂F/∂Λ_i = (k_iᵀ Σ^{−1} k_i + r_i²)/(2Λ_i²) − 1/(2Λ_i)`,
//! `∂F/∂k_i = (β r_i − Σ^{−1} k_i)/Λ_i − 2 g_i a_i`, and the rows add
//! `Σ_i g_i a_i a_iᵀ` to `∂F/∂K_uu`, `Σ_i g_i` to `∂F/∂σ_n²` and
//! `σ² Σ_i g_i` to `∂F/∂ln σ²` (through `k(x_i, x_i) = σ²`). All of it is
//! formed in the whitened columns `L^{−1} k_i` (docs/math/sparse_gp.rst,
//! section FITC): two triangular solves and two `M × M` by `M × n`
//! products per chunk.

use faer::{Accum, MatMut, MatRef};
use ndarray::{Array2, ArrayView1, ArrayView2};

use super::bound::{sandwich, Adjoint};
use super::kernel_blocks::{contract, cross_block, fold_length_scales, scaled_t};
use super::prior::InducingPrior;
use super::stats::{check_chunk, fitc_lambda, Method};
use crate::error::{Error, Result};
use crate::linalg::{as_faer, faer_par};
use crate::threads::Parallelism;

/// The second pass's sums (see the module docs); they add up exactly over
/// row chunks.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct GradientSums {
    /// `Σ_{m,i} (∂F/∂K_fu)_im ∂k(x_i, z_m)/∂ln l_a`, one per dimension.
    pub by_length_scale: Vec<f64>,
    /// `Σ_i (∂F/∂K_fu)_im ∂k(x_i, z_m)/∂z_ma` (`M × d`).
    pub by_inducing: Array2<f64>,
    /// FITC: `Σ_i g_i v_i v_iᵀ` (`M × M`, whitened: `v_i = L^{−1} k_i`,
    /// so `Σ_i g_i a_i a_iᵀ = L^{−ᵀ} row_kuu L^{−1}`); VFE: empty.
    pub row_kuu: Array2<f64>,
    /// FITC: `Σ_i g_i`; VFE: 0.
    pub g_sum: f64,
    /// FITC: `Σ_{m,i} (∂F/∂K_fu)_im K_fu,im`; VFE: 0.
    pub fk_sum: f64,
}

impl GradientSums {
    /// Empty sums for `M` inducing inputs in `d` dimensions.
    pub fn new(method: Method, n_inducing: usize, d: usize) -> Self {
        let kuu = match method {
            Method::Vfe => 0,
            Method::Fitc => n_inducing,
        };
        Self {
            by_length_scale: vec![0.0; d],
            by_inducing: Array2::zeros((n_inducing, d)),
            row_kuu: Array2::zeros((kuu, kuu)),
            g_sum: 0.0,
            fk_sum: 0.0,
        }
    }

    /// Adds the sums of other rows.
    ///
    /// # Errors
    /// [`Error::ShapeMismatch`] for sums of another shape.
    pub fn merge(&mut self, other: &GradientSums) -> Result<()> {
        let (mine, theirs) = (self.by_inducing.dim(), other.by_inducing.dim());
        for (name, expected, got) in [
            (
                "number of inducing inputs of the gradient sums to merge",
                mine.0,
                theirs.0,
            ),
            (
                "input dimension of the gradient sums to merge",
                mine.1,
                theirs.1,
            ),
            (
                "number of length scales of the gradient sums to merge",
                self.by_length_scale.len(),
                other.by_length_scale.len(),
            ),
            (
                "size of the FITC row sums of the gradient sums to merge",
                self.row_kuu.len(),
                other.row_kuu.len(),
            ),
        ] {
            Error::check_sizes(expected, [(name, got)])?;
        }
        for (a, b) in self.by_length_scale.iter_mut().zip(&other.by_length_scale) {
            *a += b;
        }
        self.by_inducing += &other.by_inducing;
        self.row_kuu += &other.row_kuu;
        self.g_sum += other.g_sum;
        self.fk_sum += other.fk_sum;
        Ok(())
    }
}

/// `dst ← lhs · rhs` (`Accum::Replace`) or `dst += lhs · rhs`.
fn matmul(
    dst: MatMut<'_, f64>,
    add: bool,
    lhs: MatRef<'_, f64>,
    rhs: MatRef<'_, f64>,
    par: Parallelism,
) {
    let accum = if add { Accum::Add } else { Accum::Replace };
    faer::linalg::matmul::matmul(dst, accum, lhs, rhs, 1.0, faer_par(par));
}

/// Adds the row chunk `(x, y)` to `sums` (second pass; `y_offset` is the
/// bound's `ȳ`). `scratch` is reused between chunks (`3·M·n` values, FITC
/// `4·M·n`, VFE with the Gaussian or Laplacian kernel `2·M·n`; VFE with
/// `Adjoint::left_whitened` `M·n` more for the whitened columns).
///
/// # Errors
/// As [`super::stats::SparseStats::accumulate`].
#[allow(clippy::too_many_arguments)]
pub fn accumulate_gradient(
    sums: &mut GradientSums,
    adjoint: &Adjoint,
    prior: &InducingPrior,
    x: ArrayView2<'_, f64>,
    y: ArrayView1<'_, f64>,
    y_offset: f64,
    scratch: &mut Vec<f64>,
    par: Parallelism,
) -> Result<()> {
    check_chunk(prior, x, y)?;
    let (m, d) = prior.z.dim();
    if sums.by_inducing.dim() != (m, d) {
        return Err(Error::ShapeMismatch {
            name: "number of inducing inputs of the gradient sums",
            expected: m,
            got: sums.by_inducing.nrows(),
        });
    }
    let n = x.nrows();
    if n == 0 {
        return Ok(());
    }
    let fitc = adjoint.method == Method::Fitc;
    // Where the slope is a constant times the value (Gaussian, Laplacian),
    // VFE, which keeps the block, contracts the block itself and scales the
    // sums (exactly: a power of 2): the slopes are not stored.
    let slope_ratio = prior.params.kernel.constant_slope_ratio().filter(|_| !fitc);
    let from_block = slope_ratio.is_some();
    let whitened = !fitc && adjoint.left_whitened;
    let bufs = if fitc {
        4
    } else {
        2 + usize::from(!from_block) + usize::from(whitened)
    };
    crate::alloc::try_grow(
        scratch,
        "chunk_size",
        "the gradient pass's chunk buffers (n_inducing x chunk rows, float64)",
        &[bufs, m, n],
    )?;
    let (kb, rest) = scratch.split_at_mut(m * n);
    let (sl, rest) = rest.split_at_mut(if from_block { 0 } else { m * n });
    let (wb, rest) = rest.split_at_mut(m * n);
    let ut = scaled_t(&prior.params, x, &prior.center);
    let slope_out = (!from_block).then_some(&mut *sl);
    cross_block(&prior.params, prior.w.view(), ut.view(), kb, slope_out, par);
    let yc: Vec<f64> = y.iter().map(|v| v - y_offset).collect();
    let beta = &adjoint.vector;
    if fitc {
        fitc_row_adjoints(sums, adjoint, prior, &yc, kb, wb, &mut rest[..m * n], par);
    } else {
        // VFE: ∂F/∂k_i = 2 (∂F/∂S) k_i + (∂F/∂b) y_i, the second term
        // added (and the kernel's slope applied) by the contraction below;
        // with `left_whitened`, 2 (∂F/∂S) k_i = left · L^{−1} k_i.
        let columns: &[f64] = if whitened {
            let vb = &mut rest[..m * n];
            vb.copy_from_slice(kb);
            prior
                .chol
                .solve_lower_in_place(MatMut::from_row_major_slice_mut(vb, m, n), par);
            vb
        } else {
            kb
        };
        matmul(
            MatMut::from_row_major_slice_mut(wb, m, n),
            false,
            as_faer(adjoint.left.view()),
            MatRef::from_row_major_slice(columns, m, n),
            par,
        );
    }
    // The adjoint times the kernel's slope, contracted with the distances.
    let offset = (!fitc).then_some((beta.as_slice().unwrap_or_default(), yc.as_slice()));
    let slope: &[f64] = if from_block { kb } else { sl };
    let (by_ls, by_z) = contract(
        &prior.params,
        prior.w.view(),
        ut.view(),
        wb,
        slope,
        offset,
        par,
    );
    let scale = slope_ratio.unwrap_or(1.0);
    for (a, b) in sums.by_length_scale.iter_mut().zip(&by_ls) {
        *a += scale * b;
    }
    sums.by_inducing.scaled_add(scale, &by_z);
    Ok(())
}

/// FITC's per-row part of the second pass for one chunk, in the whitened
/// columns `v_i = L^{−1} k_i` (as its statistics; `B = I + L^{−1} S L^{−ᵀ}`,
/// `β̃ = Lᵀβ`): `Λ_i` as the statistics pass forms it, `k_iᵀΣ^{−1}k_i =
/// v_iᵀB^{−1}v_i`, `βᵀk_i = β̃ᵀv_i`, and `∂F/∂k_i = L^{−ᵀ} t_i` with
/// `t_i = (β̃ r_i − B^{−1} v_i)/Λ_i − 2 g_i v_i` (`Σ^{−1} = L^{−ᵀ}B^{−1}L^{−1}`,
/// `K_uu^{−1} = L^{−ᵀ}L^{−1}`). Products with the explicit `Σ^{−1}` and
/// `K_uu^{−1}` instead lose digits in proportion to the conditioning of
/// `K_uu`. Adds `Σ t_iᵀv_i` (`= Σ (∂F/∂k_i)ᵀk_i`), `Σ g_i` and the whitened
/// `Σ g_i v_i v_iᵀ` to `sums`; leaves `∂F/∂K_fu` in `wb` (`M × n`); `kb`
/// (the kernel block on entry) and `work` are overwritten.
#[allow(clippy::too_many_arguments)]
fn fitc_row_adjoints(
    sums: &mut GradientSums,
    adjoint: &Adjoint,
    prior: &InducingPrior,
    yc: &[f64],
    kb: &mut [f64],
    wb: &mut [f64],
    work: &mut [f64],
    par: Parallelism,
) {
    let n = yc.len();
    let m = prior.n_inducing();
    prior
        .chol
        .solve_lower_in_place(MatMut::from_row_major_slice_mut(kb, m, n), par);
    let v: &[f64] = kb;
    let lam = fitc_lambda(prior, v, n);
    // B^{−1} v_i, into wb.
    matmul(
        MatMut::from_row_major_slice_mut(wb, m, n),
        false,
        as_faer(adjoint.left.view()),
        MatRef::from_row_major_slice(v, m, n),
        par,
    );
    let beta = &adjoint.vector;
    // Per row i: v_iᵀB^{−1}v_i and β̃ᵀv_i.
    let (mut h, mut bv) = (vec![0.0; n], vec![0.0; n]);
    for ((vr, ur), &bm) in v.chunks_exact(n).zip(wb.chunks_exact(n)).zip(beta) {
        for i in 0..n {
            h[i] += vr[i] * ur[i];
            bv[i] += bm * vr[i];
        }
    }
    let res: Vec<f64> = yc.iter().zip(&bv).map(|(y, b)| y - b).collect();
    let g: Vec<f64> = (0..n)
        .map(|i| (h[i] + res[i] * res[i]) / (2.0 * lam[i] * lam[i]) - 1.0 / (2.0 * lam[i]))
        .collect();
    // t_i into wb, g_i v_i into work.
    let mut fk = 0.0;
    for (((t, vr), gv), &bm) in wb
        .chunks_exact_mut(n)
        .zip(v.chunks_exact(n))
        .zip(work.chunks_exact_mut(n))
        .zip(beta)
    {
        for i in 0..n {
            t[i] = (bm * res[i] - t[i]) / lam[i] - 2.0 * g[i] * vr[i];
            fk += t[i] * vr[i];
            gv[i] = g[i] * vr[i];
        }
    }
    sums.fk_sum += fk;
    sums.g_sum += g.iter().sum::<f64>();
    matmul(
        crate::linalg::as_faer_mut(sums.row_kuu.view_mut()),
        true,
        MatRef::from_row_major_slice(work, m, n),
        MatRef::from_row_major_slice(v, m, n).transpose(),
        par,
    );
    // ∂F/∂K_fu = L^{−ᵀ} t.
    prior
        .chol
        .solve_upper_in_place(MatMut::from_row_major_slice_mut(wb, m, n), par);
}

/// The gradient of the objective: `hyper = (∂/∂ln l_1, …, ∂/∂ln l_k,
/// ∂/∂ln σ², ∂/∂ln σ_n²)` and `inducing = ∂/∂Z` (`M × d`).
#[derive(Clone, Debug, PartialEq)]
pub struct Gradient {
    /// With respect to the log hyperparameters.
    pub hyper: Vec<f64>,
    /// With respect to the inducing inputs.
    pub inducing: Array2<f64>,
}

/// Completes the gradient from the second pass's sums: adds the parts
/// through `K_uu` (`⟨∂F/∂K_uu, ∂K_uu/∂θ⟩`, both arguments of the kernel
/// moving with `Z`).
pub fn finish(
    adjoint: &Adjoint,
    prior: &InducingPrior,
    sums: &GradientSums,
    par: Parallelism,
) -> Gradient {
    let (m, _) = prior.z.dim();
    let fitc = adjoint.method == Method::Fitc;
    // FITC: Lᵀ(∂F/∂K_uu)L with the rows' part (Σ g_i a_i a_iᵀ = L^{−ᵀ}(Σ g_i
    // v_i v_iᵀ)L^{−1}), then ∂F/∂K_uu in one sandwich; the kernel variance's
    // K_uu part ⟨L^{−ᵀ}ML^{−1}, LLᵀ⟩ is tr M (K_uu's jitter included).
    let (d_kuu, kuu_part) = if fitc {
        let inner = &adjoint.d_kuu + &sums.row_kuu;
        (
            sandwich(&prior.chol, &inner, false, par),
            inner.diag().sum(),
        )
    } else {
        (adjoint.d_kuu.clone(), 0.0)
    };
    // K_uu without jitter and its slopes, from the scaled inducing inputs.
    let wt = prior.w.t().as_standard_layout().into_owned();
    let mut kuu = vec![0.0; m * m];
    let mut slope = vec![0.0; m * m];
    cross_block(
        &prior.params,
        prior.w.view(),
        wt.view(),
        &mut kuu,
        Some(&mut slope),
        par,
    );
    let d_kuu_std = d_kuu.as_standard_layout();
    let (uu_ls, uu_z) = contract(
        &prior.params,
        prior.w.view(),
        wt.view(),
        d_kuu_std.as_slice().unwrap_or_default(),
        &slope,
        None,
        par,
    );
    let by_ls: Vec<f64> = sums
        .by_length_scale
        .iter()
        .zip(&uu_ls)
        .map(|(a, b)| a + b)
        .collect();
    let mut hyper = fold_length_scales(&prior.params, &by_ls);
    let (v, s) = (prior.params.variance, prior.noise_variance);
    let (d_var, d_noise) = if fitc {
        (sums.fk_sum + v * sums.g_sum + kuu_part, s * sums.g_sum)
    } else {
        (adjoint.d_log_variance, adjoint.d_log_noise)
    };
    hyper.push(d_var);
    hyper.push(d_noise);
    let inducing = &sums.by_inducing + &(uu_z * 2.0);
    Gradient { hyper, inducing }
}
