"""Frequentist estimators of P from locally privatised data, to compare the posterior against.

Paper 001's experiments compare the Dirichlet-process posterior with simpler estimates.
All three here are post-processing of the privatised values (no privacy cost):

* the empirical distribution of Z (ignores the noise);
* the deconvolution kernel density estimate for Laplace noise (Stefanski & Carroll 1990;
  Fan 1991): with a Normal kernel and Lap(b) errors the deconvoluting kernel is
  phi(u) - (b/h)^2 phi''(u) in closed form; for Gaussian noise, by Fourier inversion with
  the kernel whose characteristic function is (1 - t^2)^3 on [-1, 1] (Fan 1992);
* the nonparametric maximum-likelihood estimate of P on a grid, by mix-SQP (Kim et al.
  2020) to its optimality conditions, or by EM (Laird 1978), which stopped early is a
  smoothed estimate instead.

and the Wasserstein-1 distance between distributions on the line, W1 = integral |F - G|.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
from scipy.linalg import cholesky, solve_triangular
from scipy.optimize import nnls

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
    ``grid`` must be strictly increasing, and both CDFs hold one value per grid point.
    """
    g = check_array(grid, "grid", min_size=2)
    if not np.all(np.diff(g) > 0):
        raise ValueError("grid must be strictly increasing")
    a, b = check_array(cdf_a, "cdf_a"), check_array(cdf_b, "cdf_b")
    if a.shape != g.shape or b.shape != g.shape:
        raise ValueError(
            f"cdf_a, cdf_b and grid must have equal lengths, got {a.size}, {b.size}, {g.size}"
        )
    d = np.abs(a - b)
    return float(np.sum(0.5 * (d[1:] + d[:-1]) * np.diff(g)))


def empirical_cdf(values: Any, grid: Any) -> np.ndarray:
    """Empirical CDF of ``values`` at ``grid``."""
    v = np.sort(check_array(values, "values"))
    return np.searchsorted(v, check_array(grid, "grid"), side="right") / v.shape[0]


def normal_reference_bandwidth(z: Any, b: float) -> float:
    """h = (5 b^4 s^5 / n)^(1/9): the AMISE-optimal bandwidth of the Laplace deconvolution KDE
    with a Normal kernel when the target is Normal with sd s (estimated as sqrt(var Z - 2 b^2)).
    ``z`` with (next to) no spread, h = 0, is refused: pass a bandwidth instead."""
    zz = check_array(z, "z", min_size=2)
    b = check_positive(b, "b")
    s2 = max(float(np.var(zz)) - 2.0 * b * b, (0.05 * float(np.std(zz))) ** 2)
    h = float((5.0 * b**4 * s2**2.5 / zz.shape[0]) ** (1.0 / 9.0))
    if not h > 0:
        raise ValueError(
            "z has (next to) no spread: the normal-reference bandwidth is 0; "
            "give bandwidth= explicitly"
        )
    return h


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
    """CDF on ``grid`` of a density estimate on ``grid``: negative parts set to 0, renormalised.

    ``grid`` must be finite and strictly increasing, and ``density`` holds one value per grid
    point (a decreasing grid, a shuffled one or a shorter density gave a wrong CDF or a
    misleading error).
    """
    g = check_array(grid, "grid", min_size=2)
    if not np.all(np.diff(g) > 0):
        raise ValueError("grid must be strictly increasing")
    f = np.maximum(check_array(density, "density"), 0.0)
    if f.shape != g.shape:
        raise ValueError(f"density and grid must have equal lengths, got {f.size}, {g.size}")
    cum = np.concatenate([[0.0], np.cumsum(0.5 * (f[1:] + f[:-1]) * np.diff(g))])
    if cum[-1] <= 0:
        raise ValueError("density must have positive mass on grid")
    return cum / cum[-1]  # type: ignore[no-any-return]


def npmle_grid(
    z: Any,
    loglik: Any,
    support: Any,
    *,
    method: str = "sqp",
    max_iter: int | None = None,
    tol: float | None = None,
) -> np.ndarray:
    """NPMLE of P restricted to the points ``support``; returns their weights.

    ``loglik(z[:, None], support[None, :])`` gives log Q(z_i | support_g), and the NPMLE
    maximises sum_i log sum_g w_g Q(z_i | g) over the simplex. With D_g = mean_i
    Q(z_i | g) / sum_g' w_g' Q(z_i | g'), w is the maximiser exactly when D_g <= 1 for
    every g (with equality where w_g > 0): the KKT conditions of this concave problem.

    ``method="sqp"`` (default): mix-SQP (Kim, Carbonetto, Stephens & Anitescu 2020), the
    maximiser to the KKT gap ``tol`` (max_g D_g - 1 <= tol, default 1e-8) in a few
    iterations (at most ``max_iter``, default 100; a RuntimeWarning if the gap is not
    reached). It minimises f(x) = -mean_i log (Q x)_i + sum_g x_g over x >= 0, whose
    minimiser lies on the simplex, by Newton steps: each solves the quadratic model
    (Hessian H = Q' diag(1/(Qx)^2) Q / n) under x >= 0 as a non-negative least-squares
    problem in the Cholesky factor of H, then backtracks on f (Armijo).

    ``method="em"``: EM from equal weights (Laird 1978), w_g <- w_g D_g, for ``max_iter``
    iterations (default 1000) or until the mean log-likelihood improves by less than
    ``tol`` (default 1e-9). EM converges slowly where the likelihood is flat (heavy local
    noise): stopped early it is a smoothed estimate, not the NPMLE, which is discrete.
    """
    zz = check_array(z, "z")
    s = check_array(support, "support")
    if method not in ("sqp", "em"):
        raise ValueError(f"method must be 'sqp' or 'em', got {method!r}")
    default_iter, default_tol = (100, 1e-8) if method == "sqp" else (1000, 1e-9)
    iters = check_int(default_iter if max_iter is None else max_iter, "max_iter", minimum=1)
    eps = check_positive(default_tol if tol is None else tol, "tol")
    ll = np.asarray(loglik(zz[:, None], s[None, :]), dtype=float)
    lik = np.exp(ll - ll.max(axis=1, keepdims=True))
    if method == "em":
        return _npmle_em(lik, iters, eps)
    return _npmle_sqp(lik, iters, eps)


def _npmle_em(lik: np.ndarray, max_iter: int, tol: float) -> np.ndarray:
    w = np.full(lik.shape[1], 1.0 / lik.shape[1])
    prev = -np.inf
    for _ in range(max_iter):
        mix = lik @ w
        cur = float(np.mean(np.log(mix)))
        w = w * (lik.T @ (1.0 / mix)) / lik.shape[0]
        w /= w.sum()
        if cur - prev < tol:
            break
        prev = cur
    return w


def _npmle_sqp(lik: np.ndarray, max_iter: int, tol: float) -> np.ndarray:
    n, m = lik.shape

    def objective(x: np.ndarray) -> float:
        mix = lik @ x
        return float(-np.mean(np.log(mix)) + x.sum()) if np.all(mix > 0) else math.inf

    x = np.full(m, 1.0 / m)
    fx = objective(x)
    for _ in range(max_iter):
        inv = 1.0 / (lik @ x)
        grad = 1.0 - lik.T @ inv / n  # = 1 - D: the KKT gap is -min(grad)
        if -grad.min() <= tol:
            return x / x.sum()  # type: ignore[no-any-return]
        a = lik * inv[:, None]
        hess = a.T @ a / n
        # a relative ridge keeps the factor defined where columns of Q vanish
        hess[np.diag_indices(m)] += 1e-10 * np.trace(hess) / m + 1e-300
        chol = cholesky(hess)  # upper: hess = R'R
        # min 1/2 y'Hy + b'y over y >= 0  <=>  min ||R y + R^-T b||^2 over y >= 0
        b = grad - hess @ x
        y, _ = nnls(chol, solve_triangular(chol, -b, trans="T"), maxiter=50 * m)
        step, p, slope = 1.0, y - x, float(grad @ (y - x))
        while True:
            fn = objective(x + step * p)
            if fn <= fx + 0.01 * step * slope or step < 1e-12:
                break
            step /= 2
        if fn > fx:  # no descent along the Newton direction: at the solution to rounding
            break
        x, fx = x + step * p, fn
    inv = 1.0 / (lik @ x)
    gap = float((lik.T @ inv).max() / n - 1.0)
    if gap > tol:
        warnings.warn(
            f"npmle_grid: stopped at KKT gap {gap:.2e}, above tol {tol:.2e} (max_iter {max_iter})",
            RuntimeWarning,
            stacklevel=3,
        )
    return x / x.sum()  # type: ignore[no-any-return]
