"""GP regression side by side (docs/math/gp.rst); run through ``make bench``.

1. ExactGPR hyperparameter fit on kin8nm (N = 2,000, d = 8, standardized)
   against scikit-learn's GaussianProcessRegressor with
   ConstantKernel * RBF + WhiteKernel: the same data, the same starting point
   (7.1's initialization), no restarts in either. Goal: >= 5x faster at an
   equal or better log marginal likelihood.
2. RandomFeatureGPR at N = 100,000, d = 8, D = 1,024 (features + fit, then
   predict 10,000 points) against the plain NumPy implementation
   (Phi = features(X); A = Phi^T Phi / s2 + I; Cholesky; mean and variance).
   The randfeat_rs arm uses the library's own RandomFourierFeatures
   (cos_sin, D = 1,024) inside RandomFeatureGPR (chunked accumulation);
   the NumPy arm computes the same features (the fitted frequencies) with
   NumPy, Phi for all rows at once (written in place: Z = X W^T, then cos
   and sin into one preallocated N x D array), then BLAS. Each arm runs in
   its own subprocess; peak memory = the process's own peak RSS (VmHWM,
   reset before the work where Linux allows; not getrusage's ru_maxrss,
   which Linux carries over from the parent through execve) minus the RSS
   before the work, and tracemalloc's peak of Python/NumPy allocations is
   shown as well (it does not see Rust's allocations). Goal: >= 3x faster
   with <= 1/4 of the peak memory.
"""

from __future__ import annotations

import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np
import scipy.optimize

sys.path.insert(0, str(Path(__file__).parent))
from _common import machine_line

N_BIG, D_IN, D_FEAT, N_TEST = 100_000, 8, 1024, 10_000
NOISE = 0.01
LENGTH_SCALE = 2.0


def _rss_bytes() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * resource.getpagesize()


def _reset_peak() -> None:
    """Reset this process's peak RSS (VmHWM) where Linux allows it."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
    except OSError:
        pass


def _peak_bytes() -> int:
    """This process's own peak RSS (VmHWM of /proc/self/status).

    Not ``getrusage``'s ``ru_maxrss``: Linux carries that over ``execve``, so
    a child started by a bench that had already built N x N matrices would
    report the parent's high-water mark.
    """
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _stderr_of(fn) -> str:
    """What ``fn()`` writes to file descriptor 2 (``sys.stderr`` included)."""
    with tempfile.TemporaryFile(mode="w+") as tmp:
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(tmp.fileno(), 2)
        try:
            fn()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        tmp.seek(0)
        return tmp.read()


def exact_comparison() -> None:
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import RBF, ConstantKernel, WhiteKernel

    from randfeat_rs import ExactGPR
    from randfeat_rs.datasets import load_kin8nm

    X, y = load_kin8nm()
    idx = np.random.default_rng(0).permutation(X.shape[0])[:2000]
    X = (X[idx] - X[idx].mean(0)) / X[idx].std(0)
    y = y[idx]
    y = (y - y.mean()) / y.std()
    d = np.sqrt(((X[:500, None, :] - X[None, :500, :]) ** 2).sum(-1))
    ell = float(np.median(d[np.tril_indices(500, -1)]))
    var_y = float(y.var())

    t0 = time.perf_counter()
    ours = ExactGPR(n_restarts=0).fit(X, y)
    t_ours = time.perf_counter() - t0
    # The same fit again, untimed and verbose, to count its LML evaluations
    # per level (rows: evaluations) from its verbose lines.
    log = _stderr_of(lambda: ExactGPR(n_restarts=0, verbose=True).fit(X, y))
    levels = [(int(r), int(e)) for r, e in re.findall(r"(\d+) rows: (\d+) LML evaluations", log)]
    full_equiv = sum(e * (r / X.shape[0]) ** 3 for r, e in levels)
    our_work = (
        f"{ours.n_iter_} ("
        + ", ".join(f"{e} LML evaluations on {r} rows" for r, e in levels)
        + f"; {full_equiv:.1f} full-size equivalents)"
    )

    kernel = ConstantKernel(var_y, (1e-5, 1e5)) * RBF(ell, (1e-5, 1e5)) + WhiteKernel(
        0.1 * var_y, (1e-8, 1e5)
    )
    sk_work = {}

    def lbfgsb(obj_func, initial_theta, bounds):
        # scikit-learn's default optimizer ("fmin_l_bfgs_b") spelled out, to
        # count its LML evaluations (each one value + gradient).
        res = scipy.optimize.minimize(
            obj_func, initial_theta, method="L-BFGS-B", jac=True, bounds=bounds
        )
        sk_work.update(nfev=res.nfev, nit=res.nit)
        return res.x, res.fun

    t0 = time.perf_counter()
    sk = GaussianProcessRegressor(
        kernel, optimizer=lbfgsb, n_restarts_optimizer=0, random_state=0
    ).fit(X, y)
    t_sk = time.perf_counter() - t0
    lml_sk = float(sk.log_marginal_likelihood_value_)

    print("### ExactGPR hyperparameter fit, kin8nm N = 2,000, d = 8 (standardized)\n")
    print("| | fit [s] | LML | length scale | kernel var | noise var | L-BFGS iterations (work) |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    print(
        f"| randfeat_rs ExactGPR | {t_ours:.2f} | {ours.log_marginal_likelihood_:.4f} | "
        f"{ours.length_scale_:.4f} | {ours.kernel_variance_:.4f} | {ours.noise_variance_:.5f} | "
        f"{our_work} |"
    )
    k = sk.kernel_
    print(
        f"| scikit-learn GPR (C*RBF+White) | {t_sk:.2f} | {lml_sk:.4f} | "
        f"{k.k1.k2.length_scale:.4f} | {k.k1.k1.constant_value:.4f} | {k.k2.noise_level:.5f} | "
        f"{sk_work['nit']} ({sk_work['nfev']} LML evaluations) |"
    )
    verdict = (
        "met"
        if t_sk / t_ours >= 5 and ours.log_marginal_likelihood_ >= lml_sk - 1e-6
        else "NOT met"
    )
    print(
        f"\nspeed-up {t_sk / t_ours:.1f}x (goal >= 5x), LML difference "
        f"{ours.log_marginal_likelihood_ - lml_sk:+.2e} (goal >= 0): {verdict}\n"
    )


def _big_data():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((N_BIG, D_IN))
    y = np.sin(X).sum(1) + 0.1 * rng.standard_normal(N_BIG)
    Xs = rng.standard_normal((N_TEST, D_IN))
    return X, y, Xs


def _numpy_rff(rff, X: np.ndarray) -> np.ndarray:
    """``rff.transform(X)`` (cos_sin variant) in NumPy, one N x D array."""
    w = rff.frequencies_
    m = w.shape[0]
    z = X @ w.T
    phi = np.empty((X.shape[0], 2 * m))
    np.cos(z, out=phi[:, :m])
    np.sin(z, out=phi[:, m:])
    del z
    phi *= rff.scale_
    return phi


def arm(name: str) -> None:
    """One arm of comparison 2, in its own process; prints a JSON line."""
    from scipy.linalg import cho_factor, cho_solve, solve_triangular

    from randfeat_rs import RandomFeatureGPR, RandomFourierFeatures

    X, y, Xs = _big_data()
    rff = RandomFourierFeatures(D_FEAT, length_scale=LENGTH_SCALE, random_state=0)
    # Warm up imports, BLAS and the thread pool on a tiny problem, outside
    # the measurement; check that the NumPy map is the library's map.
    small = rff.fit(X[:50])
    assert np.allclose(_numpy_rff(small, X[:50]), small.transform(X[:50]), atol=1e-12)
    RandomFeatureGPR(rff, noise_variance=NOISE).fit(X[:50], y[:50]).predict(Xs[:5])
    _reset_peak()
    base = _rss_bytes()
    tracemalloc.start()
    t0 = time.perf_counter()
    if name == "randfeat_rs":
        gp = RandomFeatureGPR(rff, noise_variance=NOISE).fit(X, y)
        t1 = time.perf_counter()
        mean, std = gp.predict(Xs, return_std=True)
    else:
        f = RandomFourierFeatures(D_FEAT, length_scale=LENGTH_SCALE, random_state=0).fit(X)
        phi = _numpy_rff(f, X)
        ym = y.mean()
        A = phi.T @ phi / NOISE
        A[np.diag_indices_from(A)] += 1.0
        b = phi.T @ (y - ym) / NOISE
        del phi
        c = cho_factor(A, lower=True)
        coef = cho_solve(c, b)
        t1 = time.perf_counter()
        phis = _numpy_rff(f, Xs)
        mean = phis @ coef + ym
        v = solve_triangular(c[0], phis.T, lower=True)
        std = np.sqrt((v**2).sum(0))
    t2 = time.perf_counter()
    _, py_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    peak = _peak_bytes() - base
    np.save(Path("/tmp") / f"gp_bench_{name}.npy", np.stack([mean, std]))
    print(json.dumps({"fit": t1 - t0, "predict": t2 - t1, "peak": peak, "py_peak": py_peak}))


FEATURE_PAIRS = 5  # interleaved NumPy / randfeat_rs process pairs; medians reported


def feature_comparison() -> None:
    runs: dict[str, list[dict]] = {"numpy": [], "randfeat_rs": []}
    for _ in range(FEATURE_PAIRS):
        for name in runs:
            out = subprocess.run(
                [sys.executable, __file__, "--arm", name],
                capture_output=True,
                text=True,
                check=True,
            )
            runs[name].append(json.loads(out.stdout.strip().splitlines()[-1]))
    a = np.load("/tmp/gp_bench_numpy.npy")
    b = np.load("/tmp/gp_bench_randfeat_rs.npy")
    diff = float(np.abs(a - b).max())
    med = {
        name: {key: float(np.median([r[key] for r in rs])) for key in rs[0]}
        for name, rs in runs.items()
    }
    print(
        f"### RandomFeatureGPR, N = {N_BIG:,}, d = {D_IN}, D = {D_FEAT:,} "
        f"(RandomFourierFeatures, same features in both arms), predict {N_TEST:,}\n"
    )
    print(f"Medians of {FEATURE_PAIRS} interleaved process pairs.\n")
    print(
        "| | features + fit [s] | predict [s] | total [s] | peak RSS [MB] | tracemalloc peak [MB] |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for name, label in (
        ("numpy", "NumPy (Phi^T Phi + Cholesky)"),
        ("randfeat_rs", "randfeat_rs RandomFeatureGPR"),
    ):
        r = med[name]
        print(
            f"| {label} | {r['fit']:.2f} | {r['predict']:.2f} | {r['fit'] + r['predict']:.2f} | "
            f"{r['peak'] / 2**20:.0f} | {r['py_peak'] / 2**20:.0f} |"
        )
    ratios = [
        (n["fit"] + n["predict"]) / (r["fit"] + r["predict"])
        for n, r in zip(runs["numpy"], runs["randfeat_rs"])
    ]
    ratio = float(np.median(ratios))
    mem = med["randfeat_rs"]["peak"] / med["numpy"]["peak"]
    verdict = "met" if ratio >= 3 and mem <= 0.25 else "NOT met"
    print(
        f"\nspeed-up {ratio:.2f}x (median; pairs {', '.join(f'{x:.2f}' for x in ratios)}; "
        f"goal >= 3x), peak memory ratio {mem:.3f} (goal <= 0.25): {verdict}; "
        f"max |difference| of mean/std between the arms {diff:.1e}\n"
    )


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--arm":
        arm(sys.argv[2])
        return
    print(f"Machine: {machine_line()}\n")
    exact_comparison()
    feature_comparison()


if __name__ == "__main__":
    main()
