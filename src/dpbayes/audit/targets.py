"""What the auditor audits: release mechanisms of the built-in models, and their neighbours.

:func:`model_pairs` lists neighbouring data sets (substitute one record) of public size n
for a built-in model, chosen where the mechanisms are most sensitive: for the coin every
count k against k + 1 (the auditor then keeps the pair with the largest empirical loss);
for the die moves of one record between categories from corner, edge and balanced count
vectors; for the Normal mean one record moved from ``lower`` to ``upper`` with the others
at either end or in the middle. :func:`release_mechanism` wraps
``dpbayes.release.base.plan`` as the ``(data, rng, size) -> outputs`` callable the auditor
runs; for the exponential mechanism it also exposes the exact output distribution
(``output_log_distribution``, in log space, and ``output_distribution``), so that audits
state the exact eps.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from dpbayes.audit.auditor import AuditResult, NeighbourPair, audit
from dpbayes.audit.exact import Distribution, pair_exact_epsilon_log
from dpbayes.audit.names import MODEL_NAMES
from dpbayes.models import BetaBernoulli, DirichletCategorical, NormalMean
from dpbayes.privacy.validation import check_array, check_flag, check_int

__all__ = [
    "MODEL_NAMES",
    "audit_release",
    "builtin_model",
    "exact_expmech_coin_epsilon",
    "expmech_distribution",
    "expmech_log_distribution",
    "model_pairs",
    "registered_mechanisms",
    "release_configurations",
    "release_mechanism",
]

EXHAUSTIVE_COIN_N = 200  # audit_release adds the exact eps over all n pairs of the coin up to here


def builtin_model(name: str, *, categories: int = 3, prior: Any = None) -> Any:
    """The model for ``name``: Beta(1, 1), Dirichlet(1, ..., 1), Normal on [0, 1].

    ``prior`` replaces the default prior: (alpha, beta) for the coin; one concentration
    (every category) or ``categories`` of them for the die. The Normal mean has none.
    """
    if name not in MODEL_NAMES:
        raise ValueError(f"model must be one of {list(MODEL_NAMES)}, got {name!r}")
    p = None if prior is None else check_array(np.atleast_1d(np.asarray(prior)), "prior")
    if p is not None and np.any(p <= 0):
        raise ValueError("prior must contain positive numbers")
    if name == "beta-bernoulli":
        if p is None:
            return BetaBernoulli(alpha=1.0, beta=1.0)
        if p.size != 2:
            raise ValueError(f"prior must be two numbers (alpha, beta), got {p.size}")
        return BetaBernoulli(alpha=float(p[0]), beta=float(p[1]))
    if name == "dirichlet-categorical":
        m = check_int(categories, "categories", minimum=2)
        if p is None:
            return DirichletCategorical(alpha=[1.0] * m)
        if p.size not in (1, m):
            raise ValueError(f"prior must be 1 or categories={m} numbers, got {p.size}")
        return DirichletCategorical(alpha=[float(v) for v in np.resize(p, m)])
    if p is not None:
        raise ValueError("prior is for beta-bernoulli and dirichlet-categorical")
    return NormalMean(lower=0.0, upper=1.0, prior_mean=0.5, prior_sd=1.0, noise_sd=1.0)


def registered_mechanisms(model: Any) -> list[str]:
    """The release mechanisms registered for ``model`` (the registry loads every family)."""
    from dpbayes.release.base import mechanisms_for

    return mechanisms_for(model)


def _evenly(items: list[Any], limit: int | None) -> list[Any]:
    if limit is not None:
        limit = check_int(limit, "max_pairs", minimum=1)
    if limit is None or len(items) <= limit:
        return items
    idx = np.unique(np.round(np.linspace(0, len(items) - 1, limit)).astype(int))
    return [items[i] for i in idx]


def model_pairs(model: Any, n: int, *, max_pairs: int | None = 24) -> list[NeighbourPair]:
    """Neighbouring data sets (substitute one record) of size ``n`` for a built-in model."""
    n = check_int(n, "n", minimum=1)
    if max_pairs is not None:
        max_pairs = check_int(max_pairs, "max_pairs", minimum=1)
    if isinstance(model, BetaBernoulli):
        ks = list(range(n))
        if max_pairs is not None and n > max_pairs:
            # keep both ends (where the posteriors move most) and spread the rest
            ends = {0, 1, n - 2, n - 1} if max_pairs >= 4 else set()
            ks = sorted(set(_evenly(ks, max(1, max_pairs - len(ends)))) | ends)
        return [
            NeighbourPair(
                np.array([1] * k + [0] * (n - k)),
                np.array([1] * (k + 1) + [0] * (n - k - 1)),
                f"k={k} vs k={k + 1} (n={n})",
            )
            for k in ks
        ]
    if isinstance(model, DirichletCategorical):
        m = model.m
        labels = list(model.categories)
        bases: list[tuple[int, ...]] = []
        for i in range(m):  # corners: every record in category i
            bases.append(tuple(n if j == i else 0 for j in range(m)))
        even = [n // m + (1 if j < n % m else 0) for j in range(m)]
        bases.append(tuple(even))
        pairs: list[NeighbourPair] = []
        for base in bases:
            for i, j in itertools.permutations(range(m), 2):
                if base[i] == 0:
                    continue
                moved = list(base)
                moved[i] -= 1
                moved[j] += 1
                x = np.repeat(np.array(labels, dtype=object), base)
                y = np.repeat(np.array(labels, dtype=object), moved)
                pairs.append(NeighbourPair(x, y, f"counts {list(base)} vs {moved}"))
        return _evenly(pairs, max_pairs)
    if isinstance(model, NormalMean):
        lo, hi = model.lower, model.upper
        out = []
        for level, name in ((lo, "lower"), (0.5 * (lo + hi), "middle"), (hi, "upper")):
            x = np.full(n, level, dtype=float)
            y = x.copy()
            x[-1], y[-1] = lo, hi
            out.append(NeighbourPair(x, y, f"{n - 1} records at {name}, one at {lo:g} vs {hi:g}"))
        return out
    raise TypeError(f"model must be a built-in dpbayes model, got {type(model).__name__}")


def release_mechanism(
    model: Any,
    mechanism: str,
    *,
    epsilon: float,
    delta: float = 0.0,
    allow_non_private: bool = False,
    **options: Any,
) -> Callable[..., list[Any]]:
    """``(data, rng, size) -> [Release, ...]``: ``size`` runs of a registered release.

    Plans once per data set with :func:`dpbayes.release.base.plan` (the steps of
    ``release`` before the noise) and then only repeats the noise step ``plan.run`` with
    the seeded source, so that an audit of 10^5 releases takes seconds; nothing is
    charged. The plan's guarantee is the claim. For ``expmech`` with global or local
    sensitivity, ``output_log_distribution(data)`` gives the exact selection
    log-probabilities (which the auditor uses) and ``output_distribution(data)`` their
    exponentials (which may underflow).
    """
    from dpbayes.privacy.noise import noise_source
    from dpbayes.release.base import plan

    allow_non_private = check_flag(allow_non_private, "allow_non_private")

    def plan_for(data: Any) -> Any:
        return plan(
            model,
            data,
            mechanism=mechanism,
            epsilon=epsilon,
            delta=delta,
            allow_non_private=allow_non_private,
            **options,
        )

    def run(data: Any, rng: Any, size: int) -> list[Any]:
        planned = plan_for(data)
        src = noise_source(rng)
        return [planned.run(src) for _ in range(size)]

    run.__name__ = f"{mechanism} ({type(model).__name__})"
    run.plan_for = plan_for  # type: ignore[attr-defined]
    if mechanism == "expmech":
        divergence = options.get("divergence", "hellinger")
        run.output_log_distribution = lambda data: expmech_log_distribution(  # type: ignore[attr-defined]
            model, plan_for(data), data, epsilon, divergence
        )
        run.output_distribution = lambda data: expmech_distribution(  # type: ignore[attr-defined]
            model, plan_for(data), data, epsilon, divergence
        )
    return run


def expmech_distribution(
    model: Any, planned: Any, data: Any, epsilon: float, divergence: str = "hellinger"
) -> Distribution:
    """The exact output distribution of a planned expmech release (probabilities).

    See :func:`expmech_log_distribution`, of which this is the exponential.
    """
    outputs, logp = expmech_log_distribution(model, planned, data, epsilon, divergence)
    return outputs, np.exp(logp)


def expmech_log_distribution(
    model: Any, planned: Any, data: Any, epsilon: float, divergence: str = "hellinger"
) -> tuple[np.ndarray, np.ndarray]:
    """(outputs, log-probabilities) of a planned expmech release, exact in log space.

    Global or local: recomputed here, candidate r with probability exp(e u(x, r) / (2 S))
    / sum, u the scores of :mod:`dpbayes.release.expmech.candidates`, S the sensitivity the plan
    states and e its ``exponent_epsilon``. Smooth (whose S_beta(x) the guarantee does not
    state): the plan's own ``log_distribution``. Outputs are the released count vectors,
    as the auditor sees them.
    """
    from scipy.special import logsumexp

    from dpbayes.release.expmech.candidates import coin_scores, compositions, dirichlet_scores

    kind = planned.guarantee.details.get("sensitivity_kind")
    if kind == "smooth" and planned.log_distribution is not None:
        outputs, logp = planned.log_distribution()
        return np.asarray(outputs), np.asarray(logp, dtype=float)
    if kind not in ("global", "local"):
        raise ValueError("the exact distribution is known for sensitivity 'global' or 'local'")
    if planned.guarantee.details.get("lattice") is not None:
        raise ValueError("the exact distribution needs the full candidate set (no lattice)")
    stats = model.statistics(data)
    n = int(stats.n)
    counts = np.asarray(stats.counts, dtype=np.int64)
    if isinstance(model, BetaBernoulli) or counts.size == 2:
        a, b = (
            (float(model.alpha), float(model.beta))
            if isinstance(model, BetaBernoulli)
            else tuple(float(v) for v in model.alpha)
        )
        scores = coin_scores(a, b, n, int(counts[0]), divergence)
        j = np.arange(n + 1, dtype=np.int64)
        outputs = np.column_stack([j, n - j])
    else:
        outputs = compositions(n, counts.size)
        scores = dirichlet_scores(np.asarray(model.alpha, dtype=float), counts, outputs)
    e = float(planned.guarantee.details.get("exponent_epsilon", epsilon))
    logits = scores * (e / (2.0 * float(planned.guarantee.sensitivity)))
    return outputs, logits - logsumexp(logits)


def release_configurations(model: Any, n: int, epsilon: float = 1.0) -> list[dict[str, Any]]:
    """One audit configuration per registered mechanism and variant of ``model``.

    Each is a dict of keyword arguments for :func:`audit_release` (``mechanism``,
    ``delta``, options, ``allow_non_private``). The expmech gets its three sensitivities;
    a mechanism this function does not know is tried with delta = 0, then delta = 1e-3,
    and kept with the first that plans.
    """
    known: dict[str, list[dict[str, Any]]] = {
        "expmech": [
            {"sensitivity": "global", "delta": 0.0},
            {"sensitivity": "smooth", "delta": 1e-3},
            {"sensitivity": "local", "delta": 0.0, "allow_non_private": True},
        ],
        "gaussian": [{"delta": 1e-3}],
    }
    x = model_pairs(model, n, max_pairs=1)[0].x
    out: list[dict[str, Any]] = []
    for mech in registered_mechanisms(model):
        tries = known.get(mech, [{"delta": 0.0}, {"delta": 1e-3}])
        for cfg in tries:
            opts = {k: v for k, v in cfg.items() if k not in ("delta", "allow_non_private")}
            try:
                release_mechanism(
                    model,
                    mech,
                    epsilon=epsilon,
                    delta=cfg["delta"],
                    allow_non_private=cfg.get("allow_non_private", False),
                    **opts,
                ).plan_for(x)  # type: ignore[attr-defined]
            except ValueError:
                continue
            out.append({"mechanism": mech, **cfg})
            if mech not in known:
                break
    return out


def exact_expmech_coin_epsilon(
    model: BetaBernoulli, n: int, *, epsilon: float, **options: Any
) -> tuple[float, str]:
    """The true eps of the coin's expmech release over *every* pair k vs k + 1.

    From :func:`expmech_log_distribution` (the candidate scores and the sensitivity the
    plan states for each count k; global or local, not smooth, whose S_beta(x) is not
    exposed), in log space. Returns (eps, worst pair).
    """
    n = check_int(n, "n", minimum=1)
    kind = options.get("sensitivity", "global")
    if kind not in ("global", "local"):
        raise ValueError("sensitivity must be 'global' or 'local' for the exact computation")
    mech = release_mechanism(model, "expmech", epsilon=epsilon, allow_non_private=True, **options)
    dists = [
        mech.output_log_distribution(np.array([1] * k + [0] * (n - k)))  # type: ignore[attr-defined]
        for k in range(n + 1)
    ]
    best, where = 0.0, ""
    for k in range(n):
        e = pair_exact_epsilon_log(dists[k], dists[k + 1])
        if e > best:
            best, where = e, f"k={k} vs k={k + 1} (n={n})"
    return best, where


def audit_release(
    model: Any,
    mechanism: str,
    n: int,
    *,
    epsilon: float,
    delta: float = 0.0,
    samples: int = 20_000,
    confidence: float = 0.95,
    allow_non_private: bool = False,
    max_pairs: int | None = 24,
    keep_pairs: int | None = None,
    rng: Any = None,
    **options: Any,
) -> AuditResult:
    """Audit a registered release mechanism of a built-in model on searched neighbours.

    ``max_pairs`` neighbouring pairs from :func:`model_pairs`, of which ``keep_pairs`` are
    audited (see :func:`dpbayes.audit.audit`). For the coin's expmech up to n = 200 the
    details add the exact eps over every pair k vs k + 1 (``exact_epsilon_all_pairs``).
    """
    from dataclasses import replace

    mech = release_mechanism(
        model,
        mechanism,
        epsilon=epsilon,
        delta=delta,
        allow_non_private=allow_non_private,
        **options,
    )
    pairs = model_pairs(model, n, max_pairs=max_pairs)
    g = mech.plan_for(pairs[0].x).guarantee  # type: ignore[attr-defined]
    result = audit(
        mech,
        pairs,
        epsilon=g.epsilon,
        delta=g.delta,
        samples=samples,
        batch=True,
        confidence=confidence,
        keep_pairs=keep_pairs,
        rng=rng,
        name=f"{mechanism} {model.name}",
    )
    details: dict[str, Any] = {
        "model": model.to_dict(),
        "n": n,
        "options": dict(options),
        "guarantee": g.describe(),
        "private": g.private,
    }
    if (
        isinstance(model, BetaBernoulli)
        and mechanism == "expmech"
        and options.get("sensitivity", "global") in ("global", "local")
        and n <= EXHAUSTIVE_COIN_N
    ):
        exact, where = exact_expmech_coin_epsilon(model, n, epsilon=epsilon, **options)
        details["exact_epsilon_all_pairs"] = exact if math.isfinite(exact) else None
        details["exact_worst_pair_all_pairs"] = where
    return replace(result, details=details)
