"""Posterior sampling for Bayesian linear regression (paper 004 §5.2)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from dpbayes.models.linear_regression import BayesianLinearRegression
from dpbayes.release import release
from dpbayes.release.regression.mechanism import LatticeGaussianBall, sampling_noise_variance

Z = float(stats.norm.isf(1e-4 / 2))


def bounded_model(**kw: float) -> BayesianLinearRegression:
    args = {"feature_bound": 1.0, "label_bound": 1.0, "weight_bound": 2.0, "noise_variance": 0.01}
    args.update(kw)
    return BayesianLinearRegression(**args)


def data(n: int = 500, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    g = np.random.default_rng(seed)
    x = g.uniform(-0.5, 0.5, size=(n, 2))
    y = np.clip(x @ np.array([0.8, -0.6]) + g.normal(scale=0.1, size=n), -1, 1)
    return x, y


def test_noise_variance_from_epsilon() -> None:
    m = bounded_model()
    # L = (B_y + B_x W)^2 / (2 s2) = 9 / (2 s2); substitute eps = 2L = 9 / s2
    assert sampling_noise_variance(m, 3.0) == pytest.approx(3.0)
    assert sampling_noise_variance(m, 3.0, neighbours="add-remove") == pytest.approx(1.5)
    assert sampling_noise_variance(m, 3.0, draws=2) == pytest.approx(6.0)
    assert sampling_noise_variance(m, 1e6) == pytest.approx(0.01)  # the model's own is larger


@pytest.mark.parametrize(
    ("clip", "norm_bound", "reach"), [("box", None, 2.0), ("box", 1.5, 1.5), ("ball", None, 1.0)]
)
def test_the_lipschitz_bound_covers_every_bounded_row(
    clip: str, norm_bound: float | None, reach: float
) -> None:
    """A review found clip="box" calibrated to ||x|| <= B while a box row of d = 4 features
    reaches 2 B: the real loss was 2.24 for a stated eps 1. For every clip the residual's
    bound B_y + ||x|| W must hold at the worst bounded row (x at the box's corner, w = -W x /
    ||x||), and the stated eps must cover it."""
    kw: dict = {"clip": clip} | ({} if norm_bound is None else {"norm_bound": norm_bound})
    m = bounded_model(weight_bound=1.0, **kw)
    g = np.random.default_rng(0)
    x = g.uniform(-1, 1, size=(50, 4))
    y = np.clip(g.normal(size=50), -1, 1)
    rel = release(m, (x, y), mechanism="sampling", epsilon=1.0, rng=0)
    s2 = rel.guarantee.details["noise_variance"]
    corner, _ = m.bounded(np.full((1, 4), 5.0))
    assert float(np.linalg.norm(corner)) == pytest.approx(reach)
    residual = 1.0 + float(np.linalg.norm(corner)) * 1.0  # |y - x'w| at y = 1, w = -x/||x||
    assert rel.guarantee.epsilon <= 1.0
    assert 2 * residual**2 / (2 * s2) <= rel.guarantee.epsilon * (1 + 1e-12)
    with pytest.raises(ValueError, match="features"):
        if clip == "box":
            sampling_noise_variance(m, 1.0)
        else:
            raise ValueError("features: not needed for the ball")


def test_release_guarantee_and_ball() -> None:
    m = bounded_model()
    r = release(m, data(), mechanism="sampling", epsilon=1.0, rng=0)
    assert r.guarantee.epsilon == pytest.approx(1.0)
    assert r.guarantee.details["noise_variance"] == pytest.approx(9.0)
    w = np.asarray(r.released["draws"][0])
    assert np.linalg.norm(w) <= 2.0
    r2 = release(m, data(), mechanism="sampling", epsilon=1e6, rng=0)
    assert r2.guarantee.epsilon == pytest.approx(9 / 0.01)  # less than asked
    rs = release(m, data(), mechanism="sampling", epsilon=1.0)
    assert not rs.simulation


def test_draws_follow_the_posterior_when_the_ball_does_not_bind() -> None:
    m = bounded_model(weight_bound=50.0)
    x, y = data()
    eps = 1e5
    s2 = sampling_noise_variance(m, eps)
    st = m.statistics((x, y))
    post = m.posterior_from(st, noise_variance=s2)
    prec = m.prior_precision * np.eye(2) + st.xtx / s2
    g = np.random.default_rng(1)
    sampler = LatticeGaussianBall(prec, st.xty / s2, 50.0)
    ws = np.array([sampler.draw(g) for _ in range(2000)])
    sd = np.sqrt(np.diag(post.cov))
    assert np.all(np.abs(ws.mean(axis=0) - post.mean()) <= Z * sd / np.sqrt(2000))


def test_posterior_far_outside_the_ball_stays_in_the_ball() -> None:
    g = np.random.default_rng(2)
    prec = np.eye(2) * 1e4  # N((10, 0), 1e-4 I): all its mass far outside the unit ball
    w = LatticeGaussianBall(prec, prec @ np.array([10.0, 0.0]), 1.0).draw(g)
    assert np.linalg.norm(w) <= 1.0 + 1e-12
    assert w[0] > 0.99


def test_errors() -> None:
    with pytest.raises(ValueError, match="weight_bound"):
        release(BayesianLinearRegression(), data(), mechanism="sampling", epsilon=1.0, rng=0)
    with pytest.raises(ValueError, match="epsilon"):
        release(bounded_model(), data(), mechanism="sampling", epsilon=-1.0, rng=0)


def test_a_tiny_prior_precision_with_collinear_features_does_not_fail_inside_the_release() -> None:
    """P = lambda I + X'X / sigma^2 with lambda = 1e-14 and three identical columns: eigh
    put eigenvalues at or below 0 and the release refused inside ``run`` (uncharged) for
    this data set and not for the neighbour whose substituted row gives X full rank.
    Eigenvalues are now floored at lambda; both data sets release a draw in the ball."""
    g = np.random.default_rng(1)
    n = 1000
    a = g.uniform(-0.3, 0.3, n)
    x = np.column_stack([a, a, a])
    y = np.clip(3 * a, -1, 1)
    x2 = x.copy()
    x2[0] = [0.5, -0.5, 0.1]  # a substitute neighbour: X of full rank
    m = BayesianLinearRegression(
        prior_precision=1e-14, noise_variance=1.0, feature_bound=1.0, label_bound=1.0,
        weight_bound=1.0,
    )  # fmt: skip
    for xs in (x, x2):
        for seed in range(5):
            rel = release(m, (xs, y), mechanism="sampling", epsilon=50.0, rng=seed)
            w = np.asarray(rel.released["draws"][0])
            assert np.all(np.isfinite(w)) and np.linalg.norm(w) <= 1.0 + 1e-12


def test_a_tiny_weight_bound_samples_for_every_data_set_or_is_refused_for_all() -> None:
    """Q = diag(lam) + k (I - nn') of the half-space envelope, with k ~ gamma / W: a review
    found inv and Cholesky of Q failing once k / lam passed about 1e16 (collinear rows,
    W = 1e-50) while the empty data set sampled, a refusal that told them apart. Q is now
    inverted and factored by its structure; W outside WEIGHT_BOUND_RANGE is refused in the
    plan for every data set alike."""
    from dpbayes.privacy.noise import SimulatedNoise
    from dpbayes.release.base import plan

    datasets = [
        (np.zeros((3, 2)), np.ones(3)),
        (np.ones((3, 2)), np.ones(3)),
        (np.ones((300, 2)), -np.ones(300)),
        (np.array([[1.0, 0.0], [0.0, 0.0], [0.0, 0.0]]), np.ones(3)),
    ]
    for w in (1e-150, 1e-100, 1e-50, 1e-20, 1e150):
        m = bounded_model(weight_bound=w, noise_variance=1.0)
        for x, y in datasets:
            planned = plan(m, (x, y), mechanism="sampling", epsilon=1.0)
            draw = np.asarray(
                planned.run(SimulatedNoise(np.random.default_rng(0))).released["draws"][0]
            )
            assert np.all(np.isfinite(draw)) and np.linalg.norm(draw) <= w * (1 + 1e-12)
    for w in (1e-155, 1e160):
        for x, y in datasets:
            with pytest.raises(ValueError, match="weight_bound must be in"):
                plan(bounded_model(weight_bound=w), (x, y), mechanism="sampling", epsilon=1.0)


@pytest.mark.parametrize(
    ("feature", "label", "weight"), [(1e200, 1.0, 1e150), (1.0, 1e308, 1.0), (1e300, 1e300, 1e10)]
)
def test_bounds_whose_noise_variance_overflows_are_refused_by_name(
    feature: float, label: float, weight: float
) -> None:
    """Public bounds so large that sigma^2 overflows: one line naming the bounds, for every
    data set alike (was "epsilon must be finite, got nan" or a bare OverflowError)."""
    from dpbayes.release.base import plan

    m = bounded_model(feature_bound=feature, label_bound=label, weight_bound=weight)
    # a label bound of 1e308 has no grid for exact sums: refused by name before sigma^2
    match = "must be in" if label > 1e301 else "bounds are too large for posterior sampling"
    with pytest.raises(ValueError, match=match):
        plan(m, (np.zeros((3, 2)), np.zeros(3)), mechanism="sampling", epsilon=1.0)


def test_a_wide_ball_resolves_its_tiny_tau_for_every_data_set() -> None:
    """The shrink envelope's tau solves sum 1/(lam + tau) + sum b^2/(lam + tau)^2 = W^2;
    for a wide ball it is about d / W^2. Bisecting [0, 1] for 100 steps resolved only
    2^-100, so at W = 6.6e15 (lambda = 1e-40) the acceptance fell to about e^-(2^-101 W^2)
    and the release raised on a data set and not on its neighbours (W >= 7e15: on all); at
    lambda = 1e-300, W = 1e150, b^2 / den^2 underflowed den^2 and every release failed.
    Now tau is bracketed from below and computed to 1e-15; every data set samples."""
    from dpbayes.release.regression.lattice_gaussian import ball_tau

    lam, b = np.array([1e-40, 0.5]), np.array([0.3, 2.0])
    w = 6.6e15
    tau = ball_tau(lam, b, w)
    moment = np.sum(1 / (lam + tau)) + np.sum((b / (lam + tau)) ** 2)
    assert moment <= w * w and moment == pytest.approx(w * w, rel=1e-13)
    x0, y0 = np.zeros((3, 2)), np.zeros(3)
    neighbours = [
        (np.array([[1.0, 0.0], [0.0, 0.0], [0.0, 0.0]]), np.array([1.0, 0.0, 0.0])),
        (np.array([[0.0, 1.0], [0.0, 0.0], [0.0, 0.0]]), np.array([-1.0, 0.0, 0.0])),
        (np.array([[0.6, 0.8], [0.0, 0.0], [0.0, 0.0]]), np.array([0.0, 0.0, 0.0])),
    ]
    for lam0, big in [(1e-40, 6.6e15), (1e-40, 7e15), (1e-300, 1e150)]:
        m = BayesianLinearRegression(
            prior_precision=lam0, noise_variance=1.0, feature_bound=1.0, label_bound=1.0,
            weight_bound=big,
        )  # fmt: skip
        for x, y in [(x0, y0), *neighbours]:
            for seed in range(3):
                r = release(m, (x, y), mechanism="sampling", epsilon=1.0, rng=seed)
                assert np.linalg.norm(np.asarray(r.released["draws"][0])) <= big


@pytest.mark.parametrize("draws", [1, 3, 7, 10])
def test_the_stated_epsilon_never_exceeds_the_requested_one(draws: int) -> None:
    """The noise variance was rounded up against c / sigma^2 while the guarantee states
    sum over draws of factor (B_y + B_x W)^2 / 2 sigma^2, rounded differently: the stated
    eps was one ulp above the request in 486 of 3672 plans (an accountant holding exactly
    eps refused them). Now the round-up uses the guarantee's own computation."""
    from dpbayes.release import plan

    g = np.random.default_rng(0)
    x, y = g.uniform(-0.5, 0.5, (5, 2)), g.uniform(-1, 1, 5)
    for eps in [*g.uniform(0.01, 10, 60), 1e-300, 1e-10, 1e10]:
        for nb in ("substitute", "add_remove"):
            for w in (0.1, 1.0, 3.7):
                m = BayesianLinearRegression(
                    prior_precision=1.0, noise_variance=1e-9, feature_bound=0.7,
                    label_bound=1.3, weight_bound=w,
                )  # fmt: skip
                got = plan(m, (x, y), mechanism="sampling", epsilon=float(eps), draws=draws,
                           neighbours=nb).guarantee.epsilon  # fmt: skip
                assert got <= eps, (got, eps, nb, w)


def test_neighbours_targets_differ_by_exactly_the_changed_record() -> None:
    """PROOF.md §3.7: the sampler's target is built from the exact sums, so two
    neighbours' exact P and b differ by exactly the changed record's terms, x x' / sigma^2
    and y x / sigma^2 of its coordinates on the grid, however large n (10^5 here, bounds
    off the grid). From sums rounded in doubles they differed by that plus rounding of
    the size of the whole sum, which n, not the record, sets."""
    from fractions import Fraction

    from dpbayes.data.exact import GRID_BITS, grid_exponents, grid_integers
    from dpbayes.models.linear_regression import RegressionStatistics
    from dpbayes.release.regression.mechanism import exact_terms

    g = np.random.default_rng(9)
    n, d = 10**5, 2
    model = BayesianLinearRegression(
        prior_precision=0.3, noise_variance=0.7, feature_bound=0.7, label_bound=1.3
    )
    x = g.uniform(-0.5, 0.5, (n, d))
    y = np.clip(g.normal(0, 1, n), -1.3, 1.3)
    x2, y2 = x.copy(), y.copy()
    x2[0], y2[0] = [0.41, -0.29], -1.1
    s2 = model.noise_variance
    p1, b1 = exact_terms(model, model.statistics((x, y)), s2)  # type: ignore[misc]
    p2, b2 = exact_terms(model, model.statistics((x2, y2)), s2)  # type: ignore[misc]
    e = grid_exponents([0.7, 0.7, 1.3])

    def on_grid(row: np.ndarray) -> list[Fraction]:
        k = grid_integers(row[None, :], e)[0]
        return [Fraction(int(k[i])) * Fraction(2) ** (e[i] - GRID_BITS) for i in range(d + 1)]

    v1, v2 = on_grid(np.r_[x[0], y[0]]), on_grid(np.r_[x2[0], y2[0]])
    var = Fraction(s2)
    for i in range(d):
        assert b1[i] - b2[i] == (v1[i] * v1[d] - v2[i] * v2[d]) / var
        for j in range(d):
            assert p1[i][j] - p2[i][j] == (v1[i] * v1[j] - v2[i] * v2[j]) / var
    # a hand-made statistic has no exact sums: its doubles are taken at their word
    plain = RegressionStatistics(xtx=np.eye(d), xty=np.zeros(d), yty=1.0, n=3)
    assert exact_terms(model, plain, s2) is None


@pytest.mark.parametrize("clip, norm_bound", [("ball", None), ("box", 1.0)])
def test_the_ball_radius_covers_rows_its_rounded_scaling_leaves_outside(
    clip: str, norm_bound: float | None
) -> None:
    """A review: x = (1, 2^-26) with radius 1 is not scaled (its norm rounds to 1), so
    its exact norm is above the radius by 2^-53 of it. The radius the guarantee uses,
    B_x, covers such rows exactly (PROOF.md §1)."""
    from fractions import Fraction

    from dpbayes.release.regression.mechanism import _bounds

    model = BayesianLinearRegression(
        feature_bound=1.0, label_bound=1.0, weight_bound=1.0, clip=clip, norm_bound=norm_bound
    )
    rows = np.array([[1.0, 2.0**-26], [0.6, 0.8], [1.0, 1.0], [-(2.0**-26), 1.0]])
    x, _ = model.bounded(rows)
    bx = _bounds(model, 2)[0]
    norms2 = [sum(Fraction(v) ** 2 for v in row) for row in x.tolist()]
    assert max(norms2) > 1  # the rounded scaling left a row outside the unit ball
    assert all(n2 <= Fraction(bx) ** 2 for n2 in norms2)


def test_bounds_without_a_grid_are_refused_for_every_data_set_alike() -> None:
    """A feature bound of 1e-300 has no public grid (its step underflows): every data set,
    the empty one included, gets the same one-line refusal (it used to fail for non-empty
    data only); the statistics refuse the radius alike (a ball below 1e-140)."""
    model = BayesianLinearRegression(feature_bound=1e-300, label_bound=1.0, weight_bound=1.0)
    x, y = np.full((3, 2), 1e-301), np.zeros(3)
    for xs, ys in ((x, y), (x[:0], y[:0])):
        with pytest.raises(ValueError, match="feature_bound and label_bound must be in"):
            release(model, (xs, ys), mechanism="sampling", epsilon=1.0, rng=0)
        with pytest.raises(ValueError, match="below 1e-140"):
            model.statistics((xs, ys))


def test_scaling_into_a_huge_ball_does_not_warn() -> None:
    """radius / 1e-300 overflows for radii above 1.8e8: the scale is 1 there, silently (a
    warning for some rows and not others would tell about the data)."""
    import warnings

    from dpbayes.models.linear_regression import scale_into_ball

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = scale_into_ball(np.array([[0.0, 0.0], [1e-310, 0.0], [3.0, 4.0]]), 1e10)
    np.testing.assert_array_equal(out, [[0.0, 0.0], [1e-310, 0.0], [3.0, 4.0]])


@pytest.mark.parametrize("d", [1, 3])
def test_neighbours_either_side_of_the_doubles_overflow_both_release(d: int) -> None:
    """A review: at sigma^2 = 1e-300 X'X / sigma^2 overflowed for n = 179,769,314 rows
    (refused, uncharged, so repeatable) and not for the neighbour one row smaller
    (released): an infinite privacy loss against the stated eps. The doubles only choose
    tau and the half-space direction; both neighbours must release, warning-free."""
    import math
    import sys
    import warnings

    from dpbayes.models.linear_regression import RegressionStatistics
    from dpbayes.privacy import Neighbours
    from dpbayes.privacy.noise import noise_source
    from dpbayes.release.regression.mechanism import (
        plan_regression_sampling,
        sampling_noise_variance,
    )

    m = BayesianLinearRegression(
        prior_precision=1.0, noise_variance=1e-300, feature_bound=1.0, label_bound=1e-150,
        weight_bound=1e-150,
    )  # fmt: skip
    s2 = sampling_noise_variance(m, 100.0, neighbours=Neighbours.ADD_REMOVE, features=d)
    n = math.floor(sys.float_info.max * s2) + 1  # n / s2 overflows, (n - 1) / s2 does not
    for rows in (n, n - 1):
        xtx = np.eye(d) * rows + 0.5 * rows * (1 - np.eye(d))
        st = RegressionStatistics(xtx=xtx, xty=np.full(d, 1e-150 * rows), yty=0.0, n=rows)
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)
            p = plan_regression_sampling(
                m, st, epsilon=100.0, delta=0.0, neighbours=Neighbours.ADD_REMOVE
            )
            draw = np.asarray(p.run(noise_source(1)).released["draws"][0])
        assert draw.shape == (d,) and np.linalg.norm(draw) <= 1e-150
