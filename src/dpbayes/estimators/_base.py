"""The scikit-learn estimator interface, without making scikit-learn a dependency.

When scikit-learn is installed the estimators derive from its ``BaseEstimator`` and
mixins (so ``clone``, pipelines, tags and ``check_estimator`` work); otherwise from the
small stand-ins below, which provide ``get_params``/``set_params`` and ``score``.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

__all__ = [
    "BaseEstimator",
    "ClassifierMixin",
    "DataConversionWarning",
    "NotFittedError",
    "RegressorMixin",
    "check_fit_budget",
    "fit_whole_or_not",
]


class _ParamsBase:
    """get_params/set_params from the constructor's keyword arguments."""

    @classmethod
    def _get_param_names(cls) -> list[str]:
        sig = inspect.signature(cls.__init__)
        return sorted(p for p in sig.parameters if p != "self")

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self._get_param_names()}

    def set_params(self, **params: Any) -> Any:
        valid = self._get_param_names()
        for k, v in params.items():
            if k not in valid:
                raise ValueError(f"invalid parameter {k!r} for {type(self).__name__}")
            setattr(self, k, v)
        return self


class _ClassifierScore:
    def score(self, X: Any, y: Any, sample_weight: Any = None) -> float:
        pred = self.predict(X)  # type: ignore[attr-defined]
        return float(np.average(pred == np.asarray(y), weights=sample_weight))


class _RegressorScore:
    def score(self, X: Any, y: Any, sample_weight: Any = None) -> float:
        yt = np.asarray(y, dtype=float)
        pred = self.predict(X)  # type: ignore[attr-defined]
        w = np.ones_like(yt) if sample_weight is None else np.asarray(sample_weight, dtype=float)
        mean = np.average(yt, weights=w)
        ss_res = float(np.sum(w * (yt - pred) ** 2))
        ss_tot = float(np.sum(w * (yt - mean) ** 2))
        return 1.0 - ss_res / ss_tot if ss_tot > 0 else 0.0


class _NotFitted(ValueError, AttributeError):
    """Raised when predict is called before fit."""


try:  # pragma: no branch
    from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
    from sklearn.exceptions import DataConversionWarning, NotFittedError
except ImportError:  # scikit-learn is optional
    DataConversionWarning = UserWarning  # type: ignore[assignment,misc]
    NotFittedError = _NotFitted  # type: ignore[assignment,misc]
    BaseEstimator = _ParamsBase  # type: ignore[assignment,misc]
    ClassifierMixin = _ClassifierScore  # type: ignore[assignment,misc]
    RegressorMixin = _RegressorScore  # type: ignore[assignment,misc]


_Fit = TypeVar("_Fit", bound=Callable[..., Any])


def fit_whole_or_not(fit: _Fit) -> _Fit:
    """A ``fit`` that fails leaves the estimator as it was: the fitted attributes (names
    ending in ``_``) set before the failure are removed and the earlier ones restored. A
    refit that failed (a label not in ``classes``, a release refused) left the new
    ``classes_`` beside the old posterior, and ``predict`` then named the old classes'
    predictions with the new labels."""

    @functools.wraps(fit)
    def whole(self: Any, *args: Any, **kwargs: Any) -> Any:
        def fitted() -> dict[str, Any]:
            return {k: v for k, v in vars(self).items() if k.endswith("_") and k[0] != "_"}

        before = fitted()
        try:
            return fit(self, *args, **kwargs)
        except BaseException:
            for name in fitted():
                delattr(self, name)
            vars(self).update(before)
            raise

    return whole  # type: ignore[return-value]


def default_norm_bound(n_features: int) -> float:
    """The default bound on the row norm of features scaled to [-1, 1]: sqrt(max(1, p / 3)),
    the root-mean-square norm of a row spread uniformly over the box [-1, 1]^p. A public
    rule of p alone (no data): rows beyond it are scaled onto it, and the Gaussian noise
    of the sufficient statistics shrinks from p + 1 to max(1, p / 3) + 1 in units of R^2."""
    return float(np.sqrt(max(1.0, n_features / 3.0)))


def resolve_norm_bound(value: Any, n_features: int) -> float | None:
    """``norm_bound`` of a regression estimator: ``"auto"``, a number > 0, or None.

    ``"auto"`` is :func:`default_norm_bound`, for Gaussian and Laplace noise alike (both
    calibrations use it: ``dpbayes/release/ssp/PROOF.md`` §2 and §3b)."""
    if value is None:
        return None
    if isinstance(value, str):
        if value != "auto":
            raise ValueError(f"norm_bound must be > 0, 'auto' or None, got {value!r}")
        return default_norm_bound(n_features)
    v = float(value)
    if not (np.isfinite(v) and v > 0):
        raise ValueError(f"norm_bound must be > 0, 'auto' or None, got {value!r}")
    return v


def scaled_design(est: Any, arr: np.ndarray, norm_bound: float | None = None) -> np.ndarray:
    """A regression estimator's design matrix: features clipped to the fitted public
    bounds and mapped onto [-1, 1], rows then scaled into ||z||_2 <= ``norm_bound`` (None:
    not), plus a column of ones with ``fit_intercept``."""
    if arr.shape[1] != est.n_features_in_:
        raise ValueError(
            f"X has {arr.shape[1]} features, but {type(est).__name__} is "
            f"expecting {est.n_features_in_} features as input"
        )
    lo, hi = est.feature_bounds_[:, 0], est.feature_bounds_[:, 1]
    z = (np.clip(arr, lo, hi) - (lo + hi) / 2) / ((hi - lo) / 2)
    if norm_bound is not None:
        norms = np.linalg.norm(z, axis=1)
        z = z * np.minimum(1.0, norm_bound / np.maximum(norms, 1e-300))[:, None]
    if est.fit_intercept:
        z = np.hstack([z, np.ones((z.shape[0], 1))])
    return np.asarray(z)


def check_fit_budget(accountant: Any, random_state: Any, *, labels_from_data: bool = False) -> None:
    """Before a fit's release: ``accountant`` is None or an Accountant; a fit under an
    accountant publishes nothing outside its guarantee (class labels read from the data
    are refused); and a seeded fit that no accountant would refuse says it is a
    simulation.

    ``random_state`` is a habit in scikit-learn code, but here it seeds the noise: the
    fit is then a simulation, not differentially private (``guarantee_.simulation``). A
    real accountant refuses it before any noise; without one, a
    :class:`~dpbayes.privacy.PrivacyLeakWarning` says so.
    """
    import warnings

    from dpbayes.privacy import Accountant, PrivacyLeakWarning

    if accountant is not None and not isinstance(accountant, Accountant):
        raise TypeError(f"accountant must be a dpbayes Accountant, got {type(accountant).__name__}")
    if labels_from_data and accountant is not None:
        raise ValueError(
            "classes=None reads the class labels from y and publishes them outside the "
            "guarantee: pass the public classes=[...] to fit under an accountant"
        )
    if random_state is not None and accountant is None:
        warnings.warn(
            f"random_state={random_state!r} seeds the noise: this fit is a simulation, not "
            "differentially private (guarantee_.simulation is True); leave "
            "random_state=None for a fit you may publish",
            PrivacyLeakWarning,
            stacklevel=3,
        )
