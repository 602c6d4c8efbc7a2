"""The service's database: tables, engine set-up (SQLite or PostgreSQL) and migrations.

Tables (created by the Alembic migrations in ``dpbayes/service/migrations``):

- ``cube``: one row, the cube definition (attributes, data source) and a digest of the
  counts, so a restart on different data is refused instead of mixing histories;
- ``budget``: one row, the total (eps, delta) and ``version`` (the number of spends);
  locked for every query (SQLite ``BEGIN IMMEDIATE``, PostgreSQL ``SELECT ... FOR UPDATE``);
- ``answers``: the released noisy answers with their spend (the history and the ledger:
  a spend and its answer are one row, written in one transaction);
- ``analysts``: API keys, stored as salted SHA-256 digests.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import sqlalchemy as sa

__all__ = ["METADATA", "analysts", "answers", "budget", "cube", "make_engine", "migrate"]

METADATA = sa.MetaData()

cube = sa.Table(
    "cube",
    METADATA,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("spec", sa.Text, nullable=False),
    sa.Column("counts_sha256", sa.String(64), nullable=False),
    sa.Column("n_cells", sa.Integer, nullable=False),
)

budget = sa.Table(
    "budget",
    METADATA,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("total_epsilon", sa.Float, nullable=False),
    sa.Column("total_delta", sa.Float, nullable=False),
    sa.Column("version", sa.Integer, nullable=False),
)

answers = sa.Table(
    "answers",
    METADATA,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("record", sa.Text, nullable=False),
    sa.Column("epsilon", sa.Float, nullable=False),
    sa.Column("scope", sa.Text, nullable=False),
    sa.Column("analyst", sa.String(100), nullable=False),
    sa.Column("query", sa.Text, nullable=False),
    sa.Column("noisy_answer", sa.Float, nullable=False),
    sa.Column("created", sa.Float, nullable=False),
)

analysts = sa.Table(
    "analysts",
    METADATA,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("name", sa.String(100), nullable=False, unique=True),
    sa.Column("key_id", sa.String(32), nullable=False, unique=True),
    sa.Column("salt", sa.String(64), nullable=False),
    sa.Column("key_sha256", sa.String(64), nullable=False),
    sa.Column("created", sa.Float, nullable=False),
)


def _with_driver(url: str) -> str:
    if url.startswith("postgresql://") or url.startswith("postgres://"):
        return "postgresql+psycopg://" + url.split("://", 1)[1]
    return url


def make_engine(url: str) -> sa.Engine:
    """An SQLAlchemy engine; SQLite gets WAL, synchronous=FULL and BEGIN IMMEDIATE."""
    if not isinstance(url, str) or "://" not in url:
        raise ValueError(f"db must be a URL such as sqlite:///state.db, got {url!r}")
    url = _with_driver(url)
    if url.startswith("sqlite"):
        if url in ("sqlite://", "sqlite:///:memory:"):
            raise ValueError("db: an in-memory SQLite database would lose the ledger; use a file")
        path = url.split(":///", 1)[1] if ":///" in url else ""
        if path:
            Path(path).expanduser().resolve().parent.mkdir(parents=True, exist_ok=True)
        engine = sa.create_engine(url, connect_args={"timeout": 30, "check_same_thread": False})

        @sa.event.listens_for(engine, "connect")
        def _connect(dbapi_con: Any, _record: Any) -> None:
            dbapi_con.isolation_level = None  # we emit BEGIN ourselves
            cur = dbapi_con.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=FULL")
            cur.execute("PRAGMA busy_timeout=30000")
            cur.close()

        @sa.event.listens_for(engine, "begin")
        def _begin(con: Any) -> None:
            # Take the write lock at the start: check + draw + commit are serialised
            # across processes sharing the file.
            con.exec_driver_sql("BEGIN IMMEDIATE")

        return engine
    if url.startswith("postgresql"):
        return sa.create_engine(url, pool_pre_ping=True)
    raise ValueError(f"db: only sqlite:/// and postgresql:// URLs are supported, got {url!r}")


def migrate(engine: sa.Engine) -> None:
    """Bring the database to the latest schema (Alembic ``upgrade head``)."""
    from alembic import command
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(Path(__file__).with_name("migrations")))
    with engine.begin() as con:
        cfg.attributes["connection"] = con
        command.upgrade(cfg, "head")
