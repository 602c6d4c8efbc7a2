"""The DP mixture of truncated Normals: closed forms, prior pieces, moves and SBC."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy import integrate, stats

from dpbayes.nonparametric import ConvergenceWarning, LocalGaussian, LocalLaplace
from dpbayes.nonparametric import kernels_normal_mixture as knm
from dpbayes.nonparametric.calibration import rank_uniformity, sbc_replicate
from dpbayes.nonparametric.normal_mixture import DPNormalMixture, NormalMixtureFit, _log_gamma

MECHS = [LocalLaplace(epsilon=1.0, r=1.0), LocalGaussian(epsilon=1.0, delta=1e-5, r=1.0)]


@pytest.mark.parametrize("mech", [*MECHS, LocalLaplace(epsilon=200.0, r=2.0)], ids=repr)
def test_component_likelihood_matches_the_mechanisms_marginal(mech):
    """log m(z | theta, s) against the mechanism's prior predictive restricted to [-r, r]
    (Appendix A pieces), for components inside, at the edge of and far outside [-r, r],
    narrow and wide, and z inside, beyond and far beyond the range."""
    r = mech.r
    z = np.array([-40.0, -3 * r, -r, -0.3 * r, 0.0, 0.7 * r, r, 2.5 * r, 60.0])
    for theta, s in [(0.0, 0.5), (0.9, 0.02), (-4.0, 0.05), (6.0, 3.0), (0.3, 40.0)]:
        got = DPNormalMixture(mechanism=mech).loglik_matrix(z, np.array([theta]), np.array([s]))
        ref = mech.log_marginal(z, theta, s, tails=False)
        np.testing.assert_allclose(got[:, 0], ref, rtol=1e-9, atol=1e-9)


def test_component_likelihood_matches_quadrature():
    """The closed form against adaptive quadrature of the integral over [-r, r]."""
    mech = LocalLaplace(epsilon=0.5, r=1.0)
    b = mech.scale
    theta, s = 0.4, 0.3
    kernel = stats.truncnorm((-1 - theta) / s, (1 - theta) / s, loc=theta, scale=s)
    got = DPNormalMixture(mechanism=mech).loglik_matrix(
        np.array([-2.0, 0.1, 3.0]), np.array([theta]), np.array([s])
    )[:, 0]
    for zi, g in zip([-2.0, 0.1, 3.0], got, strict=True):
        val, _ = integrate.quad(
            lambda x, zi=zi: kernel.pdf(x) * math.exp(-abs(zi - x) / b) / (2 * b),
            -1, 1, points=[min(max(zi, -1), 1)], epsabs=1e-14,
        )  # fmt: skip
        assert abs(g - math.log(val)) < 1e-9


def test_mixture_functionals_match_scipy():
    g = np.random.default_rng(0)
    r = 1.5
    w = g.dirichlet(np.ones(4), size=3)
    theta = g.normal(0, 2, size=(3, 4))
    s = np.exp(g.uniform(np.log(0.05), np.log(3), size=(3, 4)))
    theta[0, 0], s[0, 0] = 5.0, 0.1  # mass of the kernel on [-r, r] about e^-600
    grid = np.linspace(-r, r, 13)
    comps = [
        [stats.truncnorm((-r - theta[i, k]) / s[i, k], (r - theta[i, k]) / s[i, k],
                         loc=theta[i, k], scale=s[i, k]) for k in range(4)]
        for i in range(3)
    ]  # fmt: skip
    cdf = knm.mixture_cdf(w, theta, s, r, grid)
    pdf = knm.mixture_pdf(w, theta, s, r, grid)
    mom = knm.mixture_moments(w, theta, s, r)
    q = knm.mixture_quantiles(w, theta, s, r, np.array([0.1, 0.5, 0.9]))
    for i in range(3):
        ref_cdf = sum(w[i, k] * comps[i][k].cdf(grid) for k in range(4))
        ref_pdf = sum(w[i, k] * comps[i][k].pdf(grid) for k in range(4))
        np.testing.assert_allclose(cdf[i], ref_cdf, atol=1e-10)
        np.testing.assert_allclose(pdf[i], ref_pdf, rtol=1e-8, atol=1e-10)
        means = np.array([comps[i][k].mean() for k in range(4)])
        second = np.array([comps[i][k].var() + comps[i][k].mean() ** 2 for k in range(4)])
        m = w[i] @ means
        assert abs(mom[i, 0] - m) < 1e-9
        assert abs(mom[i, 1] - (w[i] @ second - m * m)) < 1e-8
        for j, p in enumerate([0.1, 0.5, 0.9]):
            f = sum(w[i, k] * comps[i][k].cdf(q[i, j]) for k in range(4))
            assert abs(f - p) < 1e-10


def test_log_gamma_is_exact_for_small_shapes():
    """log Gamma(a) variates: G(a + 1) U^(1/a) for a < 1, where the variate itself
    underflows (a = 1e-3 gives values below 1e-300 with probability 0.5)."""
    g = np.random.default_rng(1)
    for a in (1e-3, 0.3, 2.5):
        lg = _log_gamma(np.full(20000, a), g)
        assert np.all(np.isfinite(lg))

        # Gamma(a) is the law of exp(lg); P(G <= y) = y^a / Gamma(a + 1) (1 + O(y)) for
        # y below e^-30, where exp(x) would underflow
        def cdf(x, a=a):
            tiny = np.exp(a * np.minimum(x, -30) - math.lgamma(a + 1))
            return np.where(x < -30, tiny, stats.gamma(a).cdf(np.exp(np.maximum(x, -30))))

        p = stats.kstest(lg, cdf).pvalue
        assert p > 1e-4, (a, p)


def test_stick_breaking_prior_density_ratio():
    """log_prior_weights differences against the Beta(1, alpha) sticks and the Jacobian
    prod_{k<K} T_k of the map from sticks to weights."""
    g = np.random.default_rng(2)
    alpha = 2.7
    for _ in range(20):
        v = g.beta(1.0, alpha, size=5)
        w = np.append(v * np.cumprod(np.concatenate([[1.0], 1 - v[:-1]])), np.prod(1 - v))
        tails = np.cumsum(w[::-1])[::-1][:-1]
        ref = np.sum(stats.beta(1.0, alpha).logpdf(v)) - np.sum(np.log(tails))
        got = knm.log_prior_weights(w, alpha)
        if _ == 0:
            offset = ref - got
        assert abs(ref - got - offset) < 1e-9


@pytest.mark.parametrize("mech", MECHS, ids=repr)
def test_moves_leave_the_prior_invariant_without_data(mech):
    """With no observations the moves with the labels summed out must keep the prior:
    start from prior draws, move, and compare w_1 (Beta(1, alpha)), theta_k (Normal) and
    log s_k (uniform) with their prior laws."""
    model = DPNormalMixture(mechanism=mech, components=4, alpha=1.7, alpha_prior=None)
    g = np.random.default_rng(3)
    z = np.empty(0)
    w1, th, ls = [], [], []
    for _ in range(1500):
        st = model.initial_state(z, g)
        for _ in range(3):
            theta, s, logw, _ = model._marginal_moves(z, st.theta, st.s, st.logw, 1.7, st.loglik, g)
        w1.append(math.exp(logw[0]))
        th.append(theta[0])
        ls.append(math.log(s[0]))
    assert stats.kstest(w1, stats.beta(1.0, 1.7).cdf).pvalue > 1e-4
    assert stats.kstest(th, stats.norm(0.0, 1.0).cdf).pvalue > 1e-4
    lo, hi = math.log(1 / 40), math.log(2.0)
    assert stats.kstest(ls, stats.uniform(lo, hi - lo).cdf).pvalue > 1e-4


def test_fit_outputs_and_refusals():
    mech = LocalLaplace(epsilon=2.0, r=1.0)
    z = mech.privatize(np.random.default_rng(4).uniform(-0.8, 0.8, 200), rng=5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        fit = DPNormalMixture(mechanism=mech).fit(z, draws=40, chains=2, rng=6, progress=False)
    assert isinstance(fit, NormalMixtureFit) and fit.guarantee == z.guarantee
    grid = np.linspace(-1, 1, 9)
    cdf = fit.cdf(grid)
    assert cdf[0] == 0.0 and cdf[-1] == 1.0 and np.all(np.diff(cdf) >= 0)
    lo, hi = fit.cdf_band(grid, 0.9)
    assert np.all(lo <= hi)
    fine = np.linspace(-0.5, 0.5, 4001)  # the density integrates to the CDF's increments
    mass = np.trapezoid(fit.density(fine), fine)
    assert abs(mass - (fit.cdf(np.array([0.5]))[0] - fit.cdf(np.array([-0.5]))[0])) < 1e-6
    assert -1 <= fit.mean() <= 1 and fit.projected() is fit
    assert "mean" in fit.summary().index
    with pytest.raises(ValueError, match="bandwidth"):
        fit.density(grid, bandwidth=0.1)
    with pytest.raises(TypeError, match="mechanism"):
        DPNormalMixture(mechanism="laplace")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="components"):
        DPNormalMixture(mechanism=mech, components=1)
    with pytest.raises(ValueError, match="scale_range"):
        DPNormalMixture(mechanism=mech, scale_range=(1.0, 0.5))
    with pytest.raises(ValueError, match="does not match"):
        DPNormalMixture(mechanism=LocalLaplace(epsilon=1.0, r=1.0)).fit(z)


@pytest.mark.slow
@pytest.mark.parametrize("mech", [LocalLaplace(epsilon=2.0, r=1.0)], ids=repr)
def test_sbc_of_the_normal_mixture(mech):
    """Simulation-based calibration of the default sampler (n = 50, 100 replicates, 9
    check points): replicate-level rank test, middle-half fraction, simultaneous and
    randomized pointwise coverage within 4 standard errors."""
    model = DPNormalMixture(mechanism=mech)
    grid = np.linspace(-0.8, 0.8, 9)
    fit_kw = {"draws": 100, "warmup": 60, "chains": 1, "progress": False, "diagnostics": False}
    reps = 100
    res = [sbc_replicate(model, 50, grid, 2000 + k, fit_kw=fit_kw, thin=19) for k in range(reps)]
    test = rank_uniformity(np.array([r.rank for r in res]), 19, bins=5)
    assert test["p_value"] > 1e-3, test
    assert abs(test["mid_half"] - 0.5) < 4 * test["mid_half_se"], test
    sim = np.mean([r.simultaneous for r in res])
    assert abs(sim - 0.95) < 4 * np.sqrt(0.95 * 0.05 / reps), sim
    per_rep = np.array([np.mean(r.pointwise_randomized) for r in res])
    se = per_rep.std(ddof=1) / np.sqrt(reps)
    assert abs(per_rep.mean() - 0.95) < 4 * se, (per_rep.mean(), se)
