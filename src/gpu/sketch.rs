//! Polynomial sketch feature maps on the GPU (`docs/math/sketches.rst`,
//! sections "Target kernels" to "TensorSRHT"); shader `shaders/sketch.wgsl`.
//! The random parameters are those the CPU path drew ([`PolySketch::draw`]),
//! uploaded as f32.

use ndarray::{Array2, ArrayView2, ArrayViewMut2};

use super::context::{self, Context, WORKGROUP};
use super::gram::{check_y_rows, map_gram, Gram};
use super::map::{self, DeviceMap};
use crate::error::{Error, Result};
use crate::real::Real;
use crate::sketch::{augmented_dim, check_kernel_params, PolySketch, SketchParams};

/// Output tile edge of `dense_tile`.
const TILE: usize = 64;

/// Features of the kernel `(xᵀy/l² + c)^n` for the rows of `x` on the GPU,
/// in f32: the same map as [`crate::sketch::polynomial_features_into`]
/// (same random parameters), for Gaussian, Rademacher and TensorSRHT
/// sketches, real or complex. Each factor is a projection (a tiled GEMM for
/// the dense sketches, `docs/math/sketches.rst`, "The generic sketch of degree
/// n"; random signs, an FWHT of the zero-padded row and a permutation for
/// TensorSRHT, `docs/math/sketches.rst`, "TensorSRHT"), multiplied into the
/// output on the device. Accuracy: factor `j` of feature `i` carries the
/// rounding of a length-`d` f32 sum, so a feature is within about
/// `n γ_d Π_j Σ_a |x'_a w_{j,ia}| / √D` of the exact value (`γ_d ≈ d 2^-24`).
///
/// # Errors
/// [`Error::Gpu`] when no adapter is usable or the device fails;
/// [`Error::InvalidParameter`] for TensorSketch (no GPU kernel) or bad
/// kernel parameters; [`Error::ShapeMismatch`] as the CPU path.
pub fn sketch_features<T: Real>(
    sketch: &PolySketch,
    x: ArrayView2<T>,
    bias: f64,
    length_scale: f64,
) -> Result<Array2<T>> {
    let mut out = Array2::zeros((x.nrows(), sketch.width()));
    sketch_features_into(sketch, x, bias, length_scale, out.view_mut())?;
    Ok(out)
}

/// [`sketch_features`] written into `out` (`N x width`, any strides).
///
/// # Errors
/// As [`sketch_features`].
pub fn sketch_features_into<T: Real>(
    sketch: &PolySketch,
    x: ArrayView2<T>,
    bias: f64,
    length_scale: f64,
    out: ArrayViewMut2<T>,
) -> Result<()> {
    check(sketch, x.dim(), bias, length_scale)?;
    Error::check_out_shape((x.nrows(), sketch.width()), out.dim())?;
    let ctx = context::get()?;
    if x.nrows() == 0 {
        return Ok(());
    }
    let _session = ctx.session()?;
    let map = DeviceSketch::new(ctx, sketch, bias, length_scale)?;
    map::run(ctx, &map, x, out)
}

/// `Φᵀ Φ` and `Φᵀ y` of the sketch features `Φ` of the rows of `x` (those
/// of [`sketch_features`]) on the GPU, without `Φ` leaving the device: each
/// row chunk of `x` is uploaded once, its features are written to a device
/// buffer and accumulated there as in [`super::gram`] (same error bound,
/// with `Φ` the f32 features); only the `D x D` partial sums come back and
/// are added in f64 on the host.
///
/// # Errors
/// As [`sketch_features`] and [`super::gram`].
pub fn sketch_gram<T: Real>(
    sketch: &PolySketch,
    x: ArrayView2<T>,
    bias: f64,
    length_scale: f64,
    y: Option<ArrayView2<f64>>,
) -> Result<Gram> {
    let ctx = context::get()?;
    check_y_rows(x.nrows(), y.as_ref().map(|y| y.nrows()))?;
    check(sketch, x.dim(), bias, length_scale)?;
    let _session = ctx.session()?;
    let dev = DeviceSketch::new(ctx, sketch, bias, length_scale)?;
    map_gram(ctx, "n_components", &dev, x, y, false)
}

/// Checks the sketch kind (a GPU kernel exists), the kernel parameters and
/// the input width (`x` has `sketch.dim()` columns after augmentation).
pub(super) fn check(
    sketch: &PolySketch,
    x: (usize, usize),
    bias: f64,
    length_scale: f64,
) -> Result<()> {
    super::check_sketch(sketch)?;
    check_kernel_params(bias, length_scale)?;
    if augmented_dim(x.1, bias) != sketch.dim() {
        return Err(Error::ShapeMismatch {
            name: "number of features of X",
            expected: sketch.dim() - usize::from(bias > 0.0),
            got: x.1,
        });
    }
    Ok(())
}

/// The structure-specific parameters on the device.
enum Layout {
    /// `W_1 … W_n` back to back (`R × d` each, `R = D` or `2D`).
    Dense { rows: usize },
    /// Sign multipliers (re, then im for complex) and permutations (as
    /// f32 values), both indexed `(b·n + j)·d' + i`.
    Srht {
        d_pad: usize,
        blocks: usize,
        perms: wgpu::Buffer,
    },
}

/// A [`PolySketch`] uploaded to the device (see [`sketch_features`]).
pub(super) struct DeviceSketch {
    dim: usize,
    nf: usize,
    width: usize,
    degree: usize,
    complex: bool,
    lead: Option<f64>,
    inv_l: f64,
    params: wgpu::Buffer,
    layout: Layout,
    /// Placement in a wider map (see [`DeviceSketch::placed`]).
    x_stride: usize,
    col: usize,
    out_width: usize,
    block_scale: f64,
}

impl DeviceSketch {
    /// Uploads the parameters of `sketch` (checked by [`check`]).
    pub(super) fn new(
        ctx: &Context,
        sketch: &PolySketch,
        bias: f64,
        length_scale: f64,
    ) -> Result<Self> {
        let too_big = |len: usize| -> Result<()> {
            if len > ctx.max_binding_floats() {
                return Err(Error::Gpu(format!(
                    "the sketch parameters ({len} floats) exceed the device's largest binding"
                )));
            }
            Ok(())
        };
        let complex = sketch.is_complex();
        let (params, layout) = match sketch.params() {
            SketchParams::Dense { weights } => {
                let data: Vec<f32> = weights
                    .iter()
                    .flat_map(|w| w.iter().map(|&v| v as f32))
                    .collect();
                too_big(data.len())?;
                let buf = ctx.storage(data.len());
                ctx.upload(&buf, &data);
                (
                    buf,
                    Layout::Dense {
                        rows: weights[0].nrows(),
                    },
                )
            }
            SketchParams::Srht {
                d_pad,
                codes,
                perms,
            } => {
                // Real: 0 -> +1, 1 -> -1; complex: k -> i^k.
                let re = codes.iter().map(|&c| match (complex, c) {
                    (_, 0) => 1.0f32,
                    (false, _) | (true, 2) => -1.0,
                    _ => 0.0,
                });
                let im = codes.iter().map(|&c| match c {
                    1 => 1.0f32,
                    3 => -1.0,
                    _ => 0.0,
                });
                let mut mul: Vec<f32> = re.collect();
                if complex {
                    mul.extend(im);
                }
                too_big(mul.len())?;
                let buf = ctx.storage(mul.len());
                ctx.upload(&buf, &mul);
                let p: Vec<f32> = perms.iter().map(|&v| v as f32).collect();
                let pbuf = ctx.storage(p.len());
                ctx.upload(&pbuf, &p);
                let blocks = codes.len() / (d_pad * sketch.degree() as usize);
                (
                    buf,
                    Layout::Srht {
                        d_pad,
                        blocks,
                        perms: pbuf,
                    },
                )
            }
            SketchParams::Count { .. } => {
                return Err(Error::invalid("sketch", "tensor_sketch has no GPU kernel"))
            }
        };
        Ok(Self {
            dim: sketch.dim(),
            nf: sketch.n_features(),
            width: sketch.width(),
            degree: sketch.degree() as usize,
            complex,
            lead: (bias > 0.0).then(|| bias.sqrt()),
            inv_l: 1.0 / length_scale,
            params,
            layout,
            x_stride: sketch.dim(),
            col: 0,
            out_width: sketch.width(),
            block_scale: 1.0,
        })
    }

    /// Places the sketch in a wider map: input rows of `x_stride` floats
    /// (its `dim` inputs first), output columns `col..col + width` of rows of
    /// `out_width` floats, every feature multiplied by `block_scale`.
    pub(super) fn placed(
        mut self,
        x_stride: usize,
        col: usize,
        out_width: usize,
        block_scale: f64,
    ) -> Self {
        self.x_stride = x_stride;
        self.col = col;
        self.out_width = out_width;
        self.block_scale = block_scale;
        self
    }

    /// The uniform words of `sketch.wgsl` for factor `j` (`a`, `b` per kernel).
    fn words(&self, rows: usize, j: usize, scale: f32, a: usize, b: usize) -> [u32; 16] {
        [
            rows as u32,
            self.dim as u32,
            self.nf as u32,
            self.out_width as u32,
            u32::from(self.complex),
            u32::from(j == 0),
            u32::from(j + 1 == self.degree),
            scale.to_bits(),
            a as u32,
            b as u32,
            self.degree as u32,
            j as u32,
            self.x_stride as u32,
            self.col as u32,
            0,
            0,
        ]
    }
}

impl DeviceMap for DeviceSketch {
    fn in_dim(&self) -> usize {
        self.dim
    }

    fn width(&self) -> usize {
        self.width
    }

    fn scratch_per_row(&self) -> usize {
        match &self.layout {
            Layout::Dense { .. } => 0,
            Layout::Srht { d_pad, blocks, .. } => d_pad * blocks * if self.complex { 2 } else { 1 },
        }
    }

    fn stage<T: Real>(&self, x: ArrayView2<T>) -> Vec<f32> {
        map::stage_rows(x, self.lead, self.inv_l)
    }

    fn record(
        &self,
        ctx: &Context,
        encoder: &mut wgpu::CommandEncoder,
        keep: &mut Vec<wgpu::Buffer>,
        x: &wgpu::Buffer,
        scratch: &wgpu::Buffer,
        rows: usize,
        out: &wgpu::Buffer,
    ) -> Result<()> {
        let pipes = &ctx.pipelines;
        let scale = (self.block_scale / (self.nf as f64).sqrt()) as f32;
        for j in 0..self.degree {
            match &self.layout {
                Layout::Dense { rows: r } => {
                    let tiles_k = self.nf.div_ceil(TILE);
                    let params =
                        ctx.uniform(&self.words(rows, j, scale, j * r * self.dim, tiles_k));
                    let bind = ctx.bind(&pipes.sketch_dense, &[x, &self.params, out, &params]);
                    let count = (rows.div_ceil(TILE) * tiles_k) as u64;
                    ctx.dispatch(encoder, &pipes.sketch_dense, &bind, count, 1)?;
                    keep.push(params);
                }
                Layout::Srht {
                    d_pad,
                    blocks,
                    perms,
                } => {
                    let (dp, nb) = (*d_pad, *blocks);
                    let len = rows * nb * dp;
                    let wg = WORKGROUP as usize;
                    let params = ctx.uniform(&self.words(rows, j, scale, dp, nb));
                    let bind = ctx.bind(&pipes.srht_fill, &[x, &self.params, scratch, &params]);
                    ctx.dispatch(encoder, &pipes.srht_fill, &bind, len.div_ceil(wg) as u64, 1)?;
                    let total = len * if self.complex { 2 } else { 1 };
                    super::fwht::record(ctx, encoder, keep, scratch, total, dp, 1.0)?;
                    let bind = ctx.bind(&pipes.srht_gather, &[scratch, perms, out, &params]);
                    let count = (rows * self.nf).div_ceil(wg) as u64;
                    ctx.dispatch(encoder, &pipes.srht_gather, &bind, count, 1)?;
                    keep.push(params);
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::context::tests::random;
    use crate::sketch::{polynomial_features_into, SketchKind};
    use crate::Parallelism;

    /// Largest `Σ_a |x'_a w_{j,ia}|` over features and factors: the scale of
    /// the rounding error of one factor (`‖x'‖₁` for TensorSRHT).
    fn factor_mass(sk: &PolySketch, xa: &[f64]) -> f64 {
        let l1: f64 = xa.iter().map(|v| v.abs()).sum();
        match sk.params() {
            SketchParams::Dense { weights } => weights
                .iter()
                .flat_map(|w| {
                    w.rows()
                        .into_iter()
                        .map(|r| r.iter().zip(xa).map(|(a, b)| (a * b).abs()).sum::<f64>())
                        .collect::<Vec<_>>()
                })
                .fold(0.0, f64::max),
            _ => l1,
        }
    }

    /// GPU features (f32 and f64 input) against the CPU path in f64: each
    /// entry within `1e-4 · Π_j M_j / √D`, `M_j` the factor's mass (a
    /// relative accuracy of 1e-4 on the scale of the products).
    fn compare(kind: SketchKind, complex: bool, degree: u32, n: usize, d: usize, nf: usize) {
        let (bias, l) = (0.5, 1.3);
        let dim = augmented_dim(d, bias);
        let sk =
            PolySketch::draw(kind, complex, degree, dim, nf, &mut crate::rng::seeded(7)).unwrap();
        let x = random(n, d, 1.0, (n * d + nf) as u64);
        let mut cpu = Array2::<f64>::zeros((n, sk.width()));
        polynomial_features_into(
            &sk,
            x.view(),
            bias,
            l,
            cpu.view_mut(),
            Parallelism::Sequential,
        )
        .unwrap();
        let before = context::dispatch_count();
        let g64 = sketch_features(&sk, x.view(), bias, l).unwrap();
        assert!(context::dispatch_count() > before, "the GPU ran");
        let x32 = x.mapv(|v| v as f32);
        let g32 = sketch_features(&sk, x32.view(), bias, l).unwrap();
        for r in 0..n {
            let mut xa = vec![bias.sqrt()];
            xa.extend(x.row(r).iter().map(|v| v / l));
            let m = factor_mass(&sk, &xa).powi(degree as i32);
            let tol = 1e-4 * m / (nf as f64).sqrt();
            for c in 0..sk.width() {
                let e = cpu[(r, c)];
                assert!(
                    (g64[(r, c)] - e).abs() <= tol,
                    "{kind:?} complex={complex} n={degree} ({r},{c}): {} vs {e} (tol {tol})",
                    g64[(r, c)]
                );
                assert!((f64::from(g32[(r, c)]) - e).abs() <= tol + 1e-6 * e.abs());
            }
        }
    }

    #[test]
    fn sketches_match_cpu() {
        context::tests::ctx();
        // d' = 8 for d = 5 (+ bias): D = 20 is not a multiple of d'; N = 70
        // is not a multiple of the 64 tile or the 256 workgroup.
        for kind in [
            SketchKind::Gaussian,
            SketchKind::Rademacher,
            SketchKind::TensorSrht,
        ] {
            for complex in [false, true] {
                for degree in [1, 3] {
                    compare(kind, complex, degree, 70, 5, 20);
                }
            }
        }
        // A wider input (several 16-wide steps, d' = 64) and N = 1.
        compare(SketchKind::Gaussian, false, 2, 1, 37, 130);
        compare(SketchKind::TensorSrht, true, 2, 3, 37, 130);
    }

    #[test]
    fn sketch_errors_and_empty_input() {
        context::tests::ctx();
        let sk = PolySketch::draw(
            SketchKind::TensorSrht,
            false,
            2,
            4,
            8,
            &mut crate::rng::seeded(0),
        )
        .unwrap();
        let x = random(3, 4, 1.0, 1);
        let empty = sketch_features(&sk, Array2::<f32>::zeros((0, 4)).view(), 0.0, 1.0).unwrap();
        assert_eq!(empty.dim(), (0, 8));
        assert!(matches!(
            sketch_features(&sk, random(3, 5, 1.0, 1).view(), 0.0, 1.0),
            Err(Error::ShapeMismatch {
                expected: 4,
                got: 5,
                ..
            })
        ));
        assert!(matches!(
            sketch_features(&sk, x.view(), -1.0, 1.0),
            Err(Error::InvalidParameter { name: "bias", .. })
        ));
        let mut out = Array2::<f64>::zeros((3, 7));
        assert!(matches!(
            sketch_features_into(&sk, x.view(), 0.0, 1.0, out.view_mut()),
            Err(Error::ShapeMismatch {
                expected: 8,
                got: 7,
                ..
            })
        ));
        let ts = PolySketch::draw(
            SketchKind::TensorSketch,
            false,
            2,
            4,
            8,
            &mut crate::rng::seeded(0),
        )
        .unwrap();
        assert!(matches!(
            sketch_features(&ts, x.view(), 0.0, 1.0),
            Err(Error::InvalidParameter { name: "sketch", .. })
        ));
    }
}
