"""Contribution bounding of a CSV file hashes each row by the file's text.

The engine guesses a CSV column's type from every record's values: one person's letter in
a column that no release reads turns it from numbers into text. If the rows' digest
followed the guessed types, that person would change which rows are kept for everyone
else, far beyond the stated sensitivity (k rows of one person).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from dpbayes.data import Table
from dpbayes.data.readers import as_source
from dpbayes.models import NormalMean

VICTIM = "999"


def _rows() -> list[tuple[str, str, str]]:
    rng = np.random.default_rng(1)
    return [
        (str(u), f"{rng.uniform(0, 10):.3f}", f"{rng.uniform(0, 5):.2f}")
        for u in range(200)
        for _ in range(3)
    ]


def _write(path: Path, rows: list[tuple[str, str, str]]) -> str:
    path.write_text("person,x,note\n" + "".join(f"{a},{b},{c}\n" for a, b, c in rows))
    return str(path)


def _neighbours(tmp_path: Path) -> tuple[str, str]:
    rows = _rows()
    without = _write(tmp_path / "without.csv", rows)
    victim = [(VICTIM, "1.0", "abc"), (VICTIM, "2.0", "1.5")]  # a letter in "note"
    return without, _write(tmp_path / "with.csv", rows + victim)


def _kept(table: Table) -> list[tuple]:
    sql = f"SELECT person, x FROM {table.backend.relation}"
    return sorted((str(p), float(x)) for p, x in table.backend.fetch(sql))


def test_other_users_keep_the_same_rows(tmp_path: Path) -> None:
    without, with_victim = _neighbours(tmp_path)
    for k in (1, 2):
        a = Table(without, user_column="person", max_rows_per_user=k)
        b = Table(with_victim, user_column="person", max_rows_per_user=k)
        assert a.backend.column_types()["note"] != b.backend.column_types()["note"]
        kept_a, kept_b = _kept(a), _kept(b)
        assert kept_a == [r for r in kept_b if r[0] != VICTIM]
        assert len([r for r in kept_b if r[0] == VICTIM]) == k


def test_statistic_moves_by_at_most_the_sensitivity(tmp_path: Path) -> None:
    without, with_victim = _neighbours(tmp_path)
    model = NormalMean(lower=0.0, upper=10.0)
    k = 1
    sa = model.statistics(Table(without, user_column="person", max_rows_per_user=k), column="x")
    sb = model.statistics(Table(with_victim, user_column="person", max_rows_per_user=k), column="x")
    assert abs(sb.n - sa.n) <= k
    assert abs(sb.total - sa.total) <= k * 10.0 + 1e-9


def test_as_source_and_bounding_a_table(tmp_path: Path) -> None:
    without, with_victim = _neighbours(tmp_path)
    totals = []
    for path in (without, with_victim):
        src = as_source(path, column="x", user_column="person", max_rows_per_user=1)
        bounded = Table(path).bound_contributions("person", 1)
        later = Table(path).materialize().bound_contributions("person", 1)
        assert _kept(bounded) == _kept(later)
        totals.append((src, _kept(bounded)))
    (_, a), (_, b) = totals
    assert a == [r for r in b if r[0] != VICTIM]


def test_rows_are_the_same_rows_in_both_reads(tmp_path: Path) -> None:
    # many rows (several scan chunks, several threads): the kept rows' typed values are
    # those of the rows chosen in the text read
    rng = np.random.default_rng(2)
    xs = rng.uniform(0, 10, 150_000)
    rows = [(str(i // 3), f"{x:.4f}", "abc" if i == 7 else str(i)) for i, x in enumerate(xs)]
    table = Table(_write(tmp_path / "big.csv", rows), user_column="person", max_rows_per_user=1)
    sql = f"SELECT person, x, note FROM {table.backend.relation}"
    got = table.backend.fetch(sql)
    assert len(got) == 50_000
    text = {(p, n): x for p, x, n in rows}
    assert all(f"{x:.4f}" == text[(p, n)] for p, x, n in got)


def test_a_materialized_table_is_bounded_by_text(tmp_path: Path) -> None:
    without, with_victim = _neighbours(tmp_path)
    kept = []
    for path in (without, with_victim):
        src = as_source(
            Table(path).materialize(), column="x", user_column="person", max_rows_per_user=1
        )
        kept.append(_kept(Table(src.table)))
    a, b = kept
    assert a == [r for r in b if r[0] != VICTIM]


def test_filters_do_not_move_the_kept_rows(tmp_path: Path) -> None:
    _, with_victim = _neighbours(tmp_path)
    table = Table(with_victim, user_column="person", max_rows_per_user=1)
    rows = _kept(table)
    sql = f"SELECT count(*) FROM {table.backend.relation} WHERE x > 5"
    assert table.backend.fetch(sql)[0][0] == sum(x > 5 for _, x in rows)
