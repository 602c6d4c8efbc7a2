"""The checker's state and helpers, shared by the rule modules (paper 002 §5).

:class:`CheckerBase` records the derivation (numbered steps), memoises the bound of every
visited sub-term, binds variables to bounds and dispatches a term to ``rule_<op>``; the
rules live in :mod:`~dpbayes.programs.rules_values`, :mod:`~dpbayes.programs.rules_distributions`,
:mod:`~dpbayes.programs.rules_monad` and :mod:`~dpbayes.programs.rules_mechanisms`.
"""

from __future__ import annotations

import math
from typing import Any

from dpbayes.programs.certificate import Bound, Step
from dpbayes.programs.terms import Term

__all__ = ["CheckerBase"]


class CheckerBase:
    """One derivation: visits the terms of a program and records its steps."""

    def __init__(self) -> None:
        self.steps: list[Step] = []
        self.memo: dict[int, tuple[Bound, int]] = {}
        self.vars: dict[int, Bound] = {}
        self.mechanisms: list[tuple[Step, float, float]] = []

    def step(self, rule: str, term: str) -> Step:
        s = Step(len(self.steps) + 1, rule, term)
        self.steps.append(s)
        return s

    def visit(self, t: Term) -> tuple[Bound, int]:
        if t.uid in self.memo:
            return self.memo[t.uid]
        method = getattr(self, f"rule_{t.op}", None)
        if method is None:
            raise TypeError(f"the checker has no rule for {t.op!r}")
        b, s = method(t)
        s.bound = b.text()
        self.memo[t.uid] = (b, s.index)
        return b, s.index

    def fail(self, s: Step, kind: str, reason: str, **kw: Any) -> Bound:
        s.reason = reason
        s.note = (s.note + "; " if s.note else "") + reason
        return Bound(kind, blame=s, **kw)

    @staticmethod
    def blame_of(*bounds: Bound, metric: str = "L1") -> Step | None:
        """The blame of the first bound that is infinite in ``metric`` (else the first)."""
        for b in bounds:
            if b.blame is not None and math.isinf(b.get(metric)):
                return b.blame
        for b in bounds:
            if b.blame is not None:
                return b.blame
        return None

    def bind_var(self, name: str, bound: Bound) -> Term:
        v = Term("var", (), "value", {"name": name})
        self.vars[v.uid] = bound
        return v


def _why(*bounds: Bound) -> str:
    for b in bounds:
        if b.blame is not None and b.blame.reason:
            return f" (step [{b.blame.index}]: {b.blame.reason})"
    return ""
