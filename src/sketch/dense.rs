//! Unstructured Gaussian / Rademacher sketches (`docs/math/sketches.rst`, "The
//! generic sketch of degree n"): one dense weight matrix per factor, applied to
//! row chunks with a GEMM.

use std::any::Any;

use ndarray::linalg::general_mat_mul;
use ndarray::{Array2, ArrayView2, ArrayViewMut2, CowArray, Ix2, Zip};
use rand::Rng as _;
use rand_distr::StandardNormal;

use super::{for_row_chunks, SketchKind};
use crate::error::{Error, Result};
use crate::real::Real;
use crate::threads::Parallelism;

/// Rows per GEMM (fixed, so results do not depend on the thread count).
const CHUNK: usize = 64;

/// The weight matrices `W_1 … W_n`. Real sketches: `D × d`. Complex
/// sketches: `2D_c × d`, real parts in rows `0..D_c`, imaginary parts in
/// rows `D_c..2D_c`, so one GEMM yields the [Re | Im] layout of
/// `docs/math/conventions.rst`.
#[derive(Clone, Debug)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub(super) struct Dense {
    weights: Vec<Array2<f64>>,
}

impl Dense {
    /// Draws the weights: factor by factor, feature by feature, entry by
    /// entry. Laws (`docs/math/sketches.rst`, "The generic sketch of degree
    /// n"): N(0,1); ±1; (a + ib)/√2; uniform on {1, i, −1, −i}.
    /// Errors: weights the system cannot allocate (naming `n_components`).
    pub(super) fn draw(
        kind: SketchKind,
        complex: bool,
        degree: u32,
        dim: usize,
        n_features: usize,
        rng: &mut crate::rng::Rng,
    ) -> Result<Self> {
        let what = format!("the sketch's weights ({degree} x {n_features} x {dim} float64)");
        let parts = if complex { 2 } else { 1 };
        let rows = crate::alloc::checked_count("n_components", &what, &[n_features, parts])?;
        let weights = (0..degree)
            .map(|_| {
                let mut w = crate::alloc::try_zeros2::<f64>("n_components", &what, rows, dim)?;
                for i in 0..n_features {
                    for a in 0..dim {
                        let (re, im) = draw_entry(kind, complex, rng);
                        w[[i, a]] = re;
                        if complex {
                            w[[n_features + i, a]] = im;
                        }
                    }
                }
                Ok(w)
            })
            .collect::<Result<_>>()?;
        Ok(Self { weights })
    }

    /// Checks one `rows × dim` matrix of finite weights per factor (see
    /// [`super::PolySketch::validate`]).
    ///
    /// # Errors
    /// [`Error::ShapeMismatch`] naming `weights` for a count or a shape
    /// other than these; [`Error::InvalidParameter`] naming `weights` for
    /// non-finite weights.
    pub(super) fn check(&self, degree: u32, rows: usize, dim: usize) -> Result<()> {
        if self.weights.len() != degree as usize {
            return Err(Error::ShapeMismatch {
                name: "number of weights matrices (the degree)",
                expected: degree as usize,
                got: self.weights.len(),
            });
        }
        for w in &self.weights {
            if w.nrows() != rows {
                return Err(Error::ShapeMismatch {
                    name: "rows of weights (n_features, twice for complex weights)",
                    expected: rows,
                    got: w.nrows(),
                });
            }
            if w.ncols() != dim {
                return Err(Error::ShapeMismatch {
                    name: "columns of weights (dim)",
                    expected: dim,
                    got: w.ncols(),
                });
            }
            if !w.iter().all(|v| v.is_finite()) {
                return Err(Error::invalid("weights", "must be finite"));
            }
        }
        Ok(())
    }

    /// The weight matrices (see the type's docs for the layout).
    pub(super) fn weights(&self) -> &[Array2<f64>] {
        &self.weights
    }

    /// `φ(x) = (W_1 x ⊙ … ⊙ W_n x)/√D` (complex products for complex weights).
    /// The factor projections `W_j x` of every row (see
    /// [`super::PolySketch::factor_projections_into`]): factor `j` in
    /// columns `j·w … (j+1)·w − 1`, `w` the rows of `W_j`.
    pub(super) fn project(&self, x: ArrayView2<f64>, mut out: ArrayViewMut2<f64>) {
        for (j, w) in self.weights.iter().enumerate() {
            let cols = w.nrows();
            let mut o = out.slice_mut(ndarray::s![.., j * cols..(j + 1) * cols]);
            general_mat_mul(1.0, &x, &w.t(), 0.0, &mut o);
        }
    }

    /// `docs/math/sketches.rst`, "The generic sketch of degree n" for every
    /// row: the products of the `degree` projections, scaled by `1/√D`.
    /// Returns whether every feature is finite.
    pub(super) fn transform<T: Real>(
        &self,
        complex: bool,
        n_features: usize,
        x: ArrayView2<T>,
        out: ArrayViewMut2<T>,
        par: Parallelism,
    ) -> bool {
        let w: Vec<CowArray<'_, T, Ix2>> = self.weights.iter().map(as_real::<T>).collect();
        let scale = T::from_f64_lossy(1.0 / (n_features as f64).sqrt());
        let cols = w[0].nrows();
        for_row_chunks(
            x,
            out,
            CHUNK,
            par,
            || Array2::<T>::zeros((0, 0)),
            |y, xc, mut oc| {
                let r = xc.nrows();
                general_mat_mul(T::one(), &xc, &w[0].t(), T::zero(), &mut oc);
                if y.nrows() != r {
                    *y = Array2::zeros((r, cols));
                }
                for wj in &w[1..] {
                    general_mat_mul(T::one(), &xc, &wj.t(), T::zero(), y);
                    if complex {
                        let h = n_features;
                        for (mut o, yr) in oc.rows_mut().into_iter().zip(y.rows()) {
                            for i in 0..h {
                                let (a, b) = (o[i], o[h + i]);
                                let (c, d) = (yr[i], yr[h + i]);
                                o[i] = a * c - b * d;
                                o[h + i] = a * d + b * c;
                            }
                        }
                    } else {
                        Zip::from(&mut oc).and(&*y).for_each(|o, &v| *o *= v);
                    }
                }
                oc.mapv_inplace(|v| v * scale);
            },
        )
    }
}

/// One weight entry `(Re z, Im z)` of the law of `kind`
/// (`docs/math/sketches.rst`, "The generic sketch of degree n").
fn draw_entry(kind: SketchKind, complex: bool, rng: &mut crate::rng::Rng) -> (f64, f64) {
    match (kind, complex) {
        (SketchKind::Gaussian, false) => (rng.sample(StandardNormal), 0.0),
        (SketchKind::Gaussian, true) => {
            let h = std::f64::consts::FRAC_1_SQRT_2;
            let a: f64 = rng.sample(StandardNormal);
            let b: f64 = rng.sample(StandardNormal);
            (a * h, b * h)
        }
        (_, false) => (if rng.random::<bool>() { 1.0 } else { -1.0 }, 0.0),
        (_, true) => match rng.random_range(0..4u8) {
            0 => (1.0, 0.0),
            1 => (0.0, 1.0),
            2 => (-1.0, 0.0),
            _ => (0.0, -1.0),
        },
    }
}

/// Borrows an `f64` matrix as `T` without a copy when `T = f64`, else
/// converts it (rounding to `f32`).
fn as_real<T: Real>(a: &Array2<f64>) -> CowArray<'_, T, Ix2> {
    match (a as &dyn Any).downcast_ref::<Array2<T>>() {
        Some(same) => CowArray::from(same.view()),
        None => CowArray::from(a.mapv(T::from_f64_lossy)),
    }
}
