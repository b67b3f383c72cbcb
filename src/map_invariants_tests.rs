//! Fitted maps whose public fields were edited so that they disagree with
//! each other: every transform entry point (the map's own, and the generic
//! ones of [`crate::feature_map`], CPU and GPU) must refuse them with an
//! error naming the field, never panic or return features of the wrong
//! map; and an untouched map must transform as before, bit for bit. (The
//! maps with private fields can only be corrupted through serde: their
//! tests are in `serde_tests.rs`.)

use ndarray::{Array1, Array2, ShapeBuilder};

use crate::error::Error;
use crate::feature_map::{self, AnyFeatureMap, Chunks, FeatureMap};
use crate::fourier::{FourierConfig, FourierFeatures, Method, Projection, Sampler, Variant};
use crate::gpu::Device;
use crate::kernels::Kernel;
use crate::nystroem::NystroemFeatures;
use crate::progress::Monitor;
use crate::stats::FeatureStats;
use crate::threads::Parallelism;

const PAR: Parallelism = Parallelism::Rayon;

/// A map's own transform of `x` into `out`.
type OwnTransform<'a> = &'a dyn Fn(&Array2<f64>, &mut Array2<f64>) -> crate::Result<()>;

/// An edit of the fields of a structured projection: signs, `n_features`,
/// `n_frequencies`, `length_scale`.
type SorfEdit<'a> = &'a dyn Fn(&mut Array2<f64>, &mut usize, &mut usize, &mut f64);

fn inputs(rows: usize, cols: usize, seed: u64) -> Array2<f64> {
    use rand::Rng as _;
    let mut rng = crate::rng::seeded(seed);
    Array2::from_shape_fn((rows, cols), |_| rng.random_range(-1.0..1.0))
}

/// What a corrupted map must be refused with: the variant and a word of
/// the error's name (the field), and for [`Error::InvalidParameter`]
/// optionally a word of the reason.
#[derive(Clone, Copy, Debug)]
enum Refusal {
    Shape(&'static str),
    Invalid(&'static str, &'static str),
}

fn assert_refused(err: &Error, want: Refusal, case: &str) {
    match (want, err) {
        (Refusal::Shape(field), Error::ShapeMismatch { name, .. }) if name.contains(field) => {}
        (Refusal::Invalid(field, why), Error::InvalidParameter { name, reason })
            if name.contains(field) && reason.contains(why) => {}
        _ => panic!("{case}: expected {want:?}, got {err:?}"),
    }
}

/// Every entry point of a map with `d` inputs refuses it as `want`: its own
/// transform, the generic transform on the CPU and on the GPU (the fields
/// are checked before the device is resolved), the statistics and the
/// chunked loop (checked before their buffers are sized by the width).
fn assert_every_entry_refuses<M: FeatureMap>(
    map: &M,
    own: OwnTransform<'_>,
    d: usize,
    want: Refusal,
    case: &str,
) {
    let x = inputs(5, d, 99);
    // The own transform gets an output of the width the corrupted map
    // claims when it is small (so that only the fields can be wrong), else
    // one column.
    let width = map.n_components();
    let cols = if width <= 1 << 16 { width } else { 1 };
    let mut out = Array2::<f64>::zeros((5, cols));
    assert_refused(&own(&x, &mut out).unwrap_err(), want, case);
    for device in [Device::Cpu, Device::Gpu] {
        let e =
            feature_map::transform_into(map, x.view(), out.view_mut(), device, PAR).unwrap_err();
        assert_refused(
            &e,
            want,
            &format!("{case} (generic transform on {device:?})"),
        );
    }
    let y = Array1::<f64>::zeros(5);
    let mut stats = FeatureStats::new(cols);
    let e = feature_map::accumulate(
        map,
        x.view(),
        y.view(),
        &mut stats,
        Device::Cpu,
        4,
        PAR,
        &Monitor::default(),
    )
    .unwrap_err();
    assert_refused(&e, want, &format!("{case} (accumulate)"));
    let monitor = Monitor::default();
    let chunks = Chunks {
        device: Device::Cpu,
        chunk_rows: 1 << 20,
        par: PAR,
        monitor: &monitor,
    };
    let e = chunks
        .for_each(map, x.view(), "rows", |_, _| Ok(()))
        .unwrap_err();
    assert_refused(&e, want, &format!("{case} (chunks)"));
}

fn fourier_map(sampler: Sampler, variant: Variant, n_components: usize) -> FourierFeatures {
    let mut cfg = FourierConfig::new(n_components);
    cfg.sampler = sampler;
    cfg.variant = variant;
    FourierFeatures::fit(&cfg, 3, 17).unwrap()
}

fn fourier_refuses(map: &FourierFeatures, want: Refusal, case: &str) {
    let own =
        |x: &Array2<f64>, out: &mut Array2<f64>| map.transform_into(x.view(), out.view_mut(), PAR);
    // Every map of the tests was drawn for 3 inputs (a corrupted one may
    // claim another number).
    assert_every_entry_refuses(map, &own, 3, want, case);
    // The allocating form checks before it allocates.
    let x = inputs(5, 3, 98);
    assert_refused(&map.transform(x.view(), PAR).unwrap_err(), want, case);
    let x32 = x.mapv(|v| v as f32);
    assert_refused(
        &map.transform(x32.view(), PAR).unwrap_err(),
        want,
        &format!("{case} (float32)"),
    );
    // Every method, and the rescaled copy, refuse it too.
    let mut out = Array2::<f64>::zeros((5, map.n_components.min(1 << 16)));
    let e = map
        .transform_into_with(x.view(), out.view_mut(), PAR, Method::Tiles)
        .unwrap_err();
    assert_refused(&e, want, &format!("{case} (tiles)"));
    if let Err(e) = map.with_length_scales(&[1.0], &[2.0], 1.0) {
        assert_refused(&e, want, &format!("{case} (with_length_scales)"));
    } else if !matches!(want, Refusal::Invalid("projection", _)) {
        // Only the values of the frequencies are checked at transform time
        // alone (a rescaled copy is checked again when it transforms).
        panic!("{case}: with_length_scales accepted the map");
    }
}

/// Bit-identical features of an untouched map through every entry point,
/// and of the same map rebuilt from its fields.
fn fourier_unchanged(map: &FourierFeatures) {
    let x = inputs(300, map.n_features(), 5);
    let phi = map.transform(x.view(), PAR).unwrap();
    let rebuilt = FourierFeatures::from_parts(
        map.projection.clone(),
        map.phases.clone(),
        map.variant,
        map.n_components,
        map.kernel_variance,
    )
    .unwrap();
    assert_eq!(rebuilt.transform(x.view(), PAR).unwrap(), phi);
    let mut out = Array2::zeros(phi.dim());
    feature_map::transform_into(map, x.view(), out.view_mut(), Device::Cpu, PAR).unwrap();
    assert_eq!(out, phi);
    let x32 = x.mapv(|v| v as f32);
    let tiles = |m: &FourierFeatures| {
        let mut out = Array2::<f32>::zeros(phi.dim());
        m.transform_into_with(x32.view(), out.view_mut(), PAR, Method::Tiles)
            .unwrap();
        out
    };
    assert_eq!(tiles(map), tiles(&rebuilt));
    assert_eq!(tiles(map), tiles(&map.clone()));
}

#[test]
fn fourier_features_refuse_fields_that_disagree() {
    use Refusal::{Invalid, Shape};
    let sin = fourier_map(Sampler::Mc, Variant::CosSin, 8);
    let bias = fourier_map(Sampler::Orthogonal, Variant::CosBias, 8);
    let sorf = fourier_map(Sampler::Structured, Variant::CosSin, 21);
    for map in [&sin, &bias, &sorf] {
        fourier_unchanged(map);
    }
    let edit = |map: &FourierFeatures, f: &dyn Fn(&mut FourierFeatures)| {
        let mut m = map.clone();
        f(&mut m);
        m
    };
    let nan_phase = |m: &mut FourierFeatures| {
        if let Some(b) = &mut m.phases {
            b[3] = f64::NAN;
        }
    };
    let dense_w = |m: &mut FourierFeatures| match &mut m.projection {
        Projection::Dense(w) => w[[2, 1]] = f64::NAN,
        Projection::Structured { .. } => unreachable!(),
    };
    let cases: Vec<(&str, FourierFeatures, Refusal)> = vec![
        // 3 columns of cos_sin are 1 frequency, not the 4 of the projection
        // (a panic slicing the output, before).
        (
            "n_components 3",
            edit(&sin, &|m| m.n_components = 3),
            Shape("n_components"),
        ),
        // Wider than the projection: silently transformed, before.
        (
            "n_components 20",
            edit(&sin, &|m| m.n_components = 20),
            Shape("n_components"),
        ),
        (
            "n_components 100",
            edit(&bias, &|m| m.n_components = 100),
            Shape("n_components"),
        ),
        (
            "n_components 0",
            edit(&bias, &|m| m.n_components = 0),
            Invalid("n_components", ">= 1"),
        ),
        // Wide enough to overflow the size of any buffer sized by it.
        (
            "n_components usize::MAX / 2",
            edit(&sin, &|m| m.n_components = usize::MAX / 2),
            Shape("n_components"),
        ),
        (
            "cos_sin variant with 1 column",
            edit(&sin, &|m| m.n_components = 1),
            Invalid("n_components", ">= 1"),
        ),
        (
            "cos_bias without phases",
            edit(&bias, &|m| m.phases = None),
            Shape("phases"),
        ),
        (
            "cos_bias with 7 phases",
            edit(&bias, &|m| m.phases = Some(Array1::zeros(7))),
            Shape("phases"),
        ),
        (
            "cos_bias with 9 phases",
            edit(&bias, &|m| m.phases = Some(Array1::zeros(9))),
            Shape("phases"),
        ),
        (
            "cos_bias with a NaN phase",
            edit(&bias, &nan_phase),
            Invalid("phases", "finite"),
        ),
        (
            "cos_sin with phases",
            edit(&sin, &|m| m.phases = Some(Array1::zeros(4))),
            Invalid("phases", "no phases"),
        ),
        (
            "cos_bias variant on a cos_sin projection",
            edit(&sin, &|m| m.variant = Variant::CosBias),
            Shape("n_components"),
        ),
        (
            "kernel_variance -1",
            edit(&sin, &|m| m.kernel_variance = -1.0),
            Invalid("kernel_variance", "finite number > 0"),
        ),
        (
            "kernel_variance NaN",
            edit(&bias, &|m| m.kernel_variance = f64::NAN),
            Invalid("kernel_variance", "finite number > 0"),
        ),
        (
            "a NaN frequency",
            edit(&bias, &dense_w),
            Invalid("projection", "finite"),
        ),
        (
            "a dense projection of 5 frequencies",
            edit(&sin, &|m| {
                m.projection = Projection::Dense(Array2::ones((5, 3)));
            }),
            Shape("projection"),
        ),
    ];
    for (case, map, want) in &cases {
        fourier_refuses(map, *want, case);
    }

    // The structured projection's own fields.
    let sorf_edit = |f: SorfEdit<'_>| {
        let mut m = sorf.clone();
        if let Projection::Structured {
            signs,
            n_features,
            n_frequencies,
            length_scale,
        } = &mut m.projection
        {
            f(signs, n_features, n_frequencies, length_scale);
        }
        m
    };
    let sorf_cases: Vec<(&str, FourierFeatures, Refusal)> = vec![
        (
            "SORF signs with a block too few",
            sorf_edit(&|s, _, _, _| *s = s.slice(ndarray::s![..3, ..]).to_owned()),
            Shape("signs"),
        ),
        (
            "SORF signs of another width",
            sorf_edit(&|s, _, _, _| *s = Array2::ones((s.nrows(), 8))),
            Shape("signs"),
        ),
        (
            "SORF n_features 9",
            sorf_edit(&|_, d, _, _| *d = 9),
            Shape("signs"),
        ),
        (
            "SORF n_features without a power of two",
            sorf_edit(&|_, d, _, _| *d = usize::MAX),
            Invalid("n_features", "power of two"),
        ),
        (
            "SORF n_frequencies 12",
            sorf_edit(&|_, _, m, _| *m = 12),
            Shape("n_components"),
        ),
        (
            "SORF length_scale -1",
            sorf_edit(&|_, _, _, l| *l = -1.0),
            Invalid("length_scale", "> 0"),
        ),
        (
            "SORF sign 2",
            sorf_edit(&|s, _, _, _| s[[1, 2]] = 2.0),
            Invalid("projection", "+1 or -1"),
        ),
    ];
    for (case, map, want) in &sorf_cases {
        fourier_refuses(map, *want, case);
    }
}

#[test]
fn fourier_features_derive_again_for_a_replaced_projection() {
    // The float32 tile transform keeps a float32 copy of the frequencies:
    // a projection assigned after it must be used, not the copy (a panic in
    // the GEMM for another input width, the old features for the same).
    let x = inputs(40, 3, 7);
    let x32 = x.mapv(|v| v as f32);
    let tiles = |m: &FourierFeatures, x: &Array2<f32>| {
        let mut out = Array2::<f32>::zeros((x.nrows(), m.n_components));
        m.transform_into_with(x.view(), out.view_mut(), PAR, Method::Tiles)
            .map(|()| out)
    };
    let mut map = fourier_map(Sampler::Mc, Variant::CosBias, 8);
    tiles(&map, &x32).unwrap();
    let other = fourier_map(Sampler::Orthogonal, Variant::CosBias, 8);
    map.projection = other.projection.clone();
    map.phases = other.phases.clone();
    assert_eq!(tiles(&map, &x32).unwrap(), tiles(&other, &x32).unwrap());
    // Another input width.
    let wide = FourierFeatures::fit(&FourierConfig::new(8), 5, 3).unwrap();
    map.projection = wide.projection.clone();
    map.phases = wide.phases.clone();
    map.variant = wide.variant;
    let x5 = inputs(40, 5, 8).mapv(|v| v as f32);
    assert_eq!(tiles(&map, &x5).unwrap(), tiles(&wide, &x5).unwrap());
    // The overflow bound follows the projection too: frequencies 1e300
    // times larger make every nonzero input overflow.
    let mut big = wide.clone();
    tiles(&big, &x5).unwrap();
    if let Projection::Dense(w) = &wide.projection {
        big.projection = Projection::Dense(w.mapv(|v| v * 1e300));
    }
    assert_refused(
        &tiles(&big, &x5).unwrap_err(),
        Refusal::Invalid("X", "overflow"),
        "frequencies scaled by 1e300",
    );
    // A new draw at the address of the array the copy came from (what a
    // freed array's reuse by the allocator gives after two assignments
    // between transforms): the array is taken out, refilled and put back.
    let mut reused = fourier_map(Sampler::Mc, Variant::CosBias, 8);
    tiles(&reused, &x32).unwrap();
    // The fused transform's packed panels too (three inputs: fused here).
    reused.transform(x.view(), PAR).unwrap();
    reused.transform(x32.view(), PAR).unwrap();
    let redraw = {
        let mut cfg = FourierConfig::new(8);
        cfg.variant = Variant::CosBias;
        FourierFeatures::fit(&cfg, 3, 18).unwrap()
    };
    let kept = std::mem::replace(&mut reused.projection, redraw.projection.clone());
    let (Projection::Dense(mut w), Projection::Dense(w_new)) = (kept, &redraw.projection) else {
        panic!("Monte Carlo frequencies are dense");
    };
    let addr = w.as_ptr();
    w.assign(w_new);
    reused.projection = Projection::Dense(w);
    reused.phases = redraw.phases.clone();
    if let Projection::Dense(w) = &reused.projection {
        assert_eq!(w.as_ptr(), addr);
    }
    assert_eq!(tiles(&reused, &x32).unwrap(), tiles(&redraw, &x32).unwrap());
    assert_eq!(
        reused.transform(x.view(), PAR).unwrap(),
        redraw.transform(x.view(), PAR).unwrap()
    );
    assert_eq!(
        reused.transform(x32.view(), PAR).unwrap(),
        redraw.transform(x32.view(), PAR).unwrap()
    );
    // Structured signs in column-major order are the same signs.
    let sorf = fourier_map(Sampler::Structured, Variant::CosSin, 21);
    let mut fortran = sorf.clone();
    if let Projection::Structured { signs, .. } = &mut fortran.projection {
        let mut f = Array2::zeros(signs.raw_dim().f());
        f.assign(&*signs);
        *signs = f;
    }
    assert_eq!(
        fortran.transform(x.view(), PAR).unwrap(),
        sorf.transform(x.view(), PAR).unwrap()
    );
}

#[test]
fn nystroem_features_refuse_fields_that_disagree() {
    use Refusal::{Invalid, Shape};
    let x = inputs(60, 3, 21);
    let (map, _) = NystroemFeatures::fit(x.view(), 9, Kernel::Matern52, &[0.8], 4).unwrap();
    // Untouched: the same features as the map rebuilt from its fields.
    let phi = {
        let mut out = Array2::zeros((60, 9));
        map.transform_into(x.view(), out.view_mut(), PAR).unwrap();
        out
    };
    let rebuilt = NystroemFeatures::from_parts(
        map.landmarks.clone(),
        map.normalization.clone(),
        map.kernel,
        map.length_scale.clone(),
    )
    .unwrap();
    let mut out = Array2::zeros((60, 9));
    feature_map::transform_into(&rebuilt, x.view(), out.view_mut(), Device::Cpu, PAR).unwrap();
    assert_eq!(out, phi);
    let any = AnyFeatureMap::from(map.clone());
    feature_map::transform_into(&any, x.view(), out.view_mut(), Device::Cpu, PAR).unwrap();
    assert_eq!(out, phi);

    let edit = |f: &dyn Fn(&mut NystroemFeatures)| {
        let mut m = map.clone();
        f(&mut m);
        m
    };
    let cases: Vec<(&str, NystroemFeatures, Refusal)> = vec![
        // A faer assertion in the product, before.
        (
            "normalization 10 x 10",
            edit(&|m| m.normalization = Array2::eye(10)),
            Shape("normalization"),
        ),
        (
            "normalization 9 x 8",
            edit(&|m| m.normalization = Array2::zeros((9, 8))),
            Shape("normalization"),
        ),
        (
            "landmarks without their last row",
            edit(&|m| m.landmarks = m.landmarks.slice(ndarray::s![..8, ..]).to_owned()),
            Shape("normalization"),
        ),
        // Silently transformed, before.
        (
            "length_scale -1",
            edit(&|m| m.length_scale = vec![-1.0]),
            Invalid("length_scale", "> 0"),
        ),
        (
            "length_scale 0",
            edit(&|m| m.length_scale = vec![0.0]),
            Invalid("length_scale", "> 0"),
        ),
        (
            "length_scale infinite",
            edit(&|m| m.length_scale = vec![f64::INFINITY]),
            Invalid("length_scale", "> 0"),
        ),
    ];
    for (case, m, want) in &cases {
        let own = |x: &Array2<f64>, out: &mut Array2<f64>| {
            m.transform_into(x.view(), out.view_mut(), PAR)
        };
        assert_every_entry_refuses(m, &own, 3, *want, case);
        let any = AnyFeatureMap::from(m.clone());
        let own_any = |x: &Array2<f64>, out: &mut Array2<f64>| {
            FeatureMap::transform_into(&any, x.view(), out.view_mut(), PAR)
        };
        assert_every_entry_refuses(&any, &own_any, 3, *want, &format!("{case} (any)"));
        // Rebuilding from the same fields refuses them too.
        let e = NystroemFeatures::from_parts(
            m.landmarks.clone(),
            m.normalization.clone(),
            m.kernel,
            m.length_scale.clone(),
        )
        .unwrap_err();
        assert_refused(&e, *want, &format!("{case} (from_parts)"));
    }
    // Non-finite values are refused where the map is built (a scan of
    // every entry, not repeated per transform).
    let mut landmarks = map.landmarks.clone();
    landmarks[[2, 1]] = f64::NAN;
    let e = NystroemFeatures::from_parts(
        landmarks,
        map.normalization.clone(),
        map.kernel,
        map.length_scale.clone(),
    )
    .unwrap_err();
    assert_refused(&e, Invalid("landmarks", "finite"), "a NaN landmark");
    let mut normalization = map.normalization.clone();
    normalization[[0, 4]] = f64::INFINITY;
    let e = NystroemFeatures::from_parts(
        map.landmarks.clone(),
        normalization,
        map.kernel,
        map.length_scale.clone(),
    )
    .unwrap_err();
    assert_refused(
        &e,
        Invalid("normalization", "finite"),
        "an infinite normalization",
    );
}
