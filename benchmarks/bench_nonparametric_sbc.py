"""Simulation-based calibration of paper 001's DP mixture, one replicate at a time.

Each replicate draws alpha, the base's (mu, sigma), P ~ DP(alpha, P0), X_i ~ P and the
Laplace-privatised Z_i from the model's prior predictive and fits the default sampler with
the experiment's settings (2 chains x 600 draws after 300 warm-up sweeps), through
:func:`dpbayes.experiments.nonparametric.sbc` (one row per replicate and check point:
band coverage and the rank of the true F(t) among 99 posterior draws). Replicate k of
``--seed s`` is the experiment's SBC replicate of seed 1000 s + k, so batches with other
seeds are new replicates. Rows are rewritten after every replicate to

    benchmarks/results/nonparametric_sbc_eps{eps}_n{n}_seed{s}.csv

and ``--summary FILE...`` prints :func:`~dpbayes.experiments.nonparametric.summarise_sbc`
of the files together (coverage, replicate-level rank test, middle-half fraction).

    python benchmarks/bench_nonparametric_sbc.py --eps 1 --n 1000 --reps 80 --seed 1
    python benchmarks/bench_nonparametric_sbc.py --summary FILE [FILE ...]
"""

from __future__ import annotations

import argparse
import csv
import time
import warnings
from pathlib import Path
from typing import Any

from dpbayes.experiments import nonparametric as exp
from dpbayes.nonparametric import ConvergenceWarning

RESULTS = Path(__file__).resolve().parent / "results"


def run(eps: float, n: int, reps: int, seed: int) -> Path:
    path = RESULTS / f"nonparametric_sbc_eps{eps:g}_n{n}_seed{seed}.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    fit_kw: dict[str, Any] = {**exp.FULL["fit"], "progress": False, "diagnostics": False}
    rows: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for k in range(reps):
            for row in exp.sbc("laplace", eps, n, 1, fit_kw, 1000 * seed + k):
                rows.append({**row, "rep": 1000 * seed + k})
            with path.open("w", newline="") as fh:
                wr = csv.DictWriter(fh, fieldnames=list(rows[0]))
                wr.writeheader()
                wr.writerows(rows)
    print(f"eps={eps:g} n={n}: {reps} replicates in {time.perf_counter() - t0:.0f} s -> {path}")
    return path


def _number(value: str) -> Any:
    try:
        return int(value)
    except ValueError:
        return float(value)


def summary(paths: list[str]) -> None:
    rows: list[dict[str, Any]] = []
    for p in paths:
        with open(p, newline="") as fh:
            for r in csv.DictReader(fh):
                rows.append({k: v if k == "mechanism" else _number(v) for k, v in r.items()})
    for cell in exp.summarise_sbc(rows):
        print(cell)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--eps", type=float, default=1.0)
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--reps", type=int, default=40)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--summary", nargs="+", metavar="FILE", help="summarise these files")
    args = parser.parse_args()
    if args.summary:
        summary(args.summary)
        return
    run(args.eps, args.n, args.reps, args.seed)


if __name__ == "__main__":
    main()
