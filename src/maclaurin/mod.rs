//! Maclaurin random features for dot-product kernels and the Gaussian kernel
//! (`docs/math/maclaurin.rst`): the kernel's Maclaurin series, the
//! optimized allocation of features over degrees (pair statistics, the
//! incremental algorithm, the search over the truncation degree) and the
//! Kar & Karnick random allocation.

pub(crate) mod allocate;
pub mod coefficients;
pub mod random;
pub mod stats;

pub use coefficients::MaclaurinKernel;
pub use map::{AllocationStrategy, MaclaurinConfig, MaclaurinMap};
pub use stats::{pair_statistics, PairStatistics, StatsSpec};

pub mod map;
#[cfg(test)]
mod map_tests;
#[cfg(test)]
mod tests;
