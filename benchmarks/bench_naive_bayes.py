"""PrivateNaiveBayes.fit against diffprivlib's GaussianNB.fit on breast cancer, side by side.

    python benchmarks/bench_naive_bayes.py [--rounds 15] [--fits 20]
        [--diffprivlib-python PATH] [--out benchmarks/results/bench_naive_bayes.csv]

The data and split of ``dpbayes experiment naive-bayes``: scikit-learn's breast cancer
set, a 70/30 split (the training 398 x 30 part is fitted), features binarised at the
medians for dpbayes (Bernoulli naive Bayes, Algorithm 1, eps = 1) and raw with the data's
min/max as public bounds for diffprivlib (GaussianNB, eps = 1). Both fit with their
secure default noise; dpbayes also seeded (``random_state=0``).

diffprivlib 0.6.6 does not import with scikit-learn >= 1.6; it lives in a separate
environment made from the ``bench`` extra (docs/bayes-net.md, "Experiments"). Run this
script with that environment's Python (dpbayes installed there), or pass that Python as
``--diffprivlib-python``: its fits then run in a subprocess, in the same rounds as the
dpbayes fits. Each round times ``--fits`` fits of each library (wall clock), the order
alternating between rounds; per-fit medians over the rounds, their spread and the ratio
are reported with the load average. The goal (issue 18) is dpbayes <= 1.5x diffprivlib.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

OUT = Path(__file__).resolve().parent / "results" / "bench_naive_bayes.csv"


def split_data() -> dict[str, np.ndarray]:
    from sklearn.datasets import load_breast_cancer

    from dpbayes.privacy.noise import noise_source

    x, y = load_breast_cancer(return_X_y=True)
    order = noise_source(0).generator().permutation(len(y))
    tr = order[: int(0.7 * len(y))]
    return {
        "binary": (x > np.median(x, axis=0)).astype(int)[tr],
        "raw": x[tr],
        "y": y.astype(int)[tr],
        "lower": x.min(axis=0),
        "upper": x.max(axis=0),
    }


def per_fit(fn: Callable[[], Any], fits: int) -> float:
    t0 = time.perf_counter()
    for _ in range(fits):
        fn()
    return (time.perf_counter() - t0) / fits


def diffprivlib_fit(data: dict[str, np.ndarray]) -> Callable[[], Any]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from diffprivlib.models import GaussianNB

    def fit() -> Any:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return GaussianNB(epsilon=1.0, bounds=(data["lower"], data["upper"])).fit(
                data["raw"], data["y"]
            )

    return fit


def worker(path: str, fits: int) -> None:
    """Subprocess mode: one round of diffprivlib fits on the saved data; prints seconds/fit."""
    with np.load(path) as f:
        data = {k: f[k] for k in f.files}
    fit = diffprivlib_fit(data)
    fit()  # warm-up (imports, caches)
    print(json.dumps(per_fit(fit, fits)))


class Subprocess:
    """diffprivlib fits in another interpreter, one round per call."""

    def __init__(self, python: str, data: dict[str, np.ndarray], fits: int) -> None:
        self.dir = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.dir.name, "data.npz")
        np.savez(self.path, **data)
        self.argv = [python, __file__, "--worker", self.path, "--fits", str(fits)]

    def __call__(self) -> float:
        proc = subprocess.run(self.argv, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"diffprivlib worker failed: {proc.stderr[-800:]}")
        return float(json.loads(proc.stdout.strip().splitlines()[-1]))


def load_average() -> str:
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--fits", type=int, default=20, help="fits per library per round")
    ap.add_argument("--diffprivlib-python", help="Python of an environment with diffprivlib")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args.worker, args.fits)
        return

    from dpbayes.estimators import PrivateNaiveBayes

    data = split_data()
    fits = args.fits

    def ours(seed: Any) -> Callable[[], Any]:
        def fit() -> Any:
            return PrivateNaiveBayes(
                epsilon=1.0, categories=[0, 1], classes=[0, 1], random_state=seed
            ).fit(data["binary"], data["y"])

        return fit

    if args.diffprivlib_python:
        theirs_round: Callable[[], float] = Subprocess(args.diffprivlib_python, data, fits)
        where = f"subprocess ({args.diffprivlib_python})"
    else:
        theirs = diffprivlib_fit(data)  # ImportError: pass --diffprivlib-python
        theirs()
        theirs_round = lambda: per_fit(theirs, fits)  # noqa: E731
        where = "this process"
    variants: dict[str, Callable[[], float]] = {
        "diffprivlib GaussianNB.fit (secure)": theirs_round,
        "dpbayes PrivateNaiveBayes.fit (secure)": lambda: per_fit(ours(None), fits),
        "dpbayes PrivateNaiveBayes.fit (seeded)": lambda: per_fit(ours(0), fits),
    }
    first_call = time.perf_counter()
    ours(None)()
    first_call = time.perf_counter() - first_call
    times: dict[str, list[float]] = {k: [] for k in variants}
    load_before = load_average()
    names = list(variants)
    for r in range(args.rounds):
        for name in names if r % 2 == 0 else names[::-1]:
            times[name].append(variants[name]())
    load_after = load_average()
    base = statistics.median(times[names[0]])
    rows = []
    for name in names:
        v = sorted(times[name])
        med = statistics.median(v)
        rows.append(
            {
                "variant": name,
                "rounds": len(v),
                "fits_per_round": fits,
                "median_ms_per_fit": round(1e3 * med, 3),
                "min_ms": round(1e3 * v[0], 3),
                "max_ms": round(1e3 * v[-1], 3),
                "ratio_to_diffprivlib": round(med / base, 3),
                "load_before": load_before,
                "load_after": load_after,
            }
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    print(f"training set {data['binary'].shape}; diffprivlib runs in {where}")
    print(f"first dpbayes fit in this process (imports included): {first_call:.3f} s")
    print(f"load average: before {load_before}; after {load_after}")
    for row in rows:
        print(
            f"{row['variant']:42s} {row['median_ms_per_fit']:8.3f} ms/fit "
            f"[{row['min_ms']:.3f} .. {row['max_ms']:.3f}]  {row['ratio_to_diffprivlib']}x"
        )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    sys.exit(main())
