"""Availability and failure replies (an attacker's review of the service).

* A plan the service already knows (cached for the current history) is served while every
  planning thread is busy: a flood of eps searches no longer starves free re-asks.
* An eps search that runs out of its time limit, or that the numerics refuse, is
  remembered for the (query, requirement, history version): asking again is a 409
  refusal at once (nothing spent, "retrying will not help") and the search is not redone.
* One request plans a given key at a time; the others wait for its plan.
* A database failure when committing an answer is a one-line JSON 503 saying nothing was
  spent or released, and it is true: budget and history are unchanged, no value leaks.
* Deeply nested JSON is reported as such; ``interval`` is documented as what it is.

A real uvicorn server on a loopback port runs the service's app in this process (as
``test_robustness``'s slow-reader test does), so that the service's planner can be held
or broken from the test; the other tests use the session's ``dpbayes serve``.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from live_app import LiveApp

from dpbayes.answers.limits import check_time
from dpbayes.service import EngineConfig
from dpbayes.service import state as state_module
from dpbayes.service.config import digest_key
from dpbayes.service.state import QueryService

from conftest import ADMIN_KEY

Server = Any  # tests/service/conftest.py: Server


class _Live(LiveApp):
    """The app with one analyst, ann, whose key every request carries."""

    def __init__(self, svc: QueryService, **kw: Any) -> None:
        super().__init__(svc, **kw)
        self.key = self.analyst("ann")

    def post(self, path: str, body: Any, timeout: float = 60) -> httpx.Response:  # type: ignore[override]
        return httpx.post(self.url + path, json=body, headers=self.key, timeout=timeout)

    def get(self, path: str) -> httpx.Response:  # type: ignore[override]
        return httpx.get(self.url + path, headers=self.key, timeout=30)


@pytest.fixture
def live(tmp_path: Path, request: Any) -> Iterator[_Live]:
    kw = getattr(request, "param", {})
    svc = QueryService(
        EngineConfig(epsilon=2.0),
        f"sqlite:///{tmp_path / 'avail.db'}",
        digest_key=digest_key(ADMIN_KEY),
        time_limit=kw.pop("time_limit", 10.0),
    )
    srv = _Live(svc, **kw)
    try:
        yield srv
    finally:
        srv.close()


ASK = {"where": "health = poor", "half_width": 40, "confidence": 0.9}


@pytest.mark.parametrize("live", [{"query_threads": 2}], indirect=True)
def test_a_cached_plan_is_served_while_every_planning_thread_is_busy(
    live: _Live, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = live.post("/api/query", ASK)
    assert first.status_code == 200 and first.json()["status"] == "fresh", first.text
    again = live.post("/api/query", ASK)
    assert again.json()["status"] == "history"

    release, entered = threading.Event(), []
    original = state_module.plan_candidates

    def held(*a: Any, **kw: Any) -> Any:
        entered.append(1)
        release.wait(60)
        return original(*a, **kw)

    monkeypatch.setattr(state_module, "plan_candidates", held)
    outcomes: list[int] = []

    def flood(i: int) -> None:
        body = {"where": "mdvis < 3", "half_width": 5000 + i, "confidence": 0.95}
        outcomes.append(live.post("/api/quote", body, timeout=120).status_code)

    threads = [threading.Thread(target=flood, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    try:
        deadline = time.monotonic() + 30
        while len(entered) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(entered) == 2  # both planning threads are held, 4 more quotes queue
        # the free re-ask (and its quote) is answered while the planners are still held
        r = live.post("/api/query", ASK, timeout=20)
        q = live.post("/api/quote", ASK, timeout=20)
        assert not release.is_set() and len(entered) == 2 and not outcomes
        assert r.status_code == 200 and r.json()["status"] == "history", r.text
        assert r.json()["estimate"] == pytest.approx(again.json()["estimate"], rel=1e-12)
        assert q.status_code == 200 and q.json()["status"] == "free", q.text
    finally:
        release.set()
        for t in threads:
            t.join(120)
    assert outcomes == [200] * 6


@pytest.mark.parametrize("live", [{"time_limit": 0.3}], indirect=True)
def test_a_search_over_its_own_time_limit_is_refused_once_and_remembered(
    live: _Live, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []

    def endless(*_a: Any, **_kw: Any) -> Any:
        calls.append("plan")
        # a search that computes (a wait would be a 503) and never ends: only the time
        # limit stops it, once it has used more than the limit in this thread's CPU time
        # (on a loaded machine the wall-clock limit passes before half of it is used)
        start = time.thread_time()
        while time.thread_time() - start < 0.35:
            sum(i * i for i in range(10_000))
        while True:
            check_time()
            sum(i * i for i in range(10_000))

    monkeypatch.setattr(state_module, "plan_candidates", endless)
    before = live.get("/api/budget").json()
    body = {"where": "idp = 1", "half_width": 10000, "confidence": 0.95}
    for _ in range(3):
        r = live.post("/api/query", body)
        assert r.status_code == 409, r.text
        js = r.json()
        assert js["status"] == "refused" and js["epsilon_spent"] == 0.0
        assert "time limit" in js["detail"] and "retrying will not help" in js["detail"]
        assert "\n" not in js["detail"]
    q = live.post("/api/quote", body).json()
    assert q["status"] == "refused" and "retrying will not help" in q["reason"]
    assert calls == ["plan"]  # searched once for this history version, never again
    assert live.get("/api/budget").json() == before


def test_a_numerical_refusal_is_remembered(live: _Live, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []

    def beyond(*_a: Any, **_kw: Any) -> Any:
        calls.append("plan")
        raise ValueError("accuracy cannot be met")

    monkeypatch.setattr(state_module, "plan_candidates", beyond)
    body = {"where": "idp = 0", "half_width": 30, "confidence": 0.95}
    for _ in range(3):
        r = live.post("/api/query", body)
        assert r.status_code == 409 and r.json()["status"] == "refused", r.text
        assert "accuracy" in r.json()["detail"]
    assert calls == ["plan"]


def test_one_request_plans_a_key_the_others_wait_for_its_plan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    svc = QueryService(
        EngineConfig(epsilon=2.0),
        f"sqlite:///{tmp_path / 'sf.db'}",
        digest_key=digest_key(ADMIN_KEY),
    )
    try:
        calls, release = [], threading.Event()
        original = state_module.plan_candidates

        def slow(*a: Any, **kw: Any) -> Any:
            calls.append(1)
            release.wait(30)
            return original(*a, **kw)

        monkeypatch.setattr(state_module, "plan_candidates", slow)
        q = svc.make_query("year = 2 and idp = 1", None)
        snap = svc._current()
        got: list[Any] = []
        threads = [
            threading.Thread(target=lambda: got.append(svc._plan(snap, q, 25.0, 0.9)))
            for _ in range(5)
        ]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 30
        while not calls and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.2)  # the others have asked meanwhile
        release.set()
        for t in threads:
            t.join(60)
        assert len(calls) == 1 and len(got) == 5
        assert all(g is got[0] for g in got) and got[0].plan.status == "fresh"
    finally:
        svc.close()


def test_a_database_failure_at_commit_is_a_json_503_and_nothing_is_spent_or_released(
    live: _Live,
) -> None:
    ok = live.post("/api/query", ASK)
    assert ok.status_code == 200 and ok.json()["status"] == "fresh"
    before_budget = live.get("/api/budget").json()
    before_history = live.get("/api/history").json()["answers"]

    def fail(_con: Any) -> None:  # the disk is full when the answer is committed
        raise sqlite3.OperationalError("disk I/O error")

    sa.event.listen(live.svc.db, "commit", fail)
    body = {"where": "idp = 1 and year = 3", "half_width": 30, "confidence": 0.9}
    try:
        for _ in range(2):
            r = live.post("/api/query", body)
            assert r.status_code == 503, r.text
            assert r.headers["content-type"].startswith("application/json")
            detail = r.json()["detail"]
            assert r.json() == {"detail": detail} and "\n" not in detail
            assert "nothing was spent or released" in detail and "database" in detail
    finally:
        sa.event.remove(live.svc.db, "commit", fail)
    # nothing was spent, recorded or released: the same budget and history as before
    assert live.get("/api/budget").json() == before_budget
    assert live.get("/api/history").json()["answers"] == before_history
    again = live.post("/api/query", body)  # the disk has room again
    assert again.status_code == 200 and again.json()["status"] == "fresh", again.text
    spent = live.get("/api/budget").json()["spent"]["epsilon"]
    assert spent == pytest.approx(
        before_budget["spent"]["epsilon"] + again.json()["epsilon_spent"], rel=1e-9
    )
    assert len(live.get("/api/history").json()["answers"]) == len(before_history) + 1


def test_deeply_nested_json_is_reported_as_such(sqlite_server: Server) -> None:
    key = sqlite_server.new_analyst()
    deep = '{"where":' + "[" * 20000 + "]" * 20000 + ',"half_width":20,"confidence":0.95}'
    r = httpx.post(
        sqlite_server.url + "/api/query",
        content=deep,
        headers={**key, "content-type": "application/json"},
        timeout=30,
    )
    assert r.status_code == 400
    assert "nested too deeply" in r.json()["detail"]
    assert "4300 digits" not in r.json()["detail"]
    huge = '{"where": "idp = 1", "half_width": ' + "9" * 5000 + ', "confidence": 0.9}'
    r = httpx.post(
        sqlite_server.url + "/api/query",
        content=huge,
        headers={**key, "content-type": "application/json"},
        timeout=30,
    )
    assert r.status_code == 400 and "4300 digits" in r.json()["detail"], r.text


def test_the_interval_is_documented_as_the_credible_interval(sqlite_server: Server) -> None:
    spec = httpx.get(sqlite_server.url + "/openapi.json", timeout=30).json()
    doc = spec["components"]["schemas"]["AnswerOut"]["properties"]["interval"]["description"]
    assert "estimate - d" not in doc and "confidence_required" in doc


def test_a_history_past_its_cap_refuses_fresh_answers_in_one_line(tmp_path: Path) -> None:
    """Each answer keeps a dense row per cell, copied per fresh request (on a 50,000-cell
    cube, 500 answers made 195 MB arrays): past ``max_history_entries`` (answers x
    cells) a fresh answer is refused, nothing spent; the history still answers."""
    svc = QueryService(
        EngineConfig(epsilon=2.0),
        f"sqlite:///{tmp_path / 'cap.db'}",
        digest_key=digest_key(ADMIN_KEY),
        max_history_entries=2 * 200,
    )
    try:
        ask = {"half_width": 40.0, "confidence": 0.9}
        for where in ("health = poor", "health = good"):
            r = svc.ask("ann", svc.make_query(where, None), **ask)
            assert r is not None and r.answer.status == "fresh"
        spent = svc.accountant.spent
        r = svc.ask("ann", svc.make_query("idp = 1 and year = 1", None), **ask)
        assert r is not None and r.answer.status == "refused"
        assert "the most this server keeps" in r.answer.reason
        assert "\n" not in r.answer.reason and svc.accountant.spent == spent
        again = svc.ask("ann", svc.make_query("health = poor", None), **ask)
        assert again is not None and again.answer.status == "history"
    finally:
        svc.close()
