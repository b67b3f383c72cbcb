//! The exact GP with the Gaussian kernel (`docs/math/gp.rst`, "Exact GP"):
//! kernel matrices, the log marginal likelihood with its analytic gradients
//! (scalar or per-dimension length scales), and the predictive mean and
//! variances; the hyperparameter fit is in [`fit`]. The only place in the
//! crate that builds an `N × N` matrix.

use faer::{Mat, MatMut, MatRef};
use ndarray::{Array1, Array2, ArrayView1, ArrayView2};
use rayon::prelude::*;

use super::{check_finite, check_positive, MeanAndVariance};
use crate::error::{Error, Result};
use crate::kernels::{midrange, Kernel, StationaryKernel};
use crate::linalg::{panel_width, Cholesky};
use crate::progress::Monitor;
use crate::threads::Parallelism;
use crate::vexp;

pub mod fit;

pub use fit::{fit_exact, ExactGpConfig};

/// `ln 2π`.
const LN_2PI: f64 = 1.837_877_066_409_345_5;

/// Number of `N × N` float64 matrices the exact GP holds at once during a
/// fit with gradients (an evaluation's kernel, factor, inverse and the
/// inverse's scratch, the first, second and last kept for reuse in a
/// [`Workspace`], and the factors of the best evaluations of the current run
/// and of the best earlier run).
const EXACT_MATRICES: u128 = 6;

/// Refuses an exact GP whose `N × N` matrices would not fit in
/// `memory_bytes` (`docs/math/gp.rst`, "Exact GP": `O(N²)` memory), naming the
/// approximate models. The caller gives the budget (the bindings pass
/// [`crate::system::available_memory_bytes`]).
pub fn check_exact_size(n: usize, memory_bytes: u64) -> Result<()> {
    let need = (n as u128) * (n as u128) * 8 * EXACT_MATRICES;
    let avail = u128::from(memory_bytes);
    if need > avail {
        let gib = |b: u128| b as f64 / (1u128 << 30) as f64;
        return Err(Error::invalid(
            "X",
            format!(
                "the exact GP with N = {n} training rows needs about {:.1} GiB ({EXACT_MATRICES} N x N \
                 float64 matrices) but only {:.1} GiB of memory is available; use an approximate \
                 model instead: RandomFeatureGPR (feature-space GP, O(N D^2) time, O(D^2) memory) or \
                 LocalizedMaclaurinGPR",
                gib(need),
                gib(avail)
            ),
        ));
    }
    Ok(())
}

/// Validates training data for an exact GP: shapes and finiteness (the
/// size against a memory budget is [`check_exact_size`]).
pub(crate) fn check_training_data(x: ArrayView2<'_, f64>, y: ArrayView1<'_, f64>) -> Result<()> {
    if x.nrows() != y.len() {
        return Err(Error::ShapeMismatch {
            name: "length of y (the number of rows of X)",
            expected: x.nrows(),
            got: y.len(),
        });
    }
    if x.nrows() == 0 {
        return Err(Error::invalid("X", "needs at least one training row"));
    }
    check_finite("X", x.iter())?;
    check_finite("y", y.iter())
}

/// The log marginal likelihood and its gradient (`docs/math/gp.rst`, "Exact
/// GP").
#[derive(Clone, Debug, PartialEq)]
pub struct LmlEval {
    /// `LML = −½ yᵀα − Σ ln L_ii − (N/2) ln 2π`.
    pub lml: f64,
    /// `∂LML/∂θ` for `θ = (ln l_1, …, ln l_k, ln σ², ln σ_n²)` (`k` = number
    /// of length scales); empty when not requested.
    pub grad: Vec<f64>,
    /// The jitter the Cholesky ladder added (0 normally).
    pub jitter: f64,
    /// `tr(K_y^{−1})`, which sizes the rounding of `lml` ([`lml_rounding`]):
    /// computed with the gradient, whose inverse gives it; `None` without.
    pub trace_inv: Option<f64>,
}

/// The estimated rounding error of the exact GP's LML, in nats:
/// `2u · mean(diag K_y) · tr(K_y^{−1})` (`u` the float64 unit roundoff).
/// A perturbation `E` of `K_y` (the rounding of its entries and the
/// Cholesky factor's backward error, each of order `u` times the diagonal)
/// moves `ln|K_y|` by `tr(K_y^{−1}E)`, the quantity this sizes; against the
/// LML evaluated with 60 digits (noise-free targets, noise variances down to
/// `1e−16` times the kernel variance, the Gaussian and Matérn 5/2 kernels)
/// the error stayed below it while the factorization needed no jitter
/// (docs/math/gp.rst, "Exact GP").
pub fn lml_rounding(mean_diag: f64, trace_inv: f64) -> f64 {
    f64::EPSILON * mean_diag * trace_inv
}

/// Fitted pieces of `K_y = K + σ_n² I`: the kernel matrix, its factor and
/// `α = K_y^{−1} y`.
struct Factored {
    /// The inputs divided by the length scales, transposed (`d × N`,
    /// row `a` holds dimension `a` of every point).
    ut: Array2<f64>,
    chol: Cholesky,
    alpha: Vec<f64>,
}

/// `u = (x − c) / l` with `c` the [`midrange`] of the rows (the kernel is
/// shift invariant; centering keeps the digits of the differences of
/// inputs far from the origin), transposed to `d × N` so the pair loops
/// below run over contiguous memory.
fn scaled_transposed(x: ArrayView2<'_, f64>, kernel: &StationaryKernel) -> Array2<f64> {
    let u = kernel.scale(x, &midrange(x));
    u.t().as_standard_layout().into_owned()
}

/// `out[i − lo] = ρ(u_i, u_j)` for the rows `i ≥ lo` (`out.len() == n −
/// lo`): the squared Euclidean distance, or the `ℓ1` distance with `l1`, of
/// the scaled inputs, one contiguous pass per dimension (no `‖a‖² + ‖b‖² −
/// 2aᵀb` cancellation).
#[inline(always)]
fn distance_rows(ut: &[f64], n: usize, j: usize, lo: usize, l1: bool, out: &mut [f64]) {
    out.fill(0.0);
    for row in ut.chunks_exact(n) {
        let c = row[j];
        if l1 {
            for (r, &v) in out.iter_mut().zip(&row[lo..]) {
                *r += (v - c).abs();
            }
        } else {
            for (r, &v) in out.iter_mut().zip(&row[lo..]) {
                let t = v - c;
                *r += t * t;
            }
        }
    }
}

/// Column `j` of the lower triangle of `K = σ² κ(ρ(u_i, u_j))`
/// (`col.len() == n − j`, rows `i ≥ j`): the distances of
/// [`distance_rows`], then the profile of the kernel table of
/// [`crate::kernels`] through the vectorizable [`vexp::exp`]. Inlined into
/// the per-instruction-set copies of [`kernel_column`]; no FMA contraction,
/// so every copy gives the same bits.
#[inline(always)]
fn kernel_column_body(
    ut: &[f64],
    n: usize,
    j: usize,
    kernel: Kernel,
    variance: f64,
    col: &mut [f64],
) {
    distance_rows(ut, n, j, j, kernel.uses_l1(), col);
    match kernel {
        Kernel::Gaussian => {
            for v in col.iter_mut() {
                *v = variance * vexp::exp(-0.5 * *v);
            }
        }
        Kernel::Laplacian => {
            for v in col.iter_mut() {
                *v = variance * vexp::exp(-*v);
            }
        }
        Kernel::Matern12 => {
            for v in col.iter_mut() {
                *v = variance * vexp::exp(-v.sqrt());
            }
        }
        Kernel::Matern32 => {
            for v in col.iter_mut() {
                let a = (3.0 * *v).sqrt();
                *v = variance * (1.0 + a) * vexp::exp(-a);
            }
        }
        Kernel::Matern52 => {
            for v in col.iter_mut() {
                let a = (5.0 * *v).sqrt();
                *v = variance * (1.0 + a + a * a / 3.0) * vexp::exp(-a);
            }
        }
    }
}

widest_simd! {
    /// [`kernel_column_body`] with the widest SIMD the CPU offers (`ut` is the
    /// row-major `d × n` matrix of scaled inputs).
    fn kernel_column(ut: &[f64], n: usize, j: usize, kernel: Kernel, variance: f64, col: &mut [f64]) =
        kernel_column_body;
}

/// The lower triangle of `K = σ² κ(ρ(u_i, u_j))` column by column (columns
/// in parallel, each by [`kernel_column`]) into `k`, made `N²` long,
/// column-major: column `j` is `k[j N + j .. (j + 1) N]` (the strict upper
/// triangle is left as it was and never read). `monitor` is checked before
/// each panel of columns ([`panel_width`], the factorization's: the whole
/// up to 2,048 rows, where one parallel pass balances the columns' uneven
/// lengths best, else 256 columns, about 0.05 s at `N = 8,000`).
///
/// # Errors
/// [`Error::Interrupted`] once `monitor` is cancelled.
fn kernel_lower(
    ut: &Array2<f64>,
    kernel: Kernel,
    variance: f64,
    par: Parallelism,
    monitor: &Monitor,
    k: &mut Vec<f64>,
) -> Result<()> {
    let n = ut.ncols();
    k.resize(n * n, 0.0);
    if n == 0 {
        return Ok(());
    }
    let u = ut.as_slice().unwrap_or_default();
    let columns = panel_width(n);
    for (p, panel) in k.chunks_mut(n * columns).enumerate() {
        monitor.check()?;
        let j0 = p * columns;
        let fill = |(c, col): (usize, &mut [f64])| {
            let j = j0 + c;
            kernel_column(u, n, j, kernel, variance, &mut col[j..]);
        };
        if par.is_parallel() {
            panel.par_chunks_mut(n).enumerate().for_each(fill);
        } else {
            panel.chunks_mut(n).enumerate().for_each(fill);
        }
    }
    Ok(())
}

/// The full symmetric kernel matrix `K = k(X, X)` (`N × N`, row-major) of
/// the exact GPs that factor it whole (the classifier's `K + Σ_c`): the
/// lower triangle by [`kernel_lower`] (distances summed per dimension over
/// the scaled inputs, vectorized over rows, columns in parallel; no
/// `‖a‖² + ‖b‖² − 2aᵀb` cancellation, so zero distance gives exactly `σ²`),
/// mirrored into the upper one (exactly symmetric). Each entry is computed
/// alone, so the result does not depend on the thread count. Inputs whose
/// scaled values overflow (or a profile that is NaN there) go through
/// [`StationaryKernel::cross`], which recomputes such distances from the
/// scaled differences.
///
/// # Errors
/// [`Error::Interrupted`] once `monitor` is cancelled (checked between
/// panels of columns).
pub(crate) fn kernel_matrix_symmetric(
    x: ArrayView2<'_, f64>,
    kernel: &StationaryKernel,
    par: Parallelism,
    monitor: &Monitor,
) -> Result<Array2<f64>> {
    let n = x.nrows();
    let ut = scaled_transposed(x, kernel);
    if !ut.iter().all(|v| v.is_finite()) {
        return Ok(kernel.cross(x, x, par));
    }
    let mut k = Vec::new();
    kernel_lower(&ut, kernel.kernel, kernel.variance, par, monitor, &mut k)?;
    // Read row-major, column j of the lower triangle is row j of the upper
    // one: copy it below the diagonal, in blocks so that the transposed
    // reads stay in cache.
    const B: usize = 64;
    for i0 in (0..n).step_by(B) {
        for j0 in (0..=i0).step_by(B) {
            for i in i0..(i0 + B).min(n) {
                for j in j0..(j0 + B).min(i) {
                    k[i * n + j] = k[j * n + i];
                }
            }
        }
    }
    if k.iter().any(|v| v.is_nan()) {
        return Ok(kernel.cross(x, x, par));
    }
    Ok(Array2::from_shape_vec((n, n), k).unwrap_or_else(|_| unreachable!("N² entries")))
}

/// Buffers that the successive LML evaluations of one fit reuse: the kernel
/// matrix and the inverse `K_y^{−1}`. Fresh `N × N` buffers each evaluation
/// come from the OS as untouched pages (glibc maps allocations this large),
/// and their page faults cost about a fifth of a fit's CPU time at N = 2,000
/// (178,680 minor faults, 0.56 s of system time out of 2.74 s CPU,
/// BENCHMARKS.md, GP section).
#[derive(Default)]
pub(crate) struct Workspace {
    k: Vec<f64>,
    inv: Option<Mat<f64>>,
}

impl Workspace {
    /// The lower triangle of `(L Lᵀ)^{−1}` into the reused buffer
    /// ([`Cholesky::inverse_lower_into`], `⅔ N³` flops); its strict upper
    /// triangle is stale.
    ///
    /// # Errors
    /// [`Error::Interrupted`] once `monitor` is cancelled.
    fn inverse_lower(
        &mut self,
        chol: &Cholesky,
        par: Parallelism,
        monitor: &Monitor,
    ) -> Result<&Mat<f64>> {
        let n = chol.dim();
        if self.inv.as_ref().is_none_or(|m| m.nrows() != n) {
            // The old buffer is freed before the new one is allocated.
            self.inv = None;
        }
        let inv = self.inv.get_or_insert_with(|| Mat::zeros(n, n));
        chol.inverse_lower_into(inv.as_mut(), par, monitor)?;
        Ok(inv)
    }
}

/// Factors `K_y` (the kernel matrix into `k`, see [`kernel_lower`]).
fn factor(
    x: ArrayView2<'_, f64>,
    y: ArrayView1<'_, f64>,
    kernel: &StationaryKernel,
    noise_variance: f64,
    par: Parallelism,
    monitor: &Monitor,
    k: &mut Vec<f64>,
) -> Result<Factored> {
    let n = x.nrows();
    let ut = scaled_transposed(x, kernel);
    kernel_lower(&ut, kernel.kernel, kernel.variance, par, monitor, k)?;
    let chol = Cholesky::shifted_monitored(
        MatRef::from_column_major_slice(k, n, n),
        noise_variance,
        par,
        monitor,
    )?;
    let alpha = chol.solve_vec(y, par);
    Ok(Factored { ut, chol, alpha })
}

/// The inputs of [`grad_column_body`] for column `j`.
struct GradColumn<'a> {
    /// The scaled inputs, row-major `d × n`.
    ut: &'a [f64],
    n: usize,
    j: usize,
    /// `K_ij` for `i > j`.
    k: &'a [f64],
    /// `W_ij = (K_y^{−1})_ij` for `i > j`.
    w: &'a [f64],
    /// `α` (all `n`).
    alpha: &'a [f64],
}

/// `Σ_i a_i (c_i − v)²` with eight independent partial sums
/// (vectorizable; a fixed order, so the same bits at any SIMD width).
#[inline(always)]
pub(crate) fn dot_sq(a: &[f64], c: &[f64], v: f64) -> f64 {
    let mut acc = [0.0; 8];
    let (ca, cc) = (a.chunks_exact(8), c.chunks_exact(8));
    let (ra, rc) = (ca.remainder(), cc.remainder());
    for (x, y) in ca.zip(cc) {
        for l in 0..8 {
            let t = y[l] - v;
            acc[l] += x[l] * (t * t);
        }
    }
    let tail: f64 = ra
        .iter()
        .zip(rc)
        .map(|(x, y)| x * ((y - v) * (y - v)))
        .sum();
    acc.iter().sum::<f64>() + tail
}

/// `Σ_i a_i` with eight independent partial sums (as [`dot_sq`]).
#[inline(always)]
fn sum8(a: &[f64]) -> f64 {
    let mut acc = [0.0; 8];
    let ca = a.chunks_exact(8);
    let tail: f64 = ca.remainder().iter().sum();
    for x in ca {
        for l in 0..8 {
            acc[l] += x[l];
        }
    }
    acc.iter().sum::<f64>() + tail
}

/// `Σ_i a_i |c_i − v|` with eight independent partial sums (as [`dot_sq`]).
#[inline(always)]
fn dot_abs(a: &[f64], c: &[f64], v: f64) -> f64 {
    let mut acc = [0.0; 8];
    let (ca, cc) = (a.chunks_exact(8), c.chunks_exact(8));
    let (ra, rc) = (ca.remainder(), cc.remainder());
    for (x, y) in ca.zip(cc) {
        for l in 0..8 {
            acc[l] += x[l] * (y[l] - v).abs();
        }
    }
    let tail: f64 = ra.iter().zip(rc).map(|(x, y)| x * (y - v).abs()).sum();
    acc.iter().sum::<f64>() + tail
}

/// Column `j` of the gradient's traces, for the rows `i > j` (`m`, `rho`:
/// scratch of length `n − j − 1`). With `a_i = α_i α_j − W_ij` and
/// `∂K_ij/∂ln l_a = g_ij t(δ_a)` (`δ = u_i − u_j`, `t(δ) = δ²`, or `|δ|`
/// for the Laplacian):
///
/// - returns `Σ_i a_i K_ij` (the kernel variance's trace, `∂K/∂ln σ² = K`);
/// - `per_dim[a] = Σ_i a_i g_ij t(δ_ia)`.
///
/// `g = 2σ²ψ(ρ)` (`σ²ψ` for the Laplacian, [`Kernel::profile_slope`]) is
/// formed from `K_ij` itself, without a second exponential: `K` for the
/// Gaussian and the Laplacian, `K/r` for Matérn 1/2 (0 at `r = 0`, where
/// every `t` vanishes as well), `3K/(1 + a)` with `a = √3 r` for Matérn 3/2
/// and `(5/3) K (1 + a)/(1 + a + a²/3)` with `a = √5 r` for Matérn 5/2.
/// Inlined into the per-instruction-set copies of [`grad_column`] (no FMA
/// contraction: the same bits in each).
#[inline(always)]
fn grad_column_body(
    c: GradColumn<'_>,
    kernel: Kernel,
    m: &mut [f64],
    rho: &mut [f64],
    per_dim: &mut [f64],
) -> f64 {
    let lo = c.j + 1;
    let aj = c.alpha[c.j];
    for (((mi, k), w), a) in m.iter_mut().zip(c.k).zip(c.w).zip(&c.alpha[lo..]) {
        *mi = (aj * a - w) * k;
    }
    let trace_k = sum8(m);
    match kernel {
        Kernel::Gaussian | Kernel::Laplacian => {}
        Kernel::Matern12 => {
            distance_rows(c.ut, c.n, c.j, lo, false, rho);
            for (mi, &r) in m.iter_mut().zip(rho.iter()) {
                *mi = if r > 0.0 { *mi / r.sqrt() } else { 0.0 };
            }
        }
        Kernel::Matern32 => {
            distance_rows(c.ut, c.n, c.j, lo, false, rho);
            for (mi, &r) in m.iter_mut().zip(rho.iter()) {
                *mi *= 3.0 / (1.0 + (3.0 * r).sqrt());
            }
        }
        Kernel::Matern52 => {
            distance_rows(c.ut, c.n, c.j, lo, false, rho);
            for (mi, &r) in m.iter_mut().zip(rho.iter()) {
                let a = (5.0 * r).sqrt();
                *mi *= 5.0 / 3.0 * (1.0 + a) / (1.0 + a + a * a / 3.0);
            }
        }
    }
    let l1 = kernel.uses_l1();
    for (pd, row) in per_dim.iter_mut().zip(c.ut.chunks_exact(c.n)) {
        *pd = if l1 {
            dot_abs(m, &row[lo..], row[c.j])
        } else {
            dot_sq(m, &row[lo..], row[c.j])
        };
    }
    trace_k
}

widest_simd! {
    /// [`grad_column_body`] with the widest SIMD the CPU offers.
    fn grad_column(
        c: GradColumn<'_>,
        kernel: Kernel,
        m: &mut [f64],
        rho: &mut [f64],
        per_dim: &mut [f64],
    ) -> f64 = grad_column_body;
}

/// The log marginal likelihood of centered targets `y` under the GP with
/// `kernel` and `noise_variance`, with its analytic gradient when
/// `want_grad` (`docs/math/gp.rst`, "Exact GP"):
///
/// `∂LML/∂θ = ½ tr[(ααᵀ − K_y^{−1}) ∂K_y/∂θ]` with
/// `∂K_ij/∂ln l_a = σ² ψ(ρ_ij) δ_a e'(δ_a)` for `δ = (x_i − x_j)/l`
/// ([`StationaryKernel`]; for the Gaussian kernel `K ⊙ R_a`,
/// `R_a,ij = (x_ia − x_ja)²/l_a²`; summed over `a` for a scalar length
/// scale), `∂K_y/∂ln σ² = K`, `∂K_y/∂ln σ_n² = σ_n² I`. At zero distance
/// (the diagonal, repeated inputs) every length-scale derivative is 0, the
/// Matérn 1/2 one included (its kernel is not differentiable in the inputs
/// there, but is constant in `l`).
///
/// Cost: one kernel matrix (lower triangle, `N²/2` exponentials), one
/// Cholesky (`N³/3` flops), and for the gradient the lower triangle of
/// `K_y^{−1}` (`⅔ N³`); the traces are elementwise sums over the lower
/// triangle of `(ααᵀ − K_y^{−1}) ⊙ ∂K/∂θ` (symmetric, `∂K/∂θ` formed from
/// `K` and the distances), no further `N³` products.
pub fn log_marginal_likelihood(
    x: ArrayView2<'_, f64>,
    y: ArrayView1<'_, f64>,
    kernel: &StationaryKernel,
    noise_variance: f64,
    want_grad: bool,
    par: Parallelism,
) -> Result<LmlEval> {
    let mut ws = Workspace::default();
    let monitor = Monitor::default();
    lml_and_factor(
        x,
        y,
        kernel,
        noise_variance,
        want_grad,
        par,
        &monitor,
        &mut ws,
    )
    .map(|(e, _, _)| e)
}

/// [`log_marginal_likelihood`] that also returns the factor of `K_y` and
/// `α = K_y^{−1} y`: what a fitted [`ExactGp`] keeps, so the optimizer's best
/// evaluation needs no refit. `ws` holds the `N × N` buffers that repeated
/// calls reuse. `monitor` is checked between the factorization, the inverse
/// and the gradient.
#[allow(clippy::too_many_arguments)]
pub(crate) fn lml_and_factor(
    x: ArrayView2<'_, f64>,
    y: ArrayView1<'_, f64>,
    kernel: &StationaryKernel,
    noise_variance: f64,
    want_grad: bool,
    par: Parallelism,
    monitor: &Monitor,
    ws: &mut Workspace,
) -> Result<(LmlEval, Cholesky, Vec<f64>)> {
    check_training_data(x, y)?;
    kernel.validate(x.ncols())?;
    check_positive("noise_variance", noise_variance)?;
    let n = x.nrows();
    let f = factor(x, y, kernel, noise_variance, par, monitor, &mut ws.k)?;
    monitor.check()?;
    let data_fit: f64 = y.iter().zip(&f.alpha).map(|(a, b)| a * b).sum();
    let lml = -0.5 * data_fit - 0.5 * f.chol.log_det() - 0.5 * n as f64 * LN_2PI;
    let jitter = f.chol.jitter();
    if !want_grad {
        let e = LmlEval {
            lml,
            grad: Vec::new(),
            jitter,
            trace_inv: None,
        };
        return Ok((e, f.chol, f.alpha));
    }
    // The kernel matrix leaves the workspace while the inverse borrows it.
    let k_buf = std::mem::take(&mut ws.k);
    let inv = ws.inverse_lower(&f.chol, par, monitor)?;
    let kmat = &k_buf;
    let d = x.ncols();
    let alpha = &f.alpha;
    let u = f.ut.as_slice().unwrap_or_default();
    // Column j of the strict lower triangle (see `grad_column_body`), with a
    // scratch buffer per rayon job.
    let kind = kernel.kernel;
    let column = |(m, rho): &mut (Vec<f64>, Vec<f64>), j: usize| -> (Vec<f64>, f64) {
        let lo = j + 1;
        let mut per_dim = vec![0.0; d];
        let s = grad_column(
            GradColumn {
                ut: u,
                n,
                j,
                k: &kmat[j * n + lo..(j + 1) * n],
                w: &inv.col_as_slice(j)[lo..],
                alpha,
            },
            kind,
            &mut m[..n - lo],
            &mut rho[..n - lo],
            &mut per_dim,
        );
        (per_dim, s)
    };
    // Scratch of a job: the trace terms and (Matérn) the distances.
    let scratch = || (vec![0.0; n], vec![0.0; n]);
    // Per-column terms in parallel, summed in column order: the result does
    // not depend on the number of threads.
    let cols: Vec<(Vec<f64>, f64)> = if par.is_parallel() {
        (0..n).into_par_iter().map_init(scratch, column).collect()
    } else {
        let mut buf = scratch();
        (0..n).map(|j| column(&mut buf, j)).collect()
    };
    let mut per_dim = vec![0.0; d];
    let mut m_lower = 0.0;
    for (pd, s) in &cols {
        for (acc, v) in per_dim.iter_mut().zip(pd) {
            *acc += v;
        }
        m_lower += s;
    }
    let trace_inv: f64 = (0..n).map(|i| inv[(i, i)]).sum();
    let alpha_sq: f64 = alpha.iter().map(|a| a * a).sum();
    // ½ Σ_ij M_ij over the symmetric M: the strict lower triangle twice plus
    // the diagonal M_ii = (α_i² − W_ii) σ²; R_a vanishes on the diagonal.
    let m_diag = kernel.variance * (alpha_sq - trace_inv);
    let mut grad: Vec<f64> = if kernel.length_scale.len() == 1 {
        vec![per_dim.iter().sum::<f64>()]
    } else {
        per_dim
    };
    grad.push(m_lower + 0.5 * m_diag);
    grad.push(0.5 * noise_variance * (alpha_sq - trace_inv));
    ws.k = k_buf;
    let e = LmlEval {
        lml,
        grad,
        jitter,
        trace_inv: Some(trace_inv),
    };
    Ok((e, f.chol, f.alpha))
}

/// A fitted exact GP (`docs/math/gp.rst`, "Exact GP"): training inputs, the
/// Cholesky factor of `K_y`, `α = K_y^{−1}(y − ȳ)`, and the hyperparameters.
#[derive(Clone, Debug)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct ExactGp {
    /// Training inputs (`N × d`).
    pub x_train: Array2<f64>,
    /// The kernel.
    pub kernel: StationaryKernel,
    /// The noise variance `σ_n²`.
    pub noise_variance: f64,
    /// The training-target mean `ȳ` added back to predictions (0 without centering).
    pub y_mean: f64,
    /// `α = K_y^{−1}(y − ȳ)`.
    pub alpha: Array1<f64>,
    /// The factor `L` of `K_y (+ jitter)`.
    pub chol: Cholesky,
    /// The log marginal likelihood of the centered targets.
    pub lml: f64,
    /// L-BFGS iterations spent on the hyperparameters, over all runs (0
    /// without optimization).
    pub n_iter: u64,
}

impl ExactGp {
    /// Fits the exact GP with fixed hyperparameters (no optimization);
    /// `center` subtracts the training-target mean (`docs/math/gp.rst`).
    ///
    /// # Errors
    /// The refusals of the training data, the kernel and the noise
    /// variance; [`Error::NotPositiveDefinite`] when `K_y` is not positive
    /// definite with the largest jitter; [`Error::InvalidParameter`] naming
    /// `y` when `yᵀK_y⁻¹y` overflows the float64 range (targets beyond
    /// about `1e154`).
    pub fn fit(
        x: ArrayView2<'_, f64>,
        y: ArrayView1<'_, f64>,
        kernel: StationaryKernel,
        noise_variance: f64,
        center: bool,
        par: Parallelism,
    ) -> Result<Self> {
        Self::fit_monitored(
            x,
            y,
            kernel,
            noise_variance,
            center,
            par,
            &Monitor::default(),
        )
    }

    /// [`ExactGp::fit`] with a check of `monitor` between the column panels
    /// of the factorization: [`Error::Interrupted`] once it is cancelled.
    pub(crate) fn fit_monitored(
        x: ArrayView2<'_, f64>,
        y: ArrayView1<'_, f64>,
        kernel: StationaryKernel,
        noise_variance: f64,
        center: bool,
        par: Parallelism,
        monitor: &Monitor,
    ) -> Result<Self> {
        check_training_data(x, y)?;
        kernel.validate(x.ncols())?;
        check_positive("noise_variance", noise_variance)?;
        let n = x.nrows();
        let y_mean = if center { y.sum() / n as f64 } else { 0.0 };
        let yc = y.mapv(|v| v - y_mean);
        let f = factor(
            x,
            yc.view(),
            &kernel,
            noise_variance,
            par,
            monitor,
            &mut Vec::new(),
        )?;
        let data_fit: f64 = yc.iter().zip(&f.alpha).map(|(a, b)| a * b).sum();
        if !data_fit.is_finite() {
            // Targets beyond about 1e154 (less with a small noise variance):
            // the statistics of the other regressors overflow there too.
            return Err(Error::invalid(
                "y",
                "y^T K_y^-1 y overflows the float64 range, so the log marginal likelihood has \
                 no float64 value: rescale y (e.g. divide it by its standard deviation)",
            ));
        }
        let lml = -0.5 * data_fit - 0.5 * f.chol.log_det() - 0.5 * n as f64 * LN_2PI;
        Ok(Self {
            x_train: x.to_owned(),
            kernel,
            noise_variance,
            y_mean,
            alpha: Array1::from(f.alpha),
            chol: f.chol,
            lml,
            n_iter: 0,
        })
    }

    /// Predictive mean `μ* = k*ᵀα + ȳ` and latent variance
    /// `v* = k** − ‖L^{−1}k*‖²` (clipped at 0; `None` unless `want_var`).
    /// The noisy variance is `v* + σ_n²`.
    pub fn predict(
        &self,
        xs: ArrayView2<'_, f64>,
        want_var: bool,
        par: Parallelism,
    ) -> Result<MeanAndVariance> {
        predict_exact(
            self.x_train.view(),
            &self.chol,
            self.alpha.view(),
            self.y_mean,
            &self.kernel,
            xs,
            want_var,
            par,
        )
    }
}

/// Test points per block of the exact prediction (bounds the `N × block`
/// cross-covariance).
const PREDICT_BLOCK: usize = 1024;

/// The exact predictive mean and latent variance from stored fitted pieces
/// (see [`ExactGp::predict`]); `chol` factors `K_y` of `x_train`.
#[allow(clippy::too_many_arguments)]
pub fn predict_exact(
    x_train: ArrayView2<'_, f64>,
    chol: &Cholesky,
    alpha: ArrayView1<'_, f64>,
    y_mean: f64,
    kernel: &StationaryKernel,
    xs: ArrayView2<'_, f64>,
    want_var: bool,
    par: Parallelism,
) -> Result<MeanAndVariance> {
    let fit = ExactPieces {
        chol,
        alpha: alpha.reborrow(),
        y_mean,
    };
    let mut out = predict_exact_all(x_train, &[fit], kernel, xs, want_var, par)?;
    out.pop()
        .ok_or_else(|| Error::Internal("one prediction per fit".into()))
}

/// The fitted pieces of one exact GP that its predictions need: the factor
/// of `K_y`, the weights `α = K_y^{−1}(y − ȳ)` and the mean `ȳ`.
#[derive(Clone, Copy)]
pub struct ExactPieces<'a> {
    /// The Cholesky factor of `K_y` of the training rows.
    pub chol: &'a Cholesky,
    /// `α = K_y^{−1}(y − ȳ)`.
    pub alpha: ArrayView1<'a, f64>,
    /// The target mean added back to the predictive mean.
    pub y_mean: f64,
}

/// [`predict_exact`] for several GPs on the same training rows and kernel
/// (the classes of a Dirichlet classifier, which differ only in their
/// noise and targets): the cross-covariance `k*` of each block of test
/// points is computed once and shared; each GP's results are those
/// [`predict_exact`] gives it alone.
///
/// # Errors
/// [`Error::ShapeMismatch`] for a factor or weights of another size than
/// the training rows, or test points of another width; invalid kernel
/// parameters; [`Error::NonFinite`] for NaN in `xs` or in a prediction.
pub fn predict_exact_all(
    x_train: ArrayView2<'_, f64>,
    fits: &[ExactPieces<'_>],
    kernel: &StationaryKernel,
    xs: ArrayView2<'_, f64>,
    want_var: bool,
    par: Parallelism,
) -> Result<Vec<MeanAndVariance>> {
    let (n, d) = x_train.dim();
    Error::check_n_features(d, xs.ncols())?;
    for f in fits {
        if f.chol.dim() != n || f.alpha.len() != n {
            return Err(Error::ShapeMismatch {
                name: "size of the fitted factor and alpha (training rows)",
                expected: n,
                got: if f.chol.dim() != n {
                    f.chol.dim()
                } else {
                    f.alpha.len()
                },
            });
        }
    }
    kernel.validate(d)?;
    check_finite("X", xs.iter())?;
    let m = xs.nrows();
    let mut out: Vec<MeanAndVariance> = fits
        .iter()
        .map(|_| (Array1::zeros(m), want_var.then(|| Array1::zeros(m))))
        .collect();
    let mut start = 0;
    while start < m {
        let stop = (start + PREDICT_BLOCK).min(m);
        let block = xs.slice(ndarray::s![start..stop, ..]);
        // k* for the block: N × b (row i is training point i), computed as
        // k(block, X) so that the kernel is centered on the training rows
        // and a test row's prediction does not depend on its block.
        let ks = kernel.cross(block, x_train, par).reversed_axes();
        for (f, (mean, var)) in fits.iter().zip(out.iter_mut()) {
            let mu = ks.t().dot(&f.alpha);
            for (o, v) in mean
                .slice_mut(ndarray::s![start..stop])
                .iter_mut()
                .zip(mu.iter())
            {
                *o = v + f.y_mean;
            }
            if let Some(var) = var.as_mut() {
                let b = stop - start;
                // Column-major copy for the triangular solve L V = k*.
                let mut v = faer::Mat::<f64>::from_fn(n, b, |i, j| ks[(i, j)]);
                f.chol.solve_lower_in_place(v.as_mut(), par);
                let vm: MatMut<'_, f64> = v.as_mut();
                for j in 0..b {
                    let s: f64 = (0..n).map(|i| vm[(i, j)] * vm[(i, j)]).sum();
                    var[start + j] = (kernel.variance - s).max(0.0);
                }
            }
        }
        start = stop;
    }
    for (mean, var) in &out {
        crate::gp::check_prediction(mean, var.as_ref())?;
    }
    Ok(out)
}

#[cfg(test)]
/// Test data: `n` rows of a smooth function of 2 inputs in `[-2, 2)` with noise
/// (deterministic: the inputs are a scrambled grid, the noise a residue
/// pattern).
pub(crate) fn data_for_tests(n: usize) -> (Array2<f64>, Array1<f64>) {
    let x = Array2::from_shape_fn((n, 2), |(i, j)| {
        ((i * 37 + j * 101) % (n - 1)) as f64 * 4.0 / n as f64 - 2.0
    });
    let y = x
        .rows()
        .into_iter()
        .enumerate()
        .map(|(i, r)| {
            (1.3 * r[0]).sin() * (0.7 * r[1]).cos() + 0.1 * (((i * 13) % 11) as f64 - 5.0) / 5.0
        })
        .collect();
    (x, y)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::linalg::as_faer;
    use ndarray::array;

    fn oracle() -> (Array2<f64>, Array1<f64>, StationaryKernel) {
        (
            array![[0.0], [1.0], [2.0]],
            array![0.0, 1.0, 0.0],
            StationaryKernel {
                kernel: Kernel::Gaussian,
                length_scale: vec![1.0],
                variance: 1.0,
            },
        )
    }

    #[test]
    fn three_point_oracle_lml_and_gradients() {
        let (x, y, k) = oracle();
        // The oracle of docs/math/gp.rst, "Exact GP" is stated for y itself (no
        // centering).
        let e =
            log_marginal_likelihood(x.view(), y.view(), &k, 0.1, true, Parallelism::Rayon).unwrap();
        assert!((e.lml - -3.493578023553).abs() < 1e-9, "{}", e.lml);
        let want = [-0.844481859005, -0.560780034555, 0.052045961570];
        for (g, w) in e.grad.iter().zip(want) {
            assert!((g - w).abs() < 1e-9, "{g} vs {w}");
        }
        assert_eq!(e.jitter, 0.0);
    }

    #[test]
    fn inputs_far_from_the_origin_keep_their_digits() {
        // The same data shifted by 2^30: the kernels are centered before
        // being scaled, so the LML, its gradient and the predictions have
        // the same bits (see kernels::tests::shifted_grid).
        let (x, x_far) = crate::kernels::tests::shifted_grid(40, 2, 5);
        let (xs, xs_far) = crate::kernels::tests::shifted_grid(7, 2, 6);
        let y = x.column(0).mapv(f64::sin) + x.column(1).mapv(|v| 0.3 * v);
        for (kernel, ls) in [
            (Kernel::Gaussian, vec![0.9]),
            (Kernel::Matern32, vec![0.6, 1.7]),
        ] {
            let k = StationaryKernel {
                kernel,
                length_scale: ls,
                variance: 1.4,
            };
            let par = Parallelism::Rayon;
            let lml = |x: &Array2<f64>| {
                log_marginal_likelihood(x.view(), y.view(), &k, 0.01, true, par).unwrap()
            };
            let (near, far) = (lml(&x), lml(&x_far));
            assert_eq!((near.lml, &near.grad), (far.lml, &far.grad));
            let predict = |x: &Array2<f64>, xs: ArrayView2<'_, f64>| {
                let gp = ExactGp::fit(x.view(), y.view(), k.clone(), 0.01, true, par).unwrap();
                gp.predict(xs, true, par).unwrap()
            };
            let far = predict(&x_far, xs_far.view());
            assert_eq!(predict(&x, xs.view()), far);
            // The center is the training rows': a test row alone gets the
            // kernel values, and so the mean, it gets among others (the
            // variance's triangular solve is blocked over the test rows).
            let alone = predict(&x_far, xs_far.slice(ndarray::s![2..3, ..]));
            assert_eq!(alone.0[0], far.0[2]);
        }
    }

    #[test]
    fn three_point_oracle_prediction() {
        let (x, y, k) = oracle();
        let n = 3;
        let kmat =
            k.cross(x.view(), x.view(), Parallelism::Sequential) + Array2::<f64>::eye(n) * 0.1;
        let chol = Cholesky::new(as_faer(kmat.view()), Parallelism::Sequential).unwrap();
        let alpha = Array1::from(chol.solve_vec(y.view(), Parallelism::Sequential));
        let (mu, var) = predict_exact(
            x.view(),
            &chol,
            alpha.view(),
            0.0,
            &k,
            array![[0.5]].view(),
            true,
            Parallelism::Rayon,
        )
        .unwrap();
        assert!((mu[0] - 0.574547829524).abs() < 1e-9);
        let v = var.unwrap()[0];
        assert!((v - 0.082395236285).abs() < 1e-9);
        assert!((v + 0.1 - 0.182395236285).abs() < 1e-9);
    }

    const KERNELS: [Kernel; 5] = [
        Kernel::Gaussian,
        Kernel::Laplacian,
        Kernel::Matern12,
        Kernel::Matern32,
        Kernel::Matern52,
    ];

    fn lml_at(kind: Kernel, x: &Array2<f64>, y: &Array1<f64>, theta: &[f64]) -> f64 {
        let k = theta.len() - 2;
        let kernel = StationaryKernel {
            kernel: kind,
            length_scale: theta[..k].iter().map(|t| t.exp()).collect(),
            variance: theta[k].exp(),
        };
        log_marginal_likelihood(
            x.view(),
            y.view(),
            &kernel,
            theta[k + 1].exp(),
            false,
            Parallelism::Sequential,
        )
        .unwrap()
        .lml
    }

    #[test]
    fn gradients_match_central_differences_every_kernel_scalar_and_ard() {
        // Rows 23 and 24 repeat rows 0 and 5: pairs at zero distance, where
        // the Matérn 1/2 kernel is not differentiable in the inputs.
        let mut x = Array2::from_shape_fn((25, 3), |(i, j)| {
            ((i * 7 + j * 11) % 13) as f64 / 6.0 - 1.0 + 0.01 * i as f64
        });
        for (dup, src) in [(23, 0), (24, 5)] {
            let row = x.row(src).to_owned();
            x.row_mut(dup).assign(&row);
        }
        let y: Array1<f64> = x
            .rows()
            .into_iter()
            .map(|r| (2.0 * r[0]).sin() + 0.5 * r[1] * r[2])
            .collect();
        for kind in KERNELS {
            for theta in [
                vec![0.3_f64.ln(), 1.2_f64.ln(), 0.05_f64.ln()],
                vec![
                    0.4_f64.ln(),
                    1.5_f64.ln(),
                    0.9_f64.ln(),
                    0.8_f64.ln(),
                    0.02_f64.ln(),
                ],
            ] {
                let k = theta.len() - 2;
                let kernel = StationaryKernel {
                    kernel: kind,
                    length_scale: theta[..k].iter().map(|t| t.exp()).collect(),
                    variance: theta[k].exp(),
                };
                let e = log_marginal_likelihood(
                    x.view(),
                    y.view(),
                    &kernel,
                    theta[k + 1].exp(),
                    true,
                    Parallelism::Rayon,
                )
                .unwrap();
                assert_eq!(e.grad.len(), theta.len());
                let h = 1e-5;
                for p in 0..theta.len() {
                    let mut tp = theta.clone();
                    tp[p] += h;
                    let mut tm = theta.clone();
                    tm[p] -= h;
                    let fd = (lml_at(kind, &x, &y, &tp) - lml_at(kind, &x, &y, &tm)) / (2.0 * h);
                    // Central differences err by O(h²·f''') + O(eps·|f|/h).
                    assert!(
                        (fd - e.grad[p]).abs() < 1e-6 * (1.0 + fd.abs()),
                        "{kind:?} param {p}: fd {fd} vs {}",
                        e.grad[p]
                    );
                }
            }
        }
    }

    #[test]
    fn symmetric_kernel_matrix_is_the_pairwise_kernel_exactly_symmetric() {
        // 150 rows: several 64-row mirror blocks and a ragged last one; a
        // repeated row (exact zero distance off the diagonal).
        let mut x =
            Array2::from_shape_fn((150, 5), |(i, j)| ((i * 7 + j * 3) % 17) as f64 / 5.0 - 1.5);
        let r = x.row(3).to_owned();
        x.row_mut(100).assign(&r);
        for kind in KERNELS {
            for ls in [vec![1.3], vec![0.7, 1.9, 0.4, 2.5, 1.1]] {
                let kernel = StationaryKernel {
                    kernel: kind,
                    length_scale: ls,
                    variance: 1.7,
                };
                let m = Monitor::default();
                let k = kernel_matrix_symmetric(x.view(), &kernel, Parallelism::Rayon, &m).unwrap();
                let seq = kernel_matrix_symmetric(x.view(), &kernel, Parallelism::Sequential, &m)
                    .unwrap();
                assert_eq!(k, seq, "{kind:?}: independent of the thread count");
                let n = x.nrows();
                let scaled = |i: usize| -> Vec<f64> {
                    (0..5)
                        .map(|a| x[(i, a)] / kernel.length_scale_of(a))
                        .collect()
                };
                for i in 0..n {
                    assert_eq!(k[(i, i)], 1.7, "{kind:?}: exact diagonal");
                    for j in 0..n {
                        assert_eq!(k[(i, j)].to_bits(), k[(j, i)].to_bits(), "{kind:?}");
                        let rho = kind.distance(&scaled(i), &scaled(j));
                        let want = 1.7 * kind.profile(rho);
                        // A few ulp, plus the exponential's conditioning
                        // (x/l here, x·(1/l) in the kernel: ρ differs by ~ρε).
                        let tol = (8.0 + 2.0 * rho) * f64::EPSILON * want + 1e-300;
                        assert!(
                            (k[(i, j)] - want).abs() <= tol,
                            "{kind:?} ({i}, {j}): {} vs {want}",
                            k[(i, j)]
                        );
                    }
                }
                assert_eq!(k[(3, 100)], 1.7, "{kind:?}: repeated row");
            }
        }
        // Scaled inputs beyond the float range: the pairwise fallback.
        let big = Array2::from_shape_fn((4, 2), |(i, j)| (i as f64 - 1.5) * 1e300 + j as f64);
        let kernel = StationaryKernel::gaussian(vec![1e-10], 2.0);
        let k =
            kernel_matrix_symmetric(big.view(), &kernel, Parallelism::Rayon, &Monitor::default())
                .unwrap();
        assert_eq!(k, kernel.cross(big.view(), big.view(), Parallelism::Rayon));
        for i in 0..4 {
            assert_eq!(k[(i, i)], 2.0);
        }
    }

    #[test]
    fn kernel_matrices_equal_the_pairwise_kernel_and_its_cross_covariance() {
        let x = Array2::from_shape_fn((40, 3), |(i, j)| ((i * 5 + j * 3) % 11) as f64 / 4.0 - 1.0);
        for kind in KERNELS {
            for ls in [vec![0.7], vec![0.7, 1.9, 0.4]] {
                let kernel = StationaryKernel {
                    kernel: kind,
                    length_scale: ls.clone(),
                    variance: 1.7,
                };
                let ut = scaled_transposed(x.view(), &kernel);
                let mut k = Vec::new();
                let m = Monitor::default();
                kernel_lower(&ut, kind, 1.7, Parallelism::Rayon, &m, &mut k).unwrap();
                let cross = kernel.cross(x.view(), x.view(), Parallelism::Sequential);
                let n = x.nrows();
                let scaled = |i: usize| -> Vec<f64> {
                    (0..3)
                        .map(|a| x[(i, a)] / kernel.length_scale_of(a))
                        .collect()
                };
                for j in 0..n {
                    for i in j..n {
                        // The definition: σ² κ of the distance of (x_i − x_j)/l.
                        let want = 1.7 * kind.profile(kind.distance(&scaled(i), &scaled(j)));
                        assert!((k[j * n + i] - want).abs() < 1e-14, "{kind:?}");
                        assert!((cross[(i, j)] - want).abs() < 1e-14, "{kind:?}");
                        if ls.len() == 1 {
                            let (a, b) = (x.row(i).to_vec(), x.row(j).to_vec());
                            let e = 1.7 * kind.eval(&a, &b, 0.7);
                            assert!((e - want).abs() < 1e-14, "{kind:?}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn bad_inputs_are_clear_errors() {
        let (x, y, k) = oracle();
        let short = array![0.0, 1.0];
        assert!(matches!(
            log_marginal_likelihood(x.view(), short.view(), &k, 0.1, false, Parallelism::Rayon),
            Err(Error::ShapeMismatch { .. })
        ));
        let mut xn = x.clone();
        xn[(1, 0)] = f64::NAN;
        assert_eq!(
            log_marginal_likelihood(xn.view(), y.view(), &k, 0.1, false, Parallelism::Rayon)
                .unwrap_err(),
            Error::NonFinite { name: "X" }
        );
        let err = log_marginal_likelihood(x.view(), y.view(), &k, 0.0, false, Parallelism::Rayon)
            .unwrap_err();
        assert!(err.to_string().contains("noise_variance"));
        let bad = StationaryKernel {
            kernel: Kernel::Gaussian,
            length_scale: vec![-1.0],
            variance: 1.0,
        };
        assert!(
            ExactGp::fit(x.view(), y.view(), bad, 0.1, true, Parallelism::Rayon)
                .unwrap_err()
                .to_string()
                .contains("length_scale")
        );
        let two = StationaryKernel {
            kernel: Kernel::Gaussian,
            length_scale: vec![1.0, 2.0],
            variance: 1.0,
        };
        assert!(ExactGp::fit(x.view(), y.view(), two, 0.1, true, Parallelism::Rayon).is_err());
        assert!(check_exact_size(1_000, 1 << 30).is_ok());
        let msg = check_exact_size(50_000_000, 16 << 30)
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains("RandomFeatureGPR") && msg.contains("LocalizedMaclaurinGPR"),
            "{msg}"
        );
    }

    #[test]
    fn fitted_model_centers_targets_and_matches_the_oracle_shifted() {
        let (x, y, k) = oracle();
        // Shifting y by a constant shifts the centered model's mean by it.
        let gp = ExactGp::fit(
            x.view(),
            (&y + 5.0).view(),
            k.clone(),
            0.1,
            true,
            Parallelism::Rayon,
        )
        .unwrap();
        let gp0 = ExactGp::fit(x.view(), y.view(), k, 0.1, true, Parallelism::Rayon).unwrap();
        let xs = array![[0.5], [3.0]];
        let (m1, v1) = gp.predict(xs.view(), true, Parallelism::Rayon).unwrap();
        let (m0, v0) = gp0.predict(xs.view(), true, Parallelism::Rayon).unwrap();
        assert!((&m1 - &m0 - 5.0).iter().all(|d| d.abs() < 1e-12));
        assert_eq!(v1, v0);
    }
    #[test]
    fn wide_columns_equal_the_baseline_bit_for_bit() {
        // The dispatched (AVX-512 / AVX2 where the CPU has it) kernel and
        // gradient columns against the same code compiled for baseline x86-64.
        let (n, d) = (203, 3);
        let ut = Array2::from_shape_fn((d, n), |(a, i)| ((i * 37 + a * 11) % 97) as f64 / 31.0);
        let u = ut.as_slice().unwrap();
        let alpha: Vec<f64> = (0..n).map(|i| ((i * 13) % 17) as f64 / 7.0 - 1.0).collect();
        let w: Vec<f64> = (0..n).map(|i| ((i * 5) % 23) as f64 / 11.0).collect();
        for kernel in KERNELS {
            for j in [0, 1, 7, 100, n - 2, n - 1] {
                let (mut a, mut b) = (vec![0.0; n - j], vec![0.0; n - j]);
                kernel_column(u, n, j, kernel, 1.3, &mut a);
                kernel_column_body(u, n, j, kernel, 1.3, &mut b);
                assert_eq!(a, b);
                assert_eq!(a[0], 1.3);
                let c = || GradColumn {
                    ut: u,
                    n,
                    j,
                    k: &a[1..],
                    w: &w[j + 1..],
                    alpha: &alpha,
                };
                let (mut m1, mut m2) = (vec![0.0; n - j - 1], vec![0.0; n - j - 1]);
                let (mut r1, mut r2) = (m1.clone(), m2.clone());
                let (mut p1, mut p2) = (vec![0.0; d], vec![0.0; d]);
                let s1 = grad_column(c(), kernel, &mut m1, &mut r1, &mut p1);
                let s2 = grad_column_body(c(), kernel, &mut m2, &mut r2, &mut p2);
                assert_eq!((s1, &m1, &p1), (s2, &m2, &p2));
                // And the plain sums they stand for.
                let want: f64 = (j + 1..n)
                    .map(|i| (alpha[j] * alpha[i] - w[i]) * a[i - j])
                    .sum();
                assert!((s1 - want).abs() <= 1e-12 * (1.0 + want.abs()));
            }
        }
    }
}
