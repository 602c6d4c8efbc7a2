"""The models' KL and total variation at tiny parameters: the scalar functions of
:mod:`dpbayes.models.divergence_exact` (moved from the programs, which use them), and the
vectorised KL's fallback to them. References are mpmath at 420 digits.

From a review: the models' ``total_variation`` of Betas was 0 where the density crossing
lies past x = 5e-324 (a parameter far below 0.01), a 2-category Dirichlet raised where
alpha_1 is below an ulp of alpha_0, and ``kl_beta``/``kl_dirichlet`` were NaN or inf where
the smaller argument of a Bregman gap rounds away (and at many large parameters).
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable

import numpy as np
import pytest

from dpbayes.models import Beta, Dirichlet, kl, kl_beta, kl_dirichlet, total_variation
from dpbayes.models import divergence_exact as exact

mp = pytest.importorskip("mpmath")
TINY = sys.float_info.min


TV_CASES = [  # mpmath TV (tests/programs/test_tiny_parameters.py)
    ((1e-300, 1.0, 2e-300, 1.0), 0.25),  # was 0
    ((TINY, 1.0, 2 * TINY, 1.0), 0.25),  # was 0
    ((TINY, TINY, TINY, 2.0), 0.5),  # was 1
    ((1.0, 1e-300, 1.0, 2e-300), 0.25),  # the mirror, was 0
]


@pytest.mark.parametrize(("params", "ref"), TV_CASES)
def test_total_variation_of_betas_at_tiny_parameters(params: tuple[float, ...], ref: float) -> None:
    p, q = Beta(*params[:2]), Beta(*params[2:])
    got = total_variation(p, q)
    assert got == pytest.approx(ref, abs=1e-12)
    assert got == exact.tv_beta(*params)
    assert total_variation(q, p) == pytest.approx(got, abs=1e-15)


def test_total_variation_of_two_category_dirichlet_reads_its_parameters() -> None:
    """alpha_1 = 1e-300 is below an ulp of alpha_0 = 1: the marginal Beta(1, sum - 1)
    had b = 0 and raised; it is the TV of Beta(1, 1e-300) and Beta(1, 2e-300), 1/4."""
    p, q = Dirichlet(np.array([1.0, 1e-300])), Dirichlet(np.array([1.0, 2e-300]))
    assert total_variation(p, q) == pytest.approx(0.25, abs=1e-12)


KL_CASES = [
    ([1.0, 11.0], [1e-300, 1e-300]),  # was NaN (inf - inf)
    ([1.0, 1.0], [2.3e-308, 1.0]),  # was inf
    ([1.0, 1.0], [1e-300, 1.0]),  # was inf
    ([0.5, 1e-20], [1e-300, 0.3]),  # was inf
    ([TINY, TINY], [5.0, 1.0]),  # 1.35e308, was inf
    ([1.0, 2.0, 3.0], [1e-300, 2.0, 1e-250]),
]


@pytest.mark.parametrize(("a", "b"), KL_CASES)
def test_kl_at_tiny_parameters_against_mpmath(
    a: list[float], b: list[float], mp_kl_dirichlet: Callable[[list[float], list[float]], float]
) -> None:
    ref = mp_kl_dirichlet(a, b)
    got = float(kl_dirichlet(np.array(a), np.array(b)))
    assert got == pytest.approx(ref, rel=1e-12, abs=1e-12)
    assert got == exact.kl_dirichlet(a, b)
    if len(a) == 2:
        assert float(kl_beta(*a, *b)) == got
        assert kl(Beta(*a), Beta(*b)) == got
    else:
        assert kl(Dirichlet(np.array(a)), Dirichlet(np.array(b))) == got


def test_vectorised_kl_mixes_closed_form_and_exact_elements() -> None:
    """Hard elements (from the scalar function) among ordinary ones, across chunks."""
    n = (1 << 14) + 7  # more than one chunk
    rng = np.random.default_rng(3)
    a1, b1 = rng.uniform(1.0, 50.0, n), rng.uniform(1.0, 50.0, n)
    a2, b2 = a1 + 1.0, b1.copy()
    hard = [5, 9000, n - 1]
    a1[hard], b1[hard], a2[hard], b2[hard] = 1.0, 11.0, 1e-300, 1e-300
    plain = np.asarray(kl_beta(a1[:100], b1[:100], a2[:100], b2[:100]))
    got = np.asarray(kl_beta(a1, b1, a2, b2))
    assert np.all(np.isfinite(got)) and np.all(got >= 0.0)
    np.testing.assert_array_equal(got[:5], plain[:5])
    for i in hard:
        assert got[i] == pytest.approx(689.8466930066947, rel=1e-12)
    rows = np.asarray(kl_dirichlet(np.stack([a1, b1], -1), np.stack([a2, b2], -1)))
    np.testing.assert_allclose(rows, got, rtol=1e-13, atol=1e-13)
    assert np.all(np.isfinite(rows))


def test_kl_grid_never_nan() -> None:
    """Every pair on a grid from 5e-324 to 8e307 (sums within the doubles): no NaN (34748
    of these 50625 were NaN), never negative, Beta and 2-category Dirichlet alike."""
    tiny = [5e-324, 1e-320, 1e-310, TINY, 2.3e-308, 1e-300, 1e-20]
    g = np.array([*tiny, 0.5, 1.0, 21.0, 1e6, 1e12, 2.0**53, 1e300, 8e307])
    a1, b1, a2, b2 = (v.ravel() for v in np.meshgrid(g, g, g, g, indexing="ij"))
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        k = np.asarray(kl_beta(a1, b1, a2, b2))
        kd = np.asarray(kl_dirichlet(np.stack([a1, b1], -1), np.stack([a2, b2], -1)))
    assert not np.any(np.isnan(k)) and np.all(k >= 0.0)
    np.testing.assert_array_equal(k, kd)
