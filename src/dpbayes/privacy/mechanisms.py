"""Differentially private mechanisms: Laplace, Gaussian, geometric, exponential, randomized
response.

Each mechanism is a frozen dataclass with keyword-only parameters, validated once in
``__post_init__``. It exposes its noise distribution (``noise_distribution()``,
``variance``) so utility can be computed, its privacy (``guarantee()``,
``epsilon_for(d_in)``), and ``release(value, rng=None)``, which returns the noisy value
together with the :class:`~dpbayes.privacy.guarantee.Guarantee` it carries. With
``rng=None`` the noise comes from OpenDP's floating-point-safe samplers; with a seed or a
numpy Generator it is a seeded simulation and the guarantee says ``simulation=True``.
"""

from __future__ import annotations

import decimal
import functools
import math
import sys
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from dpbayes.privacy.composition import gaussian_noise_record
from dpbayes.privacy.guarantee import Guarantee, Neighbours
from dpbayes.privacy.noise import noise_source
from dpbayes.privacy.validation import (
    check_array,
    check_delta,
    check_epsilon,
    check_int,
    check_positive,
)

__all__ = [
    "ExponentialMechanism",
    "GaussianMechanism",
    "GeometricMechanism",
    "LaplaceMechanism",
    "Noisy",
    "RandomizedResponse",
    "analytic_gaussian_epsilon",
    "analytic_gaussian_sigma",
    "check_analytic_epsilon",
    "classic_gaussian_sigma",
]


@dataclass(frozen=True)
class Noisy:
    """A mechanism's output and the guarantee it carries."""

    value: Any
    guarantee: Guarantee

    @property
    def simulation(self) -> bool:
        return self.guarantee.simulation


def _neighbours(value: Any) -> Neighbours:
    return Neighbours.parse(value)


#: The largest noise scale (Laplace b, Gaussian sigma) a plan takes. At a scale of 1e308,
#: finite, one Laplace draw in five overflowed to inf and the count release failed in the
#: run (uncharged, after the noise); at 1e250 a draw beyond the doubles has probability
#: e^-(1e58).
MAX_NOISE_SCALE = 1e250


def laplace_scale(sensitivity: float, epsilon: float) -> float:
    """sensitivity / epsilon rounded up: the smallest double b with sensitivity / b <= eps
    exactly (an infinite or zero quotient is returned as it is, for the scale checks to
    refuse). Rounded to nearest, the scale was below the real quotient for about half of
    all (sensitivity, eps) pairs, a loss of eps (1 + ~1e-16) (found by review)."""
    b = sensitivity / epsilon
    while 0.0 < b < math.inf and Fraction(sensitivity) > Fraction(epsilon) * Fraction(b):
        b = math.nextafter(b, math.inf)
    return b


def _check_noise_scale(scale: float, epsilon: float) -> None:
    """Refuse, before any noise, a scale above ``MAX_NOISE_SCALE`` or one that underflows
    to 0: noise of infinite scale is inf or NaN, and what a release computes from it fails after the
    noise (uncharged); a scale of 0 is refused by the noise source, inside the release."""
    if not scale <= MAX_NOISE_SCALE:
        raise ValueError(
            f"epsilon = {epsilon:g} is too small for this sensitivity: the noise scale "
            f"{scale:g} exceeds {MAX_NOISE_SCALE:g}, where the noise itself overflows"
        )
    if not scale > 0:
        raise ValueError(
            f"epsilon = {epsilon:g} is too large for this sensitivity: the noise scale "
            "underflows to 0"
        )
    if scale < sys.float_info.min:
        # a subnormal scale has a few bits of precision (1e-323 is 2 units of 5e-324):
        # refused like the Gaussian's, before any noise
        raise ValueError(
            f"epsilon = {epsilon:g} is too large for this sensitivity: the noise scale "
            f"{scale:g} is below the smallest normal double (rescale the data)"
        )


@dataclass(frozen=True, kw_only=True)
class LaplaceMechanism:
    """Laplace mechanism: value + Lap(sensitivity / epsilon) on each coordinate.

    Dwork, McSherry, Nissim & Smith 2006. Privacy: if the L1 distance between the values
    of neighbouring data sets is at most ``sensitivity``, the ratio of output densities
    is at most exp(eps * ||f(x) - f(x')||_1 / sensitivity) <= e^eps, so eps-DP.
    """

    epsilon: float
    sensitivity: float
    neighbours: Neighbours | str = Neighbours.SUBSTITUTE
    name: str = "laplace"

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        object.__setattr__(self, "sensitivity", check_positive(self.sensitivity, "sensitivity"))
        object.__setattr__(self, "neighbours", _neighbours(self.neighbours))
        _check_noise_scale(self.scale, self.epsilon)

    @functools.cached_property
    def scale(self) -> float:
        return laplace_scale(self.sensitivity, self.epsilon)

    @property
    def variance(self) -> float:
        return 2.0 * self.scale**2

    def noise_distribution(self) -> Any:
        from scipy import stats

        return stats.laplace(loc=0.0, scale=self.scale)

    def epsilon_for(self, d_in: float) -> float:
        """The eps spent when neighbouring values differ by ``d_in`` in L1."""
        return check_positive(d_in, "d_in", allow_zero=True) / self.scale

    def guarantee(self, *, simulation: bool = False, **details: Any) -> Guarantee:
        return Guarantee(
            epsilon=self.epsilon,
            delta=0.0,
            neighbours=self.neighbours,  # type: ignore[arg-type]
            mechanism=self.name,
            sensitivity=self.sensitivity,
            sensitivity_norm="L1",
            simulation=simulation,
            details={"scale": self.scale, **details},
        )

    def release(self, value: Any, rng: Any = None) -> Noisy:
        src = noise_source(rng)
        v = check_array(value, "value", ndim=None)
        return Noisy(src.laplace(v, self.scale), self.guarantee(simulation=src.simulation))


def classic_gaussian_sigma(epsilon: float, delta: float, sensitivity: float) -> float:
    """sigma = sqrt(2 ln(1.25/delta)) * sensitivity / epsilon (Dwork & Roth 2014, Thm A.1).

    The proof holds for epsilon < 1 only.
    """
    eps = check_epsilon(epsilon)
    dlt = check_delta(delta)
    sens = check_positive(sensitivity, "sensitivity")
    if not eps < 1.0:
        raise ValueError(f"epsilon must be < 1 for the classic Gaussian calibration, got {eps}")
    if dlt == 0:
        raise ValueError("delta must be > 0 for the Gaussian mechanism")
    return math.sqrt(2.0 * math.log(1.25 / dlt)) * sens / eps


def _analytic_delta_terms(sigma: float, epsilon: float, sensitivity: float) -> tuple[float, float]:
    """The two terms Phi(a) and e^eps Phi(b) of Balle & Wang 2018, Thm 8 (log-CDFs)."""
    from scipy import special

    a = sensitivity / (2.0 * sigma) - epsilon * sigma / sensitivity
    b = -sensitivity / (2.0 * sigma) - epsilon * sigma / sensitivity
    return float(special.ndtr(a)), math.exp(epsilon + float(special.log_ndtr(b)))


def _analytic_delta(sigma: float, epsilon: float, sensitivity: float) -> float:
    """delta(sigma) of Balle & Wang 2018, Thm 8, evaluated with log-CDFs for stability."""
    p, q = _analytic_delta_terms(sigma, epsilon, sensitivity)
    return p - q


# Relative error allowed for each term of delta(sigma) when certifying the returned
# sigma: the difference p - q cancels (e.g. eps=0.01, delta=1e-15 loses ~5 digits), so the
# certificate is p - q + _DELTA_RTOL * (p + q) <= delta, not p - q <= delta.
_DELTA_RTOL = 1e-12

#: The largest eps of the analytic calibration: beyond it the rounding of the terms (of
#: size e^eps) exceeds delta (at eps = 1e20 the computed sigma had delta 1), and at 1e308
#: e^eps overflowed. Above it, refused with a one-line error naming epsilon.
MAX_ANALYTIC_EPSILON = 1e12
_LOG_MAX = math.log(sys.float_info.max)  # exp of it is finite
_LOG_TINY = math.log(sys.float_info.min)  # the smallest normal double


def check_analytic_epsilon(epsilon: float) -> float:
    """``epsilon``, or a one-line refusal above :data:`MAX_ANALYTIC_EPSILON` (whatever the
    sensitivity: a public check releases can make before reading the data)."""
    eps = check_epsilon(epsilon)
    if eps > MAX_ANALYTIC_EPSILON:
        raise ValueError(
            f"epsilon must be at most {MAX_ANALYTIC_EPSILON:g} for the analytic Gaussian "
            f"calibration (beyond it the rounding of its terms exceeds delta), got {eps:g}"
        )
    return eps


def analytic_gaussian_sigma(epsilon: float, delta: float, sensitivity: float) -> float:
    """The smallest sigma for which N(0, sigma^2) noise is (eps, delta)-DP.

    Analytic Gaussian mechanism (Balle & Wang 2018, Thm 8): the mechanism is
    (eps, delta)-DP iff Phi(D/2s - eps s/D) - e^eps Phi(-D/2s - eps s/D) <= delta. The left
    side decreases in s, so the tight sigma is found by root bracketing; the returned
    value is then raised until the condition holds even after allowing a relative error
    of 1e-12 in each of the two (cancelling) terms, so it is at most ~1e-9 above the
    exact root. eps above ``MAX_ANALYTIC_EPSILON``, and a sigma beyond the normal doubles
    (overflow, or underflow below the smallest normal), are refused with a one-line
    ``ValueError`` naming the arguments (public: no data involved).
    """
    from scipy import optimize

    eps = check_epsilon(epsilon)
    dlt = check_delta(delta)
    sens = check_positive(sensitivity, "sensitivity")
    if dlt == 0:
        raise ValueError("delta must be > 0 for the Gaussian mechanism")
    check_analytic_epsilon(eps)

    def excess(log_sigma: float) -> float:
        return _analytic_delta(math.exp(log_sigma), eps, sens) - dlt

    # The bracket stays where the terms are computed without overflow or underflow: sigma
    # a normal double with 2 sigma and eps sigma finite. A root beyond it is refused.
    log_cap = _LOG_MAX - math.log(2.0 * max(1.0, eps))
    overflow = ValueError(
        f"sensitivity = {sens:g} is too large for epsilon = {eps:g}: the noise scale "
        "overflows (rescale the data)"
    )
    lo = min(max(math.log(sens) - 10.0, _LOG_TINY), log_cap)
    hi = min(math.log(sens) + 10.0, log_cap)
    while excess(lo) < 0:
        if lo <= _LOG_TINY:
            raise ValueError(
                f"sensitivity = {sens:g} is too small for epsilon = {eps:g}: the noise "
                "scale is below the smallest normal double (rescale the data)"
            )
        lo = max(lo - 10.0, _LOG_TINY)
    while excess(hi) > 0:
        if hi >= log_cap:
            raise overflow
        hi = min(hi + 10.0, log_cap)
    root = optimize.brentq(excess, lo, hi, xtol=1e-12, rtol=1e-12)
    sigma = math.exp(root)

    def certified(s: float) -> bool:
        p, q = _analytic_delta_terms(s, eps, sens)
        return p - q + _DELTA_RTOL * (p + q) <= dlt

    step = 1e-13
    while not certified(sigma):
        sigma = math.nextafter(sigma * (1.0 + step), math.inf)
        step *= 2.0
    if not sigma <= math.exp(log_cap):
        raise overflow
    return sigma


def analytic_gaussian_epsilon(sigma: float, delta: float, sensitivity: float) -> float:
    """The smallest eps for which N(0, sigma^2) noise is (eps, delta)-DP; the inverse of
    :func:`analytic_gaussian_sigma`.

    Balle & Wang 2018, Thm 8: delta(eps) = Phi(D/2s - eps s/D) - e^eps Phi(-D/2s - eps s/D)
    decreases in eps, so the root is bracketed and found by Brent's method, then raised
    until the condition holds with the same certificate as :func:`analytic_gaussian_sigma`
    (a relative error of 1e-12 allowed in each term). Returns 0.0 if sigma is already
    (0, delta)-DP, and ``math.inf`` if no eps up to 1e12 is enough (sigma far below the
    sensitivity at this delta; beyond 1e12 the two terms' rounding could exceed delta).
    """
    from scipy import optimize

    s = check_positive(sigma, "sigma")
    dlt = check_delta(delta)
    sens = check_positive(sensitivity, "sensitivity")
    if dlt == 0:
        raise ValueError("delta must be > 0 for the Gaussian mechanism")

    def certified(e: float) -> bool:
        p, q = _analytic_delta_terms(s, e, sens)
        return p - q + _DELTA_RTOL * (p + q) <= dlt

    if certified(0.0):
        return 0.0
    hi = 1.0
    while not certified(hi):
        if hi >= 1e12:
            return math.inf
        hi = min(4.0 * hi, 1e12)
    lo = hi / 4.0 if hi > 1.0 else 0.0
    if _analytic_delta(s, lo, sens) > dlt and _analytic_delta(s, hi, sens) < dlt:
        eps = optimize.brentq(
            lambda e: _analytic_delta(s, e, sens) - dlt, lo, hi, xtol=1e-15, rtol=1e-12
        )
    else:  # the crossing is within rounding of an end: keep the certified one
        eps = hi
    step = 1e-13
    while not certified(eps):
        eps = math.nextafter(eps * (1.0 + step), math.inf)
        step *= 2.0
    return float(eps)


@dataclass(frozen=True, kw_only=True)
class GaussianMechanism:
    """Gaussian mechanism: value + N(0, sigma^2) on each coordinate; (eps, delta)-DP.

    ``calibration="analytic"`` (default) uses the tight sigma of Balle & Wang 2018;
    ``"classic"`` the sqrt(2 ln(1.25/delta)) bound (eps < 1 only). Privacy: for L2
    sensitivity D, the privacy loss is Normal with mean D^2/2s^2 and the stated
    calibration bounds its tail by delta.
    """

    epsilon: float
    delta: float
    sensitivity: float
    calibration: str = "analytic"
    neighbours: Neighbours | str = Neighbours.SUBSTITUTE
    name: str = "gaussian"
    sigma: float = field(init=False)

    def __post_init__(self) -> None:
        eps = check_epsilon(self.epsilon)
        dlt = check_delta(self.delta)
        sens = check_positive(self.sensitivity, "sensitivity")
        if self.calibration == "analytic":
            sigma = analytic_gaussian_sigma(eps, dlt, sens)
        elif self.calibration == "classic":
            sigma = classic_gaussian_sigma(eps, dlt, sens)
        else:
            raise ValueError(
                f"calibration must be 'analytic' or 'classic', got {self.calibration!r}"
            )
        object.__setattr__(self, "epsilon", eps)
        object.__setattr__(self, "delta", dlt)
        object.__setattr__(self, "sensitivity", sens)
        object.__setattr__(self, "neighbours", _neighbours(self.neighbours))
        _check_noise_scale(sigma, eps)
        object.__setattr__(self, "sigma", sigma)

    @property
    def variance(self) -> float:
        return self.sigma**2

    def noise_distribution(self) -> Any:
        from scipy import stats

        return stats.norm(loc=0.0, scale=self.sigma)

    def guarantee(self, *, simulation: bool = False, **details: Any) -> Guarantee:
        return Guarantee(
            epsilon=self.epsilon,
            delta=self.delta,
            neighbours=self.neighbours,  # type: ignore[arg-type]
            mechanism=f"{self.name} ({self.calibration})",
            sensitivity=self.sensitivity,
            sensitivity_norm="L2",
            simulation=simulation,
            details={
                **details,
                # after the caller's details: a caller's own "noise" entry (a family name)
                # must not replace the record tight composition reads
                "sigma": self.sigma,
                "noise": gaussian_noise_record(
                    self.sigma,
                    self.sensitivity,
                    self.epsilon,
                    self.delta,
                    Neighbours.parse(self.neighbours).value,
                ),
            },
        )

    def release(self, value: Any, rng: Any = None) -> Noisy:
        src = noise_source(rng)
        v = check_array(value, "value", ndim=None)
        return Noisy(src.gaussian(v, self.sigma), self.guarantee(simulation=src.simulation))


#: The largest scale of the geometric mechanism: beyond it the seeded sampler's geometric
#: draws (numpy's, int64) saturate, both at once from about 1e19, adding no noise at all,
#: and noise of this size on counts is no release anyway.
MAX_GEOMETRIC_SCALE = float(2**52)


@dataclass(frozen=True, kw_only=True)
class GeometricMechanism:
    """Geometric (discrete Laplace) mechanism on integers: P(z) proportional to e^{-eps|z|/D}.

    Ghosh, Roughgarden & Sundararajan 2009. Privacy: as for Laplace, the probability
    ratio at any output is at most exp(eps * ||f(x) - f(x')||_1 / D) <= e^eps. Outputs stay
    integers, so no floating-point issue arises at all.
    """

    epsilon: float
    sensitivity: int
    neighbours: Neighbours | str = Neighbours.SUBSTITUTE
    name: str = "geometric"

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        object.__setattr__(
            self, "sensitivity", check_int(self.sensitivity, "sensitivity", minimum=1)
        )
        object.__setattr__(self, "neighbours", _neighbours(self.neighbours))
        if self.scale > MAX_GEOMETRIC_SCALE:
            raise ValueError(
                f"epsilon = {self.epsilon:g} is too small for the geometric mechanism: its "
                f"noise scale {self.scale:g} exceeds 2^52, where its integers are no longer "
                "drawn exactly (use laplace)"
            )

    @functools.cached_property
    def scale(self) -> float:
        return laplace_scale(self.sensitivity, self.epsilon)

    @property
    def variance(self) -> float:
        """2 q / (1 - q)^2 with q = e^{-1/scale} (1 - q via expm1: exact for large scales)."""
        a = 1.0 / self.scale
        return 2.0 * math.exp(-a) / math.expm1(-a) ** 2

    def noise_distribution(self) -> Any:
        from scipy import stats

        return stats.dlaplace(a=1.0 / self.scale)

    def guarantee(self, *, simulation: bool = False, **details: Any) -> Guarantee:
        return Guarantee(
            epsilon=self.epsilon,
            delta=0.0,
            neighbours=self.neighbours,  # type: ignore[arg-type]
            mechanism=self.name,
            sensitivity=float(self.sensitivity),
            sensitivity_norm="L1",
            simulation=simulation,
            details={"scale": self.scale, **details},
        )

    def release(self, value: Any, rng: Any = None) -> Noisy:
        src = noise_source(rng)
        v = np.asarray(value)
        if not np.issubdtype(v.dtype, np.integer):
            raise TypeError("value must be integer-valued for the geometric mechanism")
        return Noisy(
            src.discrete_laplace(v.astype(np.int64), self.scale),
            self.guarantee(simulation=src.simulation),
        )


@dataclass(frozen=True, kw_only=True)
class ExponentialMechanism:
    """Exponential mechanism over a finite candidate set (McSherry & Talwar 2007).

    Chooses candidate i with probability proportional to exp(eps u_i / (2 D)), where D
    bounds |u(x, r) - u(x', r)| over neighbours x, x' and every candidate r (the utility
    sensitivity); with ``monotonic=True`` (all utilities move in the same direction
    between neighbours) the factor 2 is dropped. Sampled as Gumbel noisy max, which has
    exactly this distribution. Privacy: each unnormalised weight changes by at most
    e^{eps/2} and so does the normaliser, so eps-DP.
    """

    epsilon: float
    sensitivity: float
    monotonic: bool = False
    neighbours: Neighbours | str = Neighbours.SUBSTITUTE
    name: str = "exponential"

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        object.__setattr__(self, "sensitivity", check_positive(self.sensitivity, "sensitivity"))
        if not isinstance(self.monotonic, bool | np.bool_):
            raise TypeError(f"monotonic must be True or False, got {self.monotonic!r}")
        object.__setattr__(self, "monotonic", bool(self.monotonic))
        object.__setattr__(self, "neighbours", _neighbours(self.neighbours))

    @property
    def scale(self) -> float:
        """Temperature: P(i) proportional to exp(u_i / scale)."""
        return (1.0 if self.monotonic else 2.0) * self.sensitivity / self.epsilon

    def probabilities(self, scores: Any) -> np.ndarray:
        """The exact selection probabilities for the utilities ``scores``."""
        from scipy import special

        s = check_array(scores, "scores") / self.scale
        return np.exp(s - special.logsumexp(s))

    def guarantee(self, *, simulation: bool = False, **details: Any) -> Guarantee:
        return Guarantee(
            epsilon=self.epsilon,
            delta=0.0,
            neighbours=self.neighbours,  # type: ignore[arg-type]
            mechanism=self.name,
            sensitivity=self.sensitivity,
            sensitivity_norm="utility",
            simulation=simulation,
            details={"scale": self.scale, "monotonic": self.monotonic, **details},
        )

    def release(self, scores: Any, rng: Any = None) -> Noisy:
        """Index of the chosen candidate."""
        src = noise_source(rng)
        s = check_array(scores, "scores")
        return Noisy(src.gumbel_argmax(s, self.scale), self.guarantee(simulation=src.simulation))


def _rr_keep(epsilon: float, k: int) -> float | None:
    """The largest float keep <= e^eps / (e^eps + k - 1) whose privacy ratios are <= e^eps.

    The float keep is what the sampler uses, so its ratio keep (k-1) / (1-keep) is the eps
    actually achieved, in both directions: keep (k - 1) <= e^eps (1 - keep) (the truth is
    at most e^eps times likelier than another category) and
    (1 - keep) <= e^eps keep (k - 1) (and at least e^-eps times). Rounding to nearest could
    break the first near keep = 1 (1 - keep loses relative precision), so the value is
    stepped down until it holds; at tiny eps (below about 1e-16) the float nearest to
    e^eps / (e^eps + k - 1) can fall below 1/k and break the second, so it is stepped up
    first. Both are checked in 60-digit decimals (keep is exact there, e^eps within 1e-60,
    and a margin of 1e-50 covers both); a ratio of exactly 1 (keep = 1/k exactly, e.g.
    k = 2) passes at any eps. The same test in doubles passed keeps whose ratio exceeded
    e^eps by up to 1e-16 of eps (a review found 454 of 2,000 random (eps, k)). None when
    no float satisfies both (eps too small for this k).
    """
    if epsilon > 1000.0:  # e^eps overflows the decimal context; keep rounds to 1 long before
        return 1.0
    ctx = decimal.Context(prec=60)
    e_eps = ctx.exp(decimal.Decimal(epsilon))
    upper = ctx.multiply(e_eps, decimal.Decimal("1") - _RR_MARGIN)
    lower = ctx.multiply(ctx.divide(1, e_eps), decimal.Decimal("1") + _RR_MARGIN)

    def ratio_ok(keep: float, bound: decimal.Decimal, above: bool) -> bool:
        exact = decimal.Decimal(keep)
        num, den = ctx.multiply(exact, k - 1), ctx.subtract(1, exact)
        if num == den:  # ratio exactly 1: no privacy loss
            return True
        return num >= ctx.multiply(bound, den) if above else num <= ctx.multiply(bound, den)

    keep = 1.0 / (1.0 + (k - 1) * math.exp(-epsilon))
    for _ in range(64):
        if ratio_ok(keep, lower, True):
            break
        keep = math.nextafter(keep, 1.0)
    for _ in range(64):
        if keep >= 1.0:
            return keep
        if ratio_ok(keep, upper, False):
            break
        keep = math.nextafter(keep, 0.0)
    if keep < 1.0 and ratio_ok(keep, upper, False) and ratio_ok(keep, lower, True):
        return keep
    return None


_RR_MARGIN = decimal.Decimal("1e-50")


@dataclass(frozen=True, kw_only=True)
class RandomizedResponse:
    """k-ary randomized response (Warner 1965): a local-DP release of each record.

    Keeps the true category with probability e^eps / (e^eps + k - 1), otherwise reports
    one of the other k - 1 uniformly. Privacy: any output has probability at most
    e^eps/(e^eps+k-1) and at least 1/(e^eps+k-1) whatever the input, a ratio of e^eps;
    so each record's report is eps-DP, and the whole column is eps-DP under substitute.
    (This is the exponential mechanism with utility 1[report = truth] at temperature
    1/eps, i.e. twice the eps the generic exponential-mechanism bound would give.)
    The keep probability is rounded to a float whose own ratio keep (k - 1) / (1 - keep)
    lies within [e^-eps, e^eps]; an epsilon so large that it would round to 1 (no noise at
    all: eps > about 36.7 + ln(k - 1)) is refused, and so is one so small (below about
    1e-16, unless 1/k is a float, e.g. k = 2 or 4) that no float keep has both ratios
    within e^eps.
    """

    epsilon: float
    k: int = 2
    name: str = "randomized response"
    _keep: float = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        object.__setattr__(self, "k", check_int(self.k, "k", minimum=2))
        keep = _rr_keep(self.epsilon, self.k)
        if keep is None:
            raise ValueError(
                f"epsilon={self.epsilon:.6g} too small for randomized response with "
                f"k={self.k}: no float keep probability has both privacy ratios within "
                "e^epsilon (use a larger epsilon)"
            )
        if keep >= 1.0:
            raise ValueError(
                f"epsilon={self.epsilon:.6g} is too large for randomized response with "
                f"k={self.k}: the keep probability rounds to 1 (no noise)"
            )
        object.__setattr__(self, "_keep", keep)

    @property
    def keep_probability(self) -> float:
        return self._keep

    def transition_matrix(self) -> np.ndarray:
        """M[i, j] = P(report j | true i)."""
        p = self.keep_probability
        q = (1.0 - p) / (self.k - 1)
        return np.full((self.k, self.k), q) + np.eye(self.k) * (p - q)

    def guarantee(self, *, simulation: bool = False, **details: Any) -> Guarantee:
        return Guarantee(
            epsilon=self.epsilon,
            delta=0.0,
            neighbours=Neighbours.SUBSTITUTE,
            mechanism=self.name,
            sensitivity=1.0,
            sensitivity_norm="records",
            simulation=simulation,
            details={"k": self.k, "keep_probability": self.keep_probability, **details},
        )

    def release(self, values: Any, rng: Any = None) -> Noisy:
        """``values``: category indices in 0..k-1."""
        v = np.asarray(values)
        if v.size and (not np.issubdtype(v.dtype, np.integer) or v.min() < 0 or v.max() >= self.k):
            raise ValueError(f"values must be category indices in 0..{self.k - 1}")
        src = noise_source(rng)
        out = src.randomized_response(v.astype(np.int64), self.k, self.keep_probability)
        return Noisy(out, self.guarantee(simulation=src.simulation))
