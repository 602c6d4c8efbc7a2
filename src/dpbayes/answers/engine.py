"""The utility-driven query engine of paper 000 §5, with Laplace or Gaussian answers.

Each query comes with a requirement: the true answer must lie within +-d of the returned
estimate with probability >= p (a credible interval of half-width d at level p, under the
paper's uninformative prior). The engine

1. answers from the history (BLUE + exact error distribution) when that already meets
   the requirement: nothing is spent;
2. otherwise finds the smallest eps for one fresh answer of the query such that the BLUE
   of the history plus that answer meets it (bisection on the exact confidence;
   planning.py and fresh.py: pure, bounded, no noise drawn). The fresh answer's noise is
   ``noise="laplace"`` (paper 000), ``"gaussian"`` or ``"auto"`` (below);
3. checks the budget (sequential composition; parallel composition over disjoint cells,
   Thms 5.1-5.2: each spend is scoped to the cells its query reads), then releases the
   noisy answer through :class:`~dpbayes.privacy.LaplaceMechanism` or
   :class:`~dpbayes.privacy.GaussianMechanism` (secure noise unless an ``rng`` is given
   for simulation), or refuses with the reason.

Neighbouring relation: add/remove one record, which changes one cell by one (Lemma 2.1).
On a cube bounded to k records per person (``Cube.rows_per_user_bound``) it is add/remove
one person (<= k records, ||x - x'||_1 <= k): every sensitivity is k times Lemma 2.1's and
the guarantees say so (``details["neighbouring_relation"]``).

Privacy of a Gaussian answer. The answer q x is a scalar, so its L2 sensitivity equals its
L1 sensitivity S = max_j |q_j| (times k at user level): a neighbour moves it by at most S.
y = q x + N(0, sigma^2) with sigma = ``analytic_gaussian_sigma(eps, delta, S)`` is then
(eps, delta)-DP by the analytic Gaussian mechanism (Balle & Wang 2018, Thm 8: N(0, sigma^2)
noise on a value of sensitivity S is (eps, delta)-DP iff Phi(S/2 sigma - eps sigma/S) -
e^eps Phi(-S/2 sigma - eps sigma/S) <= delta; the privacy loss is Normal with mean
S^2 / 2 sigma^2), where delta is ``gaussian_delta`` (default: the budget's delta) and eps
the smallest for that sigma. That (eps, delta) is the answer's guarantee. Its
``details["noise"]`` records sigma / S, so an accountant with ``composition="pld"`` or
``"rdp"`` composes the Gaussian's own privacy-loss distribution (or Rényi curve), which is
tighter over many answers than composing (eps, delta) pairs; under basic composition
each Gaussian answer costs its (eps, delta). Answers from the history are post-processing
of released answers and cost nothing, whatever their noise.

Choice of noise (``noise="auto"``). When a fresh answer is needed the engine plans both: the
smallest Laplace eps and the smallest Gaussian eps at ``gaussian_delta`` that meet the
requirement jointly with the history; it asks the accountant what its composed spent eps
would be after each (:meth:`~dpbayes.privacy.Accountant.spent_after`, read only) and releases
the one that raises it least (Laplace on a tie, and whenever the budget's delta is 0, where
no Gaussian answer is possible; Gaussian always under ``"pld"`` composition, whose
accountant takes Gaussian spends only). The choice depends only on variances and the ledger, never
on noisy values, so the credible intervals keep their exact coverage.

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

from dpbayes.answers.blue import NOISES, History, check_coefficients
from dpbayes.answers.credible import SUPPORTS, Posterior
from dpbayes.answers.cube import Cube
from dpbayes.answers.error_distribution import METHODS, LaplaceSum
from dpbayes.answers.planning import (
    Answer,
    Plan,
    combined_error,
    fresh_answer,
    history_answer,
    plan_candidates,
    refused_answer,
)
from dpbayes.answers.pricing import cheapest, fresh_mechanism, scope_of
from dpbayes.answers.queries import Query
from dpbayes.answers.store import (
    AnswerRecord,
    HistoryStore,
    JsonlStore,
    MemoryStore,
    add_record,
)
from dpbayes.privacy.accountant import Accountant, BudgetExceeded
from dpbayes.privacy.guarantee import Guarantee, Neighbours, user_level
from dpbayes.privacy.validation import (
    check_delta,
    check_epsilon,
    check_positive,
    check_probability,
    check_rng,
)

__all__ = ["NOISE_CHOICES", "Answer", "QueryEngine", "budget_cap", "history_guarantee"]

# What the engine may release: one family, or the cheaper of the two per answer.
NOISE_CHOICES = (*NOISES, "auto")

_TOLERANCE = 1e-9  # the accountant's relative slack


def _unit(rows_per_user: Any) -> str:
    return "record" if rows_per_user is None else f"user (<= {rows_per_user} rows)"


def budget_cap(accountant: Accountant) -> tuple[float, str]:
    """The largest eps one fresh answer could be charged, and the refusal reason above it."""
    total = accountant.total[0]
    return total * (1 + _TOLERANCE), f"budget exceeded: the total budget is eps={total:.6g}"


def history_guarantee(
    spent: float,
    n_answers: int,
    sensitivity: float,
    simulated: bool,
    user: dict[str, Any],
    *,
    delta: float = 0.0,
    n_gaussian: int = 0,
) -> Guarantee:
    """What an answer from the history promises: the ledger's total (eps, ``delta``) so
    far, nothing new (``n_gaussian`` of the ``n_answers`` answers are Gaussian)."""
    kinds = (
        "Laplace answers"
        if n_gaussian == 0
        else f"answers ({n_answers - n_gaussian} Laplace, {n_gaussian} Gaussian)"
    )
    return Guarantee(
        epsilon=max(spent, 1e-300),
        delta=delta,
        neighbours=Neighbours.ADD_REMOVE,
        mechanism=f"post-processing (BLUE) of {n_answers} {kinds}",
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
    noise:
        The noise of fresh answers: ``"laplace"`` (paper 000; the default, except under
        ``"pld"`` composition, which takes Gaussian answers only and defaults to
        ``"gaussian"``), ``"gaussian"`` (needs a budget delta > 0) or ``"auto"`` (per
        answer, the one that raises the accountant's composed spent eps least; see the
        module doc).
    gaussian_delta:
        The delta each Gaussian answer's guarantee states, in (0, budget delta]; default
        the budget's delta. (Under ``"pld"``/``"rdp"`` composition the accountant composes
        Gaussian answers by their noise, so this only sets each answer's own (eps, delta);
        under basic composition each answer spends it, so the default leaves room for one
        Gaussian answer: give a share, e.g. delta / 100, for more.)
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
        noise: str | None = None,
        gaussian_delta: float | None = None,
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
        self.noise, self.gaussian_delta = _check_noise(
            _default_noise(noise, accountant), gaussian_delta, accountant, rng
        )
        self._lock = threading.RLock()
        self.history = History.from_cube(cube)
        self._simulated = False  # whether any answer in the history used simulation noise
        k = cube.rows_per_user_bound
        self._user: dict[str, Any] = user_level(k, Neighbours.ADD_REMOVE)[1]
        if k is not None and getattr(cube, "user_column", None) is not None:
            self._user["user_column"] = cube.user_column
        for rec in self.store.load():
            self._simulated |= bool(rec.guarantee.get("simulation", False))
            check_record(rec, cube)
            add_record(self.history, rec)

    @classmethod
    def at(
        cls,
        state_dir: str | Path,
        cube: Cube,
        *,
        epsilon: float | None = None,
        delta: float | None = None,
        composition: str | None = None,
        **kwargs: Any,
    ) -> QueryEngine:
        """An engine whose ledger (``ledger.json``) and history (``history.jsonl``) live in
        ``state_dir``: continued if they exist, created with budget (``epsilon``, ``delta``,
        default 0) and ``composition`` (default ``"basic"``) otherwise. Given for an
        existing ledger, they must match it. A missing ledger next to a history that holds
        answers is refused (their spends would be forgotten)."""
        d = Path(state_dir)
        d.mkdir(parents=True, exist_ok=True)
        ledger = d / "ledger.json"
        if ledger.exists():
            acc = Accountant.open(ledger)
            if epsilon is not None and abs(acc.total[0] - float(epsilon)) > 1e-12:
                raise ValueError(
                    f"epsilon={epsilon} differs from the existing ledger's total {acc.total[0]}"
                )
            if delta is not None and abs(acc.total[1] - float(delta)) > 1e-15:
                raise ValueError(
                    f"delta={delta} differs from the existing ledger's total {acc.total[1]}"
                )
            if composition is not None and composition != acc.composition:
                raise ValueError(
                    f"composition={composition!r} differs from the existing ledger's "
                    f"{acc.composition!r}"
                )
        else:
            # a history without its ledger: a fresh budget would spend again what the
            # history's answers were charged (and the engine reuses them for free)
            charged = len(JsonlStore(d / "history.jsonl").load())
            if charged:
                raise ValueError(
                    f"ledger missing but the history holds {charged} charged answers; "
                    f"refusing a fresh budget (restore {ledger})"
                )
            if epsilon is None:
                raise ValueError(f"epsilon is required to create a new ledger in {d}")
            budget = (epsilon, delta or 0.0)
            # the noise arguments are checked before the ledger file exists
            trial = Accountant(*budget, composition=composition or "basic")
            _check_noise(
                _default_noise(kwargs.get("noise"), trial),
                kwargs.get("gaussian_delta"),
                trial,
                kwargs.get("rng"),
            )
            acc = Accountant(*budget, path=ledger, composition=composition or "basic")
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

    def _combined(
        self,
        scales_h: np.ndarray,
        var_h: float,
        scale_new: float,
        *,
        noise: str = "laplace",
        gaussian_sd_h: float = 0.0,
    ) -> LaplaceSum:
        """Error of the BLUE of history + one fresh answer of the target itself (Laplace
        scale or Gaussian sd ``scale_new``; :func:`~dpbayes.answers.planning.combined_error`)."""
        return combined_error(
            scales_h, math.sqrt(var_h), scale_new, method=self.method, accuracy=self.accuracy,
            noise=noise, gaussian_sd_h=gaussian_sd_h,
        )  # fmt: skip

    def required_epsilon(
        self, query: Any, *, half_width: float, confidence: float, noise: str | None = None
    ) -> float:
        """The smallest eps of one fresh answer that meets (d, p); 0 if the history does
        (``math.inf`` if no eps does, within the method's accuracy). ``noise``: as for
        :meth:`ask` (a Gaussian answer's eps is at ``gaussian_delta``)."""
        d = check_positive(half_width, "half_width")
        p = check_probability(confidence, "confidence", open_interval=True)
        q = self._query(query)
        families = self._families(noise)
        with self._lock:
            plan = self._plan(q, d, p, families, cap=math.inf, cap_reason="", max_epsilon=None)
            return plan.epsilon if plan.status != "refused" else math.inf

    def plan(
        self,
        query: Any,
        *,
        half_width: float,
        confidence: float,
        cap: float | None = None,
        noise: str | None = None,
    ) -> Plan:
        """What :meth:`ask` would do now, computed without drawing noise or spending.

        ``cap``: the largest eps considered (default: the total budget). ``noise``: as for
        :meth:`ask`.
        """
        d = check_positive(half_width, "half_width")
        p = check_probability(confidence, "confidence", open_interval=True)
        q = self._query(query)
        families = self._families(noise)
        limit, why = budget_cap(self.accountant)
        if cap is not None:
            limit, why = cap, ""
        with self._lock:
            return self._plan(
                q, d, p, families, cap=limit, cap_reason=why, max_epsilon=self.max_epsilon
            )

    def _families(self, noise: str | None) -> tuple[str, ...]:
        """The noise families to plan for ``noise`` (None: the engine's), checked."""
        if noise is None:
            noise = self.noise
        else:
            _check_family(noise, self.gaussian_delta, self.accountant, self._rng)
        return noise_families(noise, self.gaussian_delta, self.accountant.composition)

    def _plan(
        self,
        q: Query,
        d: float,
        p: float,
        families: tuple[str, ...],
        *,
        cap: float,
        cap_reason: str,
        max_epsilon: float | None,
    ) -> Plan:
        plans = plan_candidates(
            self.history,
            q,
            d,
            p,
            sensitivity=self.sensitivity(q),
            method=self.method,
            accuracy=self.accuracy,
            support=self.support,
            max_epsilon=max_epsilon,
            cap=cap,
            cap_reason=cap_reason,
            noises=families,
            delta=self.gaussian_delta,
        )
        if len(plans) == 1:
            return plans[0]
        return cheapest(plans, self.accountant, simulation=self._rng is not None, user=self._user)

    # ------------------------------------------------------------------ asking
    def ask(
        self,
        query: Any,
        *,
        half_width: float,
        confidence: float,
        label: str = "",
        noise: str | None = None,
    ) -> Answer:
        """Answer ``query`` (a Query, a ``where`` string or coefficients) within +-half_width
        with probability >= confidence, from the history if possible, else with fresh noise,
        else refuse. ``noise``: the fresh answer's noise for this call (``"laplace"``,
        ``"gaussian"`` or ``"auto"``; default the engine's). Bad arguments raise before
        anything is spent."""
        d = check_positive(half_width, "half_width")
        p = check_probability(confidence, "confidence", open_interval=True)
        q = self._query(query)
        with self._lock:
            plan = self.plan(q, half_width=d, confidence=p, noise=noise)
            if plan.status == "history":
                return self._from_history(plan)
            if plan.status == "refused":
                return refused_answer(plan)
            return self._fresh(plan, label)

    def _from_history(self, plan: Plan) -> Answer:
        spent, spent_delta = self.accountant.spent
        n = len(self.history)
        g = history_guarantee(
            spent, n, plan.sensitivity, self._simulated, self._user,
            delta=spent_delta, n_gaussian=self.history.noises.count("gaussian"),
        )  # fmt: skip
        return history_answer(plan, g, f"met by the history of {n} answers; nothing spent")

    def _fresh(self, plan: Plan, label: str) -> Answer:
        q, eps, sens = plan.query, plan.epsilon, plan.sensitivity
        scope = scope_of(q)
        mech, cost = fresh_mechanism(plan, simulation=self._rng is not None, user=self._user)
        true = self.cube.true_answer(q)
        try:
            with self.accountant.charge(cost, scope=scope, label=label or q.text[:80]):
                noisy = mech.release(true, rng=self._rng)
        except BudgetExceeded as exc:
            need = f"eps={eps:.6g}" + (f", delta={plan.delta:.3g}" if plan.delta else "")
            return refused_answer(plan, f"needs {need} on the cells it reads: {exc}")
        # The spend is on the ledger; now the noisy answer goes to the history store, and
        # only then is anything returned.
        y = float(np.asarray(noisy.value))
        guarantee = replace(noisy.guarantee, details={**noisy.guarantee.details, **self._user})
        gauss = plan.noise == "gaussian"
        kind: dict[str, Any] = (
            {"noise": "gaussian", "sigma": plan.sigma, "delta": plan.delta} if gauss else {}
        )
        rec = AnswerRecord.from_dense(
            q.coefficients,
            noisy_answer=y,
            epsilon=eps,
            sensitivity=sens,
            label=label or q.text,
            guarantee=guarantee.to_dict(),
            time=time.time(),
            **kind,
        )
        self.store.append(rec)
        self._simulated |= noisy.guarantee.simulation
        self.history.add(q.coefficients, y, eps, sensitivity=sens, label=rec.label, **kind)
        reason = fresh_reason(eps, sens, self._user, self.cube.rows_per_user_bound, **kind)
        return fresh_answer(
            plan,
            self.history,
            guarantee,
            reason + (f"; {plan.choice}" if plan.choice else ""),
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


def fresh_reason(
    eps: float,
    sens: float,
    user: dict[str, Any],
    k: Any,
    *,
    noise: str = "laplace",
    sigma: float | None = None,
    delta: float = 0.0,
) -> str:
    """The reply's reason for a fresh answer."""
    what = (
        f"one Laplace answer with eps={eps:.6g} "
        if noise == "laplace"
        else f"one Gaussian answer with sigma={sigma:.6g}, (eps, delta)=({eps:.6g}, {delta:.3g}) "
    )
    return f"history insufficient; released {what}" + (
        "(add/remove one record, Lemma 2.1 sensitivity)"
        if not user
        else f"({user['neighbouring_relation']}, {sens:g} = {k} x Lemma 2.1 sensitivity)"
    )


def default_noise(composition: str) -> str:
    """The noise of fresh answers when none is named: Laplace (paper 000), Gaussian under
    ``"pld"`` composition, whose ledger takes no other."""
    return "gaussian" if composition == "pld" else "laplace"


def _default_noise(noise: Any, accountant: Accountant) -> Any:
    """``noise``, or for None :func:`default_noise` under the accountant's composition."""
    return default_noise(accountant.composition) if noise is None else noise


def _check_noise(
    noise: Any, gaussian_delta: Any, accountant: Accountant, rng: Any
) -> tuple[str, float]:
    """(noise, the delta of Gaussian answers), checked against the budget and the rng."""
    if noise not in NOISE_CHOICES:
        raise ValueError(f"noise must be one of {NOISE_CHOICES}, got {noise!r}")
    budget = accountant.total[1]
    if gaussian_delta is None:
        gd = budget
    else:
        gd = check_delta(gaussian_delta, "gaussian_delta")
        if not 0 < gd <= budget * (1 + _TOLERANCE):
            raise ValueError(
                f"gaussian_delta must be in (0, {budget:.3g}] (the budget's delta), got {gd:.3g}"
            )
    _check_family(noise, gd, accountant, rng)
    return str(noise), gd


def noise_families(noise: str, gaussian_delta: float, composition: str) -> tuple[str, ...]:
    """The noise families ``noise`` plans for: under ``"pld"`` composition Gaussian answers
    only (the accountant's PLD filter takes no others), ``"auto"`` both elsewhere (Laplace
    only without a delta for Gaussian answers)."""
    if composition == "pld":
        if noise == "laplace":
            raise ValueError(
                "noise='laplace' cannot be charged under composition 'pld', which takes "
                "Gaussian-noise spends only (a PLD budget check is a valid filter for them "
                "alone): use noise 'gaussian' or 'auto', or composition 'rdp' or 'basic'"
            )
        return ("gaussian",)
    if noise == "auto":
        return ("laplace", "gaussian") if gaussian_delta > 0 else ("laplace",)
    return (noise,)


def _check_family(noise: Any, gd: float, accountant: Accountant, rng: Any) -> None:
    """``noise`` is one of NOISE_CHOICES and possible with Gaussian answers at delta ``gd``
    under the accountant's composition."""
    if noise not in NOISE_CHOICES:
        raise ValueError(f"noise must be one of {NOISE_CHOICES}, got {noise!r}")
    noise_families(noise, gd, accountant.composition)
    if noise == "gaussian" and gd == 0:
        raise ValueError(
            "noise='gaussian' needs a budget delta > 0 (Accountant(epsilon, delta)): a "
            "Gaussian answer is (eps, delta)-DP only for delta > 0; use 'laplace' or 'auto'"
        )
    if (rng is not None) != accountant.simulation:
        raise ValueError(
            "rng: a seeded engine draws reproducible noise and needs "
            "Accountant(..., simulation=True); secure noise (rng=None) needs a real "
            "Accountant (a real budget never pays for simulation answers)"
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
    stored = rec.guarantee.get("details", {}).get("user_column")
    column = getattr(cube, "user_column", None)
    if k is not None and stored is not None and column is not None and stored != column:
        raise ValueError(
            f"the stored history protects a user identified by {stored!r} but the cube's "
            f"user is identified by {column!r}"
        )
