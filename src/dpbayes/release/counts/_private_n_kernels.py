"""Compiled (numba) kernels of the noise-aware count posteriors with a private n.

:mod:`.private_n` writes the posterior of a proportion as the finite mixture

    sum_{x, y} p(x) q(y) g(x + y) Beta(theta; a + x, b + y)

over a window of true counts x (the category's) and y (the others'), with p, q, g >= 0
given as arrays (x = x0 + i, y = y0 + j, N = x0 + y0 + k). Grouped by the total N, each
slice is a "ladder" Beta(a + x, s - a - x), s = a + b + N, whose regularised incomplete
betas obey I_t(a + x + 1, s - a - x - 1) = I_t(a + x, s - a - x) - T_N(x) with

    T_N(x) = t^(a + x) (1 - t)^(s - a - x - 1) Gamma(s) / (Gamma(a + x + 1) Gamma(s - a - x)),

a binomial-like pmf in x (mode (s - 1) t - a); the component's density is
T_N(x) (a + x) / t. So the cdf of a slice is one continued fraction at the start of the
window where T_N is not negligible (9 sds + 20 either side: below 1e-17 of its peak), a recursion
(one multiply per term) across it, and two plain sums of weights outside it: below the
window every component's cdf is the start value (~1), above it the end value (~0).
The sums below the window are kept per N between calls and moved by the change of the
window's start (``cdf_pdf``'s ``lstart``/``lsum``), so the Newton steps of a quantile,
which move t a little, cost O(window) per slice, not O(slice).

``betainc_cf`` is the continued fraction of :mod:`._kernels`, compiled here.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from dpbayes.release.counts._kernels import betainc_cf

__all__ = ["cdf_pdf", "convolve", "quantiles", "slice_moments"]

# (the coin's ``kernels()`` may already have replaced it by its compiled version)
_cf = njit(cache=True)(getattr(betainc_cf, "py_func", betainc_cf))


@njit(cache=True)
def _betainc(a: float, b: float, x: float) -> float:
    """Regularised incomplete beta I_x(a, b) through the shared continued fraction."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    lbt = (
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(lbt) * _cf(a, b, x) / a
    return 1.0 - math.exp(lbt) * _cf(b, a, 1.0 - x) / b


@njit(cache=True)
def convolve(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Plain (linear-space) full convolution of two non-negative arrays."""
    out = np.zeros(u.size + v.size - 1)
    for i in range(u.size):
        ui = u[i]
        if ui == 0.0:
            continue
        for j in range(v.size):
            out[i + j] += ui * v[j]
    return out


@njit(cache=True)
def slice_moments(p: np.ndarray, q: np.ndarray, x0: int) -> np.ndarray:
    """Per total N (index k = N - x0 - y0): sum p q, sum x p q and sum x^2 p q over the
    slice x + y = N; shape (3, p.size + q.size - 1)."""
    out = np.zeros((3, p.size + q.size - 1))
    for i in range(p.size):
        pi = p[i]
        if pi == 0.0:
            continue
        x = float(x0 + i)
        for j in range(q.size):
            w = pi * q[j]
            out[0, i + j] += w
            out[1, i + j] += w * x
            out[2, i + j] += w * x * x
    return out


@njit(cache=True)
def _slice_bounds(k: int, kx: int, ky: int) -> tuple[int, int]:
    """First and last index i of p in the slice i + j = k (0 <= j < ky)."""
    return max(0, k - ky + 1), min(kx - 1, k)


@njit(cache=True)
def cdf_pdf(
    t: float,
    p: np.ndarray,
    q: np.ndarray,
    g: np.ndarray,
    u0: np.ndarray,
    a: float,
    b: float,
    x0: int,
    y0: int,
    lstart: np.ndarray,
    lsum: np.ndarray,
    inv: np.ndarray,
    with_cdf: bool = True,
) -> tuple[float, float]:
    """(cdf, pdf) at t in (0, 1) of the mixture (module docstring); g the slice weights
    (normalised so that sum_k g_k u0_k = 1), u0 the slice masses. ``lstart[k]`` and
    ``lsum[k]`` (sum of p q below index lstart[k] in slice k) are updated in place;
    ``inv[i]`` = 1 / (a + x0 + i + 1) (the recursion then has no division on its chain).
    With ``with_cdf`` False the cdf is not computed (returned as nan): no incomplete beta
    per slice and no running sums, the same pdf."""
    kx, ky = p.size, q.size
    lt, l1t = math.log(t), math.log1p(-t)
    r = t / (1.0 - t)
    cdf = 0.0
    pdf = 0.0
    for k in range(g.size):
        gk = g[k]
        if gk == 0.0 or u0[k] == 0.0:
            continue
        i_lo, i_hi = _slice_bounds(k, kx, ky)
        n_tot = x0 + y0 + k
        s = a + b + n_tot
        mode = (s - 1.0) * t - a - x0  # in index units
        half = 9.0 * math.sqrt(max((s - 1.0) * t * (1.0 - t), 0.0)) + 20.0
        lo = min(max(int(mode - half), i_lo), i_hi)
        hi = min(max(int(mode + half) + 1, lo), i_hi)
        xa = a + x0 + lo  # a + x at the window's start
        ib = s - xa  # b + y there
        # T(x) at the window's start, then the recursion T(x + 1) = T(x) r (b + y - 1)/(a + x + 1)
        tx = math.exp(
            xa * lt + (ib - 1.0) * l1t + math.lgamma(s) - math.lgamma(xa + 1.0) - math.lgamma(ib)
        )
        if not with_cdf:
            dens = 0.0
            for i in range(lo, hi + 1):
                xi = a + x0 + i
                dens += p[i] * q[k - i] * tx * xi
                if i < hi:
                    tx *= r * (s - xi - 1.0) * inv[i]
            pdf += gk * dens / t
            continue
        # move the running sum below the window from lstart[k] to lo
        cur = lstart[k]
        acc = lsum[k]
        if cur < i_lo or cur > i_hi + 1:
            cur = i_lo
            acc = 0.0
        if abs(lo - cur) > lo - i_lo:  # cheaper from scratch
            cur = i_lo
            acc = 0.0
        while cur < lo:
            acc += p[cur] * q[k - cur]
            cur += 1
        while cur > lo:
            cur -= 1
            acc -= p[cur] * q[k - cur]
        if acc < 0.0:
            acc = 0.0
        lstart[k] = lo
        lsum[k] = acc
        ival = _betainc(xa, ib, t)
        below = acc * ival
        inside = 0.0
        dens = 0.0
        wsum = 0.0
        for i in range(lo, hi + 1):
            w = p[i] * q[k - i]
            xi = a + x0 + i
            inside += w * ival
            dens += w * tx * xi
            wsum += w
            if i < hi:
                ival -= tx
                tx *= r * (s - xi - 1.0) * inv[i]
        above = u0[k] - acc - wsum
        if above < 0.0:
            above = 0.0
        if ival < 0.0:
            ival = 0.0
        cdf += gk * (below + inside + above * ival)
        pdf += gk * dens / t
    if not with_cdf:
        return math.nan, max(pdf, 0.0)
    return min(max(cdf, 0.0), 1.0), max(pdf, 0.0)


@njit(cache=True)
def quantiles(
    qs: np.ndarray,
    starts: np.ndarray,
    sd: float,
    p: np.ndarray,
    q: np.ndarray,
    g: np.ndarray,
    u0: np.ndarray,
    a: float,
    b: float,
    x0: int,
    y0: int,
    lstart: np.ndarray,
    lsum: np.ndarray,
    inv: np.ndarray,
) -> np.ndarray:
    """Quantiles at probabilities ``qs`` in (0, 1): Newton steps from ``starts``,
    safeguarded by bisection on [0, 1] (a Newton step is taken only inside the bracket and
    while it at least halves the cdf's error); stop once a Newton step is below 3e-5 sd and
    below the previous one (converging: the error after a Newton step of size h is
    ~ h^2 / sd, ~1e-9 sd; far from the root the steps grow), the cdf is within
    1e-14 of the target, or the bracket is below 1e-15."""
    out = np.empty(qs.size)
    tol = 3e-5 * sd
    for n in range(qs.size):
        target = qs[n]
        lo, hi = 0.0, 1.0
        t = min(max(starts[n], 1e-300), 1.0 - 1e-16)
        prev = math.inf
        last = 0.0
        for _ in range(300):
            f, d = cdf_pdf(t, p, q, g, u0, a, b, x0, y0, lstart, lsum, inv)
            err = abs(f - target)
            if f < target:
                lo = t
            else:
                hi = t
            if err < 1e-14 or hi - lo < 1e-15:
                break
            new = t - (f - target) / d if d > 0.0 else -1.0
            newton = lo < new < hi and err < 0.5 * prev
            if not newton:
                new = 0.5 * (lo + hi)
            prev = err
            step = abs(new - t)
            t = new
            if newton and step < tol and step <= last:
                break
            last = step if newton else 0.0
        out[n] = t
    return out
