"""The service's in-memory state and its replies: snapshots, cached plans, the spends
its rows record, and the words it uses for its composition."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpbayes.answers import History
from dpbayes.answers.planning import Answer, Plan
from dpbayes.privacy.accountant import Spend

__all__ = ["Busy", "Conflict", "Reply", "describe_composition"]


class Conflict(ValueError):
    """A well-formed request the current state refuses (budget, duplicate name)."""


class Busy(RuntimeError):
    """The ledger kept changing while a request was planned; nothing was spent (retry)."""


@dataclass(frozen=True)
class Reply:
    answer: Answer
    remaining_epsilon: float
    spent_epsilon: float
    density: dict[str, list[float]] | None = None


@dataclass(frozen=True)
class _Snapshot:
    """The in-memory state as of budget ``version``: replaced, never changed."""

    version: int
    last_id: int  # the largest answers.id in ``history``
    history: History
    total: tuple[float, float]
    composition: str = "basic"


@dataclass
class _Planned:
    """A cached plan, the state it holds for, and once asked for, its posterior density
    around the estimate."""

    plan: Plan
    state: tuple[int, int, tuple[float, float]]  # version, last_id, total of the snapshot
    density: tuple[list[float], list[float]] | None = None
    # a refusal of the planner itself (numerics, time limit): holds for this state only
    # (never carried over to a later one, where the query's BLUE may differ)
    final: bool = False


_COMPOSITION_NAMES = {
    "basic": "basic composition (eps adds up)",
    "pld": "privacy-loss-distribution (PLD) composition",
    "rdp": "Rényi (RDP) composition",
}


def describe_composition(composition: str, delta: float) -> str:
    """One line for the page and ``/api/budget``: how answers' spends add up."""
    at = "" if composition == "basic" else f" at delta={delta:.3g}"
    return (
        f"{_COMPOSITION_NAMES[composition]}{at} within a cell, parallel across disjoint "
        "cells (paper 000 Thms 5.1-5.2)"
    )


def _spend_of(row: Any) -> Spend:
    """The spend an ``answers`` row records (checked as a ledger file's entries are)."""
    return Spend.from_dict(
        {
            "epsilon": row.epsilon,
            "delta": row.delta,
            "label": row.query,
            "scope": json.loads(row.scope),
            "gaussian_ratio": row.gaussian_ratio,
        }
    )


def _density(plan: Plan) -> tuple[list[float], list[float]]:
    """The posterior density on 120 points spanning the interval widened by its width on
    each side, as offsets from the estimate (it does not depend on the estimate)."""
    post = plan.posterior
    err = plan.error if post is None else post.error
    assert err is not None
    half = plan.interval_half_width
    w = 2.0 * half if half > 0 else 1.0
    x = np.linspace(-half - w, half + w, 121)
    c = 1.0 - np.asarray(err.cdf(-x), dtype=float)  # P(answer <= estimate + x)
    mid = 0.5 * (x[1:] + x[:-1])
    pdf = np.diff(c) / np.diff(x)
    return mid.tolist(), [max(0.0, float(v)) for v in pdf]
