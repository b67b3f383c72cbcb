//! The per-centroid statistics of the localized Maclaurin GP (ALGORITHMS.md
//! 8) on the GPU: for each centroid `c`, the features `Φ(x_i − c)` of its
//! neighbourhood (the training rows within the cutoff) and their Gram
//! `Φ_cᵀ Φ_c`, `Φ_cᵀ [y | 1]` are computed on the device (the map's
//! parameters uploaded once per call, the features never leaving it),
//! reduced in f64 on the host, and solved on the CPU in f64 (7.2).

use ndarray::{Array2, ArrayView1, ArrayView2};
use rayon::prelude::*;

use super::context;
use super::gram::map_gram;
use super::maclaurin::{check_supported, DeviceMaclaurin};
use crate::error::{Error, Result};
use crate::gp::features::{FeatureGp, FeatureStats};
use crate::linalg::{as_faer, Cholesky};
use crate::maclaurin::MaclaurinMap;
use crate::threads::Parallelism;

/// Centroids whose statistics are held at once before their solves.
const BATCH: usize = 32;

/// The feature-space GPs (7.2, targets not centered) of the centroids
/// `which` (rows of `centroids`), each on the training rows of `x` within
/// squared distance `cutoff_sq` of it (the prior `L = I`, `β = 0` when there
/// are none), with the statistics accumulated on the GPU. Accuracy: the
/// Gram entries carry the bound of [`super::gram`] on the f32 features of
/// [`super::maclaurin_features`]; the solves are f64. The Cholesky factors
/// run in parallel over centroids when `par` allows (each one sequential).
///
/// # Errors
/// As [`super::maclaurin_gram`]; [`Error::NotPositiveDefinite`] from a solve.
#[allow(clippy::too_many_arguments)]
pub fn localized_gps(
    map: &MaclaurinMap,
    x: ArrayView2<f64>,
    y: ArrayView1<f64>,
    centroids: ArrayView2<f64>,
    which: &[usize],
    cutoff_sq: f64,
    noise_variance: f64,
    par: Parallelism,
) -> Result<Vec<FeatureGp>> {
    check_supported(map)?;
    let (n, d) = x.dim();
    Error::check_n_features(d, centroids.ncols())?;
    if y.len() != n {
        return Err(Error::ShapeMismatch {
            name: "length of y (the number of rows of X)",
            expected: n,
            got: y.len(),
        });
    }
    let ctx = context::get()?;
    let width = map.width();
    let mut out = Vec::with_capacity(which.len());
    for batch in which.chunks(BATCH) {
        let mut stats = Vec::with_capacity(batch.len());
        {
            let _session = ctx.session()?;
            let mut dev = DeviceMaclaurin::new(ctx, map, vec![0.0; d])?;
            for &k in batch {
                let c = centroids.row(k);
                let rows: Vec<usize> = (0..n)
                    .filter(|&i| {
                        let dd: f64 = x.row(i).iter().zip(c).map(|(v, c)| (v - c) * (v - c)).sum();
                        dd < cutoff_sq
                    })
                    .collect();
                if rows.is_empty() {
                    stats.push(None);
                    continue;
                }
                let xs = Array2::from_shape_fn((rows.len(), d), |(r, a)| x[(rows[r], a)]);
                let ys =
                    Array2::from_shape_fn(
                        (rows.len(), 2),
                        |(r, j)| {
                            if j == 0 {
                                y[rows[r]]
                            } else {
                                1.0
                            }
                        },
                    );
                dev.set_center(&c.to_vec());
                let g = map_gram(ctx, &dev, xs.view(), Some(ys.view()))?;
                let b = g
                    .phi_t_y
                    .ok_or_else(|| Error::Internal("the GPU Gram lost Φᵀy".into()))?;
                let yr = ys.column(0);
                stats.push(Some(FeatureStats {
                    gram: g.phi_t_phi,
                    phi_y: b.column(0).to_owned(),
                    phi_sum: b.column(1).to_owned(),
                    n: rows.len() as u64,
                    y_shift: 0.0,
                    y_sum: yr.sum(),
                    y_sq_sum: yr.iter().map(|v| v * v).sum(),
                }));
            }
        }
        let solve = |s: &Option<FeatureStats>| -> Result<FeatureGp> {
            match s {
                Some(s) => FeatureGp::fit(s, noise_variance, false, Parallelism::Sequential),
                None => prior(width, noise_variance),
            }
        };
        let gps: Result<Vec<FeatureGp>> = if par.is_parallel() {
            stats.par_iter().map(solve).collect()
        } else {
            stats.iter().map(solve).collect()
        };
        out.extend(gps?);
    }
    Ok(out)
}

/// The GP of a centroid without training rows: `L = I`, `β = 0`.
fn prior(width: usize, noise_variance: f64) -> Result<FeatureGp> {
    let eye = Array2::<f64>::eye(width);
    Ok(FeatureGp {
        chol: Cholesky::new(as_faer(eye.view()), Parallelism::Sequential)?,
        beta: ndarray::Array1::zeros(width),
        y_mean: 0.0,
        noise_variance,
        lml: 0.0,
    })
}
