"""The numpy path for in-memory frames gives exactly the engine's (DuckDB's) tables and errors."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

from dpbayes.data import Table, open_table
from dpbayes.models import BayesNet, NaiveBayes
from dpbayes.models import bayes_net_counts as bnc
from dpbayes.privacy.noise import noise_source

INTS = [0, 1, 2]
STRS = ["low", "mid", "high"]


def model() -> BayesNet:
    # a child declared before its parents, string, bool, float and negative categories
    return BayesNet(
        {
            "d": [10.0, 20.5, -3.0],
            "a": INTS,
            "b": STRS,
            "c": [False, True],
            "e": [-2, 7, 1000],
            "f": [0, 1],
        },
        [("a", "d"), ("b", "d"), ("a", "b"), ("c", "e"), ("a", "f")],
    )


def frame(seed: int, n: int) -> pd.DataFrame:
    gen = noise_source(seed).generator()
    return pd.DataFrame(
        {
            "a": gen.integers(0, 3, n),
            "b": np.asarray(STRS, dtype=object)[gen.integers(0, 3, n)],
            "c": gen.random(n) < 0.3,
            "d": np.array([10.0, 20.5, -3.0])[gen.integers(0, 3, n)],
            "e": np.array([-2, 7, 1000], dtype=np.int32)[gen.integers(0, 3, n)],
            "f": gen.integers(0, 2, n).astype(float),  # integral floats for int categories
            "unused": gen.random(n),
        }
    )


def assert_same(a: Any, b: Any) -> None:
    assert a.n == b.n
    assert set(a.counts) == set(b.counts)
    for v in a.counts:
        assert a.counts[v].dtype == b.counts[v].dtype == np.int64
        np.testing.assert_array_equal(a.counts[v], b.counts[v])


def error_of(fn: Any) -> str:
    with pytest.raises(ValueError) as info:
        fn()
    return str(info.value)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("n", [1, 7, 500])
def test_numpy_and_engine_counts_are_identical(seed: int, n: int) -> None:
    bn, df = model(), frame(seed, n)
    assert bnc.in_memory_columns(bn, df) is not None  # the numpy path is taken
    fast = bn.statistics(df)
    assert_same(fast, bnc._engine_counts(bn, df))
    assert_same(fast, bn.statistics({k: df[k].to_numpy() for k in df.columns}))
    assert sum(int(t.sum()) for t in fast.counts.values()) == n * len(bn.nodes)


def test_pandas_string_dtypes_and_float32_take_the_numpy_path() -> None:
    bn, df = model(), frame(3, 200)
    df["b"] = df["b"].astype("string")  # pandas' nullable string dtype
    df["d"] = df["d"].astype(np.float32)  # 20.5 and -3 are exact in float32
    assert bnc.in_memory_columns(bn, df) is not None
    assert_same(bn.statistics(df), bnc._engine_counts(bn, df))


def test_other_dtypes_are_matched_as_python_objects_with_the_engine_tables() -> None:
    # the path depends on the container, never on a column's dtype or values: categorical
    # and nullable columns are counted in memory, their values matched as Python objects
    bn, plain = model(), frame(4, 50)
    for column, dtype in (("a", "category"), ("b", "category"), ("e", "Int64")):
        df = plain.copy()
        df[column] = df[column].astype(dtype)
        assert bnc.in_memory_columns(bn, df) is not None
        assert_same(bn.statistics(df), bn.statistics(plain))
        assert_same(bn.statistics(df), bnc._engine_counts(bn, df))


def corrupt(df: pd.DataFrame, column: str, rows: list[int], value: Any) -> pd.DataFrame:
    out = df.copy()
    if value is None and out[column].dtype.kind in "iu":
        out[column] = out[column].astype(float)  # a NULL makes pandas' int column float
    out.loc[rows, column] = value if value is not None else np.nan
    return out


@pytest.mark.parametrize(
    ("column", "rows", "value"),
    [
        ("a", [3], None),  # NaN in an integer column (becomes float)
        ("a", [3, 9], 5),  # out of range
        ("a", [3], -1),
        ("d", [0, 5], None),
        ("d", [2], 99.0),
        ("b", [1], None),  # None in a string column
        ("b", [4, 6], "medium"),
        ("e", [8], 6),
        ("f", [7], 0.5),  # not a category, not integral
        ("f", [7], None),
    ],
)
def test_bad_values_give_the_engine_error(column: str, rows: list[int], value: Any) -> None:
    bn = model()
    df = corrupt(frame(5, 40), column, rows, value)
    assert bnc.in_memory_columns(bn, df) is not None
    expected = error_of(lambda: bnc._engine_counts(bn, df))
    assert error_of(lambda: bn.statistics(df)) == expected
    assert column in expected


@pytest.mark.parametrize("seed", [6, 7, 8, 9])
def test_several_bad_values_report_the_engine_first(seed: int) -> None:
    bn = model()
    gen = noise_source(seed).generator()
    df = frame(seed, 60)
    df["a"] = df["a"].astype(float)
    for column, bad in (("a", 4.0), ("a", np.nan), ("b", "x"), ("b", None), ("d", 1.5)):
        rows = gen.integers(0, 60, 2)
        df.iloc[rows, df.columns.get_loc(column)] = bad
    expected = error_of(lambda: bnc._engine_counts(bn, df))
    assert error_of(lambda: bn.statistics(df)) == expected


def test_missing_column_and_empty_data() -> None:
    bn, df = model(), frame(10, 20)
    for drop in ("a", "b", "e"):
        part = df.drop(columns=drop)
        assert error_of(lambda p=part: bn.statistics(p)) == error_of(
            lambda p=part: bnc._engine_counts(bn, p)
        )
    # empty data are data (n = 0, zero tables) in both paths: under add/remove a refusal
    # would tell the empty data set from its one-record neighbours
    for empty in ({k: df[k].to_numpy()[:0] for k in df.columns}, df.iloc[:0]):
        stats = bn.statistics(empty)
        assert stats.n == 0
        assert all(not t.any() and t.shape == bn.table_shape(v) for v, t in stats.counts.items())
    with pytest.raises(ValueError, match="same length"):
        bn.statistics({"a": [0, 1], "b": ["low"]})


def test_naive_bayes_on_a_wide_binary_frame() -> None:
    gen = noise_source(11).generator()
    d, n = 30, 400
    y = gen.integers(0, 2, n)
    cols: dict[str, Any] = {"y": y}
    for j in range(d):
        cols[f"x{j}"] = (gen.random(n) < np.where(y == 1, 0.7, 0.3)).astype(np.int64)
    df = pd.DataFrame(cols)
    nb = NaiveBayes("y", [0, 1], {f"x{j}": [0, 1] for j in range(d)})
    fast = nb.statistics(df)
    assert_same(fast, bnc._engine_counts(nb, df))
    np.testing.assert_array_equal(fast.counts["x0"], pd.crosstab(df["y"], df["x0"]).to_numpy())


@pytest.mark.parametrize("k", [1, 2])
def test_user_level_tables_stay_in_the_engine_and_match_the_kept_rows(k: int) -> None:
    bn, df = model(), frame(12, 300)
    gen = noise_source(13).generator()
    df["user"] = gen.integers(0, 60, len(df))
    table = Table(df, user_column="user", max_rows_per_user=k)
    assert bnc.in_memory_columns(bn, table) is None
    bounded = bn.statistics(table)
    kept_table = open_table(df, user_column="user", max_rows_per_user=k)
    rows = kept_table.fetch(f"SELECT * FROM {kept_table.relation}")
    kept = pd.DataFrame(rows, columns=kept_table.columns).astype(df.dtypes.to_dict())
    assert bnc.in_memory_columns(bn, kept) is not None
    assert_same(bounded, bn.statistics(kept))
    assert bounded.n <= 60 * k


SMOKER = {"smoker": [0, 1, "unknown"], "cancer": [0, 1]}


def smoker_model() -> BayesNet:
    return BayesNet(SMOKER, [("smoker", "cancer")])


@pytest.mark.parametrize(
    "container",
    [
        pd.DataFrame,
        dict,  # a mapping of lists: numpy would turn [0, 1, "unknown"] into text
        lambda d: {k: np.asarray(v, dtype=object) for k, v in d.items()},
        lambda d: pd.DataFrame(d).astype({"smoker": "category"}),
    ],
)
def test_mixed_type_categories_accept_every_declared_value_whatever_the_other_records(
    container: Any,
) -> None:
    """Acceptance of a record depends on its own value only: 1 is the declared 1 whether
    or not another record holds "unknown" (it was refused when one did: the column went
    to the engine as text, or numpy made text of the list)."""
    bn = smoker_model()
    cancer = [0, 1, 0]
    for smoker, expected in (
        ([0, 1, 1], [[1, 0], [1, 1], [0, 0]]),
        ([0, 1, "unknown"], [[1, 0], [0, 1], [1, 0]]),
        (["unknown", "unknown", 1], [[0, 0], [1, 0], [1, 1]]),
    ):
        stats = bn.statistics(container({"smoker": smoker, "cancer": cancer}))
        assert stats.n == 3
        np.testing.assert_array_equal(stats.counts["cancer"], expected)
    # an undeclared value is refused whatever the others hold: "1" is not the category 1
    for smoker in ([0, 1, "1"], ["1", "1", "1"], ["unknown", "1", 0]):
        with pytest.raises(ValueError, match="'smoker' has a value that is not a category"):
            bn.statistics(container({"smoker": smoker, "cancer": cancer}))


def test_mixed_type_categories_are_refused_on_the_engine_path_whatever_the_data() -> None:
    """The engine holds one type per column: a model with mixed-type categories is refused
    there before any value is read, alike for every data set (a public fact)."""
    bn = smoker_model()
    for smoker in ([0, 1, 1], [0, 1, "unknown"], [1, 1, 1]):
        df = pd.DataFrame({"u": [1, 2, 3], "smoker": smoker, "cancer": [0, 1, 0]})
        with pytest.raises(ValueError, match="variable 'smoker' declares categories of mixed"):
            bn.statistics(Table(df, user_column="u", max_rows_per_user=1))
    # the path is chosen by the container: a frame is counted in memory, whatever it holds
    for smoker in ([0, 1, 1], [0, 1, "unknown"], ["unknown"] * 3):
        df = pd.DataFrame({"smoker": smoker, "cancer": [0, 1, 0]})
        assert bnc.in_memory_columns(bn, df) is not None
    assert bnc.mixed_type_variable(bn) == "smoker"
    assert bnc.mixed_type_variable(model()) is None  # ints with floats, bools: numbers


@pytest.mark.parametrize(
    "cats",
    [["0", "1", "x"], ["1.50", "2.50", "x"], ["True", "False", "x"], ["1e3", "007", "x"]],
)
def test_text_categories_match_a_csv_whatever_type_the_engine_infers(tmp_path, cats) -> None:
    """Text categories against a CSV file: the engine reads a column as numbers or
    booleans when no record holds a letter ("1.50" as 1.5, "True" as true, "007" as 7)
    and as text otherwise. The file is read with those columns as text, so a record is
    matched by its own text: the file without "x" is counted like its neighbour with it
    (it was refused, one bit about the other records per call)."""
    bn = BayesNet({"s": cats, "t": ["true", "false"]}, [("s", "t")])
    tables = []
    for s_col, name in (([cats[0], cats[1], cats[1]], "numeric.csv"), (cats, "text.csv")):
        path = tmp_path / name
        rows = zip(s_col, ["true", "false", "true"], strict=True)
        path.write_text("s,t\n" + "".join(f"{a},{b}\n" for a, b in rows))
        tables.append(bn.statistics(str(path)).counts["s"])
    np.testing.assert_array_equal(tables[0], [1, 2, 0])
    np.testing.assert_array_equal(tables[1], [1, 1, 1])


@pytest.mark.parametrize("parents", [22, 40, 70])
def test_an_oversized_family_table_is_refused_naming_the_node(parents: int) -> None:
    variables: dict[str, list[int]] = {f"p{i}": [0, 1] for i in range(parents)}
    variables["c"] = [0, 1]
    bn = BayesNet(variables, [(f"p{i}", "c") for i in range(parents)])
    df = pd.DataFrame({k: [0, 1] for k in variables})
    for data in (df, Table(df.assign(u=[1, 2]), user_column="u", max_rows_per_user=1)):
        with pytest.raises(ValueError, match=f"node 'c' .*{parents} parents.* cells, more than"):
            bn.statistics(data)
    small = BayesNet({k: variables[k] for k in ("p0", "p1", "c")}, [("p0", "c"), ("p1", "c")])
    assert small.statistics(df).n == 2
