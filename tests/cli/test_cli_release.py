"""End-to-end tests of `dpbayes release`, `budget` and `demo` through subprocess."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from dpbayes.cli import main


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
    assert "Beta(" in r.stdout and "credible interval" in r.stdout and "hlthp" in r.stdout
    # the bundled data's default unit: one person, <= 5 rows, which keeps every row;
    # add/remove one user with n private (issue 14, defect 3), so n is not printed
    assert "(n = " not in r.stdout
    assert "1-DP, add/remove one user (<= 5 rows)" in r.stdout and "sensitivity 5" in r.stdout


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
    # issue 16: the noise-aware posterior leads, as a labelled object; the naive one is labelled
    assert next(iter(doc)) == "noise_aware_posterior"
    aware = doc["noise_aware_posterior"]
    assert aware["interval"]["level"] == 0.95
    lo, hi = aware["interval"]["bounds"]
    assert 0 <= lo < aware["mean"] < hi <= 1
    assert doc["naive_posterior"]["label"] == "treats the noise as data; over-confident"
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
    doc = json.loads(r.stdout)
    assert len(doc["released"]["counts"]) == 4
    assert doc["guarantee"]["sensitivity"] == 5.0  # add/remove: L1 1 per row x 5 rows
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
    assert "Normal(" in r.stdout and "add/remove one user (<= 5 rows)" in r.stdout


def release_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict:
    """``dpbayes release ... --json`` in process (the subprocess path is tested above)."""
    assert main(["release", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_privacy_unit_flags_on_bundled_and_own_data(tmp_path: Path, capsys) -> None:
    g = release_json(capsys, "--epsilon", "1", "--record-level", "--seed", "1")["guarantee"]
    assert g["sensitivity"] == 1.0 and "privacy_unit" not in g["details"]
    doc = release_json(capsys, "--epsilon", "1", "--max-rows-per-user", "3", "--seed", "1")
    assert doc["public"]["n"] is None and doc["guarantee"]["sensitivity"] == 3.0
    assert doc["guarantee"]["details"]["neighbouring_relation"] == "add/remove one user (<= 3 rows)"
    csv = tmp_path / "visits.csv"
    pd.DataFrame({"pid": [i // 4 for i in range(200)], "smoker": [1, 0] * 100}).to_csv(csv)
    own = ["--data", str(csv), "--column", "smoker", "--epsilon", "1", "--seed", "2"]
    doc = release_json(capsys, *own)  # your data: record level by default
    assert doc["public"]["n"] == 200 and doc["guarantee"]["sensitivity"] == 1.0
    doc = release_json(capsys, *own, "--user-column", "pid", "--max-rows-per-user", "2")
    assert doc["public"]["n"] is None and doc["guarantee"]["sensitivity"] == 2.0
    # user level: substitute, and the mechanisms that publish n, are refused in one line
    for extra, needle in (
        (["--neighbours", "substitute"], "not available on user-level data"),
        (["--mechanism", "input"], "user-level data keep n private"),
        (["--mechanism", "expmech"], "user-level data keep n private"),
    ):
        code = main(["release", *own, "--user-column", "pid", "--max-rows-per-user", "2", *extra])
        err = capsys.readouterr().err
        assert code == 2 and err.count("\n") == 1 and needle in err, err


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--record-level", "--user-column", "person"], "--record-level excludes --user-column"),
        (["--record-level", "--max-rows-per-user", "2"], "--record-level excludes"),
        (["--max-rows-per-user", "0"], "--max-rows-per-user must be >= 1"),
        (["--max-rows-per-user", "-3"], "--max-rows-per-user must be >= 1"),
        (["--user-column", "nosuch", "--max-rows-per-user", "2"], "'nosuch' not found"),
        (["--user-column", "year"], "--user-column needs --max-rows-per-user"),
    ],
)
def test_privacy_unit_errors_are_one_line(args: list[str], needle: str, capsys) -> None:
    assert main(["release", "--epsilon", "1", *args]) == 2
    out = capsys.readouterr()
    assert out.out == "" and out.err.count("\n") == 1 and needle in out.err, out.err


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


def test_seed_with_budget_file_is_refused_by_name(tmp_path: Path) -> None:
    """Issue 14, defect 5: seeded noise never spends a real ledger."""
    ledger = tmp_path / "team.ledger"
    assert dpbayes("budget", "init", str(ledger), "--epsilon", "5").returncode == 0
    r = dpbayes("release", "--epsilon", "1", "--seed", "1", "--budget-file", str(ledger))
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and "--seed" in r.stderr and "--budget-file" in r.stderr
    show = dpbayes("budget", "show", str(ledger), "--json")
    assert json.loads(show.stdout)["spent"]["epsilon"] == 0.0


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
    # issue 16: the noise-aware posterior first, the naive one labelled, the exact one the
    # curator's only
    assert r.stdout.count("noise-aware posterior (publishable") == 3 and "refused" in r.stdout
    assert r.stdout.count("naive posterior (treats the noise as data; over-confident)") == 3
    assert r.stdout.count("exact posterior (curator only, never published)") == 3
    for block in r.stdout.split("== ")[1:]:
        assert block.index("noise-aware") < block.index("naive") < block.index("exact")
    assert "Guarantees below protect one person: all of their rows, at most 5" in r.stdout
    assert "20190 of 20190 person-years kept" in r.stdout
    assert r.stdout.count("add/remove one user (<= 5 rows)") == 3
    assert "one record" not in r.stdout
    assert len(list((tmp_path / "demo").glob("*.png"))) == 3
    # sensible: the private share of poor health is the exact 303 / 20,192 up to Laplace(5)
    # noise on the counts (off by > 100 counts with probability e^-20)
    a, b = map(float, re.search(r"\n\s+Beta\(a=([\d.]+), b=([\d.]+)\)", r.stdout).groups())
    assert abs(a / (a + b) - 303 / 20_192) < 100 / 20_192


def test_demo_record_level_opt_out(tmp_path: Path) -> None:
    r = dpbayes("demo", "--out", str(tmp_path / "d"), "--record-level", "--seed", "1")
    assert r.returncode == 0, r.stderr
    assert "protect one person-year (one row), not one person" in r.stdout
    assert r.stdout.count("substitute one record") == 3


def test_posterior_of_the_default_person_level_release(tmp_path: Path, capsys) -> None:
    """The CLI's default release (one person, n private) has a noise-aware posterior."""
    rel = dpbayes("release", "--epsilon", "0.05", "--json", "--seed", "3")
    assert rel.returncode == 0, rel.stderr
    path = tmp_path / "rel.json"
    path.write_text(rel.stdout)
    assert json.loads(rel.stdout)["public"]["n"] is None  # add/remove one user: n private
    r = dpbayes("posterior", "--release", str(path), "--level", "0.9", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)["noise_aware_posterior"]
    lo, hi = out["interval"]["bounds"]
    assert 0.0 < lo < out["mean"] < hi < 0.1
    assert out["n_prior"]["kind"] == "flat" and out["omitted_mass"] < 1e-9
    assert main(["posterior", "--release", str(path)]) == 0
    assert "prior on n: flat (improper uniform) prior on n >= 0" in capsys.readouterr().out
    assert main(["posterior", "--release", str(path), "--n-prior", "20190", "100", "--json"]) == 0
    normal = json.loads(capsys.readouterr().out)["noise_aware_posterior"]
    assert normal["n_prior"]["kind"] == "normal"
    assert main(["posterior", "--release", str(path), "--n-prior", "20190", "-1"]) == 2
    assert "n_prior sd" in capsys.readouterr().err
