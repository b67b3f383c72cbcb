//! Every fitted struct survives a serde round trip by value (CBOR, exact
//! for `f64`): the loaded value transforms, predicts and fits to the same
//! bits as the original, and nothing is refitted on load.

use ndarray::{Array1, Array2};
use rand::Rng as _;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::feature_map::{self, AnyFeatureMap, FeatureMap};
use crate::fourier::{FourierConfig, FourierFeatures, Sampler, Variant};
use crate::gp::exact::ExactGp;
use crate::gp::{FeatureGp, LocalizedConfig, LocalizedMaclaurinGp};
use crate::gpu::Device;
use crate::kernels::Kernel;
use crate::kernels::StationaryKernel;
use crate::maclaurin::map::{MaclaurinConfig, MaclaurinMap};
use crate::maclaurin::MaclaurinKernel;
use crate::nystroem::NystroemFeatures;
use crate::progress::Monitor;
use crate::sketch::{PolySketch, PolynomialFeatures, SketchKind};
use crate::stats::FeatureStats;
use crate::threads::Parallelism;

fn round_trip<T: Serialize + DeserializeOwned>(value: &T) -> T {
    let mut bytes = Vec::new();
    ciborium::into_writer(value, &mut bytes).unwrap();
    ciborium::from_reader(bytes.as_slice()).unwrap()
}

fn random(rows: usize, cols: usize, seed: u64) -> Array2<f64> {
    let mut rng = crate::rng::seeded(seed);
    Array2::from_shape_fn((rows, cols), |_| rng.random_range(-1.0..1.0))
}

const PAR: Parallelism = Parallelism::Rayon;

#[test]
fn feature_maps_and_statistics_round_trip() {
    let x = random(40, 3, 1);
    let y = Array1::from_shape_fn(40, |i| (i as f64 * 0.4).sin());
    let mut fourier_cfg = FourierConfig::new(21);
    fourier_cfg.sampler = Sampler::Structured;
    fourier_cfg.variant = Variant::CosSin;
    let sketch = PolySketch::draw(
        SketchKind::TensorSrht,
        true,
        2,
        4,
        5,
        &mut crate::rng::seeded(2),
    )
    .unwrap();
    let maps: Vec<AnyFeatureMap> = vec![
        FourierFeatures::fit(&fourier_cfg, 3, 3).unwrap().into(),
        PolynomialFeatures::new(sketch, 0.5, 1.1, 11)
            .unwrap()
            .into(),
        MaclaurinMap::fit(
            x.view(),
            &MaclaurinConfig::new(MaclaurinKernel::Gaussian, 17),
            4,
            PAR,
            &Monitor::default(),
        )
        .unwrap()
        .into(),
        NystroemFeatures::fit(x.view(), 9, Kernel::Laplacian, &[0.9], 5)
            .unwrap()
            .0
            .into(),
    ];
    for map in &maps {
        let back = round_trip(map);
        let mut a = Array2::<f64>::zeros((40, map.n_components()));
        let mut b = a.clone();
        feature_map::transform_into(map, x.view(), a.view_mut(), Device::Cpu, PAR).unwrap();
        feature_map::transform_into(&back, x.view(), b.view_mut(), Device::Cpu, PAR).unwrap();
        assert_eq!(a, b, "{map:?}");
        let mut stats = FeatureStats::new(map.n_components());
        feature_map::accumulate(
            map,
            x.view(),
            y.view(),
            &mut stats,
            Device::Cpu,
            16,
            PAR,
            &Monitor::default(),
        )
        .unwrap();
        assert_eq!(round_trip(&stats), stats);
    }
    // The concrete types too.
    if let AnyFeatureMap::Fourier(f) = &maps[0] {
        assert_eq!(&round_trip(f), f);
    }
    if let AnyFeatureMap::Nystroem(n) = &maps[3] {
        assert_eq!(&round_trip(n), n);
    }
}

#[test]
fn fitted_gps_round_trip() {
    let x = random(60, 2, 6);
    let y = Array1::from_shape_fn(60, |i| (i as f64 * 0.2).cos() + 1.0);
    let xs = random(25, 2, 7);
    let map = FourierFeatures::fit(&FourierConfig::new(16), 2, 8).unwrap();
    let gp = FeatureGp::fit_map(
        &map,
        x.view(),
        y.view(),
        0.1,
        true,
        Device::Cpu,
        64,
        PAR,
        &Monitor::default(),
    )
    .unwrap();
    let back = round_trip(&gp);
    assert_eq!(
        back.predict_map(
            &map,
            xs.view(),
            true,
            Device::Cpu,
            64,
            PAR,
            &Monitor::default()
        )
        .unwrap(),
        gp.predict_map(
            &map,
            xs.view(),
            true,
            Device::Cpu,
            64,
            PAR,
            &Monitor::default()
        )
        .unwrap()
    );
    assert_eq!((back.lml, back.chol.jitter()), (gp.lml, gp.chol.jitter()));
    // The exact GP keeps its kernel (a Matérn one predicts differently from
    // the Gaussian at the same hyperparameters).
    for kernel in [Kernel::Gaussian, Kernel::Matern32] {
        let kernel = StationaryKernel {
            kernel,
            length_scale: vec![0.7],
            variance: 1.3,
        };
        let exact = ExactGp::fit(x.view(), y.view(), kernel, 0.05, true, PAR).unwrap();
        let back = round_trip(&exact);
        assert_eq!(back.kernel, exact.kernel);
        assert_eq!(back.alpha, exact.alpha);
        assert_eq!(
            back.predict(xs.view(), true, PAR).unwrap(),
            exact.predict(xs.view(), true, PAR).unwrap()
        );
    }
}

#[test]
fn the_localized_gp_round_trips_without_a_refit() {
    let x = random(80, 2, 9) * 3.0;
    let y = x.column(0).mapv(f64::sin);
    let xs = random(30, 2, 10) * 3.0;
    let mut map = MaclaurinConfig::new(MaclaurinKernel::Gaussian, 12);
    map.length_scale = 0.9;
    let cfg = LocalizedConfig {
        map,
        noise_variance: 0.05,
        threshold: Some(1.0),
        n_clusters: None,
        tol: 1e-8,
        center_y: true,
        device: Device::Cpu,
    };
    let gp =
        LocalizedMaclaurinGp::fit(x.view(), y.view(), &cfg, 11, PAR, &Monitor::default()).unwrap();
    // Some centroid GPs built before storing, the others after loading.
    let first = gp
        .predict(
            xs.slice(ndarray::s![..5, ..]),
            true,
            PAR,
            &Monitor::default(),
        )
        .unwrap();
    assert!(first.n_built > 0);
    let back = round_trip(&gp);
    assert_eq!(back.centroids(), gp.centroids());
    assert_eq!(back.cutoff_sq(), gp.cutoff_sq());
    let again = back
        .predict(
            xs.slice(ndarray::s![..5, ..]),
            true,
            PAR,
            &Monitor::default(),
        )
        .unwrap();
    assert_eq!(again.n_built, 0, "the stored centroid GPs are reused");
    assert_eq!((again.mean, again.var), (first.mean, first.var));
    let (a, b) = (
        gp.predict(xs.view(), true, PAR, &Monitor::default())
            .unwrap(),
        back.predict(xs.view(), true, PAR, &Monitor::default())
            .unwrap(),
    );
    assert_eq!((a.n_built, a.mean, a.var), (b.n_built, b.mean, b.var));
    // A stored state that contradicts itself is refused.
    let mut bytes = Vec::new();
    ciborium::into_writer(&gp, &mut bytes).unwrap();
    let mut value: ciborium::Value = ciborium::from_reader(bytes.as_slice()).unwrap();
    if let ciborium::Value::Map(fields) = &mut value {
        for (k, v) in fields.iter_mut() {
            if k.as_text() == Some("predictors") {
                *v = ciborium::Value::Array(Vec::new());
            }
        }
    }
    let mut broken = Vec::new();
    ciborium::into_writer(&value, &mut broken).unwrap();
    let err = ciborium::from_reader::<LocalizedMaclaurinGp, _>(broken.as_slice()).unwrap_err();
    assert!(err.to_string().contains("centroid GPs"), "{err}");
    // Values the predictions use directly: a target mean that is not
    // finite, a cutoff that is no squared distance, a configuration whose
    // length scale is not the map's (each was loaded, and predicted
    // NaN, the prior everywhere or other values).
    assert_corrupt_refused(&gp, "y", &|v| {
        *cbor_field(v, "y_mean") = ciborium::Value::Float(f64::NAN);
    });
    assert_corrupt_refused(&gp, "cutoff_sq", &|v| {
        *cbor_field(v, "cutoff_sq") = ciborium::Value::Float(-1.0);
    });
    assert_corrupt_refused(&gp, "config", &|v| {
        let map = cbor_field(cbor_field(v, "config"), "map");
        *cbor_field(map, "length_scale") = ciborium::Value::Float(7.5);
    });
}

#[test]
fn binning_maps_round_trip_and_check_their_parts() {
    use crate::binning::{kernel_by_name, BinColumns, BinningGrids, BinningMap};

    let x = random(50, 3, 12) * 4.0;
    let xs = random(20, 3, 13) * 4.0;
    let kernel = kernel_by_name("laplacian", 0.8).unwrap();
    for hashing in [None, Some(97)] {
        let grids = BinningGrids::draw(kernel.as_ref(), 6, 3, 14).unwrap();
        let (map, _) = BinningMap::fit(grids, x.view(), hashing, PAR).unwrap();
        let back = round_trip(&map);
        assert_eq!(back.grids(), map.grids());
        assert_eq!(back.n_columns(), map.n_columns());
        // Seen and unseen rows: the vocabulary's lookup tables are rebuilt.
        for rows in [&x, &xs] {
            assert_eq!(
                back.transform(rows.view(), PAR).unwrap(),
                map.transform(rows.view(), PAR).unwrap()
            );
        }
        assert_eq!(
            matches!(back.columns(), BinColumns::Hashed(97)),
            hashing.is_some()
        );
    }
    // Stored parts are checked as from_parts checks them: a negative pitch,
    // and vocabulary offsets that do not end at the number of keys.
    let grids = BinningGrids::draw(kernel.as_ref(), 2, 3, 15).unwrap();
    let (map, _) = BinningMap::fit(grids, x.view(), None, PAR).unwrap();
    let corrupt = |name: &str, f: &dyn Fn(&mut ciborium::Value)| {
        let mut bytes = Vec::new();
        ciborium::into_writer(&map, &mut bytes).unwrap();
        let mut value: ciborium::Value = ciborium::from_reader(bytes.as_slice()).unwrap();
        f(&mut value);
        let mut broken = Vec::new();
        ciborium::into_writer(&value, &mut broken).unwrap();
        let err = ciborium::from_reader::<BinningMap, _>(broken.as_slice()).unwrap_err();
        assert!(err.to_string().contains(name), "{name}: {err}");
    };
    fn field<'a>(v: &'a mut ciborium::Value, name: &str) -> &'a mut ciborium::Value {
        match v {
            ciborium::Value::Map(fields) => {
                &mut fields
                    .iter_mut()
                    .find(|(k, _)| k.as_text() == Some(name))
                    .unwrap()
                    .1
            }
            other => panic!("not a map: {other:?}"),
        }
    }
    corrupt("pitches", &|v| {
        let data = field(field(field(v, "grids"), "pitches"), "data");
        if let ciborium::Value::Array(values) = data {
            values[0] = ciborium::Value::Float(-1.0);
        }
    });
    corrupt("offsets", &|v| {
        let vocab = field(field(v, "columns"), "Vocabulary");
        if let ciborium::Value::Array(offsets) = field(vocab, "offsets") {
            offsets.push(ciborium::Value::Integer(1_000_000.into()));
        }
    });
}

/// The field `name` of a CBOR map (a struct or an externally tagged
/// variant).
fn cbor_field<'a>(v: &'a mut ciborium::Value, name: &str) -> &'a mut ciborium::Value {
    match v {
        ciborium::Value::Map(fields) => {
            &mut fields
                .iter_mut()
                .find(|(k, _)| k.as_text() == Some(name))
                .unwrap_or_else(|| panic!("no field {name}"))
                .1
        }
        other => panic!("not a map: {other:?}"),
    }
}

/// The field at `path` (names from the outside in) of a CBOR map.
fn cbor_path<'a>(v: &'a mut ciborium::Value, path: &[&str]) -> &'a mut ciborium::Value {
    path.iter().fold(v, |v, name| cbor_field(v, name))
}

/// The entries of the CBOR array at `path` (see [`cbor_path`]).
fn cbor_array_at<'a>(v: &'a mut ciborium::Value, path: &[&str]) -> &'a mut Vec<ciborium::Value> {
    cbor_array(cbor_path(v, path))
}

/// The entries of a CBOR array.
fn cbor_array(v: &mut ciborium::Value) -> &mut Vec<ciborium::Value> {
    match v {
        ciborium::Value::Array(values) => values,
        other => panic!("not an array: {other:?}"),
    }
}

/// A CBOR integer.
fn cbor_int(v: u64) -> ciborium::Value {
    ciborium::Value::Integer(v.into())
}

/// Stores `value`, edits the stored form with `edit` and checks that
/// loading it is refused with an error that names `name`.
fn assert_corrupt_refused<T: Serialize + DeserializeOwned + std::fmt::Debug>(
    value: &T,
    name: &str,
    edit: &dyn Fn(&mut ciborium::Value),
) {
    let mut bytes = Vec::new();
    ciborium::into_writer(value, &mut bytes).unwrap();
    let mut stored: ciborium::Value = ciborium::from_reader(bytes.as_slice()).unwrap();
    edit(&mut stored);
    let mut broken = Vec::new();
    ciborium::into_writer(&stored, &mut broken).unwrap();
    match ciborium::from_reader::<T, _>(broken.as_slice()) {
        Ok(loaded) => panic!("{name}: a corrupted value was loaded: {loaded:?}"),
        Err(err) => assert!(err.to_string().contains(name), "{name}: {err}"),
    }
}

#[test]
fn sketches_check_their_parts_on_loading() {
    use ciborium::Value;

    let draw = |kind, complex| {
        PolySketch::draw(kind, complex, 2, 5, 6, &mut crate::rng::seeded(21)).unwrap()
    };
    let x = random(30, 5, 22);
    for kind in [
        SketchKind::Gaussian,
        SketchKind::Rademacher,
        SketchKind::TensorSrht,
        SketchKind::TensorSketch,
    ] {
        let complex = kind != SketchKind::TensorSketch;
        let sketch = draw(kind, complex);
        let back = round_trip(&sketch);
        let phi = |s: &PolySketch| {
            let mut out = Array2::<f64>::zeros((30, s.width()));
            s.transform_into(x.view(), out.view_mut(), PAR).unwrap();
            out
        };
        assert_eq!(phi(&back), phi(&sketch), "{kind:?}");
        // Settings the parameters do not have.
        assert_corrupt_refused(&sketch, "degree", &|v| {
            *cbor_field(v, "degree") = cbor_int(0)
        });
        assert_corrupt_refused(&sketch, "dim", &|v| *cbor_field(v, "dim") = cbor_int(0));
        assert_corrupt_refused(&sketch, "n_features", &|v| {
            *cbor_field(v, "n_features") = cbor_int(0);
        });
        assert_corrupt_refused(&sketch, "params", &|v| {
            let other = if kind == SketchKind::TensorSketch {
                "Gaussian"
            } else {
                "TensorSketch"
            };
            *cbor_field(v, "kind") = Value::Text(other.into());
        });
    }

    // Dense weights: a factor too few, a row too few, a NaN, more features.
    let dense = draw(SketchKind::Gaussian, false);
    let weights = ["params", "Dense", "weights"];
    assert_corrupt_refused(&dense, "weights", &|v| {
        cbor_array_at(v, &weights).pop();
    });
    assert_corrupt_refused(&dense, "weights", &|v| {
        let w = &mut cbor_array_at(v, &weights)[1];
        *cbor_array(cbor_field(w, "dim")) = vec![cbor_int(5), cbor_int(5)];
        cbor_array(cbor_field(w, "data")).truncate(25);
    });
    assert_corrupt_refused(&dense, "weights", &|v| {
        cbor_array(cbor_field(&mut cbor_array_at(v, &weights)[0], "data"))[7] =
            Value::Float(f64::NAN);
    });
    assert_corrupt_refused(&dense, "weights", &|v| {
        *cbor_field(v, "n_features") = cbor_int(7);
    });
    // Complex weights have twice the rows.
    assert_corrupt_refused(&dense, "weights", &|v| {
        *cbor_field(v, "complex") = Value::Bool(true);
    });

    // TensorSRHT: a permutation entry >= d', a repeated one, a sign code
    // out of range, the padded dimension, the blocks, the lengths.
    let srht = draw(SketchKind::TensorSrht, false);
    assert_corrupt_refused(&srht, "perms", &|v| {
        cbor_array_at(v, &["params", "Srht", "perms"])[3] = cbor_int(8)
    });
    assert_corrupt_refused(&srht, "perms", &|v| {
        let perms = cbor_array_at(v, &["params", "Srht", "perms"]);
        perms[9] = perms[8].clone();
    });
    assert_corrupt_refused(&srht, "codes", &|v| {
        cbor_array_at(v, &["params", "Srht", "codes"])[0] = cbor_int(2)
    });
    assert_corrupt_refused(&srht, "codes", &|v| {
        cbor_array_at(v, &["params", "Srht", "codes"]).pop();
    });
    assert_corrupt_refused(&srht, "perms", &|v| {
        cbor_array_at(v, &["params", "Srht", "perms"]).push(cbor_int(0));
    });
    assert_corrupt_refused(&srht, "d_pad", &|v| {
        *cbor_field(cbor_field(cbor_field(v, "params"), "Srht"), "d_pad") = cbor_int(4);
    });
    assert_corrupt_refused(&srht, "blocks", &|v| {
        *cbor_field(cbor_field(cbor_field(v, "params"), "Srht"), "blocks") = cbor_int(2);
    });
    // Complex codes go up to 3, real ones to 1.
    let complex_srht = draw(SketchKind::TensorSrht, true);
    assert_corrupt_refused(&complex_srht, "codes", &|v| {
        cbor_array_at(v, &["params", "Srht", "codes"])[5] = cbor_int(4);
    });
    assert_corrupt_refused(&complex_srht, "codes", &|v| {
        *cbor_field(v, "complex") = Value::Bool(false);
        // Some code of the complex sketch is 2 or 3.
        for c in cbor_array_at(v, &["params", "Srht", "codes"]).iter_mut() {
            *c = cbor_int(3);
        }
    });

    // TensorSketch: a bucket >= D, the lengths, complex.
    let count = draw(SketchKind::TensorSketch, false);
    assert_corrupt_refused(&count, "hashes", &|v| {
        cbor_array_at(v, &["params", "Count", "hashes"])[4] = cbor_int(6)
    });
    assert_corrupt_refused(&count, "hashes", &|v| {
        cbor_array_at(v, &["params", "Count", "hashes"]).pop();
    });
    assert_corrupt_refused(&count, "negative", &|v| {
        cbor_array_at(v, &["params", "Count", "negative"]).push(Value::Bool(true));
    });
    assert_corrupt_refused(&count, "hashes", &|v| {
        *cbor_field(v, "n_features") = cbor_int(3)
    });
    assert_corrupt_refused(&count, "complex", &|v| {
        *cbor_field(v, "complex") = Value::Bool(true);
    });

    // The polynomial map around a sketch: as `PolynomialFeatures::new`.
    let sketch = draw(SketchKind::TensorSrht, true);
    let map = PolynomialFeatures::new(sketch, 0.5, 1.1, 13).unwrap();
    let xs = random(30, 4, 23);
    assert_eq!(
        round_trip(&map).transform(xs.view(), PAR).unwrap(),
        map.transform(xs.view(), PAR).unwrap()
    );
    assert_corrupt_refused(&map, "n_components", &|v| {
        *cbor_field(v, "n_components") = cbor_int(11);
    });
    assert_corrupt_refused(&map, "bias", &|v| {
        *cbor_field(v, "bias") = Value::Float(-1.0)
    });
    assert_corrupt_refused(&map, "length_scale", &|v| {
        *cbor_field(v, "length_scale") = Value::Float(0.0);
    });
    // The sketch inside is checked too.
    assert_corrupt_refused(&map, "perms", &|v| {
        let sketch = cbor_field(v, "sketch");
        cbor_array(cbor_field(
            cbor_field(cbor_field(sketch, "params"), "Srht"),
            "perms",
        ))[0] = cbor_int(1000);
    });
}

#[test]
fn maclaurin_maps_check_their_parts_on_loading() {
    use crate::maclaurin::map::AllocationStrategy;
    use ciborium::Value;

    let x = random(50, 3, 31);
    let fit = |kernel, complex, h01, allocation| {
        let mut cfg = MaclaurinConfig::new(kernel, 24);
        cfg.complex = complex;
        cfg.h01 = h01;
        cfg.allocation = allocation;
        cfg.n_subsample = 50;
        MaclaurinMap::fit(x.view(), &cfg, 5, PAR, &Monitor::default()).unwrap()
    };
    let gaussian = fit(
        MaclaurinKernel::Gaussian,
        false,
        false,
        AllocationStrategy::Optimized,
    );
    let poly = fit(
        MaclaurinKernel::Polynomial {
            degree: 3,
            bias: 1.0,
        },
        true,
        true,
        AllocationStrategy::Random,
    );
    let explicit = MaclaurinMap::fit(
        x.slice(ndarray::s![.., ..1]),
        &MaclaurinConfig::new(MaclaurinKernel::Gaussian, 6),
        5,
        PAR,
        &Monitor::default(),
    )
    .unwrap();
    assert!(explicit.is_explicit_1d());
    for map in [&gaussian, &poly, &explicit] {
        let x = x.slice(ndarray::s![.., ..map.dim()]);
        assert_eq!(
            round_trip(map).transform(x, PAR).unwrap(),
            map.transform(x, PAR).unwrap()
        );
    }
    for map in [&gaussian, &poly] {
        // The settings: as `MaclaurinConfig` checks them.
        assert_corrupt_refused(map, "length_scale", &|v| {
            *cbor_field(cbor_field(v, "config"), "length_scale") = Value::Float(-1.0);
        });
        assert_corrupt_refused(map, "kernel_variance", &|v| {
            *cbor_field(cbor_field(v, "config"), "kernel_variance") = Value::Float(f64::NAN);
        });
        // A width the blocks do not fill (a panic slicing the output, or
        // columns of zeros, before).
        assert_corrupt_refused(map, "n_components", &|v| {
            *cbor_field(cbor_field(v, "config"), "n_components") = cbor_int(20);
        });
        assert_corrupt_refused(map, "counts", &|v| {
            *cbor_field(cbor_field(v, "config"), "n_components") = cbor_int(40);
        });
        // Counts that disagree with the blocks, the degree and the coefs.
        assert_corrupt_refused(map, "blocks", &|v| {
            let c = cbor_array_at(v, &["counts"]);
            let last = c.len() - 1;
            let n = u64::try_from(c[last].as_integer().unwrap()).unwrap();
            c[last] = cbor_int(n + 1);
        });
        assert_corrupt_refused(map, "counts", &|v| {
            cbor_array_at(v, &["counts"]).push(cbor_int(0));
        });
        assert_corrupt_refused(map, "counts", &|v| {
            cbor_array_at(v, &["counts"])[0] = cbor_int(0);
        });
        assert_corrupt_refused(map, "blocks", &|v| {
            cbor_array_at(v, &["blocks"]).pop();
        });
        assert_corrupt_refused(map, "blocks", &|v| {
            cbor_array_at(v, &["blocks"]).swap(0, 1);
        });
        assert_corrupt_refused(map, "blocks", &|v| {
            *cbor_field(&mut cbor_array_at(v, &["blocks"])[0], "scale") =
                Value::Float(f64::INFINITY);
        });
        assert_corrupt_refused(map, "coefs", &|v| {
            cbor_array(cbor_field(v, "coefs"))[1] = Value::Float(-0.5);
        });
        assert_corrupt_refused(map, "coefs", &|v| {
            cbor_array(cbor_field(v, "coefs")).truncate(1);
        });
        assert_corrupt_refused(map, "degree", &|v| {
            *cbor_field(v, "degree") = cbor_int(31);
        });
        assert_corrupt_refused(map, "dim", &|v| *cbor_field(v, "dim") = cbor_int(0));
        // Another input dimension than the center, h01 columns and blocks.
        assert_corrupt_refused(map, "dim", &|v| *cbor_field(v, "dim") = cbor_int(2));
        // The sketches inside are checked by their own checks.
        assert_corrupt_refused(map, "perms", &|v| {
            let sketch = cbor_field(&mut cbor_array_at(v, &["blocks"])[0], "sketch");
            let srht = cbor_field(cbor_field(sketch, "params"), "Srht");
            cbor_array(cbor_field(srht, "perms"))[0] = cbor_int(4);
        });
        // Sketches of another kind or weights than the settings.
        assert_corrupt_refused(map, "blocks", &|v| {
            *cbor_field(cbor_field(v, "config"), "complex") = Value::Bool(!map.config().complex);
        });
        assert_corrupt_refused(map, "blocks", &|v| {
            *cbor_field(cbor_field(v, "config"), "sketch") = Value::Text("Gaussian".into());
        });
    }
    // The center: its length and values.
    assert_corrupt_refused(&gaussian, "center", &|v| {
        cbor_array(cbor_field(v, "center")).pop();
    });
    assert_corrupt_refused(&gaussian, "center", &|v| {
        cbor_array(cbor_field(v, "center"))[0] = Value::Float(f64::NAN);
    });
    // Without h01, entry 1 would count degree-1 sketch features: there is
    // no such block.
    assert_corrupt_refused(&poly, "blocks", &|v| {
        *cbor_field(cbor_field(v, "config"), "h01") = Value::Bool(false);
    });
    // The explicit d = 1 map: one count per column, no blocks, one input.
    assert_corrupt_refused(&explicit, "counts", &|v| {
        cbor_array_at(v, &["counts"]).pop();
    });
    assert_corrupt_refused(&explicit, "dim", &|v| *cbor_field(v, "dim") = cbor_int(2));
    assert_corrupt_refused(&explicit, "degree", &|v| {
        *cbor_field(v, "degree") = cbor_int(2);
    });
    assert_corrupt_refused(&explicit, "coefs", &|v| {
        cbor_array(cbor_field(v, "coefs")).pop();
    });
    assert_corrupt_refused(&explicit, "blocks", &|v| {
        let mut stored = Vec::new();
        ciborium::into_writer(&gaussian, &mut stored).unwrap();
        let mut other: Value = ciborium::from_reader(stored.as_slice()).unwrap();
        *cbor_field(v, "blocks") = cbor_field(&mut other, "blocks").clone();
    });
    assert_corrupt_refused(&gaussian, "dim", &|v| {
        *cbor_field(v, "explicit_1d") = Value::Bool(true);
    });
}

#[test]
fn fourier_and_nystroem_maps_check_their_parts_on_loading() {
    use ciborium::Value;

    let x = random(30, 3, 41);
    let mut cfg = FourierConfig::new(10);
    cfg.variant = Variant::CosBias;
    let bias = FourierFeatures::fit(&cfg, 3, 42).unwrap();
    cfg.sampler = Sampler::Structured;
    cfg.variant = Variant::CosSin;
    let sorf = FourierFeatures::fit(&cfg, 3, 43).unwrap();
    for map in [&bias, &sorf] {
        let back = round_trip(map);
        assert_eq!(&back, map);
        assert_eq!(
            back.transform(x.view(), PAR).unwrap(),
            map.transform(x.view(), PAR).unwrap()
        );
        assert_corrupt_refused(map, "n_components", &|v| {
            *cbor_field(v, "n_components") = cbor_int(30);
        });
        assert_corrupt_refused(map, "kernel_variance", &|v| {
            *cbor_field(v, "kernel_variance") = Value::Float(-1.0);
        });
    }
    assert_corrupt_refused(&bias, "phases", &|v| {
        cbor_array_at(v, &["phases", "data"])[2] = Value::Float(f64::NAN);
    });
    assert_corrupt_refused(&bias, "phases", &|v| *cbor_field(v, "phases") = Value::Null);
    assert_corrupt_refused(&bias, "projection", &|v| {
        let w = cbor_field(cbor_field(v, "projection"), "Dense");
        cbor_array(cbor_field(w, "data"))[4] = Value::Float(f64::INFINITY);
    });
    assert_corrupt_refused(&sorf, "projection", &|v| {
        let s = cbor_field(cbor_field(v, "projection"), "Structured");
        cbor_array(cbor_field(cbor_field(s, "signs"), "data"))[1] = Value::Float(0.5);
    });
    assert_corrupt_refused(&sorf, "signs", &|v| {
        let s = cbor_field(cbor_field(v, "projection"), "Structured");
        *cbor_field(s, "n_features") = cbor_int(5);
    });
    assert_corrupt_refused(&sorf, "length_scale", &|v| {
        let s = cbor_field(cbor_field(v, "projection"), "Structured");
        *cbor_field(s, "length_scale") = Value::Float(0.0);
    });

    let (nys, _) = NystroemFeatures::fit(x.view(), 7, Kernel::Gaussian, &[0.7], 44).unwrap();
    assert_eq!(&round_trip(&nys), &nys);
    assert_corrupt_refused(&nys, "normalization", &|v| {
        let n = cbor_field(v, "normalization");
        *cbor_array(cbor_field(n, "dim")) = vec![cbor_int(6), cbor_int(6)];
        cbor_array(cbor_field(n, "data")).truncate(36);
    });
    assert_corrupt_refused(&nys, "normalization", &|v| {
        let n = cbor_field(v, "normalization");
        cbor_array(cbor_field(n, "data"))[3] = Value::Float(f64::NAN);
    });
    assert_corrupt_refused(&nys, "landmarks", &|v| {
        let l = cbor_field(v, "landmarks");
        cbor_array(cbor_field(l, "data"))[0] = Value::Float(f64::NEG_INFINITY);
    });
    assert_corrupt_refused(&nys, "length_scale", &|v| {
        *cbor_field(v, "length_scale") = Value::Float(-0.7);
    });
    // Maps stored with one length scale as a number (the layout before
    // per-dimension length scales) load as that one value.
    let mut stored: Value = {
        let mut bytes = Vec::new();
        ciborium::into_writer(&nys, &mut bytes).unwrap();
        ciborium::from_reader(bytes.as_slice()).unwrap()
    };
    *cbor_field(&mut stored, "length_scale") = Value::Float(0.7);
    let mut bytes = Vec::new();
    ciborium::into_writer(&stored, &mut bytes).unwrap();
    let old: NystroemFeatures = ciborium::from_reader(bytes.as_slice()).unwrap();
    assert_eq!(old, nys);
    // Per-dimension length scales round-trip; a list of another length is
    // refused.
    let (ard, _) =
        NystroemFeatures::fit(x.view(), 7, Kernel::Gaussian, &[0.7, 1.3, 0.4], 44).unwrap();
    assert_eq!(x.ncols(), 3);
    assert_eq!(&round_trip(&ard), &ard);
    assert_corrupt_refused(&ard, "length_scale", &|v| {
        cbor_array(cbor_field(v, "length_scale")).push(Value::Float(1.0));
    });
}
