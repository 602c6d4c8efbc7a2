"""Spark DataFrames: every statistic is one Spark SQL aggregation, run by the cluster.

``as_source(spark_df, column="x")`` registers the DataFrame as a temporary view and
sends Spark SQL over it; only the aggregates (a handful of rows) are collected.

Exact sums: each clamped value is split into an integer times a power of two, cast to
``BIGINT`` (exact: |m| < 2**63; a direct double-to-DECIMAL cast would go through the
shortest decimal string and lose bits) and then to ``DECIMAL(38, 0)``, whose Spark sum
is exact up to 10**38 (~2**126: 2**64 rows of 2**62); Python combines the per-exponent
totals and rounds once, so the sums equal numpy's and DuckDB's bit for bit.
"""

from __future__ import annotations

import itertools
import threading
import weakref
from typing import Any

from dpbayes.data.exact import SCALE_BITS
from dpbayes.data.sql import SQLTable, _one_line

__all__ = ["SparkTable", "is_spark_dataframe"]


def is_spark_dataframe(data: Any) -> bool:
    """Whether ``data`` is a PySpark DataFrame (classic or Spark Connect)."""
    mod = type(data).__module__
    return mod.startswith("pyspark.") and type(data).__name__ == "DataFrame"


def _kind(dtype: Any) -> tuple[str, bool, bool]:
    """(kind, is_float, is_integer) of a Spark SQL data type."""
    from pyspark.sql import types as T

    if isinstance(dtype, T.BooleanType):
        return "bool", False, False
    if isinstance(dtype, T.ByteType | T.ShortType | T.IntegerType | T.LongType):
        return "numeric", False, True
    if isinstance(dtype, T.FloatType | T.DoubleType):
        return "numeric", True, False
    if isinstance(dtype, T.DecimalType):
        return "numeric", False, False
    if isinstance(dtype, T.StringType):
        return "string", False, False
    return "other", False, False


def _unpersist(frame: Any) -> None:
    try:
        frame.unpersist()
    except Exception:  # session stopped, or interpreter shutdown
        pass


def _drop_view(spark: Any, view: str) -> None:
    try:
        spark.catalog.dropTempView(view)
    except Exception:  # session stopped, or interpreter shutdown
        pass


class SparkTable(SQLTable):
    """A PySpark DataFrame, queried only through Spark SQL aggregates.

    The DataFrame is registered as a uniquely named temporary view of its session
    (dropped when this table is garbage collected). Spark errors become one-line
    ``ValueError``\\ s naming the table.
    """

    text_type = "STRING"
    double_type = "DOUBLE"
    _counter = itertools.count()

    def __init__(self, frame: Any, name: str | None = None) -> None:
        if not is_spark_dataframe(frame):
            raise TypeError(f"frame must be a PySpark DataFrame, got {type(frame).__name__}")
        self._frame = frame
        self._spark = frame.sparkSession
        self.name = name or "Spark DataFrame"
        self._lock = threading.Lock()
        self._types = {f.name: _kind(f.dataType) for f in frame.schema.fields}
        view = f"dpb_spark_view_{next(self._counter)}"
        frame.createOrReplaceTempView(view)
        self.relation = self.quote(view)
        weakref.finalize(self, _drop_view, self._spark, view)

    @staticmethod
    def quote(identifier: str) -> str:
        """A Spark SQL identifier, back-quoted."""
        return "`" + identifier.replace("`", "``") + "`"

    def fetch(self, sql: str) -> list[tuple[Any, ...]]:
        with self._lock:
            try:
                return [tuple(r) for r in self._spark.sql(sql).collect()]
            except Exception as exc:  # pyspark raises its own hierarchy (AnalysisException, ...)
                if type(exc).__module__.startswith(("pyspark", "py4j")):
                    raise ValueError(f"cannot read {self.name}: {_one_line(exc)}") from None
                raise

    def column_types(self) -> dict[str, str]:
        return {c: k for c, (k, _, _) in self._types.items()}

    def materialize(self) -> SparkTable:
        """This table as a cached (computed once, kept in executor memory or disk) Spark
        DataFrame with the same rows and the same ``rows_per_user_bound``."""
        with self._lock:
            try:
                frame = self._spark.sql(f"SELECT * FROM {self.relation}").persist()
                frame.count()  # compute it now, once
            except Exception as exc:
                if type(exc).__module__.startswith(("pyspark", "py4j")):
                    raise ValueError(f"cannot materialize {self.name}: {_one_line(exc)}") from None
                raise
        out = SparkTable(frame, self.name)
        out.rows_per_user_bound = self.rows_per_user_bound
        out.user_column = self.user_column
        out._dpb_parent = self  # type: ignore[attr-defined]
        weakref.finalize(out, _unpersist, frame)
        return out

    def is_float(self, column: str) -> bool:
        return self._types[column][1]

    def is_integer(self, column: str) -> bool:
        return self._types[column][2]

    def truncate_to_bigint(self, expr: str) -> str:
        # Spark's cast of a double to BIGINT truncates towards 0 (Java's (long) cast)
        return f"CAST({expr} AS BIGINT)"

    def integer_sum(self, expr: str) -> str:
        # SUM of BIGINT is a BIGINT in Spark (it may wrap); DECIMAL(38, 0) is exact here
        return f"SUM(CAST({expr} AS DECIMAL(38, 0)))"

    def scaled_parts_sql(self, expr: str, where: str) -> str:
        """Rows ``(s, m)`` with sum(expr) = sum(m * 2**s): BIGINT parts, DECIMAL(38,0) sums."""
        b = SCALE_BITS
        return (
            f"WITH dpb_v AS (SELECT {expr} AS x FROM {self.relation} WHERE {where}), "
            "dpb_k AS (SELECT x, CAST(floor(log2(abs(x))) AS INT) AS k "
            "FROM dpb_v WHERE x <> 0) "
            f"SELECT k - {b} AS s, SUM(CAST(CAST((x * pow(2.0D, ({b} - k) div 2)) * "
            f"pow(2.0D, ({b} - k) - ({b} - k) div 2) AS BIGINT) AS DECIMAL(38, 0))) AS m "
            "FROM dpb_k GROUP BY k"
        )
