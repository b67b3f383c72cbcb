//! [`FeatureMap`] for [`FourierFeatures`] (`docs/math/fourier.rst`, "Feature
//! variants"): the CPU transform of the map; on the GPU the tiled kernel of
//! [`crate::gpu`] on the frequencies `W` (formed for the structured sampler),
//! the phases and the scale `σ·(√(2/D) or 1/√m)`, then the zero column of an
//! odd `cos_sin` width.

#[cfg(feature = "gpu")]
use ndarray::s;
use ndarray::{ArrayView2, ArrayViewMut2};

use super::FeatureMap;
#[cfg(feature = "gpu")]
use crate::error::Error;
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
        check_gpu_input(x, self.check_fields()?)?;
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
        check_gpu_input(x, self.check_fields()?)?;
        let w = self.frequencies();
        let phases = self.phases.as_ref().map(|b| b.view());
        let g = gpu::rff_gram(x, w.view(), phases, self.variant, self.scale(), y)?;
        Ok(g.padded(self.n_components))
    }
}

/// Refuses input the GPU cannot project: non-finite `X`, or `X` whose
/// projections may overflow the f32 range the GPU computes in, by the
/// CPU's test with the bound `bound` on `‖w_j‖₁` (see
/// [`FourierFeatures::transform_into`]) against half of f32's range (room
/// for the rounding of the f32 dot products and the phases).
///
/// # Errors
/// [`Error::NonFinite`] or [`Error::InvalidParameter`] naming `X`.
#[cfg(feature = "gpu")]
fn check_gpu_input<T: Real>(x: ArrayView2<'_, T>, bound: f64) -> Result<()> {
    if !crate::real::all_finite(x, Parallelism::Rayon) {
        return Err(Error::NonFinite { name: "X" });
    }
    let limit = f64::from(f32::MAX) / 2.0;
    if x.iter().any(|v| v.to_f64_exact().abs() * bound > limit) {
        return Err(Error::invalid(
            "X",
            format!(
                "its projections on the frequencies may overflow the float32 range the GPU \
                 computes in (max |x| times the largest frequency norm {bound:e} must stay \
                 below {limit:e}): scale X down, or transform on the CPU (device=\"cpu\")"
            ),
        ));
    }
    Ok(())
}
