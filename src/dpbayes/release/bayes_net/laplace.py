"""Algorithm 1 of paper 004: Laplace noise on the posterior updates of a Bayesian network.

Zhang, Rubinstein & Dimitrakakis 2016, §3.1. The posterior of a discrete Bayesian network
with Dirichlet priors is the prior plus the family count tables (one table per node,
over the node and its parents). Algorithm 1 adds Laplace noise to every count and
truncates the noisy counts to [0, n].

Sensitivity (L1, over the concatenation of all |I| family tables):

* substitute one record (n public; paper 004 Lemma 1): the old record leaves one cell of
  every family table and the new one enters one cell, so each table moves by at most 2
  in L1 and the whole vector by at most ``2 |I|``;
* add/remove one record: the record enters or leaves exactly one cell of every table,
  so the L1 sensitivity is ``|I|``; n is then private, the counts are truncated to
  [0, inf) only.

* add/remove one user (<= k rows; user-level data, n private): ``k |I|``.

Registered as ``release(bn, data, mechanism="laplace", epsilon=...)``. Proof, line by
line: ``PROOF_laplace_fourier.md`` beside this file.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dpbayes.models.bayes_net import BayesNet, BayesNetStatistics
from dpbayes.privacy import LaplaceMechanism, Neighbours
from dpbayes.privacy.guarantee import user_level
from dpbayes.privacy.noise import NoiseSource
from dpbayes.release.base import Plan, Release, as_rng, register
from dpbayes.release.bayes_net.record import LaplaceTablesRecord

__all__ = ["laplace_sensitivity", "plan_laplace"]


def laplace_sensitivity(model: BayesNet, neighbours: Neighbours | str) -> float:
    """L1 sensitivity of all family count tables: 2|I| (substitute) or |I| (add/remove)."""
    rel = Neighbours.parse(neighbours)
    k = len(model.nodes)
    return float(2 * k if rel is Neighbours.SUBSTITUTE else k)


def _public(
    model: BayesNet,
    *,
    epsilon: float,
    delta: float,
    neighbours: Neighbours,
    rows_per_user: int | None = None,
    **_: Any,
) -> LaplaceMechanism:
    """The release's checks of public facts, run by :func:`plan` before the data are
    read too: the noise mechanism (its scale checked)."""
    if delta:
        raise ValueError("delta must be 0 for the Laplace mechanism (it is pure eps-DP)")
    factor, _user = user_level(rows_per_user, neighbours)
    return LaplaceMechanism(
        epsilon=epsilon,
        sensitivity=laplace_sensitivity(model, neighbours) * factor,
        neighbours=neighbours,
        name="laplace on bayes-net posterior updates (paper 004 alg. 1)",
    )


@register("laplace", BayesNet, user_level=True, record=LaplaceTablesRecord, precheck=_public)
def plan_laplace(
    model: BayesNet,
    stats: BayesNetStatistics,
    *,
    epsilon: float,
    delta: float,
    neighbours: Neighbours,
    allow_non_private: bool = False,
    rows_per_user: int | None = None,
) -> Plan:
    """Algorithm 1: Lap(S / eps) on every count, S = 2|I| (substitute) or |I| (add/remove).

    Privacy: the count vector has L1 sensitivity S (module docstring), so the Laplace
    mechanism is eps-DP; truncation to [0, n] uses only public n, so it is post-processing.
    On data bounded to k rows per user (``rows_per_user``) one user is k records: S x k.
    """
    mech = _public(
        model, epsilon=epsilon, delta=delta, neighbours=neighbours, rows_per_user=rows_per_user
    )
    _, user = user_level(rows_per_user, neighbours)
    n = int(stats.n)
    substitute = neighbours is Neighbours.SUBSTITUTE
    upper = float(n) if substitute else math.inf
    exact = stats.vector(model)
    details: dict[str, Any] = {
        "nodes": len(model.nodes),
        "noised_counts": int(exact.size),
        "truncation": [0.0, upper if substitute else None],
        **user,
    }
    record = LaplaceTablesRecord(
        n=n if substitute else None,
        neighbours=neighbours,
        sensitivity=mech.sensitivity,
        scale=mech.scale,
        **details,
    )

    def run(src: NoiseSource) -> Release:
        noisy = mech.release(exact, rng=as_rng(src)).value
        noisy = np.clip(noisy, 0.0, upper)
        noisy_stats = BayesNetStatistics.from_vector(model, noisy, n)
        if not substitute:
            # n is private: estimate it by the mean total of the noisy tables
            tables = [float(noisy_stats.counts[v].sum()) for v in model.nodes]
            noisy_stats = BayesNetStatistics(
                counts=noisy_stats.counts, n=round(float(np.mean(tables)))
            )
        return Release(
            model=model,
            mechanism="laplace",
            posterior=model.posterior_from(noisy_stats),
            guarantee=mech.guarantee(simulation=src.simulation, **details),
            released={"counts": {k: v.tolist() for k, v in noisy_stats.counts.items()}},
            public=record.to_public(),
        )

    return Plan(guarantee=mech.guarantee(**details), run=run)
