//! The Cholesky factorization and the inverse of the exact GPs' `N × N`
//! systems in column panels of [`PANEL`] columns, with a [`Monitor`] check
//! between two panels: a Ctrl-C stops an `N = 8,000` factorization within a
//! fraction of a second instead of waiting for its whole `N³/3` flops. Each
//! panel is a few calls of faer's (parallel) kernels. Orders up to
//! [`WHOLE_MAX`] run as one call of faer's own recursive routine after one
//! check: tens of milliseconds, where the panels' narrower products would
//! cost up to twice the time.
//!
//! The factor is the right-looking blocked algorithm of LAPACK's `potrf`:
//! for the panel `J` of columns `j₀..j₁`, `L_JJ` is faer's factor of the
//! diagonal block, `L_{>J} = A_{>J} L_JJ^{−ᵀ}` a triangular solve, and the
//! trailing lower triangle takes `A₂₂ −= L_{>J} L_{>J}ᵀ`. The inverse
//! `(L Lᵀ)^{−1} = L^{−ᵀ} L^{−1}` takes two passes of `N³/3` flops each: `X =
//! L^{−1}` by panels from the last (LAPACK's `trtri`: `X_JJ = L_JJ^{−1}`,
//! `X_{>J} = −X₂₂ L_{>J} X_JJ` with the trailing `X₂₂` already inverted),
//! then `C = XᵀX` by panels from the first (`C_{≥J,J} = X_{≥J,≥J}ᵀ
//! X_{≥J,J}`, written over the columns of `X` that no later panel reads).

use faer::linalg::matmul::triangular::{matmul as tr_matmul, BlockStructure};
use faer::prelude::{Reborrow, ReborrowMut};
use faer::{Accum, Mat, MatMut, MatRef, Par};

use crate::error::Result;
use crate::progress::Monitor;

/// Columns per panel: wide enough that each panel's products run at faer's
/// full rate, narrow enough that the widest (the first trailing update, `N²
/// · 128` multiply-adds) is a fraction of a second at `N = 8,000`.
pub(crate) const PANEL: usize = 256;

/// The largest order factored or inverted in one call of faer's routine
/// (about 0.05 s for the inverse on two cores): above it, in panels.
pub(crate) const WHOLE_MAX: usize = 2048;

/// The columns of one panel of an `n × n` computation: the whole up to
/// [`WHOLE_MAX`], else [`PANEL`] (at least one, so that the panels of an
/// empty matrix step forward).
pub(crate) fn panel_width(n: usize) -> usize {
    if n <= WHOLE_MAX {
        n.max(1)
    } else {
        PANEL
    }
}

/// Factors the lower triangle of `a` in place (`L` there; the strict upper
/// triangle is zeroed). `Ok(Err(index))` when pivot `index` is not positive
/// (the matrix is not positive definite at that precision).
///
/// # Errors
/// [`crate::Error::Interrupted`] once `monitor` is cancelled (checked before
/// each panel).
pub(crate) fn factor_lower(
    mut a: MatMut<'_, f64>,
    par: Par,
    monitor: &Monitor,
) -> Result<std::result::Result<(), usize>> {
    let n = a.nrows();
    let panel = panel_width(n);
    for j0 in (0..n).step_by(panel) {
        monitor.check()?;
        let j1 = (j0 + panel).min(n);
        let b = j1 - j0;
        if let Err(index) = factor_block(a.rb_mut().submatrix_mut(j0, j0, b, b), par) {
            return Ok(Err(j0 + index));
        }
        if j1 < n {
            let (top, bottom) = a.rb_mut().split_at_row_mut(j1);
            let l11 = top.rb().submatrix(j0, j0, b, b);
            let (left, trailing) = bottom.split_at_col_mut(j1);
            let mut l21 = left.subcols_mut(j0, b);
            // L₂₁ L₁₁ᵀ = A₂₁, i.e. L₁₁ L₂₁ᵀ = A₂₁ᵀ.
            faer::linalg::triangular_solve::solve_lower_triangular_in_place(
                l11,
                l21.rb_mut().transpose_mut(),
                par,
            );
            tr_matmul(
                trailing,
                BlockStructure::TriangularLower,
                Accum::Add,
                l21.rb(),
                BlockStructure::Rectangular,
                l21.rb().transpose(),
                BlockStructure::Rectangular,
                -1.0,
                par,
            );
        }
    }
    for j in 1..n {
        for i in 0..j {
            a[(i, j)] = 0.0;
        }
    }
    Ok(Ok(()))
}

/// faer's Cholesky factor of one diagonal block, in place (lower triangle).
fn factor_block(a: MatMut<'_, f64>, par: Par) -> std::result::Result<(), usize> {
    use faer::dyn_stack::{MemBuffer, MemStack};
    use faer::linalg::cholesky::llt::factor;
    let n = a.nrows();
    let mut mem = MemBuffer::new(factor::cholesky_in_place_scratch::<f64>(
        n,
        par,
        Default::default(),
    ));
    let stack = MemStack::new(&mut mem);
    match factor::cholesky_in_place(a, Default::default(), par, stack, Default::default()) {
        Ok(_) => Ok(()),
        Err(factor::LltError::NonPositivePivot { index }) => Err(index),
    }
}

/// The lower triangle of `(L Lᵀ)^{−1}` into `out` (`n × n`; its strict upper
/// triangle is left with other values), for the lower-triangular factor
/// `l`: [`invert_lower`], then `C = XᵀX` by panels from the first (faer's
/// inverse in one call up to [`WHOLE_MAX`]).
///
/// # Errors
/// [`crate::Error::Interrupted`] once `monitor` is cancelled (checked before
/// each panel of each pass).
///
/// # Panics
/// When `out` and `l` are not square of the same order.
pub(crate) fn inverse_lower(
    mut out: MatMut<'_, f64>,
    l: MatRef<'_, f64>,
    par: Par,
    monitor: &Monitor,
) -> Result<()> {
    let n = l.nrows();
    if n <= WHOLE_MAX {
        use faer::dyn_stack::{MemBuffer, MemStack};
        use faer::linalg::cholesky::llt::inverse;
        monitor.check()?;
        let mut mem = MemBuffer::new(inverse::inverse_scratch::<f64>(n, par));
        inverse::inverse(out, l, par, MemStack::new(&mut mem));
        return Ok(());
    }
    invert_lower(out.rb_mut(), l, par, monitor)?;
    let mut scratch = Mat::<f64>::zeros(n, PANEL.min(n));
    for j0 in (0..n).step_by(PANEL) {
        monitor.check()?;
        let j1 = (j0 + PANEL).min(n);
        let (m, b) = (n - j0, j1 - j0);
        let mut c = scratch.as_mut().submatrix_mut(0, 0, m, b);
        let x = out.rb();
        let (mut c_top, mut c_below) = c.rb_mut().split_at_row_mut(b);
        // C_JJ = X_JJᵀ X_JJ + X_{>J,J}ᵀ X_{>J,J} (lower triangle), C_{>J,J} =
        // X_{>J,>J}ᵀ X_{>J,J}: the triangular structures skip the zeros.
        let x_jj = x.submatrix(j0, j0, b, b);
        tr_matmul(
            c_top.rb_mut(),
            BlockStructure::TriangularLower,
            Accum::Replace,
            x_jj.transpose(),
            BlockStructure::TriangularUpper,
            x_jj,
            BlockStructure::TriangularLower,
            1.0,
            par,
        );
        if j1 < n {
            let x_below = x.submatrix(j1, j0, n - j1, b);
            tr_matmul(
                c_top.rb_mut(),
                BlockStructure::TriangularLower,
                Accum::Add,
                x_below.transpose(),
                BlockStructure::Rectangular,
                x_below,
                BlockStructure::Rectangular,
                1.0,
                par,
            );
            tr_matmul(
                c_below.rb_mut(),
                BlockStructure::Rectangular,
                Accum::Replace,
                x.submatrix(j1, j1, n - j1, n - j1).transpose(),
                BlockStructure::TriangularUpper,
                x_below,
                BlockStructure::Rectangular,
                1.0,
                par,
            );
        }
        out.rb_mut().submatrix_mut(j0, j0, m, b).copy_from(c.rb());
    }
    Ok(())
}

/// `X = L^{−1}` into `out` (`n × n`, lower triangle; the strict upper
/// triangle is zeroed), for the lower-triangular `l`, by panels from the
/// last (`⅓ n³` flops; one call of faer's routine up to [`WHOLE_MAX`]).
///
/// # Errors
/// [`crate::Error::Interrupted`] once `monitor` is cancelled (checked before
/// each panel).
///
/// # Panics
/// When `out` and `l` are not square of the same order.
pub(crate) fn invert_lower(
    mut out: MatMut<'_, f64>,
    l: MatRef<'_, f64>,
    par: Par,
    monitor: &Monitor,
) -> Result<()> {
    let n = l.nrows();
    assert!(
        l.ncols() == n && out.nrows() == n && out.ncols() == n,
        "invert_lower: square matrices of one order"
    );
    let panel = panel_width(n);
    // `L_{>J} X_JJ` of one panel (none when the panel is the whole).
    let mut scratch = Mat::<f64>::zeros(if n > panel { n } else { 0 }, panel);
    for j0 in (0..n).step_by(panel).rev() {
        monitor.check()?;
        let j1 = (j0 + panel).min(n);
        let b = j1 - j0;
        // Above the panel's diagonal block, X is zero.
        for c in j0..j1 {
            out.rb_mut().col_mut(c).subrows_mut(0, c).fill(0.0);
        }
        faer::linalg::triangular_inverse::invert_lower_triangular(
            out.rb_mut().submatrix_mut(j0, j0, b, b),
            l.submatrix(j0, j0, b, b),
            par,
        );
        if j1 < n {
            let m = n - j1;
            let mut w = scratch.as_mut().submatrix_mut(0, 0, m, b);
            let (left, right) = out.rb_mut().split_at_col_mut(j1);
            let x11 = left.rb().submatrix(j0, j0, b, b);
            tr_matmul(
                w.rb_mut(),
                BlockStructure::Rectangular,
                Accum::Replace,
                l.submatrix(j1, j0, m, b),
                BlockStructure::Rectangular,
                x11,
                BlockStructure::TriangularLower,
                1.0,
                par,
            );
            tr_matmul(
                left.submatrix_mut(j1, j0, m, b),
                BlockStructure::Rectangular,
                Accum::Replace,
                right.rb().submatrix(j1, 0, m, m),
                BlockStructure::TriangularLower,
                w.rb(),
                BlockStructure::Rectangular,
                -1.0,
                par,
            );
        }
    }
    Ok(())
}

/// `dst = dst + alpha · lhs · rhs` ([`Accum::Add`]) or `dst = alpha · lhs ·
/// rhs` ([`Accum::Replace`]), faer's product in column panels of `dst`
/// with a check of `monitor` before each: the exact classifier's `N × N ×
/// n_c` products, which a Ctrl-C stops between panels.
///
/// # Errors
/// [`crate::Error::Interrupted`] once `monitor` is cancelled; `dst` then
/// holds a partial result.
///
/// # Panics
/// When the shapes do not chain (`dst` is `lhs.nrows() × rhs.ncols()`,
/// `lhs.ncols() == rhs.nrows()`).
pub(crate) fn matmul_monitored(
    mut dst: MatMut<'_, f64>,
    accum: Accum,
    lhs: MatRef<'_, f64>,
    rhs: MatRef<'_, f64>,
    alpha: f64,
    par: Par,
    monitor: &Monitor,
) -> Result<()> {
    let n = dst.ncols();
    for j0 in (0..n).step_by(PANEL) {
        monitor.check()?;
        let b = PANEL.min(n - j0);
        faer::linalg::matmul::matmul(
            dst.rb_mut().subcols_mut(j0, b),
            accum,
            lhs,
            rhs.subcols(j0, b),
            alpha,
            par,
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Error;

    /// A symmetric positive definite matrix of order `n` (a Gaussian kernel
    /// of scattered points plus a small diagonal, condition number ~1e4).
    fn spd(n: usize) -> Mat<f64> {
        let x: Vec<f64> = (0..n)
            .map(|i| ((i * 7919) % n) as f64 / n as f64 * 6.0)
            .collect();
        Mat::from_fn(n, n, |i, j| {
            (-(x[i] - x[j]).powi(2) / 2.0).exp() + if i == j { 0.01 } else { 0.0 }
        })
    }

    fn max_abs(m: MatRef<'_, f64>) -> f64 {
        let mut out = 0.0f64;
        for j in 0..m.ncols() {
            for i in 0..m.nrows() {
                out = out.max(m[(i, j)].abs());
            }
        }
        out
    }

    const PAR: Par = Par::Seq;

    #[test]
    fn panels_factor_and_invert_as_the_unblocked_routines() {
        // Orders of one call of faer's routines, and one of panels that
        // ends in a partial panel.
        for n in [1, 7, PANEL + 1, WHOLE_MAX + PANEL + 37] {
            let a = spd(n);
            let mut l = a.clone();
            assert_eq!(
                factor_lower(l.as_mut(), PAR, &Monitor::default()),
                Ok(Ok(()))
            );
            // L Lᵀ = A, L lower, and faer's own unblocked factor agrees.
            let back = &l * l.transpose();
            assert!(max_abs((&back - &a).as_ref()) < 1e-12, "n = {n}");
            assert!((0..n).all(|j| (0..j).all(|i| l[(i, j)] == 0.0)));
            let mut whole = a.clone();
            assert_eq!(factor_block(whole.as_mut(), PAR), Ok(()));
            for j in 0..n {
                for i in j..n {
                    assert!((whole[(i, j)] - l[(i, j)]).abs() < 1e-12, "n = {n}");
                }
            }
            // The inverse's lower triangle, written over a buffer of stale
            // values: A · A⁻¹ = I.
            let mut inv = Mat::from_fn(n, n, |i, j| (i * 3 + j) as f64 - 5.0);
            inverse_lower(inv.as_mut(), l.as_ref(), PAR, &Monitor::default()).unwrap();
            let full = Mat::from_fn(n, n, |i, j| inv[(i.max(j), i.min(j))]);
            let eye = &a * &full;
            let err = max_abs((&eye - Mat::<f64>::identity(n, n)).as_ref());
            // cond(A) · ε with room: the products are backward stable.
            assert!(err < 1e-9, "n = {n}: {err:e}");
        }
    }

    #[test]
    fn a_failing_pivot_is_named_by_its_row_in_the_whole_matrix() {
        // Row and column 400 (in the second panel) repeat row 10's points:
        // the Gram matrix of vectors with one repeated is singular there.
        let n = 600;
        let g = Mat::from_fn(n, n, |i, j| {
            let (i, j) = (if i == 400 { 10 } else { i }, if j == 400 { 10 } else { j });
            let (xi, xj) = (i as f64 / n as f64, j as f64 / n as f64);
            // The Brownian-motion kernel min(x, y) + 1, positive definite
            // on distinct points.
            xi.min(xj) + 1.0
        });
        let mut l = g.clone();
        assert_eq!(
            factor_lower(l.as_mut(), PAR, &Monitor::default()),
            Ok(Err(400))
        );
    }

    #[test]
    fn a_cancelled_monitor_stops_every_routine() {
        let n = PANEL + 5;
        let a = spd(n);
        let monitor = Monitor::new();
        monitor.cancel();
        let mut l = a.clone();
        assert_eq!(
            factor_lower(l.as_mut(), PAR, &monitor),
            Err(Error::Interrupted)
        );
        let mut inv = Mat::<f64>::zeros(n, n);
        assert_eq!(
            inverse_lower(inv.as_mut(), a.as_ref(), PAR, &monitor),
            Err(Error::Interrupted)
        );
        let mut c = Mat::<f64>::zeros(n, n);
        let r = matmul_monitored(
            c.as_mut(),
            Accum::Replace,
            a.as_ref(),
            a.as_ref(),
            1.0,
            PAR,
            &monitor,
        );
        assert_eq!(r, Err(Error::Interrupted));
    }

    #[test]
    fn the_monitored_product_equals_faers_product() {
        let (a, b) = (spd(300), spd(300).submatrix(0, 0, 300, 290).to_owned());
        let mut c = Mat::from_fn(300, 290, |i, j| (i + j) as f64);
        let mut want = c.clone();
        matmul_monitored(
            c.as_mut(),
            Accum::Add,
            a.as_ref(),
            b.as_ref(),
            -0.5,
            PAR,
            &Monitor::default(),
        )
        .unwrap();
        faer::linalg::matmul::matmul(want.as_mut(), Accum::Add, a.as_ref(), b.as_ref(), -0.5, PAR);
        assert!(max_abs((&c - &want).as_ref()) < 1e-12);
    }
}
