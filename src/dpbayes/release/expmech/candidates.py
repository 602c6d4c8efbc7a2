"""Candidate posteriors for the exponential mechanism: divergences, scores, sensitivities.

Paper 003 (notes, §2-3) and paper 002 §6.3. For a public data size n the candidates are
the posteriors of every data set of size n: Beta(a + j, b + n - j), j = 0..n, for the coin
and Dir(alpha + c) over the count vectors c of n records (or a data-independent lattice of
them) for the die. Every candidate has the same total concentration.

Numerics: Hellinger distances come from :mod:`dpbayes.models.divergence` (log-space
Jensen-gap form, accurate at n ~ 10^7); the scores over every candidate are the same
formulas in one compiled pass (:mod:`._kernels`). Total variation between Betas of
equal total is closed form (single crossing point, incomplete beta), in numpy chunks.
"""

from __future__ import annotations

import math
from itertools import combinations

import numpy as np
from scipy import special

from dpbayes.models.divergence import hellinger_beta
from dpbayes.models.lgamma_differences import bregman_lgamma

__all__ = [
    "coin_global_sensitivity",
    "coin_local_at",
    "coin_local_sensitivity",
    "coin_neighbour_distances",
    "coin_scores",
    "coin_smooth_sensitivity",
    "compositions",
    "dirichlet_global_sensitivity",
    "dirichlet_local_sensitivity",
    "dirichlet_scores",
    "dirichlet_smooth_sensitivity",
    "lattice_counts",
    "lgamma_difference",
    "n_compositions",
    "total_variation_beta_same_total",
]

_CHUNK = 1 << 15
DIVERGENCES = ("hellinger", "tv")


def lgamma_difference(x: np.ndarray | float, h: np.ndarray | float) -> np.ndarray:
    """lnG(x + h) - lnG(x) without cancellation (x > 0, x + h > 0).

    The shared Bregman form: D(x, h) + h psi(x), D = lnG(x+h) - lnG(x) - h psi(x)
    (:func:`dpbayes.models.lgamma_differences.bregman_lgamma`), at x >= 1. Below 1 the
    two terms are each about h / x (psi(x) ~ -1/x) and their sum is the small lnG
    difference: at x = 1e-20, h = 1 both are 1e20 and the sum came out 0 for -46.05. There
    the shift lnG(x) = lnG(x + 1) - log x gives lgd(x + 1, h) - log1p(h / x), no
    cancellation (the x lost in x + 1 moves the result by about x).
    """
    xv, hv = np.broadcast_arrays(np.asarray(x, dtype=float), np.asarray(h, dtype=float))
    small = xv < 1.0
    xs = np.where(small, xv + 1.0, xv)
    out = bregman_lgamma(xs, hv) + hv * special.digamma(xs)
    if np.any(small):
        xd = np.where(small, xv, 1.0)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            ratio = hv / xd
            # log((x + h) / x); a ratio beyond the doubles (x ~ 5e-324) as two logs,
            # which are then far apart (no cancellation)
            shift = np.where(np.isfinite(ratio), np.log1p(ratio), np.log(xd + hv) - np.log(xd))
        out = np.where(small, out - shift, out)
    return np.asarray(out)


def _lgamma_gap(x1: np.ndarray, x2: np.ndarray) -> np.ndarray:
    """lnG(x1) - lnG(x2), from the smaller argument up (the step |x1 - x2| >= 0): from the
    larger down, a step rounded to the larger's size (1 + 1e-20 -> 1, 1e-20 - 1 -> -1)
    could land on 0 and give an infinite gap."""
    lo = np.minimum(x1, x2)
    up = lgamma_difference(lo, np.abs(x1 - x2))
    return np.asarray(np.where(x1 >= x2, up, -up))


def total_variation_beta_same_total(
    a1: np.ndarray | float, b1: np.ndarray | float, a2: np.ndarray | float, b2: np.ndarray | float
) -> np.ndarray:
    """TV distance between Beta(a1, b1) and Beta(a2, b2) with a1 + b1 = a2 + b2.

    With equal totals the log density ratio is (a1 - a2) logit(t) + const, monotone, so the
    densities cross once, at logit t* = [lnB(a1, b1) - lnB(a2, b2)] / (a1 - a2), and
    TV = |I_t*(a1, b1) - I_t*(a2, b2)| (regularised incomplete beta), or the same of the
    survival functions. Exact, no integration; every term from the smaller argument or tail,
    so priors down to 5e-324 keep their digits (a review found TV 0 for TV ~ 1 there, an
    under-stated sensitivity).
    """
    a1v, b1v, a2v, b2v = np.broadcast_arrays(
        *(np.asarray(v, dtype=float) for v in (a1, b1, a2, b2))
    )
    da = a1v - a2v
    same = da == 0
    safe = np.where(same, 1.0, da)
    # lnB(a1, b1) - lnB(a2, b2) = [lnG(a1) - lnG(a2)] + [lnG(b1) - lnG(b2)] (totals equal)
    diff = _lgamma_gap(a1v, a2v) + _lgamma_gap(b1v, b2v)
    z = diff / safe  # logit t*
    t, tc = special.expit(z), special.expit(-z)  # t* and 1 - t*, each to full precision
    f1, f2 = special.betainc(a1v, b1v, t), special.betainc(a2v, b2v, t)
    # |F1 - F2| = |S1 - S2|: from whichever tails are small. Near 1 the cdfs round to 1
    # (t* = 1 - 2e-22 is 1.0: a tiny prior's posterior against its neighbour, TV ~ 1,
    # came out 0); the survival functions I_{1 - t}(b, a) keep every digit there.
    upper = f1 + f2 > 1.0
    s1 = special.betainc(b1v, a1v, tc)
    s2 = special.betainc(b2v, a2v, tc)
    tv = np.where(upper, np.abs(s1 - s2), np.abs(f1 - f2))
    return np.asarray(np.where(same, 0.0, tv))


# ---------------------------------------------------------------- the coin (Beta-Bernoulli)


def _check_divergence(divergence: str) -> str:
    if divergence not in DIVERGENCES:
        raise ValueError(f"divergence must be one of {list(DIVERGENCES)}, got {divergence!r}")
    return divergence


def _coin_distance(
    a: float, b: float, n: int, k: np.ndarray, j: np.ndarray, divergence: str
) -> np.ndarray:
    """D(Beta(a + k, b + n - k), Beta(a + j, b + n - j)) elementwise."""
    if divergence == "tv":
        return total_variation_beta_same_total(a + k, b + (n - k), a + j, b + (n - j))
    return np.asarray(hellinger_beta(a + k, b + (n - k), a + j, b + (n - j)))


def coin_scores(a: float, b: float, n: int, k: int, divergence: str = "hellinger") -> np.ndarray:
    """u_j = -D(posterior(k), Beta(a + j, b + n - j)) for every candidate j = 0..n; O(n).

    Hellinger: one compiled pass (:mod:`._kernels`); total variation: numpy.
    """
    _check_divergence(divergence)
    out = np.empty(n + 1)
    if divergence == "hellinger":
        from dpbayes.release.expmech._kernels import coin_hellinger_scores

        coin_hellinger_scores(float(a), float(b), int(n), int(k), out)
        return out
    # chunks keep the temporaries in cache: several times faster than whole-array passes
    for lo in range(0, n + 1, _CHUNK):
        j = np.arange(lo, min(lo + _CHUNK, n + 1), dtype=float)
        out[lo : lo + j.size] = _coin_distance(a, b, n, np.full_like(j, float(k)), j, divergence)
    return np.negative(out, out=out)


def coin_neighbour_distances(
    a: float, b: float, n: int, divergence: str = "hellinger", lo: int = 0, hi: int | None = None
) -> np.ndarray:
    """D(posterior(j), posterior(j + 1)) for j = lo..hi-1 (default all j = 0..n-1)."""
    _check_divergence(divergence)
    hi = n if hi is None else hi
    out = np.empty(max(hi - lo, 0))
    for start in range(lo, hi, _CHUNK):
        j = np.arange(start, min(start + _CHUNK, hi), dtype=float)
        out[start - lo : start - lo + j.size] = _coin_distance(a, b, n, j, j + 1.0, divergence)
    return out


def coin_global_sensitivity(a: float, b: float, n: int, divergence: str = "hellinger") -> float:
    """Exact global sensitivity max_j D(posterior(j), posterior(j + 1)) (paper 003 §2.1, §3.1).

    Hellinger: log BC(j, j+1) = J(a + j + 1/2, 1/2) + J(b + n - j - 1/2, 1/2), and
    J(., d) is concave (J'' = psi'(x) - (psi'(x-d) + psi'(x+d))/2 <= 0 as the trigamma
    function is convex), so log BC is concave in j and the distance is largest at j = 0 or
    j = n - 1: O(1). Total variation: the O(n) maximum.
    """
    if divergence == "hellinger":
        ends = np.array([0.0, float(n - 1)])
        return float(np.max(_coin_distance(a, b, n, ends, ends + 1.0, divergence)))
    return float(np.max(coin_neighbour_distances(a, b, n, divergence)))


def coin_local_at(a: float, b: float, n: int, k: int, divergence: str = "hellinger") -> float:
    """LS(k): the largest distance from posterior(k) to a neighbour's posterior (§3.1)."""
    lo, hi = max(k - 1, 0), min(k + 1, n)
    return float(np.max(coin_neighbour_distances(a, b, n, divergence, lo, hi)))


def coin_smooth_sensitivity(
    a: float, b: float, n: int, k: int, beta: float, divergence: str = "hellinger"
) -> float:
    """S_beta(k) = max_j LS(j) e^{-beta |j - k|} (paper 003 §2.3), exactly.

    Positions farther than w = ln(G / LS(k)) / beta (G the global sensitivity, an upper
    bound on every LS) cannot exceed LS(k) <= S_beta(k), so only the window |j - k| <= w
    is evaluated: O(w) instead of O(n).
    """
    glob = coin_global_sensitivity(a, b, n, divergence)
    own = coin_local_at(a, b, n, k, divergence)
    w = n if own <= 0 else math.ceil(math.log(glob / own) / beta) + 1
    lo, hi = max(k - w - 1, 0), min(k + w + 1, n)
    local = coin_local_sensitivity(coin_neighbour_distances(a, b, n, divergence, lo, hi))
    pos = np.arange(lo, hi + 1, dtype=float)
    return float(np.max(local * np.exp(-beta * np.abs(pos - k))))


def coin_local_sensitivity(neighbour_distances: np.ndarray) -> np.ndarray:
    """LS(k) = max over neighbours k +- 1 of D(posterior(k +- 1), posterior(k)), k = 0..n.

    Paper 003 §3.1: by the triangle inequality |D(p, r) - D(q, r)| <= D(p, q), with
    equality at the candidate r = p, so the max over candidates of the utility change is
    the distance between the two neighbouring posteriors.
    """
    g = np.asarray(neighbour_distances, dtype=float)
    out = np.zeros(g.size + 1)
    out[:-1] = g
    out[1:] = np.maximum(out[1:], g)
    return out


# ---------------------------------------------------------------- the die (Dirichlet)


def n_compositions(n: int, m: int) -> int:
    """Number of count vectors of n records over m categories: C(n + m - 1, m - 1)."""
    return math.comb(n + m - 1, m - 1)


def compositions(n: int, m: int) -> np.ndarray:
    """All count vectors (c_1..c_m) >= 0 with sum n, shape (C(n+m-1, m-1), m), int64."""
    if m == 1:
        return np.array([[n]], dtype=np.int64)
    if m == 2:
        lead = np.arange(n, -1, -1, dtype=np.int64)
        return np.column_stack([lead, n - lead])
    # stars and bars: choose the m - 1 bar positions among n + m - 1 slots
    rows = []
    for first in range(n, -1, -1):
        rest = compositions(n - first, m - 1)
        rows.append(np.column_stack([np.full(rest.shape[0], first, dtype=np.int64), rest]))
    return np.concatenate(rows, axis=0)


def lattice_counts(n: int, m: int, resolution: int) -> np.ndarray:
    """A data-independent candidate lattice: round(n c / L) over compositions c of L.

    Rounding is by largest remainder (ties to lower index) so every row sums to n; it
    depends only on (n, m, L), never on the data. Duplicate rows are removed.
    """
    grid = compositions(resolution, m)
    exact = grid * (n / resolution)
    base = np.floor(exact).astype(np.int64)
    short = n - base.sum(axis=1)
    order = np.argsort(-(exact - base), axis=1, kind="stable")
    ranks = np.argsort(order, axis=1, kind="stable")
    base += (ranks < short[:, None]).astype(np.int64)
    return np.unique(base, axis=0)


def _pair_distance(w: np.ndarray | float, v: np.ndarray | float) -> np.ndarray:
    """H between Dir posteriors differing by one record moved from a category with
    parameter w + 1 (-> w) to one with parameter v (-> v + 1); other components cancel.
    The smaller parameter w is given, not formed as (w + 1) - 1, which loses a prior below
    1e-16 (the distance then came out 1, an over-estimate of the sensitivity)."""
    ww, vv = np.asarray(w, dtype=float), np.asarray(v, dtype=float)
    return np.asarray(hellinger_beta(ww + 1.0, vv, ww, vv + 1.0))


def dirichlet_scores(alpha: np.ndarray, counts: np.ndarray, candidates: np.ndarray) -> np.ndarray:
    """u_r = -H(Dir(alpha + counts), Dir(alpha + r)) for every candidate row r (compiled)."""
    from dpbayes.release.expmech._kernels import dirichlet_hellinger_scores

    al = np.asarray(alpha, dtype=float)
    post = al + np.asarray(counts, dtype=float)
    cands = np.ascontiguousarray(candidates, dtype=np.int64)
    out = np.empty(cands.shape[0])
    dirichlet_hellinger_scores(al, post, cands, out)
    return out


def dirichlet_global_sensitivity(alpha: np.ndarray, n: int) -> tuple[float, tuple[int, int]]:
    """Exact global Hellinger sensitivity for m >= 3 and n >= 1, and the worst (i, l).

    The distance for moving a record from i to l decreases in both parameters, and with
    m >= 3 the remaining categories absorb the other records, so the worst neighbours have
    count 1 in i and 0 in l: max over i != l of H(alpha + e_i, alpha + e_l).
    """
    al = np.asarray(alpha, dtype=float)
    best, arg = -1.0, (0, 1)
    for i, l in ((i, l) for i in range(al.size) for l in range(al.size) if i != l):
        h = float(_pair_distance(al[i], al[l]))
        if h > best:
            best, arg = h, (i, l)
    return best, arg


def dirichlet_local_sensitivity(alpha: np.ndarray, counts: np.ndarray) -> float:
    """LS(c) = max over moves of one record (i -> l, c_i >= 1) of H(post(c), post(c'))."""
    al = np.asarray(alpha, dtype=float)
    c = np.asarray(counts, dtype=np.int64)
    best = 0.0
    for i, l in ((i, l) for i in range(c.size) for l in range(c.size) if i != l):
        if c[i] >= 1:
            best = max(best, float(_pair_distance(al[i] + (c[i] - 1), al[l] + c[l])))
    return best


def dirichlet_smooth_sensitivity(alpha: np.ndarray, counts: np.ndarray, beta: float) -> float:
    """Exact S_beta(c) = max_{c'} LS(c') e^{-beta d(c, c')} for m >= 3 (d: records changed).

    LS(c') is a max over moves (i -> l) of a distance that decreases in c'_i and c'_l and
    ignores the rest; the fewest records to change to reach c'_i = s, c'_l = t (the other
    categories absorbing, s + t <= n) is (|s - c_i| + |t - c_l| + |s - c_i + t - c_l|) / 2.
    Moving s above max(c_i, 1) or t above c_l never helps, and points farther than
    ln(G / best) / beta (G the pair's largest distance) cannot beat the current best, so a
    finite window is searched exhaustively.
    """
    al = np.asarray(alpha, dtype=float)
    c = np.asarray(counts, dtype=np.int64)
    n = int(c.sum())
    best = dirichlet_local_sensitivity(al, c)
    for i, l in combinations_all(c.size):
        top = float(_pair_distance(al[i], al[l]))
        if top <= best:
            continue
        window = math.floor(math.log(top / best) / beta) + 1 if best > 0 else n
        s_hi = max(int(c[i]), 1)
        s = np.arange(max(1, s_hi - window), s_hi + 1)
        t = np.arange(max(0, int(c[l]) - window), int(c[l]) + 1)
        ss, tt = np.meshgrid(s, t, indexing="ij")
        ok = ss + tt <= n
        di, dl = ss - c[i], tt - c[l]
        dist = 0.5 * (np.abs(di) + np.abs(dl) + np.abs(di + dl))
        val = _pair_distance(al[i] + (ss - 1), al[l] + tt) * np.exp(-beta * dist)
        if np.any(ok):
            best = max(best, float(np.max(val[ok])))
    return best


def combinations_all(m: int) -> list[tuple[int, int]]:
    """Ordered pairs (i, l), i != l, of m categories."""
    return [p for a, b in combinations(range(m), 2) for p in ((a, b), (b, a))]
