//! # randfeat_rs
//!
//! Random features for kernel methods and Gaussian processes. Explicit
//! feature maps `Φ` with `Φ(x)ᵀΦ(y) ≈ k(x, y)` turn `O(N³)` kernel algebra
//! into `O(N D²)` linear algebra on `N × D` features. The exact mathematics
//! of every map, with its test oracles, is in `ALGORITHMS.md` of the design
//! documents; each public item names the section it implements.
//!
//! Conventions: rows are samples (`N × d`, C order); feature maps are generic
//! over [`Real`] (`f32`, `f64`) and return the input's precision; linear
//! solves are `f64`. Random parameters are drawn at fit time from one seeded
//! ChaCha stream ([`rng`]); transforms are deterministic and bit-identical
//! for any thread count. Heavy routines take a [`Parallelism`] argument and
//! run in the caller's rayon pool.
//!
//! ```
//! use ndarray::array;
//! use randfeat_rs::{fwht::fwht_rows, Parallelism};
//!
//! let mut x = array![[1.0_f64, 2.0, 3.0, 4.0], [1.0, 0.0, 0.0, 0.0]];
//! fwht_rows(x.view_mut(), false, Parallelism::Rayon).unwrap();
//! assert_eq!(x, array![[10.0, -2.0, -4.0, 0.0], [1.0, 1.0, 1.0, 1.0]]);
//! ```
//!
//! The arrays are those of the re-exported [`ndarray`] (use
//! `randfeat_rs::ndarray` to get the matching version).
//!
//! # Modules
//!
//! From the lowest level up (a module uses only those above it in this
//! list, or in its own line):
//!
//! - [`error`], [`real`], [`rng`], [`threads`], [`simd`], [`system`]: the
//!   error type, the `f32`/`f64` scalar trait, the seeded streams, the
//!   thread pool, the run-time instruction-set choice, the machine queries;
//! - [`linalg`], [`fwht`], [`kernels`]: Cholesky and Gram kernels, the fast
//!   Walsh–Hadamard transform (ALGORITHMS.md 1), the stationary kernels and
//!   their spectral densities (5.1);
//! - [`sketch`], [`fourier`], [`nystroem`], [`binning`], [`maclaurin`]: the
//!   feature maps — polynomial sketches (2), random Fourier features (5),
//!   Nyström landmarks, random binning (6), Maclaurin features (3, 4);
//! - [`stats`]: the mergeable sufficient statistics `ΦᵀΦ`, `Φᵀy` (7.2);
//! - [`gpu`]: the wgpu compute kernels (feature `gpu`) and the device choice;
//! - [`feature_map`]: the [`feature_map::FeatureMap`] trait over every
//!   dense map, with the device chosen per map and call;
//! - [`gp`]: the exact GP, the feature-space GP over any feature map, the
//!   localized Maclaurin GP (7, 8).

#[macro_use]
pub mod simd;

pub mod binning;
pub mod error;
pub mod feature_map;
pub mod fourier;
pub mod fwht;
pub mod gp;
pub mod gpu;
pub mod kernels;
pub mod linalg;
pub mod maclaurin;
pub mod nystroem;
pub mod progress;
pub mod real;
pub mod rng;
pub mod sketch;
pub mod stats;
pub mod system;
pub mod threads;
pub(crate) mod vexp;

#[cfg(feature = "python")]
mod python;

#[cfg(all(test, feature = "serde"))]
mod serde_tests;

pub use error::{Error, Result};
pub use ndarray;
pub use progress::Monitor;
pub use real::Real;
pub use threads::Parallelism;

/// The README's Rust examples, compiled and run as doctests.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
