"""What a sufficient-statistics release of a regression publishes (written by
``mechanism.py``, read by ``noise_aware.py``).

The noisy statistics are ``Release.released`` (``xtx``, ``xty``, ``yty``; ``xtx``, ``t1``).
See :mod:`dpbayes.release.record` for the conventions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from dpbayes.privacy import Neighbours
from dpbayes.release.record import PublicRecord, at_least, optional

__all__ = ["SspLinearRecord", "SspLogisticRecord"]


@dataclass(frozen=True, kw_only=True)
class SspLinearRecord(PublicRecord):
    """Noisy upper triangle of S = sum (x, y)(x, y)' of a linear regression."""

    n: int | None = at_least(0)
    """Number of records: public under substitute; None under add/remove and user level."""
    neighbours: Neighbours
    """The neighbouring relation."""
    sensitivity: float = at_least(0)
    """Sensitivity of the released entries (``sensitivity_norm``; x k per user); with
    ``first_order_share``, of the blocks each divided by its own sensitivity (1, x k)."""
    sensitivity_norm: Literal["L1", "L2"]
    """L1 (Laplace) or L2 (Gaussian)."""
    noise: Literal["laplace", "gaussian"]
    """The noise on every released entry."""
    bounds: tuple[float, ...]
    """The box the clipped vector (x, y) lies in: B for every feature, then B_y."""
    noise_sd_diagonal: float = at_least(0)
    """The sd of the noise on a diagonal entry of S."""
    noise_sd_offdiagonal: float | None = at_least(0)
    """The sd of the noise on an off-diagonal entry (None for a 1 x 1 S)."""
    released_entries: int = at_least(1)
    """Number of noised entries (the upper triangle)."""
    noise_sd_first_order: float | None = optional(minimum=0)
    """The sd of the noise on an entry of the first-order row (X'y; t1)."""
    noise_sd_label: float | None = optional(minimum=0)
    """The sd of the noise on y'y."""
    x_norm2: float | None = optional(minimum=0)
    """R_x^2, the bound on ||x||^2 the Gaussian noise is calibrated to (absent: the box's)."""
    first_order_share: float | None = optional(minimum=0)
    """rho, the share of the budget spent on the first-order row (absent: one joint release)."""
    sensitivity_second_order: float | None = optional(minimum=0)
    """With ``first_order_share``: the sensitivity of the X'X block (x k per user)."""
    sensitivity_first_order: float | None = optional(minimum=0)
    """With ``first_order_share``: the sensitivity of the first-order row (x k per user)."""
    sensitivity_exact: float | None = optional(minimum=0)
    """The sensitivity of the exact sums (PROOF.md §2-3b, x k per user); ``sensitivity``
    is (``sensitivity_exact`` + ``sensitivity_rounding``) (1 + 2**-40) (§3c; both absent
    in records written before §3c)."""
    sensitivity_rounding: float | None = optional(minimum=0)
    """The allowance for the one rounding of each exact entry (PROOF.md §3c)."""


@dataclass(frozen=True, kw_only=True)
class SspLogisticRecord(PublicRecord):
    """Noisy PASS-GLM statistics (T2 = X'X, t1 = sum y x) of a logistic regression."""

    n: int | None = at_least(0)
    """Number of records: public under substitute; None under add/remove and user level."""
    neighbours: Neighbours
    """The neighbouring relation."""
    sensitivity: float = at_least(0)
    """Sensitivity of the released entries (``sensitivity_norm``; x k per user); with
    ``first_order_share``, of the blocks each divided by its own sensitivity (1, x k)."""
    sensitivity_norm: Literal["L1", "L2"]
    """L1 (Laplace) or L2 (Gaussian)."""
    noise: Literal["laplace", "gaussian"]
    """The noise on every released entry."""
    bounds: tuple[float, ...]
    """The box v = (y x, 1) lies in: B for every feature, then 1."""
    noise_sd_diagonal: float = at_least(0)
    """The sd of the noise on a diagonal entry of S = sum v v'."""
    noise_sd_offdiagonal: float | None = at_least(0)
    """The sd of the noise on an off-diagonal entry (None for a 1 x 1 S)."""
    released_entries: int = at_least(1)
    """Number of noised entries (the upper triangle without the constant n)."""
    # the user-level facts come before the approximation's (declared here to keep the
    # order of release files written so far)
    privacy_unit: Literal["user"] | None = optional()
    """``"user"`` for user-level data."""
    rows_per_user: int | None = optional(minimum=1)
    """k, the bound on each user's rows (user-level data only)."""
    neighbouring_relation: str | None = optional()
    """The relation in words (user-level data only)."""
    radius: float = at_least(0)
    """R of the quadratic approximation's interval [-R, R] of the margin."""
    coefficients: tuple[float, ...]
    """(a0, a1, a2): the polynomial a0 + a1 s + a2 s^2 approximating log sigmoid(s) there."""
    noise_sd_first_order: float | None = optional(minimum=0)
    """The sd of the noise on an entry of the first-order row (X'y; t1)."""
    x_norm2: float | None = optional(minimum=0)
    """R_x^2, the bound on ||x||^2 the Gaussian noise is calibrated to (absent: the box's)."""
    first_order_share: float | None = optional(minimum=0)
    """rho, the share of the budget spent on the first-order row (absent: one joint release)."""
    sensitivity_second_order: float | None = optional(minimum=0)
    """With ``first_order_share``: the sensitivity of the X'X block (x k per user)."""
    sensitivity_first_order: float | None = optional(minimum=0)
    """With ``first_order_share``: the sensitivity of the first-order row (x k per user)."""
    sensitivity_exact: float | None = optional(minimum=0)
    """The sensitivity of the exact sums (PROOF.md §2-3b, x k per user); ``sensitivity``
    is (``sensitivity_exact`` + ``sensitivity_rounding``) (1 + 2**-40) (§3c; both absent
    in records written before §3c)."""
    sensitivity_rounding: float | None = optional(minimum=0)
    """The allowance for the one rounding of each exact entry (PROOF.md §3c)."""
