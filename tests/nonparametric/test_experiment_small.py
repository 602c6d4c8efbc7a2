"""``dpbayes experiment nonparametric --small``: files written, numbers sane."""

from __future__ import annotations

import csv

import pytest

from dpbayes.experiments import run


@pytest.mark.slow
def test_small_experiment_writes_tables_and_figures(tmp_path):
    paths = run("nonparametric", tmp_path, small=True, seed=0)
    names = {p.name for p in paths}
    assert {
        "nonparametric_summary.csv",
        "nonparametric_w1_runs.csv",
        "nonparametric_coverage_runs.csv",
        "nonparametric_sbc_runs.csv",
        "nonparametric_sbc_summary.csv",
        "nonparametric_mixing.csv",
        "nonparametric_real.csv",
        "nonparametric_w1.png",
        "nonparametric_coverage.png",
        "nonparametric_sbc_ranks.png",
        "nonparametric_example.png",
        "nonparametric_mixing.png",
        "nonparametric_real.png",
    } <= names
    assert all(p.stat().st_size > 0 for p in paths)
    rows = list(csv.DictReader((tmp_path / "nonparametric_summary.csv").open()))
    assert {(r["mechanism"], r["epsilon"], r["n"]) for r in rows} == {
        ("laplace", "1.0", "200"),
        ("laplace", "1.0", "500"),
        ("laplace", "2.0", "200"),
        ("laplace", "2.0", "500"),
        ("gaussian", "2.0", "300"),
    }
    for row in rows:
        methods = (
            "dp_mixture",
            "dp_mixture_median",
            "npmle",
            "npmle_em",
            "deconvolution_kde",
            "empirical_z",
        )
        w1 = [float(row[f"median_w1_{m}"]) for m in methods]
        assert all(0 < v < 2 for v in w1)  # W1 between laws on [-1, 1] is at most 2
        assert 0 <= float(row["pointwise_coverage"]) <= 1
        assert float(row["simultaneous_coverage"]) in (0.0, 1.0)  # one run per cell
    big = [r for r in rows if r["n"] == "500"]
    assert all(float(r["median_w1_dp_mixture"]) < float(r["median_w1_empirical_z"]) for r in big)
    sbc = list(csv.DictReader((tmp_path / "nonparametric_sbc_runs.csv").open()))
    assert len(sbc) == 3 * 19 and all(0 <= int(r["rank"]) <= int(r["thin"]) for r in sbc)
    mixing = list(csv.DictReader((tmp_path / "nonparametric_mixing.csv").open()))
    assert [r["sampler"] for r in mixing] == ["gibbs (paper)", "gibbs + label-integrated moves"]
    real = {r["data"] for r in csv.DictReader((tmp_path / "nonparametric_real.csv").open())}
    assert real == {"randhie", "diabetes_bmi"}


def test_small_bands_experiment_checks_credible_and_calibrated_bands(tmp_path):
    paths = run("nonparametric_bands", tmp_path, small=True, seed=0)
    assert {p.name for p in paths} == {
        "nonparametric_bands_runs.csv",
        "nonparametric_bands_summary.csv",
        "nonparametric_bands.png",
    }
    runs = list(csv.DictReader((tmp_path / "nonparametric_bands_runs.csv").open()))
    assert len(runs) == 2
    for r in runs:
        for key in ("credible_pointwise_coverage", "calibrated_pointwise_coverage"):
            assert 0.0 <= float(r[key]) <= 1.0
        assert 0.0 < float(r["calibrated_pointwise_level"]) < 1.0
        # a band at a lower credible level is narrower
        if float(r["calibrated_pointwise_level"]) < 0.95:
            assert float(r["calibrated_pointwise_width"]) <= float(r["credible_pointwise_width"])
    (summary,) = list(csv.DictReader((tmp_path / "nonparametric_bands_summary.csv").open()))
    mean = sum(float(r["calibrated_pointwise_coverage"]) for r in runs) / 2
    assert float(summary["calibrated_pointwise_coverage"]) == pytest.approx(mean, abs=1e-3)
