"""Dirichlet-categorical model: labels from m categories with a Dirichlet(alpha) prior.

Conjugate update (Dimitrakakis et al. 2017, §3; Zhang et al. 2016, §5): with category
counts c the posterior is Dirichlet(alpha + c). Exact and non-private.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from dpbayes.models.distributions import Dirichlet
from dpbayes.models.statistics import CountStatistics, read_source
from dpbayes.privacy.validation import check_array, check_category, check_positive

__all__ = ["DirichletCategorical"]


def _plain(label: Any) -> Any:
    """A numpy scalar label as the equivalent Python value (JSON-friendly)."""
    return label.item() if isinstance(label, np.generic) else label


@dataclass(frozen=True, kw_only=True, eq=False)
class DirichletCategorical:
    """Categorical likelihood over ``categories`` with a Dirichlet(alpha) prior.

    Parameters
    ----------
    alpha:
        Prior concentrations, a 1-d array of m >= 2 positive numbers, or one positive
        number together with ``categories`` (symmetric prior).
    categories:
        The m category labels (hashable, distinct); default ``0, 1, ..., m-1``. Data
        values are matched to these labels by equality.
    """

    alpha: Any
    categories: Any = None
    name: ClassVar[str] = "dirichlet-categorical"
    _index: dict[Any, int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        cats = self.categories
        if cats is not None:
            if isinstance(cats, str | bytes) or not hasattr(cats, "__iter__"):
                raise TypeError(f"categories must be a sequence of labels, got {cats!r}")
            cats = tuple(check_category(c, "a category") for c in cats)
        if isinstance(self.alpha, numbers.Real) and not isinstance(self.alpha, bool):
            a = check_positive(self.alpha, "alpha")
            if cats is None:
                raise ValueError("categories must be given when alpha is a single number")
            alpha = np.full(len(cats), a)
        else:
            alpha = check_array(self.alpha, "alpha", ndim=1, positive=True).copy()
        if alpha.size < 2:
            raise ValueError(f"alpha must have at least 2 categories, got {alpha.size}")
        if cats is None:
            cats = tuple(range(alpha.size))
        if len(cats) != alpha.size:
            raise ValueError(
                f"categories has {len(cats)} labels but alpha has {alpha.size} entries"
            )
        try:
            index = {c: i for i, c in enumerate(cats)}
        except TypeError:
            raise TypeError("categories must be hashable labels") from None
        if len(index) != len(cats):
            raise ValueError(f"categories must be distinct, got {list(cats)!r}")
        alpha.flags.writeable = False
        object.__setattr__(self, "alpha", alpha)
        object.__setattr__(self, "categories", cats)
        object.__setattr__(self, "_index", index)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, DirichletCategorical):
            return NotImplemented
        return self.categories == other.categories and bool(np.array_equal(self.alpha, other.alpha))

    def __hash__(self) -> int:
        return hash((self.name, tuple(self.alpha.tolist()), self.categories))

    @property
    def m(self) -> int:
        return int(self.alpha.size)

    @property
    def prior(self) -> Dirichlet:
        return Dirichlet(self.alpha)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "alpha": self.alpha.tolist(),
            "categories": list(self.categories),
        }

    def statistics(self, data: Any, column: str | None = None) -> CountStatistics:
        """Counts per category, in the order of ``categories`` (exact, non-private).

        A record's category depends on its own value only, never on the other records:

        * in-memory data (a list, tuple, 1-d numpy array, pandas Series, or a column of a
          pandas DataFrame) is matched value by value by Python equality (booleans as
          0/1): a column of Python objects mixing ``1``, ``"1"`` and ``"x"`` counts each
          record in its own category (:func:`~dpbayes.models.bayes_net_counts.column_codes`);
        * a CSV file (whose column types the engine would guess from all the values) is
          read as text and every field is taken by itself: text categories match the
          field's text exactly (``"1.50"`` is not ``"1.5"``); number and boolean
          categories match a field that spells a number (``1``, ``1.0``) or ``true`` /
          ``false`` (any case) equal to them (``true`` and ``1`` are both ``1`` and
          ``True``; :func:`~dpbayes.data.text_values.text_value`);
        * typed tables (Parquet, polars and Arrow frames, databases) keep their schema's
          type, a public fact.

        The engine holds one type per column, so categories that mix text and other
        labels are refused for anything read by it, before any data are read.
        """
        from dpbayes.data import as_source
        from dpbayes.data.readers import guesses_types
        from dpbayes.data.source import ArraySource
        from dpbayes.data.text_values import text_value
        from dpbayes.models.bayes_net_counts import (
            column_codes,
            in_memory_column,
            mixed_types,
        )

        column_data = in_memory_column(data, column)
        if column_data is not None:
            return self._count_column(*column_data, column_codes)
        if mixed_types(self.categories) and not isinstance(data, ArraySource):
            raise ValueError(  # public: the declaration and the kind of container
                f"categories {list(self.categories)!r} mix text and other labels, which "
                "a table read by the engine (one type per column) cannot match "
                "faithfully: declare categories of one type (all text, or all numbers), "
                "or pass in-memory data (a list, array or pandas DataFrame)"
            )
        csv = guesses_types(data)
        src = read_source(as_source(data, column=column, text=csv), None)
        text = all(isinstance(c, str) for c in self.categories)
        counts = np.zeros(self.m, dtype=np.int64)
        for value, count in src.value_counts().items():
            try:
                # a text value against other labels (a CSV field, a text column, a
                # frame's object column) is read by the one rule for text fields
                parse = not text and isinstance(value, str)
                i = self._index[_plain(text_value(value) if parse else value)]
            except (KeyError, TypeError):
                raise self._not_a_category(src.name) from None
            counts[i] += int(count)
        return CountStatistics(counts=counts, n=int(src.n()))

    def _not_a_category(self, name: str) -> ValueError:
        return ValueError(  # the value itself is data: the message does not quote it
            f"{name} contains a value which is not one of the categories {list(self.categories)!r}"
        )

    def _count_column(self, values: np.ndarray, name: str, codes_of: Any) -> CountStatistics:
        """Counts of an in-memory column, matched value by value."""
        try:
            codes = codes_of(self.categories, values)
        except TypeError:  # an unhashable value (a list, a dict): never a category
            raise self._not_a_category(name) from None
        if bool(np.any(codes == -2)):  # the count is data: the message does not tell it
            raise ValueError(f"{name} contains missing values (NaN/NULL); drop or impute them")
        if bool(np.any(codes < 0)):
            raise self._not_a_category(name)
        counts = np.bincount(codes, minlength=self.m).astype(np.int64)
        return CountStatistics(counts=counts, n=int(values.shape[0]))

    def posterior_from(self, stats: CountStatistics) -> Dirichlet:
        """Dirichlet(alpha + counts); counts may be real (noisy) but must be >= 0."""
        if not isinstance(stats, CountStatistics):
            raise TypeError(f"stats must be CountStatistics, got {type(stats).__name__}")
        if stats.counts.shape != (self.m,):
            raise ValueError(
                f"stats.counts must have {self.m} entries, got shape {stats.counts.shape}"
            )
        counts = stats.counts.astype(float)
        if np.any(counts < 0):
            i = int(np.argmin(counts))
            raise ValueError(f"stats.counts must be >= 0, got stats.counts[{i}] = {counts[i]}")
        return Dirichlet(self.alpha + counts)

    def posterior(self, data: Any, column: str | None = None) -> Dirichlet:
        """Exact (non-private) posterior given the data."""
        return self.posterior_from(self.statistics(data, column=column))

    def posterior_predictive(self, data: Any, column: str | None = None) -> np.ndarray:
        """P(next label = category j | data) = (alpha_j + c_j) / (alpha_0 + n), per j."""
        return self.posterior(data, column=column).mean()
