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

Two things to keep in mind when scoring. (1) The ranks at the check points of one replicate
are strongly correlated (they come from one CDF), so a chi-square test on the ranks pooled
over check points is far too liberal; :func:`rank_uniformity` tests the replicate-level bin
fractions instead. (2) Where a prior draw of P has (next to) no mass on one side of t,
F(t) and its posterior sit at exactly 0 or 1, and a closed band covers there with
probability 1; ``pointwise_randomized`` breaks such ties at random (a randomized PIT),
which covers with probability exactly ``level`` under exact sampling.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

from dpbayes.nonparametric.base import BasePrior, draw_base
from dpbayes.nonparametric.fit import band_at, band_depths, simultaneous_band
from dpbayes.privacy.noise import noise_source
from dpbayes.privacy.validation import check_array, check_int, check_probability
from dpbayes.progress import Progress

__all__ = [
    "BandCalibration",
    "SBCResult",
    "calibrate_bands",
    "draw_prior_p",
    "rank_uniformity",
    "sbc_replicate",
]


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
    ``pointwise``: the closed equal-tailed band holds the truth; ``pointwise_randomized``:
    the randomized PIT of the truth among all draws, (rank + U) / (draws + 1) with ties
    broken at random, lies in [(1 - level)/2, (1 + level)/2] (probability ``level`` under
    exact sampling even where F(t) has atoms at 0 or 1).
    """

    truth: np.ndarray
    pointwise: np.ndarray
    simultaneous: bool
    rank: np.ndarray
    thin: int
    alpha: float
    ess_min: float
    pointwise_randomized: np.ndarray | None = None


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
    rank = _random_rank(pick, truth, gen)
    pit = (_random_rank(draws, truth, gen) + gen.random(grid.shape[0])) / (draws.shape[0] + 1)
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
        pointwise_randomized=((1 - level) / 2 <= pit) & (pit <= (1 + level) / 2),
    )


def _random_rank(draws: np.ndarray, truth: np.ndarray, gen: np.random.Generator) -> np.ndarray:
    """Per column, #{draws < truth} with ties (within TIE) broken at random."""
    below = np.sum(draws < truth - TIE, axis=0)
    ties = np.sum(np.abs(draws - truth) <= TIE, axis=0)
    return below + np.floor(gen.random(truth.shape[0]) * (ties + 1)).astype(int)  # type: ignore[no-any-return]


def rank_uniformity(ranks: Any, thin: int, bins: int = 10) -> dict[str, Any]:
    """Test SBC ranks for uniformity on 0..thin when each replicate has several check points.

    ``ranks``: (replicates, points). The ranks of one replicate are dependent, so the test
    is on the per-replicate fractions of its ranks in each of ``bins`` bins (independent
    across replicates): Hotelling's T^2 test of their mean against the uniform bin
    probabilities, the covariance estimated from the replicates (its F form, exact for
    Normal fractions). Also the mean over replicates of the
    fraction of ranks in the middle half (0.5 under uniformity; above 0.5 when the
    posterior is too wide) with its standard error.
    """
    r = np.asarray(ranks, dtype=np.int64)
    if r.ndim == 1:
        r = r[:, None]
    reps, pts = r.shape
    b = r * bins // (thin + 1)
    prob = np.bincount(np.arange(thin + 1) * bins // (thin + 1), minlength=bins) / (thin + 1)
    frac = np.stack([np.bincount(row, minlength=bins) / pts for row in b])
    diff = frac.mean(axis=0)[:-1] - prob[:-1]
    cov = np.atleast_2d(np.cov(frac[:, :-1], rowvar=False)) / reps
    stat = float(diff @ np.linalg.pinv(cov) @ diff)  # Hotelling's T^2
    k = bins - 1
    middle = (4 * np.arange(thin + 1) >= thin + 1) & (4 * np.arange(thin + 1) < 3 * (thin + 1))
    mid = middle[r].mean(axis=1)
    return {
        "counts": np.bincount(b.ravel(), minlength=bins),
        "expected": prob * r.size,
        "t2": stat,
        "p_value": float(stats.f.sf(stat * (reps - k) / (k * (reps - 1)), k, reps - k))
        if reps > k
        else float("nan"),
        "mid_half": float(mid.mean()),
        "mid_half_se": float(mid.std(ddof=1) / np.sqrt(reps)) if reps > 1 else float("nan"),
        "mid_half_expected": float(middle.mean()),
    }


#: Credible levels among which :func:`calibrate_bands` picks (0.010, 0.015, ..., 0.995, 0.999).
CANDIDATE_LEVELS = np.append(np.round(np.arange(0.01, 0.9951, 0.005), 3), 0.999)


@dataclass(frozen=True)
class BandCalibration:
    """CDF bands whose credible level is chosen so that they cover at ``level`` in
    simulations from the fitted P (a parametric bootstrap of the whole analysis).

    ``pointwise`` / ``simultaneous``: (lower, upper) on ``grid`` from the fit's own draws,
    at the credible levels ``pointwise_level`` / ``simultaneous_level``.
    ``coverage_pointwise[j]`` / ``coverage_simultaneous[j]``: in the refits, the fraction
    of (refit, grid point) pairs / of refits whose band at credible level
    ``CANDIDATE_LEVELS[j]`` held ``target``. ``capped``: some kind did not reach ``level``
    even at the widest candidate (0.999); its band is that one. ``target``: the CDF values
    on ``grid`` the refits were checked against (the fitted P's, minus ``bias`` with the
    bias correction); ``bias``: the refits' mean posterior CDF minus the fitted P's;
    ``uncorrected_levels``: the (pointwise, simultaneous) levels checked against the
    fitted P itself (the plain bootstrap), for comparison.
    """

    grid: np.ndarray
    level: float
    pointwise_level: float
    simultaneous_level: float
    pointwise: tuple[np.ndarray, np.ndarray]
    simultaneous: tuple[np.ndarray, np.ndarray]
    refits: int
    coverage_pointwise: np.ndarray
    coverage_simultaneous: np.ndarray
    capped: bool
    target: np.ndarray
    bias: np.ndarray
    uncorrected_levels: tuple[float, float]


def _pick_level(
    coverage: np.ndarray, level: float, refits: int | None = None
) -> tuple[float, bool]:
    """The smallest candidate credible level whose coverage reaches ``level`` (coverage
    grows with the credible level: the bands are nested).

    With ``refits`` (one yes/no per refit, the simultaneous kind) the fraction asked for
    is ceil(level (refits + 1)) / refits, the split-conformal order statistic: the level
    picked is then the k-th smallest of the refits' minimal covering levels, and a new run
    exchangeable with the refits needs at most that level with probability k / (refits +
    1) >= ``level``. Asking for a fraction >= ``level`` picks k = ceil(level refits), which
    covers k / (refits + 1), only 19/21 = 0.905 for 20 refits at 0.95. When k exceeds
    ``refits`` no candidate qualifies: capped.
    """
    need = level if refits is None else math.ceil(level * (refits + 1) - 1e-9) / refits
    ok = np.flatnonzero(coverage >= need - 1e-12)
    if ok.size == 0:
        return float(CANDIDATE_LEVELS[-1]), True
    return float(CANDIDATE_LEVELS[ok[0]]), False


def _coverage_by_level(draws: np.ndarray, truth: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each candidate credible level: the fraction of grid points where the
    equal-tailed band of ``draws`` (draws, points) holds ``truth``, and whether the
    simultaneous band holds it everywhere."""
    q = np.concatenate([(1 - CANDIDATE_LEVELS) / 2, (1 + CANDIDATE_LEVELS) / 2])
    bounds = np.quantile(draws, q, axis=0)
    lo, hi = bounds[: CANDIDATE_LEVELS.size], bounds[CANDIDATE_LEVELS.size :]
    inside = (lo - TIE <= truth) & (truth <= hi + TIE)
    pointwise = inside.mean(axis=1)
    simultaneous = np.empty(CANDIDATE_LEVELS.size)
    srt, depth = band_depths(draws)
    for j, lev in enumerate(CANDIDATE_LEVELS):
        slo, shi = band_at(srt, depth, float(lev))
        simultaneous[j] = float(np.all((slo - TIE <= truth) & (truth <= shi + TIE)))
    return pointwise, simultaneous


def _mean_coverage(
    refit_draws: list[np.ndarray], target: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_coverage_by_level` averaged over the refits' (draws, points) arrays."""
    curves = [_coverage_by_level(d, target) for d in refit_draws]
    return np.mean([c[0] for c in curves], axis=0), np.mean([c[1] for c in curves], axis=0)


def _sample_fitted_p(fit: Any, size: int, gen: np.random.Generator) -> np.ndarray:
    """``size`` values from the posterior mean of P (each from a uniformly chosen draw)."""
    atoms = fit.atoms.reshape(-1, fit.atoms.shape[-1])
    cumw = fit.cumw.reshape(-1, fit.cumw.shape[-1])
    counts = gen.multinomial(size, np.full(atoms.shape[0], 1.0 / atoms.shape[0]))
    out = np.empty(size)
    at = 0
    for s in np.flatnonzero(counts):
        k = int(counts[s])
        idx = np.searchsorted(cumw[s], gen.random(k) * cumw[s, -1], side="right")
        out[at : at + k] = atoms[s, np.minimum(idx, atoms.shape[1] - 1)]
        at += k
    return gen.permutation(out)  # type: ignore[no-any-return]


def calibrate_bands(
    fit: Any,
    grid: Any,
    level: float = 0.95,
    *,
    refits: int = 20,
    draws: int | None = None,
    chains: int = 2,
    rng: Any = None,
    progress: bool | None = None,
    bias_correction: bool = True,
) -> BandCalibration:
    """Pointwise and simultaneous CDF bands calibrated to frequentist coverage ``level``.

    A Dirichlet-process posterior is calibrated in the Bayesian sense (SBC), but at a
    smooth truth its bands are wider than their level says (the prior is rougher than
    the truth). This parametric bootstrap of the whole analysis (Syring & Martin's
    calibration of posterior credible regions, with the credible level as the dial)
    estimates that: ``refits`` data sets of the fit's size are drawn from the posterior
    mean of P and privatised by the fit's local mechanism, the model is refitted on each
    (``draws`` saved draws, default min(fit's draws, 300), half as many warm-up sweeps,
    ``chains`` chains) and the credible level returned is the smallest candidate whose
    bands held the target CDF at ``grid`` often enough: pointwise, in a fraction
    >= ``level`` of the (refit, grid point) pairs; simultaneous, in at least
    ceil(level (refits + 1)) of the refits (the split-conformal order statistic, so that
    a run exchangeable with the refits is covered with probability >= ``level``: all 20
    of 20 refits at 0.95; with fewer refits than level / (1 - level), 19 at 0.95, no
    candidate qualifies and the widest is returned, ``capped``). The bands are then drawn
    from the fit itself at those levels.

    The target: the fitted P is a posterior mean, already smoothed, so the refits' error
    around it understates the error around a truth that is rougher (their bias, the
    smoothing of a smoothed P, is smaller). With ``bias_correction`` (default) the target
    is the fitted CDF minus that bias as the refits measure it, F_hat - (mean of the
    refits' posterior means - F_hat), clipped to [0, 1]: the first-order bias correction
    of a bootstrap for curve estimates. Without it, the target is the fitted CDF (the
    plain bootstrap; it under-covered at n = 10,000 in the experiment).

    Privacy: post-processing of the privatised column (the simulated columns are noise
    from a seeded generator and carry no guarantee); nothing is spent. Cost: ``refits``
    fits, and ``refits`` x draws x chains x len(grid) doubles held at once (about 2 MB
    for the defaults and 19 grid points). The calibrated level depends on ``grid``: the
    coverage asked for is that of the points given.
    """
    from dpbayes.nonparametric.mechanisms import CustomMechanism

    level = check_probability(level, "level", open_interval=True)
    refits = check_int(refits, "refits", minimum=2)
    chains = check_int(chains, "chains", minimum=1)
    draws = min(fit.draws, 300) if draws is None else check_int(draws, "draws", minimum=10)
    g = np.ravel(check_array(grid, "grid", ndim=None))
    model = fit.model
    if isinstance(model.mechanism, CustomMechanism):
        raise ValueError(
            "fit: calibrate_bands simulates the local mechanism, and a CustomMechanism "
            "gives only a log-density: fit with LocalLaplace or LocalGaussian"
        )
    gen = noise_source(rng).generator()
    fitted = np.asarray(fit.cdf(g), dtype=float)
    refit_draws: list[np.ndarray] = []
    bar = Progress(refits, "calibrating bands", unit="refit", show=progress)
    try:
        for _ in range(refits):
            z = model.mechanism.privatize(_sample_fitted_p(fit, fit.n, gen), rng=gen)
            refit = model.fit(
                z.values,
                draws=draws,
                warmup=draws // 2,
                chains=chains,
                rng=gen,
                progress=False,
                diagnostics=False,
            )
            refit_draws.append(refit.cdf_draws(g).reshape(-1, g.size))
            bar.update(1)
    finally:
        bar.close()
    # the refits' posterior means estimate the smoothing bias at the fitted P; the truth
    # is estimated one such bias further out (the bias at the truth is larger than at the
    # fitted P, which is already smoothed)
    bias = np.mean([d.mean(axis=0) for d in refit_draws], axis=0) - fitted
    target = np.clip(fitted - bias, 0.0, 1.0) if bias_correction else fitted
    pointwise, simultaneous = _mean_coverage(refit_draws, target)
    plain_pw, plain_sim = (
        _mean_coverage(refit_draws, fitted) if bias_correction else (pointwise, simultaneous)
    )
    pw_level, pw_cap = _pick_level(pointwise, level)
    sim_level, sim_cap = _pick_level(simultaneous, level, refits)
    plain = (_pick_level(plain_pw, level)[0], _pick_level(plain_sim, level, refits)[0])
    return BandCalibration(
        grid=g,
        level=level,
        pointwise_level=pw_level,
        simultaneous_level=sim_level,
        pointwise=fit.cdf_band(g, pw_level),
        simultaneous=fit.cdf_band(g, sim_level, kind="simultaneous"),
        refits=refits,
        coverage_pointwise=pointwise,
        coverage_simultaneous=simultaneous,
        capped=pw_cap or sim_cap,
        target=target,
        bias=bias,
        uncorrected_levels=plain,
    )
