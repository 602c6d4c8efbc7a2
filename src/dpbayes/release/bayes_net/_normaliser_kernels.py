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

from dpbayes.models.lgamma_differences import log1pmx_series, stirling_tail
from dpbayes.release.counts._kernels import betainc_cf

__all__ = [
    "beta_lambda",
    "grid_log_z",
    "log_add_exp",
    "log_beta_cdf",
    "log_beta_fn",
    "log_beta_tails",
    "log_front",
    "log_mass_between",
    "log_near_tail_ratio",
    "log_quad",
    "log_trim_mass",
    "trim_mass_table",
]


# The continued fraction of I_x(a, b) (Numerical Recipes' betacf), shared with the coin
# posterior's kernels and compiled here for use inside this module's njit functions.
_betacf = njit(cache=True)(getattr(betainc_cf, "py_func", betainc_cf))


# Gauss-Legendre rule of the far-tail quadrature (:func:`_log_far_tail`), on [-1, 1].
_GL_X, _GL_W = np.polynomial.legendre.leggauss(20)

MAX_PANELS = 1_000_000

# A tail computed as log1p(-e^{near}) keeps relative error ~1e-16 / tail: below this
# value the far tail is computed directly instead (:func:`log_beta_tails`).
FAR_TAIL = 1.0 / 64.0


LOG_2PI = 1.8378770664093453
STIRLING_MIN = 20.0  # Stirling's correction below is exact to ~1e-17 from here


# Stirling's correction lgamma(x) - ((x - 1/2) log x - x + log(2 pi) / 2) for x >= 20
# (series to x^-9, below 1e-17 from there), compiled from its one definition
_stirling_del = njit(cache=True)(stirling_tail)
_log1pmx_series = njit(cache=True)(log1pmx_series)


@njit(cache=True)
def log_beta_fn(a, b):  # type: ignore[no-untyped-def]
    """log B(a, b). With one parameter s < 20 and the other h >= 20, lgamma(h) -
    lgamma(h + s) is taken from Stirling's series as -(h - 1/2) log1p(s/h) - s log(h + s)
    + s + del(h) - del(h + s), without the cancellation of the lgamma sum (which lost
    ~1e-16 h log h); otherwise the lgamma sum (for both >= 20 the value itself is of
    size ~(a + b), and :func:`log_front` avoids it)."""
    lo, hi = min(a, b), max(a, b)
    if lo >= STIRLING_MIN or hi < STIRLING_MIN:
        return math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)
    s = a + b
    diff = -(hi - 0.5) * math.log1p(lo / hi) - lo * math.log(s) + lo
    return math.lgamma(lo) + diff + (_stirling_del(hi) - _stirling_del(s))


@njit(cache=True)
def _rlog1(e):  # type: ignore[no-untyped-def]
    """e - log(1 + e) (e > -1) without cancellation: minus the series
    :func:`~dpbayes.models.lgamma_differences.log1pmx_series` for |e| < 0.1."""
    if abs(e) >= 0.1:
        return e - math.log1p(e)
    return -_log1pmx_series(e)


@njit(cache=True)
def log_front(a, b, x, y, log_x, log_y, log_beta):  # type: ignore[no-untyped-def]
    """log(x^a y^b / B(a, b)), y = 1 - x. For a, b >= 20 as in TOMS 708's ``brcomp``:
    with x0 = a / (a + b) and lambda = a y - b x (:func:`beta_lambda`), a log(x/x0) +
    b log(y/y0) = -(a u + b v), u = e1 - log1p(e1) (:func:`_rlog1`), e1 = -lambda / a,
    v likewise with e2 = lambda / b, and log(x0^a y0^b / B(a, b)) = log(ab / (a + b)) / 2
    - log(2 pi) / 2 - (del(a) + del(b) - del(a + b)): no term of size a log x, whose
    rounding (~1e-16 a) made the tails of large-count rows inexact. Otherwise
    a log x + b log y - ``log_beta``."""
    if a < STIRLING_MIN or b < STIRLING_MIN:
        return a * log_x + b * log_y - log_beta
    lam = beta_lambda(a, b, x, y)
    u = _rlog1(-lam / a)
    v = _rlog1(lam / b)
    corr = _stirling_del(a) + _stirling_del(b) - _stirling_del(a + b)
    return -(a * u + b * v) + 0.5 * (math.log(a * b / (a + b)) - LOG_2PI) - corr


@njit(cache=True)
def _log_near_tail(a, b, x, y, log_x, log_y, log_beta):  # type: ignore[no-untyped-def]
    """log I_x(a, b) for x below the switch (a + 1) / (a + b + 2), by a continued
    fraction (where it converges fast): for a > 1 TOMS 708's ``bfrac``
    (:func:`_bfrac`), whose coefficients take x only as a factor and 1 + lambda, lambda
    = a - (a + b) x, from :func:`beta_lambda`; otherwise Numerical Recipes' ``betacf``.
    ``betacf`` starts from 1 - (a + b) x / (a + 1) = (1 + lambda) / (a + 1), which for a
    large a and x near 1 cancels: the rounding of x (1e-16) then cost a relative error
    ~1e-16 (a + 1) / (1 + lambda): 4e-9 for Beta(4.1e7, 6), 2e-6 for Beta(7.9e9, 2e-10).
    TOMS 708 calls ``bfrac`` for a, b > 1 only; for b <= 1 < a it is measured against
    mpmath (b from 1e-16 to 1, a to 1e10: below 2e-14), not taken from there."""
    front = log_front(a, b, x, y, log_x, log_y, log_beta)
    return min(front + _log_cf(a, b, x, y), 0.0)


@njit(cache=True)
def _log_cf(a, b, x, y):  # type: ignore[no-untyped-def]
    """log(I_x(a, b) B(a, b) / (x^a y^b)) for x below the switch: the continued fraction
    of :func:`_log_near_tail` (``bfrac`` for a > 1, else ``betacf`` / a)."""
    if a > 1.0:
        return math.log(_bfrac(a, b, x, y, beta_lambda(a, b, x, y)))
    return math.log(_betacf(a, b, x)) - math.log(a)


@njit(cache=True)
def _log_ratio(x, y, x0, y0):  # type: ignore[no-untyped-def]
    """(log(x / x0), log(y / y0)) for two points given as (x, 1 - x) pairs whose smaller
    members are exact: from the gap x - x0 taken between exact members (exact by Sterbenz
    where the points are within a factor 2, which is where the logs are small), so each
    log keeps its relative precision however close the points are."""
    if x <= 0.5 and x0 <= 0.5:
        gap = x - x0
    elif x > 0.5 and x0 > 0.5:
        gap = y0 - y
    elif x > 0.5:
        gap = (0.5 - x0) + (0.5 - y)
    else:
        gap = -((0.5 - x) + (0.5 - y0))
    return math.log1p(gap / x0), math.log1p(-gap / y0)


@njit(cache=True)
def log_near_tail_ratio(a, b, x, y, x0, y0):  # type: ignore[no-untyped-def]
    """log(I_x(a, b) / I_x0(a, b)) for x and x0 below the switch, without forming either
    tail: a log(x / x0) + b log(y / y0) (:func:`_log_ratio`) plus the difference of the
    continued fractions' logs. A log tail L is a double rounded by |L| 2^-53, which for a
    row far from the mass (L ~ -1e7) is ~1e-9; this ratio errs by ~1e-16 of itself."""
    lx, ly = _log_ratio(x, y, x0, y0)
    return a * lx + b * ly + (_log_cf(a, b, x, y) - _log_cf(a, b, x0, y0))


@njit(cache=True)
def _split(v):  # type: ignore[no-untyped-def]
    """Dekker's split of v into hi + lo, each with at most 26 significant bits."""
    c = 134217729.0 * v  # 2^27 + 1
    hi = c - (c - v)
    return hi, v - hi


@njit(cache=True)
def _two_prod(u, v):  # type: ignore[no-untyped-def]
    """(p, e) with p = fl(u v) and p + e = u v exactly (Dekker; no fused multiply-add)."""
    p = u * v
    uh, ul = _split(u)
    vh, vl = _split(v)
    return p, ((uh * vh - p) + uh * vl + ul * vh) + ul * vl


@njit(cache=True)
def beta_lambda(a, b, x, y):  # type: ignore[no-untyped-def]
    """lambda = a - (a + b) x = (a + b) y - b for the pair (x, y = 1 - x) whose smaller
    member is exact, from that member, with a + b and its product by it carried to twice
    the working precision (two-sum, two-product): relative error ~1e-16 even where lambda
    is small against a (x near the mean a / (a + b)), where a y - b x lost ~1e-16 a."""
    s = a + b
    e = (a - (s - (s - a))) + (b - (s - a))  # s + e = a + b exactly (Knuth's two-sum)
    if x <= y:
        p, q = _two_prod(s, x)
        return ((a - p) - q) - e * x
    p, q = _two_prod(s, y)
    return ((p - b) + q) + e * y


@njit(cache=True)
def _bfrac(a, b, x, y, lam):  # type: ignore[no-untyped-def]
    """The continued fraction r of I_x(a, b) = x^a y^b / B(a, b) r, for a, b > 1 and
    x below (a + 1) / (a + b + 2) (1 + lambda > 0 there: lambda >= (a - b) / (a + b +
    2) > -1): TOMS 708's ``bfrac`` (Didonato & Morris 1992), evaluated as its
    recurrence of numerators and denominators, rescaled each step; stops when a step
    changes r by at most 1e-16 r."""
    c = lam + 1.0
    c0 = b / a
    c1 = 1.0 / a + 1.0
    yp1 = y + 1.0
    n = 0.0
    p = 1.0
    s = a + 1.0
    an, bn, anp1, bnp1 = 0.0, 1.0, 1.0, c / c1
    r = c1 / c
    for _ in range(100000):
        n += 1.0
        t = n / a
        w = n * (b - n) * x
        e = a / s
        alpha = p * (p + c0) * e * e * (w * x)
        e = (t + 1.0) / (c1 + t + t)
        beta = n + w / s + e * (c + n * yp1)
        p = t + 1.0
        s += 2.0
        t = alpha * an + beta * anp1
        an, anp1 = anp1, t
        t = alpha * bn + beta * bnp1
        bn, bnp1 = bnp1, t
        r0 = r
        r = anp1 / bnp1
        if abs(r - r0) <= 1e-16 * r:
            break
        an /= bnp1
        bn /= bnp1
        anp1 = r
        bnp1 = 1.0
    return r


@njit(cache=True)
def log_quad(c, d, w0, w1):  # type: ignore[no-untyped-def]
    """log of the integral over [w0, w1] (0 < w0 <= w1 <= inf) of
    h(w) = exp((c - 1) log(1 - e^{-w}) - d w), c, d > 0: the Beta(a, b) density's kernel
    t^{a-1} (1 - t)^{b-1} dt in v = -log(1 - t) (c = a, d = b) or in u = -log t (c = b,
    d = a), the coordinates in which a tail piled against 0 or 1 is smooth.

    h is analytic in Re w > 0 (its singularities, from log(1 - e^{-w}), lie on Re w = 0)
    and the panels keep their distance: composite 20-point Gauss-Legendre on panels of
    width min(w / 2, 2, 2 / d), widened to w / 2 where (c - 1) e^{-w} <= 1 (there
    |1 - e^{-w}|^{c-1} stays bounded off the real axis); the sum stops early once the
    rest, at most e^{-d w} max(1, (1 - e^{-w})^{c-1}) / d, is below 1e-18 of it."""
    if not w1 > w0:
        return -math.inf
    total = -math.inf
    w = w0
    knee = math.log(c - 1.0) if c > 2.0 else 0.0
    for _ in range(MAX_PANELS):  # a guard only: the stop rule ends far earlier
        if not w < w1:
            break
        width = 0.5 * w if w > knee else min(0.5 * w, 2.0)
        width = min(width, 2.0 / d, w1 - w)
        half = 0.5 * width
        mid = w + half
        top = -math.inf
        acc = 0.0
        for j in range(_GL_X.shape[0]):
            t = mid + half * _GL_X[j]
            g = (c - 1.0) * math.log1p(-math.exp(-t)) - d * t + math.log(half * _GL_W[j])
            if g > top:
                acc = acc * math.exp(top - g) + 1.0
                top = g
            else:
                acc += math.exp(g - top)
        total = log_add_exp(total, top + math.log(acc))
        w += width
        rest = -d * w - math.log(d) + max(0.0, (c - 1.0) * math.log1p(-math.exp(-w)))
        if rest < total - 41.5:  # e^-41.5 < 1e-18
            break
    return total


@njit(cache=True)
def _switch_pair(a, b):  # type: ignore[no-untyped-def]
    """The switch s = (a + 1) / (a + b + 2) as a consistent pair (x, y = 1 - x, log x,
    log y) whose smaller member is exact (rounded once) and the other derived from it:
    s and 1 - s rounded separately disagree by up to 1.1e-16, and the log of the member
    near 1 (~1e-9 for a row with counts near 1e9) would carry a relative error ~1e-7
    into a log x or into the split of an integral."""
    if a <= b:
        xs = (a + 1.0) / (a + b + 2.0)
        return xs, 1.0 - xs, math.log(xs), math.log1p(-xs)
    ys = (b + 1.0) / (a + b + 2.0)
    return 1.0 - ys, ys, math.log1p(-ys), math.log(ys)


@njit(cache=True)
def _vs_switch(a, b, x, y):  # type: ignore[no-untyped-def]
    """-1, 0 or 1 as the point (x, y = 1 - x) lies below, at or above the switch pair of
    :func:`_switch_pair`, compared through their exact members (x with xs for a <= b,
    where xs <= 1/2; y with ys otherwise): a rounded x = 1 - y equals the rounded switch
    for every y within 1.1e-16 of ys, and a point below the switch taken as above it
    had the mass between them dropped from its far tail (an empty quadrature; 7.7e-9
    of the restricted cdf at Beta(1.07e8, 1.75e-4) with its upper end at the switch)."""
    if a <= b:
        xs = (a + 1.0) / (a + b + 2.0)
        return -1 if x < xs else (1 if x > xs else 0)
    ys = (b + 1.0) / (a + b + 2.0)
    return -1 if y > ys else (1 if y < ys else 0)


@njit(cache=True)
def log_mass_between(a, b, x0, y0, x1, y1, log_beta):  # type: ignore[no-untyped-def]
    """log P(x0 <= X <= x1) for X ~ Beta(a, b), each end given as (x, 1 - x) with the
    smaller exact, by :func:`log_quad` (no cancellation: a sum of positive terms), split
    at the switch s = (a + 1) / (a + b + 2): [x0, s] in u = -log t, [s, x1] in v =
    -log(1 - t). For densities that are smooth on the log scales (small a or b); peaked
    ones are the continued fraction's domain."""
    _, _, lxs, lys = _switch_pair(a, b)
    lu0 = -(math.log(x0) if x0 <= y0 else math.log1p(-y0))
    lu1 = -(math.log(x1) if x1 <= y1 else math.log1p(-y1))
    lv0 = -(math.log(y0) if y0 <= x0 else math.log1p(-x0))
    lv1 = -(math.log(y1) if y1 <= x1 else math.log1p(-x1))
    us, vs = -lxs, -lys
    left = log_quad(b, a, max(lu1, us), lu0) if _vs_switch(a, b, x0, y0) < 0 else -math.inf
    right = log_quad(a, b, max(lv0, vs), lv1) if _vs_switch(a, b, x1, y1) > 0 else -math.inf
    return log_add_exp(left, right) - log_beta


@njit(cache=True)
def _log_far_tail(a, b, log_y, log_beta):  # type: ignore[no-untyped-def]
    """log I_x(a, b) for x = 1 - e^{log_y} above the switch s = (a + 1) / (a + b + 2),
    as a sum of positive terms: I_s(a, b) (continued fraction at s) plus the mass of
    [s, x] (:func:`log_quad` in v = -log(1 - t), where a tail piled against 1 is
    smooth)."""
    xs, ys, lxs, lys = _switch_pair(a, b)
    near = _log_near_tail(a, b, xs, ys, lxs, lys, log_beta)
    far = log_quad(a, b, -lys, -log_y) - log_beta
    return min(log_add_exp(near, far), 0.0)


@njit(cache=True)
def log_add_exp(x, y):  # type: ignore[no-untyped-def]
    """log(e^x + e^y)."""
    top = max(x, y)
    if top == -math.inf:
        return top
    return top + math.log1p(math.exp(min(x, y) - top))


@njit(cache=True)
def log_beta_tails(a, b, x, y):  # type: ignore[no-untyped-def]
    """(log I_x(a, b), log(1 - I_x(a, b))), the log cdf and log survival function of
    Beta(a, b) at x, given x and y = 1 - x with the smaller of the two exact (so that x
    near 0 and x near 1 both keep their precision), with no underflow: the continued
    fraction of the tail on x's side of (a + 1) / (a + b + 2) (relative error ~1e-14
    however small that tail), log1p of minus it for the other, unless the other is below
    ``FAR_TAIL`` (a small a or b piles the mass on x's side): then the other tail is
    computed directly (:func:`_log_far_tail`), so both tails are relative-exact."""
    if x <= 0.0:
        return -math.inf, 0.0
    if y <= 0.0:
        return 0.0, -math.inf
    log_x = math.log(x) if x <= y else math.log1p(-y)
    log_y = math.log(y) if y <= x else math.log1p(-x)
    log_beta = log_beta_fn(a, b)
    if _vs_switch(a, b, x, y) < 0:
        low = _log_near_tail(a, b, x, y, log_x, log_y, log_beta)
        if low > math.log1p(-FAR_TAIL):
            return low, _log_far_tail(b, a, log_x, log_beta)
        return low, math.log1p(-math.exp(low))
    high = _log_near_tail(b, a, y, x, log_y, log_x, log_beta)
    if high > math.log1p(-FAR_TAIL):
        return _log_far_tail(a, b, log_y, log_beta), high
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
