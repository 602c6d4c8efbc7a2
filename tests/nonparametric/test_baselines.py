"""The comparison estimators: W1, deconvolution KDE, the NPMLE (mix-SQP and EM)."""

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


def _randomised_response(counts: list[int]) -> tuple[np.ndarray, object]:
    """Three-ary randomised response: Q(z | x) = 0.8 if z == x else 0.1."""
    z = np.repeat(np.arange(3.0), counts)
    return z, lambda zz, xx: np.log(np.where(zz == xx, 0.8, 0.1))


@pytest.mark.parametrize("method", ["sqp", "em"])
def test_npmle_of_randomised_response_inside_the_simplex(method: str):
    # the frequencies are reachable: the NPMLE solves Q w = p, w = (p - 0.1) / 0.7
    z, loglik = _randomised_response([500, 300, 200])
    opts = {"max_iter": 20_000, "tol": 1e-14} if method == "em" else {}
    w = npmle_grid(z, loglik, np.arange(3.0), method=method, **opts)
    np.testing.assert_allclose(w, (np.array([0.5, 0.3, 0.2]) - 0.1) / 0.7, atol=1e-6)


def test_npmle_of_randomised_response_on_the_boundary():
    # p = (0.05, 0.45, 0.5) is not reachable: w_0 = 0 and the first-order condition of the
    # other two gives w_1 = 310 / 665 (KKT: D_0 = 0.61 < 1)
    z, loglik = _randomised_response([50, 450, 500])
    w = npmle_grid(z, loglik, np.arange(3.0))
    np.testing.assert_allclose(w, [0.0, 310 / 665, 355 / 665], atol=1e-9)


def test_npmle_sqp_meets_the_optimality_conditions_where_em_stops_short():
    # heavy local noise (eps 0.5): the likelihood is flat and EM crawls; mix-SQP reaches
    # the maximum, which is discrete, with a higher likelihood than 1,000 EM steps
    g = np.random.default_rng(3)
    mech = LocalLaplace(epsilon=0.5, r=1.0)
    z = mech.privatize(np.clip(g.normal(0.0, 0.5, 4000), -1, 1), rng=4).values
    support = np.linspace(-1, 1, 101)
    lik = np.exp(mech.loglik(z[:, None], support[None, :]))
    w = npmle_grid(z, mech.loglik, support)
    em = npmle_grid(z, mech.loglik, support, method="em")
    d = lik.T @ (1.0 / (lik @ w)) / z.size
    assert d.max() <= 1 + 1e-8
    np.testing.assert_allclose(d[w > 1e-6], 1.0, atol=1e-6)
    assert np.log(lik @ w).sum() > np.log(lik @ em).sum() + 0.1
    assert (w > 1e-6).sum() <= 10 < (em > 1e-6).sum()


def test_npmle_rejects_an_unknown_method():
    z, loglik = _randomised_response([1, 1, 1])
    with pytest.raises(ValueError, match="method must be"):
        npmle_grid(z, loglik, np.arange(3.0), method="newton")


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


def test_npmle_warns_when_it_stops_short_of_the_optimality_conditions():
    mech = LocalLaplace(epsilon=0.5, r=1.0)
    z = mech.privatize(np.random.default_rng(0).uniform(-1, 1, 2000), rng=1).values
    with pytest.warns(RuntimeWarning, match="KKT gap"):
        w = npmle_grid(z, mech.loglik, np.linspace(-1, 1, 101), max_iter=1)
    assert w.sum() == pytest.approx(1.0) and np.all(w >= 0)
