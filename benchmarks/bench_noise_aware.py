"""Noise-aware Beta-Binomial posterior (issue 10) against Bernstein & Sheldon's Gibbs sampler.

Run: ``python benchmarks/bench_noise_aware.py [--quick] [--reps R]``; writes
``benchmarks/results/noise_aware.csv``.

Setting (the issue's): Beta(1, 1) prior, N = 1000, theta drawn from the prior, the true
count s ~ Bin(N, theta), the dpbayes Laplace release of s (scale 1/eps, truncated to
[0, N]), eps in {0.01, 0.1, 1}. For each release, in the same process:

* **exact** (dpbayes): ``noise_aware_posterior(rel).interval(0.9)``, the exact mixture
  over the true count (``dpbayes.release.noise_aware_coin``: pruned ladder mixture,
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
from pathlib import Path

import numpy as np
from scipy import special

from dpbayes.models import BetaBernoulli, CountStatistics
from dpbayes.privacy import Neighbours
from dpbayes.privacy.noise import noise_source
from dpbayes.release.base import Release
from dpbayes.release.noise_aware import noise_aware_posterior
from dpbayes.release.parameters import plan_counts

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

            fns = {"exact": exact, "gibbs": gibbs, "naive": naive}
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="20 releases per eps")
    parser.add_argument("--reps", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    reps = 20 if args.quick else args.reps
    rows = run(reps, (0.01, 0.1, 1.0), seed=args.seed)
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / "noise_aware.csv"
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
