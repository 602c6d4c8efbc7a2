"""The expmech-accuracy experiment (paper 003 §3.1-3.2), small version."""

from __future__ import annotations

import csv
from pathlib import Path

from dpbayes.experiments import expmech_accuracy


def test_expmech_accuracy_small(tmp_path: Path) -> None:
    assert expmech_accuracy.NAME == "expmech-accuracy"
    paths = expmech_accuracy.run(tmp_path, small=True, seed=0)
    names = {p.name for p in paths}
    assert {
        "expmech_accuracy.png",
        "expmech_accuracy_summary.csv",
        "expmech_reduction.png",
    } <= names
    assert all(p.stat().st_size > 0 for p in paths)
    with (tmp_path / "expmech_accuracy_summary.csv").open() as fh:
        summary = list(csv.DictReader(fh))
    assert len(summary) == 2 * 2 * 5  # n x eps x mechanisms
    med = {(r["n"], r["epsilon"], r["mechanism"]): float(r["median_hellinger"]) for r in summary}
    assert all(0.0 <= v <= 1.0 for v in med.values())
    # global sensitivity is set by the edge data sets: at n = 100 it is far worse than Laplace
    assert med[("100", "1.0", "expmech-global")] > 3 * med[("100", "1.0", "laplace")]
    # §3.1: for every data set the largest utility change is at the candidate r = BI(x)
    with (tmp_path / "expmech_reduction.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    for k in {r["k"] for r in rows}:
        mine = [r for r in rows if r["k"] == k]
        top = max(float(r["max_utility_change"]) for r in mine)
        at_x = next(float(r["max_utility_change"]) for r in mine if r["candidate"] == k)
        assert at_x == top
