"""PrivateNaiveBayes: a differentially private Bayesian naive Bayes classifier.

Paper 004 §5.1: a naive Bayes network (class as sole parent of every feature) with
Dirichlet priors, released by Algorithm 1 (``"laplace"``), Algorithm 2 (``"fourier"``,
binary features and classes only), posterior sampling (``"sampling"``), Algorithm 3
(``"map"``), or non-privately (``"none"``); predictions use the released posterior's
predictive probabilities. Continuous features are binned on public, data-independent
``bin_edges``; categorical features need their public ``categories``.

Class labels are public facts like the categories: pass ``classes``. Without them the
labels are read from ``y`` (as diffprivlib does), which publishes in ``classes_`` a label
that a single record may hold; ``fit`` then emits a :class:`PrivacyLeakWarning` and the
guarantee says so (``details["not_protected"]``, ``details["classes_from_data"]``).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd

from dpbayes.data.text_values import text_value
from dpbayes.estimators._base import (
    BaseEstimator,
    ClassifierMixin,
    DataConversionWarning,
    NotFittedError,
    check_fit_budget,
    fit_whole_or_not,
)
from dpbayes.models.bayes_net import NaiveBayes
from dpbayes.models.bayes_net_counts import column_codes, mixed_types
from dpbayes.privacy import Guarantee, Neighbours, PrivacyLeakWarning
from dpbayes.privacy.validation import check_category, check_epsilon, check_positive
from dpbayes.release import release
from dpbayes.release.bayes_net import fourier as _alg2  # noqa: F401
from dpbayes.release.bayes_net import laplace as _alg1  # noqa: F401  (registers the mechanisms)
from dpbayes.release.bayes_net import sampling as _alg3  # noqa: F401

__all__ = ["PrivateNaiveBayes"]

MECHANISMS = ("laplace", "fourier", "sampling", "map", "none")
_TARGET = "__class__"


def _keep_objects(arr: np.ndarray, original: Any) -> np.ndarray:
    """``arr = np.asarray(original)``, unless numpy turned a list mixing numbers and
    strings into text: then its Python objects (``"1"`` is not the label or category
    ``1``, and a record's value must not be read differently because of other records)."""
    if arr.dtype.kind in "US" and not isinstance(original, np.ndarray):
        return np.asarray(original, dtype=object).reshape(arr.shape)
    return arr


def _number(value: Any) -> float:
    """One feature value as a float, by its own value: text by the one rule for text
    fields (:func:`~dpbayes.data.text_values.text_value`: a number it spells, true/false
    as 1/0), missing (None, NA) as NaN, any other value by ``float``."""
    if isinstance(value, str):
        value = text_value(value)
        if isinstance(value, str):  # the text is data: the message does not quote it
            raise ValueError("a value is text that spells no number")
    elif value is None or type(value).__name__ in ("NAType", "NaTType"):
        return float("nan")
    return float(value)


def _numbers(arr: np.ndarray) -> np.ndarray:
    """``arr`` as floats. Text and Python objects are converted value by value
    (:func:`_number`): numpy's ``astype`` of a column it had made text from a list mixing
    numbers and strings read the other records' text (``True`` became ``"True"``, refused;
    ``np.float32(0.1)`` became ``"0.1"``, another bin), so one record changed the bins of
    every other record."""
    if arr.dtype.kind not in "USO":
        return arr.astype(float)
    out = np.empty(arr.shape, dtype=float)
    out.flat[:] = [_number(v) for v in arr.ravel().tolist()]
    return out


def check_features(
    X: Any, numeric: bool, *, neighbours: Any = None, infinite: bool = False
) -> np.ndarray:
    """A 2-D feature matrix (float if ``numeric``), refusing sparse, complex, NaN/inf and,
    unless ``neighbours`` is add/remove, empty data: under add/remove the empty data set
    is a neighbour of every one-record data set and is released like any other (a
    refusal would tell whether the data are empty); under substitution (and for
    predictions, ``neighbours=None``) n is public and scikit-learn's refusal stands.
    ``infinite=True`` (numbers binned on edges: the bins cover the whole line) accepts
    +-inf and refuses NaN only."""
    if hasattr(X, "toarray") or type(X).__module__.startswith("scipy.sparse"):
        raise TypeError("X must be dense: sparse input is not supported")
    arr = _keep_objects(np.asarray(X.to_numpy() if isinstance(X, pd.DataFrame) else X), X)
    if np.iscomplexobj(arr):
        raise ValueError("X must be real: Complex data not supported")
    if arr.ndim != 2:
        raise ValueError(
            f"X must be 2-dimensional (samples, features), got shape {arr.shape}; "
            "Reshape your data with X.reshape(-1, 1) for a single feature"
        )
    if arr.shape[1] == 0:
        raise ValueError(
            f"X has 0 feature(s) (shape={arr.shape}) while a minimum of 1 is required."
        )
    empty_allowed = neighbours is not None and Neighbours.parse(neighbours).public_n(0) is None
    if arr.shape[0] == 0 and not empty_allowed:
        raise ValueError(f"X has 0 sample(s) (shape={arr.shape}) while a minimum of 1 is required.")
    if numeric:
        try:
            arr = _numbers(arr)
        except TypeError as exc:
            raise TypeError(f"X must be numeric: {exc}") from None
        except (ValueError, OverflowError) as exc:
            raise ValueError(f"X must be numeric: {exc}") from None
        if infinite:
            if np.isnan(arr).any():
                raise ValueError(
                    "X contains NaN: it lies in no bin (infinities fall in the end bins)"
                )
        elif not np.all(np.isfinite(arr)):
            raise ValueError("X must contain only finite numbers (found NaN or infinity)")
    elif pd.isna(pd.DataFrame(arr)).to_numpy().any():
        raise ValueError("X contains missing values (NaN)")
    return arr


def check_labels(y: Any, n: int) -> np.ndarray:
    if y is None:
        raise ValueError(
            "y must be given: this estimator requires y to be passed, but the target y is None"
        )
    arr = np.asarray(y)
    if arr.ndim == 2 and arr.shape[1] == 1:
        warnings.warn(
            "A column-vector y was passed when a 1d array was expected; it is flattened",
            DataConversionWarning,
            stacklevel=3,
        )
        arr = arr.ravel()
    if arr.ndim != 1 or arr.shape[0] != n:
        raise ValueError(f"y must be 1-dimensional with {n} entries, got shape {arr.shape}")
    if pd.isna(pd.Series(arr)).any():
        raise ValueError("y contains missing values (NaN)")
    return arr


def _check_classes(classes: Any) -> np.ndarray:
    """The public class labels: a flat sequence of >= 2 distinct hashable labels (Python
    objects if they mix numbers and strings)."""
    if (
        isinstance(classes, str | bytes | Mapping)
        or not hasattr(classes, "__iter__")
        or (isinstance(classes, np.ndarray) and classes.ndim != 1)
    ):
        raise TypeError(f"classes must be a flat sequence of class labels, got {classes!r}")
    items = [check_category(c, "a label of classes") for c in classes]
    distinct = len(set(items))
    if distinct != len(items):
        raise ValueError(f"classes has repeated labels: {items!r}")
    if distinct < 2:
        raise ValueError(f"classes must have at least 2 labels, got {items!r}")
    arr = np.empty(len(items), dtype=object)
    arr[:] = items
    return arr if mixed_types(items) else np.asarray(items)


def _class_codes(classes: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Each record's position in ``classes`` from its own label, by the features' rule
    (:func:`~dpbayes.models.bayes_net_counts.column_codes`: Python equality, booleans as
    0/1); negative if it is no class. pandas' ``get_indexer`` typed the labels from all of
    them: ``True`` was not the class 1 among booleans but was once one record held ``1``,
    so one record decided whether every other record's label was accepted."""
    values = labels
    if labels.dtype.kind not in "biufUO":  # datetimes, bytes...: their Python objects
        values = np.empty(len(labels), dtype=object)
        values[:] = pd.Series(labels).tolist()
    try:
        return column_codes(classes.tolist(), values)
    except TypeError:  # an unhashable label (a list): never a class
        return np.full(len(labels), -1, dtype=np.int64)


def _labels_read(g: Guarantee) -> Guarantee:
    """``g`` restated for class labels read from the data: the labels are not covered."""
    return replace(
        g,
        details={
            **g.details,
            "classes_from_data": True,
            "not_protected": "the set of class labels (read from y and published in classes_)",
        },
    )


def _sorted_values(values: list[Any]) -> list[Any]:
    """Values in ascending order; numbers before strings when they mix."""
    try:
        return sorted(values)
    except TypeError:
        return sorted(values, key=lambda v: (isinstance(v, str), str(type(v)), v))


class PrivateNaiveBayes(ClassifierMixin, BaseEstimator):
    """Differentially private Bayesian naive Bayes (paper 004 §5.1), scikit-learn interface.

    Parameters
    ----------
    epsilon:
        Privacy budget of the whole fit (> 0); ignored for ``mechanism="none"``.
    mechanism:
        ``"laplace"`` (Alg. 1), ``"fourier"`` (Alg. 2; binary features and classes),
        ``"sampling"`` (one posterior draw), ``"map"`` (Alg. 3) or ``"none"`` (exact).
    classes:
        The public class labels. ``None`` takes them from ``y`` with a
        :class:`~dpbayes.privacy.PrivacyLeakWarning`: the *set* of labels is then not
        protected (a label held by one record appears in ``classes_``; the counts still
        are protected), and ``guarantee_`` states it.
    categories:
        Public categories of the features: one list for all features or one per feature.
    bin_edges:
        Public, data-independent bin edges for continuous features (one increasing
        array for all features or one per feature); feature j falls in bin
        ``searchsorted(edges_j, x, side="right")``, 0..len(edges_j).
    alpha:
        Dirichlet prior concentration (> 0).
    neighbours:
        ``"substitute"`` (n public) or ``"add-remove"``.
    stealth:
        For ``"fourier"``: probability that no released cell is negative.
    random_state:
        ``None``: secure noise (publishable); int or Generator: seeded simulation (a
        :class:`~dpbayes.privacy.PrivacyLeakWarning` says so unless an accountant is given).
    accountant:
        ``None``, or a :class:`~dpbayes.privacy.Accountant` that every ``fit`` charges
        before its noise is drawn (a fit it cannot pay for raises and draws nothing).
        Each fit is a release: ``cross_val_score``, ``GridSearchCV`` and refits spend once
        per fit, and their clones share this accountant (copies of an accountant are the
        accountant itself).
    """

    def __init__(
        self,
        *,
        epsilon: float = 1.0,
        mechanism: str = "laplace",
        classes: Sequence[Any] | None = None,
        categories: Any = None,
        bin_edges: Any = None,
        alpha: float = 1.0,
        neighbours: str = "substitute",
        stealth: float = 0.9,
        random_state: Any = None,
        accountant: Any = None,
    ) -> None:
        self.epsilon = epsilon
        self.mechanism = mechanism
        self.classes = classes
        self.categories = categories
        self.bin_edges = bin_edges
        self.alpha = alpha
        self.neighbours = neighbours
        self.stealth = stealth
        self.random_state = random_state
        self.accountant = accountant

    # --- feature encoding ------------------------------------------------------
    def _per_feature(self, value: Any, d: int, name: str) -> list[Any]:
        if (
            isinstance(value, str | bytes | Mapping)
            or not hasattr(value, "__len__")
            or (isinstance(value, np.ndarray) and value.ndim == 0)
        ):
            raise TypeError(
                f"{name} must be one list for all features or one list per feature ({d}), "
                f"got {value!r}"
            )
        if len(value) == d and all(
            isinstance(v, Sequence | np.ndarray) and not isinstance(v, str) for v in value
        ):
            return [list(v) for v in value]
        if all(not isinstance(v, Sequence | np.ndarray) or isinstance(v, str) for v in value):
            return [list(value)] * d
        raise ValueError(f"{name} must be one list for all features or one per feature ({d})")

    def _feature_categories(self, X: np.ndarray) -> list[list[Any]]:
        d = X.shape[1]
        if self.bin_edges is not None:
            edges = self._per_feature(self.bin_edges, d, "bin_edges")
            for j, e in enumerate(edges):
                try:
                    arr = np.asarray(e, dtype=float)
                except (TypeError, ValueError):
                    raise TypeError(f"bin_edges[{j}] must be numbers, got {e!r}") from None
                if arr.ndim == 1 and np.isnan(arr).any():
                    raise ValueError(f"bin_edges[{j}] must not contain NaN, got {e!r}")
                if arr.ndim != 1 or arr.size < 1 or not np.all(arr[1:] > arr[:-1]):
                    raise ValueError(f"bin_edges[{j}] must be a strictly increasing 1-D array")
            return [list(range(len(e) + 1)) for e in edges]
        if self.categories is not None:
            return self._per_feature(self.categories, d, "categories")
        if self.mechanism == "none":
            return [_sorted_values(pd.unique(X[:, j]).tolist()) for j in range(d)]
        raise ValueError(
            "categories or bin_edges must be given (public and data-independent) "
            f"for mechanism {self.mechanism!r}"
        )

    def _encode(self, X: Any, neighbours: Any = None) -> dict[str, np.ndarray]:
        binned = self.bin_edges is not None
        arr = check_features(X, numeric=binned, neighbours=neighbours, infinite=binned)
        if arr.shape[1] != self.n_features_in_:
            raise ValueError(
                f"X has {arr.shape[1]} features, but PrivateNaiveBayes is expecting "
                f"{self.n_features_in_} features as input"
            )
        if self.bin_edges is not None:
            cols = {
                f"x{j}": np.searchsorted(np.asarray(e, dtype=float), arr[:, j], side="right")
                for j, e in enumerate(self.edges_)
            }
        else:
            cols = {f"x{j}": arr[:, j] for j in range(arr.shape[1])}
        return cols  # a mapping of columns: counted by numpy, no engine round trip

    # --- fit / predict -----------------------------------------------------------
    @fit_whole_or_not
    def fit(self, X: Any, y: Any) -> PrivateNaiveBayes:
        """Release a private posterior from (X, y)."""
        if self.mechanism not in MECHANISMS:
            raise ValueError(f"mechanism must be one of {list(MECHANISMS)}, got {self.mechanism!r}")
        eps = check_epsilon(self.epsilon) if self.mechanism != "none" else None
        if self.mechanism == "none" and self.accountant is not None:
            raise ValueError(
                "mechanism='none' fits the exact, non-private posterior: it cannot be charged "
                "to an accountant (drop accountant= or choose a private mechanism)"
            )
        if self.mechanism != "none":
            check_fit_budget(
                self.accountant, self.random_state, labels_from_data=self.classes is None
            )
        check_positive(self.alpha, "alpha")
        binned = self.bin_edges is not None
        arr = check_features(X, numeric=binned, neighbours=self.neighbours, infinite=binned)
        labels = _keep_objects(check_labels(y, arr.shape[0]), y)
        if self.classes is None:
            if labels.dtype.kind == "f" and np.any(labels != np.round(labels)):
                raise ValueError(
                    "Unknown label type: continuous; y must hold class labels "
                    "(use PrivateBayesianLinearRegression for a continuous target)"
                )
            try:
                classes = np.unique(labels)
            except TypeError:  # labels mixing numbers and strings (Python objects)
                found = _sorted_values(pd.unique(labels).tolist())
                classes = np.empty(len(found), dtype=object)
                classes[:] = found
        else:
            classes = _check_classes(self.classes)
        if classes.size < 2:
            raise ValueError(
                f"classes must have at least 2 labels; y has 1 class {classes.tolist()}"
            )
        self.n_features_in_ = arr.shape[1]
        cats = self._feature_categories(arr)
        if self.bin_edges is not None:
            self.edges_ = self._per_feature(self.bin_edges, arr.shape[1], "bin_edges")
        self.classes_ = classes
        self.model_ = NaiveBayes(
            _TARGET,
            list(range(classes.size)),
            {f"x{j}": c for j, c in enumerate(cats)},
            alpha=self.alpha,
        )
        codes = _class_codes(classes, labels)
        if np.any(codes < 0):
            # the label itself is data: the message does not quote it
            raise ValueError(f"y has a label that is not in classes {classes.tolist()}")
        frame = self._encode(arr, self.neighbours)
        frame[_TARGET] = np.asarray(codes, dtype=np.int64)
        if self.mechanism == "none":
            self.posterior_ = self.model_.exact_posterior(frame)
            self.guarantee_: Guarantee | None = None
            self.release_ = None
        else:
            options: dict[str, Any] = (
                {"stealth": self.stealth} if self.mechanism == "fourier" else {}
            )
            self.release_ = release(
                self.model_,
                frame,
                mechanism=self.mechanism,
                epsilon=eps,  # type: ignore[arg-type]
                rng=self.random_state,
                accountant=self.accountant,
                neighbours=self.neighbours,
                **options,
            )
            if self.classes is None:
                self.release_ = replace(
                    self.release_, guarantee=_labels_read(self.release_.guarantee)
                )
                warnings.warn(
                    "classes were not given and are read from y: the set of class labels "
                    "is published in classes_ outside the privacy guarantee (a label held "
                    "by one record leaks); pass the public classes=[...] to avoid this",
                    PrivacyLeakWarning,
                    stacklevel=2,
                )
            self.posterior_ = self.release_.posterior
            self.guarantee_ = self.release_.guarantee
        self.classes_from_data_ = self.classes is None
        return self

    def _check_fitted(self) -> None:
        if not hasattr(self, "posterior_"):
            raise NotFittedError(
                "This PrivateNaiveBayes instance is not fitted yet. Call 'fit' first."
            )

    def predict_proba(self, X: Any) -> np.ndarray:
        """Predictive class probabilities, columns in the order of ``classes_``."""
        self._check_fitted()
        return np.asarray(self.posterior_.predict_proba(self._encode(X), _TARGET))

    def predict_log_proba(self, X: Any) -> np.ndarray:
        with np.errstate(divide="ignore"):
            return np.log(self.predict_proba(X))

    def predict(self, X: Any) -> np.ndarray:
        proba = self.predict_proba(X)
        return np.asarray(self.classes_[np.argmax(proba, axis=1)])
