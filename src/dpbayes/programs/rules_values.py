"""Checker rules for values: inputs, constants, variables and Lipschitz arithmetic.

Paper 002 §5: Private/Const/Var, and the sensitivity of +, -, clip, scaling by a public
constant, the 0/1 equality score and projections, in the L1/L2 metrics per coordinate.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from dpbayes.programs.certificate import EQUAL_VALUE, Bound, Step
from dpbayes.programs.checker_base import CheckerBase, _why
from dpbayes.programs.terms import Term

__all__ = ["ValueRules"]


class ValueRules(CheckerBase):
    """Private, Const, Var, Add, Neg, Clip, Mul, EqScore, Proj."""

    def rule_private(self, t: Term) -> tuple[Bound, Step]:
        s = self.step("Private", f"input {t.info['name']}")
        return Bound("db", db=dict(t.info)), s

    def rule_const(self, t: Term) -> tuple[Bound, Step]:
        v = t.args[0]
        text = repr(v) if len(repr(v)) < 40 else f"{type(v).__name__} constant"
        return EQUAL_VALUE, self.step("Const", text)

    def rule_var(self, t: Term) -> tuple[Bound, Step]:
        b = self.vars.get(t.uid)
        if b is None:
            raise TypeError(f"variable {t.info.get('name')} is used outside its binder")
        return b, self.step("Var", str(t.info.get("name")))

    # ---------------------------------------------------------------- arithmetic
    def rule_add(self, t: Term) -> tuple[Bound, Step]:
        (a, ia), (b, ib) = self.visit(t.args[0]), self.visit(t.args[1])
        s = self.step("Add (sensitivities add)", f"[{ia}] + [{ib}]")
        if a.equal and b.equal:
            return EQUAL_VALUE, s
        coords = None
        if a.coords is not None and b.coords is not None and len(a.coords) == len(b.coords):
            coords = tuple(x + y for x, y in zip(a.coords, b.coords, strict=True))
        m = {k: a.get(k) + b.get(k) for k in ("L1", "L2")}
        return Bound("value", metrics=m, coords=coords, blame=self.blame_of(a, b)), s

    def rule_neg(self, t: Term) -> tuple[Bound, Step]:
        a, ia = self.visit(t.args[0])
        return replace(a), self.step("Neg (1-Lipschitz)", f"-[{ia}]")

    def rule_clip(self, t: Term) -> tuple[Bound, Step]:
        a, ia = self.visit(t.args[0])
        s = self.step(
            "Clip (1-Lipschitz post-processing)", f"clip([{ia}], {t.args[1]}, {t.args[2]})"
        )
        return replace(a, metrics={k: a.get(k) for k in ("L1", "L2")} if not a.equal else {}), s

    def rule_mul(self, t: Term) -> tuple[Bound, Step]:
        (c, ic), (a, ia) = self.visit(t.args[0]), self.visit(t.args[1])
        s = self.step("Mul (scaling by a public constant)", f"[{ic}] * [{ia}]")
        if c.equal and a.equal:
            return EQUAL_VALUE, s
        if t.args[0].op == "const":
            k, other = float(np.max(np.abs(np.asarray(t.args[0].args[0], dtype=float)))), a
        elif t.args[1].op == "const":
            k, other = float(np.max(np.abs(np.asarray(t.args[1].args[0], dtype=float)))), c
        else:
            return self.fail(
                s,
                "value",
                "a product of two values is only bounded when one factor is a public constant",
            ), s
        m = {key: k * other.get(key) for key in ("L1", "L2")}
        coords = None if other.coords is None else tuple(k * x for x in other.coords)
        return Bound("value", metrics=m, coords=coords, blame=other.blame), s

    def rule_eq_score(self, t: Term) -> tuple[Bound, Step]:
        (a, ia), (b, ib) = self.visit(t.args[0]), self.visit(t.args[1])
        s = self.step("EqScore (range [0, 1])", f"[{ia}] == [{ib}]")
        if a.equal and b.equal:
            return EQUAL_VALUE, s
        return Bound("value", metrics={"L1": 1.0, "L2": 1.0}, coords=(1.0,)), s

    def rule_proj(self, t: Term) -> tuple[Bound, Step]:
        a, ia = self.visit(t.args[0])
        i = t.args[1]
        s = self.step("Proj", f"[{ia}][{i}]")
        if a.equal:
            return EQUAL_VALUE, s
        c = a.coords[i] if a.coords is not None and i < len(a.coords) else a.get("L1")
        if math.isinf(c):
            return self.fail(s, "value", "the component has unbounded sensitivity" + _why(a)), s
        return Bound("value", metrics={"L1": c, "L2": c}, coords=(c,)), s
