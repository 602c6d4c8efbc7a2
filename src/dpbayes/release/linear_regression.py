"""Posterior sampling for Bayesian linear regression (paper 004 §5.2 and its appendix).

With features in the ball ||x||_2 <= B_x, labels in [-B_y, B_y] and the Gaussian prior
truncated to ||w||_2 <= W, the residual of any record obeys |y - x'w| <= B_y + B_x W, so
the log-likelihood -(y - x'w)^2 / (2 sigma^2) (its constant cancels) varies by at most
``L = (B_y + B_x W)^2 / (2 sigma^2)`` between any two records. One draw from the
truncated posterior is then 2L-DP (substitute) or L-DP (add/remove) (Dimitrakakis et
al. 2014; see ``dpbayes.release.sampling``).

Given eps, the release uses the smallest noise variance that meets it,
``sigma^2 = max(model sigma^2, factor * draws * (B_y + B_x W)^2 / (2 eps))``: a tempered
posterior. Draws come from ``noise_source(rng).generator()`` (not floating-point hardened).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import special

from dpbayes.models.linear_regression import BayesianLinearRegression, RegressionStatistics
from dpbayes.privacy import Guarantee, Neighbours
from dpbayes.privacy.noise import NoiseSource
from dpbayes.privacy.validation import check_int
from dpbayes.release.base import Plan, Release, register
from dpbayes.release.bayes_net import reject_options
from dpbayes.release.sampling import NOT_HARDENED, posterior_sampling_guarantee

__all__ = [
    "RegressionWeights",
    "plan_regression_sampling",
    "sampling_noise_variance",
    "truncated_gaussian_ball",
]


@dataclass(frozen=True, eq=False)
class RegressionWeights:
    """Released regression weights (a posterior draw, or the mean of several draws)."""

    weights: np.ndarray

    def predict(self, x: Any) -> np.ndarray:
        return np.asarray(x, dtype=float) @ self.weights

    def mean(self) -> np.ndarray:
        return self.weights

    def to_dict(self) -> dict[str, Any]:
        return {"family": "regression-weights", "weights": self.weights.tolist()}


def _bounds(model: BayesianLinearRegression) -> tuple[float, float, float]:
    if model.feature_bound is None or model.label_bound is None or model.weight_bound is None:
        raise ValueError(
            "model must set feature_bound, label_bound and weight_bound for posterior sampling"
        )
    return model.feature_bound, model.label_bound, model.weight_bound


def sampling_noise_variance(
    model: BayesianLinearRegression,
    epsilon: float,
    *,
    draws: int = 1,
    neighbours: Any = "substitute",
) -> float:
    """The noise variance sigma^2 that makes ``draws`` draws eps-DP (at least the model's)."""
    bx, by, w = _bounds(model)
    factor = Neighbours.parse(neighbours).lipschitz_factor
    c = factor * draws * (by + bx * w) ** 2 / 2.0
    need = c / epsilon
    while c / need > epsilon:  # round up so that the computed eps never exceeds epsilon
        need = math.nextafter(need, math.inf)
    return max(model.noise_variance, need)


def truncated_gaussian_ball(
    mean: np.ndarray, cov: np.ndarray, radius: float, gen: np.random.Generator, *, sweeps: int = 200
) -> np.ndarray:
    """One draw of N(mean, cov) restricted to ||w||_2 <= radius.

    Exact rejection sampling (up to 100,272 proposals); if none is accepted, ``sweeps``
    sweeps of a Gibbs sampler with exact truncated-normal conditionals (approximate).
    """
    from scipy import linalg

    d = mean.size
    chol = np.linalg.cholesky(cov)
    for size in [16, 256] + [2000] * 50:
        z = mean + gen.standard_normal((size, d)) @ chol.T
        ok = np.einsum("ij,ij->i", z, z) <= radius**2
        if ok.any():
            return np.asarray(z[np.argmax(ok)])
    prec = linalg.inv(cov)
    norm = float(np.linalg.norm(mean))
    w = mean * min(1.0, 0.99 * radius / max(norm, 1e-300))
    for _ in range(sweeps):
        for j in range(d):
            rest = float(w @ w - w[j] ** 2)
            half = np.sqrt(max(radius**2 - rest, 0.0))
            sd = 1.0 / np.sqrt(prec[j, j])
            mu = mean[j] - (prec[j] @ (w - mean) - prec[j, j] * (w[j] - mean[j])) / prec[j, j]
            w[j] = _truncated_normal(mu, sd, -half, half, float(gen.random()))
    return w


def _truncated_normal(mu: float, sd: float, lo: float, hi: float, u: float) -> float:
    """Inverse-CDF draw of N(mu, sd^2) restricted to [lo, hi], computed in the lower tail
    (reflected when the interval lies above the mean) so that it stays precise."""
    a, b = (lo - mu) / sd, (hi - mu) / sd
    flip = a > 0
    if flip:
        a, b = -b, -a
    pa, pb = special.ndtr(a), special.ndtr(b)
    if pb - pa <= 0:
        z = b  # all the mass beyond the interval: the nearest bound
    else:
        z = float(np.clip(special.ndtri(pa + u * (pb - pa)), a, b))
    if flip:
        z = -z
    return float(np.clip(mu + sd * z, lo, hi))


@register("sampling", BayesianLinearRegression)
def plan_regression_sampling(
    model: BayesianLinearRegression,
    stats_: RegressionStatistics,
    *,
    epsilon: float,
    delta: float,
    neighbours: Neighbours,
    allow_non_private: bool = False,
    draws: int = 1,
    **options: Any,
) -> Plan:
    """Release draws from the truncated, tempered posterior (paper 004 §5.2).

    Privacy: with bounded features and labels and the prior truncated to ||w|| <= W the
    log-likelihood is L-Lipschitz (module docstring), so each draw is 2L-DP (substitute)
    or L-DP (add/remove); sigma^2 is chosen so that ``draws`` draws compose to eps.
    """
    reject_options("sampling", options)
    if delta:
        raise ValueError("delta must be 0 for posterior sampling (it is pure eps-DP)")
    d = check_int(draws, "draws", minimum=1)
    bx, by, wb = _bounds(model)
    s2 = sampling_noise_variance(model, epsilon, draws=d, neighbours=neighbours)
    lip = (by + bx * wb) ** 2 / (2.0 * s2)
    per_draw = neighbours.lipschitz_factor * lip
    details = {
        "noise_variance": s2,
        "bounds": {"feature": bx, "label": by, "weight": wb},
        "lipschitz": lip,
        "draws": d,
        "sampler": NOT_HARDENED,
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

    post = model.posterior_from(stats_, noise_variance=s2)

    def run(src: NoiseSource) -> Release:
        gen = src.generator()
        ws = [truncated_gaussian_ball(post.mean_, post.cov, wb, gen) for _ in range(d)]
        return Release(
            model=model,
            mechanism="sampling",
            posterior=RegressionWeights(np.mean(ws, axis=0)),
            guarantee=guarantee(src.simulation),
            released={"draws": [w.tolist() for w in ws]},
            public={
                "noise_variance": s2,
                "neighbours": neighbours.value,
                "draws": d,
                # substitute neighbours treat n as public; the noise-aware posterior needs it
                "n": neighbours.public_n(stats_.n),
            },
        )

    return Plan(guarantee=guarantee(False), run=run)
