"""Simulation-based calibration helpers: prior draws of P and one replicate."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy import stats

from dpbayes.nonparametric import ConvergenceWarning, DPMixture, LocalLaplace
from dpbayes.nonparametric.base import draw_base
from dpbayes.nonparametric.calibration import draw_prior_p, rank_uniformity, sbc_replicate
from dpbayes.nonparametric.sampler import STICK_TAIL, stick_breaking


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


@pytest.mark.parametrize(("alpha", "p"), [(1.0, 0.3), (10.0, 0.05)])
def test_stick_breaking_part_of_a_draw_of_p_follows_the_dp(alpha, p):
    """The DP(alpha, P0) part of a posterior draw of P: its mass below t is
    Beta(alpha p, alpha (1 - p)), p = P0(t) (Ferguson 1973), rows sum to 1 and each row's
    remainder is below STICK_TAIL. The former fixed truncation at 30 sticks (the last one
    taking the rest) fails this at alpha = 10: it puts 6% of the mass on one atom on
    average and leaves no mass below t in 21% of the draws (p = 0.05)."""
    g = np.random.default_rng(4)
    mu, sigma, r, size = 0.0, 0.5, 1.0, 4000
    t = stats.truncnorm(-r / sigma, r / sigma, loc=mu, scale=sigma).ppf(p)
    exact = stats.beta(alpha * p, alpha * (1 - p)).cdf

    def mass_below(sticks):
        w, lengths = stick_breaking(np.full(size, alpha), g, sticks)
        np.testing.assert_allclose(w.sum(axis=1), 1.0, atol=1e-12)
        atoms = draw_base(np.full(size, mu), np.full(size, sigma), r, g, w.shape[1])
        return np.sum(w * (atoms <= t), axis=1), w, lengths

    mass, w, lengths = mass_below(None)
    before_last = np.cumsum(w, axis=1)[np.arange(size), np.maximum(lengths - 2, 0)]
    assert np.all((1.0 - before_last >= STICK_TAIL * 0.999) | (lengths == 1))
    assert np.all(w[np.arange(w.shape[1])[None, :] >= lengths[:, None]] == 0.0)
    assert stats.kstest(mass, exact).pvalue > 1e-4
    if alpha == 10.0:
        old, _, _ = mass_below(30)
        assert stats.kstest(old, exact).pvalue < 1e-4
        assert np.mean(old == 0.0) > 0.15 and np.mean(mass == 0.0) < 0.01


def _correlated_uniform_ranks(g, reps, points, thin, widen=1.0):
    """Ranks of a truth among `thin` posterior draws at `points` check points per replicate,
    strongly correlated within a replicate (as for the CDF at nearby t); uniform on
    0..thin when ``widen`` = 1, hump-shaped when the posterior is ``widen`` times too wide."""
    z = 0.95 * g.standard_normal((reps, 1)) + np.sqrt(1 - 0.95**2) * g.standard_normal(
        (reps, points)
    )
    return np.minimum(np.floor(stats.norm.cdf(z / widen) * (thin + 1)), thin).astype(int)


def test_rank_uniformity_holds_its_level_with_correlated_ranks():
    """200 SBC studies of 100 replicates x 19 dependent but uniform ranks: the
    replicate-level test rejects at 5% about 5% of the time (bound: 0.05 + 4 binomial
    standard errors), the chi-square on the pooled ranks (what the experiment used before)
    in most studies; a posterior 1.3 times too wide is caught in most studies."""
    g = np.random.default_rng(7)
    studies, reps, thin = 200, 100, 99
    pooled, robust, wide = [], [], []
    for _ in range(studies):
        ranks = _correlated_uniform_ranks(g, reps, 19, thin)
        counts = np.bincount(ranks.ravel() * 10 // (thin + 1), minlength=10)
        pooled.append(stats.chisquare(counts).pvalue)
        robust.append(rank_uniformity(ranks, thin)["p_value"])
        wide.append(rank_uniformity(_correlated_uniform_ranks(g, reps, 19, thin, 1.3), thin))
    bound = 0.05 + 4 * np.sqrt(0.05 * 0.95 / studies)
    assert np.mean(np.array(robust) < 0.05) <= bound
    assert np.mean(np.array(pooled) < 0.05) > 0.5
    hump = [(w["mid_half"] - 0.5) / w["mid_half_se"] > 2 or w["p_value"] < 0.05 for w in wide]
    assert np.mean(hump) > 0.8


@pytest.mark.slow
def test_sbc_of_the_sampler_ranks_and_coverage():
    """Simulation-based calibration of the default sampler (hyperpriors on alpha and the
    base, label-integrated moves), Laplace eps = 2, n = 50, 100 replicates of 9 check
    points: ranks uniform at the replicate level (p > 1e-3), the middle-half fraction within
    4 standard errors of 0.5, simultaneous coverage and the randomized pointwise coverage
    within 4 standard errors of 0.95. Power, measured with these settings: fitting with
    eps stated 1.6 times too large (a posterior too narrow) gives p = 7e-7, simultaneous
    coverage 0.78 and pointwise 0.83; stated 0.6 times (too wide), middle half 0.54.
    About a minute."""
    model = DPMixture(mechanism=LocalLaplace(epsilon=2.0, r=1.0), atom_moves=3, pair_moves=2)
    grid = np.linspace(-0.8, 0.8, 9)
    fit_kw = {"draws": 100, "warmup": 60, "chains": 1, "progress": False, "diagnostics": False}
    reps = 100
    res = [sbc_replicate(model, 50, grid, 1000 + k, fit_kw=fit_kw, thin=19) for k in range(reps)]
    test = rank_uniformity(np.array([r.rank for r in res]), 19, bins=5)
    assert test["p_value"] > 1e-3, test
    assert abs(test["mid_half"] - 0.5) < 4 * test["mid_half_se"], test
    sim = np.mean([r.simultaneous for r in res])
    assert abs(sim - 0.95) < 4 * np.sqrt(0.95 * 0.05 / reps), sim
    per_rep = np.array([np.mean(r.pointwise_randomized) for r in res])
    se = per_rep.std(ddof=1) / np.sqrt(reps)
    assert abs(per_rep.mean() - 0.95) < 4 * se, (per_rep.mean(), se)
    closed = np.mean([np.mean(r.pointwise) for r in res])  # ties at 0 or 1 count as covered
    assert closed >= per_rep.mean() - 1e-12
