//! Property-based fuzzing of the core's public entry points (the `fuzz_`
//! proptests that `make fuzz` runs with many cases): random shapes
//! (including 0 and 1 rows or columns), values of every magnitude (NaN,
//! ±∞, subnormals, ±1e±300) and parameters. Every call must return without
//! panicking, either an `Err` or a result of the right shape that is finite
//! whenever the inputs are finite and moderate. Inputs that are not finite
//! must be refused, except by the FWHT, a linear map that propagates them.

use ndarray::{Array1, Array2, ArrayView2};
use proptest::prelude::*;

use crate::binning::{BinningGrids, BinningMap, Laplacian};
use crate::fourier::features::{FourierConfig, FourierFeatures, Variant};
use crate::fourier::samplers::Sampler;
use crate::fwht::{fwht, fwht_rows};
use crate::gp::exact::ExactGp;
use crate::gp::features::FeatureGp;
use crate::gp::localized::{LocalizedConfig, LocalizedMaclaurinGp, ThresholdSearch};
use crate::gp::optimize::{HyperInit, OptimizerConfig};
use crate::gp::sparse::fit::{fit_sparse, SparseGpConfig};
use crate::kernels::{Kernel, StationaryKernel, KERNEL_NAMES};
use crate::maclaurin::map::{AllocationStrategy, MaclaurinConfig, MaclaurinMap};
use crate::maclaurin::MaclaurinKernel;
use crate::nystroem::NystroemFeatures;
use crate::progress::Monitor;
use crate::sketch::SketchKind;
use crate::sketch::{PolynomialConfig, PolynomialFeatures};
use crate::stats::FeatureStats;
use crate::threads::Parallelism;

/// Any of the stationary kernels.
fn kernel() -> impl Strategy<Value = Kernel> {
    prop::sample::select(KERNEL_NAMES.to_vec())
        .prop_map(|name| Kernel::from_name(name).expect("a kernel name"))
}

const SKETCHES: [SketchKind; 3] = [
    SketchKind::TensorSrht,
    SketchKind::Gaussian,
    SketchKind::Rademacher,
];

/// Any float: ordinary values, subnormals, values near the float range,
/// zeros of both signs, NaN and ±∞.
fn wild() -> impl Strategy<Value = f64> {
    prop_oneof![
        4 => -3.0..3.0f64,
        2 => (
            -3.0..3.0f64,
            prop::sample::select(vec![1e-300, 1e-150, 1e30, 1e150, 1e300])
        )
            .prop_map(|(v, s)| v * s),
        1 => prop::sample::select(vec![
            0.0,
            -0.0,
            5e-324,
            -5e-324,
            1e308,
            -1e308,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
        ]),
    ]
}

/// A parameter: mostly ordinary positive values, sometimes anything.
fn param() -> impl Strategy<Value = f64> {
    prop_oneof![4 => 0.1..4.0f64, 1 => wild()]
}

/// A matrix of `0..=max_rows` rows and `0..=max_cols` columns: in half the
/// cases of ordinary values, in the others of [`wild`] ones.
fn matrix(max_rows: usize, max_cols: usize) -> impl Strategy<Value = Array2<f64>> {
    (0..=max_rows, 0..=max_cols, any::<bool>()).prop_flat_map(|(r, c, tame)| {
        let values = if tame {
            prop::collection::vec((-3.0..3.0f64).boxed(), r * c)
        } else {
            prop::collection::vec(wild().boxed(), r * c)
        };
        values.prop_map(move |v| Array2::from_shape_vec((r, c), v).expect("r * c values"))
    })
}

/// Training data: a [`matrix`] and targets, one per row in most cases (else
/// one more), ordinary or [`wild`].
fn data(max_rows: usize, max_cols: usize) -> impl Strategy<Value = (Array2<f64>, Array1<f64>)> {
    (matrix(max_rows, max_cols), 0..6usize, any::<bool>()).prop_flat_map(|(x, extra, tame)| {
        let n = x.nrows() + usize::from(extra == 0);
        let y = if tame {
            prop::collection::vec((-3.0..3.0f64).boxed(), n)
        } else {
            prop::collection::vec(wild().boxed(), n)
        };
        (Just(x), y.prop_map(Array1::from))
    })
}

/// Whether every value is finite and small enough that a few products and
/// sums of them stay finite.
fn moderate(x: ArrayView2<'_, f64>) -> bool {
    x.iter().all(|v| v.is_finite() && v.abs() <= 1e100)
}

fn finite<'a>(mut it: impl Iterator<Item = &'a f64>) -> bool {
    it.all(|v| v.is_finite())
}

/// A transform's outcome: an error, or features of the right shape, all
/// finite.
fn check_features(
    z: crate::Result<Array2<f64>>,
    shape: (usize, usize),
) -> std::result::Result<(), TestCaseError> {
    if let Ok(z) = z {
        prop_assert_eq!(z.dim(), shape);
        prop_assert!(finite(z.iter()), "{z:?}");
    }
    Ok(())
}

proptest! {
    #[test]
    fn fuzz_fwht_and_fwht_rows(x in matrix(3, 17), normalized in any::<bool>()) {
        let mut v: Vec<f64> = x.iter().copied().collect();
        let len = v.len();
        match fwht(&mut v, normalized, Parallelism::Rayon) {
            Ok(()) => {
                prop_assert!(len.is_power_of_two());
                prop_assert_eq!(v.len(), len);
            }
            Err(e) => prop_assert!(!len.is_power_of_two(), "{e}"),
        }
        // Rows, and the rows of the transpose (strided).
        for mut m in [x.clone(), x.t().to_owned(), x.clone().reversed_axes()] {
            let (rows, cols) = m.dim();
            let ok = fwht_rows(m.view_mut(), normalized, Parallelism::Rayon).is_ok();
            prop_assert_eq!(ok, cols.is_power_of_two());
            prop_assert_eq!(m.dim(), (rows, cols));
            if ok && moderate(x.view()) {
                prop_assert!(finite(m.iter()));
            }
        }
    }

    #[test]
    fn fuzz_polynomial_features(
        x in matrix(4, 4),
        n_components in 0usize..9,
        degree in 0u32..5,
        bias in wild(),
        length_scale in param(),
        sketch in prop::sample::select(SKETCHES.to_vec()),
        complex in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let config = PolynomialConfig {
            n_components, degree, bias, length_scale, sketch, complex,
        };
        if let Ok(map) = PolynomialFeatures::draw(&config, x.ncols(), seed) {
            let z = map.transform(x.view(), Parallelism::Rayon);
            check_features(z, (x.nrows(), n_components))?;
        }
    }

    #[test]
    fn fuzz_fourier_features(
        x in matrix(4, 4),
        n_components in 0usize..9,
        kernel in kernel(),
        sampler in prop::sample::select(vec!["mc", "antithetic", "orthogonal", "structured", "moment_matching", "qmc"]),
        variant in prop::sample::select(vec!["cos_sin", "cos_bias"]),
        length_scale in param(),
        kernel_variance in param(),
        seed in any::<u64>(),
    ) {
        let (Ok(sampler), Ok(variant)) = (Sampler::from_name(sampler), Variant::from_name(variant))
        else {
            return Ok(());
        };
        let config = FourierConfig {
            n_components, kernel, length_scale, kernel_variance, sampler, variant,
        };
        if let Ok(map) = FourierFeatures::fit(&config, x.ncols(), seed) {
            let z = map.transform(x.view(), Parallelism::Rayon);
            check_features(z, (x.nrows(), n_components))?;
        }
    }

    #[test]
    fn fuzz_maclaurin_features(
        x in matrix(5, 3),
        test in matrix(3, 3),
        n_components in 0usize..12,
        gaussian in any::<bool>(),
        length_scale in param(),
        kernel_variance in param(),
        sketch in prop::sample::select(SKETCHES.to_vec()),
        complex in any::<bool>(),
        random in any::<bool>(),
        max_degree in 0u32..6,
        n_subsample in 0usize..6,
        h01 in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let kernel = if gaussian {
            MaclaurinKernel::Gaussian
        } else {
            MaclaurinKernel::Exponential
        };
        let mut config = MaclaurinConfig::new(kernel, n_components);
        config.length_scale = length_scale;
        config.kernel_variance = kernel_variance;
        config.sketch = sketch;
        config.complex = complex;
        config.max_degree = max_degree;
        config.min_degree = config.min_degree.min(max_degree);
        config.n_subsample = n_subsample;
        config.h01 = h01;
        if random {
            config.allocation = AllocationStrategy::Random;
        }
        let fitted = MaclaurinMap::fit(
            x.view(), &config, seed, Parallelism::Rayon, &Monitor::default(),
        );
        if let Ok(map) = fitted {
            prop_assert!(finite(x.iter()));
            let z = map.transform(test.view(), Parallelism::Rayon);
            check_features(z, (test.nrows(), n_components))?;
        }
    }

    #[test]
    fn fuzz_random_binning(
        x in matrix(4, 3),
        test in matrix(3, 3),
        n_grids in 0usize..6,
        length_scale in param(),
        hashing in prop::option::of(0u64..5),
        seed in any::<u64>(),
    ) {
        let Ok(kernel) = Laplacian::new(length_scale) else {
            return Ok(());
        };
        let Ok(grids) = BinningGrids::draw(&kernel, n_grids, x.ncols(), seed) else {
            return Ok(());
        };
        if let Ok((map, z)) = BinningMap::fit(grids, x.view(), hashing, Parallelism::Rayon) {
            if let Some(z) = z {
                prop_assert_eq!(z.to_dense().dim(), (x.nrows(), map.n_columns() as usize));
            }
            if let Ok(z) = map.transform(test.view(), Parallelism::Rayon) {
                let dense = z.to_dense();
                prop_assert_eq!(dense.dim(), (test.nrows(), map.n_columns() as usize));
                prop_assert!(finite(dense.iter()));
            }
        }
    }

    #[test]
    fn fuzz_nystroem(
        x in matrix(5, 3),
        test in matrix(3, 3),
        n_components in 0usize..7,
        kernel in kernel(),
        length_scale in param(),
        seed in any::<u64>(),
    ) {
        if let Ok((map, landmarks)) =
            NystroemFeatures::fit(x.view(), n_components, kernel, &[length_scale], seed)
        {
            let m = landmarks.len();
            prop_assert!(m >= 1 && m <= n_components.min(x.nrows()));
            let mut z = Array2::<f64>::zeros((test.nrows(), m));
            if map.transform_into(test.view(), z.view_mut(), Parallelism::Rayon).is_ok() {
                prop_assert!(finite(z.iter()), "{z:?}");
            }
        }
    }

    #[test]
    fn fuzz_exact_and_sparse_gp(
        (x, y) in data(6, 2),
        test in matrix(3, 2),
        kernel in kernel(),
        length_scale in param(),
        kernel_variance in param(),
        noise_variance in param(),
        center in any::<bool>(),
        n_inducing in 0usize..4,
    ) {
        let sk = StationaryKernel {
            kernel, length_scale: vec![length_scale], variance: kernel_variance,
        };
        let par = Parallelism::Rayon;
        if let Ok(gp) = ExactGp::fit(x.view(), y.view(), sk, noise_variance, center, par) {
            prop_assert_eq!(y.len(), x.nrows());
            if let Ok((mean, var)) = gp.predict(test.view(), true, par) {
                prop_assert_eq!(mean.len(), test.nrows());
                prop_assert!(finite(mean.iter()) && finite(var.iter().flatten()));
            }
        }
        let cfg = SparseGpConfig {
            kernel,
            n_inducing,
            hyper: HyperInit {
                length_scale: Some(vec![length_scale]),
                kernel_variance: Some(kernel_variance),
                noise_variance: Some(noise_variance),
                ard: false,
                optimize: Vec::new(),
            },
            optimizer: OptimizerConfig { max_iter: 3, ..OptimizerConfig::default() },
            center,
            ..SparseGpConfig::default()
        };
        if let Ok(gp) = fit_sparse(x.view(), y.view(), &cfg, par, &Monitor::default())
            && let Ok((mean, var)) = gp.predict(test.view(), true, par) {
                prop_assert_eq!(mean.len(), test.nrows());
                prop_assert!(finite(mean.iter()) && finite(var.iter().flatten()));
            }
    }

    #[test]
    fn fuzz_feature_gp(
        (phi, y) in data(5, 4),
        test in matrix(3, 4),
        noise_variance in param(),
        center in any::<bool>(),
    ) {
        let mut stats = FeatureStats::new(phi.ncols());
        let par = Parallelism::Rayon;
        if y.len() != phi.nrows() || stats.accumulate(phi.view(), y.view(), par).is_err() {
            return Ok(());
        }
        if let Ok(gp) = FeatureGp::fit(&stats, noise_variance, center, par)
            && let Ok((mean, var)) = gp.predict(test.view(), true, par) {
                prop_assert_eq!(mean.len(), test.nrows());
                prop_assert!(finite(mean.iter()) && finite(var.iter().flatten()));
            }
    }

    #[test]
    fn fuzz_localized_gp(
        (x, y) in data(8, 3),
        test in matrix(4, 3),
        n_components in 1usize..9,
        length_scale in param(),
        kernel_variance in param(),
        noise_variance in param(),
        threshold in prop::option::of(param()),
        n_clusters in prop::option::of(0usize..5),
        tol in prop_oneof![Just(0.0), Just(1e-12), param()],
        sketch in prop::sample::select(SKETCHES.to_vec()),
        (center_y, at_test_points, auto) in (any::<bool>(), any::<bool>(), any::<bool>()),
    ) {
        let mut cfg = LocalizedConfig::new(n_components);
        cfg.map.length_scale = length_scale;
        cfg.map.kernel_variance = kernel_variance;
        cfg.map.sketch = sketch;
        cfg.map.max_degree = 4;
        cfg.map.n_subsample = 4;
        cfg.noise_variance = noise_variance;
        cfg.threshold = threshold;
        cfg.n_clusters = n_clusters;
        cfg.tol = tol;
        cfg.center_y = center_y;
        let (par, m) = (Parallelism::Rayon, Monitor::default());
        // Ordinary data and parameters must fit and predict; anything else
        // may be refused, never with an internal error.
        let ordinary = |v: f64| (0.1..=4.0).contains(&v);
        // (The optimized allocation refuses a single row.)
        let tame = x.nrows() >= 2
            && x.ncols() >= 1
            && y.len() == x.nrows()
            && test.ncols() == x.ncols()
            && x.iter().chain(&y).chain(&test).all(|v| v.abs() <= 3.0)
            && [length_scale, kernel_variance, noise_variance].into_iter().all(ordinary)
            && threshold.is_none_or(ordinary)
            && n_clusters != Some(0)
            && (tol == 0.0 || tol == 1e-12 || ordinary(tol));
        let documented = |e: &crate::Error| {
            !matches!(e, crate::Error::Internal(_) | crate::Error::ThreadPool(_) | crate::Error::Gpu(_))
        };
        let mut scored = None;
        let fitted = if auto {
            ThresholdSearch::default()
                .run(x.view(), y.view(), &cfg, 1, par, &m)
                .and_then(|choice| {
                    scored = Some(choice.scores.len());
                    let cfg = LocalizedConfig { threshold: choice.best, ..cfg.clone() };
                    LocalizedMaclaurinGp::fit(x.view(), y.view(), &cfg, 1, par, &m)
                })
        } else {
            LocalizedMaclaurinGp::fit(x.view(), y.view(), &cfg, 1, par, &m)
        };
        if let Some(k) = scored {
            prop_assert!(k == 6 || (k == 0 && x.nrows() < 2), "{k} scores");
        }
        let predicted = fitted.and_then(|gp| {
            if at_test_points {
                gp.predict_at_test_points(test.view(), true, par, &m)
            } else {
                gp.predict(test.view(), true, par, &m)
            }
        });
        match predicted {
            Ok(p) => {
                prop_assert_eq!(p.mean.len(), test.nrows());
                let var = p.var.expect("a variance was asked for");
                prop_assert_eq!(var.len(), test.nrows());
                prop_assert!(finite(p.mean.iter()) && finite(var.iter()));
                prop_assert!(var.iter().all(|&v| v >= 0.0), "{var:?}");
            }
            Err(e) => {
                prop_assert!(documented(&e), "{e:?}");
                prop_assert!(!tame, "ordinary data refused: {e}");
            }
        }
    }
}
