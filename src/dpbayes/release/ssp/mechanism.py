"""Sufficient-statistics perturbation (SSP) for linear and logistic regression.

Bernstein & Sheldon 2019 ("Differentially private Bayesian linear regression") release
the sufficient statistics of a linear regression once, with Laplace noise, and do all
inference on the noisy statistics; Kulkarni et al. 2021 and Huggins et al. 2017
(PASS-GLM) do the same for logistic regression with the statistics of a quadratic
approximation of its log-likelihood. Both statistics are one quadratic form:

* linear: v = (x, y) in the box |x_j| <= B, |y| <= B_y; S = sum v v' holds X'X, X'y, y'y;
* logistic: v = (y x, 1) with y in {-1, +1}; S = sum v v' holds X'X (y^2 = 1), t1 = sum y x
  and the constant n (not released).

The upper triangle of S is released (linear: (d+1)(d+2)/2 numbers, logistic: d(d+3)/2)
with Laplace noise of scale Delta_1 / eps (eps-DP) or, on the vector whose off-diagonal
entries are multiplied by sqrt(2) (its L2 norm is the Frobenius norm of S), Gaussian
noise calibrated to Delta_2 ((eps, delta)-DP, Balle & Wang's analytic calibration).
With b the coordinate bounds of v, S_b = sum b_j and R^2 = sum b_j^2 (PROOF.md):

* Delta_1 = (S_b^2 + R^2) / 2 under substitute or add/remove one record (attained:
  one record at the corner b, the other 0); logistic: (S_b^2 + R^2) / 2 - 1/2, since the
  constant entry never changes (an upper bound);
* Delta_2 = sqrt(2) R^2 under substitute, R^2 under add/remove (logistic:
  sqrt(2) R^2 and sqrt(R^4 - 1));
* user level (k rows per user, add/remove): k times these (triangle inequality).

Noise is drawn by :class:`~dpbayes.privacy.LaplaceMechanism` /
:class:`~dpbayes.privacy.GaussianMechanism` from the release's noise source (secure unless
a seed is given). Everything after the noise (symmetrising, projection of X'X onto the
PSD cone, the posteriors) is post-processing.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dpbayes.models.linear_regression import BayesianLinearRegression, RegressionStatistics
from dpbayes.models.logistic_regression import (
    BayesianLogisticRegression,
    LogisticStatistics,
    psd_projection,
)
from dpbayes.privacy import GaussianMechanism, LaplaceMechanism, Neighbours
from dpbayes.privacy.guarantee import user_level
from dpbayes.privacy.noise import NoiseSource
from dpbayes.release.base import Plan, Release, as_rng, register
from dpbayes.release.ssp.record import SspLinearRecord, SspLogisticRecord

__all__ = [
    "NOISES",
    "entry_noise_sd",
    "plan_linear_ssp",
    "plan_logistic_ssp",
    "quadratic_l1_sensitivity",
    "quadratic_l2_sensitivity",
    "upper_triangle",
]

NOISES = ("laplace", "gaussian")


def _bounds_vector(bounds: Any) -> np.ndarray:
    b = np.asarray(bounds, dtype=float).ravel()
    if b.size == 0 or not np.all(np.isfinite(b)) or np.any(b <= 0):
        raise ValueError(f"bounds must be finite and > 0, got {b.tolist()}")
    return b


def quadratic_l1_sensitivity(bounds: Any, *, constant_last: bool = False) -> float:
    """L1 sensitivity of the upper triangle of v v' over the box |v_j| <= b_j.

    (S_b^2 + R^2) / 2 with S_b = sum b_j, R^2 = sum b_j^2, for substitute and add/remove
    one record (PROOF.md, §2). ``constant_last``: v_last is +-1 (logistic), so the entry
    v_last^2 = 1 never changes and is not released: the bound minus 1/2 (b_last = 1).
    """
    b = _bounds_vector(bounds)
    out = (float(b.sum()) ** 2 + float(b @ b)) / 2.0
    if constant_last:
        if b[-1] != 1.0:
            raise ValueError("a constant last coordinate must have bound 1")
        out -= 0.5
    return out


def quadratic_l2_sensitivity(
    bounds: Any, neighbours: Neighbours, *, constant_last: bool = False
) -> float:
    """L2 sensitivity of the Frobenius-weighted upper triangle of v v' (PROOF.md, §3).

    Substitute: ||vv' - ww'||_F^2 = ||v||^4 + ||w||^4 - 2 (v'w)^2 <= 2 R^4, so sqrt(2) R^2.
    Add/remove: ||vv'||_F = ||v||^2 <= R^2 (logistic: the constant entry 1 is not released,
    sqrt(R^4 - 1)).
    """
    b = _bounds_vector(bounds)
    r2 = float(b @ b)
    if neighbours is Neighbours.SUBSTITUTE:
        return math.sqrt(2.0) * r2
    return math.sqrt(r2 * r2 - 1.0) if constant_last else r2


def upper_triangle(m: int, *, constant_last: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Row and column indices (i <= j) of the released entries of an m x m statistic."""
    rows, cols = np.triu_indices(m)
    if constant_last:
        keep = ~((rows == m - 1) & (cols == m - 1))
        rows, cols = rows[keep], cols[keep]
    return rows, cols


def entry_noise_sd(kind: str, sigma_or_scale: float, m: int) -> np.ndarray:
    """Standard deviation of the noise on each entry of the released m x m matrix.

    Laplace of scale s: sqrt(2) s everywhere. Gaussian of sd sigma on the weighted vector
    (off-diagonal entries times sqrt(2)): sigma on the diagonal, sigma / sqrt(2) off it.
    """
    if kind == "laplace":
        return np.full((m, m), math.sqrt(2.0) * sigma_or_scale)
    out = np.full((m, m), sigma_or_scale / math.sqrt(2.0))
    np.fill_diagonal(out, sigma_or_scale)
    return out


def _noise_kind(noise: Any, delta: float) -> str:
    if noise is None:
        return "gaussian" if delta > 0 else "laplace"
    if noise not in NOISES:
        raise ValueError(f"noise must be 'laplace' or 'gaussian', got {noise!r}")
    if noise == "laplace" and delta:
        raise ValueError("delta must be 0 for noise='laplace' (it is pure eps-DP)")
    if noise == "gaussian" and not delta > 0:
        raise ValueError("delta must be > 0 for noise='gaussian'")
    return str(noise)


class _QuadraticRelease:
    """The noise of one SSP release: which entries, which mechanism, how much noise."""

    def __init__(
        self,
        bounds: np.ndarray,
        *,
        constant_last: bool,
        kind: str,
        epsilon: float,
        delta: float,
        neighbours: Neighbours,
        rows_per_user: int | None,
        what: str,
    ) -> None:
        self.m = bounds.size
        self.rows, self.cols = upper_triangle(self.m, constant_last=constant_last)
        factor, self.user = user_level(rows_per_user, neighbours)
        self.kind = kind
        if kind == "laplace":
            sens = factor * quadratic_l1_sensitivity(bounds, constant_last=constant_last)
            self.mech: Any = LaplaceMechanism(
                epsilon=epsilon,
                sensitivity=sens,
                neighbours=neighbours,
                name=f"ssp: laplace on {what} sufficient statistics",
            )
            self.weights = np.ones(self.rows.size)
            noise_param = self.mech.scale
        else:
            sens = factor * quadratic_l2_sensitivity(
                bounds, neighbours, constant_last=constant_last
            )
            self.mech = GaussianMechanism(
                epsilon=epsilon,
                delta=delta,
                sensitivity=sens,
                neighbours=neighbours,
                name=f"ssp: gaussian on {what} sufficient statistics",
            )
            self.weights = np.where(self.rows == self.cols, 1.0, math.sqrt(2.0))
            noise_param = self.mech.sigma
        self.sd = entry_noise_sd(kind, noise_param, self.m)
        self.details = {
            "noise": kind,
            "bounds": bounds.tolist(),
            "noise_sd_diagonal": float(self.sd[0, 0]),
            "noise_sd_offdiagonal": float(self.sd[0, -1]) if self.m > 1 else None,
            "released_entries": int(self.rows.size),
            **self.user,
        }

    def noisy(self, exact: np.ndarray, src: NoiseSource) -> np.ndarray:
        """The symmetric matrix of noisy entries (unreleased constant entry kept exact)."""
        vec = exact[self.rows, self.cols] * self.weights
        noisy = self.mech.release(vec, rng=as_rng(src)).value / self.weights
        out = np.array(exact, dtype=float)
        out[self.rows, self.cols] = noisy
        out[self.cols, self.rows] = noisy
        return out


def _facts(q: _QuadraticRelease, neighbours: Neighbours, n: int) -> dict[str, Any]:
    """The public facts shared by both regressions' records."""
    return {
        "n": neighbours.public_n(n),
        "neighbours": neighbours,
        "sensitivity": q.mech.sensitivity,
        "sensitivity_norm": "L1" if q.kind == "laplace" else "L2",
        **q.details,
    }


@register(
    "ssp", BayesianLinearRegression, options=("noise",), user_level=True, record=SspLinearRecord
)
def plan_linear_ssp(
    model: BayesianLinearRegression,
    stats_: RegressionStatistics,
    *,
    epsilon: float,
    delta: float,
    neighbours: Neighbours,
    allow_non_private: bool = False,
    noise: str | None = None,
    rows_per_user: int | None = None,
) -> Plan:
    """Noisy (X'X, X'y, y'y) of linear regression (Bernstein & Sheldon 2019, §3).

    Privacy: features in |x_j| <= B (the box contains the model's ball when
    ``clip="ball"``), labels in |y| <= B_y; the upper triangle of S = sum (x, y)(x, y)'
    changes by at most Delta_1 in L1 / Delta_2 in L2 (module docstring, PROOF.md), so
    Laplace(Delta_1 / eps) is eps-DP and the analytic Gaussian is (eps, delta)-DP.
    """
    kind = _noise_kind(noise, delta)
    if model.feature_bound is None or model.label_bound is None:
        raise ValueError("model must set feature_bound and label_bound for mechanism 'ssp'")
    d = stats_.xtx.shape[0]
    bounds = np.r_[np.full(d, model.feature_bound), model.label_bound]
    q = _QuadraticRelease(
        bounds,
        constant_last=False,
        kind=kind,
        epsilon=epsilon,
        delta=delta,
        neighbours=neighbours,
        rows_per_user=rows_per_user,
        what="linear-regression",
    )
    exact = np.zeros((d + 1, d + 1))
    exact[:d, :d] = stats_.xtx
    exact[:d, d] = exact[d, :d] = stats_.xty
    exact[d, d] = stats_.yty
    n = int(stats_.n)
    record = SspLinearRecord(**_facts(q, neighbours, n))

    def run(src: NoiseSource) -> Release:
        s = q.noisy(exact, src)
        xtx, xty, yty = s[:d, :d], s[:d, d], float(s[d, d])
        naive = RegressionStatistics(xtx=psd_projection(xtx), xty=xty, yty=yty, n=n)
        return Release(
            model=model,
            mechanism="ssp",
            posterior=model.posterior_from(naive),
            guarantee=q.mech.guarantee(simulation=src.simulation, **q.details),
            released={"xtx": xtx.tolist(), "xty": xty.tolist(), "yty": yty},
            public=record.to_public(),
        )

    return Plan(guarantee=q.mech.guarantee(**q.details), run=run)


@register(
    "ssp",
    BayesianLogisticRegression,
    options=("noise",),
    user_level=True,
    record=SspLogisticRecord,
)
def plan_logistic_ssp(
    model: BayesianLogisticRegression,
    stats_: LogisticStatistics,
    *,
    epsilon: float,
    delta: float,
    neighbours: Neighbours,
    allow_non_private: bool = False,
    noise: str | None = None,
    rows_per_user: int | None = None,
) -> Plan:
    """Noisy PASS-GLM statistics (t1 = sum y x, T2 = X'X) of logistic regression.

    Privacy: v = (y x, 1) lies in the box (B, ..., B, 1) and S = sum v v' holds T2, t1 and
    the constant n; its released upper triangle changes by at most Delta_1 in L1 /
    Delta_2 in L2 (module docstring, PROOF.md).
    """
    kind = _noise_kind(noise, delta)
    d = stats_.t1.size
    bounds = np.r_[np.full(d, model.feature_bound), 1.0]
    q = _QuadraticRelease(
        bounds,
        constant_last=True,
        kind=kind,
        epsilon=epsilon,
        delta=delta,
        neighbours=neighbours,
        rows_per_user=rows_per_user,
        what="PASS-GLM logistic",
    )
    n = int(stats_.n)
    exact = np.zeros((d + 1, d + 1))
    exact[:d, :d] = stats_.t2
    exact[:d, d] = exact[d, :d] = stats_.t1
    exact[d, d] = 0.0  # the constant n: never released
    a = model.coefficients(d)
    record = SspLogisticRecord(
        **_facts(q, neighbours, n),
        radius=model.approximation_radius(d),
        coefficients=a.tolist(),
    )

    def run(src: NoiseSource) -> Release:
        s = q.noisy(exact, src)
        t2, t1 = s[:d, :d], s[:d, d]
        return Release(
            model=model,
            mechanism="ssp",
            posterior=model.posterior_from(LogisticStatistics(t1=t1, t2=t2, n=n)),
            guarantee=q.mech.guarantee(simulation=src.simulation, **q.details),
            released={"xtx": t2.tolist(), "t1": t1.tolist()},
            public=record.to_public(),
        )

    return Plan(guarantee=q.mech.guarantee(**q.details), run=run)
