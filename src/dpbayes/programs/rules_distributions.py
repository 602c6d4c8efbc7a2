"""Checker rules for symbolic distributions and their parameters (paper 002 §5).

Dist (parameter sensitivities; Hellinger, TV and KL of a Normal whose variance is a public
constant), GetParams/GetMean, and Divergence scores by the triangle inequality (metrics
only: KL scores have unbounded sensitivity). See ``PROOF.md``.
"""

from __future__ import annotations

import math

from dpbayes.programs import outward
from dpbayes.programs.certificate import INF, Bound, Step
from dpbayes.programs.checker_base import CheckerBase, _why, public_bound
from dpbayes.programs.interpreter import normal_variance, public_value
from dpbayes.programs.lemmas import normal_shift_bounds
from dpbayes.programs.terms import Term

__all__ = ["DistributionRules", "draw_shape"]

# which parameters of each family are vectors (the others are scalars)
_VECTOR_PARAM = {"categorical": (True,), "dirichlet": (True,)}
_PARAM_NAMES = {
    "bernoulli": ("p",),
    "beta": ("a", "b"),
    "normal": ("mean", "var"),
    "categorical": ("p",),
    "dirichlet": ("alpha",),
}


def draw_shape(family: str | None, param_shape: tuple[int, ...] | None) -> tuple[int, ...] | None:
    """The shape of one draw: a Dirichlet draws a vector like its alpha, the others a scalar."""
    if family is None:
        return None
    if family == "dirichlet":
        return param_shape
    return ()


class DistributionRules(CheckerBase):
    """Dist, GetParams, GetMean, Divergence."""

    def rule_dist(self, t: Term) -> tuple[Bound, Step]:
        fam = t.info["family"]
        subs = [self.visit(a) for a in t.args]
        s = self.step("Dist", f"{fam}(" + ", ".join(f"[{i}]" for _, i in subs) + ")")
        vector = _VECTOR_PARAM.get(fam, (False,) * len(subs))
        coords: list[float] | None = []
        for j, ((b, i), is_vec) in enumerate(zip(subs, vector, strict=True)):
            if b.shape is None:
                # a value of unknown shape (e.g. the choice of an exp_mech among candidates
                # of different shapes): whether the run can build the distribution would
                # depend on which value it gets, i.e. on the data (PROOF.md §4, §8)
                self.reject(
                    s,
                    f"the {fam} parameter {_PARAM_NAMES[fam][j]} ([{i}]) has a shape not "
                    "known when checking: a run could fail on some data sets only",
                )
            if not is_vec and b.shape != ():
                # a 1-element vector too: the run reads a scalar parameter with float()
                name = _PARAM_NAMES[fam][j]
                raise TypeError(
                    f"the {fam} parameter {name} ([{i}]) must be a scalar (shape ()), "
                    f"got shape {b.shape}"
                )
            if b.shape is None or coords is None:
                coords = None
            elif b.equal:
                coords += [0.0] * math.prod(b.shape)
            elif b.coords is not None and len(b.coords) == math.prod(b.shape):
                coords += list(b.coords)
            else:
                coords += [min(b.get("L1"), b.get("L2"))] * math.prod(b.shape)
        pshape = None if coords is None else (len(coords),)
        if all(b.equal for b, _ in subs):
            return public_bound("sym", family=fam, param_shape=pshape), s
        m = {
            "L1": outward.add(*(b.get("L1") for b, _ in subs)),
            "L2": outward.hypot(b.get("L2") for b, _ in subs),
            "hellinger": 1.0,
            "tv": 1.0,
        }
        if fam == "categorical":
            # the run projects p onto the simplex (interpreter.project_simplex): 1-Lipschitz
            # in L2 only, so each coordinate and L1 / k are bounded by L2
            l2 = min(subs[0][0].get("L1"), subs[0][0].get("L2"))
            m["L2"] = l2
            if coords is not None:
                coords = [l2] * len(coords)
                m["L1"] = outward.add(*coords)
            else:
                m["L1"] = INF
        if fam == "normal" and subs[1][0].equal and not t.args[1].free:
            try:  # the variance the run uses: projected onto [TINY, NORMAL_VAR_MAX]
                var = normal_variance(public_value(t.args[1]))
            except (TypeError, ValueError):
                var = math.nan
            d = subs[0][0].get("L1")
            if var > 0 and math.isfinite(var) and math.isfinite(d):
                m.update(normal_shift_bounds(d, var))
                s.note = (
                    "Normal with public variance v, mean moving by D: H^2 = 1 - exp(-D^2/8v), "
                    "TV = erf(D / 2 sqrt(2v)) = 2 Phi(D / 2 sqrt v) - 1, KL = D^2/2v"
                )
        blame = self.blame_of(*(b for b, _ in subs))
        return Bound(
            "sym",
            metrics=m,
            coords=None if coords is None else tuple(coords),
            blame=blame,
            family=fam,
            param_shape=pshape,
        ), s

    def rule_get_params(self, t: Term) -> tuple[Bound, Step]:
        d, i = self.visit(t.args[0])
        s = self.step("GetParams", f"getParams([{i}])")
        if d.family is not None and d.family not in ("beta", "normal", "dirichlet"):
            raise TypeError(f"get_params needs a Beta, Normal or Dirichlet, got a {d.family}")
        if d.equal:
            return public_bound("value", d.param_shape), s
        if d.coords is None and math.isinf(d.get("L1")):
            return self.fail(
                s,
                "value",
                "no bound on the parameters of this distribution" + _why(d),
                metrics={"L1": d.get("L1"), "L2": d.get("L2")},
                shape=d.param_shape,
            ), s
        if d.coords is None:
            m0 = {"L1": d.get("L1"), "L2": d.get("L2")}
            return Bound("value", metrics=m0, blame=d.blame, shape=d.param_shape), s
        c = d.coords
        m = {
            "L1": min(d.get("L1"), outward.add(*c)),
            "L2": min(d.get("L2"), outward.hypot(c)),
        }
        return Bound("value", metrics=m, coords=c, blame=d.blame, shape=(len(c),)), s

    def rule_get_mean(self, t: Term) -> tuple[Bound, Step]:
        d, i = self.visit(t.args[0])
        s = self.step("GetMean", f"getMean([{i}])")
        if d.family is not None and d.family != "normal":
            raise TypeError(f"get_mean needs a Normal distribution, got a {d.family}")
        if d.equal:
            return public_bound("value", ()), s
        c = INF if d.coords is None else d.coords[0]
        if math.isinf(c):
            return self.fail(
                s,
                "value",
                "the mean of this distribution has unbounded sensitivity" + _why(d),
                shape=(),
            ), s
        return Bound("value", metrics={"L1": c, "L2": c}, coords=(c,), shape=()), s

    def rule_divergence(self, t: Term) -> tuple[Bound, Step]:
        div = t.info["divergence"]
        (p, ip), (q, iq) = self.visit(t.args[0]), self.visit(t.args[1])
        s = self.step(f"Divergence {div} (triangle inequality)", f"{div}([{ip}], [{iq}])")
        if p.equal and q.equal:
            return public_bound("value", ()), s
        if div == "kl":
            return self.fail(
                s,
                "value",
                "KL is not a metric: no triangle inequality bounds "
                "|KL(p, r) - KL(p', r)|, the score has unbounded "
                "sensitivity",
                shape=(),
            ), s
        d = outward.add(p.get(div), q.get(div))
        if math.isinf(d):
            return self.fail(
                s, "value", f"no {div} bound on the arguments" + _why(p, q), shape=()
            ), s
        s.note = f"|{div}(p, r) - {div}(p', r')| <= {div}(p, p') + {div}(r, r') for a metric"
        return Bound("value", metrics={"L1": d, "L2": d}, coords=(d,), shape=()), s
