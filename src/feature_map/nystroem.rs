//! [`FeatureMap`] for [`NystroemFeatures`]: `K_mm^{-1/2} k_m(x)` on the CPU
//! (kernel blocks and the product in f64); there is no GPU kernel.

use ndarray::{ArrayView2, ArrayViewMut2};

use super::FeatureMap;
use crate::error::Result;
use crate::nystroem::NystroemFeatures;
use crate::real::Real;
use crate::threads::Parallelism;

impl FeatureMap for NystroemFeatures {
    fn n_features_in(&self) -> usize {
        self.landmarks.ncols()
    }

    fn n_components(&self) -> usize {
        self.landmarks.nrows()
    }

    /// A kernel value against each landmark (`3d`), then a row of
    /// `K_mm^{-1/2}` (`2m`) per column.
    fn row_flops(&self) -> f64 {
        let (m, d) = self.landmarks.dim();
        (m * (3 * d + 2 * m)) as f64
    }

    /// [`NystroemFeatures::validate`] (the fields are public).
    fn validate(&self) -> Result<()> {
        NystroemFeatures::validate(self)
    }

    fn transform_into<T: Real>(
        &self,
        x: ArrayView2<'_, T>,
        out: ArrayViewMut2<'_, T>,
        par: Parallelism,
    ) -> Result<()> {
        NystroemFeatures::transform_into(self, x, out, par)
    }

    fn gpu_support(&self) -> std::result::Result<(), String> {
        Err("Nyström features have no GPU kernel".into())
    }
}
