//! The fitted Maclaurin feature map (`docs/math/maclaurin.rst`, "The truncated
//! random map", "Kar & Karnick's random Maclaurin features" and "Assembly"):
//! `Φ(x) = σ g(x) · [√a_0 | √a_1 x̃ (h01) | √a_{n_0} φ_{n_0}(x̃) | … | √a_p φ_p(x̃) | (0)]`.

use ndarray::{s, Array2, ArrayView2, ArrayViewMut2, Axis, Zip};
use rand::seq::index::sample;
use std::sync::atomic::{AtomicBool, Ordering};

use super::allocate::{Problem, VarianceModel};
use super::coefficients::{ln_factorial, MaclaurinKernel};
use super::random;
use super::stats::{pair_statistics, StatsSpec};
use crate::error::{Error, Result};
use crate::progress::Monitor;
use crate::real::{all_finite, Real};
use crate::rng::substream;
use crate::sketch::variance::WeightLaw;
use crate::sketch::{padded_dim, PolySketch, SketchKind};
use crate::threads::Parallelism;

/// Random stream of the subsample (`docs/math/maclaurin.rst`, "Inputs and
/// preprocessing").
const STREAM_SUBSAMPLE: u64 = 0;
/// Random stream of the Kar & Karnick degrees (`docs/math/maclaurin.rst`, "Kar
/// & Karnick's random Maclaurin features").
const STREAM_DEGREES: u64 = 1;
/// The sketch of degree `n` uses stream `STREAM_SKETCH + n`, so the weights of
/// a degree depend only on the seed, the degree and its feature count.
const STREAM_SKETCH: u64 = 16;

/// How the features are spread over the degrees.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum AllocationStrategy {
    /// The incremental algorithm with the search over `p`
    /// (`docs/math/maclaurin.rst`, "Optimized allocation").
    Optimized,
    /// Kar & Karnick: degrees drawn from `P(n) ∝ 2^{−(n+1)}`
    /// (`docs/math/maclaurin.rst`, "Kar & Karnick's random Maclaurin
    /// features").
    Random,
    /// Sketch features per degree, index = degree (`docs/math/maclaurin.rst`,
    /// "Assembly"). Entry 0 must equal the constant column count (1 if
    /// `a_0 > 0`, else 0) and, in h01 mode, entry 1 the input dimension `d`;
    /// the total width must be `n_components`.
    Explicit(Vec<usize>),
}

/// The settings of a Maclaurin feature map (`docs/math/maclaurin.rst`, "Inputs
/// and preprocessing").
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct MaclaurinConfig {
    /// Output width `D` (real columns).
    pub n_components: usize,
    /// The kernel's Maclaurin series.
    pub kernel: MaclaurinKernel,
    /// Length scale `l > 0`.
    pub length_scale: f64,
    /// Kernel variance `σ² > 0`.
    pub kernel_variance: f64,
    /// The polynomial sketch of every degree.
    pub sketch: SketchKind,
    /// Complex weights (`[Re | Im]` blocks, `docs/math/conventions.rst`,
    /// "Complex features and their real representation").
    pub complex: bool,
    /// How the features are spread over the degrees.
    pub allocation: AllocationStrategy,
    /// Smallest truncation degree searched, `p_min >= 1`.
    pub min_degree: u32,
    /// Largest truncation degree (searched, or the Kar & Karnick support).
    pub max_degree: u32,
    /// Subsample size `n_s >= 2` of the pair statistics.
    pub n_subsample: usize,
    /// Exact linear part instead of a degree-1 sketch.
    pub h01: bool,
}

impl MaclaurinConfig {
    /// Default settings (`docs/math/maclaurin.rst`, "Inputs and preprocessing")
    /// for a kernel and a width: TensorSRHT, real weights, optimized
    /// allocation, `p ∈ [2, 10]`, `n_s = 2000`, no h01, `l = σ² = 1`.
    pub fn new(kernel: MaclaurinKernel, n_components: usize) -> Self {
        Self {
            n_components,
            kernel,
            length_scale: 1.0,
            kernel_variance: 1.0,
            sketch: SketchKind::TensorSrht,
            complex: false,
            allocation: AllocationStrategy::Optimized,
            min_degree: 2,
            max_degree: 10,
            n_subsample: 2000,
            h01: false,
        }
    }

    fn validate(&self) -> Result<()> {
        self.kernel.validate()?;
        if self.n_components == 0 {
            return Err(Error::invalid("n_components", "must be >= 1, got 0"));
        }
        for (name, v) in [
            ("length_scale", self.length_scale),
            ("kernel_variance", self.kernel_variance),
        ] {
            if !(v.is_finite() && v > 0.0) {
                return Err(Error::invalid(
                    name,
                    format!("must be a finite number > 0, got {v:?}"),
                ));
            }
        }
        for (name, v) in [
            ("min_degree", self.min_degree),
            ("max_degree", self.max_degree),
        ] {
            if v == 0 {
                return Err(Error::invalid(name, "must be >= 1, got 0"));
            }
        }
        if self.max_degree > crate::sketch::MAX_DEGREE {
            return Err(Error::invalid(
                "max_degree",
                format!(
                    "must be <= {}, got {}: a feature of degree n is a product of n \
                     projections, so higher degrees overflow the float range, and the \
                     Maclaurin coefficients of the kernel beyond it are negligible; lower \
                     max_degree",
                    crate::sketch::MAX_DEGREE,
                    self.max_degree
                ),
            ));
        }
        if self.min_degree > self.max_degree {
            return Err(Error::invalid(
                "min_degree",
                format!(
                    "must be <= max_degree ({}), got {}",
                    self.max_degree, self.min_degree
                ),
            ));
        }
        if self.n_subsample < 2 {
            return Err(Error::invalid(
                "n_subsample",
                format!("must be >= 2, got {}", self.n_subsample),
            ));
        }
        if self.complex && self.sketch == SketchKind::TensorSketch {
            return Err(Error::invalid(
                "complex_weights",
                "TensorSketch has no complex variant; use complex_weights=False",
            ));
        }
        if self.sketch == SketchKind::TensorSketch
            && self.allocation == AllocationStrategy::Optimized
        {
            return Err(Error::invalid(
                "sketch",
                "the optimized allocation models Gaussian, Rademacher and TensorSRHT sketches \
                 only; use one of them or allocation=\"random\"",
            ));
        }
        if self.h01
            && let MaclaurinKernel::Polynomial { degree, bias } = self.kernel
            && (bias <= 0.0 || degree < 2)
        {
            return Err(Error::invalid(
                "h01",
                "the exact linear part needs a polynomial kernel with bias > 0 and \
                         degree >= 2",
            ));
        }
        Ok(())
    }

    /// The largest degree that may carry features: `max_degree`, clipped to
    /// `q` for the polynomial kernel.
    fn degree_cap(&self) -> u32 {
        self.kernel
            .max_degree()
            .map_or(self.max_degree, |q| q.min(self.max_degree))
    }
}

/// One sketched degree block of the map.
#[derive(Clone, Debug)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
struct Block {
    /// `√a_n` (optimized / explicit) or the Kar & Karnick scale
    /// (`docs/math/maclaurin.rst`, "Kar & Karnick's random Maclaurin
    /// features").
    scale: f64,
    sketch: PolySketch,
}

/// Fitted Maclaurin feature map (`docs/math/maclaurin.rst`, "The truncated
/// random map", "Kar & Karnick's random Maclaurin features" and "Assembly").
///
/// Column layout: `[constant | h01 linear (d) | degree blocks ascending |
/// (zero column)]`; complex blocks are `[Re φ_n | Im φ_n]`. For `d = 1` with
/// the optimized allocation the map is the explicit map of
/// `docs/math/maclaurin.rst`, "The truncated random map" with `p = D − 1` and
/// nothing random.
///
/// Stored (feature `serde`) as its fields, checked on loading (the settings,
/// and that the allocation, coefficients, center and sketches agree with
/// each other as the transforms assume), so that a stored map that
/// contradicts itself is refused instead of transforming wrongly.
#[derive(Clone, Debug)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize, serde::Deserialize),
    serde(try_from = "MaclaurinParts")
)]
pub struct MaclaurinMap {
    config: MaclaurinConfig,
    dim: usize,
    seed: u64,
    center: Option<Vec<f64>>,
    coefs: Vec<f64>,
    degree: u32,
    counts: Vec<usize>,
    explicit_1d: bool,
    blocks: Vec<Block>,
    objective: Option<f64>,
    n_pairs: u64,
    dropped_pairs: u64,
}

/// The stored form of [`MaclaurinMap`] (its fields), checked on loading by
/// [`MaclaurinMap::validate`].
#[cfg(feature = "serde")]
#[derive(serde::Deserialize)]
struct MaclaurinParts {
    config: MaclaurinConfig,
    dim: usize,
    seed: u64,
    center: Option<Vec<f64>>,
    coefs: Vec<f64>,
    degree: u32,
    counts: Vec<usize>,
    explicit_1d: bool,
    blocks: Vec<Block>,
    objective: Option<f64>,
    n_pairs: u64,
    dropped_pairs: u64,
}

#[cfg(feature = "serde")]
impl TryFrom<MaclaurinParts> for MaclaurinMap {
    type Error = Error;

    fn try_from(p: MaclaurinParts) -> Result<Self> {
        let map = MaclaurinMap {
            config: p.config,
            dim: p.dim,
            seed: p.seed,
            center: p.center,
            coefs: p.coefs,
            degree: p.degree,
            counts: p.counts,
            explicit_1d: p.explicit_1d,
            blocks: p.blocks,
            objective: p.objective,
            n_pairs: p.n_pairs,
            dropped_pairs: p.dropped_pairs,
        };
        map.validate()?;
        Ok(map)
    }
}

/// Output columns of the fixed (non-sketch) part: the constant and h01.
fn fixed_columns(constant: bool, h01: bool, dim: usize) -> usize {
    usize::from(constant) + if h01 { dim } else { 0 }
}

impl MaclaurinMap {
    /// Fits the map on `x` (`N × d`): the center (Gaussian kernel: the
    /// column mean), the allocation (`docs/math/maclaurin.rst`, "Optimized
    /// allocation", "Kar & Karnick's random Maclaurin features" or the explicit
    /// map) and the random sketches, all drawn from `seed`. The sketch of
    /// degree `n` depends only on `seed`, `n` and its feature count, never on
    /// the data otherwise.
    ///
    /// The optimized allocation reports its stages ("blocks of pair
    /// statistics", "candidate degrees") and a summary message to
    /// `monitor`, and checks it before every block of 128 × 128 pairs (see
    /// [`pair_statistics`]) and every candidate truncation degree.
    pub fn fit<T: Real>(
        x: ArrayView2<T>,
        config: &MaclaurinConfig,
        seed: u64,
        par: Parallelism,
        monitor: &Monitor,
    ) -> Result<Self> {
        config.validate()?;
        let (n, dim) = x.dim();
        if n == 0 || dim == 0 {
            return Err(Error::invalid(
                "X",
                format!("needs at least one row and one column, got shape ({n}, {dim})"),
            ));
        }
        if x.iter().any(|v| !v.is_finite()) {
            return Err(Error::NonFinite { name: "X" });
        }
        Self::check_size(config, dim)?;
        let center = config.kernel.is_gaussian().then(|| {
            let mut sum = vec![0.0; dim];
            for row in x.rows() {
                for (s, v) in sum.iter_mut().zip(row) {
                    *s += v.to_f64_exact();
                }
            }
            sum.iter().map(|s| s / n as f64).collect::<Vec<f64>>()
        });
        if dim == 1 && config.allocation == AllocationStrategy::Optimized {
            return Ok(Self::explicit_1d(config, center, seed));
        }
        let cap = config.degree_cap();
        let coefs = config.kernel.coefficients(cap);
        let budget = Self::budget(config, &coefs, dim)?;
        let (counts, objective, n_pairs, dropped) = match &config.allocation {
            AllocationStrategy::Explicit(c) => (c.clone(), None, 0, 0),
            AllocationStrategy::Random => {
                let probs = random::degree_probabilities(&coefs, config.h01, 2.0)?;
                let mut rng = substream(seed, STREAM_DEGREES);
                let counts = random::draw_counts(&probs, budget, &mut rng)?;
                (
                    Self::with_fixed(counts, &coefs, config.h01, dim),
                    None,
                    0,
                    0,
                )
            }
            AllocationStrategy::Optimized => {
                if n < 2 {
                    return Err(Error::invalid(
                        "X",
                        format!(
                            "the optimized allocation needs at least 2 rows, got n_samples = {n}"
                        ),
                    ));
                }
                let n_s = n.min(config.n_subsample);
                let mut rng = substream(seed, STREAM_SUBSAMPLE);
                let mut rows = sample(&mut rng, n, n_s).into_vec();
                rows.sort_unstable();
                let mut z = Array2::<f64>::zeros((n_s, dim));
                for (mut zr, &r) in z.axis_iter_mut(Axis(0)).zip(&rows) {
                    for (a, (o, v)) in zr.iter_mut().zip(x.row(r)).enumerate() {
                        let c = center.as_ref().map_or(0.0, |c| c[a]);
                        *o = (v.to_f64_exact() - c) / config.length_scale;
                    }
                }
                if z.iter().any(|v| !v.is_finite()) {
                    return Err(Error::invalid(
                        "length_scale",
                        format!(
                            "X / length_scale overflows float64 at length_scale = {:e}: \
                             choose a larger length scale or rescale X",
                            config.length_scale
                        ),
                    ));
                }
                let srht = config.sketch == SketchKind::TensorSrht;
                let d_pad = padded_dim(dim)?;
                let spec = StatsSpec {
                    kernel: config.kernel,
                    p_max: cap,
                    law: WeightLaw::of(config.sketch, config.complex),
                    srht_d_pad: srht.then_some(d_pad),
                };
                let stats = pair_statistics(z.view(), spec, par, monitor)?;
                let model = if srht {
                    VarianceModel::TensorSrht { d_pad }
                } else {
                    VarianceModel::Unstructured
                };
                let alloc = Problem {
                    stats: &stats,
                    coefs: &coefs,
                    p_min: config.min_degree,
                    p_max: cap,
                    h01: config.h01,
                    budget,
                    model,
                }
                .solve(monitor)?;
                let sigma4 = config.kernel_variance * config.kernel_variance;
                let degree = alloc.best.degree;
                let counts = Self::with_fixed(alloc.best.counts, &coefs, config.h01, dim);
                monitor.message(format!(
                    "allocation {counts:?} (degree {degree}) from {} pairs of {n_s} rows",
                    stats.n_pairs
                ));
                (
                    counts,
                    Some(alloc.best.objective * sigma4),
                    stats.n_pairs,
                    stats.max_dropped,
                )
            }
        };
        let mut map = Self::from_allocation(config, dim, counts, center, seed)?;
        map.objective = objective;
        map.n_pairs = n_pairs;
        map.dropped_pairs = dropped;
        Ok(map)
    }

    /// Checks `config` and the map's size for `dim` inputs without fitting
    /// (the errors of [`Self::fit`] that do not depend on the data's values).
    pub fn check_config(config: &MaclaurinConfig, dim: usize) -> Result<()> {
        config.validate()?;
        Self::check_size(config, dim)
    }

    /// Refuses an `n_components` whose map cannot be held: at least one
    /// weight per input dimension and output column (float64), and, for the
    /// explicit `d = 1` map, one degree per column (a `u32`).
    fn check_size(config: &MaclaurinConfig, dim: usize) -> Result<()> {
        let d = config.n_components;
        crate::alloc::check_alloc(
            "n_components",
            &format!("the Maclaurin features' weights (at least {dim} x {d} float64)"),
            &[dim, d],
            8,
        )?;
        if dim == 1 && u32::try_from(d).is_err() {
            return Err(Error::invalid(
                "n_components",
                format!("the explicit map of one input has one degree per column, so at most {} columns; got {d}", u32::MAX),
            ));
        }
        Ok(())
    }

    /// The explicit `d = 1` map (`docs/math/maclaurin.rst`, "The truncated
    /// random map" and "Assembly"): one column for each of
    /// [`explicit_degrees`], nothing random.
    fn explicit_1d(config: &MaclaurinConfig, center: Option<Vec<f64>>, seed: u64) -> Self {
        let counts = explicit_counts(config);
        let p = (counts.len() - 1) as u32;
        let map = Self {
            config: config.clone(),
            dim: 1,
            seed,
            center,
            counts,
            coefs: config.kernel.coefficients(p),
            degree: p,
            explicit_1d: true,
            blocks: Vec::new(),
            objective: None,
            n_pairs: 0,
            dropped_pairs: 0,
        };
        // What loading checks holds for every map built here.
        debug_assert_eq!(map.validate(), Ok(()));
        map
    }

    /// Rebuilds a map returned by [`Self::fit`] from its settings, input
    /// dimension, [`Self::allocation`], [`Self::center`] and [`Self::seed`]:
    /// the same columns bit for bit (the objective and the dropped-pair
    /// counts are not kept).
    pub fn rebuild(
        config: &MaclaurinConfig,
        dim: usize,
        counts: Vec<usize>,
        center: Option<Vec<f64>>,
        seed: u64,
    ) -> Result<Self> {
        config.validate()?;
        Self::check_size(config, dim)?;
        if dim == 1 && config.allocation == AllocationStrategy::Optimized {
            if counts != explicit_counts(config) {
                return Err(Error::invalid("allocation", EXPLICIT_COUNTS));
            }
            return Ok(Self::explicit_1d(config, center, seed));
        }
        Self::from_allocation(config, dim, counts, center, seed)
    }

    /// Sketch features available after the constant and h01 columns
    /// (`docs/math/maclaurin.rst`, "Incremental algorithm"): real columns, or
    /// complex features (`⌊D'/2⌋`) for complex sketches.
    fn budget(config: &MaclaurinConfig, coefs: &[f64], dim: usize) -> Result<usize> {
        let constant = coefs[0] != 0.0;
        let fixed = fixed_columns(constant, config.h01, dim);
        let left = config.n_components.checked_sub(fixed).ok_or_else(|| {
            Error::invalid(
                "n_components",
                format!(
                    "too small: the constant{} column(s) alone need {fixed}, got {}",
                    if config.h01 { " and h01 linear" } else { "" },
                    config.n_components
                ),
            )
        })?;
        let budget = if config.complex { left / 2 } else { left };
        if budget == 0 && !constant {
            return Err(Error::invalid(
                "n_components",
                format!(
                    "too small: the kernel has no constant term, so at least {} columns are \
                     needed for one sketch feature, got {}",
                    fixed + if config.complex { 2 } else { 1 },
                    config.n_components
                ),
            ));
        }
        Ok(budget)
    }

    /// Sets entry 0 (constant) and, in h01 mode, entry 1 (`d` linear columns).
    fn with_fixed(mut counts: Vec<usize>, coefs: &[f64], h01: bool, dim: usize) -> Vec<usize> {
        let need = if h01 { 2 } else { 1 };
        if counts.len() < need {
            counts.resize(need, 0);
        }
        counts[0] = usize::from(coefs[0] != 0.0);
        if h01 {
            counts[1] = dim;
        }
        while counts.len() > need && counts.last() == Some(&0) {
            counts.pop();
        }
        counts
    }

    /// Builds the map from a given allocation (index = degree; entry 0 the
    /// constant column count, entry 1 `d` in h01 mode): the sketch of
    /// degree `n` is drawn from stream `n` of `seed`, so rebuilding with the
    /// fitted allocation, center and seed reproduces a fitted map exactly.
    /// For [`AllocationStrategy::Random`] the Kar & Karnick scales are used.
    pub fn from_allocation(
        config: &MaclaurinConfig,
        dim: usize,
        counts: Vec<usize>,
        center: Option<Vec<f64>>,
        seed: u64,
    ) -> Result<Self> {
        config.validate()?;
        if dim == 0 {
            return Err(Error::invalid("X", "needs at least one column"));
        }
        Self::check_size(config, dim)?;
        let degree = counts.len().saturating_sub(1) as u32;
        let cap = config.degree_cap();
        let coefs = config.kernel.coefficients(degree.max(cap).max(1));
        let constant = coefs[0] != 0.0;
        if counts.is_empty() || counts[0] != usize::from(constant) {
            return Err(Error::invalid(
                "allocation",
                format!(
                    "entry 0 counts the constant column and must be {} for this kernel",
                    usize::from(constant)
                ),
            ));
        }
        if config.h01 && counts.get(1) != Some(&dim) {
            return Err(Error::invalid(
                "allocation",
                format!("entry 1 counts the h01 linear columns and must be d = {dim}"),
            ));
        }
        if let Some(c) = &center
            && c.len() != dim
        {
            return Err(Error::ShapeMismatch {
                name: "length of center",
                expected: dim,
                got: c.len(),
            });
        }
        let first = if config.h01 { 2 } else { 1 };
        let mut sketched = 0u128;
        for (n, &c) in counts.iter().enumerate().skip(first) {
            if c > 0 && coefs[n] == 0.0 {
                return Err(Error::invalid(
                    "allocation",
                    format!(
                        "degree {n} has a zero Maclaurin coefficient and cannot carry features"
                    ),
                ));
            }
            sketched += c as u128;
        }
        // In u128: the column counts of an allocation need not fit a usize.
        let fixed = fixed_columns(constant, config.h01, dim) as u128;
        let width = fixed
            + if config.complex {
                2 * sketched
            } else {
                sketched
            };
        let n_components = config.n_components as u128;
        let zero_col = config.complex && width + 1 == n_components;
        if width + u128::from(zero_col) != n_components {
            return Err(Error::invalid(
                "allocation",
                format!("the allocation gives {width} columns but n_components is {n_components}"),
            ));
        }
        // At most n_components after the check.
        let sketched = sketched as usize;
        let probs = (config.allocation == AllocationStrategy::Random)
            .then(|| random::degree_probabilities(&coefs[..=cap as usize], config.h01, 2.0))
            .transpose()?;
        let mut blocks = Vec::new();
        for (n, &c) in counts.iter().enumerate().skip(first) {
            if c == 0 {
                continue;
            }
            let mut rng = substream(seed, STREAM_SKETCH + n as u64);
            let sketch =
                PolySketch::draw(config.sketch, config.complex, n as u32, dim, c, &mut rng)?;
            let scale = match &probs {
                Some(p) if p.get(n).is_some_and(|&q| q > 0.0) => {
                    random::block_scale(coefs[n], p[n], c, sketched)
                }
                Some(_) => {
                    return Err(Error::invalid(
                        "allocation",
                        format!("degree {n} is outside the random Maclaurin support"),
                    ))
                }
                None => coefs[n].sqrt(),
            };
            blocks.push(Block { scale, sketch });
        }
        let map = Self {
            config: config.clone(),
            dim,
            seed,
            center,
            coefs,
            degree,
            counts,
            explicit_1d: false,
            blocks,
            objective: None,
            n_pairs: 0,
            dropped_pairs: 0,
        };
        // What loading checks holds for every map built here.
        debug_assert_eq!(map.validate(), Ok(()));
        Ok(map)
    }

    /// Checks that the fields agree with each other as the transforms (CPU
    /// and GPU) assume, in `O(p + blocks)` (the fields are private, so this
    /// runs where a map is loaded; the sketches check their own parameters):
    /// the settings ([`MaclaurinConfig`]); `dim >= 1`; a center of `dim`
    /// finite entries; coefficients finite and `>= 0`. The explicit `d = 1`
    /// map: `dim = 1`, one count of 1 per column, degree `D − 1`, no
    /// blocks. Otherwise: the degree is that of the last count, there is a
    /// coefficient per count (and `a_1` with h01), entry 0 counts the
    /// constant column (1 exactly when `a_0 > 0`), entry 1 the `d` h01
    /// columns; one block per nonzero sketched count in ascending degree,
    /// of that degree, that many features, `dim` inputs, the configured
    /// sketch kind and weights, a positive finite scale and a positive
    /// coefficient; the columns add up to `n_components` (plus one zero
    /// column for complex sketches).
    ///
    /// # Errors
    /// The errors of the settings ([`Self::check_config`]);
    /// [`Error::ShapeMismatch`] or [`Error::InvalidParameter`] naming the
    /// field (`dim`, `center`, `coefs`, `degree`, `counts`, `blocks`) that
    /// disagrees.
    fn validate(&self) -> Result<()> {
        self.config.validate()?;
        let dim = self.dim;
        if dim == 0 {
            return Err(Error::invalid("dim", "must be >= 1, got 0"));
        }
        if let Some(c) = &self.center {
            if c.len() != dim {
                return Err(Error::ShapeMismatch {
                    name: "length of center (dim)",
                    expected: dim,
                    got: c.len(),
                });
            }
            if !c.iter().all(|v| v.is_finite()) {
                return Err(Error::invalid("center", "must be finite"));
            }
        }
        if !self.coefs.iter().all(|&a| a.is_finite() && a >= 0.0) {
            return Err(Error::invalid("coefs", "must be finite and >= 0"));
        }
        let width = self.config.n_components;
        let degree = self.degree as usize;
        if self.explicit_1d {
            if dim != 1 {
                return Err(Error::ShapeMismatch {
                    name: "dim (the explicit map has one input)",
                    expected: 1,
                    got: dim,
                });
            }
            let counts = explicit_counts(&self.config);
            if self.counts != counts {
                return Err(Error::invalid("counts", EXPLICIT_COUNTS));
            }
            if degree + 1 != counts.len() {
                return Err(Error::ShapeMismatch {
                    name: "degree (the explicit map's last degree)",
                    expected: counts.len() - 1,
                    got: degree,
                });
            }
            if self.coefs.len() != counts.len() {
                return Err(Error::ShapeMismatch {
                    name: "length of coefs (one per degree)",
                    expected: counts.len(),
                    got: self.coefs.len(),
                });
            }
            if !self.blocks.is_empty() {
                return Err(Error::invalid("blocks", "the explicit d = 1 map has none"));
            }
            return Ok(());
        }
        if self.counts.is_empty() || degree != self.counts.len() - 1 {
            return Err(Error::ShapeMismatch {
                name: "length of counts (degree + 1)",
                expected: degree + 1,
                got: self.counts.len(),
            });
        }
        let h01 = self.config.h01;
        // a_0 for the constant column, a_1 for h01 and a_n for every count.
        let need = self.counts.len().max(2);
        if self.coefs.len() < need {
            return Err(Error::ShapeMismatch {
                name: "length of coefs (at least one per count)",
                expected: need,
                got: self.coefs.len(),
            });
        }
        let constant = self.coefs[0] != 0.0;
        if self.counts[0] != usize::from(constant) {
            return Err(Error::invalid(
                "counts",
                format!(
                    "entry 0 counts the constant column and must be {} for these coefs",
                    usize::from(constant)
                ),
            ));
        }
        if h01 && self.counts.get(1) != Some(&dim) {
            return Err(Error::invalid(
                "counts",
                format!("entry 1 counts the h01 linear columns and must be dim = {dim}"),
            ));
        }
        let first = if h01 { 2 } else { 1 };
        let mut blocks = self.blocks.iter();
        let (mut sketched, mut n_blocks) = (0u128, 0);
        for (n, &c) in self.counts.iter().enumerate().skip(first) {
            if c == 0 {
                continue;
            }
            let Some(b) = blocks.next() else {
                return Err(Error::invalid(
                    "blocks",
                    format!("degree {n} counts {c} features but has no block"),
                ));
            };
            let sk = &b.sketch;
            if sk.degree() as usize != n
                || sk.n_features() != c
                || sk.dim() != dim
                || sk.is_complex() != self.config.complex
                || sk.kind() != self.config.sketch
            {
                return Err(Error::invalid(
                    "blocks",
                    format!(
                        "the block of degree {n} is a {} sketch of degree {} with {} features of \
                         {} inputs (complex: {}), not the {} sketch of {c} features of {dim} \
                         inputs (complex: {}) of the counts and settings",
                        sk.kind().name(),
                        sk.degree(),
                        sk.n_features(),
                        sk.dim(),
                        sk.is_complex(),
                        self.config.sketch.name(),
                        self.config.complex
                    ),
                ));
            }
            if !(b.scale.is_finite() && b.scale > 0.0) || self.coefs[n] == 0.0 {
                return Err(Error::invalid(
                    "blocks",
                    format!(
                        "the block of degree {n} needs a finite scale > 0 and a coefficient > 0"
                    ),
                ));
            }
            sketched += c as u128;
            n_blocks += 1;
        }
        if self.blocks.len() != n_blocks {
            return Err(Error::ShapeMismatch {
                name: "number of blocks (the nonzero sketched counts)",
                expected: n_blocks,
                got: self.blocks.len(),
            });
        }
        // In u128, as `from_allocation` adds them.
        let fixed = fixed_columns(constant, h01, dim) as u128;
        let columns = fixed
            + if self.config.complex {
                2 * sketched
            } else {
                sketched
            };
        let n_components = width as u128;
        let zero_col = self.config.complex && columns + 1 == n_components;
        if columns + u128::from(zero_col) != n_components {
            return Err(Error::invalid(
                "counts",
                format!("the counts give {columns} columns but n_components is {n_components}"),
            ));
        }
        Ok(())
    }

    /// The same map (allocation, sketches, center) at another length scale
    /// and kernel variance: `x̃ = (x − c)/l` and the factor `σ` change,
    /// nothing random is redrawn. Equal, bit for bit, to [`Self::rebuild`]
    /// with these two settings changed.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] unless both are finite and `> 0`.
    pub fn with_kernel_parameters(&self, length_scale: f64, kernel_variance: f64) -> Result<Self> {
        let mut map = self.clone();
        map.config.length_scale = length_scale;
        map.config.kernel_variance = kernel_variance;
        map.config.validate()?;
        Ok(map)
    }

    /// The polynomial degree of every output column in `x̃`: 0 for the
    /// constant and the zero column, 1 for the h01 linear columns, `n` for
    /// the columns of the degree-`n` block (both halves of a complex one),
    /// `k` for column `k` of the explicit `d = 1` map. Every column is
    /// `σ g(x̃)` times a homogeneous polynomial of that degree in `x̃`.
    pub fn column_degrees(&self) -> Vec<u32> {
        let width = self.width();
        if self.explicit_1d {
            let mut deg = explicit_degrees(&self.config);
            deg.resize(width, 0);
            return deg;
        }
        let mut deg = Vec::with_capacity(width);
        if self.counts[0] == 1 {
            deg.push(0);
        }
        if self.config.h01 {
            deg.extend(std::iter::repeat_n(1, self.dim));
        }
        for b in &self.blocks {
            deg.extend(std::iter::repeat_n(b.sketch.degree(), b.sketch.width()));
        }
        deg.resize(width, 0);
        deg
    }

    /// The settings the map was built with.
    pub fn config(&self) -> &MaclaurinConfig {
        &self.config
    }

    /// The seed the random sketches were drawn from.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// A rough count of the floating-point operations of transforming one
    /// row (see [`crate::feature_map::FeatureMap::row_flops`]): the scaled
    /// input and its prefactor, the sketches of the degree blocks, and the
    /// scaling of every column.
    pub fn row_flops(&self) -> f64 {
        let sketches: f64 = self.blocks.iter().map(|b| b.sketch.row_flops()).sum();
        (3 * self.dim + 2 * self.width()) as f64 + sketches
    }

    /// Input dimension `d`.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Output width `D` (= `n_components`).
    pub fn width(&self) -> usize {
        self.config.n_components
    }

    /// Truncation degree `p`.
    pub fn degree(&self) -> u32 {
        self.degree
    }

    /// Features per degree, index = degree: entry 0 the constant column,
    /// entry 1 the `d` linear columns in h01 mode, else sketch features
    /// (complex features for complex sketches). For the explicit `d = 1`
    /// map, 1 for each of [`explicit_degrees`] and 0 for the degrees between
    /// them.
    pub fn allocation(&self) -> &[usize] {
        &self.counts
    }

    /// The optimized objective `σ⁴ J` (`docs/math/maclaurin.rst`, "Objective"),
    /// the predicted mean squared kernel error over pairs; `None` unless the
    /// allocation was optimized.
    pub fn objective(&self) -> Option<f64> {
        self.objective
    }

    /// The center `c̄` (Gaussian kernel only).
    pub fn center(&self) -> Option<&[f64]> {
        self.center.as_deref()
    }

    /// `(pairs, most pairs dropped from one term)` of the pair statistics
    /// (`docs/math/maclaurin.rst`, "Pair statistics"); callers warn when more
    /// than 5% were dropped.
    pub fn dropped_pairs(&self) -> (u64, u64) {
        (self.n_pairs, self.dropped_pairs)
    }

    /// Writes `Φ(x)` for every row of `x` (`n × d`) into `out` (`n × D`), with
    /// the fitted center. Parallel over rows; deterministic.
    pub fn transform_into<T: Real>(
        &self,
        x: ArrayView2<T>,
        out: ArrayViewMut2<T>,
        par: Parallelism,
    ) -> Result<()> {
        let zero;
        let center = match &self.center {
            Some(c) => c.as_slice(),
            None => {
                zero = vec![0.0; self.dim];
                zero.as_slice()
            }
        };
        self.transform_centered_into(x, center, out, par)
    }

    /// Like [`Self::transform_into`] with `x̃ = (x − center)/l` (the localized
    /// GP of `docs/math/localized.rst` evaluates one map at many centers).
    /// Errors: a non-zero center for a dot-product kernel
    /// (`docs/math/maclaurin.rst`, "The Gaussian kernel through the exponential
    /// kernel"), shape mismatches, non-finite input.
    pub fn transform_centered_into<T: Real>(
        &self,
        x: ArrayView2<T>,
        center: &[f64],
        mut out: ArrayViewMut2<T>,
        par: Parallelism,
    ) -> Result<()> {
        let (n, d) = x.dim();
        self.check_centered(x, center)?;
        Error::check_out_shape((n, self.width()), out.dim())?;
        crate::feature_map::check_amplitude::<T>(self.config.kernel_variance.sqrt())?;
        let l = self.config.length_scale;
        let mut xt = Array2::<T>::zeros((n, d));
        Zip::from(xt.rows_mut()).and(x.rows()).for_each(|mut o, r| {
            for ((o, &v), &c) in o.iter_mut().zip(r).zip(center) {
                *o = T::from_f64_lossy(crate::kernels::divide_by(v.to_f64_exact() - c, l));
            }
        });
        // x̃ beyond T's range makes features beyond it.
        crate::sketch::refuse_overflow(all_finite(xt.view(), par))?;
        let sigma = self.config.kernel_variance.sqrt();
        // Per-row factor σ·g(x̃), from the scaled rows.
        let ln_g: Vec<f64> = xt
            .rows()
            .into_iter()
            .map(|r| {
                let sq: f64 = r.iter().map(|v| v.to_f64_exact().powi(2)).sum();
                self.config.kernel.ln_prefactor(sq)
            })
            .collect();
        if self.explicit_1d {
            let degrees = explicit_degrees(&self.config);
            for ((mut o, r), &lg) in out.rows_mut().into_iter().zip(xt.rows()).zip(&ln_g) {
                let t = r[0].to_f64_exact();
                o.fill(T::zero());
                for (o, &n) in o.iter_mut().zip(&degrees) {
                    *o = T::from_f64_lossy(sigma * explicit_entry(t, n, lg, &self.config.kernel));
                }
            }
            return crate::sketch::refuse_overflow(all_finite(out.view(), par));
        }
        let mut col = 0;
        if self.counts[0] == 1 {
            let a0 = self.coefs[0].sqrt();
            for (o, &lg) in out.column_mut(0).iter_mut().zip(&ln_g) {
                *o = T::from_f64_lossy(sigma * a0 * lg.exp());
            }
            col = 1;
        }
        if self.config.h01 {
            let a1 = self.coefs[1].sqrt();
            out.slice_mut(s![.., col..col + d])
                .zip_mut_with(&xt, |o, &v| *o = v * T::from_f64_lossy(a1));
            col += d;
        }
        let mut ranges = Vec::with_capacity(self.blocks.len());
        for b in &self.blocks {
            let w = b.sketch.width();
            b.sketch
                .transform_into(xt.view(), out.slice_mut(s![.., col..col + w]), par)?;
            ranges.push((col, col + w, b.scale));
            col += w;
        }
        if col < self.width() {
            out.slice_mut(s![.., col..]).fill(T::zero());
        }
        // Scale the linear and sketch columns by σ g(x) (and the block scale),
        // then check the row while it is in cache: g(x) grows with |x|, so
        // finite sketches can still overflow here.
        let first = usize::from(self.counts[0] == 1);
        let h01_end = first + if self.config.h01 { d } else { 0 };
        let overflow = AtomicBool::new(false);
        let scale_rows = |mut o: ndarray::ArrayViewMut1<T>, lg: f64| {
            let g = sigma * lg.exp();
            if h01_end > first {
                let f = T::from_f64_lossy(g);
                o.slice_mut(s![first..h01_end]).mapv_inplace(|v| v * f);
            }
            for &(a, b, sc) in &ranges {
                let f = T::from_f64_lossy(g * sc);
                o.slice_mut(s![a..b]).mapv_inplace(|v| v * f);
            }
            if !all_finite(o.view().insert_axis(Axis(0)), Parallelism::Sequential) {
                overflow.store(true, Ordering::Relaxed);
            }
        };
        let rows = Zip::from(out.rows_mut()).and(&ln_g[..]);
        if par.is_parallel() {
            rows.par_for_each(|o, &lg| scale_rows(o, lg));
        } else {
            rows.for_each(|o, &lg| scale_rows(o, lg));
        }
        crate::sketch::refuse_overflow(!overflow.into_inner())
    }

    /// The argument checks of [`Self::transform_centered_into`] (shared with
    /// the GPU path): `x` has `d` columns and finite entries, `center` has
    /// `d` finite entries and is zero unless the kernel is Gaussian
    /// (`docs/math/maclaurin.rst`, "The Gaussian kernel through the exponential
    /// kernel").
    pub fn check_centered<T: Real>(&self, x: ArrayView2<T>, center: &[f64]) -> Result<()> {
        Error::check_n_features(self.dim, x.ncols())?;
        if center.len() != self.dim {
            return Err(Error::ShapeMismatch {
                name: "length of center",
                expected: self.dim,
                got: center.len(),
            });
        }
        if !self.config.kernel.is_gaussian() && center.iter().any(|&c| c != 0.0) {
            return Err(Error::invalid(
                "center",
                "only the Gaussian kernel may be centered (dot-product kernels change under a shift)",
            ));
        }
        if center.iter().any(|c| !c.is_finite()) {
            return Err(Error::NonFinite { name: "center" });
        }
        if x.iter().any(|v| !v.is_finite()) {
            return Err(Error::NonFinite { name: "X" });
        }
        Ok(())
    }

    /// The Maclaurin coefficients `a_0, a_1, …` the map was built with
    /// (at least up to its degree).
    pub fn coefficients(&self) -> &[f64] {
        &self.coefs
    }

    /// The sketched degree blocks as `(block scale, sketch)` in ascending
    /// degree (the block scale is `√a_n` for optimized and explicit
    /// allocations); used by the localized GP's feature-norm bound
    /// (`docs/math/localized.rst`).
    pub fn sketch_blocks(&self) -> impl Iterator<Item = (f64, &PolySketch)> {
        self.blocks.iter().map(|b| (b.scale, &b.sketch))
    }

    /// True for the explicit `d = 1` map of `docs/math/maclaurin.rst`, "The
    /// truncated random map" (`p = D − 1`, nothing random).
    pub fn is_explicit_1d(&self) -> bool {
        self.explicit_1d
    }

    /// Allocating wrapper of [`Self::transform_into`].
    pub fn transform<T: Real>(&self, x: ArrayView2<T>, par: Parallelism) -> Result<Array2<T>> {
        let mut out = Array2::zeros((x.nrows(), self.width()));
        self.transform_into(x, out.view_mut(), par)?;
        Ok(out)
    }
}

/// The degrees of the explicit `d = 1` map's columns, ascending: the first
/// `D` degrees whose Maclaurin coefficient is not zero. Those are `0..D` for
/// the Gaussian and exponential kernels; for the polynomial kernel the
/// degrees up to `q` (only `q` without bias), so its map is exact when `D`
/// covers them, and the columns after the last degree are zero.
pub fn explicit_degrees(config: &MaclaurinConfig) -> Vec<u32> {
    let width = config.n_components;
    match config.kernel.max_degree() {
        Some(q) => (0..=q)
            .filter(|&n| config.kernel.coefficient(n) != 0.0)
            .take(width)
            .collect(),
        // Every coefficient is positive (those past n = 170 underflow in
        // f64: the entries take them in log space).
        None => (0..width as u32).collect(),
    }
}

/// The allocation of the explicit `d = 1` map: 1 for each of
/// [`explicit_degrees`], 0 for the degrees between them.
fn explicit_counts(config: &MaclaurinConfig) -> Vec<usize> {
    let degrees = explicit_degrees(config);
    let mut counts = vec![0; degrees.last().map_or(0, |&p| p as usize) + 1];
    for n in degrees {
        counts[n as usize] = 1;
    }
    counts
}

/// The refusal of an allocation that is not the explicit `d = 1` map's.
const EXPLICIT_COUNTS: &str = "the explicit d = 1 map counts 1 column for each of the first \
                               n_components degrees with a nonzero coefficient";

/// Entry `n` of the explicit `d = 1` map without `σ`
/// (`docs/math/maclaurin.rst`, "The truncated random map"):
/// `sign(t)^n exp(ln g + ½ ln a_n + n ln|t|)`, i.e. `g(t) √a_n t^n` in log
/// space.
fn explicit_entry(t: f64, n: u32, ln_g: f64, kernel: &MaclaurinKernel) -> f64 {
    let a = kernel.coefficient(n);
    if a == 0.0 {
        return 0.0;
    }
    let half_ln_a = match kernel {
        MaclaurinKernel::Polynomial { .. } => 0.5 * a.ln(),
        _ => -0.5 * ln_factorial(n),
    };
    if n == 0 {
        return (ln_g + half_ln_a).exp();
    }
    if t == 0.0 {
        return 0.0;
    }
    let v = (ln_g + half_ln_a + n as f64 * t.abs().ln()).exp();
    if t < 0.0 && n % 2 == 1 {
        -v
    } else {
        v
    }
}
