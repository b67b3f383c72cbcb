use super::*;
use approx::assert_relative_eq;
use ndarray::Array2;
use rand::{Rng, SeedableRng};

/// Test knob: phase 2 aligns its strips (`strip_ranges`); off only in the
/// by-hand A/B timing below.
pub(super) static ALIGN_STRIPS: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(true);

/// Textbook O(n^2) oracle: `H[i, j] = (-1)^popcount(i & j)`.
fn dense(x: &[f64]) -> Vec<f64> {
    let n = x.len();
    (0..n)
        .map(|i| {
            (0..n)
                .map(|j| {
                    if (i & j).count_ones() % 2 == 0 {
                        x[j]
                    } else {
                        -x[j]
                    }
                })
                .sum()
        })
        .collect()
}

/// Textbook in-place loop of `docs/math/fwht.rst`, the bit-exact reference.
fn naive<T: Real>(x: &mut [T]) {
    let mut h = 1;
    while h < x.len() {
        for i in (0..x.len()).step_by(2 * h) {
            for j in i..i + h {
                let (a, b) = (x[j], x[j + h]);
                x[j] = a + b;
                x[j + h] = a - b;
            }
        }
        h *= 2;
    }
}

fn random_vec(n: usize, seed: u64) -> Vec<f64> {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    (0..n).map(|_| rng.random_range(-1.0..1.0)).collect()
}

#[test]
fn worked_oracles() {
    let mut v = [1.0, 2.0, 3.0, 4.0];
    fwht(&mut v, false, Parallelism::Sequential).unwrap();
    assert_eq!(v, [10.0, -2.0, -4.0, 0.0]);
    fwht(&mut v, false, Parallelism::Sequential).unwrap();
    assert_eq!(v, [4.0, 8.0, 12.0, 16.0]);
    let mut w = [1.0, -1.0, 2.0, 0.5, 0.0, 3.0, -2.0, 1.0];
    fwht(&mut w, false, Parallelism::Sequential).unwrap();
    assert_eq!(w, [4.5, -2.5, 1.5, 0.5, 0.5, 9.5, -6.5, 0.5]);
}

#[test]
fn matches_dense_hadamard_up_to_1024() {
    for k in 0..=10 {
        let n = 1 << k;
        let x = random_vec(n, k as u64);
        let mut y = x.clone();
        fwht(&mut y, false, Parallelism::Sequential).unwrap();
        for (a, b) in y.iter().zip(dense(&x)) {
            assert_relative_eq!(*a, b, epsilon = 1e-12);
        }
        let mut y32: Vec<f32> = x.iter().map(|&v| v as f32).collect();
        fwht(&mut y32, false, Parallelism::Sequential).unwrap();
        for (a, b) in y32.iter().zip(dense(&x)) {
            assert_relative_eq!(*a as f64, b, epsilon = 1e-4);
        }
    }
}

#[test]
fn bit_identical_to_textbook_loop_all_sizes_and_threads() {
    // Covers the small path, the blocked path and the parallel blocked path.
    // f64 blocks hold 2^11 elements, f32 blocks 2^12: phase 2 then runs
    // 1 ..= 9 stages (radix 2, 4, 8 passes and their combinations). Beyond
    // one L2 block (f64 2^17, f32 2^18) each L2 block is transformed, then
    // phase 2 runs across them: 1 stage (f64 2^18, f32 2^19), 3 (f64 2^20),
    // 4 (f64 2^21: two radix-4 sweeps).
    for k in [0, 1, 3, 5, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21] {
        let n = 1usize << k;
        let x = random_vec(n, 100 + k as u64);
        let mut want = x.clone();
        naive(&mut want);
        for par in [Parallelism::Sequential, Parallelism::Rayon] {
            let mut got = x.clone();
            fwht(&mut got, false, par).unwrap();
            assert!(got == want, "n = {n}, {par:?}");
        }
        let mut want32: Vec<f32> = x.iter().map(|&v| v as f32).collect();
        let mut got32 = want32.clone();
        naive(&mut want32);
        fwht(&mut got32, false, Parallelism::Rayon).unwrap();
        assert!(got32 == want32, "f32 n = {n}");
    }
}

#[test]
fn involution_norm_and_linearity() {
    let n = 256;
    let x = random_vec(n, 1);
    let y = random_vec(n, 2);
    let mut hx = x.clone();
    fwht(&mut hx, false, Parallelism::Sequential).unwrap();
    let norm2 = |v: &[f64]| v.iter().map(|a| a * a).sum::<f64>();
    assert_relative_eq!(norm2(&hx), n as f64 * norm2(&x), max_relative = 1e-12);
    let mut hhx = hx.clone();
    fwht(&mut hhx, false, Parallelism::Sequential).unwrap();
    for (a, b) in hhx.iter().zip(&x) {
        assert_relative_eq!(*a, n as f64 * b, epsilon = 1e-10);
    }
    let mut nx = x.clone();
    fwht(&mut nx, true, Parallelism::Sequential).unwrap();
    assert_relative_eq!(norm2(&nx), norm2(&x), max_relative = 1e-12);
    fwht(&mut nx, true, Parallelism::Sequential).unwrap();
    for (a, b) in nx.iter().zip(&x) {
        assert_relative_eq!(*a, *b, epsilon = 1e-12);
    }
    let mut lin: Vec<f64> = x.iter().zip(&y).map(|(a, b)| 2.0 * a - 3.0 * b).collect();
    fwht(&mut lin, false, Parallelism::Sequential).unwrap();
    let mut hy = y.clone();
    fwht(&mut hy, false, Parallelism::Sequential).unwrap();
    for i in 0..n {
        assert_relative_eq!(lin[i], 2.0 * hx[i] - 3.0 * hy[i], epsilon = 1e-10);
    }
}

#[test]
fn unit_vectors_are_hadamard_columns() {
    let n = 16;
    for j in 0..n {
        let mut e = vec![0.0; n];
        e[j] = 1.0;
        fwht(&mut e, false, Parallelism::Sequential).unwrap();
        for (i, v) in e.iter().enumerate() {
            let want = if (i & j).count_ones() % 2 == 0 {
                1.0
            } else {
                -1.0
            };
            assert_eq!(*v, want);
        }
    }
}

#[test]
fn rejects_non_powers_of_two() {
    let mut v = vec![0.0f64; 12];
    assert_eq!(
        fwht(&mut v, false, Parallelism::Sequential),
        Err(Error::NotPowerOfTwo { len: 12, next: 16 })
    );
    let mut e: Vec<f64> = vec![];
    assert_eq!(
        fwht(&mut e, false, Parallelism::Sequential),
        Err(Error::NotPowerOfTwo { len: 0, next: 1 })
    );
    let a = Array2::<f32>::zeros((3, 6));
    let mut b = a.clone();
    assert!(matches!(
        fwht_rows(b.view_mut(), false, Parallelism::Rayon),
        Err(Error::NotPowerOfTwo { len: 6, next: 8 })
    ));
    let mut c = Array2::<f32>::zeros((3, 8));
    assert!(matches!(
        fwht_rows_into(a.view(), c.view_mut(), false, Parallelism::Rayon),
        Err(Error::ShapeMismatch { .. })
    ));
}

#[test]
fn rows_strided_and_out_of_place_agree() {
    let (r, n) = (37, 64);
    let data = random_vec(r * 2 * n, 9);
    let wide = Array2::from_shape_vec((r, 2 * n), data).unwrap();
    // Non-contiguous rows: every other column.
    let strided = wide.slice(ndarray::s![.., ..;2]);
    let mut want = strided.to_owned();
    for mut row in want.rows_mut() {
        naive(row.as_slice_mut().unwrap());
    }
    let mut inplace = wide.clone();
    fwht_rows(
        inplace.slice_mut(ndarray::s![.., ..;2]),
        false,
        Parallelism::Rayon,
    )
    .unwrap();
    assert_eq!(inplace.slice(ndarray::s![.., ..;2]), want);
    // Untouched odd columns.
    assert_eq!(
        inplace.slice(ndarray::s![.., 1..;2]),
        wide.slice(ndarray::s![.., 1..;2])
    );
    let mut out = Array2::zeros((r, n));
    fwht_rows_into(strided, out.view_mut(), false, Parallelism::Rayon).unwrap();
    assert_eq!(out, want);
    // Transposed (column-major) source.
    let t = want.t().to_owned();
    let mut out2 = Array2::zeros((r, n));
    fwht_rows_into(t.t(), out2.view_mut(), true, Parallelism::Sequential).unwrap();
    let mut expect = want.clone();
    for mut row in expect.rows_mut() {
        naive(row.as_slice_mut().unwrap());
        row.mapv_inplace(|v| v / (n as f64).sqrt());
    }
    for (a, b) in out2.iter().zip(expect.iter()) {
        assert_relative_eq!(*a, *b, epsilon = 1e-12);
    }
    // Empty batch.
    let mut empty = Array2::<f64>::zeros((0, 8));
    fwht_rows(empty.view_mut(), false, Parallelism::Rayon).unwrap();
}

/// The normalized transform keeps the norm, so finite inputs near the float
/// range give finite results wherever the exact ones are below `MAX`: the
/// same bits as the transform of the inputs scaled down by a power of two,
/// scaled back, through every entry point (in place, rows in place and
/// strided, rows out of place from contiguous and strided sources), for
/// f64 and f32. Small inputs keep the bits of the direct transform.
#[test]
fn normalized_transforms_of_huge_inputs_stay_finite() {
    fn check<T: Real>(huge: f64) {
        let par = Parallelism::Rayon;
        for n in [2usize, 4, 64, 1 << 17] {
            // Two entries near the range: every output is (M ± M + 1 ± 1) / √n,
            // below MAX, while the unnormalized sums pass it.
            let mut x = vec![T::zero(); n];
            x[0] = T::from_f64_lossy(huge);
            x[n - 1] = T::from_f64_lossy(huge);
            if n > 2 {
                x[n / 2] = T::one();
            }
            // The oracle: a power of two down, the transform, the same up.
            let down = T::from_f64_lossy((n as f64).recip());
            let mut want: Vec<T> = x.iter().map(|&v| v * down).collect();
            transform(&mut want, par);
            let up = T::from_f64_lossy(n as f64) * norm_factor::<T>(n);
            want.iter_mut().for_each(|v| *v *= up);
            let exact = 2.0 * huge / (n as f64).sqrt();
            for (k, v) in want.iter().enumerate() {
                // Output k adds x[n - 1] with the sign (-1)^popcount(k & (n - 1)).
                let plus = (k & (n - 1)).count_ones() % 2 == 0;
                let e = if plus { exact } else { 0.0 };
                assert!((v.to_f64_exact() - e).abs() <= 1e-6 * exact, "{n} {k} {v}");
            }
            assert!(want.iter().all(|v| v.is_finite()));
            let mut v = x.clone();
            fwht(&mut v, true, par).unwrap();
            assert_eq!(v, want, "fwht n = {n}");
            let rows = Array2::from_shape_fn((2, 2 * n), |(_, j)| x[j / 2]);
            let strided = rows.slice(ndarray::s![.., ..;2]);
            let mut out = Array2::zeros((2, n));
            fwht_rows_into(strided, out.view_mut(), true, par).unwrap();
            let contiguous = strided.to_owned();
            let mut out2 = Array2::zeros((2, n));
            fwht_rows_into(contiguous.view(), out2.view_mut(), true, par).unwrap();
            let mut inplace = contiguous.clone();
            fwht_rows(inplace.view_mut(), true, par).unwrap();
            let mut wide = rows.clone();
            fwht_rows(wide.slice_mut(ndarray::s![.., ..;2]), true, par).unwrap();
            for r in 0..2 {
                for got in [out.row(r), out2.row(r), inplace.row(r)] {
                    assert_eq!(got.to_vec(), want, "rows n = {n}");
                }
                assert_eq!(wide.slice(ndarray::s![r, ..;2]).to_vec(), want);
            }
        }
        // The worked case: (M, M, 0, 0) / 2 per pair of outputs.
        let m = T::from_f64_lossy(huge * 1.2);
        let mut v = vec![m, m, T::zero(), T::zero()];
        fwht(&mut v, true, par).unwrap();
        assert_eq!(v, [m, T::zero(), m, T::zero()]);
        // Below the threshold, the direct transform's bits.
        let small: Vec<T> = (0..64)
            .map(|i| T::from_f64_lossy(i as f64 - 20.0))
            .collect();
        let mut a = small.clone();
        fwht(&mut a, true, par).unwrap();
        let mut b = small;
        transform(&mut b, par);
        scale(&mut b, norm_factor::<T>(64));
        assert_eq!(a, b);
    }
    check::<f64>(1.0e308);
    check::<f32>(2.0e38);
}

/// Out of place (the first pass reads the source) gives the bits of a copy
/// transformed in place: f32 and f64, lengths below one register, inside
/// one L1 block, across L1 blocks and across L2 blocks, sequential and
/// parallel, source and destination at every offset from a cache line.
#[test]
fn out_of_place_is_bit_identical_to_in_place() {
    fn check<T: Real>(ks: &[u32]) {
        let line = 64 / std::mem::size_of::<T>();
        for &k in ks {
            let n = 1usize << k;
            let x: Vec<T> = random_vec(n, 1300 + u64::from(k))
                .into_iter()
                .map(T::from_f64_lossy)
                .collect();
            let mut want = x.clone();
            naive(&mut want);
            let mut src = vec![T::zero(); n + line];
            let mut dst = vec![T::zero(); n + line];
            let offsets: &[(usize, usize)] = if n >= 1 << 16 {
                &[(0, 0), (2, 5)]
            } else {
                &[(0, 0), (1, 0), (0, 3), (2, 5), (line - 1, line - 1)]
            };
            for &(so, doff) in offsets {
                for par in [Parallelism::Sequential, Parallelism::Rayon] {
                    src[so..so + n].copy_from_slice(&x);
                    let d = &mut dst[doff..doff + n];
                    d.fill(T::nan());
                    transform_from(Some(&src[so..so + n]), d, par);
                    assert!(
                        d == want.as_slice(),
                        "{} n = 2^{k}, offsets ({so}, {doff}), {par:?}",
                        T::DTYPE
                    );
                    assert!(src[so..so + n] == x[..], "source untouched");
                }
            }
        }
    }
    let ks = [0, 1, 2, 3, 4, 5, 8, 10, 11, 12, 13, 16, 17, 18, 19, 20];
    check::<f64>(&ks);
    check::<f32>(&ks);
}

/// `fwht_rows_into` gives the bits of `fwht_rows` on a copy, for
/// contiguous, strided and transposed sources, normalized or not.
#[test]
fn rows_into_is_bit_identical_to_rows_in_place() {
    fn check<T: Real>() {
        for (rows, n) in [(37, 64), (5, 2048), (3, 8192), (40, 1024), (2, 1 << 17)] {
            let data: Vec<T> = random_vec(rows * 2 * n, 1400 + n as u64)
                .into_iter()
                .map(T::from_f64_lossy)
                .collect();
            let wide = Array2::from_shape_vec((rows, 2 * n), data).unwrap();
            let contiguous = wide.slice(ndarray::s![.., ..n]).to_owned();
            let transposed = contiguous.t().to_owned();
            let sources = [
                ("contiguous", contiguous.view()),
                ("strided", wide.slice(ndarray::s![.., ..;2])),
                ("transposed", transposed.t()),
            ];
            for (what, src) in sources {
                for normalized in [false, true] {
                    for par in [Parallelism::Sequential, Parallelism::Rayon] {
                        let mut want = src.to_owned();
                        fwht_rows(want.view_mut(), normalized, par).unwrap();
                        let mut got = Array2::from_elem((rows, n), T::nan());
                        fwht_rows_into(src, got.view_mut(), normalized, par).unwrap();
                        assert!(
                            got == want,
                            "{} {what} {rows} x {n}, normalized {normalized}, {par:?}",
                            T::DTYPE
                        );
                    }
                }
            }
        }
    }
    check::<f64>();
    check::<f32>();
}

proptest::proptest! {
    #[test]
    fn prop_double_transform_scales_by_n(k in 0u32..12, seed in 0u64..1000) {
        let n = 1usize << k;
        let x = random_vec(n, seed);
        let mut y = x.clone();
        fwht(&mut y, false, Parallelism::Rayon).unwrap();
        fwht(&mut y, false, Parallelism::Rayon).unwrap();
        for (a, b) in y.iter().zip(&x) {
            proptest::prop_assert!((a - n as f64 * b).abs() <= 1e-9 * n as f64);
        }
    }
}

#[test]
fn every_simd_level_is_bit_identical() {
    for k in 0..=12 {
        let n = 1usize << k;
        let x = random_vec(n, 500 + k as u64);
        let mut want = x.clone();
        naive(&mut want);
        for got in simd::small_all_levels(&x) {
            assert!(got == want, "f64 n = {n}");
        }
        let x32: Vec<f32> = x.iter().map(|&v| v as f32).collect();
        let mut want32 = x32.clone();
        naive(&mut want32);
        for got in simd::small_all_levels(&x32) {
            assert!(got == want32, "f32 n = {n}");
        }
    }
}

/// Phase 2 at every SIMD level: blocks pre-transformed by the textbook
/// loop, then all strips; the whole must equal the textbook transform bit for
/// bit (the dispatched test above runs only the widest level).
#[test]
fn every_simd_level_phase2_is_bit_identical() {
    fn check<T: Real>(k: u32) {
        let n = 1usize << k;
        let b = butterfly::block_len::<T>();
        let x: Vec<T> = random_vec(n, 700 + k as u64)
            .into_iter()
            .map(T::from_f64_lossy)
            .collect();
        let mut want = x.clone();
        naive(&mut want);
        let mut blocks = x.clone();
        blocks.chunks_exact_mut(b).for_each(naive);
        let rows = n / b;
        // The default strip width, and narrower strips down to 8 columns
        // (below the 16 lanes of f32 AVX-512: the portable fallback).
        for width in [butterfly::strip_width::<T>(rows, b), 8, 16, 64] {
            for got in simd::phase2_all_levels(&blocks, rows, b, width) {
                assert!(got == want, "{} n = 2^{k}, width {width}", T::DTYPE);
            }
        }
    }
    for k in [12, 13, 14, 15, 16, 17] {
        check::<f64>(k);
        check::<f32>(k + 1);
    }
}

/// Every start address modulo a cache line: phase 2 runs its strips from
/// the first 64-byte boundary and the columns before and after it as narrow
/// strips of their own (`strip_ranges`); the result must not change.
#[test]
fn any_alignment_is_bit_identical() {
    fn check<T: Real>(k: u32) {
        let n = 1usize << k;
        let x: Vec<T> = random_vec(n, 900 + k as u64)
            .into_iter()
            .map(T::from_f64_lossy)
            .collect();
        let mut want = x.clone();
        naive(&mut want);
        let line = 64 / std::mem::size_of::<T>();
        let mut buf = vec![T::zero(); n + line];
        for off in 0..line {
            for par in [Parallelism::Sequential, Parallelism::Rayon] {
                let v = &mut buf[off..off + n];
                v.copy_from_slice(&x);
                fwht(v, false, par).unwrap();
                assert!(
                    v == want.as_slice(),
                    "{} n = 2^{k}, offset {off}, {par:?}",
                    T::DTYPE
                );
            }
        }
    }
    for k in [4, 6, 10, 11, 12, 14, 16, 18] {
        check::<f64>(k);
        check::<f32>(k + 1);
    }
}

#[test]
fn strip_ranges_partition_the_columns() {
    for (addr, b, width) in [
        (0usize, 2048usize, 512usize),
        (16, 2048, 512),
        (8, 2048, 8),
        (56, 4096, 2048),
        (24, 131_072, 16_384),
        (4, 4096, 16),
    ] {
        for (r, size) in [
            (strip_ranges::<f64>(addr, b, width), 8usize),
            (strip_ranges::<f32>(addr, b, width), 4),
        ] {
            // Consecutive, covering [0, b), every wide strip aligned (an
            // address that is not a multiple of the element size cannot be).
            let mut next = 0;
            for &(c, w) in &r {
                assert_eq!(c, next, "{r:?}");
                assert!(w > 0 && (w <= width || w < 64 / size), "{r:?}");
                if w >= 64 / size && addr % size == 0 {
                    assert_eq!((addr + c * size) % 64, 0, "{r:?}");
                    assert_eq!(w % (64 / size), 0, "{r:?}");
                }
                next = c + w;
            }
            assert_eq!(next, b);
        }
    }
}
