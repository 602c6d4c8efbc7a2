"""Beta/Dirichlet divergences at extreme but valid parameters: 5e-324 up to 2^53.

From a review: a scan found NaN Hellinger distances where a parameter is subnormal
(below 5.6e-309). scipy's ``gammaln`` returns inf there (lgamma is only -log x <= 744.4)
and ``digamma`` -inf, and the log affinity took inf - inf or 0 * inf. A NaN on one data
set and not its neighbour breaks the exponential mechanism's sensitivity bound.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from dpbayes.models import (
    Beta,
    Dirichlet,
    hellinger,
    hellinger_beta,
    hellinger_dirichlet,
    log_affinity_beta,
    total_variation,
)

TINY = 5e-324
TOP = 2.0**53
GRID = (TINY, 2.8e-318, 1e-310, 5.6e-309, 1e-300, 1e-20, 0.5, 1.0, 2.0, 21.0, 1e6, 1e12, TOP)


def _mp_log_affinity(a1: float, b1: float, a2: float, b2: float) -> float:
    import mpmath as mp  # test-only dependency: 60-digit reference values

    with mp.workdps(60):

        def lb(a: mp.mpf, b: mp.mpf) -> mp.mpf:
            return mp.loggamma(a) + mp.loggamma(b) - mp.loggamma(a + b)

        x1, y1, x2, y2 = (mp.mpf(v) for v in (a1, b1, a2, b2))
        return float(lb((x1 + x2) / 2, (y1 + y2) / 2) - (lb(x1, y1) + lb(x2, y2)) / 2)


def test_gammaln_finite_at_subnormals() -> None:
    from dpbayes.models.lgamma_differences import gammaln  # added with the fix

    x = np.array([TINY, 1e-320, 1e-310, 5.5e-309, 1e-300, 1e-200, 0.5, 1.0, 1e300])
    got = gammaln(x)
    assert np.all(np.isfinite(got))
    np.testing.assert_allclose(got[:6], -np.log(x[:6]), rtol=1e-15)
    assert got[0] == pytest.approx(744.4400719213812, rel=1e-15)


@pytest.mark.parametrize(
    "params",
    [
        (TINY, TINY, TINY, 2.0),  # gammaln(5e-324) = inf: inf - inf in the b-part J
        (1e-300, TINY, 3.0, 1.0),
        (TINY, 7.0, 1.0, 7.0),  # a posterior step from a subnormal prior parameter
        (TINY, 2.818887e-318, TOP, 8.917300010645668e-307),  # r * digamma(subnormal) = -inf
        (TOP - 1.0, TINY, TOP, TINY),
    ],
)
def test_hellinger_beta_subnormal_against_mpmath(params: tuple[float, ...]) -> None:
    ref = _mp_log_affinity(*params)
    got = log_affinity_beta(*params)
    assert np.isfinite(got)
    assert got == pytest.approx(ref, rel=1e-12, abs=1e-12)
    h = hellinger_beta(*params)
    assert 0.0 <= h <= 1.0
    assert h == pytest.approx(np.sqrt(-np.expm1(ref)), abs=1e-12)
    alpha1, alpha2 = np.array(params[:2]), np.array(params[2:])
    assert hellinger_dirichlet(alpha1, alpha2) == pytest.approx(h, abs=1e-15)
    assert hellinger(Beta(*params[:2]), Beta(*params[2:])) == pytest.approx(h, abs=1e-15)
    assert hellinger(Dirichlet(alpha1), Dirichlet(alpha2)) == pytest.approx(h, abs=1e-15)


def test_hellinger_beta_grid_in_unit_interval() -> None:
    """Every pair on a log grid from 5e-324 to 2^53, and posterior pairs (a + k, b + n - k)
    of each prior on it: finite, in [0, 1], and 0 for equal arguments."""
    g = np.array(GRID)
    a1, b1, a2, b2 = (v.ravel() for v in np.meshgrid(g, g, g, g, indexing="ij"))
    post = [
        (a, b, a + k, b + (n - k))
        for a, b in itertools.product(GRID, GRID)
        for k, n in ((0, 1), (1, 1), (1, 2), (10, 20), (1000, 1000))
        if max(a + k, b + (n - k)) <= TOP
    ]
    p = np.array(post)
    a1, b1, a2, b2 = (np.concatenate([u, p[:, i]]) for i, u in enumerate((a1, b1, a2, b2)))
    with np.errstate(all="ignore"):
        h = np.asarray(hellinger_beta(a1, b1, a2, b2))
        hd = np.asarray(hellinger_dirichlet(np.stack([a1, b1], -1), np.stack([a2, b2], -1)))
        same = np.asarray(hellinger_beta(a1, b1, a1, b1))
    assert np.all(np.isfinite(h)) and np.all((h >= 0.0) & (h <= 1.0))
    np.testing.assert_array_equal(h, hd)
    np.testing.assert_array_equal(same, 0.0)


@pytest.mark.parametrize(
    "params",
    [
        (TINY, TINY, TINY, 2.0),
        (TINY, 7.0, 1.0, 7.0),
        (1e-310, 1e-310, 1e-300, 1.0),
        (TOP, TINY, TOP, 1.0),
        (TINY, TOP, 1.0, TOP),
    ],
)
def test_total_variation_subnormal_in_unit_interval(params: tuple[float, ...]) -> None:
    tv = total_variation(Beta(*params[:2]), Beta(*params[2:]))
    assert np.isfinite(tv) and 0.0 <= tv <= 1.0


SUBNORMAL_TV = [  # mpmath at 420 digits, crossings searched down to log x ~ -2e323
    ((TINY, 1.0, 1e-323, 1.0), 0.25),  # was 0: the crossing is at log x ~ -1.4e323
    ((1e-310, 1.0, 2e-310, 1.0), 0.25),  # was 0
    ((1.0, 1e-310, 1.0, 2e-310), 0.25),  # the mirror, was 0
    ((TINY, TINY, TINY, 2.0), 0.5),
    ((1e-310, 1e-310, 1e-300, 1.0), 0.9999999987640501),
]


@pytest.mark.parametrize(("params", "ref"), SUBNORMAL_TV)
def test_total_variation_subnormal_against_mpmath(params: tuple[float, ...], ref: float) -> None:
    """Subnormal parameters are computed, not refused (a refusal on a private posterior
    would tell data sets apart): the crossing past the doubles is found from the sign of
    the log density ratio at the end of the logit range, its tail masses asymptotically."""
    tv = total_variation(Beta(*params[:2]), Beta(*params[2:]))
    assert tv == pytest.approx(ref, abs=1e-12)
    two = total_variation(Dirichlet(np.array(params[:2])), Dirichlet(np.array(params[2:])))
    assert two == tv
