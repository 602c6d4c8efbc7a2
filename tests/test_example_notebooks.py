"""The notebooks in examples/ run top to bottom, and what each cell shows displays.

Each notebook's code cells run in order in one namespace, in an empty directory, as a
kernel would run them; a cell's last expression is displayed the way Jupyter does
(``_repr_html_`` when the object has one, else ``repr``), so a broken display fails too.
The notebooks use small sizes, so this runs in CI.
"""

from __future__ import annotations

import ast
import json
import warnings
from pathlib import Path

import pytest

EXAMPLES = sorted((Path(__file__).resolve().parents[1] / "examples").glob("*.ipynb"))


def code_cells(path: Path) -> list[str]:
    nb = json.loads(path.read_text())
    assert nb["nbformat"] == 4
    return ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]


def run_cell(source: str, namespace: dict, name: str) -> str | None:
    """Run one cell; return the display of its last expression (None if it has none)."""
    tree = ast.parse(source, filename=name)
    last = tree.body[-1] if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    if last is not None:
        tree.body = tree.body[:-1]
    exec(compile(tree, name, "exec"), namespace)
    if last is None:
        return None
    value = eval(compile(ast.Expression(last.value), name, "eval"), namespace)
    html = getattr(value, "_repr_html_", None)
    return html() if callable(html) else repr(value)


def test_there_are_the_four_example_notebooks():
    names = [p.stem for p in EXAMPLES]
    assert names == [
        "01-first-release",
        "02-receiving-a-release",
        "03-query-service-from-python",
        "04-locally-private-data",
    ]
    for p in EXAMPLES:  # shipped clean: no stored outputs to go stale
        nb = json.loads(p.read_text())
        assert all(not c.get("outputs") for c in nb["cells"] if c["cell_type"] == "code")


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_notebook_runs_and_displays(path, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "__main__"}
    shown: list[str] = []
    try:
        for i, source in enumerate(code_cells(path)):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                out = run_cell(source, namespace, f"{path.name}, cell {i}")
            if out is not None:
                assert "object at 0x" not in out, f"cell {i} displays {out[:200]}"
                shown.append(out)
    finally:
        server = namespace.get("server")  # the service notebook's subprocess
        if server is not None and server.poll() is None:
            server.terminate()
            server.wait(30)
    assert shown, "a notebook shows something"
