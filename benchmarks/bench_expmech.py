"""Benchmark of the expmech release (issue 3): speed, memory, and the lattice's utility cost.

Run: ``python benchmarks/bench_expmech.py [--quick]``; writes
``benchmarks/results/bench_expmech.csv`` and ``benchmarks/results/bench_expmech_lattice.csv``.

* Beta-Bernoulli release at n = 10^6 and 10^7 (global and smooth sensitivity), on the
  secure path (OpenDP, two-stage noisy max) and the simulation path: wall time and peak
  traced memory; against a straightforward per-candidate implementation (Python loop,
  gammaln formula) in the same run (timed in full at n = 10^5, scaled linearly).
* OpenDP noisy max on 10^6 scores in one call vs the two-stage draw.
* Dirichlet m = 3, n = 1000 (501,501 candidates): vectorised vs per-candidate loop.
* Lattice utility cost: m = 3, n = 1000, eps in {1, 10, 100}: median Hellinger of the
  release for the
  exact candidate set and lattices of resolution L.
"""

from __future__ import annotations

import argparse
import csv
import math
import time
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np
from scipy import special

from dpbayes.models import BetaBernoulli, CountStatistics, DirichletCategorical
from dpbayes.models.divergence import hellinger_dirichlet
from dpbayes.privacy import Neighbours
from dpbayes.privacy.noise import SecureNoise, SimulatedNoise
from dpbayes.release.expmech.mechanism import (
    plan_expmech_coin,
    plan_expmech_dirichlet,
    select_candidate,
)

OUT = Path(__file__).resolve().parent / "results"


def measure(fn: Any) -> tuple[float, float, Any]:
    tracemalloc.start()
    t0 = time.perf_counter()
    value = fn()
    sec = time.perf_counter() - t0
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    return sec, peak, value


def naive_coin_release(
    a: float, b: float, n: int, k: int, eps: float, rng: np.random.Generator
) -> int:
    """The straightforward way: one candidate at a time, gammaln formula, Python loops."""

    def h(a1: float, b1: float, a2: float, b2: float) -> float:
        lb = special.betaln
        bc = math.exp(lb((a1 + a2) / 2, (b1 + b2) / 2) - 0.5 * (lb(a1, b1) + lb(a2, b2)))
        return math.sqrt(max(0.0, 1.0 - bc))

    sens = max(h(a + j, b + n - j, a + j + 1, b + n - j - 1) for j in range(n))
    scores = [-h(a + k, b + n - k, a + j, b + n - j) for j in range(n + 1)]
    return int(np.argmax(np.array(scores) * eps / (2 * sens) + rng.gumbel(size=n + 1)))


def naive_dirichlet_scores(alpha: np.ndarray, counts: np.ndarray, cands: np.ndarray) -> list[float]:
    post = alpha + counts
    out = []
    for c in cands:
        other = alpha + c
        mid = (post + other) / 2
        lb = [
            float(np.sum(special.gammaln(v)) - special.gammaln(np.sum(v)))
            for v in (mid, post, other)
        ]
        out.append(-math.sqrt(max(0.0, 1 - math.exp(lb[0] - 0.5 * (lb[1] + lb[2])))))
    return out


def bench_coin(rows: list[dict[str, Any]], ns: list[int]) -> None:
    model = BetaBernoulli(alpha=1.0, beta=1.0)
    for n in ns:
        k = int(0.3 * n)
        st = CountStatistics(counts=np.array([k, n - k]), n=n)
        # the per-candidate loop costs the same per candidate at any n: time it in full at
        # n = 10^5 and scale linearly (a full run at 10^6 takes minutes on a loaded machine)
        if not any(r["variant"] == "naive per-candidate (measured)" for r in rows):
            sec, mb, _ = measure(
                lambda: naive_coin_release(1.0, 1.0, 100_000, 30_000, 1.0, np.random.default_rng(0))
            )
            rows.append(row("coin", 100_000, "naive per-candidate (measured)", sec, mb, 1.0, ""))
        base_sec = rows[0]["seconds"] * n / 1e5
        base_mb, base_note = float("nan"), "scaled linearly from the measured n = 10^5 run"
        rows.append(row("coin", n, "naive per-candidate", base_sec, base_mb, 1.0, base_note))
        for kind, delta in (("global", 0.0), ("smooth", 1e-6)):
            for path, src in (
                ("secure", SecureNoise()),
                ("simulation", SimulatedNoise(np.random.default_rng(1))),
            ):

                def go(kind: str = kind, delta: float = delta, src: Any = src, st: Any = st) -> Any:
                    plan = plan_expmech_coin(
                        model,
                        st,
                        epsilon=1.0,
                        delta=delta,
                        neighbours=Neighbours.SUBSTITUTE,
                        sensitivity=kind,
                    )
                    return plan.run(src)

                sec, mb, rel = measure(go)
                rows.append(
                    row(
                        "coin",
                        n,
                        f"expmech {kind} {path}",
                        sec,
                        mb,
                        base_sec / sec,
                        f"released k = {rel.released['counts'][0]} (true {k})",
                    )
                )
                print(rows[-1], flush=True)


def bench_opendp(rows: list[dict[str, Any]]) -> None:
    scores = -np.linspace(0, 1, 1_000_001)
    src = SecureNoise()
    one_sec, one_mb, _ = measure(lambda: src.gumbel_argmax(scores, 0.01))
    rows.append(row("opendp noisy max", scores.size, "one call", one_sec, one_mb, 1.0, ""))
    sec, mb, _ = measure(lambda: select_candidate(src, scores, 0.01))
    rows.append(
        row("opendp noisy max", scores.size, "two-stage (block 4096)", sec, mb, one_sec / sec, "")
    )
    print(rows[-2:], flush=True)


def bench_dirichlet(rows: list[dict[str, Any]], n: int) -> None:
    model = DirichletCategorical(alpha=[1.0, 1.0, 1.0])
    counts = np.array([int(0.3 * n), int(0.3 * n), n - 2 * int(0.3 * n)])
    st = CountStatistics(counts=counts, n=n)
    from dpbayes.release.expmech.candidates import compositions

    cands = compositions(n, 3)
    sample = cands[::10]  # time every 10th candidate, scale by 10 (constant cost each)
    base_sec, base_mb, _ = measure(lambda: naive_dirichlet_scores(np.ones(3), counts, sample))
    base_sec *= cands.shape[0] / sample.shape[0]
    note = f"{cands.shape[0]} candidates; timed on every 10th, scaled"
    rows.append(row("dirichlet m=3", n, "naive per-candidate scores", base_sec, base_mb, 1.0, note))
    for kind, delta in (("global", 0.0), ("smooth", 1e-6)):

        def go(kind: str = kind, delta: float = delta) -> Any:
            plan = plan_expmech_dirichlet(
                model,
                st,
                epsilon=1.0,
                delta=delta,
                neighbours=Neighbours.SUBSTITUTE,
                sensitivity=kind,
            )
            return plan.run(SecureNoise())

        sec, mb, rel = measure(go)
        rows.append(
            row(
                "dirichlet m=3",
                n,
                f"expmech {kind} secure (whole release)",
                sec,
                mb,
                base_sec / sec,
                f"released {rel.released['counts']} (true {counts.tolist()})",
            )
        )
        print(rows[-1], flush=True)


def bench_lattice(n: int, runs: int) -> list[dict[str, Any]]:
    model = DirichletCategorical(alpha=[1.0, 1.0, 1.0])
    counts = np.array([287, 331, 382]) * n // 1000  # off every lattice used below
    counts[2] = n - counts[:2].sum()
    st = CountStatistics(counts=counts, n=n)
    true = np.ones(3) + counts
    out = []
    for eps in (1.0, 10.0, 100.0):
        for lattice in (None, 200, 100, 50, 20, 10):
            plan = plan_expmech_dirichlet(
                model, st, epsilon=eps, delta=0.0, neighbours=Neighbours.SUBSTITUTE, lattice=lattice
            )
            src = SimulatedNoise(np.random.default_rng(0))
            h = np.array(
                [
                    float(
                        hellinger_dirichlet(
                            true, np.ones(3) + np.array(plan.run(src).released["counts"])
                        )
                    )
                    for _ in range(runs)
                ]
            )
            out.append(
                {
                    "n": n,
                    "epsilon": eps,
                    "lattice": lattice or "exact",
                    "candidates": plan.guarantee.details["n_candidates"],
                    "runs": runs,
                    "median_hellinger": float(np.median(h)),
                    "mean_hellinger": float(np.mean(h)),
                }
            )
            print(out[-1], flush=True)
    return out


def row(
    bench: str, n: int, variant: str, sec: float, mb: float, speedup: float, note: str
) -> dict[str, Any]:
    return {
        "benchmark": bench,
        "n": n,
        "variant": variant,
        "seconds": round(sec, 4),
        "peak_mb": round(mb, 1),
        "speedup_vs_baseline": round(speedup, 2),
        "note": note,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="n = 10^5 only, small lattice study")
    args = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    SecureNoise().gumbel_argmax(np.zeros(3), 1.0)  # load OpenDP before timing anything
    bench_coin(rows, [100_000] if args.quick else [1_000_000, 10_000_000])
    bench_opendp(rows)
    bench_dirichlet(rows, 200 if args.quick else 1000)
    with (OUT / "bench_expmech.csv").open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    lat = bench_lattice(1000, 50 if args.quick else 200)
    with (OUT / "bench_expmech_lattice.csv").open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(lat[0]))
        w.writeheader()
        w.writerows(lat)


if __name__ == "__main__":
    main()
