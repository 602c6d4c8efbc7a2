"""Tables in PostgreSQL (through SQLAlchemy): every statistic is one aggregation query.

``SQLAlchemyTable("postgresql://user@host/db", "visits")`` (or an SQLAlchemy ``Engine``)
is an :class:`~dpbayes.data.sql.SQLTable` whose SQL runs in the database; only the
aggregates (a handful of rows) come back to Python.

Safety: the table and column names a user passes are never pasted into SQL as given.
The table must exist in the database's catalog (SQLAlchemy's inspector), the columns are
the catalog's, and every identifier is double-quoted (always, with ``"`` doubled); the
SQL is sent without parameters on the driver's cursor, so ``%`` and ``:`` in a name are
not taken for placeholders. Values never enter SQL except as numeric literals written by dpbayes.

Exact sums: each clamped value is split into an integer times a power of two, cast to
``BIGINT`` (exact: |m| < 2**63) and summed by PostgreSQL as ``NUMERIC`` (arbitrary
precision), then combined and rounded once in Python -- the same correctly rounded sum
numpy and DuckDB give.
"""

from __future__ import annotations

import threading
from typing import Any

from dpbayes.data.exact import SCALE_BITS
from dpbayes.data.sql import SQLTable, _one_line

__all__ = ["SUPPORTED_DIALECTS", "SQLAlchemyTable", "is_database_url"]

#: The smallest double t with t * t != 0 (IEEE round to nearest even).
_SMALLEST_SQUARABLE = 1.5717277847026288e-162

#: SQLAlchemy dialects whose SQL this module writes (aggregates, NaN, MD5, exact sums).
SUPPORTED_DIALECTS = ("postgresql",)


def is_database_url(text: Any) -> bool:
    """Whether ``text`` looks like an SQLAlchemy URL (``dialect[+driver]://...``)."""
    if not isinstance(text, str) or "://" not in text:
        return False
    scheme = text.split("://", 1)[0]
    return bool(scheme) and all(ch.isalnum() or ch in "+_" for ch in scheme)


def _kind(sa_type: Any) -> tuple[str, bool, bool]:
    """(kind, is_float, is_integer) of an SQLAlchemy column type."""
    import sqlalchemy as sa

    if isinstance(sa_type, sa.Boolean):
        return "bool", False, False
    if isinstance(sa_type, sa.Integer):
        return "numeric", False, True
    if isinstance(sa_type, sa.Float):
        return "numeric", True, False
    if isinstance(sa_type, sa.Numeric):
        # PostgreSQL NUMERIC may hold NaN, so its NaNs are treated as NULLs as well
        return "numeric", True, False
    if isinstance(sa_type, sa.String | sa.Enum):
        return "string", False, False
    return "other", False, False


class SQLAlchemyTable(SQLTable):
    """A table (or view) of a PostgreSQL database, queried only through aggregates.

    Parameters
    ----------
    database:
        An SQLAlchemy URL (``"postgresql://user:password@host:5432/db"``, any driver
        SQLAlchemy knows, e.g. ``postgresql+psycopg``) or an ``sqlalchemy.Engine``.
    table:
        The table or view name as the catalog spells it (case-sensitive).
    schema:
        Its schema (default: the connection's search path, usually ``public``).
    name:
        Overrides the description used in messages.
    """

    text_type = "VARCHAR"
    double_type = "DOUBLE PRECISION"
    #: byte order for text keys (the database's locale collation may differ)
    text_collate = ' COLLATE "C"'

    def __init__(
        self, database: Any, table: str, *, schema: str | None = None, name: str | None = None
    ) -> None:
        import sqlalchemy as sa

        if isinstance(database, str):
            if not is_database_url(database):
                raise ValueError(f"database must be an SQLAlchemy URL, got {database!r}")
            try:
                engine = sa.create_engine(_with_driver(database))
            except (sa.exc.ArgumentError, ImportError) as exc:
                raise ValueError(f"cannot open database URL: {_one_line(exc)}") from None
        elif isinstance(database, sa.Engine):
            engine = database
        else:
            raise TypeError(
                f"database must be an SQLAlchemy URL or Engine, got {type(database).__name__}"
            )
        if engine.dialect.name not in SUPPORTED_DIALECTS:
            raise ValueError(
                f"database dialect must be one of {list(SUPPORTED_DIALECTS)}, got "
                f"{engine.dialect.name!r} (other databases: read them through DuckDB)"
            )
        if not isinstance(table, str) or not table:
            raise TypeError(f"table must be a non-empty string, got {table!r}")
        if schema is not None and not isinstance(schema, str):
            raise TypeError(f"schema must be a string, got {type(schema).__name__}")
        self._engine = engine
        self._lock = threading.Lock()
        safe_url = engine.url.render_as_string(hide_password=True)
        self.name = name or f"table {table!r} of {safe_url}"
        try:
            inspector = sa.inspect(engine)
            known = set(inspector.get_table_names(schema=schema))
            known |= set(inspector.get_view_names(schema=schema))
            if table not in known:
                where = f"schema {schema!r}" if schema else "the database"
                raise ValueError(
                    f"table {table!r} not found in {where} ({safe_url}); available: {sorted(known)}"
                )
            cols = inspector.get_columns(table, schema=schema)
        except sa.exc.SQLAlchemyError as exc:
            raise ValueError(f"cannot read {self.name}: {_one_line(exc)}") from None
        self._types = {c["name"]: _kind(c["type"]) for c in cols}
        # SQL-standard quoting (PostgreSQL's): always quoted, '"' doubled. Not the
        # dialect's preparer, which also doubles '%' for drivers that interpolate.
        qualified = self.quote(table)
        if schema is not None:
            qualified = f"{self.quote(schema)}.{qualified}"
        self.relation = qualified

    @property
    def engine(self) -> Any:
        """The SQLAlchemy engine."""
        return self._engine

    def fetch(self, sql: str) -> list[tuple[Any, ...]]:
        import sqlalchemy as sa

        # the SQL holds quoted identifiers and numeric literals only, and is sent without
        # parameters on the driver's cursor, so no placeholder ('%', ':') is interpreted
        with self._lock:
            try:
                with self._engine.connect() as con:
                    cursor = con.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
                    try:
                        cursor.execute(sql)
                        return [tuple(r) for r in cursor.fetchall()]
                    finally:
                        cursor.close()
            except Exception as exc:
                if isinstance(exc, sa.exc.SQLAlchemyError) or _is_driver_error(exc):
                    cause = getattr(exc, "orig", None) or exc
                    raise ValueError(f"cannot read {self.name}: {_one_line(cause)}") from None
                raise

    def column_types(self) -> dict[str, str]:
        return {c: k for c, (k, _, _) in self._types.items()}

    def is_float(self, column: str) -> bool:
        return self._types[column][1]

    def is_integer(self, column: str) -> bool:
        return self._types[column][2]

    def square(self, expr: str) -> str:
        # PostgreSQL raises on a product that underflows to 0 where IEEE gives 0; below
        # this threshold the IEEE square is 0, at or above it the square is nonzero
        t = self.double_literal(_SMALLEST_SQUARABLE)
        return f"(CASE WHEN abs({expr}) < {t} THEN 0 ELSE ({expr}) * ({expr}) END)"

    def is_nan(self, expr: str) -> str:
        # PostgreSQL orders NaN above every number and NaN = NaN is true
        return f"({expr} = 'NaN')"

    def integer_sum(self, expr: str) -> str:
        return f"SUM(CAST({expr} AS NUMERIC))"

    def scaled_parts_sql(self, expr: str, where: str) -> str:
        """Rows ``(s, m)`` with sum(expr) = sum(m * 2**s): BIGINT parts, NUMERIC sums.

        ``floor(log2|x|)`` is computed as ``floor(ln|x| / ln 2)``, which may be off by
        one near powers of two; SCALE_BITS = 60 leaves room (|m| < 2**62), and
        ``(b - k) - (b - k) / 2`` splits the power of two exactly whatever the rounding.
        """
        b = SCALE_BITS
        two = f"CAST(2 AS {self.double_type})"
        return (
            f"WITH dpb_v AS (SELECT {expr} AS x FROM {self.relation} WHERE {where}), "
            f"dpb_k AS (SELECT x, CAST(floor(ln(abs(x)) / ln({two})) AS INTEGER) AS k "
            "FROM dpb_v WHERE x <> 0) "
            f"SELECT k - {b} AS s, SUM(CAST((x * power({two}, ({b} - k) / 2)) * "
            f"power({two}, ({b} - k) - ({b} - k) / 2) AS BIGINT)) AS m FROM dpb_k GROUP BY k"
        )


def _is_driver_error(exc: BaseException) -> bool:
    """Whether ``exc`` is a DB-API error (PEP 249 ``Error``) of a database driver."""
    return any(c.__name__ == "Error" and c.__module__ != "builtins" for c in type(exc).__mro__)


def _with_driver(url: str) -> str:
    """``postgresql://`` means psycopg 3 (the driver dpbayes installs), not psycopg2."""
    if url.startswith(("postgresql://", "postgres://")):
        import importlib.util

        if importlib.util.find_spec("psycopg2") is None:
            return "postgresql+psycopg://" + url.split("://", 1)[1]
    return url
