"""Algorithm 2 of paper 004: Laplace noise in the Fourier domain (Barak et al. 2007).

Zhang, Rubinstein & Dimitrakakis 2016, §3.2, for Bayesian networks of binary variables.
Write the full contingency table of the d variables as a function on {0,1}^d. Its
(unnormalised) Fourier coefficients are ``c_a = sum_records (-1)^{<a, x>}`` for subsets
``a`` of the variables, and the marginal table on a set ``b`` depends only on the
coefficients of the subsets of ``b`` (paper 004 Theorem 2):

    count_b(y) = 2^{-|b|} sum_{a subset of b} c_a (-1)^{<a, y>}.

So the family tables (node plus parents) of a network need only the coefficients on the
downward closure T of the families. Algorithm 2 adds Laplace noise to those coefficients
and rebuilds every family table from them: the tables are *consistent* (any two agree on
the marginals of their common variables, since they are the marginals of one real-valued
table), which hides that noise was added ("stealth"). The empty-set coefficient is then
raised by ``D``, which adds ``2^{-|b|} D`` to every cell of table b, so that no cell is
negative with the probability the caller asks for.

Sensitivity: ``c_a`` is a sum over records of +-1, so one substituted record moves it by
at most 2 and one added/removed record by 1. Under substitute ``c_{}`` = n is public and
not noised: L1 sensitivity ``2 (|T| - 1)``; under add/remove ``|T|`` (paper 004 Cor. 2
states 2|T| for all of T).

Choosing D (data-independent): a cell of table b is its true count (>= 0) plus
``2^{-|b|} (D + sum_{a subset b} +-eta_a)``, so it is non-negative whenever
``D >= sum_{a subset b} |eta_a|``, a Gamma(m_b, scale) variable. D solves
``sum_b P(Gamma(m_b, scale) > D) = 1 - stealth`` (union bound over the families), a
tighter choice than the paper's Corollary 3 with the same guarantee.

User level (add/remove one user, <= k rows): the group-privacy fallback of
``release/base.py`` runs this mechanism at eps/k. Proof, line by line:
``PROOF_laplace_fourier.md`` beside this file.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import special

from dpbayes.models.bayes_net import BayesNet, BayesNetStatistics
from dpbayes.privacy import LaplaceMechanism, Neighbours
from dpbayes.privacy.noise import NoiseSource
from dpbayes.privacy.validation import check_probability
from dpbayes.release.base import Plan, Release, as_rng, register
from dpbayes.release.bayes_net.record import FourierRecord

__all__ = [
    "MAX_PARENTS",
    "downward_closure",
    "fourier_coefficients",
    "fourier_sensitivity",
    "marginal_tables",
    "plan_fourier",
    "stealth_raise",
]


#: The most parents of a node: its family's 2^(m+1) coefficients are noised, rebuilt and
#: published one by one (16 parents: 131,072 of them, about 3 s with the secure noise;
#: the time doubles with every parent).
MAX_PARENTS = 16


def _check_binary(model: BayesNet) -> None:
    """Binary variables and at most :data:`MAX_PARENTS` parents per node (public facts)."""
    for name, cats in model.variables.items():
        if len(cats) != 2:
            raise ValueError(
                f"the fourier mechanism needs binary variables; {name!r} has {len(cats)} categories"
            )
    for v in model.nodes:
        if len(model.parents[v]) > MAX_PARENTS:
            raise ValueError(
                f"the fourier mechanism takes at most {MAX_PARENTS} parents per node; node "
                f"{v!r} has {len(model.parents[v])} (use mechanism='laplace')"
            )


def _family_mask(model: BayesNet, node: str) -> int:
    pos = {v: i for i, v in enumerate(model.nodes)}
    return sum(1 << pos[u] for u in model.family(node))


def _subsets(mask: int) -> list[int]:
    out, sub = [], mask
    while True:
        out.append(sub)
        if sub == 0:
            return sorted(out)
        sub = (sub - 1) & mask


def downward_closure(model: BayesNet) -> list[int]:
    """Bit masks (bit i = the model's i-th variable) of every subset of every family."""
    closure: set[int] = set()
    for v in model.nodes:
        closure.update(_subsets(_family_mask(model, v)))
    return sorted(closure)


def fourier_sensitivity(model: BayesNet, neighbours: Neighbours | str) -> tuple[int, float]:
    """(number of noised coefficients, L1 sensitivity) for ``neighbours``."""
    t = len(downward_closure(model))
    if Neighbours.parse(neighbours) is Neighbours.SUBSTITUTE:
        return t - 1, 2.0 * (t - 1)
    return t, float(t)


def _transform(table: Any) -> np.ndarray:
    """The Walsh-Hadamard transform over every (binary) axis of a family table:
    ``out[b] = sum_y table[y] (-1)^{<b, y>}``, one butterfly per axis (m 2^m operations
    for m axes, where the sum over subsets cost 4^m)."""
    t = np.asarray(table, dtype=float)
    for axis in range(t.ndim):
        lo, hi = np.take(t, 0, axis=axis), np.take(t, 1, axis=axis)
        t = np.stack([lo + hi, lo - hi], axis=axis)
    return t


def _cell_masks(model: BayesNet, node: str) -> list[int]:
    """The subset mask of every cell of ``node``'s family table in C order: the cell with
    index 1 on the axis of variable u has u's bit set."""
    pos = {v: i for i, v in enumerate(model.nodes)}
    masks = [0]
    for u in model.family(node):
        bit = 1 << pos[u]
        masks = [m + b * bit for m in masks for b in (0, 1)]
    return masks


def fourier_coefficients(model: BayesNet, counts: BayesNetStatistics) -> dict[int, float]:
    """The coefficients c_a, a in the downward closure, computed from the family tables:
    for a subset a of a family, c_a = sum_y table[y] (-1)^{<a, y>}, the family table's
    Walsh-Hadamard transform at a."""
    _check_binary(model)
    out: dict[int, float] = {}
    for v in model.nodes:
        values = _transform(counts.counts[v]).ravel().tolist()
        for mask, c in zip(_cell_masks(model, v), values, strict=True):
            out.setdefault(mask, c)
    return out


def marginal_tables(model: BayesNet, coefficients: dict[int, float]) -> dict[str, np.ndarray]:
    """Every family table rebuilt from the coefficients (paper 004 Theorem 2):
    2^{-|b|} sum_{a subset b} c_a (-1)^{<a, y>}, the inverse Walsh-Hadamard transform."""
    tables = {}
    for v in model.nodes:
        shape = model.table_shape(v)
        coeffs = np.array([coefficients[m] for m in _cell_masks(model, v)], dtype=float)
        tables[v] = _transform(coeffs.reshape(shape)) / 2.0 ** len(shape)
    return tables


def stealth_raise(model: BayesNet, scale: float, stealth: float, noise_empty: bool) -> float:
    """The raise D of the empty-set coefficient that keeps every table non-negative with
    probability at least ``stealth`` (union bound over the families; 0 for stealth=0)."""
    from scipy import optimize

    if stealth == 0:
        return 0.0
    sizes = []
    for v in model.nodes:
        m = 2 ** len(model.family(v))
        sizes.append(m if noise_empty else m - 1)
    shapes, mult = np.unique(np.asarray(sizes, dtype=float), return_counts=True)

    def excess(d: float) -> float:
        # P(Gamma(m, scale) > d) = Q(m, d / scale), the regularised upper incomplete gamma
        return float(np.sum(mult * special.gammaincc(shapes, d / scale))) - (1.0 - stealth)

    hi = scale * (float(shapes.max()) + 10.0)
    while excess(hi) > 0:
        hi *= 2.0
    return float(optimize.brentq(excess, 0.0, hi, xtol=1e-10 * scale))


def _public(
    model: BayesNet,
    *,
    epsilon: float,
    delta: float,
    neighbours: Neighbours,
    stealth: float = 0.9,
    **_: Any,
) -> tuple[float, LaplaceMechanism]:
    """The fourier release's checks of public facts (model, privacy parameters, option),
    run by :func:`plan` before the data are read too: (stealth, the noise mechanism)."""
    if delta:
        raise ValueError("delta must be 0 for the fourier mechanism (it is pure eps-DP)")
    _check_binary(model)
    st = check_probability(stealth, "stealth")
    if st >= 1.0:
        raise ValueError(f"stealth must be in [0, 1), got {st}")
    mech = LaplaceMechanism(
        epsilon=epsilon,
        sensitivity=fourier_sensitivity(model, neighbours)[1],
        neighbours=neighbours,
        name="laplace on bayes-net fourier coefficients (paper 004 alg. 2)",
    )
    return st, mech


@register("fourier", BayesNet, options=("stealth",), record=FourierRecord, precheck=_public)
def plan_fourier(
    model: BayesNet,
    stats_: BayesNetStatistics,
    *,
    epsilon: float,
    delta: float,
    neighbours: Neighbours,
    allow_non_private: bool = False,
    stealth: float = 0.9,
) -> Plan:
    """Algorithm 2: Laplace noise on the Fourier coefficients of the downward closure.

    Privacy: the noised coefficients have L1 sensitivity 2(|T|-1) (substitute; c_{} = n is
    public) or |T| (add/remove), so Lap(sensitivity/eps) on each is eps-DP; rebuilding the
    tables, raising c_{} by a data-independent D and truncating at 0 are post-processing.

    Options: ``stealth`` in [0, 1): probability that no released cell is negative
    (0 disables the raise). A release that still has negative cells says so
    (``released["negative_cells"]``, ``released["stealth"] = False``) and is truncated to 0.
    """
    st, mech = _public(model, epsilon=epsilon, delta=delta, neighbours=neighbours, stealth=stealth)
    substitute = neighbours is Neighbours.SUBSTITUTE
    k, sens = fourier_sensitivity(model, neighbours)
    raise_by = stealth_raise(model, mech.scale, st, noise_empty=not substitute)
    closure = downward_closure(model)
    noised = [a for a in closure if a != 0 or not substitute]
    coeffs = fourier_coefficients(model, stats_)
    n = int(stats_.n)
    details: dict[str, Any] = {
        "closure_size": len(closure),
        "noised_coefficients": k,
        "stealth": st,
        "empty_set_raise": raise_by,
    }
    record = FourierRecord(
        n=n if substitute else None,
        neighbours=neighbours,
        sensitivity=sens,
        scale=mech.scale,
        **details,
    )

    def run(src: NoiseSource) -> Release:
        exact = np.array([coeffs[a] for a in noised])
        noisy = dict(zip(noised, mech.release(exact, rng=as_rng(src)).value.tolist(), strict=True))
        if substitute:
            noisy[0] = float(n)
        noisy[0] += raise_by
        tables = marginal_tables(model, noisy)
        negative = int(sum(int(np.sum(t < 0)) for t in tables.values()))
        clipped = {v: np.maximum(t, 0.0) for v, t in tables.items()}
        released_n = n if substitute else max(0, round(noisy[0] - raise_by))
        noisy_stats = BayesNetStatistics(counts=clipped, n=released_n)
        names = model.nodes
        labels = {
            a: ",".join(names[i] for i in range(len(names)) if a >> i & 1) or "{}" for a in noisy
        }
        return Release(
            model=model,
            mechanism="fourier",
            posterior=model.posterior_from(noisy_stats),
            guarantee=mech.guarantee(simulation=src.simulation, **details),
            released={
                "coefficients": {labels[a]: noisy[a] for a in sorted(noisy)},
                "counts": {v: t.tolist() for v, t in tables.items()},
                "negative_cells": negative,
                "stealth": negative == 0,
            },
            public=record.to_public(),
        )

    return Plan(guarantee=mech.guarantee(**details), run=run)
