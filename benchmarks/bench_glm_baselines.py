"""Private regressions side by side: dpbayes, diffprivlib and d3p on the same splits.

    PYTHONPATH=src BENCH_PYTHON benchmarks/bench_glm_baselines.py
        [--eps 0.1 1 10] [--reps 10] [--seed 0] [--d3p-python PATH]
        [--d3p-settings JSON] [--datasets NAME ...] [--out benchmarks/results/glm_baselines.csv]

BENCH_PYTHON: a Python with dpbayes and, for diffprivlib, the ``bench`` extra
(diffprivlib 0.6.6 needs scikit-learn < 1.6). d3p (DP variational inference in NumPyro)
needs jax <= 0.4.25, so it runs in its own environment: ``--d3p-python`` names that
Python, which runs ``benchmarks/baselines/d3p_glm.py`` (no dpbayes import) on a JSON of
the splits and public bounds written here; without it d3p is skipped with the reason.

Data sets and splits (70/30, ``--reps`` per data set, from one seeded generator), as in
``dpbayes experiment glm`` (its loaders and fits are reused):

* breast cancer and RAND HIE any visit: test accuracy of dpbayes'
  ``PrivateBayesianLogisticRegression`` (SSP, Gaussian at delta = 1e-5 and Laplace),
  diffprivlib's ``LogisticRegression`` (``data_norm`` = sqrt(d) on the features scaled
  to [-1, 1] by the public bounds), d3p's DPVI logistic regression (delta = 1e-5), and
  scikit-learn's non-private ``LogisticRegression`` on the same scaled features;
* diabetes: test MSE over least squares of dpbayes' ``PrivateBayesianLinearRegression``
  (SSP Gaussian, SSP Laplace, posterior sampling), diffprivlib's ``LinearRegression``
  (the same bounds) and d3p's DPVI linear regression.

Writes one row per fit (dataset, method, library, epsilon, delta, rep, metric, value,
seconds; d3p's rows also have fit and calibration seconds and its settings) to ``--out``,
and the medians per method x dataset x eps to ``<out stem>_summary.csv``; prints the
summary as a Markdown table. With d3p, also the split-by-split comparison of dpbayes'
Gaussian SSP release with d3p (:func:`paired`) to ``<out stem>_paired.csv`` and as a
table. Seconds are wall time of fit + predict on this machine;
d3p's include its noise calibration (``approximate_sigma``), done once per data set and
eps and counted in every fit, as a user fitting once pays it.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
OUT = HERE / "results" / "glm_baselines.csv"
D3P_SCRIPT = HERE / "baselines" / "d3p_glm.py"
DELTA = 1e-5
#: d3p's settings per data set, chosen by a pilot at eps = 1 on three splits of this
#: comparison (grid: epochs 10-300, batch 25-200, Adam learning rate 0.005-0.1, clipping
#: threshold 0.5-10; docs/regression.md): the best median there, so if anything they
#: favour d3p (a private analysis could not tune on its test data).
D3P_SETTINGS: dict[str, dict[str, float]] = {
    "breast cancer": {
        "epochs": 100,
        "batch_size": 50,
        "learning_rate": 0.05,
        "clipping_threshold": 0.5,
    },
    "randhie any visit": {
        "epochs": 20,
        "batch_size": 200,
        "learning_rate": 0.05,
        "clipping_threshold": 0.5,
    },
    "diabetes": {"epochs": 50, "batch_size": 25, "learning_rate": 0.02, "clipping_threshold": 1.0},
}


def timed(fn: Any, *args: Any) -> tuple[float, float]:
    t0 = time.perf_counter()
    value = fn(*args)
    return float(value), time.perf_counter() - t0


def _sklearn_accuracy(data: dict[str, Any], tr: np.ndarray, te: np.ndarray) -> float:
    from sklearn.linear_model import LogisticRegression

    from dpbayes.experiments.glm import scaled

    z_tr, z_te = scaled(data["x"][tr], data["bounds"]), scaled(data["x"][te], data["bounds"])
    return float(
        LogisticRegression(max_iter=5000).fit(z_tr, data["y"][tr]).score(z_te, data["y"][te])
    )


def in_process(
    sets: dict[str, dict[str, Any]],
    splits: dict[str, list[tuple[np.ndarray, np.ndarray, int]]],
    eps_grid: list[float],
    gen: np.random.Generator,
    baseline_gen: np.random.Generator | None,
) -> list[dict[str, Any]]:
    """dpbayes and (with ``baseline_gen``, its seeds) diffprivlib, one row per fit."""
    from dpbayes.experiments import glm

    rows: list[dict[str, Any]] = []

    def add(
        name: str,
        method: str,
        library: str,
        eps: float,
        delta: float,
        rep: int,
        metric: str,
        value: float,
        secs: float,
    ) -> None:
        rows.append(
            {
                "dataset": name,
                "method": method,
                "library": library,
                "epsilon": eps,
                "delta": delta,
                "rep": rep,
                "metric": metric,
                "value": value,
                "seconds": round(secs, 4),
            }
        )

    for name, data in sets.items():
        linear = "label_bounds" in data
        for rep, (tr, te, _) in enumerate(splits[name]):
            t0 = time.perf_counter()
            if linear:
                ols = glm.least_squares_mse(data, tr, te)
                add(
                    name,
                    "least squares (non-private)",
                    "numpy",
                    math.inf,
                    0.0,
                    rep,
                    "mse/ols",
                    1.0,
                    time.perf_counter() - t0,
                )
            else:
                acc = _sklearn_accuracy(data, tr, te)
                add(
                    name,
                    "LogisticRegression (non-private)",
                    "scikit-learn",
                    math.inf,
                    0.0,
                    rep,
                    "accuracy",
                    acc,
                    time.perf_counter() - t0,
                )
            for eps in eps_grid:
                if linear:
                    for method, mech, delta in glm.LINEAR_METHODS:
                        mse, s = timed(
                            glm.dpbayes_linear_mse,
                            data,
                            tr,
                            te,
                            eps,
                            mech,
                            delta,
                            int(gen.integers(2**31)),
                        )
                        add(name, method, "dpbayes", eps, delta, rep, "mse/ols", mse / ols, s)
                    if baseline_gen is not None:
                        mse, s = timed(
                            glm.diffprivlib_linear_mse,
                            data,
                            tr,
                            te,
                            eps,
                            int(baseline_gen.integers(2**31)),
                        )
                        add(
                            name,
                            "LinearRegression",
                            "diffprivlib",
                            eps,
                            0.0,
                            rep,
                            "mse/ols",
                            mse / ols,
                            s,
                        )
                else:
                    for method, delta in glm.LOGISTIC_METHODS:
                        acc, s = timed(
                            glm.dpbayes_logistic_accuracy,
                            data,
                            tr,
                            te,
                            eps,
                            delta,
                            int(gen.integers(2**31)),
                        )
                        add(name, method, "dpbayes", eps, delta, rep, "accuracy", acc, s)
                    if baseline_gen is not None:
                        acc, s = timed(
                            glm.diffprivlib_logistic_accuracy,
                            data,
                            tr,
                            te,
                            eps,
                            int(baseline_gen.integers(2**31)),
                        )
                        add(
                            name,
                            "LogisticRegression",
                            "diffprivlib",
                            eps,
                            0.0,
                            rep,
                            "accuracy",
                            acc,
                            s,
                        )
        with_dpl = " + diffprivlib" if baseline_gen is not None else ""
        print(f"{name}: dpbayes{with_dpl} done", flush=True)
    return rows


def d3p_config(
    sets: dict[str, dict[str, Any]],
    splits: dict[str, list[tuple[np.ndarray, np.ndarray, int]]],
    eps_grid: list[float],
    overrides: dict[str, dict[str, float]],
) -> dict[str, Any]:
    """What d3p_glm.py needs: sources, public bounds, splits (indices and seeds), eps."""
    from dpbayes.data.datasets import bundled_path
    from dpbayes.experiments.glm import FEATURES

    sources = {
        "breast cancer": {"kind": "logistic", "source": "sklearn:breast_cancer"},
        "randhie any visit": {
            "kind": "logistic",
            "source": "csv",
            "path": str(bundled_path("randhie")),
            "features": list(FEATURES),
            "target": "mdvis",
            "positive_above": 0,
        },
        "diabetes": {"kind": "linear", "source": "sklearn:diabetes"},
    }
    datasets = {}
    for name, data in sets.items():
        spec: dict[str, Any] = {**sources[name], "rows": len(data["y"])}
        spec["bounds"] = np.asarray(data["bounds"]).tolist()
        if "label_bounds" in data:
            spec["label_bounds"] = list(data["label_bounds"])
        spec["splits"] = [
            {"train": tr.tolist(), "test": te.tolist(), "seed": seed}
            for tr, te, seed in splits[name]
        ]
        datasets[name] = spec
    settings = {name: {**D3P_SETTINGS[name], **overrides.get(name, {})} for name in sets}
    return {"epsilons": eps_grid, "delta": DELTA, "datasets": datasets, "settings": settings}


def run_d3p(python: str, config: dict[str, Any]) -> tuple[list[dict[str, Any]], str]:
    """Rows from d3p_glm.py under ``python``, or none and the reason."""
    with tempfile.TemporaryDirectory() as tmp:
        cfg, out = Path(tmp) / "config.json", Path(tmp) / "d3p.csv"
        cfg.write_text(json.dumps(config))
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # no dpbayes there
        t0 = time.perf_counter()
        proc = subprocess.run(
            [python, str(D3P_SCRIPT), str(cfg), str(out)],
            env=env,
            stdout=sys.stdout,
            stderr=subprocess.PIPE,
            text=True,
            check=False,
        )
        if proc.returncode != 0:
            tail = proc.stderr.strip().splitlines()[-1:] or ["(no message)"]
            return [], f"d3p run failed (exit {proc.returncode}): {tail[0]}"[:300]
        with out.open() as fh:
            raw = list(csv.DictReader(fh))
        print(f"d3p: {time.perf_counter() - t0:.0f} s in all", flush=True)
    rows = []
    for r in raw:
        if r["metric"] == "mse":
            continue
        rows.append(
            {
                "dataset": r["dataset"],
                "method": "DPVI",
                "library": "d3p",
                "epsilon": float(r["epsilon"]),
                "delta": float(r["delta"]),
                "rep": int(r["rep"]),
                "metric": r["metric"],
                "value": float(r["value"]),
                "seconds": float(r["seconds"]),
                "fit_seconds": float(r["fit_seconds"]),
                "calibration_seconds": float(r["calibration_seconds"]),
                "settings": (
                    f"epochs {r['epochs']}, batch {r['batch_size']}, lr {r['learning_rate']}, "
                    f"clip {r['clipping_threshold']}, noise multiplier {r['noise_multiplier']}, "
                    f"accountant eps {r['accountant_epsilon']}; {r['versions']}"
                ),
            }
        )
    return rows, ""


def summarise(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for r in rows:
        key = (r["dataset"], r["library"], r["method"], r["epsilon"], r["metric"])
        groups.setdefault(key, []).append(r)
    out = []
    for (dataset, library, method, eps, metric), grp in groups.items():
        vals = np.array([g["value"] for g in grp], dtype=float)
        secs = np.array([g["seconds"] for g in grp], dtype=float)
        q25, med, q75 = np.percentile(vals, [25, 50, 75])
        out.append(
            {
                "dataset": dataset,
                "library": library,
                "method": method,
                "epsilon": eps,
                "metric": metric,
                "median": float(med),
                "q25": float(q25),
                "q75": float(q75),
                "median_seconds": float(np.median(secs)),
                "runs": len(grp),
            }
        )
        if "fit_seconds" in grp[0]:  # d3p: training vs noise calibration
            out[-1]["median_fit_seconds"] = float(np.median([g["fit_seconds"] for g in grp]))
            out[-1]["calibration_seconds"] = float(grp[0]["calibration_seconds"])
    return out


def paired(
    rows: list[dict[str, Any]], ours: str = "ssp gaussian", peer: str = "DPVI"
) -> list[dict[str, Any]]:
    """dpbayes' ``ours`` against the ``peer`` method split by split (same split, same eps):
    the mean difference of the metric (ours - peer) with its standard error, the splits
    where ours is better (higher accuracy, lower MSE ratio), level and worse, and the
    Wilcoxon signed-rank p-value of the differences (Pratt's handling of zeros)."""
    from scipy import stats

    by: dict[tuple[Any, ...], dict[int, float]] = {}
    for r in rows:
        by.setdefault((r["dataset"], r["method"], r["epsilon"], r["metric"]), {})[r["rep"]] = r[
            "value"
        ]
    out = []
    for (dataset, method, eps, metric), mine in by.items():
        theirs = by.get((dataset, peer, eps, metric))
        if method != ours or not theirs:
            continue
        reps = sorted(set(mine) & set(theirs))
        diff = np.array([mine[k] - theirs[k] for k in reps], dtype=float)
        better = diff > 0 if metric == "accuracy" else diff < 0
        worse = diff < 0 if metric == "accuracy" else diff > 0
        p = float(stats.wilcoxon(diff, zero_method="pratt").pvalue) if np.any(diff) else 1.0
        out.append(
            {
                "dataset": dataset,
                "metric": metric,
                "epsilon": eps,
                "ours": ours,
                "peer": peer,
                "splits": len(reps),
                "mean_difference": float(diff.mean()),
                "se": float(diff.std(ddof=1) / np.sqrt(diff.size)) if diff.size > 1 else math.nan,
                "better": int(better.sum()),
                "level": int((diff == 0).sum()),
                "worse": int(worse.sum()),
                "wilcoxon_p": p,
            }
        )
    return out


def markdown_paired(pairs: list[dict[str, Any]]) -> str:
    """The paired comparison as a Markdown table."""
    head = "| data set (metric) | eps | splits | ours - peer (+- se) | better / level / worse | p |"
    lines = [head, "|---|---:|---:|---:|---:|---:|"]
    for r in sorted(pairs, key=lambda r: (r["dataset"], r["epsilon"])):
        lines.append(
            f"| {r['dataset']} ({r['metric']}) | {r['epsilon']:g} | {r['splits']} | "
            f"{r['mean_difference']:+.3f} +- {r['se']:.3f} | "
            f"{r['better']} / {r['level']} / {r['worse']} | {r['wilcoxon_p']:.3f} |"
        )
    return "\n".join(lines)


def markdown(summary: list[dict[str, Any]], eps_grid: list[float]) -> str:
    """One table: a row per data set x method, medians (and seconds) per eps."""
    cells: dict[tuple[str, str], dict[float, dict[str, Any]]] = {}
    for s in summary:
        cells.setdefault((s["dataset"], f"{s['library']} {s['method']}"), {})[s["epsilon"]] = s
    head = ["data set (metric)", "method"] + [f"eps {e:g}" for e in eps_grid]
    head += [f"s/fit, eps {eps_grid[len(eps_grid) // 2]:g}"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for (dataset, method), by_eps in sorted(cells.items(), key=lambda kv: kv[0]):
        metric = next(iter(by_eps.values()))["metric"]
        fmt = "{:.3f}" if metric == "accuracy" else "{:.3g}"
        if math.inf in by_eps:  # the non-private reference, same for every eps
            vals = [fmt.format(by_eps[math.inf]["median"])] * len(eps_grid)
            secs = by_eps[math.inf]["median_seconds"]
        else:
            vals = [fmt.format(by_eps[e]["median"]) if e in by_eps else "" for e in eps_grid]
            mid = by_eps.get(eps_grid[len(eps_grid) // 2])
            secs = mid["median_seconds"] if mid else float("nan")
        lines.append(
            f"| {dataset} ({metric}) | {method} | " + " | ".join(vals) + f" | {secs:.3g} |"
        )
    return "\n".join(lines)


def write(path: Path, rows: list[dict[str, Any]]) -> None:
    keys: list[str] = []
    for r in rows:
        keys.extend(k for k in r if k not in keys)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--eps", type=float, nargs="+", default=[0.1, 1.0, 10.0])
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--d3p-python", help="a Python with d3p (jax <= 0.4.25); none: skip d3p")
    ap.add_argument(
        "--d3p-settings",
        type=json.loads,
        default={},
        help="JSON overriding d3p's settings per data set, e.g. "
        '\'{"breast cancer": {"epochs": 200}}\'',
    )
    ap.add_argument("--datasets", nargs="+", choices=list(D3P_SETTINGS), default=list(D3P_SETTINGS))
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()

    from dpbayes.experiments import glm
    from dpbayes.experiments._paper004 import diffprivlib_status, split
    from dpbayes.privacy.noise import noise_source

    t_start = time.perf_counter()
    gen = noise_source(args.seed).generator()
    loaders = {
        "breast cancer": glm.breast_cancer,
        "randhie any visit": glm.randhie,
        "diabetes": glm.diabetes,
    }
    sets = {name: loaders[name]() for name in args.datasets}
    if any(v is None for v in sets.values()):
        sys.exit("scikit-learn is needed for the breast cancer and diabetes data")
    splits = {
        name: [
            (*split(len(data["y"]), 0.3, gen), int(gen.integers(2**31))) for _ in range(args.reps)
        ]
        for name, data in sets.items()
    }
    baseline, status = diffprivlib_status()
    print(f"diffprivlib: {status}", flush=True)
    # diffprivlib's seeds from a child stream: dpbayes' are the same with or without it
    baseline_gen = gen.spawn(1)[0] if baseline else None
    rows = in_process(sets, splits, args.eps, gen, baseline_gen)  # type: ignore[arg-type]
    notes = [f"diffprivlib: {status}"]
    if args.d3p_python:
        cfg = d3p_config(sets, splits, args.eps, args.d3p_settings)  # type: ignore[arg-type]
        d3p_rows, reason = run_d3p(args.d3p_python, cfg)
        rows += d3p_rows
        notes.append(f"d3p: {reason or 'run with ' + args.d3p_python}")
    else:
        notes.append("d3p: skipped (no --d3p-python given; it needs its own environment)")
    for n in notes[1:]:
        print(n, flush=True)
    write(args.out, rows)
    summary = summarise(rows)
    summary_path = args.out.with_name(args.out.stem + "_summary.csv")
    write(summary_path, summary)
    print()
    print(markdown(summary, args.eps))
    pairs = paired(rows)
    if pairs:
        write(args.out.with_name(args.out.stem + "_paired.csv"), pairs)
        print("\nSplit by split, dpbayes ssp gaussian against d3p DPVI:\n")
        print(markdown_paired(pairs))
    print()
    for n in notes:
        print(n)
    load = os.getloadavg() if hasattr(os, "getloadavg") else ("?",) * 3
    print(
        f"{time.perf_counter() - t_start:.0f} s in all; load average {load[0]:.2f} "
        f"{load[1]:.2f} {load[2]:.2f}; wrote {args.out} and {summary_path}"
    )


if __name__ == "__main__":
    main()
