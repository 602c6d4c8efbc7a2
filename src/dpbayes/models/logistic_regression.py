"""Bayesian logistic regression with a PASS-GLM quadratic likelihood: non-private part.

Huggins, Adams & Broderick 2017 ("PASS-GLM: polynomial approximate sufficient
statistics for scalable Bayesian GLM inference"): on a public interval [-R, R] the
log-likelihood phi(s) = log sigmoid(s) of a margin s = y x'w (y in {-1, +1}) is replaced
by its degree-2 Chebyshev interpolant a0 + a1 s + a2 s^2, so that (y^2 = 1)

    sum_i phi(y_i x_i'w) ~ n a0 + a1 w' t1 + a2 w' T2 w,  t1 = sum y_i x_i,  T2 = sum x_i x_i'.

With the prior w ~ N(0, I / lambda) the approximate posterior is Gaussian with precision
lambda I - 2 a2 T2 (a2 < 0) and mean (lambda I - 2 a2 T2)^-1 a1 t1. The private release
of (t1, T2) lives in ``dpbayes.release.ssp``; features are clipped to the public box
|x_j| <= feature_bound.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from dpbayes.models.linear_regression import (
    MultivariateNormal,
    finite_or_bounded,
    in_memory,
    regression_xy,
    ridge_gaussian,
    scale_into_ball,
)
from dpbayes.privacy.validation import check_int, check_positive

if TYPE_CHECKING:
    from dpbayes.data.exact import ExactMoments

__all__ = [
    "BayesianLogisticRegression",
    "LogisticStatistics",
    "chebyshev_log_sigmoid",
    "psd_projection",
]


def psd_projection(a: np.ndarray) -> np.ndarray:
    """The nearest positive semi-definite matrix in Frobenius norm (eigenvalues clipped at 0)."""
    sym = (np.asarray(a, dtype=float) + np.asarray(a, dtype=float).T) / 2
    vals, vecs = np.linalg.eigh(sym)
    out = (vecs * np.maximum(vals, 0.0)) @ vecs.T
    return np.asarray((out + out.T) / 2)


def chebyshev_log_sigmoid(radius: float, degree: int = 2) -> np.ndarray:
    """Power-basis coefficients (a0, a1, a2) of the Chebyshev interpolant of log sigmoid.

    Interpolation at the degree + 1 Chebyshev points of the first kind on [-radius, radius]
    (Huggins et al. 2017, §3 use Chebyshev approximations). Only degree 2 is supported.
    Its points are -s, 0 and s with s = radius sqrt(3) / 2, and with f = log sigmoid,
    f(s) - f(-s) = s and f(s) + f(-s) - 2 f(0) = -2 log cosh(s / 2), so in closed form
    a0 = -log 2, a1 = 1/2 and a2 = -log cosh(s / 2) / s^2 < 0, computed without
    cancellation at every radius (a2 -> -1/8 as the radius -> 0).
    """
    r = check_positive(radius, "radius")
    deg = check_int(degree, "degree", minimum=1)
    if deg != 2:
        raise ValueError(f"degree must be 2 (the quadratic PASS-GLM approximation), got {deg}")
    s = r * math.sqrt(3.0) / 2.0
    if s < 1e-4:  # log cosh x = x^2 / 2 - x^4 / 12 + O(x^6), at x = s / 2
        a2 = -(0.125 - s * s / 192.0)
    else:
        h = s / 2.0
        # log cosh h = log1p(2 sinh(h / 2)^2) for moderate h; h - log 2 + log1p(e^-2h) beyond
        log_cosh = math.log1p(2.0 * math.sinh(h / 2.0) ** 2) if h < 20.0 else (
            h - math.log(2.0) + math.log1p(math.exp(-2.0 * h))
        )  # fmt: skip
        a2 = -(log_cosh / s) / s
    return np.array([-math.log(2.0), 0.5, a2])


@dataclass(frozen=True, eq=False)
class LogisticStatistics:
    """t1 = sum y_i x_i (y in {-1, +1}), T2 = sum x_i x_i' and n of box-clipped data."""

    t1: np.ndarray
    t2: np.ndarray
    n: int
    #: The exact sums of v v', v = (x, y), on the public grid (``data.exact``), when the
    #: features were bounded; t1 and t2 are then these rounded once per entry.
    exact: ExactMoments | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "n", check_int(self.n, "n", minimum=0))

    def to_dict(self) -> dict[str, Any]:
        return {"t1": self.t1.tolist(), "t2": self.t2.tolist(), "n": self.n}


class BayesianLogisticRegression:
    """Bayesian logistic regression, prior N(0, I / prior_precision), PASS-GLM likelihood.

    Parameters
    ----------
    prior_precision:
        lambda > 0, the prior precision of every weight.
    feature_bound:
        B > 0: every feature is clipped to [-B, B] (a public, data-independent map).
    norm_bound:
        ``None`` (default) or R_x > 0: after the box, every row is scaled into
        ||x||_2 <= R_x (public, data-independent); the release's noise (Gaussian and
        Laplace) is then calibrated to min(d B^2, R_x^2) instead of d B^2.
    radius:
        R > 0 of the approximation interval [-R, R] for the margin y x'w; ``None``:
        R = R_x / sqrt(lambda), the largest row norm R_x (B sqrt(d) without ``norm_bound``)
        times the prior's weight scale 1 / sqrt(lambda).
    degree:
        Degree of the polynomial approximation; only 2 is supported.
    features, target:
        Column names used when ``data`` is a table; otherwise data is ``(X, y)`` with
        labels in {0, 1} or {-1, +1}.
    """

    family = "bayesian-logistic-regression"

    def __init__(
        self,
        *,
        prior_precision: float = 1.0,
        feature_bound: float = 1.0,
        norm_bound: float | None = None,
        radius: float | None = None,
        degree: int = 2,
        features: list[str] | None = None,
        target: str | None = None,
    ) -> None:
        self.prior_precision = check_positive(prior_precision, "prior_precision")
        self.feature_bound = check_positive(feature_bound, "feature_bound")
        self.norm_bound = None if norm_bound is None else check_positive(norm_bound, "norm_bound")
        self.radius = None if radius is None else check_positive(radius, "radius")
        deg = check_int(degree, "degree", minimum=1)
        if deg != 2:
            raise ValueError(f"degree must be 2 (the quadratic PASS-GLM approximation), got {deg}")
        self.degree = deg
        self.features = None if features is None else [str(f) for f in features]
        self.target = target

    def __repr__(self) -> str:
        return (
            f"BayesianLogisticRegression(prior_precision={self.prior_precision}, "
            f"feature_bound={self.feature_bound}, radius={self.radius}, degree={self.degree}"
            + ("" if self.norm_bound is None else f", norm_bound={self.norm_bound}")
            + ")"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "family": self.family,
            "prior_precision": self.prior_precision,
            "feature_bound": self.feature_bound,
            **({} if self.norm_bound is None else {"norm_bound": self.norm_bound}),
            "radius": self.radius,
            "degree": self.degree,
            "features": self.features,
            "target": self.target,
        }

    def approximation_radius(self, d: int) -> float:
        """R of the approximation interval for d features (the option, or its default)."""
        if self.radius is not None:
            return self.radius
        return math.sqrt(self.row_norm2(d)) / math.sqrt(self.prior_precision)

    def row_norm2(self, d: int) -> float:
        """The public bound on ||x||^2 of a bounded row of d features."""
        b2 = self.feature_bound**2 * d
        return b2 if self.norm_bound is None else min(b2, self.norm_bound**2)

    def coefficients(self, d: int) -> np.ndarray:
        """(a0, a1, a2) of log sigmoid(s) ~ a0 + a1 s + a2 s^2 on [-R, R]."""
        return chebyshev_log_sigmoid(self.approximation_radius(d), self.degree)

    def bounded(self, x: Any, y: Any = None) -> tuple[np.ndarray, np.ndarray | None]:
        """Features clipped to the box (and the ball); labels mapped to {-1, +1} (0 -> -1)."""
        b = self.feature_bound
        xa = np.clip(finite_or_bounded(x, "X", 2, True), -b, b)  # +-inf clipped as in the engine
        xa = scale_into_ball(xa, self.norm_bound)
        if y is None:
            return xa, None
        ya = finite_or_bounded(y, "y", 1, True)  # +-inf: refused below as a label
        if ya.size != xa.shape[0]:
            raise ValueError(f"y must have {xa.shape[0]} entries (rows of X), got {ya.size}")
        if not np.all(np.isin(ya, (-1.0, 0.0, 1.0))):
            raise ValueError("y must hold labels in {0, 1} or {-1, +1}")
        return xa, np.where(ya > 0, 1.0, -1.0)

    def _xy(self, data: Any) -> tuple[np.ndarray, np.ndarray]:
        return regression_xy(data, self.features, self.target)

    def statistics(self, data: Any, column: str | None = None) -> LogisticStatistics:
        """t1 = sum y x, T2 = X'X and n of the bounded data."""
        if column is not None:
            raise ValueError("column must be None for a regression (set features/target)")
        if not in_memory(data):  # files, databases, Spark: one aggregate in the engine
            from dpbayes.models.regression_engine import engine_moments

            n, m, exact = engine_moments(
                data,
                self.features,
                self.target,
                feature_bound=self.feature_bound,
                clip="box",
                label="sign",
                norm_bound=self.norm_bound,
            )
        else:
            x, y = self.bounded(*self._xy(data))
            assert y is not None
            from dpbayes.data.exact import moments

            # exact sums on the public grid (data.exact), as the engines compute them
            n = x.shape[0]
            m, exact = moments(np.column_stack([x, y]), [*([self.feature_bound] * x.shape[1]), 1.0])
        return LogisticStatistics(t1=m[:-1, -1], t2=m[:-1, :-1], n=n, exact=exact)

    def posterior_from(self, stats_: LogisticStatistics) -> MultivariateNormal:
        """The Gaussian PASS-GLM posterior, precision lambda I - 2 a2 psd(T2): T2 is
        projected onto the PSD cone (:func:`ridge_gaussian`; a2 < 0, checked by
        :func:`chebyshev_log_sigmoid`)."""
        d = stats_.t1.size
        _, a1, a2 = self.coefficients(d)
        t1 = a1 * np.asarray(stats_.t1, dtype=float)
        return ridge_gaussian(self.prior_precision, stats_.t2, -2.0 * a2, t1)

    def exact_posterior(self, data: Any) -> MultivariateNormal:
        """The non-private (PASS-GLM approximate) posterior given ``data``."""
        return self.posterior_from(self.statistics(data))

    def predict_proba(self, posterior: Any, x: Any) -> np.ndarray:
        """P(y = 1 | x) under the posterior predictive, probit approximation (MacKay 1992):
        E sigmoid(x'w) ~ sigmoid(m / sqrt(1 + pi v / 8)), m, v the mean, variance of x'w."""
        xa, _ = self.bounded(x)
        mean = np.asarray(posterior.mean(), dtype=float)
        cov = posterior.cov() if callable(posterior.cov) else posterior.cov
        m = xa @ mean
        v = np.einsum("ij,jk,ik->i", xa, np.asarray(cov, dtype=float), xa)
        z = m / np.sqrt(1.0 + math.pi * np.maximum(v, 0.0) / 8.0)
        return np.asarray(1.0 / (1.0 + np.exp(-z)))
