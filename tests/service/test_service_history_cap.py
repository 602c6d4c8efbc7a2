"""The service's history: snapshots share its storage, the cap counts what it stores.

Each fresh request and each reload takes a copy of the history; it used to copy a dense
row over every cell per answer (answers x cells numbers), and the cap on it counted
answers x cells. Now copies share the rows, and the cap counts the numbers stored.
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

from dpbayes.service import EngineConfig
from dpbayes.service.config import digest_key
from dpbayes.service.state import MAX_HISTORY_ENTRIES, QueryService

from conftest import ADMIN_KEY

ASK = {"half_width": 40.0, "confidence": 0.9}
WHERE = ("health = poor", "health = good", "idp = 1 and year = 1", "year = 2", "idp = 0")


def _svc(tmp_path: Path, name: str = "h.db", **kw: object) -> QueryService:
    return QueryService(
        EngineConfig(epsilon=20.0),
        f"sqlite:///{tmp_path / name}",
        digest_key=digest_key(ADMIN_KEY),
        **kw,  # type: ignore[arg-type]
    )


def test_a_restart_and_the_running_service_agree_on_every_answer(tmp_path: Path) -> None:
    """The in-memory history (grown by snapshots that share storage, concurrent fresh
    answers included) gives the history that a restart rebuilds from the database."""
    svc = _svc(tmp_path)
    try:
        cells = [svc.make_query(None, list(np.eye(200)[j])) for j in (3, 50, 120, 199)]
        queries = [svc.make_query(w, None) for w in WHERE] + cells
        errors: list[BaseException] = []

        def ask(q: object) -> None:
            try:
                svc.ask("ann", q, **ASK)  # type: ignore[arg-type]
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        threads = [threading.Thread(target=ask, args=(q,)) for q in queries]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors
        live = svc._current().history
        assert len(live) >= len(queries)
        again = _svc(tmp_path)
        try:
            loaded = again._current().history
            assert (len(loaded), loaded.rank) == (len(live), live.rank)
            np.testing.assert_array_equal(loaded.answers, live.answers)
            both = queries[0].coefficients + queries[1].coefficients
            for c in [q.coefficients for q in queries] + [both]:
                a, b = live.blue(c), loaded.blue(c)
                assert a.estimate == pytest.approx(b.estimate, rel=1e-12)
                assert a.variance == pytest.approx(b.variance, rel=1e-12)
        finally:
            again.close()
    finally:
        svc.close()


def test_the_cap_counts_what_the_history_stores_not_answers_times_cells(
    tmp_path: Path,
) -> None:
    """Single cells of a 200-cell cube store a few numbers each: 25 of them fit under a
    cap of 4,000 that answers x cells reached after 20 answers."""
    svc = _svc(tmp_path, max_history_entries=20 * 200)
    try:
        for j in range(25):
            q = svc.make_query(None, list(np.eye(200)[j * 7]))
            r = svc.ask("ann", q, **ASK)
            assert r is not None and r.answer.status == "fresh", r
        hist = svc._current().history
        assert len(hist) == 25 and hist.entries <= 20 * 200
        # the total count reads every cell: its answer would store more than the cap
        spent = svc.accountant.spent
        r = svc.ask("ann", svc.make_query(None, [1.0] * 200), **{**ASK, "half_width": 5.0})
        assert r is not None and r.answer.status == "refused"
        assert "the most this server keeps" in r.answer.reason
        assert "--max-history-entries 4000" in r.answer.reason
        assert "\n" not in r.answer.reason and svc.accountant.spent == spent
    finally:
        svc.close()


@pytest.mark.parametrize("bad", [0, -3, 2.5, "10"])
def test_the_cap_must_be_a_positive_whole_number(tmp_path: Path, bad: object) -> None:
    with pytest.raises((ValueError, TypeError), match="max_history_entries"):
        _svc(tmp_path, max_history_entries=bad)


def test_no_cap_and_the_default(tmp_path: Path) -> None:
    svc = _svc(tmp_path, max_history_entries=None)
    try:
        assert svc.max_history_entries is None
    finally:
        svc.close()
    svc = _svc(tmp_path, "d.db")
    try:
        assert svc.max_history_entries == MAX_HISTORY_ENTRIES
    finally:
        svc.close()


def test_the_plan_cache_holds_fewer_plans_on_a_big_cube(tmp_path: Path) -> None:
    """Each cached plan (and parsed predicate) holds its query's coefficients over every
    cell: 4,096 of them on a 50,000-cell cube were 1.6 GB."""
    data = tmp_path / "d.csv"
    data.write_text("a,b\n" + "".join(f"{i % 200 + 0.5},{i % 250 + 0.5}\n" for i in range(500)))
    cfg = EngineConfig(
        data=str(data),
        attributes={"a": {"bins": list(range(201))}, "b": {"bins": list(range(251))}},
        epsilon=1.0,
    )
    svc = QueryService(cfg, f"sqlite:///{tmp_path / 'big.db'}", digest_key=digest_key(ADMIN_KEY))
    try:
        assert svc.cube.n_cells == 50_000
        assert svc._cache_size == 2**25 // 50_000
    finally:
        svc.close()
    small = _svc(tmp_path, "small.db")
    try:
        assert small._cache_size == 4096
    finally:
        small.close()
