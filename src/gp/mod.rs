//! Gaussian-process regression (`docs/math/gp.rst`): the exact GP with the
//! Gaussian kernel and its log-marginal-likelihood fit ([`exact`],
//! [`optimize`]); the feature-space GP on any [`crate::feature_map`] map,
//! from the mergeable sufficient statistics of [`crate::stats`]
//! ([`features`]); the metrics of `docs/math/gp.rst`, "Metrics" ([`metrics`]);
//! the localized Maclaurin GP of `docs/math/localized.rst` ([`localized`],
//! with the farthest-point clustering of `docs/math/localized.rst`, "Training"
//! in `cluster`); the sparse GP with inducing inputs, VFE or FITC
//! (`docs/math/sparse_gp.rst`, [`sparse`]); and the Dirichlet-based GP
//! classifiers of `docs/math/classification.rst` on the same pieces
//! ([`dirichlet`]).
//!
//! Every model has zero prior mean on targets centered by their training
//! mean; predictions add the mean back (`docs/math/gp.rst`).

pub(crate) mod cluster;
pub mod dirichlet;
pub mod exact;
pub mod feature_lml;
pub mod features;
pub mod localized;
pub mod metrics;
pub mod optimize;
pub mod sparse;

pub use dirichlet::{DirichletGpc, ExactGpc};
pub use exact::{fit_exact, ExactGpConfig};
pub use exact::{ExactGp, LmlEval};
pub use feature_lml::{
    fit_feature_gp, fit_feature_gp_blocks, FeatureLmlConfig, FittedFeatureGp, GradientPass,
    HyperMap, LmlSums,
};
pub use features::FeatureGp;
pub use localized::{LocalizedConfig, LocalizedMaclaurinGp, ThresholdSearch};
pub use optimize::{DataScale, Hyper, HyperInit, OptimizerConfig};
pub use sparse::SparseGp;

use ndarray::{Array1, ArrayView1};

pub(crate) use crate::error::check_finite;
use crate::error::{Error, Result};

/// A predictive mean and, when asked for, the latent variance (every GP
/// model's `predict`).
pub type MeanAndVariance = (Array1<f64>, Option<Array1<f64>>);

/// The population variance `var(y)` (mean of the squared deviations from
/// the mean) of targets that are not all equal; `None` when they are (one
/// target, a constant, no targets). Near the ends of the float range it
/// underflows to 0 or overflows to `+∞`.
fn target_variance(y: ArrayView1<'_, f64>) -> Option<f64> {
    let first = *y.first()?;
    if y.iter().all(|&v| v == first) {
        return None;
    }
    let n = y.len() as f64;
    let mean = y.sum() / n;
    Some(y.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n)
}

/// The target variance that scales the default hyperparameters of the GP
/// regressors (docs/math/gp.rst, section Exact GP): the population
/// variance `var(y)`, or 1 when the targets are all equal (one target, a
/// constant, no targets), so that the defaults derived from it stay
/// positive.
///
/// # Errors
/// [`Error::InvalidParameter`] naming `y` when the targets vary but their
/// variance, or the default noise variance `0.1 var(y)`, is not a normal
/// float64 (the variance underflowed to 0 or a subnormal, or overflowed):
/// defaults derived from it would be 0, infinite or have an infinite
/// reciprocal.
pub fn target_variance_scale(y: ArrayView1<'_, f64>) -> Result<f64> {
    variance_scale(target_variance(y))
}

/// [`target_variance_scale`] from the targets' moments, for fits whose
/// rows are held elsewhere (their caller reduces them): `var` is the
/// population variance `var(y)` of targets that vary, `None` when they are
/// all equal (their minimum is their maximum) or there are none. A variance
/// that underflowed to 0 is not that of equal targets, so the two are told
/// apart by `None`, not by `var = 0`.
///
/// # Errors
/// As [`target_variance_scale`].
pub fn variance_scale(var: Option<f64>) -> Result<f64> {
    match var {
        None => Ok(1.0),
        Some(var) if var > 0.0 && var.is_finite() && (0.1 * var).is_normal() => Ok(var),
        Some(var) if var.is_nan() || var < 0.0 => Err(Error::invalid(
            "y",
            format!("the targets' variance must be >= 0, got {var:?}"),
        )),
        Some(var) => Err(Error::invalid(
            "y",
            format!(
                "the targets vary, but their variance {} the float64 range, and the default \
                 kernel and noise variances are var(y) and 0.1 var(y); rescale y (e.g. divide \
                 it by its standard deviation)",
                if var.is_finite() {
                    "falls below"
                } else {
                    "overflows"
                }
            ),
        )),
    }
}

/// The target variances whose hyperparameter fits run in float64: from
/// `var(y)` the optimizer may move each variance by `e^±40` (about
/// `10^±17`), and the sparse bound's gradient divides by the fourth power
/// of the noise variance, which stays a normal float from here.
const TARGET_VARIANCE_RANGE: (f64, f64) = (1e-40, 1e40);

/// Refuses a hyperparameter fit on targets `y` that vary with a variance
/// outside `10^−40..10^40` (see [`check_target_scale`]); constant targets
/// are [`check_targets_vary`]'s to refuse.
///
/// # Errors
/// As [`check_target_scale`].
pub(crate) fn check_fit_target_scale(y: ArrayView1<'_, f64>) -> Result<()> {
    target_variance(y).map_or(Ok(()), check_target_scale)
}

/// Refuses a hyperparameter fit on targets of variance `var` outside
/// `10^−40..10^40` (a standard deviation beyond `10^±20`): rescaled, the
/// same targets fit to the same optimum (the fitted variances scale by the
/// square of the factor).
///
/// # Errors
/// [`Error::InvalidParameter`] naming `y` and the variance.
pub(crate) fn check_target_scale(var: f64) -> Result<()> {
    let (lo, hi) = TARGET_VARIANCE_RANGE;
    if (lo..=hi).contains(&var) {
        return Ok(());
    }
    let var = if var == 0.0 {
        "(below the float64 range)".to_string()
    } else {
        format!("{var:.3e}")
    };
    Err(Error::invalid(
        "y",
        format!(
            "the targets' variance {var} is outside {lo:e}..{hi:e}: a hyperparameter \
             fit moves the variances up to e^±40 from it, where their fourth powers leave \
             the float64 range; rescale y (e.g. divide it by its standard deviation)"
        ),
    ))
}

/// The refusal of a hyperparameter fit on constant targets (see
/// [`check_targets_vary`]); `n` targets.
pub(crate) fn constant_targets(n: usize) -> Error {
    Error::invalid(
        "y",
        format!(
            "the {n} training target(s) are constant{}: the marginal likelihood has no \
             maximum in the kernel and noise variances; fix them",
            if n == 1 { " (n_samples = 1)" } else { "" }
        ),
    )
}

/// Refuses a hyperparameter fit on targets that are constant after the
/// model's centering (all equal with `center`, all zero without): the
/// residual `y − ȳ` is then 0 and the log marginal likelihood
/// `−½ log|K + σ_n² I| + const` grows without bound as the variances shrink
/// (or a length scale grows), so every fit would end at the optimizer's
/// range, not at a maximum. Called by [`HyperInit::resolve`] when something
/// is free.
///
/// # Errors
/// [`Error::InvalidParameter`] naming `y` ([`constant_targets`]).
pub(crate) fn check_targets_vary(y: ArrayView1<'_, f64>, center: bool) -> Result<()> {
    let Some(&first) = y.first() else {
        return Ok(());
    };
    let level = if center { first } else { 0.0 };
    if y.iter().all(|&v| v == level) {
        return Err(constant_targets(y.len()));
    }
    Ok(())
}

/// The default noise variance of the GP regressors (docs/math/gp.rst,
/// section Exact GP): `σ_n² = 0.1 · var(y)`, with the zero-variance rule of
/// [`target_variance_scale`] (all targets equal: `σ_n² = 0.1`).
///
/// # Errors
/// As [`target_variance_scale`].
pub fn initial_noise_variance(y: ArrayView1<'_, f64>) -> Result<f64> {
    initial_noise_variance_of(target_variance(y))
}

/// [`initial_noise_variance`] from the targets' moments (see
/// [`variance_scale`]: `var` is `None` for targets all equal).
///
/// # Errors
/// As [`variance_scale`].
pub fn initial_noise_variance_of(var: Option<f64>) -> Result<f64> {
    Ok(0.1 * variance_scale(var)?)
}

/// Refuses a prediction whose means or variances are not finite (they
/// overflowed: inputs, features or targets too large for the float range).
pub(crate) fn check_prediction(
    mean: &ndarray::Array1<f64>,
    var: Option<&ndarray::Array1<f64>>,
) -> Result<()> {
    if mean
        .iter()
        .chain(var.into_iter().flatten())
        .all(|v| v.is_finite())
    {
        Ok(())
    } else {
        Err(Error::invalid(
            "X",
            "the predictive mean or variance overflows the float range: scale the inputs, \
             features or targets down",
        ))
    }
}

/// Checks that a variance is finite and `> 0`.
pub(crate) fn check_positive(name: &'static str, v: f64) -> Result<()> {
    if v.is_finite() && v > 0.0 {
        Ok(())
    } else {
        Err(Error::invalid(
            name,
            format!("must be finite and > 0, got {v:?}"),
        ))
    }
}

#[cfg(test)]
mod tests {
    use ndarray::{array, Array1, Array2};

    use super::*;

    #[test]
    fn target_variance_is_the_population_variance_or_one() {
        // var([1, 2, 3, 4]) = mean of (1.5², 0.5², 0.5², 1.5²) = 1.25.
        assert_eq!(
            target_variance_scale(array![1.0, 2.0, 3.0, 4.0].view()),
            Ok(1.25)
        );
        assert_eq!(
            initial_noise_variance(array![1.0, 2.0, 3.0, 4.0].view()),
            Ok(0.125)
        );
        // 0.1 three times: the computed mean is not exactly 0.1, so the
        // deviations would leave a rounding-sized variance; equal targets
        // give 1 (σ_n² = 0.1) whatever the rounding.
        for y in [
            Array1::from_elem(3, 0.1),
            Array1::from_elem(7, -2.3e-7),
            array![5.0],
            Array1::zeros(0),
        ] {
            assert_eq!(target_variance_scale(y.view()), Ok(1.0), "{y}");
            assert_eq!(initial_noise_variance(y.view()), Ok(0.1), "{y}");
        }
        // Targets that vary with a variance beyond the float range (below
        // it: 0 or a subnormal default noise variance, whose reciprocal
        // overflows) give no defaults.
        for y in [
            array![0.0, 1e-300],
            array![0.0, 1e-154],
            array![0.0, 1e155],
            array![-1e300, 1e300],
        ] {
            let e = target_variance_scale(y.view()).unwrap_err();
            assert!(e.to_string().contains("`y`"), "{y}: {e}");
            assert!(initial_noise_variance(y.view()).is_err(), "{y}");
        }
        assert!(target_variance_scale(array![0.0, 1e-150].view()).is_ok());
        // Moments reduced elsewhere: a negative or NaN variance is refused
        // (it passed as a normal float and gave negative defaults).
        for var in [-1.0, -4.0, f64::NAN] {
            let e = variance_scale(Some(var)).unwrap_err();
            assert!(e.to_string().contains(">= 0"), "{var}: {e}");
            assert!(initial_noise_variance_of(Some(var)).is_err());
        }
    }

    #[test]
    fn fits_refuse_targets_constant_after_centering() {
        let flat = Array1::from_elem(5, 2.5);
        let e = check_targets_vary(flat.view(), true).unwrap_err();
        assert!(
            e.to_string().contains("5 training target(s) are constant"),
            "{e}"
        );
        let e = check_targets_vary(array![3.0].view(), true).unwrap_err();
        assert!(e.to_string().contains("(n_samples = 1)"), "{e}");
        // Uncentered, only zeros are constant.
        assert!(check_targets_vary(flat.view(), false).is_ok());
        assert!(check_targets_vary(Array1::zeros(4).view(), false).is_err());
        assert!(check_targets_vary(array![2.5, 2.5, 2.6].view(), true).is_ok());
        assert!(check_targets_vary(Array1::zeros(0).view(), true).is_ok());
        // Through `resolve`: only with something free.
        let x = Array2::<f64>::zeros((5, 1));
        let fixed = optimize::HyperInit {
            optimize: vec![],
            ..Default::default()
        };
        assert!(fixed.resolve(x.view(), flat.view(), true).is_ok());
        let e = optimize::HyperInit::default()
            .resolve(x.view(), flat.view(), true)
            .unwrap_err();
        assert!(e.to_string().contains("are constant"), "{e}");
    }

    #[test]
    fn fits_take_target_variances_within_ten_to_the_forty() {
        for var in [1e-40, 1.0, 1e40] {
            assert!(check_target_scale(var).is_ok(), "{var}");
        }
        for var in [0.99e-40, 1.01e40, f64::INFINITY, f64::NAN] {
            let e = check_target_scale(var).unwrap_err().to_string();
            assert!(e.contains("`y`") && e.contains("rescale"), "{e}");
        }
    }
}
