"""What an exponential-mechanism release publishes (written by ``mechanism.py``, read by
``noise_aware.py``).

The chosen candidate itself is ``Release.released["counts"]``. The noise-aware posterior
recomputes the data-dependent sensitivities (local, smooth) for every possible data set
from these public facts; see :mod:`dpbayes.release.record` for the conventions.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from dpbayes.release.record import PublicRecord, added_later, at_least, optional

__all__ = ["ExpmechCoinRecord", "ExpmechDirichletRecord"]


@dataclass(frozen=True, kw_only=True)
class ExpmechCoinRecord(PublicRecord):
    """The exponential mechanism over the n + 1 Beta posteriors of a coin (also a
    two-category Dirichlet-categorical model)."""

    n: int = at_least(1)
    """Number of records (public: the relation is substitute one record)."""
    sensitivity_kind: Literal["global", "smooth", "local"]
    """Which sensitivity scales the utilities (``local`` is not private)."""
    sensitivity: float | None = at_least(0)
    """The sensitivity used (global, or the local one at the data); None for smooth,
    whose data-dependent value S_beta(x) is never released."""
    global_sensitivity: float = at_least(0)
    """The global sensitivity for the prior and n (the bound of the smooth one)."""
    lemma_bound: float | None = at_least(0)
    """Paper 002's closed-form bound of the global sensitivity when every prior
    parameter is >= 1 (None otherwise)."""
    divergence: Literal["hellinger", "tv"]
    """The divergence of the utility u = -D(posterior(x), candidate)."""
    exponent_epsilon: float | None = added_later(None, minimum=0)
    """e of the selection exp(e u / (2 S)): eps, or eps/2 for smooth (files written before
    it was recorded lack it: the guarantee's details, else its eps, then)."""
    n_candidates: int = at_least(1)
    """Number of candidates."""
    smooth_beta: float | None = optional(minimum=0)
    """Smooth sensitivity only: the beta of S_beta."""


@dataclass(frozen=True, kw_only=True)
class ExpmechDirichletRecord(PublicRecord):
    """The exponential mechanism over Dirichlet posteriors of m >= 3 categories (the
    two-category model is released as a coin: :class:`ExpmechCoinRecord`)."""

    n: int = at_least(1)
    """Number of records (public: the relation is substitute one record)."""
    sensitivity_kind: Literal["global", "smooth", "local"]
    """Which sensitivity scales the utilities (``local`` is not private)."""
    sensitivity: float | None = at_least(0)
    """The sensitivity used; None for smooth (S_beta(x) is never released)."""
    global_sensitivity: float = at_least(0)
    """The global sensitivity for the prior and n."""
    lemma_bound: float | None = at_least(0)
    """Paper 002's bound of the global sensitivity (every prior parameter >= 1), or None."""
    divergence: Literal["hellinger"]
    """The divergence of the utility (Hellinger: total variation has no closed form)."""
    exponent_epsilon: float | None = added_later(None, minimum=0)
    """e of the selection exp(e u / (2 S)) (absent from files written before it was)."""
    n_candidates: int = at_least(1)
    """Number of candidates."""
    lattice: int | None = at_least(1)
    """None: every count vector of n is a candidate; L: the lattice round(n c' / L) over
    the count vectors c' of L."""
    smooth_beta: float | None = optional(minimum=0)
    """Smooth sensitivity only: the beta of S_beta."""

    @classmethod
    def read(cls, d: Mapping[str, Any]) -> PublicRecord:
        """A two-category model's release is a coin's (no ``lattice``)."""
        if "lattice" not in d:
            return ExpmechCoinRecord.from_public(d)
        return cls.from_public(d)
