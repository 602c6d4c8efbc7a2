"""``dpbayes experiment NAME``: run a reproduction of a paper's figure."""

from __future__ import annotations

import argparse
from typing import Any

from dpbayes.cli.common import add_quiet_argument, emit_json, progress


def register(sub: Any) -> None:
    p = sub.add_parser("experiment", help="reproduce a paper's figure (CSV + PNG)")
    p.add_argument("name", nargs="?", help="experiment name; omit to list them")
    p.add_argument("--out", default="results", help="output folder (default: results/)")
    p.add_argument("--small", action="store_true", help="the reduced version the tests run")
    p.add_argument("--seed", type=int, default=0, help="simulation seed (default 0)")
    p.add_argument("--json", action="store_true", help="print the files (or the list) as JSON")
    add_quiet_argument(p)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from dpbayes import experiments

    if not args.name:
        if args.json:
            emit_json({"experiments": experiments.available()}, None)
            return 0
        for name, desc in experiments.available().items():
            print(f"{name:24s} {desc}")
        return 0
    out = f"{args.out}/{args.name}"
    with progress(f"experiment {args.name}", quiet=args.quiet):
        paths = [str(p) for p in experiments.run(args.name, out, small=args.small, seed=args.seed)]
    if args.json:
        emit_json({"experiment": args.name, "files": paths}, None)
        return 0
    for path in paths:
        print(path)
    return 0
