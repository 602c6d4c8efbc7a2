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
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from dpbayes.programs.interpreter import Bernoulli, Categorical, Runtime
from dpbayes.programs.program import Program
from dpbayes.programs.terms import Term

__all__ = ["exact_epsilon", "output_distribution", "output_probabilities"]

Outcomes = dict[Any, tuple[Any, float]]


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


def _add(out: Outcomes, value: Any, p: float) -> None:
    if p <= 0:
        return
    k = _key(value)
    out[k] = (value, out[k][1] + p) if k in out else (value, p)


class _Enumerator(Runtime):
    def outcomes(self, t: Term) -> Outcomes:
        out: Outcomes = {}
        op = t.op
        if op == "unit":
            _add(out, self.value(t.args[0]), 1.0)
        elif op == "ran":
            d = self.value(t.args[0])
            if isinstance(d, Bernoulli):
                _add(out, 0, 1.0 - d.p)
                _add(out, 1, d.p)
            elif isinstance(d, Categorical):
                for i, p in enumerate(d.p):
                    _add(out, i, float(p))
            else:
                raise TypeError(f"a draw from a {type(d).__name__} has no finite output set")
        elif op == "bind":
            m, x, body = t.args
            if x.uid not in body.free:
                return self.outcomes(body)
            for xv, p in self.outcomes(m).values():
                with self.binding(x, xv):
                    for yv, q in self.outcomes(body).values():
                        _add(out, yv, p * q)
        elif op == "exp_mech":
            values = [self.candidate(c) for c in t.args[2]]
            scores = self.exp_scores(t, values)  # as a run computes them
            for c, p in zip(values, t.info["mechanism"].probabilities(scores), strict=True):
                _add(out, c, float(p))
        elif op == "map_records":
            db, y, body = t.args
            paths: list[tuple[tuple[Any, ...], float]] = [((), 1.0)]
            for rec in np.asarray(self.value(db)):
                with self.binding(y, rec.item() if isinstance(rec, np.generic) else rec):
                    step = list(self.outcomes(body).values())
                paths = [((*path, v), p * q) for path, p in paths for v, q in step if p * q > 0]
            for path, p in paths:
                _add(out, np.array(path), p)
        else:
            raise TypeError(f"{op} has no finite output set (continuous or not a draw)")
        return out


def output_probabilities(program: Program, data: Any) -> list[tuple[Any, float]]:
    """Every output of ``program`` on ``data`` with its probability (finite programs only)."""
    values = program.validate_data(data)
    if program.body.kind != "monad":
        return [(Runtime(values, None, None, program.db.uid).value(program.body), 1.0)]
    en = _Enumerator(values, None, None, program.db.uid)
    return list(en.outcomes(program.body).values())


def output_distribution(program: Program) -> Callable[[Any], tuple[np.ndarray, np.ndarray]]:
    """``data -> (outputs (k, d), probabilities)``: the auditor's ``distribution=`` argument."""

    def dist(data: Any) -> tuple[np.ndarray, np.ndarray]:
        pairs = output_probabilities(program, data)
        return np.array([_vector(v) for v, _ in pairs]), np.array([p for _, p in pairs])

    return dist


def exact_epsilon(program: Program, pairs: Iterable[tuple[Any, Any]]) -> float:
    """The largest |ln P_x(o) / P_x'(o)| over the outputs o and the neighbouring ``pairs``."""
    worst = 0.0
    for x, y in pairs:
        px = {_key(v): p for v, p in output_probabilities(program, x)}
        py = {_key(v): p for v, p in output_probabilities(program, y)}
        for k in set(px) | set(py):
            a, b = px.get(k, 0.0), py.get(k, 0.0)
            if (a > 0) != (b > 0):
                return math.inf
            if a > 0:
                worst = max(worst, abs(math.log(a) - math.log(b)))
    return worst
