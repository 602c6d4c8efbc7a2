"""as_source over every kind of input: identical statistics, NULL handling, errors."""

from __future__ import annotations

import math

import duckdb
import numpy as np
import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from dpbayes.data import ArraySource, ColumnSource, Source, Table, as_source

LO, HI = -1.25, 2.5


def _stats(src: Source) -> tuple:
    return (
        src.n(),
        src.null_count(),
        src.value_counts(),
        src.clamped_sum(LO, HI),
        src.clamped_sum_of_squares(LO, HI),
        src.min(),
        src.max(),
    )


@pytest.fixture(scope="module")
def frame() -> pd.DataFrame:
    rng = np.random.default_rng(11)
    n = 2_000
    x = np.round(rng.standard_normal(n) * 1.7 + 0.3, 3) + rng.standard_normal(n) * 1e-9
    x[rng.random(n) < 0.05] = np.nan
    return pd.DataFrame(
        {
            "x": x,
            "k": rng.integers(0, 7, n),
            "b": rng.random(n) < 0.3,
            "s": rng.choice(["red", "green", "blue"], n),
        }
    )


@pytest.fixture(scope="module")
def files(frame, tmp_path_factory) -> dict[str, object]:
    d = tmp_path_factory.mktemp("sources")
    csv, gz, parquet = d / "t.csv", d / "t.csv.gz", d / "t.parquet"
    # repr(float) round-trips exactly, so the file holds the same doubles as the frame
    frame.to_csv(csv, index=False, float_format=None)
    frame.to_csv(gz, index=False, compression="gzip")
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), parquet)
    return {"csv": csv, "csv.gz": str(gz), "parquet": parquet}


def test_every_input_kind_gives_identical_statistics(frame, files):
    for col in ("x", "k"):
        expected = _stats(as_source(frame[col].to_numpy()))
        sources = [
            as_source(frame, col),
            as_source(frame[col]),
            as_source(pl.from_pandas(frame), col),
            as_source(pa.Table.from_pandas(frame), col),
            as_source(duckdb.connect().from_df(frame), col),
            as_source(files["csv"], col),
            as_source(files["csv.gz"], col),
            as_source(files["parquet"], col),
            Table(frame).column(col),
        ]
        for src in sources:
            assert _stats(src) == expected, src.name


def test_numpy_statistics_are_the_exact_values(frame):
    x = frame["x"].to_numpy()
    v = x[~np.isnan(x)]
    src = as_source(x)
    assert isinstance(src, ArraySource)
    assert src.n() == len(x) and src.null_count() == int(np.isnan(x).sum())
    assert src.clamped_sum(LO, HI) == math.fsum(np.clip(v, LO, HI))
    assert src.clamped_sum_of_squares(LO, HI) == math.fsum(np.clip(v, LO, HI) ** 2)
    assert src.min() == v.min() and src.max() == v.max()
    assert sum(src.value_counts().values()) == len(v)


def test_list_tuple_and_array_agree():
    values = [3, 1, 4, 1, 5, 9, 2, 6]
    expected = _stats(as_source(np.array(values)))
    assert _stats(as_source(values)) == expected == _stats(as_source(tuple(values)))
    assert _stats(as_source(pd.Series(values))) == expected
    assert as_source(values).value_counts() == {1: 2, 2: 1, 3: 1, 4: 1, 5: 1, 6: 1, 9: 1}
    assert all(type(k) is int for k in as_source(values).value_counts())


def test_bool_and_string_columns(frame, files):
    for src in (as_source(frame, "b"), as_source(files["parquet"], "b"), as_source(frame["b"])):
        vc = src.value_counts()
        assert vc == {False: int((~frame["b"]).sum()), True: int(frame["b"].sum())}
        assert all(type(k) is bool for k in vc)
        assert src.clamped_sum(0, 1) == float(frame["b"].sum())
    expected = frame["s"].value_counts().to_dict()
    for src in (
        as_source(frame, "s"),
        as_source(files["csv"], "s"),
        as_source(frame["s"].to_numpy()),
        as_source(list(frame["s"])),
    ):
        assert src.kind == "string"
        assert src.value_counts() == expected
        with pytest.raises(TypeError, match="needs numbers"):
            src.clamped_sum(0, 1)
        with pytest.raises(TypeError, match="needs numbers"):
            src.min()


def test_nulls_are_counted_and_excluded(tmp_path):
    csv = tmp_path / "nulls.csv"
    csv.write_text("a,s\n1.5,x\n,y\nNA,\nnan,z\n-2,NULL\n4,x\n")
    expected = {1.5: 1, -2.0: 1, 4.0: 1}
    sources = [
        as_source([1.5, None, float("nan"), np.nan, -2, 4]),
        as_source(np.array([1.5, np.nan, np.nan, np.nan, -2, 4])),
        as_source(pd.Series([1.5, None, pd.NA, np.nan, -2, 4], dtype="Float64")),
        as_source(pd.DataFrame({"a": [1.5, None, np.nan, np.nan, -2, 4]}), "a"),
        as_source(csv, "a"),
    ]
    for src in sources:
        assert (src.n(), src.null_count()) == (6, 3), src.name
        assert src.value_counts() == expected, src.name
        assert src.clamped_sum(-1, 3) == 1.5 - 1 + 3, src.name
        assert src.clamped_sum_of_squares(-1, 3) == 2.25 + 1 + 9, src.name
        assert (src.min(), src.max()) == (-2, 4), src.name
    strings = as_source(csv, "s")
    assert (strings.n(), strings.null_count()) == (6, 2)
    assert strings.value_counts() == {"x": 2, "y": 1, "z": 1}


def test_all_null_column():
    src = as_source([None, float("nan")])
    assert (src.n(), src.null_count(), src.value_counts()) == (2, 2, {})
    assert src.clamped_sum(0, 1) == 0.0
    table = as_source(pd.DataFrame({"a": [np.nan, np.nan]}), "a")
    assert (table.n(), table.null_count(), table.clamped_sum(0, 1)) == (2, 2, 0.0)
    for s in (src, table):
        with pytest.raises(ValueError, match="no non-NULL values"):
            s.min()


def test_clamping_and_infinities():
    values = [-np.inf, -5.0, 0.5, 7.0, np.inf]
    for src in (as_source(values), as_source(pd.DataFrame({"v": values}), "v")):
        assert src.clamped_sum(-1, 2) == -1 - 1 + 0.5 + 2 + 2
        assert src.clamped_sum_of_squares(-1, 2) == 1 + 1 + 0.25 + 4 + 4
        assert (src.min(), src.max()) == (-np.inf, np.inf)


def test_bounds_that_are_not_short_decimals():
    x = [0.1, 0.2, 0.30000000000000004, 1 / 3]
    lo, hi = 0.15000000000000002, 1 / 3 - 1e-17
    a, b = as_source(x), as_source(pd.DataFrame({"x": x}), "x")
    assert a.clamped_sum(lo, hi) == b.clamped_sum(lo, hi) == math.fsum(np.clip(x, lo, hi))


def test_source_is_returned_as_is(frame):
    src = as_source(frame, "x")
    assert as_source(src) is src
    arr = as_source([1, 2])
    assert as_source(arr) is arr
    assert as_source(Table(frame), "k").value_counts() == as_source(frame, "k").value_counts()


def test_names_for_messages(frame, files):
    assert as_source(files["csv"], "x").name == "column 'x' of t.csv"
    assert as_source(frame, "k").name == "column 'k' of DataFrame"
    assert as_source(frame["s"]).name == "series 's'"
    assert as_source([1]).name == "list"
    assert as_source([1], name="ages").name == "ages"


def test_table_columns_and_contingency_table(frame, files):
    expected = {
        (int(k), s): int(c) for (k, s), c in frame.groupby(["k", "s"]).size().to_dict().items()
    }
    for data in (frame, files["csv"], files["parquet"]):
        table = Table(data)
        assert table.columns == ["x", "k", "b", "s"]
        assert table.n() == len(frame)
        assert table.value_counts_joint(["k", "s"]) == expected
        assert table.count_table(["k", "s"]) == expected
        src = as_source(data, "x")
        assert isinstance(src, ColumnSource)
        assert src.columns() == ["x", "k", "b", "s"]
        assert src.value_counts_joint(["k", "s"]) == expected


def test_contingency_table_nulls():
    df = pd.DataFrame({"a": [1, 1, None, 2], "b": ["u", None, "v", "u"]})
    table = Table(df)
    assert table.value_counts_joint(["a", "b"]) == {(1.0, "u"): 1, (2.0, "u"): 1}
    full = table.value_counts_joint(["a", "b"], dropna=False)
    assert sum(full.values()) == 4 and full[(1.0, None)] == 1 and full[(None, "v")] == 1
    with pytest.raises(ValueError, match="'c' not found"):
        table.value_counts_joint(["a", "c"])
    with pytest.raises(TypeError, match="list of column names"):
        table.value_counts_joint("a")
    with pytest.raises(ValueError, match="at least one"):
        table.value_counts_joint([])


@pytest.mark.parametrize(
    ("data", "column", "error", "message"),
    [
        (
            pd.DataFrame({"a": [1], "b": [2]}),
            "c",
            ValueError,
            r"column 'c' not found .*\['a', 'b'\]",
        ),
        (pd.DataFrame({"a": [1]}), None, TypeError, "column is required"),
        ([1, 2], "a", TypeError, "column must be None for a list"),
        (np.array([1, 2]), "a", TypeError, "column must be None for a ndarray"),
        (pd.Series([1, 2]), "a", TypeError, "column must be None for a pandas Series"),
        ("/no/such/dir/data.csv", "a", ValueError, "'/no/such/dir/data.csv' not found"),
        ("/no/such/dir/data.xlsx", "a", ValueError, "unknown file type .*data.xlsx"),
        (np.zeros((2, 2)), None, ValueError, "1-dimensional"),
        ([[1, 2], [3, 4]], None, ValueError, "1-dimensional"),
        ([1, "a"], None, TypeError, "mix of"),
        (np.array(["2020-01-01"], dtype="datetime64[D]"), None, TypeError, "datetime64"),
        ({"a": [1]}, None, TypeError, "got dict"),
        (3.5, None, TypeError, "got float"),
        (pd.DataFrame({"a": [1]}), 3, TypeError, "column must be a string"),
    ],
)
def test_errors_are_one_line_and_name_the_problem(data, column, error, message):
    with pytest.raises(error, match=message) as info:
        as_source(data, column)
    assert "\n" not in str(info.value)


def test_empty_data_are_data_with_no_rows(tmp_path):
    # under add/remove neighbours the empty data set is a neighbour of every one-record
    # data set: refusing it would tell the two apart, so every reader returns n = 0
    header_only = tmp_path / "header.csv"
    duckdb.sql(f"COPY (SELECT 1.5 AS a WHERE false) TO '{tmp_path / 'none.parquet'}'")
    header_only.write_text("a,b\n")
    for data, column in [
        ([], None),
        (np.array([]), None),
        (pd.Series([], dtype=float), None),
        (pd.DataFrame({"a": [0.5, 1.0]}).iloc[:0], "a"),
        (header_only, "a"),
        (tmp_path / "none.parquet", "a"),
    ]:
        src = as_source(data, column)
        assert (src.n(), src.null_count(), src.value_counts()) == (0, 0, {})
        assert src.clamped_sum(-1.0, 1.0) == 0.0


def test_file_errors(tmp_path):
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    bad = tmp_path / "bad.parquet"
    bad.write_text("this is not parquet")
    folder = tmp_path / "dir.csv"
    folder.mkdir()
    for path, message in [
        (empty, "empty.csv"),
        (bad, "cannot read parquet file .*bad.parquet"),
        (folder, "is not a file"),
    ]:
        with pytest.raises(ValueError, match=message) as info:
            as_source(path, "a")
        assert "\n" not in str(info.value)


def test_strings_in_a_numeric_file_column_fail_clearly(tmp_path):
    path = tmp_path / "late.csv"
    # the type sniffer sees only numbers at the start; the bad value comes later
    path.write_text("a\n" + "1\n" * 30_000 + "abc\n")
    src = as_source(path, "a")  # every row is scanned: the column is text, not a failure
    with pytest.raises(TypeError, match=r"needs numbers.*late\.csv holds string") as info:
        src.clamped_sum(0, 1)
    assert "\n" not in str(info.value)


def test_bound_errors():
    src = as_source([1.0, 2.0])
    with pytest.raises(ValueError, match="lower must be < upper"):
        src.clamped_sum(2, 1)
    with pytest.raises(TypeError, match="lower must be a real number"):
        src.clamped_sum("0", 1)
    with pytest.raises(ValueError, match="upper must be finite"):
        src.clamped_sum(0, np.inf)
    with pytest.raises(ValueError, match="squares overflow"):
        src.clamped_sum_of_squares(0, 1e200)
    with pytest.raises(ValueError, match="squares overflow"):
        as_source(pd.DataFrame({"a": [1.0]}), "a").clamped_sum_of_squares(0, 1e200)


def test_tsv_and_lazy_polars(tmp_path, frame):
    tsv = tmp_path / "t.tsv"
    frame.to_csv(tsv, sep="\t", index=False)
    expected = _stats(as_source(frame["k"].to_numpy()))
    assert _stats(as_source(tsv, "k")) == expected
    assert _stats(as_source(pl.from_pandas(frame).lazy(), "k")) == expected


def test_views_are_released_when_sources_are_dropped():
    import gc

    from dpbayes.data import readers

    def views() -> int:
        sql = "SELECT COUNT(*) FROM duckdb_views() WHERE view_name LIKE 'dpb_view_%'"
        return readers._connection().execute(sql).fetchone()[0]

    gc.collect()
    before = views()
    sources = [as_source(pd.DataFrame({"a": [1.0, 2.0]}), "a") for _ in range(5)]
    assert views() == before + 5
    del sources
    gc.collect()
    assert views() == before


@settings(max_examples=20, deadline=None)
@given(
    st.lists(st.floats(min_value=-1e6, max_value=1e6) | st.just(np.nan), min_size=1, max_size=60),
    st.floats(min_value=-10, max_value=10),
    st.floats(min_value=1e-3, max_value=20),
)
def test_numpy_and_duckdb_agree_on_random_data(values, lower, width):
    upper = lower + width
    a = as_source(np.array(values))
    b = as_source(pd.DataFrame({"v": values}), "v")
    assert (a.n(), a.null_count(), a.value_counts()) == (b.n(), b.null_count(), b.value_counts())
    assert a.clamped_sum(lower, upper) == b.clamped_sum(lower, upper)
    assert a.clamped_sum_of_squares(lower, upper) == b.clamped_sum_of_squares(lower, upper)
    if a.null_count() < a.n():
        assert (a.min(), a.max()) == (b.min(), b.max())


_SCALARS = st.one_of(
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.text(max_size=3),
    st.none(),
    st.integers(-(2**63), 2**63 - 1).map(np.int64),
    st.floats(allow_nan=True).map(np.float64),
    st.integers(-100, 100).map(np.int32),
    st.booleans().map(np.bool_),
)


@settings(max_examples=300, deadline=None)
@example([0, math.nan])  # ints and a NULL: an int column (the fast path made it float)
@example([np.int64(3), 2**62 + 1, np.float64(math.nan), math.nan])
@given(
    st.one_of(
        st.lists(st.integers(-(2**63), 2**63 - 1), max_size=20),
        st.lists(st.one_of(st.integers(-(2**40), 2**40), st.floats()), max_size=20),
        st.lists(st.booleans(), max_size=20),
        st.lists(st.text(max_size=3), max_size=20),
        st.lists(_SCALARS, max_size=8),
    )
)
def test_lists_of_one_kind_take_the_fast_path_to_the_same_values(values):
    """A list whose values share one kind is converted without a Python-level pass over
    them; the typed values, their dtype (and signed zeros) and the NULL count equal those
    of the general element-by-element path, and a list the fast path declines (NULL
    objects, mixed kinds, other numpy types) gets the general path's result or error."""
    from dpbayes.data.source import _from_homogeneous, _from_objects

    objects = np.empty(len(values), dtype=object)
    objects[:] = values
    try:
        want = _from_objects(objects, "x")
    except (TypeError, ValueError) as e:
        assert _from_homogeneous(values) is None
        with pytest.raises(type(e)):
            ArraySource(values, name="x")
        return
    got = _from_homogeneous(values)
    src = ArraySource(values, name="x")
    for vals, nulls in ([got] if got is not None else []) + [(src.values, src.null_count())]:
        assert vals.dtype == want[0].dtype and nulls == want[1]
        assert np.array_equal(vals, want[0])
        if vals.dtype.kind == "f":
            assert np.array_equal(np.signbit(vals), np.signbit(want[0]))
