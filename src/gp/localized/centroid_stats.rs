//! The per-centroid sufficient statistics of the localized GP
//! (`docs/math/localized.rst`, "Training" step 4): for a centroid `c`, `ΦᵀΦ`,
//! `Φᵀy` and `Φᵀ1` of the features `Φ(x − c)` of the training rows within the
//! cutoff. The sketch factors are linear, `v_j(x − c) = v_j(x) − v_j(c)`, so
//! the training rows' factor projections are computed once at fit (the cache)
//! and each centroid's features are built from them in feature-major blocks
//! (several centroids per pass over the cache) and accumulated with the packed
//! Gram kernel of [`crate::linalg::syrk`]; without a cache (the explicit
//! `d = 1` map, or too many rows) each centroid maps its rows through the map.

use ndarray::{Array1, Array2, ArrayView2, Axis};
use rayon::prelude::*;

use super::LocalizedMaclaurinGp;
use crate::error::{Error, Result};
use crate::gp::cluster::sq_dists_t;
use crate::linalg::syrk::{gram_lower, Isa, Layout};
use crate::maclaurin::map::MaclaurinMap;
use crate::progress::Monitor;
use crate::stats::FeatureStats;
use crate::threads::Parallelism;
use crate::vexp;

/// Training rows mapped and accumulated at a time per centroid (fixed, so
/// results never depend on the thread count).
const CHUNK: usize = 1024;

/// Rows per feature block of [`LocalizedMaclaurinGp::centroid_stats`]: a
/// group's `G × D × B` features (about 2^16 entries, 512 KiB) stay in L2
/// while their Grams are accumulated, but never fewer than 256 rows: each
/// block reads and writes every centroid's `D × D` lower triangle once, and
/// at `D ≥ 128` that traffic outweighs the features' fit in L2. Depends
/// only on `D`, so results never depend on the thread count or the
/// grouping.
fn block_rows(width: usize) -> usize {
    ((1usize << 16) / (width.max(1) * group_size(width))).clamp(256, 1024)
}

/// Centroids that share one pass over the factor-projection cache (see
/// [`LocalizedMaclaurinGp::group_stats`]): the cache (`N × Σ_n n·D_n`
/// entries) is read from L3 or memory, once per group instead of once per
/// centroid, which otherwise costs as much as the Gram itself.
pub(super) fn group_size(width: usize) -> usize {
    (256 / width.max(1)).clamp(4, 8)
}

/// Largest cache of training-row factor projections, in `f64` entries
/// (256 MiB); beyond it every centroid maps its rows from scratch.
const PROJECTION_CACHE_LIMIT: usize = 1 << 25;

impl LocalizedMaclaurinGp {
    /// The sufficient statistics at centroid `c` (`docs/math/localized.rst`,
    /// "Training" step 4): `ΦᵀΦ`, `Φᵀy`, `Φᵀ1` and the target sums (shift 0;
    /// `y` is already centered by the training mean) of `Φ = Φ(X_c − c)`, `X_c`
    /// the training rows within the cutoff, and the number of those rows.
    /// Sequential (the caller parallelizes over centroids) and deterministic:
    /// fixed row blocks of `block_rows` rows, each block's features built
    /// feature-major from the cached factor projections and its lower Gram and
    /// `Φᵀ[y | 1]` accumulated in one pass of the packed kernel of
    /// [`crate::linalg::syrk`]. This is the one per-centroid computation;
    /// everything after it is `D × D` work. [`Self::group_stats`] computes the
    /// same for several centroids in one pass over the cache. `monitor` is
    /// checked before every row block.
    pub(crate) fn centroid_stats(
        &self,
        c: &[f64],
        scratch: &mut CentroidScratch,
        monitor: &Monitor,
    ) -> Result<(FeatureStats, usize)> {
        let n = self.x.nrows();
        self.distances(c, scratch, 0)?;
        let cutoff = self.cutoff_sq;
        let CentroidScratch { dd, rows, .. } = &mut *scratch;
        rows.clear();
        rows.extend((0..n).filter(|&i| dd[i] < cutoff));
        let used = rows.len();
        if used == 0 {
            return Ok((FeatureStats::new(self.map.width()), 0));
        }
        let stats = match &self.projections {
            Some(proj) => self
                .stats_from_projections(proj, &[c], scratch, monitor)?
                .pop()
                .ok_or_else(|| Error::Internal("one centroid, one result".into()))?,
            None => {
                let mut stats = FeatureStats::new(self.map.width());
                self.stats_by_transform(c, &scratch.rows, &mut stats, monitor)?;
                stats
            }
        };
        Ok((stats, used))
    }

    /// [`Self::centroid_stats`] of every centroid in `cs`. When every
    /// training row is within the cutoff of every one of them (the usual
    /// case when the data span a few length scales) they share one pass
    /// over the factor-projection cache (each cached block is read once for
    /// the group instead of once per centroid); the results are the same as
    /// one by one. `monitor` is checked before every row block.
    pub(crate) fn group_stats(
        &self,
        cs: &[&[f64]],
        scratch: &mut CentroidScratch,
        monitor: &Monitor,
    ) -> Result<Vec<(FeatureStats, usize)>> {
        let n = self.x.nrows();
        let mut shared = cs.len() > 1 && n > 0 && self.projections.is_some();
        for (q, c) in cs.iter().enumerate() {
            if !shared {
                break;
            }
            self.distances(c, scratch, q)?;
            let cutoff = self.cutoff_sq;
            shared = scratch.dd[q * n..(q + 1) * n].iter().all(|&v| v < cutoff);
        }
        match (&self.projections, shared) {
            (Some(proj), true) => {
                scratch.rows.clear();
                scratch.rows.extend(0..n);
                Ok(self
                    .stats_from_projections(proj, cs, scratch, monitor)?
                    .into_iter()
                    .map(|s| (s, n))
                    .collect())
            }
            _ => cs
                .iter()
                .map(|c| self.centroid_stats(c, scratch, monitor))
                .collect(),
        }
    }

    /// Squared distances of every training row to `c` into
    /// `scratch.dd[q·N..(q + 1)·N]`.
    pub(super) fn distances(
        &self,
        c: &[f64],
        scratch: &mut CentroidScratch,
        q: usize,
    ) -> Result<()> {
        let (n, d) = self.x.dim();
        Error::check_n_features(d, c.len())?;
        let xt = self
            .xt
            .as_slice()
            .ok_or_else(|| Error::Internal("Xᵀ is contiguous".into()))?;
        if scratch.dd.len() < (q + 1) * n {
            scratch.dd.resize((q + 1) * n, 0.0);
        }
        sq_dists_t(xt, n, c, &mut scratch.dd[q * n..(q + 1) * n]);
        Ok(())
    }

    /// The statistics of the centroids `cs` over the rows `scratch.rows`
    /// (every row when there are several centroids) from the cached factor
    /// projections (`v_j(x − c) = v_j(x) − v_j(c)`, see
    /// [`crate::sketch::PolySketch::factor_projections_into`]), in the layout
    /// of `docs/math/maclaurin.rst`, "Assembly":
    /// `σ g · [1 | √a_n φ_n((x − c)/l) … | (0)]`, every feature multiplied in
    /// the order of [`crate::sketch::PolySketch::combine_factors`] (the factor
    /// scale `1/l` is applied to the cached and the centroid's projections
    /// instead of their difference, so the features agree with the map's to
    /// rounding). `scratch.dd` holds the squared distances to each centroid
    /// (`|cs| × N`).
    fn stats_from_projections(
        &self,
        proj: &[Array2<f64>],
        cs: &[&[f64]],
        scratch: &mut CentroidScratch,
        monitor: &Monitor,
    ) -> Result<Vec<FeatureStats>> {
        let n = self.x.nrows();
        let width = self.map.width();
        let inv_l = 1.0 / self.config.map.length_scale;
        let sigma = self.config.map.kernel_variance.sqrt();
        let mut shifts = Vec::with_capacity(cs.len());
        for c in cs {
            let view = ArrayView2::from_shape((1, c.len()), c)
                .map_err(|e| Error::Internal(e.to_string()))?;
            let mut sc = project_rows(&self.map, view, Parallelism::Sequential, monitor)?
                .ok_or_else(|| Error::Internal("no factor projections of the centroid".into()))?;
            // Scaled by 1/l, as the cache.
            for p in &mut sc {
                p.mapv_inplace(|v| v * inv_l);
            }
            shifts.push(sc);
        }
        let mut blocks = Vec::with_capacity(proj.len());
        for (k, ((scale, sk), p)) in self.map.sketch_blocks().zip(proj).enumerate() {
            let p = p
                .as_slice()
                .ok_or_else(|| Error::Internal("projection caches are contiguous".into()))?;
            let shift = shifts
                .iter()
                .map(|s| s[k].as_slice())
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| Error::Internal("centroid projections are contiguous".into()))?;
            blocks.push(FactorBlock {
                proj: p,
                n,
                shift,
                width: sk.width(),
                n_features: sk.n_features(),
                degree: sk.degree() as usize,
                complex: sk.is_complex(),
                init: 1.0 / (sk.n_features() as f64).sqrt(),
                scale,
            });
        }
        let b = block_rows(width);
        let g_count = cs.len();
        let isa = Isa::detect();
        let CentroidScratch {
            dd,
            rows,
            phit,
            g,
            gs,
            rhs,
            tmp,
            out,
        } = scratch;
        let used = rows.len();
        let contiguous = used == n;
        phit.resize(g_count * width * b, 0.0);
        g.resize(g_count * b, 0.0);
        gs.resize(g_count * b, 0.0);
        rhs.resize(2 * b, 0.0);
        let max_degree = blocks.iter().map(|k| k.degree).max().unwrap_or(0);
        tmp.resize(max_degree.max(2) * b, 0.0);
        out.resize(2 * width, 0.0);
        let mut all: Vec<FeatureStats> = (0..g_count).map(|_| FeatureStats::new(width)).collect();
        let (mut y_sum, mut y_sq_sum) = (0.0, 0.0);
        for k0 in (0..used).step_by(b) {
            monitor.check()?;
            let m = b.min(used - k0);
            let idx = &rows[k0..k0 + m];
            let (ys, ones) = rhs[..2 * m].split_at_mut(m);
            for (k, &i) in idx.iter().enumerate() {
                let yi = self.y[i];
                ys[k] = yi;
                ones[k] = 1.0;
                y_sum += yi;
                y_sq_sum += yi * yi;
            }
            for q in 0..g_count {
                let dq = &dd[q * n..(q + 1) * n];
                let gq = &mut g[q * m..(q + 1) * m];
                if contiguous {
                    gq.copy_from_slice(&dq[k0..k0 + m]);
                } else {
                    for (gk, &i) in gq.iter_mut().zip(idx) {
                        *gk = dq[i];
                    }
                }
                gaussian_weights(gq, sigma, inv_l);
            }
            let phit = &mut phit[..g_count * width * m];
            let src = if contiguous {
                Rows::Contiguous(k0)
            } else {
                Rows::Gather(idx)
            };
            fill_features(
                &blocks,
                src,
                g_count,
                &g[..g_count * m],
                phit,
                tmp,
                &mut gs[..g_count * m],
            );
            // `rhs` holds `y` then `1` over the block: a 2 × m row-major B
            // (for faer: an m × 2 column-major matrix).
            let rhs_m = &rhs[..2 * m];
            for (stats, ph) in all.iter_mut().zip(phit.chunks_exact(width * m)) {
                // Lower triangle of the block's Gram, then Φᵀ[y | 1].
                let gram = stats
                    .gram
                    .as_slice_mut()
                    .ok_or_else(|| Error::Internal("standard-layout Gram".into()))?;
                out.fill(0.0);
                let fm = Layout::FeatureMajor { ld: m };
                gram_lower(
                    isa,
                    ph,
                    fm,
                    width,
                    m,
                    rhs_m,
                    gram,
                    width,
                    out,
                    Parallelism::Sequential,
                );
                for k in 0..width {
                    stats.phi_y[k] += out[2 * k];
                    stats.phi_sum[k] += out[2 * k + 1];
                }
            }
        }
        for stats in &mut all {
            stats.n = used as u64;
            stats.y_shift = 0.0;
            stats.y_sum = y_sum;
            stats.y_sq_sum = y_sq_sum;
        }
        Ok(all)
    }

    /// [`Self::centroid_stats`] through the map itself (the explicit `d = 1`
    /// map, or no projection cache), in fixed row chunks, checking `monitor`
    /// before each.
    pub(super) fn stats_by_transform(
        &self,
        c: &[f64],
        rows: &[usize],
        stats: &mut FeatureStats,
        monitor: &Monitor,
    ) -> Result<()> {
        let d = self.x.ncols();
        let width = self.map.width();
        let len = CHUNK.min(rows.len());
        let mut xs = Array2::<f64>::zeros((len, d));
        let mut phi = Array2::<f64>::zeros((len, width));
        let mut ys = Array1::<f64>::zeros(len);
        for chunk in rows.chunks(CHUNK) {
            monitor.check()?;
            let m = chunk.len();
            for (k, &i) in chunk.iter().enumerate() {
                ys[k] = self.y[i];
                xs.row_mut(k).assign(&self.x.row(i));
            }
            let mut pv = phi.slice_mut(ndarray::s![..m, ..]);
            self.map.transform_centered_into(
                xs.slice(ndarray::s![..m, ..]),
                c,
                pv.view_mut(),
                Parallelism::Sequential,
            )?;
            stats.accumulate(
                pv.view(),
                ys.slice(ndarray::s![..m]),
                Parallelism::Sequential,
            )?;
        }
        Ok(())
    }
}

/// Reusable buffers of [`LocalizedMaclaurinGp::centroid_stats`] (one per
/// worker thread, so building a centroid allocates nothing large).
#[derive(Debug, Default)]
pub(crate) struct CentroidScratch {
    /// Squared distances of the training rows to the centroids.
    pub(super) dd: Vec<f64>,
    rows: Vec<usize>,
    phit: Vec<f64>,
    g: Vec<f64>,
    gs: Vec<f64>,
    rhs: Vec<f64>,
    tmp: Vec<f64>,
    out: Vec<f64>,
}

/// One sketched block's cached factor projections (`degree·width × N`,
/// row-major) and those of each centroid of a group (`degree·width` each).
struct FactorBlock<'a> {
    proj: &'a [f64],
    /// `N`, the length of a cached factor row.
    n: usize,
    shift: Vec<&'a [f64]>,
    width: usize,
    n_features: usize,
    degree: usize,
    complex: bool,
    /// `1/√D_n`, the sketch's normalization.
    init: f64,
    /// `√a_n`, the block scale.
    scale: f64,
}

/// Which training rows a feature block covers.
#[derive(Clone, Copy)]
enum Rows<'a> {
    /// Rows `k0..k0 + m` (every row is used).
    Contiguous(usize),
    /// The listed rows.
    Gather(&'a [usize]),
}

/// Factor row `row` of `proj` (`· × n`) at the block's rows: a slice of the
/// cache, or gathered into `tmp`.
#[inline(always)]
fn factor_row<'a>(
    proj: &'a [f64],
    row: usize,
    n: usize,
    rows: Rows<'_>,
    m: usize,
    tmp: &'a mut [f64],
) -> &'a [f64] {
    match rows {
        Rows::Contiguous(k0) => &proj[row * n + k0..row * n + k0 + m],
        Rows::Gather(idx) => {
            let src = &proj[row * n..(row + 1) * n];
            for (t, &i) in tmp[..m].iter_mut().zip(idx) {
                *t = src[i];
            }
            &tmp[..m]
        }
    }
}

/// `w ← σ exp(−w/(2l²))` in place (squared distances to Gaussian weights,
/// `docs/math/localized.rst`, "Training"), with the vector `exp` of
/// [`crate::vexp`].
#[inline(always)]
fn gaussian_weights_body(w: &mut [f64], sigma: f64, inv_l: f64) {
    for v in w.iter_mut() {
        *v = sigma * vexp::exp(-0.5 * *v * inv_l * inv_l);
    }
}

widest_simd! {
    /// [`gaussian_weights_body`] with the widest SIMD the CPU offers.
    fn gaussian_weights(w: &mut [f64], sigma: f64, inv_l: f64) = gaussian_weights_body;
}

/// The `degree` factor rows of one feature over a block of rows: factor
/// `j` at block row `k` is `src[first + j·step + k]`.
struct Factors<'a> {
    src: &'a [f64],
    first: usize,
    step: usize,
    degree: usize,
}

/// Rows per register tile of [`feature_row`] (four AVX-512 registers, so
/// four independent multiply chains).
const FEATURE_TILE: usize = 32;

/// One real feature over a block of rows, for one centroid:
/// `out_k = (init · Π_j (v_jk − s_j)) · gs_k` with `s_j = shift[j·w]` (the
/// cached and the centroid's projections, both already scaled by `1/l`)
/// and `gs_k = g_k · scale`, multiplied in this order (that of
/// [`crate::sketch::PolySketch::combine_factors`]), the product kept in
/// registers over a tile of rows.
#[inline(always)]
fn feature_row(
    f: &Factors<'_>,
    shift: &[f64],
    w: usize,
    b: &FactorBlock<'_>,
    gs: &[f64],
    out: &mut [f64],
) {
    const L: usize = FEATURE_TILE;
    let m = out.len();
    let tiles = m / L * L;
    for i in (0..tiles).step_by(L) {
        let mut acc = [b.init; L];
        for j in 0..f.degree {
            let s = shift[j * w];
            let v = &f.src[f.first + j * f.step + i..f.first + j * f.step + i + L];
            for (a, &x) in acc.iter_mut().zip(v) {
                *a *= x - s;
            }
        }
        for ((o, a), &gk) in out[i..i + L].iter_mut().zip(acc).zip(&gs[i..i + L]) {
            *o = a * gk;
        }
    }
    for k in tiles..m {
        let mut a = b.init;
        for j in 0..f.degree {
            a *= f.src[f.first + j * f.step + k] - shift[j * w];
        }
        out[k] = a * gs[k];
    }
}

/// Fills the feature-major blocks `phit` (`G` blocks of `D × m`; `g` holds
/// `G` rows of `m` weights `σ e^{−‖x − c_q‖²/2l²}`): row 0 is `g_q`, then
/// every sketched block's features `g_q·√a_n·(1/√D_n)·Π_j (v_j − s_qj)`
/// (`v`, `s` the cached and the centroid's projections scaled by `1/l`;
/// complex products when complex), the remaining rows 0. A real feature is
/// built in registers by [`feature_row`] (one store per entry; its factor
/// rows, when the block's rows are contiguous, are prefetched from the
/// cache while the previous feature is built, then read from L1 by every
/// centroid of the group);
/// a complex one in passes over its two rows, each factor row read once for
/// the whole group. Per feature the products are those of
/// [`crate::sketch::PolySketch::combine_factors`] in the same order. `gs`
/// is scratch for `g_q·√a_n`.
#[inline(always)]
fn fill_body(
    blocks: &[FactorBlock<'_>],
    rows: Rows<'_>,
    groups: usize,
    g: &[f64],
    phit: &mut [f64],
    tmp: &mut [f64],
    gs: &mut [f64],
) {
    let m = g.len() / groups;
    let width = phit.len() / (groups * m).max(1);
    for (ph, gq) in phit.chunks_exact_mut(width * m).zip(g.chunks_exact(m)) {
        ph[..m].copy_from_slice(gq);
    }
    let mut col = 1;
    for b in blocks {
        let (w, n) = (b.width, b.n);
        // `g · √a_n`, once per block and centroid.
        for (o, &gk) in gs.iter_mut().zip(g) {
            *o = gk * b.scale;
        }
        if b.complex {
            let nf = b.n_features;
            for r in 0..nf {
                for ph in phit.chunks_exact_mut(width * m) {
                    ph[(col + r) * m..(col + r + 1) * m].fill(b.init);
                    ph[(col + nf + r) * m..(col + nf + r + 1) * m].fill(0.0);
                }
                for j in 0..b.degree {
                    let (tr, ti) = tmp.split_at_mut(m);
                    let vr = factor_row(b.proj, j * w + r, n, rows, m, tr);
                    let vi = factor_row(b.proj, j * w + nf + r, n, rows, m, ti);
                    for (ph, s) in phit.chunks_exact_mut(width * m).zip(&b.shift) {
                        let (sr, si) = (s[j * w + r], s[j * w + nf + r]);
                        let (lo, hi) = ph.split_at_mut((col + nf + r) * m);
                        let re = &mut lo[(col + r) * m..(col + r + 1) * m];
                        let im = &mut hi[..m];
                        for (((re, im), a), c) in re.iter_mut().zip(im.iter_mut()).zip(vr).zip(vi) {
                            let u = a - sr;
                            let q = c - si;
                            let (x, y) = (*re, *im);
                            *re = x * u - y * q;
                            *im = x * q + y * u;
                        }
                    }
                }
                for (ph, gq) in phit.chunks_exact_mut(width * m).zip(gs.chunks_exact(m)) {
                    for row in [col + r, col + nf + r] {
                        for (o, gk) in ph[row * m..(row + 1) * m].iter_mut().zip(gq) {
                            *o *= gk;
                        }
                    }
                }
            }
        } else {
            for r in 0..w {
                let row = col + r;
                // Factor `j` of feature `r` at block row `k` is
                // `src[first + j·step + k]`: in the cache, or gathered.
                let (src, first, step): (&[f64], usize, usize) = match rows {
                    Rows::Contiguous(k0) => {
                        let (first, step) = (r * n + k0, w * n);
                        // The next feature's factor rows (`n` further on),
                        // while this one's are multiplied out for the group.
                        if r + 1 < w {
                            for j in 0..b.degree {
                                let at = first + n + j * step;
                                crate::simd::prefetch(&b.proj[at..at + m]);
                            }
                        }
                        (b.proj, first, step)
                    }
                    Rows::Gather(idx) => {
                        for (j, t) in tmp.chunks_exact_mut(m).take(b.degree).enumerate() {
                            let src = &b.proj[(j * w + r) * n..(j * w + r + 1) * n];
                            for (t, &i) in t.iter_mut().zip(idx) {
                                *t = src[i];
                            }
                        }
                        (&tmp[..], 0, m)
                    }
                };
                let factors = Factors {
                    src,
                    first,
                    step,
                    degree: b.degree,
                };
                for ((ph, s), gq) in phit
                    .chunks_exact_mut(width * m)
                    .zip(&b.shift)
                    .zip(gs.chunks_exact(m))
                {
                    let shift = &s[r..];
                    let out = &mut ph[row * m..(row + 1) * m];
                    feature_row(&factors, shift, w, b, gq, out);
                }
            }
        }
        col += w;
    }
    for ph in phit.chunks_exact_mut(width * m) {
        ph[col * m..].fill(0.0);
    }
}

widest_simd! {
    /// [`fill_body`] with the widest SIMD the CPU offers (no FMA contraction,
    /// so the result does not depend on the SIMD level).
    fn fill_features(
        blocks: &[FactorBlock<'_>],
        rows: Rows<'_>,
        groups: usize,
        g: &[f64],
        phit: &mut [f64],
        tmp: &mut [f64],
        gs: &mut [f64],
    ) = fill_body;
}

/// The factor projections of every row of `x` for every sketched block of
/// the map (one `n × degree·width` matrix per block), or `None` for the
/// explicit `d = 1` map and when they would exceed
/// [`PROJECTION_CACHE_LIMIT`]. Parallel over fixed row chunks, each one
/// checking `monitor` first.
fn project_rows(
    map: &MaclaurinMap,
    x: ArrayView2<'_, f64>,
    par: Parallelism,
    monitor: &Monitor,
) -> Result<Option<Vec<Array2<f64>>>> {
    let cols: usize = map
        .sketch_blocks()
        .map(|(_, sk)| sk.degree() as usize * sk.width())
        .sum();
    if map.is_explicit_1d() || x.nrows().saturating_mul(cols) > PROJECTION_CACHE_LIMIT {
        return Ok(None);
    }
    let mut out = Vec::new();
    for (_, sk) in map.sketch_blocks() {
        let mut p = Array2::<f64>::zeros((x.nrows(), sk.degree() as usize * sk.width()));
        let pairs: Vec<_> = x
            .axis_chunks_iter(Axis(0), CHUNK)
            .zip(p.axis_chunks_iter_mut(Axis(0), CHUNK))
            .collect();
        let project = |(xc, pc)| {
            monitor.check()?;
            sk.factor_projections_into(xc, pc)
        };
        if par.is_parallel() {
            pairs.into_par_iter().try_for_each(project)?;
        } else {
            pairs.into_iter().try_for_each(project)?;
        }
        out.push(p);
    }
    Ok(Some(out))
}

/// [`project_rows`] transposed and multiplied by `scale` (the factor scale
/// `1/l`, applied once here instead of per centroid): one
/// `degree·width × n` matrix per block (row `j·width + r` holds factor `j`,
/// feature `r` of every row of `x`), so the per-centroid feature blocks are
/// built with unit stride over rows.
pub(super) fn project_rows_t(
    map: &MaclaurinMap,
    x: ArrayView2<'_, f64>,
    scale: f64,
    par: Parallelism,
    monitor: &Monitor,
) -> Result<Option<Vec<Array2<f64>>>> {
    Ok(project_rows(map, x, par, monitor)?.map(|blocks| {
        blocks
            .into_iter()
            .map(|p| {
                let mut q = p.t().as_standard_layout().into_owned();
                q.mapv_inplace(|v| v * scale);
                q
            })
            .collect()
    }))
}
