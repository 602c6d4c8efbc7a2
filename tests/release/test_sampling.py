"""Posterior sampling with a trimmed prior (paper 004 §4) and private MAP (Algorithm 3)."""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd
import pytest
from scipy import special, stats

from dpbayes.models.bayes_net import BayesNet, NaiveBayes
from dpbayes.privacy import ExponentialMechanism, Neighbours, SimulatedNoise
from dpbayes.release import release
from dpbayes.release.bayes_net.sampling import (
    lipschitz_constant,
    map_grid,
    plan_map,
    plan_sampling,
    sampling_epsilon,
    trim_for_epsilon,
    truncated_beta,
    truncated_dirichlet,
)

Z = float(stats.norm.isf(1e-4 / 2))


def model_and_data(n: int = 200) -> tuple[NaiveBayes, pd.DataFrame]:
    g = np.random.default_rng(0)
    y = g.integers(0, 2, n)
    df = pd.DataFrame(
        {
            "y": y,
            "x": (g.random(n) < np.where(y == 1, 0.9, 0.2)).astype(int),
            "z": g.choice(["u", "v", "w"], n),
        }
    )
    return NaiveBayes("y", [0, 1], {"x": [0, 1], "z": ["u", "v", "w"]}), df


def test_lemma2_epsilon_and_trim_roundtrip() -> None:
    nb, _ = model_and_data()
    trims = trim_for_epsilon(nb, 3.0)
    # each node gets an equal share of the Lipschitz budget: L = eps / 2 (substitute)
    assert lipschitz_constant(nb, trims) == pytest.approx(1.5)
    assert sampling_epsilon(nb, trims) == pytest.approx(3.0)
    assert sampling_epsilon(nb, trims, neighbours="add-remove") == pytest.approx(1.5)
    t2 = trim_for_epsilon(nb, 3.0, draws=3)
    assert sampling_epsilon(nb, t2, draws=3) == pytest.approx(3.0)
    # binary node: p = 1 / (1 + e^{L_i}); ternary: 1 / (2 + e^{L_i})
    assert trims["x"] == pytest.approx(1 / (1 + math.exp(0.5)))
    assert trims["z"] == pytest.approx(1 / (2 + math.exp(0.5)))
    with pytest.raises(ValueError, match="trim"):
        lipschitz_constant(nb, {"y": 0.6, "x": 0.1, "z": 0.1})


def test_truncated_beta_matches_the_truncated_distribution() -> None:
    g = np.random.default_rng(1)
    a, b, lo, hi = 3.0, 40.0, 0.05, 0.3
    x = truncated_beta(np.full(3000, a), np.full(3000, b), lo, hi, g)
    assert x.min() >= lo and x.max() <= hi
    dist = stats.beta(a, b)
    mass = dist.cdf(hi) - dist.cdf(lo)
    res = stats.kstest(x, lambda t: (dist.cdf(np.clip(t, lo, hi)) - dist.cdf(lo)) / mass)
    assert res.pvalue > 1e-4
    # mass far above hi (cdf side) and far below lo (survival side) both stay exact
    y = truncated_beta(np.full(3000, 500.0), np.full(3000, 2.0), 0.1, 0.9, g)
    d2 = stats.beta(500.0, 2.0)
    m2 = d2.cdf(0.9) - d2.cdf(0.1)
    res2 = stats.kstest(y, lambda t: (d2.cdf(np.clip(t, 0.1, 0.9)) - d2.cdf(0.1)) / m2)
    assert res2.pvalue > 1e-4 and y.max() <= 0.9
    w = truncated_beta(np.full(3000, 2.0), np.full(3000, 500.0), 0.1, 0.9, g)
    d3 = stats.beta(2.0, 500.0)
    m3 = d3.sf(0.1) - d3.sf(0.9)
    res3 = stats.kstest(w, lambda t: (d3.sf(0.1) - d3.sf(np.clip(t, 0.1, 0.9))) / m3)
    assert res3.pvalue > 1e-4 and w.min() >= 0.1


def test_truncated_beta_far_outside_is_exact_not_the_bound() -> None:
    """Beta(1e5, 1) on [0.1, 0.2]: the mass e^-160944 underflows a double, but the law
    (x / 0.2)^1e5 on the interval is still drawn exactly (issue 14: the bound itself was
    returned every time)."""
    g = np.random.default_rng(0)
    x = truncated_beta(np.full(3000, 1e5), np.full(3000, 1.0), 0.1, 0.2, g)
    assert np.all((x >= 0.1) & (x <= 0.2)) and np.unique(x).size == x.size
    # exact cdf on the interval: (x / 0.2)^1e5 (the mass below 0.1 is e^-69315 of it)
    res = stats.kstest(x, lambda t: np.exp(1e5 * np.log(np.clip(t, 0.1, 0.2) / 0.2)))
    assert res.pvalue > 1e-4


def test_truncated_dirichlet_constraints_and_mean() -> None:
    g = np.random.default_rng(2)
    alpha = np.array([4.0, 6.0, 10.0])
    draws = np.array([truncated_dirichlet(alpha, 1e-6, g) for _ in range(1500)])
    np.testing.assert_allclose(draws.sum(axis=1), 1.0)
    mean, var = alpha / alpha.sum(), stats.dirichlet(alpha).var()
    assert np.all(np.abs(draws.mean(axis=0) - mean) <= Z * np.sqrt(var / 1500))
    # plain rejection would fail here (mass below the trim); the exact sampler does not
    hard = truncated_dirichlet(np.array([1.0, 1.0, 5000.0]), 0.1, g)
    assert hard.min() >= 0.1 - 1e-12 and hard.sum() == pytest.approx(1.0)
    assert hard[2] > 0.75


def test_sampling_release_guarantee_and_support() -> None:
    nb, df = model_and_data()
    r = release(nb, df, mechanism="sampling", epsilon=2.0, rng=0)
    assert r.guarantee.epsilon == pytest.approx(2.0)
    assert r.guarantee.sensitivity_norm == "lipschitz"
    assert "public lattice" in r.guarantee.details["sampler"]
    assert set(r.guarantee.details["lattice_points"]) == set(nb.nodes)
    trims = r.public["trims"]
    draw = r.released["draws"][0]
    for v in nb.nodes:
        t = np.asarray(draw[v])
        assert t.min() >= trims[v] - 1e-12
        np.testing.assert_allclose(t.sum(axis=-1), 1.0)
    r3 = release(nb, df, mechanism="sampling", epsilon=2.0, rng=0, draws=3)
    assert r3.guarantee.epsilon == pytest.approx(2.0)
    assert len(r3.guarantee.details["parts"]) == 3
    assert r3.guarantee.details["parts"][0]["epsilon"] == pytest.approx(2.0 / 3)
    rs = release(nb, df, mechanism="sampling", epsilon=2.0)  # secure path
    assert not rs.simulation


def test_sampling_trim_option() -> None:
    nb, df = model_and_data()
    eps = sampling_epsilon(nb, 0.3)
    r = release(nb, df, mechanism="sampling", epsilon=eps, rng=0, trim=0.3)
    assert r.guarantee.epsilon == pytest.approx(eps)
    with pytest.raises(ValueError, match="more than epsilon"):
        release(nb, df, mechanism="sampling", epsilon=eps / 2, rng=0, trim=0.3)


def test_trimmed_posterior_one_binary_node_distribution() -> None:
    """A one-node network: the released theta is Beta(1+k, 1+n-k) truncated to [p, 1-p]."""
    bn = BayesNet({"c": [0, 1]})
    df = pd.DataFrame({"c": [1] * 8 + [0] * 2})
    eps = 1.0
    p = trim_for_epsilon(bn, eps)["c"]
    plan = plan_sampling(
        bn, bn.statistics(df), epsilon=eps, delta=0.0, neighbours=Neighbours.SUBSTITUTE
    )
    src = SimulatedNoise(np.random.default_rng(3))
    theta = np.array([plan.run(src).released["draws"][0]["c"][1] for _ in range(800)])
    dist = stats.beta(1 + 8, 1 + 2)
    mass = dist.cdf(1 - p) - dist.cdf(p)
    res = stats.kstest(theta, lambda t: (dist.cdf(np.clip(t, p, 1 - p)) - dist.cdf(p)) / mass)
    assert res.pvalue > 1e-4


def test_map_selection_probabilities() -> None:
    """Algorithm 3 on one binary node: frequencies match the exponential mechanism's."""
    bn = BayesNet({"c": [0, 1]})
    df = pd.DataFrame({"c": [1] * 6 + [0] * 2})
    trim, steps, eps = 0.1, 4, 1.0
    grid = map_grid(2, trim, steps)
    lip = lipschitz_constant(bn, {"c": trim})
    scores = np.log(grid) @ np.array([2.0, 6.0])  # (alpha - 1) + counts, alpha = 1
    probs = ExponentialMechanism(epsilon=eps, sensitivity=lip).probabilities(scores)
    plan = plan_map(
        bn,
        bn.statistics(df),
        epsilon=eps,
        delta=0.0,
        neighbours=Neighbours.SUBSTITUTE,
        trim=trim,
        grid=steps,
    )
    src = SimulatedNoise(np.random.default_rng(4))
    reps = 2000
    picks = np.zeros(len(grid))
    for _ in range(reps):
        r = plan.run(src)
        theta = np.asarray(r.released["cpts"]["c"])
        picks[int(np.argmin(np.abs(grid[:, 1] - theta[1])))] += 1
    freq = picks / reps
    assert np.all(np.abs(freq - probs) <= Z * np.sqrt(probs * (1 - probs) / reps) + 1e-12)
    assert r.guarantee.sensitivity == pytest.approx(lip)


def test_map_high_epsilon_finds_the_grid_mode() -> None:
    nb, df = model_and_data()
    r = release(nb, df, mechanism="map", epsilon=1e6, rng=0, trim=0.01, grid=50)
    post = nb.exact_posterior(df)
    mode = {v: (a - 1) / (a - 1).sum(axis=-1, keepdims=True) for v, a in post.alphas.items()}
    for v in nb.nodes:
        assert np.max(np.abs(np.asarray(r.released["cpts"][v]) - mode[v])) <= 0.98 / 50 / 2 + 1e-9


def test_grid_is_on_the_trimmed_simplex() -> None:
    g3 = map_grid(3, 0.05, 10)
    assert len(g3) == special.comb(12, 2, exact=True)
    np.testing.assert_allclose(g3.sum(axis=1), 1.0)
    assert g3.min() == pytest.approx(0.05) and g3.max() == pytest.approx(0.9)


def test_an_epsilon_out_of_the_samplers_range_is_refused_naming_it() -> None:
    """eps so large that the trim e^-(eps per node) underflows (a bare OverflowError at
    eps 3000) or so small that the trimmed region is too narrow (an error about "trim
    for 'a'") is refused in one line naming epsilon, before anything is drawn, alike
    for neighbouring data sets."""
    bn = BayesNet({"a": [0, 1], "b": [0, 1, 2]}, [("a", "b")])
    x = pd.DataFrame({"a": [0] * 20, "b": [0] * 20})
    xp = pd.DataFrame({"a": [0] * 19 + [1], "b": [0] * 19 + [2]})
    for eps, words in ((3000.0, "too large"), (1e20, "too large"), (1e-300, "too small")):
        for neighbours in ("substitute", "add-remove"):
            messages = set()
            for data in (x, xp):
                match = re.escape(f"epsilon = {eps:g} is {words}")
                with pytest.raises(ValueError, match=match) as info:
                    release(bn, data, mechanism="sampling", epsilon=eps, neighbours=neighbours)
                messages.add(str(info.value))
            assert len(messages) == 1 and "\n" not in messages.pop()
    with pytest.raises(ValueError, match="epsilon = 3000 is too large"):
        trim_for_epsilon(bn, 3000.0)
    # the largest per-node budget still runs: 700 x 2 nodes x 2 (substitute)
    trims = trim_for_epsilon(bn, 2800.0)
    assert all(0.0 < p < 1e-300 for p in trims.values())
    assert sampling_epsilon(bn, trims) <= 2800.0


def test_map_grid_of_many_categories_or_a_huge_grid_is_built_or_refused_in_one_line() -> None:
    """The grid's resolution comes by bisection and its points iteratively: 1,200
    categories gave a RecursionError, more than 20,000 a 0/0 NaN, grid=10**12 counted
    down one step at a time. A node too large for any grid is refused naming it."""
    g = map_grid(1200, 1e-6, 100)  # the 1,200 vertices of the trimmed simplex
    assert g.shape == (1200, 1200)
    np.testing.assert_allclose(g.sum(axis=1), 1.0)
    assert np.all(np.isfinite(g))
    assert map_grid(2, 0.01, 10**12).shape == (20000, 2)  # the finest grid that fits
    np.testing.assert_array_equal(map_grid(3, 0.01, 10**12), map_grid(3, 0.01, 198))
    r = release(
        BayesNet({"a": list(range(1200))}),
        pd.DataFrame({"a": [0, 1]}),
        mechanism="map",
        epsilon=1.0,
        trim=1e-6,
        rng=0,
    )
    assert np.all(np.isfinite(r.released["cpts"]["a"]))
    for k in (5000, 20001):
        bn = BayesNet({"b": [0, 1], "a": list(range(k))}, [("b", "a")])
        with pytest.raises(ValueError, match=f"node 'a': {k} categories are too many") as info:
            release(
                bn,
                pd.DataFrame({"a": [0], "b": [1]}),
                mechanism="map",
                epsilon=1.0,
                trim=1e-6,
                rng=0,
            )
        assert "\n" not in str(info.value)


def test_map_refuses_a_prior_whose_utilities_overflow_naming_alpha() -> None:
    for alpha in (1.7e308, 1e260, 1e16):
        bn = BayesNet({"a": [0, 1]}, alpha=alpha)
        for ones in (0, 1):
            data = pd.DataFrame({"a": [1] * ones + [0] * (3 - ones)})
            match = re.escape(f"the prior alpha = {alpha:g} is too large")
            with pytest.raises(ValueError, match=match):
                release(bn, data, mechanism="map", epsilon=1.0, rng=0)
    r = release(
        BayesNet({"a": [0, 1]}, alpha=1e8),
        pd.DataFrame({"a": [0, 1]}),
        mechanism="map",
        epsilon=1.0,
        rng=0,
    )
    assert np.all(np.isfinite(r.released["cpts"]["a"]))


def test_map_utilities_keep_one_records_change_at_the_largest_prior() -> None:
    """At the largest prior the plan takes (alpha k |log trim| = MAX_MAP_SCORE) the
    computed utilities of neighbouring counts differ by the exact per-record change
    (count x log g) to 1e-6 of L; at alpha = 1e16 (now refused) the rounding of alpha + c
    doubled or erased it."""
    from dpbayes.release.bayes_net.sampling import MAX_MAP_SCORE, map_grid

    trim, k = 0.01, 2
    logg = np.log(map_grid(k, trim, 100))
    lip = abs(math.log(trim))
    worst = {}
    for alpha in (MAX_MAP_SCORE / k / lip, 1e16):
        err = 0.0
        for c in range(0, 40):
            r0, r1 = alpha + np.array([c, 40.0 - c]), alpha + np.array([c + 1, 39.0 - c])
            change = logg @ (r1 - 1.0) - logg @ (r0 - 1.0)
            err = max(err, float(np.max(np.abs(change - (logg[:, 0] - logg[:, 1])))))
        worst[alpha] = err / lip
    low, high = sorted(worst)
    assert worst[low] < 1e-6 < 0.1 < worst[high]
