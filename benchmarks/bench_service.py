"""Load test of the query service on loopback: N clients x M queries (bounded).

Starts ``dpbayes serve`` on a temporary SQLite file (or ``--db URL``), runs the clients,
and writes throughput and latency percentiles to benchmarks/results/bench_service.csv.
Afterwards it checks the ledger: it holds exactly the fresh answers received (count and
sum of eps), and the budget spent (parallel composition over cells) is <= the total.
Queries: predicates over health x idp x year with a few requirements (most answered from
the history after the first fresh answer), so the budget is shared and runs out.

    python benchmarks/bench_service.py --clients 50 --queries 200
"""

from __future__ import annotations

import argparse
import csv
import math
import secrets
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--epsilon", type=float, default=5.0)
    ap.add_argument("--db", default="")
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench_service_"))
    key_file = tmp / "admin.key"
    admin = secrets.token_urlsafe(24)
    key_file.write_text(admin)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    db = a.db or f"sqlite:///{tmp / 'bench.db'}"
    cmd = [sys.executable, "-m", "dpbayes.cli", "serve", "--db", db, "--port", str(port)]
    cmd += ["--admin-key-file", str(key_file), "--epsilon", str(a.epsilon)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):
            try:
                if httpx.get(url + "/openapi.json", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        else:
            raise RuntimeError("server did not start")
        ah = {"Authorization": f"Bearer {admin}"}
        r = httpx.post(url + "/api/admin/analysts", json={"name": "bench"}, headers=ah)
        key = {"Authorization": f"Bearer {r.json()['api_key']}"}
        preds = [
            f"health = {h} and idp = {i} and year = {y}"
            for h in ("excellent", "good", "fair", "poor")
            for i in (0, 1)
            for y in (1, 2, 3, 4, 5)
        ]
        reqs = [(20.0, 0.9), (10.0, 0.9), (5.0, 0.95)]
        lat: list[float] = []
        eps: list[float] = []
        codes: dict[int, int] = {}
        lock = threading.Lock()

        def client(c: int) -> None:
            with httpx.Client(timeout=120) as cl:
                for i in range(a.queries):
                    k = c * 7919 + i * 104729
                    d, p = reqs[k % len(reqs)]
                    body = {"where": preds[(k // 3) % len(preds)], "half_width": d}
                    body["confidence"] = p
                    t0 = time.perf_counter()
                    resp = cl.post(url + "/api/query", json=body, headers=key)
                    dt = time.perf_counter() - t0
                    with lock:
                        lat.append(dt)
                        codes[resp.status_code] = codes.get(resp.status_code, 0) + 1
                        if resp.status_code == 200:
                            eps.append(resp.json()["epsilon_spent"])

        t0 = time.perf_counter()
        threads = [threading.Thread(target=client, args=(c,)) for c in range(a.clients)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        wall = time.perf_counter() - t0
        b = httpx.get(url + "/api/budget", headers=ah).json()
        spent = b["spent"]["epsilon"]
        ledger: list[float] = []
        while True:
            page = httpx.get(
                url + "/api/history", params={"offset": len(ledger), "limit": 1000}, headers=ah
            ).json()["answers"]
            ledger += [h["epsilon"] for h in page]
            if len(page) < 1000:
                break
        # the ledger holds exactly the fresh answers received (parallel composition over
        # disjoint cells: the budget spent is not their sum), and spent <= total
        ok = len(ledger) == sum(1 for e in eps if e > 0)
        ok = ok and math.isclose(math.fsum(ledger), math.fsum(eps), rel_tol=1e-9, abs_tol=1e-12)
        ok = ok and spent <= b["total"]["epsilon"] * (1 + 1e-9)
        q = np.percentile(np.array(lat) * 1000, [50, 90, 99])
        row = {
            "clients": a.clients,
            "queries_per_client": a.queries,
            "db": db.split(":")[0],
            "requests": len(lat),
            "wall_s": round(wall, 3),
            "throughput_rps": round(len(lat) / wall, 1),
            "p50_ms": round(float(q[0]), 1),
            "p90_ms": round(float(q[1]), 1),
            "p99_ms": round(float(q[2]), 1),
            "fresh_answers": sum(1 for e in eps if e > 0),
            "codes": " ".join(f"{k}:{v}" for k, v in sorted(codes.items())),
            "spent": spent,
            "ledger_ok": ok,
        }
        print(row)
        out = Path(__file__).with_name("results") / "bench_service.csv"
        out.parent.mkdir(exist_ok=True)
        new = not out.exists()
        with out.open("a", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=list(row))
            if new:
                w.writeheader()
            w.writerow(row)
        if not ok:
            raise SystemExit("ledger check failed")
    finally:
        proc.terminate()
        proc.wait(30)


if __name__ == "__main__":
    main()
