"""Faults from a review of the CLI: each test runs the command on real files (in process
through ``cli.main``, or by subprocess where a signal or a closed stream is the point)."""

from __future__ import annotations

from pathlib import Path

from dpbayes.cli import main


def _small_csv(tmp_path: Path) -> Path:
    path = tmp_path / "d.csv"
    path.write_text("health\n" + "poor\nfair\ngood\n" * 20)
    return path


def _query(state: Path, *extra: str) -> int:
    return main(
        ["query", "--state", str(state), "--where", "health = poor", "--half-width", "30",
         "--confidence", "0.9", *extra]
    )  # fmt: skip


def test_query_refuses_a_fresh_budget_when_the_ledger_is_lost(tmp_path: Path, capsys) -> None:
    state = tmp_path / "st"
    first = ("--data", str(_small_csv(tmp_path)), "--attribute", "health=poor,fair,good")
    assert _query(state, *first, "--epsilon", "1") == 0
    assert (
        main(["query", "--state", str(state), "--where", "health = fair", "--half-width",
              "30", "--confidence", "0.9"]) == 0
    )  # fmt: skip
    capsys.readouterr()
    history = (state / "history.jsonl").read_text()
    (state / "ledger.json").unlink()
    for extra in ((), ("--epsilon", "1")):
        assert _query(state, *extra) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "ledger missing" in err
        assert "2 charged answers" in err and "refusing a fresh budget" in err
        assert not (state / "ledger.json").exists()
        assert (state / "history.jsonl").read_text() == history
    # the cube's definition lost as well: the engine itself refuses, nothing created
    (state / "cube.json").unlink()
    assert _query(state, *first, "--epsilon", "1") == 2
    assert "2 charged answers" in capsys.readouterr().err
    assert not (state / "ledger.json").exists() and not (state / "cube.json").exists()
    assert (state / "history.jsonl").read_text() == history
