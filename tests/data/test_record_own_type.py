"""A list mixing booleans and numbers is read, each boolean as 0/1 (review 2).

Each record alone was accepted ([True]*3 as booleans, [1] as numbers) but a mix was
refused: whether a release was made depended on how the other records were typed.
"""

from __future__ import annotations

from dpbayes.data import as_source
from dpbayes.models import NormalMean


def test_booleans_among_numbers_are_zero_and_one() -> None:
    src = as_source([True, True, 1, False])
    assert src.kind == "numeric" and src.value_counts() == {0: 1, 1: 3}
    assert as_source([True, 2.5]).value_counts() == {1.0: 1, 2.5: 1}
    assert as_source([True, True]).kind == "bool"
    model = NormalMean(lower=0.0, upper=5.0)
    d, d_prime = model.statistics([True] * 3), model.statistics([True] * 3 + [1])
    assert (d_prime.n - d.n, d_prime.total - d.total) == (1, 1.0)
