"""Planning an answer (paper 000 §5): from the history, or the eps of one fresh answer.

:func:`plan_answer` is the pure part of the engine: given a history (a snapshot), a query
and its requirement (half-width d, confidence p), it decides whether the history already
meets the requirement, or finds the smallest eps of one fresh Laplace answer of the query
that makes the combined BLUE meet it, and computes everything the reply needs except the
noise: the error distribution of the BLUE after the fresh answer does not depend on the
noisy value, only on the scales. It draws nothing and spends nothing, so it can run
without any lock, and a caller (the HTTP service) can cache it per history version.

Termination: every loop below has a fixed bound on its iterations (see
:func:`required_epsilon`); each step builds one :class:`LaplaceSum`, whose own loops are
bounded (error_distribution.py), and checks the time limit (``limits.py``).
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
from dpbayes.answers.limits import check_time
from dpbayes.answers.queries import Query
from dpbayes.privacy.guarantee import Guarantee

__all__ = [
    "MIN_EPSILON",
    "Answer",
    "Plan",
    "carry_over",
    "combined_error",
    "fresh_answer",
    "history_answer",
    "plan_answer",
    "refused_answer",
    "required_epsilon",
    "still_valid",
]

# The requirement P(|E| <= d) >= p is checked as P - (the method's error bound) >= p - 1e-9:
# conservative up to the method's accuracy, and an answer released to meet (d, p) exactly
# meets the same requirement again from the history.
SLACK = 1e-9
# The smallest eps of a fresh answer: a looser requirement is met by an answer at this eps
# (the noise of one answer alone only shrinks as eps grows). It keeps the noise scale
# S / eps and its square, the answer's variance, inside double precision.
MIN_EPSILON = 1e-12
_GROW = 1.5
_MAX_GROW_STEPS = 200  # 1.5^200 > 1e35 > any ratio cap / start (>= 1e-12 .. < 1e23)
_SCAN = 25
_MAX_BISECT = 64  # the bracket [lo, hi] has hi / lo <= 1e4 * 1.5: 14 halvings in log


@dataclass(frozen=True)
class Answer:
    """The engine's reply to one query.

    ``status``: ``"history"`` (inferred from earlier answers, nothing spent), ``"fresh"``
    (a new noisy answer was released, ``epsilon`` spent) or ``"refused"`` (``reason`` says
    why; nothing spent). ``interval`` is the narrowest credible interval at ``level``;
    ``confidence`` is P(|answer - estimate| <= half_width) under the posterior.
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
    Laplace answer at ``epsilon`` is needed; ``error`` is the distribution of the BLUE's
    error once it is added, ``interval_half_width`` its half-width at the level and
    ``confidence`` its P(|E| <= d)) or ``"refused"`` (``reason`` says why).
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


def _ok(dist: LaplaceSum, d: float, p: float) -> bool:
    return bool(dist.prob_within(d) - dist.error >= p - SLACK)


def combined_error(
    scales_h: np.ndarray,
    std_h: float,
    scale_new: float,
    *,
    method: str = "auto",
    accuracy: float = 1e-6,
) -> LaplaceSum:
    """Error of the BLUE of history + one fresh answer of the target itself.

    ``scales_h``, ``std_h``: the Laplace scales and the std of the history BLUE's error;
    ``scale_new``: the fresh answer's Laplace scale S / eps. Appending an answer of q
    itself, the BLUE of q x is the inverse-variance weighted mean of the history's BLUE
    (variance V = std_h^2) and the fresh answer (variance v = 2 scale^2) (Sherman-Morrison
    on eq. 15): weights lam = v / (V + v) and 1 - lam. Written as 1 / (1 + t^2),
    t = std_h / (sqrt 2 scale), so that no float divides by zero: for stds > 0, t is
    finite or +inf (then lam = 0), never NaN.
    """
    t = std_h / (math.sqrt(2.0) * scale_new)
    lam = 1.0 / (1.0 + t * t)
    scales = np.concatenate([lam * np.asarray(scales_h, dtype=float), [(1.0 - lam) * scale_new]])
    return LaplaceSum(scales, method=method, accuracy=accuracy)


def required_epsilon(
    hist: LaplaceSum | None,
    scales_h: np.ndarray | None,
    sensitivity: float,
    d: float,
    p: float,
    *,
    method: str = "auto",
    accuracy: float = 1e-6,
    cap: float = math.inf,
) -> tuple[float, LaplaceSum | None]:
    """The smallest eps of one fresh answer that meets (d, p), and its error distribution.

    ``hist``: the error of the history's BLUE of the query, ``scales_h`` its Laplace scales
    (the BLUE's ``scales``; both ``None`` if the query is not estimable).
    Returns ``(0.0, None)`` if the history meets the requirement, and ``(eps, None)`` if the
    eps needed is above ``cap`` (the caller refuses): the exact eps when the query is not
    estimable from the history, else ``math.inf`` (more than ``cap``). Bounded: at most
    200 growth steps (x1.5 from max(alone, MIN_EPSILON) up to ``cap``), a 25-point scan and
    64 bisection steps, one LaplaceSum each.
    """
    s = sensitivity
    # A fresh answer alone: P(|Lap(S/eps)| <= d) = 1 - e^{-d eps / S} >= p.
    alone = s * math.log(1.0 / (1.0 - p)) / d
    if hist is None or scales_h is None:
        eps = max(alone, MIN_EPSILON)
        if not eps <= cap:  # also catches alone = inf (a subnormal d)
            return eps, None
        return eps, LaplaceSum([s / eps], method=method, accuracy=accuracy)
    if _ok(hist, d, p):
        return 0.0, None
    if not cap >= MIN_EPSILON:
        return math.inf, None

    def dist_at(eps: float) -> LaplaceSum:
        check_time()
        return combined_error(scales_h, hist.std, s / eps, method=method, accuracy=accuracy)

    hi = min(max(alone, MIN_EPSILON), cap)
    best = dist_at(hi)
    for _ in range(_MAX_GROW_STEPS):
        if _ok(best, d, p):
            break
        if hi >= cap:
            return math.inf, None
        hi = min(hi * _GROW, cap)
        best = dist_at(hi)
    else:
        return math.inf, None
    lo = max(hi * 1e-4, MIN_EPSILON)
    if lo >= hi:
        return hi, best
    low = dist_at(lo)
    if _ok(low, d, p):
        return lo, low
    # P(|E| <= d) is not monotone in eps: a little Laplace noise blunts the cusp of the
    # history's error density and can first lower it. It starts below p (the history alone
    # fails) and rises above p once; a coarse log-scan finds the first grid point that
    # meets p, and bisection in log eps (to 0.1 %) the crossing before it, keeping the end
    # that meets the requirement.
    grid = np.geomspace(lo, hi, _SCAN)
    for i in range(1, grid.size - 1):
        cand = dist_at(float(grid[i]))
        if _ok(cand, d, p):
            lo, hi, best = float(grid[i - 1]), float(grid[i]), cand
            break
    else:
        lo = float(grid[-2])
    for _ in range(_MAX_BISECT):
        if hi / lo <= 1.0 + 1e-3:
            break
        mid = math.sqrt(lo * hi)
        cand = dist_at(mid)
        if _ok(cand, d, p):
            hi, best = mid, cand
        else:
            lo = mid
    return hi, best


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
) -> Plan:
    """Plan the answer to ``query`` with requirement (``half_width``, ``confidence``).

    ``sensitivity``: of the query's answer (Lemma 2.1, times k at user level).
    ``cap``: no fresh answer above this eps is considered (e.g. what the budget has left on
    the query's cells); a query that needs more is refused with ``cap_reason``. Arguments
    are assumed checked (QueryEngine and the service check them).
    """
    d, p, q = half_width, confidence, query
    blue: BLUE | None
    try:
        blue = history.blue(q.coefficients)
    except NotEstimable:
        blue = None
    hist = None if blue is None else LaplaceSum(blue.scales, method=method, accuracy=accuracy)
    limit = cap if max_epsilon is None else min(cap, max_epsilon * (1 + 1e-12))
    eps, err = required_epsilon(
        hist,
        None if blue is None else blue.scales,
        sensitivity,
        d,
        p,
        method=method,
        accuracy=accuracy,
        cap=limit,
    )
    base: dict[str, Any] = {
        "query": q,
        "half_width": d,
        "level": p,
        "sensitivity": sensitivity,
        "history_scales": None if blue is None else blue.scales,
    }
    if eps == 0.0:
        assert blue is not None and hist is not None
        post = Posterior.from_blue(
            blue, method=method, accuracy=accuracy, support=support,
            coefficients=q.coefficients, error=hist,
        )  # fmt: skip
        lo, hi = post.interval(p)
        return Plan(
            **base,
            status="history",
            posterior=post,
            interval_half_width=(hi - lo) / 2.0,
            confidence=float(post.error.prob_within(d)),
        )
    if err is None:
        if max_epsilon is not None and limit < cap:
            why = f"above max_epsilon={max_epsilon:.6g}"
        else:
            why = cap_reason or f"above eps={cap:.6g}"
        need = f"eps={eps:.6g}" if math.isfinite(eps) else f"more than eps={limit:.6g}"
        return Plan(
            **base,
            status="refused",
            reason=f"needs {need} for one fresh answer, {why}; nothing spent",
        )
    return Plan(
        **base,
        status="fresh",
        epsilon=eps,
        error=err,
        interval_half_width=err.half_width(p),
        confidence=float(err.prob_within(d)),
    )


def _same_blue(plan: Plan, history: History) -> tuple[bool, BLUE | None]:
    """(whether the query's BLUE from ``history`` is the plan's, that BLUE or None)."""
    try:
        blue = history.blue(plan.query.coefficients)
    except NotEstimable:
        return plan.history_scales is None, None
    old = plan.history_scales
    if old is None:
        return False, blue
    new = blue.scales
    n = old.size
    if new.size < n:
        return False, blue
    top = float(np.max(old, initial=0.0))
    same = bool(
        np.all(np.abs(new[n:]) <= 1e-12 * top)
        and np.allclose(new[:n], old, rtol=1e-9, atol=1e-12 * top)
    )
    return same, blue


def still_valid(plan: Plan, history: History) -> bool:
    """Whether ``plan`` (made on an earlier state) holds for ``history`` unchanged.

    It does when the query's BLUE from ``history`` is the one the plan was made from: the
    same weights on the answers the plan saw and none on the answers added since (a new
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
    return replace(plan, posterior=fresh, history_scales=blue.scales)


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
    )
