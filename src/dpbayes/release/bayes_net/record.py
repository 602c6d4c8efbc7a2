"""What a Bayesian-network release publishes (written by ``laplace.py``, ``fourier.py`` and
``sampling.py``, read by ``noise_aware.py``, ``noise_aware_n.py`` and
``noise_aware_sampling.py``).

The noisy values are ``Release.released`` (family ``counts``; Fourier ``coefficients``;
posterior ``draws``; MAP ``cpts``). See :mod:`dpbayes.release.record` for the conventions.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from dpbayes.privacy import Neighbours
from dpbayes.release.record import PublicRecord, added_later, at_least

__all__ = ["FourierRecord", "LaplaceTablesRecord", "MapRecord", "SamplingRecord"]


@dataclass(frozen=True, kw_only=True)
class LaplaceTablesRecord(PublicRecord):
    """Laplace noise on every family count table (paper 004 Algorithm 1, ``laplace``)."""

    n: int | None = at_least(0)
    """Number of records: public under substitute; None under add/remove and user level."""
    neighbours: Neighbours
    """The neighbouring relation."""
    sensitivity: float = at_least(0)
    """L1 sensitivity of all the tables: 2|I| (substitute) or |I| (add/remove), x k per user."""
    scale: float = at_least(0)
    """The Laplace scale b = sensitivity / eps of every cell's noise."""
    nodes: int = at_least(1)
    """Number of nodes |I| (one family table each)."""
    noised_counts: int = at_least(1)
    """Number of noised cells, over all the family tables."""
    truncation: tuple[float, float | None]
    """The range every noisy cell is clipped to: [0, n] or [0, None = inf) (n private)."""


@dataclass(frozen=True, kw_only=True)
class FourierRecord(PublicRecord):
    """Laplace noise on the Fourier coefficients of the downward closure (Algorithm 2)."""

    n: int | None = at_least(0)
    """Number of records: public under substitute (the empty-set coefficient, not noised);
    None under add/remove (noised with the others)."""
    neighbours: Neighbours
    """The neighbouring relation."""
    sensitivity: float = at_least(0)
    """L1 sensitivity of the noised coefficients: 2(|T| - 1) (substitute) or |T|."""
    scale: float = at_least(0)
    """The Laplace scale b = sensitivity / eps of every noised coefficient."""
    closure_size: int = at_least(1)
    """|T|, the number of sets in the downward closure of the families."""
    noised_coefficients: int = at_least(0)
    """How many coefficients carry noise (|T| - 1 or |T|)."""
    stealth: float = at_least(0)
    """The requested probability that no rebuilt cell is negative (0: no raise)."""
    empty_set_raise: float = at_least(0)
    """D, the data-independent amount added to the empty-set coefficient for ``stealth``."""


@dataclass(frozen=True, kw_only=True)
class SamplingRecord(PublicRecord):
    """Draws from the trimmed posterior (paper 004 §4, ``sampling``)."""

    trims: Mapping[str, float]
    """Per node, the trim p: every released CPT entry is >= p."""
    neighbours: Neighbours
    """The neighbouring relation."""
    draws: int = at_least(1)
    """Number of posterior draws released."""
    n: int | None = added_later(None, minimum=0)
    """Number of records: public under substitute; None under add/remove (and absent from
    files written before it was recorded: the recipient states it)."""


@dataclass(frozen=True, kw_only=True)
class MapRecord(PublicRecord):
    """The exponential mechanism over a grid of CPTs (Algorithm 3, ``map``)."""

    trim: float = at_least(0)
    """The grid's lower bound p on every CPT entry."""
    grid: int = at_least(1)
    """The grid's resolution G (points lower + (1 - k p) m / G, m a composition of G)."""
    neighbours: Neighbours
    """The neighbouring relation."""
    scale: float | None = added_later(None, minimum=0)
    """The selection temperature: P(g) proportional to exp(utility(g) / scale) (absent from
    files written before it was recorded: the guarantee's details hold it)."""
    n: int | None = added_later(None, minimum=0)
    """Number of records: public under substitute; None under add/remove (and absent from
    files written before it was recorded)."""
