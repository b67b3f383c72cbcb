//! Statistical and deterministic tests of the sketches against the closed
//! forms of `docs/math/sketches.rst`, "Variances" (fixed seeds; tolerances
//! derived from them).

use ndarray::{array, s, Array1, Array2};
use rand::Rng as _;

use super::estimates::pair_estimates;
use super::variance::{sketch_variance, PairStats};
use super::*;
use crate::rng;

/// Every (kind, complex) combination that exists.
const VARIANTS: [(SketchKind, bool); 7] = [
    (SketchKind::Gaussian, false),
    (SketchKind::Gaussian, true),
    (SketchKind::Rademacher, false),
    (SketchKind::Rademacher, true),
    (SketchKind::TensorSrht, false),
    (SketchKind::TensorSrht, true),
    (SketchKind::TensorSketch, false),
];

/// Closed-form mean and real-part variance of the estimate of
/// `(xᵀy/l² + c)^n` with `n_features` features.
#[allow(clippy::too_many_arguments)]
fn closed_form(
    kind: SketchKind,
    complex: bool,
    n: u32,
    nf: usize,
    x: &[f64],
    y: &[f64],
    bias: f64,
    l: f64,
) -> (f64, f64) {
    let aug = |v: &[f64]| -> Vec<f64> {
        let mut a: Vec<f64> = if bias > 0.0 {
            vec![bias.sqrt()]
        } else {
            vec![]
        };
        a.extend(v.iter().map(|t| t / l));
        a
    };
    let (xa, ya) = (aug(x), aug(y));
    let p = PairStats::new(&xa, &ya);
    let v = sketch_variance(kind, complex, n, nf, padded_dim(xa.len()).unwrap(), &p).unwrap();
    (p.m.powi(n as i32), v.real_part)
}

fn mean_var(e: &[f64]) -> (f64, f64, f64) {
    let r = e.len() as f64;
    let mean = e.iter().sum::<f64>() / r;
    let var = e.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (r - 1.0);
    let m4 = e.iter().map(|v| (v - mean).powi(4)).sum::<f64>() / r;
    (mean, var, m4)
}

fn random_vec(rng: &mut rng::Rng, d: usize) -> Vec<f64> {
    (0..d).map(|_| rng.random_range(-1.0..1.0)).collect()
}

/// Mean of R = 2,000 independent estimates within 4 standard errors
/// (from the closed-form variance) of the kernel value, for every sketch,
/// real and complex, degrees 1–4, d a power of two and not, with and
/// without bias / length scale.
#[test]
fn unbiased_every_sketch() {
    const R: usize = 2000;
    let mut g = rng::seeded(11);
    let mut seed = 100;
    for (d, bias, l) in [(4, 0.0, 1.0), (3, 0.0, 1.0), (6, 0.5, 1.3)] {
        let x = random_vec(&mut g, d);
        let y = random_vec(&mut g, d);
        for (kind, complex) in VARIANTS {
            for n in 1..=4 {
                let nf = 6;
                seed += 1;
                let e = pair_estimates(
                    kind,
                    complex,
                    n,
                    nf,
                    Array1::from(x.clone()).view(),
                    Array1::from(y.clone()).view(),
                    bias,
                    l,
                    seed,
                    R,
                )
                .unwrap();
                let (want, var) = closed_form(kind, complex, n, nf, &x, &y, bias, l);
                let (mean, _, _) = mean_var(&e);
                let tol = 4.0 * (var / R as f64).sqrt() + 1e-12 * (1.0 + want.abs());
                assert!(
                    (mean - want).abs() <= tol,
                    "{kind:?} complex={complex} n={n} d={d}: mean {mean} vs {want}, tol {tol}"
                );
            }
        }
    }
}

/// Empirical variance within 10% of the closed form. R is chosen so that
/// 10% is at least 4 standard errors of the sample variance; the standard
/// error `sqrt((μ4 − σ⁴)/R)` is estimated from the sample's fourth moment
/// and that design condition (10% >= 3 SE) is asserted too. Gaussian
/// sketches are heavy-tailed (a product of 2n Gaussian projections: the
/// kurtosis grows like 3^{2n}); measured, the Rademacher-type sketches need
/// R = 20,000 / 100,000 / 200,000 at degrees 2 / 3 / 4 (10% ≈ 3.5–20 SE),
/// the Gaussian ones 400,000 (n = 2) and 800,000 (n = 3) (10% ≈ 4–21 SE). See [`reps_for`].
fn check_variance(
    kind: SketchKind,
    complex: bool,
    n: u32,
    nf: usize,
    x: &[f64],
    y: &[f64],
    reps: usize,
) {
    let e = pair_estimates(
        kind,
        complex,
        n,
        nf,
        Array1::from(x.to_vec()).view(),
        Array1::from(y.to_vec()).view(),
        0.0,
        1.0,
        7 + n as u64,
        reps,
    )
    .unwrap();
    let (_, want) = closed_form(kind, complex, n, nf, x, y, 0.0, 1.0);
    let (_, var, m4) = mean_var(&e);
    let se = ((m4 - var * var).max(0.0) / reps as f64).sqrt();
    println!(
        "variance {kind:?} complex={complex} n={n} D={nf}: empirical {var:.6} closed form {want:.6} \
         (ratio {:.4}, 10% = {:.1} SE, R = {reps})",
        var / want,
        0.1 * want / se
    );
    assert!(
        0.1 * want >= 3.0 * se,
        "R = {reps} too small: SE {se} vs variance {want}"
    );
    assert!(
        (var - want).abs() <= 0.1 * want,
        "{kind:?} {complex} {n}: {var} vs {want}"
    );
}

/// Draws needed for the variance check (see [`check_variance`]).
fn reps_for(kind: SketchKind, n: u32) -> usize {
    match (kind, n) {
        (SketchKind::Gaussian, 0..=2) => 400_000,
        (SketchKind::Gaussian, _) => 800_000,
        (_, 0..=2) => 20_000,
        (_, 3) => 100_000,
        _ => 200_000,
    }
}

#[test]
fn variance_worked_examples() {
    // Worked example A (n = 2, D = 6) and B (n = 3, D = 5) of
    // docs/math/sketches.rst, "Worked examples".
    let a = ([1.0, 1.0, 0.0, 0.0], [1.0, 0.0, 1.0, 0.0]);
    let b = ([0.5, -1.0, 0.3], [0.2, 0.7, -0.4]);
    for (kind, complex) in VARIANTS {
        check_variance(kind, complex, 2, 6, &a.0, &a.1, reps_for(kind, 2));
        check_variance(kind, complex, 3, 5, &b.0, &b.1, reps_for(kind, 3));
    }
}

#[test]
fn variance_random_pairs() {
    let mut g = rng::seeded(5);
    for (kind, complex) in VARIANTS {
        // Degree 4 only for the Rademacher-type laws: a degree-4 Gaussian
        // estimate is so heavy-tailed that 10% would need ~10^7 draws.
        let grid: &[(u32, usize)] = if kind == SketchKind::Gaussian {
            &[(2, 5), (3, 8)]
        } else {
            &[(2, 5), (3, 8), (4, 8)]
        };
        for &(n, d) in grid {
            let x = random_vec(&mut g, d);
            let y = random_vec(&mut g, d);
            check_variance(kind, complex, n, 7, &x, &y, reps_for(kind, n));
        }
    }
}

fn features(sk: &PolySketch, x: &Array2<f64>, par: Parallelism) -> Array2<f64> {
    let mut out = Array2::zeros((x.nrows(), sk.width()));
    sk.transform_into(x.view(), out.view_mut(), par).unwrap();
    out
}

fn random_matrix(seed: u64, rows: usize, cols: usize) -> Array2<f64> {
    let mut g = rng::seeded(seed);
    Array2::from_shape_fn((rows, cols), |_| g.random_range(-1.0..1.0))
}

/// `docs/math/sketches.rst`, "Variances": degree 1 TensorSRHT with d' | D
/// reproduces xᵀy exactly (real and complex; also with zero padding, d = 5,
/// d' = 8).
#[test]
fn degree_one_srht_exact() {
    for complex in [false, true] {
        for (d, nf) in [(4, 8), (5, 16), (8, 8)] {
            let x = random_matrix(3, 6, d);
            let sk = PolySketch::draw(
                SketchKind::TensorSrht,
                complex,
                1,
                d,
                nf,
                &mut rng::seeded(9),
            )
            .unwrap();
            let f = features(&sk, &x, Parallelism::Rayon);
            let k = f.dot(&f.t());
            let exact = x.dot(&x.t());
            for (a, b) in k.iter().zip(exact.iter()) {
                assert!((a - b).abs() < 1e-12, "complex={complex} d={d}: {a} vs {b}");
            }
        }
    }
}

/// `docs/math/sketches.rst`, "TensorSRHT": within a TensorSRHT block, the
/// implied weight vectors of a factor are pairwise orthogonal: with W (d' × d')
/// read off the degree-1 features of the basis vectors, W W^H = d' I (real and
/// complex weights).
#[test]
fn srht_block_orthogonal() {
    let d = 8;
    for complex in [false, true] {
        let sk = PolySketch::draw(
            SketchKind::TensorSrht,
            complex,
            1,
            d,
            d,
            &mut rng::seeded(4),
        )
        .unwrap();
        let eye = Array2::<f64>::eye(d);
        // Row a of f holds column a of W, times 1/√D.
        let f = features(&sk, &eye, Parallelism::Sequential) * (d as f64).sqrt();
        let (re, im) = if complex {
            (
                f.slice(s![.., ..d]).to_owned(),
                f.slice(s![.., d..]).to_owned(),
            )
        } else {
            (f.clone(), Array2::zeros((d, d)))
        };
        // W = (re + i im)ᵀ; W W^H = reᵀre + imᵀim + i(imᵀre − reᵀim).
        let g_re = re.t().dot(&re) + im.t().dot(&im);
        let g_im = im.t().dot(&re) - re.t().dot(&im);
        for i in 0..d {
            for j in 0..d {
                let want = if i == j { d as f64 } else { 0.0 };
                assert!((g_re[[i, j]] - want).abs() < 1e-12);
                assert!(g_im[[i, j]].abs() < 1e-12);
            }
        }
    }
}

/// Transforms are bit-identical for any thread count, write into a column
/// block of a wider array, and f32 agrees with f64 to f32 precision.
#[test]
fn deterministic_layout_and_precision() {
    let x = random_matrix(1, 150, 7);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(3)
        .build()
        .unwrap();
    for (kind, complex) in VARIANTS {
        let sk = PolySketch::draw(kind, complex, 3, 7, 33, &mut rng::seeded(2)).unwrap();
        assert_eq!(sk.width(), if complex { 66 } else { 33 });
        let seq = features(&sk, &x, Parallelism::Sequential);
        let par = pool.install(|| features(&sk, &x, Parallelism::Rayon));
        assert_eq!(seq, par, "{kind:?} {complex}");
        // Rows that are not contiguous (a column-major X): the same bits.
        let xt = x.t().to_owned();
        let mut strided = Array2::<f64>::zeros((150, sk.width()));
        sk.transform_into(xt.t(), strided.view_mut(), Parallelism::Rayon)
            .unwrap();
        assert_eq!(strided, seq, "{kind:?} {complex}: strided rows");
        let mut wide = Array2::<f64>::from_elem((150, sk.width() + 3), 7.0);
        sk.transform_into(
            x.view(),
            wide.slice_mut(s![.., 1..sk.width() + 1]),
            Parallelism::Rayon,
        )
        .unwrap();
        assert_eq!(wide.slice(s![.., 1..sk.width() + 1]), seq);
        assert!(wide.column(0).iter().all(|&v| v == 7.0));
        assert!(wide.column(sk.width() + 1).iter().all(|&v| v == 7.0));
        let x32 = x.mapv(|v| v as f32);
        let mut f32out = Array2::<f32>::zeros((150, sk.width()));
        sk.transform_into(x32.view(), f32out.view_mut(), Parallelism::Rayon)
            .unwrap();
        let scale = seq.iter().fold(0.0_f64, |m, v| m.max(v.abs()));
        for (a, b) in f32out.iter().zip(seq.iter()) {
            assert!(
                (*a as f64 - b).abs() <= 1e-5 * scale,
                "{kind:?}: {a} vs {b}"
            );
        }
    }
}

/// The kernel wrapper of `docs/math/sketches.rst`, "Target kernels" equals the
/// sketch applied to (√c, x/l).
#[test]
fn kernel_wrapper_augments() {
    let x = random_matrix(8, 20, 5);
    let (c, l) = (0.7_f64, 1.9_f64);
    let sk = PolySketch::draw(SketchKind::TensorSrht, true, 2, 6, 10, &mut rng::seeded(1)).unwrap();
    let mut aug = Array2::<f64>::zeros((20, 6));
    aug.column_mut(0).fill(c.sqrt());
    aug.slice_mut(s![.., 1..]).assign(&(&x * (1.0 / l)));
    let want = features(&sk, &aug, Parallelism::Rayon);
    let mut got = Array2::zeros((20, sk.width()));
    polynomial_features_into(&sk, x.view(), c, l, got.view_mut(), Parallelism::Rayon).unwrap();
    assert_eq!(got, want);
    // Length scale only: the same rows scaled by 1/l, no extra coordinate.
    let sk =
        PolySketch::draw(SketchKind::Rademacher, false, 2, 5, 10, &mut rng::seeded(1)).unwrap();
    let want = features(&sk, &(&x * (1.0 / l)), Parallelism::Rayon);
    let mut got = Array2::zeros((20, 10));
    polynomial_features_into(&sk, x.view(), 0.0, l, got.view_mut(), Parallelism::Rayon).unwrap();
    assert_eq!(got, want);
}

/// Features of `x` at length scales whose reciprocal leaves the normal
/// range of the input's type: `x/l` is formed by division, exactly for
/// power-of-two scales, and an `x/l` beyond the type's range is refused as
/// overflowing features, not as non-finite `X`.
#[test]
fn length_scales_whose_reciprocal_is_not_normal() {
    let sk = PolySketch::draw(SketchKind::Gaussian, false, 2, 3, 8, &mut rng::seeded(2)).unwrap();
    let units = array![[1.0, -3.0, 0.0], [5.0, 2.0, -7.0]];
    let map = |x: &Array2<f64>, l: f64| -> Result<Array2<f64>> {
        let mut out = Array2::zeros((x.nrows(), 8));
        polynomial_features_into(&sk, x.view(), 0.0, l, out.view_mut(), Parallelism::Rayon)
            .map(|()| out)
    };
    let map32 = |x: &Array2<f32>, l: f64| -> Result<Array2<f32>> {
        let mut out = Array2::zeros((x.nrows(), 8));
        polynomial_features_into(&sk, x.view(), 0.0, l, out.view_mut(), Parallelism::Rayon)
            .map(|()| out)
    };
    // f64: 1/l = 2^1040 overflows; x = k 2^-1060 (subnormal, exact) over
    // l = 2^-1040 is k 2^-20 exactly. 1/l = 2^-1023 is subnormal for
    // l = 2^1023, and x = k 2^1000 over it is k 2^-23.
    let p = |e: i32| crate::real::times_pow2(1.0, e);
    let want = map(&units.mapv(|k| k * p(-20)), 1.0).unwrap();
    assert_eq!(map(&units.mapv(|k| k * p(-1060)), p(-1040)).unwrap(), want);
    let want = map(&units.mapv(|k| k * p(-23)), 1.0).unwrap();
    assert_eq!(map(&units.mapv(|k| k * p(1000)), p(1023)).unwrap(), want);
    // f32: 1/l = 2^130 overflows float32; x = k 2^-140 over l = 2^-130 is
    // k 2^-10. 1/l = 2^-130 is subnormal in float32 for l = 2^130, and
    // x = k 2^100 over it is k 2^-30.
    let u32s = units.mapv(|k| k as f32);
    let want = map32(&u32s.mapv(|k| k * p(-10) as f32), 1.0).unwrap();
    let got = map32(&u32s.mapv(|k| k * p(-140) as f32), p(-130)).unwrap();
    assert_eq!(got, want);
    let want = map32(&u32s.mapv(|k| k * p(-30) as f32), 1.0).unwrap();
    assert_eq!(
        map32(&u32s.mapv(|k| k * p(100) as f32), p(130)).unwrap(),
        want
    );
    // x/l beyond the range: the features' overflow, naming X.
    for e in [
        map(&units, 1e-310).unwrap_err(),
        map32(&u32s, 1e-39).unwrap_err(),
    ] {
        let msg = e.to_string();
        assert!(
            matches!(e, Error::InvalidParameter { name: "X", .. }) && msg.contains("overflow"),
            "{msg}"
        );
    }
}

#[test]
fn errors_name_the_argument() {
    let mut g = rng::seeded(0);
    let name = |r: Result<PolySketch>| match r {
        Err(Error::InvalidParameter { name, .. }) => name,
        other => panic!("expected an error, got {other:?}"),
    };
    assert_eq!(
        name(PolySketch::draw(
            SketchKind::Gaussian,
            false,
            0,
            3,
            4,
            &mut g
        )),
        "degree"
    );
    assert_eq!(
        name(PolySketch::draw(
            SketchKind::Gaussian,
            false,
            2,
            3,
            0,
            &mut g
        )),
        "n_components"
    );
    assert_eq!(
        name(PolySketch::draw(
            SketchKind::Gaussian,
            false,
            2,
            0,
            4,
            &mut g
        )),
        "dim"
    );
    assert_eq!(
        name(PolySketch::draw(
            SketchKind::TensorSketch,
            true,
            2,
            3,
            4,
            &mut g
        )),
        "complex_weights"
    );
    let sk = PolySketch::draw(SketchKind::TensorSrht, false, 2, 3, 4, &mut g).unwrap();
    let x = Array2::<f64>::zeros((2, 4));
    let mut out = Array2::<f64>::zeros((2, 4));
    assert!(matches!(
        sk.transform_into(x.view(), out.view_mut(), Parallelism::Rayon),
        Err(Error::ShapeMismatch {
            expected: 3,
            got: 4,
            ..
        })
    ));
    let x = Array2::<f64>::zeros((2, 3));
    let mut out = Array2::<f64>::zeros((2, 5));
    assert!(sk
        .transform_into(x.view(), out.view_mut(), Parallelism::Rayon)
        .is_err());
    let mut out = Array2::<f64>::zeros((4, 2));
    assert!(sk
        .transform_into(x.view(), out.view_mut().reversed_axes(), Parallelism::Rayon)
        .is_err());
    let mut out = Array2::<f64>::zeros((2, 4));
    for (c, l) in [
        (-1.0, 1.0),
        (f64::NAN, 1.0),
        (0.0, 0.0),
        (0.0, f64::INFINITY),
    ] {
        assert!(
            polynomial_features_into(&sk, x.view(), c, l, out.view_mut(), Parallelism::Rayon)
                .is_err()
        );
    }
}

/// TensorSketch edge sizes: D = 1 is a one-feature Rademacher sketch
/// (`docs/math/sketches.rst`, "Variances") and D = 2 exercises the real Nyquist
/// bin; both stay unbiased.
#[test]
fn tensor_sketch_small_d() {
    let x = [0.5, 1.0, 0.3];
    let y = [0.2, 0.7, 0.4];
    for nf in [1, 2, 3] {
        let e = pair_estimates(
            SketchKind::TensorSketch,
            false,
            2,
            nf,
            array![0.5, 1.0, 0.3].view(),
            array![0.2, 0.7, 0.4].view(),
            0.0,
            1.0,
            3,
            4000,
        )
        .unwrap();
        let (want, var) = closed_form(SketchKind::TensorSketch, false, 2, nf, &x, &y, 0.0, 1.0);
        let (mean, _, _) = mean_var(&e);
        assert!(
            (mean - want).abs() <= 4.0 * (var / 4000.0).sqrt(),
            "D={nf}: {mean} vs {want}"
        );
    }
}

#[test]
fn transform_of_no_rows() {
    // An empty output carries no meaningful strides (NumPy hands `(0, D)`
    // column blocks with any strides): no rows is a valid, empty transform.
    for kind in [
        SketchKind::Gaussian,
        SketchKind::Rademacher,
        SketchKind::TensorSrht,
        SketchKind::TensorSketch,
    ] {
        let sk = PolySketch::draw(kind, false, 2, 4, 8, &mut rng::seeded(1)).unwrap();
        let x = Array2::<f64>::zeros((0, 4));
        let mut wide = Array2::<f64>::zeros((0, 16));
        let out = wide.slice_mut(s![.., ..;2]);
        sk.transform_into(x.view(), out, Parallelism::Sequential)
            .unwrap();
    }
}

#[test]
fn polynomial_features_are_the_augmented_sketch_then_zero_columns() {
    let x = random_matrix(3, 9, 4);
    let sk = PolySketch::draw(SketchKind::Rademacher, true, 2, 5, 6, &mut rng::seeded(1)).unwrap();
    let map = PolynomialFeatures::new(sk.clone(), 0.7, 1.4, 13).unwrap();
    assert_eq!((map.n_features_in(), map.n_components()), (4, 13));
    let phi = map.transform(x.view(), Parallelism::Rayon).unwrap();
    let mut want = Array2::zeros((9, 12));
    polynomial_features_into(&sk, x.view(), 0.7, 1.4, want.view_mut(), Parallelism::Rayon).unwrap();
    assert_eq!(phi.slice(s![.., ..12]), want);
    assert!(phi.column(12).iter().all(|&v| v == 0.0));
    assert!(matches!(
        PolynomialFeatures::new(sk.clone(), 0.7, 1.4, 11),
        Err(Error::InvalidParameter {
            name: "n_components",
            ..
        })
    ));
    assert!(matches!(
        PolynomialFeatures::new(sk.clone(), -1.0, 1.4, 12),
        Err(Error::InvalidParameter { name: "bias", .. })
    ));
    assert!(matches!(
        PolynomialFeatures::new(sk, 0.7, 0.0, 12),
        Err(Error::InvalidParameter {
            name: "length_scale",
            ..
        })
    ));
    // No bias: the sketch sees the scaled rows only.
    let sk0 =
        PolySketch::draw(SketchKind::TensorSrht, false, 3, 4, 8, &mut rng::seeded(2)).unwrap();
    let map0 = PolynomialFeatures::new(sk0, 0.0, 1.0, 8).unwrap();
    assert_eq!(map0.n_features_in(), 4);
    assert!(matches!(
        map0.transform(random_matrix(3, 2, 5).view(), Parallelism::Rayon),
        Err(Error::ShapeMismatch { .. })
    ));
}

#[test]
fn degree_above_the_bound_is_refused() {
    let cfg = |degree| PolynomialConfig {
        n_components: 8,
        degree,
        bias: 0.0,
        length_scale: 1.0,
        sketch: SketchKind::Gaussian,
        complex: false,
    };
    assert!(PolynomialFeatures::draw(&cfg(MAX_DEGREE), 3, 0).is_ok());
    for degree in [0, MAX_DEGREE + 1, u32::MAX] {
        let e = PolynomialFeatures::draw(&cfg(degree), 3, 0).unwrap_err();
        assert!(e.to_string().contains("degree"), "{e}");
        let (x, y) = ([1.0, 0.5], [0.5, 1.0]);
        let e = super::variance::polynomial_kernel_variance(
            SketchKind::Gaussian,
            false,
            degree,
            8,
            &x,
            &y,
            0.0,
            1.0,
        )
        .unwrap_err();
        assert!(e.to_string().contains("degree"), "{e}");
    }
}

#[test]
fn features_that_overflow_are_refused_in_parallel_and_sequentially() {
    // One row far beyond the scale overflows the product of two
    // projections; every kind refuses the transform instead of writing
    // infinities, whichever chunk holds the row.
    for kind in [
        SketchKind::Gaussian,
        SketchKind::Rademacher,
        SketchKind::TensorSrht,
        SketchKind::TensorSketch,
    ] {
        let sk = PolySketch::draw(kind, false, 2, 4, 16, &mut rng::seeded(3)).unwrap();
        let mut x = Array2::from_shape_fn((300, 4), |(i, j)| ((i + 2 * j) as f64 * 0.1).sin());
        let mut out = Array2::zeros((300, 16));
        for par in [Parallelism::Sequential, Parallelism::Rayon] {
            sk.transform_into(x.view(), out.view_mut(), par).unwrap();
            assert!(out.iter().all(|v| v.is_finite()));
        }
        x[[211, 1]] = 1e300;
        for par in [Parallelism::Sequential, Parallelism::Rayon] {
            let e = sk
                .transform_into(x.view(), out.view_mut(), par)
                .unwrap_err();
            assert!(e.to_string().contains("overflow"), "{kind:?}: {e}");
        }
    }
}

#[test]
fn tensor_sketch_refuses_more_features_than_its_hashes_address() {
    // The hashes are u32 values in 0..D: D = 2^32 would leave an empty range
    // and D = 2^32 + 8 would wrap to 8 features.
    for nf in [MAX_TENSOR_SKETCH_FEATURES + 1, (1 << 32) + 8, 1 << 40] {
        let e = PolySketch::draw(
            SketchKind::TensorSketch,
            false,
            2,
            3,
            nf,
            &mut rng::seeded(0),
        )
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
        assert!(
            e.contains("`n_components`") && e.contains("4294967295"),
            "{nf}: {e}"
        );
        let p = PairStats::new(&[1.0, 0.0], &[0.5, 0.5]);
        let e = sketch_variance(SketchKind::TensorSketch, false, 2, nf, 2, &p).unwrap_err();
        assert!(e.to_string().contains("4294967295"), "{e}");
    }
    let sk = PolySketch::draw(
        SketchKind::TensorSketch,
        false,
        2,
        3,
        5,
        &mut rng::seeded(0),
    )
    .unwrap();
    assert_eq!(
        tensor_sketch_width(MAX_TENSOR_SKETCH_FEATURES),
        Ok(u32::MAX)
    );
    assert!(sk.width() == 5);
}
