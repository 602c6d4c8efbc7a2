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
    "draw_truncated_base",
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


# Wichura's AS241 (PPND16) coefficients, constant term first: the central region
# |p - 1/2| <= 0.425 (in r = 0.180625 - q^2) and the tails in r = sqrt(-log p) <= 5 and > 5
_AS241_A = (3.3871328727963666080e0, 1.3314166789178437745e2, 1.9715909503065514427e3,
            1.3731693765509461125e4, 4.5921953931549871457e4, 6.7265770927008700853e4,
            3.3430575583588128105e4, 2.5090809287301226727e3)  # fmt: skip
_AS241_B = (1.0, 4.2313330701600911252e1, 6.8718700749205790830e2, 5.3941960214247511077e3,
            2.1213794301586595867e4, 3.9307895800092710610e4, 2.8729085735721942674e4,
            5.2264952788528545610e3)  # fmt: skip
_AS241_C = (1.42343711074968357734e0, 4.63033784615654529590e0, 5.76949722146069140550e0,
            3.64784832476320460504e0, 1.27045825245236838258e0, 2.41780725177450611770e-1,
            2.27238449892691845833e-2, 7.74545014278341407640e-4)  # fmt: skip
_AS241_D = (1.0, 2.05319162663775882187e0, 1.67638483018380384940e0, 6.89767334985100004550e-1,
            1.48103976427480074590e-1, 1.51986665636164571966e-2, 5.47593808499534494600e-4,
            1.05075007164441684324e-9)  # fmt: skip
_AS241_E = (6.65790464350110377720e0, 5.46378491116411436990e0, 1.78482653991729133580e0,
            2.96560571828504891230e-1, 2.65321895265761230930e-2, 1.24266094738807843860e-3,
            2.71155556874348757815e-5, 2.01033439929228813265e-7)  # fmt: skip
_AS241_F = (1.0, 5.99832206555887937690e-1, 1.36929880922735805310e-1, 1.48753612908506148525e-2,
            7.86869131145613259100e-4, 1.84631831751005468180e-5, 1.42151175831644588870e-7,
            2.04426310338993978564e-15)  # fmt: skip


@njit(cache=True)
def _horner(c, x):  # type: ignore[no-untyped-def]
    """sum_k c[k] x^k (c constant term first), by Horner's rule."""
    acc = 0.0
    for k in range(len(c) - 1, -1, -1):
        acc = acc * x + c[k]
    return acc


@njit(cache=True)
def _ndtri_log_start(target, lo_br, hi_br):  # type: ignore[no-untyped-def]
    """Phi^-1(e^target) by Wichura's AS241 (relative error about 1e-16 for e^target from
    1e-300 to 1 - 1e-16), the tails from r = sqrt(-log p) so that p may underflow;
    the bracket's end for target -inf or >= 0."""
    if target == -np.inf:
        return lo_br
    if target >= 0.0:
        return hi_br
    q = math.exp(target) - 0.5
    if abs(q) <= 0.425:
        r = 0.180625 - q * q
        return q * _horner(_AS241_A, r) / _horner(_AS241_B, r)
    r = math.sqrt(-target) if q < 0.0 else math.sqrt(-math.log(-math.expm1(target)))
    if r <= 5.0:
        x = _horner(_AS241_C, r - 1.6) / _horner(_AS241_D, r - 1.6)
    else:
        x = _horner(_AS241_E, r - 5.0) / _horner(_AS241_F, r - 5.0)
    return -x if q < 0.0 else x


@njit(cache=True)
def solve_log_ndtr(target, lo_br, hi_br):  # type: ignore[no-untyped-def]
    """x in [lo_br, hi_br] with log Phi(x) = target: safeguarded Newton (bisection fallback)
    from Wichura's approximation, which is usually within the tolerance already."""
    x = min(max(_ndtri_log_start(target, lo_br, hi_br), lo_br), hi_br)
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
def _logaddexp(a, b):  # type: ignore[no-untyped-def]
    hi = max(a, b)
    if hi == -np.inf:
        return -np.inf
    return hi + math.log1p(math.exp(min(a, b) - hi))


@njit(cache=True)
def truncnorm_ppf_scalar(u, a, b):  # type: ignore[no-untyped-def]
    """Quantile u of N(0, 1) truncated to [a, b]: safeguarded Newton on log Phi(x) = target."""
    flip = a > 0.0
    if flip:
        a, b, u = -b, -a, 1.0 - u
    la = log_ndtr(a)
    lm = log_diff_ndtr_scalar(a, b)
    target = _logaddexp(la, math.log(u) + lm if u > 0.0 else -np.inf)
    lo_br = a if a > -np.inf else (b - 40.0 if b < 0.0 else -40.0)
    hi_br = b if b < np.inf else 40.0
    if target < -0.6931471805599453:  # Phi(x) < 1/2: log Phi(x) is accurate
        x = solve_log_ndtr(target, lo_br, hi_br)
    else:  # Phi(x) >= 1/2 (b > 0): solve 1 - Phi(x) = Phi(-b) + (1 - u) mass instead
        upper = _logaddexp(log_ndtr(-b), math.log1p(-u) + lm if u < 1.0 else -np.inf)
        x = -solve_log_ndtr(upper, -hi_br, -lo_br)
    x = min(max(x, a), b)
    return -x if flip else x


@njit(cache=True)
def draw_truncated_base(mu, s, r, u, out):  # type: ignore[no-untyped-def]
    """out[i, j]: the u[i, j] quantile of N(mu[i], s[i]^2) restricted to [-r, r] (a draw of
    the base measure for a uniform u), by :func:`truncnorm_ppf_scalar`."""
    for i in range(u.shape[0]):
        a = (-r - mu[i]) / s[i]
        b = (r - mu[i]) / s[i]
        for j in range(u.shape[1]):
            x = mu[i] + s[i] * truncnorm_ppf_scalar(u[i, j], a, b)
            out[i, j] = min(max(x, -r), r)
    return out


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
    """One draw per cluster from its mixture of truncated Normals (Gumbel-max, inverse CDF).

    The piece of cluster c is the argmax over its pieces of v_j = const_j + log mass_j +
    gumbel_j. With d_j the distance, in sds, from mean_j to [lo_j, hi_j] (0 inside), the
    Normal mass is at most 1 - Phi(d_j) <= e^{-d_j^2/2} / 2 (Chernoff), so
    const_j - d_j^2 / 2 + gumbel_j bounds v_j (with log 2 to spare for rounding): the piece
    with the largest bound is evaluated first, and then only pieces whose bound exceeds the
    best v so far. In a large cluster the pieces' log densities at their nearest points fall
    off fast away from the members' median, so most pieces are never evaluated. The argmax
    is the one over all pieces.
    """
    best = np.full(k, -np.inf)
    pick = np.zeros(k, dtype=np.int64)
    n = seg.shape[0]
    ub = np.empty(n)
    bound = np.full(k, -np.inf)
    for j in range(n):
        d = max((lo[j] - mean[j]) / sd[j], (mean[j] - hi[j]) / sd[j], 0.0)
        ub[j] = const[j] - 0.5 * d * d + gumbel[j]
        if ub[j] > bound[seg[j]]:
            bound[seg[j]] = ub[j]
            pick[seg[j]] = j
    for c in range(k):
        j = pick[c]
        m, s = mean[j], sd[j]
        best[c] = const[j] + log_diff_ndtr_scalar((lo[j] - m) / s, (hi[j] - m) / s) + gumbel[j]
    for j in range(n):
        c = seg[j]
        if ub[j] <= best[c] or j == pick[c]:
            continue
        m, s = mean[j], sd[j]
        v = const[j] + log_diff_ndtr_scalar((lo[j] - m) / s, (hi[j] - m) / s) + gumbel[j]
        if v > best[c]:
            best[c] = v
            pick[c] = j
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


#: laplace_new_weights multiplies e^g by a Normal mass directly up to g = _EXP_SAFE, in logs
#: beyond. Below, a mass that underflows (< 1e-308) drops a term under e^{500 - 709} = e^-209.
_EXP_SAFE = 500.0


@njit(cache=True)
def laplace_new_weights(z, b, r, mu, s, tails, out):  # type: ignore[no-untyped-def]
    """Prior predictive of each z_i relative to max_x Q(z_i | x), for Neal's algorithm 2.

    With u = clip(z_i, -r, r) this is the integral of exp(-|u - clip(x)| / b) over the base
    N(mu, s^2) (``tails``) or over the base restricted to [-r, r] (then divided by its mass
    Phi((r - mu)/s) - Phi((-r - mu)/s)). Closed form: on [-r, u] the integrand is
    exp((x - u)/b) N(x; mu, s^2) = exp((mu - u)/b + s^2/2b^2) N(x; mu + s^2/b, s^2), on [u, r]
    the mirror image, and beyond +-r the base's tail mass times exp(-(r +- u)/b). ``z``
    increasing; the values beyond +-r share one u, computed once. Written into ``out``.
    The weights lie in [e^{-2r/b}, 1]; a factor e^{(mu - u)/b + s^2/2b^2} above e^500
    (s/b large) is multiplied with its Normal mass in logs, so nothing overflows. A weight
    below the double range (a base far from every observation) underflows to 0: no new
    cluster for that z_i.
    """
    m1 = mu + s * s / b
    m2 = mu - s * s / b
    half = s * s / (2.0 * b * b)
    lo1 = (-r - m1) / s
    hi2 = (r - m2) / s
    norm = 1.0 if tails else diff_ndtr_scalar((-r - mu) / s, (r - mu) / s)
    t_lo = 0.5 * math.erfc((r + mu) / (s * _SQRT2)) if tails else 0.0  # Phi((-r - mu)/s)
    t_hi = 0.5 * math.erfc((r - mu) / (s * _SQRT2)) if tails else 0.0  # 1 - Phi((r - mu)/s)
    # diff_ndtr_scalar(lo1, x) and diff_ndtr_scalar(x, hi2) with their constant erfc hoisted
    # (the same operations, so the same values): 2 erfc per value instead of 4
    e_lo1 = math.erfc(lo1 / _SQRT2) if lo1 > 0.0 else math.erfc(-lo1 / _SQRT2)
    e_hi2 = math.erfc(hi2 / _SQRT2)  # for x2 > 0
    e_mhi2 = math.erfc(-hi2 / _SQRT2)  # for x2 <= 0
    last_u = np.nan
    last = 0.0
    for i in range(z.shape[0]):
        u = min(max(z[i], -r), r)
        if u != last_u:
            x1 = (u - m1) / s
            d1 = 0.0
            if not lo1 >= x1:
                if lo1 > 0.0:
                    d1 = 0.5 * (e_lo1 - math.erfc(x1 / _SQRT2))
                else:
                    d1 = 0.5 * (math.erfc(-x1 / _SQRT2) - e_lo1)
            x2 = (u - m2) / s
            d2 = 0.0
            if not x2 >= hi2:
                if x2 > 0.0:
                    d2 = 0.5 * (math.erfc(x2 / _SQRT2) - e_hi2)
                else:
                    d2 = 0.5 * (e_mhi2 - math.erfc(-x2 / _SQRT2))
            g1 = (mu - u) / b + half
            g2 = (u - mu) / b + half
            # s/b large (eps above about 19 with s near the hyperprior's 4r): e^{g} overflows
            # while the Normal mass underflows, their product (<= 1) is taken in logs
            if g1 <= _EXP_SAFE:
                t1 = math.exp(g1) * d1
            else:
                t1 = math.exp(g1 + log_diff_ndtr_scalar(lo1, x1))
            if g2 <= _EXP_SAFE:
                t2 = math.exp(g2) * d2
            else:
                t2 = math.exp(g2 + log_diff_ndtr_scalar(x2, hi2))
            t3 = t_lo * math.exp(-(u + r) / b) + t_hi * math.exp(-(r - u) / b)
            last = (t1 + t2 + t3) / norm if norm > 0.0 else 0.0
            last_u = u
        out[i] = last
    return out
