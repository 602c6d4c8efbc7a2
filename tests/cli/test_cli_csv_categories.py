"""``dpbayes release --categories`` on a CSV file: numbers or text by the declaration,
never by the type the engine guesses from the values (review F2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dpbayes.cli import main

BASE = ["release", "--column", "grade", "--model", "dirichlet-categorical", "--epsilon", "1",
        "--mechanism", "geometric", "--user-column", "person", "--max-rows-per-user", "1",
        "--json"]  # fmt: skip


def _write(path: Path, rows: list[tuple]) -> str:
    path.write_text("person,grade\n" + "".join(f"{u},{g}\n" for u, g in rows))
    return str(path)


def test_text_categories_release_on_both_neighbours(tmp_path: Path, capsys) -> None:
    """D' (no record "x": the column looks numeric) was refused with "--categories 'x'
    is not a number, but column 'grade' is numeric", D (a victim with "x") released."""
    rows = [(u, 1 + u % 2) for u in range(30)]
    d = _write(tmp_path / "d.csv", [*rows, (99, "x")])
    d_prime = _write(tmp_path / "d_prime.csv", rows)
    for path in (d, d_prime):
        assert main([*BASE, "--data", path, "--categories", "1", "2", "x"]) == 0
        rec = json.loads(capsys.readouterr().out)
        assert rec["model"]["categories"] == ["1", "2", "x"]


@pytest.mark.parametrize("letter", [False, True])
def test_numeric_categories_are_numbers_from_the_declaration(
    tmp_path: Path, capsys, letter: bool
) -> None:
    """All labels numbers: numeric codes, whether or not the file holds a letter (a value
    outside the declared domain, then refused like any other such value)."""
    rows = [(u, 1 + u % 3) for u in range(30)] + ([(99, "x")] if letter else [])
    path = _write(tmp_path / "codes.csv", rows)
    code = main([*BASE, "--data", path, "--categories", "1", "2", "3.0"])
    out, err = capsys.readouterr()
    if letter:
        assert code == 2 and "not one of the categories [1, 2, 3]" in err and "'x'" not in err
    else:
        assert code == 0 and json.loads(out)["model"]["categories"] == [1, 2, 3]
