"""PrivateBayesianLogisticRegression: PASS-GLM sufficient statistics, released once.

Features are clipped to public ``feature_bounds`` and scaled to [-1, 1] (plus an intercept
column of ones); the statistics t1 = sum y x and X'X of the quadratic PASS-GLM
approximation (Huggins et al. 2017) are released with Laplace (eps-DP, ``delta=0``) or
Gaussian ((eps, delta)-DP) noise (``dpbayes.release.ssp``). Predictions come from the
posterior predictive (probit approximation of E sigmoid(x'w)) of the naive posterior
(default; it classifies best) or of the noise-aware posterior (``predictive="noise-aware"``:
calibrated intervals, but its mean is shrunk hard towards 0 when the noise dominates).

``prior_precision="auto"`` (default) sets lambda = 1 + |a2| s sqrt(d), with s the noise
sd on an off-diagonal entry of X'X and a2 the quadratic coefficient: the prior is as
strong as the typical eigenvalue of the noise matrix -2 a2 E (about 2 |a2| s sqrt(d)) is
large, half of it, as AdaSSP's ridge (Wang 2018). It depends on public facts only
(eps, delta, d, the bounds), so choosing it spends nothing.

Binary classification only. Class labels are public facts: pass ``classes``; without
them the labels are read from ``y`` and a :class:`PrivacyLeakWarning` says so.
"""

from __future__ import annotations

import warnings
from dataclasses import replace
from typing import Any

import numpy as np

from dpbayes.estimators._base import (
    BaseEstimator,
    ClassifierMixin,
    NotFittedError,
    check_fit_budget,
    fit_whole_or_not,
    resolve_norm_bound,
    scaled_design,
)
from dpbayes.estimators.linear_regression import _bounds
from dpbayes.estimators.naive_bayes import (
    _check_classes,
    _class_codes,
    _labels_read,
    check_features,
    check_labels,
)
from dpbayes.models.logistic_regression import BayesianLogisticRegression
from dpbayes.privacy import Guarantee, PrivacyLeakWarning
from dpbayes.privacy.validation import check_delta, check_epsilon, check_positive
from dpbayes.release import release
from dpbayes.release.base import plan

__all__ = ["PrivateBayesianLogisticRegression"]


class PrivateBayesianLogisticRegression(ClassifierMixin, BaseEstimator):
    """Differentially private Bayesian logistic regression by sufficient statistics.

    Parameters
    ----------
    epsilon:
        Privacy budget of the fit (> 0).
    feature_bounds:
        Public (lower, upper) for all features, or an array of shape (n_features, 2).
    prior_precision:
        Precision lambda > 0 of the Gaussian prior on the weights of the scaled features,
        or ``"auto"`` (module docstring).
    delta:
        0 (default): Laplace noise, eps-DP; > 0: Gaussian noise, (eps, delta)-DP.
    radius:
        R of the PASS-GLM approximation interval; ``None``: the model's default.
    norm_bound:
        Bound on the L2 norm of a row of the features scaled to [-1, 1] (rows beyond it
        are scaled onto it, at fit and predict alike): ``"auto"`` (default)
        sqrt(max(1, p / 3)) for p features, a number > 0, or ``None`` (the box only).
        The noise is calibrated to it plus the intercept's 1.
    first_order_share:
        Share of the budget for t1 = sum y x (the rest for X'X); ``"auto"`` (default):
        0.5 with Gaussian noise, one joint release with Laplace noise; ``None``: one joint
        release (``dpbayes.release.ssp``).
    fit_intercept:
        Add a constant column (inside the bounded feature space).
    predictive:
        ``"naive"`` (default) or ``"noise-aware"``: the posterior whose predictive gives
        ``predict_proba``; both are kept (``naive_posterior_``, ``noise_aware_posterior_``).
    classes:
        The two public class labels; ``None``: read from ``y`` (published outside the
        guarantee, with a warning).
    neighbours, random_state, accountant:
        As for :class:`~dpbayes.estimators.PrivateNaiveBayes`."""

    def __init__(
        self,
        *,
        epsilon: float = 1.0,
        feature_bounds: Any = None,
        prior_precision: float | str = "auto",
        delta: float = 0.0,
        radius: float | None = None,
        fit_intercept: bool = True,
        classes: Any = None,
        neighbours: str = "substitute",
        random_state: Any = None,
        accountant: Any = None,
        predictive: str = "naive",
        norm_bound: float | str | None = "auto",
        first_order_share: float | str | None = "auto",
    ) -> None:
        self.epsilon = epsilon
        self.feature_bounds = feature_bounds
        self.prior_precision = prior_precision
        self.delta = delta
        self.radius = radius
        self.fit_intercept = fit_intercept
        self.classes = classes
        self.neighbours = neighbours
        self.random_state = random_state
        self.accountant = accountant
        self.predictive = predictive
        self.norm_bound = norm_bound
        self.first_order_share = first_order_share

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()  # type: ignore[misc]
        tags.classifier_tags.multi_class = False
        return tags

    def _design(self, X: Any, neighbours: Any = None) -> np.ndarray:
        arr = check_features(X, numeric=True, neighbours=neighbours)
        return scaled_design(self, arr, self.norm_bound_)

    @fit_whole_or_not
    def fit(self, X: Any, y: Any) -> PrivateBayesianLogisticRegression:
        """Release the noisy PASS-GLM statistics of (X, y) and the posteriors they give."""
        check_fit_budget(self.accountant, self.random_state, labels_from_data=self.classes is None)
        eps = check_epsilon(self.epsilon)
        dlt = check_delta(self.delta)
        if self.predictive not in ("naive", "noise-aware"):
            raise ValueError(
                f"predictive must be 'naive' or 'noise-aware', got {self.predictive!r}"
            )
        arr = check_features(X, numeric=True, neighbours=self.neighbours)
        labels = check_labels(y, arr.shape[0])
        if self.classes is None:
            if labels.dtype.kind == "f" and np.any(labels != np.round(labels)):
                raise ValueError(
                    "Unknown label type: continuous; y must hold class labels "
                    "(use PrivateBayesianLinearRegression for a continuous target)"
                )
            classes = np.unique(labels)
        else:
            classes = _check_classes(self.classes)  # flat, distinct, mixed types kept
        if classes.size != 2:
            raise ValueError(
                f"Only binary classification is supported: classes must be exactly 2 labels, "
                f"got {classes.size} class(es) {classes.tolist()[:5]}"
            )
        codes = _class_codes(classes, labels)
        is_one = codes == 1
        if np.any(codes < 0):
            # the label itself is data: the message does not quote it
            raise ValueError(f"y has a label that is not in classes {classes.tolist()}")
        self.n_features_in_ = arr.shape[1]
        self.feature_bounds_ = _bounds(self.feature_bounds, arr.shape[1], "feature_bounds")
        self.classes_ = classes
        self.norm_bound_ = resolve_norm_bound(self.norm_bound, arr.shape[1])
        z = self._design(arr, self.neighbours)
        # the bound on a design row's norm: the scaled features' plus the intercept's 1
        nb = None
        if self.norm_bound_ is not None:
            nb = float(np.sqrt(self.norm_bound_**2 + (1.0 if self.fit_intercept else 0.0)))
        data = (z, is_one.astype(float))
        options: dict[str, Any] = {
            "mechanism": "ssp",
            "epsilon": eps,
            "delta": dlt,
            "neighbours": self.neighbours,
            "first_order_share": self.first_order_share,
        }
        radius: float | None
        if isinstance(self.prior_precision, str):
            if self.prior_precision != "auto":
                raise ValueError(
                    f"prior_precision must be > 0 or 'auto', got {self.prior_precision!r}"
                )
            unit = BayesianLogisticRegression(feature_bound=1.0, radius=self.radius, norm_bound=nb)
            radius = unit.approximation_radius(z.shape[1])
            noise_sd = plan(unit, data, **options).guarantee.details["noise_sd_offdiagonal"]
            a2 = float(unit.coefficients(z.shape[1])[2])
            lam = 1.0 + abs(a2) * float(noise_sd or 0.0) * np.sqrt(z.shape[1])
        else:
            lam = check_positive(self.prior_precision, "prior_precision")
            radius = self.radius
        self.prior_precision_ = lam
        self.model_ = BayesianLogisticRegression(
            prior_precision=lam, feature_bound=1.0, radius=radius, norm_bound=nb
        )
        self.release_ = release(
            self.model_, data, rng=self.random_state, accountant=self.accountant, **options
        )
        if self.classes is None:
            self.release_ = replace(self.release_, guarantee=_labels_read(self.release_.guarantee))
            warnings.warn(
                "classes were not given and are read from y: the set of class labels is "
                "published in classes_ outside the privacy guarantee; pass the public "
                "classes=[...] to avoid this",
                PrivacyLeakWarning,
                stacklevel=2,
            )
        self.guarantee_: Guarantee = self.release_.guarantee
        self.naive_posterior_ = self.release_.posterior
        self.noise_aware_posterior_ = self.release_.noise_aware_posterior()
        self.posterior_ = (
            self.naive_posterior_ if self.predictive == "naive" else self.noise_aware_posterior_
        )
        self.coef_ = np.asarray(self.posterior_.mean())
        return self

    def predict_proba(self, X: Any) -> np.ndarray:
        """Posterior predictive probabilities, columns in the order of ``classes_``."""
        if not hasattr(self, "posterior_"):
            raise NotFittedError(
                "This PrivateBayesianLogisticRegression instance is not fitted yet. "
                "Call 'fit' first."
            )
        p1 = self.model_.predict_proba(self.posterior_, self._design(X))
        return np.column_stack([1.0 - p1, p1])

    def predict_log_proba(self, X: Any) -> np.ndarray:
        with np.errstate(divide="ignore"):
            return np.log(self.predict_proba(X))

    def predict(self, X: Any) -> np.ndarray:
        proba = self.predict_proba(X)
        return np.asarray(self.classes_[np.argmax(proba, axis=1)])
