"""Posterior sampling for Bayesian linear regression (paper 004 §5.2 and its appendix).

With features in the ball ||x||_2 <= B_x, labels in [-B_y, B_y] and the Gaussian prior
truncated to ||w||_2 <= W, the residual of any record obeys |y - x'w| <= B_y + B_x W, so
the log-likelihood -(y - x'w)^2 / (2 sigma^2) (its constant cancels) varies by at most
``L = (B_y + B_x W)^2 / (2 sigma^2)`` between any two records. One draw from the
truncated posterior is then 2L-DP (substitute) or L-DP (add/remove) (Dimitrakakis et
al. 2014; see ``dpbayes.release.bayes_net.sampling``).

Given eps, the release uses the smallest noise variance that meets it,
``sigma^2 = max(model sigma^2, factor * draws * (B_y + B_x W)^2 / (2 eps))``: a tempered
posterior. The draw is exact: the truncated posterior restricted to a public lattice
(spacing 2^-520) drawn in rational arithmetic (:mod:`.lattice_gaussian`); the guarantee
holds only for exact draws, and a continuous sampler's doubles are not (PROOF.md §3.4). Its
uniform integers come from the noise source (``rng=None``: the OS CSPRNG). Proof of the
guarantee and of the sampler: ``PROOF.md`` beside this file.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from dpbayes.data.exact import GRID_BOUND_RANGE, on_grid
from dpbayes.models.linear_regression import (
    BayesianLinearRegression,
    RegressionStatistics,
    RegressionWeights,
)
from dpbayes.privacy import Guarantee, Neighbours
from dpbayes.privacy.noise import NoiseSource
from dpbayes.privacy.validation import check_int
from dpbayes.release.base import Plan, Release, posterior_sampling_guarantee, register
from dpbayes.release.regression.lattice_gaussian import SAMPLER, LatticeGaussianBall
from dpbayes.release.regression.record import RegressionSamplingRecord

__all__ = [
    "LatticeGaussianBall",
    "RegressionWeights",
    "exact_terms",
    "lipschitz",
    "plan_regression_sampling",
    "sampling_noise_variance",
    "stated_epsilon",
]


#: Public weight bounds W the sampler takes: below 1e-150, W^2 leaves the normal doubles
#: (the envelope's tau, about d / W^2, overflows); above 1e150 the noise variance
#: overflows. Refused in the plan.
WEIGHT_BOUND_RANGE = (1e-150, 1e150)


def _check_bounds(model: BayesianLinearRegression, **_: Any) -> tuple[float, float, float]:
    """(B, B_y, W): the public bounds posterior sampling needs, checked (also before the
    data are read)."""
    fb, lb, wb = model.feature_bound, model.label_bound, model.weight_bound
    if fb is None or lb is None or wb is None:
        raise ValueError(
            "model must set feature_bound, label_bound and weight_bound for posterior sampling"
        )
    if not on_grid([fb, lb]):
        lo, hi = GRID_BOUND_RANGE
        raise ValueError(
            f"feature_bound and label_bound must be in [{lo:g}, {hi:g}] for posterior "
            "sampling: outside it the statistics have no public grid to be summed exactly on"
        )
    lo, hi = WEIGHT_BOUND_RANGE
    if not lo <= wb <= hi:
        raise ValueError(
            f"weight_bound must be in [{lo:g}, {hi:g}] for posterior sampling, got "
            f"{wb:g}: outside it W^2 is not a normal double"
        )
    return fb, lb, wb


def _bounds(model: BayesianLinearRegression, features: int | None) -> tuple[float, float, float]:
    """(B_x, B_y, W): B_x bounds ||x||_2 of a bounded row. With ``clip="box"`` each of the
    d features is clipped to [-B, B], so a row reaches sqrt(d) B (rounded up), not B: the
    proof's ball (PROOF.md §1); the model's ``norm_bound``, if smaller, bounds it too."""
    fb, lb, wb = _check_bounds(model)
    if features is None and model.clip == "box":
        raise ValueError("features (the number of features) is needed with clip='box'")
    # a ball's scaling is computed in doubles (scale_into_ball, the engines' SQRT): a
    # scaled row's norm exceeds the radius by at most (d / 2 + 3) 2^-53 of it (the
    # rounding of the sum of squares, the square root, the quotient and the product), and
    # the grid's truncation only shrinks it; (d + 8) 2^-52 covers that (PROOF.md §1).
    # Without d (a direct call), 2^-30 covers every d below 2^22 (4 million features,
    # whose X'X no machine holds)
    if features is None:
        ball_slack = 1.0 + 2.0**-30
    else:
        d = check_int(features, "features", minimum=1)
        ball_slack = 1.0 + (d + 8) * 2.0**-52
    if model.clip == "box":  # sqrt(d) B, rounded up by more than its two roundings
        bx = math.sqrt(d) * fb * (1.0 + 2.0**-50)
    else:
        bx = fb * ball_slack
    if model.norm_bound is not None:
        bx = min(bx, model.norm_bound * ball_slack)
    return bx, lb, wb


def sampling_noise_variance(
    model: BayesianLinearRegression,
    epsilon: float,
    *,
    draws: int = 1,
    neighbours: Any = "substitute",
    features: int | None = None,
) -> float:
    """The noise variance sigma^2 that makes ``draws`` draws eps-DP (at least the model's);
    ``features``: the number of features d (needed with ``clip="box"``)."""
    bx, by, w = _bounds(model, features)
    factor = Neighbours.parse(neighbours).lipschitz_factor
    try:
        c = factor * draws * (by + bx * w) ** 2 / 2.0
    except OverflowError:
        c = math.inf
    need = c / epsilon
    if not math.isfinite(need):
        # public bounds: refused alike for every data set (was "epsilon must be finite,
        # got nan" from the guarantee, or a bare OverflowError)
        raise ValueError(
            f"the bounds are too large for posterior sampling at epsilon = {epsilon:g}: "
            f"(label_bound + feature_bound * weight_bound)^2 = ({by:g} + {bx:g} * {w:g})^2 "
            "over epsilon overflows the noise variance (rescale the data)"
        )
    # round up until the eps the guarantee states (computed as the plan computes it: per
    # draw factor * L, L = (B_y + B_x W)^2 / 2 sigma^2, summed over the draws) is <= epsilon
    while stated_epsilon(factor, draws, by, bx, w, need) > epsilon:
        need = math.nextafter(need, math.inf)
    return max(model.noise_variance, need)


def lipschitz(by: float, bx: float, w: float, noise_variance: float) -> float:
    """L = (B_y + B_x W)^2 / (2 sigma^2), the log-likelihood's Lipschitz bound (PROOF §1)."""
    return (by + bx * w) ** 2 / (2.0 * noise_variance)


def stated_epsilon(
    factor: float, draws: int, by: float, bx: float, w: float, noise_variance: float
) -> float:
    """The eps the guarantee of ``draws`` draws states: f L per draw, summed over the draws
    as ``compose_sequential`` sums them (the plan's guarantee, computed the same way)."""
    return sum([factor * lipschitz(by, bx, w, noise_variance)] * draws)


def exact_terms(
    model: BayesianLinearRegression,
    stats_: RegressionStatistics,
    s2: float,
    *,
    from_doubles: bool = False,
) -> tuple[list[list[Fraction]], list[Fraction]] | None:
    """P = lambda I + X'X / sigma^2 and b = X'y / sigma^2 exactly, from the exact sums of
    the statistics (PROOF.md §3.7), or None for statistics without them (a hand-made
    :class:`RegressionStatistics` is taken at its word: its doubles are the sums, and
    ``from_doubles`` forms P and b exactly from them instead of returning None)."""
    if stats_.exact is None and not from_doubles:
        return None
    d = stats_.xtx.shape[0]
    lam, var = Fraction(model.prior_precision), Fraction(s2)
    if stats_.exact is not None:
        f = stats_.exact.fraction
    else:
        sums = np.column_stack([np.asarray(stats_.xtx, float), np.asarray(stats_.xty, float)])

        def f(i: int, j: int) -> Fraction:
            return Fraction(float(sums[i, j]))

    precision = [[f(i, j) / var + (lam if i == j else 0) for j in range(d)] for i in range(d)]
    return precision, [f(i, d) / var for i in range(d)]


#: The largest magnitude of the doubles of P and b handed to the sampler when they
#: overflow: products of two stay finite in its choice of tau and of the half-space.
_DOUBLE_CAP = 2.0**300


@register(
    "sampling",
    BayesianLinearRegression,
    options=("draws",),
    record=RegressionSamplingRecord,
    precheck=_check_bounds,
)
def plan_regression_sampling(
    model: BayesianLinearRegression,
    stats_: RegressionStatistics,
    *,
    epsilon: float,
    delta: float,
    neighbours: Neighbours,
    allow_non_private: bool = False,
    draws: int = 1,
) -> Plan:
    """Release draws from the truncated, tempered posterior (paper 004 §5.2).

    Privacy: with bounded features and labels and the prior truncated to ||w|| <= W the
    log-likelihood is L-Lipschitz (module docstring), so each draw is 2L-DP (substitute)
    or L-DP (add/remove); sigma^2 is chosen so that ``draws`` draws compose to eps.
    """
    if delta:
        raise ValueError("delta must be 0 for posterior sampling (it is pure eps-DP)")
    d = check_int(draws, "draws", minimum=1)
    features = int(np.asarray(stats_.xtx).shape[0])
    bx, by, wb = _bounds(model, features)
    s2 = sampling_noise_variance(model, epsilon, draws=d, neighbours=neighbours, features=features)
    lip = lipschitz(by, bx, wb, s2)
    per_draw = neighbours.lipschitz_factor * lip
    details = {
        "noise_variance": s2,
        "bounds": {"feature": bx, "label": by, "weight": wb},
        "lipschitz": lip,
        "draws": d,
        "sampler": SAMPLER,
    }

    def guarantee(simulation: bool) -> Guarantee:
        return posterior_sampling_guarantee(
            per_draw=per_draw,
            lipschitz=lip,
            draws=d,
            neighbours=neighbours,
            mechanism="posterior sampling, truncated Gaussian prior (paper 004 §5.2)",
            details=details,
            simulation=simulation,
        )

    # the posterior N(P^-1 b, P^-1) with the prior N(0, I / lambda) truncated to the ball
    dim = stats_.xtx.shape[0]
    with np.errstate(over="ignore"):
        precision = model.prior_precision * np.eye(dim) + stats_.xtx / s2
        linear = stats_.xty / s2
    terms = exact_terms(model, stats_, s2)
    if not (np.all(np.abs(precision) <= _DOUBLE_CAP) and np.all(np.abs(linear) <= _DOUBLE_CAP)):
        # X'X / sigma^2 beyond the doubles (n ~ 1e8 at sigma^2 ~ 1e-300) was refused for
        # this data set and released for its neighbour one row smaller (whose doubles,
        # near the largest, overflowed later in the sampler). The doubles only choose tau
        # and the half-space direction (PROOF.md §3.1), which any finite values do
        # exactly: beyond 2^300 they are capped, and the target stays the exact P and b
        # (from the doubles of hand-made statistics, which are taken at their word)
        if terms is None:
            terms = exact_terms(model, stats_, s2, from_doubles=True)
        precision = np.clip(precision, -_DOUBLE_CAP, _DOUBLE_CAP)
        linear = np.clip(linear, -_DOUBLE_CAP, _DOUBLE_CAP)
    sampler = LatticeGaussianBall(
        precision, linear, wb, floor=model.prior_precision, exact_terms=terms
    )

    def run(src: NoiseSource) -> Release:
        ws = [sampler.draw(src) for _ in range(d)]
        return Release(
            model=model,
            mechanism="sampling",
            posterior=RegressionWeights(np.mean(ws, axis=0)),
            guarantee=guarantee(src.simulation),
            released={"draws": [w.tolist() for w in ws]},
            # substitute neighbours treat n as public; the noise-aware posterior needs it
            public=RegressionSamplingRecord(
                noise_variance=s2, neighbours=neighbours, draws=d, n=neighbours.public_n(stats_.n)
            ).to_public(),
        )

    return Plan(guarantee=guarantee(False), run=run)
