"""Bayesian linear regression with known noise variance: exact, non-private posterior.

Paper 004 §5.2: y = x'w + e, e ~ N(0, sigma^2) with sigma^2 known, and the prior
w ~ N(0, I / lambda) (``prior_precision`` lambda). The posterior is Gaussian with
precision ``lambda I + X'X / sigma^2`` and mean ``Sigma X'y / sigma^2``.

For private posterior sampling (``dpbayes.release.regression.mechanism``) the model also
carries public bounds: each feature row is scaled into the ball ||x||_2 <= feature_bound,
each label clipped to [-label_bound, label_bound], and the prior truncated to the ball
||w||_2 <= weight_bound (the truncation enters only the private sampler).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from dpbayes.data.exact import as_doubles
from dpbayes.display import PosteriorDisplay
from dpbayes.privacy.validation import check_array, check_int, check_positive

if TYPE_CHECKING:
    from dpbayes.data.exact import ExactMoments

__all__ = [
    "BayesianLinearRegression",
    "MultivariateNormal",
    "RegressionStatistics",
    "RegressionWeights",
    "check_ball_radius",
    "ridge_gaussian",
    "scale_into_ball",
]


@dataclass(frozen=True, eq=False, repr=False)
class MultivariateNormal(PosteriorDisplay):
    """N(mean, cov) on R^d; scipy.stats-like methods."""

    mean_: np.ndarray
    cov: np.ndarray
    family = "multivariate-normal"

    def mean(self) -> np.ndarray:
        return self.mean_

    def var(self) -> np.ndarray:
        return np.diag(self.cov).copy()

    def std(self) -> np.ndarray:
        return np.sqrt(self.var())

    def to_scipy(self) -> Any:
        from scipy import stats

        return stats.multivariate_normal(mean=self.mean_, cov=self.cov, allow_singular=False)

    def logpdf(self, x: Any) -> Any:
        return self.to_scipy().logpdf(x)

    def pdf(self, x: Any) -> Any:
        return self.to_scipy().pdf(x)

    def interval(self, level: float = 0.95) -> np.ndarray:
        """Per-coordinate central intervals, shape (d, 2)."""
        from scipy import stats

        z = stats.norm.ppf(0.5 + level / 2)
        s = self.std()
        return np.stack([self.mean_ - z * s, self.mean_ + z * s], axis=1)

    def to_dict(self) -> dict[str, Any]:
        return {"family": self.family, "mean": self.mean_.tolist(), "cov": self.cov.tolist()}


def ridge_gaussian(
    prior_precision: float, gram: np.ndarray, scale: float, rhs: np.ndarray
) -> MultivariateNormal:
    """N(P^-1 rhs, P^-1) with the precision P = prior_precision I + scale psd(gram).

    psd(gram) is the nearest positive semi-definite matrix to (gram + gram') / 2 (its
    eigenvalues clipped at 0). Computed in gram's eigenbasis, where P is diagonal with
    entries prior_precision + scale max(ev, 0) >= prior_precision > 0 (scale >= 0), so it
    exists for every finite gram: nothing is factorised. A Cholesky factor of P fails in
    floating point when prior_precision is below the rounding error of scale * gram, and
    after a release's noise such a failure would depend on the data.
    """
    if not (prior_precision > 0 and scale >= 0):
        raise ValueError(
            f"ridge_gaussian needs prior_precision > 0 and scale >= 0, got "
            f"{prior_precision} and {scale}"
        )
    g = np.asarray(gram, dtype=float)
    vals, vecs = np.linalg.eigh((g + g.T) / 2)
    diag = prior_precision + scale * np.maximum(vals, 0.0)
    cov = (vecs / diag) @ vecs.T
    mean = vecs @ ((vecs.T @ np.asarray(rhs, dtype=float)) / diag)
    return MultivariateNormal(mean_=mean, cov=(cov + cov.T) / 2)


@dataclass(frozen=True, eq=False)
class RegressionStatistics:
    """Sufficient statistics X'X, X'y, y'y and n of (bounded) data."""

    xtx: np.ndarray
    xty: np.ndarray
    yty: float
    n: int
    #: The exact sums on the public grid (``data.exact``), when the data were bounded;
    #: xtx, xty, yty are then these rounded once per entry.
    exact: ExactMoments | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "n", check_int(self.n, "n", minimum=0))

    def to_dict(self) -> dict[str, Any]:
        return {"xtx": self.xtx.tolist(), "xty": self.xty.tolist(), "yty": self.yty, "n": self.n}


class BayesianLinearRegression:
    """Bayesian linear regression, prior N(0, I/prior_precision), known noise variance.

    Parameters
    ----------
    prior_precision:
        lambda > 0, the prior precision of every weight.
    noise_variance:
        sigma^2 > 0, the variance of the label noise.
    feature_bound, label_bound, weight_bound:
        Public bounds (> 0) for private releases: rows with ||x||_2 > feature_bound are
        scaled onto the sphere, labels clipped to [-label_bound, label_bound]; the
        private sampler truncates the prior to ||w||_2 <= weight_bound. ``None``: no bound
        (the exact posterior needs none).
    features, target:
        Column names used when ``data`` is a table; otherwise data is ``(X, y)``.
    clip:
        ``"ball"`` (default): rows scaled into ||x||_2 <= feature_bound; ``"box"``: every
        feature clipped to [-feature_bound, feature_bound] (the sufficient-statistics
        release ``mechanism="ssp"`` uses the box and the ball's bound on ||x||^2).
    norm_bound:
        R > 0 or ``None`` (default): after the clip, rows scaled into ||x||_2 <= R. The
        ``"ssp"`` release's noise (Gaussian and Laplace) is calibrated to the smaller of
        R^2 and the clip's bound on ||x||^2 (d B^2 for the box, B^2 for the ball).
    """

    def __init__(
        self,
        *,
        prior_precision: float = 1.0,
        noise_variance: float = 1.0,
        feature_bound: float | None = None,
        label_bound: float | None = None,
        weight_bound: float | None = None,
        features: list[str] | None = None,
        target: str | None = None,
        clip: str = "ball",
        norm_bound: float | None = None,
    ) -> None:
        if clip not in ("ball", "box"):
            raise ValueError(f"clip must be 'ball' or 'box', got {clip!r}")
        self.clip = clip
        self.norm_bound = None if norm_bound is None else check_positive(norm_bound, "norm_bound")
        self.prior_precision = check_positive(prior_precision, "prior_precision")
        self.noise_variance = check_positive(noise_variance, "noise_variance")
        self.feature_bound = (
            None if feature_bound is None else check_positive(feature_bound, "feature_bound")
        )
        self.label_bound = (
            None if label_bound is None else check_positive(label_bound, "label_bound")
        )
        self.weight_bound = (
            None if weight_bound is None else check_positive(weight_bound, "weight_bound")
        )
        self.features = None if features is None else [str(f) for f in features]
        self.target = target

    def __repr__(self) -> str:
        return (
            f"BayesianLinearRegression(prior_precision={self.prior_precision}, "
            f"noise_variance={self.noise_variance}, feature_bound={self.feature_bound}, "
            f"label_bound={self.label_bound}, weight_bound={self.weight_bound}"
            + (", clip='box'" if self.clip == "box" else "")
            + ("" if self.norm_bound is None else f", norm_bound={self.norm_bound}")
            + ")"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "family": "bayesian-linear-regression",
            "prior_precision": self.prior_precision,
            "noise_variance": self.noise_variance,
            "feature_bound": self.feature_bound,
            "label_bound": self.label_bound,
            "weight_bound": self.weight_bound,
            "features": self.features,
            "target": self.target,
            **({"clip": "box"} if self.clip == "box" else {}),
            **({} if self.norm_bound is None else {"norm_bound": self.norm_bound}),
        }

    def row_norm2(self, d: int) -> float:
        """The public bound on ||x||^2 of a bounded row of d features (needs feature_bound)."""
        if self.feature_bound is None:
            raise ValueError("feature_bound must be set")
        b2 = self.feature_bound**2 * (d if self.clip == "box" else 1)
        return b2 if self.norm_bound is None else min(b2, self.norm_bound**2)

    def bounded(self, x: Any, y: Any = None) -> tuple[np.ndarray, np.ndarray | None]:
        """Rows scaled into the feature ball and labels clipped (data-independent maps).

        With a bound, +-inf is a value like any other (clipped, or capped at
        +-``COORDINATE_CAP`` before a row is scaled into the ball), as in the engine
        (:func:`~dpbayes.models.regression_engine.engine_moments`); NaN is a missing value.
        """
        xa = finite_or_bounded(x, "X", 2, self.feature_bound is not None)
        if self.feature_bound is not None and self.clip == "box":
            xa = np.clip(xa, -self.feature_bound, self.feature_bound)
        elif self.feature_bound is not None:
            xa = scale_into_ball(np.clip(xa, -COORDINATE_CAP, COORDINATE_CAP), self.feature_bound)
        xa = scale_into_ball(xa, self.norm_bound)
        if y is None:
            return xa, None
        ya = finite_or_bounded(y, "y", 1, self.label_bound is not None)
        if ya.size != xa.shape[0]:
            raise ValueError(f"y must have {xa.shape[0]} entries (rows of X), got {ya.size}")
        if self.label_bound is not None:
            ya = np.clip(ya, -self.label_bound, self.label_bound)
        return xa, ya

    def _xy(self, data: Any) -> tuple[np.ndarray, np.ndarray]:
        return regression_xy(data, self.features, self.target)

    def statistics(self, data: Any, column: str | None = None) -> RegressionStatistics:
        """X'X, X'y, y'y, n of the bounded data."""
        if column is not None:
            raise ValueError("column must be None for a regression (set features/target)")
        if not in_memory(data):  # files, databases, Spark: one aggregate in the engine
            from dpbayes.models.regression_engine import engine_moments

            n, m, exact = engine_moments(
                data,
                self.features,
                self.target,
                feature_bound=self.feature_bound,
                clip=self.clip,
                label="clip",
                label_bound=self.label_bound,
                norm_bound=self.norm_bound,
            )
        else:
            x, y = self.bounded(*self._xy(data))
            assert y is not None
            from dpbayes.data.exact import moments

            # exact sums on the public grid (data.exact), as the engines compute them
            n = x.shape[0]
            bounds = [*([self.feature_bound] * x.shape[1]), self.label_bound]
            m, exact = moments(np.column_stack([x, y]), bounds)
        return RegressionStatistics(
            xtx=m[:-1, :-1], xty=m[:-1, -1], yty=float(m[-1, -1]), n=n, exact=exact
        )

    def posterior_from(
        self, stats_: RegressionStatistics, noise_variance: float | None = None
    ) -> MultivariateNormal:
        """The Gaussian posterior (untruncated prior); ``noise_variance`` overrides sigma^2.
        X'X is taken as positive semi-definite (:func:`ridge_gaussian`)."""
        s2 = self.noise_variance if noise_variance is None else noise_variance
        return ridge_gaussian(self.prior_precision, stats_.xtx, 1.0 / s2, stats_.xty / s2)

    def exact_posterior(self, data: Any) -> MultivariateNormal:
        """The non-private posterior given ``data``."""
        return self.posterior_from(self.statistics(data))

    def predictive(self, posterior: MultivariateNormal, x: Any) -> tuple[np.ndarray, np.ndarray]:
        """Posterior predictive mean and variance of y at the rows of ``x``."""
        xa, _ = self.bounded(x)
        mean = xa @ posterior.mean_
        var = np.einsum("ij,jk,ik->i", xa, posterior.cov, xa) + self.noise_variance
        return mean, var


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


# +-inf (and any larger value) is capped here before a row is scaled into a ball: the
# squares of d capped coordinates stay finite (d * 1e300), so the norm does not overflow
COORDINATE_CAP = 1e150

MISSING_VALUE = (
    "data has rows with a missing value: drop or impute them first (a regression reads "
    "every feature and the label)"
)


def finite_or_bounded(value: Any, name: str, ndim: int, bounded: bool) -> np.ndarray:
    """``value`` as a float array; NaN is refused as a missing value, +-inf too unless a
    public bound maps it into range (``bounded``: the caller clips)."""
    arr = check_array(value, name, ndim=ndim, min_size=0, finite=False)
    if np.isnan(arr).any():
        raise ValueError(MISSING_VALUE)
    if not bounded and np.isinf(arr).any():
        raise ValueError(f"{name} must contain only finite numbers (no bound is set to clip it)")
    return arr


#: The smallest radius a row is scaled into (in memory and in every engine): outside a
#: ball at least this wide a row's norm is above it, so every coordinate that counts
#: (>= 2^-26 of the norm) has a normal square, and the squares that underflow move the
#: norm by a relative d 1e-28 at most. Below it a row of coordinates near 1e-160 had a
#: computed norm of 0 (or far too small) and passed through unscaled (a review).
MIN_BALL_RADIUS = 1e-140


def check_ball_radius(radius: float, name: str) -> None:
    """A ball's public radius, checked: at least :data:`MIN_BALL_RADIUS`."""
    if not radius >= MIN_BALL_RADIUS:
        raise ValueError(
            f"{name} = {radius:g} is below {MIN_BALL_RADIUS:g}, the smallest ball a row is "
            "scaled into (its squared norm would underflow): rescale the data"
        )


def scale_into_ball(x: np.ndarray, radius: float | None) -> np.ndarray:
    """Rows with ||x||_2 > radius scaled onto the sphere of that radius (None: as is).

    The engines' formula (:func:`~dpbayes.models.regression_engine._into_ball`), in the
    same IEEE operations: outside the ball a coordinate is (x / norm) radius, or 0 where
    |x| < 2^-26 norm (below the public grid's step once scaled). x / norm is in
    [2^-26, 1], so nothing overflows or underflows to 0.
    """
    if radius is None:
        return x
    check_ball_radius(radius, "the radius")
    xa = np.asarray(x, dtype=float)
    norms = np.linalg.norm(xa, axis=1)[:, None]
    outside = norms > radius
    if not outside.any():
        return xa
    with np.errstate(divide="ignore", invalid="ignore"):  # rows inside: not used
        scaled = np.where(np.abs(xa) < norms * 2.0**-26, 0.0, (xa / norms) * radius)
    return np.asarray(np.where(outside, scaled, xa))


def _frame_doubles(frame: Any) -> np.ndarray:
    """A pandas frame's (or series') values as doubles, as :func:`as_doubles` reads them."""
    try:
        return np.asarray(frame.to_numpy(float))
    except OverflowError:
        return as_doubles(frame.to_numpy())


def in_memory(data: Any) -> bool:
    """Whether ``data`` is an (X, y) pair or a pandas DataFrame (read by numpy)."""
    pd = sys.modules.get("pandas")
    return (isinstance(data, tuple) and len(data) == 2) or (
        pd is not None and isinstance(data, pd.DataFrame)
    )


def regression_xy(
    data: Any, features: list[str] | None, target: str | None
) -> tuple[np.ndarray, np.ndarray]:
    """(X, y) of a regression's data: an (X, y) pair, or a DataFrame's ``features`` and
    ``target`` columns."""
    pd = sys.modules.get("pandas")  # not imported: data cannot be a pandas frame
    if pd is not None and isinstance(data, pd.DataFrame):
        if features is None or target is None:
            raise ValueError("features and target must be set to read a table")
        missing = [c for c in [*features, target] if c not in data.columns]
        if missing:
            raise ValueError(f"data has no column(s) {missing}")
        return _frame_doubles(data[features]), _frame_doubles(data[target])
    if isinstance(data, tuple) and len(data) == 2:
        return as_doubles(data[0]), as_doubles(data[1])
    raise TypeError(f"data must be (X, y) or a DataFrame, got {type(data).__name__}")
