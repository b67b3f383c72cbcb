//! Quasi-Monte Carlo frequencies (`docs/math/fourier.rst`, "Frequency
//! samplers", `qmc`): a Sobol sequence with Joe–Kuo direction numbers in
//! Gray-code order (the points and ordering of `scipy.stats.qmc.Sobol`),
//! optionally scrambled by a random linear matrix scramble plus a digital
//! shift, mapped through the inverse normal CDF (Wichura's AS241).
//!
//! No crate was used for Sobol: `sobol_burley` (the maintained one) uses
//! Burley's Owen-scrambled variant, whose points and ordering differ from
//! scipy's. The direction-number table (module `sobol_table`) covers the
//! first [`MAX_SOBOL_DIM`] dimensions; larger `d` is an error.

// The AS241 coefficients are kept digit for digit as published (more digits
// than an f64 holds; they round to the same values).
#![allow(clippy::excessive_precision)]

use rand::Rng;

use super::sobol_table::{MAX_DEGREE, MAX_DIM, POLY, VINIT};
use crate::error::{Error, Result};

/// Bits of every Sobol coordinate (at most `2^32` points).
const BITS: usize = 32;

/// The number of dimensions the shipped direction numbers cover.
pub const MAX_SOBOL_DIM: usize = MAX_DIM;

/// Direction integers `v_0..v_{31}` of dimension `j` (bit 31 = 1/2).
fn directions(j: usize) -> [u32; BITS] {
    let mut m = [0u32; BITS];
    if j == 0 {
        m = [1; BITS];
    } else {
        let poly = POLY[j] as u32;
        let s = (32 - poly.leading_zeros() - 1) as usize;
        for (k, mk) in m.iter_mut().enumerate().take(s.min(MAX_DEGREE)) {
            *mk = VINIT[j][k] as u32;
        }
        for k in s..BITS {
            // m_k = 2^s m_{k-s} xor m_{k-s} xor sum_{i=1}^{s-1} a_i 2^i m_{k-i}
            let mut v = m[k - s] ^ (m[k - s] << s);
            for i in 1..s {
                if (poly >> (s - i)) & 1 == 1 {
                    v ^= m[k - i] << i;
                }
            }
            m[k] = v;
        }
    }
    let mut out = [0u32; BITS];
    for k in 0..BITS {
        out[k] = m[k] << (BITS - 1 - k);
    }
    out
}

/// The first `n` Sobol points in `dim` dimensions as 32-bit integers
/// (`u = x / 2^32`), row-major `n × dim`. With `scramble`, each dimension's
/// direction integers are multiplied by a random lower-triangular binary
/// matrix with unit diagonal (linear matrix scrambling) and the points are
/// XORed with a random shift, both drawn from `rng`.
pub fn sobol_points<R: Rng + ?Sized>(
    n: usize,
    dim: usize,
    scramble: Option<&mut R>,
) -> Result<Vec<u32>> {
    if dim > MAX_SOBOL_DIM {
        return Err(Error::invalid(
            "n_features",
            format!(
                "the qmc sampler supports at most {MAX_SOBOL_DIM} Sobol dimensions \
                 (n_features, plus one for the cos_bias phase), got {dim}"
            ),
        ));
    }
    if n as u64 > 1u64 << BITS {
        return Err(Error::invalid(
            "n_components",
            format!("the qmc sampler supports at most 2^{BITS} frequencies"),
        ));
    }
    let mut dirs: Vec<[u32; BITS]> = (0..dim).map(directions).collect();
    let mut shift = vec![0u32; dim];
    if let Some(rng) = scramble {
        for (dj, sj) in dirs.iter_mut().zip(shift.iter_mut()) {
            // Row i of the matrix (digit i, bit 31 - i): unit diagonal plus
            // random entries for the more significant digits.
            let rows: Vec<u32> = (0..BITS)
                .map(|i| {
                    let diag = 1u32 << (BITS - 1 - i);
                    let above = if i == 0 {
                        0
                    } else {
                        rng.random::<u32>() & !(u32::MAX >> i)
                    };
                    diag | above
                })
                .collect();
            for v in dj.iter_mut() {
                let mut nv = 0u32;
                for (i, &row) in rows.iter().enumerate() {
                    nv |= ((row & *v).count_ones() & 1) << (BITS - 1 - i);
                }
                *v = nv;
            }
            *sj = rng.random::<u32>();
        }
    }
    let mut out = vec![0u32; n * dim];
    let mut cur = shift.clone();
    for i in 0..n {
        if i > 0 {
            let c = (i - 1).trailing_ones() as usize;
            for (x, dj) in cur.iter_mut().zip(&dirs) {
                *x ^= dj[c];
            }
        }
        out[i * dim..(i + 1) * dim].copy_from_slice(&cur);
    }
    Ok(out)
}

/// A Sobol integer as a uniform in `[2^-53, 1 − 2^-53]`
/// (`docs/math/fourier.rst`, "Frequency samplers", `qmc`).
pub fn to_unit(x: u32) -> f64 {
    let eps = f64::powi(2.0, -53);
    (x as f64 * f64::powi(2.0, -(BITS as i32))).clamp(eps, 1.0 - eps)
}

/// `c[0] + c[1] r + ... + c[7] r^7`.
fn horner(r: f64, c: &[f64; 8]) -> f64 {
    c.iter().rev().fold(0.0, |acc, &ci| acc * r + ci)
}

// Coefficients of AS241 PPND16 (Wichura 1988), lowest degree first.
const AS241_A: [f64; 8] = [
    3.387_132_872_796_366_5,
    133.141_667_891_784_38,
    1_971.590_950_306_551_3,
    13_731.693_765_509_461,
    45_921.953_931_549_87,
    67_265.770_927_008_7,
    33_430.575_583_588_13,
    2_509.080_928_730_122_7,
];
const AS241_B: [f64; 8] = [
    1.0,
    42.313_330_701_600_91,
    687.187_007_492_057_9,
    5_394.196_021_424_751,
    21_213.794_301_586_597,
    39_307.895_800_092_71,
    28_729.085_735_721_943,
    5_226.495_278_852_545,
];
const AS241_C: [f64; 8] = [
    1.423_437_110_749_683_6,
    4.630_337_846_156_545,
    5.769_497_221_460_691,
    3.647_848_324_763_204_6,
    1.270_458_252_452_368_4,
    0.241_780_725_177_450_6,
    0.022_723_844_989_269_184,
    7.745_450_142_783_414e-4,
];
const AS241_D: [f64; 8] = [
    1.0,
    2.053_191_626_637_759,
    1.676_384_830_183_803_8,
    0.689_767_334_985_1,
    0.148_103_976_427_480_08,
    0.015_198_666_563_616_457,
    5.475_938_084_995_345e-4,
    1.050_750_071_644_416_8e-9,
];
const AS241_E: [f64; 8] = [
    6.657_904_643_501_103,
    5.463_784_911_164_114,
    1.784_826_539_917_291_3,
    0.296_560_571_828_504_9,
    0.026_532_189_526_576_124,
    0.001_242_660_947_388_078_4,
    2.711_555_568_743_487_6e-5,
    2.010_334_399_292_288e-7,
];
const AS241_F: [f64; 8] = [
    1.0,
    0.599_832_206_555_888,
    0.136_929_880_922_735_8,
    0.014_875_361_290_850_615,
    7.868_691_311_456_133e-4,
    1.846_318_317_510_054_8e-5,
    1.421_511_758_316_446e-7,
    2.044_263_103_389_939_7e-15,
];

/// Inverse of the standard normal CDF, `Φ^{-1}(p)` for `0 < p < 1`
/// (Wichura 1988, algorithm AS241 `PPND16`, relative error about `1e-16`).
/// Returns `−∞` / `+∞` at `p = 0` / `1` and NaN outside `[0, 1]`.
pub fn inverse_normal_cdf(p: f64) -> f64 {
    if p.is_nan() || !(0.0..=1.0).contains(&p) {
        return f64::NAN;
    }
    if p == 0.0 {
        return f64::NEG_INFINITY;
    }
    if p == 1.0 {
        return f64::INFINITY;
    }
    let q = p - 0.5;
    if q.abs() <= 0.425 {
        let r = 0.180625 - q * q;
        return q * horner(r, &AS241_A) / horner(r, &AS241_B);
    }
    let r = (-(if q < 0.0 { p } else { 1.0 - p }).ln()).sqrt();
    let val = if r <= 5.0 {
        horner(r - 1.6, &AS241_C) / horner(r - 1.6, &AS241_D)
    } else {
        horner(r - 5.0, &AS241_E) / horner(r - 5.0, &AS241_F)
    };
    if q < 0.0 {
        -val
    } else {
        val
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inverse_normal_oracles() {
        // docs/math/fourier.rst, "Checks".
        let cases = [
            (0.975, 1.959_963_984_540_054),
            (0.25, -0.674_489_750_196_081_7),
            (1e-10, -6.361_340_902_404_056),
        ];
        for (p, want) in cases {
            let got = inverse_normal_cdf(p);
            assert!(
                ((got - want) / want).abs() < 1e-15,
                "Phi^-1({p}) = {got}, want {want}"
            );
        }
        assert_eq!(inverse_normal_cdf(0.5), 0.0);
        assert_eq!(inverse_normal_cdf(0.0), f64::NEG_INFINITY);
        assert!(inverse_normal_cdf(1.5).is_nan());
        for p in [1e-3, 0.1, 0.3, 0.45] {
            assert!((inverse_normal_cdf(p) + inverse_normal_cdf(1.0 - p)).abs() < 1e-9);
        }
    }

    #[test]
    fn sobol_oracle_points_unscrambled() {
        // docs/math/fourier.rst, "Checks": d = 2, points 0..7.
        let pts = sobol_points::<rand_chacha::ChaCha20Rng>(8, 2, None).unwrap();
        let u: Vec<f64> = pts.iter().map(|&x| x as f64 / 4_294_967_296.0).collect();
        let want = [
            0.0, 0.0, 0.5, 0.5, 0.75, 0.25, 0.25, 0.75, 0.375, 0.375, 0.875, 0.875, 0.625, 0.125,
            0.125, 0.625,
        ];
        assert_eq!(u, want);
    }

    #[test]
    fn scrambled_points_stay_a_net() {
        // A (0, m, 1)-net in every 1-D projection: 2^k scrambled points put
        // exactly one point in each interval [i/2^k, (i+1)/2^k).
        let mut rng = crate::rng::seeded(5);
        let n = 64;
        let dim = 40;
        let pts = sobol_points(n, dim, Some(&mut rng)).unwrap();
        for j in 0..dim {
            let mut seen = vec![false; n];
            for i in 0..n {
                let cell = (pts[i * dim + j] >> 26) as usize;
                assert!(!seen[cell], "dim {j}: two points in cell {cell}");
                seen[cell] = true;
            }
        }
        assert!(sobol_points::<rand_chacha::ChaCha20Rng>(4, MAX_SOBOL_DIM + 1, None).is_err());
    }
}
