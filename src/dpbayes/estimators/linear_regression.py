"""PrivateBayesianLinearRegression: posterior sampling, or sufficient statistics (``"ssp"``).

Paper 004 §5.2. Features are clipped to public ``feature_bounds`` and scaled to [-1, 1]
(plus an intercept column of ones), labels clipped to public ``label_bounds`` and scaled
to [-1, 1]; the prior N(0, I / prior_precision) is truncated to ||w||_2 <= weight_bound.
Then |y - x'w| <= 1 + sqrt(d') W (d' columns), and one draw from the posterior with noise
variance sigma^2 is eps-DP for eps = (1 + sqrt(d') W)^2 / sigma^2 (substitute): given eps,
sigma^2 follows. Predictions are x'w of the released draw, clipped to the label bounds,
so the model never diverges.

``mechanism="ssp"`` instead releases X'X, X'y, y'y of the scaled data once, with Laplace
(``delta=0``) or Gaussian (``delta > 0``) noise (Bernstein & Sheldon 2019,
``dpbayes.release.ssp``), and predicts with the mean of the posterior from the noisy
statistics; ``weight_bound`` and ``draws`` do not apply. There ``prior_precision="auto"``
(the default) sets lambda = 1 + s sqrt(d) / sigma^2, s the noise sd on an off-diagonal
entry of X'X: a ridge as large as the typical eigenvalue of the noise matrix, as AdaSSP
(Wang 2018). It depends on public facts only, so choosing it spends nothing.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from dpbayes.estimators._base import (
    BaseEstimator,
    DataConversionWarning,
    NotFittedError,
    RegressorMixin,
    check_fit_budget,
    fit_whole_or_not,
    resolve_norm_bound,
    scaled_design,
)
from dpbayes.estimators.naive_bayes import _keep_objects, _numbers, check_features
from dpbayes.models.linear_regression import BayesianLinearRegression
from dpbayes.privacy import Guarantee
from dpbayes.privacy.validation import check_delta, check_epsilon, check_positive, check_range
from dpbayes.release import release
from dpbayes.release.base import plan
from dpbayes.release.regression import mechanism as _sampling  # noqa: F401  (registers it)

__all__ = ["PrivateBayesianLinearRegression"]


def _bounds(value: Any, d: int, name: str) -> np.ndarray:
    """(d, 2) array of (lower, upper) from one pair or one pair per feature."""
    if value is None:
        raise ValueError(f"{name} must be given (public, data-independent bounds)")
    arr = np.asarray(value, dtype=float)
    if arr.shape == (2,):
        lo, hi = check_range(tuple(arr.tolist()), name)
        arr = np.tile([lo, hi], (d, 1))
    elif arr.shape != (d, 2):
        raise ValueError(f"{name} must be a pair or one pair per feature ({d}, 2), got {arr.shape}")
    for j in range(d):
        check_range(tuple(arr[j].tolist()), f"{name}[{j}]")
    # the map onto [-1, 1], (clip(x) - (lo + hi) / 2) / ((hi - lo) / 2), must be finite for
    # every value: a half-width that rounds to 0 (lo, hi a few subnormals apart) or a
    # midpoint that overflows made some records NaN and others not, and the refusal of
    # the NaN ("missing value") then told whether a record lay at the upper bound
    mid, half = (arr[:, 0] + arr[:, 1]) / 2, (arr[:, 1] - arr[:, 0]) / 2
    if not (np.all(half > 0) and np.all(np.isfinite(half)) and np.all(np.isfinite(mid))):
        raise ValueError(
            f"{name} are too close together or too large to scale onto [-1, 1] in doubles "
            "(rescale the data)"
        )
    return arr


class PrivateBayesianLinearRegression(RegressorMixin, BaseEstimator):
    """Differentially private Bayesian linear regression: posterior sampling or SSP.

    Parameters
    ----------
    epsilon:
        Privacy budget of the fit (> 0).
    feature_bounds:
        Public (lower, upper) for all features, or an array of shape (n_features, 2).
    label_bounds:
        Public (lower, upper) of the label.
    prior_precision:
        Precision lambda > 0 of the Gaussian prior on the scaled weights, or ``"auto"``:
        1 for ``"sampling"``, calibrated to the noise for ``"ssp"`` (module docstring).
    weight_bound:
        Radius W > 0 of the ball the prior is truncated to (scaled weights).
    noise_variance:
        Label noise variance on the scaled labels; ``None``: the smallest that eps allows
        (``"sampling"``), 1 (``"ssp"``).
    fit_intercept:
        Add a constant column (inside the bounded feature space).
    draws:
        Number of posterior draws released (eps split over them); prediction uses their mean.
    mechanism:
        ``"sampling"`` (one posterior draw, paper 004 §5.2) or ``"ssp"`` (noisy sufficient
        statistics).
    delta:
        ``"ssp"`` only: 0 for Laplace noise (eps-DP), > 0 for Gaussian noise.
    norm_bound:
        ``"ssp"`` only: bound on the L2 norm of a row of the features scaled to [-1, 1]
        (rows beyond it scaled onto it, at fit and predict alike): ``"auto"`` (default)
        sqrt(max(1, p / 3)) for p features, a number > 0, or ``None`` (the box only).
        Both noises are calibrated to it.
    first_order_share:
        ``"ssp"`` only: share of the budget for X'y and y'y (the rest for X'X); ``"auto"``
        (default): 0.5 with either noise; ``None``: one joint release
        (``dpbayes.release.ssp``).
    neighbours, random_state, accountant:
        As for :class:`~dpbayes.estimators.PrivateNaiveBayes`."""

    def __init__(
        self,
        *,
        epsilon: float = 1.0,
        feature_bounds: Any = None,
        label_bounds: Any = None,
        prior_precision: float | str = "auto",
        weight_bound: float = 1.0,
        noise_variance: float | None = None,
        fit_intercept: bool = True,
        draws: int = 1,
        neighbours: str = "substitute",
        random_state: Any = None,
        accountant: Any = None,
        mechanism: str = "sampling",
        delta: float = 0.0,
        norm_bound: float | str | None = "auto",
        first_order_share: float | str | None = "auto",
    ) -> None:
        self.epsilon = epsilon
        self.feature_bounds = feature_bounds
        self.label_bounds = label_bounds
        self.prior_precision = prior_precision
        self.weight_bound = weight_bound
        self.noise_variance = noise_variance
        self.fit_intercept = fit_intercept
        self.draws = draws
        self.neighbours = neighbours
        self.random_state = random_state
        self.accountant = accountant
        self.mechanism = mechanism
        self.delta = delta
        self.norm_bound = norm_bound
        self.first_order_share = first_order_share

    def _design(self, X: Any, neighbours: Any = None) -> np.ndarray:
        arr = check_features(X, numeric=True, neighbours=neighbours)
        return scaled_design(self, arr, self.norm_bound_)

    @fit_whole_or_not
    def fit(self, X: Any, y: Any) -> PrivateBayesianLinearRegression:
        """Release posterior draw(s) of the weights (or noisy statistics) from (X, y)."""
        check_fit_budget(self.accountant, self.random_state)
        if self.mechanism not in ("sampling", "ssp"):
            raise ValueError(f"mechanism must be 'sampling' or 'ssp', got {self.mechanism!r}")
        eps = check_epsilon(self.epsilon)
        dlt = check_delta(self.delta)
        if dlt and self.mechanism == "sampling":
            raise ValueError("delta must be 0 for mechanism='sampling' (it is pure eps-DP)")
        arr = check_features(X, numeric=True, neighbours=self.neighbours)
        if y is None:
            raise ValueError(
                "y must be given: this estimator requires y to be passed, but the target y is None"
            )
        raw = np.asarray(y)
        if np.iscomplexobj(raw) or raw.dtype.kind in "mM":
            raise ValueError(f"y must be real numbers, got dtype {raw.dtype}")
        try:  # value by value, as X: the message never quotes a record's value
            yt = _numbers(_keep_objects(raw, y))
        except (TypeError, ValueError, OverflowError) as exc:
            raise ValueError(f"y must be numeric: {exc}") from None
        if yt.ndim == 2 and yt.shape[1] == 1:
            warnings.warn(
                "A column-vector y was passed when a 1d array was expected; it is flattened",
                DataConversionWarning,
                stacklevel=2,
            )
            yt = yt.ravel()
        if yt.ndim != 1 or yt.size != arr.shape[0]:
            raise ValueError(f"y must be 1-dimensional with {arr.shape[0]} entries")
        if not np.all(np.isfinite(yt)):
            raise ValueError("y must contain only finite numbers (found NaN or infinity)")
        self.n_features_in_ = arr.shape[1]
        self.feature_bounds_ = _bounds(self.feature_bounds, arr.shape[1], "feature_bounds")
        self.label_bounds_ = _bounds(self.label_bounds, 1, "label_bounds")[0]
        ssp = self.mechanism == "ssp"
        self.norm_bound_ = resolve_norm_bound(self.norm_bound, arr.shape[1]) if ssp else None
        z = self._design(arr, self.neighbours)
        ylo, yhi = self.label_bounds_
        ys = (np.clip(yt, ylo, yhi) - (ylo + yhi) / 2) / ((yhi - ylo) / 2)
        noise = (1.0 if ssp else 1e-12) if self.noise_variance is None else self.noise_variance
        if isinstance(self.prior_precision, str) and self.prior_precision != "auto":
            raise ValueError(f"prior_precision must be > 0 or 'auto', got {self.prior_precision!r}")
        auto = isinstance(self.prior_precision, str)
        lam = 1.0 if auto else check_positive(self.prior_precision, "prior_precision")
        if ssp:
            s2 = check_positive(noise, "noise_variance")
            options: dict[str, Any] = {
                "mechanism": "ssp",
                "epsilon": eps,
                "delta": dlt,
                "neighbours": self.neighbours,
                "first_order_share": self.first_order_share,
            }
            nb = None
            if self.norm_bound_ is not None:
                nb = float(np.sqrt(self.norm_bound_**2 + (1.0 if self.fit_intercept else 0.0)))

            def model(lam: float) -> BayesianLinearRegression:
                return BayesianLinearRegression(
                    prior_precision=lam,
                    noise_variance=s2,
                    feature_bound=1.0,
                    label_bound=1.0,
                    clip="box",
                    norm_bound=nb,
                )

            if auto:
                sd = plan(model(1.0), (z, ys), **options).guarantee.details["noise_sd_offdiagonal"]
                lam = 1.0 + float(sd or 0.0) * np.sqrt(z.shape[1]) / s2
            self.prior_precision_ = lam
            self.model_ = model(lam)
            self.release_ = release(
                self.model_,
                (z, ys),
                rng=self.random_state,
                accountant=self.accountant,
                **options,
            )
            self.guarantee_: Guarantee = self.release_.guarantee
            self.coef_scaled_ = np.asarray(self.release_.posterior.mean())
            return self
        self.prior_precision_ = lam
        self.model_ = BayesianLinearRegression(
            prior_precision=lam,
            noise_variance=check_positive(noise, "noise_variance"),
            feature_bound=float(np.sqrt(z.shape[1])),
            label_bound=1.0,
            weight_bound=check_positive(self.weight_bound, "weight_bound"),
        )
        self.release_ = release(
            self.model_,
            (z, ys),
            mechanism="sampling",
            epsilon=eps,
            rng=self.random_state,
            accountant=self.accountant,
            neighbours=self.neighbours,
            draws=self.draws,
        )
        self.guarantee_ = self.release_.guarantee
        self.coef_scaled_ = np.asarray(self.release_.posterior.weights)
        return self

    def predict(self, X: Any) -> np.ndarray:
        """x'w of the released draw, mapped back to label units and clipped to the bounds."""
        if not hasattr(self, "release_"):
            raise NotFittedError(
                "This PrivateBayesianLinearRegression instance is not fitted yet. Call 'fit' first."
            )
        z = self._design(X)
        ylo, yhi = self.label_bounds_
        ys = np.clip(z @ self.coef_scaled_, -1.0, 1.0)
        return np.asarray(ys * (yhi - ylo) / 2 + (ylo + yhi) / 2)
