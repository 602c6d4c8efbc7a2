"""Faults found by a review of the nonparametric module, one test each."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from dpbayes import display
from dpbayes.nonparametric import ConvergenceWarning, DPMixture, LocalLaplace

FAST = dict(draws=20, warmup=10, chains=1, rng=0, diagnostics=False, progress=False)


def _fit(model, z):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return model.fit(z, **FAST)


def test_plain_array_fit_carries_no_guarantee():
    mech = LocalLaplace(epsilon=1.0, r=3.0)
    raw = np.random.default_rng(0).normal(1.0, 0.5, 60)  # not privatised at all
    fit = _fit(DPMixture(mechanism=mech), raw)
    assert fit.guarantee is None
    assert "privacy is not verified" in repr(fit)
    rows = dict(fit._display()[1])
    assert "plain array" in rows["guarantee"] and "not verified" in rows["guarantee"]
    # the seeded release of the same data keeps its guarantee and its SIMULATION flag
    col = mech.privatize(raw, rng=1)
    fit2 = _fit(DPMixture(mechanism=mech), col)
    assert fit2.guarantee is not None and fit2.guarantee.simulation is True
    assert fit2.guarantee.epsilon == 1.0
    # ... but its bare values do not
    assert _fit(DPMixture(mechanism=mech), col.values).guarantee is None
    assert display.html(fit)  # the HTML display still renders
