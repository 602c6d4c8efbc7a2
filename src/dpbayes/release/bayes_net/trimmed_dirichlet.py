"""Exact draws of a Dirichlet restricted to {theta_j >= p}: the envelope sampler (issue 14).

Proof: ``PROOF_sampling.md`` §4 beside this file. In slack coordinates
s_j = theta_j - p the region is the simplex S_w = {s >= 0, sum s = w}, w = 1 - k p, and
the target density is f(s) = prod_j (p + s_j)^{c_j}, c_j = a_j - 1 > -1. For any G,
on S_w

    log f(s) = G w + sum_j psi_j(s_j),   psi_j(s) = c_j log(p + s) - G s,

a sum of one-dimensional terms: psi_j is concave for c_j >= 0 (bounded above by any of
its tangents, so by the minimum of several: a piecewise-linear hull) and convex for
c_j < 0 (bounded above by its chords: the piecewise-linear interpolation on a grid).
Either bound is a *piecewise-exponential* envelope e_j >= e^{psi_j} on [0, w], which is
sampled exactly (a piece by its mass, then a truncated exponential by its inverse cdf).
G is the multiplier of the sum constraint at the maximiser of f (water-filling), so
that every psi_j peaks where the target does.

The constraint sum s = w is carried either by the "flat" coordinates F (those whose
psi_j, averaged over the uniform distribution on S_w, is within ``flat`` of its maximum over
[0, w], which bounds it: uniform on the remaining simplex, with the volume factor
(t / w)^{|F| - 1} accepted by a uniform), or,
if there are none, by one remainder coordinate r (s_r = w - sum of the others, bounded
by the maximum of psi_r over [0, w]), or, when every c_j < 0 and none is flat, by a
mixture over r of such envelopes, each bounding f where s_r is the largest slack
(s_r >= w / k). A proposal is accepted with probability f / envelope <= 1: every draw
that is returned has exactly the target law, whatever G, the tangent points and grids
are (they only set the acceptance rate).

No randomness is drawn here: proposals are built from uniforms of a noise source.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["FLAT_LEVELS", "Envelope", "PiecewiseExp", "envelope", "propose"]

# mean losses (under the uniform law on S_w) below which a coordinate is treated as flat:
# the row samplers use one envelope per level (neither level alone suits every edge case)
FLAT_LEVELS = (0.25, 0.5)
TANGENTS = (-2.5, -1.0, 0.0, 1.0, 2.5)  # tangent points s* + m sigma (concave terms)


@dataclass(frozen=True)
class PiecewiseExp:
    """A density proportional to exp(alpha_m + beta_m (s - b_m)) on [b_m, b_{m+1}]."""

    breaks: np.ndarray  # b_0 = 0 < ... < b_M = w
    alpha: np.ndarray  # log envelope at the left end of each piece
    beta: np.ndarray  # slope of each piece
    log_mass: np.ndarray  # log of each piece's integral
    log_total: float

    def log_value(self, s: np.ndarray) -> np.ndarray:
        """log envelope at s (each s in [0, w])."""
        m = np.clip(np.searchsorted(self.breaks, s, side="right") - 1, 0, self.alpha.size - 1)
        return np.asarray(self.alpha[m] + self.beta[m] * (s - self.breaks[m]))

    def sample(self, u_piece: np.ndarray, u_within: np.ndarray) -> np.ndarray:
        """Exact draws by the inverse cdf: the piece, then the point within it."""
        cdf = np.cumsum(np.exp(self.log_mass - self.log_total))
        m = np.minimum(np.searchsorted(cdf, u_piece * cdf[-1], side="left"), cdf.size - 1)
        width = self.breaks[m + 1] - self.breaks[m]
        return np.asarray(
            np.clip(self.breaks[m] + _exp_ppf(self.beta[m], width, u_within), 0.0, None)
        )


def _log_expm1_ratio(z: np.ndarray) -> np.ndarray:
    """log((e^z - 1) / z), 0 at z = 0, stable for large |z|."""
    out = np.zeros_like(z)
    pos, neg = z > 0, z < 0
    out[pos] = z[pos] + np.log(-np.expm1(-z[pos])) - np.log(z[pos])
    out[neg] = np.log(-np.expm1(z[neg])) - np.log(-z[neg])
    return out


def _exp_ppf(beta: np.ndarray, width: np.ndarray, u: np.ndarray) -> np.ndarray:
    """The u-quantile of the density proportional to e^{beta x} on [0, width]."""
    z = beta * width
    out = u * width
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        neg = z < 0
        out = np.where(neg, np.log1p(u * np.expm1(z)) / beta, out)
        pos = z > 0
        # width + log(u + (1 - u) e^{-z}) / beta, without cancellation for small z
        out = np.where(pos, width + np.log1p((1 - u) * np.expm1(-z)) / beta, out)
    return np.asarray(np.clip(out, 0.0, width))


def _piecewise(breaks: np.ndarray, alpha: np.ndarray, beta: np.ndarray) -> PiecewiseExp:
    width = np.diff(breaks)
    log_mass = alpha + np.log(width) + _log_expm1_ratio(beta * width)
    top = float(np.max(log_mass))
    log_total = top + math.log(float(np.sum(np.exp(log_mass - top))))
    return PiecewiseExp(breaks, alpha, beta, log_mass, log_total)


def _tangent_hull(c: float, p: float, g: float, w: float, points: np.ndarray) -> PiecewiseExp:
    """min of the tangents of psi(s) = c log(p + s) - g s (c > 0, concave) at ``points``."""
    t = np.unique(np.clip(points, 0.0, w))
    val = c * np.log(p + t) - g * t
    slope = c / (p + t) - g
    keep = [0]
    for i in range(1, t.size):  # drop tangents too close in slope to intersect stably
        if slope[keep[-1]] - slope[i] > 1e-9 * max(1.0, abs(slope[keep[-1]])):
            keep.append(i)
    t, val, slope = t[keep], val[keep], slope[keep]
    z = (val[1:] - val[:-1] - t[1:] * slope[1:] + t[:-1] * slope[:-1]) / (slope[:-1] - slope[1:])
    breaks = np.concatenate([[0.0], np.clip(z, 0.0, w), [w]])
    breaks = np.maximum.accumulate(breaks)
    alpha = val + slope * (breaks[:-1] - t)
    good = np.diff(breaks) > 0
    return _piecewise(np.concatenate([breaks[:-1][good], [w]]), alpha[good], slope[good])


def _chord_hull(c: float, p: float, g: float, w: float) -> PiecewiseExp:
    """The interpolation of psi(s) = c log(p + s) - g s (c < 0, convex) on a geometric
    grid from p/4 to w (plus 0): above psi between grid points."""
    top = max(0, math.ceil(math.log2(w / p)) + 2) if w > p / 4 else 0
    grid = p / 4 * 2.0 ** np.arange(top + 1)
    grid = np.unique(np.concatenate([[0.0], grid[grid < w], [w]]))
    val = c * np.log(p + grid) - g * grid
    beta = np.diff(val) / np.diff(grid)
    return _piecewise(grid, val[:-1], beta)


@dataclass(frozen=True)
class Envelope:
    """The envelope of one trimmed Dirichlet (module docstring)."""

    c: np.ndarray
    p: float
    w: float
    g: float
    pieces: list[PiecewiseExp | None]  # None for the flat coordinates
    sup: np.ndarray  # max of psi_j over [0, w] (flat bound / remainder bound)
    flat: np.ndarray  # bool mask
    remainder: int  # -1 when the flat coordinates carry the constraint, -2 for a mixture
    mix_bound: np.ndarray  # max of psi_r over [w/k, w] (mixture over r)
    log_mix_weight: np.ndarray  # log weight of each mixture component

    def psi(self, s: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore"):
            return np.asarray(self.c * np.log(self.p + s) - self.g * s)


def _water_fill(c: np.ndarray, p: float, w: float) -> tuple[float, np.ndarray]:
    """(nu, s*): the maximiser of sum_{c_j > 0} c_j log(p + s_j) on S_w (others at 0):
    s_j = max(0, c_j / nu - p) with sum s_j = w. With the positive c sorted decreasing,
    the m largest are inside when nu = (c_1 + ... + c_m) / (w + m p) leaves c_m / nu > p
    >= c_{m+1} / nu (water-filling; any nu gives a valid envelope, this one a tight one)."""
    s = np.zeros(c.size)
    pos = np.flatnonzero(c > 0)
    if pos.size == 0:
        return 0.0, s
    cs = np.sort(c[pos])[::-1]
    nus = np.cumsum(cs) / (w + p * np.arange(1, cs.size + 1))
    nxt = np.append(cs[1:], 0.0)
    ok = (cs / nus > p) & (nxt / nus <= p)
    nu = float(nus[int(np.argmax(ok))] if ok.any() else nus[-1])
    s[pos] = np.maximum(0.0, c[pos] / nu - p)
    return nu, s


def envelope(a: np.ndarray, p: float, flat_level: float = FLAT_LEVELS[-1]) -> Envelope:
    """Build the envelope of Dirichlet(a) on {theta_j >= p} (module docstring), with
    coordinates whose mean loss is at most ``flat_level`` treated as flat."""
    c = np.asarray(a, dtype=float) - 1.0
    k = c.size
    w = 1.0 - k * p
    g, s_star = _water_fill(c, p, w)
    ends = np.array([0.0, w])
    # quantile midpoints of s_j = w Beta(1, k - 1), the marginal of the uniform law on S_w
    q = (np.arange(16) + 0.5) / 16
    typical = w * -np.expm1(np.log1p(-q) / (k - 1))
    sup = np.empty(k)
    loss = np.empty(k)
    for j in range(k):
        at_ends = c[j] * np.log(p + ends) - g * ends
        top = c[j] * math.log(p + s_star[j]) - g * s_star[j] if c[j] > 0 else -math.inf
        sup[j] = max(top, float(at_ends.max()))
        loss[j] = sup[j] - float(np.mean(c[j] * np.log(p + typical) - g * typical))
    flat = loss <= flat_level
    pieces: list[PiecewiseExp | None] = []
    for j in range(k):
        if flat[j]:
            pieces.append(None)
        elif c[j] > 0:
            sigma = (p + s_star[j]) / math.sqrt(c[j])
            pts = s_star[j] + sigma * np.array(TANGENTS)
            d0 = c[j] / p - g
            if s_star[j] == 0.0 and d0 < 0:
                pts = np.concatenate([pts, [1.0 / -d0, 3.0 / -d0]])
            pieces.append(_tangent_hull(float(c[j]), p, g, w, pts))
        elif c[j] < 0:
            pieces.append(_chord_hull(float(c[j]), p, g, w))
        else:  # psi = -g s exactly
            pieces.append(_piecewise(ends, np.array([0.0]), np.array([-g])))
    remainder = -1
    mix_bound = np.zeros(0)
    log_mix = np.zeros(0)
    if not flat.any():
        inner = np.flatnonzero((c > 0) & (s_star > 0))
        if inner.size:
            widths = (p + s_star[inner]) / np.sqrt(c[inner])
            remainder = int(inner[np.argmax(widths)])
        else:  # every c_j < 0 (or = 0 and steep): a mixture over the largest slack
            remainder = -2
            lo_end = np.array([w / k, w])
            mix_bound = np.array(
                [float(np.max(c[j] * np.log(p + lo_end) - g * lo_end)) for j in range(k)]
            )
            totals = np.array([pc.log_total for pc in pieces if pc is not None])
            log_mix = mix_bound + totals.sum() - totals
    return Envelope(c, p, w, g, pieces, sup, flat, remainder, mix_bound, log_mix)


def propose(env: Envelope, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Proposals and their acceptance: ``u`` is (T, 2k + 2) uniforms; returns (theta (T, k),
    accepted (T,) bool). Accepted rows are exact draws of the target (module docstring)."""
    c, p, w = env.c, env.p, env.w
    k = c.size
    t_rows = u.shape[0]
    s = np.zeros((t_rows, k))
    log_env = np.zeros(t_rows)
    comp = np.full(t_rows, env.remainder)
    if env.remainder == -2:
        weights = np.exp(env.log_mix_weight - env.log_mix_weight.max())
        cdf = np.cumsum(weights) / weights.sum()
        comp = np.minimum(np.searchsorted(cdf, u[:, 2 * k], side="left"), k - 1)
    drawn = ~env.flat
    for j in range(k):
        pc = env.pieces[j]
        if pc is None:
            continue
        s[:, j] = pc.sample(u[:, j], u[:, k + j])
        log_env += np.where(comp == j, 0.0, pc.log_value(s[:, j]))
    free = np.where(comp[:, None] == np.arange(k)[None, :], False, drawn[None, :])
    taken = np.where(free, s, 0.0).sum(axis=1)
    rest = w - taken
    ok = rest >= 0
    with np.errstate(divide="ignore", invalid="ignore"):
        if env.remainder == -1:
            nf = int(env.flat.sum())
            ok &= np.log(u[:, 2 * k]) <= (nf - 1) * np.log(np.maximum(rest, 0.0) / w)
            # uniform on the simplex: normalised exponentials from the flat coordinates
            # own (otherwise unused) columns
            e = -np.log(u[:, k + np.flatnonzero(env.flat)])
            share = e / e.sum(axis=1, keepdims=True)
            s[:, env.flat] = np.maximum(rest, 0.0)[:, None] * share
            log_env += env.sup[env.flat].sum()
        else:
            rows = np.arange(t_rows)
            s[rows, comp] = np.maximum(rest, 0.0)
            if env.remainder >= 0:
                log_env += env.sup[env.remainder]
        psi = env.psi(s)
        log_target = psi.sum(axis=1)
        if env.remainder == -2:
            # the mixture's density at s: sum over r of bound_r prod_{j != r} e_j(s_j)
            logs = np.stack(
                [pc.log_value(s[:, j]) for j, pc in enumerate(env.pieces) if pc is not None],
                axis=1,
            )
            per = env.mix_bound[None, :] + logs.sum(axis=1, keepdims=True) - logs
            top = per.max(axis=1)
            log_env = top + np.log(np.exp(per - top[:, None]).sum(axis=1))
        ok &= np.log(u[:, 2 * k + 1]) <= np.minimum(log_target - log_env, 0.0)
    return p + s, ok
