"""What the auditor audits: release mechanisms of the built-in models, and their neighbours.

:func:`model_pairs` lists neighbouring data sets (substitute one record) of public size n
for a built-in model, chosen where the mechanisms are most sensitive: for the coin every
count k against k + 1 (the auditor then keeps the pair with the largest empirical loss);
for the die moves of one record between categories from corner, edge and balanced count
vectors; for the Normal mean one record moved from ``lower`` to ``upper`` with the others
at either end or in the middle. :func:`release_mechanism` wraps
``dpbayes.release.release`` as the ``(data, rng) -> output`` callable the auditor runs.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import Any

import numpy as np
from scipy import special

from dpbayes.audit.auditor import AuditResult, NeighbourPair, audit
from dpbayes.audit.bounds import exact_epsilon
from dpbayes.models import BetaBernoulli, DirichletCategorical, NormalMean
from dpbayes.privacy.validation import check_int

__all__ = [
    "MODEL_NAMES",
    "audit_release",
    "builtin_model",
    "exact_expmech_coin_epsilon",
    "model_pairs",
    "registered_mechanisms",
    "release_configurations",
    "release_mechanism",
]

MODEL_NAMES = ("beta-bernoulli", "dirichlet-categorical", "normal-mean")


def _load_release_modules() -> None:
    """Import the release modules so that every mechanism is registered."""
    import importlib

    for mod in ("parameters", "expmech", "sampling", "input", "fourier", "bayes_net"):
        try:
            importlib.import_module(f"dpbayes.release.{mod}")
        except ImportError:
            continue


def builtin_model(name: str, *, categories: int = 3) -> Any:
    """The default model for ``name``: Beta(1, 1), Dirichlet(1, ..., 1), Normal on [0, 1]."""
    if name == "beta-bernoulli":
        return BetaBernoulli(alpha=1.0, beta=1.0)
    if name == "dirichlet-categorical":
        m = check_int(categories, "categories", minimum=2)
        return DirichletCategorical(alpha=[1.0] * m)
    if name == "normal-mean":
        return NormalMean(lower=0.0, upper=1.0, prior_mean=0.5, prior_sd=1.0, noise_sd=1.0)
    raise ValueError(f"model must be one of {list(MODEL_NAMES)}, got {name!r}")


def registered_mechanisms(model: Any) -> list[str]:
    """The release mechanisms registered for ``model`` (after importing every module)."""
    from dpbayes.release.base import mechanisms_for

    _load_release_modules()
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

    Does what ``dpbayes.release.release`` does (statistics, plan, run), but plans once per
    data set and then only repeats the noise step ``plan.run`` with the seeded source, so
    that an audit of 10^5 releases takes seconds. The plan's guarantee is the claim.
    """
    from dpbayes.privacy import Neighbours
    from dpbayes.privacy.noise import noise_source
    from dpbayes.release.base import _planner

    _load_release_modules()
    planner = _planner(model, mechanism)

    def plan_for(data: Any) -> Any:
        plan = planner(
            model,
            model.statistics(data),
            epsilon=epsilon,
            delta=delta,
            neighbours=Neighbours.SUBSTITUTE,
            allow_non_private=bool(allow_non_private),
            **options,
        )
        if not plan.guarantee.private and not allow_non_private:
            raise ValueError(
                f"mechanism {mechanism!r} with these options is not differentially private; "
                "pass allow_non_private=True to audit it"
            )
        return plan

    def run(data: Any, rng: Any, size: int) -> list[Any]:
        plan = plan_for(data)
        src = noise_source(rng)
        return [plan.run(src) for _ in range(size)]

    run.__name__ = f"{mechanism} ({type(model).__name__})"
    run.plan_for = plan_for  # type: ignore[attr-defined]
    return run


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
    """The true eps of the coin's expmech release, from its exact selection probabilities.

    Uses the candidate scores of :mod:`dpbayes.release.candidates` and the sensitivity the
    planner states for each count k (global or local; not smooth, whose S_beta(x) is not
    exposed). Returns (eps, worst pair).
    """
    from dpbayes.privacy import Neighbours
    from dpbayes.release.base import _planner
    from dpbayes.release.candidates import coin_scores

    _load_release_modules()
    kind = options.get("sensitivity", "global")
    if kind not in ("global", "local"):
        raise ValueError("sensitivity must be 'global' or 'local' for the exact computation")
    div = options.get("divergence", "hellinger")
    planner = _planner(model, "expmech")
    logp = []
    for k in range(n + 1):
        stats = model.statistics(np.array([1] * k + [0] * (n - k)))
        plan = planner(
            model,
            stats,
            epsilon=epsilon,
            delta=0.0,
            neighbours=Neighbours.SUBSTITUTE,
            allow_non_private=True,
            **options,
        )
        scale = 2.0 * plan.guarantee.sensitivity / epsilon
        s = coin_scores(model.alpha, model.beta, n, k, div) / scale
        logp.append(s - special.logsumexp(s))
    best, where = 0.0, ""
    for k in range(n):
        e = exact_epsilon(np.exp(logp[k]), np.exp(logp[k + 1]))
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
    rng: Any = None,
    **options: Any,
) -> AuditResult:
    """Audit a registered release mechanism of a built-in model on searched neighbours."""
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
    ):
        exact, where = exact_expmech_coin_epsilon(model, n, epsilon=epsilon, **options)
        details["exact_epsilon"] = exact if math.isfinite(exact) else None
        details["exact_worst_pair"] = where
    return replace(result, details=details)
