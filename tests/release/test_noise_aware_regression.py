"""Noise-aware posterior of linear-regression sampling releases: brute force, diagnostics."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from dpbayes.models.linear_regression import BayesianLinearRegression
from dpbayes.release import release


def _release(n: int, d: int, eps: float, seed: int, draws: int = 1):
    model = BayesianLinearRegression(
        prior_precision=1.0,
        noise_variance=0.25,
        feature_bound=1.0,
        label_bound=3.0,
        weight_bound=4.0,
    )
    gen = np.random.default_rng(seed)
    x = gen.normal(size=(n, d)) / math.sqrt(d)
    y = x @ gen.normal(size=d) + 0.5 * gen.normal(size=n)
    return model, release(model, (x, y), mechanism="sampling", epsilon=eps, rng=seed, draws=draws)


def _brute_moments(model, rel) -> tuple[float, float]:
    """Mean and sd of w | w~ (d = 1) by quadrature over w, T = X'X and u = X'y."""
    n = int(rel.public["n"])
    s2 = float(rel.public["noise_variance"])
    wt = np.asarray(rel.released["draws"], dtype=float)[:, 0]
    lam, sig2, sx2 = model.prior_precision, model.noise_variance, model.feature_bound**2
    prior_t = stats.gamma(n / 2, scale=2 * sx2)  # Wishart(n, sx2) in one dimension
    tq = np.linspace(prior_t.ppf(1e-7), prior_t.ppf(1 - 1e-7), 120)
    w = np.linspace(-4.0, 4.0, 201)
    z = np.linspace(-8.0, 8.0, 81)
    W, T, Zz = np.meshgrid(w, tq, z, indexing="ij")
    u = T * W + Zz * np.sqrt(sig2 * T)  # u | w, T ~ N(T w, sigma^2 T), written as z
    var_t = 1.0 / (lam + T / s2)
    mu = var_t * u / s2
    loglik = sum(-0.5 * (v - mu) ** 2 / var_t - 0.5 * np.log(var_t) for v in wt)
    inner = np.trapezoid(np.exp(loglik - 0.5 * Zz**2), z, axis=2)
    over_t = np.trapezoid(inner * prior_t.pdf(tq)[None, :], tq, axis=1)
    dens = over_t * stats.norm.pdf(w, 0, 1 / math.sqrt(lam))
    dens /= np.trapezoid(dens, w)
    m1 = float(np.trapezoid(w * dens, w))
    return m1, math.sqrt(float(np.trapezoid((w - m1) ** 2 * dens, w)))


def test_mcmc_matches_brute_force_integration():
    model, rel = _release(n=40, d=1, eps=5.0, seed=2, draws=2)
    post = rel.noise_aware_posterior(rng=4, iterations=1200)
    m1, sd = _brute_moments(model, rel)
    diag = post.diagnostics
    assert diag.chains == 4 and {"w[0]", "log det X'X"} <= set(diag.names)
    assert abs(post.mean()[0] - m1) <= 4.5 * sd / math.sqrt(diag.min_ess) + 1e-3
    assert post.std()[0] == pytest.approx(sd, rel=0.1)
    lo, hi = post.interval(0.9)[0]
    assert lo < m1 < hi and post.ball_mass > 0.99


def test_short_chain_warns_and_n_is_required():
    model, rel = _release(n=60, d=2, eps=2.0, seed=3)
    with pytest.warns(RuntimeWarning, match="mix poorly"):
        rel.noise_aware_posterior(rng=1, iterations=40)
    rel_ar = release(
        model,
        (np.zeros((5, 2)), np.zeros(5)),
        mechanism="sampling",
        epsilon=1.0,
        rng=0,
        neighbours="add-remove",
    )
    with pytest.raises(ValueError, match="n must be given"):
        rel_ar.noise_aware_posterior()
