"""Posterior and prior distributions of the conjugate models: Beta, Dirichlet, Normal.

Frozen dataclasses with scipy.stats method names (``mean``, ``var``, ``std``, ``pdf``,
``logpdf``, ``cdf``, ``ppf``, ``interval``, ``rvs``, ``to_scipy``). Parameters are checked
once in ``__post_init__`` with :mod:`dpbayes.privacy.validation`. These objects never draw
random numbers on their own: ``rvs`` delegates to scipy with the caller's ``random_state``.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from scipy import special

from dpbayes.display import PosteriorDisplay, num, nums
from dpbayes.privacy.validation import (
    check_array,
    check_finite,
    check_int,
    check_positive,
    check_probability,
)

__all__ = ["Beta", "Dirichlet", "Distribution", "Normal", "distribution_from_dict"]

_KINDS = ("central", "hdi")


def _check_interval_args(level: Any, kind: Any) -> tuple[float, str]:
    lvl = check_probability(level, "level", open_interval=True)
    if kind not in _KINDS:
        raise ValueError(f"kind must be one of {_KINDS}, got {kind!r}")
    return lvl, str(kind)


def _beta_asymptotic_quantile(a: float, b: float, p: float) -> float:
    """The lower ``p`` quantile of Beta(a, b) for large a + b, where scipy's inversion fails.

    Both a, b >= 1e4: the Normal quantile with the Cornish-Fisher terms of the skewness and
    excess kurtosis (error of order min(a, b)^-3/2 standard deviations). One of them
    smaller: Beta(a, b) with b large is 1 - exp(-G / (b + (a - 1) / 2)) to order b^-2, G ~
    Gamma(a), and its mirror image for a large.
    """
    from scipy import stats

    s = a + b
    if min(a, b) >= 1e4:
        sd = math.sqrt(a * b / (s * s * (s + 1.0)))
        g1 = 2.0 * (b - a) * math.sqrt(s + 1.0) / ((s + 2.0) * math.sqrt(a * b))
        g2 = 6.0 * ((a - b) ** 2 * (s + 1.0) - a * b * (s + 2.0)) / (a * b * (s + 2.0) * (s + 3.0))
        z = float(stats.norm.ppf(p))
        w = z + (z * z - 1) * g1 / 6 + (z**3 - 3 * z) * g2 / 24 - (2 * z**3 - 5 * z) * g1**2 / 36
        return min(1.0, max(0.0, a / s + sd * w))
    if a <= b:
        return -math.expm1(-float(stats.gamma.ppf(p, a)) / (b + (a - 1.0) / 2.0))
    return math.exp(-float(stats.gamma.isf(p, b)) / (a + (b - 1.0) / 2.0))


#: From a + b of about 1e17 scipy's regularised incomplete beta function is not finite or is
#: wrong (0 at the 2.5% quantile of Beta(1e19, 3e19)); beyond this limit, far inside the
#: asymptotic regime, the quantiles are the asymptotic ones.
_BETAINC_LIMIT = 1e15


def _beta_quantile(a: float, b: float, p: float, upper: bool = False) -> float:
    """The lower ``p`` quantile of Beta(a, b) (``upper``: the upper one, isf).

    scipy's inversion returns points whose cdf is 1 from a + b of about 1e9 with a
    small a (Beta(1e3, 1e9): both ends of the 95% interval at 1.9e-6, where the cdf is 1),
    and reversed intervals beyond 1e19. Its answer is kept when the regularised incomplete
    beta function confirms it (to 1e-9); otherwise the root of that function is bracketed
    around the asymptotic quantile (:func:`_beta_asymptotic_quantile`), which is the answer
    from a + b = :data:`_BETAINC_LIMIT` on (its error is then below 1e-6 standard
    deviations).
    """
    from scipy import optimize, stats

    if not 0.0 < p < 1.0:
        return float(stats.beta.isf(p, a, b) if upper else stats.beta.ppf(p, a, b))
    tail = special.betaincc if upper else special.betainc

    def miss(x: float) -> float:
        return float(tail(a, b, x)) - p

    x0 = _beta_asymptotic_quantile(a, b, 1.0 - p if upper else p)
    if a + b >= _BETAINC_LIMIT:
        return x0
    x = float(stats.beta.isf(p, a, b) if upper else stats.beta.ppf(p, a, b))
    if 0.0 <= x <= 1.0 and abs(miss(x)) <= 1e-9 * max(p, 1e-3):
        return x
    sd = math.sqrt(a * b / ((a + b) ** 2 * (a + b + 1.0)))
    for k in (1.0, 10.0, 100.0):
        lo, hi = max(0.0, x0 - k * sd), min(1.0, x0 + k * sd)
        f_lo, f_hi = miss(lo), miss(hi)
        if math.isfinite(f_lo) and math.isfinite(f_hi) and f_lo * f_hi < 0:
            root = float(optimize.brentq(miss, lo, hi, xtol=1e-300, rtol=1e-15, maxiter=500))
            if abs(miss(root)) <= 1e-9 * max(p, 1e-3):
                return root
    return x0


def _beta_hdi(a: float, b: float, level: float) -> tuple[float, float]:
    """Narrowest interval of probability ``level`` under Beta(a, b).

    The interval ``[ppf(p), ppf(p + level)]`` has width ``w(p)`` with
    ``w'(p) = 1/f(hi) - 1/f(lo)``, so the optimum over the lower tail mass ``p`` has equal
    density at both ends. For a > 1, b > 1 the density is log-concave, ``w`` is convex and
    the root of ``log f(lo) - log f(hi)`` in ``p`` is found by Brent's method. If the density
    is monotone (a <= 1 < b or b <= 1 < a) the interval touches the mode at the boundary.
    For a, b <= 1 the density is convex, every stationary point of ``w`` is a maximum, and
    the narrowest interval is the narrower of the two one-sided ones (central if uniform).
    """
    from scipy import optimize, stats

    dist = stats.beta(a, b)
    tail = 1.0 - level
    if a <= 1.0 and b <= 1.0:
        if a == 1.0 and b == 1.0:
            return tail / 2, 1 - tail / 2
        left = (0.0, _beta_quantile(a, b, level))
        right = (_beta_quantile(a, b, level, upper=True), 1.0)
        return left if left[1] - left[0] <= right[1] - right[0] else right
    if a <= 1.0:  # decreasing density, mode at 0
        return 0.0, _beta_quantile(a, b, level)
    if b <= 1.0:  # increasing density, mode at 1
        return _beta_quantile(a, b, level, upper=True), 1.0

    if a > b:  # solve the mirror image so that the lower tail mass p is the small one
        lo, hi = _beta_hdi(b, a, level)
        return 1.0 - hi, 1.0 - lo

    def gap(log_p: float) -> float:
        p = min(math.exp(log_p), tail)
        lo = _beta_quantile(a, b, p)
        hi = _beta_quantile(a, b, tail - p, upper=True)  # = ppf(p + level), in the upper tail
        if 0.0 < lo < hi < 1.0:
            # log f(lo) - log f(hi) without log B(a, b) or any large log: each term is a
            # parameter times the log of a ratio near 1 (exact differences), so it keeps its
            # digits at a + b ~ 1e19, where logpdf's terms cancel to nothing
            r = (lo - hi) / hi
            log_ratio = math.log(lo / hi) if r < -0.5 else math.log1p(r)
            g = (a - 1.0) * log_ratio + (b - 1.0) * math.log1p((hi - lo) / (1.0 - hi))
        else:
            g = float(dist.logpdf(lo) - dist.logpdf(hi))
        return -1e300 if math.isnan(g) else float(np.clip(g, -1e300, 1e300))

    # The lower tail mass can be astronomically small (a close to 1, huge b), so search
    # over log p, bracketing from above; below p = 1e-300 the lower end is 0 to machine
    # precision.
    hi_lp = math.log(tail)
    for lo_lp in (hi_lp - 3.0, hi_lp - 25.0, -100.0, -300.0, math.log(1e-300)):
        if lo_lp < hi_lp and gap(lo_lp) < 0:
            break
    else:
        return 0.0, _beta_quantile(a, b, level)
    log_p = optimize.brentq(gap, lo_lp, hi_lp, xtol=1e-12, rtol=1e-14, maxiter=500)
    p = min(math.exp(log_p), tail)
    return _beta_quantile(a, b, p), _beta_quantile(a, b, tail - p, upper=True)


class Distribution(PosteriorDisplay, ABC):
    """Common behaviour of the distributions (JSON round trip, scipy delegation, display)."""

    family: ClassVar[str]

    def _display_title(self) -> str:
        parts = [
            f"{k}={nums(v) if isinstance(v, np.ndarray) else num(v, 6)}"
            for k, v in self.params.items()
        ]
        return f"{type(self).__name__}({', '.join(parts)})"

    @property
    @abstractmethod
    def params(self) -> dict[str, Any]:
        """The distribution's parameters by name."""

    @abstractmethod
    def to_scipy(self) -> Any:
        """The equivalent frozen scipy.stats distribution."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable description: ``{"family": ..., <parameters>}``."""
        out: dict[str, Any] = {"family": self.family}
        for key, value in self.params.items():
            out[key] = value.tolist() if isinstance(value, np.ndarray) else float(value)
        return out

    def mean(self) -> Any:
        return self.to_scipy().mean()

    def var(self) -> Any:
        return self.to_scipy().var()

    def std(self) -> Any:
        return np.sqrt(self.var())

    def rvs(self, size: Any = None, random_state: Any = None) -> Any:
        """Draw samples through scipy; pass ``random_state`` (int or Generator) to reproduce."""
        return self.to_scipy().rvs(size=size, random_state=random_state)


@dataclass(frozen=True)
class Beta(Distribution):
    """Beta(a, b) on [0, 1], density x^(a-1) (1-x)^(b-1) / B(a, b); a, b > 0 and finite."""

    a: float
    b: float
    family: ClassVar[str] = "beta"

    def __post_init__(self) -> None:
        object.__setattr__(self, "a", check_positive(self.a, "a"))
        object.__setattr__(self, "b", check_positive(self.b, "b"))

    @property
    def params(self) -> dict[str, Any]:
        return {"a": self.a, "b": self.b}

    def to_scipy(self) -> Any:
        from scipy import stats

        return stats.beta(self.a, self.b)

    def mean(self) -> float:
        return self.a / (self.a + self.b)

    def var(self) -> float:
        s = self.a + self.b
        return self.a * self.b / (s * s * (s + 1.0))

    def pdf(self, x: Any) -> Any:
        from scipy import stats

        return stats.beta.pdf(x, self.a, self.b)

    def logpdf(self, x: Any) -> Any:
        from scipy import stats

        return stats.beta.logpdf(x, self.a, self.b)

    def cdf(self, x: Any) -> Any:
        from scipy import stats

        return stats.beta.cdf(x, self.a, self.b)

    def sf(self, x: Any) -> Any:
        from scipy import stats

        return stats.beta.sf(x, self.a, self.b)

    def ppf(self, q: Any) -> Any:
        qs = np.asarray(q, dtype=float)
        out = np.vectorize(lambda v: _beta_quantile(self.a, self.b, float(v)), otypes=[float])(qs)
        return float(out) if out.ndim == 0 else out

    def interval(self, level: float = 0.95, kind: str = "central") -> tuple[float, float]:
        """Credible interval of probability ``level``: equal-tailed or highest-density."""

        lvl, kind = _check_interval_args(level, kind)
        if kind == "hdi":
            return _beta_hdi(self.a, self.b, lvl)
        tail = (1.0 - lvl) / 2
        return _beta_quantile(self.a, self.b, tail), _beta_quantile(
            self.a, self.b, tail, upper=True
        )


@dataclass(frozen=True, init=False)
class Normal(Distribution):
    """Normal(mean, sd) with finite mean and sd > 0.

    Construct with ``Normal(mean, sd)``; the mean is stored as ``loc`` (scipy's name)
    because ``mean()`` is the method.
    """

    loc: float
    sd: float
    family: ClassVar[str] = "normal"

    def __init__(self, mean: float, sd: float) -> None:
        object.__setattr__(self, "loc", check_finite(mean, "mean"))
        object.__setattr__(self, "sd", check_positive(sd, "sd"))

    @property
    def params(self) -> dict[str, Any]:
        return {"mean": self.loc, "sd": self.sd}

    def to_dict(self) -> dict[str, Any]:
        return {"family": self.family, "mean": self.loc, "sd": self.sd}

    def to_scipy(self) -> Any:
        from scipy import stats

        return stats.norm(self.loc, self.sd)

    def mean(self) -> float:
        return self.loc

    def var(self) -> float:
        return self.sd * self.sd

    def std(self) -> float:
        return self.sd

    def pdf(self, x: Any) -> Any:
        from scipy import stats

        return stats.norm.pdf(x, self.loc, self.sd)

    def logpdf(self, x: Any) -> Any:
        from scipy import stats

        return stats.norm.logpdf(x, self.loc, self.sd)

    def cdf(self, x: Any) -> Any:
        from scipy import stats

        return stats.norm.cdf(x, self.loc, self.sd)

    def sf(self, x: Any) -> Any:
        from scipy import stats

        return stats.norm.sf(x, self.loc, self.sd)

    def ppf(self, q: Any) -> Any:
        from scipy import stats

        return stats.norm.ppf(q, self.loc, self.sd)

    def interval(self, level: float = 0.95, kind: str = "central") -> tuple[float, float]:
        """Credible interval of probability ``level`` (central = highest-density here)."""
        from scipy import stats

        lvl, _ = _check_interval_args(level, kind)
        half = self.sd * float(stats.norm.isf((1.0 - lvl) / 2))
        return self.loc - half, self.loc + half


@dataclass(frozen=True, eq=False)
class Dirichlet(Distribution):
    """Dirichlet(alpha) on the (m-1)-simplex, m >= 2, alpha_i > 0 and finite.

    ``alpha`` is stored as a read-only float64 array; equality and hashing use its values.
    """

    alpha: np.ndarray
    family: ClassVar[str] = "dirichlet"

    def __post_init__(self) -> None:
        arr = check_array(self.alpha, "alpha", ndim=1, min_size=2, positive=True).copy()
        arr.flags.writeable = False
        object.__setattr__(self, "alpha", arr)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Dirichlet):
            return NotImplemented
        return bool(np.array_equal(self.alpha, other.alpha))

    def __hash__(self) -> int:
        return hash(("dirichlet", tuple(self.alpha.tolist())))

    def __repr__(self) -> str:
        return f"Dirichlet(alpha={self.alpha.tolist()!r})"

    @property
    def m(self) -> int:
        """Number of categories."""
        return int(self.alpha.size)

    @property
    def params(self) -> dict[str, Any]:
        return {"alpha": self.alpha}

    def to_scipy(self) -> Any:
        from scipy import stats

        return stats.dirichlet(self.alpha)

    def mean(self) -> np.ndarray:
        return self.alpha / self.alpha.sum()

    def var(self) -> np.ndarray:
        a0 = self.alpha.sum()
        mu = self.alpha / a0
        return mu * (1.0 - mu) / (a0 + 1.0)

    def std(self) -> np.ndarray:
        return np.sqrt(self.var())

    def marginal(self, i: int) -> Beta:
        """Marginal of component ``i``: Beta(alpha_i, alpha_0 - alpha_i)."""
        idx = check_int(i, "i", minimum=-self.m)
        if idx >= self.m:
            raise ValueError(f"i must be < {self.m}, got {idx}")
        ai = float(self.alpha[idx])
        return Beta(ai, float(self.alpha.sum()) - ai)

    def logpdf(self, x: Any) -> Any:
        """Log density at simplex points: ``x`` of shape (m,) or (k, m), rows summing to 1.

        Points off the simplex (negative entries or rows not summing to 1 within 1e-9)
        have log density -inf.
        """
        pts = np.asarray(x, dtype=float)
        if pts.shape[-1:] != (self.m,):
            raise ValueError(f"x must have last dimension {self.m}, got shape {pts.shape}")
        log_norm = float(np.sum(special.gammaln(self.alpha)) - special.gammaln(self.alpha.sum()))
        with np.errstate(divide="ignore", invalid="ignore"):
            val = np.sum(special.xlogy(self.alpha - 1.0, pts), axis=-1) - log_norm
        on_simplex = np.all(pts >= 0, axis=-1) & (np.abs(pts.sum(axis=-1) - 1.0) <= 1e-9)
        out = np.where(on_simplex, val, -np.inf)
        return float(out) if out.ndim == 0 else out

    def pdf(self, x: Any) -> Any:
        return np.exp(self.logpdf(x))

    def interval(self, level: float = 0.95, kind: str = "central") -> np.ndarray:
        """Per-component marginal credible intervals, shape (m, 2)."""
        lvl, kind = _check_interval_args(level, kind)
        return np.array([self.marginal(i).interval(lvl, kind) for i in range(self.m)])

    def rvs(self, size: Any = None, random_state: Any = None) -> Any:
        """Draw simplex points via scipy: shape (m,) if ``size`` is None, else ``size + (m,)``."""
        from scipy import stats

        if size is None:
            return stats.dirichlet.rvs(self.alpha, size=1, random_state=random_state)[0]
        return stats.dirichlet.rvs(self.alpha, size=size, random_state=random_state)


_FAMILIES: dict[str, type[Distribution]] = {"beta": Beta, "dirichlet": Dirichlet, "normal": Normal}


def distribution_from_dict(d: dict[str, Any]) -> Distribution:
    """Rebuild a distribution from :meth:`Distribution.to_dict` output."""
    if not isinstance(d, dict) or "family" not in d:
        raise TypeError("d must be a dict with a 'family' key")
    family = d["family"]
    if family == "beta":
        return Beta(d["a"], d["b"])
    if family == "normal":
        return Normal(d["mean"], d["sd"])
    if family == "dirichlet":
        return Dirichlet(np.asarray(d["alpha"], dtype=float))
    raise ValueError(f"d['family'] must be one of {sorted(_FAMILIES)}, got {family!r}")
