//! Oracles of `docs/math/fourier.rst` (samplers, variances, edge cases; its
//! "Checks") on the fitted maps. Statistical checks use fixed seeds; a mean
//! must lie within 4 standard errors, a variance within 4 standard errors of
//! the sample variance, the standard error estimated from the sample's fourth
//! central moment, `SE(s²) ≈ sqrt((μ₄ − s⁴)/T)`.

use ndarray::{array, s, Array2};

use super::*;
use crate::kernels::{kernel_matrix, Kernel};
use crate::threads::Parallelism;

const X: [f64; 3] = [0.3, -0.2, 0.5];
const Y: [f64; 3] = [-0.1, 0.4, 0.2];
const L: f64 = 0.8;
const K_ORACLE: f64 = 0.620_914_119_8;

fn pair() -> Array2<f64> {
    array![[X[0], X[1], X[2]], [Y[0], Y[1], Y[2]]]
}

fn config(n: usize, kernel: Kernel, sampler: Sampler, variant: Variant) -> FourierConfig {
    FourierConfig {
        n_components: n,
        kernel,
        length_scale: L,
        kernel_variance: 1.0,
        sampler,
        variant,
    }
}

/// `T` estimates `φ(x)ᵀφ(y)` (and the imaginary part for `cos_sin`).
fn estimates(cfg: &FourierConfig, t: usize, seed0: u64) -> (Vec<f64>, Vec<f64>) {
    let x = pair();
    let m = cfg.variant.n_frequencies(cfg.n_components);
    let mut re = Vec::with_capacity(t);
    let mut im = Vec::with_capacity(t);
    for i in 0..t {
        let map = FourierFeatures::fit(cfg, 3, seed0 + i as u64).unwrap();
        let phi = map.transform(x.view(), Parallelism::Sequential).unwrap();
        re.push(phi.row(0).dot(&phi.row(1)));
        if cfg.variant == Variant::CosSin {
            let (c0, s0) = (phi.slice(s![0, ..m]), phi.slice(s![0, m..2 * m]));
            let (c1, s1) = (phi.slice(s![1, ..m]), phi.slice(s![1, m..2 * m]));
            let dot = |a: ndarray::ArrayView1<f64>, b: ndarray::ArrayView1<f64>| -> f64 {
                a.iter().zip(b.iter()).map(|(p, q)| p * q).sum()
            };
            im.push(dot(s0, c1) - dot(c0, s1));
        }
    }
    (re, im)
}

/// Sample mean, its standard error, sample variance, and its standard error.
fn moments(v: &[f64]) -> (f64, f64, f64, f64) {
    let t = v.len() as f64;
    let mean = v.iter().sum::<f64>() / t;
    let var = v.iter().map(|a| (a - mean).powi(2)).sum::<f64>() / (t - 1.0);
    let m4 = v.iter().map(|a| (a - mean).powi(4)).sum::<f64>() / t;
    (mean, (var / t).sqrt(), var, ((m4 - var * var) / t).sqrt())
}

fn assert_mean_var(v: &[f64], mean: Option<f64>, var: f64, what: &str) {
    let (m, se_m, s2, se_v) = moments(v);
    if let Some(mu) = mean {
        assert!(
            (m - mu).abs() < 4.0 * se_m,
            "{what}: mean {m} vs {mu} (se {se_m})"
        );
    }
    assert!(
        (s2 - var).abs() < 4.0 * se_v,
        "{what}: variance {s2} vs {var} (se {se_v})"
    );
}

#[test]
fn kernel_oracle_value() {
    let k = Kernel::Gaussian.eval(&X, &Y, L);
    assert!((k - K_ORACLE).abs() < 1e-10, "{k}");
}

#[test]
fn plain_rff_unbiased_with_closed_form_variances() {
    let t = 20_000;
    let k2 = K_ORACLE * K_ORACLE;
    let cfg = config(8, Kernel::Gaussian, Sampler::Mc, Variant::CosBias);
    let (re, _) = estimates(&cfg, t, 1);
    let v = (1.0 + 0.5 * k2 * k2 - k2) / 8.0;
    assert!((v - 0.086_098_002_6).abs() < 1e-9);
    assert_mean_var(&re, Some(K_ORACLE), v, "cos_bias D=8");

    let cfg = config(8, Kernel::Gaussian, Sampler::Mc, Variant::CosSin);
    let (re, im) = estimates(&cfg, t, 1_000_000);
    let v = (1.0 - k2).powi(2) / 8.0;
    assert!((v - 0.047_196_005_3).abs() < 1e-9);
    assert_mean_var(&re, Some(K_ORACLE), v, "cos_sin m=4");
    // Complex variance E|k̂ − k|² = Var(Re) + Var(Im) = (1 − k²)/m.
    let vc = (1.0 - k2) / 4.0;
    assert!((vc - 0.153_616_414_0).abs() < 1e-9);
    let sq: Vec<f64> = re
        .iter()
        .zip(&im)
        .map(|(r, i)| (r - K_ORACLE).powi(2) + i * i)
        .collect();
    let (m, se, _, _) = moments(&sq);
    assert!((m - vc).abs() < 4.0 * se, "complex variance {m} vs {vc}");
}

#[test]
fn cos_sin_of_width_one_is_the_unbiased_cos_bias_feature() {
    // docs/math/fourier.rst, "Edge cases and cost": no cosine/sine pair fits
    // in one column, so the map is the cos_bias one, `σ √2 cos(wᵀx + b)`.
    let one = config(1, Kernel::Gaussian, Sampler::Mc, Variant::CosSin);
    let bias = config(1, Kernel::Gaussian, Sampler::Mc, Variant::CosBias);
    let map = FourierFeatures::fit(&one, 3, 7).unwrap();
    assert_eq!(map, FourierFeatures::fit(&bias, 3, 7).unwrap());
    assert_eq!((map.variant, map.n_frequencies()), (Variant::CosBias, 1));
    // Unbiased, with the cos_bias variance (1 + k⁴/2 − k²)/D at D = 1.
    let k2 = K_ORACLE * K_ORACLE;
    let (re, _) = estimates(&one, 20_000, 3_000_000);
    assert_mean_var(&re, Some(K_ORACLE), 1.0 + 0.5 * k2 * k2 - k2, "cos_sin D=1");
}

#[test]
fn antithetic_oracle_and_identity() {
    let k2 = K_ORACLE * K_ORACLE;
    let cfg = config(8, Kernel::Gaussian, Sampler::Antithetic, Variant::CosSin);
    let (re, _) = estimates(&cfg, 20_000, 7);
    let v = (1.0 - k2).powi(2) / 4.0;
    assert!((v - 0.094_392_010_5).abs() < 1e-9);
    assert_mean_var(&re, Some(K_ORACLE), v, "antithetic cos_sin m=4");
    // The estimate equals the one from the first m/2 frequencies.
    let map = FourierFeatures::fit(&cfg, 3, 99).unwrap();
    let w = map.frequencies();
    let d: Vec<f64> = (0..3).map(|j| X[j] - Y[j]).collect();
    let half: f64 = (0..2)
        .map(|j| (0..3).map(|a| w[(j, a)] * d[a]).sum::<f64>().cos())
        .sum::<f64>()
        / 2.0;
    let phi = map
        .transform(pair().view(), Parallelism::Sequential)
        .unwrap();
    assert!((phi.row(0).dot(&phi.row(1)) - half).abs() < 1e-14);
    assert_eq!(w.slice(s![2.., ..]), w.slice(s![..2, ..]).mapv(|v| -v));
    let bias = FourierFeatures::fit(
        &config(8, Kernel::Gaussian, Sampler::Antithetic, Variant::CosBias),
        3,
        1,
    )
    .unwrap();
    let b = bias.phases.unwrap();
    assert_eq!(b.slice(s![..4]), b.slice(s![4..]));
    assert!(FourierFeatures::fit(
        &config(6, Kernel::Gaussian, Sampler::Antithetic, Variant::CosSin),
        3,
        1
    )
    .is_err());
}

#[test]
fn orthogonal_blocks_and_variance_reduction() {
    let cfg = config(20, Kernel::Gaussian, Sampler::Orthogonal, Variant::CosSin);
    let map = FourierFeatures::fit(&cfg, 4, 3).unwrap();
    let w = map.frequencies();
    assert_eq!(w.dim(), (10, 4));
    for b in [0..4, 4..8, 8..10] {
        let blk = w.slice(s![b, ..]);
        let g = blk.dot(&blk.t());
        for i in 0..g.nrows() {
            for j in 0..g.ncols() {
                if i != j {
                    assert!(
                        g[(i, j)].abs() < 1e-12,
                        "block Gram off-diagonal {}",
                        g[(i, j)]
                    );
                }
            }
        }
    }
    // m = d = 3 with cos_sin: below the mc variance 0.0629 (one-sided).
    let cfg = config(6, Kernel::Gaussian, Sampler::Orthogonal, Variant::CosSin);
    let (re, _) = estimates(&cfg, 20_000, 11);
    let (mean, se_m, var, se_v) = moments(&re);
    assert!((mean - K_ORACLE).abs() < 4.0 * se_m, "ORF mean {mean}");
    let mc = (1.0 - K_ORACLE * K_ORACLE).powi(2) / 6.0;
    assert!((mc - 0.0629).abs() < 1e-4);
    assert!(var + 4.0 * se_v < mc, "ORF variance {var} not below {mc}");
}

#[test]
fn structured_blocks_are_scaled_orthogonal_and_match_dense() {
    let l = 1.7;
    for d in [5, 16] {
        let mut cfg = config(
            2 * 40,
            Kernel::Gaussian,
            Sampler::Structured,
            Variant::CosSin,
        );
        cfg.length_scale = l;
        let map = FourierFeatures::fit(&cfg, d, 5).unwrap();
        let dp = d.next_power_of_two();
        let Projection::Structured { signs, .. } = &map.projection else {
            panic!("structured expected")
        };
        assert_eq!(signs.dim(), (3 * 40usize.div_ceil(dp), dp));
        // W_b W_bᵀ = (d'/l²) I on the padded blocks: rebuild the padded
        // block from e_i in d' dimensions.
        let pmap = FourierFeatures::from_parts(
            Projection::Structured {
                signs: signs.slice(s![..3, ..]).to_owned(),
                n_features: dp,
                n_frequencies: dp,
                length_scale: l,
            },
            None,
            Variant::CosSin,
            2 * dp,
            1.0,
        )
        .unwrap();
        let wb = pmap.frequencies();
        let g = wb.dot(&wb.t());
        for i in 0..dp {
            for j in 0..dp {
                let want = if i == j { dp as f64 / (l * l) } else { 0.0 };
                assert!((g[(i, j)] - want).abs() < 1e-10, "({i},{j}) {}", g[(i, j)]);
            }
        }
        // The FWHT transform equals the dense map with the formed W.
        let dense = FourierFeatures::from_parts(
            Projection::Dense(map.frequencies()),
            None,
            Variant::CosSin,
            80,
            1.0,
        )
        .unwrap();
        let x = Array2::from_shape_fn((7, d), |(i, j)| ((i * d + j) as f64).sin());
        let a = map.transform(x.view(), Parallelism::Sequential).unwrap();
        let b = dense.transform(x.view(), Parallelism::Sequential).unwrap();
        assert!((&a - &b).iter().all(|v| v.abs() < 1e-12));
    }
    let bad = config(64, Kernel::Laplacian, Sampler::Structured, Variant::CosSin);
    assert!(FourierFeatures::fit(&bad, 4, 1).is_err());
}

#[test]
fn orthogonal_sampler_refuses_the_laplacian_only() {
    // ORF gives each row a Haar direction and the norm of a fresh spectral
    // sample: the law of the spectral density only when it is radially
    // symmetric, which the Laplacian's product of Cauchy coordinates is not.
    let bad = config(64, Kernel::Laplacian, Sampler::Orthogonal, Variant::CosSin);
    let err = FourierFeatures::fit(&bad, 4, 1).unwrap_err().to_string();
    assert!(
        err.contains("orthogonal") && err.contains("matern52"),
        "{err}"
    );
    for kernel in [
        Kernel::Gaussian,
        Kernel::Matern12,
        Kernel::Matern32,
        Kernel::Matern52,
    ] {
        let cfg = config(64, kernel, Sampler::Orthogonal, Variant::CosSin);
        assert!(FourierFeatures::fit(&cfg, 4, 1).is_ok(), "{kernel:?}");
    }
}

#[test]
fn moment_matching_exact_moments_and_error() {
    let l = 0.7;
    for (d, m) in [(3, 4), (10, 64), (50, 51)] {
        let w = samplers::moment_matching(m, d, l, &mut crate::rng::seeded(3)).unwrap();
        let mean = w.mean_axis(ndarray::Axis(0)).unwrap();
        assert!(mean.iter().all(|v| v.abs() < 1e-10), "mean {mean}");
        let cov = w.t().dot(&w) / m as f64;
        for i in 0..d {
            for j in 0..d {
                let want = if i == j { 1.0 / (l * l) } else { 0.0 };
                assert!((cov[(i, j)] - want).abs() < 1e-10);
            }
        }
    }
    let cfg = config(
        20,
        Kernel::Gaussian,
        Sampler::MomentMatching,
        Variant::CosSin,
    );
    let err = FourierFeatures::fit(&cfg, 10, 1).unwrap_err().to_string();
    assert!(
        err.contains("n_components") && err.contains("more frequencies than features"),
        "{err}"
    );
    assert!(FourierFeatures::fit(&cfg, 9, 1).is_ok());
    let cfg = config(
        10,
        Kernel::Gaussian,
        Sampler::MomentMatching,
        Variant::CosBias,
    );
    assert!(FourierFeatures::fit(&cfg, 10, 1).is_err());
    assert!(FourierFeatures::fit(&cfg, 9, 1).is_ok());
}

#[test]
fn every_sampler_is_unbiased_where_exact() {
    // mc, orthogonal, qmc (scrambled) for the kernels they support; the
    // mean of T estimates lies within 4 standard errors of k.
    let cases = [
        (Kernel::Gaussian, Sampler::Qmc),
        (Kernel::Laplacian, Sampler::Mc),
        (Kernel::Laplacian, Sampler::Qmc),
        (Kernel::Matern12, Sampler::Mc),
        (Kernel::Matern32, Sampler::Orthogonal),
        (Kernel::Matern52, Sampler::Mc),
    ];
    for (kernel, sampler) in cases {
        let cfg = config(16, kernel, sampler, Variant::CosSin);
        let (re, _) = estimates(&cfg, 8_000, 31);
        let (mean, se, _, _) = moments(&re);
        let k = kernel.eval(&X, &Y, L);
        assert!(
            (mean - k).abs() < 4.0 * se,
            "{kernel:?}/{sampler:?}: {mean} vs {k}"
        );
    }
}

#[test]
fn gram_error_falls_with_d_for_every_kernel() {
    let x = Array2::from_shape_fn((60, 5), |(i, j)| ((i * 7 + j * 3) as f64 * 0.37).sin());
    for kernel in [
        Kernel::Gaussian,
        Kernel::Laplacian,
        Kernel::Matern12,
        Kernel::Matern32,
        Kernel::Matern52,
    ] {
        let l = 1.5;
        let exact = kernel_matrix(x.view(), x.view(), kernel, l);
        let err = |n: usize| -> f64 {
            (0..4)
                .map(|seed| {
                    let mut cfg = config(n, kernel, Sampler::Mc, Variant::CosSin);
                    cfg.length_scale = l;
                    let phi = FourierFeatures::fit(&cfg, 5, seed)
                        .unwrap()
                        .transform(x.view(), Parallelism::Rayon)
                        .unwrap();
                    let diff = phi.dot(&phi.t()) - &exact;
                    diff.iter().map(|v| v * v).sum::<f64>().sqrt()
                })
                .sum::<f64>()
                / 4.0
        };
        let (e1, e2) = (err(128), err(8192));
        // Expected ratio sqrt(64) = 8; ask for 3.
        assert!(e2 < e1 / 3.0, "{kernel:?}: {e1} -> {e2}");
    }
}

#[test]
fn thread_count_does_not_change_results_and_f32_agrees() {
    for sampler in [Sampler::Mc, Sampler::Structured] {
        for variant in [Variant::CosSin, Variant::CosBias] {
            let cfg = FourierConfig {
                sampler,
                variant,
                ..FourierConfig::new(301)
            };
            let map = FourierFeatures::fit(&cfg, 33, 4).unwrap();
            let x = Array2::from_shape_fn((517, 33), |(i, j)| ((i * 33 + j) as f64 * 0.01).cos());
            let a = map.transform(x.view(), Parallelism::Sequential).unwrap();
            let b = crate::threads::install(|| map.transform(x.view(), Parallelism::Rayon))
                .unwrap()
                .unwrap();
            assert_eq!(a, b);
            let x32 = x.mapv(|v| v as f32);
            let c = map.transform(x32.view(), Parallelism::Rayon).unwrap();
            assert!(c
                .iter()
                .zip(a.iter())
                .all(|(p, q)| (*p as f64 - q).abs() < 1e-5));
            if variant == Variant::CosSin {
                assert!(a.column(300).iter().all(|v| *v == 0.0));
            }
        }
    }
}

/// docs/math/fourier.rst, "Length scales per dimension": the draw at length
/// scale 1 with column `a` divided by `l_a`; one value is [`FourierFeatures::fit`].
#[test]
fn per_dimension_length_scales_rescale_the_unit_draw() {
    let ls = [0.8, 1.6, 0.5];
    for sampler in [
        Sampler::Mc,
        Sampler::Orthogonal,
        Sampler::Structured,
        Sampler::Qmc,
    ] {
        for variant in [Variant::CosSin, Variant::CosBias] {
            let cfg = config(64, Kernel::Gaussian, sampler, variant);
            let ard = FourierFeatures::fit_with_length_scales(&cfg, 3, &ls, 7).unwrap();
            let unit = FourierFeatures::fit(
                &FourierConfig {
                    length_scale: 1.0,
                    ..cfg.clone()
                },
                3,
                7,
            )
            .unwrap();
            assert!(matches!(ard.projection, Projection::Dense(_)));
            assert_eq!(ard.phases, unit.phases);
            let (w, w1) = (ard.frequencies(), unit.frequencies());
            for ((j, a), &v) in w.indexed_iter() {
                let want = w1[[j, a]] / ls[a];
                assert!(
                    (v - want).abs() <= 2.0 * f64::EPSILON * want.abs(),
                    "{sampler:?} {variant:?} ({j}, {a}): {v} vs {want}"
                );
            }
            let one = FourierFeatures::fit_with_length_scales(&cfg, 3, &[L], 7).unwrap();
            assert_eq!(one, FourierFeatures::fit(&cfg, 3, 7).unwrap());
        }
    }
    let cfg = FourierConfig::new(8);
    for bad in [
        &[1.0, 2.0][..],
        &[1.0, 0.0, 1.0],
        &[1.0, f64::NAN, 1.0],
        &[],
    ] {
        let e = FourierFeatures::fit_with_length_scales(&cfg, 3, bad, 0).unwrap_err();
        assert!(
            matches!(
                &e,
                crate::Error::InvalidParameter {
                    name: "length_scale",
                    ..
                }
            ),
            "{bad:?}: {e}"
        );
    }
}

#[test]
fn bad_inputs_are_errors() {
    let good = FourierConfig::new(8);
    let cases: Vec<(FourierConfig, &str)> = vec![
        (
            FourierConfig {
                length_scale: 0.0,
                ..good.clone()
            },
            "length_scale",
        ),
        (
            FourierConfig {
                length_scale: f64::NAN,
                ..good.clone()
            },
            "length_scale",
        ),
        (
            FourierConfig {
                kernel_variance: -1.0,
                ..good.clone()
            },
            "kernel_variance",
        ),
        (
            FourierConfig {
                n_components: 0,
                ..good.clone()
            },
            "n_components",
        ),
        (
            FourierConfig {
                n_components: 0,
                variant: Variant::CosBias,
                ..good.clone()
            },
            "n_components",
        ),
        (
            FourierConfig {
                kernel: Kernel::Matern32,
                sampler: Sampler::Qmc,
                ..good.clone()
            },
            "sampler",
        ),
    ];
    for (cfg, name) in cases {
        let e = FourierFeatures::fit(&cfg, 3, 0).unwrap_err().to_string();
        assert!(e.contains(name), "{e}");
    }
    assert!(Kernel::from_name("rbf")
        .unwrap_err()
        .to_string()
        .contains("kernel"));
    assert!(Sampler::from_name("sobol").is_err());
    assert!(Variant::from_name("cos").is_err());
    let map = FourierFeatures::fit(&good, 3, 0).unwrap();
    let x = Array2::<f64>::zeros((2, 4));
    assert!(matches!(
        map.transform(x.view(), Parallelism::Rayon),
        Err(crate::Error::ShapeMismatch { .. })
    ));
    let mut x = Array2::<f64>::zeros((2, 3));
    x[(1, 1)] = f64::INFINITY;
    assert!(matches!(
        map.transform(x.view(), Parallelism::Rayon),
        Err(crate::Error::NonFinite { .. })
    ));
}

/// The orthogonal sampler's QR runs on one thread: the frequencies are the
/// same bits in pools of any size (faer's default `qr`, split by the pool's
/// threads, changed the last bits of these frequencies).
#[test]
fn orthogonal_frequencies_do_not_depend_on_the_thread_count() {
    let cfg = FourierConfig {
        sampler: Sampler::Orthogonal,
        ..FourierConfig::new(600)
    };
    let draw = |threads: usize| {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        pool.install(|| FourierFeatures::fit(&cfg, 300, 5).unwrap().projection)
    };
    let one = draw(1);
    for threads in [2, 4] {
        assert!(draw(threads) == one, "{threads} threads");
    }
}

/// The orthogonal sampler at length scales beyond `1e±154`, where the
/// squares of frequencies already divided by `l` under- or overflowed (every
/// frequency 0 at `l = 1e200`, infinite at `l = 1e-160`): the features of
/// `(x l, l)` are those of `(x, 1)` to rounding. `w_j(l)` is the unit
/// frequency times `1/l` (2 roundings) and `x l` one more, so each term of
/// `w_jᵀx` moves by at most `5u` of itself (with the product's own rounding
/// on either side) and the sum, with `d − 1` additions each way, by
/// `(2d + 3) u Σ_a |w_ja x_a| ≤ (d + 2) ε Σ_a |w_ja x_a|` (`u = ε/2`); the
/// cosines are 1-Lipschitz, and their evaluation and scaling add at most
/// `2ε` each way.
#[test]
fn orthogonal_frequencies_at_extreme_length_scales() {
    let x = array![[0.3, -0.2, 0.5], [-0.1, 0.4, 0.2], [1.5, 0.7, -2.0]];
    let d = x.ncols() as f64;
    for kernel in [Kernel::Gaussian, Kernel::Matern32] {
        let unit = FourierConfig {
            length_scale: 1.0,
            ..config(64, kernel, Sampler::Orthogonal, Variant::CosSin)
        };
        let map = FourierFeatures::fit(&unit, 3, 7).unwrap();
        let want = map.transform(x.view(), Parallelism::Sequential).unwrap();
        // max_{i,j} Σ_a |w_ja x_ia|.
        let reach = x
            .mapv(f64::abs)
            .dot(&map.frequencies().mapv(f64::abs).t())
            .fold(0.0_f64, |m, &v| m.max(v));
        let tol = map.scale() * ((d + 2.0) * reach + 4.0) * f64::EPSILON;
        for l in [1e-200, 1e-160, 1e160, 1e200] {
            let cfg = FourierConfig {
                length_scale: l,
                ..unit.clone()
            };
            let got = FourierFeatures::fit(&cfg, 3, 7)
                .and_then(|m| m.transform((&x * l).view(), Parallelism::Sequential))
                .unwrap_or_else(|e| panic!("{kernel:?} l = {l:e}: {e}"));
            let err = (&got - &want).iter().fold(0.0_f64, |m, v| m.max(v.abs()));
            assert!(err <= tol, "{kernel:?} l = {l:e}: {err:e} > {tol:e}");
        }
    }
}

/// A length scale so small that the frequencies (spectral samples over `l`)
/// overflow is refused at fit, naming `length_scale`, for every sampler and
/// for per-dimension length scales (not at transform, naming a
/// `projection` that is no argument).
#[test]
fn length_scales_whose_frequencies_overflow_are_refused_at_fit() {
    let named = |r: crate::Result<FourierFeatures>| match r {
        Err(crate::Error::InvalidParameter { name, reason }) => {
            assert!(reason.contains("overflow"), "{reason}");
            name
        }
        other => panic!("expected an error, got {other:?}"),
    };
    for sampler in [
        Sampler::Mc,
        Sampler::Antithetic,
        Sampler::Orthogonal,
        Sampler::Structured,
        Sampler::MomentMatching,
        Sampler::Qmc,
    ] {
        let cfg = FourierConfig {
            length_scale: 5e-324,
            ..config(16, Kernel::Gaussian, sampler, Variant::CosSin)
        };
        assert_eq!(
            named(FourierFeatures::fit(&cfg, 3, 0)),
            "length_scale",
            "{sampler:?}"
        );
    }
    let cfg = config(16, Kernel::Gaussian, Sampler::Mc, Variant::CosSin);
    assert_eq!(
        named(FourierFeatures::fit_with_length_scales(
            &cfg,
            3,
            &[1.0, 5e-324, 1.0],
            0
        )),
        "length_scale"
    );
    let map = FourierFeatures::fit(&cfg, 3, 0).unwrap();
    assert_eq!(
        named(map.with_length_scales(&[L], &[5e-324], 1.0)),
        "length_scale"
    );
}
