"""Posterior sampling (paper 004 §4, Dimitrakakis et al. 2014) and private MAP (Algorithm 3).

Posterior sampling releases a draw theta ~ xi(theta | x) instead of a noisy posterior.
If ``sup_theta |log p(z | theta) - log p(z' | theta)| <= L`` for any two records z, z'
on the prior's support, the posterior density ratio between neighbouring data sets is
at most e^{2L} (substitute: one likelihood factor swapped and the normaliser moved by at
most e^L each) or e^{L} (add/remove: one factor p(z | theta) against its posterior mean,
both within a factor e^L), so one draw is 2L-DP (substitute) or L-DP (add/remove).

For a discrete Bayesian network (paper 004 Lemma 2) L is the sum of the nodes'
constants. Categorical likelihoods are not Lipschitz near 0, so the prior of node i is
trimmed to CPT rows with every entry >= p_i; then log theta lies in
[log p_i, log(1 - (k_i - 1) p_i)] and ``L_i = log((1 - (k_i - 1) p_i) / p_i)``. Given eps
the constant is split evenly over the |I| nodes, which gives ``p_i = 1 / (e^{L/|I|} + k_i - 1)``.
The released draw is from the Dirichlet posterior truncated to the trimmed region and
restricted to a public lattice in it, selected exactly (:mod:`.lattice_sampler`): Lemma 2
holds for any base measure on the trimmed region, here the counting measure of the
lattice, and only for exact draws. A continuous sampler fed with uniforms of finite
precision reached different sets of doubles on neighbouring data sets (an unbounded
loss); the lattice is the same for every data set. The randomness is one uniform integer
per row from the noise source (``rng=None``: the OS CSPRNG). Proof of the guarantee and of
each sampler: ``PROOF_sampling.md`` beside this file.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from dpbayes.models.bayes_net import BayesNet, BayesNetParameters, BayesNetStatistics
from dpbayes.privacy import ExponentialMechanism, Guarantee, Neighbours
from dpbayes.privacy.noise import NoiseSource
from dpbayes.privacy.validation import check_epsilon, check_int, check_probability
from dpbayes.release.base import Plan, Release, as_rng, posterior_sampling_guarantee, register
from dpbayes.release.bayes_net.lattice_sampler import (
    FLOOR,
    SAMPLING_LATTICE_POINTS,
    LatticeRowSampler,
    rounding_allowance,
    row_log_weights,
)
from dpbayes.release.bayes_net.record import MapRecord, SamplingRecord
from dpbayes.release.bayes_net.trimmed_sampler import (
    MIN_WIDTH,
    check_trim,
    truncated_beta,
    truncated_dirichlet,
)

__all__ = [
    "MAP_GRID_ENTRIES",
    "MAP_GRID_POINTS",
    "MAX_MAP_SCORE",
    "MAX_NODE_BUDGET",
    "SAMPLER",
    "lipschitz_constant",
    "map_grid",
    "plan_map",
    "plan_sampling",
    "sampling_epsilon",
    "trim_for_epsilon",
    "truncated_beta",
    "truncated_dirichlet",
]

#: The largest per-node Lipschitz budget l = eps / (draws f |I|) of posterior sampling:
#: the trim 1 / (e^l + k - 1) is then at least e^-700 ~ 1e-304, a normal double (e^l
#: overflowed at l ~ 709.8: eps = 3000 raised a bare OverflowError).
MAX_NODE_BUDGET = 700.0
#: The MAP grid: at most this many points per CPT row (the lattice is made coarser until
#: it fits) ...
MAP_GRID_POINTS = 20000
#: ... and at most this many entries (points x categories): the coarsest lattice of a
#: node with k categories is its k vertices, k x k entries, so k <= 4096.
MAP_GRID_ENTRIES = 1 << 24
#: The largest |utility| of a MAP grid point from the prior alone, alpha * k * |log trim|
#: (at alpha = 1.7e308 the utilities overflowed). The counts' part is summed in
#: double-double and its rounding is in the guarantee (PROOF_sampling.md §6, §9).
MAX_MAP_SCORE = 2.0**32

SAMPLER = (
    "posterior restricted to a public lattice on the trimmed simplex (at most 2^18 points "
    "per node), one point per CPT row selected with probability exactly proportional to "
    "its computed posterior weight, from one uniform integer of the noise source (the OS "
    "CSPRNG on the secure path); see PROOF_sampling.md section 9"
)


def lipschitz_constant(model: BayesNet, trims: dict[str, float]) -> float:
    """Paper 004 Lemma 2: sum over nodes of log((1 - (k_i - 1) p_i) / p_i)."""
    total = 0.0
    for v in model.nodes:
        k, p = model.cardinality(v), float(trims[v])
        if not 0.0 < p < 1.0 / k:
            raise ValueError(f"trim for {v!r} must be in (0, 1/{k}), got {p}")
        total += math.log((1.0 - (k - 1) * p) / p)
    return total


def sampling_epsilon(
    model: BayesNet,
    trim: float | dict[str, float],
    *,
    draws: int = 1,
    neighbours: Any = "substitute",
) -> float:
    """The eps of ``draws`` posterior draws with the prior trimmed at ``trim``."""
    trims = trim if isinstance(trim, dict) else {v: float(trim) for v in model.nodes}
    d = check_int(draws, "draws", minimum=1)
    per_draw = lipschitz_constant(model, trims) + sampling_allowance(model, trims)
    return d * Neighbours.parse(neighbours).lipschitz_factor * per_draw


def sampling_allowance(model: BayesNet, trims: dict[str, float], scale: float = 1.0) -> float:
    """The rounding allowance of one draw per node (one changed row each;
    :func:`~.lattice_sampler.rounding_allowance`), summed over the nodes; the guarantee
    adds it to the Lipschitz constant (times the relation's factor)."""
    return math.fsum(
        rounding_allowance(model.cardinality(v), float(trims[v]), model.alpha, FLOOR, scale)
        for v in model.nodes
    )


def trim_for_epsilon(
    model: BayesNet, epsilon: float, *, draws: int = 1, neighbours: Any = "substitute"
) -> dict[str, float]:
    """Per-node trims p_i that make ``draws`` draws eps-DP (Lipschitz budget split evenly).

    Refuses, naming epsilon and from public facts only, a per-node budget
    l = eps / (draws f |I|) above :data:`MAX_NODE_BUDGET` (the trim would underflow) or
    one so small that a node's trimmed region 1 - k p = (e^l - 1) / (e^l + k - 1) is
    narrower than ``MIN_WIDTH`` (the exact samplers' limit, PROOF_sampling.md §1).
    """
    d = check_int(draws, "draws", minimum=1)
    eps = check_epsilon(epsilon)
    runs = d * Neighbours.parse(neighbours).lipschitz_factor * len(model.nodes)
    per_node = eps / runs
    if not per_node <= MAX_NODE_BUDGET:
        raise ValueError(
            f"epsilon = {eps:g} is too large for posterior sampling: its per-node budget "
            f"{per_node:.4g} exceeds {MAX_NODE_BUDGET:g}, where the trim e^-{per_node:.4g} "
            f"underflows; use epsilon <= {MAX_NODE_BUDGET * runs:.6g}"
        )
    for v in model.nodes:
        k = model.cardinality(v)
        width = math.expm1(per_node) / (math.exp(per_node) + k - 1)
        if width < MIN_WIDTH:
            need = runs * math.log1p(MIN_WIDTH * k / (1.0 - MIN_WIDTH))
            raise ValueError(
                f"epsilon = {eps:g} is too small for posterior sampling: it trims node {v!r} "
                f"to a region of width {width:.3g} < {MIN_WIDTH:g}, too narrow for an exact "
                f"draw; use epsilon >= {need:.3g} or fewer nodes"
            )

    def trims_at(budget: float) -> dict[str, float]:
        return {v: 1.0 / (math.exp(budget) + model.cardinality(v) - 1) for v in model.nodes}

    # the rounding allowance (largest at the smallest trim, so at this budget's) comes off
    # each node's budget first
    per_node -= max(sampling_allowance(model, trims_at(per_node)), 0.0) / len(model.nodes)
    while True:  # round so that the computed eps never exceeds the requested one
        trims = trims_at(per_node)
        if sampling_epsilon(model, trims, draws=d, neighbours=neighbours) <= eps:
            return trims
        per_node *= 1 - 1e-12


def _sampling_public(
    model: BayesNet,
    *,
    epsilon: float,
    delta: float,
    neighbours: Neighbours,
    draws: int = 1,
    trim: float | None = None,
    **_: Any,
) -> tuple[int, dict[str, float], float, float, float]:
    """The sampling release's checks of public facts (model, privacy parameters, options),
    run by :func:`plan` before the data are read too: (draws, trims, Lipschitz constant,
    rounding allowance, eps per draw)."""
    if delta:
        raise ValueError("delta must be 0 for posterior sampling (it is pure eps-DP)")
    d = check_int(draws, "draws", minimum=1)
    if trim is None:
        trims = trim_for_epsilon(model, epsilon, draws=d, neighbours=neighbours)
    else:
        tp = check_probability(trim, "trim", open_interval=True)
        trims = {v: tp for v in model.nodes}
    lip = lipschitz_constant(model, trims)
    for v in model.nodes:
        check_trim(model.cardinality(v), trims[v], f"the trim of {v!r}")
    allowance = sampling_allowance(model, trims)
    per_draw = Neighbours.parse(neighbours).lipschitz_factor * (lip + allowance)
    if per_draw * d > epsilon * (1 + 1e-9):
        raise ValueError(
            f"trim={trim} gives eps {per_draw * d:.6g} for {d} draw(s), more than epsilon={epsilon}"
        )
    _check_alpha(model, min(trims.values()), "sampling")
    for v in model.nodes:
        try:
            check_lattice_categories(model.cardinality(v), SAMPLING_LATTICE_POINTS)
        except ValueError as exc:
            raise ValueError(f"node {v!r}: {exc}") from None
    return d, trims, lip, allowance, per_draw


@register(
    "sampling",
    BayesNet,
    options=("draws", "trim"),
    record=SamplingRecord,
    precheck=_sampling_public,
)
def plan_sampling(
    model: BayesNet,
    stats_: BayesNetStatistics,
    *,
    epsilon: float,
    delta: float,
    neighbours: Neighbours,
    allow_non_private: bool = False,
    draws: int = 1,
    trim: float | None = None,
) -> Plan:
    """Release ``draws`` draws from the trimmed posterior on its public lattice (paper 004
    §4, Theorem 4.1).

    Privacy: with the prior trimmed at p_i, log-likelihoods are L-Lipschitz (Lemma 2), so
    each draw is 2L-DP (substitute) or L-DP (add/remove); ``draws`` draws compose
    sequentially. With ``trim`` the guarantee follows from it and must not exceed eps.
    """
    d, trims, lip, allowance, per_draw = _sampling_public(
        model, epsilon=epsilon, delta=delta, neighbours=neighbours, draws=draws, trim=trim
    )
    lattices: dict[tuple[int, float], np.ndarray] = {}
    for v in model.nodes:
        key = (model.cardinality(v), trims[v])
        if key not in lattices:
            lattices[key] = map_grid(key[0], key[1], 1 << 30, points=SAMPLING_LATTICE_POINTS)
    details: dict[str, Any] = {
        "trims": trims,
        "lipschitz": lip,
        "rounding_allowance": allowance,
        "draws": d,
        "sampler": SAMPLER,
        "lattice_points": {v: len(lattices[(model.cardinality(v), trims[v])]) for v in model.nodes},
    }

    def guarantee(simulation: bool) -> Guarantee:
        return posterior_sampling_guarantee(
            per_draw=per_draw,
            lipschitz=lip,
            draws=d,
            neighbours=neighbours,
            mechanism="posterior sampling, trimmed prior (paper 004 §4)",
            details=details,
            simulation=simulation,
        )

    model.posterior_from(stats_)  # checks the counts' shapes and values
    # one sampler per CPT (the rows' posteriors on the node's lattice), set up on the
    # first run and reused by later runs of this plan
    samplers: dict[str, LatticeRowSampler] = {}

    def draw(src: NoiseSource) -> dict[str, np.ndarray]:
        out = {}
        for v in model.nodes:
            c = np.asarray(stats_.counts[v], dtype=float)
            if v not in samplers:
                lattice = lattices[(model.cardinality(v), trims[v])]
                samplers[v] = LatticeRowSampler(model.alpha, c.reshape(-1, c.shape[-1]), lattice)
            out[v] = samplers[v].draw(src).reshape(c.shape)
        return out

    def run(src: NoiseSource) -> Release:
        samples = [draw(src) for _ in range(d)]
        mean = {v: np.mean([s[v] for s in samples], axis=0) for v in model.nodes}
        return Release(
            model=model,
            mechanism="sampling",
            posterior=BayesNetParameters(model, mean),
            guarantee=guarantee(src.simulation),
            released={"draws": [{v: t.tolist() for v, t in s.items()} for s in samples]},
            # n is public under substitute neighbours (the noise-aware posterior uses it)
            public=SamplingRecord(
                trims=trims, neighbours=neighbours, draws=d, n=neighbours.public_n(stats_.n)
            ).to_public(),
        )

    return Plan(guarantee=guarantee(False), run=run)


def _check_alpha(model: BayesNet, trim: float, mechanism: str) -> None:
    """Refuse a prior whose lattice scores alpha k |log trim| exceed :data:`MAX_MAP_SCORE`
    (public: the prior, the trim, the categories), naming alpha."""
    k_max = max(model.cardinality(v) for v in model.nodes)
    alpha_max = MAX_MAP_SCORE / k_max / abs(math.log(trim))
    if not model.alpha <= alpha_max:
        raise ValueError(
            f"the prior alpha = {model.alpha:g} is too large for the {mechanism} mechanism: "
            f"its utilities (up to alpha k |log trim|) would exceed {MAX_MAP_SCORE:g}; "
            f"use alpha <= {alpha_max:.3g}"
        )


def check_lattice_categories(k: int, points: int = MAP_GRID_POINTS) -> int:
    """``k``, or ValueError naming the categories if even the coarsest lattice (the k
    vertices) is too large for :func:`map_grid` (public: the model's categories)."""
    k = check_int(k, "k", minimum=1)
    if k > points or k * k > MAP_GRID_ENTRIES:
        raise ValueError(
            f"{k} categories are too many for the map mechanism: its coarsest grid (the "
            f"{k} vertices) has {k} x {k} entries, more than {MAP_GRID_ENTRIES:,}"
        )
    return k


def map_grid(k: int, lower: float, steps: int, *, points: int = MAP_GRID_POINTS) -> np.ndarray:
    """Lattice on the trimmed simplex: lower + (1 - k lower) m / G, m a composition of G.

    G is the finest resolution <= ``steps`` whose C(G + k - 1, k - 1) points are at most
    ``points`` (:data:`MAP_GRID_POINTS` for MAP) and, times k, at most
    :data:`MAP_GRID_ENTRIES` (found by bisection: the count grows with G). The
    compositions are listed iteratively in lexicographic order. ValueError, naming the
    categories, if even G = 1 (the k vertices) is too large.
    """
    k = check_lattice_categories(k, points)
    steps = check_int(steps, "grid", minimum=1)

    def fits(g: int) -> bool:
        count = math.comb(g + k - 1, g)
        return count <= points and count * k <= MAP_GRID_ENTRIES

    lo, hi = 1, min(steps, points)  # C(g + k - 1, g) >= g + 1 for k >= 2
    while lo < hi:  # the largest g in [lo, hi] that fits
        mid = (lo + hi + 1) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid - 1
    g = lo
    pts = _compositions(g, k)
    return lower + (1 - k * lower) * pts.astype(float) / g


def _compositions(total: int, parts: int) -> np.ndarray:
    """Every composition of ``total`` into ``parts`` non-negative parts, one per row, in
    lexicographic order: filled column by column (no recursion), each prefix's values
    0..r repeated once per completion, C(r - i + m - 1, m - 1) for m parts left."""
    out = np.empty((math.comb(total + parts - 1, parts - 1), parts), dtype=np.int64)
    remaining = np.array([total], dtype=np.int64)  # per prefix (lexicographic), to share
    for j in range(parts - 1):
        left = parts - 1 - j
        reps = remaining + 1
        first = np.arange(int(reps.sum()), dtype=np.int64) - np.repeat(np.cumsum(reps) - reps, reps)
        rest = np.repeat(remaining, reps) - first
        completions = np.array([math.comb(r + left - 1, left - 1) for r in range(total + 1)])
        out[:, j] = np.repeat(first, completions[rest])
        remaining = rest
    out[:, parts - 1] = remaining
    return out


def _map_public(
    model: BayesNet,
    *,
    epsilon: float,
    delta: float,
    neighbours: Neighbours,
    trim: float = 0.01,
    grid: int = 100,
    **_: Any,
) -> tuple[float, int, float, ExponentialMechanism]:
    """The MAP release's checks of public facts (model, privacy parameters, options), run
    by :func:`plan` before the data are read too: (trim, grid steps, rounding allowance,
    the exponential mechanism, whose sensitivity is the Lipschitz constant)."""
    if delta:
        raise ValueError("delta must be 0 for the MAP mechanism (it is pure eps-DP)")
    tp = check_probability(trim, "trim", open_interval=True)
    steps = check_int(grid, "grid", minimum=1)
    trims = {v: tp for v in model.nodes}
    lip = lipschitz_constant(model, trims)
    _check_alpha(model, tp, "map")
    for v in model.nodes:
        try:
            check_lattice_categories(model.cardinality(v))
        except ValueError as exc:
            raise ValueError(f"node {v!r}: {exc}") from None
    eps = check_epsilon(epsilon)
    monotonic = neighbours is Neighbours.ADD_REMOVE
    # the rounding allowance of the changed rows' laws (one per node, two under
    # substitute; PROOF_sampling.md §6), at the temperature of the requested eps (the
    # mechanism's is higher, its allowance smaller), comes off the mechanism's eps
    allowance = Neighbours.parse(neighbours).lipschitz_factor * sampling_allowance(
        model, trims, (1.0 if monotonic else 2.0) * lip / eps
    )
    if not allowance < 0.5 * eps:
        raise ValueError(
            f"epsilon = {eps:g} is too small for the MAP mechanism at trim {tp:g}: the "
            f"scores' rounding allowance {allowance:.3g} is more than half of it; use a "
            "larger epsilon or a smaller trim"
        )
    mech = ExponentialMechanism(
        epsilon=(eps - allowance) * (1.0 - 2.0**-52),
        sensitivity=lip,
        monotonic=monotonic,
        neighbours=neighbours,
        name="exponential mechanism MAP, log-posterior utility (paper 004 alg. 3)",
    )
    return tp, steps, allowance, mech


@register("map", BayesNet, options=("trim", "grid"), record=MapRecord, precheck=_map_public)
def plan_map(
    model: BayesNet,
    stats_: BayesNetStatistics,
    *,
    epsilon: float,
    delta: float,
    neighbours: Neighbours,
    allow_non_private: bool = False,
    trim: float = 0.01,
    grid: int = 100,
) -> Plan:
    """Algorithm 3: the exponential mechanism over a data-independent grid of CPTs with the
    log posterior as utility (uniform base measure on the grid).

    Privacy: on the grid every entry lies in [p, 1 - (k-1)p], so one record moves the log
    posterior (up to a data-only constant, which cancels) by at most L = sum_i L_i (Lemma 2);
    the exponential mechanism with utility sensitivity L is eps-DP (monotonic under
    add/remove). The posterior and the grid factorise over CPT rows, so the joint
    selection is exactly one independent selection per row at the same temperature.
    """
    tp, steps, allowance, mech = _map_public(
        model, epsilon=epsilon, delta=delta, neighbours=neighbours, trim=trim, grid=grid
    )
    grids = {k: map_grid(k, tp, steps) for k in {model.cardinality(v) for v in model.nodes}}
    details: dict[str, Any] = {
        "trim": tp,
        "grid_points": {str(k): len(g) for k, g in grids.items()},
        "rounding_allowance": allowance,
    }
    model.posterior_from(stats_)  # checks the counts' shapes and values
    log_grids = {k: np.log(g) for k, g in grids.items()}
    prior_scores = {k: lg @ np.full(k, model.alpha - 1.0) for k, lg in log_grids.items()}

    def stated(simulation: bool = False) -> Guarantee:
        g = mech.guarantee(simulation=simulation, **details)
        return dataclasses.replace(g, epsilon=mech.epsilon + allowance)

    def run(src: NoiseSource) -> Release:
        cpts = {}
        for v in model.nodes:
            c = np.asarray(stats_.counts[v], dtype=float)
            k = c.shape[-1]
            chosen = []
            for row in c.reshape(-1, k):
                # utilities max(s(g) - max s, -700 scale), s summed in double-double
                scores = row_log_weights(log_grids[k], prior_scores[k], row, FLOOR * mech.scale)
                chosen.append(grids[k][int(mech.release(scores, rng=as_rng(src)).value)])
            cpts[v] = np.asarray(chosen).reshape(c.shape)
        return Release(
            model=model,
            mechanism="map",
            posterior=BayesNetParameters(model, cpts),
            guarantee=stated(src.simulation),
            released={"cpts": {v: t.tolist() for v, t in cpts.items()}},
            public=MapRecord(
                trim=tp,
                grid=steps,
                neighbours=neighbours,
                scale=mech.scale,  # the selection temperature: P(g) propto exp(utility / scale)
                n=neighbours.public_n(stats_.n),  # public under substitute neighbours
            ).to_public(),
        )

    return Plan(guarantee=stated(), run=run)
