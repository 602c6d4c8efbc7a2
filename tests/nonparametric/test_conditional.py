"""The exact cluster-value conditionals (paper 001 Appendix A; Gaussian conjugate update)
against numerically normalised posteriors on a grid, and their samplers against those CDFs."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import integrate, special, stats

from dpbayes.nonparametric import LocalGaussian, LocalLaplace
from dpbayes.nonparametric.kernels_truncnorm import truncnorm_ppf_scalar
from dpbayes.nonparametric.truncnorm import log_diff_ndtr

ALPHA = 1e-4

CASES = [
    # (z's of one cluster, epsilon, r, mu, sigma)
    (np.array([-0.3, 0.1, 0.2, 0.8, 0.95]), 1.0, 1.0, 0.0, 1.0),
    (np.array([-4.0, -1.5, -0.2, 0.0, 0.0, 0.7, 1.2, 6.0]), 2.0, 1.0, 0.3, 2.0),  # outside, ties
    (np.array([2.5, 3.0, 7.0]), 0.5, 3.0, 5.0, 0.5),  # prior far in the right tail
    (np.linspace(-0.9, 0.9, 400) + 0.05, 4.0, 1.0, 0.0, 1.0),  # many points, large exponents
]


def grid_posterior(mech, z, mu, sigma, x):
    """Unnormalised log posterior log N(x; mu, sigma^2) + sum log Q(z | x), normalised on x."""
    lp = stats.norm(mu, sigma).logpdf(x)
    for zi in z:
        lp += mech.loglik(zi, x)
    p = np.exp(lp - lp.max())
    cum = integrate.cumulative_trapezoid(p, x, initial=0.0)
    return p / cum[-1], cum / cum[-1]


def pieces_of(mech, z, mu, sigma):
    zs = np.sort(z)
    return mech.conditional(zs, np.arange(zs.size), np.array([0, zs.size]), mu, sigma)


def fine_grid(mu, sigma, z, r):
    lo = min(mu - 12 * sigma, -r - 1.0)
    hi = max(mu + 12 * sigma, r + 1.0)
    return np.linspace(lo, hi, 200_001)


@pytest.mark.parametrize("kind", ["laplace", "gaussian"])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_conditional_matches_grid_posterior(kind, case):
    z, eps, r, mu, sigma = CASES[case]
    mech = (
        LocalLaplace(epsilon=eps, r=r)
        if kind == "laplace"
        else LocalGaussian(epsilon=eps, delta=1e-5, r=r)
    )
    x = fine_grid(mu, sigma, z, r)
    dens, cdf = grid_posterior(mech, z, mu, sigma, x)
    pieces = pieces_of(mech, z, mu, sigma)
    assert np.isclose(np.exp(pieces.log_weights()).sum(), 1.0)
    # density at points away from the kinks (the breakpoints and +-r)
    probe = x[::499]
    keep = np.min(np.abs(probe[:, None] - np.concatenate([np.sort(z), [-r, r]])), axis=1) > 1e-3
    probe = probe[keep & (np.interp(probe, x, dens) > 1e-8 * dens.max())]
    exact = np.exp(pieces.logpdf(probe))
    np.testing.assert_allclose(exact, np.interp(probe, x, dens), rtol=2e-4)
    np.testing.assert_allclose(pieces.cdf(x[::500]), cdf[::500], atol=1e-5)


@pytest.mark.parametrize("case", [1, 2, 3])
def test_conditional_sampler_ks(case):
    z, eps, r, mu, sigma = CASES[case]
    mech = LocalLaplace(epsilon=eps, r=r)
    pieces = pieces_of(mech, z, mu, sigma)
    # 4000 copies of the cluster: one vectorised draw from each
    zs, copies = np.sort(z), 4000
    many = mech.conditional(
        zs, np.tile(np.arange(zs.size), copies), np.arange(copies + 1) * zs.size, mu, sigma
    )
    gen = np.random.default_rng(100 + case)
    draws = many.sample(gen.gumbel(size=many.seg.size), gen.random(copies))
    res = stats.kstest(draws, lambda t: pieces.cdf(np.asarray(t)))
    assert res.pvalue > ALPHA, f"KS p = {res.pvalue:.3g}"


def test_log_marginal_matches_quadrature():
    for mech in (
        LocalLaplace(epsilon=1.0, r=2.0),
        LocalGaussian(epsilon=1.0, delta=1e-6, r=2.0),
    ):
        zs = np.array([-9.0, -2.5, -0.4, 0.0, 1.7, 3.0])
        lm = mech.log_marginal(zs, 0.5, 1.5)
        for zi, v in zip(zs, lm, strict=True):

            def f(x, zi=zi, mech=mech):
                return float(np.exp(mech.loglik(zi, x))) * stats.norm.pdf(x, 0.5, 1.5)

            kink = [min(max(zi, -2.0), 2.0)]
            q = (
                integrate.quad(f, -np.inf, -2.0, epsabs=0, epsrel=1e-10)[0]
                + integrate.quad(f, -2.0, 2.0, points=kink, epsabs=0, epsrel=1e-10)[0]
                + integrate.quad(f, 2.0, np.inf, epsabs=0, epsrel=1e-10)[0]
            )
            assert np.isclose(v, np.log(q), rtol=0, atol=1e-8), (type(mech).__name__, zi)


def test_log_diff_ndtr_tails_and_truncnorm_ppf():
    a = np.array([-50.0, -3.0, 0.5, 30.0, 2.0, -np.inf, 1.0])
    b = np.array([-49.0, 2.0, 0.6, 31.0, np.inf, -40.0, 1.0])
    got = log_diff_ndtr(a, b)
    # references: scipy's log_ndtr at the far end dominates in the tails
    assert np.isclose(got[0], special.log_ndtr(-49.0), atol=1e-6)
    assert np.isclose(got[1], np.log(special.ndtr(2.0) - special.ndtr(-3.0)))
    assert np.isclose(got[2], np.log(special.ndtr(0.6) - special.ndtr(0.5)))
    assert np.isclose(got[3], special.log_ndtr(-30.0), atol=1e-6)
    assert np.isclose(got[4], special.log_ndtr(-2.0))
    assert np.isclose(got[5], special.log_ndtr(-40.0))
    assert got[6] == -np.inf


def _exact_truncnorm_quantile(u, a, b):
    """The u quantile of N(0, 1) restricted to [a, b] (mpmath, 50 digits; the side of 0
    where the cdf is accurate; infinite ends at +-1000)."""
    import mpmath as mp

    mp.mp.dps = 50
    a, b = mp.mpf(max(a, -1000.0)), mp.mpf(min(b, 1000.0))
    lower = mp.ncdf(a) + mp.mpf(u) * (mp.ncdf(b) - mp.ncdf(a))
    if lower < 0.5:
        x = mp.findroot(lambda t: mp.log(mp.ncdf(t) / lower), -mp.sqrt(-2 * mp.log(lower)))
    else:
        upper = mp.ncdf(-b) + (1 - mp.mpf(u)) * (mp.ncdf(b) - mp.ncdf(a))
        x = mp.findroot(lambda t: mp.log(mp.ncdf(-t) / upper), mp.sqrt(-2 * mp.log(upper)))
    return float(min(max(x, a), b))


def test_truncated_normal_quantile_is_exact_in_both_tails():
    """The compiled inverse cdf behind every base and Appendix A draw, against mpmath
    within 1e-11 (standard units) for u from 1e-300 to 1 - 1e-16. It solved log Phi(x) on
    the lower side only, where Phi(x) near 1 leaves no digits: on [0, 40] the quantile
    1 - 1e-16 came out as 14.0 instead of 8.29, 1 - 1e-9 as 6.10941023 instead of
    6.10941021."""
    us = [1e-300, 1e-17, 1e-9, 0.1, 0.5, 0.9, 1 - 1e-9, 1 - 1e-16]
    ends = [(0.0, 40.0), (-1.0, 1.0), (-40.0, 0.0), (-3.0, 2.0), (2.0, 2.5), (8.0, np.inf),
            (-np.inf, -30.0), (-30.0, -29.0), (-50.0, 50.0), (-5.0, np.inf), (-np.inf, 5.0),
            (5.0, 6.0), (-2.0, 38.0), (-38.0, 2.0), (0.5, 40.0)]  # fmt: skip
    for a, b in ends:
        for u in us:
            x = truncnorm_ppf_scalar(u, a, b)
            assert abs(x - _exact_truncnorm_quantile(u, a, b)) <= 1e-11, (a, b, u, x)


def test_newtons_start_is_wichuras_normal_quantile():
    """The start of Newton on log Phi (AS241 from log p) against scipy's ndtri, 1e-15
    relative, in the centre and both tails (p from 1e-300 to 1 - 1e-12); -inf and log p
    >= 0 give the bracket's ends."""
    from dpbayes.nonparametric.kernels_truncnorm import _ndtri_log_start

    ps = [1e-300, 1e-100, 1e-20, 1e-5, 0.01, 0.075, 0.3, 0.5, 0.8, 0.925, 0.99, 1 - 1e-12]
    for p in ps:
        ref = special.ndtri(p)
        assert abs(_ndtri_log_start(np.log(p), -50.0, 50.0) - ref) <= 1e-15 * max(abs(ref), 1), p
    assert _ndtri_log_start(-np.inf, -50.0, 50.0) == -50.0
    assert _ndtri_log_start(0.0, -50.0, 50.0) == 50.0


@pytest.mark.parametrize("sizes", [(1, 2, 5), (3000, 40, 1)])
def test_piece_choice_is_the_gumbel_argmax_over_every_piece(sizes):
    """sample_pieces evaluates a piece's Normal mass only when const + Gumbel (an upper
    bound of its Gumbel-perturbed log mass) beats the best so far: the chosen pieces, and
    so the draws, are those of the argmax over all pieces."""
    from dpbayes.nonparametric import kernels_truncnorm as kt

    mech = LocalLaplace(epsilon=1.0, r=1.0)
    g = np.random.default_rng(7)
    z = np.concatenate(
        [np.sort(g.normal(c, 1.5, m)) for c, m in zip((-0.4, 0.3, 2), sizes, strict=True)]
    )
    starts = np.concatenate([[0], np.cumsum(sizes)])
    for tails in (True, False):
        pieces = mech.conditional(z, np.arange(z.size), starts, 0.1, 0.7, tails=tails)
        seg, k = pieces.seg.astype(np.int64), len(sizes)
        for _ in range(20):
            gum, u = g.gumbel(size=seg.size), g.random(k)
            v = pieces.log_mass() + gum
            want = [int(np.flatnonzero(seg == c)[np.argmax(v[seg == c])]) for c in range(k)]
            lo, hi, m, s = pieces.lo[want], pieces.hi[want], pieces.mean[want], pieces.sd[want]
            x = [
                m[c]
                + s[c] * truncnorm_ppf_scalar(u[c], (lo[c] - m[c]) / s[c], (hi[c] - m[c]) / s[c])
                for c in range(k)
            ]
            expect = np.clip(x, lo, hi)
            got = kt.sample_pieces(
                seg, pieces.lo, pieces.hi, pieces.mean, pieces.sd, pieces.const, k, gum, u
            )
            np.testing.assert_array_equal(got, expect)
