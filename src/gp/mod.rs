//! Gaussian-process regression (ALGORITHMS.md 7): the exact GP with the
//! Gaussian kernel and its log-marginal-likelihood fit ([`exact`],
//! [`optimize`]); the feature-space GP on any [`crate::feature_map`] map,
//! from the mergeable sufficient statistics of [`crate::stats`]
//! ([`features`]); the metrics of 7.3 ([`metrics`]); and the localized
//! Maclaurin GP of section 8 ([`localized`], with the farthest-point
//! clustering of 8.2 in `cluster`); and the sparse GP with inducing inputs,
//! VFE or FITC ([`sparse`]).
//!
//! Every model has zero prior mean on targets centered by their training
//! mean; predictions add the mean back (ALGORITHMS.md 7).

pub(crate) mod cluster;
pub mod exact;
pub mod features;
pub mod localized;
pub mod metrics;
pub mod optimize;
pub mod sparse;

pub use exact::{fit_exact, ExactGpConfig};
pub use exact::{ExactGp, LmlEval};
pub use features::FeatureGp;
pub use localized::{LocalizedConfig, LocalizedMaclaurinGp};
pub use optimize::{Hyper, HyperInit, OptimizerConfig};
pub use sparse::SparseGp;

pub(crate) use crate::error::check_finite;
use crate::error::{Error, Result};

/// Checks that a variance is finite and `> 0`.
pub(crate) fn check_positive(name: &'static str, v: f64) -> Result<()> {
    if v.is_finite() && v > 0.0 {
        Ok(())
    } else {
        Err(Error::invalid(
            name,
            format!("must be finite and > 0, got {v}"),
        ))
    }
}
