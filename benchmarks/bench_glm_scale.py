"""A regression's sufficient statistics over 10^7 Parquet rows: time and peak memory.

    python benchmarks/bench_glm_scale.py [--rows 10000000] [--features 5]

Writes a Parquet file of random rows (DuckDB ``COPY``) to a temporary folder, then, each in
its own process, measures the peak resident memory (``ru_maxrss``) and wall time of
(a) ``BayesianLinearRegression.statistics(path)`` (one aggregate query in DuckDB) and
(b) the floor: ``import dpbayes`` and opening the same file without reading it. Appends
rows to ``benchmarks/results/bench_glm_scale.csv``.
"""

from __future__ import annotations

import argparse
import csv
import subprocess
import sys
import tempfile
import time
from pathlib import Path

OUT = Path(__file__).resolve().parent / "results" / "bench_glm_scale.csv"

CHILD = """
import resource, sys, time
t = time.perf_counter()
import dpbayes as dpb
from dpbayes.data import Table
path, d, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
cols = [f"x{i}" for i in range(d)]
if mode == "statistics":
    m = dpb.models.BayesianLinearRegression(feature_bound=1.0, label_bound=1.0, clip="box",
                                            features=cols, target="y")
    s = m.statistics(path)
    assert s.n > 0
else:
    Table(path).columns
print(time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--features", type=int, default=5)
    args = ap.parse_args()
    import duckdb

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "rows.parquet"
        xs = ", ".join(f"random() * 2 - 1 AS x{i}" for i in range(args.features))
        t0 = time.perf_counter()
        duckdb.sql(
            f"COPY (SELECT {xs}, random() * 2 - 1 AS y FROM range({args.rows})) "
            f"TO '{path}' (FORMAT PARQUET)"
        )
        print(f"wrote {args.rows} rows in {time.perf_counter() - t0:.1f} s")
        rows = []
        for mode in ("floor", "statistics"):
            out = subprocess.run(
                [sys.executable, "-c", CHILD, str(path), str(args.features), mode],
                capture_output=True,
                text=True,
                check=True,
            ).stdout.split()
            rows.append(
                {
                    "rows": args.rows,
                    "features": args.features,
                    "mode": mode,
                    "seconds": round(float(out[0]), 2),
                    "peak_mb": round(float(out[1])),
                }
            )
            print(rows[-1])
    OUT.parent.mkdir(parents=True, exist_ok=True)
    new = not OUT.exists()
    with OUT.open("a", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        if new:
            w.writeheader()
        w.writerows(rows)


if __name__ == "__main__":
    main()
