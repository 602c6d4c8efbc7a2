"""Posterior of a query's answer: credible intervals, confidence, tests (paper 000 §4-5)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from dpbayes.answers import History
from dpbayes.privacy.noise import noise_source

Z4 = stats.norm.isf(0.5e-4)


def _history(x: np.ndarray, H: np.ndarray, eps: np.ndarray, seed: int) -> History:
    gen = noise_source(seed).generator()
    S = np.abs(H).max(axis=1)
    h = History(x.size)
    for row, e, s in zip(H, eps, S, strict=True):
        h.add(row, float(row @ x + gen.laplace(0.0, s / e)), float(e))
    return h


def _setup():
    x = np.array([120.0, 30.0, 4.0, 0.0, 57.0, 9.0])
    H = np.array(
        [
            [1, 1, 1, 1, 1, 1],
            [1, 1, 1, 0, 0, 0],
            [0, 0, 1, 1, 0, 0],
            [1, 0, 0, 0, 0, 0],
            [0, 1, 1, 0, 0, 0],
            [0, 0, 0, 1, 1, 1],
            [0, 0, 0, 0, 1, 0],
            [0, 0, 0, 0, 0, 1],
        ],
        float,
    )
    eps = np.array([0.5, 0.2, 0.1, 0.3, 0.05, 0.4, 0.2, 0.25])
    return x, H, eps


@pytest.mark.parametrize("p", [0.8, 0.95])
def test_credible_interval_coverage_matches_nominal(p: float) -> None:
    """Repeated noise on a fixed data set: q_hat +- d covers q x with probability p."""
    x, H, eps = _setup()
    q = np.array([0, 0, 1, 1, 0, 0], float)  # cells 2 + 3, estimable via row 2
    post = _history(x, H, eps, seed=0).posterior(q)
    d = post.half_width(p)
    gen = noise_source(42).generator()
    reps = 40_000
    S = np.abs(H).max(axis=1)
    noise = gen.laplace(0.0, 1.0, size=(reps, len(eps))) * (S / eps)
    estimates = (H @ x + noise) @ post.weights
    covered = np.mean(np.abs(estimates - q @ x) <= d)
    assert abs(covered - p) <= Z4 * math.sqrt(p * (1 - p) / reps)


def test_interval_confidence_and_tests_agree() -> None:
    x, H, eps = _setup()
    post = _history(x, H, eps, seed=1).posterior([1, 1, 0, 0, 0, 0])
    lo, hi = post.interval(0.9)
    assert post.estimate == pytest.approx((lo + hi) / 2)
    assert post.confidence(lo, hi) == pytest.approx(0.9, abs=1e-8)
    assert post.prob_greater(post.estimate) == pytest.approx(0.5, abs=1e-12)
    assert post.prob_greater(hi) == pytest.approx(0.05, abs=1e-8)
    assert post.cdf(lo) == pytest.approx(0.05, abs=1e-8)
    assert post.meets((hi - lo) / 2 * 1.001, 0.9)
    assert not post.meets((hi - lo) / 2 * 0.999, 0.9)
    # Chebyshev (Thm 3.2) bounds the exact tail from above.
    for d in [5.0, 20.0, 60.0]:
        exact_tail = 1 - post.confidence(post.estimate - d, post.estimate + d)
        assert exact_tail <= post.chebyshev_bound(d) + 1e-12
    assert post.chebyshev_half_width(0.9) >= (hi - lo) / 2
    with pytest.raises(ValueError):
        post.confidence(3.0, 1.0)
    with pytest.raises(ValueError):
        post.interval(1.0)


def test_nonnegative_integer_support_is_narrower_near_zero() -> None:
    x, H, eps = _setup()
    h = _history(x, H, eps, seed=3)
    q = np.array([0, 0, 0, 1, 0, 0], float)  # the empty cell, estimable from rows 5-7
    real = h.posterior(q)
    ints = h.posterior(q, support="nonnegative-integers")
    lo, hi = ints.interval(0.95)
    assert lo >= 0 and lo == int(lo) and hi == int(hi)
    assert ints.confidence(lo, hi) >= 0.95 - 1e-9
    rlo, rhi = real.interval(0.95)
    assert hi - lo <= rhi - rlo + 1.0
    assert ints.prob_greater(-0.5) == pytest.approx(1.0)
    assert ints.cdf(-1.0) == 0.0
    with pytest.raises(ValueError, match="non-negative integer"):
        h.posterior(np.array([0, 0, 0, 0.5, 0, 0]), support="nonnegative-integers")
    with pytest.raises(ValueError, match="support"):
        h.posterior(q, support="positive")


def test_integer_support_coverage_is_at_least_nominal_for_small_counts() -> None:
    """A frequentist check of the beyond-the-paper option on a count near zero."""
    x = np.array([2.0, 40.0])
    H = np.array([[1, 0], [1, 1], [0, 1]], float)
    eps = np.array([0.5, 0.4, 0.3])  # distinct error scales: the partial-fraction form
    S = np.ones(3)
    gen = noise_source(9).generator()
    reps, hits = 200, 0
    for _ in range(reps):
        h = History(2)
        for row, e, s in zip(H, eps, S, strict=True):
            h.add(row, float(row @ x + gen.laplace(0.0, s / e)), float(e))
        lo, hi = h.posterior([1, 0], support="nonnegative-integers").interval(0.9)
        hits += lo <= 2.0 <= hi
    # One-sided 1e-4 z-bound on a binomial proportion: the interval must not under-cover.
    assert hits / reps >= 0.9 - Z4 * math.sqrt(0.9 * 0.1 / reps)
