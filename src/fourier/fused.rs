//! The fused dense transform of random Fourier features
//! (`docs/math/fourier.rst`, "Feature variants"): projection, phase, cosine
//! (and sine) and scale in one pass over the output.
//!
//! For a tile of `MR` rows × `NR` columns, `p_ij = Σ_k x_ik W_jk` is
//! accumulated in registers over the `d` inputs (`MR × NR / lanes` vector
//! accumulators, `W` packed per call into panels of `NR` columns, `d × NR`
//! each, and `x` into groups of `MR` rows, `d × MR` each, so the inner loop
//! reads both sequentially), then `σ√(2/D) cos(p_ij + b_j)` (`cos_bias`) or
//! `cos p_ij`, `sin p_ij` (`cos_sin`) are evaluated by the vector kernels of
//! [`super::sincos`] on the accumulators and each output element is stored
//! once. The output is never read, so a fresh (untouched) output costs one
//! write per element; the GEMM + cosine tile path of
//! [`super::features`] writes it twice and reads it once.
//!
//! Each output element is a fixed sequence of operations on its own row of
//! `x` and column of `W` (the `k` order is `0..d`; padding rows and columns
//! are never mixed in), so the result does not depend on the tiling, the
//! row chunks or the number of threads. Angles with `|a| > FAST_LIMIT`
//! are recomputed element by element through `std` (the vector reduction
//! loses accuracy far out).
//!
//! Instruction sets are chosen at run time through [`crate::simd`]
//! ([`Isa::detect`], no `target-cpu` flags needed): AVX-512 (`6 × 4`
//! registers of 16 `f32` / 8 `f64`) and AVX2 + FMA (`4 × 3` registers),
//! one generic tile over the registers for the accumulation and the
//! vectorized kernels of [`super::sincos`] for the cosines. Other CPUs use
//! the tile transform of [`super::features`]. Both instruction sets do the
//! same fused multiply-adds in the same order, so their results are
//! bit-identical.

use std::borrow::Cow;
use std::sync::OnceLock;

use ndarray::{Array1, Array2, ArrayView2, ArrayViewMut2, Axis};
use num_traits::{Float, Zero};
use rayon::prelude::*;

use super::features::Variant;
use super::sincos::{cos_f32, sincos_f32, sincos_fast, FAST_LIMIT};
use crate::real::{cast_slice, cast_slice_mut, cast_view, same_type, Real};
use crate::simd::{Isa, Simd, Vector, WithSimd};
use crate::threads::Parallelism;

/// Largest input dimension `d` the fused transform is used for: beyond it
/// a `d × NR` panel of `W` no longer fits the L1/L2 caches and the library
/// GEMM (which blocks over `d`) is faster.
pub const MAX_FUSED_FEATURES: usize = 256;

/// Bytes of packed `W` per column block (a block of panels stays in L2
/// while the row groups of a chunk stream through it).
const BLOCK_BYTES: usize = 256 * 1024;

/// Row groups per parallel work item (`MR · GROUPS_PER_CHUNK` rows).
const GROUPS_PER_CHUNK: usize = 16;

/// The fixed inputs of one fused transform: `W` packed into panels, the
/// phases (zero-padded to whole panels), the layout and the scale.
struct Plan<'a, T: Clone> {
    d: usize,
    m: usize,
    n_components: usize,
    /// Panel `p`, input `k`, lane `c` at `(p·d + k)·NR + c` (`W[p·NR + c, k]`,
    /// zero beyond `m`): kept by the map (see [`PackedPanels`]).
    panels: Cow<'a, [T]>,
    /// `b` padded with zeros to `panels · NR` (all zeros for `cos_sin`).
    phases: Vec<T>,
    variant: Variant,
    scale: f64,
    /// Panels per column block (see [`BLOCK_BYTES`]).
    block: usize,
}

/// `W` (`m × d`) packed into the panels of [`Plan`], `nr` lanes each.
fn pack_panels<T: Real>(w: &Array2<f64>, nr: usize) -> Vec<T> {
    let (m, d) = w.dim();
    let mut panels = vec![T::zero(); m.div_ceil(nr) * d * nr];
    for (j, row) in w.rows().into_iter().enumerate() {
        let (p, c) = (j / nr, j % nr);
        let panel = &mut panels[p * d * nr..(p + 1) * d * nr];
        for (lane, wj) in panel.chunks_exact_mut(nr).zip(row) {
            lane[c] = T::from_f64_lossy(*wj);
        }
    }
    panels
}

/// The packed panels of one projection, made on the first fused transform
/// in each precision and kept by the map for the next ones: packing costs
/// a pass over `W` that a transform of a few rows would otherwise repeat
/// at every call (most of its time for one row), for `m·d` values of
/// memory per precision. Each is kept for the panel width it was first
/// packed for; a transform of another width (another instruction set)
/// packs its own.
#[derive(Debug, Default)]
pub(super) struct PackedPanels {
    f32: OnceLock<(usize, Vec<f32>)>,
    f64: OnceLock<(usize, Vec<f64>)>,
}

impl PackedPanels {
    /// The panels of `w` with `nr` lanes in `T`: the kept ones, made on
    /// first use.
    fn get<T: Real>(&self, w: &Array2<f64>, nr: usize) -> Cow<'_, [T]> {
        fn kept<'s, U: Real, T: Real>(
            slot: &'s OnceLock<(usize, Vec<U>)>,
            w: &Array2<f64>,
            nr: usize,
        ) -> Option<&'s [T]> {
            let (width, panels) = slot.get_or_init(|| (nr, pack_panels::<U>(w, nr)));
            (*width == nr).then(|| cast_slice(panels)).flatten()
        }
        let found = if same_type::<T, f32>() {
            kept::<f32, T>(&self.f32, w, nr)
        } else {
            kept::<f64, T>(&self.f64, w, nr)
        };
        found.map_or_else(|| Cow::Owned(pack_panels(w, nr)), Cow::Borrowed)
    }
}

impl<'a, T: Real> Plan<'a, T> {
    fn new(
        w: &Array2<f64>,
        packed: &'a PackedPanels,
        phases: Option<&Array1<f64>>,
        variant: Variant,
        n_components: usize,
        scale: f64,
        nr: usize,
    ) -> Self {
        let (m, d) = w.dim();
        let n_panels = m.div_ceil(nr);
        let panels = packed.get::<T>(w, nr);
        let mut padded = vec![T::zero(); n_panels * nr];
        if let Some(b) = phases {
            for (v, bj) in padded.iter_mut().zip(b.iter()) {
                *v = T::from_f64_lossy(*bj);
            }
        }
        let panel_bytes = d * nr * std::mem::size_of::<T>();
        Plan {
            d,
            m,
            n_components,
            panels,
            phases: padded,
            variant,
            scale,
            block: (BLOCK_BYTES / panel_bytes).max(1),
        }
    }
}

/// `cos a` by the vector kernels of [`super::sincos`] (`|a| ≤ FAST_LIMIT`):
/// `cos_f32` for `f32`, the `f64` kernel for `f64`.
#[inline(always)]
fn cos_fast<T: Real>(a: T) -> T {
    if same_type::<T, f32>() {
        // For T = f32 both conversions are exact (identity).
        T::from_f64_lossy(f64::from(cos_f32(a.to_f64_exact() as f32)))
    } else {
        T::from_f64_lossy(sincos_fast(a.to_f64_exact()).1)
    }
}

/// `(sin a, cos a)` by the vector kernels of [`super::sincos`]
/// (`|a| ≤ FAST_LIMIT`): `sincos_f32` for `f32`, the `f64` kernel for `f64`.
#[inline(always)]
fn sin_cos_fast<T: Real>(a: T) -> (T, T) {
    if same_type::<T, f32>() {
        // For T = f32 all conversions are exact (identity).
        let (s, c) = sincos_f32(a.to_f64_exact() as f32);
        (
            T::from_f64_lossy(f64::from(s)),
            T::from_f64_lossy(f64::from(c)),
        )
    } else {
        let (s, c) = sincos_fast(a.to_f64_exact());
        (T::from_f64_lossy(s), T::from_f64_lossy(c))
    }
}

/// One `MR × NR` tile (`NR = NV · LANES`): accumulates `p = x_g W_pᵀ` over
/// `k = 0..d` in `MR × NV` registers (`xg`: the row group packed `d × MR`,
/// `wp`: the panel `d × NR`), evaluates the features and writes the first
/// `rows` rows and `cols` columns of the tile at `out[r·D + j0 ..]` (and
/// the sines at `+ m` for `cos_sin`).
///
/// # Safety
/// The CPU must support `V`'s instruction set; `xg` holds `d · MR` and
/// `wp` `d · NR` elements.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn tile<V: Vector, const MR: usize, const NV: usize, const NR: usize>(
    plan: &Plan<V::T>,
    xg: &[V::T],
    wp: &[V::T],
    b: &[V::T],
    out: &mut [V::T],
    j0: usize,
    rows: usize,
    cols: usize,
) {
    debug_assert!(NR == NV * V::LANES && xg.len() >= plan.d * MR && wp.len() >= plan.d * NR);
    let (xp, wpp) = (xg.as_ptr(), wp.as_ptr());
    // SAFETY (this block): the instruction set and the lengths are the
    // caller's contract; every offset below is < d·MR resp. d·NR.
    let angles = unsafe {
        let mut acc = [[V::zero(); NV]; MR];
        for k in 0..plan.d {
            let w: [V; NV] = std::array::from_fn(|v| V::load(wpp.add(k * NR + v * V::LANES)));
            for (r, acc_r) in acc.iter_mut().enumerate() {
                let xv = V::splat(xp.add(k * MR + r));
                for (a, wv) in acc_r.iter_mut().zip(w) {
                    *a = xv.fmadd(wv, *a);
                }
            }
        }
        let mut angles = [[<V::T>::zero(); NR]; MR];
        for (acc_r, ang_r) in acc.iter().zip(angles.iter_mut()) {
            for (v, a) in acc_r.iter().enumerate() {
                a.store(ang_r.as_mut_ptr().add(v * V::LANES));
            }
        }
        angles
    };
    let acc = angles;
    let ld = plan.n_components;
    let full = rows == MR && cols == NR;
    match plan.variant {
        Variant::CosBias => {
            let b: &[V::T] = &b[..NR];
            let scale = <V::T>::from_f64_lossy(plan.scale);
            let limit = <V::T>::from_f64_lossy(FAST_LIMIT);
            let mut res = [[<V::T>::zero(); NR]; MR];
            let mut far = false;
            for r in 0..MR {
                for c in 0..NR {
                    let a = acc[r][c] + b[c];
                    far |= a.abs() > limit;
                    res[r][c] = cos_fast(a) * scale;
                }
            }
            if far {
                for r in 0..MR {
                    for c in 0..NR {
                        let a = acc[r][c] + b[c];
                        if a.abs() > limit {
                            let v = a.to_f64_exact().cos() * scale.to_f64_exact();
                            res[r][c] = <V::T>::from_f64_lossy(v);
                        }
                    }
                }
            }
            store::<V::T, MR, NR>(&res, out, ld, j0, rows, cols, full);
        }
        Variant::CosSin => {
            let scale = <V::T>::from_f64_lossy(plan.scale);
            let limit = <V::T>::from_f64_lossy(FAST_LIMIT);
            let mut cs = [[<V::T>::zero(); NR]; MR];
            let mut sn = [[<V::T>::zero(); NR]; MR];
            let mut far = false;
            for r in 0..MR {
                for c in 0..NR {
                    let a = acc[r][c];
                    far |= a.abs() > limit;
                    let (s, co) = sin_cos_fast(a);
                    cs[r][c] = co * scale;
                    sn[r][c] = s * scale;
                }
            }
            if far {
                for r in 0..MR {
                    for c in 0..NR {
                        let a = acc[r][c].to_f64_exact();
                        if a.abs() > FAST_LIMIT {
                            let (s, co) = a.sin_cos();
                            cs[r][c] = <V::T>::from_f64_lossy(co * plan.scale);
                            sn[r][c] = <V::T>::from_f64_lossy(s * plan.scale);
                        }
                    }
                }
            }
            store::<V::T, MR, NR>(&cs, out, ld, j0, rows, cols, full);
            store::<V::T, MR, NR>(&sn, out, ld, j0 + plan.m, rows, cols, full);
        }
    }
}

/// Writes the first `rows × cols` of a tile at column `j0` of rows of
/// length `ld` (`full`: the whole tile, with fixed-length copies).
#[inline(always)]
fn store<T: Real, const MR: usize, const NR: usize>(
    res: &[[T; NR]; MR],
    out: &mut [T],
    ld: usize,
    j0: usize,
    rows: usize,
    cols: usize,
    full: bool,
) {
    if full {
        for (r, row) in res.iter().enumerate() {
            out[r * ld + j0..r * ld + j0 + NR].copy_from_slice(row);
        }
    } else {
        for (r, row) in res.iter().enumerate().take(rows) {
            for (o, v) in out[r * ld + j0..r * ld + j0 + cols].iter_mut().zip(row) {
                *o = *v;
            }
        }
    }
}

/// One work item: the rows `x` (at most `MR · GROUPS_PER_CHUNK`) into
/// `out` (`x.nrows() × D`, row-major). `x` is packed into row groups
/// (`d × MR`, zero rows pad the last group), then column block by column
/// block, every row group runs through the block's panels.
///
/// # Safety
/// The CPU must support `V`'s instruction set; `plan` was made with
/// `NR = NV · V::LANES` columns per panel.
#[inline(always)]
unsafe fn chunk<V: Vector, const MR: usize, const NV: usize, const NR: usize>(
    plan: &Plan<V::T>,
    x: ArrayView2<V::T>,
    out: &mut [V::T],
) {
    let (n, d) = (x.nrows(), plan.d);
    let groups = n.div_ceil(MR);
    let mut xp = vec![<V::T>::zero(); groups * d * MR];
    for (g, xg) in xp.chunks_exact_mut(d * MR).enumerate() {
        for r in 0..MR.min(n - g * MR) {
            for (k, v) in x.row(g * MR + r).iter().enumerate() {
                xg[k * MR + r] = *v;
            }
        }
    }
    let ld = plan.n_components;
    let n_panels = plan.m.div_ceil(NR);
    for p0 in (0..n_panels).step_by(plan.block) {
        let p1 = (p0 + plan.block).min(n_panels);
        for (g, xg) in xp.chunks_exact(d * MR).enumerate() {
            let rows = MR.min(n - g * MR);
            let out_g = &mut out[g * MR * ld..(g * MR + rows) * ld];
            for p in p0..p1 {
                let j0 = p * NR;
                // SAFETY: the instruction set is the caller's contract; the
                // group holds d·MR and the panel d·NR elements.
                unsafe {
                    tile::<V, MR, NV, NR>(
                        plan,
                        xg,
                        &plan.panels[p * d * NR..(p + 1) * d * NR],
                        &plan.phases[j0..j0 + NR],
                        out_g,
                        j0,
                        rows,
                        NR.min(plan.m - j0),
                    )
                };
            }
        }
    }
    if plan.variant == Variant::CosSin && plan.n_components > 2 * plan.m {
        for row in out.chunks_exact_mut(ld) {
            row[2 * plan.m..]
                .iter_mut()
                .for_each(|v| *v = <V::T>::zero());
        }
    }
}

/// The register tile of the fused transform for one register type: `MR`
/// rows by `NV` registers of `LANES` columns (`NR = NV · LANES`).
trait Shape: Vector {
    /// Rows per tile.
    const MR: usize;
    /// Columns per panel (`NV · LANES`).
    const NR: usize;
    /// [`chunk`] with this register and tile.
    ///
    /// # Safety
    /// The CPU must support the register's instruction set; `plan` was made
    /// with `NR` columns per panel.
    unsafe fn chunk(plan: &Plan<Self::T>, x: ArrayView2<Self::T>, out: &mut [Self::T]);
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{chunk, ArrayView2, Plan, Shape};
    use crate::simd::x86::{F32x16, F32x8, F64x4, F64x8};

    /// Implements [`Shape`] for a register type: `MR × NV` registers
    /// per tile, `NR` columns per panel.
    macro_rules! shape {
        ($v:ty, $mr:literal, $nv:literal, $nr:literal) => {
            impl Shape for $v {
                const MR: usize = $mr;
                const NR: usize = $nr;
                #[inline(always)]
                unsafe fn chunk(plan: &Plan<Self::T>, x: ArrayView2<Self::T>, out: &mut [Self::T]) {
                    // SAFETY: the caller's contract.
                    unsafe { chunk::<Self, $mr, $nv, $nr>(plan, x, out) }
                }
            }
        };
    }

    // AVX-512: 6 × 4 registers of 16 `f32` / 8 `f64`; AVX2: 4 × 3.
    shape!(F32x16, 6, 4, 64);
    shape!(F64x8, 6, 4, 32);
    shape!(F32x8, 4, 3, 24);
    shape!(F64x4, 4, 3, 12);
}

/// One work item of [`go`] as an operation of [`crate::simd`]: [`chunk`]
/// compiled for the instruction set of `V`.
struct Chunk<'a, 'x, V: Vector> {
    plan: &'a Plan<'a, V::T>,
    x: ArrayView2<'x, V::T>,
    out: &'a mut [V::T],
}

impl<V: Shape> WithSimd<V::Simd> for Chunk<'_, '_, V> {
    type Output = ();
    #[inline(always)]
    fn with_simd(self, _: V::Simd) {
        // SAFETY: the token proves the register's instruction set; `go`
        // made the plan with `V::NR` columns per panel.
        unsafe { V::chunk(self.plan, self.x, self.out) }
    }
}

/// `W`, its kept panels, the phases, the variant, `D` and the scale.
type PlanArgs<'a> = (
    &'a Array2<f64>,
    &'a PackedPanels,
    Option<&'a Array1<f64>>,
    Variant,
    usize,
    f64,
);

/// Runs the transform with the register type `V`: the plan, then the
/// chunks of `x`, each through `simd`.
fn go<V: Shape>(
    simd: V::Simd,
    (w, packed, phases, variant, n_components, scale): PlanArgs,
    x: ArrayView2<V::T>,
    out: &mut [V::T],
    par: Parallelism,
) {
    let plan = Plan::<V::T>::new(w, packed, phases, variant, n_components, scale, V::NR);
    run(
        V::MR * GROUPS_PER_CHUNK,
        x,
        out,
        n_components,
        par,
        |x, out| {
            simd.vectorize(Chunk::<V> {
                plan: &plan,
                x,
                out,
            })
        },
    );
}

/// The whole fused transform as an operation of [`crate::simd`] (no
/// portable build).
struct Dense<'a, 'x, T> {
    plan: PlanArgs<'a>,
    x: ArrayView2<'x, T>,
    out: &'a mut [T],
    par: Parallelism,
}

impl<S: Simd, T: Real> WithSimd<S> for Dense<'_, '_, T>
where
    S::F32: Shape,
    S::F64: Shape,
{
    type Output = ();
    #[inline(always)]
    fn with_simd(self, simd: S) {
        let Dense { plan, x, out, par } = self;
        if let (Some(x), Some(out)) = (cast_view(x), cast_slice_mut(out)) {
            go::<S::F32>(simd, plan, x, out, par);
        } else if let (Some(x), Some(out)) = (cast_view(x), cast_slice_mut(out)) {
            go::<S::F64>(simd, plan, x, out, par);
        }
    }
}

/// Runs the chunks of `x` (in parallel with [`Parallelism::Rayon`]) through
/// `f`, each on its own rows of `out`.
fn run<T: Real>(
    rows_per_chunk: usize,
    x: ArrayView2<T>,
    out: &mut [T],
    n_components: usize,
    par: Parallelism,
    f: impl Fn(ArrayView2<T>, &mut [T]) + Sync,
) {
    let xs = x.axis_chunks_iter(Axis(0), rows_per_chunk);
    let len = rows_per_chunk * n_components;
    if par.is_parallel() {
        xs.into_par_iter()
            .zip(out.par_chunks_mut(len))
            .for_each(|(xc, oc)| f(xc, oc));
    } else {
        xs.zip(out.chunks_mut(len)).for_each(|(xc, oc)| f(xc, oc));
    }
}

/// `φ(x)` of the dense map (`w`: `m × d`, `phases` for `cos_bias`) into
/// `out` (`n × D`, C-contiguous) by the fused kernel for `isa`, which the
/// CPU must support (see [`Isa::available`]; does nothing for
/// [`Isa::Portable`] and on other architectures). Inputs are assumed
/// checked by the caller (shapes, finiteness).
#[allow(clippy::too_many_arguments)]
pub(super) fn transform_dense<T: Real>(
    w: &Array2<f64>,
    packed: &PackedPanels,
    phases: Option<&Array1<f64>>,
    variant: Variant,
    n_components: usize,
    scale: f64,
    x: ArrayView2<T>,
    mut out: ArrayViewMut2<T>,
    par: Parallelism,
    isa: Isa,
) {
    let Some(out) = out.as_slice_mut() else {
        return;
    };
    isa.dispatch_wide(Dense {
        plan: (w, packed, phases, variant, n_components, scale),
        x,
        out,
        par,
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fourier::sincos::SINCOS_F32_BOUND;
    use crate::fourier::{FourierConfig, FourierFeatures, Method, Projection, Sampler};
    use ndarray::Array2;
    use rand::SeedableRng;
    use rand_distr::{Distribution, StandardNormal};

    /// The instruction sets of [`Isa::available`] the fused kernel has a
    /// build for.
    fn fused_isas() -> Vec<Isa> {
        Isa::available()
            .into_iter()
            .filter(|&isa| isa != Isa::Portable)
            .collect()
    }

    /// Unit roundoff of `T`.
    fn unit<T: Real>() -> f64 {
        if std::mem::size_of::<T>() == 4 {
            f64::powi(2.0, -24)
        } else {
            f64::powi(2.0, -53)
        }
    }

    /// `γ_K = K u / (1 − K u)`: the bound on the relative (to `Σ|x_k w_k|`)
    /// rounding error of a `K`-term dot product in any order, fused or not.
    fn gamma(k: usize, u: f64) -> f64 {
        k as f64 * u / (1.0 - k as f64 * u)
    }

    /// The `f64` oracle `φ(x)` of a dense map with `W`, `b` rounded to `T`
    /// (as the transform uses them), and a per-element bound on the error
    /// of a `T` transform: the dot product (`γ_d` in `T`, plus the
    /// oracle's own `γ_d` in `f64`), the rounding of `p + b` (`cos_bias`),
    /// the cosine kernel (`f32`: `9·2^-24 + 6.5e-9` for `cos_bias`,
    /// `SINCOS_F32_BOUND` for `cos_sin`, module docs of `sincos`; `f64`:
    /// `2.5e-16`, tested there), and the roundings of the scaled result.
    fn oracle<T: Real>(map: &FourierFeatures, x: &Array2<T>) -> (Array2<f64>, Array2<f64>) {
        let Projection::Dense(w) = &map.projection else {
            panic!("dense maps only")
        };
        let (m, d) = w.dim();
        let u = unit::<T>();
        let cos_err = if u > 1e-10 { 9.0 * u + 6.5e-9 } else { 2.5e-16 };
        let sincos_err = if u > 1e-10 { SINCOS_F32_BOUND } else { 2.5e-16 };
        let round = |v: f64| T::from_f64_lossy(v).to_f64_exact();
        let scale = map.scale();
        let n = x.nrows();
        let mut val = Array2::zeros((n, map.n_components));
        let mut bound = Array2::zeros((n, map.n_components));
        for i in 0..n {
            for j in 0..m {
                let (mut p, mut s) = (0.0, 0.0);
                for k in 0..d {
                    let t = x[[i, k]].to_f64_exact() * round(w[[j, k]]);
                    p += t;
                    s += t.abs();
                }
                let dot_err = (gamma(d, u) + gamma(d, f64::EPSILON / 2.0)) * s;
                match &map.phases {
                    Some(b) => {
                        let bj = round(b[j]);
                        let a_err = dot_err + u * (p.abs() + dot_err + bj.abs());
                        val[[i, j]] = scale * (p + bj).cos();
                        bound[[i, j]] = scale * (a_err + cos_err + 3.0 * u);
                    }
                    None => {
                        val[[i, j]] = scale * p.cos();
                        val[[i, m + j]] = scale * p.sin();
                        let e = scale * (dot_err + sincos_err + 2.0 * u);
                        bound[[i, j]] = e;
                        bound[[i, m + j]] = e;
                    }
                }
            }
        }
        (val, bound)
    }

    fn data<T: Real>(n: usize, d: usize, seed: u64) -> Array2<T> {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        Array2::from_shape_fn((n, d), |_| {
            let v: f64 = StandardNormal.sample(&mut rng);
            T::from_f64_lossy(v)
        })
    }

    fn run<T: Real>(map: &FourierFeatures, x: &Array2<T>, method: Method) -> Array2<T> {
        let mut out = Array2::from_elem((x.nrows(), map.n_components), T::nan());
        map.transform_into_with(x.view(), out.view_mut(), Parallelism::Sequential, method)
            .unwrap();
        out
    }

    fn check_against_oracle_and_tiles<T: Real>() {
        for d in [1, 3, 63, 65, 1024] {
            for (variant, dim) in [
                (Variant::CosBias, 1),
                (Variant::CosBias, 77),
                (Variant::CosSin, 2),
                (Variant::CosSin, 301),
            ] {
                let cfg = FourierConfig {
                    variant,
                    length_scale: (d as f64).sqrt(),
                    ..FourierConfig::new(dim)
                };
                let map = FourierFeatures::fit(&cfg, d, 11).unwrap();
                for n in [0, 1, 7, 13] {
                    let x = data::<T>(n, d, (n * 1000 + d) as u64);
                    let (want, bound) = oracle(&map, &x);
                    let tiles = run(&map, &x, Method::Tiles);
                    for isa in fused_isas() {
                        let got = run(&map, &x, Method::Fused(isa));
                        for ((idx, g), t) in got.indexed_iter().zip(tiles.iter()) {
                            let (g, t) = (g.to_f64_exact(), t.to_f64_exact());
                            let (w, b) = (want[idx], bound[idx]);
                            let what = format!("{isa:?} {variant:?} d {d} D {dim} n {n} {idx:?}");
                            assert!(
                                (g - w).abs() <= b,
                                "{what}: {g} vs oracle {w} (bound {b:e})"
                            );
                            assert!((g - t).abs() <= 2.0 * b, "{what}: {g} vs tiles {t}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn fused_matches_the_oracle_and_the_tiles_f32() {
        check_against_oracle_and_tiles::<f32>();
    }

    #[test]
    fn fused_matches_the_oracle_and_the_tiles_f64() {
        check_against_oracle_and_tiles::<f64>();
    }

    fn check_threads_and_isas<T: Real>() {
        for variant in [Variant::CosBias, Variant::CosSin] {
            let cfg = FourierConfig {
                variant,
                length_scale: 4.0,
                ..FourierConfig::new(333)
            };
            let map = FourierFeatures::fit(&cfg, 17, 5).unwrap();
            // 517 rows: several chunks of MR·GROUPS_PER_CHUNK rows and a
            // ragged last one.
            let x = data::<T>(517, 17, 9);
            let mut first: Option<Array2<T>> = None;
            for isa in fused_isas() {
                let method = Method::Fused(isa);
                let one = run(&map, &x, method);
                let mut two = Array2::zeros(one.dim());
                crate::threads::install(|| {
                    map.transform_into_with(x.view(), two.view_mut(), Parallelism::Rayon, method)
                })
                .unwrap()
                .unwrap();
                assert!(one.iter().all(|v| v.is_finite()));
                assert_eq!(one, two, "{isa:?} {variant:?}: 1 vs 2 threads");
                match &first {
                    None => first = Some(one),
                    Some(f) => assert_eq!(*f, one, "{isa:?} {variant:?} vs the first ISA"),
                }
            }
        }
    }

    #[test]
    fn bit_identical_for_any_thread_count_and_isa() {
        check_threads_and_isas::<f32>();
        check_threads_and_isas::<f64>();
    }

    fn check_far_angles<T: Real>() {
        // d = 1, products exact in f32: x·w for x = 3e7, w ∈ {1, 1e-3, 2}.
        let w = Array2::from_shape_vec((3, 1), vec![1.0, 1.0 / 1024.0, 2.0]).unwrap();
        let x = Array2::from_shape_vec((2, 1), vec![3.0e7, 1.0])
            .unwrap()
            .mapv(T::from_f64_lossy);
        let b = ndarray::arr1(&[0.5, 0.25, 1.0]);
        for variant in [Variant::CosBias, Variant::CosSin] {
            let dim = if variant == Variant::CosBias { 3 } else { 7 };
            let phases = (variant == Variant::CosBias).then(|| b.clone());
            let map = FourierFeatures::from_parts(
                Projection::Dense(w.clone()),
                phases,
                variant,
                dim,
                1.0,
            )
            .unwrap();
            let scale = T::from_f64_lossy(map.scale());
            for isa in fused_isas() {
                let got = run(&map, &x, Method::Fused(isa));
                for j in 0..3 {
                    let p = x[[0, 0]] * T::from_f64_lossy(w[[j, 0]]);
                    match variant {
                        Variant::CosBias => {
                            let a = (p + T::from_f64_lossy(b[j])).to_f64_exact();
                            if a.abs() > FAST_LIMIT {
                                let want = a.cos() * scale.to_f64_exact();
                                assert_eq!(got[[0, j]], T::from_f64_lossy(want), "{isa:?} {j}");
                            }
                        }
                        Variant::CosSin => {
                            let (s, c) = p.to_f64_exact().sin_cos();
                            if p.to_f64_exact().abs() > FAST_LIMIT {
                                let sc = map.scale();
                                assert_eq!(got[[0, j]], T::from_f64_lossy(c * sc), "{isa:?}");
                                assert_eq!(got[[0, 3 + j]], T::from_f64_lossy(s * sc), "{isa:?}");
                            }
                        }
                    }
                }
                // The near angles of both rows stay within the oracle bound.
                let (want, bound) = oracle(&map, &x);
                for (idx, g) in got.indexed_iter() {
                    let a_far = idx.0 == 0 && idx.1 % 3 != 1 && idx.1 < 6;
                    if !a_far {
                        let g = g.to_f64_exact();
                        assert!((g - want[idx]).abs() <= bound[idx], "{isa:?} {idx:?}");
                    }
                }
                if variant == Variant::CosSin {
                    assert!(got.column(6).iter().all(|v| *v == T::zero()));
                }
            }
        }
    }

    #[test]
    fn far_angles_take_std_element_by_element() {
        check_far_angles::<f32>();
        check_far_angles::<f64>();
    }

    #[test]
    fn fused_method_needs_dense_frequencies() {
        let cfg = FourierConfig {
            sampler: Sampler::Structured,
            ..FourierConfig::new(64)
        };
        let map = FourierFeatures::fit(&cfg, 8, 1).unwrap();
        let x = Array2::<f32>::zeros((3, 8));
        let mut out = Array2::zeros((3, 64));
        for isa in Isa::available() {
            let r = map.transform_into_with(
                x.view(),
                out.view_mut(),
                Parallelism::Rayon,
                Method::Fused(isa),
            );
            assert!(matches!(
                r,
                Err(crate::Error::InvalidParameter { name: "method", .. })
            ));
        }
        // Auto and Tiles still work for it.
        for method in [Method::Auto, Method::Tiles] {
            map.transform_into_with(x.view(), out.view_mut(), Parallelism::Rayon, method)
                .unwrap();
        }
        // The kernel has no portable build: a clear error, also for a dense map.
        let dense = FourierFeatures::fit(&FourierConfig::new(64), 8, 1).unwrap();
        let r = dense.transform_into_with(
            x.view(),
            out.view_mut(),
            Parallelism::Rayon,
            Method::Fused(Isa::Portable),
        );
        assert!(matches!(
            r,
            Err(crate::Error::InvalidParameter { name: "method", .. })
        ));
    }
}
