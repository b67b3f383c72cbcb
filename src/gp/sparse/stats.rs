//! The streamed statistics of the sparse GP (see docs/math/sparse_gp.rst,
//! sections VFE and FITC): sums over the training rows that hold
//! everything the bound needs from the data, accumulated one row chunk at a
//! time (memory `O(M² + chunk·M)`) and merged exactly, like
//! [`crate::stats::FeatureStats`].
//!
//! With `k_i = k(Z, x_i)` and per-row weights `w_i` (1 for VFE,
//! `1/Λ_i` for FITC, `Λ_i = k(x_i, x_i) − ‖L^{−1} k_i‖² + σ_n²`):
//! `Σ w_i k_i k_iᵀ` (`S = K_uf K_fu` for VFE, `K_uf Λ^{−1} K_fu` for FITC),
//! `Σ w_i k_i (y_i − s)`, `Σ w_i k_i`, `Σ w_i`, `Σ w_i (y_i − s)`,
//! `Σ w_i (y_i − s)²`, `Σ (y_i − s)`, `N`, `Σ k(x_i, x_i)` and, for FITC,
//! `Σ ln Λ_i`. The targets enter relative to a shift `s` (the first
//! chunk's mean) so that the training mean can be subtracted at the end
//! (the target sums convert exactly between shifts). The FITC statistics
//! depend on the inducing inputs and hyperparameters through `Λ`: only
//! statistics of the same [`InducingPrior`] merge meaningfully.

use ndarray::{Array1, Array2, ArrayView1, ArrayView2};

use super::kernel_blocks::{cross_block, diag_sum, scaled_t};
use super::prior::InducingPrior;
use crate::error::{check_finite, Error, Result};
use crate::linalg::{mirror_lower, syrk};
use crate::stats::{
    check_overflow, gram_update_fits, reshift_sums, rows_after, x_overflow, ColumnSums, GramSums,
    ShiftedSums,
};
use crate::threads::Parallelism;

/// The sparse-GP approximation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum Method {
    /// Titsias' collapsed variational bound (VFE).
    Vfe,
    /// The fully independent training conditional (FITC, Snelson &
    /// Ghahramani).
    Fitc,
}

impl Method {
    /// Parses `"vfe"` or `"fitc"`.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] naming `method`.
    pub fn from_name(name: &str) -> Result<Self> {
        match name {
            "vfe" => Ok(Method::Vfe),
            "fitc" => Ok(Method::Fitc),
            other => Err(Error::invalid(
                "method",
                format!("expected \"vfe\" or \"fitc\", got {other:?}"),
            )),
        }
    }

    /// The method's name.
    pub fn name(self) -> &'static str {
        match self {
            Method::Vfe => "vfe",
            Method::Fitc => "fitc",
        }
    }
}

/// Streamed statistics of a sparse-GP bound (see the module docs).
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct SparseStats {
    /// The approximation the weights belong to.
    pub method: Method,
    /// `Σ w_i k_i k_iᵀ` (`M × M`) in its lower triangle (`gram[(i, j)]`,
    /// `j ≤ i`; the strict upper triangle is never read).
    pub gram: Array2<f64>,
    /// `Σ w_i k_i (y_i − s)`.
    pub k_y: Array1<f64>,
    /// `Σ w_i k_i`.
    pub k_sum: Array1<f64>,
    /// Number of rows `N`.
    pub n: u64,
    /// The shift `s`.
    pub y_shift: f64,
    /// `Σ (y_i − s)` (unweighted: the training mean).
    pub y_sum: f64,
    /// `Σ w_i`.
    pub w_sum: f64,
    /// `Σ w_i (y_i − s)`.
    pub wy_sum: f64,
    /// `Σ w_i (y_i − s)²`.
    pub wyy_sum: f64,
    /// `Σ k(x_i, x_i)`.
    pub kff_sum: f64,
    /// `Σ ln Λ_i` (FITC; 0 for VFE).
    pub log_lambda_sum: f64,
    /// The kernel columns entered as `L^{−1} k_i` (FITC always, VFE under a
    /// prior that asks for it, see [`InducingPrior::whiten`]): `gram` holds
    /// `L^{−1} S L^{−ᵀ}`, `k_y` and `k_sum` hold `L^{−1}` times theirs.
    #[cfg_attr(feature = "serde", serde(default))]
    pub whitened: bool,
}

impl SparseStats {
    /// Empty statistics for `M` inducing inputs.
    pub fn new(method: Method, n_inducing: usize) -> Self {
        Self {
            method,
            gram: Array2::zeros((n_inducing, n_inducing)),
            k_y: Array1::zeros(n_inducing),
            k_sum: Array1::zeros(n_inducing),
            n: 0,
            y_shift: 0.0,
            y_sum: 0.0,
            w_sum: 0.0,
            wy_sum: 0.0,
            wyy_sum: 0.0,
            kff_sum: 0.0,
            log_lambda_sum: 0.0,
            whitened: false,
        }
    }

    /// The number of inducing inputs `M`.
    pub fn n_inducing(&self) -> usize {
        self.k_y.len()
    }

    /// Whether statistics accumulated under `prior` hold whitened columns:
    /// FITC's `Λ_i` needs `L^{−1} k_i` anyway, so its statistics are always
    /// whitened (no extra work); VFE's when the prior asks for it.
    fn whitens(&self, prior: &InducingPrior) -> bool {
        self.method == Method::Fitc || prior.whiten
    }

    /// The refusals of [`Self::accumulate`] that depend on the statistics
    /// and the prior only, made before anything is changed: fields of
    /// disagreeing shapes or a `gram` not in standard layout, another `M`,
    /// or rows accumulated under a prior that whitens otherwise.
    pub(crate) fn check_accumulate(&self, prior: &InducingPrior) -> Result<()> {
        self.check_shapes()?;
        let m = prior.n_inducing();
        if self.n_inducing() != m {
            return Err(Error::ShapeMismatch {
                name: "number of inducing inputs of the statistics",
                expected: m,
                got: self.n_inducing(),
            });
        }
        if !self.gram.is_standard_layout() {
            return Err(Error::invalid(
                "gram",
                "an M x M array in standard (row-major, contiguous) layout",
            ));
        }
        if self.n > 0 && self.whitened != self.whitens(prior) {
            return Err(Error::invalid(
                "prior",
                "the statistics were accumulated under a prior of other inducing inputs or \
                 hyperparameters",
            ));
        }
        Ok(())
    }

    /// The shapes of the public fields agree: `gram` is `M × M` and `k_sum`
    /// has length `M = n_inducing()`.
    fn check_shapes(&self) -> Result<()> {
        let m = self.n_inducing();
        Error::check_sizes(
            m,
            [
                ("rows of gram", self.gram.nrows()),
                ("columns of gram", self.gram.ncols()),
                ("length of k_sum", self.k_sum.len()),
            ],
        )?;
        Ok(())
    }

    /// Adds a row chunk `(x, y)` under `prior` (`x` is `n × d`). `scratch`
    /// is reused between chunks (it grows to `M·n` values).
    ///
    /// # Errors
    /// [`Error::ShapeMismatch`] for a chunk of the wrong width or length, or
    /// statistics of another `M` or whose fields disagree in shape;
    /// [`Error::NonFinite`] for NaN in the chunk; [`Error::InvalidParameter`]
    /// naming `y` (the target sums) or `X` (the others) when a sum would
    /// overflow the float64 range (judged before anything is added, from
    /// the largest kernel column entry, as the feature statistics judge
    /// theirs). Nothing is changed by a refused chunk.
    pub fn accumulate(
        &mut self,
        prior: &InducingPrior,
        x: ArrayView2<'_, f64>,
        y: ArrayView1<'_, f64>,
        scratch: &mut Vec<f64>,
        par: Parallelism,
    ) -> Result<()> {
        check_chunk(prior, x, y)?;
        self.check_accumulate(prior)?;
        self.add_checked(prior, x, y, scratch, par)
    }

    /// [`Self::accumulate`] without its refusals, for callers that have made
    /// them for a larger chunk this one is part of (the class statistics
    /// scan a chunk once for all its classes): the chunk passed
    /// `check_chunk` and the statistics [`Self::check_accumulate`].
    ///
    /// # Errors
    /// [`Error::Internal`] for statistics whose `gram` is not in standard
    /// layout (refused by [`Self::check_accumulate`]).
    pub(crate) fn add_checked(
        &mut self,
        prior: &InducingPrior,
        x: ArrayView2<'_, f64>,
        y: ArrayView1<'_, f64>,
        scratch: &mut Vec<f64>,
        par: Parallelism,
    ) -> Result<()> {
        let m = prior.n_inducing();
        let n = x.nrows();
        if n == 0 {
            return Ok(());
        }
        let mn = crate::alloc::try_grow(
            scratch,
            "chunk_size",
            "a chunk of kernel columns (n_inducing x chunk rows, float64)",
            &[m, n],
        )?;
        rows_after(self.n, n as u64)?;
        let whiten = self.whitens(prior);
        let shift = if self.n == 0 {
            y.sum() / n as f64
        } else {
            self.y_shift
        };
        let yc: Vec<f64> = y.iter().map(|v| v - shift).collect();
        let ut = scaled_t(&prior.params, x, &prior.center);
        let kb = &mut scratch[..mn];
        cross_block(&prior.params, prior.w.view(), ut.view(), kb, None, par);
        if whiten {
            // L^{−1} K_uf: its Gram is C (VFE: C σ_n²) without the rounding
            // of S amplified by K_uu^{−1} (see InducingPrior::whiten).
            let vm = faer::MatMut::from_row_major_slice_mut(kb, m, n);
            prior.chol.solve_lower_in_place(vm, par);
        }
        // The extra rows of the Gram kernel: [w (y − s); w] scaled by √w
        // like the block's columns, so that its sums carry the weight w.
        let mut extra = Vec::with_capacity(2 * n);
        extra.extend_from_slice(&yc);
        extra.resize(2 * n, 1.0);
        // The chunk's scalar sums: Σ w, Σ w (y − s), Σ w (y − s)², Σ ln Λ.
        let (mut w_sum, mut wy_sum, mut wyy_sum, mut log_lambda_sum) = (0.0, 0.0, 0.0, 0.0);
        match self.method {
            Method::Vfe => {
                w_sum = n as f64;
                wy_sum = yc.iter().sum::<f64>();
                wyy_sum = yc.iter().map(|t| t * t).sum::<f64>();
            }
            Method::Fitc => {
                let lam = fitc_lambda(prior, kb, n);
                for (i, &l) in lam.iter().enumerate() {
                    let (w, r) = (1.0 / l, l.sqrt().recip());
                    w_sum += w;
                    wy_sum += w * yc[i];
                    wyy_sum += w * yc[i] * yc[i];
                    log_lambda_sum += l.ln();
                    extra[i] *= r;
                    extra[n + i] = r;
                }
                for row in kb.chunks_exact_mut(n) {
                    for (k, &l) in row.iter_mut().zip(&lam) {
                        *k /= l.sqrt();
                    }
                }
            }
        }
        // Every sum is judged before the statistics change, so a refused
        // chunk leaves them as they were.
        let y_sum = self.y_sum + yc.iter().sum::<f64>();
        let (w_sum, wy_sum, wyy_sum) = (
            self.w_sum + w_sum,
            self.wy_sum + wy_sum,
            self.wyy_sum + wyy_sum,
        );
        let kff_sum = self.kff_sum + diag_sum(&prior.params, n);
        let log_lambda_sum = self.log_lambda_sum + log_lambda_sum;
        check_overflow(
            &[shift, y_sum, wy_sum, wyy_sum],
            &[w_sum, kff_sum, log_lambda_sum],
        )?;
        let amax = |v: &[f64]| v.iter().fold(0.0f64, |a, t| a.max(t.abs()));
        let (e, u) = extra.split_at(n);
        let fits = gram_update_fits(
            GramSums {
                diag: self.gram.diag(),
                with_y: self.k_y.view(),
                with_ones: self.k_sum.view(),
            },
            n,
            amax(kb),
            amax(e),
            amax(u),
            || {
                let mut sums = ColumnSums::zeros(m);
                for (j, row) in kb.chunks_exact(n).enumerate() {
                    for (i, &k) in row.iter().enumerate() {
                        sums.add(j, k, e[i], u[i]);
                    }
                }
                sums
            },
        );
        if !fits {
            return Err(x_overflow());
        }
        let mut ext = vec![0.0; 2 * m];
        let g = self
            .gram
            .as_slice_mut()
            .ok_or_else(|| Error::Internal("standard-layout statistics".into()))?;
        syrk::gram_lower(
            syrk::Isa::detect(),
            kb,
            syrk::Layout::FeatureMajor { ld: n },
            m,
            n,
            &extra,
            g,
            m,
            &mut ext,
            par,
        );
        for (j, e) in ext.chunks_exact(2).enumerate() {
            self.k_y[j] += e[0];
            self.k_sum[j] += e[1];
        }
        if self.n == 0 {
            self.y_shift = shift;
            self.whitened = whiten;
        }
        self.n += n as u64;
        self.y_sum = y_sum;
        self.w_sum = w_sum;
        self.wy_sum = wy_sum;
        self.wyy_sum = wyy_sum;
        self.kff_sum = kff_sum;
        self.log_lambda_sum = log_lambda_sum;
        // Cannot fail after the bounds above; a guard against statistics
        // edited in between.
        self.check_sums()
    }

    /// The VFE statistics of the rows `(x, y)` under `prior` with the
    /// kernel block and its Gram on the GPU (`gpu::inducing_gram` of the
    /// `gpu` feature: `K_uf K_fu` and `K_uf [y − s, 1]` in f32, reduced in
    /// f64, for the shift `s = mean(y)` of these rows, as the feature-space
    /// GP's GPU statistics); the target sums are formed on the host in f64 (see
    /// docs/math/sparse_gp.rst, section Devices). FITC's per-row weights
    /// need `L^{−1} K_uf` and have no GPU path.
    ///
    /// # Errors
    /// As [`SparseStats::accumulate`]; [`Error::InvalidParameter`]
    /// (`device`) for FITC; [`Error::Gpu`] when no adapter is usable (or
    /// without the `gpu` feature) or the device fails; as
    /// `gpu::inducing_gram`.
    pub fn of_rows_gpu(
        method: Method,
        prior: &InducingPrior,
        x: ArrayView2<'_, f64>,
        y: ArrayView1<'_, f64>,
    ) -> Result<Self> {
        if method == Method::Fitc {
            return Err(Error::invalid("device", FITC_CPU_ONLY));
        }
        check_chunk(prior, x, y)?;
        let m = prior.n_inducing();
        let mut s = Self::new(method, m);
        let n = x.nrows();
        if n == 0 {
            return Ok(s);
        }
        let shift = y.sum() / n as f64;
        let mut targets = Array2::<f64>::ones((n, 2));
        targets
            .column_mut(0)
            .zip_mut_with(&y, |t, &v| *t = v - shift);
        let (gram, b) = gpu_gram(prior, x, targets.view())?;
        let yc = targets.column(0);
        s.gram = gram;
        s.k_y = b.column(0).to_owned();
        s.k_sum = b.column(1).to_owned();
        s.n = n as u64;
        s.y_shift = shift;
        s.y_sum = yc.sum();
        s.w_sum = n as f64;
        s.wy_sum = s.y_sum;
        s.wyy_sum = yc.iter().map(|t| t * t).sum();
        s.kff_sum = diag_sum(&prior.params, n);
        s.check_sums()?;
        Ok(s)
    }

    /// Adds the statistics of other rows under the same prior (exact: the
    /// result equals the statistics of the concatenated rows).
    ///
    /// # Errors
    /// [`Error::ShapeMismatch`] for another `M` or either one's fields
    /// disagreeing in shape, [`Error::InvalidParameter`] for another method,
    /// or naming `y` (the target sums) or `X` (the others) when a sum
    /// overflows the float64 range. Nothing is changed then.
    pub fn merge(&mut self, other: &SparseStats) -> Result<()> {
        self.check_merge(other)?;
        let mut merged = self.clone();
        merged.merge_shifted(other);
        merged.check_sums()?;
        *self = merged;
        Ok(())
    }

    /// The refusals of [`Self::merge`]: either one's fields disagree in
    /// shape, another `M`, another method, or whitened statistics with
    /// statistics of the kernel columns.
    pub(crate) fn check_merge(&self, other: &SparseStats) -> Result<()> {
        self.check_shapes()?;
        other.check_shapes()?;
        if other.n_inducing() != self.n_inducing() {
            return Err(Error::ShapeMismatch {
                name: "number of inducing inputs of the statistics to merge",
                expected: self.n_inducing(),
                got: other.n_inducing(),
            });
        }
        if other.method != self.method {
            return Err(Error::invalid(
                "method",
                format!(
                    "cannot merge {} statistics into {} statistics",
                    other.method.name(),
                    self.method.name()
                ),
            ));
        }
        if self.n > 0 && other.n > 0 && self.whitened != other.whitened {
            return Err(Error::invalid(
                "statistics",
                "cannot merge whitened statistics with statistics of the kernel columns",
            ));
        }
        rows_after(self.n, other.n).map(|_| ())
    }

    /// The training-target mean `ȳ` (0 when empty).
    pub fn y_mean(&self) -> f64 {
        if self.n == 0 {
            0.0
        } else {
            self.y_shift + self.y_sum / self.n as f64
        }
    }

    /// The statistics of the targets minus `ȳ` (with `center`) or of the
    /// raw targets: `(Σ w k (y − c), Σ w (y − c)²)`.
    pub(crate) fn centered(&self, center: bool) -> (Array1<f64>, f64) {
        let mut s = self.clone();
        s.reshift(if center { self.y_mean() } else { 0.0 });
        (s.k_y, s.wyy_sum.max(0.0))
    }

    /// `Σ w k kᵀ` as a full symmetric matrix.
    pub(crate) fn gram_symmetric(&self) -> Array2<f64> {
        let mut g = self.gram.as_standard_layout().into_owned();
        mirror_lower(g.view_mut());
        g
    }

    /// Checks statistics built from outside (a caller's arrays or a
    /// deserialized file).
    ///
    /// # Errors
    /// [`Error::ShapeMismatch`] or [`Error::NonFinite`] naming the field.
    pub fn validate(&self) -> Result<()> {
        self.check_shapes()?;
        check_finite("gram", self.gram.iter())?;
        check_finite("k_y", self.k_y.iter())?;
        check_finite("k_sum", self.k_sum.iter())?;
        check_finite(
            "sums",
            [
                self.y_shift,
                self.y_sum,
                self.w_sum,
                self.wy_sum,
                self.wyy_sum,
                self.kff_sum,
                self.log_lambda_sum,
            ]
            .iter(),
        )
    }
}

/// Shifts of [`SparseStats`] (with `c = s − s'`, `y − s' = (y − s) + c`):
/// `Σ w k (y − s') = Σ w k (y − s) + c Σ w k`; the weighted target sums by
/// [`reshift_sums`], the unweighted `Σ (y − s)` with unit weights.
impl ShiftedSums for SparseStats {
    fn rows(&self) -> u64 {
        self.n
    }

    fn shift(&self) -> f64 {
        self.y_shift
    }

    fn reshift(&mut self, new_shift: f64) {
        let c = self.y_shift - new_shift;
        self.k_y.scaled_add(c, &self.k_sum);
        reshift_sums(c, self.w_sum, &mut self.wy_sum, &mut self.wyy_sum);
        self.y_sum += c * self.n as f64;
        self.y_shift = new_shift;
    }

    fn add_same_shift(&mut self, o: &Self) {
        self.gram += &o.gram;
        self.k_y += &o.k_y;
        self.k_sum += &o.k_sum;
        self.n += o.n;
        self.y_sum += o.y_sum;
        self.w_sum += o.w_sum;
        self.wy_sum += o.wy_sum;
        self.wyy_sum += o.wyy_sum;
        self.kff_sum += o.kff_sum;
        self.log_lambda_sum += o.log_lambda_sum;
    }

    fn check_sums(&self) -> Result<()> {
        check_overflow(
            &[self.y_shift, self.y_sum, self.wy_sum, self.wyy_sum],
            [self.w_sum, self.kff_sum, self.log_lambda_sum]
                .iter()
                .chain(&self.k_y)
                .chain(&self.k_sum)
                .chain(self.gram.diag()),
        )
    }
}

/// Why FITC has no GPU path (the reason of a `device="gpu"` error).
pub const FITC_CPU_ONLY: &str = "device=\"gpu\" is not available for method=\"fitc\": its per-row \
     weights need L^-1 K_uf, a triangular solve per row that stays on the CPU in float64; use \
     method=\"vfe\" or device=\"cpu\"";

/// `(K_uf K_fu, K_uf t)` on the GPU.
#[cfg(feature = "gpu")]
fn gpu_gram(
    prior: &InducingPrior,
    x: ArrayView2<'_, f64>,
    t: ArrayView2<'_, f64>,
) -> Result<(Array2<f64>, Array2<f64>)> {
    let g = crate::gpu::inducing_gram(&prior.params, prior.z.view(), x, Some(t))?;
    let b = g
        .phi_t_y
        .ok_or_else(|| Error::Internal("the GPU Gram came back without K_uf y".into()))?;
    Ok((g.phi_t_phi, b))
}

/// Without the `gpu` feature: the error of [`crate::gpu::resolve`].
#[cfg(not(feature = "gpu"))]
fn gpu_gram(
    _prior: &InducingPrior,
    _x: ArrayView2<'_, f64>,
    _t: ArrayView2<'_, f64>,
) -> Result<(Array2<f64>, Array2<f64>)> {
    crate::gpu::resolve(crate::gpu::Device::Gpu)?;
    Err(Error::Internal("a GPU without the `gpu` feature".into()))
}

/// Checks a row chunk against a prior: width, length, finiteness.
pub(crate) fn check_chunk(
    prior: &InducingPrior,
    x: ArrayView2<'_, f64>,
    y: ArrayView1<'_, f64>,
) -> Result<()> {
    Error::check_n_features(prior.z.ncols(), x.ncols())?;
    if y.len() != x.nrows() {
        return Err(Error::ShapeMismatch {
            name: "length of y (the number of rows of X)",
            expected: x.nrows(),
            got: y.len(),
        });
    }
    check_finite("X", x.iter())?;
    check_finite("y", y.iter())
}

/// FITC's `Λ_i = σ_n² + max(k(x_i, x_i) − ‖v_i‖², 0)` for the whitened
/// columns `v_i = L^{−1} k_i` of the `M × n` block `v`. The clip keeps
/// `Λ_i ≥ σ_n²` when rounding makes the Nyström variance exceed the prior
/// one.
pub(crate) fn fitc_lambda(prior: &InducingPrior, v: &[f64], n: usize) -> Vec<f64> {
    let mut q = vec![0.0; n];
    for row in v.chunks_exact(n) {
        for (qi, &t) in q.iter_mut().zip(row) {
            *qi += t * t;
        }
    }
    let (kff, s) = (prior.params.variance, prior.noise_variance);
    q.into_iter().map(|qi| s + (kff - qi).max(0.0)).collect()
}
