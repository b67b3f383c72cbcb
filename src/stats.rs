//! Mergeable sufficient statistics of a least-squares fit on explicit
//! features (`docs/math/gp.rst`, "Feature-space GP"): `ΦᵀΦ`, `Φᵀy`, `Φᵀ1` and
//! the target sums, accumulated over row chunks (never an `N × D` matrix) and
//! merged exactly. [`crate::feature_map::accumulate`] builds them from any
//! fitted map (on the CPU or the GPU); the feature-space GP
//! ([`crate::gp::FeatureGp`]) solves from them.
//!
//! Target centering (`docs/math/gp.rst`): the training mean `ȳ` is only known
//! at the end of a streamed fit, so the statistics keep raw sums relative to
//! a fixed shift `s` (the first chunk's mean, which keeps the sums of
//! squares well conditioned): `b = Φᵀ(y − s)`, `f = Φᵀ1`, `t = Σ(y − s)`,
//! `q = Σ(y − s)²`. With `δ = ȳ − s = t/N` the centered statistics are
//! `Φᵀ(y − ȳ) = b − δ f` and `‖y − ȳ‖² = q − N δ²`, and two shifts convert
//! exactly into each other, so statistics merge exactly.

use ndarray::{Array1, Array2, ArrayView1, ArrayView2};

use crate::error::{check_finite, Error, Result};
use crate::linalg::{accumulate_gram, mirror_lower};
use crate::real::{all_finite, Real};
use crate::threads::Parallelism;

/// Sufficient statistics of a feature-space GP fit (see the module docs).
#[derive(Clone, Debug)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct FeatureStats {
    /// `ΦᵀΦ` (`D × D`) in its lower triangle (`gram[(i, j)]`, `j ≤ i`), the
    /// BLAS `syrk` convention: [`FeatureStats::accumulate`] updates the lower
    /// triangle only and every reader ([`crate::gp::FeatureGp::fit`],
    /// [`FeatureStats::gram_symmetric`]) ignores the strict upper one, which
    /// holds whatever it was given (zeros from [`FeatureStats::new`]). Not
    /// mirrored after each chunk: the copy of `D²/2` values would be repeated
    /// for every chunk of a streamed fit.
    pub gram: Array2<f64>,
    /// `Φᵀ(y − s)`.
    pub phi_y: Array1<f64>,
    /// `Φᵀ1`, the column sums of `Φ`.
    pub phi_sum: Array1<f64>,
    /// Number of rows `N`.
    pub n: u64,
    /// The shift `s` (the first chunk's target mean).
    pub y_shift: f64,
    /// `Σ(y − s)`.
    pub y_sum: f64,
    /// `Σ(y − s)²`.
    pub y_sq_sum: f64,
}

impl FeatureStats {
    /// Refuses `count` sets of statistics for `D = n_features` features, and
    /// the `D × D` factor a solve makes of each, when they cannot be held:
    /// `2 · count · D²` float64 (see [`crate::alloc::check_alloc`]); the
    /// error names `n_components`, the width of the feature map.
    pub fn check_size(n_features: usize, count: usize) -> crate::Result<()> {
        crate::alloc::check_alloc(
            "n_components",
            &format!(
                "{count} feature-space GP(s) with D = {n_features} features \
                 (2 x {count} x {n_features} x {n_features} float64: the Gram matrix and its factor)"
            ),
            &[2, count, n_features, n_features],
            8,
        )
        .map(|_| ())
    }

    /// Empty statistics for `D` features.
    pub fn new(n_features: usize) -> Self {
        Self {
            gram: Array2::zeros((n_features, n_features)),
            phi_y: Array1::zeros(n_features),
            phi_sum: Array1::zeros(n_features),
            n: 0,
            y_shift: 0.0,
            y_sum: 0.0,
            y_sq_sum: 0.0,
        }
    }

    /// The number of features `D`.
    pub fn n_features(&self) -> usize {
        self.phi_y.len()
    }

    /// The full symmetric `ΦᵀΦ`: the lower triangle of `gram` mirrored.
    pub fn gram_symmetric(&self) -> Array2<f64> {
        let mut g = self.gram.as_standard_layout().into_owned();
        mirror_lower(g.view_mut());
        g
    }

    /// Checks the shapes and values of statistics built from outside (e.g.
    /// a Python caller or a deserialized file).
    pub fn validate(&self) -> Result<()> {
        self.check_shapes()?;
        check_finite("gram", self.gram.iter())?;
        check_finite("phi_y", self.phi_y.iter())?;
        check_finite("phi_sum", self.phi_sum.iter())?;
        check_finite(
            "y statistics",
            [self.y_shift, self.y_sum, self.y_sq_sum].iter(),
        )
    }

    /// The shapes of the public fields agree: `gram` is `D × D` and
    /// `phi_sum` has length `D = n_features()`.
    fn check_shapes(&self) -> Result<()> {
        let d = self.n_features();
        Error::check_sizes(
            d,
            [
                ("rows of gram", self.gram.nrows()),
                ("columns of gram", self.gram.ncols()),
                ("length of phi_sum", self.phi_sum.len()),
            ],
        )?;
        Ok(())
    }

    /// The refusals of [`Self::accumulate`] that depend on the statistics
    /// and the chunk's width only, made before anything is changed: fields
    /// of disagreeing shapes, a `gram` not in standard layout, or features
    /// of another width.
    pub(crate) fn check_accumulate(&self, width: usize) -> Result<()> {
        self.check_shapes()?;
        if width != self.n_features() {
            return Err(Error::ShapeMismatch {
                name: "number of features (columns of the feature chunk)",
                expected: self.n_features(),
                got: width,
            });
        }
        if !self.gram.is_standard_layout() {
            return Err(Error::invalid(
                "gram",
                "a D x D array in standard (row-major, contiguous) layout",
            ));
        }
        Ok(())
    }

    /// Adds a row chunk: features `phi` (`n × D`, f32 or f64) and targets `y`.
    ///
    /// # Errors
    /// [`Error::ShapeMismatch`] for a chunk of another width or length, or
    /// statistics whose fields disagree in shape; [`Error::NonFinite`] for
    /// non-finite features or targets; [`Error::InvalidParameter`] naming `y` (the target sums)
    /// or `X` (the others) when a sum overflows the float64 range (the
    /// statistics are then not usable).
    pub fn accumulate<T: Real>(
        &mut self,
        phi: ArrayView2<'_, T>,
        y: ArrayView1<'_, f64>,
        par: Parallelism,
    ) -> Result<()> {
        self.check_accumulate(phi.ncols())?;
        check_finite("y", y.iter())?;
        if !all_finite(phi, par) {
            return Err(Error::NonFinite { name: "features" });
        }
        self.add_checked(phi, y, par)
    }

    /// [`Self::accumulate`] without its refusals, for callers that have made
    /// them for a larger chunk this one is part of (the class statistics
    /// scan a chunk once for all its classes): `phi` and `y` finite and
    /// [`Self::check_accumulate`] passed.
    ///
    /// # Errors
    /// [`Error::ShapeMismatch`] for `y` of another length than `phi`.
    pub(crate) fn add_checked<T: Real>(
        &mut self,
        phi: ArrayView2<'_, T>,
        y: ArrayView1<'_, f64>,
        par: Parallelism,
    ) -> Result<()> {
        if y.is_empty() && phi.nrows() == 0 {
            return Ok(());
        }
        if self.n == 0 && !y.is_empty() {
            self.y_shift = y.sum() / y.len() as f64;
        }
        let yc = y.mapv(|v| v - self.y_shift);
        accumulate_gram(
            phi,
            yc.view(),
            self.gram.view_mut(),
            self.phi_y.view_mut(),
            self.phi_sum.view_mut(),
            par,
        )?;
        self.n += y.len() as u64;
        self.y_sum += yc.sum();
        self.y_sq_sum += yc.iter().map(|v| v * v).sum::<f64>();
        self.check_sums()
    }

    /// Adds another set of statistics of the same feature map (exact: the
    /// result equals the statistics of the concatenated rows).
    ///
    /// # Errors
    /// [`Error::ShapeMismatch`] for statistics of another `D`, or either
    /// one's fields disagreeing in shape; nothing is changed then.
    /// [`Error::InvalidParameter`] naming `y` (the target sums)
    /// or `X` (the others) when a sum overflows the float64 range (the
    /// statistics are then not usable).
    pub fn merge(&mut self, other: &FeatureStats) -> Result<()> {
        self.check_merge(other)?;
        self.merge_shifted(other);
        self.check_sums()
    }

    /// The refusals of [`Self::merge`]: either one's fields disagree in
    /// shape, or the two have another `D`.
    pub(crate) fn check_merge(&self, other: &FeatureStats) -> Result<()> {
        self.check_shapes()?;
        other.check_shapes()?;
        if other.n_features() != self.n_features() {
            return Err(Error::ShapeMismatch {
                name: "number of features of the statistics to merge",
                expected: self.n_features(),
                got: other.n_features(),
            });
        }
        Ok(())
    }

    /// The statistics of the features times `s` (`ΦᵀΦ` times `s²`, `Φᵀy`
    /// and `Φᵀ1` times `s`): e.g. a kernel variance `σ²` applied to features
    /// taken at unit kernel variance, `s = σ`.
    pub fn scale_features(&mut self, s: f64) {
        self.gram *= s * s;
        self.phi_y *= s;
        self.phi_sum *= s;
    }

    /// The training-target mean `ȳ`.
    pub fn y_mean(&self) -> f64 {
        if self.n == 0 {
            0.0
        } else {
            self.y_shift + self.y_sum / self.n as f64
        }
    }

    /// The centered statistics `(Φᵀ(y − ȳ), ‖y − ȳ‖²)`, with `ȳ` when
    /// `center`, else with `0` (no centering).
    pub(crate) fn centered(&self, center: bool) -> (Array1<f64>, f64) {
        let mut s = self.clone();
        s.reshift(if center { self.y_mean() } else { 0.0 });
        (s.phi_y, s.y_sq_sum.max(0.0))
    }
}

/// Shifts of [`FeatureStats`]: `Φᵀ(y − s') = b + (s − s') f`; the target
/// sums by [`reshift_sums`] with unit weights.
impl ShiftedSums for FeatureStats {
    fn rows(&self) -> u64 {
        self.n
    }

    fn shift(&self) -> f64 {
        self.y_shift
    }

    fn reshift(&mut self, new_shift: f64) {
        let c = self.y_shift - new_shift;
        reshift_sums(c, self.n as f64, &mut self.y_sum, &mut self.y_sq_sum);
        self.phi_y.scaled_add(c, &self.phi_sum);
        self.y_shift = new_shift;
    }

    fn add_same_shift(&mut self, o: &Self) {
        self.gram += &o.gram;
        self.phi_y += &o.phi_y;
        self.phi_sum += &o.phi_sum;
        self.n += o.n;
        self.y_sum += o.y_sum;
        self.y_sq_sum += o.y_sq_sum;
    }

    fn check_sums(&self) -> Result<()> {
        check_overflow(
            &[self.y_shift, self.y_sum, self.y_sq_sum],
            self.phi_y
                .iter()
                .chain(&self.phi_sum)
                .chain(self.gram.diag()),
        )
    }
}

/// Statistics whose target sums are kept relative to a shift `s` (see the
/// module docs), so that two of them merge exactly: the one merge rule of
/// [`FeatureStats`] and the sparse GP's statistics.
pub(crate) trait ShiftedSums: Clone {
    /// The number of rows added.
    fn rows(&self) -> u64;

    /// The shift `s` the target sums are relative to.
    fn shift(&self) -> f64;

    /// Re-expresses every target sum relative to another shift `s'`.
    fn reshift(&mut self, new_shift: f64);

    /// Adds the sums of `other`, kept relative to the same shift.
    fn add_same_shift(&mut self, other: &Self);

    /// Refuses sums that overflowed the float64 range as rows or other
    /// statistics were added (`O(D)`: the target sums, the vectors and the
    /// Gram diagonal, which bounds the other entries of a Gram matrix).
    /// Statistics that fail it are not usable, and are refused as such
    /// wherever they are used or loaded.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] naming `y` for the target sums, `X` for
    /// the others.
    fn check_sums(&self) -> Result<()>;

    /// Adds the statistics of other rows (exact: the result equals the
    /// statistics of the concatenated rows): `other` is re-expressed
    /// relative to this shift, then added. Shapes are the caller's to check.
    fn merge_shifted(&mut self, other: &Self) {
        if other.rows() == 0 {
            return;
        }
        if self.rows() == 0 {
            *self = other.clone();
            return;
        }
        let mut o = other.clone();
        o.reshift(self.shift());
        self.add_same_shift(&o);
    }
}

/// The refusal of [`ShiftedSums::check_sums`] for statistics whose target
/// sums `y_sums` or other sums `sums` are not all finite.
pub(crate) fn check_overflow<'a>(
    y_sums: &[f64],
    sums: impl IntoIterator<Item = &'a f64>,
) -> Result<()> {
    if !y_sums.iter().all(|v| v.is_finite()) {
        return Err(Error::invalid(
            "y",
            "the sums of the targets or of their squares overflow the float64 range: rescale \
             y (e.g. divide it by its standard deviation)",
        ));
    }
    if !sums.into_iter().all(|v| v.is_finite()) {
        return Err(Error::invalid(
            "X",
            "the sums of the features' products with each other or with the targets overflow \
             the float64 range: scale X, y or the kernel variance down",
        ));
    }
    Ok(())
}

/// The target sums relative to the shift `s' = s − c`, for rows of weights
/// `w` (`weight_sum = Σ w`): `Σ w (y − s') = Σ w (y − s) + c Σ w` and
/// `Σ w (y − s')² = Σ w (y − s)² + 2c Σ w (y − s) + c² Σ w`.
pub(crate) fn reshift_sums(c: f64, weight_sum: f64, sum: &mut f64, sq_sum: &mut f64) {
    *sq_sum += 2.0 * c * *sum + c * c * weight_sum;
    *sum += c * weight_sum;
}

/// The same statistics: `gram` compared on its lower triangle (the part that
/// holds `ΦᵀΦ`), every other field exactly.
impl PartialEq for FeatureStats {
    fn eq(&self, other: &Self) -> bool {
        let lower_eq = self.gram.dim() == other.gram.dim()
            && self
                .gram
                .indexed_iter()
                .all(|((i, j), v)| j > i || *v == other.gram[(i, j)]);
        lower_eq
            && self.phi_y == other.phi_y
            && self.phi_sum == other.phi_sum
            && self.n == other.n
            && self.y_shift == other.y_shift
            && self.y_sum == other.y_sum
            && self.y_sq_sum == other.y_sq_sum
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn random_phi(n: usize, d: usize, seed: u64) -> Array2<f64> {
        use rand::Rng as _;
        let mut rng = crate::rng::seeded(seed);
        Array2::from_shape_fn((n, d), |_| rng.random_range(-1.0..1.0))
    }

    #[test]
    fn gram_is_phi_t_phi_and_independent_of_threads() {
        // Small, odd and large D (faer splits its parallel GEMM over output
        // blocks, not over the rows, so the sums do not depend on threads).
        for (n, d) in [(3, 1), (40, 3), (300, 70), (129, 257)] {
            let phi = random_phi(n, d, d as u64);
            let y: Array1<f64> = (0..n).map(|i| (i as f64).cos()).collect();
            let mut seq = FeatureStats::new(d);
            seq.accumulate(phi.view(), y.view(), Parallelism::Sequential)
                .unwrap();
            let mut par = FeatureStats::new(d);
            crate::threads::install(|| par.accumulate(phi.view(), y.view(), Parallelism::Rayon))
                .unwrap()
                .unwrap();
            assert_eq!(seq.gram, par.gram, "n = {n}, d = {d}");
            let full = seq.gram_symmetric();
            assert_eq!(full, full.t(), "n = {n}, d = {d}");
            let want = phi.t().dot(&phi);
            let scale = want.iter().fold(1.0_f64, |m, v| m.max(v.abs()));
            assert!((&full - &want)
                .iter()
                .all(|v| v.abs() < 1e-13 * scale * n as f64));
        }
    }
}
