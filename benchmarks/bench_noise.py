"""Cost per sample of the secure samplers (OpenDP) against numpy's, side by side in one run.

    python benchmarks/bench_noise.py [--quick] [--out benchmarks/results/noise.csv]

For each sampler and vector size (1, 10^3, 10^5) the secure draw (``SecureNoise``, what
``rng=None`` uses) and numpy's own sampler on a seeded Generator are timed alternately,
repeated, and the medians compared. For the exponential mechanism ``size`` is the number
of candidates and the cost is per selection (one draw). Writes
``sampler,size,secure_ns_per_sample,numpy_ns_per_sample,ratio`` (ratio = secure / numpy).
Timings depend on the machine's load; compare ratios, not absolute numbers.
"""

from __future__ import annotations

import argparse
import csv
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from dpbayes.privacy import SecureNoise, noise_source

SIZES = (1, 1_000, 100_000)
EM_CANDIDATES = (100, 100_000)
SCALE = 1.0
RR_K = 4
RR_KEEP = float(np.e / (np.e + RR_K - 1))


def _time_ns(fn: Callable[[], object]) -> int:
    start = time.perf_counter_ns()
    fn()
    return time.perf_counter_ns() - start


def measure(
    secure: Callable[[], object],
    baseline: Callable[[], object],
    *,
    per_call: int,
    budget_s: float,
    max_repeats: int,
    warm_up: bool,
) -> tuple[float, float, int]:
    """Median ns per sample of both, timed alternately (same load); >= 1 repeat each."""
    if warm_up:  # OpenDP builds and caches the measurement on first use
        secure()
        baseline()
    s_times: list[int] = []
    b_times: list[int] = []
    deadline = time.perf_counter() + budget_s
    while len(s_times) < max_repeats and (not s_times or time.perf_counter() < deadline):
        s_times.append(_time_ns(secure))
        # numpy calls are fast: time several back to back for a stable median
        b_times.extend(_time_ns(baseline) for _ in range(5))
    return (
        statistics.median(s_times) / per_call,
        statistics.median(b_times) / per_call,
        len(s_times),
    )


def run(out: Path, *, quick: bool = False) -> list[dict[str, object]]:
    secure = SecureNoise()
    gen = noise_source(20261121).generator()  # numpy's samplers, seeded
    sizes = SIZES[:2] if quick else SIZES
    candidates = EM_CANDIDATES[:1] if quick else EM_CANDIDATES
    budget = 0.5 if quick else 3.0
    rows: list[dict[str, object]] = []
    p_geo = float(-np.expm1(-1.0 / SCALE))  # numpy's discrete Laplace: geometric difference

    def record(sampler: str, size: int, s_fn, b_fn, per_call: int) -> None:
        # Sizes ascend, so a large size's sampler is already warm from the smaller ones.
        s_ns, b_ns, reps = measure(
            s_fn,
            b_fn,
            per_call=per_call,
            budget_s=budget,
            max_repeats=7 if size > 1 else 200,
            warm_up=size <= 1_000,
        )
        rows.append(
            {
                "sampler": sampler,
                "size": size,
                "secure_ns_per_sample": round(s_ns, 1),
                "numpy_ns_per_sample": round(b_ns, 1),
                "ratio": round(s_ns / b_ns, 1),
            }
        )
        print(
            f"{sampler:24s} {size:>7d}  secure {s_ns:12.0f} ns  numpy {b_ns:9.1f} ns  "
            f"ratio {s_ns / b_ns:9.1f}  ({reps} secure repeats)",
            flush=True,
        )

    for n in sizes:
        x = np.zeros(n)
        xi = np.zeros(n, dtype=np.int64)
        cats = np.arange(n, dtype=np.int64) % RR_K
        record(
            "laplace",
            n,
            lambda x=x: secure.laplace(x, SCALE),
            lambda x=x, n=n: x + gen.laplace(0.0, SCALE, n),
            n,
        )
        record(
            "gaussian",
            n,
            lambda x=x: secure.gaussian(x, SCALE),
            lambda x=x, n=n: x + gen.normal(0.0, SCALE, n),
            n,
        )
        record(
            "discrete_laplace",
            n,
            lambda xi=xi: secure.discrete_laplace(xi, SCALE),
            lambda xi=xi, n=n: xi + gen.geometric(p_geo, n) - gen.geometric(p_geo, n),
            n,
        )

        def numpy_rr(cats=cats, n=n):
            flip = gen.random(n) >= RR_KEEP
            return np.where(flip, (cats + gen.integers(1, RR_K, n)) % RR_K, cats)

        record(
            "randomized_response",
            n,
            lambda cats=cats: secure.randomized_response(cats, RR_K, RR_KEEP),
            numpy_rr,
            n,
        )
    for m in candidates:
        scores = np.linspace(0.0, 10.0, m)
        record(
            "exponential_mechanism",
            m,
            lambda s=scores: secure.gumbel_argmax(s, SCALE),
            lambda s=scores, m=m: int(np.argmax(s / SCALE + gen.gumbel(size=m))),
            1,
        )

    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="sizes up to 10^3 only")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "noise.csv")
    args = parser.parse_args()
    run(args.out, quick=args.quick)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
