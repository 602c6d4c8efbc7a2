"""Paper 004 §5.2 / Figure 2: private Bayesian linear regression by posterior sampling.

Test MSE against the prior precision lambda (at several eps) and against eps (at
lambda = 1) for: the private posterior sampler (truncated Gaussian prior, weight bound
W = 1 on the scaled weights; :class:`~dpbayes.estimators.PrivateBayesianLinearRegression`),
the non-private Bayesian posterior mean with the same prior (noise variance set to the
training residual variance of least squares), ordinary least squares, the training
mean, and, in the same runs on the same splits and eps, diffprivlib's
``LinearRegression`` with the same public bounds when diffprivlib imports.

Data sets (70/30 splits): ``randhie`` (bundled RAND HIE: log(1 + mdvis) on nine
features, public bounds from the variables' definitions) and ``diabetes``
(scikit-learn's copy, when installed: bounds (-0.2, 0.2) on the standardised features
and (0, 350) on the label, a convention of the comparison for both libraries).
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import numpy as np

from dpbayes.estimators import PrivateBayesianLinearRegression
from dpbayes.experiments._paper004 import (
    RANDHIE_BOUNDS,
    diffprivlib_status,
    quiet,
    split,
    summarise,
    write_csv,
)
from dpbayes.models.linear_regression import BayesianLinearRegression
from dpbayes.privacy.noise import noise_source
from dpbayes.progress import Progress

NAME = "linear-regression"
DESCRIPTION = "paper 004 §5.2: private Bayesian linear regression MSE vs prior precision and eps"

PRECISIONS = (0.01, 0.1, 1.0, 10.0, 100.0, 1000.0)
EPSILONS = (0.1, 0.3, 1.0, 3.0, 10.0)
WEIGHT_BOUND = 1.0
RANDHIE_FEATURES = ("lncoins", "idp", "lpi", "fmde", "physlm", "disea", "hlthg", "hlthf", "hlthp")


def randhie(small: bool) -> dict[str, Any]:
    from dpbayes.data import load_bundled

    df = load_bundled("randhie")
    if small:
        df = df.iloc[:1500]
    return {
        "x": df[list(RANDHIE_FEATURES)].to_numpy(float),
        "y": np.log1p(df["mdvis"].to_numpy(float)),
        "x_bounds": np.array([RANDHIE_BOUNDS[c] for c in RANDHIE_FEATURES]),
        "y_bounds": (0.0, math.log1p(RANDHIE_BOUNDS["mdvis"][1])),
    }


def diabetes() -> dict[str, Any] | None:
    try:
        from sklearn.datasets import load_diabetes
    except ImportError:
        return None
    x, y = load_diabetes(return_X_y=True)
    return {
        "x": x,
        "y": y,
        "x_bounds": np.tile([-0.2, 0.2], (x.shape[1], 1)),
        "y_bounds": (0.0, 350.0),
    }


def _scaled(data: dict[str, Any], x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    lo, hi = data["x_bounds"][:, 0], data["x_bounds"][:, 1]
    z = (np.clip(x, lo, hi) - (lo + hi) / 2) / ((hi - lo) / 2)
    ylo, yhi = data["y_bounds"]
    return np.hstack([z, np.ones((len(z), 1))]), (np.clip(y, ylo, yhi) - (ylo + yhi) / 2) / (
        (yhi - ylo) / 2
    )


def _unscale(data: dict[str, Any], ys: np.ndarray) -> np.ndarray:
    ylo, yhi = data["y_bounds"]
    return np.clip(ys, -1, 1) * (yhi - ylo) / 2 + (ylo + yhi) / 2


def _mse(pred: np.ndarray, y: np.ndarray) -> float:
    return float(np.mean((pred - y) ** 2))


def _one_split(
    name: str,
    data: dict[str, Any],
    tr: np.ndarray,
    te: np.ndarray,
    rep: int,
    grid: dict[str, tuple[float, ...]],
    seed: int,
    baseline: bool,
) -> list[dict[str, Any]]:
    x, y = data["x"], data["y"]
    ztr, ystr = _scaled(data, x[tr], y[tr])
    zte, _ = _scaled(data, x[te], y[te])
    base = {"dataset": name, "repeat": rep}
    rows: list[dict[str, Any]] = []
    ols = np.linalg.lstsq(ztr, ystr, rcond=None)[0]
    rows.append(
        {
            **base,
            "method": "least squares (non-private)",
            "epsilon": math.inf,
            "prior_precision": "",
            "mse": _mse(_unscale(data, zte @ ols), y[te]),
        }
    )
    rows.append(
        {
            **base,
            "method": "training mean (non-private)",
            "epsilon": math.inf,
            "prior_precision": "",
            "mse": _mse(np.full(len(te), y[tr].mean()), y[te]),
        }
    )
    resid = float(np.var(ystr - ztr @ ols))
    for lam in grid["precisions"]:
        m = BayesianLinearRegression(prior_precision=lam, noise_variance=max(resid, 1e-6))
        post = m.exact_posterior((ztr, ystr))
        rows.append(
            {
                **base,
                "method": "bayesian posterior mean (non-private)",
                "epsilon": math.inf,
                "prior_precision": lam,
                "mse": _mse(_unscale(data, zte @ post.mean()), y[te]),
            }
        )
    runs = [(e, 1.0) for e in grid["epsilons"]] + [
        (e, lam) for e in grid["eps_for_precision"] for lam in grid["precisions"] if lam != 1.0
    ]
    for k, (eps, lam) in enumerate(runs):
        est = PrivateBayesianLinearRegression(
            epsilon=eps,
            feature_bounds=data["x_bounds"],
            label_bounds=data["y_bounds"],
            prior_precision=lam,
            weight_bound=WEIGHT_BOUND,
            random_state=seed + 7919 * rep + 104729 * k,
        ).fit(x[tr], y[tr])
        rows.append(
            {
                **base,
                "method": "dpbayes posterior sampling",
                "epsilon": eps,
                "prior_precision": lam,
                "mse": _mse(est.predict(x[te]), y[te]),
            }
        )
    if baseline:
        from diffprivlib.models import LinearRegression

        for k, eps in enumerate(grid["epsilons"]):
            with quiet():
                dp = LinearRegression(
                    epsilon=eps,
                    bounds_X=(data["x_bounds"][:, 0], data["x_bounds"][:, 1]),
                    bounds_y=data["y_bounds"],
                    random_state=seed + 7919 * rep + k,
                ).fit(x[tr], y[tr])
                rows.append(
                    {
                        **base,
                        "method": "diffprivlib LinearRegression",
                        "epsilon": eps,
                        "prior_precision": "",
                        "mse": _mse(dp.predict(x[te]), y[te]),
                    }
                )
    return rows


def run(out_dir: Path, *, small: bool = False, seed: int = 0) -> list[Path]:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    baseline, status = diffprivlib_status()
    gen = noise_source(seed).generator()
    if small:
        grid = {"precisions": (1.0, 100.0), "epsilons": (1.0,), "eps_for_precision": (1.0,)}
        reps = 1
    else:
        grid = {"precisions": PRECISIONS, "epsilons": EPSILONS, "eps_for_precision": (1.0, 10.0)}
        reps = 30
    sets = {"randhie": randhie(small)}
    db = None if small else diabetes()
    if db is not None:
        sets["diabetes"] = db
    rows: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    with Progress(len(sets) * reps, "regression experiment", unit="split") as bar:
        for name, data in sets.items():
            for rep in range(reps):
                tr, te = split(len(data["y"]), 0.3, gen)
                rows += _one_split(name, data, tr, te, rep, grid, seed, baseline)
                bar.update(1)
    for r in rows:
        r["weight_bound"] = WEIGHT_BOUND
        r["baseline_status"] = status
    raw = write_csv(out / "linear_regression_runs.csv", rows)

    def median(grp: list[dict[str, Any]]) -> dict[str, Any]:
        return {"median_mse": float(np.median([g["mse"] for g in grp]))}

    summary = summarise(rows, ("dataset", "method", "epsilon", "prior_precision"), "mse", median)
    for s in summary:
        s["baseline_status"] = status
        s["seconds_total"] = round(time.perf_counter() - t0, 1)
    summ = write_csv(out / "linear_regression_summary.csv", summary)
    png = _plot(summary, out / "linear_regression.png", "" if baseline else status, list(sets))
    return [raw, summ, png]


def _reference_lines(ax: Any, ref: dict[str, float]) -> None:
    """The non-private reference MSEs as horizontal lines."""
    for label, style in (
        ("least squares (non-private)", ":"),
        ("training mean (non-private)", "-."),
    ):
        if label in ref:
            ax.axhline(ref[label], color="0.5", ls=style, label=label)


def _plot(summary: list[dict[str, Any]], path: Path, status: str, datasets: list[str]) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(datasets), 2, figsize=(11, 4.2 * len(datasets)), squeeze=False)
    for row, ds in zip(axes, datasets, strict=True):
        rows = [s for s in summary if s["dataset"] == ds]
        ref = {
            s["method"]: s["mean_mse"]
            for s in rows
            if s["epsilon"] == math.inf and s["prior_precision"] == ""
        }
        ax = row[0]
        bayes = sorted(
            (s["prior_precision"], s["mean_mse"])
            for s in rows
            if s["method"].startswith("bayesian")
        )
        if bayes:
            ax.plot(
                *zip(*bayes, strict=True), "k--o", label="Bayesian posterior mean (non-private)"
            )
        for i, eps in enumerate(
            sorted({s["epsilon"] for s in rows if s["method"].startswith("dpbayes")})
        ):
            pts = sorted(
                (s["prior_precision"], s["mean_mse"], s["sd_mse"], s["repeats"])
                for s in rows
                if s["method"].startswith("dpbayes") and s["epsilon"] == eps
            )
            if len(pts) < 2:
                continue
            lam, m, sd, n = (np.array(v, dtype=float) for v in zip(*pts, strict=True))
            ax.errorbar(
                lam,
                m,
                yerr=sd / np.sqrt(n),
                marker="s",
                color=f"C{i}",
                capsize=2,
                label=f"dpbayes posterior sampling, eps={eps:g}",
            )
        _reference_lines(ax, ref)
        ax.set_xscale("log")
        ax.set_xlabel("prior precision lambda")
        ax.set_ylabel("test MSE")
        ax.set_title(f"{ds}: MSE vs prior precision (W = {WEIGHT_BOUND:g})")
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
        ax = row[1]
        for method, color in (
            ("dpbayes posterior sampling", "C0"),
            ("diffprivlib LinearRegression", "C3"),
        ):
            pts3 = sorted(
                (s["epsilon"], s["mean_mse"], s["median_mse"])
                for s in rows
                if s["method"] == method and s["prior_precision"] in (1.0, "")
            )
            if pts3:
                e, m, med = (np.array(v, dtype=float) for v in zip(*pts3, strict=True))
                ax.plot(e, m, marker="o", color=color, label=f"{method} (mean)")
                ax.plot(e, med, marker="x", ls=":", color=color, label=f"{method} (median)")
        _reference_lines(ax, ref)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("epsilon")
        ax.set_ylabel("test MSE (log scale)")
        ax.set_title(f"{ds}: MSE vs eps (lambda = 1)")
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
    if status:
        fig.text(0.5, 0.005, f"baseline not run: {status}", ha="center", fontsize=8, color="C3")
    fig.suptitle("Private Bayesian linear regression (paper 004 §5.2); bars: standard error")
    fig.tight_layout(rect=(0, 0.03, 1, 0.96))
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
