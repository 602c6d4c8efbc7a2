"""Beta-Bernoulli model: coin flips x_i in {0, 1} with a Beta(alpha, beta) prior.

Conjugate update (e.g. Dimitrakakis et al. 2017, §3; Zhang et al. 2016, §5): after k
successes in n flips the posterior is Beta(alpha + k, beta + n - k). Exact and non-private.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from dpbayes.models.distributions import Beta
from dpbayes.models.statistics import CountStatistics, read_source
from dpbayes.privacy.validation import check_positive

__all__ = ["BetaBernoulli"]

_NOT_BINARY = "data must be 0/1 or boolean for the beta-bernoulli model, got another value"


def _binary(value: Any) -> int:
    """0 or 1 for a boolean, an integer 0/1 or a float 0.0/1.0; ValueError otherwise."""
    if isinstance(value, bool | np.bool_):
        return int(value)
    if isinstance(value, numbers.Real) and float(value) in (0.0, 1.0):
        return int(float(value))
    raise ValueError(_NOT_BINARY)  # the value itself is data: the message does not quote it


@dataclass(frozen=True, kw_only=True)
class BetaBernoulli:
    """Bernoulli likelihood with a Beta(alpha, beta) prior; alpha, beta > 0 and finite."""

    alpha: float = 1.0
    beta: float = 1.0
    name: ClassVar[str] = "beta-bernoulli"

    def __post_init__(self) -> None:
        object.__setattr__(self, "alpha", check_positive(self.alpha, "alpha"))
        object.__setattr__(self, "beta", check_positive(self.beta, "beta"))

    @property
    def prior(self) -> Beta:
        return Beta(self.alpha, self.beta)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "alpha": self.alpha, "beta": self.beta}

    def statistics(self, data: Any, column: str | None = None) -> CountStatistics:
        """Counts ``[successes, failures]`` of the data (exact, non-private).

        A record counts by its own value only: in-memory data (lists, arrays, pandas
        columns, Python objects included) value by value, ``True``/``1``/``1.0`` a
        success and ``False``/``0``/``0.0`` a failure; a CSV file is read as text and
        every field parsed by itself (``1``, ``1.0``, ``true`` in any case are a success;
        :func:`~dpbayes.data.text_values.text_value`), whatever the other records
        hold. Typed tables keep their schema's type.
        """
        from dpbayes.data import as_source
        from dpbayes.data.readers import guesses_types
        from dpbayes.data.text_values import text_value
        from dpbayes.models.bayes_net_counts import column_codes, in_memory_column

        column_data = in_memory_column(data, column)
        if column_data is not None:
            values, name = column_data
            try:
                codes = column_codes((1, 0), values)  # [successes, failures]
            except TypeError:  # an unhashable value (a list, a dict)
                codes = np.full(values.shape, -1)
            if bool(np.any(codes == -2)):  # the count is data: the message does not tell it
                raise ValueError(f"{name} contains missing values (NaN/NULL); drop or impute them")
            if bool(np.any(codes < 0)):
                raise ValueError(f"{name}: {_NOT_BINARY}")
            tally = np.bincount(codes, minlength=2).astype(np.int64)
            return CountStatistics(counts=tally, n=int(values.shape[0]))
        csv = guesses_types(data)
        src = read_source(as_source(data, column=column, text=csv), None)
        counts = [0, 0]
        for value, count in src.value_counts().items():
            try:
                parsed = text_value(value) if isinstance(value, str) else value
                counts[1 - _binary(parsed)] += int(count)
            except ValueError as exc:
                raise ValueError(f"{src.name}: {exc}") from None
        return CountStatistics(counts=np.array(counts, dtype=np.int64), n=int(src.n()))

    def posterior_from(self, stats: CountStatistics) -> Beta:
        """Beta(alpha + successes, beta + failures); counts may be real (noisy) but >= 0."""
        if not isinstance(stats, CountStatistics):
            raise TypeError(f"stats must be CountStatistics, got {type(stats).__name__}")
        if stats.counts.shape != (2,):
            raise ValueError(f"stats.counts must have 2 entries, got shape {stats.counts.shape}")
        k = check_positive(float(stats.counts[0]), "stats.counts[0]", allow_zero=True)
        f = check_positive(float(stats.counts[1]), "stats.counts[1]", allow_zero=True)
        return Beta(self.alpha + k, self.beta + f)

    def posterior(self, data: Any, column: str | None = None) -> Beta:
        """Exact (non-private) posterior given the data."""
        return self.posterior_from(self.statistics(data, column=column))

    def posterior_predictive(self, data: Any, column: str | None = None) -> float:
        """P(next flip = 1 | data) = (alpha + k) / (alpha + beta + n)."""
        return self.posterior(data, column=column).mean()
