"""The PrivInfer language embedded in Python: terms and their constructors.

Paper 002 (Barthe et al., CCS 2016), §4: a functional probabilistic language with
``ran``, ``observe``, ``infer``, ``mlet``/``return`` (here :func:`bind`/:func:`unit`),
``getParams``, symbolic distributions and the Laplace, Gaussian and exponential
mechanisms. A program is a tree of :class:`Term` objects built by the functions below.
Types: *values* (reals, booleans, tuples), *symbolic distributions* (``D[T]``, what
``infer`` returns) and *actual distributions* (the monad ``M[T]``, what mechanisms, ``ran``
and ``unit`` return; running a program draws from it).

Binders (``bind``, ``map_records``, the score of ``exp_mech``, the likelihood of
``observe``/``learn``) take a Python function from a term to a term. The function is
called **once**, when the binder is built, on a fresh variable; the term it returns is the
binder's body, and the checker and the interpreter both read that one body (the
interpreter binds the variable to a value in an environment). So a binder cannot behave
differently when checked and when run: it is never called again. Terms are immutable:
``info`` is read-only, constants are frozen copies (a numpy array passed to :func:`const`
cannot be changed after the program is checked), and :func:`const` refuses a term, so a
value that depends on private data cannot be passed off as a public constant.
"""

from __future__ import annotations

import itertools
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np

from dpbayes.models.distributions import Beta, Dirichlet, Normal
from dpbayes.privacy.mechanisms import ExponentialMechanism, GaussianMechanism, LaplaceMechanism
from dpbayes.privacy.validation import check_delta, check_finite, check_int, check_positive

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

#: the distribution classes a constant may be (exact types: a subclass could override reads)
_DISTRIBUTIONS = (Beta, Normal, Dirichlet)

DIST_FAMILIES = ("bernoulli", "beta", "normal", "categorical", "dirichlet")


def _free_of(args: tuple[Any, ...]) -> set[int]:
    out: set[int] = set()
    for a in args:
        if isinstance(a, Term):
            out |= a.free
        elif isinstance(a, tuple):
            out |= _free_of(a)
    return out


@dataclass(frozen=True, eq=False)
class Term:
    """A node of a program. ``op`` names the construct, ``args`` are sub-terms or data.

    ``kind`` is the simple type's shape: ``"value"``, ``"sym"`` (symbolic distribution),
    ``"monad"`` (actual distribution) or ``"db"`` (the private input list). ``free`` is the
    set of the uids of the variables that occur free in the term (a binder's own variable,
    ``info["binds"]``, is not free in it).
    """

    op: str
    args: tuple[Any, ...]
    kind: str
    info: Mapping[str, Any] = field(default_factory=dict)
    uid: int = field(default_factory=lambda: next(_counter))
    free: frozenset[int] = field(init=False, default=frozenset())

    def __post_init__(self) -> None:
        object.__setattr__(self, "info", MappingProxyType(dict(self.info)))
        if self.op == "const":
            object.__setattr__(self, "args", (_freeze(self.args[0], "const value"),))
        free = {self.uid} if self.op == "var" else _free_of(self.args)
        free.discard(self.info.get("binds", -1))
        object.__setattr__(self, "free", frozenset(free))

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


def _variable(name: str) -> Term:
    return Term("var", (), "value", {"name": name})


def _abstract(f: Any, what: str, name: str) -> tuple[Term, Any]:
    """Call the binder function ``f`` once, on a fresh variable: (variable, body)."""
    if not callable(f):
        raise TypeError(f"{what} must be a function from a term to a term, got {type(f).__name__}")
    v = _variable(f"{name}{next(_counter)}")
    return v, f(v)


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


def _freeze(value: Any, what: str) -> Any:
    """A public constant converted once, now, to the one value checker and interpreter read.

    A number (Python or numpy, bool included) becomes a plain float, an array a read-only
    float64 array, a list or tuple a tuple of frozen items; the models' Beta, Normal and
    Dirichlet (immutable, float parameters) are kept. Anything else is refused: an object
    of another class could read as one number to the checker (``np.asarray(x, float)``) and
    another to the run (``float(x)``). A program term is refused: it may depend on private
    data.
    """
    if isinstance(value, Term):
        raise TypeError(
            f"{what} must be a public Python value, got the program term {value!r}: a term "
            "may depend on private data and cannot be made a public constant"
        )
    if type(value) in (bool, int, float) or isinstance(value, np.bool_ | np.integer | np.floating):
        return float(value)
    if type(value) is np.ndarray:
        if value.dtype == object:
            return tuple(_freeze(v, what) for v in value.tolist())
        if value.dtype.kind not in "biuf":
            raise TypeError(f"{what} must be a numeric array, got dtype {value.dtype}")
        arr = np.array(value, dtype=float)  # a copy
        arr.flags.writeable = False
        return arr
    if type(value) in (list, tuple):
        return tuple(_freeze(v, what) for v in value)
    if type(value) in _DISTRIBUTIONS:
        _check_concentrations(value, what)
        return value
    raise TypeError(
        f"{what} must be a number, tuple, list, numpy array or Beta/Normal/Dirichlet, "
        f"not a {type(value).__name__}"
    )


#: The largest total concentration of a Beta or Dirichlet a program handles (before the
#: counts of a posterior): constants above it are refused, and a run projects the
#: parameters it builds onto [TINY, MAX_CONCENTRATION / m] (``interpreter.make_distribution``,
#: ``PROOF.md`` §4). The H and TV to a Beta are computed with an absolute error that grows
#: with the concentration, while the observe lemma's bound shrinks like its inverse square
#: root: at a total of 1e11 a run's TV (H) score moved by 73 (20) times its certified
#: sensitivity between neighbours, at 1e14 by 1e5 times, and from about 4e15 the TV was 0
#: for a true 1. Up to a total of 1e10 no score of 2,400 random neighbour/candidate
#: triples moved beyond the bound (``tests/programs/test_run_built_concentrations.py``);
#: 1e9 keeps a margin of ten, with the counts a posterior adds: the checker refuses a
#: Beta/Dirichlet posterior whose prior's total plus its records exceed
#: ``rules_monad.MAX_POSTERIOR`` = 1e9 + 1e7 (``PROOF.md`` §4, "Posterior concentrations").
MAX_CONCENTRATION = 1e9


def _check_concentrations(d: Any, what: str) -> None:
    """Refuse a Beta or Dirichlet constant with a parameter below the smallest normal double,
    or whose parameters sum to more than :data:`MAX_CONCENTRATION`.

    A run projects each of the m parameters of a Beta/Dirichlet it builds onto
    [TINY, MAX_CONCENTRATION / m] (``interpreter.make_distribution``); a constant (a
    candidate, a prior) is the one way to bring a smaller or larger one in, and at a
    subnormal a the tail of Beta(a, b) lies at log x ~ -1/a, past the doubles, where its
    TV and KL are not computed (``PROOF.md`` §4).
    Public input only: refused when the term is built, alike for every data set.
    """
    if not isinstance(d, Beta | Dirichlet):
        return
    params = [d.a, d.b] if isinstance(d, Beta) else np.ravel(d.alpha).tolist()
    if min(params) < sys.float_info.min:
        raise ValueError(
            f"{what}: a {type(d).__name__} parameter must be at least "
            f"{sys.float_info.min!r} (the smallest normal double), got {min(params)!r}"
        )
    if math.fsum(params) > MAX_CONCENTRATION:
        raise ValueError(
            f"{what}: a {type(d).__name__}'s parameters must sum to at most "
            f"{MAX_CONCENTRATION:g}, got {math.fsum(params):g} (beyond it the total variation "
            "to it is not computed reliably in doubles)"
        )


def const(value: Any) -> Term:
    """A public constant (a number, a tuple, an array, a distribution), frozen at construction.

    A program term is refused (TypeError): ``const`` cannot make a term public.
    """
    return Term("const", (value,), "value")


def add(a: Any, b: Any) -> Term:
    """a + b (numpy broadcasting)."""
    return Term("add", (_expect(a, ("value",), "a"), _expect(b, ("value",), "b")), "value")


def neg(a: Any) -> Term:
    """-a."""
    return Term("neg", (_expect(a, ("value",), "a"),), "value")


def mul(c: Any, a: Any) -> Term:
    """c * a (numpy broadcasting); the checker needs one factor public and known when checked."""
    return Term("mul", (_expect(c, ("value",), "c"), _expect(a, ("value",), "a")), "value")


def _bound_or_none(x: Any, name: str) -> float | None:
    return None if x is None else check_finite(x, name)


def clip(a: Any, lower: float | None = None, upper: float | None = None) -> Term:
    """min(max(a, lower), upper) on every coordinate (NaN becomes ``lower``, else ``upper``).

    1-Lipschitz post-processing; with both bounds every coordinate moves by at most
    ``upper - lower``, whatever its input does.
    """
    lo, hi = _bound_or_none(lower, "lower"), _bound_or_none(upper, "upper")
    if lo is not None and hi is not None and lo > hi:
        raise ValueError(f"lower must be <= upper, got lower={lo}, upper={hi}")
    return Term("clip", (_expect(a, ("value",), "a"), lo, hi), "value")


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


def _sym_or_const(q: Any) -> Term:
    if isinstance(q, Term):
        if q.kind not in ("sym", "value"):
            raise TypeError(f"q must be a symbolic distribution, got a {q.kind} ({q.op})")
        return q
    return const(q)


def _divergence(name: str, p: Term, q: Any) -> Term:
    return Term(
        "divergence", (_expect(p, ("sym",), "p"), _sym_or_const(q)), "value", {"divergence": name}
    )


def hellinger(p: Term, q: Any) -> Term:
    """Hellinger distance between two symbolic distributions (H^2 = 1 - affinity)."""
    return _divergence("hellinger", p, q)


def total_variation(p: Term, q: Any) -> Term:
    """Total variation distance between two symbolic distributions."""
    return _divergence("tv", p, q)


def kl(p: Term, q: Any) -> Term:
    """KL divergence KL(p || q) between two symbolic distributions (not a metric)."""
    return _divergence("kl", p, q)


# ---------------------------------------------------------------- monad and inference
def ran(d: Term) -> Term:
    """The actual distribution of a symbolic one (paper: ran)."""
    return Term("ran", (_expect(d, ("sym",), "d"),), "monad")


def unit(v: Any) -> Term:
    """The point mass at v (paper: return)."""
    return Term("unit", (_expect(v, ("value", "sym"), "v"),), "monad")


def bind(m: Term, f: Callable[[Term], Term]) -> Term:
    """mlet x = m in f(x): sample x from m, continue with the distribution f(x).

    ``f`` is called once, now, on a fresh variable x.
    """
    m = _expect(m, ("monad",), "m")
    x, body = _abstract(f, "f", "x")
    if not isinstance(body, Term) or body.kind != "monad":
        raise TypeError("the body of bind must return an actual distribution (a monad term)")
    return Term("bind", (m, x, body), "monad", {"var": x.info["name"], "binds": x.uid})


def _likelihood(likelihood: Callable[[Term], Term]) -> tuple[Term, Term]:
    """(r, likelihood(r)), checked to be ``family(r, public parameters...)``."""
    r, lik = _abstract(likelihood, "likelihood", "r")
    if not isinstance(lik, Term) or lik.op != "dist":
        raise TypeError("likelihood must return a symbolic distribution, e.g. bernoulli(r)")
    fam = lik.info["family"]
    if fam not in ("bernoulli", "categorical", "normal"):
        raise TypeError(
            f"likelihood must be bernoulli(r), categorical(r) or normal(r, kv), got {fam}"
        )
    if lik.args[0] is not r or any(r.uid in a.free for a in lik.args[1:]):
        raise TypeError(
            f"likelihood must be {fam}(r{', kv' if fam == 'normal' else ''}) with the parameter "
            "r itself as its first argument and public constants after it"
        )
    return r, lik


def observe(prior: Term, likelihood: Callable[[Term], Term], datum: Any) -> Term:
    """Condition ``prior`` on ``datum`` drawn from ``likelihood(r)`` (paper: observe).

    The paper's predicate ``fun r -> mlet z = ran likelihood(r) in return (d = z)``; the
    result is the posterior as an actual distribution. A vector datum is that many
    observations.
    """
    prior = _expect(prior, ("monad",), "prior")
    r, lik = _likelihood(likelihood)
    datum = _expect(datum, ("value",), "datum")
    return Term(
        "observe",
        (prior, r, lik, datum),
        "monad",
        {"family": lik.info["family"], "binds": r.uid},
    )


def learn(db: Term, prior: Term, likelihood: Callable[[Term], Term]) -> Term:
    """Observe every record of ``db`` in turn, starting from ``prior``.

    Paper 002 §6 ``learnBias`` / ``learnMean`` / ``learnP``: the recursive fold of
    :func:`observe` over the list.
    """
    db = _expect(db, ("db", "value"), "db")
    prior = _expect(prior, ("monad",), "prior")
    r, lik = _likelihood(likelihood)
    return Term(
        "learn", (db, prior, r, lik), "monad", {"family": lik.info["family"], "binds": r.uid}
    )


def infer(m: Term) -> Term:
    """Exact inference: the symbolic distribution of ``ran``, ``observe`` or ``learn``."""
    m = _expect(m, ("monad",), "m")
    if m.op not in ("ran", "observe", "learn"):
        raise TypeError(
            f"infer supports ran, observe and learn terms (exact conjugate inference), got {m.op}"
        )
    return Term("infer", (m,), "sym")


# ---------------------------------------------------------------- mechanisms
def lap_mech(epsilon: float, v: Any, sensitivity: float = 1.0) -> Term:
    """v + Lap(sensitivity / epsilon) on every coordinate (paper: lapMech).

    Privacy: eps * Delta / sensitivity for a value of L1 sensitivity Delta.
    """
    mech = LaplaceMechanism(epsilon=epsilon, sensitivity=sensitivity)
    return Term(
        "lap_mech",
        (_expect(v, ("value",), "v"),),
        "monad",
        {"epsilon": mech.epsilon, "sensitivity": mech.sensitivity, "mechanism": mech},
    )


def gauss_mech(
    epsilon: float, delta: float, v: Any, sensitivity: float = 1.0, calibration: str = "analytic"
) -> Term:
    """v + N(0, sigma^2), sigma calibrated to (epsilon, delta, L2 sensitivity) (gaussMech).

    The mechanism is built here: parameters it refuses (delta = 0, ``calibration="classic"``
    with epsilon >= 1) are refused when the term is built, not when it runs.
    """
    if check_delta(delta) == 0:
        raise ValueError("delta must be > 0 for the Gaussian mechanism")
    mech = GaussianMechanism(
        epsilon=epsilon, delta=delta, sensitivity=sensitivity, calibration=calibration
    )
    return Term(
        "gauss_mech",
        (_expect(v, ("value",), "v"),),
        "monad",
        {
            "epsilon": mech.epsilon,
            "delta": mech.delta,
            "sensitivity": mech.sensitivity,
            "calibration": mech.calibration,
            "mechanism": mech,
        },
    )


def exp_mech(
    epsilon: float,
    score: Callable[[Term], Any],
    candidates: Sequence[Any],
    sensitivity: float = 1.0,
) -> Term:
    """Candidate r with probability proportional to exp(eps score(r) / (2 sensitivity)).

    Paper 002 Def. 3.5 (McSherry & Talwar 2007). ``score`` maps a (public) candidate to a
    real term that may depend on private data; it is called once, on a variable.
    ``candidates`` is a public list: Python values, or terms the checker must find public.
    """
    mech = ExponentialMechanism(epsilon=epsilon, sensitivity=sensitivity)
    if not 0 < mech.scale < math.inf:
        # refused when built, alike for every data set (not by the sampler, in a run)
        raise ValueError(
            f"exp_mech: the temperature 2 sensitivity / epsilon = {mech.scale:g} must be a "
            "positive finite number (rescale the score)"
        )
    if isinstance(candidates, Term) or not isinstance(candidates, Sequence | np.ndarray):
        raise TypeError("candidates must be a list of public candidates")
    cands = tuple(
        _expect(c, ("value", "sym"), "candidate")
        if isinstance(c, Term)
        else _freeze(c, "candidate")
        for c in candidates
    )
    if not cands:
        raise ValueError("candidates must contain at least one candidate")
    r, body = _abstract(score, "score", "r")
    body = _expect(body, ("value",), "score(r)")
    return Term(
        "exp_mech",
        (r, body, cands),
        "monad",
        {
            "epsilon": mech.epsilon,
            "sensitivity": mech.sensitivity,
            "mechanism": mech,
            "binds": r.uid,
        },
    )


def map_records(db: Term, f: Callable[[Term], Term]) -> Term:
    """Apply the randomised f to every record and collect the results (paper: addNoise).

    ``f`` is called once, now, on a variable standing for a record.
    """
    db = _expect(db, ("db",), "db")
    y, body = _abstract(f, "f", "y")
    if not isinstance(body, Term) or body.kind != "monad":
        raise TypeError("map_records needs f(record) to be an actual distribution")
    return Term("map_records", (db, y, body), "monad", {"var": y.info["name"], "binds": y.uid})
