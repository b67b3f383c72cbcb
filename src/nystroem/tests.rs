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
        let (map, idx) = NystroemFeatures::fit(x.view(), 100, kernel, 0.9, 1).unwrap();
        assert_eq!(idx.len(), 40);
        let phi = map.transform_into_new(x.view());
        let exact = kernel_matrix(x.view(), x.view(), kernel, 0.9);
        let err = (phi.dot(&phi.t()) - &exact)
            .iter()
            .fold(0.0_f64, |m, v| m.max(v.abs()));
        assert!(err < 1e-8, "{kernel:?}: {err}");
    }
    // Fewer landmarks: a low-rank approximation, exact on the landmarks.
    let (map, idx) = NystroemFeatures::fit(x.view(), 10, Kernel::Gaussian, 0.9, 2).unwrap();
    let phi = map.transform_into_new(x.view());
    let exact = kernel_matrix(x.view(), x.view(), Kernel::Gaussian, 0.9);
    let approx = phi.dot(&phi.t());
    for &i in &idx {
        for &j in &idx {
            assert!((approx[(i, j)] - exact[(i, j)]).abs() < 1e-8);
        }
    }
    assert!(NystroemFeatures::fit(x.view(), 10, Kernel::Gaussian, 0.0, 2).is_err());
}

impl NystroemFeatures {
    fn transform_into_new(&self, x: ndarray::ArrayView2<f64>) -> Array2<f64> {
        let mut out = Array2::zeros((x.nrows(), self.landmarks.nrows()));
        self.transform_into(x, out.view_mut(), Parallelism::Rayon)
            .unwrap();
        out
    }
}
