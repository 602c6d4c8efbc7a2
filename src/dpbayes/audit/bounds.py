"""Confidence bounds and the eps lower bound of an output event.

Clopper & Pearson (1934) exact binomial bounds; the eps lower bound of an event E for a pair
of neighbouring data sets (x, x') is ln((P_x(E) - delta) / P_x'(E)) evaluated at the lower
bound of P_x(E) and the upper bound of P_x'(E): if the mechanism were (eps, delta)-DP, then
P_x(E) <= e^eps P_x'(E) + delta, so every eps' below this value is ruled out at the
stated confidence.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

from dpbayes.privacy.validation import check_delta, check_int, check_probability

__all__ = ["clopper_pearson_lower", "clopper_pearson_upper", "epsilon_lower_bound", "exact_epsilon"]


def clopper_pearson_lower(k: int, m: int, alpha: float) -> float:
    """One-sided lower (1 - alpha) Clopper-Pearson bound on p from k successes in m trials."""
    k = check_int(k, "k", minimum=0)
    m = check_int(m, "m", minimum=1)
    alpha = check_probability(alpha, "alpha", open_interval=True)
    if k > m:
        raise ValueError(f"k must be <= m, got k={k}, m={m}")
    return 0.0 if k == 0 else float(stats.beta.ppf(alpha, k, m - k + 1))


def clopper_pearson_upper(k: int, m: int, alpha: float) -> float:
    """One-sided upper (1 - alpha) Clopper-Pearson bound on p from k successes in m trials."""
    k = check_int(k, "k", minimum=0)
    m = check_int(m, "m", minimum=1)
    alpha = check_probability(alpha, "alpha", open_interval=True)
    if k > m:
        raise ValueError(f"k must be <= m, got k={k}, m={m}")
    return 1.0 if k == m else float(stats.beta.ppf(1.0 - alpha, k + 1, m - k))


def epsilon_lower_bound(p_lo: float, p_hi: float, delta: float = 0.0) -> float:
    """ln((p_lo - delta) / p_hi), or 0 when the event rules out nothing (p_lo <= delta)."""
    dlt = check_delta(delta)
    if p_lo <= dlt or p_hi <= 0:
        return 0.0 if p_lo <= dlt else math.inf
    return max(0.0, math.log((p_lo - dlt) / p_hi))


def exact_epsilon(p: np.ndarray, q: np.ndarray, delta: float = 0.0) -> float:
    """The smallest eps with P(E) <= e^eps Q(E) + delta and vice versa, for finite outputs.

    For delta = 0 this is the largest |ln p_i / q_i|; for delta > 0 the smallest eps with
    sum_i max(0, p_i - e^eps q_i) <= delta in both directions (the privacy profile), found
    by bisection. Used to state the true eps of mechanisms whose output probabilities are
    known exactly, next to the audit's empirical lower bound.
    """
    p = np.asarray(p, dtype=float)
    q = np.asarray(q, dtype=float)
    if p.shape != q.shape or p.ndim != 1:
        raise ValueError("p and q must be 1-dimensional arrays of the same length")
    dlt = check_delta(delta)

    def excess(eps: float, a: np.ndarray, b: np.ndarray) -> float:
        return float(np.maximum(0.0, a - math.exp(eps) * b).sum())

    def one_way(a: np.ndarray, b: np.ndarray) -> float:
        if dlt == 0.0:
            if np.any((a > 0) & (b == 0)):
                return math.inf
            mask = a > 0
            return max(0.0, float(np.max(np.log(a[mask]) - np.log(b[mask])))) if mask.any() else 0.0
        if excess(0.0, a, b) <= dlt:
            return 0.0
        lo, hi = 0.0, 1.0
        while excess(hi, a, b) > dlt:
            hi *= 2.0
            if hi > 1e6:
                return math.inf
        for _ in range(100):
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if excess(mid, a, b) > dlt else (lo, mid)
        return hi

    return max(one_way(p, q), one_way(q, p))
