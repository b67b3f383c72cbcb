//! Gram accumulation `Φᵀ Φ`, `Φᵀ y` on the GPU; shaders `shaders/gram.wgsl`
//! and `shaders/reduce.wgsl`.

use ndarray::{s, Array2, ArrayView2};

use super::context::{self, Context, WORKGROUP};
use crate::error::{Error, Result};
use crate::real::Real;

/// Rows per split: each workgroup sums at most this many rows of one output
/// tile (16 x 16 x 16 of the blocked summation in `gram.wgsl`).
const SPAN: usize = 4096;
/// At most this many splits per chunk, so the pairwise tree adds at most 13
/// roundings (the error bound of [`gram`] counts on it).
const MAX_SPLITS: usize = 1 << 13;
/// Output tile edge of `gram.wgsl`.
const TILE: usize = 64;

/// The sufficient statistics of a feature-space least-squares fit, in f64.
#[derive(Debug, Clone, PartialEq)]
pub struct Gram {
    /// `Φᵀ Φ` (`D x D`, exactly symmetric).
    pub phi_t_phi: Array2<f64>,
    /// `Φᵀ y` (`D x t`) when targets were given.
    pub phi_t_y: Option<Array2<f64>>,
}

/// Accumulates `Φᵀ Φ` and, with `y` (`N x t`), `Φᵀ y` on the GPU.
///
/// `Φ` (`N x D`) and `y` are streamed once through the device in row chunks
/// (in f32). Within a chunk each entry is a blocked sum (16 products, 16
/// steps, at most 16 mids) per split of 4096 rows, the splits are combined
/// by a pairwise tree on the device (at most `2^13` splits per chunk) and
/// the chunks are added in f64 on the host. Counting roundings (the input's
/// rounding to f32 for f64 input: 2; the product: 1; 15 + 16 + 16 + 1 adds of
/// the blocked sum; at most 13 levels of the tree), every entry satisfies,
/// with `u = 2^-24` and `γ_k = k u / (1 - k u)`,
/// `|G̃_ij - G_ij| <= γ_64 Σ_n |φ_ni φ_nj|`: the level of a pairwise sum,
/// not the `γ_N` of a running sum.
///
/// # Errors
/// [`Error::Gpu`] when no adapter is usable, `D x D` floats exceed the
/// device's largest binding, or the device fails; [`Error::ShapeMismatch`]
/// when `y` does not have `N` rows.
pub fn gram<T: Real>(phi: ArrayView2<T>, y: Option<ArrayView2<T>>) -> Result<Gram> {
    let ctx = context::get()?;
    let (n, d) = phi.dim();
    if let Some(y) = &y {
        if y.nrows() != n {
            return Err(Error::ShapeMismatch {
                name: "rows of y",
                expected: n,
                got: y.nrows(),
            });
        }
    }
    let t = y.as_ref().map_or(0, |y| y.ncols());
    let mut g = Array2::<f64>::zeros((d, d));
    let mut gy = y.as_ref().map(|_| Array2::<f64>::zeros((d, t)));
    if n > 0 && d > 0 {
        accumulate(ctx, phi, y, &mut g, gy.as_mut())?;
    }
    // Only the tiles on and above the diagonal were computed.
    for i in 0..d {
        for j in 0..i {
            g[(i, j)] = g[(j, i)];
        }
    }
    Ok(Gram {
        phi_t_phi: g,
        phi_t_y: gy,
    })
}

fn accumulate<T: Real>(
    ctx: &Context,
    phi: ArrayView2<T>,
    y: Option<ArrayView2<T>>,
    g: &mut Array2<f64>,
    mut gy: Option<&mut Array2<f64>>,
) -> Result<()> {
    let (n, d) = phi.dim();
    let t = y.as_ref().map_or(0, |y| y.ncols());
    let cap = (ctx.chunk_bytes() / 4) as usize;
    let width = d.max(t);
    if d * d > ctx.max_binding_floats() {
        return Err(Error::Gpu(format!(
            "Φᵀ Φ with D = {d} ({} floats) exceeds the device's largest binding",
            d * d
        )));
    }
    // Rows per chunk: the input chunk and the partials must fit.
    let splits_cap = (cap.max(d * d) / (d * d)).clamp(1, MAX_SPLITS);
    let rows_per = (cap / width).max(1).min(splits_cap * SPAN).min(n);
    let splits = rows_per.div_ceil(SPAN);
    let _session = ctx.session()?;
    let a_buf = ctx.storage(rows_per * d);
    let y_buf = ctx.storage(rows_per * t);
    let part = ctx.storage(splits * d * d);
    let part_y = ctx.storage(splits * d * t);
    let mut r0 = 0;
    while r0 < n {
        let r1 = (r0 + rows_per).min(n);
        let rows = r1 - r0;
        ctx.upload(&a_buf, &to_f32(phi.slice(s![r0..r1, ..])));
        let mut encoder = ctx.encoder();
        let mut keep = Vec::new();
        let sp = rows.div_ceil(SPAN);
        product(
            ctx,
            &mut encoder,
            &mut keep,
            [&a_buf, &a_buf, &part],
            rows,
            d,
            d,
            sp,
            true,
        )?;
        if let Some(y) = &y {
            ctx.upload(&y_buf, &to_f32(y.slice(s![r0..r1, ..])));
            product(
                ctx,
                &mut encoder,
                &mut keep,
                [&a_buf, &y_buf, &part_y],
                rows,
                d,
                t,
                sp,
                false,
            )?;
        }
        ctx.read(encoder, &part, d * d, |p| {
            g.iter_mut().zip(p).for_each(|(o, &v)| *o += f64::from(v));
        })?;
        if let Some(gy) = gy.as_deref_mut() {
            let encoder = ctx.encoder();
            ctx.read(encoder, &part_y, d * t, |p| {
                gy.iter_mut().zip(p).for_each(|(o, &v)| *o += f64::from(v));
            })?;
        }
        r0 = r1;
    }
    Ok(())
}

fn to_f32<T: Real>(a: ArrayView2<T>) -> Vec<f32> {
    a.iter().map(|v| v.to_f64_exact() as f32).collect()
}

/// Records the partial products `Aᵀ B` of `splits` row splits into
/// `bufs[2]` and their pairwise reduction into its first `da x db` floats.
#[allow(clippy::too_many_arguments)]
fn product(
    ctx: &Context,
    encoder: &mut wgpu::CommandEncoder,
    keep: &mut Vec<wgpu::Buffer>,
    bufs: [&wgpu::Buffer; 3],
    rows: usize,
    da: usize,
    db: usize,
    splits: usize,
    sym: bool,
) -> Result<()> {
    let pipes = &ctx.pipelines;
    let (ti, tj) = (da.div_ceil(TILE), db.div_ceil(TILE));
    let params = ctx.uniform(&[
        rows as u32,
        da as u32,
        db as u32,
        SPAN as u32,
        u32::from(sym),
        tj as u32,
        0,
        0,
    ]);
    let bind = ctx.bind(&pipes.gram, &[bufs[0], bufs[1], bufs[2], &params]);
    ctx.dispatch(encoder, &pipes.gram, &bind, (ti * tj) as u64, splits as u32)?;
    keep.push(params);
    let len = da * db;
    let mut count = splits;
    while count > 1 {
        let half = count.div_ceil(2);
        let pairs = count - half;
        let params = ctx.uniform(&[len as u32, half as u32, pairs as u32, 0]);
        let bind = ctx.bind(&pipes.reduce, &[bufs[2], &params]);
        let groups = (pairs * len).div_ceil(WORKGROUP as usize) as u64;
        ctx.dispatch(encoder, &pipes.reduce, &bind, groups, 1)?;
        keep.push(params);
        count = half;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    fn random(rows: usize, cols: usize, seed: u64) -> Array2<f32> {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        Array2::from_shape_fn((rows, cols), |_| rng.random_range(-1.0f32..1.0))
    }

    /// The documented bound: |G̃ - G| <= γ_64 (|Φ|ᵀ|Φ|) entrywise, with G in f64.
    fn check(a: &Array2<f32>, b: &Array2<f32>, got: &Array2<f64>) {
        let a64 = a.mapv(f64::from);
        let b64 = b.mapv(f64::from);
        let exact = a64.t().dot(&b64);
        let abs = a64.mapv(f64::abs).t().dot(&b64.mapv(f64::abs));
        let u = f64::from(f32::EPSILON) / 2.0;
        let gamma = 64.0 * u / (1.0 - 64.0 * u);
        for ((e, m), g) in exact.iter().zip(&abs).zip(got) {
            assert!(
                (e - g).abs() <= gamma * m,
                "{g} vs {e} (bound {})",
                gamma * m
            );
        }
    }

    #[test]
    fn gram_matches_f64_within_bound() {
        context::tests::ctx();
        // N not a multiple of 16 or of the split, D not a multiple of the tile.
        for &(n, d, t) in &[(1, 1, 1), (77, 5, 2), (4099, 70, 1), (300, 130, 3)] {
            let phi = random(n, d, (n * d) as u64);
            let y = random(n, t, 7);
            let r = gram(phi.view(), Some(y.view())).unwrap();
            check(&phi, &phi, &r.phi_t_phi);
            check(&phi, &y, r.phi_t_y.as_ref().unwrap());
            assert_eq!(r.phi_t_phi, r.phi_t_phi.t());
        }
    }

    #[test]
    fn gram_empty_and_shape_errors() {
        context::tests::ctx();
        let r = gram(Array2::<f64>::zeros((0, 3)).view(), None).unwrap();
        assert_eq!(r.phi_t_phi, Array2::<f64>::zeros((3, 3)));
        assert!(r.phi_t_y.is_none());
        let r = gram(Array2::<f32>::zeros((4, 0)).view(), None).unwrap();
        assert_eq!(r.phi_t_phi.dim(), (0, 0));
        let phi = Array2::<f32>::ones((4, 2));
        let y = Array2::<f32>::ones((3, 1));
        assert!(matches!(
            gram(phi.view(), Some(y.view())),
            Err(Error::ShapeMismatch {
                name: "rows of y",
                expected: 4,
                got: 3
            })
        ));
    }
}
