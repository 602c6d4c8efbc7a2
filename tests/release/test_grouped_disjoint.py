"""``release(by=..., groups=[...])``: the listed groups select disjoint rows (review F5).

Groups were checked distinct with Python equality but selected with pandas ``==``, which
converts a listed value to the column's type first (it parses strings against a datetime
column, rounds ints to a float column's doubles): one record could lie in two "distinct"
groups, and the stated eps (parallel composition) did not hold. The listed values are now
converted to the column's dtype exactly (public: the list and the schema), refused if two
are then equal, and rows are selected by exact equality, each in at most one group.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

import dpbayes as dpb

COIN = dpb.models.BetaBernoulli(alpha=1, beta=1)
ARGS = {"column": "y", "mechanism": "laplace", "epsilon": 1.0, "neighbours": "add-remove"}


def _group_masks(data: pd.DataFrame, by: str, groups: list) -> dict:
    from dpbayes.release.grouped import _group_masks as masks

    return masks(data, by, groups)


def _days() -> pd.DataFrame:
    days = pd.to_datetime(["2020-01-01", "2020-01-01", "2020-01-02"])
    return pd.DataFrame({"day": days, "y": [1, 0, 1]})


@pytest.mark.parametrize(
    "groups",
    [
        ["2020-01-01", pd.Timestamp("2020-01-01"), "2020-01-02"],
        ["2020-01-01", "2020-01-01 00:00", "2020-01-02"],
        [np.datetime64("2020-01-01"), "2020-01-01T00:00:00"],
    ],
)
def test_two_spellings_of_one_day_are_refused_before_any_noise(groups) -> None:
    acc = dpb.Accountant(5.0, simulation=True)
    with pytest.raises(ValueError, match="groups must list distinct values of column 'day'"):
        dpb.release(COIN, _days(), by="day", groups=groups, accountant=acc, rng=0, **ARGS)
    assert acc.spent == (0.0, 0.0)


def test_days_listed_once_each_split_the_rows() -> None:
    g = dpb.release(COIN, _days(), by="day", groups=["2020-01-01", "2020-01-02"], rng=0, **ARGS)
    assert list(g) == ["2020-01-01", "2020-01-02"] and g.guarantee.epsilon == 1.0
    masks = _group_masks(_days(), "day", ["2020-01-01", pd.Timestamp("2020-01-02")])
    assert [m.tolist() for m in masks.values()] == [[True, True, False], [False, False, True]]


def test_ints_that_round_to_one_double_are_refused_for_a_float_column() -> None:
    """2**53 + 1 is no double: pandas rounded it to 2.0**53, the row 2**53 was selected
    by both listed values."""
    df = pd.DataFrame({"v": [2.0**53, 0.0], "y": [1, 0]})
    with pytest.raises(ValueError, match="group 9007199254740993 is not a value of column 'v'"):
        dpb.release(COIN, df, by="v", groups=[2**53, 2**53 + 1], rng=0, **ARGS)


def test_an_int_column_compares_exactly() -> None:
    """pandas compares an int64 column with a float by rounding the ints to doubles:
    2.0**53 selected the row 2**53 + 1 too, which the int 2**53 + 1 also selects."""
    df = pd.DataFrame({"v": np.array([2**53 + 1, 0], dtype=np.int64), "y": [1, 0]})
    masks = _group_masks(df, "v", [float(2**53), 2**53 + 1])
    assert [m.tolist() for m in masks.values()] == [[False, False], [True, False]]


@pytest.mark.parametrize(
    ("column", "group"),
    [
        (pd.Series([1, 2]), "1"),
        (pd.Series([1, 2]), 1.5),
        (pd.Series([1.0, 2.0]), float("nan")),
        (pd.Series([1.0, 2.0]), 2**53 + 1),
        (pd.Series([True, False]), 2),
        (pd.Series(pd.to_datetime(["2020-01-01"]).tz_localize("UTC")), "2020-01-01"),
        (pd.Series(pd.to_datetime(["2020-01-01"])), "not a day"),
    ],
)
def test_a_group_no_value_of_the_column_equals_is_refused(column, group) -> None:
    df = pd.DataFrame({"v": column, "y": 1})
    with pytest.raises(ValueError, match="is not a value of column 'v'"):
        _group_masks(df, "v", [group])


def test_nullable_and_exact_numbers_are_converted() -> None:
    df = pd.DataFrame({"v": pd.array([1, None, 2], dtype="Int64")})
    masks = _group_masks(df, "v", [Fraction(2, 1), 1.0])
    assert [m.tolist() for m in masks.values()] == [[False, False, True], [True, False, False]]


class _EqualsAnything:
    def __eq__(self, other: object) -> bool:
        return True

    __hash__ = object.__hash__


def test_a_row_lies_in_at_most_one_group_whatever_its_equality() -> None:
    """An object column's ``==`` need not be an equivalence: a row equal to two listed
    values (which are not equal to each other) is given to the first only."""
    df = pd.DataFrame({"v": pd.Series(["a", _EqualsAnything(), "b"], dtype=object)})
    masks = _group_masks(df, "v", ["a", "b"])
    assert [m.tolist() for m in masks.values()] == [[True, True, False], [False, False, True]]
    assert sum(m.astype(int) for m in masks.values()).max() == 1
