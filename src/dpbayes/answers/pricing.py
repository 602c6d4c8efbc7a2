"""A fresh answer's mechanism and its price: shared by the query engine and the service.

:func:`fresh_mechanism` builds the mechanism a fresh plan will release through (Laplace,
or the analytic Gaussian at the plan's (eps, delta), whose sigma the plan's error
distribution was computed at) and the guarantee that is charged (the Gaussian's records
sigma / Delta_2, so that tight composition composes its own privacy-loss distribution).
:func:`cheapest` picks, among fresh plans in different noises, the one whose charge raises
the accountant's composed spent eps least (``noise="auto"``): a greedy choice, one answer
at a time (see docs/query-answering.md, Limits).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from dpbayes.answers.planning import Plan
from dpbayes.answers.queries import Query
from dpbayes.privacy.accountant import Accountant
from dpbayes.privacy.guarantee import Guarantee, Neighbours
from dpbayes.privacy.mechanisms import GaussianMechanism, LaplaceMechanism

__all__ = ["cheapest", "fits", "fresh_mechanism", "noise_of", "scope_of"]

_TOLERANCE = 1e-9  # the accountant's relative slack


def scope_of(q: Query) -> list[str]:
    """The parts of the data a query reads: its cells (parallel composition, Thm 5.2)."""
    return [f"cell:{j}" for j in q.cells]


def fresh_mechanism(
    plan: Plan, *, simulation: bool, user: dict[str, Any]
) -> tuple[LaplaceMechanism | GaussianMechanism, Guarantee]:
    """The mechanism of a fresh ``plan`` and the guarantee its release carries (the one
    charged), with the privacy unit's details ``user``."""
    mech: LaplaceMechanism | GaussianMechanism
    if plan.noise == "gaussian":
        mech = GaussianMechanism(
            epsilon=plan.epsilon,
            delta=plan.delta,
            sensitivity=plan.sensitivity,
            neighbours=Neighbours.ADD_REMOVE,
            name="gaussian (query engine)",
        )
        # the plan's error distribution is at this very sigma (same function of eps, delta)
        assert plan.sigma is not None and mech.sigma == plan.sigma
    else:
        mech = LaplaceMechanism(
            epsilon=plan.epsilon,
            sensitivity=plan.sensitivity,
            neighbours=Neighbours.ADD_REMOVE,
            name="laplace (query engine)",
        )
    g = mech.guarantee(simulation=simulation)
    return mech, replace(g, details={**g.details, **user})


def noise_of(plan: Plan) -> dict[str, Any]:
    """The noise arguments of a plan's answer for ``History.add`` and ``AnswerRecord``
    (none for Laplace, so Laplace records are written as before)."""
    if plan.noise == "gaussian":
        return {"noise": "gaussian", "sigma": plan.sigma, "delta": plan.delta}
    return {}


def fits(accountant: Accountant, cost: Guarantee, scope: list[str]) -> bool:
    """Whether charging ``cost`` on ``scope`` would fit now (advisory; the charge checks
    again under the accountant's lock)."""
    (te, td), (eps, dlt) = accountant.total, accountant.spent_after(cost, scope=scope)
    return eps <= te * (1 + _TOLERANCE) and dlt <= td * (1 + _TOLERANCE)


def cheapest(
    plans: list[Plan], accountant: Accountant, *, simulation: bool, user: dict[str, Any]
) -> Plan:
    """Of plans in different noises, the fresh one whose charge raises ``accountant``'s
    composed spent eps least (among those that fit the budget; the first on a tie), with
    the comparison in its ``choice``; the first plan if none is fresh."""
    fresh = [pl for pl in plans if pl.status == "fresh"]
    if len(fresh) < 2:
        return fresh[0] if fresh else plans[0]
    (te, td), (now, _) = accountant.total, accountant.spent
    priced = []
    for i, pl in enumerate(fresh):
        cost = fresh_mechanism(pl, simulation=simulation, user=user)[1]
        eps, dlt = accountant.spent_after(cost, scope=scope_of(pl.query))
        fits = eps <= te * (1 + _TOLERANCE) and dlt <= td * (1 + _TOLERANCE)
        priced.append((not fits, eps, i, pl))
    best = min(priced, key=lambda t: t[:3])[3]
    text = "; ".join(
        f"{pl.noise} (eps={pl.epsilon:.4g}"
        + (f", sigma={pl.sigma:.4g}, delta={pl.delta:.3g}" if pl.noise == "gaussian" else "")
        + f") would bring the spent eps from {now:.6g} to {eps:.6g}"
        + (" (over the budget)" if over else "")
        for over, eps, _, pl in priced
    )
    why = f"chose {best.noise} under {accountant.composition} composition: {text}"
    return replace(best, choice=why)
