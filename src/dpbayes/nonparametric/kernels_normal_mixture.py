"""Compiled pieces of the DP mixture of truncated Normals (`normal_mixture`).

The kernel of component k is N(theta_k, s_k^2) restricted to [-r, r]; the data are
Z = X + noise (X in [-r, r], so clipping leaves it unchanged). The likelihood of one Z
under component k, with X integrated out, has a closed form for both local mechanisms:

* Laplace (scale b): with c = clip(z, -r, r), q = s^2 / 2b^2 and h = s^2 / b,

      2b Z_k m(z) = e^{-(z - theta)/b + q} [Phi((c - theta - h)/s) - Phi((-r - theta - h)/s)]
                  + e^{ (z - theta)/b + q} [Phi((r - theta + h)/s) - Phi((c - theta + h)/s)]

  (the integral of N(x; theta, s^2) e^{+-x/b} over an interval completes the square);
* Gaussian (sd tau): m(z) = N(z; theta, s^2 + tau^2) [Phi((r - m)/s') - Phi((-r - m)/s')] / Z_k
  with m = (theta tau^2 + z s^2) / (s^2 + tau^2), s' = s tau / sqrt(s^2 + tau^2),

where Z_k = Phi((r - theta)/s) - Phi((-r - theta)/s). Everything is in logs, the
differences of Phi on the side of 0 where they are accurate. No randomness is drawn
here: the uniforms are arguments.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from dpbayes.nonparametric.kernels_truncnorm import log_diff_ndtr_scalar

__all__ = [
    "GAUSSIAN",
    "LAPLACE",
    "component_consts",
    "draw_labels",
    "fast_loglik",
    "loglik_matrix",
    "mixture_cdf",
    "mixture_moments",
    "mixture_pdf",
    "mixture_quantiles",
    "pair_loglik",
    "slice_components",
]

LAPLACE = 0
GAUSSIAN = 1
_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)
_SQRT2 = math.sqrt(2.0)


@njit(cache=True)
def _logaddexp(a, b):  # type: ignore[no-untyped-def]
    if a == -np.inf:
        return b
    if b == -np.inf:
        return a
    if a > b:
        return a + math.log1p(math.exp(b - a))
    return b + math.log1p(math.exp(a - b))


@njit(cache=True)
def pair_loglik(kind, z, scale, r, theta, s, log_mass):  # type: ignore[no-untyped-def]
    """log m(z) of one component; ``log_mass`` = log Z_k (the kernel's mass on [-r, r])."""
    if kind == LAPLACE:
        b = scale
        c = min(max(z, -r), r)
        h = s * s / b
        q = 0.5 * (s / b) * (s / b)
        d = (z - theta) / b
        left = -d + q + log_diff_ndtr_scalar((-r - theta - h) / s, (c - theta - h) / s)
        right = d + q + log_diff_ndtr_scalar((c - theta + h) / s, (r - theta + h) / s)
        return _logaddexp(left, right) - log_mass - math.log(2.0 * b)
    tau2 = scale * scale
    v = s * s + tau2
    m = (theta * tau2 + z * s * s) / v
    sp = s * scale / math.sqrt(v)
    dz = z - theta
    dens = -0.5 * dz * dz / v - 0.5 * math.log(v) - _LOG_SQRT_2PI
    return dens + log_diff_ndtr_scalar((-r - m) / sp, (r - m) / sp) - log_mass


@njit(cache=True)
def component_consts(kind, scale, r, theta, s):  # type: ignore[no-untyped-def]
    """(log Z_k, hi, lo) of one component: for the Laplace mechanism and z >= r, log m(z)
    = -(z - theta)/b + hi, and for z <= -r, (z - theta)/b + lo (one piece covers [-r, r])."""
    lm = log_diff_ndtr_scalar((-r - theta) / s, (r - theta) / s)
    if kind != LAPLACE:
        return lm, 0.0, 0.0
    b = scale
    h = s * s / b
    q = 0.5 * (s / b) * (s / b)
    tail = q - lm - math.log(2.0 * b)
    hi = tail + log_diff_ndtr_scalar((-r - theta - h) / s, (r - theta - h) / s)
    lo = tail + log_diff_ndtr_scalar((-r - theta + h) / s, (r - theta + h) / s)
    return lm, hi, lo


@njit(cache=True)
def fast_loglik(kind, z, scale, r, theta, s, lm, hi, lo):  # type: ignore[no-untyped-def]
    """:func:`pair_loglik` with the constants of :func:`component_consts`."""
    if kind == LAPLACE:
        if z >= r:
            return -(z - theta) / scale + hi
        if z <= -r:
            return (z - theta) / scale + lo
    return pair_loglik(kind, z, scale, r, theta, s, lm)


@njit(cache=True)
def _log_masses(theta, s, r):  # type: ignore[no-untyped-def]
    out = np.empty(theta.shape[0])
    for k in range(theta.shape[0]):
        out[k] = log_diff_ndtr_scalar((-r - theta[k]) / s[k], (r - theta[k]) / s[k])
    return out


@njit(cache=True)
def loglik_matrix(kind, z, scale, r, theta, s, out):  # type: ignore[no-untyped-def]
    """out[i, k] = log m(z_i | theta_k, s_k) for all observations and components."""
    for k in range(theta.shape[0]):
        lm, hi, lo = component_consts(kind, scale, r, theta[k], s[k])
        for i in range(z.shape[0]):
            out[i, k] = fast_loglik(kind, z[i], scale, r, theta[k], s[k], lm, hi, lo)


@njit(cache=True)
def draw_labels(loglik, logw, uniforms, labels):  # type: ignore[no-untyped-def]
    """labels[i] ~ Categorical(w_k m(z_i | k)) by the inverse CDF of uniforms[i]."""
    n, kk = loglik.shape
    p = np.empty(kk)
    for i in range(n):
        top = -np.inf
        for k in range(kk):
            v = logw[k] + loglik[i, k]
            p[k] = v
            if v > top:
                top = v
        total = 0.0
        for k in range(kk):
            e = math.exp(p[k] - top) if p[k] > -np.inf else 0.0
            p[k] = e
            total += e
        target = uniforms[i] * total
        acc = 0.0
        chosen = kk - 1
        for k in range(kk):
            acc += p[k]
            if target < acc:
                chosen = k
                break
        while p[chosen] == 0.0:  # rounding put the target past the last positive weight
            chosen -= 1
        labels[i] = chosen


@njit(cache=True)
def _cluster_logpost(kind, z, lo, hi, scale, r, theta, s, mu0, tau0):  # type: ignore[no-untyped-def]
    """Sum of log m over the cluster's z[lo:hi] plus the log prior of theta (N(mu0, tau0^2))."""
    lm, up, down = component_consts(kind, scale, r, theta, s)
    if lm == -np.inf:
        return -np.inf
    acc = -0.5 * ((theta - mu0) / tau0) ** 2
    for i in range(lo, hi):
        acc += fast_loglik(kind, z[i], scale, r, theta, s, lm, up, down)
    return acc


@njit(cache=True)
def _slice_logf(kind, z, lo, hi, scale, r, theta, s, mu0, tau0, which, x, bounds):  # type: ignore[no-untyped-def]
    if x < bounds[0] or x > bounds[1]:
        return -np.inf
    if which == 0:
        return _cluster_logpost(kind, z, lo, hi, scale, r, x, s, mu0, tau0)
    return _cluster_logpost(kind, z, lo, hi, scale, r, theta, math.exp(x), mu0, tau0)


@njit(cache=True)
def _slice(kind, z, lo, hi, scale, r, theta, s, mu0, tau0, which, x0, width, bounds, u, pos):  # type: ignore[no-untyped-def]
    """One slice-sampling update (stepping out, then shrinkage; Neal 2003) of theta
    (``which`` 0) or log s (``which`` 1) of one component. Consumes u[pos:]; returns the
    new value and the new position, or position -1 when the uniforms ran out."""
    m_steps = 32
    if pos + 3 > u.shape[0]:
        return x0, -1
    args = (kind, z, lo, hi, scale, r, theta, s, mu0, tau0, which)
    level = _slice_logf(*args, x0, bounds) + math.log(1.0 - u[pos])
    left = x0 - width * u[pos + 1]
    right = left + width
    j = int(m_steps * u[pos + 2])
    kk = m_steps - 1 - j
    pos += 3
    while j > 0 and _slice_logf(*args, left, bounds) > level:
        left -= width
        j -= 1
    while kk > 0 and _slice_logf(*args, right, bounds) > level:
        right += width
        kk -= 1
    while True:
        if pos >= u.shape[0]:
            return x0, -1
        x1 = left + (right - left) * u[pos]
        pos += 1
        if _slice_logf(*args, x1, bounds) > level:
            return x1, pos
        if x1 < x0:
            left = x1
        else:
            right = x1


@njit(cache=True)
def slice_components(  # type: ignore[no-untyped-def]
    kind, z, starts, scale, r, theta, s, mu0, tau0, log_s_lo, log_s_hi, noise_var, u
):
    """Slice updates of (theta_k, then log s_k) of every occupied component given its
    observations z[starts[k]:starts[k+1]] (grouped by label), in place. The prior is
    theta ~ N(mu0, tau0^2), log s ~ Uniform(log_s_lo, log_s_hi). Returns the number of
    uniforms used, or -1 when ``u`` ran out (the caller reruns from the same state with
    more uniforms, the same ones first, so the result is as if all had been drawn at once).
    """
    pos = 0
    theta_bounds = np.array([-np.inf, np.inf])
    s_bounds = np.array([log_s_lo, log_s_hi])
    for k in range(theta.shape[0]):
        lo, hi = starts[k], starts[k + 1]
        if hi == lo:
            continue
        width = 2.0 * math.sqrt((s[k] * s[k] + noise_var) / (hi - lo))
        width = min(max(width, 1e-3 * r), 4.0 * r + 4.0 * tau0)
        x, pos = _slice(
            kind, z, lo, hi, scale, r, theta[k], s[k], mu0, tau0, 0, theta[k], width,
            theta_bounds, u, pos,
        )  # fmt: skip
        if pos < 0:
            return -1
        theta[k] = x
        x, pos = _slice(
            kind, z, lo, hi, scale, r, theta[k], s[k], mu0, tau0, 1, math.log(s[k]), 1.0,
            s_bounds, u, pos,
        )  # fmt: skip
        if pos < 0:
            return -1
        s[k] = math.exp(x)
    return pos


@njit(cache=True)
def _comp_cdf(t, theta, s, r, log_mass):  # type: ignore[no-untyped-def]
    if t <= -r:
        return 0.0
    if t >= r:
        return 1.0
    v = math.exp(log_diff_ndtr_scalar((-r - theta) / s, (t - theta) / s) - log_mass)
    return min(v, 1.0)


@njit(cache=True)
def mixture_cdf(w, theta, s, r, grid):  # type: ignore[no-untyped-def]
    """(draws, len(grid)) CDF of sum_k w_k N(theta_k, s_k^2) restricted to [-r, r]."""
    d, kk = w.shape
    out = np.zeros((d, grid.shape[0]))
    for i in range(d):
        lm = _log_masses(theta[i], s[i], r)
        for k in range(kk):
            if w[i, k] == 0.0:
                continue
            for j in range(grid.shape[0]):
                out[i, j] += w[i, k] * _comp_cdf(grid[j], theta[i, k], s[i, k], r, lm[k])
        for j in range(grid.shape[0]):
            out[i, j] = min(out[i, j], 1.0)
    return out


@njit(cache=True)
def mixture_pdf(w, theta, s, r, grid):  # type: ignore[no-untyped-def]
    """(draws, len(grid)) density of the mixture (0 outside [-r, r])."""
    d, kk = w.shape
    out = np.zeros((d, grid.shape[0]))
    for i in range(d):
        lm = _log_masses(theta[i], s[i], r)
        for k in range(kk):
            if w[i, k] == 0.0:
                continue
            for j in range(grid.shape[0]):
                t = grid[j]
                if t < -r or t > r:
                    continue
                x = (t - theta[i, k]) / s[i, k]
                out[i, j] += w[i, k] * math.exp(
                    -0.5 * x * x - _LOG_SQRT_2PI - math.log(s[i, k]) - lm[k]
                )
    return out


@njit(cache=True)
def mixture_moments(w, theta, s, r):  # type: ignore[no-untyped-def]
    """(draws, 2): mean and variance of each mixture of truncated Normals.

    A component's mean is theta + s (phi(a) - phi(b)) / Z and its second moment about
    theta is s^2 (1 + (a phi(a) - b phi(b)) / Z), a = (-r - theta)/s, b = (r - theta)/s,
    with phi / Z taken in logs (Z may be tiny when theta is far outside [-r, r]).
    """
    d, kk = w.shape
    out = np.zeros((d, 2))
    for i in range(d):
        m1 = 0.0
        m2 = 0.0
        for k in range(kk):
            if w[i, k] == 0.0:
                continue
            th, sk = theta[i, k], s[i, k]
            a, b = (-r - th) / sk, (r - th) / sk
            lz = log_diff_ndtr_scalar(a, b)
            pa = math.exp(-0.5 * a * a - _LOG_SQRT_2PI - lz)
            pb = math.exp(-0.5 * b * b - _LOG_SQRT_2PI - lz)
            mean = th + sk * (pa - pb)
            second = sk * sk * (1.0 + a * pa - b * pb)  # E[(X - theta)^2]
            var = max(second - (mean - th) ** 2, 0.0)
            mean = min(max(mean, -r), r)
            m1 += w[i, k] * mean
            m2 += w[i, k] * (var + mean * mean)
        out[i, 0] = m1
        out[i, 1] = max(m2 - m1 * m1, 0.0)
    return out


@njit(cache=True)
def mixture_quantiles(w, theta, s, r, qs):  # type: ignore[no-untyped-def]
    """(draws, len(qs)) quantiles of each mixture by bisection on [-r, r] (to 1e-12 r)."""
    d, kk = w.shape
    out = np.empty((d, qs.shape[0]))
    for i in range(d):
        lm = _log_masses(theta[i], s[i], r)
        for j in range(qs.shape[0]):
            lo, hi = -r, r
            for _ in range(60):
                mid = 0.5 * (lo + hi)
                f = 0.0
                for k in range(kk):
                    if w[i, k] > 0.0:
                        f += w[i, k] * _comp_cdf(mid, theta[i, k], s[i, k], r, lm[k])
                if f < qs[j]:
                    lo = mid
                else:
                    hi = mid
            out[i, j] = 0.5 * (lo + hi)
    return out


# ---------------------------------------------------------------- moves with the labels summed out
@njit(cache=True)
def scaled_likelihoods(loglik, c, e):  # type: ignore[no-untyped-def]
    """c[i] = max_k loglik[i, k] and e[i, k] = exp(loglik[i, k] - c[i])."""
    n, kk = loglik.shape
    for i in range(n):
        top = -np.inf
        for k in range(kk):
            top = max(top, loglik[i, k])
        c[i] = top
        for k in range(kk):
            e[i, k] = math.exp(loglik[i, k] - top) if top > -np.inf else 0.0


@njit(cache=True)
def log_prior_weights(w, alpha):  # type: ignore[no-untyped-def]
    """log density of truncated stick-breaking(alpha) weights, up to a constant:
    (alpha - 1) log w_K - sum_{k < K} log T_k with T_k = sum_{j >= k} w_j (the v_k =
    w_k / T_k are Beta(1, alpha), and the map v -> w has Jacobian prod_{k<K} T_k)."""
    kk = w.shape[0]
    if w[kk - 1] <= 0.0:
        return -np.inf
    acc = (alpha - 1.0) * math.log(w[kk - 1])
    tail = w[kk - 1]
    for k in range(kk - 2, -1, -1):
        tail += w[k]
        acc -= math.log(tail)
    return acc


@njit(cache=True)
def _rest(e, w, skip_a, skip_b, out):  # type: ignore[no-untyped-def]
    n, kk = e.shape
    for i in range(n):
        acc = 0.0
        for k in range(kk):
            if k != skip_a and k != skip_b:
                acc += w[k] * e[i, k]
        out[i] = acc


@njit(cache=True)
def _pair_target(w, alpha, e, rest, a, b, x, total, tail_after):  # type: ignore[no-untyped-def]
    """log target of w_a = x, w_b = total - x: the likelihood and the terms of
    :func:`log_prior_weights` that change (T_k for min(a, b) < k <= max(a, b), k < K, and w_K
    when it is one of the pair); ``tail_after`` = sum_{j > max(a, b)} w_j."""
    if x <= 0.0 or x >= total:
        return -np.inf
    w[a] = x
    w[b] = total - x
    lo, hi = min(a, b), max(a, b)
    kk = w.shape[0]
    acc = (alpha - 1.0) * math.log(w[kk - 1]) if hi == kk - 1 else 0.0
    tail = tail_after
    for k in range(hi, lo, -1):
        tail += w[k]
        if k < kk - 1:  # the product runs over k < K: T_K = w_K is not in it
            acc -= math.log(tail)
    for i in range(rest.shape[0]):
        acc += math.log(rest[i] + x * e[i, a] + (total - x) * e[i, b])
    return acc


@njit(cache=True)
def _atom_target(kind, z, scale, r, theta, s, wk, c, rest, mu0, tau0, col):  # type: ignore[no-untyped-def]
    lm, up, down = component_consts(kind, scale, r, theta, s)
    if lm == -np.inf:
        return -np.inf
    acc = -0.5 * ((theta - mu0) / tau0) ** 2
    lw = math.log(wk)
    for i in range(z.shape[0]):
        col[i] = fast_loglik(kind, z[i], scale, r, theta, s, lm, up, down)
        d = lw + col[i] - c[i]
        if d < 600.0:  # rest_i + e^d without overflow: one exp and one log
            acc += math.log(rest[i] + math.exp(d))
        else:
            acc += _logaddexp(math.log(rest[i]) if rest[i] > 0.0 else -np.inf, d)
    return acc


@njit(cache=True)
def marginal_moves(  # type: ignore[no-untyped-def]
    kind,
    z,
    scale,
    r,
    theta,
    s,
    w,
    alpha,
    loglik,
    c,
    e,
    atoms,
    pairs,
    mu0,
    tau0,
    log_s_lo,
    log_s_hi,
    noise_var,
    u,
):
    """Moves of (theta, s, w) with the labels summed out, in place: the likelihood is
    prod_i sum_k w_k m(z_i | theta_k, s_k). For each k in ``atoms``, a slice update of
    theta_k, then of log s_k; for each (a, b) in ``pairs``, a slice update of w_a with
    w_a + w_b fixed (prior: truncated stick-breaking). Each update leaves the posterior of
    (theta, s, w) given alpha invariant. ``loglik``, ``c``, ``e`` (see
    :func:`scaled_likelihoods`) are kept current. Returns the uniforms used, or -1 when
    ``u`` ran out (the caller reruns from the same state with more, the same first)."""
    n = z.shape[0]
    rest = np.empty(n)
    col = np.empty(n)
    m_steps = 32
    pos = 0
    for t in range(atoms.shape[0]):
        k = atoms[t]
        if w[k] <= 0.0:
            continue
        _rest(e, w, k, k, rest)
        for which in range(2):
            if pos + 3 > u.shape[0]:
                return -1
            x0 = theta[k] if which == 0 else math.log(s[k])
            lo = -np.inf if which == 0 else log_s_lo
            hi = np.inf if which == 0 else log_s_hi
            th, sk = theta[k], s[k]
            # theta's width: twice its posterior sd were w_k n observations in component k
            # (a function of w_k and s_k, which this update leaves fixed)
            width = 2.0 * math.sqrt((sk * sk + noise_var) / max(w[k] * n, 1.0))
            width = min(max(width, 1e-3 * r), r) if which == 0 else 0.5
            f0 = _atom_target(kind, z, scale, r, th, sk, w[k], c, rest, mu0, tau0, col)
            if f0 == -np.inf:
                continue
            level = f0 + math.log(1.0 - u[pos])
            left = x0 - width * u[pos + 1]
            right = left + width
            j = int(m_steps * u[pos + 2])
            jr = m_steps - 1 - j
            pos += 3
            while j > 0 and left > lo:
                ft = _atom_target(
                    kind, z, scale, r, left if which == 0 else th,
                    sk if which == 0 else math.exp(left), w[k], c, rest, mu0, tau0, col,
                )  # fmt: skip
                if not ft > level:
                    break
                left -= width
                j -= 1
            while jr > 0 and right < hi:
                ft = _atom_target(
                    kind, z, scale, r, right if which == 0 else th,
                    sk if which == 0 else math.exp(right), w[k], c, rest, mu0, tau0, col,
                )  # fmt: skip
                if not ft > level:
                    break
                right += width
                jr -= 1
            left = max(left, lo)
            right = min(right, hi)
            while True:
                if pos >= u.shape[0]:
                    return -1
                x1 = left + (right - left) * u[pos]
                pos += 1
                th1 = x1 if which == 0 else th
                sk1 = sk if which == 0 else math.exp(x1)
                f1 = _atom_target(kind, z, scale, r, th1, sk1, w[k], c, rest, mu0, tau0, col)
                if f1 > level:
                    theta[k], s[k] = th1, sk1
                    big = False
                    for i in range(n):
                        loglik[i, k] = col[i]
                        d = col[i] - c[i]
                        if d > 600.0:
                            big = True
                        e[i, k] = math.exp(d)
                    if big:
                        scaled_likelihoods(loglik, c, e)
                        _rest(e, w, k, k, rest)
                    break
                if x1 < x0:
                    left = x1
                else:
                    right = x1
    for t in range(pairs.shape[0]):
        a, b = pairs[t, 0], pairs[t, 1]
        if w[a] <= 0.0 or w[b] <= 0.0:
            continue
        total = w[a] + w[b]
        tail_after = 0.0
        for j in range(max(a, b) + 1, w.shape[0]):
            tail_after += w[j]
        _rest(e, w, a, b, rest)
        if pos + 2 > u.shape[0]:
            return -1
        x0 = w[a]
        f0 = _pair_target(w, alpha, e, rest, a, b, x0, total, tail_after)
        if f0 == -np.inf:
            continue
        level = f0 + math.log(1.0 - u[pos])
        pos += 1
        left, right = 0.0, total  # the whole interval: no stepping out needed
        while True:
            if pos >= u.shape[0]:
                w[a], w[b] = x0, total - x0
                return -1
            x1 = left + (right - left) * u[pos]
            pos += 1
            if _pair_target(w, alpha, e, rest, a, b, x1, total, tail_after) > level:
                break
            if x1 < x0:
                left = x1
            else:
                right = x1
    return pos
