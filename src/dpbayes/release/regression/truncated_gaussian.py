"""Exact draws of a Gaussian restricted to the ball ||w||_2 <= W (issue 14).

Proof: ``PROOF.md`` §3 beside this file. The target is the density
proportional to exp(-w'Pw / 2 + b'w) on the ball (the posterior N(P^-1 b, P^-1) of
Bayesian linear regression with the prior truncated to the ball), P positive definite.

* d = 1: the inverse cdf in log space (:func:`truncated_normal`): log Phi by
  ``scipy.special.log_ndtr`` (no underflow however far the mass lies outside), the
  quantile by ``ndtri_exp``; computed on the side of the mean where the interval's
  lower-tail probabilities are small, so they keep their relative precision.
* d >= 2: two rejection samplers, their proposals interleaved in a fixed order (the
  first accepted one is returned; each accepted proposal is an exact draw, so the first
  one is too):

  - *shrink*: on the ball, -w'Pw/2 + b'w = -w'(P + tau I)w/2 + b'w + tau ||w||^2 / 2
    <= [-w'(P + tau I)w/2 + b'w] + tau W^2 / 2, so N(m_tau, (P + tau I)^-1),
    m_tau = (P + tau I)^-1 b, times e^{tau W^2 / 2} is an envelope; a proposal w is
    accepted with probability exp(tau (||w||^2 - W^2) / 2) if ||w|| <= W (0 outside).
    tau makes the proposal's E||w||^2 equal W^2 (0, plain rejection, when the posterior
    already has E||w||^2 <= W^2), which minimises the envelope's mass.
  - *half-space* (when the mode P^-1 b lies outside the ball): with w* = W n the
    constrained mode ((P + lam I) w* = b, lam > 0), gamma = lam W, depth t = W - <w, n>
    and tangential part s = w - <w, n> n, every w in the ball has ||s||^2 <= 2 W t, so
    for c in [0, 1] the log target is at most const - c gamma t - (1 - c) gamma
    ||s||^2 / (2 W) - (w - w*)'P(w - w*)/2: a Gaussian (precision P + (1 - c) lam
    (I - nn')) restricted to the half-space t >= 0, drawn exactly (its normal coordinate
    by :func:`truncated_normal`, the rest by the conditional Gaussian); accepted with
    probability exp(-(1 - c) gamma (t - ||s||^2 / (2 W))) inside the ball. c = 2/(d + 1)
    keeps the acceptance near 2 / (e (d + 1)) however far the mode is (proof, §3).

No randomness is drawn here: the proposals are built from uniforms of a noise source.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy import special

from dpbayes.privacy.noise import as_noise_source

__all__ = [
    "SAMPLER",
    "ball_tau",
    "truncated_gaussian_ball",
    "truncated_normal",
    "truncated_normal_many",
]

SAMPLER = (
    "exact draws of the Gaussian posterior restricted to the weight ball from uniforms of "
    "the noise source (the secure source: 52-bit uniforms from the OS CSPRNG): d = 1 by "
    "the inverse cdf in log space, d >= 2 by rejection from a Gaussian with extra "
    "isotropic precision interleaved with a half-space envelope at the constrained mode; "
    "exact in real arithmetic, not floating-point hardened (Mironov 2012); see "
    "PROOF.md"
)

# round r proposes min(64 * 4^r, 65536) points; the cap bounds the running time
MAX_ROUNDS = 64
SQRT2 = math.sqrt(2.0)


def _log_phi_drop(b: np.ndarray, delta: np.ndarray, log_erfcx_b: Any = None) -> np.ndarray:
    """log Phi(b - delta) - log Phi(b) for b < 0, delta >= 0, without cancellation:
    Phi(x) = erfcx(-x / sqrt 2) e^{-x^2 / 2} / 2, so the difference is
    b delta - delta^2 / 2 + log erfcx(-(b - delta)/sqrt 2) - log erfcx(-b/sqrt 2) (the
    last term may be passed). Called under ``np.errstate(all="ignore")``."""
    if log_erfcx_b is None:
        log_erfcx_b = np.log(special.erfcx(-b / SQRT2))
    out = delta * (b - delta / 2) + np.log(special.erfcx(-(b - delta) / SQRT2)) - log_erfcx_b
    return np.where(np.isnan(out) | (delta == np.inf), -np.inf, out)


# points per round of the search over the bits of delta: a round costs about the same
# few numpy calls whatever its width, so one element searches 256-ary (8 bits a round)
_SEARCH_POINTS = 4096


def _tail_offsets(a: np.ndarray, b: np.ndarray, v: np.ndarray) -> np.ndarray:
    """delta in [0, b - a] with P(Z >= b - delta | a <= Z <= b) = v, for b < 0: the
    smallest double delta (doubles >= 0 ordered as their bits) at which the condition
    log Phi(b - delta) - log Phi(b) <= log1p(v expm1(log Phi(a) - log Phi(b))) holds; it
    is monotone in delta, false at 0 and true at b - a.

    A k-ary search over the bits: each round tests k - 1 points in the bracket
    [left, right) of every element, left + floor((right - left) j / k) for j < k, and
    keeps the first point that holds (or right) and the point before it (or left), so
    the invariant "fails at left, holds at right" is kept exactly, and the bracket
    shrinks k-fold until right = left + 1 (k = 256 for a few elements, 2 for thousands)."""
    k = int(np.clip(_SEARCH_POINTS // max(b.size, 1), 2, 256))
    j = np.arange(1, k, dtype=np.int64)
    rows = np.arange(b.size)
    with np.errstate(all="ignore"):
        log_erfcx_b = np.log(special.erfcx(-b / SQRT2))[:, None]
        target = np.log1p(v * np.expm1(_log_phi_drop(b, b - a)))[:, None]
        left = np.zeros(b.shape, dtype=np.int64)  # bits of 0.0: the condition fails there
        right = np.ascontiguousarray(b - a, dtype=np.float64).view(np.int64).copy()
        for _ in range(70):
            width = right - left
            if not (width > 1).any():
                break
            q, r = np.divmod(width, k)  # left + floor(width j / k) without overflow
            pts = np.empty((b.size, k + 1), dtype=np.int64)
            pts[:, 0], pts[:, k] = left, right
            pts[:, 1:k] = left[:, None] + q[:, None] * j + (r[:, None] * j) // k
            drop = _log_phi_drop(b[:, None], pts[:, 1:k].view(np.float64), log_erfcx_b)
            holds = drop <= target
            first = np.where(holds.any(axis=1), holds.argmax(axis=1), k - 1)
            left, right = pts[rows, first], pts[rows, first + 1]
    return np.asarray(right.view(np.float64))


def truncated_normal_many(mu: Any, sd: Any, lo: Any, hi: Any, u: Any) -> np.ndarray:
    """The u-quantiles of N(mu, sd^2) restricted to [lo, hi] (elementwise; u in (0, 1);
    lo may be -inf, hi +inf), in log space.

    The standardised interval [a, b] is reflected to lie mostly below 0 (if a > -b).
    If it straddles the mean (b >= 0): log Phi(a) and the mass 1 - Phi(a) - Phi(-b)
    (both terms < 1/2), the quantile by ``ndtri_exp``. Otherwise the mass sits at b, far
    from the mean: the draw is b - delta, delta found from the exact tail law by
    :func:`_tail_offsets`, and the output is the bound minus sd delta, so that it keeps
    its precision however far the bound is from the mean (no cancellation, no grid).
    """
    mu, sd, lo, hi, u = np.broadcast_arrays(
        *(np.asarray(x, dtype=float) for x in (mu, sd, lo, hi, u))
    )
    if not (np.all(sd > 0) and np.all(lo < hi)):
        raise ValueError("truncated_normal needs sd > 0 and lo < hi")
    a, b = (lo - mu) / sd, (hi - mu) / sd
    flip = a > -b
    a, b, u = np.where(flip, -b, a), np.where(flip, -a, b), np.where(flip, 1.0 - u, u)
    out = np.empty(a.shape)
    tail = b < 0
    if tail.any():
        delta = _tail_offsets(a[tail], b[tail], 1.0 - u[tail])
        bound = np.where(flip[tail], lo[tail], hi[tail])
        step = sd[tail] * delta
        out[tail] = np.where(flip[tail], bound + step, bound - step)
    mid = ~tail
    if mid.any():
        am, bm, um = a[mid], b[mid], u[mid]
        la = special.log_ndtr(am)
        with np.errstate(divide="ignore"):
            mass = np.log1p(-(np.exp(la) + special.ndtr(-bm)))
            target = np.logaddexp(la, np.log(um) + mass)
        z = np.clip(special.ndtri_exp(np.minimum(target, special.log_ndtr(bm))), am, bm)
        out[mid] = mu[mid] + sd[mid] * np.where(flip[mid], -z, z)
    return np.asarray(np.clip(out, lo, hi))


def truncated_normal(mu: float, sd: float, lo: float, hi: float, u: float) -> float:
    """Scalar :func:`truncated_normal_many`."""
    return float(truncated_normal_many(mu, sd, lo, hi, u))


def ball_tau(eigenvalues: np.ndarray, b_rot: np.ndarray, radius: float) -> float:
    """The extra precision tau >= 0 that makes E||w||^2 = W^2 under N(m_tau, (P + tau I)^-1),
    i.e. sum 1 / (lam_i + tau) + sum b_i^2 / (lam_i + tau)^2 = W^2 (0 if already below)."""

    def second_moment(tau: float) -> float:
        den = eigenvalues + tau
        with np.errstate(over="ignore"):  # (b / den)^2 beyond the doubles: the moment is inf
            # (b / den)^2, not b^2 / den^2: den^2 underflows to 0 for den below 1e-162
            return float(np.sum(1.0 / den) + np.sum((b_rot / den) ** 2))

    w2 = radius**2
    if second_moment(0.0) <= w2:
        return 0.0
    # bracket the root in [lo, hi] = [hi / 4, hi] from either side of 1: for a wide ball tau
    # is about d / W^2, down to 1e-300 (bisecting [0, 1] resolved only 2^-100, and the
    # envelope's acceptance then fell to about e^-(2^-101 W^2): failures that depended on
    # the data through tau)
    hi = 1.0
    while second_moment(hi) > w2:
        hi *= 4.0
    while hi / 4.0 > 0.0 and second_moment(hi / 4.0) <= w2:
        hi /= 4.0
    lo = hi / 4.0
    for _ in range(200):  # to a relative 1e-15 (about 50 halvings of [hi / 4, hi])
        if hi - lo <= 1e-15 * hi:
            break
        mid = 0.5 * (lo + hi)
        if second_moment(mid) > w2:
            lo = mid
        else:
            hi = mid
    return hi


def _shrink_proposals(
    lam: np.ndarray, b_rot: np.ndarray, radius: float, u: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Shrink-envelope proposals (module docstring) in the eigenbasis of P, and which of
    them are accepted; ``u`` is (T, d + 1) uniforms."""
    d = lam.size
    tau = ball_tau(lam, b_rot, radius)
    den = lam + tau
    w_rot = b_rot / den + special.ndtri(u[:, :d]) / np.sqrt(den)
    norm2 = np.einsum("ij,ij->i", w_rot, w_rot)
    with np.errstate(divide="ignore"):
        ok = (norm2 <= radius**2) & (np.log(u[:, d]) <= tau * (norm2 - radius**2) / 2)
    return w_rot, ok


class _HalfSpace:
    """The half-space envelope (module docstring), in the eigenbasis of P: w0 = W n on the
    sphere, g = b - P w0 = gamma n + g_s (gamma >= 0), delta = w - w0, t = -<delta, n>,
    s = delta + t n; the envelope is exp(const + (c gamma n + g_s)'delta - delta'Q delta / 2)
    on t >= 0, Q = P + (1 - c) (gamma / W) (I - nn'), an exact bound of the target on
    the ball for any unit n with gamma >= 0 (proof, §3)."""

    def __init__(self, lam: np.ndarray, b_rot: np.ndarray, radius: float, n: np.ndarray) -> None:
        d = lam.size
        self.radius, self.normal = radius, n
        self.w0 = radius * n
        g = b_rot - lam * self.w0  # gradient of the log target at w0 (exact identity)
        self.gamma = float(g @ n)
        self.c = 2.0 / (d + 1)
        # Q = diag(lam) + k (I - nn'), k = (1 - c) gamma / W, is inverted and factored by its
        # structure, not numerically: with A = diag(lam + k), s = sum n_i^2 lam_i / (lam_i + k)
        # and q = sum n_i^2 / (lam_i + k) (so k q + s = 1), Sherman-Morrison gives
        # Q^-1 = A^-1 + (k / s) A^-1 n n' A^-1, and with u = A^-1/2 n / sqrt(q) the factor
        # root = A^-1/2 (I + (1 / sqrt(s) - 1) u u') has root root' = Q^-1. Every term is a
        # sum of positive parts: no cancellation at any k / lam (inv and Cholesky of Q
        # failed or lost the tangential variance once k / lam passed about 1e16, a tiny W
        # against collinear rows: a refusal for some data sets only).
        k = (1.0 - self.c) * self.gamma / radius
        a_inv = 1.0 / (lam + k)
        s_par = float(np.sum(n * n * lam * a_inv))
        q_par = float(np.sum(n * n * a_inv))
        v = a_inv * n
        self.cov = np.diag(a_inv) + (k / s_par) * np.outer(v, v)
        u_dir = np.sqrt(a_inv) * n / math.sqrt(q_par)
        self.chol = np.sqrt(a_inv)[:, None] * (
            np.eye(d) + (1.0 / math.sqrt(s_par) - 1.0) * np.outer(u_dir, u_dir)
        )
        linear = self.c * self.gamma * n + (g - self.gamma * n)
        self.mean = self.cov @ linear  # of delta
        self.sn = self.cov @ n
        self.var_n = float(n @ self.sn)
        self.mean_n = float(n @ self.mean)

    @staticmethod
    def build(lam: np.ndarray, b_rot: np.ndarray, radius: float) -> _HalfSpace | None:
        """The envelope at the constrained mode if the unconstrained mode P^-1 b lies
        outside the ball (else None): w* = (P + mu I)^-1 b with ||w*|| = W, mu by
        bisection (any unit n with gamma >= 0 is valid; this one makes it tight)."""
        if float(np.sum((b_rot / lam) ** 2)) <= radius**2:
            return None
        lo, hi = 0.0, 1.0
        while float(np.sum((b_rot / (lam + hi)) ** 2)) > radius**2:
            hi *= 4.0
        for _ in range(200):
            mid = 0.5 * (lo + hi)
            if float(np.sum((b_rot / (lam + mid)) ** 2)) > radius**2:
                lo = mid
            else:
                hi = mid
        w_star = b_rot / (lam + 0.5 * (lo + hi))
        env = _HalfSpace(lam, b_rot, radius, w_star / np.linalg.norm(w_star))
        return env if env.gamma >= 0 else None

    def proposals(self, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Proposals w and which are accepted; ``u`` is (T, d + 2) uniforms."""
        d = self.normal.size
        # <delta, n> of N(mean, cov) restricted to <delta, n> <= 0, exactly
        y = truncated_normal_many(self.mean_n, math.sqrt(self.var_n), -math.inf, 0.0, u[:, d])
        z = special.ndtri(u[:, :d]) @ self.chol.T  # N(0, cov)
        # Matheron's rule: the conditional law of N(mean, cov) given <delta, n> = y; its
        # normal part is then set to y itself (the sum would cancel to y at a loss of
        # precision when the mean is far beyond the bound), its tangential part kept
        delta = self.mean + z + np.outer(y - self.mean_n - z @ self.normal, self.sn / self.var_n)
        tang = delta - np.outer(delta @ self.normal, self.normal)
        delta = tang + np.outer(y, self.normal)
        t = -y
        s2 = np.einsum("ij,ij->i", tang, tang)
        inside = s2 + t**2 <= 2 * self.radius * t  # ||w0 + delta|| <= W
        log_ratio = -(1.0 - self.c) * self.gamma * (t - s2 / (2 * self.radius))
        with np.errstate(divide="ignore"):
            ok = inside & (np.log(u[:, d + 1]) <= np.minimum(log_ratio, 0.0))
        return self.w0 + delta, ok


def truncated_gaussian_ball(
    precision: Any,
    linear: Any,
    radius: float,
    src: Any = None,
    *,
    max_rounds: int = MAX_ROUNDS,
    floor: float = 0.0,
) -> np.ndarray:
    """One exact draw of the density proportional to exp(-w'Pw/2 + b'w) on ||w|| <= W.

    ``precision`` P (d x d, positive definite), ``linear`` b = P mean (module docstring).
    ``floor``: a known lower bound on P's eigenvalues (the prior precision, for P =
    lambda I + X'X / sigma^2): computed eigenvalues that rounding puts below it are raised
    to it, a change within eigh's rounding error (about 1e-16 ||P||). Without it a tiny
    lambda with a rank-deficient X'X gave eigenvalues <= 0 and a refusal inside the
    release, for some data and not their neighbours.
    RuntimeError (nothing released) if ``max_rounds`` rounds of proposals (about 4e6)
    accept none: probability (1 - A)^N at acceptance rate A (PROOF.md
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
    lam = np.maximum(lam, floor)
    if not lam.min() > 0:
        raise ValueError("precision must be positive definite")
    b_rot = q.T @ b
    half = _HalfSpace.build(lam, b_rot, radius)
    for r in range(max_rounds):
        size = min(64 * 4**r, 65536)
        w_rot, ok = _shrink_proposals(lam, b_rot, radius, src.uniform((size, d + 1)))
        if ok.any():
            return np.asarray(q @ w_rot[int(np.argmax(ok))])
        if half is not None:
            w_rot, ok = half.proposals(src.uniform((size, d + 2)))
            if ok.any():
                return np.asarray(q @ w_rot[int(np.argmax(ok))])
    raise RuntimeError(
        f"truncated Gaussian (d={d}, radius={radius:.3g}): no proposal accepted in "
        f"{max_rounds} rounds; nothing was released"
    )
