"""Data at scale: sufficient statistics and a private release over 10**8 Parquet rows.

Generates (once) a Parquet file of ``--rows`` rows under /tmp with DuckDB's COPY, then
runs each method in its own subprocess, sampling the resident memory of the whole
process tree (Python, DuckDB threads, Spark's JVM) every 0.2 s:

* ``duckdb``: ``as_source(path, column=...)`` statistics + one Laplace release (DuckDB
  streams the file; nothing is loaded into Python);
* ``duckdb_person_k3``: person-level: every person bounded to 3 rows (window function in
  DuckDB), materialised once into a temporary table (``Table.materialize()``), then the
  same statistics and a user-level release (sensitivity x 3);
* ``spark`` / ``spark_person_k3``: the same through a Spark DataFrame (local mode, all
  cores; the bounded table cached once);
* ``pandas``: ``pd.read_parquet`` of the columns, the statistics with numpy, and the same
  release from the frame -- the baseline; it also counts the rows a 3-per-person bound
  keeps (sum of min(rows, 3)), which the person-level runs must reproduce. Stopped
  (killed) if its memory passes ``--pandas-limit-gb``, which is reported, not hidden.

``--spark-rows`` runs the Spark methods (and, for comparison, ``duckdb_person_k3`` and
``pandas``) on a smaller file when Spark is too slow for ``--rows`` on the machine.
``equal_to_pandas``: the row-level statistics (n, count of smokers, exact clamped sums)
equal pandas' bit for bit; for person-level runs, n equals pandas' bounded row count and
every statistic equals the other engine's person-level run of the same size.

The data are a deterministic function of the row number (hashes, no random generator):
``person`` (3.3 rows each on average), ``smoker`` (0/1, about 23 %), ``visits`` (double in
[0, 30)), ``health`` (0..3). Results go to benchmarks/results/scale.csv.

Usage: python benchmarks/bench_scale.py [--rows 100000000] [--spark-rows 10000000]
       [--methods duckdb,duckdb_person_k3,pandas,spark,spark_person_k3]
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
METHODS = ("duckdb", "duckdb_person_k3", "pandas", "spark", "spark_person_k3")
SPARK_METHODS = ("spark", "spark_person_k3")
STATS = ("n", "successes", "sum_visits", "sum_sq_visits")
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


def _spark_session():  # type: ignore[no-untyped-def]
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[*]")
        .appName("dpbayes-bench-scale")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", "6g")
        .config("spark.sql.shuffle.partitions", "8")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _bounded(data: object) -> tuple[object, float]:
    """The table with <= 3 rows per person, materialised once; seconds taken."""
    from dpbayes.data import Table

    t0 = time.perf_counter()
    table = Table(data, user_column="person", max_rows_per_user=3).materialize()
    return table, time.perf_counter() - t0


def child(method: str, path: str) -> dict:
    t0 = time.perf_counter()
    if method == "duckdb":
        out = _release_and_stats(path, method)
    elif method == "duckdb_person_k3":
        table, t_bound = _bounded(path)
        out = _release_and_stats(table, method)
        out["seconds_bound"] = t_bound
    elif method in SPARK_METHODS:
        spark = _spark_session()
        t_start = time.perf_counter() - t0
        frame = spark.read.parquet(path)
        if method == "spark_person_k3":
            table, t_bound = _bounded(frame)
            out = _release_and_stats(table, method)
            out["seconds_bound"] = t_bound
        else:
            out = _release_and_stats(frame, method)
        out["seconds_startup"] = t_start
        spark.stop()
    elif method == "pandas":
        import numpy as np
        import pandas as pd

        from dpbayes.data.exact import exact_sum

        df = pd.read_parquet(path, columns=["person", "smoker", "visits"])
        t_load = time.perf_counter() - t0
        t1 = time.perf_counter()
        clipped = np.clip(df["visits"].to_numpy(), LOWER, UPPER)
        stats = {
            "n": len(df),
            "successes": int(df["smoker"].sum()),
            "sum_visits": exact_sum(clipped),
            "sum_sq_visits": exact_sum(clipped * clipped),
            "n_person_k3": int(np.minimum(df["person"].value_counts().to_numpy(), 3).sum()),
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


def _compare(rows: list[dict]) -> None:
    """Fill ``equal_to_pandas`` (see the module docstring) for every finished run."""
    done = [r for r in rows if r["status"] == "ok"]
    for r in done:
        base = [p for p in done if p["method"] == "pandas" and p["rows"] == r["rows"]]
        if r["method"] == "pandas" or not base:
            r["equal_to_pandas"] = "" if r["method"] == "pandas" else "no pandas run"
            continue
        if r["method"].endswith("_person_k3"):
            same_n = r["n"] == base[0]["n_person_k3"]
            twins = [
                o
                for o in done
                if o is not r and o["method"].endswith("_person_k3") and o["rows"] == r["rows"]
            ]
            same = all(all(r[k] == o[k] for k in STATS) for o in twins)
            note = f" and all statistics equal {twins[0]['method']}" if twins else ""
            r["equal_to_pandas"] = (
                f"n {'==' if same_n else '!='} pandas' sum(min(rows, 3)){note}"
                if same or not twins
                else "DIFFERS from the other engine's person-level run"
            )
        else:
            ok = all(r[k] == base[0][k] for k in STATS)
            r["equal_to_pandas"] = "yes (bit for bit)" if ok else "NO"


def _ensure(path: Path, rows: int) -> None:
    if not path.is_file():
        gen = generate(path, rows)
        print(f"generated {path} ({path.stat().st_size / 2**20:.0f} MiB) in {gen:.1f} s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=100_000_000)
    ap.add_argument("--spark-rows", type=int, default=None, help="run Spark at this size")
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
    methods = args.methods.split(",")
    plan: list[tuple[str, int]] = []
    for m in methods:
        if m in SPARK_METHODS and args.spark_rows:
            plan.append((m, args.spark_rows))
        else:
            plan.append((m, args.rows))
    if args.spark_rows and any(m in SPARK_METHODS for m in methods):
        # the same size through DuckDB and pandas, to compare against
        for m in ("duckdb_person_k3", "pandas"):
            if m in methods and (m, args.spark_rows) not in plan:
                plan.append((m, args.spark_rows))
    rows = []
    for method, n_rows in plan:
        path = Path(args.path or f"/tmp/dpbayes_scale/rows_{n_rows}.parquet")
        _ensure(path, n_rows)
        limit = args.pandas_limit_gb * 2**30 if method == "pandas" else float("inf")
        row = run_method(method, path, limit, args.timeout)
        row["rows"] = n_rows
        row["file_mb"] = round(path.stat().st_size / 2**20)
        rows.append(row)
        print(json.dumps(row), flush=True)
    _compare(rows)
    fields = [
        "method", "rows", "status", "equal_to_pandas", "wall_seconds", "seconds_total",
        "seconds_startup", "seconds_load", "seconds_bound", "seconds_stats", "seconds_release",
        "peak_rss_mb", "child_maxrss_mb", "n", "n_person_k3", "successes", "sum_visits",
        "sum_sq_visits", "file_mb", "guarantee",
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
