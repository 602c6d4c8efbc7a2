"""Randomized response: the float keep probability is within e^eps in both directions."""

from __future__ import annotations

from decimal import Decimal, getcontext

import pytest

from dpbayes.privacy import RandomizedResponse


def _loss(keep: float, k: int) -> Decimal:
    getcontext().prec = 80
    p = Decimal(keep)
    return abs((p * (k - 1) / (1 - p)).ln())


@pytest.mark.parametrize("eps,k", [(1e-18, 3), (1e-17, 7), (1e-300, 5)])
def test_tiny_epsilon_without_a_private_float_keep_is_refused(eps, k):
    # the nearest float to e^eps / (e^eps + k - 1) is below 1/k: a wrong category would
    # be likelier than the truth by far more than e^eps (loss ~1e-16 > eps)
    with pytest.raises(
        ValueError, match=rf"epsilon=.* too small for randomized response with k={k}"
    ):
        RandomizedResponse(epsilon=eps, k=k)


@pytest.mark.parametrize(
    "eps,k",
    [(1e-300, 2), (1e-300, 4), (1e-16, 3), (2e-16, 3), (1e-15, 7), (1e-12, 3), (1.0, 5), (30, 2)],
)
def test_accepted_keep_has_loss_at_most_epsilon_both_ways(eps, k):
    keep = RandomizedResponse(epsilon=eps, k=k).keep_probability
    assert 0 < keep < 1
    assert _loss(keep, k) <= Decimal(eps)
