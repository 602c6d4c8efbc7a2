"""The privacy checker: relational bounds per sub-term, and a certificate or a rejection.

Paper 002 §5 (relational refinement types) as a syntax-directed analysis. Every sub-term
gets a :class:`Bound` relating its two runs on neighbouring inputs:

* a value or symbolic distribution: its *sensitivity* in metrics ``L1``/``L2`` (absolute
  value for scalars), per-coordinate bounds (``coords``), and for distributions the
  Hellinger distance, total variation and KL divergence;
* an actual distribution (the monad): its *divergence index*: the eps-distance (eps,
  delta) of (eps, delta)-DP (Barthe et al. 2012, Lemma 3.1 of paper 002) and the
  f-divergences Hellinger, TV and KL of Table 1.

Rules (each recorded as a step of the derivation): Private (only the program's own
input), Const, Var; Lipschitz arithmetic under broadcasting, Clip; GetParams/Proj;
Divergence (triangle inequality: only for metrics, so KL scores are unbounded); Dist; Ran
and Infer (move bounds between symbolic refinements and monadic indices); UnitM (a value
that differs in the two runs makes the index infinite: private data reaches the output
without noise); BindM (sequential composition of composable divergences, Barthe & Olmedo
2013: eps and delta add, and so do TV, Hellinger and KL; a draw the body does not read
costs nothing); Observe/Learn (Lemmas 6.1-6.3, :mod:`dpbayes.programs.lemmas`; equal
observations keep equal posteriors: the data processing inequality); LapMech, GaussMech,
ExpMech (Defs. 3.3-3.5; the candidates must be public); MapRecords (sequential
composition over the records: the changed record's index plus n - 1 times that of an
unchanged one, 0 unless f also reads other private data).
A derivation whose final eps is infinite, or above the requested budget, is rejected at
the first step responsible, with the reason.

The soundness argument of every rule is in ``PROOF.md`` beside this module. The rules
are split by idea: :mod:`~dpbayes.programs.rules_values`,
:mod:`~dpbayes.programs.rules_distributions`, :mod:`~dpbayes.programs.rules_monad` and
:mod:`~dpbayes.programs.rules_mechanisms`, on the state of
:mod:`~dpbayes.programs.checker_base`.
"""

from __future__ import annotations

import math
from typing import Any

from dpbayes.privacy.validation import check_delta, check_epsilon
from dpbayes.programs.certificate import Bound, Certificate, NotPrivate, Step
from dpbayes.programs.rules_distributions import DistributionRules
from dpbayes.programs.rules_mechanisms import MechanismRules
from dpbayes.programs.rules_monad import MonadRules
from dpbayes.programs.rules_values import ValueRules

__all__ = ["Bound", "Certificate", "Checker", "NotPrivate", "Step", "check"]


class Checker(ValueRules, DistributionRules, MonadRules, MechanismRules):
    """One derivation: visits the terms of a program and records its steps."""


def check(program: Any, *, epsilon: float | None = None, delta: float | None = None) -> Certificate:
    """Certify ``program`` (a :class:`~dpbayes.programs.Program`); raise NotPrivate if not.

    With ``epsilon`` and/or ``delta`` the certificate must also fit that budget (delta
    alone: any epsilon, at most that delta; epsilon alone: delta 0); a program that
    spends more is rejected at the first mechanism where the running total
    (sequential composition, in program order) exceeds it.
    """
    from dpbayes.programs.program import Program

    if not isinstance(program, Program):
        raise TypeError(f"program must be a dpbayes Program, got {type(program).__name__}")
    target_eps = None if epsilon is None else check_epsilon(epsilon)
    target_delta = 0.0 if delta is None else check_delta(delta)
    ck = Checker(program.db, program.name)
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
    if not (math.isfinite(eps) and math.isfinite(dlt)):
        s = top.blame or steps[itop - 1]
        reason = s.reason or (
            f"the output draws from [{s.index}] ({s.rule}), a distribution that depends on "
            f"private data with only f-divergence bounds ({s.bound}), no eps-distance bound"
        )
        s.reason = reason
        raise NotPrivate(
            f"{program.name} rejected at step [{s.index}] {s.rule}: {reason}", s, steps
        )
    if dlt >= 1:
        s = top.blame or steps[itop - 1]
        reason = f"the program's delta adds up to {dlt:.3g} >= 1: no guarantee at all"
        s.reason = reason
        raise NotPrivate(
            f"{program.name} rejected at step [{s.index}] {s.rule}: {reason}", s, steps
        )

    def over(e: float, d: float) -> bool:
        # a budget given is tested, epsilon and delta alike (delta alone too)
        return (target_eps is not None and e > target_eps * (1 + 1e-9)) or (
            (target_eps is not None or delta is not None) and d > target_delta * (1 + 1e-9) + 1e-300
        )

    if over(eps, dlt):
        run_e = run_d = 0.0
        culprit = steps[itop - 1]
        for ms, e, d in ck.mechanisms:
            run_e, run_d = run_e + e, run_d + d
            if over(run_e, run_d):
                culprit = ms
                break
        budget = "any epsilon" if target_eps is None else f"{target_eps:.6g}"
        reason = (
            f"the program spends ({eps:.6g}, {dlt:.3g}), more than the budget "
            f"({budget}, {target_delta:.3g}); the running total first exceeds it here"
            + (f" ({culprit.note})" if culprit.note else "")
        )
        culprit.reason = reason
        raise NotPrivate(
            f"{program.name} rejected at step [{culprit.index}] {culprit.rule}: {reason}",
            culprit,
            steps,
        )
    return Certificate(program.name, eps, dlt, neighbours, tuple(steps))
