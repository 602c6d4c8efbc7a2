"""Planning threads are shared fairly between analysts (an attacker's review).

The eps searches (a query or quote whose plan is not known yet) ran on one first-come,
first-served thread pool: one analyst sending many at once filled every planning thread
and queued the rest ahead of everyone else, so another analyst's query waited behind the
whole flood (seconds, then 503 at its time limit). Now each analyst plans on at most its
share of the threads (half of them by default), its further requests wait without a
thread, and a free thread goes to the waiting analyst holding the fewest.

A real uvicorn server on a loopback port runs the service's app in this process (as
``test_availability`` does), so that the flooding analyst's eps searches can be held.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from live_app import LiveApp

from dpbayes.service import EngineConfig
from dpbayes.service import state as state_module
from dpbayes.service.config import digest_key
from dpbayes.service.state import QueryService

from conftest import ADMIN_KEY

FLOOD = "mdvis < 3"  # the flooding analyst's predicate: its eps searches are held


_Live = LiveApp


@pytest.fixture
def live(tmp_path: Path, request: Any) -> Iterator[_Live]:
    kw = dict(getattr(request, "param", {}))
    limit = kw.pop("time_limit", 10.0)
    svc = QueryService(
        EngineConfig(epsilon=2.0),
        f"sqlite:///{tmp_path / 'fair.db'}",
        digest_key=digest_key(ADMIN_KEY),
        time_limit=limit,
    )
    srv = _Live(svc, time_limit=limit, **kw)  # the app's limit too (the wait for a thread)
    try:
        yield srv
    finally:
        srv.close()


@pytest.fixture
def hold(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[threading.Event, list[int]]]:
    """Hold every eps search of ``FLOOD`` until the event is set; count those held."""
    release, entered = threading.Event(), []
    original = state_module.plan_candidates

    def held(history: Any, q: Any, *a: Any, **kw: Any) -> Any:
        if q.text == FLOOD:
            entered.append(1)
            release.wait(60)
        return original(history, q, *a, **kw)

    monkeypatch.setattr(state_module, "plan_candidates", held)
    try:
        yield release, entered
    finally:
        release.set()


def _wait_for(cond: Any, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not cond() and time.monotonic() < deadline:
        time.sleep(0.02)


def test_one_analysts_flood_of_eps_searches_does_not_stall_anothers_query(
    live: _Live, hold: tuple[threading.Event, list[int]]
) -> None:
    release, entered = hold
    ann, bob = live.analyst("ann"), live.analyst("bob")
    before = live.budget(bob)
    outcomes: list[int] = []

    def flood(i: int) -> None:
        # quotes and queries, each a key of its own (no single flight): 12 eps searches
        path = "/api/query" if i % 3 == 0 else "/api/quote"
        body = {"where": FLOOD, "half_width": 4000 + i, "confidence": 0.9}
        outcomes.append(live.post(path, body, ann, timeout=120).status_code)

    threads = [threading.Thread(target=flood, args=(i,)) for i in range(12)]
    for t in threads:
        t.start()
    try:
        _wait_for(lambda: len(entered) >= 4)
        time.sleep(0.3)  # whatever more of ann's requests could take a thread have taken one
        assert len(entered) >= 4
        # bob's query needs an eps search of its own: it is answered while ann's are held
        try:
            r = live.post(
                "/api/query", {"where": "idp = 1", "half_width": 400, "confidence": 0.9}, bob, 15
            )
        except httpx.TimeoutException:
            pytest.fail("bob's query waited behind ann's flood of eps searches")
        assert not release.is_set() and not outcomes
        assert r.status_code == 200 and r.json()["status"] == "fresh", r.text
        # ann plans on her share (half the 8 threads); her other requests wait without one
        assert len(entered) == 4
        spent = live.budget(bob)["spent"]["epsilon"] - before["spent"]["epsilon"]
        assert spent == pytest.approx(r.json()["epsilon_spent"], rel=1e-9)
    finally:
        release.set()
        for t in threads:
            t.join(120)
    assert outcomes == [200] * 12  # the waiting ones were planned once threads were free
    assert len(entered) >= 12


@pytest.mark.parametrize(
    "live", [{"time_limit": 1.0, "query_threads": 2, "analyst_threads": 1}], indirect=True
)
def test_a_request_waiting_past_its_time_limit_for_its_share_is_a_503_spending_nothing(
    live: _Live, hold: tuple[threading.Event, list[int]]
) -> None:
    release, entered = hold
    ann, bob = live.analyst("ann"), live.analyst("bob")
    before = live.budget(ann)
    held = threading.Thread(
        target=live.post,
        args=("/api/quote", {"where": FLOOD, "half_width": 5000, "confidence": 0.9}, ann),
    )
    held.start()
    try:
        _wait_for(lambda: len(entered) == 1)
        assert len(entered) == 1
        # ann's second eps search waits for her one thread, past its time limit: 503
        body = {"where": FLOOD, "half_width": 5001, "confidence": 0.9}
        r = live.post("/api/query", body, ann, timeout=30)
        assert r.status_code == 503, r.text
        detail = r.json()["detail"]
        assert "planning thread" in detail and "nothing spent" in detail and "\n" not in detail
        assert r.headers["Retry-After"] == "1"
        assert len(entered) == 1  # it never reached the planner
        # bob has the other thread meanwhile
        q = live.post("/api/quote", {"where": "idp = 0", "half_width": 900, "confidence": 0.9}, bob)
        assert q.status_code == 200, q.text
    finally:
        release.set()
        held.join(60)
    assert live.budget(ann) == before


def test_a_free_thread_goes_to_the_waiting_analyst_holding_the_fewest() -> None:
    from dpbayes.service.fair import FairPool

    async def scenario() -> None:
        pool = FairPool(4, 3)  # 4 threads, at most 3 per analyst
        gates: dict[str, threading.Event] = {}
        started: list[str] = []
        tasks: dict[str, asyncio.Task[Any]] = {}

        def job(name: str) -> str:
            started.append(name)
            gates[name].wait(30)
            return name

        async def submit(name: str) -> None:
            gates[name] = threading.Event()
            tasks[name] = asyncio.create_task(pool.run(name[0], lambda: job(name), None))
            await asyncio.sleep(0.05)

        async def finish(name: str, then: int) -> None:
            gates[name].set()
            assert await tasks[name] == name
            for _ in range(1000):
                if len(started) >= then:
                    break
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.05)

        for name in ("a1", "a2", "a3", "a4", "a5", "b1"):  # a floods, b comes last
            await submit(name)
        assert started == ["a1", "a2", "a3", "b1"]  # a holds its 3, b starts at once
        assert pool.running("a") == 3 and pool.running("b") == 1
        await submit("c1")  # every thread busy: c waits
        assert started == ["a1", "a2", "a3", "b1"]
        await finish("b1", 5)  # a waited longer but is at its bound: c goes
        assert started[4:] == ["c1"]
        await submit("c2")  # every thread busy again
        await finish("a1", 6)  # a (2 threads) waited longer, c holds fewer (1): c goes
        assert started[5:] == ["c2"]
        await finish("c1", 7)  # c waits for nothing more: a's next request
        assert started[6:] == ["a4"]
        for g in gates.values():
            g.set()
        await asyncio.gather(*tasks.values())
        assert sorted(started) == ["a1", "a2", "a3", "a4", "a5", "b1", "c1", "c2"]
        assert pool.running("a") == pool.running("b") == pool.running("c") == 0
        pool.shutdown()

    asyncio.run(scenario())
