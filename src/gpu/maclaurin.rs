//! Maclaurin feature maps on the GPU (`docs/math/maclaurin.rst`, "The truncated
//! random map", "Kar & Karnick's random Maclaurin features" and "Assembly"):
//! the degree blocks of a fitted [`MaclaurinMap`] run through the sketch
//! kernels (`shaders/sketch.wgsl`, the same random parameters), each writing
//! its column range of the output rows, then `shaders/maclaurin.wgsl` writes
//! the constant and h01 columns and multiplies every row by `σ g(x̃)`.

use ndarray::{Array2, ArrayView2, ArrayViewMut2};

use super::context::{self, Context, WORKGROUP};
use super::gram::{map_gram, Gram};
use super::map::{self, DeviceMap};
use super::sketch::DeviceSketch;
use crate::error::{Error, Result};
use crate::maclaurin::MaclaurinMap;
use crate::real::Real;

/// `Φ(x)` of a fitted Maclaurin map for the rows of `x` on the GPU, in f32:
/// the map of [`MaclaurinMap::transform_centered_into`] with `x̃ = (x − c)/l`
/// for `center` `c` (the fitted center when `None`). The centering, `x̃` and
/// the row factor `σ g(x̃)` are computed in f64 on the host and rounded to
/// f32; each degree-`n` block then carries the error of
/// [`super::sketch_features`] (about `n γ_d Π_j Σ_a |x̃_a w_{j,ia}| / √D_n`
/// relative to `σ g √a_n`), the constant and h01 columns a few f32 roundings.
///
/// # Errors
/// [`Error::Gpu`] when no adapter is usable or the device fails;
/// [`Error::InvalidParameter`] for a map without a GPU kernel (see
/// [`super::check_maclaurin`]) and the argument errors of
/// [`MaclaurinMap::transform_centered_into`].
pub fn maclaurin_features_into<T: Real>(
    map: &MaclaurinMap,
    x: ArrayView2<T>,
    center: Option<&[f64]>,
    out: ArrayViewMut2<T>,
) -> Result<()> {
    super::check_maclaurin(map)?;
    let center = center_of(map, center);
    map.check_centered(x, &center)?;
    Error::check_out_shape((x.nrows(), map.width()), out.dim())?;
    let ctx = context::get()?;
    if x.nrows() == 0 {
        return Ok(());
    }
    let _session = ctx.session()?;
    let dev = DeviceMaclaurin::new(ctx, map, center)?;
    map::run(ctx, &dev, x, out)
}

/// Allocating wrapper of [`maclaurin_features_into`].
///
/// # Errors
/// As [`maclaurin_features_into`].
pub fn maclaurin_features<T: Real>(
    map: &MaclaurinMap,
    x: ArrayView2<T>,
    center: Option<&[f64]>,
) -> Result<Array2<T>> {
    let mut out = Array2::zeros((x.nrows(), map.width()));
    maclaurin_features_into(map, x, center, out.view_mut())?;
    Ok(out)
}

/// `Φᵀ Φ` and `Φᵀ y` of `Φ = Φ(x)` centered at `center` (the fitted center
/// when `None`) on the GPU, without `Φ` leaving the device: the features of
/// [`maclaurin_features_into`] accumulated as in [`super::gram`].
///
/// # Errors
/// As [`maclaurin_features_into`] and [`super::gram`].
pub fn maclaurin_gram<T: Real>(
    map: &MaclaurinMap,
    x: ArrayView2<T>,
    center: Option<&[f64]>,
    y: Option<ArrayView2<f64>>,
) -> Result<Gram> {
    super::check_maclaurin(map)?;
    let center = center_of(map, center);
    map.check_centered(x, &center)?;
    let ctx = context::get()?;
    let _session = ctx.session()?;
    let dev = DeviceMaclaurin::new(ctx, map, center)?;
    map_gram(ctx, "n_components", &dev, x, y, false)
}

fn center_of(map: &MaclaurinMap, center: Option<&[f64]>) -> Vec<f64> {
    center
        .or(map.center())
        .map_or_else(|| vec![0.0; map.dim()], <[f64]>::to_vec)
}

/// A Maclaurin map on the device: its degree blocks, placed side by side.
pub(super) struct DeviceMaclaurin<'a> {
    map: &'a MaclaurinMap,
    center: Vec<f64>,
    blocks: Vec<DeviceSketch>,
    n_const: usize,
    h01_end: usize,
    sketch_end: usize,
}

impl<'a> DeviceMaclaurin<'a> {
    /// Uploads the sketches of `map` (checked by [`super::check_maclaurin`]).
    pub(super) fn new(ctx: &Context, map: &'a MaclaurinMap, center: Vec<f64>) -> Result<Self> {
        let d = map.dim();
        let n_const = map.allocation().first().copied().unwrap_or(0);
        let h01_end = n_const + if map.config().h01 { d } else { 0 };
        let mut col = h01_end;
        let mut blocks = Vec::new();
        for (scale, sk) in map.sketch_blocks() {
            blocks.push(DeviceSketch::new(ctx, sk, 0.0, 1.0)?.placed(
                d + 1,
                col,
                map.width(),
                scale,
            ));
            col += sk.width();
        }
        Ok(Self {
            map,
            center,
            blocks,
            n_const,
            h01_end,
            sketch_end: col,
        })
    }
}

impl DeviceMap for DeviceMaclaurin<'_> {
    fn in_dim(&self) -> usize {
        self.map.dim() + 1
    }

    fn width(&self) -> usize {
        self.map.width()
    }

    fn scratch_per_row(&self) -> usize {
        self.blocks
            .iter()
            .map(DeviceMap::scratch_per_row)
            .max()
            .unwrap_or(0)
    }

    /// Rows `[x̃ | σ g(x̃)]` with `x̃ = (x − c)/l`, in f64 then rounded.
    fn stage<T: Real>(&self, x: ArrayView2<T>) -> Vec<f32> {
        let cfg = self.map.config();
        let inv_l = 1.0 / cfg.length_scale;
        let sigma = cfg.kernel_variance.sqrt();
        let d = self.map.dim();
        let mut v = Vec::with_capacity(x.nrows() * (d + 1));
        let mut xt = vec![0.0f64; d];
        for row in x.rows() {
            for ((o, a), c) in xt.iter_mut().zip(row).zip(&self.center) {
                *o = (a.to_f64_exact() - c) * inv_l;
            }
            let sq: f64 = xt.iter().map(|t| t * t).sum();
            v.extend(xt.iter().map(|&t| t as f32));
            v.push((sigma * cfg.kernel.ln_prefactor(sq).exp()) as f32);
        }
        v
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
        for b in &self.blocks {
            b.record(ctx, encoder, keep, x, scratch, rows, out)?;
        }
        let coefs = self.map.coefficients();
        let sqrt_a = |n: usize| coefs.get(n).map_or(0.0, |a| a.sqrt()) as f32;
        let width = self.map.width();
        let params = ctx.uniform(&[
            rows as u32,
            self.map.dim() as u32,
            width as u32,
            self.n_const as u32,
            self.h01_end as u32,
            self.sketch_end as u32,
            sqrt_a(0).to_bits(),
            sqrt_a(1).to_bits(),
        ]);
        let pipe = &ctx.pipelines.mac_finish;
        let bind = ctx.bind(pipe, &[x, out, &params]);
        let count = (rows * width).div_ceil(WORKGROUP as usize) as u64;
        ctx.dispatch(encoder, pipe, &bind, count, 1)?;
        keep.push(params);
        Ok(())
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::gpu::context::tests::random;
    use crate::maclaurin::map::{AllocationStrategy, MaclaurinConfig};
    use crate::maclaurin::MaclaurinKernel;
    use crate::sketch::{SketchKind, SketchParams};
    use crate::{Monitor, Parallelism};

    /// Per-row error bound: `1e-4 σ g Σ_blocks s_n M^n / √D_n` with
    /// `M = ‖x̃‖₁ max|w|` bounding every factor's `Σ_a |x̃_a w_{j,ia}|` (a
    /// relative accuracy of 1e-4 on the scale of the products, as the
    /// sketch tests), plus `1e-6` relative for the fixed columns.
    pub(in crate::gpu) fn row_bound(map: &MaclaurinMap, xt: &[f64]) -> f64 {
        let cfg = map.config();
        let sq: f64 = xt.iter().map(|t| t * t).sum();
        let g = cfg.kernel_variance.sqrt() * cfg.kernel.ln_prefactor(sq).exp();
        let l1: f64 = xt.iter().map(|t| t.abs()).sum();
        let mut b = 1e-6 * g * (1.0 + xt.iter().fold(0.0f64, |m, t| m.max(t.abs())));
        for (scale, sk) in map.sketch_blocks() {
            let wmax = match sk.params() {
                SketchParams::Dense { weights } => weights
                    .iter()
                    .flat_map(|w| w.iter())
                    .fold(0.0f64, |m, v| m.max(v.abs())),
                _ => 1.0,
            };
            let m = l1 * wmax;
            b += 1e-4 * g * scale * m.powi(sk.degree() as i32) / (sk.n_features() as f64).sqrt();
        }
        b
    }

    fn compare(map: &MaclaurinMap, x: &Array2<f64>, center: Option<&[f64]>) {
        let c = center_of(map, center);
        let cpu = {
            let mut o = Array2::<f64>::zeros((x.nrows(), map.width()));
            map.transform_centered_into(x.view(), &c, o.view_mut(), Parallelism::Sequential)
                .unwrap();
            o
        };
        let before = context::dispatch_count();
        let g64 = maclaurin_features(map, x.view(), center).unwrap();
        assert!(context::dispatch_count() > before, "the GPU ran");
        let g32 = maclaurin_features(map, x.mapv(|v| v as f32).view(), center).unwrap();
        let l = map.config().length_scale;
        for r in 0..x.nrows() {
            let xt: Vec<f64> = x.row(r).iter().zip(&c).map(|(v, c)| (v - c) / l).collect();
            let tol = row_bound(map, &xt);
            for k in 0..map.width() {
                let e = cpu[(r, k)];
                assert!(
                    (g64[(r, k)] - e).abs() <= tol,
                    "({r},{k}): {} vs {e} (tol {tol})",
                    g64[(r, k)]
                );
                assert!((f64::from(g32[(r, k)]) - e).abs() <= tol + 1e-6 * e.abs());
            }
        }
    }

    fn config(kernel: MaclaurinKernel, d_out: usize, sketch: SketchKind) -> MaclaurinConfig {
        let mut c = MaclaurinConfig::new(kernel, d_out);
        c.sketch = sketch;
        c.length_scale = 1.7;
        c.kernel_variance = 1.3;
        c
    }

    #[test]
    fn maclaurin_matches_cpu() {
        context::tests::ctx();
        // d = 5 (d' = 8), N = 70: not multiples of the tile, the workgroup
        // or d'; D not a multiple of d'.
        let x = random(70, 5, 1.0, 3);
        // Gaussian kernel, optimized allocation, real TensorSRHT.
        let cfg = config(MaclaurinKernel::Gaussian, 37, SketchKind::TensorSrht);
        let map = MaclaurinMap::fit(
            x.view(),
            &cfg,
            5,
            Parallelism::Sequential,
            &Monitor::default(),
        )
        .unwrap();
        compare(&map, &x, None);
        compare(&map, &x, Some(&[0.1, -0.2, 0.3, 0.0, 0.5]));
        // Polynomial kernel with h01, complex Rademacher, an explicit
        // allocation and a zero column (1 + 5 + 2·14 = 34 of 35).
        let mut cfg = config(
            MaclaurinKernel::Polynomial {
                degree: 3,
                bias: 1.0,
            },
            35,
            SketchKind::Rademacher,
        );
        cfg.h01 = true;
        cfg.complex = true;
        cfg.allocation = AllocationStrategy::Explicit(vec![1, 5, 10, 4]);
        let map = MaclaurinMap::fit(
            x.view(),
            &cfg,
            6,
            Parallelism::Sequential,
            &Monitor::default(),
        )
        .unwrap();
        compare(&map, &x, None);
        // Exponential kernel, Kar & Karnick degrees, Gaussian sketch.
        let mut cfg = config(MaclaurinKernel::Exponential, 40, SketchKind::Gaussian);
        cfg.allocation = AllocationStrategy::Random;
        cfg.max_degree = 4;
        let map = MaclaurinMap::fit(
            x.view(),
            &cfg,
            7,
            Parallelism::Sequential,
            &Monitor::default(),
        )
        .unwrap();
        compare(&map, &(&x * 0.5), None);
    }

    #[test]
    fn maclaurin_gram_and_errors() {
        context::tests::ctx();
        let x = random(50, 3, 1.0, 9);
        let y = random(50, 1, 1.0, 10);
        let cfg = config(MaclaurinKernel::Gaussian, 21, SketchKind::TensorSrht);
        let map = MaclaurinMap::fit(
            x.view(),
            &cfg,
            1,
            Parallelism::Sequential,
            &Monitor::default(),
        )
        .unwrap();
        let c = [0.2, 0.1, -0.3];
        let phi = maclaurin_features(&map, x.view(), Some(&c)).unwrap();
        let g = maclaurin_gram(&map, x.view(), Some(&c), Some(y.view())).unwrap();
        // The Gram of the same f32 features, to the bound of `gram`.
        let p32 = phi.mapv(|v| f64::from(v as f32));
        let exact = p32.t().dot(&p32);
        let abs = p32.mapv(f64::abs).t().dot(&p32.mapv(f64::abs));
        let gamma = 64.0 * f64::from(f32::EPSILON) / 2.0;
        for ((e, m), v) in exact.iter().zip(&abs).zip(&g.phi_t_phi) {
            assert!((e - v).abs() <= 1.01 * gamma * m);
        }
        assert_eq!(g.phi_t_y.unwrap().dim(), (21, 1));
        // Empty input, wrong shapes, non-finite values, unsupported maps.
        let e = maclaurin_features(&map, x.slice(ndarray::s![..0, ..]), None).unwrap();
        assert_eq!(e.dim(), (0, 21));
        assert!(matches!(
            maclaurin_features(&map, random(4, 2, 1.0, 1).view(), None),
            Err(Error::ShapeMismatch { .. })
        ));
        let mut bad = x.clone();
        bad[(0, 0)] = f64::NAN;
        assert!(matches!(
            maclaurin_features(&map, bad.view(), None),
            Err(Error::NonFinite { name: "X" })
        ));
        let x1 = random(20, 1, 1.0, 2);
        let cfg1 = config(MaclaurinKernel::Gaussian, 6, SketchKind::TensorSrht);
        let m1 = MaclaurinMap::fit(
            x1.view(),
            &cfg1,
            1,
            Parallelism::Sequential,
            &Monitor::default(),
        )
        .unwrap();
        assert!(matches!(
            maclaurin_features(&m1, x1.view(), None),
            Err(Error::InvalidParameter { name: "device", .. })
        ));
        let mut cfg_ts = config(MaclaurinKernel::Exponential, 20, SketchKind::TensorSketch);
        cfg_ts.allocation = AllocationStrategy::Random;
        let ts = MaclaurinMap::fit(
            x.view(),
            &cfg_ts,
            1,
            Parallelism::Sequential,
            &Monitor::default(),
        )
        .unwrap();
        assert!(matches!(
            maclaurin_features(&ts, x.view(), None),
            Err(Error::InvalidParameter { name: "sketch", .. })
        ));
    }
}
