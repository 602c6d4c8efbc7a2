"""Fresh answers a service budget affords under basic, Rényi and PLD composition, side by side.

    python benchmarks/bench_service_composition.py            # both mixes, every composition

The service (``QueryService``, in process: this measures accounting, not HTTP) on the
bundled data with its default privacy unit (a person, k = 5 rows), a budget of (eps 1,
delta 1e-6) and a fresh SQLite file per run, answers one request mix until the budget
refuses; the figure is the number of fresh answers (each one a noisy answer released and
charged), under ``--composition basic``, ``rdp`` and ``pld`` in the same run:

* ``bench_service``: bench_service.py's mix (its 40 disjoint predicates and three
  requirements, 20 clients x 200 queries, in its order). Each cell is read by few answers,
  each costly (eps 0.58 for +-20 at 90%), and composition is only tighter than the sum
  for many small spends: expect no gain here;
* ``ladder``: the first ``--ladder-cells`` (default 8) of the 40 predicates asked in
  rounds with a requirement 3% tighter each round (+-300 at 90% first): each round needs
  one more small fresh answer per cell, the regime tight accounting is for (a monitoring
  dashboard refreshed with more precision).

Four runs per mix: basic composition with Laplace answers (the baseline), Rényi with
Laplace answers, Rényi with ``noise="auto"`` (each fresh answer Laplace or Gaussian at the
budget's delta, whichever raises the spent budget less), and PLD with Gaussian answers
(a PLD ledger takes no others: for them alone its check is a valid filter).

After each run the spent eps the service reports is checked against the basic sum (never
above it with Laplace answers only) and, for the tight compositions, against an
independent composition of the answers' own exact PLDs (never below it). Writes
benchmarks/results/service_composition.csv.
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).parent))
from bench_service import PREDICATES, request_body
from dpbayes.service import EngineConfig
from dpbayes.service import db as service_db
from dpbayes.service.config import digest_key
from dpbayes.service.state import QueryService

KEY = digest_key("benchmark-admin-key-" + "b" * 20)
BUDGET = (1.0, 1e-6)
FIELDS = [
    "mix",
    "composition",
    "noise",
    "gaussian_answers",
    "requests",
    "fresh",
    "free",
    "refused",
    "spent_epsilon",
    "basic_sum_of_fresh_eps",
    "independent_pld_epsilon",
    "fresh_ratio_to_basic",
    "wall_s",
]


def bench_service_mix() -> Iterator[tuple[str, float, float]]:
    for c in range(20):
        for i in range(200):
            b = request_body(c, i)
            yield b["where"], b["half_width"], b["confidence"]


def ladder_mix(cells: int, rounds: int = 400) -> Iterator[tuple[str, float, float]]:
    for r in range(rounds):
        for where in PREDICATES[:cells]:
            yield where, 300.0 * 0.97**r, 0.9


def independent_pld(answers: list[tuple[float, float | None]]) -> float:
    """One cell's exact composition at the budget's delta of its answers' own PLDs
    (Laplace at eps, or Gaussian at sigma / Delta_2; each answer reads one predicate's
    cells, and the predicates are disjoint)."""
    from dp_accounting.pld import privacy_loss_distribution as pld

    total = None
    for e, ratio in answers:
        one = (
            pld.from_laplace_mechanism(1.0 / e, value_discretization_interval=2e-5)
            if ratio is None
            else pld.from_gaussian_mechanism(ratio, value_discretization_interval=2e-5)
        )
        total = one if total is None else total.compose(one)
    return 0.0 if total is None else float(total.get_epsilon_for_delta(BUDGET[1]))


def run(mix: str, composition: str, noise: str, tmp: Path, cells: int) -> dict[str, Any]:
    url = f"sqlite:///{tmp / f'{mix}-{composition}-{noise}.db'}"
    cfg = EngineConfig(epsilon=BUDGET[0], delta=BUDGET[1], composition=composition, noise=noise)
    svc = QueryService(cfg, url, digest_key=KEY, time_limit=None)
    counts = {"fresh": 0, "free": 0, "refused": 0}
    requests = 0
    stop_after = cells  # the ladder stops after a round of refusals
    refused_run = 0
    t0 = time.perf_counter()
    try:
        source = bench_service_mix() if mix == "bench_service" else ladder_mix(cells)
        for where, d, p in source:
            r = svc.ask("bench", svc.make_query(where, None), half_width=d, confidence=p)
            requests += 1
            status = r.answer.status
            key = "free" if status == "history" else status
            counts[key] += 1
            refused_run = refused_run + 1 if status == "refused" else 0
            if mix == "ladder" and refused_run >= stop_after:
                break
        spent = svc.budget()["spent"]["epsilon"]
    finally:
        svc.close()
    wall = time.perf_counter() - t0
    eng = service_db.make_engine(url, writer=False)
    with eng.connect() as con:
        a = service_db.answers.c
        rows = list(con.execute(sa.select(a.epsilon, a.query, a.gaussian_ratio)))
    eng.dispose()
    per_cell: dict[str, list[tuple[float, float | None]]] = {}
    for r in rows:
        per_cell.setdefault(r.query, []).append((float(r.epsilon), r.gaussian_ratio))
    basic = max((math.fsum(e for e, _ in v) for v in per_cell.values()), default=0.0)
    indep = math.nan
    if composition != "basic":
        # (its pessimistic grid moves each answer's loss up by at most one step, 2e-5)
        for v in per_cell.values():
            one = independent_pld(v)
            indep = one if math.isnan(indep) else max(indep, one)
            assert one <= spent + 2e-5 * len(v), (one, spent)
    assert spent <= BUDGET[0] * (1 + 1e-9), spent
    if noise == "laplace":
        assert spent <= basic * (1 + 1e-9), (spent, basic)
    return {
        "mix": mix,
        "composition": composition,
        "noise": noise,
        "gaussian_answers": sum(1 for r in rows if r.gaussian_ratio is not None),
        "requests": requests,
        **counts,
        "spent_epsilon": round(spent, 6),
        "basic_sum_of_fresh_eps": round(basic, 6),
        "independent_pld_epsilon": round(indep, 6),
        "wall_s": round(wall, 2),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mix", nargs="+", default=["bench_service", "ladder"])
    ap.add_argument(
        "--ladder-cells", type=int, default=8, help="predicates the ladder asks (1..40)"
    )
    ap.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "results/service_composition.csv"
    )
    a = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for mix in a.mix:
            base = None
            runs = (("basic", "laplace"), ("rdp", "laplace"), ("rdp", "auto"), ("pld", "gaussian"))
            for comp, noise in runs:
                row = run(mix, comp, noise, Path(tmp), a.ladder_cells)
                base = row["fresh"] if comp == "basic" else base
                row["fresh_ratio_to_basic"] = round(row["fresh"] / max(base or 1, 1), 3)
                rows.append(row)
                print(", ".join(f"{k}={row[k]}" for k in FIELDS), flush=True)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    new = not a.out.exists()
    with open(a.out, "a", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=FIELDS)
        if new:
            w.writeheader()
        w.writerows(rows)
    print(f"wrote {a.out} (load average {os.getloadavg()[0]:.2f})")


if __name__ == "__main__":
    main()
