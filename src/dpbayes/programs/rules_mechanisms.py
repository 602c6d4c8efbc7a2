"""Checker rules for the mechanisms and for maps over the records (paper 002 Defs. 3.3-3.5).

LapMech (L1), GaussMech (L2) and ExpMech (score sensitivity) cost eps * Delta / the
calibrated sensitivity; MapRecords composes sequentially over the records, one changed.
"""

from __future__ import annotations

import math

from dpbayes.programs.certificate import _CAP, _FDIV, EQUAL_VALUE, INF, Bound, Step
from dpbayes.programs.checker_base import CheckerBase, _why
from dpbayes.programs.terms import Term

__all__ = ["MechanismRules"]


class MechanismRules(CheckerBase):
    """LapMech, GaussMech, ExpMech, MapRecords."""

    def _mech(self, s: Step, eps: float, delta: float) -> Bound:
        self.mechanisms.append((s, eps, delta))
        if eps == 0 and delta == 0:
            return Bound("monad", equal=True)
        return Bound("monad", metrics={"eps": eps, "delta": delta})

    def rule_lap_mech(self, t: Term) -> tuple[Bound, Step]:
        v, i = self.visit(t.args[0])
        e, sens = t.info["epsilon"], t.info["sensitivity"]
        s = self.step(
            "LapMech", f"lapMech(eps={e:g}, [{i}], calibrated to L1 sensitivity {sens:g})"
        )
        d = v.get("L1")
        if math.isinf(d):
            return self.fail(
                s,
                "monad",
                f"the value [{i}] has unbounded L1 sensitivity" + _why(v),
                metrics={"eps": INF, "delta": 0.0},
            ), s
        cost = e * d / sens
        s.note = f"Delta_1 = {d:.6g}: eps * Delta / sensitivity = {cost:.6g}"
        if d > sens * (1 + 1e-12):
            s.note += f"; noise too small for the sensitivity ({d:.6g} > {sens:g})"
        return self._mech(s, cost, 0.0), s

    def rule_gauss_mech(self, t: Term) -> tuple[Bound, Step]:
        v, i = self.visit(t.args[0])
        e, dl, sens = t.info["epsilon"], t.info["delta"], t.info["sensitivity"]
        s = self.step(
            "GaussMech", f"gaussMech(eps={e:g}, delta={dl:g}, [{i}], L2 sensitivity {sens:g})"
        )
        d = v.get("L2")
        if math.isinf(d):
            return self.fail(
                s,
                "monad",
                f"the value [{i}] has unbounded L2 sensitivity" + _why(v),
                metrics={"eps": INF, "delta": 0.0},
            ), s
        if d > sens * (1 + 1e-12):
            return self.fail(
                s,
                "monad",
                f"noise too small for the sensitivity: sigma is "
                f"calibrated to L2 sensitivity {sens:g} but the value moves by "
                f"{d:.6g}",
                metrics={"eps": INF, "delta": 0.0},
            ), s
        s.note = f"Delta_2 = {d:.6g} <= {sens:g}"
        return self._mech(s, e if d > 0 else 0.0, dl if d > 0 else 0.0), s

    def rule_exp_mech(self, t: Term) -> tuple[Bound, Step]:
        score, cands = t.args
        e, sens = t.info["epsilon"], t.info["sensitivity"]
        r = self.bind_var("r", EQUAL_VALUE)
        body_t = score(r)
        if not isinstance(body_t, Term):
            body_t = Term("const", (body_t,), "value")
        u, iu = self.visit(body_t)
        s = self.step(
            "ExpMech",
            f"expMech(eps={e:g}, score [{iu}], {len(cands)} public "
            f"candidates, calibrated to sensitivity {sens:g})",
        )
        d = u.get("L1")
        if math.isinf(d):
            return self.fail(
                s,
                "monad",
                "the score has unbounded sensitivity" + _why(u),
                metrics={"eps": INF, "delta": 0.0},
            ), s
        cost = e * d / sens
        s.note = f"score sensitivity {d:.6g}: eps * Delta / sensitivity = {cost:.6g}"
        if d > sens * (1 + 1e-12):
            s.note += f"; noise too small for the sensitivity ({d:.6g} > {sens:g})"
        return self._mech(s, cost, 0.0), s

    def rule_map_records(self, t: Term) -> tuple[Bound, Step]:
        db, idb = self.visit(t.args[0])
        info = db.db or {}
        n = int(info.get("n", 1))
        if info.get("record") == "real":
            rec = info.get("bound")
        elif info.get("record") == "category":
            rec = float(info["k"] - 1)  # indices differ by at most k - 1
        else:
            rec = 1.0
        rb = (
            Bound("value", metrics={"L1": rec, "L2": rec}, coords=(rec,))
            if rec is not None
            else Bound("value")
        )
        if db.kind != "db" or db.equal:
            rb = EQUAL_VALUE
        # the record that differs, and the n - 1 records that are equal in both runs (their
        # f may still read other private data): sequential composition over the n records
        y = self.bind_var(t.info["var"], rb)
        body_t = t.args[1](y)
        y0 = self.bind_var(t.info["var"] + "'", EQUAL_VALUE)
        same_t = t.args[1](y0)
        for b in (body_t, same_t):
            if not isinstance(b, Term) or b.kind != "monad":
                raise TypeError("map_records needs f(record) to be an actual distribution")
        body, ib = self.visit(body_t)
        same, isame = self.visit(same_t)
        s = self.step(
            "MapRecords (composition over the records, one differs)",
            f"map [{ib}] (changed record), [{isame}] (the other {n - 1}) over [{idb}]",
        )
        if body.equal and same.equal:
            return Bound("monad", equal=True), s
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
        return Bound("monad", metrics=m, blame=self.blame_of(body, same, metric="eps")), s
