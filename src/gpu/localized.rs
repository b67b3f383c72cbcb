//! The per-centroid statistics of the localized Maclaurin GP
//! (`docs/math/localized.rst`) on the GPU, batched over centroids: for each
//! centroid `c`, the features `Φ(x_i − c)` of its neighbourhood (the training
//! rows within the cutoff) and their Gram `Φ_cᵀ Φ_c`, `Φ_cᵀ [y | 1]` are
//! computed on the device, reduced in f64 on the host, and solved on the CPU in
//! f64 (`docs/math/gp.rst`, "Feature-space GP").
//!
//! The map's parameters and the training inputs and targets are uploaded
//! once per call. The centroids are then packed into batches: a batch's
//! neighbourhood index lists are concatenated (each row tagged with its
//! centroid's slot in the batch) and cut into row ranges ("jobs") of at most
//! [`SPAN`] rows, each within one centroid. One command buffer per batch
//! gathers and centers all its rows (`shaders/localized.wgsl`), computes
//! their features in one pass of the map's kernels, and sums every job's
//! `ΦᵀΦ` and `Φᵀ[y | 1]` in one dispatch each (`gram_jobs` in
//! `shaders/gram.wgsl`, the job in the third workgroup dimension); the
//! features never leave the device and the job partials come back in one
//! read-back per batch, to be added per centroid in f64. Batch `k + 1` is
//! packed (its neighbourhoods found on the CPU) and submitted while batch
//! `k` runs. A batch is as large as the adapter allows: its row buffers
//! within [`DeviceMap::rows_per_chunk`], its partials (`jobs x (D² + 2D)`
//! floats) within the chunk size and the largest binding, its jobs within
//! `max_compute_workgroups_per_dimension`. A neighbourhood larger than a
//! batch's rows continues in the next batch.

use std::collections::VecDeque;

use ndarray::{ArrayView1, ArrayView2};
use rayon::prelude::*;

use super::context::{self, Context, Pending, WORKGROUP};
use super::gram::{job_products, SPAN};
use super::maclaurin::DeviceMaclaurin;
use super::map::DeviceMap;
use crate::error::{Error, Result};
use crate::maclaurin::MaclaurinMap;
use crate::stats::FeatureStats;
use crate::threads::Parallelism;

/// The per-centroid models of the centroids `which` (rows of `centroids`),
/// each on the training rows `neighbours(k)` of `x` (the caller's cutoff):
/// the statistics `(ΦᵀΦ, Φᵀy, Φᵀ1, target sums, rows used)` are
/// accumulated on the GPU in batches of centroids (see the module docs) and
/// turned into the caller's model `G` by `fit` (the localized GP builds a
/// feature-space GP, `docs/math/gp.rst`, "Feature-space GP", and handles a
/// centroid without rows). `neighbours` is called once per centroid, in the
/// order of `which`; the models come back in that order.
///
/// Accuracy: every entry of the statistics is a sum of f64 additions of
/// job partials, each a blocked f32 sum over at most 4096 rows of the f32
/// features of [`super::maclaurin_features`] (the inputs' rounding to f32,
/// the product and 15 + 16 + 16 + 1 adds), so with `u = 2^-24` and
/// `γ_k = k u / (1 − k u)`, `|G̃_ij − G_ij| <= γ_64 Σ_r |φ_ri φ_rj|` for the
/// device features `φ`, the bound of [`super::gram`]. The solves are f64.
/// `fit` runs in parallel over the centroids completed by a batch when
/// `par` allows.
///
/// # Errors
/// As [`super::maclaurin_gram`], `neighbours` and `fit`; [`Error::Gpu`]
/// when one job's `D² + 2D` floats exceed the device's largest binding.
#[allow(clippy::too_many_arguments)]
pub fn localized_gps<G: Send>(
    map: &MaclaurinMap,
    x: ArrayView2<f64>,
    y: ArrayView1<f64>,
    centroids: ArrayView2<f64>,
    which: &[usize],
    neighbours: impl FnMut(usize) -> Result<Vec<u32>>,
    fit: impl Fn(&FeatureStats, usize) -> Result<G> + Sync,
    par: Parallelism,
) -> Result<Vec<G>> {
    let problem = Problem {
        map,
        x: x.view(),
        y: y.view(),
        centroids: centroids.view(),
    };
    batched(
        &problem,
        which,
        neighbours,
        fit,
        par,
        usize::MAX,
        usize::MAX,
    )
}

/// The inputs of [`localized_gps`].
struct Problem<'a> {
    map: &'a MaclaurinMap,
    x: ArrayView2<'a, f64>,
    y: ArrayView1<'a, f64>,
    centroids: ArrayView2<'a, f64>,
}

/// The most centroids, neighbourhood rows and jobs one batch holds.
#[derive(Debug, Clone, Copy)]
struct Limits {
    centroids: usize,
    rows: usize,
    jobs: usize,
}

/// [`localized_gps`] with at most `max_centroids` centroids and `max_rows`
/// neighbourhood rows per batch on top of the device's limits (the tests
/// force small batches through them).
fn batched<G: Send>(
    p: &Problem<'_>,
    which: &[usize],
    mut neighbours: impl FnMut(usize) -> Result<Vec<u32>>,
    fit: impl Fn(&FeatureStats, usize) -> Result<G> + Sync,
    par: Parallelism,
    max_centroids: usize,
    max_rows: usize,
) -> Result<Vec<G>> {
    let map = p.map;
    super::check_maclaurin(map)?;
    let (n, d) = p.x.dim();
    Error::check_n_features(d, p.centroids.ncols())?;
    if p.y.len() != n {
        return Err(Error::ShapeMismatch {
            name: "length of y (the number of rows of X)",
            expected: n,
            got: p.y.len(),
        });
    }
    if let Some(&k) = which.iter().find(|&&k| k >= p.centroids.nrows()) {
        return Err(Error::invalid(
            "which",
            format!(
                "centroid {k} does not exist ({} centroids)",
                p.centroids.nrows()
            ),
        ));
    }
    let ctx = context::get()?;
    let width = map.width();
    let cfg = map.config();
    let shift = Shift {
        origin: map.center().map_or_else(|| vec![0.0; d], <[f64]>::to_vec),
        inv_l: 1.0 / cfg.length_scale,
    };
    let xs: Vec<f32> = p.x.rows().into_iter().flat_map(|r| shift.row(r)).collect();
    let ys: Vec<f32> = p.y.iter().map(|&v| v as f32).collect();
    let _session = ctx.session()?;
    let (x_buf, y_buf) = (ctx.storage(n * d), ctx.storage(n));
    ctx.upload(&x_buf, &xs);
    ctx.upload(&y_buf, &ys);
    let dev = DeviceMaclaurin::new(ctx, map, vec![0.0; d])?;
    let per_job = width * width + 2 * width;
    if per_job > ctx.max_binding_floats() {
        return Err(Error::Gpu(format!(
            "the statistics of one centroid with D = {width} ({per_job} floats) exceed the \
             device's largest binding"
        )));
    }
    let cap = (ctx.chunk_bytes() / 4) as usize;
    let limits = Limits {
        centroids: max_centroids.max(1),
        rows: dev.rows_per_chunk(ctx)?.min(max_rows).max(1),
        jobs: (cap / per_job).clamp(1, ctx.max_workgroups()),
    };
    let run = Runner {
        ctx,
        dev: &dev,
        x: &x_buf,
        y: &y_buf,
        d,
        width,
        sigma: cfg.kernel_variance.sqrt() as f32,
        h: -cfg.kernel.ln_prefactor(1.0) as f32,
    };
    let mut packer = Packer {
        p,
        which,
        shift: &shift,
        limits,
        width,
        next: 0,
        current: None,
        open: VecDeque::new(),
        front: 0,
    };
    let mut out = Vec::with_capacity(which.len());
    let mut previous: Option<Flight> = None;
    loop {
        let batch = packer.pack(&mut neighbours)?;
        let flight = if batch.owners.is_empty() {
            None
        } else {
            Some(run.submit(&batch)?)
        };
        if let Some(f) = previous.take() {
            packer.collect(ctx, f)?;
        }
        let done = packer.completed();
        let solve = |(s, used): &(FeatureStats, usize)| fit(s, *used);
        let gps: Result<Vec<G>> = if par.is_parallel() {
            done.par_iter().map(solve).collect()
        } else {
            done.iter().map(solve).collect()
        };
        out.extend(gps?);
        match flight {
            Some(f) => previous = Some(f),
            None => break,
        }
    }
    if out.len() != which.len() {
        return Err(Error::Internal(format!(
            "the GPU batches built {} of {} centroid GPs",
            out.len(),
            which.len()
        )));
    }
    Ok(out)
}

/// `x̃ = (x − c)/l = xs − cen` with `xs = (x − origin)/l` and
/// `cen = (c − origin)/l`, each formed in f64 and rounded once.
struct Shift {
    origin: Vec<f64>,
    inv_l: f64,
}

impl Shift {
    fn row(&self, row: ArrayView1<f64>) -> Vec<f32> {
        row.iter()
            .zip(&self.origin)
            .map(|(v, o)| ((v - o) * self.inv_l) as f32)
            .collect()
    }
}

/// One batch for the device.
#[derive(Default)]
struct Batch {
    /// The shifted centroids, `d` floats per slot.
    cen: Vec<f32>,
    /// Per row: the training row and its centroid's slot.
    rows: Vec<u32>,
    /// Per job: its first and one-past-last row in `rows`.
    jobs: Vec<u32>,
    /// Per job: the position (in `which`) of its centroid.
    owners: Vec<usize>,
}

/// A centroid whose statistics are being accumulated.
struct Open {
    stats: FeatureStats,
    used: usize,
    /// Jobs submitted but not yet added.
    pending: usize,
    /// All its rows are in submitted batches.
    packed: bool,
}

/// Packs centroids into batches and collects their statistics.
struct Packer<'a, 'p> {
    p: &'a Problem<'p>,
    which: &'a [usize],
    shift: &'a Shift,
    limits: Limits,
    width: usize,
    /// The next position of `which` to fetch.
    next: usize,
    /// The centroid being packed: its position, rows and rows packed.
    current: Option<(usize, Vec<u32>, usize)>,
    /// The centroids from position `front` on whose GPs are not built yet.
    open: VecDeque<Open>,
    front: usize,
}

impl Packer<'_, '_> {
    /// The next batch: centroids in the order of `which` (from where the
    /// last batch stopped, possibly inside a neighbourhood) until a limit is
    /// reached; empty only when every centroid is packed.
    fn pack(&mut self, neighbours: &mut impl FnMut(usize) -> Result<Vec<u32>>) -> Result<Batch> {
        let lim = self.limits;
        let mut b = Batch::default();
        let mut slots = 0;
        loop {
            let full = |b: &Batch, slots: usize| {
                slots == lim.centroids || b.rows.len() / 2 == lim.rows || b.owners.len() == lim.jobs
            };
            if self.current.is_none() {
                if self.next == self.which.len() || full(&b, slots) {
                    break;
                }
                let pos = self.next;
                self.next += 1;
                let rows = neighbours(self.which[pos])?;
                let n = self.p.y.len();
                if let Some(&i) = rows.iter().find(|&&i| i as usize >= n) {
                    return Err(Error::Internal(format!(
                        "neighbour row {i} does not exist ({n} rows)"
                    )));
                }
                let yr = rows.iter().map(|&i| self.p.y[i as usize]);
                let mut stats = FeatureStats::new(self.width);
                stats.n = rows.len() as u64;
                stats.y_sum = yr.clone().sum();
                stats.y_sq_sum = yr.map(|v| v * v).sum();
                self.open.push_back(Open {
                    stats,
                    used: rows.len(),
                    pending: 0,
                    packed: rows.is_empty(),
                });
                if !rows.is_empty() {
                    self.current = Some((pos, rows, 0));
                }
                continue;
            }
            if full(&b, slots) {
                break;
            }
            let Some((pos, rows, done)) = self.current.as_mut() else {
                break;
            };
            let slot = slots as u32;
            slots += 1;
            let k = self.which[*pos];
            b.cen.extend(self.shift.row(self.p.centroids.row(k)));
            let open = &mut self.open[*pos - self.front];
            while *done < rows.len() && b.rows.len() / 2 < lim.rows && b.owners.len() < lim.jobs {
                let take = SPAN
                    .min(rows.len() - *done)
                    .min(lim.rows - b.rows.len() / 2);
                let begin = b.rows.len() / 2;
                for &i in &rows[*done..*done + take] {
                    b.rows.extend([i, slot]);
                }
                b.jobs.extend([begin as u32, (begin + take) as u32]);
                b.owners.push(*pos);
                open.pending += 1;
                *done += take;
            }
            if *done == rows.len() {
                open.packed = true;
                self.current = None;
            }
        }
        Ok(b)
    }

    /// Waits for `flight` and adds its job partials to their centroids.
    fn collect(&mut self, ctx: &Context, flight: Flight) -> Result<()> {
        let Flight {
            pending, owners, ..
        } = flight;
        let w = self.width;
        let jobs = owners.len();
        let (open, front) = (&mut self.open, self.front);
        ctx.finish(pending, |part| {
            let (grams, targets) = part.split_at(jobs * w * w);
            for (z, &pos) in owners.iter().enumerate() {
                let o = &mut open[pos - front];
                let g = &grams[z * w * w..(z + 1) * w * w];
                // Only the tiles on and above the diagonal were computed.
                for (i, (mut out, row)) in o
                    .stats
                    .gram
                    .rows_mut()
                    .into_iter()
                    .zip(g.chunks_exact(w))
                    .enumerate()
                {
                    for (acc, &v) in out.iter_mut().zip(row).skip(i) {
                        *acc += f64::from(v);
                    }
                }
                let t = &targets[z * 2 * w..(z + 1) * 2 * w];
                for i in 0..w {
                    o.stats.phi_y[i] += f64::from(t[2 * i]);
                    o.stats.phi_sum[i] += f64::from(t[2 * i + 1]);
                }
                o.pending -= 1;
            }
        })
    }

    /// The statistics and row counts of the centroids completed since the
    /// last call, in the order of `which`.
    fn completed(&mut self) -> Vec<(FeatureStats, usize)> {
        let mut done = Vec::new();
        while self
            .open
            .front()
            .is_some_and(|o| o.packed && o.pending == 0)
        {
            if let Some(mut o) = self.open.pop_front() {
                let g = &mut o.stats.gram;
                for i in 0..self.width {
                    for j in 0..i {
                        g[(i, j)] = g[(j, i)];
                    }
                }
                done.push((o.stats, o.used));
                self.front += 1;
            }
        }
        done
    }
}

/// A submitted batch: its read-back, the centroid of each job, and the
/// buffers the submission uses.
struct Flight {
    pending: Pending,
    owners: Vec<usize>,
    _buffers: Vec<wgpu::Buffer>,
}

/// The device side: the map, the training inputs and targets on the
/// device, and the constants of `shaders/localized.wgsl`.
struct Runner<'a> {
    ctx: &'a Context,
    dev: &'a DeviceMaclaurin<'a>,
    x: &'a wgpu::Buffer,
    y: &'a wgpu::Buffer,
    d: usize,
    width: usize,
    sigma: f32,
    h: f32,
}

impl Runner<'_> {
    /// Uploads `b`, records the gather, the features and the job products
    /// into one command buffer, and submits it with its read-back of
    /// `jobs x (D² + 2D)` floats: the `ΦᵀΦ` blocks, then the `Φᵀ[y | 1]`
    /// blocks (`D x 2` each).
    fn submit(&self, b: &Batch) -> Result<Flight> {
        let ctx = self.ctx;
        let (m, jobs, w) = (b.rows.len() / 2, b.owners.len(), self.width);
        let cen = ctx.storage(b.cen.len());
        ctx.upload(&cen, &b.cen);
        let rows = ctx.storage(b.rows.len());
        ctx.upload(&rows, bytemuck::cast_slice(&b.rows));
        let table = ctx.storage(b.jobs.len());
        ctx.upload(&table, bytemuck::cast_slice(&b.jobs));
        let staged = ctx.storage(m * self.dev.in_dim());
        let scratch = ctx.storage(m * self.dev.scratch_per_row());
        let feats = ctx.storage(m * w);
        let targets = ctx.storage(m * 2);
        let len = jobs * (w * w + 2 * w);
        let part = ctx.storage(len);
        let mut enc = ctx.encoder();
        let mut keep = Vec::new();
        let params = ctx.uniform(&[
            m as u32,
            self.d as u32,
            self.sigma.to_bits(),
            self.h.to_bits(),
        ]);
        let pipe = &ctx.pipelines.local_gather;
        let bind = ctx.bind(
            pipe,
            &[self.x, self.y, &cen, &rows, &staged, &targets, &params],
        );
        let groups = m.div_ceil(WORKGROUP as usize) as u64;
        ctx.dispatch(&mut enc, pipe, &bind, groups, 1)?;
        keep.push(params);
        self.dev
            .record(ctx, &mut enc, &mut keep, &staged, &scratch, m, &feats)?;
        let bufs = [&feats, &feats, &part, &table];
        job_products(ctx, &mut enc, &mut keep, bufs, w, w, jobs, 0, true)?;
        let bufs = [&feats, &targets, &part, &table];
        job_products(
            ctx,
            &mut enc,
            &mut keep,
            bufs,
            w,
            2,
            jobs,
            jobs * w * w,
            false,
        )?;
        let pending = ctx.submit_read(enc, &part, len)?;
        keep.extend([cen, rows, table, staged, scratch, feats, targets, part]);
        Ok(Flight {
            pending,
            owners: b.owners.clone(),
            _buffers: keep,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gp::FeatureGp;
    use crate::gpu::context::tests::random;
    use crate::gpu::maclaurin::tests::row_bound;
    use crate::maclaurin::map::MaclaurinConfig;
    use crate::maclaurin::MaclaurinKernel;
    use crate::sketch::SketchKind;
    use crate::Monitor;
    use ndarray::{Array1, Array2, Axis};
    use std::sync::Mutex;

    const NOISE: f64 = 0.05;

    /// The caller's `fit` (as the model's): the GP of the statistics, the
    /// prior for a centroid without rows.
    fn gp(stats: &FeatureStats, used: usize) -> Result<FeatureGp> {
        if used == 0 {
            return FeatureGp::prior(stats.n_features(), NOISE);
        }
        FeatureGp::fit(stats, NOISE, false, Parallelism::Sequential)
    }

    fn features(map: &MaclaurinMap, x: ArrayView2<f64>, c: &[f64]) -> Array2<f64> {
        let mut phi = Array2::zeros((x.nrows(), map.width()));
        map.transform_centered_into(x, c, phi.view_mut(), Parallelism::Sequential)
            .unwrap();
        phi
    }

    /// The device statistics `got` of centroid `c` on `rows` against the
    /// f64 CPU features `Φ` (rows of `X_c − c`), and the predictions of its
    /// GP at `pts` against the f64 GP's. With `t_r` the bound of the device
    /// features of row `r` (`row_bound`, as in the Maclaurin tests), `T` its
    /// `rows x D` spread and `Φ̃ = Φ + E`, `|E| <= T`, the statistics
    /// carry `|dG| <= Tᵀ|Φ| + |Φ|ᵀT + TᵀT + γ_64 (|Φ| + T)ᵀ(|Φ| + T)`
    /// entrywise (the features' error, then the bound of `gram`) and
    /// `|d(Φᵀv)| <= (T + γ_64 (|Φ| + T))ᵀ|v|` for `v = y, 1`. With
    /// `A = G/σ² + I` (`λ_min >= 1`), `e = ‖dG‖_F/σ² < 1` and
    /// `b = Φᵀy/σ²`: `‖dβ‖ <= (‖db‖ + e‖β‖)/(1 − e)`, so
    /// `|dμ*| <= ‖φ*‖ ‖dβ‖` and `|dv*| <= ‖φ*‖² e/(1 − e)`.
    #[allow(clippy::too_many_arguments)]
    fn check(
        map: &MaclaurinMap,
        x: &Array2<f64>,
        y: &Array1<f64>,
        c: &[f64],
        rows: &[u32],
        got: &(FeatureStats, usize),
        gp_got: &FeatureGp,
        pts: &Array2<f64>,
    ) {
        let (s, used) = got;
        let w = map.width();
        assert_eq!(*used, rows.len());
        if rows.is_empty() {
            assert_eq!(*s, FeatureStats::new(w));
            return;
        }
        let idx: Vec<usize> = rows.iter().map(|&i| i as usize).collect();
        let (xr, yr) = (x.select(Axis(0), &idx), y.select(Axis(0), &idx));
        assert_eq!(s.n, rows.len() as u64);
        assert_eq!(s.y_shift, 0.0);
        assert_eq!(s.y_sum, yr.iter().sum::<f64>());
        assert_eq!(s.y_sq_sum, yr.iter().map(|v| v * v).sum::<f64>());
        assert_eq!(s.gram, s.gram.t());
        let phi = features(map, xr.view(), c);
        let l = map.config().length_scale;
        let t = Array2::from_shape_fn(phi.dim(), |(r, _)| {
            let xt: Vec<f64> = xr.row(r).iter().zip(c).map(|(v, c)| (v - c) / l).collect();
            row_bound(map, &xt)
        });
        let u = f64::from(f32::EPSILON) / 2.0;
        let g64 = 64.0 * u / (1.0 - 64.0 * u);
        let a = phi.mapv(f64::abs);
        let big = &a + &t;
        let dg = t.t().dot(&a) + a.t().dot(&t) + t.t().dot(&t) + big.t().dot(&big) * g64;
        let spread = &t + &(&big * g64);
        let dy = spread.t().dot(&yr.mapv(f64::abs));
        let d1 = spread.t().dot(&Array1::<f64>::ones(rows.len()));
        let close = |got: f64, want: f64, bound: f64| {
            assert!(
                (got - want).abs() <= bound,
                "{got} vs {want} (bound {bound})"
            );
        };
        let exact = phi.t().dot(&phi);
        for ((g, e), b) in s.gram.iter().zip(&exact).zip(&dg) {
            close(*g, *e, *b);
        }
        let (ey, e1) = (phi.t().dot(&yr), phi.sum_axis(Axis(0)));
        for i in 0..w {
            close(s.phi_y[i], ey[i], dy[i]);
            close(s.phi_sum[i], e1[i], d1[i]);
        }
        let cpu = FeatureStats {
            gram: exact,
            phi_y: ey,
            phi_sum: e1,
            n: s.n,
            y_shift: 0.0,
            y_sum: s.y_sum,
            y_sq_sum: s.y_sq_sum,
        };
        let gp_cpu = gp(&cpu, rows.len()).unwrap();
        let e = dg.iter().map(|v| v * v).sum::<f64>().sqrt() / NOISE;
        assert!(e < 0.5, "the test problem must keep the bound finite");
        let db = dy.dot(&dy).sqrt() / NOISE;
        let dbeta = (db + e * gp_cpu.beta.dot(&gp_cpu.beta).sqrt()) / (1.0 - e);
        let ps = features(map, pts.view(), c);
        let (mu_c, v_c) = gp_cpu
            .predict(ps.view(), true, Parallelism::Sequential)
            .unwrap();
        let (mu_g, v_g) = gp_got
            .predict(ps.view(), true, Parallelism::Sequential)
            .unwrap();
        let (v_c, v_g) = (v_c.unwrap(), v_g.unwrap());
        for r in 0..pts.nrows() {
            let norm = ps.row(r).dot(&ps.row(r));
            close(mu_g[r], mu_c[r], norm.sqrt() * dbeta + 1e-12);
            close(v_g[r], v_c[r], norm * e / (1.0 - e) + 1e-12);
        }
    }

    /// Seven centroids (one with an empty neighbourhood, in the middle of
    /// `which`) through batches of 1, 2 and all centroids, and of 3
    /// centroids and 37 rows (neighbourhoods cut across batches and into
    /// several jobs): the statistics and predictions match the f64 CPU path
    /// to the derived f32 bound.
    #[test]
    fn batches_match_cpu() {
        context::tests::ctx();
        let x = random(400, 3, 2.0f64, 31);
        let y = Array1::from_iter(x.rows().into_iter().map(|r| r[0].sin() + 0.3 * r[1]));
        let mut cfg = MaclaurinConfig::new(MaclaurinKernel::Gaussian, 20);
        cfg.sketch = SketchKind::TensorSrht;
        cfg.length_scale = 1.5;
        cfg.kernel_variance = 1.3;
        let map = MaclaurinMap::fit(
            x.view(),
            &cfg,
            3,
            Parallelism::Sequential,
            &Monitor::default(),
        )
        .unwrap();
        let mut centroids = random(7, 3, 1.0, 32);
        centroids.row_mut(6).fill(40.0);
        let which = [4, 0, 6, 2, 5, 1, 3];
        let near = |k: usize| -> Vec<u32> {
            let c = centroids.row(k);
            (0..x.nrows())
                .filter(|&i| (&x.row(i) - &c).mapv(|v| v * v).sum() < 1.5)
                .map(|i| i as u32)
                .collect()
        };
        let sizes: Vec<usize> = which.iter().map(|&k| near(k).len()).collect();
        assert!(sizes[2] == 0 && sizes.iter().filter(|&&m| m > 37).count() >= 3);
        let problem = Problem {
            map: &map,
            x: x.view(),
            y: y.view(),
            centroids: centroids.view(),
        };
        let pts = random(4, 3, 0.5, 33);
        for (max_c, max_r) in [
            (1, usize::MAX),
            (2, usize::MAX),
            (usize::MAX, usize::MAX),
            (3, 37),
        ] {
            let seen = Mutex::new(Vec::new());
            let before = context::dispatch_count();
            let gps = batched(
                &problem,
                &which,
                |k| Ok(near(k)),
                |s, used| {
                    seen.lock().unwrap().push((s.clone(), used));
                    gp(s, used)
                },
                Parallelism::Sequential,
                max_c,
                max_r,
            )
            .unwrap();
            assert!(context::dispatch_count() > before, "the GPU ran");
            let seen = seen.into_inner().unwrap();
            assert_eq!((gps.len(), seen.len()), (which.len(), which.len()));
            for (p, &k) in which.iter().enumerate() {
                let c = centroids.row(k).to_vec();
                let pts = &pts + &centroids.row(k.min(5));
                check(&map, &x, &y, &c, &near(k), &seen[p], &gps[p], &pts);
            }
        }
        // In parallel: the same GPs (the statistics do not depend on it).
        let par = localized_gps(
            &map,
            x.view(),
            y.view(),
            centroids.view(),
            &which,
            |k| Ok(near(k)),
            gp,
            Parallelism::Rayon,
        )
        .unwrap();
        let seq = batched(
            &problem,
            &which,
            |k| Ok(near(k)),
            gp,
            Parallelism::Sequential,
            usize::MAX,
            usize::MAX,
        )
        .unwrap();
        for (a, b) in par.iter().zip(&seq) {
            assert_eq!(a.beta, b.beta);
        }
    }

    #[test]
    fn errors() {
        context::tests::ctx();
        let x = random(30, 2, 1.0, 41);
        let y = Array1::from_iter(x.column(0).iter().copied());
        let cfg = MaclaurinConfig::new(MaclaurinKernel::Gaussian, 8);
        let map = MaclaurinMap::fit(
            x.view(),
            &cfg,
            1,
            Parallelism::Sequential,
            &Monitor::default(),
        )
        .unwrap();
        let c = random(2, 2, 1.0, 42);
        let all = |_: usize| -> Result<Vec<u32>> { Ok((0..30).collect()) };
        let run = |y: ArrayView1<f64>, c: ArrayView2<f64>, which: &[usize]| {
            localized_gps(
                &map,
                x.view(),
                y,
                c,
                which,
                all,
                gp,
                Parallelism::Sequential,
            )
        };
        assert!(matches!(
            run(y.slice(ndarray::s![..29]), c.view(), &[0]),
            Err(Error::ShapeMismatch { .. })
        ));
        assert!(matches!(
            run(y.view(), random(2, 3, 1.0, 1).view(), &[0]),
            Err(Error::ShapeMismatch { .. })
        ));
        assert!(matches!(
            run(y.view(), c.view(), &[0, 2]),
            Err(Error::InvalidParameter { name: "which", .. })
        ));
        assert!(run(y.view(), c.view(), &[]).unwrap().is_empty());
        let failing = |k: usize| -> Result<Vec<u32>> {
            if k == 1 {
                Err(Error::invalid("neighbours", "test"))
            } else {
                Ok(vec![0, 1, 2])
            }
        };
        let r = localized_gps(
            &map,
            x.view(),
            y.view(),
            c.view(),
            &[0, 1],
            failing,
            gp,
            Parallelism::Sequential,
        );
        assert!(matches!(
            r,
            Err(Error::InvalidParameter {
                name: "neighbours",
                ..
            })
        ));
    }
}
