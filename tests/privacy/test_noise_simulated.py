"""The mechanisms' noise on the simulation path (seeded numpy), checked statistically.

Each mechanism releases a vector of zeros (or repeated selections) and the noise is
compared with the distribution the mechanism says it adds: mean and variance within
z-bounds (variance via the 4th moment), and the whole law by KS / chi-square.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from privacy_stats import (
    check_chisquare,
    check_discrete,
    check_ks,
    check_mean_var,
    check_proportion,
)
from scipy import stats

from dpbayes.privacy import (
    ExponentialMechanism,
    GaussianMechanism,
    GeometricMechanism,
    LaplaceMechanism,
    RandomizedResponse,
    noise_source,
)
from dpbayes.privacy.validation import check_rng

N = 200_000


@pytest.mark.parametrize(("epsilon", "sensitivity"), [(1.0, 1.0), (0.3, 2.5), (8.0, 0.01)])
def test_laplace_noise(epsilon, sensitivity):
    mech = LaplaceMechanism(epsilon=epsilon, sensitivity=sensitivity)
    noisy = mech.release(np.zeros(N), rng=11)
    dist = stats.laplace(scale=sensitivity / epsilon)
    assert mech.noise_distribution().var() == pytest.approx(mech.variance, rel=1e-12)
    assert mech.variance == pytest.approx(dist.var(), rel=1e-12)
    check_mean_var(noisy.value, dist, "laplace")
    check_ks(noisy.value, dist, "laplace")
    assert noisy.guarantee.simulation is True
    assert noisy.guarantee.epsilon == epsilon


def test_laplace_noise_is_added_to_the_value():
    mech = LaplaceMechanism(epsilon=1.0, sensitivity=1.0)
    values = np.array([[1e9, -3.0], [0.5, 42.0]])
    out = mech.release(values, rng=3).value
    assert out.shape == values.shape
    again = mech.release(values, rng=3).value
    np.testing.assert_array_equal(out, again)  # seeded: reproducible
    noise = out - values
    assert np.all(np.abs(noise) < 50)  # P(|Lap(1)| > 50) = e^-50


@pytest.mark.parametrize(
    ("epsilon", "delta", "sensitivity", "calibration"),
    [
        (1.0, 1e-5, 1.0, "analytic"),
        (0.5, 1e-6, 3.0, "analytic"),
        (0.5, 1e-5, 1.0, "classic"),
        (0.9, 1e-3, 0.2, "classic"),
    ],
)
def test_gaussian_noise(epsilon, delta, sensitivity, calibration):
    mech = GaussianMechanism(
        epsilon=epsilon, delta=delta, sensitivity=sensitivity, calibration=calibration
    )
    noisy = mech.release(np.zeros(N), rng=12)
    dist = stats.norm(scale=mech.sigma)
    assert mech.variance == pytest.approx(mech.sigma**2)
    assert mech.noise_distribution().std() == pytest.approx(mech.sigma)
    check_mean_var(noisy.value, dist, f"gaussian {calibration}")
    check_ks(noisy.value, dist, f"gaussian {calibration}")
    assert noisy.guarantee.simulation is True
    assert noisy.guarantee.details["sigma"] == mech.sigma


@pytest.mark.parametrize(("epsilon", "sensitivity"), [(1.0, 1), (0.2, 3), (3.0, 1), (0.01, 1)])
def test_geometric_noise_against_scipy_dlaplace(epsilon, sensitivity):
    mech = GeometricMechanism(epsilon=epsilon, sensitivity=sensitivity)
    noisy = mech.release(np.zeros(N, dtype=np.int64), rng=13)
    assert noisy.value.dtype == np.int64
    dist = stats.dlaplace(a=epsilon / sensitivity)
    check_mean_var(noisy.value, dist, "geometric")
    check_discrete(noisy.value, dist, "geometric")


@pytest.mark.parametrize("scale", [1e-3, 0.05, 0.5, 1.0, 3.7, 100.0, 1e4, 1e7, 1e10])
def test_geometric_variance_formula(scale):
    """variance = 2 q / (1 - q)^2, q = e^{-1/scale}: the variance of scipy's dlaplace."""
    mech = GeometricMechanism(epsilon=1.0 / scale, sensitivity=1)
    assert mech.scale == pytest.approx(scale, rel=1e-15)
    a = 1.0 / scale
    exact = 2.0 * math.exp(-a) / math.expm1(-a) ** 2  # = 2 e^a / (e^a - 1)^2
    assert mech.variance == pytest.approx(exact, rel=1e-12)
    if 0.01 <= scale <= 1e4:  # scipy's own moments overflow / lose precision outside
        assert mech.variance == pytest.approx(stats.dlaplace(a=a).var(), rel=1e-9)
        assert mech.noise_distribution().var() == pytest.approx(mech.variance, rel=1e-9)
    # Large scale: the discrete Laplace approaches Laplace(scale), variance 2 scale^2.
    if scale >= 100:
        assert mech.variance == pytest.approx(2 * scale**2, rel=1e-3)


@pytest.mark.parametrize("monotonic", [False, True])
def test_exponential_mechanism_frequencies(monotonic):
    mech = ExponentialMechanism(epsilon=1.0, sensitivity=1.0, monotonic=monotonic)
    scores = np.array([0.0, 1.0, 2.0, 0.5, -1.0, 2.0])
    probs = mech.probabilities(scores)
    assert probs.sum() == pytest.approx(1.0)
    weights = np.exp(scores / mech.scale)
    np.testing.assert_allclose(probs, weights / weights.sum(), rtol=1e-12)
    gen = noise_source(14).generator()
    picks = [mech.release(scores, rng=gen).value for _ in range(6_000)]
    check_chisquare(np.bincount(picks, minlength=scores.size), probs, "exponential")


def test_exponential_mechanism_scale():
    assert ExponentialMechanism(epsilon=0.5, sensitivity=2.0).scale == pytest.approx(8.0)
    assert ExponentialMechanism(epsilon=0.5, sensitivity=2.0, monotonic=True).scale == 4.0
    # Huge score differences: probabilities stay finite and sum to one.
    p = ExponentialMechanism(epsilon=1.0, sensitivity=1.0).probabilities([0.0, 1e6, -1e6])
    np.testing.assert_allclose(p, [0.0, 1.0, 0.0], atol=1e-300)


@pytest.mark.parametrize(("epsilon", "k", "true"), [(1.0, 2, 0), (1.0, 4, 0), (0.5, 5, 3)])
def test_randomized_response_keep_rate_and_uniform_flips(epsilon, k, true):
    mech = RandomizedResponse(epsilon=epsilon, k=k)
    keep = mech.keep_probability
    assert keep == pytest.approx(math.exp(epsilon) / (math.exp(epsilon) + k - 1), rel=1e-15)
    out = mech.release(np.full(N, true), rng=15).value
    assert out.min() >= 0 and out.max() < k
    counts = np.bincount(out, minlength=k)
    check_proportion(int(counts[true]), N, keep, "randomized response keep rate")
    if k > 2:
        others = np.delete(counts, true)
        check_chisquare(others, np.full(k - 1, 1.0 / (k - 1)), "flips uniform over others")


def test_randomized_response_transition_matrix():
    mech = RandomizedResponse(epsilon=0.7, k=3)
    m = mech.transition_matrix()
    np.testing.assert_allclose(m.sum(axis=1), 1.0)
    # Privacy: any column's ratio is exactly e^eps (within rounding).
    assert (m.max(axis=0) / m.min(axis=0)) == pytest.approx(np.full(3, math.exp(0.7)))
    values = np.repeat(np.arange(3), 30_000)
    out = mech.release(values, rng=16).value
    for i in range(3):
        counts = np.bincount(out[values == i], minlength=3)
        check_chisquare(counts, m[i], f"row {i}")


def test_randomized_response_keep_probability_never_exceeds_epsilon():
    """The float keep probability's own ratio keep (k-1) / (1 - keep) is <= e^eps, in
    exact arithmetic (60 digits: the same log ratio in doubles errs by 5e-17 absolute,
    half a percent of eps = 1e-8)."""
    import mpmath as mp

    mp.mp.dps = 60
    for k in (2, 3, 10, 1000):
        for eps in (1e-8, 0.1, 1.0, 5.0, 20.0, 30.0, 35.0):
            keep = RandomizedResponse(epsilon=eps, k=k).keep_probability
            assert keep < 1.0
            achieved = float(mp.log(mp.mpf(keep) * (k - 1) / (1 - mp.mpf(keep))))
            assert achieved <= eps, (k, eps, achieved)
            # ... and as close to eps as float spacing allows: one ulp of keep moves the
            # ratio's log by about 2^-53 / (1 - keep).
            assert achieved >= eps - 2.3e-16 / (1.0 - keep) - 1e-12, (k, eps, achieved)


def test_randomized_response_refuses_epsilon_without_noise():
    with pytest.raises(ValueError, match="epsilon"):
        RandomizedResponse(epsilon=50.0, k=2)
    assert RandomizedResponse(epsilon=50.0, k=10**9).keep_probability < 1.0


def test_randomized_response_values_checked():
    mech = RandomizedResponse(epsilon=1.0, k=3)
    for bad in ([0, 3], [-1], [0.5, 1.0]):
        with pytest.raises(ValueError, match="values"):
            mech.release(bad, rng=0)
    assert mech.release(np.array([], dtype=int), rng=0).value.size == 0


def test_simulated_sources_reproducible_and_independent_of_call_site():
    a = noise_source(5)
    b = noise_source(check_rng(5))  # a numpy Generator seeded with 5
    assert a.simulation and b.simulation
    np.testing.assert_array_equal(a.laplace(np.zeros(4), 1.0), b.laplace(np.zeros(4), 1.0))
    assert noise_source(None).simulation is False
    with pytest.raises(TypeError, match="rng"):
        noise_source("seed")
    with pytest.raises(TypeError, match="rng"):
        noise_source(True)
