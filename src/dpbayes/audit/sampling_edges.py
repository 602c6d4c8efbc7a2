"""Adversarial cases for the posterior-sampling releases at their numerical edges (issue 14).

Builders of neighbouring data sets (substitute one record) for ``mechanism="sampling"``
on Bayesian networks (hence ``PrivateNaiveBayes``) and on Bayesian linear regression,
chosen where the old samplers broke: posteriors far outside the trimmed region or the
weight ball, extreme priors (1e-3, 1e3), n in the thousands, counts at 0, 1 and n, eps
from 0.01 to 100, binary and k >= 3 nodes, regression in 1 and d >= 2 dimensions; the
parameter grids of the three exact samplers; and reference laws computed independently
of the samplers with mpmath (quadrature of the log density, arbitrary exponent range),
for law tests and for the exact privacy loss of one-node releases.

Every builder is a plain function returning plain data, so that a registry-wide
adversarial harness can import and run them.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from dpbayes.models.bayes_net import BayesNet
from dpbayes.models.linear_regression import BayesianLinearRegression

__all__ = [
    "SamplingEdgeCase",
    "ball_edge_grid",
    "bayes_net_edge_cases",
    "beta_edge_grid",
    "binary_reproduction",
    "dirichlet_edge_grid",
    "draws_vector",
    "exact_one_node_epsilon",
    "exact_regression_1d_epsilon",
    "exact_trimmed_beta_cdf",
    "exact_trimmed_beta_quantile_error",
    "exact_truncated_normal_cdf",
    "regression_edge_cases",
    "regression_reproduction",
    "ternary_reproduction",
]


@dataclass(frozen=True)
class SamplingEdgeCase:
    """Two neighbouring data sets (one record substituted) and the release's settings."""

    name: str
    model: Any
    data: Any
    data_prime: Any
    epsilon: float
    options: dict[str, Any] = field(default_factory=dict)


def _one_node(
    k: int, counts: list[int], moved: tuple[int, int], alpha: float
) -> tuple[BayesNet, pd.DataFrame, pd.DataFrame]:
    """A one-node network over 0..k-1 and data with ``counts``, and its neighbour with one
    record moved from category moved[0] to moved[1]."""
    bn = BayesNet({"c": list(range(k))}, alpha=alpha)
    other = list(counts)
    other[moved[0]] -= 1
    other[moved[1]] += 1

    def frame(c: list[int]) -> pd.DataFrame:
        return pd.DataFrame({"c": np.repeat(np.arange(k), c)})

    return bn, frame(counts), frame(other)


def binary_reproduction() -> SamplingEdgeCase:
    """Issue 14: one binary node, n = 1570, eps = 1, one "one" against two (the old secure
    path released one value, 0.62245933..., every time for two)."""
    bn, x, y = _one_node(2, [1569, 1], (0, 1), 1.0)
    return SamplingEdgeCase("binary n=1570: 1 vs 2 ones", bn, x, y, 1.0)


def ternary_reproduction() -> SamplingEdgeCase:
    """Issue 14's 3-category analogue (the old sampler fell back to Gibbs sweeps)."""
    bn, x, y = _one_node(3, [1569, 1, 0], (0, 1), 1.0)
    return SamplingEdgeCase("ternary n=1570: 1 vs 2 in category 1", bn, x, y, 1.0)


def regression_reproduction() -> SamplingEdgeCase:
    """Issue 14: 1-d regression, prior precision 1, noise variance 1e-6, bounds 1, weight
    bound 0.1, n = 2124, all labels +1 against one label -1 (the old sampler returned
    the bound 0.0999... every time)."""
    model = BayesianLinearRegression(
        prior_precision=1.0,
        noise_variance=1e-6,
        feature_bound=1.0,
        label_bound=1.0,
        weight_bound=0.1,
    )
    n = 2124
    x = np.ones((n, 1))
    y = np.ones(n)
    y2 = y.copy()
    y2[0] = -1.0
    return SamplingEdgeCase("regression 1-d n=2124: all +1 vs one -1", model, (x, y), (x, y2), 1.0)


def draws_vector(release: Any) -> np.ndarray:
    """A sampling release's draws as one flat vector (the auditor's statistic)."""
    parts: list[np.ndarray] = []
    for draw in release.released["draws"]:
        values = draw.values() if isinstance(draw, dict) else [draw]
        parts.extend(np.ravel(np.asarray(v, dtype=float)) for v in values)
    return np.concatenate(parts)


def bayes_net_edge_cases() -> list[SamplingEdgeCase]:
    """One-node networks (binary, 3 and 5 categories) at the edges: priors 1e-3, 1, 1e3;
    n = 1, 2000, 5000; every record in one category or all but one (counts 0, 1, n - 1,
    n); eps from 0.01 to 100."""
    cases = []
    for k in (2, 3, 5):
        for alpha in (1e-3, 1.0, 1e3):
            for n in (1, 2000, 5000):
                for eps in (0.01, 1.0, 100.0):
                    corner = [n] + [0] * (k - 1)  # moved: n-1 and 1 against n and 0
                    bn, x, y = _one_node(k, corner, (0, 1), alpha)
                    name = f"k={k} alpha={alpha:g} n={n} eps={eps:g} counts {corner}"
                    cases.append(SamplingEdgeCase(name, bn, x, y, eps))
    return cases


def regression_edge_cases() -> list[SamplingEdgeCase]:
    """Regression with the posterior far outside the weight ball (all labels +1 on a unit
    feature) and one label flipped, in d = 1, 2 and 5, n = 2000, priors 1e-3 and 1e3,
    weight bounds 0.1 and 10, eps 0.01, 1 and 100."""
    cases = []
    for d in (1, 2, 5):
        for lam in (1e-3, 1e3):
            for wb in (0.1, 10.0):
                for eps in (0.01, 1.0, 100.0):
                    model = BayesianLinearRegression(
                        prior_precision=lam,
                        noise_variance=1e-6,
                        feature_bound=1.0,
                        label_bound=1.0,
                        weight_bound=wb,
                    )
                    n = 2000
                    x = np.zeros((n, d))
                    x[:, 0] = 1.0
                    y = np.ones(n)
                    y2 = y.copy()
                    y2[0] = -1.0
                    cases.append(
                        SamplingEdgeCase(
                            f"regression d={d} lambda={lam:g} W={wb:g} eps={eps:g}",
                            model,
                            (x, y),
                            (x, y2),
                            eps,
                        )
                    )
    return cases


def beta_edge_grid() -> list[tuple[float, float, float]]:
    """(a, b, p): Beta(a, b) restricted to [p, 1 - p] at the edges (posterior far inside
    or outside, U-shaped, huge counts; trims from nearly 1/2 down to 1e-22)."""
    ab = [
        (1e-3, 1e-3),
        (1e-3, 1570.001),
        (2.0, 1570.0),
        (1570.0, 2.0),
        (1001.0, 1000.0),
        (1e5, 1.0),
        (0.5, 0.5),
        (20000.0, 19990.0),
        # tiny priors with zero counts: one-sided piles and U-shapes whose interval mass
        # is far below the outer tails (the tails' difference cancels; it is integrated)
        (1e-16, 1e-16),
        (5.0 + 1e-16, 1e-16),
        (1e-12, 3.0 + 1e-12),
        (1e-5, 1e-5),
        # large counts in one row: the front factor x^a y^b / B(a, b) without the rounding
        # of a log x and of the lgamma sum (cdf errors 1e-9 ... 3e-7 before)
        (1e6 + 1.0, 1e6),
        (3.65e6, 1e6),
    ]
    grid = [(a, b, p) for a, b in ab for p in (0.499, 0.4, 0.01, 1e-22)]
    # a review's cases: counts to 1e9, the mass near 1 - 1.5e-7 (carried as its complement),
    # the narrowest interval the samplers accept, rows far outside the interval
    return [
        *grid,
        (4.1e7, 6.0, 1e-22),
        (1e9 + 1.0, 1e9, 0.4999995),
        (1e6, 1e6, 0.4999995),
        (1e9, 2e9, 0.3333),
        (1e9, 6911.82, 9.84e-9),
        # rows far from the interval (log tails ~ -1e7 ... -1e9 at both ends)
        (4.1e7, 6.0, 0.499),
        (6.0, 4.1e7, 0.4),
        (1e9, 6911.82, 0.4),
        (1e9, 6911.82, 0.01),
        # one parameter below 1 against counts near 1e9, ends near the switch (a second
        # review: errors to 2e-7 before the switch was a consistent (x, 1 - x) pair)
        (1e-3, 1e9 + 1e-3, 9.00899998196398e-10),
        (5.634354325613161e-07, 1054433946.9019951, 8.535390083267699e-10),
        (2469157684.5811296, 0.9557112052488261, 7.920560873850518e-10),
        (7937266148.240846, 2.1066969765024963e-10, 3.87390667121618e-21),
        (1e-12, 1e9, 1e-12),
        # the upper end exactly at the switch with a > b: a rounded x = 1 - y equal to the
        # switch sent points below it to the far tail's empty quadrature (7.7e-9 before)
        (1.07e8, 1.75e-4, (1.75e-4 + 1.0) / (1.07e8 + 1.75e-4 + 2.0)),
    ]


def dirichlet_edge_grid() -> list[tuple[np.ndarray, float]]:
    """(alpha, p) for k >= 3 rows: zero-count rows with tiny priors, one category with
    everything (or all but one record), two or several balanced ones, geometric counts,
    huge priors; trims for eps 0.01, 1 and 100 on one node and eps = 1 over 30 nodes.
    Each distinct case once (at small n several patterns give the same counts)."""
    out: dict[tuple[tuple[float, ...], float], np.ndarray] = {}
    for k in (3, 5, 10):
        geometric = 2.0 ** -np.arange(k)
        for prior in (1e-3, 1.0, 1e3):
            for n in (0, 1, 30, 5000):
                patterns = [
                    [n] + [0] * (k - 1),
                    [max(n - 1, 0), min(n, 1)] + [0] * (k - 2),
                    [n // 2, n - n // 2] + [0] * (k - 2),
                    [n // k] * k,
                    list(np.round(n * geometric / geometric.sum()).astype(int)),
                ]
                for counts in patterns:
                    for per_node in (0.01, 1.0, 100.0, 1.0 / 30):
                        p = 1.0 / (math.exp(per_node / 2) + k - 1)
                        a = prior + np.asarray(counts, dtype=float)
                        out.setdefault((tuple(a), p), a)
    return [(a, p) for (_, p), a in out.items()]


def ball_edge_grid() -> list[tuple[np.ndarray, np.ndarray, float]]:
    """(P, b, W): Gaussian posteriors N(P^-1 b, P^-1) on the ball ||w|| <= W, d = 2, 5,
    20: far outside (mode 10^4 radii away), on the sphere, broad inside, tiny inside."""
    out = []
    for d in (2, 5, 20):
        e = np.zeros(d)
        e[0] = 1.0
        for prec, mode, w in (
            (1e8, 1e3 * e, 0.1),  # far outside, very concentrated
            (1.0, 3.0 * e, 1.0),  # outside, broad
            (1e4, 1.0 * e, 1.0),  # on the sphere
            (1e-3, 0.0 * e, 1.0),  # broad inside (prior-dominated)
            (1e6, 0.2 * e, 1.0),  # tiny inside
        ):
            p = prec * np.eye(d)
            out.append((p, p @ mode, w))
    return out


# ---------------------------------------------------------------------------------------
# Reference laws (mpmath), independent of the samplers
# ---------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=256)
def _beta_pieces(
    a: float, b: float, lo: float, hi_c: float
) -> tuple[Any, Any, list[Any], list[Any]]:
    """The integral of t^(a-1) (1-t)^(b-1) over [lo, 1 - hi_c], scaled at its maximum, in
    pieces (mpmath tanh-sinh at 40 digits): split geometrically near both ends and around
    the mode. Returns (log scale, scaled log density, the pieces' ends, their integrals);
    a mass up to a point reuses every piece below it."""
    import mpmath as mp

    mp.mp.dps = 40
    a_, b_, lo_ = mp.mpf(a), mp.mpf(b), mp.mpf(lo)
    hi_ = 1 - mp.mpf(hi_c)
    cand = [lo_, hi_]
    if a > 1 and b > 1:
        mode = (a_ - 1) / (a_ + b_ - 2)
        if lo_ < mode < hi_:
            cand.append(mode)
    top = max((a_ - 1) * mp.log(t) + (b_ - 1) * mp.log1p(-t) for t in cand)

    def lf(t: Any) -> Any:
        return (a_ - 1) * mp.log(t) + (b_ - 1) * mp.log1p(-t) - top

    marks = [lo_ * mp.mpf(4) ** j for j in range(40)]
    marks += [1 - mp.mpf(hi_c) * mp.mpf(4) ** j for j in range(40)]
    if len(cand) == 3:
        s = cand[2] * (1 - cand[2]) / mp.sqrt(a_ + b_)
        marks += [cand[2] + j * s / 3 for j in range(-30, 31)]
    pts = sorted({lo_, hi_, *[m for m in marks if lo_ < m < hi_]})
    parts = [mp.quad(lambda t: mp.exp(lf(t)), [x, y]) for x, y in itertools.pairwise(pts)]
    return top, lf, pts, parts


def _beta_log_mass(a: float, b: float, lo: float, hi_c: float, upto: Any = None) -> Any:
    """log of the integral of t^(a-1) (1-t)^(b-1) over [lo, min(upto, 1 - hi_c)]: the
    whole pieces below the end, and the piece it cuts integrated up to it."""
    import mpmath as mp

    mp.mp.dps = 40
    top, lf, pts, parts = _beta_pieces(a, b, lo, hi_c)
    if upto is None:
        return top + mp.log(mp.fsum(parts))
    end = min(max(upto, pts[0]), pts[-1])
    if end <= pts[0]:
        return -mp.inf
    k = bisect.bisect_left(pts, end)  # pts[k - 1] < end <= pts[k]
    cut = mp.quad(lambda t: mp.exp(lf(t)), [pts[k - 1], end])
    return top + mp.log(mp.fsum([*parts[: k - 1], cut]))


def exact_trimmed_beta_cdf(
    a: float, b: float, lo: float, hi_c: float, x: float, xc: float | None = None
) -> float:
    """P(X <= x) for X ~ Beta(a, b) restricted to [lo, 1 - hi_c] (mpmath quadrature). A
    point near 1 may be given by its complement ``xc`` = 1 - x."""
    import mpmath as mp

    mp.mp.dps = 40
    xx = 1 - mp.mpf(xc) if xc is not None else mp.mpf(x)
    return float(mp.exp(_beta_log_mass(a, b, lo, hi_c, xx) - _beta_log_whole(a, b, lo, hi_c)))


def exact_trimmed_beta_quantile_error(
    a: float, b: float, lo: float, hi_c: float, u: float, x: float, xc: float
) -> float:
    """How far u lies outside (F(x-), F(x)], the u-interval that the exact law rounded
    up to the sampler's grid maps to the grid point x (doubles x <= 1/2, and 1 - xc for
    doubles xc < 1/2; ``xc`` = 1 - x, exact when x > 1/2); 0 for an exact quantile.
    F(x) - F(x-) is the step's mass, the density at x times the step's width (the
    density's relative change over one step is below 1e-7 on the edge grid)."""
    import mpmath as mp

    mp.mp.dps = 40
    if x <= 0.5:
        xx = mp.mpf(x)
        width = xx - mp.mpf(float(np.nextafter(x, 0.0)))
    else:
        xx = 1 - mp.mpf(xc)
        width = mp.mpf(float(np.nextafter(xc, 1.0))) - mp.mpf(xc)
    cdf = mp.exp(_beta_log_mass(a, b, lo, hi_c, xx) - _beta_log_whole(a, b, lo, hi_c))
    a_, b_ = mp.mpf(a), mp.mpf(b)
    log_f = (a_ - 1) * mp.log(xx) + (b_ - 1) * mp.log(1 - xx)
    step = mp.exp(log_f - _beta_log_whole(a, b, lo, hi_c)) * width
    return float(max(mp.mpf(0), u - cdf, cdf - step - u))


@functools.lru_cache(maxsize=256)
def _beta_log_whole(a: float, b: float, lo: float, hi_c: float) -> Any:
    return _beta_log_mass(a, b, lo, hi_c)


def exact_truncated_normal_cdf(mu: float, sd: float, lo: float, hi: float, x: float) -> float:
    """P(X <= x) for X ~ N(mu, sd^2) restricted to [lo, hi] (mpmath, no underflow; lo
    and hi may be infinite)."""
    import mpmath as mp

    mp.mp.dps = 40
    z = [(mp.mpf(float(v)) - mp.mpf(mu)) / mp.mpf(sd) for v in (lo, min(max(x, lo), hi), hi)]
    if z[0] > 0:  # upper tail: survival functions keep the precision
        s = [mp.ncdf(-v) for v in z]
        return float((s[0] - s[1]) / (s[0] - s[2]))
    c = [mp.ncdf(v) for v in z]
    return float((c[1] - c[0]) / (c[2] - c[0]))


def exact_one_node_epsilon(
    counts: list[float], moved: tuple[int, int], alpha: float, p: float
) -> float:
    """The exact privacy loss sup_theta |log xi(theta | D) - log xi(theta | D')| of one
    exact draw from a binary node's trimmed posterior, D' = D with one record moved
    (mpmath): log(theta_j / theta_i) plus the difference of the log normalisers; the sup
    over [p, 1 - p] is at an end."""
    import mpmath as mp

    mp.mp.dps = 40
    a = [alpha + c for c in counts]
    b = list(a)
    b[moved[0]] -= 1
    b[moved[1]] += 1

    dz = _beta_log_whole(b[0], b[1], p, p) - _beta_log_whole(a[0], a[1], p, p)
    i, j = moved
    worst = 0.0
    for t0 in (mp.mpf(p), 1 - mp.mpf(p)):
        theta = [t0, 1 - t0]
        worst = max(worst, abs(float(mp.log(theta[i] / theta[j]) + dz)))
    return worst


def exact_regression_1d_epsilon(case: SamplingEdgeCase, noise_variance: float) -> float:
    """The exact privacy loss of one exact draw of a 1-d regression release of ``case``
    at the release's (tempered) noise variance (mpmath): the log density ratio of the two
    truncated Gaussian posteriors is quadratic in w, so its sup over [-W, W] is at an end
    or at its vertex."""
    import mpmath as mp

    mp.mp.dps = 40
    model = case.model
    wb = mp.mpf(model.weight_bound)

    def parts(data: Any) -> tuple[Any, Any, Any]:
        x, y = data
        prec = mp.mpf(model.prior_precision) + mp.mpf(float(x[:, 0] @ x[:, 0])) / noise_variance
        lin = mp.mpf(float(x[:, 0] @ y)) / noise_variance
        mu, sd = lin / prec, 1 / mp.sqrt(prec)
        # log of the normaliser of exp(-prec w^2 / 2 + lin w) on [-W, W]
        zl, zh = (-wb - mu) / sd, (wb - mu) / sd
        mass = mp.ncdf(-zl) - mp.ncdf(-zh) if zl > 0 else mp.ncdf(zh) - mp.ncdf(zl)
        return prec, lin, lin**2 / (2 * prec) + mp.log(sd * mp.sqrt(2 * mp.pi) * mass)

    p1, l1, z1 = parts(case.data)
    p2, l2, z2 = parts(case.data_prime)

    def ratio(w: Any) -> Any:
        return (-(p1 - p2) * w**2 / 2 + (l1 - l2) * w) - (z1 - z2)

    points = [-wb, wb]
    if p1 != p2:
        vertex = (l1 - l2) / (p1 - p2)
        if -wb < vertex < wb:
            points.append(vertex)
    return max(abs(float(ratio(w))) for w in points)
