//! Farthest-point clustering and nearest-centroid assignment of the
//! localized Maclaurin GP (`docs/math/localized.rst`, "Training" step 3 and
//! "Prediction").

use ndarray::{Array2, ArrayView2, Axis};
use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::progress::Monitor;
use crate::real::Real;
use crate::threads::Parallelism;

/// Rows per parallel work item (fixed, so results never depend on the
/// thread count).
const CHUNK: usize = 512;

/// The larger of two `(δ², chunk index)` candidates; ties go to the smaller
/// index (the earlier chunk, which holds the first row with that `δ²`).
fn farther(a: (f64, usize), b: (f64, usize)) -> (f64, usize) {
    if b.0 > a.0 || (b.0 == a.0 && b.1 < a.1) {
        b
    } else {
        a
    }
}

/// Farthest-point clustering of `docs/math/localized.rst`, "Training" step 3:
/// starting from `start` (the training mean), repeatedly appends the training
/// row farthest from all centroids (`δ_i = min_c ‖x_i − c‖`, ties to the
/// smallest index) until `max_i δ_i ≤ threshold` (absolute units of `x`) or
/// there are `max_clusters` centroids. With neither bound the result is
/// `[start]`. `δ` is maintained incrementally, `O(N d)` per added centroid
/// (parallel over fixed row chunks; deterministic). Returns the centroids
/// (`|C| × d`, the first row is `start`). `monitor` gets the stage "centroids"
/// (one unit per centroid; the total is `max_clusters`, or 0 when only the
/// threshold bounds the count) and is checked before every pass.
pub fn farthest_point<T: Real>(
    x: ArrayView2<'_, T>,
    start: &[f64],
    threshold: Option<f64>,
    max_clusters: Option<usize>,
    par: Parallelism,
    monitor: &Monitor,
) -> Result<Array2<f64>> {
    let (n, d) = x.dim();
    if start.len() != d {
        return Err(Error::ShapeMismatch {
            name: "length of the first centroid",
            expected: d,
            got: start.len(),
        });
    }
    if let Some(t) = threshold
        && !(t.is_finite() && t >= 0.0)
    {
        return Err(Error::invalid(
            "threshold",
            format!("must be a finite number >= 0, got {t}"),
        ));
    }
    if max_clusters == Some(0) {
        return Err(Error::invalid("n_clusters", "must be >= 1, got 0"));
    }
    let mut centroids: Vec<f64> = start.to_vec();
    let mut count = 1usize;
    monitor.stage("centroids", max_clusters.unwrap_or(0) as u64);
    monitor.advance(1);
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
    // order, so any grouping of the reduction gives the same chunk).
    let parallel = par.is_parallel() && n * d >= 1 << 18;
    loop {
        monitor.check()?;
        // One fused pass per chunk: δ ← min(δ, ‖x − newest‖²) and the
        // chunk's largest δ; then the first index of the overall maximum,
        // searched in the first chunk that holds it.
        let update =
            |(k, ds): (usize, &mut [f64])| (min_update(&xt[k * CHUNK..], n, &newest, ds), k);
        let (max_sq, chunk) = if parallel {
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
        let arg = delta
            .chunks(CHUNK)
            .nth(chunk)
            .and_then(|ds| ds.iter().position(|&v| v == max_sq))
            .map_or(0, |j| chunk * CHUNK + j);
        if n == 0 || max_sq <= theta_sq || count >= limit {
            break;
        }
        newest = (0..d).map(|k| xt[k * n + arg]).collect();
        centroids.extend_from_slice(&newest);
        count += 1;
        monitor.advance(1);
    }
    Array2::from_shape_vec((count, d), centroids).map_err(|e| Error::Internal(e.to_string()))
}

/// The nearest centroid of every row of `x` (Euclidean; ties to the lowest
/// centroid index), `docs/math/localized.rst`, "Prediction". Parallel over
/// rows; deterministic. `monitor` is checked before every row.
pub fn nearest<T: Real>(
    centroids: ArrayView2<'_, f64>,
    x: ArrayView2<'_, T>,
    par: Parallelism,
    monitor: &Monitor,
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
    let assign = |dd: &mut Vec<f64>, row: ndarray::ArrayView1<'_, T>| -> Result<usize> {
        monitor.check()?;
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
        Ok(best.1)
    };
    if par.is_parallel() {
        x.axis_iter(Axis(0))
            .into_par_iter()
            .map_init(Vec::new, assign)
            .collect()
    } else {
        let mut dd = Vec::new();
        x.axis_iter(Axis(0)).map(|r| assign(&mut dd, r)).collect()
    }
}

/// Lanes of [`min_update_body`] (one AVX-512 register of `f64`).
const LANES: usize = 8;

/// `δ_i ← min(δ_i, ‖x_i − c‖²)` for the columns `i < δ.len()` of the
/// `d × stride` row-major `xt` (the squared distance summed over
/// `k = 0, 1, …` in order, the same value as [`sq_dists_t`]), in one pass;
/// returns the largest updated `δ_i` (`−∞` when empty or all NaN).
#[inline(always)]
fn min_update_body(xt: &[f64], stride: usize, c: &[f64], delta: &mut [f64]) -> f64 {
    let mut mx = [f64::NEG_INFINITY; LANES];
    let len = delta.len();
    let mut blocks = delta.chunks_exact_mut(LANES);
    for (b, dv) in (&mut blocks).enumerate() {
        let i = b * LANES;
        let mut acc = [0.0; LANES];
        for (k, &ck) in c.iter().enumerate() {
            let col = &xt[k * stride + i..k * stride + i + LANES];
            for (a, &v) in acc.iter_mut().zip(col) {
                *a += (v - ck) * (v - ck);
            }
        }
        for ((d, a), m) in dv.iter_mut().zip(acc).zip(mx.iter_mut()) {
            if a < *d {
                *d = a;
            }
            if *d > *m {
                *m = *d;
            }
        }
    }
    let rest = blocks.into_remainder();
    let i0 = len - rest.len();
    for (i, d) in rest.iter_mut().enumerate().map(|(k, d)| (i0 + k, d)) {
        let mut a = 0.0;
        for (k, &ck) in c.iter().enumerate() {
            let v = xt[k * stride + i];
            a += (v - ck) * (v - ck);
        }
        if a < *d {
            *d = a;
        }
        if *d > mx[0] {
            mx[0] = *d;
        }
    }
    mx.into_iter()
        .fold(f64::NEG_INFINITY, |m, v| if v > m { v } else { m })
}

widest_simd! {
    /// [`min_update_body`] with the widest SIMD the CPU offers (no FMA
    /// contraction: the distances are those of [`sq_dists_t`] at every
    /// SIMD level).
    fn min_update(xt: &[f64], stride: usize, c: &[f64], delta: &mut [f64]) -> f64 = min_update_body;
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
    /// `sq_dists_body` with the widest SIMD the CPU offers (the same result
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
        let c = farthest_point(
            x.view(),
            &[3.25],
            theta,
            k,
            Parallelism::Rayon,
            &Monitor::default(),
        )
        .unwrap();
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
            nearest(
                c.view(),
                t.view(),
                Parallelism::Sequential,
                &Monitor::default()
            )
            .unwrap(),
            vec![0, 2, 1]
        );
    }

    #[test]
    fn clustering_reports_its_centroids_and_stops_on_a_cancel() {
        let x = array![[0.0], [1.0], [2.0], [10.0]];
        for (k, want) in [
            (None, ("centroids".to_string(), 4, 0)),
            (Some(2), ("centroids".to_string(), 2, 2)),
        ] {
            let monitor = Monitor::new();
            farthest_point(
                x.view(),
                &[3.25],
                Some(1.0),
                k,
                Parallelism::Rayon,
                &monitor,
            )
            .unwrap();
            assert_eq!(monitor.snapshot(), want);
        }
        let cancelled = Monitor::new();
        cancelled.cancel();
        for par in [Parallelism::Sequential, Parallelism::Rayon] {
            let r = farthest_point(x.view(), &[3.25], Some(1.0), None, par, &cancelled);
            assert_eq!(r.unwrap_err(), Error::Interrupted);
            let r = nearest(x.view(), x.view(), par, &cancelled);
            assert_eq!(r.unwrap_err(), Error::Interrupted);
        }
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
            &Monitor::default(),
        )
        .unwrap();
        assert_eq!(c.row(1).to_vec(), vec![-1.0, 0.0]);
        let cen = array![[1.0], [-1.0]];
        let t = array![[0.0]];
        assert_eq!(
            nearest(
                cen.view(),
                t.view(),
                Parallelism::Rayon,
                &Monitor::default()
            )
            .unwrap(),
            vec![0]
        );
    }

    /// Farthest-point clustering recomputed from scratch at every step
    /// (`δ_i = min_c ‖x_i − c‖²`, the distance summed in the same order),
    /// first maximum in row order.
    fn naive(x: &Array2<f64>, start: &[f64], theta: f64, limit: usize) -> Vec<Vec<f64>> {
        let mut cs = vec![start.to_vec()];
        let dist = |r: ndarray::ArrayView1<'_, f64>, c: &[f64]| {
            r.iter()
                .zip(c)
                .fold(0.0, |a, (v, ck)| a + (v - ck) * (v - ck))
        };
        while cs.len() < limit {
            let (mut best, mut arg) = (f64::NEG_INFINITY, 0);
            for (i, r) in x.rows().into_iter().enumerate() {
                let d = cs.iter().map(|c| dist(r, c)).fold(f64::INFINITY, f64::min);
                if d > best {
                    (best, arg) = (d, i);
                }
            }
            if best <= theta * theta {
                break;
            }
            cs.push(x.row(arg).to_vec());
        }
        cs
    }

    #[test]
    fn fused_passes_match_the_naive_clustering() {
        use crate::rng::seeded;
        use rand::Rng as _;
        let mut rng = seeded(3);
        // Random rows (n not a multiple of the lanes or of CHUNK) and a
        // grid with many equal distances (ties to the smallest index).
        let random = Array2::from_shape_fn((1_203, 5), |_| rng.random::<f64>() * 4.0);
        let grid =
            Array2::from_shape_fn((700, 3), |(i, k)| ((i / 7usize.pow(k as u32)) % 7) as f64);
        for (x, theta) in [(random, 1.2), (grid, 1.5)] {
            let start: Vec<f64> = vec![1.0; x.ncols()];
            let want = naive(&x, &start, theta, usize::MAX);
            assert!(want.len() > 20);
            for par in [Parallelism::Sequential, Parallelism::Rayon] {
                let got = farthest_point(
                    x.view(),
                    &start,
                    Some(theta),
                    None,
                    par,
                    &Monitor::default(),
                )
                .unwrap();
                assert_eq!(got.nrows(), want.len());
                for (g, w) in got.rows().into_iter().zip(&want) {
                    assert_eq!(g.to_vec(), *w);
                }
            }
        }
        // A pass large enough to run in parallel chunks.
        let big = Array2::from_shape_fn((70_001, 4), |_| rng.random::<f64>());
        let want = naive(&big, &[0.5; 4], 0.0, 12);
        for par in [Parallelism::Sequential, Parallelism::Rayon] {
            let got = farthest_point(
                big.view(),
                &[0.5; 4],
                None,
                Some(12),
                par,
                &Monitor::default(),
            )
            .unwrap();
            for (g, w) in got.rows().into_iter().zip(&want) {
                assert_eq!(g.to_vec(), *w);
            }
        }
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
            &Monitor::default()
        )
        .is_err());
        assert!(farthest_point(
            x.view(),
            &[0.0],
            None,
            Some(0),
            Parallelism::Rayon,
            &Monitor::default()
        )
        .is_err());
        assert!(farthest_point(
            x.view(),
            &[0.0, 1.0],
            None,
            None,
            Parallelism::Rayon,
            &Monitor::default()
        )
        .is_err());
        let c = array![[0.0, 1.0]];
        assert!(nearest(c.view(), x.view(), Parallelism::Rayon, &Monitor::default()).is_err());
    }
}
