"""Log-space convolution and the separable Dirichlet mixture: every term against brute force.

The mixture tilts its factors and drops the entries whose every completion weighs below
e^-50 of the total (``SeparableDirichletMixture._factors``); here its marginals and
evidence are checked against the untrimmed convolution, at priors whose factors are not
log-concave, at released counts on the truncation's bounds and far from n, and with
Gaussian noise whose factors fall off faster than any window.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import special

from dpbayes.models.mixtures import SeparableDirichletMixture, log_convolve
from dpbayes.release.counts.noise_aware import count_posterior


def _brute(la: np.ndarray, lb: np.ndarray) -> np.ndarray:
    out = np.full(la.size + lb.size - 1, -np.inf)
    for k in range(out.size):
        i = np.arange(max(0, k - lb.size + 1), min(la.size, k + 1))
        out[k] = special.logsumexp(la[i] + lb[k - i])
    return out


_entry = st.one_of(st.floats(-1e4, 1e4, allow_nan=False), st.just(-np.inf), st.floats(-5.0, 5.0))


@settings(max_examples=150, deadline=None)
@given(
    st.lists(_entry, min_size=1, max_size=40),
    st.lists(_entry, min_size=1, max_size=40),
    st.integers(1, 80),
)
def test_log_convolve_keeps_every_term(a, b, size):
    la, lb = np.array(a), np.array(b)
    want = _brute(la, lb)[:size]
    got = log_convolve(la, lb, size)
    assert got.shape == want.shape
    np.testing.assert_array_equal(np.isfinite(got), np.isfinite(want))
    fin = np.isfinite(want)
    np.testing.assert_allclose(got[fin], want[fin], rtol=1e-14, atol=1e-12)


def test_a_term_far_below_its_operands_maximum_still_counts():
    # out[2] = log(e^{0 - 5000} + e^{-800 + 0}): the second term comes from an entry 800
    # below the shorter operand's maximum (a convolution that skips such entries, as one
    # whose exp would underflow, returns -5000)
    got = log_convolve(np.array([0.0, -800.0]), np.array([0.0, 0.0, -5000.0]))
    assert got[2] == pytest.approx(-800.0, abs=1e-12)


def _all_but(lf: np.ndarray, i: int, size: int) -> np.ndarray:
    """log of the convolution of every factor but the i-th (every term kept)."""
    rows = [lf[k] for k in range(lf.shape[0]) if k != i]
    return functools.reduce(lambda acc, row: log_convolve(acc, row, size), rows)


def _untrimmed(lf: np.ndarray, n: int) -> tuple[list[np.ndarray], float]:
    """Marginal count weights (each from the convolution of the other factors) and the
    log evidence."""
    margs = []
    for i in range(lf.shape[0]):
        lw = lf[i] + _all_but(lf, i, n + 1)[::-1]
        w = np.exp(lw - np.max(lw))
        margs.append(w / w.sum())
    return margs, float(log_convolve(lf[0], _all_but(lf, 0, n + 1))[n])


CASES = [
    # (alpha, n, released, kind, scale)
    ([1.0, 1.0, 1.0], 3000, [900.4, 1100.0, 1000.7], "laplace", 2.0),
    ([0.01, 0.5, 30.0, 2.0], 400, [0.0, 400.0, 17.3, 380.0], "laplace", 3.0),  # bounds
    ([1.0, 2.0, 0.5], 500, [480.0, 470.2, 455.0], "laplace", 40.0),  # sum far above n
    ([1.0, 2.0, 0.5], 500, [3.0, 1.5, 0.0], "laplace", 8.0),  # sum far below n
    ([0.3, 1.0, 1.0, 5.0, 1.0], 1200, [300.2, 10.0, 250.9, 400.0, 239.1], "gaussian", 0.7),
    ([1.0, 1.0, 1.0], 800, [100.0, 300.0, 400.0], "geometric", 25.0),
]


@pytest.mark.parametrize(("alpha", "n", "released", "kind", "scale"), CASES)
def test_trimmed_mixture_equals_the_full_convolution(alpha, n, released, kind, scale):
    al = np.array(alpha)
    post = count_posterior(al, n, released, al.size, kind, scale, float(n))
    margs, log_z = _untrimmed(post.log_factors, n)
    assert post.log_evidence() == pytest.approx(log_z, rel=1e-12, abs=1e-10)
    for i, want in enumerate(margs):
        got = post.count_marginal(i)
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-18)
    draws = post.rvs_counts(200, random_state=1)
    assert np.all(draws.sum(axis=1) == n) and np.all(draws >= 0)


def test_trimming_drops_only_negligible_weight():
    # Gaussian noise of sd 0.7 at n = 1200: most entries of every factor are dropped, and
    # the marginals keep every weight above 1e-20 to nine digits (checked just above);
    # here: the drop is real (zeros where the full sum has tiny positive weights)
    al = np.ones(4)
    post = count_posterior(al, 1200, [300.2, 10.0, 250.9, 639.1], 4, "gaussian", 0.7, 1200.0)
    margs, _ = _untrimmed(post.log_factors, 1200)
    kept = np.isfinite(post._factors()[0])
    assert kept.sum() < 0.2 * np.isfinite(post.log_factors).sum()
    got, want = post.count_marginal(1), margs[1]
    dropped = (got == 0) & (want > 0)
    assert dropped.any()
    assert want[dropped].max() < 1e-20


def test_evidence_is_the_untilted_sum_at_a_larger_n():
    # n = 20,000, Laplace scale 200 (a count release at eps 0.01): the tilt is undone
    al = np.array([1.0, 1.5, 0.7])
    post = count_posterior(al, 20000, [6400.0, 7000.3, 6800.9], 3, "laplace", 200.0, 20000.0)
    margs, log_z = _untrimmed(post.log_factors, 20000)
    assert post.log_evidence() == pytest.approx(log_z, rel=1e-12)
    for i, want in enumerate(margs):
        np.testing.assert_allclose(post.count_marginal(i), want, rtol=1e-9, atol=1e-18)
    mean = post.mean()
    assert mean.sum() == pytest.approx(1.0, rel=1e-12)


def test_no_feasible_count_vector_is_refused_by_name():
    # every factor zero above 2, n = 10: no count vector has positive weight
    lf = np.full((3, 11), -np.inf)
    lf[:, :3] = 0.0
    post = SeparableDirichletMixture(np.ones(3), 10, lf)
    assert post.log_evidence() == -math.inf
    with pytest.raises(ValueError, match="weights of the mixture"):
        post.count_marginal(0)


def test_marginals_at_tiny_concentrations():
    # Dir(1e-30, 1e-30, 1e-30): the marginal's b was (sum alpha + n) - a, 0 at x = n
    post = count_posterior(np.full(3, 1e-30), 5, [5.0, 0.0, 0.0], 3, "laplace", 1.0, 5.0)
    m0 = post.marginal(0)
    assert np.all(m0.b > 0)
    assert 0.5 < post.mean()[0] <= 1.0 and post.mean().sum() == pytest.approx(1.0)


def test_a_huge_negative_entry_leaves_the_tilt_at_the_saddle_point():
    # a review: one entry of -1e300 made the bisection's bracket so wide that 80 halvings
    # left the tilt at -1.6e276 and every weight lost its digits
    al = np.ones(3)
    post = count_posterior(al, 1000, [300.2, 350.7, 400.1], 3, "laplace", 5.0, 1000.0)
    lf = post.log_factors.copy()
    lf[0, 1000] = -1e300
    sentinel = SeparableDirichletMixture(al, 1000, lf)
    margs, log_z = _untrimmed(lf, 1000)
    assert abs(sentinel._factors()[1]) < 1.0
    assert sentinel.log_evidence() == pytest.approx(log_z, rel=1e-13)
    for i, want in enumerate(margs):
        np.testing.assert_allclose(sentinel.count_marginal(i), want, rtol=1e-9, atol=1e-16)


def test_the_tilt_does_not_round_the_weights_at_large_n():
    # released counts summing above n under Gaussian noise: a tilt of -18 applied as t x
    # (not t (x - c*)) lost 7e-12 of the weights at n = 20,000
    al = np.ones(2)
    post = count_posterior(al, 20000, [10030.37, 10030.81], 2, "gaussian", 1.3, 20000.0)
    margs, _ = _untrimmed(post.log_factors, 20000)
    np.testing.assert_allclose(post.count_marginal(0), margs[0], rtol=0, atol=5e-14)
