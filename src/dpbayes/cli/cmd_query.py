"""``dpbayes query``: ask the utility-driven query engine (paper 000 §5) one question.

The engine's state (the cube definition, the budget ledger and the history of noisy
answers) lives in ``--state DIR``. The first call creates it and needs ``--data``,
``--attribute`` (one per attribute: ``name=a,b,c`` for categories, ``name=bins:0,1,5,inf``
for numeric bins) and ``--epsilon`` (the total budget); later calls reuse it::

    dpbayes query --state st --data randhie.csv.gz --attribute health=excellent,good,fair,poor \\
        --epsilon 1 --where "health = poor" --half-width 20 --confidence 0.95
    dpbayes query --state st --where "health = poor" --half-width 40 --confidence 0.9
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

_SPEC = "cube.json"


def register(sub: Any) -> None:
    p = sub.add_parser(
        "query", help="answer a counting query within +-d with probability p (paper 000)"
    )
    p.add_argument("--state", required=True, help="folder holding the cube, ledger and history")
    p.add_argument("--data", help="CSV/Parquet file (first call only)")
    p.add_argument(
        "--attribute",
        action="append",
        default=[],
        help="name=a,b,c or name=bins:e0,e1,...,inf (first call only; repeat per attribute)",
    )
    p.add_argument("--epsilon", type=float, help="total privacy budget (first call only)")
    p.add_argument("--where", default="", help='predicate, e.g. "health = poor and idp = 1"')
    p.add_argument("--half-width", type=float, required=True, help="required half-width d")
    p.add_argument("--confidence", type=float, required=True, help="required probability p")
    p.add_argument("--seed", type=int, help="seeded simulation noise (default: secure noise)")
    p.add_argument("--json", action="store_true", help="print the answer as JSON")
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
        edges = [float(e) for e in rest[5:].split(",") if e.strip()]
        return name, {"bins": edges}
    values = [_value(v) for v in rest.split(",") if v.strip()]
    if not values:
        raise ValueError(f"--attribute {name!r} lists no categories")
    return name, {"categories": values}


def _cube(spec: dict[str, Any]) -> Any:
    from dpbayes.answers import Bins, Cube

    attrs: dict[str, Any] = {}
    for name, dom in spec["attributes"].items():
        attrs[name] = Bins(dom["bins"]) if "bins" in dom else dom["categories"]
    return Cube.from_table(spec["data"], attrs)


def run(args: argparse.Namespace) -> int:
    from dpbayes.answers import QueryEngine

    state = Path(args.state)
    spec_path = state / _SPEC
    if spec_path.exists():
        if args.data or args.attribute:
            raise ValueError(f"{state} already holds a cube; omit --data and --attribute")
        spec = json.loads(spec_path.read_text())
    else:
        if not args.data or not args.attribute or args.epsilon is None:
            raise ValueError(
                f"{state} holds no engine yet: the first call needs --data, --attribute "
                "and --epsilon"
            )
        spec = {
            "data": str(Path(args.data).resolve()),
            "attributes": dict(parse_attribute(a) for a in args.attribute),
        }
    cube = _cube(spec)
    engine = QueryEngine.at(state, cube, epsilon=args.epsilon, rng=args.seed)
    if not spec_path.exists():
        spec_path.write_text(json.dumps(spec, indent=1))
    a = engine.ask(args.where, half_width=args.half_width, confidence=args.confidence)
    remaining = engine.accountant.remaining[0]
    if args.json:
        print(
            json.dumps(
                {
                    "query": a.query,
                    "status": a.status,
                    "estimate": a.estimate,
                    "interval": a.interval,
                    "confidence": a.confidence,
                    "epsilon": a.epsilon,
                    "remaining_epsilon": remaining,
                    "reason": a.reason,
                    "guarantee": a.guarantee.describe() if a.guarantee else None,
                }
            )
        )
    elif a.answered:
        assert a.interval is not None and a.estimate is not None
        lo, hi = a.interval
        print(
            f"{a.status}: {a.estimate:.6g} in [{lo:.6g}, {hi:.6g}] with probability "
            f">= {a.level:g}; spent eps={a.epsilon:.6g}, remaining {remaining:.6g}"
        )
        if a.guarantee is not None:
            print(a.guarantee.describe())
    else:
        print(f"refused: {a.reason}")
    return 0 if a.answered else 3
