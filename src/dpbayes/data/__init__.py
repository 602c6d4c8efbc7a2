"""Reading data for private releases: sources of aggregates, tables, bundled data.

``as_source(data, column=None)`` turns a list/array/Series, a DataFrame column, a
CSV/Parquet file's column or a DuckDB relation's column into a :class:`Source` whose
statistics (``n``, ``null_count``, ``value_counts``, ``clamped_sum``,
``clamped_sum_of_squares``, ``min``, ``max``) are computed by numpy (arrays) or pushed
to the engine that holds the data as aggregates: DuckDB (files and frames; streamed,
larger-than-memory files work), PostgreSQL (``as_source(url, column=..., table=...)``)
or Spark (``as_source(spark_df, column=...)``). Sums are correctly rounded, so every
path gives the same numbers. ``user_column=`` and ``max_rows_per_user=`` keep at most k
rows per user, in the engine, for user-level privacy.
"""

from dpbayes.data.contributions import bound_contributions
from dpbayes.data.datasets import (
    BUNDLED_DESCRIPTION,
    bundled_path,
    bundled_table,
    load_bundled,
)
from dpbayes.data.readers import as_source, open_table
from dpbayes.data.source import KINDS, ArraySource, Source
from dpbayes.data.spark import SparkTable
from dpbayes.data.sql import ColumnSource, DuckDBTable, SQLTable
from dpbayes.data.sqlalchemy_table import SQLAlchemyTable
from dpbayes.data.table import Table

__all__ = [
    "BUNDLED_DESCRIPTION",
    "KINDS",
    "ArraySource",
    "ColumnSource",
    "DuckDBTable",
    "SQLAlchemyTable",
    "SQLTable",
    "Source",
    "SparkTable",
    "Table",
    "as_source",
    "bound_contributions",
    "bundled_path",
    "bundled_table",
    "load_bundled",
    "open_table",
]
