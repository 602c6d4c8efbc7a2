"""One version source: pyproject.toml, read back through importlib.metadata."""

from __future__ import annotations

import re
import tomllib
from importlib.metadata import version
from pathlib import Path

import dpbayes


def test_version_is_the_installed_distributions():
    assert dpbayes.__version__ == version("dpbayes")
    pyproject = Path(__file__).resolve().parents[1] / "pyproject.toml"
    assert dpbayes.__version__ == tomllib.loads(pyproject.read_text())["project"]["version"]
    assert re.fullmatch(r"\d+\.\d+\.\d+.*", dpbayes.__version__)
