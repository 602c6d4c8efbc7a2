"""The ``dpbayes`` command: thin, it parses, calls the library and prints.

Each sub-command lives in its own module ``dpbayes/cli/cmd_<name>.py`` that defines
``register(subparsers)``; the module's parser sets ``handler`` (a function taking the
parsed arguments and returning an exit code). Errors a user can fix (ValueError,
TypeError, OSError and friends) become one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import re
import sys
from collections.abc import Sequence
from typing import Any

__all__ = ["build_parser", "main"]


EPILOG = (
    "Every command: results on stdout (one JSON object with --json); an error or a "
    "refusal (an exhausted budget included) is one line 'dpbayes: error: ...' on stderr "
    "with exit code 2, and nothing is spent; `dpbayes audit` exits 1 when it finds a "
    "violation."
)


# the commands that draw noise and print what was paid for (refused with no stdout)
RELEASING = frozenset({"demo", "privatize", "query", "release"})


def _writable(folder: str) -> bool:
    """``folder`` (or, where it does not exist yet, its nearest existing parent) can be
    written: what numba needs to cache compiled code there."""
    path = os.path.abspath(folder)
    while not os.path.exists(path):
        parent = os.path.dirname(path)
        if parent == path:
            return False
        path = parent
    return os.path.isdir(path) and os.access(path, os.W_OK | os.X_OK)


# numba's temporary cache folder, when this process made one (NUMBA_CACHE_DIR names it)
_temporary_cache: str | None = None


def _needs_temporary_cache() -> bool:
    """Numba caches compiled code (``cache=True``) next to the source or in the user's
    cache folder; on a read-only install with no writable home neither works and every
    release was a traceback ("no locator available"). Then a temporary folder is the
    cache: True when one is needed, or already in use from an earlier call in this
    process (an explicit NUMBA_CACHE_DIR is kept)."""
    if os.environ.get("NUMBA_CACHE_DIR"):
        return _temporary_cache is not None and os.environ["NUMBA_CACHE_DIR"] == _temporary_cache
    source = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    user = os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
        "numba",
    )
    return not (_writable(os.path.join(source, "__pycache__")) or _writable(user))


def _numba_cache() -> None:
    """Make the temporary cache folder (before numba is imported), once per process; it
    is removed when the process ends, not when a command does: numba, once imported,
    keeps writing to it, and a removed folder would be made again (in a shared temporary
    folder, possibly by another user first)."""
    global _temporary_cache
    if _temporary_cache is not None:
        return
    import atexit
    import tempfile

    try:
        folder = tempfile.mkdtemp(prefix="dpbayes-numba-")
    except OSError:  # no writable temporary folder either: numba reports it
        return
    _temporary_cache = os.environ["NUMBA_CACHE_DIR"] = folder
    atexit.register(_remove_temporary_cache)


def _remove_temporary_cache() -> None:
    """At exit: remove the folder; a second Ctrl+C or SIGTERM meanwhile is ignored (the
    process is ending) rather than leave half of it behind."""
    import shutil
    import signal

    if _temporary_cache is None:
        return
    try:
        previous = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)}
    except ValueError:  # not the main thread: signals cannot be set
        previous = {}
    try:
        shutil.rmtree(_temporary_cache, ignore_errors=True)
    finally:
        for s, handler in previous.items():
            signal.signal(s, signal.SIG_DFL if handler is None else handler)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _run_with_temporary_cache(handler: Any, args: argparse.Namespace) -> int:
    """The command with numba's temporary cache folder, removed when the process ends
    (atexit): normally, after an exception or Ctrl+C (KeyboardInterrupt), and after
    SIGTERM, which used to end the process before atexit ran and left the folder behind.
    So SIGTERM is turned into Ctrl+C from before the folder is made to the end of the
    command, as `dpbayes release` does from its charge on (its own guard holds inside and
    restores this one; a charged release is still shown). An ignored SIGTERM stays ignored."""
    import signal
    import threading

    previous: Any = signal.SIG_IGN
    if threading.current_thread() is threading.main_thread():
        previous = signal.getsignal(signal.SIGTERM)
        if previous is not signal.SIG_IGN:
            signal.signal(signal.SIGTERM, _interrupt)
    try:
        _numba_cache()
        return _run(handler, args)
    finally:
        if previous is not signal.SIG_IGN:
            signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("dpbayes")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "unknown (not installed)"


class _VersionAction(argparse.Action):
    """``--version``: the installed distribution's version (importlib.metadata), lazily."""

    def __init__(self, option_strings: list[str], dest: str = "version", **kw: object) -> None:
        super().__init__(option_strings, dest, nargs=0, help="print the version and exit")

    def __call__(self, parser: argparse.ArgumentParser, *args: object, **kw: object) -> None:
        print(f"dpbayes {_version()}")
        parser.exit()


class _Parser(argparse.ArgumentParser):
    """argparse reads a value such as ``-1e3`` or ``-inf`` as an unknown option (its test
    for a negative number knows only ``-12`` and ``-1.5``): ``--grid -1e3 1 5`` failed
    with "expected 3 arguments". No option here looks like a number, so every number
    is a value; the sub-commands' parsers are of this class too."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self._negative_number_matcher = _NEGATIVE_NUMBER


_NEGATIVE_NUMBER = re.compile(
    r"^-(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$|^-(inf|infinity|nan)$", re.IGNORECASE
)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="dpbayes", description="Differentially private Bayesian inference.", epilog=EPILOG
    )
    parser.add_argument("--version", action=_VersionAction)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        if info.name.startswith("cmd_"):
            mod = importlib.import_module(f"{__name__}.{info.name}")
            mod.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse already printed its one-line usage error
        return int(exc.code or 0)
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return 2
    seed = getattr(args, "seed", None)
    if seed is not None and seed < 0 and args.command not in ("query", "serve"):
        # one rule for every command's --seed (the library said "rng (seed)"); query and
        # serve refuse any seed with their own reason
        print(f"dpbayes: error: --seed must be >= 0, got {seed}", file=sys.stderr)
        return 2
    if args.command in RELEASING and (sys.stdout is None or sys.stdout.closed):
        # a closed stdout (`>&-`): the paid result would be printed nowhere
        print(
            f"dpbayes: error: {args.command}: stdout is closed, the result would be lost "
            "(nothing was spent)",
            file=sys.stderr,
        )
        return 2
    if _needs_temporary_cache():
        return _run_with_temporary_cache(handler, args)
    return _run(handler, args)


def _run(handler: Any, args: argparse.Namespace) -> int:
    try:
        return int(handler(args) or 0)
    except KeyboardInterrupt as exc:
        # a signal deferred through a step that then failed (the ledger's save: "nothing
        # was spent") is raised as that failure propagates; its message must not be lost
        # (only that one: an exception merely being handled when Ctrl+C came is not shown)
        failed = getattr(exc, "superseded", None)
        if isinstance(failed, _SHOWN):
            print(f"dpbayes: error: {_first_line(failed)}", file=sys.stderr)
        print("dpbayes: interrupted", file=sys.stderr)
        return 130
    except _SHOWN as exc:
        print(f"dpbayes: error: {_first_line(exc)}", file=sys.stderr)
        return 2


_SHOWN = (ValueError, TypeError, OSError, LookupError, ImportError)


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
