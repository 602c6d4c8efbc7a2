"""Planning an answer (paper 000 §5): from the history, or the eps of one fresh answer.

:func:`plan_answer` is the pure part of the engine: given a history (a snapshot), a query
and its requirement (half-width d, confidence p), it decides whether the history already
meets the requirement, or finds the smallest eps of one fresh answer of the query (Laplace,
or Gaussian at a given delta: ``fresh.py``) that makes the combined BLUE meet it, and
computes everything the reply needs except the noise: the error distribution of the BLUE
after the fresh answer does not depend on the noisy value, only on the noise scales. It
draws nothing and spends nothing, so it can run without any lock, and a caller (the HTTP
service) can cache it per history version. :func:`plan_candidates` plans one fresh answer
per noise family at once (the engine's ``noise="auto"`` prices them).

Termination: every loop has a fixed bound on its iterations (see
:func:`~dpbayes.answers.fresh.required_epsilon`); each step builds one :class:`LaplaceSum`,
whose own loops are bounded (error_distribution.py), and checks the time limit
(``limits.py``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from dpbayes import display
from dpbayes.answers.blue import BLUE, History, NotEstimable
from dpbayes.answers.credible import Posterior
from dpbayes.answers.error_distribution import LaplaceSum
from dpbayes.answers.fresh import (
    MAX_GAUSSIAN_EPSILON,
    MIN_EPSILON,
    SLACK,
    combined_error,
    required_epsilon,
)
from dpbayes.answers.queries import Query
from dpbayes.privacy.guarantee import Guarantee
from dpbayes.privacy.mechanisms import analytic_gaussian_sigma

__all__ = [
    "MIN_EPSILON",
    "SLACK",
    "Answer",
    "Plan",
    "carry_over",
    "combined_error",
    "fresh_answer",
    "history_answer",
    "plan_answer",
    "plan_candidates",
    "refused_answer",
    "required_epsilon",
    "still_valid",
]


@dataclass(frozen=True)
class Answer:
    """The engine's reply to one query.

    ``status``: ``"history"`` (inferred from earlier answers, nothing spent), ``"fresh"``
    (a new noisy answer was released, ``epsilon`` spent) or ``"refused"`` (``reason`` says
    why; nothing spent). ``interval`` is the narrowest credible interval at ``level``;
    ``confidence`` is P(|answer - estimate| <= half_width) under the posterior. A fresh
    answer says its ``noise`` (``"laplace"`` or ``"gaussian"``) and the (``epsilon``,
    ``delta``) its guarantee states (delta 0 for Laplace).
    """

    query: str
    status: str
    half_width: float
    level: float
    estimate: float | None = None
    interval: tuple[float, float] | None = None
    confidence: float | None = None
    epsilon: float = 0.0
    guarantee: Guarantee | None = None
    reason: str = ""
    posterior: Posterior | None = field(default=None, repr=False, compare=False)
    noise: str | None = None
    delta: float = 0.0

    @property
    def answered(self) -> bool:
        return self.status != "refused"

    def _display(self) -> tuple[str, list[tuple[str, str]]]:
        rows: list[tuple[str, str]] = [("query", self.query), ("status", self.status)]
        if self.answered and self.estimate is not None:
            rows.append(("estimate", display.num(self.estimate, 6)))
        if self.interval is not None:
            rows.append((f"{self.level:g} interval", display.interval(*self.interval, 6)))
        if self.confidence is not None:
            rows.append((f"P(|error| <= {display.num(self.half_width)})", f"{self.confidence:.4f}"))
        rows.append(("epsilon spent", display.num(self.epsilon, 6)))
        if self.noise is not None:
            rows.append(("noise", self.noise))
        if self.delta > 0:
            rows.append(("delta", display.num(self.delta, 3)))
        if self.guarantee is not None:
            rows.append(("guarantee", self.guarantee.describe()))
        if self.reason:
            rows.append(("reason", self.reason))
        return "Answer", rows

    def __repr__(self) -> str:
        est = "" if self.estimate is None else f", estimate={self.estimate:.6g}"
        iv = "" if self.interval is None else f", interval={display.interval(*self.interval, 6)}"
        why = f", reason={self.reason!r}" if self.reason else ""
        return (
            f"Answer({self.query!r}, status={self.status!r}{est}{iv}, "
            f"epsilon={self.epsilon:.6g}{why})"
        )

    def _repr_html_(self) -> str:
        return display.html(self)


@dataclass(frozen=True)
class Plan:
    """What the engine will do for one query, computed without drawing noise.

    ``status``: ``"history"`` (``posterior`` answers it, nothing is spent), ``"fresh"`` (one
    answer at ``epsilon`` is needed, with ``noise`` ``"laplace"`` or ``"gaussian"``: then
    ``sigma`` is its noise sd at (``epsilon``, ``delta``); ``error`` is the distribution of
    the BLUE's error once it is added, ``interval_half_width`` its half-width at the level
    and ``confidence`` its P(|E| <= d)) or ``"refused"`` (``reason`` says why). ``choice``:
    why this noise was chosen, when the engine chose.
    """

    query: Query
    half_width: float
    level: float
    sensitivity: float
    status: str
    epsilon: float = 0.0
    posterior: Posterior | None = None
    error: LaplaceSum | None = None
    interval_half_width: float = math.nan
    confidence: float = math.nan
    reason: str = ""
    # the Laplace scales of the history BLUE's error the plan was made from (None: the
    # query was not estimable); see :func:`still_valid`
    history_scales: np.ndarray | None = field(default=None, repr=False, compare=False)
    noise: str = "laplace"
    sigma: float | None = None
    delta: float = 0.0
    # the sds of the Gaussian answers' terms in that error (None: none)
    history_gaussian_scales: np.ndarray | None = field(default=None, repr=False, compare=False)
    choice: str = ""


def plan_answer(
    history: History,
    query: Query,
    half_width: float,
    confidence: float,
    *,
    sensitivity: float,
    method: str = "auto",
    accuracy: float = 1e-6,
    support: str = "real",
    max_epsilon: float | None = None,
    cap: float = math.inf,
    cap_reason: str = "",
    noise: str = "laplace",
    delta: float = 0.0,
) -> Plan:
    """Plan the answer to ``query`` with requirement (``half_width``, ``confidence``).

    ``sensitivity``: of the query's answer (Lemma 2.1, times k at user level).
    ``cap``: no fresh answer above this eps is considered (e.g. what the budget has left on
    the query's cells); a query that needs more is refused with ``cap_reason``.
    ``noise``: the family of a fresh answer, ``"laplace"`` or ``"gaussian"`` (then at
    ``delta`` > 0). Arguments are assumed checked (QueryEngine and the service check them).
    """
    return plan_candidates(
        history, query, half_width, confidence, sensitivity=sensitivity, method=method,
        accuracy=accuracy, support=support, max_epsilon=max_epsilon, cap=cap,
        cap_reason=cap_reason, noises=(noise,), delta=delta,
    )[0]  # fmt: skip


def plan_candidates(
    history: History,
    query: Query,
    half_width: float,
    confidence: float,
    *,
    sensitivity: float,
    method: str = "auto",
    accuracy: float = 1e-6,
    support: str = "real",
    max_epsilon: float | None = None,
    cap: float = math.inf,
    cap_reason: str = "",
    noises: tuple[str, ...] = ("laplace",),
    delta: float = 0.0,
    min_epsilon: float = 0.0,
) -> list[Plan]:
    """:func:`plan_answer` for each noise family in ``noises`` (in that order), sharing the
    history's BLUE and error distribution; one ``"history"`` plan if the history meets the
    requirement (then no fresh answer is needed, whatever its noise). ``min_epsilon``: the
    least eps a fresh answer is charged (``floor`` of :func:`required_epsilon`)."""
    d, p, q = half_width, confidence, query
    blue: BLUE | None
    try:
        blue = history.blue(q.coefficients)
    except NotEstimable:
        blue = None
    hist = (
        None
        if blue is None
        else LaplaceSum(blue.scales, gaussian_sd=blue.gaussian_sd, method=method, accuracy=accuracy)
    )
    limit = cap if max_epsilon is None else min(cap, max_epsilon * (1 + 1e-12))
    base: dict[str, Any] = {
        "query": q,
        "half_width": d,
        "level": p,
        "sensitivity": sensitivity,
        "history_scales": None if blue is None else blue.scales,
        "history_gaussian_scales": None if blue is None else blue.gaussian_scales,
    }
    plans = []
    for noise in noises:
        lim = limit if noise == "laplace" else min(limit, MAX_GAUSSIAN_EPSILON)
        eps, err = required_epsilon(
            hist,
            None if blue is None else blue.scales,
            sensitivity,
            d,
            p,
            method=method,
            accuracy=accuracy,
            cap=lim,
            noise=noise,
            delta=delta,
            floor=min_epsilon,
        )
        if eps == 0.0:
            assert blue is not None and hist is not None
            post = Posterior.from_blue(
                blue, method=method, accuracy=accuracy, support=support,
                coefficients=q.coefficients, error=hist,
            )  # fmt: skip
            lo, hi = post.interval(p)
            return [
                Plan(
                    **base,
                    status="history",
                    posterior=post,
                    interval_half_width=(hi - lo) / 2.0,
                    confidence=float(post.error.prob_within(d)),
                )
            ]
        kind: dict[str, Any] = {"noise": noise, "delta": delta if noise == "gaussian" else 0.0}
        if err is None:
            if lim < limit:
                why = f"above the Gaussian calibration's range (eps <= {lim:g})"
            elif max_epsilon is not None and limit < cap:
                why = f"above max_epsilon={max_epsilon:.6g}"
            else:
                why = cap_reason or f"above eps={cap:.6g}"
            need = f"eps={eps:.6g}" if math.isfinite(eps) else f"more than eps={lim:.6g}"
            one = "one fresh answer"
            if noise == "gaussian":
                one = f"one fresh Gaussian answer (delta={delta:.3g})"
            plans.append(
                Plan(
                    **base,
                    **kind,
                    status="refused",
                    reason=f"needs {need} for {one}, {why}; nothing spent",
                )
            )
            continue
        sigma = analytic_gaussian_sigma(eps, delta, sensitivity) if noise == "gaussian" else None
        plans.append(
            Plan(
                **base,
                **kind,
                status="fresh",
                epsilon=eps,
                sigma=sigma,
                error=err,
                interval_half_width=err.half_width(p),
                confidence=float(err.prob_within(d)),
            )
        )
    return plans


def _same_blue(plan: Plan, history: History) -> tuple[bool, BLUE | None]:
    """(whether the query's BLUE from ``history`` is the plan's, that BLUE or None)."""
    try:
        blue = history.blue(plan.query.coefficients)
    except NotEstimable:
        return plan.history_scales is None, None
    if plan.history_scales is None:
        return False, blue
    # the error terms per answer: Laplace scales and Gaussian sds (two rows)
    old = _terms(plan.history_scales, plan.history_gaussian_scales)
    new = _terms(blue.scales, blue.gaussian_scales)
    n = old.shape[1]
    if new.shape[1] < n:
        return False, blue
    top = float(np.max(old, initial=0.0))
    same = bool(
        np.all(np.abs(new[:, n:]) <= 1e-12 * top)
        and np.allclose(new[:, :n], old, rtol=1e-9, atol=1e-12 * top)
    )
    return same, blue


def _terms(scales: np.ndarray, gaussian: np.ndarray | None) -> np.ndarray:
    return np.stack([scales, np.zeros(scales.size) if gaussian is None else gaussian])


def still_valid(plan: Plan, history: History) -> bool:
    """Whether ``plan`` (made on an earlier state) holds for ``history`` unchanged.

    It does when the query's BLUE from ``history`` is the one the plan was made from: the
    same error terms (Laplace scales and Gaussian sds) on the answers the plan saw and
    none on the answers added since (a new
    answer outside the span of the earlier ones cannot enter an unbiased estimate of a
    query inside it), or the query is still not estimable. Then the eps, the error
    distribution and the interval are the same. O(r^2 + k r): no error distribution.
    """
    return _same_blue(plan, history)[0]


def carry_over(plan: Plan, history: History) -> Plan | None:
    """``plan`` for the same query and requirement on a later ``history``, or None.

    If :func:`still_valid`, the eps search and the error distribution carry over; a plan
    from the history gets the estimate of the BLUE from ``history`` (the same up to
    rounding). Else None: plan again.
    """
    same, blue = _same_blue(plan, history)
    if not same:
        return None
    if plan.status != "history" or blue is None:
        return plan
    post = plan.posterior
    assert post is not None
    if post.support != "real":
        return None  # the posterior's mass function depends on the estimate: plan again
    fresh = Posterior.from_blue(blue, error=post.error, coefficients=plan.query.coefficients)
    return replace(
        plan,
        posterior=fresh,
        history_scales=blue.scales,
        history_gaussian_scales=blue.gaussian_scales,
    )


def refused_answer(plan: Plan, reason: str = "") -> Answer:
    """A refusal (nothing spent): the plan's reason unless another is given."""
    return Answer(
        query=plan.query.text,
        status="refused",
        half_width=plan.half_width,
        level=plan.level,
        reason=reason or plan.reason,
    )


def history_answer(plan: Plan, guarantee: Guarantee, reason: str) -> Answer:
    """The answer of a ``"history"`` plan (post-processing: nothing spent)."""
    post = plan.posterior
    assert plan.status == "history" and post is not None
    if post.support == "real":
        d_half = plan.interval_half_width
        lo, hi = post.estimate - d_half, post.estimate + d_half
    else:
        lo, hi = post.interval(plan.level)
    return Answer(
        query=plan.query.text,
        status="history",
        half_width=plan.half_width,
        level=plan.level,
        estimate=post.estimate,
        interval=(lo, hi),
        confidence=plan.confidence,
        guarantee=guarantee,
        reason=reason,
        posterior=post,
    )


def fresh_answer(
    plan: Plan,
    history_after: History | None,
    guarantee: Guarantee,
    reason: str,
    *,
    method: str = "auto",
    accuracy: float = 1e-6,
    support: str = "real",
    blue: BLUE | None = None,
) -> Answer:
    """The answer of a ``"fresh"`` plan once its noisy answer is in ``history_after``.

    The estimate is the BLUE from ``history_after`` (or ``blue``, that BLUE computed
    already), so a later answer from the history repeats it; on the real line its error
    distribution is the plan's, computed before the noise was drawn (it does not depend
    on the noisy value).
    """
    assert plan.status == "fresh" and plan.error is not None
    q = plan.query
    if blue is None:
        assert history_after is not None
        blue = history_after.blue(q.coefficients)
    if support == "real":
        post = Posterior.from_blue(blue, error=plan.error, coefficients=q.coefficients)
        d_half = plan.interval_half_width
        interval = (post.estimate - d_half, post.estimate + d_half)
        conf = plan.confidence
    else:
        post = Posterior.from_blue(
            blue, method=method, accuracy=accuracy, support=support, coefficients=q.coefficients
        )
        interval = post.interval(plan.level)
        conf = float(post.error.prob_within(plan.half_width))
    return Answer(
        query=q.text,
        status="fresh",
        half_width=plan.half_width,
        level=plan.level,
        estimate=post.estimate,
        interval=interval,
        confidence=conf,
        epsilon=plan.epsilon,
        guarantee=guarantee,
        reason=reason,
        posterior=post,
        noise=plan.noise,
        delta=plan.delta,
    )
