//! Pair statistics of the optimized Maclaurin allocation (ALGORITHMS.md 4.2):
//! the bias `B(p)`, the expected one-feature variances `V̄_n` and the
//! TensorSRHT covariances `C̄_n`, as U-statistics over the unordered pairs
//! `i < j` of a subsample.
//!
//! The pass is streamed over blocks of rows: for a pair of row blocks two
//! GEMMs give `m = z_iᵀz_j` and `s = Σ_a z_ia² z_ja²`, the row norms give
//! `ν`; no `n_s × n_s` matrix is ever stored. Block pairs are processed in
//! parallel and their partial sums are added in a fixed order, so the result
//! does not depend on the thread count.

use ndarray::{s, Array2, ArrayView2, Axis};
use rayon::prelude::*;

use super::coefficients::MaclaurinKernel;
use crate::error::{Error, Result};
use crate::sketch::variance::{srht_cross_moments, unstructured_moments, PairStats, WeightLaw};
use crate::threads::Parallelism;

/// Rows per block of the streamed pass.
const BLOCK: usize = 128;

/// The averaged pair statistics of 4.2 for degrees `0..=p_max`.
#[derive(Clone, Debug, PartialEq)]
pub struct PairStatistics {
    /// `B(p)` for `p = 0..=p_max`.
    pub bias: Vec<f64>,
    /// `V̄_n` at index `n` (index 0 unused, 0).
    pub var: Vec<f64>,
    /// `C̄_n` at index `n` (all 0 unless TensorSRHT).
    pub cov: Vec<f64>,
    /// The number of unordered pairs `n_s (n_s − 1)/2`.
    pub n_pairs: u64,
    /// The largest number of pairs dropped (non-finite) from any one term.
    /// A term whose pairs were all dropped is `+∞`.
    pub max_dropped: u64,
}

impl PairStatistics {
    /// Whether more than 5% of the pairs were dropped from some term (the
    /// caller warns, 4.2).
    pub fn needs_warning(&self) -> bool {
        self.max_dropped as f64 > 0.05 * self.n_pairs as f64
    }
}

/// What the statistics are computed for.
#[derive(Clone, Copy, Debug)]
pub struct StatsSpec {
    /// The kernel (coefficients, prefactor and target).
    pub kernel: MaclaurinKernel,
    /// Largest degree `p_max`.
    pub p_max: u32,
    /// The sketch's weight law (complex laws use the real-part forms).
    pub law: WeightLaw,
    /// `Some(d')` for TensorSRHT (padded dimension of `z`), else `None`.
    pub srht_d_pad: Option<usize>,
}

/// Running sums and finite counts, laid out `[bias 0..=p | var 0..=p | cov 0..=p]`.
struct Acc {
    sum: Vec<f64>,
    count: Vec<u64>,
}

impl Acc {
    fn new(len: usize) -> Self {
        Self {
            sum: vec![0.0; len],
            count: vec![0; len],
        }
    }

    #[inline]
    fn push(&mut self, k: usize, v: f64) {
        if v.is_finite() {
            self.sum[k] += v;
            self.count[k] += 1;
        }
    }

    fn merge(&mut self, other: &Acc) {
        for (a, b) in self.sum.iter_mut().zip(&other.sum) {
            *a += b;
        }
        for (a, b) in self.count.iter_mut().zip(&other.count) {
            *a += b;
        }
    }
}

/// `sign(x)^n · exp(ln_scale + n ln|x|)`, i.e. `e^{ln_scale} x^n` evaluated in
/// log space (4.2); `n >= 1`.
#[inline]
fn scaled_pow(x: f64, n: u32, ln_scale: f64) -> f64 {
    if x == 0.0 {
        return 0.0;
    }
    let v = (ln_scale + n as f64 * x.abs().ln()).exp();
    if x < 0.0 && n % 2 == 1 {
        -v
    } else {
        v
    }
}

/// Writes `e^{ln_scale} x^n` for `n = 1..=out.len()` into `out` (4.2, log
/// space): when the first and the last power both lie well inside the
/// exponent range (the exponent is linear in `n`, so every power between them
/// does too) one `exp` and repeated multiplication suffice; otherwise every
/// power is evaluated as [`scaled_pow`].
#[inline]
fn scaled_powers(x: f64, ln_scale: f64, out: &mut [f64]) {
    const SAFE: f64 = 700.0;
    if x == 0.0 {
        out.fill(0.0);
        return;
    }
    let l = x.abs().ln();
    let p = out.len() as f64;
    let (first, last) = (ln_scale + l, ln_scale + p * l);
    if first.abs() < SAFE && last.abs() < SAFE {
        let mut v = first.exp().copysign(x);
        for o in out.iter_mut() {
            *o = v;
            v *= x;
        }
    } else {
        for (k, o) in out.iter_mut().enumerate() {
            *o = scaled_pow(x, k as u32 + 1, ln_scale);
        }
    }
}

struct PairKernel {
    spec: StatsSpec,
    coefs: Vec<f64>,
    ln_coefs: Vec<f64>,
    complex: bool,
}

/// Scratch rows of the powers of one pair (`p_max` entries each).
struct Powers {
    m: Vec<f64>,
    m2: Vec<f64>,
    big_m: Vec<f64>,
    pm: Vec<f64>,
    c: Vec<f64>,
    pc: Vec<f64>,
}

impl Powers {
    fn new(p: usize) -> Self {
        Self {
            m: vec![0.0; p],
            m2: vec![0.0; p],
            big_m: vec![0.0; p],
            pm: vec![0.0; p],
            c: vec![0.0; p],
            pc: vec![0.0; p],
        }
    }
}

impl PairKernel {
    fn new(spec: StatsSpec) -> Self {
        let coefs = spec.kernel.coefficients(spec.p_max);
        let ln_coefs = coefs.iter().map(|a| a.ln()).collect();
        Self {
            spec,
            coefs,
            ln_coefs,
            complex: spec.law.q() < 1.0,
        }
    }

    /// Adds the terms of one pair to `acc`.
    #[inline]
    fn pair(&self, m: f64, sq_i: f64, sq_j: f64, s: f64, pw: &mut Powers, acc: &mut Acc) {
        let p = self.spec.p_max as usize;
        let k = self.spec.kernel;
        let ln_g = k.ln_prefactor(sq_i) + k.ln_prefactor(sq_j);
        let ln_g2 = 2.0 * ln_g;
        let t = k.target(m, sq_i, sq_j);
        // Bias: (t − G Σ_{n≤p} a_n m^n)², cumulative over p.
        scaled_powers(m, ln_g, &mut pw.m);
        let mut partial = self.coefs[0] * ln_g.exp();
        acc.push(0, (t - partial) * (t - partial));
        for n in 1..=p {
            let a = self.coefs[n];
            if a != 0.0 {
                let term = a * pw.m[n - 1];
                // Fall back to log space when G m^n alone is out of range.
                partial += if term.is_finite() {
                    term
                } else {
                    scaled_pow(m, n as u32, ln_g + self.ln_coefs[n])
                };
            }
            let e = t - partial;
            acc.push(n, e * e);
        }
        let stats = PairStats {
            m,
            nu: sq_i * sq_j,
            s,
        };
        let (big_m, pm) = unstructured_moments(self.spec.law, &stats);
        scaled_powers(m * m, ln_g2, &mut pw.m2);
        scaled_powers(big_m, ln_g2, &mut pw.big_m);
        if self.complex {
            scaled_powers(pm, ln_g2, &mut pw.pm);
        }
        let cross = self
            .spec
            .srht_d_pad
            .map(|d_pad| srht_cross_moments(self.spec.law, &stats, d_pad));
        if let Some((c, pc)) = cross {
            scaled_powers(c, ln_g2, &mut pw.c);
            if self.complex {
                scaled_powers(pc, ln_g2, &mut pw.pc);
            }
        }
        for n in 1..=p {
            let m2n = pw.m2[n - 1];
            let mut v = pw.big_m[n - 1] - m2n;
            if self.complex {
                v = 0.5 * (v + pw.pm[n - 1] - m2n);
            }
            acc.push(p + 1 + n, v);
            if cross.is_some() {
                let mut cv = pw.c[n - 1] - m2n;
                if self.complex {
                    cv = 0.5 * (cv + pw.pc[n - 1] - m2n);
                }
                acc.push(2 * (p + 1) + n, cv);
            }
        }
    }
}

/// Computes the pair statistics of 4.2 over all unordered pairs `i < j` of
/// the rows of `z` (the scaled, centered subsample, `n_s × d`, `n_s >= 2`).
///
/// Non-finite pair values are dropped from the numerator and the count of
/// their term; see [`PairStatistics::max_dropped`].
pub fn pair_statistics(
    z: ArrayView2<f64>,
    spec: StatsSpec,
    par: Parallelism,
) -> Result<PairStatistics> {
    let n_s = z.nrows();
    if n_s < 2 {
        return Err(Error::invalid(
            "n_subsample",
            format!("the pair statistics need at least 2 rows, got {n_s}"),
        ));
    }
    if z.iter().any(|v| !v.is_finite()) {
        return Err(Error::NonFinite { name: "X" });
    }
    let kernel = PairKernel::new(spec);
    let p = spec.p_max as usize;
    let len = 3 * (p + 1);
    let z = z.as_standard_layout();
    let z2: Array2<f64> = z.mapv(|v| v * v);
    let sq: Vec<f64> = z2.sum_axis(Axis(1)).to_vec();
    let n_blocks = n_s.div_ceil(BLOCK);
    let block_pairs: Vec<(usize, usize)> = (0..n_blocks)
        .flat_map(|i| (i..n_blocks).map(move |j| (i, j)))
        .collect();
    let run = |&(bi, bj): &(usize, usize)| -> Acc {
        let (i0, i1) = (bi * BLOCK, ((bi + 1) * BLOCK).min(n_s));
        let (j0, j1) = (bj * BLOCK, ((bj + 1) * BLOCK).min(n_s));
        let zi = z.slice(s![i0..i1, ..]);
        let zj = z.slice(s![j0..j1, ..]);
        let m = zi.dot(&zj.t());
        let s2 = z2.slice(s![i0..i1, ..]).dot(&z2.slice(s![j0..j1, ..]).t());
        let mut acc = Acc::new(len);
        let mut pw = Powers::new(p);
        for a in 0..(i1 - i0) {
            let i = i0 + a;
            let start = if bi == bj { a + 1 } else { 0 };
            for b in start..(j1 - j0) {
                kernel.pair(m[[a, b]], sq[i], sq[j0 + b], s2[[a, b]], &mut pw, &mut acc);
            }
        }
        acc
    };
    let partials: Vec<Acc> = if par.is_parallel() {
        block_pairs.par_iter().map(run).collect()
    } else {
        block_pairs.iter().map(run).collect()
    };
    let mut total = Acc::new(len);
    for part in &partials {
        total.merge(part);
    }
    let n_pairs = (n_s as u64) * (n_s as u64 - 1) / 2;
    let avg = |k: usize| {
        if total.count[k] == 0 {
            f64::INFINITY
        } else {
            total.sum[k] / total.count[k] as f64
        }
    };
    let mut max_dropped = 0;
    let mut consider = |k: usize| max_dropped = max_dropped.max(n_pairs - total.count[k]);
    for n in 0..=p {
        consider(n);
        if n > 0 {
            consider(p + 1 + n);
            if spec.srht_d_pad.is_some() {
                consider(2 * (p + 1) + n);
            }
        }
    }
    let bias = (0..=p).map(avg).collect();
    let mut var = vec![0.0; p + 1];
    let mut cov = vec![0.0; p + 1];
    for n in 1..=p {
        var[n] = avg(p + 1 + n);
        if spec.srht_d_pad.is_some() {
            cov[n] = avg(2 * (p + 1) + n);
        }
    }
    Ok(PairStatistics {
        bias,
        var,
        cov,
        n_pairs,
        max_dropped,
    })
}
