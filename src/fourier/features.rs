//! The fitted random Fourier feature map and its transform
//! (`docs/math/fourier.rst`, "Feature variants"; `docs/math/conventions.rst`,
//! "Layouts").

use ndarray::{s, Array1, Array2, ArrayView2, ArrayViewMut2, Axis, Ix2};
use rayon::prelude::*;

use super::fused;
use super::samplers::{self, Sampler};
use super::sincos::{cos_shift_scaled, sincos_scaled};
use crate::error::{Error, Result};
use crate::fwht::{signed_transform, transform};
use crate::kernels::Kernel;
use crate::linalg::gemm;
use crate::real::{all_finite, all_finite_scaled, cast_view, row_slice, Real};
use crate::rng::substream;
use crate::simd::Isa;
use crate::threads::Parallelism;

/// Rows per work item of the transform. Fixed, so that the result does not
/// depend on the number of threads.
const CHUNK_ROWS: usize = 256;
/// Columns per tile: the GEMM writes a `CHUNK_ROWS × COL_BLOCK` tile of the
/// output (512 KB in `f64`, within the 1 MB L2) and the cosines overwrite it
/// while it is still in cache.
const COL_BLOCK: usize = 256;

/// The output layout (`docs/math/fourier.rst`, "Feature variants";
/// `docs/math/conventions.rst`, "Layouts").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum Variant {
    /// `φ_j(x) = σ √(2/D) cos(w_jᵀx + b_j)`, `D` frequencies, phases `b_j ~ U[0, 2π)`.
    CosBias,
    /// `φ(x) = σ [cos(Wx) | sin(Wx) | (0)] / √m`, `m = ⌊D/2⌋` frequencies;
    /// odd `D` gets a trailing zero column. `D = 1` has no frequency pair
    /// and is drawn as `CosBias` (see [`Variant::for_width`]).
    CosSin,
}

/// The variant names accepted by [`Variant::from_name`].
pub const VARIANT_NAMES: [&str; 2] = ["cos_bias", "cos_sin"];

impl Variant {
    /// Parses a variant name (one of [`VARIANT_NAMES`]).
    pub fn from_name(name: &str) -> Result<Self> {
        match name {
            "cos_bias" => Ok(Variant::CosBias),
            "cos_sin" => Ok(Variant::CosSin),
            _ => Err(Error::invalid(
                "variant",
                format!("unknown variant {name:?}; expected one of {VARIANT_NAMES:?}"),
            )),
        }
    }

    /// The variant that is drawn for `n_components = D` columns: itself,
    /// except `CosSin` with `D = 1`, which has no cosine/sine pair to fill
    /// and becomes the one unbiased feature `σ √2 cos(wᵀx + b)` of
    /// `CosBias` (`docs/math/fourier.rst`, "Edge cases and cost"). With `D ≥ 2`
    /// `CosSin` keeps `⌊D/2⌋ ≥ 1` pairs, whose estimate is unbiased, and the
    /// zero column of an odd `D` adds nothing to it.
    pub fn for_width(self, n_components: usize) -> Self {
        match self {
            Variant::CosSin if n_components == 1 => Variant::CosBias,
            v => v,
        }
    }

    /// The number of frequencies `m` for `n_components = D` columns.
    pub fn n_frequencies(self, n_components: usize) -> usize {
        match self {
            Variant::CosBias => n_components,
            Variant::CosSin => n_components / 2,
        }
    }

    /// The columns of cosines (and sines) for `m` frequencies: `m` for
    /// `CosBias`, `2m` for `CosSin` (without the zero column of an odd `D`).
    pub fn n_columns(self, m: usize) -> usize {
        match self {
            Variant::CosBias => m,
            Variant::CosSin => 2 * m,
        }
    }

    /// The per-column scale (before the kernel's `σ`): `√(2/D)` or `1/√m`.
    pub fn scale(self, n_components: usize) -> f64 {
        match self {
            Variant::CosBias => (2.0 / n_components as f64).sqrt(),
            Variant::CosSin => 1.0 / (self.n_frequencies(n_components) as f64).sqrt(),
        }
    }
}

/// How [`FourierFeatures::transform_into_with`] computes a dense map.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// The fused kernel for the CPU's widest instruction set when
    /// `d ≤` [`fused::MAX_FUSED_FEATURES`] and the CPU has one
    /// (AVX2 + FMA or AVX-512, [`Isa::detect`]), else the tiles (what
    /// [`FourierFeatures::transform_into`] does).
    Auto,
    /// The fused kernel ([`fused`]) for this instruction set (an error if
    /// the CPU lacks it, for [`Isa::Portable`], which the kernel has no
    /// build for, or if the map is structured).
    Fused(Isa),
    /// A GEMM (faer) per `CHUNK_ROWS × COL_BLOCK` tile, then the cosines in
    /// place.
    Tiles,
}

/// Hyperparameters of a random Fourier feature map.
#[derive(Clone, Debug, PartialEq)]
pub struct FourierConfig {
    /// Output width `D`.
    pub n_components: usize,
    /// The kernel (its spectral density).
    pub kernel: Kernel,
    /// Length scale `l > 0`.
    pub length_scale: f64,
    /// Kernel variance `σ² > 0` (features are scaled by `σ`).
    pub kernel_variance: f64,
    /// How the frequencies are drawn.
    pub sampler: Sampler,
    /// Output layout.
    pub variant: Variant,
}

impl FourierConfig {
    /// The Gaussian kernel, `mc` sampler, `cos_sin` variant, `l = σ² = 1`.
    pub fn new(n_components: usize) -> Self {
        FourierConfig {
            n_components,
            kernel: Kernel::Gaussian,
            length_scale: 1.0,
            kernel_variance: 1.0,
            sampler: Sampler::Mc,
            variant: Variant::CosSin,
        }
    }

    /// Checks every hyperparameter for inputs with `n_features` columns.
    pub fn validate(&self, n_features: usize) -> Result<()> {
        check_positive("length_scale", self.length_scale)?;
        check_positive("kernel_variance", self.kernel_variance)?;
        if n_features == 0 {
            return Err(Error::invalid(
                "n_features",
                "X must have at least one column",
            ));
        }
        if self.n_components == 0 {
            return Err(Error::invalid("n_components", "must be >= 1, got 0"));
        }
        let m = self
            .variant
            .for_width(self.n_components)
            .n_frequencies(self.n_components);
        self.sampler.check(self.kernel, m, n_features)
    }
}

/// Refuses a projection drawn at length scale(s) `length_scale` whose
/// frequencies, spectral samples divided by the length scale, are not
/// finite (a length scale near the smallest floats: `z / 5e-324` is
/// infinite), instead of a map that every transform refuses. The SORF
/// blocks apply the factor `1/(d' l)`, which must be finite.
///
/// # Errors
/// [`Error::InvalidParameter`] naming `length_scale`.
fn check_frequencies_finite(projection: &Projection, length_scale: &[f64]) -> Result<()> {
    let finite = match projection {
        Projection::Dense(w) => w.iter().all(|v| v.is_finite()),
        Projection::Structured {
            n_features,
            length_scale,
            ..
        } => (1.0 / (n_features.next_power_of_two() as f64 * length_scale)).is_finite(),
    };
    if finite {
        return Ok(());
    }
    let shown = match length_scale {
        [l] => format!("{l:e}"),
        ls => format!("{ls:?}"),
    };
    Err(Error::invalid(
        "length_scale",
        format!(
            "the frequencies, spectral samples divided by length_scale, overflow the float \
             range at length_scale {shown}: scale X up and length_scale with it"
        ),
    ))
}

fn check_positive(name: &'static str, v: f64) -> Result<()> {
    if v.is_finite() && v > 0.0 {
        Ok(())
    } else {
        Err(Error::invalid(
            name,
            format!("must be a finite number > 0, got {v:?}"),
        ))
    }
}

/// How `x ↦ Wx` is computed.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum Projection {
    /// An explicit `m × d` frequency matrix (one GEMM per output tile).
    Dense(Array2<f64>),
    /// SORF blocks `W_b = (1/(d' l)) H D₁ H D₂ H D₃` (`docs/math/fourier.rst`,
    /// "Frequency samplers"), applied with three FWHTs per block, `O(m log d')`
    /// per row; `W` is never formed.
    Structured {
        /// `3·blocks × d'` signs (±1): rows `3b, 3b+1, 3b+2` are `D₁, D₂, D₃` of block `b`.
        signs: Array2<f64>,
        /// Input dimension `d` (inputs are zero-padded to `d'`).
        n_features: usize,
        /// Number of frequencies `m ≤ blocks · d'` (the first `m` rows).
        n_frequencies: usize,
        /// Length scale `l`.
        length_scale: f64,
    },
}

impl Projection {
    /// `(m, d)`.
    pub fn shape(&self) -> (usize, usize) {
        match self {
            Projection::Dense(w) => w.dim(),
            Projection::Structured {
                n_features,
                n_frequencies,
                ..
            } => (*n_frequencies, *n_features),
        }
    }
}

/// A fitted random Fourier feature map (`docs/math/fourier.rst`): the
/// frequencies (dense `W` or SORF signs), the `cos_bias` phases, the layout and
/// the scale. A pure function of its fields:
/// [`FourierFeatures::transform_into`] uses no randomness and gives
/// bit-identical results for any thread count.
///
/// The fields are public and must agree with each other (see
/// [`FourierFeatures::validate`], which every transform calls first): the
/// projection has `m` frequencies (`m = D` for `cos_bias`, `⌊D/2⌋ ≥ 1` for
/// `cos_sin`), `cos_bias` has `m` finite phases and `cos_sin` none, the
/// kernel variance is finite and `> 0`. The float32 copy of dense
/// frequencies, their panels packed for the fused transform and the bound
/// on the projections are derived on first use and kept for the projection
/// they came from: assigning a new projection
/// derives them again, but entries of the frequency matrix edited in place
/// after a transform, other than in its first and last rows, are not seen
/// by them (assign a new [`Projection`] instead). Stored maps (feature `serde`) are checked on loading,
/// values included.
///
/// ```
/// use ndarray::Array2;
/// use randfeat_rs::fourier::{FourierConfig, FourierFeatures};
/// use randfeat_rs::Parallelism;
///
/// let x = Array2::from_shape_fn((5, 3), |(i, j)| (i * 3 + j) as f64 * 0.1);
/// let map = FourierFeatures::fit(&FourierConfig::new(512), 3, 42)?;
/// let mut phi = Array2::<f64>::zeros((5, 512));
/// map.transform_into(x.view(), phi.view_mut(), Parallelism::Rayon)?;
/// let k01 = phi.row(0).dot(&phi.row(1)); // ≈ exp(-|x0 - x1|² / 2)
/// assert!((k01 - (-0.5_f64 * 0.27).exp()).abs() < 0.15);
/// # Ok::<(), randfeat_rs::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize, serde::Deserialize),
    serde(try_from = "FourierParts")
)]
pub struct FourierFeatures {
    /// The frequencies `W` (`m × d`), dense or structured.
    pub projection: Projection,
    /// `cos_bias` phases `b` (length `m`); `None` for `cos_sin`.
    pub phases: Option<Array1<f64>>,
    /// Output layout.
    pub variant: Variant,
    /// Output width `D`.
    pub n_components: usize,
    /// Kernel variance `σ²`.
    pub kernel_variance: f64,
    /// What is derived from the projection on first use: the bound on the
    /// projections (see [`FourierFeatures::transform_into`]) and the float32
    /// copy of dense frequencies.
    #[cfg_attr(feature = "serde", serde(skip))]
    derived: Derived,
}

/// The stored form of [`FourierFeatures`] (its public fields), checked on
/// loading by [`FourierFeatures::from_parts`] and the values of its
/// projection.
#[cfg(feature = "serde")]
#[derive(serde::Deserialize)]
struct FourierParts {
    projection: Projection,
    phases: Option<Array1<f64>>,
    variant: Variant,
    n_components: usize,
    kernel_variance: f64,
}

#[cfg(feature = "serde")]
impl TryFrom<FourierParts> for FourierFeatures {
    type Error = Error;

    fn try_from(p: FourierParts) -> Result<Self> {
        let map = FourierFeatures::from_parts(
            p.projection,
            p.phases,
            p.variant,
            p.n_components,
            p.kernel_variance,
        )?;
        // The full scan of the frequencies' values (kept for the first
        // transform: moving the map does not move its arrays).
        map.projection_bound()?;
        Ok(map)
    }
}

/// The identity of the projection [`Derived`] values were computed from: the
/// address, shape and strides of its array (the dense frequencies or the
/// SORF signs), a hash of the bits of its first and last rows, and the SORF
/// scalars. Replacing `projection` by another value, or reshaping its array
/// in place, changes the key, so that the values are derived again instead
/// of being used with fields they do not belong to. The hash covers the
/// case the address alone misses: a new array allocated where a replaced
/// one was freed (two assignments between transforms), which holds other
/// random draws. It costs `O(d)` a call, not the `O(m d)` of a full scan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct ProjectionKey {
    addr: usize,
    dim: (usize, usize),
    strides: [isize; 2],
    ends: u64,
    n_features: usize,
    n_frequencies: usize,
    length_scale: u64,
}

/// The values derived from one projection, each computed on first use.
#[derive(Debug)]
struct DerivedFor {
    /// The projection they are derived from.
    key: ProjectionKey,
    /// `max(1, max_j ‖w_j‖₁)`, or why the frequencies are unusable (see
    /// [`FourierFeatures::projection_bound`]).
    bound: std::sync::OnceLock<Result<f64>>,
    /// The dense frequencies transposed (`d × m`) in float32, converted on
    /// the first float32 tile transform (a copy per call costs about as
    /// much as the GEMM of a few hundred rows, and a call may be one of
    /// several row ranges).
    frequencies_f32: std::sync::OnceLock<Array2<f32>>,
    /// The dense frequencies packed for the fused transform.
    panels: fused::PackedPanels,
}

/// The values derived from the projection of a map, kept with the
/// [`ProjectionKey`] of the projection they came from, behind one pointer
/// (the map stays small where it is held by value): equal for equal maps, so
/// they take no part in comparisons; not stored, and not copied by `clone`
/// (the clone's arrays are new ones, so it derives its own on first use).
#[derive(Debug, Default)]
struct Derived(std::sync::RwLock<Option<std::sync::Arc<DerivedFor>>>);

impl Clone for Derived {
    fn clone(&self) -> Self {
        Derived::default()
    }
}

impl PartialEq for Derived {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Derived {
    /// The values for the projection of `key`: the kept ones when they were
    /// derived from that projection, else new empty ones, then kept (a
    /// panic elsewhere leaves the lock usable: poisoning is ignored, the
    /// slot is only ever replaced whole).
    fn get(&self, key: ProjectionKey) -> std::sync::Arc<DerivedFor> {
        use std::sync::{Arc, PoisonError};
        if let Some(kept) = &*self.0.read().unwrap_or_else(PoisonError::into_inner)
            && kept.key == key
        {
            return Arc::clone(kept);
        }
        let mut slot = self.0.write().unwrap_or_else(PoisonError::into_inner);
        // Another thread may have replaced them while this one waited.
        if let Some(kept) = &*slot
            && kept.key == key
        {
            return Arc::clone(kept);
        }
        let kept = Arc::new(DerivedFor {
            key,
            bound: std::sync::OnceLock::new(),
            frequencies_f32: std::sync::OnceLock::new(),
            panels: fused::PackedPanels::default(),
        });
        *slot = Some(Arc::clone(&kept));
        kept
    }
}

impl FourierFeatures {
    /// [`Self::fit`] with the length scale(s) `length_scales` in place of
    /// `config.length_scale`: one value (exactly [`Self::fit`] at it), or one
    /// per input dimension (automatic relevance determination). The kernel
    /// `k(((x_a − y_a)/l_a)_a)` is the unit-length-scale kernel of the inputs
    /// `x_a/l_a`, so the frequencies are those of the draw at length scale 1
    /// with column `a` divided by `l_a`, `W_ja = Ω_ja/l_a`
    /// ([`Self::with_length_scales`]; docs/math/fourier.rst, "Length
    /// scales per dimension"). A structured (SORF) draw is then formed into
    /// dense frequencies.
    ///
    /// # Errors
    /// As [`Self::fit`]; [`Error::InvalidParameter`] naming `length_scale`
    /// for a count other than 1 or `n_features`, or values not finite and
    /// `> 0`.
    pub fn fit_with_length_scales(
        config: &FourierConfig,
        n_features: usize,
        length_scales: &[f64],
        seed: u64,
    ) -> Result<Self> {
        if let [l] = length_scales {
            return Self::fit(
                &FourierConfig {
                    length_scale: *l,
                    ..config.clone()
                },
                n_features,
                seed,
            );
        }
        if length_scales.len() != n_features {
            return Err(Error::invalid(
                "length_scale",
                format!(
                    "needs 1 value or one per input dimension ({n_features}), got {}",
                    length_scales.len()
                ),
            ));
        }
        for &l in length_scales {
            check_positive("length_scale", l)?;
        }
        let unit = FourierConfig {
            length_scale: 1.0,
            ..config.clone()
        };
        Self::fit(&unit, n_features, seed)?.with_length_scales(
            &[1.0],
            length_scales,
            config.kernel_variance,
        )
    }

    /// Draws the random parameters for inputs with `n_features` columns from
    /// `seed` (sub-stream 0: frequencies, 1: phases, 2: SORF signs).
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] for hyperparameters that
    /// [`FourierConfig::validate`] refuses, sizes the system cannot
    /// allocate, or a length scale so small that the frequencies overflow
    /// (naming `length_scale`).
    pub fn fit(config: &FourierConfig, n_features: usize, seed: u64) -> Result<Self> {
        config.validate(n_features)?;
        // Moment matching holds the draws, their centered copy, the whitened
        // transpose and the result at once.
        let copies = if config.sampler == Sampler::MomentMatching {
            4
        } else {
            1
        };
        crate::alloc::check_alloc(
            "n_components",
            &format!(
                "the random Fourier features' frequencies ({n_features} x {} float64{})",
                config.n_components,
                if copies > 1 {
                    format!(", {copies} copies")
                } else {
                    String::new()
                }
            ),
            &[copies, n_features.max(1), config.n_components],
            8,
        )?;
        let (d, l, kernel) = (n_features, config.length_scale, config.kernel);
        let variant = config.variant.for_width(config.n_components);
        let m = variant.n_frequencies(config.n_components);
        let with_phase = variant == Variant::CosBias;
        let mut rng = substream(seed, 0);
        let mut qmc_phases = None;
        let projection = match config.sampler {
            Sampler::Mc => Projection::Dense(samplers::mc(kernel, m, d, l, &mut rng)?),
            Sampler::Antithetic => {
                Projection::Dense(samplers::antithetic(kernel, m, d, l, &mut rng)?)
            }
            Sampler::Orthogonal => {
                Projection::Dense(samplers::orthogonal(kernel, m, d, l, &mut rng)?)
            }
            Sampler::MomentMatching => {
                Projection::Dense(samplers::moment_matching(m, d, l, &mut rng)?)
            }
            Sampler::Qmc => {
                let (w, b) = samplers::qmc(kernel, m, d, l, with_phase, Some(&mut rng))?;
                qmc_phases = b;
                Projection::Dense(w)
            }
            Sampler::Structured => {
                let dp = d.next_power_of_two();
                let blocks = m.div_ceil(dp);
                let signs = samplers::sorf_signs(blocks, dp, &mut substream(seed, 2));
                Projection::Structured {
                    signs,
                    n_features: d,
                    n_frequencies: m,
                    length_scale: l,
                }
            }
        };
        check_frequencies_finite(&projection, &[l])?;
        let phases = if !with_phase {
            None
        } else if let Some(b) = qmc_phases {
            Some(b)
        } else {
            let mut prng = substream(seed, 1);
            let mut b = Array1::from(crate::alloc::try_zeroed_vec::<f64>(
                "n_components",
                &format!("the random Fourier features' phases ({m} float64)"),
                m,
            )?);
            b.iter_mut().for_each(|v| {
                *v = 2.0 * std::f64::consts::PI * rand::Rng::random::<f64>(&mut prng);
            });
            if config.sampler == Sampler::Antithetic {
                // The pair (w, -w) shares its phase (docs/math/fourier.rst,
                // "Frequency samplers").
                let first = b.slice(s![..m / 2]).to_owned();
                b.slice_mut(s![m / 2..]).assign(&first);
            }
            Some(b)
        };
        Self::from_parts(
            projection,
            phases,
            variant,
            config.n_components,
            config.kernel_variance,
        )
    }

    /// Rebuilds a fitted map from its parameters (e.g. arrays stored by the
    /// Python estimator), checking that they are consistent.
    ///
    /// # Errors
    /// As [`Self::validate`].
    pub fn from_parts(
        projection: Projection,
        phases: Option<Array1<f64>>,
        variant: Variant,
        n_components: usize,
        kernel_variance: f64,
    ) -> Result<Self> {
        let map = FourierFeatures {
            projection,
            phases,
            variant,
            n_components,
            kernel_variance,
            derived: Derived::default(),
        };
        map.validate()?;
        Ok(map)
    }

    /// Checks that the fields agree with each other as every transform
    /// assumes (the fields are public, so a map edited after
    /// [`Self::fit`] or [`Self::from_parts`] may not): `O(m)`, the shapes
    /// and the phases' values. Every transform calls it first; the values
    /// of the frequencies are checked once per projection on first use
    /// (see [`Self::transform_into`]), and on loading (feature `serde`).
    ///
    /// # Errors
    /// - [`Error::InvalidParameter`] naming `kernel_variance` unless it is
    ///   finite and `> 0`; `n_components` when it leaves no frequency (0, or
    ///   1 with `cos_sin`); `length_scale` (structured) unless finite and
    ///   `> 0`; `n_features` (structured) without a power of two; `phases`
    ///   for the phases of a `cos_sin` map or non-finite phases;
    ///   `projection` for a map of no input feature.
    /// - [`Error::ShapeMismatch`] naming `projection` when its number of
    ///   frequencies is not the `m` of `n_components` and the variant (`D`
    ///   for `cos_bias`, `⌊D/2⌋` for `cos_sin`) or its SORF signs are not
    ///   `3⌈m/d'⌉ × d'`; naming `phases` when a `cos_bias` map has no `m`
    ///   phases.
    pub fn validate(&self) -> Result<()> {
        check_positive("kernel_variance", self.kernel_variance)?;
        let m = self.variant.n_frequencies(self.n_components);
        if m == 0 {
            return Err(Error::invalid(
                "n_components",
                format!(
                    "must be >= 1 (>= 2 for the cos_sin variant), got {}",
                    self.n_components
                ),
            ));
        }
        let (pm, d) = self.projection.shape();
        if d == 0 {
            return Err(Error::invalid(
                "projection",
                "needs at least one input feature, got 0 columns",
            ));
        }
        if pm != m {
            return Err(Error::ShapeMismatch {
                name: "frequencies of projection (n_components for cos_bias, n_components / 2 \
                       for cos_sin)",
                expected: m,
                got: pm,
            });
        }
        if let Projection::Structured {
            signs,
            n_features,
            length_scale,
            ..
        } = &self.projection
        {
            check_positive("length_scale", *length_scale)?;
            let dp = n_features.checked_next_power_of_two().ok_or_else(|| {
                Error::invalid(
                    "n_features",
                    format!(
                        "the SORF blocks pad {n_features} inputs to a power of two, and it has \
                         none below usize::MAX"
                    ),
                )
            })?;
            if signs.ncols() != dp {
                return Err(Error::ShapeMismatch {
                    name: "columns of the SORF signs of projection (n_features padded to a \
                           power of two)",
                    expected: dp,
                    got: signs.ncols(),
                });
            }
            // m ≥ 1 and dp ≥ 1 here; 3 · blocks overflows only for edited fields.
            let rows = m.div_ceil(dp).checked_mul(3);
            if rows != Some(signs.nrows()) {
                return Err(Error::ShapeMismatch {
                    name: "rows of the SORF signs of projection (3 per block of frequencies)",
                    expected: rows.unwrap_or(usize::MAX),
                    got: signs.nrows(),
                });
            }
        }
        match (self.variant, &self.phases) {
            (Variant::CosBias, Some(b)) if b.len() == m => {
                if !b.iter().all(|v| v.is_finite()) {
                    return Err(Error::invalid("phases", "must be finite"));
                }
            }
            (Variant::CosBias, b) => {
                return Err(Error::ShapeMismatch {
                    name: "length of phases (the cos_bias variant has one per frequency)",
                    expected: m,
                    got: b.as_ref().map_or(0, |b| b.len()),
                })
            }
            (Variant::CosSin, None) => {}
            (Variant::CosSin, Some(_)) => {
                return Err(Error::invalid(
                    "phases",
                    "the cos_sin variant has no phases (set them to None)",
                ))
            }
        }
        Ok(())
    }

    /// [`Self::validate`], then the values of the projection (checked once
    /// per projection, see [`Self::transform_into`]): what every transform,
    /// CPU or GPU, checks of the map first. Returns the bound on the
    /// projections (see [`Self::projection_bound`]).
    ///
    /// # Errors
    /// As [`Self::validate`]; [`Error::InvalidParameter`] naming
    /// `projection` for non-finite frequencies or SORF signs other than
    /// `±1`.
    pub(crate) fn check_fields(&self) -> Result<f64> {
        self.validate()?;
        self.projection_bound()
    }

    /// The identity of the projection (see [`ProjectionKey`]).
    fn projection_key(&self) -> ProjectionKey {
        let key = |a: &Array2<f64>| {
            let s = a.strides();
            // A multiply-rotate hash (as rustc's FxHash): a few cycles an
            // entry, where SipHash would cost more than a one-row SORF
            // transform.
            let mut ends = 0u64;
            if a.nrows() > 0 {
                for &i in &[0, a.nrows() - 1] {
                    for v in a.row(i) {
                        ends =
                            (ends.rotate_left(5) ^ v.to_bits()).wrapping_mul(0x517c_c1b7_2722_0a95);
                    }
                }
            }
            (a.as_ptr() as usize, a.dim(), [s[0], s[1]], ends)
        };
        match &self.projection {
            Projection::Dense(w) => {
                let (addr, dim, strides, ends) = key(w);
                ProjectionKey {
                    addr,
                    dim,
                    strides,
                    ends,
                    n_features: 0,
                    n_frequencies: 0,
                    length_scale: 0,
                }
            }
            Projection::Structured {
                signs,
                n_features,
                n_frequencies,
                length_scale,
            } => {
                let (addr, dim, strides, ends) = key(signs);
                ProjectionKey {
                    addr,
                    dim,
                    strides,
                    ends,
                    n_features: *n_features,
                    n_frequencies: *n_frequencies,
                    length_scale: length_scale.to_bits(),
                }
            }
        }
    }

    /// `max(1, max_j ‖w_j‖₁)`: `|w_jᵀx| ≤ max_a |x_a| · ‖w_j‖₁`, so inputs
    /// with `max_a |x_a|` times this in the float range have finite
    /// projections. For SORF blocks also `d'³ · max(1, 1/(d' l))`, a bound
    /// on the intermediate results of the three unnormalized FWHTs (each
    /// grows the largest entry by at most `d'`). Derived once per projection
    /// (`O(m d)`), with the check of its values: the frequencies must be
    /// finite and the SORF signs `±1`. The shapes must have been checked by
    /// [`Self::validate`].
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] naming `projection` for non-finite
    /// frequencies or signs other than `±1`.
    fn projection_bound(&self) -> Result<f64> {
        let derived = self.derived.get(self.projection_key());
        let bound = derived.bound.get_or_init(|| {
            match &self.projection {
                Projection::Dense(w) => {
                    if !w.iter().all(|v| v.is_finite()) {
                        return Err(Error::invalid(
                            "projection",
                            "the frequencies must be finite",
                        ));
                    }
                }
                Projection::Structured { signs, .. } => {
                    if !signs.iter().all(|&v| v == 1.0 || v == -1.0) {
                        return Err(Error::invalid(
                            "projection",
                            "the SORF signs must be +1 or -1",
                        ));
                    }
                }
            }
            let rows = self
                .frequencies()
                .rows()
                .into_iter()
                .map(|w| w.iter().map(|v| v.abs()).sum::<f64>())
                .fold(1.0, f64::max);
            Ok(match &self.projection {
                Projection::Dense(_) => rows,
                Projection::Structured {
                    signs,
                    length_scale,
                    ..
                } => {
                    let dp = signs.ncols() as f64;
                    rows.max(dp.powi(3) * (1.0 / (dp * length_scale)).max(1.0))
                }
            })
        });
        bound.clone()
    }

    /// Input dimension `d`.
    pub fn n_features(&self) -> usize {
        self.projection.shape().1
    }

    /// Number of frequencies `m`.
    pub fn n_frequencies(&self) -> usize {
        self.projection.shape().0
    }

    /// The frequency matrix `W` (`m × d`); formed explicitly for SORF
    /// (`O(d m log d')`), for inspection only.
    ///
    /// # Panics
    /// For a structured map whose SORF signs do not have the shape of its
    /// frequencies (see [`Self::validate`]).
    pub fn frequencies(&self) -> Array2<f64> {
        match &self.projection {
            Projection::Dense(w) => w.clone(),
            Projection::Structured { .. } => {
                let d = self.n_features();
                let m = self.n_frequencies();
                let signs = self.signs_as::<f64>();
                let mut w = Array2::zeros((m, d));
                let mut buf = Vec::new();
                let mut col = vec![0.0; m];
                for i in 0..d {
                    let mut e = vec![0.0; d];
                    e[i] = 1.0;
                    self.sorf_row(&e, &mut col, &signs, &mut buf);
                    w.column_mut(i).assign(&Array1::from(col.clone()));
                }
                w
            }
        }
    }

    /// The same random draw at other kernel hyperparameters (see
    /// docs/math/fourier.rst and docs/math/gp.rst): for a map drawn at
    /// length scale(s) `from` (one value, or one per input dimension), the
    /// unit frequencies `Ω = W diag(from)` stay fixed and the frequencies of
    /// length scale(s) `to` are `W_ja (from_a / to_a)` (a factor of exactly
    /// 1 where `from_a = to_a`); the phases stay, and the features are scaled
    /// by `√kernel_variance`. A structured (SORF) map keeps its signs when
    /// `to` is one value (its own length scale must be `from`) and is formed
    /// into dense frequencies for per-dimension `to`.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] for a length-scale count other than 1 or
    /// `d`, non-positive or non-finite values, length scales `to` at which
    /// the frequencies overflow, or a structured map whose
    /// length scale is not `from`; the errors of [`Self::validate`] for a
    /// map whose fields disagree.
    pub fn with_length_scales(
        &self,
        from: &[f64],
        to: &[f64],
        kernel_variance: f64,
    ) -> Result<Self> {
        self.validate()?;
        let d = self.n_features();
        for (name, ls) in [("length_scale", from), ("length_scale", to)] {
            if ls.len() != 1 && ls.len() != d {
                return Err(Error::invalid(
                    name,
                    format!(
                        "needs 1 value or one per input dimension ({d}), got {}",
                        ls.len()
                    ),
                ));
            }
            for &l in ls {
                check_positive(name, l)?;
            }
        }
        let at = |ls: &[f64], a: usize| ls[if ls.len() == 1 { 0 } else { a }];
        // Parameters that were not valid before (edited fields) are refused
        // on use, naming `projection`; only valid ones can be overflowed by
        // the length scales.
        let valid = match &self.projection {
            Projection::Dense(w) => w.iter().all(|v| v.is_finite()),
            Projection::Structured { signs, .. } => signs.iter().all(|&v| v == 1.0 || v == -1.0),
        };
        let projection = match &self.projection {
            Projection::Structured {
                signs,
                n_features,
                n_frequencies,
                length_scale,
            } if to.len() == 1 => {
                if from.len() != 1 || from[0] != *length_scale {
                    return Err(Error::invalid(
                        "length_scale",
                        format!(
                            "the structured map was drawn at length scale {length_scale}, not {from:?}"
                        ),
                    ));
                }
                Projection::Structured {
                    signs: signs.clone(),
                    n_features: *n_features,
                    n_frequencies: *n_frequencies,
                    length_scale: to[0],
                }
            }
            _ => {
                let mut w = self.frequencies();
                for (a, mut col) in w.columns_mut().into_iter().enumerate() {
                    let factor = at(from, a) / at(to, a);
                    if factor != 1.0 {
                        col.mapv_inplace(|v| v * factor);
                    }
                }
                Projection::Dense(w)
            }
        };
        if valid {
            check_frequencies_finite(&projection, to)?;
        }
        Self::from_parts(
            projection,
            self.phases.clone(),
            self.variant,
            self.n_components,
            kernel_variance,
        )
    }

    /// The overall column scale `σ · (√(2/D) or 1/√m)`.
    pub fn scale(&self) -> f64 {
        self.kernel_variance.sqrt() * self.variant.scale(self.n_components)
    }

    fn signs_as<T: Real>(&self) -> Array2<T> {
        match &self.projection {
            // In standard layout whatever the layout of the stored signs
            // (`sorf_row` reads them as one slice).
            Projection::Structured { signs, .. } => {
                signs.as_standard_layout().mapv(T::from_f64_lossy)
            }
            Projection::Dense(_) => Array2::zeros((0, 0)),
        }
    }

    /// `out[..m] <- W x` for one row through the SORF blocks.
    fn sorf_row<T: Real>(&self, x: &[T], out: &mut [T], signs: &Array2<T>, buf: &mut Vec<T>) {
        let Projection::Structured {
            n_features,
            n_frequencies,
            length_scale,
            ..
        } = &self.projection
        else {
            return;
        };
        let dp = n_features.next_power_of_two();
        let factor = T::from_f64_lossy(1.0 / (dp as f64 * length_scale));
        let signs = signs
            .as_slice()
            .expect("the signs are built in standard layout");
        sorf_blocks(x, &mut out[..*n_frequencies], signs, dp, factor, buf);
    }

    /// Writes `φ(x)` for every row of `x` (`n × d`) into `out` (`n × D`,
    /// C-contiguous) (`docs/math/fourier.rst`, "Feature variants"). Dense
    /// frequencies with `d ≤` [`fused::MAX_FUSED_FEATURES`] take the fused
    /// kernel ([`fused`]: projection, cosine and scale in registers, one store
    /// per element). Otherwise `out[i, ..m] = W x_i` by a GEMM (faer) or the
    /// SORF blocks, then the cosines and sines in place; dense frequencies go
    /// tile by tile (`CHUNK_ROWS × COL_BLOCK`): one GEMM writes the tile and
    /// its cosines follow while it is in cache. Row chunks run in parallel with
    /// [`Parallelism::Rayon`]; the result is bit-identical for any thread
    /// count.
    ///
    /// # Errors
    /// The errors of [`Self::validate`] (fields that disagree), then those
    /// of a projection with non-finite frequencies or SORF signs other than
    /// `±1` ([`Error::InvalidParameter`] naming `projection`, checked once
    /// per projection); [`Error::ShapeMismatch`] for `x` or `out` of the
    /// wrong shape; [`Error::InvalidParameter`] for `out` not C-contiguous
    /// or features beyond `T`'s range; [`Error::NonFinite`] for non-finite
    /// `x`, and [`Error::InvalidParameter`] naming `X` for inputs whose
    /// projections may overflow.
    pub fn transform_into<T: Real>(
        &self,
        x: ArrayView2<T>,
        out: ArrayViewMut2<T>,
        par: Parallelism,
    ) -> Result<()> {
        self.transform_into_with(x, out, par, Method::Auto)
    }

    /// [`FourierFeatures::transform_into`] by a chosen [`Method`] (for tests
    /// and benchmarks; the results of the methods agree to rounding).
    ///
    /// # Errors
    /// As [`Self::transform_into`], and [`Error::InvalidParameter`] naming
    /// `method` for a fused kernel this CPU or this map cannot run.
    pub fn transform_into_with<T: Real>(
        &self,
        x: ArrayView2<T>,
        out: ArrayViewMut2<T>,
        par: Parallelism,
        method: Method,
    ) -> Result<()> {
        self.check_transform(x, &out, par)?;
        let (w, isa) = match (&self.projection, method) {
            (Projection::Dense(w), Method::Auto) => match Isa::detect() {
                isa @ (Isa::Avx512 | Isa::Avx2) if w.ncols() <= fused::MAX_FUSED_FEATURES => {
                    (w, isa)
                }
                _ => {
                    self.transform_tiles(x, out, par);
                    return Ok(());
                }
            },
            (Projection::Dense(w), Method::Fused(isa)) => {
                if isa == Isa::Portable {
                    return Err(Error::invalid(
                        "method",
                        "the fused kernel needs AVX2 + FMA or AVX-512 (Isa::Portable has none)",
                    ));
                }
                if !Isa::available().contains(&isa) {
                    return Err(Error::invalid(
                        "method",
                        format!("this CPU cannot run the {isa:?} kernel"),
                    ));
                }
                (w, isa)
            }
            (Projection::Structured { .. }, Method::Fused(_)) => {
                return Err(Error::invalid(
                    "method",
                    "the fused kernel needs dense frequencies (not the structured sampler)",
                ))
            }
            _ => {
                self.transform_tiles(x, out, par);
                return Ok(());
            }
        };
        let derived = self.derived.get(self.projection_key());
        fused::transform_dense(
            w,
            &derived.panels,
            self.phases.as_ref(),
            self.variant,
            self.n_components,
            self.scale(),
            x,
            out,
            par,
            isa,
        );
        Ok(())
    }

    fn check_transform<T: Real>(
        &self,
        x: ArrayView2<T>,
        out: &ArrayViewMut2<T>,
        par: Parallelism,
    ) -> Result<()> {
        // The values of the frequencies are checked once per projection.
        let bound = self.check_fields()?;
        Error::check_n_features(self.n_features(), x.ncols())?;
        Error::check_out_shape((x.nrows(), self.n_components), out.dim())?;
        if !out.is_standard_layout() {
            return Err(Error::invalid("out", "must be C-contiguous"));
        }
        crate::feature_map::check_amplitude::<T>(self.scale())?;
        // `v·b` is finite for every input `v` exactly when the inputs are
        // finite and their projections cannot overflow.
        if !all_finite_scaled(x, T::from_f64_lossy(bound), par) {
            if !all_finite(x, par) {
                return Err(Error::NonFinite { name: "X" });
            }
            return Err(Error::invalid(
                "X",
                format!(
                    "its projections on the frequencies may overflow the float range \
                     (max |x| times the largest frequency norm {bound:e}): scale X down"
                ),
            ));
        }
        Ok(())
    }

    /// The tile transform (faer GEMM, then the cosines in place): structured
    /// maps and dense maps with more than [`fused::MAX_FUSED_FEATURES`]
    /// inputs. Arguments as checked by [`FourierFeatures::transform_into`].
    fn transform_tiles<T: Real>(
        &self,
        x: ArrayView2<T>,
        mut out: ArrayViewMut2<T>,
        par: Parallelism,
    ) {
        let m = self.n_frequencies();
        // `Wᵀ` in `T`: a view of the dense frequencies for f64, of their
        // float32 copy for f32.
        let w32;
        let wt: Option<ArrayView2<T>> = match &self.projection {
            Projection::Dense(w) => Some(match cast_view::<f64, T, Ix2>(w.t()) {
                Some(view) => view,
                None => {
                    w32 = self.derived.get(self.projection_key());
                    let wt = w32.frequencies_f32.get_or_init(|| w.t().mapv(|v| v as f32));
                    cast_view::<f32, T, Ix2>(wt.view())
                        .expect("Real is implemented for f32 and f64 only")
                }
            }),
            Projection::Structured { .. } => None,
        };
        let signs = self.signs_as::<T>();
        let scale = self.scale();
        let phases: Option<Vec<T>> = self
            .phases
            .as_ref()
            .map(|b| b.iter().map(|&v| T::from_f64_lossy(v)).collect());
        let finish = |oc: &mut ArrayViewMut2<T>, cols: std::ops::Range<usize>| {
            for mut row in oc.rows_mut() {
                let row = row.as_slice_mut().expect("rows of a C-order array");
                match &phases {
                    Some(b) => cos_shift_scaled(&mut row[cols.clone()], &b[cols.clone()], scale),
                    None => {
                        let (c, rest) = row.split_at_mut(m);
                        sincos_scaled(&mut c[cols.clone()], &mut rest[cols.clone()], scale);
                        if cols.end == m {
                            rest[m..].iter_mut().for_each(|v| *v = T::zero());
                        }
                    }
                }
            }
        };
        let work = |(xc, mut oc): (ArrayView2<T>, ArrayViewMut2<T>)| match &wt {
            Some(wt) => {
                // GEMM and cosines tile by tile: each tile is still in cache
                // when its cosines overwrite it.
                for j0 in (0..m).step_by(COL_BLOCK) {
                    let j1 = (j0 + COL_BLOCK).min(m);
                    gemm(xc, wt.slice(s![.., j0..j1]), oc.slice_mut(s![.., j0..j1]));
                    finish(&mut oc, j0..j1);
                }
            }
            None => {
                let mut buf = Vec::new();
                let mut xbuf = Vec::new();
                for (xr, mut or) in xc.rows().into_iter().zip(oc.rows_mut()) {
                    let orow = or.as_slice_mut().expect("rows of a C-order array");
                    self.sorf_row(row_slice(xr, &mut xbuf), orow, &signs, &mut buf);
                }
                finish(&mut oc, 0..m);
            }
        };
        let xs = x.axis_chunks_iter(Axis(0), CHUNK_ROWS);
        let os = out.axis_chunks_iter_mut(Axis(0), CHUNK_ROWS);
        if par.is_parallel() {
            xs.into_par_iter().zip(os.into_par_iter()).for_each(work);
        } else {
            xs.zip(os).for_each(work);
        }
    }

    /// Allocating form of [`FourierFeatures::transform_into`].
    ///
    /// # Errors
    /// As [`Self::transform_into`] (the fields are checked before the
    /// output is allocated).
    pub fn transform<T: Real>(&self, x: ArrayView2<T>, par: Parallelism) -> Result<Array2<T>> {
        self.validate()?;
        let mut out = Array2::zeros((x.nrows(), self.n_components));
        self.transform_into(x, out.view_mut(), par)?;
        Ok(out)
    }
}

/// The SORF blocks of one row (`docs/math/fourier.rst`, "Frequency samplers",
/// `structured`): block `b` of `out` (`d'` values, a power of two; the last
/// block cut at `out.len()`) is `factor · H D₁ H D₂ H D₃ x` with `x`
/// zero-padded to `d'` and `D_k` the sign rows `3b + k` of `signs`
/// (`3·blocks × d'`, row-major). The sign and scale loops are plain slice
/// loops, vectorized by [`sorf_blocks`]; multiplying by `±1` and by `factor` is
/// one rounding at any vector width, so every instruction set gives the same
/// bits.
#[inline(always)]
fn sorf_blocks_body<T: Real>(
    x: &[T],
    out: &mut [T],
    signs: &[T],
    dp: usize,
    factor: T,
    buf: &mut Vec<T>,
) {
    buf.resize(dp, T::zero());
    let sign = |b: usize, k: usize| &signs[(3 * b + k) * dp..(3 * b + k + 1) * dp];
    for (b, o) in out.chunks_mut(dp).enumerate() {
        signed_transform(buf, x, sign(b, 2));
        for k in [1, 0] {
            buf.iter_mut().zip(sign(b, k)).for_each(|(v, s)| *v *= *s);
            transform(buf, Parallelism::Sequential);
        }
        o.iter_mut()
            .zip(buf.iter())
            .for_each(|(dst, v)| *dst = *v * factor);
    }
}

widest_simd! {
    /// [`sorf_blocks_body`] with the widest SIMD the CPU offers.
    fn sorf_blocks<T: Real>(
        x: &[T],
        out: &mut [T],
        signs: &[T],
        dp: usize,
        factor: T,
        buf: &mut Vec<T>,
    ) = sorf_blocks_body;
}

#[cfg(test)]
mod sorf_tests {
    use super::*;

    /// `H_n` (unnormalized Sylvester Hadamard matrix) entry `(i, j)`.
    fn hadamard(i: usize, j: usize) -> f64 {
        if (i & j).count_ones().is_multiple_of(2) {
            1.0
        } else {
            -1.0
        }
    }

    /// The SORF blocks by explicit matrices: `factor · H D₁ H D₂ H D₃ x`.
    fn oracle(x: &[f64], m: usize, signs: &[f64], dp: usize, factor: f64) -> Vec<f64> {
        let mut out = Vec::new();
        for b in 0..m.div_ceil(dp) {
            let mut v: Vec<f64> = (0..dp).map(|i| x.get(i).copied().unwrap_or(0.0)).collect();
            for k in [2, 1, 0] {
                let s = &signs[(3 * b + k) * dp..(3 * b + k + 1) * dp];
                let dv: Vec<f64> = v.iter().zip(s).map(|(a, s)| a * s).collect();
                v = (0..dp)
                    .map(|i| (0..dp).map(|j| hadamard(i, j) * dv[j]).sum())
                    .collect();
            }
            out.extend(v.iter().map(|a| a * factor));
        }
        out.truncate(m);
        out
    }

    #[test]
    fn sorf_blocks_match_explicit_hadamard_products_and_every_isa_gives_the_same_bits() {
        use rand::Rng as _;
        let mut rng = crate::rng::seeded(11);
        // d = 5 padded to 8 with a cut last block; d = 64 exactly.
        for (d, m) in [(5usize, 20usize), (64, 192)] {
            let dp = d.next_power_of_two();
            let blocks = m.div_ceil(dp);
            let signs: Vec<f64> = (0..3 * blocks * dp)
                .map(|_| if rng.random::<bool>() { 1.0 } else { -1.0 })
                .collect();
            let x: Vec<f64> = (0..d).map(|_| rng.random_range(-1.0..1.0)).collect();
            let factor = 0.37;
            let want = oracle(&x, m, &signs, dp, factor);
            let mut got = vec![0.0; m];
            let mut buf = Vec::new();
            sorf_blocks(&x, &mut got, &signs, dp, factor, &mut buf);
            for (g, w) in got.iter().zip(&want) {
                assert!((g - w).abs() < 1e-12 * dp as f64, "{g} vs {w}");
            }
            // The baseline build of the same loops: identical bits.
            let mut base = vec![0.0; m];
            sorf_blocks_body(&x, &mut base, &signs, dp, factor, &mut buf);
            assert_eq!(got, base);
            // f32: the same loops in single precision.
            let (x32, s32): (Vec<f32>, Vec<f32>) = (
                x.iter().map(|&v| v as f32).collect(),
                signs.iter().map(|&v| v as f32).collect(),
            );
            let mut g32 = vec![0.0f32; m];
            let mut b32 = Vec::new();
            sorf_blocks(&x32, &mut g32, &s32, dp, factor as f32, &mut b32);
            for (g, w) in g32.iter().zip(&want) {
                assert!((f64::from(*g) - w).abs() < 1e-5 * dp as f64, "{g} vs {w}");
            }
        }
    }
}
