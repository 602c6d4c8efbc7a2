"""A CSV file's dialect (delimiter, header, skipped rows) is fixed from public facts, never
sniffed from the rows: one added record (``v;x``, a row with an extra field) made the
engine take it as the header or the delimiter's evidence and skip every row before it, so
a data set of 50 records and its neighbour read as 50 and 0 (from a review). Now the
neighbour is either counted with one more record or refused as a whole (one bit)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dpbayes.answers.cube import Cube
from dpbayes.models import DirichletCategorical

BASE1 = "v\n" + "a\n" * 50
BASE2 = "v,w\n" + "a,1\n" * 50


@pytest.mark.parametrize(
    ("base", "extra"),
    [(BASE1, "v;x\n"), (BASE1, "v;b\n"), (BASE2, "v,w,z\n"), (BASE2, "v|w|z\n"), (BASE2, "b;2\n")],
    ids=["semicolon", "semicolon-category", "extra-field", "pipes", "semicolon-2col"],
)
def test_one_record_never_rereads_the_others(tmp_path: Path, base: str, extra: str) -> None:
    model = DirichletCategorical(alpha=1.0, categories=["a", "b"])
    d, dp = tmp_path / "d.csv", tmp_path / "dp.csv"
    d.write_text(base)
    dp.write_text(base + extra)
    assert model.statistics(d, column="v").counts.tolist() == [50, 0]
    try:
        counts = model.statistics(dp, column="v").counts.tolist()
    except ValueError:
        return  # refused as a whole: one bit, nothing released
    assert counts in ([51, 0], [50, 1])
    cube_d = Cube.from_table(d, {"v": ["a", "b"]}).counts.tolist()
    try:
        cube_dp = Cube.from_table(dp, {"v": ["a", "b"]}).counts.tolist()
    except ValueError:
        return
    assert cube_d == [50, 0] and cube_dp in ([50, 0], [51, 0], [50, 1])


def test_tab_separated_and_quoted_fields(tmp_path: Path) -> None:
    tsv = tmp_path / "d.tsv"
    tsv.write_text("v\tw\n" + "a\t1\n" * 3 + "b\t2\n")
    model = DirichletCategorical(alpha=1.0, categories=["a", "b"])
    assert model.statistics(tsv, column="v").counts.tolist() == [3, 1]
    quoted = tmp_path / "q.csv"
    quoted.write_text('v,w\n"a",1\n"b,c",2\n"say ""b""",3\n')
    model3 = DirichletCategorical(alpha=1.0, categories=["a", "b,c", 'say "b"'])
    assert model3.statistics(quoted, column="v").counts.tolist() == [1, 1, 1]
