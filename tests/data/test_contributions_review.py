"""Contribution bounding on hard inputs: floats that cannot be cast (NaN, +-inf, 1e300) on
Parquet, NaN person ids, DECIMAL/date/timestamp columns; DuckDB, PostgreSQL and Spark keep
the same rows as the Python twin (``row_key_text``)."""

from __future__ import annotations

import datetime as dt
import hashlib
import math
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dpbayes as dpb
from dpbayes.data import Table, open_table
from dpbayes.data.contributions import float_code, hashed_columns, row_key_text

# one worker: the PostgreSQL tables are shared with the other engine tests' database
pytestmark = pytest.mark.xdist_group("engines")

UTC = dt.UTC
HARD_FLOATS = [
    math.nan,
    math.inf,
    -math.inf,
    1e300,
    -1e300,
    2.0**33,
    -(2.0**33),
    2.0**33 - 2.0**-20,
    -(2.0**33) + 2.0**-20,
    1e13,
    -0.0,
    0.0,
    5e-324,
    -1e-9,
    0.1,
    None,
]


def _mixed_rows(n_users: int = 40, seed: int = 3) -> list[tuple]:
    """(user, rid, x, d, day, ts, tsz) rows: 1..6 rows per user, hard floats spread over."""
    rng = np.random.default_rng(seed)
    rows = []
    rid = 0
    for u in range(n_users):
        for _ in range(int(rng.integers(1, 7))):
            x = HARD_FLOATS[rid % len(HARD_FLOATS)] if rid % 3 == 0 else float(rng.normal())
            cents = int(rng.integers(-100_000, 100_000))
            d = None if rid % 11 == 5 else Decimal(cents).scaleb(-2)
            day = dt.date(1950, 1, 1) + dt.timedelta(days=int(rng.integers(0, 40_000)))
            us = int(rng.integers(-(10**15), 10**15))
            ts = dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=us)
            tsz = dt.datetime(1970, 1, 1, tzinfo=UTC) + dt.timedelta(microseconds=us // 3)
            rows.append((u, rid, x, d, day, ts, tsz))
            rid += 1
    return rows


MIXED_KINDS = ["integer", "integer", "float", "decimal", "date", "timestamp", "timestamp"]
MIXED_NAMES = ["user", "rid", "x", "d", "day", "ts", "tsz"]


def _mixed_arrow(rows: list[tuple]) -> pa.Table:
    cols = list(zip(*rows, strict=True))
    return pa.table(
        {
            "user": pa.array(cols[0], pa.int64()),
            "rid": pa.array(cols[1], pa.int64()),
            "x": pa.array([math.nan if v is None else v for v in cols[2]], pa.float64()),
            "d": pa.array(cols[3], pa.decimal128(10, 2)),
            "day": pa.array(cols[4], pa.date32()),
            "ts": pa.array(cols[5], pa.timestamp("us")),
            "tsz": pa.array(cols[6], pa.timestamp("us", tz="UTC")),
        }
    )


def _reference_rids(rows: list[tuple], k: int) -> set[int]:
    """The rids the Python twin keeps: per user the k smallest md5(row text)."""
    by_user: dict[int, list[tuple]] = {}
    for r in rows:
        by_user.setdefault(r[0], []).append(r)
    kept: set[int] = set()
    for user_rows in by_user.values():

        def digest(r: tuple) -> str:
            values = [None if isinstance(v, float) and math.isnan(v) else v for v in r]
            return hashlib.md5(row_key_text(values, MIXED_KINDS).encode()).hexdigest()

        kept |= {r[1] for r in sorted(user_rows, key=digest)[:k]}
    return kept


def _kept_rids(table) -> set[int]:
    backend = table.backend if isinstance(table, Table) else table
    rows = backend.fetch(f"SELECT {backend.quote('rid')} FROM {backend.relation}")
    return {int(r[0]) for r in rows}


# ------------------------------------------------------------------------------ DuckDB
def test_float_codes_never_fail_and_match_python_on_parquet(tmp_path):
    # Parquet min/max statistics leave NaN out; DuckDB folds guards like abs(x) < 2^33 and
    # isnan(x) from them, so the old CASE guard vanished and the cast failed on NaN
    from dpbayes.data.contributions import _float_code_sql

    path = tmp_path / "floats.parquet"
    xs = [v for v in HARD_FLOATS if v is not None and not math.isnan(v)]
    for values in ([0.5, 1.5, 2.0, math.nan], [*xs, math.nan, None]):
        pq.write_table(pa.table({"x": pa.array(values, pa.float64())}), path)
        t = open_table(str(path))
        code = _float_code_sql(t, t.quote("x"), "duckdb")
        got = t.fetch(f"SELECT x, {code} FROM {t.relation}")
        assert [c for _, c in got] == [float_code(v) for v in values]


def test_a_nan_in_any_float_column_does_not_make_a_release_fail(tmp_path):
    rng = np.random.default_rng(0)
    user = np.repeat(np.arange(100), 2).astype(np.int64)
    smoker = rng.integers(0, 2, 200).astype(bool)
    income = rng.uniform(0, 100, 200)
    outcomes = []
    for victim in (False, True):
        u, s, inc = user, smoker, income
        if victim:  # one more person, whose income (a column the release never reads) is NaN
            u, s, inc = np.append(u, 999), np.append(s, True), np.append(inc, np.nan)
        path = tmp_path / f"people_{int(victim)}.parquet"
        pq.write_table(pa.table({"user": u, "smoker": s, "income": pa.array(inc)}), path)
        data = Table(str(path), user_column="user", max_rows_per_user=2)
        model = dpb.models.BetaBernoulli(alpha=1, beta=1)
        rel = dpb.release(model, data, column="smoker", mechanism="laplace", epsilon=1.0, rng=0)
        outcomes.append(rel.guarantee.sensitivity)
    assert outcomes == [2.0, 2.0]


@pytest.mark.parametrize("form", ["arrow", "parquet"])
def test_duckdb_keeps_the_reference_rows_of_hard_values(form, tmp_path):
    rows = _mixed_rows()
    data: object = _mixed_arrow(rows)
    if form == "parquet":
        data = str(tmp_path / "mixed.parquet")
        pq.write_table(_mixed_arrow(rows), data)
    t = open_table(data, user_column="user", max_rows_per_user=2)
    assert hashed_columns(t._dpb_parent, "user") == MIXED_NAMES
    assert _kept_rids(t) == _reference_rids(rows, 2)


def _nan_id_table(uid: list[float], flag: list[bool]) -> pa.Table:
    return pa.table(
        {
            "uid": pa.array(uid, pa.float64()),  # NaN stays NaN (from_pandas=False)
            "flag": pa.array(flag, pa.bool_()),
            "rid": pa.array(range(len(uid)), pa.int64()),
        }
    )


@pytest.mark.parametrize("form", ["arrow", "parquet", "polars"])
def test_nan_person_ids_are_dropped_like_null_ids(form, tmp_path):
    # no NULL id: DuckDB folds isnan(uid) to false from Parquet statistics only when the
    # statistics also say the column has no NULL
    uid = [1.0, 1.0, 2.0] + [math.nan] * 6
    flag = [False, True, False, True, True, True, False, False, False]
    table = _nan_id_table(uid, flag)
    data: object = table
    if form == "parquet":
        data = str(tmp_path / "nan_ids.parquet")
        pq.write_table(table, data)
    elif form == "polars":
        pl = pytest.importorskip("polars")
        data = pl.from_arrow(table)
    t = open_table(data, user_column="uid", max_rows_per_user=2)
    assert _kept_rids(t) == {0, 1, 2}  # no NaN-id row kept (they were one "user" of 2 rows)
    m = dpb.models.BetaBernoulli(alpha=1, beta=1)
    # removing one anonymous person (rows 3, 4) changes nothing: their rows are never kept
    without = _nan_id_table(uid[:3] + uid[5:], flag[:3] + flag[5:])
    t2 = Table(without, user_column="uid", max_rows_per_user=2)
    assert m.statistics(Table(t), column="flag") == m.statistics(t2, column="flag")


def test_decimal_and_date_columns_enter_the_digest_without_bias(tmp_path):
    rng = np.random.default_rng(0)
    n_users, each = 2000, 5
    user = np.repeat(np.arange(n_users), each).astype(np.int64)
    vals = rng.uniform(0, 10, n_users * each).round(2)
    dec = pa.array([Decimal(f"{v:.2f}") for v in vals], pa.decimal128(10, 2))
    days = rng.integers(0, 3650, n_users * each)
    dates = pa.array([dt.date(2010, 1, 1) + dt.timedelta(int(d)) for d in days], pa.date32())
    path = tmp_path / "visits.parquet"
    pq.write_table(pa.table({"user": user, "visit": dates, "cost": dec}), path)
    t = open_table(str(path), user_column="user", max_rows_per_user=1)
    assert hashed_columns(t._dpb_parent, "user") == ["user", "visit", "cost"]
    year, cost = t.fetch(
        f"SELECT AVG(EXTRACT(year FROM visit)), AVG(CAST(cost AS DOUBLE)) FROM {t.relation}"
    )[0]
    # before: ties on the user column alone kept each user's earliest visit and cheapest
    # cost (mean year 2011.2, all rows 2014.5); now a pseudo-random one
    all_years = np.mean([d.year for d in dates.to_pylist()])
    assert abs(year - all_years) < 0.3 and abs(cost - vals.mean()) < 0.3
    u = open_table(pa.table({"user": user, "cost": dec}), user_column="user", max_rows_per_user=1)
    kept = u.fetch(f"SELECT AVG(CAST(cost AS DOUBLE)) FROM {u.relation}")[0][0]
    assert abs(kept - vals.mean()) < 0.3  # before: 1.63 (each user's smallest of 5)


def test_python_twin_of_the_new_kinds():
    text = row_key_text(
        [7, Decimal("-0.00"), Decimal("1.50"), dt.date(1969, 12, 31), dt.datetime(1970, 1, 1)],
        ["integer", "decimal", "decimal", "date", "timestamp"],
    )
    assert text == "7|0.00|1.50|-1|0"
    aware = dt.datetime(1970, 1, 1, 1, tzinfo=dt.timezone(dt.timedelta(hours=1)))
    assert row_key_text([aware, Decimal("NaN"), None], ["timestamp", "decimal", "date"]) == (
        "0|<NULL>|<NULL>"
    )
    assert row_key_text([1.5, math.nan], [True, "float"]) == "1572864|<NULL>"


# -------------------------------------------------------------------------- PostgreSQL
def test_postgres_hard_values_nan_ids_and_new_kinds(postgres_engine, tmp_path):
    import os

    from dpbayes.data.contributions import digest_kinds

    rows = _mixed_rows()
    with postgres_engine.begin() as con:
        con.exec_driver_sql("DROP TABLE IF EXISTS dpb_review_mixed")
        con.exec_driver_sql(
            'CREATE TABLE dpb_review_mixed ("user" BIGINT, rid BIGINT, x DOUBLE PRECISION, '
            "d NUMERIC(10, 2), day DATE, ts TIMESTAMP, tsz TIMESTAMPTZ)"
        )
        con.exec_driver_sql(
            "INSERT INTO dpb_review_mixed VALUES (%s, %s, %s, %s, %s, %s, %s)", rows
        )
        con.exec_driver_sql("DROP TABLE IF EXISTS dpb_review_odd")
        con.exec_driver_sql(
            "CREATE TABLE dpb_review_odd (uid DOUBLE PRECISION, rid BIGINT, n NUMERIC, "
            "day DATE, ts TIMESTAMPTZ)"
        )
        con.exec_driver_sql(
            "INSERT INTO dpb_review_odd VALUES (1, 0, 'NaN', 'infinity', '-infinity'), "
            "(1, 1, 1e400, '2000-01-01', 'infinity'), (2, 2, -1e400, NULL, NULL), "
            "(2, 3, 'Infinity', '-infinity', '2000-01-01 00:00:00+00'), "
            "('NaN', 4, 1.5, NULL, NULL), ('NaN', 5, 2.5, NULL, NULL), "
            "('NaN', 6, 3.5, NULL, NULL), (NULL, 7, 0, NULL, NULL)"
        )
    url = os.environ["DPBAYES_TEST_POSTGRES_URL"]
    t = open_table(url, table="dpb_review_mixed", user_column="user", max_rows_per_user=2)
    assert digest_kinds(t._dpb_parent) == dict(zip(MIXED_NAMES, MIXED_KINDS, strict=True))
    assert _kept_rids(t) == _reference_rids(rows, 2)
    # the same rows in DuckDB (DECIMAL(10,2) there, NUMERIC(10,2) here): the same choice
    duck = open_table(_mixed_arrow(rows), user_column="user", max_rows_per_user=2)
    assert _kept_rids(t) == _kept_rids(duck)
    odd = open_table(url, table="dpb_review_odd", user_column="uid", max_rows_per_user=1)
    kept = _kept_rids(odd)  # no failure on NaN/+-inf/1e400 NUMERIC, infinite dates
    assert len(kept) == 2 and kept <= {0, 1, 2, 3}  # NaN and NULL ids dropped
    # timestamps past 292277 AD (PostgreSQL allows 294276): their microseconds overflow
    # a BIGINT; bounding used to fail for the whole table on such a row
    with postgres_engine.begin() as con:
        con.exec_driver_sql("DROP TABLE IF EXISTS dpb_review_late")
        con.exec_driver_sql(
            "CREATE TABLE dpb_review_late (uid BIGINT, rid BIGINT, ts TIMESTAMP, tsz TIMESTAMPTZ)"
        )
        con.exec_driver_sql(
            "INSERT INTO dpb_review_late VALUES "
            "(0, 0, '2000-01-01', '2000-01-01 00:00:00+00'), "
            "(1, 1, '294276-12-31 23:59:59.999999', '294276-12-31 23:59:59.999999+00'), "
            "(1, 2, '4713-01-01 00:00:00 BC', '2000-01-02 00:00:00+00')"
        )
    late = open_table(url, table="dpb_review_late", user_column="uid", max_rows_per_user=1)
    assert len(_kept_rids(late)) == 2


# ------------------------------------------------------------------------------ Spark
@pytest.mark.slow
def test_spark_hard_values_nan_ids_and_new_kinds(spark, tmp_path):
    assert spark.conf.get("spark.sql.ansi.enabled") == "true"  # casts fail on overflow
    rows = _mixed_rows()
    path = str(tmp_path / "mixed.parquet")
    pq.write_table(_mixed_arrow(rows), path)
    t = open_table(spark.read.parquet(path), user_column="user", max_rows_per_user=2)
    assert set(hashed_columns(t._dpb_parent, "user")) == set(MIXED_NAMES)
    assert _kept_rids(t) == _reference_rids(rows, 2)
    ids = str(tmp_path / "ids.parquet")
    pq.write_table(_nan_id_table([1.0, 1.0, 2.0, math.nan, math.nan, None], [True] * 6), ids)
    s = open_table(spark.read.parquet(ids), user_column="uid", max_rows_per_user=2)
    assert _kept_rids(s) == {0, 1, 2}
