//! The public Rust API at the edges of its arguments: sizes whose
//! arithmetic would wrap (`usize::MAX` dimensions and class counts), public
//! fields set to disagreeing shapes, indices beyond what exists. Each call
//! must return its documented error, not panic, wrap or allocate without
//! bound, and a statistics update that fails must leave the statistics as
//! they were.

use ndarray::{array, Array1, Array2};

use crate::binning::{BinningGrids, Laplacian};
use crate::error::Error;
use crate::fourier::features::{FourierConfig, FourierFeatures};
use crate::fourier::samplers::Sampler;
use crate::fwht::check_power_of_two;
use crate::gp::dirichlet::{ClassStats, ExactGpc, SparseClassStats, SparseGpc, SparseGpcConfig};
use crate::gp::features::FeatureGp;
use crate::gp::sparse::{InducingInit, InducingPrior, Method, SparseStats};
use crate::kernels::{kernel_matrix, Kernel, StationaryKernel};
use crate::maclaurin::map::{MaclaurinConfig, MaclaurinMap};
use crate::maclaurin::{random, MaclaurinKernel};
use crate::progress::Monitor;
use crate::sketch::{padded_dim, PolySketch, PolynomialConfig, PolynomialFeatures, SketchKind};
use crate::stats::FeatureStats;
use crate::threads::Parallelism;

const PAR: Parallelism = Parallelism::Sequential;

fn is_invalid(e: &Error, param: &str) -> bool {
    matches!(e, Error::InvalidParameter { name, .. } if *name == param)
}

/// Thirty rows of two inputs and three classes.
fn classes() -> (Array2<f64>, Vec<usize>) {
    let x = Array2::from_shape_fn((30, 2), |(i, j)| ((i * 7 + j * 3) % 11) as f64 / 11.0);
    (x, (0..30).map(|i| i % 3).collect())
}

fn gaussian(l: f64) -> StationaryKernel {
    StationaryKernel {
        kernel: Kernel::Gaussian,
        length_scale: vec![l],
        variance: 1.0,
    }
}

#[test]
fn dimensions_without_a_power_of_two_are_refused() {
    assert_eq!(padded_dim(0).unwrap(), 1);
    assert_eq!(padded_dim(5).unwrap(), 8);
    assert_eq!(padded_dim(1 << 63).unwrap(), 1 << 63);
    let e = padded_dim((1 << 63) + 1).unwrap_err();
    assert!(is_invalid(&e, "dim"), "{e}");
    let mut rng = crate::rng::seeded(0);
    let e = PolySketch::draw(SketchKind::TensorSrht, false, 2, usize::MAX, 8, &mut rng)
        .map(|_| ())
        .unwrap_err();
    assert!(is_invalid(&e, "dim"), "{e}");
    let c = PolynomialConfig {
        n_components: 8,
        degree: 2,
        bias: 1.0,
        length_scale: 1.0,
        sketch: SketchKind::TensorSrht,
        complex: false,
    };
    let e = PolynomialFeatures::draw(&c, usize::MAX, 0)
        .map(|_| ())
        .unwrap_err();
    assert!(is_invalid(&e, "dim"), "{e}");
    let e = Sampler::MomentMatching
        .check(Kernel::Gaussian, 8, usize::MAX)
        .unwrap_err();
    assert!(
        e.to_string()
            .contains(">= 36893488147419103232 with cos_sin"),
        "{e}"
    );
    let e = check_power_of_two(usize::MAX).unwrap_err();
    assert!(is_invalid(&e, "len"), "{e}");
    assert!(matches!(
        check_power_of_two(5),
        Err(Error::NotPowerOfTwo { len: 5, next: 8 })
    ));
}

#[test]
fn a_maclaurin_allocation_beyond_the_address_range_is_refused() {
    let config = MaclaurinConfig::new(MaclaurinKernel::Gaussian, 8);
    let e = MaclaurinMap::from_allocation(&config, usize::MAX, vec![1, 7], None, 0)
        .map(|_| ())
        .unwrap_err();
    assert!(is_invalid(&e, "n_components"), "{e}");
    // Column counts whose sum wraps a usize: refused as a width that is not
    // n_components, with the true sum in the message.
    let e = MaclaurinMap::from_allocation(&config, 2, vec![1, usize::MAX, 8], None, 0)
        .map(|_| ())
        .unwrap_err();
    assert!(is_invalid(&e, "allocation"), "{e}");
    assert!(
        e.to_string().contains("18446744073709551624 columns"),
        "{e}"
    );
    // The same allocation in range builds.
    MaclaurinMap::from_allocation(&config, 2, vec![1, 3, 4], None, 0).unwrap();
}

#[test]
fn class_counts_beyond_the_address_range_are_refused() {
    let (x, labels) = classes();
    let e = ExactGpc::fit(
        x.view(),
        &labels,
        usize::MAX,
        gaussian(0.5),
        0.01,
        1 << 30,
        PAR,
    )
    .map(|_| ())
    .unwrap_err();
    assert!(is_invalid(&e, "X"), "{e}");
    let cfg = SparseGpcConfig {
        kernel: gaussian(0.5),
        n_inducing: 5,
        inducing: InducingInit::KMeans,
        alpha_epsilon: 0.01,
        seed: 0,
        chunk_rows: None,
    };
    let e = SparseGpc::fit(
        x.view(),
        &labels,
        usize::MAX,
        &cfg,
        PAR,
        &Monitor::default(),
    )
    .map(|_| ())
    .unwrap_err();
    assert!(is_invalid(&e, "n_inducing"), "{e}");
}

#[test]
fn statistics_of_disagreeing_shapes_are_refused_unchanged() {
    let mut a = FeatureStats::new(3);
    a.accumulate(array![[1.0, 2.0, 3.0]].view(), array![1.0].view(), PAR)
        .unwrap();
    let mut b = a.clone();
    b.gram = Array2::zeros((2, 2));
    let before = a.clone();
    let e = a.merge(&b).unwrap_err();
    assert!(matches!(e, Error::ShapeMismatch { got: 2, .. }), "{e}");
    assert_eq!(a, before);
    let e = b.accumulate(array![[1.0, 2.0, 3.0]].view(), array![1.0].view(), PAR);
    assert!(matches!(e, Err(Error::ShapeMismatch { .. })), "{e:?}");
    // A gram that is not in standard layout: refused before any sum moves.
    let mut t = a.clone();
    t.gram = t.gram.reversed_axes();
    let e = t.accumulate(array![[1.0, 2.0, 3.0]].view(), array![1.0].view(), PAR);
    assert!(
        matches!(e, Err(Error::InvalidParameter { name: "gram", .. })),
        "{e:?}"
    );
    assert_eq!(t.n, 1);

    let mut s = SparseStats::new(Method::Vfe, 3);
    let mut o = SparseStats::new(Method::Vfe, 3);
    o.n = 1;
    o.k_sum = Array1::zeros(2);
    let e = s.merge(&o).unwrap_err();
    assert!(matches!(e, Error::ShapeMismatch { got: 2, .. }), "{e}");
    assert_eq!(s, SparseStats::new(Method::Vfe, 3));
}

#[test]
fn the_prior_feature_gp_checks_its_width_and_noise() {
    let e = FeatureGp::prior(1 << 40, 1.0).map(|_| ()).unwrap_err();
    assert!(is_invalid(&e, "n_components"), "{e}");
    for noise in [-1.0, 0.0, f64::NAN, f64::INFINITY] {
        let e = FeatureGp::prior(2, noise).map(|_| ()).unwrap_err();
        assert!(is_invalid(&e, "noise_variance"), "{noise}: {e}");
    }
    assert_eq!(FeatureGp::prior(2, 0.5).unwrap().noise_variance, 0.5);
}

#[test]
fn a_failed_class_update_changes_no_class() {
    // Row 1 (class 1) is NaN: class 0's rows come first in the per-class
    // loop, and must not be added.
    let phi = array![[1.0, 0.5], [f64::NAN, 1.0], [0.25, 2.0]];
    let mut s = ClassStats::new(3, 2);
    let e = s.accumulate(phi.view(), &[0, 1, 2], PAR).unwrap_err();
    assert!(matches!(e, Error::NonFinite { .. }), "{e}");
    assert_eq!(s, ClassStats::new(3, 2));
    // A class whose statistics have another shape: no class changes.
    let ok = array![[1.0, 0.5], [0.5, 1.0], [0.25, 2.0]];
    s.classes[2] = FeatureStats::new(3);
    let e = s.accumulate(ok.view(), &[0, 1, 2], PAR).unwrap_err();
    assert!(matches!(e, Error::ShapeMismatch { .. }), "{e}");
    assert_eq!(s.n(), 0);
    // Merges: all classes or none.
    let mut good = ClassStats::new(3, 2);
    good.accumulate(ok.view(), &[0, 1, 2], PAR).unwrap();
    let before = good.clone();
    let e = good.merge(&s).unwrap_err();
    assert!(matches!(e, Error::ShapeMismatch { .. }), "{e}");
    assert_eq!(good, before);

    let (x, labels) = classes();
    let prior = InducingPrior::new(gaussian(0.5), 1.0, x.slice(ndarray::s![..4, ..]), PAR).unwrap();
    let mut scratch = Vec::new();
    let mut sparse = SparseClassStats::new(3, 4);
    let mut bad = x.clone();
    bad[(4, 0)] = f64::NAN; // class 1
    let e = sparse
        .accumulate(&prior, bad.view(), &labels, &mut scratch, PAR)
        .unwrap_err();
    assert!(matches!(e, Error::NonFinite { .. }), "{e}");
    assert_eq!(sparse, SparseClassStats::new(3, 4));
    let mut wide = SparseClassStats::new(3, 4);
    wide.classes[2] = SparseStats::new(Method::Vfe, 5);
    let e = wide
        .accumulate(&prior, x.view(), &labels, &mut scratch, PAR)
        .unwrap_err();
    assert!(matches!(e, Error::ShapeMismatch { .. }), "{e}");
    assert_eq!(wide.n(), 0);
    sparse
        .accumulate(&prior, x.view(), &labels, &mut scratch, PAR)
        .unwrap();
    let before = sparse.clone();
    let e = sparse.merge(&wide).unwrap_err();
    assert!(matches!(e, Error::ShapeMismatch { .. }), "{e}");
    assert_eq!(sparse, before);
}

#[test]
fn indices_and_supports_that_do_not_exist_are_refused() {
    let grids = BinningGrids::draw(&Laplacian::new(1.0).unwrap(), 4, 2, 0).unwrap();
    assert_eq!(grids.bins(&[0.1f64, 0.2], 3).unwrap().len(), 2);
    let e = grids.bins(&[0.1f64, 0.2], 4).unwrap_err();
    assert!(is_invalid(&e, "p"), "{e}");
    let mut rng = crate::rng::seeded(0);
    let e = random::draw_counts(&[], 5, &mut rng).unwrap_err();
    assert!(is_invalid(&e, "probs"), "{e}");
    let e = random::draw_counts(&[0.0, 0.0], 5, &mut rng).unwrap_err();
    assert!(is_invalid(&e, "probs"), "{e}");
    assert_eq!(
        random::draw_counts(&[], 0, &mut rng).unwrap(),
        Vec::<usize>::new()
    );
    assert_eq!(
        random::draw_counts(&[0.0, 1.0], 3, &mut rng).unwrap(),
        vec![0, 3]
    );
}

#[test]
fn float32_fourier_features_beyond_float32_are_refused() {
    let mut c = FourierConfig::new(8);
    c.kernel_variance = 1e80;
    let map = FourierFeatures::fit(&c, 2, 0).unwrap();
    let e = map
        .transform::<f32>(array![[0.1f32, 0.2]].view(), PAR)
        .unwrap_err();
    assert!(is_invalid(&e, "kernel_variance"), "{e}");
    // float64 holds them, and float32 holds a variance of 1e70.
    let f = map
        .transform::<f64>(array![[0.1, 0.2]].view(), PAR)
        .unwrap();
    assert!(f.iter().all(|v| v.is_finite()));
    c.kernel_variance = 1e70;
    let map = FourierFeatures::fit(&c, 2, 0).unwrap();
    let f = map
        .transform::<f32>(array![[0.1f32, 0.2]].view(), PAR)
        .unwrap();
    assert!(f.iter().all(|v| v.is_finite()));
}

#[test]
#[should_panic(expected = "differ in width")]
fn a_kernel_matrix_of_inputs_of_two_widths_panics() {
    kernel_matrix(
        Array2::<f64>::zeros((2, 2)).view(),
        Array2::<f64>::zeros((2, 3)).view(),
        Kernel::Gaussian,
        1.0,
    );
}

#[test]
#[should_panic(expected = "differ in width")]
fn a_cross_covariance_of_inputs_of_two_widths_panics() {
    gaussian(1.0).cross(
        array![[0.0, 0.0]].view(),
        array![[0.0, 0.0, 5.0]].view(),
        PAR,
    );
}

#[test]
#[should_panic(expected = "differ in length")]
fn a_kernel_value_of_inputs_of_two_lengths_panics() {
    Kernel::Matern32.eval(&[0.0, 0.0], &[0.0, 0.0, 5.0], 1.0);
}

#[test]
fn float32_maclaurin_features_beyond_float32_are_refused() {
    let x = array![[0.1f32, 0.2], [0.3, -0.1]];
    let mut c = MaclaurinConfig::new(MaclaurinKernel::Gaussian, 8);
    c.kernel_variance = 1e80;
    let map = MaclaurinMap::fit(x.view(), &c, 0, PAR, &Monitor::default()).unwrap();
    let mut out = Array2::<f32>::zeros((2, 8));
    let e = map
        .transform_into(x.view(), out.view_mut(), PAR)
        .unwrap_err();
    assert!(is_invalid(&e, "kernel_variance"), "{e}");
    let mut out = Array2::<f64>::zeros((2, 8));
    map.transform_into(x.mapv(f64::from).view(), out.view_mut(), PAR)
        .unwrap();
    assert!(out.iter().all(|v| v.is_finite()));
}

#[test]
fn statistics_whose_sums_overflow_are_refused() {
    // Targets of 1e160: their squares overflow (a fit used to fail later
    // on "`y statistics` contains NaN", or report a NaN likelihood).
    let phi = array![[1.0, 0.5], [0.5, 1.0], [0.25, 2.0]];
    let big_y = array![1e160, -1e160, 0.0];
    let e = FeatureStats::new(2)
        .accumulate(phi.view(), big_y.view(), PAR)
        .unwrap_err();
    assert!(is_invalid(&e, "y"), "{e}");
    // Each part finite, their merge not: refused, naming y.
    let mut a = FeatureStats::new(2);
    a.accumulate(phi.view(), array![1e153, -1e153, 0.0].view(), PAR)
        .unwrap();
    a.y_sq_sum = f64::MAX;
    let e = a.clone().merge(&a).unwrap_err();
    assert!(is_invalid(&e, "y"), "{e}");
    // Features of 1e160: their Gram overflows, named X.
    let e = FeatureStats::new(2)
        .accumulate((&phi * 1e160).view(), array![1.0, 0.0, 2.0].view(), PAR)
        .unwrap_err();
    assert!(is_invalid(&e, "X"), "{e}");
    // Finite sums near the top of the range are kept.
    let mut near = FeatureStats::new(2);
    near.accumulate(
        (&phi * 1e150).view(),
        array![1e150, 0.0, -1e150].view(),
        PAR,
    )
    .unwrap();
    assert!(near.validate().is_ok());

    let (x, _) = classes();
    let prior = InducingPrior::new(gaussian(0.5), 1.0, x.slice(ndarray::s![..4, ..]), PAR).unwrap();
    let mut y = Array1::zeros(x.nrows());
    y[0] = 1e160;
    for method in [Method::Vfe, Method::Fitc] {
        let e = SparseStats::new(method, 4)
            .accumulate(&prior, x.view(), y.view(), &mut Vec::new(), PAR)
            .unwrap_err();
        assert!(is_invalid(&e, "y"), "{method:?}: {e}");
    }
}

/// Maps of edited or stored parts that the transforms could not take: a
/// projection of no input (a division by zero in the fused plan), SORF
/// sizes whose row count overflows, polynomial features wider than memory
/// (an unchecked allocation), polynomial kernels whose coefficients
/// overflow or whose degree exceeds the sketches' (a debug assertion, and
/// an infinite coefficient in release builds).
#[test]
fn parts_that_no_transform_can_take_are_refused() {
    use crate::fourier::features::{Projection, Variant};

    let empty = FourierFeatures::from_parts(
        Projection::Dense(Array2::zeros((4, 0))),
        None,
        Variant::CosSin,
        8,
        1.0,
    )
    .unwrap_err();
    assert!(is_invalid(&empty, "projection"), "{empty}");

    let mut cfg = FourierConfig::new(8);
    cfg.sampler = Sampler::Structured;
    let mut map = FourierFeatures::fit(&cfg, 1, 0).unwrap();
    if let Projection::Structured { n_frequencies, .. } = &mut map.projection {
        *n_frequencies = usize::MAX / 2;
    }
    map.n_components = usize::MAX - 1;
    assert!(matches!(map.validate(), Err(Error::ShapeMismatch { .. })));

    let sketch = PolySketch::draw(
        SketchKind::TensorSrht,
        false,
        2,
        3,
        8,
        &mut crate::rng::seeded(0),
    )
    .unwrap();
    let wide = PolynomialFeatures::new(sketch, 0.0, 1.0, usize::MAX / 4).unwrap();
    let e = wide
        .transform(Array2::<f64>::zeros((1, 3)).view(), PAR)
        .unwrap_err();
    assert!(is_invalid(&e, "n_components"), "{e}");

    let x = Array2::from_shape_fn((20, 3), |(i, j)| ((i * 3 + j) as f64 * 0.1).sin());
    for (kernel, name) in [
        (
            MaclaurinKernel::Polynomial {
                degree: 2,
                bias: 1e200,
            },
            "bias",
        ),
        (
            MaclaurinKernel::Polynomial {
                degree: 33,
                bias: 1.0,
            },
            "degree",
        ),
    ] {
        for dim in [1, 3] {
            let cfg = MaclaurinConfig::new(kernel, 8);
            let xs = x.slice(ndarray::s![.., ..dim]);
            let e = MaclaurinMap::fit(xs, &cfg, 0, PAR, &Monitor::default()).unwrap_err();
            assert!(is_invalid(&e, name), "{e}");
        }
    }
}

/// A non-finite input was reported as features that overflow.
#[test]
fn a_sketch_names_non_finite_input_as_such() {
    let sketch = PolySketch::draw(
        SketchKind::Rademacher,
        false,
        2,
        3,
        8,
        &mut crate::rng::seeded(0),
    )
    .unwrap();
    let mut x = Array2::<f64>::ones((4, 3));
    let mut out = Array2::<f64>::zeros((4, sketch.width()));
    x[(2, 1)] = f64::NAN;
    let e = sketch
        .transform_into(x.view(), out.view_mut(), PAR)
        .unwrap_err();
    assert_eq!(e, Error::NonFinite { name: "X" });
    x[(2, 1)] = 1e200;
    let e = sketch
        .transform_into(x.view(), out.view_mut(), PAR)
        .unwrap_err();
    assert!(is_invalid(&e, "X"), "{e}");
}
