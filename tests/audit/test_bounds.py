"""Clopper-Pearson bounds and the exact eps of finite-output mechanisms."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from dpbayes.audit import (
    clopper_pearson_lower,
    clopper_pearson_upper,
    epsilon_lower_bound,
    exact_epsilon,
)
from dpbayes.privacy import RandomizedResponse


@pytest.mark.parametrize("k,m", [(0, 10), (3, 10), (10, 10), (250, 1000)])
def test_clopper_pearson_matches_scipy_exact_interval(k, m):
    ci = stats.binomtest(k, m).proportion_ci(confidence_level=0.9, method="exact")
    assert clopper_pearson_lower(k, m, 0.05) == pytest.approx(ci.low, abs=1e-12)
    assert clopper_pearson_upper(k, m, 0.05) == pytest.approx(ci.high, abs=1e-12)


def test_clopper_pearson_covers_at_least_its_level():
    rng = np.random.default_rng(0)
    p, m, alpha, reps = 0.07, 200, 0.05, 1000
    ks = rng.binomial(m, p, reps)
    miss_lo = np.mean([clopper_pearson_lower(int(k), m, alpha) > p for k in ks])
    miss_hi = np.mean([clopper_pearson_upper(int(k), m, alpha) < p for k in ks])
    # conservative: each miss rate <= alpha (+ 4.5 binomial standard errors)
    tol = 4.5 * math.sqrt(alpha * (1 - alpha) / reps)
    assert miss_lo <= alpha + tol and miss_hi <= alpha + tol


def test_clopper_pearson_validates():
    with pytest.raises(ValueError, match="k must be <= m"):
        clopper_pearson_lower(5, 3, 0.05)
    with pytest.raises(ValueError, match="alpha"):
        clopper_pearson_upper(1, 3, 1.5)


def test_epsilon_lower_bound_formula():
    assert epsilon_lower_bound(0.5, 0.1) == pytest.approx(math.log(5))
    assert epsilon_lower_bound(0.5, 0.1, delta=0.2) == pytest.approx(math.log(3))
    assert epsilon_lower_bound(0.05, 0.1, delta=0.1) == 0.0
    assert epsilon_lower_bound(0.1, 0.5) == 0.0


def test_exact_epsilon_of_randomized_response_is_its_eps():
    rr = RandomizedResponse(epsilon=0.8, k=3)
    m = rr.transition_matrix()
    assert exact_epsilon(m[0], m[1]) == pytest.approx(0.8)


def test_exact_epsilon_with_delta_is_smaller():
    p = np.array([0.5, 0.3, 0.2])
    q = np.array([0.2, 0.3, 0.5])
    e0 = exact_epsilon(p, q)
    e1 = exact_epsilon(p, q, delta=0.1)
    assert e0 == pytest.approx(math.log(2.5))
    assert 0 < e1 < e0
    # at e1 the excess mass is delta
    assert np.maximum(0, p - math.exp(e1) * q).sum() == pytest.approx(0.1, abs=1e-9)


def test_exact_epsilon_is_infinite_for_disjoint_support():
    assert math.isinf(exact_epsilon(np.array([1.0, 0.0]), np.array([0.0, 1.0])))
