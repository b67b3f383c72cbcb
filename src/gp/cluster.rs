//! Farthest-point clustering and nearest-centroid assignment of the
//! localized Maclaurin GP (ALGORITHMS.md 8.2 step 3 and 8.3).

use ndarray::{Array2, ArrayView2, Axis};
use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::real::Real;
use crate::threads::Parallelism;

/// Rows per parallel work item (fixed, so results never depend on the
/// thread count).
const CHUNK: usize = 512;

/// The larger of two `(δ², index)` candidates; ties go to the smaller index.
fn farther(a: (f64, usize), b: (f64, usize)) -> (f64, usize) {
    if b.0 > a.0 || (b.0 == a.0 && b.1 < a.1) {
        b
    } else {
        a
    }
}

/// Farthest-point clustering of ALGORITHMS.md 8.2 step 3: starting from
/// `start` (the training mean), repeatedly appends the training row farthest
/// from all centroids (`δ_i = min_c ‖x_i − c‖`, ties to the smallest index)
/// until `max_i δ_i ≤ threshold` (absolute units of `x`) or there are
/// `max_clusters` centroids. With neither bound the result is `[start]`.
/// `δ` is maintained incrementally, `O(N d)` per added centroid (parallel
/// over fixed row chunks; deterministic). Returns the centroids
/// (`|C| × d`, the first row is `start`). `progress` is called with the
/// centroid count after each addition.
pub fn farthest_point<T: Real>(
    x: ArrayView2<'_, T>,
    start: &[f64],
    threshold: Option<f64>,
    max_clusters: Option<usize>,
    par: Parallelism,
    mut progress: impl FnMut(usize),
) -> Result<Array2<f64>> {
    let (n, d) = x.dim();
    if start.len() != d {
        return Err(Error::ShapeMismatch {
            name: "length of the first centroid",
            expected: d,
            got: start.len(),
        });
    }
    if let Some(t) = threshold {
        if !(t.is_finite() && t >= 0.0) {
            return Err(Error::invalid(
                "threshold",
                format!("must be a finite number >= 0, got {t}"),
            ));
        }
    }
    if max_clusters == Some(0) {
        return Err(Error::invalid("n_clusters", "must be >= 1, got 0"));
    }
    let mut centroids: Vec<f64> = start.to_vec();
    let mut count = 1usize;
    if threshold.is_none() && max_clusters.is_none() {
        return Array2::from_shape_vec((1, d), centroids)
            .map_err(|e| Error::Internal(e.to_string()));
    }
    let limit = max_clusters.unwrap_or(usize::MAX);
    // One contiguous f64 copy, so the distance loops run over plain slices.
    let flat: Vec<f64> = x.iter().map(|v| v.to_f64_exact()).collect();
    // The stop test compares squared distances: ‖·‖² ≤ θ² ⇔ ‖·‖ ≤ θ.
    let theta_sq = threshold.map_or(0.0, |t| t * t);
    let mut delta = vec![f64::INFINITY; n];
    let mut newest: Vec<f64> = start.to_vec();
    loop {
        let update = |(k, ds): (usize, &mut [f64])| {
            let mut best = (f64::NEG_INFINITY, usize::MAX);
            for (j, dv) in ds.iter_mut().enumerate() {
                let i = k * CHUNK + j;
                let dd: f64 = flat[i * d..(i + 1) * d]
                    .iter()
                    .zip(&newest)
                    .map(|(a, b)| (a - b) * (a - b))
                    .sum();
                if dd < *dv {
                    *dv = dd;
                }
                best = farther(best, (*dv, i));
            }
            best
        };
        let (max_sq, arg) = if par.is_parallel() {
            delta
                .par_chunks_mut(CHUNK)
                .enumerate()
                .map(update)
                .reduce(|| (f64::NEG_INFINITY, usize::MAX), farther)
        } else {
            delta
                .chunks_mut(CHUNK)
                .enumerate()
                .map(update)
                .fold((f64::NEG_INFINITY, usize::MAX), farther)
        };
        if n == 0 || max_sq <= theta_sq || count >= limit {
            break;
        }
        newest = flat[arg * d..(arg + 1) * d].to_vec();
        centroids.extend_from_slice(&newest);
        count += 1;
        progress(count);
    }
    Array2::from_shape_vec((count, d), centroids).map_err(|e| Error::Internal(e.to_string()))
}

/// The nearest centroid of every row of `x` (Euclidean; ties to the lowest
/// centroid index), ALGORITHMS.md 8.3. Parallel over rows; deterministic.
pub fn nearest<T: Real>(
    centroids: ArrayView2<'_, f64>,
    x: ArrayView2<'_, T>,
    par: Parallelism,
) -> Result<Vec<usize>> {
    Error::check_n_features(centroids.ncols(), x.ncols())?;
    let assign = |row: ndarray::ArrayView1<'_, T>| {
        let mut best = (f64::INFINITY, 0usize);
        for (c, cen) in centroids.axis_iter(Axis(0)).enumerate() {
            let dd = row
                .iter()
                .zip(cen)
                .map(|(v, c)| {
                    let t = v.to_f64_exact() - c;
                    t * t
                })
                .sum::<f64>();
            if dd < best.0 {
                best = (dd, c);
            }
        }
        best.1
    };
    Ok(if par.is_parallel() {
        x.axis_iter(Axis(0)).into_par_iter().map(assign).collect()
    } else {
        x.axis_iter(Axis(0)).map(assign).collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::array;

    fn cluster(theta: Option<f64>, k: Option<usize>) -> Vec<f64> {
        let x = array![[0.0], [1.0], [2.0], [10.0]];
        let c = farthest_point(x.view(), &[3.25], theta, k, Parallelism::Rayon, |_| {}).unwrap();
        c.column(0).to_vec()
    }

    #[test]
    fn clustering_example_of_algorithms_8() {
        assert_eq!(cluster(Some(2.0), None), vec![3.25, 10.0, 0.0]);
        assert_eq!(cluster(Some(1.0), None), vec![3.25, 10.0, 0.0, 2.0]);
        assert_eq!(cluster(None, None), vec![3.25]);
        assert_eq!(cluster(None, Some(2)), vec![3.25, 10.0]);
        assert_eq!(cluster(Some(1.0), Some(3)), vec![3.25, 10.0, 0.0]);
        // Only n_clusters: θ = 0, stops when every row is a centroid.
        assert_eq!(cluster(None, Some(10)), vec![3.25, 10.0, 0.0, 2.0, 1.0]);
        let c = array![[3.25], [10.0], [0.0]];
        let t = array![[1.8], [0.5], [7.0]];
        assert_eq!(
            nearest(c.view(), t.view(), Parallelism::Sequential).unwrap(),
            vec![0, 2, 1]
        );
    }

    #[test]
    fn ties_go_to_the_smallest_index() {
        // Rows 0 and 1 are equally far from the start; row 0 wins.
        let x = array![[-1.0, 0.0], [1.0, 0.0], [0.0, 0.5]];
        let c = farthest_point(
            x.view(),
            &[0.0, 0.0],
            None,
            Some(2),
            Parallelism::Rayon,
            |_| {},
        )
        .unwrap();
        assert_eq!(c.row(1).to_vec(), vec![-1.0, 0.0]);
        let cen = array![[1.0], [-1.0]];
        let t = array![[0.0]];
        assert_eq!(
            nearest(cen.view(), t.view(), Parallelism::Rayon).unwrap(),
            vec![0]
        );
    }

    #[test]
    fn bad_arguments() {
        let x = array![[0.0], [1.0]];
        assert!(farthest_point(
            x.view(),
            &[0.0],
            Some(-1.0),
            None,
            Parallelism::Rayon,
            |_| {}
        )
        .is_err());
        assert!(
            farthest_point(x.view(), &[0.0], None, Some(0), Parallelism::Rayon, |_| {}).is_err()
        );
        assert!(farthest_point(
            x.view(),
            &[0.0, 1.0],
            None,
            None,
            Parallelism::Rayon,
            |_| {}
        )
        .is_err());
        let c = array![[0.0, 1.0]];
        assert!(nearest(c.view(), x.view(), Parallelism::Rayon).is_err());
    }
}
