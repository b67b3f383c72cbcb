//! The scalar trait that lets one generic function serve `f32` and `f64`.

use std::fmt::{Debug, Display};
use std::iter::Sum;

/// A real floating-point scalar: implemented for `f32` and `f64` only.
///
/// Feature maps are generic over `Real` and return the input's precision;
/// linear solves (Cholesky, GP fits) are always done in `f64`.
pub trait Real:
    num_traits::Float
    + num_traits::FromPrimitive
    + num_traits::NumAssign
    + ndarray::LinalgScalar
    + ndarray::ScalarOperand
    + Sum
    + Default
    + Debug
    + Display
    + Send
    + Sync
    + 'static
{
    /// The type's name as NumPy spells it ("float32" or "float64").
    const DTYPE: &'static str;
    /// Converts from `f64`, rounding to the nearest representable value.
    fn from_f64_lossy(v: f64) -> Self;
    /// Widens (or copies) to `f64`.
    fn to_f64_exact(self) -> f64;
}

impl Real for f32 {
    const DTYPE: &'static str = "float32";
    #[inline(always)]
    fn from_f64_lossy(v: f64) -> Self {
        v as f32
    }
    #[inline(always)]
    fn to_f64_exact(self) -> f64 {
        self as f64
    }
}

impl Real for f64 {
    const DTYPE: &'static str = "float64";
    #[inline(always)]
    fn from_f64_lossy(v: f64) -> Self {
        v
    }
    #[inline(always)]
    fn to_f64_exact(self) -> f64 {
        self
    }
}
