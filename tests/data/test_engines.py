"""PostgreSQL and Spark sources against the in-memory computation: exactly equal."""

from __future__ import annotations

import math
import os

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from engine_data import BOUNDS, EXTREMES, engine_frame, reference_bounded

import dpbayes as dpb
from dpbayes.data import SQLAlchemyTable, Table, as_source, load_bundled

# one worker for this module: its fixtures replace shared PostgreSQL tables, which two
# workers doing at once collide on (CREATE TABLE races in the catalog)
pytestmark = pytest.mark.xdist_group("engines")

COLUMNS = ("user", "k", "b", "s", "x", "e")
NUMERIC = ("k", "x", "e")


@pytest.fixture(scope="module")
def frame() -> pd.DataFrame:
    return engine_frame()


def _check_same(got, want, numeric: bool) -> None:
    assert got.kind == want.kind
    assert (got.n(), got.null_count()) == (want.n(), want.null_count())
    assert got.value_counts() == want.value_counts()
    if numeric:
        for lo, hi in BOUNDS:
            assert got.clamped_sum(lo, hi) == want.clamped_sum(lo, hi)
            assert got.clamped_sum_exact(lo, hi) == want.clamped_sum_exact(lo, hi)
        assert got.clamped_sum_of_squares(-3, 3) == want.clamped_sum_of_squares(-3, 3)
        assert (got.min(), got.max()) == (want.min(), want.max())


# ------------------------------------------------------------------------- PostgreSQL
@pytest.fixture(scope="module")
def pg_url(postgres_engine, frame) -> str:
    frame.to_sql("engine_frame", postgres_engine, if_exists="replace", index=False)
    load_bundled().to_sql("randhie", postgres_engine, if_exists="replace", index=False)
    with postgres_engine.begin() as con:
        con.exec_driver_sql('DROP TABLE IF EXISTS "odd ""names"""')
        con.exec_driver_sql(
            'CREATE TABLE "odd ""names""" ("a%%b" DOUBLE PRECISION, "x:y" INTEGER, '  # %% : psycopg
            '"it\'s; DROP TABLE randhie" TEXT, "n" NUMERIC)'
        )
        con.exec_driver_sql(
            'INSERT INTO "odd ""names""" VALUES '
            "(1.5, 1, 'a', 1.25), ('NaN', 2, NULL, 'NaN'), (NULL, NULL, 'b', 2), "
            "(-0.25, 2, 'a', NULL)"
        )
    return os.environ["DPBAYES_TEST_POSTGRES_URL"]


def test_postgres_matches_memory(pg_url, frame):
    for col in COLUMNS:
        got = as_source(pg_url, column=col, table="engine_frame")
        _check_same(got, as_source(frame, column=col), col in NUMERIC)
    # the exact sum of the extremes: +-1e300 cancel, nothing else is lost
    e = frame["e"].to_numpy()
    assert as_source(pg_url, column="e", table="engine_frame").clamped_sum(-1e301, 1e301) == (
        math.fsum(e)
    )
    assert {abs(v) for v in EXTREMES} <= set(np.abs(e).tolist())


def test_postgres_bounded_matches_reference(pg_url, frame):
    ref = reference_bounded(frame, "user", 2, ["user", "k", "b", "s", "x", "e"])
    for col in COLUMNS:
        got = as_source(
            pg_url, column=col, table="engine_frame", user_column="user", max_rows_per_user=2
        )
        assert got.rows_per_user_bound == 2
        _check_same(got, as_source(ref, column=col), col in NUMERIC)
    table = Table(pg_url, table="engine_frame", user_column="user", max_rows_per_user=2)
    assert table.value_counts_joint(["b", "s"]) == Table(ref).value_counts_joint(["b", "s"])


def test_postgres_odd_identifiers_nan_and_numeric(pg_url):
    t = SQLAlchemyTable(pg_url, 'odd "names"')
    a = as_source(t, column="a%b")
    assert (a.n(), a.null_count(), a.value_counts()) == (4, 2, {-0.25: 1, 1.5: 1})
    assert a.clamped_sum(-1, 1) == 0.75
    n = as_source(t, column="n")
    assert (n.null_count(), n.value_counts(), n.clamped_sum(0, 10)) == (2, {1.25: 1, 2: 1}, 3.25)
    s = as_source(t, column="it's; DROP TABLE randhie")
    assert s.value_counts() == {"a": 2, "b": 1}
    assert Table(t).value_counts_joint(["x:y", "it's; DROP TABLE randhie"]) == {
        (1, "a"): 1,
        (2, "a"): 1,
    }


@pytest.mark.parametrize(
    ("table", "column", "match"),
    [
        ("randhie; DROP TABLE randhie", "idp", "not found"),
        ('randhie" --', "idp", "not found"),
        ("randhie", 'idp" FROM randhie; --', "not found"),
        ("no_such_table", "idp", "not found"),
    ],
)
def test_postgres_names_are_checked_against_the_catalog(pg_url, table, column, match):
    with pytest.raises(ValueError, match=match):
        as_source(pg_url, column=column, table=table)
    assert as_source(pg_url, column="idp", table="randhie").n() == 20_190  # still there


def test_postgres_argument_errors(pg_url):
    with pytest.raises(TypeError, match="table is required"):
        as_source(pg_url, column="idp")
    with pytest.raises(ValueError, match="dialect"):
        SQLAlchemyTable("sqlite:///tmp.db", "t")
    with pytest.raises(TypeError, match="table and schema"):
        as_source(load_bundled(), column="idp", table="randhie")


def test_postgres_person_level_release(pg_url):
    model = dpb.models.BetaBernoulli(alpha=1, beta=1)
    src = as_source(
        pg_url, column="hlthp", table="randhie", user_column="person", max_rows_per_user=3
    )
    local = as_source(load_bundled(), column="hlthp", user_column="person", max_rows_per_user=3)
    assert model.statistics(src) == model.statistics(local)
    rel = dpb.release(model, src, mechanism="laplace", epsilon=0.5, rng=3)
    assert rel.guarantee.sensitivity == 3.0
    assert rel.guarantee.details["scale"] == 6.0
    assert "add/remove one user (<= 3 rows)" in rel.guarantee.describe()


# ------------------------------------------------------------------------------ Spark
@pytest.fixture(scope="module")
def spark_frame(spark, frame, tmp_path_factory):
    path = tmp_path_factory.mktemp("spark") / "engine.parquet"
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path)
    return spark.read.parquet(str(path))


@pytest.mark.slow
def test_spark_matches_memory_and_bounds(spark_frame, frame):
    # few queries: each Spark job costs ~0.5 s even on tiny data
    got, want = as_source(spark_frame, column="e"), as_source(frame, column="e")
    assert (got.kind, got.n(), got.null_count()) == (want.kind, want.n(), want.null_count())
    for lo, hi in BOUNDS:
        assert got.clamped_sum(lo, hi) == want.clamped_sum(lo, hi)
        assert got.clamped_sum_exact(lo, hi) == want.clamped_sum_exact(lo, hi)
    assert got.clamped_sum_of_squares(-3, 3) == want.clamped_sum_of_squares(-3, 3)
    assert (got.min(), got.max()) == (want.min(), want.max())
    joint = ["b", "s", "k", "x"]  # bool, string, int with NULLs, float with NaN
    assert Table(spark_frame).value_counts_joint(joint, dropna=False) == Table(
        frame
    ).value_counts_joint(joint, dropna=False)
    ref = reference_bounded(frame, "user", 2, ["user", "k", "b", "s", "x", "e"])
    table = Table(spark_frame, user_column="user", max_rows_per_user=2)
    assert table.rows_per_user_bound == 2
    assert table.value_counts_joint(joint, dropna=False) == Table(ref).value_counts_joint(
        joint, dropna=False
    )
    assert table.column("e").clamped_sum(-1e301, 1e301) == as_source(ref, column="e").clamped_sum(
        -1e301, 1e301
    )


def test_spark_release_and_errors(spark_frame, frame):
    model = dpb.models.NormalMean(prior_mean=0, prior_sd=10, noise_sd=2, lower=-1e3, upper=1e3)
    src = as_source(spark_frame, column="e", user_column="user", max_rows_per_user=3)
    rel = dpb.release(model, src, mechanism="laplace", epsilon=1.0, rng=0)
    n = src.n()
    # user level: add/remove one user, noise on (n, centred sum / half-width), L1 2 per row
    # (+ 2^-16: the one rounding of the centred sum, PROOF Theorem 3)
    assert rel.guarantee.sensitivity == 3 * (2.0 + 2.0**-16) and rel.public["n"] is None
    assert n == int(np.minimum(frame.groupby("user").size(), 3).sum())
    with pytest.raises(ValueError, match="not found"):
        as_source(spark_frame, column="no such column")
