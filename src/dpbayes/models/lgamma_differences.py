"""Differences of log-gamma values computed without cancellation, elementwise.

Two quantities carry every closed-form divergence of Beta and Dirichlet distributions
(see :mod:`dpbayes.models.divergence`):

* the Jensen gap ``J(m, d) = lgamma(m) - (lgamma(m - d) + lgamma(m + d)) / 2`` (<= 0);
* the Bregman divergence ``D(x, delta) = lgamma(x + delta) - lgamma(x) - delta psi(x)`` (>= 0).

Subtracting ``lgamma`` values of size ``x log x`` loses about ``log10(x log x)`` digits,
which for parameters near 1e7 leaves a relative error of ~1e-2 in the Hellinger distance
of neighbouring posteriors. Here they are computed as follows.

J, from the smaller argument lo = m - |d| (exact where the caller has it):

* lo >= 20: Stirling's series, with the leading terms rearranged into ``log1p``/``atanh``
  forms (from lo itself when d is near m, where 1 - d/m loses digits or is 0) and the
  differences of the series tails taken from their own Taylor expansion when the
  arguments are close;
* m < 1: the shift by one, J(m, d) = J(m + 1, d) + log(1 - (d/m)^2) / 2;
* lo < 20 and |d| < 0.02 m: the Taylor series in ``d`` with polygamma coefficients;
* otherwise: plain ``gammaln`` (at most about four digits cancel there: |J| is of the
  size of the lgamma values when d is near m, and above 1e-4 of them at |d| = 0.02 m).

D, from x and x + delta:

* both arguments >= 20: Stirling's series as for J, with ``log1p(u) - u`` forms;
* arguments < 20 and close (relative difference below 0.005): the Taylor series in
  ``delta`` with polygamma coefficients;
* otherwise: plain ``gammaln``/``digamma`` (no catastrophic cancellation there).

All functions broadcast their arguments and use no Python loops over elements.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy import special

__all__ = [
    "STIRLING_TAIL_TERMS",
    "betaln",
    "bregman_lgamma",
    "gammaln",
    "jensen_lgamma",
    "log1pmx",
    "log1pmx_series",
    "stirling_tail",
]

_TAYLOR_MAX = 0.02  # below 20: |half-difference| < 0.02 m (J), |difference| < 0.005 x (D): Taylor
_STIRLING_MIN = 20.0  # Stirling's series (to x^-9) is accurate to ~1e-17 absolute from here


def betaln(a: float, b: float) -> float:
    """log B(a, b) for every pair of positive finite doubles.

    scipy's ``betaln`` forms B(a, b) on the way and returns inf once it passes the doubles
    (a or b at 5e-324, where B is about 1/a + 1/b but log B only 745), and NaN at a ratio
    of about 1e200 (1e100 against 1e300). Where it is not finite: if the smaller parameter
    s is below half an ulp of the larger L (s + L == L), lgamma(L) - lgamma(L + s) is
    -s digamma(L) to a relative s / L < 1.2e-16, so log B = lgamma(s) - s digamma(L);
    otherwise, for L >= 20, Stirling's series with the differences of logarithms taken as
    u = log1p(s / L) (:func:`_betaln_stirling`): the three lgammas overflowed (lgamma of
    a + b ~ 2.5e305 passes the doubles), and so did a + b itself; below, the three lgammas.
    A log B beyond the doubles is -inf, never an exception.
    """
    value = float(special.betaln(a, b))
    if math.isfinite(value):
        return value
    small, large = (a, b) if a <= b else (b, a)
    if small + large == large:
        return math.lgamma(small) - small * float(special.digamma(large))
    if large >= _STIRLING_MIN:
        return _betaln_stirling(small, large)
    return math.lgamma(small) + math.lgamma(large) - math.lgamma(small + large)


_GAMMALN_TINY = 1e-300  # below: lgamma(x) = -log(x) - euler x + O(x^2), the rest < 1e-300


def gammaln(x: Any) -> np.ndarray:
    """lgamma(x) for every positive double, elementwise.

    scipy's ``gammaln`` forms 1/x on the way and returns inf below about 5.56e-309 (the
    subnormal parameters, down to 5e-324, where lgamma is only -log x <= 744.4); a
    Hellinger distance then took inf - inf = NaN. Below 1e-300 it is -log(x) (the next
    term, -euler x, is below 1e-300 and far below the rounding unit of -log x ~ 690).
    """
    x = np.asarray(x, dtype=float)
    tiny = x < _GAMMALN_TINY
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(tiny, -np.log(np.where(tiny, x, 1.0)), special.gammaln(x))


_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


def _betaln_stirling(s: float, big: float) -> float:
    """log B(s, L) for L >= 20 and 0 < s <= L, without forming lgamma(L) or s + L.

    With u = log(L + s) - log L = log1p(s / L) and T = :func:`stirling_tail`,
    lgamma(L) - lgamma(L + s) = -s log L - (L - 1/2) u - s u + s + T(L) - T(L + s), and for
    s >= 20 also lgamma(s) = (s - 1/2) log s - s + log(2 pi)/2 + T(s), so that
    log B = s (log s - log L) - log(s)/2 - (L - 1/2) u - s u + log(2 pi)/2 + T(s) + T(L)
    - T(L + s). Every term is finite (each below DBL_MAX in size); a sum past the doubles
    is -inf (log B is then below -DBL_MAX).
    """
    u = math.log1p(s / big)
    tails = stirling_tail(big) - stirling_tail(s + big)  # s + L = inf: T = 0
    if s >= _STIRLING_MIN:
        head = s * (math.log(s) - math.log(big)) - 0.5 * math.log(s) + _HALF_LOG_2PI
        head += stirling_tail(s)
    else:
        head = math.lgamma(s) - s * math.log(big) + s
    return head - (big - 0.5) * u - s * u + tails


# coefficients (-1)^(k+1)/k of u^k in log(1 + u) - u, highest first (k = 18 .. 2)
_LOG1PMX_TERMS = tuple((-1.0) ** (k + 1) / k for k in range(18, 1, -1))


def log1pmx_series(u: Any) -> Any:
    """log(1 + u) - u by its series to u^18, for |u| < 0.1 (truncation below 1e-18
    relative; the direct difference of two numbers of size u loses ~1e-16 / u of its
    value). Plain arithmetic, so it serves scalars and arrays alike, and the compiled
    kernels of the release families compile this one definition
    (``numba.njit(log1pmx_series)``)."""
    acc = 0.0 * u
    for c in _LOG1PMX_TERMS:  # -u^2/2 + u^3/3 - ... by Horner, 17 terms
        acc = acc * u + c
    return acc * u * u


def log1pmx(u: np.ndarray) -> np.ndarray:
    """log(1 + u) - u without cancellation (:func:`log1pmx_series` for |u| < 0.1)."""
    u = np.asarray(u, dtype=float)
    small = np.abs(u) < 0.1
    series = log1pmx_series(np.where(small, u, 0.0))
    with np.errstate(divide="ignore", invalid="ignore"):
        direct = np.log1p(u) - u
    return np.where(small, series, direct)


def stirling_tail(x: Any) -> Any:
    """lgamma(x) - [(x - 1/2) log x - x + log(2 pi)/2] for x >= 20: Stirling's series to
    x^-9 (the next term is below 1e-17 there). Plain arithmetic, so it serves floats and
    arrays alike, and the compiled kernels of the release families compile this one
    definition (``numba.njit(stirling_tail)``)."""
    r = 1.0 / x
    r2 = r * r
    return r * (1 / 12 - r2 * (1 / 360 - r2 * (1 / 1260 - r2 * (1 / 1680 - r2 / 1188))))


def _digamma_tail(x: np.ndarray) -> np.ndarray:
    """log x - 1/(2x) - digamma(x) for x >= 20 (series to x^-10: -x times the derivative
    of :func:`stirling_tail`)."""
    r2 = 1.0 / (x * x)
    return r2 * (1 / 12 - r2 * (1 / 120 - r2 * (1 / 252 - r2 * (1 / 240 - r2 / 132))))


# Stirling tail coefficients c_k of x^-k in lgamma (those of :func:`stirling_tail`), for
# the Taylor series that subtract tails of nearby arguments without cancellation.
STIRLING_TAIL_TERMS = ((1, 1 / 12), (3, -1 / 360), (5, 1 / 1260), (7, -1 / 1680), (9, 1 / 1188))
_TAIL_C = STIRLING_TAIL_TERMS
_SERIES_T = 0.02  # |t| below which differences of tails are taken from their Taylor series


def _jensen_tail(m: np.ndarray, t: np.ndarray, lo: np.ndarray) -> np.ndarray:
    """Tail part of J: s(m) - (s(lo) + s(m + d))/2 for Stirling's tail s, t = d/m, lo = m - d
    (exact, not m (1 - t), which is 0 once d rounds to m)."""
    out = stirling_tail(m) - 0.5 * (stirling_tail(lo) + stirling_tail(m * (1 + t)))
    small = t < _SERIES_T
    if np.any(small):  # the direct difference cancels; use its Taylor series in t
        ms, t2 = m[small], t[small] ** 2
        r, r2 = 1.0 / ms, 1.0 / (ms * ms)
        series = np.zeros_like(ms)
        for k, c in _TAIL_C:
            # (1/2)((1-t)^-k + (1+t)^-k) - 1 = sum_j C(k+2j-1, 2j) t^(2j)
            br = np.zeros_like(t2)
            for j in range(4, 0, -1):
                br = (br + math.comb(k + 2 * j - 1, 2 * j)) * t2
            series -= c * r * br
            r = r * r2
        out[small] = series
    return out


def _jensen_big(m: np.ndarray, d: np.ndarray, lo: np.ndarray) -> np.ndarray:
    """J for lo = m - d >= 20 (d >= 0, lo exact): Stirling's series with log1p/atanh, no
    cancellation."""
    t = d / m
    l1mt2 = _log_one_minus_t2(m, d, lo)
    far = t > 0.5
    at = np.arctanh(np.where(far, 0.0, t))
    if np.any(far):  # 1 - t loses digits (and is 0 once d rounds to m): use lo itself
        at[far] = 0.5 * np.log((m[far] + d[far]) / lo[far])
    return -0.5 * ((m - 0.5) * l1mt2 + 2.0 * d * at) + _jensen_tail(m, t, lo)


def _log_one_minus_t2(m: np.ndarray, d: np.ndarray, lo: np.ndarray) -> np.ndarray:
    """log(1 - (d/m)^2) for 0 <= d < m, by log1p near 0 and from lo = m - d, m + d near 1."""
    t = d / m
    far = t > 0.5
    out = np.log1p(-t * np.where(far, 0.0, t))
    if np.any(far):
        mf, df = m[far], d[far]
        out[far] = np.log(lo[far] / mf) + np.log((mf + df) / mf)
    return np.asarray(out)


def jensen_lgamma(m: Any, d: Any, lo: Any = None) -> np.ndarray:
    """J = lgamma(m) - (lgamma(m - d) + lgamma(m + d)) / 2  (<= 0), for m > |d|.

    ``lo``: the smaller argument m - |d|, exact, where the caller has it (the smaller of
    the two parameters). Formed as m - |d| from rounded m and d it is lost when it is
    below m's rounding unit (Beta(1e-300, .) against Beta(1, .): m = d = 0.5), and then
    lgamma(lo), the largest term, with it; and where m is large it carries m's rounding
    error into the terms that need lo."""
    m, d, lo_in = np.broadcast_arrays(
        np.asarray(m, dtype=float),
        np.asarray(d, dtype=float),
        np.asarray(np.nan if lo is None else lo, dtype=float),
    )
    shape = m.shape
    m, ad = m.ravel(), np.abs(d).ravel()
    if not np.any(ad):  # equal arguments (e.g. candidates with a common a + b): J = 0
        return np.zeros(shape)
    low = m - ad if lo is None else lo_in.ravel()
    big = low >= _STIRLING_MIN
    if np.all(big):
        return np.minimum(_jensen_big(m, ad, low), 0.0).reshape(shape)
    out = np.empty(m.shape)
    small = ~big & (m < 1.0)
    near = ~big & ~small & (ad < _TAYLOR_MAX * m)
    rest = ~big & ~small & ~near
    if np.any(big):
        out[big] = _jensen_big(m[big], ad[big], low[big])
    if np.any(small):
        # lgamma(x) = lgamma(x + 1) - log x: J(m, d) = J(m + 1, d) + log((m-d)(m+d)/m^2) / 2,
        # every term finite however small m (the series' polygamma(k, m) overflowed at
        # m ~ 1e-35 and made 0 * inf = NaN scores for an empty category)
        ms, ds, ls = m[small], ad[small], low[small]
        out[small] = jensen_lgamma(ms + 1.0, ds, ls + 1.0) + 0.5 * _log_one_minus_t2(ms, ds, ls)
    if np.any(near):  # J = -sum_k d^(2k) psi^(2k-1)(m) / (2k)!, ratio of terms ~ (d/m)^2
        mn, dn = m[near], ad[near]
        d2 = dn * dn
        acc = np.zeros_like(mn)
        for k in range(5, 0, -1):
            acc = acc * d2 + special.polygamma(2 * k - 1, mn) / math.factorial(2 * k)
        out[near] = -acc * d2
    if np.any(rest):  # lo < 20 and |d| >= 0.02 m: at most ~4 digits cancel (module doc)
        ms, ds = m[rest], ad[rest]
        out[rest] = gammaln(ms) - 0.5 * (gammaln(low[rest]) + gammaln(ms + ds))
    return np.minimum(out, 0.0).reshape(shape)


def _bregman_tail(x: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Tail part of D: s(x(1+u)) - s(x) - x u s'(x) for Stirling's tail s."""
    out = stirling_tail(x * (1 + u)) - stirling_tail(x) + x * u * _digamma_tail(x)
    small = np.abs(u) < _SERIES_T / 4
    if np.any(small):  # the direct difference cancels; use its Taylor series in u
        xs, us = x[small], u[small]
        r, r2 = 1.0 / xs, 1.0 / (xs * xs)
        series = np.zeros_like(xs)
        for k, c in _TAIL_C:
            # (1+u)^-k - 1 + k u = sum_{j>=2} (-1)^j C(k+j-1, j) u^j
            br = np.zeros_like(us)
            for j in range(7, 1, -1):
                br = (br + (-1) ** j * math.comb(k + j - 1, j)) * us
            series += c * r * br * us
            r = r * r2
        out[small] = series
    return out


def _bregman_big(x: np.ndarray, dl: np.ndarray) -> np.ndarray:
    """D for x, x + delta >= 20: Stirling's series with log1p, no cancellation."""
    u = dl / x
    lmx = log1pmx(u)
    return x * (u * np.log1p(u) + lmx) - 0.5 * lmx + _bregman_tail(x, u)


def bregman_lgamma(x: np.ndarray, delta: np.ndarray) -> np.ndarray:
    """D = lgamma(x + delta) - lgamma(x) - delta digamma(x)  (>= 0), elementwise.

    Taking the difference ``delta`` (not ``x + delta``) keeps it exact for sums of
    parameters, where ``x + delta`` would be rounded.
    """
    x, dl = np.broadcast_arrays(np.asarray(x, dtype=float), np.asarray(delta, dtype=float))
    shape = x.shape
    x, dl = x.ravel(), dl.ravel()
    big = np.minimum(x, x + dl) >= _STIRLING_MIN
    if np.all(big):
        return np.maximum(_bregman_big(x, dl), 0.0).reshape(shape)
    out = np.empty(x.shape)
    small = ~big & (x < 1.0)
    near = ~big & ~small & (np.abs(dl) < _TAYLOR_MAX / 4 * x)
    rest = ~big & ~small & ~near
    if np.any(big):
        out[big] = _bregman_big(x[big], dl[big])
    if np.any(small):
        # lgamma(x) = lgamma(x + 1) - log x, digamma(x) = digamma(x + 1) - 1/x:
        # D(x, delta) = D(x + 1, delta) - log1pmx(delta / x), finite however small x
        xs, ds = x[small], dl[small]
        out[small] = bregman_lgamma(xs + 1.0, ds) - log1pmx(ds / xs)
    if np.any(near):  # D = sum_{k>=2} psi^(k-1)(x) delta^k / k!, ratio of terms ~ delta/x
        xn, dn = x[near], dl[near]
        acc = np.zeros_like(xn)
        for k in range(8, 1, -1):
            acc = acc * dn + special.polygamma(k - 1, xn) / math.factorial(k)
        out[near] = acc * dn * dn
    if np.any(rest):
        xs, ds = x[rest], dl[rest]
        out[rest] = gammaln(xs + ds) - gammaln(xs) - ds * special.digamma(xs)
    return np.maximum(out, 0.0).reshape(shape)
