"""The checker's state and helpers, shared by the rule modules (paper 002 §5).

:class:`CheckerBase` records the derivation (numbered steps), memoises the bound of every
visited sub-term under the current bindings of its free variables, binds variables to
bounds for the scope of a binder and dispatches a term to ``rule_<op>``; the rules live in
:mod:`~dpbayes.programs.rules_values`, :mod:`~dpbayes.programs.rules_distributions`,
:mod:`~dpbayes.programs.rules_monad` and :mod:`~dpbayes.programs.rules_mechanisms`; the
soundness argument of each rule is in ``PROOF.md`` beside them.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, NoReturn

import numpy as np

from dpbayes.programs.certificate import INF, Bound, NotPrivate, Step
from dpbayes.programs.terms import Term

__all__ = ["CheckerBase", "public_bound", "record_bound"]


class CheckerBase:
    """One derivation: visits the terms of a program and records its steps.

    ``db`` is the program's own private input (the only one the checker accepts).
    """

    def __init__(self, db: Term | None = None, name: str = "program") -> None:
        self.db = db
        self.name = name
        self.steps: list[Step] = []
        self.memo: dict[tuple[int, tuple[int, ...]], tuple[Bound, int]] = {}
        self.vars: dict[int, tuple[Bound, int]] = {}
        self.generation = 0
        self.mechanisms: list[tuple[Step, float, float]] = []

    def step(self, rule: str, term: str) -> Step:
        s = Step(len(self.steps) + 1, rule, term)
        self.steps.append(s)
        return s

    def visit(self, t: Term) -> tuple[Bound, int]:
        try:
            key = (t.uid, tuple(self.vars[v][1] for v in sorted(t.free)))
        except KeyError:
            raise TypeError(f"{t!r} uses a variable outside its binder") from None
        if key in self.memo:
            return self.memo[key]
        method = getattr(self, f"rule_{t.op}", None)
        if method is None:
            raise TypeError(f"the checker has no rule for {t.op!r}")
        b, s = method(t)
        s.bound = b.text()
        self.memo[key] = (b, s.index)
        return b, s.index

    @contextmanager
    def binding(self, var: Term, bound: Bound) -> Iterator[None]:
        """Bind ``var`` to ``bound`` for the scope of a binder's body."""
        self.generation += 1
        old = self.vars.get(var.uid)
        self.vars[var.uid] = (bound, self.generation)
        try:
            yield
        finally:
            if old is None:
                del self.vars[var.uid]
            else:
                self.vars[var.uid] = old

    def fail(self, s: Step, kind: str, reason: str, **kw: Any) -> Bound:
        s.reason = reason
        s.note = (s.note + "; " if s.note else "") + reason
        return Bound(kind, blame=s, **kw)

    def reject(self, s: Step, reason: str) -> NoReturn:
        """Refuse the whole program at step ``s`` (a construct no bound can repair)."""
        s.reason = reason
        s.note = (s.note + "; " if s.note else "") + reason
        raise NotPrivate(
            f"{self.name} rejected at step [{s.index}] {s.rule}: {reason}", s, self.steps
        )

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


def public_bound(kind: str = "value", shape: tuple[int, ...] | None = None, **kw: Any) -> Bound:
    """Equal in both runs (a public value, distribution or actual distribution)."""
    return Bound(kind, equal=True, shape=shape, **kw)


def record_bound(info: Any) -> float:
    """How far the one record that differs between neighbours can move (as a number).

    Booleans: 1; category indices in 0..k-1: k - 1; reals: the declared bound (None,
    unbounded records: infinity).
    """
    if info["record"] == "real":
        return INF if info["bound"] is None else float(info["bound"])
    if info["record"] == "category":
        return float(info["k"] - 1)
    return 1.0


def numeric_shape(value: Any) -> tuple[int, ...] | None:
    """The shape of a public constant as numpy sees it, or None if it is not numeric."""
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        return None
    return tuple(int(d) for d in arr.shape)


def _why(*bounds: Bound) -> str:
    for b in bounds:
        if b.blame is not None and b.blame.reason:
            return f" (step [{b.blame.index}]: {b.blame.reason})"
    return ""
