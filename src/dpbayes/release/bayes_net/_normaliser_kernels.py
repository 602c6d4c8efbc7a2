"""Compiled (numba) normalisers of the noise-aware Bayesian-network targets.

The trimmed posterior's mass (``sampling`` releases: log P(theta in the trimmed box) of a
Beta row, tabulated by :func:`trim_mass_table`) and the MAP grid's log-normalisers
(``map`` releases: an exact log-sum-exp over the public grid, :func:`grid_log_z`, stored in
lazily filled tables read by the moves of :mod:`._kernels`). ``log_beta_tails`` is also the
exact tail of the trimmed samplers (:mod:`._sampling_kernels`).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from dpbayes.release.counts._kernels import betainc_cf

__all__ = [
    "grid_log_z",
    "log_beta_cdf",
    "log_beta_tails",
    "log_trim_mass",
    "trim_mass_table",
]


# The continued fraction of I_x(a, b) (Numerical Recipes' betacf), shared with the coin
# posterior's kernels and compiled here for use inside this module's njit functions.
_betacf = njit(cache=True)(getattr(betainc_cf, "py_func", betainc_cf))


@njit(cache=True)
def log_beta_tails(a, b, x, y):  # type: ignore[no-untyped-def]
    """(log I_x(a, b), log(1 - I_x(a, b))), the log cdf and log survival function of
    Beta(a, b) at x, given x and y = 1 - x with the smaller of the two exact (so that x
    near 0 and x near 1 both keep their precision), with no underflow: the continued
    fraction of the tail on x's side of (a + 1) / (a + b + 2) (relative error ~1e-14
    however small that tail), log1p of minus it for the other."""
    if x <= 0.0:
        return -math.inf, 0.0
    if y <= 0.0:
        return 0.0, -math.inf
    log_x = math.log(x) if x <= y else math.log1p(-y)
    log_y = math.log(y) if y <= x else math.log1p(-x)
    front = a * log_x + b * log_y - (math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b))
    if x < (a + 1.0) / (a + b + 2.0):
        low = min(front - math.log(a) + math.log(_betacf(a, b, x)), 0.0)
        return low, math.log1p(-math.exp(low))
    high = min(front - math.log(b) + math.log(_betacf(b, a, y)), 0.0)
    return math.log1p(-math.exp(high)), high


@njit(cache=True)
def log_beta_cdf(a, b, x):  # type: ignore[no-untyped-def]
    """log I_x(a, b), accurate in relative terms however small (no underflow): the
    continued fraction below the mean, log1p(-I_{1-x}(b, a)) above it."""
    return log_beta_tails(a, b, x, 1.0 - x)[0]


@njit(cache=True)
def log_trim_mass(a, b, p):  # type: ignore[no-untyped-def]
    """log P(p <= X <= 1 - p) for X ~ Beta(a, b): the difference of the two cdfs, or of
    the two survival functions when the mass lies above p, each exact in log space."""
    lo = log_beta_cdf(a, b, p)
    if lo < -0.6931471805599453:
        hi = log_beta_cdf(a, b, 1.0 - p)
    else:  # survival functions S(x) = I_{1-x}(b, a)
        hi = log_beta_cdf(b, a, 1.0 - p)
        lo = log_beta_cdf(b, a, p)
    if lo == -math.inf:
        return hi
    return hi + math.log1p(-math.exp(min(lo - hi, 0.0)))


@njit(cache=True)
def trim_mass_table(alpha, p, n):  # type: ignore[no-untyped-def]
    """log_trim_mass(alpha + x, alpha + y, p) for 0 <= x, y <= n (symmetric; x + y <= n
    filled)."""
    out = np.zeros((n + 1, n + 1))
    for x in range(n + 1):
        for y in range(x, n + 1 - x):
            val = log_trim_mass(alpha + x, alpha + y, p)
            out[x, y] = val
            out[y, x] = val
    return out


@njit(cache=True)
def _zval(ztab, tix, x, y, alpha, p):  # type: ignore[no-untyped-def]
    """log Z of a binary row with counts (x, y): from the table when it holds them."""
    if x < ztab.shape[1] and y < ztab.shape[1]:
        return ztab[tix, x, y]
    return log_trim_mass(alpha + x, alpha + y, p)


@njit(cache=True)
def grid_log_z(logg, base, w, counts):  # type: ignore[no-untyped-def]
    """log sum_g exp(base_g + w sum_k counts_k logg[g, k]) over the first ``logg.shape[0]``
    grid points: the exponential mechanism's log-normaliser of one CPT row (``map``)."""
    top = -math.inf
    total = 0.0
    for g in range(logg.shape[0]):
        x = base[g]
        for j in range(counts.shape[0]):
            x += w * counts[j] * logg[g, j]
        if x > top:
            total = total * math.exp(top - x) + 1.0
            top = x
        else:
            total += math.exp(x - top)
    return top + math.log(total)


@njit(cache=True)
def _map_z(mz, v, k):  # type: ignore[no-untyped-def]
    """log Z of a row of node v whose counts are in ``cbuf[:k]`` (``map`` release),
    computed over the grid (the untabulated path). ``mz`` = (mgrid, mbase, mG, mtab,
    moff, mside, mw, fam_off, cards, cbuf)."""
    mgrid, mbase, m_g, mw, cbuf = mz[0], mz[1], mz[2], mz[6], mz[9]
    return grid_log_z(mgrid[v, : m_g[v], :k], mbase[v, : m_g[v]], mw, cbuf[:k])


@njit(cache=True)
def _map_tab(mz, v, k, idx):  # type: ignore[no-untyped-def]
    """log Z at flat index ``idx`` of node v's table (its row counts in base mside[v]),
    computed and stored on first use (NaN = not yet computed)."""
    mtab = mz[3]
    val = mtab[idx]
    if math.isnan(val):
        side = mz[5][v]
        cbuf = mz[9]
        rest = idx - mz[4][v]
        for j in range(k - 1, -1, -1):
            cbuf[j] = rest % side
            rest //= side
        val = _map_z(mz, v, k)
        mtab[idx] = val
    return val


@njit(cache=True)
def _map_row_index(mz, famc, c, v, f):  # type: ignore[no-untyped-def]
    """(flat table index of the row of node v holding family cell f, the index's stride
    for cell f, the row's first family cell)."""
    fam_off, cards = mz[7], mz[8]
    side = mz[5][v]
    k = cards[v]
    start = fam_off[v] + ((f - fam_off[v]) // k) * k
    idx = 0
    stride = 1
    for j in range(k):
        idx = idx * side + famc[c, start + j]
    for _ in range(k - 1 - (f - start)):
        stride *= side
    return idx + mz[4][v], stride, start


@njit(cache=True)
def _map_row_z(mz, famc, c, v, f, t):  # type: ignore[no-untyped-def]
    """log Z of the row of node v holding family cell f, with t added to cell f."""
    k = mz[8][v]
    if mz[5][v] > 0:
        idx, stride, _ = _map_row_index(mz, famc, c, v, f)
        return _map_tab(mz, v, k, idx + t * stride)
    fam_off, cbuf = mz[7], mz[9]
    start = fam_off[v] + ((f - fam_off[v]) // k) * k
    for j in range(k):
        cbuf[j] = famc[c, start + j]
    cbuf[f - start] += t
    return _map_z(mz, v, k)


@njit(cache=True)
def _map_pair_terms(mz, famc, c, v, fi, fj, lo, size, lp):  # type: ignore[no-untyped-def]
    """lp[k] -= the log Z of the rows of node v holding fi (minus t) and fj (plus t),
    for t = lo + k, k < size."""
    k = mz[8][v]
    if mz[5][v] > 0:  # tabulated: the flat index is linear in t
        ii, si, ri = _map_row_index(mz, famc, c, v, fi)
        ij, sj, rj = _map_row_index(mz, famc, c, v, fj)
        mtab = mz[3]
        if ri == rj:
            step = sj - si
            for q in range(size):
                x = ii + (lo + q) * step
                val = mtab[x]
                lp[q] -= _map_tab(mz, v, k, x) if math.isnan(val) else val
        else:
            for q in range(size):
                t = lo + q
                x = ii - t * si
                y = ij + t * sj
                val = mtab[x]
                lp[q] -= _map_tab(mz, v, k, x) if math.isnan(val) else val
                val = mtab[y]
                lp[q] -= _map_tab(mz, v, k, y) if math.isnan(val) else val
        return
    fam_off, cbuf = mz[7], mz[9]
    sti = fam_off[v] + ((fi - fam_off[v]) // k) * k
    stj = fam_off[v] + ((fj - fam_off[v]) // k) * k
    for q in range(size):
        t = lo + q
        if sti == stj:
            for j in range(k):
                cbuf[j] = famc[c, sti + j]
            cbuf[fi - sti] -= t
            cbuf[fj - sti] += t
            lp[q] -= _map_z(mz, v, k)
        else:
            lp[q] -= _map_row_z(mz, famc, c, v, fi, -t) + _map_row_z(mz, famc, c, v, fj, t)
