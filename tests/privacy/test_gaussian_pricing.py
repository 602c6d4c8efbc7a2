"""The inverse analytic Gaussian calibration, and pricing a spend before making it.

``analytic_gaussian_epsilon(sigma, delta, D)`` is checked in 50-digit arithmetic like
``analytic_gaussian_sigma``; ``Accountant.spent_after`` against the ``spent`` an accountant
shows after really making the spend.
"""

from __future__ import annotations

import math

import mpmath
import pytest

from dpbayes.privacy import (
    Accountant,
    GaussianMechanism,
    LaplaceMechanism,
    analytic_gaussian_epsilon,
    analytic_gaussian_sigma,
)
from dpbayes.privacy.composition import Event, compose


def exact_delta(sigma: float, epsilon: float, sensitivity: float) -> mpmath.mpf:
    """Balle & Wang 2018, Thm 8, in 50-digit arithmetic."""
    with mpmath.workdps(50):
        s, e, d = mpmath.mpf(sigma), mpmath.mpf(epsilon), mpmath.mpf(sensitivity)
        a = d / (2 * s) - e * s / d
        b = -d / (2 * s) - e * s / d
        return mpmath.ncdf(a) - mpmath.exp(e) * mpmath.ncdf(b)


GRID = [
    (eps, delta, sens)
    for eps in (0.01, 0.3, 1.0, 5.0, 40.0)
    for delta in (1e-3, 1e-6, 1e-12)
    for sens in (1.0, 7.5)
]


@pytest.mark.parametrize(("epsilon", "delta", "sensitivity"), GRID)
def test_epsilon_is_the_tight_inverse_of_sigma(epsilon, delta, sensitivity):
    sigma = analytic_gaussian_sigma(epsilon, delta, sensitivity)
    eps = analytic_gaussian_epsilon(sigma, delta, sensitivity)
    assert eps == pytest.approx(epsilon, rel=1e-8)
    assert exact_delta(sigma, eps, sensitivity) <= delta  # private at the returned eps
    assert exact_delta(sigma, eps * (1 - 1e-6), sensitivity) > delta  # and tight


def test_epsilon_edges():
    # a sigma so large that the mechanism is (0, delta)-DP already
    assert analytic_gaussian_epsilon(1e9, 1e-6, 1.0) == 0.0
    # a sigma so small that no eps up to 1e12 is enough
    assert analytic_gaussian_epsilon(1e-200, 1e-6, 1.0) == math.inf
    with pytest.raises(ValueError, match="delta must be > 0"):
        analytic_gaussian_epsilon(1.0, 0.0, 1.0)
    with pytest.raises(ValueError, match="sigma must be > 0"):
        analytic_gaussian_epsilon(-1.0, 1e-6, 1.0)


@pytest.mark.parametrize("composition", ["basic", "pld", "rdp"])
def test_spent_after_is_the_spent_after_the_spend_and_records_nothing(composition):
    acc = Accountant(10.0, 1e-5, composition=composition)
    # add/remove: a scoped (parallel) spend must be
    ar = "add-remove"
    gauss = GaussianMechanism(epsilon=0.8, delta=1e-5, sensitivity=1.0, neighbours=ar).guarantee()
    lap = LaplaceMechanism(epsilon=0.3, sensitivity=1.0, neighbours=ar).guarantee()
    small = GaussianMechanism(epsilon=0.5, delta=1e-7, sensitivity=1.0, neighbours=ar).guarantee()
    for _ in range(15):  # a pld ledger takes Gaussian spends only
        acc.spend(small if composition == "pld" else 0.2, scope=["cell:0"])
        acc.spend(small if composition == "pld" else 0.1)
    costs = [(gauss, ["cell:0"]), (lap, ["cell:0", "cell:1"]), (0.25, None)]
    for cost, scope in costs[:1] if composition == "pld" else costs:
        before = (acc.spent, len(acc.spends))
        priced = acc.spent_after(cost, scope=scope)
        assert (acc.spent, len(acc.spends)) == before  # read only
        twin = Accountant(10.0, 1e-5, composition=composition)
        for s in acc.spends:
            twin.restore(s)
        twin.spend(cost, scope=scope)
        assert priced == pytest.approx(twin.spent, rel=1e-12)


def test_spent_after_prices_a_gaussian_by_its_noise_under_pld():
    """Under PLD composition a Gaussian guarantee is priced by its privacy-loss
    distribution (sigma / Delta_2), below its (eps, delta) pair composed as such."""
    acc = Accountant(20.0, 1e-6, composition="pld")
    g = GaussianMechanism(epsilon=0.5, delta=1e-6, sensitivity=1.0).guarantee()
    for _ in range(30):
        acc.spend(g)
    by_noise = acc.spent_after(g)[0]
    ratio = g.details["noise"]["ratio"]
    # (the accountant composes part by part as spends come; the PLD's own eps search is
    # within 1e-6 relative of its root)
    assert by_noise == pytest.approx(
        compose([Event(0.5, 1e-6, ratio)] * 31, "pld", 1e-6)[0], rel=1e-6
    )
    as_pairs = compose([Event(0.5, 1e-6)] * 31, "pld", 1e-6)[0]
    assert by_noise < as_pairs
