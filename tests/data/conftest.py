"""Real engines for the data-layer tests: a PostgreSQL server on loopback, Spark local mode.

PostgreSQL: ``DPBAYES_TEST_POSTGRES_URL`` if set, else the server and role that
``.ci/setup.d/postgres.sh`` makes (the fixture runs that script when the server
binaries are installed but the server is down). Spark: local mode, one session.
Missing engines skip the tests -- except under ``CI=true``, where they fail.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

DEFAULT_POSTGRES_URL = "postgresql://dpbayes:dpbayes@127.0.0.1:5432/dpbayes_test"
SETUP_SCRIPT = Path(__file__).resolve().parents[2] / ".ci" / "setup.d" / "postgres.sh"


def _unavailable(reason: str) -> None:
    """Skip, or fail under CI=true (CI must run every engine)."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{reason} (CI=true: engines must be available)", pytrace=False)
    pytest.skip(reason)


def _server_binaries() -> bool:
    return shutil.which("pg_ctlcluster") is not None or any(
        Path("/usr/lib/postgresql").glob("*/bin/initdb")
    )


def _connect(url: str) -> Any:
    import sqlalchemy as sa

    from dpbayes.data.sqlalchemy_table import _with_driver

    engine = sa.create_engine(_with_driver(url))
    with engine.connect() as con:
        con.exec_driver_sql("SELECT 1")
    return engine


@pytest.fixture(scope="session")
def postgres_engine() -> Iterator[Any]:
    """An SQLAlchemy engine on a live PostgreSQL server (its URL in the environment)."""
    try:
        import psycopg  # noqa: F401
        import sqlalchemy as sa
    except ImportError:
        _unavailable("sqlalchemy/psycopg are not installed: pip install '.[service]'")
    url = os.environ.get("DPBAYES_TEST_POSTGRES_URL", DEFAULT_POSTGRES_URL)
    try:
        engine = _connect(url)
    except sa.exc.OperationalError:
        if not _server_binaries():
            _unavailable("PostgreSQL is not installed here; .ci/run installs and starts it")
        if url == DEFAULT_POSTGRES_URL and os.geteuid() == 0 and SETUP_SCRIPT.is_file():
            subprocess.run(["bash", str(SETUP_SCRIPT)], check=False, capture_output=True)
        try:
            engine = _connect(url)
        except sa.exc.OperationalError as exc:
            _unavailable(
                f"no PostgreSQL server at {url} ({str(exc).splitlines()[0]}); "
                "run .ci/setup.d/postgres.sh (part of .ci/run)"
            )
    os.environ["DPBAYES_TEST_POSTGRES_URL"] = url
    yield engine
    engine.dispose()


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """A local-mode SparkSession: one core, one shuffle partition, no UI."""
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        _unavailable("pyspark is not installed: pip install '.[test]' installs it")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        _unavailable("Spark needs Java 17+ (no java on PATH, no JAVA_HOME)")
    session = (
        SparkSession.builder.master("local[1]")
        .appName("dpbayes-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.default.parallelism", "1")
        .config("spark.driver.memory", "1g")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
