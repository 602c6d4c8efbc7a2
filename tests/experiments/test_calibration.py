"""The calibration experiment (issue 10): files written, noise-aware posteriors calibrated."""

from __future__ import annotations

import csv
import math

from dpbayes.experiments import calibration


def test_small_run_writes_tables_and_figures(tmp_path):
    paths = calibration.run(tmp_path, small=True, seed=1)
    assert {p.name for p in paths} == {
        "calibration_coverage.csv",
        "calibration_ranks.csv",
        "calibration_coverage.png",
        "calibration_sbc.png",
    }
    assert all(p.stat().st_size > 0 for p in paths)
    rows = list(csv.DictReader((tmp_path / "calibration_coverage.csv").open()))
    assert len(rows) == len(calibration.SETTINGS) * 4 * 3 * 3
    # pooled over the 8 mechanisms x 4 eps, the noise-aware 90% coverage is nominal
    aware = [r for r in rows if r["posterior"] == "noise-aware" and r["level"] == "0.9"]
    reps = int(aware[0]["reps"]) * len(aware)
    pooled = sum(float(r["coverage"]) * int(r["reps"]) for r in aware) / reps
    assert abs(pooled - 0.9) <= 3.891 * math.sqrt(0.09 / reps)
