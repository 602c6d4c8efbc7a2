"""A CSV file's column types must not depend on the records' values (review F2).

DuckDB guesses a CSV column's type from its values: a column of codes "1"/"2" is read as
numbers unless some record holds a letter. A release over declared text categories
["1", "2", "x"] was then made from a data set with a record "x" and refused for its
neighbour without it, a certain distinguisher. The type now follows the declaration (text
categories: the column is read as text), the sniffer reads every row (no read that fails
because of a value far down the file), and a user column is read as text.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import dpbayes as dpb
from dpbayes.data import Table, as_source, open_table
from dpbayes.models import DirichletCategorical, NormalMean

TEXT = DirichletCategorical(alpha=1.0, categories=["1", "2", "x"])


def _write(path: Path, header: str, rows: list[tuple]) -> Path:
    path.write_text(header + "\n" + "".join(",".join(map(str, r)) + "\n" for r in rows))
    return path


def _neighbours(tmp_path: Path) -> tuple[Path, Path]:
    """D (a victim, person 99, has grade "x") and D' (the victim removed)."""
    grades = np.random.default_rng(0).integers(1, 3, 40).tolist()
    rows = list(zip(range(40), grades, strict=True))
    d = _write(tmp_path / "d.csv", "person,grade", [*rows, (99, "x")])
    d_prime = _write(tmp_path / "d_prime.csv", "person,grade", rows)
    return d, d_prime


def test_text_categories_are_counted_whether_or_not_a_record_holds_a_letter(tmp_path):
    d, d_prime = _neighbours(tmp_path)
    with_victim = TEXT.statistics(str(d), column="grade")
    without = TEXT.statistics(str(d_prime), column="grade")
    assert with_victim.counts.tolist() == [*without.counts[:2].tolist(), 1]
    assert without.counts[2] == 0 and without.n == 40 and with_victim.n == 41


def test_a_bounded_table_reads_the_declared_text_column_as_text(tmp_path):
    """``Table(path, user_column=...)`` opens the file before the model is known: the
    model's text categories read it again, bounded and materialized as it was."""
    d, d_prime = _neighbours(tmp_path)
    for path in (d, d_prime):
        table = Table(str(path), user_column="person", max_rows_per_user=1)
        for data in (table, table.materialize()):
            stats = TEXT.statistics(data, column="grade")
            assert stats.n == (41 if path == d else 40)
            rel = dpb.release(TEXT, data, column="grade", mechanism="geometric", epsilon=1.0)
            assert rel.guarantee.details["rows_per_user"] == 1
    bounded = Table(str(d_prime)).bound_contributions("person", 1)
    assert TEXT.statistics(bounded, column="grade").n == 40


def test_releases_on_neighbouring_csv_files_are_both_made(tmp_path):
    d, d_prime = _neighbours(tmp_path)
    for path in (d, d_prime):
        rel = dpb.release(TEXT, str(path), column="grade", mechanism="geometric",
                          epsilon=1.0, neighbours="add-remove")  # fmt: skip
        assert len(rel.released["counts"]) == 3


def test_the_text_reading_keeps_the_files_text(tmp_path):
    """As text, "1.50" stays "1.50" (as numbers it would be 1.5, or text if some record
    held a letter): the declared label matches the file's text."""
    path = _write(tmp_path / "p.csv", "price", [("1.50",), ("2",), ("1.50",)])
    model = DirichletCategorical(alpha=1.0, categories=["1.50", "2"])
    assert model.statistics(str(path), column="price").counts.tolist() == [2, 1]
    assert as_source(str(path), "price", text=True).kind == "string"
    assert as_source(str(path), "price").kind == "numeric"  # undeclared: guessed


def test_numeric_categories_still_match_a_column_of_numbers(tmp_path):
    path = _write(tmp_path / "codes.csv", "c", [(1,), (2,), (1,), (3,)])
    model = DirichletCategorical(alpha=1.0, categories=[1, 2, 3])
    assert model.statistics(str(path), column="c").counts.tolist() == [2, 1, 1]


def test_categories_mixing_text_and_numbers_are_refused_for_a_csv_before_reading(tmp_path):
    """[1, "x"] on a CSV would match 1 only when no record holds a letter (the column is
    then numbers): refused from the declaration, whatever the file holds."""
    mixed = DirichletCategorical(alpha=1.0, categories=[1, "x"])
    path = _write(tmp_path / "m.csv", "c", [(1,), (1,)])
    for data in (str(path), Table(str(path))):
        with pytest.raises(ValueError, match="mix text and other labels"):
            mixed.statistics(data, column="c")
    assert mixed.statistics([1, 1]).counts.tolist() == [2, 0]  # not a CSV: matched


def test_a_value_far_down_a_file_does_not_fail_the_read(tmp_path):
    """The sniffer used to look at the first 20,480 rows: a letter further down (in any
    column, even one the release does not use) failed every statistic, with an error
    naming its line. Every row is sniffed now: no value fails the read."""
    n = 25_000
    rows = [(i, 1 + i % 2, i % 7) for i in range(n)] + [(n, "SECRET", "note")]
    path = _write(tmp_path / "late.csv", "person,grade,other", rows)
    model = DirichletCategorical(alpha=1.0, categories=["1", "2", "SECRET"])
    assert model.statistics(str(path), column="grade").counts.tolist() == [12_500, 12_500, 1]
    bounded = Table(str(path), user_column="person", max_rows_per_user=1)
    assert model.statistics(bounded, column="grade").n == n + 1
    # a numeric release on a column of numbers, bounded over a table whose other columns
    # hold a late letter: the bounding reads every column, and no longer fails
    numbers = [(i, i % 5, i % 3) for i in range(n)] + [(n, 1, "note")]
    other = _write(tmp_path / "other.csv", "person,x,other", numbers)
    table = Table(str(other), user_column="person", max_rows_per_user=1)
    stats = NormalMean(lower=0.0, upper=5.0).statistics(table, column="x")
    assert stats.n == n + 1
    assert as_source(str(other), "other").kind == "string"


def test_a_user_column_in_a_csv_is_read_as_text(tmp_path):
    """Ids "1" and "1.0" are two users. As guessed numbers they were one user -- unless
    some other user's id held a letter, which made the column text: which rows are one
    user's then depended on another user's id."""
    rows = [(1, "a"), ("1.0", "b")]
    d_prime = _write(tmp_path / "ids.csv", "person,g", rows)
    d = _write(tmp_path / "ids_x.csv", "person,g", [*rows, ("x", "c")])
    assert Table(str(d_prime), user_column="person", max_rows_per_user=1).n() == 2
    assert Table(str(d), user_column="person", max_rows_per_user=1).n() == 3
    src = as_source(str(d_prime), "g", user_column="person", max_rows_per_user=1)
    assert src.n() == 2
    assert open_table(str(d_prime)).column_types()["person"] == "numeric"  # unbounded


def test_text_columns_must_be_a_sequence_of_names(tmp_path):
    path = _write(tmp_path / "t.csv", "a", [(1,)])
    with pytest.raises(TypeError, match="text_columns must be a sequence"):
        open_table(str(path), text_columns="a")
