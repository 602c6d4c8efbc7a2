"""The compiled expmech scores equal the vectorised Hellinger formulas (and 50-digit values).

The reference is ``dpbayes.models.divergence.hellinger_beta`` / ``hellinger_dirichlet``,
the functions the scores were computed with before the compiled pass. Measured against
mpmath, the reference's polygamma Taylor branch (parameters below 20) is accurate to ~5e-13
relative and the kernel to ~3e-15, hence rtol 1e-11 against the reference and 1e-13
against mpmath; scores of -1 (H = 1 to double precision) must agree exactly.
"""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest

import dpbayes as dpb
from dpbayes.models.divergence import hellinger_beta, hellinger_dirichlet
from dpbayes.models.lgamma_differences import jensen_lgamma
from dpbayes.release.expmech import _kernels as ek
from dpbayes.release.expmech.candidates import coin_scores, compositions, dirichlet_scores


def mp_jensen(m: float, d: float) -> mp.mpf:
    """50-digit J(m, d) of the float arguments (m - d and m + d taken exactly)."""
    with mp.workdps(50):
        mm, dd = mp.mpf(m), mp.mpf(d)
        return mp.loggamma(mm) - (mp.loggamma(mm - dd) + mp.loggamma(mm + dd)) / 2


def reference_coin(a: float, b: float, n: int, k: int) -> np.ndarray:
    j = np.arange(n + 1, dtype=float)
    return -np.asarray(hellinger_beta(a + k, b + n - k, a + j, b + n - j))


def mp_hellinger(x: list[float], y: list[float]) -> float:
    with mp.workdps(50):
        xs, ys = [mp.mpf(v) for v in x], [mp.mpf(v) for v in y]

        def log_b(v: list) -> mp.mpf:
            return sum(mp.loggamma(t) for t in v) - mp.loggamma(sum(v))

        mid = [(p + q) / 2 for p, q in zip(xs, ys, strict=True)]
        log_bc = log_b(mid) - (log_b(xs) + log_b(ys)) / 2
        return float(mp.sqrt(-mp.expm1(log_bc)))


@pytest.mark.parametrize(
    ("a", "b", "n", "k"),
    [
        (1.0, 1.0, 1000, 300),
        (1e-3, 1e3, 3000, 0),
        (1e3, 1e-3, 3000, 3000),
        (0.5, 2.5, 20000, 19999),
        (0.1, 0.1, 10, 5),
        (30.0, 40.0, 100_000, 2),
        (1.0, 1.0, 1, 0),
        (1.0, 1.0, 2_000_000, 1_234_567),
    ],
)
def test_coin_scores_equal_the_vectorised_formula(a: float, b: float, n: int, k: int) -> None:
    got, ref = coin_scores(a, b, n, k), reference_coin(a, b, n, k)
    np.testing.assert_allclose(got, ref, rtol=1e-11, atol=1e-15)
    np.testing.assert_array_equal(got == -1.0, ref == -1.0)  # the shortcut: exactly -1
    assert got[k] == 0.0  # the posterior itself scores exactly 0 (PROOF_expmech Fact 2)
    assert np.all(got <= 0.0) and np.all(got >= -1.0)


@pytest.mark.parametrize(
    ("alpha", "n"),
    [([1.0, 1.0, 1.0], 200), ([0.01, 5.0, 100.0], 60), ([1.0, 1.0, 1.0, 1.0], 40), ([1e3] * 3, 30)],
)
def test_dirichlet_scores_equal_the_vectorised_formula(alpha: list[float], n: int) -> None:
    al = np.array(alpha)
    cands = compositions(n, al.size)
    for counts in (cands[0], cands[len(cands) // 3], cands[-1]):
        got = dirichlet_scores(al, counts, cands)
        ref = -np.asarray(hellinger_dirichlet(al + counts, al + cands))
        np.testing.assert_allclose(got, ref, rtol=1e-11, atol=1e-15)
        np.testing.assert_array_equal(got == -1.0, ref == -1.0)
        own = np.flatnonzero(np.all(cands == counts, axis=1))
        assert got[own[0]] == 0.0


def test_scores_against_fifty_digits() -> None:
    a, b, n, k = 0.5, 3.0, 400, 37
    got = coin_scores(a, b, n, k)
    for j in (0, 1, 20, 36, 38, 60, 150, 399, 400):
        want = mp_hellinger([a + k, b + n - k], [a + j, b + n - j])
        assert -got[j] == pytest.approx(want, rel=1e-13, abs=1e-300)
    al, counts = np.array([1.0, 1.0, 1.0]), np.array([85, 18, 97])
    cands = np.array([[85, 19, 96], [84, 19, 97], [0, 0, 200], [86, 18, 96]])
    got = dirichlet_scores(al, counts, cands)
    for r, c in enumerate(cands):
        assert -got[r] == pytest.approx(mp_hellinger(list(al + counts), list(al + c)), rel=1e-13)


def test_jensen_gap_matches_numpy_and_the_bound() -> None:
    ms = np.array([0.02, 0.5, 1.0, 3.7, 12.0, 19.9, 20.5, 45.0, 1e3, 1e7])
    for m in ms:
        for frac in (0.0, 1e-9, 1e-3, 0.01, 0.019, 0.021, 0.3, 0.5, 0.51, 0.9, 0.999):
            d = frac * m
            got = ek.jensen_lgamma_scalar(float(m), float(d), float(m - d))
            ref = float(jensen_lgamma(m, d))
            assert got == pytest.approx(ref, rel=1e-11, abs=1e-300), (m, d)
            assert got == ek.jensen_lgamma_scalar(float(m), float(-d), float(m - d))
            # the shortcut's bound: J(m, d) <= -d^2 / (2 (m + |d|)), with 50-digit J
            exact = mp_jensen(m, d)
            assert float(exact) <= -(d * d) / (2 * (m + d)) * (1 - 1e-12) + 1e-300
            assert got == pytest.approx(float(exact), rel=1e-13, abs=1e-300), (m, d)


def test_the_total_bound_bounds_minus_j() -> None:
    for m, d in ((5.0, 0.1), (100.0, 99.0), (1e6, 3.0), (2.5, 2.4), (0.3, 0.01)):
        exact = -mp_jensen(m, d)
        assert float(exact) <= ek._total_bound(m, d)
    assert ek._total_bound(1.0, 1.0) == math.inf
    # where the bound declares H = 1, the full evaluation gives exactly 1 too
    for a1, b1, a2, b2 in ((1.0, 1e6, 1e6, 1.0), (10.0, 1e3, 900.0, 50.0), (3.0, 1e4, 1e4, 3.0)):
        assert ek._hellinger_beta(a1, b1, a2, b2) == 1.0
        assert float(hellinger_beta(a1, b1, a2, b2)) == 1.0


@pytest.mark.parametrize("beta", [1e-14, 1e-300])
def test_scores_do_not_fail_at_k_equal_n_with_a_tiny_prior(beta: float) -> None:
    """b + n - k was computed as (b + n) - k, which is exactly 0 at k = n when b is below
    half an ulp of n: the score bound then divided 0 by 0, inside ``run``, for the data set
    of all ones and not for its neighbour (an uncharged failure that told the two apart).
    It is now b + (n - k), exact for integer counts: both data sets release."""
    n = 1000
    model = dpb.models.BetaBernoulli(alpha=1.0, beta=beta)
    for k in (n, n - 1):
        data = np.array([1] * k + [0] * (n - k))
        rel = dpb.release(model, data, mechanism="expmech", epsilon=1.0, rng=0)
        assert sum(rel.released["counts"]) == n
    out = np.empty(n + 1)
    ek.coin_hellinger_scores(1.0, beta, n, n, out)
    assert np.all(np.isfinite(out)) and out[n] == 0.0


@pytest.mark.parametrize("tiny", [1e-300, 1e-100, 1e-17, 1e-14])
def test_scores_keep_a_parameter_below_the_rounding_of_the_other(tiny: float) -> None:
    """Against Beta(tiny + k, .) the midpoint m = (a1 + a2) / 2 and half-difference d
    round to the same double once tiny is below m's rounding unit, so m - d, the smaller
    argument whose lgamma is the largest term, was 0 (log BC = -inf) or a rounding error
    (up to 50% off at 1e-14). The kernels and the vectorised formulas now take it
    exactly: 50-digit values, and the two agree."""
    for x, y in (
        ([tiny, 1.0], [1.0, 1.0]),
        ([tiny, 3.0], [2.0, 2.0]),
        ([tiny, 5.0], [3.0, 4.0]),
        ([1.0, tiny + 1.0], [tiny, 2.0]),
    ):
        want = mp_hellinger(x, y)
        assert ek._hellinger_beta_exact(x[0], x[1], y[0], y[1]) == pytest.approx(want, rel=1e-14)
        assert float(hellinger_beta(x[0], x[1], y[0], y[1])) == pytest.approx(want, rel=1e-14)
    post = np.array([tiny, 2.0, 3.0])
    cands = np.array([[1.0, 1.0, 3.0], [0.0, 2.0, 3.0], [2.0, 0.0, 3.0]])
    out = np.empty(len(cands))
    ek.dirichlet_hellinger_scores(np.array([tiny, 1.0, 1.0]), post, cands, out)
    for r, c in enumerate(cands):
        x2 = [tiny + c[0], 1.0 + c[1], 1.0 + c[2]]
        want = mp_hellinger(list(post), x2)
        assert -out[r] == pytest.approx(want, rel=1e-14), r
        assert float(hellinger_dirichlet(post, np.array(x2))) == pytest.approx(want, rel=1e-14)
