"""Compiled (numba) sweeps of the noise-aware Bayesian-network posterior (issue 10).

The sampler of :mod:`.noise_aware`, on the joint contingency table N. A sweep
is two kinds of moves, each leaving P(N | release) invariant:

* **pair moves** (``cells`` per sweep): pick two joint cells i != j uniformly; the number
  t of records moved from i to j has an exact full conditional over every feasible t in
  [-N_j, N_i]. Its log is built by first differences, all logs of integers shifted by the
  prior's pseudo-counts or Laplace slopes, read from tables (lgamma(x + 1) - lgamma(x) =
  log x): O(N_i + N_j) additions and exps per move. Three moves in four are
  *overrelaxed* (Neal 1998): the current t's position in the conditional's cdf,
  uniform within its atom, is reflected, u -> 1 - u, and the new t is the atom holding
  it. That maps the conditional onto itself and is reversible (the overlap of atom t
  with the reflection of atom t' is symmetric), so it is exact; it suppresses the
  random walk of plain Gibbs along the posterior's correlations. The fourth move is a
  plain Gibbs draw, which keeps the chain irreducible.
* **relabelling moves** (:func:`_relabel_moves`): Metropolis-Hastings moves that change
  one variable's value in T random records at once, i.e. a whole CPT row.

Probabilities below e^-40 of a conditional's largest are set to 0 (``CUTOFF``). The
targets' normalisers are in :mod:`._normaliser_kernels`. No randomness is drawn here: the
kernels get the uniforms they need, drawn from the chain's numpy Generator beforehand.
Every kernel reads a ``Target`` ``tg`` and changes a ``State`` ``st`` in place (the
NamedTuples of :mod:`.sampler`, whose ``step`` and ``resize`` call them on a copy).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from dpbayes.release.bayes_net._normaliser_kernels import _map_pair_terms, _map_row_z, _zval

__all__ = ["resize_moves", "run_sweeps"]

# e^-40 = 4e-18 is below the rounding of the cumulative sum (>= 1) it would be added to
CUTOFF = -40.0


@njit(cache=True)
def _pair_moves(c, tg, st, uniforms, lp, ibuf, fbuf):  # type: ignore[no-untyped-def]
    """``uniforms.shape[0]`` exact-conditional pair moves on chain c (module docstring).

    st.counts (m, cells) joint counts; famc (m, F) and rowc (m, R) family-cell and
    parent-row counts (flat over the nodes: ``fam_idx[v, cell]``, ``row_idx[v, cell]``);
    obsv (m, O) the true values obs_matrix @ counts of the released statistics;
    log_k[x] = log x, log_alpha[x] = log(alpha + x), log_big_a[v, x] = log(A_v + x)
    (A_v = alpha * k_v); released (O,) the released values (clipped to the truncation
    range for counts); bd_w weighs the Bayesian-Dirichlet terms, lin (F,) adds
    sum_f lin_f c_f, and every binary node v with ztix[v] >= 0 adds -zw log Z(c_row) per
    row (:func:`log_trim_mass`, trim zp[ztix[v]], sib the other cell of each family
    cell's row), and every node v with mz's mG[v] > 0 adds -sum_rows log Z(c_row) of the
    exponential mechanism over its grid (:func:`_map_z`); see :func:`run_sweeps`.
    uniforms (moves, 3); lp, ibuf (9, max(nodes, O)), fbuf (2, O) work space.
    """
    state, famc, rowc, obsv = st.counts, st.famc, st.rowc, st.obsv
    fam_idx, row_idx, obs_matrix, released = tg.fam_idx, tg.row_idx, tg.obs_matrix, tg.released
    log_k, log_alpha, log_big_a = tg.log_k, tg.log_alpha, tg.log_big_a
    inv_scale, alpha, ex = tg.inv_scale, tg.alpha, tg.extra
    bd_w, lin, sib, zw, mz = ex.bd_w, ex.lin, ex.sib, ex.zw, ex.mz
    ztab, ztix, zp = ex.ztab, ex.ztix, ex.zp
    cells = state.shape[1]
    nodes = fam_idx.shape[0]
    n_obs = obs_matrix.shape[0]
    cf_i, cf_j, act_r, cr_i, cr_j, act_o = ibuf[0], ibuf[1], ibuf[2], ibuf[3], ibuf[4], ibuf[5]
    act_d, act_x = fbuf[0], fbuf[1]
    zf_i, zf_j, zv = ibuf[6], ibuf[7], ibuf[8]
    moves = uniforms.shape[0]
    for mv in range(moves):
        i = min(int(uniforms[mv, 0] * cells), cells - 1)
        j = min(int(uniforms[mv, 1] * (cells - 1)), cells - 2)
        if j >= i:
            j += 1
        ni = state[c, i]
        nj = state[c, j]
        if ni + nj == 0:
            continue
        nf = 0
        nr = 0
        dlin = 0.0
        for v in range(nodes):
            if fam_idx[v, i] != fam_idx[v, j]:
                cf_i[nf] = famc[c, fam_idx[v, i]] - 1
                cf_j[nf] = famc[c, fam_idx[v, j]]
                zf_i[nf] = fam_idx[v, i]
                zf_j[nf] = fam_idx[v, j]
                zv[nf] = v
                dlin += lin[fam_idx[v, j]] - lin[fam_idx[v, i]]
                nf += 1
                if row_idx[v, i] != row_idx[v, j]:
                    act_r[nr] = v
                    cr_i[nr] = rowc[c, row_idx[v, i]] - 1
                    cr_j[nr] = rowc[c, row_idx[v, j]]
                    nr += 1
        no = 0
        for o in range(n_obs):
            dd = obs_matrix[o, j] - obs_matrix[o, i]
            if dd != 0.0:
                act_x[no] = released[o] - obsv[c, o]
                act_d[no] = dd
                act_o[no] = o
                no += 1
        lo = -nj
        size = ni + nj + 1
        # first differences lp[k + 1] - lp[k] (t = lo + k -> t + 1), one term at a time
        lp[0] = 0.0
        for k in range(size - 1):
            lp[k + 1] = log_k[ni - lo - k] - log_k[nj + lo + k + 1] + dlin
        if bd_w != 0.0:
            for a in range(nf):
                bj = cf_j[a] + lo
                bi = cf_i[a] - lo
                for k in range(size - 1):
                    lp[k + 1] += bd_w * (log_alpha[bj + k] - log_alpha[bi - k])
            for a in range(nr):
                row = log_big_a[act_r[a]]
                bi = cr_i[a] - lo
                bj = cr_j[a] + lo
                for k in range(size - 1):
                    lp[k + 1] += bd_w * (row[bi - k] - row[bj + k])
        for a in range(no):
            dd = act_d[a]
            x0 = act_x[a] - dd * lo
            for k in range(size - 1):
                x = x0 - dd * k
                lp[k + 1] -= (abs(x - dd) - abs(x)) * inv_scale
        for k in range(1, size):
            lp[k] = lp[k - 1] + lp[k]
        if zw != 0.0:
            for a in range(nf):
                tix = ztix[zv[a]]
                if tix < 0:
                    continue
                fi = zf_i[a]
                fj = zf_j[a]
                ci = famc[c, fi]
                cj = famc[c, fj]
                if sib[fi] == fj:  # same row: (c_i - t, c_j + t)
                    for k in range(size):
                        t = lo + k
                        lp[k] -= zw * _zval(ztab, tix, ci - t, cj + t, alpha, zp[tix])
                else:
                    si = famc[c, sib[fi]]
                    sj = famc[c, sib[fj]]
                    for k in range(size):
                        t = lo + k
                        lp[k] -= zw * (
                            _zval(ztab, tix, ci - t, si, alpha, zp[tix])
                            + _zval(ztab, tix, cj + t, sj, alpha, zp[tix])
                        )
        m_g = mz[2]
        for a in range(nf):
            v = zv[a]
            if m_g[v] == 0:
                continue
            _map_pair_terms(mz, famc, c, v, zf_i[a], zf_j[a], lo, size, lp)
        top = lp[0]
        for k in range(1, size):
            if lp[k] > top:
                top = lp[k]
        total = 0.0
        for k in range(size):
            d = lp[k] - top
            if d > CUTOFF:
                total += math.exp(d)
            lp[k] = total
        if mv % 4 != 0:
            # overrelaxed: reflect the current value's position in the cdf (see docstring)
            k0 = nj  # t = 0
            below = lp[k0 - 1] if k0 > 0 else 0.0
            u = total - (below + uniforms[mv, 2] * (lp[k0] - below))
        else:
            u = uniforms[mv, 2] * total
        pick = size - 1
        for k in range(size):
            if lp[k] > u:
                pick = k
                break
        t = lo + pick
        if t != 0:
            state[c, i] -= t
            state[c, j] += t
            for v in range(nodes):
                famc[c, fam_idx[v, i]] -= t
                famc[c, fam_idx[v, j]] += t
                rowc[c, row_idx[v, i]] -= t
                rowc[c, row_idx[v, j]] += t
            for a in range(no):
                obsv[c, act_o[a]] += act_d[a] * t


@njit(cache=True)
def _add_family(tg, famc, rowc, c, cell, t):  # type: ignore[no-untyped-def]
    """Add t records to joint ``cell`` in the family/row counts of chain c; returns the
    change of bd_w [sum_f lgamma(alpha + c_f) - sum_r lgamma(A_v + c_r)] (the record-level
    Bayesian-Dirichlet log prior, weighted) + sum_f lin_f c_f - zw sum_r log Z(c_r)
    - sum_r log Z_map(c_r), the terms of :func:`_pair_moves`."""
    fam_idx, row_idx, lg_alpha, lg_big_a = tg.fam_idx, tg.row_idx, tg.lg_alpha, tg.lg_big_a
    alpha, ex = tg.alpha, tg.extra
    bd_w, lin, sib, ztab, ztix, zp, zw, mz = (
        ex.bd_w,
        ex.lin,
        ex.sib,
        ex.ztab,
        ex.ztix,
        ex.zp,
        ex.zw,
        ex.mz,
    )
    m_g = mz[2]
    delta = 0.0
    for v in range(fam_idx.shape[0]):
        f = fam_idx[v, cell]
        old = famc[c, f]
        delta += bd_w * (lg_alpha[old + t] - lg_alpha[old]) + lin[f] * t
        tix = ztix[v]
        if zw != 0.0 and tix >= 0:
            other = famc[c, sib[f]]
            delta -= zw * (
                _zval(ztab, tix, old + t, other, alpha, zp[tix])
                - _zval(ztab, tix, old, other, alpha, zp[tix])
            )
        if m_g[v] > 0:
            delta -= _map_row_z(mz, famc, c, v, f, t) - _map_row_z(mz, famc, c, v, f, 0)
        famc[c, f] = old + t
        r = row_idx[v, cell]
        old = rowc[c, r]
        delta -= bd_w * (lg_big_a[v, old + t] - lg_big_a[v, old])
        rowc[c, r] = old + t
    return delta


@njit(cache=True)
def _relabel_moves(c, tg, st, uniforms, src, cnt, dob):  # type: ignore[no-untyped-def]
    """Metropolis-Hastings moves that change one variable's value in T random records.

    A move picks a node v, a cell (pa, k) of its family table and another value k'
    uniformly, T uniformly in 1..widths[v], and T records uniformly among the c_{v,pa,k}
    records of that cell (their joint cells by a multivariate hypergeometric draw, one
    slice after another); their value of v becomes k'. The reverse move picks the same
    cell (pa, k'), k and T with the same probability, so at the level of the records
    (target: the Bayesian-Dirichlet marginal without the multinomial coefficient, times
    the Laplace factors) the acceptance ratio is
    p(x') / p(x) * C(c_{pa,k}, T) / C(c_{pa,k'} + T, T). By exchangeability the move on
    the counts N is reversible with respect to P(N | release). It moves the whole row
    of a CPT at once, the direction along which the pairwise Gibbs moves are slow.

    uniforms (moves, 5 + max slices); st.tried/st.accepted (m, nodes) counters (added
    to); src, cnt (max slices,), dob (O,) work space; the target's extra terms are those
    of :func:`_add_family`.
    """
    state, famc, rowc, obsv = st.counts, st.famc, st.rowc, st.obsv
    widths, tried, accepted = st.widths, st.tried, st.accepted
    lg_fact, fam_off, cards, strides = tg.lg_fact, tg.fam_off, tg.cards, tg.strides
    fam_ptr, fam_cells, obs_matrix, released = tg.fam_ptr, tg.fam_cells, tg.obs_matrix, tg.released
    inv_scale = tg.inv_scale
    nodes = tg.fam_idx.shape[0]
    n_obs = obs_matrix.shape[0]
    moves = uniforms.shape[0]
    for mv in range(moves):
        u = uniforms[mv]
        v = min(int(u[0] * nodes), nodes - 1)
        kv = cards[v]
        if kv < 2:
            continue
        size = fam_off[v + 1] - fam_off[v]
        fl = min(int(u[1] * size), size - 1)
        k = fl % kv
        k2 = min(int(u[2] * (kv - 1)), kv - 2)
        if k2 >= k:
            k2 += 1
        big_t = 1 + min(int(u[3] * widths[v]), widths[v] - 1)
        f_from = fam_off[v] + fl
        f_to = f_from + (k2 - k)
        have = famc[c, f_from]
        tried[c, v] += 1
        if big_t > have:
            continue
        # hypergeometric split of the T records over the joint cells of the cell
        rest = have
        left = big_t
        ns = 0
        for p in range(fam_ptr[f_from], fam_ptr[f_from + 1]):
            cell = fam_cells[p]
            good = state[c, cell]
            if good == 0:
                continue
            if left == 0:
                break
            bad = rest - good
            if bad == 0:
                x = left
            else:
                lo = max(0, left - bad)
                hi = min(good, left)
                # inverse cdf from lo, pmf ratios pmf(x+1)/pmf(x)
                target = u[5 + ns]
                pmf = math.exp(
                    lg_fact[good]
                    - lg_fact[lo]
                    - lg_fact[good - lo]
                    + lg_fact[bad]
                    - lg_fact[left - lo]
                    - lg_fact[bad - left + lo]
                    - lg_fact[rest]
                    + lg_fact[left]
                    + lg_fact[rest - left]
                )
                x = lo
                cum = pmf
                while cum < target and x < hi:
                    pmf *= (good - x) * (left - x) / ((x + 1.0) * (bad - left + x + 1.0))
                    x += 1
                    cum += pmf
            src[ns] = cell
            cnt[ns] = x
            ns += 1
            rest -= good
            left -= x
        # log acceptance: record-level prior and likelihood change, proposal ratio
        shift = (k2 - k) * strides[v]
        log_a = (
            lg_fact[have]
            - lg_fact[have - big_t]
            - lg_fact[famc[c, f_to] + big_t]
            + lg_fact[famc[c, f_to]]
        )
        for o in range(n_obs):
            dob[o] = 0.0
        for a in range(ns):
            x = cnt[a]
            if x == 0:
                continue
            cell = src[a]
            log_a += _add_family(tg, famc, rowc, c, cell, -x)
            log_a += _add_family(tg, famc, rowc, c, cell + shift, x)
            for o in range(n_obs):
                dob[o] += x * (obs_matrix[o, cell + shift] - obs_matrix[o, cell])
        for o in range(n_obs):
            if dob[o] != 0.0:
                old = abs(released[o] - obsv[c, o])
                new = abs(released[o] - obsv[c, o] - dob[o])
                log_a -= (new - old) * inv_scale
        if math.log(u[4] + 1e-300) < log_a:
            accepted[c, v] += 1
            for a in range(ns):
                state[c, src[a]] -= cnt[a]
                state[c, src[a] + shift] += cnt[a]
            for o in range(n_obs):
                obsv[c, o] += dob[o]
        else:  # undo the family and row counts
            for a in range(ns):
                x = cnt[a]
                if x == 0:
                    continue
                cell = src[a]
                _add_family(tg, famc, rowc, c, cell + shift, -x)
                _add_family(tg, famc, rowc, c, cell, x)


@njit(cache=True)
def run_sweeps(tg, st, pair_uniforms, relabel_uniforms, out):  # type: ignore[no-untyped-def]
    """Sweeps on every chain: ``pair_uniforms.shape[2]`` pair moves then
    ``relabel_uniforms.shape[2]`` relabelling moves; famc after each sweep to ``out``.

    pair_uniforms (m, sweeps, moves, 3), relabel_uniforms (m, sweeps, moves, 5 + slices);
    out (m, sweeps, F). See :func:`_pair_moves` and :func:`_relabel_moves`.

    The target on N is the multinomial coefficient, bd_w times the Bayesian-Dirichlet
    terms, the Laplace factors, sum_f lin_f c_f and -zw sum_rows log Z(c_row) over the
    rows of the binary nodes with ztix[v] >= 0 (noisy counts: bd_w = 1, lin = 0, zw = 0),
    and -sum_rows log Z_map(c_row) over the rows of the nodes with mz's mG[v] > 0 (the
    exponential mechanism's normaliser over node v's grid, ``map``; :func:`_map_z`).
    mz = (mgrid (nodes, G, k), mbase (nodes, G), mG (nodes,), mtab (lazily filled
    log-Z tables, NaN = unknown), moff, mside (nodes,), mw, fam_off, cards, cbuf (k,)).
    """
    famc = st.famc
    m = st.counts.shape[0]
    sweeps = pair_uniforms.shape[1]
    nodes = tg.fam_idx.shape[0]
    n_obs = tg.obs_matrix.shape[0]
    lp = np.empty(tg.log_k.shape[0] + 1)
    ibuf = np.empty((9, max(nodes, n_obs)), dtype=np.int64)
    fbuf = np.empty((2, max(n_obs, 1)))
    max_sl = max(relabel_uniforms.shape[3] - 5, 1)
    src = np.empty(max_sl, dtype=np.int64)
    cnt = np.empty(max_sl, dtype=np.int64)
    dob = np.empty(max(n_obs, 1))
    for c in range(m):
        for s in range(sweeps):
            _pair_moves(c, tg, st, pair_uniforms[c, s], lp, ibuf, fbuf)
            _relabel_moves(c, tg, st, relabel_uniforms[c, s], src, cnt, dob)
            for f in range(famc.shape[1]):
                out[c, s, f] = famc[c, f]


@njit(cache=True)
def resize_moves(tg, st, log_prior_n, uniforms):  # type: ignore[no-untyped-def]
    """Metropolis moves that change the number of records n (add/remove releases, n private).

    For noisy counts or Fourier coefficients (bd_w = 1, no other terms) with a prior
    ``log_prior_n`` on n (length n_max + 1; n above n_max has probability 0). A move picks
    a joint cell i uniformly and d uniformly in {-W..-1, 1..W} (W = st.resize_widths[c]) and
    proposes N_i + d (rejected below 0 or above n_max): a symmetric proposal, accepted with
    the target's ratio, whose log is

        log pi(n') - log pi(n) + lgamma(n' + 1) - lgamma(n + 1) - lgamma(N_i' + 1)
        + lgamma(N_i + 1) + sum_v [lgamma(alpha + c_f') - lgamma(alpha + c_f)
        - lgamma(A_v + c_r') + lgamma(A_v + c_r)] - sum_o (|r_o - x_o'| - |r_o - x_o|) / b

    (the multinomial coefficient, the Bayesian-Dirichlet terms of the family cell f and
    parent row r of i in every node v, and the Laplace factors of the released statistics
    x_o = obs_matrix[o] . N). uniforms (m, moves, 3); st.resize_tried, st.resize_accepted
    (m,) counters.
    """
    state, famc, rowc, obsv = st.counts, st.famc, st.rowc, st.obsv
    widths, tried, accepted = st.resize_widths, st.resize_tried, st.resize_accepted
    fam_idx, row_idx, lg_alpha, lg_big_a = tg.fam_idx, tg.row_idx, tg.lg_alpha, tg.lg_big_a
    lg_fact, obs_matrix, released, inv_scale = tg.lg_fact, tg.obs_matrix, tg.released, tg.inv_scale
    m = state.shape[0]
    cells = state.shape[1]
    nodes = fam_idx.shape[0]
    n_obs = obs_matrix.shape[0]
    n_max = log_prior_n.shape[0] - 1
    for c in range(m):
        n = 0
        for i in range(cells):
            n += state[c, i]
        w = widths[c]
        for mv in range(uniforms.shape[1]):
            i = min(int(uniforms[c, mv, 0] * cells), cells - 1)
            k = min(int(uniforms[c, mv, 1] * 2 * w), 2 * w - 1)
            d = k - w if k < w else k - w + 1
            tried[c] += 1
            old = state[c, i]
            new = old + d
            n_new = n + d
            if new < 0 or n_new > n_max or n_new < 0:
                continue
            delta = log_prior_n[n_new] - log_prior_n[n] + lg_fact[n_new] - lg_fact[n]
            delta -= lg_fact[new] - lg_fact[old]
            for v in range(nodes):
                f = fam_idx[v, i]
                r = row_idx[v, i]
                delta += lg_alpha[famc[c, f] + d] - lg_alpha[famc[c, f]]
                delta -= lg_big_a[v, rowc[c, r] + d] - lg_big_a[v, rowc[c, r]]
            for o in range(n_obs):
                mo = obs_matrix[o, i]
                if mo != 0.0:
                    x = obsv[c, o]
                    delta -= (abs(released[o] - x - mo * d) - abs(released[o] - x)) * inv_scale
            if math.log(max(uniforms[c, mv, 2], 1e-300)) < delta:
                accepted[c] += 1
                state[c, i] = new
                n = n_new
                for v in range(nodes):
                    famc[c, fam_idx[v, i]] += d
                    rowc[c, row_idx[v, i]] += d
                for o in range(n_obs):
                    obsv[c, o] += obs_matrix[o, i] * d
