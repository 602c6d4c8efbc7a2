"""Contribution bounding: at most k rows per user, chosen by the engine before aggregation.

User-level differential privacy protects everything one person contributes. When a
person can have several rows (the bundled RAND data: 1 to 5 person-years each), a
release calibrated to one row protects a row, not a person. Keeping at most ``k`` rows
per person bounds what one person can change to ``k`` rows, so a mechanism calibrated to
``k`` times the per-row sensitivity protects a person (group privacy by the triangle
inequality: one person's change is at most ``k`` row changes).

The rows are kept by ``ROW_NUMBER() OVER (PARTITION BY user ORDER BY key) <= k`` in the
engine (DuckDB, PostgreSQL, Spark), never in Python. ``key`` is the MD5 digest of the
row's text (a pseudo-random order that does not favour small or large values), then the
row's values as tie-breakers, so:

* the rows kept for a person depend on that person's rows only (what the privacy argument
  needs: neighbouring tables stay neighbours after bounding, one person apart);
* the choice is deterministic, and identical in every engine: the digest covers the user
  column and every integer, boolean and string column (whose text forms agree across
  engines), every floating-point column through the integer floor(x 2^20) for
  |x| < 2^33 (exact in every engine: a power-of-two scaling and a floor; NULL beyond, and
  for infinities and NaN), every DECIMAL column through its text at the declared scale
  (``1.50``; PostgreSQL ``NUMERIC(p, s)`` too, while a ``NUMERIC`` without a scale counts
  as a float there), every date through its days since 1970-01-01 and every timestamp
  through its microseconds since 1970-01-01 (UTC for time-zone-aware ones, the wall clock
  for naive ones): :func:`digest_kinds`. Other columns (TIME, INTERVAL, BLOB, lists),
  and floats beyond 2^33 or equal to 2^-20 precision, only break ties (in value order).
  Before the floats entered the digest, a user whose other columns were all floats had one
  digest for every row, and the ties kept that user's k smallest values: a mean of 1.68
  for uniform values on [0, 10] (true 5.0) at k = 1; DECIMAL and date columns had the
  same bias (1.63, and each user's earliest visit) until they entered it too;
* the digest never fails, whatever a value (NaN, +-inf, 1e300, a NUMERIC 1e400, an
  infinite date) and whatever the optimiser knows: DuckDB folds ``isnan(x)`` and
  ``abs(x) < c`` to constants from Parquet min/max statistics, which leave NaN out, so a
  guarded cast failed on one NaN anywhere in a float column (a release that failed on a
  data set and ran on its neighbour). See ``_float_code_sql``.

A CSV file has no column types: the engine guesses them from every record's values, so
one person's letter in a column of numbers (one no release reads) makes the column text,
and a digest of the typed values would change for every other person's rows (1.5 as its
floor code, then as the text "1.5"): one person would change which rows are kept for
many, far beyond k rows (measured: a clamped sum moved by 47.7 where k = 1 bounded it by
10). A CSV file's rows are therefore hashed by the file's text (``_bounded_by_text``): the
file read again with every column as text, each field as the file holds it, and the rows
chosen there kept from the typed read by their row number in the file. Other sources keep
the digest above: their types come from a schema, which is public.

Rows whose user is NULL or NaN belong to no user and are dropped (a test of each row
alone). Bounding them together as one "user" would not protect the people behind them:
removing one such person's rows changes which k rows of the NULL group are kept, up to 2k
rows (measured: an L1 change of 6 where k = 2 gives 4, a loss of 1.5 eps; the same for NaN
ids from Arrow, Polars, Parquet, PostgreSQL and Spark: 4 where 2 was stated). On DuckDB a
float id is tested for NaN through its text, which no statistics can fold. A shared
sentinel value (-1, '') is one user like any other value: write missing ids as NULL.
"""

from __future__ import annotations

import copy
import datetime as _dt
import math
from decimal import Decimal
from typing import Any

from dpbayes.data.sql import SQLTable
from dpbayes.privacy.validation import check_int

__all__ = [
    "bound_contributions",
    "digest_kinds",
    "float_code",
    "hashed_columns",
    "row_key_text",
]

#: Separator between the fields of a row's text, and the text of a NULL field.
SEPARATOR = "|"
NULL_TEXT = "<NULL>"  # no backslash: Spark SQL literals treat it as an escape


#: A float x enters the digest as floor(x * FLOAT_SCALE) when |x| < FLOAT_LIMIT.
FLOAT_SCALE = 2.0**20
FLOAT_LIMIT = 2.0**33
FLOAT_UNIT = 2**20
# the same as SQL integer literals; floor(x 2^20) for |x| < 2^33 lies in (-2^53, 2^53)
_SCALE_SQL = "1048576"
_LIMIT_SQL = "8589934592"
_CODE_MIN_SQL = "-9007199254740991"  # -(2^53 - 1)
_CODE_MAX_SQL = "9007199254740991"

#: The kinds of column that enter the digest (:func:`digest_kinds`).
HASHED_KINDS = ("integer", "bool", "string", "float", "decimal", "date", "timestamp")

_EPOCH_DATE = _dt.date(1970, 1, 1)
_EPOCH = _dt.datetime(1970, 1, 1)
_EPOCH_UTC = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)
_MICROSECOND = _dt.timedelta(microseconds=1)


def _dialect(table: SQLTable) -> str:
    """``"duckdb"``, ``"spark"``, ``"postgresql"`` or ``""`` (another SQLTable)."""
    from dpbayes.data.spark import SparkTable
    from dpbayes.data.sql import DuckDBTable
    from dpbayes.data.sqlalchemy_table import SQLAlchemyTable

    if isinstance(table, DuckDBTable):
        return "duckdb"
    if isinstance(table, SparkTable):
        return "spark"
    if isinstance(table, SQLAlchemyTable):
        return "postgresql"
    return ""


def _duckdb_kind(type_name: str) -> str | None:
    t = type_name.upper()
    if t.startswith("DECIMAL"):
        return "decimal"
    if t == "DATE":
        return "date"
    if t.startswith("TIMESTAMP"):  # TIMESTAMP[_S|_MS|_NS], TIMESTAMP WITH TIME ZONE
        return "timestamp"
    return None


def _spark_kind(dtype: Any) -> str | None:
    from pyspark.sql import types as T

    if isinstance(dtype, T.DecimalType):
        return "decimal"
    if isinstance(dtype, T.DateType):
        return "date"
    if isinstance(dtype, T.TimestampNTZType):
        return "timestamp_ntz"
    if isinstance(dtype, T.TimestampType):
        return "timestamp"
    return None


def _postgres_kind(type_name: str) -> str | None:
    t = type_name.lower()
    if t.startswith("numeric("):  # a declared scale: the text has exactly that many digits
        return "decimal"
    if t == "date":
        return "date"
    if t.startswith("timestamp"):  # timestamp[(p)] with[out] time zone
        return "timestamp"
    return None


def _postgres_type_names(table: SQLTable) -> dict[str, str]:
    """Column -> ``format_type`` from the catalog (``{}`` if the catalog cannot say)."""
    name = table.relation.replace("'", "''")
    sql = (
        "SELECT attname, format_type(atttypid, atttypmod) FROM pg_catalog.pg_attribute "
        f"WHERE attrelid = to_regclass('{name}') AND attnum > 0 AND NOT attisdropped"
    )
    try:
        return {str(c): str(t) for c, t in table.fetch(sql)}
    except ValueError:
        return {}


def digest_kinds(table: SQLTable) -> dict[str, str]:
    """Column -> how it enters a row's digest: ``"integer"``, ``"bool"``, ``"string"``,
    ``"float"``, ``"decimal"``, ``"date"``, ``"timestamp"`` (Spark also
    ``"timestamp_ntz"``), or ``"other"`` (not hashed: only a tie-breaker).

    DECIMAL (DuckDB, Spark; PostgreSQL ``NUMERIC(p, s)``) enters as its text at the
    declared scale, a date as its days since 1970-01-01, a timestamp as its microseconds
    since 1970-01-01 00:00 (UTC for a time-zone-aware timestamp, the wall clock read as UTC
    for a naive one). PostgreSQL ``NUMERIC`` without a declared scale is a float here (its
    text keeps the scale it was written with, not the value's).
    """
    types = table.column_types()
    dialect = _dialect(table)
    special: dict[str, str | None] = {}
    if dialect == "duckdb":
        raw = getattr(table, "_types", {})
        special = {c: _duckdb_kind(t) for c, t in raw.items()}
    elif dialect == "spark":
        frame = getattr(table, "_frame", None)
        if frame is not None:
            special = {f.name: _spark_kind(f.dataType) for f in frame.schema.fields}
    elif dialect == "postgresql":
        special = {c: _postgres_kind(t) for c, t in _postgres_type_names(table).items()}
    kinds = {}
    for c, kind in types.items():
        if special.get(c) is not None:
            kinds[c] = str(special[c])
        elif kind in ("bool", "string"):
            kinds[c] = kind
        elif table.is_integer(c):
            kinds[c] = "integer"
        elif table.is_float(c):
            kinds[c] = "float"
        elif kind == "numeric":
            kinds[c] = "decimal"  # numeric, neither integer nor float: exact decimal text
        else:
            kinds[c] = "other"
    return kinds


def hashed_columns(table: SQLTable, user_column: str) -> list[str]:
    """The columns that enter a row's digest: the user column, then every integer,
    boolean, string, floating-point, decimal, date and timestamp column in table order."""
    kinds = digest_kinds(table)
    cols = [c for c in table.columns if c != user_column and kinds[c] != "other"]
    return [user_column, *cols]


def float_code(x: Any) -> int | None:
    """The integer a floating-point value enters the digest as: floor(x 2^20) for a finite
    |x| < 2^33 (exact: the scaling is by a power of two), else None (NULL)."""
    if x is None:
        return None
    v = float(x)
    if not (math.isfinite(v) and abs(v) < FLOAT_LIMIT):
        return None
    return math.floor(v * FLOAT_SCALE)


def _decimal_text(v: Any) -> str | None:
    d = v if isinstance(v, Decimal) else Decimal(str(v))
    if not d.is_finite():
        return None
    if d == 0:
        d = abs(d)  # no negative zero in the engines' text
    return format(d, "f")


def _temporal_code(v: Any) -> int | None:
    if isinstance(v, _dt.datetime):
        epoch = _EPOCH if v.tzinfo is None else _EPOCH_UTC
        return (v - epoch) // _MICROSECOND
    if isinstance(v, _dt.date):
        return (v - _EPOCH_DATE).days
    raise TypeError(f"expected a date or datetime, got {type(v).__name__}")


def row_key_text(values: list[Any], floats: list[bool | str] | None = None) -> str:
    """The text whose MD5 digest orders a person's rows (the Python twin of the SQL).

    ``floats`` gives each value's kind: ``True`` or ``"float"`` (floating point: its
    :func:`float_code`), ``"decimal"`` (the plain decimal text, e.g. ``Decimal("1.50")``
    as ``1.50``), ``"date"`` (days since 1970-01-01), ``"timestamp"`` (microseconds since
    1970-01-01, naive datetimes read as UTC), anything else (integers in decimal, booleans
    as ``true``/``false``, strings as themselves). NULL (and NaN) is ``<NULL>``; fields are
    joined by ``|``.
    """
    kinds = floats if floats is not None else [False] * len(values)

    def text(v: Any, kind: bool | str) -> str:
        if v is not None and (kind is True or kind == "float"):
            v = float_code(v)
            if v is not None and v % FLOAT_UNIT == 0:
                v = v // FLOAT_UNIT  # a whole number enters as an integer column's text
        elif v is not None and kind == "decimal":
            v = _decimal_text(v)
        elif v is not None and kind in ("date", "timestamp", "timestamp_ntz"):
            v = _temporal_code(v)
        if v is None:
            return NULL_TEXT
        if isinstance(v, bool):
            return "true" if v else "false"
        return str(v)

    return SEPARATOR.join(text(v, f) for v, f in zip(values, kinds, strict=True))


def _float_code_sql(table: SQLTable, expr: str, dialect: str) -> str:
    """SQL: the :func:`float_code` of the float ``expr`` as a BIGINT, else NULL.

    It never fails, whatever the value (NaN, +-inf, 1e300, -0.0, NULL) and whatever the
    optimiser knows. DuckDB trusts Parquet min/max statistics, which leave NaN out, and
    folds ``isnan(x)``, ``x <> x`` and ``abs(x) < c`` to constants from them, so a guard
    there may vanish; ``TRY_CAST`` turns NaN, +-inf and |x 2^20| >= 2^63 into NULL row by
    row, and the range test that follows can only be folded where it holds. Elsewhere
    (PostgreSQL, Spark with ANSI casts) the value is clamped to [-2^33, 2^33] first
    (NaN sorts above every number there, NULL is skipped by GREATEST/LEAST), so the cast
    cannot overflow; the clamp gives +-2^53 exactly when |x| >= 2^33 or x is NaN or NULL,
    and the range test maps those to NULL.
    """
    if dialect == "duckdb":
        raw = f"TRY_CAST(FLOOR(CAST({expr} AS DOUBLE) * {_SCALE_SQL}) AS BIGINT)"
    else:
        clamped = f"LEAST(GREATEST({expr}, -{_LIMIT_SQL}), {_LIMIT_SQL})"
        raw = table.truncate_to_bigint(f"FLOOR({clamped} * {_SCALE_SQL})")
    return f"(CASE WHEN {raw} BETWEEN {_CODE_MIN_SQL} AND {_CODE_MAX_SQL} THEN {raw} END)"


def _field_sql(table: SQLTable, column: str, kind: str, dialect: str) -> str:
    """SQL: one field of a row's text (NULL for a NULL, NaN or infinite value)."""
    q = table.quote(column)
    if kind == "float":
        # a whole number enters as its integer text, as in an integer column: pandas makes
        # an integer column float when one record is missing, and the digest of every
        # other row must not change with it
        code = _float_code_sql(table, q, dialect)
        div = {"duckdb": "//", "spark": "div"}.get(dialect, "/")
        whole = table.as_text(f"({code} {div} {_SCALE_SQL})")
        return f"(CASE WHEN {code} % {_SCALE_SQL} = 0 THEN {whole} ELSE {table.as_text(code)} END)"
    if kind == "decimal":
        text = table.as_text(q)
        if table.is_float(column):  # PostgreSQL NUMERIC may hold NaN
            return f"(CASE WHEN {table.is_nan(q)} THEN NULL ELSE {text} END)"
        return text
    if kind == "date":
        if dialect == "spark":
            return table.as_text(f"unix_date({q})")
        days = f"CAST({q} - DATE '1970-01-01' AS BIGINT)"
        return table.as_text(f"(CASE WHEN isfinite({q}) THEN {days} END)")
    if kind == "timestamp":
        if dialect == "spark":
            return table.as_text(f"unix_micros({q})")
        if dialect == "postgresql":
            # PostgreSQL's timestamps reach 294276 AD; microseconds since 1970 overflow a
            # BIGINT after 292277 AD ("bigint out of range" for the whole table): NULL
            # beyond 9.2e12 seconds (about 291,500 years) either side
            sec = f"EXTRACT(EPOCH FROM {q})"
            us = f"CAST(FLOOR({sec} * 1000000) AS BIGINT)"
            ok = f"isfinite({q}) AND abs({sec}) < 9200000000000"
            return table.as_text(f"(CASE WHEN {ok} THEN {us} END)")
        return table.as_text(f"epoch_us({q})")  # DuckDB: NULL for +-infinity
    if kind == "timestamp_ntz":  # Spark: the wall clock, whatever the session time zone
        epoch = "TIMESTAMP_NTZ'1970-01-01 00:00:00'"
        return table.as_text(f"timestampdiff(MICROSECOND, {epoch}, {q})")
    return table.as_text(q)


def _key_sql(table: SQLTable, columns: list[str], kinds: dict[str, str] | None = None) -> str:
    kinds = digest_kinds(table) if kinds is None else kinds
    dialect = _dialect(table)
    parts = [f"COALESCE({_field_sql(table, c, kinds[c], dialect)}, '{NULL_TEXT}')" for c in columns]
    joined = f" || '{SEPARATOR}' || ".join(parts)
    return table.md5(f"({joined})")


def _user_present(table: SQLTable, user_column: str) -> str:
    """SQL condition: the row has a user (its id is neither NULL nor NaN).

    On DuckDB a float id is tested for NaN through its text: ``isnan(x)`` itself is folded
    to false from Parquet statistics (which leave NaN out), so NaN ids would stay and be
    bounded together as one user.
    """
    if _dialect(table) == "duckdb" and table.is_float(user_column):
        q = table.quote(user_column)
        return f"({q} IS NOT NULL AND NOT isnan(CAST(CAST({q} AS VARCHAR) AS DOUBLE)))"
    return table.not_null(user_column)


def bound_contributions(table: SQLTable, user_column: str, max_rows_per_user: Any) -> SQLTable:
    """``table`` with at most ``max_rows_per_user`` rows per value of ``user_column``.

    Returns a new :class:`~dpbayes.data.sql.SQLTable` of the same engine whose
    ``relation`` keeps, per user, the ``k`` rows with the smallest
    ``md5(row text)`` (ties broken by the row's values), and whose
    ``rows_per_user_bound`` is ``k``; every statistic of it (counts, sums, contingency
    tables) is then computed over the bounded rows, in the engine. Rows with a NULL or NaN
    user belong to no user and are dropped (module docstring). Privacy: the rows kept for a
    user depend on that user's rows only, so adding or removing one user changes at most
    ``k`` bounded rows. A table read from a CSV file (``csv_text_rows``, set by
    :mod:`dpbayes.data.readers`) is bounded by the digest of the file's text instead.
    """
    if not isinstance(table, SQLTable):
        raise TypeError(f"table must be an SQLTable, got {type(table).__name__}")
    if table.rows_per_user_bound is not None:
        raise ValueError(
            f"{table.name} is already bounded to {table.rows_per_user_bound} rows per user"
        )
    if not isinstance(user_column, str):
        raise TypeError(f"user_column must be a string, got {type(user_column).__name__}")
    if user_column not in table.columns:
        raise ValueError(
            f"user_column {user_column!r} not found in {table.name}; available: {table.columns}"
        )
    k = check_int(max_rows_per_user, "max_rows_per_user", minimum=1)
    text_rows = _csv_text_rows(table)
    if text_rows is not None:
        relation = _bounded_by_text(table, user_column, k, *text_rows)
    else:
        relation = _bounded_by_values(table, user_column, k)
    bounded = copy.copy(table)
    bounded.relation = relation
    bounded.rows_per_user_bound = k
    bounded.user_column = user_column
    bounded.name = f"{table.name} (at most {k} rows per {user_column!r})"
    # keep the original alive: its finaliser owns the engine's resources (view, connection)
    bounded._dpb_parent = table  # type: ignore[attr-defined]
    return bounded


def _bounded_by_values(table: SQLTable, user_column: str, k: int) -> str:
    """SQL relation: ``table``'s rows, at most ``k`` per user, by the digest of their values."""
    q = table.quote
    columns = table.columns
    kinds = digest_kinds(table)
    hashed = [user_column, *(c for c in columns if c != user_column and kinds[c] != "other")]
    key = _key_sql(table, hashed, kinds)
    collate = getattr(table, "text_collate", "")
    order = [f"{key}{collate} ASC"] + [f"{q(c)} ASC NULLS LAST" for c in columns]
    select = ", ".join(q(c) for c in columns)
    has_user = _user_present(table, user_column)
    rn = q(_fresh_name("dpb_rn", columns))  # never a data column's name
    return (
        f"(SELECT {select} FROM (SELECT {select}, ROW_NUMBER() OVER "
        f"(PARTITION BY {q(user_column)} ORDER BY {', '.join(order)}) AS {rn} "
        f"FROM {table.relation} AS dpb_src WHERE {has_user}) AS dpb_ranked "
        f"WHERE {rn} <= {k}) AS dpb_bounded"
    )


def _fresh_name(base: str, columns: list[str]) -> str:
    """``base``, or ``base`` with underscores appended, that names none of ``columns``."""
    taken = {c.lower() for c in columns}
    while base.lower() in taken:
        base += "_"
    return base


#: The row number of a CSV file's row in both of its reads (typed, and as text).
_ROW_NUMBER = "dpb_csv_row"


def _csv_text_rows(table: SQLTable) -> tuple[str, str] | None:
    """``(typed relation, text relation)`` of a DuckDB table read from a CSV file whose
    rows are still the file's rows (not yet bounded or materialized), else None."""
    pair = getattr(table, "csv_text_rows", None)
    if _dialect(table) != "duckdb" or not isinstance(pair, tuple) or len(pair) != 2:
        return None
    typed, text = pair
    if typed != table.relation:
        return None
    return str(typed), str(text)


def _bounded_by_text(table: SQLTable, user_column: str, k: int, typed: str, text: str) -> str:
    """SQL relation: the rows of a CSV file, at most ``k`` per user, chosen by the digest
    of the file's text: every column's field as the file holds it (NULL as ``<NULL>``),
    whatever type the engine guessed for it (a guess made from every record's values).

    The user is the user field's text (rows whose user field is NULL are dropped); ties
    are broken by the fields' text, then by the row's place in the file (identical texts
    are identical rows). The kept rows are then taken, by their row number, from the typed
    read ``typed``; ``text`` is the same file read with every column as text.
    """
    q = table.quote
    columns = table.columns
    hashed = [user_column, *(c for c in columns if c != user_column)]
    parts = [f"COALESCE({q(c)}, '{NULL_TEXT}')" for c in hashed]
    key = table.md5("(" + f" || '{SEPARATOR}' || ".join(parts) + ")")
    # names no column of the file has: a column named like them took their place
    row = q(_fresh_name(_ROW_NUMBER, columns))
    rank = q(_fresh_name("dpb_rn", columns))
    order = [f"{key} ASC", *(f"{q(c)} ASC NULLS LAST" for c in columns), f"{row} ASC"]
    numbered = "SELECT ROW_NUMBER() OVER () AS {rn}, * FROM {rel}"
    kept = (
        f"SELECT {row} FROM (SELECT {row}, ROW_NUMBER() OVER "
        f"(PARTITION BY {q(user_column)} ORDER BY {', '.join(order)}) AS {rank} "
        f"FROM ({numbered.format(rn=row, rel=text)}) AS dpb_text "
        f"WHERE {q(user_column)} IS NOT NULL) AS dpb_ranked WHERE {rank} <= {k}"
    )
    select = ", ".join(q(c) for c in columns)
    return (
        f"(SELECT {select} FROM ({numbered.format(rn=row, rel=typed)}) AS dpb_typed "
        f"WHERE {row} IN ({kept})) AS dpb_bounded"
    )
