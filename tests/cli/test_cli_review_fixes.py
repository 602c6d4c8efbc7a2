"""Faults from a review of the CLI: each test runs the command on real files (in process
through ``cli.main``, or by subprocess where a signal or a closed stream is the point)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

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


def _cli(*args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dpbayes.cli", *args],
        capture_output=True, text=True, timeout=300, **kw,
    )  # fmt: skip


def _spends(ledger: Path) -> int:
    return len(json.loads(ledger.read_text())["spends"])


def _budget(tmp_path: Path) -> Path:
    ledger = tmp_path / "l.ledger"
    assert main(["budget", "init", str(ledger), "--epsilon", "5"]) == 0
    return ledger


# SIGTERM while the figure is drawn (after the charge): a real signal to a real process
_SIGTERM_WHILE_PLOTTING = """
import os, signal, sys, time
import dpbayes.cli.release_run as rr
def plot(*a, **k):
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(5)
rr._plot = plot
from dpbayes.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_sigterm_while_the_figure_is_drawn_still_shows_the_charged_release(
    tmp_path: Path,
) -> None:
    ledger = _budget(tmp_path)
    out = subprocess.run(
        [sys.executable, "-c", _SIGTERM_WHILE_PLOTTING, "release", "--epsilon", "1",
         "--budget-file", str(ledger), "--out", str(tmp_path / "f.png")],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert _spends(ledger) == 1
    assert out.returncode == 130, out
    assert "released:" in out.stdout  # the record came before the figure
    assert "interrupted" in out.stderr and "was made and charged to --budget-file" in out.stderr


def test_a_closed_stdout_is_refused_before_any_noise(tmp_path: Path) -> None:
    ledger = _budget(tmp_path)
    out = _cli(
        "release", "--epsilon", "1", "--budget-file", str(ledger),
        preexec_fn=lambda: os.close(1),
    )  # fmt: skip
    assert out.returncode == 2 and "stdout is closed" in out.stderr
    assert len(out.stderr.splitlines()) == 1 and _spends(ledger) == 0


@pytest.mark.parametrize("json_flag", [(), ("--json",)])
def test_a_reader_gone_after_the_charge_gets_the_release_on_stderr(
    tmp_path: Path, json_flag: tuple[str, ...]
) -> None:
    ledger = _budget(tmp_path)
    p = subprocess.Popen(
        [sys.executable, "-m", "dpbayes.cli", "release", "--epsilon", "1", "--budget-file",
         str(ledger), *json_flag],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert p.stdout is not None and p.stderr is not None
    p.stdout.close()  # the reader quits before anything is written (`| true`)
    err = p.stderr.read()
    assert p.wait(timeout=300) == 2
    assert _spends(ledger) == 1
    first, record = err.splitlines()
    assert "could not write stdout" in first and "was made and charged" in first
    assert "counts" in json.loads(record)["released"]


def test_query_with_its_reader_gone_shows_the_charged_answer_on_stderr(tmp_path: Path) -> None:
    state = tmp_path / "st"
    p = subprocess.Popen(
        [sys.executable, "-m", "dpbayes.cli", "query", "--state", str(state), "--data",
         str(_small_csv(tmp_path)), "--attribute", "health=poor,fair,good", "--epsilon", "1",
         "--where", "health = poor", "--half-width", "30", "--confidence", "0.9"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert p.stdout is not None and p.stderr is not None
    p.stdout.close()
    err = p.stderr.read()
    assert p.wait(timeout=300) == 2
    first, record = err.splitlines()
    assert "could not write stdout" in first and "charged" in first
    assert json.loads(record)["status"] == "fresh"
    out = _cli(
        "query", "--state", str(state), "--where", "health = fair", "--half-width", "30",
        "--confidence", "0.9", preexec_fn=lambda: os.close(1),
    )  # fmt: skip
    assert out.returncode == 2 and "stdout is closed" in out.stderr
    assert _spends(state / "ledger.json") == 1


def _fill_disk_at(monkeypatch: pytest.MonkeyPatch, target: str) -> None:
    """The disk fills while ``target`` ("csv" or "sidecar") is written: half of it lands
    on disk, then ENOSPC (a real full disk needs a mount)."""
    import errno

    import pandas as pd

    def full(path: Any, text: str) -> None:
        Path(path).write_bytes(text[: len(text) // 2].encode())
        raise OSError(errno.ENOSPC, "No space left on device")

    if target == "csv":
        monkeypatch.setattr(
            pd.DataFrame, "to_csv", lambda self, path, **kw: full(path, self.to_string())
        )
    else:
        real = Path.write_text

        def write_text(self: Path, text: str, *a: Any, **kw: Any) -> int:
            if "guarantee" in self.name:
                full(self, text)
            return real(self, text, *a, **kw)

        monkeypatch.setattr(Path, "write_text", write_text)


@pytest.mark.parametrize("target", ["csv", "sidecar"])
def test_privatize_on_a_full_disk_leaves_no_values_and_keeps_the_old_out(
    tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch, target: str
) -> None:
    data = tmp_path / "d.csv"
    data.write_text("income\n" + "".join(f"{i / 10}\n" for i in range(300)))
    folder = tmp_path / "o"
    folder.mkdir()
    (folder / "z.csv").write_text("old privatised values\n")
    (folder / "z.guarantee.json").write_text("{}\n")
    _fill_disk_at(monkeypatch, target)
    code = main(
        ["privatize", "--data", str(data), "--column", "income", "--epsilon", "1", "--r", "3",
         "--out", str(folder / "z.csv")]
    )  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    named = "z.csv (No space" if target == "csv" else "z.guarantee.json (No space"
    assert named in err and "nothing was published" in err
    assert sorted(p.name for p in folder.iterdir()) == ["z.csv", "z.guarantee.json"]
    assert (folder / "z.csv").read_text() == "old privatised values\n"
    assert (folder / "z.guarantee.json").read_text() == "{}\n"


def test_query_refuses_numeric_bins_over_a_text_column(tmp_path: Path, capsys) -> None:
    """A schema fact (the column's type), refused before anything is spent. (A CSV file
    has no schema: there the refusal came from one record, "yes", that made the engine
    guess text, so it told whether such a record is in the data; a CSV's bins now read
    each field by itself, tests/cli/test_cli_query_csv_neighbours.py.)"""
    import pandas as pd

    data = tmp_path / "d.parquet"
    pd.DataFrame({"x": ["1", "0", "yes", "1"]}).to_parquet(data)
    state = tmp_path / "st"
    code = main(
        ["query", "--state", str(state), "--data", str(data), "--attribute", "x=bins:0,1,inf",
         "--epsilon", "1000", "--where", "", "--half-width", "0.01", "--confidence", "0.9"]
    )  # fmt: skip
    out = capsys.readouterr()
    assert code == 2 and out.out == "" and out.err.count("\n") == 1
    assert "column 'x' is not numeric" in out.err and "nothing was spent" in out.err
    assert not state.exists()


@pytest.mark.parametrize(
    ("body", "attribute"),
    [("1\n\n5\nnan\n1\n", "x=bins:0,2"), ("a\nb\nc\n", "x=a,b")],
)
def test_records_outside_the_domain_do_not_change_what_query_says(
    tmp_path: Path, capsys, body: str, attribute: str
) -> None:
    """A review: a refusal naming how many records were NULL or outside the domain
    published exact counts for free (one call per threshold rebuilt a histogram). Data
    with and without such records now behave alike: answered and charged, and nothing in
    the output counts the records left out (an empty --where is 'all records in the
    domain')."""
    inside = "".join(v + "\n" for v in body.splitlines() if v in ("1", "a", "b"))
    outs = []
    for name, rows in (("with", body), ("without", inside)):
        data = tmp_path / f"{name}.csv"
        data.write_text("x\n" + rows)
        state = tmp_path / f"st-{name}"
        code = main(
            ["query", "--state", str(state), "--data", str(data), "--attribute", attribute,
             "--epsilon", "1000", "--where", "", "--half-width", "100", "--confidence", "0.9"]
        )  # fmt: skip
        out = capsys.readouterr()
        assert code == 0, out.err
        assert "records of column" not in out.err
        outs.append(re.sub(r"-?\d+\.\d+(e[-+]?\d+)?", "#", out.out))
    assert outs[0].replace("with.csv", "") == outs[1].replace("without.csv", "")


def test_a_repeated_attribute_name_is_refused(tmp_path: Path, capsys) -> None:
    state = tmp_path / "st"
    code = main(
        ["query", "--state", str(state), "--attribute", "health=excellent,good",
         "--attribute", "health=fair", "--epsilon", "1", "--where", "", "--half-width", "100",
         "--confidence", "0.9"]
    )  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "--attribute 'health' is given twice" in err
    assert not state.exists()
    pytest.importorskip("uvicorn")
    code = main(
        ["serve", "--db", f"sqlite:///{tmp_path / 's.db'}", "--epsilon", "1", "--attributes",
         "health=excellent,good", "health=fair", "--port", "1"]
    )  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and "--attribute 'health' is given twice" in err
    assert not (tmp_path / "s.db").exists()


def test_dirichlet_categories_match_a_numeric_coded_column(tmp_path: Path, capsys) -> None:
    data = tmp_path / "codes.csv"
    data.write_text("c\n1\n2\n1\n3\n")
    base = ["release", "--data", str(data), "--column", "c", "--model",
            "dirichlet-categorical", "--epsilon", "1", "--record-level", "--json"]  # fmt: skip
    assert main([*base, "--categories", "1", "2", "3"]) == 0
    rec = json.loads(capsys.readouterr().out)
    assert rec["model"]["categories"] == [1, 2, 3] and len(rec["released"]["counts"]) == 3
    # labels not all numbers: the column is read as text (from the labels, not the data),
    # and the file's 2 is outside them: the one refusal a value outside the domain gets
    assert main([*base, "--categories", "1", "two", "3"]) == 2
    err = capsys.readouterr().err
    assert "not one of the categories" in err and err.count("\n") == 1


@pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0 or shutil.which("setpriv") is None,
    reason="needs root to run the CLI as an unprivileged user (setpriv)",
)
def test_a_read_only_install_without_a_home_still_releases(
    request: pytest.FixtureRequest,
) -> None:
    """As `nobody`: the source tree is not writable and HOME does not exist, so numba's
    cache=True had nowhere to go and every release was a traceback. (TMPDIR is a folder
    nobody can reach: under tmp_path, private to root, tempfile fell back to /tmp unseen.)"""
    tmp_path = Path(tempfile.mkdtemp(prefix="dpbayes-test-"))
    request.addfinalizer(lambda: shutil.rmtree(tmp_path, ignore_errors=True))
    tmp_path.chmod(0o777)
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "XDG_CACHE_HOME")}
    env.update(HOME="/nonexistent", PYTHONDONTWRITEBYTECODE="1", TMPDIR=str(tmp_path))
    nobody = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", sys.executable]
    probe = subprocess.run(
        [*nobody, "-c", "import dpbayes.cli"], capture_output=True, timeout=60, env=env,
        cwd=tmp_path,
    )  # fmt: skip
    if probe.returncode != 0:  # e.g. a virtual environment in a private (0700) folder
        pytest.skip("this Python or its dpbayes is not readable by the user nobody")
    out = subprocess.run(
        [*nobody, "-m", "dpbayes.cli", "release", "--epsilon", "1", "--seed", "1"],
        capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path,
    )  # fmt: skip
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr[-500:]
    assert "released:" in out.stdout
    assert not list(tmp_path.glob("dpbayes-numba-*"))  # the temporary cache is removed


def test_after_the_noise_the_cli_says_what_was_made_and_what_was_charged(
    tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch, full_disk_json: Any
) -> None:
    monkeypatch.setattr("dpbayes.cli.release_run.emit_json", full_disk_json)
    code = main(["release", "--epsilon", "1", "--seed", "1", "--json", str(tmp_path / "r.json")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert "the simulation (seeded noise, not a release) was made" in err
    assert "no ledger was charged" in err and "(charged)" not in err
    ledger = _budget(tmp_path)
    code = main(
        ["release", "--epsilon", "1", "--budget-file", str(ledger), "--json",
         str(tmp_path / "r.json")]
    )  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and f"the release was made and charged to --budget-file {ledger}" in err


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["query", "--attribute", "x=bins:abc"], "--attribute x=bins:...: not a number: 'abc'"),
        (["query", "--attribute", "x=bins:3,1"], "--attribute x=bins:...: edges must be"),
        (["privatize", "--r", "1e308"], "--r 1e+308: "),
        (["privatize", "--data", "{empty}"], "the file is empty"),
        (["privatize", "--data", "{header}"], "column 'x' has no rows to privatise"),
        (["budget", "init", "{ledger}", "--epsilon", "1"], "`dpbayes budget show "),
    ],
)
def test_errors_name_the_flag_or_the_command(
    tmp_path: Path, capsys, argv: list[str], said: str
) -> None:
    files = {"empty": tmp_path / "e.csv", "header": tmp_path / "h.csv", "ledger": _budget(tmp_path)}
    files["empty"].write_text("")
    files["header"].write_text("x\n")
    (tmp_path / "d.csv").write_text("x\n1\n2\n")
    capsys.readouterr()
    argv = [a.format(**files) for a in argv]
    if argv[0] == "query":
        argv += ["--state", str(tmp_path / "st"), "--epsilon", "1", "--where", "",
                 "--half-width", "1", "--confidence", "0.9"]  # fmt: skip
    elif argv[0] == "privatize":
        data = [] if "--data" in argv else ["--data", str(tmp_path / "d.csv")]
        r = [] if "--r" in argv else ["--r", "1"]
        argv += [*data, *r, "--column", "x", "--epsilon", "1", "--out", str(tmp_path / "o.csv")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and said in err and "Accountant" not in err
    assert not (tmp_path / "o.csv").exists() and not (tmp_path / "st").exists()


def test_a_ledger_moved_after_the_charge_does_not_lose_the_release(
    tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A review: the record's budget summary read the ledger again after the charge; a
    ledger moved away meanwhile (archived, rotated) raised, and the charged release was
    lost. The release is shown, its budget line says the ledger could not be read."""
    from dpbayes.cli import release_run

    ledger = _budget(tmp_path)
    real = release_run._noise_aware

    def then_move(*a: Any, **k: Any) -> Any:
        out = real(*a, **k)
        ledger.rename(tmp_path / "archived.json")  # after the charge, before the record
        return out

    monkeypatch.setattr(release_run, "_noise_aware", then_move)
    code = main(["release", "--epsilon", "1", "--budget-file", str(ledger)])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "released:" in out.out and "the ledger could not be read after the charge" in out.out
    assert len(json.loads((tmp_path / "archived.json").read_text())["spends"]) == 1


def test_query_with_its_ledger_moved_after_the_charge_shows_the_answer(
    tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dpbayes.answers import QueryEngine

    state = tmp_path / "st"
    real = QueryEngine.ask

    def then_move(self: Any, *a: Any, **k: Any) -> Any:
        out = real(self, *a, **k)
        (state / "ledger.json").rename(tmp_path / "archived.json")
        return out

    monkeypatch.setattr(QueryEngine, "ask", then_move)
    code = main(
        ["query", "--state", str(state), "--attribute", "health=excellent,good,fair,poor",
         "--epsilon", "1", "--where", "health = poor", "--half-width", "100",
         "--confidence", "0.9"]
    )  # fmt: skip
    out = capsys.readouterr()
    assert code == 0, out.err
    assert out.out.startswith("fresh: ") and "remaining unknown (the ledger could not" in out.out


def test_new_values_never_stand_beside_the_old_guarantee(
    tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A review: when moving the guarantee into place failed after the values were moved,
    the new values stood beside the previous run's guarantee (eps 1 for values at eps 5).
    Now the values' move is undone; here the guarantee path fails every time, so the old
    guarantee cannot be put back either, and the error line says where it is kept."""
    import errno

    from dpbayes.cli import cmd_privatize

    data = tmp_path / "d.csv"
    data.write_text("income\n" + "".join(f"{i / 10}\n" for i in range(300)))
    folder = tmp_path / "o"
    folder.mkdir()
    (folder / "z.csv").write_text("old privatised values\n")
    (folder / "z.guarantee.json").write_text('{"epsilon": 1}\n')
    real = os.replace

    def replace(src: Any, dst: Any) -> None:
        if str(dst).endswith("guarantee.json"):
            raise OSError(errno.EIO, "Input/output error")
        real(src, dst)

    monkeypatch.setattr(cmd_privatize.os, "replace", replace)
    code = main(
        ["privatize", "--data", str(data), "--column", "income", "--epsilon", "5", "--r", "3",
         "--out", str(folder / "z.csv")]
    )  # fmt: skip
    err = capsys.readouterr().err
    kept = f".z.guarantee.json.{os.getpid()}.old"
    assert code == 2 and "z.guarantee.json (Input/output error)" in err
    assert "holds its previous values" in err and f"is kept as {folder / kept}" in err
    assert sorted(p.name for p in folder.iterdir()) == [kept, "z.csv"]  # no tmp
    assert (folder / "z.csv").read_text() == "old privatised values\n"
