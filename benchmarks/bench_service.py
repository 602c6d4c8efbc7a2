"""Load and fault test of the query service on loopback (bounded): N clients x M queries.

    python benchmarks/bench_service.py --clients 20 --queries 200 --repeat 3 # SQLite file
    python benchmarks/bench_service.py --workers 2 \
        --db postgresql://dpbayes:dpbayes@127.0.0.1:5432/dpbayes_test
    python benchmarks/bench_service.py --fault --clients 20 --kill-after 5   # SIGKILL + restart
    python benchmarks/bench_service.py --src OLD_CHECKOUT                    # an older service

The floor: in the same run (``--server both``, the default) the same clients send the same
request mix to a minimal FastAPI + SQLite endpoint (``service_floor.py``: uvicorn, one
process, a synchronous handler that does one INSERT, committed with ``synchronous=FULL``
in WAL mode -- one fsync -- under a process-wide lock, per request, and answers a small
JSON object). It is what any service that records every request durably costs on this
machine; the service's throughput is reported as a ratio to it (``ratio_to_floor``, from
the floor run just before), with p50/p99 latency, and the write ratio (fresh answers /
requests: the only requests the service must commit; the floor commits every request).
``--src DIR`` runs ``dpbayes serve`` from the source tree ``DIR/src`` (e.g. an export of
an older commit) for before/after comparisons in one session; ``--workers N`` starts the
service with N worker processes on the one database (``dpbayes serve --workers``).

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

Writes one row per run and server to benchmarks/results/bench_service.csv (throughput and
latency over the requests completed before the kill in fault mode). Timings depend on the
machine's load: the 1-minute load average at start and end is recorded; ``--repeat``
alternates floor and service runs to show the spread.
"""

from __future__ import annotations

import argparse
import csv
import gc
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
    "server",
    "source",
    "workers",
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
    "p99_fresh_ms",
    "p99_free_ms",
    "p99_refused_ms",
    "write_ratio",
    "ratio_to_floor",
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
    """A server in a subprocess on a fixed loopback port (``dpbayes serve`` or the floor)."""

    def __init__(self, cmd: list[str], port: int, log: Path, env: dict[str, str] | None = None):
        self.cmd = cmd
        self.url = f"http://127.0.0.1:{port}"
        self.log = log
        self.env = env
        self.proc: subprocess.Popen[bytes] | None = None

    @classmethod
    def service(
        cls, a: argparse.Namespace, db_url: str, port: int, key_file: Path, log: Path
    ) -> Server:
        cmd = [sys.executable, "-m", "dpbayes.cli", "serve", "--db", db_url]
        cmd += ["--port", str(port), "--admin-key-file", str(key_file)]
        cmd += ["--epsilon", str(a.epsilon)]
        if a.workers > 1:
            cmd += ["--workers", str(a.workers)]
        env = None
        if a.src is not None:
            env = {**os.environ, "PYTHONPATH": str(Path(a.src).resolve() / "src")}
        return cls(cmd, port, log, env)

    @classmethod
    def floor(cls, db_path: Path, port: int, log: Path) -> Server:
        cmd = [sys.executable, str(Path(__file__).with_name("service_floor.py"))]
        cmd += ["--port", str(port), "--db", str(db_path)]
        return cls(cmd, port, log)

    def start(self, timeout: float = 120.0) -> float:
        """Start and wait until it answers; returns the seconds it took."""
        t0 = time.perf_counter()
        with self.log.open("ab") as fh:
            # a session of its own: kill and stop reach the worker processes too
            self.proc = subprocess.Popen(
                self.cmd, stdout=fh, stderr=subprocess.STDOUT, env=self.env, start_new_session=True
            )
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
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
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


def source_label(src: str | None) -> str:
    """Which service ran: ``DIR``'s name for ``--src DIR``, else this checkout's commit."""
    if src is not None:
        return Path(src).resolve().name
    try:
        out = subprocess.run(
            ["git", "describe", "--always", "--dirty"],
            cwd=Path(__file__).parent,
            capture_output=True,
            text=True,
            timeout=30,
        )
    except OSError:
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


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


def request_body(c: int, i: int) -> dict[str, Any]:
    """Client c's i-th query: a predicate and a requirement (the same mix for both servers)."""
    k = c * 7919 + i * 104729
    d, p = REQUIREMENTS[k % len(REQUIREMENTS)]
    return {"where": PREDICATES[(k // 3) % len(PREDICATES)], "half_width": d, "confidence": p}


@dataclass
class Load:
    """What the clients saw in one run."""

    results: list[Result]
    wall: float
    t_start: float
    kill_at: float = math.inf
    ready_at: float = math.inf


def drive(a: argparse.Namespace, srv: Server, key: dict[str, str], fault: bool) -> Load:
    """N client threads x M queries (one HTTP connection each); SIGKILL + restart if fault."""
    results: list[Result] = []
    lock = threading.Lock()
    up = threading.Event()
    up.set()
    load = Load(results, 0.0, 0.0)

    def client(c: int) -> None:
        with httpx.Client(timeout=120) as cl:
            i = 0
            while i < a.queries:
                body = request_body(c, i)
                up.wait()
                t0 = time.perf_counter()
                try:
                    resp = cl.post(srv.url + "/api/query", json=body, headers=key)
                except httpx.TransportError:
                    t1 = time.perf_counter()
                    if not fault:
                        with lock:
                            results.append(Result(t0, t1, -1))
                        i += 1
                        continue
                    if t0 < load.kill_at or up.is_set():
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
            elapsed = time.perf_counter() - load.t_start
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
        load.kill_at = time.perf_counter()  # the process is dead: nothing commits after
        srv.start()
        load.ready_at = time.perf_counter()
        up.set()

    threads = [threading.Thread(target=client, args=(c,)) for c in range(a.clients)]
    # The clients' own garbage-collector pauses (full collections over their growing list
    # of results: 40-140 ms) would count as latency of whichever server is measured: the
    # collector is off while they run (a few MB of results).
    gc.collect()
    gc.disable()
    try:
        load.t_start = time.perf_counter()
        for th in threads:
            th.start()
        kt = threading.Thread(target=killer) if fault else None
        if kt is not None:
            kt.start()
        for th in threads:
            th.join()
        if kt is not None:
            kt.join()
        load.wall = time.perf_counter() - load.t_start
    finally:
        gc.enable()
    return load


def _p99(results: list[Result], kind: str) -> float | str:
    """p99 latency (ms) of one kind of request: fresh answers, free ones, refusals."""
    if kind == "refused":
        got = [x for x in results if x.code == 409]
    else:
        status = "fresh" if kind == "fresh" else "history"
        got = [x for x in results if x.code == 200 and x.body.get("status") == status]
    if not got:
        return ""
    return round(float(np.percentile([(x.t1 - x.t0) * 1000 for x in got], 99)), 1)


def timing(load: Load) -> dict[str, Any]:
    """Throughput and latency percentiles over the requests completed before any kill."""
    killed = math.isfinite(load.kill_at)
    before = [x for x in load.results if x.t1 <= load.kill_at and x.code > 0]
    span = load.kill_at - load.t_start if killed else load.wall
    q = np.percentile(np.array([x.t1 - x.t0 for x in before]) * 1000, [50, 90, 99])
    after = [x for x in load.results if x.t0 >= load.ready_at and x.code > 0]
    after_span = max(x.t1 for x in after) - load.ready_at if after else math.nan
    return {
        "requests": len(load.results),
        "wall_s": round(load.wall, 2),
        "throughput_rps": round(len(before) / span, 1),
        "p50_ms": round(float(q[0]), 1),
        "p90_ms": round(float(q[1]), 1),
        "p99_ms": round(float(q[2]), 1),
        **{f"p99_{kind}_ms": _p99(before, kind) for kind in ("fresh", "free", "refused")},
        "after_restart_rps": round(len(after) / after_span, 1) if after else "",
        "kill_at_s": round(load.kill_at - load.t_start, 2) if killed else "",
        "restart_s": round(load.ready_at - load.kill_at, 2) if killed else "",
    }


def run_floor(a: argparse.Namespace) -> dict[str, Any]:
    """The same clients and request mix against the floor endpoint."""
    load_start = os.getloadavg()[0]
    tmp = Path(tempfile.mkdtemp(prefix="bench_floor_"))
    srv = Server.floor(tmp / "floor.db", free_port(), tmp / "floor.log")
    try:
        srv.start()
        load = drive(a, srv, {"Authorization": "Bearer floor-client-key"}, fault=False)
        rows = httpx.get(srv.url + "/api/rows", timeout=60).json()["rows"]
    finally:
        srv.stop()
    ok = sum(1 for x in load.results if x.code == 200)
    problems = []
    if ok != len(load.results) or rows != ok:
        problems.append(f"{ok} of {len(load.results)} requests answered, {rows} rows")
    row: dict[str, Any] = {
        "server": "floor",
        "source": "",
        "workers": 1,
        "db": "sqlite",
        "mode": "load",
        "clients": a.clients,
        "queries_per_client": a.queries,
        "ok": ok,
        "ledger_rows": rows,
        "write_ratio": round(rows / max(1, len(load.results)), 4),
        **timing(load),
        "load_start": round(load_start, 2),
        "load_end": round(os.getloadavg()[0], 2),
        "checks": "passed" if not problems else "FAILED: " + "; ".join(problems),
    }
    if not problems:
        shutil.rmtree(tmp, ignore_errors=True)
    return row


def run(a: argparse.Namespace) -> dict[str, Any]:
    load_start = os.getloadavg()[0]
    tmp = Path(tempfile.mkdtemp(prefix="bench_service_"))
    key_file = tmp / "admin.key"
    admin = secrets.token_urlsafe(24)
    key_file.write_text(admin)
    base = Database(a.db, tmp)
    srv = Server.service(a, base.url, free_port(), key_file, tmp / "server.log")
    ah = {"Authorization": f"Bearer {admin}"}
    keep = True  # the temporary directory (server log, SQLite file) unless all checks pass
    try:
        srv.start()
        r = httpx.post(srv.url + "/api/admin/analysts", json={"name": "bench"}, headers=ah)
        key = {"Authorization": f"Bearer {r.json()['api_key']}"}
        load = drive(a, srv, key, a.fault)
        results = load.results

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
        if a.fault and not math.isfinite(load.kill_at):
            problems.append("the load ended before the kill: raise --queries or lower --kill-after")
        if not fresh or not refused:
            problems.append(f"{len(fresh)} fresh, {refused} refused: the run tests too little")
        if n_hist != len(rows) or budget["answers"] != len(rows):
            problems.append(f"history {n_hist} / budget {budget['answers']} != {len(rows)} rows")

        row: dict[str, Any] = {
            "server": "service",
            "source": source_label(a.src),
            "workers": a.workers,
            "db": base.kind,
            "mode": "fault" if a.fault else "load",
            "clients": a.clients,
            "queries_per_client": a.queries,
            "epsilon_total": total,
            "ok": len(ok),
            "fresh": len(fresh),
            "free": free,
            "refused": refused,
            "lost_in_flight": lost,
            "other_errors": other,
            "write_ratio": round(len(rows) / max(1, len(results)), 4),
            **timing(load),
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
    ap.add_argument("--clients", type=int, default=20)
    ap.add_argument("--queries", type=int, default=200, help="queries per client")
    ap.add_argument(
        "--epsilon",
        type=float,
        default=2.5,
        help="total budget; small so that it runs out (the bundled data is protected per "
        "person, k = 5 rows: a fresh answer costs 5x the record-level eps)",
    )
    ap.add_argument("--db", default="", help="postgresql:// URL (default: a SQLite file)")
    ap.add_argument(
        "--server",
        choices=("both", "service", "floor"),
        default="both",
        help="the service, the floor endpoint, or both (floor first) in each repetition",
    )
    ap.add_argument("--workers", type=int, default=1, help="service worker processes")
    ap.add_argument("--src", help="run the service from DIR/src (an older source tree)")
    ap.add_argument("--repeat", type=int, default=1, help="repetitions (to show the spread)")
    ap.add_argument("--fault", action="store_true", help="SIGKILL and restart under load")
    ap.add_argument("--kill-after", type=float, default=5.0, help="seconds of load")
    ap.add_argument("--kill-after-answers", type=int, default=0, help="or answers received")
    ap.add_argument("--out", type=Path, default=RESULTS)
    a = ap.parse_args()
    if a.clients < 1 or a.queries < 1 or a.repeat < 1 or a.workers < 1:
        raise SystemExit("--clients, --queries, --repeat and --workers must be >= 1")
    if a.fault and a.server != "service":
        a.server = "service"  # the floor has no ledger to check after a kill
    failed = False
    for _ in range(a.repeat):
        floor_rps = math.nan
        if a.server in ("both", "floor"):
            row = run_floor(a)
            floor_rps = float(row["throughput_rps"])
            print(json.dumps(row))
            write_row(row, a.out)
            failed |= row["checks"] != "passed"
        if a.server in ("both", "service"):
            row = run(a)
            if math.isfinite(floor_rps):
                row["ratio_to_floor"] = round(float(row["throughput_rps"]) / floor_rps, 3)
            print(json.dumps(row))
            write_row(row, a.out)
            failed |= row["checks"] != "passed"
    if failed:
        raise SystemExit("checks failed")


if __name__ == "__main__":
    main()
