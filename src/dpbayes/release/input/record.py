"""What an input-perturbation release publishes (written by ``mechanism.py``, read by
``noise_aware.py``).

The noisy data's summary is ``Release.released`` (the reported ``counts`` of a coin; the
noisy ``total`` of a Normal mean). See :mod:`dpbayes.release.record` for the conventions.
"""

from __future__ import annotations

from dataclasses import dataclass

from dpbayes.privacy import Neighbours
from dpbayes.release.record import PublicRecord, at_least

__all__ = ["InputCoinRecord", "InputNormalRecord"]


@dataclass(frozen=True, kw_only=True)
class InputCoinRecord(PublicRecord):
    """Randomized response on every boolean of a Beta-Bernoulli model."""

    n: int = at_least(0)
    """Number of records (one report each, so public; substitute only)."""
    keep_probability: float = at_least(0)
    """The probability a report is the true value (e^eps / (1 + e^eps))."""
    neighbours: Neighbours
    """The neighbouring relation (substitute)."""


@dataclass(frozen=True, kw_only=True)
class InputNormalRecord(PublicRecord):
    """Gaussian noise on every clamped value of a Normal-mean model."""

    n: int = at_least(0)
    """Number of values (one noisy value each, so public; substitute only)."""
    sigma: float = at_least(0)
    """The sd of the Gaussian noise added to each value."""
    range: tuple[float, float]
    """The clamping range [lower, upper] (its width is the sensitivity)."""
