"""Tests that need Chromium, PostgreSQL or Spark's Java: skipped with a one-line reason that
names the ``.ci/setup.d`` script to run, FAILED instead under ``CI=true`` (tests/conftest.py).

Each case runs pytest in a subprocess on a machine made to lack the dependency (a Chromium
path that does not exist, a PostgreSQL URL nobody listens on, a PATH without java).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CASES = [
    # (test selection, script named in the reason)
    ("tests/service/test_web_page.py::test_web_page_composes_asks_and_shows_answer", "chromium.sh"),
    ("tests/data/test_engines.py::test_postgres_argument_errors", "postgres.sh"),
    ("tests/data/test_engines.py::test_spark_release_and_errors", "java.sh"),
]


def _run(ci: bool, tmp: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "JAVA_HOME")}
    env["DPBAYES_CHROMIUM"] = str(tmp / "no-chromium")
    env["DPBAYES_TEST_POSTGRES_URL"] = "postgresql://nobody:none@127.0.0.1:1/none"
    env["PATH"] = str(Path(sys.executable).parent)  # no java (nor anything else) on PATH
    if ci:
        env["CI"] = "true"
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist", "-rsfE"]
    cmd += ["--rootdir", str(ROOT), "-o", "addopts="] + [c for c, _ in CASES]
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("ci", [False, True], ids=["fresh-machine", "CI=true"])
def test_missing_system_dependency_skips_or_fails_in_ci(ci: bool, tmp_path: Path) -> None:
    p = _run(ci, tmp_path)
    out = p.stdout
    summary = out.strip().splitlines()[-1]
    # under CI the fixture fails, which pytest counts as an error of the test: not a pass
    word = "errors" if ci else "skipped"
    assert f"{len(CASES)} {word}" in summary and "passed" not in summary, out[-3000:]
    assert p.returncode == (1 if ci else 0), out[-3000:]
    lines = [x for x in out.splitlines() if x.startswith(("SKIPPED", "ERROR "))]
    assert len(lines) == len(CASES), out[-3000:]
    for _, script in CASES:
        hits = [x for x in lines if f"run .ci/setup.d/{script} (part of .ci/run)" in x]
        assert len(hits) == 1, (script, lines)
        assert ("[CI=true: required]" in hits[0]) == ci, hits[0]
