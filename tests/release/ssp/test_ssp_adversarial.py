"""SSP at the numerical edges: the exact privacy loss of worst-case neighbouring data sets.

For each case the two data sets' released entries are computed independently of the
mechanism (from the records), and the loss of the pair is computed in closed form from
the noise law the release states: Laplace, ||f(D) - f(D')||_1 / scale; Gaussian, the
exact delta at eps of N(0, sigma^2) noise for the pair's (weighted) L2 distance (Balle &
Wang 2018, Thm 8). The loss must not exceed the claim, and at the corner pair it equals
it (Laplace) or its delta is the stated delta (Gaussian, the analytic calibration).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy import special

import dpbayes as dpb
from dpbayes.privacy import Neighbours
from dpbayes.release.base import plan


def entries(m: int, constant_last: bool) -> tuple[np.ndarray, np.ndarray]:
    rows, cols = np.triu_indices(m)
    if constant_last:
        keep = ~((rows == m - 1) & (cols == m - 1))
        rows, cols = rows[keep], cols[keep]
    return rows, cols


def block_weights(
    m: int, *, constant_last: bool, share: float | None, neighbours: str, rx2: float, bu: float
) -> np.ndarray:
    """The Gaussian weights of PROOF.md §3b, from its formulas (not from the library):
    Frobenius weights, and with a share rho the blocks Q (x x') and L (last row) divided
    by their sensitivities and multiplied by sqrt(1 - rho), sqrt(rho)."""
    rows, cols = entries(m, constant_last)
    frob = np.where(rows == cols, 1.0, math.sqrt(2.0))
    if share is None:
        return frob
    sub = neighbours == "substitute"
    dq = (math.sqrt(2.0) if sub else 1.0) * rx2
    dl = math.sqrt((8.0 if sub else 2.0) * bu**2 * rx2 + (0.0 if constant_last else bu**4))
    return frob * np.where(cols == m - 1, math.sqrt(share) / dl, math.sqrt(1 - share) / dq)


def released(
    v: np.ndarray, *, weighted: bool, constant_last: bool, weights: np.ndarray | None = None
) -> np.ndarray:
    """Sum over records of the released (optionally Frobenius- or block-weighted) entries."""
    m = v.shape[1]
    rows, cols = entries(m, constant_last)
    s = v.T @ v
    w = np.where(rows == cols, 1.0, math.sqrt(2.0)) if weighted else 1.0
    if weights is not None:
        w = weights
    return np.asarray(s[rows, cols] * w)


def gaussian_delta(eps: float, dist: float, sigma: float) -> float:
    a = dist / (2 * sigma) - eps * sigma / dist
    b = -dist / (2 * sigma) - eps * sigma / dist
    return float(special.ndtr(a) - math.exp(eps + special.log_ndtr(b)))


def pair(
    kind: str,
    n: int,
    neighbours: str,
    seed: int,
    norm_bound: float | None = None,
    antipodal: bool = False,
) -> tuple[object, tuple, tuple, np.ndarray, np.ndarray]:
    """A data set of n records (half at the corners of the box), and its neighbour with
    the worst record (the corner b) replaced by 0 (substitute) or removed (add/remove).

    ``norm_bound``: rows also scaled into that ball (the model's ``norm_bound``; the
    corner record then lies on its sphere). ``antipodal``: under substitute, the corner
    record's features are negated with its label kept (logistic: the same features, the
    other class), the pair that moves the first-order row most."""
    g = np.random.default_rng(seed)
    d = 2
    x = g.choice([-1.0, 0.0, 1.0], size=(n, d)) * np.where(g.random((n, 1)) < 0.5, 1.0, 0.3)
    x[0] = 1.0
    if norm_bound is not None:
        norms = np.linalg.norm(x, axis=1)
        x = x * np.minimum(1.0, norm_bound / np.maximum(norms, 1e-300))[:, None]
    if kind == "linear":
        y = g.choice([-2.0, 2.0, 0.0], size=n)
        y[0] = 2.0
        model = dpb.models.BayesianLinearRegression(
            feature_bound=1.0, label_bound=2.0, clip="box", norm_bound=norm_bound
        )
        v = np.column_stack([x, y])
    else:
        y = g.integers(0, 2, n).astype(float)
        y[0] = 1.0
        model = dpb.models.BayesianLogisticRegression(feature_bound=1.0, norm_bound=norm_bound)
        v = np.column_stack([x * np.where(y > 0, 1.0, -1.0)[:, None], np.ones(n)])
    if neighbours == "substitute":
        x2, y2, v2 = x.copy(), y.copy(), v.copy()
        if antipodal:
            if kind == "linear":  # x negated, y kept: x y moves by 2 x y, x x' does not
                x2[0] = -x[0]
                v2[0, :d] = -v[0, :d]
            else:  # the same x, the other class: y x moves by 2 x
                y2[0] = 0.0
                v2[0, :d] = -v[0, :d]
        else:
            x2[0] = 0.0
            if kind == "linear":
                y2[0] = 0.0
                v2[0] = 0.0
            else:
                v2[0, :d] = 0.0
    else:
        x2, y2, v2 = x[1:], y[1:], v[1:]
    return model, (x, y), (x2, y2), v, v2


def laplace_block_weights(m: int, *, share: float, neighbours: str, bu: float) -> np.ndarray:
    """The Laplace weights of PROOF.md §3b on the box [-1, 1]^(m - 1) (no row-norm bound),
    from its formulas (not from the library): Q divided by (S_x^2 + R_x^2) / 2, L by
    c b_u S_x + b_u^2 (c = 2 substitute, 1 add/remove), times 1 - rho and rho."""
    _, cols = entries(m, False)
    d = m - 1
    dq = (d * d + d) / 2.0
    dl = (2.0 if neighbours == "substitute" else 1.0) * bu * d + bu * bu
    return np.where(cols == m - 1, share / dl, (1 - share) / dq)


@pytest.mark.parametrize("kind", ["linear", "logistic"])
@pytest.mark.parametrize("neighbours", ["substitute", "add-remove"])
@pytest.mark.parametrize("eps", [0.01, 1.0, 100.0])
@pytest.mark.parametrize("share", [None, "auto"])
def test_laplace_loss_of_the_worst_pair_is_at_most_the_claim(
    kind: str, neighbours: str, eps: float, share: str | None
) -> None:
    """The joint release (``None``) and the default (``"auto"``: two blocks of share 0.5
    for linear regression, the joint release for logistic regression)."""
    model, data, _, v, v2 = pair(kind, 3000, neighbours, seed=int(eps * 100))
    const = kind == "logistic"
    blocks = share == "auto" and kind == "linear"
    g = plan(
        model, data, mechanism="ssp", epsilon=eps, neighbours=neighbours, noise="laplace",
        first_order_share=share,
    ).guarantee  # fmt: skip
    assert g.epsilon == eps and g.delta == 0.0
    assert g.details.get("first_order_share") == (0.5 if blocks else None)
    w = laplace_block_weights(3, share=0.5, neighbours=neighbours, bu=2.0) if blocks else None
    diff = released(v, weighted=blocks, constant_last=const, weights=w) - released(
        v2, weighted=blocks, constant_last=const, weights=w
    )
    loss = float(np.abs(diff).sum()) / g.details["scale"]
    assert loss <= eps * (1 + 1e-9)
    attained = not blocks or neighbours == "add-remove"  # substitute: L's bound is antipodal
    if kind == "linear" and attained:  # the corner pair attains the sensitivity
        assert loss == pytest.approx(eps * g.details["sensitivity_exact"] / g.sensitivity, rel=1e-9)
        assert loss == pytest.approx(eps, rel=1e-4)
    # the vectors above are the model's statistics (clipping included; off the grid, a
    # record's coordinates are truncated by at most 2**-26 of their bound)
    exact = model.statistics(data)
    rebuilt = v.T @ v
    np.testing.assert_allclose(
        exact.xtx if kind == "linear" else exact.t2, rebuilt[:2, :2], atol=len(v) * 2.0**-25
    )


@pytest.mark.parametrize("kind", ["linear", "logistic"])
@pytest.mark.parametrize(
    ("neighbours", "antipodal"),
    [("substitute", False), ("substitute", True), ("add-remove", False)],
)
def test_laplace_with_a_row_norm_bound_stays_within_the_claim(
    kind: str, neighbours: str, antipodal: bool
) -> None:
    """PROOF.md §2 with a row-norm bound: the corner record scaled onto the sphere of
    radius 0.8 (the even point, where one record's ||x||_1 = sqrt(d) R_x peaks), against 0,
    its mirror image or nothing; under add/remove the linear pair attains the bound."""
    eps, r = 1.0, 0.8
    model, data, _, v, v2 = pair(kind, 2000, neighbours, seed=3, norm_bound=r, antipodal=antipodal)
    const = kind == "logistic"
    g = plan(
        model, data, mechanism="ssp", epsilon=eps, neighbours=neighbours, first_order_share=None
    ).guarantee
    bu = 2.0 if kind == "linear" else 1.0
    r2 = (2.0 if neighbours == "substitute" else 1.0) * r * r  # the bound on ||a_x||^2
    sa = min(2.0, math.sqrt(2 * r2)) + bu
    assert g.details["sensitivity_exact"] == pytest.approx(
        (sa**2 + r2 + bu**2) / 2 - (0.5 if const else 0.0), rel=1e-14
    )
    diff = released(v, weighted=False, constant_last=const) - released(
        v2, weighted=False, constant_last=const
    )
    loss = float(np.abs(diff).sum()) / g.details["scale"]
    assert loss <= eps * (1 + 1e-9)
    if kind == "linear" and neighbours == "add-remove":
        assert loss == pytest.approx(eps * g.details["sensitivity_exact"] / g.sensitivity, rel=1e-9)


@pytest.mark.parametrize("kind", ["linear", "logistic"])
@pytest.mark.parametrize("neighbours", ["substitute", "add-remove"])
@pytest.mark.parametrize("eps, delta", [(0.01, 1e-10), (1.0, 1e-6), (100.0, 1e-3)])
@pytest.mark.parametrize(
    "share, norm_bound, antipodal",
    [(None, None, False), (0.5, None, False), (0.5, None, True), (0.2, 0.8, True)],
)
def test_gaussian_delta_of_the_worst_pair_is_at_most_the_claim(
    kind: str,
    neighbours: str,
    eps: float,
    delta: float,
    share: float | None,
    norm_bound: float | None,
    antipodal: bool,
) -> None:
    model, data, _, v, v2 = pair(
        kind, 2000, neighbours, seed=7, norm_bound=norm_bound, antipodal=antipodal
    )
    const = kind == "logistic"
    p = plan(
        model,
        data,
        mechanism="ssp",
        epsilon=eps,
        delta=delta,
        neighbours=neighbours,
        first_order_share=share,
    )
    g = p.guarantee
    assert (g.epsilon, g.delta) == (eps, delta)
    rx2 = 2.0 if norm_bound is None else min(2.0, norm_bound**2)
    bu = 2.0 if kind == "linear" else 1.0
    w = block_weights(3, constant_last=const, share=share, neighbours=neighbours, rx2=rx2, bu=bu)
    if share is None and norm_bound is None:  # the joint release: its own sensitivity
        assert g.details["sensitivity_exact"] == pytest.approx(
            (math.sqrt(2.0) if neighbours == "substitute" else 1.0) * (2.0 + bu**2)
            if not (const and neighbours == "add-remove")
            else math.sqrt((2.0 + 1.0) ** 2 - 1.0)
        )
    if share is not None:
        assert g.details["sensitivity_exact"] == pytest.approx(1.0, rel=1e-15)
    # the noise the release states on each entry is sigma / weight (the weights above)
    sd = np.asarray(p.guarantee.details["noise_sd_diagonal"])
    assert float(sd) == pytest.approx(g.details["sigma"] / w[0], rel=1e-12)
    assert g.details["noise_sd_first_order"] == pytest.approx(
        g.details["sigma"] / w[entries(3, const)[1].tolist().index(2)], rel=1e-12
    )
    dist = float(
        np.linalg.norm(
            released(v, weighted=True, constant_last=const, weights=w)
            - released(v2, weighted=True, constant_last=const, weights=w)
        )
    )
    assert dist <= g.sensitivity * (1 + 1e-12)
    assert gaussian_delta(eps, dist, g.details["sigma"]) <= delta * (1 + 1e-9)
    # the analytic calibration: the stated sensitivity has exactly the stated delta
    assert gaussian_delta(eps, g.sensitivity, g.details["sigma"]) == pytest.approx(delta, rel=1e-6)
    if neighbours == "add-remove" and kind == "linear" and share is None:  # attained
        assert dist == pytest.approx(g.details["sensitivity_exact"], rel=1e-12)
    # the vectors above are the model's statistics (clipping and the ball included; off
    # the grid, a record's coordinates are truncated by at most 2**-26 of their bound)
    exact = model.statistics(data)
    np.testing.assert_allclose(
        exact.xtx if kind == "linear" else exact.t2, (v.T @ v)[:2, :2], atol=len(v) * 2.0**-25
    )


def test_block_weighted_distance_is_at_most_one_over_edge_pairs() -> None:
    """§3b by brute force: over pairs of records at the edges (box corners scaled into
    the ball, antipodal and orthogonal pairs, labels at +-B_y and 0), the block-weighted
    distance of the released entries is <= 1, for both relations and several shares."""
    g = np.random.default_rng(3)
    for kind in ("linear", "logistic"):
        const = kind == "logistic"
        bu = 1.5 if kind == "linear" else 1.0
        for d, nb in ((2, None), (3, 1.2), (4, 1.0)):
            grid = np.array(np.meshgrid(*[[-1.0, 0.0, 1.0]] * d)).reshape(d, -1).T
            extra = g.normal(size=(200, d))
            xs = np.vstack([grid, np.clip(extra, -1, 1)])
            if nb is not None:
                norms = np.linalg.norm(xs, axis=1)
                xs = xs * np.minimum(1.0, nb / np.maximum(norms, 1e-300))[:, None]
            rx2 = float(d if nb is None else min(d, nb**2))
            us = [-bu, 0.0, bu] if kind == "linear" else [1.0]
            signs = [1.0] if kind == "linear" else [-1.0, 1.0]
            recs = np.array([np.r_[s * x, u] for x in xs for u in us for s in signs], dtype=float)
            if kind == "logistic":
                recs[:, -1] = 1.0
            for share in (0.1, 0.5, 0.9):
                for neighbours in ("substitute", "add-remove"):
                    w = block_weights(
                        d + 1,
                        constant_last=const,
                        share=share,
                        neighbours=neighbours,
                        rx2=rx2,
                        bu=bu,
                    )
                    f = np.array(
                        [
                            released(r[None, :], weighted=True, constant_last=const, weights=w)
                            for r in recs
                        ]
                    )
                    if neighbours == "add-remove":
                        worst = float(np.linalg.norm(f, axis=1).max())
                    else:
                        idx = g.integers(0, len(f), (20000, 2))
                        worst = float(np.linalg.norm(f[idx[:, 0]] - f[idx[:, 1]], axis=1).max())
                        # antipodal pairs: the first-order row's worst case
                        neg = np.array(
                            [
                                released(
                                    np.r_[-r[:-1], r[-1]][None, :],
                                    weighted=True,
                                    constant_last=const,
                                    weights=w,
                                )
                                for r in recs
                            ]
                        )
                        worst = max(worst, float(np.linalg.norm(f - neg, axis=1).max()))
                    assert worst <= 1.0 + 1e-12, (kind, d, nb, share, neighbours, worst)


def test_laplace_block_weighted_l1_distance_is_at_most_one_over_edge_pairs() -> None:
    """§3b for Laplace noise by brute force, with the library's block sensitivities: over
    pairs of records at the edges (box corners scaled into the ball, antipodal pairs,
    labels at +-B_y and 0), the block-weighted L1 distance of the released entries is
    <= 1, for both relations and several shares."""
    from dpbayes.release.ssp.mechanism import block_l1_sensitivities

    g = np.random.default_rng(5)
    bu = 1.5
    for d, nb in ((2, None), (3, 1.2), (4, 1.0), (5, 0.7)):
        grid = np.array(np.meshgrid(*[[-1.0, 0.0, 1.0]] * d)).reshape(d, -1).T
        xs = np.vstack([grid, np.clip(g.normal(size=(200, d)), -1, 1)])
        if nb is not None:
            norms = np.linalg.norm(xs, axis=1)
            xs = xs * np.minimum(1.0, nb / np.maximum(norms, 1e-300))[:, None]
        recs = np.array([np.r_[x, u] for x in xs for u in (-bu, 0.0, bu)])
        f0 = np.array([released(r[None, :], weighted=False, constant_last=False) for r in recs])
        neg = np.array(
            [released(np.r_[-r[:-1], r[-1]][None, :], weighted=False, constant_last=False)
             for r in recs]
        )  # fmt: skip
        _, cols = entries(d + 1, False)
        for neighbours in (Neighbours.SUBSTITUTE, Neighbours.ADD_REMOVE):
            dq, dl = block_l1_sensitivities(
                np.r_[np.ones(d), bu], neighbours, x_norm2=None if nb is None else nb * nb
            )
            for share in (0.1, 0.5, 0.9):
                w = np.where(cols == d, share / dl, (1 - share) / dq)
                f = f0 * w
                if neighbours is Neighbours.ADD_REMOVE:
                    worst = float(np.abs(f).sum(axis=1).max())
                else:
                    idx = g.integers(0, len(f), (20000, 2))
                    worst = float(np.abs(f[idx[:, 0]] - f[idx[:, 1]]).sum(axis=1).max())
                    worst = max(worst, float(np.abs(f - neg * w).sum(axis=1).max()))
                assert worst <= 1.0 + 1e-12, (d, nb, share, neighbours, worst)


def test_publics_do_not_tell_add_remove_neighbours_apart() -> None:
    """Under add/remove n is private: the release publishes n = None."""
    model, data, data2, _, _ = pair("linear", 500, "add-remove", seed=1)
    r1 = dpb.release(model, data, mechanism="ssp", epsilon=1.0, neighbours="add-remove", rng=0)
    r2 = dpb.release(model, data2, mechanism="ssp", epsilon=1.0, neighbours="add-remove", rng=0)
    assert r1.public == r2.public and r1.public["n"] is None


@pytest.mark.parametrize("what", ["linear", "logistic"])
def test_nothing_after_the_noise_can_fail_so_no_failure_tells_about_the_data(what: str) -> None:
    """A failure after the noise is drawn is not charged, so it must not depend on the data.

    The naive posterior used to take a Cholesky factor of lambda I + psd(X'X) / sigma^2,
    which fails in floating point when lambda is below the rounding error of the
    projected noisy X'X: with collinear features, lambda = 1e-13 and eps = 10 about half of
    the releases raised, with independent features none. The posterior is now computed in
    X'X's eigenbasis (``ridge_gaussian``) and every release of either data set succeeds
    with a finite posterior whose covariance has eigenvalues in (0, 1 / lambda].
    """
    g = np.random.default_rng(1)
    n = 20_000
    x1 = g.uniform(-1, 1, n)
    collinear = np.c_[x1, x1, x1]
    independent = g.uniform(-1, 1, (n, 3))
    if what == "linear":
        model = dpb.models.BayesianLinearRegression(
            prior_precision=1e-13, noise_variance=1e-3, feature_bound=1.0, label_bound=1.0,
            clip="box",
        )  # fmt: skip
        y = g.uniform(-1, 1, n)
    else:
        model = dpb.models.BayesianLogisticRegression(
            prior_precision=1e-13, feature_bound=1.0, radius=4.0
        )
        y = (g.random(n) < 0.5).astype(float)
    for x in (collinear, independent):
        p = plan(model, (x, y), mechanism="ssp", epsilon=10.0, delta=1e-6)
        for seed in range(25):
            post = p.run(dpb.privacy.noise.noise_source(seed)).posterior
            cov = np.asarray(post.cov)
            assert np.all(np.isfinite(post.mean())) and np.all(np.isfinite(cov))
            ev = np.linalg.eigvalsh(cov)  # in (0, 1 / lambda], up to rounding
            assert ev.max() <= 1e13 * (1 + 1e-9) and ev.min() >= -1e-12 * ev.max()


def test_pass_glm_coefficients_stay_exact_at_tiny_and_huge_radii() -> None:
    """a2 = -log cosh(s / 2) / s^2 at s = R sqrt(3) / 2: -1/8 in the limit R -> 0 (the power
    basis conversion gave +2.79 at R = 1e-8, a precision that is not positive definite)."""
    from dpbayes.models.logistic_regression import chebyshev_log_sigmoid

    for r in (1e-300, 1e-8, 1e-4, 1e-2, 1.0, 30.0, 1e6, 1e200):
        a = chebyshev_log_sigmoid(r)
        s = r * math.sqrt(3.0) / 2.0
        # the interpolant through -s, 0, s of f(s) = -log(1 + e^-s), in high precision
        import mpmath as mp

        mp.mp.dps = 60 + 2 * max(0, int(-math.log10(s)))  # f(s) + f(-s) - 2 f(0) ~ s^2
        f = lambda t: -mp.log(1 + mp.e ** (-t))  # noqa: E731
        ms = mp.mpf(s)
        a2 = (f(ms) + f(-ms) - 2 * f(0)) / (2 * ms * ms)
        assert a[0] == pytest.approx(-math.log(2.0)) and a[1] == 0.5
        assert a[2] < 0 and a[2] == pytest.approx(float(a2), rel=1e-12), r


def test_tiny_bounds_keep_the_add_remove_logistic_sensitivity_exact() -> None:
    """sqrt(R^4 - 1) with R^2 = R_x^2 + 1 lost R_x^2 to rounding at R_x ~ 1e-8 (1.22x too
    small); it is now sqrt(R_x^2 (R_x^2 + 2)). Bounds whose fourth powers are not normal
    floats are refused before any noise."""
    import mpmath as mp

    from dpbayes.privacy import Neighbours
    from dpbayes.release.ssp.mechanism import BOUND_RANGE, quadratic_l2_sensitivity

    mp.mp.dps = 50
    for b in (1e-4, 1.82e-8, 1e-12, 1e-30):
        got = quadratic_l2_sensitivity(
            [b, 1.0], Neighbours.ADD_REMOVE, constant_last=True, x_norm2=b * b
        )
        rx2 = mp.mpf(b) ** 2
        assert got == pytest.approx(float(mp.sqrt((rx2 + 1) ** 2 - 1)), rel=1e-12), b
    model = dpb.models.BayesianLinearRegression(
        feature_bound=BOUND_RANGE[0] / 10, label_bound=1.0, clip="box"
    )
    x, y = np.zeros((5, 2)), np.zeros(5)
    acc = dpb.Accountant(epsilon=5.0, delta=1e-3, simulation=True)
    with pytest.raises(ValueError, match="bounds must be in"):
        dpb.release(model, (x, y), mechanism="ssp", epsilon=1.0, accountant=acc, rng=0)
    assert acc.spent == (0.0, 0.0)
    with pytest.raises(ValueError, match="epsilon = 1e-300 is too small"):
        dpb.release(
            dpb.models.BayesianLinearRegression(feature_bound=1.0, label_bound=1.0, clip="box"),
            (x, y), mechanism="ssp", epsilon=1e-300, accountant=acc, rng=0,
        )  # fmt: skip
    assert acc.spent == (0.0, 0.0)


@pytest.mark.parametrize("kind", ["linear", "logistic"])
@pytest.mark.parametrize("noise, share", [("laplace", None), ("gaussian", None), ("gaussian", 0.5)])
def test_the_statistic_handed_to_the_noise_moves_within_the_stated_sensitivity(
    kind: str, noise: str, share: float | None
) -> None:
    """PROOF.md §3c at the edge a review found: bounds off the grid (B = 0.7, B_y = 1.3),
    10^6 records, the corner record replaced by 0. Summed in doubles, the statistic moved
    by 6e-11 of Delta_1 more than Delta_1; the exact sums rounded once move by at most the
    stated sensitivity, which is the formulas' plus the rounding allowance."""
    from dpbayes.release.ssp.mechanism import _QuadraticRelease

    g = np.random.default_rng(5)
    n, d, b, by = 10**6, 1, 0.7, 1.3
    x = g.uniform(-b, b, (n, d))
    x[: n // 2] = b * np.sign(x[: n // 2])
    x[0] = b
    if kind == "linear":
        y = np.clip(g.normal(0, 1, n), -by, by)
        y[0] = by
        model = dpb.models.BayesianLinearRegression(feature_bound=b, label_bound=by, clip="box")
        bounds, y2 = np.r_[np.full(d, b), by], y.copy()
        y2[0] = 0.0
    else:
        y = g.integers(0, 2, n).astype(float)
        y[0] = 1.0
        model = dpb.models.BayesianLogisticRegression(feature_bound=b)
        bounds, y2 = np.r_[np.full(d, b), 1.0], y
    x2 = x.copy()
    x2[0] = 0.0
    q = _QuadraticRelease(
        bounds,
        constant_last=kind == "logistic",
        kind=noise,
        epsilon=1.0,
        delta=1e-6 if noise == "gaussian" else 0.0,
        neighbours=Neighbours.SUBSTITUTE,
        rows_per_user=None,
        what=kind,
        first_order_share=share,
        x_norm2=model.row_norm2(d),
    )
    unused = np.zeros((d + 1, d + 1))
    s1 = q.statistic(unused, model.statistics((x, y)).exact)
    s2 = q.statistic(unused, model.statistics((x2, y2)).exact)
    moved = float(np.abs(s1 - s2).sum() if noise == "laplace" else np.linalg.norm(s1 - s2))
    assert moved <= q.mech.sensitivity
    # the pair is near the worst case: it moves the exact sums by almost Delta_1 (the
    # Gaussian's Delta_2 needs two orthogonal corners)
    if kind == "linear" and noise == "laplace":
        assert moved >= q.details["sensitivity_exact"] * (1 - 1e-6)


def test_the_logistic_noise_aware_posterior_never_fails_at_huge_epsilon() -> None:
    """At eps >= 1e9 the noise term of the noise-aware update vanishes and the projected T2
    of zero or one record is singular: ``solve`` raised LinAlgError after the charge, on
    some data sets (n = 1 at eps 1e12: 8 fits in 20) and not their neighbours. The fit now
    succeeds on both, with a finite posterior."""
    from dpbayes.estimators import PrivateBayesianLogisticRegression

    data = [(np.zeros((0, 2)), np.array([], dtype=int)), (np.array([[1.0, -1.0]]), np.array([1]))]
    for eps in (1e9, 1e12, 1e18):
        for x, y in data:
            for seed in range(8):
                est = PrivateBayesianLogisticRegression(
                    epsilon=eps, feature_bounds=(-1, 1), classes=[0, 1],
                    neighbours="add-remove", random_state=seed, predictive="noise-aware",
                )  # fmt: skip
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    est.fit(x, y)
                post = est.posterior_
                assert np.all(np.isfinite(post.mean())) and np.all(np.isfinite(post.cov))
