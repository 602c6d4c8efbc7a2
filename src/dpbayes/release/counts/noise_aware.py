"""Noise-aware posteriors: calibrated inference for whoever receives a private release.

The naive posterior (``Release.posterior``) takes the released values as exact and is
over-confident. The noise-aware posterior conditions on what was actually observed: the
released values, produced by a known mechanism from unknown true statistics,

    p(theta | released) = sum_t p(theta | t) P(t | released),
    P(t | released) proportional to P(released | t) P(t),

with P(t) the prior predictive of the true statistic t (Bernstein & Sheldon 2018, §3,
who sample it by Gibbs; here the sum is done exactly). It uses only ``rel.released``,
the public record (:class:`~.record.CountsRecord`), ``rel.guarantee`` and ``rel.model``:
never the data.

Here, for ``laplace`` / ``geometric`` / ``gaussian`` on the counts of a Beta-Bernoulli or
Dirichlet-categorical model (substitute, n public): exact. The prior of the true counts c
is Dirichlet-multinomial, proportional to prod_j Gamma(alpha_j + c_j) / c_j!, and the
noise is independent per released coordinate, so the weight of c is a product of one
factor per category restricted to sum c = n: a :class:`SeparableDirichletMixture` whose
marginals are convolutions, exact up to a proven e^-50 of the weight (any m, at most
O(m n^2), far less around the saddle point). The truncation to [0, n] is exact: a
released 0 has likelihood P(c_j + Z <= 0), a released n has P(c_j + Z >= n). The coin
uses the fast ladder mixture of :mod:`.coin`; a private n (add/remove, user level) the
exact mixture over the counts and n of :mod:`.private_n`. The Normal mean's are in
:mod:`.normal`; every other family registers its own beside its planner
(:func:`dpbayes.release.base.register_noise_aware`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import lru_cache
from typing import Any

import numpy as np
from scipy import special

from dpbayes.models import BetaBernoulli, DirichletCategorical, NormalMean
from dpbayes.models.mixtures import SeparableDirichletMixture
from dpbayes.privacy import Neighbours
from dpbayes.release.base import Release, register_noise_aware
from dpbayes.release.counts.coin import coin_count_posterior
from dpbayes.release.counts.normal import normal_mean_posterior
from dpbayes.release.counts.normal_n import normal_mean_private_n_posterior
from dpbayes.release.counts.record import CountsRecord, NormalMeanRecord

__all__ = ["count_log_likelihood", "count_posterior", "private_n_count_posterior"]

# ---------------------------------------------------------------- counts (paper 002 §6.2)


def _laplace_log_tail(t: np.ndarray, scale: float) -> np.ndarray:
    """log P(Z >= t) for Z ~ Laplace(0, scale), t >= 0 (the tails are exponential)."""
    return np.asarray(math.log(0.5) - t / scale)


def count_log_likelihood(
    released: float, true: np.ndarray, kind: str, scale: float, upper: float | None
) -> np.ndarray:
    """log P(released | true count) for noise ``kind`` and truncation to [0, upper].

    ``kind``: ``"laplace"`` (scale b), ``"geometric"`` (discrete Laplace, P(z) propto
    e^{-|z|/b}) or ``"gaussian"`` (scale = sigma). A released value equal to a bound has
    the probability of the noise's tail beyond it (the truncation's point mass).
    """
    x = np.asarray(true, dtype=float)
    r = float(released)
    at_low = r <= 0.0
    at_high = upper is not None and r >= upper
    if kind == "laplace":
        if at_low:
            return _laplace_log_tail(x, scale)
        if at_high:
            return _laplace_log_tail(float(upper) - x, scale)  # type: ignore[arg-type]
        return np.asarray(-math.log(2 * scale) - np.abs(r - x) / scale)
    if kind == "geometric":
        # P(Z = z) = (1 - q)/(1 + q) q^|z|, q = e^{-1/b}; P(Z >= j) = q^j / (1 + q), j >= 0
        log_q = -1.0 / scale
        log1p_q = math.log1p(math.exp(log_q))
        if at_low:
            return np.asarray(log_q * x - log1p_q)
        if at_high:
            return np.asarray(log_q * (float(upper) - x) - log1p_q)  # type: ignore[arg-type]
        log_norm = math.log(-math.expm1(log_q)) - log1p_q
        return np.asarray(log_norm + log_q * np.abs(np.round(r) - x))
    if kind == "gaussian":
        if at_low:
            return np.asarray(special.log_ndtr(-x / scale))
        if at_high:
            return np.asarray(special.log_ndtr(-(float(upper) - x) / scale))  # type: ignore[arg-type]
        z = (r - x) / scale
        return np.asarray(-0.5 * z * z - math.log(scale * math.sqrt(2 * math.pi)))
    raise ValueError(f"kind must be 'laplace', 'geometric' or 'gaussian', got {kind!r}")


def _noise_scale(rel: Release) -> float:
    key = "sigma" if rel.mechanism == "gaussian" else "scale"
    value = rel.guarantee.details.get(key)
    if value is None:
        raise ValueError(f"rel.guarantee.details must contain the noise {key!r}")
    return float(value)


def count_posterior(
    alpha: np.ndarray,
    n: int,
    released: Any,
    noised: int,
    kind: str,
    scale: float,
    upper: float | None,
) -> SeparableDirichletMixture:
    """Exact posterior of Dir(alpha + c) over the true counts c (sum n) given noisy counts.

    The first ``noised`` coordinates of ``released`` are c_j + noise truncated to
    [0, upper]; the others are determined by n (the coin's failures) and add no factor.
    """
    al = np.asarray(alpha, dtype=float)
    x = np.arange(n + 1, dtype=float)
    lf = special.gammaln(al[:, None] + x[None, :]) - special.gammaln(x + 1.0)[None, :]
    rel_counts = np.asarray(released, dtype=float)
    for j in range(noised):
        lf[j] += count_log_likelihood(float(rel_counts[j]), x, kind, scale, upper)
    return SeparableDirichletMixture(al, n, lf)


def _public_n(rec: CountsRecord) -> int | None:
    """n when the release publishes it (substitute), None when n is private."""
    return rec.n if rec.neighbours is Neighbours.SUBSTITUTE else None


def _counts_from_release(rel: Release, alpha: np.ndarray, n: int) -> SeparableDirichletMixture:
    rec = CountsRecord.of(rel)
    upper = rec.truncation[1]
    return count_posterior(
        alpha,
        n,
        rel.released["counts"],
        rec.noised_coordinates,
        rel.mechanism,
        _noise_scale(rel),
        None if upper is None else float(upper),
    )


def private_n_count_posterior(rel: Release, n_prior: Any = None) -> Any:
    """Noise-aware posterior of a count release with a private n (add/remove; user
    level): every count noised, truncated to [0, inf); ``n_prior`` the prior on the true
    total (:func:`~.private_n.n_prior`; default flat)."""
    from dpbayes.release.counts.private_n import n_prior as make_prior
    from dpbayes.release.counts.private_n import private_n_counts

    model = rel.model
    alpha = (
        np.array([model.alpha, model.beta], dtype=float)
        if isinstance(model, BetaBernoulli)
        else np.asarray(model.alpha, dtype=float)
    )
    counts = [float(v) for v in rel.released["counts"]]
    rec = CountsRecord.of(rel)
    noised = rec.noised_coordinates
    if noised != alpha.size or len(counts) != alpha.size:
        raise ValueError(
            f"a release with a private n must noise all {alpha.size} counts, "
            f"got {noised} noised of {len(counts)}"
        )
    upper = rec.truncation[1]
    if upper is not None:
        raise ValueError("a release with a private n is truncated to [0, inf) only")
    kind, scale = rel.mechanism, _noise_scale(rel)

    def lik(r: float) -> Callable[[np.ndarray], np.ndarray]:
        return lambda x: count_log_likelihood(r, x, kind, scale, None)

    return private_n_counts(alpha, [lik(r) for r in counts], counts, scale, make_prior(n_prior))


def _check_no_prior(n: int | None, n_prior: Any) -> None:
    if n_prior is not None:
        raise ValueError(
            "n_prior applies only to releases whose n is private (add/remove, user level); "
            f"this release publishes n = {n}"
        )


def _coin(rel: Release, *, n_prior: Any = None) -> Any:
    """The coin: weights h_0(k) h_1(n - k) over k = 0..n, the fast ladder mixture; with a
    private n the exact mixture over both counts (:mod:`.private_n`)."""
    model = rel.model
    rec = CountsRecord.of(rel)
    n = _public_n(rec)
    if n is None:
        return private_n_count_posterior(rel, n_prior)
    _check_no_prior(n, n_prior)
    upper = rec.truncation[1]
    x = _arange(n)
    log_lik = count_log_likelihood(
        float(rel.released["counts"][0]),
        x,
        rel.mechanism,
        _noise_scale(rel),
        None if upper is None else float(upper),
    )
    if rec.noised_coordinates > 1:
        log_lik = log_lik + count_log_likelihood(
            float(rel.released["counts"][1]),
            x[::-1],
            rel.mechanism,
            _noise_scale(rel),
            None if upper is None else float(upper),
        )
    return coin_count_posterior(float(model.alpha), float(model.beta), n, log_lik)


@lru_cache(maxsize=16)
def _arange(n: int) -> np.ndarray:
    x = np.arange(n + 1, dtype=float)
    x.setflags(write=False)
    return x


def _die(rel: Release, *, n_prior: Any = None) -> Any:
    n = _public_n(CountsRecord.of(rel))
    if n is None:
        return private_n_count_posterior(rel, n_prior)
    _check_no_prior(n, n_prior)
    return _counts_from_release(rel, np.asarray(rel.model.alpha, dtype=float), n)


for _mech in ("laplace", "geometric", "gaussian"):
    register_noise_aware(_mech, BetaBernoulli)(_coin)
    register_noise_aware(_mech, DirichletCategorical)(_die)


@register_noise_aware("laplace", NormalMean)
@register_noise_aware("gaussian", NormalMean)
def _normal_mean(rel: Release, *, clamp: str = "ignore", n_prior: Any = None) -> Any:
    """Substitute (n public): the noisy posterior mean; add/remove and user level (n
    private): the noisy count and centred sum (:mod:`.normal_n`); public n: :mod:`.normal`."""
    if "posterior_mean" not in rel.released:
        return normal_mean_private_n_posterior(rel, clamp=clamp, n_prior=n_prior)
    _check_no_prior(NormalMeanRecord.of(rel).n, n_prior)
    return normal_mean_posterior(rel, clamp=clamp)
