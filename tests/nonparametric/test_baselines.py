"""The comparison estimators: W1, deconvolution KDE, NPMLE by EM."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from dpbayes.nonparametric import LocalLaplace
from dpbayes.nonparametric.baselines import (
    deconvolution_kde_laplace,
    density_to_cdf,
    empirical_cdf,
    npmle_grid,
    wasserstein1,
)


def test_wasserstein1_of_shifted_uniforms_is_the_shift():
    grid = np.linspace(-2, 3, 50_001)
    a = stats.uniform(0, 1).cdf(grid)
    b = stats.uniform(0.3, 1).cdf(grid)
    assert wasserstein1(a, b, grid) == pytest.approx(0.3, abs=1e-6)


def test_deconvolution_kde_recovers_a_normal_from_laplace_noise():
    g = np.random.default_rng(0)
    n, b = 20_000, 0.5
    z = g.normal(0, 1, n) + g.laplace(0, b, n)
    grid = np.linspace(-8, 8, 1601)
    f = deconvolution_kde_laplace(z, b, grid)
    assert np.trapezoid(f, grid) == pytest.approx(1.0, abs=0.02)
    cdf = density_to_cdf(f, grid)
    w_kde = wasserstein1(cdf, stats.norm.cdf(grid), grid)
    w_naive = wasserstein1(empirical_cdf(z, grid), stats.norm.cdf(grid), grid)
    assert w_kde < w_naive / 2


def test_npmle_recovers_two_atoms():
    g = np.random.default_rng(1)
    n = 5_000
    mech = LocalLaplace(epsilon=2.0, r=1.0)
    x = np.where(g.random(n) < 0.3, -0.6, 0.6)
    z = mech.privatize(x, rng=2).values
    support = np.linspace(-1, 1, 21)
    w = npmle_grid(z, mech.loglik, support, max_iter=1000)
    assert w.sum() == pytest.approx(1.0)
    # mass below 0 near 0.3: the mixing weight's standard error here is ~0.013
    assert abs(w[support < 0].sum() - 0.3) < 0.06


def test_deconvolution_kde_recovers_a_normal_from_gaussian_noise():
    from dpbayes.nonparametric.baselines import deconvolution_kde_gaussian

    g = np.random.default_rng(1)
    n, tau = 20_000, 0.4
    z = g.normal(0.2, 1.0, n) + g.normal(0, tau, n)
    grid = np.linspace(-6, 6, 1201)
    f = deconvolution_kde_gaussian(z, tau, grid)
    assert np.trapezoid(f, grid) == pytest.approx(1.0, abs=0.01)
    cdf = density_to_cdf(f, grid)
    # the smoothing kernel (variance 6 h^2, h = tau / sqrt(log n) = 0.13) adds little
    assert np.max(np.abs(cdf - stats.norm(0.2, 1.0).cdf(grid))) < 0.02
    with pytest.raises(ValueError, match="tau"):
        deconvolution_kde_gaussian(z, 0.0, grid)
