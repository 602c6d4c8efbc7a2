"""What a posterior-sampling release of a linear regression publishes (written by
``mechanism.py``, read by ``noise_aware.py``).

The released weight draws are ``Release.released["draws"]``. See
:mod:`dpbayes.release.record` for the conventions.
"""

from __future__ import annotations

from dataclasses import dataclass

from dpbayes.privacy import Neighbours
from dpbayes.release.record import PublicRecord, added_later, at_least

__all__ = ["RegressionSamplingRecord"]


@dataclass(frozen=True, kw_only=True)
class RegressionSamplingRecord(PublicRecord):
    """Draws from the truncated, tempered posterior (paper 004 §5.2, ``sampling``)."""

    noise_variance: float = at_least(0)
    """sigma^2 of the tempered likelihood the draws come from (>= the model's)."""
    neighbours: Neighbours
    """The neighbouring relation."""
    draws: int = at_least(1)
    """Number of weight draws released."""
    n: int | None = added_later(None, minimum=0)
    """Number of records: public under substitute; None under add/remove (and absent from
    files written before it was recorded: the recipient states it)."""
