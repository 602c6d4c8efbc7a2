"""Checker rules for values: inputs, constants, variables and Lipschitz arithmetic.

Paper 002 §5: Private/Const/Var, and the sensitivity of +, -, clip, scaling by a public
constant, the 0/1 equality score and projections, per coordinate and in the L1/L2
metrics, under numpy broadcasting (a coordinate copied m times counts m times in L1 and
sqrt(m) times in L2). See ``PROOF.md`` for each rule's argument.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dpbayes.programs import outward
from dpbayes.programs.certificate import INF, Bound, Step
from dpbayes.programs.checker_base import CheckerBase, _why, numeric_shape, public_bound
from dpbayes.programs.interpreter import public_value
from dpbayes.programs.terms import Term

__all__ = ["ValueRules", "spread"]


def _groups(idx: np.ndarray, w: np.ndarray, n_in: int) -> list[np.ndarray]:
    """The weights w_j of the output coordinates J_i that copy input coordinate i."""
    order = np.argsort(idx, kind="stable")
    ends = np.cumsum(np.bincount(idx, minlength=n_in))
    return [g for g in np.split(w[order], ends[:-1]) if g.size]


def spread(
    b: Bound, shape_out: tuple[int, ...], weight: np.ndarray | None = None
) -> tuple[np.ndarray, float, float]:
    """Sensitivity of ``weight * broadcast_to(value, shape_out)`` for a value bounded by ``b``.

    Returns (per-coordinate bounds, L1, L2). Numpy broadcasting copies input coordinate i
    to a set J_i of output coordinates; with weights w: L1 <= L1(b) * max_i sum_{J_i} |w_j|
    and L2 <= L2(b) * sqrt(max_i sum_{J_i} w_j^2), and both are also bounded by the norms of
    the per-coordinate bounds |w_j| c_{i(j)}. Every product, sum and norm is rounded up
    (:mod:`~dpbayes.programs.outward`): none underflows to 0 (``1e-162 * 1e-170`` is the
    smallest subnormal, not 0) and the norms are scaled (no square underflows).
    """
    assert b.shape is not None
    n_in = math.prod(b.shape)
    size = math.prod(shape_out)
    if not size:
        return np.zeros(0), 0.0, 0.0
    idx = np.broadcast_to(np.arange(n_in).reshape(b.shape), shape_out).ravel()
    if b.coords is not None and len(b.coords) == n_in:
        c_in = np.asarray(b.coords, dtype=float)
    else:
        c_in = np.full(n_in, min(b.get("L1"), b.get("L2")))  # |x_i| <= ||x||_2 <= ||x||_1
    if weight is None:
        w = np.ones(size)
    else:
        w = np.abs(np.broadcast_to(np.asarray(weight, dtype=float), shape_out)).ravel()
    per = outward.vec_mul(w, c_in[idx])
    groups = _groups(idx, w, n_in)
    g1 = max(outward.add(*g.tolist()) for g in groups)  # max_i sum_{J_i} |w_j|
    g2 = max(outward.hypot(g.tolist()) for g in groups)  # max_i sqrt(sum_{J_i} w_j^2)
    l1 = min(outward.add(*per.tolist()), outward.mul(g1, b.get("L1")))
    l2 = min(outward.hypot(per.tolist()), outward.mul(g2, b.get("L2")))
    return per, l1, l2


class ValueRules(CheckerBase):
    """Private, Const, Var, Add, Neg, Clip, Mul, EqScore, Proj."""

    def rule_private(self, t: Term) -> tuple[Bound, Step]:
        s = self.step("Private", f"input {t.info['name']}")
        if self.db is not None and t is not self.db:
            self.reject(
                s,
                f"the program reads a private input ({t.info['name']!r}) other than its own "
                f"({self.db.info['name']!r}): its certificate states only the program's input",
            )
        return Bound("db", db=dict(t.info)), s

    def rule_const(self, t: Term) -> tuple[Bound, Step]:
        v = t.args[0]
        text = repr(v) if len(repr(v)) < 40 else f"{type(v).__name__} constant"
        return public_bound("value", numeric_shape(v)), self.step("Const", text)

    def rule_var(self, t: Term) -> tuple[Bound, Step]:
        b = self.vars[t.uid][0]
        return b, self.step("Var", str(t.info.get("name")))

    # ---------------------------------------------------------------- arithmetic
    @staticmethod
    def _out_shape(*shapes: tuple[int, ...] | None) -> tuple[int, ...] | None:
        """numpy's broadcast shape, None if an operand's shape is unknown."""
        if any(sh is None for sh in shapes):
            return None
        try:
            return tuple(np.broadcast_shapes(*shapes))  # type: ignore[arg-type]
        except ValueError:
            raise TypeError(f"shapes {list(shapes)} do not broadcast together") from None

    def _broadcast_shape(
        self, s: Step, bounds: list[tuple[Bound, int]]
    ) -> tuple[tuple[int, ...] | None, Bound | None]:
        """The output shape of a broadcasting operation, or a failed bound."""
        for b, i in bounds:
            if b.shape is None and not all(x.equal for x, _ in bounds):
                return None, self.fail(
                    s,
                    "value",
                    f"the shape of [{i}] is not known when checking, so how many times a "
                    "private coordinate is copied by broadcasting cannot be bounded",
                )
        return self._out_shape(*(b.shape for b, _ in bounds)), None

    def rule_add(self, t: Term) -> tuple[Bound, Step]:
        (a, ia), (b, ib) = self.visit(t.args[0]), self.visit(t.args[1])
        s = self.step("Add (sensitivities add; broadcasting copies)", f"[{ia}] + [{ib}]")
        shape, failed = self._broadcast_shape(s, [(a, ia), (b, ib)])
        if failed is not None:
            return failed, s
        if a.equal and b.equal:
            return public_bound("value", shape), s
        assert shape is not None
        parts = [spread(x, shape) for x in (a, b) if not x.equal]
        per = parts[0][0] if len(parts) == 1 else outward.vec_add(parts[0][0], parts[1][0])
        m = {"L1": outward.add(*(p[1] for p in parts)), "L2": outward.add(*(p[2] for p in parts))}
        return Bound(
            "value", metrics=m, coords=tuple(per), shape=shape, blame=self.blame_of(a, b)
        ), s

    def rule_neg(self, t: Term) -> tuple[Bound, Step]:
        a, ia = self.visit(t.args[0])
        s = self.step("Neg (1-Lipschitz)", f"-[{ia}]")
        if a.equal:
            return public_bound("value", a.shape), s
        m = {k: a.get(k) for k in ("L1", "L2")}
        return Bound("value", metrics=m, coords=a.coords, shape=a.shape, blame=a.blame), s

    def rule_clip(self, t: Term) -> tuple[Bound, Step]:
        a, ia = self.visit(t.args[0])
        lo, hi = t.args[1], t.args[2]
        s = self.step("Clip (1-Lipschitz; range bounds the change)", f"clip([{ia}], {lo}, {hi})")
        if a.equal:
            return public_bound("value", a.shape), s
        width = outward.sub(hi, lo) if lo is not None and hi is not None else INF
        if a.coords is not None:
            coords: tuple[float, ...] | None = tuple(min(c, width) for c in a.coords)
        elif a.shape is not None and math.isfinite(width):
            coords = (width,) * math.prod(a.shape)
        else:
            coords = None
        l1, l2 = a.get("L1"), a.get("L2")
        if coords is not None:
            l1 = min(l1, outward.add(*coords))
            l2 = min(l2, outward.hypot(coords))
        if math.isfinite(width) and coords is not None:
            s.note = f"every coordinate stays in [{lo:g}, {hi:g}]: it moves by <= {width:g}"
        blame = a.blame if math.isinf(l1) else None
        return Bound(
            "value", metrics={"L1": l1, "L2": l2}, coords=coords, shape=a.shape, blame=blame
        ), s

    def _known_public(self, t: Term, b: Bound) -> Any:
        """The value of a public factor known when checking (closed, reads no data), or None."""
        if not b.equal or t.free:
            return None
        try:
            return np.asarray(public_value(t), dtype=float)
        except (TypeError, ValueError):
            return None

    def rule_mul(self, t: Term) -> tuple[Bound, Step]:
        (c, ic), (a, ia) = self.visit(t.args[0]), self.visit(t.args[1])
        s = self.step("Mul (scaling by a public constant)", f"[{ic}] * [{ia}]")
        if c.equal and a.equal:
            return public_bound("value", self._out_shape(c.shape, a.shape)), s
        # the public factor's value, as the interpreter will compute it (closed, no data)
        w, other, io = self._known_public(t.args[0], c), a, ia
        if w is None:
            w, other, io = self._known_public(t.args[1], a), c, ic
        if w is None:
            return self.fail(
                s,
                "value",
                "a product is only bounded when one factor is a public constant (a value "
                "known when checking)",
                shape=self._out_shape(c.shape, a.shape),
            ), s
        shape, failed = self._broadcast_shape(s, [(public_bound("value", w.shape), 0), (other, io)])
        if failed is not None:
            return failed, s
        assert shape is not None
        per, l1, l2 = spread(other, shape, w)
        s.note = f"|public factor| <= {float(np.max(np.abs(w))) if w.size else 0.0:.6g}"
        # 0/1 weights keep integer levels (0 * x = 0 and 1 * x = x, for x in 0..levels-1)
        keeps = other.levels is not None and bool(np.all((w == 0) | (w == 1)))
        return Bound(
            "value",
            metrics={"L1": l1, "L2": l2},
            coords=tuple(per),
            shape=shape,
            blame=other.blame,
            levels=other.levels if keeps else None,
        ), s

    def rule_eq_score(self, t: Term) -> tuple[Bound, Step]:
        (a, ia), (b, ib) = self.visit(t.args[0]), self.visit(t.args[1])
        s = self.step("EqScore (range [0, 1])", f"[{ia}] == [{ib}]")
        if a.equal and b.equal:
            return public_bound("value", ()), s
        return Bound("value", metrics={"L1": 1.0, "L2": 1.0}, coords=(1.0,), shape=(), levels=2), s

    def rule_proj(self, t: Term) -> tuple[Bound, Step]:
        a, ia = self.visit(t.args[0])
        i = t.args[1]
        s = self.step("Proj", f"[{ia}][{i}]")
        sub: tuple[int, ...] | None = None
        if a.shape is not None:
            if len(a.shape) == 0 or i >= a.shape[0]:
                raise TypeError(f"index {i} is out of range for a value of shape {a.shape}")
            sub = a.shape[1:]
        if a.equal:
            return public_bound("value", sub), s
        l1, l2 = a.get("L1"), a.get("L2")
        coords = None
        if sub is not None and a.coords is not None:
            k = math.prod(sub)
            coords = a.coords[i * k : (i + 1) * k]
            l1 = min(l1, outward.add(*coords))
            l2 = min(l2, outward.hypot(coords))
        if math.isinf(l1):
            return self.fail(
                s, "value", "the component has unbounded sensitivity" + _why(a), shape=sub
            ), s
        return Bound(
            "value", metrics={"L1": l1, "L2": l2}, coords=coords, shape=sub, levels=a.levels
        ), s
