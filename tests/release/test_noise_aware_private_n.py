"""Noise-aware posteriors of releases whose n is private (add/remove; user level).

Exactness against brute-force enumeration of the true counts (coin, categorical) and
numerical integration (Normal mean); the prior on n; refusals. Calibration lives in
test_noise_aware_private_n_calibration.py.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import integrate, special, stats

import dpbayes as dpb
from dpbayes.models import BetaBernoulli, DirichletCategorical, NormalMean
from dpbayes.models.bayes_net import BayesNet
from dpbayes.release.base import noise_aware_posterior
from dpbayes.release.counts.noise_aware import count_log_likelihood
from dpbayes.release.counts.normal import normal_laplace_logpdf
from dpbayes.release.counts.private_n import (
    CountPairBetaMixture,
    PrivateNDirichletMixture,
    n_prior,
    private_n_counts,
)


def _coin_release(x, mechanism, eps, delta=0.0, seed=0, alpha=1.0, beta=1.0):
    return dpb.release(
        BetaBernoulli(alpha=alpha, beta=beta),
        np.asarray(x, dtype=float),
        mechanism=mechanism,
        epsilon=eps,
        delta=delta,
        neighbours="add-remove",
        rng=seed,
    )


def _brute_coin(a, b, released, kind, scale, log_prior=None, size=300):
    """Every (c1, c0) in [0, size)^2 with weight pi(N) N!/Gamma(A + N) prod h_j L_j."""
    x = np.arange(size, dtype=float)[:, None]
    y = np.arange(size, dtype=float)[None, :]
    n = x + y
    lw = (
        (0.0 if log_prior is None else log_prior(n))
        + special.gammaln(n + 1.0)
        - special.gammaln(n + a + b)
        + special.gammaln(a + x)
        - special.gammaln(x + 1.0)
        + special.gammaln(b + y)
        - special.gammaln(y + 1.0)
        + count_log_likelihood(released[0], x, kind, scale, None)
        + count_log_likelihood(released[1], y, kind, scale, None)
    )
    w = np.exp(lw - lw.max())
    w /= w.sum()
    assert w[-1, :].sum() + w[:, -1].sum() < 1e-15  # the enumeration holds the mass
    ca, cb = a + x, b + y

    def cdf(t):
        return float(np.sum(w * special.betainc(ca, cb, t)))

    def pdf(t):
        return float(np.sum(w * stats.beta.pdf(t, ca, cb)))

    mean = float(np.sum(w * ca / (ca + cb)))
    second = float(np.sum(w * ca * (ca + 1) / ((ca + cb) * (ca + cb + 1))))
    return mean, second - mean**2, cdf, pdf


@pytest.mark.parametrize(
    ("data", "mechanism", "eps", "delta", "prior"),
    [
        ([1] * 3 + [0] * 9, "laplace", 1.0, 0.0, (1.0, 1.0)),
        ([1] * 3 + [0] * 9, "geometric", 0.7, 0.0, (0.5, 0.5)),
        ([1] * 3 + [0] * 9, "gaussian", 1.0, 1e-3, (2.0, 3.0)),
        ([0] * 6, "laplace", 2.0, 0.0, (1.0, 1.0)),  # a count at 0 (released 0 likely)
        ([1] * 4, "geometric", 1.5, 0.0, (1.0, 1.0)),  # the other count at 0
        ([1] * 2 + [0] * 3, "laplace", 0.3, 0.0, (1.0, 1.0)),  # tiny eps: the prior rules
        ([1] * 5 + [0] * 7, "laplace", 100.0, 0.0, (1.0, 1.0)),  # huge eps: nearly exact
    ],
)
def test_coin_matches_brute_force_enumeration(data, mechanism, eps, delta, prior):
    rel = _coin_release(data, mechanism, eps, delta, seed=3, alpha=prior[0], beta=prior[1])
    assert rel.public["n"] is None and rel.public["noised_coordinates"] == 2
    post = rel.noise_aware_posterior()
    assert isinstance(post, CountPairBetaMixture)
    assert post.n_prior.kind == "flat" and post.omitted_mass < 1e-9
    det = rel.guarantee.details
    scale = det["sigma"] if mechanism == "gaussian" else det["scale"]
    mean, var, cdf, pdf = _brute_coin(*prior, rel.released["counts"], mechanism, scale)
    assert post.mean() == pytest.approx(mean, abs=1e-12)
    assert post.var() == pytest.approx(var, rel=1e-9, abs=1e-14)
    for t in (0.01, 0.1, 0.3, 0.5, 0.7, 0.95):
        assert post.cdf(t) == pytest.approx(cdf(t), abs=1e-12)
        assert post.pdf(t) == pytest.approx(pdf(t), rel=1e-9)
        assert post.sf(t) == pytest.approx(1.0 - cdf(t), abs=1e-12)
    qs = post.ppf([0.05, 0.5, 0.95])
    assert [cdf(q) for q in qs] == pytest.approx([0.05, 0.5, 0.95], abs=1e-8)
    lo, hi = post.interval(0.9)
    assert (lo, hi) == pytest.approx((qs[0], qs[2]), abs=1e-9)
    assert post.logpdf(0.3) == pytest.approx(math.log(pdf(0.3)), rel=1e-9)


def test_coin_n_prior_proper_and_recorded():
    rel = _coin_release([1] * 4 + [0] * 8, "laplace", 0.8, seed=2)
    det = rel.guarantee.details
    r = rel.released["counts"]
    normal = rel.noise_aware_posterior(n_prior=(12.0, 2.0))
    mean, _, cdf, _ = _brute_coin(
        1.0, 1.0, r, "laplace", det["scale"], log_prior=lambda n: -0.5 * ((n - 12.0) / 2.0) ** 2
    )
    assert normal.mean() == pytest.approx(mean, abs=1e-12)
    assert normal.cdf(0.3) == pytest.approx(cdf(0.3), abs=1e-12)
    assert normal.n_prior.to_dict()["kind"] == "normal"
    pois = rel.noise_aware_posterior(n_prior=stats.poisson(12))
    mean, _, cdf, _ = _brute_coin(
        1.0, 1.0, r, "laplace", det["scale"], log_prior=stats.poisson(12).logpmf
    )
    assert pois.mean() == pytest.approx(mean, abs=1e-12)
    assert pois.n_prior.to_dict() == {
        "kind": "pmf",
        "distribution": "poisson",
        "args": [12.0],
        "text": "poisson(12.0,)",
    }
    # the prior matters at this n: the flat and the Poisson posteriors differ
    assert abs(pois.mean() - rel.noise_aware_posterior().mean()) > 1e-4
    # the posterior of n itself
    n_vals, w = normal.n_marginal()
    assert w.sum() == pytest.approx(1.0) and abs(float(n_vals @ w) - 12.0) < 4.0


def test_n_prior_errors_name_the_argument():
    rel = _coin_release([1] * 4 + [0] * 8, "laplace", 1.0, seed=2)
    with pytest.raises(ValueError, match="n_prior sd"):
        rel.noise_aware_posterior(n_prior=(10, -1))
    with pytest.raises(ValueError, match="n_prior must be"):
        rel.noise_aware_posterior(n_prior="uniform")
    with pytest.raises(TypeError, match="n_prior must be"):
        rel.noise_aware_posterior(n_prior=object())
    with pytest.raises(ValueError, match="prior on n puts its mass"):
        rel.noise_aware_posterior(n_prior=(5000, 1))  # conflicts with a release of ~12 rows
    with pytest.raises(ValueError, match="not accepted"):
        rel.noise_aware_posterior(iterations=10)


def test_categorical_matches_brute_force_and_draws():
    x = np.array([0] * 3 + [1] * 1 + [2] * 5)
    model = DirichletCategorical(alpha=[1.0, 2.0, 0.5])
    rel = dpb.release(model, x, mechanism="laplace", epsilon=1.2, neighbours="add-remove", rng=7)
    post = rel.noise_aware_posterior()
    assert isinstance(post, PrivateNDirichletMixture) and post.m == 3
    al = np.array([1.0, 2.0, 0.5])
    scale = rel.guarantee.details["scale"]
    size = 45
    g = np.indices((size,) * 3).astype(float)
    n = g.sum(axis=0)
    lw = special.gammaln(n + 1.0) - special.gammaln(n + al.sum())
    for j in range(3):
        r = rel.released["counts"][j]
        lw = lw + special.gammaln(al[j] + g[j]) - special.gammaln(g[j] + 1.0)
        lw = lw + count_log_likelihood(r, g[j], "laplace", scale, None)
    w = np.exp(lw - lw.max())
    w /= w.sum()
    for i in range(3):
        a = al[i] + g[i]
        b = al.sum() + n - a
        mi = post.marginal(i)
        assert mi.mean() == pytest.approx(float(np.sum(w * a / (a + b))), abs=1e-12)
        for t in (0.1, 0.4, 0.8):
            exact = float(np.sum(w * special.betainc(a, b, t)))
            assert mi.cdf(t) == pytest.approx(exact, abs=1e-12)
    assert post.interval(0.9).shape == (3, 2)
    assert post.mean().sum() == pytest.approx(1.0, abs=1e-12)
    draws = post.rvs_counts(4000, random_state=1)
    expect = np.array([float(np.sum(w * g[j])) for j in range(3)])
    sd = np.array([math.sqrt(float(np.sum(w * (g[j] - expect[j]) ** 2))) for j in range(3)])
    assert np.all(np.abs(draws.mean(axis=0) - expect) < 4.5 * sd / math.sqrt(4000))
    theta = post.rvs(500, random_state=2)
    assert theta.shape == (500, 3) and np.allclose(theta.sum(axis=1), 1.0)


def test_coin_draws_match_the_posterior():
    rel = _coin_release([1] * 3 + [0] * 9, "laplace", 1.0, seed=3)
    post = rel.noise_aware_posterior()
    draws = post.rvs(4000, random_state=5)
    # Kolmogorov-Smirnov against the exact cdf (fixed seed, 1% level)
    assert stats.kstest(draws, post.cdf).pvalue > 0.01


def _normal_brute(rel, model, log_prior=None):
    det = rel.guarantee.details
    gauss = rel.mechanism == "gaussian"
    noise = det["sigma"] if gauss else det["scale"]
    c, w = det["centre"], det["half_width"]
    n_obs, t_obs = rel.released["count"], rel.released["centred_sum"]
    ns = np.arange(0, int(max(n_obs, 0) + 80 * noise + 60))
    lw = -0.5 * ((n_obs - ns) / noise) ** 2 if gauss else -np.abs(n_obs - ns) / noise
    if log_prior is not None:
        lw = lw + log_prior(ns)

    def dens(mu):
        var = ns * model.noise_sd**2
        z = t_obs - ns * (mu - c)
        if gauss:
            lt = stats.norm.logpdf(z, 0, np.sqrt(var + (w * noise) ** 2))
        else:
            lt = np.where(
                ns == 0,
                -np.abs(z) / (w * noise) - math.log(2 * w * noise),
                normal_laplace_logpdf(z, np.sqrt(np.maximum(var, 1e-300)), w * noise),
            )
        prior = stats.norm.logpdf(mu, model.prior_mean, model.prior_sd)
        return math.exp(prior + special.logsumexp(lw + lt))

    return dens


@pytest.mark.parametrize(
    ("mechanism", "eps", "delta"),
    [("laplace", 1.0, 0.0), ("laplace", 0.2, 0.0), ("gaussian", 1.0, 1e-5), ("laplace", 30.0, 0.0)],
)
def test_normal_mean_add_remove_matches_numerical_integration(mechanism, eps, delta):
    model = NormalMean(prior_mean=1.0, prior_sd=2.0, noise_sd=1.5, lower=-3, upper=5)
    x = np.array([0.5, 1.2, 2.0, -0.3, 1.1, 0.9, 3.0, 2.2])
    rel = dpb.release(
        model, x, mechanism=mechanism, epsilon=eps, delta=delta, neighbours="add-remove", rng=5
    )
    post = rel.noise_aware_posterior()
    assert post.n_prior.kind == "flat" and post.omitted_mass < 1e-9
    dens = _normal_brute(rel, model)
    lo, hi = post.x[0], post.x[-1]
    z = integrate.quad(dens, lo, hi, limit=400, epsabs=0)[0]
    mean = integrate.quad(lambda u: u * dens(u), lo, hi, limit=400, epsabs=0)[0] / z
    assert post.mean() == pytest.approx(mean, abs=1e-6 * post.std())
    for q, p in zip((0.05, 0.5, 0.95), post.ppf([0.05, 0.5, 0.95]), strict=True):
        # the grid's piecewise-linear density: cdf error O(h^2), ~2e-5 at 801 points
        assert integrate.quad(dens, lo, p, limit=400, epsabs=0)[0] / z == pytest.approx(q, abs=1e-4)
    # the grid holds the posterior: its ends are ~40 log-units below the mode
    assert dens(lo) / dens(post.ppf(0.5)) < 1e-15


def test_normal_mean_n_prior_and_refusals():
    model = NormalMean(prior_mean=1.0, prior_sd=2.0, noise_sd=1.5, lower=-3, upper=5)
    x = np.array([0.5, 1.2, 2.0, -0.3, 1.1, 0.9, 3.0, 2.2])
    rel = dpb.release(model, x, mechanism="laplace", epsilon=1.0, neighbours="add-remove", rng=5)
    flat = rel.noise_aware_posterior()
    sharp = rel.noise_aware_posterior(n_prior=(8, 0.5))
    assert sharp.n_prior.kind == "normal" and abs(sharp.mean() - flat.mean()) > 1e-3
    dens = _normal_brute(rel, model, log_prior=lambda n: -0.5 * ((n - 8.0) / 0.5) ** 2)
    lo, hi = sharp.x[0], sharp.x[-1]
    z = integrate.quad(dens, lo, hi, limit=400, epsabs=0)[0]
    mean = integrate.quad(lambda u: u * dens(u), lo, hi, limit=400, epsabs=0)[0] / z
    assert sharp.mean() == pytest.approx(mean, abs=1e-6 * sharp.std())
    with pytest.raises(ValueError, match="clamp"):
        rel.noise_aware_posterior(clamp="nope")
    sub = dpb.release(model, x, mechanism="laplace", epsilon=1.0, rng=5)
    with pytest.raises(ValueError, match="n_prior applies only"):
        sub.noise_aware_posterior(n_prior=(8, 1))


DATA = pd.DataFrame({"A": [0, 1, 1, 0, 1, 1], "B": [0, 1, 1, 1, 0, 1]})


def _enumerate_tables(n_max):
    """Every joint table of two binary variables (cells 00, 01, 10, 11) with sum <= n_max."""
    out = []
    for a in range(n_max + 1):
        for b in range(n_max + 1 - a):
            for c in range(n_max + 1 - a - b):
                for d in range(n_max + 1 - a - b - c):
                    out.append((a, b, c, d))
    return np.array(out, dtype=float)


def _bn_brute(rel, edges, n_max=40):
    """P(N | release) over every joint table N of (A, B) with n <= n_max, flat prior on n."""
    t = _enumerate_tables(n_max)
    n = t.sum(axis=1)
    alpha = rel.model.alpha
    scale = rel.public["scale"]
    # family tables in the release's layout: A: (A=0, A=1); B: (B=0, B=1) or rows by A
    fa = np.stack([t[:, 0] + t[:, 1], t[:, 2] + t[:, 3]], axis=1)
    if edges:
        fb = t  # rows A = 0: (00, 01), A = 1: (10, 11)
        rows_b = np.stack([t[:, 0] + t[:, 1], t[:, 2] + t[:, 3]], axis=1)
    else:
        fb = np.stack([t[:, 0] + t[:, 2], t[:, 1] + t[:, 3]], axis=1)
        rows_b = n[:, None]
    lw = special.gammaln(n + 1.0) - special.gammaln(t + 1.0).sum(axis=1)
    lw += special.gammaln(alpha + fa).sum(axis=1) - special.gammaln(2 * alpha + n)
    lw += special.gammaln(alpha + fb).sum(axis=1) - special.gammaln(2 * alpha + rows_b).sum(axis=1)
    released = np.r_[np.ravel(rel.released["counts"]["A"]), np.ravel(rel.released["counts"]["B"])]
    stats_ = np.concatenate([fa, fb], axis=1)
    for o, r in enumerate(released):
        lw += count_log_likelihood(float(r), stats_[:, o], "laplace", scale, None)
    w = np.exp(lw - lw.max())
    w /= w.sum()
    assert w[n >= n_max - 2].sum() < 1e-12
    return w, fa, fb


def test_bayes_net_without_edges_is_exact_with_private_n():
    model = BayesNet({"A": [0, 1], "B": [0, 1]}, [])
    rel = dpb.release(model, DATA, mechanism="laplace", epsilon=3.0, neighbours="add-remove", rng=1)
    post = rel.noise_aware_posterior()
    assert post.method == "exact" and post.n_prior.kind == "flat"
    w, fa, fb = _bn_brute(rel, edges=False)
    a = model.alpha
    for name, tab in (("A", fa), ("B", fb)):
        theta1 = (a + tab[:, 1]) / (2 * a + tab.sum(axis=1))
        assert post.node(name).mean()[1] == pytest.approx(float(w @ theta1), abs=1e-10)
        cdf = special.betainc(a + tab[:, 1], a + tab[:, 0], 0.6)
        assert post.node(name).marginal(1).cdf(0.6) == pytest.approx(float(w @ cdf), abs=1e-10)


def test_bayes_net_with_edges_mcmc_matches_enumeration():
    model = BayesNet({"A": [0, 1], "B": [0, 1]}, [("A", "B")])
    rel = dpb.release(model, DATA, mechanism="laplace", epsilon=3.0, neighbours="add-remove", rng=1)
    post = rel.noise_aware_posterior(rng=4, iterations=3000)
    assert post.method == "mcmc" and post.diagnostics.ok and post.n_prior.kind == "flat"
    w, fa, fb = _bn_brute(rel, edges=True)
    a = model.alpha
    n_true = float(w @ fa.sum(axis=1))
    n_sd = math.sqrt(float(w @ (fa.sum(axis=1) - n_true) ** 2))
    ess = post.diagnostics.min_ess
    assert abs(post.n_draws.mean() - n_true) < 5 * n_sd / math.sqrt(ess)
    checks = [
        ("A", (), (a + fa[:, 1]) / (2 * a + fa.sum(axis=1))),
        ("B", [0], (a + fb[:, 1]) / (2 * a + fb[:, 0] + fb[:, 1])),
        ("B", [1], (a + fb[:, 3]) / (2 * a + fb[:, 2] + fb[:, 3])),
    ]
    for name, parents, theta in checks:
        exact = float(w @ theta)
        sd = math.sqrt(float(w @ (theta - exact) ** 2))
        got = post.node(name, parents).mean()[1]
        assert abs(got - exact) < 5 * sd / math.sqrt(ess) + 1e-3


def test_bayes_net_fourier_add_remove_runs_with_n_free():
    model = BayesNet({"A": [0, 1], "B": [0, 1]}, [("A", "B")])
    data = pd.concat([DATA] * 50, ignore_index=True)
    rel = dpb.release(model, data, mechanism="fourier", epsilon=1.0, neighbours="add-remove", rng=2)
    post = rel.noise_aware_posterior(rng=1)
    assert post.diagnostics.ok
    assert abs(post.n_draws.mean() - len(data)) < 6 * post.n_draws.std() + 5


def test_noise_aware_posterior_rejects_n_prior_where_n_is_public():
    x = np.r_[np.ones(30), np.zeros(70)]
    rel = dpb.release(BetaBernoulli(), x, mechanism="laplace", epsilon=0.5, rng=4)
    with pytest.raises(ValueError, match="n_prior applies only"):
        noise_aware_posterior(rel, n_prior=(100, 10))


def test_direct_builder_validates_windows():
    lik = [lambda x: count_log_likelihood(3.0, x, "laplace", 1.0, None)] * 2
    post = private_n_counts(np.array([1.0, 1.0]), lik, [3.0, 3.0], 1.0, n_prior(None))
    assert post.mean() == pytest.approx(0.5, abs=1e-12)  # symmetric
    assert post.cdf(0.5) == pytest.approx(0.5, abs=1e-12)
    d = post.to_dict()
    assert d["family"] == "count-pair-beta-mixture" and d["n_prior"]["kind"] == "flat"


def test_noise_too_large_for_the_exact_sum_is_refused_by_name():
    lik = [lambda x: count_log_likelihood(1e6, x, "laplace", 2e4, None)] * 2
    with pytest.raises(ValueError, match="too large for the exact sum"):
        private_n_counts(np.array([1.0, 1.0]), lik, [1e6, 1e6], 2e4, n_prior(None))


def test_moderate_priors_get_a_posterior_at_every_noise_draw() -> None:
    """Add/remove coin, 100 records, eps 1: with Beta(10, 10) the omitted-share bound
    refused at every one of 30 noise draws (it put the whole dropped share at the smallest
    total the other window allows, where g(N) ~ N^-19 is 1e9 times larger), so whether a
    posterior came out depended on the noise. Now every draw gives one, and it matches the
    brute-force double sum over the true counts."""
    x = np.r_[np.ones(50), np.zeros(50)].astype(bool)
    a = b = 10.0
    for seed in range(10):
        rel = dpb.release(
            BetaBernoulli(alpha=a, beta=b), x, mechanism="laplace", epsilon=1.0,
            neighbours="add-remove", rng=seed,
        )  # fmt: skip
        post = rel.noise_aware_posterior()
        assert post.omitted_mass < 1e-6
    # brute force at the last seed: N ~ flat, theta ~ Beta(a, b), (s, f) | N binomial
    s_obs, f_obs = rel.released["counts"]
    scale = rel.guarantee.details["scale"]
    s, f = np.meshgrid(np.arange(400.0), np.arange(400.0), indexing="ij")
    logw = (
        special.gammaln(s + f + 1) - special.gammaln(s + 1) - special.gammaln(f + 1)
        + special.betaln(a + s, b + f)
        - (np.abs(s - s_obs) + np.abs(f - f_obs)) / scale
    )  # fmt: skip
    w = np.exp(logw - logw.max())
    mean = float((w * (a + s) / (a + b + s + f)).sum() / w.sum())
    assert post.mean() == pytest.approx(mean, rel=1e-8)


@pytest.mark.parametrize(
    ("ones", "zeros", "mechanism", "eps", "delta", "prior"),
    [
        (40, 60, "laplace", 1.0, 0.0, (100.0, 100.0)),  # refused before (bound 2e31)
        (5, 3, "laplace", 1.0, 0.0, (100.0, 100.0)),  # accepted before, mean off by 1.5e-5
        (40, 60, "laplace", 1.0, 0.0, (300.0, 60.0)),
        (50, 50, "laplace", 1.0, 0.0, (1000.0, 1000.0)),
        (0, 100, "laplace", 1.0, 0.0, (30.0, 30.0)),
        (40, 60, "geometric", 0.5, 0.0, (100.0, 100.0)),
        (40, 60, "gaussian", 3.0, 1e-3, (100.0, 100.0)),
        (40, 60, "laplace", 1.0, 0.0, (1e4, 1e4)),  # windows tilted towards the total
    ],
)
def test_informative_priors_get_the_exact_posterior(ones, zeros, mechanism, eps, delta, prior):
    """With n private an informative Dir(alpha) pulls each count's window towards alpha
    noise scales, away from the posterior, so it was refused (Beta(100, 100), 100 records,
    eps 1: bound 2e31); and with a few records its bound, summed in doubles, lost shares
    far below 1e-308 that met a g(N) of e^300 at small totals (Beta(100, 100), 8 records:
    a bound of 2e-11 on a mean off by 1.5e-5). Windows bounded through the likelihoods
    and a bound summed in logs give the enumeration's posterior."""
    rel = _coin_release([1] * ones + [0] * zeros, mechanism, eps, delta, seed=1, alpha=prior[0],
                        beta=prior[1])  # fmt: skip
    post = rel.noise_aware_posterior()
    det = rel.guarantee.details
    scale = det["sigma"] if mechanism == "gaussian" else det["scale"]
    r = rel.released["counts"]
    mean, var, cdf, _ = _brute_coin(*prior, r, mechanism, scale, size=int(max(r) + 80 * scale + 60))
    assert post.omitted_mass < 1e-6
    tol = max(4 * post.omitted_mass, 1e-12)
    assert post.mean() == pytest.approx(mean, abs=tol)
    assert post.var() == pytest.approx(var, rel=1e-6, abs=tol)
    lo, hi = post.interval(0.9)
    assert (cdf(lo), cdf(hi)) == pytest.approx((0.05, 0.95), abs=1e-6)


def test_an_informative_dirichlet_under_a_prior_on_n_matches_the_enumeration() -> None:
    """Dir(40, 60, 30) under a Poisson(60) prior on n (a scipy distribution: its pmf is at
    most 1, so the likelihood bound applies), against the enumeration of every count."""
    al = np.array([40.0, 60.0, 30.0])
    x = np.array([0] * 12 + [1] * 20 + [2] * 8)
    rel = dpb.release(DirichletCategorical(alpha=list(al)), x, mechanism="laplace", epsilon=1.0,
                      neighbours="add-remove", rng=4)  # fmt: skip
    prior = stats.poisson(60)
    post = rel.noise_aware_posterior(n_prior=prior)
    assert post.omitted_mass < 1e-6
    scale = rel.guarantee.details["scale"]
    size = 70
    g = np.indices((size,) * 3).astype(float)
    n = g.sum(axis=0)
    lw = prior.logpmf(n) + special.gammaln(n + 1.0) - special.gammaln(n + al.sum())
    for j in range(3):
        lw = lw + special.gammaln(al[j] + g[j]) - special.gammaln(g[j] + 1.0)
        lw = lw + count_log_likelihood(rel.released["counts"][j], g[j], "laplace", scale, None)
    w = np.exp(lw - lw.max())
    w /= w.sum()
    for i in range(3):
        a = al[i] + g[i]
        exact = float(np.sum(w * a / (al.sum() + n)))
        assert post.marginal(i).mean() == pytest.approx(
            exact, abs=max(4 * post.omitted_mass, 1e-12)
        )


def test_the_tilt_applies_under_a_scipy_prior_on_n_and_non_integer_releases() -> None:
    """A scipy pmf is -inf between the integers: the tilt's slope is taken at a whole
    total (it was NaN for Laplace releases, and the tilt never tried)."""
    rel = _coin_release([1] * 40 + [0] * 60, "laplace", 1.0, seed=1, alpha=1e4, beta=1e4)
    prior = stats.poisson(100)
    post = rel.noise_aware_posterior(n_prior=prior)
    scale = rel.guarantee.details["scale"]
    r = rel.released["counts"]
    mean, _, _, _ = _brute_coin(1e4, 1e4, r, "laplace", scale, log_prior=prior.logpmf, size=200)
    assert post.omitted_mass < 1e-6
    assert post.mean() == pytest.approx(mean, abs=max(4 * post.omitted_mass, 1e-12))


def test_a_prior_too_strong_for_the_windows_is_refused_by_its_name() -> None:
    """Beta(1000, 1000) on an 8-record coin at eps 0.1: over the noise's width (scale 10)
    no window of doubles holds both the prior's pull and the data, tilted or not (the
    refusal names the prior, not the flat prior on n)."""
    rel = _coin_release([1] * 3 + [0] * 5, "laplace", 0.1, seed=1, alpha=1e3, beta=1e3)
    with pytest.raises(ValueError, match=r"the prior Beta\(1000, 1000\) pulls each count"):
        rel.noise_aware_posterior()
    # a prior on n that agrees with the release is not blamed for it
    with pytest.raises(ValueError, match=r"Beta\(1000, 1000\) pulls .* flat prior on n too"):
        rel.noise_aware_posterior(n_prior=(8, 3))
    assert rel.posterior.mean() > 0.0  # the naive posterior the message offers


@pytest.mark.parametrize("eps", [5e3, 1e10, 1e300])
def test_count_posteriors_with_a_private_n_at_a_huge_eps(eps):
    """A review: from eps ~ 3,700 (Laplace scale below 1/745) e^(-1/scale) underflowed to
    0 and log(0) raised "math domain error" after the charge."""
    rel = dpb.release(
        BetaBernoulli(), [1] * 30 + [0] * 70, mechanism="laplace", epsilon=eps,
        neighbours="add_remove", rng=2,
    )  # fmt: skip
    post = rel.noise_aware_posterior()
    assert post.mean() == pytest.approx(rel.posterior.mean(), rel=1e-4)
