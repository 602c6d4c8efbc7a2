"""Cancellation-free lgamma differences against 40-digit mpmath, across every branch."""

from __future__ import annotations

import mpmath as mp  # test-only dependency: high-precision reference values
import numpy as np
import pytest

from dpbayes.models.lgamma_differences import bregman_lgamma, jensen_lgamma, log1pmx

mp.mp.dps = 40
# midpoints/bases from 1e-40 (the polygamma series overflowed there) and on both sides of
# x = 20 up to 1e7; relative differences on both sides
# of the Taylor thresholds (0.005, 0.02) and of the t = 0.5 switch
BASES = [1e-40, 1e-12, 0.05, 0.7, 5.0, 19.9, 20.1, 60.0, 1e4, 1e7]  # tiny: m, x -> 0
RELS = [1e-9, 1e-4, 0.004, 0.006, 0.019, 0.021, 0.4, 0.6, 0.999]


@pytest.mark.parametrize("m", BASES)
def test_jensen_against_mpmath(m: float) -> None:
    d = np.array([m * r for r in RELS])
    got = jensen_lgamma(m, d)
    for di, gi in zip(d, got, strict=True):
        mm, dd = mp.mpf(m), mp.mpf(float(di))
        ref = mp.loggamma(mm) - (mp.loggamma(mm - dd) + mp.loggamma(mm + dd)) / 2
        assert gi == pytest.approx(float(ref), rel=1e-12), (m, di)
    assert jensen_lgamma(m, 0.0) == 0.0
    np.testing.assert_array_equal(jensen_lgamma(m, -d), got)  # even in d


@pytest.mark.parametrize("tiny", [1e-300, 1e-40, 1e-17, 1e-14, 1e-9])
def test_jensen_takes_a_smaller_argument_below_the_rounding_of_m(tiny: float) -> None:
    """lo = the smaller argument, given exactly: m - |d| from the rounded midpoint and
    half-difference of (tiny, a2) is 0 or a rounding error once tiny is below m's
    rounding unit; with lo the value is the 40-digit one (every branch: m < 1, m >= 1
    below 20, lo near and above 20)."""
    for a2 in (0.3, 1.0, 3.0, 7.5, 19.0, 45.0, 1e7):
        m, d = (tiny + a2) / 2, (a2 - tiny) / 2
        got = float(jensen_lgamma(m, d, tiny))
        ta, ha = mp.mpf(tiny), mp.mpf(a2)
        ref = mp.loggamma((ta + ha) / 2) - (mp.loggamma(ta) + mp.loggamma(ha)) / 2
        assert got == pytest.approx(float(ref), rel=1e-12), (tiny, a2)
    for lo, hi in ((20.0 + tiny, 1e7), (21.0, 40.0), (0.5, 0.5 + tiny)):
        m, d = (lo + hi) / 2, (hi - lo) / 2
        assert float(jensen_lgamma(m, d, lo)) == pytest.approx(
            float(jensen_lgamma(m, d)), rel=1e-12
        )


@pytest.mark.parametrize("x", BASES)
def test_bregman_against_mpmath(x: float) -> None:
    delta = np.array([s * x * r for r in RELS for s in (-1.0, 1.0)] + [3.0 * x])
    got = bregman_lgamma(x, delta)
    for di, gi in zip(delta, got, strict=True):
        xx, dd = mp.mpf(x), mp.mpf(float(di))
        ref = mp.loggamma(xx + dd) - mp.loggamma(xx) - dd * mp.digamma(xx)
        assert gi == pytest.approx(float(ref), rel=1e-12), (x, di)


def test_log1pmx_against_mpmath() -> None:
    u = np.array([-0.9, -0.2, -0.0999, -1e-3, -1e-9, 0.0, 1e-12, 1e-5, 0.05, 0.0999, 0.1, 3.0])
    got = log1pmx(u)
    for ui, gi in zip(u, got, strict=True):
        ref = mp.log1p(mp.mpf(float(ui))) - mp.mpf(float(ui))
        assert gi == pytest.approx(float(ref), rel=1e-14, abs=1e-300)


def test_shapes_broadcast() -> None:
    m = np.full((3, 4), 50.0)
    d = np.linspace(0, 10, 4)
    assert jensen_lgamma(m, d).shape == (3, 4)
    assert bregman_lgamma(m, d).shape == (3, 4)
    assert np.ndim(jensen_lgamma(30.0, 1.0)) == 0


@pytest.mark.parametrize("lo", [1e-300, 0.3, 5.0, 19.999999, 20.0, 21.0, 60.0])
def test_jensen_at_extreme_scale_ratios(lo: float) -> None:
    """The larger argument up to 1e18 against a small one: plain gammaln cancelled at
    m ~ 1e11 (lgamma(m) against lgamma(m + d)), and lo taken as m - d from the rounded
    midpoint erred with m's rounding unit; once d rounded to m, 1 - d/m = 0 gave NaN
    (log1p(-1) against atanh(1)) or a ZeroDivisionError in the compiled kernel."""
    from importlib import import_module

    kernel = import_module("dpbayes.release.expmech._kernels").jensen_lgamma_scalar
    for hi in (20.5, 1e3, 1e9, 1e12, 1e16, 1e18):
        if hi <= lo:
            continue
        m, d = (lo + hi) / 2, (hi - lo) / 2
        lo_, hi_ = mp.mpf(lo), mp.mpf(hi)
        ref = float(mp.loggamma((lo_ + hi_) / 2) - (mp.loggamma(lo_) + mp.loggamma(hi_)) / 2)
        assert float(jensen_lgamma(m, d, lo)) == pytest.approx(ref, rel=1e-13), (lo, hi)
        assert kernel(m, d, lo) == pytest.approx(ref, rel=1e-13), (lo, hi)
