"""Noise-aware Beta-Binomial posterior (issue 10) against Bernstein & Sheldon's Gibbs sampler.

Run: ``python benchmarks/bench_noise_aware.py [--quick] [--reps R] [--part coin|mcmc|all]``;
writes ``benchmarks/results/noise_aware.csv`` (coin) and ``noise_aware_mcmc.csv`` (the
MCMC samplers of the Bayesian-network and linear-regression releases, before and after
their compiled rewrite: see ``run_mcmc``).

Setting (the issue's): Beta(1, 1) prior, N = 1000, theta drawn from the prior, the true
count s ~ Bin(N, theta), the dpbayes Laplace release of s (scale 1/eps, truncated to
[0, N]), eps in {0.01, 0.1, 1}. For each release, in the same process:

* **exact** (dpbayes): ``noise_aware_posterior(rel).interval(0.9)``, the exact mixture
  over the true count (``dpbayes.release.counts.coin``: pruned ladder mixture,
  Newton quantiles);
* **baseline**: Bernstein & Sheldon (NeurIPS 2018, "Differentially private Bayesian
  inference for exponential families", §4, their Gibbs sampler for the Beta-Binomial),
  reimplemented from the paper: each sweep redraws (1) the true statistic from the
  normal approximation N(N theta, N theta (1 - theta)) times the Gaussian given the
  Laplace noise's latent variance w, truncated to [0, N]; (2) 1/w from its inverse-
  Gaussian conditional (the Laplace as a scale mixture of normals, Park & Casella 2008);
  (3) theta ~ Beta(a + s, b + N - s). 500 burn-in and 1000 kept draws, one chain. Like the
  paper's model it does not model the release's truncation to [0, N];
* **naive**: Beta(a + y, b + N - y), the released count taken as exact.

Recorded: time per posterior (including the 90% interval): wall-clock mean and median and
process CPU time, the three methods in a fresh random order for every release (on a
shared machine, wall-clock means carry other processes' preemptions), coverage of
the central 90% interval of the true theta (binomial standard error sqrt(0.09/R)), and
the baseline's effective sample size (initial-positive-sequence estimator, Geyer 1992) of theta.
"""

from __future__ import annotations

import argparse
import csv
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy import special

from dpbayes.models import BetaBernoulli, CountStatistics
from dpbayes.privacy import Neighbours
from dpbayes.privacy.noise import noise_source
from dpbayes.release.base import Release, noise_aware_posterior
from dpbayes.release.counts.mechanism import plan_counts

OUT = Path(__file__).resolve().parent / "results"
N = 1000
A = B = 1.0
BURN, KEEP = 500, 1000
LEVEL = 0.9


def gibbs_bernstein_sheldon(
    y: float, n: int, eps: float, gen: np.random.Generator, burn: int = BURN, keep: int = KEEP
) -> np.ndarray:
    """Kept theta draws of B&S's Gibbs sampler for y = s + Laplace(1/eps)."""
    scale = 1.0 / eps
    lam = 1.0 / scale
    theta = (A + min(max(y, 0.0), n)) / (A + B + n)
    w = 2.0 * scale * scale  # the Laplace's variance
    out = np.empty(keep)
    u1 = gen.random(burn + keep)
    for it in range(burn + keep):
        # (1) s | theta, w, y: N(n theta, n theta(1-theta)) x N(y; s, w), truncated to [0, n]
        v0 = n * theta * (1.0 - theta)
        prec = 1.0 / v0 + 1.0 / w
        mean = (n * theta / v0 + y / w) / prec
        sd = math.sqrt(1.0 / prec)
        lo, hi = special.ndtr((0.0 - mean) / sd), special.ndtr((n - mean) / sd)
        p = lo + u1[it] * (hi - lo)
        p = min(max(p, 1e-300), 1.0 - 1e-16)
        s = min(max(mean + sd * float(special.ndtri(p)), 0.0), float(n))
        # (2) 1/w | s, y ~ InverseGaussian(mean = lam / |y - s|, shape = lam^2)
        z = max(abs(y - s), 1e-12)
        w = 1.0 / gen.wald(lam / z, lam * lam)
        # (3) theta | s ~ Beta(a + s, b + n - s)
        theta = gen.beta(A + s, B + n - s)
        theta = min(max(theta, 1e-12), 1.0 - 1e-12)
        if it >= burn:
            out[it - burn] = theta
    return out


def ess(x: np.ndarray) -> float:
    """Effective sample size, Geyer's initial positive sequence of autocorrelations."""
    x = np.asarray(x, dtype=float) - np.mean(x)
    n = x.size
    if np.var(x) == 0:
        return float(n)
    f = np.fft.rfft(x, 2 * n)
    acf = np.fft.irfft(f * np.conj(f))[:n] / (np.var(x) * n)
    total = 0.0
    for k in range(0, n - 1, 2):
        pair = acf[k] + acf[k + 1]
        if pair <= 0:
            break
        total += pair
    return float(n / max(2 * total - 1, 1e-12))


def run(reps: int, epsilons: tuple[float, ...], seed: int = 0) -> list[dict[str, object]]:
    model = BetaBernoulli(alpha=A, beta=B)
    src = noise_source(seed)
    gen = src.generator()
    rows: list[dict[str, object]] = []
    for eps in epsilons:
        hit = {"exact": 0, "gibbs": 0, "naive": 0}
        each: dict[str, list[float]] = {"exact": [], "gibbs": [], "naive": []}
        cpu: dict[str, list[float]] = {"exact": [], "gibbs": [], "naive": []}
        esses: list[float] = []
        noise_aware_posterior(
            plan_counts(
                model,
                CountStatistics(counts=np.array([0, N]), n=N),
                epsilon=eps,
                delta=0.0,
                neighbours=Neighbours.SUBSTITUTE,
                mechanism="laplace",
            ).run(src)
        ).interval(LEVEL)  # warm-up: the (a, b, N) tables are cached once
        for _ in range(reps):
            theta = float(gen.beta(A, B))
            s = int(gen.binomial(N, theta))
            plan = plan_counts(
                model,
                CountStatistics(counts=np.array([s, N - s]), n=N),
                epsilon=eps,
                delta=0.0,
                neighbours=Neighbours.SUBSTITUTE,
                mechanism="laplace",
            )
            rel = plan.run(src)
            y = float(rel.released["counts"][0])

            def exact(rel: Release = rel) -> tuple[float, float]:
                return noise_aware_posterior(rel).interval(LEVEL)  # type: ignore[no-any-return]

            kept: list[np.ndarray] = []

            def gibbs(
                y: float = y, eps: float = eps, kept: list[np.ndarray] = kept
            ) -> tuple[float, float]:
                draws = gibbs_bernstein_sheldon(y, N, eps, gen)
                kept.append(draws)
                lo, hi = np.quantile(draws, [(1 - LEVEL) / 2, (1 + LEVEL) / 2])
                return float(lo), float(hi)

            def naive(rel: Release = rel) -> tuple[float, float]:
                return rel.posterior.interval(LEVEL)  # type: ignore[no-any-return]

            fns: dict[str, Callable[[], tuple[float, float]]] = {
                "exact": exact,
                "gibbs": gibbs,
                "naive": naive,
            }
            # a fresh order each release: no method always runs right after the long one
            for method in [("exact", "gibbs", "naive")[i] for i in gen.permutation(3)]:
                t0, c0 = time.perf_counter(), time.process_time()
                lo, hi = fns[method]()
                each[method].append(time.perf_counter() - t0)
                cpu[method].append(time.process_time() - c0)
                hit[method] += lo <= theta <= hi
            esses.append(ess(kept[0]))  # diagnostics outside the clock
        se = math.sqrt(LEVEL * (1 - LEVEL) / reps)
        secs = {k: float(np.sum(v)) for k, v in each.items()}
        med = {k: float(np.median(v)) for k, v in each.items()}
        cpus = {k: float(np.sum(v)) for k, v in cpu.items()}
        for method in ("exact", "gibbs", "naive"):
            rows.append(
                {
                    "epsilon": eps,
                    "method": method,
                    "n": N,
                    "reps": reps,
                    "coverage90": round(float(hit[method]) / reps, 4),
                    "coverage_se": round(se, 4),
                    "ms_per_posterior": round(1e3 * secs[method] / reps, 3),
                    "median_ms": round(1e3 * med[method], 3),
                    "speedup_vs_gibbs": round(secs["gibbs"] / secs[method], 1),
                    "median_speedup": round(med["gibbs"] / med[method], 1),
                    "cpu_ms_per_posterior": round(1e3 * cpus[method] / reps, 3),
                    "cpu_speedup": round(cpus["gibbs"] / cpus[method], 1),
                    "median_ess_of_1000": round(float(np.median(esses)), 1)
                    if method == "gibbs"
                    else "",
                }
            )
            print(rows[-1], flush=True)
    return rows


# --------------------------------------------------------------------------------------
# MCMC noise-aware posteriors: Bayesian-network Gibbs and linear-regression MH
# --------------------------------------------------------------------------------------
#
# "before" is the implementation these samplers replaced (kept here, and only here, as
# the baseline): the numpy pair-move Gibbs sampler (one move per iteration, 4000
# iterations, exact conditional on the full grid of t, all chains vectorised) and the
# numpy Metropolis-Hastings on X'X (1000 steps per chain); "after" is the default call.


def _old_bn_diagnostics(rel: Release, iterations: int = 4000, chains: int = 4, seed: int = 0):  # type: ignore[no-untyped-def]
    """The replaced Bayesian-network sampler (numpy, one pair move per iteration)."""
    from dpbayes.release.bayes_net import gibbs
    from dpbayes.release.mcmc import diagnose

    model = rel.model
    n, scale = int(rel.public["n"]), float(rel.public["scale"])
    cells, fam, row = gibbs.joint_maps(model)
    if rel.mechanism == "fourier":
        obs = gibbs.fourier_observations(model, rel, scale)
    else:
        obs = gibbs.count_observations(model, rel, fam, n, scale)
    gen = noise_source(seed).generator()
    alpha, m = model.alpha, chains
    big_a = [alpha * model.cardinality(v) for v in model.nodes]
    state = np.stack([gen.multinomial(n, gen.dirichlet(np.ones(cells))) for _ in range(m)])
    state = state.astype(float)
    t = np.arange(-n, n + 1, dtype=float)[None, :]
    out = np.empty((m, iterations, cells))
    rows_m = np.arange(m)
    fam_ind = [(f[:, None] == np.arange(int(f.max()) + 1)[None, :]).astype(float) for f in fam]
    row_ind = [(r[:, None] == np.arange(int(r.max()) + 1)[None, :]).astype(float) for r in row]
    for it in range(iterations):
        i, j = (int(v) for v in gen.choice(cells, size=2, replace=False))
        ni, nj = state[:, i : i + 1], state[:, j : j + 1]
        ok = (t <= ni) & (-t <= nj)
        lp = -special.gammaln(np.maximum(ni - t, 0.0) + 1.0) - special.gammaln(
            np.maximum(nj + t, 0.0) + 1.0
        )
        for vi in range(len(model.nodes)):
            fi, fj = int(fam[vi][i]), int(fam[vi][j])
            if fi == fj:
                continue
            fc = state @ fam_ind[vi][:, [fi, fj]]
            lp += special.gammaln(alpha + np.maximum(fc[:, :1] - t, 0.0))
            lp += special.gammaln(alpha + np.maximum(fc[:, 1:] + t, 0.0))
            ri, rj = int(row[vi][i]), int(row[vi][j])
            if ri != rj:
                rc = state @ row_ind[vi][:, [ri, rj]]
                lp -= special.gammaln(big_a[vi] + np.maximum(rc[:, :1] - t, 0.0))
                lp -= special.gammaln(big_a[vi] + np.maximum(rc[:, 1:] + t, 0.0))
        diff = obs.matrix[:, j] - obs.matrix[:, i]
        for o in np.flatnonzero(diff):
            value = (state @ obs.matrix[o])[:, None] + diff[o] * t
            lp += -np.abs(obs.released[o] - value) / obs.scale
        lp = np.where(ok, lp, -np.inf)
        p = np.exp(lp - lp.max(axis=1, keepdims=True))
        cum = np.cumsum(p, axis=1)
        u = gen.random(m)[:, None] * cum[:, -1:]
        k = np.minimum((cum < u).sum(axis=1), cum.shape[1] - 1)
        move = t[0, k]
        state[rows_m, i] -= move
        state[rows_m, j] += move
        out[:, it] = state
    keep = out[:, iterations // 2 :]
    names, series = [], []
    for vi, v in enumerate(model.nodes):
        for f in range(int(np.prod(model.table_shape(v)))):
            names.append(f"{v}[{f}]")
            series.append(keep[:, :, fam[vi] == f].sum(axis=2))
    return diagnose(np.stack(series, axis=2), names, what="baseline")


def _old_regression_diagnostics(
    rel: Release, iterations: int = 1000, chains: int = 4, seed: int = 0
):  # type: ignore[no-untyped-def]
    """The replaced regression sampler (numpy MH on X'X, one step at a time)."""
    from dpbayes.release.mcmc import diagnose
    from dpbayes.release.regression import noise_aware as nar

    model = rel.model
    draws = np.atleast_2d(np.asarray(rel.released["draws"], dtype=float))
    d, n_rec = draws.shape[1], int(rel.public["n"])
    bx = model.feature_bound if model.feature_bound is not None else 1.0
    sx = (bx * bx / d) * np.eye(d)
    lam, sig2, s2 = model.prior_precision, model.noise_variance, float(rel.public["noise_variance"])
    wbar = draws.mean(axis=0)
    dev = draws - wbar
    dn = draws.shape[0]

    def parts(t: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
        eye = np.eye(d)
        prec_t = lam * eye + t / s2
        sig_t = np.linalg.inv(prec_t)
        a = sig_t @ t / s2
        r = sig2 * a @ sig_t / s2 + sig_t / dn
        r = (r + r.T) / 2
        v = a @ a.T / lam + r
        quad = float(wbar @ np.linalg.solve(v, wbar))
        spread = float(np.einsum("ij,jk,ik->", dev, prec_t, dev))
        loglik = (
            -0.5 * (np.linalg.slogdet(v)[1] + quad)
            + 0.5 * (dn - 1) * np.linalg.slogdet(prec_t)[1]
            - 0.5 * spread
        )
        rinv_a = np.linalg.solve(r, a)
        post_cov = np.linalg.inv(lam * eye + a.T @ rinv_a)
        post_cov = (post_cov + post_cov.T) / 2
        return loglik, post_cov @ (rinv_a.T @ wbar), post_cov

    gen = noise_source(seed).generator()
    its, burn = iterations, iterations // 2
    keep_w = np.empty((chains, its - burn, d))
    keep_ld = np.empty((chains, its - burn))
    for c in range(chains):
        t = nar._wishart_draw(float(n_rec), sx, gen)
        lp_prior = nar._wishart_logpdf(t, n_rec, sx)
        ll, mu, cov = parts(t)
        nu, acc = float(max(n_rec, d + 2)), 0
        for it in range(its):
            if it % 2:
                prop = nar._wishart_draw(float(n_rec), sx, gen)
                lp_p = nar._wishart_logpdf(prop, n_rec, sx)
                ll_p, mu_p, cov_p = parts(prop)
                log_a = ll_p - ll
            else:
                prop = nar._wishart_draw(nu, t / nu, gen)
                lp_p = nar._wishart_logpdf(prop, n_rec, sx)
                ll_p, mu_p, cov_p = parts(prop)
                log_q = nar._wishart_logpdf(t, nu, prop / nu) - nar._wishart_logpdf(
                    prop, nu, t / nu
                )
                log_a = lp_p + ll_p - lp_prior - ll + log_q
            if math.log(gen.random() + 1e-300) < log_a:
                t, lp_prior, ll, mu, cov = prop, lp_p, ll_p, mu_p, cov_p
                acc += 1
            if it < burn and (it + 1) % 50 == 0:
                rate = acc / 50
                nu = nu / 1.5 if rate > 0.4 else (nu * 1.5 if rate < 0.15 else nu)
                nu, acc = max(nu, d + 2.0), 0
            if it >= burn:
                keep_w[c, it - burn] = mu + np.linalg.cholesky(cov) @ gen.standard_normal(d)
                keep_ld[c, it - burn] = np.linalg.slogdet(t)[1]
    series = np.concatenate([keep_w, keep_ld[:, :, None]], axis=2)
    names = [f"w[{i}]" for i in range(d)] + ["log det X'X"]
    return diagnose(series, names, what="baseline")


def mcmc_cases(seed: int = 0) -> list[tuple[str, float, Release]]:
    """The issue's examples: smoker{0,1} -> health{0..3} and A{2} -> B{3} -> C{2} at
    n = 1000 (Laplace counts, eps 0.1 and 1), and linear regression d = 2, n 50..1000."""
    from dpbayes.models.bayes_net import BayesNet
    from dpbayes.models.linear_regression import BayesianLinearRegression
    from dpbayes.release import release

    gen = noise_source(seed + 123).generator()
    n = 1000
    s = (gen.random(n) < 0.3).astype(int)
    ph = np.array([[0.4, 0.3, 0.2, 0.1], [0.1, 0.2, 0.3, 0.4]])
    h = np.array([gen.choice(4, p=ph[v]) for v in s])
    two = BayesNet({"smoker": [0, 1], "health": [0, 1, 2, 3]}, [("smoker", "health")])
    a = (gen.random(n) < 0.4).astype(int)
    pb = np.array([[0.6, 0.3, 0.1], [0.2, 0.3, 0.5]])
    b = np.array([gen.choice(3, p=pb[v]) for v in a])
    c = (gen.random(n) < np.array([0.2, 0.2, 0.7])[b]).astype(int)
    chain = BayesNet({"A": [0, 1], "B": [0, 1, 2], "C": [0, 1]}, [("A", "B"), ("B", "C")])
    out: list[tuple[str, float, Release]] = []
    for eps in (0.1, 1.0):
        df2 = pd.DataFrame({"smoker": s, "health": h})
        out.append(
            (
                "bn smoker->health",
                eps,
                release(two, df2, mechanism="laplace", epsilon=eps, rng=seed + 7),
            )
        )
        df3 = pd.DataFrame({"A": a, "B": b, "C": c})
        out.append(
            ("bn A->B->C", eps, release(chain, df3, mechanism="laplace", epsilon=eps, rng=seed + 8))
        )
    model = BayesianLinearRegression(
        prior_precision=1.0,
        noise_variance=0.25,
        feature_bound=1.0,
        label_bound=3.0,
        weight_bound=4.0,
    )
    for size in (50, 200, 1000):
        x = gen.normal(size=(size, 2)) / math.sqrt(2)
        y = x @ gen.normal(size=2) + 0.5 * gen.normal(size=size)
        out.append(
            (
                f"regression d=2 n={size}",
                1.0,
                release(model, (x, y), mechanism="sampling", epsilon=1.0, rng=seed + size),
            )
        )
    return out


def run_mcmc(seed: int = 0, baseline: bool = True) -> list[dict[str, object]]:
    """Time per posterior (wall and process CPU), max R-hat, min ESS and min ESS per
    second, before (baseline above) and after (the default call), same releases."""
    import warnings

    rows: list[dict[str, object]] = []
    cases = mcmc_cases(seed)
    for _, _, rel in cases[:1] + cases[-1:]:  # compile / load the numba caches off the clock
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            noise_aware_posterior(rel, rng=0, iterations=40)
    for name, eps, rel in cases:

        def after(rel: Release = rel) -> Any:
            return noise_aware_posterior(rel, rng=seed + 1).diagnostics

        def before(rel: Release = rel, bn: bool = name.startswith("bn")) -> Any:
            old = _old_bn_diagnostics if bn else _old_regression_diagnostics
            return old(rel, seed=seed + 1)

        impls: list[tuple[str, Callable[[], Any]]] = [("after", after)]
        if baseline:
            impls.insert(0, ("before", before))
        for label, fn in impls:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", RuntimeWarning)
                t0, c0 = time.perf_counter(), time.process_time()
                diag = fn()
                wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            rows.append(
                {
                    "case": name,
                    "epsilon": eps,
                    "impl": label,
                    "seconds": round(wall, 3),
                    "cpu_seconds": round(cpu, 3),
                    "max_rhat": round(diag.max_rhat, 4),
                    "min_ess": round(diag.min_ess, 1),
                    "min_ess_per_cpu_s": round(diag.min_ess / max(cpu, 1e-9), 1),
                    "warned": bool(caught) or not diag.ok,
                }
            )
            print(rows[-1], flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="20 releases per eps")
    parser.add_argument("--reps", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--part", choices=("coin", "mcmc", "all"), default="all", help="which benchmark to run"
    )
    parser.add_argument(
        "--no-baseline", action="store_true", help="mcmc: time the current samplers only"
    )
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    if args.part in ("coin", "all"):
        reps = 20 if args.quick else args.reps
        _write(OUT / "noise_aware.csv", run(reps, (0.01, 0.1, 1.0), seed=args.seed))
    if args.part in ("mcmc", "all"):
        rows = run_mcmc(seed=args.seed, baseline=not args.no_baseline)
        _write(OUT / "noise_aware_mcmc.csv", rows)


def _write(path: Path, rows: list[dict[str, object]]) -> None:
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
