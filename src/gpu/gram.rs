//! Gram accumulation `Φᵀ Φ`, `Φᵀ y` on the GPU; shaders `shaders/gram.wgsl`
//! and `shaders/reduce.wgsl`.

use std::ops::Range;

use ndarray::{s, Array2, ArrayView2};

use super::context::{self, Context, WORKGROUP};
use super::map::DeviceMap;
use crate::alloc::try_zeros2;
use crate::error::{Error, Result};
use crate::real::{all_finite, Real};
use crate::threads::Parallelism;

/// Rows per split: each workgroup sums at most this many rows of one output
/// tile (16 x 16 x 16 of the blocked summation in `gram.wgsl`).
pub(super) const SPAN: usize = 4096;
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

impl Gram {
    /// The statistics of `Φ` followed by `width − D` zero columns (the zero
    /// column of an odd-width complex sketch or `cos_sin` map): `ΦᵀΦ` and
    /// `Φᵀy` with zero rows (and columns) appended. Unchanged when `width <= D`.
    pub fn padded(self, width: usize) -> Gram {
        let d = self.phi_t_phi.nrows();
        if width <= d {
            return self;
        }
        let mut g = Array2::zeros((width, width));
        g.slice_mut(s![..d, ..d]).assign(&self.phi_t_phi);
        let phi_t_y = self.phi_t_y.map(|b| {
            let mut p = Array2::zeros((width, b.ncols()));
            p.slice_mut(s![..d, ..]).assign(&b);
            p
        });
        Gram {
            phi_t_phi: g,
            phi_t_y,
        }
    }
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
/// The products and sums are those of f32 on the device: the bound holds
/// while they stay within f32's range, and sums beyond it are refused
/// (not returned as infinities).
///
/// # Errors
/// [`Error::Gpu`] when no adapter is usable, the `D x D` sums (with the
/// `D x t` of `Φᵀ y`) exceed the device's largest binding, or the device
/// fails; [`Error::ShapeMismatch`] when `y` does not have `N` rows;
/// [`Error::NonFinite`] naming `phi` or `y` for non-finite input;
/// [`Error::InvalidParameter`] naming `phi` when an entry of the sums
/// overflows f32's range.
pub fn gram<T: Real>(phi: ArrayView2<T>, y: Option<ArrayView2<T>>) -> Result<Gram> {
    let ctx = context::get()?;
    let (n, d) = phi.dim();
    check_y_rows(n, y.as_ref().map(|y| y.nrows()))?;
    if !all_finite(phi, Parallelism::Rayon) {
        return Err(Error::NonFinite { name: "phi" });
    }
    if y.is_some_and(|y| !all_finite(y, Parallelism::Rayon)) {
        return Err(Error::NonFinite { name: "y" });
    }
    let t = y.as_ref().map_or(0, |y| y.ncols());
    let _session = ctx.session()?;
    let g = accumulate(
        ctx,
        "phi",
        n,
        d,
        y.as_ref().map(|_| t),
        usize::MAX,
        false,
        |rows, _, _, _, a, b| {
            ctx.upload(a, &to_f32(phi.slice(s![rows.clone(), ..])));
            if let Some(y) = &y {
                ctx.upload(b, &to_f32(y.slice(s![rows, ..])));
            }
            Ok(())
        },
    )?;
    // An f32 product or partial sum beyond f32's range (or input beyond it,
    // which the conversion to f32 makes infinite) leaves an infinity or NaN;
    // the f64 sums of finite chunks cannot overflow.
    let finite = |a: &Array2<f64>| a.iter().all(|v| v.is_finite());
    if !finite(&g.phi_t_phi) || g.phi_t_y.as_ref().is_some_and(|b| !finite(b)) {
        return Err(Error::invalid(
            "phi",
            format!(
                "the products of Φᵀ Φ or Φᵀ y overflow the float32 range (|v| <= {:e}) the \
                 GPU computes in: scale phi (or y) down, or form the products on the CPU",
                f32::MAX
            ),
        ));
    }
    Ok(g)
}

/// `Φᵀ Φ`, `Φᵀ y` of `map`'s features of `x` (the caller holds the session),
/// with the compensated sums of [`accumulate`] when `exact`; `param` names
/// the argument that sets the map's width.
pub(super) fn map_gram<T: Real, M: DeviceMap>(
    ctx: &Context,
    param: &'static str,
    map: &M,
    x: ArrayView2<T>,
    y: Option<ArrayView2<f64>>,
    exact: bool,
) -> Result<Gram> {
    let n = x.nrows();
    let max_rows = map.rows_per_chunk(ctx)?;
    let rows = max_rows.min(n.max(1));
    // One (input, scratch) pair per slot of `accumulate`, made on first use.
    let mut bufs: Vec<(wgpu::Buffer, wgpu::Buffer)> = Vec::new();
    let t = y.as_ref().map(|y| y.ncols());
    accumulate(
        ctx,
        param,
        n,
        map.width(),
        t,
        max_rows,
        exact,
        |r, slot, enc, keep, a, b| {
            while bufs.len() <= slot {
                bufs.push((
                    ctx.storage(rows * map.in_dim()),
                    ctx.storage(rows * map.scratch_per_row()),
                ));
            }
            let (x_buf, s_buf) = &bufs[slot];
            ctx.upload(x_buf, &map.stage(x.slice(s![r.clone(), ..])));
            map.record(ctx, enc, keep, x_buf, s_buf, r.len(), a)?;
            if let Some(y) = &y {
                ctx.upload(b, &to_f32(y.slice(s![r, ..])));
            }
            Ok(())
        },
    )
}

/// `Ok` when `y` (if given) has the `n` rows of the features.
pub(super) fn check_y_rows(n: usize, y_rows: Option<usize>) -> Result<()> {
    match y_rows {
        Some(got) if got != n => Err(Error::ShapeMismatch {
            name: "rows of y",
            expected: n,
            got,
        }),
        _ => Ok(()),
    }
}

/// Streams `n` rows of `Φ` (`n x d`) and `y` (`n x t` when `t` is given)
/// through the device in chunks of at most `max_rows` rows filled by
/// `fill` (given the rows and the slot, 0 or 1, whose buffers it may use),
/// and returns the sums (the caller holds the session).
///
/// Double-buffered like [`super::map`]: two slots of chunk buffers
/// alternate, so chunk `k + 1` is filled, uploaded and submitted while
/// chunk `k` is still accumulated, and chunk `k`'s partial sums (`Φᵀ Φ` and
/// `Φᵀ y`, read back in one copy) are added on the host while `k + 1` runs.
///
/// With `exact`, the sums are those of `gram_tile_exact` and
/// `reduce_pairs_exact` (`gram.wgsl`, `reduce.wgsl`): every entry a pair
/// `hi + lo` of floats from TwoProduct and TwoSum, so that an entry's error
/// is at most about `(u + 3 n u²) Σ |φ_ni φ_nj|` for a chunk of `n` rows
/// (the `u` where the FMA is not fused) instead of [`gram`]'s
/// `γ_64 Σ |φ_ni φ_nj|`.
///
/// The sums must fit the device's largest binding ([`Error::Gpu`]) and the
/// host's memory (an [`Error::InvalidParameter`] naming `param`, the
/// argument that sets `d`): both checked before anything is allocated.
#[allow(clippy::too_many_arguments)]
pub(super) fn accumulate(
    ctx: &Context,
    param: &'static str,
    n: usize,
    d: usize,
    t: Option<usize>,
    max_rows: usize,
    exact: bool,
    mut fill: impl FnMut(
        Range<usize>,
        usize,
        &mut wgpu::CommandEncoder,
        &mut Vec<wgpu::Buffer>,
        &wgpu::Buffer,
        &wgpu::Buffer,
    ) -> Result<()>,
) -> Result<Gram> {
    // Floats per entry of a split's sums: hi and lo when exact.
    let parts = if exact { 2 } else { 1 };
    let t_cols = t.unwrap_or(0);
    let width = d.max(t_cols);
    // One split's sums, `parts (D² + D t)` floats (`ΦᵀΦ` and `Φᵀy`, read
    // back together), must fit one binding, and then so do the partials
    // (`parts D max(D, t)` floats a split): checked, without overflow, before
    // anything is allocated.
    let sums = d
        .checked_mul(d)
        .zip(d.checked_mul(t_cols))
        .and_then(|(dd, dt)| dd.checked_add(dt))
        .and_then(|v| v.checked_mul(parts));
    let max = ctx.max_binding_floats();
    if n > 0 && d > 0 && sums.is_none_or(|v| v > max) {
        let what = if t_cols > 0 {
            format!("Φᵀ Φ and Φᵀ y with D = {d} and {t_cols} targets")
        } else {
            format!("Φᵀ Φ with D = {d}")
        };
        let floats = sums.map_or("more than 2^64".to_string(), |v| v.to_string());
        return Err(Error::Gpu(format!(
            "{what} ({floats} floats) exceed the device's largest binding ({max} floats)"
        )));
    }
    let mut g = try_zeros2::<f64>(param, "Φᵀ Φ (float64)", d, d)?;
    let mut gy = t
        .map(|t| try_zeros2::<f64>(param, "Φᵀ y (float64)", d, t))
        .transpose()?;
    let t = t_cols;
    if n > 0 && d > 0 {
        let cap = (ctx.chunk_bytes() / 4) as usize;
        // Rows per chunk: the input chunk and the partials must fit.
        let per_split = parts * d * width;
        let splits_cap = (cap.max(per_split) / per_split).clamp(1, MAX_SPLITS);
        let rows_per = (cap / width)
            .max(1)
            .min(splits_cap * SPAN)
            .min(max_rows)
            .min(n);
        let splits = rows_per.div_ceil(SPAN);
        let n_slots = if rows_per < n { 2 } else { 1 };
        // The reduced Φᵀ Φ ends in the first parts d² floats of `part`, and
        // Φᵀ y is copied after it, so one read-back returns both.
        let slots: Vec<[wgpu::Buffer; 4]> = (0..n_slots)
            .map(|_| {
                [
                    ctx.storage(rows_per * d),
                    ctx.storage(rows_per * t),
                    ctx.storage((splits * parts * d * d).max(parts * (d * d + d * t))),
                    ctx.storage(splits * parts * d * t),
                ]
            })
            .collect();
        let with_y = gy.is_some() && t > 0;
        let read_len = parts * (d * d + if with_y { d * t } else { 0 });
        // Each block of `len` sums, as `parts` consecutive arrays.
        let add_block = |out: &mut Array2<f64>, p: &[f32]| {
            let len = out.len();
            out.iter_mut().enumerate().for_each(|(k, o)| {
                *o += (0..parts).map(|h| f64::from(p[h * len + k])).sum::<f64>();
            });
        };
        let mut add = |p: &[f32]| {
            add_block(&mut g, p);
            if let Some(gy) = gy.as_mut().filter(|_| with_y) {
                add_block(gy, &p[parts * d * d..]);
            }
        };
        let mut previous = None;
        let mut r0 = 0;
        for k in 0.. {
            if r0 >= n {
                break;
            }
            let slot = k % n_slots;
            let [a_buf, y_buf, part, part_y] = &slots[slot];
            let r1 = (r0 + rows_per).min(n);
            let rows = r1 - r0;
            let mut encoder = ctx.encoder();
            let mut keep = Vec::new();
            fill(r0..r1, slot, &mut encoder, &mut keep, a_buf, y_buf)?;
            let sp = rows.div_ceil(SPAN);
            product(
                ctx,
                &mut encoder,
                &mut keep,
                [a_buf, a_buf, part],
                rows,
                d,
                d,
                sp,
                true,
                exact,
            )?;
            if with_y {
                product(
                    ctx,
                    &mut encoder,
                    &mut keep,
                    [a_buf, y_buf, part_y],
                    rows,
                    d,
                    t,
                    sp,
                    false,
                    exact,
                )?;
                let bytes = (parts * d * d * 4) as u64;
                let len = (parts * d * t * 4) as u64;
                encoder.copy_buffer_to_buffer(part_y, 0, part, bytes, len);
            }
            let pending = ctx.submit_read(encoder, part, read_len)?;
            if let Some(p) = previous.take() {
                ctx.finish(p, &mut add)?;
            }
            previous = Some(pending);
            r0 = r1;
        }
        if let Some(p) = previous {
            ctx.finish(p, &mut add)?;
        }
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

fn to_f32<T: Real>(a: ArrayView2<T>) -> Vec<f32> {
    a.iter().map(|v| v.to_f64_exact() as f32).collect()
}

/// Records the partial products `Aᵀ B` of `splits` row splits into
/// `bufs[2]` and their pairwise reduction into its first `da x db` floats;
/// with `exact`, those of `gram_tile_exact` and `reduce_pairs_exact` (`hi`
/// and `lo` in the first `2 da db` floats).
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
    exact: bool,
) -> Result<()> {
    let pipes = &ctx.pipelines;
    let (pipe, reduce) = if exact {
        (&pipes.gram_exact, &pipes.reduce_exact)
    } else {
        (&pipes.gram, &pipes.reduce)
    };
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
    let bind = ctx.bind(pipe, &[bufs[0], bufs[1], bufs[2], &params]);
    ctx.dispatch(encoder, pipe, &bind, (ti * tj) as u64, splits as u32)?;
    keep.push(params);
    let len = da * db;
    let mut count = splits;
    while count > 1 {
        let half = count.div_ceil(2);
        let pairs = count - half;
        let params = ctx.uniform(&[len as u32, half as u32, pairs as u32, 0]);
        let bind = ctx.bind(reduce, &[bufs[2], &params]);
        let groups = (pairs * len).div_ceil(WORKGROUP as usize) as u64;
        ctx.dispatch(encoder, reduce, &bind, groups, 1)?;
        keep.push(params);
        count = half;
    }
    Ok(())
}

/// Records the partial products `Aᵀ B` (`A` is `rows x da`, `B` is
/// `rows x db`) of the `jobs` row ranges listed in `bufs[3]` (pairs `begin,
/// end` of at most [`SPAN`] rows each) into `bufs[2]`: job `z`'s `da x db`
/// block starts at float `offset + z da db` (with `sym`, only the tiles on
/// and above the diagonal are written). Each entry is the blocked sum of
/// `gram.wgsl` (15 + 16 + 16 + 1 adds); the caller adds the blocks in f64.
#[allow(clippy::too_many_arguments)]
pub(super) fn job_products(
    ctx: &Context,
    encoder: &mut wgpu::CommandEncoder,
    keep: &mut Vec<wgpu::Buffer>,
    bufs: [&wgpu::Buffer; 4],
    da: usize,
    db: usize,
    jobs: usize,
    offset: usize,
    sym: bool,
) -> Result<()> {
    let (ti, tj) = (da.div_ceil(TILE), db.div_ceil(TILE));
    let params = ctx.uniform(&[
        0,
        da as u32,
        db as u32,
        SPAN as u32,
        u32::from(sym),
        tj as u32,
        offset as u32,
        0,
    ]);
    let pipe = &ctx.pipelines.gram_jobs;
    let bind = ctx.bind(pipe, &[bufs[0], bufs[1], bufs[2], &params, bufs[3]]);
    ctx.dispatch(encoder, pipe, &bind, (ti * tj) as u64, jobs as u32)?;
    keep.push(params);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::context::tests::random;

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
            let phi = random(n, d, 1.0f32, (n * d) as u64);
            let y = random(n, t, 1.0f32, 7);
            let r = gram(phi.view(), Some(y.view())).unwrap();
            check(&phi, &phi, &r.phi_t_phi);
            check(&phi, &y, r.phi_t_y.as_ref().unwrap());
            assert_eq!(r.phi_t_phi, r.phi_t_phi.t());
        }
    }

    /// The compensated accumulation (`gram_tile_exact`) is within
    /// `(u + 3 n u²) Σ |φ_ni φ_nj|` of the f64 product of the same f32
    /// values (plus that product's own `γ_n` of f64; the `u` is the
    /// products' rounding where the FMA is not fused, as on lavapipe). A
    /// plain f32 running sum of these positive values is off by about
    /// `√n u` of the entry, past the bound for the larger `n`, so this also
    /// catches a shader compiler that folds TwoSum away.
    #[test]
    fn exact_gram_matches_f64_to_u_squared() {
        let ctx = context::tests::ctx();
        let _session = ctx.session().unwrap();
        // Chunks of 1,024 rows (one split each) and chunks of all rows (up
        // to 5 splits of 4,096 rows, added by `reduce_pairs_exact`).
        let cases = [
            (1, 1, 1),
            (77, 5, 2),
            (5000, 70, 2),
            (300, 130, 3),
            (20_000, 40, 1),
        ];
        for (&(n, d, t), max_rows) in cases.iter().flat_map(|c| [(c, 1024), (c, usize::MAX)]) {
            // Positive values (like kernel values): sums without cancellation.
            let phi = random(n, d, 1.0f32, (n * d) as u64).mapv(f32::abs);
            let y = random(n, t, 1.0f32, 7);
            let r = accumulate(
                ctx,
                "phi",
                n,
                d,
                Some(t),
                max_rows,
                true,
                |rows, _, _, _, a, b| {
                    ctx.upload(a, &to_f32(phi.slice(s![rows.clone(), ..])));
                    ctx.upload(b, &to_f32(y.slice(s![rows, ..])));
                    Ok(())
                },
            )
            .unwrap();
            let u = f64::from(f32::EPSILON) / 2.0;
            let u64_ = f64::EPSILON / 2.0;
            let rel = u + 3.0 * n as f64 * u * u + 2.0 * n as f64 * u64_;
            for (b, got) in [(&phi, &r.phi_t_phi), (&y, r.phi_t_y.as_ref().unwrap())] {
                let (a64, b64) = (phi.mapv(f64::from), b.mapv(f64::from));
                let exact = a64.t().dot(&b64);
                let abs = a64.mapv(f64::abs).t().dot(&b64.mapv(f64::abs));
                for ((e, m), g) in exact.iter().zip(&abs).zip(got) {
                    assert!((e - g).abs() <= rel * m, "{g} vs {e} (bound {})", rel * m);
                }
            }
        }
    }

    /// The fused paths equal the Gram of the downloaded GPU features (the
    /// same f32 features) to the bound of [`gram`].
    #[test]
    fn feature_grams_match_gram_of_features() {
        use crate::fourier::Variant;
        use crate::gpu::{rff_features, rff_gram, sketch_features, sketch_gram};
        use crate::sketch::{PolySketch, SketchKind};
        context::tests::ctx();
        let x = random(300, 5, 1.0f32, 11).mapv(f64::from);
        let y = random(300, 2, 1.0f32, 12).mapv(f64::from);
        let sk = PolySketch::draw(
            SketchKind::TensorSrht,
            true,
            2,
            6,
            20,
            &mut crate::rng::seeded(1),
        )
        .unwrap();
        let w = random(30, 5, 1.0f32, 13).mapv(f64::from);
        let b = ndarray::Array1::from_shape_fn(30, |j| j as f64 * 0.2);
        let sketch_phi = sketch_features(&sk, x.view(), 0.7, 1.2).unwrap();
        let rff_phi =
            rff_features(x.view(), w.view(), Some(b.view()), Variant::CosBias, 0.3).unwrap();
        let sketch_gram_of =
            |x: ArrayView2<f64>, y: Option<ArrayView2<f64>>| sketch_gram(&sk, x, 0.7, 1.2, y);
        let rff_gram_of = |x: ArrayView2<f64>, y: Option<ArrayView2<f64>>| {
            rff_gram(x, w.view(), Some(b.view()), Variant::CosBias, 0.3, y)
        };
        let on_device = |run: &dyn Fn() -> Result<Gram>| {
            let before = context::dispatch_count();
            let r = run().unwrap();
            assert!(context::dispatch_count() > before);
            r
        };
        for (phi, r) in [
            (
                sketch_phi,
                on_device(&|| sketch_gram_of(x.view(), Some(y.view()))),
            ),
            (
                rff_phi,
                on_device(&|| rff_gram_of(x.view(), Some(y.view()))),
            ),
        ] {
            let phi = phi.mapv(|v| v as f32);
            check(&phi, &phi, &r.phi_t_phi);
            check(&phi, &y.mapv(|v| v as f32), r.phi_t_y.as_ref().unwrap());
        }
        assert!(matches!(
            rff_gram_of(x.view(), Some(y.slice(s![..5, ..]))),
            Err(Error::ShapeMismatch {
                name: "rows of y",
                ..
            })
        ));
        let empty = sketch_gram_of(x.slice(s![..0, ..]), None).unwrap();
        assert_eq!(empty.phi_t_phi, Array2::<f64>::zeros((40, 40)));
    }

    #[test]
    fn padded_appends_zero_rows_and_columns() {
        let g = Gram {
            phi_t_phi: ndarray::array![[1.0, 2.0], [2.0, 5.0]],
            phi_t_y: Some(ndarray::array![[3.0], [4.0]]),
        };
        assert_eq!(g.clone().padded(2), g);
        let p = g.padded(3);
        assert_eq!(
            p.phi_t_phi,
            ndarray::array![[1.0, 2.0, 0.0], [2.0, 5.0, 0.0], [0.0, 0.0, 0.0]]
        );
        assert_eq!(p.phi_t_y, Some(ndarray::array![[3.0], [4.0], [0.0]]));
    }

    /// Sums that no binding can hold are refused before anything is
    /// allocated (`D²` float64 on the host would be 320 GB here).
    #[test]
    fn gram_refuses_sums_beyond_a_binding_first() {
        let max = context::tests::ctx().max_binding_floats();
        let too_wide = Array2::<f32>::ones((1, 200_000));
        assert!(200_000 * 200_000 > max);
        let msg = |r: Result<Gram>| match r {
            Err(Error::Gpu(m)) => m,
            other => panic!("expected a GPU error, got {other:?}"),
        };
        assert!(msg(gram(too_wide.view(), None)).contains("largest binding"));
        // Φᵀ Φ fits, with Φᵀ y of many targets it does not: D (D + t) floats.
        let d = 4096;
        let t = max / d - d + 1;
        let phi = Array2::<f32>::ones((1, d));
        let y = Array2::<f32>::ones((1, t));
        let m = msg(gram(phi.view(), Some(y.view())));
        assert!(
            m.contains("largest binding") && m.contains("targets"),
            "{m}"
        );
    }

    /// Non-finite input, and products beyond f32's range (finite in f64),
    /// are refused rather than returned as infinities.
    #[test]
    fn gram_refuses_non_finite_input_and_f32_overflow() {
        context::tests::ctx();
        let phi = ndarray::array![[1e20, 1.0], [2.0, 3.0]];
        assert!(matches!(
            gram(phi.view(), None),
            Err(Error::InvalidParameter { name: "phi", reason }) if reason.contains("float32")
        ));
        // Only Φᵀ y overflows: 1e10 · 1e30.
        let (small, y) = (
            ndarray::array![[1e10], [1.0]],
            ndarray::array![[1e30], [1.0]],
        );
        assert!(matches!(
            gram(small.view(), Some(y.view())),
            Err(Error::InvalidParameter { name: "phi", .. })
        ));
        let nan = ndarray::array![[f64::NAN, 1.0]];
        assert!(matches!(
            gram(nan.view(), None),
            Err(Error::NonFinite { name: "phi" })
        ));
        let one = ndarray::array![[1.0, 1.0]];
        assert!(matches!(
            gram(one.view(), Some(nan.slice(s![.., ..1]))),
            Err(Error::NonFinite { name: "y" })
        ));
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
