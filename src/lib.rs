//! # randfeat_rs
//!
//! Random features for kernel methods and Gaussian processes. Explicit
//! feature maps `Φ` with `Φ(x)ᵀΦ(y) ≈ k(x, y)` turn `O(N³)` kernel algebra
//! into `O(N D²)` linear algebra on `N × D` features. The mathematics of
//! every map and model, with its equations and the papers' sections, is on
//! the project's documentation site (<https://randfeat-rs.readthedocs.io>,
//! built from `docs/` of the repository: `docs/math/<topic>.rst`).
//!
//! Conventions: rows are samples (`N × d`, C order); feature maps are generic
//! over [`Real`] (`f32`, `f64`) and return the input's precision; linear
//! solves are `f64`. Random parameters are drawn at fit time from one seeded
//! ChaCha stream ([`rng`]); transforms are deterministic and bit-identical
//! for any thread count. Heavy routines take a [`Parallelism`] argument and
//! run in the caller's rayon pool; long ones take a [`Monitor`] (progress and
//! cancellation; `&Monitor::default()` when neither is wanted). Every fallible
//! function returns [`Result`].
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
//! # A tour of the entry points
//!
//! Random Fourier features ([`fourier`]) of a stationary kernel: a
//! [`fourier::FourierConfig`] (kernel, sampler, variant, length scale), a fit
//! that draws the frequencies, a transform.
//!
//! ```
//! use ndarray::Array2;
//! use randfeat_rs::fourier::{FourierConfig, FourierFeatures, Sampler};
//! use randfeat_rs::Parallelism;
//!
//! let mut cfg = FourierConfig::new(4096);
//! cfg.sampler = Sampler::Orthogonal;
//! cfg.length_scale = 1.5;
//! let map = FourierFeatures::fit(&cfg, 3, 0)?; // 3 input features, seed 0
//! let x = ndarray::array![[0.0_f64, 0.5, 1.0], [0.5, 0.0, 1.0]];
//! let z: Array2<f64> = map.transform(x.view(), Parallelism::Rayon)?;
//! let k = (-0.5_f64 / (2.0 * 1.5_f64.powi(2))).exp(); // exp(−‖x − y‖²/(2l²)), ‖x − y‖² = 0.5
//! // The estimate's sd is (1 − k²)/√(2·2048) ≈ 0.003 (cos_sin, i.i.d. frequencies).
//! assert!((z.row(0).dot(&z.row(1)) - k).abs() < 0.02);
//! # Ok::<(), randfeat_rs::Error>(())
//! ```
//!
//! A polynomial sketch ([`sketch`]) of `(xᵀy/l² + c)^n`: draw the sketch for
//! the inputs augmented by `√c` ([`sketch::augmented_dim`]), wrap it in
//! [`sketch::PolynomialFeatures`].
//!
//! ```
//! use randfeat_rs::sketch::{augmented_dim, PolySketch, PolynomialFeatures, SketchKind};
//! use randfeat_rs::{rng, Parallelism};
//!
//! let (degree, bias, d) = (3, 1.0, 2);
//! let dim = augmented_dim(d, bias);
//! let sketch = PolySketch::draw(SketchKind::TensorSrht, false, degree, dim, 8192, &mut rng::seeded(1))?;
//! let map = PolynomialFeatures::new(sketch, bias, 1.0, 8192)?;
//! let x = ndarray::array![[0.3_f64, 0.1], [0.2, 0.4]];
//! let z = map.transform(x.view(), Parallelism::Rayon)?;
//! let k = (0.3 * 0.2 + 0.1 * 0.4 + bias).powi(degree as i32); // 1.331
//! assert!((z.row(0).dot(&z.row(1)) - k).abs() < 0.1);
//! # Ok::<(), randfeat_rs::Error>(())
//! ```
//!
//! Optimized Maclaurin features ([`maclaurin`]): the fit chooses the
//! truncation degree and the number of features per degree on the data.
//!
//! ```
//! use ndarray::Array2;
//! use randfeat_rs::maclaurin::{MaclaurinConfig, MaclaurinKernel, MaclaurinMap};
//! use randfeat_rs::{Monitor, Parallelism};
//!
//! let x = Array2::from_shape_fn((200, 4), |(i, j)| ((i * 5 + j * 3) % 17) as f64 / 17.0);
//! let mut cfg = MaclaurinConfig::new(MaclaurinKernel::Gaussian, 256);
//! cfg.length_scale = 1.0;
//! let map = MaclaurinMap::fit(x.view(), &cfg, 0, Parallelism::Rayon, &Monitor::default())?;
//! let z = map.transform(x.view(), Parallelism::Rayon)?;
//! assert_eq!(z.dim(), (200, 256));
//! assert_eq!(map.allocation().iter().sum::<usize>(), 256); // features per degree
//! # Ok::<(), randfeat_rs::Error>(())
//! ```
//!
//! Random binning features ([`binning`]) of the Laplacian kernel, sparse:
//! draw the grids, learn the occupied bins, get a CSR matrix.
//!
//! ```
//! use randfeat_rs::binning::{BinningGrids, Laplacian, Vocabulary};
//! use randfeat_rs::Parallelism;
//!
//! let grids = BinningGrids::draw(&Laplacian::new(1.0)?, 500, 2, 7)?; // 500 grids, d = 2
//! let x = ndarray::array![[0.1_f64, 0.2], [0.3, 0.1]];
//! let (vocabulary, z) = Vocabulary::fit(&grids, x.view(), Parallelism::Rayon)?;
//! let dense = z.to_dense();
//! let k = (-0.3_f64).exp(); // exp(−‖x − y‖₁ / l)
//! // Binomial(500, k)/500: sd √(k(1 − k)/500) ≈ 0.02.
//! assert!((dense.row(0).dot(&dense.row(1)) - k).abs() < 0.1);
//! assert_eq!(vocabulary.transform(&grids, x.view(), Parallelism::Rayon)?.to_dense(), dense);
//! # Ok::<(), randfeat_rs::Error>(())
//! ```
//!
//! The feature-space GP ([`gp::FeatureGp`]) over any [`feature_map::FeatureMap`]:
//! the statistics `ΦᵀΦ`, `Φᵀy` are streamed over row chunks (on the GPU
//! with [`gpu::Device::Gpu`]), then one `D × D` Cholesky factor.
//!
//! ```
//! use ndarray::{Array1, Array2};
//! use randfeat_rs::fourier::{FourierConfig, FourierFeatures};
//! use randfeat_rs::gp::FeatureGp;
//! use randfeat_rs::gpu::Device;
//! use randfeat_rs::{Monitor, Parallelism};
//!
//! let x = Array2::from_shape_fn((300, 1), |(i, _)| i as f64 / 50.0);
//! let y = x.column(0).mapv(f64::sin);
//! let map = FourierFeatures::fit(&FourierConfig::new(256), 1, 0)?;
//! let (par, monitor) = (Parallelism::Rayon, Monitor::default());
//! let gp = FeatureGp::fit_map(&map, x.view(), y.view(), 1e-2, true, Device::Cpu, 128, par, &monitor)?;
//! let xt = ndarray::array![[1.0_f64], [2.5]];
//! let (mean, var) = gp.predict_map(&map, xt.view(), true, Device::Cpu, 128, par, &monitor)?;
//! assert!((&mean - &xt.column(0).mapv(f64::sin)).iter().all(|e| e.abs() < 0.05));
//! assert!(var.unwrap().iter().all(|&v| v >= 0.0));
//! # Ok::<(), randfeat_rs::Error>(())
//! ```
//!
//! The localized Maclaurin GP ([`gp::LocalizedMaclaurinGp`]): one Maclaurin
//! map re-expanded at several centroids, a GP per centroid, each test point
//! predicted by its nearest one.
//!
//! ```
//! use ndarray::Array2;
//! use randfeat_rs::gp::{LocalizedConfig, LocalizedMaclaurinGp};
//! use randfeat_rs::{Monitor, Parallelism};
//!
//! let x = Array2::from_shape_fn((400, 1), |(i, _)| -4.0 + 8.0 * i as f64 / 399.0);
//! let y = x.column(0).mapv(|t| (2.0 * t).sin());
//! let mut cfg = LocalizedConfig::new(32);
//! cfg.noise_variance = 1e-2;
//! cfg.threshold = Some(1.0); // a centroid within one length scale of every input
//! let (par, monitor) = (Parallelism::Rayon, Monitor::default());
//! let gp = LocalizedMaclaurinGp::fit(x.view(), y.view(), &cfg, 0, par, &monitor)?;
//! assert!(gp.centroids().nrows() > 1);
//! let xt = ndarray::array![[-3.0_f64], [0.5], [3.5]];
//! let pred = gp.predict(xt.view(), true, par, &monitor)?;
//! let truth = xt.column(0).mapv(|t| (2.0 * t).sin());
//! assert!((&pred.mean - &truth).iter().all(|e| e.abs() < 0.1));
//! # Ok::<(), randfeat_rs::Error>(())
//! ```
//!
//! The sparse GP ([`gp::sparse`]): `M` inducing inputs, the hyperparameters
//! fitted by L-BFGS on Titsias' bound (or FITC), every pass streamed over
//! row chunks, so memory is `O(M² + chunk · M)` whatever `N`.
//!
//! ```
//! use ndarray::Array2;
//! use randfeat_rs::gp::sparse::{fit_sparse, SparseGpConfig};
//! use randfeat_rs::{Monitor, Parallelism};
//!
//! let x = Array2::from_shape_fn((300, 1), |(i, _)| -3.0 + 6.0 * i as f64 / 299.0);
//! let y = x.column(0).mapv(|t| (2.0 * t).sin());
//! let mut cfg = SparseGpConfig::default();
//! cfg.n_inducing = 30;
//! let gp = fit_sparse(x.view(), y.view(), &cfg, Parallelism::Rayon, &Monitor::default())?;
//! assert!(gp.inducing.nrows() <= 30);
//! let xt = ndarray::array![[-2.0_f64], [0.5], [2.0]];
//! let (mean, var) = gp.predict(xt.view(), true, Parallelism::Rayon)?;
//! let truth = xt.column(0).mapv(|t| (2.0 * t).sin());
//! assert!((&mean - &truth).iter().all(|e| e.abs() < 0.05));
//! assert!(var.unwrap().iter().all(|&v| v >= 0.0));
//! # Ok::<(), randfeat_rs::Error>(())
//! ```
//!
//! # Modules
//!
//! From the lowest level up (a module uses only those above it in this
//! list, or in its own line):
//!
//! - [`error`], [`real`], [`rng`], [`threads`], [`simd`], [`system`],
//!   [`progress`]: the error type, the `f32`/`f64` scalar trait, the seeded
//!   streams, the thread pool, the run-time instruction-set choice, the
//!   machine queries, progress and cancellation;
//! - [`linalg`], [`fwht`], [`kernels`]: Cholesky and Gram kernels, the fast
//!   Walsh–Hadamard transform (`docs/math/fwht.rst`), the stationary kernels
//!   and their spectral densities (`docs/math/fourier.rst`);
//! - [`sketch`], [`fourier`], [`nystroem`], [`binning`], [`maclaurin`]: the
//!   feature maps — polynomial sketches (`docs/math/sketches.rst`), random
//!   Fourier features (`fourier.rst`), Nyström landmarks (`nystroem.rst`),
//!   random binning (`binning.rst`), Maclaurin features (`maclaurin.rst`);
//! - [`stats`]: the mergeable sufficient statistics `ΦᵀΦ`, `Φᵀy`
//!   (`docs/math/gp.rst`);
//! - [`gpu`]: the wgpu compute kernels (feature `gpu`) and the device choice;
//! - [`feature_map`]: the [`feature_map::FeatureMap`] trait over every
//!   dense map, with the device chosen per map and call;
//! - [`gp`]: the exact GP, the feature-space GP over any feature map and its
//!   marginal-likelihood fit, the sparse GP with inducing inputs, the
//!   localized Maclaurin GP and the Dirichlet-based GP classifiers
//!   (`docs/math/gp.rst`, `sparse_gp.rst`, `localized.rst`,
//!   `classification.rst`).
//!
//! # Features
//!
//! - `gpu`: the wgpu compute shaders (Vulkan, Metal, DX12) behind
//!   [`gpu::Device`]; without it every device request other than the CPU
//!   is an error and the CPU paths are unchanged.
//! - `serde`: `Serialize`/`Deserialize` for the fitted structs.
//! - `python`: the PyO3 bindings of the Python package (not for Rust users).

#[macro_use]
pub mod simd;

pub mod alloc;
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

#[cfg(any(feature = "python", test))]
pub(crate) mod row_pieces;

#[cfg(feature = "python")]
mod python;

#[cfg(test)]
mod api_limits_tests;

#[cfg(test)]
mod map_invariants_tests;

#[cfg(test)]
mod fuzz_tests;

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
