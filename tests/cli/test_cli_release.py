"""End-to-end tests of `dpbayes release`, `budget` and `demo` through subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest


def dpbayes(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dpbayes.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
    )


def test_release_on_bundled_data_prints_posterior_interval_and_guarantee() -> None:
    r = dpbayes(
        "release",
        "--model",
        "beta-bernoulli",
        "--prior",
        "1",
        "1",
        "--epsilon",
        "1",
        "--mechanism",
        "laplace",
    )
    assert r.returncode == 0, r.stderr
    assert "Beta(" in r.stdout and "credible interval" in r.stdout
    assert "1-DP, substitute one record" in r.stdout and "hlthp" in r.stdout


def test_release_json_and_plot(tmp_path: Path) -> None:
    csv = tmp_path / "people.csv"
    pd.DataFrame({"smoker": [1, 0, 0, 1, 1, 0, 0, 0] * 25}).to_csv(csv, index=False)
    png = tmp_path / "post.png"
    r = dpbayes(
        "release",
        "--data",
        str(csv),
        "--column",
        "smoker",
        "--model",
        "beta-bernoulli",
        "--epsilon",
        "0.5",
        "--json",
        "--plot",
        str(png),
        "--seed",
        "3",
    )
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["guarantee"]["epsilon"] == 0.5 and doc["guarantee"]["simulation"] is True
    assert doc["public"]["n"] == 200
    lo, hi = doc["credible_interval"]["bounds"]
    assert 0 <= lo < hi <= 1
    assert png.stat().st_size > 1000 and png.read_bytes()[:4] == b"\x89PNG"


def test_dirichlet_and_normal_mean_on_bundled_data() -> None:
    r = dpbayes(
        "release",
        "--model",
        "dirichlet-categorical",
        "--epsilon",
        "1",
        "--mechanism",
        "geometric",
        "--json",
    )
    assert r.returncode == 0, r.stderr
    assert len(json.loads(r.stdout)["released"]["counts"]) == 4
    r = dpbayes(
        "release",
        "--model",
        "normal-mean",
        "--column",
        "mdvis",
        "--bounds",
        "0",
        "20",
        "--epsilon",
        "1",
    )
    assert r.returncode == 0, r.stderr
    assert "Normal(" in r.stdout


def test_budget_file_is_spent_and_exhaustion_is_a_clean_error(tmp_path: Path) -> None:
    ledger = tmp_path / "team.ledger"
    assert dpbayes("budget", "init", str(ledger), "--epsilon", "1.5").returncode == 0
    ok = dpbayes("release", "--epsilon", "1", "--budget-file", str(ledger))
    assert ok.returncode == 0, ok.stderr
    refused = dpbayes("release", "--epsilon", "1", "--budget-file", str(ledger))
    assert refused.returncode == 2
    assert refused.stdout == ""
    assert refused.stderr.count("\n") == 1 and "budget exceeded" in refused.stderr
    show = dpbayes("budget", "show", str(ledger), "--json")
    assert json.loads(show.stdout)["spent"]["epsilon"] == pytest.approx(1.0)


def test_damaged_ledger_is_an_error_not_a_fresh_budget(tmp_path: Path) -> None:
    ledger = tmp_path / "team.ledger"
    dpbayes("budget", "init", str(ledger), "--epsilon", "1")
    ledger.write_text(ledger.read_text().replace('"epsilon": 1.0', '"epsilon": 100.0'))
    r = dpbayes("release", "--epsilon", "1", "--budget-file", str(ledger))
    assert r.returncode == 2 and "damaged" in r.stderr


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--epsilon", "0"], "epsilon"),
        (["--epsilon", "-1"], "epsilon"),
        (["--epsilon", "nan"], "epsilon"),
        (["--epsilon", "1", "--delta", "1.5"], "delta"),
        (["--epsilon", "1", "--column", "nosuch"], "nosuch"),
        (["--epsilon", "1", "--column", "mdvis"], "mdvis"),  # counts, not 0/1
        (["--epsilon", "1", "--data", "/no/such.csv", "--column", "x"], "such.csv"),
        (["--epsilon", "1", "--prior", "0", "1"], "alpha"),
        (["--epsilon", "1", "--mechanism", "magic"], "mechanism"),
        (["--epsilon", "1", "--budget-file", "/no/such.ledger"], "such.ledger"),
    ],
)
def test_bad_input_is_one_line_exit_2(args: list[str], needle: str) -> None:
    r = dpbayes("release", *args)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert r.stderr.count("\n") == 1, r.stderr
    assert "Traceback" not in r.stderr and needle in r.stderr


def test_demo_runs_quickly_and_shows_real_releases(tmp_path: Path) -> None:
    start = time.perf_counter()
    r = dpbayes("demo", "--out", str(tmp_path / "demo"), cwd=tmp_path)
    elapsed = time.perf_counter() - start
    assert r.returncode == 0, r.stderr
    assert elapsed < 60
    assert r.stdout.count("private posterior") == 3 and "refused" in r.stdout
    assert len(list((tmp_path / "demo").glob("*.png"))) == 3
