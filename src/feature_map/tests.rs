//! The dispatch equals each map's own functions: the CPU transform bit for
//! bit, the chunked accumulation bit for bit against the chunk loop it
//! replaces, the GPU transform and Gram bit for bit against the `gpu`
//! functions of each map (with the zero columns of odd widths), and the
//! device resolution names why a device is unavailable.

use ndarray::{Array1, Array2, ShapeBuilder};
use rand::Rng as _;

use super::*;
use crate::fourier::{FourierConfig, Sampler, Variant};
use crate::kernels::Kernel;
use crate::maclaurin::map::{AllocationStrategy, MaclaurinConfig};
use crate::maclaurin::MaclaurinKernel;
use crate::sketch::{PolySketch, SketchKind};

fn random(rows: usize, cols: usize, seed: u64) -> Array2<f64> {
    let mut rng = crate::rng::seeded(seed);
    Array2::from_shape_fn((rows, cols), |_| rng.random_range(-1.0..1.0))
}

const D_IN: usize = 5;

fn fourier(sampler: Sampler, variant: Variant, n_components: usize) -> FourierFeatures {
    let mut cfg = FourierConfig::new(n_components);
    cfg.sampler = sampler;
    cfg.variant = variant;
    cfg.kernel_variance = 1.7;
    cfg.length_scale = 1.3;
    FourierFeatures::fit(&cfg, D_IN, 3).unwrap()
}

fn polynomial(kind: SketchKind, complex: bool, n_components: usize) -> PolynomialFeatures {
    let nf = if complex {
        n_components / 2
    } else {
        n_components
    };
    let sk = PolySketch::draw(kind, complex, 2, D_IN + 1, nf, &mut crate::rng::seeded(4)).unwrap();
    PolynomialFeatures::new(sk, 0.5, 1.2, n_components).unwrap()
}

/// A Gaussian-kernel Maclaurin map; TensorSketch blocks (which the
/// optimized allocation does not model) with Kar & Karnick's degrees.
fn maclaurin(x: &Array2<f64>, sketch: SketchKind) -> MaclaurinMap {
    let mut cfg = MaclaurinConfig::new(MaclaurinKernel::Gaussian, 23);
    cfg.sketch = sketch;
    if sketch == SketchKind::TensorSketch {
        cfg.allocation = AllocationStrategy::Random;
    }
    cfg.length_scale = 1.5;
    MaclaurinMap::fit(
        x.view(),
        &cfg,
        5,
        Parallelism::Sequential,
        &Monitor::default(),
    )
    .unwrap()
}

fn nystroem(x: &Array2<f64>) -> NystroemFeatures {
    NystroemFeatures::fit(x.view(), 12, Kernel::Matern52, &[1.1], 6)
        .unwrap()
        .0
}

/// One map of every kind and configuration the dispatch distinguishes:
/// dense and structured frequencies, both variants, an odd `cos_sin`
/// width; real, complex with an odd width, and TensorSketch sketches; the
/// Maclaurin map; Nyström.
fn every_map(x: &Array2<f64>) -> Vec<AnyFeatureMap> {
    vec![
        fourier(Sampler::Orthogonal, Variant::CosSin, 33).into(),
        fourier(Sampler::Mc, Variant::CosBias, 20).into(),
        fourier(Sampler::Structured, Variant::CosSin, 32).into(),
        polynomial(SketchKind::TensorSrht, false, 16).into(),
        polynomial(SketchKind::Gaussian, true, 15).into(),
        polynomial(SketchKind::TensorSketch, false, 16).into(),
        maclaurin(x, SketchKind::TensorSrht).into(),
        nystroem(x).into(),
    ]
}

/// The map's own CPU transform (its inherent method).
fn own_transform<T: Real>(map: &AnyFeatureMap, x: ArrayView2<'_, T>) -> Array2<T> {
    let par = Parallelism::Rayon;
    match map {
        AnyFeatureMap::Fourier(m) => m.transform(x, par),
        AnyFeatureMap::Polynomial(m) => m.transform(x, par),
        AnyFeatureMap::Maclaurin(m) => m.transform(x, par),
        AnyFeatureMap::Nystroem(m) => {
            let mut out = Array2::zeros((x.nrows(), m.landmarks.nrows()));
            m.transform_into(x, out.view_mut(), par).map(|()| out)
        }
    }
    .unwrap()
}

fn dispatched<M: FeatureMap, T: Real>(m: &M, x: ArrayView2<'_, T>, device: Device) -> Array2<T> {
    let mut out = Array2::zeros((x.nrows(), m.n_components()));
    transform_into(m, x, out.view_mut(), device, Parallelism::Rayon).unwrap();
    out
}

#[test]
fn a_chunk_of_features_too_large_for_memory_is_refused_before_any_transform() {
    // 2^40 copies of one row (a view of stride 0, no memory) in one chunk:
    // its features would take 2^40 · 64 · 8 bytes.
    let map = fourier(Sampler::Mc, Variant::CosSin, 64);
    let row = [0.5; D_IN];
    let x = ArrayView2::from_shape((1usize << 40, D_IN).strides((0, 1)), &row).unwrap();
    let monitor = crate::progress::Monitor::default();
    let chunks = Chunks {
        device: Device::Cpu,
        chunk_rows: usize::MAX,
        par: Parallelism::Rayon,
        monitor: &monitor,
    };
    let mut calls = 0;
    let e = chunks
        .for_each(&map, x, "rows", |_, _| {
            calls += 1;
            Ok(())
        })
        .unwrap_err();
    assert!(e.to_string().contains("lower chunk_size"), "{e}");
    assert_eq!(calls, 0);
}

#[test]
fn cpu_transform_is_the_maps_own_bit_for_bit() {
    let x = random(70, D_IN, 1);
    let x32 = x.mapv(|v| v as f32);
    for map in every_map(&x) {
        let want = own_transform(&map, x.view());
        assert_eq!(dispatched(&map, x.view(), Device::Cpu), want, "{map:?}");
        let want32 = own_transform(&map, x32.view());
        assert_eq!(dispatched(&map, x32.view(), Device::Cpu), want32);
        // Through the concrete type too (not only the enum).
        if let AnyFeatureMap::Maclaurin(m) = &map {
            assert_eq!(dispatched(m, x.view(), Device::Cpu), want);
            let c = [0.1, -0.2, 0.3, 0.0, 0.4];
            let mut own = Array2::zeros(want.dim());
            m.transform_centered_into(x.view(), &c, own.view_mut(), Parallelism::Rayon)
                .unwrap();
            let mut got = Array2::zeros(want.dim());
            transform_centered_into(
                m,
                x.view(),
                &c,
                got.view_mut(),
                Device::Cpu,
                Parallelism::Rayon,
            )
            .unwrap();
            assert_eq!(got, own);
        }
    }
}

#[test]
fn odd_widths_end_in_zero_columns() {
    let x = random(9, D_IN, 2);
    let rff = dispatched(
        &fourier(Sampler::Mc, Variant::CosSin, 33),
        x.view(),
        Device::Cpu,
    );
    let sk = dispatched(
        &polynomial(SketchKind::Rademacher, true, 15),
        x.view(),
        Device::Cpu,
    );
    assert!(rff.column(32).iter().all(|&v| v == 0.0));
    assert!(sk.column(14).iter().all(|&v| v == 0.0));
    assert!(sk.column(13).iter().any(|&v| v != 0.0));
}

#[test]
fn shapes_are_checked_before_dispatch() {
    let x = random(4, D_IN, 3);
    let map = fourier(Sampler::Mc, Variant::CosSin, 8);
    let mut out = Array2::<f64>::zeros((4, 8));
    let bad_x = random(4, D_IN + 1, 3);
    assert!(matches!(
        transform_into(
            &map,
            bad_x.view(),
            out.view_mut(),
            Device::Cpu,
            Parallelism::Rayon
        ),
        Err(Error::ShapeMismatch {
            name: "number of features of X",
            ..
        })
    ));
    let mut bad_out = Array2::<f64>::zeros((4, 9));
    assert!(matches!(
        transform_into(
            &map,
            x.view(),
            bad_out.view_mut(),
            Device::Cpu,
            Parallelism::Rayon
        ),
        Err(Error::ShapeMismatch { .. })
    ));
    let y = Array1::zeros(4);
    let mut stats = FeatureStats::new(8);
    assert!(matches!(
        accumulate(
            &map,
            x.view(),
            y.view(),
            &mut stats,
            Device::Cpu,
            0,
            Parallelism::Rayon,
            &Monitor::default(),
        ),
        Err(Error::InvalidParameter {
            name: "chunk_rows",
            ..
        })
    ));
    let mut wrong = FeatureStats::new(7);
    assert!(matches!(
        accumulate(
            &map,
            x.view(),
            y.view(),
            &mut wrong,
            Device::Cpu,
            2,
            Parallelism::Rayon,
            &Monitor::default(),
        ),
        Err(Error::ShapeMismatch { .. })
    ));
    assert!(matches!(
        accumulate(
            &map,
            x.view(),
            y.slice(ndarray::s![..3]),
            &mut stats,
            Device::Cpu,
            2,
            Parallelism::Rayon,
            &Monitor::default(),
        ),
        Err(Error::ShapeMismatch { .. })
    ));
}

/// The statistics of the chunk loop `accumulate` replaces: each chunk
/// transformed by the map itself, then added.
fn chunk_loop(map: &AnyFeatureMap, x: &Array2<f64>, y: &Array1<f64>, chunk: usize) -> FeatureStats {
    let mut stats = FeatureStats::new(map.n_components());
    for k0 in (0..x.nrows()).step_by(chunk) {
        let k1 = (k0 + chunk).min(x.nrows());
        let phi = own_transform(map, x.slice(ndarray::s![k0..k1, ..]));
        stats
            .accumulate(phi.view(), y.slice(ndarray::s![k0..k1]), Parallelism::Rayon)
            .unwrap();
    }
    stats
}

#[test]
fn cpu_accumulation_equals_the_chunk_loop_exactly_for_every_chunk_size() {
    let (n, x) = (150, random(150, D_IN, 7));
    let y = Array1::from_shape_fn(n, |i| 3.0 + (i as f64 * 0.3).sin());
    for map in every_map(&x) {
        let mut one = FeatureStats::new(map.n_components());
        accumulate(
            &map,
            x.view(),
            y.view(),
            &mut one,
            Device::Cpu,
            n,
            Parallelism::Rayon,
            &Monitor::default(),
        )
        .unwrap();
        for chunk in [1, 7, 64, n, 4 * n] {
            let mut got = FeatureStats::new(map.n_components());
            accumulate(
                &map,
                x.view(),
                y.view(),
                &mut got,
                Device::Cpu,
                chunk,
                Parallelism::Rayon,
                &Monitor::default(),
            )
            .unwrap();
            assert_eq!(
                got,
                chunk_loop(&map, &x, &y, chunk),
                "chunk {chunk}: {map:?}"
            );
            // Other chunkings: the same sums in another order (and the
            // first chunk's shift).
            assert_eq!(got.n, one.n);
            assert!((got.y_mean() - one.y_mean()).abs() <= 1e-14 * one.y_mean().abs());
            let scale = one.gram.iter().fold(1.0_f64, |m, v| m.max(v.abs()));
            for (a, b) in got.gram.iter().zip(&one.gram) {
                assert!((a - b).abs() <= 1e-12 * scale, "{a} vs {b}");
            }
        }
    }
}

#[test]
fn resolve_device_names_the_reason() {
    let x = random(30, D_IN, 8);
    let x1 = random(30, 1, 8);
    let mut cfg = MaclaurinConfig::new(MaclaurinKernel::Gaussian, 6);
    cfg.length_scale = 1.5;
    let explicit_1d = MaclaurinMap::fit(
        x1.view(),
        &cfg,
        1,
        Parallelism::Sequential,
        &Monitor::default(),
    )
    .unwrap();
    let unsupported: Vec<(AnyFeatureMap, &str)> = vec![
        (
            polynomial(SketchKind::TensorSketch, false, 8).into(),
            "tensor_sketch",
        ),
        (
            maclaurin(&x, SketchKind::TensorSketch).into(),
            "tensor_sketch",
        ),
        (explicit_1d.into(), "one-dimensional"),
        (nystroem(&x).into(), "Nyström"),
    ];
    for (map, why) in &unsupported {
        let err = resolve_device(map, Device::Gpu).unwrap_err();
        let msg = err.to_string();
        assert!(
            matches!(err, Error::InvalidParameter { name: "device", .. }) && msg.contains(why),
            "{msg}"
        );
        assert!(map.gpu_support().unwrap_err().contains(why));
        assert_eq!(resolve_device(map, Device::Auto).unwrap(), Device::Cpu);
        assert_eq!(resolve_device(map, Device::Cpu).unwrap(), Device::Cpu);
        // The dispatching functions refuse the GPU for the same reason.
        let y = Array1::zeros(x.nrows());
        let xs = if map.n_features_in() == 1 { &x1 } else { &x };
        let mut stats = FeatureStats::new(map.n_components());
        let err = accumulate(
            map,
            xs.view(),
            y.view(),
            &mut stats,
            Device::Gpu,
            8,
            Parallelism::Rayon,
            &Monitor::default(),
        )
        .unwrap_err();
        assert!(err.to_string().contains(why));
    }
    // A map with a kernel: the GPU exactly when an adapter is usable.
    let map = fourier(Sampler::Mc, Variant::CosSin, 8);
    assert!(map.gpu_support().is_ok());
    assert_eq!(
        resolve_device(&map, Device::Gpu).ok(),
        gpu::resolve(Device::Gpu).ok()
    );
    assert_eq!(
        resolve_device(&map, Device::Auto).unwrap(),
        gpu::resolve(Device::Auto).unwrap()
    );
}

#[cfg(not(feature = "gpu"))]
#[test]
fn without_the_gpu_feature_the_gpu_is_an_error_naming_the_feature() {
    let x = random(4, D_IN, 9);
    let map = fourier(Sampler::Mc, Variant::CosSin, 8);
    let mut out = Array2::<f64>::zeros((4, 8));
    let err = transform_into(
        &map,
        x.view(),
        out.view_mut(),
        Device::Gpu,
        Parallelism::Rayon,
    )
    .unwrap_err();
    assert!(matches!(err, Error::Gpu(_)) && err.to_string().contains("`gpu` cargo feature"));
}

#[cfg(feature = "gpu")]
mod on_gpu {
    use super::*;

    /// The GPU tests need an adapter (`make test` installs lavapipe).
    fn need_gpu() {
        if let Err(e) = gpu::resolve(Device::Gpu) {
            panic!("the GPU tests need an adapter (make test installs lavapipe): {e}");
        }
    }

    /// The maps with a GPU kernel.
    fn gpu_maps(x: &Array2<f64>) -> Vec<AnyFeatureMap> {
        every_map(x)
            .into_iter()
            .filter(|m| m.gpu_support().is_ok())
            .collect()
    }

    /// What the `gpu` functions of each map give, with the zero columns of
    /// an odd width appended (what the Python estimators did before the
    /// trait did it).
    fn old_gpu_transform<T: Real>(map: &AnyFeatureMap, x: ArrayView2<'_, T>) -> Array2<T> {
        let mut out = Array2::zeros((x.nrows(), map.n_components()));
        match map {
            AnyFeatureMap::Fourier(m) => {
                let w = m.frequencies().mapv(T::from_f64_lossy);
                let b = m.phases.as_ref().map(|b| b.mapv(T::from_f64_lossy));
                let phi = gpu::rff_features(
                    x,
                    w.view(),
                    b.as_ref().map(|b| b.view()),
                    m.variant,
                    T::from_f64_lossy(m.scale()),
                )
                .unwrap();
                out.slice_mut(ndarray::s![.., ..phi.ncols()]).assign(&phi);
            }
            AnyFeatureMap::Polynomial(m) => {
                let phi = gpu::sketch_features(m.sketch(), x, m.bias(), m.length_scale()).unwrap();
                out.slice_mut(ndarray::s![.., ..phi.ncols()]).assign(&phi);
            }
            AnyFeatureMap::Maclaurin(m) => out = gpu::maclaurin_features(m, x, None).unwrap(),
            AnyFeatureMap::Nystroem(_) => unreachable!("no GPU kernel"),
        }
        out
    }

    /// The `gpu` Gram functions of each map, padded to the map's width.
    fn old_gpu_gram(
        map: &AnyFeatureMap,
        x: ArrayView2<'_, f64>,
        y: ArrayView2<'_, f64>,
    ) -> gpu::Gram {
        match map {
            AnyFeatureMap::Fourier(m) => gpu::rff_gram(
                x,
                m.frequencies().view(),
                m.phases.as_ref().map(|b| b.view()),
                m.variant,
                m.scale(),
                Some(y),
            ),
            AnyFeatureMap::Polynomial(m) => {
                gpu::sketch_gram(m.sketch(), x, m.bias(), m.length_scale(), Some(y))
            }
            AnyFeatureMap::Maclaurin(m) => gpu::maclaurin_gram(m, x, None, Some(y)),
            AnyFeatureMap::Nystroem(_) => unreachable!("no GPU kernel"),
        }
        .unwrap()
        .padded(map.n_components())
    }

    #[test]
    fn gpu_transform_and_gram_equal_the_gpu_functions() {
        need_gpu();
        let x = random(70, D_IN, 10);
        let x32 = x.mapv(|v| v as f32);
        let y = random(70, 2, 11);
        for map in gpu_maps(&x) {
            let before = gpu::dispatch_count();
            assert_eq!(
                dispatched(&map, x.view(), Device::Gpu),
                old_gpu_transform(&map, x.view()),
                "{map:?}"
            );
            assert_eq!(
                dispatched(&map, x32.view(), Device::Gpu),
                old_gpu_transform(&map, x32.view())
            );
            assert!(gpu::dispatch_count() > before, "the GPU ran");
            let g = map.gpu_gram(x.view(), Some(y.view())).unwrap();
            assert_eq!(g, old_gpu_gram(&map, x.view(), y.view()));
            assert_eq!(g.phi_t_phi.dim(), (map.n_components(), map.n_components()));
            if let AnyFeatureMap::Maclaurin(m) = &map {
                let c = [0.1, -0.2, 0.3, 0.0, 0.4];
                let mut got = Array2::zeros((70, m.width()));
                transform_centered_into(
                    m,
                    x.view(),
                    &c,
                    got.view_mut(),
                    Device::Gpu,
                    Parallelism::Rayon,
                )
                .unwrap();
                assert_eq!(got, gpu::maclaurin_features(m, x.view(), Some(&c)).unwrap());
            }
        }
    }

    /// The GPU accumulation is the arithmetic of the former Python path:
    /// the Gram of `Φ` with `[y − s, 1]`, `s` the rows' mean, the target
    /// sums on the host, merged; and it agrees with the CPU statistics to
    /// the f32 accuracy of the device features.
    #[test]
    fn gpu_accumulation_is_the_shifted_gram_merged() {
        need_gpu();
        let n = 90;
        let x = random(n, D_IN, 12);
        let y = Array1::from_shape_fn(n, |i| 10.0 + (i as f64 * 0.2).cos());
        for map in gpu_maps(&x) {
            let mut got = FeatureStats::new(map.n_components());
            accumulate(
                &map,
                x.view(),
                y.view(),
                &mut got,
                Device::Gpu,
                16,
                Parallelism::Rayon,
                &Monitor::default(),
            )
            .unwrap();
            let shift = y.sum() / n as f64;
            let yc = y.mapv(|v| v - shift);
            let mut targets = Array2::<f64>::ones((n, 2));
            targets.column_mut(0).assign(&yc);
            let g = old_gpu_gram(&map, x.view(), targets.view());
            let b = g.phi_t_y.unwrap();
            let want = FeatureStats {
                gram: g.phi_t_phi,
                phi_y: b.column(0).to_owned(),
                phi_sum: b.column(1).to_owned(),
                n: n as u64,
                y_shift: shift,
                y_sum: yc.sum(),
                y_sq_sum: yc.iter().map(|v| v * v).sum(),
            };
            assert_eq!(got, want, "{map:?}");
            // A second block merges exactly as FeatureStats::merge does.
            let mut twice = got.clone();
            accumulate(
                &map,
                x.view(),
                y.view(),
                &mut twice,
                Device::Gpu,
                16,
                Parallelism::Rayon,
                &Monitor::default(),
            )
            .unwrap();
            let mut merged = want.clone();
            merged.merge(&want).unwrap();
            assert_eq!(twice, merged);
            // Against the CPU statistics: the f32 features' accuracy.
            let mut cpu = FeatureStats::new(map.n_components());
            accumulate(
                &map,
                x.view(),
                y.view(),
                &mut cpu,
                Device::Cpu,
                16,
                Parallelism::Rayon,
                &Monitor::default(),
            )
            .unwrap();
            let scale = cpu.gram.iter().fold(1.0_f64, |m, v| m.max(v.abs()));
            for (a, b) in got.gram_symmetric().iter().zip(&cpu.gram_symmetric()) {
                assert!((a - b).abs() <= 1e-3 * scale, "{a} vs {b}");
            }
            assert!((got.y_mean() - cpu.y_mean()).abs() <= 1e-12 * cpu.y_mean().abs());
        }
    }
}
