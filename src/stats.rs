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
use crate::real::{finite_max_abs, Real};
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
    /// error names `param`, the caller's name for `D` (`n_components`, the
    /// width of a feature map, or `n_features` of statistics made directly).
    pub fn check_size(param: &'static str, n_features: usize, count: usize) -> crate::Result<()> {
        crate::alloc::check_alloc(
            param,
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
    ///
    /// # Panics
    /// When `D²` overflows `usize` (the allocation of the `D × D` Gram);
    /// [`Self::check_size`] checks a `D` from a user against the memory
    /// first.
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
    /// non-finite features or targets; [`Error::InvalidParameter`] naming
    /// `y` (the target sums) or `X` (the others) when a sum would overflow
    /// the float64 range (judged before anything is added, from the largest
    /// `|φ_ij|` and, near the range, the chunk's column sums). Nothing is
    /// changed by a refused chunk.
    pub fn accumulate<T: Real>(
        &mut self,
        phi: ArrayView2<'_, T>,
        y: ArrayView1<'_, f64>,
        par: Parallelism,
    ) -> Result<()> {
        self.check_accumulate(phi.ncols())?;
        check_finite("y", y.iter())?;
        let max_abs = finite_max_abs(phi, par).ok_or(Error::NonFinite { name: "features" })?;
        let chunk = self.check_chunk(phi, y, max_abs)?;
        self.add_chunk(phi, &chunk, par)
    }

    /// The refusals of a chunk (`phi`, `y`) made before anything is added:
    /// `y` of another length than `phi`, and sums that would overflow the
    /// float64 range. Returns the centered targets the chunk is added with
    /// ([`Self::add_chunk`]). `max_abs` is the largest `|φ_ij|` (or any
    /// larger bound), from which [`gram_update_fits`] bounds the new sums
    /// of `ΦᵀΦ`, `Φᵀy` and `Φᵀ1`; near the float range the chunk's column
    /// sums decide.
    ///
    /// # Errors
    /// [`Error::ShapeMismatch`] for `y` of another length than `phi`;
    /// [`Error::InvalidParameter`] naming `y` for target sums, `X` for the
    /// others, that would overflow.
    pub(crate) fn check_chunk<T: Real>(
        &self,
        phi: ArrayView2<'_, T>,
        y: ArrayView1<'_, f64>,
        max_abs: f64,
    ) -> Result<CheckedChunk> {
        if y.len() != phi.nrows() {
            return Err(Error::ShapeMismatch {
                name: "length of y (the number of rows of the features)",
                expected: phi.nrows(),
                got: y.len(),
            });
        }
        rows_after(self.n, phi.nrows() as u64)?;
        let shift = if self.n == 0 && !y.is_empty() {
            y.sum() / y.len() as f64
        } else {
            self.y_shift
        };
        let yc = y.mapv(|v| v - shift);
        let (t, q) = (yc.sum(), yc.iter().map(|v| v * v).sum::<f64>());
        if ![shift, t, q, self.y_sum + t, self.y_sq_sum + q]
            .iter()
            .all(|v| v.is_finite())
        {
            return Err(y_overflow());
        }
        let fits = gram_update_fits(
            GramSums {
                diag: self.gram.diag(),
                with_y: self.phi_y.view(),
                with_ones: self.phi_sum.view(),
            },
            phi.nrows(),
            max_abs,
            yc.iter().fold(0.0f64, |m, v| m.max(v.abs())),
            1.0,
            || {
                let d = phi.ncols();
                let mut sums = ColumnSums::zeros(d);
                for (i, row) in phi.rows().into_iter().enumerate() {
                    for (j, v) in row.iter().enumerate() {
                        sums.add(j, v.to_f64_exact(), yc[i], 1.0);
                    }
                }
                sums
            },
        );
        if !fits {
            return Err(x_overflow());
        }
        Ok(CheckedChunk {
            shift,
            yc,
            y_sum: t,
            y_sq_sum: q,
        })
    }

    /// Adds a chunk that passed [`Self::check_chunk`] with these statistics.
    pub(crate) fn add_chunk<T: Real>(
        &mut self,
        phi: ArrayView2<'_, T>,
        chunk: &CheckedChunk,
        par: Parallelism,
    ) -> Result<()> {
        if phi.nrows() == 0 {
            return Ok(());
        }
        accumulate_gram(
            phi,
            chunk.yc.view(),
            self.gram.view_mut(),
            self.phi_y.view_mut(),
            self.phi_sum.view_mut(),
            par,
        )?;
        self.y_shift = chunk.shift;
        self.n += phi.nrows() as u64;
        self.y_sum += chunk.y_sum;
        self.y_sq_sum += chunk.y_sq_sum;
        // Cannot fail after `check_chunk` (its bounds keep every sum below
        // the float range); a guard against statistics edited in between.
        self.check_sums()
    }

    /// Adds another set of statistics of the same feature map (exact: the
    /// result equals the statistics of the concatenated rows).
    ///
    /// # Errors
    /// [`Error::ShapeMismatch`] for statistics of another `D`, or either
    /// one's fields disagreeing in shape; [`Error::InvalidParameter`] naming
    /// `y` (the target sums) or `X` (the others) when a sum overflows the
    /// float64 range. Nothing is changed then.
    pub fn merge(&mut self, other: &FeatureStats) -> Result<()> {
        self.check_merge(other)?;
        let mut merged = self.clone();
        merged.merge_shifted(other);
        merged.check_sums()?;
        *self = merged;
        Ok(())
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
        rows_after(self.n, other.n).map(|_| ())
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

/// A chunk accepted by [`FeatureStats::check_chunk`]: the shift it is added
/// with, its targets centered by it and their sum and sum of squares.
pub(crate) struct CheckedChunk {
    shift: f64,
    yc: Array1<f64>,
    y_sum: f64,
    y_sq_sum: f64,
}

/// The sums a chunk of columns `c_i` with two extra rows `(e_i, u_i)` adds
/// to: the diagonal of `Σ c cᵀ`, `Σ c e` and `Σ c u` (for the feature
/// statistics `e = y − s` and `u = 1`; the sparse GP's statistics weigh
/// both by `√w`).
pub(crate) struct GramSums<'a> {
    /// The diagonal of the Gram sums.
    pub diag: ArrayView1<'a, f64>,
    /// `Σ c e`.
    pub with_y: ArrayView1<'a, f64>,
    /// `Σ c u`.
    pub with_ones: ArrayView1<'a, f64>,
}

/// A chunk's exact per-column sums `Σ c²`, `Σ c e`, `Σ c u` (see
/// [`GramSums`]), formed only when the a-priori bound of
/// [`gram_update_fits`] does not decide.
pub(crate) struct ColumnSums {
    sq: Vec<f64>,
    with_y: Vec<f64>,
    with_ones: Vec<f64>,
}

impl ColumnSums {
    /// Zero sums for `d` columns.
    pub(crate) fn zeros(d: usize) -> Self {
        Self {
            sq: vec![0.0; d],
            with_y: vec![0.0; d],
            with_ones: vec![0.0; d],
        }
    }

    /// Adds the entry `c` of column `j` in a row with extras `(e, u)`.
    #[inline]
    pub(crate) fn add(&mut self, j: usize, c: f64, e: f64, u: f64) {
        self.sq[j] += c * c;
        self.with_y[j] += c * e;
        self.with_ones[j] += c * u;
    }
}

/// Whether adding a chunk of `n` columns keeps every Gram sum finite, judged
/// before anything is added. With `|c| ≤ max_abs`, `|e| ≤ e_max` and
/// `|u| ≤ u_max`, each diagonal entry grows by at most `n·max_abs²` and
/// every other entry, and every partial sum of it, stays at most the
/// geometric mean of two diagonal ones (Cauchy–Schwarz), so diagonal sums
/// kept below the float range by more than their rounding keep every sum
/// finite; likewise the two vectors. Where that bound does not hold (values
/// near the float range) the chunk's exact column sums (`exact`) decide.
pub(crate) fn gram_update_fits(
    old: GramSums<'_>,
    n: usize,
    max_abs: f64,
    e_max: f64,
    u_max: f64,
    exact: impl FnOnce() -> ColumnSums,
) -> bool {
    // Below MAX by more than the relative rounding of any sum of up to
    // 2^30 terms.
    const LIMIT: f64 = f64::MAX * (1.0 - 1.0 / (1u64 << 20) as f64);
    let amax = |a: &ArrayView1<'_, f64>| a.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let within = |old: f64, add: f64| add.is_finite() && old.abs() + add <= LIMIT;
    let n = n as f64;
    if within(amax(&old.diag), n * max_abs * max_abs)
        && within(amax(&old.with_y), n * max_abs * e_max)
        && within(amax(&old.with_ones), n * max_abs * u_max)
    {
        return true;
    }
    let add = exact();
    (0..old.diag.len()).all(|j| {
        within(old.diag[j], add.sq[j])
            && within(0.0, (old.with_y[j] + add.with_y[j]).abs())
            && within(0.0, (old.with_ones[j] + add.with_ones[j]).abs())
    })
}

/// The row count after adding `more` rows to `n`, refused where it would
/// wrap around `u64` (statistics edited or loaded with such a count).
pub(crate) fn rows_after(n: u64, more: u64) -> Result<u64> {
    n.checked_add(more).ok_or_else(|| {
        Error::invalid(
            "X",
            format!("{n} + {more} rows overflow the row count of the statistics (u64)"),
        )
    })
}

/// The refusal of target sums beyond the float64 range.
fn y_overflow() -> Error {
    Error::invalid(
        "y",
        "the sums of the targets or of their squares overflow the float64 range: rescale y \
         (e.g. divide it by its standard deviation)",
    )
}

/// The refusal of feature sums beyond the float64 range.
pub(crate) fn x_overflow() -> Error {
    Error::invalid(
        "X",
        "the sums of the features' products with each other or with the targets overflow the \
         float64 range: scale X, y or the kernel variance down",
    )
}

/// The refusal of [`ShiftedSums::check_sums`] for statistics whose target
/// sums `y_sums` or other sums `sums` are not all finite.
pub(crate) fn check_overflow<'a>(
    y_sums: &[f64],
    sums: impl IntoIterator<Item = &'a f64>,
) -> Result<()> {
    if !y_sums.iter().all(|v| v.is_finite()) {
        return Err(y_overflow());
    }
    if !sums.into_iter().all(|v| v.is_finite()) {
        return Err(x_overflow());
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

    /// Every field, bit for bit.
    fn same(a: &FeatureStats, b: &FeatureStats) -> bool {
        let bits = |s: &FeatureStats| -> Vec<u64> {
            s.gram
                .iter()
                .chain(&s.phi_y)
                .chain(&s.phi_sum)
                .chain(&[s.y_shift, s.y_sum, s.y_sq_sum])
                .map(|v| v.to_bits())
                .collect()
        };
        a.n == b.n && bits(a) == bits(b)
    }

    #[test]
    fn a_chunk_whose_sums_would_overflow_is_refused_and_changes_nothing() {
        let par = Parallelism::Rayon;
        let (phi, y) = (random_phi(20, 3, 1), Array1::linspace(-1.0, 1.0, 20));
        let (more, y_more) = (random_phi(10, 3, 2), Array1::linspace(0.0, 2.0, 10));
        let mut stats = FeatureStats::new(3);
        stats.accumulate(phi.view(), y.view(), par).unwrap();
        let before = stats.clone();
        let huge = Array2::from_elem((2, 3), 1e200);
        let e = stats.accumulate(huge.view(), y_more.slice(ndarray::s![..2]), par);
        assert!(e.unwrap_err().to_string().contains("`X`"));
        let big_y = Array1::from_elem(10, 1e200);
        let e = stats.accumulate(more.view(), big_y.view(), par);
        assert!(e.unwrap_err().to_string().contains("`y`"));
        assert!(same(&stats, &before));
        // Later chunks add as if the refused ones had not been offered.
        stats.accumulate(more.view(), y_more.view(), par).unwrap();
        let mut want = before.clone();
        want.accumulate(more.view(), y_more.view(), par).unwrap();
        assert!(same(&stats, &want));
        // Merged statistics whose sums overflow: refused, nothing changed.
        let mut big = FeatureStats::new(3);
        let row = Array2::from_elem((1, 3), 8e153);
        big.accumulate(row.view(), y_more.slice(ndarray::s![..1]), par)
            .unwrap();
        let mut twice = big.clone();
        twice.merge(&big).unwrap();
        let before = twice.clone();
        assert!(twice.merge(&big).unwrap_err().to_string().contains("`X`"));
        assert!(same(&twice, &before));
    }

    #[test]
    fn row_counts_that_would_wrap_are_refused() {
        let par = Parallelism::Rayon;
        let mut a = FeatureStats::new(1);
        a.n = u64::MAX;
        let mut b = FeatureStats::new(1);
        b.n = 1;
        let before = a.clone();
        let e = a.merge(&b).unwrap_err();
        assert!(e.to_string().contains("row count"), "{e}");
        assert!(same(&a, &before));
        let e = a
            .accumulate(
                ndarray::array![[1.0]].view(),
                ndarray::array![0.5].view(),
                par,
            )
            .unwrap_err();
        assert!(e.to_string().contains("row count"), "{e}");
        assert!(same(&a, &before));
    }

    #[test]
    fn chunks_near_the_float_range_are_judged_by_their_column_sums() {
        // Two rows of 1.2e154 in separate columns: the bound n max² (2.9e308)
        // passes the float range, the column sums (1.44e308) do not, so the
        // chunk is added, with a finite Gram matrix.
        let v = 1.2e154;
        let phi = ndarray::array![[v, 0.0], [0.0, v]];
        let mut stats = FeatureStats::new(2);
        stats
            .accumulate(
                phi.view(),
                ndarray::array![0.0, 0.0].view(),
                Parallelism::Rayon,
            )
            .unwrap();
        assert_eq!(stats.gram[(0, 0)], v * v);
        assert_eq!(stats.gram[(1, 0)], 0.0);
        // A third such row in the first column passes the range there: refused.
        let before = stats.clone();
        let e = stats.accumulate(
            ndarray::array![[v, 0.0]].view(),
            ndarray::array![0.0].view(),
            Parallelism::Rayon,
        );
        assert!(e.unwrap_err().to_string().contains("`X`"));
        assert!(same(&stats, &before));
    }
}
