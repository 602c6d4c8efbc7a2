"""A price before the purchase: what a query would cost now, spending nothing.

A quote runs the planning half of :meth:`QueryService.ask` on the current snapshot (the
history of noisy answers, the budget) and stops before the accountant, the noise and the
database: it reads no data (the plan depends only on released answers, the query and its
requirement), so it is post-processing of what is already public and costs nothing. It
holds while nobody releases another answer: a later answer can make the query free (its
cells are then better known) or dearer on a tighter budget; the query itself is planned
again when it is asked.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dpbayes.answers import Query
from dpbayes.answers.limits import check_time, time_limit
from dpbayes.answers.pricing import fits, scope_of
from dpbayes.privacy.validation import check_positive, check_probability

if TYPE_CHECKING:
    from dpbayes.service.state import QueryService

__all__ = ["Quote", "quote"]


@dataclass(frozen=True)
class Quote:
    """``status``: ``"free"`` (the history meets the requirement), ``"fresh"`` (one new
    answer at ``epsilon``) or ``"refused"`` (``epsilon`` is None; ``reason`` says why)."""

    query: str
    status: str
    epsilon: float | None
    remaining_epsilon: float
    reason: str
    spent_after_epsilon: float | None = None  # the budget spent after it (None: refused)


def quote(
    svc: QueryService,
    query: Query,
    *,
    half_width: float,
    confidence: float,
    deadline: float | None = None,
    cached_only: bool = False,
) -> Quote | None:
    """What ``svc.ask(query, half_width=..., confidence=...)`` would spend now.
    ``cached_only``: ``None`` unless the plan is known without an eps search."""
    d = check_positive(half_width, "half_width")
    p = check_probability(confidence, "confidence", open_interval=True)
    if deadline is None and svc.time_limit is not None:
        deadline = time.monotonic() + svc.time_limit
    with time_limit(None if deadline is None else deadline - time.monotonic()):
        check_time()
        snap = svc._current()
        got = svc.cached_plan(snap, query, d, p) if cached_only else svc._plan(snap, query, d, p)
    if got is None:
        return None
    plan = got.plan
    remaining = svc.accountant.remaining[0]
    text = query.text
    if plan.status == "history":
        n = len(snap.history)
        why = f"met by the history of {n} answers: nothing would be spent, no noise drawn"
        return Quote(text, "free", 0.0, remaining, why, svc.accountant.spent[0])
    if plan.status == "refused":
        return Quote(text, "refused", None, remaining, plan.reason)
    scope = scope_of(query)
    cost = svc.cost(plan)
    if not fits(svc.accountant, cost, scope):
        return Quote(text, "refused", None, remaining, svc._budget_refusal(plan, scope).reason)
    acc = svc.accountant
    before, after = acc.spent[0], acc.spent_after(cost, scope=scope)[0]
    spent = (
        ""
        if acc.composition == "basic"
        else f"; under {acc.composition.upper()} composition the budget spent would go from "
        f"eps={before:.6g} to eps={after:.6g}"
    )
    kind = "" if plan.noise == "laplace" else f" (Gaussian, sigma={plan.sigma:.4g})"
    why = (
        f"one fresh answer at eps={plan.epsilon:.6g}{kind}{spent} (the price now: another "
        "analyst's answer may lower it before you ask)"
    )
    return Quote(text, "fresh", plan.epsilon, remaining, why, after)
