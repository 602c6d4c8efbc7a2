"""The exact output distribution of a program with finitely many outputs, and its exact eps.

A program whose draws are all finite (``unit``, ``bind``, ``exp_mech``, ``map_records`` and
``ran`` of a Bernoulli or categorical) has an output distribution that can be enumerated:
every path through its draws, with the product of their probabilities (the exponential
mechanism's probabilities are those of :meth:`~dpbayes.privacy.ExponentialMechanism.probabilities`,
the law its sampler draws from exactly). The exact eps of a pair of neighbouring data sets
is then the largest |ln P_x(o) / P_x'(o)| over the outputs o; it is what a certificate must
never be below. :func:`output_distribution` has the form the auditor takes as
``distribution=`` (:func:`dpbayes.audit.audit`). Laplace, Gaussian and posterior draws are
continuous: they raise ``TypeError``.

Everything is computed in log space (a path's log-probability is the sum of its draws',
paths to one output are combined by ``logaddexp``): linear probabilities underflowed to 0
at a large eps (exp_mech at eps = 2000), so an output possible under both data sets
looked impossible under one and the exact eps came out infinite. :func:`output_distribution`
carries its log form as ``output_log_distribution``, which the auditor reads.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
from scipy.special import logsumexp

from dpbayes.programs.interpreter import Bernoulli, Categorical, Runtime
from dpbayes.programs.program import Program
from dpbayes.programs.terms import Term

__all__ = [
    "exact_epsilon",
    "output_distribution",
    "output_log_distribution",
    "output_log_probabilities",
    "output_probabilities",
]

Outcomes = dict[Any, tuple[Any, float]]  # key -> (value, log-probability)


def _key(v: Any) -> Any:
    if isinstance(getattr(v, "params", None), dict):
        return (type(v).__name__, *(_key(x) for x in v.params.values()))
    if isinstance(v, tuple | list):
        return tuple(_key(x) for x in v)
    try:
        arr = np.asarray(v, dtype=float)
    except (TypeError, ValueError):
        return repr(v)
    return (arr.shape, tuple(arr.ravel().tolist()))


def _vector(v: Any) -> np.ndarray:
    if isinstance(getattr(v, "params", None), dict):
        return np.concatenate([_vector(x) for x in v.params.values()])
    if isinstance(v, tuple | list) and v and not np.isscalar(v[0]):
        return np.concatenate([_vector(x) for x in v])
    return np.ravel(np.asarray(v, dtype=float))


def _add(out: Outcomes, value: Any, lp: float) -> None:
    """Add the log-probability ``lp`` to the output ``value`` (-inf: impossible, skipped)."""
    if not lp > -math.inf:
        return
    k = _key(value)
    out[k] = (value, float(np.logaddexp(out[k][1], lp))) if k in out else (value, lp)


def _log(p: float) -> float:
    return math.log(p) if p > 0 else -math.inf


class _Enumerator(Runtime):
    def outcomes(self, t: Term) -> Outcomes:
        out: Outcomes = {}
        op = t.op
        if op == "unit":
            _add(out, self.value(t.args[0]), 0.0)
        elif op == "ran":
            d = self.value(t.args[0])
            if isinstance(d, Bernoulli):
                _add(out, 0, math.log1p(-d.p) if d.p < 1 else -math.inf)
                _add(out, 1, _log(d.p))
            elif isinstance(d, Categorical):
                for i, p in enumerate(d.p / d.p.sum()):  # as Categorical.rvs normalises
                    _add(out, i, _log(float(p)))
            else:
                raise TypeError(f"a draw from a {type(d).__name__} has no finite output set")
        elif op == "bind":
            m, x, body = t.args
            if x.uid not in body.free:
                return self.outcomes(body)
            for xv, p in self.outcomes(m).values():
                with self.binding(x, xv):
                    for yv, q in self.outcomes(body).values():
                        _add(out, yv, p + q)
        elif op == "exp_mech":
            values = [self.candidate(c) for c in t.args[2]]
            scores = self.exp_scores(t, values)  # as a run computes them
            # log of ExponentialMechanism.probabilities: s - logsumexp(s), s = scores / scale
            s = scores / t.info["mechanism"].scale
            for c, lp in zip(values, s - logsumexp(s), strict=True):
                _add(out, c, float(lp))
        elif op == "map_records":
            db, y, body = t.args
            paths: list[tuple[tuple[Any, ...], float]] = [((), 0.0)]
            for rec in np.asarray(self.value(db)):
                with self.binding(y, rec.item() if isinstance(rec, np.generic) else rec):
                    step = list(self.outcomes(body).values())
                paths = [((*path, v), p + q) for path, p in paths for v, q in step]
            for path, p in paths:
                _add(out, np.array(path), p)
        else:
            raise TypeError(f"{op} has no finite output set (continuous or not a draw)")
        return out


def output_log_probabilities(program: Program, data: Any) -> list[tuple[Any, float]]:
    """Every output of ``program`` on ``data`` with its log-probability (finite programs)."""
    values = program.validate_data(data)
    if program.body.kind != "monad":
        return [(Runtime(values, None, None, program.db.uid).value(program.body), 0.0)]
    en = _Enumerator(values, None, None, program.db.uid)
    return list(en.outcomes(program.body).values())


def output_probabilities(program: Program, data: Any) -> list[tuple[Any, float]]:
    """Every output of ``program`` on ``data`` with its probability (finite programs only);
    an output whose probability underflows to 0 is left out (see the log form)."""
    out = [(v, math.exp(lp)) for v, lp in output_log_probabilities(program, data)]
    return [(v, p) for v, p in out if p > 0]


def output_log_distribution(
    program: Program,
) -> Callable[[Any], tuple[np.ndarray, np.ndarray]]:
    """``data -> (outputs (k, d), log-probabilities)``: the auditor's ``log_distribution=``."""

    def dist(data: Any) -> tuple[np.ndarray, np.ndarray]:
        pairs = output_log_probabilities(program, data)
        return np.array([_vector(v) for v, _ in pairs]), np.array([lp for _, lp in pairs])

    return dist


def output_distribution(program: Program) -> Callable[[Any], tuple[np.ndarray, np.ndarray]]:
    """``data -> (outputs (k, d), probabilities)``: the auditor's ``distribution=`` argument.

    The function carries ``output_log_distribution`` (:func:`output_log_distribution`), which
    the auditor reads in its place: exact where the probabilities underflow.
    """

    def dist(data: Any) -> tuple[np.ndarray, np.ndarray]:
        pairs = output_probabilities(program, data)
        return np.array([_vector(v) for v, _ in pairs]), np.array([p for _, p in pairs])

    dist.output_log_distribution = output_log_distribution(program)  # type: ignore[attr-defined]
    return dist


def exact_epsilon(program: Program, pairs: Iterable[tuple[Any, Any]]) -> float:
    """The largest |ln P_x(o) / P_x'(o)| over the outputs o and the neighbouring ``pairs``
    (from log-probabilities: finite wherever both are positive, however small)."""
    worst = 0.0
    for x, y in pairs:
        px = {_key(v): lp for v, lp in output_log_probabilities(program, x)}
        py = {_key(v): lp for v, lp in output_log_probabilities(program, y)}
        for k in set(px) | set(py):
            if (k in px) != (k in py):
                return math.inf
            worst = max(worst, abs(px[k] - py[k]))
    return worst
