"""Exact posterior samplers at the numerical edges: acceptance rates and speed (issue 14).

* Acceptance rate of the k >= 3 trimmed-Dirichlet envelopes (the better of the flat
  levels) and of the stick-breaking box
  over :func:`dpbayes.audit.sampling_edges.dirichlet_edge_grid`, and of the regression
  ball's lattice sampler over ``ball_edge_grid`` and a wider regression grid (d up to
  20, n up to 1e5, eps 0.01 to 100, posteriors far outside the ball), with its time per
  draw (each case draws for up to a few seconds).
* Speed, as ratios to the ``laplace`` release of the same model and data (the same
  pipeline: statistics, plan, noise) in this process: one ``sampling`` release of naive
  Bayes with binary features and with 5-category features.

Writes benchmarks/results/bench_sampling_acceptance.csv and bench_sampling_speed.csv.
Run: ``python benchmarks/bench_sampling.py`` (``--quick`` for a smaller grid).
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
import pandas as pd

from dpbayes.audit.sampling_edges import ball_edge_grid, dirichlet_edge_grid
from dpbayes.models.bayes_net import NaiveBayes
from dpbayes.models.linear_regression import BayesianLinearRegression
from dpbayes.privacy.noise import SimulatedNoise
from dpbayes.release import release
from dpbayes.release.bayes_net._sampling_kernels import trimmed_dirichlet_box
from dpbayes.release.bayes_net.trimmed_dirichlet import FLAT_LEVELS, envelope, propose
from dpbayes.release.regression.lattice_gaussian import LatticeGaussianBall
from dpbayes.release.regression.mechanism import sampling_noise_variance

RESULTS = Path(__file__).parent / "results"


def dirichlet_rates(quick: bool) -> list[dict[str, Any]]:
    src = SimulatedNoise(np.random.default_rng(0))
    rows = []
    grid = dirichlet_edge_grid()
    for a, p in grid[:: 4 if quick else 1]:
        rate = max(
            propose(envelope(a, p, level), src.uniform((20000, 2 * a.size + 2)))[1].mean()
            for level in FLAT_LEVELS
        )
        order = np.argsort(a, kind="stable")
        sa = np.ascontiguousarray(a[order])
        u = src.uniform((200, a.size - 1))
        box = np.mean([trimmed_dirichlet_box(sa, p, u[i : i + 1])[1] == 0 for i in range(200)])
        rows.append(
            {
                "sampler": "trimmed-dirichlet",
                "case": f"k={a.size} alpha={np.round(a, 3).tolist()} p={p:.4g}",
                "envelope": float(rate),
                "box": float(box),
                "best": float(max(rate, box)),
            }
        )
    return rows


def ball_rates(quick: bool) -> list[dict[str, Any]]:
    src = SimulatedNoise(np.random.default_rng(1))
    cases = [(p, b, w, "ball_edge_grid") for p, b, w in ball_edge_grid()]
    g = np.random.default_rng(2)
    for d in (2, 5, 20):
        for lam0 in (1e-3, 1.0, 1e3):
            for n in (10, 2000, 100000):
                for eps in (0.01, 1.0, 100.0):
                    for wb in (0.1, 1.0, 10.0):
                        if quick and (lam0 != 1.0 or wb != 0.1):
                            continue
                        model = BayesianLinearRegression(
                            prior_precision=lam0,
                            noise_variance=1e-6,
                            feature_bound=1.0,
                            label_bound=1.0,
                            weight_bound=wb,
                        )
                        s2 = sampling_noise_variance(model, eps)
                        x = g.normal(size=(n, d))
                        x /= np.maximum(1.0, np.linalg.norm(x, axis=1))[:, None]
                        y = np.clip(x @ np.ones(d), -1, 1)
                        prec = lam0 * np.eye(d) + x.T @ x / s2
                        name = f"d={d} lambda={lam0:g} n={n} eps={eps:g} W={wb:g}"
                        cases.append((prec, x.T @ y / s2, wb, name))
    rows = []
    budget = 0.5 if quick else 3.0
    for prec, lin, w, name in cases:
        sampler = LatticeGaussianBall(prec, lin, w)
        start, got = time.perf_counter(), 0
        while time.perf_counter() - start < budget and got < 200:
            try:
                sampler.draw(src, max_proposals=20000)
                got += 1
            except RuntimeError:
                break
        elapsed = time.perf_counter() - start
        rows.append(
            {
                "sampler": "gaussian-ball-lattice",
                "case": name if isinstance(name, str) else f"edge d={lin.size} W={w:g}",
                "envelope": got / sampler.proposals,
                "box": float("nan"),
                "best": got / sampler.proposals,
                "ms_per_draw": 1000 * elapsed / got if got else float("inf"),
            }
        )
    return rows


def timed(fn: Any, repeats: int) -> float:
    out = []
    for _ in range(repeats):
        t = time.process_time()
        fn()
        out.append(time.process_time() - t)
    return statistics.median(out)


def speed(repeats: int) -> list[dict[str, Any]]:
    g = np.random.default_rng(3)
    rows = []
    for k, d, n in ((2, 10, 20000), (2, 30, 20000), (5, 10, 20000)):
        y = g.integers(0, 2, n)
        cols: dict[str, Any] = {"y": y}
        for j in range(d):
            cols[f"x{j}"] = g.integers(0, k, n)
        model = NaiveBayes("y", [0, 1], {f"x{j}": list(range(k)) for j in range(d)})
        df = pd.DataFrame(cols)
        base = timed(
            lambda m=model, f=df: release(m, f, mechanism="laplace", epsilon=1.0, rng=0), repeats
        )
        for eps in (0.1, 1.0, 10.0):
            t = timed(
                lambda m=model, f=df, e=eps: release(m, f, mechanism="sampling", epsilon=e, rng=0),
                repeats,
            )
            rows.append(
                {
                    "categories": k,
                    "features": d,
                    "n": n,
                    "epsilon": eps,
                    "laplace_release_s": base,
                    "sampling_release_s": t,
                    "ratio": t / base if base > 0 else math.inf,
                }
            )
    # linear regression: the lattice posterior draw (secure source) against the ssp release
    # of the same model and data
    for d, wb in ((2, 2.0), (10, 2.0), (10, 0.1)):
        x = g.uniform(-1, 1, (20000, d)) / math.sqrt(d)
        y = np.clip(x @ np.ones(d) + g.normal(scale=0.1, size=20000), -1, 1)
        reg = BayesianLinearRegression(
            feature_bound=1.0, label_bound=1.0, weight_bound=wb, noise_variance=0.01
        )
        base = timed(lambda m=reg, f=(x, y): release(m, f, mechanism="ssp", epsilon=1.0), repeats)
        for eps in (0.1, 1.0, 10.0):
            t = timed(
                lambda m=reg, f=(x, y), e=eps: release(m, f, mechanism="sampling", epsilon=e),
                repeats,
            )
            rows.append(
                {
                    "categories": f"linear regression W={wb:g}",
                    "features": d,
                    "n": 20000,
                    "epsilon": eps,
                    "laplace_release_s": base,
                    "sampling_release_s": t,
                    "ratio": t / base if base > 0 else math.inf,
                }
            )
    return rows


def write(path: Path, rows: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as fh:
        names = list(dict.fromkeys(k for r in rows for k in r))
        w = csv.DictWriter(fh, fieldnames=names, restval="")
        w.writeheader()
        w.writerows(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    rates = dirichlet_rates(args.quick) + ball_rates(args.quick)
    write(RESULTS / "bench_sampling_acceptance.csv", rates)
    for sampler in ("trimmed-dirichlet", "gaussian-ball-lattice"):
        sub = [r for r in rates if r["sampler"] == sampler]
        worst = min(sub, key=lambda r: r["best"])
        print(
            f"{sampler}: {len(sub)} cases, lowest acceptance {worst['best']:.4g} "
            f"({worst['case']}), median {statistics.median(r['best'] for r in sub):.3g}"
        )
    ball = [r for r in rates if r["sampler"] == "gaussian-ball-lattice"]
    slow = max(ball, key=lambda r: r["ms_per_draw"])
    print(
        f"gaussian-ball-lattice: median {statistics.median(r['ms_per_draw'] for r in ball):.3g}"
        f" ms per draw, slowest {slow['ms_per_draw']:.4g} ms ({slow['case']})"
    )
    sp = speed(3 if args.quick else 7)
    write(RESULTS / "bench_sampling_speed.csv", sp)
    for r in sp:
        base = "ssp" if "regression" in str(r["categories"]) else "laplace"
        print(
            f"k={r['categories']} d={r['features']} n={r['n']} eps={r['epsilon']:g}: "
            f"sampling {r['sampling_release_s']:.4f}s = {r['ratio']:.2f} x {base} release"
        )


if __name__ == "__main__":
    main()
