"""The :class:`Source` interface (one column of data) and its in-memory numpy version.

A source answers the aggregate questions a private release needs -- counts, value
counts, clamped sums -- without handing out rows. Two families implement it:
:class:`ArraySource` (numpy, for lists and arrays) and
:class:`~dpbayes.data.sql.ColumnSource` (an SQL engine, for files and data frames).
Sums are correctly rounded (:mod:`dpbayes.data.exact`), so both give identical numbers.
"""

from __future__ import annotations

import math
import numbers
from abc import ABC, abstractmethod
from fractions import Fraction
from typing import Any

import numpy as np

from dpbayes.data.exact import (
    double_saturating,
    exact_sum,
    exact_sum_fraction,
    round_saturating,
)
from dpbayes.privacy.validation import check_finite

__all__ = ["KINDS", "ArraySource", "Source", "check_bounds"]

#: What a column holds: numbers, booleans, strings, or something else (dates, ...).
KINDS = ("numeric", "bool", "string", "other")

Scalar = bool | int | float | str


def check_bounds(lower: Any, upper: Any, *, square: bool = False) -> tuple[float, float]:
    """Clamping bounds: finite reals with lower < upper (and finite squares if needed)."""
    lo = check_finite(lower, "lower")
    hi = check_finite(upper, "upper")
    if not lo < hi:
        raise ValueError(f"lower must be < upper, got lower={lo}, upper={hi}")
    if square and not math.isfinite(max(lo * lo, hi * hi)):
        raise ValueError(f"bounds ({lo}, {hi}) are too large: their squares overflow a double")
    return lo, hi


class Source(ABC):
    """One column of data, read through aggregates only.

    Attributes
    ----------
    name:
        A readable description for messages, e.g. ``"column 'idp' of randhie.csv.gz"``.
    kind:
        ``"numeric"``, ``"bool"``, ``"string"`` or ``"other"``.

    NULLs (``None``, ``NaN``, SQL NULL, pandas ``NA``) count in :meth:`n` and
    :meth:`null_count` and are left out of every other statistic.
    """

    name: str

    @property
    @abstractmethod
    def kind(self) -> str:
        """What the column holds: one of :data:`KINDS`."""

    @abstractmethod
    def n(self) -> int:
        """Number of rows, NULLs included."""

    @abstractmethod
    def null_count(self) -> int:
        """Number of NULL rows (None, NaN, SQL NULL)."""

    @abstractmethod
    def value_counts(self) -> dict[Any, int]:
        """Count of each distinct non-NULL value, keyed by Python scalars."""

    @abstractmethod
    def clamped_sum_exact(self, lower: float, upper: float) -> Fraction:
        """Exact sum of the values clamped to [lower, upper] (doubles); NULLs excluded."""

    def clamped_sum(self, lower: float, upper: float) -> float:
        """Correctly rounded sum of the values clamped to [lower, upper]; NULLs excluded.

        Beyond the doubles it saturates (:func:`~dpbayes.data.exact.round_saturating`).
        """
        return round_saturating(self.clamped_sum_exact(lower, upper))

    @abstractmethod
    def clamped_sum_of_squares(self, lower: float, upper: float) -> float:
        """Correctly rounded sum of squares of the values clamped to [lower, upper]."""

    @abstractmethod
    def min(self) -> Any:
        """Smallest non-NULL value (numeric or boolean columns)."""

    @abstractmethod
    def max(self) -> Any:
        """Largest non-NULL value (numeric or boolean columns)."""

    def _require_numeric(self, statistic: str) -> None:
        # a column with no values has no type of its own (a header-only CSV reads as
        # text): its sums are 0 like those of any empty numeric column
        if self.kind not in ("numeric", "bool") and self.n() > self.null_count():
            raise TypeError(f"{statistic} needs numbers, but {self.name} holds {self.kind} values")

    def _no_values(self, statistic: str) -> ValueError:
        return ValueError(f"{statistic} is undefined: {self.name} has no non-NULL values")

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


def _is_null(v: Any) -> bool:
    if v is None:
        return True
    if isinstance(v, float | np.floating) and math.isnan(v):
        return True
    # pandas.NA / NaT without importing pandas
    return type(v).__name__ in ("NAType", "NaTType")


def _from_objects(items: np.ndarray, name: str) -> tuple[np.ndarray, int]:
    """Non-NULL values of an object array as a typed array, and the NULL count."""
    values = [v for v in items.tolist() if not _is_null(v)]
    if any(isinstance(v, list | tuple | dict | set | np.ndarray) for v in values):
        raise ValueError(f"{name} must be 1-dimensional (a flat sequence of values)")
    nulls = items.size - len(values)
    if not values:
        return np.array([], dtype=np.float64), nulls
    if all(isinstance(v, bool | np.bool_) for v in values):
        return np.array(values, dtype=bool), nulls
    if all(isinstance(v, str) for v in values):
        return np.array(values, dtype=str), nulls
    # booleans among numbers are 0/1, each by its own value: whether a record is read
    # must not depend on whether the other records are numbers or booleans
    values = [int(v) if isinstance(v, bool | np.bool_) else v for v in values]
    if all(isinstance(v, numbers.Real) for v in values):
        if all(isinstance(v, numbers.Integral) for v in values):
            try:
                return np.array(values, dtype=np.int64), nulls
            except OverflowError:
                pass
        # a number beyond the doubles (10**400) is +-inf, which the bounds clip
        return np.array([double_saturating(v) for v in values], dtype=np.float64), nulls
    kinds = sorted({type(v).__name__ for v in values})
    raise TypeError(
        f"{name} must hold numbers, booleans or strings of one kind, got a mix of {kinds}"
    )


def _from_homogeneous(data: list[Any] | tuple[Any, ...]) -> tuple[np.ndarray, int] | None:
    """The non-NULL values and NULL count of a list whose values are all of one kind
    (ints, floats, or ints and floats; bools; strings; Python's or numpy's 64-bit
    scalars) without a Python-level pass over them: the same result as
    :func:`_from_objects`. None for anything else (NULL objects, other types, mixed
    kinds, ints beyond int64), which the general path decides."""
    types = set(map(type, data))
    if not types:
        return None
    if types <= {bool, np.bool_}:
        return np.array(data, dtype=bool), 0
    if types <= {str}:
        return np.array(data, dtype=str), 0
    if types <= {int, np.int64}:
        try:
            return np.array(data, dtype=np.int64), 0
        except OverflowError:
            return None
    if types <= {int, float, np.int64, np.float64}:
        try:
            arr = np.array(data, dtype=np.float64)
        except OverflowError:  # an int beyond the doubles: the general path saturates it
            return None
        mask = np.isnan(arr)  # NaN is NULL
        if types & {int, np.int64} and mask.any():
            # ints with NULLs: the values left may all be ints (an int column), which
            # only a look at each value tells
            return None
        return arr[~mask], int(mask.sum())
    return None


class ArraySource(Source):
    """A column held in memory as a 1-d numpy array (from a list, tuple or array).

    NaN and ``None`` are NULLs. Statistics are computed by numpy; sums are exact
    (correctly rounded), so they equal the SQL engine's on the same values.
    """

    def __init__(self, data: Any, *, name: str | None = None) -> None:
        label = name or ("array" if isinstance(data, np.ndarray) else type(data).__name__)
        fast = _from_homogeneous(data) if isinstance(data, list | tuple) else None
        if fast is not None:
            self._set(label, len(data), *fast)
            return
        if isinstance(data, list | tuple):
            arr = np.empty(len(data), dtype=object)
            try:
                arr[:] = data
            except ValueError:
                raise ValueError(f"{label} must be 1-dimensional (a flat list of values)") from None
        elif isinstance(data, np.ndarray):
            arr = data
        else:
            raise TypeError(f"data must be a list, tuple or numpy array, got {type(data).__name__}")
        if arr.ndim != 1:
            raise ValueError(f"{label} must be 1-dimensional, got shape {arr.shape}")
        nulls = 0
        if arr.dtype == object:
            values, nulls = _from_objects(arr, label)
        elif arr.dtype.kind == "f":
            mask = np.isnan(arr)
            nulls = int(mask.sum())
            values = arr[~mask].astype(np.float64, copy=False)
        elif arr.dtype.kind in "biuU":
            values = arr
        else:
            raise TypeError(
                f"{label} must hold numbers, booleans or strings, got numpy dtype {arr.dtype}"
            )
        self._set(label, int(arr.size), values, nulls)

    def _set(self, label: str, n: int, values: np.ndarray, nulls: int) -> None:
        self.name = label
        self._n = n
        self._nulls = int(nulls)
        self._values = values
        k = values.dtype.kind
        self._kind = "bool" if k == "b" else "string" if k == "U" else "numeric"

    @property
    def kind(self) -> str:
        return self._kind

    @property
    def values(self) -> np.ndarray:
        """The non-NULL values (a read-only view)."""
        v = self._values.view()
        v.flags.writeable = False
        return v

    def n(self) -> int:
        return self._n

    def null_count(self) -> int:
        return self._nulls

    def value_counts(self) -> dict[Any, int]:
        uniq, counts = np.unique(self._values, return_counts=True)
        return {u.item(): int(c) for u, c in zip(uniq, counts, strict=True)}

    def _clamped(self, lower: float, upper: float, statistic: str, square: bool) -> np.ndarray:
        self._require_numeric(statistic)
        lo, hi = check_bounds(lower, upper, square=square)
        clipped = np.clip(self._values.astype(np.float64), lo, hi)
        return clipped * clipped if square else clipped

    def clamped_sum_exact(self, lower: float, upper: float) -> Fraction:
        return exact_sum_fraction(self._clamped(lower, upper, "clamped_sum", square=False))

    def clamped_sum_of_squares(self, lower: float, upper: float) -> float:
        return exact_sum(self._clamped(lower, upper, "clamped_sum_of_squares", square=True))

    def min(self) -> Any:
        self._require_numeric("min")
        if self._values.size == 0:
            raise self._no_values("min")
        return self._values.min().item()

    def max(self) -> Any:
        self._require_numeric("max")
        if self._values.size == 0:
            raise self._no_values("max")
        return self._values.max().item()
