"""The query-answering experiment (paper 000), small version."""

from __future__ import annotations

import csv
from pathlib import Path

from dpbayes.experiments import query_answering


def _read(path: Path) -> list[dict[str, str]]:
    with path.open() as fh:
        return list(csv.DictReader(fh))


def test_query_answering_small(tmp_path: Path) -> None:
    assert query_answering.NAME == "query-answering"
    paths = query_answering.run(tmp_path, small=True, seed=0)
    names = {p.name for p in paths}
    assert {"methods.png", "budget.png", "coverage.png", "budget_summary.csv"} <= names
    assert all(p.stat().st_size > 0 for p in paths)
    methods = _read(tmp_path / "methods.csv")
    for row in methods:
        # every method's achieved error is within its own reported error (3 sigma for MC)
        assert float(row["abs_error"]) <= float(row["reported_error"]) + 1e-9
    for row in _read(tmp_path / "budget_summary.csv"):
        assert float(row["engine_spent"]) <= float(row["fresh_only_spent"]) * (1 + 1e-6)
        assert int(row["answered_engine"]) >= int(row["answered_fresh_only"])
    cov = _read(tmp_path / "coverage.csv")
    assert cov and all(r["status"] in ("fresh", "history") for r in cov)
