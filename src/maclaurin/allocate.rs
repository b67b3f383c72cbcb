//! The objective, the TensorSRHT surrogate, the incremental algorithm and
//! the search over the truncation degree (`docs/math/maclaurin.rst`, "Optimized
//! allocation", from "Objective" to "Choice of p").

use super::stats::PairStatistics;
use crate::error::{Error, Result};
use crate::progress::Monitor;

/// How the expected variance of a degree depends on its feature count
/// (`docs/math/maclaurin.rst`, "Objective" and "TensorSRHT's convex
/// surrogate").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VarianceModel {
    /// Unstructured sketches (Gaussian, Rademacher): `v_n(D) = V̄_n / D`.
    Unstructured,
    /// TensorSRHT with padded dimension `d'`: the convex surrogate of
    /// `docs/math/maclaurin.rst`, "TensorSRHT's convex surrogate".
    TensorSrht {
        /// The padded input dimension `d'`.
        d_pad: usize,
    },
}

/// `v_n(D)` of `docs/math/maclaurin.rst`, "Objective" and "TensorSRHT's convex
/// surrogate" from `V̄_n`, `C̄_n` and `D >= 1`: `V̄/D` (unstructured or
/// `d' = 1`); for TensorSRHT `(V̄ − C̄)/D + C̄` when `D ≤ d'` and `C̄ ≤ 0`,
/// else `(V̄ + (d'−1) C̄)/D`.
pub fn expected_variance(var: f64, cov: f64, n_features: usize, model: VarianceModel) -> f64 {
    let d = n_features as f64;
    match model {
        VarianceModel::TensorSrht { d_pad } if d_pad > 1 => {
            if n_features <= d_pad && cov <= 0.0 {
                (var - cov) / d + cov
            } else {
                (var + (d_pad as f64 - 1.0) * cov) / d
            }
        }
        _ => var / d,
    }
}

/// One sketched degree of the objective: `a_n² v_n(D_n)`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DegreeTerm {
    /// The degree `n`.
    pub degree: u32,
    /// Its Maclaurin coefficient `a_n`.
    pub coef: f64,
    /// `V̄_n`.
    pub var: f64,
    /// `C̄_n` (0 for unstructured sketches).
    pub cov: f64,
}

impl DegreeTerm {
    fn value(&self, n_features: usize, model: VarianceModel) -> f64 {
        self.coef * self.coef * expected_variance(self.var, self.cov, n_features, model)
    }
}

/// The variance part `Σ_n a_n² v_n(D_n)` of the objective
/// (`docs/math/maclaurin.rst`, "Objective").
pub fn variance_part(terms: &[DegreeTerm], counts: &[usize], model: VarianceModel) -> f64 {
    terms
        .iter()
        .zip(counts)
        .map(|(t, &c)| t.value(c, model))
        .sum()
}

/// The incremental algorithm of `docs/math/maclaurin.rst`, "Incremental
/// algorithm" for a fixed set of sketched degrees (`terms`, ascending): every
/// degree starts with one feature, then each of the remaining
/// `budget − |terms|` features goes to the degree whose objective after the
/// addition is smallest among those that do not increase it (ties to the
/// largest degree; if none qualifies, to the smallest degree). Returns the
/// counts (aligned with `terms`) and the variance part of the objective.
/// Errors: `|terms| > budget`, empty `terms`.
pub fn incremental(
    terms: &[DegreeTerm],
    budget: usize,
    model: VarianceModel,
) -> Result<(Vec<usize>, f64)> {
    if terms.is_empty() || terms.len() > budget {
        return Err(Error::invalid(
            "n_components",
            format!(
                "{} sketched degrees need at least as many features, the budget is {budget}",
                terms.len()
            ),
        ));
    }
    let mut counts = vec![1usize; terms.len()];
    let mut j_cur = variance_part(terms, &counts, model);
    for _ in terms.len()..budget {
        let mut best: Option<(usize, f64)> = None;
        for (k, t) in terms.iter().enumerate() {
            let j_n = j_cur - t.value(counts[k], model) + t.value(counts[k] + 1, model);
            let bound = best.map_or(j_cur, |(_, b)| b);
            if j_n <= bound {
                best = Some((k, j_n));
            }
        }
        let (k, j_n) = best.unwrap_or_else(|| {
            let t = &terms[0];
            (
                0,
                j_cur - t.value(counts[0], model) + t.value(counts[0] + 1, model),
            )
        });
        counts[k] += 1;
        j_cur = j_n;
    }
    let part = variance_part(terms, &counts, model);
    Ok((counts, part))
}

/// One scored truncation degree of the search (`docs/math/maclaurin.rst`,
/// "Choice of p").
#[derive(Clone, Debug, PartialEq)]
pub struct Candidate {
    /// The truncation degree `p`.
    pub degree: u32,
    /// Sketch features per degree, index = degree (`0..=p`; entries of the
    /// constant, the h01 degree and degrees with `a_n = 0` are 0).
    pub counts: Vec<usize>,
    /// `J = B(p) + Σ a_n² v_n(D_n)` (`+∞` if a term is not finite).
    pub objective: f64,
}

/// The result of the search over `p` (`docs/math/maclaurin.rst`, "Choice of
/// p").
#[derive(Clone, Debug, PartialEq)]
pub struct Allocation {
    /// The chosen candidate.
    pub best: Candidate,
    /// Every candidate that was scored, ascending in `p`.
    pub candidates: Vec<Candidate>,
}

/// The allocation problem of `docs/math/maclaurin.rst`, "Optimized allocation".
#[derive(Clone, Copy, Debug)]
pub struct Problem<'a> {
    /// Pair statistics up to degree `p_max` (at least).
    pub stats: &'a PairStatistics,
    /// Coefficients `a_0..=a_{p_max}`.
    pub coefs: &'a [f64],
    /// Smallest truncation degree searched.
    pub p_min: u32,
    /// Largest truncation degree searched (clipped to the last non-zero
    /// coefficient, e.g. `q` for the polynomial kernel).
    pub p_max: u32,
    /// Exact linear part: degree 1 is not sketched.
    pub h01: bool,
    /// Sketch features to distribute (complex features for complex sketches).
    pub budget: usize,
    /// The variance model of the sketch.
    pub model: VarianceModel,
}

impl Problem<'_> {
    fn sketched(&self, p: u32) -> Vec<u32> {
        let n0 = if self.h01 { 2 } else { 1 };
        (n0..=p)
            .filter(|&n| self.coefs.get(n as usize).is_some_and(|&a| a != 0.0))
            .collect()
    }

    fn score(&self, p: u32) -> Result<Candidate> {
        let degrees = self.sketched(p);
        let terms: Vec<DegreeTerm> = degrees
            .iter()
            .map(|&n| DegreeTerm {
                degree: n,
                coef: self.coefs[n as usize],
                var: self.stats.var[n as usize],
                cov: self.stats.cov[n as usize],
            })
            .collect();
        let bias = self.stats.bias[p as usize];
        let mut counts = vec![0usize; p as usize + 1];
        let finite =
            bias.is_finite() && terms.iter().all(|t| t.var.is_finite() && t.cov.is_finite());
        if !finite {
            return Ok(Candidate {
                degree: p,
                counts,
                objective: f64::INFINITY,
            });
        }
        let (alloc, part) = incremental(&terms, self.budget, self.model)?;
        for (t, c) in terms.iter().zip(alloc) {
            counts[t.degree as usize] = c;
        }
        Ok(Candidate {
            degree: p,
            counts,
            objective: bias + part,
        })
    }

    /// Runs the incremental algorithm (`docs/math/maclaurin.rst`) for every
    /// feasible `p` in `[max(p_min, n_0), p_max]` and keeps the smallest
    /// objective (ties to the larger `p`). If no `p` in the range is feasible,
    /// the largest feasible `p` is used; with `budget = 0` there are no
    /// sketches (`p = n_0 − 1`). Errors: every candidate non-finite, or no
    /// degree can be sketched.
    ///
    /// `monitor` gets the stage "candidate degrees" (one unit per candidate `p`,
    /// each an [`incremental`] run of `O(budget · p)` steps) and is checked
    /// before each candidate.
    pub fn solve(&self, monitor: &Monitor) -> Result<Allocation> {
        let n0 = if self.h01 { 2 } else { 1 };
        let last_nonzero = (0..self.coefs.len())
            .rev()
            .find(|&n| self.coefs[n] != 0.0)
            .unwrap_or(0) as u32;
        let p_max = self
            .p_max
            .min(last_nonzero)
            .min(self.stats.bias.len() as u32 - 1);
        if self.budget == 0 {
            let p = n0 - 1;
            let best = Candidate {
                degree: p,
                counts: vec![0; p as usize + 1],
                objective: self.stats.bias[p as usize],
            };
            return Ok(Allocation {
                best: best.clone(),
                candidates: vec![best],
            });
        }
        let feasible = |p: u32| {
            let k = self.sketched(p).len();
            k >= 1 && k <= self.budget
        };
        let mut range: Vec<u32> = (self.p_min.max(n0)..=p_max)
            .filter(|&p| feasible(p))
            .collect();
        if range.is_empty() {
            range = (n0..=p_max)
                .rev()
                .filter(|&p| feasible(p))
                .take(1)
                .collect();
        }
        if range.is_empty() {
            return Err(Error::invalid(
                "n_components",
                "the kernel has no degree that can be sketched with these settings",
            ));
        }
        monitor.stage("candidate degrees", range.len() as u64);
        let candidates = range
            .iter()
            .map(|&p| {
                monitor.check()?;
                let c = self.score(p);
                monitor.advance(1);
                c
            })
            .collect::<Result<Vec<_>>>()?;
        let mut best: Option<&Candidate> = None;
        for c in &candidates {
            if c.objective.is_finite() && best.is_none_or(|b| c.objective <= b.objective) {
                best = Some(c);
            }
        }
        let best = best.cloned().ok_or_else(|| {
            Error::invalid(
                "length_scale",
                "the Maclaurin pair statistics overflow on every pair of the subsample; \
                 use a larger length_scale",
            )
        })?;
        Ok(Allocation { best, candidates })
    }
}
