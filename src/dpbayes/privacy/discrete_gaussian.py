"""Exact draws of Bernoulli(exp(-gamma)), the discrete Laplace and the discrete Gaussian on
the integers, in rational arithmetic, from uniform integers of a noise source.

The algorithms are Canonne, Kamath & Steinke, "The Discrete Gaussian for Differential
Privacy" (NeurIPS 2020), Algorithms 1-3, with one extension: the discrete Gaussian's
centre may be any rational, not only 0. Every probability they use is a rational compared
against one ``randbelow`` integer (the OS CSPRNG on the secure path), so each draw follows
its stated law exactly: no floating-point number is involved. OpenDP samples the discrete
Gaussian too, but centred at 0 and with a floating-point scale; the lattice posterior draws
(``release/regression/lattice_gaussian.py``) need a rational centre and precision.

* :func:`bernoulli_exp`: True with probability exp(-gamma), gamma >= 0 rational (CKS
  Algorithm 1: for gamma <= 1, K counts the successes of Bernoulli(gamma / K) draws,
  K = 1, 2, ... until the first failure, and the result is "K odd", whose probability is
  sum_k (-gamma)^k / k! = e^-gamma; for gamma > 1, floor(gamma) draws of exp(-1) and one
  of exp(-(gamma - floor gamma)), all of which must succeed).
* :func:`discrete_laplace`: x in Z with probability proportional to exp(-|x| / t), t a
  positive integer (CKS Algorithm 2 with s = 1: U uniform on 0..t - 1 kept with
  probability e^(-U/t), V geometric with ratio e^-1, X = U + t V is geometric with ratio
  e^(-1/t); a random sign, with the negative zero rejected).
* :func:`discrete_gaussian`: y in Z with probability proportional to
  exp(-(y - mu)^2 / (2 v)), mu and v > 0 rational. Write mu = r + f with r the nearest
  integer, |f| <= 1/2, and y = r + z. Propose z from the discrete Laplace with
  t = floor(sqrt(v)) + 1 and keep it with probability exp(-gamma), gamma = K - s(z),
  s(z) = |z| / t - (z - f)^2 / (2 v), K the largest s over the integers. s is concave on
  z >= 0 and on z <= 0, with real maximisers f + v / t and f - v / t, so K is s at 0 or at
  an integer next to one of them (computed exactly) and gamma >= 0 for every z. The kept
  z has probability proportional to exp(-|z| / t) exp(s(z) - K) =
  exp(-(z - f)^2 / (2 v)) times a constant: rejection sampling, exact. (CKS take f = 0 and
  K the real maximum, which for v << 1 and f != 0 would accept almost never.) Acceptance
  is about 0.7 for v >= 1.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

from dpbayes.privacy.noise import as_noise_source

__all__ = [
    "bernoulli_exp",
    "discrete_gaussian",
    "discrete_gaussian_below",
    "discrete_gaussian_ratio",
    "discrete_laplace",
    "geometric_exp",
]

_ONE = Fraction(1)


def _bernoulli_exp_unit(num: int, den: int, src: Any) -> bool:
    """True with probability exp(-num / den) for 0 <= num <= den (CKS Algorithm 1)."""
    k = 1
    while src.randbelow(den * k) < num:  # Bernoulli(gamma / k)
        k += 1
    return k % 2 == 1


def _bernoulli_exp(num: int, den: int, src: Any) -> bool:
    """True with probability exp(-num / den) for integers num >= 0, den > 0."""
    whole, rest = divmod(num, den)
    for _ in range(whole):
        if not _bernoulli_exp_unit(1, 1, src):
            return False
    return _bernoulli_exp_unit(rest, den, src)


def bernoulli_exp(gamma: Any, src: Any = None) -> bool:
    """True with probability exactly exp(-gamma), gamma a rational >= 0 (an int, a
    Fraction, or a float read as the rational it is)."""
    g = Fraction(gamma)
    if g < 0:
        raise ValueError(f"gamma must be >= 0, got {float(g):g}")
    return _bernoulli_exp(g.numerator, g.denominator, as_noise_source(src))


def discrete_laplace(t: int, src: Any = None) -> int:
    """x in Z with probability proportional to exp(-|x| / t), t a positive integer."""
    if not isinstance(t, int) or t < 1:
        raise ValueError(f"t must be a positive integer, got {t!r}")
    return _discrete_laplace(t, as_noise_source(src))


def _geometric(s: int, t: int, src: Any) -> int:
    """y >= 0 with probability proportional to exp(-y s / t) (CKS Algorithm 2's core:
    X = U + t V has probability proportional to e^(-X/t), and floor(X / s) to
    e^(-y s/t))."""
    while True:
        u = src.randbelow(t)
        if not _bernoulli_exp_unit(u, t, src):
            continue
        v = 0
        while _bernoulli_exp_unit(1, 1, src):
            v += 1
        return (u + t * v) // s


def _discrete_laplace(t: int, src: Any) -> int:
    while True:
        x = _geometric(1, t, src)
        negative = src.randbelow(2) == 1
        if negative and x == 0:
            continue
        return -x if negative else x


def discrete_gaussian(mu: Any, variance: Any, src: Any = None) -> int:
    """y in Z with probability proportional to exp(-(y - mu)^2 / (2 variance)), for a
    rational centre ``mu`` and a rational ``variance`` > 0 (module docstring)."""
    m = Fraction(mu)
    v = Fraction(variance)
    if v <= 0:
        raise ValueError(f"variance must be > 0, got {float(v):g}")
    return discrete_gaussian_ratio(m.numerator, m.denominator, v, as_noise_source(src))


def discrete_gaussian_ratio(num: int, den: int, variance: Fraction, src: Any) -> int:
    """:func:`discrete_gaussian` with centre num / den (integers, den > 0, not necessarily
    in lowest terms) and a Fraction variance > 0, in integer arithmetic (no gcd per draw)."""
    vn, vd = variance.numerator, variance.denominator
    r = (2 * num + den) // (2 * den)  # an integer nearest to the centre
    fn, fd = num - r * den, den  # f = fn / fd, |f| <= 1/2
    t = math.isqrt(vn // vd) + 1
    fd2 = fd * fd
    scale = 2 * t * vn * fd2  # s(z) times scale is an integer

    def s_num(z: int) -> int:  # s(z) = |z| / t - (z - f)^2 / (2 v), times scale
        return 2 * abs(z) * vn * fd2 - t * vd * (z * fd - fn) ** 2

    # K: s is concave on z >= 0 and on z <= 0, so its largest value over the integers is
    # at 0 or at an integer next to the real maximiser f +- v / t of either side
    peaks = {0}
    top_den = fd * vd * t
    for top_num in (fn * vd * t + vn * fd, fn * vd * t - vn * fd):
        low = top_num // top_den  # floor of f +- v / t
        peaks.update((low, low + 1))
    k_num = max(s_num(z) for z in peaks)
    while True:
        z = _discrete_laplace(t, src)
        if _bernoulli_exp(k_num - s_num(z), scale, src):  # gamma = K - s(z) >= 0
            return r + z


def geometric_exp(rate: Fraction, src: Any) -> int:
    """y >= 0 with probability proportional to exp(-rate y), rate > 0 rational."""
    return _geometric(rate.numerator, rate.denominator, src)


def discrete_gaussian_below(mu: Fraction, variance: Fraction, upper: int, src: Any) -> int:
    """y <= ``upper`` in Z with probability proportional to exp(-(y - mu)^2 / (2 v)).

    If mu <= upper + sqrt(v): rejection from the whole discrete Gaussian (it lands below
    ``upper`` with probability about 0.16 or more). Otherwise mu lies beyond the bound and
    the mass piles up at it: with f(y) = -(y - mu)^2 / (2 v), concave, f(y) <= f(upper) +
    beta (y - upper), beta = (mu - upper) / v, so y = upper - X with X geometric of ratio
    e^-beta, kept with probability exp(f(y) - f(upper) - beta (y - upper)) =
    exp(-(y - upper)^2 / (2 v)), is exact rejection sampling (acceptance at least about
    e^-1/2 here, since beta >= 1 / sqrt(v))."""
    if mu <= upper or (mu - upper) ** 2 <= variance:
        while True:
            y = discrete_gaussian_ratio(mu.numerator, mu.denominator, variance, src)
            if y <= upper:
                return y
    beta = (mu - upper) / variance
    vn, vd = variance.numerator, variance.denominator
    while True:
        x = geometric_exp(beta, src)
        if _bernoulli_exp(x * x * vd, 2 * vn, src):
            return upper - x
