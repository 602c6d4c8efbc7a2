"""Checker rules for the mechanisms and for maps over the records (paper 002 Defs. 3.3-3.5).

LapMech (L1), GaussMech (L2) and ExpMech (score sensitivity, public candidates) cost
eps * Delta / the calibrated sensitivity; MapRecords composes sequentially over the
records, one changed. See ``PROOF.md``.
"""

from __future__ import annotations

import math

from dpbayes.programs.certificate import _CAP, _FDIV, INF, Bound, Step
from dpbayes.programs.checker_base import (
    CheckerBase,
    _why,
    numeric_shape,
    public_bound,
    record_bound,
)
from dpbayes.programs.terms import Term

__all__ = ["MechanismRules"]


class MechanismRules(CheckerBase):
    """LapMech, GaussMech, ExpMech, MapRecords."""

    def _mech(self, s: Step, eps: float, delta: float, shape: tuple[int, ...] | None) -> Bound:
        self.mechanisms.append((s, eps, delta))
        return Bound("monad", metrics={"eps": eps, "delta": delta}, shape=shape)

    def _unbounded(self, s: Step, reason: str, shape: tuple[int, ...] | None) -> Bound:
        return self.fail(s, "monad", reason, metrics={"eps": INF, "delta": 0.0}, shape=shape)

    def rule_lap_mech(self, t: Term) -> tuple[Bound, Step]:
        v, i = self.visit(t.args[0])
        mech = t.info["mechanism"]  # the object the interpreter runs: one source of truth
        e, sens = mech.epsilon, mech.sensitivity
        s = self.step(
            "LapMech", f"lapMech(eps={e:g}, [{i}], calibrated to L1 sensitivity {sens:g})"
        )
        d = v.get("L1")
        if math.isinf(d):
            return self._unbounded(
                s, f"the value [{i}] has unbounded L1 sensitivity" + _why(v), v.shape
            ), s
        cost = e * d / sens
        s.note = f"Delta_1 = {d:.6g}: eps * Delta / sensitivity = {cost:.6g}"
        if d > sens * (1 + 1e-12):
            s.note += f"; noise too small for the sensitivity ({d:.6g} > {sens:g})"
        return self._mech(s, cost, 0.0, v.shape), s

    def rule_gauss_mech(self, t: Term) -> tuple[Bound, Step]:
        v, i = self.visit(t.args[0])
        mech = t.info["mechanism"]
        e, dl, sens = mech.epsilon, mech.delta, mech.sensitivity
        s = self.step(
            "GaussMech", f"gaussMech(eps={e:g}, delta={dl:g}, [{i}], L2 sensitivity {sens:g})"
        )
        d = v.get("L2")
        if math.isinf(d):
            return self._unbounded(
                s, f"the value [{i}] has unbounded L2 sensitivity" + _why(v), v.shape
            ), s
        if d > sens * (1 + 1e-12):
            return self._unbounded(
                s,
                f"noise too small for the sensitivity: sigma is "
                f"calibrated to L2 sensitivity {sens:g} but the value moves by "
                f"{d:.6g}",
                v.shape,
            ), s
        s.note = f"Delta_2 = {d:.6g} <= {sens:g}"
        if d == 0:
            return self._mech(s, 0.0, 0.0, v.shape), s
        return self._mech(s, e, dl, v.shape), s

    def rule_exp_mech(self, t: Term) -> tuple[Bound, Step]:
        r, score, cands = t.args
        mech = t.info["mechanism"]
        # exp(eps u / (2 sens)); a monotonic mechanism drops the 2, which doubles the cost
        e, sens = mech.epsilon * (2.0 if mech.monotonic else 1.0), mech.sensitivity
        shapes = set()
        for c in cands:
            if not isinstance(c, Term):
                shapes.add(numeric_shape(c))
                continue
            b, ic = self.visit(c)
            if not b.equal:
                s = self.step("ExpMech", f"expMech(eps={e:g}, candidate [{ic}])")
                return self._unbounded(
                    s,
                    f"the candidate [{ic}] depends on private data ({b.text()}): candidates "
                    "must be public, the chosen one is released as it is",
                    None,
                ), s
            shapes.add(b.shape if b.kind == "value" else None)
        shape = shapes.pop() if len(shapes) == 1 else None
        with self.binding(r, public_bound("value", shape)):
            u, iu = self.visit(score)
        s = self.step(
            "ExpMech",
            f"expMech(eps={e:g}, score [{iu}], {len(cands)} public "
            f"candidates, calibrated to sensitivity {sens:g})",
        )
        if u.shape is not None and math.prod(u.shape) != 1:
            raise TypeError(f"the score must be a real number, got shape {u.shape}")
        d = u.get("L1")
        if math.isinf(d):
            return self._unbounded(s, "the score has unbounded sensitivity" + _why(u), shape), s
        cost = e * d / sens
        s.note = f"score sensitivity {d:.6g}: eps * Delta / sensitivity = {cost:.6g}"
        if d > sens * (1 + 1e-12):
            s.note += f"; noise too small for the sensitivity ({d:.6g} > {sens:g})"
        return self._mech(s, cost, 0.0, shape), s

    def rule_map_records(self, t: Term) -> tuple[Bound, Step]:
        db_t, y, body_t = t.args
        db, idb = self.visit(db_t)
        assert db.db is not None
        n = int(db.db["n"])
        rec = record_bound(db.db)
        changed = Bound("value", metrics={"L1": rec, "L2": rec}, coords=(rec,), shape=())
        # the record that differs, and the n - 1 records that are equal in both runs (their
        # f may still read other private data): sequential composition over the n records
        with self.binding(y, changed):
            body, ib = self.visit(body_t)
        with self.binding(y, public_bound("value", ())):
            same, isame = self.visit(body_t)
        s = self.step(
            "MapRecords (composition over the records, one differs)",
            f"map [{ib}] (changed record), [{isame}] (the other {n - 1}) over [{idb}]",
        )
        shape = None if body.shape is None else (n, *body.shape)
        if body.equal and same.equal:
            return public_bound("monad", shape), s
        m = {
            k: min(
                _CAP.get(k, INF),
                body.get(k) + (n - 1) * same.get(k) if same.get(k) else body.get(k),
            )
            for k in ("eps", "delta", *_FDIV)
        }
        m["delta"] = min(m["delta"], 1.0)
        if not same.equal:
            s.note = f"f also reads private data through the other records: {n - 1} more times"
        return Bound(
            "monad", metrics=m, blame=self.blame_of(body, same, metric="eps"), shape=shape
        ), s
