"""Committing fresh answers: one transaction (one fsync) for all answers waiting to commit.

A request whose plan needs a fresh answer queues a :class:`FreshJob` and takes the write
lock; whoever holds the lock commits every queued job in one transaction (group commit,
"flat combining": no thread of its own), so a burst of fresh answers costs one fsync, not
one each. Each job is checked against the state left by the jobs before it (its plan
must still hold: the query's BLUE unchanged), charged to the accountant (exact under the
lock), given its noise, inserted; the version is bumped once per answer. Privacy: as
before, an answer's spend and value are one row, committed before the answer is handed
back; a job whose plan no longer holds draws nothing and is planned again by its owner.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import sqlalchemy as sa

from dpbayes.answers import AnswerRecord, History
from dpbayes.answers.blue import BLUE
from dpbayes.answers.planning import Answer, Plan, still_valid
from dpbayes.answers.pricing import fits, fresh_mechanism, noise_of
from dpbayes.privacy.guarantee import Guarantee
from dpbayes.service import db
from dpbayes.service.snapshot import _Snapshot

if TYPE_CHECKING:
    from dpbayes.service.state import QueryService

__all__ = ["FreshJob", "commit_batch"]


@dataclass
class FreshJob:
    """One fresh answer waiting to be committed (made by its request's thread)."""

    snap: _Snapshot  # the state the plan was made on
    plan: Plan
    scope: list[str]
    after: History  # snap's history plus this answer's row (its value still 0)
    index: int  # that row
    analyst: str
    true_answer: float
    done: bool = False
    replan: bool = False  # the plan no longer holds: nothing drawn, plan again
    refusal: Answer | None = None
    blue: BLUE | None = None  # the query's BLUE right after its own answer
    guarantee: Guarantee | None = None
    error: BaseException | None = None


def _release(svc: QueryService, job: FreshJob, con: sa.Connection) -> tuple[float, int]:
    """Charge, draw, insert: the answer's value and row id (in ``con``'s transaction)."""
    plan, q = job.plan, job.plan.query
    mech, cost = fresh_mechanism(plan, simulation=False, user=svc._user)
    with svc.accountant.charge(cost, scope=job.scope, label=q.text[:80]) as spend:
        noisy = mech.release(job.true_answer)  # secure noise: the service never seeds
        y = float(np.asarray(noisy.value))
        g = replace(noisy.guarantee, details={**noisy.guarantee.details, **svc._user})
        rec = AnswerRecord.from_dense(
            q.coefficients,
            noisy_answer=y,
            epsilon=plan.epsilon,
            sensitivity=plan.sensitivity,
            label=q.text,
            guarantee=g.to_dict(),
            time=time.time(),
            **noise_of(plan),
        )
        key = con.execute(
            db.answers.insert().values(
                record=json.dumps(rec.to_dict()),
                epsilon=plan.epsilon,
                scope=json.dumps(job.scope),
                analyst=job.analyst,
                query=q.text,
                noisy_answer=y,
                created=rec.time,
                delta=spend.delta,
                gaussian_ratio=spend.gaussian_ratio,
            )
        ).inserted_primary_key
    assert key is not None
    job.guarantee = g
    return y, int(key[0])


def commit_batch(svc: QueryService, batch: list[FreshJob]) -> None:
    """Commit ``batch`` in one transaction; called with ``svc``'s write lock held.

    Every job ends ``done``: committed (``blue``, ``guarantee``), refused (``refusal``),
    to be planned again (``replan``) or failed (``error``: then nothing of the batch was
    committed, and the in-memory state is marked stale).
    """
    committed: list[FreshJob] = []
    try:
        with svc.db.begin() as con:
            cur = svc._snap
            b = svc._budget_row(con, lock=True)
            if int(b.version) != cur.version:  # another process wrote
                cur = svc._snap = svc._load(con, cur)
            hist: History | None = None  # the history with this batch's answers so far
            last_id = cur.last_id
            for job in batch:
                plan = job.plan
                prebuilt = hist is None and job.snap is cur  # planned on this very state
                if not prebuilt:
                    # Answers were added since the plan: usually to other queries, which
                    # leave this query's BLUE (hence the plan) unchanged.
                    base = cur.history if hist is None else hist
                    if job.snap.total != cur.total or not still_valid(plan, base):
                        job.replan = True
                        continue
                if not fits(svc.accountant, svc.cost(plan), job.scope):
                    job.refusal = svc._budget_refusal(plan, job.scope)
                    continue
                if prebuilt:
                    hist, index = job.after, job.index
                else:
                    if hist is None:
                        hist = cur.history.copy()
                    index = hist.add(
                        plan.query.coefficients,
                        0.0,
                        plan.epsilon,
                        sensitivity=plan.sensitivity,
                        **noise_of(plan),
                    )
                y, last_id = _release(svc, job, con)
                hist.set_noisy_answer(index, y)
                job.blue = hist.blue(plan.query.coefficients)
                committed.append(job)
            if committed:
                con.execute(
                    db.budget.update()
                    .where(db.budget.c.id == 1)
                    .values(version=db.budget.c.version + len(committed))
                )
    except BaseException as exc:
        svc._stale = True  # the accountant may be ahead of the database
        for job in batch:
            job.error, job.done = exc, True
        raise
    if committed:
        assert hist is not None
        svc._snap = _Snapshot(
            cur.version + len(committed), last_id, hist, cur.total, cur.composition
        )
    for job in batch:
        job.done = True


def outcome(job: FreshJob) -> Any:
    """What the job's owner gets: None (plan again), a refusal, or the committed job."""
    if job.error is not None:
        raise job.error
    if job.replan:
        return None
    if job.refusal is not None:
        return job.refusal
    return job
