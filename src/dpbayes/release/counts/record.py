"""What a count or Normal-mean release publishes (written by ``mechanism.py``, read by the
noise-aware posteriors of ``noise_aware.py``, ``normal.py`` and ``normal_n.py``).

The noise's scale (Laplace b, geometric b, Gaussian sigma) is in the guarantee's details;
the noisy values themselves are ``Release.released`` (``counts``; ``posterior_mean``; or
``count`` and ``centred_sum``). See :mod:`dpbayes.release.record` for the conventions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from dpbayes.privacy import Neighbours
from dpbayes.release.record import PublicRecord, at_least, optional

__all__ = ["CountsRecord", "NormalMeanRecord"]


@dataclass(frozen=True, kw_only=True)
class CountsRecord(PublicRecord):
    """Laplace, geometric or Gaussian noise on the counts of a Beta-Bernoulli or
    Dirichlet-categorical model (``laplace``, ``geometric``, ``gaussian``)."""

    n: int | None = at_least(0)
    """Number of records: public under substitute neighbours; None under add/remove and
    at user level (n private; the recipient puts a prior on it)."""
    neighbours: Neighbours
    """The neighbouring relation (substitute: n public; add-remove: n private)."""
    noised_coordinates: int = at_least(1)
    """How many leading counts carry noise: 1 for a coin under substitute (the failures
    are n minus the successes), else every category."""
    sensitivity: float = at_least(0)
    """The counts' sensitivity in ``sensitivity_norm`` (scaled by k at user level)."""
    sensitivity_norm: Literal["L1", "L2"]
    """L1 (Laplace, geometric) or L2 (Gaussian)."""
    truncation: tuple[float, float | None]
    """The range the noisy counts are clipped to: [0, n] (substitute) or [0, None = inf)."""


@dataclass(frozen=True, kw_only=True)
class NormalMeanRecord(PublicRecord):
    """Laplace or Gaussian noise on a Normal mean's posterior (substitute: on the
    posterior mean) or on its count and centred sum (add/remove, user level)."""

    n: int | None = at_least(0)
    """Number of values: public under substitute; None under add/remove (private)."""
    neighbours: Neighbours
    """The neighbouring relation."""
    sensitivity: float = at_least(0)
    """Of the posterior mean (substitute) or of (n, T / w) (add/remove; L1 or L2)."""
    posterior_sd: float | None = optional(minimum=0)
    """Substitute only: the posterior's sd, public because n is."""
    bounds: tuple[float, float]
    """The clamping range [lower, upper] of the data."""
    truncation: tuple[float, float] | None = optional()
    """Substitute only: the range the noisy posterior mean is clipped to (the hull of the
    prior mean and the bounds)."""
    centre: float | None = optional()
    """Add/remove only: c = (lower + upper) / 2, the values are centred on."""
    half_width: float | None = optional(minimum=0)
    """Add/remove only: w = (upper - lower) / 2, the unit of the released centred sum."""
