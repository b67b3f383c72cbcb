//! Nyström landmark features, the low-rank baseline of 001:
//! `φ(x) = K_mm^{-1/2} k_m(x)`, so `φ(x)ᵀφ(y) = k_m(x)ᵀ K_mm^{+} k_m(y)`, the
//! Nyström approximation `K ≈ K_nm K_mm^{+} K_mn` (whose Woodbury form is
//! what a feature-space GP solves).
//!
//! Landmarks: `m = min(n_components, n)` distinct training rows drawn
//! without replacement from the seed. Inverse square root: symmetric
//! eigendecomposition `K_mm = U diag(λ) Uᵀ` (faer, stable for symmetric
//! positive semi-definite matrices), then `K_mm^{-1/2} = U diag(λ_i^{-1/2}) Uᵀ`
//! where eigenvalues `λ_i ≤ m · ε · λ_max` (numerically zero or negative
//! from rounding) are clipped: their directions are dropped (pseudo-inverse
//! square root) instead of being amplified by `1/√λ`. With `m = n`
//! landmarks the map reproduces the exact Gram matrix, `Φ Φᵀ = K K^+ K = K`.
//! Kernel blocks and the product are computed in `f64`. One length scale
//! per input dimension gives the kernel of the inputs `(x_a − c_a) / l_a`
//! (the inputs and landmarks centered on the landmarks' midrange and
//! divided column by column, the kernel at unit length scale; the kernels
//! are shift invariant).

use ndarray::{Array2, ArrayView2, ArrayViewMut2, Axis, CowArray};
use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::kernels::{kernel_block, kernel_matrix, midrange, Kernel, StationaryKernel};
use crate::linalg::{gemm, symmetric_eigen};
use crate::real::{all_finite, Real};
use crate::rng::substream;
use crate::threads::Parallelism;

/// Rows per work item of the transform. Fixed (the result does not depend
/// on the thread count) and large, so that each GEMM with the `m × m`
/// normalization reuses its packed copy over many rows (an 8 MB
/// normalization at `m = 1,024` read from memory once per chunk).
const CHUNK_ROWS: usize = 512;

/// A fitted Nyström map.
///
/// The fields are public and must agree with each other (see
/// [`NystroemFeatures::validate`], which every transform calls first): the
/// normalization is `m × m` for `m` landmarks, one length scale or one per
/// input dimension, each finite and `> 0`. Their values are checked where the map is built and loaded
/// (feature `serde`): finite landmarks and normalization.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize, serde::Deserialize),
    serde(try_from = "NystroemParts")
)]
pub struct NystroemFeatures {
    /// The landmark rows (`m × d`).
    pub landmarks: Array2<f64>,
    /// `K_mm^{-1/2}` (`m × m`, symmetric, small eigenvalues clipped).
    pub normalization: Array2<f64>,
    /// The kernel.
    pub kernel: Kernel,
    /// The length scale `l > 0`: one value, or one per input dimension.
    pub length_scale: Vec<f64>,
}

/// The stored form of [`NystroemFeatures`] (its fields), checked on loading
/// by [`NystroemFeatures::from_parts`].
#[cfg(feature = "serde")]
#[derive(serde::Deserialize)]
struct NystroemParts {
    landmarks: Array2<f64>,
    normalization: Array2<f64>,
    kernel: Kernel,
    length_scale: StoredLengthScale,
}

/// A stored length scale: one number (the form of maps saved with one
/// length scale only) or a list.
#[cfg(feature = "serde")]
#[derive(serde::Deserialize)]
#[serde(untagged)]
enum StoredLengthScale {
    One(f64),
    Several(Vec<f64>),
}

#[cfg(feature = "serde")]
impl TryFrom<NystroemParts> for NystroemFeatures {
    type Error = Error;

    fn try_from(p: NystroemParts) -> Result<Self> {
        let length_scale = match p.length_scale {
            StoredLengthScale::One(l) => vec![l],
            StoredLengthScale::Several(ls) => ls,
        };
        NystroemFeatures::from_parts(p.landmarks, p.normalization, p.kernel, length_scale)
    }
}

/// The `m × m` float64 matrices [`NystroemFeatures::fit`] holds at once.
const NYSTROEM_MATRICES: usize = 6;

impl NystroemFeatures {
    /// Picks `min(n_components, n)` landmarks of `x` from `seed` and forms
    /// `K_mm^{-1/2}` at `length_scale` (one value, or one per column of
    /// `x`). Returns the map and the landmarks' row indices in `x`.
    pub fn fit<T: Real>(
        x: ArrayView2<T>,
        n_components: usize,
        kernel: Kernel,
        length_scale: &[f64],
        seed: u64,
    ) -> Result<(Self, Vec<usize>)> {
        let scaled = unit_variance(kernel, length_scale);
        scaled.validate(x.ncols())?;
        if n_components == 0 {
            return Err(Error::invalid("n_components", "must be >= 1, got 0"));
        }
        let n = x.nrows();
        if n == 0 || x.ncols() == 0 {
            return Err(Error::invalid("X", "needs at least one row and one column"));
        }
        if !all_finite(x, Parallelism::Sequential) {
            return Err(Error::NonFinite { name: "X" });
        }
        let m = n_components.min(n);
        // K_mm, its eigenvectors and K_mm^{-1/2} with its two GEMM factors.
        crate::alloc::check_alloc(
            "n_components",
            &format!("the Nystroem fit's {NYSTROEM_MATRICES} matrices of {m} x {m} float64"),
            &[NYSTROEM_MATRICES, m, m],
            8,
        )?;
        let mut rng = substream(seed, 0);
        let idx = rand::seq::index::sample(&mut rng, n, m).into_vec();
        let landmarks =
            Array2::from_shape_fn((m, x.ncols()), |(i, j)| x[(idx[i], j)].to_f64_exact());
        let kmm = match length_scale {
            &[l] => kernel_matrix(landmarks.view(), landmarks.view(), kernel, l),
            _ => {
                let z = scaled.scale(landmarks.view(), &midrange(landmarks.view()));
                kernel_matrix(z.view(), z.view(), kernel, 1.0)
            }
        };
        let a = faer::Mat::from_fn(m, m, |i, j| kmm[(i, j)]);
        let (u, lam) =
            symmetric_eigen(a.as_ref()).map_err(|_| Error::NotPositiveDefinite { index: 0 })?;
        let lmax = (0..m).map(|i| lam[i]).fold(0.0_f64, f64::max);
        let tol = lmax * m as f64 * f64::EPSILON;
        let inv_sqrt: Vec<f64> = (0..m)
            .map(|i| {
                if lam[i] > tol {
                    1.0 / lam[i].sqrt()
                } else {
                    0.0
                }
            })
            .collect();
        // K_mm^{-1/2} = (U diag(λ^{-1/2})) Uᵀ: one GEMM, O(m³) in cache-blocked form.
        let scaled = Array2::from_shape_fn((m, m), |(i, k)| u[(i, k)] * inv_sqrt[k]);
        let ut = Array2::from_shape_fn((m, m), |(k, j)| u[(j, k)]);
        let mut normalization = Array2::zeros((m, m));
        gemm(scaled.view(), ut.view(), normalization.view_mut());
        Ok((
            NystroemFeatures {
                landmarks,
                normalization,
                kernel,
                length_scale: length_scale.to_vec(),
            },
            idx,
        ))
    }

    /// Rebuilds a fitted map from its arrays, checking their shapes and
    /// values.
    ///
    /// # Errors
    /// As [`Self::validate`]; [`Error::InvalidParameter`] naming
    /// `landmarks` or `normalization` when it has non-finite entries.
    pub fn from_parts(
        landmarks: Array2<f64>,
        normalization: Array2<f64>,
        kernel: Kernel,
        length_scale: Vec<f64>,
    ) -> Result<Self> {
        let map = NystroemFeatures {
            landmarks,
            normalization,
            kernel,
            length_scale,
        };
        map.validate()?;
        // The full scans: `O(m d + m²)`, here and not at every transform.
        for (name, a) in [
            ("landmarks", &map.landmarks),
            ("normalization", &map.normalization),
        ] {
            if !a.iter().all(|v| v.is_finite()) {
                return Err(Error::invalid(name, "must be finite"));
            }
        }
        Ok(map)
    }

    /// Checks that the fields agree with each other as the transform
    /// assumes (the fields are public, so a map edited after [`Self::fit`]
    /// or [`Self::from_parts`] may not), in `O(1)`: `normalization` is
    /// `m × m` for the `m` rows of `landmarks`, and `length_scale` holds
    /// one value or one per column of `landmarks`, each finite and `> 0`
    /// (`O(d)`).
    ///
    /// # Errors
    /// [`Error::ShapeMismatch`] naming `normalization` for another shape;
    /// [`Error::InvalidParameter`] naming `length_scale`.
    pub fn validate(&self) -> Result<()> {
        let m = self.landmarks.nrows();
        let (rows, cols) = self.normalization.dim();
        if rows != m {
            return Err(Error::ShapeMismatch {
                name: "rows of normalization (the number of landmarks)",
                expected: m,
                got: rows,
            });
        }
        if cols != m {
            return Err(Error::ShapeMismatch {
                name: "columns of normalization (the number of landmarks)",
                expected: m,
                got: cols,
            });
        }
        unit_variance(self.kernel, &self.length_scale).validate(self.landmarks.ncols())
    }

    /// Writes `φ(x_i) = K_mm^{-1/2} k_m(x_i)` into the rows of `out` (`n × m`).
    /// Row chunks run in parallel; results do not depend on the thread count.
    ///
    /// # Errors
    /// The errors of [`Self::validate`] (fields that disagree);
    /// [`Error::ShapeMismatch`] for `x` or `out` of the wrong shape;
    /// [`Error::NonFinite`] for non-finite `x`.
    pub fn transform_into<T: Real>(
        &self,
        x: ArrayView2<T>,
        mut out: ArrayViewMut2<T>,
        par: Parallelism,
    ) -> Result<()> {
        self.validate()?;
        let (m, d) = self.landmarks.dim();
        Error::check_n_features(d, x.ncols())?;
        Error::check_out_shape((x.nrows(), m), out.dim())?;
        if !all_finite(x, par) {
            return Err(Error::NonFinite { name: "X" });
        }
        // With one length scale per dimension, the landmarks centered and
        // divided by them once, each chunk's rows as they are converted.
        let center = midrange(self.landmarks.view());
        let scaled = unit_variance(self.kernel, &self.length_scale);
        let (landmarks, l) = match self.length_scale.as_slice() {
            &[l] => (CowArray::from(self.landmarks.view()), l),
            _ => (
                CowArray::from(scaled.scale(self.landmarks.view(), &center)),
                1.0,
            ),
        };
        let work = |(xc, mut oc): (ArrayView2<T>, ArrayViewMut2<T>)| {
            let mut xf = xc.mapv(|v| v.to_f64_exact());
            if self.length_scale.len() > 1 {
                xf = scaled.scale(xf.view(), &center);
            }
            let mut kb = Array2::zeros((xc.nrows(), m));
            kernel_block(xf.view(), landmarks.view(), self.kernel, l, kb.view_mut());
            let mut phi = Array2::zeros((xc.nrows(), m));
            gemm(kb.view(), self.normalization.view(), phi.view_mut());
            oc.zip_mut_with(&phi, |o, p| *o = T::from_f64_lossy(*p));
        };
        let xs = x.axis_chunks_iter(Axis(0), CHUNK_ROWS);
        let os = out.axis_chunks_iter_mut(Axis(0), CHUNK_ROWS);
        if par.is_parallel() {
            xs.into_par_iter().zip(os.into_par_iter()).for_each(work);
        } else {
            xs.zip(os).for_each(work);
        }
        Ok(())
    }
}

/// The unit-variance kernel that `length_scale` (one value, or one per
/// input dimension) defines: its [`StationaryKernel::validate`] is the
/// map's check of the length scales, and its [`StationaryKernel::scale`]
/// the inputs `(x − c)/l` of the unit kernel that per-dimension length
/// scales define (`c` the [`midrange`] of the landmarks, so that inputs far
/// from the origin keep the digits of their differences).
fn unit_variance(kernel: Kernel, length_scale: &[f64]) -> StationaryKernel {
    StationaryKernel {
        kernel,
        length_scale: length_scale.to_vec(),
        variance: 1.0,
    }
}

#[cfg(test)]
mod tests;
