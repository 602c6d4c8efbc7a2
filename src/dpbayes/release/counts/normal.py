"""Noise-aware posterior of the Normal mean after noise on the posterior mean.

The release (``release/counts/mechanism.py``) publishes m~ = clip(m_n + Z, lo, hi) with
m_n = v_n (mu0 / s0^2 + S / s^2), S the sum of the n values clamped to [L, U],
v_n = 1 / (1/s0^2 + n/s^2) public, Z ~ Laplace(b) or N(0, sigma^2).

Likelihood of m~ given mu. Two models of the clamped sum S (``clamp=``):

* ``"ignore"`` (default): S ~ N(n mu, n s^2), the likelihood the conjugate update itself
  uses (``NormalMean.posterior_from`` treats the clamped values as Normal). This is exact
  for the model as dpbayes defines it, so as eps grows the noise-aware posterior tends to
  the exact (non-private) posterior; it is exact for the data too when the clamp is
  inactive (bounds wide compared with the data).
* ``"clt"``: the clamped values are iid with the censored-Normal moments E_c(mu),
  V_c(mu) (closed forms below) and S ~ N(n E_c, n V_c) by the central limit theorem
  (**approximation**: error O(1/sqrt(n)) in the shape of S's distribution). This also
  corrects the clamping bias that the conjugate model ignores.

Then m_n | mu ~ N(M(mu), T(mu)^2), M = v_n (mu0/s0^2 + n E/s^2), T = v_n sqrt(n V) / s^2,
and m_n + Z has a closed form: Normal (Gaussian noise) or Normal-Laplace (Reed 2006):

    f(t) = 1/(2b) [e^{T^2/2b^2 - t/b} Phi(t/T - T/b) + e^{T^2/2b^2 + t/b} Phi(-t/T - T/b)].

The truncation is exact: m~ = lo has likelihood P(m_n + Z <= lo), m~ = hi has
P(m_n + Z >= hi). The posterior of mu (prior N(mu0, s0^2) times this likelihood) is one-
dimensional and is tabulated on an adaptive grid (:class:`GridDistribution`): no closed
form exists for the Laplace case.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy import special, stats

from dpbayes.models import NormalMean
from dpbayes.models.mixtures import GridDistribution
from dpbayes.release.base import Release
from dpbayes.release.counts.record import NormalMeanRecord

__all__ = [
    "CLAMPS",
    "MAX_ZOOMS",
    "censored_normal_moments",
    "normal_laplace_logcdf",
    "normal_laplace_logpdf",
    "normal_mean_posterior",
    "zoom",
]

GRID = 2001


def censored_normal_moments(
    mu: np.ndarray, sd: float, lower: float, upper: float
) -> tuple[np.ndarray, np.ndarray]:
    """Mean and variance of clamp(N(mu, sd^2), lower, upper), elementwise in mu."""
    mu = np.asarray(mu, dtype=float)
    a, b = (lower - mu) / sd, (upper - mu) / sd
    pa, pb = special.ndtr(a), special.ndtr(b)
    qa, qb = stats.norm.pdf(a), stats.norm.pdf(b)
    mid = pb - pa
    upper_mass = special.ndtr(-b)
    mean = lower * pa + upper * upper_mass + mu * mid + sd * (qa - qb)
    second = (
        lower**2 * pa
        + upper**2 * upper_mass
        + mu**2 * mid
        + 2 * mu * sd * (qa - qb)
        + sd**2 * (mid + a * qa - b * qb)
    )
    var = np.maximum(second - mean**2, 1e-300)
    return np.asarray(mean), np.asarray(var)


def normal_laplace_logpdf(t: np.ndarray, tau: np.ndarray, b: float) -> np.ndarray:
    """log density at t of N(0, tau^2) + Laplace(0, b)."""
    t, tau = np.asarray(t, dtype=float), np.asarray(tau, dtype=float)
    c = tau**2 / (2 * b * b)
    left = c - t / b + special.log_ndtr(t / tau - tau / b)
    right = c + t / b + special.log_ndtr(-t / tau - tau / b)
    return np.asarray(np.logaddexp(left, right) - math.log(2 * b))


def _log_lower(t: np.ndarray, tau: np.ndarray, b: float) -> np.ndarray:
    """log P(N + L <= t) for t <= 0 (no cancellation in the dominant term). Where tau is
    below 1e-100 b the Normal part changes P by a relative O(tau / b), below any double's
    resolution: the Laplace's own log P(L <= t) = t / b - log 2 (the formula below would
    take -inf - -inf there)."""
    tiny = tau < 1e-100 * b
    if np.any(tiny):
        out = np.empty(np.shape(t))
        out[tiny] = t[tiny] / b - math.log(2.0)
        if np.any(~tiny):
            out[~tiny] = _log_lower(t[~tiny], tau[~tiny], b)
        return out
    c = tau**2 / (2 * b * b)
    la = special.log_ndtr(t / tau)
    # P(N + E <= t) = Phi(t/tau) - e^{c - t/b} Phi(t/tau - tau/b) >= 0 (E ~ Exp(b))
    ratio = np.minimum(c - t / b + special.log_ndtr(t / tau - tau / b) - la, 0.0)
    with np.errstate(divide="ignore"):
        plus = la + np.log(np.maximum(-np.expm1(ratio), 0.0))
    # P(N - E <= t) = Phi(t/tau) + e^{c + t/b} Phi(-t/tau - tau/b)
    minus = np.logaddexp(la, c + t / b + special.log_ndtr(-t / tau - tau / b))
    return np.asarray(np.logaddexp(plus, minus) - math.log(2.0))


def normal_laplace_logcdf(t: np.ndarray, tau: np.ndarray, b: float) -> np.ndarray:
    """log P(N(0, tau^2) + Laplace(0, b) <= t), accurate in both tails."""
    t, tau = np.broadcast_arrays(np.asarray(t, dtype=float), np.asarray(tau, dtype=float))
    neg = t <= 0
    out = np.empty(t.shape)
    out[neg] = _log_lower(t[neg], tau[neg], b)
    lo = _log_lower(-t[~neg], tau[~neg], b)
    out[~neg] = np.log(-np.expm1(lo))
    return out


CLAMPS = ("ignore", "clt")


def _log_likelihood(rel: Release, mu: np.ndarray, clamp: str = "ignore") -> np.ndarray:
    model: NormalMean = rel.model
    rec = NormalMeanRecord.of(rel)
    if rec.n is None or rec.posterior_sd is None or rec.truncation is None:
        raise ValueError(
            "the release must carry the public n, posterior_sd and truncation of a "
            "substitute Normal-mean release"
        )
    n = rec.n
    s_post = float(rec.posterior_sd)
    lo, hi = (float(x) for x in rec.truncation)
    if clamp == "clt":
        e_c, v_c = censored_normal_moments(mu, model.noise_sd, model.lower, model.upper)
    else:
        e_c, v_c = np.asarray(mu, dtype=float), np.full(np.shape(mu), model.noise_sd**2)
    # v (m0 / s0^2 + n e_c / sd^2) and v sqrt(n v_c) / sd^2 with v = s_post^2, formed from
    # the ratios s_post / s0 <= 1 and s_post / sd, so that no square of a prior sd of
    # 1e+-300 overflows or underflows on the way
    r0, r1 = (s_post / model.prior_sd) ** 2, (s_post / model.noise_sd) ** 2
    centre = r0 * model.prior_mean + (n * r1) * e_c
    spread = np.maximum(r1 * np.sqrt(n * v_c), 1e-300)
    y = float(rel.released["posterior_mean"])
    if rel.mechanism == "gaussian":
        sd = np.sqrt(spread**2 + float(rel.guarantee.details["sigma"]) ** 2)
        if y <= lo:
            return _finite_log_ndtr((lo - centre) / sd)
        if y >= hi:
            return _finite_log_ndtr((centre - hi) / sd)
        z = _z_square_half(np.asarray((y - centre) / sd, dtype=float))
        return np.asarray(-z - np.log(sd) - 0.5 * math.log(2.0 * math.pi))
    b = float(rel.guarantee.details["scale"])
    if y <= lo:
        return normal_laplace_logcdf(lo - centre, spread, b)
    if y >= hi:
        return normal_laplace_logcdf(centre - hi, spread, b)
    return normal_laplace_logpdf(y - centre, spread, b)


#: Beyond this |z|, z^2 / 2 would overflow: the Gaussian terms continue it by a finite,
#: increasing function, so that a grid over a prior sd of 1e300 (points 1e298 from the
#: mode) still ranks its points and zooms in; such points have weight 0 either way.
_Z_BIG = 1e150


def _z_square_half(z: np.ndarray) -> np.ndarray:
    """z^2 / 2 up to |z| = 1e150, then (1e300 / 2) (1 + log(|z| / 1e150)): continuous,
    increasing in |z|, finite."""
    az = np.abs(z)
    big = az > _Z_BIG
    out = 0.5 * np.where(big, 0.0, az) ** 2
    with np.errstate(divide="ignore"):
        out[big] = 0.5 * _Z_BIG**2 * (1.0 + np.log(az[big] / _Z_BIG))
    return out


def _finite_log_ndtr(z: Any) -> np.ndarray:
    """log Phi(z), continued below z = -1e150 like :func:`_z_square_half` (finite)."""
    z = np.asarray(z, dtype=float)
    out = np.asarray(special.log_ndtr(np.maximum(z, -_Z_BIG)), dtype=float)
    low = z < -_Z_BIG
    out[low] = -_z_square_half(z[low]) - np.log(-z[low])
    return out


def _log_post(rel: Release, mu: np.ndarray, clamp: str) -> np.ndarray:
    model: NormalMean = rel.model
    prior = stats.norm.logpdf(mu, model.prior_mean, model.prior_sd)
    return np.asarray(prior + _log_likelihood(rel, mu, clamp))


def normal_mean_posterior(
    rel: Release, *, clamp: str = "ignore", grid: int = GRID
) -> GridDistribution:
    """Posterior of mu given the noisy posterior mean, on an adaptive grid.

    Start from the prior's +-12 sd; then zoom onto the region where the log posterior is
    within 40 of its maximum (the density there is unimodal in practice: a log-concave
    noise convolved with a Normal, shifted monotonically in mu) until it spans a quarter of
    the grid. Each zoom keeps the grid points next to the best one, so it narrows by a
    factor of about grid / 3 and never loses the mode; with a prior sd of 1e12 against a
    posterior sd of 0.1 it took five (the old cap of four returned mean 0, sd 4.9 where the
    answer is 0.37, 0.12).
    """
    if clamp not in CLAMPS:
        raise ValueError(f"clamp must be one of {CLAMPS}, got {clamp!r}")
    model: NormalMean = rel.model
    lo, hi = model.prior_mean - 12 * model.prior_sd, model.prior_mean + 12 * model.prior_sd
    if not np.all(np.diff(np.linspace(lo, hi, grid)) > 0):
        raise ValueError(
            f"prior_sd = {model.prior_sd:g} is below the doubles' resolution at prior_mean = "
            f"{model.prior_mean:g}: the posterior is the prior to double precision, and no "
            "grid resolves it (use the model's prior)"
        )
    x, lp = zoom(lambda m: _log_post(rel, m, clamp), lo, hi, grid)
    return GridDistribution(x, lp)


#: The most zoom passes: each narrows the range by about a factor grid / 3 (>= 40).
MAX_ZOOMS = 200


def zoom(log_post: Any, lo: float, hi: float, grid: int) -> tuple[np.ndarray, np.ndarray]:
    """(x, log_post(x)) on ``grid`` points of the range where log_post is within 40 of its
    maximum, found by zooming from [lo, hi] (module docstring of
    :func:`normal_mean_posterior`); ValueError if the log posterior is nowhere finite."""
    for _ in range(MAX_ZOOMS):
        x = np.linspace(lo, hi, grid)
        lp = np.asarray(log_post(x), dtype=float)
        finite = np.isfinite(lp)
        if not finite.any():
            raise ValueError(
                "the noise-aware posterior could not be located: its log density is not "
                f"finite anywhere on [{lo:.6g}, {hi:.6g}] (prior or released values too extreme)"
            )
        keep = np.flatnonzero(finite & (lp >= np.max(lp[finite]) - 40.0))
        i0, i1 = max(int(keep[0]) - 1, 0), min(int(keep[-1]) + 1, grid - 1)
        if i1 - i0 > grid // 4 or not x[i0] < x[i1]:
            break
        lo, hi = float(x[i0]), float(x[i1])
    return x, lp
