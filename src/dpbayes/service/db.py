"""The service's database: tables, engine set-up (SQLite or PostgreSQL) and migrations.

Tables (created by the Alembic migrations in ``dpbayes/service/migrations``):

- ``cube``: one row, the cube definition (attributes, data source) and a keyed digest of
  the counts (HMAC-SHA256 under a key derived from the admin key, which is never stored;
  ``hmac_key_id`` tells a changed key from changed data), so a restart on different data
  is refused instead of mixing histories, and a reader of the database cannot test
  guesses of the counts;
- ``budget``: one row, the total (eps, delta), how spends compose (``composition``:
  ``basic``, ``pld`` or ``rdp``, revision 0003) and ``version`` (the number of changes:
  spends and budget changes); locked by every write (SQLite ``BEGIN IMMEDIATE``,
  PostgreSQL ``SELECT ... FOR UPDATE``), read without a lock by every request;
- ``answers``: the released noisy answers with their spend (the history and the ledger:
  a spend and its answer are one row, written in one transaction): eps, delta and, for a
  Gaussian answer, sigma / Delta_2 (what tight composition needs; revision 0003);
- ``analysts``: API keys, stored as salted SHA-256 digests.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import sqlalchemy as sa

__all__ = [
    "METADATA",
    "analysts",
    "answers",
    "budget",
    "cube",
    "make_engine",
    "migrate",
    "serialise_setup",
]

METADATA = sa.MetaData()

cube = sa.Table(
    "cube",
    METADATA,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("spec", sa.Text, nullable=False),
    sa.Column("n_cells", sa.Integer, nullable=False),
    sa.Column("counts_hmac", sa.String(64), nullable=False),
    sa.Column("hmac_key_id", sa.String(16), nullable=False),
)

budget = sa.Table(
    "budget",
    METADATA,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("total_epsilon", sa.Float, nullable=False),
    sa.Column("total_delta", sa.Float, nullable=False),
    sa.Column("version", sa.Integer, nullable=False),
    sa.Column("composition", sa.String(16), nullable=False, server_default="basic"),
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
    sa.Column("delta", sa.Float, nullable=False, server_default="0"),
    sa.Column("gaussian_ratio", sa.Float, nullable=True),
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


def make_engine(url: str, *, writer: bool = True, pool_size: int = 8) -> sa.Engine:
    """An SQLAlchemy engine; SQLite gets WAL, synchronous=FULL and secure_delete.

    ``writer=True``: every SQLite transaction starts with ``BEGIN IMMEDIATE`` (the write
    lock, taken at the start, so that check + draw + commit are serialised across
    processes sharing the file). ``writer=False``: plain deferred transactions, which in
    WAL mode read a consistent snapshot without taking or waiting for the write lock.
    """
    if not isinstance(url, str) or "://" not in url:
        raise ValueError(f"db must be a URL such as sqlite:///state.db, got {url!r}")
    url = _with_driver(url)
    pool = {"pool_size": pool_size, "max_overflow": 2 * pool_size}
    if url.startswith("sqlite"):
        if url in ("sqlite://", "sqlite:///:memory:"):
            raise ValueError("db: an in-memory SQLite database would lose the ledger; use a file")
        path = url.split(":///", 1)[1] if ":///" in url else ""
        if path:
            Path(path).expanduser().resolve().parent.mkdir(parents=True, exist_ok=True)
        engine = sa.create_engine(
            url,
            connect_args={"timeout": 30, "check_same_thread": False},
            poolclass=sa.pool.QueuePool,
            **pool,
        )

        @sa.event.listens_for(engine, "connect")
        def _connect(dbapi_con: Any, _record: Any) -> None:
            dbapi_con.isolation_level = None  # we emit BEGIN ourselves
            cur = dbapi_con.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=FULL")
            cur.execute("PRAGMA busy_timeout=30000")
            # freed pages are zeroed: a replaced digest does not linger in the file
            cur.execute("PRAGMA secure_delete=ON")
            cur.close()

        begin = "BEGIN IMMEDIATE" if writer else "BEGIN"

        @sa.event.listens_for(engine, "begin")
        def _begin(con: Any) -> None:
            con.exec_driver_sql(begin)

        return engine
    if url.startswith("postgresql"):
        return sa.create_engine(url, pool_pre_ping=True, **pool)
    raise ValueError(f"db: only sqlite:/// and postgresql:// URLs are supported, got {url!r}")


def serialise_setup(con: sa.Connection) -> None:
    """Serialise schema set-up between processes starting on one database.

    SQLite: the transaction's ``BEGIN IMMEDIATE`` already does. PostgreSQL: a transaction
    advisory lock, so that two workers do not both create the tables or the first rows.
    """
    if con.dialect.name == "postgresql":
        con.exec_driver_sql("SELECT pg_advisory_xact_lock(7036265301170112)")


def migrate(
    engine: sa.Engine,
    *,
    rekey_cube: Callable[[str], tuple[str, str]] | None = None,
    revision: str = "head",
) -> None:
    """Bring the database to the latest schema (Alembic ``upgrade head``; or ``revision``).

    ``rekey_cube(old_sha256) -> (hmac, key_id)``: for revision 0002, which replaces the
    unkeyed digest of the counts by a keyed one; it checks the old digest against the data
    (raising ValueError if they differ). Needed only if the database holds a cube row.
    """
    from alembic import command
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(Path(__file__).with_name("migrations")))
    cfg.attributes["rekey_cube"] = rekey_cube
    with engine.begin() as con:
        serialise_setup(con)
        cfg.attributes["connection"] = con
        command.upgrade(cfg, revision)
    if engine.dialect.name == "sqlite":
        # Move the rewritten pages into the file and empty the WAL, so that no copy of a
        # replaced row stays in the log.
        with engine.connect() as con:
            raw = con.connection.driver_connection
            assert raw is not None
            raw.execute("PRAGMA wal_checkpoint(TRUNCATE)")
