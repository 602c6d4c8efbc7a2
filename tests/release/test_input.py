"""Input perturbation: the per-record noise, naive and noise-aware posteriors, coverage."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import special, stats

from dpbayes.models import BetaBernoulli, NormalMean
from dpbayes.models.mixtures import BetaMixture
from dpbayes.release import release
from dpbayes.release.input.noise_aware import _rr_posterior, noise_aware_posterior

P_MIN = 1e-4


def brute_rr_mean(a: float, b: float, n: int, noisy: int, p: float) -> float:
    """Posterior mean from a log-space O(n^2) convolution (the definition)."""
    lf = stats.binom.logpmf(np.arange(noisy + 1), noisy, p)
    lg = stats.binom.logpmf(np.arange(n - noisy + 1), n - noisy, 1 - p)
    lc = np.full(n + 1, -np.inf)
    for i in range(noisy + 1):
        lc[i : i + n - noisy + 1] = np.logaddexp(lc[i : i + n - noisy + 1], lf[i] + lg)
    s = np.arange(n + 1.0)
    lw = lc + special.betaln(a + s, b + n - s)
    w = np.exp(lw - special.logsumexp(lw))
    return float(np.sum(w * (a + s) / (a + b + n)))


@pytest.mark.parametrize(
    ("a", "b", "n", "noisy", "p"),
    [
        (1, 1, 50, 20, 0.7),
        (0.5, 2, 300, 200, 0.6),
        (2, 3, 3000, 900, 0.73),
        (1, 1, 4000, 3990, 0.6),
        (1, 1, 1, 1, 0.7),
        (1, 1, 2500, 0, 0.9),
        (1, 1, 4000, 3500, 0.6),
        (1, 1, 5000, 3, 0.8),  # one side of 3 reports: tilts of windows, not rows
        (3, 0.5, 5000, 4998, 0.95),
    ],
)
def test_noise_aware_mixture_matches_definition(a, b, n, noisy, p) -> None:
    mix = _rr_posterior(a, b, n, noisy, p)
    assert mix.mean() == pytest.approx(brute_rr_mean(a, b, n, noisy, p), rel=1e-9)
    assert np.sum(mix.weights) == pytest.approx(1.0)


def test_mixture_against_density_on_a_grid() -> None:
    a, b, n, noisy, p = 2.0, 1.5, 40, 25, 0.75
    mix = _rr_posterior(a, b, n, noisy, p)
    t = np.linspace(1e-6, 1 - 1e-6, 200_001)
    q = p * t + (1 - p) * (1 - t)
    log_f = (
        (a - 1) * np.log(t)
        + (b - 1) * np.log1p(-t)
        + noisy * np.log(q)
        + (n - noisy) * np.log1p(-q)
    )
    f = np.exp(log_f - log_f.max())
    f /= np.trapezoid(f, t)
    np.testing.assert_allclose(mix.pdf(t[::5000]), f[::5000], rtol=1e-6, atol=1e-8)
    lo, hi = mix.interval(0.9)
    assert float(mix.cdf(hi) - mix.cdf(lo)) == pytest.approx(0.9, abs=1e-10)
    assert isinstance(mix, BetaMixture) and mix.var() > 0


def _density_moments(a: float, b: float, n: int, noisy: int, p: float) -> tuple[float, float]:
    """Posterior mean and cdf at the mean from theta's density (mpmath, 30 digits).

    f(theta) ~ theta^(a-1) (1-theta)^(b-1) q^noisy (1-q)^(n-noisy), q = p theta + (1-p)(1-theta),
    integrated piecewise over steps of the likelihood's width around its mode.
    """
    mp = pytest.importorskip("mpmath")
    mp.mp.dps = 30
    k = 2 * p - 1
    q_hat = min(max(noisy / n, 1 - p), p)
    mode = (q_hat - (1 - p)) / k
    slope = k * abs(noisy / q_hat - (n - noisy) / (1 - q_hat))  # at an end of [0, 1]
    widths = (math.sqrt(q_hat * (1 - q_hat) / n) / k, 1.0 / max(slope, 1e-300))
    steps = np.concatenate([mode + w * np.arange(-60, 61, 2) for w in widths])
    pts = sorted({0.0, 1.0, *np.clip(steps, 0.0, 1.0)})

    def log_f(t):
        q = p * t + (1 - p) * (1 - t)
        return (
            (a - 1) * mp.log(t)
            + (b - 1) * mp.log1p(-t)
            + noisy * mp.log(q)
            + (n - noisy) * mp.log1p(-q)
        )

    top = log_f(mp.mpf(min(max(mode, 1e-300), 1 - 1e-16)))

    def dens(t):
        return mp.exp(log_f(t) - top)

    def integral(g, upto: float = 1.0):
        cuts = [t for t in pts if t < upto] + [upto]
        return sum(mp.quad(g, [lo, hi]) for lo, hi in itertools.pairwise(cuts) if hi > lo)

    norm = integral(dens)
    mean = integral(lambda t: t * dens(t)) / norm
    return float(mean), float(integral(dens, float(mean)) / norm)


@pytest.mark.parametrize(
    ("a", "b", "n", "noisy", "eps"),
    [
        (1.0, 1.0, 200_000, 100_140, 0.01),  # the posterior spans most of [0, 1]
        (2.0, 3.0, 1_000_000, 353_000, 1.0),
        (0.5, 0.5, 100_000, 0, 2.0),  # every report a zero
        (3.0, 1.0, 100_000, 100_000, 0.1),  # every report a one
        (1.0, 1.0, 1_000_000, 100, 6.9),  # 100 ones: 4.3 s in log-space rows, now 0.2 s
    ],
)
def test_randomized_response_mixture_at_large_n_matches_the_density(a, b, n, noisy, eps):
    # many tilts, each convolving only the windows of its two binomials
    p = math.exp(eps) / (1 + math.exp(eps))
    mix = _rr_posterior(a, b, n, noisy, p)
    mean, cdf_at_mean = _density_moments(a, b, n, noisy, p)
    assert mix.mean() == pytest.approx(mean, rel=1e-9)
    assert float(mix.cdf(mean)) == pytest.approx(cdf_at_mean, abs=1e-8)


def test_randomized_response_count_distribution() -> None:
    model = BetaBernoulli(alpha=1, beta=1)
    data = np.r_[np.ones(7, dtype=int), np.zeros(13, dtype=int)]
    eps = 1.0
    p = math.exp(eps) / (1 + math.exp(eps))
    rng = np.random.default_rng(5)
    draws = np.array(
        [
            release(model, data, mechanism="input", epsilon=eps, rng=rng).released["counts"][0]
            for _ in range(1500)
        ]
    )
    exact = np.convolve(
        stats.binom.pmf(np.arange(8), 7, p), stats.binom.pmf(np.arange(14), 13, 1 - p)
    )
    observed = np.bincount(draws, minlength=21)
    keep = exact * draws.size >= 5
    obs = np.append(observed[keep], observed[~keep].sum())
    exp = np.append(exact[keep], exact[~keep].sum()) * draws.size
    assert stats.chisquare(obs, exp).pvalue > P_MIN


def test_gaussian_input_noise_moments_and_secure_path() -> None:
    model = NormalMean(lower=-2, upper=2, prior_mean=0, prior_sd=5, noise_sd=1)
    x = np.linspace(-1, 1, 30)
    rels = [
        release(model, x, mechanism="input", epsilon=1.0, delta=1e-5, rng=s) for s in range(400)
    ]
    sigma = rels[0].public["sigma"]
    totals = np.array([r.released["total"] for r in rels])
    sd = sigma * math.sqrt(30)
    # mean of 400 totals within a 1e-4 two-sided z-bound
    assert abs(totals.mean() - x.sum()) < 3.9 * sd / math.sqrt(400)
    assert totals.std(ddof=1) == pytest.approx(sd, rel=4 * math.sqrt(1 / (2 * 399)))
    secure = release(model, x, mechanism="input", epsilon=1.0, delta=1e-5)
    assert not secure.simulation and secure.guarantee.delta == 1e-5


def coverage(kind: str, reps: int, seed: int) -> tuple[float, float]:
    rng = np.random.default_rng(seed)
    hits_naive = hits_aware = 0
    for _ in range(reps):
        if kind == "coin":
            model = BetaBernoulli(alpha=2, beta=2)
            theta = rng.beta(2, 2)
            data = (rng.random(200) < theta).astype(int)
            rel = release(model, data, mechanism="input", epsilon=1.0, rng=rng)
        else:
            model = NormalMean(lower=-20, upper=20, prior_mean=0, prior_sd=2, noise_sd=1)
            theta = rng.normal(0, 2)
            data = rng.normal(theta, 1, 100)
            rel = release(model, data, mechanism="input", epsilon=1.0, delta=1e-5, rng=rng)
        lo, hi = rel.posterior.interval(0.95)
        hits_naive += lo <= theta <= hi
        lo, hi = noise_aware_posterior(rel).interval(0.95)
        hits_aware += lo <= theta <= hi
    return hits_naive / reps, hits_aware / reps


@pytest.mark.parametrize("kind", ["coin", "normal"])
def test_noise_aware_intervals_keep_coverage_naive_do_not(kind: str) -> None:
    # theta drawn from the prior: the noise-aware posterior is exactly calibrated
    reps = 120
    naive, aware = coverage(kind, reps, seed=1)
    tol = 3.9 * math.sqrt(0.95 * 0.05 / reps)  # 1e-4 two-sided z-bound
    assert abs(aware - 0.95) < tol
    assert naive < 0.6


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"delta": 1e-6}, "delta must be 0"),
        ({"foo": 1}, "unknown option"),
        ({"neighbours": "add-remove"}, "substitute"),
    ],
)
def test_input_validation(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        release(BetaBernoulli(), [0, 1], mechanism="input", epsilon=1.0, **kwargs)


def test_gaussian_input_needs_delta() -> None:
    with pytest.raises(ValueError, match="delta must be > 0"):
        release(NormalMean(lower=0, upper=1), [0.5], mechanism="input", epsilon=1.0)


def test_randomized_response_at_a_prior_parameter_of_1e_300() -> None:
    # b + n - s rounded b = 1e-300 away at s = n: every weight was invalid. Beta(a, 1e-300)
    # puts 1e300 times more prior weight on s = n (B(a + n, 1e-300) ~ 1e300) than on any
    # other count, so the posterior is Beta(51, 1e-300), whose mean is 1 in doubles
    mix = _rr_posterior(1.0, 1e-300, 50, 50, 0.8)
    assert mix.weights[-1] == pytest.approx(1.0, abs=1e-15) and mix.b[-1] == 1e-300
    assert mix.mean() == pytest.approx(1.0, abs=1e-15)


@pytest.mark.parametrize(
    ("model", "kwargs", "message"),
    [
        ("coin", {"neighbours": "add_remove"}, "neighbours must be 'substitute'"),
        ("coin", {"delta": 1e-6}, "delta must be 0 for randomized response"),
        ("normal", {"delta": 0.0}, "delta must be > 0"),
        ("normal", {"neighbours": "add_remove", "delta": 1e-6}, "must be 'substitute'"),
        ("normal", {"epsilon": 1e-200, "delta": 1e-280}, "too small for these bounds"),
        ("wide", {"delta": 1e-6}, "lower and upper must be within"),
    ],
)
def test_public_refusals_come_before_the_data_checks(model, kwargs, message):
    """A refusal that follows from the model, eps, delta and neighbours alone must not wait
    for the data: with a missing value among the records it still answers."""
    m = {
        "coin": BetaBernoulli(alpha=1.0, beta=1.0),
        "normal": NormalMean(lower=-2, upper=2, prior_mean=0, prior_sd=5, noise_sd=1),
        "wide": NormalMean(lower=-1e160, upper=1e160, prior_mean=0, prior_sd=5, noise_sd=1),
    }[model]
    args = {"epsilon": 1.0, **kwargs}
    for data in ([0, 1, 1], [0, 1, None]):
        with pytest.raises(ValueError, match=message):
            release(m, data, mechanism="input", **args)
