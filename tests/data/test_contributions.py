"""Contribution bounding in DuckDB: the rows kept, the statistics over them, the errors."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from engine_data import BOUNDS, engine_frame, reference_bounded

from dpbayes.data import Table, as_source, bound_contributions, bundled_path, open_table
from dpbayes.data.contributions import hashed_columns


@pytest.fixture(scope="module")
def frame() -> pd.DataFrame:
    return engine_frame()


def _rows(table) -> pd.DataFrame:
    """The bounded rows themselves (test-only: a real caller never pulls rows)."""
    cols = ", ".join(table.quote(c) for c in table.columns)
    rows = table.fetch(f"SELECT {cols} FROM {table.relation}")
    return pd.DataFrame(rows, columns=table.columns)


@pytest.mark.parametrize("k", [1, 2, 3, 8])
def test_duckdb_keeps_the_reference_rows(frame, k):
    table = open_table(frame, user_column="user", max_rows_per_user=k)
    hashed = hashed_columns(table, "user")
    assert hashed == ["user", "k", "b", "s", "x", "e"]
    ref = reference_bounded(frame, "user", k, hashed)
    got = _rows(table)
    key = ["user", "x", "e", "s", "b"]
    a = got.sort_values(key, na_position="last").reset_index(drop=True)
    b = ref.sort_values(key, na_position="last").reset_index(drop=True)
    pd.testing.assert_frame_equal(a, b, check_dtype=False)
    # each user keeps min(rows, k)
    sizes = frame.groupby("user").size()
    assert table.n() == int(np.minimum(sizes, k).sum())
    assert int(got.groupby("user").size().max()) <= k


def test_statistics_are_those_of_the_bounded_rows(frame):
    ref = reference_bounded(frame, "user", 2, ["user", "k", "b", "s", "x", "e"])
    for col in ("k", "b", "s", "x", "e"):
        got = as_source(frame, column=col, user_column="user", max_rows_per_user=2)
        want = as_source(ref, column=col)
        assert got.rows_per_user_bound == 2
        assert (got.n(), got.null_count(), got.value_counts()) == (
            want.n(),
            want.null_count(),
            want.value_counts(),
        )
        if col in ("k", "x", "e"):
            for lo, hi in BOUNDS:
                assert got.clamped_sum(lo, hi) == want.clamped_sum(lo, hi)
                assert got.clamped_sum_exact(lo, hi) == want.clamped_sum_exact(lo, hi)
            assert got.clamped_sum_of_squares(-3, 3) == want.clamped_sum_of_squares(-3, 3)
    joint = Table(frame).bound_contributions("user", 2).value_counts_joint(["b", "s"])
    assert joint == Table(ref).value_counts_joint(["b", "s"])


def test_a_bounded_frame_is_stored_once_and_a_file_is_bounded_per_query(frame, tmp_path):
    """A frame is in memory: its bounded rows are kept in a temporary table (the window
    runs once); a file stays with the engine, which bounds it at every query. Same rows."""
    stored = open_table(frame, user_column="user", max_rows_per_user=2)
    path = tmp_path / "frame.parquet"
    frame.to_parquet(path)
    per_query = open_table(path, user_column="user", max_rows_per_user=2)
    assert "ROW_NUMBER" not in stored.relation and "ROW_NUMBER" in per_query.relation
    assert stored.rows_per_user_bound == per_query.rows_per_user_bound == 2
    key = ["user", "x", "e", "s", "b"]
    a = _rows(stored).sort_values(key, na_position="last").reset_index(drop=True)
    b = _rows(per_query).sort_values(key, na_position="last").reset_index(drop=True)
    pd.testing.assert_frame_equal(a, b, check_dtype=False)


def test_a_users_rows_depend_on_that_user_only(frame):
    """Changing user 0's rows leaves every other user's kept rows unchanged."""
    other = frame.copy()
    mask = other["user"] == 0
    other.loc[mask, "x"] = 99.0
    other.loc[mask, "s"] = "changed"
    a = _rows(open_table(frame, user_column="user", max_rows_per_user=2))
    b = _rows(open_table(other, user_column="user", max_rows_per_user=2))
    key = ["user", "x", "e", "s", "b"]
    a = a[a["user"] != 0].sort_values(key).reset_index(drop=True)
    b = b[b["user"] != 0].sort_values(key).reset_index(drop=True)
    pd.testing.assert_frame_equal(a, b)


def test_rows_without_a_user_are_dropped_so_their_people_are_protected(frame):
    """Rows whose user is NULL belong to no one and are dropped (the reference twin does
    the same). Bounded together as one "user" they were not protected: removing one
    person's two NULL-id rows changed the kept counts by 6 at k = 2, where the release is
    calibrated to 4 (a loss of 1.5 eps). Now no such removal changes any statistic."""
    import itertools

    from dpbayes.models.bayes_net import BayesNet

    with_nulls = frame.copy()
    with_nulls["user"] = with_nulls["user"].astype("Int64")
    with_nulls.loc[with_nulls.index % 7 == 0, "user"] = pd.NA
    for k in (1, 3):
        table = open_table(with_nulls, user_column="user", max_rows_per_user=k)
        hashed = hashed_columns(table, "user")
        ref = reference_bounded(with_nulls, "user", k, hashed)
        got = _rows(table)
        assert got["user"].notna().all() and len(got) == len(ref) == table.n()
    model = BayesNet({"a": [0, 1], "b": [0, 1]}, [("a", "b")])
    g = np.random.default_rng(0)
    rows = pd.DataFrame(
        {
            "u": pd.array([None] * 12 + [1, 1, 2], dtype="Int64"),
            "rid": np.arange(15),
            "a": g.integers(0, 2, 15),
            "b": g.integers(0, 2, 15),
        }
    )
    full = model.statistics(Table(rows, user_column="u", max_rows_per_user=2)).vector(model)
    for pair in itertools.combinations(range(12), 2):  # one person: two NULL-id rows
        less = rows.drop(index=list(pair)).reset_index(drop=True)
        v = model.statistics(Table(less, user_column="u", max_rows_per_user=2)).vector(model)
        np.testing.assert_array_equal(v, full)


def test_randhie_person_level_counts():
    """RAND HIE: 5,912 people with 1..5 person-years; bounding keeps min(rows, k) each."""
    src = as_source(bundled_path(), column="year")
    full = as_source(bundled_path(), column="person").value_counts()
    assert src.n() == 20_190 and len(full) == 5_912 and max(full.values()) == 5
    for k in (1, 3, 5):
        bounded = as_source(
            bundled_path(), column="person", user_column="person", max_rows_per_user=k
        )
        assert bounded.n() == sum(min(c, k) for c in full.values())
        counts = bounded.value_counts()
        assert len(counts) == 5_912 and max(counts.values()) == min(k, 5)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"user_column": "nope", "max_rows_per_user": 2}, ValueError, "user_column 'nope'"),
        ({"user_column": "user", "max_rows_per_user": 0}, ValueError, "max_rows_per_user"),
        ({"user_column": "user", "max_rows_per_user": 1.5}, TypeError, "max_rows_per_user"),
        ({"user_column": 3, "max_rows_per_user": 2}, TypeError, "user_column"),
        ({"user_column": "user"}, TypeError, "together"),
    ],
)
def test_bad_arguments(frame, kwargs, error, match):
    with pytest.raises(error, match=match):
        as_source(frame, column="x", **kwargs)


def test_not_for_arrays_and_not_twice(frame):
    with pytest.raises(TypeError, match="apply to tables"):
        as_source([1, 2, 3], user_column="u", max_rows_per_user=1)
    table = open_table(frame, user_column="user", max_rows_per_user=2)
    with pytest.raises(ValueError, match="already bounded"):
        bound_contributions(table, "user", 1)


def test_quoted_identifiers_in_bounding():
    frame = pd.DataFrame({'we"ird; user': [1, 1, 1, 2], "it's": [1, 2, 3, 4]})
    src = as_source(frame, column="it's", user_column='we"ird; user', max_rows_per_user=2)
    assert src.n() == 3


def test_a_users_float_values_are_kept_without_favouring_small_ones():
    """A review found that a table of a user column and one float column gave every row of
    a user the same digest, so the ties kept each user's k smallest values: the mean of
    U(0, 10) values came out 1.68 at k = 1 (E[min of 5]). Floats now enter the digest; the
    kept values' mean is that of all values within sampling error."""
    g = np.random.default_rng(1)
    users = np.repeat(np.arange(2000), 5)
    y = g.uniform(0.0, 10.0, users.size)
    frame = pd.DataFrame({"u": users, "y": y})
    table = open_table(frame, user_column="u", max_rows_per_user=1)
    kept = _rows(table)["y"].to_numpy()
    assert kept.size == 2000
    assert abs(kept.mean() - y.mean()) < 4 * y.std() / np.sqrt(2000), kept.mean()
    # not the smallest of each user's five either
    smallest = frame.groupby("u")["y"].min().to_numpy()
    assert np.mean(np.isin(kept, smallest)) < 0.3
