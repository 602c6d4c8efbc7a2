"""Simulation-based calibration helpers: prior draws of P and one replicate."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy import stats

from dpbayes.nonparametric import ConvergenceWarning, DPMixture, LocalLaplace
from dpbayes.nonparametric.calibration import draw_prior_p, sbc_replicate


def test_prior_draws_of_p_follow_the_dp():
    """P(A) ~ Beta(alpha P0(A), alpha (1 - P0(A))) for fixed alpha and base (Ferguson 1973)."""
    model = DPMixture(
        mechanism=LocalLaplace(epsilon=1.0, r=1.0), alpha=3.0, alpha_prior=None,
        base=(0.2, 0.5), base_prior=None,
    )  # fmt: skip
    g = np.random.default_rng(0)
    mass = []
    for _ in range(3000):
        atoms, w, alpha, mu, sigma = draw_prior_p(model, g)
        assert (alpha, mu, sigma) == (3.0, 0.2, 0.5)
        assert np.all(np.abs(atoms) <= 1.0) and abs(w.sum() - 1.0) < 1e-12
        mass.append(w[atoms <= 0.0].sum())
    base = stats.truncnorm(-2.4, 1.6, loc=0.2, scale=0.5)
    p0 = base.cdf(0.0)
    assert stats.kstest(mass, stats.beta(3.0 * p0, 3.0 * (1 - p0)).cdf).pvalue > 1e-4


@pytest.mark.slow
def test_sbc_replicate_reports_coverage_and_ranks():
    model = DPMixture(mechanism=LocalLaplace(epsilon=2.0, r=1.0))
    grid = np.linspace(-0.8, 0.8, 5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        res = sbc_replicate(model, 80, grid, 3, fit_kw={"draws": 60, "chains": 2}, thin=19)
    assert res.truth.shape == grid.shape and np.all(np.diff(res.truth) >= 0)
    assert res.pointwise.dtype == bool and isinstance(res.simultaneous, bool)
    assert np.all((0 <= res.rank) & (res.rank <= 19))
    if res.simultaneous:  # a simultaneous band is wider than the pointwise one
        assert res.pointwise.all()
