//! One evaluation of the sparse-GP objective and its gradient over
//! in-memory training data, in two passes over row chunks (see
//! docs/math/sparse_gp.rst, section Streaming): the statistics
//! ([`SparseStats`]), the bound and its adjoints ([`bound`]), then the
//! gradient sums ([`accumulate_gradient`]). Memory `O(M² + chunk·M)`
//! whatever `N`; time `O(N M²)` (VFE: the Gram of the first pass, `N M²/2`
//! multiply-adds, and one product in the second, `N M²`).

use ndarray::{s, ArrayView1, ArrayView2};

use super::bound::{bound, Bound};
use super::gradient::{accumulate_gradient, finish, Gradient, GradientSums};
use super::prior::InducingPrior;
use super::stats::{Method, SparseStats};
use crate::error::{Error, Result};
use crate::progress::Monitor;
use crate::threads::Parallelism;

/// The kernel block of one chunk holds at most this many values (`M ×
/// rows`, 2 MiB), unless that is fewer than [`MIN_CHUNK_ROWS`] rows: the
/// blocks of a chunk (the kernel values, their slopes and adjoints) stay in
/// the cache between the kernel evaluation and the products that read them,
/// and the products are still large enough to run at the GEMM's rate
/// (BENCHMARKS.md, "Sparse GP", has the chunk sizes tried).
const CHUNK_VALUES: usize = 1 << 18;
/// The fewest rows of a default chunk.
const MIN_CHUNK_ROWS: usize = 256;

/// The default rows per chunk for `M` inducing inputs: `2^18 / M`, at
/// least 256.
pub fn default_chunk_rows(n_inducing: usize) -> usize {
    (CHUNK_VALUES / n_inducing.max(1)).max(MIN_CHUNK_ROWS)
}

/// The objective at one prior and, when requested, its gradient.
#[derive(Clone, Debug)]
pub struct SparseEval {
    /// The statistics of the first pass.
    pub stats: SparseStats,
    /// The objective, the predictive pieces and the adjoints.
    pub bound: Bound,
    /// The gradient (when requested).
    pub gradient: Option<Gradient>,
}

/// Evaluates `method`'s objective of `(x, y)` under `prior` in chunks of
/// `chunk_rows` rows (`center` subtracts the training mean of `y`), with
/// the gradient when `want_grad`. `monitor` is checked before every chunk
/// of both passes.
///
/// # Errors
/// [`Error::InvalidParameter`] for `chunk_rows = 0` or no rows; the errors
/// of [`SparseStats::accumulate`] and [`bound`]; [`Error::Interrupted`].
#[allow(clippy::too_many_arguments)]
pub fn evaluate(
    prior: &InducingPrior,
    method: Method,
    x: ArrayView2<'_, f64>,
    y: ArrayView1<'_, f64>,
    center: bool,
    chunk_rows: usize,
    want_grad: bool,
    par: Parallelism,
    monitor: &Monitor,
) -> Result<SparseEval> {
    evaluate_in(
        &mut Vec::new(),
        prior,
        method,
        x,
        y,
        center,
        chunk_rows,
        want_grad,
        par,
        monitor,
    )
}

/// [`evaluate`] with the chunks' kernel blocks in `scratch`, which grows
/// as needed and is kept for the next evaluation (an optimizer's
/// evaluations then reuse memory that is already mapped).
///
/// # Errors
/// As [`evaluate`].
#[allow(clippy::too_many_arguments)]
pub(crate) fn evaluate_in(
    scratch: &mut Vec<f64>,
    prior: &InducingPrior,
    method: Method,
    x: ArrayView2<'_, f64>,
    y: ArrayView1<'_, f64>,
    center: bool,
    chunk_rows: usize,
    want_grad: bool,
    par: Parallelism,
    monitor: &Monitor,
) -> Result<SparseEval> {
    if chunk_rows == 0 {
        return Err(Error::invalid("chunk_size", "must be >= 1, got 0"));
    }
    if y.len() != x.nrows() {
        return Err(Error::ShapeMismatch {
            name: "length of y (the number of rows of X)",
            expected: x.nrows(),
            got: y.len(),
        });
    }
    let n = x.nrows();
    let m = prior.n_inducing();
    let mut stats = SparseStats::new(method, m);
    for start in (0..n).step_by(chunk_rows) {
        monitor.check()?;
        let stop = (start + chunk_rows).min(n);
        stats.accumulate(
            prior,
            x.slice(s![start..stop, ..]),
            y.slice(s![start..stop]),
            scratch,
            par,
        )?;
    }
    let b = bound(&stats, prior, center, want_grad, par)?;
    let gradient = match &b.adjoint {
        Some(adj) => {
            let mut sums = GradientSums::new(method, m, x.ncols());
            for start in (0..n).step_by(chunk_rows) {
                monitor.check()?;
                let stop = (start + chunk_rows).min(n);
                accumulate_gradient(
                    &mut sums,
                    adj,
                    prior,
                    x.slice(s![start..stop, ..]),
                    y.slice(s![start..stop]),
                    b.y_mean,
                    scratch,
                    par,
                )?;
            }
            Some(finish(adj, prior, &sums, par))
        }
        None => None,
    };
    Ok(SparseEval {
        stats,
        bound: b,
        gradient,
    })
}
