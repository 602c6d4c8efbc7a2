"""FairPool under attack (a second review of service/fair.py and its use in app.py).

Direct tests drive :class:`FairPool` on one event loop and settle its races by hand (a
grant and a cancellation or an expired deadline in the same loop step); the last ones
serve the real app in this process (as ``test_fair_planning`` does), its eps searches
held where they must be. Everywhere: the pool ends with nothing held or waiting, never
runs more jobs than threads nor more than an analyst's share, and a refusal spends nothing.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from live_app import LiveApp

from dpbayes.service import EngineConfig
from dpbayes.service import state as state_module
from dpbayes.service.config import digest_key
from dpbayes.service.fair import FairPool, NoThread
from dpbayes.service.state import QueryService

from conftest import ADMIN_KEY


def _idle(pool: FairPool) -> None:
    assert pool._busy == 0 and not pool._running and not pool._waiting


async def _settle(pool: FairPool) -> None:
    """Until the release callbacks of finished jobs have run."""
    for _ in range(500):
        if pool._busy == 0:
            return
        await asyncio.sleep(0.005)


async def _steps(n: int = 5) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


def _run(coro: Any) -> None:
    asyncio.run(asyncio.wait_for(coro, 30))


# ----------------------------------------------------------------- the races, by hand
def test_a_deadline_that_expires_as_the_thread_is_granted_gives_it_back() -> None:
    async def scenario() -> None:
        pool = FairPool(1, 1)
        pool._grant("a")  # a job of a's holds the only thread
        ran: list[str] = []
        late = asyncio.create_task(pool.run("b", lambda: ran.append("b"), time.monotonic() - 1))
        # b queues and starts cancelling its wait (deadline past); a's job ends meanwhile:
        # the thread is granted to b's waiter in the very step its wait times out
        asyncio.get_running_loop().call_soon(pool._release, "a")
        with pytest.raises(NoThread):
            await late
        assert ran == []
        _idle(pool)
        assert await pool.run("c", lambda: "c", None) == "c"  # the thread is free again
        await _settle(pool)
        _idle(pool)
        pool.shutdown()

    _run(scenario())


@pytest.mark.parametrize("deadline", [None, 30.0])
def test_a_waiter_cancelled_in_the_step_it_is_granted_gives_the_thread_back(
    deadline: float | None,
) -> None:
    async def scenario() -> None:
        pool = FairPool(1, 1)
        pool._grant("a")
        ran: list[str] = []
        dl = None if deadline is None else time.monotonic() + deadline
        b = asyncio.create_task(pool.run("b", lambda: ran.append("b"), dl))
        c = asyncio.create_task(pool.run("c", lambda: ran.append("c") or "c", None))
        await _steps()
        assert len(pool._waiting) == 2

        def end_a_then_cancel_b() -> None:
            pool._release("a")  # grants b's waiter
            assert pool.running("b") == 1
            b.cancel()  # the client went away before b resumed

        asyncio.get_running_loop().call_soon(end_a_then_cancel_b)
        try:
            await b
        except asyncio.CancelledError:
            pass  # (3.11's wait_for may instead swallow the cancel and run b's job)
        assert await c == "c"  # the thread b gave back (or freed) went on to c
        await _settle(pool)
        _idle(pool)
        assert ran in (["c"], ["b", "c"])
        pool.shutdown()

    _run(scenario())


def test_cancelled_at_every_step_of_the_wait_nothing_stays_held() -> None:
    async def scenario() -> None:
        for k in range(8):  # cancel the waiter after k loop steps
            pool = FairPool(1, 1)
            gate = threading.Event()
            hold = asyncio.create_task(pool.run("a", lambda g=gate: g.wait(10), None))
            await _steps(2)
            b = asyncio.create_task(pool.run("b", lambda: "b", time.monotonic() + 5))
            await _steps(k)
            if k % 2:
                gate.set()  # a's job may end around the cancel
            await _steps(k % 3)
            b.cancel()
            try:
                await b
            except asyncio.CancelledError:
                pass
            gate.set()
            await hold
            await _settle(pool)
            _idle(pool)
            pool.shutdown()

    _run(scenario())


def test_a_job_keeps_its_thread_after_its_request_is_cancelled() -> None:
    async def scenario() -> None:
        pool = FairPool(2, 1)
        gate, started = threading.Event(), threading.Event()

        def slow() -> str:
            started.set()
            gate.wait(10)
            return "a1"

        a1 = asyncio.create_task(pool.run("a", slow, None))
        while not started.is_set():
            await asyncio.sleep(0.005)
        a1.cancel()  # the client went away while its job ran
        with pytest.raises(asyncio.CancelledError):
            await a1
        assert pool.running("a") == 1  # the thread still runs it: no over-commit
        a2 = asyncio.create_task(pool.run("a", lambda: "a2", None))
        await asyncio.sleep(0.05)
        assert not a2.done()  # a's share is still taken
        assert await pool.run("b", lambda: "b", None) == "b"  # the other thread serves b
        gate.set()
        assert await a2 == "a2"
        await _settle(pool)
        _idle(pool)
        pool.shutdown()

    _run(scenario())


def test_a_job_that_raises_frees_its_thread() -> None:
    async def scenario() -> None:
        pool = FairPool(1, 1)

        def boom() -> None:
            raise ValueError("boom")

        for _ in range(3):
            with pytest.raises(ValueError, match="boom"):
                await pool.run("a", boom, None)
        await _settle(pool)
        _idle(pool)
        assert await pool.run("a", lambda: 1, None) == 1
        await _settle(pool)
        _idle(pool)
        pool.shutdown()

    _run(scenario())


def test_shutdown_with_waiters_ends_their_waits_and_holds_nothing() -> None:
    async def scenario() -> None:
        pool = FairPool(1, 1)
        gate = threading.Event()
        hold = asyncio.create_task(pool.run("a", lambda: gate.wait(10), None))
        await _steps(2)
        waiters = [
            asyncio.create_task(pool.run(w, lambda: "ran", None)) for w in ("a", "b", "b", "c")
        ]
        await _steps()
        pool.shutdown()
        done, pending = await asyncio.wait(waiters, timeout=5)
        assert not pending  # none hangs
        for t in done:
            assert t.cancelled() or isinstance(t.exception(), (asyncio.CancelledError,))
        assert not pool._waiting
        gate.set()
        await hold
        await _settle(pool)
        _idle(pool)

    _run(scenario())


# ----------------------------------------------------------------- fairness
def _order(pool: FairPool, names: list[str]) -> Callable[[], Any]:
    async def go() -> list[str]:
        started: list[str] = []
        gate = threading.Event()
        pool._grant("x")  # every thread held while the waiters queue up
        tasks = [
            asyncio.create_task(pool.run(n[0], lambda n=n: started.append(n), None)) for n in names
        ]
        await _steps()
        gate.set()
        pool._release("x")
        await asyncio.gather(*tasks)
        await _settle(pool)
        _idle(pool)
        pool.shutdown()
        return started

    return go


def test_a_flooding_analyst_does_not_starve_one_with_a_single_request() -> None:
    async def scenario() -> None:
        pool = FairPool(1, 1)
        started = await _order(pool, [f"a{i}" for i in range(10)] + ["b1"])()
        assert started.index("b1") <= 1  # b's one request: right after a's first

    _run(scenario())


def test_equal_holders_take_turns() -> None:
    async def scenario() -> None:
        pool = FairPool(1, 1)
        names = [f"a{i}" for i in range(4)] + [f"b{i}" for i in range(4)] + ["c0", "c1"]
        started = await _order(pool, names)()
        assert started == ["a0", "b0", "c0", "a1", "b1", "c1", "a2", "b2", "a3", "b3"]

    _run(scenario())


def test_random_schedules_keep_the_bounds_and_end_idle() -> None:
    """Random floods with deadlines, cancellations and failing jobs: at no step more jobs
    than threads or than an analyst's share, never a free thread while a waiting analyst
    could take it, and the pool idle at the end."""

    async def trial(seed: int) -> None:
        rnd = random.Random(seed)
        threads = rnd.randint(1, 4)
        share = rnd.randint(1, threads)
        pool = FairPool(threads, share)
        lock, live, bad = threading.Lock(), dict[str, int](), list[Any]()

        def job(who: str, dur: float, fail: bool) -> str:
            with lock:
                live[who] = live.get(who, 0) + 1
                if live[who] > share or sum(live.values()) > threads:
                    bad.append(("over", dict(live)))
            time.sleep(dur)
            with lock:
                live[who] -= 1
            if fail:
                raise ValueError("boom")
            return who

        stop = False

        async def watch() -> None:
            while not stop:
                if pool._busy > threads:
                    bad.append(("busy", pool._busy))
                if pool._busy < threads and any(pool.running(w) < share for w in pool._waiting):
                    bad.append(("idle thread", dict(pool._running)))
                await asyncio.sleep(0)

        watcher = asyncio.create_task(watch())
        tasks = []
        loop = asyncio.get_running_loop()
        for _ in range(rnd.randint(5, 30)):
            who = rnd.choice("abcd")
            dl = None if rnd.random() < 0.3 else time.monotonic() + rnd.choice([0, 1e-3, 1e-2])
            dur, fail = rnd.choice([0, 1e-3, 3e-3]), rnd.random() < 0.2
            t = asyncio.create_task(
                pool.run(who, lambda w=who, d=dur, f=fail: job(w, d, f), dl)  # type: ignore[misc]
            )
            tasks.append(t)
            if rnd.random() < 0.3:
                loop.call_later(rnd.choice([0, 5e-4, 2e-3]), t.cancel)
            if rnd.random() < 0.5:
                await asyncio.sleep(rnd.choice([0, 1e-3]))
        outcomes = await asyncio.gather(*tasks, return_exceptions=True)
        await _settle(pool)
        stop = True
        await watcher
        assert not bad, (seed, bad[:3])
        _idle(pool)
        for o in outcomes:
            assert isinstance(o, (str, NoThread, ValueError, asyncio.CancelledError)), o
        pool.shutdown()

    async def scenario() -> None:
        for seed in range(60):
            await trial(seed)

    _run(scenario())


def test_a_refusal_for_want_of_a_thread_says_truly_whose_threads_were_busy() -> None:
    """The pool full of others' jobs, not this analyst's: the 503 must not blame this
    analyst's own requests (it held none)."""

    async def scenario() -> None:
        pool = FairPool(2, 1)
        pool._grant("a")
        pool._grant("b")
        with pytest.raises(NoThread) as got:
            await pool.run("c", lambda: None, time.monotonic() + 0.01)
        why = str(got.value)
        assert "busy" in why and "held 0" in why, why
        pool._release("a")
        pool._release("b")
        pool._grant("a")
        with pytest.raises(NoThread) as got:
            await pool.run("a", lambda: None, time.monotonic() + 0.01)
        assert "its share (1 at once)" in str(got.value), str(got.value)
        pool._release("a")
        _idle(pool)
        pool.shutdown()

    _run(scenario())


# ----------------------------------------------------------------- the real app
FLOOD = "mdvis < 3"  # eps searches of this predicate are held


_Live = LiveApp


def _wait_for(cond: Any, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not cond() and time.monotonic() < deadline:
        time.sleep(0.02)


@pytest.fixture
def live(tmp_path: Path, request: Any) -> Iterator[_Live]:
    kw = dict(getattr(request, "param", {}))
    kw.setdefault("time_limit", 10.0)  # the app's (a request's deadline) and the service's
    svc = QueryService(
        EngineConfig(epsilon=2.0),
        f"sqlite:///{tmp_path / 'review.db'}",
        digest_key=digest_key(ADMIN_KEY),
        time_limit=kw["time_limit"],
    )
    srv = _Live(svc, **kw)
    try:
        yield srv
    finally:
        srv.close()


@pytest.fixture
def held(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[threading.Event, list[Any]]]:
    """Hold each eps search of ``FLOOD`` until the event is set; list those held."""
    release, entered = threading.Event(), list[Any]()
    original = state_module.plan_candidates

    def hold(history: Any, q: Any, d: Any, *a: Any, **kw: Any) -> Any:
        if q.text == FLOOD:
            entered.append(d)
            release.wait(60)
        return original(history, q, d, *a, **kw)

    monkeypatch.setattr(state_module, "plan_candidates", hold)
    try:
        yield release, entered
    finally:
        release.set()


def _in_thread(fn: Callable[[], Any], out: list[Any]) -> threading.Thread:
    t = threading.Thread(target=lambda: out.append(fn()))
    t.start()
    return t


@pytest.mark.parametrize(
    "live", [{"time_limit": 20.0, "query_threads": 2, "analyst_threads": 1}], indirect=True
)
def test_a_planner_queued_behind_its_analysts_share_cannot_deadlock_another_on_its_key(
    live: _Live, held: tuple[threading.Event, list[Any]]
) -> None:
    """ann's eps search of K1 holds her one thread; her request for K waits for her share
    (it registered no planning of K: that happens on a thread); bob's request for K gets
    the other thread and plans K itself, answered while ann's both wait."""
    release, entered = held
    ann, bob = live.analyst("ann"), live.analyst("bob")
    before = live.budget()
    out: list[Any] = []
    k1 = {"where": FLOOD, "half_width": 7000, "confidence": 0.9}
    k = {"where": "idp = 1", "half_width": 450, "confidence": 0.9}
    threads = [_in_thread(lambda: live.post("/api/quote", k1, ann), out)]
    try:
        _wait_for(lambda: len(entered) == 1)
        threads.append(_in_thread(lambda: live.post("/api/quote", k, ann), out))
        time.sleep(0.3)  # ann's request for K waits for her share
        assert not out
        r = live.post("/api/quote", k, bob, timeout=10)
        assert r.status_code == 200 and r.json()["status"] == "fresh", r.text
        assert not out  # ann's two still wait: her K1 held, her K behind it
    finally:
        release.set()
        for t in threads:
            t.join(60)
    assert [o.status_code for o in out] == [200, 200]
    assert live.budget() == before  # quotes spend nothing


@pytest.mark.parametrize(
    "live", [{"time_limit": 1.0, "query_threads": 2, "analyst_threads": 1}], indirect=True
)
def test_an_analyst_named_admin_does_not_take_the_admins_share_of_quotes(
    live: _Live, held: tuple[threading.Event, list[Any]]
) -> None:
    release, entered = held
    named_admin = live.analyst("admin")
    the_admin = {"Authorization": f"Bearer {ADMIN_KEY}"}
    out: list[Any] = []
    body = {"where": FLOOD, "half_width": 6000, "confidence": 0.9}
    t = _in_thread(lambda: live.post("/api/quote", body, named_admin), out)
    try:
        _wait_for(lambda: len(entered) == 1)
        # a thread is free, and the admin plans nothing: its quote must not wait for the
        # analyst who happens to be called "admin"
        r = live.post(
            "/api/quote", {"where": "idp = 0", "half_width": 800, "confidence": 0.9}, the_admin
        )
        assert r.status_code == 200, r.text
    finally:
        release.set()
        t.join(60)


@pytest.mark.parametrize(
    "live", [{"time_limit": 1.0, "query_threads": 2, "analyst_threads": 1}], indirect=True
)
def test_a_503_for_want_of_a_thread_spends_nothing_and_names_the_right_cause(
    live: _Live, held: tuple[threading.Event, list[Any]]
) -> None:
    release, entered = held
    ann, bob, cyd = live.analyst("ann"), live.analyst("bob"), live.analyst("cyd")
    before = live.budget()
    out: list[Any] = []
    threads = [
        _in_thread(
            lambda w=w, i=i: live.post(  # type: ignore[misc]
                "/api/quote", {"where": FLOOD, "half_width": 6100 + i, "confidence": 0.9}, w
            ),
            out,
        )
        for i, w in enumerate((ann, bob))
    ]
    try:
        _wait_for(lambda: len(entered) == 2)
        # both threads held by others: cyd's query waits past its time limit
        r = live.post(
            "/api/query",
            {"where": "idp = 1", "half_width": 300, "confidence": 0.9},
            cyd,
            timeout=30,
        )
        assert r.status_code == 503, r.text
        detail = r.json()["detail"]
        assert "planning thread" in detail and "nothing spent" in detail, detail
        assert "busy" in detail and "held 0" in detail, detail  # not cyd's own requests
        assert r.headers["Retry-After"] == "1"
        assert len(entered) == 2
    finally:
        release.set()
        for t in threads:
            t.join(60)
    assert live.budget() == before
