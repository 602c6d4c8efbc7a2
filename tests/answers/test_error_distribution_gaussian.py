"""The error of a BLUE from Laplace and Gaussian answers: a Laplace sum plus a Normal.

Every method is checked against computations that share no code with it: scipy's
exponentially modified Normal (one Laplace plus a Normal is an equal mixture of
exponnorm and its mirror image), a numerical convolution by ``scipy.integrate.quad`` of a
Laplace sum's partial-fraction density (written out here) with the Normal density, and
Monte Carlo with a tolerance derived from the sample size.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import pytest
from scipy import integrate, stats

from dpbayes.answers import LaplaceSum
from dpbayes.answers.laplace_numerics import discretised_normal_dft, discretised_normal_pmf
from dpbayes.privacy.noise import noise_source

Z4 = stats.norm.isf(0.5e-4)  # two-sided 1e-4 z-bound


def laplace_normal_cdf(z: np.ndarray, b: float, s: float) -> np.ndarray:
    """P(b L + s G <= z): L = +-Exp(1) with probability 1/2 each, and Exp + Normal is
    scipy's exponnorm(K = b / s, scale = s)."""
    en = stats.exponnorm(b / s, scale=s)
    return 0.5 * en.cdf(z) + 0.5 * en.sf(-z)


def laplace_sum_pdf(x: float, scales: np.ndarray) -> float:
    """Density of sum b_i L_i for distinct b_i (partial fractions of prod 1/(1+b_i^2 t^2))."""
    b2 = scales**2
    total = 0.0
    for i, bi in enumerate(scales):
        c = np.prod([b2[i] / (b2[i] - b2[j]) for j in range(scales.size) if j != i])
        total += c * math.exp(-abs(x) / bi) / (2 * bi)
    return total


def convolved_within(d: float, scales: np.ndarray, s: float) -> float:
    """P(|sum b_i L_i + s G| <= d) by quadrature of the Laplace-sum density against the
    Normal probability of [-d - x, d - x]."""

    def integrand(x: float) -> float:
        return laplace_sum_pdf(x, scales) * (
            stats.norm.cdf((d - x) / s) - stats.norm.cdf((-d - x) / s)
        )

    return _quad(integrand, [0.0, -d, d], scales, s)


def convolved_pdf(z: float, scales: np.ndarray, s: float) -> float:
    def integrand(x: float) -> float:
        return laplace_sum_pdf(x, scales) * stats.norm.pdf((z - x) / s) / s

    return _quad(integrand, [0.0, z], scales, s)


def _quad(f: Any, marks: list[float], scales: np.ndarray, s: float) -> float:
    """int f over the real line, split at the cusp 0 of the Laplace-sum density and around
    the points ``marks`` where the Normal factor moves (+-12 s), so that no narrow feature
    is missed."""
    reach = 60 * float(scales.max()) + 12 * s
    cuts = {-reach, reach}
    for m in marks:
        cuts.update({m - 12 * s, m, m + 12 * s})
    edges = sorted(c for c in cuts if -reach <= c <= reach)
    return sum(
        integrate.quad(f, lo, hi, epsabs=1e-14, epsrel=1e-12, limit=200)[0]
        for lo, hi in itertools.pairwise(edges)
    )


@pytest.mark.parametrize("method", ["exact", "pc", "pc-direct", "auto"])
@pytest.mark.parametrize(("b", "s"), [(1.3, 0.7), (1.0, 4.0), (2.0, 0.05)])
def test_one_laplace_plus_normal_is_exponnorm(method: str, b: float, s: float) -> None:
    dist = LaplaceSum([b], gaussian_sd=s, method=method, accuracy=1e-5)
    z = np.linspace(-6, 6, 49) * math.hypot(math.sqrt(2) * b, s)
    achieved = np.max(np.abs(dist.cdf(z) - laplace_normal_cdf(z, b, s)))
    assert achieved <= dist.error
    # auto and exact meet the accuracy; PC reports its (grid-limited) error, as for Laplace
    assert dist.error <= (1e-5 if method in ("exact", "auto") else 2e-4)
    assert dist.var == pytest.approx(2 * b * b + s * s)
    assert dist.gaussian_sd == s


@pytest.mark.parametrize("s", [0.02, 0.6, 2.5, 40.0])
def test_mixed_sum_against_quadrature_convolution(s: float) -> None:
    scales = np.array([1.0, 0.45, 2.0])
    dist = LaplaceSum(scales, gaussian_sd=s, method="exact", accuracy=1e-9)
    assert "Gil-Pelaez" in dist.details["formula"] and "exp(-s^2" in dist.details["formula"]
    sd = dist.std
    for d in np.array([0.05, 0.4, 1.0, 2.0, 3.5]) * sd:
        ref = convolved_within(float(d), scales, s)
        assert abs(dist.prob_within(d) - ref) <= dist.error + 1e-10
    for z in np.array([0.0, 0.3, 1.2, 2.7]) * sd:
        assert dist.pdf(z) == pytest.approx(convolved_pdf(float(z), scales, s), rel=1e-6, abs=1e-9)


def test_gaussian_part_against_monte_carlo() -> None:
    scales = np.array([1.0, 1.0, 0.25, 3.0])  # repeated scales: inversion
    s = 1.7
    dist = LaplaceSum(scales, gaussian_sd=s)
    gen = noise_source(21).generator()
    n = 2_000_000
    y = gen.laplace(0.0, 1.0, size=(n, scales.size)) @ scales + s * gen.standard_normal(n)
    points = np.array([-9.0, -4.0, -1.0, 0.0, 0.7, 2.5, 6.0])
    emp = (y[:, None] <= points[None, :]).mean(axis=0)
    f = dist.cdf(points)
    assert np.all(np.abs(emp - f) <= Z4 * np.sqrt(f * (1 - f) / n) + dist.error)
    assert np.var(y) == pytest.approx(dist.var, rel=Z4 * math.sqrt(2 / n) * 3)


@pytest.mark.parametrize("method", ["exact", "pc", "pc-direct", "mc"])
def test_pure_normal(method: str) -> None:
    dist = LaplaceSum([], gaussian_sd=2.0, method=method, rng=5)
    z = np.linspace(-9, 9, 37)
    achieved = np.max(np.abs(dist.cdf(z) - stats.norm(scale=2.0).cdf(z)))
    assert achieved <= dist.error * (Z4 / 3 if method == "mc" else 1.0)
    if method == "exact":
        assert dist.details["formula"].startswith("Normal")
        assert dist.half_width(0.95) == pytest.approx(2.0 * stats.norm.isf(0.025), rel=1e-10)
        np.testing.assert_allclose(dist.pdf(z), stats.norm(scale=2.0).pdf(z), rtol=1e-12)


@pytest.mark.parametrize("method", ["pc", "pc-direct"])
@pytest.mark.parametrize("s", [0.01, 0.3, 5.0])
def test_pc_with_normal_within_its_reported_error(method: str, s: float) -> None:
    scales = np.array([1.0, 1.0, 0.25, 3.0])
    exact = LaplaceSum(scales, gaussian_sd=s, method="exact", accuracy=1e-10)
    pc = LaplaceSum(scales, gaussian_sd=s, method=method, accuracy=1e-5)
    z = np.linspace(-12, 12, 49)
    assert np.max(np.abs(pc.cdf(z) - exact.cdf(z))) <= pc.error + exact.error
    assert pc.details["lost_mass"] < 1e-5


def test_tiny_laplace_terms_beside_a_normal_are_dropped_within_the_error() -> None:
    dist = LaplaceSum(np.full(3, 1e-9), gaussian_sd=1.0, accuracy=1e-6)
    assert dist.details["dropped_scales"] == 3 and dist.details["formula"].startswith("Normal")
    assert 0 < dist.error <= 1e-6
    ref = LaplaceSum(np.full(3, 1e-9), gaussian_sd=1.0, method="pc", accuracy=1e-6)
    z = np.linspace(-4, 4, 17)
    assert np.max(np.abs(dist.cdf(z) - stats.norm.cdf(z))) <= dist.error
    assert np.max(np.abs(ref.cdf(z) - stats.norm.cdf(z))) <= ref.error


def test_half_width_narrower_than_chebyshev_and_symmetric() -> None:
    dist = LaplaceSum([1.0, 0.5], gaussian_sd=0.8)
    for p in (0.5, 0.9, 0.99):
        h = dist.half_width(p)
        assert dist.prob_within(h) == pytest.approx(p, abs=1e-9)
        assert h <= math.sqrt(dist.var / (1 - p))
        assert dist.cdf(-h) == pytest.approx(1 - dist.cdf(h), abs=1e-12)


@pytest.mark.parametrize(("g", "h"), [(3.0, 0.5), (1.0, 1.0), (0.4, 1.0), (0.01, 2.0)])
def test_discretised_normal_dft_matches_its_mass_function(g: float, h: float) -> None:
    """The closed-form (Poisson-summed) DFT against the direct sum of the cell masses."""
    m = int(12 * g / h) + 3
    pmf = discretised_normal_pmf(g, h, m)
    assert pmf.sum() == pytest.approx(1.0, abs=1e-15)
    assert pmf[m] == pytest.approx(stats.norm.cdf(h / 2 / g) - stats.norm.cdf(-h / 2 / g))
    omega = np.linspace(0, math.pi, 33)
    j = np.arange(-m, m + 1)
    direct = np.cos(np.multiply.outer(omega, j)) @ pmf
    np.testing.assert_allclose(discretised_normal_dft(g, h, omega), direct, atol=1e-14)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"scales": [1.0], "gaussian_sd": -1.0},
        {"scales": [1.0], "gaussian_sd": float("nan")},
        {"scales": [1.0], "gaussian_sd": float("inf")},
        {"scales": [], "gaussian_sd": 0.0},
        {"scales": [0.0], "gaussian_sd": 0.0},
    ],
)
def test_bad_gaussian_arguments(kwargs: dict) -> None:
    with pytest.raises(ValueError, match=r"gaussian_sd|scales"):
        LaplaceSum(**kwargs)
