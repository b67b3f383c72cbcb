//! Initial inducing inputs `Z` of the sparse GP (see docs/math/sparse_gp.rst,
//! section Initialization): the greedy conditional-variance selection of
//! Burt, Rasmussen & van der Wilk (2020) (a pivoted incomplete Cholesky of
//! `K_ff`), k-means (k-means++ then Lloyd), a seeded random subset of the
//! rows, or the caller's array.
//!
//! Every choice is deterministic for a seed. `n_inducing` larger than the
//! number of rows `N` is clamped to `N` (there are only `N` distinct
//! candidates); the greedy selection also stops early, with fewer inputs,
//! once every remaining conditional variance is below `1e−10 σ²` (the
//! chosen inputs already explain the kernel on the candidates).

use ndarray::{Array2, ArrayView2, Axis};
use rand::Rng as _;

use super::kernel_blocks::{cross_block, scaled_t};
use crate::error::{check_finite, Error, Result};
use crate::gp::cluster::{nearest, sq_dists_t};
use crate::kernels::{midrange, StationaryKernel};
use crate::progress::Monitor;
use crate::rng::substream;
use crate::threads::Parallelism;

/// How the inducing inputs are chosen.
#[derive(Clone, Debug, PartialEq)]
pub enum InducingInit {
    /// Greedy conditional variance (pivoted incomplete Cholesky).
    GreedyVariance,
    /// k-means++ seeding, then Lloyd iterations.
    KMeans,
    /// A seeded random subset of the training rows.
    Random,
    /// The caller's inducing inputs (`M × d`).
    Given(Array2<f64>),
}

/// The names [`InducingInit::from_name`] accepts.
pub const INDUCING_NAMES: [&str; 3] = ["greedy_variance", "kmeans", "random"];

impl InducingInit {
    /// Parses a selection name (one of [`INDUCING_NAMES`]).
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] naming `inducing`.
    pub fn from_name(name: &str) -> Result<Self> {
        match name {
            "greedy_variance" => Ok(InducingInit::GreedyVariance),
            "kmeans" => Ok(InducingInit::KMeans),
            "random" => Ok(InducingInit::Random),
            other => Err(Error::invalid(
                "inducing",
                format!(
                    "unknown selection {other:?}; expected one of {INDUCING_NAMES:?} or an array"
                ),
            )),
        }
    }
}

/// The greedy selection considers at most `max(16 M, 4096)` candidate rows
/// (a seeded subset): its cost is `O(n_c M²)` memory traffic and
/// `O(n_c M)` memory.
const GREEDY_CANDIDATES_PER_INPUT: usize = 16;
/// See [`GREEDY_CANDIDATES_PER_INPUT`].
const GREEDY_MIN_CANDIDATES: usize = 4096;
/// k-means runs on at most `max(64 M, 65536)` rows (a seeded subset).
const KMEANS_CANDIDATES_PER_INPUT: usize = 64;
/// See [`KMEANS_CANDIDATES_PER_INPUT`].
const KMEANS_MIN_CANDIDATES: usize = 1 << 16;
/// Lloyd iterations stop when no assignment changes, or after this many.
const KMEANS_MAX_ITER: usize = 100;
/// The greedy selection stops when every conditional variance is below
/// this fraction of the prior variance.
const GREEDY_TOL: f64 = 1e-10;

/// Chooses the inducing inputs: `n_inducing` (clamped to the number of
/// rows) by `init` from the rows of `x`, or the given array checked
/// against `x`'s width. `params` is the kernel of the greedy selection.
/// `monitor` gets the stage "inducing inputs" and is checked once per
/// chosen input (greedy) or Lloyd iteration (k-means).
///
/// # Errors
/// [`Error::InvalidParameter`] for `n_inducing = 0`, no rows, or a given
/// array with no rows; [`Error::ShapeMismatch`] for a given array of the
/// wrong width; [`Error::NonFinite`] for NaN or infinities in a given array
/// or in `x`.
pub fn select_inducing(
    x: ArrayView2<'_, f64>,
    n_inducing: usize,
    init: &InducingInit,
    params: &StationaryKernel,
    seed: u64,
    par: Parallelism,
    monitor: &Monitor,
) -> Result<Array2<f64>> {
    let (n, d) = x.dim();
    if let InducingInit::Given(z) = init {
        if z.ncols() != d {
            return Err(Error::ShapeMismatch {
                name: "number of columns of inducing (the number of features of X)",
                expected: d,
                got: z.ncols(),
            });
        }
        if z.nrows() == 0 {
            return Err(Error::invalid("inducing", "needs at least one row"));
        }
        check_finite("inducing", z.iter())?;
        return Ok(z.clone());
    }
    if n_inducing == 0 {
        return Err(Error::invalid("n_inducing", "must be >= 1, got 0"));
    }
    if n == 0 {
        return Err(Error::invalid("X", "needs at least one training row"));
    }
    // The selections compute with the rows (distances, kernel values); the
    // fits have checked them already, a direct caller may not have.
    if !crate::real::all_finite(x, par) {
        return Err(Error::NonFinite { name: "X" });
    }
    let m = n_inducing.min(n);
    let mut rng = substream(seed, 0);
    match init {
        InducingInit::Random => {
            let idx = rand::seq::index::sample(&mut rng, n, m).into_vec();
            Ok(x.select(Axis(0), &idx))
        }
        InducingInit::KMeans => {
            let c = (KMEANS_CANDIDATES_PER_INPUT * m).max(KMEANS_MIN_CANDIDATES);
            let rows = candidates(&mut rng, n, c);
            kmeans(x.select(Axis(0), &rows).view(), m, &mut rng, par, monitor)
        }
        InducingInit::GreedyVariance => {
            let c = (GREEDY_CANDIDATES_PER_INPUT * m).max(GREEDY_MIN_CANDIDATES);
            let rows = candidates(&mut rng, n, c);
            greedy_variance(x.select(Axis(0), &rows).view(), m, params, par, monitor)
        }
        InducingInit::Given(_) => unreachable!("handled above"),
    }
}

/// The first `min(n, c)` indices of a seeded permutation of `0..n` (all of
/// them, in permuted order, when `c ≥ n`): the candidates and their order,
/// which breaks ties.
fn candidates(rng: &mut crate::rng::Rng, n: usize, c: usize) -> Vec<usize> {
    rand::seq::index::sample(rng, n, c.min(n)).into_vec()
}

/// Greedy conditional-variance selection on the rows of `x` (in their
/// order): start from row 0, then repeatedly add the row of largest
/// conditional variance `k(x,x) − k_u(x)ᵀ K_uu^{−1} k_u(x)` (the first of
/// equal ones), maintained by a pivoted incomplete Cholesky of `K_ff`:
/// pivot `p` adds the row `r = (k(x_p, ·) − Σ_t L_t[p] L_t) / √d_p` to `L`
/// and `d ← d − r²`.
fn greedy_variance(
    x: ArrayView2<'_, f64>,
    m: usize,
    params: &StationaryKernel,
    par: Parallelism,
    monitor: &Monitor,
) -> Result<Array2<f64>> {
    let n = x.nrows();
    monitor.stage("inducing inputs", m as u64);
    let center = midrange(x);
    let ut = scaled_t(params, x, &center);
    let w = params.scale(x, &center);
    let v = params.variance;
    let mut resid = vec![v; n];
    let mut rows: Vec<Vec<f64>> = Vec::with_capacity(m);
    let mut chosen = Vec::with_capacity(m);
    let mut p = 0usize;
    while chosen.len() < m {
        monitor.check()?;
        let dp = resid[p];
        if dp.is_nan() || dp <= GREEDY_TOL * v {
            break;
        }
        let mut r = vec![0.0; n];
        cross_block(
            params,
            w.slice(ndarray::s![p..p + 1, ..]),
            ut.view(),
            &mut r,
            None,
            Parallelism::Sequential,
        );
        let coef: Vec<f64> = rows.iter().map(|l| l[p]).collect();
        let inv = 1.0 / dp.sqrt();
        update_row(&mut r, &rows, &coef, inv, par);
        for (d, &ri) in resid.iter_mut().zip(&r) {
            *d -= ri * ri;
        }
        // The chosen row is explained exactly; rounding must not pick it again.
        resid[p] = 0.0;
        chosen.push(p);
        rows.push(r);
        monitor.advance(1);
        // The next pivot: the first row of largest remaining variance.
        let mut best = (f64::NEG_INFINITY, 0usize);
        for (i, &d) in resid.iter().enumerate() {
            if d > best.0 {
                best = (d, i);
            }
        }
        p = best.1;
    }
    Ok(x.select(Axis(0), &chosen))
}

/// Columns per parallel task of [`update_row`].
const UPDATE_BLOCK: usize = 2048;

/// `r ← (r − Σ_t coef_t rows_t) · inv`, in parallel over column blocks
/// (each entry is the same sequence of operations for any thread count).
fn update_row(r: &mut [f64], rows: &[Vec<f64>], coef: &[f64], inv: f64, par: Parallelism) {
    let block = |(b, rb): (usize, &mut [f64])| {
        let (lo, len) = (b * UPDATE_BLOCK, rb.len());
        for (l, &c) in rows.iter().zip(coef) {
            for (o, &v) in rb.iter_mut().zip(&l[lo..lo + len]) {
                *o -= c * v;
            }
        }
        rb.iter_mut().for_each(|o| *o *= inv);
    };
    if par.is_parallel() {
        use rayon::prelude::*;
        r.par_chunks_mut(UPDATE_BLOCK).enumerate().for_each(block);
    } else {
        r.chunks_mut(UPDATE_BLOCK).enumerate().for_each(block);
    }
}

/// `log2` of the largest `|x_ij|` k-means clusters unscaled: the squared
/// distances of `n·d < 2^200` entries below `2^400` sum below the float
/// range.
const KMEANS_LOG2_MAX_ABS: i32 = 400;

/// k-means with `m` centers on the rows of `x`: k-means++ seeding (first
/// center uniform, each next drawn with probability proportional to the
/// squared distance to the nearest chosen one), then Lloyd iterations
/// (assign to the nearest center, move each center to its rows' mean; a
/// center without rows stays) until no assignment changes. Squared
/// distances between rows beyond `2^400` could overflow (and the seeding's
/// total with them): such rows are clustered scaled by a power of two,
/// which is exact, and the centers scaled back.
fn kmeans(
    x: ArrayView2<'_, f64>,
    m: usize,
    rng: &mut crate::rng::Rng,
    par: Parallelism,
    monitor: &Monitor,
) -> Result<Array2<f64>> {
    let max = x.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let scale = if max < 2f64.powi(KMEANS_LOG2_MAX_ABS) {
        1.0
    } else {
        2f64.powi(max.log2().floor() as i32 + 1 - KMEANS_LOG2_MAX_ABS)
    };
    let scaled = (scale != 1.0).then(|| x.mapv(|v| v / scale));
    let x = match &scaled {
        Some(s) => s.view(),
        None => x.view(),
    };
    let (n, d) = x.dim();
    monitor.stage("k-means iterations", KMEANS_MAX_ITER as u64);
    let xt = x.t().as_standard_layout().into_owned();
    let xs = xt.as_slice().unwrap_or_default();
    let mut centers = Array2::<f64>::zeros((m, d));
    let mut best = vec![f64::INFINITY; n];
    let mut dist = vec![0.0; n];
    let mut next = rng.random_range(0..n);
    for c in 0..m {
        monitor.check()?;
        centers.row_mut(c).assign(&x.row(next));
        let cv: Vec<f64> = x.row(next).to_vec();
        sq_dists_t(xs, n, &cv, &mut dist);
        for (b, &t) in best.iter_mut().zip(&dist) {
            *b = b.min(t);
        }
        let total: f64 = best.iter().sum();
        if total <= 0.0 {
            // Every row coincides with a center: the rest repeat rows.
            next = rng.random_range(0..n);
            continue;
        }
        let mut u = rng.random_range(0.0..total);
        next = n - 1;
        for (i, &b) in best.iter().enumerate() {
            if u < b {
                next = i;
                break;
            }
            u -= b;
        }
    }
    let mut assign: Vec<usize> = Vec::new();
    for _ in 0..KMEANS_MAX_ITER {
        monitor.check()?;
        let now = nearest(centers.view(), x, par, monitor)?;
        if now == assign {
            break;
        }
        assign = now;
        let mut sums = Array2::<f64>::zeros((m, d));
        let mut counts = vec![0usize; m];
        for (row, &c) in x.rows().into_iter().zip(&assign) {
            sums.row_mut(c).zip_mut_with(&row, |s, &v| *s += v);
            counts[c] += 1;
        }
        for (c, &k) in counts.iter().enumerate() {
            if k > 0 {
                let mut row = centers.row_mut(c);
                row.assign(&sums.row(c));
                row.mapv_inplace(|v| v / k as f64);
            }
        }
        monitor.advance(1);
    }
    Ok(centers * scale)
}
