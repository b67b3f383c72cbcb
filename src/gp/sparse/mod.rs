//! The sparse GP with inducing inputs (see docs/math/sparse_gp.rst; Titsias
//! 2009 for VFE, Snelson & Ghahramani 2006 for FITC; the "Sparse Gaussian
//! Processes" and "Inducing Points" slides of the RFF lecture notes).
//!
//! `M` inducing inputs `Z` summarize the `N` training rows: VFE maximizes
//! Titsias' collapsed variational bound `F ≤ LML`, FITC the log marginal
//! likelihood of the model with the Nyström prior `Q_ff` and the exact
//! diagonal. Both are functions of a few sums over the rows, so a fit costs
//! `O(N M² + M³)` time and `O(M² + chunk·M)` memory whatever `N`:
//!
//! - [`inducing`]: the initial `Z` (greedy conditional variance, k-means,
//!   random rows, or given);
//! - [`kernel_blocks`]: the kernel and its blocks `k(Z, X_chunk)` with the
//!   derivatives in the (per-dimension) log length scales and in `Z`;
//! - [`prior`]: `K_uu` and its factor with the jitter ladder;
//! - [`stats`]: the streamed statistics, mergeable across chunks and
//!   machines;
//! - [`mod@bound`]: the objective and its adjoints from the statistics;
//! - [`gradient`]: the gradient's second pass over the rows and its
//!   completion;
//! - [`objective`]: both passes over in-memory data;
//! - [`fit`]: the hyperparameter (and inducing-input) fit by L-BFGS;
//! - [`model`]: the fitted model and its predictions.

pub mod bound;
pub mod fit;
pub mod gradient;
pub mod inducing;
pub mod kernel_blocks;
pub mod model;
pub mod objective;
pub mod prior;
pub mod stats;

#[cfg(test)]
mod tests;

pub use bound::{bound, Adjoint, Bound};
pub use fit::{fit_sparse, fit_sparse_blocks, resolve_device, SparseGpConfig};
pub use gradient::{accumulate_gradient, finish, Gradient, GradientSums};
pub use inducing::{select_inducing, InducingInit, INDUCING_NAMES};
pub use kernel_blocks::kernel_matrix;
pub use model::SparseGp;
pub use objective::{default_chunk_rows, evaluate, SparseEval};
pub use prior::{InducingPrior, KERNEL_VARIANCE_RANGE};
pub use stats::{Method, SparseStats};
