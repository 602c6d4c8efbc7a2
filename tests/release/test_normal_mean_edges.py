"""The Normal-mean release at numerical edges (an attacker's review): no failure that
depends on the data, before the noise (a number beyond the doubles) or after it (the
posterior step at extreme priors)."""

from __future__ import annotations

import math
import sys
from fractions import Fraction

import numpy as np
import pytest

from dpbayes.models import NormalMean
from dpbayes.models.statistics import SumStatistics
from dpbayes.privacy import Accountant
from dpbayes.release.base import release

HUGE = 10**400


@pytest.mark.parametrize(
    ("record", "as_bound"),
    [(HUGE, 1.0), (-HUGE, 0.0), (Fraction(HUGE), 1.0), (-Fraction(HUGE), 0.0)],
    ids=["int", "-int", "Fraction", "-Fraction"],
)
def test_a_number_beyond_the_doubles_is_clamped_like_inf(record, as_bound):
    """[1, 0, 10**400] raised OverflowError (nothing spent) where [1, 0, 1] released."""
    m = NormalMean(lower=0.0, upper=1.0)
    for data, same in (
        ([1, 0, record], [1, 0, as_bound]),
        ([0.5, 0.5, record], [0.5, 0.5, as_bound]),
    ):
        assert m.statistics(data) == m.statistics(same)
    for neighbours in ("substitute", "add_remove"):
        acc = Accountant(epsilon=10.0, simulation=True)
        release(
            m, [1, 0, record], mechanism="laplace", epsilon=1.0, neighbours=neighbours,
            accountant=acc, rng=0,
        )  # fmt: skip
        assert acc.spent[0] == pytest.approx(1.0)
    release(m, [0.5, 0.5, record], mechanism="input", epsilon=1.0, delta=1e-6, rng=0)


def test_the_posterior_step_returns_a_posterior_for_every_noisy_count():
    """noise_sd = 1e-322: the sd underflowed to 0 for noisy counts >= 1600 and the release
    failed after its noise with a probability that depends on n (0.39 against 0.61 at
    n = 1599 and 1600, eps 1)."""
    m = NormalMean(lower=0.0, upper=1.0, noise_sd=1e-322)
    for n_hat in (1, 1599, 1600, 10**6, 10**30):
        post = m.posterior_from(SumStatistics(n=n_hat, total=0.5 * n_hat))
        assert post.sd > 0 and math.isfinite(post.loc)
    big = sys.float_info.max
    for noise_sd in np.geomspace(0.1, 10.0, 9):
        m = NormalMean(lower=-big, upper=big, prior_mean=big, noise_sd=float(noise_sd))
        for n_hat in (1, 2, 3):
            post = m.posterior_from(SumStatistics(n=n_hat, total=big))
            assert math.isfinite(post.loc) and post.sd > 0


def test_add_remove_release_never_fails_after_the_noise_at_a_subnormal_noise_sd():
    m = NormalMean(lower=0.0, upper=1.0, noise_sd=1e-322)
    acc = Accountant(epsilon=100.0, simulation=True)
    for seed in range(40):
        release(
            m, [0.5] * 1600, mechanism="laplace", epsilon=1.0, neighbours="add_remove",
            accountant=acc, rng=seed,
        )  # fmt: skip
    assert len(acc.spends) == 40


def test_none_beside_a_number_beyond_the_doubles_reads_as_missing():
    """[0.5, None, 10**400] raised TypeError where [0.5, None, 1] read None as NaN: the
    refusal's message told whether a huge value was present."""
    from dpbayes.data.exact import as_doubles

    got = as_doubles([0.5, None, HUGE])
    assert got[0] == 0.5 and np.isnan(got[1]) and got[2] == np.inf
    np.testing.assert_array_equal(np.isnan(as_doubles([0.5, None, 1])), [False, True, False])


def test_the_laplace_normal_convolution_is_accurate_when_the_laplace_is_tiny():
    """The density of N(0, var) + Laplace(b) was c - z/b + log Phi(...) with c = var/2b^2:
    the two huge parts cancelled once tau/b was large (a review: eps ~ 1e8 on the bundled
    data gave an interval 2.3x too wide, eps 1e10 "math range error")."""
    from scipy import special, stats

    from dpbayes.release.counts.normal_n import _log_f_t

    for z, var in [(0.5, 100.0), (-3.0, 1.0), (40.0, 400.0), (0.0, 1e-6)]:
        for b in (1e-4, 1e-8, 1e-12, 1e-200):
            ref = stats.norm.logpdf(z, scale=math.sqrt(var))  # the limit b -> 0
            assert _log_f_t(z, var, b, False) == pytest.approx(ref, abs=2e-4 * b / 1e-8 + 1e-9)
    for z, var, b in [(0.3, 1.0, 0.5), (2.0, 4.0, 0.1), (-1.0, 0.25, 2.0), (5.0, 1.0, 1e-3)]:
        tau = math.sqrt(var)
        tb, zt = tau / b, z / tau
        # erfcx form of the convolution: (1/2b) e^(-z^2/2var) (erfcx(x-) + erfcx(x+)) / 2
        tails = special.erfcx((tb - zt) / math.sqrt(2)) + special.erfcx((tb + zt) / math.sqrt(2))
        ref = -0.5 * zt * zt - math.log(4.0 * b) + math.log(tails)
        assert _log_f_t(z, var, b, False) == pytest.approx(ref, rel=1e-12)
    assert (
        _log_f_t(1e200, 1.0, 1.0, False) == -math.inf or _log_f_t(1e200, 1.0, 1.0, False) < -1e199
    )


@pytest.mark.parametrize("eps", [1e8, 1e10, 1e300])
def test_the_noise_aware_normal_mean_at_a_huge_eps_is_the_naive_one(eps):
    """At a huge eps the noise is negligible: the noise-aware posterior (private n, add/
    remove) must agree with the naive one, not be wider or fail after the charge."""
    g = np.random.default_rng(3)
    m = NormalMean(lower=0.0, upper=10.0, noise_sd=2.0)
    rel = release(
        m, g.normal(4.0, 2.0, 500).clip(0, 10), mechanism="laplace", epsilon=eps,
        neighbours="add_remove", rng=1,
    )  # fmt: skip
    na = rel.noise_aware_posterior().interval(0.95)
    naive = rel.posterior.interval(0.95)
    np.testing.assert_allclose(na, naive, atol=1e-4)
