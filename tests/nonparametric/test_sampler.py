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
    LocalGaussian,
    LocalLaplace,
)
from dpbayes.nonparametric.baselines import empirical_cdf, wasserstein1
from dpbayes.nonparametric.diagnostics import ess_bulk
from dpbayes.nonparametric.mechanisms import log_base_mass
from dpbayes.nonparametric.reference import reference_laplace_sweep, reference_new_weights
from dpbayes.nonparametric.sampler import ChainState

ALPHA = 1e-4
ZB = float(stats.norm.isf(ALPHA / 2))  # two-sided 1e-4 z-bound, ~3.89


def two_cluster_data(n, seed, eps=1.0, r=1.0):
    g = np.random.default_rng(seed)
    x = np.where(g.random(n) < 0.4, g.normal(-0.5, 0.15, n), g.normal(0.4, 0.2, n))
    x = np.clip(x, -r, r)
    mech = LocalLaplace(epsilon=eps, r=r)
    return x, mech, mech.privatize(x, rng=seed + 1)


@pytest.mark.parametrize("support", ["real", "clipped"])
def test_compiled_sweep_equals_pure_python_reference(support):
    _, mech, z = two_cluster_data(250, 3)
    tails = support == "real"
    model = DPMixture(
        mechanism=mech, alpha=1.7, alpha_prior=None, base=(0.1, 0.8), base_prior=None,
        support=support, marginal_moves=False,
    )  # fmt: skip
    data = model.prepare(z.values)
    new_w = reference_new_weights(data.z, epsilon=1.0, r=1.0, mu=0.1, sigma=0.8, tails=tails)
    np.testing.assert_allclose(new_w, model.new_cluster_weights(data, 0.1, 0.8), rtol=1e-12)
    fast = model.initial_state(data.z, np.random.default_rng(11))
    slow = copy.deepcopy(fast)
    g1, g2 = np.random.default_rng(12), np.random.default_rng(12)
    for _ in range(15):
        fast = model.sweep(fast, data, g1)
        slow = reference_laplace_sweep(
            slow, data.z, g2, epsilon=1.0, r=1.0, alpha=1.7, mu=0.1, sigma=0.8, new_w=new_w,
            tails=tails,
        )  # fmt: skip
        np.testing.assert_array_equal(fast.labels, slow.labels)
        np.testing.assert_allclose(fast.phi, slow.phi, rtol=0, atol=1e-10)


def exact_two_point_posterior(mech, z, alpha, mu, sigma, tails=True):
    """P(X1 = X2 | z) and the CDF of X1 | z for n = 2 (partition prior 1/(1+alpha) tied)."""
    zs = np.sort(z)
    pair = mech.conditional(zs, np.array([0, 1]), np.array([0, 2]), mu, sigma, tails=tails)
    one = mech.conditional(z[:1], np.array([0]), np.array([0, 1]), mu, sigma, tails=tails)
    scale = 2 * mech.scale if isinstance(mech, LocalLaplace) else mech.sigma * np.sqrt(2 * np.pi)
    norm = 0.0 if tails else log_base_mass(mu, sigma, mech.r)
    log_tied = special.logsumexp(pair.log_mass()) - 2 * np.log(scale) - norm
    log_sep = np.sum(mech.log_marginal(z, mu, sigma, tails=tails)) + np.log(alpha)
    p_tied = 1.0 / (1.0 + np.exp(log_sep - log_tied))
    return p_tied, lambda t: p_tied * pair.cdf(t) + (1 - p_tied) * one.cdf(t)


def run_n2(model, z, sweeps, seed, record):
    data = model.prepare(z)
    gen = np.random.default_rng(seed)
    state = model.initial_state(data.z, gen)
    out = []
    for _ in range(sweeps):
        state = model.sweep(state, data, gen)
        out.append(record(state))
    return np.array(out, dtype=float)


def mc_bound(x):
    """The 1e-4 z-bound of a chain average: ZB sd / sqrt(ESS)."""
    return ZB * np.std(x) / np.sqrt(ess_bulk(x[None, :]))


CASES_N2 = [  # (mechanism, support, marginal moves, sweeps)
    ("laplace", "real", False, 6000),
    ("laplace", "clipped", False, 6000),
    ("gaussian", "clipped", False, 6000),
    pytest.param("laplace", "real", True, 3000, marks=pytest.mark.slow),
    pytest.param("laplace", "clipped", True, 3000, marks=pytest.mark.slow),
    pytest.param("gaussian", "clipped", True, 3000, marks=pytest.mark.slow),
]


@pytest.mark.parametrize(("kind", "support", "moves", "sweeps"), CASES_N2)
def test_chain_targets_exact_posterior_n2(kind, support, moves, sweeps):
    """The sampler (with and without the label-integrated block) against the exact posterior
    of n = 2 observations: P(X1 = X2 | z) and the law of X1 (fixed alpha and base)."""
    if kind == "laplace":
        mech = LocalLaplace(epsilon=1.0, r=1.0)
    else:
        mech = LocalGaussian(epsilon=1.0, delta=1e-3, r=1.0)
    z = np.array([0.35, 1.6])  # sorted, so z[0] is observation 0 of the sampler
    alpha, mu, sigma = 1.3, 0.2, 0.7
    p_tied, cdf = exact_two_point_posterior(mech, z, alpha, mu, sigma, tails=support == "real")
    model = DPMixture(
        mechanism=mech, alpha=alpha, alpha_prior=None, base=(mu, sigma), base_prior=None,
        support=support, marginal_moves=moves, atom_moves=3, pair_moves=2,
    )  # fmt: skip
    out = run_n2(model, z, sweeps, 21, lambda s: (s.labels[0] == s.labels[1], s.phi[s.labels[0]]))
    assert abs(np.mean(out[:, 0]) - p_tied) <= mc_bound(out[:, 0]), (np.mean(out[:, 0]), p_tied)
    res = stats.kstest(out[::4, 1], lambda t: cdf(np.asarray(t)))
    assert res.pvalue > ALPHA, f"KS p = {res.pvalue:.3g}"


def hyperprior_n2_expectations(mech, z, shape, rate, prior):
    """E[1{X1 = X2}], E[mu], E[log sigma], E[alpha] given n = 2 values under the default
    hyperpriors, by quadrature: alpha on a fine grid, (mu, log sigma) on a 121 x 61 grid."""
    a = np.linspace(1e-6, 100.0, 100_001)
    pa = stats.gamma(shape, scale=1 / rate).pdf(a)
    c_tied, c_sep = (np.trapezoid(pa * f, a) for f in (1 / (1 + a), a / (1 + a)))
    a_tied, a_sep = (np.trapezoid(pa * f, a) for f in (a / (1 + a), a * a / (1 + a)))
    mus = np.linspace(prior.mu_mean - 6 * prior.mu_sd, prior.mu_mean + 6 * prior.mu_sd, 121)
    lss = np.linspace(np.log(prior.sigma_lo), np.log(prior.sigma_hi), 61)
    zs = np.sort(z)
    w = np.zeros((mus.size, lss.size, 2))
    for i, m in enumerate(mus):
        for j, ls in enumerate(lss):
            s = np.exp(ls)
            pair = mech.conditional(zs, np.array([0, 1]), np.array([0, 2]), m, s, tails=False)
            tied = special.logsumexp(pair.log_mass()) - 2 * np.log(2 * mech.scale)
            tied -= log_base_mass(m, s, mech.r)
            sep = np.sum(mech.log_marginal(z, m, s, tails=False))
            lp = stats.norm.logpdf(m, prior.mu_mean, prior.mu_sd)
            w[i, j] = np.exp(lp + tied), np.exp(lp + sep)
    tot = c_tied * w[..., 0].sum() + c_sep * w[..., 1].sum()
    joint = c_tied * w[..., 0] + c_sep * w[..., 1]
    return (
        c_tied * w[..., 0].sum() / tot,
        float(joint.sum(axis=1) @ mus / tot),
        float(joint.sum(axis=0) @ lss / tot),
        (a_tied * w[..., 0].sum() + a_sep * w[..., 1].sum()) / tot,
    )


@pytest.mark.slow
@pytest.mark.parametrize("moves", [False, True])
def test_hyperprior_updates_target_exact_posterior_n2(moves):
    """alpha ~ Gamma(2, 0.5) and the base hyperprior (centred updates, and with ``moves`` the
    non-centred ones of the label-integrated block) against quadrature for n = 2."""
    mech = LocalLaplace(epsilon=1.0, r=1.0)
    z = np.array([0.35, 1.6])
    model = DPMixture(mechanism=mech, marginal_moves=moves, atom_moves=3, pair_moves=2)
    exact = hyperprior_n2_expectations(mech, z, 2.0, 0.5, model.base_prior)
    out = run_n2(
        model,
        z,
        8000 if moves else 30000,
        3,
        lambda s: (s.labels[0] == s.labels[1], s.mu, np.log(s.sigma), s.alpha),
    )
    for j, name in enumerate(["tied", "mu", "log sigma", "alpha"]):
        assert abs(np.mean(out[:, j]) - exact[j]) <= mc_bound(out[:, j]), (name, exact[j])


def test_alpha_update_targets_its_conditional():
    """Escobar & West: alpha | K, n has density prop. to Gamma(a, b) alpha^K G(alpha)/G(alpha+n)."""
    shape, rate, k, n = 2.0, 0.5, 6, 200
    model = DPMixture(mechanism=LocalLaplace(epsilon=1.0, r=1.0), alpha_prior=(shape, rate))
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
        mech = LocalGaussian(epsilon=2.0, delta=1e-5, r=1.0)
        z = mech.privatize(x, rng=32)
        model = DPMixture(mechanism=mech)
        values = z.values
    else:
        lap = LocalLaplace(epsilon=2.0, r=1.0)
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


@pytest.mark.parametrize("kind", ["laplace", "gaussian"])
@pytest.mark.parametrize("moves", [False, True])
def test_fits_at_the_numerical_edges_stay_finite_and_clustered(kind, moves):
    """Tiny and huge eps and r (the Gaussian mechanism up to eps 50): the posterior mean and
    CDF are finite and the chains do not give every observation its own cluster (at eps
    300 the Laplace new-cluster weight once overflowed and did exactly that)."""
    g = np.random.default_rng(5)
    n = 200
    for eps in (0.01, 300.0):
        for r in (1e-3, 1e3):
            x = r * np.clip(np.where(g.random(n) < 0.4, -0.5, 0.4) + 0.2 * g.normal(size=n), -1, 1)
            mech = (
                LocalLaplace(epsilon=eps, r=r)
                if kind == "laplace"
                else LocalGaussian(epsilon=min(eps, 50.0), delta=1e-6, r=r)
            )
            z = mech.privatize(x, rng=6)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                fit = DPMixture(mechanism=mech, marginal_moves=moves).fit(
                    z, draws=10, warmup=10, chains=1, rng=7, progress=False, diagnostics=False
                )
            cdf = fit.cdf(np.array([-r / 2, 0.0, r / 2]))
            assert np.isfinite(fit.mean()), (eps, r)
            assert np.all((cdf >= 0) & (cdf <= 1)), (eps, r, cdf)
            assert np.mean(fit.n_clusters) < n / 2, (eps, r, np.mean(fit.n_clusters))
