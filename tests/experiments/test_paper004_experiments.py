"""The reduced runs of paper 004's experiments (naive-bayes, linear-regression)."""

from __future__ import annotations

import csv
import math
from pathlib import Path

from dpbayes import experiments


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open() as fh:
        return list(csv.DictReader(fh))


def test_naive_bayes_small(tmp_path: Path) -> None:
    assert "naive-bayes" in experiments.available()
    paths = experiments.run("naive-bayes", tmp_path, small=True, seed=1)
    names = {p.name for p in paths}
    assert names == {"naive_bayes_runs.csv", "naive_bayes_summary.csv", "naive_bayes.png"}
    assert (tmp_path / "naive_bayes.png").stat().st_size > 10_000
    summary = _rows(tmp_path / "naive_bayes_summary.csv")
    mechs = {r["mechanism"] for r in summary if r["library"] == "dpbayes"}
    assert {"none", "laplace", "fourier", "sampling", "map"} <= mechs
    for r in summary:
        assert 0.0 <= float(r["mean_accuracy"]) <= 1.0
        # without diffprivlib the CSV says why the baseline is missing
        if not r["baseline_status"].startswith("diffprivlib 0"):
            assert "diffprivlib" in r["baseline_status"]
    syn = {
        (r["mechanism"], r["epsilon"]): float(r["mean_accuracy"])
        for r in summary
        if r["dataset"] == "synthetic"
    }
    assert syn[("none", "inf")] > syn[("majority class (non-private)", "inf")]
    runs = _rows(tmp_path / "naive_bayes_runs.csv")
    assert {r["stealth"] for r in runs if r["mechanism"] == "fourier"} <= {"True", "False"}


def test_linear_regression_small(tmp_path: Path) -> None:
    paths = experiments.run("linear-regression", tmp_path, small=True, seed=1)
    assert {p.name for p in paths} == {
        "linear_regression_runs.csv",
        "linear_regression_summary.csv",
        "linear_regression.png",
    }
    summary = _rows(tmp_path / "linear_regression_summary.csv")
    methods = {r["method"] for r in summary}
    assert "dpbayes posterior sampling" in methods
    assert "bayesian posterior mean (non-private)" in methods
    ref = next(float(r["mean_mse"]) for r in summary if r["method"].startswith("training mean"))
    for r in summary:
        if r["method"] == "dpbayes posterior sampling":
            # never diverges: predictions are clipped to the public label range [0, ln 101]
            assert math.isfinite(float(r["mean_mse"]))
            assert float(r["mean_mse"]) < 4 * ref
