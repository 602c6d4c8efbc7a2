"""Helpers shared by the sub-commands: output destinations, JSON, progress, flags, the
privacy unit (``--user-column``, ``--max-rows-per-user``, ``--record-level``).

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
    "check_outputs",
    "emit_json",
    "forget_stdout",
    "ledger_files",
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
    if path is None or (path == "-" and flag.startswith("--json")):
        return None
    # a symlink is written through: check the file it names, not the link
    p = Path(os.path.realpath(path)) if os.path.islink(path) else Path(path)
    folder = p.parent if str(p.parent) else Path(".")
    if p.is_dir():
        raise OSError(f"{flag} {path}: is a folder, not a file")
    if not folder.is_dir():
        raise OSError(f"{flag} {path}: folder {folder} does not exist (nothing was spent)")
    if not os.access(folder, os.W_OK | os.X_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise OSError(f"{flag} {path}: not writable (nothing was spent)")
    return p


def check_outputs(
    outputs: dict[str, str | None], keep: dict[str, str | Path | None] | None = None
) -> None:
    """Every output can be written (:func:`check_destination`), no two outputs are one
    file, and no output is a file the command reads or keeps (``keep``: the ledger and its
    lock, the data, a state folder's files). Checked before any noise is drawn: a record
    written over the ledger would erase every spend, and over the data the data."""
    seen: dict[str, str] = {}
    for flag, path in outputs.items():
        if check_destination(path, flag) is None:
            continue
        real = os.path.realpath(str(path))
        if real in seen:
            raise OSError(
                f"{seen[real]} and {flag} are the same file {path}: give each its own "
                "(nothing was spent)"
            )
        seen[real] = flag
    for flag, kept_path in (keep or {}).items():
        if kept_path is None:
            continue
        kept = os.path.realpath(str(kept_path))
        for real, out_flag in seen.items():
            if real == kept:
                raise OSError(
                    f"{out_flag} {kept_path} is the {flag} file: writing it would destroy it "
                    "(nothing was spent)"
                )


def ledger_files(path: str | None, flag: str = "--budget-file") -> dict[str, str | None]:
    """The files a ledger keeps (itself, its lock, its temporary), for ``check_outputs``."""
    if path is None:
        return {}
    real = os.path.realpath(path)  # the ledger keeps its lock and temporary beside its file
    return {flag: path, f"{flag}'s lock": f"{real}.lock", f"{flag}'s temporary": f"{real}.tmp"}


def check_ledger_writable(path: str | None, flag: str = "--budget-file") -> None:
    """A ledger that can be read can also be rewritten (its folder too: atomic replace)."""
    if path is None:
        return
    p = Path(path).resolve()  # the file a save replaces, in its own folder
    if p.is_file() and not (os.access(p, os.W_OK) and os.access(p.parent, os.W_OK | os.X_OK)):
        raise OSError(f"{flag} {path}: the ledger is not writable (nothing was spent)")


def emit_json(obj: Any, dest: str | None) -> None:
    """One JSON object on stdout (``dest`` None or ``-``) or in the file ``dest``."""
    text = json.dumps(obj, default=str)
    if dest is None or dest == "-":
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
        return
    path = Path(dest)
    if path.is_symlink() or (path.exists() and not path.is_file()):
        # a link (/dev/stdout, a linked record) or a device or pipe: written through, as
        # it is (replacing it would replace the link, not write what it points to)
        path.write_text(text + "\n", encoding="utf-8")
        return
    # a file appears whole or not at all: a full disk left an empty record behind
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text + "\n", encoding="utf-8")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def forget_stdout() -> None:
    """After a write to stdout failed (its reader quit): point it at the null device, so
    that Python's flush at exit does not fail a second time with a traceback."""
    try:
        fd = os.open(os.devnull, os.O_WRONLY)
        os.dup2(fd, sys.stdout.fileno())
        os.close(fd)
    except (OSError, ValueError, AttributeError):  # no real stdout (captured, or None)
        pass


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


def add_privacy_unit_arguments(p: argparse.ArgumentParser) -> None:
    """``--user-column``, ``--max-rows-per-user``, ``--record-level``; see :func:`privacy_unit`."""
    g = p.add_argument_group(
        "privacy unit",
        "bundled data: one person (person column, <= 5 rows, every row kept) unless "
        "--record-level; your data: one record unless --user-column and --max-rows-per-user",
    )
    g.add_argument(
        "--user-column",
        metavar="COL",
        help="the column naming the person; guarantees protect one user (<= K rows)",
    )
    g.add_argument(
        "--max-rows-per-user",
        type=int,
        metavar="K",
        help="keep at most K rows per user, chosen in the engine (a public bound >= 1)",
    )
    g.add_argument(
        "--record-level",
        action="store_true",
        help="protect one row, not one person (opt-out of the bundled data's person level)",
    )


def privacy_unit(args: argparse.Namespace, *, bundled: bool) -> tuple[str | None, int | None]:
    """(user column, rows per user) from the arguments; (None, None) is record level.

    On the bundled data the default is person level (``BUNDLED_PRIVACY_UNIT``: the
    ``person`` column, k = 5, which keeps every row); on other data, record level unless
    both ``--user-column`` and ``--max-rows-per-user`` are given.
    """
    from dpbayes.data.datasets import BUNDLED_PRIVACY_UNIT
    from dpbayes.privacy.validation import check_int

    user, k = args.user_column, args.max_rows_per_user
    if args.record_level:
        if user is not None or k is not None:
            raise ValueError(
                "--record-level excludes --user-column and --max-rows-per-user: "
                "choose one privacy unit"
            )
        return None, None
    if k is not None:
        k = check_int(k, "--max-rows-per-user", minimum=1)
    if user is not None and (not isinstance(user, str) or not user.strip()):
        raise ValueError("--user-column must name a column")
    if bundled:
        default_user, default_k = BUNDLED_PRIVACY_UNIT["randhie"]
        if user is None or user == default_user:
            return default_user, default_k if k is None else k
    if user is None and k is None:
        return None, None
    if user is None:
        raise ValueError("--max-rows-per-user needs --user-column (the column naming the person)")
    if k is None:
        raise ValueError(
            "--user-column needs --max-rows-per-user K (a public bound, never read from the data)"
        )
    return user, k


def describe_distribution(d: Any) -> str:
    params = ", ".join(f"{k}={fmt(v)}" for k, v in d.to_dict().items() if k != "family")
    return f"{type(d).__name__}({params})"


def fmt(v: Any) -> str:
    if hasattr(v, "tolist"):
        v = v.tolist()
    if isinstance(v, list | tuple):
        return "[" + ", ".join(fmt(x) for x in v) + "]"
    return f"{v:.6g}" if isinstance(v, float) else str(v)
