"""Noise-aware posteriors: brute-force integration, calibration, the recipient's CLI."""

from __future__ import annotations

import dataclasses
import json
import math
import subprocess
import sys

import numpy as np
import pytest
from scipy import integrate, special, stats

from dpbayes.experiments.calibration import coverage, pit_values
from dpbayes.models import Beta, BetaBernoulli, DirichletCategorical, NormalMean
from dpbayes.models.distributions import Dirichlet
from dpbayes.models.divergence import hellinger
from dpbayes.models.mixtures import BetaMixture, GridDistribution, mixture_from_dict
from dpbayes.models.statistics import CountStatistics, SumStatistics
from dpbayes.privacy import Neighbours
from dpbayes.release import Release, release
from dpbayes.release.base import noise_aware_posterior
from dpbayes.release.counts.mechanism import plan_counts, plan_normal_mean
from dpbayes.release.expmech.candidates import compositions
from dpbayes.release.expmech.mechanism import plan_expmech_coin, plan_expmech_dirichlet

Z = 3.891  # two-sided 1e-4 normal quantile
SUB = Neighbours.SUBSTITUTE


def _counts_release(model, counts, mech, eps, released, delta=0.0):
    n = int(sum(counts))
    plan = plan_counts(
        model,
        CountStatistics(counts=np.array(counts), n=n),
        epsilon=eps,
        delta=delta,
        neighbours=SUB,
        mechanism=mech,
    )
    rel = plan.run(__import__("dpbayes.privacy.noise", fromlist=["x"]).noise_source(0))
    return dataclasses.replace(rel, released={"counts": list(map(float, released))})


def _lik_brute(mech, r, k, n, rel):
    """P(released r | true count k) from the noise distribution by quadrature / summation."""
    if mech == "geometric":
        d = stats.dlaplace(1.0 / rel.guarantee.details["scale"])
        if r <= 0:
            return d.cdf(-k)
        if r >= n:
            return d.sf(n - k - 1)
        return d.pmf(round(r) - k)
    dist = (
        stats.laplace(scale=rel.guarantee.details["scale"])
        if mech == "laplace"
        else stats.norm(scale=rel.guarantee.details["sigma"])
    )
    if r <= 0:
        return integrate.quad(dist.pdf, -np.inf, -k)[0]
    if r >= n:
        return integrate.quad(dist.pdf, n - k, np.inf)[0]
    return dist.pdf(r - k)


@pytest.mark.parametrize("mech", ["laplace", "geometric", "gaussian"])
@pytest.mark.parametrize("released", [7.3, 0.0, 20.0])
def test_coin_matches_numerical_integration(mech, released):
    n, a, b, eps = 20, 2.0, 3.0, 0.3
    model = BetaBernoulli(alpha=a, beta=b)
    r = round(released) if mech == "geometric" else released
    rel = _counts_release(model, [8, 12], mech, eps, [r, n - r], delta=1e-3 * (mech == "gaussian"))
    post = rel.noise_aware_posterior()
    lik = np.array([_lik_brute(mech, r, k, n, rel) for k in range(n + 1)])

    def dens(t):  # prior x sum_k Bin(k; n, t) P(r | k): the definition, integrated over theta
        return stats.beta.pdf(t, a, b) * np.sum(stats.binom.pmf(np.arange(n + 1), n, t) * lik)

    norm = integrate.quad(dens, 0, 1, epsabs=0, epsrel=1e-11)[0]
    mean = integrate.quad(lambda t: t * dens(t), 0, 1, epsabs=0, epsrel=1e-11)[0] / norm
    cdf = integrate.quad(dens, 0, 0.3, epsabs=0, epsrel=1e-11)[0] / norm
    assert post.mean() == pytest.approx(mean, rel=1e-8)
    assert post.cdf(0.3) == pytest.approx(cdf, rel=1e-7)
    assert post.pdf(0.3) == pytest.approx(dens(0.3) / norm, rel=1e-7)
    lo, hi = post.interval(0.9)
    assert post.cdf(lo) == pytest.approx(0.05, abs=1e-10)
    assert post.cdf(hi) == pytest.approx(0.95, abs=1e-10)


@pytest.mark.parametrize("released", [[3.6, 0.0, 9.9], [12.0, 5.2, -0.0]])
def test_dirichlet_matches_enumeration(released):
    n, alpha, eps = 12, np.array([1.0, 2.0, 0.5]), 0.5
    model = DirichletCategorical(alpha=alpha)
    rel = _counts_release(model, [4, 4, 4], "laplace", eps, released)
    post = rel.noise_aware_posterior()
    comps = compositions(n, 3)
    prior = stats.dirichlet_multinomial.pmf(comps, alpha, n)
    per = [[_lik_brute("laplace", r, c, n, rel) for c in range(n + 1)] for r in released]
    lik = np.prod([np.asarray(per[j])[comps[:, j]] for j in range(3)], axis=0)
    w = prior * lik / np.sum(prior * lik)
    mean = w @ ((alpha + comps) / (alpha.sum() + n))
    np.testing.assert_allclose(post.mean(), mean, rtol=1e-10)
    for j in range(3):
        marg = np.bincount(comps[:, j], weights=w, minlength=n + 1)
        np.testing.assert_allclose(post.count_marginal(j), marg, rtol=1e-9, atol=1e-15)
    draws = post.rvs_counts(4000, random_state=3)  # exact joint draws
    assert np.all(draws.sum(axis=1) == n)
    exp_c = w @ comps
    sd = np.sqrt(w @ comps**2 - exp_c**2)
    assert np.all(np.abs(draws.mean(axis=0) - exp_c) <= Z * sd / math.sqrt(4000))


def _normal_release(mech, released, eps=0.5, n=25):
    model = NormalMean(prior_mean=1.0, prior_sd=2.0, noise_sd=1.5, lower=-30.0, upper=30.0)
    plan = plan_normal_mean(
        model,
        SumStatistics(n=n, total=30.0),
        epsilon=eps,
        delta=1e-4 * (mech == "gaussian"),
        neighbours=SUB,
        mechanism=mech,
    )
    rel = plan.run(__import__("dpbayes.privacy.noise", fromlist=["x"]).noise_source(0))
    return model, dataclasses.replace(rel, released={"posterior_mean": released})


@pytest.mark.parametrize("mech", ["laplace", "gaussian"])
@pytest.mark.parametrize("where", ["inside", "lower"])
def test_normal_mean_matches_double_integration(mech, where):
    model, rel = _normal_release(mech, 0.0)
    lo_t = rel.public["truncation"][0]
    y = 1.7 if where == "inside" else lo_t
    rel = dataclasses.replace(rel, released={"posterior_mean": y})
    n, v = rel.public["n"], rel.public["posterior_sd"] ** 2
    noise = (
        stats.laplace(scale=rel.guarantee.details["scale"])
        if mech == "laplace"
        else stats.norm(scale=rel.guarantee.details["sigma"])
    )
    spread = v * math.sqrt(n) / model.noise_sd
    post = rel.noise_aware_posterior()
    # brute force: the likelihood integrates over m_n | mu ~ N(M(mu), T^2) (clamp inactive)
    # on a fine grid with the kink of the Laplace density at m = y as a node; then the
    # posterior integrates over mu on another fine grid (Simpson's rule both times)
    half = 14 * spread + 14 * noise.std()
    m = np.linspace(y - half, y + half, 6001)
    g = noise.pdf(y - m) if where == "inside" else noise.cdf(y - m)

    def dens(mu):
        centre = v * (model.prior_mean / model.prior_sd**2 + n * mu / model.noise_sd**2)
        lik = integrate.simpson(stats.norm.pdf(m[None, :], centre[:, None], spread) * g, x=m)
        return stats.norm.pdf(mu, 1.0, 2.0) * lik

    lo = post.ppf(1e-10)
    mu = np.linspace(lo, post.ppf(1 - 1e-10), 801)
    norm = integrate.simpson(dens(mu), x=mu)
    mean = integrate.simpson(mu * dens(mu), x=mu) / norm
    below = np.linspace(lo, post.ppf(0.3), 801)
    cdf = integrate.simpson(dens(below), x=below) / norm
    scale = post.std()
    assert abs(post.mean() - mean) <= 1e-4 * scale
    assert cdf == pytest.approx(0.3, abs=1e-5)


@pytest.mark.parametrize("kind", ["global", "smooth", "local"])
def test_expmech_coin_matches_direct_selection_probabilities(kind):
    n, a, b, eps = 15, 1.0, 2.0, 1.0
    model = BetaBernoulli(alpha=a, beta=b)
    plan = plan_expmech_coin(
        model,
        CountStatistics(counts=np.array([5, 10]), n=n),
        epsilon=eps,
        delta=1e-3 if kind == "smooth" else 0.0,
        neighbours=SUB,
        allow_non_private=True,
        sensitivity=kind,
    )
    rel = plan.run(__import__("dpbayes.privacy.noise", fromlist=["x"]).noise_source(1))
    j = rel.released["counts"][0]
    post = rel.noise_aware_posterior()
    w = np.empty(n + 1)
    for k in range(n + 1):
        p = plan_expmech_coin(
            model,
            CountStatistics(counts=np.array([k, n - k]), n=n),
            epsilon=eps,
            delta=1e-3 if kind == "smooth" else 0.0,
            neighbours=SUB,
            allow_non_private=True,
            sensitivity=kind,
        )
        sens = p.guarantee.sensitivity if kind != "smooth" else _smooth_of(p, a, b, n, k)
        u = np.array(
            [-hellinger(Beta(a + k, b + n - k), Beta(a + c, b + n - c)) for c in range(n + 1)]
        )
        e = eps / 2 if kind == "smooth" else eps  # the smooth exponent is eps/2
        u = u * e / (2 * sens)
        w[k] = stats.betabinom.pmf(k, n, a, b) * np.exp(u[j] - special.logsumexp(u))
    w /= w.sum()
    ks = np.arange(n + 1)
    assert post.mean() == pytest.approx(np.sum(w * (a + ks) / (a + b + n)), rel=1e-9)


def _smooth_of(plan, a, b, n, k):
    from dpbayes.release.expmech.candidates import coin_smooth_sensitivity

    return coin_smooth_sensitivity(a, b, n, k, plan.guarantee.details["smooth_beta"])


def test_expmech_dirichlet_matches_direct_enumeration():
    n, alpha, eps = 4, np.array([1.0, 1.5, 2.0]), 2.0
    model = DirichletCategorical(alpha=alpha)
    plan = plan_expmech_dirichlet(
        model,
        CountStatistics(counts=np.array([2, 1, 1]), n=n),
        epsilon=eps,
        delta=0.0,
        neighbours=SUB,
    )
    rel = plan.run(__import__("dpbayes.privacy.noise", fromlist=["x"]).noise_source(2))
    chosen = np.array(rel.released["counts"])
    sens = rel.guarantee.sensitivity
    comps = compositions(n, 3)
    lw = []
    for c in comps:
        u = np.array([-hellinger(Dirichlet(alpha + c), Dirichlet(alpha + r)) for r in comps])
        u = u * eps / (2 * sens)
        i = int(np.flatnonzero(np.all(comps == chosen, axis=1))[0])
        lw.append(
            math.log(stats.dirichlet_multinomial.pmf(c, alpha, n)) + u[i] - special.logsumexp(u)
        )
    w = np.exp(np.array(lw) - max(lw))
    w /= w.sum()
    want = w @ ((alpha + comps) / (alpha.sum() + n))
    np.testing.assert_allclose(rel.noise_aware_posterior().mean(), want, rtol=1e-9)


def test_small_calibration_run_covers_nominally():
    reps = 300
    for mech, eps in (("laplace-coin", 0.1), ("laplace-die", 0.1), ("laplace-normal", 0.1)):
        u = pit_values(mech, eps, reps, n=60, seed=11)["noise-aware"]
        for level in (0.5, 0.9):
            tol = Z * math.sqrt(level * (1 - level) / reps)
            assert abs(coverage(u, level) - level) <= tol, (mech, level, coverage(u, level))
        assert stats.kstest(u, "uniform").pvalue > 1e-4


def test_exact_coin_at_eps_001_where_naive_fails():
    reps, level = 200, 0.9
    u = pit_values("laplace-coin", 0.01, reps, n=1000, seed=5)
    tol = Z * math.sqrt(level * (1 - level) / reps)
    assert abs(coverage(u["noise-aware"], level) - level) <= tol
    # the naive posterior ignores noise of sd 141 counts against a posterior sd of <= 16
    assert coverage(u["naive"], level) < 0.5


def test_release_method_round_trip_and_errors():
    x = np.r_[np.ones(30), np.zeros(70)]
    rel = release(BetaBernoulli(), x, mechanism="laplace", epsilon=0.5, rng=4)
    back = Release.from_dict(json.loads(rel.to_json()))
    assert back.noise_aware_posterior().mean() == pytest.approx(rel.noise_aware_posterior().mean())
    post = rel.noise_aware_posterior()
    again = mixture_from_dict(json.loads(json.dumps(post.to_dict())))
    assert again.interval(0.9) == pytest.approx(post.interval(0.9))
    # a prior on n is for releases whose n is private only
    with pytest.raises(ValueError, match="n_prior applies only"):
        noise_aware_posterior(rel, n_prior=(100, 10))
    with pytest.raises(ValueError, match="format"):
        Release.from_dict({"model": {}})
    with pytest.raises(TypeError, match="rel must be"):
        noise_aware_posterior("nope")


def test_mixture_of_one_is_the_component():
    one = BetaMixture(np.array([1.0]), np.array([3.0]), np.array([5.0]))
    ref = Beta(3.0, 5.0)
    assert one.interval(0.9) == pytest.approx(ref.interval(0.9), abs=1e-12)
    assert one.var() == pytest.approx(ref.var())
    x = np.linspace(-6, 8, 3001)
    grid = GridDistribution(x, stats.norm.logpdf(x, 1.0, 1.5))
    # trapezoid rule on a piecewise-linear density: O(h^2) = 2e-5 here
    assert grid.interval(0.95) == pytest.approx(stats.norm.interval(0.95, 1.0, 1.5), abs=1e-4)
    assert grid.std() == pytest.approx(1.5, rel=1e-4)  # the grid cuts the tails at 4.7 sd


def test_cli_posterior_end_to_end(tmp_path, capsys):
    from dpbayes.cli import main

    path = tmp_path / "rel.json"
    # record level: the count noise-aware posterior needs the public n (person-level
    # releases are add/remove one user, n private, and are refused by `posterior`)
    assert main(["release", "--epsilon", "0.05", "--seed", "3", "--record-level", "--json"]) == 0
    path.write_text(capsys.readouterr().out)
    res = subprocess.run(  # the recipient's side, as a separate process
        [sys.executable, "-m", "dpbayes.cli", "posterior", "--release", str(path), "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    got = json.loads(res.stdout)
    assert got["noise_aware_posterior"]["interval"]["level"] == 0.95
    lo, hi = got["noise_aware_posterior"]["interval"]["bounds"]
    nlo, nhi = got["naive_posterior"]["interval"]["bounds"]
    assert lo < nlo and hi > nhi  # the noise widens the interval
    assert main(["posterior", "--release", str(path)]) == 0
    text = capsys.readouterr().out
    assert "noise-aware posterior" in text and "95% credible interval" in text
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    assert main(["posterior", "--release", str(bad)]) == 2
    assert "format" in capsys.readouterr().err


@pytest.mark.parametrize("neighbours", ["substitute", "add-remove"])
def test_normal_mean_noise_aware_posterior_does_not_depend_on_a_flat_prior_sd(
    neighbours: str,
) -> None:
    """The grid started at the prior's +-12 sd and zoomed a fixed number of times: with a
    prior sd of 1e12 it stopped far from a posterior of sd 0.13 (substitute: mean 0, sd
    4.9 for 0.48, 0.13). It now zooms until the posterior spans the grid; a flat prior
    gives the same posterior at every scale. (At prior_sd 1e300 the release's plan raised
    OverflowError from prior_sd**2; it releases now.)"""
    import dpbayes as dpb

    x = np.random.default_rng(0).normal(0.4, 1.0, size=100).clip(-3, 3)
    posts = []
    for sd in (1e4, 1e12, 1e100, 1e150):
        model = NormalMean(prior_mean=0.0, prior_sd=sd, noise_sd=1.0, lower=-3.0, upper=3.0)
        rel = dpb.release(model, x, mechanism="laplace", epsilon=1.0, neighbours=neighbours, rng=1)
        post = rel.noise_aware_posterior()
        posts.append((post.mean(), post.std()))
    for mean, sd in posts[1:]:
        assert mean == pytest.approx(posts[0][0], rel=1e-3)
        assert sd == pytest.approx(posts[0][1], rel=1e-3)
    big = NormalMean(prior_mean=0.0, prior_sd=1e300, noise_sd=1.0, lower=-3.0, upper=3.0)
    assert math.isfinite(
        dpb.release(big, x, mechanism="laplace", epsilon=1.0, rng=1).released["posterior_mean"]
    )


@pytest.mark.parametrize("mechanism", ["laplace", "gaussian"])
def test_normal_mean_noise_aware_at_prior_sds_of_1e300(mechanism: str) -> None:
    """A review: prior_sd 1e300 raised OverflowError (prior_sd**2), and with Gaussian noise
    a grid over +-1.2e301 had -inf log-likelihood everywhere (z^2 overflowed). Both now
    give the flat-prior answer, the same as at prior_sd 1e150."""
    x = np.random.default_rng(0).normal(0.3, 1, 200)
    delta = 1e-6 if mechanism == "gaussian" else 0.0
    means = []
    for sd in (1e150, 1e300):
        model = NormalMean(noise_sd=1.0, lower=-3, upper=3, prior_mean=0.0, prior_sd=sd)
        rel = release(model, x, mechanism=mechanism, epsilon=1.0, delta=delta, rng=0)
        post = rel.noise_aware_posterior()
        means.append(post.mean())
        assert np.isfinite(post.std()) and post.std() > 0
    assert means[1] == pytest.approx(means[0], rel=1e-6, abs=1e-9)


def test_normal_mean_prior_below_the_doubles_resolution_is_refused_by_name() -> None:
    """prior_sd 1e-300 about 0.2: no grid of doubles resolves the prior (it raised "x must
    be strictly increasing"); about 0 the release's Laplace scale would be subnormal, and
    is refused before any noise like the Gaussian's."""
    x = np.random.default_rng(0).normal(0.3, 1, 200)
    model = NormalMean(noise_sd=1.0, lower=-3, upper=3, prior_mean=0.2, prior_sd=1e-300)
    rel = release(model, x, mechanism="laplace", epsilon=1.0, rng=0)
    with pytest.raises(ValueError, match="prior_sd = 1e-300 is below the doubles' resolution"):
        rel.noise_aware_posterior()
    at_zero = NormalMean(noise_sd=1.0, lower=-3, upper=3, prior_mean=0.0, prior_sd=1e-300)
    with pytest.raises(ValueError, match="below the smallest normal double"):
        release(at_zero, x, mechanism="laplace", epsilon=1.0, rng=0)
