//! The stored form of a [`LocalizedMaclaurinGp`] (feature "serde"): the
//! fitted state by value, with the centroid GPs built so far, but not what
//! is derived from it (`Xᵀ` and the factor-projection cache), which loading
//! recomputes (deterministically, so the loaded model predicts the same
//! bits). Loading never refits: no allocation, clustering or GP is redone.

use std::sync::OnceLock;

use ndarray::{Array1, Array2};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::centroid_stats::project_rows_t;
use super::{FitTimings, LocalizedConfig, LocalizedMaclaurinGp};
use crate::error::{check_finite, Error, Result};
use crate::gp::FeatureGp;
use crate::maclaurin::map::MaclaurinMap;
use crate::progress::Monitor;
use crate::threads::Parallelism;

/// The fields that are stored, borrowed from the model.
#[derive(Serialize)]
struct StateRef<'a> {
    config: &'a LocalizedConfig,
    map: &'a MaclaurinMap,
    x: &'a Array2<f64>,
    y: &'a Array1<f64>,
    y_mean: f64,
    centroids: &'a Array2<f64>,
    cutoff_sq: f64,
    predictors: Vec<Option<&'a FeatureGp>>,
    timings: FitTimings,
}

/// The fields that are stored, owned (the same names and order as
/// [`StateRef`]).
#[derive(Deserialize)]
struct State {
    config: LocalizedConfig,
    map: MaclaurinMap,
    x: Array2<f64>,
    y: Array1<f64>,
    y_mean: f64,
    centroids: Array2<f64>,
    cutoff_sq: f64,
    predictors: Vec<Option<FeatureGp>>,
    timings: FitTimings,
}

impl Serialize for LocalizedMaclaurinGp {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        StateRef {
            config: &self.config,
            map: &self.map,
            x: &self.x,
            y: &self.y,
            y_mean: self.y_mean,
            centroids: &self.centroids,
            cutoff_sq: self.cutoff_sq,
            predictors: self.predictors.iter().map(OnceLock::get).collect(),
            timings: self.timings,
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for LocalizedMaclaurinGp {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let state = State::deserialize(d)?;
        from_state(state).map_err(serde::de::Error::custom)
    }
}

/// The model of a loaded state: shapes checked, `Xᵀ` and the projection
/// cache recomputed as the fit computes them.
fn from_state(s: State) -> Result<LocalizedMaclaurinGp> {
    let (n, d) = s.x.dim();
    for (name, expected, got) in [
        ("length of y (the number of rows of X)", n, s.y.len()),
        (
            "number of features of the centroids",
            d,
            s.centroids.ncols(),
        ),
        ("number of features of the map", d, s.map.dim()),
        (
            "number of centroid GPs (one per centroid)",
            s.centroids.nrows(),
            s.predictors.len(),
        ),
    ] {
        if got != expected {
            return Err(Error::ShapeMismatch {
                name,
                expected,
                got,
            });
        }
    }
    // The values the predictions use directly: finite data and target mean,
    // a cutoff that is a squared distance, and the map's hyperparameters
    // (its own configuration is checked on loading; the model's copy, which
    // the projections use, must agree).
    check_finite("X", s.x.iter())?;
    check_finite("y", s.y.iter().chain([&s.y_mean]))?;
    if s.cutoff_sq.is_nan() || s.cutoff_sq < 0.0 {
        return Err(Error::invalid(
            "cutoff_sq",
            format!("must be a squared distance >= 0, got {:?}", s.cutoff_sq),
        ));
    }
    let own = s.map.config();
    if (s.config.map.length_scale, s.config.map.kernel_variance)
        != (own.length_scale, own.kernel_variance)
    {
        return Err(Error::invalid(
            "config",
            "the stored configuration's length scale or kernel variance differs from the \
             stored map's own",
        ));
    }
    let inv_l = 1.0 / s.config.map.length_scale;
    let projections = project_rows_t(
        &s.map,
        s.x.view(),
        inv_l,
        Parallelism::Rayon,
        &Monitor::default(),
    )?;
    let predictors = s
        .predictors
        .into_iter()
        .map(|gp| gp.map_or_else(OnceLock::new, OnceLock::from))
        .collect();
    Ok(LocalizedMaclaurinGp {
        config: s.config,
        xt: s.x.t().as_standard_layout().into_owned(),
        x: s.x,
        y: s.y,
        y_mean: s.y_mean,
        centroids: s.centroids,
        cutoff_sq: s.cutoff_sq,
        projections,
        predictors,
        timings: s.timings,
        map: s.map,
    })
}
