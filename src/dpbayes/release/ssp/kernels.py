"""Compiled inner loops of the linear noise-aware sampler (numba): the release's
likelihood with the statistics integrated out and the gain of step 1
(:func:`collapsed_loglik_stack`, :func:`gain_solve_stack`), and the non-centred moves of
step 1b (:func:`noncentred_moves`).

Post-processing only: no randomness is drawn here (every kernel is given the normals and
uniforms it needs, drawn by the caller from the chain's generator) and nothing here
touches the release mechanism. Each kernel loops over the chains of a stack.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

__all__ = ["collapsed_loglik_stack", "gain_solve_stack", "noncentred_moves"]


@njit(cache=True)
def _forward(lo, rhs, out):  # type: ignore[no-untyped-def]
    """out = L^-1 rhs for a lower-triangular L (out may be rhs)."""
    for u in range(rhs.size):
        r = rhs[u]
        for v in range(u):
            r -= lo[u, v] * out[v]
        out[u] = r / lo[u, u]


@njit(cache=True)
def _backward(lo, rhs, out):  # type: ignore[no-untyped-def]
    """out = L^-T rhs for a lower-triangular L (out may be rhs)."""
    for u in range(rhs.size - 1, -1, -1):
        r = rhs[u]
        for v in range(u + 1, rhs.size):
            r -= lo[v, u] * out[v]
        out[u] = r / lo[u, u]


@njit(cache=True)
def _chol_into(a, out):  # type: ignore[no-untyped-def]
    """Lower Cholesky factor of a into out; False if a is not positive definite."""
    d = a.shape[0]
    for j in range(d):
        s = a[j, j]
        for k in range(j):
            s -= out[j, k] * out[j, k]
        if not s > 0.0:
            return False
        dj = math.sqrt(s)
        out[j, j] = dj
        for i in range(j + 1, d):
            s = a[i, j]
            for k in range(j):
                s -= out[i, k] * out[j, k]
            out[i, j] = s / dj
        for i in range(j):
            out[i, j] = 0.0
    return True


@njit(cache=True)
def collapsed_loglik_stack(c, n, s_obs, rows, cols, omega):  # type: ignore[no-untyped-def]
    """For each chain b: K = n K(C_b) (Isserlis, K_(ij),(kl) = n (C_ik C_jl + C_il C_jk)
    over the upper-triangle entries (rows[a], cols[a])), the lower Cholesky factor L of
    K + diag omega_b, and log N(s_obs; n vech C_b, K + diag omega_b) without its
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
        for u in range(p):
            i, j = rows[u], cols[u]
            for v in range(u + 1):
                k, l = rows[v], cols[v]
                val = n * (cb[i, k] * cb[j, l] + cb[i, l] * cb[j, k])
                kk[b, u, v] = val
                kk[b, v, u] = val
                a[u, v] = val
                a[v, u] = val
            a[u, u] += omega[b, u]
        lb = chol[b]
        if not _chol_into(a, lb):
            raise np.linalg.LinAlgError("n K(C) + diag omega is not positive definite")
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
def gain_solve_stack(k, chol, rhs):  # type: ignore[no-untyped-def]
    """K_b (L_b L_b')^-1 rhs_b for a stack of matrices K_b and lower Cholesky factors L_b
    (the Kalman-gain step of Matheron's rule: L L' = K + diag omega)."""
    nc, p = rhs.shape
    out = np.empty((nc, p))
    x = np.empty(p)
    for b in range(nc):
        lb = chol[b]
        _forward(lb, rhs[b], x)
        _backward(lb, x, x)
        for u in range(p):
            r = 0.0
            for v in range(p):
                r += k[b, u, v] * x[v]
            out[b, u] = r
    return out


@njit(cache=True)
def _lgl(lsig, g11, gx, out_m, out_v):  # type: ignore[no-untyped-def]
    """M = L G11 L' and v = L g for the lower-triangular L."""
    d = lsig.shape[0]
    tmp = np.zeros((d, d))
    for i in range(d):
        for k in range(i + 1):
            lik = lsig[i, k]
            for j in range(d):
                tmp[i, j] += lik * g11[k, j]
    for i in range(d):
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
        _forward(lsig, psi0[:, col].copy(), x)
        _backward(lsig, x, y)
        acc += y[col]
    return -0.5 * (nu0 + d + 1) * logdet - 0.5 * acc


@njit(cache=True)
def _accept(lsig, lprop, mm, mprop, v, vprop, s, sprop):  # type: ignore[no-untyped-def]
    """The proposed factor, M, v and statistics become the state."""
    lsig[:, :] = lprop
    mm[:, :] = mprop
    v[:] = vprop
    s[:] = sprop


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
    for b in range(nc):
        w = theta[b]
        sig_b = sx[b]
        g11 = g[b, :d, :d]
        gx = g[b, :d, d]
        gyy = g[b, d, d]
        om = omega[b]
        if not _chol_into(sig_b, lsig):  # numerically singular: no move for this chain
            out_s[b] = s_in[b]
            continue
        _lgl(lsig, g11, gx, mm, v)
        # (a) w: the exact Gaussian conditional of everything but the y'y entry, as an
        # independence proposal accepted on the y'y entry's likelihood ratio
        for i in range(d):
            oxy[i] = om[pos[i, d]]
        for i in range(d):
            for j in range(d):
                acc = 0.0
                for k in range(d):
                    sik = n * sig_b[i, k] + rn * mm[i, k]
                    sjk = n * sig_b[j, k] + rn * mm[j, k]
                    acc += sik * sjk / oxy[k]
                prec[i, j] = acc + (lam if i == j else 0.0)
            r = 0.0
            for k in range(d):
                sik = n * sig_b[i, k] + rn * mm[i, k]
                r += sik * (s_obs[pos[k, d]] - rn * sig * v[k]) / oxy[k]
            rhs[i] = r
        if not _chol_into(prec, lprec):
            raise ValueError("w precision is not positive definite")
        # mu = prec^-1 rhs; proposal mu + L^-T z
        _forward(lprec, rhs, mu)
        _backward(lprec, mu, mu)
        _backward(lprec, z_w[b], wprop)
        for u in range(d):
            wprop[u] += mu[u]
        yy = pos[d, d]
        _nc_statistics(sig_b, w, mm, v, gyy, n, sig, pos, s)
        _nc_statistics(sig_b, wprop, mm, v, gyy, n, sig, pos, sprop)
        r_cur = s_obs[yy] - s[yy]
        r_new = s_obs[yy] - sprop[yy]
        if math.log(u_w[b]) < -0.5 * (r_new * r_new - r_cur * r_cur) / om[yy]:
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
                new = old + scale_s[e] * z_s[b, e]
                sig_b[i, j] = new
                sig_b[j, i] = new
                ok = (i != j) or new > 0.0
                if ok:
                    ok = _chol_into(sig_b, lprop)
                if ok:
                    lp_new = _log_prior_sigma(sig_b, lprop, kind, var_max, tr_max, nu0, psi0)
                    ok = lp_new > -np.inf
                if ok:
                    _lgl(lprop, g11, gx, mprop, vprop)
                    _nc_statistics(sig_b, w, mprop, vprop, gyy, n, sig, pos, sprop)
                    ll_new = _gauss_ll(s_obs, sprop, om)
                    ok = math.log(u_s[b, e]) < ll_new - ll + lp_new - lp
                if ok:
                    ll, lp = ll_new, lp_new
                    _accept(lsig, lprop, mm, mprop, v, vprop, s, sprop)
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
            delta = scale_s[e] * z_s[b, e]
            f = math.exp(delta)
            row[:] = sig_b[j]
            lprop[:, :] = lsig
            mprop[:, :] = mm
            vprop[:] = v
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
                ok = math.log(u_s[b, e]) < log_a
            if ok:
                ll, lp = ll_new, lp_new
                _accept(lsig, lprop, mm, mprop, v, vprop, s, sprop)
                acc_s[e] += 1
            else:
                sig_b[j, :] = row
                sig_b[:, j] = row
                w[j] = wj_old
            e += 1
        out_s[b] = s
    return acc_w
