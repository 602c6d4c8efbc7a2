"""``dpbayes query``: ask the utility-driven query engine (paper 000 §5) one question.

The engine's state (the cube definition, the budget ledger and the history of noisy
answers) lives in ``--state DIR``. The first call creates it and needs ``--attribute`` (one
per attribute: ``name=a,b,c`` for categories, ``name=bins:0,1,5,inf`` for numeric bins),
``--epsilon`` (the total budget) and ``--data`` (default: the bundled RAND HIE data); later
calls reuse it. The flags and ``--json FILE`` (never a file of the state or the data) are
checked before the state is created; a first call that still fails, or is refused, with
nothing spent removes what it created, so the corrected call starts fresh::

    dpbayes query --state st --attribute health=excellent,good,fair,poor \\
        --epsilon 1 --where "health = poor" --half-width 100 --confidence 0.95
    dpbayes query --state st --where "health = poor" --half-width 200 --confidence 0.9

Privacy unit (stored in the cube definition, fixed at the first call): on the bundled data
one person (``person`` column, <= 5 rows: every row kept; ``--record-level`` for one
person-year); on other data one record unless ``--user-column COL --max-rows-per-user K``.

Noise of a fresh answer (``--noise``, per call): ``laplace`` (the default), ``gaussian`` or
``auto`` (the one that raises the ledger's composed eps least). Gaussian answers need a
budget delta > 0 (``--delta``) and compose tightly with ``--composition pld`` or ``rdp``
(both fixed at the first call, with ``--epsilon``); a ``pld`` ledger takes Gaussian answers
only (there the default and ``auto`` are Gaussian, and ``laplace`` is refused).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import sys
from pathlib import Path
from typing import Any

from dpbayes.cli.common import (
    add_json_argument,
    add_privacy_unit_arguments,
    check_outputs,
    emit_json,
    forget_stdout,
    ledger_files,
    privacy_unit,
)

_SPEC = "cube.json"
_LEDGER = "ledger.json"
_HISTORY = "history.jsonl"


def register(sub: Any) -> None:
    p = sub.add_parser(
        "query", help="answer a counting query within +-d with probability p (paper 000)"
    )
    p.add_argument("--state", required=True, help="folder holding the cube, ledger and history")
    p.add_argument(
        "--data", help="CSV/Parquet file (first call only; default: the bundled RAND HIE data)"
    )
    p.add_argument(
        "--attributes",
        "--attribute",
        dest="attribute",
        nargs="+",
        action="extend",
        default=[],
        metavar="SPEC",
        help="name=a,b,c (categories) or name=bins:e0,e1,...,inf, one SPEC per attribute "
        "(first call only)",
    )
    p.add_argument("--epsilon", type=float, help="total privacy budget (first call only)")
    p.add_argument(
        "--delta", type=float, help="total delta of the budget, default 0 (first call only)"
    )
    p.add_argument(
        "--composition",
        choices=["basic", "pld", "rdp"],
        help="how the ledger composes spends, default basic (first call only; see "
        "dpbayes budget init)",
    )
    p.add_argument(
        "--noise",
        choices=["laplace", "gaussian", "auto"],
        default=None,
        help="noise of a fresh answer: laplace (default; gaussian under --composition pld), "
        "gaussian (needs a budget delta > 0) or auto (whichever raises the composed spent "
        "eps least)",
    )
    p.add_argument("--where", default="", help='predicate, e.g. "health = poor and idp = 1"')
    p.add_argument("--half-width", type=float, required=True, help="required half-width d")
    p.add_argument("--confidence", type=float, required=True, help="required probability p")
    # kept only to refuse it by name: the engine spends a real ledger, so seeded
    # (reproducible) noise is never accepted here; simulations use the library
    p.add_argument("--seed", type=int, help=argparse.SUPPRESS)
    add_json_argument(p, "the answer")
    add_privacy_unit_arguments(p)
    p.set_defaults(handler=run)


def _value(text: str) -> Any:
    try:
        return int(text)
    except ValueError:
        pass
    try:
        x = float(text)
        return x if math.isfinite(x) else text
    except ValueError:
        return text.strip()


def parse_attribute(spec: str) -> tuple[str, dict[str, Any]]:
    """``name=a,b`` -> categories; ``name=bins:0,1,inf`` -> bin edges (JSON-friendly)."""
    if "=" not in spec:
        raise ValueError(
            f"--attribute must look like name=a,b,c or name=bins:0,1,inf, got {spec!r}"
        )
    name, _, rest = spec.partition("=")
    name = name.strip()
    if rest.startswith("bins:"):
        from dpbayes.answers import Bins

        try:
            edges = [float(e) for e in rest[5:].split(",") if e.strip()]
            Bins(edges)
        except ValueError as exc:
            why = str(exc).replace("could not convert string to float:", "not a number:")
            raise ValueError(f"--attribute {name}=bins:...: {why}") from None
        return name, {"bins": edges}
    values = [_value(v) for v in rest.split(",") if v.strip()]
    if not values:
        raise ValueError(f"--attribute {name!r} lists no categories")
    return name, {"categories": values}


def parse_attributes(specs: list[str]) -> dict[str, dict[str, Any]]:
    """Every ``--attribute`` SPEC by name; a name given twice is refused (the later
    domain silently replaced the earlier one)."""
    attrs: dict[str, dict[str, Any]] = {}
    for spec in specs:
        name, dom = parse_attribute(spec)
        if name in attrs:
            raise ValueError(
                f"--attribute {name!r} is given twice: list all its categories (or bins) "
                "in one --attribute"
            )
        attrs[name] = dom
    return attrs


def _cube(spec: dict[str, Any]) -> Any:
    """The cube of the data. Numeric bins over a column the table types as text are
    refused (nothing spent): a schema fact, public (not for a CSV file, whose types are
    guessed from the values: its fields are read as text, each by one fixed rule). A
    record whose value is NULL, NaN/inf or outside the domain falls in no cell and is in
    no answer ('all records in the domain'); that is not checked against the data, since
    a refusal that depended on the rows would publish, for free, whether (and how many)
    records lie outside a domain the caller chose."""
    from dpbayes.answers import Bins, Cube
    from dpbayes.data import open_table
    from dpbayes.data.readers import guesses_types

    unit = spec.get("privacy_unit")  # absent: record level (and cubes made before units)
    # a CSV file's column types are guessed from every record's value (one 'n/a' makes a
    # column of numbers text): its attributes are read as the file's text and matched
    # value by value (dpbayes.answers.cube.text_matches), and no refusal depends on them
    csv = guesses_types(spec["data"])
    table = open_table(
        spec["data"],
        user_column=None if unit is None else unit["user_column"],
        max_rows_per_user=None if unit is None else unit["max_rows_per_user"],
        text_columns=list(spec["attributes"]) if csv else (),
    )
    kinds = table.column_types()
    attrs: dict[str, Any] = {}
    for name, dom in spec["attributes"].items():
        if "bins" in dom and not csv and kinds.get(name, "numeric") not in ("numeric", "bool"):
            raise ValueError(
                f"--attribute {name}=bins:...: column {name!r} is not numeric "
                f"({kinds[name]}); numeric bins need a numeric column (nothing was spent)"
            )
        attrs[name] = Bins(dom["bins"]) if "bins" in dom else dom["categories"]
    return Cube.from_table(table, attrs)


def _is_bundled(path: str) -> bool:
    from dpbayes.data import bundled_path

    return Path(path).resolve() == bundled_path("randhie").resolve()


def _unit_spec(user: str | None, k: int | None) -> dict[str, Any] | None:
    return None if user is None else {"user_column": user, "max_rows_per_user": k}


def _unit_text(unit: dict[str, Any] | None) -> str:
    if unit is None:
        return "one record (record level)"
    return f"one user ({unit['user_column']!r}, <= {unit['max_rows_per_user']} rows)"


def _unit_given(args: argparse.Namespace) -> bool:
    return bool(
        args.record_level or args.user_column is not None or args.max_rows_per_user is not None
    )


def _state_files(state: Path) -> dict[str, str | Path | None]:
    """Every file the state folder keeps (the ledger with its lock and temporary, the
    history, the cube definition), for ``check_outputs``."""
    return {
        **ledger_files(str(state / _LEDGER), "--state's ledger"),
        "--state's history": state / _HISTORY,
        "--state's cube": state / _SPEC,
    }


def _refuse_lost_ledger(state: Path) -> None:
    """A state whose cube exists was charged to its ledger: without the ledger, a fresh
    budget (``--epsilon``) would spend again what the history's answers cost."""
    if (state / _LEDGER).exists():
        return
    from dpbayes.answers.store import JsonlStore

    n = len(JsonlStore(state / _HISTORY).load())
    raise ValueError(
        f"--state {state}: ledger missing but the history holds {n} charged answers; "
        f"refusing a fresh budget (restore {state / _LEDGER}; nothing was spent)"
    )


def _check_where(cube: Any, where: str) -> None:
    """The predicate against the cube, named by its flag, before the state is created."""
    try:
        cube.query(where)
    except ValueError as exc:
        text = str(exc)
        raise ValueError(
            f"--{text}" if text.startswith("where:") else f"--where {where!r}: {text}"
        ) from None


def _undo_first_call(state: Path, files: list[Path], folders: list[Path]) -> None:
    """Remove what a failed or refused first call created (``files``, then ``folders``),
    so that the corrected call starts fresh. Nothing is removed when a spend or an answer
    was recorded, or when the ledger cannot be read."""
    from dpbayes.privacy import Accountant

    ledger, history = state / _LEDGER, state / _HISTORY
    try:
        if ledger.exists():
            acc = Accountant.open(ledger)
            if acc.spent != (0.0, 0.0) or acc.spends:
                return
        if history.exists() and history.stat().st_size > 0:
            return
    except Exception:  # an unreadable ledger or history: keep everything
        return
    for f in files:
        with contextlib.suppress(OSError):
            f.unlink()
    for folder in folders:  # the state folder first, then the parents this call made
        try:
            folder.rmdir()  # only if empty
        except OSError:
            break


def run(args: argparse.Namespace) -> int:
    from dpbayes.privacy.validation import (
        check_delta,
        check_epsilon,
        check_positive,
        check_probability,
    )

    if args.seed is not None:
        raise ValueError(
            "--seed is refused: dpbayes query spends the real budget in --state, and seeded "
            "noise is a reproducible simulation (use QueryEngine(..., rng=seed) in experiments)"
        )
    check_positive(args.half_width, "--half-width")
    check_probability(args.confidence, "--confidence", open_interval=True)
    state = Path(args.state)
    if state.exists() and not state.is_dir():
        raise OSError(f"--state {state}: is a file, not a folder")
    spec_path = state / _SPEC
    first = not spec_path.exists()
    if not first:
        if args.data or args.attribute:
            raise ValueError(f"{state} already holds a cube; omit --data and --attribute")
        _refuse_lost_ledger(state)
        spec = json.loads(spec_path.read_text())
        if _unit_given(args):
            asked = _unit_spec(*privacy_unit(args, bundled=_is_bundled(spec["data"])))
            if asked != spec.get("privacy_unit"):
                raise ValueError(
                    f"{state} holds a cube protecting {_unit_text(spec.get('privacy_unit'))}, "
                    f"not {_unit_text(asked)}: the privacy unit is fixed at the first call "
                    "(use a new --state)"
                )
    else:
        if not args.attribute or args.epsilon is None:
            raise ValueError(
                f"{state} holds no engine yet: the first call needs --attribute and --epsilon "
                "(and --data, default the bundled RAND HIE data)"
            )
        check_epsilon(args.epsilon, "--epsilon")
        if args.delta is not None:
            check_delta(args.delta, "--delta")
        from dpbayes.data import bundled_path

        data = str(Path(args.data or bundled_path("randhie")).resolve())
        unit = _unit_spec(*privacy_unit(args, bundled=_is_bundled(data)))
        spec = {"data": data, "attributes": parse_attributes(args.attribute)}
        if unit is not None:
            spec["privacy_unit"] = unit
    # every output is checked before the state is created or anything is spent
    check_outputs({"--json": args.json}, keep={**_state_files(state), "--data": spec["data"]})
    cube = _cube(spec)
    _check_where(cube, args.where)
    # what this call creates: removed again if a first call fails with nothing spent
    files = [Path(f) for f in _state_files(state).values() if f is not None]
    files = [f for f in files if not f.exists()]
    folders = [d for d in (state, *state.parents) if not d.exists()]
    from dpbayes.cli.release_run import _interrupt, _on_sigterm

    previous = _on_sigterm(_interrupt)  # SIGTERM ends like Ctrl+C: the undo below runs
    try:
        return _ask(args, state, spec, cube)
    finally:
        _on_sigterm(previous)
        if first:
            _undo_first_call(state, files, folders)


def _ask(args: argparse.Namespace, state: Path, spec: dict[str, Any], cube: Any) -> int:
    from dpbayes.answers import QueryEngine

    spec_path = state / _SPEC
    engine = QueryEngine.at(
        state,
        cube,
        epsilon=args.epsilon,
        delta=args.delta,
        composition=args.composition,
        noise=args.noise,
    )
    if not spec_path.exists():
        spec_path.write_text(json.dumps(spec, indent=1))
    a = engine.ask(args.where, half_width=args.half_width, confidence=args.confidence)
    try:  # the ledger is read again; after a charge that may fail (moved, damaged)
        remaining: float | None = engine.accountant.remaining[0]
        left = f"{remaining:.6g}"
    except (OSError, ValueError) as exc:
        remaining, left = None, f"unknown (the ledger could not be read: {exc})"
    doc = {
        "query": a.query,
        "status": a.status,
        "estimate": a.estimate,
        "interval": a.interval,
        "confidence": a.confidence,
        "epsilon": a.epsilon,
        "noise": a.noise,
        "delta": a.delta,
        "remaining_epsilon": remaining,
        "reason": a.reason,
        "privacy_unit": _unit_text(spec.get("privacy_unit")),
        "guarantee": a.guarantee.describe() if a.guarantee else None,
    }
    failures: list[str] = []
    to_stdout = args.json == "-"
    if args.json not in (None, "-"):
        try:
            emit_json(doc, args.json)
        except OSError as exc:  # after the spend: the answer goes to stdout, never lost
            failures.append(f"could not write --json {args.json} ({exc.strerror or exc})")
            to_stdout = True
    shown = True
    try:
        if to_stdout:
            emit_json(doc, None)
        elif args.json is None and a.answered:
            assert a.interval is not None and a.estimate is not None
            lo, hi = a.interval
            noise = f" ({a.noise} noise, delta={a.delta:.3g})" if a.noise == "gaussian" else ""
            print(
                f"{a.status}: {a.estimate:.6g} in [{lo:.6g}, {hi:.6g}] with probability "
                f">= {a.level:g}; spent eps={a.epsilon:.6g}{noise}, remaining {left}"
            )
            if a.guarantee is not None:
                print(a.guarantee.describe())
            sys.stdout.flush()
    except OSError as exc:  # stdout gone (a reader that quit): the answer goes to stderr
        shown = False
        failures.append(f"could not write stdout ({exc.strerror or exc})")
        forget_stdout()
    failure = "; ".join(failures)
    if a.answered:
        if not failure:
            return 0
        paid = (
            "was spent (and charged to --state's ledger)"
            if a.status == "fresh"
            else "cost nothing (from the history)"
        )
        where = "is printed on stdout" if shown else "is printed below"
        print(f"dpbayes: error: {failure}; the answer {paid} and {where}", file=sys.stderr)
        if not shown:
            print(json.dumps(doc, default=str), file=sys.stderr, flush=True)
        return 2
    # a refusal (the budget cannot pay for this accuracy) is an error like any other:
    # one line on stderr, exit code 2, nothing spent
    reason = str(a.reason or "refused").strip().splitlines()[0]
    print(
        f"dpbayes: error: refused: {reason}" + (f"; {failure}" if failure else ""),
        file=sys.stderr,
    )
    return 2
