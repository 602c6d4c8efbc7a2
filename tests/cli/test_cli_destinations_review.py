"""Output destinations and signals the CLI review found unchecked: ``--out -`` (a file,
not stdout), a symlinked output, ``audit --json``, a randomized response at a huge eps,
and a SIGTERM during ``query``'s first call."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from dpbayes.cli import main
from dpbayes.privacy import Accountant


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_out_dash_is_a_file_checked_against_the_ledger_and_the_data(
    tmp_path: Path, capsys, monkeypatch
) -> None:
    """``-`` means stdout for --json only; for --out it is the file ``-``, which was
    never compared with the ledger or the data: a release wrote its figure over a ledger
    named ``-`` and privatize its values over its data file ``-``."""
    monkeypatch.chdir(tmp_path)
    Accountant(10.0, path=Path("-"))
    before = Path("-").read_bytes()
    code, out, err = run(
        capsys, "release", "--epsilon", "1", "--budget-file", "-", "-q", "--out", "-"
    )
    assert code == 2 and out == "" and "is the --budget-file file" in err, err
    assert Path("-").read_bytes() == before and Accountant.open("-").spent[0] == 0.0

    data = tmp_path / "d"
    data.mkdir()
    monkeypatch.chdir(data)
    pd.DataFrame({"x": [1.5, 2.0, -3.0]}).to_csv("-", index=False)
    before = Path("-").read_bytes()
    code, out, err = run(
        capsys, "privatize", "--data", "-", "--column", "x", "--epsilon", "1", "--r", "5",
        "--out", "-", "--seed", "1",
    )  # fmt: skip
    assert code == 2 and "is the --data file" in err, err
    assert Path("-").read_bytes() == before


@pytest.mark.parametrize("flag", ["--json", "--out"])
def test_a_symlinked_output_is_checked_where_it_points(tmp_path: Path, capsys, flag) -> None:
    """A dangling link (its target's folder missing) passed the check at the link's own
    folder: the budget was charged, then the write failed."""
    path = tmp_path / "team.ledger"
    Accountant(10.0, path=path)
    link = tmp_path / ("r.json" if flag == "--json" else "r.png")
    link.symlink_to(tmp_path / "no" / "such" / link.name)
    code, out, err = run(
        capsys, "release", "--epsilon", "1", "--budget-file", str(path), "-q", flag, str(link)
    )
    assert code == 2 and out == "" and "does not exist (nothing was spent)" in err, err
    assert Accountant.open(path).spent[0] == 0.0


def test_audit_checks_its_json_destination_before_the_audit(tmp_path: Path, capsys) -> None:
    """The audit ran in full, then failed naming an internal temporary file."""
    code, out, err = run(
        capsys, "audit", "--model", "beta-bernoulli", "--mechanism", "laplace",
        "--json", str(tmp_path / "nodir" / "x.json"),
    )  # fmt: skip
    assert code == 2 and out == ""
    assert err.startswith("dpbayes: error: --json") and "does not exist" in err, err
    assert err.count("\n") == 1


@pytest.mark.parametrize("eps", ["1e10", "1e300"])
def test_randomized_response_at_a_huge_eps_is_one_line(tmp_path: Path, capsys, eps) -> None:
    """e^eps overflowed the decimal context: a traceback (decimal.Overflow), exit 1."""
    data = tmp_path / "cat.csv"
    pd.DataFrame({"x": ["a", "b", "c", "a"]}).to_csv(data, index=False)
    code, out, err = run(
        capsys, "privatize", "--data", str(data), "--column", "x", "--epsilon", eps,
        "--mechanism", "randomized-response", "--categories", "a", "b", "c",
        "--out", str(tmp_path / "p.csv"), "--seed", "1",
    )  # fmt: skip
    assert code == 2 and out == "" and "too large for randomized response" in err, err
    assert not (tmp_path / "p.csv").exists()


@pytest.mark.skipif(os.name != "posix", reason="SIGTERM is POSIX")
def test_a_sigterm_during_the_first_query_leaves_no_state_behind(tmp_path: Path) -> None:
    """Ctrl+C undid a failed first call; SIGTERM (a timeout, a service manager) killed
    the process before the undo, and the same call was then refused ("already holds a
    cube"). The signal is sent just before the first answer is asked."""
    script = textwrap.dedent(
        """
        import os, signal, sys
        from dpbayes.answers import QueryEngine
        ask = QueryEngine.ask
        def interrupted(self, *a, **k):
            os.kill(os.getpid(), signal.SIGTERM)
            return ask(self, *a, **k)
        QueryEngine.ask = interrupted
        from dpbayes.cli import main
        sys.exit(main(sys.argv[1:]))
        """
    )
    args = [
        "query", "--state", str(tmp_path / "st"), "--attribute", "health=excellent,good,fair,poor",
        "--epsilon", "1", "--where", "health=poor", "--half-width", "200", "--confidence", "0.95",
    ]  # fmt: skip
    r = subprocess.run(
        [sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 130 and "interrupted" in r.stderr, r.stderr
    assert not (tmp_path / "st").exists()


@pytest.mark.parametrize(
    "args, message",
    [
        (["privatize", "--data", "num.csv", "--column", "x", "--epsilon", "1", "--r", "5",
          "--out", "/", "--seed", "1"], "--out /: is a folder, not a file"),
        (["privatize", "--data", "num.csv", "--column", "x", "--epsilon", "1", "--r", "5",
          "--out", ".", "--seed", "1"], "--out .: is a folder, not a file"),
        (["demo", "--epsilon", "-1"], "--epsilon must be > 0, got -1"),
        (["demo", "--seed", "1", "--out", "afile"], "--out afile: afile is a file"),
        (["demo", "--seed", "1", "--out", "new/sub", "--json", "nodir/x.json"],
         "--json nodir/x.json: folder nodir does not exist"),
        (["experiment", "audit", "--small", "--out", "afile"], "afile is a file"),
        (["experiment", "nosuch", "--out", "new"], "experiment must be one of"),
        (["release", "--epsilon", "1", "--budget-file", "folder"],
         "ledger file folder is a folder"),
        (["budget", "init", "d2/", "--epsilon", "1"], "ledger file d2/: names a folder"),
        (["release", "--epsilon", "1", "--seed", "-1"], "--seed must be >= 0, got -1"),
        (["release", "--record-level", "--mechanism", "expmech", "--sensitivity", "local",
          "--epsilon", "1", "--seed", "1"], "pass --allow-non-private"),
        (["experiment", "audit", "--small", "--seed", "-1", "--out", "x"], "--seed must be >= 0"),
        (["release", "--model", "normal-mean", "--bounds", "-1e308", "1e308", "--epsilon",
          "1", "--seed", "1", "--record-level"], "--bounds LOWER UPPER: the range"),
        (["release", "--model", "normal-mean", "--bounds", "0", "1e-323", "--epsilon",
          "1", "--seed", "1", "--record-level"], "the default --noise-sd"),
    ],
)  # fmt: skip
def test_refusals_name_the_flag_and_leave_nothing_behind(
    tmp_path: Path, capsys, monkeypatch, args, message
) -> None:
    """A review: "PosixPath('.') has an empty name", "got -3.0" for --epsilon -1, "File
    exists", "Not a directory", a folder read as a ledger with "other hard link(s)", a
    ledger file d2 made for "d2/", "--noise-sd" blamed for bounds whose range overflows;
    and the demo's and experiment's folders made before a refusal were left behind."""
    monkeypatch.chdir(tmp_path)
    pd.DataFrame({"x": [1.0, 2.0]}).to_csv("num.csv", index=False)
    Path("afile").write_text("keep")
    Path("folder").mkdir()
    before = sorted(p.name for p in tmp_path.iterdir())
    code, _, err = run(capsys, *args)
    assert code == 2 and message in err and err.count("\n") == 1, err
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing made
    assert Path("afile").read_text() == "keep"


def test_serve_refuses_a_bad_admin_key_file_or_a_busy_port_writing_nothing(
    tmp_path: Path, capsys, monkeypatch
) -> None:
    """A review: a folder, a non-UTF-8 file or a dangling link as --admin-key-file gave
    OS or codec messages, and a busy port left a new admin key file behind."""
    import socket

    monkeypatch.chdir(tmp_path)
    Path("kd").mkdir()
    Path("kb").write_bytes(b"\xff\xfe\xfa")
    Path("dl").symlink_to(tmp_path / "no" / "key")
    with socket.socket() as probe:  # a port free now (the key is refused before serving)
        probe.bind(("127.0.0.1", 0))
        free = str(probe.getsockname()[1])
    for name, message in [
        ("kd", "is a folder"),
        ("kb", "not UTF-8 text"),
        ("dl", "a link to a file that does not exist"),
    ]:
        code, _, err = run(capsys, "serve", "--admin-key-file", name, "--port", free)
        assert code == 2 and f"--admin-key-file {name}: {message}" in err, err
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        code, _, err = run(capsys, "serve", "--admin-key-file", "new.key", "--port", str(port))
    assert code == 2 and f"--port {port}: cannot listen" in err, err
    assert not Path("new.key").exists()
