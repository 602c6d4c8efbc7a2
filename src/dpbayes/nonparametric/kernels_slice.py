"""The base, atom and weight-transfer moves of :mod:`dpbayes.nonparametric.moves`, compiled.

Each move is one univariate slice-sampling update (Neal 2003: stepping out, Fig. 3, and
shrinkage, Fig. 5; the same steps as :func:`dpbayes.nonparametric.base.slice_step_f`) of
p(P | z), proportional to the DP prior times prod_i m_i, m_i = sum_k w_k Q(z_i | y_k),
along one coordinate of P:

* atom k's location x, prior N(mu, sigma^2) on the support [lower, upper]:
  log f(x) = -(x - mu)^2 / 2 sigma^2 + sum_i cnt_i log m_i(atom k at x);
* a transfer delta of weight from atom k to atom j (j < k < T - 1), prior the GEM density
  of the size-biased weights: log f(delta) = -sum_{m=j}^{k-1} log(R_m - delta)
  + sum_i cnt_i log(m_i + delta (Q(z_i | y_j) - Q(z_i | y_k))), R_m the mass after
  position m, delta in [-w_j, w_k];
* the base's mu, then log sigma, with every atom's quantile under the base held fixed
  (the non-centred moves; :func:`base_moves`);
* the concentration's log alpha, with every stick's quantile under Beta(1, alpha) held
  fixed (:func:`alpha_move`).

While the relative likelihoods span at most e^EXACT_RANGE (``by_diff``), m_i is updated by
differences (one column per evaluation); beyond, every evaluation recomputes the m_i from
all atoms (see :data:`dpbayes.nonparametric.moves.EXACT_RANGE`).

No randomness is drawn here: the caller passes uniforms from the chain's Generator,
:func:`uniforms_needed` of them, enough for the longest possible moves (each slice update
takes at most 3 + MAX_SHRINKS), and ``cur``, a one-element cursor into them.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from dpbayes.nonparametric.kernels_moves import (
    gauss_column,
    gauss_mix_atoms,
    laplace_column,
    laplace_mix_atoms,
    laplace_shift,
    sum_log,
    sum_log_shift,
    sum_log_update,
)
from dpbayes.nonparametric.kernels_truncnorm import (
    base_quantiles,
    from_base_quantiles,
    truncnorm_ppf_scalar,
)

__all__ = ["alpha_move", "atom_and_pair_moves", "base_moves", "uniforms_needed"]

ATOM = 0
PAIR = 1
MU = 2
LOG_SIGMA = 3
ALPHA = 4
#: Stepping out: at most this many widths in all (Neal 2003, Fig. 3, m).
MAX_STEPS = 30
#: Shrinkage: at most this many proposals, then the move keeps its point.
MAX_SHRINKS = 200
#: Uniforms one slice update takes at most: the level, the interval's place, the split of
#: the stepping-out budget, and the shrinkage proposals.
PER_UPDATE = 3 + MAX_SHRINKS


def uniforms_needed(updates: int, pairs: int = 0) -> int:
    """Uniforms that ``updates`` slice updates and the choice of ``pairs`` pairs may take:
    :func:`atom_and_pair_moves` (n_atoms + n_pairs updates, n_pairs pairs) or
    :func:`base_moves` (2 updates)."""
    return updates * PER_UPDATE + 2 * pairs


@njit(cache=True)
def _next(unif, cur):  # type: ignore[no-untyped-def]
    """The next uniform, advancing the cursor."""
    v = unif[cur[0]]
    cur[0] += 1
    return v


@njit(cache=True)
def _column(lap, u, eu, emu, y, b, out):  # type: ignore[no-untyped-def]
    """Q(z_i | y) on the scale of the mixture, for one clipped atom y."""
    if lap:
        return laplace_column(u, eu, emu, y, b, out)
    return gauss_column(u, eu, y, b, out)


@njit(cache=True)
def _mix_sum_log(lap, u, eu, emu, cnt, tied, atoms, w, r, b, out):  # type: ignore[no-untyped-def]
    """sum_i cnt_i log m_i from all atoms (any order, unclipped); m_i written into ``out``."""
    if lap:
        laplace_mix_atoms(u, eu, emu, atoms, w, r, b, out)
    else:
        gauss_mix_atoms(u, eu, atoms, w, b, r, out)
    return sum_log(out, cnt, tied)


@njit(cache=True)
def _logf(mode, x, lap, by_diff, data, tied, st, r, b, par, k, j):  # type: ignore[no-untyped-def]
    """log f at x for the move ``mode``; ``st`` = (atoms, w, m, vec, after, scratch, trial).

    ATOM: atom k at x, ``vec`` its column where it is, par = (mu, sigma, ., .).
    PAIR: delta = x from atom k to atom j, ``vec`` the difference of their columns.
    MU, LOG_SIGMA: the base's mu = x or log sigma = x, the atoms at the prior quantiles
    (log F0, log(1 - F0)) held in ``atoms`` and ``vec``; par = (prior mean of mu, its sd,
    the other parameter of the base, the base's support r or -1 for the real line).
    ALPHA: log alpha = x, the sticks' l_k in ``vec``, the move's state in ``after`` and
    the base's uniforms of the atoms not yet drawn in ``trial``; par = (shape and rate of
    alpha's prior, mu, sigma) (:func:`alpha_move`).
    """
    u, eu, emu, cnt = data
    atoms, w, m, vec, after, scratch, trial = st
    if mode == ALPHA:
        t = _alpha_sticks(math.exp(x), vec, atoms, w, trial, after, par[2], par[3])
        if t < 0:  # beyond the drawn sticks: the caller draws more and reruns the move
            return -math.inf
        ll = _mix_sum_log(lap, u, eu, emu, cnt, tied, atoms[:t], w[:t], r, b, scratch)
        return par[0] * x - par[1] * math.exp(x) + ll
    if mode == ATOM:
        d = (x - par[0]) / par[1]
        y = min(max(x, -r), r)
        if by_diff:
            if lap:
                ll = laplace_shift(u, eu, emu, cnt, tied, m, w[k], vec, y, b)
            else:
                ll = sum_log_shift(m, cnt, tied, w[k], vec, gauss_column(u, eu, y, b, scratch))
        else:
            trial[:] = atoms
            trial[k] = x
            ll = _mix_sum_log(lap, u, eu, emu, cnt, tied, trial, w, r, b, scratch)
        return -0.5 * d * d + ll
    if mode == PAIR:
        prior = 0.0
        for i in range(after.shape[0]):
            prior -= math.log(max(after[i] - x, 1e-300))
        if by_diff:
            return prior + sum_log_update(m, cnt, tied, x, vec)
        trial[:] = w
        trial[j] += x
        trial[k] -= x
        return prior + _mix_sum_log(lap, u, eu, emu, cnt, tied, atoms, trial, r, b, scratch)
    if mode == MU:
        d = (x - par[0]) / par[1]
        from_base_quantiles(atoms, vec, x, par[2], par[3], trial)
        return -0.5 * d * d + _mix_sum_log(lap, u, eu, emu, cnt, tied, trial, w, r, b, scratch)
    from_base_quantiles(atoms, vec, par[2], math.exp(x), par[3], trial)
    return _mix_sum_log(lap, u, eu, emu, cnt, tied, trial, w, r, b, scratch)


@njit(cache=True)
def _slice(
    mode, x0, fx0, width, lower, upper, lap, by_diff, data, tied, st, r, b, par, k, j, unif, cur
):  # type: ignore[no-untyped-def]
    """One slice-sampling update of x0 (log f(x0) = fx0) on (lower, upper): the new point
    and log f there. The steps of :func:`dpbayes.nonparametric.base.slice_step_f`."""
    level = fx0 + math.log(_next(unif, cur))
    if not math.isfinite(level):  # the current point has no density (nan/-inf): stay
        return x0, fx0
    left = x0 - width * _next(unif, cur)
    right = left + width
    jj = int(MAX_STEPS * _next(unif, cur))
    kk = MAX_STEPS - 1 - jj
    while jj > 0 and left > lower:
        if not _logf(mode, left, lap, by_diff, data, tied, st, r, b, par, k, j) > level:
            break
        left -= width
        jj -= 1
    while kk > 0 and right < upper:
        if not _logf(mode, right, lap, by_diff, data, tied, st, r, b, par, k, j) > level:
            break
        right += width
        kk -= 1
    left = max(left, lower)
    right = min(right, upper)
    for _ in range(MAX_SHRINKS):  # each shrink halves the interval on average; nan is -inf
        x = left + (right - left) * _next(unif, cur)
        fx = _logf(mode, x, lap, by_diff, data, tied, st, r, b, par, k, j)
        if fx > level:
            return x, fx
        if x < x0:
            left = x
        else:
            right = x
    return x0, fx0


@njit(cache=True)
def atom_and_pair_moves(  # type: ignore[no-untyped-def]
    lap, by_diff, u, eu, emu, cnt, tied, r, b, atoms, w, rem, m, ll, mu, sigma,
    lower, upper, n_atoms, n_pairs, atom_width, unif, cur,
):  # fmt: skip
    """Slice moves of the first ``n_atoms`` atoms' locations, then ``n_pairs`` weight
    transfers between two of the first min(T - 1, n_atoms) positions chosen uniformly.

    ``atoms``, ``w`` (size-biased order) and ``m`` (the m_i of the current P) are updated in
    place; returns the log-likelihood sum_i cnt_i log m_i of the final P. ``lap``: the
    Laplace mechanism (else the Gaussian; the arrays as in ``MixtureLikelihood``);
    ``atom_width``: the slice width of an atom move in noise scales over sqrt(n w_k + 1).
    """
    data = (u, eu, emu, cnt)
    nobs, t, n = u.shape[0], atoms.shape[0], np.sum(cnt)
    vec = np.empty(nobs)
    col_k = np.empty(nobs)
    scratch = np.empty(nobs)
    trial_a = np.empty(t)
    trial_w = np.empty(t)
    no_after = np.empty(0)
    for k in range(min(t, n_atoms)):
        wk = w[k]
        x0 = atoms[k]
        _column(lap, u, eu, emu, min(max(x0, -r), r), b, vec)
        st = (atoms, w, m, vec, no_after, scratch, trial_a)
        width = min(2.0 * sigma, atom_width * b / math.sqrt(n * wk + 1.0), 2.0 * r)
        d0 = (x0 - mu) / sigma
        x, fx = _slice(
            ATOM, x0, -0.5 * d0 * d0 + ll, width, lower, upper,
            lap, by_diff, data, tied, st, r, b, (mu, sigma, 0.0, 0.0), k, 0, unif, cur,
        )  # fmt: skip
        atoms[k] = x
        if by_diff:
            _column(lap, u, eu, emu, min(max(x, -r), r), b, scratch)
            for i in range(nobs):
                m[i] += wk * (scratch[i] - vec[i])
            d1 = (x - mu) / sigma
            ll = fx + 0.5 * d1 * d1
        else:
            ll = _mix_sum_log(lap, u, eu, emu, cnt, tied, atoms, w, r, b, m)
    top = min(t - 1, n_atoms)
    if top < 2:
        return ll
    rest = np.empty(t + 1)  # rest[q] = mass at positions >= q (with the remainder)
    for _ in range(n_pairs):
        j = int(_next(unif, cur) * top)
        k = int(_next(unif, cur) * (top - 1))
        if k >= j:
            k += 1
        if k < j:
            j, k = k, j
        s = 0.0
        for q in range(t - 1, -1, -1):
            s += w[q]
            rest[q] = s + rem
        after = rest[j + 1 : k + 1]  # R_q = mass after position q, for q = j..k-1
        if not np.all(after > 0.0):  # weights underflowed to 0 (alpha near 0): no move
            continue
        _column(lap, u, eu, emu, min(max(atoms[j], -r), r), b, vec)
        _column(lap, u, eu, emu, min(max(atoms[k], -r), r), b, col_k)
        for i in range(nobs):
            vec[i] -= col_k[i]
        wj, wk = w[j], w[k]
        f0 = ll
        for q in range(after.shape[0]):
            f0 -= math.log(after[q])
        st = (atoms, w, m, vec, after, scratch, trial_w)
        delta, fx = _slice(
            PAIR, 0.0, f0, wj + wk, -wj, wk,
            lap, by_diff, data, tied, st, r, b, (mu, sigma, 0.0, 0.0), k, j, unif, cur,
        )  # fmt: skip
        w[j], w[k] = wj + delta, wk - delta
        if by_diff:
            for i in range(nobs):
                m[i] += delta * vec[i]
            ll = fx
            for q in range(after.shape[0]):
                ll += math.log(max(after[q] - delta, 1e-300))
        else:
            ll = _mix_sum_log(lap, u, eu, emu, cnt, tied, atoms, w, r, b, m)
    return ll


@njit(cache=True)
def base_moves(  # type: ignore[no-untyped-def]
    lap, u, eu, emu, cnt, tied, r, b, atoms, w, m, ll, mu, sigma,
    mu_mean, mu_sd, log_lo, log_hi, support, unif, cur,
):  # fmt: skip
    """Non-centred slice moves of the base's mu, then log sigma (on [log_lo, log_hi]), with
    every atom's prior quantile under N(mu, sigma^2) (restricted to [-support, support],
    or the real line if support <= 0) held fixed: the move stretches or shifts all of P.

    Prior mu ~ N(mu_mean, mu_sd^2), log sigma uniform. ``atoms`` and ``m`` are updated in
    place; returns (mu, sigma, sum_i cnt_i log m_i).
    """
    data = (u, eu, emu, cnt)
    nobs, t, n = u.shape[0], atoms.shape[0], np.sum(cnt)
    lp = np.empty(t)
    lq = np.empty(t)
    base_quantiles(atoms, mu, sigma, support, lp, lq)
    st = (lp, w, m, lq, np.empty(0), np.empty(nobs), np.empty(t))
    d0 = (mu - mu_mean) / mu_sd
    width = min(sigma, 4.0 * b / math.sqrt(n))
    inf = math.inf
    mu, f1 = _slice(
        MU, mu, -0.5 * d0 * d0 + ll, width, -inf, inf,
        lap, False, data, tied, st, r, b, (mu_mean, mu_sd, sigma, support), 0, 0, unif, cur,
    )  # fmt: skip
    d1 = (mu - mu_mean) / mu_sd
    ls, _ = _slice(
        LOG_SIGMA, math.log(sigma), f1 + 0.5 * d1 * d1, 0.3, log_lo, log_hi,
        lap, False, data, tied, st, r, b, (mu_mean, mu_sd, mu, support), 0, 0, unif, cur,
    )  # fmt: skip
    sigma = math.exp(ls)
    from_base_quantiles(lp, lq, mu, sigma, support, atoms)
    ll = _mix_sum_log(lap, u, eu, emu, cnt, tied, atoms, w, r, b, m)
    return mu, sigma, ll


@njit(cache=True)
def _alpha_sticks(a, lq, atoms, w, pool_u, state, mu, sigma):  # type: ignore[no-untyped-def]
    """Weights at alpha = a of the sticks l_k (w_k = (1 - e^{l_k / a}) e^{sum_{m<k} l_m / a})
    up to the first T >= T0 whose remainder e^{sum_{k<T} l_k / a} is below the tail mass;
    returns T, or -1 if the drawn sticks run out. ``state`` = (log tail mass, T0, atoms
    drawn so far, the base's support r or -1, the remainder, 1 once the sticks ran out):
    atoms beyond those drawn are the base's quantiles ``pool_u``, drawn here when first
    needed."""
    log_tail, t0 = state[0], int(state[1])
    c = 0.0
    t = -1
    for k in range(lq.shape[0]):
        w[k] = -math.expm1(lq[k] / a) * math.exp(c / a)
        c += lq[k]
        if k + 1 >= t0 and c / a < log_tail:
            t = k + 1
            break
    if t < 0:
        state[5] = 1.0
        return -1
    drawn = int(state[2])
    r = state[3]
    lo = (-r - mu) / sigma if r > 0 else -math.inf
    hi = (r - mu) / sigma if r > 0 else math.inf
    for k in range(drawn, t):
        x = mu + sigma * truncnorm_ppf_scalar(pool_u[k], lo, hi)
        atoms[k] = min(max(x, -r), r) if r > 0 else x
    state[2] = max(drawn, t)
    state[4] = math.exp(c / a)
    return t


@njit(cache=True)
def alpha_move(  # type: ignore[no-untyped-def]
    lap, u, eu, emu, cnt, tied, r, b, atoms, lq, t0, pool_u, w, m, ll, alpha,
    shape, rate, mu, sigma, support, log_tail, unif, cur,
):  # fmt: skip
    """Non-centred slice move of log alpha, prior alpha ~ Gamma(shape, rate): the sticks
    keep their quantiles l_k = alpha log(1 - V_k) under Beta(1, alpha) (size-biased
    order), so alpha' gives V_k' = 1 - e^{l_k / alpha'}.

    P at alpha' keeps the first T(alpha') sticks: the fewest T >= T0 (the current number)
    whose remainder is below the tail mass e^log_tail, as at alpha (log f is one function
    of alpha during the move). ``lq``, ``atoms``, ``pool_u`` and ``w`` have room for
    sticks beyond T0: l_k and the base's quantiles of the atoms there drawn by the
    caller. Returns (alpha, T, remainder, sum_i cnt_i log m_i) with atoms[:T], w[:T] and
    m updated in place, or T = -1 if a density evaluation needed more sticks than drawn:
    the caller then draws more (appending to ``lq`` and ``pool_u``, the same uniforms)
    and reruns the move, which retraces its steps, as if all had been drawn at first."""
    data = (u, eu, emu, cnt)
    state = np.array([log_tail, float(t0), float(t0), support, 0.0, 0.0])
    st = (atoms, w, m, lq, state, np.empty(u.shape[0]), pool_u)
    par = (shape, rate, mu, sigma)
    la0 = math.log(alpha)
    f0 = shape * la0 - rate * alpha + ll
    la, _ = _slice(
        ALPHA, la0, f0, 0.5, -math.inf, math.inf,
        lap, False, data, tied, st, r, b, par, 0, 0, unif, cur,
    )  # fmt: skip
    a = math.exp(la)
    t = _alpha_sticks(a, lq, atoms, w, pool_u, state, mu, sigma)
    if state[5] > 0.0:
        return alpha, -1, 0.0, ll
    ll = _mix_sum_log(lap, u, eu, emu, cnt, tied, atoms[:t], w[:t], r, b, m)
    return a, t, state[4], ll
