"""A polars ``Object`` column is read as text value by value, as a pandas ``object`` column
is: polars hands it to Arrow as the addresses of its Python objects, so equal ids held by
distinct objects were distinct users (one added user with 100 rows changed a count
bounded to 1 row per user by 100) and no value matched a declared category."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dpbayes.data import as_source, open_table
from dpbayes.models import DirichletCategorical

pl = pytest.importorskip("polars")


def _frame(users: list[str], values: list[object]) -> object:
    return pl.DataFrame(
        {"u": pl.Series(users, dtype=pl.Object), "v": pl.Series(values, dtype=pl.Object)}
    )


def test_one_users_rows_are_one_user_whatever_objects_hold_the_id() -> None:
    users = [f"u{i}" for i in range(50)]
    many = ["".join(["u", "999"]) for _ in range(100)]  # one user: equal ids, 100 objects
    assert len(set(map(id, many))) == 100
    d = _frame(users, [1] * 50)
    dp = _frame(users + many, [1] * 150)
    for lazy in (False, True):
        a, b = (
            as_source(f.lazy() if lazy else f, "v", user_column="u", max_rows_per_user=1).n()
            for f in (d, dp)
        )
        assert (a, b) == (50, 51)  # L1 1 against the stated 1 (k = 1)


def test_an_object_column_is_read_as_a_pandas_object_column_is() -> None:
    values = [1, "0", True, None, 2.0, 2**70, "x", 0.5]
    users = [str(i) for i in range(len(values))]
    frame = pd.DataFrame({"u": users, "v": pd.Series(values, dtype=object)})
    expect = open_table(frame).value_counts_joint(["v"], dropna=False)
    got = open_table(_frame(users, values)).value_counts_joint(["v"], dropna=False)
    assert got == expect
    model = DirichletCategorical(alpha=1.0, categories=[0, 1])
    counts = model.statistics(_frame(["a", "b", "c"], [1, "0", True]), column="v").counts
    np.testing.assert_array_equal(counts, [1, 2])
