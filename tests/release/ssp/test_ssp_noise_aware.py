"""Noise-aware posteriors of SSP releases: coverage against the naive posterior in small
simulations, MCMC diagnostics and warnings, the mixture's quantiles."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import dpbayes as dpb


def linear_model() -> dpb.models.BayesianLinearRegression:
    return dpb.models.BayesianLinearRegression(
        prior_precision=4.0, noise_variance=0.25, feature_bound=1.0, label_bound=2.0, clip="box"
    )


def covered(interval: np.ndarray, w: np.ndarray) -> int:
    return int(np.sum((interval[:, 0] <= w) & (w <= interval[:, 1])))


def test_linear_noise_aware_intervals_cover_where_the_naive_ones_do_not() -> None:
    """60 data sets (w from the prior N(0, I / 4), so that clipping y to [-2, 2] almost
    never happens and the exact posterior covers at 0.90; n = 200, eps = 0.5, Laplace):
    120 coefficient intervals at 90%. The noise-aware coverage must be within 0.90 +- 0.08
    (about three binomial sd at 120 intervals); the naive intervals cover at most 0.6
    (measured 0.11: they ignore noise of sd ~ 30 on X'X entries ~ 50)."""
    model = linear_model()
    g = np.random.default_rng(0)
    aware = naive = total = 0
    for i in range(60):
        w = g.normal(0, 0.5, 2)
        x = np.clip(g.normal(0, 0.5, (200, 2)), -1, 1)
        y = np.clip(x @ w + g.normal(0, 0.5, 200), -2, 2)
        rel = dpb.release(model, (x, y), mechanism="ssp", epsilon=0.5, rng=i)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            post = rel.noise_aware_posterior(rng=i, iterations=600, chains=2)
        aware += covered(post.interval(0.9), w)
        naive += covered(rel.posterior.interval(0.9), w)
        total += 2
    assert abs(aware / total - 0.90) <= 0.08
    assert naive / total <= 0.6


@pytest.mark.parametrize("delta", [0.0, 1e-5])
def test_logistic_noise_aware_intervals_cover_where_the_naive_ones_do_not(delta: float) -> None:
    """200 data sets, n = 500, eps = 0.3: 400 intervals at 90% (binomial sd 0.015)."""
    model = dpb.models.BayesianLogisticRegression(prior_precision=1.0, feature_bound=1.0)
    g = np.random.default_rng(1)
    aware = naive = total = 0
    for i in range(200):
        w = g.normal(0, 1, 2)
        x = np.clip(g.normal(0, 0.5, (500, 2)), -1, 1)
        y = (g.random(500) < 1 / (1 + np.exp(-x @ w))).astype(int)
        rel = dpb.release(model, (x, y), mechanism="ssp", epsilon=0.3, delta=delta, rng=i)
        aware += covered(rel.noise_aware_posterior().interval(0.9), w)
        naive += covered(rel.posterior.interval(0.9), w)
        total += 2
    assert abs(aware / total - 0.90) <= 0.05
    assert naive / total <= 0.75


def one_release(
    eps: float = 1.0, neighbours: str = "substitute", n: int = 300
) -> dpb.release.Release:
    g = np.random.default_rng(7)
    x = np.clip(g.normal(0, 0.5, (n, 3)), -1, 1)
    y = np.clip(x @ np.array([0.5, -0.3, 0.2]) + g.normal(0, 0.5, n), -2, 2)
    return dpb.release(
        linear_model(), (x, y), mechanism="ssp", epsilon=eps, neighbours=neighbours, rng=1
    )


def test_linear_posterior_shapes_diagnostics_and_mixture_quantiles() -> None:
    rel = one_release()
    post = rel.noise_aware_posterior(rng=3, iterations=1200)
    assert post.mean().shape == (3,) and post.interval(0.9).shape == (3, 2)
    assert post.cov().shape == (3, 3) and np.all(post.std() > 0)
    d = post.diagnostics
    assert d.chains == 4 and d.draws == 600 and len(d.names) == 4
    iv = post.interval(0.8)
    for i in range(3):
        assert post.cdf(iv[i, 0], i) == pytest.approx(0.1, abs=1e-8)
        assert post.cdf(iv[i, 1], i) == pytest.approx(0.9, abs=1e-8)
    # the noise-aware intervals are wider than the naive ones (the noise is accounted for)
    assert np.all(np.diff(iv, axis=1) > np.diff(rel.posterior.interval(0.8), axis=1))
    assert post.to_dict()["family"] == "ssp-noise-aware"
    assert "noise-aware posterior" in repr(rel)


def test_poor_mixing_warns_and_add_remove_needs_n() -> None:
    rel = one_release(eps=0.2)
    with pytest.warns(RuntimeWarning, match="mix poorly"):
        rel.noise_aware_posterior(rng=0, iterations=40)
    add = one_release(neighbours="add-remove")
    with pytest.raises(ValueError, match="n must be given"):
        add.noise_aware_posterior(rng=0, iterations=40)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        post = add.noise_aware_posterior(n=300, rng=0, iterations=100)
    assert np.all(np.isfinite(post.mean()))
    with pytest.raises(ValueError, match="iterations"):
        rel.noise_aware_posterior(iterations=3)


def test_logistic_noise_aware_widens_with_the_noise_and_converges() -> None:
    g = np.random.default_rng(2)
    x = np.clip(g.normal(0, 0.5, (400, 2)), -1, 1)
    y = (g.random(400) < 1 / (1 + np.exp(-x @ np.array([1.5, -1.0])))).astype(int)
    model = dpb.models.BayesianLogisticRegression(feature_bound=1.0)
    sds = []
    for eps in (0.1, 1.0, 100.0):
        rel = dpb.release(model, (x, y), mechanism="ssp", epsilon=eps, rng=0)
        post = rel.noise_aware_posterior()
        assert post.iterations < 50  # converged before the cap
        assert np.all(post.std() >= rel.posterior.std() - 1e-12)
        sds.append(float(np.mean(post.std())))
    assert sds[0] > sds[1] > sds[2]
    assert math.isfinite(sds[0])


def test_statistics_step_draws_the_exact_gaussian_conditional() -> None:
    """Step 1 of the linear Gibbs sampler (Matheron's rule with an Isserlis prior draw)
    against the conditional written out: precision K^-1 + Omega^-1, mean
    cov (K^-1 n vech C + Omega^-1 s~). 40000 draws, d = 2 (p = 6 statistics)."""
    from dpbayes.release.ssp.noise_aware import _sample_statistics

    m, n = 3, 50
    a = np.array([[1.0, 0.3, 0.5], [0.2, 0.8, -0.4], [0.1, 0.0, 0.7]])
    c = a @ a.T
    rows, cols = np.triu_indices(m)
    p = rows.size
    k = n * (
        c[rows[:, None], rows[None, :]] * c[cols[:, None], cols[None, :]]
        + c[rows[:, None], cols[None, :]] * c[cols[:, None], rows[None, :]]
    )
    omega = np.linspace(5.0, 200.0, p)
    s_obs = n * c[rows, cols] + np.linspace(-20.0, 20.0, p)
    cov = np.linalg.inv(np.linalg.inv(k) + np.diag(1 / omega))
    mean = cov @ (np.linalg.solve(k, n * c[rows, cols]) + s_obs / omega)
    draws = 40_000
    gen = np.random.default_rng(3)
    s = _sample_statistics(
        np.broadcast_to(c, (draws, m, m)),
        n,
        s_obs,
        np.broadcast_to(omega, (draws, p)),
        rows,
        cols,
        gen,
    )
    sd = np.sqrt(np.diag(cov))
    assert np.all(np.abs(s.mean(axis=0) - mean) / sd < 5 / math.sqrt(draws))
    emp = np.cov(s.T)
    assert np.all(np.abs(emp - cov) / np.outer(sd, sd) < 0.04)
