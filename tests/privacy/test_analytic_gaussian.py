"""Analytic Gaussian calibration (Balle & Wang 2018, Thm 8), checked in 50-digit arithmetic.

The mechanism with noise N(0, s^2) and L2 sensitivity D is (eps, delta)-DP iff
    delta(s) = Phi(D/2s - eps s/D) - e^eps Phi(-D/2s - eps s/D) <= delta.
The returned sigma must satisfy this exactly (not only in float arithmetic) and be tight:
sigma (1 - 1e-6) must violate it.
"""

from __future__ import annotations

import itertools
import math

import mpmath
import pytest

from dpbayes.privacy import GaussianMechanism, analytic_gaussian_sigma, classic_gaussian_sigma


def exact_delta(sigma: float, epsilon: float, sensitivity: float) -> mpmath.mpf:
    with mpmath.workdps(50):
        s, e, d = mpmath.mpf(sigma), mpmath.mpf(epsilon), mpmath.mpf(sensitivity)
        a = d / (2 * s) - e * s / d
        b = -d / (2 * s) - e * s / d
        return mpmath.ncdf(a) - mpmath.exp(e) * mpmath.ncdf(b)


GRID = [
    (eps, delta, sens)
    for eps in (0.01, 0.1, 0.5, 1.0, 3.0, 10.0)
    for delta in (1e-3, 1e-5, 1e-8, 1e-12)
    for sens in (1.0, 7.5)
] + [(0.01, 1e-15, 1.0), (1.0, 1e-15, 1.0), (50.0, 1e-5, 1.0), (1e-4, 1e-6, 2.0), (0.3, 0.5, 1.0)]


@pytest.mark.parametrize(("epsilon", "delta", "sensitivity"), GRID)
def test_sigma_satisfies_delta_condition_and_is_tight(epsilon, delta, sensitivity):
    sigma = analytic_gaussian_sigma(epsilon, delta, sensitivity)
    assert math.isfinite(sigma) and sigma > 0
    assert exact_delta(sigma, epsilon, sensitivity) <= delta
    assert exact_delta(sigma * (1 - 1e-6), epsilon, sensitivity) > delta


def test_reference_value():
    # Balle & Wang 2018 (their Fig. / diffprivlib's GaussianAnalytic): eps=1, delta=1e-5.
    assert analytic_gaussian_sigma(1.0, 1e-5, 1.0) == pytest.approx(3.7306, abs=5e-4)
    # Scale equivariance: sigma is proportional to the sensitivity.
    base = analytic_gaussian_sigma(0.7, 1e-6, 1.0)
    assert analytic_gaussian_sigma(0.7, 1e-6, 4.0) == pytest.approx(4 * base, rel=1e-8)


@pytest.mark.parametrize("epsilon", [0.01, 0.05, 0.2, 0.5, 0.9, 0.99])
@pytest.mark.parametrize("delta", [1e-3, 1e-6, 1e-10])
def test_analytic_is_smaller_than_classic(epsilon, delta):
    classic = classic_gaussian_sigma(epsilon, delta, 2.0)
    assert classic == pytest.approx(math.sqrt(2 * math.log(1.25 / delta)) * 2.0 / epsilon)
    analytic = analytic_gaussian_sigma(epsilon, delta, 2.0)
    assert analytic < classic
    # The classic sigma is itself private (its proof holds for eps < 1).
    assert exact_delta(classic, epsilon, 2.0) <= delta


def test_sigma_decreases_in_epsilon_and_delta():
    eps_grid = [0.01, 0.1, 1.0, 10.0]
    sig = [analytic_gaussian_sigma(e, 1e-6, 1.0) for e in eps_grid]
    assert all(a > b for a, b in itertools.pairwise(sig))
    d_grid = [1e-12, 1e-8, 1e-4, 0.1]
    sig = [analytic_gaussian_sigma(1.0, d, 1.0) for d in d_grid]
    assert all(a > b for a, b in itertools.pairwise(sig))


def test_mechanism_uses_the_calibrations():
    m = GaussianMechanism(epsilon=1.0, delta=1e-5, sensitivity=1.0)
    assert m.sigma == analytic_gaussian_sigma(1.0, 1e-5, 1.0)
    c = GaussianMechanism(epsilon=0.5, delta=1e-5, sensitivity=1.0, calibration="classic")
    assert c.sigma == classic_gaussian_sigma(0.5, 1e-5, 1.0)
    g = m.guarantee()
    assert g.delta == 1e-5 and g.sensitivity_norm == "L2" and "analytic" in g.mechanism


def test_extreme_parameters():
    for eps, delta in [(1e-6, 1e-5), (100.0, 1e-10), (0.01, 1e-300), (1e3, 1e-5)]:
        sigma = analytic_gaussian_sigma(eps, delta, 1.0)
        assert math.isfinite(sigma) and sigma > 0
        assert exact_delta(sigma, eps, 1.0) <= delta
    with pytest.raises(ValueError, match="delta"):
        analytic_gaussian_sigma(1.0, 0.0, 1.0)
