"""Compiled (numba) kernels of the fast coin posterior: same algorithm, no interpreter cost.

:mod:`.coin` solves the interval of a ladder Beta mixture by Newton steps,
each an exp over a window of the ladder plus one regularised incomplete beta. In numpy
that is ~10 calls per step whose fixed cost dominates (the benchmark of issue 10 shows
it); here the same loops run compiled. The incomplete beta is the continued fraction of
Numerical Recipes §6.4 (modified Lentz), absolute error ~1e-15. numba is a core
dependency: there is no interpreted copy of these loops.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

import numpy as np

__all__ = ["kernels"]


def betainc_cf(a: float, b: float, x: float) -> float:
    """Continued fraction of I_x(a, b) (valid for x < (a + 1) / (a + b + 2))."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c = 1.0
    d = 1.0 - qab * x / qap
    if abs(d) < tiny:
        d = tiny
    d = 1.0 / d
    h = d
    for m in range(1, 100000):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        if abs(d) < tiny:
            d = tiny
        c = 1.0 + aa / c
        if abs(c) < tiny:
            c = tiny
        d = 1.0 / d
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        if abs(d) < tiny:
            d = tiny
        c = 1.0 + aa / c
        if abs(c) < tiny:
            c = tiny
        d = 1.0 / d
        de = d * c
        h *= de
        if abs(de - 1.0) < 1e-16:
            break
    return h


def _betainc(a: float, b: float, x: float, lbeta: float) -> float:
    """I_x(a, b), given lbeta = log B(a, b) (from ``scipy.special.betaln``: the difference
    of log-gammas cancels for a or b above about 1e8)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    lbt = a * math.log(x) + b * math.log1p(-x) - lbeta
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(lbt) * betainc_cf(a, b, x) / a
    return 1.0 - math.exp(lbt) * betainc_cf(b, a, 1.0 - x) / b


#: |F(t) - q| at which a quantile's Newton steps may stop (the CDF is accurate to ~1e-13).
TINY = 5e-324  # the smallest positive double
RESIDUAL = 1e-10


def _quantiles(
    qs: np.ndarray,
    a0: float,
    b0: float,
    j: np.ndarray,
    log_c: np.ndarray,
    tail: np.ndarray,
    wb: np.ndarray,
    w: np.ndarray,
    lbeta: float,
    mu: float,
    sd: float,
    skew: float,
    sd_between: float,
    zs: np.ndarray,
) -> np.ndarray:
    """The loop of ``CountBetaMixture._ppf_many`` (see there), compiled."""
    tol = 3e-5 * sd
    s1 = a0 + b0 - 1.0
    nj = j.size
    w0 = w[0]
    out = np.empty(qs.size)
    cum = np.cumsum(w)
    for i in range(qs.size):
        q, z = qs[i], zs[i]
        t = mu + sd * (z + (z * z - 1.0) * skew / 6.0)
        if sd_between > 0.7 * sd:
            k = min(int(np.searchsorted(cum, q)), w.size - 1)
            t = (a0 + k + 0.5) / (a0 + b0) + z * (sd - sd_between)
        lo, hi = 0.0, 1.0
        t = min(max(t, 1e-300), 1.0 - 1e-16)
        for _ in range(200):
            lt, l1t = math.log(t), math.log1p(-t)
            c = a0 * lt + (b0 - 1.0) * l1t
            centre = s1 * t - a0
            half = 12.0 * math.sqrt(s1 * t * (1.0 - t)) + 30.0
            j0 = min(max(int(centre - half), 0), nj)
            j1 = min(max(int(centre + half) + 1, j0), nj)
            d = lt - l1t
            s_tail = 0.0
            s_wb = 0.0
            for jj in range(j0, j1):
                e = math.exp(log_c[jj] + j[jj] * d + c)
                s_tail += e * tail[jj]
                s_wb += e * wb[jj]
            cdf = _betainc(a0, b0, t, lbeta) - s_tail
            pdf = w0 * math.exp(c - lt - lbeta) + s_wb / (1.0 - t)
            if cdf < q:
                lo = t
            else:
                hi = t
            new = t - (cdf - q) / pdf if pdf > 0.0 else -1.0
            converged = abs(cdf - q) <= RESIDUAL
            if not lo <= new <= hi or (abs(new - t) < tol and not converged):
                # outside the bracket, or a tiny Newton step far from q (the density is
                # huge: an end where it is infinite, a0 < 1 or b0 < 1): bisect, by ratios
                # where the bracket spans decades (a quantile of 1e-200 is 660 halvings of
                # [0, 1] away, and one below the doubles is 0)
                if hi <= TINY:
                    t = 0.0
                    break
                if hi > 4.0 * lo:
                    new = max(math.sqrt(max(lo, hi * 1e-16) * hi), TINY)
                else:
                    new = 0.5 * (lo + hi)
            step = abs(new - t)
            t = new
            # relative: the quantiles of a posterior near 1e-17 are resolved too
            if (step < tol and converged) or hi - lo < 1e-15 * hi:
                break
        out[i] = t
    return out


def _prepare(
    prior: np.ndarray,
    log_lik: np.ndarray,
    log_ax: np.ndarray,
    a: float,
    b: float,
    n: int,
    log_prune: float,
) -> tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Weights w_x propto exp(prior + log_lik), pruned from both ends below ``log_prune``
    of the largest, normalised; returns x0, w, a0 + j, b0 - j, the tail sums R_j, the
    ladder's b-weighted weights (b0 - j - 1) w_{j+1} and the mixture's (mean, sd,
    skewness, sd of the component means) (see ``CountBetaMixture``).

    A rung at the upper end is kept while its share of the mean's numerator, w_x (a + x)
    (``log_ax`` = log(a + x)), is above ``log_prune`` of the largest share: where a is
    tiny the kept rungs' means are tiny and a rung of negligible weight can carry the
    mean (Beta(1e-30, 1): 2.4e-32 for 4.5e-29 when only the weights decided)."""
    size = prior.size
    lw = np.empty(size)
    top = -np.inf
    top_mean = -np.inf
    for i in range(size):
        lw[i] = prior[i] + log_lik[i]
        top = max(top, lw[i])
        top_mean = max(top_mean, lw[i] + log_ax[i])
    x0, x1 = 0, size - 1
    while lw[x0] - top <= log_prune:
        x0 += 1
    while lw[x1] - top <= log_prune and lw[x1] + log_ax[x1] - top_mean <= log_prune:
        x1 -= 1
    k = x1 - x0 + 1
    a0, b0 = a + x0, b + (n - x0)  # not (b + n) - x0: b = 1e-300 would round away
    w = np.empty(k)
    av = np.empty(k)
    bv = np.empty(k)
    total = 0.0
    for i in range(k):
        w[i] = math.exp(lw[x0 + i] - top)
        total += w[i]
        av[i] = a0 + i
        bv[i] = b0 - i
    e1 = e2 = e3 = 0.0
    for i in range(k):
        w[i] /= total
        e1 += w[i] * i
        e2 += w[i] * i * i
        e3 += w[i] * i * i * i
    tail = np.empty(max(k - 1, 0))
    wb = np.empty(max(k - 1, 0))
    acc = 0.0
    for i in range(k - 1, 0, -1):
        acc += w[i]
        tail[i - 1] = acc
        wb[i - 1] = bv[i] * w[i]
    moments = ladder_moments(a0, b0, e1, e2, e3)
    return x0, w, av, bv, tail, wb, moments


def ladder_moments(a0: float, b0: float, e1: float, e2: float, e3: float) -> np.ndarray:
    """(mean, sd, skewness clipped to [-3, 3], sd of the components' means) of the ladder
    mixture of Beta(a0 + j, b0 - j) with E[j^k] = e_k, all with a0 + b0 = s.

    The variance is the mean of the components' variances plus the variance of their
    means, E[a_x b_x] / (s^2 (s + 1)) + Var(j) / s^2, the square root taken before the
    division by s (no cancellation, no overflow of s^2 for s up to the double range);
    the skewness, which only starts the quantiles' Newton steps, is 0 where its terms
    underflow."""
    s = a0 + b0
    vj = max(e2 - e1 * e1, 0.0)  # Var(j): small integers, no cancellation to speak of
    eab = (a0 + e1) * (b0 - e1) - vj  # E[(a0 + j)(b0 - j)]
    mean = (a0 + e1) / s
    sd = math.sqrt(max(eab, 0.0) / (s + 1.0) + vj) / s
    ea = a0 + e1
    ea2 = a0 * a0 + 2.0 * a0 * e1 + e2
    ea3 = a0**3 + 3.0 * a0 * a0 * e1 + 3.0 * a0 * e2 + e3
    m2 = (ea2 + ea) / s / (s + 1.0)
    m3 = (ea3 + 3.0 * ea2 + 2.0 * ea) / s / (s + 1.0) / (s + 2.0)
    var = sd * sd
    skew = 0.0
    if var * sd > 0.0 and math.isfinite(m3) and math.isfinite(m2):
        skew = min(max((m3 - 3.0 * mean * var - mean**3) / (var * sd), -3.0), 3.0)
    out = np.empty(4)
    out[0], out[1], out[2] = mean, max(sd, 1e-300), skew
    out[3] = math.sqrt(vj) / s
    return out


@lru_cache(maxsize=1)
def kernels() -> Any:
    """(prepare, quantiles), compiled once and cached on disk.

    The helpers are replaced by their compiled versions in this module's namespace so
    that the compiled kernels call them directly.
    """
    import numba

    jit = numba.njit(cache=True, nogil=True)
    glob = globals()
    glob["betainc_cf"] = jit(betainc_cf)
    glob["_betainc"] = jit(_betainc)
    glob["ladder_moments"] = jit(ladder_moments)
    return jit(_prepare), jit(_quantiles)
