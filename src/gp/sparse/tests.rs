//! Oracles of the sparse GP: the three-point examples of
//! docs/math/sparse_gp.rst, the exact GP at `Z = X`, the dense definitions
//! of the VFE bound and the FITC likelihood, central differences of every
//! gradient, streaming and merging, and bad input.

use ndarray::{array, s, Array1, Array2, ArrayView1, ArrayView2, ShapeBuilder};
use rand::Rng as _;

use super::*;
use crate::error::Error;
use crate::gp::exact::log_marginal_likelihood;
use crate::kernels::{Kernel, StationaryKernel};
use crate::linalg::{as_faer, Cholesky};
use crate::progress::Monitor;
use crate::threads::Parallelism;

const KERNELS: [Kernel; 5] = [
    Kernel::Gaussian,
    Kernel::Laplacian,
    Kernel::Matern12,
    Kernel::Matern32,
    Kernel::Matern52,
];

const LN_2PI: f64 = 1.837_877_066_409_345_5;

fn params(kernel: Kernel, ls: &[f64], variance: f64) -> StationaryKernel {
    StationaryKernel {
        kernel,
        length_scale: ls.to_vec(),
        variance,
    }
}

fn prior(p: &StationaryKernel, noise: f64, z: ArrayView2<'_, f64>) -> InducingPrior {
    InducingPrior::new(p.clone(), noise, z, Parallelism::Rayon).unwrap()
}

/// The objective (and gradient) in one chunk, without centering.
fn eval(
    p: &StationaryKernel,
    noise: f64,
    z: ArrayView2<'_, f64>,
    method: Method,
    x: ArrayView2<'_, f64>,
    y: ArrayView1<'_, f64>,
    want_grad: bool,
) -> SparseEval {
    evaluate(
        &prior(p, noise, z),
        method,
        x,
        y,
        false,
        x.nrows().max(1),
        want_grad,
        Parallelism::Rayon,
        &Monitor::default(),
    )
    .unwrap()
}

/// The centered objective and its gradient in chunks of `chunk` rows.
fn centered_in_chunks(
    pr: &InducingPrior,
    method: Method,
    x: ArrayView2<'_, f64>,
    y: ArrayView1<'_, f64>,
    chunk: usize,
) -> crate::error::Result<SparseEval> {
    evaluate(
        pr,
        method,
        x,
        y,
        true,
        chunk,
        true,
        Parallelism::Rayon,
        &Monitor::default(),
    )
}

fn random(n: usize, d: usize, seed: u64) -> Array2<f64> {
    let mut rng = crate::rng::seeded(seed);
    Array2::from_shape_fn((n, d), |_| rng.random_range(-2.0..2.0))
}

fn targets(x: &Array2<f64>) -> Array1<f64> {
    x.rows()
        .into_iter()
        .enumerate()
        .map(|(i, r)| (1.3 * r[0]).sin() + 0.4 * r.sum() + 0.05 * ((i * 7 % 5) as f64 - 2.0))
        .collect()
}

/// `ln N(y | 0, C)` of a dense covariance.
fn log_normal(c: &Array2<f64>, y: ArrayView1<'_, f64>) -> f64 {
    let chol = Cholesky::new(as_faer(c.view()), Parallelism::Sequential).unwrap();
    assert_eq!(chol.jitter(), 0.0);
    let alpha = Array1::from(chol.solve_vec(y, Parallelism::Sequential));
    -0.5 * y.dot(&alpha) - 0.5 * chol.log_det() - 0.5 * y.len() as f64 * LN_2PI
}

/// The exact LML with any kernel, from its dense `N × N` covariance.
fn exact_lml(
    p: &StationaryKernel,
    noise: f64,
    x: ArrayView2<'_, f64>,
    y: ArrayView1<'_, f64>,
) -> f64 {
    let mut k = kernel_matrix(p, x, x, Parallelism::Sequential);
    k.diag_mut().mapv_inplace(|v| v + noise);
    log_normal(&k, y)
}

/// VFE's bound and FITC's likelihood from their dense definitions:
/// `Q = K_fu K_uu^{−1} K_uf`; VFE `ln N(y | 0, Q + σ_n² I) − tr(K − Q)/(2σ_n²)`,
/// FITC `ln N(y | 0, Q + diag(K − Q) + σ_n² I)`.
fn dense_objective(
    p: &StationaryKernel,
    noise: f64,
    z: ArrayView2<'_, f64>,
    method: Method,
    x: ArrayView2<'_, f64>,
    y: ArrayView1<'_, f64>,
) -> f64 {
    let kuu = kernel_matrix(p, z, z, Parallelism::Sequential);
    let kuf = kernel_matrix(p, z, x, Parallelism::Sequential);
    let kff = kernel_matrix(p, x, x, Parallelism::Sequential);
    let chol = Cholesky::new(as_faer(kuu.view()), Parallelism::Sequential).unwrap();
    let mut a = kuf.clone();
    chol.solve_lower_in_place(
        crate::linalg::as_faer_mut(a.view_mut()),
        Parallelism::Sequential,
    );
    let q = a.t().dot(&a);
    let n = x.nrows();
    let mut c = q.clone();
    match method {
        Method::Vfe => {
            c.diag_mut().mapv_inplace(|v| v + noise);
            let tr: f64 = (0..n).map(|i| kff[(i, i)] - q[(i, i)]).sum();
            log_normal(&c, y) - tr / (2.0 * noise)
        }
        Method::Fitc => {
            for i in 0..n {
                c[(i, i)] = kff[(i, i)] + noise;
            }
            log_normal(&c, y)
        }
    }
}

#[test]
fn three_point_oracles() {
    let x = array![[0.0], [1.0], [2.0]];
    let y = array![0.0, 1.0, 0.0];
    let p = params(Kernel::Gaussian, &[1.0], 1.0);
    let xs = array![[0.5]];
    let cases = [
        (
            x.clone(),
            Method::Vfe,
            -3.493578023553,
            0.574547829524,
            0.082395236285,
        ),
        (
            x.clone(),
            Method::Fitc,
            -3.493578023553,
            0.574547829524,
            0.082395236285,
        ),
        (
            array![[0.5], [1.5]],
            Method::Vfe,
            -6.098456589778,
            0.446472775905,
            0.062721765370,
        ),
        (
            array![[0.5], [1.5]],
            Method::Fitc,
            -3.780155730380,
            0.561604931986,
            0.114086354724,
        ),
    ];
    for (z, method, value, mu, var) in cases {
        let e = eval(&p, 0.1, z.view(), method, x.view(), y.view(), false);
        assert!(
            (e.bound.value - value).abs() < 1e-10,
            "{method:?} {z}: {}",
            e.bound.value
        );
        let pr = prior(&p, 0.1, z.view());
        assert_eq!(pr.jitter(), 0.0);
        let gp = SparseGp::from_bound(method, pr, e.bound, 0);
        let (m, v) = gp.predict(xs.view(), true, Parallelism::Rayon).unwrap();
        assert!((m[0] - mu).abs() < 1e-10, "{method:?} {z}: mean {}", m[0]);
        let v = v.unwrap()[0];
        assert!((v - var).abs() < 1e-10, "{method:?} {z}: variance {v}");
    }
}

#[test]
fn inducing_at_the_data_is_the_exact_gp() {
    // Z = X: Q_ff = K_ff, so VFE's bound (trace term 0) and FITC's
    // likelihood (Λ = σ_n²) are the exact LML, with its gradient in the
    // hyperparameters, and the predictions are the exact GP's.
    let x = random(25, 2, 1);
    let y = targets(&x);
    let xs = random(6, 2, 2);
    for ls in [vec![0.9], vec![0.7, 1.3]] {
        let p = params(Kernel::Gaussian, &ls, 1.4);
        let gk = p.clone();
        let exact =
            log_marginal_likelihood(x.view(), y.view(), &gk, 0.05, true, Parallelism::Rayon)
                .unwrap();
        let ex_gp =
            crate::gp::ExactGp::fit(x.view(), y.view(), gk, 0.05, false, Parallelism::Rayon)
                .unwrap();
        let (em, ev) = ex_gp.predict(xs.view(), true, Parallelism::Rayon).unwrap();
        let ev = ev.unwrap();
        for method in [Method::Vfe, Method::Fitc] {
            let e = eval(&p, 0.05, x.view(), method, x.view(), y.view(), true);
            let tol = |v: f64| 1e-8 * (1.0 + v.abs());
            assert!(
                (e.bound.value - exact.lml).abs() < tol(exact.lml),
                "{method:?}: {} vs {}",
                e.bound.value,
                exact.lml
            );
            let g = e.gradient.as_ref().unwrap();
            for (a, b) in g.hyper.iter().zip(&exact.grad) {
                assert!((a - b).abs() < tol(*b), "{method:?} gradient: {a} vs {b}");
            }
            let gp = SparseGp::from_bound(method, prior(&p, 0.05, x.view()), e.bound, 0);
            let (m, v) = gp.predict(xs.view(), true, Parallelism::Rayon).unwrap();
            let v = v.unwrap();
            for j in 0..xs.nrows() {
                assert!((m[j] - em[j]).abs() < tol(em[j]), "{method:?} mean");
                assert!((v[j] - ev[j]).abs() < tol(ev[j]), "{method:?} variance");
            }
        }
    }
    // Every kernel: against the dense exact LML.
    for kernel in KERNELS {
        let p = params(kernel, &[1.1], 0.8);
        let want = exact_lml(&p, 0.05, x.view(), y.view());
        for method in [Method::Vfe, Method::Fitc] {
            let got = eval(&p, 0.05, x.view(), method, x.view(), y.view(), false)
                .bound
                .value;
            assert!(
                (got - want).abs() < 1e-8 * (1.0 + want.abs()),
                "{kernel:?} {method:?}: {got} vs {want}"
            );
        }
    }
}

#[test]
fn streamed_objective_is_the_dense_definition() {
    let x = random(40, 3, 3);
    let y = targets(&x);
    for (k, kernel) in KERNELS.into_iter().enumerate() {
        let z = random(6, 3, 10 + k as u64);
        let p = params(kernel, &[1.2, 0.8, 1.5], 1.3);
        for method in [Method::Vfe, Method::Fitc] {
            let got = eval(&p, 0.07, z.view(), method, x.view(), y.view(), false)
                .bound
                .value;
            let want = dense_objective(&p, 0.07, z.view(), method, x.view(), y.view());
            assert!(
                (got - want).abs() < 1e-9 * (1.0 + want.abs()),
                "{kernel:?} {method:?}: {got} vs {want}"
            );
        }
    }
}

#[test]
fn vfe_bound_is_below_the_exact_lml_for_random_inducing_inputs() {
    // Titsias' bound F ≤ LML, whatever Z: 100 draws of Z (sizes 1 to 20,
    // inside and outside the data's range) per kernel.
    let x = random(30, 2, 4);
    let y = targets(&x);
    let mut rng = crate::rng::seeded(5);
    for kernel in KERNELS {
        let p = params(kernel, &[0.8, 1.4], 1.1);
        let exact = exact_lml(&p, 0.1, x.view(), y.view());
        for _ in 0..100 {
            let m = rng.random_range(1..=20);
            let spread = rng.random_range(0.5..4.0);
            let z = Array2::from_shape_fn((m, 2), |_| rng.random_range(-spread..spread));
            let f = eval(&p, 0.1, z.view(), Method::Vfe, x.view(), y.view(), false)
                .bound
                .value;
            assert!(
                f <= exact + 1e-10 * exact.abs(),
                "{kernel:?} M = {m}: {f} > {exact}"
            );
        }
    }
}

/// `(value, [∂/∂ln l.., ∂/∂ln σ², ∂/∂ln σ_n²], ∂/∂Z)` at log parameters
/// `theta` and inducing inputs `z`.
fn value_at(
    kernel: Kernel,
    theta: &[f64],
    z: &Array2<f64>,
    method: Method,
    x: &Array2<f64>,
    y: &Array1<f64>,
) -> f64 {
    let k = theta.len() - 2;
    let ls: Vec<f64> = theta[..k].iter().map(|t| t.exp()).collect();
    let p = params(kernel, &ls, theta[k].exp());
    eval(
        &p,
        theta[k + 1].exp(),
        z.view(),
        method,
        x.view(),
        y.view(),
        false,
    )
    .bound
    .value
}

#[test]
fn gradients_match_central_differences() {
    // Every kernel, both methods, one and per-dimension length scales, and
    // the inducing inputs. Central differences err by O(h²)·F''' plus the
    // rounding of F (≈1e−14·|F|) over h: about 1e−9 here.
    let x = random(30, 3, 6);
    let y = targets(&x);
    let h = 1e-5;
    for (k, kernel) in KERNELS.into_iter().enumerate() {
        let z = random(5, 3, 20 + k as u64);
        for method in [Method::Vfe, Method::Fitc] {
            for theta in [
                vec![0.9_f64.ln(), 1.2_f64.ln(), 0.08_f64.ln()],
                vec![
                    0.7_f64.ln(),
                    1.3_f64.ln(),
                    1.1_f64.ln(),
                    0.9_f64.ln(),
                    0.05_f64.ln(),
                ],
            ] {
                let n_ls = theta.len() - 2;
                let ls: Vec<f64> = theta[..n_ls].iter().map(|t| t.exp()).collect();
                let p = params(kernel, &ls, theta[n_ls].exp());
                let e = eval(
                    &p,
                    theta[n_ls + 1].exp(),
                    z.view(),
                    method,
                    x.view(),
                    y.view(),
                    true,
                );
                let g = e.gradient.unwrap();
                assert_eq!(g.hyper.len(), theta.len());
                for j in 0..theta.len() {
                    let (mut tp, mut tm) = (theta.clone(), theta.clone());
                    tp[j] += h;
                    tm[j] -= h;
                    let fd = (value_at(kernel, &tp, &z, method, &x, &y)
                        - value_at(kernel, &tm, &z, method, &x, &y))
                        / (2.0 * h);
                    assert!(
                        (fd - g.hyper[j]).abs() < 1e-6 * (1.0 + fd.abs()),
                        "{kernel:?} {method:?} θ_{j}: fd {fd} vs {}",
                        g.hyper[j]
                    );
                }
                for (mi, a) in [(0, 0), (2, 1), (4, 2), (1, 2)] {
                    let (mut zp, mut zm) = (z.clone(), z.clone());
                    zp[(mi, a)] += h;
                    zm[(mi, a)] -= h;
                    let fd = (value_at(kernel, &theta, &zp, method, &x, &y)
                        - value_at(kernel, &theta, &zm, method, &x, &y))
                        / (2.0 * h);
                    let an = g.inducing[(mi, a)];
                    assert!(
                        (fd - an).abs() < 1e-6 * (1.0 + fd.abs()),
                        "{kernel:?} {method:?} z[{mi}, {a}]: fd {fd} vs {an}"
                    );
                }
            }
        }
    }
}

#[test]
fn chunks_of_any_size_give_the_one_chunk_objective() {
    let x = random(53, 2, 7);
    let y = targets(&x);
    let z = random(8, 2, 8);
    for method in [Method::Vfe, Method::Fitc] {
        let p = params(Kernel::Matern32, &[0.9, 1.2], 1.0);
        let pr = prior(&p, 0.1, z.view());
        let run =
            |chunk: usize| centered_in_chunks(&pr, method, x.view(), y.view(), chunk).unwrap();
        let one = run(53);
        for chunk in [1, 2, 7, 20, 52, 1000] {
            let e = run(chunk);
            assert!(
                (e.bound.value - one.bound.value).abs() < 1e-10 * one.bound.value.abs(),
                "{method:?} chunk {chunk}"
            );
            let (g, g1) = (e.gradient.unwrap(), one.gradient.as_ref().unwrap().clone());
            for (a, b) in g.hyper.iter().zip(&g1.hyper) {
                assert!(
                    (a - b).abs() < 1e-10 * (1.0 + b.abs()),
                    "{method:?} chunk {chunk}"
                );
            }
            for (a, b) in g.inducing.iter().zip(&g1.inducing) {
                assert!(
                    (a - b).abs() < 1e-10 * (1.0 + b.abs()),
                    "{method:?} chunk {chunk}"
                );
            }
        }
        // Statistics of separate parts, merged, equal one pass (the parts
        // in any order; the bound from them too).
        let parts = [0..10, 10..11, 11..40, 40..53];
        let mut merged = SparseStats::new(method, 8);
        let mut scratch = Vec::new();
        for r in parts.iter().rev() {
            let mut part = SparseStats::new(method, 8);
            part.accumulate(
                &pr,
                x.slice(s![r.clone(), ..]),
                y.slice(s![r.clone()]),
                &mut scratch,
                Parallelism::Rayon,
            )
            .unwrap();
            merged.merge(&part).unwrap();
        }
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-12 * (1.0 + a.abs().max(b.abs()));
        let st = &one.stats;
        assert_eq!(merged.n, st.n);
        assert!(close(merged.y_mean(), st.y_mean()));
        let (mb, my) = merged.centered(true);
        let (sb, sy) = st.centered(true);
        assert!(close(my, sy));
        assert!(mb.iter().zip(&sb).all(|(a, b)| close(*a, *b)));
        let (mg, sg) = (merged.gram_symmetric(), st.gram_symmetric());
        assert!(mg.iter().zip(&sg).all(|(a, b)| close(*a, *b)));
        assert!(close(merged.w_sum, st.w_sum) && close(merged.log_lambda_sum, st.log_lambda_sum));
        let bm = bound(&merged, &pr, true, false, Parallelism::Rayon).unwrap();
        assert!(close(bm.value, one.bound.value));
        // Gradient sums of the parts merge into the one-pass gradient.
        let adj = bound(st, &pr, true, true, Parallelism::Rayon)
            .unwrap()
            .adjoint
            .unwrap();
        let mut sums = GradientSums::new(method, 8, 2);
        for r in parts {
            let mut part = GradientSums::new(method, 8, 2);
            accumulate_gradient(
                &mut part,
                &adj,
                &pr,
                x.slice(s![r.clone(), ..]),
                y.slice(s![r.clone()]),
                st.y_mean(),
                &mut scratch,
                Parallelism::Rayon,
            )
            .unwrap();
            sums.merge(&part).unwrap();
        }
        // Sums of another shape are refused by name, and change nothing.
        let before = sums.clone();
        let other_width = GradientSums::new(method, 8, 3);
        let err = sums.merge(&other_width).unwrap_err().to_string();
        assert!(err.contains("input dimension"), "{err}");
        let mut edited = GradientSums::new(method, 8, 2);
        edited.by_length_scale.pop();
        let err = sums.merge(&edited).unwrap_err().to_string();
        assert!(err.contains("number of length scales"), "{err}");
        let other_method = match method {
            Method::Vfe => Method::Fitc,
            Method::Fitc => Method::Vfe,
        };
        let err = sums
            .merge(&GradientSums::new(other_method, 8, 2))
            .unwrap_err();
        assert!(err.to_string().contains("FITC row sums"), "{err}");
        assert_eq!(sums, before);
        let g = finish(&adj, &pr, &sums, Parallelism::Rayon);
        let g1 = one.gradient.unwrap();
        for (a, b) in g.hyper.iter().zip(&g1.hyper) {
            assert!((a - b).abs() < 1e-10 * (1.0 + b.abs()));
        }
    }
}

#[test]
fn results_do_not_depend_on_the_thread_count() {
    let x = random(300, 3, 9);
    let y = targets(&x);
    let z = random(40, 3, 10);
    let p = params(Kernel::Gaussian, &[0.8, 1.1, 1.3], 1.0);
    for method in [Method::Vfe, Method::Fitc] {
        let run = |par: Parallelism| {
            let pr = InducingPrior::new(p.clone(), 0.1, z.view(), par).unwrap();
            evaluate(
                &pr,
                method,
                x.view(),
                y.view(),
                true,
                64,
                true,
                par,
                &Monitor::default(),
            )
            .unwrap()
        };
        let a = run(Parallelism::Sequential);
        let b = crate::threads::install(|| run(Parallelism::Rayon)).unwrap();
        assert_eq!(a.bound.value, b.bound.value);
        assert_eq!(a.gradient, b.gradient);
    }
}

#[test]
fn inputs_far_from_the_origin_keep_their_digits() {
    // The same data and inducing inputs shifted by 2^30: every block is
    // centered on the inducing inputs before being scaled, so the bound,
    // its gradient (inducing inputs included) and the greedy selection
    // have the same bits (see kernels::tests::shifted_grid).
    let (x, x_far) = crate::kernels::tests::shifted_grid(200, 3, 7);
    let y = targets(&x);
    for kernel in KERNELS {
        let p = params(kernel, &[0.8, 1.1, 1.3], 1.2);
        let pick = |x: &Array2<f64>| {
            select_inducing(
                x.view(),
                25,
                &InducingInit::GreedyVariance,
                &p,
                0,
                Parallelism::Rayon,
                &Monitor::default(),
            )
            .unwrap()
        };
        let (z, z_far) = (pick(&x), pick(&x_far));
        assert_eq!(&z + 2f64.powi(30), z_far);
        for method in [Method::Vfe, Method::Fitc] {
            let run = |x: &Array2<f64>, z: &Array2<f64>| {
                let pr = prior(&p, 0.05, z.view());
                centered_in_chunks(&pr, method, x.view(), y.view(), 64).unwrap()
            };
            let (near, far) = (run(&x, &z), run(&x_far, &z_far));
            assert_eq!(near.bound.value, far.bound.value);
            assert_eq!(near.gradient, far.gradient);
        }
    }
}

#[test]
fn greedy_selection_picks_the_largest_conditional_variance() {
    // Each chosen row has the largest conditional variance given the rows
    // chosen before it, computed directly from K_uu^{−1}.
    let x = random(120, 2, 11);
    let p = params(Kernel::Matern52, &[0.6], 1.0);
    let z = select_inducing(
        x.view(),
        15,
        &InducingInit::GreedyVariance,
        &p,
        3,
        Parallelism::Rayon,
        &Monitor::default(),
    )
    .unwrap();
    assert_eq!(z.dim(), (15, 2));
    for j in 1..15 {
        let zc = z.slice(s![..j, ..]);
        let kuu = kernel_matrix(&p, zc, zc, Parallelism::Sequential);
        let chol = Cholesky::new(as_faer(kuu.view()), Parallelism::Sequential).unwrap();
        let cond = |row: ArrayView1<'_, f64>| {
            let r = row.to_owned().insert_axis(ndarray::Axis(0));
            let k = kernel_matrix(&p, zc, r.view(), Parallelism::Sequential);
            let a = chol.solve_vec(k.column(0), Parallelism::Sequential);
            1.0 - k.column(0).iter().zip(&a).map(|(u, v)| u * v).sum::<f64>()
        };
        let best = x.rows().into_iter().map(cond).fold(f64::MIN, f64::max);
        let got = cond(z.row(j));
        assert!(got >= best - 1e-9, "pick {j}: {got} < {best}");
    }
    // Deterministic under the seed; another seed starts elsewhere.
    let again = select_inducing(
        x.view(),
        15,
        &InducingInit::GreedyVariance,
        &p,
        3,
        Parallelism::Sequential,
        &Monitor::default(),
    )
    .unwrap();
    assert_eq!(z, again);
    // Duplicated rows: the selection stops at the distinct ones.
    let dup = ndarray::concatenate![ndarray::Axis(0), x.slice(s![..5, ..]), x.slice(s![..5, ..])];
    let zd = select_inducing(
        dup.view(),
        8,
        &InducingInit::GreedyVariance,
        &p,
        0,
        Parallelism::Rayon,
        &Monitor::default(),
    )
    .unwrap();
    assert_eq!(zd.nrows(), 5);
}

#[test]
fn kmeans_and_random_selections() {
    // Three tight clusters: k-means finds their means.
    let centers = array![[-3.0, 0.0], [0.0, 3.0], [3.0, -1.0]];
    let mut rng = crate::rng::seeded(12);
    let x = Array2::from_shape_fn((300, 2), |(i, j)| {
        centers[(i % 3, j)] + rng.random_range(-0.1..0.1)
    });
    let p = params(Kernel::Gaussian, &[1.0], 1.0);
    let sel = |x: ArrayView2<'_, f64>, m: usize, init: &InducingInit| {
        select_inducing(x, m, init, &p, 1, Parallelism::Rayon, &Monitor::default())
    };
    let z = sel(x.view(), 3, &InducingInit::KMeans).unwrap();
    for c in centers.rows() {
        let want: Array1<f64> = x
            .rows()
            .into_iter()
            .enumerate()
            .filter(|(i, _)| centers.row(i % 3) == c)
            .map(|(_, r)| r.to_owned())
            .fold(Array1::zeros(2), |a, r| a + r)
            / 100.0;
        assert!(
            z.rows()
                .into_iter()
                .any(|r| (&r - &want).iter().all(|d| d.abs() < 1e-12)),
            "{want} not among {z}"
        );
    }
    // Rows whose squared distances overflow float64: clustered scaled by a
    // power of two, so the centers are the unscaled ones times 2^500,
    // bit for bit.
    let big = 2f64.powi(500);
    let zb = sel((&x * big).view(), 3, &InducingInit::KMeans).unwrap();
    assert_eq!(zb, &z * big);
    // One such outlier among ordinary rows: finite centers, one of them
    // the outlier.
    let mut xo = x.clone();
    xo.row_mut(7).fill(1e160);
    let zo = sel(xo.view(), 3, &InducingInit::KMeans).unwrap();
    assert!(zo.iter().all(|v| v.is_finite()));
    assert!(zo.rows().into_iter().any(|r| r.iter().all(|&v| v == 1e160)));
    // Rows that are not finite are refused by every selection (k-means
    // panicked on them; the others chose from them).
    for bad in [f64::NAN, f64::INFINITY] {
        let mut xb = x.clone();
        xb[(5, 1)] = bad;
        for init in [
            InducingInit::KMeans,
            InducingInit::Random,
            InducingInit::GreedyVariance,
        ] {
            let e = sel(xb.view(), 3, &init).unwrap_err();
            assert_eq!(e, Error::NonFinite { name: "X" });
        }
    }
    let r = sel(x.view(), 10, &InducingInit::Random).unwrap();
    assert_eq!(r.nrows(), 10);
    for row in r.rows() {
        assert!(x.rows().into_iter().any(|xr| xr == row));
    }
}

#[test]
fn bad_input_is_a_clear_error() {
    let x = random(10, 2, 13);
    let p = params(Kernel::Gaussian, &[1.0], 1.0);
    let sel = |m: usize, init: &InducingInit| {
        select_inducing(
            x.view(),
            m,
            init,
            &p,
            0,
            Parallelism::Rayon,
            &Monitor::default(),
        )
    };
    // M > N is clamped to N; M = 0 is refused.
    assert_eq!(sel(50, &InducingInit::Random).unwrap().nrows(), 10);
    assert_eq!(sel(50, &InducingInit::KMeans).unwrap().nrows(), 10);
    assert_eq!(sel(50, &InducingInit::GreedyVariance).unwrap().nrows(), 10);
    assert!(sel(0, &InducingInit::Random)
        .unwrap_err()
        .to_string()
        .contains("n_inducing"));
    // A given Z of the wrong width, with NaN, or with no rows.
    let err = sel(3, &InducingInit::Given(Array2::zeros((3, 3)))).unwrap_err();
    assert!(
        matches!(
            err,
            Error::ShapeMismatch {
                expected: 2,
                got: 3,
                ..
            }
        ),
        "{err}"
    );
    let mut zn = Array2::<f64>::zeros((3, 2));
    zn[(1, 1)] = f64::NAN;
    assert_eq!(
        sel(3, &InducingInit::Given(zn)).unwrap_err(),
        Error::NonFinite { name: "inducing" }
    );
    assert!(sel(3, &InducingInit::Given(Array2::zeros((0, 2)))).is_err());
    // Unknown names.
    for (e, name) in [
        (Kernel::from_name("rbf").unwrap_err(), "kernel"),
        (Method::from_name("sor").unwrap_err(), "method"),
        (InducingInit::from_name("grid").unwrap_err(), "inducing"),
    ] {
        assert!(e.to_string().contains(name), "{e}");
    }
    // NaN in X or y of an evaluation.
    let z = x.slice(s![..3, ..]).to_owned();
    let pr = prior(&p, 0.1, z.view());
    let y = targets(&x);
    let mut xn = x.clone();
    xn[(4, 0)] = f64::NAN;
    let mut yn = y.clone();
    yn[2] = f64::INFINITY;
    let ev = |x: &Array2<f64>, y: &Array1<f64>| {
        centered_in_chunks(&pr, Method::Vfe, x.view(), y.view(), 4)
    };
    assert_eq!(ev(&xn, &y).unwrap_err(), Error::NonFinite { name: "X" });
    assert_eq!(ev(&x, &yn).unwrap_err(), Error::NonFinite { name: "y" });
}

#[test]
fn a_chunk_too_large_for_memory_is_refused_before_anything_changes() {
    // 2^40 copies of one row (a view of stride 0, no memory): the chunk's
    // kernel columns would take M · 2^40 · 8 bytes.
    let x = random(10, 2, 13);
    let pr = prior(
        &params(Kernel::Gaussian, &[1.0], 1.0),
        0.1,
        x.slice(s![..3, ..]),
    );
    let (row, target) = ([0.5, -0.5], [0.25]);
    let rows = 1usize << 40;
    let huge = ArrayView2::from_shape((rows, 2).strides((0, 1)), &row).unwrap();
    let ys = ArrayView1::from_shape((rows,).strides((0,)), &target).unwrap();
    let mut stats = SparseStats::new(Method::Vfe, 3);
    stats
        .add_checked(
            &pr,
            x.view(),
            targets(&x).view(),
            &mut Vec::new(),
            Parallelism::Rayon,
        )
        .unwrap();
    let before = stats.clone();
    let mut scratch = Vec::new();
    let e = stats
        .add_checked(&pr, huge, ys, &mut scratch, Parallelism::Rayon)
        .unwrap_err();
    assert!(
        e.to_string().contains("`chunk_size`") && e.to_string().contains("lower chunk_size"),
        "{e}"
    );
    assert_eq!(stats, before);
    assert!(scratch.is_empty());
}

#[test]
fn a_chunk_or_merge_whose_sums_would_overflow_changes_nothing() {
    let x = random(12, 2, 21);
    let y = targets(&x);
    let par = Parallelism::Rayon;
    for method in [Method::Vfe, Method::Fitc] {
        let pr = prior(
            &params(Kernel::Gaussian, &[0.7], 1.5),
            0.1,
            x.slice(s![..4, ..]),
        );
        let mut stats = SparseStats::new(method, 4);
        let mut scratch = Vec::new();
        stats
            .accumulate(
                &pr,
                x.slice(s![..6, ..]),
                y.slice(s![..6]),
                &mut scratch,
                par,
            )
            .unwrap();
        let before = stats.clone();
        // Targets whose squares overflow: refused, nothing changed.
        let huge = Array1::from_elem(3, 1e200);
        let e = stats
            .accumulate(&pr, x.slice(s![6..9, ..]), huge.view(), &mut scratch, par)
            .unwrap_err();
        assert!(e.to_string().contains("`y`"), "{e}");
        assert_eq!(stats, before);
        // Later chunks add as if the refused one had not been offered.
        let add_rest = |s: &mut SparseStats, scratch: &mut Vec<f64>| {
            s.accumulate(&pr, x.slice(s![6.., ..]), y.slice(s![6..]), scratch, par)
                .unwrap()
        };
        add_rest(&mut stats, &mut scratch);
        let mut want = before.clone();
        add_rest(&mut want, &mut scratch);
        assert_eq!(stats, want);
        // Statistics whose merged target sums overflow: refused, nothing
        // changed.
        let mut big = SparseStats::new(method, 4);
        let big_y = Array1::from_shape_fn(6, |i| if i % 2 == 0 { 1e152 } else { -1e152 });
        big.accumulate(&pr, x.slice(s![..6, ..]), big_y.view(), &mut scratch, par)
            .unwrap();
        let mut acc = big.clone();
        let mut merges = 0;
        let e = loop {
            let before = acc.clone();
            match acc.merge(&big) {
                Ok(()) => merges += 1,
                Err(e) => {
                    assert_eq!(acc, before);
                    break e;
                }
            }
        };
        assert!(merges >= 1 && e.to_string().contains("`y`"), "{merges} {e}");
    }
}

#[test]
fn coinciding_inducing_inputs_get_a_recorded_jitter() {
    let x = random(20, 1, 14);
    let y = targets(&x);
    // Three copies of one input: K_uu is singular.
    let z = array![[0.0], [0.0], [0.0], [1.0]];
    let p = params(Kernel::Gaussian, &[1.0], 2.0);
    let pr = prior(&p, 0.1, z.view());
    assert!(
        pr.jitter() > 0.0 && pr.jitter() <= 1e-4 * 2.0,
        "{}",
        pr.jitter()
    );
    let e = evaluate(
        &pr,
        Method::Vfe,
        x.view(),
        y.view(),
        true,
        7,
        false,
        Parallelism::Rayon,
        &Monitor::default(),
    )
    .unwrap();
    assert!(e.bound.value.is_finite());
    let gp = SparseGp::from_bound(Method::Vfe, pr.clone(), e.bound, 0);
    assert_eq!(gp.jitter(), pr.jitter());
    // A model whose fields disagree (edited, or loaded from a tampered
    // file) is refused by predict, not a panic or a silent garbage result.
    let xs = x.slice(s![..3, ..]);
    assert!(gp.predict(xs, true, Parallelism::Rayon).is_ok());
    type Edit = fn(&mut SparseGp);
    let edits: [(&str, Edit); 4] = [
        ("weights", |g| g.weights = Array1::zeros(1)),
        ("length scales", |g| g.params.length_scale = vec![]),
        ("zero length scale", |g| g.params.length_scale = vec![0.0]),
        ("y_mean", |g| g.y_mean = f64::NAN),
    ];
    for (what, edit) in edits {
        let mut bad = gp.clone();
        edit(&mut bad);
        assert!(bad.predict(xs, true, Parallelism::Rayon).is_err(), "{what}");
    }
}

/// The data fit `yᵀ(Q_ff + Λ)^{−1} y = yᵀΛ^{−1}y − cᵀc` cannot be negative;
/// statistics whose `k_y` has lost its accuracy (here: scaled by 10, so
/// `cᵀc` grows 100-fold past `yᵀΛ^{−1}y`) are refused as singular inducing
/// inputs, for VFE and FITC, instead of giving a bound that rewards them.
#[test]
fn a_negative_data_fit_is_refused() {
    let x = random(40, 2, 11);
    let y = targets(&x);
    let p = params(Kernel::Gaussian, &[0.9, 0.9], 1.2);
    let pr = prior(&p, 0.05, x.slice(s![..8, ..]));
    for method in [Method::Vfe, Method::Fitc] {
        let mut stats = SparseStats::new(method, 8);
        stats
            .accumulate(&pr, x.view(), y.view(), &mut Vec::new(), Parallelism::Rayon)
            .unwrap();
        assert!(bound(&stats, &pr, true, false, Parallelism::Rayon).is_ok());
        stats.k_y.mapv_inplace(|v| 10.0 * v);
        let err = bound(&stats, &pr, true, false, Parallelism::Rayon).unwrap_err();
        assert!(
            matches!(err, Error::InducingNotPositiveDefinite { m: 8, .. }),
            "{method:?}: {err}"
        );
    }
}

/// Statistics of the whitened columns `L^{−1} k_i` and of the kernel
/// columns give the same bound and gradient where `K_uu` is well
/// conditioned (both are accurate there: the same sums in another basis),
/// in one chunk and in many; the two kinds do not merge.
#[test]
fn whitened_statistics_give_the_kernel_space_bound_and_gradient() {
    let x = random(60, 2, 21);
    let y = targets(&x);
    let p = params(Kernel::Matern52, &[0.7, 1.1], 1.3);
    let plain = prior(&p, 0.05, x.slice(s![..10, ..]));
    assert!(!plain.whiten());
    let mut white = plain.clone();
    white.whiten = true;
    let run = |pr: &InducingPrior, chunk: usize| {
        centered_in_chunks(pr, Method::Vfe, x.view(), y.view(), chunk).unwrap()
    };
    for chunk in [7, 60] {
        let (a, b) = (run(&plain, chunk), run(&white, chunk));
        assert!(!a.stats.whitened && b.stats.whitened);
        let (va, vb) = (a.bound.value, b.bound.value);
        assert!((va - vb).abs() <= 1e-12 * va.abs(), "{va} vs {vb}");
        let (ga, gb) = (a.gradient.unwrap(), b.gradient.unwrap());
        let scale = ga.hyper.iter().fold(1.0_f64, |m, v| m.max(v.abs()));
        for (u, v) in ga.hyper.iter().zip(&gb.hyper) {
            assert!(
                (u - v).abs() <= 1e-10 * scale,
                "{:?} vs {:?}",
                ga.hyper,
                gb.hyper
            );
        }
        for (u, v) in ga.inducing.iter().zip(&gb.inducing) {
            assert!((u - v).abs() <= 1e-10 * scale, "{u} vs {v}");
        }
        let mut merged = a.stats.clone();
        let err = merged.merge(&b.stats).unwrap_err();
        assert!(matches!(err, Error::InvalidParameter { .. }), "{err}");
    }
}

/// Inputs, targets and inducing inputs of a gradient check.
type Rows = (Array2<f64>, Array1<f64>, Array2<f64>);

/// 80 sorted inputs in `[−3, 3]`, smooth targets with a small ripple, and
/// eight inducing inputs on a grid of the span: with length scales of 2
/// to 4, `K_uu` has condition numbers of 1e8 to 1e11.
fn ill_conditioned_grid() -> Rows {
    let n = 80;
    let mut rng = crate::rng::seeded(3);
    let mut xs: Vec<f64> = (0..n).map(|_| rng.random_range(-3.0..3.0)).collect();
    xs.sort_by(f64::total_cmp);
    let x = Array2::from_shape_vec((n, 1), xs).unwrap();
    let y: Array1<f64> = x.column(0).mapv(|v| v.sin() + 1e-3 * (17.0 * v).cos());
    let z = Array2::from_shape_fn((8, 1), |(i, _)| -3.0 + 6.0 * i as f64 / 7.0);
    (x, y, z)
}

/// FITC where `K_uu` is ill-conditioned (eight inducing inputs on a grid
/// of the inputs' span, length scale 4 over a span of 6: condition number
/// about 1e10, a jitter from the prior's ladder): its statistics are of
/// the whitened columns `L^{−1} k_i`, which Λ needs anyway, so the
/// likelihood is that of the dense `N × N` covariance `Q_ff + Λ` built
/// from the same factor. Kernel-space sums `Σ k_i k_iᵀ / Λ_i` had their
/// rounding amplified by `K_uu^{−1}` and gave a likelihood 1.8 nats high.
/// The gradient's pass works in the same columns and matches central
/// differences as in the well-conditioned case (products with the explicit
/// `Σ^{−1}` and `K_uu^{−1}` were off by 5e−4 relative at `l = 4`).
#[test]
fn fitc_is_accurate_where_k_uu_is_ill_conditioned() {
    let (x, y, z) = ill_conditioned_grid();
    let n = x.nrows();
    let noise = 1e-6;
    for ls in [2.0, 3.0, 4.0] {
        let p = params(Kernel::Gaussian, &[ls], 1.0);
        let pr = prior(&p, noise, z.view());
        let got = eval(&p, noise, z.view(), Method::Fitc, x.view(), y.view(), false)
            .bound
            .value;
        // Q_ff = (L^{−1}K_uf)ᵀ(L^{−1}K_uf) with the prior's factor of
        // K_uu + εI; Λ_i = k_ii − Q_ii + σ_n².
        let mut a = kernel_matrix(&p, z.view(), x.view(), Parallelism::Sequential);
        pr.chol().solve_lower_in_place(
            crate::linalg::as_faer_mut(a.view_mut()),
            Parallelism::Sequential,
        );
        let mut c = a.t().dot(&a);
        for i in 0..n {
            c[(i, i)] = 1.0 + noise;
        }
        let want = log_normal(&c, y.view());
        assert!((got - want).abs() < 1e-6, "l = {ls}: {got} vs {want}");
    }
    let h = 1e-4;
    for ls in [3.0_f64, 4.0] {
        let theta = vec![ls.ln(), 0.0, 1e-4_f64.ln()];
        let p = params(Kernel::Gaussian, &[ls], 1.0);
        let g = eval(&p, 1e-4, z.view(), Method::Fitc, x.view(), y.view(), true)
            .gradient
            .unwrap();
        for j in 0..theta.len() {
            let (mut tp, mut tm) = (theta.clone(), theta.clone());
            tp[j] += h;
            tm[j] -= h;
            let fd = (value_at(Kernel::Gaussian, &tp, &z, Method::Fitc, &x, &y)
                - value_at(Kernel::Gaussian, &tm, &z, Method::Fitc, &x, &y))
                / (2.0 * h);
            assert!(
                (fd - g.hyper[j]).abs() < 1e-6 * (1.0 + fd.abs()),
                "l = {ls}, θ_{j}: fd {fd} vs {}",
                g.hyper[j]
            );
        }
    }
}

/// The gradient of `method` with `kernel` for `(x, y)` at the length
/// scales `ls`, `σ²` and `σ_n²` against central differences of step `h` in the log
/// hyperparameters and in some inducing inputs (Richardson's combination
/// `(4 D(h/2) − D(h))/3` of two steps, `O(h⁴)`), up to the differences'
/// own error: 1e−6 relative plus the value's rounding amplified by
/// `3/h`, measured as the spread `δ` of the value under shifts of the
/// first inducing input by `1e−12`. Asserts that the prior's statistics
/// are whitened (`K_uu` ill-conditioned).
#[allow(clippy::too_many_arguments)]
fn check_ill_conditioned_gradient(
    method: Method,
    kernel: Kernel,
    x: &Array2<f64>,
    y: &Array1<f64>,
    z: &Array2<f64>,
    ls: &[f64],
    [variance, noise]: [f64; 2],
    h: f64,
) {
    let mut theta: Vec<f64> = ls.iter().map(|v| v.ln()).collect();
    theta.extend([variance.ln(), noise.ln()]);
    let p = params(kernel, ls, variance);
    assert!(prior(&p, noise, z.view()).whiten());
    let g = eval(&p, noise, z.view(), method, x.view(), y.view(), true)
        .gradient
        .unwrap();
    let value = |theta: &[f64], z: &Array2<f64>| value_at(kernel, theta, z, method, x, y);
    let f0 = value(&theta, z);
    let delta = (1..=8)
        .map(|k| {
            let mut zk = z.clone();
            zk[(0, 0)] += k as f64 * 1e-12;
            (value(&theta, &zk) - f0).abs()
        })
        .fold(0.0, f64::max);
    let check = |fd: f64, an: f64, what: &str| {
        let tol = 1e-6 * (1.0 + fd.abs()) + 4.0 * delta / h;
        assert!(
            (fd - an).abs() < tol,
            "{method:?} {kernel:?} {ls:?} {variance} {noise}, {what}: fd {fd} vs {an} \
             (tolerance {tol})"
        );
    };
    let richardson = |at: &dyn Fn(f64) -> f64| {
        let d = |step: f64| (at(step) - at(-step)) / (2.0 * step);
        (4.0 * d(h / 2.0) - d(h)) / 3.0
    };
    for j in 0..theta.len() {
        let fd = richardson(&|step| {
            let mut t = theta.clone();
            t[j] += step;
            value(&t, z)
        });
        check(fd, g.hyper[j], &format!("θ_{j}"));
    }
    for mi in [0, z.nrows() / 2, z.nrows() - 1] {
        for c in 0..z.ncols() {
            let fd = richardson(&|step| {
                let mut zs = z.clone();
                zs[(mi, c)] += step;
                value(&theta, &zs)
            });
            check(fd, g.inducing[(mi, c)], &format!("z[{mi}, {c}]"));
        }
    }
}

/// VFE's gradient where `K_uu` is ill-conditioned matches central
/// differences as where it is not: the grid of
/// [`fitc_is_accurate_where_k_uu_is_ill_conditioned`] (condition numbers
/// of 1e8 to 1e11), and 40 of 1,500 rows in 3-d at `l = 4.5`, `σ² = 100`,
/// `σ_n² = 0.01`. Its adjoints used to be sums of kernel-space matrices of
/// order `κ(K_uu)/σ²` (`K_uu^{−1} − Σ^{−1}`, `K_uu^{−1} S K_uu^{−1}`, `ααᵀ`)
/// that cancel to order 1, and the second pass multiplied `2 ∂F/∂S` (of
/// the same order) with the kernel columns: in the second case the slopes
/// in `(ln l, ln σ², ln σ_n²)` were off by 0.015, 0.005 and 0.075 (of 769,
/// −91 and −245) and those in `Z` by up to 2e−3 (now at most 1e−4, within
/// the differences' error).
#[test]
fn vfe_gradient_is_accurate_where_k_uu_is_ill_conditioned() {
    let grid = ill_conditioned_grid();
    let scattered = forty_of_1500_rows();
    let mut cases: Vec<(&Rows, f64, [f64; 2], f64)> =
        [(2.0, 1e-4), (3.0, 1e-4), (4.0, 1e-4), (4.0, 1e-2)]
            .map(|(ls, noise)| (&grid, ls, [1.0, noise], 1e-4))
            .to_vec();
    cases.push((&scattered, 4.5, [100.0, 0.01], 1e-3));
    for ((x, y, z), ls, variances, h) in cases {
        check_ill_conditioned_gradient(Method::Vfe, Kernel::Gaussian, x, y, z, &[ls], variances, h);
    }
}

/// 1,500 rows in 3-d with their targets, and every 37th row as one of 40
/// inducing inputs.
fn forty_of_1500_rows() -> Rows {
    let x = random(1500, 3, 8);
    let y = targets(&x);
    let rows: Vec<usize> = (0..40).map(|i| 37 * i).collect();
    let z = x.select(ndarray::Axis(0), &rows);
    (x, y, z)
}

/// Both methods' gradients where `K_uu` is ill-conditioned, for two
/// length scales and the Matérn kernels as well, with and without a
/// jitter (40 of 1,500 rows in 3-d as inducing inputs). FITC's `∂F/∂K_uu`
/// used to be the kernel-space sum `½(K_uu^{−1} − Σ^{−1}) − ½ααᵀ` plus the
/// rows' part, each of order `κ(K_uu)/σ²` and cancelling to order 1: its
/// slopes in `Z` were off by up to 0.09 (−3.665 against −3.576 at
/// `l = 8`, `σ² = 1e4`), against tolerances of 6e−4.
#[test]
fn gradients_are_accurate_where_k_uu_is_ill_conditioned_for_every_kernel() {
    let (x, y, z) = forty_of_1500_rows();
    for method in [Method::Vfe, Method::Fitc] {
        for (kernel, ls, variances) in [
            (Kernel::Gaussian, &[6.0, 8.0, 9.0][..], [1e3, 0.01]),
            (Kernel::Gaussian, &[8.0][..], [1e4, 0.01]),
            (Kernel::Matern52, &[40.0][..], [1e4, 1e-3]),
            (Kernel::Matern32, &[20.0][..], [100.0, 0.01]),
        ] {
            check_ill_conditioned_gradient(method, kernel, &x, &y, &z, ls, variances, 1e-3);
        }
    }
}

/// Kernel variances beyond `10^±100` are refused, naming the parameter:
/// `S ∝ σ⁴` leaves float64's range near `10^±150`, where the bound ignored
/// the data (a prior's prediction) or could not be formed. The edges of the
/// range still give the scale-equivariant bound (`σ² = 1` with the targets
/// and the noise variance scaled by `σ²`, less `(N/2) ln σ²`).
#[test]
fn kernel_variances_beyond_float64s_range_for_the_statistics_are_refused() {
    let x = random(40, 2, 5);
    let y = targets(&x);
    let z = x.slice(s![..6, ..]).to_owned();
    let unit = params(Kernel::Gaussian, &[0.8], 1.0);
    let base = eval(
        &unit,
        0.05,
        z.view(),
        Method::Vfe,
        x.view(),
        y.view(),
        false,
    )
    .bound
    .value;
    for v in [1e-100, 1e100] {
        let p = params(Kernel::Gaussian, &[0.8], v);
        let ys = y.mapv(|t| t * v.sqrt());
        let f = eval(
            &p,
            0.05 * v,
            z.view(),
            Method::Vfe,
            x.view(),
            ys.view(),
            false,
        )
        .bound
        .value;
        let want = base - 0.5 * 40.0 * v.ln();
        assert!(
            (f - want).abs() < 1e-9 * want.abs(),
            "σ² = {v:e}: {f} vs {want}"
        );
    }
    for v in [1e-101, 1e101, 1e-200, 1e200] {
        let p = params(Kernel::Gaussian, &[0.8], v);
        let err = InducingPrior::new(p, 0.05 * v, z.view(), Parallelism::Rayon).unwrap_err();
        assert!(
            matches!(
                err,
                Error::InvalidParameter {
                    name: "kernel_variance",
                    ..
                }
            ),
            "{err}"
        );
    }
}
