"""Compiled truncated-Normal pieces: log Phi, log-mass of an interval, inverse CDF, draws.

Scalar numba versions of :mod:`dpbayes.nonparametric.truncnorm` for the inner loops
of the sampler (the Appendix A conditional of paper 001). No randomness is drawn here:
the Gumbels and uniforms are arguments.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

__all__ = [
    "base_quantiles",
    "diff_ndtr_scalar",
    "from_base_quantiles",
    "laplace_new_weights",
    "log_diff_ndtr_scalar",
    "log_ndtr",
    "one_observation_draw",
    "sample_pieces",
    "solve_log_ndtr",
    "truncnorm_ppf_scalar",
]

_SQRT2 = math.sqrt(2.0)
_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


@njit(cache=True)
def log_ndtr(x):  # type: ignore[no-untyped-def]
    """log Phi(x): erfc where it is accurate, the asymptotic series below -20 (error < 1e-11)."""
    if x > 6.0:
        return math.log1p(-0.5 * math.erfc(x / _SQRT2))
    if x > -20.0:
        return math.log(0.5 * math.erfc(-x / _SQRT2))
    if x == -np.inf:
        return -np.inf
    x2 = x * x
    s = 1.0 - 1.0 / x2 + 3.0 / x2**2 - 15.0 / x2**3 + 105.0 / x2**4 - 945.0 / x2**5
    return -0.5 * x2 - math.log(-x) - _LOG_SQRT_2PI + math.log(s)


@njit(cache=True)
def log_diff_ndtr_scalar(a, b):  # type: ignore[no-untyped-def]
    """log(Phi(b) - Phi(a)) for a <= b, computed on the side of 0 where it is accurate."""
    if a >= b:
        return -np.inf
    if a > 0.0:
        a, b = -b, -a
    if a > -20.0 and b < 6.0:  # both CDFs accurate and not tiny: one log instead of four
        return math.log(0.5 * (math.erfc(-b / _SQRT2) - math.erfc(-a / _SQRT2)))
    lb = log_ndtr(b)
    la = log_ndtr(a)
    if la >= lb:
        return -np.inf
    return lb + math.log1p(-math.exp(la - lb))


@njit(cache=True)
def solve_log_ndtr(target, lo_br, hi_br):  # type: ignore[no-untyped-def]
    """x in [lo_br, hi_br] with log Phi(x) = target: safeguarded Newton (bisection fallback)."""
    x = 0.0  # log Phi is concave: Newton from 0 converges fast for Phi(x) near 1/2
    if target < -2.0:  # asymptotic start in the lower tail
        t = math.sqrt(-2.0 * target)
        x = -(t - (math.log(t) + _LOG_SQRT_2PI) / t)
    x = min(max(x, lo_br), hi_br)
    for _ in range(100):
        lx = log_ndtr(x)
        f = lx - target
        if f > 0.0:
            hi_br = x
        else:
            lo_br = x
        slope = math.exp(-0.5 * x * x - _LOG_SQRT_2PI - lx)
        step = f / slope if slope > 0.0 else 0.0
        if slope > 0.0 and abs(step) <= 1e-13 * (1.0 + abs(x)):
            return x - step
        nx = x - step
        if not (lo_br < nx < hi_br) or slope == 0.0:
            nx = 0.5 * (lo_br + hi_br)
        if abs(nx - x) <= 1e-13 * (1.0 + abs(x)):
            return nx
        x = nx
    return x


@njit(cache=True)
def truncnorm_ppf_scalar(u, a, b):  # type: ignore[no-untyped-def]
    """Quantile u of N(0, 1) truncated to [a, b]: safeguarded Newton on log Phi(x) = target."""
    flip = a > 0.0
    if flip:
        a, b, u = -b, -a, 1.0 - u
    la = log_ndtr(a)
    lm = log_diff_ndtr_scalar(a, b)
    v = math.log(u) + lm if u > 0.0 else -np.inf
    hi_ = max(la, v)
    target = hi_ + math.log1p(math.exp(min(la, v) - hi_)) if hi_ > -np.inf else -np.inf
    lo_br = a if a > -np.inf else (b - 40.0 if b < 0.0 else -40.0)
    hi_br = b if b < np.inf else 40.0
    x = solve_log_ndtr(target, lo_br, hi_br)
    x = min(max(x, a), b)
    return -x if flip else x


def _logaddexp(a, b):  # type: ignore[no-untyped-def]
    hi = max(a, b)
    if hi == -np.inf:
        return -np.inf
    return hi + math.log1p(math.exp(min(a, b) - hi))


_logaddexp = njit(cache=True)(_logaddexp)


@njit(cache=True)
def base_quantiles(x, mu, s, r, lp, lq):  # type: ignore[no-untyped-def]
    """log F0(x_k) and log(1 - F0(x_k)) for the base N(mu, s^2), restricted to [-r, r] if
    r > 0 (else on the real line); written into lp and lq."""
    a = (-r - mu) / s if r > 0 else -np.inf
    b = (r - mu) / s if r > 0 else np.inf
    lm = log_diff_ndtr_scalar(a, b) if r > 0 else 0.0
    for k in range(x.shape[0]):
        t = min(max((x[k] - mu) / s, a), b)
        lp[k] = log_diff_ndtr_scalar(a, t) - lm if r > 0 else log_ndtr(t)
        lq[k] = log_diff_ndtr_scalar(t, b) - lm if r > 0 else log_ndtr(-t)


@njit(cache=True)
def from_base_quantiles(lp, lq, mu, s, r, out):  # type: ignore[no-untyped-def]
    """Inverse of :func:`base_quantiles` for a (new) base N(mu, s^2): each value from the
    tail where its quantile is accurate (log Phi solved by Newton)."""
    a = (-r - mu) / s if r > 0 else -np.inf
    b = (r - mu) / s if r > 0 else np.inf
    lm = log_diff_ndtr_scalar(a, b) if r > 0 else 0.0
    la = log_ndtr(a)
    lb = log_ndtr(-b)
    lo_br = a if a > -np.inf else -40.0
    hi_br = b if b < np.inf else 40.0
    for k in range(lp.shape[0]):
        low = _logaddexp(la, lp[k] + lm)
        if low < -0.6931471805599453:  # Phi(x) < 1/2: solve on the lower side
            t = solve_log_ndtr(low, lo_br, hi_br)
        else:
            t = -solve_log_ndtr(_logaddexp(lb, lq[k] + lm), -hi_br, -lo_br)
        t = min(max(t, a), b)
        x = mu + s * t
        out[k] = min(max(x, -r), r) if r > 0 else x
    return out


@njit(cache=True)
def sample_pieces(seg, lo, hi, mean, sd, const, k, gumbel, uniform):  # type: ignore[no-untyped-def]
    """One draw per cluster from its mixture of truncated Normals (Gumbel-max, inverse CDF)."""
    best = np.full(k, -np.inf)
    pick = np.zeros(k, dtype=np.int64)
    for j in range(seg.shape[0]):
        m, s = mean[j], sd[j]
        v = const[j] + log_diff_ndtr_scalar((lo[j] - m) / s, (hi[j] - m) / s) + gumbel[j]
        if v > best[seg[j]]:
            best[seg[j]] = v
            pick[seg[j]] = j
    out = np.empty(k)
    for c in range(k):
        j = pick[c]
        m, s = mean[j], sd[j]
        x = m + s * truncnorm_ppf_scalar(uniform[c], (lo[j] - m) / s, (hi[j] - m) / s)
        out[c] = min(max(x, lo[j]), hi[j])
    return out


@njit(cache=True)
def one_observation_draw(w, b, r, mu, s, tails, gumbel, u):  # type: ignore[no-untyped-def]
    """A draw from the Appendix A conditional given the single value w (at most 4 pieces).

    ``tails``: the base N(mu, s^2) lives on the real line (the paper's Appendix A: two tail
    pieces beyond -r and r); otherwise it is restricted to [-r, r] and only the interior
    pieces remain (the restriction's normalising constant is common to all pieces).
    """
    s2 = s * s
    lo = np.empty(4)
    hi = np.empty(4)
    mean = np.empty(4)
    const = np.empty(4)
    q = 0
    if tails:
        lo[0], hi[0], mean[0], const[0] = -np.inf, -r, mu, -abs(w + r) / b
        q = 1
    if w <= -r or w >= r:  # one interior piece; w is below (a = 1) or above (a = 0) it
        a = 1.0 if w <= -r else 0.0
        mj = mu - (2.0 * a - 1.0) / b * s2
        lo[q], hi[q], mean[q] = -r, r, mj
        const[q] = (2.0 * a * w - w) / b + (mj * mj - mu * mu) / (2.0 * s2)
        q += 1
    else:
        for a in range(2):
            mj = mu - (2.0 * a - 1.0) / b * s2
            lo[q] = -r if a == 0 else w
            hi[q] = w if a == 0 else r
            mean[q] = mj
            const[q] = (2.0 * a * w - w) / b + (mj * mj - mu * mu) / (2.0 * s2)
            q += 1
    if tails:
        lo[q], hi[q], mean[q], const[q] = r, np.inf, mu, -abs(w - r) / b
        q += 1
    best = -np.inf
    pick = 0
    for j in range(q):
        v = const[j] + log_diff_ndtr_scalar((lo[j] - mean[j]) / s, (hi[j] - mean[j]) / s)
        v += gumbel[j]
        if v > best:
            best = v
            pick = j
    m = mean[pick]
    x = m + s * truncnorm_ppf_scalar(u, (lo[pick] - m) / s, (hi[pick] - m) / s)
    return min(max(x, lo[pick]), hi[pick])


@njit(cache=True)
def diff_ndtr_scalar(a, b):  # type: ignore[no-untyped-def]
    """Phi(b) - Phi(a) for a <= b, on the side of 0 where it has no cancellation."""
    if a >= b:
        return 0.0
    if a > 0.0:
        return 0.5 * (math.erfc(a / _SQRT2) - math.erfc(b / _SQRT2))
    return 0.5 * (math.erfc(-b / _SQRT2) - math.erfc(-a / _SQRT2))


@njit(cache=True)
def laplace_new_weights(z, b, r, mu, s, tails, out):  # type: ignore[no-untyped-def]
    """Prior predictive of each z_i relative to max_x Q(z_i | x), for Neal's algorithm 2.

    With u = clip(z_i, -r, r) this is the integral of exp(-|u - clip(x)| / b) over the base
    N(mu, s^2) (``tails``) or over the base restricted to [-r, r] (then divided by its mass
    Phi((r - mu)/s) - Phi((-r - mu)/s)). Closed form: on [-r, u] the integrand is
    exp((x - u)/b) N(x; mu, s^2) = exp((mu - u)/b + s^2/2b^2) N(x; mu + s^2/b, s^2), on [u, r]
    the mirror image, and beyond +-r the base's tail mass times exp(-(r +- u)/b). ``z``
    increasing; the values beyond +-r share one u, computed once. Written into ``out``.
    The weights lie in [e^{-2r/b}, 1] (no overflow); a weight below the double range
    (a base far from every observation) underflows to 0: no new cluster for that z_i.
    """
    m1 = mu + s * s / b
    m2 = mu - s * s / b
    half = s * s / (2.0 * b * b)
    lo1 = (-r - m1) / s
    hi2 = (r - m2) / s
    norm = 1.0 if tails else diff_ndtr_scalar((-r - mu) / s, (r - mu) / s)
    t_lo = 0.5 * math.erfc((r + mu) / (s * _SQRT2)) if tails else 0.0  # Phi((-r - mu)/s)
    t_hi = 0.5 * math.erfc((r - mu) / (s * _SQRT2)) if tails else 0.0  # 1 - Phi((r - mu)/s)
    last_u = np.nan
    last = 0.0
    for i in range(z.shape[0]):
        u = min(max(z[i], -r), r)
        if u != last_u:
            t1 = math.exp((mu - u) / b + half) * diff_ndtr_scalar(lo1, (u - m1) / s)
            t2 = math.exp((u - mu) / b + half) * diff_ndtr_scalar((u - m2) / s, hi2)
            t3 = t_lo * math.exp(-(u + r) / b) + t_hi * math.exp(-(r - u) / b)
            last = (t1 + t2 + t3) / norm if norm > 0.0 else 0.0
            last_u = u
        out[i] = last
    return out
