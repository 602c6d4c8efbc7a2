"""Running programs on data: the denotational semantics of paper 002 §4.2, by sampling.

Values evaluate to numbers, tuples and distribution objects of :mod:`dpbayes.models`
(symbolic distributions); a monadic term is run by drawing one value from the actual
distribution it denotes. ``infer`` is exact conjugate inference (Beta-Bernoulli,
Dirichlet-categorical, Normal mean with known variance); the paper leaves the inference
algorithm abstract. Mechanisms draw their noise through the mechanism objects the terms
were built with (:mod:`dpbayes.privacy`: secure unless the run is a seeded simulation);
``ran`` draws with the numpy Generator of :func:`dpbayes.privacy.noise.noise_source`.

Binders are not called here: a binder's body was built once, on a variable, and the
interpreter binds that variable to a value in its environment (the checker reads the same
body). Only the program's own private input can be read.

Arithmetic (``PROOF.md`` A4): the checker reasons in real numbers, so every numeric result
of a primitive (``add``, ``neg``, ``mul``, ``clip``, ``get_params``, ``get_mean``, a
divergence, a score of ``exp_mech``, a mechanism's input, the Normal posterior mean) goes
through :func:`finite`: clamped to [-DBL_MAX, DBL_MAX] (an overflow is the largest double,
not inf), NaN mapped to 0 and -0.0 to +0.0. Each of these maps is 1-Lipschitz on the reals
(and NaN arises only from operands that are public or that the checker leaves unbounded),
so every bound the checker proves for the real-valued operation holds for the run's.

Distribution parameters (``PROOF.md`` §4, "Parameter domains"): :func:`make_distribution`
projects every parameter onto a closed subset of its domain, so no run fails on a
parameter value, whatever the data (the failure would leak whether the data put it out of
the domain); the projections are 1-Lipschitz, so the checker's bounds still hold.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpbayes.models import Beta, Dirichlet, Normal
from dpbayes.models import divergence_exact as _divs
from dpbayes.models import hellinger as _hellinger
from dpbayes.models import kl as _kl
from dpbayes.models import total_variation as _tv
from dpbayes.programs.terms import MAX_CONCENTRATION, Term

__all__ = [
    "TINY",
    "Bernoulli",
    "Categorical",
    "Runtime",
    "concentration_cap",
    "finite",
    "make_distribution",
    "normal_variance",
    "project",
    "project_simplex",
    "public_value",
]

_MAX = sys.float_info.max


def finite(x: Any) -> Any:
    """A run's numeric result as the checker reasons about it: a finite real.

    Clamped to [-DBL_MAX, DBL_MAX], NaN sent to 0.0, -0.0 to +0.0 (adding +0.0 does that):
    an overflow cannot make one run's value infinite (and a later 0 * inf NaN) while its
    neighbour's is finite, and the sign of a zero cannot tell two runs apart.
    """
    a = np.asarray(x, dtype=float)
    with np.errstate(invalid="ignore"):
        out = np.where(np.isnan(a), 0.0, np.clip(a, -_MAX, _MAX)) + 0.0
    return float(out) if out.ndim == 0 else out


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
        # numpy's Generator.choice(k, p=p) for one draw, without its check that p sums to
        # 1 within sqrt(eps) (p is the projection onto the simplex, which sums to 1 up to
        # rounding): the same draw from the same stream
        cdf = np.cumsum(self.p)
        cdf /= cdf[-1]
        return int(cdf.searchsorted(random_state.random(), side="right"))


class Runtime:
    """One run: the private data, the generator for ``ran`` and the mechanisms' rng.

    ``db_uid`` is the uid of the program's private input; no other private input is read.
    """

    def __init__(
        self,
        data: Any,
        generator: np.random.Generator | None,
        mech_rng: Any,
        db_uid: int | None = None,
    ) -> None:
        self.data = data
        self.db_uid = db_uid
        self.gen = generator
        self.mech_rng = mech_rng
        self.env: dict[int, Any] = {}
        # a closed value term is deterministic given the data: evaluate it once
        self.memo: dict[int, Any] = {}
        self.scores: dict[int, np.ndarray] = {}

    @contextmanager
    def binding(self, var: Term, value: Any) -> Iterator[None]:
        old = self.env.get(var.uid, _UNBOUND)
        self.env[var.uid] = value
        try:
            yield
        finally:
            if old is _UNBOUND:
                del self.env[var.uid]
            else:
                self.env[var.uid] = old

    # ------------------------------------------------------------ values
    def value(self, t: Term) -> Any:
        if t.free:
            return self._value(t)
        if t.uid not in self.memo:
            self.memo[t.uid] = self._value(t)
        return self.memo[t.uid]

    def _value(self, t: Term) -> Any:
        op = t.op
        if op == "const":
            return t.args[0]
        if op == "private":
            if self.data is None:
                raise ValueError("this term depends on the private data")
            if self.db_uid is not None and t.uid != self.db_uid:
                raise ValueError(
                    f"the program reads a private input other than its own ({t.info.get('name')!r})"
                )
            return self.data
        if op == "var":
            if t.uid not in self.env:
                raise ValueError(f"unbound variable {t.info.get('name', '?')}")
            return self.env[t.uid]
        if op == "add":
            with np.errstate(over="ignore", invalid="ignore"):
                return finite(_arith(self.value(t.args[0])) + _arith(self.value(t.args[1])))
        if op == "neg":
            return finite(-_arith(self.value(t.args[0])))
        if op == "mul":
            with np.errstate(over="ignore", under="ignore", invalid="ignore"):
                return finite(_arith(self.value(t.args[0])) * _arith(self.value(t.args[1])))
        if op == "clip":
            return clip_value(self.value(t.args[0]), t.args[1], t.args[2])
        if op == "eq_score":
            return 1.0 if _same(self.value(t.args[0]), self.value(t.args[1])) else 0.0
        if op == "proj":
            return self.value(t.args[0])[t.args[1]]
        if op == "dist":
            return make_distribution(t.info["family"], [self.value(a) for a in t.args])
        if op == "get_params":
            return tuple(finite(x) for x in distribution_params(self.value(t.args[0])))
        if op == "get_mean":
            d = self.value(t.args[0])
            if not isinstance(d, Normal):
                raise TypeError("get_mean needs a Normal distribution")
            return finite(float(d.loc))
        if op == "divergence":
            return finite(divergence(t.info["divergence"], *map(self.value, t.args[:2])))
        if op == "infer":
            return self.symbolic(t.args[0])
        raise TypeError(f"{op} is not a value term")

    def candidate(self, c: Any) -> Any:
        """A candidate of the exponential mechanism: a public value or a public term."""
        return self.value(c) if isinstance(c, Term) else c

    def exp_scores(self, t: Term, values: list[Any]) -> np.ndarray:
        """The scores of an ``exp_mech`` term for its candidate ``values`` (finite reals)."""
        r, score, _ = t.args
        scores = np.empty(len(values))
        for i, c in enumerate(values):
            with self.binding(r, c):
                scores[i] = finite(float(self.value(score)))
        return scores

    # ------------------------------------------------------------ infer: exact inference
    def symbolic(self, m: Term) -> Any:
        """The symbolic distribution of the actual distribution ``m`` (exact inference)."""
        if m.op == "ran":
            return self.value(m.args[0])
        if m.op in ("observe", "learn"):
            if m.op == "observe":
                prior_t, lik, data = m.args[0], m.args[2], m.args[3]
            else:
                data, prior_t, lik = m.args[0], m.args[1], m.args[3]
            prior = self.symbolic(prior_t)
            records = np.asarray(self.value(data), dtype=float).ravel()
            return conjugate_update(prior, lik, records, self)
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
            m, x, body = t.args
            if x.uid not in body.free:  # the draw is discarded: m >>= (lambda _: body) = body
                return self.sample(body)
            with self.binding(x, self.sample(m)):
                return self.sample(body)
        if op in ("lap_mech", "gauss_mech"):
            v = np.asarray(finite(self.value(t.args[0])), dtype=float)
            out = t.info["mechanism"].release(np.atleast_1d(v), rng=self.mech_rng).value
            return float(out[0]) if v.ndim == 0 else np.asarray(out).reshape(v.shape)
        if op == "exp_mech":
            values = [self.candidate(c) for c in t.args[2]]
            scores = self.scores.get(t.uid) if not t.free else None
            if scores is None:
                scores = self.exp_scores(t, values)
                if not t.free:  # the scores depend on the data only
                    self.scores[t.uid] = scores
            chosen = int(t.info["mechanism"].release(scores, rng=self.mech_rng).value)
            return values[chosen]
        if op == "map_records":
            db, y, body = t.args
            out = []
            for rec in np.asarray(self.value(db)):
                with self.binding(y, _plain(rec)):
                    out.append(self.sample(body))
            return np.array(out)
        raise TypeError(f"{op} is not a probabilistic term")

    def _gen(self) -> np.random.Generator:
        if self.gen is None:
            raise ValueError("this term needs randomness but the run has no generator")
        return self.gen


_UNBOUND = object()


def public_value(t: Term) -> Any:
    """Evaluate a closed term that depends on no private data and draws nothing."""
    return Runtime(None, None, None).value(t)


def public_distribution(m: Term) -> Any:
    """The symbolic distribution of a closed actual distribution on no private data."""
    return Runtime(None, None, None).symbolic(m)


def clip_value(x: Any, lo: float | None, hi: float | None) -> Any:
    """np.clip with NaN sent to ``lo`` (or ``hi``): the result is always in [lo, hi]."""
    a = _arith(x)
    out = np.clip(a, -math.inf if lo is None else lo, math.inf if hi is None else hi)
    fill = lo if lo is not None else hi
    if fill is not None:
        out = np.where(np.isnan(out), fill, out)
    return finite(out)


def _plain(y: Any) -> Any:
    return y.item() if isinstance(y, np.generic) else y


def _arith(x: Any) -> Any:
    return np.asarray(x, dtype=float) if isinstance(x, tuple | list | np.ndarray) else float(x)


def _clamped_sum(records: np.ndarray) -> float:
    """The records' exact sum, rounded once to the nearest double (saturating at
    +-DBL_MAX beyond the doubles: ``data.exact.exact_sum``).

    Its change between two runs is the real sum's change plus at most one ulp of the
    result (A4). A sum in doubles from left to right is not 1-Lipschitz in each record:
    with records 2^60, 128 and -2^60 against 2^60, 129 and -2^60 it gave 0 and 256, and
    the certified posterior mean of ``output_parameters_normal`` moved 256 times its
    stated sensitivity (2^48 times with 2^100 in place of 2^60).
    """
    from dpbayes.data.exact import exact_sum

    return finite(exact_sum(records)) if records.size else 0.0


def _same(a: Any, b: Any) -> bool:
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return x.shape == y.shape and bool(np.all(x == y))


def _draw(d: Any, gen: np.random.Generator) -> Any:
    if isinstance(d, Bernoulli | Categorical):
        return d.rvs(gen)
    out = d.rvs(random_state=gen)
    return float(out) if np.ndim(out) == 0 else np.asarray(out)


# The closed parameter domains a run projects onto (PROOF.md §4, "Parameter domains").
TINY = sys.float_info.min  # the smallest positive normal double
#: bounds of a Normal's mean and variance: (m1 - m2)^2 and s1^2 + s2^2 of the models'
#: Normal divergences stay finite (a Python float ** raised OverflowError on large means)
NORMAL_MEAN_MAX = 2.0**510
NORMAL_VAR_MAX = 2.0**1020


def project(x: Any, lo: float, hi: float) -> Any:
    """x (after :func:`finite`) projected onto [lo, hi], coordinatewise: 1-Lipschitz."""
    out = np.clip(np.asarray(finite(x), dtype=float), lo, hi)
    return float(out) if out.ndim == 0 else out


def normal_variance(v: Any) -> float:
    """A Normal variance projected onto [TINY, NORMAL_VAR_MAX] (also the checker's)."""
    return float(project(float(v), TINY, NORMAL_VAR_MAX))


def concentration_cap(size: int) -> float:
    """The largest parameter of a Beta (size 2) or Dirichlet of ``size`` a run builds.

    ``size`` parameters each at most MAX_CONCENTRATION / size sum to at most
    MAX_CONCENTRATION (``terms.MAX_CONCENTRATION``): the divergences are reliable there
    (from a total of about 4e15 the Beta TV was 0 for a true 1). A fixed bound per
    coordinate, so the projection onto [TINY, cap] is 1-Lipschitz per coordinate.
    """
    return MAX_CONCENTRATION / size


def project_simplex(p: Any) -> np.ndarray:
    """p clipped to [0, 1]^k, then Euclidean-projected onto the probability simplex.

    Both maps are 1-Lipschitz in the L2 norm (projections onto convex sets) and fix a
    probability vector (up to rounding). Sorting-based projection (Held et al. 1974;
    Duchi et al. 2008): w = max(v - theta, 0) with theta chosen so that sum(w) = 1.
    """
    v = np.atleast_1d(project(p, 0.0, 1.0)).astype(float)
    if v.ndim != 1 or v.size == 0:
        raise ValueError("categorical p must be a non-empty vector")
    u = np.sort(v)[::-1]
    css = np.cumsum(u)
    j = np.arange(1, u.size + 1)
    rho = int(np.nonzero(u - (css - 1.0) / j > 0)[0][-1])  # u_1 - (u_1 - 1) = 1 > 0
    theta = (css[rho] - 1.0) / (rho + 1)
    return np.maximum(v - theta, 0.0)


def make_distribution(family: str, params: list[Any]) -> Any:
    """The run-time object of a symbolic distribution (normal takes mean and variance).

    Every parameter is projected onto its closed domain (``PROOF.md`` §4): the m
    concentrations of a Beta (m = 2) or Dirichlet each onto [TINY, MAX_CONCENTRATION / m]
    (:func:`concentration_cap`: they sum to at most MAX_CONCENTRATION), a Normal mean
    onto [-NORMAL_MEAN_MAX, NORMAL_MEAN_MAX] and its variance onto [TINY, NORMAL_VAR_MAX],
    a Bernoulli p onto [0, 1], a categorical p onto
    the simplex. So a run never fails on a parameter value, on any data set, and every
    bound the checker proves on a parameter holds for the projected one.
    """
    if family == "beta":
        cap = concentration_cap(2)
        return Beta(project(float(params[0]), TINY, cap), project(float(params[1]), TINY, cap))
    if family == "normal":
        mean = project(float(params[0]), -NORMAL_MEAN_MAX, NORMAL_MEAN_MAX)
        return Normal(mean, math.sqrt(normal_variance(params[1])))
    if family == "dirichlet":
        alpha = np.asarray(params[0], dtype=float)
        return Dirichlet(project(alpha, TINY, concentration_cap(max(alpha.size, 1))))
    if family == "bernoulli":
        return Bernoulli(project(float(params[0]), 0.0, 1.0))
    if family == "categorical":
        return Categorical(project_simplex(params[0]))
    raise ValueError(f"unknown distribution family {family!r}")


def divergence(name: str, p: Any, q: Any) -> float:
    """H, TV or KL of two distributions of the same family (the models' closed forms).

    The TV of two 2-category Dirichlets is that of the Betas of their first coordinates,
    Beta(alpha_0, alpha_1), read directly: the models' ``marginal`` forms alpha_1 as
    sum(alpha) - alpha_0, which rounds to 0 (and raised) when alpha_1 is below an ulp of
    alpha_0, on some parameters only.

    It never raises on arithmetic for valid parameters: an ArithmeticError (the models'
    ``betaln`` overflowed at a + b ~ 2.5e305, on one data set and not its neighbour)
    gives NaN, and H and TV are clamped to [0, 1].
    """
    if name == "tv" and isinstance(p, Dirichlet) and isinstance(q, Dirichlet):
        if p.m == 2 and q.m == 2:
            p, q = Beta(*p.alpha.tolist()), Beta(*q.alpha.tolist())
    fn = {"hellinger": _hellinger, "tv": _tv, "kl": _kl}[name]
    own = _own_divergence(name, p, q)  # KL, Beta TV: exact at tiny parameters (PROOF §4)
    if own is not None:
        fn = own
    try:
        with np.errstate(all="ignore"):
            value = float(fn(p, q))
    except ArithmeticError:
        # an overflow on some parameters only would tell the data sets apart (A3 covers
        # only public failures): the run goes on with NaN, which finite() sends to 0
        value = math.nan
    if name != "kl" and not math.isnan(value):
        value = min(max(value, 0.0), 1.0)  # H and TV are in [0, 1]
    return value


def _own_divergence(name: str, p: Any, q: Any) -> Any:
    """The programs' own KL (Beta, Dirichlet) and Beta TV, or None for the models' one.

    The models' KL was NaN and their TV 0 (or 1) at parameters far below 0.01, where a
    density crossing or the smaller argument of a Bregman gap is lost in doubles
    (:mod:`dpbayes.models.divergence_exact`, accurate down to TINY, against mpmath).
    """
    if isinstance(p, Beta) and isinstance(q, Beta):
        if name == "kl":
            return lambda p, q: _divs.kl_beta(p.a, p.b, q.a, q.b)
        if name == "tv":
            return lambda p, q: _divs.tv_beta(p.a, p.b, q.a, q.b)
    if name == "kl" and isinstance(p, Dirichlet) and isinstance(q, Dirichlet) and p.m == q.m:
        return lambda p, q: _divs.kl_dirichlet(p.alpha, q.alpha)
    return None


def distribution_params(d: Any) -> tuple[Any, ...]:
    """getParams: Beta -> (a, b); Normal -> (mean, variance); Dirichlet -> (alpha,)."""
    if isinstance(d, Beta):
        return (float(d.a), float(d.b))
    if isinstance(d, Normal):
        return (float(d.loc), float(d.sd) ** 2)
    if isinstance(d, Dirichlet):
        return tuple(float(x) for x in d.alpha)
    raise TypeError(f"get_params needs a Beta, Normal or Dirichlet, got {type(d).__name__}")


def conjugate_update(prior: Any, lik: Term, records: np.ndarray, rt: Runtime) -> Any:
    """The posterior after observing ``records`` drawn from the likelihood ``lik`` (exact).

    ``lik`` is the likelihood's body ``family(r, ...)``; its parameters after r are public.
    """
    family = lik.info["family"]
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
        kv = normal_variance(rt.value(lik.args[1]))  # projected, as the checker reads it
        v0 = float(prior.sd) ** 2
        prec = finite(1.0 / v0 + records.size / kv)
        # clamped arithmetic (finite), as everywhere: 1-Lipschitz in the records' sum
        total = finite(finite(float(prior.loc) / v0) + finite(_clamped_sum(records) / kv))
        return make_distribution("normal", [finite(total / prec), 1.0 / prec])
    raise TypeError(
        f"no conjugate update for a {type(prior).__name__} prior with a {family} likelihood"
    )
