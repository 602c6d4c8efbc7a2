"""``dpbayes experiment glm`` runs small: CSV and PNG, every task and method present;
diffprivlib's rows where it imports (the bench environment), the reason where not."""

from __future__ import annotations

import csv

import pytest

from dpbayes import experiments
from dpbayes.experiments._paper004 import diffprivlib_status


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
    baseline, status = diffprivlib_status()
    assert {r["baseline_status"] for r in rows} == {status}
    dpl = {
        ("accuracy", "breast cancer", "diffprivlib LogisticRegression"),
        ("accuracy", "randhie any visit", "diffprivlib LogisticRegression"),
        ("mse/ols", "diabetes", "diffprivlib LinearRegression"),
    }
    if baseline:
        assert dpl <= keys
        ratio = [float(r["value"]) for r in rows if r["method"] == "diffprivlib LinearRegression"]
        assert all(v > 0 for v in ratio)
    else:
        assert not dpl & keys
        assert "diffprivlib" in status


def test_glm_dpbayes_rows_do_not_depend_on_diffprivlib() -> None:
    """diffprivlib's seeds come from a child stream: the splits and dpbayes' seeds, hence
    its numbers, are the same with and without the baseline."""
    if not diffprivlib_status()[0]:
        pytest.skip("diffprivlib does not import here (it runs in the bench environment)")
    from dpbayes.experiments import glm
    from dpbayes.privacy.noise import noise_source

    runs = []
    for with_baseline in (False, True):
        gen = noise_source(3).generator()
        child = gen.spawn(1)[0] if with_baseline else None
        runs.append(glm._diabetes((1.0,), 2, gen, child))
    ours = [[r["value"] for r in run if r["method"] != glm.DPL_LINEAR] for run in runs]
    assert ours[0] == ours[1]
    assert sum(r["method"] == glm.DPL_LINEAR for r in runs[1]) == 2
