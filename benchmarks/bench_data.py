"""Cost of a clamped sum through the data layer, against numpy on the same values.

    python benchmarks/bench_data.py [--quick] [--out benchmarks/results/data.csv]

For each row count a CSV (one float column, 1% NULLs) is written to a temporary folder
and these are timed, alternately and repeated (medians):

- ``numpy_naive``: ``np.sum(np.clip(x, lo, hi))`` on an in-memory array (not exact);
- ``numpy_exact``: ``as_source(x).clamped_sum(lo, hi)`` (correctly rounded);
- ``duckdb_frame``: ``as_source(frame, "x").clamped_sum(lo, hi)`` (DuckDB over pandas);
- ``duckdb_csv``: ``as_source(path, "x").clamped_sum(lo, hi)`` (open + one streamed scan);
- ``pandas_csv``: ``pd.read_csv(path)`` then the exact numpy sum (loads the file).

Writes ``rows,method,seconds,ratio_to_numpy_exact``. Timings depend on the machine's
load; compare ratios, not absolute numbers.
"""

from __future__ import annotations

import argparse
import csv
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd

from dpbayes.data import as_source
from dpbayes.privacy.noise import noise_source

LO, HI = -2.0, 5.0


def _median_seconds(fns: dict[str, Callable[[], object]], repeats: int) -> dict[str, float]:
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(repeats):
        for key, fn in fns.items():
            start = time.perf_counter()
            fn()
            times[key].append(time.perf_counter() - start)
    return {k: statistics.median(v) for k, v in times.items()}


def run(rows_list: list[int], repeats: int, out: Path) -> list[dict[str, object]]:
    gen = noise_source(7).generator()
    records: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for rows in rows_list:
            x = gen.standard_normal(rows) * 3.0 + 1.0
            x[gen.random(rows) < 0.01] = np.nan
            frame = pd.DataFrame({"x": x})
            path = Path(tmp) / f"x{rows}.csv"
            con = duckdb.connect()
            con.register("frame", frame)
            con.execute(f"COPY frame TO '{path}' (HEADER)")
            con.close()
            results = {
                "numpy_naive": lambda x=x: float(np.nansum(np.clip(x, LO, HI))),
                "numpy_exact": lambda x=x: as_source(x).clamped_sum(LO, HI),
                "duckdb_frame": lambda f=frame: as_source(f, "x").clamped_sum(LO, HI),
                "duckdb_csv": lambda p=path: as_source(p, "x").clamped_sum(LO, HI),
                "pandas_csv": lambda p=path: as_source(pd.read_csv(p)["x"].to_numpy()).clamped_sum(
                    LO, HI
                ),
            }
            exact = {k: results[k]() for k in ("numpy_exact", "duckdb_frame", "duckdb_csv")}
            if len(set(exact.values())) != 1:
                raise AssertionError(f"sums differ: {exact}")
            secs = _median_seconds(results, repeats)
            for key, s in secs.items():
                records.append(
                    {
                        "rows": rows,
                        "method": key,
                        "seconds": f"{s:.4f}",
                        "ratio_to_numpy_exact": f"{s / secs['numpy_exact']:.2f}",
                    }
                )
                print(rows, key, f"{s:.4f}s", f"x{s / secs['numpy_exact']:.2f}")
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(records[0]))
        writer.writeheader()
        writer.writerows(records)
    return records


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, 3 repeats")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/data.csv"))
    args = parser.parse_args()
    sizes = [10_000, 200_000] if args.quick else [10_000, 1_000_000, 3_000_000]
    run(sizes, 3 if args.quick else 5, args.out)


if __name__ == "__main__":
    main()
