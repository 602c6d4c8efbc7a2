"""A straightforward pure-Python Gibbs sweep for the Laplace mechanism (slow; for checks only).

The same algorithm as :class:`DPMixture` with a :class:`LocalLaplace` mechanism, fixed alpha
and base, and ``marginal_moves=False`` (Neal's algorithm 2 for labels, the Appendix A
conditional for the cluster values; ``tails=False`` for the base restricted to [-r, r]), written
with Python lists and scalar math so that the compiled sampler can be tested against
it draw for draw (it consumes the Generator in the same order) and benchmarked
against it. Not part of the public API.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special

from dpbayes.nonparametric.sampler import ChainState
from dpbayes.privacy.mechanisms import laplace_scale

__all__ = ["POOL", "reference_laplace_sweep", "reference_new_weights"]

POOL = 16  # new-cluster draws per refill of the randomness pool (as in the sampler)


def _log_diff_ndtr(a: float, b: float) -> float:
    if a >= b:
        return -math.inf
    if a > 0:
        a, b = -b, -a
    lb = float(special.log_ndtr(b))
    la = float(special.log_ndtr(a))
    return lb + math.log1p(-math.exp(la - lb)) if la < lb else -math.inf


def _ppf(u: float, a: float, b: float) -> float:
    flip = a > 0
    if flip:
        a, b, u = -b, -a, 1.0 - u
    la = float(special.log_ndtr(a))
    lm = _log_diff_ndtr(a, b)
    lp = np.logaddexp(la, math.log(u) + lm) if u > 0 else la
    x = float(special.ndtri_exp(min(float(lp), 0.0)))
    x = min(max(x, a), b)
    return -x if flip else x


def _pieces(
    w: list[float], b: float, r: float, mu: float, s: float, tails: bool
) -> list[tuple[float, ...]]:
    """(lo, hi, mean, const) of the Appendix A conditional for increasing Z's w."""
    m = len(w)
    total = sum(w)
    left = -sum(abs(v + r) for v in w) / b
    right = -sum(abs(v - r) for v in w) / b
    out: list[tuple[float, ...]] = [(-math.inf, -r, mu, left)] if tails else []
    p, s_below = 0, 0.0
    while p < m and w[p] <= -r:
        s_below += w[p]
        p += 1
    t_lo = -r
    while True:
        mj = mu - (2.0 * p - m) / b * s * s
        inside = p < m and w[p] < r
        t_hi = w[p] if inside else r
        const = (2.0 * s_below - total) / b + (mj * mj - mu * mu) / (2.0 * s * s)
        out.append((t_lo, t_hi, mj, const))
        if not inside:
            break
        s_below += w[p]
        p += 1
        t_lo = t_hi
    if tails:
        out.append((r, math.inf, mu, right))
    return out


def _draw(pieces: list[tuple[float, ...]], s: float, gumbel: np.ndarray, u: float) -> float:
    best, pick = -math.inf, 0
    for j, (lo, hi, m, c) in enumerate(pieces):
        v = c + _log_diff_ndtr((lo - m) / s, (hi - m) / s) + float(gumbel[j])
        if v > best:
            best, pick = v, j
    lo, hi, m, _ = pieces[pick]
    x = m + s * _ppf(u, (lo - m) / s, (hi - m) / s)
    return min(max(x, lo), hi)


def _compact(labels: list[int], counts: list[int], phi: list[float]) -> ChainState:
    new, k = [], 0
    for c in counts:
        new.append(k)
        k += c > 0
    return ChainState(
        np.array([new[c] for c in labels], dtype=np.int64),
        np.array([c for c in counts if c > 0], dtype=np.int64),
        np.array([p for p, c in zip(phi, counts, strict=True) if c > 0]),
        0.0,
    )


def reference_new_weights(
    zs: np.ndarray, *, epsilon: float, r: float, mu: float, sigma: float, tails: bool = True
) -> list[float]:
    """Prior predictive of clip(z_i) relative to max Q(z_i | .), per value (once per fit)."""
    b = laplace_scale(2.0 * r, epsilon)  # as LocalLaplace.scale
    norm = 1.0 if tails else math.exp(_log_diff_ndtr((-r - mu) / sigma, (r - mu) / sigma))
    out = []
    for v in zs:
        ps = _pieces([min(max(float(v), -r), r)], b, r, mu, sigma, tails)
        terms = [c + _log_diff_ndtr((lo - m) / sigma, (hi - m) / sigma) for lo, hi, m, c in ps]
        top = max(terms)
        out.append(math.exp(top) * sum(math.exp(t - top) for t in terms) / norm)
    return out


def reference_laplace_sweep(
    state: ChainState,
    zs: np.ndarray,
    gen: np.random.Generator,
    *,
    epsilon: float,
    r: float,
    alpha: float,
    mu: float,
    sigma: float,
    new_w: list[float],
    tails: bool = True,
) -> ChainState:
    """One sweep on the sorted data ``zs`` (labels, then cluster values), in pure Python.

    ``new_w`` comes from :func:`reference_new_weights` (with the same ``tails``).
    """
    b = laplace_scale(2.0 * r, epsilon)  # as LocalLaplace.scale
    z = [float(v) for v in zs]
    n = len(z)
    cz = [min(max(v, -r), r) for v in z]
    phi = [float(p) for p in state.phi]
    counts = [int(c) for c in state.counts]
    labels = [int(c) for c in state.labels]
    uniforms = gen.random(n)
    pool_g, pool_u, pool_pos = gen.gumbel(size=(POOL, 4)), gen.random(POOL), 0

    yc = [min(max(p, -r), r) for p in phi]  # the clusters' clipped values

    # the inverse-CDF order of the choice: clusters at or left of clip(z_i) (by decreasing
    # size at the start of the sweep, then clusters opened during it), then those to its
    # right (same order), then a new cluster
    order = sorted(range(len(phi)), key=lambda c: -counts[c])
    for i in range(n):
        if pool_pos == POOL:  # the compiled sampler refills its pool at the same point
            pool_g, pool_u, pool_pos = gen.gumbel(size=(POOL, 4)), gen.random(POOL), 0
        k_old = labels[i]
        counts[k_old] -= 1
        u = cz[i]
        w = [counts[c] * math.exp(-abs(u - y) / b) for c, y in enumerate(yc)]
        t = uniforms[i] * (sum(w) + alpha * new_w[i])
        choice, acc = -1, 0.0
        for side in (True, False):
            for c in order:
                if w[c] > 0.0 and (u >= yc[c]) == side:
                    acc += w[c]
                    if t < acc:
                        choice = c
                        break
            if choice >= 0:
                break
        if choice >= 0:
            labels[i] = choice
            counts[choice] += 1
            continue
        free = [c for c in range(len(phi)) if counts[c] == 0]
        if free:
            slot = free[0]
        else:
            slot = len(phi)
            phi.append(0.0)
            yc.append(0.0)
            counts.append(0)
            order.append(slot)
        labels[i] = slot
        counts[slot] = 1
        ps = _pieces([z[i]], b, r, mu, sigma, tails)
        phi[slot] = _draw(ps, sigma, pool_g[pool_pos], float(pool_u[pool_pos]))
        yc[slot] = min(max(phi[slot], -r), r)
        pool_pos += 1
    st = _compact(labels, counts, phi)
    members: list[list[float]] = [[] for _ in st.phi]
    for i, c in enumerate(st.labels):
        members[int(c)].append(z[i])
    all_pieces = [_pieces(ws, b, r, mu, sigma, tails) for ws in members]
    gumbel = gen.gumbel(size=sum(len(p) for p in all_pieces))
    uniforms_k = gen.random(len(all_pieces))
    out, pos = [], 0
    for c, ps in enumerate(all_pieces):
        out.append(_draw(ps, sigma, gumbel[pos : pos + len(ps)], float(uniforms_k[c])))
        pos += len(ps)
    return ChainState(st.labels, st.counts, np.array(out), alpha, mu, sigma)
