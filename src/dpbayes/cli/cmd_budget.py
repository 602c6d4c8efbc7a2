"""``dpbayes budget``: create and inspect a privacy-budget ledger file."""

from __future__ import annotations

import argparse
import os
from datetime import UTC, datetime
from typing import Any

from dpbayes.cli.common import add_json_argument, check_destination, emit_json


def register(sub: Any) -> None:
    p = sub.add_parser("budget", help="create or show a privacy-budget ledger")
    bsub = p.add_subparsers(dest="budget_command", metavar="ACTION", required=True)
    init = bsub.add_parser("init", help="create a new ledger file with a total budget")
    init.add_argument("file", help="ledger file to create (must not exist)")
    init.add_argument("--epsilon", type=float, required=True, help="total eps > 0")
    init.add_argument("--delta", type=float, default=0.0, help="total delta in [0, 1)")
    init.add_argument(
        "--composition",
        choices=["basic", "pld", "rdp"],
        default="basic",
        help="how spends add up: basic (eps and delta add; the default; any release), pld "
        "(optimal composition of privacy-loss distributions at the budget's delta; "
        "Gaussian-noise releases only; needs --delta > 0) or rdp (Renyi; pure eps-DP and "
        "Gaussian releases; needs --delta > 0). A ledger refuses, before any noise, a "
        "release its composition is not a valid budget check for",
    )
    add_json_argument(init, "the new ledger's summary")
    init.set_defaults(handler=run_init)
    show = bsub.add_parser("show", help="show a ledger's total, spent and remaining budget")
    show.add_argument("file")
    add_json_argument(show, "the ledger's summary and spends")
    show.set_defaults(handler=run_show)


def run_init(args: argparse.Namespace) -> int:
    from dpbayes.privacy import Accountant

    if args.file.endswith(("/", os.sep)):  # Path drops the slash: "d2/" made a file d2
        raise OSError(f"ledger file {args.file}: names a folder, not a file")
    check_destination(args.file, "ledger file")  # its folder exists, it is no folder
    if os.path.lexists(args.file):
        raise OSError(
            f"ledger file {args.file} already exists (a ledger is never overwritten): "
            f"`dpbayes budget show {args.file}` shows it, --budget-file {args.file} spends "
            "from it"
        )
    acc = Accountant(args.epsilon, args.delta, path=args.file, composition=args.composition)
    if args.json is not None:
        emit_json({"path": str(acc.path), **acc.summary()}, args.json)
        return 0
    print(
        f"created {acc.path}: total eps {args.epsilon:g}, delta {args.delta:g}, "
        f"{args.composition} composition"
    )
    return 0


def run_show(args: argparse.Namespace) -> int:
    from dpbayes.privacy import Accountant

    acc = Accountant.open(args.file)
    summary = acc.summary()
    if args.json is not None:
        summary["spends"] = [s.to_dict() for s in acc.spends]
        emit_json(summary, args.json)
        return 0
    t, s, r = summary["total"], summary["spent"], summary["remaining"]
    print(f"ledger:    {acc.path}")
    print(f"total:     eps {t['epsilon']:.6g}, delta {t['delta']:.3g}")
    print(
        f"spent:     eps {s['epsilon']:.6g}, delta {s['delta']:.3g} in {summary['spends']} spend(s)"
    )
    print(f"remaining: eps {r['epsilon']:.6g}, delta {r['delta']:.3g}")
    print(f"composition: {summary['composition']}")
    for sp in acc.spends:
        when = (
            datetime.fromtimestamp(sp.time, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
            if sp.time
            else "-"
        )
        facts = "  ".join(
            x
            for x in (
                sp.label or "-",
                f"unit: {sp.unit}" if sp.unit else "",
                f"source: {sp.source}" if sp.source else "",
            )
            if x
        )
        print(f"  {when}  eps {sp.epsilon:.6g}  delta {sp.delta:.3g}  {facts}")
    return 0
