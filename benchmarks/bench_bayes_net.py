"""Speed of the Bayesian-network releases (paper 004) against the exact posterior.

For naive Bayes models with d binary features and n records, times (median of repeats,
seconds of CPU time in this process) the exact posterior (the baseline), Algorithm 1
(laplace), Algorithm 2 (fourier), posterior sampling and the MAP mechanism, each as a
ratio to the baseline; and, when diffprivlib imports, the fit of its GaussianNB and of
PrivateNaiveBayes on the same data. Writes benchmarks/results/bench_bayes_net.csv.

Run: ``python benchmarks/bench_bayes_net.py`` (optionally ``--quick``).
"""

from __future__ import annotations

import argparse
import csv
import statistics
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dpbayes.estimators import PrivateNaiveBayes
from dpbayes.models.bayes_net import NaiveBayes
from dpbayes.privacy.noise import noise_source
from dpbayes.release import release
from dpbayes.release.bayes_net import fourier, laplace, sampling  # noqa: F401

OUT = Path(__file__).parent / "results" / "bench_bayes_net.csv"


def timed(fn: Callable[[], Any], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t = time.process_time()
        fn()
        times.append(time.process_time() - t)
    return statistics.median(times)


def data(n: int, d: int, seed: int) -> tuple[NaiveBayes, pd.DataFrame]:
    gen = noise_source(seed).generator()
    y = gen.integers(0, 2, n)
    cols = {"y": y}
    for j in range(d):
        cols[f"x{j}"] = (gen.random(n) < np.where(y == 1, 0.7, 0.35)).astype(int)
    model = NaiveBayes("y", [0, 1], {f"x{j}": [0, 1] for j in range(d)})
    return model, pd.DataFrame(cols)


def bench_size(n: int, d: int, repeats: int) -> dict[str, Any]:
    model, df = data(n, d, 0)
    stats_ = model.statistics(df)
    base = timed(lambda: model.posterior_from(stats_), repeats)
    stat_time = timed(lambda: model.statistics(df), repeats)
    entry: dict[str, Any] = {
        "n": n,
        "features": d,
        "exact_posterior_s": base,
        "statistics_s": stat_time,
    }
    for mech in ("laplace", "fourier", "sampling", "map"):
        t = timed(lambda k=mech: release(model, df, mechanism=k, epsilon=1.0, rng=1), repeats)
        entry[f"{mech}_s"] = t
        entry[f"{mech}_ratio_to_statistics_plus_posterior"] = t / (stat_time + base)
    entry["laplace_secure_s"] = timed(
        lambda: release(model, df, mechanism="laplace", epsilon=1.0), repeats
    )
    x = df.drop(columns="y").to_numpy()
    yv = df["y"].to_numpy()
    entry["PrivateNaiveBayes_fit_s"] = timed(
        lambda: PrivateNaiveBayes(
            epsilon=1.0, categories=[0, 1], classes=[0, 1], random_state=0
        ).fit(x, yv),
        repeats,
    )
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from diffprivlib.models import GaussianNB

        def dpl() -> None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                GaussianNB(epsilon=1.0, bounds=(np.zeros(d), np.ones(d)), random_state=0).fit(
                    x.astype(float), yv
                )

        entry["diffprivlib_GaussianNB_fit_s"] = timed(dpl, repeats)
    except Exception as exc:  # not installed, or does not import with this scikit-learn
        entry["diffprivlib_GaussianNB_fit_s"] = f"n/a ({type(exc).__name__})"
    return entry


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller sizes, fewer repeats")
    args = ap.parse_args()
    sizes = (
        [(1_000, 10), (20_000, 10)]
        if args.quick
        else [(1_000, 10), (20_000, 10), (100_000, 10), (20_000, 30), (20_000, 60)]
    )
    repeats = 3 if args.quick else 7
    rows = []
    for n, d in sizes:
        entry = bench_size(n, d, repeats)
        rows.append(entry)
        print(entry)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    with OUT.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
