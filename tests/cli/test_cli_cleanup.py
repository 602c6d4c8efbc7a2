"""What the CLI leaves on disk when a command fails or is stopped: numba's temporary cache
folder on a read-only install (a real process sent a real SIGTERM or SIGINT), and
`dpbayes privatize`'s values and guarantee file when putting them in place fails half-way
(real file-system errors on real files)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dpbayes.cli import cmd_privatize, main

# The command under test stops in its middle (the step that writes the results) and says
# which cache folder it runs with; the parent then sends the signal.
_STOPS_IN_THE_MIDDLE = """
import os, sys, time
import dpbayes.cli.cmd_privatize, dpbayes.experiments
def wait(*args, **kwargs):
    folder = os.environ.get("NUMBA_CACHE_DIR", "")
    print("cache", os.path.isdir(folder), folder, file=sys.stderr, flush=True)
    time.sleep(120)
dpbayes.cli.cmd_privatize._write_both = wait
dpbayes.experiments.run = wait
from dpbayes.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.fixture
def as_nobody() -> Iterator[tuple[list[str], dict[str, str], Path]]:
    """The read-only install of test_a_read_only_install_without_a_home_still_releases:
    the user nobody, no writable source tree, no home. TMPDIR is a folder nobody can
    reach (tmp_path's parents are private to root: tempfile would fall back to /tmp,
    unseen), removed afterwards with whatever a failed test left in it."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root to run the CLI as an unprivileged user (setpriv)")
    folder = Path(tempfile.mkdtemp(prefix="dpbayes-test-"))
    try:
        folder.chmod(0o777)
        env = {
            k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "XDG_CACHE_HOME")
        }
        env.update(HOME="/nonexistent", PYTHONDONTWRITEBYTECODE="1", TMPDIR=str(folder))
        nobody = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", sys.executable]
        probe = subprocess.run(
            [*nobody, "-c", "import dpbayes.cli, tempfile; tempfile.mkstemp(dir='.')"],
            capture_output=True, timeout=60, env=env, cwd=folder,
        )  # fmt: skip
        if probe.returncode != 0:  # e.g. a virtual environment in a private (0700) folder
            pytest.skip("this Python, its dpbayes or a temporary folder is not usable by nobody")
        for made in folder.iterdir():
            made.unlink()
        yield nobody, env, folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
@pytest.mark.parametrize("command", ["privatize", "experiment"])
def test_a_stopped_command_removes_its_temporary_numba_cache(
    as_nobody: tuple[list[str], dict[str, str], Path], command: str, signum: int
) -> None:
    """SIGTERM ended the process before atexit ran: the folder stayed behind in TMPDIR."""
    nobody, env, folder = as_nobody
    (folder / "d.csv").write_text("income\n" + "".join(f"{i / 10}\n" for i in range(50)))
    argv = {
        "privatize": ["privatize", "--data", "d.csv", "--column", "income", "--epsilon", "1",
                      "--r", "3", "--out", "z.csv"],
        "experiment": ["experiment", "nonparametric", "--small", "--out", "results"],
    }[command]  # fmt: skip
    proc = subprocess.Popen(
        [*nobody, "-c", _STOPS_IN_THE_MIDDLE, *argv],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=folder,
    )  # fmt: skip
    try:
        assert proc.stderr is not None
        said = proc.stderr.readline().split()
        assert said[:2] == ["cache", "True"], said  # it runs with its temporary cache
        cache = Path(said[2])
        assert cache.parent == folder and cache.name.startswith("dpbayes-numba-")
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert not cache.exists(), (proc.returncode, err)
    assert not list(folder.glob("dpbayes-numba-*"))
    assert proc.returncode == 130 and err == "dpbayes: interrupted\n" and out == ""


def test_a_failed_command_removes_its_temporary_numba_cache(
    as_nobody: tuple[list[str], dict[str, str], Path],
) -> None:
    nobody, env, folder = as_nobody
    out = subprocess.run(
        [*nobody, "-m", "dpbayes.cli", "privatize", "--data", "missing.csv", "--column", "x",
         "--epsilon", "1", "--r", "1", "--out", "z.csv"],
        capture_output=True, text=True, timeout=120, env=env, cwd=folder,
    )  # fmt: skip
    assert out.returncode == 2 and "--data file not found" in out.stderr
    assert not list(folder.glob("dpbayes-numba-*"))


def _privatize_into(folder: Path, tmp_path: Path) -> int:
    data = tmp_path / "d.csv"
    data.write_text("income\n" + "".join(f"{i / 10}\n" for i in range(300)))
    return main(
        ["privatize", "--data", str(data), "--column", "income", "--epsilon", "5", "--r", "3",
         "--out", str(folder / "z.csv")]
    )  # fmt: skip


def _guarantee_taken_meanwhile(monkeypatch: pytest.MonkeyPatch, folder: Path) -> None:
    """Another process makes a folder where the guarantee file goes, after the command
    checked its outputs and moved the values into place. Every other check refuses that
    path before the noise, and the values and the guarantee share one folder, so no static
    file-system state makes only the second move fail: the wrapper only times the change,
    the failure (EISDIR) is the kernel's, as is everything the command does afterwards."""
    real = os.replace

    def replace(src: Any, dst: Any) -> None:
        if Path(dst) == folder / "z.guarantee.json" and Path(src).name.endswith(".tmp"):
            (folder / "z.guarantee.json").mkdir()
        real(src, dst)

    monkeypatch.setattr(cmd_privatize.os, "replace", replace)


def test_privatize_publishes_nothing_when_its_guarantee_cannot_be_put_in_place(
    tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The values were moved into place, then the guarantee's move failed: the values stood
    alone (a CSV without its guarantee, exit 2). Now the move of the values is undone."""
    folder = tmp_path / "o"
    folder.mkdir()
    _guarantee_taken_meanwhile(monkeypatch, folder)
    code = _privatize_into(folder, tmp_path)
    out, err = capsys.readouterr()
    assert code == 2 and err.count("\n") == 1, err
    assert "could not write --out's guarantee" in err and "(Is a directory)" in err
    assert "nothing was published" in err and "the values are not kept" in err
    assert '"epsilon": 5.0' in out  # the guarantee is printed
    assert [p.name for p in folder.iterdir()] == ["z.guarantee.json"]  # the other's folder
    assert not any((folder / "z.guarantee.json").iterdir())


def test_privatize_says_what_is_where_when_undoing_fails_too(
    tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a previous pair: its values are put back; its guarantee cannot be (the path is
    taken), and the one line says where it is kept instead."""
    folder = tmp_path / "o"
    folder.mkdir()
    (folder / "z.csv").write_text("old privatised values\n")
    (folder / "z.guarantee.json").write_text('{"epsilon": 1}\n')
    _guarantee_taken_meanwhile(monkeypatch, folder)
    code = _privatize_into(folder, tmp_path)
    out, err = capsys.readouterr()
    kept = folder / f".z.guarantee.json.{os.getpid()}.old"
    assert code == 2 and err.count("\n") == 1, err
    assert f"--out {folder / 'z.csv'} holds its previous values;" in err
    assert f"could not be put back at {folder / 'z.guarantee.json'} (Is a directory)" in err
    assert f"is kept as {kept}" in err and "nothing was published" not in err
    assert '"epsilon": 5.0' in out
    assert sorted(p.name for p in folder.iterdir()) == [kept.name, "z.csv", "z.guarantee.json"]
    assert (folder / "z.csv").read_text() == "old privatised values\n"
    assert kept.read_text() == '{"epsilon": 1}\n'


# Ctrl+C (a real SIGINT) right after the values were moved into place, in a real process
_SIGINT_BETWEEN_THE_MOVES = """
import os, signal, sys
import dpbayes.cli.cmd_privatize as cp
real, sent = os.replace, []
def replace(src, dst):
    real(src, dst)
    if str(dst).endswith("z.csv") and not sent:
        sent.append(True)
        os.kill(os.getpid(), signal.SIGINT)
cp.os.replace = replace
from dpbayes.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_privatize_interrupted_between_its_moves_publishes_the_new_pair(
    tmp_path: Path,
) -> None:
    """The new values stood beside no guarantee (the old one was removed first). A Ctrl+C
    as a move completes now waits for the last move: the new pair stands, and is said."""
    data = tmp_path / "d.csv"
    data.write_text("income\n" + "".join(f"{i / 10}\n" for i in range(300)))
    folder = tmp_path / "o"
    folder.mkdir()
    (folder / "z.csv").write_text("old privatised values\n")
    (folder / "z.guarantee.json").write_text('{"epsilon": 1}\n')
    out = subprocess.run(
        [sys.executable, "-c", _SIGINT_BETWEEN_THE_MOVES, "privatize", "--data", str(data),
         "--column", "income", "--epsilon", "5", "--r", "3", "--out", str(folder / "z.csv")],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert out.returncode == 130, out
    assert out.stderr == (
        f"dpbayes: --out {folder / 'z.csv'} and its guarantee {folder / 'z.guarantee.json'} "
        "were written (published)\ndpbayes: interrupted\n"
    ), out
    assert sorted(p.name for p in folder.iterdir()) == ["z.csv", "z.guarantee.json"]
    assert (folder / "z.csv").read_text().startswith("income\n")
    assert json.loads((folder / "z.guarantee.json").read_text())["epsilon"] == 5
