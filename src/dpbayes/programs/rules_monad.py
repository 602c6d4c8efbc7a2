"""Checker rules for the monad and inference (paper 002 §5-6).

Ran and Infer move bounds between symbolic refinements and monadic indices; UnitM
rejects an un-noised private value; BindM composes divergence indices (Barthe & Olmedo
2013); Observe/Learn bound neighbouring posteriors by Lemmas 6.1-6.3
(:mod:`dpbayes.programs.lemmas`) and the data processing inequality.
"""

from __future__ import annotations

import math
from typing import Any

from dpbayes.programs import lemmas
from dpbayes.programs.certificate import _CAP, _FDIV, EQUAL_VALUE, INF, Bound, Step
from dpbayes.programs.checker_base import CheckerBase, _why
from dpbayes.programs.interpreter import public_value
from dpbayes.programs.terms import Term

__all__ = ["MonadRules"]


class MonadRules(CheckerBase):
    """Ran, Infer, UnitM, BindM, Observe, Learn."""

    def rule_ran(self, t: Term) -> tuple[Bound, Step]:
        d, i = self.visit(t.args[0])
        s = self.step("Ran (refinement -> index)", f"ran([{i}])")
        if d.equal:
            return Bound("monad", equal=True), s
        m = {k: d.get(k) for k in (*_FDIV, "L1", "L2")}
        m["eps"], m["delta"] = INF, 0.0
        s.note = "a draw from a distribution that depends on private data has no eps bound"
        return Bound("monad", metrics=m, coords=d.coords, blame=s), s

    def rule_infer(self, t: Term) -> tuple[Bound, Step]:
        m, i = self.visit(t.args[0])
        s = self.step("Infer (index -> refinement)", f"infer([{i}])")
        if m.equal:
            return Bound("sym", equal=True), s
        metrics = {k: m.get(k) for k in (*_FDIV, "L1", "L2")}
        if m.coords is not None:
            metrics["L1"] = min(metrics["L1"], sum(m.coords))
            metrics["L2"] = min(metrics["L2"], math.sqrt(sum(c * c for c in m.coords)))
        return Bound("sym", metrics=metrics, coords=m.coords, blame=m.blame), s

    def rule_unit(self, t: Term) -> tuple[Bound, Step]:
        v, i = self.visit(t.args[0])
        s = self.step("UnitM", f"return([{i}])")
        if v.equal:
            return Bound("monad", equal=True), s
        what = v.text()
        return self.fail(
            s,
            "monad",
            f"return releases [{i}], which depends on private data ({what}), without noise",
            metrics={"eps": INF, "delta": 0.0, "hellinger": 1.0, "tv": 1.0},
        ), s

    def rule_bind(self, t: Term) -> tuple[Bound, Step]:
        m, im = self.visit(t.args[0])
        x = self.bind_var(t.info["var"], EQUAL_VALUE)
        body_t = t.args[1](x)
        if not isinstance(body_t, Term) or body_t.kind != "monad":
            raise TypeError("the body of bind must return an actual distribution (a monad term)")
        body, ib = self.visit(body_t)
        s = self.step(
            "BindM (composition, Barthe & Olmedo)", f"mlet {t.info['var']} = [{im}] in [{ib}]"
        )
        if m.equal and body.equal:
            return Bound("monad", equal=True), s
        metrics = {
            k: min(_CAP.get(k, INF), m.get(k) + body.get(k)) for k in ("eps", "delta", *_FDIV)
        }
        metrics["delta"] = min(metrics["delta"], 1.0)
        return Bound("monad", metrics=metrics, blame=self.blame_of(m, body, metric="eps")), s

    def _prior_params(self, prior_t: Term, s: Step) -> Any:
        if prior_t.op != "ran":
            return None
        try:
            return public_value(prior_t.args[0])
        except (ValueError, TypeError):
            return None

    def _observe_bound(
        self, t: Term, prior: Any, n: int, record_bound: float | None
    ) -> dict[str, Any] | None:
        from dpbayes.models import Beta, Dirichlet, Normal
        from dpbayes.programs.interpreter import Runtime, likelihood_constant

        fam = t.info["family"]
        lik = t.args[1] if t.op == "observe" else t.args[2]
        if isinstance(prior, Beta) and fam == "bernoulli":
            return lemmas.beta_bernoulli_bounds(prior.a, prior.b, n)
        if isinstance(prior, Dirichlet) and fam == "categorical":
            return lemmas.dirichlet_categorical_bounds(prior.alpha, n)
        if isinstance(prior, Normal) and fam == "normal":
            kv = likelihood_constant(lik, 1, Runtime(None, None, None))
            return lemmas.normal_mean_bounds(float(prior.sd) ** 2, kv, n, record_bound)
        return None

    def _learn_common(
        self,
        t: Term,
        prior_t: Term,
        data: Bound,
        idata: int,
        n: int | None,
        rec_bound: float | None,
        rule: str,
    ) -> tuple[Bound, Step]:
        prior, ip = self.visit(prior_t)
        s = self.step(rule, f"{t.op}([{idata}], prior [{ip}], likelihood {t.info['family']})")
        if not prior.equal:
            return self.fail(
                s,
                "monad",
                "the prior depends on private data: no observe bound" + _why(prior),
                metrics={"eps": INF, "delta": 0.0},
            ), s
        if data.equal:
            s.note = "equal observations and equal priors give equal posteriors"
            return Bound("monad", equal=True), s
        if n is None:
            return self.fail(
                s,
                "monad",
                "observations differ by an unknown amount" + _why(data),
                metrics={"eps": INF, "delta": 0.0},
            ), s
        params = self._prior_params(prior_t, s)
        bounds = self._observe_bound(t, params, n, rec_bound)
        if bounds is None:
            return self.fail(
                s,
                "monad",
                f"no observe lemma for this prior and a {t.info['family']} likelihood",
                metrics={"eps": INF, "delta": 0.0},
            ), s
        s.note = bounds["note"]
        m = {k: bounds[k] for k in _FDIV}
        m["eps"], m["delta"] = INF, 0.0
        m["L1"], m["L2"] = bounds["l1"], bounds["l2"]
        blame = None
        if math.isinf(max(bounds["coords"])):
            blame = self.fail(s, "monad", bounds["note"]).blame
        return Bound("monad", metrics=m, coords=tuple(bounds["coords"]), blame=blame or s), s

    def rule_learn(self, t: Term) -> tuple[Bound, Step]:
        db, idb = self.visit(t.args[0])
        if db.kind == "db":
            assert db.db is not None
            rec = db.db["bound"] if db.db["record"] == "real" else 1.0
            return self._learn_common(
                t,
                t.args[1],
                db,
                idb,
                int(db.db["n"]),
                rec,
                "Learn (Observe Lemma 6.1-6.3 + adjacency + DPI)",
            )
        return self._learn_common(t, t.args[1], db, idb, None, None, "Learn (Observe)")

    def rule_observe(self, t: Term) -> tuple[Bound, Step]:
        d, idd = self.visit(t.args[2])
        rec = d.coords[0] if d.coords else d.get("L1")
        return self._learn_common(
            t,
            t.args[0],
            d,
            idd,
            1 if not d.equal else None,
            rec if math.isfinite(rec) else None,
            "Observe (Lemma 6.1-6.3)",
        )
