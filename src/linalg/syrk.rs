//! The hand-written `f64` Gram kernel of the GP hot paths (`docs/math/gp.rst`,
//! "Feature-space GP"; `docs/math/localized.rst`, "Training" step 4): the lower
//! triangle of `G += AAᵀ` for a `d × K` matrix `A` (`A = Φᵀ`, feature `i` of
//! sample `k` at `A[i, k]`), together with `E Aᵀ` for a few extra rows `E`
//! (`r × K`, the `[y | 1]` of `Φᵀ[y | 1]`), in one pass.
//!
//! The packed outer-product structure of GotoBLAS / BLIS: `K` is cut into
//! blocks of [`KC`] samples; each block of `[A; E]` is packed into panels of
//! [`W`] = 8 rows stored sample by sample (`panel[k·8 + r] = A[8p + r, k]`,
//! zero padded), read from `A` feature-major (rows of samples, the localized
//! GP) or sample-major (`Φ` itself, the feature GP). A register tile of `C`
//! covers `R` rows (one broadcast each per sample) by up to `MV` panels of
//! columns (one vector load per lane group per sample): per sample `MV·8/N`
//! loads, `R` broadcasts and `R·MV·8/N` fused multiply-adds into
//! accumulators that are added to `C` once per block (AVX-512F: 8 rows × 3
//! `zmm`, 24 accumulators; AVX2 + FMA: 4 × 2 `ymm`; portable: 2 × 8
//! scalars). The broadcast row panel (`8·KC` values) stays in L1 while the
//! column panels of one [`NC`]-column block stay in L2. Tiles on the
//! diagonal are computed whole and only their lower part is added (masked
//! stores). Each entry of `C` is the same fixed sequence of operations for
//! any thread count (blocks in order, one tile per entry and block); it
//! depends on the instruction set (lane count, FMA).

use std::cell::Cell;

use rayon::prelude::*;

use crate::real::Real;
use crate::simd::{Portable, Simd, Vector, WithSimd};
use crate::threads::Parallelism;

pub use crate::simd::Isa;

/// Samples per packed block (a row panel of `8·KC` values stays in L1).
pub const KC: usize = 256;
/// Columns per block kept in L2 while the row panels stream past it.
pub const NC: usize = 240;
/// Rows per packed panel.
pub const W: usize = 8;

/// Where `A[i, k]` (`i < d`, `k < K`) lies in a slice.
#[derive(Clone, Copy, Debug)]
pub enum Layout {
    /// `A[i, k] = a[i·ld + k]`: rows of samples (`ld ≥ K`).
    FeatureMajor {
        /// Distance between features.
        ld: usize,
    },
    /// `A[i, k] = a[k·ld + i]`: the `K × d` row-major `Φ` (`ld ≥ d`).
    SampleMajor {
        /// Distance between samples.
        ld: usize,
    },
}

/// The lower triangle `C[i, j] += Σ_{k<K} A[i, k] A[j, k]` (`j ≤ i < d`,
/// `C[i, j] = c[i·ldc + j]`; the strict upper triangle is not touched) and
/// `ext[j·r + t] += Σ_k E[t, k] A[j, k]` (`j < d`, `t < r`) for the extra
/// rows `E[t, k] = extra[t·K + k]`, `r = extra.len() / K` (so `extra = [y;
/// 1]`, `r = 2` gives `ext[2j] += (Φᵀy)_j`, `ext[2j + 1] += (Φᵀ1)_j`).
/// `A` is read from `a` in `layout` (`f32` is widened exactly). With
/// [`Parallelism::Rayon`] the packing and the tiles are split over the
/// current rayon pool; the result is bit-identical for any thread count.
///
/// Panics if a slice is too short for the shapes (an internal contract:
/// every caller derives the shapes from its own buffers) or if `isa` is not
/// supported by this CPU.
#[allow(clippy::too_many_arguments)]
pub fn gram_lower<T: Real>(
    isa: Isa,
    a: &[T],
    layout: Layout,
    d: usize,
    k: usize,
    extra: &[f64],
    c: &mut [f64],
    ldc: usize,
    ext: &mut [f64],
    par: Parallelism,
) {
    if d == 0 || k == 0 {
        return;
    }
    let r = extra.len() / k;
    // `rows` rows of `len` entries `ld` apart fit in `have` entries; checked
    // arithmetic, so that no leading dimension wraps the bound around.
    let fits = |have: usize, rows: usize, ld: usize, len: usize| {
        ld >= len
            && (rows - 1)
                .checked_mul(ld)
                .and_then(|v| v.checked_add(len))
                .is_some_and(|need| have >= need)
    };
    match layout {
        Layout::FeatureMajor { ld } => assert!(fits(a.len(), d, ld, k), "gram_lower: A"),
        Layout::SampleMajor { ld } => assert!(fits(a.len(), k, ld, d), "gram_lower: A"),
    }
    assert!(extra.len() == r * k, "gram_lower: extra rows");
    assert!(fits(c.len(), d, ldc, d), "gram_lower: C");
    assert!(ext.len() >= d * r, "gram_lower: ext");
    assert!(isa.is_available(), "gram_lower: {isa:?}");
    let panels = (d + r).div_ceil(W);
    let cols = d.div_ceil(W);
    let parallel = par.is_parallel();
    // Row-panel ranges of about equal work (row panel p has min(p + 1,
    // cols) column panels); any split gives the same bits.
    let tasks = if parallel {
        4 * rayon::current_num_threads()
    } else {
        1
    };
    let work = |p: usize| (p + 1).min(cols);
    let total: usize = (0..panels).map(work).sum();
    let mut bands = Vec::with_capacity(tasks);
    let (mut lo, mut acc) = (0, 0);
    for p in 0..panels {
        acc += work(p);
        if acc * tasks >= total * (bands.len() + 1) || p + 1 == panels {
            bands.push(lo..p + 1);
            lo = p + 1;
        }
    }
    let out = Out {
        c: c.as_mut_ptr(),
        ldc,
        d,
        ext: ext.as_mut_ptr(),
        r,
    };
    let mut buf = PACK.with(Cell::take);
    let need = panels * W * KC.min(k);
    if buf.len() < need {
        buf.resize(need, 0.0);
    }
    for k0 in (0..k).step_by(KC) {
        let kc = KC.min(k - k0);
        let packed = &mut buf[..panels * W * kc];
        let src = Src {
            a,
            layout,
            d,
            k,
            extra,
            r,
        };
        let pack = |p0: usize, dst: &mut [f64]| {
            isa.dispatch(Pack {
                src: &src,
                dst,
                p0,
                k0,
                kc,
            })
        };
        if parallel {
            packed
                .par_chunks_mut(16 * W * kc)
                .enumerate()
                .for_each(|(q, dst)| pack(16 * q, dst));
        } else {
            pack(0, packed);
        }
        let packed = &buf[..panels * W * kc];
        let run = |rows: &std::ops::Range<usize>| {
            // SAFETY: `isa` is supported (checked above); the tiles of the
            // row panels `rows` write rows `8·rows` of `C` (and the `ext`
            // entries of the extra rows among them) only, disjoint from
            // every other band's, all within the checked shapes.
            unsafe { compute(isa, &out, packed, kc, cols, rows.clone()) }
        };
        if parallel {
            bands.par_iter().for_each(run);
        } else {
            bands.iter().for_each(run);
        }
    }
    PACK.with(|cell| cell.set(buf));
}

thread_local! {
    /// The packing buffer of [`gram_lower`], kept per thread across calls
    /// (taken out during a call, so a nested call gets a fresh one).
    static PACK: Cell<Vec<f64>> = const { Cell::new(Vec::new()) };
}

/// The source of the packed panels.
struct Src<'a, T> {
    a: &'a [T],
    layout: Layout,
    d: usize,
    k: usize,
    extra: &'a [f64],
    r: usize,
}

impl<T: Real> Src<'_, T> {
    /// Row `i` of `[A; E; 0]` at sample `k`.
    #[inline(always)]
    fn at(&self, i: usize, k: usize) -> f64 {
        if i < self.d {
            match self.layout {
                Layout::FeatureMajor { ld } => self.a[i * ld + k].to_f64_exact(),
                Layout::SampleMajor { ld } => self.a[k * ld + i].to_f64_exact(),
            }
        } else if i < self.d + self.r {
            self.extra[(i - self.d) * self.k + k]
        } else {
            0.0
        }
    }

    /// Packs the panels from `p0` on into `dst` (whole panels of `kc`
    /// samples from `k0`), with the instruction set `S`.
    #[inline(always)]
    fn pack<S: Tile>(&self, dst: &mut [f64], p0: usize, k0: usize, kc: usize) {
        let mut first = 0;
        if let Layout::SampleMajor { ld } = self.layout {
            // Sample by sample: one contiguous stretch of each row of `Φ`
            // for all the full panels of `dst` (a 64-byte read per panel
            // and sample, 8 KB apart, defeats the prefetcher).
            first = (self.d / W).saturating_sub(p0).min(dst.len() / (W * kc));
            if first > 0 {
                for kk in 0..kc {
                    let row = &self.a[(k0 + kk) * ld + p0 * W..][..first * W];
                    for (q, x) in row.chunks_exact(W).enumerate() {
                        let s = &mut dst[q * W * kc + kk * W..][..W];
                        for (v, x) in s.iter_mut().zip(x) {
                            *v = x.to_f64_exact();
                        }
                    }
                }
            }
        }
        for (q, panel) in dst.chunks_exact_mut(W * kc).enumerate().skip(first) {
            let i0 = (p0 + q) * W;
            if i0 + W > self.d {
                for (kk, s) in panel.chunks_exact_mut(W).enumerate() {
                    for (rr, v) in s.iter_mut().enumerate() {
                        *v = self.at(i0 + rr, k0 + kk);
                    }
                }
                continue;
            }
            match self.layout {
                // Full panels: packed above.
                Layout::SampleMajor { .. } => {}
                Layout::FeatureMajor { ld } => {
                    let rows = &self.a[i0 * ld + k0..(i0 + W - 1) * ld + k0 + kc];
                    S::pack_panel(rows, ld, kc, panel);
                }
            }
        }
    }
}

/// Packs `W` feature-major rows (`a[i·ld..][..kc]`, `i < W`) into one
/// panel (`panel[k·W + i]`) in `W × W` blocks: `W` contiguous reads per
/// row, then the transposed writes.
#[inline(always)]
fn pack_panel_by_blocks<T: Real>(a: &[T], ld: usize, kc: usize, panel: &mut [f64]) {
    let rows: [&[T]; W] = std::array::from_fn(|rr| &a[rr * ld..][..kc]);
    let full = kc / W * W;
    for kb in (0..full).step_by(W) {
        let blk: [[f64; W]; W] =
            std::array::from_fn(|rr| std::array::from_fn(|t| rows[rr][kb + t].to_f64_exact()));
        for t in 0..W {
            let s = &mut panel[(kb + t) * W..][..W];
            for (rr, v) in s.iter_mut().enumerate() {
                *v = blk[rr][t];
            }
        }
    }
    for kk in full..kc {
        for (rr, row) in rows.iter().enumerate() {
            panel[kk * W + rr] = row[kk].to_f64_exact();
        }
    }
}

/// The packing of panels from `p0` on (see [`Src::pack`]) as an operation
/// of [`crate::simd`].
struct Pack<'a, T> {
    src: &'a Src<'a, T>,
    dst: &'a mut [f64],
    p0: usize,
    k0: usize,
    kc: usize,
}

impl<S: Tile, T: Real> WithSimd<S> for Pack<'_, T> {
    type Output = ();
    #[inline(always)]
    fn with_simd(self, _: S) {
        self.src.pack::<S>(self.dst, self.p0, self.k0, self.kc)
    }
}

/// The output of one [`gram_lower`] call.
struct Out {
    c: *mut f64,
    ldc: usize,
    d: usize,
    ext: *mut f64,
    r: usize,
}

// SAFETY: tasks write disjoint rows through these pointers (see
// `gram_lower`).
unsafe impl Sync for Out {}

/// Runs the tiles of the row panels `rows` over one packed block (panics
/// if this CPU lacks `isa`).
///
/// # Safety
/// `packed` holds every row panel of the block; `out` covers the shapes
/// and no other task writes these rows.
unsafe fn compute(
    isa: Isa,
    out: &Out,
    packed: &[f64],
    kc: usize,
    cols: usize,
    rows: std::ops::Range<usize>,
) {
    let blk = Block {
        out,
        packed: packed.as_ptr(),
        kc,
        cols,
        rows,
    };
    isa.dispatch(blk)
}

/// One packed block and the row panels one task computes, as an operation
/// of [`crate::simd`]. Made only by [`compute`], whose caller guarantees
/// its contract.
struct Block<'a> {
    out: &'a Out,
    packed: *const f64,
    kc: usize,
    cols: usize,
    rows: std::ops::Range<usize>,
}

impl<S: Tile> WithSimd<S> for Block<'_> {
    type Output = ();
    #[inline(always)]
    fn with_simd(self, _: S) {
        // SAFETY: the contract of `compute` (see `Block`); the token proves
        // the instruction set.
        unsafe { drive::<S>(&self) }
    }
}

/// A register of `f64` lanes ([`Vector`]) that can add its first lanes to
/// memory: the write-back of a tile's accumulators.
///
/// # Safety
/// Implementations may use instructions that the caller must have checked.
unsafe trait AddTo: Vector<T = f64> {
    /// Adds the first `len ≤ LANES` lanes to `p[..len]`.
    unsafe fn add_to(self, p: *mut f64, len: usize);
}

// SAFETY: plain scalar code.
unsafe impl AddTo for f64 {
    #[inline(always)]
    unsafe fn add_to(self, p: *mut f64, len: usize) {
        if len > 0 {
            // SAFETY: the caller's contract.
            unsafe { *p += self }
        }
    }
}

/// The register tile of one instruction set: `R` rows (dividing [`W`]) by
/// up to `MV` column panels, and the packing of a full feature-major panel.
///
/// # Safety
/// `tile` and `pack_panel` may use the instruction set's instructions:
/// they are called under its token only.
unsafe trait Tile: Simd {
    /// Rows per tile.
    const R: usize;
    /// Column panels per tile.
    const MV: usize;
    /// Adds the tile of rows `i0..i0 + R` (broadcast from `bp`) by the
    /// `mv ≤ MV` column panels from `ap` (`ps` apart), columns from `j0`
    /// (`ij = [i0, j0, mv, live]`); only the first `live ≤ R` rows exist
    /// (a narrower tile may be used for them: the last panel's padding).
    unsafe fn tile(o: &Out, bp: *const f64, ap: *const f64, ps: usize, kc: usize, ij: [usize; 4]);
    /// Packs `W` feature-major rows (`a[i·ld..][..kc]`, `i < W`) into one
    /// panel (`panel[k·W + i]`, at least `W·kc` values).
    #[inline(always)]
    fn pack_panel<T: Real>(a: &[T], ld: usize, kc: usize, panel: &mut [f64]) {
        pack_panel_by_blocks(a, ld, kc, panel)
    }
}

// SAFETY: plain scalar code: 2 rows × 1 panel of scalars.
unsafe impl Tile for Portable {
    const R: usize = 2;
    const MV: usize = 1;
    #[inline(always)]
    unsafe fn tile(o: &Out, bp: *const f64, ap: *const f64, ps: usize, kc: usize, ij: [usize; 4]) {
        // SAFETY: the caller's contract.
        unsafe { tile::<f64, 2, 8>(o, bp, ap, ps, kc, ij) }
    }
}

/// The `R × NV`-vector tile at rows `i0..`, columns `j0..` over `kc`
/// samples (`ij = [i0, j0, ..]`), added to the output (lower part only).
#[inline(always)]
// Explicit indices: the register tile's loops, which keep the accumulators
// in registers (no spills).
#[allow(clippy::needless_range_loop)]
unsafe fn tile<V: AddTo, const R: usize, const NV: usize>(
    o: &Out,
    bp: *const f64,
    ap: *const f64,
    ps: usize,
    kc: usize,
    ij: [usize; 4],
) {
    let [i0, j0, ..] = ij;
    let vpp = W / V::LANES;
    // SAFETY (whole body): the caller guarantees `kc` samples of the row
    // panel at `bp` and of `NV / vpp` column panels from `ap`, and rows
    // `i0..i0 + R` / columns `j0..j0 + NV·N` within the padded shapes; only
    // entries inside `C` (and `ext`) are written.
    unsafe {
        let pa: [*const f64; NV] =
            std::array::from_fn(|v| ap.add((v / vpp) * ps + (v % vpp) * V::LANES));
        let mut acc = [[V::zero(); NV]; R];
        for kk in 0..kc {
            let mut x = [V::zero(); NV];
            for v in 0..NV {
                x[v] = V::load(pa[v].add(kk * W));
            }
            for r in 0..R {
                let b = V::splat(bp.add(kk * W + r));
                for v in 0..NV {
                    acc[r][v] = x[v].fmadd(b, acc[r][v]);
                }
            }
        }
        for r in 0..R {
            let i = i0 + r;
            if i < o.d {
                // Columns j ≤ i (< d).
                let row = o.c.add(i * o.ldc);
                for v in 0..NV {
                    let j = j0 + v * V::LANES;
                    let len = (i + 1).saturating_sub(j).min(V::LANES);
                    if len > 0 {
                        acc[r][v].add_to(row.add(j), len);
                    }
                }
            } else if i < o.d + o.r {
                let t = i - o.d;
                for v in 0..NV {
                    let mut lanes = [0.0; W];
                    acc[r][v].store(lanes.as_mut_ptr());
                    for (l, x) in lanes[..V::LANES].iter().enumerate() {
                        let j = j0 + v * V::LANES + l;
                        if j < o.d {
                            *o.ext.add(j * o.r + t) += x;
                        }
                    }
                }
            }
        }
    }
}

/// The loops over one block: `NC`-column blocks, then the task's row
/// panels, then their tiles left of (and on) the diagonal.
#[inline(always)]
unsafe fn drive<K: Tile>(b: &Block<'_>) {
    let ps = W * b.kc;
    let ncp = NC / W;
    // Rows of `[A; E]`: sub-blocks past them are skipped, a partly
    // padded one gets a narrower tile.
    let height = b.out.d + b.out.r;
    // SAFETY (whole body): every panel index is below the packed count and
    // every tile lies inside the padded shapes (see `tile`).
    unsafe {
        for jc in (0..b.cols).step_by(ncp) {
            let jend = (jc + ncp).min(b.cols);
            for p in b.rows.start.max(jc)..b.rows.end {
                let qend = jend.min(p + 1);
                let row_panel = b.packed.add(p * ps);
                for s in (0..W).step_by(K::R) {
                    let live = height.saturating_sub(p * W + s).min(K::R);
                    if live == 0 {
                        break;
                    }
                    let bp = row_panel.add(s);
                    let mut q = jc;
                    while q < qend {
                        let mv = K::MV.min(qend - q);
                        let ap = b.packed.add(q * ps);
                        K::tile(b.out, bp, ap, ps, b.kc, [p * W + s, q * W, mv, live]);
                        q += mv;
                    }
                }
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{pack_panel_by_blocks, tile, AddTo, Out, Real, Tile};
    use crate::real::cast_slice;
    use crate::simd::x86::{F64x4, F64x8};
    use crate::simd::{Avx2, Avx512};
    use std::arch::x86_64::*;

    // SAFETY: compiled for AVX-512; called under the `Avx512` token only.
    unsafe impl AddTo for F64x8 {
        isa_target! { Avx512
            #[inline]
            unsafe fn add_to(self, p: *mut f64, len: usize) {
                // SAFETY: the caller's contract (`len` writable values).
                unsafe {
                    if len >= 8 {
                        _mm512_storeu_pd(p, _mm512_add_pd(_mm512_loadu_pd(p), self.0));
                    } else {
                        let m: __mmask8 = (1u8 << len) - 1;
                        let old = _mm512_maskz_loadu_pd(m, p);
                        _mm512_mask_storeu_pd(p, m, _mm512_add_pd(old, self.0));
                    }
                }
            }
        }
    }

    // SAFETY: compiled for AVX2 + FMA; called under the `Avx2` token only.
    unsafe impl AddTo for F64x4 {
        isa_target! { Avx2
            #[inline]
            unsafe fn add_to(self, p: *mut f64, len: usize) {
                // SAFETY: the caller's contract (`len` writable values).
                unsafe {
                    if len >= 4 {
                        _mm256_storeu_pd(p, _mm256_add_pd(_mm256_loadu_pd(p), self.0));
                    } else {
                        let mut lanes = [0.0; 4];
                        _mm256_storeu_pd(lanes.as_mut_ptr(), self.0);
                        for (l, v) in lanes[..len].iter().enumerate() {
                            *p.add(l) += v;
                        }
                    }
                }
            }
        }
    }

    // SAFETY: the AVX-512 tiles and transposition, under the `Avx512` token
    // only: 8 rows × 3 panels (24 `zmm` accumulators).
    unsafe impl Tile for Avx512 {
        const R: usize = 8;
        const MV: usize = 3;
        #[inline(always)]
        unsafe fn tile(
            o: &Out,
            bp: *const f64,
            ap: *const f64,
            ps: usize,
            kc: usize,
            ij: [usize; 4],
        ) {
            // SAFETY: the caller's contract.
            unsafe {
                match (ij[3], ij[2]) {
                    (0..=2, 1) => tile::<F64x8, 2, 1>(o, bp, ap, ps, kc, ij),
                    (0..=2, 2) => tile::<F64x8, 2, 2>(o, bp, ap, ps, kc, ij),
                    (0..=2, _) => tile::<F64x8, 2, 3>(o, bp, ap, ps, kc, ij),
                    (3..=4, 1) => tile::<F64x8, 4, 1>(o, bp, ap, ps, kc, ij),
                    (3..=4, 2) => tile::<F64x8, 4, 2>(o, bp, ap, ps, kc, ij),
                    (3..=4, _) => tile::<F64x8, 4, 3>(o, bp, ap, ps, kc, ij),
                    (_, 1) => tile::<F64x8, 8, 1>(o, bp, ap, ps, kc, ij),
                    (_, 2) => tile::<F64x8, 8, 2>(o, bp, ap, ps, kc, ij),
                    _ => tile::<F64x8, 8, 3>(o, bp, ap, ps, kc, ij),
                }
            }
        }
        #[inline(always)]
        fn pack_panel<T: Real>(a: &[T], ld: usize, kc: usize, panel: &mut [f64]) {
            match cast_slice::<T, f64>(a) {
                Some(a) => {
                    assert!(a.len() >= 7 * ld + kc && panel.len() >= 8 * kc);
                    // SAFETY: under the `Avx512` token; `a` holds the 8
                    // rows and `panel` `8·kc` values (checked above).
                    unsafe { transpose_panel(a.as_ptr(), ld, kc, panel) }
                }
                None => pack_panel_by_blocks(a, ld, kc, panel),
            }
        }
    }

    // SAFETY: the AVX2 tiles, under the `Avx2` token only: 4 rows × 1 panel
    // (8 `ymm` accumulators).
    unsafe impl Tile for Avx2 {
        const R: usize = 4;
        const MV: usize = 1;
        #[inline(always)]
        unsafe fn tile(
            o: &Out,
            bp: *const f64,
            ap: *const f64,
            ps: usize,
            kc: usize,
            ij: [usize; 4],
        ) {
            // SAFETY: the caller's contract.
            unsafe {
                if ij[3] <= 2 {
                    tile::<F64x4, 2, 2>(o, bp, ap, ps, kc, ij)
                } else {
                    tile::<F64x4, 4, 2>(o, bp, ap, ps, kc, ij)
                }
            }
        }
    }

    isa_target! { Avx512
        /// Packs 8 feature-major rows (`a + i·ld`, `kc` samples each) into one
        /// panel (`dst[k·8 + i]`): 8 × 8 blocks transposed in registers (two
        /// rounds of 128-bit lane shuffles after the in-lane unpacks), the
        /// `kc mod 8` tail one value at a time.
        ///
        /// # Safety
        /// AVX-512F; `a` holds the 8 rows, `dst` at least `8·kc` values.
        #[inline]
        unsafe fn transpose_panel(a: *const f64, ld: usize, kc: usize, dst: &mut [f64]) {
            let o = dst.as_mut_ptr();
            let full = kc / 8 * 8;
            // SAFETY (whole body): the caller's contract.
            unsafe {
                for kb in (0..full).step_by(8) {
                    let r: [__m512d; 8] =
                        std::array::from_fn(|i| _mm512_loadu_pd(a.add(i * ld + kb)));
                    // t[2m] / t[2m + 1]: the even / odd samples of rows 2m, 2m + 1.
                    let t = [
                        _mm512_unpacklo_pd(r[0], r[1]),
                        _mm512_unpackhi_pd(r[0], r[1]),
                        _mm512_unpacklo_pd(r[2], r[3]),
                        _mm512_unpackhi_pd(r[2], r[3]),
                        _mm512_unpacklo_pd(r[4], r[5]),
                        _mm512_unpackhi_pd(r[4], r[5]),
                        _mm512_unpacklo_pd(r[6], r[7]),
                        _mm512_unpackhi_pd(r[6], r[7]),
                    ];
                    let u = [
                        _mm512_shuffle_f64x2::<0x88>(t[0], t[2]),
                        _mm512_shuffle_f64x2::<0xDD>(t[0], t[2]),
                        _mm512_shuffle_f64x2::<0x88>(t[1], t[3]),
                        _mm512_shuffle_f64x2::<0xDD>(t[1], t[3]),
                        _mm512_shuffle_f64x2::<0x88>(t[4], t[6]),
                        _mm512_shuffle_f64x2::<0xDD>(t[4], t[6]),
                        _mm512_shuffle_f64x2::<0x88>(t[5], t[7]),
                        _mm512_shuffle_f64x2::<0xDD>(t[5], t[7]),
                    ];
                    let p = o.add(kb * 8);
                    _mm512_storeu_pd(p, _mm512_shuffle_f64x2::<0x88>(u[0], u[4]));
                    _mm512_storeu_pd(p.add(8), _mm512_shuffle_f64x2::<0x88>(u[2], u[6]));
                    _mm512_storeu_pd(p.add(16), _mm512_shuffle_f64x2::<0x88>(u[1], u[5]));
                    _mm512_storeu_pd(p.add(24), _mm512_shuffle_f64x2::<0x88>(u[3], u[7]));
                    _mm512_storeu_pd(p.add(32), _mm512_shuffle_f64x2::<0xDD>(u[0], u[4]));
                    _mm512_storeu_pd(p.add(40), _mm512_shuffle_f64x2::<0xDD>(u[2], u[6]));
                    _mm512_storeu_pd(p.add(48), _mm512_shuffle_f64x2::<0xDD>(u[1], u[5]));
                    _mm512_storeu_pd(p.add(56), _mm512_shuffle_f64x2::<0xDD>(u[3], u[7]));
                }
                for k in full..kc {
                    for i in 0..8 {
                        *o.add(k * 8 + i) = *a.add(i * ld + k);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(len: usize, seed: usize) -> Vec<f64> {
        (0..len)
            .map(|t| (((t * 7919 + seed * 104_729) % 1009) as f64) / 1009.0 - 0.5)
            .collect()
    }

    /// `A` (`d × k`, `A[i][t]`) stored in `layout` with NaN padding that
    /// the kernel must not read.
    fn store(a: &[Vec<f64>], k: usize, layout: Layout) -> Vec<f64> {
        let d = a.len();
        match layout {
            Layout::FeatureMajor { ld } => {
                let mut s = vec![f64::NAN; d * ld];
                for i in 0..d {
                    s[i * ld..i * ld + k].copy_from_slice(&a[i]);
                }
                s
            }
            Layout::SampleMajor { ld } => {
                let mut s = vec![f64::NAN; k * ld];
                for t in 0..k {
                    for i in 0..d {
                        s[t * ld + i] = a[i][t];
                    }
                }
                s
            }
        }
    }

    /// Runs `gram_lower` from a known `C` and checks against the naive
    /// triple loop: lower part and `ext` added, strict upper untouched.
    /// Returns `(C, ext)` for bit comparisons.
    fn check<T: Real>(
        isa: Isa,
        src: &[T],
        layout: Layout,
        a: &[Vec<f64>],
        e: &[Vec<f64>],
        k: usize,
        par: Parallelism,
    ) -> (Vec<f64>, Vec<f64>) {
        let d = a.len();
        let r = e.len();
        let ldc = d + 2;
        let init = |t: usize| (t % 17) as f64;
        let mut c: Vec<f64> = (0..d * ldc).map(init).collect();
        let mut ext: Vec<f64> = (0..d * r).map(init).collect();
        let extra: Vec<f64> = e.concat();
        gram_lower(isa, src, layout, d, k, &extra, &mut c, ldc, &mut ext, par);
        let tol = |w: f64| 1e-12 * (1.0 + w.abs() + k as f64);
        for i in 0..d {
            for j in 0..ldc {
                let got = c[i * ldc + j];
                if j <= i {
                    let w = init(i * ldc + j) + (0..k).map(|t| a[i][t] * a[j][t]).sum::<f64>();
                    assert!(
                        (got - w).abs() <= tol(w),
                        "{isa:?} {layout:?} d {d} k {k} ({i}, {j}): {got} vs {w}"
                    );
                } else {
                    assert_eq!(
                        got,
                        init(i * ldc + j),
                        "{isa:?} d {d} k {k} upper ({i}, {j})"
                    );
                }
            }
            for (t, et) in e.iter().enumerate() {
                let got = ext[i * r + t];
                let w = init(i * r + t) + (0..k).map(|s| et[s] * a[i][s]).sum::<f64>();
                assert!(
                    (got - w).abs() <= tol(w),
                    "{isa:?} {layout:?} d {d} k {k} ext ({i}, {t}): {got} vs {w}"
                );
            }
        }
        (c, ext)
    }

    #[test]
    fn lower_gram_matches_the_triple_loop_on_odd_shapes_both_layouts_every_isa() {
        let shapes: &[(usize, &[usize])] = &[
            (1, &[1, 3, 300]),
            (7, &[1, 3, 13, 517]),
            (23, &[1, 3, 13, 300]),
            (64, &[3, 256, 517]),
            (100, &[1, 13, 300]),
            (257, &[3, 130]),
            (1030, &[3, 40]),
        ];
        for isa in Isa::available() {
            for &(d, ks) in shapes {
                for &k in ks {
                    let flat = data(d * k, d + k);
                    let a: Vec<Vec<f64>> = flat.chunks(k).map(<[f64]>::to_vec).collect();
                    let e = [data(k, 7), vec![1.0; k]];
                    for (r, layout) in [
                        (0, Layout::FeatureMajor { ld: k + 3 }),
                        (2, Layout::FeatureMajor { ld: k }),
                        (2, Layout::SampleMajor { ld: d + 5 }),
                        (1, Layout::SampleMajor { ld: d }),
                    ] {
                        let src = store(&a, k, layout);
                        check(isa, &src, layout, &a, &e[..r], k, Parallelism::Sequential);
                    }
                }
            }
        }
    }

    /// Leading dimensions whose bound `(rows − 1)·ld + len` wraps around
    /// `usize` used to pass the checks, and the kernel then wrote outside
    /// `c` (or read outside `a`): each is refused by a panic before any
    /// access.
    #[test]
    fn wrapping_leading_dimensions_are_refused() {
        let a = [1.0f64; 4];
        let cases: [(Layout, usize); 3] = [
            (Layout::SampleMajor { ld: 2 }, usize::MAX),
            (Layout::FeatureMajor { ld: usize::MAX }, 2),
            (Layout::SampleMajor { ld: usize::MAX }, 2),
        ];
        for (layout, ldc) in cases {
            let mut buf = [0.0f64; 8];
            let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let (_, c) = buf.split_at_mut(4);
                gram_lower(
                    Isa::Portable,
                    &a,
                    layout,
                    2,
                    2,
                    &[],
                    c,
                    ldc,
                    &mut [],
                    Parallelism::Sequential,
                );
            }));
            let message = run.expect_err("refused");
            let text = message
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| message.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            assert!(text.starts_with("gram_lower:"), "{layout:?} {ldc}: {text}");
            assert_eq!(buf, [0.0; 8], "{layout:?} {ldc}");
        }
    }

    #[test]
    fn threads_and_f32_give_the_same_bits() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        for isa in Isa::available() {
            for (d, k) in [(5usize, 700usize), (130, 300), (300, 20)] {
                let flat32: Vec<f32> = data(d * k, 3).iter().map(|&v| v as f32).collect();
                let a: Vec<Vec<f64>> = flat32
                    .chunks(k)
                    .map(|row| row.iter().map(|&v| f64::from(v)).collect())
                    .collect();
                let e = vec![data(k, 5), vec![1.0; k]];
                let layout = Layout::SampleMajor { ld: d };
                let src64 = store(&a, k, layout);
                let src32: Vec<f32> = src64.iter().map(|&v| v as f32).collect();
                let seq = check(isa, &src64, layout, &a, &e, k, Parallelism::Sequential);
                let two =
                    pool.install(|| check(isa, &src64, layout, &a, &e, k, Parallelism::Rayon));
                let wide =
                    pool.install(|| check(isa, &src32, layout, &a, &e, k, Parallelism::Rayon));
                assert_eq!(seq, two, "{isa:?} d {d} k {k}: 1 vs 2 threads");
                assert_eq!(seq, wide, "{isa:?} d {d} k {k}: f32 source");
                let fm = Layout::FeatureMajor { ld: k };
                let src_fm = store(&a, k, fm);
                let by_rows = check(isa, &src_fm, fm, &a, &e, k, Parallelism::Sequential);
                assert_eq!(seq, by_rows, "{isa:?} d {d} k {k}: layouts");
            }
        }
    }
}
