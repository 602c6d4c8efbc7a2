"""The noise-aware posterior of input perturbation (paper 002 §6.1), for the recipient.

Randomized response: a reported one has likelihood q(theta) = p theta + (1 - p)(1 - theta),
so the posterior is exactly a mixture of Beta(a + s, b + n - s) over the latent true count
s (:class:`~dpbayes.models.mixtures.BetaMixture`). Gaussian noise on a Normal mean:
x~_i ~ N(mu, s^2 + sigma^2), the conjugate update with the inflated variance (exact up to
the clamping). Uses only the release (``released``, its record, ``guarantee``, ``model``).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special

from dpbayes.models import BetaBernoulli, NormalMean
from dpbayes.models.distributions import Normal
from dpbayes.models.mixtures import BetaMixture, log_convolve
from dpbayes.models.statistics import SumStatistics
from dpbayes.release.base import Release, register_noise_aware
from dpbayes.release.input.record import InputCoinRecord, InputNormalRecord

__all__ = ["noise_aware_posterior"]

_DIRECT_MAX = 400


def _log_rr_weights(a: float, b: float, n: int, noisy: int, p: float) -> np.ndarray:
    """log of the mixture weights c_s B(a + s, b + n - s), s = 0..n (unnormalised).

    c = Bin(.; noisy, p) * Bin(.; n - noisy, 1 - p) (a convolution) spans hundreds of
    orders of magnitude, so one linear-space convolution is not enough. Exponential
    tilting: Bin(i; m, p) e^{lam i} = Bin(i; m, expit(lam + logit p)) (p e^lam + 1 - p)^m,
    so the tilted convolution is accurate (relative ~1e-11) where it is within 1e-5 of its
    own peak. Up to n = 2000 with at most 400 reports on one side, the convolution is done
    directly in log space instead (above, those rows cost O(n) each: 4.3 s at n = 10^6).
    Tilts are centred from the most likely true count outwards, every 3 tilted standard
    deviations, until the weights have fallen by e^-60; each s takes the tilt in which it
    is most central, and the tilt is undone in log space. Each tilt convolves only the
    windows where its two binomials are within e^-60 of their tops (the terms left out at
    one s total below (n + 1) e^-60 of the convolution's peak, so below (n + 1) e^-48.5,
    1e-15 at n = 10^6, of any value kept), so a tilt costs O(its standard deviation), not
    O(n): 1.7 s at n = 10^6, eps 0.01 (over 76 s before).
    """
    from scipy import optimize, signal, stats

    lp, lq = math.log(p), math.log1p(-p)
    logit_p = lp - lq
    s = np.arange(n + 1, dtype=float)
    prior = special.betaln(a + s, b + (n - s))  # not (b + n) - s: b = 1e-300 would round away
    if min(noisy, n - noisy) <= _DIRECT_MAX and n <= 2000:  # small: in log space
        lf = stats.binom.logpmf(np.arange(noisy + 1), noisy, p)
        lg = stats.binom.logpmf(np.arange(n - noisy + 1), n - noisy, 1.0 - p)
        return np.asarray(log_convolve(lf, lg) + prior)
    out = np.full(n + 1, -np.inf)
    quality = np.full(n + 1, -np.inf)  # log(conv(s) / max conv) of the tilt used at s
    conv_fft = n > 2000
    bound = abs(logit_p) + math.log(n + 1.0) + 50.0

    def mean(lam: float) -> float:
        return float(
            noisy * special.expit(lam + logit_p) + (n - noisy) * special.expit(lam - logit_p)
        )

    def window(count: int, prob: float) -> tuple[int, np.ndarray]:
        """(first index, pmf) of Bin(count, prob) where its log pmf is within 60 of the top."""
        sd = math.sqrt(count * prob * (1.0 - prob))
        mode = min(max(int((count + 1) * prob), 0), count)
        half = int(12.0 * sd) + 16
        while True:
            lo, hi = max(mode - half, 0), min(mode + half, count)
            lpmf = stats.binom.logpmf(np.arange(lo, hi + 1), count, prob)
            top = float(np.max(lpmf))
            if (lo == 0 or lpmf[0] < top - 60.0) and (hi == count or lpmf[-1] < top - 60.0):
                return lo, np.exp(lpmf)
            half *= 2

    def tilt(centre: float) -> float:
        t = min(max(centre, 1e-6), n - 1e-6)
        lam = optimize.brentq(lambda x: mean(x) - t, -bound, bound, xtol=1e-12)
        p1, p2 = special.expit(lam + logit_p), special.expit(lam - logit_p)
        lo_f, f = window(noisy, p1)
        lo_g, g = window(n - noisy, p2)
        conv = signal.fftconvolve(f, g) if conv_fft else np.convolve(f, g)
        at = slice(lo_f + lo_g, lo_f + lo_g + conv.size)
        with np.errstate(divide="ignore", invalid="ignore"):
            rel = np.log(np.clip(conv, 0.0, None) / conv.max())
        ok = (rel > -11.5 if conv_fft else conv > 0) & (rel > quality[at])
        log_m = noisy * np.logaddexp(lp + lam, lq) + (n - noisy) * np.logaddexp(lq + lam, lp)
        out[at][ok] = np.log(conv[ok]) - lam * s[at][ok] + log_m + prior[at][ok]
        quality[at][ok] = rel[ok]
        sd = math.sqrt(noisy * p1 * (1 - p1) + (n - noisy) * p2 * (1 - p2))
        return max(3.0 * sd, 1.0)

    start = float(np.clip((noisy - n * (1 - p)) / (2 * p - 1), 0.0, n))
    step = tilt(start)
    for direction in (1.0, -1.0):
        c, cur = start, step
        while (direction > 0 and c < n) or (direction < 0 and c > 0):
            c = min(max(c + direction * cur, 0.0), float(n))
            cur = tilt(c)
            if out[round(c)] < float(np.max(out)) - 60.0:
                break
    return out


def _rr_posterior(a: float, b: float, n: int, noisy: int, keep: float) -> BetaMixture:
    """Exact posterior of theta given ``noisy`` reported ones out of n (keep prob ``keep``).

    prod q^noisy (1-q)^(n-noisy) expands to sum_s c_s theta^s (1-theta)^(n-s) with c the
    convolution of Bin(.; noisy, p) and Bin(.; n - noisy, 1 - p), so the posterior is the
    mixture of Beta(a + s, b + n - s) with weights c_s B(a + s, b + n - s) (BetaMixture
    drops components with weight < 1e-16).
    """
    s = np.arange(n + 1, dtype=float)
    logw = _log_rr_weights(a, b, n, noisy, keep)
    return BetaMixture.from_log_weights(logw, a + s, b + (n - s))


def noise_aware_posterior(rel: Release) -> BetaMixture | Normal:
    """The posterior that models the input noise of an ``mechanism="input"`` release."""
    if rel.mechanism != "input":
        raise ValueError(f"rel must be an 'input' release, got mechanism {rel.mechanism!r}")
    model = rel.model
    if isinstance(model, BetaBernoulli):
        coin = InputCoinRecord.of(rel)
        return _rr_posterior(
            model.alpha,
            model.beta,
            coin.n,
            int(rel.released["counts"][0]),
            coin.keep_probability,
        )
    if isinstance(model, NormalMean):
        normal = InputNormalRecord.of(rel)
        inflated = NormalMean(
            lower=model.lower,
            upper=model.upper,
            prior_mean=model.prior_mean,
            prior_sd=model.prior_sd,
            noise_sd=math.hypot(model.noise_sd, normal.sigma),
        )
        return inflated.posterior_from(SumStatistics(n=normal.n, total=rel.released["total"]))
    raise TypeError(f"no noise-aware posterior for {type(model).__name__}")


register_noise_aware("input", BetaBernoulli)(noise_aware_posterior)
register_noise_aware("input", NormalMean)(noise_aware_posterior)
