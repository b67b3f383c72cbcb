//! Pair statistics of the optimized Maclaurin allocation
//! (`docs/math/maclaurin.rst`, "Pair statistics"): the bias `B(p)`, the
//! expected one-feature variances `V̄_n` and the TensorSRHT covariances `C̄_n`,
//! as U-statistics over the unordered pairs `i < j` of a subsample.
//!
//! The pass is streamed over blocks of rows: for a pair of row blocks two
//! GEMMs give `m = z_iᵀz_j` and `s = Σ_a z_ia² z_ja²`, the row norms give
//! `ν`; no `n_s × n_s` matrix is ever stored. Block pairs are processed in
//! parallel and their partial sums are added in a fixed order, so the result
//! does not depend on the thread count.
//!
//! The scalar code evaluates every power in log space (about ten
//! `exp`/`ln` per pair). The vector code evaluates a whole row of a block
//! pair at once (plain loops over the pairs, compiled for the widest SIMD
//! the CPU offers, sums kept in `LANES` lanes): the target and `G` with
//! the branch-free `exp` of `crate::vexp` (within 2 ulp), the powers
//! `G m^n`, `G² M^n`, … multiplied out directly, which is exact to rounding
//! while they stay within `e^{±700}`. A pair outside that range (a zero or
//! overflowing power, a target beyond `e^700`) is evaluated by the scalar
//! code with the library `exp`/`ln`, as is every pair of a kernel whose
//! target is not an exponential (the polynomial kernel).

use ndarray::{s, Array2, ArrayView2, Axis};
use rayon::prelude::*;

use super::coefficients::MaclaurinKernel;
use crate::error::{Error, Result};
use crate::linalg::gemm;
use crate::progress::Monitor;
use crate::sketch::variance::{srht_cross_moments, unstructured_moments, PairStats, WeightLaw};
use crate::threads::Parallelism;
use crate::vexp;

/// Rows per block of the streamed pass.
const BLOCK: usize = 128;

/// The averaged pair statistics of `docs/math/maclaurin.rst`, "Pair statistics"
/// for degrees `0..=p_max`.
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
    /// caller warns, `docs/math/maclaurin.rst`, "Pair statistics").
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
/// log space (`docs/math/maclaurin.rst`, "Pair statistics"); `n >= 1`.
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

/// Writes `e^{ln_scale} x^n` for `n = 1..=out.len()` into `out`
/// (`docs/math/maclaurin.rst`, "Pair statistics", log space): when the first
/// and the last power both lie well inside the exponent range (the exponent is
/// linear in `n`, so every power between them does too) one `exp` and repeated
/// multiplication suffice; otherwise every power is evaluated as
/// [`scaled_pow`].
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
    /// The target is `exp(·)` (Gaussian, exponential): strips are evaluated
    /// by the vector code (see the module docs).
    vector: bool,
    /// `max(0, max_n ln|a_n|)`: a power `G m^n` below `e^{SAFE_LN − this}`
    /// keeps `a_n G m^n` finite.
    ln_coef_max: f64,
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
        let ln_coefs: Vec<f64> = coefs.iter().map(|a| a.ln()).collect();
        let ln_coef_max = coefs
            .iter()
            .skip(1)
            .filter(|a| **a != 0.0)
            .fold(0.0f64, |m, a| m.max(a.abs().ln()));
        Self {
            spec,
            coefs,
            ln_coefs,
            complex: spec.law.q() < 1.0,
            vector: !matches!(spec.kernel, MaclaurinKernel::Polynomial { .. }),
            ln_coef_max,
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
        let stats = PairStats::from_sums(m, sq_i * sq_j, s);
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

/// Pairs per lane group of the vector sums (one AVX-512 register of `f64`).
const LANES: usize = 8;

/// The largest `|ln|` of a power evaluated by the vector code: beyond it the
/// pair goes to the scalar code (as [`scaled_powers`] falls back to
/// [`scaled_pow`]).
const SAFE_LN: f64 = 700.0;

/// Per-lane running sums and finite counts of the vector code, laid out like
/// [`Acc`]; added into an [`Acc`] in a fixed order by [`LaneAcc::drain_into`].
struct LaneAcc {
    sum: Vec<[f64; LANES]>,
    count: Vec<[f64; LANES]>,
}

impl LaneAcc {
    fn new(len: usize) -> Self {
        Self {
            sum: vec![[0.0; LANES]; len],
            count: vec![[0.0; LANES]; len],
        }
    }

    /// Adds the finite `v_i` to term `k` (pair `i` into lane `i mod LANES`;
    /// no branch, and the lanes in locals, so that they vectorize).
    #[inline(always)]
    fn push(&mut self, k: usize, v: &[f64]) {
        let (mut sum, mut count) = (self.sum[k], self.count[k]);
        let mut add = |l: usize, x: f64| {
            let keep = x.abs() < f64::INFINITY;
            sum[l] += if keep { x } else { 0.0 };
            count[l] += if keep { 1.0 } else { 0.0 };
        };
        let mut chunks = v.chunks_exact(LANES);
        for v in &mut chunks {
            for (l, &x) in v.iter().enumerate() {
                add(l, x);
            }
        }
        for (l, &x) in chunks.remainder().iter().enumerate() {
            add(l, x);
        }
        (self.sum[k], self.count[k]) = (sum, count);
    }

    /// Adds the lanes (in lane order) to `acc` and clears them.
    fn drain_into(&mut self, acc: &mut Acc) {
        for (k, (sum, count)) in self.sum.iter_mut().zip(&mut self.count).enumerate() {
            for l in 0..LANES {
                acc.sum[k] += sum[l];
                acc.count[k] += count[l] as u64;
            }
            *sum = [0.0; LANES];
            *count = [0.0; LANES];
        }
    }
}

/// The per-pair quantities of one strip (a row against up to [`BLOCK`]
/// columns) as a struct of arrays, so that every step of the vector code
/// is a plain loop over pairs: whether the pair stays on the vector path,
/// `ln G` (then `G`, then `G²`), the target, the bias partial sum, the six power series' bases
/// (`m, m², M, Pm, C, Pc`) and current powers, and the terms to add.
struct Strip {
    good: Vec<bool>,
    ln_g: Vec<f64>,
    t: Vec<f64>,
    partial: Vec<f64>,
    base: [Vec<f64>; 6],
    pow: [Vec<f64>; 6],
    val: [Vec<f64>; 3],
}

/// Everything a strip writes: its scratch, the scalar path's powers and
/// sums, and the lane sums.
struct Sink {
    strip: Strip,
    pw: Powers,
    acc: Acc,
    lanes: LaneAcc,
}

impl Sink {
    fn new(p: usize) -> Self {
        let v = || vec![0.0; BLOCK];
        let len = 3 * (p + 1);
        Self {
            strip: Strip {
                good: vec![false; BLOCK],
                ln_g: v(),
                t: v(),
                partial: v(),
                base: std::array::from_fn(|_| v()),
                pow: std::array::from_fn(|_| v()),
                val: std::array::from_fn(|_| v()),
            },
            pw: Powers::new(p),
            acc: Acc::new(len),
            lanes: LaneAcc::new(len),
        }
    }
}

/// `pow_i = scale_i x_i`, the first power of [`scaled_powers`] (there
/// `exp(ln scale_i + ln|x_i|)` with the sign of `x_i`), multiplied out
/// directly: exact to rounding while it and the `p`-th power
/// `scale_i x_i^p` (computed into `last`) both lie in `(e^{−SAFE_LN}, hi)`
/// in magnitude, and then so does every power between them; `good_i` is
/// cleared otherwise.
#[inline(always)]
fn first_powers(
    x: &[f64],
    scale: &[f64],
    p: usize,
    hi: f64,
    pow: &mut [f64],
    last: &mut [f64],
    good: &mut [bool],
) {
    for ((pw, l), (&x, &sc)) in pow.iter_mut().zip(last.iter_mut()).zip(x.iter().zip(scale)) {
        *pw = sc * x;
        *l = *pw;
    }
    for _ in 1..p {
        for (l, &x) in last.iter_mut().zip(x) {
            *l *= x;
        }
    }
    let lo = (-SAFE_LN).exp();
    for ((g, &pw), &l) in good.iter_mut().zip(pow.iter()).zip(last.iter()) {
        let (a, b) = (pw.abs(), l.abs());
        *g &= (a > lo) & (a < hi) & (b > lo) & (b < hi);
    }
}

/// The pairs of one row `i` of a block pair with the columns `j` of the
/// slices (`m_j = z_iᵀz_j`, `sq_j`, `s_j`): the terms of
/// [`PairKernel::pair`] by the same formulas and recurrences, evaluated for
/// all pairs at once (see the module docs) and added to the lane sums; a
/// pair with a power or a target outside `e^{±SAFE_LN}` (or a zero base)
/// is left out of them and evaluated by [`PairKernel::pair`].
#[inline(always)]
#[allow(clippy::needless_range_loop)] // several arrays per pair: index loops vectorize
fn strip_body(kernel: &PairKernel, m: &[f64], sq_i: f64, sq_j: &[f64], s: &[f64], sink: &mut Sink) {
    let Sink {
        strip,
        pw,
        acc,
        lanes,
    } = sink;
    let n = m.len();
    if !kernel.vector {
        for i in 0..n {
            kernel.pair(m[i], sq_i, sq_j[i], s[i], pw, acc);
        }
        return;
    }
    let spec = kernel.spec;
    let p = spec.p_max as usize;
    let gaussian = spec.kernel.is_gaussian();
    let ln_gi = spec.kernel.ln_prefactor(sq_i);
    let half_j = if gaussian { -0.5 } else { 0.0 };
    let a0 = kernel.coefs[0];
    let (srht, complex) = (spec.srht_d_pad, kernel.complex);
    let Strip {
        good,
        ln_g,
        t,
        partial,
        base,
        pow,
        val,
    } = strip;
    let (good, ln_g, t, partial) = (
        &mut good[..n],
        &mut ln_g[..n],
        &mut t[..n],
        &mut partial[..n],
    );
    {
        let [b0, b1, b2, b3, b4, b5] = base;
        let (b0, b1, b2, b3, b4, b5) = (
            &mut b0[..n],
            &mut b1[..n],
            &mut b2[..n],
            &mut b3[..n],
            &mut b4[..n],
            &mut b5[..n],
        );
        // `ln_prefactor` and `target` of the Gaussian / exponential kernel
        // (each `exp` in a loop of its own, which vectorizes).
        for i in 0..n {
            ln_g[i] = ln_gi + half_j * sq_j[i];
            t[i] = if gaussian {
                m[i] - 0.5 * (sq_i + sq_j[i])
            } else {
                m[i]
            };
            good[i] = (t[i] < SAFE_LN) & (ln_g[i] < SAFE_LN);
        }
        for v in t.iter_mut() {
            *v = vexp::exp(*v);
        }
        // `ln_g` becomes `G`.
        for v in ln_g.iter_mut() {
            *v = vexp::exp(*v);
        }
        for (pa, &g) in partial.iter_mut().zip(ln_g.iter()) {
            *pa = a0 * g;
        }
        for i in 0..n {
            let stats = PairStats::from_sums(m[i], sq_i * sq_j[i], s[i]);
            b0[i] = m[i];
            b1[i] = m[i] * m[i];
            (b2[i], b3[i]) = unstructured_moments(spec.law, &stats);
            (b4[i], b5[i]) = match srht {
                Some(d_pad) => srht_cross_moments(spec.law, &stats, d_pad),
                None => (0.0, 0.0),
            };
        }
    }
    // Series 0 (m) scales by G, the others by G²; `a_n G m^n` must stay
    // finite as well.
    let active = [
        true,
        true,
        true,
        complex,
        srht.is_some(),
        srht.is_some() && complex,
    ];
    let hi = SAFE_LN.exp();
    let hi_m = (SAFE_LN - kernel.ln_coef_max).exp();
    let g = ln_g;
    let scratch = &mut val[0][..n];
    first_powers(&base[0][..n], g, p, hi_m, &mut pow[0][..n], scratch, good);
    for v in g.iter_mut() {
        *v *= *v;
    }
    for q in 1..6 {
        if active[q] {
            first_powers(&base[q][..n], g, p, hi, &mut pow[q][..n], scratch, good);
        }
    }
    // The pairs left to the scalar code get NaN targets and powers, so that
    // all their terms are non-finite and left out of the lane sums.
    for i in 0..n {
        if !good[i] {
            t[i] = f64::NAN;
            pow[2][i] = f64::NAN;
            pow[4][i] = f64::NAN;
        }
    }
    let [v0, v1, v2] = val;
    let (v0, v1, v2) = (&mut v0[..n], &mut v1[..n], &mut v2[..n]);
    // Bias: (t − G Σ_{n≤p} a_n m^n)², cumulative over p.
    for i in 0..n {
        v0[i] = (t[i] - partial[i]) * (t[i] - partial[i]);
    }
    lanes.push(0, v0);
    for k in 1..=p {
        let a = kernel.coefs[k];
        {
            let (mp, b) = (&mut pow[0][..n], &base[0][..n]);
            for i in 0..n {
                if a != 0.0 {
                    partial[i] += a * mp[i];
                }
                v0[i] = (t[i] - partial[i]) * (t[i] - partial[i]);
                mp[i] *= b[i];
            }
        }
        lanes.push(k, v0);
        let (m2p, bp, pmp) = (&pow[1][..n], &pow[2][..n], &pow[3][..n]);
        for i in 0..n {
            v1[i] = bp[i] - m2p[i];
            if complex {
                v1[i] = 0.5 * (v1[i] + pmp[i] - m2p[i]);
            }
        }
        lanes.push(p + 1 + k, v1);
        if srht.is_some() {
            let (cp, pcp) = (&pow[4][..n], &pow[5][..n]);
            for i in 0..n {
                v2[i] = cp[i] - m2p[i];
                if complex {
                    v2[i] = 0.5 * (v2[i] + pcp[i] - m2p[i]);
                }
            }
            lanes.push(2 * (p + 1) + k, v2);
        }
        for q in 1..6 {
            if active[q] {
                for (x, b) in pow[q][..n].iter_mut().zip(&base[q][..n]) {
                    *x *= b;
                }
            }
        }
    }
    for i in 0..n {
        if !good[i] {
            kernel.pair(m[i], sq_i, sq_j[i], s[i], pw, acc);
        }
    }
}

widest_simd! {
    /// [`strip_body`] with the widest SIMD the CPU offers (no FMA
    /// contraction: every SIMD level gives the same sums).
    fn strip(kernel: &PairKernel, m: &[f64], sq_i: f64, sq_j: &[f64], s: &[f64], sink: &mut Sink) = strip_body;
}

/// Computes the pair statistics of `docs/math/maclaurin.rst`, "Pair statistics"
/// over all unordered pairs `i < j` of the rows of `z` (the scaled, centered
/// subsample, `n_s × d`, `n_s >= 2`).
///
/// Non-finite pair values are dropped from the numerator and the count of
/// their term; see [`PairStatistics::max_dropped`].
///
/// The pairs are taken in blocks of `128 × 128` rows: `monitor` gets the
/// stage "blocks of pair statistics" (one unit per block) and is checked before each.
pub fn pair_statistics(
    z: ArrayView2<f64>,
    spec: StatsSpec,
    par: Parallelism,
    monitor: &Monitor,
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
    monitor.stage("blocks of pair statistics", block_pairs.len() as u64);
    let run = |&(bi, bj): &(usize, usize)| -> Result<Acc> {
        monitor.check()?;
        let (i0, i1) = (bi * BLOCK, ((bi + 1) * BLOCK).min(n_s));
        let (j0, j1) = (bj * BLOCK, ((bj + 1) * BLOCK).min(n_s));
        let zi = z.slice(s![i0..i1, ..]);
        let zj = z.slice(s![j0..j1, ..]);
        let mut m = Array2::<f64>::zeros((i1 - i0, j1 - j0));
        gemm(zi, zj.t(), m.view_mut());
        let mut s2 = Array2::<f64>::zeros((i1 - i0, j1 - j0));
        gemm(
            z2.slice(s![i0..i1, ..]),
            z2.slice(s![j0..j1, ..]).t(),
            s2.view_mut(),
        );
        let (Some(mf), Some(sf)) = (m.as_slice(), s2.as_slice()) else {
            return Err(Error::Internal(
                "GEMM products are in standard layout".into(),
            ));
        };
        let w = j1 - j0;
        let mut sink = Sink::new(p);
        for a in 0..(i1 - i0) {
            let start = if bi == bj { a + 1 } else { 0 };
            strip(
                &kernel,
                &mf[a * w + start..(a + 1) * w],
                sq[i0 + a],
                &sq[j0 + start..j1],
                &sf[a * w + start..(a + 1) * w],
                &mut sink,
            );
        }
        let Sink {
            mut acc, mut lanes, ..
        } = sink;
        lanes.drain_into(&mut acc);
        monitor.advance(1);
        Ok(acc)
    };
    let partials: Vec<Acc> = if par.is_parallel() {
        block_pairs.par_iter().map(run).collect::<Result<_>>()?
    } else {
        block_pairs.iter().map(run).collect::<Result<_>>()?
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::seeded;
    use approx::assert_relative_eq;
    use ndarray::Array2;
    use rand::Rng as _;
    use rand_distr::StandardNormal;

    /// The statistics with every pair through the scalar [`PairKernel::pair`]
    /// (library `exp`/`ln`), in plain pair order.
    fn scalar_reference(z: &Array2<f64>, spec: StatsSpec) -> (Vec<f64>, Vec<u64>) {
        let kernel = PairKernel::new(spec);
        let p = spec.p_max as usize;
        let mut acc = Acc::new(3 * (p + 1));
        let mut pw = Powers::new(p);
        let n = z.nrows();
        for i in 0..n {
            for j in i + 1..n {
                let st = PairStats::new(z.row(i).as_slice().unwrap(), z.row(j).as_slice().unwrap());
                let (sq_i, sq_j) = (z.row(i).dot(&z.row(i)), z.row(j).dot(&z.row(j)));
                kernel.pair(st.m, sq_i, sq_j, st.s, &mut pw, &mut acc);
            }
        }
        (acc.sum, acc.count)
    }

    #[test]
    fn vector_strips_match_the_scalar_pairs() {
        // 150 rows: two blocks, strips of every length (partial lanes).
        // Row 7 is 0 (m = 0: its pairs take the scalar path) and row 20 is
        // far out (powers below e^−700 under the Gaussian prefactor).
        let mut rng = seeded(5);
        let mut z = Array2::from_shape_fn((150, 4), |_| 0.5 * rng.sample::<f64, _>(StandardNormal));
        z.row_mut(7).fill(0.0);
        z.row_mut(20).mapv_inplace(|v| 60.0 * v);
        let p_max = 6;
        for kernel in [MaclaurinKernel::Gaussian, MaclaurinKernel::Exponential] {
            for (law, d_pad) in [
                (WeightLaw::Rademacher, Some(4)),
                (WeightLaw::ComplexRademacher, Some(4)),
                (WeightLaw::Gaussian, None),
                (WeightLaw::ComplexGaussian, None),
            ] {
                let spec = StatsSpec {
                    kernel,
                    p_max,
                    law,
                    srht_d_pad: d_pad,
                };
                let got =
                    pair_statistics(z.view(), spec, Parallelism::Sequential, &Monitor::default())
                        .unwrap();
                let (sum, count) = scalar_reference(&z, spec);
                let p = p_max as usize;
                let avg = |k: usize| sum[k] / count[k] as f64;
                // Both evaluate the same formulas; the vector exp/ln are
                // within 2/1 ulp of the library's, so each pair's powers
                // differ by a few ulp (times the degree), and a term by that
                // much of its largest part. On these data (|m| ≲ 2, p ≤ 6)
                // the terms are far above that: 1e-9 relative.
                for n in 0..=p {
                    assert_relative_eq!(got.bias[n], avg(n), max_relative = 1e-9);
                }
                for n in 1..=p {
                    assert_relative_eq!(got.var[n], avg(p + 1 + n), max_relative = 1e-9);
                    if d_pad.is_some() {
                        assert_relative_eq!(got.cov[n], avg(2 * (p + 1) + n), max_relative = 1e-9);
                    }
                }
                // The same pairs are dropped (non-finite) from every term.
                let terms = (0..=p).chain((1..=p).map(|n| p + 1 + n));
                let expect = terms
                    .chain((1..=p).filter(|_| d_pad.is_some()).map(|n| 2 * (p + 1) + n))
                    .map(|k| got.n_pairs - count[k])
                    .max()
                    .unwrap();
                assert_eq!(got.max_dropped, expect);
            }
        }
    }
}
