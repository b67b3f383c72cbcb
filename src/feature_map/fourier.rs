//! [`FeatureMap`] for [`FourierFeatures`] (`docs/math/fourier.rst`, "Feature
//! variants"): the CPU transform of the map; on the GPU the tiled kernel of
//! [`crate::gpu`] on the frequencies `W` (formed for the structured sampler),
//! the phases and the scale `σ·(√(2/D) or 1/√m)`, then the zero column of an
//! odd `cos_sin` width.

#[cfg(feature = "gpu")]
use ndarray::s;
use ndarray::{ArrayView2, ArrayViewMut2};

use super::FeatureMap;
use crate::error::Result;
use crate::fourier::FourierFeatures;
#[cfg(feature = "gpu")]
use crate::gpu;
use crate::real::Real;
use crate::threads::Parallelism;

impl FeatureMap for FourierFeatures {
    fn n_features_in(&self) -> usize {
        self.n_features()
    }

    fn n_components(&self) -> usize {
        self.n_components
    }

    /// A projection of the input (`2d`) and a cosine (about 20) per column.
    fn row_flops(&self) -> f64 {
        (self.n_components * (2 * self.n_features() + 20)) as f64
    }

    fn transform_into<T: Real>(
        &self,
        x: ArrayView2<'_, T>,
        out: ArrayViewMut2<'_, T>,
        par: Parallelism,
    ) -> Result<()> {
        FourierFeatures::transform_into(self, x, out, par)
    }

    /// [`FourierFeatures::validate`] (the fields are public), then the
    /// values of the projection (checked once per projection and kept).
    fn validate(&self) -> Result<()> {
        self.check_fields().map(|_| ())
    }

    /// Every sampler and variant has a GPU kernel.
    fn gpu_support(&self) -> std::result::Result<(), String> {
        Ok(())
    }

    #[cfg(feature = "gpu")]
    fn gpu_transform_into<T: Real>(
        &self,
        x: ArrayView2<'_, T>,
        mut out: ArrayViewMut2<'_, T>,
    ) -> Result<()> {
        self.check_fields()?;
        super::check_amplitude::<T>(self.scale())?;
        let cols = self.variant.n_columns(self.n_frequencies());
        let w = self.frequencies().mapv(T::from_f64_lossy);
        let phases = self.phases.as_ref().map(|b| b.mapv(T::from_f64_lossy));
        gpu::rff_features_into(
            x,
            w.view(),
            phases.as_ref().map(|b| b.view()),
            self.variant,
            T::from_f64_lossy(self.scale()),
            out.slice_mut(s![.., ..cols]),
        )?;
        out.slice_mut(s![.., cols..]).fill(T::zero());
        Ok(())
    }

    #[cfg(feature = "gpu")]
    fn gpu_gram<T: Real>(
        &self,
        x: ArrayView2<'_, T>,
        y: Option<ArrayView2<'_, f64>>,
    ) -> Result<gpu::Gram> {
        self.check_fields()?;
        let w = self.frequencies();
        let phases = self.phases.as_ref().map(|b| b.view());
        let g = gpu::rff_gram(x, w.view(), phases, self.variant, self.scale(), y)?;
        Ok(g.padded(self.n_components))
    }
}
