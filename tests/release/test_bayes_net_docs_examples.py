"""The code examples of docs/bayes-net.md run as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dpbayes.release.bayes_net import fourier, laplace, sampling  # noqa: F401
from dpbayes.release.regression import mechanism  # noqa: F401

DOC = Path(__file__).resolve().parents[2] / "docs" / "bayes-net.md"
BLOCKS = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)


def test_doc_has_examples() -> None:
    assert len(BLOCKS) >= 2


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_doc_example_runs(index: int) -> None:
    namespace: dict = {}
    exec(compile(BLOCKS[index], f"{DOC.name} block {index}", "exec"), namespace)
    if "rel" in namespace:
        assert "L1 sensitivity 6" in namespace["rel"].guarantee.describe()
    if "clf" in namespace:
        assert namespace["clf"].score(namespace["X_test"], namespace["y_test"]) >= 0.0
