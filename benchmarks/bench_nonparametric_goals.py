"""The goals of paper 001's DP mixture, measured cell by cell with the experiment's own code.

``dpbayes experiment nonparametric`` runs every part (Laplace and Gaussian grids, SBC,
mixing, real data) in one go; this script runs only the Laplace grid of its synthetic
part, one (eps, n) cell at a time, so that a grid can be spread over a time budget and
partial results survive. Each cell calls :func:`dpbayes.experiments.nonparametric.synthetic`
(same truth, mechanism, estimators, W1 and band checks, same sampler settings as the full
experiment: 2 chains x 600 draws after 300 warm-up sweeps) with its own seeded generator,
and appends its rows to

    benchmarks/results/nonparametric_goals_w1.csv        (one row per run and method)
    benchmarks/results/nonparametric_goals_coverage.csv  (one row per run: bands, ESS)

``--summary`` prints the experiment's summary table (median W1 per method, wins of the DP
mixture against the NPMLE, pointwise and simultaneous coverage) of everything appended.

    python benchmarks/bench_nonparametric_goals.py --eps 0.5 1 2 --n 1000 3000 10000 --reps 10
    python benchmarks/bench_nonparametric_goals.py --summary

A second batch of runs needs another ``--seed`` (``--first-rep`` numbers its runs on).
"""

from __future__ import annotations

import argparse
import csv
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from dpbayes.experiments import nonparametric as exp
from dpbayes.nonparametric import ConvergenceWarning
from dpbayes.privacy.noise import noise_source

RESULTS = Path(__file__).resolve().parent / "results"
W1_CSV = RESULTS / "nonparametric_goals_w1.csv"
COV_CSV = RESULTS / "nonparametric_goals_coverage.csv"


def cell_seed(seed: int, eps: float, n: int) -> int:
    return 1_000_003 * seed + 10_007 * round(100 * eps) + n


def _append(path: Path, rows: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    new = not path.exists()
    with path.open("a", newline="") as fh:
        wr = csv.DictWriter(fh, fieldnames=list(rows[0]))
        if new:
            wr.writeheader()
        wr.writerows(rows)


def _read(path: Path) -> list[dict[str, Any]]:
    with path.open(newline="") as fh:
        rows: list[dict[str, Any]] = list(csv.DictReader(fh))
    for r in rows:
        for k, v in r.items():
            if k in ("mechanism", "method"):
                continue
            r[k] = int(v) if k in ("n", "rep", "simultaneous_covered") else float(v)
    return rows


def run_cell(eps: float, n: int, reps: int, seed: int, first_rep: int) -> None:
    gen = noise_source(cell_seed(seed, eps, n)).generator()
    fit_kw: dict[str, Any] = {**exp.FULL["fit"], "progress": False}
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        rows, cov_rows, _ = exp.synthetic(
            "laplace", gen, epsilons=(eps,), ns=(n,), reps=reps, fit_kw=fit_kw
        )
    for r in rows + cov_rows:
        r["rep"] += first_rep
        r["seed"] = seed
    _append(W1_CSV, rows)
    _append(COV_CSV, cov_rows)
    w = {m: np.median([r["w1"] for r in rows if r["method"] == m]) for m in exp.METHODS}
    print(
        f"eps={eps:g} n={n}: {reps} runs in {time.perf_counter() - t0:.0f} s; median W1 "
        + ", ".join(f"{m} {v:.4f}" for m, v in w.items())
        + f"; pointwise coverage {np.mean([c['pointwise_coverage'] for c in cov_rows]):.3f}",
        flush=True,
    )


def summary() -> None:
    table = exp.summarise(_read(W1_CSV), _read(COV_CSV))
    cov = _read(COV_CSV)
    keys = list(table[0])
    print(",".join([*keys, "median_ess_mean_per_draw"]))
    for row in table:
        sel = [c for c in cov if (c["epsilon"], c["n"]) == (row["epsilon"], row["n"])]
        ess = round(float(np.median([c["ess_mean_per_draw"] for c in sel])), 3)
        print(",".join([*(str(row[k]) for k in keys), str(ess)]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--eps", type=float, nargs="+", default=[0.5, 1.0, 2.0])
    parser.add_argument("--n", type=int, nargs="+", default=[1000, 3000, 10000])
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--first-rep", type=int, default=0, help="number of the first run")
    parser.add_argument("--summary", action="store_true", help="summarise the appended runs")
    args = parser.parse_args()
    if args.summary:
        summary()
        return
    for n in args.n:
        for eps in args.eps:
            run_cell(eps, n, args.reps, args.seed, args.first_rep)


if __name__ == "__main__":
    main()
