"""Another analyst's load (a review): a time limit that passes while the eps search waits
for the CPU is a 503 (retry), not a refusal remembered for the history; and a density on
a known plan is not computed on the shared lane of cached answers."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dpbayes.answers.limits import TimeLimitExceeded, check_time
from dpbayes.service import EngineConfig
from dpbayes.service import state as state_module
from dpbayes.service.config import digest_key
from dpbayes.service.state import QueryService

from conftest import ADMIN_KEY

ASK = {"half_width": 40.0, "confidence": 0.9}


@pytest.fixture
def svc(tmp_path: Path) -> Iterator[QueryService]:
    s = QueryService(
        EngineConfig(epsilon=2.0),
        f"sqlite:///{tmp_path / 'load.db'}",
        digest_key=digest_key(ADMIN_KEY),
        time_limit=0.5,
    )
    try:
        yield s
    finally:
        s.close()


def _search_that(kind: str, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The first eps search waits out its limit (``"waits"``: asleep, as behind other
    requests' CPU load) or spends it computing (``"computes"``); later ones run as is."""
    original, calls = state_module.plan_candidates, []

    def search(*a: Any, **kw: Any) -> Any:
        calls.append(1)
        if len(calls) == 1:
            if kind == "waits":
                time.sleep(0.6)
            else:  # 0.6 s of this thread's CPU time (more than the limit, on any load)
                end = time.thread_time() + 0.6
                while time.thread_time() < end:
                    sum(i * i for i in range(20_000))
            check_time()
        return original(*a, **kw)

    monkeypatch.setattr(state_module, "plan_candidates", search)
    return calls


def test_a_limit_passed_while_waiting_for_the_cpu_is_a_retry_not_a_refusal(
    svc: QueryService, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The refusal was remembered as final ("retrying will not help until the history
    changes"): one analyst's flood denied another's query until the next release."""
    calls = _search_that("waits", monkeypatch)
    q = svc.make_query("health = poor", None)
    spent = svc.accountant.spent
    with pytest.raises(TimeLimitExceeded):
        svc.ask("bob", q, **ASK)
    assert svc.accountant.spent == spent
    r = svc.ask("bob", q, **ASK)  # planned again, now that the load is gone
    assert r is not None and r.answer.status == "fresh", r.answer.reason
    assert len(calls) == 2


def test_a_search_that_spends_its_limit_computing_is_refused_and_remembered(
    svc: QueryService, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _search_that("computes", monkeypatch)
    q = svc.make_query("health = poor", None)
    r = svc.ask("bob", q, **ASK)
    assert r is not None and r.answer.status == "refused"
    assert "took longer than the time limit" in (r.answer.reason or "")
    again = svc.ask("bob", q, **ASK)
    assert again is not None and again.answer.status == "refused" and len(calls) == 1


def test_a_density_on_a_known_plan_is_not_computed_on_the_lane_of_cached_answers(
    svc: QueryService,
) -> None:
    """The density (0.3-1.1 s) was computed on the shared threads that serve cached
    answers, first come first served: a burst of them stalled every analyst's query."""
    q = svc.make_query("health = poor", None)
    first = svc.ask("ann", q, **ASK)
    assert first is not None and first.answer.status == "fresh"
    known = svc.ask("ann", q, **ASK)  # planned on the new history, without a density
    assert known is not None and known.answer.status == "history" and known.density is None
    assert svc.ask("ann", q, **ASK, cached_only=True) is not None
    assert svc.ask("ann", q, **ASK, density=True, cached_only=True) is None
    r = svc.ask("ann", q, **ASK, density=True)  # on the analyst's planning share
    assert r is not None and r.answer.status == "history" and r.density is not None
    assert svc.ask("ann", q, **ASK, density=True, cached_only=True) is not None
