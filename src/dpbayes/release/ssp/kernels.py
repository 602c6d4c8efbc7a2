"""Compiled steps of the linear noise-aware sampler (numba): a block of Gibbs steps of
every chain (:func:`gibbs_block`: steps 1, 1b, 2, 3 and 4 of
:mod:`dpbayes.release.ssp.noise_aware`), its parts (:func:`statistics_draw`,
:func:`standardise`, the non-centred moves :func:`noncentred_moves`,
:func:`weights_draw`, :func:`covariance_draw`) and the release's likelihood with the
statistics integrated out (:func:`collapsed_loglik_stack`, for step 0).

Post-processing only: no randomness is drawn here (every kernel is given the normals and
uniforms it needs, drawn by the caller from the chain's generator) and nothing here
touches the release mechanism. Each kernel loops over the chains of a stack.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from dpbayes.release.linalg_kernels import backward as _backward
from dpbayes.release.linalg_kernels import chol_from as _chol_from
from dpbayes.release.linalg_kernels import chol_into as _chol_into
from dpbayes.release.linalg_kernels import forward as _forward

__all__ = [
    "collapsed_loglik_stack",
    "covariance_stack",
    "gibbs_block",
    "noncentred_moves",
    "standardise",
    "statistics_stack",
]


@njit(cache=True)
def _copy(src, dst, r):  # type: ignore[no-untyped-def]
    """dst[:r] = src[:r] (a loop: numba's slice assignment compiles far more slowly)."""
    for i in range(r):
        dst[i] = src[i]


@njit(cache=True)
def _copy_block(src, dst, r, c):  # type: ignore[no-untyped-def]
    """dst[:r, :c] = src[:r, :c]."""
    for i in range(r):
        for j in range(c):
            dst[i, j] = src[i, j]


@njit(cache=True)
def _isserlis_chol(cb, n, rows, cols, om, kk, a, lb):  # type: ignore[no-untyped-def]
    """K = n K(C) (Isserlis, K_(ij),(kl) = n (C_ik C_jl + C_il C_jk) over the upper-triangle
    entries (rows[u], cols[u])) into kk and the lower Cholesky factor of K + diag om into lb
    (a: scratch)."""
    p = rows.size
    for u in range(p):
        i, j = rows[u], cols[u]
        for v in range(u + 1):
            k, l = rows[v], cols[v]
            val = n * (cb[i, k] * cb[j, l] + cb[i, l] * cb[j, k])
            kk[u, v] = val
            kk[v, u] = val
            a[u, v] = val  # the lower triangle: all the factorisation reads
        a[u, u] += om[u]
    if not _chol_into(a, lb):
        raise np.linalg.LinAlgError("n K(C) + diag omega is not positive definite")


@njit(cache=True)
def collapsed_loglik_stack(c, n, s_obs, rows, cols, omega):  # type: ignore[no-untyped-def]
    """For each chain b: K = n K(C_b) (:func:`_isserlis_chol`), the lower Cholesky factor L
    of K + diag omega_b, and log N(s_obs; n vech C_b, K + diag omega_b) without its
    -p/2 log(2 pi). Returns (loglik (chains,), K (chains, p, p), L (chains, p, p))."""
    nc = c.shape[0]
    p = rows.size
    ll = np.empty(nc)
    kk = np.empty((nc, p, p))
    chol = np.empty((nc, p, p))
    a = np.empty((p, p))
    z = np.empty(p)
    for b in range(nc):
        cb = c[b]
        lb = chol[b]
        _isserlis_chol(cb, n, rows, cols, omega[b], kk[b], a, lb)
        for u in range(p):
            z[u] = s_obs[u] - n * cb[rows[u], cols[u]]
        _forward(lb, z, z)  # z = L^-1 (s_obs - n vech C)
        acc = 0.0
        logdet = 0.0
        for u in range(p):
            acc += z[u] * z[u]
            logdet += math.log(lb[u, u])
        ll[b] = -0.5 * acc - logdet
    return ll, kk, chol


@njit(cache=True)
def _lgl_from(lsig, g11, gx, out_m, out_v, tmp, r0):  # type: ignore[no-untyped-def]
    """Rows and columns r0.. of M = L G11 L' and rows r0.. of v = L g for the
    lower-triangular L, given the rest of M and v (they depend on L's rows < r0 only;
    tmp: d x d scratch, its rows r0.. written)."""
    d = lsig.shape[0]
    for i in range(r0, d):
        for j in range(d):
            tmp[i, j] = 0.0
        for k in range(i + 1):
            lik = lsig[i, k]
            for j in range(d):
                tmp[i, j] += lik * g11[k, j]
    for i in range(r0, d):
        for j in range(i + 1):
            s = 0.0
            for k in range(j + 1):
                s += tmp[i, k] * lsig[j, k]
            out_m[i, j] = s
            out_m[j, i] = s
        s = 0.0
        for k in range(i + 1):
            s += lsig[i, k] * gx[k]
        out_v[i] = s


@njit(cache=True)
def _lgl(lsig, g11, gx, out_m, out_v, tmp):  # type: ignore[no-untyped-def]
    """M = L G11 L' and v = L g for the lower-triangular L (tmp: d x d scratch)."""
    _lgl_from(lsig, g11, gx, out_m, out_v, tmp, 0)


@njit(cache=True)
def _nc_statistics(sx, w, mm, v, gyy, n, sig, pos, out):  # type: ignore[no-untyped-def]
    """s(w, Sigma, G) = vech(n C + sqrt(n) L G L') with L = chol(C) = [[L_S, 0], [w' L_S, sig]]:
    S_xx = n Sigma + rn M, S_xy = S_xx w + rn sig v, S_yy = w' S_xx w + 2 rn sig w'v
    + n sig^2 + rn sig^2 g_yy (M = L_S G11 L_S', v = L_S g_xy)."""
    d = sx.shape[0]
    rn = math.sqrt(n)
    quad = 0.0
    wv = 0.0
    for i in range(d):
        sxy = rn * sig * v[i]
        for j in range(d):
            sij = n * sx[i, j] + rn * mm[i, j]
            sxy += sij * w[j]
            if j >= i:
                out[pos[i, j]] = sij
        out[pos[i, d]] = sxy
        quad += w[i] * (sxy - rn * sig * v[i])
        wv += w[i] * v[i]
    out[pos[d, d]] = quad + 2.0 * rn * sig * wv + n * sig * sig + rn * sig * sig * gyy


@njit(cache=True)
def _gauss_ll(s_obs, s, omega):  # type: ignore[no-untyped-def]
    acc = 0.0
    for u in range(s.size):
        r = s_obs[u] - s[u]
        acc += r * r / omega[u]
    return -0.5 * acc


@njit(cache=True)
def _log_prior_sigma(sx, lsig, kind, var_max, tr_max, nu0, psi0):  # type: ignore[no-untyped-def]
    """log p(Sigma) up to a constant, given its Cholesky factor: kind 0, the bounded prior
    prod_j Sigma_jj^(-(d-1)/2) on {Sigma_jj <= var_max, tr Sigma <= tr_max}; kind 1,
    IW(nu0, psi0) (:class:`dpbayes.release.ssp.noise_aware.FeatureCovariancePrior`)."""
    d = sx.shape[0]
    if kind == 0:
        tr = 0.0
        acc = 0.0
        for j in range(d):
            if sx[j, j] > var_max:
                return -np.inf
            tr += sx[j, j]
            acc += math.log(sx[j, j])
        if tr > tr_max:
            return -np.inf
        return -0.5 * (d - 1) * acc
    logdet = 0.0
    for j in range(d):
        logdet += 2.0 * math.log(lsig[j, j])
    # tr(psi0 Sigma^-1) = sum_j (Sigma^-1 psi0)_jj, column by column by two triangular solves
    x = np.empty(d)
    y = np.empty(d)
    acc = 0.0
    for col in range(d):
        for i in range(d):
            y[i] = psi0[i, col]
        _forward(lsig, y, x)
        _backward(lsig, x, y)
        acc += y[col]
    return -0.5 * (nu0 + d + 1) * logdet - 0.5 * acc


@njit(cache=True)
def _noncentred_chain(  # type: ignore[no-untyped-def]
    w, sig_b, g11, gx, gyy, om, s_obs, pos, n, sig, lam, kind, var_max, tr_max, nu0, psi0,
    scale_s, z_w, u_w, z_s, u_s, acc_s, s_in, out_s,
):  # fmt: skip
    """One sweep of the moves of :func:`noncentred_moves` for one chain, in place (w,
    sig_b); writes s at the final state into out_s; returns 1 if the w move was accepted."""
    d = w.size
    p = s_obs.size
    rn = math.sqrt(n)
    acc_w = 0
    lsig = np.zeros((d, d))
    lprop = np.zeros((d, d))
    mm = np.empty((d, d))
    mprop = np.empty((d, d))
    v = np.empty(d)
    vprop = np.empty(d)
    s = np.empty(p)
    sprop = np.empty(p)
    prec = np.empty((d, d))
    lprec = np.zeros((d, d))
    rhs = np.empty(d)
    mu = np.empty(d)
    wprop = np.empty(d)
    oxy = np.empty(d)
    row = np.empty(d)
    tmp = np.empty((d, d))
    sxx = np.empty((d, d))
    if not _chol_into(sig_b, lsig):  # numerically singular: no move for this chain
        _copy(s_in, out_s, s_in.size)
        return 0
    _lgl(lsig, g11, gx, mm, v, tmp)
    # (a) w: the exact Gaussian conditional of everything but the y'y entry, as an
    # independence proposal accepted on the y'y entry's likelihood ratio
    for i in range(d):
        oxy[i] = om[pos[i, d]]
        for k in range(d):
            sxx[i, k] = n * sig_b[i, k] + rn * mm[i, k]
    for i in range(d):
        for j in range(i + 1):  # the precision is symmetric (x * y = y * x exactly)
            acc = 0.0
            for k in range(d):
                acc += sxx[i, k] * sxx[j, k] / oxy[k]
            prec[i, j] = acc + (lam if i == j else 0.0)
            prec[j, i] = prec[i, j]
        r = 0.0
        for k in range(d):
            r += sxx[i, k] * (s_obs[pos[k, d]] - rn * sig * v[k]) / oxy[k]
        rhs[i] = r
    if not _chol_into(prec, lprec):
        raise ValueError("w precision is not positive definite")
    # mu = prec^-1 rhs; proposal mu + L^-T z
    _forward(lprec, rhs, mu)
    _backward(lprec, mu, mu)
    _backward(lprec, z_w, wprop)
    for u in range(d):
        wprop[u] += mu[u]
    yy = pos[d, d]
    _nc_statistics(sig_b, w, mm, v, gyy, n, sig, pos, s)
    _nc_statistics(sig_b, wprop, mm, v, gyy, n, sig, pos, sprop)
    r_cur = s_obs[yy] - s[yy]
    r_new = s_obs[yy] - sprop[yy]
    if math.log(u_w) < -0.5 * (r_new * r_new - r_cur * r_cur) / om[yy]:
        for i in range(d):
            w[i] = wprop[i]
        for u in range(p):
            s[u] = sprop[u]
        acc_w += 1
    # (b) Sigma_x entry by entry: symmetric random walk, G fixed
    ll = _gauss_ll(s_obs, s, om)
    lp = _log_prior_sigma(sig_b, lsig, kind, var_max, tr_max, nu0, psi0)
    e = 0
    for i in range(d):
        for j in range(i, d):
            old = sig_b[i, j]
            new = old + scale_s[e] * z_s[e]
            sig_b[i, j] = new
            sig_b[j, i] = new
            ok = (i != j) or new > 0.0
            if ok:
                # rows < j of the factor, M and v are those of the current state
                _copy_block(lsig, lprop, j, d)
                ok = _chol_from(sig_b, lprop, j)
            if ok:
                if kind == 0 and i != j:  # the bounded prior depends on the diagonal only
                    lp_new = lp
                else:
                    lp_new = _log_prior_sigma(sig_b, lprop, kind, var_max, tr_max, nu0, psi0)
                ok = lp_new > -np.inf
            if ok:
                _copy_block(mm, mprop, j, j)
                _copy(v, vprop, j)
                _lgl_from(lprop, g11, gx, mprop, vprop, tmp, j)
                _nc_statistics(sig_b, w, mprop, vprop, gyy, n, sig, pos, sprop)
                ll_new = _gauss_ll(s_obs, sprop, om)
                ok = math.log(u_s[e]) < ll_new - ll + lp_new - lp
            if ok:
                ll, lp = ll_new, lp_new
                # the proposed factor, M, v and statistics become the state (the old
                # state's arrays are the next proposal's scratch)
                lsig, lprop = lprop, lsig
                mm, mprop = mprop, mm
                v, vprop = vprop, v
                s, sprop = sprop, s
                acc_s[e] += 1
            else:
                sig_b[i, j] = old
                sig_b[j, i] = old
            e += 1
    # (c) feature j's scale with w_j moved against it: Sigma -> D Sigma D,
    # w -> D^-1 w, D = diag(1, .., e^delta, .., 1); L -> D L, M -> D M D, v -> D v,
    # so S_xx -> D S_xx D, S_xy -> D S_xy and S_yy is unchanged. Jacobian
    # e^((d + 1) delta) (Sigma) times e^(-delta) (w_j).
    for j in range(d):
        delta = scale_s[e] * z_s[e]
        f = math.exp(delta)
        _copy(sig_b[j], row, d)
        _copy_block(lsig, lprop, d, d)
        _copy_block(mm, mprop, d, d)
        _copy(v, vprop, d)
        for k in range(d):
            sig_b[j, k] *= f
            sig_b[k, j] *= f
            lprop[j, k] *= f
            mprop[j, k] *= f
            mprop[k, j] *= f
        vprop[j] *= f
        wj_old = w[j]
        w[j] = wj_old / f
        lp_new = _log_prior_sigma(sig_b, lprop, kind, var_max, tr_max, nu0, psi0)
        ok = lp_new > -np.inf
        if ok:
            _nc_statistics(sig_b, w, mprop, vprop, gyy, n, sig, pos, sprop)
            ll_new = _gauss_ll(s_obs, sprop, om)
            log_a = ll_new - ll + lp_new - lp + d * delta
            log_a -= 0.5 * lam * (w[j] * w[j] - wj_old * wj_old)
            ok = math.log(u_s[e]) < log_a
        if ok:
            ll, lp = ll_new, lp_new
            lsig, lprop = lprop, lsig
            mm, mprop = mprop, mm
            v, vprop = vprop, v
            s, sprop = sprop, s
            acc_s[e] += 1
        else:
            for k in range(d):
                sig_b[j, k] = row[k]
                sig_b[k, j] = row[k]
            w[j] = wj_old
        e += 1
    _copy(s, out_s, p)
    return acc_w


@njit(cache=True)
def noncentred_moves(  # type: ignore[no-untyped-def]
    theta,
    sx,
    g,
    omega,
    s_obs,
    pos,
    n,
    sig,
    lam,
    kind,
    var_max,
    tr_max,
    nu0,
    psi0,
    scale_s,
    z_w,
    u_w,
    z_s,
    u_s,
    acc_s,
    s_in,
    out_s,
):
    """Metropolis-within-Gibbs moves of (w, Sigma_x) with the standardised statistics G
    held fixed (the non-centred parameterisation s = n vech C + sqrt(n) vech(L G L')),
    per chain, in place; returns the number of accepted w moves and writes s at the final
    state into out_s (s_in, the statistics before the moves, for a chain whose Sigma_x has
    no Cholesky factor in floating point and is left as it is).
    See :class:`dpbayes.release.ssp.noise_aware._NoncentredMoves`."""
    nc, d = theta.shape
    acc_w = 0
    for b in range(nc):
        acc_w += _noncentred_chain(
            theta[b], sx[b], g[b, :d, :d], g[b, :d, d], g[b, d, d], omega[b], s_obs, pos, n,
            sig, lam, kind, var_max, tr_max, nu0, psi0, scale_s, z_w[b], u_w[b], z_s[b],
            u_s[b], acc_s, s_in[b], out_s[b],
        )  # fmt: skip
    return acc_w


_HALF_SQRT2 = math.sqrt(0.5)


@njit(cache=True)
def joint_covariance_into(sx, w, sig2, c):  # type: ignore[no-untyped-def]
    """C = Cov(x, y) for x ~ N(0, Sigma_x), y = x'w + N(0, sig2)."""
    d = w.size
    quad = 0.0
    for i in range(d):
        r = 0.0
        for j in range(d):
            c[i, j] = sx[i, j]
            r += sx[i, j] * w[j]
        c[i, d] = r
        c[d, i] = r
        quad += w[i] * r
    c[d, d] = quad + sig2


@njit(cache=True)
def statistics_draw(cb, n, s_obs, rows, cols, om, kk, lb, z_g, z_e, lc, out):  # type: ignore[no-untyped-def]
    """Step 1 for one chain: s | C, s~ with prior N(n vech C, K), K = n K(C), and noise
    s~ - s ~ N(0, Omega), Omega = diag om. By Matheron's rule s = s0 + K (K + Omega)^-1
    (s~ - s0 - e0), with s0 a draw of the prior and e0 ~ N(0, Omega), is an exact draw of
    the conditional, so only K + Omega is factorised (lb, :func:`_isserlis_chol`; kk = K).
    The prior draw needs no factor of K: with L L' = C (into lc) and G symmetric with
    N(0, 2) diagonal (sqrt(2) z_g) and N(0, 1) off-diagonal (z_g) entries,
    Cov((L G L')_ij, (L G L')_kl) = C_ik C_jl + C_il C_jk (Isserlis), so
    s0 = vech(n C + sqrt(n) L G L'); e0 = sqrt(om) z_e."""
    m = cb.shape[0]
    p = rows.size
    if not _chol_into(cb, lc):
        raise np.linalg.LinAlgError("the joint covariance C is not positive definite")
    gm = np.zeros((m, m))
    for u in range(p):
        i, j = rows[u], cols[u]
        if i == j:
            gm[i, i] = 2.0 * _HALF_SQRT2 * z_g[u]
        else:
            gm[i, j] = z_g[u]
            gm[j, i] = z_g[u]
    lg = np.zeros((m, m))  # L G
    for i in range(m):
        for k in range(i + 1):
            lik = lc[i, k]
            for j in range(m):
                lg[i, j] += lik * gm[k, j]
    rn = math.sqrt(n)
    prior = np.empty(p)
    resid = np.empty(p)
    for u in range(p):
        i, j = rows[u], cols[u]
        acc = 0.0
        for k in range(j + 1):
            acc += lg[i, k] * lc[j, k]
        prior[u] = n * cb[i, j] + rn * acc
        resid[u] = s_obs[u] - prior[u] - math.sqrt(om[u]) * z_e[u]
    _forward(lb, resid, resid)
    _backward(lb, resid, resid)
    u = 0
    while u + 3 < p:  # out = prior + K resid, four rows at once (independent sums)
        a0 = a1 = a2 = a3 = 0.0
        for v in range(p):
            rv = resid[v]
            a0 += kk[u, v] * rv
            a1 += kk[u + 1, v] * rv
            a2 += kk[u + 2, v] * rv
            a3 += kk[u + 3, v] * rv
        out[u] = prior[u] + a0
        out[u + 1] = prior[u + 1] + a1
        out[u + 2] = prior[u + 2] + a2
        out[u + 3] = prior[u + 3] + a3
        u += 4
    while u < p:
        acc = 0.0
        for v in range(p):
            acc += kk[u, v] * resid[v]
        out[u] = prior[u] + acc
        u += 1


@njit(cache=True)
def standardise(cb, s, rows, cols, n, lc, out):  # type: ignore[no-untyped-def]
    """G = L^-1 (S - n C) L^-T / sqrt(n), symmetrised, for L = chol(C) = lc (into out)."""
    m = cb.shape[0]
    rn = math.sqrt(n)
    dev = np.empty((m, m))
    for u in range(rows.size):
        i, j = rows[u], cols[u]
        val = (s[u] - n * cb[i, j]) / rn
        dev[i, j] = val
        dev[j, i] = val
    col = np.empty(m)
    half = np.empty((m, m))  # L^-1 dev, column by column
    for j in range(m):
        for i in range(m):
            col[i] = dev[i, j]
        _forward(lc, col, col)
        for i in range(m):
            half[i, j] = col[i]
    for j in range(m):  # L^-1 half'
        for i in range(m):
            col[i] = half[j, i]
        _forward(lc, col, col)
        for i in range(m):
            out[i, j] = col[i]
    for i in range(m):
        for j in range(i):
            val = 0.5 * (out[i, j] + out[j, i])
            out[i, j] = val
            out[j, i] = val


@njit(cache=True)
def psd_into(a, out):  # type: ignore[no-untyped-def]
    """The projection of the symmetric part of a onto the PSD cone (into out)."""
    vals, vecs = np.linalg.eigh(0.5 * (a + a.T))
    d = a.shape[0]
    for i in range(d):
        for j in range(d):
            acc = 0.0
            for k in range(d):
                if vals[k] > 0.0:
                    acc += vecs[i, k] * vals[k] * vecs[j, k]
            out[i, j] = acc


@njit(cache=True)
def weights_draw(a, sxy, lam, sig2, z, w_out, mean_out, cov_out):  # type: ignore[no-untyped-def]
    """Step 2 for one chain: w | X'X = a, X'y = sxy ~ N(P^-1 sxy / sig2, P^-1),
    P = lam I + a / sig2; the draw mean + L^-T z (L L' = P), the mean and P^-1."""
    d = sxy.size
    prec = np.empty((d, d))
    for i in range(d):
        for j in range(d):
            prec[i, j] = a[i, j] / sig2
        prec[i, i] += lam
    lp = np.zeros((d, d))
    if not _chol_into(prec, lp):
        raise np.linalg.LinAlgError("the precision of w is not positive definite")
    rhs = np.empty(d)
    for i in range(d):
        rhs[i] = sxy[i] / sig2
    _forward(lp, rhs, mean_out)
    _backward(lp, mean_out, mean_out)
    _backward(lp, z, w_out)
    for i in range(d):
        w_out[i] += mean_out[i]
    e = np.zeros(d)
    col = np.empty(d)
    for j in range(d):
        e[j] = 1.0
        _forward(lp, e, col)
        e[j] = 0.0
        _backward(lp, col, col)
        for i in range(d):
            cov_out[i, j] = col[i]


@njit(cache=True)
def _log_prior_ratio(sx, var_max, tr_max, nu0, psi0, lsig):  # type: ignore[no-untyped-def]
    """log(bounded prior / IW(nu0, psi0) prior) at sx, up to a constant (-inf outside the
    bounds or where sx has no Cholesky factor; lsig: scratch for it)."""
    if not _chol_into(sx, lsig):
        return -np.inf
    bounded = _log_prior_sigma(sx, lsig, 0, var_max, tr_max, nu0, psi0)
    if bounded == -np.inf:
        return -np.inf
    return bounded - _log_prior_sigma(sx, lsig, 1, var_max, tr_max, nu0, psi0)


@njit(cache=True)
def covariance_draw(a, n, sx, kind, var_max, tr_max, nu0, psi0, z_b, chi2, u):  # type: ignore[no-untyped-def]
    """Step 3 for one chain, in place: the IW(nu0 + n, psi0 + a) conditional by Bartlett's
    decomposition (z_b: its strictly lower normals, chi2: its chi-square draws with
    nu0 + n - j degrees of freedom); kind 1 (IW prior) takes it, kind 0 (bounded prior)
    accepts it by independence Metropolis-Hastings with uniform u (the ratio of the
    bounded and IW prior densities at the proposal and the current value).

    With B lower triangular (sqrt(chi2) on the diagonal, z_b below), B B' ~ Wishart(nu, I);
    with L L' = psi0 + a, A W A' ~ Wishart(nu, A S A') for any A gives
    W = L^-T B B' L^-1 ~ Wishart(nu, (psi0 + a)^-1), so the proposal
    W^-1 = M M', M = L B^-T, is IW(nu, psi0 + a): two triangular factors, no inverse of
    a full matrix."""
    d = a.shape[0]
    pm = np.empty((d, d))
    for i in range(d):
        for j in range(d):
            pm[i, j] = psi0[i, j] + 0.5 * (a[i, j] + a[j, i])
    lp = np.zeros((d, d))
    if not _chol_into(pm, lp):
        raise np.linalg.LinAlgError("psi0 + X'X is not positive definite")
    bart = np.zeros((d, d))
    for i in range(d):
        for j in range(i):
            bart[i, j] = z_b[i, j]
        bart[i, i] = math.sqrt(chi2[i])
    binv = np.zeros((d, d))  # B^-1 (lower triangular), column by column
    e = np.zeros(d)
    col = np.empty(d)
    for j in range(d):
        e[j] = 1.0
        _forward(bart, e, col)
        e[j] = 0.0
        for i in range(j, d):
            binv[i, j] = col[i]
    mm = np.empty((d, d))  # M = L B^-T: M_ij = sum_k L_ik (B^-1)_jk, k <= min(i, j)
    for i in range(d):
        for j in range(d):
            acc = 0.0
            for k in range(min(i, j) + 1):
                acc += lp[i, k] * binv[j, k]
            mm[i, j] = acc
    prop = np.empty((d, d))  # M M', symmetric by construction
    for i in range(d):
        for j in range(i + 1):
            acc = 0.0
            for k in range(d):
                acc += mm[i, k] * mm[j, k]
            prop[i, j] = acc
            prop[j, i] = acc
    if kind == 1:
        _copy_block(prop, sx, d, d)
        return
    r_prop = _log_prior_ratio(prop, var_max, tr_max, nu0, psi0, lp)
    r_cur = _log_prior_ratio(sx, var_max, tr_max, nu0, psi0, lp)
    if math.log(u) < r_prop - r_cur:
        _copy_block(prop, sx, d, d)


@njit(cache=True)
def _inverse_gaussian(mean, shape, z, u):  # type: ignore[no-untyped-def]
    """A draw of InverseGaussian(mean, shape) from a standard normal z and a uniform u
    (Michael, Schucany & Haas 1976, the algorithm of numpy's ``Generator.wald``):
    y = mean z^2, x = mean (r - y) / (r + y) with r = sqrt(4 shape y + y^2), written
    as mean 4 shape y / (r + y)^2 (no cancellation when y >> shape); x with probability
    mean / (mean + x), else mean^2 / x."""
    y = mean * z * z
    if y == 0.0:
        return mean
    r = math.sqrt(4.0 * shape * y + y * y)
    x = mean * (4.0 * shape * y / (r + y)) / (r + y)
    if u <= mean / (mean + x):
        return x
    return mean * (mean / x)


@njit(cache=True)
def gibbs_block(  # type: ignore[no-untyped-def]
    theta, sx, omega, s_obs, rows, cols, pos, n, sig2, lam, sweeps, kind, var_max, tr_max,
    nu0, psi0, scale_s, lap_b, z_g, z_e, z_w, u_w, z_s, u_s, z_theta, z_b, chi2, u_sx,
    z_ig, u_ig, acc_s, w_out, mean_out, cov_out, tr_out,
):  # fmt: skip
    """``k`` Gibbs steps of every chain (k = z_g.shape[0]): steps 1, 1b (``sweeps`` > 0),
    2, 3 and, when ``lap_b`` is not empty (Laplace noise with scales lap_b), 4 of the
    linear noise-aware sampler (:func:`dpbayes.release.ssp.noise_aware.linear_ssp_noise_aware`),
    in place on theta, sx and omega. Per step t and chain b it writes the weights into
    w_out[b, t], the mean and covariance of the conditional of w (step 2) into
    mean_out[b, t] and cov_out[b, t], and tr X'X into tr_out[b, t]; acceptances of step
    1b add into acc_s. The random inputs, indexed [t, b] (step 1b's [t, sweep, b]):
    z_g, z_e (step 1), z_w, u_w, z_s, u_s (step 1b), z_theta (step 2), z_b, chi2, u_sx
    (step 3), z_ig, u_ig (step 4: one inverse-Gaussian draw per entry of s). The random
    walk scales scale_s are fixed within the block."""
    k_steps = z_g.shape[0]
    nc, d = theta.shape
    m = d + 1
    p = rows.size
    sig = math.sqrt(sig2)
    laplace = lap_b.size > 0
    c = np.empty((m, m))
    kk = np.empty((p, p))
    scratch = np.empty((p, p))
    lb = np.empty((p, p))
    lc = np.zeros((m, m))
    g = np.empty((m, m))
    s = np.empty(p)
    s_prev = np.empty(p)
    smat = np.empty((m, m))
    a = np.empty((d, d))
    for t in range(k_steps):
        for b in range(nc):
            # 1. s | w, Sigma_x, omega
            joint_covariance_into(sx[b], theta[b], sig2, c)
            _isserlis_chol(c, n, rows, cols, omega[b], kk, scratch, lb)
            statistics_draw(c, n, s_obs, rows, cols, omega[b], kk, lb, z_g[t, b], z_e[t, b], lc, s)
            # 1b. (w, Sigma_x) | G, omega, then s = s(w, Sigma_x, G)
            if sweeps > 0:
                standardise(c, s, rows, cols, n, lc, g)
                for sw in range(sweeps):
                    _copy(s, s_prev, p)
                    _noncentred_chain(
                        theta[b], sx[b], g[:d, :d], g[:d, d], g[d, d], omega[b], s_obs,
                        pos, n, sig, lam, kind, var_max, tr_max, nu0, psi0, scale_s,
                        z_w[t, sw, b], u_w[t, sw, b], z_s[t, sw, b], u_s[t, sw, b], acc_s,
                        s_prev, s,
                    )  # fmt: skip
            # 2. w | X'X, X'y; 3. Sigma_x | X'X
            for u in range(p):
                smat[rows[u], cols[u]] = s[u]
                smat[cols[u], rows[u]] = s[u]
            psd_into(smat[:d, :d], a)
            weights_draw(
                a, smat[:d, d], lam, sig2, z_theta[t, b], theta[b], mean_out[b, t],
                cov_out[b, t],
            )  # fmt: skip
            covariance_draw(
                a, n, sx[b], kind, var_max, tr_max, nu0, psi0, z_b[t, b], chi2[t, b],
                u_sx[t, b],
            )  # fmt: skip
            tr = 0.0
            for i in range(d):
                tr += a[i, i]
            tr_out[b, t] = tr
            for i in range(d):
                w_out[b, t, i] = theta[b, i]
            # 4. omega | e: 1 / omega_k ~ InverseGaussian(1 / (b_k |e_k|), 1 / b_k^2)
            if laplace:
                for u in range(p):
                    e = max(abs(s_obs[u] - s[u]), 1e-12)
                    bu = lap_b[u]
                    mean = 1.0 / (bu * e)
                    ig = _inverse_gaussian(mean, 1.0 / (bu * bu), z_ig[t, b, u], u_ig[t, b, u])
                    omega[b, u] = 1.0 / ig


@njit(cache=True)
def statistics_stack(c, n, s_obs, rows, cols, omega, z_g, z_e):  # type: ignore[no-untyped-def]
    """Step 1 (:func:`statistics_draw`) for a stack of covariances c (chains, m, m)."""
    nc, m, _ = c.shape
    p = rows.size
    out = np.empty((nc, p))
    kk = np.empty((p, p))
    scratch = np.empty((p, p))
    lb = np.empty((p, p))
    lc = np.zeros((m, m))
    for b in range(nc):
        _isserlis_chol(c[b], n, rows, cols, omega[b], kk, scratch, lb)
        statistics_draw(c[b], n, s_obs, rows, cols, omega[b], kk, lb, z_g[b], z_e[b], lc, out[b])
    return out


@njit(cache=True)
def covariance_stack(a, n, sx, kind, var_max, tr_max, nu0, psi0, z_b, chi2, u):  # type: ignore[no-untyped-def]
    """Step 3 (:func:`covariance_draw`) for a stack of X'X = a and Sigma_x = sx (in place)."""
    for b in range(a.shape[0]):
        covariance_draw(a[b], n, sx[b], kind, var_max, tr_max, nu0, psi0, z_b[b], chi2[b], u[b])
