"""``release(by=..., groups=[...])``: a row's group is decided by its own value of ``by``.

A row whose value is no listed group is left out of every release, whatever it is.
pandas' ``==`` on a column of Python objects raised on a value that does not compare to
a boolean (a numpy array, an object whose ``==`` fails): one such record, in no group,
refused the release of every group while its neighbour without it was released.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

import dpbayes as dpb

COIN = dpb.models.BetaBernoulli(alpha=1, beta=1)
ARGS = {"column": "y", "mechanism": "laplace", "epsilon": 1.0, "neighbours": "add-remove"}


class _Unordered:
    """A value whose ``==`` fails (not with a TypeError)."""

    def __eq__(self, other: object) -> bool:
        raise RuntimeError("no comparison")

    __hash__ = object.__hash__


def _frame(by: list[Any], y: list[int]) -> pd.DataFrame:
    column = np.empty(len(by), dtype=object)
    column[:] = by
    return pd.DataFrame({"year": column, "y": y})


def _group_stats(data: pd.DataFrame, groups: list[Any]) -> np.ndarray:
    """The statistics the group releases add noise to: each group's (n, sum of y)."""
    from dpbayes.release.grouped import _group_masks

    masks = _group_masks(data, "year", groups)
    return np.array([[m.sum(), data["y"][m].sum()] for m in masks.values()], dtype=float)


@pytest.mark.parametrize("odd", [np.array([2019, 2020]), _Unordered(), (2019, 2020)])
def test_a_value_in_no_group_is_left_out_and_refuses_nothing(odd: Any) -> None:
    groups = [2019, 2020]
    by = [2019, 2020, "2019", None, 2019.0, True] * 5
    y = [1, 0, 1, 1, 0, 1] * 5
    d = _frame(by, y)
    d2 = _frame([*by, odd], [*y, 1])
    l1 = np.abs(_group_stats(d2, groups) - _group_stats(d, groups)).sum()
    assert l1 == 0.0  # the added row is in no group: no group's statistics change
    for data in (d, d2):
        g = dpb.release(COIN, data, by="year", groups=groups, rng=0, **ARGS)
        assert list(g) == groups and g.guarantee.sensitivity == 1.0


def test_object_rows_are_selected_by_python_equality() -> None:
    """Each row by its own value: 2019.0 is the group 2019, the text "2019" is not (a
    pandas object column is in-memory data, matched by equality as the models match it)."""
    from dpbayes.release.grouped import _group_masks

    d = _frame([2019, "2019", 2019.0, None, np.int64(2020), np.array([2020])], [1] * 6)
    masks = _group_masks(d, "year", [2019, 2020])
    assert masks[2019].tolist() == [True, False, True, False, False, False]
    assert masks[2020].tolist() == [False, False, False, False, True, False]
