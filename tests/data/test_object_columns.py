"""A pandas ``object`` column is read as text value by value before the engine sees it: DuckDB
typed it from its values, so one record holding ``"x"`` turned a column of booleans into
text, changed every other row's digest in user-level bounding (L1 233 against 1 with 200
users and k = 1), and flipped a Table's release and refusal (from a review)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from dpbayes.answers import Cube
from dpbayes.data import Table
from dpbayes.models import DirichletCategorical


def _users(n: int) -> pd.DataFrame:
    rows = []
    for u in range(n):
        rows.append({"u": u, "v": 2 * u, "w": u % 2 == 0})
        rows.append({"u": u, "v": 2 * u + 1, "w": u % 3 == 0})
    d = pd.DataFrame(rows)
    d["w"] = d["w"].astype(object)
    return d


def test_one_record_does_not_rechoose_the_other_users_rows() -> None:
    d = _users(200)
    dp = pd.concat([d, pd.DataFrame([{"u": 10**6, "v": 0, "w": "x"}])], ignore_index=True)
    dp["w"] = dp["w"].astype(object)
    attrs = {"v": list(range(400))}
    x = Cube.from_table(d, attrs, user_column="u", max_rows_per_user=1).cell_vector()
    xp = Cube.from_table(dp, attrs, user_column="u", max_rows_per_user=1).cell_vector()
    assert np.abs(xp - x).sum() <= 1
    model = DirichletCategorical(alpha=1.0, categories=list(range(400)))
    a = model.statistics(Table(d, user_column="u", max_rows_per_user=1), column="v").counts
    b = model.statistics(Table(dp, user_column="u", max_rows_per_user=1), column="v").counts
    assert np.abs(b - a).sum() <= 1


def test_a_tables_object_column_is_matched_value_by_value() -> None:
    d = pd.DataFrame({"v": pd.Series([1] * 100 + [2.0, True], dtype=object)})
    model = DirichletCategorical(alpha=1.0, categories=[1, 2])
    assert model.statistics(Table(d), column="v").counts.tolist() == [101, 1]
    text = DirichletCategorical(alpha=1.0, categories=["1", "x"])
    dp = pd.DataFrame({"v": pd.Series([1] * 100 + ["x"], dtype=object)})
    assert text.statistics(Table(dp), column="v").counts.tolist() == [100, 1]


def test_object_values_as_text() -> None:
    from dpbayes.data.readers import object_columns_as_text

    f = pd.DataFrame(
        {"o": pd.Series([1, 1.0, True, None, float("nan"), "a", 0.5, 2**60], dtype=object)}
    )
    out = object_columns_as_text(f)["o"].tolist()
    assert out[:3] == ["1", "1", "true"] and out[3] is pd.NA and out[4] is pd.NA
    assert out[5:] == ["a", "0.5", str(2**60)]
