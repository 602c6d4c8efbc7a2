"""Compiled (numba) Hellinger scores of the exponential mechanism: one pass over candidates.

The scores u_r = -H(posterior, candidate r) of :mod:`.candidates` (paper 003 §2), with
H^2 = 1 - BC and log BC = sum_i J(m_i, d_i) - J(sum m, sum d), m = (x + y)/2, d = (y - x)/2,
J(m, d) = lgamma(m) - (lgamma(m - d) + lgamma(m + d))/2: the formulas of
:mod:`dpbayes.models.divergence` and :mod:`dpbayes.models.lgamma_differences`, evaluated
per candidate in one compiled loop instead of ~30 numpy passes over chunks.

* lo = m - |d| >= 20 (lo exact: the smaller parameter): Stirling's series with
  ``log1p``/``atanh`` (the same operations as ``lgamma_differences._jensen_big``);
* lo < 20: the exact shift J(m, d) = J(m + N, d) + 1/2 sum_{i<N} log(1 - (d/(m+i))^2)
  with lo + N >= 20 (lgamma(x) = lgamma(x + N) - sum log(x + i)); every term has one
  sign, so nothing cancels. (The numpy version uses polygamma Taylor series or plain
  ``gammaln`` there; the two agree to rounding.)

**Candidates far from the posterior.** J is -1/2 the integral of (d - s)(psi'(m + s) +
psi'(m - s)) over s in [0, |d|] and psi'(x) > 1/x, so J(m, d) <= -d^2 / (2 (m + |d|));
and -J(M, D) <= D^2 (1/(M - |D|) + 1/(M - |D|)^2) / 2 (psi'(x) < 1/x + 1/x^2). When these
bounds put log BC below -50, 1 - BC rounds to 1 in double precision (e^-37.5 is already
below half an ulp of 1), so H = 1 exactly, the value the full formula returns there: the
score is set to -1 without evaluating it. For n = 10^7 coin candidates all but ~10^5 are
such; this is what makes the pass cost about a memory write per candidate.

No randomness is drawn here.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from dpbayes.models.lgamma_differences import STIRLING_TAIL_TERMS, stirling_tail

__all__ = ["coin_hellinger_scores", "dirichlet_hellinger_scores", "jensen_lgamma_scalar"]

_STIRLING_MIN = 20.0  # lgamma_differences._STIRLING_MIN
_SERIES_T = 0.02  # lgamma_differences._SERIES_T
SURE_ONE = -50.0  # log BC bound below which H rounds to exactly 1
# Stirling tail coefficients c_k of x^-k (k = 1, 3, ..., 9: those of
# lgamma_differences.stirling_tail), and for each k the binomials C(k + 2j - 1, 2j),
# j = 1..4, of the Taylor series of the tails' Jensen gap in t
_TAIL_K = np.array([float(k) for k, _ in STIRLING_TAIL_TERMS])
_TAIL_C = np.array([c for _, c in STIRLING_TAIL_TERMS])
_TAIL_B = np.array(
    [[float(math.comb(k + 2 * j - 1, 2 * j)) for j in range(1, 5)] for k, _ in STIRLING_TAIL_TERMS]
)

_stirling_tail = njit(cache=True, nogil=True)(stirling_tail)


@njit(cache=True, nogil=True)
def _jensen_tail(m: float, t: float, lo: float) -> float:
    if t >= _SERIES_T:  # lo exact: m (1 - t) is 0 once d rounds to m
        return _stirling_tail(m) - 0.5 * (_stirling_tail(lo) + _stirling_tail(m * (1 + t)))
    r = 1.0 / m
    r2 = 1.0 / (m * m)
    t2 = t * t
    series = 0.0
    for i in range(_TAIL_K.shape[0]):
        br = 0.0
        for j in range(3, -1, -1):
            br = (br + _TAIL_B[i, j]) * t2
        series -= _TAIL_C[i] * r * br
        r = r * r2
    return series


@njit(cache=True, nogil=True)
def _log_one_minus_t2(m: float, d: float, lo: float) -> float:
    """log(1 - (d/m)^2), 0 <= d < m, lo = m - d exact (``lgamma_differences._log_one_minus_t2``)."""
    t = d / m
    if t > 0.5:
        return math.log(lo / m) + math.log((m + d) / m)
    return math.log1p(-t * t)


@njit(cache=True, nogil=True)
def _jensen_big(m: float, d: float, lo: float) -> float:
    """J for lo = m - d >= 20, d >= 0, lo exact (``lgamma_differences._jensen_big``)."""
    t = d / m
    l1mt2 = _log_one_minus_t2(m, d, lo)
    at = 0.5 * math.log((m + d) / lo) if t > 0.5 else math.atanh(t)
    return -0.5 * ((m - 0.5) * l1mt2 + 2.0 * d * at) + _jensen_tail(m, t, lo)


@njit(cache=True, nogil=True)
def jensen_lgamma_scalar(m: float, d: float, lo: float) -> float:
    """J(m, d) = lgamma(m) - (lgamma(m - d) + lgamma(m + d)) / 2 (<= 0), for m > |d|, with
    lo = m - |d| exact (``lgamma_differences.jensen_lgamma``: the smaller argument, lost in
    m - |d| when it is below m's rounding unit, and rounded with m when m is large)."""
    ad = abs(d)
    if ad == 0.0:
        return 0.0
    if lo >= _STIRLING_MIN:
        out = _jensen_big(m, ad, lo)
    else:
        shift = math.ceil(_STIRLING_MIN - lo)
        acc = 0.0
        for i in range(shift):
            acc += 0.5 * _log_one_minus_t2(m + i, ad, lo + i)
        out = _jensen_big(m + shift, ad, lo + shift) + acc
    return min(out, 0.0)


@njit(cache=True, nogil=True)
def _hellinger(log_bc: float) -> float:
    h2 = -math.expm1(min(log_bc, 0.0))
    return math.sqrt(min(max(h2, 0.0), 1.0))


@njit(cache=True, nogil=True)
def _total_bound(m: float, d: float) -> float:
    """Upper bound on -J(m, d) (>= 0), or inf if m <= |d|."""
    ad = abs(d)
    if ad == 0.0:
        return 0.0
    gap = m - ad
    if gap <= 0.0:
        return math.inf
    return 0.5 * ad * ad * (1.0 / gap + 1.0 / (gap * gap))


@njit(cache=True, nogil=True)
def _beta_bound(a1: float, b1: float, a2: float, b2: float) -> float:
    """Upper bound on log BC(Beta(a1, b1), Beta(a2, b2)) (module docstring)."""
    ma, da = (a1 + a2) / 2, (a2 - a1) / 2
    mb, db = (b1 + b2) / 2, (b2 - b1) / 2
    return (
        -da * da / (2.0 * (ma + abs(da)))
        - db * db / (2.0 * (mb + abs(db)))
        + _total_bound(ma + mb, da + db)
    )


@njit(cache=True, nogil=True)
def _hellinger_beta_exact(a1: float, b1: float, a2: float, b2: float) -> float:
    ma, da = (a1 + a2) / 2, (a2 - a1) / 2
    mb, db = (b1 + b2) / 2, (b2 - b1) / 2
    out = jensen_lgamma_scalar(ma, da, min(a1, a2)) + jensen_lgamma_scalar(mb, db, min(b1, b2))
    out -= jensen_lgamma_scalar(ma + mb, da + db, min(a1 + b1, a2 + b2))
    return _hellinger(min(out, 0.0))


@njit(cache=True, nogil=True)
def _hellinger_beta(a1: float, b1: float, a2: float, b2: float) -> float:
    """H(Beta(a1, b1), Beta(a2, b2)): 1 where the bound proves it, else the closed form."""
    if _beta_bound(a1, b1, a2, b2) < SURE_ONE:
        return 1.0
    return _hellinger_beta_exact(a1, b1, a2, b2)


@njit(cache=True, nogil=True)
def coin_hellinger_scores(a: float, b: float, n: int, k: int, out: np.ndarray) -> None:
    """out[j] = -H(Beta(a + k, b + n - k), Beta(a + j, b + n - j)), j = 0..n.

    Walks outward from j = k. The bound on log BC decreases with |j - k| on each side
    (for j > k its terms are -(j-k)^2 / (8 (a + j)) and -(j-k)^2 / (8 (b + n - k)), for
    j < k -(k-j)^2 / (8 (a + k)) and -(k-j)^2 / (8 (b + n - j)), the totals being equal),
    so past the first candidate it puts below -50 every score on that side is -1.
    """
    kf = float(k)
    a1, b1 = a + kf, b + (n - kf)
    j = k
    while j <= n:
        jf = float(j)
        if _beta_bound(a1, b1, a + jf, b + (n - jf)) < SURE_ONE:
            out[j:] = -1.0
            break
        out[j] = -_hellinger_beta_exact(a1, b1, a + jf, b + (n - jf))
        j += 1
    j = k - 1
    while j >= 0:
        jf = float(j)
        if _beta_bound(a1, b1, a + jf, b + (n - jf)) < SURE_ONE:
            out[: j + 1] = -1.0
            break
        out[j] = -_hellinger_beta_exact(a1, b1, a + jf, b + (n - jf))
        j -= 1


@njit(cache=True, nogil=True)
def dirichlet_hellinger_scores(
    alpha: np.ndarray, post: np.ndarray, candidates: np.ndarray, out: np.ndarray
) -> None:
    """out[r] = -H(Dir(post), Dir(alpha + candidates[r])) for every row r."""
    cats = alpha.size
    m = np.empty(cats)
    d = np.empty(cats)
    lo = np.empty(cats)  # the smaller arguments, exact (jensen_lgamma_scalar)
    post_total = 0.0
    for i in range(cats):
        post_total += post[i]
    for r in range(candidates.shape[0]):
        mt = 0.0
        dt = 0.0
        x2_total = 0.0
        bound = 0.0
        for i in range(cats):
            x2 = alpha[i] + candidates[r, i]
            m[i] = (post[i] + x2) / 2
            d[i] = (x2 - post[i]) / 2
            lo[i] = min(post[i], x2)
            mt += m[i]
            dt += d[i]
            x2_total += x2
            bound -= d[i] * d[i] / (2.0 * (m[i] + abs(d[i])))
        if bound + _total_bound(mt, dt) < SURE_ONE:
            out[r] = -1.0
            continue
        log_bc = -jensen_lgamma_scalar(mt, dt, min(post_total, x2_total))
        for i in range(cats):
            log_bc += jensen_lgamma_scalar(m[i], d[i], lo[i])
        out[r] = -_hellinger(min(log_bc, 0.0))
