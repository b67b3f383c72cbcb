//! Marginal-likelihood fit of the feature-space GP (see docs/math/gp.rst,
//! feature-space GP and its gradients): the length scale(s), kernel
//! variance and noise variance of a feature map `Φ(x; θ)` fitted by
//! maximizing the feature-space log marginal likelihood, streamed over row
//! chunks (`O(N D²)` time per evaluation, `O(D² + chunk·D)` memory): with
//! one length scale by a profiled search (docs/math/gp.rst, "Profiled
//! fit": the variances maximized exactly at each length scale, one
//! statistics pass per length scale tried), with per-dimension length
//! scales by the generic L-BFGS path of [`super::optimize`] on the LML and
//! its gradient below.
//!
//! With `A = ΦᵀΦ/σ_n² + I`, `w = A^{−1}Φᵀy/σ_n²`, `r = y − Φw` and
//! `α = r/σ_n²`:
//!
//! - `∂LML/∂Φ = α wᵀ − Φ A^{−1}/σ_n²` (`N × D`), and for a hyperparameter
//!   of the map `∂LML/∂θ = Σ_i ⟨(∂LML/∂Φ)_i, ∂φ_i/∂θ⟩`;
//! - the kernel variance scales `Φ` by `σ` (`∂Φ/∂ln σ² = Φ/2`):
//!   `∂LML/∂ln σ² = ½ (wᵀw − D + tr A^{−1})`;
//! - `∂LML/∂ln σ_n² = ½ (‖r‖²/σ_n² − (N − D) − tr A^{−1})` with
//!   `‖r‖² = yᵀy − wᵀΦᵀy − σ_n² wᵀw` (from `A w = Φᵀy/σ_n²`).
//!
//! Both come from the statistics of one pass ([`FeatureStats`]). The length
//! scales take a second pass: per chunk `Φ_c` again, `R_c = α_c wᵀ −
//! Φ_c A^{−1}/σ_n²` (one GEMM) and its contraction with `∂Φ_c/∂ln l_a`
//! ([`HyperMap`]). Only the maps whose derivative is known take part:
//! random Fourier features (any kernel and sampler, one or per-dimension
//! length scales) and the Maclaurin map (one length scale).

use faer::Accum;
use ndarray::{s, Array1, Array2, ArrayView1, ArrayView2, ArrayViewMut2, Axis, CowArray, Ix1, Ix2};

use super::exact::check_training_data;
use super::features::FeatureGp;
use super::optimize::{
    self, data_length_scales, Evaluation, Hyper, HyperInit, LogParams, Objective, OptimizerConfig,
};
use crate::error::{Error, Result};
use crate::feature_map::{AnyFeatureMap, FeatureMap};
use crate::fourier::{FourierFeatures, Variant};
use crate::linalg::{as_faer, as_faer_mut, faer_par};
use crate::maclaurin::MaclaurinMap;
use crate::progress::Monitor;
use crate::stats::FeatureStats;
use crate::threads::Parallelism;

mod profiled;
mod sums;
pub use sums::{fit_feature_gp_blocks, BlockLml, GradientPass, LmlSums, MAX_SUMS_BYTES};

/// What the error for a map without a known derivative names.
const SUPPORTED: &str = "the marginal-likelihood fit of the feature-space GP needs a feature map \
     whose hyperparameters can move with its random draw fixed: RandomFourierFeatures (every \
     kernel and sampler; one or per-dimension length scales) or MaclaurinFeatures (one length \
     scale)";

/// A fitted feature map whose kernel hyperparameters move while its random
/// draw stays fixed, with the derivative of its features in the log length
/// scale(s).
///
/// - Random Fourier features: the unit frequencies `Ω = W diag(l₀)` of the
///   map drawn at `l₀` are fixed; at `θ` the frequencies are `Ω_ja / l_a`
///   ([`FourierFeatures::with_length_scales`]) and with `u = Wx (+ b)`
///   `∂φ_j/∂ln l_a = s_j(x) W_ja x_a`, `s_j = σ c sin u_j` (`c` the column
///   scale; for `cos_sin` the sine column of the same frequency, and the
///   cosine column with a minus sign for the sine column).
/// - Maclaurin features: the length scale rescales the inputs,
///   `x̃ = (x − c)/l`. The allocation (the truncation degree and the
///   features per degree), the sketches and the center `c` were fitted for
///   the map's own length scale and stay fixed. Every column is `σ g(x̃)`
///   times a homogeneous polynomial of degree `n_j` in `x̃`
///   ([`MaclaurinMap::column_degrees`]) with `g = exp(−‖x̃‖²/2)` for the
///   Gaussian kernel and 1 for the dot-product kernels, so
///   `∂φ_j/∂ln l = φ_j (q − n_j)`, `q = ‖x̃‖²` (Gaussian) or 0.
#[derive(Clone, Debug)]
pub enum HyperMap {
    /// Random Fourier features drawn at `length_scale`.
    Fourier {
        /// The map as drawn.
        map: FourierFeatures,
        /// The length scale(s) it was drawn at: one value, or one per input
        /// dimension.
        length_scale: Vec<f64>,
    },
    /// A fitted Maclaurin map (its own length scale).
    Maclaurin(MaclaurinMap),
}

impl HyperMap {
    /// Wraps a fitted map; `length_scale` is the length scale(s) a Fourier
    /// map was drawn at (not used for the Maclaurin map, which knows its
    /// own).
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] (`features`) for a polynomial sketch or
    /// Nyström features, naming the maps that are supported; invalid length
    /// scales.
    pub fn new(map: AnyFeatureMap, length_scale: Vec<f64>) -> Result<Self> {
        match map {
            AnyFeatureMap::Fourier(map) => {
                // Validates the length scales (the identity rescaling).
                map.with_length_scales(&length_scale, &length_scale, map.kernel_variance)?;
                Ok(HyperMap::Fourier { map, length_scale })
            }
            AnyFeatureMap::Maclaurin(m) => Ok(HyperMap::Maclaurin(m)),
            AnyFeatureMap::Polynomial(_) => Err(unsupported("a polynomial sketch")),
            AnyFeatureMap::Nystroem(_) => Err(unsupported("Nystroem features")),
        }
    }

    /// The input dimension `d`.
    pub fn n_features_in(&self) -> usize {
        match self {
            HyperMap::Fourier { map, .. } => map.n_features(),
            HyperMap::Maclaurin(m) => m.dim(),
        }
    }

    /// The output width `D`.
    pub fn n_components(&self) -> usize {
        match self {
            HyperMap::Fourier { map, .. } => map.n_components,
            HyperMap::Maclaurin(m) => m.width(),
        }
    }

    /// The hyperparameters the map was fitted at: the length scale(s) and
    /// the kernel variance.
    pub fn hyperparameters(&self) -> (Vec<f64>, f64) {
        match self {
            HyperMap::Fourier { map, length_scale } => (length_scale.clone(), map.kernel_variance),
            HyperMap::Maclaurin(m) => (vec![m.config().length_scale], m.config().kernel_variance),
        }
    }

    /// Whether the map takes one length scale per input dimension.
    pub fn supports_ard(&self) -> bool {
        matches!(self, HyperMap::Fourier { .. })
    }

    /// The map at length scale(s) `length_scale` and kernel variance
    /// `kernel_variance`, the random draw unchanged.
    ///
    /// # Errors
    /// Invalid hyperparameters; per-dimension length scales for the
    /// Maclaurin map.
    pub fn at(&self, length_scale: &[f64], kernel_variance: f64) -> Result<AnyFeatureMap> {
        Ok(match self {
            HyperMap::Fourier {
                map,
                length_scale: l0,
            } => map
                .with_length_scales(l0, length_scale, kernel_variance)?
                .into(),
            HyperMap::Maclaurin(m) => {
                if length_scale.len() != 1 {
                    return Err(no_ard());
                }
                m.with_kernel_parameters(length_scale[0], kernel_variance)?
                    .into()
            }
        })
    }
}

fn unsupported(what: &str) -> Error {
    Error::invalid("features", format!("{SUPPORTED}; got {what}"))
}

fn no_ard() -> Error {
    Error::invalid(
        "ard",
        "the Maclaurin map has one length scale (it rescales the inputs); per-dimension length \
         scales need RandomFourierFeatures",
    )
}

/// The map at one `θ` with what the length-scale contraction needs.
pub(crate) enum MapAt {
    /// The Fourier map, its dense frequencies `W` (`m × d`) and, for
    /// `cos_bias`, the map of the sines `σ c sin(Wx + b)` (phases `b − π/2`).
    Fourier {
        map: FourierFeatures,
        w: Array2<f64>,
        sine: Option<FourierFeatures>,
    },
    /// The Maclaurin map and its column degrees.
    Maclaurin {
        map: MaclaurinMap,
        degrees: Vec<f64>,
    },
}

impl MapAt {
    /// The map with what [`MapAt::contract`] needs.
    pub(crate) fn new(map: AnyFeatureMap) -> Result<Self> {
        match map {
            AnyFeatureMap::Fourier(map) => {
                let w = map.frequencies();
                let sine = match (&map.phases, map.variant) {
                    (Some(b), Variant::CosBias) => Some(FourierFeatures::from_parts(
                        crate::fourier::Projection::Dense(w.clone()),
                        Some(b.mapv(|v| v - std::f64::consts::FRAC_PI_2)),
                        Variant::CosBias,
                        map.n_components,
                        map.kernel_variance,
                    )?),
                    _ => None,
                };
                Ok(MapAt::Fourier { map, w, sine })
            }
            AnyFeatureMap::Maclaurin(map) => {
                let degrees = map.column_degrees().into_iter().map(f64::from).collect();
                Ok(MapAt::Maclaurin { map, degrees })
            }
            other => Err(unsupported(match other {
                AnyFeatureMap::Polynomial(_) => "a polynomial sketch",
                _ => "Nystroem features",
            })),
        }
    }

    /// `Φ(x)` of a chunk into `out`.
    pub(crate) fn transform(
        &self,
        x: ArrayView2<'_, f64>,
        out: ArrayViewMut2<'_, f64>,
        par: Parallelism,
    ) -> Result<()> {
        match self {
            MapAt::Fourier { map, .. } => FeatureMap::transform_into(map, x, out, par),
            MapAt::Maclaurin { map, .. } => FeatureMap::transform_into(map, x, out, par),
        }
    }

    /// Adds `Σ_i ⟨R_i, ∂φ_i/∂ln l_a⟩` of a chunk (`x`, its features `phi`,
    /// `r = ∂LML/∂Φ` of its rows) to `out` (one entry per length scale;
    /// one entry sums over the dimensions). `buf` is scratch.
    pub(crate) fn contract(
        &self,
        x: ArrayView2<'_, f64>,
        phi: ArrayView2<'_, f64>,
        r: ArrayView2<'_, f64>,
        buf: &mut Array2<f64>,
        out: &mut [f64],
        par: Parallelism,
    ) -> Result<()> {
        let n = x.nrows();
        match self {
            MapAt::Fourier { w, sine, .. } => {
                let m = w.nrows();
                // T_ij = Σ over the columns of frequency j of R ⊙ ∂φ/∂u.
                let what = "a chunk of the length-scale contraction (float64)";
                let mut t = crate::alloc::try_zeros2::<f64>("chunk_size", what, n, m)?;
                match sine {
                    Some(sine) => {
                        buf_resize(buf, n, m)?;
                        sine.transform_into(x, buf.view_mut(), par)?;
                        ndarray::Zip::from(&mut t)
                            .and(&r.slice(s![.., ..m]))
                            .and(&*buf)
                            .for_each(|t, &r, &s| *t = r * s);
                    }
                    None => {
                        // cos_sin: ∂cos u/∂ln l_a = sin(u) W_ja x_a, ∂sin u/∂ln l_a
                        // = −cos(u) W_ja x_a, and the feature columns hold
                        // σc cos u and σc sin u.
                        let (rc, rs) = (r.slice(s![.., ..m]), r.slice(s![.., m..2 * m]));
                        let (pc, ps) = (phi.slice(s![.., ..m]), phi.slice(s![.., m..2 * m]));
                        ndarray::Zip::from(&mut t)
                            .and(&rc)
                            .and(&rs)
                            .and(&pc)
                            .and(&ps)
                            .for_each(|t, &rc, &rs, &pc, &ps| *t = rc * ps - rs * pc);
                    }
                }
                // Σ_i x_ia (T W)_ia for every dimension a.
                let g = t.dot(w);
                let d = x.ncols();
                let mut per_dim = vec![0.0; d];
                for (xr, gr) in x.rows().into_iter().zip(g.rows()) {
                    for ((p, &xv), &gv) in per_dim.iter_mut().zip(xr).zip(gr) {
                        *p += xv * gv;
                    }
                }
                if out.len() == 1 {
                    out[0] += per_dim.iter().sum::<f64>();
                } else {
                    for (o, p) in out.iter_mut().zip(&per_dim) {
                        *o += p;
                    }
                }
            }
            MapAt::Maclaurin { map, degrees } => {
                // ∂φ_j/∂ln l = φ_j (q − n_j), q = ‖(x − c)/l‖² (Gaussian) or 0.
                let mut total = 0.0;
                for ((xr, pr), rr) in x.rows().into_iter().zip(phi.rows()).zip(r.rows()) {
                    let q = maclaurin_q(map, xr);
                    total += pr
                        .iter()
                        .zip(rr)
                        .zip(degrees)
                        .map(|((&p, &rv), &nj)| rv * p * (q - nj))
                        .sum::<f64>();
                }
                out[0] += total;
            }
        }
        Ok(())
    }
}

/// `q = ‖(x − c)/l‖²` of an input row for the Gaussian Maclaurin map, 0
/// for the dot-product kernels (see [`HyperMap`]).
fn maclaurin_q(map: &MaclaurinMap, x: ArrayView1<'_, f64>) -> f64 {
    let cfg = map.config();
    if !cfg.kernel.is_gaussian() {
        return 0.0;
    }
    let inv_l = 1.0 / cfg.length_scale;
    let center = map.center();
    x.iter()
        .enumerate()
        .map(|(a, &v)| {
            let z = (v - center.map_or(0.0, |c| c[a])) * inv_l;
            z * z
        })
        .sum()
}

/// A buffer for `rows` rows of `dim` features (float64), reused from chunk
/// to chunk: allocated fallibly ([`crate::alloc::try_zeros2`]), a size that
/// does not fit is an error naming `chunk_size`.
pub(crate) fn chunk_buffer(rows: usize, dim: usize) -> Result<Array2<f64>> {
    crate::alloc::try_zeros2("chunk_size", "a chunk of features (float64)", rows, dim)
}

/// Resizes a scratch matrix to `n × m` (reallocating only to grow),
/// fallibly ([`crate::alloc::try_zeros2`], naming `chunk_size`).
fn buf_resize(buf: &mut Array2<f64>, n: usize, m: usize) -> Result<()> {
    if buf.dim() != (n, m) {
        *buf = crate::alloc::try_zeros2("chunk_size", "a chunk of sines (float64)", n, m)?;
    }
    Ok(())
}

/// The second pass of the length-scale gradient (see the module docs):
/// with the solve of the first pass (`w`, `A^{−1}`, the subtracted target
/// mean `ȳ` and `σ_n²`), every chunk's `Φ_c` again, `R_c = α_c wᵀ −
/// Φ_c A^{−1}/σ_n²` (one GEMM, `α_c = (y_c − ȳ − Φ_c w)/σ_n²`) and its
/// contraction with `∂Φ_c/∂ln l_a` ([`MapAt::contract`]). The in-process
/// evaluation runs it over all rows, a distributed one over each block
/// ([`GradientPass`]); the sums add up.
pub(crate) struct SecondPass<'a> {
    /// The map at the evaluation's hyperparameters.
    pub map: &'a MapAt,
    /// `w = A^{−1}Φᵀ(y − ȳ)/σ_n²` (`D`).
    pub beta: ArrayView1<'a, f64>,
    /// `A^{−1}` (`D × D`).
    pub a_inv: ArrayView2<'a, f64>,
    /// The target mean subtracted (0 without centering).
    pub y_mean: f64,
    /// `σ_n²`.
    pub noise_variance: f64,
}

impl SecondPass<'_> {
    /// Adds `Σ_i ⟨R_i, ∂φ_i/∂ln l_a⟩` of the rows `(x, y)` to `out` (one
    /// entry per length scale), `chunk_rows` rows at a time; `monitor` is
    /// checked before every chunk.
    pub(crate) fn add_rows(
        &self,
        x: ArrayView2<'_, f64>,
        y: ArrayView1<'_, f64>,
        chunk_rows: usize,
        par: Parallelism,
        monitor: &Monitor,
        out: &mut [f64],
    ) -> Result<()> {
        let rows = chunk_rows.min(x.nrows());
        let dim = self.beta.len();
        let (w, nv) = (self.beta, self.noise_variance);
        let mut phi = chunk_buffer(rows, dim)?;
        let mut r = chunk_buffer(rows, dim)?;
        let mut buf = Array2::<f64>::zeros((0, 0));
        let fpar = faer_par(par);
        for (xc, yc) in x
            .axis_chunks_iter(Axis(0), chunk_rows)
            .zip(y.axis_chunks_iter(Axis(0), chunk_rows))
        {
            monitor.check()?;
            let c = xc.nrows();
            let mut p = phi.slice_mut(s![..c, ..]);
            self.map.transform(xc, p.view_mut(), par)?;
            let alpha: Array1<f64> = (&yc - self.y_mean - p.dot(&w)) / nv;
            let mut rc = r.slice_mut(s![..c, ..]);
            faer::linalg::matmul::matmul(
                as_faer_mut(rc.view_mut()),
                Accum::Replace,
                as_faer(p.view()),
                as_faer(self.a_inv),
                -1.0 / nv,
                fpar,
            );
            for (mut row, &a) in rc.rows_mut().into_iter().zip(&alpha) {
                row.scaled_add(a, &w);
            }
            self.map
                .contract(xc, p.view(), rc.view(), &mut buf, out, par)?;
        }
        Ok(())
    }
}

/// The feature-space log marginal likelihood and its gradient as an
/// [`Objective`] of the free log hyperparameters `(ln l.., ln σ², ln σ_n²)`;
/// an evaluation's fit is the fitted GP and its statistics.
pub struct FeatureLml<'a> {
    map: &'a HyperMap,
    x: CowArray<'a, f64, Ix2>,
    y: CowArray<'a, f64, Ix1>,
    params: LogParams,
    center: bool,
    chunk_rows: usize,
    par: Parallelism,
}

impl<'a> FeatureLml<'a> {
    /// The objective of `map` on `(x, y)`: the hyperparameters `params`
    /// (`(l.., σ², σ_n²)`, free ones optimized), targets centered by their
    /// mean with `center`, `chunk_rows` rows transformed at a time.
    ///
    /// # Errors
    /// Shape mismatches, non-finite data, `chunk_rows = 0`, a parameter
    /// vector of the wrong length, per-dimension length scales for a map
    /// without them.
    pub fn new(
        map: &'a HyperMap,
        x: ArrayView2<'a, f64>,
        y: ArrayView1<'a, f64>,
        params: LogParams,
        center: bool,
        chunk_rows: usize,
        par: Parallelism,
    ) -> Result<Self> {
        check_training_data(x, y)?;
        Error::check_n_features(map.n_features_in(), x.ncols())?;
        if chunk_rows == 0 {
            return Err(Error::invalid("chunk_size", "must be >= 1, got 0"));
        }
        // The statistics and their gradients (D × D each) and a chunk of
        // features.
        FeatureStats::check_size("n_components", map.n_components(), 2)?;
        crate::alloc::check_alloc(
            "chunk_size",
            "a chunk of features (float64)",
            &[chunk_rows.min(x.nrows()), map.n_components()],
            8,
        )?;
        let k = params.n_length_scales();
        if k != 1 && k != x.ncols() {
            return Err(Error::ShapeMismatch {
                name: "number of length scales",
                expected: x.ncols(),
                got: k,
            });
        }
        if k != 1 && !map.supports_ard() {
            return Err(no_ard());
        }
        Ok(Self {
            map,
            x: x.into(),
            y: y.into(),
            params,
            center,
            chunk_rows,
            par,
        })
    }

    /// The row chunks of `(x, y)`.
    fn chunks(&self) -> impl Iterator<Item = (ArrayView2<'_, f64>, ArrayView1<'_, f64>)> {
        self.x
            .axis_chunks_iter(Axis(0), self.chunk_rows)
            .zip(self.y.axis_chunks_iter(Axis(0), self.chunk_rows))
    }

    /// The statistics of all rows under `map`, `chunk_rows` rows at a time;
    /// `monitor` is checked before every chunk.
    fn stats_of(&self, map: &MapAt, monitor: &Monitor) -> Result<FeatureStats> {
        let dim = self.map.n_components();
        let rows = self.chunk_rows.min(self.x.nrows());
        let mut stats = FeatureStats::new(dim);
        let mut phi = chunk_buffer(rows, dim)?;
        for (xc, yc) in self.chunks() {
            monitor.check()?;
            let mut p = phi.slice_mut(s![..xc.nrows(), ..]);
            map.transform(xc, p.view_mut(), self.par)?;
            stats.accumulate(p.view(), yc, self.par)?;
        }
        Ok(stats)
    }

    /// The statistics of all rows at the length scale(s) `l` and unit
    /// kernel variance (what [`profiled`] searches over).
    fn unit_stats(&self, l: &[f64], monitor: &Monitor) -> Result<FeatureStats> {
        self.stats_of(&MapAt::new(self.map.at(l, 1.0)?)?, monitor)
    }

    /// The LML, the fitted GP and statistics, and the gradient over all
    /// hyperparameters (the entries of fixed ones are 0) at `values`.
    fn lml(
        &self,
        values: &[f64],
        monitor: &Monitor,
    ) -> Result<(Vec<f64>, FeatureGp, FeatureStats)> {
        let k = values.len() - 2;
        let (kv, nv) = (values[k], values[k + 1]);
        let map = MapAt::new(self.map.at(&values[..k], kv)?)?;
        let stats = self.stats_of(&map, monitor)?;
        let gp = FeatureGp::fit(&stats, nv, self.center, self.par)?;
        let mut grad = vec![0.0; values.len()];
        let free = &self.params.free;
        if free.is_empty() {
            return Ok((grad, gp, stats));
        }
        monitor.check()?;
        let a_inv = gp.chol.inverse(self.par);
        sums::variance_gradients(&stats, &gp, &a_inv, self.center, &mut grad[k..]);
        if free.iter().any(|&i| i < k) {
            let y_mean = if self.center { stats.y_mean() } else { 0.0 };
            let second = SecondPass {
                map: &map,
                beta: gp.beta.view(),
                a_inv: a_inv.view(),
                y_mean,
                noise_variance: nv,
            };
            second.add_rows(
                self.x.view(),
                self.y.view(),
                self.chunk_rows,
                self.par,
                monitor,
                &mut grad[..k],
            )?;
        }
        Ok((grad, gp, stats))
    }
}

impl Objective for FeatureLml<'_> {
    type Fit = (FeatureGp, FeatureStats);

    fn n_rows(&self) -> usize {
        self.x.nrows()
    }

    fn evaluate(&self, theta: &[f64], monitor: &Monitor) -> Result<Evaluation<Self::Fit>> {
        let values = self.params.at(theta)?;
        let (grad, gp, stats) = self.lml(&values, monitor)?;
        Ok(Evaluation {
            value: gp.lml,
            grad: self.params.select(&grad),
            fit: (gp, stats),
        })
    }

    fn subsample(&self, rows: &[usize]) -> Result<Option<Self>> {
        Ok(Some(Self {
            map: self.map,
            x: self.x.select(Axis(0), rows).into(),
            y: self.y.select(Axis(0), rows).into(),
            params: self.params.clone(),
            center: self.center,
            chunk_rows: self.chunk_rows,
            par: self.par,
        }))
    }
}

/// What [`fit_feature_gp`] fits and how.
#[derive(Clone, Debug, PartialEq)]
pub struct FeatureLmlConfig {
    /// Fixed or initial noise variance. `None`:
    /// [`super::initial_noise_variance`], `0.1 var(y)`.
    pub noise_variance: Option<f64>,
    /// One length scale per input dimension (random Fourier features only).
    pub ard: bool,
    /// The hyperparameters that are optimized; the others stay fixed.
    pub optimize: Vec<Hyper>,
    /// Restarts, seed, iterations and the coarse-to-fine threshold.
    pub optimizer: OptimizerConfig,
    /// Subtract the training-target mean.
    pub center: bool,
    /// Rows transformed at a time.
    pub chunk_rows: usize,
    /// The data's length scale(s): the median pairwise distance of the
    /// inputs ([`optimize::median_pairwise_distance`]), with `ard` one per dimension
    /// ([`optimize::per_dimension_length_scales`]; one value is taken for every
    /// dimension). With the length scale free, the fit starts from it
    /// instead of the map's when its LML on the coarsest level is higher
    /// (docs/math/gp.rst, profiled fit, "Start length scale"). `None`: the
    /// in-memory fit computes it from its rows; a fit on rows held
    /// elsewhere starts from the map's length scale.
    pub data_length_scale: Option<Vec<f64>>,
}

/// The gradient tolerance of the feature-space fit
/// ([`OptimizerConfig::tol_grad`]): in the preconditioned variables of a
/// coarse-to-fine run it leaves at most about `5e−11` per row to gain
/// (`5e−6` nats of LML at 100,000 rows), while the default's tighter stop
/// lets L-BFGS spend tens to hundreds of `O(N D²)` evaluations on the
/// flat ridges of `(l, σ²)` this LML often has.
pub const TOL_GRAD: f64 = 1e-5;

impl Default for FeatureLmlConfig {
    /// Every hyperparameter fitted, the default optimizer with the
    /// gradient tolerance [`TOL_GRAD`], centered targets, 2,048 rows a
    /// chunk.
    fn default() -> Self {
        Self {
            noise_variance: None,
            ard: false,
            optimize: HyperInit::default().optimize,
            optimizer: OptimizerConfig {
                tol_grad: TOL_GRAD,
                ..OptimizerConfig::default()
            },
            center: true,
            chunk_rows: 2048,
            data_length_scale: None,
        }
    }
}

/// A feature-space GP with fitted hyperparameters.
#[derive(Clone, Debug)]
pub struct FittedFeatureGp {
    /// The map at the fitted hyperparameters (the random draw of the given
    /// map).
    pub map: AnyFeatureMap,
    /// The fitted length scale(s).
    pub length_scale: Vec<f64>,
    /// The fitted kernel variance.
    pub kernel_variance: f64,
    /// The GP of [`FittedFeatureGp::map`] on all rows (its `lml` is the
    /// log marginal likelihood at the optimum).
    pub gp: FeatureGp,
    /// Its sufficient statistics.
    pub stats: FeatureStats,
    /// L-BFGS iterations spent, over all runs (0 without optimization).
    pub n_iter: u64,
}

/// Refuses a [`FeatureLmlConfig::data_length_scale`] of a count other than
/// 1 or `k` (the fit's length scales), or with values not finite and `> 0`.
pub(crate) fn check_data_length_scale(cfg: &FeatureLmlConfig, k: usize) -> Result<()> {
    let Some(data) = &cfg.data_length_scale else {
        return Ok(());
    };
    if data.len() != 1 && data.len() != k {
        return Err(Error::invalid(
            "data_length_scale",
            format!("needs 1 value or {k}, got {}", data.len()),
        ));
    }
    for &m in data {
        super::check_positive("data_length_scale", m)?;
    }
    Ok(())
}

/// Fits the hyperparameters of the feature-space GP on `map` by maximizing
/// its log marginal likelihood: from the map's own length scale(s) and
/// kernel variance and the given (or [`super::initial_noise_variance`])
/// noise variance, a free length scale from the better (by the profiled
/// LML on the coarsest level) of the map's and the data's
/// ([`FeatureLmlConfig::data_length_scale`], the median pairwise distance
/// of `x` by default, per column with `ard`), with per-dimension length scales the free
/// variances at their maximum at the start length scales
/// (docs/math/gp.rst), then
/// `n_restarts` starts within a factor 10 of them, each run coarse to
/// fine. With one length scale by the profiled search
/// of docs/math/gp.rst, "Profiled fit" (its best evaluation's statistics scaled to the fitted
/// kernel variance, and their GP); with per-dimension ones by L-BFGS
/// ([`FeatureLml`], [`optimize::maximize`]), the best evaluation's GP and
/// statistics kept. Returned with the map at the optimum (no refit).
///
/// `monitor` gets the stage "optimizer runs" and one message per run and
/// subsample level; every row chunk of every evaluation checks it.
///
/// # Errors
/// As [`FeatureLml::new`]; [`Error::InvalidParameter`] for invalid initial
/// values; [`Error::Interrupted`] once `monitor` is cancelled.
pub fn fit_feature_gp(
    map: &HyperMap,
    x: ArrayView2<'_, f64>,
    y: ArrayView1<'_, f64>,
    cfg: &FeatureLmlConfig,
    par: Parallelism,
    monitor: &Monitor,
) -> Result<FittedFeatureGp> {
    check_training_data(x, y)?;
    Error::check_n_features(map.n_features_in(), x.ncols())?;
    if cfg.ard && !map.supports_ard() {
        return Err(no_ard());
    }
    let (l0, kv0) = map.hyperparameters();
    let init = HyperInit {
        length_scale: Some(l0),
        kernel_variance: Some(kv0),
        noise_variance: cfg.noise_variance,
        ard: cfg.ard,
        optimize: cfg.optimize.clone(),
    };
    let params = init.resolve(x, y, cfg.center)?;
    check_data_length_scale(cfg, params.n_length_scales())?;
    let cfg = &FeatureLmlConfig {
        // Only a free length scale starts from it.
        data_length_scale: cfg.data_length_scale.clone().or_else(|| {
            params
                .free
                .contains(&0)
                .then(|| data_length_scales(x, cfg.ard))
        }),
        ..cfg.clone()
    };
    let obj = FeatureLml::new(
        map,
        x.view(),
        y.view(),
        params.clone(),
        cfg.center,
        cfg.chunk_rows,
        par,
    )?;
    if params.n_length_scales() == 1 && !params.free.is_empty() {
        // The profiled search: the coarse levels' rows copied once.
        let mut levels = vec![obj];
        if params.free.contains(&0) {
            for _ in 1..profiled::level_rows(
                x.nrows(),
                cfg.optimizer.coarse_min_rows,
                map.n_components(),
            )
            .len()
            {
                let last = &levels[levels.len() - 1];
                let rows: Vec<usize> = (0..last.n_rows() / 4).map(|i| 4 * i).collect();
                let sub = last
                    .subsample(&rows)?
                    .ok_or_else(|| Error::Internal("no coarse level".into()))?;
                levels.push(sub);
            }
        }
        let stats_at =
            |l: f64, level: usize, monitor: &Monitor| levels[level].unit_stats(&[l], monitor);
        return profiled::fit(map, &params, cfg, x.nrows(), &stats_at, par, monitor);
    }
    let mut obj = obj;
    let k = params.n_length_scales();
    if params.free.contains(&0) {
        // The start candidates as one length scale for every dimension,
        // compared on the coarsest level's rows (every 4^L-th).
        let levels =
            profiled::level_rows(x.nrows(), cfg.optimizer.coarse_min_rows, map.n_components());
        let stride = 4usize.pow((levels.len() - 1) as u32);
        let rows: Vec<usize> = (0..levels[levels.len() - 1]).map(|i| i * stride).collect();
        let coarse = obj
            .subsample(&rows)?
            .ok_or_else(|| Error::Internal("no coarse level".into()))?;
        let candidates =
            optimize::length_scale_starts(&params.values[..k], cfg.data_length_scale.clone());
        let best = optimize::best_start(
            &candidates,
            |l| {
                let stats = coarse.unit_stats(l, monitor)?;
                profiled::profiled_lml(&params, &stats, cfg.center, par)
            },
            "LML",
            rows.len(),
            monitor,
        )?;
        obj.params.values[..k].copy_from_slice(&candidates[best]);
    }
    if needs_variance_start(&obj.params) {
        let stats = obj.unit_stats(&obj.params.values[..k], monitor)?;
        obj.params = profiled::variance_start(&obj.params, &stats, cfg.center, par)?;
    }
    optimize_objective(map, &obj.params, &obj, cfg, monitor)
}

/// Whether an L-BFGS fit of `params` starts from the profiled variances
/// ([`profiled::variance_start`]): per-dimension length scales with a free
/// variance (one length scale is profiled throughout).
fn needs_variance_start(params: &LogParams) -> bool {
    let k = params.n_length_scales();
    k > 1 && params.free.iter().any(|&i| i >= k)
}

/// The optimum of a feature-space LML objective (one evaluation when
/// nothing is free) with the map there: the tail of [`fit_feature_gp`]
/// and [`fit_feature_gp_blocks`].
fn optimize_objective<O: Objective<Fit = (FeatureGp, FeatureStats)>>(
    map: &HyperMap,
    params: &LogParams,
    obj: &O,
    cfg: &FeatureLmlConfig,
    monitor: &Monitor,
) -> Result<FittedFeatureGp> {
    let (theta, (gp, stats), n_iter) = if params.free.is_empty() {
        monitor.check()?;
        let e = obj.evaluate(&[], monitor)?;
        (Vec::new(), e.fit, 0)
    } else {
        let opt = optimize::maximize(obj, &params.start(), &cfg.optimizer, monitor)?;
        (opt.theta, opt.fit, opt.n_iter)
    };
    let v = params.at(&theta)?;
    let k = params.n_length_scales();
    Ok(FittedFeatureGp {
        map: map.at(&v[..k], v[k])?,
        length_scale: v[..k].to_vec(),
        kernel_variance: v[k],
        gp,
        stats,
        n_iter,
    })
}

#[cfg(test)]
mod tests;
