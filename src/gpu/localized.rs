//! The per-centroid statistics of the localized Maclaurin GP (ALGORITHMS.md
//! 8) on the GPU: for each centroid `c`, the features `Φ(x_i − c)` of its
//! neighbourhood (the training rows within the cutoff) and their Gram
//! `Φ_cᵀ Φ_c`, `Φ_cᵀ [y | 1]` are computed on the device, reduced in f64 on
//! the host, and solved on the CPU in f64 (7.2). The map's parameters and
//! the training inputs and targets are uploaded once per call; per centroid
//! only its coordinates and the index list of its neighbourhood go up, the
//! rows are gathered and centered on the device (`shaders/localized.wgsl`),
//! the features never leave it, and only the `D x D` sums come back.

use std::ops::Range;

use ndarray::{ArrayView1, ArrayView2};
use rayon::prelude::*;

use super::context::{self, Context, WORKGROUP};
use super::gram::accumulate;
use super::maclaurin::{check_supported, DeviceMaclaurin};
use super::map::DeviceMap;
use crate::error::{Error, Result};
use crate::gp::features::{FeatureGp, FeatureStats};
use crate::maclaurin::MaclaurinMap;
use crate::threads::Parallelism;

/// Centroids whose statistics are held at once before their solves.
const BATCH: usize = 32;

/// The feature-space GPs (7.2) of the centroids `which` (rows of
/// `centroids`), each on the training rows `neighbours(k)` of `x` (the
/// caller's cutoff), with the statistics `(ΦᵀΦ, Φᵀy, Φᵀ1, target sums,
/// rows used)` accumulated on the GPU and turned into a GP by the caller's
/// `fit` (which also handles a centroid without rows). Accuracy: the Gram
/// entries carry the bound of [`super::gram`] on the f32 features of
/// [`super::maclaurin_features`]; the solves are f64. `fit` runs in
/// parallel over each batch of centroids when `par` allows.
///
/// # Errors
/// As [`super::maclaurin_gram`], `neighbours` and `fit`.
#[allow(clippy::too_many_arguments)]
pub fn localized_gps(
    map: &MaclaurinMap,
    x: ArrayView2<f64>,
    y: ArrayView1<f64>,
    centroids: ArrayView2<f64>,
    which: &[usize],
    mut neighbours: impl FnMut(usize) -> Result<Vec<u32>>,
    fit: impl Fn(&FeatureStats, usize) -> Result<FeatureGp> + Sync,
    par: Parallelism,
) -> Result<Vec<FeatureGp>> {
    check_supported(map)?;
    let (n, d) = x.dim();
    Error::check_n_features(d, centroids.ncols())?;
    if y.len() != n {
        return Err(Error::ShapeMismatch {
            name: "length of y (the number of rows of X)",
            expected: n,
            got: y.len(),
        });
    }
    let ctx = context::get()?;
    let width = map.width();
    let cfg = map.config();
    let inv_l = 1.0 / cfg.length_scale;
    let origin = map.center().map_or_else(|| vec![0.0; d], <[f64]>::to_vec);
    // x~ = (x − c)/l = xs − cen with xs = (x − origin)/l and cen =
    // (c − origin)/l, each formed in f64 and rounded once: the training
    // inputs and targets go to the device once per call.
    let shifted = |row: ArrayView1<f64>| -> Vec<f32> {
        row.iter()
            .zip(&origin)
            .map(|(v, o)| ((v - o) * inv_l) as f32)
            .collect()
    };
    let xs: Vec<f32> = x.rows().into_iter().flat_map(shifted).collect();
    let ys: Vec<f32> = y.iter().map(|&v| v as f32).collect();
    let _session = ctx.session()?;
    let (x_buf, y_buf) = (ctx.storage(n * d), ctx.storage(n));
    ctx.upload(&x_buf, &xs);
    ctx.upload(&y_buf, &ys);
    let dev = DeviceMaclaurin::new(ctx, map, vec![0.0; d])?;
    let max_rows = dev.rows_per_chunk(ctx)?;
    let gather = Gather {
        x: &x_buf,
        y: &y_buf,
        d,
        sigma: cfg.kernel_variance.sqrt() as f32,
        h: -cfg.kernel.ln_prefactor(1.0) as f32,
    };
    let mut out = Vec::with_capacity(which.len());
    for batch in which.chunks(BATCH) {
        let mut stats = Vec::with_capacity(batch.len());
        for &k in batch {
            let c = centroids.row(k);
            let rows = neighbours(k)?;
            if rows.is_empty() {
                stats.push((FeatureStats::new(width), 0));
                continue;
            }
            let m = rows.len();
            let (cen, idx) = (ctx.storage(d), ctx.storage(m));
            ctx.upload(&cen, &shifted(c));
            ctx.upload(&idx, bytemuck::cast_slice(&rows));
            let chunk = max_rows.min(m);
            let mut slots: Vec<(wgpu::Buffer, wgpu::Buffer)> = Vec::new();
            let g = accumulate(
                ctx,
                m,
                width,
                Some(2),
                max_rows,
                |r, slot, enc, keep, a, b| {
                    while slots.len() <= slot {
                        slots.push((
                            ctx.storage(chunk * dev.in_dim()),
                            ctx.storage(chunk * dev.scratch_per_row()),
                        ));
                    }
                    let (staged, scratch) = &slots[slot];
                    gather.record(ctx, enc, keep, [&cen, &idx, staged, b], r.clone())?;
                    dev.record(ctx, enc, keep, staged, scratch, r.len(), a)
                },
            )?;
            let b = g
                .phi_t_y
                .ok_or_else(|| Error::Internal("the GPU Gram lost Φᵀy".into()))?;
            let yr = rows.iter().map(|&i| y[i as usize]);
            let s = FeatureStats {
                gram: g.phi_t_phi,
                phi_y: b.column(0).to_owned(),
                phi_sum: b.column(1).to_owned(),
                n: m as u64,
                y_shift: 0.0,
                y_sum: yr.clone().sum(),
                y_sq_sum: yr.map(|v| v * v).sum(),
            };
            stats.push((s, m));
        }
        let solve = |(s, used): &(FeatureStats, usize)| fit(s, *used);
        let gps: Result<Vec<FeatureGp>> = if par.is_parallel() {
            stats.par_iter().map(solve).collect()
        } else {
            stats.iter().map(solve).collect()
        };
        out.extend(gps?);
    }
    Ok(out)
}

/// The training inputs and targets on the device, and the kernel constants
/// `shaders/localized.wgsl` needs to stage a centroid's rows.
struct Gather<'a> {
    x: &'a wgpu::Buffer,
    y: &'a wgpu::Buffer,
    d: usize,
    sigma: f32,
    h: f32,
}

impl Gather<'_> {
    /// Records the staging of the neighbourhood rows `r` (positions in the
    /// index list `bufs[1]`, centroid `bufs[0]`) into `bufs[2]` (rows
    /// `[x̃ | σ g(x̃)]`) and their targets `[y | 1]` into `bufs[3]`.
    fn record(
        &self,
        ctx: &Context,
        encoder: &mut wgpu::CommandEncoder,
        keep: &mut Vec<wgpu::Buffer>,
        bufs: [&wgpu::Buffer; 4],
        r: Range<usize>,
    ) -> Result<()> {
        let params = ctx.uniform(&[
            r.len() as u32,
            self.d as u32,
            r.start as u32,
            self.sigma.to_bits(),
            self.h.to_bits(),
        ]);
        let pipe = &ctx.pipelines.local_gather;
        let bind = ctx.bind(
            pipe,
            &[self.x, self.y, bufs[0], bufs[1], bufs[2], bufs[3], &params],
        );
        ctx.dispatch(
            encoder,
            pipe,
            &bind,
            r.len().div_ceil(WORKGROUP as usize) as u64,
            1,
        )?;
        keep.push(params);
        Ok(())
    }
}
