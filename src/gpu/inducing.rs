//! The sparse GP's kernel block `K_fu = k(X, Z)` and its Gram on the GPU
//! (`docs/math/sparse_gp.rst`, section Devices); shader `shaders/kernel.wgsl`.
//! The block never leaves the device: each row chunk's `K_fu` is written to
//! a device buffer and accumulated there by the Gram kernel of
//! [`super::gram`].

use ndarray::ArrayView2;

use super::context::{self, Context};
use super::gram::{check_y_rows, map_gram, Gram};
use super::map::DeviceMap;
use crate::error::{check_finite, Error, Result};
use crate::kernels::{midrange, Kernel, StationaryKernel};
use crate::real::Real;

/// `K_uf K_fu` (`M × M`) and, with `y` (`N × t`), `K_uf y` (`M × t`) of
/// `K_fu[i, m] = k(x_i, z_m)` for the stationary kernel `params`, on the
/// GPU in f32, reduced in f64 on the host.
///
/// The inputs are centered on the [`midrange`] of the inducing inputs and
/// divided by the length scales in f64, as on the CPU (the kernel is shift
/// invariant, and centering keeps the f32 differences accurate for data far
/// from the origin, as the shifted target statistics do for `y`), then
/// rounded to f32. Each kernel value carries the rounding of those inputs,
/// of the f32 distance and of an explicit `exp` (within 2 ulp, see
/// `kernel.wgsl`); the Gram is the compensated one (`gram_tile_exact` and
/// `reduce_pairs_exact` of `gram.wgsl` and `reduce.wgsl`), which adds at most
/// `(u + 3 n u²) Σ_i |k_im k_im'|` for chunks of `n` rows (all the kernels
/// are positive, so relative to the entry itself): the solves amplify the
/// statistics' error by the conditioning of `K_uu`, so the plain Gram's
/// `γ_64` would cost accuracy the kernel values have. Identical points are
/// at distance exactly 0.
///
/// # Errors
/// [`Error::Gpu`] when no adapter is usable, `M × M` or `M × d` floats
/// exceed the device's largest binding, or the device fails;
/// [`Error::ShapeMismatch`] for `x` or the length scales of another width
/// than `z`, or `y` of another length; [`Error::InvalidParameter`] for bad
/// hyperparameters or inputs whose scaled values exceed the f32 range;
/// [`Error::NonFinite`] for NaN in `z` or `x`.
pub fn inducing_gram(
    params: &StationaryKernel,
    z: ArrayView2<'_, f64>,
    x: ArrayView2<'_, f64>,
    y: Option<ArrayView2<'_, f64>>,
) -> Result<Gram> {
    let ctx = context::get()?;
    let d = z.ncols();
    params.validate(d)?;
    Error::check_n_features(d, x.ncols())?;
    check_y_rows(x.nrows(), y.as_ref().map(|y| y.nrows()))?;
    check_finite("inducing", z.iter())?;
    check_finite("X", x.iter())?;
    let _session = ctx.session()?;
    let dev = DeviceKernel::new(ctx, params, z)?;
    dev.check_range(x)?;
    map_gram(ctx, "inducing", &dev, x, y, true)
}

/// The shader's code of a kernel (see `kernel.wgsl`).
fn kernel_code(kernel: Kernel) -> u32 {
    match kernel {
        Kernel::Gaussian => 0,
        Kernel::Laplacian => 1,
        Kernel::Matern12 => 2,
        Kernel::Matern32 => 3,
        Kernel::Matern52 => 4,
    }
}

/// The inducing inputs on the device, scaled and centered (see
/// [`inducing_gram`]), with the kernel.
struct DeviceKernel {
    d: usize,
    m: usize,
    kernel: u32,
    variance: f32,
    /// The length scale of each input dimension.
    length_scales: Vec<f64>,
    /// The midrange of the inducing inputs, subtracted from every row
    /// before it is scaled.
    center: Vec<f64>,
    z: wgpu::Buffer,
}

impl DeviceKernel {
    /// Scales, centers and uploads `z` (`M × d`, finite, checked by the
    /// caller with the hyperparameters).
    fn new(ctx: &Context, params: &StationaryKernel, z: ArrayView2<'_, f64>) -> Result<Self> {
        let (m, d) = z.dim();
        if m * d > ctx.max_binding_floats() {
            return Err(Error::Gpu(format!(
                "the {m} x {d} inducing inputs exceed the device's largest binding"
            )));
        }
        let length_scales: Vec<f64> = (0..d).map(|a| params.length_scale_of(a)).collect();
        let center = midrange(z);
        let dev = Self {
            d,
            m,
            kernel: kernel_code(params.kernel),
            variance: params.variance as f32,
            length_scales,
            center,
            z: ctx.storage(m * d),
        };
        dev.check_range(z)?;
        ctx.upload(&dev.z, &dev.stage(z));
        Ok(dev)
    }

    /// `Ok` when every scaled, centered value of `x` is a finite f32 (and
    /// the kernel variance too).
    fn check_range(&self, x: ArrayView2<'_, f64>) -> Result<()> {
        let limit = f64::from(f32::MAX);
        let fits = x.rows().into_iter().all(|row| {
            row.iter()
                .zip(self.length_scales.iter().zip(&self.center))
                .all(|(&v, (&l, &c))| ((v - c) / l).abs() < limit)
        });
        if !fits || !self.variance.is_finite() || self.variance == 0.0 {
            return Err(Error::invalid(
                "X",
                "the inputs divided by the length scales (or the kernel variance) are outside \
                 the float32 range of the GPU path; use device=\"cpu\"",
            ));
        }
        Ok(())
    }
}

impl DeviceMap for DeviceKernel {
    fn in_dim(&self) -> usize {
        self.d
    }

    fn width(&self) -> usize {
        self.m
    }

    fn scratch_per_row(&self) -> usize {
        0
    }

    /// `(x_a − c_a) / l_a` in f64, rounded to f32.
    fn stage<T: Real>(&self, x: ArrayView2<T>) -> Vec<f32> {
        let mut v = Vec::with_capacity(x.len());
        for row in x.rows() {
            v.extend(
                row.iter()
                    .zip(self.length_scales.iter().zip(&self.center))
                    .map(|(a, (&l, &c))| ((a.to_f64_exact() - c) / l) as f32),
            );
        }
        v
    }

    fn record(
        &self,
        ctx: &Context,
        encoder: &mut wgpu::CommandEncoder,
        keep: &mut Vec<wgpu::Buffer>,
        x: &wgpu::Buffer,
        _scratch: &wgpu::Buffer,
        rows: usize,
        out: &wgpu::Buffer,
    ) -> Result<()> {
        let pipe = &ctx.pipelines.cross_kernel;
        let params = ctx.uniform(&[
            rows as u32,
            self.m as u32,
            self.d as u32,
            self.kernel,
            self.variance.to_bits(),
            0,
            0,
            0,
        ]);
        let bind = ctx.bind(pipe, &[x, &self.z, out, &params]);
        let groups = (rows * self.m).div_ceil(context::WORKGROUP as usize);
        ctx.dispatch(encoder, pipe, &bind, groups as u64, 1)?;
        keep.push(params);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use ndarray::{Array1, Array2};

    use super::*;
    use crate::gp::sparse::kernel_matrix;
    use crate::gpu::context::tests::{ctx, random};
    use crate::threads::Parallelism;

    const U: f64 = f32::EPSILON as f64 / 2.0;

    fn gamma(k: usize) -> f64 {
        k as f64 * U / (1.0 - k as f64 * U)
    }

    /// The relative error bound `ε` of the f32 kernel value `k(x, z)` of
    /// [`inducing_gram`] (see docs/math/sparse_gp.rst, section Devices), from
    /// the scaled, centered inputs `u`, `w` in f64: each difference is
    /// within `e_a = 1.01 u (|u_a| + |w_a| + |δ_a|)` (the two roundings to
    /// f32 and the subtraction), the distance adds `γ_d` of its own terms,
    /// the Gaussian's and the Laplacian's `ln κ` move by `Δρ/2` and `Δρ`,
    /// the Matérn kernels' (as a function of `a = √(cρ)`, slope within
    /// `[−1, 0]`) by `Δa = √c min(√Δρ, Δρ/√ρ) + 7u a` (the rounding of `cρ`
    /// and of `sqrt`), and `exp`, the polynomial factor and the variance add
    /// at most `12u`.
    fn value_bound(kernel: Kernel, u: &[f64], w: &[f64]) -> f64 {
        let d = u.len();
        let (mut rho, mut spread) = (0.0, 0.0);
        for (&ua, &wa) in u.iter().zip(w) {
            let delta = ua - wa;
            let e = 1.01 * U * (ua.abs() + wa.abs() + delta.abs());
            if kernel.uses_l1() {
                rho += delta.abs();
                spread += e;
            } else {
                rho += delta * delta;
                spread += 2.0 * delta.abs() * e + e * e;
            }
        }
        let d_rho = spread + gamma(d + 1) * (rho + spread);
        let d_log = match kernel {
            Kernel::Gaussian => 0.5 * d_rho,
            Kernel::Laplacian => d_rho,
            _ => {
                let c: f64 = match kernel {
                    Kernel::Matern12 => 1.0,
                    Kernel::Matern32 => 3.0,
                    _ => 5.0,
                };
                let root = if rho > 0.0 {
                    d_rho.sqrt().min(d_rho / rho.sqrt())
                } else {
                    d_rho.sqrt()
                };
                c.sqrt() * root + 7.0 * U * (c * rho).sqrt()
            }
        };
        d_log.exp_m1() + 12.0 * U
    }

    /// The bound of `|G̃ − G|` and `|b̃ − b|` entrywise for `K` (`N × M`, f64,
    /// positive), the value bounds `eps` (`N × M`) and the targets `y`:
    /// `Σ_i k_im k_im' ((1 + ε_im)(1 + ε_im')(1 + a) − 1)` and
    /// `Σ_i k_im |y_i| ((1 + ε_im)(1 + u)(1 + a) − 1)` with the compensated
    /// Gram's `a = u + 3 N u²` (see `super::gram::accumulate`), plus the
    /// f32 underflow of values below `2^−126 σ²` (flushed to 0).
    fn gram_bounds(
        k: &Array2<f64>,
        eps: &Array2<f64>,
        y: &Array1<f64>,
        var: f64,
    ) -> (Array2<f64>, Array1<f64>) {
        let (n, m) = k.dim();
        let g = U + 3.0 * n as f64 * U * U;
        let tiny = var * 2f64.powi(-126);
        let mut bg = Array2::<f64>::zeros((m, m));
        let mut by = Array1::<f64>::zeros(m);
        for i in 0..n {
            for a in 0..m {
                let ka = k[(i, a)];
                for b in 0..m {
                    let kb = k[(i, b)];
                    bg[(a, b)] +=
                        ka * kb * ((1.0 + eps[(i, a)]) * (1.0 + eps[(i, b)]) * (1.0 + g) - 1.0)
                            + tiny * (ka + kb + tiny);
                }
                by[a] +=
                    (ka * ((1.0 + eps[(i, a)]) * (1.0 + U) * (1.0 + g) - 1.0) + tiny) * y[i].abs();
            }
        }
        (bg, by)
    }

    #[test]
    fn statistics_match_f64_within_the_bound() {
        ctx();
        let kernels = [
            Kernel::Gaussian,
            Kernel::Laplacian,
            Kernel::Matern12,
            Kernel::Matern32,
            Kernel::Matern52,
        ];
        // Data far from the origin (the centering keeps the differences
        // accurate), N not a multiple of the Gram's tiles, one row equal to
        // an inducing input (distance exactly 0), ARD length scales.
        let (n, d, m) = (301, 3, 21);
        let x = random(n, d, 2.0f64, 1).mapv(|v| v + 40.0);
        let mut z = random(m, d, 2.0f64, 2).mapv(|v| v + 40.0);
        z.row_mut(3).assign(&x.row(7));
        let y = random(n, 1, 1.0f64, 3);
        for (t, &kernel) in kernels.iter().enumerate() {
            let params = StationaryKernel {
                kernel,
                length_scale: if t % 2 == 0 {
                    vec![0.9]
                } else {
                    vec![0.7, 1.3, 2.0]
                },
                variance: 1.7,
            };
            let g = inducing_gram(&params, z.view(), x.view(), Some(y.view())).unwrap();
            let k = kernel_matrix(&params, x.view(), z.view(), Parallelism::Rayon);
            let c = midrange(z.view());
            let (u, w) = (params.scale(x.view(), &c), params.scale(z.view(), &c));
            let eps = Array2::from_shape_fn((n, m), |(i, j)| {
                value_bound(
                    kernel,
                    u.row(i).as_slice().unwrap(),
                    w.row(j).as_slice().unwrap(),
                )
            });
            let (bg, by) = gram_bounds(&k, &eps, &y.column(0).to_owned(), params.variance);
            let exact = k.t().dot(&k);
            let exact_y = k.t().dot(&y.column(0));
            for ((got, want), b) in g.phi_t_phi.iter().zip(&exact).zip(&bg) {
                assert!(
                    (got - want).abs() <= *b,
                    "{kernel:?}: {got} vs {want} (bound {b})"
                );
            }
            let gy = g.phi_t_y.unwrap();
            for ((got, want), b) in gy.column(0).iter().zip(&exact_y).zip(&by) {
                assert!(
                    (got - want).abs() <= *b,
                    "{kernel:?}: {got} vs {want} (bound {b})"
                );
            }
            // The bound is not vacuous: within 1e-4 of the entries.
            assert!(bg.iter().zip(&exact).all(|(b, e)| *b <= 1e-4 * e + 1e-30));
        }
    }

    #[test]
    fn inputs_far_from_the_origin_keep_their_digits() {
        // The same rows shifted by 2^30 (see kernels::tests::shifted_grid):
        // centered before being scaled and rounded to f32, they give the
        // device the same values, so the statistics have the same bits.
        ctx();
        let (x, x_far) = crate::kernels::tests::shifted_grid(97, 3, 4);
        let (z, z_far) = (
            x.slice(ndarray::s![..9, ..]),
            x_far.slice(ndarray::s![..9, ..]),
        );
        let y = random(97, 1, 1.0f64, 5);
        let params = StationaryKernel {
            kernel: Kernel::Matern52,
            length_scale: vec![0.7, 1.1, 1.9],
            variance: 1.3,
        };
        let near = inducing_gram(&params, z, x.view(), Some(y.view())).unwrap();
        let far = inducing_gram(&params, z_far, x_far.view(), Some(y.view())).unwrap();
        assert_eq!(near.phi_t_phi, far.phi_t_phi);
        assert_eq!(near.phi_t_y, far.phi_t_y);
    }

    #[test]
    fn inputs_outside_the_f32_range_and_bad_shapes_are_refused() {
        ctx();
        let params = StationaryKernel {
            kernel: Kernel::Gaussian,
            length_scale: vec![1e-300],
            variance: 1.0,
        };
        let z = random(4, 2, 1.0f64, 4);
        let x = random(5, 2, 1.0f64, 5);
        assert!(matches!(
            inducing_gram(&params, z.view(), x.view(), None),
            Err(Error::InvalidParameter { name: "X", .. })
        ));
        let ok = StationaryKernel {
            length_scale: vec![1.0],
            ..params
        };
        assert!(matches!(
            inducing_gram(&ok, z.view(), random(5, 3, 1.0f64, 6).view(), None),
            Err(Error::ShapeMismatch { .. })
        ));
        let y = random(4, 1, 1.0f64, 7);
        assert!(matches!(
            inducing_gram(&ok, z.view(), x.view(), Some(y.view())),
            Err(Error::ShapeMismatch {
                name: "rows of y",
                ..
            })
        ));
        let mut xn = x.clone();
        xn[(2, 1)] = f64::NAN;
        assert_eq!(
            inducing_gram(&ok, z.view(), xn.view(), None).unwrap_err(),
            Error::NonFinite { name: "X" }
        );
    }
}
