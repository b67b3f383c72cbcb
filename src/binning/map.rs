//! A fitted random binning map: the grids and how their bins become columns.

use ndarray::ArrayView2;

use super::{hashed_transform, BinningGrids, CsrMatrix, Vocabulary};
use crate::error::{Error, Result};
use crate::real::Real;
use crate::threads::Parallelism;

/// How a [`BinningMap`] numbers the bins of its grids (see the module docs
/// of [`crate::binning`]).
#[derive(Clone, Debug)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum BinColumns {
    /// The bins the training rows occupied ([`Vocabulary`]).
    Vocabulary(Vocabulary),
    /// This many columns shared by all grids ([`hashed_transform`]).
    Hashed(u64),
}

/// A fitted random binning map (docs/math/binning.rst): the random grids
/// and the numbering of their bins.
///
/// ```
/// use ndarray::array;
/// use randfeat_rs::binning::{BinningGrids, BinningMap, Laplacian};
/// use randfeat_rs::Parallelism;
///
/// let grids = BinningGrids::draw(&Laplacian::new(0.7)?, 50, 2, 7)?;
/// let x = array![[0.3_f64, -0.2], [-0.1, 0.4]];
/// let (map, z) = BinningMap::fit(grids, x.view(), None, Parallelism::Rayon)?;
/// assert_eq!(map.transform(x.view(), Parallelism::Rayon)?, z.unwrap());
/// # Ok::<(), randfeat_rs::Error>(())
/// ```
#[derive(Clone, Debug)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct BinningMap {
    grids: BinningGrids,
    columns: BinColumns,
}

impl BinningMap {
    /// The map of `grids` fitted on `x`: with `hashing = None` the
    /// vocabulary of `x` ([`Vocabulary::fit`]), returned with the training
    /// features it computes on the way; with `Some(b)`, `b` hashed columns
    /// (`x` is not read, and no features are returned).
    ///
    /// # Errors
    /// `hashing = Some(0)`; the errors of [`Vocabulary::fit`].
    pub fn fit<T: Real>(
        grids: BinningGrids,
        x: ArrayView2<'_, T>,
        hashing: Option<u64>,
        par: Parallelism,
    ) -> Result<(Self, Option<CsrMatrix<T>>)> {
        match hashing {
            Some(0) => Err(Error::invalid("hashing", "must be >= 1, got 0")),
            Some(b) => Ok((
                Self {
                    grids,
                    columns: BinColumns::Hashed(b),
                },
                None,
            )),
            None => {
                let (vocab, z) = Vocabulary::fit(&grids, x, par)?;
                let columns = BinColumns::Vocabulary(vocab);
                Ok((Self { grids, columns }, Some(z)))
            }
        }
    }

    /// The map of `grids` with the bins numbered by `vocabulary`.
    #[cfg(feature = "python")]
    pub(crate) fn with_vocabulary(grids: BinningGrids, vocabulary: Vocabulary) -> Self {
        Self {
            grids,
            columns: BinColumns::Vocabulary(vocabulary),
        }
    }

    /// The grids.
    pub fn grids(&self) -> &BinningGrids {
        &self.grids
    }

    /// The numbering of the bins.
    pub fn columns(&self) -> &BinColumns {
        &self.columns
    }

    /// The number of output columns.
    pub fn n_columns(&self) -> u64 {
        match &self.columns {
            BinColumns::Vocabulary(v) => v.n_columns(),
            BinColumns::Hashed(b) => *b,
        }
    }

    /// `z(x)` ([`Vocabulary::transform`] or [`hashed_transform`]).
    ///
    /// # Errors
    /// Those of the transform (wrong width, non-finite input, bin
    /// coordinates beyond `2^62`).
    pub fn transform<T: Real>(
        &self,
        x: ArrayView2<'_, T>,
        par: Parallelism,
    ) -> Result<CsrMatrix<T>> {
        match &self.columns {
            BinColumns::Vocabulary(v) => v.transform(&self.grids, x, par),
            BinColumns::Hashed(b) => hashed_transform(&self.grids, x, *b, par),
        }
    }
}
