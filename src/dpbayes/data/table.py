"""The front class for a whole table: :class:`Table` over any engine's :class:`SQLTable`.

Kept apart from the SQL backends (:mod:`dpbayes.data.sql`) so that the data modules import
each other in one direction only: ``table`` -> ``readers``/``contributions`` -> ``sql``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dpbayes.data.contributions import bound_contributions
from dpbayes.data.readers import is_csv_path, open_table
from dpbayes.data.sql import ColumnSource, SQLTable

__all__ = ["Table"]


class Table:
    """A table (CSV/Parquet path, pandas/polars/Arrow frame, DuckDB relation, database
    URL with ``table=``, Spark DataFrame); ``options`` are :func:`open_table`'s
    (``table``, ``schema``, ``user_column``, ``max_rows_per_user``).

    ``Table(data).column(name)`` is the :class:`ColumnSource` that ``as_source(data,
    column=name)`` gives; ``value_counts_joint(columns)`` (alias ``count_table``) is
    the contingency table computed by GROUP BY in the engine.

    A CSV file has no column types: the engine guesses them from the values. A table
    made from a CSV path therefore remembers the path and its options, and a model whose
    declared categories are text reads the file again with those columns as text
    (:meth:`read_as_text`), so that no column's type, and no refusal, depends on the
    values of the records.
    """

    def __init__(self, data: Any, *, name: str | None = None, **options: Any) -> None:
        self.backend: SQLTable = (
            data
            if isinstance(data, SQLTable) and not options
            else open_table(data, name, **options)
        )
        self.name = self.backend.name
        # (path, name, options) of a CSV file, and whether it was materialized
        self._csv: tuple[Any, str | None, dict[str, Any]] | None = (
            (data, name, dict(options)) if is_csv_path(data) else None
        )
        self._materialized = False

    @property
    def reads_csv(self) -> bool:
        """Whether this table reads a CSV file (whose column types the engine guesses)."""
        return self._csv is not None

    def read_as_text(self, columns: Sequence[str]) -> SQLTable:
        """The table (its :class:`SQLTable`) with ``columns`` read as the file's text.

        For a table made from a CSV path, the file is read again with ``columns`` added
        to its ``text_columns`` (then bounded and materialized as this table was): always,
        whatever types the first reading guessed, so that nothing depends on them. Other
        tables have typed columns and are returned as they are.
        """
        if self._csv is None:
            return self.backend
        data, name, options = self._csv
        text = tuple(dict.fromkeys([*options.get("text_columns", ()), *columns]))
        backend = open_table(data, name, **{**options, "text_columns": text})
        if self._materialized:
            backend = backend.materialize()  # type: ignore[attr-defined]
        return backend

    @property
    def columns(self) -> list[str]:
        """The column names, in table order."""
        return self.backend.columns

    @property
    def rows_per_user_bound(self) -> int | None:
        """At most this many rows per user (None: rows are not bounded per user)."""
        return self.backend.rows_per_user_bound

    @property
    def user_column(self) -> str | None:
        """The column that identifies a user of a contribution-bounded table, else None."""
        return getattr(self.backend, "user_column", None)

    def bound_contributions(self, user_column: str, max_rows_per_user: int) -> Table:
        """This table with at most ``max_rows_per_user`` rows per user, chosen in the engine.

        See :func:`~dpbayes.data.contributions.bound_contributions`.
        """
        out = Table(bound_contributions(self.backend, user_column, max_rows_per_user))
        if self._csv is not None:
            data, name, options = self._csv
            bounded = {"user_column": user_column, "max_rows_per_user": max_rows_per_user}
            # read again as Table(path, user_column=..., ...): the user column as text,
            # and the rows hashed by the file's text, not by the guessed types
            out = Table(data, name=name, **{**options, **bounded})
            if self._materialized:
                out = out.materialize()
        return out

    def materialize(self) -> Table:
        """This table computed once by its engine (DuckDB temporary table, cached Spark
        DataFrame); statistics then read the stored rows. See ``DuckDBTable.materialize``."""
        mat = getattr(self.backend, "materialize", None)
        if mat is None:
            raise TypeError(f"{type(self.backend).__name__} tables cannot be materialized")
        out = Table(mat())
        out._csv, out._materialized = self._csv, self._csv is not None
        return out

    def column(self, name: str) -> ColumnSource:
        """The source for one column."""
        return ColumnSource(self.backend, name)

    def n(self) -> int:
        """Number of rows."""
        return self.backend.n()

    def value_counts_joint(self, columns: list[str], *, dropna: bool = True) -> dict[tuple, int]:
        """Contingency table: tuple of values of ``columns`` -> count (GROUP BY).

        Rows with a NULL in any of ``columns`` are left out unless ``dropna=False``.
        """
        return self.backend.value_counts_joint(columns, dropna=dropna)

    count_table = value_counts_joint

    def __repr__(self) -> str:
        return f"<Table {self.name} columns={self.columns}>"
