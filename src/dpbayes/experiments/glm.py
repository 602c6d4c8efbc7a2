"""Regressions by noisy sufficient statistics (``mechanism="ssp"``): utility and coverage.

For each eps, on 70/30 splits:

* logistic regression (``PrivateBayesianLogisticRegression``, PASS-GLM degree 2, Laplace
  with delta = 0 and analytic Gaussian with delta = 1e-5) against scikit-learn's
  non-private ``LogisticRegression`` on the same features scaled to [-1, 1] by the public
  bounds: test accuracy on breast cancer (scikit-learn's copy; bounds its min/max, a
  convention of the comparison) and on the bundled RAND HIE (any visit, ``mdvis > 0``,
  on nine features with the bounds from the variables' definitions);
* linear regression (``PrivateBayesianLinearRegression``, ``mechanism="ssp"`` and the
  paper-004 posterior sampling) on diabetes: test MSE over least squares;
* coverage of the 90% intervals of the coefficients, noise-aware against naive, over
  simulated data sets (d = 2; linear n = 200, logistic n = 500), where the truth is known.

Writes ``glm_runs.csv`` (one row per run), ``glm_summary.csv`` (medians; coverage as a
share) and ``glm.png``. d3p and diffprivlib are not run here (see the note in
``docs/bayes-net.md`` on separate environments for baselines).
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from dpbayes.experiments._paper004 import RANDHIE_BOUNDS, quiet, split, write_csv
from dpbayes.privacy.noise import noise_source
from dpbayes.progress import Progress

NAME = "glm"
DESCRIPTION = "regressions by noisy sufficient statistics: accuracy, MSE and coverage vs eps"

EPSILONS = (0.1, 0.3, 1.0, 3.0, 10.0)
DELTA = 1e-5
FEATURES = ("lncoins", "idp", "lpi", "fmde", "physlm", "disea", "hlthg", "hlthf", "hlthp")


def _breast_cancer() -> dict[str, Any] | None:
    try:
        from sklearn.datasets import load_breast_cancer
    except ImportError:  # scikit-learn is a test/bench dependency only
        return None
    x, y = load_breast_cancer(return_X_y=True)
    return {"x": x, "y": y, "bounds": np.column_stack([x.min(axis=0), x.max(axis=0)])}


def _randhie(small: bool) -> dict[str, Any]:
    from dpbayes.data import load_bundled

    df = load_bundled("randhie")
    if small:
        df = df.iloc[:2000]
    return {
        "x": df[list(FEATURES)].to_numpy(float),
        "y": (df["mdvis"].to_numpy(float) > 0).astype(int),
        "bounds": np.array([RANDHIE_BOUNDS[c] for c in FEATURES], dtype=float),
    }


def _scaled(x: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    lo, hi = bounds[:, 0], bounds[:, 1]
    return np.clip((x - (lo + hi) / 2) / np.maximum((hi - lo) / 2, 1e-12), -1.0, 1.0)


def _classification(name: str, data: dict[str, Any], eps_grid: Any, reps: int, gen: Any) -> list:
    from dpbayes.estimators import PrivateBayesianLogisticRegression

    rows: list[dict[str, Any]] = []
    x, y, bounds = data["x"], data["y"], data["bounds"]
    for rep in range(reps):
        tr, te = split(len(y), 0.3, gen)
        try:
            from sklearn.linear_model import LogisticRegression

            base = LogisticRegression(max_iter=5000).fit(_scaled(x[tr], bounds), y[tr])
            acc = float(base.score(_scaled(x[te], bounds), y[te]))
            rows.append(
                {"task": "accuracy", "dataset": name, "method": "non-private"}
                | {"epsilon": math.inf, "rep": rep, "value": acc}
            )
        except ImportError:
            pass
        for delta in (0.0, DELTA):
            method = "ssp laplace" if delta == 0 else "ssp gaussian"
            for eps in eps_grid:
                est = PrivateBayesianLogisticRegression(
                    epsilon=eps,
                    delta=delta,
                    feature_bounds=bounds,
                    classes=[0, 1],
                    random_state=int(gen.integers(2**31)),
                )
                with quiet():
                    acc = float(est.fit(x[tr], y[tr]).score(x[te], y[te]))
                rows.append(
                    {
                        "task": "accuracy",
                        "dataset": name,
                        "method": method,
                        "epsilon": eps,
                        "rep": rep,
                        "value": acc,
                    }
                )
    return rows


def _diabetes(eps_grid: Any, reps: int, gen: Any) -> list[dict[str, Any]]:
    try:
        from sklearn.datasets import load_diabetes
    except ImportError:
        return []
    from dpbayes.estimators import PrivateBayesianLinearRegression

    x, y = load_diabetes(return_X_y=True)
    bounds = np.column_stack([x.min(axis=0), x.max(axis=0)])
    rows: list[dict[str, Any]] = []
    for rep in range(reps):
        tr, te = split(len(y), 0.3, gen)
        xt = np.column_stack([np.ones(len(tr)), x[tr]])
        coef = np.linalg.lstsq(xt, y[tr], rcond=None)[0]
        ols = float(np.mean((np.column_stack([np.ones(len(te)), x[te]]) @ coef - y[te]) ** 2))
        for method, mech, delta in (
            ("ssp laplace", "ssp", 0.0),
            ("ssp gaussian", "ssp", DELTA),
            ("posterior sampling", "sampling", 0.0),
        ):
            for eps in eps_grid:
                est = PrivateBayesianLinearRegression(
                    epsilon=eps,
                    delta=delta,
                    feature_bounds=bounds,
                    label_bounds=(25, 346),
                    mechanism=mech,
                    random_state=int(gen.integers(2**31)),
                )
                with quiet():
                    mse = float(np.mean((est.fit(x[tr], y[tr]).predict(x[te]) - y[te]) ** 2))
                rows.append(
                    {
                        "task": "mse/ols",
                        "dataset": "diabetes",
                        "method": method,
                        "epsilon": eps,
                        "rep": rep,
                        "value": mse / ols,
                    }
                )
    return rows


def _coverage(eps_grid: Any, datasets: int, seed: int) -> list[dict[str, Any]]:
    import dpbayes as dpb

    lin = dpb.models.BayesianLinearRegression(
        prior_precision=4.0, noise_variance=0.25, feature_bound=1.0, label_bound=2.0, clip="box"
    )
    logit = dpb.models.BayesianLogisticRegression(prior_precision=1.0, feature_bound=1.0)
    rows: list[dict[str, Any]] = []
    for eps in eps_grid:
        for name, model, n in (("linear", lin, 200), ("logistic", logit, 500)):
            g = noise_source(seed).generator()
            for i in range(datasets):
                w = g.normal(0, 0.5 if name == "linear" else 1.0, 2)
                x = np.clip(g.normal(0, 0.5, (n, 2)), -1, 1)
                if name == "linear":
                    y = np.clip(x @ w + g.normal(0, 0.5, n), -2, 2)
                else:
                    y = (g.random(n) < 1 / (1 + np.exp(-x @ w))).astype(float)
                rel = dpb.release(model, (x, y), mechanism="ssp", epsilon=eps, rng=seed + i)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", RuntimeWarning)
                    opts = {"rng": i, "iterations": 1000} if name == "linear" else {}
                    aware = rel.noise_aware_posterior(**opts)
                for method, post in (("noise-aware", aware), ("naive", rel.posterior)):
                    iv = post.interval(0.9)
                    hit = float(np.mean((iv[:, 0] <= w) & (w <= iv[:, 1])))
                    rows.append(
                        {
                            "task": "coverage90",
                            "dataset": f"simulated {name}",
                            "method": method,
                            "epsilon": eps,
                            "rep": i,
                            "value": hit,
                        }
                    )
    return rows


def run(out_dir: Path, *, small: bool = False, seed: int = 0) -> list[Path]:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    gen = noise_source(seed).generator()
    eps_grid = (1.0, 10.0) if small else EPSILONS
    reps, datasets = (1, 10) if small else (20, 200)
    sets = {"randhie any visit": _randhie(small)}
    bc = _breast_cancer()
    if bc is not None:
        sets["breast cancer"] = bc
    rows: list[dict[str, Any]] = []
    with Progress(len(sets) + 2, "glm experiment", unit="part") as bar:
        for name, data in sets.items():
            rows += _classification(name, data, eps_grid, reps, gen)
            bar.update(1)
        rows += _diabetes(eps_grid, 1 if small else reps, gen)
        bar.update(1)
        rows += _coverage((1.0,) if small else (0.1, 1.0, 10.0), datasets, seed)
        bar.update(1)
    raw = write_csv(out / "glm_runs.csv", rows)
    groups: dict[tuple[Any, ...], list[float]] = {}
    for r in rows:
        groups.setdefault((r["task"], r["dataset"], r["method"], r["epsilon"]), []).append(
            r["value"]
        )
    summary = [
        {
            "task": t,
            "dataset": d,
            "method": m,
            "epsilon": e,
            "runs": len(v),
            "value": float(np.mean(v) if t == "coverage90" else np.median(v)),
        }
        for (t, d, m, e), v in sorted(groups.items(), key=lambda kv: str(kv[0]))
    ]
    summ = write_csv(out / "glm_summary.csv", summary)
    return [raw, summ, _plot(summary, out / "glm.png")]


def _plot(summary: list[dict[str, Any]], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = sorted({(s["task"], s["dataset"]) for s in summary})
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.6), squeeze=False)
    for ax, (task, dataset) in zip(axes[0], panels, strict=True):
        sub = [s for s in summary if s["task"] == task and s["dataset"] == dataset]
        for method in sorted({s["method"] for s in sub}):
            pts = sorted((s["epsilon"], s["value"]) for s in sub if s["method"] == method)
            finite = [(e, v) for e, v in pts if math.isfinite(e)]
            if finite:
                ax.plot(*zip(*finite, strict=True), marker="o", label=method)
            else:  # the non-private reference
                ax.axhline(pts[0][1], ls=":", color="k", label=method)
        if task == "coverage90":
            ax.axhline(0.9, ls="--", color="grey", lw=0.8)
        ax.set_xscale("log")
        ax.set_xlabel("eps")
        ax.set_title(f"{dataset}: {task}", fontsize=9)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
