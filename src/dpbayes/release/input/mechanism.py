"""Input perturbation: privatise every record, then infer (paper 002 §6.1).

``release(model, data, mechanism="input", epsilon=..., delta=...)``:

* Beta-Bernoulli: each boolean goes through randomized response, kept with probability
  p = e^eps / (1 + e^eps). Paper 002 writes it as the exponential mechanism with score
  [equal]; with its factor 2 that keeps with e^{eps/2} / (1 + e^{eps/2}), but the
  normaliser is the same for both inputs, so the factor is not needed and p above is
  exactly eps-DP. Privacy: any report has probability in [1 - p, p] whatever the record,
  a ratio e^eps; substituting one record changes one report, so eps-DP (substitute).
* Normal mean: each value, clamped to the public [lower, upper], gets N(0, sigma^2) noise
  from the analytic Gaussian mechanism with sensitivity upper - lower ((eps, delta)-DP per
  record, hence for the data set under substitution).

Substitute one record only (one report per record publishes n). Proof, line by line:
``PROOF.md`` beside this file.

The release publishes the noisy sufficient statistic (the count of reported ones / the sum
of the noisy values): post-processing of the noisy records, no extra cost. The noisy
records are drawn one per record even though only their sum is kept, so the distribution
is exactly the per-record mechanism's.

Two posteriors from the noisy data:

* naive (``Release.posterior``; the paper's): treat the noisy data as clean;
* noise-aware (``noise_aware.py`` beside this file): model the known noise. Randomized
  response: a reported one has likelihood q(theta) = p theta + (1 - p)(1 - theta), so the
  posterior is exactly a mixture of Beta(a + s, b + n - s) over the latent true count s
  (:class:`~dpbayes.models.mixtures.BetaMixture`). Gaussian noise on a Normal mean:
  x~_i ~ N(mu, s^2 + sigma^2), the conjugate update with the inflated variance (exact up to
  the clamping).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dpbayes.models import BetaBernoulli, NormalMean
from dpbayes.models.statistics import CountStatistics, SumStatistics
from dpbayes.privacy import GaussianMechanism, Neighbours, RandomizedResponse
from dpbayes.privacy.noise import NoiseSource
from dpbayes.release.base import Plan, Release, register
from dpbayes.release.counts.mechanism import counts_release
from dpbayes.release.input.record import InputCoinRecord, InputNormalRecord

__all__ = ["BOUND_LIMIT", "MAX_NOISE_SD", "plan_input_coin", "plan_input_normal"]

#: The largest |lower|, |upper| of a Normal mean: the clamped sum of n values is then at
#: most n 1e150 (< 1e169 for any n < 2^63), far from overflow; beyond it a sum of n values
#: at a bound overflowed for some data sets and not their neighbours.
BOUND_LIMIT = 1e150
#: The largest per-record noise sd: the sum of n draws stays far below the double range.
MAX_NOISE_SD = 1e200


def _substitute(neighbours: Neighbours) -> None:
    if neighbours is not Neighbours.SUBSTITUTE:
        raise ValueError(
            "neighbours must be 'substitute' for input perturbation: one report per record "
            "publishes n (add/remove neighbours and user-level data keep n private)"
        )


def _coin_public(
    model: BetaBernoulli, *, epsilon: float, delta: float, neighbours: Neighbours, **_: Any
) -> RandomizedResponse:
    """The coin's checks of public facts, run by :func:`plan` before the data are read
    too: the randomized response it applies."""
    _substitute(neighbours)
    if delta != 0:
        raise ValueError("delta must be 0 for randomized response (it is pure eps-DP)")
    return RandomizedResponse(epsilon=epsilon, k=2)


@register("input", BetaBernoulli, record=InputCoinRecord, precheck=_coin_public)
def plan_input_coin(
    model: BetaBernoulli,
    stats: CountStatistics,
    *,
    epsilon: float,
    delta: float,
    neighbours: Neighbours,
    allow_non_private: bool = False,
) -> Plan:
    """Randomized response on every boolean, then the Beta update (paper 002 §6.1)."""
    mech = _coin_public(model, epsilon=epsilon, delta=delta, neighbours=neighbours)
    n, k = int(stats.n), int(stats.counts[0])
    keep = mech.keep_probability
    guarantee = mech.guarantee(input_perturbation=True)
    record = InputCoinRecord(n=n, keep_probability=keep, neighbours=neighbours)

    def run(src: NoiseSource) -> Release:
        # category 0 = "1" (success), 1 = "0": the report multiset depends only on counts
        records = np.repeat(np.array([0, 1], dtype=np.int64), [k, n - k])
        reports = src.randomized_response(records, 2, keep)
        noisy = int(np.sum(reports == 0))
        counts = np.array([noisy, n - noisy], dtype=np.int64)
        return counts_release(
            model, "input", counts, n, guarantee.with_simulation(src.simulation), record.to_public()
        )

    return Plan(guarantee=guarantee, run=run)


def _normal_public(
    model: NormalMean, *, epsilon: float, delta: float, neighbours: Neighbours, **_: Any
) -> GaussianMechanism:
    """The Normal mean's checks of public facts (PROOF.md, Theorem 2, "Floating point"),
    run by :func:`plan` before the data are read too: the Gaussian mechanism it applies
    to every clamped value."""
    if not max(abs(model.lower), abs(model.upper)) <= BOUND_LIMIT:
        raise ValueError(
            f"lower and upper must be within [-{BOUND_LIMIT:g}, {BOUND_LIMIT:g}] for input "
            f"perturbation (rescale the data), got lower={model.lower:g}, upper={model.upper:g}"
        )
    _substitute(neighbours)
    if not delta > 0:
        raise ValueError("delta must be > 0 for the Gaussian mechanism")
    mech = GaussianMechanism(
        epsilon=epsilon,
        delta=delta,
        sensitivity=model.upper - model.lower,
        name="gaussian input perturbation",
    )
    if not mech.sigma <= MAX_NOISE_SD:
        raise ValueError(
            f"epsilon = {epsilon:g} is too small for these bounds: the noise sd "
            f"{mech.sigma:g} exceeds {MAX_NOISE_SD:g}, where the noisy total could overflow"
        )
    return mech


@register("input", NormalMean, record=InputNormalRecord, precheck=_normal_public)
def plan_input_normal(
    model: NormalMean,
    stats: SumStatistics,
    *,
    epsilon: float,
    delta: float,
    neighbours: Neighbours,
    allow_non_private: bool = False,
) -> Plan:
    """Gaussian noise on every clamped value, then the Normal update (paper 002 §6.1)."""
    mech = _normal_public(model, epsilon=epsilon, delta=delta, neighbours=neighbours)
    n = int(stats.n)
    # S is correctly rounded (data/exact.py): two neighbours' doubles differ by at most
    # (U - L) + ulp(n M). The release S + (sum of n draws) is the Gaussian mechanism on S
    # with sd sqrt(n) sigma, as private as the guarantee states while that difference is at
    # most sqrt(n) (U - L) (PROOF.md, Theorem 2, rounding). n is public (substitute).
    width = model.upper - model.lower
    big = max(abs(model.lower), abs(model.upper))
    if n >= 2 and width + math.ulp(n * big) > math.sqrt(n) * width * (1.0 - 1e-12):
        raise ValueError(
            f"lower and upper are too far from 0 for their width ({model.lower!r}, "
            f"{model.upper!r}): the rounding of the clamped sum of {n} records could exceed "
            "the sensitivity; centre the data (subtract a public constant) first"
        )
    guarantee = mech.guarantee(input_perturbation=True)
    record = InputNormalRecord(n=n, sigma=mech.sigma, range=(model.lower, model.upper))

    def run(src: NoiseSource) -> Release:
        noise = src.gaussian(np.zeros(n), mech.sigma)  # one draw per record
        total = float(stats.total + np.sum(noise))
        return Release(
            model=model,
            mechanism="input",
            posterior=model.posterior_from(SumStatistics(n=n, total=total)),
            guarantee=guarantee.with_simulation(src.simulation),
            released={"total": total},
            public=record.to_public(),
        )

    return Plan(guarantee=guarantee, run=run)
