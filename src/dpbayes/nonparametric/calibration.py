"""Simulation-based calibration (SBC) of the DP-mixture posterior (Talts et al. 2018).

If the data are drawn from the prior predictive of the model (alpha, (mu, sigma) from
their hyperpriors, P from DP(alpha, P0), X_i from P, Z_i from the mechanism) and the
sampler draws from the exact posterior, then for every t the rank of the true F(t) among
independent posterior draws of F(t) is uniform, a pointwise 95% credible interval covers
the true F(t) with probability exactly 0.95, and a simultaneous 95% band covers the whole
true CDF on the grid with probability 0.95 (up to the Monte Carlo error of the band).
Departures measure errors of the computation (mixing, truncation), not of the model. A
frequentist coverage study at one fixed truth, which the experiment also runs, has no such
guarantee for a nonparametric posterior.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from dpbayes.nonparametric.base import BasePrior, draw_base
from dpbayes.nonparametric.fit import simultaneous_band
from dpbayes.privacy.noise import noise_source

__all__ = ["SBCResult", "draw_prior_p", "sbc_replicate"]


def draw_prior_p(
    model: Any, gen: np.random.Generator, tail: float = 1e-12
) -> tuple[np.ndarray, np.ndarray, float, float, float]:
    """One draw from the model's prior: (atoms, weights, alpha, mu, sigma) of P.

    Stick-breaking until the remaining mass is below ``tail`` (lumped into the last atom).
    """
    if model.alpha_prior is None:
        alpha = model.alpha
    else:
        shape, rate = model.alpha_prior
        alpha = float(gen.gamma(shape, 1.0 / rate))
    if isinstance(model.base_prior, BasePrior):
        mu, sigma = model.base_prior.rvs(gen)
    else:
        mu, sigma = model._mu, model._sigma
    weights: list[float] = []
    left = 1.0
    while left >= tail:
        v = 1.0 - float(gen.random()) ** (1.0 / alpha)
        weights.append(left * v)
        left *= 1.0 - v
    w = np.array(weights)
    w[-1] += left
    atoms = draw_base(np.array([mu]), np.array([sigma]), model._r, gen, w.shape[0])[0]
    return atoms, w, alpha, mu, sigma


TIE = 1e-12  # CDF values closer than this count as equal (rounding of sums of weights)


def _cdf(atoms: np.ndarray, w: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """CDF of sum_k w_k delta_{atoms_k} at ``grid``, exactly 1 after the last atom."""
    o = np.argsort(atoms)
    cum = np.cumsum(w[o])
    cum = np.minimum(np.concatenate([[0.0], cum / cum[-1]]), 1.0)
    return cum[np.searchsorted(atoms[o], grid, side="right")]  # type: ignore[no-any-return]


@dataclass(frozen=True)
class SBCResult:
    """One SBC replicate: the true CDF on the grid, whether each band covered it, the ranks.

    ``rank[j]``: rank of the true F(grid_j) among ``thin`` evenly spaced posterior draws
    (ties broken at random), uniform on 0..thin under exact posterior sampling.
    """

    truth: np.ndarray
    pointwise: np.ndarray
    simultaneous: bool
    rank: np.ndarray
    thin: int
    alpha: float
    ess_min: float


def sbc_replicate(
    model: Any,
    n: int,
    grid: np.ndarray,
    rng: Any,
    *,
    fit_kw: dict[str, Any],
    level: float = 0.95,
    thin: int = 99,
) -> SBCResult:
    """Draw (P, X, Z) from the prior predictive, fit, and check the bands at ``grid``."""
    from dpbayes.nonparametric.diagnostics import ess_bulk

    gen = noise_source(rng).generator()
    atoms, w, alpha, _, _ = draw_prior_p(model, gen)
    x = atoms[
        np.searchsorted(np.cumsum(w), gen.random(n) * w.sum(), side="right").clip(0, w.size - 1)
    ]
    z = model.mechanism.privatize(x, rng=gen)
    fit = model.fit(z, rng=gen, **fit_kw)
    truth = _cdf(atoms, w, grid)
    draws = fit.cdf_draws(grid).reshape(-1, grid.shape[0])
    lo, hi = np.quantile(draws, [(1 - level) / 2, (1 + level) / 2], axis=0)
    slo, shi = simultaneous_band(draws, level)
    pick = draws[np.linspace(0, draws.shape[0] - 1, thin).astype(int)]
    below = np.sum(pick < truth - TIE, axis=0)
    ties = np.sum(np.abs(pick - truth) <= TIE, axis=0)
    rank = below + np.floor(gen.random(grid.shape[0]) * (ties + 1)).astype(int)
    cd = fit.cdf_draws(grid)
    ess = [ess_bulk(cd[..., j]) for j in range(grid.shape[0]) if np.ptp(cd[..., j]) > 0]
    return SBCResult(
        truth=truth,
        pointwise=(lo - TIE <= truth) & (truth <= hi + TIE),
        simultaneous=bool(np.all((slo - TIE <= truth) & (truth <= shi + TIE))),
        rank=rank,
        thin=thin,
        alpha=alpha,
        ess_min=float(min(ess)) if ess else float("nan"),
    )
