"""The noise-aware coin posterior, fast: a Beta mixture over the true count (issue 10).

Bernstein & Sheldon 2018 (§4, Beta-Binomial) sample this posterior by Gibbs; here it is
exact. Given a release y of the success count s of n public trials (noise kind, scale,
truncation to [0, n]),

    p(theta | y) = sum_x w_x Beta(theta; a + x, b + n - x),
    w_x propto BetaBin(x; n, a, b) * P(y | s = x),

a "ladder" mixture (a_x = a + x, a_x + b_x = a + b + n). Weights below 1e-12 of the
largest are pruned (only the outermost: the kept rungs stay consecutive), and at the upper
end only where the rung's share w_x (a + x) of the mean is also below 1e-12 of the largest
share (so a tiny mean keeps its digits). The quantiles
solve F(t) = q for both ends of an interval at once by safeguarded Newton steps on the
ladder CDF

    F(t) = I_t(a_0, b_0) - sum_j T_j(t) R_j,   R_j = sum_{k > j} w_k,
    T_j(t) = t^(a_0 + j) (1 - t)^(b_0 - j - 1) Gamma(s) / (Gamma(a_0 + j + 1) Gamma(b_0 - j)),

(from I_t(a + 1, b - 1) = I_t(a, b) - T(t)), one vectorised exp per step over the
window of j where T_j (a binomial-like pmf) is not negligible; the log-gamma
tables of the prior predictive are cached per (a, b, n). No scipy.stats objects and no
validation inside the loop: the inputs are checked once, when the release is read. The
Newton loop runs compiled by numba (:mod:`._kernels`, compiled once and cached on disk).
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

import numpy as np
from scipy import special

from dpbayes.models.mixtures import BetaMixture
from dpbayes.privacy.validation import check_probability
from dpbayes.release.counts._kernels import kernels, ladder_moments

__all__ = ["CountBetaMixture", "coin_count_posterior"]

PRUNE = 1e-12  # relative weight below which a rung is dropped (from the ends only)
#: The prior parameters the posterior is computed for. Above 1e8 the incomplete beta's
#: terms a log t + b log(1 - t) - log B(a, b) cancel and its upper branch's 1 - t loses the
#: digits of t (a review: at Beta(1, 1e17) an interval end with CDF 0.972 for 0.95, at
#: Beta(1e17, 1e17) NaN); up to 1e8 they cost at most about 1e-8. The tests check the
#: posterior against 160-digit arithmetic over this range.
MIN_PARAMETER, MAX_PARAMETER = 1e-300, 1e8
_LOG_PRUNE = math.log(PRUNE)


@lru_cache(maxsize=32)
def _tables(a: float, b: float, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Read-only tables for x = 0..n: log BetaBin(x; n, a, b) up to a constant, the ladder's
    log Gamma(a + b + n) - log Gamma(a + x + 1) - log Gamma(b + n - x), (j, j^2, j^3) and
    log(a + x)."""
    x = np.arange(n + 1, dtype=float)
    # log C(n, x) + log B(a + x, b + n - x) and -log B(a + x + 1, b + n - x) - log(a + b + n)
    # (= lgamma(a + b + n) - lgamma(a + x + 1) - lgamma(b + n - x)): scipy's betaln keeps
    # its precision for arguments up to 1e100, where differences of log-gammas cancel
    # (they lost every digit of the weights at b = 1e17)
    log_choose = -special.gammaln(x + 1.0) - special.gammaln(n - x + 1.0)
    rest = b + (n - x)  # not (b + n) - x: at b = 1e-300 that rounds to 0
    prior = log_choose + special.betaln(a + x, rest)
    log_c = -special.betaln(a + x + 1.0, rest) - math.log(a + b + n)
    powers = np.stack([x, x * x, x * x * x])
    log_ax = np.log(a + x)
    for arr in (prior, log_c, powers, log_ax):
        arr.setflags(write=False)
    return prior, log_c, powers, log_ax


class CountBetaMixture(BetaMixture):
    """A :class:`BetaMixture` Beta(a + x, b + n - x), x = x0..x1, with a fast interval/ppf.

    Built by :func:`coin_count_posterior` (validated there once); everything else
    (``cdf``, ``pdf``, ``mean``, ``rvs``, ``to_dict``) is the parent's.
    """

    _wb: np.ndarray
    _betaln: float
    _moments: tuple[float, float, float, float]

    def __init__(
        self,
        weights: np.ndarray,
        a0: float,
        b0: float,
        log_c: np.ndarray,
        powers: np.ndarray,
    ) -> None:
        """Trusted constructor: ``weights`` of Beta(a0 + j, b0 - j), j = 0..K-1, normalised;
        ``log_c`` the ladder's constants (length K - 1); ``powers`` (j, j^2, j^3) rows."""
        k = weights.size
        j = powers[0]
        object.__setattr__(self, "weights", weights)
        object.__setattr__(self, "a", a0 + j)
        object.__setattr__(self, "b", b0 - j)
        if k == 1:
            object.__setattr__(self, "_ladder", None)
            return
        # R_j = sum_{k > j} w_k, summed from the small end (no cancellation)
        tail = np.ascontiguousarray(np.cumsum(weights[:0:-1])[::-1])
        object.__setattr__(self, "_ladder", (a0, b0, j[:-1], log_c, tail, weights))
        # mean, sd, skewness and the sd of the components' means (a_x / s), from the
        # moments of j (the same function as the compiled path's)
        e1, e2, e3 = (float(v) for v in powers @ weights)
        m1, sd, skew, sd_between = (float(v) for v in ladder_moments(a0, b0, e1, e2, e3))
        object.__setattr__(self, "_moments", (m1, sd, skew, sd_between))
        object.__setattr__(self, "_wb", self.b[1:] * weights[1:])
        object.__setattr__(self, "_betaln", float(special.betaln(a0, b0)))

    @classmethod
    def _from_parts(
        cls,
        parts: tuple[Any, ...],
        log_c: np.ndarray,
        j: np.ndarray,
    ) -> CountBetaMixture:
        """Trusted constructor from the compiled ``_prepare`` output (K >= 2)."""
        _, w, av, bv, tail, wb, mom = parts
        self = cls.__new__(cls)
        a0, b0 = float(av[0]), float(bv[0])
        object.__setattr__(self, "weights", w)
        object.__setattr__(self, "a", av)
        object.__setattr__(self, "b", bv)
        object.__setattr__(self, "_ladder", (a0, b0, j, log_c, tail, w))
        object.__setattr__(self, "_moments", (mom[0], mom[1], mom[2], mom[3]))
        object.__setattr__(self, "_wb", wb)
        object.__setattr__(self, "_betaln", float(special.betaln(a0, b0)))
        return self

    def _ppf_many(self, qs: np.ndarray) -> np.ndarray:
        """Quantiles at probabilities ``qs`` (each in (0, 1)): Newton steps from the
        Cornish-Fisher start (mean, sd, skewness of the mixture; or the weights' own
        quantile when they make most of the spread), safeguarded by bisection;
        stops once a step is below 3e-5 posterior sds (the error after a Newton step of
        size h is ~ h^2 / sd: about 1e-9 sd). Compiled (:mod:`._kernels`)."""
        if self._ladder is None:
            return np.asarray(special.betaincinv(self.a[0], self.b[0], qs))
        a0, b0, j, log_c, tail, w = self._ladder
        wb, lbeta = self._wb, self._betaln
        mu, sd, skew, sd_between = self._moments
        zs = special.ndtri(qs)
        return np.asarray(
            kernels()[1](qs, a0, b0, j, log_c, tail, wb, w, lbeta, mu, sd, skew, sd_between, zs)
        )

    def ppf(self, q: Any) -> Any:
        qs = np.asarray(q, dtype=float)
        if np.any((qs < 0) | (qs > 1)) or np.any(np.isnan(qs)):
            raise ValueError("q must be in [0, 1]")
        flat = qs.ravel()
        out = np.where(flat <= 0.0, 0.0, 1.0)
        inner = (flat > 0.0) & (flat < 1.0)
        if inner.any():
            out[inner] = self._ppf_many(flat[inner])
        out = out.reshape(qs.shape)
        return float(out) if out.ndim == 0 else out

    def interval(self, level: float = 0.95, kind: str = "central") -> tuple[float, float]:
        """Central credible interval of probability ``level`` (both ends in one solve)."""
        if kind != "central":
            raise ValueError(f"kind must be 'central' for a mixture, got {kind!r}")
        lvl = check_probability(level, "level", open_interval=True)
        lo, hi = self._ppf_many(np.array([(1.0 - lvl) / 2, (1.0 + lvl) / 2]))
        return float(lo), float(hi)


def coin_count_posterior(a: float, b: float, n: int, log_lik: np.ndarray) -> CountBetaMixture:
    """Exact p(theta | release) for a Beta(a, b) coin of n trials, given log P(y | s = x).

    ``log_lik`` has length n + 1 (x = 0..n). Weights below ``PRUNE`` of the largest are
    dropped from both ends (at the upper end only where their share of the mean is too).
    """
    if not (MIN_PARAMETER <= a <= MAX_PARAMETER and MIN_PARAMETER <= b <= MAX_PARAMETER):
        raise ValueError(
            f"the noise-aware coin posterior needs prior parameters in [{MIN_PARAMETER:g}, "
            f"{MAX_PARAMETER:g}] (where its incomplete beta functions keep their precision), got "
            f"Beta({a:g}, {b:g}); the naive posterior is rel.posterior"
        )
    prior, log_c, powers, log_ax = _tables(float(a), float(b), int(n))
    # sum, prune, normalise, tail sums and moments in one compiled pass
    parts = kernels()[0](prior, log_lik, log_ax, float(a), float(b), int(n), _LOG_PRUNE)
    if not math.isfinite(float(parts[6][0])):
        raise ValueError("the release has probability 0 under every true count")
    x0, k = int(parts[0]), int(parts[1].size)
    if k > 1:
        return CountBetaMixture._from_parts(parts, log_c[x0 : x0 + k - 1], powers[0, : k - 1])
    return CountBetaMixture(parts[1], a + x0, b + (n - x0), log_c[x0:x0], powers[:, :1])
