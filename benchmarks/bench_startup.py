"""Start-up cost of the ``dpbayes`` command and of ``import dpbayes``, against numpy's.

    python benchmarks/bench_startup.py [--runs 15] [--out benchmarks/results/bench_startup.csv]

Each command runs as a fresh subprocess of this interpreter, the commands alternating
within every round (the order rotates from round to round, so drifts in the machine's
load fall on all of them alike); one warm-up round is discarded. Reported per command:
the median wall time, its spread (min, quartiles, max) and the median's ratio to its
baseline:

- ``dpbayes --help`` (and ``dpbayes release --help``) against ``python -c "import numpy"``;
- ``python -c "import dpbayes"`` against ``python -c "import numpy, scipy.stats"``.

Goals (issue 18): ``dpbayes --help`` <= 1.3x numpy; ``import dpbayes`` <= 1.2x numpy +
scipy.stats. Timings depend on the machine's load (printed with the results); compare
ratios, not seconds.
"""

from __future__ import annotations

import argparse
import csv
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

OUT = Path(__file__).resolve().parent / "results" / "bench_startup.csv"


def dpbayes_command() -> list[str]:
    """The installed ``dpbayes`` script beside this interpreter, else ``python -m dpbayes.cli``."""
    beside = Path(sys.executable).with_name("dpbayes")
    script = str(beside) if beside.is_file() else shutil.which("dpbayes")
    return [script] if script else [sys.executable, "-m", "dpbayes.cli"]


def commands() -> dict[str, tuple[list[str], str | None]]:
    """name -> (argv, baseline name or None for a baseline)."""
    py = sys.executable
    cli = dpbayes_command()
    return {
        "python -c 'import numpy'": ([py, "-c", "import numpy"], None),
        "python -c 'import numpy, scipy.stats'": ([py, "-c", "import numpy, scipy.stats"], None),
        "dpbayes --help": ([*cli, "--help"], "python -c 'import numpy'"),
        "dpbayes release --help": ([*cli, "release", "--help"], "python -c 'import numpy'"),
        "python -c 'import dpbayes'": (
            [py, "-c", "import dpbayes"],
            "python -c 'import numpy, scipy.stats'",
        ),
    }


def run_once(argv: list[str]) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, check=False)
    sec = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{argv} failed: {proc.stderr.decode()[-500:]}")
    return sec


def load_average() -> str:
    try:
        return " ".join(f"{v:.2f}" for v in os.getloadavg())
    except OSError:  # pragma: no cover - not on every platform
        return "n/a"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=15, help="measured rounds (default 15)")
    ap.add_argument("--out", type=Path, default=OUT, help="CSV file to write")
    args = ap.parse_args()
    cmds = commands()
    names = list(cmds)
    times: dict[str, list[float]] = {k: [] for k in names}
    load_before = load_average()
    for r in range(args.runs + 1):
        shift = r % len(names)
        for name in names[shift:] + names[:shift]:
            sec = run_once(cmds[name][0])
            if r:  # round 0 warms the file cache
                times[name].append(sec)
    load_after = load_average()
    medians = {k: statistics.median(v) for k, v in times.items()}
    rows = []
    for name in names:
        v = sorted(times[name])
        q1, _, q3 = statistics.quantiles(v, n=4)
        base = cmds[name][1]
        rows.append(
            {
                "command": name,
                "runs": len(v),
                "median_s": round(medians[name], 4),
                "min_s": round(v[0], 4),
                "q1_s": round(q1, 4),
                "q3_s": round(q3, 4),
                "max_s": round(v[-1], 4),
                "baseline": base or "",
                "ratio_to_baseline": round(medians[name] / medians[base], 3) if base else "",
                "load_before": load_before,
                "load_after": load_after,
            }
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    print(f"load average (1, 5, 15 min): before {load_before}; after {load_after}")
    for row in rows:
        ratio = f"  {row['ratio_to_baseline']}x {row['baseline']}" if row["baseline"] else ""
        print(
            f"{row['command']:42s} median {row['median_s']:.3f} s "
            f"[{row['min_s']:.3f} .. {row['max_s']:.3f}]{ratio}"
        )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
