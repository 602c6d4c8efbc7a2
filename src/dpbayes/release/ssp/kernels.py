"""Compiled inner loops of the linear noise-aware sampler (numba).

Post-processing only: no randomness is drawn here and nothing here touches the release
mechanism. Each kernel loops over the chains of a stack; the numpy code it replaces
built the same matrices with fancy indexing and solved per chain in Python.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

__all__ = ["collapsed_loglik_stack", "gain_solve_stack"]


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
        lb = np.linalg.cholesky(a)
        chol[b] = lb
        # forward substitution L z = s_obs - n vech C
        acc = 0.0
        logdet = 0.0
        for u in range(p):
            r = s_obs[u] - n * cb[rows[u], cols[u]]
            for v in range(u):
                r -= lb[u, v] * z[v]
            z[u] = r / lb[u, u]
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
        for u in range(p):
            r = rhs[b, u]
            for v in range(u):
                r -= lb[u, v] * x[v]
            x[u] = r / lb[u, u]
        for u in range(p - 1, -1, -1):
            r = x[u]
            for v in range(u + 1, p):
                r -= lb[v, u] * x[v]
            x[u] = r / lb[u, u]
        for u in range(p):
            r = 0.0
            for v in range(p):
                r += k[b, u, v] * x[v]
            out[b, u] = r
    return out
