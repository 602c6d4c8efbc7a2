"""Sources backed by an SQL engine: every statistic is one aggregation query.

:class:`SQLTable` is the engine-neutral part: it writes the aggregation SQL for one
column (counts, GROUP BY value counts, exact clamped sums, min/max) and leaves to a
subclass only how to run a query and what the column types are. :class:`DuckDBTable`
runs it in DuckDB over a CSV/Parquet file, a pandas/polars/Arrow frame or a DuckDB
relation; the rows stream through the engine and never reach Python, so files larger
than memory work. A PostgreSQL or Spark table is another subclass (it overrides
:meth:`SQLTable.fetch`, :meth:`SQLTable.column_types` and, if its dialect differs,
:meth:`SQLTable.scaled_parts_sql`).

:class:`ColumnSource` is the :class:`~dpbayes.data.source.Source` for one column of
an :class:`SQLTable`; :class:`Table` is the user-facing wrapper of a whole table.
"""

from __future__ import annotations

import copy
import itertools
import math
import threading
import weakref
from abc import ABC, abstractmethod
from decimal import Decimal
from fractions import Fraction
from typing import Any

from dpbayes.data.exact import (
    GRID_BITS,
    round_saturating,
    scaled_parts_sql,
    scaled_sum_fraction,
)
from dpbayes.data.source import Source, check_bounds

__all__ = ["ColumnSource", "DuckDBTable", "SQLTable"]


def _python_scalar(v: Any) -> Any:
    if isinstance(v, Decimal):
        return int(v) if v == v.to_integral_value() else float(v)
    return v


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


class SQLTable(ABC):
    """A table in an SQL engine, queried only through aggregates.

    Subclasses provide :meth:`fetch` (run one SELECT over :attr:`relation`) and
    :meth:`column_types` (column name -> kind, one of ``"numeric"``, ``"bool"``,
    ``"string"``, ``"other"``); optionally :meth:`is_float` and the dialect hooks.
    """

    #: Readable description, e.g. ``"randhie.csv.gz"`` or ``"DataFrame"``.
    name: str
    #: How the table is named inside the SQL this class writes (a FROM item).
    relation: str
    #: At most this many rows per user (set by
    #: :func:`~dpbayes.data.contributions.bound_contributions`); None: not bounded.
    rows_per_user_bound: int | None = None
    #: The user column the rows were bounded by (None: not bounded).
    user_column: str | None = None
    #: SQL type names of the dialect (text and double precision).
    text_type = "VARCHAR"
    double_type = "DOUBLE"

    @abstractmethod
    def fetch(self, sql: str) -> list[tuple[Any, ...]]:
        """Run ``sql`` (a SELECT over :attr:`relation`) and return its rows."""

    @abstractmethod
    def column_types(self) -> dict[str, str]:
        """Column name -> kind (``"numeric"``, ``"bool"``, ``"string"``, ``"other"``)."""

    def is_float(self, column: str) -> bool:
        """Whether ``column`` is floating point (its NaNs are then NULLs)."""
        return False

    # -- dialect hooks -------------------------------------------------------------
    @staticmethod
    def quote(identifier: str) -> str:
        """An SQL identifier, double-quoted."""
        return '"' + identifier.replace('"', '""') + '"'

    def double_literal(self, x: float) -> str:
        """A DOUBLE literal that parses back to exactly ``x`` (shortest repr)."""
        return f"CAST('{float(x)!r}' AS {self.double_type})"

    def square(self, expr: str) -> str:
        """SQL: the double ``expr`` squared (rounded as IEEE does; underflow gives 0)."""
        return f"({expr}) * ({expr})"

    def is_nan(self, expr: str) -> str:
        """SQL condition: the floating-point ``expr`` is NaN."""
        return f"isnan({expr})"

    def md5(self, expr: str) -> str:
        """SQL: the MD5 digest of the text ``expr`` as 32 lowercase hex digits."""
        return f"md5({expr})"

    def as_text(self, expr: str) -> str:
        """SQL: ``expr`` cast to the dialect's text type."""
        return f"CAST({expr} AS {self.text_type})"

    def is_integer(self, column: str) -> bool:
        """Whether ``column`` holds integers (its text form is the same in every engine)."""
        return self.column_types()[column] == "numeric" and not self.is_float(column)

    def scaled_parts_sql(self, expr: str, where: str) -> str:
        """SQL returning rows ``(s, m)`` with sum(expr) = sum(m * 2**s), exactly."""
        return scaled_parts_sql(expr, self.relation, where)

    def grid_integer(self, expr: str, exponent: int) -> str:
        """SQL: trunc(expr 2**(GRID_BITS - exponent)) as a BIGINT (``data.exact``); values
        that truncate to 0 are 0 without the product (no engine meets an underflow)."""
        small = self.double_literal(math.ldexp(1.0, exponent - GRID_BITS))
        scale = self.double_literal(math.ldexp(1.0, GRID_BITS - exponent))
        return (
            f"(CASE WHEN abs({expr}) < {small} THEN CAST(0 AS BIGINT) "
            f"ELSE {self.truncate_to_bigint(f'({expr}) * {scale}')} END)"
        )

    def truncate_to_bigint(self, expr: str) -> str:
        """SQL: the double ``expr`` (an integer's worth, |expr| < 2**63) truncated towards 0."""
        return f"CAST(trunc({expr}) AS BIGINT)"

    def integer_sum(self, expr: str) -> str:
        """SQL aggregate: the exact sum of the BIGINT ``expr`` (DuckDB: HUGEINT)."""
        return f"SUM(CAST({expr} AS HUGEINT))"

    # -- column expressions ----------------------------------------------------------
    @property
    def columns(self) -> list[str]:
        """The column names, in table order."""
        return list(self.column_types())

    def check_column(self, column: Any) -> str:
        """``column`` if it names a column of this table, else a one-line error."""
        if not isinstance(column, str):
            raise TypeError(f"column must be a string, got {type(column).__name__} {column!r}")
        cols = self.columns
        if column not in cols:
            raise ValueError(f"column {column!r} not found in {self.name}; available: {cols}")
        return column

    def not_null(self, column: str) -> str:
        """SQL condition: ``column`` holds a value (not NULL, not NaN)."""
        q = self.quote(column)
        if self.is_float(column):
            return f"({q} IS NOT NULL AND NOT {self.is_nan(q)})"
        return f"({q} IS NOT NULL)"

    def as_double(self, column: str) -> str:
        return f"CAST({self.quote(column)} AS {self.double_type})"

    # -- aggregates ---------------------------------------------------------------------
    def n(self) -> int:
        """Number of rows."""
        return int(self.fetch(f"SELECT COUNT(*) FROM {self.relation}")[0][0])

    def null_count(self, column: str) -> int:
        cond = self.not_null(column)
        sql = f"SELECT COUNT(*) - COUNT(*) FILTER (WHERE {cond}) FROM {self.relation}"
        return int(self.fetch(sql)[0][0])

    def value_counts_joint(self, columns: list[str], *, dropna: bool = True) -> dict[tuple, int]:
        """Contingency table: tuple of values -> count, by GROUP BY in the engine.

        Rows with a NULL in any of ``columns`` are left out (``dropna=True``) or counted
        under ``None`` (``dropna=False``).
        """
        if isinstance(columns, str) or not isinstance(columns, list | tuple):
            raise TypeError(f"columns must be a list of column names, got {columns!r}")
        if not columns:
            raise ValueError("columns must name at least one column")
        cols = [self.check_column(c) for c in columns]
        types = self.column_types()
        exprs = []
        for c in cols:
            q = self.quote(c)
            if types[c] in ("string", "other"):
                exprs.append(self.as_text(q))
            elif self.is_float(c):
                exprs.append(f"CASE WHEN {self.is_nan(q)} THEN NULL ELSE {q} END")
            else:
                exprs.append(q)
        select = ", ".join(f"{e} AS g{i}" for i, e in enumerate(exprs))
        groups = ", ".join(f"g{i}" for i in range(len(exprs)))
        where = " AND ".join(self.not_null(c) for c in cols) if dropna else "TRUE"
        sql = (
            f"SELECT {groups}, COUNT(*) FROM (SELECT {select} FROM {self.relation} "
            f"WHERE {where}) AS dpb_g GROUP BY {groups} ORDER BY {groups}"
        )
        rows = self.fetch(sql)
        return {tuple(_python_scalar(v) for v in row[:-1]): int(row[-1]) for row in rows}

    def clamped_sum_exact(
        self, column: str, lower: float, upper: float, *, square: bool
    ) -> Fraction:
        """The exact sum of the clamped (or clamped and squared) doubles of ``column``."""
        lo, hi = self.double_literal(lower), self.double_literal(upper)
        clamped = f"LEAST(GREATEST({self.as_double(column)}, {lo}), {hi})"
        expr = self.square(clamped) if square else clamped
        rows = self.fetch(self.scaled_parts_sql(expr, self.not_null(column)))
        return scaled_sum_fraction((s, m) for s, m in rows if m is not None)

    def clamped_sum(self, column: str, lower: float, upper: float, *, square: bool) -> float:
        # saturated like exact_sum: a sum of data beyond the doubles never fails
        return round_saturating(self.clamped_sum_exact(column, lower, upper, square=square))

    def min_max(self, column: str) -> tuple[Any, Any]:
        q = self.quote(column)
        sql = (
            f"SELECT MIN({q}) FILTER (WHERE {self.not_null(column)}), "
            f"MAX({q}) FILTER (WHERE {self.not_null(column)}) FROM {self.relation}"
        )
        lo, hi = self.fetch(sql)[0]
        return _python_scalar(lo), _python_scalar(hi)


_DUCKDB_INTEGERS = {
    "TINYINT",
    "SMALLINT",
    "INTEGER",
    "BIGINT",
    "HUGEINT",
    "UTINYINT",
    "USMALLINT",
    "UINTEGER",
    "UBIGINT",
    "UHUGEINT",
}


def _duckdb_kind(type_name: str) -> str:
    t = type_name.upper()
    if t == "BOOLEAN":
        return "bool"
    if t in _DUCKDB_INTEGERS or t in ("FLOAT", "DOUBLE", "REAL") or t.startswith("DECIMAL"):
        return "numeric"
    if t == "VARCHAR" or t.startswith("ENUM"):
        return "string"
    return "other"


def _drop_table(connection: Any, table: str) -> None:
    try:
        connection.execute(f"DROP TABLE IF EXISTS {table}")
    except Exception:  # interpreter shutdown, or already closed
        pass


def _distrust_parquet_float_statistics(connection: Any) -> None:
    """Make the Parquet scans of ``connection`` (a connection dpbayes owns) assume that a
    float column may hold NaN whatever its min/max statistics say.

    A second line of defence behind :meth:`DuckDBTable.is_nan`: it keeps the optimiser from
    folding *any* expression of a float column (a range test, a clamp) to a constant from
    statistics that leave NaN out. The setting is local to the connection and exists only
    in recent DuckDB versions (elsewhere ``is_nan`` alone protects).
    """
    import duckdb

    try:
        connection.execute("SET parquet_can_have_nan = true")
    except duckdb.Error:  # an older DuckDB without the setting
        pass


def _release_view(connection: Any, view: str) -> None:
    try:
        connection.execute(f"DROP VIEW IF EXISTS {view}")
        connection.close()
    except Exception:  # interpreter shutdown, or already closed
        pass


class DuckDBTable(SQLTable):
    """A DuckDB relation (file scan, data frame scan, or a user's relation).

    With ``connection`` (a DuckDB connection that this table owns and on which
    ``relation`` was made) the relation is registered there as a temporary view and
    queried with ``execute`` -- several times faster than ``relation.query``, which is
    the fallback for a relation on a user's connection. Queries run under a lock (a
    DuckDB connection is not safe for concurrent use); engine errors become one-line
    ``ValueError``\\ s naming the table.
    """

    _counter = itertools.count()

    def __init__(self, relation: Any, name: str, *, connection: Any = None) -> None:
        self._rel = relation
        self._con = connection
        self.name = name
        self._lock = threading.Lock()
        self._types = {c: str(t) for c, t in zip(relation.columns, relation.types, strict=True)}
        if connection is not None:
            _distrust_parquet_float_statistics(connection)
            view = f"dpb_view_{next(self._counter)}"
            relation.create_view(view, replace=True)
            self.relation = self.quote(view)
            # drop the view (it references the data) and close the connection when the
            # table is garbage collected: the database is shared by all tables
            weakref.finalize(self, _release_view, connection, self.relation)
        else:
            # the name under which ``relation.query`` shows the relation; ``relation`` may
            # later become a subquery over it (contribution bounding)
            self.relation = self._alias = "dpb_input"

    def fetch(self, sql: str) -> list[tuple[Any, ...]]:
        import duckdb

        with self._lock:
            try:
                if self._con is not None:
                    return self._con.execute(sql).fetchall()
                return self._rel.query(self._alias, sql).fetchall()
            except duckdb.Error as exc:
                raise ValueError(f"cannot read {self.name}: {_one_line(exc)}") from None

    def column_types(self) -> dict[str, str]:
        return {c: _duckdb_kind(t) for c, t in self._types.items()}

    def materialize(self) -> DuckDBTable:
        """This table computed once into a temporary DuckDB table (same rows, same bound).

        Worth it before several statistics of a contribution-bounded table: the window
        function that keeps k rows per user then runs once, not once per statistic.
        """
        if self._con is None:
            raise ValueError(
                f"cannot materialize {self.name}: it is a relation on a connection dpbayes "
                "does not own; pass the file path or frame instead"
            )
        view = self.quote(f"dpb_mat_{next(self._counter)}")
        try:
            with self._lock:
                self._con.execute(f"CREATE TEMP TABLE {view} AS SELECT * FROM {self.relation}")
        except Exception as exc:
            raise ValueError(f"cannot materialize {self.name}: {_one_line(exc)}") from None
        out = copy.copy(self)
        out._lock = threading.Lock()
        out.relation = view
        out._dpb_parent = self  # type: ignore[attr-defined]  # keeps the connection open
        weakref.finalize(out, _drop_table, self._con, view)
        return out

    def is_float(self, column: str) -> bool:
        return self._types[column].upper() in ("FLOAT", "DOUBLE", "REAL")

    def is_nan(self, expr: str) -> str:
        """SQL condition: the float ``expr`` is NaN, in a form no statistics can fold.

        DuckDB takes a Parquet file's min/max statistics, which leave NaN out, as proof
        that a float column holds no NaN, and folds ``isnan(x)``, ``x = 'NaN'`` and range
        tests to constants from them (``x <> x`` is false for NaN in DuckDB anyway). A
        folded test let NaN through as a value -- the largest one, so a clamp turned it
        into the upper bound -- or kept it as a category, and a regression did not refuse
        the row, on Parquet input only and only where the statistics (of a file or a row
        group: other people's rows) said "no NULLs" and no infinity: a result that
        depended on data beyond the guarantee. ``nextafter`` carries no statistics, so the
        test is made row by row on every connection, the user's too; it keeps NaN (and
        only NaN) NaN, and costs about 20 ms per 10^6 rows and column (a text round trip,
        as for user ids in ``contributions``, costs about 350 ms).
        """
        return f"isnan(nextafter({expr}, 0.0))"

    def is_integer(self, column: str) -> bool:
        return self._types[column].upper() in _DUCKDB_INTEGERS


class ColumnSource(Source):
    """One column of an :class:`SQLTable`, as a :class:`~dpbayes.data.source.Source`."""

    def __init__(self, table: SQLTable, column: str, *, name: str | None = None) -> None:
        self.table = table
        self.column = table.check_column(column)
        self.name = name or f"column {column!r} of {table.name}"
        self._kind = table.column_types()[column]

    @property
    def kind(self) -> str:
        return self._kind

    @property
    def rows_per_user_bound(self) -> int | None:
        """At most this many rows per user (None: rows are not bounded per user)."""
        return self.table.rows_per_user_bound

    @property
    def user_column(self) -> str | None:
        """The column that identifies a user of a contribution-bounded table, else None."""
        return self.table.user_column if self.table.rows_per_user_bound is not None else None

    def n(self) -> int:
        return self.table.n()

    def null_count(self) -> int:
        return self.table.null_count(self.column)

    def value_counts(self) -> dict[Any, int]:
        return {k[0]: c for k, c in self.table.value_counts_joint([self.column]).items()}

    def clamped_sum_exact(self, lower: float, upper: float) -> Fraction:
        self._require_numeric("clamped_sum")
        lo, hi = check_bounds(lower, upper)
        return self.table.clamped_sum_exact(self.column, lo, hi, square=False)

    def clamped_sum_of_squares(self, lower: float, upper: float) -> float:
        self._require_numeric("clamped_sum_of_squares")
        lo, hi = check_bounds(lower, upper, square=True)
        return self.table.clamped_sum(self.column, lo, hi, square=True)

    def min(self) -> Any:
        self._require_numeric("min")
        lo, _ = self.table.min_max(self.column)
        if lo is None:
            raise self._no_values("min")
        return lo

    def max(self) -> Any:
        self._require_numeric("max")
        _, hi = self.table.min_max(self.column)
        if hi is None:
            raise self._no_values("max")
        return hi

    def columns(self) -> list[str]:
        """The columns of the table this column belongs to."""
        return self.table.columns

    def value_counts_joint(self, columns: list[str], *, dropna: bool = True) -> dict[tuple, int]:
        """Contingency table of ``columns`` of the same table (``Table.value_counts_joint``)."""
        return self.table.value_counts_joint(columns, dropna=dropna)
