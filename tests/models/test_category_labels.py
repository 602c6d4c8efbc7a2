"""Public category and class labels are checked when the model is built: a record's category
must not depend on the other records. A list or mapping of records that mixes ints with
floats (or holds an int past int64) is coded in float64, which rounds ints beyond 2**53:
with declared categories 2**53 and 2**53 + 1, one added float record moved 100 records from
one cell to the other (L1 402 against a stated 2). And a declared None was a category that
every record holding it was refused for (released on one data set, refused on its
neighbour)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from dpbayes.estimators import PrivateNaiveBayes
from dpbayes.models import DirichletCategorical
from dpbayes.models.bayes_net import BayesNet

BAD_NUMBERS = [2**53, 2**53 + 1, -(2**53), 2**63 + 5, float(2**60), Fraction(1, 3), 1e300]
MISSING = [None, float("nan"), np.nan]


@pytest.mark.parametrize("bad", BAD_NUMBERS)
def test_numbers_that_round_in_float64_are_refused_by_every_model(bad: object) -> None:
    with pytest.raises(ValueError, match=r"2\*\*53"):
        BayesNet({"A": (0, bad), "B": (0, 1)}, [("A", "B")])
    with pytest.raises(ValueError, match=r"a category must be a double below 2\*\*53"):
        DirichletCategorical(alpha=1.0, categories=(0, bad))
    with pytest.raises(ValueError, match=r"2\*\*53"):
        PrivateNaiveBayes(epsilon=1.0, categories=[[0, bad]], classes=[0, 1]).fit(
            [[0], [0]], [0, 1]
        )
    with pytest.raises(ValueError, match=r"a label of classes must be a double below"):
        PrivateNaiveBayes(epsilon=1.0, categories=[[0, 1]], classes=[0, bad]).fit(
            [[0], [0]], [0, 0]
        )


@pytest.mark.parametrize("missing", MISSING)
def test_missing_values_are_not_categories(missing: object) -> None:
    with pytest.raises(ValueError, match="must not be missing"):
        BayesNet({"A": (1, missing), "B": (0, 1)}, [("A", "B")])
    with pytest.raises(ValueError, match="must not be missing"):
        DirichletCategorical(alpha=1.0, categories=(1, missing))


def test_labels_at_the_limit_and_strings_are_kept() -> None:
    top = 2**53 - 1
    model = DirichletCategorical(alpha=1.0, categories=(top, -top, 0.5, "9007199254740993"))
    assert model.categories == (top, -top, 0.5, "9007199254740993")
    assert BayesNet({"A": (top, 0.5), "B": ("x", "y")}, [("A", "B")]).variables["A"] == (
        top,
        0.5,
    )


def test_a_float_record_does_not_move_the_other_records() -> None:
    """The neighbouring pair of the finding, at the largest labels still allowed: the
    float record turns the column into float64, and no other record changes cell."""
    top = 2**53 - 1
    model = BayesNet({"A": (top, top - 1, 0.5), "B": (0, 1)}, [("A", "B")])
    x = {"A": [top] * 100, "B": [0] * 100}
    xp = {"A": [top] * 100 + [0.5], "B": [0] * 101}
    s, sp = model.statistics(x), model.statistics(xp)
    l1 = sum(float(np.abs(np.asarray(sp.counts[v]) - np.asarray(s.counts[v])).sum()) for v in "AB")
    assert l1 == 2.0  # the added record, once in each table
    dc = DirichletCategorical(alpha=1.0, categories=(top, top - 1, 0.5))
    a, b = dc.statistics([top] * 100), dc.statistics([top] * 100 + [0.5])
    assert np.asarray(b.counts).tolist() == [100, 0, 1]
    assert np.asarray(a.counts).tolist() == [100, 0, 0]
