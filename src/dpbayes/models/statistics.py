"""Sufficient statistics of the conjugate models, and reading them through the data layer.

A model's ``statistics(data, column)`` returns one of these frozen dataclasses; releases
add noise to them and hand them back to ``posterior_from(stats)``. Noisy statistics may be
real-valued, so the dataclasses accept floats; ``posterior_from`` checks what it needs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from dpbayes.privacy.validation import check_array, check_finite, check_int

__all__ = ["CountStatistics", "SumStatistics", "read_source"]


@dataclass(frozen=True, eq=False)
class CountStatistics:
    """Category counts ``counts`` (shape (m,), int or float) of ``n`` records.

    For :class:`~dpbayes.models.BetaBernoulli` the order is ``[successes, failures]``
    (the alpha side, then the beta side).
    """

    counts: np.ndarray
    n: int

    def __post_init__(self) -> None:
        arr = np.asarray(self.counts)
        if arr.dtype.kind not in "iuf":
            arr = check_array(arr, "counts", ndim=1, min_size=2)
        else:
            arr = check_array(arr, "counts", ndim=1, min_size=2).astype(arr.dtype, copy=True)
        arr.flags.writeable = False
        object.__setattr__(self, "counts", arr)
        object.__setattr__(self, "n", check_int(self.n, "n", minimum=0))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CountStatistics):
            return NotImplemented
        return self.n == other.n and bool(np.array_equal(self.counts, other.counts))

    def __hash__(self) -> int:
        return hash((tuple(self.counts.tolist()), self.n))

    def __repr__(self) -> str:
        return f"CountStatistics(counts={self.counts.tolist()!r}, n={self.n})"

    def to_dict(self) -> dict[str, Any]:
        return {"counts": self.counts.tolist(), "n": self.n}


@dataclass(frozen=True)
class SumStatistics:
    """Number of records ``n`` and the sum ``total`` of their values clamped to [lower, upper].

    ``exact_total``, when the data layer computed it, is the sum as an exact fraction
    (``total`` is it correctly rounded); releases whose sensitivity is a bound on the *real*
    sum read it, so that no rounding of the data's sum enters the released value.
    """

    n: int
    total: float
    exact_total: Fraction | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "n", check_int(self.n, "n", minimum=0))
        object.__setattr__(self, "total", check_finite(self.total, "total"))
        if self.exact_total is not None and not isinstance(self.exact_total, Fraction):
            raise TypeError(
                f"exact_total must be a Fraction or None, got {type(self.exact_total).__name__}"
            )

    def to_dict(self) -> dict[str, Any]:
        return {"n": self.n, "total": self.total}


def read_source(data: Any, column: str | None) -> Any:
    """The data layer's source for ``data``, checked free of missing values.

    Goes through ``dpbayes.data.as_source`` (lists, arrays, Series, DataFrames with
    ``column``, CSV/Parquet paths with ``column``, or an existing source). Empty data are
    data (n = 0, zero statistics): under add/remove neighbours the empty data set is a
    neighbour of every one-record data set, and a refusal would tell the two apart.
    """
    from dpbayes.data import as_source

    src = as_source(data, column=column)
    if int(src.null_count()):  # the count is data: the message does not tell it
        raise ValueError(f"{src.name} contains missing values (NaN/NULL); drop or impute them")
    return src
