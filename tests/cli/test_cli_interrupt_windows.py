"""Ctrl+C or SIGTERM landing as a rename completes (CPython runs the handler right after the
C call, before the next line notes the rename): `dpbayes privatize`'s publication of the
values with their guarantee, and `dpbayes release`'s ledger write. A real process, real
files and a real signal; only its timing is forced, by sending it to the process itself
right after the real os.replace returns."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

# argv: the signal's name, which os.replace calls send it (1-based, comma-separated), which
# one fails with ENOSPC instead of moving anything (0: none; a call that fails and sends
# sends first), then the dpbayes arguments
_SIGNAL_AFTER_A_RENAME = """
import errno, os, signal, sys
name, send, fail = sys.argv[1], sys.argv[2], int(sys.argv[3])
send = {int(n) for n in send.split(",")}
real, calls = os.replace, []
def replace(src, dst, *args, **kwargs):
    calls.append(dst)
    if len(calls) == fail:
        if len(calls) in send:  # the signal arrives, then the rename fails
            os.kill(os.getpid(), getattr(signal, name))
        raise OSError(errno.ENOSPC, "No space left on device", str(dst))
    real(src, dst, *args, **kwargs)
    if len(calls) in send:
        os.kill(os.getpid(), getattr(signal, name))
os.replace = replace
from dpbayes.cli import main
sys.exit(main(sys.argv[4:]))
"""


def _run(name: str, send: str, fail: int, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _SIGNAL_AFTER_A_RENAME, name, send, str(fail), *argv],
        capture_output=True,
        text=True,
        timeout=300,
    )


def _privatize(tmp_path: Path, old_values: bool, old_guarantee: bool) -> tuple[list[str], Path]:
    data = tmp_path / "data.csv"
    data.write_text("x\n" + "".join(f"{i % 5}\n" for i in range(20)))
    folder = tmp_path / "o"
    folder.mkdir()
    if old_values:
        (folder / "out.csv").write_text("x\nOLD\n")
    if old_guarantee:
        (folder / "out.guarantee.json").write_text('{"OLD": "guarantee"}\n')
    argv = ["privatize", "--data", str(data), "--column", "x", "--epsilon", "3", "--r", "5"]
    return [*argv, "--out", str(folder / "out.csv")], folder


# the renames, in order: [the old guarantee aside], the new values, the new guarantee
# (the old values are kept aside by a hard link, not a rename)
@pytest.mark.parametrize(
    ("old_values", "old_guarantee", "send"),
    [
        (False, False, "1"),  # as the new values land, with nothing before them
        (False, True, "2"),  # as the new values land beside the old guarantee
        (True, False, "2"),  # as the new guarantee lands beside the old values
        (True, True, "1"),  # as the old guarantee is set aside
        (True, True, "1,2,3"),  # at every rename
    ],
)
@pytest.mark.parametrize("name", ["SIGINT", "SIGTERM"])
def test_privatize_interrupted_as_a_rename_completes_publishes_the_pair_in_full(
    tmp_path: Path, name: str, old_values: bool, old_guarantee: bool, send: str
) -> None:
    """It ended with new values without a guarantee, new values beside the old guarantee,
    old values beside the new one, or the user's guarantee hidden under a dot name."""
    argv, folder = _privatize(tmp_path, old_values, old_guarantee)
    out = _run(name, send, 0, *argv)
    assert out.returncode == 130, out
    assert sorted(p.name for p in folder.iterdir()) == ["out.csv", "out.guarantee.json"]
    values = (folder / "out.csv").read_text().splitlines()
    assert values[0] == "x" and len(values) == 21 and "OLD" not in values
    assert json.loads((folder / "out.guarantee.json").read_text())["epsilon"] == 3
    assert out.stderr == (
        f"dpbayes: --out {folder / 'out.csv'} and its guarantee "
        f"{folder / 'out.guarantee.json'} were written (published)\ndpbayes: interrupted\n"
    ), out


def test_privatize_interrupted_then_failing_puts_the_previous_pair_back(
    tmp_path: Path,
) -> None:
    """A Ctrl+C as the new values land, then the guarantee's move fails: the previous
    pair is put back in full (as the flags say: the interrupt waited for them) and the
    interrupt then ends the command."""
    argv, folder = _privatize(tmp_path, True, True)
    out = _run("SIGINT", "2", 3, *argv)
    assert out.returncode == 130, out
    assert sorted(p.name for p in folder.iterdir()) == ["out.csv", "out.guarantee.json"]
    assert (folder / "out.csv").read_text() == "x\nOLD\n"
    assert (folder / "out.guarantee.json").read_text() == '{"OLD": "guarantee"}\n'
    assert out.stderr.endswith("dpbayes: interrupted\n"), out


@pytest.mark.parametrize("name", ["SIGINT", "SIGTERM"])
def test_release_interrupted_as_the_ledger_lands_shows_the_charged_release(
    tmp_path: Path, name: str
) -> None:
    """The ledger held the spend, the release was never shown (exit 130)."""
    ledger = tmp_path / "ledger.json"
    init = ["budget", "init", str(ledger), "--epsilon", "5"]
    subprocess.run([sys.executable, "-m", "dpbayes.cli", *init], check=True, timeout=300)
    data = tmp_path / "data.csv"
    data.write_text("x\n" + "".join(f"{i % 2}\n" for i in range(30)))
    record = tmp_path / "rec.json"
    out = _run(
        name, "1", 0, "release", "--data", str(data), "--column", "x", "--model",
        "beta-bernoulli", "--epsilon", "1", "--budget-file", str(ledger), "--json", str(record),
    )  # fmt: skip
    assert out.returncode == 130, out
    assert len(json.loads(ledger.read_text())["spends"]) == 1
    rec = json.loads(record.read_text())
    assert rec["budget"]["spends"] == 1 and "released" in rec, rec
    assert "interrupted" in out.stderr and "charged to --budget-file" in out.stderr, out


@pytest.mark.parametrize("name", ["SIGINT", "SIGTERM"])
def test_release_interrupted_as_the_ledger_save_fails_says_nothing_was_spent(
    tmp_path: Path, name: str
) -> None:
    """The signal arrives during the save, which then fails: the interrupt (deferred to the
    save's end) used to replace the failure's message, so the user was not told that
    nothing was spent."""
    ledger = tmp_path / "ledger.json"
    init = ["budget", "init", str(ledger), "--epsilon", "5"]
    subprocess.run([sys.executable, "-m", "dpbayes.cli", *init], check=True, timeout=300)
    before = ledger.read_text()
    data = tmp_path / "data.csv"
    data.write_text("x\n" + "".join(f"{i % 2}\n" for i in range(30)))
    out = _run(
        name, "1", 1, "release", "--data", str(data), "--column", "x", "--model",
        "beta-bernoulli", "--epsilon", "1", "--budget-file", str(ledger),
    )  # fmt: skip
    assert out.returncode == 130, out
    assert ledger.read_text() == before
    assert out.stdout == "", out
    lines = out.stderr.splitlines()
    assert lines[-1] == "dpbayes: interrupted", out
    assert lines[-2].startswith("dpbayes: error: ledger") and "nothing was spent" in lines[-2]


def test_an_interrupt_while_an_error_is_handled_does_not_report_that_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Only a failure the deferred signal superseded is shown; an exception that code was
    merely handling when Ctrl+C came is not the command's error."""
    import argparse

    from dpbayes.cli import _run

    def handler(args: argparse.Namespace) -> int:
        try:
            int("optional-setting")
        except ValueError:
            raise KeyboardInterrupt from None
        return 0

    assert _run(handler, argparse.Namespace()) == 130
    assert capsys.readouterr().err == "dpbayes: interrupted\n"
