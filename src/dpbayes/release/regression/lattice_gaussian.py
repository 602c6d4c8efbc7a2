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
  rejection sampling with the shrink envelope of PROOF.md §3.2, exact;
* when the posterior's mode lies outside the ball, its proposals alternate with those of
  a half-space envelope at the constrained mode (:class:`_HalfSpace`, PROOF.md §3.5),
  drawn in integer coordinates whose first one is the depth along an integer direction m;
  the first kept proposal of either is the draw.

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

from dpbayes.privacy.discrete_gaussian import (
    bernoulli_exp,
    discrete_gaussian_below,
    discrete_gaussian_ratio,
)
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

#: The half-space envelope's integer direction m is the constrained mode's direction times
#: 2^e, rounded, for the first e here that gives a valid envelope (PROOF.md §3.5).
DIRECTION_BITS = (20, 12, 6, 3)

#: Proposals per draw before the draw fails (RuntimeError, nothing released).
MAX_PROPOSALS = 200_000

SAMPLER = (
    "exact draws of the posterior restricted to the public lattice 2^-520 Z^d inside the "
    "weight ball, in rational arithmetic from uniform integers of the noise source (the "
    "secure source: the OS CSPRNG): rejection from a discrete Gaussian with extra isotropic "
    "precision, coordinate by coordinate from its exact LDL' factorisation, interleaved "
    "with a half-space envelope at the constrained mode when the mode lies outside the "
    "ball; see PROOF.md"
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


class _Chain:
    """Exact draws of the discrete Gaussian on Z^d with precision A and mean c (rationals):
    coordinate d - 1 from its marginal, then each coordinate k given the later ones, from
    the exact A = L D L' (module docstring; PROOF.md §3.3). Coordinate k's variance is
    1 / D_k and its centre c_k + sum_{i>k} L_ik c_i - sum_{i>k} L_ik j_i."""

    def __init__(self, a: list[list[Fraction]], mean: list[Fraction]) -> None:
        factors = _ldl(a)
        if factors is None:
            raise ArithmeticError("the precision is not positive definite")
        low, diag = factors
        d = len(mean)
        self.d = d
        self.diag = diag
        self._base = [
            mean[k] + sum((low[i][k] * mean[i] for i in range(k + 1, d)), Fraction(0))
            for k in range(d)
        ]
        # the L_ik of column k over one common denominator
        self._den = [math.lcm(*(low[i][k].denominator for i in range(k, d))) for k in range(d)]
        self._num = [
            [low[i][k].numerator * (self._den[k] // low[i][k].denominator) for i in range(d)]
            for k in range(d)
        ]
        self._var = [1 / diag[k] for k in range(d)]

    def sample(
        self, src: Any, *, limit: Fraction | None = None, upper: int | None = None
    ) -> list[int] | None:
        """One draw j; ``upper`` bounds coordinate d - 1 (drawn first, from its marginal
        restricted to j_{d-1} <= upper: its normaliser is a constant); None as soon as
        sum j_i^2 over the coordinates drawn exceeds ``limit``."""
        d = self.d
        j = [0] * d
        norm2 = 0
        for k in reversed(range(d)):
            s = sum(self._num[k][i] * j[i] for i in range(k + 1, d))
            centre = self._base[k] - Fraction(s, self._den[k])  # in lowest terms
            if k == d - 1 and upper is not None:
                j[k] = discrete_gaussian_below(centre, self._var[k], upper, src)
            else:
                j[k] = discrete_gaussian_ratio(
                    centre.numerator, centre.denominator, self._var[k], src
                )
            norm2 += j[k] * j[k]
            if limit is not None and norm2 > limit:
                return None
        return j


def _unimodular(m: list[int]) -> tuple[list[list[int]], list[list[int]]]:
    """(V, V^-1): a unimodular integer matrix (determinant +-1: a bijection of Z^d) whose
    last row is ``m`` (primitive: gcd 1), and its inverse. Euclid's steps on pairs of
    entries give A with A m = e_0 (each step a 2 x 2 integer matrix of determinant 1, its
    inverse tracked alongside);
    then m is column 0 of A^-1, so B = (A^-1)' has m as row 0, B^-1 = A', and V is B with
    row 0 moved last."""
    d = len(m)
    a = [[int(i == j) for j in range(d)] for i in range(d)]
    a_inv = [[int(i == j) for j in range(d)] for i in range(d)]
    x = list(m)
    for i in reversed(range(d - 1)):
        p_, q_ = x[i], x[i + 1]
        if q_ == 0:
            continue
        g, u, v = _egcd(p_, q_)  # u p + v q = g
        t = [[u, v], [-q_ // g, p_ // g]]  # determinant (u p + v q) / g = 1
        t_inv = [[p_ // g, -v], [q_ // g, u]]
        for col in range(d):  # rows i, i + 1 of A <- t @ rows
            r0, r1 = a[i][col], a[i + 1][col]
            a[i][col], a[i + 1][col] = t[0][0] * r0 + t[0][1] * r1, t[1][0] * r0 + t[1][1] * r1
        for row in range(d):  # columns i, i + 1 of A^-1 <- columns @ t^-1
            c0, c1 = a_inv[row][i], a_inv[row][i + 1]
            a_inv[row][i] = c0 * t_inv[0][0] + c1 * t_inv[1][0]
            a_inv[row][i + 1] = c0 * t_inv[0][1] + c1 * t_inv[1][1]
        x[i], x[i + 1] = g, 0
    if x[0] == -1:  # A m = -e_0: negate row 0 of A and column 0 of A^-1
        a[0] = [-v for v in a[0]]
        for row in range(d):
            a_inv[row][0] = -a_inv[row][0]
    b = [[a_inv[j][i] for j in range(d)] for i in range(d)]  # (A^-1)'
    b_inv = [[a[j][i] for j in range(d)] for i in range(d)]  # A'
    v_mat = [*b[1:], b[0]]
    # V = Pi B (rows rotated) has V^-1 = B^-1 Pi': columns of B^-1 rotated the same way
    v_inv = [[*row[1:], row[0]] for row in b_inv]
    return v_mat, v_inv


def _egcd(p: int, q: int) -> tuple[int, int, int]:
    """(g, u, v) with u p + v q = g = gcd(p, q) > 0."""
    old_r, r, old_u, u, old_v, v = p, q, 1, 0, 0, 1
    while r:
        k = old_r // r
        old_r, r = r, old_r - k * r
        old_u, u = u, old_u - k * u
        old_v, v = v, old_v - k * v
    if old_r < 0:
        old_r, old_u, old_v = -old_r, -old_u, -old_v
    return old_r, old_u, old_v


class _HalfSpace:
    """The half-space envelope on the lattice (PROOF.md §3.5): for an integer direction m
    (M2 = ||m||^2) near the constrained mode's, R >= W sqrt(M2) rational, w0 = (R / M2) m,
    g = b - P w0 = gamma m + g_s (gamma > 0, g_s orthogonal to m), depth t = R - <m, w>
    (>= 0 on the ball) and tangential part s of w: ||s||^2 <= 2 R t / M2 on the ball, so
    for c in [0, 1] the log target is at most const + (c gamma m + g_s)'(w - w0)
    - (w - w0)'Q(w - w0)/2, Q = P + k (I - mm'/M2), k = (1 - c) gamma M2 / R. Proposals:
    that discrete Gaussian restricted to <m, w> <= R, drawn in the coordinates
    j' = V j (V unimodular with last row m, so j'_{d-1} = <m, j>: drawn first, truncated);
    kept inside the ball with probability exp(-(1 - c) gamma (t - M2 ||s||^2 / (2 R)))."""

    def __init__(
        self,
        exact: list[list[Fraction]],
        b: list[Fraction],
        radius: Fraction,
        m: list[int],
        unit: int,
    ) -> None:
        d = len(m)
        self.m = m
        self.m2 = sum(v * v for v in m)
        w2m2 = radius * radius * self.m2  # R: a dyadic rational with R^2 >= W^2 M2
        scaled = math.floor(w2m2 * 4**64)
        self.r = Fraction(math.isqrt(scaled) + 1, 2**64)
        w0 = [self.r * v / self.m2 for v in m]
        g = [b[i] - sum((exact[i][j] * w0[j] for j in range(d)), Fraction(0)) for i in range(d)]
        self.gamma = sum((g[i] * m[i] for i in range(d)), Fraction(0)) / self.m2
        if self.gamma <= 0:
            raise ArithmeticError("the direction is not outward")
        self.c = Fraction(2, d + 1)
        k = (1 - self.c) * self.gamma * self.m2 / self.r
        q = [
            [exact[i][j] + k * (int(i == j) - Fraction(m[i] * m[j], self.m2)) for j in range(d)]
            for i in range(d)
        ]
        lin = [self.c * self.gamma * m[i] + g[i] - self.gamma * m[i] for i in range(d)]
        # the envelope's mean w0 + Q^-1 lin, then everything in the coordinates j' = V j
        low_diag = _ldl(q)
        if low_diag is None:
            raise ArithmeticError("Q is not positive definite")
        shift = _solve(*low_diag, lin)
        centre_w = [w0[i] + shift[i] for i in range(d)]
        self.v, self.v_inv = _unimodular(m)
        vi = self.v_inv
        # precision of j': h^2 V^-T Q V^-1; mean V centre_w / h
        qv = [[sum((q[i][l] * vi[l][j] for l in range(d)), Fraction(0)) for j in range(d)]
              for i in range(d)]  # fmt: skip
        a = [
            [sum((vi[l][i] * qv[l][j] for l in range(d)), Fraction(0)) / (unit * unit)
             for j in range(d)]
            for i in range(d)
        ]  # fmt: skip
        mean = [sum((self.v[i][l] * centre_w[l] for l in range(d)), Fraction(0)) * unit
                for i in range(d)]  # fmt: skip
        self.chain = _Chain(a, mean)
        # the Poisson bound of §3.3 for the coordinates drawn given others
        if any(self.chain.diag[k] > Fraction(1, 16) for k in range(d - 1)):
            raise ArithmeticError("a lattice variance below 16")
        self.upper = math.floor(self.r * unit)  # <m, j> <= R / h
        self.unit = unit
        self.radius2 = radius * radius

    def propose(self, src: Any) -> list[int] | None:
        """A lattice point j (w = h j) kept by this envelope, or None."""
        jp = self.chain.sample(src, upper=self.upper)
        assert jp is not None
        d = len(jp)
        j = [sum(self.v_inv[i][l] * jp[l] for l in range(d)) for i in range(d)]
        norm2 = sum(v * v for v in j)
        unit2 = self.unit * self.unit
        if Fraction(norm2, unit2) > self.radius2:
            return None
        along = Fraction(jp[d - 1], self.unit)  # <m, w>
        depth = self.r - along
        tang2 = Fraction(norm2, unit2) - along * along / self.m2
        gamma = (1 - self.c) * self.gamma * (depth - self.m2 * tang2 / (2 * self.r))
        return j if bernoulli_exp(gamma, src) else None

    @staticmethod
    def build(
        eigen: tuple[np.ndarray, np.ndarray],
        linear: np.ndarray,
        radius: float,
        exact: list[list[Fraction]],
        unit: int,
        exact_linear: list[Fraction] | None = None,
    ) -> _HalfSpace | None:
        """The envelope at the constrained mode, if the unconstrained mode lies outside the
        ball, with m the direction of that mode times 2^e, rounded, for the first e in
        :data:`DIRECTION_BITS` that gives a valid envelope (else None). ``eigen``: the
        eigenvalues and eigenvectors of P (as computed, not floored); ``exact`` and
        ``exact_linear`` (default: ``linear`` read exactly) the target's exact terms."""
        lam, q = eigen
        if not np.all(lam > 0):
            return None
        b_rot = q.T @ linear
        if float(np.sum((b_rot / lam) ** 2)) <= radius**2:
            return None
        lo, hi = 0.0, 1.0
        while float(np.sum((b_rot / (lam + hi)) ** 2)) > radius**2:
            hi *= 4.0
            if not math.isfinite(hi):
                return None
        for _ in range(200):
            mid = 0.5 * (lo + hi)
            if float(np.sum((b_rot / (lam + mid)) ** 2)) > radius**2:
                lo = mid
            else:
                hi = mid
        w_star = q @ (b_rot / (lam + 0.5 * (lo + hi)))
        n = w_star / np.linalg.norm(w_star)
        b = [Fraction(v) for v in linear] if exact_linear is None else exact_linear
        for e in DIRECTION_BITS:
            m = [int(v) for v in np.rint(n * 2.0**e)]
            g = math.gcd(*m)
            if g == 0:
                continue
            try:
                return _HalfSpace(exact, b, Fraction(radius), [v // g for v in m], unit)
            except ArithmeticError:
                continue
        return None


class LatticeGaussianBall:
    """Exact draws of pi(w) proportional to exp(-w'Pw/2 + b'w) on the lattice
    2^-LATTICE_EXPONENT Z^d inside ||w|| <= W (module docstring).

    ``precision`` P (d x d, symmetric; only w'Pw is used, so P and (P + P')/2 define the
    same target), ``linear`` b. ``floor``: a known lower bound on P's eigenvalues (the
    prior precision), used only to choose tau. ``exponent``: the lattice is
    2^-exponent Z^d (the release uses :data:`LATTICE_EXPONENT`; a coarser lattice draws
    exactly too, but the normalisers Z_k then vary more with the centre). Set up once (an
    exact LDL' of P + tau I, and the half-space envelope's); :meth:`draw` may be called
    many times. The two envelopes' proposals are interleaved in a fixed order (one
    half-space proposal after every max(1, round(d / 4)) shrink ones); the first kept one
    is returned. ``exact_terms``: (P, b) as exact fractions, the target itself; then
    ``precision`` and ``linear`` (doubles near them) only choose tau and the half-space
    direction, which any values do exactly.
    """

    def __init__(
        self,
        precision: Any,
        linear: Any,
        radius: float,
        *,
        floor: float = 0.0,
        exponent: int = LATTICE_EXPONENT,
        half_space: bool = True,
        exact_terms: tuple[list[list[Fraction]], list[Fraction]] | None = None,
    ) -> None:
        p = np.atleast_2d(np.asarray(precision, dtype=float))
        b = np.atleast_1d(np.asarray(linear, dtype=float))
        d = b.size
        if p.shape != (d, d) or not (radius > 0 and math.isfinite(radius)):
            raise ValueError("precision must be d x d for a d-vector linear term, radius > 0")
        if not (np.all(np.isfinite(p)) and np.all(np.isfinite(b))):
            raise ValueError("precision and linear must be finite")
        if not isinstance(exponent, int) or exponent < 0:
            raise ValueError(f"exponent must be an integer >= 0, got {exponent!r}")
        sym = (p + p.T) / 2
        eigen = np.linalg.eigh(sym)
        lam, q = eigen
        tau = ball_tau(np.maximum(lam, max(floor, 1e-300)), q.T @ b, radius)  # any tau >= 0
        # is exact: tau sets only the acceptance rate
        if exact_terms is None:
            exact = [
                [(Fraction(p[i, j]) + Fraction(p[j, i])) / 2 for j in range(d)] for i in range(d)
            ]
            linear_q = [Fraction(v) for v in b]
        else:  # the target's exact P and b; the doubles above only choose tau and m
            exact, linear_q = [list(r) for r in exact_terms[0]], list(exact_terms[1])
            if len(exact) != d or any(len(r) != d for r in exact) or len(linear_q) != d:
                raise ValueError("exact_terms must be (d x d, d) like precision and linear")
            if any(exact[i][j] != exact[j][i] for i in range(d) for j in range(i)):
                raise ValueError("the exact precision must be symmetric")
        scale = max(abs(float(v)) for v in np.diag(sym)) or 1.0
        self.exponent = exponent
        unit = 1 << exponent
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
        mean = _solve(*factors, linear_q)
        # in lattice units j = w / h: precision h^2 (P + tau I), mean c / h
        self._shrink = _Chain(
            [[v / (unit * unit) for v in row] for row in shifted], [v * unit for v in mean]
        )
        self.d = d
        self.tau = Fraction(tau)
        self.radius2 = Fraction(radius) ** 2
        self._limit = self.radius2 * unit * unit  # ||j||^2 <= W^2 / h^2
        self._half = (
            _HalfSpace.build(eigen, b, radius, exact, unit, linear_q) if half_space else None
        )
        self.proposals = 0  # proposals made by the draws so far

    def _propose_shrink(self, src: Any) -> list[int] | None:
        j = self._shrink.sample(src, limit=self._limit)
        if j is None:
            return None
        norm2 = Fraction(sum(v * v for v in j), 1 << (2 * self.exponent))
        return j if bernoulli_exp(self.tau * (self.radius2 - norm2) / 2, src) else None

    def draw(self, src: Any = None, *, max_proposals: int = MAX_PROPOSALS) -> np.ndarray:
        """One exact draw (a d-vector of doubles, the lattice point correctly rounded).
        RuntimeError (nothing released) after ``max_proposals`` rejected proposals."""
        src = as_noise_source(src)
        # a half-space proposal after every `period` shrink ones: in d dimensions it costs
        # about d / 4 of them (its coordinates are larger integers); any fixed order keeps
        # the draw exact (the first kept proposal of either envelope is an exact draw)
        period = max(1, round(self.d / 4))
        for i in range(max_proposals):
            self.proposals += 1
            if self._half is not None and i % (period + 1) == period:
                j = self._half.propose(src)
            else:
                j = self._propose_shrink(src)
            if j is not None:
                return np.array([float(Fraction(v, 1 << self.exponent)) for v in j])
        raise RuntimeError(
            f"lattice Gaussian (d={self.d}): no proposal accepted in {max_proposals}; "
            "nothing was released"
        )
