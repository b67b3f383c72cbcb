//! Pitch distributions of separable kernels (`docs/math/binning.rst`,
//! "Definition").

use rand::Rng as _;
use rand_distr::{Distribution, Gamma};

use crate::error::{Error, Result};
use crate::rng::Rng;

/// The per-dimension grid pitch distribution of a separable, shift-invariant
/// kernel `k(x, y) = Π_a k_1(|x_a − y_a|)`.
///
/// A random grid of pitch `δ` and shift `u ~ U[0, δ)` puts two points in the
/// same bin of one dimension with probability `max(0, 1 − |x_a − y_a|/δ)`.
/// If `δ` has density `p(δ) = δ k_1''(δ)` (which needs `k_1` convex with
/// `k_1(∞) = 0`), that probability averages to `k_1(|x_a − y_a|)` (Rahimi &
/// Recht 2007, section 3). See the module documentation for how to add a
/// kernel.
pub trait PitchDistribution: Send + Sync {
    /// Draws one pitch `δ > 0` for one dimension of one grid.
    fn sample_pitch(&self, rng: &mut Rng) -> f64;
}

/// The Laplacian kernel `exp(−‖x − y‖₁ / l)`: pitch `δ ~ Gamma(shape 2, scale l)`,
/// whose density `δ e^{−δ/l} / l²` is `δ k_1''(δ)` for `k_1(Δ) = e^{−Δ/l}`.
#[derive(Clone, Copy, Debug)]
pub struct Laplacian {
    gamma: Gamma<f64>,
}

impl Laplacian {
    /// The Laplacian kernel of length scale `length_scale` (`> 0`, finite).
    pub fn new(length_scale: f64) -> Result<Self> {
        if !(length_scale.is_finite() && length_scale > 0.0) {
            return Err(Error::invalid(
                "length_scale",
                format!("must be a finite number > 0, got {length_scale:?}"),
            ));
        }
        let gamma = Gamma::new(2.0, length_scale)
            .map_err(|e| Error::invalid("length_scale", e.to_string()))?;
        Ok(Self { gamma })
    }
}

impl PitchDistribution for Laplacian {
    fn sample_pitch(&self, rng: &mut Rng) -> f64 {
        // Gamma(2, l) has no atom at 0, but a draw can round to a subnormal;
        // redraw the (probability ~1e-300) zero so that every pitch is > 0.
        loop {
            let delta = self.gamma.sample(rng);
            if delta > 0.0 {
                return delta;
            }
            // Keep the stream moving even if the sampler returned 0 exactly.
            let _: u64 = rng.random();
        }
    }
}

/// The kernel named `name` (the Python `kernel` argument) with length scale
/// `length_scale`. Known names: `"laplacian"`.
pub fn kernel_by_name(name: &str, length_scale: f64) -> Result<Box<dyn PitchDistribution>> {
    match name {
        "laplacian" => Ok(Box::new(Laplacian::new(length_scale)?)),
        other => Err(Error::invalid(
            "kernel",
            format!("unknown kernel {other:?}; expected \"laplacian\""),
        )),
    }
}
