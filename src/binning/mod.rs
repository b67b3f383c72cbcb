//! Random binning features (`docs/math/binning.rst`; Rahimi & Recht 2007,
//! section 3): a sparse map `z` with `z(x)ᵀz(y) = (1/P) Σ_p 1[b_p(x) = b_p(y)]`,
//! whose expectation is the Laplacian kernel `exp(−‖x − y‖₁ / l)`.
//!
//! Grid `p` has, per dimension `a`, a pitch `δ_{p,a}` drawn from the kernel's
//! [`PitchDistribution`] (`Gamma(2, l)` for the Laplacian) and a shift
//! `u_{p,a} ~ U[0, δ_{p,a})`. A row's bin in grid `p` is the integer vector
//! `b_{p,a}(x) = ⌊(x_a − u_{p,a}) / δ_{p,a}⌋` (64-bit; [`Error`] when
//! `|(x_a − u)/δ|` exceeds `2^62`). The bin vector is reduced to one 64-bit
//! key with a seeded SplitMix64 chain ([`bin_key`]):
//! `h ← mix(seed ⊕ p)`, then `h ← mix(h ⊕ b_{p,a})` for every dimension, with
//! grids numbered `p = 1…P` as in `docs/math/binning.rst`. Every stored value
//! is `1/√P`.
//!
//! Two ways to turn keys into columns:
//! - [`Vocabulary`] (the default in Python): [`Vocabulary::fit`] numbers the
//!   occupied bins of each grid in order of first appearance over the
//!   training rows; grid `p` owns columns `offset_p … offset_{p+1} − 1`.
//!   Training rows get exactly `P` non-zeros. At transform, **a bin that no
//!   training row occupied contributes nothing** (the row has fewer than `P`
//!   non-zeros): kernel estimates between a new row and any training row stay
//!   exact; only two new rows sharing an unseen bin lose that collision.
//!   Bins are identified by their 64-bit key, so two distinct bin vectors of
//!   one grid merge only if their keys collide (probability about
//!   `|V_p|² / 2^65`, e.g. `10^-9` for a million occupied bins).
//! - [`hashed_transform`]: the hashing trick with `B` columns in total, column
//!   `key mod B`, stateless. Two non-zeros of a row may share a column (their
//!   values add), which biases `E[z(x)ᵀz(y)]` to `k + (1 − k)/B + (P − 1)/B`;
//!   keep `B ≫ P` (Python warns when `B < 100 P`).
//!
//! [`BinningMap`] holds the grids with either numbering (what the Python
//! estimator keeps). Output is [`CsrMatrix`] (int32 indices when they fit,
//! int64 otherwise).
//! All work is parallel over rows (fit: over grids), and results are
//! bit-identical for any number of threads. Inputs are `f32` or `f64`; bins
//! are computed in `f64` (exact widening), values are returned in the input's
//! precision.
//!
//! ## Adding another separable kernel
//! Any kernel `k(x, y) = Π_a k_1(|x_a − y_a|)` with `k_1` convex on
//! `[0, ∞)` and `k_1(∞) = 0` has a random binning map: the pitch density is
//! `p(δ) = δ k_1''(δ)`. Implement [`PitchDistribution`] for a struct that
//! samples it (validating the kernel's parameters in its constructor), add
//! its name to [`kernel_by_name`], and add a `kernel` option in Python
//! (`_parameter_constraints` of `RandomBinningFeatures`). Nothing else
//! changes: grids, keys, vocabularies and hashing are kernel-independent.
//!
//! ```
//! use ndarray::array;
//! use randfeat_rs::binning::{BinningGrids, Laplacian, Vocabulary};
//! use randfeat_rs::Parallelism;
//!
//! let grids = BinningGrids::draw(&Laplacian::new(0.7)?, 200, 3, 42)?;
//! let x = array![[0.3_f64, -0.2, 0.5], [-0.1, 0.4, 0.25]];
//! let (vocab, z) = Vocabulary::fit(&grids, x.view(), Parallelism::Rayon)?;
//! let z = z.to_dense();
//! let k_hat = z.row(0).dot(&z.row(1)); // ≈ exp(-1.25 / 0.7) = 0.168
//! assert!((k_hat - 0.1677).abs() < 0.15);
//! assert_eq!(vocab.transform(&grids, x.view(), Parallelism::Rayon)?.to_dense(), z);
//! # Ok::<(), randfeat_rs::Error>(())
//! ```

mod csr;
mod kernel;
mod map;

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use ndarray::{Array2, ArrayView2};
use rand::Rng as _;
use rayon::prelude::*;

pub use csr::{CsrIndex, CsrMatrix};
pub use kernel::{kernel_by_name, Laplacian, PitchDistribution};
pub use map::{BinColumns, BinningMap};

use crate::error::{Error, Result};
use crate::progress::Monitor;
use crate::real::Real;
use crate::rng::substream;
use crate::threads::Parallelism;
use csr::EMPTY;

/// Largest accepted `|(x_a − u)/δ|`: bin coordinates stay far from `i64` overflow.
pub const MAX_BIN_COORDINATE: f64 = (1u64 << 62) as f64;

/// Rows per parallel task when computing bin keys.
const BLOCK_ROWS: usize = 1024;

/// The SplitMix64 finalizer (`docs/math/binning.rst`, "Columns of the sparse
/// output"), wrapping `u64` arithmetic.
#[inline(always)]
pub fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The key of bin vector `bins` of grid `grid` (numbered from 1):
/// `h ← mix(seed ⊕ grid)`, then `h ← mix(h ⊕ (b_a as u64))` for each dimension.
pub fn bin_key(seed: u64, grid: u64, bins: &[i64]) -> u64 {
    bins.iter()
        .fold(mix(seed ^ grid), |h, &b| mix(h ^ b as u64))
}

/// `⌊t⌋` as `i64` for `|t| ≤ 2^62`, without a libm call: truncation, then
/// one step down for negative non-integers (exact: `i as f64` is `t`'s
/// integer part, representable whenever `t` is). Defined for every `t`:
/// the row kernel computes it before its range check and discards the
/// value beyond `2^62` and for NaN, so the step down wraps instead of
/// overflowing at `t < −2^63`.
#[inline(always)]
fn floor_i64(t: f64) -> i64 {
    let i = t as i64;
    i.wrapping_sub(((i as f64) > t) as i64)
}

/// `P` random grids over `R^d` (`docs/math/binning.rst`, "Definition"):
/// pitches, shifts and the seed of the bin-key hash. Drawn once at fit;
/// everything after is deterministic. Stored (feature "serde") as its
/// pitches, shifts and hash seed, checked on loading as
/// [`BinningGrids::from_parts`] does.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize, serde::Deserialize),
    serde(into = "GridParts", try_from = "GridParts")
)]
pub struct BinningGrids {
    pitches: Array2<f64>,
    shifts: Array2<f64>,
    hash_seed: u64,
    // Dimension-major copies (`d × P`) for the row kernel.
    pitches_t: Vec<f64>,
    shifts_t: Vec<f64>,
}

/// The stored form of [`BinningGrids`].
#[cfg(feature = "serde")]
#[derive(serde::Serialize, serde::Deserialize)]
struct GridParts {
    pitches: Array2<f64>,
    shifts: Array2<f64>,
    hash_seed: u64,
}

#[cfg(feature = "serde")]
impl From<BinningGrids> for GridParts {
    fn from(g: BinningGrids) -> Self {
        GridParts {
            pitches: g.pitches,
            shifts: g.shifts,
            hash_seed: g.hash_seed,
        }
    }
}

#[cfg(feature = "serde")]
impl TryFrom<GridParts> for BinningGrids {
    type Error = Error;

    fn try_from(p: GridParts) -> Result<Self> {
        BinningGrids::from_parts(p.pitches, p.shifts, p.hash_seed)
    }
}

/// A `rows × cols` array of zeros for grid parameters, allocated fallibly
/// (an error naming `n_grids` instead of an abort).
fn grid_array(rows: usize, cols: usize) -> Result<Array2<f64>> {
    crate::alloc::try_zeros2(
        "n_grids",
        &format!("the grids' pitches or shifts ({rows} x {cols} float64)"),
        rows,
        cols,
    )
}

impl BinningGrids {
    /// Draws `n_grids` grids over `n_features` dimensions from the stream of
    /// `seed`: pitches from `kernel` (substream 0, grid by grid, dimension by
    /// dimension), shifts `u = δ · U[0, 1)` (substream 1, same order), and the
    /// hash seed (substream 2).
    pub fn draw<K: PitchDistribution + ?Sized>(
        kernel: &K,
        n_grids: usize,
        n_features: usize,
        seed: u64,
    ) -> Result<Self> {
        if n_grids < 1 {
            return Err(Error::invalid("n_grids", "must be >= 1, got 0"));
        }
        // The pitches and shifts, and their transposed copies.
        crate::alloc::check_alloc(
            "n_grids",
            &format!(
                "the {n_grids} grids' pitches and shifts (4 x {n_grids} x {n_features} float64)"
            ),
            &[4, n_grids, n_features],
            8,
        )?;
        let mut rng = substream(seed, 0);
        let mut pitches = grid_array(n_grids, n_features)?;
        pitches
            .iter_mut()
            .for_each(|d| *d = kernel.sample_pitch(&mut rng));
        if let Some(d) = pitches.iter().find(|d| !d.is_finite()) {
            return Err(Error::invalid(
                "length_scale",
                format!(
                    "a grid pitch drawn at this length scale is {d}: the pitches scale with \
                     the length scale and overflow the float range; rescale X and the length \
                     scale together"
                ),
            ));
        }
        let mut rng = substream(seed, 1);
        let mut shifts = grid_array(n_grids, n_features)?;
        shifts
            .iter_mut()
            .zip(&pitches)
            .for_each(|(u, &d)| *u = d * rng.random::<f64>());
        let hash_seed = substream(seed, 2).random::<u64>();
        Self::from_parts(pitches, shifts, hash_seed)
    }

    /// Grids from stored parameters (`P × d` pitches and shifts), e.g. after
    /// unpickling. Pitches must be finite and `> 0`, shifts finite and in
    /// `[0, δ)` (shifts equal to `δ` after rounding are accepted).
    pub fn from_parts(pitches: Array2<f64>, shifts: Array2<f64>, hash_seed: u64) -> Result<Self> {
        if pitches.nrows() < 1 {
            return Err(Error::invalid("n_grids", "must be >= 1, got 0"));
        }
        if shifts.dim() != pitches.dim() {
            return Err(Error::invalid(
                "shifts",
                format!(
                    "must have the shape of pitches {:?}, got {:?}",
                    pitches.dim(),
                    shifts.dim()
                ),
            ));
        }
        if !pitches.iter().all(|d| d.is_finite() && *d > 0.0) {
            return Err(Error::invalid("pitches", "must be finite and > 0"));
        }
        if !pitches
            .iter()
            .zip(shifts.iter())
            .all(|(d, u)| u.is_finite() && *u >= 0.0 && u <= d)
        {
            return Err(Error::invalid("shifts", "must lie in [0, pitch)"));
        }
        let transposed = |a: &Array2<f64>| -> Result<Vec<f64>> {
            let mut t = grid_array(a.ncols(), a.nrows())?;
            t.assign(&a.t());
            Ok(t.into_raw_vec_and_offset().0)
        };
        let pitches_t = transposed(&pitches)?;
        let shifts_t = transposed(&shifts)?;
        Ok(Self {
            pitches,
            shifts,
            hash_seed,
            pitches_t,
            shifts_t,
        })
    }

    /// Number of grids `P`.
    pub fn n_grids(&self) -> usize {
        self.pitches.nrows()
    }

    /// Input dimension `d`.
    pub fn n_features(&self) -> usize {
        self.pitches.ncols()
    }

    /// Pitches `δ`, `P × d`.
    pub fn pitches(&self) -> &Array2<f64> {
        &self.pitches
    }

    /// Shifts `u`, `P × d`.
    pub fn shifts(&self) -> &Array2<f64> {
        &self.shifts
    }

    /// Seed of the bin-key hash.
    pub fn hash_seed(&self) -> u64 {
        self.hash_seed
    }

    /// The bin vector `b_p(x) = ⌊(x − u_p) / δ_p⌋` of one row in grid `p`
    /// (0-based here). Errors on non-finite input, a wrong length, a grid
    /// `p` beyond the drawn ones, or a coordinate beyond `±2^62`.
    pub fn bins<T: Real>(&self, x: &[T], p: usize) -> Result<Vec<i64>> {
        self.check_width(x.len())?;
        if p >= self.pitches.nrows() {
            return Err(Error::invalid(
                "p",
                format!(
                    "grid {p} does not exist: there are {} grids, numbered from 0",
                    self.pitches.nrows()
                ),
            ));
        }
        x.iter()
            .enumerate()
            .map(|(a, &v)| {
                let t = self.coordinate(v.to_f64_exact(), p, a)?;
                Ok(floor_i64(t))
            })
            .collect()
    }

    fn check_width(&self, got: usize) -> Result<()> {
        Error::check_n_features(self.n_features(), got)
    }

    /// `(x − u_{p,a}) / δ_{p,a}`, checked.
    fn coordinate(&self, x: f64, p: usize, a: usize) -> Result<f64> {
        if !x.is_finite() {
            return Err(Error::NonFinite { name: "X" });
        }
        let (delta, u) = (self.pitches[[p, a]], self.shifts[[p, a]]);
        let t = (x - u) / delta;
        if t.abs() > MAX_BIN_COORDINATE {
            return Err(Error::invalid(
                "X",
                format!(
                    "bin coordinate (x - u) / pitch = ({x:?} - {u:?}) / {delta:?} = {t:e} (grid {p}, \
                     feature {a}) exceeds 2^62 in magnitude, so it does not fit in 64 bits; \
                     scale X down or use a larger length_scale"
                ),
            ));
        }
        Ok(t)
    }

    /// The bin keys of every row: `n × P`, row-major (`keys[i·P + p]` is the
    /// key of row `i` in grid `p + 1`, see [`bin_key`]). Parallel over rows.
    pub fn keys<T: Real>(&self, x: ArrayView2<'_, T>, par: Parallelism) -> Result<Vec<u64>> {
        self.check_width(x.ncols())?;
        let mut keys = self.key_buffer(x.nrows())?;
        self.keys_into(x, &mut keys, par)?;
        Ok(keys)
    }

    /// A zeroed buffer for the keys of `rows` rows ([`Self::keys_into`]).
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] naming `n_grids` when it exceeds the
    /// memory available.
    pub(crate) fn key_buffer(&self, rows: usize) -> Result<Vec<u64>> {
        let np = self.n_grids();
        crate::alloc::try_zeroed_vec(
            "n_grids",
            &format!("the bin keys of {rows} rows in {np} grids (uint64)"),
            rows.saturating_mul(np),
        )
    }

    /// [`Self::keys`] written into `keys` (`x.nrows() × P`, row-major).
    ///
    /// # Errors
    /// As [`Self::keys`].
    pub(crate) fn keys_into<T: Real>(
        &self,
        x: ArrayView2<'_, T>,
        keys: &mut [u64],
        par: Parallelism,
    ) -> Result<()> {
        self.check_width(x.ncols())?;
        let np = self.n_grids();
        let block = |(b, out): (usize, &mut [u64])| -> Result<()> {
            let mut h = vec![0u64; np];
            for (r, out_row) in out.chunks_mut(np).enumerate() {
                self.row_keys(x.row(b * BLOCK_ROWS + r), &mut h)?;
                out_row.copy_from_slice(&h);
            }
            Ok(())
        };
        if par.is_parallel() {
            keys.par_chunks_mut(np * BLOCK_ROWS)
                .enumerate()
                .try_for_each(block)
        } else {
            keys.chunks_mut(np * BLOCK_ROWS)
                .enumerate()
                .try_for_each(block)
        }
    }

    /// Keys of one row into `h` (length `P`): the hot kernel. Dimensions in the
    /// outer loop, grids in the inner one, so the `P` hash chains are
    /// independent and overlap in the pipeline.
    #[inline]
    fn row_keys<T: Real>(&self, row: ndarray::ArrayView1<'_, T>, h: &mut [u64]) -> Result<()> {
        let np = h.len();
        for (p, hp) in h.iter_mut().enumerate() {
            *hp = mix(self.hash_seed ^ (p as u64 + 1));
        }
        let mut ok = true;
        for (a, &v) in row.iter().enumerate() {
            let xa = v.to_f64_exact();
            let deltas = &self.pitches_t[a * np..(a + 1) * np];
            let shifts = &self.shifts_t[a * np..(a + 1) * np];
            for ((hp, &d), &u) in h.iter_mut().zip(deltas).zip(shifts) {
                let t = (xa - u) / d;
                // False for NaN too, so non-finite input is caught here.
                ok &= t.abs() <= MAX_BIN_COORDINATE;
                *hp = mix(*hp ^ floor_i64(t) as u64);
            }
        }
        if ok {
            return Ok(());
        }
        // Slow path: find the offending entry for the error message.
        for (a, &v) in row.iter().enumerate() {
            for p in 0..np {
                self.coordinate(v.to_f64_exact(), p, a)?;
            }
        }
        Err(Error::Internal("bin coordinate check disagreed".into()))
    }
}

/// A pass-through hasher: bin keys are already SplitMix64 outputs.
#[derive(Default, Clone, Copy)]
struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8) | u64::from(b);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
}

type KeyMap = HashMap<u64, u64, BuildHasherDefault<KeyHasher>>;

/// The occupied bins of the training rows, per grid, numbered in order of
/// first appearance (the vocabulary mode of `docs/math/binning.rst`, "Columns
/// of the sparse output"). Column `j` is the bin whose key is `keys()[j]`; grid
/// `p` owns columns `offsets()[p] .. offsets()[p + 1]`. Stored (feature
/// "serde") as its keys and offsets; the lookup tables are rebuilt on loading
/// ([`Vocabulary::from_parts`]).
#[derive(Clone, Debug)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize, serde::Deserialize),
    serde(into = "VocabularyParts", try_from = "VocabularyParts")
)]
pub struct Vocabulary {
    keys: Vec<u64>,
    offsets: Vec<u64>,
    tables: Vec<KeyMap>,
}

/// The stored form of [`Vocabulary`].
#[cfg(feature = "serde")]
#[derive(serde::Serialize, serde::Deserialize)]
struct VocabularyParts {
    keys: Vec<u64>,
    offsets: Vec<u64>,
}

#[cfg(feature = "serde")]
impl From<Vocabulary> for VocabularyParts {
    fn from(v: Vocabulary) -> Self {
        VocabularyParts {
            keys: v.keys,
            offsets: v.offsets,
        }
    }
}

#[cfg(feature = "serde")]
impl TryFrom<VocabularyParts> for Vocabulary {
    type Error = Error;

    fn try_from(p: VocabularyParts) -> Result<Self> {
        Vocabulary::from_parts(p.keys, p.offsets)
    }
}

impl Vocabulary {
    /// Learns the vocabulary of `x` and returns it with the training features
    /// `z(x)` (exactly `P` values `1/√P` per row). Parallel over grids for the
    /// numbering, over rows for the rest.
    pub fn fit<T: Real>(
        grids: &BinningGrids,
        x: ArrayView2<'_, T>,
        par: Parallelism,
    ) -> Result<(Self, CsrMatrix<T>)> {
        let keys = grids.keys(x, par)?;
        Self::from_keys(keys, grids.n_grids(), par, &Monitor::new())
    }

    /// [`Self::fit`] from the bin keys of the training rows
    /// ([`BinningGrids::keys`] of `P = n_grids` grids).
    ///
    /// # Errors
    /// [`Error::Interrupted`] once `monitor` is cancelled (checked per
    /// block of rows).
    pub(crate) fn from_keys<T: Real>(
        mut keys: Vec<u64>,
        np: usize,
        par: Parallelism,
        monitor: &Monitor,
    ) -> Result<(Self, CsrMatrix<T>)> {
        let n = keys.len().checked_div(np).unwrap_or(0);
        let number = |p: usize| -> Result<(KeyMap, Vec<u64>, Vec<u64>)> {
            let mut table = KeyMap::default();
            let mut order = Vec::new();
            let mut local = Vec::with_capacity(n);
            for i in 0..n {
                if i % BLOCK_ROWS == 0 {
                    monitor.check()?;
                }
                let key = keys[i * np + p];
                let next = order.len() as u64;
                let id = *table.entry(key).or_insert_with(|| {
                    order.push(key);
                    next
                });
                local.push(id);
            }
            Ok((table, order, local))
        };
        let per_grid: Vec<_> = if par.is_parallel() {
            (0..np).into_par_iter().map(number).collect::<Result<_>>()?
        } else {
            (0..np).map(number).collect::<Result<_>>()?
        };
        let mut offsets = Vec::with_capacity(np + 1);
        offsets.push(0u64);
        for (_, order, _) in &per_grid {
            offsets.push(offsets[offsets.len() - 1] + order.len() as u64);
        }
        // Overwrite the keys with the global column of each (row, grid).
        let assign = |(b, out): (usize, &mut [u64])| -> Result<()> {
            monitor.check()?;
            for (r, row) in out.chunks_mut(np).enumerate() {
                for (p, slot) in row.iter_mut().enumerate() {
                    *slot = offsets[p] + per_grid[p].2[b * BLOCK_ROWS + r];
                }
            }
            Ok(())
        };
        if par.is_parallel() {
            keys.par_chunks_mut(np * BLOCK_ROWS)
                .enumerate()
                .try_for_each(assign)?;
        } else {
            keys.chunks_mut(np * BLOCK_ROWS)
                .enumerate()
                .try_for_each(assign)?;
        }
        let n_cols = offsets[np];
        let z = csr::from_slots(&mut keys, np, n_cols, scale::<T>(np), par, monitor)?;
        let mut all_keys = Vec::with_capacity(n_cols as usize);
        let mut tables = Vec::with_capacity(np);
        for (table, order, _) in per_grid {
            all_keys.extend_from_slice(&order);
            tables.push(table);
        }
        Ok((
            Self {
                keys: all_keys,
                offsets,
                tables,
            },
            z,
        ))
    }

    /// A vocabulary from stored arrays (`keys` in column order, `offsets` of
    /// length `P + 1`, from [`Vocabulary::keys`] and [`Vocabulary::offsets`]).
    pub fn from_parts(keys: Vec<u64>, offsets: Vec<u64>) -> Result<Self> {
        let valid = offsets.len() >= 2
            && offsets[0] == 0
            && offsets.windows(2).all(|w| w[0] <= w[1])
            && offsets[offsets.len() - 1] == keys.len() as u64;
        if !valid {
            return Err(Error::invalid(
                "offsets",
                "must start at 0, be non-decreasing and end at the number of keys",
            ));
        }
        let tables: Vec<KeyMap> = offsets
            .par_windows(2)
            .map(|w| {
                keys[w[0] as usize..w[1] as usize]
                    .iter()
                    .enumerate()
                    .map(|(j, &k)| (k, j as u64))
                    .collect()
            })
            .collect();
        let distinct: usize = tables.iter().map(|t| t.len()).sum();
        if distinct != keys.len() {
            return Err(Error::invalid(
                "keys",
                "a grid's vocabulary lists the same key twice",
            ));
        }
        Ok(Self {
            keys,
            offsets,
            tables,
        })
    }

    /// Keys of the bins in column order.
    pub fn keys(&self) -> &[u64] {
        &self.keys
    }

    /// Column offsets of the grids (`P + 1` entries).
    pub fn offsets(&self) -> &[u64] {
        &self.offsets
    }

    /// Number of columns (occupied bins over all grids).
    pub fn n_columns(&self) -> u64 {
        self.keys.len() as u64
    }

    /// `z(x)` for new rows: each grid contributes `1/√P` in the column of the
    /// row's bin if a training row occupied it, nothing otherwise.
    pub fn transform<T: Real>(
        &self,
        grids: &BinningGrids,
        x: ArrayView2<'_, T>,
        par: Parallelism,
    ) -> Result<CsrMatrix<T>> {
        let np = grids.n_grids();
        if self.tables.len() != np {
            return Err(Error::invalid(
                "vocabulary",
                format!("has {} grids, the grids have {np}", self.tables.len()),
            ));
        }
        let mut keys = grids.keys(x, par)?;
        let lookup = |row: &mut [u64]| {
            for ((slot, table), offset) in row.iter_mut().zip(&self.tables).zip(&self.offsets) {
                // The tables hold ids local to their grid.
                *slot = table.get(slot).map_or(EMPTY, |j| offset + j);
            }
        };
        if par.is_parallel() {
            keys.par_chunks_mut(np).for_each(lookup);
        } else {
            keys.chunks_mut(np).for_each(lookup);
        }
        csr::from_slots(
            &mut keys,
            np,
            self.n_columns(),
            scale::<T>(np),
            par,
            &Monitor::new(),
        )
    }
}

/// `z(x)` in hashing mode: `n_columns = B` columns shared by all grids; grid
/// `p`'s value `1/√P` goes to column `key mod B` (values of one row that land
/// in the same column add). Stateless given the grids.
pub fn hashed_transform<T: Real>(
    grids: &BinningGrids,
    x: ArrayView2<'_, T>,
    n_columns: u64,
    par: Parallelism,
) -> Result<CsrMatrix<T>> {
    if n_columns < 1 {
        return Err(Error::invalid("hashing", "must be >= 1, got 0"));
    }
    let np = grids.n_grids();
    let mut keys = grids.keys(x, par)?;
    if par.is_parallel() {
        keys.par_iter_mut().for_each(|k| *k %= n_columns);
    } else {
        keys.iter_mut().for_each(|k| *k %= n_columns);
    }
    csr::from_slots(
        &mut keys,
        np,
        n_columns,
        scale::<T>(np),
        par,
        &Monitor::new(),
    )
}

/// The stored value `1/√P`.
fn scale<T: Real>(n_grids: usize) -> T {
    T::from_f64_lossy(1.0 / (n_grids as f64).sqrt())
}

#[cfg(test)]
mod tests;
