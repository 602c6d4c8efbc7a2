"""Private posterior releases (papers 002, 003, 004).

``release(model, data, *, mechanism, epsilon, ...)`` is the one entry point. The
mechanism families register their planners in the registry of :mod:`dpbayes.release.base`, which
imports them on its first use (its ``FAMILIES``, one list):

- ``counts/``: Laplace / geometric / Gaussian noise on posterior counts and means
  (paper 002 §6.2, paper 004 Algorithm 1 for one node).
- ``expmech/``: exponential mechanism over candidate posteriors with divergence scores
  (paper 003, paper 002 §6.3).
- ``input/``: input perturbation (randomized response / Gaussian per record), naive and
  noise-aware posteriors (paper 002 §6.1).
- ``bayes_net/``: Bayesian networks (paper 004): Laplace on the count tables (Alg. 1),
  Laplace in the Fourier domain (Alg. 2), posterior sampling with trimming (Lemma 2)
  and the private MAP (Alg. 3).
- ``regression/``: Bayesian linear regression by posterior sampling (paper 004 §5.2).

Each family folder holds its planners, its noise-aware posteriors (the recipient's
inverse), its compiled kernels and its proof.

This package is light: importing it (and so ``import dpbayes``) loads no numeric
library. ``Release``, ``Plan``, ``plan``, ``mechanisms_for``, ``register``,
``group_privacy_budget`` and ``registered`` come from :mod:`dpbayes.release.base` on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dpbayes.privacy import Accountant, Neighbours
    from dpbayes.release.base import (
        Plan,
        Release,
        group_privacy_budget,
        mechanisms_for,
        noise_aware_posterior,
        plan,
        register,
        register_noise_aware,
        registered,
    )

__all__ = [
    "Plan",
    "Release",
    "group_privacy_budget",
    "mechanisms_for",
    "noise_aware_posterior",
    "plan",
    "register",
    "register_noise_aware",
    "registered",
    "release",
]

_FROM_BASE = frozenset(__all__) - {"release"}


def release(
    model: Any,
    data: Any,
    *,
    mechanism: str,
    epsilon: float,
    delta: float = 0.0,
    accountant: Accountant | None = None,
    rng: Any = None,
    neighbours: Neighbours | str | None = None,
    column: str | None = None,
    allow_non_private: bool = False,
    by: str | None = None,
    groups: Any = None,
    **options: Any,
) -> Release:
    """Release a differentially private posterior of ``model`` given ``data``.

    Parameters
    ----------
    model:
        A dpbayes model, e.g. ``dpb.models.BetaBernoulli(alpha=1, beta=1)``.
    data:
        An array, a pandas Series/DataFrame, a CSV/Parquet path or a
        :class:`dpbayes.data` source; ``column`` picks the column of a table.
    mechanism:
        One of :func:`mechanisms_for` ``(model)``.
    epsilon, delta:
        The privacy parameters; epsilon > 0, delta in [0, 1).
    accountant:
        Spend the release's guarantee from this budget; a spend that does not fit
        raises :class:`~dpbayes.privacy.BudgetExceeded` and nothing is released. A real
        accountant refuses a seeded (``rng`` given) release with a ``ValueError``; use
        ``Accountant(..., simulation=True)`` to account simulations.
    rng:
        ``None`` for the secure samplers (publishable); an int seed or a numpy Generator
        for a seeded simulation (``simulation=True``, not for publication).
    neighbours:
        ``"substitute"`` (n is public, one record changes) or ``"add-remove"`` (n is
        private). Default (``None``): substitute one record on record-level data,
        add/remove one user on user-level data. On data bounded to k rows per user
        (``rows_per_user_bound``, see ``dpbayes.data.as_source(..., user_column=,
        max_rows_per_user=)``) the unit is one user and the relation add/remove one user's
        <= k rows with n private (``"substitute"`` is refused: a substituted user can
        change n); the mechanisms that support it scale the sensitivity by k, the others
        run at the group-privacy per-record budget (see :func:`plan`), and mechanisms
        that need a public n are refused.
    allow_non_private:
        Required for mechanisms that are not differentially private (experiments only);
        their results say ``private=False`` and cannot be charged to an accountant.
    by, groups:
        One posterior per group: ``by`` names a public grouping column of a DataFrame and
        ``groups`` lists its public values; returns a
        :class:`~dpbayes.release.grouped.GroupedRelease` whose guarantee is (eps, delta)
        by parallel composition over the disjoint groups (record-level data only).
    """
    from dpbayes.release import base

    if by is not None or groups is not None:
        from dpbayes.release.grouped import release_grouped

        if by is None:
            raise ValueError("groups needs by= (the public grouping column)")
        return release_grouped(  # type: ignore[return-value]
            model,
            data,
            by=by,
            groups=groups,
            mechanism=mechanism,
            epsilon=epsilon,
            delta=delta,
            accountant=accountant,
            rng=rng,
            neighbours=neighbours,
            column=column,
            allow_non_private=allow_non_private,
            **options,
        )

    return base.release(
        model,
        data,
        mechanism=mechanism,
        epsilon=epsilon,
        delta=delta,
        accountant=accountant,
        rng=rng,
        neighbours=neighbours,
        column=column,
        allow_non_private=allow_non_private,
        **options,
    )


def __getattr__(name: str) -> Any:
    if name in _FROM_BASE:
        value = getattr(importlib.import_module("dpbayes.release.base"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
