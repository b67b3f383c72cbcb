//! Random Fourier features on the GPU from plain arrays
//! (`docs/math/fourier.rst`, "Feature variants"); shader `shaders/rff.wgsl`.
//! The CPU RFF transformer passes its fitted `W`, phases and scale here.

use ndarray::{Array2, ArrayView1, ArrayView2, ArrayViewMut2};

use super::context::{self, Context};
use super::gram::{check_y_rows, map_gram, Gram};
use super::map::{self, DeviceMap};
use crate::error::{Error, Result};
use crate::fourier::Variant;
use crate::real::{all_finite, Real};
use crate::threads::Parallelism;

/// Output tile edge of `rff.wgsl`.
const TILE: usize = 64;

/// Random Fourier features of the rows of `x` (`N x d`) for the frequencies
/// `w` (`m x d`, one per row), on the GPU in f32: see [`Variant`] for
/// the formulas (the scale is the caller's). Returns `N x m` (`CosBias`) or `N x 2m` (`CosSin`, block
/// layout `[cos | sin]`). Accuracy: the projection carries the rounding of a
/// length-`d` f32 dot product, the argument `t_j = x·w_j + b_j` its f32
/// rounding, and `sin`/`cos` about `1e-7` absolute after an explicit range
/// reduction, exact for `|t| < 2^15 π/2` and off by at most about
/// `2^-24 |t|` beyond, so each feature is within
/// `|scale| (γ_d Σ_a |x_a w_ja| + 2^-24 |b_j| + 2^-23 |t_j| + 1e-6)` of the
/// exact value, and within `[-|scale|, |scale|]` for every finite `t_j`.
///
/// # Errors
/// [`Error::Gpu`] when no adapter is usable or the device fails;
/// [`Error::ShapeMismatch`] when `w` and `x` disagree on `d`, or the phases
/// are not `m` long; [`Error::InvalidParameter`] when `CosBias` has no
/// phases, `CosSin` has phases, or `scale` is not finite;
/// [`Error::NonFinite`] naming `x` for non-finite input, and
/// [`Error::InvalidParameter`] naming `x` when the projections overflow
/// f32's range (input beyond it included).
pub fn rff_features<T: Real>(
    x: ArrayView2<T>,
    w: ArrayView2<T>,
    phases: Option<ArrayView1<T>>,
    variant: Variant,
    scale: T,
) -> Result<Array2<T>> {
    let mut out = Array2::zeros((x.nrows(), variant.n_columns(w.nrows())));
    rff_features_into(x, w, phases, variant, scale, out.view_mut())?;
    Ok(out)
}

/// [`rff_features`] written into `out` (`N x m` or `N x 2m`, any strides).
///
/// # Errors
/// As [`rff_features`], plus [`Error::ShapeMismatch`] for a wrong `out`.
pub fn rff_features_into<T: Real>(
    x: ArrayView2<T>,
    w: ArrayView2<T>,
    phases: Option<ArrayView1<T>>,
    variant: Variant,
    scale: T,
    out: ArrayViewMut2<T>,
) -> Result<()> {
    let ctx = context::get()?;
    let n = x.nrows();
    let m = w.nrows();
    let ncols = variant.n_columns(m);
    check_args(x, w, phases, variant, scale)?;
    Error::check_out_shape((n, ncols), out.dim())?;
    if n == 0 || m == 0 {
        return Ok(());
    }
    let _session = ctx.session()?;
    let map = DeviceRff::new(ctx, w, phases, variant, scale)?;
    let mut out = out;
    map::run(ctx, &map, x, out.view_mut())?;
    // `sin`/`cos` of a finite argument are finite: a non-finite feature
    // comes from a projection beyond f32's range.
    if !all_finite(out.view(), Parallelism::Rayon) {
        return Err(projection_overflow());
    }
    Ok(())
}

/// The refusal of features whose projections `x·w_j` overflow f32's range
/// (input beyond it included): their `sin`/`cos` are NaN.
fn projection_overflow() -> Error {
    Error::invalid(
        "x",
        format!(
            "its projections x·w_j overflow the float32 range (|v| <= {:e}) the GPU computes \
             in: scale x down, or compute the features on the CPU",
            f32::MAX
        ),
    )
}

/// `Φᵀ Φ` and `Φᵀ y` of the random Fourier features `Φ` of the rows of `x`
/// (those of [`rff_features`]) on the GPU, without `Φ` leaving the device:
/// each row chunk of `x` is uploaded once, its features are written to a
/// device buffer and accumulated there as in [`super::gram`] (same error
/// bound, with `Φ` the f32 features); only the `D x D` partial sums come
/// back and are added in f64 on the host.
///
/// # Errors
/// As [`rff_features`] and [`super::gram`].
pub fn rff_gram<T: Real, W: Real>(
    x: ArrayView2<T>,
    w: ArrayView2<W>,
    phases: Option<ArrayView1<W>>,
    variant: Variant,
    scale: W,
    y: Option<ArrayView2<f64>>,
) -> Result<Gram> {
    let ctx = context::get()?;
    check_y_rows(x.nrows(), y.as_ref().map(|y| y.nrows()))?;
    check_args(x, w, phases, variant, scale)?;
    let _session = ctx.session()?;
    let dev = DeviceRff::new(ctx, w, phases, variant, scale)?;
    let g = map_gram(ctx, "n_components", &dev, x, y, false)?;
    // Features of finite projections are within `[-|scale|, |scale|]`, so
    // their sums are finite: NaN comes from projections beyond f32's range.
    if !g.phi_t_phi.iter().all(|v| v.is_finite()) {
        return Err(projection_overflow());
    }
    Ok(g)
}

/// Checks the arguments of [`rff_features`] for the input `x`.
fn check_args<T: Real, W: Real>(
    x: ArrayView2<T>,
    w: ArrayView2<W>,
    phases: Option<ArrayView1<W>>,
    variant: Variant,
    scale: W,
) -> Result<()> {
    let d = x.ncols();
    let m = w.nrows();
    if w.ncols() != d {
        return Err(Error::ShapeMismatch {
            name: "columns of W (the input dimension d)",
            expected: d,
            got: w.ncols(),
        });
    }
    match (variant, &phases) {
        (Variant::CosBias, None) => {
            return Err(Error::invalid("phases", "variant cos_bias needs m phases"))
        }
        (Variant::CosSin, Some(_)) => {
            return Err(Error::invalid("phases", "variant cos_sin takes no phases"))
        }
        (_, Some(b)) if b.len() != m => {
            return Err(Error::ShapeMismatch {
                name: "length of phases",
                expected: m,
                got: b.len(),
            })
        }
        _ => {}
    }
    if !scale.is_finite() {
        return Err(Error::invalid(
            "scale",
            format!("must be finite, got {scale}"),
        ));
    }
    if !all_finite(x, Parallelism::Rayon) {
        return Err(Error::NonFinite { name: "x" });
    }
    Ok(())
}

/// Random Fourier features uploaded to the device (see [`rff_features`]).
pub(super) struct DeviceRff {
    d: usize,
    m: usize,
    variant: Variant,
    scale: f32,
    w: wgpu::Buffer,
    phases: wgpu::Buffer,
}

impl DeviceRff {
    /// Uploads `w` (`m x d`) and the phases (checked by the caller).
    pub(super) fn new<T: Real>(
        ctx: &Context,
        w: ArrayView2<T>,
        phases: Option<ArrayView1<T>>,
        variant: Variant,
        scale: T,
    ) -> Result<Self> {
        let to_f32 = |v: &T| v.to_f64_exact() as f32;
        let (m, d) = w.dim();
        if m * d > ctx.max_binding_floats() {
            return Err(Error::Gpu(format!(
                "W with {m} x {d} floats exceeds the device's largest binding"
            )));
        }
        let w_buf = ctx.storage(m * d);
        ctx.upload(&w_buf, &w.iter().map(to_f32).collect::<Vec<f32>>());
        let b_buf = ctx.storage(m);
        if let Some(b) = &phases {
            ctx.upload(&b_buf, &b.iter().map(to_f32).collect::<Vec<f32>>());
        }
        Ok(Self {
            d,
            m,
            variant,
            scale: scale.to_f64_exact() as f32,
            w: w_buf,
            phases: b_buf,
        })
    }
}

impl DeviceMap for DeviceRff {
    fn in_dim(&self) -> usize {
        self.d
    }

    fn width(&self) -> usize {
        self.variant.n_columns(self.m)
    }

    fn scratch_per_row(&self) -> usize {
        0
    }

    fn stage<T: Real>(&self, x: ArrayView2<T>) -> Vec<f32> {
        map::stage_rows(x, None, 1.0)
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
        let pipe = &ctx.pipelines.rff;
        let tiles_k = self.m.div_ceil(TILE);
        let params = ctx.uniform(&[
            rows as u32,
            self.d as u32,
            self.m as u32,
            self.width() as u32,
            u32::from(self.variant == Variant::CosSin),
            self.scale.to_bits(),
            tiles_k as u32,
            0,
        ]);
        let bind = ctx.bind(pipe, &[x, &self.w, &self.phases, out, &params]);
        ctx.dispatch(
            encoder,
            pipe,
            &bind,
            (rows.div_ceil(TILE) * tiles_k) as u64,
            1,
        )?;
        keep.push(params);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::context::tests::random;
    use ndarray::{s, Array1};

    #[test]
    fn rff_matches_f64_reference() {
        context::tests::ctx();
        // d not a multiple of 16, N and m not multiples of the 64 tile.
        for &(n, d, m) in &[(1, 1, 1), (70, 3, 65), (130, 37, 20)] {
            let x = random(n, d, 2.0, 1);
            let w = random(m, d, 3.0, 2);
            let b = Array1::from_shape_fn(m, |j| (j as f32 * 0.7) % std::f32::consts::TAU);
            let scale = 0.3f32;
            let cb =
                rff_features(x.view(), w.view(), Some(b.view()), Variant::CosBias, scale).unwrap();
            let cs = rff_features(x.view(), w.view(), None, Variant::CosSin, scale).unwrap();
            for r in 0..n {
                for j in 0..m {
                    let proj: f64 = (0..d)
                        .map(|a| f64::from(x[(r, a)]) * f64::from(w[(j, a)]))
                        .sum();
                    let tol = 1e-4 * f64::from(scale);
                    let e = f64::from(scale) * (proj + f64::from(b[j])).cos();
                    assert!((f64::from(cb[(r, j)]) - e).abs() <= tol, "cos_bias {r},{j}");
                    let (sn, cn) = proj.sin_cos();
                    assert!((f64::from(cs[(r, j)]) - f64::from(scale) * cn).abs() <= tol);
                    assert!((f64::from(cs[(r, m + j)]) - f64::from(scale) * sn).abs() <= tol);
                }
            }
        }
    }

    /// Arguments `t` from 1 to f32's largest, where the first reduction
    /// step is exact no more: every feature stays in `[-|scale|, |scale|]`
    /// and within the documented bound of the f64 `cos`/`sin` of the f32
    /// argument (here `x·w = t` exactly, `d = 1`, no phase).
    #[test]
    fn rff_large_arguments_stay_in_range() {
        context::tests::ctx();
        let mut t: Vec<f32> = (0..=2 * 128)
            .map(|k| (1.41f64.powi(k) as f32).min(f32::MAX))
            .chain([51471.85, 51472.0, 5e7, 1e9, 1e10, 3e38, f32::MAX])
            .collect();
        t.extend(t.clone().iter().map(|v| -v));
        let x = Array2::from_shape_vec((t.len(), 1), t.clone()).unwrap();
        let w = Array2::<f32>::ones((1, 1));
        let scale = 0.5f32;
        let u = f64::from(f32::EPSILON) / 2.0;
        let f = rff_features(x.view(), w.view(), None, Variant::CosSin, scale).unwrap();
        for (i, &ti) in t.iter().enumerate() {
            let t64 = f64::from(ti);
            // γ_1 |t| + 2^-23 |t| + 1e-6 (in units of |scale|).
            let tol = f64::from(scale) * (u / (1.0 - u) * t64.abs() + 2.0 * u * t64.abs() + 1e-6);
            let (sn, cn) = t64.sin_cos();
            for (got, want) in [(f[(i, 0)], cn), (f[(i, 1)], sn)] {
                assert!(
                    got.abs() <= scale,
                    "t = {ti}: feature {got} beyond the scale"
                );
                let err = (f64::from(got) - f64::from(scale) * want).abs();
                assert!(err <= tol, "t = {ti}: {got} vs {want} (bound {tol})");
            }
        }
    }

    /// Non-finite input is refused, and so are projections (or input)
    /// beyond f32's range, instead of NaN features.
    #[test]
    fn rff_refuses_non_finite_and_overflowing_projections() {
        context::tests::ctx();
        let w = Array2::<f32>::from_elem((2, 1), 2.0);
        for bad in [f32::NAN, f32::INFINITY] {
            let x = Array2::from_elem((3, 1), bad);
            assert!(matches!(
                rff_features(x.view(), w.view(), None, Variant::CosSin, 1.0),
                Err(Error::NonFinite { name: "x" })
            ));
            assert!(matches!(
                rff_gram(x.view(), w.view(), None, Variant::CosSin, 1.0, None),
                Err(Error::NonFinite { name: "x" })
            ));
        }
        let big = Array2::from_elem((3, 1), f32::MAX);
        let beyond = Array2::from_elem((3, 1), 1e39f64);
        let overflow = |r: Result<()>| matches!(r, Err(Error::InvalidParameter { name: "x", reason }) if reason.contains("float32"));
        assert!(overflow(
            rff_features(big.view(), w.view(), None, Variant::CosSin, 1.0).map(|_| ())
        ));
        assert!(overflow(
            rff_gram(big.view(), w.view(), None, Variant::CosSin, 1.0, None).map(|_| ())
        ));
        let w64 = w.mapv(f64::from);
        assert!(overflow(
            rff_features(beyond.view(), w64.view(), None, Variant::CosSin, 1.0).map(|_| ())
        ));
    }

    #[test]
    fn rff_argument_errors() {
        context::tests::ctx();
        let x = random(3, 4, 1.0, 3);
        let w = random(5, 4, 1.0, 4);
        let b = Array1::<f32>::zeros(5);
        let bad_w = random(5, 3, 1.0, 4);
        assert!(matches!(
            rff_features(
                x.view(),
                bad_w.view(),
                Some(b.view()),
                Variant::CosBias,
                1.0
            ),
            Err(Error::ShapeMismatch {
                expected: 4,
                got: 3,
                ..
            })
        ));
        assert!(matches!(
            rff_features(x.view(), w.view(), None, Variant::CosBias, 1.0),
            Err(Error::InvalidParameter { name: "phases", .. })
        ));
        assert!(matches!(
            rff_features(x.view(), w.view(), Some(b.view()), Variant::CosSin, 1.0),
            Err(Error::InvalidParameter { name: "phases", .. })
        ));
        assert!(matches!(
            rff_features(
                x.view(),
                w.view(),
                Some(b.slice(s![..4])),
                Variant::CosBias,
                1.0
            ),
            Err(Error::ShapeMismatch {
                name: "length of phases",
                ..
            })
        ));
        assert!(matches!(
            rff_features(x.view(), w.view(), None, Variant::CosSin, f32::NAN),
            Err(Error::InvalidParameter { name: "scale", .. })
        ));
        let empty = rff_features(
            Array2::<f64>::zeros((0, 4)).view(),
            w.mapv(f64::from).view(),
            None,
            Variant::CosSin,
            1.0,
        )
        .unwrap();
        assert_eq!(empty.dim(), (0, 10));
    }
}
