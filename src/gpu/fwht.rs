//! Batched FWHT on the GPU (`docs/math/fwht.rst`); shader `shaders/fwht.wgsl`.

use ndarray::{s, ArrayView2, ArrayViewMut2};

use super::context::{self, Context, WORKGROUP};
use crate::error::{Error, Result};
use crate::fwht::check_power_of_two;
use crate::real::Real;

/// In-place transform `x <- x H` of every row (`H / sqrt(n)` when
/// `normalized`) on the GPU, in f32: the result equals the CPU's
/// [`crate::fwht::fwht_rows`] up to f32 rounding, at most
/// `log2(n) * 2^-24 * sum_j |x_j|` per entry for f32 input. The row length
/// must be a power of two. Rows are streamed through the device in chunks.
///
/// # Errors
/// [`Error::Gpu`] when no adapter is usable or the device fails;
/// [`Error::NotPowerOfTwo`] for a bad row length.
pub fn fwht_rows<T: Real>(mut x: ArrayViewMut2<T>, normalized: bool) -> Result<()> {
    let ctx = context::get()?;
    let n = x.ncols();
    check_power_of_two(n)?;
    for_chunks(ctx, x.nrows(), n, normalized, |rows, run| {
        let mut chunk = x.slice_mut(s![rows, ..]);
        let mut data: Vec<f32> = chunk.iter().map(|v| v.to_f64_exact() as f32).collect();
        run(&mut data)?;
        chunk
            .iter_mut()
            .zip(&data)
            .for_each(|(o, &v)| *o = T::from_f64_lossy(v.into()));
        Ok(())
    })
}

/// [`fwht_rows`] from `src` into `dst` (same shape).
///
/// # Errors
/// As [`fwht_rows`], plus [`Error::ShapeMismatch`] when the shapes differ.
pub fn fwht_rows_into<T: Real>(
    src: ArrayView2<T>,
    mut dst: ArrayViewMut2<T>,
    normalized: bool,
) -> Result<()> {
    let ctx = context::get()?;
    if src.dim() != dst.dim() {
        let (name, expected, got) = if src.nrows() != dst.nrows() {
            ("rows of `out`", src.nrows(), dst.nrows())
        } else {
            ("columns of `out`", src.ncols(), dst.ncols())
        };
        return Err(Error::ShapeMismatch {
            name,
            expected,
            got,
        });
    }
    let n = src.ncols();
    check_power_of_two(n)?;
    for_chunks(ctx, src.nrows(), n, normalized, |rows, run| {
        let mut data: Vec<f32> = src
            .slice(s![rows.clone(), ..])
            .iter()
            .map(|v| v.to_f64_exact() as f32)
            .collect();
        run(&mut data)?;
        dst.slice_mut(s![rows, ..])
            .iter_mut()
            .zip(&data)
            .for_each(|(o, &v)| *o = T::from_f64_lossy(v.into()));
        Ok(())
    })
}

type Runner<'a> = &'a mut dyn FnMut(&mut Vec<f32>) -> Result<()>;

/// Calls `chunk(rows, run)` for consecutive row ranges that fit the chunk
/// size; `run` transforms a chunk's f32 data in place on the device.
fn for_chunks(
    ctx: &Context,
    nrows: usize,
    n: usize,
    normalized: bool,
    mut chunk: impl FnMut(std::ops::Range<usize>, Runner<'_>) -> Result<()>,
) -> Result<()> {
    if nrows == 0 {
        return Ok(());
    }
    // As the other kernels: chunks of rows within the chunk size, and one
    // row a chunk when a row is longer (the chunk size is a preference, the
    // binding limit is the device's).
    let max_binding = ctx.max_binding_floats();
    if n > max_binding {
        return Err(Error::Gpu(format!(
            "a row of {n} floats exceeds the device's largest binding ({max_binding} floats)"
        )));
    }
    let rows_per = ((ctx.chunk_bytes() / 4) as usize / n).clamp(1, nrows);
    let _session = ctx.session()?;
    let buffer = ctx.storage(rows_per * n);
    let scale = if normalized {
        (1.0 / (n as f64).sqrt()) as f32
    } else {
        1.0
    };
    let mut run = |data: &mut Vec<f32>| transform(ctx, &buffer, data, n, scale);
    let mut r0 = 0;
    while r0 < nrows {
        let r1 = (r0 + rows_per).min(nrows);
        chunk(r0..r1, &mut run)?;
        r0 = r1;
    }
    Ok(())
}

/// Uploads `data` (whole rows of length `n`), transforms it on the device and
/// reads it back into `data`.
fn transform(
    ctx: &Context,
    buffer: &wgpu::Buffer,
    data: &mut [f32],
    n: usize,
    scale: f32,
) -> Result<()> {
    let total = data.len();
    ctx.upload(buffer, data);
    let mut encoder = ctx.encoder();
    // Uniform buffers must outlive the encoder's submission.
    let mut keep = Vec::new();
    record(ctx, &mut encoder, &mut keep, buffer, total, n, scale)?;
    ctx.read(encoder, buffer, total, |out| data.copy_from_slice(out))
}

/// Records the transform (times `scale`) of the rows of length `n` (a power
/// of two) of the first `total` floats of `buffer`; uniform buffers go to
/// `keep`.
pub(super) fn record(
    ctx: &Context,
    encoder: &mut wgpu::CommandEncoder,
    keep: &mut Vec<wgpu::Buffer>,
    buffer: &wgpu::Buffer,
    total: usize,
    n: usize,
    scale: f32,
) -> Result<()> {
    let block = ctx.fwht_block();
    let pipes = &ctx.pipelines;
    let params = ctx.uniform(&[total as u32, n.min(block) as u32, scale.to_bits(), 0]);
    let bind = ctx.bind(&pipes.fwht_block, &[buffer, &params]);
    ctx.dispatch(
        encoder,
        &pipes.fwht_block,
        &bind,
        total.div_ceil(block) as u64,
        1,
    )?;
    keep.push(params);
    let mut h = block;
    while h < n {
        let params = ctx.uniform(&[total as u32, h as u32, 0, 0]);
        let bind = ctx.bind(&pipes.fwht_stage, &[buffer, &params]);
        let groups = (total / 2).div_ceil(WORKGROUP as usize) as u64;
        ctx.dispatch(encoder, &pipes.fwht_stage, &bind, groups, 1)?;
        keep.push(params);
        h *= 2;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::context::tests::random;
    use ndarray::Array2;

    /// |gpu - cpu| <= 2 log2(n) 2^-24 sum_j |x_j| per row (each entry is a
    /// tree of log2(n) rounded additions in either order).
    fn assert_close(gpu: &Array2<f32>, cpu: &Array2<f32>, x: &Array2<f32>, scale: f64) {
        let n = x.ncols();
        let levels = (n.max(2) as f64).log2();
        for r in 0..x.nrows() {
            let l1: f64 = x.row(r).iter().map(|v| f64::from(v.abs())).sum();
            let tol = 2.0 * levels * f64::from(f32::EPSILON) / 2.0 * l1 * scale + 1e-30;
            for c in 0..n {
                let d = f64::from((gpu[(r, c)] - cpu[(r, c)]).abs());
                assert!(
                    d <= tol,
                    "row {r} col {c}: {} vs {}",
                    gpu[(r, c)],
                    cpu[(r, c)]
                );
            }
        }
    }

    #[test]
    fn matches_cpu_shared_and_multipass() {
        let block = context::tests::ctx().fwht_block();
        for &(rows, n) in &[(3, 1), (5, 8), (37, 256), (2, block), (3, block * 4)] {
            let x = random(rows, n, 1.0f32, n as u64);
            let mut cpu = x.clone();
            crate::fwht::fwht_rows(cpu.view_mut(), true, crate::Parallelism::Sequential).unwrap();
            let mut gpu = x.clone();
            let before = context::dispatch_count();
            fwht_rows(gpu.view_mut(), true).unwrap();
            assert!(context::dispatch_count() > before);
            assert_close(&gpu, &cpu, &x, 1.0 / (n as f64).sqrt());
        }
    }

    #[test]
    fn into_checks_shapes_and_power_of_two() {
        context::tests::ctx();
        let x = random(2, 6, 1.0f32, 1);
        let mut out = Array2::<f32>::zeros((2, 6));
        assert!(matches!(
            fwht_rows_into(x.view(), out.view_mut(), false),
            Err(Error::NotPowerOfTwo { len: 6, next: 8 })
        ));
        let mut bad = Array2::<f32>::zeros((3, 6));
        assert!(matches!(
            fwht_rows_into(x.view(), bad.view_mut(), false),
            Err(Error::ShapeMismatch { .. })
        ));
        let empty = Array2::<f64>::zeros((0, 8));
        let mut eout = Array2::<f64>::zeros((0, 8));
        fwht_rows_into(empty.view(), eout.view_mut(), false).unwrap();
    }
}
