"""A record's cell depends on its own value only (Lemma 2.1: one record, one cell, by one).

A CSV file's column types are guessed by the engine from every record's value, and a
pandas ``object`` column is typed from a sample of its values: one record that does not
parse used to turn the whole column into text, and every other record fell out of (or
into) its cell. Each pair below is a neighbouring pair D, D' = D + one record; the count
vectors must differ by exactly that record's cell (or not at all when it is outside the
domain).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from dpbayes.answers import Bins, Cube
from dpbayes.answers.cube import text_matches


def _csv(path: Path, values: list[str]) -> Path:
    path.write_text("v\n" + "\n".join(values) + "\n")
    return path


def _assert_neighbours(x: np.ndarray, x2: np.ndarray, cell: int | None) -> None:
    """x2 - x is the one added record's cell (a one-hot vector), or zero if cell is None."""
    expected = np.zeros(x.size, dtype=np.int64)
    if cell is not None:
        expected[cell] = 1
    assert (x2.ravel() - x.ravel()).tolist() == expected.tolist()


# (domain, the n records of D, the added record, its cell or None, the cell of D's records)
CSV_PAIRS: list[tuple[Any, str, str, int | None, int]] = [
    ([True, False], "true", "maybe", None, 0),
    ([0.5, 1.0], "1", "?", None, 1),
    ([1, 2], "1.0", "n/a", None, 0),
    ([1, 2], "01", "0x", None, 0),
    (["true", "false"], "true", "maybe", None, 0),  # text categories (as the CLI gives)
    (["1", "2"], "1", "x", None, 0),
    ([1, 2], "1", "2.0", 1, 0),  # the added record in the domain: its cell, by one
    ([True, False], "TRUE", "false", 1, 0),
    (Bins([0, 1, math.inf]), "1", "abc", None, 1),  # a binned axis: same fault
    (Bins([0, 1, math.inf]), "0.5", "2", 1, 0),
]


@pytest.mark.parametrize(("domain", "value", "extra", "cell", "base_cell"), CSV_PAIRS)
def test_csv_neighbours_change_one_cell(
    tmp_path: Path, domain: Any, value: str, extra: str, cell: int | None, base_cell: int
) -> None:
    n = 100
    d = _csv(tmp_path / "d.csv", [value] * n)
    d2 = _csv(tmp_path / "d2.csv", [value] * n + [extra])
    x = Cube.from_table(d, {"v": domain}).cell_vector()
    x2 = Cube.from_table(d2, {"v": domain}).cell_vector()
    assert x[base_cell] == n  # D's records are in their cell, whatever D' holds
    _assert_neighbours(x, x2, cell)


def test_csv_table_front_neighbours_change_one_cell(tmp_path: Path) -> None:
    """A dpbayes.data.Table made from a CSV path is read as text too."""
    from dpbayes.data import Table

    d = _csv(tmp_path / "d.csv", ["1.0"] * 50)
    d2 = _csv(tmp_path / "d2.csv", ["1.0"] * 50 + ["n/a"])
    x = Cube.from_table(Table(d), {"v": [1, 2]}).cell_vector()
    x2 = Cube.from_table(Table(d2), {"v": [1, 2]}).cell_vector()
    assert x.tolist() == [50, 0]
    _assert_neighbours(x, x2, None)


def test_csv_user_level_neighbours_change_one_cell(tmp_path: Path) -> None:
    """With contribution bounding (the user column read as text by the data layer)."""
    rows = [f"{i},1.0" for i in range(40)]
    d = tmp_path / "d.csv"
    d.write_text("u,v\n" + "\n".join(rows) + "\n")
    d2 = tmp_path / "d2.csv"
    d2.write_text("u,v\n" + "\n".join([*rows, "99,n/a"]) + "\n")
    opts: dict[str, Any] = {"user_column": "u", "max_rows_per_user": 1}
    x = Cube.from_table(d, {"v": [1, 2]}, **opts).cell_vector()
    x2 = Cube.from_table(d2, {"v": [1, 2]}, **opts).cell_vector()
    assert x.tolist() == [40, 0]
    _assert_neighbours(x, x2, None)


# pandas object columns: (domain, D's records, the added record, its cell, D's cell)
OBJECT_PAIRS: list[tuple[Any, Any, Any, int | None, int]] = [
    ([1, 2], 1.0, "z", None, 0),
    ([True, False], True, "maybe", None, 0),
    ([0.5, 1.0], 1, "?", None, 1),
    ([1, "x"], 1, "x", 1, 0),
    (["1", "2"], "1", 3.5, None, 0),
    (Bins([0, 1, math.inf]), 1, "abc", None, 1),
]


@pytest.mark.parametrize(("domain", "value", "extra", "cell", "base_cell"), OBJECT_PAIRS)
@pytest.mark.parametrize("n", [50, 3000])  # 3000: past DuckDB's sample of object values
def test_object_column_neighbours_change_one_cell(
    n: int, domain: Any, value: Any, extra: Any, cell: int | None, base_cell: int
) -> None:
    def frame(values: list[Any]) -> pd.DataFrame:
        return pd.DataFrame({"v": pd.Series(values, dtype=object)})

    x = Cube.from_table(frame([value] * n), {"v": domain}).cell_vector()
    x2 = Cube.from_table(frame([value] * n + [extra]), {"v": domain}).cell_vector()
    assert x[base_cell] == n
    _assert_neighbours(x, x2, cell)


def test_object_column_user_level_and_other_columns_kept() -> None:
    users = list(range(30))
    f = pd.DataFrame({"u": users, "v": pd.Series([1.0] * 30, dtype=object), "w": ["a", "b"] * 15})
    f2 = pd.concat(
        [f, pd.DataFrame({"u": [99], "v": pd.Series(["z"], dtype=object), "w": ["a"]})],
        ignore_index=True,
    )
    opts: dict[str, Any] = {"user_column": "u", "max_rows_per_user": 1}
    x = Cube.from_table(f, {"v": [1, 2], "w": ["a", "b"]}, **opts)
    x2 = Cube.from_table(f2, {"v": [1, 2], "w": ["a", "b"]}, **opts)
    assert x.counts.tolist() == [[15, 15], [0, 0]]
    _assert_neighbours(x.cell_vector(), x2.cell_vector(), None)
    assert x.rows_per_user_bound == 1
    assert f["v"].dtype == object and f["v"].tolist() == [1.0] * 30  # the frame is unchanged


def test_typed_columns_stay_exact(tmp_path: Path) -> None:
    """Typed columns (a public schema) are compared as before: a number is no text."""
    f = pd.DataFrame({"i": [1, 1, 2], "b": [True, False, True], "s": ["1", "1.0", "x"]})
    c = Cube.from_table(f, {"i": [1.0, 2.0], "b": [True, False], "s": [1, "x"]})
    assert c.counts.sum() == 3
    assert c.counts.sum(axis=(1, 2)).tolist() == [2, 1]
    assert c.counts.sum(axis=(0, 2)).tolist() == [2, 1]
    assert c.counts.sum(axis=(0, 1)).tolist() == [2, 1]  # "1" and "1.0" are 1 (text rule)
    path = tmp_path / "t.parquet"
    f.to_parquet(path)
    p = Cube.from_table(path, {"i": ["1", "2"], "b": [True, False]})
    assert p.counts.sum() == 0  # a typed number never matches a text category


def test_text_rule() -> None:
    """The axes use the one rule for text fields (data.text_values): a text category
    matches its text exactly, any other category the value the text denotes."""
    assert text_matches(True, "True") and text_matches(False, " FALSE ")
    assert text_matches(True, "1") and text_matches(1, "true")  # as 1 == True, typed
    assert text_matches(1, "1.0") and text_matches(0.5, "0.50") and not text_matches(1, "1.5")
    assert text_matches("a", "a") and not text_matches("a", "A") and not text_matches("1", "1.0")
    assert not text_matches(1, "yes") and not text_matches(True, "yes")
