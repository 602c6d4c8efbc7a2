"""Checker rules for symbolic distributions and their parameters (paper 002 §5).

Dist (parameter sensitivities; Hellinger and KL of a Normal with public variance),
GetParams/GetMean, and Divergence scores by the triangle inequality (metrics only: KL
scores have unbounded sensitivity).
"""

from __future__ import annotations

import math

from dpbayes.programs.certificate import EQUAL_VALUE, Bound, Step
from dpbayes.programs.checker_base import CheckerBase, _why
from dpbayes.programs.terms import Term

__all__ = ["DistributionRules"]


class DistributionRules(CheckerBase):
    """Dist, GetParams, GetMean, Divergence."""

    def rule_dist(self, t: Term) -> tuple[Bound, Step]:
        fam = t.info["family"]
        subs = [self.visit(a) for a in t.args]
        s = self.step("Dist", f"{fam}(" + ", ".join(f"[{i}]" for _, i in subs) + ")")
        if all(b.equal for b, _ in subs):
            return Bound("sym", equal=True), s
        coords = tuple(b.get("L1") for b, _ in subs)
        m = {"L1": sum(coords), "hellinger": 1.0, "tv": 1.0}
        if fam == "normal" and subs[1][0].equal and t.args[1].op == "const":
            var, d = float(t.args[1].args[0]), coords[0]
            if math.isfinite(d):
                m["hellinger"] = math.sqrt(-math.expm1(-(d**2) / (8 * var)))
                m["kl"] = d**2 / (2 * var)
                s.note = "Normal with public variance: H^2 = 1 - exp(-D^2/8v), KL = D^2/2v"
        blame = self.blame_of(*(b for b, _ in subs))
        return Bound("sym", metrics=m, coords=coords, blame=blame), s

    def rule_get_params(self, t: Term) -> tuple[Bound, Step]:
        d, i = self.visit(t.args[0])
        s = self.step("GetParams", f"getParams([{i}])")
        if d.equal:
            return EQUAL_VALUE, s
        if d.coords is None:
            return self.fail(s, "value", "no bound on the parameters of this distribution"), s
        c = d.coords
        m = {
            "L1": min(d.get("L1"), sum(c)),
            "L2": min(d.get("L2"), math.sqrt(sum(x * x for x in c))),
        }
        return Bound("value", metrics=m, coords=c, blame=d.blame), s

    def rule_get_mean(self, t: Term) -> tuple[Bound, Step]:
        d, i = self.visit(t.args[0])
        s = self.step("GetMean", f"getMean([{i}])")
        if d.equal:
            return EQUAL_VALUE, s
        if d.coords is None or math.isinf(d.coords[0]):
            return self.fail(
                s, "value", "the mean of this distribution has unbounded sensitivity" + _why(d)
            ), s
        c = d.coords[0]
        return Bound("value", metrics={"L1": c, "L2": c}, coords=(c,)), s

    def rule_divergence(self, t: Term) -> tuple[Bound, Step]:
        div = t.info["divergence"]
        (p, ip), (q, iq) = self.visit(t.args[0]), self.visit(t.args[1])
        s = self.step(f"Divergence {div} (triangle inequality)", f"{div}([{ip}], [{iq}])")
        if p.equal and q.equal:
            return EQUAL_VALUE, s
        if div == "kl":
            return self.fail(
                s,
                "value",
                "KL is not a metric: no triangle inequality bounds "
                "|KL(p, r) - KL(p', r)|, the score has unbounded "
                "sensitivity",
            ), s
        d = p.get(div) + q.get(div)
        if math.isinf(d):
            return self.fail(s, "value", f"no {div} bound on the arguments" + _why(p, q)), s
        s.note = f"|{div}(p, r) - {div}(p', r)| <= {div}(p, p') for a metric"
        return Bound("value", metrics={"L1": d, "L2": d}, coords=(d,)), s
