"""The fast coin path (CountBetaMixture): brute-force integration, agreement, coverage."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, special

from dpbayes.models import BetaBernoulli, CountStatistics
from dpbayes.models.mixtures import BetaMixture
from dpbayes.privacy import Neighbours
from dpbayes.privacy.noise import noise_source
from dpbayes.release.base import noise_aware_posterior
from dpbayes.release.counts.coin import CountBetaMixture, coin_count_posterior
from dpbayes.release.counts.mechanism import plan_counts
from dpbayes.release.counts.noise_aware import count_log_likelihood

Z = 3.891  # two-sided 1e-4 normal quantile


def _brute_cdf(t: float, y: float, n: int, a: float, b: float, kind: str, scale: float) -> float:
    """P(theta <= t | y) by quadrature of prior(theta) * sum_x Bin(x; n, theta) P(y | x)."""
    x = np.arange(n + 1, dtype=float)
    lik = np.exp(count_log_likelihood(y, x, kind, scale, float(n)))

    def dens(th: float) -> float:
        binom = np.exp(
            special.gammaln(n + 1.0)
            - special.gammaln(x + 1.0)
            - special.gammaln(n - x + 1.0)
            + special.xlogy(x, th)
            + special.xlog1py(n - x, -th)
        )
        return float(th ** (a - 1) * (1 - th) ** (b - 1) * (binom @ lik))

    num = integrate.quad(dens, 0.0, t, epsabs=0, epsrel=1e-11, limit=200)[0]
    den = num + integrate.quad(dens, t, 1.0, epsabs=0, epsrel=1e-11, limit=200)[0]
    return num / den


@pytest.mark.parametrize(
    ("y", "kind", "scale"),
    [
        (7.3, "laplace", 2.0),
        (0.0, "laplace", 5.0),
        (30.0, "laplace", 1.0),
        (12.0, "geometric", 3.0),
    ],
)
def test_interval_matches_brute_force_integration(y, kind, scale):
    n, a, b = 30, 2.0, 1.5
    post = coin_count_posterior(
        a, b, n, count_log_likelihood(y, np.arange(n + 1.0), kind, scale, n)
    )
    assert isinstance(post, CountBetaMixture)
    lo, hi = post.interval(0.9)
    assert _brute_cdf(lo, y, n, a, b, kind, scale) == pytest.approx(0.05, abs=1e-7)
    assert _brute_cdf(hi, y, n, a, b, kind, scale) == pytest.approx(0.95, abs=1e-7)
    assert post.ppf(0.5) == pytest.approx(
        BetaMixture(post.weights, post.a, post.b).ppf(0.5), abs=1e-9
    )


@pytest.mark.parametrize("eps", [0.01, 0.1, 1.0])
def test_fast_path_agrees_with_generic_mixture_at_n_1000(eps):
    model = BetaBernoulli(alpha=1.0, beta=1.0)
    for s in (0, 4, 350, 996, 1000):
        plan = plan_counts(
            model,
            CountStatistics(counts=np.array([s, 1000 - s]), n=1000),
            epsilon=eps,
            delta=0.0,
            neighbours=Neighbours.SUBSTITUTE,
            mechanism="laplace",
        )
        rel = plan.run(noise_source(s))
        fast = noise_aware_posterior(rel)
        slow = BetaMixture(fast.weights, fast.a, fast.b)
        assert np.allclose(fast.interval(0.9), [slow.ppf(0.05), slow.ppf(0.95)], atol=1e-9)
        assert fast.mean() == pytest.approx(slow.mean(), abs=1e-12)
        # pruning drops only rungs below 1e-12 of the largest, from the ends
        assert fast.weights[0] <= 1e-11 * fast.weights.max() or fast.a[0] == 1.0
        assert fast.weights[-1] <= 1e-11 * fast.weights.max() or fast.b[-1] == 1.0


def test_coverage_of_fast_path_is_nominal_at_small_eps():
    """Draw theta from the prior, a count, a Laplace release; the 90% interval covers."""
    model = BetaBernoulli(alpha=1.0, beta=1.0)
    src = noise_source(11)
    gen = src.generator()
    reps, n, hits = 600, 200, 0
    for _ in range(reps):
        theta = float(gen.beta(1.0, 1.0))
        s = int(gen.binomial(n, theta))
        plan = plan_counts(
            model,
            CountStatistics(counts=np.array([s, n - s]), n=n),
            epsilon=0.05,
            delta=0.0,
            neighbours=Neighbours.SUBSTITUTE,
            mechanism="laplace",
        )
        lo, hi = noise_aware_posterior(plan.run(src)).interval(0.9)
        hits += lo <= theta <= hi
    assert abs(hits / reps - 0.9) <= Z * math.sqrt(0.09 / reps)


def test_compiled_path_equals_the_plain_mixture():
    """The compiled ladder (pruned weights, Newton quantiles) equals the plain Beta mixture
    over every true count, with weights prior predictive x likelihood computed in scipy."""
    from scipy import special, stats

    from dpbayes.release.counts.coin import coin_count_posterior

    n, a, b = 1000, 1.0, 2.0
    x = np.arange(n + 1.0)
    log_prior = (
        special.gammaln(a + x)
        + special.gammaln(b + n - x)
        - special.gammaln(x + 1)
        - special.gammaln(n - x + 1)
    )
    for y, scale in ((0.0, 100.0), (431.5, 10.0), (1000.0, 1.0), (17.0, 1.0)):
        ll = count_log_likelihood(y, x, "laplace", scale, float(n))
        fast = coin_count_posterior(a, b, n, ll)
        lw = log_prior + ll
        w = np.exp(lw - lw.max())
        w /= w.sum()
        mean = float(np.sum(w * (a + x) / (a + b + n)))
        assert fast.mean() == pytest.approx(mean, abs=1e-12)
        lo, hi = fast.interval(0.9)
        cdf = [float(np.sum(w * stats.beta.cdf(t, a + x, b + n - x))) for t in (lo, hi)]
        assert cdf == pytest.approx([0.05, 0.95], abs=1e-8)


def _oracle(a: float, b: float, n: int, y: float, scale: float) -> tuple[float, np.ndarray]:
    """Mean and weights of the noise-aware coin posterior in 160-digit arithmetic (mpmath:
    enough that b + n - x is exact for b up to 1e100 and log B keeps 40 digits there; summed
    as b + (n - x), which keeps b = 1e-300 at x = n):
    weights proportional to C(n, x) B(a + x, b + n - x) exp(-|y - x| / scale)
    (untruncated Laplace, y inside [0, n])."""
    import mpmath as mp

    with mp.workdps(160):
        am, bm = mp.mpf(a), mp.mpf(b)
        lw = [
            mp.log(mp.binomial(n, x)) + mp.log(mp.beta(am + x, bm + (n - x))) - abs(y - x) / scale
            for x in range(n + 1)
        ]
        top = max(lw)
        w = [mp.e ** (v - top) for v in lw]
        tot = mp.fsum(w)
        mean = mp.fsum(w[x] * (am + x) / (am + bm + n) for x in range(n + 1)) / tot
        return float(mean), np.array([float(v / tot) for v in w])


@pytest.mark.parametrize("y", [12.3, 30.0])
@pytest.mark.parametrize(
    ("a", "b"),
    [
        (1.0, 1e8),
        (1e8, 1.0),
        (1e8, 1e8),
        (1e-300, 1.0),
        (1e-30, 1.0),
        (1.0, 1e-300),
        (0.5, 0.5),
        (1e-3, 1e7),
    ],
)
def test_extreme_priors_match_high_precision_arithmetic(a: float, b: float, y: float) -> None:
    """Reviews: at Beta(1, 1e17) the posterior mean was 5e-17 (the truth 1e-17) and the
    interval's ends were swapped; at Beta(1e12, 1) and Beta(1e-300, 1) it raised
    ZeroDivisionError, at Beta(1, 1e-300) "probability 0" (b + n - x rounded b away); at
    the Jeffreys prior Beta(0.5, 0.5) an interval end stopped where the density is
    infinite (0.99999999818 for 0.99262). The log-gamma differences of the prior's tables
    cancelled, the moments' variance underflowed, the quantiles stopped at an absolute
    width of 1e-15 or at a tiny Newton step. Now the mean is within 1e-9 (relative, no
    absolute slack) of 160-digit arithmetic, and the
    mixture's CDF (scipy's incomplete beta, or its gamma limit for b >= 1e12, with those
    weights) is 0.05 and 0.95 at the interval's ends, where the doubles resolve them (not
    within 1e-10 of 1, not below the normal doubles)."""
    from scipy import special

    n, scale = 40, 2.0
    x = np.arange(n + 1.0)
    post = coin_count_posterior(a, b, n, count_log_likelihood(y, x, "laplace", scale, None))
    mean, w = _oracle(a, b, n, y, scale)
    # Beta(1e-30, 1): the mean was 2.4e-32 for 4.5e-29 (rungs of weight < 1e-12 carry it)
    assert post.mean() == pytest.approx(mean, rel=1e-9, abs=0.0)
    lo, hi = post.interval(0.9)
    assert 0.0 <= lo <= hi <= 1.0
    if 1e-300 < lo and hi < 1.0 - 1e-10:

        def component_cdf(t: float) -> np.ndarray:
            if b >= 1e12:  # I_t(alpha, beta) -> P(alpha, beta t), error O(alpha^2 / beta)
                return special.gammainc(a + x, (b + n - x) * t)
            return special.betainc(a + x, b + n - x, t)

        cdf = [float(np.sum(w * component_cdf(t))) for t in (lo, hi)]
        assert cdf == pytest.approx([0.05, 0.95], abs=1e-5)


def test_priors_beyond_the_log_beta_range_are_refused_by_name() -> None:
    x = np.arange(11.0)
    ll = count_log_likelihood(3.0, x, "laplace", 1.0, None)
    for a, b in ((1.0, 1e12), (1e17, 1e17), (1e-310, 1.0)):
        with pytest.raises(ValueError, match="noise-aware coin posterior needs prior parameters"):
            coin_count_posterior(a, b, 10, ll)
    post = coin_count_posterior(1e-300, 1.0, 10, ll)  # the smallest accepted: no error
    assert 0.0 <= post.mean() < 1e-290


def test_quantiles_below_the_doubles_are_zero() -> None:
    """0.5 Beta(1e-30, 41) + 0.5 Beta(1, 40): the first component's mass sits below any
    double, so every quantile below 1/2 is 0 (the bisection stopped after 200 halvings of
    [0, 1], at 7.6e-63), and the 0.95 quantile is the second's 0.9 quantile."""
    from dpbayes.release.counts.coin import _tables

    n, a = 40, 1e-30
    prior = _tables(a, 1.0, n)[0]
    log_lik = np.full(n + 1, -np.inf)
    log_lik[:2] = -prior[:2]  # equal weights on x = 0 and x = 1
    post = coin_count_posterior(a, 1.0, n, log_lik)
    np.testing.assert_allclose(post.weights, [0.5, 0.5], rtol=1e-12)
    assert post.ppf(0.25) == 0.0 and post.ppf(0.45) == 0.0
    lo, hi = post.interval(0.9)
    assert lo == 0.0
    assert hi == pytest.approx(1.0 - 0.1 ** (1 / 40), rel=1e-9)
