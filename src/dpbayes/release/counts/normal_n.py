"""Noise-aware posterior of the Normal mean after an add/remove release (n private).

The add/remove (and user-level) release of ``release/counts/mechanism.py`` publishes the noisy
count n~ = N + Z_1 and the noisy centred sum T~ = T + w Z_2, T = sum_i (x_i - c) over
the N clamped values, c = (L + U)/2, w = (U - L)/2, with Z_1, Z_2 iid Laplace(b)
(``scale``) or N(0, sigma^2). Neither N nor T is published. With mu ~ N(mu0, s0^2), a
prior pi on N (:func:`~.private_n.n_prior`; flat by default)
and the model's likelihood of the values (``clamp="ignore"``: x_i ~ N(mu, s^2), so
T | N, mu ~ N(N (mu - c), N s^2), as the conjugate update assumes; ``clamp="clt"``: the
censored-Normal mean and variance E_c(mu), V_c(mu) of a clamped value, T ~ N(N (E_c - c),
N V_c), an approximation),

    p(mu | n~, T~) propto N(mu; mu0, s0^2) sum_N pi(N) f_1(n~ - N) f_T(T~ - N (m(mu) - c)),

f_1 the count noise's density and f_T the density of N(0, N v(mu)) + w Z_2: Normal for
Gaussian noise, the Normal-Laplace convolution (Reed 2006) for Laplace noise. The sum
over N is exact over the window where pi(N) f_1(n~ - N) is within e^-36 of its largest
(the dropped share is bounded by the dropped weights times sup f_T over the kept mass,
and recorded as ``omitted_mass``); mu is tabulated on an adaptive grid
(:class:`~dpbayes.models.mixtures.GridDistribution`, piecewise linear) zoomed onto the
region where the log posterior is within 40 of its maximum (located with a thinned sum over
N; the final 801-point grid sums every N). Compiled with numba.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numba import njit

from dpbayes.models import NormalMean
from dpbayes.models.mixtures import GridDistribution
from dpbayes.release.base import Release
from dpbayes.release.counts.normal import CLAMPS, censored_normal_moments, zoom
from dpbayes.release.counts.private_n import MAX_WINDOW, NPrior, check_window, private_n_rows
from dpbayes.release.counts.private_n import n_prior as make_prior
from dpbayes.release.counts.record import NormalMeanRecord

__all__ = ["NormalMeanPrivateNPosterior", "normal_mean_private_n_posterior"]

LOG_DROP = -36.0
ZOOM_GRID = 129
FINAL_GRID = 801
#: The most (N, mu) terms of the final grid's sum: ~ 4 s of CPU. At eps 1e-4 the sum ran
#: for 100 s, and its time grows as 1/eps (a stall after the release was charged).
MAX_TERMS = 1e8
_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


@dataclass(frozen=True, eq=False, repr=False)
class NormalMeanPrivateNPosterior(GridDistribution):
    """The grid posterior of mu, with the prior on n that was used and the omitted share."""

    n_prior: Any = None
    omitted_mass: float = 0.0

    def _display_extra(self) -> list[tuple[str, str]]:
        return private_n_rows(self.n_prior, self.omitted_mass)


@njit(cache=True)
def _log_ndtr(z: float) -> float:
    """log Phi(z), accurate in both tails."""
    if z > 5.0:
        return math.log1p(-0.5 * math.erfc(z / math.sqrt(2.0)))
    if z > -37.0:
        return math.log(0.5 * math.erfc(-z / math.sqrt(2.0)))
    zz = 1.0 / (z * z)
    series = 1.0 - zz * (1.0 - zz * (3.0 - zz * (15.0 - 105.0 * zz)))
    return -0.5 * z * z - math.log(-z) - _LOG_SQRT_2PI + math.log(series)


@njit(cache=True)
def _log_scaled_tail(x: float) -> float:
    """x^2 / 2 + log Phi(-x), i.e. log(erfcx(x / sqrt 2) / 2), without forming either
    term for large x (where x^2 / 2 and log Phi(-x) cancel to -log x - log sqrt(2 pi)):
    directly below x = 8, the continued fraction of Mills' ratio above."""
    if x < 8.0:
        return 0.5 * x * x + math.log(0.5 * math.erfc(x / math.sqrt(2.0)))
    frac = x  # R(x) = 1 / (x + 1 / (x + 2 / (x + 3 / (x + ...)))), 40 levels
    for k in range(40, 0, -1):
        frac = x + k / frac
    return -math.log(frac) - _LOG_SQRT_2PI


@njit(cache=True)
def _log_laplace_term(tb: float, zt: float) -> float:
    """log(e^(c - z/b) Phi(z/tau - tau/b)) with tb = tau/b, zt = z/tau (c = tb^2 / 2).

    With x = tb - zt >= 0 it is -zt^2 / 2 + x^2 / 2 + log Phi(-x), the last two by
    :func:`_log_scaled_tail`: in the form c - z/b + log Phi(-x) the two huge parts
    cancelled once tau/b was large (a tiny Laplace scale at a huge eps: the posterior was
    off from eps ~ 1e8 and its normalisation overflowed at 1e10). With x < 0, log Phi(-x)
    is in [log 1/2, 0] and c - z/b = -tb (zt - tb / 2) has no cancellation."""
    x = tb - zt
    if x >= 0.0:
        return -0.5 * zt * zt + _log_scaled_tail(x)
    return -tb * (zt - 0.5 * tb) + _log_ndtr(-x)


@njit(cache=True)
def _log_f_t(z: float, var: float, noise: float, gaussian: bool) -> float:
    """log density at z of N(0, var) + the sum's noise (Normal sd ``noise``, or Laplace
    scale ``noise``)."""
    if gaussian:
        tot = var + noise * noise
        return -0.5 * z * z / tot - 0.5 * math.log(tot) - _LOG_SQRT_2PI
    if var <= 0.0:
        return -abs(z) / noise - math.log(2.0 * noise)
    tau = math.sqrt(var)
    # log of (e^(c - z/b) Phi(z/tau - tau/b) + e^(c + z/b) Phi(-z/tau - tau/b)),
    # c = var / 2b^2, one term each (:func:`_log_laplace_term`)
    tb, zt = tau / noise, z / tau
    left = _log_laplace_term(tb, zt)
    right = _log_laplace_term(tb, -zt)
    if left == -math.inf and right == -math.inf:
        return -math.inf
    top = max(left, right)
    return top + math.log(math.exp(left - top) + math.exp(right - top)) - math.log(2.0 * noise)


@njit(cache=True)
def _log_post(
    mus: np.ndarray,
    shift: np.ndarray,
    var1: np.ndarray,
    ns: np.ndarray,
    lw: np.ndarray,
    t_obs: float,
    noise: float,
    gaussian: bool,
    mu0: float,
    s0: float,
) -> np.ndarray:
    """log prior(mu) + log sum_N exp(lw_N + log f_T(t_obs - N shift(mu); N var1(mu)))
    at every mu (``shift`` = m(mu) - c and ``var1`` = v(mu) per grid point)."""
    out = np.empty(mus.size)
    for i in range(mus.size):
        top = -np.inf
        acc = 0.0
        for k in range(ns.size):
            n = ns[k]
            v = lw[k] + _log_f_t(t_obs - n * shift[i], n * var1[i], noise, gaussian)
            if v > top:
                acc = acc * math.exp(top - v) + 1.0
                top = v
            else:
                acc += math.exp(v - top)
        zmu = (mus[i] - mu0) / s0
        out[i] = -0.5 * zmu * zmu + top + math.log(acc)
    return out


def _n_window(
    n_obs: float, noise: float, gaussian: bool, prior: NPrior
) -> tuple[np.ndarray, np.ndarray, float]:
    """(N values, log weights log pi(N) + log f_1(n~ - N) (max 0), dropped share bound
    relative to the kept weights' sum)."""
    span = 12.0 * noise + 50.0 if gaussian else 60.0 * noise + 50.0
    top = math.ceil(max(n_obs, 0.0) + span)
    if not top + 1 <= MAX_WINDOW:
        check_window(n_obs, noise)  # the same refusal as the count releases'
    ns = np.arange(top + 1, dtype=float)
    if gaussian:
        lw = -0.5 * ((n_obs - ns) / noise) ** 2
    else:
        lw = -np.abs(n_obs - ns) / noise
    lw = lw + prior.log_pmf(ns)
    best = float(np.max(lw))
    if not math.isfinite(best):
        raise ValueError("the prior on n gives probability 0 to every n the release allows")
    lw -= best
    keep = np.flatnonzero(lw > LOG_DROP)
    i0, i1 = int(keep[0]), int(keep[-1])
    if (i1 - i0 + 1) * FINAL_GRID > MAX_TERMS:
        raise ValueError(
            f"the noise (scale {noise:.6g}) is too large for the exact sum over the number "
            f"of values ({i1 - i0 + 1} of them on {FINAL_GRID} grid points > {MAX_TERMS:.0e} "
            "terms): release with a larger epsilon (or use the naive posterior)"
        )
    w = np.exp(lw)
    dropped = float(w[:i0].sum() + w[i1 + 1 :].sum())
    dropped += float(w[-1]) * math.exp(-1.0 / noise) / -math.expm1(-1.0 / noise)
    kept = float(w[i0 : i1 + 1].sum())
    return ns[i0 : i1 + 1], lw[i0 : i1 + 1], dropped / kept


def normal_mean_private_n_posterior(
    rel: Release, *, clamp: str = "ignore", n_prior: Any = None
) -> NormalMeanPrivateNPosterior:
    """p(mu | noisy count, noisy centred sum) of an add/remove Normal-mean release
    (module docstring); ``n_prior`` the prior on the number of values (default flat)."""
    if clamp not in CLAMPS:
        raise ValueError(f"clamp must be one of {CLAMPS}, got {clamp!r}")
    prior = make_prior(n_prior)
    model: NormalMean = rel.model
    det = rel.guarantee.details
    gaussian = rel.mechanism == "gaussian"
    noise = float(det["sigma"] if gaussian else det["scale"])
    rec = NormalMeanRecord.of(rel)
    centre = float(rec.centre if rec.centre is not None else det.get("centre", math.nan))
    half = float(rec.half_width if rec.half_width is not None else det.get("half_width", math.nan))
    if not (math.isfinite(centre) and half > 0):
        raise ValueError("the release must carry the public centre and half_width of its bounds")
    n_obs = float(rel.released["count"])
    t_obs = float(rel.released["centred_sum"])
    ns, lw, dropped = _n_window(n_obs, noise, gaussian, prior)
    s2 = model.noise_sd**2
    mu0, s0 = float(model.prior_mean), float(model.prior_sd)

    # the zoom passes only locate the posterior's region: a thinned sum over N (every
    # step-th N, weighted by step) is enough there; the final grid sums every N
    step = max(1, ns.size // 256)
    thin = (ns[::step], lw[::step] + math.log(step))

    def log_post(mus: np.ndarray, exact: bool = True) -> np.ndarray:
        n_sum, w_sum = (ns, lw) if exact else thin
        if clamp == "clt":
            e_c, v_c = censored_normal_moments(mus, model.noise_sd, model.lower, model.upper)
            shift, var1 = np.asarray(e_c) - centre, np.asarray(v_c)
        else:
            shift, var1 = mus - centre, np.full(mus.size, s2)
        return np.asarray(
            _log_post(mus, shift, var1, n_sum, w_sum, t_obs, half * noise, gaussian, mu0, s0)
        )

    # zoom from the prior's +-12 sd onto the posterior (no cap of six passes: with a prior
    # sd of 1e12 they ended far from a posterior of sd 0.1, at mean 0.44 for 0.47)
    x, lp = zoom(lambda m: log_post(m, exact=False), mu0 - 12.0 * s0, mu0 + 12.0 * s0, ZOOM_GRID)
    keep = np.flatnonzero(np.isfinite(lp) & (lp >= np.max(lp[np.isfinite(lp)]) - 40.0))
    lo, hi = x[max(int(keep[0]) - 1, 0)], x[min(int(keep[-1]) + 1, ZOOM_GRID - 1)]
    x = np.linspace(lo, hi, FINAL_GRID)
    lp = log_post(x)
    # the omitted N: weights e^lw (dropped share of the kept ones), each with
    # f_T <= sup f_T (1/(2 w b) Laplace; the Normal's at N = 0 for Gaussian noise)
    sup_f = -math.log(2.0 * half * noise) if not gaussian else -math.log(half * noise) - 0.92
    kept_mass = float(np.exp(lw).sum())
    # in logs: the grid's integral e^max(lp) overflowed when the likelihood is sharp
    top = float(np.max(lp))
    area = float(np.trapezoid(np.exp(lp - top), x))
    prior_norm = math.sqrt(2.0 * math.pi) * s0  # the unnormalised Normal prior's integral
    omitted = 0.0
    if dropped > 0.0 and area > 0.0:
        log_omitted = math.log(dropped * kept_mass) + sup_f + math.log(prior_norm)
        omitted = math.exp(min(log_omitted - top - math.log(area), 0.0))
    return NormalMeanPrivateNPosterior(x, lp, n_prior=prior, omitted_mass=min(float(omitted), 1.0))
