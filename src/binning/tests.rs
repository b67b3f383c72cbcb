//! Oracles of `docs/math/binning.rst` and the structural contract.

use ndarray::{array, Array2};
use rand::Rng as _;

use super::*;
use crate::rng::seeded;

/// Fraction of the `P` grids in which rows 0 and 1 of `x` share a bin.
fn collision_rate(grids: &BinningGrids, x: &Array2<f64>) -> f64 {
    let keys = grids.keys(x.view(), Parallelism::Rayon).unwrap();
    let np = grids.n_grids();
    let same = (0..np).filter(|&p| keys[p] == keys[np + p]).count();
    same as f64 / np as f64
}

/// Binomial(P, k)/P: exact mean, variance and fourth central moment.
fn binomial_moments(p_grids: usize, k: f64) -> (f64, f64, f64) {
    let n = p_grids as i32;
    let mut pmf = vec![0.0; p_grids + 1];
    let mut c = 1.0;
    for j in 0..=n {
        pmf[j as usize] = c * k.powi(j) * (1.0 - k).powi(n - j);
        c = c * f64::from(n - j) / f64::from(j + 1);
    }
    let mean: f64 = (0..=p_grids).map(|j| pmf[j] * j as f64).sum::<f64>() / n as f64;
    let m = |q: i32| -> f64 {
        (0..=p_grids)
            .map(|j| pmf[j] * (j as f64 / n as f64 - mean).powi(q))
            .sum()
    };
    (mean, m(2), m(4))
}

#[test]
fn worked_example_mean_and_variance() {
    // sigma_L = 0.7, ||x - y||_1 = 1.25, P = 5: Var = 0.0279123178.
    let x = array![[0.3, -0.2, 0.5], [-0.1, 0.4, 0.25]];
    let k = (-1.25_f64 / 0.7).exp();
    assert!((k - 0.1676772488).abs() < 1e-10);
    let (mean, var, mu4) = binomial_moments(5, k);
    assert!((mean - k).abs() < 1e-12);
    assert!((var - 0.0279123178).abs() < 1e-10);
    let kernel = Laplacian::new(0.7).unwrap();
    let t = 20_000;
    let est: Vec<f64> = (0..t)
        .map(|s| collision_rate(&BinningGrids::draw(&kernel, 5, 3, s).unwrap(), &x))
        .collect();
    let m = est.iter().sum::<f64>() / t as f64;
    let v = est.iter().map(|e| (e - m).powi(2)).sum::<f64>() / (t - 1) as f64;
    let se_mean = (var / t as f64).sqrt();
    let se_var = ((mu4 - var * var) / t as f64).sqrt();
    assert!(
        (m - k).abs() < 4.0 * se_mean,
        "mean {m} vs {k} (se {se_mean})"
    );
    assert!(
        (v - var).abs() < 4.0 * se_var,
        "var {v} vs {var} (se {se_var})"
    );
}

#[test]
fn hat_kernel_given_pitch() {
    // delta = 1, |x - y| = 0.3: collision probability 0.7 (draw only u).
    let np = 100_000;
    let mut rng = seeded(3);
    let pitches = Array2::from_elem((np, 1), 1.0);
    let shifts = Array2::from_shape_simple_fn((np, 1), || rng.random::<f64>());
    let grids = BinningGrids::from_parts(pitches, shifts, 9).unwrap();
    let rate = collision_rate(&grids, &array![[0.45], [0.15]]);
    let se = (0.7 * 0.3 / np as f64).sqrt();
    assert!((rate - 0.7).abs() < 4.0 * se, "{rate}");
}

#[test]
fn gamma_mixture_of_hats_is_laplacian() {
    // E[max(0, 1 - a/delta)] = exp(-a/sigma) = 0.5647181220 for a = 0.4, sigma = 0.7.
    let k = 0.5647181220;
    assert!(((-0.4_f64 / 0.7).exp() - k).abs() < 1e-10);
    let np = 100_000;
    let grids = BinningGrids::draw(&Laplacian::new(0.7).unwrap(), np, 1, 11).unwrap();
    let rate = collision_rate(&grids, &array![[-0.1], [0.3]]);
    let se = (k * (1.0 - k) / np as f64).sqrt();
    assert!((rate - k).abs() < 4.0 * se, "{rate}");
    // The pitches themselves: Gamma(2, 0.7) has mean 1.4 and variance 0.98.
    let mean = grids.pitches().mean().unwrap();
    assert!(
        (mean - 1.4).abs() < 4.0 * (0.98 / np as f64).sqrt(),
        "{mean}"
    );
    assert!(grids
        .pitches()
        .iter()
        .zip(grids.shifts())
        .all(|(d, u)| *u >= 0.0 && u < d));
}

#[test]
fn keys_follow_the_specified_hash() {
    let grids = BinningGrids::draw(&Laplacian::new(1.3).unwrap(), 4, 3, 5).unwrap();
    let x = array![[0.5_f32, -2.0, 7.25], [1e3, -1e3, 0.0]];
    let keys = grids.keys(x.view(), Parallelism::Sequential).unwrap();
    for i in 0..2 {
        let row: Vec<f32> = x.row(i).to_vec();
        for p in 0..4 {
            let bins = grids.bins(&row, p).unwrap();
            for (a, &b) in bins.iter().enumerate() {
                let t = (f64::from(row[a]) - grids.shifts()[[p, a]]) / grids.pitches()[[p, a]];
                assert_eq!(b as f64, t.floor());
            }
            let mut h = mix(grids.hash_seed() ^ (p as u64 + 1));
            for &b in &bins {
                h = mix(h ^ b as u64);
            }
            assert_eq!(keys[i * 4 + p], h);
            assert_eq!(bin_key(grids.hash_seed(), p as u64 + 1, &bins), h);
        }
    }
    // SplitMix64 reference value: the first output of the generator seeded
    // with 0 is mix(0x9e3779b97f4a7c15) = 0xe220a8397b1dcdaf.
    assert_eq!(mix(0x9e37_79b9_7f4a_7c15), 0xe220_a839_7b1d_cdaf);
}

#[test]
fn floor_is_exact() {
    for t in [
        -2.5,
        -2.0,
        -0.0,
        0.0,
        -1e-300,
        0.999,
        3.0,
        -4.5e15,
        4.5e15 + 1.0,
        -(2f64.powi(62)),
    ] {
        assert_eq!(floor_i64(t) as f64, t.floor(), "{t}");
    }
    // Beyond the range the row kernel discards the value, but computing it
    // must not overflow (a panic in builds with overflow checks).
    for t in [
        -1.29e31,
        -(2f64.powi(63)) - 4096.0,
        1e300,
        f64::NAN,
        f64::NEG_INFINITY,
    ] {
        std::hint::black_box(floor_i64(std::hint::black_box(t)));
    }
}

fn sample_x(n: usize, d: usize, seed: u64) -> Array2<f64> {
    let mut rng = seeded(seed);
    Array2::from_shape_simple_fn((n, d), || rng.random::<f64>() * 4.0 - 2.0)
}

#[test]
fn vocabulary_structure_and_roundtrip() {
    let x = sample_x(3000, 4, 1);
    let grids = BinningGrids::draw(&Laplacian::new(0.5).unwrap(), 7, 4, 2).unwrap();
    let (vocab, z) = Vocabulary::fit(&grids, x.view(), Parallelism::Rayon).unwrap();
    assert_eq!(z.n_rows, 3000);
    assert_eq!(z.n_cols, vocab.n_columns());
    assert_eq!(z.data.len(), 3000 * 7);
    assert!(z.data.iter().all(|&v| v == 1.0 / 7f64.sqrt()));
    for i in 0..=3000 {
        assert_eq!(z.indptr.get(i), 7 * i as u64);
    }
    // Row i's entry for grid p lies in grid p's column range; first row gets
    // column offset_p (order of first appearance).
    for i in 0..3000 {
        for p in 0..7 {
            let c = z.indices.get(7 * i + p);
            assert!(vocab.offsets()[p] <= c && c < vocab.offsets()[p + 1]);
        }
    }
    for p in 0..7 {
        assert_eq!(z.indices.get(p), vocab.offsets()[p]);
    }
    // Transform of the training rows reproduces fit; so does a rebuilt vocabulary.
    let again = vocab
        .transform(&grids, x.view(), Parallelism::Rayon)
        .unwrap();
    assert_eq!(again, z);
    let rebuilt = Vocabulary::from_parts(vocab.keys().to_vec(), vocab.offsets().to_vec()).unwrap();
    assert_eq!(
        rebuilt
            .transform(&grids, x.view(), Parallelism::Sequential)
            .unwrap(),
        z
    );
    let grids2 = BinningGrids::from_parts(
        grids.pitches().clone(),
        grids.shifts().clone(),
        grids.hash_seed(),
    )
    .unwrap();
    assert_eq!(grids2, grids);
    // Sequential and parallel agree bit for bit.
    let (v_seq, z_seq) = Vocabulary::fit(&grids, x.view(), Parallelism::Sequential).unwrap();
    assert_eq!(z_seq, z);
    assert_eq!(v_seq.keys(), vocab.keys());
    // Unseen bins contribute nothing.
    let far = array![[100.0, 100.0, 100.0, 100.0]];
    let zf = vocab
        .transform(&grids, far.view(), Parallelism::Rayon)
        .unwrap();
    assert_eq!(zf.data.len(), 0);
    // f32 input gives the same columns.
    let (_, z32) =
        Vocabulary::fit(&grids, x.mapv(|v| v as f32).view(), Parallelism::Rayon).unwrap();
    assert_eq!(z32.n_rows, 3000);
    assert!(z32.data.iter().all(|&v| v == (1.0 / 7f64.sqrt()) as f32));
}

#[test]
fn hashing_mode_merges_duplicates() {
    let x = sample_x(500, 3, 4);
    let grids = BinningGrids::draw(&Laplacian::new(0.3).unwrap(), 20, 3, 8).unwrap();
    let z = hashed_transform(&grids, x.view(), 7, Parallelism::Rayon).unwrap();
    let dense = z.to_dense();
    for i in 0..500 {
        let s: f64 = dense.row(i).sum();
        assert!((s - 20.0 / 20f64.sqrt()).abs() < 1e-12);
        let (a, b) = (z.indptr.get(i) as usize, z.indptr.get(i + 1) as usize);
        assert!((a + 1..b).all(|k| z.indices.get(k - 1) < z.indices.get(k)));
    }
    let keys = grids.keys(x.view(), Parallelism::Sequential).unwrap();
    let big = hashed_transform(&grids, x.view(), 1 << 40, Parallelism::Sequential).unwrap();
    assert_eq!(big.n_cols, 1 << 40);
    assert!(matches!(big.indices, CsrIndex::I64(_)));
    let mut want: Vec<u64> = keys[..20].iter().map(|k| k % (1 << 40)).collect();
    want.sort_unstable();
    let got: Vec<u64> = (0..20).map(|k| big.indices.get(k)).collect();
    assert_eq!(got, want);
}

#[test]
fn bad_input() {
    assert!(matches!(
        Laplacian::new(0.0),
        Err(Error::InvalidParameter {
            name: "length_scale",
            ..
        })
    ));
    assert!(Laplacian::new(f64::NAN).is_err());
    assert!(kernel_by_name("gaussian", 1.0).is_err());
    let lap = Laplacian::new(1.0).unwrap();
    assert!(matches!(
        BinningGrids::draw(&lap, 0, 3, 0),
        Err(Error::InvalidParameter {
            name: "n_grids",
            ..
        })
    ));
    let grids = BinningGrids::draw(&lap, 3, 2, 0).unwrap();
    let nan = array![[0.0, f64::NAN]];
    assert_eq!(
        grids.keys(nan.view(), Parallelism::Rayon),
        Err(Error::NonFinite { name: "X" })
    );
    let inf = array![[f64::INFINITY, 0.0]];
    assert_eq!(
        grids.keys(inf.view(), Parallelism::Rayon),
        Err(Error::NonFinite { name: "X" })
    );
    let huge = array![[1e300, 0.0]];
    let err = grids.keys(huge.view(), Parallelism::Rayon).unwrap_err();
    assert!(matches!(err, Error::InvalidParameter { name: "X", .. }));
    assert!(err.to_string().contains("2^62"));
    let wide = array![[0.0, 1.0, 2.0]];
    assert!(matches!(
        grids.keys(wide.view(), Parallelism::Rayon),
        Err(Error::ShapeMismatch {
            expected: 2,
            got: 3,
            ..
        })
    ));
    assert!(hashed_transform(&grids, array![[0.0, 1.0]].view(), 0, Parallelism::Rayon).is_err());
    assert!(Vocabulary::from_parts(vec![1, 2], vec![0, 3]).is_err());
    assert!(Vocabulary::from_parts(vec![1, 1], vec![0, 2]).is_err());
    assert!(
        BinningGrids::from_parts(Array2::from_elem((1, 1), -1.0), Array2::zeros((1, 1)), 0)
            .is_err()
    );
}

#[test]
fn a_cancelled_monitor_stops_the_numbering() {
    let grids = BinningGrids::draw(&Laplacian::new(0.7).unwrap(), 8, 2, 7).unwrap();
    let x = Array2::from_shape_fn((5000, 2), |(i, j)| ((i * 7 + j * 3) % 101) as f64 / 17.0);
    let keys = grids.keys(x.view(), Parallelism::Rayon).unwrap();
    let monitor = Monitor::new();
    let (vocabulary, z) =
        Vocabulary::from_keys::<f64>(keys.clone(), 8, Parallelism::Rayon, &monitor).unwrap();
    let (fitted, want) = Vocabulary::fit(&grids, x.view(), Parallelism::Rayon).unwrap();
    assert_eq!(z, want);
    assert_eq!(vocabulary.keys(), fitted.keys());
    monitor.cancel();
    for par in [Parallelism::Rayon, Parallelism::Sequential] {
        let e = Vocabulary::from_keys::<f64>(keys.clone(), 8, par, &monitor).unwrap_err();
        assert_eq!(e, Error::Interrupted);
    }
}
