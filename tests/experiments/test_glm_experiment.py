"""``dpbayes experiment glm`` runs small: CSV and PNG, every task and method present."""

from __future__ import annotations

import csv

from dpbayes import experiments


def test_glm_experiment_small(tmp_path) -> None:
    paths = experiments.run("glm", tmp_path, small=True, seed=1)
    names = sorted(p.name for p in paths)
    assert names == ["glm.png", "glm_runs.csv", "glm_summary.csv"]
    assert all(p.stat().st_size > 0 for p in paths)
    rows = list(csv.DictReader((tmp_path / "glm_summary.csv").open()))
    keys = {(r["task"], r["dataset"], r["method"]) for r in rows}
    assert ("accuracy", "randhie any visit", "ssp laplace") in keys
    assert ("accuracy", "breast cancer", "non-private") in keys
    assert ("mse/ols", "diabetes", "posterior sampling") in keys
    cover = {r["method"]: float(r["value"]) for r in rows if r["dataset"] == "simulated linear"}
    assert set(cover) == {"naive", "noise-aware"} and all(0 <= v <= 1 for v in cover.values())
    acc = [float(r["value"]) for r in rows if r["task"] == "accuracy"]
    assert all(0 <= a <= 1 for a in acc)
