//! Kernel blocks of the sparse GP: `k(Z, X)` for a row chunk of `X`
//! (`M × n`, one row per inducing input, contiguous over the chunk), with
//! the slopes `σ² ψ(ρ)` of [`Kernel::profile_slope`] that the gradients
//! contract (see docs/math/sparse_gp.rst, section Gradients).
//!
//! Distances are summed pairwise per dimension over the scaled inputs
//! (`u = (x − c)/l`, one length scale or one per dimension, `c` a center
//! near the inputs that keeps the digits of their differences, see
//! [`crate::kernels::midrange`]): identical points are
//! at distance exactly 0 (no `‖u‖² + ‖w‖² − 2uᵀw` cancellation), which the
//! `Z = X` oracles and the non-smooth kernels at 0 need.

use ndarray::{Array2, ArrayView2};
use rayon::prelude::*;

use crate::gp::cluster::sq_dists_t;
use crate::kernels::{divide_by, midrange, Kernel, StationaryKernel};
use crate::threads::Parallelism;

/// `((x − c) / l)ᵀ`, `d × n` row-major: dimension `a` of every row
/// contiguous, the layout [`cross_block`] reads. `c` is the same for every
/// chunk of a pass (the sparse GP's: the [`midrange`] of the inducing
/// inputs).
pub(crate) fn scaled_t(
    params: &StationaryKernel,
    x: ArrayView2<'_, f64>,
    center: &[f64],
) -> Array2<f64> {
    let (n, d) = x.dim();
    let mut ut = Array2::<f64>::zeros((d, n));
    for (a, (mut row, &c)) in ut.rows_mut().into_iter().zip(center).enumerate() {
        let l = params.length_scale_of(a);
        row.zip_mut_with(&x.column(a), |o, &v| *o = divide_by(v - c, l));
    }
    ut
}

/// The distances `ρ` of the scaled points `ut` (`d × n` row-major, `n` =
/// `out.len()`) to one scaled point `w`: `Σ_a (u_a − w_a)²` (Euclidean
/// kernels, through [`sq_dists_t`]) or `Σ_a |u_a − w_a|` (Laplacian).
fn distances(kernel: Kernel, ut: &[f64], w: &[f64], out: &mut [f64]) {
    let n = out.len();
    if kernel.uses_l1() {
        l1_dists_t(ut, n, w, out);
    } else {
        sq_dists_t(ut, n, w, out);
    }
}

/// `out[i] = Σ_a |xt[a·stride + i] − c[a]|`, vectorized over `i`.
#[inline(always)]
fn l1_dists_body(xt: &[f64], stride: usize, c: &[f64], out: &mut [f64]) {
    out.fill(0.0);
    for (a, &ca) in c.iter().enumerate() {
        let col = &xt[a * stride..a * stride + out.len()];
        for (o, &v) in out.iter_mut().zip(col) {
            *o += (v - ca).abs();
        }
    }
}

widest_simd! {
    /// [`l1_dists_body`] with the widest SIMD the CPU offers.
    fn l1_dists_t(xt: &[f64], stride: usize, c: &[f64], out: &mut [f64]) = l1_dists_body;
}

/// Turns distances into `σ² κ(ρ)` in place and, with `slope`, writes
/// `σ² ψ(ρ)` there (see [`Kernel::profile_and_slope`]).
#[inline(always)]
fn profile_body(kernel: Kernel, variance: f64, dist: &mut [f64], slope: Option<&mut [f64]>) {
    #[inline(always)]
    fn apply(
        f: impl Fn(f64) -> (f64, f64),
        variance: f64,
        dist: &mut [f64],
        slope: Option<&mut [f64]>,
    ) {
        match slope {
            Some(s) => {
                for (d, s) in dist.iter_mut().zip(s.iter_mut()) {
                    let (k, p) = f(*d);
                    *d = variance * k;
                    *s = variance * p;
                }
            }
            None => {
                for d in dist.iter_mut() {
                    *d = variance * f(*d).0;
                }
            }
        }
    }
    // One loop per kernel, so the kernel is a constant inside it.
    match kernel {
        Kernel::Gaussian => apply(
            |r| Kernel::Gaussian.profile_and_slope(r),
            variance,
            dist,
            slope,
        ),
        Kernel::Laplacian => apply(
            |r| Kernel::Laplacian.profile_and_slope(r),
            variance,
            dist,
            slope,
        ),
        Kernel::Matern12 => apply(
            |r| Kernel::Matern12.profile_and_slope(r),
            variance,
            dist,
            slope,
        ),
        Kernel::Matern32 => apply(
            |r| Kernel::Matern32.profile_and_slope(r),
            variance,
            dist,
            slope,
        ),
        Kernel::Matern52 => apply(
            |r| Kernel::Matern52.profile_and_slope(r),
            variance,
            dist,
            slope,
        ),
    }
}

widest_simd! {
    /// [`profile_body`] with the widest SIMD the CPU offers.
    fn profile(kernel: Kernel, variance: f64, dist: &mut [f64], slope: Option<&mut [f64]>) =
        profile_body;
}

/// Rows (inducing inputs) per parallel task of the block loops.
const ROWS_PER_TASK: usize = 8;

/// Runs `f(m, row m of a, row m of b)` for every row `m` of the `M × n`
/// row-major buffers `a` and (when given) `b`, in parallel over blocks of
/// rows when `par` allows (each row is computed alone, so the result does
/// not depend on the thread count).
fn for_rows(
    n: usize,
    a: &mut [f64],
    b: Option<&mut [f64]>,
    par: Parallelism,
    f: impl Fn(usize, &mut [f64], Option<&mut [f64]>) + Sync,
) {
    if n == 0 {
        return;
    }
    let task = |(t, (ac, bc)): (usize, (&mut [f64], Option<&mut [f64]>))| {
        let mut bc = bc;
        for (r, ar) in ac.chunks_mut(n).enumerate() {
            let br = bc.as_deref_mut().map(|b| &mut b[r * n..(r + 1) * n]);
            f(t * ROWS_PER_TASK + r, ar, br);
        }
    };
    let step = ROWS_PER_TASK * n;
    match b {
        Some(b) => {
            if par.is_parallel() {
                a.par_chunks_mut(step)
                    .zip(b.par_chunks_mut(step).map(Some))
                    .enumerate()
                    .for_each(task);
            } else {
                a.chunks_mut(step)
                    .zip(b.chunks_mut(step).map(Some))
                    .enumerate()
                    .for_each(task);
            }
        }
        None => {
            if par.is_parallel() {
                a.par_chunks_mut(step)
                    .map(|c| (c, None))
                    .enumerate()
                    .for_each(task);
            } else {
                a.chunks_mut(step)
                    .map(|c| (c, None))
                    .enumerate()
                    .for_each(task);
            }
        }
    }
}

/// The block `out[m·n + i] = k(x_i, z_m)` (`M × n` row-major) from the
/// scaled inducing inputs `w` (`M × d`) and the scaled chunk `ut` (`d × n`
/// row-major, [`scaled_t`]); with `slope`, also
/// `slope[m·n + i] = σ² ψ(ρ_mi)`. Parallel over inducing inputs.
pub(crate) fn cross_block(
    params: &StationaryKernel,
    w: ArrayView2<'_, f64>,
    ut: ArrayView2<'_, f64>,
    out: &mut [f64],
    slope: Option<&mut [f64]>,
    par: Parallelism,
) {
    let n = ut.ncols();
    let ut = ut.as_standard_layout();
    let u = ut.as_slice().unwrap_or_default();
    let w = w.as_standard_layout();
    let d = w.ncols();
    let ws = w.as_slice().unwrap_or_default();
    let (kernel, variance) = (params.kernel, params.variance);
    for_rows(n, out, slope, par, |m, row, s| {
        distances(kernel, u, &ws[m * d..(m + 1) * d], row);
        profile(kernel, variance, row, s);
    });
}

/// Dimensions per group of [`contract`]: one 512-bit vector of `f64`.
const DIM_LANES: usize = 8;

/// The adjoints of one inducing input's row of a block, `g_i = (a_i +
/// β y_i) s_i` (`offset = Some((β, y))`) or `a_i s_i`: the adjoint `a` of
/// the kernel values plus, for VFE, the targets' part, times the slope `s`.
#[derive(Clone, Copy)]
struct AdjointRow<'a> {
    adjoint: &'a [f64],
    slope: &'a [f64],
    offset: Option<(f64, &'a [f64])>,
}

/// `(Σ_i g_i δ_ia e'(δ_ia), Σ_i g_i e'(δ_ia))` for the `DIM_LANES`
/// dimensions `a` of one group at once (`δ_ia = u_ia − w_a`; `e'(δ) = δ`,
/// the factor 2 of `2δ` applied by the caller, or `sign(δ)`, 0 at 0).
/// `rows` holds the scaled points `n × dp` row-major and `col` is the
/// group's first column. Each lane adds its terms one row after another,
/// in row order: a vector of independent running sums, the same bits as
/// a scalar loop over the rows for each dimension.
#[inline(always)]
fn contract_group<const EUCLIDEAN: bool>(
    rows: &[f64],
    dp: usize,
    col: usize,
    w: &[f64; DIM_LANES],
    g: AdjointRow<'_>,
) -> ([f64; DIM_LANES], [f64; DIM_LANES]) {
    let (mut sl, mut sz) = ([0.0; DIM_LANES], [0.0; DIM_LANES]);
    let mut add = |u: &[f64], gi: f64| {
        for j in 0..DIM_LANES {
            let t = u[j] - w[j];
            if EUCLIDEAN {
                let gt = gi * t;
                sz[j] += gt;
                sl[j] += gt * t;
            } else {
                sl[j] += gi * t.abs();
                sz[j] += if t > 0.0 {
                    gi
                } else if t < 0.0 {
                    -gi
                } else {
                    0.0
                };
            }
        }
    };
    let points = rows.chunks_exact(dp).map(|r| &r[col..col + DIM_LANES]);
    match g.offset {
        Some((beta, y)) => {
            for (((u, &a), &s), &yi) in points.zip(g.adjoint).zip(g.slope).zip(y) {
                add(u, (a + beta * yi) * s);
            }
        }
        None => {
            for ((u, &a), &s) in points.zip(g.adjoint).zip(g.slope) {
                add(u, a * s);
            }
        }
    }
    (sl, sz)
}

/// `Σ_i g_i δ_ia e'(δ_ia)` and `Σ_i g_i e'(δ_ia)` for each dimension `a`
/// (`e'` of [`Kernel::distance_slope`]) into `by_ls[a]` and `by_z[a]`
/// (`dp` entries each), for the padded scaled points `rows` (`n × dp`)
/// and the padded scaled inducing input `w` (`dp`).
#[inline(always)]
fn contract_body(
    euclidean: bool,
    rows: &[f64],
    w: &[f64],
    g: AdjointRow<'_>,
    by_ls: &mut [f64],
    by_z: &mut [f64],
) {
    let dp = w.len();
    for col in (0..dp).step_by(DIM_LANES) {
        let mut wg = [0.0; DIM_LANES];
        wg.copy_from_slice(&w[col..col + DIM_LANES]);
        let (sl, sz) = if euclidean {
            let (sl, sz) = contract_group::<true>(rows, dp, col, &wg, g);
            (sl.map(|v| 2.0 * v), sz.map(|v| 2.0 * v))
        } else {
            contract_group::<false>(rows, dp, col, &wg, g)
        };
        by_ls[col..col + DIM_LANES].copy_from_slice(&sl);
        by_z[col..col + DIM_LANES].copy_from_slice(&sz);
    }
}

widest_simd! {
    /// [`contract_body`] with the widest SIMD the CPU offers.
    fn contract_row(
        euclidean: bool,
        rows: &[f64],
        w: &[f64],
        g: AdjointRow<'_>,
        by_ls: &mut [f64],
        by_z: &mut [f64],
    ) = contract_body;
}

/// The rows of `a` (`n × d`, any layout) zero padded to `dp ≥ d` columns,
/// `n × dp` row-major: the layout [`contract_body`] reads.
fn padded_rows(a: ArrayView2<'_, f64>, dp: usize) -> Vec<f64> {
    let mut rows = vec![0.0; a.nrows() * dp];
    for (r, src) in rows.chunks_exact_mut(dp.max(1)).zip(a.rows()) {
        for (o, &v) in r.iter_mut().zip(src) {
            *o = v;
        }
    }
    rows
}

/// Contracts a block of adjoints with the kernel's derivatives: with
/// `g[m·n + i] = (adjoint[m·n + i] + β_m y_i) · slope[m·n + i]` (`offset
/// = Some((β, y))`; without it the `β y` term is absent), the adjoint of
/// the block times its [`cross_block`] slope `σ² ψ(ρ_mi)`, returns
///
/// - `by_ls[a] = Σ_{m,i} g_mi δ_mia e'(δ_mia)`, the block's part of
///   `∂F/∂ln l_a` (sum over `a` for one shared length scale), and
/// - `by_z[m, a] = Σ_i g_mi e'(δ_mia) / l_a`, its part of `∂F/∂z_ma`
///   (`z_m` as the kernel's second argument),
///
/// with `δ_mi = (x_i − z_m)/l` (see [`Kernel::profile_slope`]). Parallel
/// over inducing inputs; every sum runs over the rows in order and `by_ls`
/// over the inducing inputs in order (the same bits for any thread count
/// and SIMD width).
pub(crate) fn contract(
    params: &StationaryKernel,
    w: ArrayView2<'_, f64>,
    ut: ArrayView2<'_, f64>,
    adjoint: &[f64],
    slope: &[f64],
    offset: Option<(&[f64], &[f64])>,
    par: Parallelism,
) -> (Vec<f64>, Array2<f64>) {
    let (m, d) = w.dim();
    let n = ut.ncols();
    let dp = d.div_ceil(DIM_LANES) * DIM_LANES;
    let rows = padded_rows(ut.t(), dp);
    let wp = padded_rows(w, dp);
    let euclidean = !params.kernel.uses_l1();
    // Per inducing input: dp entries of by_ls, then dp of by_z.
    let mut per = vec![0.0; m * 2 * dp];
    let row = |(k, out): (usize, &mut [f64])| {
        let (ls, z) = out.split_at_mut(dp);
        let g = AdjointRow {
            adjoint: &adjoint[k * n..(k + 1) * n],
            slope: &slope[k * n..(k + 1) * n],
            offset: offset.map(|(beta, y)| (beta[k], y)),
        };
        if n > 0 {
            contract_row(euclidean, &rows, &wp[k * dp..(k + 1) * dp], g, ls, z);
        }
    };
    if d > 0 {
        if par.is_parallel() {
            per.par_chunks_mut(2 * dp).enumerate().for_each(row);
        } else {
            per.chunks_mut(2 * dp).enumerate().for_each(row);
        }
    }
    let mut by_ls = vec![0.0; d];
    let mut by_z = Array2::<f64>::zeros((m, d));
    for (k, p) in per.chunks(2 * dp.max(1)).enumerate().take(m) {
        for a in 0..d {
            by_ls[a] += p[a];
            by_z[(k, a)] = p[dp + a] / params.length_scale_of(a);
        }
    }
    (by_ls, by_z)
}

/// `Σ_a by_ls[a]` for one shared length scale, `by_ls` itself for one per
/// dimension: the gradient with respect to the model's log length scales.
pub(crate) fn fold_length_scales(params: &StationaryKernel, by_ls: &[f64]) -> Vec<f64> {
    if params.length_scale.len() == 1 {
        vec![by_ls.iter().sum()]
    } else {
        by_ls.to_vec()
    }
}

/// `k(a, b)` (`|a| × |b|`) of unscaled inputs, centered on the
/// [`midrange`] of `b`.
pub fn kernel_matrix(
    params: &StationaryKernel,
    a: ArrayView2<'_, f64>,
    b: ArrayView2<'_, f64>,
    par: Parallelism,
) -> Array2<f64> {
    let center = midrange(b);
    let wa = params.scale(a, &center);
    let ubt = scaled_t(params, b, &center);
    let mut out = vec![0.0; a.nrows() * b.nrows()];
    cross_block(params, wa.view(), ubt.view(), &mut out, None, par);
    Array2::from_shape_vec((a.nrows(), b.nrows()), out).unwrap_or_default()
}

/// The diagonal `k(x, x) = σ²` of a stationary kernel, summed over `n` rows.
pub(crate) fn diag_sum(params: &StationaryKernel, n: usize) -> f64 {
    params.variance * n as f64
}
