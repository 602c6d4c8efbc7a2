"""The base measure P0 = N(mu, sigma^2) of the Dirichlet process and the hyperprior on (mu, sigma).

The DP prior of paper 001 centres P on P0. With a fixed P0 the posterior of P keeps
the prior's location and scale wherever the data are uninformative (heavy local noise),
so dpbayes gives (mu, sigma) a proper hyperprior by default and updates them in every
Gibbs sweep from the distinct cluster values, which are i.i.d. P0 given the partition
(Escobar & West 1995, Section 3; the MacEachern & Mueller 1998 "hierarchical base"):

    mu ~ N(mu_mean, mu_sd^2),   log sigma ~ Uniform(log sigma_lo, log sigma_hi),
    phi_1..phi_K | mu, sigma ~ i.i.d. N(mu, sigma^2) (restricted to [-r, r] when the
    model's support is the clipping range, so that the normaliser
    Phi((r - mu)/sigma) - Phi((-r - mu)/sigma) enters the likelihood of (mu, sigma)).

The conditional of (mu, log sigma) has no closed form under the restriction; each is
updated by a univariate slice sampler (Neal 2003, stepping out and shrinkage), which
leaves it exactly invariant. The uniforms come from the chain's Generator.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from dpbayes.nonparametric import kernels_truncnorm
from dpbayes.nonparametric.kernels_truncnorm import log_diff_ndtr_scalar
from dpbayes.privacy.validation import check_finite, check_positive

__all__ = ["BasePrior", "base_loglik", "draw_base", "slice_step", "slice_step_f", "update_base"]


@dataclass(frozen=True, kw_only=True)
class BasePrior:
    """Hyperprior of the base measure: mu ~ N(mu_mean, mu_sd^2), log sigma uniform on
    [log sigma_lo, log sigma_hi] (a scale-free prior on sigma, proper because bounded).

    :meth:`for_range` gives the default for a clipping range [-r, r]: mu ~ N(0, r^2),
    sigma between r/20 and 4r (from a base nearly a point to nearly uniform on [-r, r]).
    """

    mu_mean: float = 0.0
    mu_sd: float = 1.0
    sigma_lo: float = 0.05
    sigma_hi: float = 4.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "mu_mean", check_finite(self.mu_mean, "mu_mean"))
        object.__setattr__(self, "mu_sd", check_positive(self.mu_sd, "mu_sd"))
        object.__setattr__(self, "sigma_lo", check_positive(self.sigma_lo, "sigma_lo"))
        object.__setattr__(self, "sigma_hi", check_positive(self.sigma_hi, "sigma_hi"))
        if not self.sigma_lo < self.sigma_hi:
            raise ValueError(
                f"sigma_lo must be below sigma_hi, got {self.sigma_lo} and {self.sigma_hi}"
            )

    @classmethod
    def for_range(cls, r: float) -> BasePrior:
        """The default hyperprior for data clipped to [-r, r] (r public)."""
        return cls(mu_mean=0.0, mu_sd=r, sigma_lo=r / 20.0, sigma_hi=4.0 * r)

    def rvs(self, gen: np.random.Generator) -> tuple[float, float]:
        """One draw of (mu, sigma) from the hyperprior (simulation-based calibration)."""
        mu = self.mu_mean + self.mu_sd * float(gen.standard_normal())
        lo, hi = math.log(self.sigma_lo), math.log(self.sigma_hi)
        return mu, math.exp(lo + (hi - lo) * float(gen.random()))


def base_loglik(phi: np.ndarray, mu: float, sigma: float, r: float | None) -> float:
    """log of prod_k P0(phi_k) for P0 = N(mu, sigma^2), restricted to [-r, r] unless r is None."""
    u = (phi - mu) / sigma
    out = -0.5 * float(np.dot(u, u)) - phi.shape[0] * math.log(sigma)
    if r is not None:
        out -= phi.shape[0] * float(log_diff_ndtr_scalar((-r - mu) / sigma, (r - mu) / sigma))
    return out


def slice_step(
    logf: Callable[[float], float],
    x0: float,
    width: float,
    gen: np.random.Generator,
    lower: float = -math.inf,
    upper: float = math.inf,
    max_steps: int = 30,
    f0: float | None = None,
) -> float:
    """One univariate slice-sampling update of x0 for the log density ``logf`` (Neal 2003,
    Fig. 3 stepping out and Fig. 5 shrinkage) on (lower, upper); ``f0`` = logf(x0) if known."""
    return slice_step_f(logf, x0, width, gen, lower, upper, max_steps, f0)[0]


def slice_step_f(
    logf: Callable[[float], float],
    x0: float,
    width: float,
    gen: np.random.Generator,
    lower: float = -math.inf,
    upper: float = math.inf,
    max_steps: int = 30,
    f0: float | None = None,
) -> tuple[float, float]:
    """:func:`slice_step` returning the new point and logf there."""
    fx0 = logf(x0) if f0 is None else f0
    level = fx0 + math.log(float(gen.random()))
    if not math.isfinite(level):  # the current point has no density (nan/-inf): stay
        return x0, fx0
    left = x0 - width * float(gen.random())
    right = left + width
    j = int(max_steps * float(gen.random()))
    k = max_steps - 1 - j
    while j > 0 and left > lower and logf(left) > level:
        left -= width
        j -= 1
    while k > 0 and right < upper and logf(right) > level:
        right += width
        k -= 1
    left, right = max(left, lower), min(right, upper)
    for _ in range(200):  # each shrink halves the interval on average; nan counts as -inf
        x = left + (right - left) * float(gen.random())
        fx = logf(x)
        if fx > level:
            return x, fx
        if x < x0:
            left = x
        else:
            right = x
    return x0, fx0


def update_base(
    phi: np.ndarray,
    mu: float,
    sigma: float,
    prior: BasePrior,
    r: float | None,
    gen: np.random.Generator,
) -> tuple[float, float]:
    """(mu, sigma) | the distinct cluster values, by a slice step on mu then on log sigma."""
    k = phi.shape[0]

    def log_mu(m: float) -> float:
        d = (m - prior.mu_mean) / prior.mu_sd
        return -0.5 * d * d + base_loglik(phi, m, sigma, r)

    mu = slice_step(log_mu, mu, 2.0 * sigma / math.sqrt(k), gen)

    def log_ls(ls: float) -> float:
        return base_loglik(phi, mu, math.exp(ls), r)

    lo, hi = math.log(prior.sigma_lo), math.log(prior.sigma_hi)
    ls = slice_step(log_ls, min(max(math.log(sigma), lo), hi), 1.0, gen, lo, hi)
    return mu, math.exp(ls)


def draw_base(
    mu: np.ndarray, sigma: np.ndarray, r: float | None, gen: np.random.Generator, size: int
) -> np.ndarray:
    """(len(mu), size) draws of P0 = N(mu, sigma^2), one row per (mu, sigma); restricted to
    [-r, r] unless r is None."""
    m = np.asarray(mu, dtype=float)[:, None]
    s = np.asarray(sigma, dtype=float)[:, None]
    if r is None:
        return m + s * gen.standard_normal((m.shape[0], size))  # type: ignore[no-any-return]
    u = gen.random((m.shape[0], size))
    out = np.empty_like(u)
    return kernels_truncnorm.draw_truncated_base(m[:, 0], s[:, 0], float(r), u, out)  # type: ignore[no-any-return]
