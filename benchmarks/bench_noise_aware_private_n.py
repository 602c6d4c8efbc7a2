"""Noise-aware posteriors of releases whose n is private: time and coverage (user level).

Run: ``python benchmarks/bench_noise_aware_private_n.py [--reps R] [--runs K]``; writes
``benchmarks/results/noise_aware_private_n.csv`` (time) and
``noise_aware_private_n_coverage.csv`` (coverage).

**Time.** The CLI's default release (bundled RAND HIE data, ``hlthp``, Beta(1, 1), one
person = up to 5 rows, add/remove one user, n private) at eps 0.05 and 1:
``rel.noise_aware_posterior().interval(0.9)``, process CPU time per call (median of
``--runs`` calls, the compiled kernels already loaded). Before this change the call was
refused (no number). Side by side, as the baseline of the ratio, the same data at record
level with substitute neighbours (n public: the fast ladder mixture of issue 10; one call
for the Dirichlet, whose substitute structured sum takes seconds at this n).
Also the Dirichlet (``health``, 4 categories) and the Normal mean (``mdvis`` in [0, 20])
at the same unit.

**Coverage.** theta0 = the bundled share of ``hlthp``; each run redraws ``hlthp`` as
Bernoulli(theta0) for every row (the model's sampling law; the person structure and
n = 20,190 kept), releases at user level with seeded noise (``rng=run``) and records
whether the central 90% interval (noise-aware and naive) covers theta0; binomial standard
error sqrt(0.09 / R). ``fixed-data`` rows keep the bundled column itself and ask about
its share (only the noise varies).
"""

from __future__ import annotations

import argparse
import csv
import math
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

import dpbayes as dpb
from dpbayes.data import Table, load_bundled
from dpbayes.models import BetaBernoulli, DirichletCategorical, NormalMean

OUT = Path(__file__).parent / "results"
CATS = ["excellent", "good", "fair", "poor"]


def _cpu(fn: Any, runs: int) -> float:
    times = []
    for _ in range(runs):
        t = time.process_time()
        fn()
        times.append(time.process_time() - t)
    return statistics.median(times)


def timing(runs: int) -> list[dict[str, Any]]:
    df = load_bundled("randhie")
    user = Table(df, user_column="person", max_rows_per_user=5)
    cases = [
        ("beta-bernoulli", BetaBernoulli(), "hlthp", {}),
        ("dirichlet", DirichletCategorical(alpha=[1.0] * 4, categories=CATS), "health", {}),
        (
            "normal-mean",
            NormalMean(prior_mean=0, prior_sd=10, noise_sd=5, lower=0, upper=20),
            "mdvis",
            {},
        ),
    ]
    rows = []
    for name, model, column, kw in cases:
        for eps in (0.05, 1.0):
            rel = dpb.release(
                model, user, column=column, mechanism="laplace", epsilon=eps, rng=1, **kw
            )
            base = dpb.release(model, df, column=column, mechanism="laplace", epsilon=eps, rng=1)

            def aware(r: Any = rel) -> None:
                r.noise_aware_posterior().interval(0.9)

            def public(r: Any = base) -> None:
                r.noise_aware_posterior().interval(0.9)

            aware()  # load the compiled kernels
            t_user = _cpu(aware, runs)
            # the substitute Dirichlet is the O(m n^2) structured sum: seconds at this n
            t_rec = _cpu(public, runs if name == "beta-bernoulli" else 1)
            rows.append(
                {
                    "model": name,
                    "eps": eps,
                    "user_level_cpu_s": f"{t_user:.4f}",
                    "record_level_substitute_cpu_s": f"{t_rec:.4f}",
                    "ratio": f"{t_user / max(t_rec, 1e-9):.1f}",
                    "before": "refused (n private)",
                }
            )
            print(rows[-1])
    return rows


def coverage(reps: int) -> list[dict[str, Any]]:
    df = load_bundled("randhie")[["person", "hlthp"]].copy()
    theta0 = float(df["hlthp"].mean())
    gen = np.random.default_rng(2024)
    rows = []
    for design in ("resampled", "fixed-data"):
        for eps in (0.05, 1.0):
            hits = {"noise-aware": 0, "naive": 0}
            for run in range(reps):
                data = df
                if design == "resampled":
                    data = df.copy()
                    data["hlthp"] = (gen.random(len(df)) < theta0).astype(int)
                rel = dpb.release(
                    BetaBernoulli(),
                    Table(data, user_column="person", max_rows_per_user=5),
                    column="hlthp",
                    mechanism="laplace",
                    epsilon=eps,
                    rng=run,
                )
                truth = theta0 if design == "resampled" else float(data["hlthp"].mean())
                for key, post in (
                    ("noise-aware", rel.noise_aware_posterior()),
                    ("naive", rel.posterior),
                ):
                    lo, hi = post.interval(0.9)
                    hits[key] += lo <= truth <= hi
            se = math.sqrt(0.09 / reps)
            row = {
                "design": design,
                "eps": eps,
                "runs": reps,
                "coverage90_noise_aware": hits["noise-aware"] / reps,
                "coverage90_naive": hits["naive"] / reps,
                "se": f"{se:.4f}",
            }
            rows.append(row)
            print(row)
    return rows


def _write(path: Path, rows: list[dict[str, Any]]) -> None:
    OUT.mkdir(exist_ok=True)
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--reps", type=int, default=400, help="releases per coverage cell")
    p.add_argument("--runs", type=int, default=7, help="timed calls per case")
    args = p.parse_args()
    _write(OUT / "noise_aware_private_n.csv", timing(args.runs))
    _write(OUT / "noise_aware_private_n_coverage.csv", coverage(args.reps))


if __name__ == "__main__":
    main()
