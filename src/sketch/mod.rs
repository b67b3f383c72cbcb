//! Polynomial sketches (`docs/math/sketches.rst`): random feature maps for
//! the dot-product kernel `(xᵀy)^n`, and their closed-form variances.
//!
//! [`PolySketch::draw`] draws every random parameter from a seeded stream;
//! [`PolySketch::transform_into`] is a pure function of them, parallel over
//! rows and bit-identical for any thread count. [`polynomial_features_into`]
//! wraps a sketch for the kernel `(xᵀy/l² + c)^n` (`docs/math/sketches.rst`,
//! "Target kernels"), and [`PolynomialFeatures`] is that fitted map with its
//! output width.
//!
//! ```
//! use ndarray::{array, Array2};
//! use randfeat_rs::sketch::{PolySketch, SketchKind};
//! use randfeat_rs::{rng, Parallelism};
//!
//! let x = array![[1.0_f64, 1.0, 0.0, 0.0], [1.0, 0.0, 1.0, 0.0]];
//! // Degree 1 TensorSRHT with d' | D is exact: φ(x)ᵀφ(y) = xᵀy.
//! let s = PolySketch::draw(SketchKind::TensorSrht, false, 1, 4, 8, &mut rng::seeded(0)).unwrap();
//! let mut out = Array2::zeros((2, s.width()));
//! s.transform_into(x.view(), out.view_mut(), Parallelism::Rayon).unwrap();
//! assert!((out.row(0).dot(&out.row(1)) - 1.0).abs() < 1e-12);
//! ```

mod count;
mod dense;
#[cfg(any(test, feature = "python"))]
pub(crate) mod estimates;
mod polynomial;
mod srht;
#[cfg(test)]
mod tests;
pub mod variance;

use ndarray::{s, Array2, ArrayView2, ArrayViewMut2, Axis};
use rayon::prelude::*;

use std::sync::atomic::{AtomicBool, Ordering};

use crate::error::{Error, Result};
use crate::real::{all_finite, Real};
use crate::threads::Parallelism;

pub use polynomial::{sketch_features_for, PolynomialConfig, PolynomialFeatures};

/// The four sketch constructions of `docs/math/sketches.rst`, sections "The
/// generic sketch of degree n" to "TensorSketch".
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum SketchKind {
    /// i.i.d. Gaussian weights (`docs/math/sketches.rst`, "The generic sketch
    /// of degree n").
    Gaussian,
    /// i.i.d. Rademacher (±1) weights (`docs/math/sketches.rst`, "The generic
    /// sketch of degree n").
    Rademacher,
    /// Structured: random signs, FWHT and random permutations
    /// (`docs/math/sketches.rst`, "TensorSRHT").
    TensorSrht,
    /// CountSketch + FFT (`docs/math/sketches.rst`, "TensorSketch"); real only.
    TensorSketch,
}

impl SketchKind {
    /// Parses the Python spelling: "gaussian", "rademacher", "tensor_srht",
    /// "tensor_sketch".
    pub fn parse(name: &str) -> Result<Self> {
        match name {
            "gaussian" => Ok(Self::Gaussian),
            "rademacher" => Ok(Self::Rademacher),
            "tensor_srht" => Ok(Self::TensorSrht),
            "tensor_sketch" => Ok(Self::TensorSketch),
            other => Err(Error::invalid(
                "sketch",
                format!(
                    "unknown sketch {other:?}; expected one of \"gaussian\", \"rademacher\", \
                     \"tensor_srht\", \"tensor_sketch\""
                ),
            )),
        }
    }

    /// The Python spelling of the kind.
    pub fn name(self) -> &'static str {
        match self {
            Self::Gaussian => "gaussian",
            Self::Rademacher => "rademacher",
            Self::TensorSrht => "tensor_srht",
            Self::TensorSketch => "tensor_sketch",
        }
    }
}

/// The random parameters of one sketch kind.
#[derive(Clone, Debug)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
enum Params {
    Dense(dense::Dense),
    Srht(srht::Srht),
    Count(count::Count),
}

/// A borrowed view of a sketch's random parameters, for export (NumPy
/// attributes, the GPU path). Layouts are those of `docs/math/sketches.rst`,
/// sections "The generic sketch of degree n" to "TensorSketch".
#[derive(Clone, Copy, Debug)]
pub enum SketchParams<'a> {
    /// Gaussian / Rademacher: one matrix per factor, `D × d` (real) or
    /// `2D_c × d` (complex: real parts in rows `0..D_c`, imaginary parts in
    /// rows `D_c..2D_c`).
    Dense {
        /// The weight matrices `W_1 … W_n`.
        weights: &'a [Array2<f64>],
    },
    /// TensorSRHT: for block `b` and factor `j`, entries
    /// `(b·n + j)·d' … (b·n + j + 1)·d' − 1` of both slices.
    Srht {
        /// The padded dimension `d'`.
        d_pad: usize,
        /// Sign codes: real `0 → +1, 1 → −1`; complex `k → i^k`.
        codes: &'a [u8],
        /// The permutations `π_{b,j}` (`v[r] = u[π(r)]`).
        perms: &'a [u32],
    },
    /// TensorSketch: entry `j·d + a` is factor `j`, coordinate `a`.
    Count {
        /// The hashes `h_j(a) ∈ 0..D`.
        hashes: &'a [u32],
        /// The signs `s_j(a)` (`true` means −1).
        negative: &'a [bool],
    },
}

/// Fitted random parameters of one degree-`degree` sketch with `n_features`
/// features (complex features when `complex`), `docs/math/sketches.rst`,
/// sections "The generic sketch of degree n" to "TensorSketch". Stored
/// (feature `serde`) as its fields, checked on loading (shapes, index
/// ranges and values of the random parameters) so that a stored sketch
/// that contradicts itself is refused instead of transforming wrongly.
#[derive(Clone, Debug)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize, serde::Deserialize),
    serde(try_from = "SketchParts")
)]
pub struct PolySketch {
    kind: SketchKind,
    complex: bool,
    degree: u32,
    dim: usize,
    n_features: usize,
    params: Params,
}

/// The stored form of [`PolySketch`] (its fields), checked on loading by
/// [`PolySketch::validate`].
#[cfg(feature = "serde")]
#[derive(serde::Deserialize)]
struct SketchParts {
    kind: SketchKind,
    complex: bool,
    degree: u32,
    dim: usize,
    n_features: usize,
    params: Params,
}

#[cfg(feature = "serde")]
impl TryFrom<SketchParts> for PolySketch {
    type Error = Error;

    fn try_from(p: SketchParts) -> Result<Self> {
        let sketch = PolySketch {
            kind: p.kind,
            complex: p.complex,
            degree: p.degree,
            dim: p.dim,
            n_features: p.n_features,
            params: p.params,
        };
        sketch.validate()?;
        Ok(sketch)
    }
}

impl PolySketch {
    /// Checks that the fields agree with each other as the transforms
    /// assume, values included (`O(size of the parameters)`; the fields are
    /// private, so this runs where a sketch is loaded, not per transform):
    /// `degree`, `dim` and `n_features` at least 1; parameters of the
    /// `kind` (complex ones never for TensorSketch); dense weights, one
    /// finite `D × d` (`2D × d` complex) matrix per factor; TensorSRHT's
    /// padded dimension, blocks, sign codes and permutations of `0..d'`;
    /// TensorSketch's hashes in `0..D` and signs, `n · d` of each.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] naming the field with a bad value,
    /// [`Error::ShapeMismatch`] naming the field of the wrong length.
    pub(crate) fn validate(&self) -> Result<()> {
        for (name, v) in [
            ("degree", self.degree as usize),
            ("dim", self.dim),
            ("n_features", self.n_features),
        ] {
            if v == 0 {
                return Err(Error::invalid(name, "must be >= 1, got 0"));
            }
        }
        match (&self.params, self.kind) {
            (Params::Dense(p), SketchKind::Gaussian | SketchKind::Rademacher) => {
                // `width` doubles the features of a complex sketch.
                let rows = self
                    .n_features
                    .checked_mul(if self.complex { 2 } else { 1 })
                    .ok_or_else(|| Error::invalid("n_features", "too large"))?;
                p.check(self.degree, rows, self.dim)
            }
            (Params::Srht(p), SketchKind::TensorSrht) => {
                p.check(self.complex, self.degree, self.dim, self.n_features)
            }
            (Params::Count(p), SketchKind::TensorSketch) => {
                if self.complex {
                    return Err(Error::invalid(
                        "complex",
                        "TensorSketch has no complex variant",
                    ));
                }
                tensor_sketch_width(self.n_features)?;
                p.check(self.degree, self.dim, self.n_features)
            }
            (_, kind) => Err(Error::invalid(
                "params",
                format!(
                    "the parameters are not those of the {} sketch (kind)",
                    kind.name()
                ),
            )),
        }
    }

    /// Draws all parameters from `rng`. `dim` is the input dimension d
    /// (TensorSRHT pads to d' internally). Errors: degree 0, n_features 0,
    /// complex TensorSketch, a TensorSketch wider than
    /// [`MAX_TENSOR_SKETCH_FEATURES`], dim 0, parameters larger than the
    /// memory available or than the system can allocate.
    pub fn draw(
        kind: SketchKind,
        complex: bool,
        degree: u32,
        dim: usize,
        n_features: usize,
        rng: &mut crate::rng::Rng,
    ) -> Result<Self> {
        if degree == 0 {
            return Err(Error::invalid("degree", "must be >= 1, got 0"));
        }
        if n_features == 0 {
            return Err(Error::invalid(
                "n_components",
                "the number of sketch features must be >= 1, got 0",
            ));
        }
        if dim == 0 {
            return Err(Error::invalid(
                "dim",
                "the input dimension must be >= 1, got 0",
            ));
        }
        // The random parameters: `degree` dense `D × d` weight matrices
        // (twice the rows when complex), or `degree` sign codes (1 byte) and
        // permutation entries (4 bytes) per padded input dimension and block
        // of `d'` features for TensorSRHT; TensorSketch's hashes are `O(d)`.
        let rows = if complex {
            2 * n_features as u128
        } else {
            n_features as u128
        };
        let (what, dims, elem) = match kind {
            SketchKind::Gaussian | SketchKind::Rademacher => (
                "weights (float64)",
                [
                    degree as usize,
                    usize::try_from(rows).unwrap_or(usize::MAX),
                    dim,
                ],
                8,
            ),
            SketchKind::TensorSrht => {
                let d_pad = padded_dim(dim)?;
                (
                    "signs and permutations",
                    [degree as usize, n_features.div_ceil(d_pad), d_pad],
                    5,
                )
            }
            SketchKind::TensorSketch => ("hashes", [degree as usize, dim, 1], 16),
        };
        crate::alloc::check_alloc(
            "n_components",
            &format!(
                "the degree-{degree} sketch's {what} for {n_features} features of {dim} inputs"
            ),
            &dims,
            elem,
        )?;
        let params = match kind {
            SketchKind::Gaussian | SketchKind::Rademacher => Params::Dense(dense::Dense::draw(
                kind, complex, degree, dim, n_features, rng,
            )?),
            SketchKind::TensorSrht => {
                Params::Srht(srht::Srht::draw(complex, degree, dim, n_features, rng)?)
            }
            SketchKind::TensorSketch => {
                if complex {
                    return Err(Error::invalid(
                        "complex_weights",
                        "TensorSketch has no complex variant; use complex_weights=False",
                    ));
                }
                let width = tensor_sketch_width(n_features)?;
                Params::Count(count::Count::draw(degree, dim, width, rng))
            }
        };
        let sketch = Self {
            kind,
            complex,
            degree,
            dim,
            n_features,
            params,
        };
        // What loading checks holds for every sketch drawn here.
        debug_assert_eq!(sketch.validate(), Ok(()));
        Ok(sketch)
    }

    /// The sketch construction.
    pub fn kind(&self) -> SketchKind {
        self.kind
    }

    /// True for complex weights (output in the [Re | Im] layout of
    /// `docs/math/conventions.rst`, "Complex features and their real
    /// representation").
    pub fn is_complex(&self) -> bool {
        self.complex
    }

    /// The degree `n` of the sketched kernel `(xᵀy)^n`.
    pub fn degree(&self) -> u32 {
        self.degree
    }

    /// The input dimension d.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// The number of (real or complex) features D.
    pub fn n_features(&self) -> usize {
        self.n_features
    }

    /// Output columns: n_features for real sketches, 2 * n_features for
    /// complex ([Re | Im], `docs/math/conventions.rst`, "Complex features and
    /// their real representation").
    pub fn width(&self) -> usize {
        if self.complex {
            2 * self.n_features
        } else {
            self.n_features
        }
    }

    /// A rough count of the floating-point operations of sketching one row
    /// (see [`crate::feature_map::FeatureMap::row_flops`]), per factor of
    /// the degree, doubled for complex weights: a dense `D × d` projection
    /// for the Gaussian and Rademacher sketches; for TensorSRHT the signed,
    /// padded FWHT of `d' log₂ d'` additions (plus the signs, the gather and
    /// the product) per block of `d'` features; for TensorSketch the count
    /// sketch and an FFT of `D` points.
    pub fn row_flops(&self) -> f64 {
        let (d, nf) = (self.dim as f64, self.n_features as f64);
        let per_factor = match self.kind {
            SketchKind::Gaussian | SketchKind::Rademacher => 2.0 * d * nf,
            SketchKind::TensorSrht => {
                // `draw` refused dimensions without a power of two.
                let dp = self.dim.next_power_of_two() as f64;
                (nf / dp).ceil() * dp * (dp.log2() + 3.0)
            }
            SketchKind::TensorSketch => d + 10.0 * nf * nf.log2().max(1.0),
        };
        let parts = if self.complex { 2.0 } else { 1.0 };
        parts * f64::from(self.degree) * per_factor
    }

    /// The random parameters (see [`SketchParams`]).
    pub fn params(&self) -> SketchParams<'_> {
        match &self.params {
            Params::Dense(p) => SketchParams::Dense {
                weights: p.weights(),
            },
            Params::Srht(p) => SketchParams::Srht {
                d_pad: p.d_pad(),
                codes: p.codes(),
                perms: p.perms(),
            },
            Params::Count(p) => SketchParams::Count {
                hashes: p.hashes(),
                negative: p.negative(),
            },
        }
    }

    /// Writes φ(x) of `docs/math/sketches.rst`, "The generic sketch of degree
    /// n" (the 1/√D included; TensorSketch without it,
    /// `docs/math/sketches.rst`, "TensorSketch") for every row of `x` (n x dim)
    /// into `out` (n x width). `out` may be a column block of a wider array:
    /// its rows are contiguous but its row stride may exceed `width`. Parallel
    /// over rows with `par`; deterministic. Errors: shape mismatches, `out`
    /// rows not contiguous, [`Error::NonFinite`] naming `X` for non-finite
    /// input, and [`Error::InvalidParameter`] naming `X` for features that
    /// overflow the float range.
    pub fn transform_into<T: Real>(
        &self,
        x: ArrayView2<T>,
        out: ArrayViewMut2<T>,
        par: Parallelism,
    ) -> Result<()> {
        check_shapes(x.dim(), out.dim(), self.dim, self.width())?;
        if out.nrows() > 0 && out.ncols() > 1 && out.strides()[1] != 1 {
            return Err(Error::invalid(
                "out",
                "the rows of the output must be contiguous (unit column stride)",
            ));
        }
        let finite = match &self.params {
            Params::Dense(p) => p.transform(self.complex, self.n_features, x, out, par),
            Params::Srht(p) => p.transform(self, x, out, par),
            Params::Count(p) => p.transform(self.n_features, x, out, par),
        };
        // Non-finite features come from non-finite input or from overflow:
        // the input is read again only to tell which.
        if !finite && !crate::real::all_finite(x, par) {
            return Err(Error::NonFinite { name: "X" });
        }
        refuse_overflow(finite)
    }
}

impl PolySketch {
    /// The linear factor projections `v_j(x)` of `docs/math/sketches.rst`, "The
    /// generic sketch of degree n" and "TensorSRHT" (the sketch is the
    /// entrywise product `φ(x) = Π_j v_j(x)/√D`, complex for complex weights),
    /// written for every row of `x` into `out` (`n × degree·width`): factor `j`
    /// in columns `j·w … (j+1)·w − 1`, `w` = [`Self::width`] (`[Re | Im]` when
    /// complex). Because every `v_j` is linear, `v_j(x − c) = v_j(x) − v_j(c)`:
    /// [`Self::combine_factors`] then sketches shifted inputs without
    /// transforming them again (the localized GP of `docs/math/localized.rst`
    /// maps one training set at many centers). Errors: TensorSketch (its
    /// factors combine through an FFT), shape mismatches.
    pub fn factor_projections_into(
        &self,
        x: ArrayView2<f64>,
        out: ArrayViewMut2<f64>,
    ) -> Result<()> {
        check_shapes(
            x.dim(),
            (out.nrows(), out.ncols() / self.degree as usize),
            self.dim,
            self.width(),
        )?;
        if out.ncols() != self.degree as usize * self.width() {
            return Err(Error::ShapeMismatch {
                name: "number of columns of out (degree times width)",
                expected: self.degree as usize * self.width(),
                got: out.ncols(),
            });
        }
        match &self.params {
            Params::Dense(p) => p.project(x, out),
            Params::Srht(p) => p.project(self, x, out),
            Params::Count(_) => {
                return Err(Error::invalid(
                    "sketch",
                    "TensorSketch has no per-feature factor projections (its factors \
                     combine through an FFT)",
                ))
            }
        }
        Ok(())
    }

    /// `φ(t·(x − c))` from factor projections (see
    /// [`Self::factor_projections_into`]): `v` a row of projections of `x`,
    /// `s` those of `c`, `t` a scale applied to every factor; writes
    /// `Π_j t (v_j − s_j) / √D` (complex products when complex) into `out`
    /// (length [`Self::width`]).
    ///
    /// # Panics
    /// When `v` or `s` is shorter than `degree ×` [`Self::width`] or `out`
    /// shorter than [`Self::width`] (as [`Self::factor_projections_into`]
    /// sizes them).
    pub fn combine_factors(&self, v: &[f64], s: &[f64], t: f64, out: &mut [f64]) {
        let w = self.width();
        let nf = self.n_features;
        let scale = 1.0 / (nf as f64).sqrt();
        // Factor-major loops (the inner loop runs over contiguous features and
        // vectorizes); every feature still multiplies its factors in the
        // order j = 0, 1, ..., so the result is the same as feature-major.
        if self.complex {
            let (re, im) = out[..w].split_at_mut(nf);
            re.fill(scale);
            im.fill(0.0);
            for j in 0..self.degree as usize {
                let (vr, vi) = v[j * w..(j + 1) * w].split_at(nf);
                let (sr, si) = s[j * w..(j + 1) * w].split_at(nf);
                for r in 0..nf {
                    let u = t * (vr[r] - sr[r]);
                    let q = t * (vi[r] - si[r]);
                    let (a, b) = (re[r], im[r]);
                    re[r] = a * u - b * q;
                    im[r] = a * q + b * u;
                }
            }
        } else {
            let out = &mut out[..w];
            out.fill(scale);
            for j in 0..self.degree as usize {
                let (vj, sj) = (&v[j * w..(j + 1) * w], &s[j * w..(j + 1) * w]);
                for ((o, a), b) in out.iter_mut().zip(vj).zip(sj) {
                    *o *= t * (a - b);
                }
            }
        }
    }
}

fn check_shapes(x: (usize, usize), out: (usize, usize), dim: usize, width: usize) -> Result<()> {
    Error::check_n_features(dim, x.1)?;
    Error::check_out_shape((x.0, width), out)
}

/// Checks the kernel parameters of `(xᵀy/l² + c)^n` (`docs/math/sketches.rst`,
/// "Target kernels").
pub fn check_kernel_params(bias: f64, length_scale: f64) -> Result<()> {
    if !(bias.is_finite() && bias >= 0.0) {
        return Err(Error::invalid(
            "bias",
            format!("must be a finite number >= 0, got {bias}"),
        ));
    }
    if !(length_scale.is_finite() && length_scale > 0.0) {
        return Err(Error::invalid(
            "length_scale",
            format!("must be a finite number > 0, got {length_scale}"),
        ));
    }
    Ok(())
}

/// The largest degree `n` of the polynomial kernel `(xᵀy/l² + c)^n` that
/// [`PolynomialFeatures::draw`] and [`variance::polynomial_kernel_variance`]
/// accept.
///
/// Each feature is a product of `n` random projections of `x' = (√c, x/l)`,
/// of magnitude about `‖x'‖ⁿ`, and the relative variance of the estimate
/// grows like `3ⁿ / D` for the dense sketches (`docs/math/sketches.rst`,
/// "Variances"). At `n = 32` the features of float32 data stay finite for
/// `‖x'‖² ≤ 16` (`16³² = 2¹²⁸` is the float32 range), and a relative
/// standard deviation of 1 already takes `D ≈ 3³² ≈ 2·10¹⁵` features for
/// dense inputs: higher degrees overflow or cannot be estimated.
pub const MAX_DEGREE: u32 = 32;

/// The most features a TensorSketch can have: its hashes are `u32` values in
/// `0..D`.
pub const MAX_TENSOR_SKETCH_FEATURES: usize = u32::MAX as usize;

/// The number of TensorSketch features `D` as the `u32` its hashes range
/// over; an error naming `n_components` above
/// [`MAX_TENSOR_SKETCH_FEATURES`].
pub fn tensor_sketch_width(n_features: usize) -> Result<u32> {
    u32::try_from(n_features).map_err(|_| {
        Error::invalid(
            "n_components",
            format!(
                "TensorSketch hashes every input coordinate to one of its features with a \
                 32-bit hash, so it has at most {MAX_TENSOR_SKETCH_FEATURES} features, got \
                 {n_features}"
            ),
        )
    })
}

/// Checks the degree `n` of the polynomial kernel: `1 ≤ n ≤` [`MAX_DEGREE`]
/// (any unsigned integer, so that the message shows the value as given).
pub fn check_degree(degree: impl Into<u64>) -> Result<()> {
    let degree: u64 = degree.into();
    if degree == 0 || degree > u64::from(MAX_DEGREE) {
        return Err(Error::invalid(
            "degree",
            format!(
                "must be between 1 and {MAX_DEGREE}, got {degree}: the features are products of \
                 `degree` projections, so higher degrees overflow the float range (the \
                 kernel's own value is (x.y/l^2 + c)^degree) and their variance grows like \
                 3^degree / n_components; scale the inputs or lower the degree"
            ),
        ));
    }
    Ok(())
}

/// The sketch input dimension for `d` input columns: `d + 1` when the bias
/// coordinate `√c` is prepended (`c > 0`, `docs/math/sketches.rst`, "Target
/// kernels"), else `d`. Saturating at `usize::MAX`, a width that no size
/// check accepts (no array has that many columns).
pub fn augmented_dim(d: usize, bias: f64) -> usize {
    d.saturating_add(usize::from(bias > 0.0))
}

/// Rows per augmentation chunk in [`polynomial_features_into`].
const AUGMENT_ROWS: usize = 1024;

/// Features of the kernel `(xᵀy/l² + c)^n` (`docs/math/sketches.rst`, "Target
/// kernels"): applies `sketch` to `x' = (√c, x/l)` (no bias coordinate when
/// `c = 0`), so that `E[φ(x)ᵀφ(y)] = (xᵀy/l² + c)^n`. `sketch.dim()` must be
/// [`augmented_dim`]`(x.ncols(), bias)`; `out` as in
/// [`PolySketch::transform_into`]. The augmented rows are built in chunks of
/// 1,024 rows, so memory stays `O(chunk · d)`.
///
/// # Errors
/// [`Error::NonFinite`] for NaN or infinite inputs; [`Error::InvalidParameter`]
/// naming `X` when the features overflow the float range (`|x|/l` too large
/// for the degree, or beyond `T`'s range itself: each feature is a product
/// of `n` projections); the
/// errors of [`check_kernel_params`] and of the shapes.
pub fn polynomial_features_into<T: Real>(
    sketch: &PolySketch,
    x: ArrayView2<T>,
    bias: f64,
    length_scale: f64,
    mut out: ArrayViewMut2<T>,
    par: Parallelism,
) -> Result<()> {
    check_kernel_params(bias, length_scale)?;
    let d = x.ncols();
    if augmented_dim(d, bias) != sketch.dim() {
        return Err(Error::ShapeMismatch {
            name: "number of features of X",
            expected: sketch.dim() - usize::from(bias > 0.0),
            got: d,
        });
    }
    if !all_finite(x, par) {
        return Err(Error::NonFinite { name: "X" });
    }
    if bias == 0.0 && length_scale == 1.0 {
        return sketch.transform_into(x, out, par);
    }
    check_shapes(
        (x.nrows(), sketch.dim()),
        out.dim(),
        sketch.dim(),
        sketch.width(),
    )?;
    let off = usize::from(bias > 0.0);
    // x/l as x · (1/l) where 1/l is a normal number of T; else (1/l
    // overflows T, or underflows with the digits of x/l) as the division in
    // f64, rounded once to T.
    let inv_l = T::from_f64_lossy(1.0 / length_scale);
    let scaled = |v: T| {
        if inv_l.is_normal() {
            v * inv_l
        } else {
            T::from_f64_lossy(v.to_f64_exact() / length_scale)
        }
    };
    let root_c = T::from_f64_lossy(bias.sqrt());
    let mut aug = Array2::<T>::zeros((AUGMENT_ROWS.min(x.nrows()), sketch.dim()));
    for (i, xc) in x.axis_chunks_iter(Axis(0), AUGMENT_ROWS).enumerate() {
        let rows = xc.nrows();
        let mut a = aug.slice_mut(s![..rows, ..]);
        if off == 1 {
            a.column_mut(0).fill(root_c);
        }
        a.slice_mut(s![.., off..])
            .zip_mut_with(&xc, |dst, &src| *dst = scaled(src));
        // x/l beyond T's range makes features beyond it.
        refuse_overflow(all_finite(a.view(), Parallelism::Sequential))?;
        let o = out.slice_mut(s![i * AUGMENT_ROWS..i * AUGMENT_ROWS + rows, ..]);
        sketch.transform_into(a.view(), o, par)?;
    }
    Ok(())
}

/// Runs `f` on matching chunks of `chunk` rows of `x` and `out`, in parallel
/// with per-thread scratch from `init` when `par` allows. The chunk size is
/// fixed, so results never depend on the thread count. Returns whether every
/// value written is finite, checked chunk by chunk while the chunk is still
/// in cache (see [`refuse_overflow`]).
fn for_row_chunks<T, S, I, F>(
    x: ArrayView2<T>,
    mut out: ArrayViewMut2<T>,
    chunk: usize,
    par: Parallelism,
    init: I,
    f: F,
) -> bool
where
    T: Real,
    I: Fn() -> S + Sync + Send,
    F: Fn(&mut S, ArrayView2<T>, ArrayViewMut2<T>) + Sync + Send,
{
    let run = |s: &mut S, a: ArrayView2<T>, mut b: ArrayViewMut2<T>| {
        f(s, a, b.view_mut());
        all_finite(b.view(), Parallelism::Sequential)
    };
    let xs = x.axis_chunks_iter(Axis(0), chunk);
    let os = out.axis_chunks_iter_mut(Axis(0), chunk);
    if par.is_parallel() {
        let overflow = AtomicBool::new(false);
        xs.into_par_iter()
            .zip(os.into_par_iter())
            .for_each_init(init, |s, (a, b)| {
                if !run(s, a, b) {
                    overflow.store(true, Ordering::Relaxed);
                }
            });
        !overflow.into_inner()
    } else {
        let mut s = init();
        xs.zip(os).fold(true, |ok, (a, b)| run(&mut s, a, b) && ok)
    }
}

/// `Ok` when the features written are finite, else the refusal of features
/// that overflow the float range: products of `degree` projections of
/// `x / length_scale` overflow for rows far beyond the length scale, and
/// such features are refused rather than returned as infinities (the
/// sketches, the Maclaurin map, and the GPU's output of both).
pub(crate) fn refuse_overflow(finite: bool) -> Result<()> {
    if finite {
        return Ok(());
    }
    Err(Error::invalid(
        "X",
        "the features overflow the float range: they are products of `degree` \
         projections of x / length_scale, so rows far beyond the length scale overflow; \
         scale X down, raise length_scale or lower the degree",
    ))
}

/// The next power of two `d' = 2^⌈log₂ d⌉` (`d' = 1` for `d <= 1`): the
/// width TensorSRHT pads its input to.
///
/// # Errors
/// [`Error::InvalidParameter`] when `d'` exceeds `usize::MAX` (`d > 2⁶³` on
/// 64-bit targets).
pub fn padded_dim(d: usize) -> Result<usize> {
    d.max(1).checked_next_power_of_two().ok_or_else(|| {
        Error::invalid(
            "dim",
            format!("TensorSRHT pads the input dimension to a power of two, and {d} has none below usize::MAX"),
        )
    })
}
