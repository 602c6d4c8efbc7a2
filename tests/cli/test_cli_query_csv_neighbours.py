"""``dpbayes query`` over a CSV file: a record's cell depends on its own field only.

The engine guesses a CSV column's type from every record: one field that does not parse
(``maybe``, ``?``, ``n/a``) used to make the whole column text, moving every other record
out of (or into) its cell, and to turn numeric bins into a refusal. The attributes are
now read as the file's text and matched field by field
(``dpbayes.answers.cube.text_matches``).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from dpbayes.cli import main
from dpbayes.cli.cmd_query import _cube, parse_attributes


def _csv(path: Path, values: list[str]) -> str:
    path.write_text("v\n" + "\n".join(values) + "\n")
    return str(path)


@pytest.mark.parametrize(
    ("spec", "value", "extra", "cell", "base_cell"),
    [
        ("v=true,false", "true", "maybe", None, 0),
        ("v=0.5,1.0", "1", "?", None, 1),
        ("v=1,2", "1.0", "n/a", None, 0),
        ("v=1,2", "01", "0x", None, 0),
        ("v=1,2", "1.0", "2", 1, 0),
        ("v=bins:0,1,inf", "1", "abc", None, 1),
    ],
)
def test_query_cube_neighbours_change_one_cell(
    tmp_path: Path, spec: str, value: str, extra: str, cell: int | None, base_cell: int
) -> None:
    attrs = parse_attributes([spec])
    n = 100
    d = {"data": _csv(tmp_path / "d.csv", [value] * n), "attributes": attrs}
    d2 = {"data": _csv(tmp_path / "d2.csv", [value] * n + [extra]), "attributes": attrs}
    x = _cube(d).cell_vector()
    x2 = _cube(d2).cell_vector()
    assert x[base_cell] == n
    expected = np.zeros(x.size, dtype=np.int64)
    if cell is not None:
        expected[cell] = 1
    assert (x2 - x).tolist() == expected.tolist()


def test_query_user_level_cube_neighbours(tmp_path: Path) -> None:
    attrs = parse_attributes(["v=1,2"])
    unit = {"user_column": "u", "max_rows_per_user": 1}
    rows = [f"{i},1.0" for i in range(30)]
    d = tmp_path / "d.csv"
    d.write_text("u,v\n" + "\n".join(rows) + "\n")
    d2 = tmp_path / "d2.csv"
    d2.write_text("u,v\n" + "\n".join([*rows, "99,n/a"]) + "\n")
    x = _cube({"data": str(d), "attributes": attrs, "privacy_unit": unit}).cell_vector()
    x2 = _cube({"data": str(d2), "attributes": attrs, "privacy_unit": unit}).cell_vector()
    assert x.tolist() == x2.tolist() == [30, 0]


@pytest.mark.parametrize("extra", [[], ["yes"]])
def test_query_bins_over_csv_answered_whatever_one_record_holds(
    tmp_path: Path, capsys, extra: list[str]
) -> None:
    """Numeric bins over a CSV column are never refused because of one record's field
    (the refusal itself would tell whether a record like 'yes' is in the data)."""
    data = _csv(tmp_path / "d.csv", ["1", "0", "1", *extra])
    code = main(
        ["query", "--state", str(tmp_path / "st"), "--data", data, "--attribute",
         "v=bins:0,1,inf", "--epsilon", "1", "--where", "", "--half-width", "1000",
         "--confidence", "0.9", "--record-level", "--json", "-"]
    )  # fmt: skip
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "estimate" in json.loads(out.out)
