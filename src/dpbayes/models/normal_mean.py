"""Normal-mean model: values x_i ~ Normal(mu, noise_sd^2) with known noise_sd, prior mu ~ Normal.

The data are clamped to the public range [lower, upper] before the update, which bounds
one record's influence. Conjugate update: with n clamped values summing to S,
precision tau = 1/prior_sd^2 + n/noise_sd^2, posterior mean
(prior_mean/prior_sd^2 + S/noise_sd^2) / tau and posterior sd 1/sqrt(tau). Exact and
non-private.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from typing import Any, ClassVar

from dpbayes.models.distributions import Normal
from dpbayes.models.statistics import SumStatistics, read_source
from dpbayes.privacy.validation import check_finite, check_int, check_positive

__all__ = ["NormalMean"]


@dataclass(frozen=True, kw_only=True)
class NormalMean:
    """Normal likelihood with known ``noise_sd`` and a Normal(prior_mean, prior_sd) prior.

    Parameters
    ----------
    prior_mean, prior_sd:
        Prior on the mean (prior_sd > 0).
    noise_sd:
        Known standard deviation of one observation (> 0).
    lower, upper:
        Public range; every value is clamped into it before the update (lower < upper).
    """

    lower: float
    upper: float
    prior_mean: float = 0.0
    prior_sd: float = 1.0
    noise_sd: float = 1.0
    name: ClassVar[str] = "normal-mean"

    def __post_init__(self) -> None:
        object.__setattr__(self, "prior_mean", check_finite(self.prior_mean, "prior_mean"))
        object.__setattr__(self, "prior_sd", check_positive(self.prior_sd, "prior_sd"))
        object.__setattr__(self, "noise_sd", check_positive(self.noise_sd, "noise_sd"))
        lo = check_finite(self.lower, "lower")
        hi = check_finite(self.upper, "upper")
        if not lo < hi:
            raise ValueError(f"lower must be < upper, got lower={lo}, upper={hi}")
        object.__setattr__(self, "lower", lo)
        object.__setattr__(self, "upper", hi)

    @property
    def prior(self) -> Normal:
        return Normal(self.prior_mean, self.prior_sd)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "prior_mean": self.prior_mean,
            "prior_sd": self.prior_sd,
            "noise_sd": self.noise_sd,
            "lower": self.lower,
            "upper": self.upper,
        }

    def statistics(self, data: Any, column: str | None = None) -> SumStatistics:
        """``n`` and the sum of the values clamped to [lower, upper] (exact, non-private)."""
        from dpbayes.data.exact import round_saturating

        src = read_source(data, column)
        exact = src.clamped_sum_exact(self.lower, self.upper)
        return SumStatistics(n=int(src.n()), total=round_saturating(exact), exact_total=exact)

    def posterior_from(self, stats: SumStatistics) -> Normal:
        """Posterior Normal from ``n`` and a (possibly noisy, any real) clamped ``total``."""
        if not isinstance(stats, SumStatistics):
            raise TypeError(f"stats must be SumStatistics, got {type(stats).__name__}")
        n = stats.n
        if n <= 0:  # no records: the clamped sum is 0 (a noisy one is projected onto it)
            return Normal(self.prior_mean, self.prior_sd)
        # tau = 1/prior_sd^2 + n/noise_sd^2 and the mean, written with the ratio
        # r = noise_sd^2 / prior_sd^2 so that nothing overflows at any scale: the mean is
        # prior_mean r/(r + n) + total/(r + n), the sd prior_sd/sqrt(1 + n/r) (r >= 1) or
        # noise_sd/sqrt(r + n) (r < 1). (Computed as written, 1/tau and total/noise_sd^2
        # overflowed for very flat priors or tiny noise_sd, after a release's noise.)
        r, w = self.mean_weights(n)
        mean = self.prior_mean * w + stats.total / (r + n)
        if r >= 1.0:
            sd = self.prior_sd / math.sqrt(1.0 + n / r)
        else:
            sd = self.noise_sd / math.sqrt(r + n)
        # Both terms of the mean are finite, their sum can overflow (prior_mean and a noisy
        # total near the largest double); the sd can underflow (noise_sd 1e-322 at n 1600).
        # A noisy n then made this step fail after the noise with a probability that
        # depends on the data (a free bit: failures are not charged): the mean is clamped
        # to the doubles and the sd kept at least the smallest positive double instead.
        if not math.isfinite(mean):
            mean = math.copysign(sys.float_info.max, mean)
        return Normal(mean, max(sd, math.ulp(0.0)))

    def mean_weights(self, n: float) -> tuple[float, float]:
        """(r, w) of the posterior mean prior_mean w + total / (r + n) at ``n`` records:
        r = noise_sd^2 / prior_sd^2 (inf or 0 when out of range) and w = r / (r + n)."""
        q = self.noise_sd / self.prior_sd
        r = q * q
        return r, (1.0 / (1.0 + n / r) if r > 0 else 0.0)

    def posterior(self, data: Any, column: str | None = None) -> Normal:
        """Exact (non-private) posterior of the mean given the clamped data."""
        return self.posterior_from(self.statistics(data, column=column))

    def posterior_predictive(self, data: Any, column: str | None = None) -> Normal:
        """Distribution of the next observation: Normal(post mean, sqrt(post var + noise var))."""
        post = self.posterior(data, column=column)
        return Normal(post.loc, math.sqrt(post.sd**2 + self.noise_sd**2))

    def posterior_mean_sensitivity(self, n: int, neighbours: str = "substitute") -> float:
        """Largest change of the posterior mean when one clamped record is substituted.

        Derivation: the posterior mean is ``m(S) = (prior_mean/prior_sd^2 + S/noise_sd^2)
        / tau`` with ``tau = 1/prior_sd^2 + n/noise_sd^2``. Substituting one record keeps
        ``n`` (hence ``tau``) and changes the clamped sum ``S`` by at most
        ``upper - lower``, so ``|m(S) - m(S')| <= (upper - lower) / noise_sd^2 / tau``.
        This is both the L1 and the absolute (scalar) sensitivity.

        Parameters
        ----------
        n:
            The public number of records (>= 1: a substitution needs one record).
        neighbours:
            Only ``"substitute"``; under add/remove neighbours ``n`` itself changes and is
            not public, so that sensitivity is not defined here.
        """
        if neighbours != "substitute":
            raise ValueError(
                f"neighbours must be 'substitute', got {neighbours!r}: under add/remove n is "
                "private and changes tau, so the sensitivity needs a public n (not supported)"
            )
        count = check_int(n, "n", minimum=1)
        # (U - L) / s^2 / (1/s0^2 + n/s^2) = (U - L) / (r + n), r = (s / s0)^2: no square of
        # an sd alone (prior_sd**2 raised OverflowError at prior_sd 1e300)
        r, _ = self.mean_weights(count)
        return (self.upper - self.lower) / (r + count)
