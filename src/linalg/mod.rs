//! Dense linear algebra on faer: a single-threaded GEMM for `f32` and `f64`
//! (the feature maps' row blocks, the Maclaurin pair statistics) and, for the
//! GP code (`docs/math/gp.rst`) in `f64`, Cholesky with the jitter ladder of
//! `docs/math/gp.rst`, "Exact GP", triangular solves, and the
//! symmetric rank-k accumulation `G += ΦᵀΦ`, `b += Φᵀy` of `docs/math/gp.rst`,
//! "Feature-space GP" over a row chunk through the hand-written packed Gram
//! kernel ([`syrk`]), which also serves the localized GP's per-centroid blocks.
mod blocked;
pub mod syrk;

pub(crate) use blocked::{matmul_monitored, panel_width};

use faer::dyn_stack::{MemBuffer, MemStack};
use faer::{Mat, MatMut, MatRef, Par};
use ndarray::{Array2, ArrayView1, ArrayView2, ArrayViewMut1, ArrayViewMut2, ShapeBuilder};

use crate::error::{Error, Result};
use crate::progress::Monitor;
use crate::real::{cast_view, cast_view_mut, Real};
use crate::threads::Parallelism;

/// The faer parallelism for a [`Parallelism`]: all threads of the current
/// rayon pool, or sequential.
pub fn faer_par(par: Parallelism) -> Par {
    if par.is_parallel() {
        Par::rayon(rayon::current_num_threads())
    } else {
        Par::Seq
    }
}

/// A faer view of an ndarray view (any strides, no copy).
pub fn as_faer<T>(a: ArrayView2<'_, T>) -> MatRef<'_, T> {
    let (rows, cols) = a.dim();
    let s = a.strides();
    // SAFETY: the pointer, shape and element strides describe exactly the
    // memory the ndarray view borrows for the same lifetime.
    unsafe { MatRef::from_raw_parts(a.as_ptr(), rows, cols, s[0], s[1]) }
}

/// A mutable faer view of a mutable ndarray view (any strides, no copy).
pub fn as_faer_mut<T>(mut a: ArrayViewMut2<'_, T>) -> MatMut<'_, T> {
    let (rows, cols) = a.dim();
    let (s0, s1) = (a.strides()[0], a.strides()[1]);
    // SAFETY: as in `as_faer`; the view is borrowed mutably and uniquely.
    unsafe { MatMut::from_raw_parts_mut(a.as_mut_ptr(), rows, cols, s0, s1) }
}

/// `c <- a b` on one thread through faer's GEMM (`T` is `f32` or `f64`).
pub(crate) fn gemm<T: Real>(a: ArrayView2<T>, b: ArrayView2<T>, mut c: ArrayViewMut2<T>) {
    if let (Some(a), Some(b), Some(c)) = (cast_view(a), cast_view(b), cast_view_mut(c.view_mut())) {
        faer_gemm::<f64>(a, b, c);
    } else if let (Some(a), Some(b), Some(c)) =
        (cast_view(a), cast_view(b), cast_view_mut(c.view_mut()))
    {
        faer_gemm::<f32>(a, b, c);
    } else {
        ndarray::linalg::general_mat_mul(T::one(), &a, &b, T::zero(), &mut c);
    }
}

/// `c <- a b` on one thread through faer's GEMM.
fn faer_gemm<E>(a: ArrayView2<E>, b: ArrayView2<E>, c: ArrayViewMut2<E>)
where
    E: faer::traits::ComplexField + num_traits::One,
{
    faer::linalg::matmul::matmul(
        as_faer_mut(c),
        faer::Accum::Replace,
        as_faer(a),
        as_faer(b),
        E::one(),
        faer::Par::Seq,
    );
}

/// The eigendecomposition `A = U diag(λ) Uᵀ` of the symmetric `a` (its
/// lower triangle read), eigenvalues ascending, on one thread. faer's
/// `self_adjoint_eigen` takes its thread count from a global setting and
/// splits its blocked steps by it, so its rounding would change with the
/// number of threads; the maps built from an eigendecomposition (Nyström)
/// are bit-identical for any thread count.
///
/// # Errors
/// faer's `EvdError` when the iteration does not converge.
pub(crate) fn symmetric_eigen(
    a: MatRef<'_, f64>,
) -> std::result::Result<(Mat<f64>, Vec<f64>), faer::linalg::evd::EvdError> {
    use faer::linalg::evd::{self_adjoint_evd, self_adjoint_evd_scratch, ComputeEigenvectors};
    let n = a.nrows();
    let mut u = Mat::zeros(n, n);
    let mut lam = faer::diag::Diag::zeros(n);
    let scratch =
        self_adjoint_evd_scratch::<f64>(n, ComputeEigenvectors::Yes, Par::Seq, Default::default());
    self_adjoint_evd(
        a,
        lam.as_mut(),
        Some(u.as_mut()),
        Par::Seq,
        MemStack::new(&mut MemBuffer::new(scratch)),
        Default::default(),
    )?;
    let lam = lam.column_vector().iter().copied().collect();
    Ok((u, lam))
}

/// The QR decomposition `A = QR` of the `m × n` matrix `a` (`m ≥ n`) on one
/// thread, as `Q` (`m × m`, orthogonal) and the diagonal of `R`: what the
/// orthogonal frequency sampler needs, bit-identical for any thread count
/// (see [`symmetric_eigen`] for why faer's `qr` is not).
pub(crate) fn orthogonal_factor(mut a: Mat<f64>) -> (Mat<f64>, Vec<f64>) {
    use faer::linalg::householder::{
        apply_block_householder_sequence_on_the_left_in_place_scratch as apply_scratch,
        apply_block_householder_sequence_on_the_left_in_place_with_conj as apply,
    };
    use faer::linalg::qr::no_pivoting::factor::{
        qr_in_place, qr_in_place_scratch, recommended_block_size,
    };
    let (m, n) = a.shape();
    let size = m.min(n);
    let block = recommended_block_size::<f64>(m, n);
    let mut coeff = Mat::zeros(block, size);
    let scratch = qr_in_place_scratch::<f64>(m, n, block, Par::Seq, Default::default());
    qr_in_place(
        a.as_mut(),
        coeff.as_mut(),
        Par::Seq,
        MemStack::new(&mut MemBuffer::new(scratch)),
        Default::default(),
    );
    let r_diag = (0..size).map(|j| a[(j, j)]).collect();
    // The Householder basis: the strict lower part, with a unit diagonal.
    let basis = Mat::from_fn(m, size, |i, j| match i.cmp(&j) {
        std::cmp::Ordering::Greater => a[(i, j)],
        std::cmp::Ordering::Equal => 1.0,
        std::cmp::Ordering::Less => 0.0,
    });
    let mut q = Mat::identity(m, m);
    apply(
        basis.as_ref(),
        coeff.as_ref(),
        faer::Conj::No,
        q.as_mut(),
        Par::Seq,
        MemStack::new(&mut MemBuffer::new(apply_scratch::<f64>(m, block, m))),
    );
    (q, r_diag)
}

/// The relative jitters `ε` of the ladder of `docs/math/gp.rst`, "Exact GP":
/// after a failed plain factorization, `ε · mean(diag A)` is added to the
/// diagonal for `ε = 1e−10, 1e−9, …, 1e−4` in turn.
pub const JITTER_LADDER: [f64; 7] = [1e-10, 1e-9, 1e-8, 1e-7, 1e-6, 1e-5, 1e-4];

/// A Cholesky factorization `A + jitter·I = L Lᵀ` (lower `L`, `f64`).
/// Stored (feature "serde") as its factor `L` and the jitter.
#[derive(Clone, Debug)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize, serde::Deserialize),
    serde(into = "CholeskyParts", try_from = "CholeskyParts")
)]
pub struct Cholesky {
    l: Mat<f64>,
    jitter: f64,
}

/// The stored form of a [`Cholesky`]: `L` as an array and the jitter.
#[cfg(feature = "serde")]
#[derive(serde::Serialize, serde::Deserialize)]
struct CholeskyParts {
    l: Array2<f64>,
    jitter: f64,
}

#[cfg(feature = "serde")]
impl From<Cholesky> for CholeskyParts {
    fn from(c: Cholesky) -> Self {
        CholeskyParts {
            l: c.l_array(),
            jitter: c.jitter,
        }
    }
}

#[cfg(feature = "serde")]
impl TryFrom<CholeskyParts> for Cholesky {
    type Error = Error;

    /// Checks the factor as [`Cholesky::from_lower`] does.
    fn try_from(p: CholeskyParts) -> Result<Self> {
        let mut c = Cholesky::from_lower(p.l.view())?;
        c.jitter = p.jitter;
        Ok(c)
    }
}

/// The refusal of a system to factor that holds NaN or infinite values. The
/// inputs are checked finite before any system is formed, so its entries
/// left the float64 range through the hyperparameters (e.g. `X / l` or
/// `1 / σ_n²` overflowing), which the error names.
fn non_finite_system() -> Error {
    Error::invalid(
        "hyperparameters",
        "the matrix to factor (kernel or feature system) holds NaN or infinite values: a length \
         scale, variance or noise variance is too small or too large for float64 at these \
         inputs; rescale X or y, or choose hyperparameters nearer their scale",
    )
}

impl Cholesky {
    /// Factors the symmetric matrix `a` (its lower triangle is read) with the
    /// jitter ladder of `docs/math/gp.rst`, "Exact GP": a plain attempt, then
    /// `ε · mean(diag a)` added for each `ε` of [`JITTER_LADDER`].
    ///
    /// Errors: [`Error::ShapeMismatch`] if `a` is not square,
    /// [`Error::InvalidParameter`] (`hyperparameters`) for NaN/inf entries, and
    /// [`Error::NotPositiveDefinite`] when the last rung still fails.
    pub fn new(a: MatRef<'_, f64>, par: Parallelism) -> Result<Self> {
        Self::shifted(a, 0.0, par)
    }

    /// Factors `a + shift·I` (only the lower triangle of `a` is read; `a`
    /// itself is not modified) with the jitter ladder of [`Cholesky::new`],
    /// the jitter relative to `mean(diag a) + shift`. Saves the GP a copy of
    /// the kernel matrix: `K_y = K + σ_n² I` is formed in the factor's own
    /// storage.
    pub fn shifted(a: MatRef<'_, f64>, shift: f64, par: Parallelism) -> Result<Self> {
        Self::shifted_monitored(a, shift, par, &Monitor::default())
    }

    /// [`Cholesky::shifted`] with a check of `monitor` between column
    /// panels of the copy and of the factorization (the exact GPs' `N × N`
    /// systems, which a Ctrl-C stops there): [`Error::Interrupted`] once it
    /// is cancelled.
    pub fn shifted_monitored(
        a: MatRef<'_, f64>,
        shift: f64,
        par: Parallelism,
        monitor: &Monitor,
    ) -> Result<Self> {
        let n = a.nrows();
        if a.ncols() != n {
            return Err(Error::ShapeMismatch {
                name: "columns of the matrix to factor (it must be square)",
                expected: n,
                got: a.ncols(),
            });
        }
        let mut l = Mat::<f64>::zeros(n, n);
        // Copies the lower triangle of `a + (shift + jitter) I` into `l`, in
        // column panels with a check of `monitor` before each.
        let load = |l: &mut Mat<f64>, jitter: f64| -> Result<()> {
            for j0 in (0..n).step_by(blocked::PANEL) {
                monitor.check()?;
                for j in j0..(j0 + blocked::PANEL).min(n) {
                    let col = l.col_as_slice_mut(j);
                    for (i, v) in col.iter_mut().enumerate().skip(j) {
                        *v = a[(i, j)];
                        if !v.is_finite() {
                            return Err(non_finite_system());
                        }
                    }
                    col[j] += shift + jitter;
                }
            }
            Ok(())
        };
        load(&mut l, 0.0)?;
        let fpar = faer_par(par);
        let mean_diag = if n == 0 {
            0.0
        } else {
            (0..n).map(|i| l[(i, i)]).sum::<f64>() / n as f64
        };
        let mut index = match blocked::factor_lower(l.as_mut(), fpar, monitor)? {
            Ok(()) => return Ok(Self { l, jitter: 0.0 }),
            Err(index) => index,
        };
        if mean_diag > 0.0 {
            for eps in JITTER_LADDER {
                let jitter = eps * mean_diag;
                load(&mut l, jitter)?;
                match blocked::factor_lower(l.as_mut(), fpar, monitor)? {
                    Ok(()) => return Ok(Self { l, jitter }),
                    Err(i) => index = i,
                }
            }
        }
        Err(Error::NotPositiveDefinite { index })
    }

    /// Factors `a + jitter·I` with the ladder of [`Cholesky::shifted`]
    /// above `jitter`; the recorded jitter includes `jitter`.
    ///
    /// Errors: as [`Cholesky::new`].
    pub fn with_jitter(a: MatRef<'_, f64>, jitter: f64, par: Parallelism) -> Result<Self> {
        let mut chol = Self::shifted(a, jitter, par)?;
        chol.jitter += jitter;
        Ok(chol)
    }

    /// Wraps an existing lower-triangular factor `l` (e.g. one stored by a
    /// fitted model, checked by [`check_factor`]); its strict upper triangle
    /// is ignored.
    pub fn from_lower(l: ArrayView2<'_, f64>) -> Result<Self> {
        check_factor(l)?;
        // faer's blocked copy (the source is usually row-major), then the
        // strict upper triangle cleared column by column (contiguous).
        let mut out = as_faer(l).to_owned();
        for j in 0..out.ncols() {
            out.col_as_slice_mut(j)[..j].fill(0.0);
        }
        Ok(Self {
            l: out,
            jitter: 0.0,
        })
    }

    /// The order `n` of the factored matrix.
    pub fn dim(&self) -> usize {
        self.l.nrows()
    }

    /// The lower-triangular factor `L` (zeros above the diagonal).
    pub fn l(&self) -> MatRef<'_, f64> {
        self.l.as_ref()
    }

    /// `L` as a column-major (Fortran-order) ndarray, faer's own layout: a
    /// stored factor handed back (e.g. by Python to
    /// [`crate::gp::features::predict_features`]) feeds the triangular
    /// solves without a transpose (a row-major factor is slower there; see
    /// BENCHMARKS.md).
    pub fn l_array(&self) -> Array2<f64> {
        let n = self.dim();
        Array2::from_shape_fn((n, n).f(), |(i, j)| self.l[(i, j)])
    }

    /// The jitter that was added to the diagonal (0 when the plain
    /// factorization succeeded).
    pub fn jitter(&self) -> f64 {
        self.jitter
    }

    /// `ln det(A + jitter·I) = 2 Σ_i ln L_ii`.
    pub fn log_det(&self) -> f64 {
        2.0 * (0..self.dim()).map(|i| self.l[(i, i)].ln()).sum::<f64>()
    }

    /// Solves `L X = B` in place (`B` is `n × k`).
    ///
    /// # Panics
    /// When `B` has another number of rows than the factor's dimension.
    pub fn solve_lower_in_place(&self, rhs: MatMut<'_, f64>, par: Parallelism) {
        faer::linalg::triangular_solve::solve_lower_triangular_in_place(
            self.l.as_ref(),
            rhs,
            faer_par(par),
        );
    }

    /// Solves `Lᵀ X = B` in place.
    ///
    /// # Panics
    /// When `B` has another number of rows than the factor's dimension.
    pub fn solve_upper_in_place(&self, rhs: MatMut<'_, f64>, par: Parallelism) {
        faer::linalg::triangular_solve::solve_upper_triangular_in_place(
            self.l.as_ref().transpose(),
            rhs,
            faer_par(par),
        );
    }

    /// Solves `(L Lᵀ) X = B` in place.
    ///
    /// # Panics
    /// When `B` has another number of rows than the factor's dimension.
    pub fn solve_in_place(&self, mut rhs: MatMut<'_, f64>, par: Parallelism) {
        self.solve_lower_in_place(rhs.as_mut(), par);
        self.solve_upper_in_place(rhs, par);
    }

    /// `(L Lᵀ)^{−1} b` for a vector `b`.
    ///
    /// # Panics
    /// When `b`'s length is not the factor's dimension.
    pub fn solve_vec(&self, b: ArrayView1<'_, f64>, par: Parallelism) -> Vec<f64> {
        let mut x: Vec<f64> = b.iter().copied().collect();
        let n = x.len();
        self.solve_in_place(MatMut::from_column_major_slice_mut(&mut x, n, 1), par);
        x
    }

    /// The lower triangle of the inverse `(L Lᵀ)^{−1}` (`L^{−1}`, then the
    /// triangular product `L^{−ᵀ} L^{−1}`, `⅔ n³` flops, in column panels
    /// above order 2,048); the strict upper triangle is zero.
    pub fn inverse_lower(&self, par: Parallelism) -> Mat<f64> {
        let mut out = Mat::<f64>::zeros(self.dim(), self.dim());
        if self
            .inverse_lower_into(out.as_mut(), par, &Monitor::default())
            .is_err()
        {
            unreachable!("a fresh monitor is never cancelled");
        }
        for j in 1..self.dim() {
            out.col_as_slice_mut(j)[..j].fill(0.0);
        }
        out
    }

    /// The lower triangle of `(L Lᵀ)^{−1}` into `out` (`n × n`; its strict
    /// upper triangle is left with other values), with a check of `monitor`
    /// before each column panel (see [`Cholesky::shifted_monitored`]).
    ///
    /// # Errors
    /// [`Error::Interrupted`] once `monitor` is cancelled; `out` then holds
    /// a partial result.
    ///
    /// # Panics
    /// When `out` is not `n × n`.
    pub fn inverse_lower_into(
        &self,
        out: MatMut<'_, f64>,
        par: Parallelism,
        monitor: &Monitor,
    ) -> Result<()> {
        blocked::inverse_lower(out, self.l.as_ref(), faer_par(par), monitor)
    }

    /// The diagonal of the inverse: `[(L Lᵀ)^{−1}]_ii = ‖L^{−1} e_i‖²`, the
    /// squared norm of column `i` of `L^{−1}` (one triangular inversion,
    /// `⅓ n³` flops, half of [`Cholesky::inverse_lower`]).
    pub fn inverse_diagonal(&self, par: Parallelism) -> Vec<f64> {
        match self.inverse_diagonal_monitored(par, &Monitor::default()) {
            Ok(d) => d,
            Err(_) => unreachable!("a fresh monitor is never cancelled"),
        }
    }

    /// [`Cholesky::inverse_diagonal`] with a check of `monitor` before each
    /// column panel of the inversion (see [`Cholesky::shifted_monitored`]).
    ///
    /// # Errors
    /// [`Error::Interrupted`] once `monitor` is cancelled.
    pub fn inverse_diagonal_monitored(
        &self,
        par: Parallelism,
        monitor: &Monitor,
    ) -> Result<Vec<f64>> {
        let n = self.dim();
        let mut linv = Mat::<f64>::zeros(n, n);
        blocked::invert_lower(linv.as_mut(), self.l.as_ref(), faer_par(par), monitor)?;
        // Column i of L^{−1} is zero above row i.
        Ok((0..n)
            .map(|i| linv.col(i).iter().skip(i).map(|v| v * v).sum())
            .collect())
    }

    /// The full symmetric inverse `(L Lᵀ)^{−1}` as a row-major ndarray.
    pub fn inverse(&self, par: Parallelism) -> Array2<f64> {
        let inv = self.inverse_lower(par);
        Self::symmetric(inv.as_ref())
    }

    /// [`Cholesky::inverse`] with a check of `monitor` before each column
    /// panel (see [`Cholesky::shifted_monitored`]).
    ///
    /// # Errors
    /// [`Error::Interrupted`] once `monitor` is cancelled.
    pub fn inverse_monitored(&self, par: Parallelism, monitor: &Monitor) -> Result<Array2<f64>> {
        let n = self.dim();
        let mut inv = Mat::<f64>::zeros(n, n);
        self.inverse_lower_into(inv.as_mut(), par, monitor)?;
        Ok(Self::symmetric(inv.as_ref()))
    }

    /// The full symmetric matrix of a lower triangle, row-major.
    fn symmetric(inv: MatRef<'_, f64>) -> Array2<f64> {
        let n = inv.nrows();
        Array2::from_shape_fn(
            (n, n),
            |(i, j)| {
                if i >= j {
                    inv[(i, j)]
                } else {
                    inv[(j, i)]
                }
            },
        )
    }
}

/// Checks a stored lower-triangular Cholesky factor: square, with a
/// positive finite diagonal (what every triangular solve with it needs;
/// its strict upper triangle is never read).
pub fn check_factor(l: ArrayView2<'_, f64>) -> Result<()> {
    let (n, m) = l.dim();
    if n != m {
        return Err(Error::ShapeMismatch {
            name: "columns of the Cholesky factor (it must be square)",
            expected: n,
            got: m,
        });
    }
    match l.diag().iter().position(|&v| !(v > 0.0 && v.is_finite())) {
        Some(j) => Err(Error::invalid(
            "chol",
            format!("diagonal entry {j} of the Cholesky factor must be positive and finite"),
        )),
        None => Ok(()),
    }
}

/// Copies the strict lower triangle of a square matrix onto its upper one.
///
/// # Panics
/// When `a` is not square.
pub fn mirror_lower(mut a: ArrayViewMut2<'_, f64>) {
    // In 64 × 64 blocks, so the transposed writes stay in cache (a plain
    // column-by-column loop misses on every write of a large matrix).
    const B: usize = 64;
    let n = a.nrows();
    assert_eq!(a.ncols(), n, "mirror_lower: a square matrix");
    let Some(s) = a.as_slice_mut() else {
        for i in 0..n {
            for j in 0..i {
                a[(j, i)] = a[(i, j)];
            }
        }
        return;
    };
    for i0 in (0..n).step_by(B) {
        for j0 in (0..=i0).step_by(B) {
            for i in i0..(i0 + B).min(n) {
                for j in j0..(j0 + B).min(i) {
                    s[j * n + i] = s[i * n + j];
                }
            }
        }
    }
}

/// Adds one row chunk to the feature-space sufficient statistics of
/// `docs/math/gp.rst`, "Feature-space GP": `lower(gram) += lower(ΦᵀΦ)`,
/// `phi_y += Φᵀ y` and `phi_sum += Φᵀ 1`, in one pass of the packed kernel of
/// [`syrk`] over `Φ` as given (sample-major; `f32` widened while packing),
/// `[y | 1]` as two extra rows. Only the lower triangle of `gram` (`j ≤ i`) is
/// written, the BLAS `syrk` convention; [`mirror_lower`] completes it once,
/// when a full matrix is needed. Bit-identical for any thread count. (Measured
/// against faer's parallel triangular GEMM, which it replaces, in
/// BENCHMARKS.md.)
///
/// `phi` is `n × D`, `y` has length `n`, `gram` is `D × D` in standard
/// layout, `phi_y` and `phi_sum` have length `D`.
pub fn accumulate_gram<T: Real>(
    phi: ArrayView2<'_, T>,
    y: ArrayView1<'_, f64>,
    mut gram: ArrayViewMut2<'_, f64>,
    mut phi_y: ArrayViewMut1<'_, f64>,
    mut phi_sum: ArrayViewMut1<'_, f64>,
    par: Parallelism,
) -> Result<()> {
    let (n, d) = phi.dim();
    if y.len() != n {
        return Err(Error::ShapeMismatch {
            name: "length of y (the number of rows of the features)",
            expected: n,
            got: y.len(),
        });
    }
    Error::check_sizes(
        d,
        [
            ("rows of the Gram statistic", gram.nrows()),
            ("columns of the Gram statistic", gram.ncols()),
            ("length of the Phi^T y statistic", phi_y.len()),
            ("length of the feature-sum statistic", phi_sum.len()),
        ],
    )?;
    let phi = phi.as_standard_layout();
    let src = phi
        .as_slice()
        .ok_or_else(|| Error::Internal("standard-layout features".into()))?;
    let mut extra = Vec::with_capacity(2 * n);
    extra.extend(y.iter().copied());
    extra.resize(2 * n, 1.0);
    let mut ext = vec![0.0; 2 * d];
    let g = gram.as_slice_mut().ok_or_else(|| {
        Error::invalid(
            "gram",
            "a D x D array in standard (row-major, contiguous) layout",
        )
    })?;
    syrk::gram_lower(
        syrk::Isa::detect(),
        src,
        syrk::Layout::SampleMajor { ld: d },
        d,
        n,
        &extra,
        g,
        d,
        &mut ext,
        par,
    );
    for (j, e) in ext.chunks_exact(2).enumerate() {
        phi_y[j] += e[0];
        phi_sum[j] += e[1];
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::{array, Array1};

    fn spd(n: usize) -> Array2<f64> {
        let b = Array2::from_shape_fn((n, n), |(i, j)| ((i * 7 + j * 3) % 11) as f64 / 11.0 - 0.4);
        let mut a = b.t().dot(&b);
        for i in 0..n {
            a[(i, i)] += 0.5;
        }
        a
    }

    /// The one-thread eigendecomposition and QR: `A = U diag(λ) Uᵀ` with
    /// orthonormal `U` and ascending `λ`; `A = QR` with orthogonal `Q` and
    /// upper triangular `R = QᵀA` whose diagonal is the one returned.
    #[test]
    fn symmetric_eigen_and_orthogonal_factor_reconstruct() {
        let n = 40;
        let a = spd(n);
        let (u, lam) = symmetric_eigen(as_faer(a.view())).unwrap();
        let u = Array2::from_shape_fn((n, n), |(i, j)| u[(i, j)]);
        assert!(lam.windows(2).all(|w| w[0] <= w[1]));
        let back = u.dot(&Array2::from_diag(&Array1::from(lam))).dot(&u.t());
        assert!((&back - &a).iter().all(|v| v.abs() < 1e-12));
        assert!((u.t().dot(&u) - Array2::<f64>::eye(n))
            .iter()
            .all(|v| v.abs() < 1e-13));
        let g = Array2::from_shape_fn((n, n), |(i, j)| ((i * 13 + j * 5) % 17) as f64 - 8.0);
        let (q, r_diag) = orthogonal_factor(Mat::from_fn(n, n, |i, j| g[(i, j)]));
        let q = Array2::from_shape_fn((n, n), |(i, j)| q[(i, j)]);
        assert!((q.t().dot(&q) - Array2::<f64>::eye(n))
            .iter()
            .all(|v| v.abs() < 1e-13));
        let r = q.t().dot(&g);
        for i in 0..n {
            assert!((r[(i, i)] - r_diag[i]).abs() < 1e-11 * (1.0 + r_diag[i].abs()));
            assert!((0..i).all(|j| r[(i, j)].abs() < 1e-11), "row {i}");
        }
    }

    #[test]
    fn factor_solve_inverse_logdet() {
        let a = spd(9);
        let ch = Cholesky::new(as_faer(a.view()), Parallelism::Rayon).unwrap();
        assert_eq!(ch.jitter(), 0.0);
        let l = ch.l_array();
        let back = l.dot(&l.t());
        assert!((&back - &a).iter().all(|v| v.abs() < 1e-12));
        let b: Array1<f64> = (0..9).map(|i| i as f64 - 3.0).collect();
        let x = Array1::from(ch.solve_vec(b.view(), Parallelism::Sequential));
        assert!((a.dot(&x) - &b).iter().all(|v| v.abs() < 1e-10));
        let inv = ch.inverse(Parallelism::Rayon);
        let eye = a.dot(&inv);
        for i in 0..9 {
            for j in 0..9 {
                let want = if i == j { 1.0 } else { 0.0 };
                assert!((eye[(i, j)] - want).abs() < 1e-10);
            }
        }
        let ld: f64 = (0..9).map(|i| l[(i, i)].ln()).sum::<f64>() * 2.0;
        assert!((ch.log_det() - ld).abs() < 1e-14);
        // The diagonal from one triangular inversion, against the inverse
        // checked above.
        let diag = ch.inverse_diagonal(Parallelism::Rayon);
        assert_eq!(diag.len(), 9);
        for (i, d) in diag.iter().enumerate() {
            assert!((d - inv[(i, i)]).abs() <= 1e-13 * inv[(i, i)], "{i}");
        }
    }

    #[test]
    fn jitter_ladder_rescues_a_singular_psd_matrix() {
        // Rank one: x xᵀ with x = (1, 1, 1) is PSD but singular.
        let a = Array2::from_elem((3, 3), 1.0);
        let ch = Cholesky::new(as_faer(a.view()), Parallelism::Sequential).unwrap();
        assert!(ch.jitter() > 0.0 && ch.jitter() <= 1e-4);
    }

    #[test]
    fn stored_factor_check() {
        let l = array![[2.0, 9.0], [1.0, 3.0]];
        assert!(check_factor(l.view()).is_ok());
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            let mut b = l.clone();
            b[(1, 1)] = bad;
            let err = check_factor(b.view()).unwrap_err().to_string();
            assert!(err.contains("diagonal entry 1"), "{err}");
        }
        let rect = Array2::<f64>::ones((2, 3));
        assert!(matches!(
            check_factor(rect.view()),
            Err(Error::ShapeMismatch { .. })
        ));
        // The strict upper triangle is ignored (cleared by from_lower).
        let ch = Cholesky::from_lower(l.view()).unwrap();
        assert_eq!(ch.l_array(), array![[2.0, 0.0], [1.0, 3.0]]);
    }

    #[test]
    fn indefinite_matrix_is_a_clear_error() {
        let a = array![[1.0, 0.0], [0.0, -1.0]];
        let err = Cholesky::new(as_faer(a.view()), Parallelism::Sequential).unwrap_err();
        assert_eq!(err, Error::NotPositiveDefinite { index: 1 });
        assert!(err.to_string().contains("not positive definite"));
        let nan = array![[f64::NAN, 0.0], [0.0, 1.0]];
        let err = Cholesky::new(as_faer(nan.view()), Parallelism::Sequential).unwrap_err();
        assert!(err.to_string().contains("`hyperparameters`"), "{err}");
        let rect = Array2::<f64>::zeros((2, 3));
        assert!(matches!(
            Cholesky::new(as_faer(rect.view()), Parallelism::Sequential),
            Err(Error::ShapeMismatch { .. })
        ));
    }

    /// `g`'s lower triangle is `want`'s to 1e-12, its strict upper one zero.
    fn check_lower_only(g: &Array2<f64>, want: &Array2<f64>) {
        for ((i, j), v) in g.indexed_iter() {
            if j <= i {
                assert!((v - want[(i, j)]).abs() < 1e-12, "({i}, {j})");
            } else {
                assert_eq!(*v, 0.0, "({i}, {j})");
            }
        }
    }

    #[test]
    fn gram_accumulation_matches_dense_products_f32_and_f64() {
        let phi = Array2::from_shape_fn((37, 5), |(i, j)| {
            ((i * 13 + j * 5) % 17) as f64 / 17.0 - 0.5
        });
        let y: Array1<f64> = (0..37).map(|i| (i as f64 * 0.3).sin()).collect();
        let mut g = Array2::zeros((5, 5));
        let mut b = Array1::zeros(5);
        let mut s = Array1::zeros(5);
        // Two chunks add up to the whole.
        for (lo, hi) in [(0, 20), (20, 37)] {
            accumulate_gram(
                phi.slice(ndarray::s![lo..hi, ..]),
                y.slice(ndarray::s![lo..hi]),
                g.view_mut(),
                b.view_mut(),
                s.view_mut(),
                Parallelism::Rayon,
            )
            .unwrap();
        }
        // The lower triangle holds ΦᵀΦ; the strict upper one is untouched.
        check_lower_only(&g, &phi.t().dot(&phi));
        assert!((&b - &phi.t().dot(&y)).iter().all(|v| v.abs() < 1e-12));
        assert!((&s - &phi.sum_axis(ndarray::Axis(0)))
            .iter()
            .all(|v| v.abs() < 1e-12));
        let phi32 = phi.mapv(|v| v as f32);
        let mut g32 = Array2::zeros((5, 5));
        let mut b32 = Array1::zeros(5);
        let mut s32 = Array1::zeros(5);
        accumulate_gram(
            phi32.view(),
            y.view(),
            g32.view_mut(),
            b32.view_mut(),
            s32.view_mut(),
            Parallelism::Sequential,
        )
        .unwrap();
        let wide = phi32.mapv(|v| v as f64);
        check_lower_only(&g32, &wide.t().dot(&wide));
        let err = accumulate_gram(
            phi.view(),
            y.slice(ndarray::s![..3]),
            g.view_mut(),
            b.view_mut(),
            s.view_mut(),
            Parallelism::Rayon,
        );
        assert!(matches!(err, Err(Error::ShapeMismatch { .. })));
    }
}
