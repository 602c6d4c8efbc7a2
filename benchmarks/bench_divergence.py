"""Speed and accuracy of the vectorised Hellinger distances against the plain betaln formula.

    python benchmarks/bench_divergence.py [--quick] [--out benchmarks/results/divergence.csv]

For n in (10^4, 10^6) the exponential mechanism's candidate set for a coin, Beta(1 + j,
1 + n - j) for j = 0..n, is scored against the posterior at k = 0.3 n with
``dpbayes.models.hellinger_beta`` (cancellation-free lgamma pieces) and with the plain
log-space formula ``sqrt(-expm1(betaln(...) - (betaln + betaln)/2))``, timed alternately
in one process (median of repeats). Accuracy is checked on the neighbour j = k + 1, whose
reference value to first order is H^2 = (n + 2) / (8 (k + 1) (n - k + 1)) (Fisher
information of the Beta; its own relative error is O(1/n), the floor "ours" sits at).
Writes ``n,ours_ms,naive_ms,ratio,ours_rel_err,naive_rel_err``.
Timings depend on the machine's load; compare ratios, not absolute numbers.
"""

from __future__ import annotations

import argparse
import csv
import statistics
import time
from pathlib import Path

import numpy as np
from scipy import special

from dpbayes.models import hellinger_beta


def naive_hellinger_beta(a1, b1, a2, b2):  # type: ignore[no-untyped-def]
    log_bc = special.betaln((a1 + a2) / 2, (b1 + b2) / 2) - 0.5 * (
        special.betaln(a1, b1) + special.betaln(a2, b2)
    )
    return np.sqrt(np.clip(-np.expm1(log_bc), 0.0, 1.0))


def run(sizes: tuple[int, ...], repeats: int) -> list[dict[str, float]]:
    rows = []
    for n in sizes:
        j = np.arange(n + 1, dtype=float)
        k = float(int(0.3 * n))
        args = (1 + k, 1 + n - k, 1 + j, 1 + n - j)
        ours_t, naive_t = [], []
        for _ in range(repeats):
            t0 = time.perf_counter()
            ours = hellinger_beta(*args)
            ours_t.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            naive = naive_hellinger_beta(*args)
            naive_t.append(time.perf_counter() - t0)
        # first-order reference for the neighbour: its own relative error is O(1/n)
        a, b = 1 + k, 1 + n - k
        ref = np.sqrt((a + b) / (8 * a * b))
        i = int(k) + 1
        rows.append(
            {
                "n": n,
                "ours_ms": 1e3 * statistics.median(ours_t),
                "naive_ms": 1e3 * statistics.median(naive_t),
                "ratio": statistics.median(ours_t) / statistics.median(naive_t),
                "ours_rel_err": abs(ours[i] - ref) / ref,
                "naive_rel_err": abs(naive[i] - ref) / ref,
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one size, 3 repeats")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/divergence.csv"))
    args = parser.parse_args()
    sizes = (10_000,) if args.quick else (10_000, 1_000_000)
    rows = run(sizes, 3 if args.quick else 7)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    for row in rows:
        print(", ".join(f"{k}={v:.3g}" for k, v in row.items()))


if __name__ == "__main__":
    main()
