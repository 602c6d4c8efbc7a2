"""Group commit (service/commits.py): one transaction for every fresh answer waiting.

In process on a SQLite file. A batch is built by hand from plans made on one state, so
the order is deterministic: each job is checked against the answers committed before it
in the batch (a second answer to the same query must be planned again; an answer to
other cells goes through), charged exactly (a job the budget cannot pay is refused), and
the whole batch is one version step per answer in one transaction.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
import sqlalchemy as sa

from dpbayes.service import EngineConfig
from dpbayes.service import db as service_db
from dpbayes.service.commits import FreshJob, commit_batch, outcome
from dpbayes.service.config import digest_key
from dpbayes.service.state import QueryService

KEY = digest_key("test-admin-key-" + "c" * 20)


def _job(svc: QueryService, where: str, d: float) -> FreshJob:
    snap = svc._current()
    q = svc.make_query(where, None)
    plan = svc._plan(snap, q, d, 0.9).plan
    assert plan.status == "fresh", plan
    after = snap.history.copy()
    index = after.add(q.coefficients, 0.0, plan.epsilon, sensitivity=plan.sensitivity)
    scope = [f"cell:{j}" for j in q.cells]
    return FreshJob(snap, plan, scope, after, index, "ann", svc.cube.true_answer(q))


def _rows(svc: QueryService) -> list[dict]:
    with svc.reader.connect() as con:
        return [dict(r._mapping) for r in con.execute(sa.select(service_db.answers))]


def test_a_batch_commits_checks_and_refuses_in_order(tmp_path: Path) -> None:
    svc = QueryService(EngineConfig(epsilon=1.0), f"sqlite:///{tmp_path / 'c.db'}", digest_key=KEY)
    commits = []
    sa.event.listen(svc.db, "commit", lambda _con: commits.append(1))
    try:
        poor = _job(svc, "health = poor and idp = 1", 20.0)
        again = _job(svc, "health = poor and idp = 1", 20.0)  # the same, on the same state
        other = _job(svc, "health = good and idp = 0", 20.0)  # other cells
        greedy = _job(svc, "health = poor and idp = 1 and year = 1", 20.0)  # > what is left
        version = svc._snap.version
        with svc._write_lock:
            commit_batch(svc, [poor, again, other, greedy])
        assert len(commits) == 1  # one transaction for the batch
        assert all(j.done for j in (poor, again, other, greedy))
        assert outcome(again) is None  # the first answer changed its BLUE: plan again
        assert outcome(poor) is poor and outcome(other) is other
        refusal = outcome(greedy)
        assert refusal.status == "refused" and "budget exceeded" in refusal.reason
        rows = _rows(svc)
        assert [r["query"] for r in rows] == [
            "health = poor and idp = 1",
            "health = good and idp = 0",
        ]
        assert svc._snap.version == version + 2 and len(svc._snap.history) == 2
        # each committed job carries the BLUE right after its own answer
        for job, row in zip((poor, other), rows, strict=True):
            assert job.blue.estimate == pytest.approx(row["noisy_answer"], rel=1e-12)
        spent = svc.accountant.spent[0]
        assert spent == pytest.approx(max(poor.plan.epsilon, other.plan.epsilon))
        # the replanned query is now answered from the history
        r = svc.ask("ann", svc.make_query("health = poor and idp = 1", None), half_width=20.0,
                    confidence=0.9)  # fmt: skip
        assert r.answer.status == "history"
        assert r.answer.estimate == pytest.approx(rows[0]["noisy_answer"], rel=1e-12)
    finally:
        svc.close()


def test_concurrent_fresh_answers_are_all_committed_once(tmp_path: Path) -> None:
    svc = QueryService(EngineConfig(epsilon=50.0), f"sqlite:///{tmp_path / 'm.db'}", digest_key=KEY)
    got = []
    lock = threading.Lock()

    def client(t: int) -> None:
        for y in range(1, 6):
            where = f"health = {('excellent', 'good', 'fair', 'poor')[t % 4]} and idp = {t // 4}"
            q = svc.make_query(f"{where} and year = {y}", None)
            r = svc.ask(f"a{t}", q, half_width=15.0, confidence=0.9)
            with lock:
                got.append(r.answer)

    try:
        threads = [threading.Thread(target=client, args=(t,)) for t in range(8)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        rows = _rows(svc)
        assert len(got) == 40 and all(a.status == "fresh" for a in got)
        assert sorted(r["noisy_answer"] for r in rows) == pytest.approx(
            sorted(a.estimate for a in got), rel=1e-12
        )
        assert svc._snap.version == 40 and svc.budget()["answers"] == 40
    finally:
        svc.close()
