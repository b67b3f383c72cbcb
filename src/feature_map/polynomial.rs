//! [`FeatureMap`] for [`PolynomialFeatures`] (`docs/math/sketches.rst`, "Target
//! kernels"): the CPU transform of the map; on the GPU the sketch kernels of
//! [`crate::gpu`] (Gaussian, Rademacher, TensorSRHT; the same random
//! parameters), then the zero columns beyond the sketch's width.

#[cfg(feature = "gpu")]
use ndarray::s;
use ndarray::{ArrayView2, ArrayViewMut2};

use super::{reason, FeatureMap};
use crate::error::Result;
use crate::gpu;
use crate::real::Real;
use crate::sketch::PolynomialFeatures;
use crate::threads::Parallelism;

impl FeatureMap for PolynomialFeatures {
    fn n_features_in(&self) -> usize {
        PolynomialFeatures::n_features_in(self)
    }

    fn n_components(&self) -> usize {
        PolynomialFeatures::n_components(self)
    }

    fn row_flops(&self) -> f64 {
        self.sketch().row_flops()
    }

    fn transform_into<T: Real>(
        &self,
        x: ArrayView2<'_, T>,
        out: ArrayViewMut2<'_, T>,
        par: Parallelism,
    ) -> Result<()> {
        PolynomialFeatures::transform_into(self, x, out, par)
    }

    /// Every sketch but TensorSketch ([`gpu::check_sketch`]).
    fn gpu_support(&self) -> std::result::Result<(), String> {
        reason(gpu::check_sketch(self.sketch()))
    }

    #[cfg(feature = "gpu")]
    fn gpu_transform_into<T: Real>(
        &self,
        x: ArrayView2<'_, T>,
        mut out: ArrayViewMut2<'_, T>,
    ) -> Result<()> {
        let w = self.sketch().width();
        gpu::sketch_features_into(
            self.sketch(),
            x,
            self.bias(),
            self.length_scale(),
            out.slice_mut(s![.., ..w]),
        )?;
        out.slice_mut(s![.., w..]).fill(T::zero());
        Ok(())
    }

    #[cfg(feature = "gpu")]
    fn gpu_gram<T: Real>(
        &self,
        x: ArrayView2<'_, T>,
        y: Option<ArrayView2<'_, f64>>,
    ) -> Result<gpu::Gram> {
        let g = gpu::sketch_gram(self.sketch(), x, self.bias(), self.length_scale(), y)?;
        Ok(g.padded(PolynomialFeatures::n_components(self)))
    }
}
