"""The privacy checker: relational bounds per sub-term, and a certificate or a rejection.

Paper 002 §5 (relational refinement types) as a syntax-directed analysis. Every sub-term
gets a :class:`Bound` relating its two runs on neighbouring inputs:

* a value or symbolic distribution: its *sensitivity* in metrics ``L1``/``L2`` (absolute
  value for scalars), per-coordinate bounds (``coords``), and for distributions the
  Hellinger distance, total variation and KL divergence;
* an actual distribution (the monad): its *divergence index*: the eps-distance (eps,
  delta) of (eps, delta)-DP (Barthe et al. 2012, Lemma 3.1 of paper 002) and the
  f-divergences Hellinger, TV and KL of Table 1.

Rules (each recorded as a step of the derivation): Private/Const/Var; Lipschitz
arithmetic; GetParams/Proj; Divergence (triangle inequality: only for metrics, so KL
scores are unbounded); Dist; Ran and Infer (move bounds between symbolic refinements and
monadic indices); UnitM (a value that differs in the two runs makes the index infinite:
private data reaches the output without noise); BindM (sequential composition of
composable divergences, Barthe & Olmedo 2013: eps and delta add, and so do TV, Hellinger
and KL); Observe/Learn (Lemmas 6.1-6.3, :mod:`dpbayes.programs.lemmas`; equal
observations keep equal posteriors: the data processing inequality); LapMech, GaussMech,
ExpMech (Defs. 3.3-3.5); MapRecords (sequential composition over the records: the
changed record's index plus n - 1 times that of an unchanged one, 0 unless f also reads
other private data).
A derivation whose final eps is infinite, or above the requested budget, is rejected at
the first step responsible, with the reason.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np

from dpbayes.privacy.validation import check_delta, check_epsilon
from dpbayes.programs import lemmas
from dpbayes.programs.certificate import (
    _CAP,
    _FDIV,
    EQUAL_VALUE,
    INF,
    Bound,
    Certificate,
    NotPrivate,
    Step,
)
from dpbayes.programs.interpreter import public_value
from dpbayes.programs.terms import Term

__all__ = ["Bound", "Certificate", "Checker", "NotPrivate", "Step", "check"]


class Checker:
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

    # ---------------------------------------------------------------- leaves
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

    # ---------------------------------------------------------------- distributions
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

    # ---------------------------------------------------------------- monad / inference
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

    # ---------------------------------------------------------------- mechanisms
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


def _why(*bounds: Bound) -> str:
    for b in bounds:
        if b.blame is not None and b.blame.reason:
            return f" (step [{b.blame.index}]: {b.blame.reason})"
    return ""


def check(program: Any, *, epsilon: float | None = None, delta: float | None = None) -> Certificate:
    """Certify ``program`` (a :class:`~dpbayes.programs.Program`); raise NotPrivate if not.

    With ``epsilon`` (and ``delta``) the certificate must also fit that budget; a
    program that spends more is rejected at the first mechanism where the running total
    (sequential composition, in program order) exceeds it.
    """
    from dpbayes.programs.program import Program

    if not isinstance(program, Program):
        raise TypeError(f"program must be a dpbayes Program, got {type(program).__name__}")
    target_eps = None if epsilon is None else check_epsilon(epsilon)
    target_delta = 0.0 if delta is None else check_delta(delta)
    ck = Checker()
    top, itop = ck.visit(program.body)
    steps = list(ck.steps)
    neighbours = program.neighbours()
    if top.kind != "monad":
        if top.equal:
            return Certificate(program.name, 0.0, 0.0, neighbours, tuple(steps))
        s = steps[itop - 1]
        reason = (
            f"the program's result [{itop}] depends on private data ({top.text()}) and "
            "is released without noise"
        )
        s.reason = reason
        raise NotPrivate(f"{program.name} rejected at step [{itop}] {s.rule}: {reason}", s, steps)
    eps, dlt = top.eps, top.delta
    if math.isinf(eps):
        s = top.blame or steps[itop - 1]
        reason = s.reason or (
            f"the output draws from [{s.index}] ({s.rule}), a distribution that depends on "
            f"private data with only f-divergence bounds ({s.bound}), no eps-distance bound"
        )
        s.reason = reason
        raise NotPrivate(
            f"{program.name} rejected at step [{s.index}] {s.rule}: {reason}", s, steps
        )
    if target_eps is not None and (
        eps > target_eps * (1 + 1e-9) or dlt > target_delta * (1 + 1e-9) + 1e-300
    ):
        run_e = run_d = 0.0
        culprit = steps[itop - 1]
        for ms, e, d in ck.mechanisms:
            run_e, run_d = run_e + e, run_d + d
            if run_e > target_eps * (1 + 1e-9) or run_d > target_delta * (1 + 1e-9) + 1e-300:
                culprit = ms
                break
        reason = (
            f"the program spends ({eps:.6g}, {dlt:.3g}), more than the budget "
            f"({target_eps:.6g}, {target_delta:.3g}); the running total first exceeds it here"
            + (f" ({culprit.note})" if culprit.note else "")
        )
        culprit.reason = reason
        raise NotPrivate(
            f"{program.name} rejected at step [{culprit.index}] {culprit.rule}: {reason}",
            culprit,
            steps,
        )
    return Certificate(program.name, eps, dlt, neighbours, tuple(steps))
