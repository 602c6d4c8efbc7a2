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
  engines), and every floating-point column through the integer floor(x 2^20) for
  |x| < 2^33 (exact in every engine: a power-of-two scaling and a floor; NULL beyond, and
  for infinities and NaN). Other columns, and floats beyond 2^33 or equal to 2^-20
  precision, only break ties (numeric order agrees too). Before the floats entered the
  digest, a user whose other columns were all floats had one digest for every row, and
  the ties kept that user's k smallest values: a mean of 1.68 for uniform values on
  [0, 10] (true 5.0) at k = 1.

Rows whose user is NULL belong to no user and are dropped (``WHERE user IS NOT NULL``, a
test of each row alone). Bounding them together as one "user" would not protect the
people behind them: removing one such person's rows changes which k rows of the NULL
group are kept, up to 2k rows (measured: an L1 change of 6 where k = 2 gives 4, a loss of
1.5 eps). A NaN id in a pandas frame reaches the engine as NULL and is dropped too; a
shared sentinel value (-1, '') is one user like any other value: write missing ids as
NULL.
"""

from __future__ import annotations

import copy
import math
from typing import Any

from dpbayes.data.sql import SQLTable
from dpbayes.privacy.validation import check_int

__all__ = ["bound_contributions", "float_code", "hashed_columns", "row_key_text"]

#: Separator between the fields of a row's text, and the text of a NULL field.
SEPARATOR = "|"
NULL_TEXT = "<NULL>"  # no backslash: Spark SQL literals treat it as an escape


#: A float x enters the digest as floor(x * FLOAT_SCALE) when |x| < FLOAT_LIMIT.
FLOAT_SCALE = 2.0**20
FLOAT_LIMIT = 2.0**33


def hashed_columns(table: SQLTable, user_column: str) -> list[str]:
    """The columns that enter a row's digest: the user column, then every integer,
    boolean, string and floating-point column in table order."""
    types = table.column_types()
    cols = [
        c
        for c in table.columns
        if c != user_column
        and (types[c] in ("bool", "string") or table.is_integer(c) or table.is_float(c))
    ]
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


def row_key_text(values: list[Any], floats: list[bool] | None = None) -> str:
    """The text whose MD5 digest orders a person's rows (the Python twin of the SQL).

    Integers print in decimal, booleans as ``true``/``false``, strings as themselves,
    floating-point values (where ``floats`` says so) as their :func:`float_code`, NULL as
    ``<NULL>``; fields are joined by ``|``.
    """
    kinds = floats if floats is not None else [False] * len(values)

    def text(v: Any, is_float: bool) -> str:
        if is_float:
            v = float_code(v)
        if v is None:
            return NULL_TEXT
        if isinstance(v, bool):
            return "true" if v else "false"
        return str(v)

    return SEPARATOR.join(text(v, f) for v, f in zip(values, kinds, strict=True))


def _key_sql(table: SQLTable, columns: list[str]) -> str:
    parts = []
    for c in columns:
        expr = table.quote(c)
        if table.is_float(c):
            scaled = f"FLOOR({expr} * {table.double_literal(FLOAT_SCALE)})"
            expr = (
                f"CASE WHEN ABS({expr}) < {table.double_literal(FLOAT_LIMIT)} "
                f"THEN {table.truncate_to_bigint(scaled)} END"
            )
        parts.append(f"COALESCE({table.as_text(expr)}, '{NULL_TEXT}')")
    joined = f" || '{SEPARATOR}' || ".join(parts)
    return table.md5(f"({joined})")


def bound_contributions(table: SQLTable, user_column: str, max_rows_per_user: Any) -> SQLTable:
    """``table`` with at most ``max_rows_per_user`` rows per value of ``user_column``.

    Returns a new :class:`~dpbayes.data.sql.SQLTable` of the same engine whose
    ``relation`` keeps, per user, the ``k`` rows with the smallest
    ``md5(row text)`` (ties broken by the row's values), and whose
    ``rows_per_user_bound`` is ``k``; every statistic of it (counts, sums, contingency
    tables) is then computed over the bounded rows, in the engine. Rows with a NULL user
    belong to no user and are dropped (module docstring). Privacy: the rows kept for a
    user depend on that user's rows only, so adding or removing one user changes at most
    ``k`` bounded rows.
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
    q = table.quote
    columns = table.columns
    key = _key_sql(table, hashed_columns(table, user_column))
    collate = getattr(table, "text_collate", "")
    order = [f"{key}{collate} ASC"] + [f"{q(c)} ASC NULLS LAST" for c in columns]
    select = ", ".join(q(c) for c in columns)
    relation = (
        f"(SELECT {select} FROM (SELECT {select}, ROW_NUMBER() OVER "
        f"(PARTITION BY {q(user_column)} ORDER BY {', '.join(order)}) AS dpb_rn "
        f"FROM {table.relation} AS dpb_src WHERE {q(user_column)} IS NOT NULL) AS dpb_ranked "
        f"WHERE dpb_rn <= {k}) AS dpb_bounded"
    )
    bounded = copy.copy(table)
    bounded.relation = relation
    bounded.rows_per_user_bound = k
    bounded.user_column = user_column
    bounded.name = f"{table.name} (at most {k} rows per {user_column!r})"
    # keep the original alive: its finaliser owns the engine's resources (view, connection)
    bounded._dpb_parent = table  # type: ignore[attr-defined]
    return bounded
