"""The query service over real HTTP: API, bad input, concurrency, SIGKILL and restart.

One server per database (SQLite file, PostgreSQL schema) is shared by the whole session
(conftest.py). Each test makes its own analysts and asserts on what it changes (budget and
history before/after), so it does not depend on what ran before; the SIGKILL test restarts
the server and checks that the restart restores history and budget.
"""

from __future__ import annotations

import bisect
import math
import subprocess
import sys
import threading
import time
from typing import Any

import httpx
import pytest

Server = Any  # tests/service/conftest.py: Server

# A query the history cannot estimate from fewer than 200 other queries: pseudo-random
# weights in [1, 1.5) on every cell j (a deterministic hash of (j, k), not a random draw).


def weighted(k: int, n_cells: int = 200) -> list[float]:
    return [
        1.0 + 0.5 * ((math.sin(12.9898 * j + 78.233 * k) * 43758.5453) % 1.0)
        for j in range(n_cells)
    ]


def post(srv: Server, headers: dict[str, str], body: Any, **kw: Any) -> httpx.Response:
    return httpx.post(srv.url + "/api/query", json=body, headers=headers, timeout=60, **kw)


def budget(srv: Server) -> dict[str, Any]:
    return httpx.get(srv.url + "/api/budget", headers=srv.admin(), timeout=30).json()


def history(srv: Server) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    while True:
        r = httpx.get(
            srv.url + "/api/history",
            params={"offset": len(out), "limit": 1000},
            headers=srv.admin(),
            timeout=30,
        )
        batch = r.json()["answers"]
        out += batch
        if len(batch) < 1000:
            return out


def test_schema_query_history_budget(server: Server) -> None:
    spent0, n0 = budget(server)["spent"]["epsilon"], len(history(server))
    key = server.new_analyst("ann")
    schema = httpx.get(server.url + "/api/schema", headers=key, timeout=30).json()
    assert [a["name"] for a in schema["attributes"]] == ["health", "idp", "year", "mdvis"]
    assert schema["n_cells"] == 200
    assert "count" not in str(schema).lower()  # domains only, never counts
    # the bundled data's default privacy unit: one person, <= 5 rows (every row kept)
    assert schema["privacy_unit"] == {
        "unit": "user",
        "neighbouring_relation": "add/remove one user (<= 5 rows)",
        "user_column": "person",
        "max_rows_per_user": 5,
    }
    r = post(server, key, {"where": "health = poor", "half_width": 25, "confidence": 0.95})
    assert r.status_code == 200, r.text
    a = r.json()
    assert a["status"] == "fresh" and not a["free_from_history"]
    # eps for one Laplace answer alone: S ln(1/(1-p)) / d (paper 000 §5), S = k max|H_j| = 5
    assert a["epsilon_spent"] == pytest.approx(5 * math.log(20) / 25, rel=2e-3)
    assert a["guarantee"].startswith(f"{a['epsilon_spent']:.6g}-DP, add/remove one user (<= 5")
    lo, hi = a["interval"]
    assert hi - lo == pytest.approx(50, rel=1e-6)
    assert a["confidence_reached"] >= 0.95 - 1e-6
    # the same requirement again: free, from the history, same estimate
    b = post(server, key, {"where": "health = poor", "half_width": 25, "confidence": 0.95})
    assert b.status_code == 200 and b.json()["free_from_history"]
    assert b.json()["epsilon_spent"] == 0.0 and b.json()["estimate"] == a["estimate"]
    bud = budget(server)
    # parallel composition: the spend on the cells of "health = poor" raises the total spend
    # by at most its eps, and by exactly its eps on a fresh database (this module alone)
    eps = bud["spent"]["epsilon"] - spent0
    assert -1e-12 <= eps <= a["epsilon_spent"] * (1 + 1e-9)
    if spent0 == 0:
        assert eps == pytest.approx(a["epsilon_spent"], rel=1e-9)
    assert bud["remaining"]["epsilon"] == pytest.approx(a["remaining_epsilon"], rel=1e-12)
    assert bud["remaining"]["epsilon"] == pytest.approx(bud["total"]["epsilon"] - spent0 - eps)
    h = history(server)[n0:]
    assert len(h) == 1 and h[0]["epsilon"] == a["epsilon_spent"] and h[0]["analyst"] == "ann"
    doc = httpx.get(server.url + "/openapi.json", timeout=30).json()
    assert {"/api/query", "/api/schema", "/api/history", "/api/budget"} <= set(doc["paths"])
    d = post(
        server, key, {"where": "health = poor", "half_width": 40, "confidence": 0.9, "density": 1}
    )
    assert d.status_code == 422  # strict types: density must be a boolean
    d = post(
        server,
        key,
        {"where": "health = poor", "half_width": 40, "confidence": 0.9, "density": True},
    )
    dens = d.json()["density"]
    mass = sum(p * (dens["x"][1] - dens["x"][0]) for p in dens["pdf"])
    assert 0.95 < mass <= 1.0 + 1e-6


BAD: list[tuple[Any, int, str]] = [
    ({"where": "colour = red", "half_width": 5, "confidence": 0.9}, 400, "unknown attribute"),
    ({"where": "health = purple", "half_width": 5, "confidence": 0.9}, 400, "not in the domain"),
    ({"where": "health = poor or idp = 1", "half_width": 5, "confidence": 0.9}, 400, "'or'"),
    ({"where": "health = poor", "half_width": -1, "confidence": 0.9}, 422, "half_width"),
    ({"where": "health = poor", "half_width": 0, "confidence": 0.9}, 422, "half_width"),
    ({"where": "health = poor", "half_width": 1e300, "confidence": 0.9}, 422, "half_width"),
    ({"where": "health = poor", "half_width": 5, "confidence": 1.0}, 422, "confidence"),
    ({"where": "health = poor", "half_width": 5, "confidence": -0.5}, 422, "confidence"),
    ({"where": "health = poor", "half_width": "5", "confidence": 0.9}, 422, "half_width"),
    ({"where": "health = poor", "half_width": 5}, 422, "confidence"),
    ({"where": "health = poor", "half_width": 5, "confidence": 0.9, "x": 1}, 422, "x"),
    ({"half_width": 5, "confidence": 0.9}, 422, "exactly one"),
    ({"where": "", "coefficients": [1.0] * 200, "half_width": 5, "confidence": 0.9}, 422, "one"),
    ({"where": None, "half_width": 5, "confidence": 0.9}, 422, "exactly one"),
    ({"coefficients": [1.0, 2.0], "half_width": 5, "confidence": 0.9}, 400, "length 200"),
    ({"coefficients": [0.0] * 200, "half_width": 5, "confidence": 0.9}, 400, "non-zero"),
    ([1, 2, 3], 422, "body"),
]


def test_bad_input_is_4xx_and_spends_nothing(server: Server) -> None:
    key = server.new_analyst()
    # room for one answer whatever the earlier tests spent (test order, pytest -n), then
    # something is spent (fresh, or free if an earlier test asked it), so that the budget
    # below what is spent is refused whatever the test order
    room = {"epsilon": budget(server)["spent"]["epsilon"] + 1.0}
    assert httpx.put(server.url + "/api/admin/budget", json=room, headers=server.admin()).is_success
    r = post(server, key, {"where": "idp = 0", "half_width": 200, "confidence": 0.5})
    assert r.is_success, r.text
    before = budget(server)
    n_hist = len(history(server))
    for body, code, words in BAD:
        r = post(server, key, body)
        assert r.status_code == code, (body, r.text)
        assert words in r.json()["detail"], (body, r.json())
    raw = [
        (b'{"where": "health = poor", "half_width": NaN, "confidence": 0.9}', 422, "finite"),
        (b'{"where": "health = poor", "half_width": Infinity, "confidence": 0.9}', 422, "finite"),
        (b'{"where": "health = poor", "half_', 400, "malformed JSON"),
        (b'{"where": "idp = 1", "half_width": 1' + b"0" * 5000 + b"}", 400, "4300 digits"),
        (b'{"where": "' + b"a" * 70_000 + b'"}', 413, "larger than"),
    ]
    for content, code, words in raw:
        r = httpx.post(
            server.url + "/api/query",
            content=content,
            headers={**key, "content-type": "application/json"},
            timeout=60,
        )
        assert r.status_code == code and words in r.json()["detail"], (content[:40], r.text)
    good = {"where": "idp = 1", "half_width": 5, "confidence": 0.9}
    for headers in ({}, {"Authorization": "Bearer nope"}, {"Authorization": "Bearer dpb_x_y"}):
        assert post(server, headers, good).status_code == 401
    assert post(server, server.admin(), good).status_code == 401  # admin does not query
    r = httpx.post(server.url + "/api/admin/analysts", json={"name": "z"}, headers=key)
    assert r.status_code == 401  # analysts are not admins
    r = httpx.put(server.url + "/api/admin/budget", json={"epsilon": 1e-9}, headers=server.admin())
    assert r.status_code == 409 and "below what is already spent" in r.json()["detail"]
    assert budget(server) == before and len(history(server)) == n_hist


def test_concurrent_queries_never_overspend(server: Server) -> None:
    """10 threads x 5 queries that each need fresh budget; room for about 23 of them."""
    keys = [server.new_analyst() for _ in range(4)]
    spent0 = budget(server)["spent"]["epsilon"]
    total = spent0 + 2.0  # each query costs ~5 x 1.5 ln(10) / 200 = 0.086 (k = 5 per person)
    r = httpx.put(server.url + "/api/admin/budget", json={"epsilon": total}, headers=server.admin())
    assert r.status_code == 200, r.text
    got: list[dict[str, Any]] = []
    codes: list[int] = []
    lock = threading.Lock()

    def worker(t: int) -> None:
        with httpx.Client(timeout=120) as c:
            for i in range(5):
                body = {"coefficients": weighted(100 + 10 * t + i), "half_width": 200}
                body["confidence"] = 0.9
                r = c.post(server.url + "/api/query", json=body, headers=keys[t % 4])
                with lock:
                    codes.append(r.status_code)
                    if r.status_code == 200:
                        got.append(r.json())

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(10)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert set(codes) <= {200, 409} and codes.count(409) > 0 and len(got) > 10
    assert all(g["status"] == "fresh" for g in got)
    b = budget(server)
    spent = b["spent"]["epsilon"] - spent0
    assert b["spent"]["epsilon"] <= total * (1 + 1e-9)
    assert spent == pytest.approx(math.fsum(g["epsilon_spent"] for g in got), rel=1e-9)
    assert len(history(server)) == b["answers"]


def test_sigkill_during_load_loses_no_released_answer(server: Server) -> None:
    """Kill -9 under load, restart: the ledger holds every answer any client received.

    The restart also restores the history and budget from the database: the earlier answers
    are unchanged, and a query the history could answer before is still answered for free.
    """
    key = server.new_analyst()
    poor = {"where": "health = poor", "half_width": 30, "confidence": 0.9}
    # the budget first: an earlier test (in this process, whatever the order the test
    # runner chose) may have spent all of it, and "poor" may need a fresh answer
    r = httpx.put(
        server.url + "/api/admin/budget", json={"epsilon": 1000.0}, headers=server.admin()
    )
    assert r.status_code == 200
    assert post(server, key, poor).status_code == 200  # fresh, or free (test order)
    keys = [server.new_analyst() for _ in range(4)]
    before, hist0 = budget(server), history(server)
    n0 = len(hist0)
    got: list[dict[str, Any]] = []
    lock = threading.Lock()
    stop = threading.Event()

    def worker(t: int) -> None:
        with httpx.Client(timeout=30) as c:
            for i in range(10_000):
                if stop.is_set():
                    return
                body = {"coefficients": weighted(1000 + 1000 * t + i), "half_width": 40}
                body["confidence"] = 0.9
                try:
                    r = c.post(server.url + "/api/query", json=body, headers=keys[t % 4])
                except httpx.HTTPError:
                    return
                if r.status_code == 200:
                    with lock:
                        got.append(r.json())

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(6)]
    for th in threads:
        th.start()
    deadline = time.monotonic() + 120  # generous: a loaded machine answers slowly
    while len(got) < 12 and time.monotonic() < deadline:
        time.sleep(0.05)
    server.kill()
    stop.set()
    for th in threads:
        th.join()
    assert len(got) >= 12
    server.start()
    full = history(server)
    assert full[:n0] == hist0  # the restart restores the history before the load
    hist = full[n0:]
    stored = sorted(h["noisy_answer"] for h in hist)
    assert len(hist) >= len(got)  # at most the one being committed was never received
    for g in got:  # each is the first answer in its direction: the estimate is its value
        i = bisect.bisect_left(stored, g["estimate"] - 1e-6)
        assert i < len(stored) and math.isclose(stored[i], g["estimate"], abs_tol=1e-6), g
    b = budget(server)
    assert b["total"] == before["total"] and b["answers"] == len(full)
    # every load query reads every cell: their spends add up on top of the spend before
    loaded = math.fsum(h["epsilon"] for h in hist)
    assert b["spent"]["epsilon"] == pytest.approx(before["spent"]["epsilon"] + loaded, rel=1e-9)
    # (up to rounding: the server adds the spends in its own order)
    received = before["spent"]["epsilon"] + math.fsum(g["epsilon_spent"] for g in got)
    assert b["spent"]["epsilon"] >= received * (1 - 1e-12)
    r = post(server, server.new_analyst(), poor)
    assert r.status_code == 200 and r.json()["free_from_history"], r.text


def test_quote_prices_a_query_and_spends_nothing(server: Server) -> None:
    """POST /api/quote: the eps a query would spend now, free when the history meets it,
    refused when the budget cannot pay; no quote spends or releases anything."""
    key = server.new_analyst()
    room = {"epsilon": budget(server)["spent"]["epsilon"] + 5.0}
    assert httpx.put(server.url + "/api/admin/budget", json=room, headers=server.admin()).is_success
    body = {"coefficients": weighted(777), "half_width": 150, "confidence": 0.9}

    def quote(b: Any, headers: dict[str, str] = key) -> httpx.Response:
        return httpx.post(server.url + "/api/quote", json=b, headers=headers, timeout=60)

    before, hist0 = budget(server), history(server)
    r = quote(body)
    assert r.status_code == 200, r.text
    q = r.json()
    assert q["status"] == "fresh" and q["query"] == "coefficients"
    # one Laplace answer alone: S ln(1/(1-p)) / d, S = k max|c| = 5 x 1.5 at most
    assert 0 < q["epsilon"] <= 5 * 1.5 * math.log(10) / 150 * (1 + 1e-6)
    assert q["remaining_epsilon"] == pytest.approx(before["remaining"]["epsilon"], rel=1e-12)
    assert quote(body, server.admin()).json() == q  # the admin may ask the price too
    assert budget(server) == before and history(server) == hist0  # nothing spent
    # the answer costs what was quoted; then the same requirement is free
    a = post(server, key, body).json()
    assert a["status"] == "fresh" and a["epsilon_spent"] == q["epsilon"], a
    free = quote(body).json()
    assert free["status"] == "free" and free["epsilon"] == 0.0, free
    assert "nothing would be spent" in free["reason"]
    # a requirement the budget cannot pay: refused, with the reason the query would get
    tight = {**body, "half_width": 1e-4}
    refused = quote(tight).json()
    assert refused["status"] == "refused" and refused["epsilon"] is None, refused
    r = post(server, key, tight)
    assert r.status_code == 409 and r.json()["detail"] == refused["reason"]
    # a half-width so small that no eps is finite: the documented refusal, never a 400
    for path in ("/api/quote", "/api/query"):
        r = httpx.post(
            server.url + path,
            json={"where": "health = poor", "half_width": 5e-324, "confidence": 0.9},
            headers=key,
            timeout=60,
        )
        assert r.status_code in (200, 409) and "finite" not in r.text, r.text
        assert (
            r.json()["status"] == "refused"
            and "nothing spent" in r.json()["reason" if path == "/api/quote" else "detail"]
        )
    # the same checks as a query, the same messages
    for bad, code, words in BAD[:6]:
        r = quote(bad)
        assert r.status_code == code and words in r.json()["detail"], (bad, r.text)
    assert quote(body, {"Authorization": "Bearer nope"}).status_code == 401
    # all it spent is the one answer asked for
    after = budget(server)
    assert len(history(server)) == len(hist0) + 1 == after["answers"]
    assert after["spent"]["epsilon"] <= before["spent"]["epsilon"] + q["epsilon"] * (1 + 1e-9)


def test_serve_says_where_it_listens_and_how_to_stop(sqlite_server: Server) -> None:
    srv = sqlite_server
    log = srv.tmp / f"server-{srv.port}.log"
    deadline = time.monotonic() + 30
    while "listening on" not in log.read_text() and time.monotonic() < deadline:
        time.sleep(0.1)
    lines = [x for x in log.read_text().splitlines() if "listening on" in x]
    assert lines == [
        f"dpbayes serve: listening on {srv.url} (web page {srv.url}/, API document "
        f"{srv.url}/openapi.json); press Ctrl+C to stop"
    ]
    # a busy port: one line and exit 2 before anything is opened, no false announcement
    db = srv.tmp / "never.db"
    cmd = [sys.executable, "-m", "dpbayes.cli", "serve", "--port", str(srv.port)]
    cmd += ["--db", f"sqlite:///{db}", "--admin-key-file", str(srv.key_file)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and p.stdout == "", p
    assert p.stderr.strip().splitlines() == [
        f"dpbayes: error: --port {srv.port}: cannot listen on 127.0.0.1:{srv.port} "
        "(Address already in use)"
    ]
    assert not db.exists()
