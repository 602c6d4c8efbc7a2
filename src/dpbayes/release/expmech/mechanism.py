"""Exponential mechanism over candidate posteriors (paper 002 §6.3; paper 003 §2).

``release(model, data, mechanism="expmech", epsilon=..., sensitivity=..., divergence=...)``
chooses one posterior among the posteriors of every data set of the public size n,
candidate r with probability proportional to exp(e u(x, r) / (2 S)), u(x, r) =
-D(posterior(x), r), D the Hellinger distance (default) or total variation (coin only);
e = eps for the global and local sensitivities, eps/2 for the smooth one
(:func:`exponent_epsilon`). Proofs: ``PROOF.md`` beside this file.

Sensitivities (``sensitivity=``):

* ``"global"`` (eps-DP): S = max over neighbours x, x' and candidates r of
  |D(post(x), r) - D(post(x'), r)|, computed exactly for the prior and n. By the triangle
  inequality (paper 003 §3.1) the max over r is attained at r = post(x'), so S is the
  largest distance between neighbouring posteriors: an O(n) maximum for the coin, an O(m^2)
  one for the die (m >= 3). Privacy: utilities move by at most S between neighbours, so
  every weight and the normaliser move by at most e^{eps/2}.
* ``"smooth"`` ((eps, delta)-DP, delta > 0): exponent eps/2, i.e. probability
  proportional to exp(eps u(x, r) / (4 S)), S = S_beta(x) = max_y LS(y) e^{-beta d(x,y)}
  with beta from :func:`~dpbayes.privacy.sensitivity.expmech_smooth_beta` (|R| the number
  of candidates). Privacy: PROOF.md, Theorem 2 (the other eps/2 bounds both the
  change of the data-dependent scale in each weight, outside an event of probability
  < delta, and in the normaliser; paper 003's argument bounds only the weights).
  S_beta(x) depends on the data and is never released.
* ``"local"`` (NOT private): S = LS(x); for experiments only, with ``allow_non_private``.

Selection is Gumbel noisy-max through :mod:`dpbayes.privacy.noise` (OpenDP on the secure
path). Above ``BLOCK`` candidates it may run in two stages: a block b with probability
proportional to sum_{i in b} exp(u_i / T) (its log rounded to a double), then a candidate
within b, so OpenDP sees only ~2 sqrt(|R|) scores; only where that rounding provably
costs at most ``TWO_STAGE_SLACK`` of the exponent (PROOF.md, "Two stages"), else one stage.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dpbayes.models import BetaBernoulli, DirichletCategorical
from dpbayes.models.statistics import CountStatistics
from dpbayes.privacy import Guarantee, Neighbours
from dpbayes.privacy.noise import NoiseSource
from dpbayes.privacy.sensitivity import expmech_smooth_beta
from dpbayes.privacy.validation import check_int, check_positive
from dpbayes.release.base import Plan, Release, register
from dpbayes.release.counts.mechanism import counts_release
from dpbayes.release.expmech.candidates import (
    DIVERGENCES,
    coin_global_sensitivity,
    coin_local_at,
    coin_scores,
    coin_smooth_sensitivity,
    compositions,
    dirichlet_global_sensitivity,
    dirichlet_local_sensitivity,
    dirichlet_scores,
    dirichlet_smooth_sensitivity,
    lattice_counts,
    n_compositions,
)
from dpbayes.release.expmech.record import ExpmechCoinRecord, ExpmechDirichletRecord

__all__ = [
    "BLOCK",
    "LEMMA_HELLINGER_BOUND",
    "LEMMA_TV_BOUND",
    "MAX_CANDIDATES",
    "SCORE_ROUNDING",
    "SENSITIVITIES",
    "TWO_STAGE_SLACK",
    "exponent_epsilon",
    "plan_expmech_coin",
    "plan_expmech_dirichlet",
    "select_candidate",
    "two_stage_error",
]

SENSITIVITIES = ("global", "smooth", "local")
#: Every computed sensitivity is multiplied by this. The scores are computed distances, and
#: between neighbouring data sets they moved by up to 9e-15 (Hellinger, priors 7 against
#: 1e3-1e12) and 1e-12 (total variation) relative beyond the computed G, whose real value
#: bounds the real change; 2^-36 (1.5e-11) covers both with room.
SCORE_ROUNDING = 1.0 + 2.0**-36
BLOCK = 4096
#: The share of the exponent left to the two-stage draw's rounding (``select_candidate``):
#: SCORE_ROUNDING leaves at least 2^-37 of it between the exact law's loss and eps.
TWO_STAGE_SLACK = 2.0**-38
MAX_CANDIDATES = 2_000_000
# Paper 002 Lemmas 6.1 / 6.3 (Hellinger) and 6.2 (total variation), reconstructed: the seed
# lost the formulas. For prior parameters >= 1 one changed record moves the posterior by at
# most the distance between Beta(2, 1) and Beta(1, 2): H = sqrt(1 - pi/4), TV = 1/2.
#: The largest prior parameter the mechanism takes: above it the distances between
#: neighbouring posteriors (of order 1 / sqrt(prior)) round towards 0 in double precision,
#: and a sensitivity of 0 (-0.0 at 1e16) is no calibration at all; the smooth one reached
#: 0 for some data sets and not their neighbours, refusing inside the release.
MAX_PRIOR = 1e12
#: The range of prior parameters for total variation (the coin). Below 1e-250 the densities
#: of a posterior and its neighbour can cross within e^-700 of 0 or 1, beyond the normal
#: doubles (at 1e-300 beside counts or a prior of 1e9 the computed TV of a distance-1 pair
#: came out e^-1, under-stating the sensitivity 2.7-fold). Above 1e6 the triangle
#: inequality's slack between a candidate's distances to two neighbours (of order G^3,
#: G ~ prior^-1/2) approaches the rounding error of the incomplete beta: at 1e8 the
#: computed scores' change exceeded the computed G by 1e-8 of it. Proof, "Floating point".
TV_PRIOR_RANGE = (1e-250, 1e6)
LEMMA_HELLINGER_BOUND = math.sqrt(1.0 - math.pi / 4.0)
LEMMA_TV_BOUND = 0.5


def exponent_epsilon(kind: str, epsilon: float) -> float:
    """The e of the selection exp(e u / (2 S)): eps/2 for smooth sensitivity, else eps.

    The smooth-sensitivity mechanism spends half of eps on the data-dependent scale
    (PROOF.md, Theorem 2); global and local use all of it.
    """
    return epsilon / 2.0 if kind == "smooth" else epsilon


def _logsumexp_rows(x: np.ndarray) -> np.ndarray:
    """log sum exp along rows of a 2-d array of finite numbers and -inf (scipy's version is
    slow on small input). A row of -inf only (every weight 0) gives -inf exactly, not the
    NaN of -inf - (-inf)."""
    top = np.max(x, axis=1)
    dead = top == -np.inf
    shift = np.where(dead, 0.0, top)
    with np.errstate(divide="ignore"):  # log(0) = -inf for a dead row
        return np.asarray(shift + np.log(np.sum(np.exp(x - shift[:, None]), axis=1)))


def _log_probabilities(scores: np.ndarray, scale: float) -> np.ndarray:
    """log of exp(scores / scale) / sum exp(scores / scale): the selection's exact law."""
    with np.errstate(over="ignore"):  # -inf: weight 0 (the top score's z stays finite)
        z = np.asarray(scores, dtype=float) / scale
    top = float(np.max(z))
    return np.asarray(z - (top + math.log(float(np.sum(np.exp(z - top))))))


def two_stage_error(scores: np.ndarray, scale: float) -> float:
    """4 delta, delta = 2^-46 (1 + max (top - s) / scale): what the two-stage draw's rounded
    block weights can add to the privacy loss of the exact law (PROOF.md, "Two stages").
    inf when (top - s) / scale overflows."""
    s = np.asarray(scores, dtype=float)
    with np.errstate(over="ignore"):
        zmax = (float(np.max(s)) - float(np.min(s))) / scale
    return 2.0**-44 * (1.0 + zmax * (1.0 + 2.0**-50))


def select_candidate(
    src: NoiseSource,
    scores: np.ndarray,
    scale: float,
    block: int = BLOCK,
    slack: float = 0.0,
) -> int:
    """Index i with probability exp(scores[i] / scale) / sum_j exp(scores[j] / scale).

    Gumbel noisy-max (the exponential mechanism's exact distribution). Above ``block``
    scores it may run in two stages (module docstring), whose first stage takes the
    blocks' log weights rounded to doubles: each output's log probability is then within
    2 delta of the exact law's, i.e. the privacy loss between neighbours within
    :func:`two_stage_error` = 4 delta of the exact law's. Two stages run only when that
    is at most ``slack``, the loss the caller's guarantee has room for beyond the exact
    law (``TWO_STAGE_SLACK`` of the exponent for expmech's plans); otherwise one stage
    over every score (exact; ~1.5 us a score through OpenDP). With ``slack`` 0, always
    one stage. (At eps 6.4e-16 the rounded weights gave 1.42 eps: the coin, n = 8000,
    k = 4095 against 4096, ``tests/release/test_expmech_two_stage_exact.py``.)

    The block weights are taken relative to the top score (a common factor: the law is
    unchanged), so the top score's block has log weight >= 0. A block whose every
    (score - top) / scale is -inf has weight exactly 0 against it and is left out of the
    first stage (two_stage_error is then inf, so this arises only with an infinite slack).
    """
    s = np.asarray(scores, dtype=float)
    scale = check_positive(scale, "scale")
    block = check_int(block, "block", minimum=2)
    if s.size <= block or not two_stage_error(s, scale) <= slack:
        return src.gumbel_argmax(s, scale)
    nb = -(-s.size // block)
    block_scores = np.empty(nb)
    top = float(np.max(s))
    group = max(1, (1 << 18) // block)  # blocks per pass: bounded temporary memory
    for g in range(0, nb, group):
        with np.errstate(over="ignore"):  # overflow to -inf: weight 0, handled exactly
            part = (s[g * block : min((g + group) * block, s.size)] - top) / scale
        full = part.size // block
        if full:
            block_scores[g : g + full] = _logsumexp_rows(part[: full * block].reshape(full, block))
        if part.size > full * block:  # the last, shorter block
            block_scores[g + full] = _logsumexp_rows(part[full * block :][None, :])[0]
    live = np.flatnonzero(block_scores != -np.inf)  # weight-0 blocks are never chosen
    b = int(live[src.gumbel_argmax(block_scores[live], 1.0)])  # log weights: temperature 1
    lo, hi = b * block, min((b + 1) * block, s.size)
    return lo + src.gumbel_argmax(s[lo:hi], scale)


_COIN_OPTIONS = ("sensitivity", "divergence")
_DIRICHLET_OPTIONS = (*_COIN_OPTIONS, "max_candidates", "lattice")


def _options(options: dict[str, Any]) -> dict[str, Any]:
    """The options with their defaults, values checked (names by the registry)."""
    kind = options.get("sensitivity", "global")
    if kind not in SENSITIVITIES:
        raise ValueError(f"sensitivity must be one of {list(SENSITIVITIES)}, got {kind!r}")
    div = options.get("divergence", "hellinger")
    if div not in DIVERGENCES:
        raise ValueError(f"divergence must be one of {list(DIVERGENCES)}, got {div!r}")
    return {**options, "sensitivity": kind, "divergence": div}


SMOOTH_NEEDS_ALL = (
    "sensitivity='smooth' needs the full candidate set (its (eps, delta) argument uses a "
    "candidate at distance 0); raise max_candidates or use 'global'"
)


def _expmech_public(
    model: Any,
    *,
    epsilon: float,
    delta: float,
    neighbours: Neighbours,
    allow_non_private: bool = False,
    **options: Any,
) -> dict[str, Any]:
    """The expmech releases' checks of public facts (model, privacy parameters, options),
    run by :func:`plan` before the data are read too: the options with their defaults."""
    opts = _options(options)
    kind, div = opts["sensitivity"], opts["divergence"]
    # in the order the planners checked them (the first refusal's message is kept)
    if isinstance(model, BetaBernoulli):
        prior = np.array([model.alpha, model.beta], dtype=float)
    else:
        prior = np.asarray(model.alpha, dtype=float)
        if model.m == 2 and opts.get("lattice") is not None:
            raise ValueError("lattice is for m >= 3 categories; the coin uses all n + 1")
        if model.m > 2 and div != "hellinger":
            raise ValueError(
                "divergence must be 'hellinger' for m >= 3 categories (total variation "
                "between Dirichlets has no closed form)"
            )
    if float(np.max(prior)) > MAX_PRIOR:
        raise ValueError(
            f"the prior parameters must be at most {MAX_PRIOR:g} for expmech (got "
            f"{float(np.max(prior)):g}): beyond it the posteriors' distances round to 0"
        )
    if neighbours is not Neighbours.SUBSTITUTE:
        raise ValueError(
            "neighbours must be 'substitute' for expmech: the candidate set is built from "
            "the public data size n (add/remove neighbours and user-level data keep n "
            "private; use laplace, geometric or gaussian there)"
        )
    if kind == "global" and delta != 0:
        raise ValueError("delta must be 0 for sensitivity='global' (it is pure eps-DP)")
    if kind == "smooth" and not delta > 0:
        raise ValueError("delta must be > 0 for sensitivity='smooth'")
    if kind == "local" and not allow_non_private:
        raise ValueError(
            "sensitivity='local' is not differentially private; pass allow_non_private=True "
            "to run it as an experiment"
        )
    lo, hi = TV_PRIOR_RANGE
    if prior.size == 2 and div == "tv" and not (lo <= prior.min() and prior.max() <= hi):
        a, b = prior
        raise ValueError(
            f"the prior parameters must be in [{lo:g}, {hi:g}] for expmech with total "
            f"variation (got alpha={a:g}, beta={b:g}): outside it the distances are not "
            "computed accurately enough to bound the sensitivity; use divergence='hellinger'"
        )
    if prior.size > 2:
        limit = check_int(opts.get("max_candidates", MAX_CANDIDATES), "max_candidates", minimum=1)
        if opts.get("lattice") is not None:
            lattice = check_int(opts["lattice"], "lattice", minimum=1)
            if n_compositions(lattice, prior.size) > limit:
                raise ValueError(
                    f"lattice must give at most max_candidates={limit} candidates, got "
                    f"{n_compositions(lattice, prior.size)} for lattice={lattice}"
                )
            if kind == "smooth":  # an explicit lattice is always used
                raise ValueError(SMOOTH_NEEDS_ALL)
    return opts


def _check_n(n: int) -> None:
    if n < 1:
        raise ValueError("data must contain at least one record for the expmech release")


def _guarantee(
    kind: str,
    divergence: str,
    epsilon: float,
    delta: float,
    value: float,
    glob: float,
    **extra: Any,
) -> Guarantee:
    details: dict[str, Any] = {
        "sensitivity_kind": kind,
        "divergence": divergence,
        "exponent_epsilon": exponent_epsilon(kind, epsilon),
        **extra,
    }
    if kind == "smooth":
        details["note"] = (
            "exponent eps/2, calibrated to the data-dependent smooth sensitivity S_beta(x) "
            "<= the global sensitivity recorded here; S_beta(x) itself is not released"
        )
    return Guarantee(
        epsilon=epsilon,
        delta=delta if kind == "smooth" else 0.0,
        neighbours=Neighbours.SUBSTITUTE,
        mechanism=f"expmech ({divergence}, {kind} sensitivity)",
        sensitivity=value if kind != "smooth" else glob,
        sensitivity_norm="utility",
        private=kind != "local",
        details=details,
    )


def _lemma_bound(prior: np.ndarray, divergence: str) -> float | None:
    if np.all(prior >= 1.0):
        return LEMMA_HELLINGER_BOUND if divergence == "hellinger" else LEMMA_TV_BOUND
    return None


@register(
    "expmech",
    BetaBernoulli,
    options=_COIN_OPTIONS,
    record=ExpmechCoinRecord,
    precheck=_expmech_public,
)
def plan_expmech_coin(
    model: BetaBernoulli,
    stats: CountStatistics,
    *,
    epsilon: float,
    delta: float,
    neighbours: Neighbours,
    allow_non_private: bool = False,
    **options: Any,
) -> Plan:
    """Exponential mechanism over the n + 1 Beta posteriors Beta(a + j, b + n - j).

    Paper 003 §2 (Beta-Bernoulli); options ``sensitivity`` and ``divergence``.
    """
    opts = _expmech_public(
        model,
        epsilon=epsilon,
        delta=delta,
        neighbours=neighbours,
        allow_non_private=allow_non_private,
        **options,
    )
    return _plan_coin(model, float(model.alpha), float(model.beta), stats, epsilon, delta, opts)


def _plan_coin(
    model: Any,
    a: float,
    b: float,
    stats: CountStatistics,
    epsilon: float,
    delta: float,
    opts: dict[str, Any],
) -> Plan:
    """The coin's plan; ``opts`` from :func:`_expmech_public`, which checked the rest."""
    kind, div = opts["sensitivity"], opts["divergence"]
    n = int(stats.n)
    _check_n(n)
    k = int(stats.counts[0])
    glob = coin_global_sensitivity(a, b, n, div) * SCORE_ROUNDING
    extra: dict[str, Any] = {"n_candidates": n + 1}
    beta = None
    if kind == "global":
        value = glob
    elif kind == "local":
        value = coin_local_at(a, b, n, k, div) * SCORE_ROUNDING
    else:
        beta = expmech_smooth_beta(epsilon, delta, n + 1)
        value = coin_smooth_sensitivity(a, b, n, k, beta, div) * SCORE_ROUNDING
        extra["smooth_beta"] = beta
    guarantee = _guarantee(kind, div, epsilon, delta, value, glob, **extra)
    record = ExpmechCoinRecord(
        n=n,
        sensitivity_kind=kind,
        sensitivity=None if kind == "smooth" else value,
        global_sensitivity=glob,
        lemma_bound=_lemma_bound(np.array([a, b]), div),
        divergence=div,
        exponent_epsilon=exponent_epsilon(kind, epsilon),
        n_candidates=n + 1,
        smooth_beta=beta,
    )
    scale = 2.0 * value / exponent_epsilon(kind, epsilon)
    slack = TWO_STAGE_SLACK * exponent_epsilon(kind, epsilon)
    cache: dict[str, np.ndarray] = {}

    def scores() -> np.ndarray:
        if "scores" not in cache:  # deterministic; kept for repeated runs of one plan
            cache["scores"] = coin_scores(a, b, n, k, div)
        return cache["scores"]

    def run(src: NoiseSource) -> Release:
        j = select_candidate(src, scores(), scale, slack=slack)
        counts = np.array([j, n - j], dtype=np.int64)
        return counts_release(
            model,
            "expmech",
            counts,
            n,
            guarantee.with_simulation(src.simulation),
            record.to_public(),
        )

    def log_distribution() -> tuple[np.ndarray, np.ndarray]:
        j = np.arange(n + 1, dtype=np.int64)
        return np.column_stack([j, n - j]), _log_probabilities(scores(), scale)

    return Plan(guarantee=guarantee, run=run, log_distribution=log_distribution)


def _dirichlet_candidates(n: int, m: int, opts: dict[str, Any]) -> tuple[np.ndarray, int | None]:
    limit = check_int(opts.get("max_candidates", MAX_CANDIDATES), "max_candidates", minimum=1)
    lattice = opts.get("lattice")
    if lattice is None and n_compositions(n, m) <= limit:
        return compositions(n, m), None
    if lattice is None:
        lattice = 1
        while lattice < n and n_compositions(lattice + 1, m) <= limit:
            lattice += 1
    else:
        lattice = check_int(lattice, "lattice", minimum=1)
        if n_compositions(lattice, m) > limit:
            raise ValueError(
                f"lattice must give at most max_candidates={limit} candidates, got "
                f"{n_compositions(lattice, m)} for lattice={lattice}"
            )
    return lattice_counts(n, m, min(lattice, n)), min(lattice, n)


@register(
    "expmech",
    DirichletCategorical,
    options=_DIRICHLET_OPTIONS,
    record=ExpmechDirichletRecord,
    precheck=_expmech_public,
)
def plan_expmech_dirichlet(
    model: DirichletCategorical,
    stats: CountStatistics,
    *,
    epsilon: float,
    delta: float,
    neighbours: Neighbours,
    allow_non_private: bool = False,
    **options: Any,
) -> Plan:
    """Exponential mechanism over Dirichlet posteriors Dir(alpha + c), paper 003 §1-2.

    Candidates: every count vector c of the public n (C(n+m-1, m-1) of them) while that is
    at most ``max_candidates``; beyond, or with ``lattice=L``, the data-independent lattice
    round(n c'/L), c' a count vector of L (still exactly DP: the global sensitivity over
    all count vectors bounds the one over the lattice, by the triangle inequality).
    m = 2 is the coin. Options: ``sensitivity``, ``divergence``, ``max_candidates``, ``lattice``.
    """
    opts = _expmech_public(
        model,
        epsilon=epsilon,
        delta=delta,
        neighbours=neighbours,
        allow_non_private=allow_non_private,
        **options,
    )
    alpha = np.asarray(model.alpha, dtype=float)
    if model.m == 2:
        return _plan_coin(model, float(alpha[0]), float(alpha[1]), stats, epsilon, delta, opts)
    kind, div = opts["sensitivity"], opts["divergence"]
    n = int(stats.n)
    _check_n(n)
    counts = np.asarray(stats.counts, dtype=np.int64)
    cands, lattice = _dirichlet_candidates(n, model.m, opts)
    if kind == "smooth" and lattice is not None:
        raise ValueError(SMOOTH_NEEDS_ALL)
    glob, _ = dirichlet_global_sensitivity(alpha, n)
    glob *= SCORE_ROUNDING
    extra: dict[str, Any] = {"n_candidates": int(cands.shape[0]), "lattice": lattice}
    beta = None
    if kind == "global":
        value = glob
    elif kind == "local":
        value = dirichlet_local_sensitivity(alpha, counts) * SCORE_ROUNDING
    else:
        beta = expmech_smooth_beta(epsilon, delta, int(cands.shape[0]))
        value = dirichlet_smooth_sensitivity(alpha, counts, beta) * SCORE_ROUNDING
        extra["smooth_beta"] = beta
    guarantee = _guarantee(kind, div, epsilon, delta, value, glob, **extra)
    record = ExpmechDirichletRecord(
        n=n,
        sensitivity_kind=kind,
        sensitivity=None if kind == "smooth" else value,
        global_sensitivity=glob,
        lemma_bound=_lemma_bound(alpha, div),
        divergence=div,
        exponent_epsilon=exponent_epsilon(kind, epsilon),
        n_candidates=int(cands.shape[0]),
        lattice=lattice,
        smooth_beta=beta,
    )
    scale = 2.0 * value / exponent_epsilon(kind, epsilon)
    slack = TWO_STAGE_SLACK * exponent_epsilon(kind, epsilon)
    cache: dict[str, np.ndarray] = {}

    def scores() -> np.ndarray:
        if "scores" not in cache:
            cache["scores"] = dirichlet_scores(alpha, counts, cands)
        return cache["scores"]

    def run(src: NoiseSource) -> Release:
        chosen = cands[select_candidate(src, scores(), scale, slack=slack)]
        return counts_release(
            model,
            "expmech",
            chosen,
            n,
            guarantee.with_simulation(src.simulation),
            record.to_public(),
        )

    def log_distribution() -> tuple[np.ndarray, np.ndarray]:
        return cands, _log_probabilities(scores(), scale)

    return Plan(guarantee=guarantee, run=run, log_distribution=log_distribution)
