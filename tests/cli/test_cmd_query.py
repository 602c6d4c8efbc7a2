"""``dpbayes query``: in process through ``cli.main``, and once end to end by subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from dpbayes.cli import main
from dpbayes.data import bundled_path


def run_json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict]:
    code = main(["query", *args, "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_query_creates_continues_and_refuses(tmp_path: Path, capsys) -> None:
    state = str(tmp_path / "st")
    code, a = run_json(
        capsys, "--state", state, "--data", str(bundled_path("randhie")),
        "--attribute", "health=excellent,good,fair,poor", "--attribute", "mdvis=bins:0,1,5,inf",
        "--epsilon", "1", "--where", "health = poor", "--half-width", "20",
        "--confidence", "0.95", "--seed", "3",
    )  # fmt: skip
    assert code == 0 and a["status"] == "fresh" and a["epsilon"] > 0
    assert "add/remove one record" in a["guarantee"]
    code, b = run_json(
        capsys, "--state", state, "--where", "health = poor", "--half-width", "30",
        "--confidence", "0.9",
    )  # fmt: skip
    assert code == 0 and b["status"] == "history" and b["epsilon"] == 0.0
    assert b["estimate"] == a["estimate"]
    assert b["remaining_epsilon"] == a["remaining_epsilon"]
    code = main(
        ["query", "--state", state, "--where", "mdvis >= 5", "--half-width", "0.1",
         "--confidence", "0.99", "--seed", "1"]
    )  # fmt: skip
    assert code == 3 and capsys.readouterr().out.startswith("refused")
    ledger = json.loads((tmp_path / "st" / "ledger.json").read_text())
    assert len(ledger["spends"]) == 1
    # End to end: a bad predicate is one line on stderr and exit code 2, nothing spent.
    bad = subprocess.run(
        [sys.executable, "-m", "dpbayes.cli", "query", "--state", state, "--where",
         "health = bad", "--half-width", "30", "--confidence", "0.9"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert bad.returncode == 2 and "not in the domain" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1
    assert len(json.loads((tmp_path / "st" / "ledger.json").read_text())["spends"]) == 1


def test_query_needs_a_cube_first(tmp_path: Path, capsys) -> None:
    code = main(
        ["query", "--state", str(tmp_path / "x"), "--where", "a = 1", "--half-width", "1",
         "--confidence", "0.9"]
    )  # fmt: skip
    assert code == 2 and "first call needs" in capsys.readouterr().err
