//! [`FeatureMap`] and [`CenteredFeatureMap`] for [`MaclaurinMap`]
//! (`docs/math/maclaurin.rst`, "The truncated random map" and "Assembly"): the
//! CPU transforms of the map, with the fitted center or another one (Gaussian
//! kernel, `docs/math/localized.rst`, "Why"); on the GPU the degree blocks
//! through the sketch kernels of [`crate::gpu`].

use ndarray::{ArrayView2, ArrayViewMut2};

use super::{reason, CenteredFeatureMap, FeatureMap};
use crate::error::Result;
use crate::gpu;
use crate::maclaurin::MaclaurinMap;
use crate::real::Real;
use crate::threads::Parallelism;

impl FeatureMap for MaclaurinMap {
    fn n_features_in(&self) -> usize {
        self.dim()
    }

    fn n_components(&self) -> usize {
        self.width()
    }

    fn row_flops(&self) -> f64 {
        MaclaurinMap::row_flops(self)
    }

    fn transform_into<T: Real>(
        &self,
        x: ArrayView2<'_, T>,
        out: ArrayViewMut2<'_, T>,
        par: Parallelism,
    ) -> Result<()> {
        MaclaurinMap::transform_into(self, x, out, par)
    }

    /// Every map but the explicit `d = 1` map and TensorSketch blocks
    /// ([`gpu::check_maclaurin`]).
    fn gpu_support(&self) -> std::result::Result<(), String> {
        reason(gpu::check_maclaurin(self))
    }

    #[cfg(feature = "gpu")]
    fn gpu_transform_into<T: Real>(
        &self,
        x: ArrayView2<'_, T>,
        out: ArrayViewMut2<'_, T>,
    ) -> Result<()> {
        super::check_amplitude::<T>(self.config().kernel_variance.sqrt())?;
        gpu::maclaurin_features_into(self, x, None, out)
    }

    #[cfg(feature = "gpu")]
    fn gpu_gram<T: Real>(
        &self,
        x: ArrayView2<'_, T>,
        y: Option<ArrayView2<'_, f64>>,
    ) -> Result<gpu::Gram> {
        gpu::maclaurin_gram(self, x, None, y)
    }
}

/// Centered at any `c` for the Gaussian kernel; the dot-product kernels
/// accept only `c = 0` (they change under a shift, `docs/math/maclaurin.rst`,
/// "The Gaussian kernel through the exponential kernel").
impl CenteredFeatureMap for MaclaurinMap {
    fn transform_centered_into<T: Real>(
        &self,
        x: ArrayView2<'_, T>,
        center: &[f64],
        out: ArrayViewMut2<'_, T>,
        par: Parallelism,
    ) -> Result<()> {
        MaclaurinMap::transform_centered_into(self, x, center, out, par)
    }

    #[cfg(feature = "gpu")]
    fn gpu_transform_centered_into<T: Real>(
        &self,
        x: ArrayView2<'_, T>,
        center: &[f64],
        out: ArrayViewMut2<'_, T>,
    ) -> Result<()> {
        super::check_amplitude::<T>(self.config().kernel_variance.sqrt())?;
        gpu::maclaurin_features_into(self, x, Some(center), out)
    }
}
