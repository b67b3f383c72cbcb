//! Helpers of the Maclaurin bindings (the map itself is a
//! `_core.FeatureMap`, fitted by `FeatureMap.maclaurin`): the allocation
//! argument and the warning about dropped subsample pairs.

use pyo3::prelude::*;
use pyo3::types::PyAny;

use super::ffi;
use crate::error::Error;
use crate::maclaurin::map::{AllocationStrategy, MaclaurinMap};

/// The `allocation` argument: "optimized", "random", or the sketch features
/// per degree (a 1-D sequence of integers >= 0, index = degree).
pub(super) fn allocation_strategy(arg: &Bound<'_, PyAny>) -> PyResult<AllocationStrategy> {
    let py = arg.py();
    let bad = |got: String| {
        let reason = format!(
            "must be 'optimized', 'random' or a 1-D array of non-negative integers \
             (features per degree), got {got}"
        );
        ffi::to_pyerr(py, Error::invalid("allocation", reason))
    };
    if let Ok(name) = arg.extract::<String>() {
        return match name.as_str() {
            "optimized" => Ok(AllocationStrategy::Optimized),
            "random" => Ok(AllocationStrategy::Random),
            _ => Err(bad(format!("{name:?}"))),
        };
    }
    let counts = match arg.extract::<Vec<i64>>() {
        Ok(c) if !c.is_empty() => c,
        _ => return Err(bad(arg.repr()?.to_string())),
    };
    let counts = counts
        .into_iter()
        .map(usize::try_from)
        .collect::<Result<Vec<usize>, _>>()
        .map_err(|_| ffi::to_pyerr(py, Error::invalid("allocation", "entries must be >= 0")))?;
    Ok(AllocationStrategy::Explicit(counts))
}

/// Pairs of the subsample whose statistics may be dropped (non-finite)
/// before the allocation warrants a warning: this fraction of all pairs.
const DROPPED_PAIRS_WARN_FRACTION: f64 = 0.05;

/// The warning for a fit whose allocation objective dropped more than
/// [`DROPPED_PAIRS_WARN_FRACTION`] of its subsample pairs (their Maclaurin
/// statistics were not finite), or None.
pub(super) fn dropped_pairs_warning(map: &MaclaurinMap) -> Option<String> {
    let (pairs, dropped) = map.dropped_pairs();
    (pairs > 0 && dropped as f64 > DROPPED_PAIRS_WARN_FRACTION * pairs as f64).then(|| {
        format!(
            "{dropped} of {pairs} subsample pairs gave non-finite Maclaurin statistics and \
             were dropped from the allocation objective; consider a larger length_scale"
        )
    })
}
