"""The Gibbs sampler: draw-for-draw against the pure-Python reference, the exact posterior
for n = 2, the alpha update, and recovery of a known P on synthetic data."""

from __future__ import annotations

import copy
import warnings

import numpy as np
import pytest
from scipy import integrate, special, stats

from dpbayes.nonparametric import (
    ConvergenceWarning,
    CustomMechanism,
    DPMixture,
    GaussianMechanism,
    LaplaceMechanism,
)
from dpbayes.nonparametric.baselines import empirical_cdf, wasserstein1
from dpbayes.nonparametric.reference import reference_laplace_sweep, reference_new_weights
from dpbayes.nonparametric.sampler import ChainState

ALPHA = 1e-4
ZB = float(stats.norm.isf(ALPHA / 2))  # two-sided 1e-4 z-bound, ~3.89


def two_cluster_data(n, seed, eps=1.0, r=1.0):
    g = np.random.default_rng(seed)
    x = np.where(g.random(n) < 0.4, g.normal(-0.5, 0.15, n), g.normal(0.4, 0.2, n))
    x = np.clip(x, -r, r)
    mech = LaplaceMechanism(epsilon=eps, r=r)
    return x, mech, mech.privatize(x, rng=seed + 1)


def test_compiled_sweep_equals_pure_python_reference():
    _, mech, z = two_cluster_data(250, 3)
    model = DPMixture(mechanism=mech, alpha=1.7, base=(0.1, 0.8))
    data = model.prepare(z.values)
    new_w = reference_new_weights(data.z, epsilon=1.0, r=1.0, mu=0.1, sigma=0.8)
    np.testing.assert_allclose(new_w, data.new_weight[:, 0], rtol=1e-12)
    fast = model.initial_state(data.z, np.random.default_rng(11))
    slow = copy.deepcopy(fast)
    g1, g2 = np.random.default_rng(12), np.random.default_rng(12)
    for _ in range(15):
        fast = model.sweep(fast, data, g1)
        slow = reference_laplace_sweep(
            slow, data.z, g2, epsilon=1.0, r=1.0, alpha=1.7, mu=0.1, sigma=0.8, new_w=new_w
        )
        np.testing.assert_array_equal(fast.labels, slow.labels)
        np.testing.assert_allclose(fast.phi, slow.phi, rtol=0, atol=1e-10)


def exact_two_point_posterior(mech, z, alpha, mu, sigma):
    """P(X1 = X2 | z) and the CDF of X1 | z for n = 2 (partition prior 1/(1+alpha) tied)."""
    zs = np.sort(z)
    pair = mech.conditional(zs, np.array([0, 1]), np.array([0, 2]), mu, sigma)
    one = mech.conditional(z[:1], np.array([0]), np.array([0, 1]), mu, sigma)
    log_tied = special.logsumexp(pair.log_mass()) - 2 * np.log(2 * mech.scale)
    log_sep = np.sum(mech.log_marginal(z, mu, sigma)) + np.log(alpha)
    p_tied = 1.0 / (1.0 + np.exp(log_sep - log_tied))
    return p_tied, lambda t: p_tied * pair.cdf(t) + (1 - p_tied) * one.cdf(t)


def test_gibbs_chain_targets_exact_posterior_n2():
    mech = LaplaceMechanism(epsilon=1.0, r=1.0)
    z = np.array([0.35, 1.6])  # sorted, so z[0] is observation 0 of the sampler
    alpha, mu, sigma = 1.3, 0.0, 1.0
    p_tied, cdf = exact_two_point_posterior(mech, z, alpha, mu, sigma)
    model = DPMixture(mechanism=mech, alpha=alpha, base=(mu, sigma))
    data = model.prepare(z)
    gen = np.random.default_rng(21)
    state = model.initial_state(data.z, gen)
    x1, tied = [], []
    for s in range(6_000):
        state = model.sweep(state, data, gen)
        if s % 2 == 0:
            x1.append(state.phi[state.labels[0]])
            tied.append(state.labels[0] == state.labels[1])
    m = len(tied)
    bound = ZB * np.sqrt(p_tied * (1 - p_tied) / m) * 1.5  # 1.5: residual autocorrelation
    assert abs(np.mean(tied) - p_tied) <= bound, (np.mean(tied), p_tied, bound)
    res = stats.kstest(np.array(x1), lambda t: cdf(np.asarray(t)))
    assert res.pvalue > ALPHA, f"KS p = {res.pvalue:.3g}"


def test_alpha_update_targets_its_conditional():
    """Escobar & West: alpha | K, n has density prop. to Gamma(a, b) alpha^K G(alpha)/G(alpha+n)."""
    shape, rate, k, n = 2.0, 0.5, 6, 200
    model = DPMixture(mechanism=LaplaceMechanism(epsilon=1.0, r=1.0), alpha_prior=(shape, rate))
    state = ChainState(np.zeros(n, dtype=np.int64), np.ones(k, dtype=np.int64), np.zeros(k), 1.0)
    gen = np.random.default_rng(5)
    draws = []
    for s in range(9000):
        state.alpha = model.update_alpha(state, n, gen)
        if s % 3 == 0:
            draws.append(state.alpha)

    def logpost(a):
        return (
            stats.gamma(shape, scale=1 / rate).logpdf(a)
            + k * np.log(a)
            + special.gammaln(a)
            - special.gammaln(a + n)
        )

    grid = np.linspace(1e-6, 15, 30_001)
    p = np.exp(logpost(grid) - logpost(grid).max())
    cum = integrate.cumulative_trapezoid(p, grid, initial=0)
    res = stats.kstest(np.array(draws), lambda t: np.interp(t, grid, cum / cum[-1]))
    assert res.pvalue > ALPHA, f"KS p = {res.pvalue:.3g}"


@pytest.fixture(scope="module")
def laplace_fit():
    x, mech, z = two_cluster_data(2000, 7, eps=2.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        fit = DPMixture(mechanism=mech).fit(z, draws=400, warmup=200, chains=2, rng=8)
    return x, z, fit


def test_recovers_mean_within_z_bound(laplace_fit):
    _, z, fit = laplace_fit
    # E[Z] = E[clip X] exactly (zero-mean noise), so the mean is estimable at rate sd(Z)/sqrt(n)
    true_mean = -0.5 * 0.4 + 0.4 * 0.6  # clipping at 1 moves it by < 1e-6
    bound = ZB * np.std(z.values) / np.sqrt(len(z))
    assert abs(fit.projected().mean() - true_mean) <= bound
    lo, hi = fit.projected().interval("mean", 0.9999)
    assert lo <= true_mean <= hi


def test_recovers_cdf_better_than_the_noisy_data(laplace_fit):
    x, z, fit = laplace_fit
    grid = np.linspace(-1, 1, 1001)
    post = wasserstein1(fit.projected().cdf(grid), empirical_cdf(x, grid), grid)
    naive = wasserstein1(
        empirical_cdf(np.clip(z.values, -1, 1), grid), empirical_cdf(x, grid), grid
    )
    assert post < 0.9 * naive, (post, naive)


@pytest.mark.parametrize("kind", ["gaussian", "custom"])
def test_other_mechanisms_recover_mean(kind):
    g = np.random.default_rng(31)
    n = 1000
    x = np.clip(g.normal(0.3, 0.3, n), -1, 1)
    if kind == "gaussian":
        mech = GaussianMechanism(epsilon=2.0, delta=1e-5, r=1.0)
        z = mech.privatize(x, rng=32)
        model = DPMixture(mechanism=mech)
        values = z.values
    else:
        lap = LaplaceMechanism(epsilon=2.0, r=1.0)
        values = lap.privatize(x, rng=32).values
        mech = CustomMechanism(logpdf=lambda zz, xx: -np.abs(zz - np.clip(xx, -1, 1)))
        model = DPMixture(mechanism=mech, base=(0.0, 1.0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        fit = model.fit(values, draws=200, warmup=100, chains=2, rng=33)
    bound = ZB * np.std(values) / np.sqrt(n)
    # the mean of the law of clip(X) (the atoms beyond r are not identified)
    est = np.mean(np.sum(fit.weights() * np.clip(fit.atoms, -1, 1), axis=-1))
    assert abs(est - np.mean(x)) <= bound, (est, np.mean(x), bound)
