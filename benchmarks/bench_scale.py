"""Data at scale: sufficient statistics and a private release over 10**8 Parquet rows.

Generates (once) a Parquet file of ``--rows`` rows under /tmp with DuckDB's COPY, then
runs each method in its own subprocess, sampling the resident memory of the whole
process tree (Python, DuckDB threads, Spark's JVM) every 0.2 s:

* ``duckdb``: ``as_source(path, column=...)`` statistics + one Laplace release (DuckDB
  streams the file; nothing is loaded into Python);
* ``duckdb_person_k3``: the same after bounding every person to 3 rows (window function
  in DuckDB) -- a person-level release;
* ``spark``: the same through a Spark DataFrame (local mode, all cores);
* ``pandas``: ``pd.read_parquet`` of the columns, the statistics with numpy, and the same
  release from the frame -- the baseline; stopped (killed) if its memory passes
  ``--pandas-limit-gb``, which is reported, not hidden.

The data are a deterministic function of the row number (hashes, no random generator):
``person`` (3.3 rows each on average), ``smoker`` (0/1, about 23 %), ``visits`` (double in
[0, 30)), ``health`` (0..3). Results go to benchmarks/results/scale.csv.

Usage: python benchmarks/bench_scale.py [--rows 100000000] [--methods duckdb,spark,pandas]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results" / "scale.csv"
METHODS = ("duckdb", "duckdb_person_k3", "spark", "pandas")
LOWER, UPPER = 0.0, 30.0


def generate(path: Path, rows: int) -> float:
    """Write the Parquet file with DuckDB (deterministic pseudo-data); seconds taken."""
    import duckdb

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp.parquet")
    t0 = time.perf_counter()
    con = duckdb.connect()
    con.execute(
        f"""COPY (
          SELECT CAST(i * 10 // 33 AS BIGINT) AS person,
                 CAST(hash(i, 1) % 100 < 23 AS TINYINT) AS smoker,
                 CAST(hash(i, 2) % 3000000 AS DOUBLE) / 100000.0 AS visits,
                 CAST(hash(i, 3) % 4 AS TINYINT) AS health
          FROM range({rows}) AS t(i)
        ) TO '{tmp}' (FORMAT parquet, ROW_GROUP_SIZE 1000000)"""
    )
    con.close()
    tmp.replace(path)
    return time.perf_counter() - t0


# ----------------------------------------------------------------------- child side
def _release_and_stats(data: object, label: str) -> dict:
    """Statistics and one private release through dpbayes, timed."""
    import dpbayes as dpb
    from dpbayes.data import as_source

    t0 = time.perf_counter()
    smoker = as_source(data, column="smoker")
    visits = as_source(data, column="visits")
    n = smoker.n()
    counts = smoker.value_counts()
    total = visits.clamped_sum(LOWER, UPPER)
    sq = visits.clamped_sum_of_squares(LOWER, UPPER)
    t1 = time.perf_counter()
    model = dpb.models.BetaBernoulli(alpha=1, beta=1)
    rel = dpb.release(model, smoker, mechanism="laplace", epsilon=1.0)  # secure noise
    t2 = time.perf_counter()
    return {
        "n": n,
        "successes": counts.get(1, 0),
        "sum_visits": total,
        "sum_sq_visits": sq,
        "seconds_stats": t1 - t0,
        "seconds_release": t2 - t1,
        "guarantee": rel.guarantee.describe(),
    }


def child(method: str, path: str) -> dict:
    t0 = time.perf_counter()
    if method == "duckdb":
        out = _release_and_stats(path, method)
    elif method == "duckdb_person_k3":
        from dpbayes.data import Table

        out = _release_and_stats(Table(path, user_column="person", max_rows_per_user=3), method)
    elif method == "spark":
        from pyspark.sql import SparkSession

        spark = (
            SparkSession.builder.master("local[*]")
            .appName("dpbayes-bench-scale")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.driver.memory", "4g")
            .config("spark.sql.shuffle.partitions", "4")
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("ERROR")
        t_start = time.perf_counter() - t0
        out = _release_and_stats(spark.read.parquet(path), method)
        out["seconds_startup"] = t_start
        spark.stop()
    elif method == "pandas":
        import numpy as np
        import pandas as pd

        from dpbayes.data.exact import exact_sum

        df = pd.read_parquet(path, columns=["smoker", "visits"])
        t_load = time.perf_counter() - t0
        t1 = time.perf_counter()
        clipped = np.clip(df["visits"].to_numpy(), LOWER, UPPER)
        stats = {
            "n": len(df),
            "successes": int(df["smoker"].sum()),
            "sum_visits": exact_sum(clipped),
            "sum_sq_visits": exact_sum(clipped * clipped),
        }
        t2 = time.perf_counter()
        import dpbayes as dpb

        rel = dpb.release(
            dpb.models.BetaBernoulli(alpha=1, beta=1),
            df["smoker"].to_numpy(),
            mechanism="laplace",
            epsilon=1.0,
        )
        t3 = time.perf_counter()
        out = {
            **stats,
            "seconds_load": t_load,
            "seconds_stats": t2 - t1,
            "seconds_release": t3 - t2,
            "guarantee": rel.guarantee.describe(),
        }
    else:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    out["seconds_total"] = time.perf_counter() - t0
    out["child_maxrss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


# ---------------------------------------------------------------------- parent side
def _tree_rss_bytes(root: int) -> int:
    """Resident memory of ``root`` and all its descendants (from /proc)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
            parents[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
    tree, frontier = {root}, [root]
    while frontier:
        p = frontier.pop()
        for pid, ppid in parents.items():
            if ppid == p and pid not in tree:
                tree.add(pid)
                frontier.append(pid)
    total = 0
    for pid in tree:
        try:
            with open(f"/proc/{pid}/statm") as f:
                total += int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, IndexError, ValueError):
            continue
    return total


def run_method(method: str, path: Path, limit_bytes: float, timeout: float) -> dict:
    cmd = [sys.executable, __file__, "--child", method, "--path", str(path)]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak, status = 0, "ok"
    while proc.poll() is None:
        peak = max(peak, _tree_rss_bytes(proc.pid))
        if peak > limit_bytes:
            status = f"stopped: memory passed {limit_bytes / 2**30:.0f} GiB"
        elif time.perf_counter() - t0 > timeout:
            status = f"stopped: took more than {timeout:.0f} s"
        if status != "ok":
            for pid in sorted(_descendants(proc.pid), reverse=True):
                try:
                    os.kill(pid, 9)
                except OSError:
                    pass
            proc.kill()
            break
        time.sleep(0.2)
    stdout, stderr = proc.communicate()
    wall = time.perf_counter() - t0
    row: dict = {"method": method, "status": status, "wall_seconds": round(wall, 2)}
    row["peak_rss_mb"] = round(peak / 2**20)
    if status == "ok":
        if proc.returncode < 0:
            row["status"] = f"stopped: killed by signal {-proc.returncode} (not finished)"
        elif proc.returncode != 0:
            row["status"] = "error: " + (stderr.strip().splitlines() or ["?"])[-1][:200]
        else:
            row.update(json.loads(stdout.strip().splitlines()[-1]))
    return row


def _descendants(root: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            if ppid == root:
                out.append(int(entry))
                out.extend(_descendants(int(entry)))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=100_000_000)
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--path", default=None, help="Parquet file (default: /tmp/dpbayes_scale)")
    ap.add_argument("--pandas-limit-gb", type=float, default=12.0)
    ap.add_argument("--timeout", type=float, default=1800.0)
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--out", default=str(RESULTS))
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.path)))
        return
    path = Path(args.path or f"/tmp/dpbayes_scale/rows_{args.rows}.parquet")
    gen = 0.0
    if not path.is_file():
        gen = generate(path, args.rows)
        print(f"generated {path} ({path.stat().st_size / 2**20:.0f} MiB) in {gen:.1f} s")
    rows = []
    for method in args.methods.split(","):
        limit = args.pandas_limit_gb * 2**30 if method == "pandas" else float("inf")
        row = run_method(method, path, limit, args.timeout)
        row["rows"] = args.rows
        row["file_mb"] = round(path.stat().st_size / 2**20)
        rows.append(row)
        print(json.dumps(row))
    fields = [
        "method", "rows", "status", "wall_seconds", "seconds_total", "seconds_startup",
        "seconds_load", "seconds_stats", "seconds_release", "peak_rss_mb", "child_maxrss_mb",
        "n", "successes", "sum_visits", "sum_sq_visits", "file_mb", "guarantee",
    ]  # fmt: skip
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({k: (round(v, 3) if isinstance(v, float) and k.startswith("sec") else v)
                        for k, v in r.items()})  # fmt: skip
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
