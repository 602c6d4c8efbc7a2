"""Fixtures shared by the CLI tests."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest


def _emit_json_failing_on_files(obj: dict, dest: str | None) -> None:
    """``emit_json`` whose file writes fail as on a full disk; stdout still works."""
    if dest not in (None, "-"):
        raise OSError(28, "No space left on device")
    print(json.dumps(obj))


@pytest.fixture
def full_disk_json() -> Callable[[dict, str | None], None]:
    """A stand-in for ``emit_json`` (patched into a command) whose file writes fail after
    the release, to check that the paid result still reaches stdout."""
    return _emit_json_failing_on_files
