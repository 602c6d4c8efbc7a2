"""``dpbayes privatize``: release one column of a CSV file under local differential privacy.

Each row's value (CSV or Parquet input) is clipped to [-r, r] and released with Laplace (or
Gaussian) noise, or passed through randomized response for categories (paper 001's
data-owner side). The output CSV holds the privatised column only; the guarantee is
printed and written next to it as ``OUT.guarantee.json``. Noise is floating-point-safe
unless ``--seed`` asks for a (non-publishable) simulation.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from pathlib import Path
from typing import Any

from dpbayes.cli.common import (
    add_json_argument,
    check_outputs,
    emit_json,
    refuse_inapplicable,
)


def register(sub: Any) -> None:
    p = sub.add_parser(
        "privatize", help="release a column under local DP (Laplace/Gaussian with clipping, RR)"
    )
    p.add_argument("--data", required=True, help="input CSV or Parquet file")
    p.add_argument("--column", required=True, help="column to privatise")
    p.add_argument(
        "--mechanism",
        default="laplace",
        choices=["laplace", "gaussian", "randomized-response"],
        help="local mechanism (default laplace)",
    )
    p.add_argument("--epsilon", type=float, required=True, help="privacy parameter eps > 0")
    p.add_argument("--delta", type=float, default=None, help="delta (gaussian only)")
    p.add_argument("--r", type=float, help="clipping bound: values are clipped to [-r, r]")
    p.add_argument(
        "--categories", nargs="+", help="randomized-response: the public categories, a b c"
    )
    p.add_argument("--out", required=True, help="output CSV (the privatised column only)")
    p.add_argument(
        "--seed", type=int, help="seeded SIMULATION noise (not for publication); default secure"
    )
    add_json_argument(p, "a summary (output file, count, guarantee)")
    p.set_defaults(handler=run)


def _read_column(path: Path, column: str, *, as_text: bool) -> Any:
    """One column of a CSV or Parquet file (Parquet found by its magic bytes)."""
    import pandas as pd

    from dpbayes.data.readers import is_parquet_file

    if is_parquet_file(path):
        import pyarrow.parquet as pq

        header = pq.read_schema(path).names
        if column not in header:
            raise ValueError(f"--column {column!r} is not in {path.name} (columns: {header})")
        col = pd.read_parquet(path, columns=[column])[column]
        return col.astype(str).where(col.notna(), None) if as_text else col
    try:
        header = list(pd.read_csv(path, nrows=0).columns)
    except UnicodeDecodeError:
        raise ValueError(f"--data {path}: neither UTF-8 CSV nor Parquet") from None
    except pd.errors.EmptyDataError:
        raise ValueError(f"--data {path}: the file is empty (no header, no rows)") from None
    if column not in header:
        raise ValueError(f"--column {column!r} is not in {path.name} (columns: {header})")
    dtype = {column: str} if as_text else None
    # blank lines are rows (a missing value, refused), not skipped: skipping them changed
    # the number of rows released and misaligned the output with the input
    try:
        return pd.read_csv(path, usecols=[column], dtype=dtype, skip_blank_lines=False)[column]
    except UnicodeDecodeError:  # a header in ASCII over a body in another encoding
        raise ValueError(f"--data {path}: not UTF-8 text (re-save it as UTF-8)") from None


def _write_both(frame: Any, out: Path, sidecar: Path, text: str) -> None:
    """:func:`_publish`, with SIGTERM (where it would end the process at once) turned into
    Ctrl+C: a stop from outside also ends with the pair published or put back, and said."""
    import signal
    import threading

    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
    ):
        _publish(frame, out, sidecar, text)
        return
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        _publish(frame, out, sidecar, text)
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def _publish(frame: Any, out: Path, sidecar: Path, text: str) -> None:
    """The values and their guarantee are published together or not at all. Both are
    written to temporaries next to them, the previous pair (if any) is set aside, then both
    are moved into place. Whatever stops that (a full disk, a failed move, Ctrl+C), the
    temporaries are removed and the previous pair is put back: new values never stand
    without their guarantee, nor beside an old one. The guarantee is printed and the one
    error line says what is on disk (where putting things back failed too, exactly what).

    The moves, and their undoing, run with Ctrl+C and SIGTERM deferred: one that lands as
    a move completes (Python acts on it right after the call, before the next line notes
    the move) waits until the pair is published or put back in full, then ends the command
    with a line saying which (a publication that completed is not undone)."""
    from dpbayes.privacy.accountant import interrupts_deferred

    tag = f"{os.getpid()}.tmp"
    tmp_out, tmp_side = (
        out.with_name(f".{out.name}.{tag}"),
        sidecar.with_name(f".{sidecar.name}.{tag}"),
    )
    old_out = out.with_name(f".{out.name}.{os.getpid()}.old")
    old_side = sidecar.with_name(f".{sidecar.name}.{os.getpid()}.old")
    failed = f"--out {out}"
    try:
        frame.to_csv(tmp_out, index=False)
        failed = f"--out's guarantee {sidecar}"
        tmp_side.write_text(text)
    except BaseException as exc:  # nothing moved yet: nothing published
        with interrupts_deferred():
            _remove(tmp_out, tmp_side)
        if not isinstance(exc, OSError):
            raise
        print(text, end="")
        raise OSError(
            f"could not write {failed} ({exc.strerror or exc}); nothing was published (a "
            "previous --out and its guarantee file are kept as they were), the guarantee is "
            "printed above, the values are not kept"
        ) from None
    kept_out = kept_side = published = False
    outcome = ""  # what is on disk, said when a deferred interrupt ends the command
    try:
        with interrupts_deferred():
            try:
                if os.path.lexists(sidecar):  # the old guarantee goes first, kept aside
                    os.replace(sidecar, old_side)
                    kept_side = True
                failed = f"--out {out}"
                if os.path.lexists(out):  # a second name, so that --out is there all along
                    try:
                        os.link(out, old_out, follow_symlinks=False)
                    except OSError:  # no hard links here (some network or FAT file systems)
                        os.replace(out, old_out)
                    kept_out = True
                os.replace(tmp_out, out)
                published = True
                failed = f"--out's guarantee {sidecar}"
                os.replace(tmp_side, sidecar)
            except BaseException as exc:
                left = _put_back(
                    out,
                    sidecar,
                    old_out if kept_out else None,
                    old_side if kept_side else None,
                    published,
                )
                _remove(tmp_out, tmp_side)
                outcome = (
                    f"{left}; the guarantee is printed on stdout"
                    if left
                    else "nothing was published (a previous --out and its guarantee file are "
                    "kept as they were)"
                )
                if not isinstance(exc, OSError):
                    if left:  # the one line is main's; what is where goes first
                        print(text, end="")
                        print(f"dpbayes: {outcome}", file=sys.stderr)
                        outcome = ""
                    raise
                print(text, end="")
                why = f"could not write {failed} ({exc.strerror or exc})"
                raise OSError(
                    f"{why}, nor undo it: {left}; the guarantee is printed above"
                    if left
                    else f"{why}; nothing was published (a previous --out and its guarantee "
                    "file are kept as they were), the guarantee is printed above, the values "
                    "are not kept"
                ) from None
            outcome = f"--out {out} and its guarantee {sidecar} were written (published)"
            _remove(old_out, old_side)  # published: the previous pair is no longer needed
    except KeyboardInterrupt:  # deferred to here: the pair is published, or put back
        if outcome:
            print(f"dpbayes: {outcome}", file=sys.stderr)
        raise


def _remove(*paths: Path) -> None:
    for path in paths:
        with contextlib.suppress(OSError):
            path.unlink(missing_ok=True)


def _put_back(
    out: Path, sidecar: Path, old_out: Path | None, old_side: Path | None, published: bool
) -> str:
    """Undo a partial publication: the previous values and guarantee file back in place,
    the new values gone. '' when done; else what is on disk now, values and guarantee."""
    undone = True
    values = f"no --out {out} was written"
    if old_out is not None:
        try:  # over the new values; a no-op (both names stay) when they were never moved
            os.replace(old_out, out)
        except OSError:
            undone = False
            now = (
                "holds the NEW values without their guarantee file"
                if published
                else "holds its previous values"
                if os.path.lexists(out)
                else "is gone"
            )
            values = f"--out {out} {now}, the previous values are kept as {old_out}"
        else:
            values = f"--out {out} holds its previous values"
            with contextlib.suppress(OSError):
                old_out.unlink(missing_ok=True)
    elif published:
        try:
            out.unlink()
        except OSError:
            undone = False
            values = f"--out {out} holds the NEW values without their guarantee file"
    side = f"no guarantee file was written at {sidecar}"
    if old_side is not None:
        try:
            os.replace(old_side, sidecar)
        except OSError as exc:
            undone = False
            side = (
                f"the previous guarantee file could not be put back at {sidecar} "
                f"({exc.strerror or exc}) and is kept as {old_side}"
            )
        else:
            side = f"{sidecar} holds the previous guarantee"
    return "" if undone else f"{values}; {side}"


def run(args: argparse.Namespace) -> int:
    import pandas as pd

    from dpbayes.nonparametric import privatize

    rr = args.mechanism == "randomized-response"
    refuse_inapplicable(
        args,
        {
            "categories": (rr, f"--categories is for randomized-response, not {args.mechanism}"),
            "r": (not rr, "--r is for laplace and gaussian, not randomized-response"),
            "delta": (
                args.mechanism == "gaussian",
                f"--delta is for gaussian, not {args.mechanism}",
            ),
        },
    )
    path = Path(args.data)
    if not path.is_file():
        raise OSError(f"--data file not found: {path}")
    out = Path(args.out)
    if not out.name or out.is_dir():  # "/", ".", "": with_suffix has no name to change
        raise OSError(f"--out {args.out}: is a folder, not a file")
    sidecar = out.with_suffix(".guarantee.json")
    # each output its own file, none of them the data (an --out onto --data erased it)
    check_outputs(
        {"--out": args.out, "--out's .guarantee.json": str(sidecar), "--json": args.json},
        keep={"--data": args.data},
    )
    if rr:
        if not args.categories:
            raise ValueError("--categories must list the public categories for randomized-response")
        col = _read_column(path, args.column, as_text=True)
        if col.isna().any():
            raise ValueError(f"column {args.column!r} has missing values; privatise complete data")
        result = privatize(
            col.to_numpy(dtype=object),
            mechanism="randomized-response",
            epsilon=args.epsilon,
            categories=list(args.categories),
            rng=args.seed,
        )
    else:
        col = _read_column(path, args.column, as_text=False)
        if len(col) == 0:
            raise ValueError(f"--data {path}: column {args.column!r} has no rows to privatise")
        if not pd.api.types.is_numeric_dtype(col):
            raise ValueError(
                f"column {args.column!r} must be numeric for the {args.mechanism} mechanism"
            )
        if col.isna().any():
            raise ValueError(f"column {args.column!r} has missing values; privatise complete data")
        try:
            result = privatize(
                col.to_numpy(dtype=float),
                mechanism=args.mechanism,
                epsilon=args.epsilon,
                delta=0.0 if args.delta is None else args.delta,
                r=args.r,
                rng=args.seed,
            )
        except ValueError as exc:  # the library names its argument; the CLI its flag
            text = str(exc)
            if text.startswith(("r ", "r=", "sensitivity ")):
                flag = "--r" if args.r is None else f"--r {args.r:g}"
                raise ValueError(f"{flag}: {text}") from None
            raise
    # released from here on: a failing write still prints the guarantee and says so
    text = json.dumps(result.guarantee.to_dict(), indent=2, default=str) + "\n"
    _write_both(pd.DataFrame({args.column: result.values}), out, sidecar, text)
    if args.json is not None:
        summary = {
            "out": str(out),
            "count": len(result),
            "guarantee": result.guarantee.to_dict(),
            "guarantee_file": str(sidecar),
        }
        try:
            emit_json(summary, args.json)
        except OSError as exc:
            emit_json(summary, None)
            raise OSError(
                f"could not write --json {args.json} ({exc.strerror or exc}); the values were "
                f"written to --out {out} and the guarantee to {sidecar} (summary on stdout)"
            ) from None
        return 0
    print(f"wrote {len(result)} privatised values to {out}")
    print(f"guarantee: {result.guarantee.describe()} (per person, local DP)")
    print(f"guarantee written to {sidecar}")
    return 0
