"""The Python example in docs/query-answering.md runs and prints what the page says."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "query-answering.md"


def test_docs_example_runs_and_matches_its_printed_output() -> None:
    text = DOC.read_text()
    code = re.search(r"```python\n(.*?)```", text, re.S)
    shown = re.search(r"\nprints\n\n```\n(.*?)```", text, re.S)
    assert code is not None and shown is not None
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code.group(1), str(DOC), "exec"), {"__name__": "docs_example"})
    printed = out.getvalue().splitlines()
    for line in shown.group(1).strip().splitlines():
        assert line in printed
