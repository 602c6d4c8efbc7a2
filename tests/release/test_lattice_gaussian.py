"""Exact discrete samplers (privacy/discrete_gaussian.py) and the regression lattice
posterior draw built on them (release/regression/lattice_gaussian.py).

Their laws are finite or discrete and known in closed form, so each is checked against its
exact probabilities (chi-square, fixed seeds); the lattice sampler on a coarse lattice
(spacing 1/4), where every point's probability is computed independently of the sampler,
including the normalisers of the one-dimensional discrete Gaussians.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from dpbayes.privacy.discrete_gaussian import (
    bernoulli_exp,
    discrete_gaussian,
    discrete_gaussian_below,
    discrete_laplace,
    geometric_exp,
)
from dpbayes.privacy.noise import SimulatedNoise
from dpbayes.release.regression.lattice_gaussian import LatticeGaussianBall, _unimodular

ALPHA = 1e-4


def source(seed: int) -> SimulatedNoise:
    return SimulatedNoise(np.random.default_rng(seed))


def chi_square(values: list[int] | np.ndarray, support: np.ndarray, probs: np.ndarray) -> float:
    """p-value of the counts of ``values`` on ``support`` against ``probs`` (cells with an
    expected count below 5 pooled into one)."""
    values = np.asarray(values)
    assert np.all(np.isin(values, support)), "a value outside the support"
    counts = np.array([(values == s).sum() for s in support])
    expected = probs / probs.sum() * values.size
    small = expected < 5
    if small.any():
        counts = np.append(counts[~small], counts[small].sum())
        expected = np.append(expected[~small], expected[small].sum())
    if expected[-1] == 0:  # cells of probability 0 (below the doubles): never drawn
        assert counts[-1] == 0
        counts, expected = counts[:-1], expected[:-1]
    if counts.size == 1:  # one cell holds all the mass
        return 1.0
    return float(stats.chisquare(counts, expected).pvalue)


@pytest.mark.parametrize("gamma", [Fraction(1, 3), 1, 2.5, Fraction(7, 1)])
def test_bernoulli_exp_has_probability_exp_minus_gamma(gamma: object) -> None:
    src = source(1)
    n = 20000
    hits = sum(bernoulli_exp(gamma, src) for _ in range(n))
    p = math.exp(-float(Fraction(gamma)))  # type: ignore[arg-type]
    assert stats.binomtest(hits, n, p).pvalue > ALPHA


def test_bernoulli_exp_edges_and_errors() -> None:
    src = source(2)
    assert all(bernoulli_exp(0, src) for _ in range(200))
    with pytest.raises(ValueError, match="gamma must be >= 0"):
        bernoulli_exp(-1e-300, src)


@pytest.mark.parametrize("t", [1, 3])
def test_discrete_laplace_law(t: int) -> None:
    src = source(3)
    x = [discrete_laplace(t, src) for _ in range(20000)]
    support = np.arange(-40 * t, 40 * t + 1)
    assert chi_square(x, support, np.exp(-np.abs(support) / t)) > ALPHA
    with pytest.raises(ValueError, match="t must be a positive integer"):
        discrete_laplace(0, src)


@pytest.mark.parametrize(
    ("mu", "variance"),
    [
        (0, 0.5),
        (Fraction(37, 100), 2.3),
        (-5.5, 0.8),  # a centre half-way between two integers
        (1e6 + 0.25, 4.0),
        (0.5, 1e-3),  # nearly all the mass on 0 and 1, equally
        (-0.3, 1e-300),  # all the mass on 0
        (Fraction(1, 3), 30.0),
    ],
)
def test_discrete_gaussian_law_with_a_rational_centre(mu: object, variance: float) -> None:
    src = source(4)
    y = np.array([discrete_gaussian(mu, variance, src) for _ in range(10000)])
    m = float(Fraction(mu))  # type: ignore[arg-type]
    half = int(12 * math.sqrt(variance)) + 3
    support = np.arange(math.floor(m) - half, math.floor(m) + half + 2)
    log_p = -((support - m) ** 2) / (2 * variance)
    with np.errstate(under="ignore"):
        probs = np.exp(log_p - log_p.max())
    assert chi_square(y, support, probs) > ALPHA


def test_discrete_gaussian_refuses_a_variance_that_is_not_positive() -> None:
    with pytest.raises(ValueError, match="variance must be > 0"):
        discrete_gaussian(0, 0, source(5))


@pytest.mark.parametrize("rate", [Fraction(1, 3), Fraction(5, 2), Fraction(1, 40)])
def test_geometric_exp_law(rate: Fraction) -> None:
    src = source(10)
    x = [geometric_exp(rate, src) for _ in range(10000)]
    support = np.arange(0, int(60 / float(rate)) + 1)
    assert chi_square(x, support, np.exp(-float(rate) * support)) > ALPHA


@pytest.mark.parametrize(
    ("mu", "variance", "upper"),
    [
        (Fraction(1, 3), Fraction(4), 2),  # the bound above the centre: plain rejection
        (Fraction(7, 2), Fraction(9, 4), 2),  # within one sd above the bound
        (Fraction(40, 1), Fraction(9), 3),  # far beyond: the geometric envelope
        (Fraction(10**6, 3), Fraction(10**6), 0),  # 333 sd beyond
    ],
)
def test_discrete_gaussian_below_law(mu: Fraction, variance: Fraction, upper: int) -> None:
    src = source(11)
    y = np.array([discrete_gaussian_below(mu, variance, upper, src) for _ in range(10000)])
    assert y.max() <= upper
    support = np.arange(upper - 400, upper + 1)
    log_p = -((support - float(mu)) ** 2) / (2 * float(variance))
    with np.errstate(under="ignore"):
        probs = np.exp(log_p - log_p.max())
    assert chi_square(y, support, probs) > ALPHA


def test_unimodular_completion() -> None:
    """V has the given primitive last row and V V^-1 = I in integers, for directions with
    entries up to 2^30 and of mixed signs and zeros."""
    g = np.random.default_rng(12)
    for d in (1, 2, 3, 5, 8):
        for _ in range(20):
            m = [int(v) for v in g.integers(-(2**30), 2**30, size=d)]
            m[int(g.integers(d))] = 0 if d > 1 else 1
            gcd = math.gcd(*m)
            m = [v // gcd for v in m]
            v, v_inv = _unimodular(m)
            assert v[-1] == m
            prod = [
                [sum(v[i][k] * v_inv[k][j] for k in range(d)) for j in range(d)] for i in range(d)
            ]
            assert prod == [[int(i == j) for j in range(d)] for i in range(d)]


def _lattice(radius: float, d: int, h: float) -> np.ndarray:
    k = int(radius / h)
    axis = np.arange(-k, k + 1) * h
    pts = np.array(np.meshgrid(*[axis] * d, indexing="ij")).reshape(d, -1).T
    return pts[np.einsum("ij,ij->i", pts, pts) <= radius**2]


def test_lattice_draw_in_one_dimension_is_the_posterior_on_the_lattice() -> None:
    """d = 1, spacing 1/4 on [-1, 1]: probability exactly proportional to
    exp(-P w^2 / 2 + b w) at each of the 9 points."""
    sampler = LatticeGaussianBall([[4.0]], [3.0], 1.0, exponent=2)
    src = source(6)
    w = np.array([sampler.draw(src)[0] for _ in range(20000)])
    pts = _lattice(1.0, 1, 0.25)[:, 0]
    assert chi_square(w, pts, np.exp(-2.0 * pts**2 + 3.0 * pts)) > ALPHA


@pytest.mark.parametrize(
    ("precision", "linear", "radius", "power"),
    [
        ([[10.0, 3.0], [3.0, 6.0]], [1.8, -1.5], 3.0, True),  # mode (0.3, -0.4), inside
        # mode (4, 1), outside: tau > 0 (nearly all the mass on two points)
        ([[1.0, -0.3], [-0.3, 0.6]], [3.7, -0.6], 3.0, False),
    ],
)
def test_lattice_draw_in_two_dimensions_follows_its_exact_law(
    precision: list[list[float]], linear: list[float], radius: float, power: bool
) -> None:
    """d = 2 on the integer lattice (exponent 0) in a disc of radius 3 (29 points). The
    chain of discrete Gaussians draws w_1 from its marginal, then w_0 given w_1 (precision
    D_0 = (P + tau I)_00, centre (b_0 - P_01 w_1) / D_0); its normaliser Z_0 over the
    lattice depends on that centre, so the law is exp(-w'Pw/2 + b'w) / Z_0(centre(w_1)).
    On this coarse lattice Z_0 varies by tens of percents (on the release's 2^-520 lattice
    by 1e-137), and the test tells the two laws apart."""
    p, b = np.array(precision), np.array(linear)
    sampler = LatticeGaussianBall(p, b, radius, exponent=0)
    tau = float(sampler.tau)
    pts = _lattice(radius, 2, 1.0)
    d0 = p[0, 0] + tau
    centre = (b[0] - p[0, 1] * pts[:, 1]) / d0
    grid = np.arange(-200, 201)
    z0 = np.array([np.exp(-d0 * (grid - m) ** 2 / 2).sum() for m in centre])
    if power:
        assert np.ptp(z0) / z0.mean() > 0.05  # the normalisers matter on this lattice
    log_target = -0.5 * np.einsum("ij,jk,ik->i", pts, p, pts) + pts @ b
    plain = np.exp(log_target - log_target.max())
    src = source(7)
    draws = np.array([sampler.draw(src) for _ in range(20000)])
    codes = np.round(draws).astype(int) @ np.array([1000, 1])
    support = np.round(pts).astype(int) @ np.array([1000, 1])
    assert chi_square(codes, support, plain / z0) > ALPHA
    if power:
        assert chi_square(codes, support, plain) < ALPHA  # the test has power


def test_half_space_envelope_draws_the_same_law_far_outside() -> None:
    """Mode (6, 2) outside the disc of radius 3, spacing 1/128: the half-space envelope
    (built here) and the shrink envelope interleaved draw exp(-w'Pw/2 + b'w) on the
    lattice (every lattice variance is at least 16, so the normalisers are constant to
    1e-136). Checked on cells of side 1/4, each cell's probability summed over its lattice
    points; and the two envelopes accept more often than the shrink envelope alone."""
    p = np.array([[4.0, -1.2], [-1.2, 2.4]])
    b = p @ np.array([6.0, 2.0])
    sampler = LatticeGaussianBall(p, b, 3.0, exponent=7)
    half = sampler._half
    assert half is not None
    pts = _lattice(3.0, 2, 1 / 128)
    log_target = -0.5 * np.einsum("ij,jk,ik->i", pts, p, pts) + pts @ b
    weight = np.exp(log_target - log_target.max())
    cells = np.floor(pts * 4).astype(int) @ np.array([1000, 1])
    support, inverse = np.unique(cells, return_inverse=True)
    probs = np.bincount(inverse, weights=weight)
    src = source(13)
    draws = np.array([sampler.draw(src) for _ in range(10000)])
    codes = np.floor(draws * 4).astype(int) @ np.array([1000, 1])
    assert chi_square(codes, support, probs) > ALPHA
    # the half-space envelope by itself: its kept proposals are exact draws too
    kept: list[list[int]] = []
    while len(kept) < 10000:
        j = half.propose(src)
        if j is not None:
            kept.append(j)
    codes = np.floor(np.array(kept) / 32).astype(int) @ np.array([1000, 1])
    assert chi_square(codes, support, probs) > ALPHA
    alone = LatticeGaussianBall(p, b, 3.0, exponent=7, half_space=False)
    for _ in range(2000):
        alone.draw(src)
    assert 10000 / sampler.proposals > 2000 / alone.proposals


@pytest.mark.parametrize("outside", [False, True])
def test_exact_terms_are_the_target_and_the_doubles_only_tune(outside: bool) -> None:
    """With ``exact_terms`` (P, b as fractions, the release's exact statistics) the draws
    follow exp(-w'Pw/2 + b'w) for those terms, whatever the doubles passed beside them
    (here 10-30% off, so the test tells the two targets apart). ``outside``: the mode
    (6, 2) outside the disc, where the half-space envelope is built from the doubles'
    direction but bounds the exact target (spacing 1/128, cells of side 1/4)."""
    p = np.array([[4.0, -1.2], [-1.2, 2.4]])
    b = p @ (np.array([6.0, 2.0]) if outside else np.array([0.3, -0.2]))
    exact = (
        [[Fraction(v) for v in row] for row in p.tolist()],
        [Fraction(v) for v in b.tolist()],
    )
    sampler = LatticeGaussianBall(p * 1.3, b * 1.1, 3.0, exponent=7, exact_terms=exact)
    assert (sampler._half is not None) == outside
    pts = _lattice(3.0, 2, 1 / 128)
    cells = np.floor(pts * 4).astype(int) @ np.array([1000, 1])
    support, inverse = np.unique(cells, return_inverse=True)

    def probs(pp: np.ndarray, bb: np.ndarray) -> np.ndarray:
        log_target = -0.5 * np.einsum("ij,jk,ik->i", pts, pp, pts) + pts @ bb
        return np.bincount(inverse, weights=np.exp(log_target - log_target.max()))

    src = source(21)
    draws = np.array([sampler.draw(src) for _ in range(6000)])
    codes = np.floor(draws * 4).astype(int) @ np.array([1000, 1])
    assert chi_square(codes, support, probs(p, b)) > ALPHA
    assert chi_square(codes, support, probs(p * 1.3, b * 1.1)) < ALPHA  # the test has power
    with pytest.raises(ValueError, match="symmetric"):
        LatticeGaussianBall(p, b, 3.0, exact_terms=([[1, 2], [3, 1]], exact[1]))


def test_lattice_sampler_errors() -> None:
    with pytest.raises(ValueError, match="precision must be d x d"):
        LatticeGaussianBall(np.eye(2), [1.0], 1.0)
    with pytest.raises(ValueError, match="finite"):
        LatticeGaussianBall([[np.inf]], [1.0], 1.0)
    with pytest.raises(ValueError, match="exponent"):
        LatticeGaussianBall([[1.0]], [1.0], 1.0, exponent=-1)
    with pytest.raises(RuntimeError, match="nothing was released"):
        # the mode 1e4 radii outside, the shrink envelope alone: one proposal is (almost
        # surely) not enough
        LatticeGaussianBall([[1e8]], [1e11], 0.1, half_space=False).draw(source(8), max_proposals=1)


def test_a_precision_that_rounding_made_indefinite_still_draws() -> None:
    """P computed in doubles need not be positive definite as the rationals it is (a tiny
    prior precision against X'X of rank 1); tau is then raised until P + tau I is, which
    changes only the acceptance rate, never the law."""
    x = np.full((3, 3), 0.1)
    p = 1e-300 * np.eye(3) + x.T @ x
    p[0, 1] = p[1, 0] = p[0, 1] * (1 + 2e-16)  # the rank-1 matrix, perturbed by rounding
    sampler = LatticeGaussianBall(p, np.zeros(3), 1.0, floor=1e-300)
    w = sampler.draw(source(9))
    assert np.linalg.norm(w) <= 1.0 and sampler.tau > 0
