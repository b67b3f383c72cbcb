//! Random Fourier features (`docs/math/fourier.rst`) of the stationary kernels
//! of [`crate::kernels`] (their spectral densities `p(ω)`).
//!
//! - the samplers ([`Sampler`]): `mc`, `antithetic`, `orthogonal` (ORF),
//!   `structured` (SORF through [`crate::fwht`]), `moment_matching` (003,
//!   Algorithm 1), `qmc` (scrambled Sobol points through the inverse CDF).
//! - [`features`]: the fitted map [`FourierFeatures`], variants `cos_bias`
//!   and `cos_sin`, the transform (faer GEMM + vectorized [`sincos`]).
//! - [`fused`]: the fused dense transform (projection, cosine and scale in
//!   registers, one store per output element).
//!
//! ```
//! use ndarray::Array2;
//! use randfeat_rs::fourier::{FourierConfig, FourierFeatures, Sampler, Variant};
//! use randfeat_rs::kernels::Kernel;
//! use randfeat_rs::Parallelism;
//!
//! let mut cfg = FourierConfig::new(1024);
//! cfg.kernel = Kernel::Matern32;
//! cfg.sampler = Sampler::Orthogonal;
//! cfg.variant = Variant::CosBias;
//! cfg.length_scale = 2.0;
//! let map = FourierFeatures::fit(&cfg, 4, 7)?;
//! let x = Array2::<f32>::zeros((3, 4));
//! let phi = map.transform(x.view(), Parallelism::Rayon)?;
//! assert_eq!(phi.dim(), (3, 1024));
//! # Ok::<(), randfeat_rs::Error>(())
//! ```

pub mod features;
pub mod fused;
pub(crate) mod qmc;
pub(crate) mod samplers;
pub mod sincos;
mod sobol_table;

#[cfg(test)]
mod tests;

pub use crate::simd::Isa;
pub use features::{FourierConfig, FourierFeatures, Method, Projection, Variant, VARIANT_NAMES};
pub use samplers::{Sampler, SAMPLER_NAMES};
