"""``dpbayes privatize``: release one column of a CSV file under local differential privacy.

Each row's value is clipped to [-r, r] and released with Laplace (or Gaussian) noise, or
passed through randomized response for categories (paper 001's data-owner side). The
output CSV holds the privatised column only; the guarantee is printed and written next
to it as ``OUT.guarantee.json``. Noise is floating-point-safe unless ``--seed`` asks for
a (non-publishable) simulation.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any


def register(sub: Any) -> None:
    p = sub.add_parser(
        "privatize", help="release a column under local DP (Laplace/Gaussian with clipping, RR)"
    )
    p.add_argument("--data", required=True, help="input CSV file")
    p.add_argument("--column", required=True, help="column to privatise")
    p.add_argument(
        "--mechanism",
        default="laplace",
        choices=["laplace", "gaussian", "randomized-response"],
        help="local mechanism (default laplace)",
    )
    p.add_argument("--epsilon", type=float, required=True, help="privacy parameter eps > 0")
    p.add_argument("--delta", type=float, default=0.0, help="delta (gaussian only)")
    p.add_argument("--r", type=float, help="clipping bound: values are clipped to [-r, r]")
    p.add_argument(
        "--categories", help="comma-separated public category list (randomized-response)"
    )
    p.add_argument("--out", required=True, help="output CSV (the privatised column only)")
    p.add_argument(
        "--seed", type=int, help="seeded SIMULATION noise (not for publication); default secure"
    )
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    import pandas as pd

    from dpbayes.nonparametric import privatize

    path = Path(args.data)
    if not path.is_file():
        raise OSError(f"--data file not found: {path}")
    header = pd.read_csv(path, nrows=0).columns
    if args.column not in header:
        raise ValueError(
            f"--column {args.column!r} is not in {path.name} (columns: {list(header)})"
        )
    if args.mechanism == "randomized-response":
        if not args.categories:
            raise ValueError("--categories must list the public categories for randomized-response")
        cats = [c.strip() for c in args.categories.split(",")]
        col = pd.read_csv(path, usecols=[args.column], dtype={args.column: str})[args.column]
        if col.isna().any():
            raise ValueError(f"column {args.column!r} has missing values; privatise complete data")
        result = privatize(
            col.to_numpy(dtype=object),
            mechanism="randomized-response",
            epsilon=args.epsilon,
            categories=cats,
            rng=args.seed,
        )
    else:
        col = pd.read_csv(path, usecols=[args.column])[args.column]
        if not pd.api.types.is_numeric_dtype(col):
            raise ValueError(
                f"column {args.column!r} must be numeric for the {args.mechanism} mechanism"
            )
        result = privatize(
            col.to_numpy(dtype=float),
            mechanism=args.mechanism,
            epsilon=args.epsilon,
            delta=args.delta,
            r=args.r,
            rng=args.seed,
        )
    out = Path(args.out)
    pd.DataFrame({args.column: result.values}).to_csv(out, index=False)
    sidecar = out.with_suffix(".guarantee.json")
    sidecar.write_text(json.dumps(result.guarantee.to_dict(), indent=2, default=str) + "\n")
    print(f"wrote {len(result)} privatised values to {out}")
    print(f"guarantee: {result.guarantee.describe()} (per person, local DP)")
    print(f"guarantee written to {sidecar}")
    return 0
