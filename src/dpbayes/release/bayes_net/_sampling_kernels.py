"""Compiled exact samplers of the trimmed Beta and Dirichlet posteriors (issue 14).

Proof and error analysis: ``PROOF_sampling.md`` (§3, §4) beside this file.

* :func:`truncated_beta_ppf`: the inverse cdf of Beta(a, b) restricted to [lo, hi] at a
  uniform u, in log space. The interval's mass M and the side to invert from come from
  :func:`~._normaliser_kernels.log_beta_tails` (one continued fraction for both
  tails, relative error ~1e-14 however small a tail is): from lo when F(lo) <= S(hi)
  (condition log F(x) >= log(F(lo) + u M)), else from hi (condition
  log S(x) <= log(S(hi) + (1 - u) M)). The condition is monotone in x, true at hi and
  false at lo; bisection over the ordered bit patterns of the doubles in [lo, hi]
  returns the smallest double where it holds, in at most 64 steps. Nothing underflows:
  a mass of e^-700000 is as exact as a mass of 1/2.
* :func:`trimmed_dirichlet_box`: Dirichlet(a) restricted to {theta_j >= p for all j}
  by stick-breaking, theta_i = V_i r_i, r_{i+1} = r_i (1 - V_i), V_i ~ Beta(a_i, a_{i+1}
  + ... + a_{k-1}) independent. The region is {V_i in [p / r_i, 1 - (k - 1 - i) p / r_i]
  for all i}; it lies in the box V_i in [p / R_i, 1 - (k - 1 - i) p / R_i], R_i = 1 - i p
  the largest r_i can be. Proposals are independent truncated Betas on the box (exact, as
  above), accepted when the stick lies in the region: rejection from the product law
  conditioned on the box, so an accepted draw has exactly the product law conditioned on
  the region. For k = 2 the box is the region and the first proposal is accepted.
* Side 2 of :func:`truncated_beta_ppf`: when the interval's mass M is below 2^-10 of both
  outer tails (a U-shaped row of a tiny prior), F(lo) + u M would round to F(lo); the
  condition is then log int_lo^x f >= log u + log M with both integrals summed directly
  (:func:`~._normaliser_kernels.log_mass_between`).
* Sides 3 and 4: when the row lies far from the interval (log M < -1000), tails of size
  e^-1000 and below would round in their logs; the condition of side 1 (0) is taken on
  the ratio S(x) / S(lo) (F(x) / F(hi)) instead
  (:func:`~._normaliser_kernels.log_near_tail_ratio`; proof, §3.5).

No randomness is drawn here: the kernels receive uniforms drawn by a noise source
(``dpbayes.privacy.noise``).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from dpbayes.release.bayes_net._normaliser_kernels import (
    log_add_exp,
    log_beta_fn,
    log_beta_tails,
    log_mass_between,
    log_near_tail_ratio,
)

__all__ = [
    "log_interval_mass",
    "trimmed_dirichlet_box",
    "truncated_beta_many",
    "truncated_beta_ppf",
]

LOG_HALF = -0.6931471805599453
# Below M = 2^-10 min(F(lo), S(hi)) the tails' difference keeps less than ~1e-13 of M: the
# mass and the condition are integrated directly (``log_mass_between``; proof, §3.3).
LOG_DIRECT = 10.0 * math.log(2.0)
# Beyond |log M| = 1000 a log tail's rounding (|L| 2^-53) would exceed 1e-13 of the
# restricted cdf: the condition is taken on tail ratios instead (proof, §3.5).
LOG_RELATIVE = 1000.0


@njit(cache=True)
def _log_diff(big, small):  # type: ignore[no-untyped-def]
    """log(e^big - e^small) for small <= big (-inf when they are equal)."""
    if small == -math.inf:
        return big
    return big + math.log1p(-math.exp(min(small - big, 0.0)))


@njit(cache=True)
def _pair(x, xc):  # type: ignore[no-untyped-def]
    """(x, 1 - x) from a point given by x (if xc < 0) or by its complement xc, keeping
    the smaller of the two exact."""
    if xc < 0.0:
        return x, 1.0 - x
    return 1.0 - xc, xc


@njit(cache=True)
def _interval(a, b, lo, lo_c, hi, hi_c):  # type: ignore[no-untyped-def]
    """(log M, side, log base) of Beta(a, b) on [lo, hi] (each end as an (x, 1 - x)
    pair): M the mass; side 0 (base F(lo)) or 1 (base S(hi)), whichever base is smaller.
    M is the difference of the two cdfs when F(hi) <= 1/2, of the two survival functions
    when S(lo) <= 1/2, else 1 - F(lo) - S(hi) (both < 1/2): each term relative-exact, no
    cancellation beyond a factor min(F(lo), S(hi)) / M (proof, §3)."""
    lf_lo, ls_lo = log_beta_tails(a, b, lo, lo_c)
    lf_hi, ls_hi = log_beta_tails(a, b, hi, hi_c)
    if lf_hi <= LOG_HALF:
        lm = _log_diff(lf_hi, lf_lo)
    elif ls_lo <= LOG_HALF:
        lm = _log_diff(ls_lo, ls_hi)
    else:
        lm = math.log1p(-(math.exp(lf_lo) + math.exp(ls_hi)))
    if lf_lo <= ls_hi:
        return lm, 0, lf_lo
    return lm, 1, ls_hi


@njit(cache=True)
def log_interval_mass(a, b, lo, hi_c):  # type: ignore[no-untyped-def]
    """log P(lo <= X <= 1 - hi_c) for X ~ Beta(a, b) (no underflow), as the sampler
    computes it (integrated directly when the tails' difference would cancel)."""
    x0, y0 = _pair(lo, -1.0)
    x1, y1 = _pair(0.0, hi_c)
    lm, _, base = _interval(a, b, x0, y0, x1, y1)
    if lm < base - LOG_DIRECT:
        log_beta = log_beta_fn(a, b)
        return log_mass_between(a, b, x0, y0, x1, y1, log_beta)
    return lm


@njit(cache=True)
def _bits(x, fbuf, ibuf):  # type: ignore[no-untyped-def]
    fbuf[0] = x
    return ibuf[0]


@njit(cache=True)
def _double(key, fbuf, ibuf):  # type: ignore[no-untyped-def]
    ibuf[0] = key
    return fbuf[0]


@njit(cache=True)
def _key(x, y, half, fbuf, ibuf):  # type: ignore[no-untyped-def]
    """Order-preserving integer key of the point (x, y = 1 - x): the bits of x up to 1/2,
    2 bits(1/2) - bits(y) above, so that points near 1 are as fine as points near 0."""
    if x <= 0.5:
        return _bits(x, fbuf, ibuf)
    return 2 * half - _bits(y, fbuf, ibuf)


@njit(cache=True)
def _point(key, half, fbuf, ibuf):  # type: ignore[no-untyped-def]
    """The (x, 1 - x) pair of a key (inverse of ``_key``)."""
    if key <= half:
        x = _double(key, fbuf, ibuf)
        return x, 1.0 - x
    y = _double(2 * half - key, fbuf, ibuf)
    return 1.0 - y, y


@njit(cache=True)
def truncated_beta_ppf(a, b, lo, hi_c, u, fbuf, ibuf):  # type: ignore[no-untyped-def]
    """The u-quantile of Beta(a, b) restricted to [lo, 1 - hi_c] (module docstring), as
    the pair (x, 1 - x) with the smaller of the two exact: the smallest point of the
    double grid (doubles below 1/2 and one minus doubles below 1/2, so both ends are
    resolved) whose restricted cdf is >= u, from the tails (sides 0 and 1) or, when the
    tails' difference would cancel, by integrating [lo, x] directly (side 2; proof,
    §3.1). (NaN, NaN) only for an empty interval or a mass that underflows even in logs.
    ``fbuf``/``ibuf``: one float64 and its int64 view (scratch)."""
    lo_x, lo_y = _pair(lo, -1.0)
    hi_x, hi_y = _pair(0.0, hi_c)
    lm, side, base = _interval(a, b, lo_x, lo_y, hi_x, hi_y)
    log_beta = log_beta_fn(a, b)
    if lm < base - LOG_DIRECT:  # M below 2^-10 of both outer tails: integrate [lo, x]
        lm = log_mass_between(a, b, lo_x, lo_y, hi_x, hi_y, log_beta)
        side = 2
    half = _bits(0.5, fbuf, ibuf)
    left = _key(lo_x, lo_y, half, fbuf, ibuf)
    right = _key(hi_x, hi_y, half, fbuf, ibuf)
    if not lm > -math.inf or not left < right:
        return math.nan, math.nan
    if side == 0:
        target = log_add_exp(base, math.log(u) + lm)
    elif side == 1:
        target = log_add_exp(base, math.log1p(-u) + lm)
    else:
        target = math.log(u) + lm
    if side < 2 and lm < -LOG_RELATIVE:
        # the row lies far from the interval: log tails of size |lm| round by |lm| 2^-53,
        # so the condition is taken on ratios to the tail at the interval's heavy end
        # (proof, §3.5); the tail on base's side is the continued fraction's on all of it
        switch = (a + 1.0) / (a + b + 2.0)
        if side == 1 and lo_x >= switch:  # S(x) / S(lo) <= 1 - u q, q = M / S(lo)
            r_end = log_near_tail_ratio(b, a, hi_y, hi_x, lo_y, lo_x)
            target = math.log1p(u * math.expm1(r_end))
            side = 3
        elif side == 0 and hi_x < switch:  # F(x) / F(hi) >= 1 - (1 - u) q, q = M / F(hi)
            r_end = log_near_tail_ratio(a, b, lo_x, lo_y, hi_x, hi_y)
            target = math.log1p((1.0 - u) * math.expm1(r_end))
            side = 4
    # invariant: the condition fails at `left` (lo itself: F(lo) + u M > F(lo)) and
    # holds at `right` (hi: the whole mass); at most 64 halvings of the key range
    while right - left > 1:
        mid = left + (right - left) // 2
        x, y = _point(mid, half, fbuf, ibuf)
        if side == 2:
            holds = log_mass_between(a, b, lo_x, lo_y, x, y, log_beta) >= target
        elif side == 3:
            holds = log_near_tail_ratio(b, a, y, x, lo_y, lo_x) <= target
        elif side == 4:
            holds = log_near_tail_ratio(a, b, x, y, hi_x, hi_y) >= target
        else:
            lf, ls = log_beta_tails(a, b, x, y)
            holds = (lf >= target) if side == 0 else (ls <= target)
        if holds:
            right = mid
        else:
            left = mid
    return _point(right, half, fbuf, ibuf)


@njit(cache=True)
def truncated_beta_many(a, b, lo, hi_c, u):  # type: ignore[no-untyped-def]
    """:func:`truncated_beta_ppf` elementwise over equal-length 1-d arrays: (x, 1 - x)."""
    fbuf = np.empty(1, np.float64)
    ibuf = fbuf.view(np.int64)
    x = np.empty(a.shape[0])
    y = np.empty(a.shape[0])
    for i in range(a.shape[0]):
        x[i], y[i] = truncated_beta_ppf(a[i], b[i], lo[i], hi_c[i], u[i], fbuf, ibuf)
    return x, y


@njit(cache=True)
def trimmed_dirichlet_box(a, p, u):  # type: ignore[no-untyped-def]
    """Box-rejection proposals for Dirichlet(a) on {theta_j >= p} (module docstring).

    ``a``: the k concentrations in the order of the stick (any order is exact; the
    caller puts the smallest first); ``u``: (T, k - 1) uniforms, one row per proposal.
    Returns (theta, t): the first accepted proposal's theta in the order of ``a`` and its
    row t, or (undefined, -1) when none of the T proposals is accepted, (NaN, -2) when a
    box interval has no computable mass.
    """
    k = a.shape[0]
    fbuf = np.empty(1, np.float64)
    ibuf = fbuf.view(np.int64)
    tails = np.empty(k)  # tails[i] = a_i + ... + a_{k-1}
    acc = 0.0
    for i in range(k - 1, -1, -1):
        acc += a[i]
        tails[i] = acc
    box_lo = np.empty(k - 1)
    box_hi_c = np.empty(k - 1)
    for i in range(k - 1):
        r_max = 1.0 - i * p
        box_lo[i] = p / r_max
        box_hi_c[i] = (k - 1 - i) * p / r_max
    theta = np.empty(k)
    for t in range(u.shape[0]):
        r = 1.0
        ok = True
        for i in range(k - 1):
            v, v_c = truncated_beta_ppf(
                a[i], tails[i + 1], box_lo[i], box_hi_c[i], u[t, i], fbuf, ibuf
            )
            if not v == v:
                theta[:] = math.nan
                return theta, -2
            theta[i] = r * v
            r = r * v_c
            if theta[i] < p:
                ok = False
                break
        if ok and r >= p:
            theta[k - 1] = r
            return theta, t
    return theta, -1
