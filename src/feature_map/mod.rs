//! One interface over every fitted dense feature map `Φ: R^d → R^D` with
//! `Φ(x)ᵀΦ(y) ≈ k(x, y)`: the [`FeatureMap`] trait, implemented by the
//! random Fourier features ([`FourierFeatures`], `docs/math/fourier.rst`), the
//! polynomial sketches ([`PolynomialFeatures`], 2), the Maclaurin map
//! ([`MaclaurinMap`], 3–4) and Nyström ([`NystroemFeatures`]), and the
//! dispatch that chooses the device inside Rust:
//!
//! - [`resolve_device`]: `Cpu`, `Gpu` or `Auto` to the device that runs,
//!   given what the map supports and what adapter is usable;
//! - [`transform_into`]: `Φ(X)` on that device;
//! - [`accumulate`]: the sufficient statistics of `docs/math/gp.rst`,
//!   "Feature-space GP" ([`FeatureStats`]) of `(Φ(X), y)`: on the CPU over row
//!   chunks of the features, on the GPU with `Φ` never leaving the device.
//!
//! [`CenteredFeatureMap`] adds the re-expansion around a center that the
//! localized GP (`docs/math/localized.rst`) needs, and [`AnyFeatureMap`] holds
//! any of the maps (for bindings and storage).
//!
//! ```
//! use ndarray::{Array1, Array2};
//! use randfeat_rs::feature_map::{self, FeatureMap};
//! use randfeat_rs::fourier::{FourierConfig, FourierFeatures};
//! use randfeat_rs::gpu::Device;
//! use randfeat_rs::stats::FeatureStats;
//! use randfeat_rs::{Monitor, Parallelism};
//!
//! let map = FourierFeatures::fit(&FourierConfig::new(64), 3, 0)?;
//! let x = Array2::from_shape_fn((100, 3), |(i, j)| ((i * 3 + j) as f64 * 0.1).sin());
//! let y = Array1::from_shape_fn(100, |i| (i as f64 * 0.05).cos());
//! // "auto": the GPU when a hardware adapter is usable, else the CPU.
//! let device = feature_map::resolve_device(&map, Device::Auto)?;
//! let mut stats = FeatureStats::new(map.n_components());
//! let monitor = Monitor::default();
//! feature_map::accumulate(&map, x.view(), y.view(), &mut stats, device, 32, Parallelism::Rayon, &monitor)?;
//! assert_eq!(stats.n, 100);
//! # Ok::<(), randfeat_rs::Error>(())
//! ```

mod fourier;
mod maclaurin;
mod nystroem;
mod polynomial;
#[cfg(test)]
mod tests;

use ndarray::{s, ArrayView1, ArrayView2, ArrayViewMut2, Axis};

use crate::error::{Error, Result};
use crate::fourier::FourierFeatures;
use crate::gpu::{self, Device};
use crate::maclaurin::MaclaurinMap;
use crate::nystroem::NystroemFeatures;
use crate::progress::Monitor;
use crate::real::Real;
use crate::sketch::PolynomialFeatures;
use crate::stats::FeatureStats;
use crate::threads::Parallelism;

/// A fitted dense feature map `Φ: R^d → R^D` with `Φ(x)ᵀΦ(y) ≈ k(x, y)`.
///
/// Implementors give the shapes, the CPU transform and, where a GPU kernel
/// exists, the GPU transform and the fused GPU Gram `ΦᵀΦ`, `Φᵀy`; callers
/// go through the free functions of this module, which check the shapes
/// and choose the device.
pub trait FeatureMap: Sync {
    /// The input dimension `d`.
    fn n_features_in(&self) -> usize;

    /// The output width `D`, zero padding columns included.
    fn n_components(&self) -> usize;

    /// A rough count of the floating-point operations of the CPU transform
    /// of one row: what the Python edge sizes its parallel row ranges by
    /// (work too small to split runs on the calling thread). Within a small
    /// factor of the truth for every map, which an estimate from `d` and
    /// `D` alone is not (TensorSRHT costs `O(D log d)` a row, not `O(dD)`).
    fn row_flops(&self) -> f64;

    /// Checks that the map's fields agree with each other, as its
    /// transforms assume (`O(1)` to `O(D)` a call: shapes and small
    /// vectors; values that take longer to check are checked once per map
    /// and the result kept): the
    /// free functions of this module call it before they size anything by
    /// [`FeatureMap::n_components`], and every transform of the map calls
    /// it too. Maps whose fields are private are checked where they are
    /// built and loaded, and have nothing to check here (the default).
    ///
    /// # Errors
    /// [`Error::ShapeMismatch`] or [`Error::InvalidParameter`] naming the
    /// field, as the map reports them.
    fn validate(&self) -> Result<()> {
        Ok(())
    }

    /// Writes `Φ(x)` for every row of `x` (`n × d`) into `out` (`n × D`,
    /// C-contiguous) on the CPU, in `x`'s precision; deterministic for any
    /// thread count.
    ///
    /// # Errors
    /// Fields that disagree ([`FeatureMap::validate`]), shape mismatches
    /// and non-finite input, as the map reports them.
    fn transform_into<T: Real>(
        &self,
        x: ArrayView2<'_, T>,
        out: ArrayViewMut2<'_, T>,
        par: Parallelism,
    ) -> Result<()>;

    /// `Ok(())` when this configuration has a GPU kernel, else the reason in
    /// plain text (used in error messages, e.g. "tensor_sketch has no GPU
    /// kernel"). A property of the map, not of the machine: whether an
    /// adapter is usable is [`resolve_device`]'s question.
    fn gpu_support(&self) -> std::result::Result<(), String> {
        Err("this feature map has no GPU kernel".into())
    }

    /// `Φ(x)` on the GPU in f32, converted to `x`'s precision (called only
    /// when [`FeatureMap::gpu_support`] is `Ok`; shapes checked by the
    /// caller).
    ///
    /// # Errors
    /// [`Error::Gpu`] when no adapter is usable or the device fails.
    #[cfg(feature = "gpu")]
    fn gpu_transform_into<T: Real>(
        &self,
        x: ArrayView2<'_, T>,
        out: ArrayViewMut2<'_, T>,
    ) -> Result<()> {
        let _ = (x, out);
        Err(unsupported(self))
    }

    /// `ΦᵀΦ` and, with `y` (`n × t`), `Φᵀy` of `Φ = Φ(x)` on the GPU without
    /// `Φ` leaving the device (the error bound of [`gpu::gram`]), `D × D`
    /// with the zero padding (called only when [`FeatureMap::gpu_support`]
    /// is `Ok`).
    ///
    /// # Errors
    /// [`Error::Gpu`] when no adapter is usable or the device fails;
    /// [`Error::ShapeMismatch`] when `y` does not have `n` rows.
    #[cfg(feature = "gpu")]
    fn gpu_gram<T: Real>(
        &self,
        x: ArrayView2<'_, T>,
        y: Option<ArrayView2<'_, f64>>,
    ) -> Result<gpu::Gram> {
        let _ = (x, y);
        Err(unsupported(self))
    }
}

/// A feature map that can be re-expanded around any center `c`:
/// `Φ_c(x) = Φ(x − c)` with `Φ_c(x)ᵀΦ_c(y) ≈ k(x, y)` for every `c` (a
/// shift-invariant kernel), most accurate near `c`. The localized GP of
/// `docs/math/localized.rst` evaluates one map at many centers.
pub trait CenteredFeatureMap: FeatureMap {
    /// Writes `Φ(x − center)` for every row of `x` into `out` on the CPU
    /// (as [`FeatureMap::transform_into`]).
    ///
    /// # Errors
    /// As [`FeatureMap::transform_into`], and a `center` of the wrong
    /// length or with non-finite entries.
    fn transform_centered_into<T: Real>(
        &self,
        x: ArrayView2<'_, T>,
        center: &[f64],
        out: ArrayViewMut2<'_, T>,
        par: Parallelism,
    ) -> Result<()>;

    /// [`CenteredFeatureMap::transform_centered_into`] on the GPU (called
    /// only when [`FeatureMap::gpu_support`] is `Ok`).
    ///
    /// # Errors
    /// As [`FeatureMap::gpu_transform_into`].
    #[cfg(feature = "gpu")]
    fn gpu_transform_centered_into<T: Real>(
        &self,
        x: ArrayView2<'_, T>,
        center: &[f64],
        out: ArrayViewMut2<'_, T>,
    ) -> Result<()>;
}

/// The error of a GPU request for a map without a GPU kernel.
fn unsupported<M: FeatureMap + ?Sized>(map: &M) -> Error {
    let reason = map.gpu_support().err().unwrap_or_default();
    Error::invalid(
        "device",
        format!("device=\"gpu\" is not available: {reason}"),
    )
}

/// `Ok` when `map` has a GPU kernel, else [`unsupported`].
fn check_gpu<M: FeatureMap>(map: &M) -> Result<()> {
    map.gpu_support().map_err(|_| unsupported(map))
}

/// The plain-text reason of a GPU-support check of [`crate::gpu`] (the
/// reason of an [`Error::InvalidParameter`], else the whole message).
fn reason(check: Result<()>) -> std::result::Result<(), String> {
    check.map_err(|e| match e {
        Error::InvalidParameter { reason, .. } => reason,
        other => other.to_string(),
    })
}

/// Refuses features in `T` whose amplitude, a factor every feature carries
/// (`σ` of the kernel variance, times the map's normalization), lies beyond
/// `T`'s range or below its smallest normal number: float32 features of
/// `kernel_variance > ~1e77` would be infinite for every input, those of
/// `kernel_variance < ~1e-75` subnormal (fewer digits) or zero.
///
/// # Errors
/// [`Error::InvalidParameter`] naming `kernel_variance`.
pub(crate) fn check_amplitude<T: Real>(amplitude: f64) -> Result<()> {
    let a = T::from_f64_lossy(amplitude);
    let position = if !a.is_finite() {
        "beyond the range of"
    } else if a < T::min_positive_value() {
        "below the smallest normal number of"
    } else {
        return Ok(());
    };
    let change = if a.is_finite() { "raise" } else { "lower" };
    Err(Error::invalid(
        "kernel_variance",
        format!(
            "every feature carries the factor sqrt(kernel_variance) (times the map's \
             normalization), here {amplitude:e}, {position} {}: transform float64 \
             input, or {change} kernel_variance",
            T::DTYPE
        ),
    ))
}

/// Resolves a requested [`Device`] for `map` to the one that runs, `Cpu` or
/// `Gpu`: `Cpu` stays; `Gpu` needs a GPU kernel for the map
/// ([`FeatureMap::gpu_support`]) and a usable adapter ([`gpu::resolve`]);
/// `Auto` is the GPU when both hold and the adapter is hardware (or
/// `RANDFEAT_GPU=software`), else the CPU.
///
/// # Errors
/// `Gpu` only: [`Error::InvalidParameter`] (`device`) naming why the map has
/// no GPU kernel; [`Error::Gpu`] naming why no adapter is usable (or that
/// the crate was built without the `gpu` feature).
pub fn resolve_device<M: FeatureMap>(map: &M, requested: Device) -> Result<Device> {
    match requested {
        Device::Cpu => Ok(Device::Cpu),
        Device::Gpu => {
            check_gpu(map)?;
            gpu::resolve(Device::Gpu)
        }
        Device::Auto => match map.gpu_support() {
            Ok(()) => gpu::resolve(Device::Auto),
            Err(_) => Ok(Device::Cpu),
        },
    }
}

/// Checks the map's fields, the input width and the output shape of a
/// transform of `x`.
fn check_transform<M: FeatureMap>(map: &M, x: (usize, usize), out: (usize, usize)) -> Result<()> {
    map.validate()?;
    Error::check_n_features(map.n_features_in(), x.1)?;
    Error::check_out_shape((x.0, map.n_components()), out)
}

/// Writes `Φ(x)` (`n × D`, `x`'s precision) into `out` on `device` (`Auto`
/// is resolved first by [`resolve_device`]): the map's CPU transform, or its
/// GPU kernel (f32 on the device, the accuracy its `gpu` function states).
///
/// # Errors
/// The map's fields that disagree ([`FeatureMap::validate`]); shape
/// mismatches; as [`resolve_device`] for `Gpu`; the map's errors
/// (the sketches and the Maclaurin map refuse features that overflow with
/// an [`Error::InvalidParameter`] naming `X`: on the CPU while they are
/// written, after the GPU's output here).
pub fn transform_into<M: FeatureMap, T: Real>(
    map: &M,
    x: ArrayView2<'_, T>,
    out: ArrayViewMut2<'_, T>,
    device: Device,
    par: Parallelism,
) -> Result<()> {
    check_transform(map, x.dim(), out.dim())?;
    if runs_on_gpu(map, device)? {
        #[cfg(feature = "gpu")]
        {
            let mut out = out;
            map.gpu_transform_into(x, out.view_mut())?;
            return crate::sketch::refuse_overflow(crate::real::all_finite(out.view(), par));
        }
    }
    map.transform_into(x, out, par)
}

/// [`transform_into`] of `Φ(x − center)` for a [`CenteredFeatureMap`].
///
/// # Errors
/// As [`transform_into`] and [`CenteredFeatureMap::transform_centered_into`].
pub fn transform_centered_into<M: CenteredFeatureMap, T: Real>(
    map: &M,
    x: ArrayView2<'_, T>,
    center: &[f64],
    out: ArrayViewMut2<'_, T>,
    device: Device,
    par: Parallelism,
) -> Result<()> {
    check_transform(map, x.dim(), out.dim())?;
    if runs_on_gpu(map, device)? {
        #[cfg(feature = "gpu")]
        {
            let mut out = out;
            map.gpu_transform_centered_into(x, center, out.view_mut())?;
            return crate::sketch::refuse_overflow(crate::real::all_finite(out.view(), par));
        }
    }
    map.transform_centered_into(x, center, out, par)
}

/// Whether a call on `device` for `map` runs on the GPU: `Auto` resolved
/// by [`resolve_device`]; `Gpu` checked against the map's kernel (never
/// `Ok(true)` without the `gpu` feature: then [`gpu::resolve`]'s error).
fn runs_on_gpu<M: FeatureMap>(map: &M, device: Device) -> Result<bool> {
    let device = match device {
        Device::Auto => resolve_device(map, Device::Auto)?,
        other => other,
    };
    if device != Device::Gpu {
        return Ok(false);
    }
    check_gpu(map)?;
    if cfg!(feature = "gpu") {
        Ok(true)
    } else {
        gpu::resolve(Device::Gpu).map(|_| false)
    }
}

/// Adds the rows `(x, y)` to `stats`, the sufficient statistics of
/// `docs/math/gp.rst`, "Feature-space GP" of the features `Φ(x)`, on `device`
/// (`Auto` resolved by [`resolve_device`]).
///
/// - CPU: `chunk_rows` rows at a time are transformed into one reused
///   buffer and added by [`FeatureStats::accumulate`] (memory
///   `O(chunk_rows · D + D²)`); the result is that of the same chunks
///   transformed and accumulated one by one. `monitor` gets the stage
///   "rows accumulated" and is checked before every chunk.
/// - GPU: one pass of the map's fused kernel over all rows (the device
///   streams its own chunks) gives `ΦᵀΦ` and `Φᵀ[y − s, 1]` for the shift
///   `s = mean(y)` of these rows, i.e. `Φᵀ(y − s)` and the column sums `Φᵀ1`
///   at once; the target sums `Σ(y − s)`, `Σ(y − s)²` are formed on the host
///   in f64 and the statistics are merged into `stats` exactly
///   ([`FeatureStats::merge`] re-shifts). `chunk_rows` is not used.
///
/// # Errors
/// The map's fields that disagree ([`FeatureMap::validate`]); shape
/// mismatches (`x` against the map, `y` against `x`, `stats` against
/// `D`); `chunk_rows = 0`; non-finite `y` (or `x` on the GPU; the CPU
/// transforms report it); as [`resolve_device`] for `Gpu`; the map's errors.
#[allow(clippy::too_many_arguments)]
pub fn accumulate<M: FeatureMap, T: Real>(
    map: &M,
    x: ArrayView2<'_, T>,
    y: ArrayView1<'_, f64>,
    stats: &mut FeatureStats,
    device: Device,
    chunk_rows: usize,
    par: Parallelism,
    monitor: &Monitor,
) -> Result<()> {
    let (n, d) = x.dim();
    map.validate()?;
    Error::check_n_features(map.n_features_in(), d)?;
    if y.len() != n {
        return Err(Error::ShapeMismatch {
            name: "length of y (the number of rows of X)",
            expected: n,
            got: y.len(),
        });
    }
    if stats.n_features() != map.n_components() {
        return Err(Error::ShapeMismatch {
            name: "number of features of the statistics",
            expected: map.n_components(),
            got: stats.n_features(),
        });
    }
    if chunk_rows == 0 {
        return Err(Error::invalid("chunk_rows", "must be >= 1, got 0"));
    }
    if runs_on_gpu(map, device)? {
        #[cfg(feature = "gpu")]
        return accumulate_gpu(map, x, y, stats, par);
    }
    let chunks = Chunks {
        device: Device::Cpu,
        chunk_rows,
        par,
        monitor,
    };
    chunks.for_each(map, x, "rows accumulated", |start, phi| {
        stats.accumulate(phi, y.slice(s![start..start + phi.nrows()]), par)
    })
}

/// How a loop over row chunks of `Φ(x)` runs: the device of the
/// transforms, the rows per chunk, the threads and the monitor.
#[derive(Clone, Copy)]
pub struct Chunks<'a> {
    /// Where every chunk is transformed (`Auto` resolved per call).
    pub device: Device,
    /// Rows per chunk (`>= 1`).
    pub chunk_rows: usize,
    /// Threads of the transforms and of the caller's work.
    pub par: Parallelism,
    /// Checked before every chunk; gets the caller's stage.
    pub monitor: &'a Monitor,
}

impl Chunks<'_> {
    /// Transforms `x` `chunk_rows` rows at a time into one reused buffer
    /// ([`transform_into`] on `device`) and calls `f(start, Φ(chunk))` with
    /// the index of the chunk's first row, in row order. `monitor` gets the
    /// stage `stage` (one unit per row) and is checked before every chunk.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] for `chunk_rows = 0`; as
    /// [`FeatureMap::validate`] and [`transform_into`]; [`Error::Interrupted`] once `monitor` is
    /// cancelled; the first error of `f`.
    pub fn for_each<M: FeatureMap, T: Real>(
        &self,
        map: &M,
        x: ArrayView2<'_, T>,
        stage: &str,
        mut f: impl FnMut(usize, ArrayView2<'_, T>) -> Result<()>,
    ) -> Result<()> {
        let rows = self.chunk_rows;
        if rows == 0 {
            return Err(Error::invalid("chunk_rows", "must be >= 1, got 0"));
        }
        // Before the buffer is sized by the map's width.
        map.validate()?;
        let n = x.nrows();
        let mut phi = crate::alloc::try_zeros2::<T>(
            "chunk_size",
            "a chunk of features",
            rows.min(n),
            map.n_components(),
        )?;
        self.monitor.stage(stage, n as u64);
        for (k, xc) in x.axis_chunks_iter(Axis(0), rows).enumerate() {
            self.monitor.check()?;
            let mut p = phi.slice_mut(s![..xc.nrows(), ..]);
            transform_into(map, xc, p.view_mut(), self.device, self.par)?;
            f(k * rows, p.view())?;
            self.monitor.advance(xc.nrows() as u64);
        }
        Ok(())
    }
}

/// The GPU branch of [`accumulate`] (shapes checked, support checked).
#[cfg(feature = "gpu")]
fn accumulate_gpu<M: FeatureMap, T: Real>(
    map: &M,
    x: ArrayView2<'_, T>,
    y: ArrayView1<'_, f64>,
    stats: &mut FeatureStats,
    par: Parallelism,
) -> Result<()> {
    use crate::error::check_finite;
    use crate::real::all_finite;

    let n = x.nrows();
    if n == 0 {
        return Ok(());
    }
    check_finite("y", y.iter())?;
    if !all_finite(x, par) {
        return Err(Error::NonFinite { name: "X" });
    }
    // The shift and target sums as `FeatureStats::accumulate` forms them.
    let shift = y.sum() / n as f64;
    let mut targets = ndarray::Array2::<f64>::ones((n, 2));
    targets
        .column_mut(0)
        .zip_mut_with(&y, |t, &v| *t = v - shift);
    let g = map.gpu_gram(x, Some(targets.view()))?;
    let b = g
        .phi_t_y
        .ok_or_else(|| Error::Internal("the GPU Gram came back without Φᵀy".into()))?;
    // The device forms the products in float32: past its range they come
    // back infinite, which the float64 checks of `merge` would put down to
    // float64's range.
    if !g.phi_t_phi.iter().chain(b.iter()).all(|v| v.is_finite()) {
        return Err(Error::invalid(
            "X",
            "the GPU's float32 products of the features with each other or with the targets \
             overflow float32's range (about 3.4e38): scale X, y or the kernel variance down, \
             or fit with device=\"cpu\" (float64 throughout)",
        ));
    }
    let yc = targets.column(0);
    let part = FeatureStats {
        gram: g.phi_t_phi,
        phi_y: b.column(0).to_owned(),
        phi_sum: b.column(1).to_owned(),
        n: n as u64,
        y_shift: shift,
        y_sum: yc.sum(),
        y_sq_sum: yc.iter().map(|v| v * v).sum(),
    };
    stats.merge(&part)
}

/// Any of the crate's dense feature maps, implementing [`FeatureMap`] by
/// delegation (the trait has generic methods, so there is no `dyn
/// FeatureMap`): what bindings and stored models hold.
#[derive(Clone, Debug)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum AnyFeatureMap {
    /// Random Fourier features (`docs/math/fourier.rst`).
    Fourier(FourierFeatures),
    /// A polynomial sketch with its kernel parameters
    /// (`docs/math/sketches.rst`).
    Polynomial(PolynomialFeatures),
    /// Maclaurin features (`docs/math/maclaurin.rst`).
    Maclaurin(MaclaurinMap),
    /// Nyström landmark features.
    Nystroem(NystroemFeatures),
}

/// `$body` with `$m` bound to the map inside `$any`, whatever its variant.
macro_rules! on_any {
    ($any:expr, $m:ident => $body:expr) => {
        match $any {
            AnyFeatureMap::Fourier($m) => $body,
            AnyFeatureMap::Polynomial($m) => $body,
            AnyFeatureMap::Maclaurin($m) => $body,
            AnyFeatureMap::Nystroem($m) => $body,
        }
    };
}

impl FeatureMap for AnyFeatureMap {
    fn n_features_in(&self) -> usize {
        on_any!(self, m => FeatureMap::n_features_in(m))
    }

    fn n_components(&self) -> usize {
        on_any!(self, m => FeatureMap::n_components(m))
    }

    fn row_flops(&self) -> f64 {
        on_any!(self, m => FeatureMap::row_flops(m))
    }

    fn validate(&self) -> Result<()> {
        on_any!(self, m => FeatureMap::validate(m))
    }

    fn transform_into<T: Real>(
        &self,
        x: ArrayView2<'_, T>,
        out: ArrayViewMut2<'_, T>,
        par: Parallelism,
    ) -> Result<()> {
        on_any!(self, m => FeatureMap::transform_into(m, x, out, par))
    }

    fn gpu_support(&self) -> std::result::Result<(), String> {
        on_any!(self, m => m.gpu_support())
    }

    #[cfg(feature = "gpu")]
    fn gpu_transform_into<T: Real>(
        &self,
        x: ArrayView2<'_, T>,
        out: ArrayViewMut2<'_, T>,
    ) -> Result<()> {
        on_any!(self, m => m.gpu_transform_into(x, out))
    }

    #[cfg(feature = "gpu")]
    fn gpu_gram<T: Real>(
        &self,
        x: ArrayView2<'_, T>,
        y: Option<ArrayView2<'_, f64>>,
    ) -> Result<gpu::Gram> {
        on_any!(self, m => m.gpu_gram(x, y))
    }
}

impl From<FourierFeatures> for AnyFeatureMap {
    fn from(m: FourierFeatures) -> Self {
        AnyFeatureMap::Fourier(m)
    }
}

impl From<PolynomialFeatures> for AnyFeatureMap {
    fn from(m: PolynomialFeatures) -> Self {
        AnyFeatureMap::Polynomial(m)
    }
}

impl From<MaclaurinMap> for AnyFeatureMap {
    fn from(m: MaclaurinMap) -> Self {
        AnyFeatureMap::Maclaurin(m)
    }
}

impl From<NystroemFeatures> for AnyFeatureMap {
    fn from(m: NystroemFeatures) -> Self {
        AnyFeatureMap::Nystroem(m)
    }
}
