//! Monte Carlo helper for the statistical tests: the kernel estimates of one
//! pair `(x, y)` under many independently drawn sketches.

use ndarray::{Array2, ArrayView1};
use rayon::prelude::*;

use super::{augmented_dim, check_kernel_params, polynomial_features_into, PolySketch, SketchKind};
use crate::error::{Error, Result};
use crate::threads::Parallelism;

/// The estimates `φ_r(x)ᵀφ_r(y)` of `(xᵀy/l² + c)^n` (`docs/math/sketches.rst`,
/// "Target kernels" and "The generic sketch of degree n") for `reps` sketches,
/// sketch `r` drawn from `rng::substream(seed, r)`. Complex sketches give the
/// real part (the [Re | Im] rows of `docs/math/conventions.rst`). Parallel over
/// draws; the result does not depend on the thread count.
#[allow(clippy::too_many_arguments)]
pub fn pair_estimates(
    kind: SketchKind,
    complex: bool,
    degree: u32,
    n_features: usize,
    x: ArrayView1<f64>,
    y: ArrayView1<f64>,
    bias: f64,
    length_scale: f64,
    seed: u64,
    reps: usize,
) -> Result<Vec<f64>> {
    if x.len() != y.len() {
        return Err(Error::ShapeMismatch {
            name: "length of y",
            expected: x.len(),
            got: y.len(),
        });
    }
    check_kernel_params(bias, length_scale)?;
    let d = x.len();
    let mut pair = Array2::<f64>::zeros((2, d));
    pair.row_mut(0).assign(&x);
    pair.row_mut(1).assign(&y);
    let dim = augmented_dim(d, bias);
    (0..reps)
        .into_par_iter()
        .map(|r| {
            let mut rng = crate::rng::substream(seed, r as u64);
            let sk = PolySketch::draw(kind, complex, degree, dim, n_features, &mut rng)?;
            let mut out = Array2::<f64>::zeros((2, sk.width()));
            polynomial_features_into(
                &sk,
                pair.view(),
                bias,
                length_scale,
                out.view_mut(),
                Parallelism::Sequential,
            )?;
            Ok(out.row(0).dot(&out.row(1)))
        })
        .collect()
}
