"""A record's category depends on its own value only, on every container (review 2).

The type used to code a column was inferred from all its values: a pandas object column
went through DuckDB, which turned a column mixing ``1`` and ``"x"`` into text (so one
record ``"x"`` moved every ``1`` to the category ``"1"``); a CSV column was read as
booleans when every field spelled ``true`` and refused when one record wrote ``1``; a
list mixing ``True`` and ``1`` was refused though each record alone was accepted. Every
neighbouring pair below must now give counts that differ by exactly the added record's
contribution, and neither data set may be refused when every record is declared.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from dpbayes.models import BetaBernoulli, DirichletCategorical
from dpbayes.models.bayes_net import BayesNet

MIXED = DirichletCategorical(alpha=1.0, categories=[1, "1", "x"])
BINARY = DirichletCategorical(alpha=1.0, categories=[0, 1])
BOOLS = DirichletCategorical(alpha=1.0, categories=[False, True])


def _neighbours(model: Any, d: Any, d_prime: Any, added: int, **kw: Any) -> None:
    """D' is D plus one record whose category is ``added``: the counts differ there by 1."""
    a = np.asarray(model.statistics(d, **kw).counts)
    b = np.asarray(model.statistics(d_prime, **kw).counts)
    step = np.zeros_like(a)
    step[added] = 1
    assert (b - a).tolist() == step.tolist()


def _csv(path: Path, fields: list[str], header: str = "v") -> str:
    path.write_text(header + "\n" + "".join(f + "\n" for f in fields))
    return str(path)


# ---------------------------------------------------------------- pandas object columns


def test_an_object_series_mixing_types_counts_each_record_by_its_own_value() -> None:
    d = pd.Series([1] * 100, dtype=object)
    d_prime = pd.Series([1] * 100 + ["x"], dtype=object)
    assert MIXED.statistics(d).counts.tolist() == [100, 0, 0]
    _neighbours(MIXED, d, d_prime, added=2)
    frame = pd.Series([1, "1", "x", 1], dtype=object)
    assert MIXED.statistics(frame).counts.tolist() == [2, 1, 1]


def test_a_string_past_the_engines_type_sample_moves_no_record() -> None:
    d = pd.Series([1] * 3000, dtype=object)
    d_prime = pd.Series([1] * 3000 + ["x"], dtype=object)
    assert MIXED.statistics(d_prime).counts.tolist() == [3000, 0, 1]
    _neighbours(MIXED, d, d_prime, added=2)


def test_an_object_frame_column_is_matched_value_by_value() -> None:
    model = DirichletCategorical(alpha=1.0, categories=[1, 2, "x"])
    d = pd.DataFrame({"v": pd.Series([1, 1, 2, "x"], dtype=object)})
    d_prime = pd.DataFrame({"v": pd.Series([1, 1, 2], dtype=object)})
    assert model.statistics(d, column="v").counts.tolist() == [2, 1, 1]
    _neighbours(model, d_prime, d, added=2, column="v")


def test_numbers_are_not_text_categories_whatever_the_other_records() -> None:
    """``1`` is not the declared ``"1"``: refused with or without a record ``"x"``
    (it was counted as ``"1"`` exactly when some record held a letter)."""
    text = DirichletCategorical(alpha=1.0, categories=["1", "2", "x"])
    for values in ([1, 1, 2, "x"], [1, 1, 2]):
        frame = pd.DataFrame({"v": pd.Series(values, dtype=object)})
        with pytest.raises(ValueError, match="not one of the categories") as info:
            text.statistics(frame, column="v")
        assert "\n" not in str(info.value)
    declared = pd.DataFrame({"v": pd.Series(["1", "1", "2", "x"], dtype=object)})
    assert text.statistics(declared, column="v").counts.tolist() == [1 + 1, 1, 1]


# ---------------------------------------------------------------- booleans and numbers


def test_a_list_mixing_booleans_and_numbers_is_counted() -> None:
    assert BINARY.statistics([True] * 3).counts.tolist() == [0, 3]
    _neighbours(BINARY, [True] * 3, [True] * 3 + [1], added=1)
    _neighbours(BOOLS, [True, False], [True, False, 0], added=0)
    _neighbours(BINARY, pd.Series([True] * 3, dtype=object), pd.Series([True] * 3 + [1],
                dtype=object), added=1)  # fmt: skip


def test_beta_bernoulli_counts_booleans_and_numbers_alike() -> None:
    model = BetaBernoulli()
    _neighbours(model, [True] * 3, [True] * 3 + [0], added=1)
    series, series_prime = (pd.Series(v, dtype=object) for v in ([True] * 3, [True] * 3 + [0]))
    assert model.statistics(series_prime).counts.tolist() == [3, 1]
    _neighbours(model, series, series_prime, added=1)


def test_a_csv_column_spelling_true_and_1_is_read_field_by_field(tmp_path: Path) -> None:
    t3 = _csv(tmp_path / "t3.csv", ["true"] * 3)
    ones = _csv(tmp_path / "ones.csv", ["1"] * 3)
    mixed = _csv(tmp_path / "mixed.csv", ["true"] * 3 + ["1"])
    for model in (BINARY, BOOLS):
        assert model.statistics(t3, column="v").counts.tolist() == [0, 3]
        assert model.statistics(ones, column="v").counts.tolist() == [0, 3]
        _neighbours(model, t3, mixed, added=1, column="v")
    falses = _csv(tmp_path / "f.csv", ["false", "0", "FALSE"])
    falses_prime = _csv(tmp_path / "f2.csv", ["false", "0", "FALSE", "true"])
    _neighbours(BOOLS, falses, falses_prime, added=1, column="v")
    bb = BetaBernoulli()
    assert bb.statistics(mixed, column="v").counts.tolist() == [4, 0]
    _neighbours(bb, t3, mixed, added=0, column="v")


def test_bayes_net_reads_a_csv_column_field_by_field(tmp_path: Path) -> None:
    model = BayesNet({"v": [False, True], "w": ["a", "b"]}, [("v", "w")])
    d = _csv(tmp_path / "d.csv", ["true,a"] * 3, header="v,w")
    d_prime = _csv(tmp_path / "d2.csv", ["true,a"] * 3 + ["1,a"], header="v,w")
    ones = _csv(tmp_path / "d3.csv", ["1,a"] * 3, header="v,w")
    s, sp = model.statistics(d), model.statistics(d_prime)
    assert {k: v.tolist() for k, v in s.counts.items()} == {
        k: v.tolist() for k, v in model.statistics(ones).counts.items()
    }
    diff = {k: (np.asarray(sp.counts[k]) - np.asarray(s.counts[k])).tolist() for k in "vw"}
    assert diff == {"v": [0, 1], "w": [[0, 0], [1, 0]]}


def test_number_categories_match_a_csv_field_that_spells_their_value(tmp_path: Path) -> None:
    path = _csv(tmp_path / "n.csv", ["1", "1.0", " 2", "2e0", "0.5"])
    model = DirichletCategorical(alpha=1.0, categories=[0.5, 1, 2])
    assert model.statistics(path, column="v").counts.tolist() == [1, 2, 2]
    bad = _csv(tmp_path / "b.csv", ["1", "yes"])
    with pytest.raises(ValueError, match="not one of the categories") as info:
        model.statistics(bad, column="v")
    assert "yes" not in str(info.value)


# ---------------------------------------------------------------- engine paths


def test_mixed_categories_are_refused_on_every_engine_path_before_reading(tmp_path) -> None:
    import duckdb

    parquet = tmp_path / "m.parquet"
    duckdb.sql("SELECT 1 AS c").write_parquet(str(parquet))
    for data in (str(parquet), str(tmp_path / "absent.parquet"), duckdb.sql("SELECT 1 AS c")):
        with pytest.raises(ValueError, match="mix text and other labels"):
            MIXED.statistics(data, column="c")
    # in memory, matched value by value
    assert MIXED.statistics(pd.DataFrame({"c": [1, 1]}), column="c").counts.tolist() == [2, 0, 0]


def test_typed_columns_keep_their_schema_type(tmp_path) -> None:
    import duckdb

    parquet = tmp_path / "t.parquet"
    duckdb.sql("SELECT * FROM (VALUES (1), (0), (1)) t(c)").write_parquet(str(parquet))
    assert BINARY.statistics(str(parquet), column="c").counts.tolist() == [1, 2]
    assert BINARY.statistics(pd.Series([1, 0, 1])).counts.tolist() == [1, 2]
    assert BINARY.statistics(pd.Series([True, False])).counts.tolist() == [1, 1]
