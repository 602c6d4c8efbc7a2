"""Real engines for the data-layer tests: a PostgreSQL server on loopback, Spark local mode.

PostgreSQL: ``DPBAYES_TEST_POSTGRES_URL`` if set, else the server and role that
``.ci/setup.d/postgres.sh`` makes (the fixture runs that script when the server
binaries are installed but the server is down). Spark: local mode, one session.
Missing engines skip the tests naming the ``.ci/setup.d`` script that installs them --
except under ``CI=true``, where they fail (``require``: tests/conftest.py).
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
def postgres_engine(require: Any) -> Iterator[Any]:
    """An SQLAlchemy engine on a live PostgreSQL server (its URL in the environment)."""
    try:
        import psycopg  # noqa: F401
        import sqlalchemy as sa
    except ImportError:
        require("sqlalchemy/psycopg are not installed (pip install '.[test]')", "postgres.sh")
    url = os.environ.get("DPBAYES_TEST_POSTGRES_URL", DEFAULT_POSTGRES_URL)
    try:
        engine = _connect(url)
    except sa.exc.OperationalError:
        if not _server_binaries():
            require("PostgreSQL is not installed here", "postgres.sh")
        if url == DEFAULT_POSTGRES_URL and os.geteuid() == 0 and SETUP_SCRIPT.is_file():
            subprocess.run(["bash", str(SETUP_SCRIPT)], check=False, capture_output=True)
        try:
            engine = _connect(url)
        except sa.exc.OperationalError as exc:
            require(f"no PostgreSQL server at {url} ({str(exc).splitlines()[0]})", "postgres.sh")
    os.environ["DPBAYES_TEST_POSTGRES_URL"] = url
    yield engine
    engine.dispose()


@pytest.fixture(scope="session")
def spark(require: Any) -> Iterator[Any]:
    """A local-mode SparkSession: one core, one shuffle partition, no UI."""
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        require("pyspark is not installed (pip install '.[test]'; Spark needs Java too)", "java.sh")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        require("Spark needs Java 17+ (no java on PATH, no JAVA_HOME)", "java.sh")
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
