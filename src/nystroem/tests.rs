//! Nyström oracles: with every training row as a landmark the map
//! reproduces the exact Gram matrix; with fewer it is exact on the landmarks.

use ndarray::Array2;

use super::*;
use crate::threads::Parallelism;

#[test]
fn nystroem_with_all_points_reproduces_the_gram() {
    let x = Array2::from_shape_fn((40, 3), |(i, j)| ((i * 5 + j) as f64 * 0.21).sin());
    for kernel in [
        Kernel::Gaussian,
        Kernel::Laplacian,
        Kernel::Matern12,
        Kernel::Matern52,
    ] {
        let (map, idx) = NystroemFeatures::fit(x.view(), 100, kernel, &[0.9], 1).unwrap();
        assert_eq!(idx.len(), 40);
        let phi = map.transform_into_new(x.view());
        let exact = kernel_matrix(x.view(), x.view(), kernel, 0.9);
        let err = (phi.dot(&phi.t()) - &exact)
            .iter()
            .fold(0.0_f64, |m, v| m.max(v.abs()));
        assert!(err < 1e-8, "{kernel:?}: {err}");
    }
    // Fewer landmarks: a low-rank approximation, exact on the landmarks.
    let (map, idx) = NystroemFeatures::fit(x.view(), 10, Kernel::Gaussian, &[0.9], 2).unwrap();
    let phi = map.transform_into_new(x.view());
    let exact = kernel_matrix(x.view(), x.view(), Kernel::Gaussian, 0.9);
    let approx = phi.dot(&phi.t());
    for &i in &idx {
        for &j in &idx {
            assert!((approx[(i, j)] - exact[(i, j)]).abs() < 1e-8);
        }
    }
    assert!(NystroemFeatures::fit(x.view(), 10, Kernel::Gaussian, &[0.0], 2).is_err());
}

#[test]
fn per_dimension_length_scales_are_the_unit_kernel_of_the_rescaled_inputs() {
    let x = Array2::from_shape_fn((30, 3), |(i, j)| ((i * 7 + 3 * j) as f64 * 0.37).cos());
    let ls = [0.5, 2.0, 1.3];
    for kernel in [Kernel::Gaussian, Kernel::Laplacian, Kernel::Matern32] {
        // Bit for bit the map of (x − c) / l at length scale 1, c the
        // landmarks' midrange.
        let (map, idx) = NystroemFeatures::fit(x.view(), 12, kernel, &ls, 3).unwrap();
        let center = midrange(map.landmarks.view());
        let scaled = unit_variance(kernel, &ls).scale(x.view(), &center);
        let (unit, unit_idx) = NystroemFeatures::fit(scaled.view(), 12, kernel, &[1.0], 3).unwrap();
        assert_eq!(idx, unit_idx);
        assert_eq!(map.normalization, unit.normalization);
        assert_eq!(map.landmarks, x.select(ndarray::Axis(0), &idx));
        assert_eq!(
            map.transform_into_new(x.view()),
            unit.transform_into_new(scaled.view())
        );
        // With every row a landmark, the Gram matrix of the ARD kernel.
        let (all, _) = NystroemFeatures::fit(x.view(), 30, kernel, &ls, 3).unwrap();
        let phi = all.transform_into_new(x.view());
        let exact = unit_variance(kernel, &ls).cross(x.view(), x.view(), Parallelism::Sequential);
        let err = (phi.dot(&phi.t()) - &exact)
            .iter()
            .fold(0.0_f64, |m, v| m.max(v.abs()));
        assert!(err < 1e-8, "{kernel:?}: {err}");
    }
    // One value per dimension, all equal: the one-length-scale map.
    let (same, _) = NystroemFeatures::fit(x.view(), 12, Kernel::Gaussian, &[0.9; 3], 3).unwrap();
    let (one, _) = NystroemFeatures::fit(x.view(), 12, Kernel::Gaussian, &[0.9], 3).unwrap();
    let d = same.transform_into_new(x.view()) - one.transform_into_new(x.view());
    assert!(d.iter().all(|v| v.abs() < 1e-12));
    // Another count, or a value that is not finite and > 0: refused.
    for bad in [
        &[1.0, 2.0][..],
        &[1.0, 2.0, 3.0, 4.0],
        &[1.0, -1.0, 1.0],
        &[1.0, f64::NAN, 1.0],
    ] {
        let e = NystroemFeatures::fit(x.view(), 12, Kernel::Gaussian, bad, 3).unwrap_err();
        assert!(e.to_string().contains("`length_scale`"), "{e}");
    }
    let mut edited = one.clone();
    edited.length_scale = vec![1.0, 2.0];
    assert!(edited.validate().is_err());
}

#[test]
fn inputs_far_from_the_origin_keep_their_digits() {
    // The same rows shifted by 2^30 (see kernels::tests::shifted_grid):
    // the kernels are centered on the landmarks before being scaled, so
    // the maps and the features have the same bits.
    let (x, x_far) = crate::kernels::tests::shifted_grid(40, 3, 8);
    for ls in [&[0.7][..], &[0.7, 1.1, 1.9]] {
        for kernel in [Kernel::Gaussian, Kernel::Matern52] {
            let (near, _) = NystroemFeatures::fit(x.view(), 15, kernel, ls, 3).unwrap();
            let (far, _) = NystroemFeatures::fit(x_far.view(), 15, kernel, ls, 3).unwrap();
            assert_eq!(near.normalization, far.normalization);
            assert_eq!(
                near.transform_into_new(x.view()),
                far.transform_into_new(x_far.view())
            );
        }
    }
}

impl NystroemFeatures {
    fn transform_into_new(&self, x: ndarray::ArrayView2<f64>) -> Array2<f64> {
        let mut out = Array2::zeros((x.nrows(), self.landmarks.nrows()));
        self.transform_into(x, out.view_mut(), Parallelism::Rayon)
            .unwrap();
        out
    }
}

/// The eigendecomposition runs on one thread: the map is the same bits in
/// pools of any size (faer's default eigendecomposition, split by the
/// pool's threads, changed the last bits of this map).
#[test]
fn the_fit_does_not_depend_on_the_thread_count() {
    let mut rng = crate::rng::seeded(4);
    let x = Array2::from_shape_fn((600, 20), |_| {
        rand_distr::Distribution::<f64>::sample(&rand_distr::StandardNormal, &mut rng)
    });
    let fit = |threads: usize| {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        pool.install(|| NystroemFeatures::fit(x.view(), 100, Kernel::Gaussian, &[3.2], 1).unwrap())
    };
    let (one, idx) = fit(1);
    for threads in [2, 4] {
        let (map, map_idx) = fit(threads);
        assert_eq!(map_idx, idx);
        assert_eq!(map.normalization, one.normalization, "{threads} threads");
    }
}
