"""The utility-driven query engine of paper 000 §5.

Each query comes with a requirement: the true answer must lie within +-d of the returned
estimate with probability >= p (a credible interval of half-width d at level p, under the
paper's uninformative prior). The engine

1. answers from the history (BLUE + exact error distribution) when that already meets
   the requirement: nothing is spent;
2. otherwise finds the smallest eps for one fresh Laplace answer of the query such that
   the BLUE of the history plus that answer meets it (bisection on the exact confidence;
   planning.py: pure, bounded, no noise drawn);
3. checks the budget (sequential composition; parallel composition over disjoint cells,
   Thms 5.1-5.2: each spend is scoped to the cells its query reads), then releases the
   noisy answer through :class:`~dpbayes.privacy.LaplaceMechanism` (secure noise unless an
   ``rng`` is given for simulation), or refuses with the reason.

Neighbouring relation: add/remove one record, which changes one cell by one (Lemma 2.1).
On a cube bounded to k records per person (``Cube.rows_per_user_bound``) it is add/remove
one person (<= k records, ||x - x'||_1 <= k): every sensitivity is k times Lemma 2.1's and
the guarantees say so (``details["neighbouring_relation"]``).
The spend is recorded (ledger file) before the noise is seen, and the noisy answer
(history store) before the answer is returned.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from dpbayes.answers.blue import History, check_coefficients
from dpbayes.answers.credible import SUPPORTS, Posterior
from dpbayes.answers.cube import Cube
from dpbayes.answers.error_distribution import METHODS, LaplaceSum
from dpbayes.answers.planning import (
    Answer,
    Plan,
    combined_error,
    fresh_answer,
    history_answer,
    plan_answer,
    refused_answer,
)
from dpbayes.answers.queries import Query
from dpbayes.answers.store import AnswerRecord, HistoryStore, JsonlStore, MemoryStore
from dpbayes.privacy.accountant import Accountant, BudgetExceeded
from dpbayes.privacy.guarantee import Guarantee, Neighbours, user_level
from dpbayes.privacy.mechanisms import LaplaceMechanism
from dpbayes.privacy.validation import check_epsilon, check_positive, check_probability, check_rng

__all__ = ["Answer", "QueryEngine", "budget_cap", "history_guarantee"]

_TOLERANCE = 1e-9  # the accountant's relative slack


def _unit(rows_per_user: Any) -> str:
    return "record" if rows_per_user is None else f"user (<= {rows_per_user} rows)"


def budget_cap(accountant: Accountant) -> tuple[float, str]:
    """The largest eps one fresh answer could be charged, and the refusal reason above it."""
    total = accountant.total[0]
    return total * (1 + _TOLERANCE), f"budget exceeded: the total budget is eps={total:.6g}"


def history_guarantee(
    spent: float, n_answers: int, sensitivity: float, simulated: bool, user: dict[str, Any]
) -> Guarantee:
    """What an answer from the history promises: the ledger's total so far, nothing new."""
    return Guarantee(
        epsilon=max(spent, 1e-300),
        delta=0.0,
        neighbours=Neighbours.ADD_REMOVE,
        mechanism=f"post-processing (BLUE) of {n_answers} Laplace answers",
        sensitivity=sensitivity,
        simulation=simulated,
        details={"new_spend": 0.0, "composition": "the ledger's total so far", **user},
    )


class QueryEngine:
    """Answer linear queries over a cube with a guaranteed utility, spending as little as needed.

    Parameters
    ----------
    cube:
        The data (true counts; read only to compute the true answer before noise).
    accountant:
        The total budget; spends are scoped to the cells a query reads.
    store:
        Where the history persists (default: in memory). Loaded at start.
    rng:
        ``None`` for secure noise; an int or Generator for a seeded simulation.
    method, accuracy:
        How the error distribution is computed (see :class:`LaplaceSum`).
    support:
        ``"real"`` (paper 000) or ``"nonnegative-integers"`` for the reported interval.
    max_epsilon:
        Optional cap on the eps of one fresh answer.
    """

    def __init__(
        self,
        cube: Cube,
        *,
        accountant: Accountant,
        store: HistoryStore | None = None,
        rng: Any = None,
        method: str = "auto",
        accuracy: float = 1e-6,
        support: str = "real",
        max_epsilon: float | None = None,
    ) -> None:
        if not isinstance(cube, Cube):
            raise TypeError(f"cube must be a Cube, got {type(cube).__name__}")
        if not isinstance(accountant, Accountant):
            raise TypeError(f"accountant must be an Accountant, got {type(accountant).__name__}")
        if method not in METHODS or method == "mc":
            raise ValueError(f"method must be one of 'auto', 'exact', 'pc', got {method!r}")
        if support not in SUPPORTS:
            raise ValueError(f"support must be one of {SUPPORTS}, got {support!r}")
        self.cube = cube
        self.accountant = accountant
        self.store: HistoryStore = store if store is not None else MemoryStore()
        self._rng = check_rng(rng)
        self.method = method
        self.accuracy = check_positive(accuracy, "accuracy")
        self.support = support
        self.max_epsilon = (
            None if max_epsilon is None else check_epsilon(max_epsilon, "max_epsilon")
        )
        self._lock = threading.RLock()
        self.history = History.from_cube(cube)
        self._simulated = False  # whether any answer in the history used simulation noise
        k = cube.rows_per_user_bound
        self._user: dict[str, Any] = user_level(k, Neighbours.ADD_REMOVE)[1]
        for rec in self.store.load():
            self._simulated |= bool(rec.guarantee.get("simulation", False))
            check_record(rec, cube)
            self.history.add(
                rec.dense(),
                rec.noisy_answer,
                rec.epsilon,
                sensitivity=rec.sensitivity,
                label=rec.label,
            )

    @classmethod
    def at(
        cls, state_dir: str | Path, cube: Cube, *, epsilon: float | None = None, **kwargs: Any
    ) -> QueryEngine:
        """An engine whose ledger (``ledger.json``) and history (``history.jsonl``) live in
        ``state_dir``: continued if they exist, created with budget ``epsilon`` otherwise."""
        d = Path(state_dir)
        d.mkdir(parents=True, exist_ok=True)
        ledger = d / "ledger.json"
        if ledger.exists():
            acc = Accountant.open(ledger)
            if epsilon is not None and abs(acc.total[0] - float(epsilon)) > 1e-12:
                raise ValueError(
                    f"epsilon={epsilon} differs from the existing ledger's total {acc.total[0]}"
                )
        else:
            if epsilon is None:
                raise ValueError(f"epsilon is required to create a new ledger in {d}")
            acc = Accountant(epsilon, path=ledger)
        return cls(cube, accountant=acc, store=JsonlStore(d / "history.jsonl"), **kwargs)

    # ------------------------------------------------------------------ helpers
    def sensitivity(self, query: Any) -> float:
        """L1 sensitivity of the query's answer: max_j |H_j| (Lemma 2.1), times k on a
        cube bounded to k records per person."""
        return self._query(query).sensitivity * (self.cube.rows_per_user_bound or 1)

    def _query(self, query: Any) -> Query:
        if isinstance(query, Query):
            q = query
        elif isinstance(query, str):
            q = self.cube.query(query)
        else:
            q = Query(check_coefficients(query, self.cube.n_cells, "query"), "coefficients")
        check_coefficients(q.coefficients, self.cube.n_cells, "query")
        return q

    def posterior(self, query: Any) -> Posterior:
        """The posterior of the query's answer from the history (raises NotEstimable)."""
        q = self._query(query)
        return self.history.posterior(
            q.coefficients, method=self.method, accuracy=self.accuracy, support=self.support
        )

    def _combined(self, scales_h: np.ndarray, var_h: float, scale_new: float) -> LaplaceSum:
        """Error of the BLUE of history + one fresh answer of the target itself
        (:func:`~dpbayes.answers.planning.combined_error`)."""
        return combined_error(
            scales_h, math.sqrt(var_h), scale_new, method=self.method, accuracy=self.accuracy
        )

    def required_epsilon(self, query: Any, *, half_width: float, confidence: float) -> float:
        """The smallest eps of one fresh answer that meets (d, p); 0 if the history does
        (``math.inf`` if no eps does, within the method's accuracy)."""
        d = check_positive(half_width, "half_width")
        p = check_probability(confidence, "confidence", open_interval=True)
        q = self._query(query)
        with self._lock:
            plan = plan_answer(
                self.history,
                q,
                d,
                p,
                sensitivity=self.sensitivity(q),
                method=self.method,
                accuracy=self.accuracy,
                support=self.support,
            )
            return plan.epsilon if plan.status != "refused" else math.inf

    def plan(
        self, query: Any, *, half_width: float, confidence: float, cap: float | None = None
    ) -> Plan:
        """What :meth:`ask` would do now, computed without drawing noise or spending.

        ``cap``: the largest eps considered (default: the total budget).
        """
        d = check_positive(half_width, "half_width")
        p = check_probability(confidence, "confidence", open_interval=True)
        q = self._query(query)
        limit, why = budget_cap(self.accountant)
        if cap is not None:
            limit, why = cap, ""
        with self._lock:
            return plan_answer(
                self.history,
                q,
                d,
                p,
                sensitivity=self.sensitivity(q),
                method=self.method,
                accuracy=self.accuracy,
                support=self.support,
                max_epsilon=self.max_epsilon,
                cap=limit,
                cap_reason=why,
            )

    # ------------------------------------------------------------------ asking
    def ask(self, query: Any, *, half_width: float, confidence: float, label: str = "") -> Answer:
        """Answer ``query`` (a Query, a ``where`` string or coefficients) within +-half_width
        with probability >= confidence, from the history if possible, else with fresh noise,
        else refuse. Bad arguments raise before anything is spent."""
        d = check_positive(half_width, "half_width")
        p = check_probability(confidence, "confidence", open_interval=True)
        q = self._query(query)
        with self._lock:
            plan = self.plan(q, half_width=d, confidence=p)
            if plan.status == "history":
                return self._from_history(plan)
            if plan.status == "refused":
                return refused_answer(plan)
            return self._fresh(plan, label)

    def _from_history(self, plan: Plan) -> Answer:
        spent, _ = self.accountant.spent
        n = len(self.history)
        g = history_guarantee(spent, n, plan.sensitivity, self._simulated, self._user)
        return history_answer(plan, g, f"met by the history of {n} answers; nothing spent")

    def _fresh(self, plan: Plan, label: str) -> Answer:
        q, eps, sens = plan.query, plan.epsilon, plan.sensitivity
        scope = [f"cell:{j}" for j in q.cells]
        mech = LaplaceMechanism(
            epsilon=eps,
            sensitivity=sens,
            neighbours=Neighbours.ADD_REMOVE,
            name="laplace (query engine)",
        )
        true = self.cube.true_answer(q)
        try:
            with self.accountant.charge(eps, scope=scope, label=label or q.text[:80]):
                noisy = mech.release(true, rng=self._rng)
        except BudgetExceeded as exc:
            return refused_answer(plan, f"needs eps={eps:.6g} on the cells it reads: {exc}")
        # The spend is on the ledger; now the noisy answer goes to the history store, and
        # only then is anything returned.
        y = float(np.asarray(noisy.value))
        guarantee = replace(noisy.guarantee, details={**noisy.guarantee.details, **self._user})
        rec = AnswerRecord.from_dense(
            q.coefficients,
            noisy_answer=y,
            epsilon=eps,
            sensitivity=sens,
            label=label or q.text,
            guarantee=guarantee.to_dict(),
            time=time.time(),
        )
        self.store.append(rec)
        self._simulated |= noisy.guarantee.simulation
        self.history.add(q.coefficients, y, eps, sensitivity=sens, label=rec.label)
        return fresh_answer(
            plan,
            self.history,
            guarantee,
            fresh_reason(eps, sens, self._user, self.cube.rows_per_user_bound),
            method=self.method,
            accuracy=self.accuracy,
            support=self.support,
        )

    def __repr__(self) -> str:
        spent, _ = self.accountant.spent
        return (
            f"QueryEngine({self.cube!r}, answers={len(self.history)}, "
            f"spent={spent:.4g} of {self.accountant.total[0]:.4g})"
        )


def fresh_reason(eps: float, sens: float, user: dict[str, Any], k: Any) -> str:
    """The reply's reason for a fresh answer."""
    return f"history insufficient; released one Laplace answer with eps={eps:.6g} " + (
        "(add/remove one record, Lemma 2.1 sensitivity)"
        if not user
        else f"({user['neighbouring_relation']}, {sens:g} = {k} x Lemma 2.1 sensitivity)"
    )


def check_record(rec: AnswerRecord, cube: Cube) -> None:
    """A stored answer fits the cube: its number of cells and its privacy unit."""
    k = cube.rows_per_user_bound
    if rec.n_cells != cube.n_cells:
        raise ValueError(
            f"the stored history is for {rec.n_cells} cells but the cube has {cube.n_cells}"
        )
    if rec.guarantee.get("details", {}).get("rows_per_user") != k:
        raise ValueError(
            "the stored history was released at "
            f"{_unit(rec.guarantee.get('details', {}).get('rows_per_user'))} level "
            f"but the cube is at {_unit(k)} level"
        )
