"""The PrivInfer language embedded in Python: terms and their constructors.

Paper 002 (Barthe et al., CCS 2016), §4: a functional probabilistic language with
``ran``, ``observe``, ``infer``, ``mlet``/``return`` (here :func:`bind`/:func:`unit`),
``getParams``, symbolic distributions and the Laplace, Gaussian and exponential
mechanisms. A program is a tree of :class:`Term` objects built by the functions below;
binders (``bind``, ``map_records``, the score of ``exp_mech``, the likelihood of
``observe``) take Python functions from a term to a term (higher-order abstract syntax),
so the checker can instantiate them with a relational variable and the interpreter with a
value. Types: *values* (reals, booleans, tuples), *symbolic distributions* (``D[T]``,
what ``infer`` returns) and *actual distributions* (the monad ``M[T]``, what mechanisms,
``ran`` and ``unit`` return; running a program draws from it).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from dpbayes.privacy.validation import check_delta, check_epsilon, check_int, check_positive

__all__ = [
    "DIST_FAMILIES",
    "Term",
    "add",
    "bernoulli",
    "beta",
    "bind",
    "categorical",
    "clip",
    "const",
    "dirichlet",
    "eq_score",
    "exp_mech",
    "gauss_mech",
    "get_mean",
    "get_params",
    "hellinger",
    "infer",
    "kl",
    "lap_mech",
    "learn",
    "map_records",
    "mul",
    "multinomial",
    "neg",
    "normal",
    "observe",
    "private_bools",
    "private_categories",
    "private_reals",
    "ran",
    "total_variation",
    "unit",
]

_counter = itertools.count(1)

DIST_FAMILIES = ("bernoulli", "beta", "normal", "categorical", "dirichlet")


@dataclass(frozen=True, eq=False)
class Term:
    """A node of a program. ``op`` names the construct, ``args`` are sub-terms or data.

    ``kind`` is the simple type's shape: ``"value"``, ``"sym"`` (symbolic distribution),
    ``"monad"`` (actual distribution) or ``"db"`` (the private input list).
    """

    op: str
    args: tuple[Any, ...]
    kind: str
    info: dict[str, Any] = field(default_factory=dict)
    uid: int = field(default_factory=lambda: next(_counter))

    # arithmetic sugar: public constants are lifted with const()
    def __add__(self, other: Any) -> Term:
        return add(self, other)

    def __radd__(self, other: Any) -> Term:
        return add(other, self)

    def __sub__(self, other: Any) -> Term:
        return add(self, neg(_lift(other)))

    def __rsub__(self, other: Any) -> Term:
        return add(other, neg(self))

    def __neg__(self) -> Term:
        return neg(self)

    def __mul__(self, other: Any) -> Term:
        return mul(other, self)

    def __rmul__(self, other: Any) -> Term:
        return mul(other, self)

    def __getitem__(self, i: int) -> Term:
        if self.kind != "value":
            raise TypeError(f"only values can be indexed, not a {self.kind} ({self.op})")
        return Term("proj", (self, check_int(i, "index", minimum=0)), "value")

    def __repr__(self) -> str:
        return f"<{self.op}#{self.uid}>"


def _lift(x: Any) -> Term:
    return x if isinstance(x, Term) else const(x)


def _expect(t: Any, kinds: tuple[str, ...], what: str) -> Term:
    t = _lift(t) if "value" in kinds else t
    if not isinstance(t, Term):
        raise TypeError(f"{what} must be a program term, got {type(t).__name__}")
    if t.kind not in kinds:
        raise TypeError(f"{what} must be a {' or '.join(kinds)} term, got a {t.kind} ({t.op})")
    return t


# ---------------------------------------------------------------- inputs and values
def private_bools(name: str, n: int) -> Term:
    """The private input: a list of n booleans; neighbours differ in one entry."""
    return Term(
        "private",
        (),
        "db",
        {"name": name, "n": check_int(n, "n", minimum=1), "record": "bool", "bound": 1.0},
    )


def private_categories(name: str, n: int, k: int) -> Term:
    """The private input: n category indices in 0..k-1; neighbours differ in one entry."""
    return Term(
        "private",
        (),
        "db",
        {
            "name": name,
            "n": check_int(n, "n", minimum=1),
            "record": "category",
            "k": check_int(k, "k", minimum=2),
            "bound": 1.0,
        },
    )


def private_reals(name: str, n: int, bound: float | None = 1.0) -> Term:
    """The private input: n reals; neighbours differ in one entry by at most ``bound``.

    ``bound=None``: one entry may change arbitrarily (unbounded records).
    """
    b = None if bound is None else check_positive(bound, "bound")
    return Term(
        "private",
        (),
        "db",
        {"name": name, "n": check_int(n, "n", minimum=1), "record": "real", "bound": b},
    )


def const(value: Any) -> Term:
    """A public constant (a number, a tuple, a list of candidates, a distribution)."""
    if isinstance(value, Term):
        return value
    return Term("const", (value,), "value")


def add(a: Any, b: Any) -> Term:
    return Term("add", (_expect(a, ("value",), "a"), _expect(b, ("value",), "b")), "value")


def neg(a: Any) -> Term:
    return Term("neg", (_expect(a, ("value",), "a"),), "value")


def mul(c: Any, a: Any) -> Term:
    """c * a; the checker needs one of the two factors public."""
    return Term("mul", (_expect(c, ("value",), "c"), _expect(a, ("value",), "a")), "value")


def clip(a: Any, lower: float | None = None, upper: float | None = None) -> Term:
    """min(max(a, lower), upper): public post-processing, 1-Lipschitz."""
    return Term("clip", (_expect(a, ("value",), "a"), lower, upper), "value")


def eq_score(a: Any, b: Any) -> Term:
    """1.0 if a == b else 0.0 (the score of input perturbation, paper 002 §6.1)."""
    return Term("eq_score", (_expect(a, ("value",), "a"), _expect(b, ("value",), "b")), "value")


# ---------------------------------------------------------------- distributions
def _dist(family: str, *params: Any) -> Term:
    return Term(
        "dist",
        tuple(_expect(p, ("value",), f"{family} parameter") for p in params),
        "sym",
        {"family": family},
    )


def bernoulli(p: Any) -> Term:
    """Symbolic Bernoulli(p)."""
    return _dist("bernoulli", p)


def beta(a: Any, b: Any) -> Term:
    """Symbolic Beta(a, b)."""
    return _dist("beta", a, b)


def normal(mean: Any, var: Any) -> Term:
    """Symbolic Normal with mean ``mean`` and *variance* ``var`` (the paper's convention)."""
    return _dist("normal", mean, var)


def categorical(p: Any) -> Term:
    """Symbolic categorical (one multinomial draw) with probability vector p."""
    return _dist("categorical", p)


multinomial = categorical


def dirichlet(alpha: Any) -> Term:
    """Symbolic Dirichlet(alpha)."""
    return _dist("dirichlet", alpha)


def get_params(d: Term) -> Term:
    """The parameters of a symbolic distribution, as a tuple value (paper: getParams)."""
    return Term("get_params", (_expect(d, ("sym",), "d"),), "value")


def get_mean(d: Term) -> Term:
    """The mean parameter of a symbolic Normal (paper: getMean)."""
    return Term("get_mean", (_expect(d, ("sym",), "d"),), "value")


def hellinger(p: Term, q: Any) -> Term:
    """Hellinger distance between two symbolic distributions (H^2 = 1 - affinity)."""
    return Term(
        "divergence",
        (_expect(p, ("sym",), "p"), _sym_or_const(q)),
        "value",
        {"divergence": "hellinger"},
    )


def total_variation(p: Term, q: Any) -> Term:
    """Total variation distance between two symbolic distributions."""
    return Term(
        "divergence", (_expect(p, ("sym",), "p"), _sym_or_const(q)), "value", {"divergence": "tv"}
    )


def kl(p: Term, q: Any) -> Term:
    """KL divergence KL(p || q) between two symbolic distributions (not a metric)."""
    return Term(
        "divergence", (_expect(p, ("sym",), "p"), _sym_or_const(q)), "value", {"divergence": "kl"}
    )


def _sym_or_const(q: Any) -> Term:
    if isinstance(q, Term):
        if q.kind not in ("sym", "value"):
            raise TypeError(f"q must be a symbolic distribution, got a {q.kind} ({q.op})")
        return q
    return const(q)


# ---------------------------------------------------------------- monad and inference
def ran(d: Term) -> Term:
    """The actual distribution of a symbolic one (paper: ran)."""
    return Term("ran", (_expect(d, ("sym",), "d"),), "monad")


def unit(v: Any) -> Term:
    """The point mass at v (paper: return)."""
    return Term("unit", (_expect(v, ("value", "sym"), "v"),), "monad")


def bind(m: Term, f: Callable[[Term], Term]) -> Term:
    """mlet x = m in f(x): sample x from m, continue with the distribution f(x)."""
    if not callable(f):
        raise TypeError(f"f must be a function from a term to a term, got {type(f).__name__}")
    return Term("bind", (_expect(m, ("monad",), "m"), f), "monad", {"var": f"x{next(_counter)}"})


def observe(prior: Term, likelihood: Callable[[Term], Term], datum: Any) -> Term:
    """Condition ``prior`` on ``datum`` drawn from ``likelihood(r)`` (paper: observe).

    The paper's predicate ``fun r -> mlet z = ran likelihood(r) in return (d = z)``; the
    result is the posterior as an actual distribution.
    """
    fam = _likelihood_family(likelihood)
    return Term(
        "observe",
        (_expect(prior, ("monad",), "prior"), likelihood, _expect(datum, ("value",), "datum")),
        "monad",
        {"family": fam},
    )


def learn(db: Term, prior: Term, likelihood: Callable[[Term], Term]) -> Term:
    """Observe every record of ``db`` in turn, starting from ``prior``.

    Paper 002 §6 ``learnBias`` / ``learnMean`` / ``learnP``: the recursive fold of
    :func:`observe` over the list.
    """
    fam = _likelihood_family(likelihood)
    return Term(
        "learn",
        (_expect(db, ("db", "value"), "db"), _expect(prior, ("monad",), "prior"), likelihood),
        "monad",
        {"family": fam},
    )


def infer(m: Term) -> Term:
    """Exact inference: the symbolic distribution of an actual one (paper: infer)."""
    return Term("infer", (_expect(m, ("monad",), "m"),), "sym")


def _likelihood_family(likelihood: Callable[[Term], Term]) -> str:
    if not callable(likelihood):
        raise TypeError("likelihood must be a function r -> symbolic distribution")
    probe = likelihood(Term("var", (), "value", {"name": "r", "probe": True}))
    if not isinstance(probe, Term) or probe.op != "dist":
        raise TypeError("likelihood must return a symbolic distribution, e.g. bernoulli(r)")
    return str(probe.info["family"])


# ---------------------------------------------------------------- mechanisms
def lap_mech(epsilon: float, v: Any, sensitivity: float = 1.0) -> Term:
    """v + Lap(sensitivity / epsilon) on every coordinate (paper: lapMech).

    Privacy: eps * Delta / sensitivity for a value of L1 sensitivity Delta.
    """
    return Term(
        "lap_mech",
        (_expect(v, ("value",), "v"),),
        "monad",
        {
            "epsilon": check_epsilon(epsilon),
            "sensitivity": check_positive(sensitivity, "sensitivity"),
        },
    )


def gauss_mech(
    epsilon: float, delta: float, v: Any, sensitivity: float = 1.0, calibration: str = "analytic"
) -> Term:
    """v + N(0, sigma^2), sigma calibrated to (epsilon, delta, L2 sensitivity) (gaussMech)."""
    dlt = check_delta(delta)
    if dlt == 0:
        raise ValueError("delta must be > 0 for the Gaussian mechanism")
    if calibration not in ("analytic", "classic"):
        raise ValueError(f"calibration must be 'analytic' or 'classic', got {calibration!r}")
    return Term(
        "gauss_mech",
        (_expect(v, ("value",), "v"),),
        "monad",
        {
            "epsilon": check_epsilon(epsilon),
            "delta": dlt,
            "sensitivity": check_positive(sensitivity, "sensitivity"),
            "calibration": calibration,
        },
    )


def exp_mech(
    epsilon: float,
    score: Callable[[Term], Term],
    candidates: Sequence[Any],
    sensitivity: float = 1.0,
) -> Term:
    """Candidate r with probability proportional to exp(eps score(r) / (2 sensitivity)).

    Paper 002 Def. 3.5 (McSherry & Talwar 2007). ``score`` maps a (public) candidate to a
    real term that may depend on private data; ``candidates`` is a public list.
    """
    if not callable(score):
        raise TypeError("score must be a function candidate -> real term")
    cands = list(candidates)
    if not cands:
        raise ValueError("candidates must contain at least one candidate")
    return Term(
        "exp_mech",
        (score, tuple(cands)),
        "monad",
        {
            "epsilon": check_epsilon(epsilon),
            "sensitivity": check_positive(sensitivity, "sensitivity"),
        },
    )


def map_records(db: Term, f: Callable[[Term], Term]) -> Term:
    """Apply the randomised f to every record and collect the results (paper: addNoise)."""
    if not callable(f):
        raise TypeError("f must be a function record -> actual distribution")
    return Term(
        "map_records", (_expect(db, ("db",), "db"), f), "monad", {"var": f"y{next(_counter)}"}
    )
