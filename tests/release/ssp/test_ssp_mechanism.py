"""SSP release: sensitivities against exhaustive corner checks, the exact guarantee, the
noise law, the naive posteriors and bad input (one-line errors, nothing spent)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

import dpbayes as dpb
from dpbayes.privacy import Neighbours
from dpbayes.privacy.noise import noise_source
from dpbayes.release.base import plan as plan_release
from dpbayes.release.ssp import quadratic_l1_sensitivity, quadratic_l2_sensitivity
from dpbayes.release.ssp.mechanism import sensitivity_margin, upper_triangle


def stat(v: np.ndarray, *, weighted: bool = False, constant_last: bool = False) -> np.ndarray:
    """The released vector of one record: upper triangle of v v' (Frobenius-weighted)."""
    rows, cols = upper_triangle(v.size, constant_last=constant_last)
    w = np.where(rows == cols, 1.0, math.sqrt(2.0)) if weighted else 1.0
    return np.outer(v, v)[rows, cols] * w


def corners(bounds: np.ndarray) -> list[np.ndarray]:
    return [np.array(c) * bounds for c in itertools.product((-1.0, 0.0, 1.0), repeat=bounds.size)]


@pytest.mark.parametrize(
    "bounds", [(1.0, 1.0), (0.7, 1.3, 2.0), (1.0, 1.0, 1.0, 1.0), (0.5, 2.0, 1.0, 3.0)]
)
def test_l1_sensitivity_equals_the_corner_maximum(bounds: tuple[float, ...]) -> None:
    b = np.array(bounds)
    pts = corners(b)
    stats = np.array([stat(v) for v in pts])
    worst = max(np.abs(stats[i] - stats).sum(axis=1).max() for i in range(len(pts)))
    assert quadratic_l1_sensitivity(b) == pytest.approx(worst, rel=1e-12)
    # add/remove: one record against none; the same bound, attained at the corner b
    assert np.abs(stats).sum(axis=1).max() == pytest.approx(quadratic_l1_sensitivity(b))
    # no pair inside the box exceeds it (random interior points, both records)
    g = np.random.default_rng(0)
    v = g.uniform(-1, 1, (4000, b.size)) * b
    w = g.uniform(-1, 1, (4000, b.size)) * b
    diff = np.array([np.abs(stat(a) - stat(c)).sum() for a, c in zip(v, w, strict=True)])
    assert diff.max() <= quadratic_l1_sensitivity(b) + 1e-12


def ball_records(bx: np.ndarray, r: float, g: np.random.Generator) -> np.ndarray:
    """Feature vectors in the box |x_j| <= b_j and the ball ||x|| <= r, many on the
    ball's surface: random, sparse, and spread evenly over random supports (where the
    L1 norm peaks), with random signs."""
    d = bx.size
    out = [np.zeros(d)]
    for _ in range(600):
        x = g.uniform(-1, 1, d) * bx
        keep = g.random(d) < g.uniform(0.2, 1.0)
        even = np.where(keep, np.sign(g.uniform(-1, 1, d)) * bx, 0.0)
        for z in (x, even, np.sign(x) * bx):
            norm = np.linalg.norm(z)
            out.append(z if norm <= r else z * (r / norm))
    return np.array(out)


@pytest.mark.parametrize(
    ("bx", "r"),
    [((1.0, 1.0, 1.0, 1.0, 1.0, 1.0), 1.3), ((1.0,) * 8, 2.0), ((0.5, 2.0, 1.0, 3.0), 1.5)],
)
@pytest.mark.parametrize("relation", [Neighbours.SUBSTITUTE, Neighbours.ADD_REMOVE])
def test_l1_sensitivity_with_a_row_norm_bound_bounds_every_pair(
    bx: tuple[float, ...], r: float, relation: Neighbours
) -> None:
    """PROOF.md §2 with ||x||^2 <= R_x^2: (S_a^2 + R_a^2) / 2 bounds every pair of records
    (each record against none under add/remove), linear and logistic, joint and in blocks,
    is below the box's, and under add/remove is attained where the ball's even point is
    inside the box."""
    from dpbayes.release.ssp.mechanism import block_l1_sensitivities

    g = np.random.default_rng(1)
    bxa = np.array(bx)
    xs = ball_records(bxa, r, g)
    bu = 1.7
    b = np.r_[bxa, bu]
    kw = {"neighbours": relation, "x_norm2": r * r}
    joint = quadratic_l1_sensitivity(b, **kw)
    box = quadratic_l1_sensitivity(b)
    c = 2.0 if relation is Neighbours.SUBSTITUTE else 1.0
    assert joint < box if c * r * r < bxa @ bxa else joint == box
    lin = np.array([stat(np.r_[x, u]) for x in xs for u in (-bu, bu, g.uniform(-bu, bu))])
    logi = np.array([stat(np.r_[y * x, 1.0], constant_last=True) for x in xs for y in (-1, 1)])
    quad = np.array([stat(x) for x in xs])
    dq, dl = block_l1_sensitivities(b, relation, x_norm2=r * r)
    first = upper_triangle(b.size)[1] == b.size - 1
    for recs, bound in [
        (lin, joint),
        (logi, quadratic_l1_sensitivity(np.r_[bxa, 1.0], constant_last=True, **kw)),
        (quad, dq),
        (lin[:, first], dl),
    ]:
        if relation is Neighbours.ADD_REMOVE:
            worst = np.abs(recs).sum(axis=1).max()
        else:
            worst = max(np.abs(recs[i] - recs).sum(axis=1).max() for i in range(len(recs)))
        assert worst <= bound * (1 + 1e-12)
    if relation is Neighbours.ADD_REMOVE and r / math.sqrt(bxa.size) <= bxa.min():
        even = np.r_[np.full(bxa.size, r / math.sqrt(bxa.size)), bu]
        assert np.abs(stat(even)).sum() == pytest.approx(joint, rel=1e-12)


@pytest.mark.parametrize("bounds", [(1.0, 1.0), (0.7, 1.3, 2.0), (1.0, 1.0, 1.0, 1.0)])
def test_l2_sensitivity_bounds_the_corners_and_is_attained_for_orthogonal_corners(
    bounds: tuple[float, ...],
) -> None:
    b = np.array(bounds)
    stats = np.array([stat(v, weighted=True) for v in corners(b)])
    worst = max(np.linalg.norm(stats[i] - stats, axis=1).max() for i in range(len(stats)))
    sub = quadratic_l2_sensitivity(b, Neighbours.SUBSTITUTE)
    assert worst <= sub + 1e-12
    if len(set(bounds)) == 1 and b.size % 2 == 0:  # orthogonal corners exist: tight
        assert worst == pytest.approx(sub, rel=1e-12)
    add = quadratic_l2_sensitivity(b, Neighbours.ADD_REMOVE)
    assert np.linalg.norm(stats, axis=1).max() == pytest.approx(add, rel=1e-12)


@pytest.mark.parametrize("d, bound", [(1, 1.0), (2, 1.0), (3, 0.5), (2, 2.0)])
def test_logistic_sensitivity_bounds_every_pair_of_records(d: int, bound: float) -> None:
    """v = (y x, 1): the released entries exclude the constant 1; the L1 bound is within
    1/2 of the corner maximum at these bounds, the L2 bound above it."""
    xs = [np.array(c) * bound for c in itertools.product((-1.0, 0.0, 1.0), repeat=d)]
    recs = [np.r_[y * x, 1.0] for x in xs for y in (-1.0, 1.0)]
    b = np.r_[np.full(d, bound), 1.0]
    s1 = np.array([stat(v, constant_last=True) for v in recs])
    s2 = np.array([stat(v, weighted=True, constant_last=True) for v in recs])
    l1 = max(np.abs(s1[i] - s1).sum(axis=1).max() for i in range(len(recs)))
    l2 = max(np.linalg.norm(s2[i] - s2, axis=1).max() for i in range(len(recs)))
    bound_l1 = quadratic_l1_sensitivity(b, constant_last=True)
    assert l1 <= bound_l1 + 1e-12 and bound_l1 - l1 <= 0.5 + 1e-12
    assert l2 <= quadratic_l2_sensitivity(b, Neighbours.SUBSTITUTE, constant_last=True) + 1e-12


def linear_data(n: int = 300, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    g = np.random.default_rng(seed)
    x = np.clip(g.normal(0, 0.5, (n, 3)), -1, 1)
    y = np.clip(x @ np.array([0.5, -0.3, 0.2]) + g.normal(0, 0.3, n), -1, 1)
    return x, y


def linear_model(**kw: float) -> dpb.models.BayesianLinearRegression:
    return dpb.models.BayesianLinearRegression(
        prior_precision=1.0, noise_variance=0.09, feature_bound=1.0, label_bound=1.0, **kw
    )


def test_guarantee_is_exact_and_the_accountant_is_charged_it() -> None:
    x, y = linear_data()
    acc = dpb.Accountant(epsilon=3.0, delta=1e-5, simulation=True)
    rel = dpb.release(
        linear_model(), (x, y), mechanism="ssp", epsilon=0.7, accountant=acc, rng=0,
        first_order_share=None,
    )  # fmt: skip
    g = rel.guarantee
    assert (g.epsilon, g.delta, g.sensitivity_norm) == (0.7, 0.0, "L1")
    exact = g.details["sensitivity_exact"]
    assert quadratic_l1_sensitivity([1, 1, 1, 1]) == 10.0  # the box's (4^2 + 4) / 2
    # the model's rows lie in the unit ball (clip="ball"): PROOF.md §2 with
    # ||a_x||^2 <= 2 and ||a_x||_1 <= sqrt(3 * 2), plus the label's 1
    sa = math.sqrt(6.0) + 1.0
    assert (
        exact
        == quadratic_l1_sensitivity([1, 1, 1, 1], neighbours=Neighbours.SUBSTITUTE, x_norm2=1.0)
        == pytest.approx((sa**2 + 3.0) / 2, rel=1e-15)
    )
    # plus the allowance for the one rounding of each exact entry (PROOF.md §3c): 2**-15
    # of each of the 10 entries' grid scales (1, as the bounds are 1)
    assert g.details["sensitivity_rounding"] == 10 * 2.0**-15
    assert g.sensitivity == (exact + 10 * 2.0**-15) * (1 + sensitivity_margin(4))
    assert g.details["scale"] == pytest.approx(g.sensitivity / 0.7)
    assert g.details["noise_sd_diagonal"] == pytest.approx(math.sqrt(2) * g.sensitivity / 0.7)
    assert acc.spent == pytest.approx((0.7, 0.0))
    # Laplace by default: the two blocks share the budget too (rho = 0.5, PROOF.md §3b):
    # Delta_Q = (S_a^2 + R_a^2) / 2 with R_a^2 = 2, S_a = sqrt(6); Delta_L = 2 B_y S_1 +
    # B_y^2 with S_1 = sqrt(3), one row's ||x||_1 in the unit ball
    lap = dpb.release(linear_model(), (x, y), mechanism="ssp", epsilon=0.7, rng=0).guarantee
    assert lap.details["sensitivity_exact"] == 1.0 and lap.details["first_order_share"] == 0.5
    assert lap.details["sensitivity_second_order"] == pytest.approx(4.0)
    assert lap.details["sensitivity_first_order"] == pytest.approx(2 * math.sqrt(3) + 1)
    assert lap.details["noise_sd_diagonal"] == pytest.approx(
        math.sqrt(2) * lap.sensitivity / 0.7 * 4.0 / 0.5
    )
    rel2 = dpb.release(
        linear_model(), (x, y), mechanism="ssp", epsilon=0.5, delta=1e-6, accountant=acc, rng=0
    )
    g2 = rel2.guarantee
    assert (g2.epsilon, g2.delta, g2.sensitivity_norm) == (0.5, 1e-6, "L2")
    # Gaussian: by default the two blocks share the budget (rho = 0.5, PROOF.md §3b):
    # d = 3, rows in the unit ball (clip="ball"), R_x^2 = 1, B_y = 1: Delta_Q = sqrt(2),
    # Delta_L = sqrt(8 * 1 + 1) = 3
    assert g2.details["sensitivity_exact"] == 1.0 and g2.details["first_order_share"] == 0.5
    assert 1.0 < g2.sensitivity < 1.0 + 1e-4
    assert g2.details["sensitivity_second_order"] == pytest.approx(math.sqrt(2))
    assert g2.details["sensitivity_first_order"] == pytest.approx(3.0)
    sigma = g2.details["sigma"]
    assert g2.details["noise_sd_diagonal"] == pytest.approx(sigma * math.sqrt(2) / 0.5**0.5)
    assert g2.details["noise_sd_offdiagonal"] == pytest.approx(sigma / 0.5**0.5)
    assert g2.details["noise_sd_first_order"] == pytest.approx(sigma * 3 / 2**0.5 / 0.5**0.5)
    assert g2.details["noise_sd_label"] == pytest.approx(sigma * 3 / 0.5**0.5)
    assert acc.spent == pytest.approx((1.2, 1e-6))
    joint = dpb.release(
        linear_model(), (x, y), mechanism="ssp", epsilon=0.5, delta=1e-6, first_order_share=None
    )
    # the joint release: ||v||^2 <= R_x^2 + B_y^2 = 2 (the ball's bound, not the box's 4)
    assert joint.guarantee.details["sensitivity_exact"] == pytest.approx(math.sqrt(2) * 2.0)
    add = dpb.release(
        linear_model(),
        (x, y),
        mechanism="ssp",
        epsilon=1,
        delta=1e-6,
        neighbours="add-remove",
        first_order_share=None,
    )
    assert add.guarantee.details["sensitivity_exact"] == pytest.approx(2.0)
    assert add.public["n"] is None
    assert not add.simulation  # rng=None: the secure sampler
    # add/remove blocks: Delta_Q = R_x^2 = 1, Delta_L = sqrt(2 * 1 + 1)
    add2 = dpb.release(
        linear_model(), (x, y), mechanism="ssp", epsilon=1, delta=1e-6, neighbours="add-remove"
    ).guarantee
    assert add2.details["sensitivity_second_order"] == pytest.approx(1.0)
    assert add2.details["sensitivity_first_order"] == pytest.approx(math.sqrt(3.0))


def test_row_norm_bound_shrinks_the_noise() -> None:
    """A row-norm bound R_x on the model: Delta_Q = sqrt(2) R_x^2 instead of sqrt(2) d B^2,
    the rows are scaled into the ball, and the Laplace noise follows PROOF.md §2's bound
    with R_a^2 = 2 R_x^2 (substitute) and S_a = sqrt(d R_a^2)."""
    x, y = linear_data()
    box = dpb.models.BayesianLinearRegression(feature_bound=1.0, label_bound=1.0, clip="box")
    ball = dpb.models.BayesianLinearRegression(
        feature_bound=1.0, label_bound=1.0, clip="box", norm_bound=1.2
    )
    kw: dict = {"mechanism": "ssp", "epsilon": 1.0, "delta": 1e-6}
    gb = plan_release(box, (x, y), **kw).guarantee
    gr = plan_release(ball, (x, y), **kw).guarantee
    assert gr.details["x_norm2"] == pytest.approx(1.44)
    assert gr.details["sensitivity_second_order"] == pytest.approx(math.sqrt(2) * 1.44)
    assert gb.details["sensitivity_second_order"] == pytest.approx(math.sqrt(2) * 3.0)
    assert np.linalg.norm(ball.bounded(x)[0], axis=1).max() <= 1.2 + 1e-12
    kw = {"mechanism": "ssp", "epsilon": 1.0, "first_order_share": None}
    lb = plan_release(box, (x, y), **kw).guarantee
    lr = plan_release(ball, (x, y), **kw).guarantee
    assert lb.details["sensitivity_exact"] == 10.0
    sa = math.sqrt(3 * 2 * 1.44) + 1.0  # ||a_x||_1 <= sqrt(d 2 R_x^2), plus the label's 1
    assert lr.details["sensitivity_exact"] == pytest.approx((sa**2 + 2 * 1.44 + 1.0) / 2)
    assert lr.sensitivity < 0.97 * lb.sensitivity


@pytest.mark.parametrize("share", [None, "auto"])
def test_noise_has_the_stated_law(share: str | None) -> None:
    """Noise on X'X[0, 1] and X'y[0]: Laplace of the stated scale (KS test); with the
    default two blocks (rho = 0.5; box of x with d = 3, B = B_y = 1, substitute) the scale
    of each block is 1 / eps over its weight, Delta_Q = (3^2 + 3) / 2 = 6 over 1 - rho and
    Delta_L = 2 * 3 + 1 = 7 over rho (PROOF.md §3b, from its formulas)."""
    from scipy import stats

    x, y = linear_data(50)
    model = linear_model(clip="box")
    exact = model.statistics((x, y))
    plan = plan_release(model, (x, y), mechanism="ssp", epsilon=2.0, first_order_share=share)
    src = noise_source(5)
    noise = np.array(
        [
            [r.released["xtx"][0][1] - exact.xtx[0, 1], r.released["xty"][0] - exact.xty[0]]
            for r in (plan.run(src) for _ in range(800))
        ]
    )
    scale = plan.guarantee.details["scale"]
    scales = [scale, scale] if share is None else [scale * 6 / 0.5, scale * 7 / 0.5]
    if share is not None:
        assert plan.guarantee.sensitivity == pytest.approx(1.0, rel=1e-4)
    for col, sc in zip(noise.T, scales, strict=True):
        assert stats.kstest(col, stats.laplace(scale=sc).cdf).pvalue > 1e-3


def test_two_block_gaussian_noise_has_the_law_of_the_proof() -> None:
    """The default Gaussian release (two blocks, rho = 0.5): the noise on X'X's diagonal and
    off-diagonal, on X'y and on y'y is Normal with the sds of PROOF.md 3b, computed here from
    its formulas (box of x with d = 3, B = B_y = 1, substitute: R_x^2 = 3, Delta_Q =
    sqrt(2) 3, Delta_L = sqrt(8 * 3 + 1) = 5), and the record states them (KS tests)."""
    from scipy import stats

    from dpbayes.privacy.mechanisms import analytic_gaussian_sigma

    x, y = linear_data(50)
    model = linear_model(clip="box")
    exact = model.statistics((x, y))
    eps, delta, rho = 1.0, 1e-5, 0.5
    plan = plan_release(
        model, (x, y), mechanism="ssp", epsilon=eps, delta=delta, neighbours="substitute"
    )
    assert plan.guarantee.details["sensitivity_exact"] == 1.0
    sigma = analytic_gaussian_sigma(eps, delta, plan.guarantee.sensitivity)
    dq, dl = math.sqrt(2.0) * 3.0, 5.0
    want = {
        "diagonal": sigma * dq / math.sqrt(1 - rho),
        "offdiagonal": sigma * dq / math.sqrt(1 - rho) / math.sqrt(2.0),
        "first_order": sigma * dl / math.sqrt(2 * rho),
        "label": sigma * dl / math.sqrt(rho),
    }
    src = noise_source(7)
    rels = [plan.run(src) for _ in range(800)]
    rec = rels[0].record
    for key, sd in want.items():
        assert getattr(rec, f"noise_sd_{key}") == pytest.approx(sd, rel=1e-9)
    noise = {
        "diagonal": [r.released["xtx"][1][1] - exact.xtx[1, 1] for r in rels],
        "offdiagonal": [r.released["xtx"][0][2] - exact.xtx[0, 2] for r in rels],
        "first_order": [r.released["xty"][2] - exact.xty[2] for r in rels],
        "label": [r.released["yty"] - exact.yty for r in rels],
    }
    for key, values in noise.items():
        z = np.asarray(values, dtype=float) / want[key]
        assert stats.kstest(z, stats.norm.cdf).pvalue > 1e-3, key


def test_user_level_scales_the_sensitivity_by_k() -> None:
    """k rows per user, add/remove one user: k times the record-level sensitivity."""
    from dpbayes.release.ssp import plan_linear_ssp

    x, y = linear_data(60)
    model = linear_model(clip="box")
    g = plan_linear_ssp(
        model,
        model.statistics((x, y)),
        epsilon=1.0,
        delta=0.0,
        neighbours=Neighbours.ADD_REMOVE,
        rows_per_user=3,
        first_order_share=None,
    ).guarantee
    assert g.details["sensitivity_exact"] == pytest.approx(30.0)
    assert g.details["rows_per_user"] == 3


def test_naive_posteriors_match_the_exact_ones_at_huge_epsilon() -> None:
    x, y = linear_data(2000)
    model = linear_model(clip="box")
    rel = dpb.release(model, (x, y), mechanism="ssp", epsilon=1e7, rng=1)
    exact = model.exact_posterior((x, y))
    np.testing.assert_allclose(rel.posterior.mean(), exact.mean(), atol=1e-4)
    assert rel.posterior.interval(0.9).shape == (3, 2)
    g = np.random.default_rng(3)
    yl = (g.random(2000) < 1 / (1 + np.exp(-x @ np.array([2.0, -1.0, 0.5])))).astype(int)
    lm = dpb.models.BayesianLogisticRegression(prior_precision=1.0, feature_bound=1.0)
    lrel = dpb.release(lm, (x, yl), mechanism="ssp", epsilon=1e7, rng=1)
    np.testing.assert_allclose(lrel.posterior.mean(), lm.exact_posterior((x, yl)).mean(), atol=1e-4)
    na = lrel.noise_aware_posterior(likelihood="pass-glm")  # the naive one's likelihood
    assert na.mean().shape == (3,) and na.interval(0.9).shape == (3, 2)
    np.testing.assert_allclose(na.mean(), lrel.posterior.mean(), atol=1e-3)
    # the adaptive likelihood's slope is the link's at these margins, not the polynomial's
    # over [-R, R]: the weights the labels were drawn with are inside its 95% ellipsoid
    # (squared Mahalanobis distance 3.1; chi2(3) quantile 7.81) and outside PASS-GLM's 99%
    # one (16.4 against 11.34)
    truth = np.array([2.0, -1.0, 0.5])
    adaptive = lrel.noise_aware_posterior()
    assert adaptive.likelihood == "adaptive"
    r_a, r_p = adaptive.mean() - truth, na.mean() - truth
    assert r_a @ np.linalg.solve(adaptive.cov, r_a) < 7.81
    assert r_p @ np.linalg.solve(na.cov, r_p) > 11.34


def test_pass_glm_coefficients_interpolate_log_sigmoid() -> None:
    from dpbayes.models.logistic_regression import chebyshev_log_sigmoid

    a = chebyshev_log_sigmoid(4.0)
    nodes = 4.0 * np.cos((2 * np.arange(3) + 1) * np.pi / 6)
    np.testing.assert_allclose(np.polyval(a[::-1], nodes), -np.logaddexp(0, -nodes), atol=1e-12)
    assert a[1] == pytest.approx(0.5) and a[2] < 0


def _spent_nothing(call: object) -> str:
    acc = dpb.Accountant(epsilon=5.0, delta=1e-3, simulation=True)
    with pytest.raises(ValueError) as info:
        call(acc)  # type: ignore[operator]
    assert acc.spent == (0.0, 0.0)
    msg = str(info.value)
    assert "\n" not in msg
    return msg


def test_bad_input_is_one_line_naming_the_argument_and_spends_nothing() -> None:
    x, y = linear_data(40)
    no_label = dpb.models.BayesianLinearRegression(feature_bound=1.0)
    lm = dpb.models.BayesianLogisticRegression(feature_bound=1.0)
    yl = (y > 0).astype(int)

    def rel(model, data, **kw):  # type: ignore[no-untyped-def]
        return lambda acc: dpb.release(
            model, data, mechanism="ssp", accountant=acc, rng=0, **{"epsilon": 1.0, **kw}
        )

    assert "label_bound" in _spent_nothing(rel(no_label, (x, y)))
    assert "noise" in _spent_nothing(rel(linear_model(), (x, y), noise="cauchy"))
    assert "delta" in _spent_nothing(rel(linear_model(), (x, y), noise="laplace", delta=1e-6))
    assert "delta" in _spent_nothing(rel(linear_model(), (x, y), noise="gaussian"))
    assert "epsilon" in _spent_nothing(rel(linear_model(), (x, y), epsilon=-1.0))
    assert "y" in _spent_nothing(rel(lm, (x, y)))  # labels not in {0, 1}
    assert "unknown option" in _spent_nothing(rel(lm, (x, yl), draws=3))
    assert "X" in _spent_nothing(rel(lm, (x[:, 0], yl)))
    with pytest.raises(ValueError, match="degree"):
        dpb.models.BayesianLogisticRegression(feature_bound=1.0, degree=4)
    with pytest.raises(ValueError, match="feature_bound"):
        dpb.models.BayesianLogisticRegression(feature_bound=-1.0)
    with pytest.raises(ValueError, match="clip"):
        dpb.models.BayesianLinearRegression(clip="sphere")
