"""Compiled mixture likelihoods with the labels summed out, and label draws given P (numba).

For a discrete P = sum_k w_k delta_{y_k} the likelihood of the privatised data with the
labels summed out is prod_i m_i, m_i = sum_k w_k Q(z_i | y_k). The label-integrated moves
of :mod:`dpbayes.nonparametric.moves` evaluate it many times per sweep.

Laplace mechanism (u_i = clip(z_i), Q(z_i | y) proportional to exp(-|u_i - clip(y)| / b)):
with the atoms sorted by clip(y), exp(-|u - y|/b) = e^{-u/b} e^{y/b} for y <= u and
e^{u/b} e^{-y/b} for y > u, so m_i = e^{-u_i/b} A(u_i) + e^{u_i/b} B(u_i) with prefix sums
A and suffix sums B over the atoms: O(n + T) for all i instead of O(n T), and a label
draw is a binary search in one of the two sums.

Gaussian mechanism: Q(z | y) proportional to exp(-(z - clip(y))^2 / 2 tau^2); the mixture
by a chunked Taylor series in z (below), the label draws O(n T).

No randomness is drawn here: the uniforms are arguments.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

__all__ = [
    "gauss_column",
    "gauss_labels",
    "gauss_mix",
    "gauss_mix_atoms",
    "laplace_column",
    "laplace_labels",
    "laplace_mix",
    "laplace_mix_atoms",
    "laplace_shift",
    "sum_log",
    "sum_log_shift",
    "sum_log_update",
]


@njit(cache=True)
def _prefix(y, w, b):  # type: ignore[no-untyped-def]
    """Prefix sums of w e^{y/b} and suffix sums of w e^{-y/b} over atoms sorted by y."""
    t = y.shape[0]
    pa = np.zeros(t + 1)
    sb = np.zeros(t + 1)
    for k in range(t):
        pa[k + 1] = pa[k] + w[k] * math.exp(y[k] / b)
    for k in range(t - 1, -1, -1):
        sb[k] = sb[k + 1] + w[k] * math.exp(-y[k] / b)
    return pa, sb


@njit(cache=True)
def laplace_mix(u, eu, emu, y, w, b, out):  # type: ignore[no-untyped-def]
    """m_i = sum_k w_k exp(-|u_i - y_k| / b) for increasing u (eu = e^{u/b}, emu = e^{-u/b})
    and atoms y increasing (clipped). Written into ``out``."""
    pa, sb = _prefix(y, w, b)
    t = y.shape[0]
    p = 0
    for i in range(u.shape[0]):
        while p < t and y[p] <= u[i]:
            p += 1
        out[i] = emu[i] * pa[p] + eu[i] * sb[p]
    return out


@njit(cache=True)
def _sorted_clipped(atoms, w, r):  # type: ignore[no-untyped-def]
    """Atoms clipped to [-r, r] and their weights, in increasing (stable) order."""
    y = np.empty(atoms.shape[0])
    for k in range(atoms.shape[0]):
        y[k] = min(max(atoms[k], -r), r)
    o = np.argsort(y, kind="mergesort")
    return y[o], w[o]


@njit(cache=True)
def laplace_mix_atoms(u, eu, emu, atoms, w, r, b, out):  # type: ignore[no-untyped-def]
    """:func:`laplace_mix` for atoms in any order, not yet clipped."""
    y, ws = _sorted_clipped(atoms, w, r)
    return laplace_mix(u, eu, emu, y, ws, b, out)


@njit(cache=True)
def laplace_column(u, eu, emu, y, b, out):  # type: ignore[no-untyped-def]
    """exp(-|u_i - y| / b) for one (clipped) atom y, all i (``u`` increasing)."""
    ep = math.exp(y / b)
    en = math.exp(-y / b)
    cut = np.searchsorted(u, y)  # first i with u_i >= y
    for i in range(cut):
        out[i] = eu[i] * en
    for i in range(cut, u.shape[0]):
        out[i] = emu[i] * ep
    return out


@njit(cache=True)
def laplace_labels(u, eu, emu, y, w, b, uniforms, labels):  # type: ignore[no-untyped-def]
    """Draw c_i with P(c_i = k) proportional to w_k exp(-|u_i - y_k| / b); atoms sorted by y,
    ``labels`` receives indices into that sorted order."""
    pa, sb = _prefix(y, w, b)
    t = y.shape[0]
    p = 0
    for i in range(u.shape[0]):
        while p < t and y[p] <= u[i]:
            p += 1
        left = emu[i] * pa[p]
        right = eu[i] * sb[p]
        v = uniforms[i] * (left + right)
        if (v < left and p > 0) or p == t:  # atoms 0..p-1: first k with pa[k+1] > v e^{u/b}
            target = v / emu[i]
            lo, hi = 0, p - 1
            while lo < hi:
                mid = (lo + hi) // 2
                if pa[mid + 1] > target:
                    hi = mid
                else:
                    lo = mid + 1
        else:  # atoms p..t-1: first k with sb[p] - sb[k+1] > (v - left) e^{-u/b}
            target = sb[p] - (v - left) / eu[i]
            lo, hi = p, t - 1
            while lo < hi:
                mid = (lo + hi) // 2
                if sb[mid + 1] < target:
                    hi = mid
                else:
                    lo = mid + 1
        labels[i] = lo
    return labels


# Gaussian mechanism. With s_i = z_i / tau^2 and u_i = clip(z_i), exp(-(z_i - y)^2 / 2 tau^2)
# is proportional in i to q_i(y) = exp(s_i (y - u_i) - y^2 / 2 tau^2) <= exp(r^2 / tau^2) for
# y in [-r, r] (no overflow). The mixture sum_k w_k q_i(y_k) is computed by a Taylor series
# in s around the centre s0 of a chunk of the sorted s's with |s - s0| r <= 1/2:
#   sum_k v_k e^{s y_k} = sum_j (s - s0)^j / j! sum_k v_k e^{s0 y_k} y_k^j,
# v_k = w_k e^{-y_k^2 / 2 tau^2}; 18 terms, truncation error below 0.5^18 / 18! < 1e-21
# relative: O(n J + chunks T J) instead of O(n T).
GAUSS_TERMS = 18


@njit(cache=True)
def gauss_mix(s, u, y, w, tau, r, out):  # type: ignore[no-untyped-def]
    """m_i = sum_k w_k q_i(y_k) (see above) for increasing s = z / tau^2, y clipped."""
    n = s.shape[0]
    t = y.shape[0]
    jt = GAUSS_TERMS
    half = 0.5 / (r if r > 0 else 1.0)
    v = np.empty(t)
    for k in range(t):
        v[k] = w[k] * math.exp(-0.5 * y[k] * y[k] / (tau * tau))
    mom = np.empty(jt)
    i = 0
    while i < n:
        s0 = s[i] + half  # chunk covers [s_i, s_i + 1/r]: |s - s0| r <= 1/2
        for j in range(jt):
            mom[j] = 0.0
        for k in range(t):
            e = v[k] * math.exp(s0 * y[k])
            p = 1.0
            for j in range(jt):
                mom[j] += e * p
                p *= y[k] / (j + 1.0)
        while i < n and s[i] <= s0 + half:
            d = s[i] - s0
            acc = 0.0
            p = 1.0
            for j in range(jt):
                acc += p * mom[j]
                p *= d
            out[i] = acc * math.exp(-s[i] * u[i])
            i += 1
    return out


@njit(cache=True)
def gauss_mix_atoms(s, u, atoms, w, tau, r, out):  # type: ignore[no-untyped-def]
    """:func:`gauss_mix` for atoms in any order, not yet clipped."""
    y, ws = _sorted_clipped(atoms, w, r)
    return gauss_mix(s, u, y, ws, tau, r, out)


@njit(cache=True)
def gauss_column(s, u, y, tau, out):  # type: ignore[no-untyped-def]
    """q_i(y) for one clipped atom y, all i."""
    c = 0.5 * y * y / (tau * tau)
    for i in range(s.shape[0]):
        out[i] = math.exp(s[i] * (y - u[i]) - c)
    return out


@njit(cache=True)
def _first_above(cum, size, target):  # type: ignore[no-untyped-def]
    """The first k < size with cum[k] > target (cum non-decreasing), else size - 1."""
    lo, hi = 0, size - 1
    while lo < hi:
        mid = (lo + hi) // 2
        if cum[mid] > target:
            hi = mid
        else:
            lo = mid + 1
    return lo


#: The label draws given P (Gaussian) weigh the atoms that carry all but this share of P's
#: mass exactly for every observation, and the rest only through a bound (see below).
LIGHT_MASS = 1e-4


@njit(cache=True)
def gauss_labels(s, u, y, w, tau, uniforms, labels, light_mass=LIGHT_MASS):  # type: ignore[no-untyped-def]
    """Draw c_i with P(c_i = k) proportional to o_ik = w_k q_i(y_k), one uniform each.

    The atoms split into a heavy set H (largest weights, all but ``light_mass`` of the
    total) and the light rest L, of weight W_L. With s_i = z_i / tau^2 and u_i = clip(z_i),
    q_i(y) / w-free = exp((z_i y - z_i u_i - y^2 / 2) / tau^2) is largest at y = clip(z_i):
    on the light atoms' range [a, b] at y* = clip(u_i, a, b), so S_L = sum_L o_ik <=
    B_i = W_L q_i(y*). With S_H = sum_H o_ik (|H| terms) and c = S_H / (S_H + B_i):

    * U < c: k from H with probability o_ik / S_H (inverse CDF at U S_H / c);
    * else (probability about W_L): every o_ik, S = S_H + S_L, and k drawn with the
      weights o_ik (1/S - 1/(S_H + B_i)) on H and o_ik / S on L (total 1 - c) at
      (U - c) / (1 - c).

    Then P(k) = c o_ik / S_H + o_ik (1/S - 1/(S_H + B_i)) = o_ik / S on H and o_ik / S on
    L: the exact categorical, in O(|H|) per observation but for a share ~W_L of them
    (B_i is inflated by 1e-12 relative, so that rounding cannot make S_L exceed it).
    """
    t = y.shape[0]
    lw = np.empty(t)
    for k in range(t):
        lw[k] = math.log(max(w[k], 1e-300)) - 0.5 * y[k] * y[k] / (tau * tau)
    order = np.argsort(-w, kind="mergesort")
    total = 0.0
    for k in range(t):
        total += w[k]
    light = np.zeros(t, dtype=np.bool_)
    rest = total
    nh = 0
    while nh < t and rest > light_mass * total:
        rest -= w[order[nh]]
        nh += 1
    heavy = np.sort(order[:nh])
    w_light = 0.0
    a, b = np.inf, -np.inf
    for q in range(nh, t):
        k = order[q]
        light[k] = True
        w_light += w[k]
        a = min(a, y[k])
        b = max(b, y[k])
    cum = np.empty(t)
    for i in range(s.shape[0]):
        acc = 0.0
        for h in range(nh):
            k = heavy[h]
            acc += math.exp(lw[k] + s[i] * (y[k] - u[i]))
            cum[h] = acc
        bound = 0.0
        if w_light > 0.0:
            ys = min(max(u[i], a), b)
            bound = w_light * math.exp(s[i] * (ys - u[i]) - 0.5 * ys * ys / (tau * tau))
            bound *= 1.0 + 1e-12
        c = acc / (acc + bound) if acc + bound > 0.0 else 0.0
        v = uniforms[i]
        if v < c:
            labels[i] = heavy[_first_above(cum, nh, v / c * acc)]
            continue
        # rare (about W_L of the observations): every weight, relative to the largest
        # (o_k e^-top), so that weights that all underflow still give the exact law
        o = np.empty(t)
        top = -np.inf
        for k in range(t):
            o[k] = lw[k] + s[i] * (y[k] - u[i])
            top = max(top, o[k])
        tot = 0.0
        for k in range(t):
            o[k] = math.exp(o[k] - top)
            tot += o[k]
        # 1/S - 1/(S_H + B) on the scale of o: 1/tot - e^top / (acc + bound), and 1/tot
        # when c = 0 (nothing was drawn from H alone)
        fh = 1.0 / tot
        if acc + bound > 0.0:
            fh = max(fh - math.exp(top - math.log(acc + bound)), 0.0)
        run = 0.0
        for k in range(t):
            run += o[k] * (1.0 / tot if light[k] else fh)
            cum[k] = run
        labels[i] = _first_above(cum, t, (v - c) / (1.0 - c) * run)
    return labels


# The sums of logs below take one log per block of 16 terms (a product in four independent
# lanes; a block with a term outside [1e-19, 1e19], or <= 0, or nan, is logged term by
# term): the log is most of the cost of an evaluation.


#: Terms per product in :func:`_sum_log_values`.
LOG_BLOCK = 16
#: A block is logged as one product when all its terms lie in [1/TERM_RANGE, TERM_RANGE]:
#: then every partial product of at most 16 terms lies in [1e-304, 1e304], inside the
#: normal doubles, so each of the 15 multiplications rounds by at most 2^-53 relative.
TERM_RANGE = 1e19


@njit(cache=True)
def _sum_log_values(v, cnt, tied):  # type: ignore[no-untyped-def]
    """sum_i cnt_i log v_i (-inf if some v_i <= 0), with one log per LOG_BLOCK terms.

    Each block's product is logged at once when all its terms lie in
    [1/TERM_RANGE, TERM_RANGE] (15 roundings of 1.1e-16 relative: the error of the
    per-term logs), else its terms one by one (a term <= 0 or nan gives -inf). The product
    is taken in four lanes of four terms, so that the multiplications do not wait on one
    another; a nan term makes the product nan, which fails the check ``p > 0`` whatever the
    lanes' min and max saw. The few cnt_i != 1 (values tied, or collapsed at +-r), listed
    in ``tied``, add (cnt_i - 1) log v_i in a second pass.
    """
    n = v.shape[0]
    nb = n // LOG_BLOCK
    lo_ok = 1.0 / TERM_RANGE
    acc = 0.0
    for bl in range(nb):
        i0 = bl * LOG_BLOCK
        p0 = 1.0
        p1 = 1.0
        p2 = 1.0
        p3 = 1.0
        lo0 = np.inf
        lo1 = np.inf
        hi0 = 0.0
        hi1 = 0.0
        for j in range(0, LOG_BLOCK, 4):
            a = v[i0 + j]
            b = v[i0 + j + 1]
            c = v[i0 + j + 2]
            d = v[i0 + j + 3]
            p0 *= a
            p1 *= b
            p2 *= c
            p3 *= d
            lo0 = min(lo0, min(a, b))
            lo1 = min(lo1, min(c, d))
            hi0 = max(hi0, max(a, b))
            hi1 = max(hi1, max(c, d))
        p = (p0 * p1) * (p2 * p3)
        if min(lo0, lo1) >= lo_ok and max(hi0, hi1) <= TERM_RANGE and p > 0.0:
            acc += math.log(p)
            continue
        for j in range(LOG_BLOCK):
            if not v[i0 + j] > 0.0:
                return -np.inf
            acc += math.log(v[i0 + j])
    for i in range(nb * LOG_BLOCK, n):
        if not v[i] > 0.0:
            return -np.inf
        acc += math.log(v[i])
    for i in tied:
        acc += (cnt[i] - 1.0) * math.log(v[i])
    return acc


@njit(cache=True)
def sum_log(m, cnt, tied):  # type: ignore[no-untyped-def]
    """sum_i cnt_i log m_i (-inf if some m_i <= 0); ``tied``: the i with cnt_i != 1."""
    return _sum_log_values(m, cnt, tied)


@njit(cache=True)
def sum_log_update(m, cnt, tied, delta, col):  # type: ignore[no-untyped-def]
    """sum_i cnt_i log(m_i + delta * col_i) (-inf if a term is <= 0)."""
    v = np.empty(m.shape[0])
    for i in range(m.shape[0]):
        v[i] = m[i] + delta * col[i]
    return _sum_log_values(v, cnt, tied)


@njit(cache=True)
def sum_log_shift(m, cnt, tied, wk, old, new):  # type: ignore[no-untyped-def]
    """sum_i cnt_i log(m_i + wk (new_i - old_i)): one atom of weight wk moved (terms
    clamped at 1e-300)."""
    v = np.empty(m.shape[0])
    for i in range(m.shape[0]):
        v[i] = max(m[i] + wk * (new[i] - old[i]), 1e-300)
    return _sum_log_values(v, cnt, tied)


@njit(cache=True)
def laplace_shift(u, eu, emu, cnt, tied, m, wk, old, y, b):  # type: ignore[no-untyped-def]
    """sum_i cnt_i log(m_i + wk (exp(-|u_i - y|/b) - old_i)): the Laplace atom moved to y
    (terms clamped at 1e-300). ``u`` increasing: the i with u_i < y come first, so the two
    sides of y are two loops without a branch. Every term lies in [e^{-eps}, 1] (eps =
    2r/b; a mixture of relative likelihoods): from eps of about 44 on, a block with a term
    below 1e-19 is logged term by term."""
    ep = math.exp(y / b)
    en = math.exp(-y / b)
    n = m.shape[0]
    cut = np.searchsorted(u, y)  # first i with u_i >= y
    v = np.empty(n)
    for i in range(cut):
        v[i] = max(m[i] + wk * (eu[i] * en - old[i]), 1e-300)
    for i in range(cut, n):
        v[i] = max(m[i] + wk * (emu[i] * ep - old[i]), 1e-300)
    return _sum_log_values(v, cnt, tied)
