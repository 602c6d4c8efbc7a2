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

In the same runs, on the same splits and eps, when diffprivlib imports (it needs
scikit-learn < 1.6: the ``bench`` extra, see ``docs/bayes-net.md``): diffprivlib's
``LogisticRegression`` (objective perturbation; ``data_norm`` = sqrt(d), the public bound
of the row norm of the scaled features) on breast cancer and RAND HIE, and its
``LinearRegression`` (``bounds_X``, ``bounds_y``: the bounds dpbayes uses) on diabetes,
with ``random_state`` from a child stream of the experiment's seeded generator (so
dpbayes' rows are the same numbers with or without diffprivlib). Without it the CSVs'
``baseline_status`` column and a line under the figure say why.

Writes ``glm_runs.csv`` (one row per run), ``glm_summary.csv`` (medians; coverage as a
share) and ``glm.png``. d3p (DP variational inference) needs its own environment:
``benchmarks/bench_glm_baselines.py --d3p-python PATH`` runs it beside dpbayes and
diffprivlib on the same splits (``docs/regression.md``).
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from dpbayes.experiments._paper004 import (
    RANDHIE_BOUNDS,
    diffprivlib_status,
    quiet,
    split,
    write_csv,
)
from dpbayes.privacy.noise import noise_source
from dpbayes.progress import Progress

NAME = "glm"
DESCRIPTION = "regressions by noisy sufficient statistics: accuracy, MSE and coverage vs eps"

EPSILONS = (0.1, 0.3, 1.0, 3.0, 10.0)
DELTA = 1e-5
FEATURES = ("lncoins", "idp", "lpi", "fmde", "physlm", "disea", "hlthg", "hlthf", "hlthp")
#: Public bounds of the diabetes label (disease progression after a year, 25..346).
LABEL_BOUNDS = (25.0, 346.0)
DPL_LOGISTIC = "diffprivlib LogisticRegression"
DPL_LINEAR = "diffprivlib LinearRegression"
#: dpbayes' methods: (name, delta) for logistic, (name, mechanism, delta) for linear.
LOGISTIC_METHODS = (("ssp laplace", 0.0), ("ssp gaussian", DELTA))
LINEAR_METHODS = (
    ("ssp laplace", "ssp", 0.0),
    ("ssp gaussian", "ssp", DELTA),
    ("posterior sampling", "sampling", 0.0),
)


def breast_cancer() -> dict[str, Any] | None:
    """scikit-learn's breast cancer data; bounds its min/max (a convention of the
    comparison, treated as public for every library alike). None without scikit-learn."""
    try:
        from sklearn.datasets import load_breast_cancer
    except ImportError:  # scikit-learn is a test/bench dependency only
        return None
    x, y = load_breast_cancer(return_X_y=True)
    return {"x": x, "y": y, "bounds": np.column_stack([x.min(axis=0), x.max(axis=0)])}


def randhie(small: bool = False) -> dict[str, Any]:
    """Bundled RAND HIE: any visit (``mdvis > 0``) on :data:`FEATURES`, public bounds."""
    from dpbayes.data import load_bundled

    df = load_bundled("randhie")
    if small:
        df = df.iloc[:2000]
    return {
        "x": df[list(FEATURES)].to_numpy(float),
        "y": (df["mdvis"].to_numpy(float) > 0).astype(int),
        "bounds": np.array([RANDHIE_BOUNDS[c] for c in FEATURES], dtype=float),
    }


def diabetes() -> dict[str, Any] | None:
    """scikit-learn's diabetes data; feature bounds its min/max, label bounds
    :data:`LABEL_BOUNDS`. None without scikit-learn."""
    try:
        from sklearn.datasets import load_diabetes
    except ImportError:
        return None
    x, y = load_diabetes(return_X_y=True)
    bounds = np.column_stack([x.min(axis=0), x.max(axis=0)])
    return {"x": x, "y": y, "bounds": bounds, "label_bounds": LABEL_BOUNDS}


def scaled(x: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    """Features clipped to their bounds and mapped to [-1, 1]."""
    lo, hi = bounds[:, 0], bounds[:, 1]
    return np.clip((x - (lo + hi) / 2) / np.maximum((hi - lo) / 2, 1e-12), -1.0, 1.0)


def least_squares_mse(data: dict[str, Any], tr: np.ndarray, te: np.ndarray) -> float:
    """Test MSE of least squares with an intercept on the raw features (the reference)."""
    x, y = data["x"], data["y"]
    coef = np.linalg.lstsq(np.column_stack([np.ones(len(tr)), x[tr]]), y[tr], rcond=None)[0]
    return float(np.mean((np.column_stack([np.ones(len(te)), x[te]]) @ coef - y[te]) ** 2))


def dpbayes_logistic_accuracy(
    data: dict[str, Any], tr: np.ndarray, te: np.ndarray, eps: float, delta: float, seed: int
) -> float:
    """Test accuracy of ``PrivateBayesianLogisticRegression`` (Laplace when delta = 0)."""
    from dpbayes.estimators import PrivateBayesianLogisticRegression

    x, y = data["x"], data["y"]
    est = PrivateBayesianLogisticRegression(
        epsilon=eps, delta=delta, feature_bounds=data["bounds"], classes=[0, 1], random_state=seed
    )
    with quiet():
        return float(est.fit(x[tr], y[tr]).score(x[te], y[te]))


def diffprivlib_logistic_accuracy(
    data: dict[str, Any], tr: np.ndarray, te: np.ndarray, eps: float, seed: int
) -> float:
    """Test accuracy of diffprivlib's ``LogisticRegression`` on the features scaled to
    [-1, 1] by the bounds, ``data_norm`` = sqrt(d) (their largest possible row norm)."""
    from diffprivlib.models import LogisticRegression

    z_tr, z_te = scaled(data["x"][tr], data["bounds"]), scaled(data["x"][te], data["bounds"])
    with quiet():
        m = LogisticRegression(epsilon=eps, data_norm=math.sqrt(z_tr.shape[1]), random_state=seed)
        return float(m.fit(z_tr, data["y"][tr]).score(z_te, data["y"][te]))


def dpbayes_linear_mse(
    data: dict[str, Any],
    tr: np.ndarray,
    te: np.ndarray,
    eps: float,
    mechanism: str,
    delta: float,
    seed: int,
) -> float:
    """Test MSE of ``PrivateBayesianLinearRegression`` (``"ssp"`` or ``"sampling"``)."""
    from dpbayes.estimators import PrivateBayesianLinearRegression

    x, y = data["x"], data["y"]
    est = PrivateBayesianLinearRegression(
        epsilon=eps,
        delta=delta,
        feature_bounds=data["bounds"],
        label_bounds=data["label_bounds"],
        mechanism=mechanism,
        random_state=seed,
    )
    with quiet():
        return float(np.mean((est.fit(x[tr], y[tr]).predict(x[te]) - y[te]) ** 2))


def diffprivlib_linear_mse(
    data: dict[str, Any], tr: np.ndarray, te: np.ndarray, eps: float, seed: int
) -> float:
    """Test MSE of diffprivlib's ``LinearRegression`` with the same public bounds."""
    from diffprivlib.models import LinearRegression

    x, y, b = data["x"], data["y"], data["bounds"]
    with quiet():
        m = LinearRegression(
            epsilon=eps,
            bounds_X=(b[:, 0], b[:, 1]),
            bounds_y=data["label_bounds"],
            random_state=seed,
        )
        return float(np.mean((m.fit(x[tr], y[tr]).predict(x[te]) - y[te]) ** 2))


def _row(task: str, dataset: str, method: str, eps: float, rep: int, value: float) -> dict:
    return {
        "task": task,
        "dataset": dataset,
        "method": method,
        "epsilon": eps,
        "rep": rep,
        "value": value,
    }


def _classification(
    name: str,
    data: dict[str, Any],
    eps_grid: Any,
    reps: int,
    gen: Any,
    baseline_gen: Any = None,
) -> list[dict[str, Any]]:
    """Accuracy rows; diffprivlib's too when ``baseline_gen`` (its seeds) is given."""
    rows: list[dict[str, Any]] = []
    x, y, bounds = data["x"], data["y"], data["bounds"]
    for rep in range(reps):
        tr, te = split(len(y), 0.3, gen)
        try:
            from sklearn.linear_model import LogisticRegression

            base = LogisticRegression(max_iter=5000).fit(scaled(x[tr], bounds), y[tr])
            acc = float(base.score(scaled(x[te], bounds), y[te]))
            rows.append(_row("accuracy", name, "non-private", math.inf, rep, acc))
        except ImportError:
            pass
        for method, delta in LOGISTIC_METHODS:
            for eps in eps_grid:
                acc = dpbayes_logistic_accuracy(data, tr, te, eps, delta, int(gen.integers(2**31)))
                rows.append(_row("accuracy", name, method, eps, rep, acc))
        if baseline_gen is not None:
            for eps in eps_grid:
                seed = int(baseline_gen.integers(2**31))
                acc = diffprivlib_logistic_accuracy(data, tr, te, eps, seed)
                rows.append(_row("accuracy", name, DPL_LOGISTIC, eps, rep, acc))
    return rows


def _diabetes(eps_grid: Any, reps: int, gen: Any, baseline_gen: Any = None) -> list[dict[str, Any]]:
    """MSE over least squares; diffprivlib's too when ``baseline_gen`` is given."""
    data = diabetes()
    if data is None:
        return []
    rows: list[dict[str, Any]] = []
    for rep in range(reps):
        tr, te = split(len(data["y"]), 0.3, gen)
        ols = least_squares_mse(data, tr, te)
        for method, mech, delta in LINEAR_METHODS:
            for eps in eps_grid:
                mse = dpbayes_linear_mse(data, tr, te, eps, mech, delta, int(gen.integers(2**31)))
                rows.append(_row("mse/ols", "diabetes", method, eps, rep, mse / ols))
        if baseline_gen is not None:
            for eps in eps_grid:
                mse = diffprivlib_linear_mse(data, tr, te, eps, int(baseline_gen.integers(2**31)))
                rows.append(_row("mse/ols", "diabetes", DPL_LINEAR, eps, rep, mse / ols))
    return rows


def coverage_models() -> dict[str, tuple[Any, int]]:
    """The coverage study's models and sizes: linear (w ~ N(0, I/4), so y is almost never
    clipped; n = 200) and logistic (w ~ N(0, I); n = 500), d = 2."""
    import dpbayes as dpb

    lin = dpb.models.BayesianLinearRegression(
        prior_precision=4.0, noise_variance=0.25, feature_bound=1.0, label_bound=2.0, clip="box"
    )
    logit = dpb.models.BayesianLogisticRegression(prior_precision=1.0, feature_bound=1.0)
    return {"linear": (lin, 200), "logistic": (logit, 500)}


def simulated_data(name: str, n: int, g: np.random.Generator) -> tuple[np.ndarray, ...]:
    """One simulated data set of the coverage study: (true w, x, y), drawn from ``g``."""
    w = g.normal(0, 0.5 if name == "linear" else 1.0, 2)
    x = np.clip(g.normal(0, 0.5, (n, 2)), -1, 1)
    if name == "linear":
        y = np.clip(x @ w + g.normal(0, 0.5, n), -2, 2)
    else:
        y = (g.random(n) < 1 / (1 + np.exp(-x @ w))).astype(float)
    return w, x, y


def coverage_hits(
    model: Any, name: str, data: tuple[np.ndarray, ...], eps: float, delta: float,
    release_rng: int, posterior_rng: int,
) -> dict[str, np.ndarray]:  # fmt: skip
    """Whether the 90% intervals of the noise-aware and the naive posterior of one SSP
    release of ``data`` = (w, x, y) cover each coefficient of w."""
    import dpbayes as dpb

    w, x, y = data
    rel = dpb.release(model, (x, y), mechanism="ssp", epsilon=eps, delta=delta, rng=release_rng)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        opts = {"rng": posterior_rng, "iterations": 1000} if name == "linear" else {}
        aware = rel.noise_aware_posterior(**opts)
    out = {}
    for method, post in (("noise-aware", aware), ("naive", rel.posterior)):
        iv = post.interval(0.9)
        out[method] = ((iv[:, 0] <= w) & (w <= iv[:, 1])).astype(float)
    return out


def _coverage(eps_grid: Any, datasets: int, seed: int) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for eps in eps_grid:
        for name, (model, n) in coverage_models().items():
            g = noise_source(seed).generator()
            for i in range(datasets):
                data = simulated_data(name, n, g)
                hits = coverage_hits(model, name, data, eps, 0.0, seed + i, i)
                for method, hit in hits.items():
                    rows.append(
                        {
                            "task": "coverage90",
                            "dataset": f"simulated {name}",
                            "method": method,
                            "epsilon": eps,
                            "rep": i,
                            "value": float(np.mean(hit)),
                        }
                    )
    return rows


def run(out_dir: Path, *, small: bool = False, seed: int = 0) -> list[Path]:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    gen = noise_source(seed).generator()
    baseline, status = diffprivlib_status()
    # diffprivlib's seeds come from a child stream: the parent's draws (splits, dpbayes'
    # seeds) are the same whether or not diffprivlib imports.
    baseline_gen = gen.spawn(1)[0] if baseline else None
    eps_grid = (1.0, 10.0) if small else EPSILONS
    reps, datasets = (1, 10) if small else (20, 200)
    sets = {"randhie any visit": randhie(small)}
    bc = breast_cancer()
    if bc is not None:
        sets["breast cancer"] = bc
    rows: list[dict[str, Any]] = []
    with Progress(len(sets) + 2, "glm experiment", unit="part") as bar:
        for name, data in sets.items():
            rows += _classification(name, data, eps_grid, reps, gen, baseline_gen)
            bar.update(1)
        rows += _diabetes(eps_grid, 1 if small else reps, gen, baseline_gen)
        bar.update(1)
        rows += _coverage((1.0,) if small else (0.1, 1.0, 10.0), datasets, seed)
        bar.update(1)
    for r in rows:
        r["baseline_status"] = status
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
            "baseline_status": status,
        }
        for (t, d, m, e), v in sorted(groups.items(), key=lambda kv: str(kv[0]))
    ]
    summ = write_csv(out / "glm_summary.csv", summary)
    return [raw, summ, _plot(summary, out / "glm.png", "" if baseline else status)]


COLORS = {
    "ssp gaussian": "C0",
    "ssp laplace": "C1",
    "posterior sampling": "C2",
    "noise-aware": "C0",
    "naive": "C1",
    DPL_LOGISTIC: "C3",
    DPL_LINEAR: "C3",
}


def _plot(summary: list[dict[str, Any]], path: Path, status: str = "") -> Path:
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
                baseline = method.startswith("diffprivlib")
                style = {"ls": "--", "marker": "x"} if baseline else {"marker": "o"}
                color = COLORS.get(method, "C4")  # the same with or without the baseline
                ax.plot(*zip(*finite, strict=True), label=method, color=color, **style)
            else:  # the non-private reference
                ax.axhline(pts[0][1], ls=":", color="k", label=method)
        if task == "coverage90":
            ax.axhline(0.9, ls="--", color="grey", lw=0.8)
        if task == "mse/ols":
            ax.set_yscale("log")  # a baseline's ratio can be orders of magnitude above 1
        ax.set_xscale("log")
        ax.set_xlabel("eps")
        ax.set_title(f"{dataset}: {task}", fontsize=9)
        ax.legend(fontsize=7)
    if status:
        fig.text(0.5, 0.005, f"baseline not run: {status}", ha="center", fontsize=8, color="C3")
        fig.tight_layout(rect=(0, 0.04, 1, 1))
    else:
        fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
