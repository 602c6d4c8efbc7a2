"""Several processes on one database share one ledger: no overspend, nothing lost.

Two servers on one fresh database (a SQLite file; a PostgreSQL schema): one started with
``--workers 2`` (two worker processes behind one port), one with a single process. Client
threads send queries that each need a fresh answer to both until the small budget runs
out, plus queries the history answers; afterwards the database holds exactly the answers
the clients received, the spend never exceeded the budget, and every process reports the
same budget.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from conftest import Server, _postgres_schema_url
from test_service_http import budget, history, weighted


@pytest.fixture(params=["sqlite", "postgres"])
def shared_url(request: Any, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'shared.db'}"
        return
    urls = _postgres_schema_url(request.getfixturevalue("require"))
    yield next(urls)
    for _ in urls:  # drop the schema
        pass


@pytest.mark.slow
def test_processes_on_one_database_share_the_ledger(shared_url: str, tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a = Server(shared_url, tmp_path / "a", "--epsilon", "1.5", "--workers", "2").start()
    b = Server(shared_url, tmp_path / "b", "--epsilon", "1.5").start()
    try:
        keys = [a.new_analyst(f"mp{i}") for i in range(3)]
        got: list[dict[str, Any]] = []
        codes: list[int] = []
        lock = threading.Lock()

        def client(t: int) -> None:
            with httpx.Client(timeout=120) as c:
                for i in range(8):
                    srv = (a, b)[(t + i) % 2]
                    if i % 4 == 3:  # a query the history answers (after its first time)
                        body: dict[str, Any] = {"where": "health = poor", "half_width": 400}
                    else:  # each reads every cell and needs eps ~0.086 of its own
                        body = {"coefficients": weighted(5000 + 100 * t + i), "half_width": 200}
                    body["confidence"] = 0.9
                    r = c.post(srv.url + "/api/query", json=body, headers=keys[t % 3])
                    with lock:
                        codes.append(r.status_code)
                        if r.status_code == 200:
                            got.append(r.json())

        threads = [threading.Thread(target=client, args=(t,)) for t in range(8)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        fresh = [g for g in got if g["status"] == "fresh"]
        assert set(codes) <= {200, 409} and codes.count(409) > 0 and len(fresh) > 5, codes
        assert any(g["free_from_history"] for g in got)
        rows = history(a)
        assert history(b) == rows
        # nothing lost, nothing unreceived: one row per fresh answer a client received
        # (each was the first answer reading its direction: its estimate is its row's value)
        left = list(rows)
        for g in fresh:
            match = [
                r
                for r in left
                if r["epsilon"] == g["epsilon_spent"]
                and math.isclose(r["noisy_answer"], g["estimate"], rel_tol=1e-9, abs_tol=1e-9)
            ]
            assert match, g
            left.remove(match[0])
        assert left == []
        spent = math.fsum(r["epsilon"] for r in rows)  # every cell: sequential composition
        for srv in (a, b, a):  # each process (either worker of a) catches up and agrees
            bud = budget(srv)
            assert bud["answers"] == len(rows)
            assert bud["spent"]["epsilon"] == pytest.approx(spent, rel=1e-12)
            assert bud["spent"]["epsilon"] <= bud["total"]["epsilon"] * (1 + 1e-9)
        assert min(g["remaining_epsilon"] for g in got) >= 0.0
    finally:
        a.stop()
        b.stop()
