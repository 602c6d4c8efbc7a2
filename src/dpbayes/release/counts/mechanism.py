"""Noise on posterior parameters: the first private release (paper 002 §6.2; paper 004 Alg. 1).

Conjugate posteriors are a public prior plus sufficient statistics, so releasing the
statistics with calibrated noise releases the posterior. Registered mechanisms:

* ``"laplace"`` (eps-DP): continuous Laplace noise, added by OpenDP's discretised sampler;
* ``"geometric"`` (eps-DP): discrete Laplace noise; noisy counts stay integers;
* ``"gaussian"`` ((eps, delta)-DP): analytic Gaussian noise, L2 sensitivity.

Sensitivities (derivations in docs/releases.md):

* Beta-Bernoulli, substitute (n public): changing one record moves one unit between the
  success and failure counts, so the success count has sensitivity 1 and the failure
  count is n minus it. Only the success count is noised (scale 1/eps), which is the best
  the guarantee allows; noising both counts at 2/eps (paper 004's Alg. 1 for one node)
  would give 4x the variance for the same eps.
* Dirichlet-categorical with m >= 3, substitute: one count down, another up: L1
  sensitivity 2, L2 sensitivity sqrt(2); noise on all m counts (paper 004, Alg. 1).
* Both, add/remove: one count changes by one: L1 = L2 sensitivity 1; n is private, so the
  counts are noised independently and n is estimated by their sum.
* Normal mean (known variance), substitute, data clamped to [lower, upper]: the posterior
  mean (mu0/s0^2 + sum x/s^2) / (1/s0^2 + n/s^2) moves by at most
  (upper - lower)/s^2 / (1/s0^2 + n/s^2); the posterior variance is public (n is public).
  Add/remove (n private): noise on the count n and on the sum of the centred clamped
  values (each in [-w, w], w = (upper - lower)/2) in units of w, computed exactly and
  rounded once: L1 sensitivity 2 + 2^-16, L2 hypot(1, 1 + 2^-16) (the 2^-16 is the
  rounding); the posterior is the conjugate update at the noisy (n, sum).

Noisy counts are truncated to [0, n] (to [0, inf) under add/remove) and the noisy posterior
mean to the hull of the prior mean and the data range: post-processing, so free.

User-level data (``rows_per_user=k``, set by ``release`` from a source bounded to k rows
per user): the relation is add/remove one user (n private; substitute is refused, as a
substituted user can change n). Adding or removing one user adds or removes at most k
records, so by the triangle inequality every add/remove sensitivity above is multiplied
by k; the guarantee's details say ``privacy_unit="user"`` and name the relation
("add/remove one user (<= k rows)"). Proofs: ``PROOF.md`` beside this file.
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction
from typing import Any, Literal

import numpy as np

from dpbayes.models import BetaBernoulli, DirichletCategorical, NormalMean
from dpbayes.models.statistics import CountStatistics, SumStatistics
from dpbayes.privacy import (
    GaussianMechanism,
    GeometricMechanism,
    LaplaceMechanism,
    Neighbours,
)
from dpbayes.privacy.guarantee import user_level
from dpbayes.privacy.mechanisms import check_analytic_epsilon
from dpbayes.privacy.noise import NoiseSource
from dpbayes.release.base import Plan, Release, as_rng, register
from dpbayes.release.counts.record import CountsRecord, NormalMeanRecord

__all__ = [
    "CENTRED_LIMIT",
    "CENTRED_ROUNDING",
    "centred_statistic",
    "count_sensitivity",
    "counts_release",
    "plan_counts",
    "plan_normal_mean",
]

_COUNT_MECHANISMS = ("laplace", "geometric", "gaussian")


def count_sensitivity(m: int, neighbours: Neighbours, norm: str) -> tuple[int, float]:
    """(number of noised coordinates, sensitivity) for an m-category count vector.

    Under substitute with m = 2 only the first count is noised (the second is n minus it).
    """
    if neighbours is Neighbours.SUBSTITUTE:
        if m == 2:
            return 1, 1.0
        return m, 2.0 if norm == "L1" else math.sqrt(2.0)
    return m, 1.0


def _count_mechanism(
    mechanism: str, epsilon: float, delta: float, sensitivity: float, neighbours: Neighbours
) -> Any:
    if mechanism == "laplace":
        if delta:
            raise ValueError("delta must be 0 for the Laplace mechanism (it is pure eps-DP)")
        return LaplaceMechanism(
            epsilon=epsilon,
            sensitivity=sensitivity,
            neighbours=neighbours,
            name="laplace on posterior counts",
        )
    if mechanism == "geometric":
        if delta:
            raise ValueError("delta must be 0 for the geometric mechanism (it is pure eps-DP)")
        return GeometricMechanism(
            epsilon=epsilon,
            sensitivity=round(sensitivity),
            neighbours=neighbours,
            name="geometric on posterior counts",
        )
    if not delta > 0:
        raise ValueError("delta must be > 0 for the Gaussian mechanism")
    return GaussianMechanism(
        epsilon=epsilon,
        delta=delta,
        sensitivity=sensitivity,
        neighbours=neighbours,
        name="gaussian on posterior counts",
    )


def _counts_public(
    model: BetaBernoulli | DirichletCategorical,
    *,
    epsilon: float,
    delta: float,
    neighbours: Neighbours,
    mechanism: str = "laplace",
    rows_per_user: int | None = None,
    **_: Any,
) -> tuple[Literal["L1", "L2"], int, float, dict[str, Any], Any]:
    """The count releases' checks of public facts (the model's categories, eps, delta,
    neighbours, rows per user), run by :func:`plan` before the data are read too: (norm,
    noised coordinates, sensitivity, user-level facts, the noise mechanism)."""
    m = model.m if isinstance(model, DirichletCategorical) else 2
    norm: Literal["L1", "L2"] = "L2" if mechanism == "gaussian" else "L1"
    k, sens = count_sensitivity(m, neighbours, norm)
    factor, user = user_level(rows_per_user, neighbours)
    sens *= factor
    return norm, k, sens, user, _count_mechanism(mechanism, epsilon, delta, sens, neighbours)


def _normal_mean_public(
    model: NormalMean,
    *,
    epsilon: float,
    delta: float,
    neighbours: Neighbours,
    mechanism: str = "laplace",
    rows_per_user: int | None = None,
    **_: Any,
) -> None:
    """The Normal-mean releases' checks of public facts, run by :func:`plan` before the
    data are read: the delta rule; under add/remove (n private) the whole noise mechanism,
    whose sensitivity is public; under substitute the Gaussian's eps cap (the rest of its
    sensitivity needs n, public there, and is checked by the planner)."""
    if neighbours is not Neighbours.SUBSTITUTE:  # its delta rule included
        _normal_add_remove_mechanism(epsilon, delta, neighbours, mechanism, rows_per_user)
        return
    _normal_delta_rule(mechanism, delta)
    if mechanism == "gaussian":
        check_analytic_epsilon(epsilon)


def _normal_delta_rule(mechanism: str, delta: float) -> None:
    if mechanism == "laplace" and delta:
        raise ValueError("delta must be 0 for the Laplace mechanism (it is pure eps-DP)")
    if mechanism == "gaussian" and not delta > 0:
        raise ValueError("delta must be > 0 for the Gaussian mechanism")


def plan_counts(
    model: BetaBernoulli | DirichletCategorical,
    stats: CountStatistics,
    *,
    epsilon: float,
    delta: float,
    neighbours: Neighbours,
    allow_non_private: bool = False,
    mechanism: str = "laplace",
    rows_per_user: int | None = None,
) -> Plan:
    """Noisy counts of a Beta-Bernoulli or Dirichlet-categorical model, truncated to [0, n]."""
    norm, k, sens, user, mech = _counts_public(
        model,
        epsilon=epsilon,
        delta=delta,
        neighbours=neighbours,
        mechanism=mechanism,
        rows_per_user=rows_per_user,
    )
    counts = np.asarray(stats.counts)
    n = int(stats.n)
    upper = float(n) if neighbours is Neighbours.SUBSTITUTE else math.inf
    truncation = (0.0, upper if math.isfinite(upper) else None)
    record = CountsRecord(
        n=neighbours.public_n(n),
        neighbours=neighbours,
        noised_coordinates=k,
        sensitivity=sens,
        sensitivity_norm=norm,
        truncation=truncation,
        **user,
    )
    details = {"noised_coordinates": k, "truncation": list(truncation), **user}

    def run(src: NoiseSource) -> Release:
        exact = counts[:k].astype(np.int64 if mechanism == "geometric" else float)
        noisy = mech.release(exact, rng=as_rng(src)).value.astype(float)
        noisy = np.clip(noisy, 0.0, upper)
        full = np.array([noisy[0], n - noisy[0]]) if k == 1 else noisy
        released_n = n if neighbours is Neighbours.SUBSTITUTE else float(full.sum())
        noisy_stats = CountStatistics(counts=full, n=round(released_n))
        guarantee = mech.guarantee(simulation=src.simulation, **details)
        return Release(
            model=model,
            mechanism=mechanism,
            posterior=model.posterior_from(noisy_stats),
            guarantee=guarantee,
            released={"counts": full.tolist()},
            public=record.to_public(),
        )

    return Plan(guarantee=mech.guarantee(**details), run=run)


def computed_mean_sensitivity(model: NormalMean, n: int) -> float:
    """How far the posterior mean *as computed* (``NormalMean.posterior_from``, in doubles)
    can move when one record is substituted, from public values only (PROOF.md, Theorem 2).

    The clamped sum S is correctly rounded (``data/exact.py``), within ulp(n M) / 2 of the
    real sum, M = max(|L|, |U|); then b = S / D with D = r + n (public) and the mean
    a + b with a = prior_mean w (public) each round once. So the computed means of two
    neighbours differ by at most ((U - L) + ulp(n M)) / D + ulp(B) + ulp(|a| + B), B >= |b|.
    With ordinary bounds this exceeds (U - L) / D by a relative 1e-9 or less; with bounds
    far from 0 against their width (1e15 and 1e15 + 0.25) by orders of magnitude.
    """
    r, w = model.mean_weights(n)  # the very values posterior_from computes with
    d = r + n
    big = max(abs(model.lower), abs(model.upper))
    a = abs(model.prior_mean * w)
    b = 2.0 * n * big / d  # >= |S / D| with room for the roundings
    bound = ((model.upper - model.lower) + math.ulp(n * big)) / d
    bound += math.ulp(b) + math.ulp(a + b)
    return bound * (1.0 + 1e-12)  # the roundings of this bound itself


def plan_normal_mean(
    model: NormalMean,
    stats: Any,
    *,
    epsilon: float,
    delta: float,
    neighbours: Neighbours,
    allow_non_private: bool = False,
    mechanism: str = "laplace",
    rows_per_user: int | None = None,
) -> Plan:
    """Private posterior of a Normal mean with known variance (paper 002 §6.2).

    Substitute (n public): noise on the posterior mean. Add/remove, hence every user-level
    release (n private): noise on the count and on the centred clamped sum
    (:func:`_plan_normal_mean_add_remove`).
    """
    if mechanism not in ("laplace", "gaussian"):  # pragma: no cover - registry routes these
        raise ValueError(f"mechanism must be 'laplace' or 'gaussian', got {mechanism!r}")
    if neighbours is not Neighbours.SUBSTITUTE:
        return _plan_normal_mean_add_remove(
            model, stats, epsilon, delta, neighbours, mechanism, rows_per_user
        )
    n = int(stats.n)
    if n == 0:  # n is public under substitution: refusing it tells nothing more
        raise ValueError(
            "data must contain at least one record for the posterior mean release under "
            "substitute neighbours (use neighbours='add_remove' to release empty data)"
        )
    factor, user = user_level(rows_per_user, neighbours)
    sens = max(model.posterior_mean_sensitivity(n), computed_mean_sensitivity(model, n)) * factor
    _normal_delta_rule(mechanism, delta)
    if mechanism == "laplace":
        mech: Any = LaplaceMechanism(
            epsilon=epsilon,
            sensitivity=sens,
            neighbours=neighbours,
            name="laplace on posterior mean",
        )
    else:
        mech = GaussianMechanism(
            epsilon=epsilon,
            delta=delta,
            sensitivity=sens,
            neighbours=neighbours,
            name="gaussian on posterior mean",
        )
    exact = model.posterior_from(stats)
    lo = min(model.prior_mean, model.lower)
    hi = max(model.prior_mean, model.upper)
    record = NormalMeanRecord(
        n=n,
        neighbours=neighbours,
        sensitivity=sens,
        posterior_sd=float(exact.std()),
        bounds=(model.lower, model.upper),
        truncation=(lo, hi),
        **user,
    )

    def run(src: NoiseSource) -> Release:
        noisy_mean = float(mech.release(np.array([exact.mean()]), rng=as_rng(src)).value[0])
        noisy_mean = min(max(noisy_mean, lo), hi)
        posterior = type(exact)(mean=noisy_mean, sd=exact.std())
        return Release(
            model=model,
            mechanism=mechanism,
            posterior=posterior,
            guarantee=mech.guarantee(simulation=src.simulation, truncation=[lo, hi], **user),
            released={"posterior_mean": noisy_mean},
            public=record.to_public(),
        )

    return Plan(guarantee=mech.guarantee(truncation=[lo, hi], **user), run=run)


#: |v| is clamped to this before it is rounded to a double: up to it a double's spacing is
#: at most 2^-16, so the rounding moves each value by at most 2^-17
#: (:func:`centred_statistic`). Only data sets with more than 2^37 (1.4e11) records reach it.
CENTRED_LIMIT = 2.0**37
#: How far rounding v = T / w to a double can move it beyond the real change (2 x 2^-17).
CENTRED_ROUNDING = 2.0**-16


def centred_statistic(stats: Any, lower: float, upper: float) -> np.ndarray:
    """(n, v): v = T / w, T = S - c n, c = (lower + upper) / 2, w = (upper - lower) / 2 as
    *exact* rationals, S the exact clamped sum; v clamped to +-CENTRED_LIMIT, then rounded
    once to a double (PROOF.md, Theorem 3).

    Every clamped value lies in [lower, upper], so |value - c| <= w exactly and one record
    moves the real v by at most 1. Computing (S - c n) / w in doubles instead cancels when
    |c| >> w: the rounding of S alone is ulp(n max|bound|) / 2, which n (private) does not
    bound. Here the only rounding is the last one, at most 2^-17 below the limit. A
    hand-made ``SumStatistics`` without ``exact_total`` is taken at its word: ``total`` is
    the exact sum.
    """
    total = stats.exact_total if stats.exact_total is not None else Fraction(stats.total)
    lo, hi = Fraction(lower), Fraction(upper)
    n = int(stats.n)
    v = (total - (lo + hi) / 2 * n) / ((hi - lo) / 2)
    limit = Fraction(CENTRED_LIMIT)
    v = min(max(v, -limit), limit)
    return np.array([float(min(n, 2**53)), float(v)])


def _normal_add_remove_mechanism(
    epsilon: float,
    delta: float,
    neighbours: Neighbours,
    mechanism: str,
    rows_per_user: int | None,
) -> tuple[Any, dict[str, Any]]:
    """The noise on (n, v) under add/remove, from public facts only (its sensitivity does
    not depend on the data): (mechanism, user-level facts)."""
    factor, user = user_level(rows_per_user, neighbours)
    _normal_delta_rule(mechanism, delta)
    if mechanism == "laplace":
        mech: Any = LaplaceMechanism(
            epsilon=epsilon,
            sensitivity=(2.0 + CENTRED_ROUNDING) * factor,
            neighbours=neighbours,
            name="laplace on count and centred sum",
        )
    else:
        mech = GaussianMechanism(
            epsilon=epsilon,
            delta=delta,
            sensitivity=math.hypot(1.0, 1.0 + CENTRED_ROUNDING) * factor,
            neighbours=neighbours,
            name="gaussian on count and centred sum",
        )
    return mech, user


def _plan_normal_mean_add_remove(
    model: NormalMean,
    stats: Any,
    epsilon: float,
    delta: float,
    neighbours: Neighbours,
    mechanism: str,
    rows_per_user: int | None,
) -> Plan:
    """Add/remove (n private): noise on (n, v), v = T / w, T = sum of (clamp(x) - c).

    c = (lower + upper) / 2 and w = (upper - lower) / 2, so every clamped, centred value
    lies in [-w, w]. Adding or removing one record moves n by 1 and the real v by at most
    1; v is computed exactly and rounded once (:func:`centred_statistic`), which adds at
    most CENTRED_ROUNDING to its change. L1 sensitivity 2 + 2^-16, L2 hypot(1, 1 + 2^-16);
    one user (<= k rows) k times that. Laplace (eps-DP) or Gaussian ((eps, delta)-DP) on
    (n, v); the posterior is the conjugate update at n^ = max(round(n~), 0) and
    S^ = w v~ + c n^ (post-processing).
    """
    mech, user = _normal_add_remove_mechanism(epsilon, delta, neighbours, mechanism, rows_per_user)
    centre = 0.5 * (model.lower + model.upper)
    half = 0.5 * (model.upper - model.lower)
    exact = centred_statistic(stats, model.lower, model.upper)
    details = {"centre": centre, "half_width": half, **user}
    record = NormalMeanRecord(
        n=None,
        neighbours=neighbours,
        sensitivity=mech.sensitivity,
        bounds=(model.lower, model.upper),
        centre=centre,
        half_width=half,
        **user,
    )

    def run(src: NoiseSource) -> Release:
        noisy = mech.release(exact, rng=as_rng(src)).value
        from dpbayes.data.exact import round_saturating

        n_hat = max(round(float(noisy[0])), 0)
        # w v~ and w v~ + c n^ exactly, then rounded with saturation: finite for every
        # noisy value (w v~ alone reached 1e317 at bounds [0, 1e306]).
        centred = Fraction(half) * Fraction(float(noisy[1]))
        total = round_saturating(centred + Fraction(centre) * n_hat)
        return Release(
            model=model,
            mechanism=mechanism,
            posterior=model.posterior_from(SumStatistics(n=n_hat, total=total)),
            guarantee=mech.guarantee(simulation=src.simulation, **details),
            released={"count": float(noisy[0]), "centred_sum": round_saturating(centred)},
            public=record.to_public(),
        )

    return Plan(guarantee=mech.guarantee(**details), run=run)


def counts_release(
    model: Any,
    mechanism: str,
    counts: np.ndarray,
    n: int,
    guarantee: Any,
    public: dict[str, Any],
) -> Release:
    """A count release: the posterior of ``counts`` (taken as exact) and what is published
    (``public``: the release's record, serialised)."""
    return Release(
        model=model,
        mechanism=mechanism,
        posterior=model.posterior_from(CountStatistics(counts=counts, n=n)),
        guarantee=guarantee,
        released={"counts": counts.tolist()},
        public=public,
    )


def _register() -> None:
    for mech in _COUNT_MECHANISMS:
        for model_type in (BetaBernoulli, DirichletCategorical):

            def planner(model: Any, stats: Any, *, _m: str = mech, **kw: Any) -> Plan:
                return plan_counts(model, stats, mechanism=_m, **kw)

            register(
                mech,
                model_type,
                user_level=True,
                record=CountsRecord,
                precheck=functools.partial(_counts_public, mechanism=mech),
            )(planner)
    for mech in ("laplace", "gaussian"):

        def nplanner(model: Any, stats: Any, *, _m: str = mech, **kw: Any) -> Plan:
            return plan_normal_mean(model, stats, mechanism=_m, **kw)

        register(
            mech,
            NormalMean,
            user_level=True,
            record=NormalMeanRecord,
            precheck=functools.partial(_normal_mean_public, mechanism=mech),
        )(nplanner)


_register()
