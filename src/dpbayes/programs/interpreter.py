"""Running programs on data: the denotational semantics of paper 002 §4.2, by sampling.

Values evaluate to numbers, tuples and distribution objects of :mod:`dpbayes.models`
(symbolic distributions); a monadic term is run by drawing one value from the actual
distribution it denotes. ``infer`` is exact conjugate inference (Beta-Bernoulli,
Dirichlet-categorical, Normal mean with known variance); the paper leaves the inference
algorithm abstract. Mechanisms draw their noise through :mod:`dpbayes.privacy` (secure
unless the run is a seeded simulation); ``ran`` draws with the numpy Generator of
:func:`dpbayes.privacy.noise.noise_source`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpbayes.models import Beta, Dirichlet, Normal
from dpbayes.models import hellinger as _hellinger
from dpbayes.models import kl as _kl
from dpbayes.models import total_variation as _tv
from dpbayes.privacy.mechanisms import ExponentialMechanism, GaussianMechanism, LaplaceMechanism
from dpbayes.programs.terms import Term, const

__all__ = ["Bernoulli", "Categorical", "Runtime", "public_value"]


@dataclass(frozen=True)
class Bernoulli:
    """Symbolic Bernoulli(p) at run time (only sampled: the likelihood of the coin)."""

    p: float

    def rvs(self, random_state: np.random.Generator) -> int:
        return int(random_state.random() < self.p)


@dataclass(frozen=True)
class Categorical:
    """Symbolic categorical(p) at run time."""

    p: np.ndarray

    def rvs(self, random_state: np.random.Generator) -> int:
        return int(random_state.choice(len(self.p), p=self.p))


class Runtime:
    """One run: the private data, the generator for ``ran`` and the mechanisms' rng."""

    def __init__(self, data: Any, generator: np.random.Generator | None, mech_rng: Any) -> None:
        self.data = data
        self.gen = generator
        self.mech_rng = mech_rng
        # value terms are deterministic given the data: evaluate each term object once
        self.memo: dict[int, Any] = {}
        self.scores: dict[int, np.ndarray] = {}

    # ------------------------------------------------------------ values
    def value(self, t: Term) -> Any:
        if t.uid in self.memo:
            return self.memo[t.uid]
        out = self._value(t)
        self.memo[t.uid] = out
        return out

    def _value(self, t: Term) -> Any:
        op = t.op
        if op == "const":
            return t.args[0]
        if op == "private":
            if self.data is None:
                raise ValueError("this term depends on the private data")
            return self.data
        if op == "var":
            raise ValueError(f"unbound variable {t.info.get('name', '?')}")
        if op == "add":
            return _arith(self.value(t.args[0])) + _arith(self.value(t.args[1]))
        if op == "neg":
            return -_arith(self.value(t.args[0]))
        if op == "mul":
            return _arith(self.value(t.args[0])) * _arith(self.value(t.args[1]))
        if op == "clip":
            x = _arith(self.value(t.args[0]))
            lo, hi = t.args[1], t.args[2]
            return np.clip(x, -math.inf if lo is None else lo, math.inf if hi is None else hi)
        if op == "eq_score":
            return 1.0 if _same(self.value(t.args[0]), self.value(t.args[1])) else 0.0
        if op == "proj":
            return self.value(t.args[0])[t.args[1]]
        if op == "dist":
            return make_distribution(t.info["family"], [self.value(a) for a in t.args])
        if op == "get_params":
            return distribution_params(self.value(t.args[0]))
        if op == "get_mean":
            d = self.value(t.args[0])
            if not isinstance(d, Normal):
                raise TypeError("get_mean needs a Normal distribution")
            return float(d.loc)
        if op == "divergence":
            p, q = self.value(t.args[0]), self.value(t.args[1])
            fn = {"hellinger": _hellinger, "tv": _tv, "kl": _kl}[t.info["divergence"]]
            return float(fn(p, q))
        if op == "infer":
            return self.symbolic(t.args[0])
        raise TypeError(f"{op} is not a value term")

    # ------------------------------------------------------------ infer: exact inference
    def symbolic(self, m: Term) -> Any:
        """The symbolic distribution of the actual distribution ``m`` (exact inference)."""
        if m.op == "ran":
            return self.value(m.args[0])
        if m.op in ("observe", "learn"):
            prior_t, lik = (m.args[0], m.args[1]) if m.op == "observe" else (m.args[1], m.args[2])
            prior = self.symbolic(prior_t)
            records = (
                np.atleast_1d(np.asarray(self.value(m.args[2]), dtype=float))
                if m.op == "observe"
                else np.asarray(self.value(m.args[0]), dtype=float).ravel()
            )
            return conjugate_update(prior, m.info["family"], lik, records, self)
        if m.op == "unit":
            raise TypeError("infer(unit(v)) is a point mass: not a supported symbolic family")
        raise TypeError(
            f"infer supports ran, observe and learn terms (exact conjugate inference), got {m.op}"
        )

    # ------------------------------------------------------------ monad: one draw
    def sample(self, t: Term) -> Any:
        op = t.op
        if op == "unit":
            return self.value(t.args[0])
        if op == "ran":
            return _draw(self.value(t.args[0]), self._gen())
        if op in ("observe", "learn"):
            return _draw(self.symbolic(t), self._gen())
        if op == "bind":
            x = self.sample(t.args[0])
            return self.sample(t.args[1](const(x)))
        if op == "lap_mech":
            v = np.asarray(self.value(t.args[0]), dtype=float)
            mech = LaplaceMechanism(epsilon=t.info["epsilon"], sensitivity=t.info["sensitivity"])
            out = mech.release(np.atleast_1d(v), rng=self.mech_rng).value
            return float(out[0]) if v.ndim == 0 else out
        if op == "gauss_mech":
            v = np.asarray(self.value(t.args[0]), dtype=float)
            g = GaussianMechanism(
                epsilon=t.info["epsilon"],
                delta=t.info["delta"],
                sensitivity=t.info["sensitivity"],
                calibration=t.info["calibration"],
            )
            out = g.release(np.atleast_1d(v), rng=self.mech_rng).value
            return float(out[0]) if v.ndim == 0 else out
        if op == "exp_mech":
            score, cands = t.args
            if t.uid not in self.scores:  # the scores depend on the data only
                self.scores[t.uid] = np.array([float(self.value(score(const(c)))) for c in cands])
            scores = self.scores[t.uid]
            e = ExponentialMechanism(epsilon=t.info["epsilon"], sensitivity=t.info["sensitivity"])
            return cands[int(e.release(scores, rng=self.mech_rng).value)]
        if op == "map_records":
            db = np.asarray(self.value(t.args[0]))
            return np.array([self.sample(t.args[1](const(_plain(y)))) for y in db])
        raise TypeError(f"{op} is not a probabilistic term")

    def _gen(self) -> np.random.Generator:
        if self.gen is None:
            raise ValueError("this term needs randomness but the run has no generator")
        return self.gen


def public_value(t: Term) -> Any:
    """Evaluate a term that depends on no private data and draws nothing."""
    return Runtime(None, None, None).value(t)


def _plain(y: Any) -> Any:
    return y.item() if isinstance(y, np.generic) else y


def _arith(x: Any) -> Any:
    return np.asarray(x, dtype=float) if isinstance(x, tuple | list | np.ndarray) else float(x)


def _same(a: Any, b: Any) -> bool:
    return bool(np.all(np.asarray(a, dtype=float) == np.asarray(b, dtype=float)))


def _draw(d: Any, gen: np.random.Generator) -> Any:
    if isinstance(d, Bernoulli | Categorical):
        return d.rvs(gen)
    out = d.rvs(random_state=gen)
    return float(out) if np.ndim(out) == 0 else np.asarray(out)


def make_distribution(family: str, params: list[Any]) -> Any:
    """The run-time object of a symbolic distribution (normal takes mean and variance)."""
    if family == "beta":
        return Beta(float(params[0]), float(params[1]))
    if family == "normal":
        var = float(params[1])
        if not var > 0:
            raise ValueError(f"normal variance must be > 0, got {var}")
        return Normal(float(params[0]), math.sqrt(var))
    if family == "dirichlet":
        return Dirichlet(np.asarray(params[0], dtype=float))
    if family == "bernoulli":
        pb = float(params[0])
        if not 0 <= pb <= 1:
            raise ValueError(f"bernoulli p must be in [0, 1], got {pb}")
        return Bernoulli(pb)
    if family == "categorical":
        p = np.asarray(params[0], dtype=float)
        if np.any(p < 0) or not math.isclose(float(p.sum()), 1.0, rel_tol=1e-9):
            raise ValueError("categorical p must be a probability vector")
        return Categorical(p)
    raise ValueError(f"unknown distribution family {family!r}")


def distribution_params(d: Any) -> tuple[Any, ...]:
    """getParams: Beta -> (a, b); Normal -> (mean, variance); Dirichlet -> (alpha,)."""
    if isinstance(d, Beta):
        return (float(d.a), float(d.b))
    if isinstance(d, Normal):
        return (float(d.loc), float(d.sd) ** 2)
    if isinstance(d, Dirichlet):
        return tuple(float(x) for x in d.alpha)
    raise TypeError(f"get_params needs a Beta, Normal or Dirichlet, got {type(d).__name__}")


def likelihood_constant(lik: Any, index: int, rt: Runtime) -> float:
    """A public parameter of the likelihood, e.g. the known variance of normal(r, kv)."""
    probe = lik(Term("var", (), "value", {"name": "r"}))
    return float(rt.value(probe.args[index]))


def conjugate_update(prior: Any, family: str, lik: Any, records: np.ndarray, rt: Runtime) -> Any:
    """The posterior after observing ``records`` drawn from ``family(r)`` (exact)."""
    if isinstance(prior, Beta) and family == "bernoulli":
        if records.size and not np.all((records == 0) | (records == 1)):
            raise ValueError("records must be 0/1 for a bernoulli likelihood")
        k = float(records.sum())
        return Beta(prior.a + k, prior.b + records.size - k)
    if isinstance(prior, Dirichlet) and family == "categorical":
        m = prior.alpha.size
        idx = records.astype(int)
        if records.size and (np.any(idx != records) or idx.min() < 0 or idx.max() >= m):
            raise ValueError(f"records must be category indices in 0..{m - 1}")
        return Dirichlet(prior.alpha + np.bincount(idx, minlength=m))
    if isinstance(prior, Normal) and family == "normal":
        kv = likelihood_constant(lik, 1, rt)
        v0 = float(prior.sd) ** 2
        prec = 1.0 / v0 + records.size / kv
        mean = (float(prior.loc) / v0 + float(records.sum()) / kv) / prec
        return Normal(mean, math.sqrt(1.0 / prec))
    raise TypeError(
        f"no conjugate update for a {type(prior).__name__} prior with a {family} likelihood"
    )
