"""Posterior draws of Bayesian linear regression on a public lattice, drawn exactly: the
sampler the ``sampling`` release calls.

A sampler that builds doubles from uniforms of finite precision reaches a set of outputs
that depends on the data (Mironov 2012): the inverse-cdf draws this release used before
reached, for 1-26 of 300 draws, doubles that no uniform reaches under a neighbouring data
set, an unbounded privacy loss (PROOF.md §3.4). Here the output space is public and the
same for every data set, and the draw from it is exact in rational arithmetic:

* the lattice is Lambda = h Z^d inside the ball ||w|| <= W, with h = 2^-520
  (:data:`LATTICE_EXPONENT`): far finer than the doubles, so the law is the continuous
  posterior restricted to Lambda; the released doubles are the lattice point correctly
  rounded (post-processing);
* the target is pi(w) proportional to exp(-w'Pw/2 + b'w) on Lambda, for the computed P and b
  read as the rationals they are;
* the proposal is the discrete Gaussian with precision P + tau I and linear term b, drawn
  coordinate by coordinate from its exact LDL' factorisation (rational, no square roots):
  coordinate k given the later ones is a discrete Gaussian on h Z with a rational centre and
  variance 1 / D_k (:func:`~dpbayes.privacy.discrete_gaussian.discrete_gaussian`);
* a proposal w is kept if it lies in the ball and with probability
  exp(-tau (W^2 - ||w||^2) / 2) (:func:`~dpbayes.privacy.discrete_gaussian.bernoulli_exp`):
  rejection sampling with the shrink envelope of PROOF.md §3.2, exact.

The chain of one-dimensional draws has probability exp(-(G(w) - G_min)) / prod_k Z_k,
Z_k the normaliser of coordinate k's discrete Gaussian: it depends on the centre only
through its offset from the lattice, by a factor within 1 +- 2e-137 when the lattice
variance 1 / (D_k h^2) is at least 16 (Poisson summation), which h = 2^-520 ensures for any
precision up to 1e308. Proof: PROOF.md §3 beside this file.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from dpbayes.privacy.discrete_gaussian import bernoulli_exp, discrete_gaussian_ratio
from dpbayes.privacy.noise import as_noise_source

__all__ = [
    "LATTICE_EXPONENT",
    "MAX_PROPOSALS",
    "SAMPLER",
    "LatticeGaussianBall",
    "ball_tau",
]

#: The lattice spacing is 2^-LATTICE_EXPONENT: h^2 * 4e308 < 1/16, so every coordinate's
#: discrete Gaussian has a lattice variance of at least 16 (module docstring).
LATTICE_EXPONENT = 520

#: Proposals per draw before the draw fails (RuntimeError, nothing released).
MAX_PROPOSALS = 200_000

SAMPLER = (
    "exact draws of the posterior restricted to the public lattice 2^-520 Z^d inside the "
    "weight ball, in rational arithmetic from uniform integers of the noise source (the "
    "secure source: the OS CSPRNG): rejection from a discrete Gaussian with extra isotropic "
    "precision, coordinate by coordinate from its exact LDL' factorisation; see PROOF.md"
)


def ball_tau(eigenvalues: np.ndarray, b_rot: np.ndarray, radius: float) -> float:
    """The extra precision tau >= 0 that makes E||w||^2 = W^2 under N(m_tau, (P + tau I)^-1),
    i.e. sum 1 / (lam_i + tau) + sum b_i^2 / (lam_i + tau)^2 = W^2 (0 if already below).
    Any tau >= 0 gives an exact sampler; this one minimises the envelope's mass."""

    def second_moment(tau: float) -> float:
        den = eigenvalues + tau
        with np.errstate(over="ignore"):  # (b / den)^2 beyond the doubles: the moment is inf
            # (b / den)^2, not b^2 / den^2: den^2 underflows to 0 for den below 1e-162
            return float(np.sum(1.0 / den) + np.sum((b_rot / den) ** 2))

    w2 = radius**2
    if second_moment(0.0) <= w2:
        return 0.0
    # bracket the root in [hi / 4, hi] from either side of 1: for a wide ball tau is about
    # d / W^2, down to 1e-300
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


def _ldl(a: list[list[Fraction]]) -> tuple[list[list[Fraction]], list[Fraction]] | None:
    """a = L D L' exactly (L unit lower triangular), or None if a is not positive
    definite (some pivot D_j <= 0)."""
    d = len(a)
    low = [[Fraction(int(i == j)) for j in range(d)] for i in range(d)]
    diag: list[Fraction] = []
    for j in range(d):
        s = a[j][j] - sum((low[j][k] ** 2 * diag[k] for k in range(j)), Fraction(0))
        if s <= 0:
            return None
        diag.append(s)
        for i in range(j + 1, d):
            t = a[i][j] - sum((low[i][k] * low[j][k] * diag[k] for k in range(j)), Fraction(0))
            low[i][j] = t / s
    return low, diag


def _solve(low: list[list[Fraction]], diag: list[Fraction], b: list[Fraction]) -> list[Fraction]:
    """x with L D L' x = b, exactly."""
    d = len(b)
    y: list[Fraction] = []
    for i in range(d):  # L y = b
        y.append(b[i] - sum((low[i][k] * y[k] for k in range(i)), Fraction(0)))
    z = [y[i] / diag[i] for i in range(d)]
    x = [Fraction(0)] * d
    for i in reversed(range(d)):  # L' x = z
        x[i] = z[i] - sum((low[k][i] * x[k] for k in range(i + 1, d)), Fraction(0))
    return x


class LatticeGaussianBall:
    """Exact draws of pi(w) proportional to exp(-w'Pw/2 + b'w) on the lattice
    2^-LATTICE_EXPONENT Z^d inside ||w|| <= W (module docstring).

    ``precision`` P (d x d, symmetric; only w'Pw is used, so P and (P + P')/2 define the
    same target), ``linear`` b. ``floor``: a known lower bound on P's eigenvalues (the
    prior precision), used only to choose tau. ``exponent``: the lattice is
    2^-exponent Z^d (the release uses :data:`LATTICE_EXPONENT`; a coarser lattice draws
    exactly too, but the normalisers Z_k then vary more with the centre). Set up once (an
    exact LDL' of P + tau I); :meth:`draw` may be called many times.
    """

    def __init__(
        self,
        precision: Any,
        linear: Any,
        radius: float,
        *,
        floor: float = 0.0,
        exponent: int = LATTICE_EXPONENT,
    ) -> None:
        p = np.atleast_2d(np.asarray(precision, dtype=float))
        b = np.atleast_1d(np.asarray(linear, dtype=float))
        d = b.size
        if p.shape != (d, d) or not (radius > 0 and math.isfinite(radius)):
            raise ValueError("precision must be d x d for a d-vector linear term, radius > 0")
        if not (np.all(np.isfinite(p)) and np.all(np.isfinite(b))):
            raise ValueError("precision and linear must be finite")
        sym = (p + p.T) / 2
        lam, q = np.linalg.eigh(sym)
        lam = np.maximum(lam, max(floor, 1e-300))
        tau = ball_tau(lam, q.T @ b, radius)  # efficiency only: any tau >= 0 is exact
        exact = [[(Fraction(p[i, j]) + Fraction(p[j, i])) / 2 for j in range(d)] for i in range(d)]
        scale = max(abs(float(v)) for v in np.diag(sym)) or 1.0
        while True:
            shifted = [
                [exact[i][j] + (Fraction(tau) if i == j else 0) for j in range(d)] for i in range(d)
            ]
            factors = _ldl(shifted)
            if factors is not None:
                break
            # P + tau I is not positive definite in exact arithmetic (rounding in P): any
            # larger tau is as exact, so raise it until it is
            tau = max(2.0 * tau, scale * 2.0**-60)
        low, diag = factors
        self.d = d
        self.tau = Fraction(tau)
        self.radius2 = Fraction(radius) ** 2
        mean = _solve(low, diag, [Fraction(v) for v in b])
        if not isinstance(exponent, int) or exponent < 0:
            raise ValueError(f"exponent must be an integer >= 0, got {exponent!r}")
        self.exponent = exponent
        unit = 1 << exponent
        # coordinate k's centre, in lattice units: (c_k + sum_{i>k} L_ik c_i) / h
        #   - sum_{i>k} L_ik j_i, with the L_ik over one common denominator per column
        self._base = [
            (mean[k] + sum((low[i][k] * mean[i] for i in range(k + 1, d)), Fraction(0))) * unit
            for k in range(d)
        ]
        self._den = [math.lcm(*(low[i][k].denominator for i in range(k, d))) for k in range(d)]
        self._num = [
            [low[i][k].numerator * (self._den[k] // low[i][k].denominator) for i in range(d)]
            for k in range(d)
        ]
        self._var = [Fraction(unit * unit) / diag[k] for k in range(d)]
        self._limit = self.radius2 * unit * unit  # ||j||^2 <= W^2 / h^2
        self.proposals = 0  # proposals made by the draws so far

    def _propose(self, src: Any) -> list[int] | None:
        """One proposal j (w = h j), or None as soon as its later coordinates leave the
        ball (the proposal would be rejected whatever the rest)."""
        d = self.d
        j = [0] * d
        norm2 = 0
        for k in reversed(range(d)):
            s = sum(self._num[k][i] * j[i] for i in range(k + 1, d))
            centre = self._base[k] - Fraction(s, self._den[k])  # in lowest terms
            j[k] = discrete_gaussian_ratio(centre.numerator, centre.denominator, self._var[k], src)
            norm2 += j[k] * j[k]
            if norm2 > self._limit:
                return None
        return j

    def draw(self, src: Any = None, *, max_proposals: int = MAX_PROPOSALS) -> np.ndarray:
        """One exact draw (a d-vector of doubles, the lattice point correctly rounded).
        RuntimeError (nothing released) after ``max_proposals`` rejected proposals."""
        src = as_noise_source(src)
        unit2 = 1 << (2 * self.exponent)
        for _ in range(max_proposals):
            self.proposals += 1
            j = self._propose(src)
            if j is None:
                continue
            norm2 = Fraction(sum(v * v for v in j), unit2)
            if bernoulli_exp(self.tau * (self.radius2 - norm2) / 2, src):
                return np.array([float(Fraction(v, 1 << self.exponent)) for v in j])
        raise RuntimeError(
            f"lattice Gaussian (d={self.d}): no proposal accepted in {max_proposals}; "
            "nothing was released"
        )
