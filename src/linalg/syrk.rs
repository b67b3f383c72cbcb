//! The hand-written `f64` Gram kernel of the GP hot paths (ALGORITHMS.md
//! 7.2 and 8.2 step 4): `C[i, j] += Σ_k A[i, k] B[j, k]` for a row-major
//! `A` (`rows × K`) and `B` (`nb × K`), in particular the symmetric rank-k
//! update `G += ΦᵀΦ` with `A = B = Φᵀ` stored feature-major (row `i` holds
//! feature `i` of the `K` samples, so the inner loop over samples is
//! contiguous), only on and below the diagonal.
//!
//! Register tiling: an `MI × MJ` tile of `C` keeps `MI·MJ` vector
//! accumulators over `K` (lane `l` sums the samples `k ≡ l` mod the lane
//! count); per vector step `MI + MJ` loads feed `MI·MJ` fused multiply-adds
//! (AVX-512: 4 × 6, 24 `zmm` accumulators; AVX2 + FMA: 3 × 3; portable:
//! 2 × 2 scalars). The lanes are summed once per `K` block of [`KC`]
//! samples, whose `A` rows stay in L1 while a panel of [`JC`] `B` rows stays
//! in L2. Each entry of `C` is the same fixed sequence of operations for any
//! caller's split into row bands, so results never depend on the thread
//! count; they do depend on the instruction set (lane count, FMA).

use std::ops::Range;

/// Samples per `K` block (the lanes are summed once per block).
pub const KC: usize = 512;
/// `B` rows per panel kept in L2 (a multiple of every tile width).
pub const JC: usize = 120;

pub use crate::simd::Isa;

/// `C[i − rows.start, j] += Σ_{k < K} A[i, k] B[j, k]` for `i` in `rows`,
/// `j < nb` (and `j ≤ i` when `lower`), with `A[i, k] = a[i·lda + k]`,
/// `B[j, k] = b[j·ldb + k]` and `C[r, j] = c[r·ldc + j]`: `c` holds the
/// output rows of `rows` only, so row bands of one output can be computed
/// in parallel. Entries above the diagonal are left untouched when `lower`.
/// The symmetric rank-k update `G += AAᵀ` (lower triangle) is
/// `gemm_nt(isa, a, lda, 0..n, a, lda, n, k, g, n, true)`.
///
/// Panics if a slice is too short for the shapes (an internal contract:
/// every caller derives the shapes from its own buffers) or if `isa` is not
/// supported by this CPU.
#[allow(clippy::too_many_arguments)]
pub fn gemm_nt(
    isa: Isa,
    a: &[f64],
    lda: usize,
    rows: Range<usize>,
    b: &[f64],
    ldb: usize,
    nb: usize,
    k: usize,
    c: &mut [f64],
    ldc: usize,
    lower: bool,
) {
    if rows.is_empty() || nb == 0 || k == 0 {
        return;
    }
    assert!(
        lda >= k && ldb >= k && ldc >= nb,
        "gemm_nt: leading dimensions"
    );
    assert!(a.len() >= (rows.end - 1) * lda + k, "gemm_nt: A too short");
    assert!(b.len() >= (nb - 1) * ldb + k, "gemm_nt: B too short");
    assert!(
        c.len() >= (rows.len() - 1) * ldc + nb,
        "gemm_nt: C too short"
    );
    assert!(
        Isa::available().contains(&isa),
        "gemm_nt: {isa:?} unsupported"
    );
    let args = Args {
        a: a.as_ptr(),
        lda,
        rows,
        b: b.as_ptr(),
        ldb,
        nb,
        k,
        c: c.as_mut_ptr(),
        ldc,
        lower,
    };
    match isa {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the CPU supports AVX-512F (checked above); the slices
        // cover every index the kernel touches (checked above).
        Isa::Avx512 => unsafe { x86::run_avx512(&args) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as above, for AVX2 + FMA.
        Isa::Avx2 => unsafe { x86::run_avx2(&args) },
        // SAFETY: as above (plain scalar code).
        _ => unsafe { driver::<f64, 2, 2>(&args) },
    }
}

/// The shapes and raw pointers of one [`gemm_nt`] call.
struct Args {
    a: *const f64,
    lda: usize,
    rows: Range<usize>,
    b: *const f64,
    ldb: usize,
    nb: usize,
    k: usize,
    c: *mut f64,
    ldc: usize,
    lower: bool,
}

/// A vector of `f64` lanes.
///
/// # Safety
/// Implementations may use instructions that the caller must have checked.
unsafe trait Lanes: Copy {
    const N: usize;
    unsafe fn zero() -> Self;
    /// Loads `N` values from `p`.
    unsafe fn load(p: *const f64) -> Self;
    /// `self + x·y` (fused where the instruction set has FMA).
    unsafe fn fma(self, x: Self, y: Self) -> Self;
    /// The sum of the lanes (a fixed pairwise order).
    unsafe fn sum(self) -> f64;
}

// SAFETY: plain scalar code.
unsafe impl Lanes for f64 {
    const N: usize = 1;
    #[inline(always)]
    unsafe fn zero() -> Self {
        0.0
    }
    #[inline(always)]
    unsafe fn load(p: *const f64) -> Self {
        // SAFETY: the caller's contract.
        unsafe { *p }
    }
    #[inline(always)]
    unsafe fn fma(self, x: Self, y: Self) -> Self {
        self + x * y
    }
    #[inline(always)]
    unsafe fn sum(self) -> f64 {
        self
    }
}

/// One `MI × MJ` tile over `k` samples: `out[i][j] = Σ_k a_i[k] b_j[k]`
/// for the rows `a + i·lda` and `b + j·ldb` (vector part in lanes, then the
/// lane sum, then the scalar tail `k mod N`).
#[inline(always)]
// Explicit indices: the register tile's loops as measured (no spills).
#[allow(clippy::needless_range_loop)]
unsafe fn tile<V: Lanes, const MI: usize, const MJ: usize>(
    a: *const f64,
    lda: usize,
    b: *const f64,
    ldb: usize,
    k: usize,
) -> [[f64; MJ]; MI] {
    // SAFETY (whole body): the caller guarantees `k` readable values in
    // each of the `MI` rows of `a` and the `MJ` rows of `b`.
    unsafe {
        let mut acc = [[V::zero(); MJ]; MI];
        let kv = k / V::N * V::N;
        let mut kk = 0;
        while kk < kv {
            let mut x = [V::zero(); MI];
            for (i, x) in x.iter_mut().enumerate() {
                *x = V::load(a.add(i * lda + kk));
            }
            for j in 0..MJ {
                let y = V::load(b.add(j * ldb + kk));
                for i in 0..MI {
                    acc[i][j] = acc[i][j].fma(x[i], y);
                }
            }
            kk += V::N;
        }
        let mut out = [[0.0; MJ]; MI];
        for i in 0..MI {
            for j in 0..MJ {
                let mut s = acc[i][j].sum();
                for t in kv..k {
                    s += *a.add(i * lda + t) * *b.add(j * ldb + t);
                }
                out[i][j] = s;
            }
        }
        out
    }
}

/// Adds one `MI × MJ` tile at `(i, j)` (masked to `j ≤ i` when `lower`).
#[inline(always)]
unsafe fn add_tile<V: Lanes, const MI: usize, const MJ: usize>(
    p: &Args,
    i: usize,
    j: usize,
    k0: usize,
    kc: usize,
) {
    // SAFETY: `i + MI ≤ rows.end`, `j + MJ ≤ nb`, `k0 + kc ≤ k` (the
    // driver's loop bounds), within the slices checked by `gemm_nt`.
    unsafe {
        let t = tile::<V, MI, MJ>(
            p.a.add(i * p.lda + k0),
            p.lda,
            p.b.add(j * p.ldb + k0),
            p.ldb,
            kc,
        );
        let c = p.c.add((i - p.rows.start) * p.ldc + j);
        for (ii, row) in t.iter().enumerate() {
            for (jj, v) in row.iter().enumerate() {
                if !p.lower || j + jj <= i + ii {
                    *c.add(ii * p.ldc + jj) += v;
                }
            }
        }
    }
}

/// The blocked loops of [`gemm_nt`]: `K` blocks of [`KC`], `B` panels of
/// [`JC`] rows, `MI`-row blocks of `A`, `MJ`-row blocks of `B` (row and
/// column tails one at a time).
#[inline(always)]
unsafe fn driver<V: Lanes, const MI: usize, const MJ: usize>(p: &Args) {
    let Range { start, end } = p.rows.clone();
    let jmax = if p.lower { p.nb.min(end) } else { p.nb };
    // SAFETY (whole body): every tile lies inside the checked shapes.
    unsafe {
        for k0 in (0..p.k).step_by(KC) {
            let kc = KC.min(p.k - k0);
            for j0 in (0..jmax).step_by(JC) {
                let j1 = (j0 + JC).min(jmax);
                let mut i = start;
                while i < end {
                    let full_i = i + MI <= end;
                    let mi = if full_i { MI } else { 1 };
                    let jend = if p.lower { j1.min(i + mi) } else { j1 };
                    let mut j = j0;
                    while j < jend {
                        let full_j = j + MJ <= j1;
                        match (full_i, full_j) {
                            (true, true) => add_tile::<V, MI, MJ>(p, i, j, k0, kc),
                            (false, true) => add_tile::<V, 1, MJ>(p, i, j, k0, kc),
                            (true, false) => add_tile::<V, MI, 1>(p, i, j, k0, kc),
                            (false, false) => add_tile::<V, 1, 1>(p, i, j, k0, kc),
                        }
                        j += if full_j { MJ } else { 1 };
                    }
                    i += mi;
                }
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{driver, Args, Lanes};
    use std::arch::x86_64::*;

    #[derive(Clone, Copy)]
    struct F64x8(__m512d);
    #[derive(Clone, Copy)]
    struct F64x4(__m256d);

    // SAFETY: compiled with AVX-512F; used only from `run_avx512`.
    unsafe impl Lanes for F64x8 {
        const N: usize = 8;
        #[inline]
        #[target_feature(enable = "avx512f")]
        unsafe fn zero() -> Self {
            Self(_mm512_setzero_pd())
        }
        #[inline]
        #[target_feature(enable = "avx512f")]
        unsafe fn load(p: *const f64) -> Self {
            // SAFETY: the caller's contract (8 readable values).
            Self(unsafe { _mm512_loadu_pd(p) })
        }
        #[inline]
        #[target_feature(enable = "avx512f")]
        unsafe fn fma(self, x: Self, y: Self) -> Self {
            Self(_mm512_fmadd_pd(x.0, y.0, self.0))
        }
        #[inline]
        #[target_feature(enable = "avx512f")]
        unsafe fn sum(self) -> f64 {
            let h = _mm256_add_pd(
                _mm512_castpd512_pd256(self.0),
                _mm512_extractf64x4_pd::<1>(self.0),
            );
            let q = _mm_add_pd(_mm256_castpd256_pd128(h), _mm256_extractf128_pd::<1>(h));
            _mm_cvtsd_f64(_mm_add_sd(q, _mm_unpackhi_pd(q, q)))
        }
    }

    // SAFETY: compiled with AVX2 + FMA; used only from `run_avx2`.
    unsafe impl Lanes for F64x4 {
        const N: usize = 4;
        #[inline]
        #[target_feature(enable = "avx2,fma")]
        unsafe fn zero() -> Self {
            Self(_mm256_setzero_pd())
        }
        #[inline]
        #[target_feature(enable = "avx2,fma")]
        unsafe fn load(p: *const f64) -> Self {
            // SAFETY: the caller's contract (4 readable values).
            Self(unsafe { _mm256_loadu_pd(p) })
        }
        #[inline]
        #[target_feature(enable = "avx2,fma")]
        unsafe fn fma(self, x: Self, y: Self) -> Self {
            Self(_mm256_fmadd_pd(x.0, y.0, self.0))
        }
        #[inline]
        #[target_feature(enable = "avx2,fma")]
        unsafe fn sum(self) -> f64 {
            let q = _mm_add_pd(
                _mm256_castpd256_pd128(self.0),
                _mm256_extractf128_pd::<1>(self.0),
            );
            _mm_cvtsd_f64(_mm_add_sd(q, _mm_unpackhi_pd(q, q)))
        }
    }

    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn run_avx512(p: &Args) {
        // SAFETY: the caller's contract.
        unsafe { driver::<F64x8, 4, 6>(p) }
    }

    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn run_avx2(p: &Args) {
        // SAFETY: the caller's contract.
        unsafe { driver::<F64x4, 3, 3>(p) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(rows: usize, k: usize, seed: usize) -> Vec<f64> {
        (0..rows * k)
            .map(|t| (((t * 7919 + seed * 104_729) % 1009) as f64) / 1009.0 - 0.5)
            .collect()
    }

    /// The naive triple loop, for every entry of `C` (upper included).
    fn naive(
        a: &[f64],
        lda: usize,
        b: &[f64],
        ldb: usize,
        n: usize,
        nb: usize,
        k: usize,
    ) -> Vec<f64> {
        let mut c = vec![0.0; n * nb];
        for i in 0..n {
            for j in 0..nb {
                c[i * nb + j] = (0..k).map(|t| a[i * lda + t] * b[j * ldb + t]).sum();
            }
        }
        c
    }

    #[test]
    fn lower_gram_matches_the_triple_loop_on_odd_shapes_for_every_isa() {
        for isa in Isa::available() {
            for &d in &[1usize, 7, 23, 64, 100, 257] {
                for &k in &[1usize, 3, 13, 64, 517, 1100] {
                    let lda = k + 3; // padded rows: the kernel must not read the padding
                    let mut a = data(d, lda, d + k);
                    for i in 0..d {
                        for t in k..lda {
                            a[i * lda + t] = f64::NAN;
                        }
                    }
                    let want = naive(&a, lda, &a, lda, d, d, k);
                    // Start from a known matrix: the lower triangle gets the
                    // product added, the strict upper triangle is untouched.
                    let mut g: Vec<f64> = (0..d * d).map(|t| t as f64).collect();
                    gemm_nt(isa, &a, lda, 0..d, &a, lda, d, k, &mut g, d, true);
                    for i in 0..d {
                        for j in 0..d {
                            let got = g[i * d + j];
                            let init = (i * d + j) as f64;
                            if j <= i {
                                let w = want[i * d + j] + init;
                                assert!(
                                    (got - w).abs() <= 1e-12 * (1.0 + w.abs() + k as f64),
                                    "{isa:?} d {d} k {k} ({i}, {j}): {got} vs {w}"
                                );
                            } else {
                                assert_eq!(got, init, "{isa:?} d {d} k {k} upper ({i}, {j})");
                            }
                        }
                    }
                    // Row bands add up to the whole, bit for bit.
                    let mut whole = vec![0.0; d * d];
                    gemm_nt(isa, &a, lda, 0..d, &a, lda, d, k, &mut whole, d, true);
                    let mut banded = vec![0.0; d * d];
                    for (band, c) in banded.chunks_mut(5 * d).enumerate() {
                        let lo = band * 5;
                        let hi = (lo + 5).min(d);
                        gemm_nt(isa, &a, lda, lo..hi, &a, lda, d, k, c, d, true);
                    }
                    assert_eq!(whole, banded, "{isa:?} d {d} k {k}: bands");
                }
            }
        }
    }

    #[test]
    fn rectangular_product_matches_the_triple_loop_for_every_isa() {
        for isa in Isa::available() {
            for &(n, nb, k) in &[
                (7usize, 2usize, 9usize),
                (64, 2, 256),
                (23, 31, 100),
                (3, 1, 1),
            ] {
                let a = data(n, k, 1);
                let b = data(nb, k, 2);
                let want = naive(&a, k, &b, k, n, nb, k);
                let mut c = vec![0.0; n * nb];
                gemm_nt(isa, &a, k, 0..n, &b, k, nb, k, &mut c, nb, false);
                for (g, w) in c.iter().zip(&want) {
                    assert!(
                        (g - w).abs() <= 1e-12 * (1.0 + k as f64),
                        "{isa:?}: {g} vs {w}"
                    );
                }
            }
        }
    }
}
