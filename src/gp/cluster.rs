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
    // Xᵀ (d × n), so the distance loops vectorize over rows.
    let mut xt = vec![0.0; n * d];
    for (i, row) in x.axis_iter(Axis(0)).enumerate() {
        for (k, v) in row.iter().enumerate() {
            xt[k * n + i] = v.to_f64_exact();
        }
    }
    // The stop test compares squared distances: ‖·‖² ≤ θ² ⇔ ‖·‖ ≤ θ.
    let theta_sq = threshold.map_or(0.0, |t| t * t);
    let mut delta = vec![f64::INFINITY; n];
    let mut newest: Vec<f64> = start.to_vec();
    // Parallel chunks only when a pass is large enough to pay for the
    // fork-join (the result is the same either way: `farther` is a total
    // order, so any grouping of the reduction gives the same argmax).
    let parallel = par.is_parallel() && n * d >= 1 << 18;
    loop {
        let update = |(k, ds): (usize, &mut [f64])| {
            let i0 = k * CHUNK;
            let mut dd = [0.0; CHUNK];
            let dd = &mut dd[..ds.len()];
            sq_dists_t(&xt[i0..], n, &newest, dd);
            for (dv, &v) in ds.iter_mut().zip(dd.iter()) {
                if v < *dv {
                    *dv = v;
                }
            }
            let (mx, j) = first_max(ds);
            (mx, i0 + j)
        };
        let (max_sq, arg) = if parallel {
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
        newest = (0..d).map(|k| xt[k * n + arg]).collect();
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
    let k = centroids.nrows();
    // Centroidsᵀ (d × |C|), so the distances vectorize over centroids.
    let ct = centroids.t().as_standard_layout().into_owned();
    let Some(ct) = ct.as_slice() else {
        return Err(Error::Internal(
            "transposed centroids are contiguous".into(),
        ));
    };
    let assign = |dd: &mut Vec<f64>, row: ndarray::ArrayView1<'_, T>| {
        let r: Vec<f64> = row.iter().map(|v| v.to_f64_exact()).collect();
        dd.resize(k, 0.0);
        sq_dists_t(ct, k, &r, dd);
        // The first minimum (NaN distances never win), as a strict `<` scan.
        let mut best = (f64::INFINITY, 0usize);
        for (c, &v) in dd.iter().enumerate() {
            if v < best.0 {
                best = (v, c);
            }
        }
        best.1
    };
    Ok(if par.is_parallel() {
        x.axis_iter(Axis(0))
            .into_par_iter()
            .map_init(Vec::new, assign)
            .collect()
    } else {
        let mut dd = Vec::new();
        x.axis_iter(Axis(0)).map(|r| assign(&mut dd, r)).collect()
    })
}

/// The largest entry of `v` and its first index (`(−∞, 0)` when empty or
/// all NaN): eight independent lanes for the maximum, then a scan for it.
fn first_max(v: &[f64]) -> (f64, usize) {
    let mut lanes = [f64::NEG_INFINITY; 8];
    let mut chunks = v.chunks_exact(8);
    for ch in &mut chunks {
        for (l, &x) in lanes.iter_mut().zip(ch) {
            if x > *l {
                *l = x;
            }
        }
    }
    let mut mx = f64::NEG_INFINITY;
    for &x in lanes.iter().chain(chunks.remainder()) {
        if x > mx {
            mx = x;
        }
    }
    let at = v.iter().position(|&x| x == mx).unwrap_or(0);
    (mx, at)
}

/// `out[i] = Σ_k (xt[k·stride + i] − c[k])²` for `i < out.len()`: squared
/// distances of the columns of a `d × stride` row-major matrix (`xt`, e.g.
/// `Xᵀ`) to `c`, summed over `k = 0, 1, …` in order (the same value as a
/// per-row `Σ_k`), vectorized over columns.
#[inline(always)]
fn sq_dists_body(xt: &[f64], stride: usize, c: &[f64], out: &mut [f64]) {
    let m = out.len();
    for (k, &ck) in c.iter().enumerate() {
        let col = &xt[k * stride..k * stride + m];
        if k == 0 {
            for (o, &v) in out.iter_mut().zip(col) {
                *o = (v - ck) * (v - ck);
            }
        } else {
            for (o, &v) in out.iter_mut().zip(col) {
                *o += (v - ck) * (v - ck);
            }
        }
    }
    if c.is_empty() {
        out.fill(0.0);
    }
}

widest_simd! {
    /// [`sq_dists_body`] with the widest SIMD the CPU offers (the same result
    /// at every SIMD level: no FMA contraction).
    ///
    /// # Panics
    /// If `xt` is shorter than `(c.len() − 1)·stride + out.len()`.
    pub fn sq_dists_t(xt: &[f64], stride: usize, c: &[f64], out: &mut [f64]) = sq_dists_body;
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
