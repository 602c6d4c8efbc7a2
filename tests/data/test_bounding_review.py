"""User-level bounding (a review): which rows a person keeps must depend on that person's
rows only, whatever the other records make of the column types, and whatever the data's
column names; and one huge number in a CSV file must not make its column unreadable."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpbayes.data import as_source


def _people(n: int = 300, seed: int = 0) -> list[tuple[int, int, float]]:
    g = np.random.default_rng(seed)
    return [
        (u, int(g.integers(0, 100)), round(float(g.uniform(0, 10)), 3))
        for u in range(n)
        for _ in range(5)
    ]


def _bounded_sum(data: object, k: int = 1) -> float:
    src = as_source(data, column="y", user_column="person", max_rows_per_user=k)
    return float(src.clamped_sum(0, 10))


def test_a_missing_value_that_makes_an_integer_column_float_keeps_everyone_elses_rows() -> None:
    """pandas reads an integer column as float once one value is missing; whole floats
    entered the digest otherwise than integers, so every other person's kept row could
    change: a bounded sum moved by 23 where k = 1 allows 10."""
    text = pd.DataFrame(_people(), columns=["person", "a", "y"]).to_csv(index=False)
    d1 = pd.read_csv(io.StringIO(text))
    d2 = pd.read_csv(io.StringIO(text + "999,,5.0\n"))  # one more person, 'a' missing
    assert d1["a"].dtype.kind == "i" and d2["a"].dtype.kind == "f"
    assert abs(_bounded_sum(d1) - _bounded_sum(d2)) <= 10.0
    assert abs(_bounded_sum(d1) - _bounded_sum(d2)) == pytest.approx(5.0)  # that person's row


@pytest.mark.parametrize("name", ["dpb_rn", "DPB_RN"])
@pytest.mark.parametrize("kind", ["frame", "parquet"])
def test_a_data_column_named_like_the_window_column_does_not_switch_off_the_bound(
    tmp_path: Path, name: str, kind: str
) -> None:
    """A column named dpb_rn took the window's place: one user kept all 1000 rows while
    the guarantee said <= 1."""
    df = pd.DataFrame({"person": [1] * 1000 + [2], name: 0, "y": 10.0})
    data: object = df
    if kind == "parquet":
        data = tmp_path / "d.parquet"
        df.to_parquet(data)
    src = as_source(data, column="y", user_column="person", max_rows_per_user=1)
    assert src.n() == 2 and float(src.clamped_sum(0, 10)) == 20.0


def test_a_csv_column_named_like_the_row_number_keeps_the_text_digest(tmp_path: Path) -> None:
    """A CSV column named dpb_csv_row made the bounding fall back to the typed digest, so
    one person's letter in a numeric column moved a bounded sum by 101 (bound 10)."""
    g = np.random.default_rng(0)
    lines = ["person,a,y,dpb_csv_row"]
    lines += [
        f"{u},{g.uniform(0, 100):.2f},{g.uniform(0, 10):.3f},{j}"
        for u in range(300)
        for j in range(5)
    ]
    (tmp_path / "d1.csv").write_text("\n".join(lines) + "\n")
    (tmp_path / "d2.csv").write_text("\n".join(lines) + "\n999,x,5.0,0\n")
    sums = [_bounded_sum(tmp_path / f) for f in ("d1.csv", "d2.csv")]
    assert abs(sums[0] - sums[1]) <= 10.0


def test_one_huge_integer_in_a_csv_column_leaves_it_numeric(tmp_path: Path) -> None:
    """DuckDB typed an integer beyond HUGEINT as BIGNUM, not a number: one record made
    every numeric statistic of its column refused (while 1e400 was read as inf)."""
    path = tmp_path / "hb.csv"
    path.write_text("x\n1\n2\n170141183460469231731687303715884105728\n")
    src = as_source(path, column="x")
    assert float(src.clamped_sum(0, 10)) == 13.0


def test_a_frame_with_duplicate_column_names_is_refused_in_one_line() -> None:
    with pytest.raises(ValueError, match=r"duplicate column names: \['x'\]"):
        as_source(pd.DataFrame([[1, 2, 3]], columns=["u", "x", "x"]), column="u")


def test_duckdb_spills_to_the_temporary_folder_not_the_working_one() -> None:
    """A review: under a memory limit a bounded read of 10^7 rows made ``./.tmp`` in the
    caller's working folder."""
    import os
    import tempfile

    from dpbayes.data.readers import _connection

    con = _connection()
    folder = con.execute("SELECT current_setting('temp_directory')").fetchone()[0]
    assert os.path.commonpath([folder, tempfile.gettempdir()]) == tempfile.gettempdir()
