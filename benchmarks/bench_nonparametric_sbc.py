"""Simulation-based calibration of paper 001's DP mixture, one replicate at a time.

Each replicate draws alpha, the base's (mu, sigma), P ~ DP(alpha, P0), X_i ~ P and the
Laplace-privatised Z_i from the model's prior predictive and fits the default sampler with
the experiment's settings (2 chains x 600 draws after 300 warm-up sweeps), through
:func:`dpbayes.experiments.nonparametric.sbc` (one row per replicate and check point:
band coverage and the rank of the true F(t) among 99 posterior draws). Replicate k of
``--seed s`` is the experiment's SBC replicate of seed 1000 s + k, so batches with other
seeds are new replicates. Rows are rewritten after every replicate to

    benchmarks/results/nonparametric_sbc_eps{eps}_n{n}_seed{s}.csv

``--prior-truth SEED`` instead measures frequentist coverage at one fixed truth drawn from
the prior (the first draw whose CDF lies strictly between 0.001 and 0.999 at 12 or more
check points), over ``--reps`` data sets of size ``--n``: how coverage at a fixed truth
depends on the truth. ``--summary FILE...`` prints
:func:`~dpbayes.experiments.nonparametric.summarise_sbc` of the files together (coverage,
replicate-level rank test, middle-half fraction).

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

import numpy as np

from dpbayes.experiments import nonparametric as exp
from dpbayes.nonparametric import ConvergenceWarning, DPMixture
from dpbayes.nonparametric.calibration import _cdf as true_cdf
from dpbayes.nonparametric.calibration import draw_prior_p

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


def prior_truth(eps: float, n: int, reps: int, seed: int) -> None:
    """Coverage of the bands at the inner check points of one prior draw of P, fixed."""
    mech = exp.mechanism("laplace", eps)
    model = DPMixture(mechanism=mech)
    g = np.random.default_rng(seed)
    while True:
        atoms, w, alpha, mu, sigma = draw_prior_p(model, g)
        truth = true_cdf(atoms, w, exp.CHECK)
        inner = (truth > 1e-3) & (truth < 1 - 1e-3)
        if inner.sum() >= 12:
            break
    print(
        f"truth: alpha {alpha:.2f}, mu {mu:.2f}, sigma {sigma:.2f}, "
        f"{int((w > 0.01).sum())} atoms above 1%, {int(inner.sum())} inner check points"
    )
    pw, sim, zr = [], [], []
    fit_kw: dict[str, Any] = {**exp.FULL["fit"], "progress": False, "diagnostics": False}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for k in range(reps):
            u = g.random(n) * w.sum()
            x = atoms[np.searchsorted(np.cumsum(w), u, side="right").clip(0, w.size - 1)]
            fit = model.fit(mech.privatize(x, rng=g).values, rng=g, **fit_kw)
            lo, hi = fit.cdf_band(exp.CHECK, 0.95)
            slo, shi = fit.cdf_band(exp.CHECK, 0.95, kind="simultaneous")
            d = fit.cdf_draws(exp.CHECK).reshape(-1, exp.CHECK.size)
            pw.append(float(((lo <= truth) & (truth <= hi))[inner].mean()))
            sim.append(bool(np.all((slo <= truth) & (truth <= shi))))
            err = (d.mean(0) - truth) / np.maximum(d.std(0), 1e-12)
            zr.append(float(np.sqrt(np.mean(err[inner] ** 2))))
            print(k, round(pw[-1], 3), sim[-1], round(zr[-1], 2), flush=True)
    print(
        f"pointwise (inner points) {np.mean(pw):.3f}, simultaneous {sum(sim)}/{reps}, "
        f"RMS of error/sd {np.sqrt(np.mean(np.square(zr))):.2f}"
    )


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
    parser.add_argument("--prior-truth", type=int, metavar="SEED", help="one prior truth, fixed")
    args = parser.parse_args()
    if args.summary:
        summary(args.summary)
        return
    if args.prior_truth is not None:
        prior_truth(args.eps, args.n, args.reps, args.prior_truth)
        return
    run(args.eps, args.n, args.reps, args.seed)


if __name__ == "__main__":
    main()
