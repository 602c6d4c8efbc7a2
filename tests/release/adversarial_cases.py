"""Case library of the adversarial privacy tests: one entry per (mechanism, model, options).

Each :class:`Case` is a registered release mechanism with its options, a pair of
neighbouring data sets chosen at the numerical edges (priors 1e-3 and 1e3, n in the
thousands, counts at 0, 1 and n, eps from 0.01 to 100, substitute and add/remove, one
record or one user), the relation they are neighbours under, and how the privacy loss is
measured:

* ``"exact"``: the mechanism's outputs are finite (geometric counts, the exponential
  mechanism, randomized response, the MAP grid), so the two output laws are computed in
  log space and compared exactly (:mod:`dpbayes.audit.exact`). The "empirical lower
  bound" is then the true eps of the pair (confidence 1).
* ``"auditor"``: continuous outputs (Laplace, Gaussian). The project's empirical auditor
  (:func:`dpbayes.audit.audit`) runs the real release ``samples`` times per data set and
  gives an eps lower bound at ``CONFIDENCE``; in addition the exact loss of the pair is
  computed in closed form from the noise law the release states (its scale or sigma) and
  the two data sets' exact statistics, computed here independently of the mechanism.

Everything a recipient sees is compared: the released values *and* the numeric public
facts and guarantee details (``n``, scales, ...). A public fact that differs between the
neighbours (an exact ``n`` under a relation that changes it) makes the loss infinite.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from scipy import special

from dpbayes.audit import audit
from dpbayes.audit.exact import exact_epsilon_log, product_exact_epsilon
from dpbayes.audit.targets import expmech_log_distribution
from dpbayes.data import Table
from dpbayes.models import BayesNet, NormalMean
from dpbayes.privacy.noise import noise_source
from dpbayes.release.base import plan

CONFIDENCE = 0.99
NONE_CODE = -9.87654321e300  # a published None, as a number the auditor can compare


@dataclass(frozen=True)
class Case:
    """One adversarial case. ``claim_factor`` > 1 for data sets that are several
    neighbours apart (a user substituted = removed + added: 2 x the stated eps)."""

    name: str
    mechanism: str
    model: Any
    x: Any
    x_prime: Any
    epsilon: float
    relation: str
    method: str
    delta: float = 0.0
    neighbours: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    column: str | None = None
    claim_factor: float = 1.0
    samples: int = 10_000
    slow: bool = False

    @property
    def key(self) -> tuple[str, type]:
        return self.mechanism, type(self.model)

    def plan_for(self, data: Any) -> Any:
        return plan(
            self.model,
            data,
            mechanism=self.mechanism,
            epsilon=self.epsilon,
            delta=self.delta,
            neighbours=self.neighbours,
            column=self.column,
            **self.options,
        )

    def statistics(self, data: Any) -> Any:
        if isinstance(self.model, BayesNet):
            return self.model.statistics(data)
        return self.model.statistics(data, column=self.column)


@dataclass(frozen=True)
class Outcome:
    """What a case measured: the bound that must not exceed ``claim``."""

    case: str
    claim: float
    claim_delta: float
    lower_bound: float  # exact eps ("exact") or the auditor's bound ("auditor")
    confidence: float  # 1 for exact
    closed_form: float | None = None  # "auditor": the exact loss from the stated noise law

    def describe(self) -> str:
        extra = "" if self.closed_form is None else f", closed-form exact {self.closed_form:.4g}"
        return (
            f"{self.case}: claim eps {self.claim:.4g}"
            + (f" (delta {self.claim_delta:.2g})" if self.claim_delta else "")
            + f", lower bound {self.lower_bound:.4g} at confidence {self.confidence:g}{extra}"
        )


# ---------------------------------------------------------------- what is published


def _flat(value: Any) -> list[float]:
    if value is None:
        return [NONE_CODE]
    if isinstance(value, bool):
        return [float(value)]
    if isinstance(value, int | float | np.integer | np.floating):
        return [float(value)]
    if isinstance(value, str):
        return [float(zlib.crc32(value.encode()))]
    if isinstance(value, dict):
        return [x for k in sorted(value) for x in _flat(value[k])]
    if isinstance(value, list | tuple | np.ndarray):
        return [x for v in value for x in _flat(v)]
    return []


def published(rel: Any) -> np.ndarray:
    """Every number a recipient of ``rel`` sees: released values, public facts, details."""
    return np.array(
        _flat(rel.released) + _flat(rel.public) + _flat(dict(rel.guarantee.details)),
        dtype=float,
    )


def public_part(rel: Any) -> np.ndarray:
    """The published numbers that are not noisy (public facts and guarantee details)."""
    return np.array(_flat(rel.public) + _flat(dict(rel.guarantee.details)), dtype=float)


def _same_public(px: Any, py: Any) -> bool:
    a = public_part(px.run(noise_source(0)))
    b = public_part(py.run(noise_source(0)))
    return a.shape == b.shape and bool(np.all(a == b))


# ---------------------------------------------------------------- exact laws (log space)


def _geometric_factor(count: int, scale: float, upper: float, top: int) -> np.ndarray:
    """log P(clip(count + Z, 0, upper) = j), j = 0..top, Z discrete Laplace(scale)."""
    q = math.exp(-1.0 / scale)
    log_norm = math.log1p(-q) - math.log1p(q)  # P(Z = z) = (1-q)/(1+q) q^|z|
    j = np.arange(top + 1, dtype=float)
    out = log_norm - np.abs(j - count) / scale
    # P(count + Z <= 0) = P(Z <= -count) = q^count / (1 + q)
    out[0] = count * math.log(q) - math.log1p(q) if count > 0 else math.log(1.0 / (1.0 + q))
    if math.isfinite(upper):
        u = int(upper)
        out[u] = (u - count) * math.log(q) - math.log1p(q) if u > count else -math.log1p(q)
        out[u + 1 :] = -np.inf
    return out


def exact_geometric(case: Case, px: Any, py: Any) -> float:
    """The noised count coordinates are independent clipped discrete Laplace variables."""
    gx = px.guarantee
    sx = case.statistics(case.x)
    sy = case.statistics(case.x_prime)
    rel = px.run(noise_source(0))
    k = int(rel.public["noised_coordinates"])
    lo_hi = rel.public["truncation"]
    upper = math.inf if lo_hi[1] is None else float(lo_hi[1])
    scale = float(gx.details["scale"])
    cx, cy = np.asarray(sx.counts)[:k], np.asarray(sy.counts)[:k]
    # beyond max(count) + 2 the ratio of the two tails is constant: enough support
    top = int(max(cx.max(), cy.max()) + 2) if not math.isfinite(upper) else int(upper)
    fx = [_geometric_factor(int(c), scale, upper, top) for c in cx]
    fy = [_geometric_factor(int(c), scale, upper, top) for c in cy]
    return product_exact_epsilon(fx, fy)


def _log_binom(m: int, p: float) -> np.ndarray:
    j = np.arange(m + 1, dtype=float)
    lg = special.gammaln
    return np.asarray(
        lg(m + 1) - lg(j + 1) - lg(m - j + 1) + j * math.log(p) + (m - j) * math.log1p(-p)
    )


def _log_convolve(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.size > b.size:
        a, b = b, a
    out = np.full(a.size + b.size - 1, -np.inf)
    for i, v in enumerate(a):
        out[i : i + b.size] = np.logaddexp(out[i : i + b.size], v + b)
    return out


def exact_randomized_response(case: Case, px: Any, py: Any) -> float:
    """Reported ones = Bin(k, p) + Bin(n - k, 1 - p), p the keep probability the release
    states; convolved exactly in log space."""
    keep = float(px.run(noise_source(0)).public["keep_probability"])
    laws = []
    for data in (case.x, case.x_prime):
        st = case.statistics(data)
        n, k = int(st.n), int(st.counts[0])
        laws.append(_log_convolve(_log_binom(k, keep), _log_binom(n - k, 1.0 - keep)))
    return exact_epsilon_log(laws[0], laws[1])


def exact_expmech(case: Case, px: Any, py: Any) -> float:
    """The exponential mechanism's selection law over the (shared) candidate set."""
    div = case.options.get("divergence", "hellinger")
    ox, lx = expmech_log_distribution(case.model, px, case.x, case.epsilon, div)
    oy, ly = expmech_log_distribution(case.model, py, case.x_prime, case.epsilon, div)
    if not np.array_equal(ox, oy):
        return math.inf  # different candidate sets: told apart with certainty
    return exact_epsilon_log(lx, ly, case.delta)


def exact_map(case: Case, px: Any, py: Any) -> float:
    """Algorithm 3: one exponential-mechanism choice per CPT row over the grid, at the
    temperature the release states; utilities (alpha_row - 1) . log(grid point)."""
    from dpbayes.release.bayes_net.sampling import map_grid

    rel = px.run(noise_source(0))
    scale = float(rel.public["scale"])
    trim, steps = float(rel.public["trim"]), int(rel.public["grid"])
    model: BayesNet = case.model
    posts = [model.posterior_from(case.statistics(d)) for d in (case.x, case.x_prime)]
    fx, fy = [], []
    for v in model.nodes:
        k = model.cardinality(v)
        logg = np.log(map_grid(k, trim, steps))
        rows = [p.alphas[v].reshape(-1, k) for p in posts]
        for ra, rb in zip(rows[0], rows[1], strict=True):
            for r, f in ((ra, fx), (rb, fy)):
                u = logg @ (r - 1.0) / scale
                f.append(u - special.logsumexp(u))
    return product_exact_epsilon(fx, fy)


EXACT: dict[str, Callable[[Case, Any, Any], float]] = {
    "geometric": exact_geometric,
    "input": exact_randomized_response,
    "expmech": exact_expmech,
    "map": exact_map,
}


# ---------------------------------------------------------------- closed forms (continuous)


def _gaussian_epsilon(shift: float, sigma: float, delta: float) -> float:
    """The smallest eps with delta(eps) <= delta for N(0, sigma^2) vs N(shift, sigma^2):
    delta(eps) = Phi(D/2s - eps s/D) - e^eps Phi(-D/2s - eps s/D) (Balle & Wang 2018)."""
    if shift == 0:
        return 0.0
    a, b = shift / (2 * sigma), sigma / shift

    def profile(eps: float) -> float:
        return float(special.ndtr(a - eps * b) - math.exp(eps + special.log_ndtr(-a - eps * b)))

    if profile(0.0) <= delta:
        return 0.0
    lo, hi = 0.0, 1.0
    while profile(hi) > delta:
        hi *= 2.0
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if profile(mid) > delta else (lo, mid)
    return hi


def _counts(case: Case, data: Any, k: int) -> np.ndarray:
    return np.asarray(case.statistics(data).counts, dtype=float)[:k]


def _normal_vector(case: Case, data: Any, rel: Any) -> np.ndarray:
    model: NormalMean = case.model
    values = _values(data)
    clamped = np.clip(values, model.lower, model.upper)
    if rel.public.get("n") is not None:  # substitute: the posterior mean
        tau = 1 / model.prior_sd**2 + clamped.size / model.noise_sd**2
        return np.array(
            [(model.prior_mean / model.prior_sd**2 + clamped.sum() / model.noise_sd**2) / tau]
        )
    c, w = 0.5 * (model.lower + model.upper), 0.5 * (model.upper - model.lower)
    return np.array([float(clamped.size), float(np.sum(clamped - c) / w)])


_FRAMES: dict[int, pd.DataFrame] = {}  # the rows behind each user-level table built here


def _frame(data: Any) -> Any:
    return _FRAMES[id(data)] if isinstance(data, Table) else data


def _values(data: Any) -> np.ndarray:
    frame = _frame(data)
    if isinstance(frame, pd.DataFrame):
        return np.asarray(frame["x"], dtype=float)
    return np.asarray(frame, dtype=float)


def _fourier_vector(case: Case, data: Any, rel: Any) -> np.ndarray:
    """c_a = sum over records of (-1)^{sum_{i in a} x_i}, computed from the rows."""
    from dpbayes.release.bayes_net.fourier import downward_closure

    model: BayesNet = case.model
    frame = _frame(data)
    bits = np.column_stack(
        [
            np.asarray(
                [list(model.variables[v]).index(x) for x in frame[v].tolist()], dtype=np.int64
            )
            for v in model.nodes
        ]
    )
    noised = [a for a in downward_closure(model) if a != 0 or rel.public.get("n") is None]
    out = []
    for a in noised:
        mask = np.array([(a >> i) & 1 for i in range(len(model.nodes))], dtype=np.int64)
        out.append(float(np.sum(np.where((bits @ mask) % 2 == 0, 1.0, -1.0))))
    return np.array(out)


def _pre_noise(case: Case, data: Any, rel: Any) -> np.ndarray:
    """The vector the release adds its noise to, from the data (not from the mechanism)."""
    if case.mechanism == "fourier":
        return _fourier_vector(case, data, rel)
    if isinstance(case.model, NormalMean):
        if case.mechanism == "input":  # the sum of the clamped values gets N(0, n sigma^2)
            m: NormalMean = case.model
            return np.array([float(np.sum(np.clip(_values(data), m.lower, m.upper)))])
        return _normal_vector(case, data, rel)
    if isinstance(case.model, BayesNet):
        return np.asarray(case.statistics(data).vector(case.model), dtype=float)
    return _counts(case, data, int(rel.public["noised_coordinates"]))


def closed_form_epsilon(case: Case, px: Any, py: Any) -> float:
    """The exact loss of the pair from the stated noise law: ||f(x) - f(x')||_1 / b for
    Laplace noise of scale b, the Gaussian profile at the claimed delta for sigma."""
    rx, ry = px.run(noise_source(0)), py.run(noise_source(0))
    if not _same_public(px, py):
        return math.inf
    fx, fy = _pre_noise(case, case.x, rx), _pre_noise(case, case.x_prime, ry)
    details = rx.guarantee.details
    if case.mechanism == "input":  # per-record Gaussian noise: the total has sd sigma sqrt(n)
        sigma = float(rx.public["sigma"]) * math.sqrt(_values(case.x).size)
        return _gaussian_epsilon(float(abs(fx - fy).sum()), sigma, case.delta * case.claim_factor)
    if "sigma" in details:
        shift = float(np.linalg.norm(fx - fy))
        return _gaussian_epsilon(shift, float(details["sigma"]), case.delta * case.claim_factor)
    return float(np.abs(fx - fy).sum() / float(details["scale"]))


# ---------------------------------------------------------------- running a case


def run_case(case: Case) -> Outcome:
    """Measure ``case``: the exact eps, or the auditor's bound and the closed form."""
    px, py = case.plan_for(case.x), case.plan_for(case.x_prime)
    g = px.guarantee
    claim = g.epsilon * case.claim_factor
    claim_delta = g.delta * case.claim_factor
    if case.method == "exact":
        loss = EXACT[case.mechanism](case, px, py) if _same_public(px, py) else math.inf
        return Outcome(case.name, claim, claim_delta, loss, 1.0)
    plans = {id(case.x): px, id(case.x_prime): py}

    def mechanism(data: Any, gen: np.random.Generator, size: int) -> list[Any]:
        src = noise_source(gen)
        chosen = plans[id(data)]
        return [chosen.run(src) for _ in range(size)]

    res = audit(
        mechanism,
        [(case.x, case.x_prime, case.name)],
        epsilon=claim,
        delta=claim_delta,
        samples=case.samples,
        confidence=CONFIDENCE,
        statistic=published,
        batch=True,
        rng=zlib.crc32(case.name.encode()),
        name=case.name,
    )
    closed = closed_form_epsilon(case, px, py)
    return Outcome(
        case.name, claim, claim_delta, res.epsilon_lower_bound, CONFIDENCE, closed_form=closed
    )


# ---------------------------------------------------------------- data at the edges


def coin(n: int, k: int) -> np.ndarray:
    return np.r_[np.ones(k, dtype=np.int64), np.zeros(n - k, dtype=np.int64)]


def die(counts: list[int], categories: list[str]) -> np.ndarray:
    return np.repeat(np.array(categories, dtype=object), counts)


def users(values_per_user: list[list[Any]], k: int) -> Table:
    """A table bounded to k rows per user (every user holds <= k rows, so all are kept):
    user i holds the rows values_per_user[i] of column ``x``."""
    ids = [i for i, vals in enumerate(values_per_user) for _ in vals]
    vals = [v for vs in values_per_user for v in vs]
    return _bounded(pd.DataFrame({"person": ids, "x": vals}), k)


def net_users(frame: pd.DataFrame, person: np.ndarray, k: int) -> Table:
    return _bounded(frame.assign(person=person), k)


def _bounded(frame: pd.DataFrame, k: int) -> Table:
    assert int(frame.groupby("person").size().max()) <= k  # every row is kept
    table = Table(frame, user_column="person", max_rows_per_user=k)
    _FRAMES[id(table)] = frame.drop(columns="person")
    return table


CATS3 = ["a", "b", "c"]
CATS4 = ["w", "x", "y", "z"]


def binary_net(alpha: float) -> BayesNet:
    return BayesNet(
        {"a": [0, 1], "b": [0, 1], "c": [0, 1]},
        [("a", "b"), ("a", "c"), ("b", "c")],
        alpha=alpha,
    )


def net_rows(n: int, ones: int) -> pd.DataFrame:
    """n rows; the first ``ones`` are (1, 1, 1), the rest (0, 0, 0): extreme cells."""
    v = np.r_[np.ones(ones, dtype=np.int64), np.zeros(n - ones, dtype=np.int64)]
    return pd.DataFrame({"a": v, "b": v, "c": v})


def flip_first(frame: pd.DataFrame) -> pd.DataFrame:
    out = frame.copy()
    out.iloc[0] = 1 - out.iloc[0]
    return out


def add_row(frame: pd.DataFrame, row: dict[str, int]) -> pd.DataFrame:
    return pd.concat([frame, pd.DataFrame([row])], ignore_index=True)
