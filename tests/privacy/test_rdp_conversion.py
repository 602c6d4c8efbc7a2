"""The RDP ledger's conversion from zCDP rho to eps: dp-accounting's, without its KL
shortcut to eps = 0 (not argued for a privacy filter)."""

from __future__ import annotations

import math

import dp_accounting as dpa
import numpy as np
import pytest
from dp_accounting.rdp import rdp_privacy_accountant as rdp

from dpbayes.privacy import Accountant
from dpbayes.privacy.composition import Event, compose, zcdp_epsilon


def _library(events: list[tuple[str, float]], delta: float) -> float:
    acc = rdp.RdpAccountant()
    for kind, value in events:
        acc.compose(dpa.ZCDpEvent(value) if kind == "rho" else dpa.GaussianDpEvent(value))
    return float(acc.get_epsilon(delta))


def test_the_conversion_is_the_accountants_outside_its_kl_shortcut():
    g = np.random.default_rng(0)
    checked = 0
    for _ in range(400):
        rho = 10 ** g.uniform(-6, 1)
        z = 10 ** g.uniform(-0.5, 2)
        delta = 10 ** g.uniform(-12, -2)
        ref = _library([("rho", rho), ("z", z)], delta)
        if ref == 0.0:
            continue
        assert zcdp_epsilon(rho + 1 / (2 * z**2), delta) == pytest.approx(ref, rel=1e-9)
        checked += 1
    assert checked > 350


def test_a_filter_does_not_report_eps_zero_from_the_kl_shortcut():
    """Two Laplace spends of eps e = sqrt(rho) at a budget delta where the accountant's KL
    bound says eps = 0: the ledger reports the Canonne-Kamath-Steinke eps instead."""
    rho, delta = 2.3e-8, 3.2e-4
    e = math.sqrt(rho)  # two pure spends: rho = 2 e^2 / 2
    assert _library([("rho", rho)], delta) == 0.0  # the shortcut
    want = zcdp_epsilon(rho, delta)
    assert want > 1e-4
    eps, _ = compose([Event(e, 0.0)] * 2, "rdp", delta, adaptive=True)
    assert eps >= want
    acc = Accountant(1.0, delta, composition="rdp")
    for _ in range(2):
        acc.spend(e)
    assert acc.spent[0] >= want


def test_a_gaussian_ratio_without_a_finite_rho_falls_back_to_basic_composition():
    """sigma / Delta_2 = 1e-170: 1 / (2 z^2) divided by zero (a loaded ledger's record)."""
    gauss = Event(1e3, 1e-6, 1e-170)
    assert compose([gauss], "rdp", 1e-5) == (1e3, 1e-6)
    assert compose([gauss, Event(0.1, 0.0)], "rdp", 1e-5, adaptive=True) == (1000.1, 1e-6)
