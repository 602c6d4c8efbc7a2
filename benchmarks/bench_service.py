"""Load and fault test of the query service on loopback (bounded): N clients x M queries.

    python benchmarks/bench_service.py --clients 50 --queries 200            # SQLite file
    python benchmarks/bench_service.py --db postgresql://dpbayes:dpbayes@127.0.0.1:5432/dpbayes_test
    python benchmarks/bench_service.py --fault --clients 20 --kill-after 5   # SIGKILL + restart

Starts ``dpbayes serve`` on a fresh database: a temporary SQLite file, or, for a
PostgreSQL URL, a throwaway schema ``bench_<hex>`` in that database (dropped afterwards,
as the test suite does), and runs the clients (one thread and HTTP connection each).
Queries: the 40 predicates ``health = h and idp = i and year = y`` (pairwise disjoint
cells) with three requirements (d, p), so most are answered from the history after the
first fresh answers and the (small) budget runs out: refusals (409) are expected; a run
without a fresh answer or without a refusal fails (it would test too little). The
default total eps=2.5 assumes the service's default privacy unit on the bundled data (a
person, k = 5 rows); at record level use --epsilon 0.5 for the same mix.

``--fault``: after ``--kill-after`` seconds of load (or ``--kill-after-answers`` answers
received) the server is SIGKILLed; the clients record the requests that were in flight
(lost), wait, and go on once the server, restarted on the same database and port, answers
again. Time to restart = from the kill to the first answered request.

Checks (both modes), against the ``answers`` table read directly from the database:

1. every fresh answer a client received is a ledger row, by value: same query text and
   eps, and the estimate received equals the BLUE of that query from the ledger's rows up
   to and including that row (for a query read only by answers of itself, the BLUE is the
   inverse-variance weighted mean, weights eps^2) -- one row per answer;
2. ledger rows no client received: none under load; under fault at most the requests in
   flight at the kill (committed, then the process died before the reply left);
3. the budget spent recomputed from the rows (sequential within a cell, parallel across
   disjoint cells: max over cells of the sum of eps of the rows reading it) equals what the
   (restarted) server reports, and is <= the total; no reply ever showed remaining < 0;
4. the server's history (API) has as many rows as the table.

Writes one row per run to benchmarks/results/bench_service.csv (throughput and latency
over the requests completed before the kill in fault mode). Timings depend on the
machine's load: the 1-minute load average at start and end is recorded.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import sqlalchemy as sa

from dpbayes.service import db as service_db

RESULTS = Path(__file__).with_name("results") / "bench_service.csv"
PREDICATES = [
    f"health = {h} and idp = {i} and year = {y}"
    for h in ("excellent", "good", "fair", "poor")
    for i in (0, 1)
    for y in (1, 2, 3, 4, 5)
]
REQUIREMENTS = [(20.0, 0.9), (10.0, 0.9), (5.0, 0.95)]
FIELDS = [
    "db",
    "mode",
    "clients",
    "queries_per_client",
    "epsilon_total",
    "requests",
    "ok",
    "fresh",
    "free",
    "refused",
    "lost_in_flight",
    "other_errors",
    "wall_s",
    "throughput_rps",
    "p50_ms",
    "p90_ms",
    "p99_ms",
    "after_restart_rps",
    "kill_at_s",
    "restart_s",
    "min_fresh_eps",
    "ledger_rows",
    "unreceived_rows",
    "spent",
    "load_start",
    "load_end",
    "checks",
]


@dataclass
class Result:
    """One request as a client saw it (times from time.perf_counter())."""

    t0: float
    t1: float
    code: int  # HTTP status, or -1 for a transport error (connection lost/refused)
    body: dict[str, Any] = field(default_factory=dict)


class Server:
    """``dpbayes serve`` in a subprocess on a fixed loopback port."""

    def __init__(self, db_url: str, port: int, key_file: Path, epsilon: float, log: Path):
        self.cmd = [sys.executable, "-m", "dpbayes.cli", "serve", "--db", db_url]
        self.cmd += ["--port", str(port), "--admin-key-file", str(key_file)]
        self.cmd += ["--epsilon", str(epsilon)]
        self.url = f"http://127.0.0.1:{port}"
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 120.0) -> float:
        """Start and wait until it answers; returns the seconds it took."""
        t0 = time.perf_counter()
        with self.log.open("ab") as fh:
            self.proc = subprocess.Popen(self.cmd, stdout=fh, stderr=subprocess.STDOUT)
        while time.perf_counter() - t0 < timeout:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited: {self.log.read_text()[-2000:]}")
            try:
                if httpx.get(self.url + "/openapi.json", timeout=2).status_code == 200:
                    return time.perf_counter() - t0
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"server did not start within {timeout} s")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()


class Database:
    """A fresh database for one run: a SQLite file, or a throwaway PostgreSQL schema."""

    def __init__(self, url: str, tmp: Path) -> None:
        self.schema = ""
        self.admin: sa.Engine | None = None
        if not url:
            self.url, self.kind = f"sqlite:///{tmp / 'bench.db'}", "sqlite"
            return
        if not url.startswith(("postgresql://", "postgres://")):
            raise SystemExit("--db: give a postgresql:// URL (SQLite is the default)")
        self.kind = "postgresql"
        self.schema = "bench_" + secrets.token_hex(4)
        self.admin = service_db.make_engine(url)
        with self.admin.begin() as con:
            con.exec_driver_sql(f"CREATE SCHEMA {self.schema}")
        sep = "&" if "?" in url else "?"
        self.url = f"{url}{sep}options=-csearch_path%3D{self.schema}"

    def rows(self) -> list[dict[str, Any]]:
        """The ledger (answers table) in commit order, read directly from the database."""
        eng = service_db.make_engine(self.url)
        try:
            t = service_db.answers
            stmt = sa.select(t.c.id, t.c.query, t.c.epsilon, t.c.noisy_answer, t.c.scope)
            with eng.connect() as con:
                return [dict(r._mapping) for r in con.execute(stmt.order_by(t.c.id))]
        finally:
            eng.dispose()

    def drop(self) -> None:
        if self.admin is not None:
            with self.admin.begin() as con:
                con.exec_driver_sql(f"DROP SCHEMA {self.schema} CASCADE")
            self.admin.dispose()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def check_ledger(
    received: list[dict[str, Any]], rows: list[dict[str, Any]]
) -> tuple[list[str], int]:
    """Match every received fresh answer to a ledger row by value; (problems, unreceived)."""
    problems: list[str] = []
    by_query: dict[str, list[dict[str, Any]]] = defaultdict(list)
    expected: dict[int, float] = {}
    for r in rows:
        hist = by_query[r["query"]]
        hist.append(r)
        num = math.fsum(h["epsilon"] ** 2 * h["noisy_answer"] for h in hist)
        expected[r["id"]] = num / math.fsum(h["epsilon"] ** 2 for h in hist)
    used: set[int] = set()
    for a in received:
        cands = [
            r
            for r in by_query.get(a["query"], [])
            if r["id"] not in used
            and r["epsilon"] == a["epsilon_spent"]
            and math.isclose(expected[r["id"]], a["estimate"], rel_tol=1e-9, abs_tol=1e-9)
        ]
        if not cands:
            problems.append(
                f"received fresh answer not in the ledger: {a['query']!r} eps="
                f"{a['epsilon_spent']!r} estimate={a['estimate']!r}"
            )
            continue
        used.add(cands[0]["id"])
    return problems, len(rows) - len(used)


def spent_from_rows(rows: list[dict[str, Any]]) -> float:
    """Sequential composition within a cell, parallel across cells (the service's rule)."""
    per_cell: dict[str, list[float]] = defaultdict(list)
    for r in rows:
        for cell in json.loads(r["scope"]):
            per_cell[cell].append(r["epsilon"])
    return max((math.fsum(v) for v in per_cell.values()), default=0.0)


def run(a: argparse.Namespace) -> dict[str, Any]:
    load_start = os.getloadavg()[0]
    tmp = Path(tempfile.mkdtemp(prefix="bench_service_"))
    key_file = tmp / "admin.key"
    admin = secrets.token_urlsafe(24)
    key_file.write_text(admin)
    base = Database(a.db, tmp)
    srv = Server(base.url, free_port(), key_file, a.epsilon, tmp / "server.log")
    ah = {"Authorization": f"Bearer {admin}"}
    keep = True  # the temporary directory (server log, SQLite file) unless all checks pass
    try:
        srv.start()
        r = httpx.post(srv.url + "/api/admin/analysts", json={"name": "bench"}, headers=ah)
        key = {"Authorization": f"Bearer {r.json()['api_key']}"}
        results: list[Result] = []
        lock = threading.Lock()
        up = threading.Event()
        up.set()
        kill_at = [math.inf]
        ready_at = [math.inf]

        def client(c: int) -> None:
            with httpx.Client(timeout=120) as cl:
                i = 0
                while i < a.queries:
                    k = c * 7919 + i * 104729
                    d, p = REQUIREMENTS[k % len(REQUIREMENTS)]
                    body = {"where": PREDICATES[(k // 3) % len(PREDICATES)], "half_width": d}
                    body["confidence"] = p
                    up.wait()
                    t0 = time.perf_counter()
                    try:
                        resp = cl.post(srv.url + "/api/query", json=body, headers=key)
                    except httpx.TransportError:
                        t1 = time.perf_counter()
                        if not a.fault:
                            with lock:
                                results.append(Result(t0, t1, -1))
                            i += 1
                            continue
                        if t0 < kill_at[0] or up.is_set():
                            # sent before the kill (or the kill is being noticed): lost
                            with lock:
                                results.append(Result(t0, t1, -1))
                        time.sleep(0.05)
                        continue  # retry the same query once the server is back
                    t1 = time.perf_counter()
                    try:
                        out = resp.json()
                    except ValueError:
                        out = {"text": resp.text[:200]}
                    with lock:
                        results.append(Result(t0, t1, resp.status_code, out))
                    i += 1

        def killer() -> None:
            while True:
                time.sleep(0.02)
                elapsed = time.perf_counter() - t_start
                with lock:
                    n = sum(1 for x in results if x.code > 0)
                done = all(not th.is_alive() for th in threads)
                if done or (a.kill_after_answers and n >= a.kill_after_answers):
                    break
                if not a.kill_after_answers and elapsed >= a.kill_after:
                    break
            if done:
                return
            up.clear()
            srv.kill()
            kill_at[0] = time.perf_counter()  # the process is dead: nothing commits after
            srv.start()
            ready_at[0] = time.perf_counter()
            up.set()

        threads = [threading.Thread(target=client, args=(c,)) for c in range(a.clients)]
        t_start = time.perf_counter()
        for th in threads:
            th.start()
        kt = threading.Thread(target=killer) if a.fault else None
        if kt is not None:
            kt.start()
        for th in threads:
            th.join()
        if kt is not None:
            kt.join()
        wall = time.perf_counter() - t_start

        # ------------------------------------------------------------ checks
        budget = httpx.get(srv.url + "/api/budget", headers=ah, timeout=60).json()
        n_hist = 0
        while True:
            page = httpx.get(
                srv.url + "/api/history",
                params={"offset": n_hist, "limit": 1000},
                headers=ah,
                timeout=60,
            ).json()["answers"]
            n_hist += len(page)
            if len(page) < 1000:
                break
        rows = base.rows()
        ok = [x for x in results if x.code == 200]
        fresh = [x.body for x in ok if x.body["status"] == "fresh"]
        free = sum(1 for x in ok if x.body["status"] == "history")
        refused = sum(1 for x in results if x.code == 409)
        lost = sum(1 for x in results if x.code == -1)
        other = len(results) - len(ok) - refused - lost
        problems, unreceived = check_ledger(fresh, rows)
        in_flight = lost if a.fault else 0
        if unreceived > in_flight:
            problems.append(
                f"{unreceived} ledger rows no client received, more than the {in_flight} "
                "requests in flight at the kill"
            )
        if lost and not a.fault:
            problems.append(f"{lost} requests failed at the transport level")
        if other:
            problems.append(f"{other} requests with an unexpected HTTP status")
        spent = spent_from_rows(rows)
        total = budget["total"]["epsilon"]
        if not math.isclose(spent, budget["spent"]["epsilon"], rel_tol=1e-9, abs_tol=1e-12):
            problems.append(f"server reports spent {budget['spent']['epsilon']!r}, rows {spent!r}")
        if spent > total * (1 + 1e-12):
            problems.append(f"budget exceeded: spent {spent!r} > total {total!r}")
        low = min((x.body["remaining_epsilon"] for x in ok), default=0.0)
        if low < -1e-12:
            problems.append(f"a reply showed remaining epsilon {low!r} < 0")
        if a.fault and not math.isfinite(kill_at[0]):
            problems.append("the load ended before the kill: raise --queries or lower --kill-after")
        if not fresh or not refused:
            problems.append(f"{len(fresh)} fresh, {refused} refused: the run tests too little")
        if n_hist != len(rows) or budget["answers"] != len(rows):
            problems.append(f"history {n_hist} / budget {budget['answers']} != {len(rows)} rows")

        killed = math.isfinite(kill_at[0])
        before = [x for x in results if x.t1 <= kill_at[0] and x.code > 0]
        span = kill_at[0] - t_start if killed else wall
        q = np.percentile(np.array([x.t1 - x.t0 for x in before]) * 1000, [50, 90, 99])
        after = [x for x in results if x.t0 >= ready_at[0] and x.code > 0]
        after_span = max(x.t1 for x in after) - ready_at[0] if after else math.nan
        row: dict[str, Any] = {
            "db": base.kind,
            "mode": "fault" if a.fault else "load",
            "clients": a.clients,
            "queries_per_client": a.queries,
            "epsilon_total": total,
            "requests": len(results),
            "ok": len(ok),
            "fresh": len(fresh),
            "free": free,
            "refused": refused,
            "lost_in_flight": lost,
            "other_errors": other,
            "wall_s": round(wall, 2),
            "throughput_rps": round(len(before) / span, 1),
            "p50_ms": round(float(q[0]), 1),
            "p90_ms": round(float(q[1]), 1),
            "p99_ms": round(float(q[2]), 1),
            "after_restart_rps": round(len(after) / after_span, 1) if after else "",
            "kill_at_s": round(kill_at[0] - t_start, 2) if killed else "",
            "restart_s": round(ready_at[0] - kill_at[0], 2) if killed else "",
            "min_fresh_eps": round(min((f["epsilon_spent"] for f in fresh), default=0.0), 6),
            "ledger_rows": len(rows),
            "unreceived_rows": unreceived,
            "spent": round(spent, 6),
            "load_start": round(load_start, 2),
            "load_end": round(os.getloadavg()[0], 2),
            "checks": "passed" if not problems else "FAILED: " + "; ".join(problems[:5]),
        }
        if problems:
            (tmp / "problems.txt").write_text("\n".join(problems) + "\n")
            print(f"{len(problems)} problems; all in {tmp / 'problems.txt'}", file=sys.stderr)
        else:
            keep = False
        return row
    finally:
        srv.stop()
        base.drop()
        if not keep:
            shutil.rmtree(tmp, ignore_errors=True)


def write_row(row: dict[str, Any], out: Path) -> None:
    out.parent.mkdir(exist_ok=True)
    if out.exists():
        with out.open(newline="") as fh:
            header = next(csv.reader(fh), [])
        if header != FIELDS:  # an older layout: keep it aside
            out.rename(out.with_name(f"{out.stem}.{time.strftime('%Y%m%dT%H%M%S')}.csv"))
    new = not out.exists()
    with out.open("a", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=FIELDS)
        if new:
            w.writeheader()
        w.writerow(row)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--queries", type=int, default=200, help="queries per client")
    ap.add_argument(
        "--epsilon",
        type=float,
        default=2.5,
        help="total budget; small so that it runs out (the bundled data is protected per "
        "person, k = 5 rows: a fresh answer costs 5x the record-level eps)",
    )
    ap.add_argument("--db", default="", help="postgresql:// URL (default: a SQLite file)")
    ap.add_argument("--fault", action="store_true", help="SIGKILL and restart under load")
    ap.add_argument("--kill-after", type=float, default=5.0, help="seconds of load")
    ap.add_argument("--kill-after-answers", type=int, default=0, help="or answers received")
    ap.add_argument("--out", type=Path, default=RESULTS)
    a = ap.parse_args()
    if a.clients < 1 or a.queries < 1:
        raise SystemExit("--clients and --queries must be >= 1")
    row = run(a)
    print(json.dumps(row, indent=1))
    write_row(row, a.out)
    if row["checks"] != "passed":
        raise SystemExit("checks failed")


if __name__ == "__main__":
    main()
