//! The fit of the feature-space GP with one length scale, profiled (see
//! docs/math/gp.rst, feature-space GP, "Profiled fit"): the kernel variance
//! `σ²` scales the features, `Φ = σ Φ₁`, so at a fixed length scale the
//! LML depends on `(σ², σ_n²)` only through the eigenvalues `λ_i` of
//! `Φ₁ᵀΦ₁` and the squared coordinates `c_i²` of `Φ₁ᵀ(y − ȳ)` in its
//! eigenvectors ([`Spectrum`]). With `r = σ²/σ_n²` and
//! `Q(r) = ‖y − ȳ‖² − r Σ_i c_i²/(1 + rλ_i)`:
//!
//! `LML = −Q(r)/(2σ_n²) − ½ Σ_i ln(1 + rλ_i) − (N/2) ln σ_n² − (N/2) ln 2π`,
//!
//! maximized over the free ones of `(σ², σ_n²)` in `O(D)` per trial
//! ([`Spectrum::maximize`]; with both free `σ_n² = Q(r)/N` in closed form
//! and the search is over `ln r` alone). What is left is a function of `ln l`
//! alone, the profiled LML, which every statistics pass (`N D²/2`
//! multiply-adds, the Gram) evaluates. [`search`] maximizes it by
//! safeguarded parabolic interpolation, coarse to fine over the strided
//! subsamples of [`super::super::optimize`]'s coarse levels. Against the
//! L-BFGS path of [`super::FeatureLml`] an evaluation needs no second pass
//! (`N D²` more for the length-scale gradient) and the search is over one
//! coordinate, not three.

use argmin::core::{CostFunction, Executor};
use argmin::solver::brent::BrentOpt;
use faer::dyn_stack::{MemBuffer, MemStack};
use faer::linalg::evd::{self, ComputeEigenvectors};

use super::{FeatureLmlConfig, FittedFeatureGp, HyperMap};
use crate::error::{Error, Result};
use crate::gp::features::FeatureGp;
use crate::gp::optimize::{
    best_of_runs, best_start, left_the_range, length_scale_starts, LogParams, RunOutcome,
    MAX_ABS_LOG,
};
use crate::linalg::{as_faer, faer_par};
use crate::progress::Monitor;
use crate::stats::FeatureStats;
use crate::threads::Parallelism;

/// `ln 2π`.
const LN_2PI: f64 = 1.837_877_066_409_345_5;

/// What the LML at one length scale depends on (see the module docs): the
/// eigenvalues `λ_i ≥ 0` of `Φ₁ᵀΦ₁` (the features at unit kernel
/// variance), `c_i² = (v_iᵀΦ₁ᵀ(y − ȳ))²`, `‖y − ȳ‖²` and `N`.
#[derive(Clone, Debug)]
pub(crate) struct Spectrum {
    lam: Vec<f64>,
    c2: Vec<f64>,
    yy: f64,
    n: f64,
    /// `tr Φ₁ᵀΦ₁`.
    trace: f64,
    /// The largest ratio `r = σ²/σ_n²` the statistics resolve,
    /// [`RESOLVED`]` / (ε tr Φ₁ᵀΦ₁)`.
    r_max: f64,
}

/// Spacing of the grid in `ln σ²`, `ln σ_n²` or `ln r` that
/// [`Spectrum::maximize`] scans before refining: the profiled LML changes
/// on the scale of 1 in these logs away from its peak, so the grid's best
/// point has the maximum within one spacing.
const GRID_STEP: f64 = 0.5;

/// The Gram matrix summed in float64 carries rounding errors of about
/// `ε tr(Φ₁ᵀΦ₁)` in norm, so eigenvalues of that size are noise, and so are
/// the coordinates `c_i` along their eigenvectors. They enter the LML
/// through `ln(1 + rλ_i)` and `r c_i²/(1 + rλ_i)`, each harmless while
/// `r ε tr(Φ₁ᵀΦ₁)` is at most this; beyond it the noise can add
/// arbitrarily to the LML (e.g. a spurious maximum at `σ_n² ≈ 1e−14`), so
/// [`Spectrum::maximize`] does not search there: the ratio `r = σ²/σ_n²` is
/// capped at `RESOLVED / (ε tr Φ₁ᵀΦ₁)`. The cap binds where the LML keeps
/// growing with `r`: where the features (nearly) fit the targets exactly,
/// or along the ridge of a growing length scale and kernel variance.
const RESOLVED: f64 = 1e-3;

impl Spectrum {
    /// The spectrum of statistics taken at unit kernel variance, with the
    /// targets centered when `center`.
    ///
    /// # Errors
    /// Invalid statistics; no rows; an eigendecomposition that does not
    /// converge.
    pub(crate) fn new(stats: &FeatureStats, center: bool, par: Parallelism) -> Result<Self> {
        stats.validate()?;
        if stats.n == 0 {
            return Err(Error::invalid("X", "needs at least one training row"));
        }
        let dim = stats.n_features();
        let fpar = faer_par(par);
        let mut s = faer::diag::Diag::<f64>::zeros(dim);
        let mut u = faer::Mat::<f64>::zeros(dim, dim);
        let scratch = evd::self_adjoint_evd_scratch::<f64>(
            dim,
            ComputeEigenvectors::Yes,
            fpar,
            Default::default(),
        );
        // Reads the lower triangle, the one the statistics keep.
        evd::self_adjoint_evd(
            as_faer(stats.gram.view()),
            s.as_mut(),
            Some(u.as_mut()),
            fpar,
            MemStack::new(&mut MemBuffer::new(scratch)),
            Default::default(),
        )
        .map_err(|e| Error::Internal(format!("eigendecomposition of the Gram matrix: {e:?}")))?;
        let (b, yy) = stats.centered(center);
        let b = faer::Col::<f64>::from_fn(dim, |i| b[i]);
        let c = u.transpose() * &b;
        let s = s.column_vector();
        let trace: f64 = stats.gram.diag().sum();
        Ok(Self {
            // Rounding can leave eigenvalues of a singular Gram slightly
            // below 0.
            lam: (0..dim).map(|i| s[i].max(0.0)).collect(),
            c2: (0..dim).map(|i| c[i] * c[i]).collect(),
            yy,
            n: stats.n as f64,
            trace,
            r_max: if trace > 0.0 {
                RESOLVED / (f64::EPSILON * trace)
            } else {
                f64::MAX
            },
        })
    }

    /// A bound on the rounding noise of the LML at `kv` and `nv`:
    /// `r ε tr(Φ₁ᵀΦ₁)` with `r = kv/nv` (see [`RESOLVED`]), at most
    /// [`RESOLVED`] below the cap.
    pub(crate) fn rounding_noise(&self, kv: f64, nv: f64) -> f64 {
        kv / nv * f64::EPSILON * self.trace
    }

    /// Refuses constant targets (`‖y − ȳ‖² = 0`, or `‖y‖² = 0` without
    /// centering): no maximum ([`crate::gp::check_targets_vary`]).
    fn check_targets_vary(&self) -> Result<()> {
        if self.yy <= 0.0 {
            return Err(crate::gp::constant_targets(self.n as usize));
        }
        Ok(())
    }

    /// Refuses targets whose variance `‖y − ȳ‖²/N` is outside what a fit
    /// computes ([`crate::gp::check_target_scale`]; constant targets
    /// pass, [`Spectrum::check_targets_vary`] refuses them).
    fn check_target_scale(&self) -> Result<()> {
        if self.yy > 0.0 {
            crate::gp::check_target_scale(self.yy / self.n)?;
        }
        Ok(())
    }

    /// Whether the ratio `kv/nv` is at the cap of [`RESOLVED`].
    pub(crate) fn at_ratio_cap(&self, kv: f64, nv: f64) -> bool {
        (kv / nv).ln() > self.r_max.ln() - LIMIT_GAP
    }

    /// `(Q(r), Σ_i ln(1 + rλ_i))`.
    fn quad_and_log_det(&self, r: f64) -> (f64, f64) {
        let (mut quad, mut log_det) = (0.0, 0.0);
        for (&l, &c2) in self.lam.iter().zip(&self.c2) {
            let t = r * l;
            quad += c2 / (1.0 + t);
            log_det += t.ln_1p();
        }
        (self.yy - r * quad, log_det)
    }

    /// The LML at kernel variance `kv` and noise variance `nv`.
    pub(crate) fn lml(&self, kv: f64, nv: f64) -> f64 {
        let (q, log_det) = self.quad_and_log_det(kv / nv);
        -q / (2.0 * nv) - 0.5 * log_det - 0.5 * self.n * (nv.ln() + LN_2PI)
    }

    /// The LML maximized over `σ_n²` at `ln r` (`σ_n² = Q(r)/N`, both
    /// variances free), and that `σ_n²`; `None` where `Q(r)` rounds to
    /// `≤ 0`.
    fn profile_ratio(&self, ln_r: f64) -> Option<(f64, f64)> {
        let (q, log_det) = self.quad_and_log_det(ln_r.exp());
        (q > 0.0).then(|| {
            let nv = q / self.n;
            (-0.5 * self.n * (1.0 + nv.ln() + LN_2PI) - 0.5 * log_det, nv)
        })
    }

    /// The maximum of the LML over the free ones of the kernel variance
    /// (`free_kv`) and the noise variance (`free_nv`), the fixed ones at
    /// `kv` and `nv` (the free ones' starts): `(LML, σ², σ_n²)`. A ratio
    /// `r = σ²/σ_n²` is searched up to the resolved one ([`RESOLVED`],
    /// [`Spectrum::at_ratio_cap`]); one free: over its log, within `e^±40`
    /// times its start (as [`LogParams::at`]); both: over `ln r ≥ −80`
    /// (`σ_n²` profiled, within `e^±40` times its start), by a grid of
    /// spacing [`GRID_STEP`] and then Brent's method between the best grid
    /// point's neighbours.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] for constant targets (no maximum), for
    /// targets of a variance outside `10^−40..10^40`, when the maximum lies
    /// at a limit of that range, or nowhere is finite; with both variances
    /// fixed, for a ratio `kv/nv` beyond the resolved one.
    pub(crate) fn maximize(
        &self,
        kv: f64,
        nv: f64,
        free_kv: bool,
        free_nv: bool,
    ) -> Result<(f64, f64, f64)> {
        if !(free_kv || free_nv) {
            // Past the resolved ratio the LML is the statistics' rounding
            // (Q(r) can cancel to below 0: an LML near +1e306), and a
            // search over the length scale would follow it.
            if kv / nv > self.r_max {
                return Err(Error::invalid(
                    "noise_variance",
                    format!(
                        "the kernel-to-noise variance ratio {:.3e} exceeds the {:.3e} the \
                         float64 statistics resolve at this length scale: the log marginal \
                         likelihood there is their rounding; fix a larger noise_variance \
                         (or a smaller kernel_variance), or let `optimize` fit one of them",
                        kv / nv,
                        self.r_max
                    ),
                ));
            }
            return Ok((self.lml(kv, nv), kv, nv));
        }
        self.check_targets_vary()?;
        self.check_target_scale()?;
        let ln_r_max = self.r_max.ln();
        // The search interval: a free variance within e^±40 times its
        // start, the ratio at most the resolved one.
        let (lo, hi) = match (free_kv, free_nv) {
            (true, false) => (
                kv.ln() - MAX_ABS_LOG,
                (kv.ln() + MAX_ABS_LOG).min(ln_r_max + nv.ln()),
            ),
            (false, true) => (
                (nv.ln() - MAX_ABS_LOG).max(kv.ln() - ln_r_max),
                nv.ln() + MAX_ABS_LOG,
            ),
            _ => (-2.0 * MAX_ABS_LOG, ln_r_max.min(2.0 * MAX_ABS_LOG)),
        };
        let (kv0, nv0) = (kv, nv);
        let t = match (free_kv, free_nv) {
            (true, false) => maximize_1d(|t| finite(self.lml(t.exp(), nv)), lo, hi)?,
            (false, true) => maximize_1d(|t| finite(self.lml(kv, t.exp())), lo, hi)?,
            _ => maximize_1d(|t| self.profile_ratio(t).map(|p| p.0), lo, hi)?,
        };
        let (kv, nv) = match (free_kv, free_nv) {
            (true, false) => (t.exp(), nv),
            (false, true) => (kv, t.exp()),
            _ => {
                let nv = self.profile_ratio(t).map_or(0.0, |p| p.1);
                (t.exp() * nv, nv)
            }
        };
        // A maximum at (or past) e^±40 times a start, or at the smallest
        // ratio, is where the optimizer left the range, as for L-BFGS.
        let beyond = |v: f64, start: f64| {
            !(v.is_finite() && v > 0.0 && (v.ln() - start.ln()).abs() < MAX_ABS_LOG - LIMIT_GAP)
        };
        if free_nv && beyond(nv, nv0) {
            return Err(left_the_range("noise_variance", nv0));
        }
        let ratio_at_limit = t <= lo + LIMIT_GAP || (hi < ln_r_max && t >= hi - LIMIT_GAP);
        if free_kv
            && if free_nv {
                ratio_at_limit
            } else {
                beyond(kv, kv0)
            }
        {
            return Err(left_the_range("kernel_variance", kv0));
        }
        Ok((self.lml(kv, nv), kv, nv))
    }
}

/// A maximum of [`Spectrum::maximize`] closer than this (in the log) to
/// a limit of its search is taken to lie at it.
const LIMIT_GAP: f64 = 1e-6;

/// `Some(v)` for finite `v`.
fn finite(v: f64) -> Option<f64> {
    v.is_finite().then_some(v)
}

/// The maximizer over `[lo, hi]` of a function that is `None` where it
/// cannot be evaluated: the best point of a grid of spacing [`GRID_STEP`]
/// (both ends included), refined by Brent's method (argmin's `BrentOpt`)
/// between its neighbours.
fn maximize_1d(f: impl Fn(f64) -> Option<f64>, lo: f64, hi: f64) -> Result<f64> {
    let none = || {
        Error::invalid(
            "hyperparameters",
            "the marginal likelihood is not finite for any variance within e^±40 times its \
             start",
        )
    };
    if lo.partial_cmp(&hi).is_none_or(|o| o.is_gt()) {
        return Err(none());
    }
    let steps = ((hi - lo) / GRID_STEP).ceil() as usize;
    let grid = (0..=steps).map(|i| (lo + i as f64 * GRID_STEP).min(hi));
    let Some((t, _)) = grid
        .filter_map(|t| f(t).map(|v| (t, v)))
        .max_by(|a, b| a.1.total_cmp(&b.1))
    else {
        return Err(none());
    };
    let (a, b) = ((t - GRID_STEP).max(lo), (t + GRID_STEP).min(hi));
    let solver = BrentOpt::new(a, b).set_tolerance(1e-12, 1e-12);
    let best = Executor::new(Negated(&f), solver)
        .configure(|s| s.max_iters(200))
        .run()
        .ok()
        .and_then(|r| r.state().best_param)
        .filter(|b| f(*b).zip(f(t)).is_some_and(|(fb, ft)| fb >= ft));
    Ok(best.unwrap_or(t))
}

/// `−f` as an argmin cost (`+∞` where `f` is `None`).
struct Negated<'a, F>(&'a F);

impl<F: Fn(f64) -> Option<f64>> CostFunction for Negated<'_, F> {
    type Param = f64;
    type Output = f64;
    fn cost(&self, t: &f64) -> std::result::Result<f64, argmin::core::Error> {
        Ok((self.0)(*t).map_or(f64::INFINITY, |v| -v))
    }
}

/// The result of [`search`].
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Searched {
    /// The best point.
    pub t: f64,
    /// Its value.
    pub value: f64,
    /// The curvature `−f''` of the last concave local model (or the one
    /// given); `None` when no concave model was formed.
    pub curvature: Option<f64>,
    /// Points evaluated.
    pub evals: usize,
}

/// A point of [`search`]: `t`, the value (`−∞` where it could not be
/// evaluated) and the value's rounding noise.
#[derive(Clone, Copy, Debug)]
struct Point {
    t: f64,
    v: f64,
    noise: f64,
}

/// Maximizes `f` over `t ∈ [lo, hi] = range` from `start` (in it, whose
/// value must be finite) by safeguarded parabolic interpolation: after
/// `start` and `start + step`, each step goes to the vertex of the parabola
/// through the best point and its neighbours (on both sides when it is
/// bracketed), kept inside the bracket (a step beyond a neighbour halves
/// the distance to it instead) and within four times the span of the
/// points; with two points and a `curvature` guess `κ` (`f'' ≈ −κ`), to
/// the vertex of the parabola of that curvature through both; without a
/// concave model, away from the lower neighbour by [`EXPAND`] times the
/// distance. `f` gives the value and a bound on its rounding noise, or
/// `None` for a point that cannot be evaluated (a bracket end, never a
/// model point).
///
/// The search ends when the model promises a gain of at most `tol_gain`
/// plus the best point's noise, when the bracket around the best point is
/// narrower than the noise resolves (`2√(2 noise/κ)`) or, without a concave
/// model, flat to within that gain, at a step shorter than [`MIN_STEP`], or
/// after `max_evals` points. `None` when the start
/// cannot be evaluated.
///
/// # Errors
/// The errors of `f` (e.g. [`Error::Interrupted`]).
pub(crate) fn search(
    mut f: impl FnMut(f64) -> Result<Option<(f64, f64)>>,
    start: f64,
    range: (f64, f64),
    step: f64,
    curvature: Option<f64>,
    tol_gain: f64,
    max_evals: usize,
) -> Result<Option<Searched>> {
    let Some((v0, noise0)) = f(start)? else {
        return Ok(None);
    };
    // Sorted by t.
    let mut pts = vec![Point {
        t: start,
        v: v0,
        noise: noise0,
    }];
    let mut kappa = curvature;
    let mut next = (start + step).clamp(range.0, range.1);
    loop {
        if pts.iter().all(|p| p.t != next) {
            let (v, noise) = f(next)?.unwrap_or((f64::NEG_INFINITY, 0.0));
            let at = pts.partition_point(|p| p.t < next);
            pts.insert(at, Point { t: next, v, noise });
        }
        let b = (0..pts.len())
            .max_by(|&i, &j| pts[i].v.total_cmp(&pts[j].v))
            .unwrap_or(0);
        let (tb, noise) = (pts[b].t, pts[b].noise);
        if pts.len() >= max_evals {
            break;
        }
        let lo = b.checked_sub(1).map(|i| pts[i]);
        let hi = pts.get(b + 1).copied();
        let model = local_model(&pts, b, kappa);
        if let Some((_, a)) = model {
            kappa = Some(-a);
        }
        if let (Some(l), Some(h), Some(k)) = (lo, hi, kappa)
            && h.t - l.t <= 2.0 * (2.0 * noise / k).sqrt()
        {
            break;
        }
        // Bracketed, but flat to within what can be gained (e.g. a kernel
        // variance so small that the length scale does not matter).
        if model.is_none()
            && let (Some(l), Some(h)) = (lo, hi)
            && pts[b].v - l.v.min(h.v) <= tol_gain + noise
        {
            break;
        }
        let span = (pts[pts.len() - 1].t - pts[0].t).max(step.abs());
        let mut dt = match model {
            Some((g, a)) => (-g / a).clamp(-4.0 * span, 4.0 * span),
            None => match (lo, hi) {
                (Some(l), None) => EXPAND * (tb - l.t),
                (None, Some(h)) => EXPAND * (tb - h.t),
                // Bracketed without a concave model (a neighbour that
                // failed): halve towards the larger side.
                _ => {
                    let (l, h) = (lo.map_or(tb, |p| p.t), hi.map_or(tb, |p| p.t));
                    if h - tb > tb - l {
                        0.5 * (h - tb)
                    } else {
                        0.5 * (l - tb)
                    }
                }
            },
        };
        if let Some(l) = lo
            && tb + dt <= l.t
        {
            dt = 0.5 * (l.t - tb);
        }
        if let Some(h) = hi
            && tb + dt >= h.t
        {
            dt = 0.5 * (h.t - tb);
        }
        dt = (tb + dt).clamp(range.0, range.1) - tb;
        if let Some((g, a)) = model
            && g * dt + 0.5 * a * dt * dt <= tol_gain + noise
        {
            break;
        }
        if dt.abs() <= MIN_STEP * tb.abs().max(1.0) {
            break;
        }
        next = tb + dt;
    }
    let best = pts
        .iter()
        .copied()
        .max_by(|a, b| a.v.total_cmp(&b.v))
        .unwrap_or(Point {
            t: start,
            v: v0,
            noise: noise0,
        });
    Ok(Some(Searched {
        t: best.t,
        value: best.v,
        curvature: kappa,
        evals: pts.len(),
    }))
}

/// The slope `g` and second derivative `a < 0` at the best point `pts[b]`
/// of the parabola through it and its nearest finite points (its
/// neighbours when both are finite), or with two finite points and a
/// curvature guess `κ` the parabola of second derivative `−κ` through both;
/// `None` without a concave one.
fn local_model(pts: &[Point], b: usize, kappa: Option<f64>) -> Option<(f64, f64)> {
    let Point { t: tb, v: fb, .. } = pts[b];
    let bracketed =
        b > 0 && b + 1 < pts.len() && pts[b - 1].v.is_finite() && pts[b + 1].v.is_finite();
    let near: Vec<Point> = if bracketed {
        vec![pts[b - 1], pts[b + 1]]
    } else {
        let mut near: Vec<Point> = pts
            .iter()
            .enumerate()
            .filter(|&(i, p)| i != b && p.v.is_finite())
            .map(|(_, &p)| p)
            .collect();
        near.sort_by(|p, q| (p.t - tb).abs().total_cmp(&(q.t - tb).abs()));
        near
    };
    match near.as_slice() {
        [p1, p2, ..] => {
            // f = fb + g u + a u²/2 with u = t − tb through both points.
            let (u1, u2) = (p1.t - tb, p2.t - tb);
            let (d1, d2) = ((p1.v - fb) / u1, (p2.v - fb) / u2);
            let a = 2.0 * (d1 - d2) / (u1 - u2);
            let g = d1 - 0.5 * a * u1;
            if a < 0.0 && a.is_finite() && g.is_finite() {
                return Some((g, a));
            }
            kappa.map(|k| (d1 + 0.5 * k * u1, -k))
        }
        [p1] => kappa.map(|k| {
            let u = p1.t - tb;
            ((p1.v - fb) / u + 0.5 * k * u, -k)
        }),
        _ => None,
    }
}

/// A step of [`search`] shorter than this (relative to `max(1, |t|)`) ends
/// it: the points are as close as the value's rounding allows.
const MIN_STEP: f64 = 1e-10;

/// Expansion factor of [`search`] while no concave model exists.
const EXPAND: f64 = 1.618_033_988_749_895;

/// The first step of [`search`] on the coarsest level, in `ln l` (a factor
/// 1.65), and the largest first step on a finer one.
const INITIAL_STEP: f64 = 0.5;

/// A coarse level's search ends when its model promises less than this
/// many nats (over the level's rows): far below what separates the level's
/// optimum from the next finer one's, which is `O(1)` nats (the shift of
/// the optimum is `O(1/√n)` in `ln l`).
const COARSE_GAIN: f64 = 0.01;

/// Points one [`search`] may evaluate.
const MAX_EVALS: usize = 60;

/// Statistics at length scale `l` and unit kernel variance over all rows of
/// a coarse level (0: all rows; level `j + 1` keeps the rows `0, 4, 8, …`
/// of level `j`, as `optimize`'s coarse levels do).
pub(crate) type StatsAt<'a> = dyn Fn(f64, usize, &Monitor) -> Result<FeatureStats> + Sync + 'a;

/// An evaluation of the profiled LML: the length scale, the LML, the
/// variances at its maximum, whether their ratio is at the resolved cap
/// ([`RESOLVED`]) and the statistics (unit kernel variance).
struct Best {
    l: f64,
    lml: f64,
    kv: f64,
    nv: f64,
    capped: bool,
    /// A bound on the LML's rounding noise ([`Spectrum::rounding_noise`]).
    noise: f64,
    stats: FeatureStats,
}

/// A coarse level keeps at least this many rows per feature: with fewer
/// rows than features the features can fit the targets exactly (the LML
/// then grows without bound as `σ_n² → 0`), and near that its optimum says
/// little about the finer levels'.
const ROWS_PER_FEATURE: usize = 2;

/// The rows of each level: `n` and then a quarter of the previous level's
/// while that has at least `coarse_min_rows` (as `optimize`'s
/// coarse-to-fine runs) and the quarter at least [`ROWS_PER_FEATURE`] rows
/// per feature of the `width` features.
pub(super) fn level_rows(n: usize, coarse_min_rows: usize, width: usize) -> Vec<usize> {
    let mut rows = vec![n];
    while let Some(&last) = rows.last()
        && last >= coarse_min_rows.max(4)
        && last / 4 >= ROWS_PER_FEATURE * width
    {
        rows.push(last / 4);
    }
    rows
}

/// Fits the feature-space GP of `map` with one length scale (`params`:
/// `(l, σ², σ_n²)` and which are free, at least one) by the profiled search
/// of the module docs: for a fixed length scale one statistics pass and the
/// maximum over the free variances; else from the better of the map's
/// length scale and the data's ([`best_start`]) and `n_restarts` starts
/// within a factor 10 of it ([`FeatureLmlConfig`]'s
/// optimizer seed), each run a [`search`] in `ln l` on every coarse level
/// from the coarsest, each level starting from the previous level's
/// optimum with a step of the size by which optima move between levels.
/// The best evaluation on all rows is kept: its statistics scaled to the
/// fitted kernel variance and their GP. `n_iter` counts the statistics
/// passes of all levels and runs, and those of the start candidates.
///
/// # Errors
/// The errors of `stats_at` and of the first run's evaluation on all
/// rows when every run failed; [`Error::Interrupted`] once `monitor` is
/// cancelled.
pub(crate) fn fit(
    map: &HyperMap,
    params: &LogParams,
    cfg: &FeatureLmlConfig,
    n_rows: usize,
    stats_at: &StatsAt<'_>,
    par: Parallelism,
    monitor: &Monitor,
) -> Result<FittedFeatureGp> {
    let [l0, kv0, nv0] = params.values[..] else {
        return Err(Error::Internal(
            "a profiled fit needs one length scale".into(),
        ));
    };
    let free = |i: usize| params.free.contains(&i);
    let (free_kv, free_nv) = (free(1), free(2));
    let eval = |l: f64, level: usize| -> Result<Best> {
        let stats = stats_at(l, level, monitor)?;
        monitor.check()?;
        let (lml, kv, nv, capped, noise) = crate::threads::install(|| {
            let spectrum = Spectrum::new(&stats, cfg.center, par)?;
            // Also with the length scale alone free: no maximum either.
            spectrum.check_targets_vary()?;
            let (lml, kv, nv) = spectrum.maximize(kv0, nv0, free_kv, free_nv)?;
            let noise = spectrum.rounding_noise(kv, nv);
            Ok::<_, Error>((lml, kv, nv, spectrum.at_ratio_cap(kv, nv), noise))
        })??;
        Ok(Best {
            l,
            lml,
            kv,
            nv,
            capped,
            noise,
            stats,
        })
    };
    let (best, n_iter) = if free(0) {
        let levels = level_rows(n_rows, cfg.optimizer.coarse_min_rows, map.n_components());
        let coarsest = levels.len() - 1;
        let candidates = length_scale_starts(&[l0], cfg.data_length_scale.clone());
        let start = candidates[best_start(
            &candidates,
            |l| eval(l[0], coarsest).map(|b| b.lml),
            "LML",
            levels[coarsest],
            monitor,
        )?][0];
        let (best, n_iter) = runs(&eval, start.ln(), &levels, cfg, monitor)?;
        (best, n_iter + candidates.len() as u64)
    } else {
        monitor.stage("optimizer runs", 1);
        let best = eval(l0, 0)?;
        monitor.advance(1);
        (best, 1)
    };
    let Best {
        l,
        kv,
        nv,
        capped,
        mut stats,
        ..
    } = best;
    if capped {
        monitor.message(format!(
            "the kernel-to-noise variance ratio {:.3e} is the largest the float64 statistics \
             resolve: the features (nearly) fit the targets exactly",
            kv / nv
        ));
    }
    stats.scale_features(kv.sqrt());
    let gp = crate::threads::install(|| FeatureGp::fit(&stats, nv, cfg.center, par))??;
    Ok(FittedFeatureGp {
        map: map.at(&[l], kv)?,
        length_scale: vec![l],
        kernel_variance: kv,
        gp,
        stats,
        n_iter,
    })
}

/// The start of an L-BFGS fit (per-dimension length scales): `params` with
/// the free variances at their maximum ([`Spectrum::maximize`]) at the
/// start length scales, from `stats`, the statistics there at unit kernel
/// variance. The run then starts on the targets' scale, whatever the map's
/// kernel variance (one of 1 for targets in thousands is a start the
/// optimizer does not recover from). `params` as given when no variance is
/// free.
///
/// # Errors
/// Constant targets; targets of a variance outside `10^−40..10^40`; an
/// eigendecomposition that does not converge; as [`Spectrum::maximize`],
/// a maximum beyond `e^±40` times a free variance's start, which the run
/// could not reach either (the fit with one length scale refuses the same
/// start; the run used to start from the given values and end at the edge
/// of the range).
pub(crate) fn variance_start(
    params: &LogParams,
    stats: &FeatureStats,
    center: bool,
    par: Parallelism,
) -> Result<LogParams> {
    let k = params.n_length_scales();
    let (free_kv, free_nv) = (params.free.contains(&k), params.free.contains(&(k + 1)));
    let (kv0, nv0) = (params.values[k], params.values[k + 1]);
    let spectrum = crate::threads::install(|| Spectrum::new(stats, center, par))??;
    spectrum.check_targets_vary()?;
    spectrum.check_target_scale()?;
    let (_, kv, nv) = spectrum.maximize(kv0, nv0, free_kv, free_nv)?;
    let mut start = params.clone();
    start.values[k] = kv;
    start.values[k + 1] = nv;
    Ok(start)
}

/// The LML of `stats` (taken at unit kernel variance) maximized over the
/// free variances of `params` from their values there
/// ([`Spectrum::maximize`]).
///
/// # Errors
/// As [`Spectrum::new`] and [`Spectrum::maximize`].
pub(crate) fn profiled_lml(
    params: &LogParams,
    stats: &FeatureStats,
    center: bool,
    par: Parallelism,
) -> Result<f64> {
    let k = params.n_length_scales();
    let spectrum = crate::threads::install(|| Spectrum::new(stats, center, par))??;
    let (lml, _, _) = spectrum.maximize(
        params.values[k],
        params.values[k + 1],
        params.free.contains(&k),
        params.free.contains(&(k + 1)),
    )?;
    Ok(lml)
}

/// The runs of [`fit`] over the length scale from `ln l = t0` (restarts as
/// [`best_of_runs`] draws them), within `e^±40` times the start `l` (as
/// [`LogParams::at`]): the best evaluation on all rows and the evaluations
/// spent.
fn runs(
    eval: &dyn Fn(f64, usize) -> Result<Best>,
    t0: f64,
    levels: &[usize],
    cfg: &FeatureLmlConfig,
    monitor: &Monitor,
) -> Result<(Best, u64)> {
    let opt = &cfg.optimizer;
    let tol = 0.5 * opt.tol_grad * opt.tol_grad;
    best_of_runs(&[t0], opt, monitor, |start| {
        let range = (t0 - MAX_ABS_LOG, t0 + MAX_ABS_LOG);
        let (best, evals) = run(eval, start[0], range, levels, tol, monitor)?;
        Ok(RunOutcome {
            score: best.lml,
            iters: evals,
            summary: format!("LML = {:.6} after {evals} length scales tried", best.lml),
            run: best,
        })
    })
}

/// One run of [`runs`] from `ln l = start` over `levels` (rows per level,
/// all rows first) within `range`: a [`search`] per level from the
/// coarsest; the best evaluation on all rows and the evaluations spent. A coarse level whose
/// start cannot be evaluated is skipped; all rows start again from `start`
/// when the coarse optimum cannot be evaluated there (as `optimize`'s
/// coarse-to-fine runs do).
fn run(
    eval: &dyn Fn(f64, usize) -> Result<Best>,
    start: f64,
    range: (f64, f64),
    levels: &[usize],
    tol: f64,
    monitor: &Monitor,
) -> Result<(Best, u64)> {
    let (mut t, mut step, mut kappa) = (start, INITIAL_STEP, None);
    let mut evals = 0u64;
    for level in (0..levels.len()).rev() {
        let n = levels[level] as f64;
        let tol_gain = if level == 0 {
            tol
        } else {
            tol.max(COARSE_GAIN / n)
        };
        let mut outcome = search_level(eval, level, n, t, range, step, kappa, tol_gain)?;
        if level == 0 && outcome.0.is_none() && t != start {
            monitor.message(format!(
                "  {} rows failed at the coarse optimum ({}); starting from the start",
                levels[0],
                outcome
                    .2
                    .as_ref()
                    .map_or_else(String::new, Error::to_string)
            ));
            outcome = search_level(eval, level, n, start, range, INITIAL_STEP, kappa, tol_gain)?;
        }
        let (searched, best, err) = outcome;
        let Some(s) = searched else {
            let e = err.unwrap_or_else(|| Error::Internal("no evaluation".into()));
            if level == 0 {
                return Err(e);
            }
            monitor.message(format!(
                "  {} rows failed ({e}); going on with the next level",
                levels[level]
            ));
            continue;
        };
        evals += s.evals as u64;
        monitor.message(format!(
            "  {} rows: LML = {:.6} after {} length scales tried",
            levels[level],
            s.value * n,
            s.evals
        ));
        if level == 0 {
            let b = best.ok_or_else(|| Error::Internal("no evaluation".into()))?;
            return Ok((b, evals));
        }
        // The next level's optimum moves by O(1/√(κ n)) from this one's:
        // start there with a step of that size in the direction of the
        // last move.
        kappa = s.curvature.or(kappa);
        let n_next = levels[level - 1] as f64;
        let scale = kappa
            .map_or(INITIAL_STEP, |k| 2.0 / (k * n_next).sqrt())
            .min(INITIAL_STEP);
        let moved = s.t - t;
        step = if moved == 0.0 {
            scale
        } else {
            moved.signum() * moved.abs().min(scale)
        };
        t = s.t;
    }
    Err(Error::Internal("a profiled run without levels".into()))
}

/// A [`search`] on the level `level` of `n` rows (values per row) within
/// `range`: its result (`None` when the start cannot be evaluated), the
/// best evaluation and the last error of an evaluation.
#[allow(clippy::too_many_arguments)]
fn search_level(
    eval: &dyn Fn(f64, usize) -> Result<Best>,
    level: usize,
    n: f64,
    start: f64,
    range: (f64, f64),
    step: f64,
    kappa: Option<f64>,
    tol_gain: f64,
) -> Result<(Option<Searched>, Option<Best>, Option<Error>)> {
    let mut best: Option<Best> = None;
    let mut last_err = None;
    let searched = search(
        |t| match eval(t.exp(), level) {
            Ok(b) => {
                let value = (b.lml / n, b.noise / n);
                if best.as_ref().is_none_or(|o| b.lml > o.lml) {
                    best = Some(b);
                }
                Ok(Some(value))
            }
            Err(Error::Interrupted) => Err(Error::Interrupted),
            Err(e) => {
                last_err = Some(e);
                Ok(None)
            }
        },
        start,
        range,
        step,
        kappa,
        tol_gain,
        MAX_EVALS,
    )?;
    Ok((searched, best, last_err))
}

#[cfg(test)]
mod tests {
    use ndarray::{Array1, Array2};
    use rand::Rng as _;

    use super::*;
    use crate::fourier::{Sampler, Variant};
    use crate::gp::feature_lml::tests::{fourier, maclaurin};
    use crate::gp::feature_lml::{fit_feature_gp, FeatureLml};
    use crate::gp::optimize::{per_dimension_length_scales, Hyper, Objective, OptimizerConfig};
    use crate::kernels::Kernel;
    use crate::maclaurin::{MaclaurinConfig, MaclaurinKernel};

    const PAR: Parallelism = Parallelism::Rayon;

    /// Statistics of a random `N × D` feature matrix and targets.
    fn random_stats(n: usize, d: usize, seed: u64) -> FeatureStats {
        let mut rng = crate::rng::seeded(seed);
        let phi = Array2::from_shape_fn((n, d), |_| rng.random_range(-1.0..1.0));
        let y = Array1::from_shape_fn(n, |i| phi.row(i).sum() * 0.3 + rng.random_range(-1.0..1.0));
        let mut stats = FeatureStats::new(d);
        stats.accumulate(phi.view(), y.view(), PAR).unwrap();
        stats
    }

    #[test]
    fn the_spectral_lml_equals_the_cholesky_fit() {
        // N > D, N < D (a singular Gram) and N = D; centered or not.
        for (n, d, seed) in [(40, 7, 1), (6, 15, 2), (9, 9, 3)] {
            let unit = random_stats(n, d, seed);
            for center in [true, false] {
                let spectrum = Spectrum::new(&unit, center, PAR).unwrap();
                for (kv, nv) in [(1.0, 0.1), (0.3, 2.0), (25.0, 1e-3)] {
                    let mut scaled = unit.clone();
                    scaled.scale_features(f64::sqrt(kv));
                    let want = FeatureGp::fit(&scaled, nv, center, PAR).unwrap().lml;
                    let got = spectrum.lml(kv, nv);
                    assert!(
                        (got - want).abs() < 1e-11 * (1.0 + want.abs()),
                        "N = {n}, D = {d}: {got} vs {want}"
                    );
                }
            }
        }
    }

    #[test]
    fn scaled_statistics_equal_those_of_scaled_features() {
        let mut rng = crate::rng::seeded(4);
        let phi = Array2::from_shape_fn((30, 5), |_| rng.random_range(-1.0..1.0));
        let y = Array1::from_shape_fn(30, |_| rng.random_range(-1.0..1.0));
        let mut stats = FeatureStats::new(5);
        stats.accumulate(phi.view(), y.view(), PAR).unwrap();
        stats.scale_features(1.7);
        let mut want = FeatureStats::new(5);
        want.accumulate((&phi * 1.7).view(), y.view(), PAR).unwrap();
        for (a, b) in stats.gram.iter().zip(&want.gram) {
            assert!((a - b).abs() < 1e-13 * (1.0 + b.abs()));
        }
        for (a, b) in stats.phi_y.iter().zip(&want.phi_y) {
            assert!((a - b).abs() < 1e-13 * (1.0 + b.abs()));
        }
        for (a, b) in stats.phi_sum.iter().zip(&want.phi_sum) {
            assert!((a - b).abs() < 1e-13 * (1.0 + b.abs()));
        }
    }

    #[test]
    fn the_variances_maximum_is_stationary_and_beats_a_fine_grid() {
        let unit = random_stats(60, 8, 5);
        let spectrum = Spectrum::new(&unit, true, PAR).unwrap();
        let (kv0, nv0) = (0.7, 0.3);
        // The gradient in (ln σ², ln σ_n²) from the Cholesky fit.
        let grad = |kv: f64, nv: f64| {
            let mut s = unit.clone();
            s.scale_features(kv.sqrt());
            let gp = FeatureGp::fit(&s, nv, true, PAR).unwrap();
            let a_inv = gp.chol.inverse(PAR);
            let mut g = [0.0; 2];
            super::super::sums::variance_gradients(&s, &gp, &a_inv, true, &mut g);
            g
        };
        let ln_grid: Vec<f64> = (0..=160).map(|i| -4.0 + 0.05 * i as f64).collect();
        for (free_kv, free_nv) in [(true, false), (false, true), (true, true)] {
            let (lml, kv, nv) = spectrum.maximize(kv0, nv0, free_kv, free_nv).unwrap();
            assert_eq!(lml, spectrum.lml(kv, nv));
            if !free_kv {
                assert_eq!(kv, kv0);
            }
            if !free_nv {
                assert_eq!(nv, nv0);
            }
            // Located from values alone, a maximum is found to about
            // √(ε |LML| / f'') in the log, where the slope is
            // √(ε |LML| f'') ≈ 1e−6 (|LML| ≈ 60, f'' ≈ 30).
            let g = grad(kv, nv);
            for (free, gi) in [(free_kv, g[0]), (free_nv, g[1])] {
                if free {
                    assert!(gi.abs() < 1e-5, "{free_kv} {free_nv}: {g:?}");
                }
            }
            let mut grid_best = f64::NEG_INFINITY;
            for &a in &ln_grid {
                for &b in &ln_grid {
                    let k = if free_kv { kv0 * a.exp() } else { kv0 };
                    let v = if free_nv { nv0 * b.exp() } else { nv0 };
                    grid_best = grid_best.max(spectrum.lml(k, v));
                }
            }
            assert!(lml >= grid_best - 1e-12 * lml.abs(), "{lml} < {grid_best}");
        }
        assert_eq!(
            spectrum.maximize(kv0, nv0, false, false).unwrap(),
            (spectrum.lml(kv0, nv0), kv0, nv0)
        );
    }

    #[test]
    fn the_ratio_stops_at_the_cap_where_the_features_fit_the_targets_exactly() {
        // y = Φw exactly (no centering): Q(r) → 0 as r → ∞ and the LML
        // grows like (N − D)/2 ln r; the maximum is the resolved cap.
        let mut rng = crate::rng::seeded(6);
        let phi = Array2::from_shape_fn((40, 7), |_| rng.random_range(-1.0..1.0));
        let y = phi.dot(&Array1::from_shape_fn(7, |_| rng.random_range(-1.0..1.0)));
        let mut stats = FeatureStats::new(7);
        stats.accumulate(phi.view(), y.view(), PAR).unwrap();
        let spectrum = Spectrum::new(&stats, false, PAR).unwrap();
        let trace: f64 = stats.gram.diag().sum();
        let cap = RESOLVED / (f64::EPSILON * trace);
        for (free_kv, free_nv) in [(true, true), (false, true)] {
            let (lml, kv, nv) = spectrum.maximize(1.0, 0.1, free_kv, free_nv).unwrap();
            assert!(((kv / nv) / cap - 1.0).abs() < 1e-5, "{kv} / {nv} vs {cap}");
            assert!(spectrum.at_ratio_cap(kv, nv) && lml.is_finite());
        }
        // A fixed noise variance bounds it inside.
        let (_, kv, nv) = spectrum.maximize(1.0, 0.1, true, false).unwrap();
        assert!(!spectrum.at_ratio_cap(kv, nv));
        // With noise the maximum is inside.
        let noisy = y.mapv(|v| v + 0.1 * rng.random_range(-1.0..1.0));
        let mut stats = FeatureStats::new(7);
        stats.accumulate(phi.view(), noisy.view(), PAR).unwrap();
        let spectrum = Spectrum::new(&stats, false, PAR).unwrap();
        let (_, kv, nv) = spectrum.maximize(1.0, 0.1, true, true).unwrap();
        assert!(!spectrum.at_ratio_cap(kv, nv));
    }

    #[test]
    fn constant_targets_have_no_maximum() {
        let mut rng = crate::rng::seeded(9);
        for n in [1, 12] {
            let phi = Array2::from_shape_fn((n, 4), |_| rng.random_range(-1.0..1.0));
            let mut stats = FeatureStats::new(4);
            stats
                .accumulate(phi.view(), Array1::from_elem(n, 2.5).view(), PAR)
                .unwrap();
            let spectrum = Spectrum::new(&stats, true, PAR).unwrap();
            let err = spectrum
                .maximize(1.0, 0.1, false, true)
                .unwrap_err()
                .to_string();
            assert!(err.contains("constant"), "{err}");
            assert_eq!(err.contains("n_samples = 1"), n == 1, "{err}");
            // Nothing to maximize: the LML as it is.
            assert!(spectrum.maximize(1.0, 0.1, false, false).is_ok());
        }
    }

    /// `search` on `f`, counting evaluations.
    fn run_search(
        f: impl Fn(f64) -> Option<f64>,
        start: f64,
        step: f64,
        kappa: Option<f64>,
        tol: f64,
    ) -> Searched {
        search(
            |t| Ok(f(t).map(|v| (v, 0.0))),
            start,
            (-MAX_ABS_LOG, MAX_ABS_LOG),
            step,
            kappa,
            tol,
            MAX_EVALS,
        )
        .unwrap()
        .unwrap()
    }

    #[test]
    fn the_search_reaches_the_maximum_within_its_gain_tolerance() {
        let tol = 1e-12;
        // A quartic with its maximum f(1.3) = 0.5 (concave everywhere).
        let quartic = |t: f64| Some(0.5 - (t - 1.3).powi(2) - 0.4 * (t - 1.3).powi(4));
        for (start, step, kappa) in [
            (0.0, 0.5, None),
            (1.0, 0.1, Some(2.0)),
            (3.0, -0.05, Some(1.0)),
            (1.3001, 1e-3, Some(2.0)),
            (-20.0, 0.5, None),
        ] {
            let s = run_search(quartic, start, step, kappa, tol);
            // The gain left is at most a few times the tolerance.
            assert!(0.5 - s.value < 10.0 * tol, "{start}: {s:?}");
            assert!(s.evals < 30, "{start}: {s:?}");
            assert!(s.curvature.is_some_and(|k| (k - 2.0).abs() < 0.1), "{s:?}");
        }
        // A parabola with the right curvature: the start, the second point
        // and the vertex, then the model has nothing left to promise.
        let parabola = |t: f64| Some(-(t - 0.7).powi(2));
        let s = run_search(parabola, 0.0, 0.1, Some(2.0), tol);
        assert!((s.t - 0.7).abs() < 1e-9 && s.evals <= 4, "{s:?}");
        // Points that cannot be evaluated bound the search: the maximum of
        // the part that can (t < 2) is at its edge.
        let cut = |t: f64| (t < 2.0).then(|| -(t - 3.0).powi(2));
        let s = run_search(cut, 0.0, 0.5, None, 1e-8);
        assert!(s.t < 2.0 && s.t > 1.99, "{s:?}");
        // Flat: the last of equal values counts as the best, so it expands
        // to the end of the range, in about ln(80 / 0.5) / ln 1.618 steps.
        let s = run_search(|_| Some(-1.25), 0.0, 0.5, None, tol);
        assert!(s.value == -1.25 && s.evals <= 12, "{s:?}");
        // Flat around a bracketed best point: no gain to chase.
        let s = run_search(
            |t| Some(if t == 0.5 { 0.0 } else { -1e-15 }),
            0.0,
            0.5,
            None,
            1e-12,
        );
        assert_eq!((s.t, s.evals), (0.5, 3), "{s:?}");
        // Not concave at the start: it expands until it brackets.
        let bump = |t: f64| Some(1.0 / (1.0 + (t - 6.0).powi(2)));
        let s = run_search(bump, 0.0, 0.5, None, tol);
        assert!((s.t - 6.0).abs() < 1e-5, "{s:?}");
    }

    #[test]
    fn the_search_stops_at_the_noise_of_its_values() {
        // A parabola with rounding-like noise of ±1e−6 (a deterministic
        // hash of t), which the evaluation reports: the search ends where
        // the noise hides the gain, within a few times the noise of the
        // maximum, instead of chasing it.
        let noise = 1e-6;
        let wiggle = |t: f64| {
            let h = (t * 1e9).to_bits().wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 11;
            noise * (2.0 * h as f64 / (1u64 << 53) as f64 - 1.0)
        };
        let f = |t: f64| Some((-(t - 0.4).powi(2) + wiggle(t), noise));
        for (start, kappa) in [(0.0, None), (0.3, Some(2.0))] {
            let s = search(
                |t| Ok(f(t)),
                start,
                (-1.0, 1.0),
                0.1,
                kappa,
                1e-14,
                MAX_EVALS,
            )
            .unwrap()
            .unwrap();
            assert!(s.evals < 15, "{s:?}");
            assert!((s.t - 0.4).powi(2) < 5.0 * noise, "{s:?}");
        }
    }

    #[test]
    fn a_start_that_cannot_be_evaluated_is_none_and_errors_pass_through() {
        let none = search(|_| Ok(None), 0.0, (-1.0, 1.0), 0.5, None, 1e-8, 10).unwrap();
        assert!(none.is_none());
        let mut calls = 0;
        let err = search(
            |_| {
                calls += 1;
                if calls > 2 {
                    Err(Error::Interrupted)
                } else {
                    Ok(Some((0.0, 0.0)))
                }
            },
            0.0,
            (-1.0, 1.0),
            0.5,
            None,
            1e-8,
            10,
        )
        .unwrap_err();
        assert_eq!(err, Error::Interrupted);
    }

    #[test]
    fn the_search_stays_in_its_range() {
        // Rising everywhere: the search ends at the range's upper end and
        // never evaluates outside the range.
        for (start, range) in [(0.0, (-3.0, 2.5)), (30.0, (-10.0, 70.0))] {
            let mut seen = Vec::new();
            let s = search(
                |t| {
                    seen.push(t);
                    Ok(Some((t, 0.0)))
                },
                start,
                range,
                0.5,
                None,
                1e-12,
                MAX_EVALS,
            )
            .unwrap()
            .unwrap();
            assert_eq!(s.t, range.1, "{s:?}");
            assert!(
                seen.iter().all(|&t| range.0 <= t && t <= range.1),
                "{seen:?}"
            );
        }
    }

    fn data(n: usize, seed: u64) -> (Array2<f64>, Array1<f64>) {
        let mut rng = crate::rng::seeded(seed);
        let x = Array2::from_shape_fn((n, 2), |_| rng.random_range(-1.5..1.5));
        let y = x
            .rows()
            .into_iter()
            .map(|r: ndarray::ArrayView1<f64>| {
                (1.7 * r[0]).sin() + 0.3 * r.sum() + 0.1 * rng.random_range(-1.0_f64..1.0)
            })
            .collect();
        (x, y)
    }

    fn maps(x: &Array2<f64>) -> Vec<HyperMap> {
        vec![
            fourier(
                2,
                Kernel::Matern32,
                Sampler::Orthogonal,
                Variant::CosBias,
                64,
            ),
            maclaurin(x, MaclaurinConfig::new(MaclaurinKernel::Gaussian, 40)),
        ]
    }

    #[test]
    fn the_profiled_fit_reaches_the_lbfgs_optimum_at_a_stationary_point() {
        // The same LML maximized by L-BFGS over all three log
        // hyperparameters (the path of per-dimension length scales): the
        // profiled search ends at least as high, where the whole analytic
        // gradient vanishes.
        let (x, y) = data(1500, 7);
        let n = x.nrows() as f64;
        for map in maps(&x) {
            let cfg = FeatureLmlConfig {
                optimizer: OptimizerConfig {
                    n_restarts: 1,
                    coarse_min_rows: 300,
                    ..Default::default()
                },
                chunk_rows: 256,
                ..Default::default()
            };
            let monitor = Monitor::new();
            let fit = fit_feature_gp(&map, x.view(), y.view(), &cfg, PAR, &monitor).unwrap();
            let messages = monitor.take_messages();
            // Levels of 1,500 and 375 rows, and 93 for the 40 Maclaurin
            // features (fewer than two rows per feature for the 64 Fourier
            // ones), two runs.
            let levels = level_rows(1500, 300, map.n_components());
            assert_eq!(levels.len(), if map.n_components() == 40 { 3 } else { 2 });
            for rows in levels {
                let head = format!("  {rows} rows: LML = ");
                assert!(
                    messages.iter().any(|m| m.starts_with(&head)),
                    "{messages:?}"
                );
            }
            assert!(messages.iter().any(|m| m.starts_with("run 2/2: LML = ")));
            let (l0, kv0) = map.hyperparameters();
            let params = crate::gp::HyperInit {
                length_scale: Some(l0),
                kernel_variance: Some(kv0),
                ..Default::default()
            }
            .resolve(x.view(), y.view(), true)
            .unwrap();
            let obj =
                FeatureLml::new(&map, x.view(), y.view(), params.clone(), true, 256, PAR).unwrap();
            let lbfgs =
                super::super::optimize_objective(&map, &params, &obj, &cfg, &Monitor::default())
                    .unwrap();
            assert!(
                fit.gp.lml >= lbfgs.gp.lml - 1e-8 * n,
                "{} vs {}",
                fit.gp.lml,
                lbfgs.gp.lml
            );
            let mut v = fit.length_scale.clone();
            v.extend([fit.kernel_variance, fit.gp.noise_variance]);
            let all = LogParams {
                values: v.clone(),
                free: vec![0, 1, 2],
            };
            let obj =
                FeatureLml::new(&map, x.view(), y.view(), all.clone(), true, 256, PAR).unwrap();
            let e = obj.evaluate(&all.start(), &Monitor::default()).unwrap();
            // The variances are at their maximum; in ln l the search stops
            // with at most ~5e-11 per row to gain, a slope of about
            // √(2κ · 5e-11) per row.
            assert!(
                e.grad[1].abs() < 1e-6 * n && e.grad[2].abs() < 1e-6 * n,
                "{:?}",
                e.grad
            );
            assert!(e.grad[0].abs() < 1e-4 * n, "{:?}", e.grad);
        }
    }

    #[test]
    fn a_map_length_scale_far_from_the_data_starts_at_the_data_scale() {
        // Inputs 10^4 times larger (or smaller) than those the map's length
        // scale suits: at that length scale the features are noise to the
        // targets (or nearly constant) and the LML is flat, so a run from
        // there stops at a spurious maximum. Started from the data's scale
        // the fit is the one on the unit inputs, scaled: the features of
        // (s x, s l) are those of (x, l).
        let (x, y) = data(800, 4);
        let n = x.nrows() as f64;
        let map = fourier(
            2,
            Kernel::Gaussian,
            Sampler::Orthogonal,
            Variant::CosSin,
            48,
        );
        for ard in [false, true] {
            let cfg = FeatureLmlConfig {
                ard,
                optimizer: OptimizerConfig {
                    n_restarts: 0,
                    coarse_min_rows: 200,
                    ..Default::default()
                },
                ..Default::default()
            };
            let fit = |x: &Array2<f64>, cfg: &FeatureLmlConfig| {
                fit_feature_gp(&map, x.view(), y.view(), cfg, PAR, &Monitor::new()).unwrap()
            };
            let unit = fit(&x, &cfg);
            for s in [1e4, 1e-4] {
                let scaled = fit(&(&x * s), &cfg);
                // Both runs end at the maximum within their stopping rules,
                // each with at most about 5e-11 per row left to gain (the
                // profiled search's tolerance; L-BFGS's gradient tolerance
                // TOL_GRAD), and in ln l within about √(2 · 5e-11 / κ) of
                // it, κ ~ 0.1 the curvature per row.
                assert!(
                    (scaled.gp.lml - unit.gp.lml).abs() < 1e-10 * n,
                    "ard {ard}, scale {s}: {} vs {}",
                    scaled.gp.lml,
                    unit.gp.lml
                );
                for (a, b) in scaled.length_scale.iter().zip(&unit.length_scale) {
                    assert!(((a / s).ln() - b.ln()).abs() < 1e-3, "{a} / {s} vs {b}");
                }
            }
            // Only from the map's length scale (the data's scale given as
            // the same), the large inputs end far below.
            let own = FeatureLmlConfig {
                data_length_scale: Some(map.hyperparameters().0),
                ..cfg.clone()
            };
            let stuck = fit(&(&x * 1e4), &own);
            assert!(stuck.gp.lml < unit.gp.lml - 0.1 * n, "{}", stuck.gp.lml);
        }
    }

    #[test]
    fn an_ard_fit_compares_the_per_column_data_start() {
        // One column in units 1,000 times smaller: the data start of an ARD
        // fit is per column (as the exact GP's), not one median distance
        // for every column.
        let (mut x, y) = data(800, 4);
        x.column_mut(1).mapv_inplace(|v| v * 1e3);
        let map = fourier(
            2,
            Kernel::Gaussian,
            Sampler::Orthogonal,
            Variant::CosSin,
            48,
        );
        let cfg = FeatureLmlConfig {
            ard: true,
            optimizer: OptimizerConfig {
                n_restarts: 0,
                coarse_min_rows: 200,
                ..Default::default()
            },
            ..Default::default()
        };
        let monitor = Monitor::new();
        fit_feature_gp(&map, x.view(), y.view(), &cfg, PAR, &monitor).unwrap();
        let data = per_dimension_length_scales(x.view());
        assert!(data[1] > 100.0 * data[0], "{data:?}");
        let start = format!("start length scales {data:.6?}: LML = ");
        let messages = monitor.take_messages();
        assert!(
            messages.iter().any(|m| m.starts_with(&start)),
            "{start} in {messages:?}"
        );
        // A data scale of another count is refused.
        let three = FeatureLmlConfig {
            data_length_scale: Some(vec![1.0; 3]),
            ..cfg
        };
        let err = fit_feature_gp(&map, x.view(), y.view(), &three, PAR, &Monitor::new());
        assert!(matches!(
            err,
            Err(Error::InvalidParameter {
                name: "data_length_scale",
                ..
            })
        ));
    }

    #[test]
    fn a_fixed_length_scale_takes_one_pass() {
        let (x, y) = data(200, 8);
        let map = &maps(&x)[0];
        for (optimize, n_iter) in [
            (vec![Hyper::KernelVariance], 1),
            (vec![Hyper::NoiseVariance], 1),
            (vec![Hyper::KernelVariance, Hyper::NoiseVariance], 1),
        ] {
            let cfg = FeatureLmlConfig {
                noise_variance: Some(0.05),
                optimize: optimize.clone(),
                ..Default::default()
            };
            let fit =
                fit_feature_gp(map, x.view(), y.view(), &cfg, PAR, &Monitor::default()).unwrap();
            assert_eq!((fit.length_scale.clone(), fit.n_iter), (vec![1.3], n_iter));
            assert_eq!(
                fit.kernel_variance == 0.8,
                !optimize.contains(&Hyper::KernelVariance)
            );
            assert_eq!(
                fit.gp.noise_variance == 0.05,
                !optimize.contains(&Hyper::NoiseVariance)
            );
        }
    }
}
