"""Frequentist estimators of P from locally privatised data, to compare the posterior against.

Paper 001's experiments compare the Dirichlet-process posterior with simpler estimates.
All three here are post-processing of the privatised values (no privacy cost):

* the empirical distribution of Z (ignores the noise);
* the deconvolution kernel density estimate for Laplace noise (Stefanski & Carroll 1990;
  Fan 1991): with a Normal kernel and Lap(b) errors the deconvoluting kernel is
  phi(u) - (b/h)^2 phi''(u) in closed form; for Gaussian noise, by Fourier inversion with
  the kernel whose characteristic function is (1 - t^2)^3 on [-1, 1] (Fan 1992);
* the nonparametric maximum-likelihood estimate of P on a grid, fitted by EM (Laird 1978).

and the Wasserstein-1 distance between distributions on the line, W1 = integral |F - G|.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dpbayes.privacy.validation import check_array, check_int, check_positive

__all__ = [
    "deconvolution_kde_gaussian",
    "deconvolution_kde_laplace",
    "density_to_cdf",
    "empirical_cdf",
    "normal_reference_bandwidth",
    "npmle_grid",
    "wasserstein1",
]


def wasserstein1(cdf_a: Any, cdf_b: Any, grid: Any) -> float:
    """W1 = integral of |F_a - F_b| over ``grid`` (trapezoid rule); both CDFs on ``grid``.

    Exact up to the grid step when both distributions live inside [grid[0], grid[-1]].
    """
    g = check_array(grid, "grid", min_size=2)
    d = np.abs(check_array(cdf_a, "cdf_a") - check_array(cdf_b, "cdf_b"))
    return float(np.sum(0.5 * (d[1:] + d[:-1]) * np.diff(g)))


def empirical_cdf(values: Any, grid: Any) -> np.ndarray:
    """Empirical CDF of ``values`` at ``grid``."""
    v = np.sort(check_array(values, "values"))
    return np.searchsorted(v, check_array(grid, "grid"), side="right") / v.shape[0]


def normal_reference_bandwidth(z: Any, b: float) -> float:
    """h = (5 b^4 s^5 / n)^(1/9): the AMISE-optimal bandwidth of the Laplace deconvolution KDE
    with a Normal kernel when the target is Normal with sd s (estimated as sqrt(var Z - 2 b^2))."""
    zz = check_array(z, "z", min_size=2)
    b = check_positive(b, "b")
    s2 = max(float(np.var(zz)) - 2.0 * b * b, (0.05 * float(np.std(zz))) ** 2)
    return float((5.0 * b**4 * s2**2.5 / zz.shape[0]) ** (1.0 / 9.0))


def deconvolution_kde_laplace(
    z: Any, b: float, grid: Any, bandwidth: float | None = None
) -> np.ndarray:
    """Deconvolution KDE of the density of X from Z = X + Lap(b), at ``grid`` (may be negative).

    f(x) = (1/nh) sum_i [phi(u_i) - (b/h)^2 phi''(u_i)], u_i = (x - Z_i)/h, phi'' = (u^2 - 1) phi:
    the Fourier transform of the kernel is that of phi times 1 + b^2 t^2 / h^2, the inverse
    of the Laplace characteristic function at t/h.
    """
    zz = check_array(z, "z", min_size=2)
    g = check_array(grid, "grid")
    b = check_positive(b, "b")
    h = (
        normal_reference_bandwidth(zz, b)
        if bandwidth is None
        else check_positive(bandwidth, "bandwidth")
    )
    out = np.zeros(g.shape[0])
    c = (b / h) ** 2
    for s in range(0, zz.shape[0], 2000):
        u = (g[:, None] - zz[None, s : s + 2000]) / h
        phi = np.exp(-0.5 * u * u) / np.sqrt(2 * np.pi)
        out += np.sum(phi * (1.0 - c * (u * u - 1.0)), axis=1)
    return out / (zz.shape[0] * h)


def deconvolution_kde_gaussian(
    z: Any, tau: float, grid: Any, bandwidth: float | None = None, points: int = 512
) -> np.ndarray:
    """Deconvolution KDE of the density of X from Z = X + N(0, tau^2), at ``grid``.

    f(x) = (1/pi) int_0^{1/h} Re[e^{-itx} phi_n(t)] (1 - (th)^2)^3 e^{tau^2 t^2 / 2} dt with
    phi_n the empirical characteristic function of Z (Fan 1992), by the trapezoid rule on
    ``points`` nodes. Default bandwidth h = tau / sqrt(log n), the rate-optimal order for
    Gaussian errors (Fan 1992), at which the noise factor e^{tau^2 t^2 / 2} reaches sqrt(n)
    at the cut-off t = 1/h.
    """
    zz = check_array(z, "z", min_size=2)
    g = check_array(grid, "grid")
    tau = check_positive(tau, "tau")
    n = zz.shape[0]
    h = (
        tau / np.sqrt(max(np.log(n), 1.0))
        if bandwidth is None
        else check_positive(bandwidth, "bandwidth")
    )
    t = np.linspace(0.0, 1.0 / h, check_int(points, "points", minimum=8))
    re = np.zeros(t.shape[0])
    im = np.zeros(t.shape[0])
    for s in range(0, n, 4000):
        arg = np.outer(t, zz[s : s + 4000])
        re += np.cos(arg).sum(axis=1)
        im += np.sin(arg).sum(axis=1)
    weight = (1.0 - (t * h) ** 2) ** 3 * np.exp(0.5 * (tau * t) ** 2) / n
    integrand = np.cos(np.outer(g, t)) * (re * weight) + np.sin(np.outer(g, t)) * (im * weight)
    return np.trapezoid(integrand, t, axis=1) / np.pi  # type: ignore[no-any-return]


def density_to_cdf(density: Any, grid: Any) -> np.ndarray:
    """CDF on ``grid`` of a density estimate on ``grid``: negative parts set to 0, renormalised."""
    f = np.maximum(check_array(density, "density"), 0.0)
    g = check_array(grid, "grid", min_size=2)
    cum = np.concatenate([[0.0], np.cumsum(0.5 * (f[1:] + f[:-1]) * np.diff(g))])
    if cum[-1] <= 0:
        raise ValueError("density must have positive mass on grid")
    return cum / cum[-1]  # type: ignore[no-any-return]


def npmle_grid(
    z: Any, loglik: Any, support: Any, *, max_iter: int = 1000, tol: float = 1e-9
) -> np.ndarray:
    """NPMLE of P restricted to the points ``support``, by EM; returns their weights.

    ``loglik(z[:, None], support[None, :])`` gives log Q(z_i | support_g). EM update:
    w_g <- mean_i w_g Q(z_i | g) / sum_g' w_g' Q(z_i | g'); stops when the mean
    log-likelihood improves by less than ``tol``.
    """
    zz = check_array(z, "z")
    s = check_array(support, "support")
    max_iter = check_int(max_iter, "max_iter", minimum=1)
    ll = np.asarray(loglik(zz[:, None], s[None, :]), dtype=float)
    lik = np.exp(ll - ll.max(axis=1, keepdims=True))
    w = np.full(s.shape[0], 1.0 / s.shape[0])
    prev = -np.inf
    for _ in range(max_iter):
        mix = lik @ w
        cur = float(np.mean(np.log(mix)))
        w = w * (lik.T @ (1.0 / mix)) / zz.shape[0]
        w /= w.sum()
        if cur - prev < tol:
            break
        prev = cur
    return w
