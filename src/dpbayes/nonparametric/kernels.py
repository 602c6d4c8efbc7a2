"""Compiled inner loops of the Dirichlet-process-mixture Gibbs sampler (numba).

No randomness is drawn here: every kernel receives the uniforms / Gumbels it needs,
drawn beforehand from the chain's numpy Generator (``dpbayes.privacy.noise``).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from dpbayes.nonparametric.kernels_truncnorm import one_observation_draw

__all__ = [
    "cdf_draws",
    "compact",
    "group_by_label",
    "label_sweep",
    "laplace_intervals",
    "laplace_label_sweep",
    "quantile_draws",
    "segment_logsumexp",
    "smoothed_density_draws",
]


@njit(cache=True)
def label_sweep(i0, lik, lik_aux, labels, counts, alpha_m, uniforms, logscale, algorithm2):  # type: ignore[no-untyped-def]
    """Neal (2000) algorithm 8 (or 2): Gibbs update of the labels i0, i0+1, ... in turn.

    ``lik[i, k]`` = Q(z_i | phi_k) up to a factor depending on i only (or its log when
    ``logscale``) for the cluster slots, ``lik_aux[i, j]`` the same for the m auxiliary
    values of observation i (fresh draws from P0). A slot with ``counts == 0`` is
    empty. When observation i chooses a fresh auxiliary value the kernel stops and
    returns ``(i, j, slot)``: the caller stores the new value in ``slot`` (or, if
    ``slot == -1``, in a new slot it creates), fills its column of ``lik`` and calls
    again with ``i0 = i + 1``. Returns ``(n, -1, -1)`` when all labels are updated.

    With ``algorithm2`` (m = 1), ``lik_aux[i, 0]`` is the prior predictive
    integral Q(z_i | x) P0(dx) and a new cluster's value is drawn by the caller from
    its posterior given z_i alone (Neal's algorithm 2); a singleton is then always
    removed before its label is drawn.
    """
    n, kcap = lik.shape
    m = lik_aux.shape[1]
    w = np.empty(kcap + m)
    for i in range(i0, n):
        k_old = labels[i]
        counts[k_old] -= 1
        single = counts[k_old] == 0
        mx = 0.0
        if logscale:
            mx = -np.inf
            for k in range(kcap):
                if counts[k] > 0 and lik[i, k] > mx:
                    mx = lik[i, k]
            for j in range(m):
                v = lik[i, k_old] if (single and j == 0 and not algorithm2) else lik_aux[i, j]
                if v > mx:
                    mx = v
        total = 0.0
        for k in range(kcap):
            c = counts[k]
            p = 0.0
            if c > 0:
                p = c * (math.exp(lik[i, k] - mx) if logscale else lik[i, k])
            w[k] = p
            total += p
        for j in range(m):
            v = lik[i, k_old] if (single and j == 0 and not algorithm2) else lik_aux[i, j]
            p = alpha_m * (math.exp(v - mx) if logscale else v)
            w[kcap + j] = p
            total += p
        t = uniforms[i] * total
        choice = kcap + m - 1
        acc = 0.0
        for q in range(kcap + m):
            acc += w[q]
            if t < acc and w[q] > 0.0:
                choice = q
                break
        if choice < kcap:
            labels[i] = choice
            counts[choice] += 1
            continue
        j = choice - kcap
        if single and j == 0 and not algorithm2:  # the singleton keeps its own value
            counts[k_old] = 1
            continue
        if single:
            labels[i] = k_old
            counts[k_old] = 1
            return i, j, k_old
        for k in range(kcap):
            if counts[k] == 0:
                labels[i] = k
                counts[k] = 1
                return i, j, k
        return i, j, -1
    return n, -1, -1


@njit(cache=True)
def group_by_label(labels, k):  # type: ignore[no-untyped-def]
    """Counting sort: ``order`` lists observations cluster by cluster, keeping their order."""
    n = labels.shape[0]
    starts = np.zeros(k + 1, dtype=np.int64)
    for i in range(n):
        starts[labels[i] + 1] += 1
    for c in range(k):
        starts[c + 1] += starts[c]
    pos = starts[:-1].copy()
    order = np.empty(n, dtype=np.int64)
    for i in range(n):
        c = labels[i]
        order[pos[c]] = i
        pos[c] += 1
    return order, starts


@njit(cache=True)
def laplace_intervals(z, order, starts, b, r, mu, s, tails):  # type: ignore[no-untyped-def]
    """Pieces of the Appendix A conditional for every cluster (Laplace mechanism, clipping).

    For cluster k with increasing Z's w_1..w_m and x in an interval between consecutive
    breakpoints (-r, the w's inside (-r, r), r), with a = #{w < x}, S_- and S_+ the sums
    of the w's below and above x:  sum_i |w_i - x| / b = c x - (S_- - S_+)/b, c = (2a - m)/b,
    so prior x likelihood is N(x; mu - c s^2, s^2) times exp((S_- - S_+)/b + (mu_a^2 - mu^2)/2s^2).
    Outside [-r, r] the clipped value is -r or r and the piece is the prior's tail; with
    ``tails`` false the base is restricted to [-r, r] and these two pieces are left out.
    Returns (seg, lo, hi, mean, const); constants common to all pieces are dropped.
    """
    k = starts.shape[0] - 1
    cap = order.shape[0] + 3 * k
    seg = np.empty(cap, dtype=np.int64)
    lo = np.empty(cap)
    hi = np.empty(cap)
    mean = np.empty(cap)
    const = np.empty(cap)
    s2 = s * s
    q = 0
    for c in range(k):
        a0 = starts[c]
        a1 = starts[c + 1]
        m = a1 - a0
        total = 0.0
        left = 0.0
        right = 0.0
        for p in range(a0, a1):
            w = z[order[p]]
            total += w
            left -= abs(w + r)
            right -= abs(w - r)
        if tails:
            seg[q] = c
            lo[q] = -np.inf
            hi[q] = -r
            mean[q] = mu
            const[q] = left / b
            q += 1
        p = a0
        s_below = 0.0
        while p < a1 and z[order[p]] <= -r:
            s_below += z[order[p]]
            p += 1
        t_lo = -r
        while True:
            a = p - a0
            cc = (2.0 * a - m) / b
            mj = mu - cc * s2
            t_hi = r
            inside = p < a1 and z[order[p]] < r
            if inside:
                t_hi = z[order[p]]
            seg[q] = c
            lo[q] = t_lo
            hi[q] = t_hi
            mean[q] = mj
            const[q] = (2.0 * s_below - total) / b + (mj * mj - mu * mu) / (2.0 * s2)
            q += 1
            if not inside:
                break
            s_below += z[order[p]]
            p += 1
            t_lo = t_hi
        if tails:
            seg[q] = c
            lo[q] = r
            hi[q] = np.inf
            mean[q] = mu
            const[q] = right / b
            q += 1
    return seg[:q], lo[:q], hi[:q], mean[:q], const[:q]


@njit(cache=True)
def segment_logsumexp(values, seg, k):  # type: ignore[no-untyped-def]
    """log sum exp of the values within each segment 0..k-1."""
    mx = np.full(k, -np.inf)
    for j in range(values.shape[0]):
        if values[j] > mx[seg[j]]:
            mx[seg[j]] = values[j]
    acc = np.zeros(k)
    for j in range(values.shape[0]):
        if np.isfinite(values[j]):
            acc[seg[j]] += math.exp(values[j] - mx[seg[j]])
    return mx + np.log(acc)


@njit(cache=True)
def cdf_draws(atoms, cumw, grid):  # type: ignore[no-untyped-def]
    """F(t) for every draw (rows: increasing atoms, cumulative weights) at increasing ``grid``."""
    d, a = atoms.shape
    g = grid.shape[0]
    out = np.zeros((d, g))
    for i in range(d):
        p = 0
        for t in range(g):
            while p < a and atoms[i, p] <= grid[t]:
                p += 1
            out[i, t] = cumw[i, p - 1] if p > 0 else 0.0
    return out


@njit(cache=True)
def smoothed_density_draws(atoms, weights, grid, h):  # type: ignore[no-untyped-def]
    """sum_p w_p exp(-((t - a_p) / h)^2 / 2) for every draw (row) at every t of ``grid``
    (the caller divides by h sqrt(2 pi)); slots of weight 0 (the padding of shorter
    draws) are skipped."""
    d, a = atoms.shape
    g = grid.shape[0]
    out = np.zeros((d, g))
    for i in range(d):
        for p in range(a):
            wp = weights[i, p]
            if wp == 0.0:
                continue
            ap = atoms[i, p]
            for t in range(g):
                u = (grid[t] - ap) / h
                out[i, t] += wp * math.exp(-0.5 * u * u)
    return out


@njit(cache=True)
def quantile_draws(atoms, cumw, qs):  # type: ignore[no-untyped-def]
    """The q-quantile inf{x: F(x) >= q} of every draw for each q in ``qs``."""
    d, a = atoms.shape
    out = np.empty((d, qs.shape[0]))
    for i in range(d):
        for t in range(qs.shape[0]):
            p = 0
            while p < a - 1 and cumw[i, p] < qs[t] - 1e-12:
                p += 1
            out[i, t] = atoms[i, p]
    return out


#: The Laplace label sweep recomputes its running side sums from scratch every this many
#: observations (and whenever a cluster changes side), so that their rounding cannot drift.
SIDE_SUMS_EVERY = 256


@njit(cache=True)
def _side_sums(counts, side, ep, en, top):  # type: ignore[no-untyped-def]
    """(L, R, live on the left, live on the right): L = sum of c_k e^{y_k/b} over the
    clusters with clip(y_k) <= u (``side``), R = sum of c_k e^{-y_k/b} over the others."""
    lsum = 0.0
    rsum = 0.0
    nl = 0
    nr = 0
    for k in range(top):
        c = counts[k]
        if c > 0:
            if side[k]:
                lsum += c * ep[k]
                nl += 1
            else:
                rsum += c * en[k]
                nr += 1
    return lsum, rsum, nl, nr


@njit(cache=True)
def laplace_label_sweep(  # type: ignore[no-untyped-def]
    i0,
    z,
    new_w,
    labels,
    counts,
    phi,
    top,
    alpha,
    uniforms,
    pool_g,
    pool_u,
    pool_pos,
    b,
    r,
    mu,
    s,
    tails,
    order,
    eu,
    emu,
):
    """Neal's algorithm 2 for the Laplace mechanism, fused: labels and new clusters in one loop.

    ``z`` sorted, ``new_w[i]`` the prior predictive of z_i relative to max Q(z_i | .);
    Q(z_i | y) / max = exp(-|u - clip y| / b) with u = clip z_i. A new cluster's value is
    drawn from its one-observation Appendix A conditional with the next row of the
    randomness pool (``pool_g``: 4 Gumbels, ``pool_u``: 1 uniform per row). Slots
    ``0..top-1`` may hold clusters; a new cluster takes the lowest empty slot (capacity
    len(phi) >= clusters + n). ``order[:top]`` is the order in which clusters are scanned
    (the caller's: clusters by decreasing size at the start of the sweep; a slot opened
    at ``top`` is appended). ``eu``, ``emu``: e^{u/b} and e^{-u/b} per observation (once
    per fit). Returns ``(i, pool_pos, top)``: ``i == n`` when done,
    otherwise the pool was used up before observation i (refill, call again from i).

    The choice. exp(-|u - y|/b) is e^{-u/b} e^{y/b} for y <= u (the left side) and
    e^{u/b} e^{-y/b} for y > u, so the total weight of the existing clusters is
    e^{-u/b} L + e^{u/b} R with the side sums L, R of the counts times e^{+-y/b}. These are
    kept as running sums (an observation leaving or joining a cluster changes one of them
    by one term; u only grows along the sorted z, so a cluster only ever crosses from the
    right side to the left, which triggers a recomputation) and recomputed every
    SIDE_SUMS_EVERY observations; a side with no live cluster has sum exactly 0. With
    t = U (e^{-u/b} L + e^{u/b} R + alpha new_w[i]), the inverse-CDF choice runs over the
    left clusters (in ``order``), then the right ones, then a new cluster: large clusters
    first, so the scan is short. A scan that ends without passing t (rounding of the
    running sums) takes the last cluster of its side with a positive weight (none: a new
    cluster). O(1) per observation but the
    scan, instead of two passes over all clusters.
    """
    n = z.shape[0]
    cap = phi.shape[0]
    side = np.zeros(cap, dtype=np.bool_)
    yc = np.empty(cap)
    ep = np.empty(cap)
    en = np.empty(cap)
    u0 = min(max(z[i0], -r), r) if i0 < n else r
    thr = np.inf  # the smallest clip(y) still on the right side
    for k in range(top):
        yc[k] = min(max(phi[k], -r), r)
        ep[k] = math.exp(yc[k] / b)
        en[k] = math.exp(-yc[k] / b)
        side[k] = u0 >= yc[k]
        if not side[k]:
            thr = min(thr, yc[k])
    lsum, rsum, nl, nr = _side_sums(counts, side, ep, en, top)
    for i in range(i0, n):
        if pool_pos >= pool_u.shape[0]:
            return i, pool_pos, top
        u = min(max(z[i], -r), r)
        if u >= thr:  # clusters cross to the left side
            thr = np.inf
            for k in range(top):
                if not side[k]:
                    if u >= yc[k]:
                        side[k] = True
                    else:
                        thr = min(thr, yc[k])
            lsum, rsum, nl, nr = _side_sums(counts, side, ep, en, top)
        elif (i - i0) % SIDE_SUMS_EVERY == 0:
            lsum, rsum, nl, nr = _side_sums(counts, side, ep, en, top)
        k_old = labels[i]
        counts[k_old] -= 1
        if side[k_old]:
            lsum -= ep[k_old]
            if counts[k_old] == 0:
                nl -= 1
                if nl == 0:
                    lsum = 0.0
        else:
            rsum -= en[k_old]
            if counts[k_old] == 0:
                nr -= 1
                if nr == 0:
                    rsum = 0.0
        up = eu[i]
        un = emu[i]
        wl = un * lsum
        wr = up * rsum
        t = uniforms[i] * (wl + wr + alpha * new_w[i])
        choice = -1
        # the two sides' scans are written out: one helper for both (side[k] == left) made
        # the whole Gibbs sweep 20% slower at n = 1e5 (74 -> 58 sweeps/s, side by side)
        if t < wl:
            acc = 0.0
            for q in range(top):
                k = order[q]
                if side[k] and counts[k] > 0:
                    wk = un * (counts[k] * ep[k])
                    if wk > 0.0:
                        acc += wk
                        choice = k
                        if t < acc:
                            break
        elif t < wl + wr:
            acc = wl
            for q in range(top):
                k = order[q]
                if not side[k] and counts[k] > 0:
                    wk = up * (counts[k] * en[k])
                    if wk > 0.0:
                        acc += wk
                        choice = k
                        if t < acc:
                            break
        if choice >= 0:
            labels[i] = choice
            counts[choice] += 1
            if side[choice]:
                lsum += ep[choice]
            else:
                rsum += en[choice]
            continue
        slot = top
        for k in range(top):
            if counts[k] == 0:
                slot = k
                break
        if slot == top:
            order[top] = slot
            top += 1
        labels[i] = slot
        counts[slot] = 1
        x = one_observation_draw(z[i], b, r, mu, s, tails, pool_g[pool_pos], pool_u[pool_pos])
        pool_pos += 1
        phi[slot] = x
        yc[slot] = min(max(x, -r), r)
        ep[slot] = math.exp(yc[slot] / b)
        en[slot] = math.exp(-yc[slot] / b)
        side[slot] = u >= yc[slot]
        if side[slot]:
            lsum += ep[slot]
            nl += 1
        else:
            rsum += en[slot]
            nr += 1
            thr = min(thr, yc[slot])
    return n, pool_pos, top


@njit(cache=True)
def compact(labels, counts, phi, top):  # type: ignore[no-untyped-def]
    """Drop empty slots among 0..top-1 and relabel 0..K-1 in slot order (in place on labels)."""
    new = np.empty(top, dtype=np.int64)
    k = 0
    for c in range(top):
        new[c] = k
        if counts[c] > 0:
            k += 1
    out_counts = np.empty(k, dtype=np.int64)
    out_phi = np.empty(k)
    for c in range(top):
        if counts[c] > 0:
            out_counts[new[c]] = counts[c]
            out_phi[new[c]] = phi[c]
    for i in range(labels.shape[0]):
        labels[i] = new[labels[i]]
    return out_counts, out_phi
