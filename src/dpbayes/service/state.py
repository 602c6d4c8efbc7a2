"""The service's state: the query engine over a database-backed history and ledger.

Privacy argument: every fresh answer is a Laplace release (paper 000 §5) with secure noise;
its spend and the noisy answer are one ``answers`` row, committed in the transaction that
holds the budget lock, before the answer is handed to the HTTP layer. A crash before the
commit loses an answer nobody has seen (and its spend); no answer leaves unrecorded.

Concurrency (see docs/service.md):

- Every request reads the budget row's ``version`` (the number of changes: spends and
  budget changes) without a lock; if another process has written since, the in-memory
  state catches up from the database (the new rows only).
- The in-memory state is a snapshot (history, version, budget total) that is replaced,
  never changed, so requests read it without locks. Free answers and refusals are
  computed and served from it without the write lock or a write transaction.
- A fresh answer is planned on the snapshot (the eps search and its posterior, bounded
  and time-limited, cached per query, requirement and version), then the write lock and
  transaction (SQLite ``BEGIN IMMEDIATE``, PostgreSQL ``SELECT ... FOR UPDATE`` on the
  budget row) are taken only to check that the version is unchanged, charge the
  accountant, draw the noise, insert the row and bump the version. If the version
  changed (another request or process spent), the plan is redone on the new state.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import numpy as np
import sqlalchemy as sa

from dpbayes.answers import AnswerRecord, History, Query
from dpbayes.answers.blue import check_coefficients
from dpbayes.answers.engine import (
    check_record,
    default_noise,
    fresh_reason,
    history_guarantee,
    noise_families,
)
from dpbayes.answers.limits import TimeLimitExceeded, check_time, own_time_limit, time_limit
from dpbayes.answers.planning import (
    Answer,
    Plan,
    carry_over,
    fresh_answer,
    history_answer,
    plan_candidates,
    refused_answer,
)
from dpbayes.answers.pricing import cheapest, fits, fresh_mechanism, noise_of, scope_of
from dpbayes.answers.store import add_record
from dpbayes.privacy.accountant import Accountant, BudgetExceeded
from dpbayes.privacy.guarantee import Guarantee, Neighbours, user_level
from dpbayes.privacy.noise import prepare_secure_noise
from dpbayes.privacy.validation import (
    check_delta,
    check_epsilon,
    check_int,
    check_positive,
    check_probability,
)
from dpbayes.service import db
from dpbayes.service.commits import FreshJob, commit_batch, outcome
from dpbayes.service.config import EngineConfig, counts_hmac
from dpbayes.service.keys import AnalystKeys, check_admin
from dpbayes.service.setup import init_rows, rekey
from dpbayes.service.snapshot import (
    Busy,
    Conflict,
    Reply,
    _density,
    _Planned,
    _Snapshot,
    _spend_of,
    describe_composition,
)

__all__ = ["Busy", "Conflict", "QueryService", "Reply", "check_admin"]

_TOLERANCE = 1e-9  # the accountant's relative slack
_MAX_ATTEMPTS = 8  # plans of one request redone because another answer was committed
_METHOD_ACCURACY = 1e-6
_NUMERICAL_LIMIT = (
    "the service cannot compute this query's error distribution to its accuracy (its "
    "coefficients or the requirement are too extreme); retrying will not help until the "
    "history changes; nothing spent"
)
_CACHE_CELLS = 2**25  # coefficients the plan cache (and the predicate cache) may hold
#: The default cap on the numbers the history stores (:attr:`History.entries`: its
#: answers' non-zero coefficients and its factorisation; 2^25: 256 MiB).
MAX_HISTORY_ENTRIES = 2**25
_TOO_SLOW = (
    "planning this query took longer than the time limit on the current history, with "
    "the whole limit to itself; retrying will not help until the history changes (another "
    "answer is released or the budget changes); nothing spent"
)


class QueryService:
    """The engine of :class:`EngineConfig` with its state in the database at ``db_url``.

    ``digest_key``: the key of the cube's digest (:func:`~dpbayes.service.config.digest_key`
    of the admin key; never stored). ``time_limit``: seconds a query may spend planning
    (``None``: no limit). ``cache_size``: plans kept per history version (fewer on a cube
    of more than 8,192 cells: they hold 2^25 coefficients at most).
    ``max_history_entries``: the most numbers the history may store
    (:attr:`~dpbayes.answers.History.entries`: the answers' non-zero coefficients, and its
    factorisation over the cells they read); a fresh answer beyond it is refused, nothing
    spent (``None``: no cap). Snapshots share the history's storage (O(answers) each).
    """

    def __init__(
        self,
        config: EngineConfig,
        db_url: str,
        *,
        digest_key: bytes,
        time_limit: float | None = 10.0,
        cache_size: int = 4096,
        max_history_entries: int | None = MAX_HISTORY_ENTRIES,
    ) -> None:
        if not isinstance(config, EngineConfig):
            raise TypeError(f"config must be an EngineConfig, got {type(config).__name__}")
        self.config = config
        self.time_limit = None if time_limit is None else check_positive(time_limit, "time_limit")
        self.db = db.make_engine(db_url)
        self.reader = db.make_engine(db_url, writer=False)
        self.postgres = self.db.dialect.name == "postgresql"
        self.cube = config.build_cube()
        prepare_secure_noise()
        mac, key_id = counts_hmac(self.cube, digest_key)
        db.migrate(self.db, rekey_cube=rekey(self.cube, mac, key_id))
        self._mac, self._key_id = mac, key_id
        self._write_lock = threading.Lock()
        self._pending_lock = threading.Lock()
        self._pending: list[FreshJob] = []  # fresh answers waiting for the write lock
        self._cache_lock = threading.Lock()
        self._cache: OrderedDict[tuple[Any, ...], _Planned] = OrderedDict()
        # each cached plan and parsed predicate holds its query's coefficients over every
        # cell: on a big cube, fewer of them (at most _CACHE_CELLS numbers in all)
        self._cache_size = max(1, min(cache_size, _CACHE_CELLS // self.cube.n_cells))
        self.max_history_entries = (
            None
            if max_history_entries is None
            else check_int(max_history_entries, "max_history_entries", minimum=1)
        )
        # plans being computed, per cache key: one planner per key at a time, the other
        # requests for it wait for its result (single flight)
        self._inflight: dict[tuple[Any, ...], tuple[tuple[Any, ...], threading.Event]] = {}
        self._queries: OrderedDict[str, Query] = OrderedDict()  # parsed predicates
        self.keys = AnalystKeys(self.db, self.reader)
        self._stale = False
        k = self.cube.rows_per_user_bound
        self._user: dict[str, Any] = user_level(k, Neighbours.ADD_REMOVE)[1]
        self._sens_factor = float(k or 1)
        self.accountant = Accountant(config.epsilon, config.delta)
        with self.db.begin() as con:
            db.serialise_setup(con)
            switched = init_rows(con, self.config, self.cube, self._mac, self._key_id)
            try:
                self._snap = self._load(con, None)
            except BudgetExceeded:
                if switched is None:
                    # the stored answers cost more than the total under the stored
                    # composition: a pld database holding Laplace answers (recorded before
                    # pld took Gaussian answers only) counts them by basic composition
                    raise ValueError(
                        "the answers in this database cost more than its total budget under "
                        "its composition (a 'pld' database counts Laplace answers by basic "
                        "composition): start with --composition rdp"
                    ) from None
                raise ValueError(
                    f"composition {config.composition!r} would put the budget already spent "
                    f"(under {switched!r}) above the total: start with --composition "
                    f"{switched} or raise the budget first"
                ) from None
            if self._snap.composition == "pld" and config.noise == "laplace":
                # refused inside the transaction: a switch to pld is not recorded
                raise ValueError(
                    "--noise laplace cannot be charged under composition 'pld', which takes "
                    "Gaussian answers only (a PLD budget check is a valid filter for them "
                    "alone): start with --noise gaussian or auto, or --composition rdp or basic"
                )

    # ------------------------------------------------------------------ state
    def _budget_row(self, con: sa.Connection, *, lock: bool) -> Any:
        stmt = sa.select(db.budget).where(db.budget.c.id == 1)
        if lock and self.postgres:
            stmt = stmt.with_for_update()
        return con.execute(stmt).one()

    def _load(self, con: sa.Connection, snap: _Snapshot | None) -> _Snapshot:
        """The state as of the database seen by ``con``: ``snap`` plus the rows after it;
        the history from all rows if there is no ``snap`` or it is stale, the accountant
        from all spends then and when the total budget changed."""
        b = self._budget_row(con, lock=False)
        total = (float(b.total_epsilon), float(b.total_delta))
        composition = str(b.composition)
        fresh_history = snap is None or self._stale
        fresh_accountant = (
            fresh_history or snap is None or (snap.total, snap.composition) != (total, composition)
        )
        after = 0 if fresh_history or snap is None else snap.last_id
        a = db.answers.c
        rows = con.execute(sa.select(db.answers).where(a.id > after).order_by(a.id)).all()
        try:
            if fresh_history:
                hist, last = History.from_cube(self.cube), 0
            else:
                assert snap is not None
                hist, last = snap.history.copy(), snap.last_id
            if fresh_accountant:
                acc = Accountant(*total, composition=composition)
                older = sa.select(a.epsilon, a.delta, a.gaussian_ratio, a.scope, a.query)
                for r in con.execute(older.where(a.id <= after).order_by(a.id)):
                    acc.restore(_spend_of(r))
            else:
                acc = self.accountant
            for r in rows:
                rec = AnswerRecord.from_dict(json.loads(r.record))
                check_record(rec, self.cube)
                acc.restore(_spend_of(r))
                add_record(hist, rec)
                last = int(r.id)
        except BaseException:
            self._stale = True  # the shared accountant may hold part of the new rows
            raise
        self.accountant = acc
        self._stale = False
        return _Snapshot(int(b.version), last, hist, total, composition)

    def _current(self) -> _Snapshot:
        """The snapshot, brought up to date if the database changed (one unlocked read)."""
        version = self._read_version()
        snap = self._snap
        if int(version) == snap.version and not self._stale:
            return snap
        with self._write_lock:  # a commit in this process also updates the snapshot
            snap = self._snap
            if int(version) > snap.version or self._stale:
                with self._consistent_read() as con:
                    snap = self._snap = self._load(con, snap)
            return snap

    def _read_version(self) -> int:
        """The budget row's version: one SELECT on a pooled driver connection (no
        SQLAlchemy transaction; SQLite reads it in autocommit mode, without any lock)."""
        con = self.reader.raw_connection()
        try:
            cur = con.cursor()
            try:
                cur.execute("SELECT version FROM budget WHERE id = 1")
                row = cur.fetchone()
            finally:
                cur.close()
        finally:
            con.close()  # back to the pool
        if row is None:
            raise RuntimeError("the budget row is missing from the database")
        return int(row[0])

    @contextlib.contextmanager
    def _consistent_read(self) -> Iterator[sa.Connection]:
        """A read transaction that sees one state of the database for all its statements
        (SQLite: any transaction in WAL mode; PostgreSQL: REPEATABLE READ). The budget row
        is read before the answers, so a state is never labelled newer than its rows."""
        with self.reader.connect() as con:
            if self.postgres:
                con = con.execution_options(isolation_level="REPEATABLE READ")
            with con.begin():
                yield con

    # ------------------------------------------------------------------ queries
    def make_query(self, where: str | None, coefficients: list[float] | None) -> Query:
        """Validate a predicate or a coefficient vector (nothing is spent)."""
        if (where is None) == (coefficients is None):
            raise ValueError("give exactly one of 'where' (a predicate) or 'coefficients'")
        if where is not None:
            hit = self._queries.get(where)  # parsing a predicate is the costliest step
            if hit is None:
                hit = self.cube.query(where)  # (raises before anything is cached)
                with self._cache_lock:
                    self._queries[where] = hit
                    while len(self._queries) > self._cache_size:
                        self._queries.popitem(last=False)
            return hit
        c = check_coefficients(
            np.asarray(coefficients, dtype=float), self.cube.n_cells, "coefficients"
        )
        return Query(c, "coefficients")

    @staticmethod
    def _key(q: Query, d: float, p: float) -> tuple[Any, ...]:
        return (q.text, hashlib.blake2b(q.coefficients.tobytes(), digest_size=16).digest(), d, p)

    def cached_plan(self, snap: _Snapshot, q: Query, d: float, p: float) -> _Planned | None:
        """The plan for (query, requirement) on ``snap`` if it is known without an eps
        search: cached for this state (a refusal for the numerics or the time limit
        included), or carried over from an earlier state (a BLUE, no error distribution).
        ``None``: it must be planned."""
        key = self._key(q, d, p)
        state = (snap.version, snap.last_id, snap.total)
        with self._cache_lock:
            hit = self._cache.get(key)
            if hit is not None:
                self._cache.move_to_end(key)
        if hit is not None and hit.state == state:
            return hit
        if (
            hit is not None
            and not hit.final
            and hit.state[2] == snap.total
            and hit.state[:2] < state[:2]
        ):
            carried = carry_over(hit.plan, snap.history)
            if carried is not None:
                planned = _Planned(carried, state, hit.density)
                self._remember(key, planned)
                return planned
        return None

    def _plan(self, snap: _Snapshot, q: Query, d: float, p: float) -> _Planned:
        """The plan for (query, requirement) on ``snap``: cached per history version, and
        carried over to a later version when the query's BLUE did not change (the answers
        committed since read other cells or other directions), so the eps search runs
        once per query, requirement and BLUE.

        One request plans a key at a time; others asking for it meanwhile wait for its
        plan (within their own deadline: else 503, retry). The eps search has the whole
        ``time_limit`` from its own start, whatever its request waited before (so time
        spent queueing never cuts it short): a search that runs out of it is refused for
        this state (``_TOO_SLOW``, cached like a numerical refusal), so that asking again
        answers at once instead of redoing it."""
        key = self._key(q, d, p)
        state = (snap.version, snap.last_id, snap.total)
        while True:
            got = self.cached_plan(snap, q, d, p)
            if got is not None:
                return got
            with self._cache_lock:
                running = self._inflight.get(key)
                if running is None or running[0] != state:
                    event = threading.Event()
                    self._inflight[key] = (state, event)
                    break
            # another request plans it: wait (checking this request's deadline), then
            # take its plan from the cache, or plan it here if it remembered none
            while not running[1].wait(timeout=0.05):
                check_time()
        try:
            return self._plan_now(snap, q, d, p, key, state)
        finally:
            with self._cache_lock:
                if self._inflight.get(key, (None, None))[1] is event:
                    del self._inflight[key]
            event.set()

    def _plan_now(
        self,
        snap: _Snapshot,
        q: Query,
        d: float,
        p: float,
        key: tuple[Any, ...],
        state: tuple[int, int, tuple[float, float]],
    ) -> _Planned:
        """The eps search for ``key`` on ``snap`` (see :meth:`_plan`)."""
        total, budget_delta = snap.total
        sens = q.sensitivity * self._sens_factor
        noises = self._noises(budget_delta)
        if not noises:
            why = "the budget has no delta for a Gaussian answer (noise='gaussian'); nothing spent"
            return _Planned(Plan(q, d, p, sens, "refused", reason=why), state)
        own = None if self.time_limit is None else time.monotonic() + self.time_limit
        cpu = time.thread_time()
        try:
            with own_time_limit(self.time_limit):
                plans = plan_candidates(
                    snap.history,
                    q,
                    d,
                    p,
                    sensitivity=sens,
                    accuracy=_METHOD_ACCURACY,
                    max_epsilon=self.config.max_epsilon,
                    cap=total * (1 + _TOLERANCE),
                    cap_reason=f"budget exceeded: the total budget is eps={total:.6g}",
                    noises=noises,
                    delta=budget_delta,
                    min_epsilon=self.config.min_epsilon_fraction * total,
                )
            plan = plans[0]
            if len(plans) > 1:
                plan = cheapest(plans, self.accountant, simulation=False, user=self._user)
        except TimeLimitExceeded:
            if own is None or time.monotonic() < own:  # pragma: no cover - defensive
                raise
            if self.time_limit is not None and time.thread_time() - cpu < 0.5 * self.time_limit:
                # the limit passed while this thread waited for the CPU (other requests'
                # load): not a property of the query and history; 503, remember nothing
                raise
            planned = _Planned(Plan(q, d, p, sens, "refused", reason=_TOO_SLOW), state, final=True)
            self._remember(key, planned)
            return planned
        except (ValueError, ArithmeticError):
            # the arguments were checked: what is left are the engine's numerical limits
            # (an error distribution it cannot compute to its accuracy); refuse, spend
            # nothing, and remember it for this state (planning it again gives the same)
            planned = _Planned(
                Plan(q, d, p, sens, "refused", reason=_NUMERICAL_LIMIT), state, final=True
            )
            self._remember(key, planned)
            return planned
        cap = self.max_history_entries
        if plan.status == "fresh" and cap is not None:
            entries = snap.history.entries_with(q.coefficients)
            if entries > cap:
                plan = replace(
                    plan,
                    status="refused",
                    reason=f"the history of {len(snap.history)} answers would store {entries} "
                    f"numbers with this one, more than the most this server keeps "
                    f"(--max-history-entries {cap}); nothing spent",
                )
        planned = _Planned(plan, state)
        self._remember(key, planned)
        return planned

    def warm_up(self) -> None:
        """Plan one query (the total count, nothing spent or drawn) so that the numerics a
        plan needs are loaded and compiled before the first request."""
        ones = [1.0] * self.cube.n_cells
        self._plan(self._current(), self.make_query(None, ones), 1e6, 0.5)

    def _noises(self, budget_delta: float) -> tuple[str, ...]:
        """The noise families a fresh answer may use under the budget's delta."""
        comp = self._snap.composition
        noise = self.config.noise or default_noise(comp)
        families = noise_families(noise, budget_delta, comp)  # laplace under pld: refused at start
        return families if budget_delta > 0 else tuple(f for f in families if f == "laplace")

    def cost(self, plan: Plan) -> Guarantee:
        """The guarantee a fresh ``plan`` will be charged (what prices it)."""
        return fresh_mechanism(plan, simulation=False, user=self._user)[1]

    def _remember(self, key: tuple[Any, ...], planned: _Planned) -> None:
        with self._cache_lock:
            old = self._cache.get(key)
            if old is None or old.state[:2] <= planned.state[:2]:
                self._cache[key] = planned
                self._cache.move_to_end(key)
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)

    def ask(
        self,
        analyst: str,
        query: Query,
        *,
        half_width: float,
        confidence: float,
        density: bool = False,
        deadline: float | None = None,
        cached_only: bool = False,
    ) -> Reply | None:
        """Answer within +-half_width with probability >= confidence: from the history, with
        one fresh answer (committed before this returns), or a refusal.

        ``deadline`` (``time.monotonic()``): planning stops with TimeLimitExceeded once it
        has passed (default: ``time_limit`` seconds from now); the commit itself is short
        and never cut (an eps search that started has ``time_limit`` of its own: see
        :meth:`_plan`). ``cached_only``: answer only if the plan is known without an eps
        search (:meth:`cached_plan`), else return ``None`` (the HTTP layer serves those on
        threads of their own); never ``None`` otherwise.
        """
        d = check_positive(half_width, "half_width")
        p = check_probability(confidence, "confidence", open_interval=True)
        if deadline is None and self.time_limit is not None:
            deadline = time.monotonic() + self.time_limit
        for _ in range(_MAX_ATTEMPTS):
            with time_limit(None if deadline is None else deadline - time.monotonic()):
                check_time()
                snap = self._current()
                got = (
                    self.cached_plan(snap, query, d, p)
                    if cached_only
                    else self._plan(snap, query, d, p)
                )
                if got is None:
                    return None
                planned = got
                plan = planned.plan
                if density and planned.density is None and plan.status != "refused":
                    if cached_only:
                        return None  # computed on a planning thread of this analyst's share
                    planned.density = _density(plan)
                if plan.status == "history":
                    return self._reply(self._from_history(snap, plan), planned, density)
                if plan.status == "refused":
                    return self._reply(refused_answer(plan), planned, density)
                scope = scope_of(query)
                if not fits(self.accountant, self.cost(plan), scope):
                    return self._reply(self._budget_refusal(plan, scope), planned, density)
                after = snap.history.copy()
                index = after.add(
                    query.coefficients,
                    0.0,
                    plan.epsilon,
                    sensitivity=plan.sensitivity,
                    **noise_of(plan),
                )
            answer = self._commit(snap, plan, scope, after, index, analyst)
            if answer is not None:
                return self._reply(answer, planned, density)
        raise Busy(
            "the ledger changed during each of several attempts to plan this query; nothing "
            "was spent: retry"
        )

    def _reply(self, answer: Answer, planned: _Planned, density: bool) -> Reply:
        acc = self.accountant
        spent, remaining = acc.spent[0], acc.remaining[0]
        dens = None
        if density and planned.density is not None and answer.estimate is not None:
            x, pdf = planned.density
            dens = {"x": [answer.estimate + v for v in x], "pdf": pdf}
        return Reply(answer, remaining, spent, dens)

    def _from_history(self, snap: _Snapshot, plan: Plan) -> Answer:
        n = len(snap.history)
        spent, spent_delta = self.accountant.spent
        g = history_guarantee(
            spent, n, plan.sensitivity, False, self._user,
            delta=spent_delta, n_gaussian=snap.history.noises.count("gaussian"),
        )  # fmt: skip
        return history_answer(plan, g, f"met by the history of {n} answers; nothing spent")

    def _budget_refusal(self, plan: Plan, scope: list[str]) -> Answer:
        try:
            with self.accountant.charge(self.cost(plan), scope=scope):
                raise _Fits  # pragma: no cover - only a concurrent change gets here
        except BudgetExceeded as exc:
            need = f"eps={plan.epsilon:.6g}" + (f", delta={plan.delta:.3g}" if plan.delta else "")
            return refused_answer(plan, f"needs {need} on the cells it reads: {exc}")
        except _Fits:
            return refused_answer(plan, "the budget changed while the query was planned; retry")

    def _commit(
        self,
        snap: _Snapshot,
        plan: Plan,
        scope: list[str],
        after: History,
        index: int,
        analyst: str,
    ) -> Answer | None:
        """Commit one fresh answer (with whatever others are waiting: commits.py); ``None``
        if the state moved on since ``snap`` in a way that changes the plan (the caller
        plans again). Only the commit runs under the write lock: a check of each plan
        against the newer state (a BLUE, no error distribution), the noise, the writes."""
        job = FreshJob(snap, plan, scope, after, index, analyst, self.cube.true_answer(plan.query))
        with self._pending_lock:
            self._pending.append(job)
        with self._write_lock:
            if not job.done:  # else an earlier holder of the lock committed it
                with self._pending_lock:
                    batch, self._pending = self._pending, []
                commit_batch(self, batch)
        res = outcome(job)
        if not isinstance(res, FreshJob):
            return res  # None (plan again) or a refusal
        assert res.guarantee is not None and res.blue is not None
        reason = fresh_reason(
            plan.epsilon,
            plan.sensitivity,
            self._user,
            self.cube.rows_per_user_bound,
            **noise_of(plan),
        ) + (f"; {plan.choice}" if plan.choice else "")
        return fresh_answer(
            plan, None, res.guarantee, reason, blue=res.blue, accuracy=_METHOD_ACCURACY
        )

    # ------------------------------------------------------------------ reading
    def budget(self) -> dict[str, Any]:
        snap = self._current()
        acc = self.accountant
        eps, dlt = acc.spent
        reps, rdlt = acc.remaining
        return {
            "total": {"epsilon": acc.total[0], "delta": acc.total[1]},
            "spent": {"epsilon": eps, "delta": dlt},
            "remaining": {"epsilon": reps, "delta": rdlt},
            "answers": len(snap.history),
            "composition": describe_composition(acc.composition, acc.total[1]),
            "accounting": acc.composition,
        }

    def history(self, *, offset: int = 0, limit: int = 100) -> list[dict[str, Any]]:
        stmt = (
            sa.select(
                db.answers.c.id,
                db.answers.c.query,
                db.answers.c.noisy_answer,
                db.answers.c.epsilon,
                db.answers.c.analyst,
                db.answers.c.created,
            )
            .order_by(db.answers.c.id)
            .offset(offset)
            .limit(limit)
        )
        with self.reader.connect() as con:
            return [dict(r._mapping) for r in con.execute(stmt)]

    def schema(self) -> dict[str, Any]:
        attrs = []
        for ax in self.cube.axes:
            kind = "bins" if ax.bins is not None else "categories"
            item: dict[str, Any] = {"name": ax.name, "kind": kind, "values": list(ax.labels)}
            if ax.bins is not None:
                item["edges"] = [e if np.isfinite(e) else str(e) for e in ax.bins.edges]
            attrs.append(item)
        unit = self.config.privacy_unit
        k = None if unit is None else unit["max_rows_per_user"]
        relation = user_level(k, Neighbours.ADD_REMOVE)[1].get(
            "neighbouring_relation", "add/remove one record"
        )
        privacy: dict[str, Any] = {
            "unit": "record" if unit is None else "user",
            "neighbouring_relation": relation,
            **(unit or {}),
        }
        return {"attributes": attrs, "n_cells": self.cube.n_cells, "privacy_unit": privacy}

    # ------------------------------------------------------------------ admin
    def set_budget(self, epsilon: float, delta: float) -> dict[str, Any]:
        eps, dlt = check_epsilon(epsilon, "epsilon"), check_delta(delta, "delta")
        with self._write_lock:
            try:
                with self.db.begin() as con:
                    b = self._budget_row(con, lock=True)
                    if int(b.version) != self._snap.version:
                        self._snap = self._load(con, self._snap)
                    spent = self.accountant.spent
                    if eps < spent[0] or dlt < spent[1]:
                        raise Conflict(
                            f"epsilon={eps:g}, delta={dlt:g} is below what is already spent "
                            f"(eps={spent[0]:.6g}, delta={spent[1]:.3g})"
                        )
                    self._check_total(eps, dlt)
                    con.execute(
                        db.budget.update()
                        .where(db.budget.c.id == 1)
                        .values(
                            total_epsilon=eps,
                            total_delta=dlt,
                            version=db.budget.c.version + 1,
                        )
                    )
            except Conflict:
                raise
            except BaseException:
                self._stale = True
                raise
        return self.budget()

    def _check_total(self, eps: float, dlt: float) -> None:
        """Conflict unless the service can run on the total (eps, dlt): the accountant the
        next reload builds from it, with the spends restored (``rdp`` needs delta > 0, and
        a tight composition's spent value depends on the total's delta), and Gaussian
        answers need delta > 0. Checked before the total is written: a total the reload
        refuses left every request failing, and a restart too."""
        if self.config.noise == "gaussian" and dlt == 0:
            raise Conflict(
                "delta=0 leaves this server's Gaussian answers (--noise gaussian) without a "
                "guarantee; give delta > 0"
            )
        try:
            trial = Accountant(eps, dlt, composition=self._snap.composition)
            for spend in self.accountant.spends:
                trial.restore(spend)
            spent = trial.spent
        except ValueError as e:
            raise Conflict(f"epsilon={eps:g}, delta={dlt:g}: {e}") from None
        if not (spent[0] <= eps * (1 + 1e-9) and spent[1] <= dlt * (1 + 1e-9)):
            raise Conflict(
                f"epsilon={eps:g}, delta={dlt:g} is below what is already spent under this "
                f"total (eps={spent[0]:.6g}, delta={spent[1]:.3g})"
            )

    def add_analyst(self, name: str) -> str:
        """Create an analyst; returns the API key (shown once, stored as a salted hash)."""
        return self.keys.add(name, Conflict)

    def analyst(self, key: str | None) -> str | None:
        """The analyst's name for a valid API key, else None (constant-time comparison)."""
        return self.keys.name(key)

    def close(self) -> None:
        self.db.dispose()
        self.reader.dispose()


class _Fits(Exception):
    """Internal: a spend that was about to be refused fits after all."""
