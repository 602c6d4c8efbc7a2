"""Exact draws of a Gaussian restricted to the ball ||w||_2 <= W (issue 14).

Proof: ``REGRESSION_SAMPLING_PROOF.md`` §3 beside this file. The target is the density
proportional to exp(-w'Pw / 2 + b'w) on the ball (the posterior N(P^-1 b, P^-1) of
Bayesian linear regression with the prior truncated to the ball), P positive definite.

* d = 1: the inverse cdf in log space (:func:`truncated_normal`): log Phi by
  ``scipy.special.log_ndtr`` (no underflow however far the mass lies outside), the
  quantile by ``ndtri_exp``; computed on the side of the mean where the interval's
  lower-tail probabilities are small, so they keep their relative precision.
* d >= 2: rejection from a Gaussian with extra isotropic precision tau >= 0. On the ball,
  -w'Pw/2 + b'w = -w'(P + tau I)w/2 + b'w + tau ||w||^2 / 2 <= [-w'(P + tau I)w/2 + b'w]
  + tau W^2 / 2, so N(m_tau, (P + tau I)^-1), m_tau = (P + tau I)^-1 b, times
  e^{tau W^2 / 2} is an envelope, and a proposal w is accepted with probability
  exp(tau (||w||^2 - W^2) / 2) if ||w|| <= W (0 outside). Every tau gives exact draws;
  the one used makes the proposal's E||w||^2 equal W^2 (tau = 0, plain rejection, when
  the posterior already has E||w||^2 <= W^2), which minimises the envelope's mass.

No randomness is drawn here: the proposals are built from uniforms of a noise source.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy import special

from dpbayes.privacy.noise import as_noise_source

__all__ = ["SAMPLER", "ball_tau", "truncated_gaussian_ball", "truncated_normal"]

SAMPLER = (
    "exact draws of the Gaussian posterior restricted to the weight ball from uniforms of "
    "the noise source (the secure source: 52-bit uniforms from the OS CSPRNG): d = 1 by "
    "the inverse cdf in log space, d >= 2 by rejection from a Gaussian with extra "
    "isotropic precision; exact in real arithmetic, not floating-point hardened (Mironov "
    "2012); see REGRESSION_SAMPLING_PROOF.md"
)

# round r proposes min(64 * 4^r, 65536) points; the cap bounds the running time
MAX_ROUNDS = 64


def _log_diff(big: float, small: float) -> float:
    """log(e^big - e^small) for small <= big."""
    if small == -math.inf:
        return big
    return big + math.log1p(-math.exp(min(small - big, 0.0)))


def truncated_normal(mu: float, sd: float, lo: float, hi: float, u: float) -> float:
    """The u-quantile of N(mu, sd^2) restricted to [lo, hi] (u in (0, 1)), in log space.

    The standardised interval [a, b] is reflected to lie mostly below 0 (if a > -b), so
    that log Phi(a) and log Phi(b) are the small, relative-exact tail probabilities.
    """
    if not (sd > 0 and lo < hi):
        raise ValueError("truncated_normal needs sd > 0 and lo < hi")
    a, b = (lo - mu) / sd, (hi - mu) / sd
    flip = a > -b
    if flip:
        a, b, u = -b, -a, 1.0 - u
    la, lb = float(special.log_ndtr(a)), float(special.log_ndtr(b))
    if lb > -0.6931471805599453:  # Phi(b) > 1/2: the interval straddles the mean
        mass = math.log1p(-(math.exp(la) + float(special.ndtr(-b))))
    else:
        mass = _log_diff(lb, la)
    target = np.logaddexp(la, math.log(u) + mass)
    z = float(np.clip(special.ndtri_exp(min(target, lb)), a, b))
    if flip:
        z = -z
    return mu + sd * z


def ball_tau(eigenvalues: np.ndarray, b_rot: np.ndarray, radius: float) -> float:
    """The extra precision tau >= 0 that makes E||w||^2 = W^2 under N(m_tau, (P + tau I)^-1),
    i.e. sum 1 / (lam_i + tau) + sum b_i^2 / (lam_i + tau)^2 = W^2 (0 if already below)."""

    def second_moment(tau: float) -> float:
        den = eigenvalues + tau
        return float(np.sum(1.0 / den) + np.sum(b_rot**2 / den**2))

    w2 = radius**2
    if second_moment(0.0) <= w2:
        return 0.0
    lo, hi = 0.0, 1.0
    while second_moment(hi) > w2:
        hi *= 4.0
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        if second_moment(mid) > w2:
            lo = mid
        else:
            hi = mid
    return hi


def truncated_gaussian_ball(
    precision: Any,
    linear: Any,
    radius: float,
    src: Any = None,
    *,
    max_rounds: int = MAX_ROUNDS,
) -> np.ndarray:
    """One exact draw of the density proportional to exp(-w'Pw/2 + b'w) on ||w|| <= W.

    ``precision`` P (d x d, positive definite), ``linear`` b = P mean (module docstring).
    RuntimeError (nothing released) if ``max_rounds`` rounds of proposals (about 4e6)
    accept none: probability (1 - A)^N at acceptance rate A (REGRESSION_SAMPLING_PROOF.md
    §3 gives A measured at the numerical edges). ``src``: a noise source, or None
    (secure) / a seed / a Generator (simulation).
    """
    src = as_noise_source(src)
    p = np.atleast_2d(np.asarray(precision, dtype=float))
    b = np.atleast_1d(np.asarray(linear, dtype=float))
    d = b.size
    if p.shape != (d, d) or not radius > 0:
        raise ValueError("precision must be d x d for a d-vector linear term, radius > 0")
    if d == 1:
        prec = float(p[0, 0])
        return np.array(
            [
                truncated_normal(
                    float(b[0]) / prec,
                    1.0 / math.sqrt(prec),
                    -radius,
                    radius,
                    float(src.uniform(1)[0]),
                )
            ]
        )
    lam, q = np.linalg.eigh((p + p.T) / 2)
    if not lam.min() > 0:
        raise ValueError("precision must be positive definite")
    b_rot = q.T @ b
    tau = ball_tau(lam, b_rot, radius)
    den = lam + tau
    mean_rot = b_rot / den
    for r in range(max_rounds):
        size = min(64 * 4**r, 65536)
        u = src.uniform((size, d + 1))
        z = special.ndtri(u[:, :d])
        w_rot = mean_rot + z / np.sqrt(den)
        norm2 = np.einsum("ij,ij->i", w_rot, w_rot)
        with np.errstate(divide="ignore"):
            ok = (norm2 <= radius**2) & (np.log(u[:, d]) <= tau * (norm2 - radius**2) / 2)
        if ok.any():
            return np.asarray(q @ w_rot[int(np.argmax(ok))])
    raise RuntimeError(
        f"truncated Gaussian (d={d}, radius={radius:.3g}): no proposal accepted in "
        f"{max_rounds} rounds; nothing was released"
    )
