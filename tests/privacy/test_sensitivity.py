"""Smooth-sensitivity helpers: the beta formula and path maxima against brute force."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpbayes.privacy.sensitivity import (
    expmech_smooth_beta,
    expmech_smooth_epsilon,
    smooth_sensitivity_path,
    smooth_sensitivity_path_all,
)


@pytest.mark.parametrize("eps", [0.01, 0.1, 1.0, 10.0, 100.0])
@pytest.mark.parametrize("delta", [1e-12, 1e-6, 0.5])
@pytest.mark.parametrize("size", [2, 101, 10**7])
def test_beta_is_the_largest_that_proves_eps(eps: float, delta: float, size: int) -> None:
    """Exponent eps/2 and this beta: Theorem 2's bound is eps (up to the bisection)."""
    beta = expmech_smooth_beta(eps, delta, size)
    proven = expmech_smooth_epsilon(eps / 2, beta, size, delta)
    assert proven <= eps and proven >= eps * (1 - 1e-9)
    assert expmech_smooth_epsilon(eps / 2, beta * (1 + 1e-6), size, delta) > eps


def test_the_notes_calibration_is_not_proven() -> None:
    """Issue 14, defect 2: paper 003's beta with exponent eps proves only more than eps."""
    for eps, delta, size in [(1.0, 1e-6, 101), (0.1, 1e-3, 11), (2.0, 0.5, 2)]:
        notes_beta = math.log(1 - eps / (2 * math.log(delta / (2 * size))))
        assert expmech_smooth_epsilon(eps, notes_beta, size, delta) > 1.5 * eps
        # with exponent eps/2 it would still be short: the normaliser term is missing
        assert expmech_smooth_epsilon(eps / 2, notes_beta, size, delta) > eps


@pytest.mark.parametrize(
    ("args", "error"),
    [
        ((1.0, 0.0, 10), ValueError),
        ((0.0, 1e-6, 10), ValueError),
        ((1.0, 1e-6, 0), ValueError),
        ((1.0, 1e-6, 2.5), TypeError),
        ((float("nan"), 1e-6, 10), ValueError),
    ],
)
def test_beta_validation(args: tuple, error: type) -> None:
    with pytest.raises(error):
        expmech_smooth_beta(*args)


def test_path_maxima_equal_brute_force() -> None:
    rng = np.random.default_rng(0)
    local = rng.uniform(0.01, 1.0, 200)
    beta = 0.07
    every = smooth_sensitivity_path_all(local, beta)
    for i in range(0, 200, 13):
        brute = max(local[j] * math.exp(-beta * abs(i - j)) for j in range(200))
        assert smooth_sensitivity_path(local, i, beta) == pytest.approx(brute, rel=1e-13)
        assert every[i] == pytest.approx(brute, rel=1e-12)
    # beta-smooth: S(i) <= e^beta S(i +- 1), and S >= LS
    assert np.all(every[1:] <= math.exp(beta) * every[:-1] * (1 + 1e-12))
    assert np.all(every[:-1] <= math.exp(beta) * every[1:] * (1 + 1e-12))
    assert np.all(every >= local * (1 - 1e-12))
    with pytest.raises(ValueError, match="index"):
        smooth_sensitivity_path(local, 200, beta)
