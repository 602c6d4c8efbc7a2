"""Compiled (numba) Metropolis-Hastings chains of the noise-aware regression posterior.

The sampler of :mod:`.noise_aware` (Metropolis-Hastings on T = X'X, the
weights and X'y integrated in closed form), one compiled loop over the chains and steps
instead of ~20 small numpy calls per step. No randomness is drawn here: the kernel
receives the normals, chi-squares and uniforms it needs, drawn beforehand from the
chain's numpy Generator (``dpbayes.privacy.noise``).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from dpbayes.release.linalg_kernels import (
    chol_solve,
    chol_solve_columns,
    dot,
    logdet_chol,
    matmul,
    matvec,
    spd_cholesky,
)

__all__ = ["mh_steps", "target_parts", "wishart_logpdf"]


@njit(cache=True)
def _logdet_spd(a):  # type: ignore[no-untyped-def]
    return logdet_chol(spd_cholesky(a))


@njit(cache=True)
def _spd_inverse(lo):  # type: ignore[no-untyped-def]
    """(L L')^-1 from the lower factor L."""
    return chol_solve_columns(lo, np.eye(lo.shape[0]))


@njit(cache=True)
def wishart_logpdf(x, df, scale_inv, logdet_scale):  # type: ignore[no-untyped-def]
    """log Wishart(x; df, scale) from scale^-1 and log det scale."""
    d = x.shape[0]
    tr = 0.0
    for i in range(d):
        for j in range(d):
            tr += scale_inv[i, j] * x[j, i]
    mg = d * (d - 1) / 4.0 * math.log(math.pi)
    for j in range(d):
        mg += math.lgamma(df / 2.0 - j / 2.0)
    return (
        (df - d - 1.0) / 2.0 * _logdet_spd(x)
        - tr / 2.0
        - df * d / 2.0 * math.log(2.0)
        - df / 2.0 * logdet_scale
        - mg
    )


@njit(cache=True)
def _bartlett(chol, df_chi, normals):  # type: ignore[no-untyped-def]
    """L A A' L' with A lower triangular: sqrt(chi-square) diagonal, normal below."""
    d = chol.shape[0]
    a = np.zeros((d, d))
    for i in range(d):
        a[i, i] = math.sqrt(df_chi[i])
        for j in range(i):
            a[i, j] = normals[i, j]
    la = matmul(chol, a)
    return matmul(la, la, True)


@njit(cache=True)
def target_parts(t, wbar, dev, lam, sigma2, s2):  # type: ignore[no-untyped-def]
    """log p(w~ | T) up to a constant, and the mean and covariance of p(w | T, w~)."""
    d = t.shape[0]
    dn = dev.shape[0]
    eye = np.eye(d)
    prec_t = lam * eye + t / s2
    l_prec = spd_cholesky(prec_t)
    sig_t = _spd_inverse(l_prec)
    a = matmul(sig_t, t) / s2
    r = sigma2 * matmul(a, sig_t) / s2 + sig_t / dn
    r = (r + r.T) / 2.0
    v = matmul(a, a, True) / lam + r
    v = (v + v.T) / 2.0
    l_v = spd_cholesky(v)
    quad = dot(wbar, chol_solve(l_v, wbar))
    spread = 0.0
    for k in range(dn):
        spread += dot(dev[k], matvec(prec_t, dev[k]))
    loglik = -0.5 * (logdet_chol(l_v) + quad) + 0.5 * (dn - 1) * logdet_chol(l_prec) - 0.5 * spread
    rinv_a = chol_solve_columns(spd_cholesky(r), a)
    post_prec = lam * eye + matmul(a.T.copy(), rinv_a)
    post_cov = _spd_inverse(spd_cholesky(post_prec))
    post_cov = (post_cov + post_cov.T) / 2.0
    post_mean = matvec(post_cov, matvec(rinv_a, wbar, True))
    return loglik, post_mean, post_cov


@njit(cache=True)
def mh_steps(  # type: ignore[no-untyped-def]
    t,
    lp_prior,
    ll,
    mu,
    cov,
    n,
    sx_chol,
    sx_inv,
    logdet_sx,
    nu,
    wbar,
    dev,
    lam,
    sigma2,
    s2,
    normals,
    chi_prior,
    chi_rw,
    uniforms,
    w_normals,
    step0,
    accepted,
    keep_means,
    keep_covs,
    keep_w,
    keep_ld,
):
    """``uniforms.shape[1]`` MH steps on every chain (state t, lp_prior, ll, mu, cov updated
    in place); odd global step numbers (step0 + k) are independence proposals from the
    Wishart(n, Sigma_x) prior, even ones random walks T' ~ Wishart(nu, T / nu). When
    ``keep_means`` has rows, the state after every step is written there (Rao-Blackwell
    mean and covariance, a w draw from p(w | T, w~), log det T).

    normals (m, steps, d, d), chi_prior (m, steps, d) chi-squares with n - i degrees of
    freedom, chi_rw (m, steps, d) with nu - i, uniforms (m, steps), w_normals (m, steps, d).
    """
    m = t.shape[0]
    steps = uniforms.shape[1]
    keep = keep_means.shape[1] > 0
    for c in range(m):
        for k in range(steps):
            if (step0 + k) % 2 == 1:  # independence step: accept by the likelihood ratio
                prop = _bartlett(sx_chol, chi_prior[c, k], normals[c, k])
                lp_prop = wishart_logpdf(prop, n, sx_inv, logdet_sx)
                ll_p, mu_p, cov_p = target_parts(prop, wbar, dev, lam, sigma2, s2)
                log_a = ll_p - ll[c]
            else:  # random walk, Hastings-corrected
                cur = t[c]
                scale = cur / nu
                l_scale = spd_cholesky(scale)
                prop = _bartlett(l_scale, chi_rw[c, k], normals[c, k])
                lp_prop = wishart_logpdf(prop, n, sx_inv, logdet_sx)
                ll_p, mu_p, cov_p = target_parts(prop, wbar, dev, lam, sigma2, s2)
                l_back = spd_cholesky(prop / nu)
                log_q = wishart_logpdf(
                    cur, nu, _spd_inverse(l_back), logdet_chol(l_back)
                ) - wishart_logpdf(prop, nu, _spd_inverse(l_scale), logdet_chol(l_scale))
                log_a = lp_prop + ll_p - lp_prior[c] - ll[c] + log_q
            if math.log(uniforms[c, k] + 1e-300) < log_a:
                t[c] = prop
                lp_prior[c] = lp_prop
                ll[c] = ll_p
                mu[c] = mu_p
                cov[c] = cov_p
                accepted[c] += 1
            if keep:
                keep_means[c, k] = mu[c]
                keep_covs[c, k] = cov[c]
                keep_w[c, k] = mu[c] + matvec(spd_cholesky(cov[c]), w_normals[c, k])
                keep_ld[c, k] = _logdet_spd(t[c])
