"""Posterior sampling at its numerical edges (issue 14, defect 1).

The releases draw exactly from the trimmed / truncated posterior, so (Lemma 2) one draw
is eps-DP; the old samplers returned the trim bound as a point mass when the mass
underflowed and fell back to Gibbs sweeps. Each reproduction of the issue is a test here
(they fail on the old samplers); the edge grids check the samplers' laws against
references computed independently (mpmath quadrature, or a second exact sampler), that
no output collapses to a point mass, and the auditor on neighbouring data.
Case builders: :mod:`dpbayes.audit.sampling_edges`.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from dpbayes.audit.auditor import NeighbourPair, audit
from dpbayes.audit.sampling_edges import (
    SamplingEdgeCase,
    ball_edge_grid,
    bayes_net_edge_cases,
    beta_edge_grid,
    binary_reproduction,
    dirichlet_edge_grid,
    draws_vector,
    exact_one_node_epsilon,
    exact_regression_1d_epsilon,
    exact_trimmed_beta_cdf,
    exact_trimmed_beta_quantile_error,
    exact_truncated_normal_cdf,
    regression_edge_cases,
    regression_reproduction,
    ternary_reproduction,
)
from dpbayes.audit.targets import release_mechanism
from dpbayes.privacy import Neighbours, SimulatedNoise
from dpbayes.privacy.noise import SecureNoise
from dpbayes.release import release
from dpbayes.release.base import plan
from dpbayes.release.bayes_net._sampling_kernels import trimmed_dirichlet_box, truncated_beta_many
from dpbayes.release.bayes_net.sampling import plan_sampling, sampling_epsilon, trim_for_epsilon
from dpbayes.release.bayes_net.trimmed_dirichlet import FLAT_LEVELS, envelope, propose
from dpbayes.release.regression import mechanism as linear_regression
from dpbayes.release.regression.lattice_gaussian import LatticeGaussianBall

ALPHA = 1e-4  # level of every statistical test (fixed seeds)


def sampling_epsilon_of(model: object, trim: float) -> float:
    """The eps one draw costs at ``trim`` (a hair above, for rounding)."""
    return sampling_epsilon(model, trim) * (1 + 1e-12)


def draws(case: SamplingEdgeCase, data: object, size: int, seed: int) -> np.ndarray:
    """``size`` seeded releases of ``data``: their draws as rows."""
    planned = plan(case.model, data, mechanism="sampling", epsilon=case.epsilon, delta=0.0)
    src = SimulatedNoise(np.random.default_rng(seed))
    return np.array([draws_vector(planned.run(src)) for _ in range(size)])


def chi_square_against(sample: np.ndarray, cdf: object, bins: int = 12) -> float:
    """p-value of a chi-square test of ``sample`` against the exact cdf, with bin edges at
    quantiles of an independent first half (so the edges do not depend on what is tested)."""
    half = sample.size // 2
    edges = np.unique(np.quantile(sample[:half], np.linspace(0, 1, bins + 1)[1:-1]))
    probs = np.diff([0.0, *[cdf(e) for e in edges], 1.0])  # type: ignore[operator]
    counts = np.bincount(np.searchsorted(edges, sample[half:]), minlength=probs.size)
    return float(stats.chisquare(counts, probs * counts.sum()).pvalue)


# ----------------------------------------------------------------------------- issue 14


@pytest.mark.parametrize("reproduction", [binary_reproduction, ternary_reproduction])
def test_issue_reproduction_bayes_net_secure_path_is_no_point_mass(reproduction: object) -> None:
    case = reproduction()  # type: ignore[operator]
    for data in (case.data, case.data_prime):
        # one plan run 100 times on the secure source (a plan keeps its lattice)
        planned = plan(case.model, data, mechanism="sampling", epsilon=case.epsilon, delta=0.0)
        vals = [planned.run(SecureNoise()).released["draws"][0]["c"][1] for _ in range(100)]
        # the old secure path: one value, 100 times. The draws are lattice points now
        # (test_lattice_sampler.py): theta_1 takes about 94 distinct values in 100 draws
        # for the binary node, about 6 for the ternary one, whose lattice is coarser (723
        # steps; its most likely theta_1 has probability 0.57, so one value 100 times has
        # probability 1e-24)
        assert len(set(vals)) >= (80 if case.model.cardinality("c") == 2 else 2)


def test_issue_reproduction_binary_law_is_the_trimmed_posterior() -> None:
    case = binary_reproduction()
    p = trim_for_epsilon(case.model, case.epsilon)["c"]
    for data, ones in ((case.data, 1), (case.data_prime, 2)):
        theta1 = draws(case, data, 3000, seed=ones)[:, 1]
        assert np.all((theta1 >= p) & (theta1 <= 1 - p))
        # Beta(1 + ones, 1 + n - ones) restricted to [p, 1 - p], cdf by mpmath
        a, b = 1.0 + ones, 1.0 + 1570 - ones
        pval = chi_square_against(theta1, lambda x, a=a, b=b: exact_trimmed_beta_cdf(a, b, p, p, x))
        assert pval > ALPHA


def test_issue_reproduction_ternary_law_matches_the_marginal() -> None:
    """theta_1 of the 3-category reproduction against the marginal of the release's
    lattice law (computed from the lattice's weights: test_lattice_sampler.py checks
    those weights' selection and privacy)."""
    from dpbayes.release.bayes_net.lattice_sampler import SAMPLING_LATTICE_POINTS, LatticeRowSampler
    from dpbayes.release.bayes_net.sampling import map_grid

    case = ternary_reproduction()
    p = trim_for_epsilon(case.model, case.epsilon)["c"]
    theta = draws(case, case.data_prime, 2000, seed=3)
    assert np.all(theta >= p - 1e-12)
    lattice = map_grid(3, p, 1 << 30, points=SAMPLING_LATTICE_POINTS)
    w = LatticeRowSampler(1.0, np.array([[1568.0, 2.0, 0.0]]), lattice).weights(0)
    values, which = np.unique(lattice[:, 1], return_inverse=True)
    law = np.bincount(which, weights=w / w.sum())

    def cdf(x: float) -> float:
        return float(law[values <= x].sum())

    assert chi_square_against(theta[:, 1], cdf, bins=8) > ALPHA


@pytest.mark.slow
def test_issue_reproduction_regression_1d() -> None:
    case = regression_reproduction()
    for data in (case.data, case.data_prime):  # the secure path: no point mass
        vals = [
            release(case.model, data, mechanism="sampling", epsilon=1.0).released["draws"][0][0]
            for _ in range(100)
        ]
        assert len(set(vals)) == 100 and max(vals) <= 0.1
    s2 = linear_regression.sampling_noise_variance(case.model, 1.0)
    for seed, data in enumerate((case.data, case.data_prime)):
        x, y = data
        prec = 1.0 + float(x[:, 0] @ x[:, 0]) / s2
        mu, sd = float(x[:, 0] @ y) / s2 / prec, prec**-0.5
        w = draws(case, data, 3000, seed=seed)[:, 0]
        pval = chi_square_against(
            w, lambda t, mu=mu, sd=sd: exact_truncated_normal_cdf(mu, sd, -0.1, 0.1, t)
        )
        assert pval > ALPHA


def test_issue_reproductions_exact_privacy_loss_within_the_claim() -> None:
    """The exact privacy loss of the stated law (mpmath), next to the claim."""
    case = binary_reproduction()
    p = trim_for_epsilon(case.model, case.epsilon)["c"]
    assert exact_one_node_epsilon([1569, 1], (0, 1), 1.0, p) <= case.epsilon
    reg = regression_reproduction()
    s2 = linear_regression.sampling_noise_variance(reg.model, reg.epsilon)
    assert exact_regression_1d_epsilon(reg, s2) <= reg.epsilon


@pytest.mark.slow
@pytest.mark.parametrize(
    "reproduction", [binary_reproduction, ternary_reproduction, regression_reproduction]
)
def test_issue_reproductions_pass_the_auditor(reproduction: object) -> None:
    """The empirical lower bound on eps from neighbouring data (the old samplers give
    about log(samples), far above the claim)."""
    case = reproduction()  # type: ignore[operator]
    run = release_mechanism(case.model, "sampling", epsilon=case.epsilon)
    res = audit(
        run,
        [NeighbourPair(case.data, case.data_prime, case.name)],
        epsilon=case.epsilon,
        samples=6000,
        batch=True,
        rng=0,
        statistic=draws_vector,
    )
    assert res.passed and res.epsilon_lower_bound <= case.epsilon


@pytest.mark.parametrize(("alpha", "trim", "n"), [(1e-16, 1e-3, 5), (1e-8, 1e-9, 10**8)])
def test_tiny_priors_with_a_zero_cell_release_on_both_neighbours(alpha, trim, n) -> None:
    """A zero cell under a tiny Dirichlet prior piles the posterior against the trim (or,
    with no records in a row, at both ends): the trimmed mass was computed as 1 - (a tail
    near 1), which rounded to 0, and the draw refused after the noise for all ones and
    not for all ones but one (a free bit about the data). Both neighbours now release,
    and their draws follow the exact trimmed law (edge grid above, same kernels)."""
    from dpbayes.models import BayesNet, BayesNetStatistics

    node = BayesNet({"x": [0, 1]}, alpha=alpha)
    eps = sampling_epsilon_of(node, trim)
    for ones in (n, n - 1):
        stats = BayesNetStatistics(counts={"x": np.array([n - ones, ones])}, n=n)
        planned = plan_sampling(
            node, stats, epsilon=eps, delta=0.0, neighbours=Neighbours.SUBSTITUTE, trim=trim
        )
        src = SimulatedNoise(np.random.default_rng(ones))
        for _ in range(20):
            theta = draws_vector(planned.run(src))
            assert np.all(np.isfinite(theta)) and np.all(theta >= trim * (1 - 1e-12))
    row = BayesNet({"a": [0, 1], "x": [0, 1]}, [("a", "x")], alpha=alpha)
    empty_row = {"a": np.zeros(3, dtype=int), "x": np.array([1, 0, 1])}  # a = 1 never seen
    planned = plan(row, empty_row, mechanism="sampling", epsilon=2 * eps, trim=trim)
    assert np.all(np.isfinite(draws_vector(planned.run(SimulatedNoise(np.random.default_rng(0))))))


# ----------------------------------------------------------------------------- edge grids


@pytest.mark.slow
@pytest.mark.parametrize("part", range(4))
def test_truncated_beta_quantiles_match_mpmath_on_the_edge_grid(part: int) -> None:
    """The sampler is x(u), a deterministic function of its uniform, onto a grid of
    doubles: the exact law maps u to the grid point x exactly when F(x-) < u <= F(x)
    (mpmath). Within 1e-10 over the edge grid (the old sampler returned the bound, an
    error of 1; before the front factor and continued fraction of TOMS 708, counts near
    1e9 erred by up to 6e-10 here). The grid in four interleaved parts, so that the
    workers share the 45 s of quadrature (rotated, so that the four trims of one
    (a, b), the smallest the slowest, go to four parts)."""
    us = np.array([1e-9, 0.3, 0.7, 1 - 1e-9])
    worst = 0.0
    grid = beta_edge_grid()
    for a, b, p in (c for i, c in enumerate(grid) if (i + i // 4) % 4 == part):
        x, y = truncated_beta_many(np.full(4, a), np.full(4, b), np.full(4, p), np.full(4, p), us)
        assert np.all(np.isfinite(x)), (a, b, p)  # NaN: "no computable mass"
        for u, xi, yi in zip(us, x, y, strict=True):
            err = exact_trimmed_beta_quantile_error(a, b, p, p, u, xi, yi)
            assert err < 1e-10, (a, b, p, u, err)
            worst = max(worst, err)
    assert worst < 1e-10


@pytest.mark.slow
def test_bayes_net_edge_cases_draw_from_the_trimmed_simplex() -> None:
    for case in bayes_net_edge_cases():
        p = trim_for_epsilon(case.model, case.epsilon)["c"]
        for seed, data in enumerate((case.data, case.data_prime)):
            theta = draws(case, data, 100, seed=seed)
            assert np.all(theta >= p * (1 - 1e-12)), case.name
            np.testing.assert_allclose(theta.sum(axis=1), 1.0)
            # the draws are lattice points, which both neighbours can draw and whose law
            # is within eps of the neighbour's (test_lattice_sampler.py); at n = 5000 and
            # eps 100 one lattice point can carry nearly all the mass


@pytest.mark.slow
def test_regression_edge_cases_never_collapse_to_a_point_mass() -> None:
    for case in regression_edge_cases():
        for seed, data in enumerate((case.data, case.data_prime)):
            w = draws(case, data, 50, seed=seed)
            assert np.all(np.linalg.norm(w, axis=1) <= case.model.weight_bound * (1 + 1e-12))
            assert np.unique(w[:, 0]).size == 50, case.name


def _envelope_draws(a: np.ndarray, p: float, n: int, seed: int) -> tuple[np.ndarray, float]:
    env = envelope(a, p)
    src = SimulatedNoise(np.random.default_rng(seed))
    out, tried = [], 0
    while sum(len(o) for o in out) < n:
        theta, ok = propose(env, src.uniform((20000, 2 * a.size + 2)))
        out.append(theta[ok])
        tried += ok.size
    got = np.concatenate(out)
    return got[:n], got.shape[0] / tried


def _box_draws(a: np.ndarray, p: float, n: int, seed: int) -> np.ndarray:
    order = np.argsort(a, kind="stable")
    sa = np.ascontiguousarray(a[order])
    src = SimulatedNoise(np.random.default_rng(seed))
    out = []
    while len(out) < n:
        theta, hit = trimmed_dirichlet_box(sa, p, src.uniform((256, a.size - 1)))
        if hit >= 0:
            row = np.empty(a.size)
            row[order] = theta
            out.append(row)
    return np.array(out)


@pytest.mark.slow
def test_trimmed_dirichlet_envelope_acceptance_on_the_edge_grid() -> None:
    """The envelope sampler over the edge grid: accepted draws in the region, all
    distinct (no point mass), and an acceptance rate (the proof, §4, lists it) bounded
    away from 0, so the capped loop never refuses in practice."""
    rates = []
    for a, p in dirichlet_edge_grid():
        best = 0.0
        for level in FLAT_LEVELS:  # the row sampler runs one envelope per flat level
            theta, ok = propose(
                envelope(a, p, level),
                SimulatedNoise(np.random.default_rng(0)).uniform((20000, 2 * a.size + 2)),
            )
            best = max(best, ok.mean())
            assert np.all(theta[ok] >= p * (1 - 1e-12))
            np.testing.assert_allclose(theta[ok].sum(axis=1), 1.0)
            # no discretisation anywhere (a point mass of any size is a privacy leak):
            # the entries up to 1/2 are all distinct (an entry near 1 is 1 minus the
            # others, rounded to the doubles near 1)
            for j in range(a.size):
                col = theta[ok][:, j]
                small = col[col <= 0.5]
                assert np.unique(small).size == small.size, (a, p, j)
        rates.append(best)
    assert min(rates) > 1e-2


@pytest.mark.slow
def test_trimmed_dirichlet_two_exact_samplers_agree() -> None:
    """The envelope sampler against the stick-breaking box sampler (an independent exact
    method) on edge cases where both accept often enough: two-sample KS per entry."""
    cases = [
        (np.array([1.0 + 1568, 3.0, 1.0]), 0.2741),  # the ternary reproduction
        (np.array([1e-3, 2.001, 1e-3, 1e-3]), 0.01),  # zero counts, tiny prior
        (np.array([1e-3, 1e-3, 1e-3]), 1e-12),  # U-shaped, eps ~ 50
        (np.array([1001.0, 1.0, 1.0, 1.0, 1.0, 1.0]), 0.15),  # everything in one
        (np.array([300.0, 300.0, 2.0, 1.0]), 0.2),  # two balanced, two empty
        (np.array([1000.0, 1000.0, 1000.0]), 0.33),  # tiny region, concentrated
    ]
    for i, (a, p) in enumerate(cases):
        env, _ = _envelope_draws(a, p, 2000, seed=i)
        box = _box_draws(a, p, 2000, seed=100 + i)
        for j in range(a.size):
            assert stats.ks_2samp(env[:, j], box[:, j]).pvalue > ALPHA, (a, p, j)


def test_trimmed_dirichlet_matches_plain_rejection_where_it_works() -> None:
    """Against numpy's Dirichlet kept only inside the region (exact, slow in general)."""
    for i, (a, p) in enumerate(
        [(np.array([3.0, 5.0, 2.0]), 0.1), (np.array([0.5, 4.0, 1.5, 2.0]), 0.05)]
    ):
        env, _ = _envelope_draws(a, p, 3000, seed=i)
        raw = np.random.default_rng(50 + i).dirichlet(a, size=200000)
        ref = raw[np.all(raw >= p, axis=1)][:3000]
        for j in range(a.size):
            assert stats.ks_2samp(env[:, j], ref[:, j]).pvalue > ALPHA


def test_ball_sampler_accepts_on_the_edge_grid_and_agrees_with_plain_rejection() -> None:
    """The lattice sampler of the ball (release/regression/lattice_gaussian.py) on the edge
    grid: draws inside the ball, no point mass, an acceptance rate above 0.003 everywhere
    (the half-space envelope carries the posteriors 1e4 radii outside, where the shrink
    envelope alone accepted none in 20,000; at d = 20 it makes one proposal in six, so the
    rate per proposal there is about 0.006), and where plain rejection from the Gaussian
    works, the same law (KS)."""
    src = SimulatedNoise(np.random.default_rng(7))
    g = np.random.default_rng(8)
    for prec, lin, radius in ball_edge_grid():
        sampler = LatticeGaussianBall(prec, lin, radius)
        size = 300 if lin.size < 20 else 60
        w = np.array([sampler.draw(src) for _ in range(size)])
        assert np.all(np.linalg.norm(w, axis=1) <= radius * (1 + 1e-12))
        assert np.unique(w, axis=0).shape[0] == size
        assert size / sampler.proposals > 0.003, (prec[0, 0], radius, lin.size)
        mean = np.linalg.solve(prec, lin)
        ref = g.multivariate_normal(mean, np.linalg.inv(prec), size=200000)
        ref = ref[np.linalg.norm(ref, axis=1) <= radius]
        if ref.shape[0] >= 1000:
            for j in range(min(lin.size, 3)):
                assert stats.ks_2samp(w[:, j], ref[:1000, j]).pvalue > ALPHA


def test_regression_law_in_two_dimensions_far_outside() -> None:
    """d = 2, posterior far outside the ball: the release's draws against an independent
    exact reference, rejection from the uniform law on the disc."""
    case = [c for c in regression_edge_cases() if "d=2 lambda=1000 W=0.1 eps=1 " in c.name + " "]
    assert case
    c = case[0]
    x, y = c.data
    s2 = linear_regression.sampling_noise_variance(c.model, c.epsilon)
    prec = c.model.prior_precision * np.eye(2) + x.T @ x / s2
    lin = x.T @ y / s2
    got = draws(c, c.data, 1000, seed=11)
    # reference: uniform proposals on the disc, accepted with density / its maximum on
    # the disc (at the constrained mode, on the circle: found on a fine grid of angles,
    # then padded so that it is an upper bound)
    g = np.random.default_rng(12)
    wb = c.model.weight_bound
    t = np.linspace(-np.pi, np.pi, 200001)
    circ = wb * np.stack([np.cos(t), np.sin(t)], axis=1)
    log_max = float(np.max(-0.5 * np.einsum("ij,jk,ik->i", circ, prec, circ) + circ @ lin)) + 1e-3
    ref: list[np.ndarray] = []
    while sum(len(r) for r in ref) < 1000:
        r = wb * np.sqrt(g.random(400000))
        ang = 2 * np.pi * g.random(400000)
        w = np.stack([r * np.cos(ang), r * np.sin(ang)], axis=1)
        logd = -0.5 * np.einsum("ij,jk,ik->i", w, prec, w) + w @ lin
        assert logd.max() <= log_max
        ref.append(w[np.log(g.random(400000)) <= logd - log_max])
    ref_arr = np.concatenate(ref)[:1000]
    for j in range(2):
        assert stats.ks_2samp(got[:, j], ref_arr[:, j]).pvalue > ALPHA


def test_secure_source_uniforms() -> None:
    """The uniforms the samplers use: on the grid (2m + 1) 2^-53, never 0 or 1."""
    from dpbayes.privacy.noise import SecureNoise

    u = SecureNoise().uniform((1000, 3))
    assert u.shape == (1000, 3) and np.all((u > 0) & (u < 1))
    assert np.all(np.mod(u * 2.0**53, 2) == 1)
    assert stats.kstest(u.ravel(), "uniform").pvalue > ALPHA
    s = SimulatedNoise(np.random.default_rng(0)).uniform(5)
    np.testing.assert_array_equal(s, SimulatedNoise(np.random.default_rng(0)).uniform(5))


def test_refuses_a_trim_too_narrow_from_public_facts_only() -> None:
    case = binary_reproduction()
    with pytest.raises(ValueError, match="too narrow"):
        release(case.model, case.data, mechanism="sampling", epsilon=1e-7, rng=0)
    with pytest.raises(ValueError, match="too narrow"):
        release(case.model, case.data_prime, mechanism="sampling", epsilon=1e-7, rng=0)
    # the neighbours relation is irrelevant to the refusal
    with pytest.raises(ValueError, match="too narrow"):
        release(
            case.model,
            case.data,
            mechanism="sampling",
            epsilon=1e-7,
            rng=0,
            neighbours=Neighbours.ADD_REMOVE,
        )


def _mp_log_near_tail(a: float, b: float, y: float) -> float:
    """log I_x(a, b) at x = 1 - y (y exact) by Numerical Recipes' continued fraction in
    50 digits: the float algorithm's cancellation does not occur at that precision."""
    import mpmath as mp

    with mp.workdps(50):
        a_, b_ = mp.mpf(a), mp.mpf(b)
        x = 1 - mp.mpf(y)
        qab, qap, qam = a_ + b_, a_ + 1, a_ - 1
        c, d = mp.mpf(1), 1 / (1 - qab * x / qap)
        h = d
        for m in range(1, 100_000):
            aa = m * (b_ - m) * x / ((qam + 2 * m) * (a_ + 2 * m))
            d = 1 / (1 + aa * d)
            c = 1 + aa / c
            h *= d * c
            aa = -(a_ + m) * (qab + m) * x / ((a_ + 2 * m) * (qap + 2 * m))
            d = 1 / (1 + aa * d)
            c = 1 + aa / c
            h *= d * c
            if abs(d * c - 1) < mp.mpf(10) ** -40:
                break
        log_b = mp.loggamma(a_) + mp.loggamma(b_) - mp.loggamma(a_ + b_)
        return float(a_ * mp.log(x) + b_ * mp.log(mp.mpf(y)) - log_b - mp.log(a_) + mp.log(h))


@pytest.mark.parametrize(("a", "b"), [(4.1e7, 6.0), (7.9e9, 0.5), (1e9, 1e-16), (1e6, 0.3)])
def test_the_incomplete_beta_keeps_its_precision_near_one_for_a_huge_a(a: float, b: float) -> None:
    """Below the switch s = (a + 1) / (a + b + 2), near x = 1 with a large a, the tail
    I_x(a, b) is a continued fraction whose first term 1 - (a + b) x / (a + 1) cancels
    (Numerical Recipes' betacf: relative errors 4e-9 at Beta(4.1e7, 6), 2e-6 at
    Beta(7.9e9, 0.5)); TOMS 708's bfrac, given x as (1 - y, y) with y exact, keeps ~1e-14."""
    from dpbayes.release.bayes_net._normaliser_kernels import log_beta_tails

    y_switch = (b + 1.0) / (a + b + 2.0)
    for factor in (1.000001, 1.001, 1.1, 3.0, 30.0):
        y = y_switch * factor
        low, _ = log_beta_tails(a, b, 1.0 - y, y)
        exact = _mp_log_near_tail(a, b, y)
        if exact > -700:
            assert abs(math.expm1(low - exact)) < 1e-13, (a, b, y, low, exact)
