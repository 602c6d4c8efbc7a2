"""``dpbayes experiment nonparametric --small``: files written, numbers sane."""

from __future__ import annotations

import csv

from dpbayes.experiments import run


def test_small_experiment_writes_tables_and_figures(tmp_path):
    paths = run("nonparametric", tmp_path, small=True, seed=0)
    names = {p.name for p in paths}
    assert {
        "nonparametric_w1_summary.csv",
        "nonparametric_w1_runs.csv",
        "nonparametric_coverage_runs.csv",
        "nonparametric_randhie.csv",
        "nonparametric_w1.png",
        "nonparametric_example.png",
        "nonparametric_randhie.png",
    } <= names
    assert all(p.stat().st_size > 0 for p in paths)
    rows = list(csv.DictReader((tmp_path / "nonparametric_w1_summary.csv").open()))
    assert len(rows) == 4
    for row in rows:
        w1 = [float(row[m]) for m in ("dp_mixture", "empirical_z", "deconvolution_kde", "npmle_em")]
        assert all(0 < v < 2 for v in w1)  # W1 between laws on [-1, 1] is at most 2
        assert 0 <= float(row["cdf_band_coverage"]) <= 1
    big = [r for r in rows if r["n"] == "400"]
    assert all(float(r["dp_mixture"]) < float(r["empirical_z"]) for r in big)
