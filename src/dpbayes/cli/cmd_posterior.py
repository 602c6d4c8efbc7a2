"""``dpbayes posterior``: the recipient's side: the noise-aware posterior of a release file."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any


def register(sub: Any) -> None:
    p = sub.add_parser(
        "posterior",
        help="noise-aware posterior of a released JSON (no data needed)",
        description=(
            "Read a release written by `dpbayes release --json` and print the posterior "
            "that accounts for the privacy noise (computed from the released values and "
            "public facts only), next to the naive one."
        ),
    )
    p.add_argument("--release", required=True, metavar="RELEASE.json", help="the release file")
    p.add_argument("--level", type=float, default=0.95, help="credible level (default 0.95)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(handler=run)


def _plain(v: Any) -> Any:
    if hasattr(v, "tolist"):
        return v.tolist()
    if isinstance(v, tuple):
        return [_plain(x) for x in v]
    return v


def _fmt(v: Any) -> str:
    v = _plain(v)
    if isinstance(v, list):
        return "[" + ", ".join(_fmt(x) for x in v) + "]"
    return f"{v:.6g}" if isinstance(v, float) else str(v)


def run(args: argparse.Namespace) -> int:
    from dpbayes.privacy.validation import check_probability
    from dpbayes.release.noise_aware import noise_aware_posterior
    from dpbayes.release.reader import read_release

    level = check_probability(args.level, "--level", open_interval=True)
    rel = read_release(args.release)
    aware = noise_aware_posterior(rel)
    summary = {
        "mean": _plain(aware.mean()),
        "sd": _plain(aware.std()),
        "credible_interval": {
            "level": level,
            "kind": "central",
            "bounds": _plain(aware.interval(level)),
        },
    }
    naive = None
    if rel.posterior is not None:
        naive = {
            "mean": _plain(rel.posterior.mean()),
            "sd": _plain(rel.posterior.std()),
            "credible_interval": {
                "level": level,
                "kind": "central",
                "bounds": _plain(rel.posterior.interval(level)),
            },
        }
    if args.json:
        out = {
            "model": rel.model.to_dict(),
            "mechanism": rel.mechanism,
            "released": rel.released,
            "guarantee": rel.guarantee.to_dict(),
            "noise_aware_posterior": {"family": aware.family, **summary},
            "naive_posterior": naive,
        }
        json.dump(out, sys.stdout)
        sys.stdout.write("\n")
        return 0
    n = rel.public.get("n")
    print(f"model:       {rel.model.name}" + (f" (n = {n})" if n is not None else ""))
    print(f"mechanism:   {rel.mechanism}; {rel.guarantee.describe()}")
    print(f"released:    {json.dumps(rel.released)}")
    print(f"noise-aware posterior ({aware.family}):")
    print(f"  mean:      {_fmt(summary['mean'])}")
    print(f"  sd:        {_fmt(summary['sd'])}")
    print(
        f"  {level:.0%} credible interval (central): {_fmt(summary['credible_interval']['bounds'])}"
    )
    if naive is not None:
        print("naive posterior (noise ignored, over-confident):")
        print(f"  mean:      {_fmt(naive['mean'])}")
        bounds = naive["credible_interval"]["bounds"]
        print(f"  {level:.0%} credible interval (central): {_fmt(bounds)}")
    return 0
