//! GPU offload through wgpu compute shaders (cargo feature `gpu`).
//!
//! Any vendor: wgpu picks Vulkan, Metal or DX12. Everything on the device is
//! `f32` (WGSL `f64` is native-only and its `sin`/`cos` are not reliable);
//! inputs of either precision are converted while they are streamed up, and
//! results are converted back to the caller's type (Gram matrices are reduced
//! in `f64` on the host). Solves stay on the CPU in `f64`.
//!
//! Kernels (shaders in `src/gpu/shaders/*.wgsl`, pipelines built once per
//! process):
//! - [`fwht_rows`] / [`fwht_rows_into`]: batched FWHT (`docs/math/fwht.rst`),
//!   in workgroup shared memory for the first `block` stages and through
//!   global memory beyond;
//! - [`gram`]: `Φᵀ Φ` and `Φᵀ y` over row chunks with a blocked summation
//!   whose error stays at the level of a pairwise sum (see [`gram`]);
//! - [`rff_features`]: the tiled projection `X Wᵀ` followed by `cos`/`sin`
//!   (`docs/math/fourier.rst`, "Feature variants"), from plain arrays;
//! - [`sketch_features`]: Gaussian, Rademacher and TensorSRHT polynomial
//!   sketches, real and complex (`docs/math/sketches.rst`, sections "Target
//!   kernels" to "TensorSRHT"), from a fitted [`crate::sketch::PolySketch`]
//!   (the same random parameters);
//! - [`maclaurin_features`]: the degree blocks of a fitted
//!   [`crate::maclaurin::MaclaurinMap`] (`docs/math/maclaurin.rst`, "The
//!   truncated random map" and "Assembly");
//! - [`rff_gram`], [`sketch_gram`], [`maclaurin_gram`]: those features and
//!   their Gram matrix without the features leaving the device;
//! - [`inducing_gram`]: the sparse GP's kernel block `K_fu = k(X, Z)` for the
//!   stationary kernels and its Gram `K_uf K_fu`, `K_uf y`, without the block
//!   leaving the device (`docs/math/sparse_gp.rst`, "Devices");
//! - [`localized_gps`]: the localized GP's per-centroid features and Gram
//!   matrices, batched over centroids (one read-back per batch).
//!
//! Inputs larger than the adapter's binding limits (or [`set_chunk_bytes`])
//! are streamed in row chunks; each input is uploaded once per call.
//!
//! [`Device`], [`resolve`], [`check_sketch`] and [`check_maclaurin`] exist
//! without the feature too, so callers can take a `device` argument
//! unconditionally: without the feature `Gpu` is an [`Error::Gpu`] and
//! `Auto` is the CPU. The dispatch over any fitted map, with the device
//! chosen per map, is [`crate::feature_map`].
//!
//! The environment variable [`GPU_ENV`] (`RANDFEAT_GPU`) is read at every
//! call: `off` hides every adapter (as on a machine without one; used by the
//! tests of the error and fallback paths), `software` lets `Auto` choose a
//! software rasterizer such as Mesa's lavapipe (by default `Auto` only
//! picks hardware adapters, since a software rasterizer is slower than the
//! CPU path; `Gpu` accepts any adapter).

// Without the `gpu` feature the kernels above do not exist; the module docs
// still name them (the links resolve in the documented build, `--features gpu`).
#![cfg_attr(not(feature = "gpu"), allow(rustdoc::broken_intra_doc_links))]

use crate::error::{Error, Result};
use crate::maclaurin::MaclaurinMap;
use crate::sketch::{PolySketch, SketchKind};

#[cfg(feature = "gpu")]
mod context;
#[cfg(feature = "gpu")]
mod fwht;
#[cfg(feature = "gpu")]
mod gram;
#[cfg(feature = "gpu")]
mod inducing;
#[cfg(feature = "gpu")]
mod localized;
#[cfg(feature = "gpu")]
mod maclaurin;
#[cfg(feature = "gpu")]
mod map;
#[cfg(feature = "gpu")]
mod rff;
#[cfg(feature = "gpu")]
mod sketch;

#[cfg(feature = "gpu")]
pub use context::{dispatch_count, gpu_info, set_chunk_bytes, GpuInfo};
#[cfg(feature = "gpu")]
pub use fwht::{fwht_rows, fwht_rows_into};
#[cfg(feature = "gpu")]
pub use gram::{gram, Gram};
#[cfg(feature = "gpu")]
pub use inducing::inducing_gram;
#[cfg(feature = "gpu")]
pub use localized::localized_gps;
#[cfg(feature = "gpu")]
pub use maclaurin::{maclaurin_features, maclaurin_features_into, maclaurin_gram};
#[cfg(feature = "gpu")]
pub use rff::{rff_features, rff_features_into, rff_gram};
#[cfg(feature = "gpu")]
pub use sketch::{sketch_features, sketch_features_into, sketch_gram};

/// Without the `gpu` feature: always [`Error::Gpu`] (see the feature's
/// `localized_gps`, the localized GP's per-centroid statistics on the GPU,
/// turned into the caller's models).
#[cfg(not(feature = "gpu"))]
#[allow(clippy::too_many_arguments)]
pub fn localized_gps<G: Send>(
    _map: &MaclaurinMap,
    _x: ndarray::ArrayView2<f64>,
    _y: ndarray::ArrayView1<f64>,
    _centroids: ndarray::ArrayView2<f64>,
    _which: &[usize],
    _neighbours: impl FnMut(usize) -> Result<Vec<u32>>,
    _fit: impl Fn(&crate::stats::FeatureStats, usize) -> Result<G> + Sync,
    _par: crate::threads::Parallelism,
) -> Result<Vec<G>> {
    gpu_usable().map(|_| Vec::new())
}

/// Ok when `sketch` has a GPU kernel: every kind but TensorSketch (its
/// FFT-based combination, `docs/math/sketches.rst`, "TensorSketch", has no
/// shader).
///
/// # Errors
/// [`Error::InvalidParameter`] (`sketch`) naming the reason.
pub fn check_sketch(sketch: &PolySketch) -> Result<()> {
    if sketch.kind() == SketchKind::TensorSketch {
        return Err(Error::invalid(
            "sketch",
            "tensor_sketch has no GPU kernel; use \"gaussian\", \"rademacher\" or \
             \"tensor_srht\", or device=\"cpu\"",
        ));
    }
    Ok(())
}

/// Ok when `map` has a GPU kernel: not the explicit `d = 1` map (nothing
/// random, evaluated in f64 on the CPU, `docs/math/maclaurin.rst`, "The
/// truncated random map") and no TensorSketch block ([`check_sketch`]).
///
/// # Errors
/// [`Error::InvalidParameter`] naming the reason.
pub fn check_maclaurin(map: &MaclaurinMap) -> Result<()> {
    if map.is_explicit_1d() {
        return Err(Error::invalid(
            "device",
            "the explicit one-dimensional Maclaurin map (d = 1 with the optimized allocation) \
             has no GPU kernel; use device=\"cpu\"",
        ));
    }
    map.sketch_blocks().try_for_each(|(_, sk)| check_sketch(sk))
}

/// The environment variable read at every call: `off` hides all adapters,
/// `software` lets [`Device::Auto`] use a software rasterizer.
pub const GPU_ENV: &str = "RANDFEAT_GPU";

/// Where a computation runs (`device="cpu"|"gpu"|"auto"` in Python).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum Device {
    /// The CPU path (rayon threads, SIMD).
    #[default]
    Cpu,
    /// The GPU; an error when no adapter is usable.
    Gpu,
    /// The GPU when a hardware adapter is usable, else the CPU.
    Auto,
}

impl Device {
    /// Parses `"cpu"`, `"gpu"` or `"auto"`; the error names `name`.
    pub fn parse(name: &'static str, s: &str) -> Result<Self> {
        match s {
            "cpu" => Ok(Device::Cpu),
            "gpu" => Ok(Device::Gpu),
            "auto" => Ok(Device::Auto),
            other => Err(Error::invalid(
                name,
                format!("expected \"cpu\", \"gpu\" or \"auto\", got {other:?}"),
            )),
        }
    }
}

/// What the environment variable [`GPU_ENV`] asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum EnvPolicy {
    Default,
    Off,
    Software,
}

fn env_policy() -> EnvPolicy {
    match std::env::var(GPU_ENV).as_deref() {
        Ok("off") => EnvPolicy::Off,
        Ok("software") => EnvPolicy::Software,
        _ => EnvPolicy::Default,
    }
}

/// Resolves a requested [`Device`] to the one that will run: `Cpu` or `Gpu`.
/// `Gpu` with no usable adapter (or without the `gpu` feature) is an
/// [`Error::Gpu`] saying why; `Auto` falls back to `Cpu` in that case, and
/// also when the only adapter is a software rasterizer (unless
/// `RANDFEAT_GPU=software`).
pub fn resolve(device: Device) -> Result<Device> {
    match device {
        Device::Cpu => Ok(Device::Cpu),
        Device::Gpu => gpu_usable().map(|_| Device::Gpu),
        Device::Auto => Ok(match gpu_usable() {
            Ok(software) if !software || env_policy() == EnvPolicy::Software => Device::Gpu,
            _ => Device::Cpu,
        }),
    }
}

/// `Ok(is_software)` when an adapter is usable, else the reason.
#[cfg(feature = "gpu")]
fn gpu_usable() -> Result<bool> {
    context::get().map(|c| c.is_software())
}

#[cfg(not(feature = "gpu"))]
fn gpu_usable() -> Result<bool> {
    Err(Error::Gpu(
        "randfeat_rs was built without the `gpu` cargo feature".into(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_resolve() {
        assert_eq!(Device::parse("device", "gpu").unwrap(), Device::Gpu);
        assert_eq!(Device::parse("device", "auto").unwrap(), Device::Auto);
        assert_eq!(Device::parse("device", "cpu").unwrap(), Device::Cpu);
        let err = Device::parse("device", "cuda").unwrap_err();
        assert!(err.to_string().contains("`device`") && err.to_string().contains("\"cuda\""));
        assert_eq!(resolve(Device::Cpu).unwrap(), Device::Cpu);
        // Auto always resolves (to the CPU when no hardware adapter is usable).
        assert!(resolve(Device::Auto).is_ok());
        // Gpu resolves exactly when an adapter is usable.
        assert_eq!(resolve(Device::Gpu).is_ok(), gpu_usable().is_ok());
    }
}
