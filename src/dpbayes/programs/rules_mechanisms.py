"""Checker rules for the mechanisms and for maps over the records (paper 002 Defs. 3.3-3.5).

LapMech (L1), GaussMech (L2) and ExpMech (score sensitivity, public candidates) cost
eps * Delta / the calibrated sensitivity; MapRecords composes sequentially over the
records, one changed. See ``PROOF.md``.
"""

from __future__ import annotations

import math
from fractions import Fraction

from dpbayes.privacy.mechanisms import analytic_gaussian_epsilon
from dpbayes.programs import outward
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

#: a Delta_2 this far (relatively) above the Gaussian's calibrated sensitivity is a rounding
#: of the sensitivity, not too little noise: charged the eps of its sigma at Delta_2
_ROUNDING = 1e-9


class MechanismRules(CheckerBase):
    """LapMech, GaussMech, ExpMech, MapRecords."""

    def _mech(self, s: Step, eps: float, delta: float, shape: tuple[int, ...] | None) -> Bound:
        self.mechanisms.append((s, eps, delta))
        return Bound("monad", metrics={"eps": eps, "delta": delta}, shape=shape)

    def _free(self, s: Step, shape: tuple[int, ...] | None) -> Bound:
        """A mechanism on a public input: the same distribution in both runs, free."""
        self.mechanisms.append((s, 0.0, 0.0))
        s.note = "the input is public: the same distribution in both runs"
        return public_bound("monad", shape)

    @staticmethod
    def _cost(d: float, scale: float, factor: int = 1) -> float:
        """factor * Delta / scale, exactly, rounded up.

        The privacy loss of noise at the sampler's own (double) ``scale``: eps * Delta /
        sensitivity in real numbers, but the sampler draws at the rounded scale. Never 0:
        the input reads private data (only a structurally public input is free).
        """
        return max(outward.up(factor * Fraction(d) / Fraction(scale)), outward.TINY)

    def _unbounded(self, s: Step, reason: str, shape: tuple[int, ...] | None) -> Bound:
        return self.fail(s, "monad", reason, metrics={"eps": INF, "delta": 0.0}, shape=shape)

    def rule_lap_mech(self, t: Term) -> tuple[Bound, Step]:
        v, i = self.visit(t.args[0])
        mech = t.info["mechanism"]  # the object the interpreter runs: one source of truth
        e, sens = mech.epsilon, mech.sensitivity
        s = self.step(
            "LapMech", f"lapMech(eps={e:g}, [{i}], calibrated to L1 sensitivity {sens:g})"
        )
        if v.equal:
            return self._free(s, v.shape), s
        d = v.get("L1")
        if math.isinf(d):
            return self._unbounded(
                s, f"the value [{i}] has unbounded L1 sensitivity" + _why(v), v.shape
            ), s
        cost = self._cost(d, mech.scale)  # Laplace: Delta / b, b = sensitivity / eps
        s.note = f"Delta_1 = {d:.6g}: eps * Delta / sensitivity = {cost:.6g}"
        if d > sens:
            s.note += f"; noise too small for the sensitivity ({d:.6g} > {sens:g})"
        return self._mech(s, cost, 0.0, v.shape), s

    def rule_gauss_mech(self, t: Term) -> tuple[Bound, Step]:
        v, i = self.visit(t.args[0])
        mech = t.info["mechanism"]
        e, dl, sens = mech.epsilon, mech.delta, mech.sensitivity
        s = self.step(
            "GaussMech", f"gaussMech(eps={e:g}, delta={dl:g}, [{i}], L2 sensitivity {sens:g})"
        )
        if v.equal:
            return self._free(s, v.shape), s
        d = v.get("L2")
        if math.isinf(d):
            return self._unbounded(
                s, f"the value [{i}] has unbounded L2 sensitivity" + _why(v), v.shape
            ), s
        if d > sens * (1 + _ROUNDING):
            return self._unbounded(
                s,
                f"noise too small for the sensitivity: sigma is "
                f"calibrated to L2 sensitivity {sens:g} but the value moves by "
                f"{d:.6g}",
                v.shape,
            ), s
        if d > sens:
            # above the calibration by rounding only (e.g. sensitivity=np.sqrt(40), a double
            # below sqrt 40): the eps of this sigma at Delta_2, certified by the mechanism's
            # own analytic profile (Balle & Wang 2018, Thm 8)
            e2 = max(e, analytic_gaussian_epsilon(mech.sigma, dl, d))
            s.note = f"Delta_2 = {d!r} > {sens!r} by rounding: sigma gives eps {e2!r} there"
            return self._mech(s, e2, dl, v.shape), s
        # a private input costs the calibrated (eps, delta) whatever its computed Delta_2
        # (a computed 0 is no proof that the two runs' values are equal)
        s.note = f"Delta_2 = {d:.6g} <= {sens:g}"
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
        if u.equal:
            return self._free(s, shape), s
        d = u.get("L1")
        if math.isinf(d):
            return self._unbounded(s, "the score has unbounded sensitivity" + _why(u), shape), s
        # weights exp(u / T) and their sum each move by e^(Delta / T): 2 Delta / T, with
        # T = 2 sensitivity / eps (= eps Delta / sensitivity), or sensitivity / eps if
        # monotonic (twice that: the rule does not use monotonicity)
        cost = self._cost(d, mech.scale, 2)
        s.note = f"score sensitivity {d:.6g}: eps * Delta / sensitivity = {cost:.6g}"
        if d > sens:
            s.note += f"; noise too small for the sensitivity ({d:.6g} > {sens:g})"
        return self._mech(s, cost, 0.0, shape), s

    def rule_map_records(self, t: Term) -> tuple[Bound, Step]:
        db_t, y, body_t = t.args
        db, idb = self.visit(db_t)
        assert db.db is not None
        n = int(db.db["n"])
        rec = record_bound(db.db)
        levels = {"bool": 2, "category": db.db.get("k")}.get(db.db["record"])
        changed = Bound(
            "value", metrics={"L1": rec, "L2": rec}, coords=(rec,), shape=(), levels=levels
        )
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
                outward.add(body.get(k), outward.mul(n - 1, same.get(k)) if n > 1 else 0.0),
            )
            for k in ("eps", "delta", *_FDIV)
        }
        m["delta"] = min(m["delta"], 1.0)
        if not same.equal:
            s.note = f"f also reads private data through the other records: {n - 1} more times"
        return Bound(
            "monad", metrics=m, blame=self.blame_of(body, same, metric="eps"), shape=shape
        ), s
