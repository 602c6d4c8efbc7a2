"""NaN is NULL on Parquet input too, whatever the file's min/max statistics say.

DuckDB takes a Parquet file's min/max statistics, which leave NaN out, as proof that a
float column holds no NaN when they also say "no NULLs", and folded ``isnan(x)`` to false:
a NaN then went into clamped sums as the upper bound (NaN is the largest value in DuckDB's
order), stayed a category of value counts, became the maximum, and a regression did not
refuse the row. Whether the fold happened depended on the statistics, that is on every
row of the file. Each statistic here is computed from a Parquet file (with and without
NULLs in its statistics, NaN in a released column or only in another one), from a DuckDB
relation on the user's own connection, and from float32 columns, and must equal the same
statistic of the pandas/Arrow input and the documented behaviour (``Source``: NULLs count
in ``n`` and ``null_count`` and are left out of every other statistic; a regression
refuses rows with a missing feature or label).
"""

from __future__ import annotations

import math
from fractions import Fraction
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dpbayes as dpb
from dpbayes.data import Table, open_table

NAN = math.nan
# multiples of 1/4: the same numbers in float32; 3.5 lies above the clamp [0, 3]
CLEAN = [0.5, 1.5, 2.0, 0.75, 1.0, -0.25, 2.0, 3.5]
WITH_NAN = [0.5, 1.5, 2.0, NAN, 1.0, -0.25, 2.0, 3.5]
WITH_NAN_AND_NULL = [0.5, None, 2.0, NAN, 1.0, -0.25, 2.0, 3.5]
USERS = [1, 1, 2, 3, 4, 4, 5, 6]
Z = [0.25, -0.5, 0.75, 0.5, -1.0, 0.25, 0.5, -0.75]
LABELS = [0, 1, 1, 0, 1, 0, 0, 1]

#: case -> (x, y): NaN in the released column x (the statistics say no NULLs, or some
#: NULLs), or only in the other column y
CASES = {
    "nan": (WITH_NAN, CLEAN),
    "nan_and_null": (WITH_NAN_AND_NULL, CLEAN),
    "nan_elsewhere": (CLEAN, WITH_NAN),
}
INPUTS = ["arrow", "parquet", "parquet_float32", "relation", "materialized"]
LO, HI = 0.0, 3.0


def _arrow(case: str, float32: bool = False) -> pa.Table:
    x, y = CASES[case]
    kind = pa.float32() if float32 else pa.float64()
    return pa.table(
        {
            "u": pa.array(USERS, pa.int64()),
            "x": pa.array(x, kind, from_pandas=False),  # NaN stays NaN, None is NULL
            "y": pa.array(y, kind, from_pandas=False),
            "z": pa.array(Z, kind),
            "b": pa.array(LABELS, pa.int64()),
        }
    )


def _parquet(tmp_path: Path, case: str, float32: bool = False) -> str:
    path = tmp_path / f"{case}{'_f32' if float32 else ''}.parquet"
    table = _arrow(case, float32)
    pq.write_table(table, path)
    # the premise: statistics that leave NaN out (finite max), "no NULLs" where none
    meta = pq.ParquetFile(path).metadata.row_group(0)
    for i, name in enumerate(table.column_names):
        stats = meta.column(i).statistics
        assert stats is not None and stats.has_min_max and math.isfinite(stats.max)
        assert stats.null_count == table.column(name).null_count
    return str(path)


def _data(kind: str, tmp_path: Path, case: str) -> Any:
    if kind == "pandas":
        return _arrow(case).to_pandas()
    if kind == "arrow":
        return _arrow(case)
    if kind == "parquet":
        return _parquet(tmp_path, case)
    if kind == "parquet_float32":
        return _parquet(tmp_path, case, float32=True)
    if kind == "relation":  # the user's connection: dpbayes changes none of its settings
        return duckdb.connect().read_parquet(_parquet(tmp_path, case))
    assert kind == "materialized"
    return Table(_parquet(tmp_path, case)).materialize()


def _present(values: list[Any]) -> list[float]:
    return [v for v in values if v is not None and not math.isnan(v)]


def _column_stats(table: Table, column: str) -> dict[str, Any]:
    src = table.column(column)
    return {
        "n": src.n(),
        "null_count": src.null_count(),
        "clamped_sum": src.clamped_sum(LO, HI),
        "clamped_sum_exact": src.clamped_sum_exact(LO, HI),
        "clamped_sum_of_squares": src.clamped_sum_of_squares(LO, HI),
        "value_counts": src.value_counts(),
        "min": src.min(),
        "max": src.max(),
    }


def _documented(values: list[Any]) -> dict[str, Any]:
    """The statistics as ``Source`` documents them: NULL and NaN are missing."""
    kept = _present(values)
    clamped = [min(max(v, LO), HI) for v in kept]
    counts: dict[float, int] = {}
    for v in kept:
        counts[v] = counts.get(v, 0) + 1
    return {
        "n": len(values),
        "null_count": len(values) - len(kept),
        "clamped_sum": math.fsum(clamped),
        "clamped_sum_exact": sum((Fraction(v) for v in clamped), Fraction(0)),
        "clamped_sum_of_squares": math.fsum(v * v for v in clamped),
        "value_counts": dict(sorted(counts.items())),
        "min": min(kept),
        "max": max(kept),
    }


@pytest.mark.parametrize("kind", INPUTS)
@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("column", ["x", "y"])
def test_column_statistics_leave_nan_out(tmp_path, case, kind, column) -> None:
    """Counts, clamped sums (exact, squared), value counts, min and max: NaN is missing."""
    want = _column_stats(Table(_data("pandas", tmp_path, case)), column)
    got = _column_stats(Table(_data(kind, tmp_path, case)), column)
    assert got == want
    assert got == _documented(CASES[case][0 if column == "x" else 1])


@pytest.mark.parametrize("kind", INPUTS)
@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("dropna", [True, False])
def test_joint_value_counts_treat_nan_as_null(tmp_path, case, kind, dropna) -> None:
    """A row with NaN in any column is left out (``dropna``) or counted under None."""
    columns = ["x", "y"]
    want = Table(_data("pandas", tmp_path, case)).value_counts_joint(columns, dropna=dropna)
    got = Table(_data(kind, tmp_path, case)).value_counts_joint(columns, dropna=dropna)
    assert got == want
    keys = [v for key in got for v in key]
    assert not any(isinstance(v, float) and math.isnan(v) for v in keys)
    x, y = CASES[case]
    rows = [
        tuple(None if v is None or math.isnan(v) else v for v in pair)
        for pair in zip(x, y, strict=True)
    ]
    if dropna:
        rows = [r for r in rows if None not in r]
    assert sum(got.values()) == len(rows)


@pytest.mark.parametrize("kind", INPUTS)
@pytest.mark.parametrize("case", list(CASES))
def test_bounded_statistics_leave_nan_out(tmp_path, case, kind) -> None:
    """At most one row per user (the same rows from every input), then the statistics."""
    bounded = {"user_column": "u", "max_rows_per_user": 1}
    data = _data(kind, tmp_path, case)
    if kind == "materialized":
        got_table = data.bound_contributions("u", 1)
    else:
        got_table = Table(data, **bounded)
    want_table = Table(_data("pandas", tmp_path, case), **bounded)
    for column in ("x", "y"):
        assert _column_stats(got_table, column) == _column_stats(want_table, column)
    want = want_table.value_counts_joint(["x", "y"], dropna=False)
    assert got_table.value_counts_joint(["x", "y"], dropna=False) == want


def _linear(features: list[str], target: str) -> Any:
    return dpb.models.BayesianLinearRegression(
        prior_precision=1.0,
        noise_variance=0.2,
        feature_bound=1.0,
        label_bound=1.0,
        clip="box",
        features=features,
        target=target,
    )


def _logistic(features: list[str], target: str) -> Any:
    return dpb.models.BayesianLogisticRegression(
        prior_precision=1.0, feature_bound=1.0, features=features, target=target
    )


#: (model, features, target): NaN (in some cases) in a feature or in the label
REGRESSIONS = [
    (_linear, ["x", "z"], "u"),
    (_linear, ["z", "y"], "u"),
    (_linear, ["z"], "x"),
    (_linear, ["z"], "y"),
    (_logistic, ["x", "z"], "b"),
    (_logistic, ["z", "y"], "b"),
]


@pytest.mark.parametrize("kind", INPUTS)
@pytest.mark.parametrize("case", list(CASES))
def test_regression_refuses_nan_in_a_feature_or_the_label(tmp_path, case, kind) -> None:
    """NaN in a feature or in the label: refused, as for pandas; NaN only in a column
    the regression does not read: the same statistics as pandas."""
    data = _data(kind, tmp_path, case)
    pandas = _data("pandas", tmp_path, case)
    x, y = CASES[case]
    for model, features, target in REGRESSIONS:
        m = model(features, target)
        read = [*features, target]
        values = (x if "x" in read else []) + (y if "y" in read else [])
        if len(_present(values)) < len(values):
            with pytest.raises(ValueError, match="missing"):
                m.statistics(pandas)
            with pytest.raises(ValueError, match="missing"):
                m.statistics(data)
        else:
            want, got = m.statistics(pandas), m.statistics(data)
            assert got.exact == want.exact


@pytest.mark.parametrize("case", list(CASES))
def test_the_nan_test_is_not_folded_on_a_connection_dpbayes_does_not_own(tmp_path, case) -> None:
    """``DuckDBTable.is_nan`` itself, with DuckDB's default settings: every NaN is found
    (filter pushed into the scan, and an aggregate's filter)."""
    path = _parquet(tmp_path, case)
    con = duckdb.connect()
    table = open_table(con.read_parquet(path))
    for column in ("x", "y"):
        nan = table.is_nan(table.quote(column))
        want = sum(1 for v in CASES[case][0 if column == "x" else 1] if v is not None and v != v)
        src = f"read_parquet('{path}')"
        assert con.execute(f"SELECT COUNT(*) FROM {src} WHERE {nan}").fetchone() == (want,)
        not_null = table.not_null(column)
        kept = len(_present(CASES[case][0 if column == "x" else 1]))
        assert con.execute(f"SELECT COUNT(*) FROM {src} WHERE {not_null}").fetchone() == (kept,)
        got = con.execute(f"SELECT COUNT(*) FILTER (WHERE {nan}) FROM {src}").fetchone()
        assert got == (want,)


def test_owned_connections_do_not_trust_float_statistics(tmp_path) -> None:
    """A second line of defence on files dpbayes opens: the scan assumes a float column may
    hold NaN, so no expression (here a range test) is folded from min/max statistics."""
    con = duckdb.connect()
    names = {r[0] for r in con.execute("SELECT name FROM duckdb_settings()").fetchall()}
    if "parquet_can_have_nan" not in names:
        pytest.skip("this DuckDB has no parquet_can_have_nan setting")
    table = open_table(_parquet(tmp_path, "nan"))
    sql = f"SELECT COUNT(*) FROM {table.relation} WHERE x > CAST(1e300 AS DOUBLE)"
    assert table.fetch(sql) == [(1,)]  # NaN is above every number in DuckDB's order


#: in row groups of 4: the first one's statistics (no infinity there) prove "no NaN"
HARD = [NAN, 0.0, -0.0, 5e-324, -5e-324, 1e308, -1e308, 1.0, math.inf, -math.inf, 2.0, NAN]


@pytest.mark.parametrize("kind", [pa.float64(), pa.float32()], ids=["f64", "f32"])
def test_the_nan_test_finds_nan_and_only_nan(tmp_path, kind) -> None:
    """Among +-inf, zeros, subnormals and huge values (float64 and float32, no NULLs, a
    default connection) the test finds the NaNs and nothing else, row by row (a Parquet
    scan prunes row groups by their statistics, unless the test cannot be folded)."""
    path = tmp_path / "hard.parquet"
    values = pa.array(HARD, pa.float64(), from_pandas=False).cast(kind, safe=False)
    rows = pa.table({"i": pa.array(range(len(HARD)), pa.int64()), "v": values})
    pq.write_table(rows, path, row_group_size=4)
    con = duckdb.connect()
    table = open_table(con.read_parquet(str(path)))
    nan = table.is_nan(table.quote("v"))
    src = f"read_parquet('{path}')"
    rows = con.execute(f"SELECT i FROM {src} WHERE {nan} ORDER BY i").fetchall()
    assert [r[0] for r in rows] == [i for i, v in enumerate(HARD) if math.isnan(v)]
    rows = con.execute(f"SELECT i FROM {src} WHERE NOT {nan} ORDER BY i").fetchall()
    assert [r[0] for r in rows] == [i for i, v in enumerate(HARD) if not math.isnan(v)]
    assert con.execute(f"SELECT {table.is_nan('CAST(NULL AS DOUBLE)')}").fetchone() == (None,)
