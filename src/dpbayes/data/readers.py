"""Turning what a user passes (paths, frames, URLs, arrays, sources) into a data source.

``as_source(data, column=None)`` is the one entry point the rest of dpbayes calls.
Files and data frames are opened as DuckDB relations (lazy scans: nothing is read
until a statistic is asked for, and rows stream through the engine); a database URL
plus ``table`` is a PostgreSQL table (:mod:`dpbayes.data.sqlalchemy_table`); a PySpark
DataFrame is aggregated by Spark (:mod:`dpbayes.data.spark`); lists, tuples and numpy
arrays stay in numpy. ``user_column`` + ``max_rows_per_user`` bound each user's rows
in the engine first (:mod:`dpbayes.data.contributions`).
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from dpbayes.data.contributions import bound_contributions
from dpbayes.data.source import ArraySource, Source
from dpbayes.data.spark import SparkTable, is_spark_dataframe
from dpbayes.data.sql import ColumnSource, DuckDBTable, SQLTable, _one_line
from dpbayes.data.sqlalchemy_table import SQLAlchemyTable, is_database_url

__all__ = [
    "CSV_SUFFIXES",
    "PARQUET_SUFFIXES",
    "as_source",
    "guesses_types",
    "is_csv_path",
    "open_table",
]

CSV_SUFFIXES = (".csv", ".csv.gz", ".csv.zst", ".tsv", ".tsv.gz")
PARQUET_SUFFIXES = (".parquet", ".pq")

# CSV fields read as NULL (besides NaN in float columns, which every source treats so).
_CSV_NULLS = ["", "NA", "NULL"]

# A CSV file has no column types: DuckDB's sniffer guesses them from the values. By
# default it looks at a sample of rows only (20,480), so a value further down that does
# not fit the guess (a letter in a column of numbers) fails the whole read, with an error
# that tells the value's line: whether the data can be read at all would depend on one
# record's value, in any column. With ``sample_size=-1`` the sniffer reads every row:
# each column's type then fits all its values (a column with one letter is text), and no
# read fails because of a value. The type is still a function of the values; where that
# matters the type is fixed by what is public instead (``text_columns``: the columns
# whose declared categories are text, and the user column of contribution bounding).
_CSV_SAMPLE_ROWS = -1

# The types the CSV sniffer may choose (DuckDB's defaults, without BIGNUM).
_CSV_TYPE_CANDIDATES = [
    "BOOLEAN", "BIGINT", "HUGEINT", "DOUBLE", "TIME", "DATE", "TIMESTAMP", "VARCHAR",
]  # fmt: skip


_DATABASE: Any = None
_DATABASE_LOCK = threading.Lock()


def _connection() -> Any:
    """A new DuckDB connection (cursor) on one shared in-memory database.

    Opening a database costs tens of milliseconds; a cursor on a shared one is cheap,
    and each table gets its own, so tables can be queried from different threads.
    """
    global _DATABASE
    import duckdb

    with _DATABASE_LOCK:
        if _DATABASE is None:
            # spills (a window over 10^7 rows bounded per user) go to the system's temporary
            # folder, not to ".tmp" in whatever folder the caller runs in
            spill = os.path.join(tempfile.gettempdir(), f"dpbayes-duckdb-{os.getpid()}")
            _DATABASE = duckdb.connect(":memory:", config={"temp_directory": spill})
        return _DATABASE.cursor()


def _module_of(obj: Any) -> str:
    return type(obj).__module__.split(".")[0]


def _is_pandas(data: Any, kind: str) -> bool:
    """Whether ``data`` is a pandas ``kind`` (``"DataFrame"``, ``"Series"``), without
    importing pandas (if it is not imported, ``data`` cannot be one)."""
    pd = sys.modules.get("pandas")
    return pd is not None and isinstance(data, getattr(pd, kind))


# (module, class) of the frames held in this process's memory besides pandas DataFrames
_ARROW_LIKE_FRAMES = {
    ("polars", "DataFrame"), ("polars", "LazyFrame"), ("pyarrow", "Table"),
    ("pyarrow", "RecordBatch"),
}  # fmt: skip


def _is_frame(data: Any) -> bool:
    """A pandas/polars DataFrame or an Arrow table: data held in this process's memory."""
    kind = (_module_of(data), type(data).__name__)
    return _is_pandas(data, "DataFrame") or kind in _ARROW_LIKE_FRAMES


def _is_table_like(data: Any) -> bool:
    if _is_frame(data) or isinstance(data, SQLTable | str | os.PathLike):
        return True
    if isinstance(getattr(data, "backend", None), SQLTable):  # a dpbayes.data.Table
        return True
    if is_spark_dataframe(data) or _module_of(data) == "sqlalchemy":
        return True
    mod, cls = _module_of(data), type(data).__name__
    return mod in ("duckdb", "_duckdb") and cls in ("Table", "RecordBatch", "DuckDBPyRelation")


def _file_kind(path: Path) -> str:
    name = path.name.lower()
    if name.endswith(CSV_SUFFIXES):
        return "csv"
    if name.endswith(PARQUET_SUFFIXES):
        return "parquet"
    raise ValueError(
        f"unknown file type for {str(path)!r}: expected one of "
        f"{list(CSV_SUFFIXES + PARQUET_SUFFIXES)}"
    )


def is_parquet_file(path: str | os.PathLike[str]) -> bool:
    """Whether the file at ``path`` is Parquet, by its magic bytes (whatever its name)."""
    with open(path, "rb") as f:
        return f.read(4) == b"PAR1"


def is_csv_path(data: Any) -> bool:
    """Whether ``data`` is the path of a CSV file (by its name: a public fact), whose
    column types the engine guesses from the values (see ``text_columns``)."""
    if not isinstance(data, str | os.PathLike) or is_database_url(data):
        return False
    return Path(data).name.lower().endswith(CSV_SUFFIXES)


def guesses_types(data: Any) -> bool:
    """Whether the engine guesses the column types of ``data`` from its values: a CSV
    path, or a :class:`~dpbayes.data.table.Table` made from one (public facts)."""
    return is_csv_path(data) or bool(getattr(data, "reads_csv", False))


def _object_text(value: Any) -> Any:
    """One value of an ``object`` column as text, by its own value: missing (None, NaN,
    pandas NA/NaT) as NA; ``true``/``false``; an int, or a float that is a whole number
    below 2**53, as its digits (``1`` and ``1.0`` are one id, as they are equal); another
    float by ``repr``; text as it is; anything else by ``str``."""
    import math
    import numbers

    import numpy as np
    import pandas as pd

    if isinstance(value, np.generic):
        value = value.item()
    if value is None or type(value).__name__ in ("NAType", "NaTType"):
        return pd.NA
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, float):
        if math.isnan(value):
            return pd.NA
        if value.is_integer() and abs(value) < 2**53:
            return str(int(value))
        return repr(value)
    return str(value)


def object_columns_as_text(frame: Any) -> Any:
    """``frame`` with each ``object`` column as text, value by value (:func:`_object_text`).

    DuckDB types an ``object`` column from its values (a sample of them): one record
    holding ``"x"`` turned a column of numbers or booleans into text, which changed every
    other row's digest in user-level bounding (about half the users kept another row) and
    whether a release was made or refused. A column's type now follows its dtype, a fact
    of the container; its text values are read by the one rule for text fields
    (:mod:`dpbayes.data.text_values`). Other columns are left as they are.
    """
    import pandas as pd

    names = [c for c in frame.columns if frame[c].dtype == object]
    if not names:
        return frame
    out = frame.copy(deep=False)
    for c in names:
        out[c] = pd.array([_object_text(v) for v in frame[c].tolist()], dtype="string")
    return out


def polars_object_columns_as_text(frame: Any) -> Any:
    """A polars ``frame`` with each ``Object`` column as text, value by value
    (:func:`_object_text`), as :func:`object_columns_as_text` does for pandas.

    polars hands an ``Object`` column to Arrow as the addresses of its Python objects
    (8 bytes each): equal values held by distinct objects were distinct values, so one
    user's rows with equal ids were as many users (one added user with 100 rows changed
    a count bounded to 1 row per user by 100), and no value matched a declared category.
    """
    import pandas as pd
    import polars as pl

    names = [c for c, t in frame.schema.items() if t == pl.Object]
    if not names:
        return frame
    return frame.with_columns(
        pl.Series(
            c,
            [None if t is pd.NA else t for t in map(_object_text, frame[c].to_list())],
            dtype=pl.String,
        )
        for c in names
    )


def _read_csv(
    con: Any, path: Path, dtype: dict[str, str] | None = None, *, all_varchar: bool = False
) -> Any:
    """A DuckDB relation scanning a CSV file: header row, ``_CSV_NULLS`` as NULL, types
    sniffed from every row (``_CSV_SAMPLE_ROWS``) except those fixed by ``dtype``, or
    every column as the file's text (``all_varchar``).

    The dialect is fixed from public facts, never sniffed from the rows: the delimiter by
    the file's suffix (a tab for ``.tsv``, else a comma), ``"`` as quote and escape, the
    first line the header, no rows skipped. Sniffed, one record (``v;x``, or a row with an
    extra field) became the delimiter's or the header's evidence, and every row before it
    was skipped: a data set of 50 records and its neighbour with one more read as 50 and
    0. A malformed row now fails the read by itself (a refusal, nothing spent)."""
    options: dict[str, Any] = {"dtype": dtype} if dtype else {}
    if all_varchar:
        options["all_varchar"] = True
    else:
        # no BIGNUM: an integer beyond HUGEINT (10**39) made the whole column a type that
        # is not a number, so one record refused every numeric statistic; as DOUBLE it is
        # a number (+-inf beyond the doubles) that the bounds clamp, as 1e400 is
        options["auto_type_candidates"] = _CSV_TYPE_CANDIDATES
    tab = path.name.lower().endswith((".tsv", ".tsv.gz"))
    return con.read_csv(
        str(path),
        header=True,
        sep="\t" if tab else ",",
        quotechar='"',
        escapechar='"',
        skiprows=0,
        na_values=_CSV_NULLS,
        sample_size=_CSV_SAMPLE_ROWS,
        **options,
    )


def _open_file(path: Path, name: str | None, text_columns: Sequence[str] = ()) -> DuckDBTable:
    import duckdb

    kind = _file_kind(path)
    if not path.is_file():
        what = "is not a file" if path.exists() else "not found"
        raise ValueError(f"data file {str(path)!r} {what}")
    if not os.access(path, os.R_OK):
        raise ValueError(f"data file {str(path)!r} is not readable")
    con = _connection()
    try:
        if kind == "csv":
            rel = _read_csv(con, path)
            text = {c: "VARCHAR" for c in text_columns if c in rel.columns}
            if text:  # read as the file's text, not as the type the values suggest
                rel = _read_csv(con, path, dtype=text)
        else:
            rel = con.read_parquet(str(path))
    except duckdb.Error as exc:
        con.close()
        raise ValueError(f"cannot read {kind} file {str(path)!r}: {_one_line(exc)}") from None
    out = DuckDBTable(rel, name or path.name, connection=con)
    if kind == "csv":
        _pair_with_text(out, con, path)
    return out


def _drop_view(connection: Any, view: str) -> None:
    try:
        connection.execute(f"DROP VIEW IF EXISTS {view}")
    except Exception:  # interpreter shutdown, or the connection is closed already
        pass


def _pair_with_text(table: DuckDBTable, con: Any, path: Path) -> None:
    """Give ``table`` (a typed read of the CSV file ``path``) the same file read with every
    column as text, as ``table.csv_text_rows = (typed relation, text view)``.

    Contribution bounding hashes a CSV file's rows by their text
    (:func:`~dpbayes.data.contributions.bound_contributions`): the types the engine guesses
    depend on every record (one letter makes a column of numbers text), so a digest of
    the typed values would let one person change which rows are kept for everyone else.
    Both reads scan the file in its order, so a row is the same row in both: its number
    (``ROW_NUMBER() OVER ()``, a streaming window that keeps the scan's order).
    """
    import duckdb

    try:
        text = _read_csv(con, path, all_varchar=True)
        if list(text.columns) != list(table.columns):
            return  # not the same columns: the typed digest stays (never expected)
        view = f"dpb_text_{next(DuckDBTable._counter)}"
        text.create_view(view, replace=True)
    except duckdb.Error:
        return
    quoted = DuckDBTable.quote(view)
    weakref.finalize(table, _drop_view, con, quoted)
    table.csv_text_rows = (table.relation, quoted)  # type: ignore[attr-defined]


def open_table(
    data: Any,
    name: str | None = None,
    *,
    table: str | None = None,
    schema: str | None = None,
    user_column: str | None = None,
    max_rows_per_user: int | None = None,
    text_columns: Sequence[str] = (),
) -> SQLTable:
    """The :class:`~dpbayes.data.sql.SQLTable` for a path, frame, relation or database.

    ``data`` may also be a database URL (``"postgresql://user@host/db"``) or an
    SQLAlchemy engine, with ``table`` (and optionally ``schema``), or a PySpark
    DataFrame. With ``user_column`` and ``max_rows_per_user`` the table keeps at most
    that many rows per user (:func:`~dpbayes.data.contributions.bound_contributions`).
    ``text_columns``: columns of a CSV file read as text, as the file holds them (the
    engine otherwise reads a column of numbers-looking text as numbers, a type chosen by
    the values of all records: "1.50" becomes 1.5 when no record holds a letter); other
    sources have typed columns and ignore it. A :class:`~dpbayes.data.table.Table` made
    from a CSV path is read again with them. The ``user_column`` of a CSV file is always
    read as text: which rows are one user's must not depend on the other users' values
    (as numbers, "1" and "1.0" would be one user unless some id held a letter).

    Raises ``ValueError`` for a missing/unreadable file, an unknown file type or a
    table without columns, and ``TypeError`` for anything that is not a table. A table
    without rows is a table (n = 0): under add/remove neighbours the empty data set is a
    neighbour like any other, so refusing it would tell whether the data are empty.
    """
    if (user_column is None) != (max_rows_per_user is None):
        raise TypeError("user_column and max_rows_per_user must be given together")
    if isinstance(text_columns, str):
        raise TypeError("text_columns must be a sequence of column names, not a string")
    if user_column is not None and is_csv_path(data):
        text_columns = (*text_columns, user_column)
    bound = getattr(data, "bound_contributions", None)
    if user_column is not None and getattr(data, "reads_csv", False) and bound is not None:
        # a Table made from a CSV path: read the file again, bounded (its rows hashed by
        # their text, the user column as text), whether or not it was materialized
        bounded = bound(user_column, max_rows_per_user)
        return bounded.read_as_text(text_columns) if text_columns else bounded.backend
    out = _open_table(data, name, table=table, schema=schema, text_columns=text_columns)
    if user_column is not None:
        out = bound_contributions(out, user_column, max_rows_per_user)
        if _is_frame(data):
            # the rows are in memory already: keep the bounded rows in a DuckDB temporary
            # table, so that the window that chooses them runs once, not per statistic
            # (a file or database is read by its engine at every statistic instead)
            out = out.materialize()  # type: ignore[attr-defined]
    return out


def _open_table(
    data: Any,
    name: str | None,
    *,
    table: str | None,
    schema: str | None,
    text_columns: Sequence[str] = (),
) -> SQLTable:
    import duckdb
    import pandas as pd

    is_database = is_database_url(data) or _module_of(data) == "sqlalchemy"
    if is_database:
        if table is None:
            raise TypeError("table is required to read a database (a URL or SQLAlchemy engine)")
    elif table is not None or schema is not None:
        raise TypeError(
            f"table and schema apply to a database URL or engine, not {type(data).__name__}"
        )
    backend = getattr(data, "backend", None)  # a dpbayes.data.Table (front of an SQLTable)
    if isinstance(backend, SQLTable):
        reread = getattr(data, "read_as_text", None)  # a Table over a CSV file reads it again
        return reread(text_columns) if text_columns and reread is not None else backend
    if isinstance(data, SQLTable):
        table_ = data
    elif is_database:
        table_ = SQLAlchemyTable(data, table, schema=schema, name=name)  # type: ignore[arg-type]
    elif is_spark_dataframe(data):
        table_ = SparkTable(data, name)
    elif isinstance(data, str | os.PathLike):
        table_ = _open_file(Path(data), name, text_columns)
    elif isinstance(data, pd.DataFrame):
        if len(data.columns) and not all(isinstance(c, str) for c in data.columns):
            raise TypeError("DataFrame column names must be strings")
        dup = sorted(set(data.columns[data.columns.duplicated()]))
        if dup:
            raise ValueError(f"DataFrame has duplicate column names: {dup}")
        frame_ = object_columns_as_text(data)
        table_ = _owned(lambda con: con.from_df(frame_), name or "DataFrame")
    elif _module_of(data) == "polars" and type(data).__name__ in ("DataFrame", "LazyFrame"):
        # a LazyFrame is collected first (polars evaluates it; DuckDB then scans Arrow)
        frame = data.collect() if type(data).__name__ == "LazyFrame" else data
        frame = polars_object_columns_as_text(frame)
        table_ = _owned(lambda con: con.from_arrow(frame.to_arrow()), name or "polars DataFrame")
    elif _module_of(data) == "pyarrow" and type(data).__name__ in ("Table", "RecordBatch"):
        table_ = _owned(lambda con: con.from_arrow(data), name or "Arrow table")
    elif isinstance(data, duckdb.DuckDBPyRelation):
        table_ = DuckDBTable(data, name or "DuckDB relation")
    else:
        raise TypeError(
            "data must be a CSV/Parquet path, a pandas/polars DataFrame, an Arrow table, "
            f"a DuckDB relation, a database URL or a Spark DataFrame, got {type(data).__name__}"
        )
    if not table_.columns:
        raise ValueError(f"{table_.name} has no columns")
    return table_


def as_source(
    data: Any,
    column: str | None = None,
    *,
    name: str | None = None,
    table: str | None = None,
    schema: str | None = None,
    user_column: str | None = None,
    max_rows_per_user: int | None = None,
    text: bool = False,
) -> Source:
    """The :class:`~dpbayes.data.source.Source` for one column of ``data``.

    Parameters
    ----------
    data:
        A list, tuple, 1-d numpy array or pandas Series (``column`` must be None); a
        pandas or polars DataFrame, Arrow table, DuckDB relation,
        :class:`~dpbayes.data.table.Table`, or a path to a CSV (``.csv``, ``.csv.gz``,
        ``.tsv``; with a header row; empty, ``NA`` and ``NULL`` fields are NULL) or
        Parquet (``.parquet``) file (``column`` required); a database URL
        (``"postgresql://user:password@host/db"``) or SQLAlchemy engine with ``table``;
        a PySpark DataFrame; or a :class:`~dpbayes.data.source.Source`, returned as is.
    column:
        The column to read from a table.
    name:
        Overrides the description used in messages.
    table, schema:
        The table (and its schema) of a database URL or engine.
    user_column, max_rows_per_user:
        Keep at most ``max_rows_per_user`` rows per value of ``user_column`` (chosen in
        the engine, see :mod:`dpbayes.data.contributions`); the source's
        ``rows_per_user_bound`` then tells releases to protect a user, not a row.
    text:
        Read the column of a CSV file (a path, or a ``Table`` made from one) as text, as
        the file holds it, instead of as the type its values suggest (``text_columns``
        of :func:`open_table`). The categorical models pass it for every CSV file and
        parse each field by itself, so the column's type never depends on the data. Typed sources
        (Parquet, frames, databases) and ready-made sources ignore it.

    Files and frames are aggregated by DuckDB (streamed, never loaded into Python);
    arrays by numpy. Sums are correctly rounded, so both give identical results.
    """
    table_like = _is_table_like(data) or is_database_url(data)
    if not table_like and (
        table is not None
        or schema is not None
        or user_column is not None
        or max_rows_per_user is not None
    ):
        raise TypeError(
            "table, schema, user_column and max_rows_per_user apply to tables, "
            f"not to a {type(data).__name__}"
        )
    if isinstance(data, Source):
        if column is not None:
            raise TypeError(f"column must be None for a data source ({data.name}), got {column!r}")
        return data
    if _is_pandas(data, "Series"):
        if column is not None:
            raise TypeError(f"column must be None for a pandas Series, got {column!r}")
        label = data.name if isinstance(data.name, str) else "value"
        frame = object_columns_as_text(data.to_frame(name=label))
        desc = name or (f"series {data.name!r}" if data.name is not None else "series")
        series_table = _owned(lambda con: con.from_df(frame), desc)
        return ColumnSource(series_table, label, name=desc)
    if table_like:
        if column is None:
            raise TypeError(
                f"column is required to read one column of a table ({type(data).__name__})"
            )
        opened = open_table(
            data,
            name=None,
            table=table,
            schema=schema,
            user_column=user_column,
            max_rows_per_user=max_rows_per_user,
            text_columns=(column,) if text else (),
        )
        return ColumnSource(opened, column, name=name)
    if isinstance(data, list | tuple | np.ndarray):
        if column is not None:
            raise TypeError(
                f"column must be None for a {type(data).__name__} (it has no columns), "
                f"got {column!r}"
            )
        return ArraySource(data, name=name)
    raise TypeError(
        "data must be a list, tuple, numpy array, pandas Series/DataFrame, polars DataFrame, "
        "CSV/Parquet path, database URL, Spark DataFrame or data source, "
        f"got {type(data).__name__}"
    )


def _owned(make: Any, name: str) -> DuckDBTable:
    """A DuckDBTable on a fresh connection of its own, from ``make(connection)``."""
    import duckdb

    con = _connection()
    try:
        return DuckDBTable(make(con), name, connection=con)
    except duckdb.Error as exc:
        con.close()
        raise ValueError(f"cannot read {name}: {_one_line(exc)}") from None
