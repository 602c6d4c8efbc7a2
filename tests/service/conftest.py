"""A real dpbayes service in a subprocess (uvicorn on a free loopback port), driven by httpx.

Databases: a temporary SQLite file always; PostgreSQL (a fresh schema in the server that
``.ci/setup.d/postgres.sh`` makes, or ``DPBAYES_TEST_POSTGRES_URL``) when a server is up.
A missing PostgreSQL skips those tests naming .ci/setup.d/postgres.sh, except under
``CI=true`` where it fails (``require``: tests/conftest.py).
One server per database serves the whole session (``sqlite_server``, ``postgres_server``;
``server`` is parametrised over both): a start costs seconds, mostly ``import dpbayes``.
"""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

DEFAULT_POSTGRES_URL = "postgresql://dpbayes:dpbayes@127.0.0.1:5432/dpbayes_test"
ADMIN_KEY = "test-admin-key-" + "x" * 20


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """``dpbayes serve`` in a subprocess; ``start``/``stop``/``kill`` keep the database."""

    def __init__(self, db_url: str, tmp: Path, *args: str) -> None:
        self.db_url, self.tmp, self.args = db_url, tmp, args
        self.key_file = tmp / "admin.key"
        self.key_file.write_text(ADMIN_KEY + "\n")
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 90.0) -> Server:
        self.port = free_port()
        cmd = [sys.executable, "-m", "dpbayes.cli", "serve", "--db", self.db_url]
        cmd += ["--port", str(self.port), "--admin-key-file", str(self.key_file), *self.args]
        log = open(self.tmp / f"server-{self.port}.log", "wb")
        self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited: {(self.tmp / log.name).read_text()[-2000:]}")
            try:
                if httpx.get(self.url + "/openapi.json", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        self.kill()
        raise RuntimeError(f"server did not start within {timeout} s")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.proc = None

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)
        self.proc = None

    def admin(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {ADMIN_KEY}"}

    def new_analyst(self, name: str | None = None) -> dict[str, str]:
        r = httpx.post(
            self.url + "/api/admin/analysts",
            json={"name": name or "a" + secrets.token_hex(4)},
            headers=self.admin(),
            timeout=30,
        )
        r.raise_for_status()
        return {"Authorization": f"Bearer {r.json()['api_key']}"}


def _postgres_schema_url(require: Any) -> Iterator[str]:
    try:
        import sqlalchemy as sa

        from dpbayes.service.db import _with_driver
    except ImportError:
        require("sqlalchemy/psycopg are not installed (pip install '.[test]')", "postgres.sh")
    base = os.environ.get("DPBAYES_TEST_POSTGRES_URL", DEFAULT_POSTGRES_URL)
    try:
        engine = sa.create_engine(_with_driver(base))
        with engine.connect() as con:
            con.exec_driver_sql("SELECT 1")
    except Exception as exc:
        require(f"no PostgreSQL server at {base} ({str(exc).splitlines()[0]})", "postgres.sh")
    schema = "svc_" + secrets.token_hex(4)
    with engine.begin() as con:
        con.exec_driver_sql(f"CREATE SCHEMA {schema}")
    sep = "&" if "?" in base else "?"
    try:
        yield f"{base}{sep}options=-csearch_path%3D{schema}"
    finally:
        with engine.begin() as con:
            con.exec_driver_sql(f"DROP SCHEMA {schema} CASCADE")
        engine.dispose()


def _serve(kind: str, tmp_path_factory: Any, require: Any, *args: str) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp(kind)
    if kind == "sqlite":
        urls: Iterator[str] = iter([f"sqlite:///{tmp / 'service.db'}"])
    else:
        urls = _postgres_schema_url(require)
    url = next(urls)
    srv = Server(url, tmp, *(args or ("--epsilon", "2"))).start()
    try:
        yield srv
    finally:
        srv.stop()
        for _ in urls:  # drop the PostgreSQL schema
            pass


# One server per database for the whole session: starting one costs seconds (importing the
# library), so test modules share it and stay independent through their own analysts and
# through assertions on differences (budget, history) rather than on absolute state.


@pytest.fixture(scope="session")
def sqlite_server(tmp_path_factory: Any, require: Any) -> Iterator[Server]:
    """A running service on a SQLite file that starts empty (budget eps=2)."""
    yield from _serve("sqlite", tmp_path_factory, require)


@pytest.fixture(scope="session")
def postgres_server(tmp_path_factory: Any, require: Any) -> Iterator[Server]:
    """A running service on a fresh PostgreSQL schema that starts empty (budget eps=2)."""
    yield from _serve("postgres", tmp_path_factory, require)


@pytest.fixture(scope="module")
def own_server(tmp_path_factory: Any, require: Any) -> Iterator[Server]:
    """A service of the test module's own (SQLite, budget eps=5): for tests whose outcome
    depends on the global state (budget, history), so no other test's order matters."""
    yield from _serve("sqlite", tmp_path_factory, require, "--epsilon", "5")


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def server(request: Any) -> Server:
    """The session's running service of each database kind."""
    srv: Server = request.getfixturevalue(f"{request.param}_server")
    return srv


@pytest.fixture(params=["sqlite", "postgres"])
def db_url(request: Any, tmp_path: Path) -> Iterator[str]:
    """A fresh service database: a SQLite file, and a throwaway PostgreSQL schema (skipped
    without a server)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'svc.db'}"
        return
    urls = _postgres_schema_url(request.getfixturevalue("require"))
    yield next(urls)
    for _ in urls:  # drop the schema
        pass
