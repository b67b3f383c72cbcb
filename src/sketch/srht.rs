//! TensorSRHT (`docs/math/sketches.rst`, "TensorSRHT"): per block and factor,
//! random signs, an unnormalized FWHT of the zero-padded row and a random
//! permutation. The `D × d` weights are never formed; each row needs `n · B`
//! transforms of length `d'` in a per-thread scratch buffer.

use ndarray::{ArrayView2, ArrayViewMut2};
use rand::seq::SliceRandom;
use rand::Rng as _;

use super::{for_row_chunks, padded_dim, PolySketch};
use crate::error::{Error, Result};
use crate::fwht::signed_transform;
use crate::real::{row_slice, Real};
use crate::threads::Parallelism;

/// Rows per parallel task.
const CHUNK: usize = 16;

/// Signs and permutations of every (block, factor) pair, stored at offset
/// `(b · n + j) · d'`. Sign codes: real `0 → +1, 1 → −1`; complex
/// `k → i^k` (uniform on {1, i, −1, −i}).
#[derive(Clone, Debug)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub(super) struct Srht {
    d_pad: usize,
    blocks: usize,
    codes: Vec<u8>,
    perms: Vec<u32>,
}

impl Srht {
    /// Draws, block by block and factor by factor, `d'` sign codes then a
    /// uniform permutation of `0..d'` (Fisher–Yates). Errors: parameters the
    /// system cannot allocate (naming `n_components`).
    pub(super) fn draw(
        complex: bool,
        degree: u32,
        dim: usize,
        n_features: usize,
        rng: &mut crate::rng::Rng,
    ) -> Result<Self> {
        let d_pad = padded_dim(dim)?;
        let blocks = n_features.div_ceil(d_pad);
        let what = format!(
            "the TensorSRHT signs and permutations ({blocks} blocks x {degree} factors x {d_pad})"
        );
        let total =
            crate::alloc::checked_count("n_components", &what, &[blocks, degree as usize, d_pad])?;
        let mut codes: Vec<u8> = crate::alloc::try_zeroed_vec("n_components", &what, total)?;
        let mut perms: Vec<u32> = crate::alloc::try_zeroed_vec("n_components", &what, total)?;
        for (code, perm) in codes
            .chunks_exact_mut(d_pad)
            .zip(perms.chunks_exact_mut(d_pad))
        {
            for c in code.iter_mut() {
                *c = if complex {
                    rng.random_range(0..4u8)
                } else {
                    u8::from(rng.random::<bool>())
                };
            }
            perm.iter_mut().zip(0u32..).for_each(|(p, i)| *p = i);
            perm.shuffle(rng);
        }
        Ok(Self {
            d_pad,
            blocks,
            codes,
            perms,
        })
    }

    /// Checks the parameters of a sketch with these settings (see
    /// [`PolySketch::validate`]): `d'` the padded `dim`, `⌈D/d'⌉` blocks,
    /// `B · n · d'` sign codes (`0..2` real, `0..4` complex) and
    /// permutation entries, each run of `d'` a permutation of `0..d'`
    /// (`O(B · n · d')`).
    ///
    /// # Errors
    /// [`Error::ShapeMismatch`] naming `d_pad`, `blocks`, `codes` or
    /// `perms`; [`Error::InvalidParameter`] naming `codes` or `perms` for
    /// an entry out of range or a repeated permutation entry.
    pub(super) fn check(
        &self,
        complex: bool,
        degree: u32,
        dim: usize,
        n_features: usize,
    ) -> Result<()> {
        let d_pad = padded_dim(dim)?;
        if self.d_pad != d_pad {
            return Err(Error::ShapeMismatch {
                name: "d_pad (dim padded to a power of two)",
                expected: d_pad,
                got: self.d_pad,
            });
        }
        let blocks = n_features.div_ceil(d_pad);
        if self.blocks != blocks {
            return Err(Error::ShapeMismatch {
                name: "blocks (n_features / d_pad, rounded up)",
                expected: blocks,
                got: self.blocks,
            });
        }
        // The parameters are in memory, so a count that saturates is wrong.
        let total = blocks.saturating_mul(degree as usize).saturating_mul(d_pad);
        Error::check_sizes(
            total,
            [
                (
                    "length of codes (blocks x degree x d_pad)",
                    self.codes.len(),
                ),
                (
                    "length of perms (blocks x degree x d_pad)",
                    self.perms.len(),
                ),
            ],
        )?;
        let n_codes = if complex { 4 } else { 2 };
        if let Some(c) = self.codes.iter().find(|&&c| c >= n_codes) {
            return Err(Error::invalid(
                "codes",
                format!("sign codes are below {n_codes}, got {c}"),
            ));
        }
        // Each run of `d'` entries is a permutation of `0..d'`: every entry
        // in range (the transform indexes a buffer of `d'` by them) and none
        // repeated.
        let mut seen = vec![false; d_pad];
        for (k, perm) in self.perms.chunks_exact(d_pad).enumerate() {
            seen.fill(false);
            for &p in perm {
                match seen.get_mut(p as usize) {
                    Some(s) if !*s => *s = true,
                    _ => {
                        return Err(Error::invalid(
                            "perms",
                            format!(
                                "run {k} is not a permutation of 0..{d_pad} (entry {p} out of \
                                 range or repeated)"
                            ),
                        ))
                    }
                }
            }
        }
        Ok(())
    }

    /// The padded dimension `d'`.
    pub(super) fn d_pad(&self) -> usize {
        self.d_pad
    }

    /// The sign codes (see the type's docs), `B · n · d'` entries.
    pub(super) fn codes(&self) -> &[u8] {
        &self.codes
    }

    /// The permutations, `B · n · d'` entries.
    pub(super) fn perms(&self) -> &[u32] {
        &self.perms
    }

    /// The multipliers `(Re z, Im z)` of every sign code, as `T`.
    fn multipliers<T: Real>(&self, complex: bool) -> (Vec<T>, Vec<T>) {
        let one = T::one();
        let zero = T::zero();
        let re = self
            .codes
            .iter()
            .map(|&c| match (complex, c) {
                (false, 0) | (true, 0) => one,
                (false, _) | (true, 2) => -one,
                _ => zero,
            })
            .collect();
        let im = if complex {
            self.codes
                .iter()
                .map(|&c| match c {
                    1 => one,
                    3 => -one,
                    _ => zero,
                })
                .collect()
        } else {
            Vec::new()
        };
        (re, im)
    }

    /// The factor projections `v_{b,j}(x)` of every row (see
    /// [`PolySketch::factor_projections_into`]): factor `j` in columns
    /// `j·w … (j+1)·w − 1`, `w` the sketch width (`[Re | Im]` when complex).
    pub(super) fn project(&self, sk: &PolySketch, x: ArrayView2<f64>, mut out: ArrayViewMut2<f64>) {
        let complex = sk.complex;
        let n = sk.degree as usize;
        let nf = sk.n_features;
        let w = sk.width();
        let dp = self.d_pad;
        let (re_mul, im_mul) = self.multipliers::<f64>(complex);
        let mut bre = vec![0.0; dp];
        let mut bim = vec![0.0; dp];
        let mut xbuf = Vec::new();
        for (xr, mut o) in x.rows().into_iter().zip(out.rows_mut()) {
            let xr = row_slice(xr, &mut xbuf);
            for b in 0..self.blocks {
                let lo = b * dp;
                let cols = dp.min(nf - lo);
                for j in 0..n {
                    let k = (b * n + j) * dp;
                    let perm = &self.perms[k..k + cols];
                    signed_transform(&mut bre, xr, &re_mul[k..k + dp]);
                    for (r, &p) in perm.iter().enumerate() {
                        o[j * w + lo + r] = bre[p as usize];
                    }
                    if complex {
                        signed_transform(&mut bim, xr, &im_mul[k..k + dp]);
                        for (r, &p) in perm.iter().enumerate() {
                            o[j * w + nf + lo + r] = bim[p as usize];
                        }
                    }
                }
            }
        }
    }

    /// `docs/math/sketches.rst`, "TensorSRHT" for every row; complex products
    /// for complex signs (`Re` and `Im` of `FWHT(z ⊙ x)` are two real
    /// transforms). Each row runs through [`sketch_row`] (plain slice loops
    /// built for the widest SIMD the CPU offers). Returns whether every
    /// feature is finite.
    pub(super) fn transform<T: Real>(
        &self,
        sk: &PolySketch,
        x: ArrayView2<T>,
        out: ArrayViewMut2<T>,
        par: Parallelism,
    ) -> bool {
        let (re_mul, im_mul) = self.multipliers::<T>(sk.complex);
        let plan = RowPlan {
            re_mul: &re_mul,
            im_mul: &im_mul,
            perms: &self.perms,
            blocks: self.blocks,
            degree: sk.degree as usize,
            n_features: sk.n_features,
            d_pad: self.d_pad,
            complex: sk.complex,
            scale: T::from_f64_lossy(1.0 / (sk.n_features as f64).sqrt()),
        };
        let dp = self.d_pad;
        for_row_chunks(
            x,
            out,
            CHUNK,
            par,
            || (vec![T::zero(); dp], vec![T::zero(); dp], Vec::new()),
            |(bre, bim, xbuf), xc, mut oc| {
                for (xr, mut orow) in xc.rows().into_iter().zip(oc.rows_mut()) {
                    let Some(o) = orow.as_slice_mut() else {
                        unreachable!("transform_into checks that output rows are contiguous")
                    };
                    sketch_row(&plan, row_slice(xr, xbuf), o, bre, bim);
                }
            },
        )
    }
}

/// The fixed inputs of [`Srht::transform`] for one row.
struct RowPlan<'a, T> {
    /// `Re z` of every sign code (`(b·n + j)·d'` offsets, as the codes).
    re_mul: &'a [T],
    /// `Im z` (empty for real signs).
    im_mul: &'a [T],
    perms: &'a [u32],
    blocks: usize,
    degree: usize,
    n_features: usize,
    d_pad: usize,
    complex: bool,
    /// `1/√D`.
    scale: T,
}

/// One row of `docs/math/sketches.rst`, "TensorSRHT" into `o` (`D` values): per
/// block and factor the signed, padded FWHT of `x`, permuted, multiplied into
/// the block (complex: `[Re | Im]` halves), then the scale `1/√D`. Every step
/// is one rounding per value (no fused multiply-adds), so the SIMD width of
/// [`sketch_row`] does not change the result.
#[inline(always)]
fn sketch_row_body<T: Real>(
    plan: &RowPlan<'_, T>,
    x: &[T],
    o: &mut [T],
    bre: &mut [T],
    bim: &mut [T],
) {
    let (nf, dp) = (plan.n_features, plan.d_pad);
    for b in 0..plan.blocks {
        let lo = b * dp;
        let cols = dp.min(nf - lo);
        for j in 0..plan.degree {
            let k = (b * plan.degree + j) * dp;
            let perm = &plan.perms[k..k + cols];
            signed_transform(bre, x, &plan.re_mul[k..k + dp]);
            if !plan.complex {
                let dst = &mut o[lo..lo + cols];
                if j == 0 {
                    for (d, &p) in dst.iter_mut().zip(perm) {
                        *d = bre[p as usize];
                    }
                } else {
                    for (d, &p) in dst.iter_mut().zip(perm) {
                        *d *= bre[p as usize];
                    }
                }
                continue;
            }
            signed_transform(bim, x, &plan.im_mul[k..k + dp]);
            let (ore, oim) = o.split_at_mut(nf);
            let ore = &mut ore[lo..lo + cols];
            let oim = &mut oim[lo..lo + cols];
            for ((a, c), &p) in ore.iter_mut().zip(oim.iter_mut()).zip(perm) {
                let (u, v) = (bre[p as usize], bim[p as usize]);
                if j == 0 {
                    (*a, *c) = (u, v);
                } else {
                    (*a, *c) = (*a * u - *c * v, *a * v + *c * u);
                }
            }
        }
    }
    let scale = plan.scale;
    o.iter_mut().for_each(|v| *v *= scale);
}

widest_simd! {
    /// [`sketch_row_body`] with the widest SIMD the CPU offers.
    fn sketch_row<T: Real>(
        plan: &RowPlan<'_, T>,
        x: &[T],
        o: &mut [T],
        bre: &mut [T],
        bim: &mut [T],
    ) = sketch_row_body;
}
