"""The service's state: the query engine over a database-backed history and ledger.

Privacy argument: every fresh answer is a Laplace release by the engine (paper 000 §5);
its spend and the noisy answer are one ``answers`` row, committed in the same transaction
that holds the budget lock, before the answer is handed to the HTTP layer. A crash before
the commit loses an answer nobody has seen (and its spend); no answer leaves unrecorded.
Concurrency: one process-wide lock around check + draw + commit, plus the database lock
(SQLite ``BEGIN IMMEDIATE``, PostgreSQL ``SELECT ... FOR UPDATE`` on the budget row) for
several processes on one database; ``budget.version`` counts the spends, and a process
whose in-memory engine is behind rebuilds it from the database before charging.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import threading
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import sqlalchemy as sa

from dpbayes.answers import Answer, AnswerRecord, Query, QueryEngine
from dpbayes.answers.blue import check_coefficients
from dpbayes.privacy.accountant import Accountant
from dpbayes.privacy.guarantee import Neighbours, user_level
from dpbayes.privacy.validation import check_delta, check_epsilon
from dpbayes.service import db
from dpbayes.service.config import EngineConfig, counts_digest, describe_unit

__all__ = ["Conflict", "QueryService", "Reply", "check_admin"]

_KEY_PREFIX = "dpb"


class Conflict(ValueError):
    """A well-formed request the current state refuses (budget, duplicate name)."""


@dataclass(frozen=True)
class Reply:
    answer: Answer
    remaining_epsilon: float
    spent_epsilon: float


class _TxStore:
    """HistoryStore whose ``append`` writes into the transaction the service holds open."""

    def __init__(self, records: list[AnswerRecord]) -> None:
        self._records = records
        self.con: sa.Connection | None = None
        self.analyst = ""
        self.appended = 0

    def load(self) -> list[AnswerRecord]:
        return list(self._records)

    def append(self, record: AnswerRecord) -> None:
        if self.con is None:
            raise RuntimeError("answers can only be appended inside a service transaction")
        self.con.execute(
            db.answers.insert().values(
                record=json.dumps(record.to_dict()),
                epsilon=record.epsilon,
                scope=json.dumps([f"cell:{j}" for j in record.cells]),
                analyst=self.analyst,
                query=record.label,
                noisy_answer=record.noisy_answer,
                created=record.time or time.time(),
            )
        )
        self.appended += 1


def _unit_flags(unit: dict[str, Any] | None) -> str:
    if unit is None:
        return "--record-level"
    return f"--user-column {unit['user_column']} --max-rows-per-user {unit['max_rows_per_user']}"


def _digest(salt: str, secret: str) -> str:
    return hashlib.sha256(f"{salt}:{secret}".encode()).hexdigest()


class QueryService:
    """The engine of :class:`EngineConfig` with its state in the database at ``db_url``."""

    def __init__(self, config: EngineConfig, db_url: str) -> None:
        if not isinstance(config, EngineConfig):
            raise TypeError(f"config must be an EngineConfig, got {type(config).__name__}")
        self.config = config
        self.db = db.make_engine(db_url)
        self.postgres = self.db.dialect.name == "postgresql"
        db.migrate(self.db)
        self.cube = config.build_cube()
        self._lock = threading.Lock()
        self._keys: dict[str, tuple[str, str, str]] = {}
        self._stale = True
        self._version = -1
        with self.db.begin() as con:
            self._init_rows(con)
            self._rebuild(con)

    # ------------------------------------------------------------------ state
    def _init_rows(self, con: sa.Connection) -> None:
        spec = json.dumps(self.config.spec(), sort_keys=True)
        digest = counts_digest(self.cube)
        row = con.execute(sa.select(db.cube)).first()
        if row is None:
            con.execute(
                db.cube.insert().values(
                    id=1, spec=spec, counts_sha256=digest, n_cells=self.cube.n_cells
                )
            )
        elif (old := json.loads(row.spec).get("privacy_unit")) != self.config.privacy_unit:
            raise ValueError(
                f"the database's cube protects {describe_unit(old)}, this start asks for "
                f"{describe_unit(self.config.privacy_unit)}: its history was released for the "
                f"other unit; restart with {_unit_flags(old)} or use a new --db"
            )
        elif row.spec != spec or row.counts_sha256 != digest:
            raise ValueError(
                "the database holds a different cube (data or attributes changed); its "
                "history would not match: use a new --db or the original data"
            )
        if con.execute(sa.select(db.budget)).first() is None:
            con.execute(
                db.budget.insert().values(
                    id=1,
                    total_epsilon=self.config.epsilon,
                    total_delta=self.config.delta,
                    version=0,
                )
            )

    def _lock_budget(self, con: sa.Connection) -> Any:
        stmt = sa.select(db.budget).where(db.budget.c.id == 1)
        if self.postgres:
            stmt = stmt.with_for_update()
        return con.execute(stmt).one()

    def _rebuild(self, con: sa.Connection) -> None:
        """Engine, accountant and history from the database (start, restart, other writer)."""
        b = self._lock_budget(con)
        acc = Accountant(b.total_epsilon, b.total_delta)
        records = []
        for r in con.execute(sa.select(db.answers).order_by(db.answers.c.id)):
            rec = AnswerRecord.from_dict(json.loads(r.record))
            acc.spend(r.epsilon, scope=json.loads(r.scope), label=r.query)
            records.append(rec)
        self.store = _TxStore(records)
        self.engine = QueryEngine(
            self.cube,
            accountant=acc,
            store=self.store,
            rng=self.config.seed,
            method=self.config.method,
            max_epsilon=self.config.max_epsilon,
        )
        self._version = int(b.version)
        self._stale = False

    def _sync(self, con: sa.Connection) -> Any:
        b = self._lock_budget(con)
        if self._stale or int(b.version) != self._version:
            self._rebuild(con)
        return b

    # ------------------------------------------------------------------ queries
    def make_query(self, where: str | None, coefficients: list[float] | None) -> Query:
        """Validate a predicate or a coefficient vector (nothing is spent)."""
        if (where is None) == (coefficients is None):
            raise ValueError("give exactly one of 'where' (a predicate) or 'coefficients'")
        if where is not None:
            return self.cube.query(where)
        c = check_coefficients(np.asarray(coefficients, dtype=float), self.cube.n_cells, "query")
        if not np.any(c):
            raise ValueError("coefficients: the query reads no cell (all zero)")
        return Query(c, "coefficients")

    def ask(self, analyst: str, query: Query, *, half_width: float, confidence: float) -> Reply:
        """Answer with the engine; a fresh answer is committed before this returns."""
        with self._lock:
            try:
                with self.db.begin() as con:
                    self._sync(con)
                    self.store.con, self.store.analyst, self.store.appended = con, analyst, 0
                    ans = self.engine.ask(query, half_width=half_width, confidence=confidence)
                    if ans.status == "fresh":
                        if self.store.appended != 1:
                            raise RuntimeError("a fresh answer was not stored exactly once")
                        con.execute(
                            db.budget.update()
                            .where(db.budget.c.id == 1)
                            .values(version=db.budget.c.version + 1)
                        )
                    elif self.store.appended:
                        raise RuntimeError("an answer was stored without being fresh")
                if ans.status == "fresh":
                    self._version += 1
            except BaseException:
                self._stale = True  # in-memory state may be ahead of the database
                raise
            finally:
                self.store.con = None
            spent, _ = self.engine.accountant.spent
            return Reply(ans, self.engine.accountant.remaining[0], spent)

    # ------------------------------------------------------------------ reading
    def budget(self) -> dict[str, Any]:
        with self._lock, self.db.begin() as con:
            self._sync(con)
            acc = self.engine.accountant
            eps, dlt = acc.spent
            reps, rdlt = acc.remaining
            return {
                "total": {"epsilon": acc.total[0], "delta": acc.total[1]},
                "spent": {"epsilon": eps, "delta": dlt},
                "remaining": {"epsilon": reps, "delta": rdlt},
                "answers": len(self.engine.history),
                "composition": "sequential within a cell, parallel across disjoint cells "
                "(paper 000 Thms 5.1-5.2)",
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
        with self.db.connect() as con:
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
        with self._lock:
            try:
                with self.db.begin() as con:
                    self._sync(con)
                    spent = self.engine.accountant.spent
                    if eps < spent[0] or dlt < spent[1]:
                        raise Conflict(
                            f"epsilon={eps:g}, delta={dlt:g} is below what is already spent "
                            f"(eps={spent[0]:.6g}, delta={spent[1]:.3g})"
                        )
                    con.execute(
                        db.budget.update()
                        .where(db.budget.c.id == 1)
                        .values(
                            total_epsilon=eps,
                            total_delta=dlt,
                            version=db.budget.c.version + 1,
                        )
                    )
            finally:
                self._stale = True
        return self.budget()

    def add_analyst(self, name: str) -> str:
        """Create an analyst; returns the API key (shown once, stored as a salted hash)."""
        if not isinstance(name, str) or not name.strip() or len(name) > 100:
            raise ValueError("name must be a non-empty string of at most 100 characters")
        key_id, salt = secrets.token_hex(8), secrets.token_hex(16)
        secret = secrets.token_urlsafe(32)
        with self.db.begin() as con:
            if con.execute(sa.select(db.analysts).where(db.analysts.c.name == name)).first():
                raise Conflict(f"an analyst named {name!r} exists already")
            con.execute(
                db.analysts.insert().values(
                    name=name,
                    key_id=key_id,
                    salt=salt,
                    key_sha256=_digest(salt, secret),
                    created=time.time(),
                )
            )
        return f"{_KEY_PREFIX}_{key_id}_{secret}"

    def analyst(self, key: str | None) -> str | None:
        """The analyst's name for a valid API key, else None (constant-time comparison)."""
        if not key or not key.startswith(_KEY_PREFIX + "_") or len(key) > 200:
            return None
        key_id, _, secret = key[len(_KEY_PREFIX) + 1 :].partition("_")
        entry = self._keys.get(key_id)
        if entry is None:
            with self.db.connect() as con:
                r = con.execute(
                    sa.select(db.analysts).where(db.analysts.c.key_id == key_id)
                ).first()
            if r is None:
                return None
            entry = (r.name, r.salt, r.key_sha256)
            self._keys[key_id] = entry
        name, salt, digest = entry
        return name if hmac.compare_digest(_digest(salt, secret), digest) else None

    def close(self) -> None:
        self.db.dispose()


def check_admin(given: str | None, expected_sha256: str) -> bool:
    if not given:
        return False
    return hmac.compare_digest(hashlib.sha256(given.encode()).hexdigest(), expected_sha256)
