"""Helpers shared by the sub-commands: output destinations, JSON, progress, flags.

One rule for every command (``dpbayes --help`` says it too): a result goes to stdout (one
JSON object with ``--json``); an error is one line ``dpbayes: error: ...`` on stderr with
exit code 2, nothing spent (a refused budget included); an audit that finds a violation
exits 1. Every output destination is checked before any noise is drawn, and a write that
fails after a budget was charged still prints the release, then reports the failure.
Light: imports nothing numeric (``dpbayes --help`` must stay fast).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = [
    "ChargedWriteError",
    "add_json_argument",
    "add_quiet_argument",
    "check_destination",
    "check_ledger_writable",
    "emit_json",
    "progress",
    "refuse_inapplicable",
]


class ChargedWriteError(OSError):
    """A write that failed after the budget was charged (the release was printed)."""


def add_json_argument(p: argparse.ArgumentParser, what: str = "the result") -> None:
    p.add_argument(
        "--json",
        nargs="?",
        const="-",
        default=None,
        metavar="FILE",
        help=f"print {what} as one JSON object (to FILE if given)",
    )


def add_quiet_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--quiet", "-q", action="store_true", help="no progress display (results still print)"
    )


def check_destination(path: str | None, flag: str) -> Path | None:
    """``path`` can be written (its folder exists and is writable; it is not a folder)."""
    if path is None or path == "-":
        return None
    p = Path(path)
    folder = p.parent if str(p.parent) else Path(".")
    if p.is_dir():
        raise OSError(f"{flag} {path}: is a folder, not a file")
    if not folder.is_dir():
        raise OSError(f"{flag} {path}: folder {folder} does not exist (nothing was spent)")
    if not os.access(folder, os.W_OK | os.X_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise OSError(f"{flag} {path}: not writable (nothing was spent)")
    return p


def check_ledger_writable(path: str | None, flag: str = "--budget-file") -> None:
    """A ledger that can be read can also be rewritten (its folder too: atomic replace)."""
    if path is None:
        return
    p = Path(path)
    if p.is_file() and not (os.access(p, os.W_OK) and os.access(p.parent, os.W_OK | os.X_OK)):
        raise OSError(f"{flag} {path}: the ledger is not writable (nothing was spent)")


def emit_json(obj: Any, dest: str | None) -> None:
    """One JSON object on stdout (``dest`` None or ``-``) or in the file ``dest``."""
    text = json.dumps(obj, default=str)
    if dest is None or dest == "-":
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
        return
    Path(dest).write_text(text + "\n", encoding="utf-8")


def refuse_inapplicable(args: argparse.Namespace, rules: dict[str, tuple[bool, str]]) -> None:
    """Refuse a given flag that does not apply: ``{dest: (applies, "--flag: why")}``."""
    for dest, (applies, text) in rules.items():
        value = getattr(args, dest, None)
        if value not in (None, False) and not applies:
            raise ValueError(text)


@contextmanager
def progress(label: str, *, quiet: bool = False, stream: Any = None) -> Iterator[None]:
    """Elapsed seconds after ``label`` on a terminal (stderr), updated twice a second.

    Silent when ``quiet`` or when stderr is not a terminal (pipes, tests, CI), so the
    output a program reads never changes.
    """
    out = sys.stderr if stream is None else stream
    if quiet or not getattr(out, "isatty", lambda: False)():
        yield
        return
    done = threading.Event()
    start = time.monotonic()

    def tick() -> None:
        frames = "|/-\\"
        i = 0
        while not done.wait(0.5):
            out.write(f"\r{label} {frames[i % 4]} {time.monotonic() - start:5.1f} s")
            out.flush()
            i += 1

    t = threading.Thread(target=tick, daemon=True)
    t.start()
    try:
        yield
    finally:
        done.set()
        t.join()
        out.write(f"\r\x1b[K{label} done in {time.monotonic() - start:.1f} s\n")
        out.flush()
