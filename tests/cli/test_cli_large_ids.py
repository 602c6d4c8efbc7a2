"""`--categories` that are ids of 2**53 or more (64-bit ids in a CSV file): not every such
number is a double, so they are matched as the file spells them (text) instead of as
numbers, which rounded 9007199254740993 onto 9007199254740992 (and which the models now
refuse, since a record's category could depend on the other records)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def test_large_integer_ids_are_matched_as_the_files_text(tmp_path: Path) -> None:
    data = tmp_path / "ids.csv"
    data.write_text("id\n9007199254740993\n9007199254740993\n9007199254740995\n1\n")
    record = tmp_path / "rec.json"
    cats = ["9007199254740993", "9007199254740995", "1"]
    out = subprocess.run(
        [sys.executable, "-m", "dpbayes.cli", "release", "--data", str(data), "--column", "id",
         "--model", "dirichlet-categorical", "--categories", *cats, "--epsilon", "1e9",
         "--seed", "1", "--json", str(record)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    counts = json.loads(record.read_text())["released"]["counts"]
    assert [round(c) for c in counts] == [2, 1, 1]
