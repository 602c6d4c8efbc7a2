"""``dpbayes serve --max-history-entries``: the cap on what the service's history stores."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest

from dpbayes.cli import main

pytest.importorskip("uvicorn")


def _serve(tmp_path: Path, *extra: str) -> list[str]:
    key = tmp_path / "admin.key"
    key.write_text("k" * 32 + "\n")
    with socket.socket() as s:  # a free port: serve checks that it can listen there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return [
        "serve", "--db", f"sqlite:///{tmp_path / 's.db'}", "--admin-key-file", str(key),
        "--port", str(port), *extra,
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("given", "cap"),
    [(None, 2**25), ("5000", 5000), ("1e6", 1_000_000), ("0", None)],
)
def test_the_cap_reaches_the_service(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, given: str | None, cap: int | None
) -> None:
    import uvicorn

    from dpbayes.cli import cmd_serve
    from dpbayes.service import app

    seen: dict[str, Any] = {}

    def fake_app(*args: Any, **kw: Any) -> str:
        seen.update(kw)
        return "app"

    monkeypatch.setattr(app, "create_app", fake_app)
    monkeypatch.setattr(uvicorn, "run", lambda *a, **k: None)
    monkeypatch.setattr(cmd_serve, "_announce_when_listening", lambda *a, **k: None)
    extra = [] if given is None else ["--max-history-entries", given]
    assert main(_serve(tmp_path, *extra)) == 0
    assert seen["max_history_entries"] == cap


@pytest.mark.parametrize("bad", ["-1", "many", "2.5", "nan", "inf"])
def test_a_bad_cap_is_refused_in_one_line_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], bad: str
) -> None:
    assert main(_serve(tmp_path, "--max-history-entries", bad)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert "--max-history-entries must be a whole number >= 0" in err and repr(bad) in err
    assert not (tmp_path / "s.db").exists()  # refused before anything was opened
