//! TensorSketch (`docs/math/sketches.rst`, "TensorSketch"): `n` CountSketches
//! combined by an FFT convolution, `φ(x) = IDFT(DFT(C_1 x) ⊙ … ⊙ DFT(C_n x))`,
//! no `1/√D`. The FFTs (realfft) run in `f64` for every input precision.

use ndarray::{ArrayView2, ArrayViewMut2};
use rand::Rng as _;
use realfft::num_complex::Complex;
use realfft::RealFftPlanner;

use super::for_row_chunks;
use crate::error::{Error, Result};
use crate::real::Real;
use crate::threads::Parallelism;

/// Rows per parallel task.
const CHUNK: usize = 16;

/// Hashes `h_j(a) ∈ 0..D` and signs `s_j(a)` (`true → −1`) at offset `j · d + a`.
#[derive(Clone, Debug)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub(super) struct Count {
    hashes: Vec<u32>,
    negative: Vec<bool>,
}

impl Count {
    /// Draws, factor by factor and coordinate by coordinate, a uniform hash
    /// then a fair sign. `n_features` is `D` as checked by
    /// [`super::tensor_sketch_width`].
    pub(super) fn draw(
        degree: u32,
        dim: usize,
        n_features: u32,
        rng: &mut crate::rng::Rng,
    ) -> Self {
        let total = degree as usize * dim;
        let mut hashes = Vec::with_capacity(total);
        let mut negative = Vec::with_capacity(total);
        for _ in 0..total {
            hashes.push(rng.random_range(0..n_features));
            negative.push(rng.random::<bool>());
        }
        Self { hashes, negative }
    }

    /// Checks the parameters of a sketch with these settings (see
    /// [`super::PolySketch::validate`]): `n · d` hashes, each in `0..D`,
    /// and `n · d` signs.
    ///
    /// # Errors
    /// [`Error::ShapeMismatch`] naming `hashes` or `negative` for another
    /// length; [`Error::InvalidParameter`] naming `hashes` for a bucket
    /// outside `0..D`.
    pub(super) fn check(&self, degree: u32, dim: usize, n_features: usize) -> Result<()> {
        // The parameters are in memory, so a count that saturates is wrong.
        let total = (degree as usize).saturating_mul(dim);
        Error::check_sizes(
            total,
            [
                ("length of hashes (degree x dim)", self.hashes.len()),
                ("length of negative (degree x dim)", self.negative.len()),
            ],
        )?;
        if let Some(h) = self.hashes.iter().find(|&&h| h as usize >= n_features) {
            return Err(Error::invalid(
                "hashes",
                format!("buckets are in 0..{n_features} (n_features), got {h}"),
            ));
        }
        Ok(())
    }

    /// The hashes, `n · d` entries.
    pub(super) fn hashes(&self) -> &[u32] {
        &self.hashes
    }

    /// The signs (`true` means −1), `n · d` entries.
    pub(super) fn negative(&self) -> &[bool] {
        &self.negative
    }

    /// `docs/math/sketches.rst`, "TensorSketch" for every row. Returns
    /// whether every feature is finite.
    pub(super) fn transform<T: Real>(
        &self,
        n_features: usize,
        x: ArrayView2<T>,
        out: ArrayViewMut2<T>,
        par: Parallelism,
    ) -> bool {
        let dim = x.ncols();
        let degree = self.hashes.len() / dim.max(1);
        let mut planner = RealFftPlanner::<f64>::new();
        let fwd = planner.plan_fft_forward(n_features);
        let inv = planner.plan_fft_inverse(n_features);
        let spec_len = n_features / 2 + 1;
        let scratch_len = fwd.get_scratch_len().max(inv.get_scratch_len());
        let inv_d = 1.0 / n_features as f64;
        let zero = Complex::new(0.0, 0.0);
        for_row_chunks(
            x,
            out,
            CHUNK,
            par,
            || {
                (
                    vec![0.0_f64; n_features],
                    vec![zero; spec_len],
                    vec![zero; spec_len],
                    vec![zero; scratch_len],
                )
            },
            |(buf, spec, acc, scratch), xc, mut oc| {
                for (xr, mut orow) in xc.rows().into_iter().zip(oc.rows_mut()) {
                    for j in 0..degree {
                        buf.fill(0.0);
                        let h = &self.hashes[j * dim..(j + 1) * dim];
                        let neg = &self.negative[j * dim..(j + 1) * dim];
                        for ((&v, &k), &ng) in xr.iter().zip(h).zip(neg) {
                            let v = v.to_f64_exact();
                            buf[k as usize] += if ng { -v } else { v };
                        }
                        let target: &mut [Complex<f64>] = if j == 0 { acc } else { spec };
                        // Lengths match the plan by construction.
                        let _ = fwd.process_with_scratch(buf, target, scratch);
                        if j > 0 {
                            acc.iter_mut().zip(spec.iter()).for_each(|(a, &s)| *a *= s);
                        }
                    }
                    // Products of real spectra: DC and Nyquist are real up to rounding.
                    acc[0].im = 0.0;
                    if n_features.is_multiple_of(2) {
                        acc[spec_len - 1].im = 0.0;
                    }
                    let _ = inv.process_with_scratch(acc, buf, scratch);
                    for (o, &v) in orow.iter_mut().zip(buf.iter()) {
                        *o = T::from_f64_lossy(v * inv_d);
                    }
                }
            },
        )
    }
}
