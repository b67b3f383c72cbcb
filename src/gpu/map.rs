//! Feature maps that run on the device, and the chunked driver that streams
//! rows through them: each input chunk is uploaded once, the map's
//! dispatches are recorded into one command buffer, and the features either
//! come back ([`run`]) or stay on the device for the Gram accumulation
//! ([`super::features_gram`]).

use std::ops::Range;

use ndarray::{s, ArrayView2, ArrayViewMut2};

use super::context::{Context, Pending};
use crate::error::{Error, Result};
use crate::real::Real;

/// A fitted feature map whose parameters live on the device.
pub(super) trait DeviceMap {
    /// Floats per staged input row (see [`DeviceMap::stage`]).
    fn in_dim(&self) -> usize;
    /// Output columns.
    fn width(&self) -> usize;
    /// Scratch floats per row the map needs (0 for none).
    fn scratch_per_row(&self) -> usize;
    /// The rows of `x` in the f32 layout the shaders read (row-major,
    /// [`DeviceMap::in_dim`] floats per row).
    fn stage<T: Real>(&self, x: ArrayView2<T>) -> Vec<f32>;
    /// Records the features of the first `rows` rows of `x` into `out`
    /// (row-major, [`DeviceMap::width`] floats per row). Uniform buffers go
    /// to `keep` (they must outlive the submission).
    #[allow(clippy::too_many_arguments)]
    fn record(
        &self,
        ctx: &Context,
        encoder: &mut wgpu::CommandEncoder,
        keep: &mut Vec<wgpu::Buffer>,
        x: &wgpu::Buffer,
        scratch: &wgpu::Buffer,
        rows: usize,
        out: &wgpu::Buffer,
    ) -> Result<()>;

    /// Rows per chunk so that every per-chunk buffer fits `chunk_bytes`.
    fn rows_per_chunk(&self, ctx: &Context) -> Result<usize> {
        let per_row = self
            .in_dim()
            .max(self.width())
            .max(self.scratch_per_row())
            .max(1);
        let cap = (ctx.chunk_bytes() / 4) as usize;
        if per_row > ctx.max_binding_floats() {
            return Err(Error::Gpu(format!(
                "one row needs {per_row} floats, more than the device's largest binding"
            )));
        }
        Ok((cap / per_row).max(1))
    }
}

/// Converts `x` to f32 rows, each preceded by `lead` when given and scaled
/// by `scale` (the augmented rows `(√c, x/l)` of `docs/math/sketches.rst`,
/// "Target kernels").
pub(super) fn stage_rows<T: Real>(x: ArrayView2<T>, lead: Option<f64>, scale: f64) -> Vec<f32> {
    let d = x.ncols() + usize::from(lead.is_some());
    let mut v = Vec::with_capacity(x.nrows() * d);
    for row in x.rows() {
        if let Some(c) = lead {
            v.push(c as f32);
        }
        if scale == 1.0 {
            v.extend(row.iter().map(|a| a.to_f64_exact() as f32));
        } else {
            v.extend(row.iter().map(|a| (a.to_f64_exact() * scale) as f32));
        }
    }
    v
}

/// Streams the rows of `x` through `map` in chunks and writes the features
/// into `out` (`N x width`, any strides). The caller holds the session.
///
/// Two sets of chunk buffers alternate: chunk `k + 1` is converted, uploaded
/// and submitted while chunk `k` still runs, and chunk `k`'s features are
/// converted back while chunk `k + 1` runs.
pub(super) fn run<T: Real, M: DeviceMap>(
    ctx: &Context,
    map: &M,
    x: ArrayView2<T>,
    mut out: ArrayViewMut2<T>,
) -> Result<()> {
    let n = x.nrows();
    if n == 0 || map.width() == 0 {
        return Ok(());
    }
    let rows_per = map.rows_per_chunk(ctx)?.min(n);
    let slots: Vec<[wgpu::Buffer; 3]> = (0..if rows_per < n { 2 } else { 1 })
        .map(|_| {
            [
                ctx.storage(rows_per * map.in_dim()),
                ctx.storage(rows_per * map.scratch_per_row()),
                ctx.storage(rows_per * map.width()),
            ]
        })
        .collect();
    let mut write = |pending: Pending, r: Range<usize>| {
        let mut dst = out.slice_mut(s![r, ..]);
        ctx.finish(pending, |v| {
            dst.iter_mut()
                .zip(v)
                .for_each(|(o, &f)| *o = T::from_f64_lossy(f.into()));
        })
    };
    let mut previous: Option<(Pending, Range<usize>)> = None;
    let mut r0 = 0;
    for k in 0.. {
        if r0 >= n {
            break;
        }
        let [x_buf, s_buf, o_buf] = &slots[k % slots.len()];
        let r1 = (r0 + rows_per).min(n);
        let rows = r1 - r0;
        ctx.upload(x_buf, &map.stage(x.slice(s![r0..r1, ..])));
        let mut encoder = ctx.encoder();
        let mut keep = Vec::new();
        map.record(ctx, &mut encoder, &mut keep, x_buf, s_buf, rows, o_buf)?;
        let pending = ctx.submit_read(encoder, o_buf, rows * map.width())?;
        if let Some((p, r)) = previous.take() {
            write(p, r)?;
        }
        previous = Some((pending, r0..r1));
        r0 = r1;
    }
    if let Some((p, r)) = previous {
        write(p, r)?;
    }
    Ok(())
}
