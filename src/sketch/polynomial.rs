//! The fitted feature map of the polynomial kernel `(xᵀy/l² + c)^n`
//! (`docs/math/sketches.rst`, "Target kernels"): a [`PolySketch`] of the
//! augmented rows `x' = (√c, x/l)` and the output width, which may exceed the
//! sketch's by zero columns (a complex sketch has two real columns per feature,
//! `docs/math/conventions.rst`, "Widths", so an odd `n_components` ends in one
//! zero column).

use ndarray::{s, Array2, ArrayView2, ArrayViewMut2};

use super::{
    augmented_dim, check_degree, check_kernel_params, polynomial_features_into, PolySketch,
    SketchKind,
};
use crate::error::{Error, Result};
use crate::real::Real;
use crate::threads::Parallelism;

/// A polynomial-kernel feature map: `φ(x) = [sketch(x') | 0]` with
/// `x' = (√c, x/l)` (no bias coordinate when `c = 0`), so that
/// `E[φ(x)ᵀφ(y)] = (xᵀy/l² + c)^n` (`docs/math/sketches.rst`, "Target
/// kernels").
///
/// ```
/// use ndarray::Array2;
/// use randfeat_rs::sketch::{PolySketch, PolynomialFeatures, SketchKind};
/// use randfeat_rs::{rng, Parallelism};
///
/// // Degree 2, bias 1: the sketch sees d + 1 = 4 inputs; 7 columns hold
/// // 3 complex features and one zero column.
/// let sketch = PolySketch::draw(SketchKind::TensorSrht, true, 2, 4, 3, &mut rng::seeded(0))?;
/// let map = PolynomialFeatures::new(sketch, 1.0, 2.0, 7)?;
/// let phi = map.transform(Array2::<f64>::ones((5, 3)).view(), Parallelism::Rayon)?;
/// assert_eq!(phi.dim(), (5, 7));
/// assert!(phi.column(6).iter().all(|&v| v == 0.0));
/// # Ok::<(), randfeat_rs::Error>(())
/// ```
///
/// Stored (feature `serde`) as its fields, checked on loading as
/// [`PolynomialFeatures::new`] checks them (the sketch by its own checks).
#[derive(Clone, Debug)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize, serde::Deserialize),
    serde(try_from = "PolynomialParts")
)]
pub struct PolynomialFeatures {
    sketch: PolySketch,
    bias: f64,
    length_scale: f64,
    n_components: usize,
}

/// The stored form of [`PolynomialFeatures`] (its fields).
#[cfg(feature = "serde")]
#[derive(serde::Deserialize)]
struct PolynomialParts {
    sketch: PolySketch,
    bias: f64,
    length_scale: f64,
    n_components: usize,
}

#[cfg(feature = "serde")]
impl TryFrom<PolynomialParts> for PolynomialFeatures {
    type Error = Error;

    fn try_from(p: PolynomialParts) -> Result<Self> {
        PolynomialFeatures::new(p.sketch, p.bias, p.length_scale, p.n_components)
    }
}

/// The settings of a [`PolynomialFeatures`] map drawn by
/// [`PolynomialFeatures::draw`].
#[derive(Clone, Debug, PartialEq)]
pub struct PolynomialConfig {
    /// Output width `D` (real columns, `>= 1`; `>= 2` with complex weights).
    pub n_components: usize,
    /// Kernel degree `n >= 1`.
    pub degree: u32,
    /// Kernel bias `c >= 0`.
    pub bias: f64,
    /// Length scale `l > 0`.
    pub length_scale: f64,
    /// The sketch construction.
    pub sketch: SketchKind,
    /// Complex weights (two real columns per feature,
    /// docs/math/conventions.rst, section Widths).
    pub complex: bool,
}

/// The number of sketch features that fill `n_components` real columns:
/// `n_components` real features, or `⌊n_components/2⌋` complex ones (two
/// real columns each, `[Re | Im]`, docs/math/conventions.rst, section
/// Widths; an odd width ends in one zero column).
///
/// # Errors
/// [`Error::InvalidParameter`] naming `n_components` when it is 0, or 1
/// with complex weights.
pub fn sketch_features_for(n_components: usize, complex: bool) -> Result<usize> {
    if n_components == 0 {
        return Err(Error::invalid("n_components", "must be >= 1, got 0"));
    }
    if complex && n_components < 2 {
        return Err(Error::invalid(
            "n_components",
            format!(
                "must be >= 2 with complex_weights=True (two real columns per complex \
                 feature), got {n_components}"
            ),
        ));
    }
    Ok(if complex {
        n_components / 2
    } else {
        n_components
    })
}

impl PolynomialFeatures {
    /// Draws the map of `config` for rows of `n_features_in` columns: a
    /// sketch of [`sketch_features_for`] features over the
    /// [`super::augmented_dim`] inputs, its parameters from `seed`.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] for invalid settings (see
    /// [`sketch_features_for`], [`super::check_degree`],
    /// [`PolySketch::draw`] and [`Self::new`]).
    pub fn draw(config: &PolynomialConfig, n_features_in: usize, seed: u64) -> Result<Self> {
        let n_features = sketch_features_for(config.n_components, config.complex)?;
        check_degree(config.degree)?;
        check_kernel_params(config.bias, config.length_scale)?;
        let sketch = PolySketch::draw(
            config.sketch,
            config.complex,
            config.degree,
            augmented_dim(n_features_in, config.bias),
            n_features,
            &mut crate::rng::seeded(seed),
        )?;
        Self::new(
            sketch,
            config.bias,
            config.length_scale,
            config.n_components,
        )
    }

    /// The map of `sketch` (drawn for [`super::augmented_dim`]`(d, bias)`
    /// inputs)
    /// with `n_components >= sketch.width()` output columns.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] for a negative or non-finite bias, a
    /// length scale that is not finite and `> 0`, or fewer columns than the
    /// sketch writes.
    pub fn new(
        sketch: PolySketch,
        bias: f64,
        length_scale: f64,
        n_components: usize,
    ) -> Result<Self> {
        check_kernel_params(bias, length_scale)?;
        if n_components < sketch.width() {
            return Err(Error::invalid(
                "n_components",
                format!(
                    "must be at least the sketch's {} columns, got {n_components}",
                    sketch.width()
                ),
            ));
        }
        if bias > 0.0 && sketch.dim() < 2 {
            return Err(Error::invalid(
                "sketch",
                "with a bias the sketch's input holds √c and at least one feature (dim >= 2)",
            ));
        }
        Ok(Self {
            sketch,
            bias,
            length_scale,
            n_components,
        })
    }

    /// The sketch of the augmented rows.
    pub fn sketch(&self) -> &PolySketch {
        &self.sketch
    }

    /// The kernel bias `c >= 0`.
    pub fn bias(&self) -> f64 {
        self.bias
    }

    /// The length scale `l > 0`.
    pub fn length_scale(&self) -> f64 {
        self.length_scale
    }

    /// The input dimension `d` (the sketch's minus the bias coordinate).
    pub fn n_features_in(&self) -> usize {
        self.sketch.dim() - usize::from(self.bias > 0.0)
    }

    /// The output width `D` (the sketch's columns, then zero columns).
    pub fn n_components(&self) -> usize {
        self.n_components
    }

    /// Writes `φ(x)` for every row of `x` (`n × d`) into `out` (`n × D`,
    /// rows contiguous): the sketch features
    /// ([`polynomial_features_into`]), then zeros. Parallel over rows;
    /// deterministic.
    pub fn transform_into<T: Real>(
        &self,
        x: ArrayView2<T>,
        mut out: ArrayViewMut2<T>,
        par: Parallelism,
    ) -> Result<()> {
        Error::check_out_shape((x.nrows(), self.n_components), out.dim())?;
        let w = self.sketch.width();
        polynomial_features_into(
            &self.sketch,
            x,
            self.bias,
            self.length_scale,
            out.slice_mut(s![.., ..w]),
            par,
        )?;
        out.slice_mut(s![.., w..]).fill(T::zero());
        Ok(())
    }

    /// Allocating form of [`Self::transform_into`]; the output's size is
    /// checked first ([`crate::alloc::check_alloc`]): `n_components` is
    /// bounded only below by the sketch's width.
    pub fn transform<T: Real>(&self, x: ArrayView2<T>, par: Parallelism) -> Result<Array2<T>> {
        let (n, d) = (x.nrows(), self.n_components);
        crate::alloc::check_alloc(
            "n_components",
            &format!("the polynomial features ({n} x {d})"),
            &[n, d],
            std::mem::size_of::<T>(),
        )?;
        let mut out = Array2::zeros((n, d));
        self.transform_into(x, out.view_mut(), par)?;
        Ok(out)
    }
}
