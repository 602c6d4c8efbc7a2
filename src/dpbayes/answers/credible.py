"""The posterior of a query's true answer given the history: credible intervals and tests.

Paper 000 §4-5: with an uninformative (flat) prior the true answer is q_hat - E, where E is
the BLUE's error (a weighted sum of Laplaces, plus a Normal when some answers are Gaussian:
:class:`LaplaceSum`). E is symmetric and unimodal (log-concave), so the narrowest credible
interval at level p is centred on q_hat (Algorithm 3).

Beyond the paper, ``support="nonnegative-integers"`` adds the knowledge that the answer is
a count: a flat prior on {0, 1, 2, ...} for the answer (a query with non-negative integer
coefficients), giving the proper posterior P(answer = t) proportional to f_E(q_hat - t),
t >= 0; its narrowest credible set is the highest-posterior-mass run of integers. (This is
a flat prior on the answer, not on the cells: a flat prior on m cells would put a prior
proportional to C(t+m-1, m-1) on their sum and pull the answer upwards.)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dpbayes import display
from dpbayes.answers.blue import BLUE
from dpbayes.answers.error_distribution import LaplaceSum
from dpbayes.privacy.validation import check_finite, check_positive, check_probability

__all__ = ["SUPPORTS", "Posterior"]

SUPPORTS = ("real", "nonnegative-integers")
_MAX_INTEGER_POINTS = 400_000


@dataclass
class Posterior:
    """Posterior of a target query's answer (paper 000 §4): answer = estimate - E.

    Not a release: it is computed from answers already released (post-processing), so it
    carries no new privacy cost.
    """

    estimate: float
    variance: float
    error: LaplaceSum
    weights: np.ndarray
    support: str = "real"
    _values: np.ndarray | None = field(default=None, repr=False)
    _pmf: np.ndarray | None = field(default=None, repr=False)

    @classmethod
    def from_blue(
        cls,
        blue: BLUE,
        *,
        method: str = "auto",
        accuracy: float = 1e-6,
        support: str = "real",
        rng: Any = None,
        coefficients: np.ndarray | None = None,
        error: LaplaceSum | None = None,
    ) -> Posterior:
        """The posterior from a BLUE; ``error``: its error distribution if already computed
        (``LaplaceSum(blue.scales, gaussian_sd=blue.gaussian_sd, ...)``), else it is
        computed here."""
        if support not in SUPPORTS:
            raise ValueError(f"support must be one of {SUPPORTS}, got {support!r}")
        if support == "nonnegative-integers" and coefficients is not None:
            if np.any(coefficients < 0) or np.any(coefficients != np.round(coefficients)):
                raise ValueError(
                    "support='nonnegative-integers' needs a query with non-negative integer "
                    "coefficients (a count)"
                )
        err = (
            error
            if error is not None
            else LaplaceSum(
                blue.scales,
                gaussian_sd=blue.gaussian_sd,
                method=method,
                accuracy=accuracy,
                rng=rng,
            )
        )
        post = cls(blue.estimate, blue.variance, err, blue.weights, support)
        if support == "nonnegative-integers":
            post._build_integer_pmf()
        return post

    def _build_integer_pmf(self) -> None:
        reach = 12.0 * self.error.std + 1.0
        lo = max(0, math.floor(self.estimate - reach))
        hi = max(math.ceil(self.estimate + reach), lo + 1)
        if hi - lo + 1 > _MAX_INTEGER_POINTS:
            raise ValueError(
                f"the posterior spans {hi - lo + 1} integers (max {_MAX_INTEGER_POINTS}); "
                "use support='real'"
            )
        values = np.arange(lo, hi + 1, dtype=float)
        dens = np.asarray(self.error.pdf(self.estimate - values), dtype=float)
        total = float(dens.sum())
        if not total > 0:
            raise ValueError(
                "the estimate lies too far below zero for the non-negative-integer posterior; "
                "use support='real'"
            )
        self._values, self._pmf = values, dens / total

    # ------------------------------------------------------------------ moments
    @property
    def mean(self) -> float:
        if self._pmf is None:
            return self.estimate
        assert self._values is not None
        return float(self._values @ self._pmf)

    @property
    def var(self) -> float:
        if self._pmf is None:
            return self.variance
        assert self._values is not None
        m = self.mean
        return float(((self._values - m) ** 2) @ self._pmf)

    @property
    def std(self) -> float:
        return math.sqrt(self.var)

    # ------------------------------------------------------------------ probabilities
    def cdf(self, t: Any) -> Any:
        """P(answer <= t)."""
        tt = np.asarray(t, dtype=float)
        if self._pmf is None:
            out = np.asarray(self.error.cdf(tt - self.estimate))
        else:
            assert self._values is not None
            cum = np.cumsum(self._pmf)
            idx = np.searchsorted(self._values, tt, side="right") - 1
            out = np.where(idx < 0, 0.0, cum[np.clip(idx, 0, cum.size - 1)])
        return float(out) if np.ndim(tt) == 0 else out

    def confidence(self, lo: float, hi: float) -> float:
        """P(lo <= answer <= hi): the confidence level of a given interval (§5.2)."""
        a = check_finite(lo, "lo")
        b = check_finite(hi, "hi")
        if b < a:
            raise ValueError(f"hi must be >= lo, got ({a}, {b})")
        if self._pmf is None:
            return float(self.error.cdf(b - self.estimate) - self.error.cdf(a - self.estimate))
        assert self._values is not None
        inside = (self._values >= a) & (self._values <= b)
        return float(self._pmf[inside].sum())

    def prob_greater(self, t: float) -> float:
        """P(answer > t) (hypothesis tests such as 'the count exceeds t')."""
        return float(1.0 - self.cdf(check_finite(t, "t")))

    def interval(self, p: float) -> tuple[float, float]:
        """The narrowest credible interval at level p (Algorithm 3)."""
        p = check_probability(p, "p", open_interval=True)
        if self._pmf is None:
            d = self.error.half_width(p)
            return self.estimate - d, self.estimate + d
        assert self._values is not None
        order = np.argsort(-self._pmf, kind="stable")
        cum = np.cumsum(self._pmf[order])
        n = int(np.searchsorted(cum, p * (1 - 1e-12))) + 1
        chosen = self._values[order[:n]]
        return float(chosen.min()), float(chosen.max())

    def half_width(self, p: float) -> float:
        lo, hi = self.interval(p)
        return (hi - lo) / 2.0

    def meets(self, half_width: float, p: float) -> bool:
        """Whether the narrowest interval at level p has half-width <= ``half_width``."""
        d = check_positive(half_width, "half_width")
        p = check_probability(p, "p", open_interval=True)
        if self._pmf is None:
            return bool(self.error.prob_within(d) >= p)
        return self.half_width(p) <= d

    # ------------------------------------------------------------------ Chebyshev
    def chebyshev_bound(self, d: float) -> float:
        """Thm 3.2: P(|estimate - answer| >= d) <= MSE / d^2 (for comparison)."""
        dd = check_positive(d, "d")
        return float(min(1.0, self.variance / dd**2))

    def chebyshev_half_width(self, p: float) -> float:
        """The half-width Thm 3.2 guarantees at level p: sqrt(MSE / (1 - p))."""
        p = check_probability(p, "p", open_interval=True)
        return math.sqrt(self.variance / (1.0 - p))

    def __repr__(self) -> str:
        return (
            f"Posterior(estimate={self.estimate:.6g}, std={math.sqrt(self.variance):.4g}, "
            f"support={self.support!r}, error={self.error!r})"
        )

    def _display(self) -> tuple[str, list[tuple[str, str]]]:
        lo, hi = self.interval(0.95)
        return "Posterior of a query answer (from released answers, no new cost)", [
            ("estimate", display.num(self.estimate, 6)),
            ("sd", display.num(math.sqrt(self.variance))),
            ("95% interval", display.interval(lo, hi, 6)),
            ("support", self.support),
            ("error", self._error_text()),
        ]

    def _error_text(self) -> str:
        e = self.error
        normal = f" + N(0, {display.num(e.gaussian_sd)}^2)" if e.gaussian_sd > 0 else ""
        return f"sum of {e.scales.size} Laplace terms{normal} ({e.method})"

    def _repr_html_(self) -> str:
        return display.html(self)
