"""The Python examples in docs/query-answering.md run and print what the page says."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "query-answering.md"


def test_docs_examples_run_and_match_their_printed_output() -> None:
    """The page's blocks run in order in one namespace; a block followed by "prints" must
    print those lines."""
    text = DOC.read_text()
    blocks = re.findall(r"```python\n(.*?)```(\n\nprints\n\n```\n(.*?)```)?", text, re.S)
    assert len(blocks) >= 2 and sum(bool(shown) for _, _, shown in blocks) >= 2
    namespace = {"__name__": "docs_example"}
    for i, (code, _, shown) in enumerate(blocks):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(code, f"{DOC} block {i}", "exec"), namespace)
        printed = out.getvalue().splitlines()
        for line in shown.strip().splitlines():
            assert line in printed, (i, line)
