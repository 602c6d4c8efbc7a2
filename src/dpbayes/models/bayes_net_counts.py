"""Family count tables of a Bayesian network: numpy for in-memory data, the engine otherwise.

The posterior updates of paper 004 (§2.1) are the count tables of every family (a node and
its parents). Two paths compute them, with the same results:

* in-memory data (a pandas DataFrame, a mapping of columns) is counted in one numpy pass:
  every column is coded once (its distinct values looked up in the declared categories)
  and every family table is one ``bincount`` of the family's combined codes;
* everything else (CSV/Parquet paths, polars and Arrow frames, DuckDB relations, database
  tables, Spark, contribution-bounded tables) by GROUP BY in the engine that holds the
  data (``dpbayes.data.open_table(data).value_counts_joint``); only counts reach Python.

Both match a value to a category with :func:`category_index` (Python equality, booleans
as 0/1, NULL and NaN missing) and, on bad data, raise the error of the first bad value in
the engine's order (families in node order; within a family the GROUP BY keys in ascending
order, NULL last). Columns of a type the numpy path does not code the way the engine does
(categorical, datetime, nullable extension and mixed object columns) go to the engine.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from dpbayes.models.bayes_net_posterior import BayesNetStatistics

if TYPE_CHECKING:
    from dpbayes.models.bayes_net import BayesNet

__all__ = ["category_index", "family_counts", "in_memory_columns"]

_UNKNOWN, _MISSING = -1, -2
_DENSE_RANGE = 1 << 16  # integer columns spanning at most this many values are coded by offset


def category_index(model: BayesNet, name: str, value: Any) -> int:
    """Position of ``value`` among the categories of ``name``; ValueError if NULL or undeclared."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        raise ValueError(f"data column {name!r} contains missing values")
    value = int(value) if isinstance(value, bool | np.bool_) else value
    try:
        return model.variables[name].index(value)
    except ValueError:
        raise ValueError(  # the value itself is data: the message does not quote it
            f"data column {name!r} has a value that is not a category; "
            f"the model declares {list(model.variables[name])}"
        ) from None


def family_counts(model: BayesNet, data: Any) -> BayesNetStatistics:
    """The family count tables of ``data`` for ``model`` (numpy or the engine, see above)."""
    columns = in_memory_columns(model, data)
    if columns is not None:
        return _array_counts(model, columns)
    if isinstance(data, Mapping):
        return _encoded_counts(model, data)
    return _engine_counts(model, data)


# ------------------------------------------------------------------------ in-memory data


def _pandas_frame(data: Any) -> bool:
    pd = sys.modules.get("pandas")  # not imported: data cannot be a pandas frame
    return pd is not None and isinstance(data, pd.DataFrame)


def _plain_dtype(dtype: Any) -> bool:
    """A numpy dtype, or pandas' string dtype (the engine reads both as plain values)."""
    import pandas as pd

    return isinstance(dtype, np.dtype | pd.StringDtype)


def _codable(values: np.ndarray) -> bool:
    """Whether the numpy path codes this column exactly as the engine path does."""
    kind = values.dtype.kind
    if kind in "biu" or kind == "U" or (kind == "f" and values.dtype.itemsize in (4, 8)):
        return True
    if kind != "O":
        return False
    from pandas.api.types import infer_dtype

    return bool(infer_dtype(values, skipna=True) == "string")  # str values and NULLs only


def in_memory_columns(model: BayesNet, data: Any) -> dict[str, np.ndarray] | None:
    """The model's columns of in-memory ``data`` as 1-d arrays, or None for the engine path.

    None for anything but a pandas DataFrame or a mapping of columns, for frames the engine
    reads differently (no rows or columns, non-string or repeated column names) and when a
    model column's type is not one :func:`_codable` accepts.
    """
    if _pandas_frame(data):
        names = list(data.columns)
        if (
            not names
            or len(data) == 0
            or not all(isinstance(c, str) for c in names)
            or len(set(names)) != len(names)
        ):
            return None
        present = [c for c in model.nodes if c in data.columns]
        if not all(_plain_dtype(data[c].dtype) for c in present):
            return None  # other extension dtypes (categorical, nullable, Arrow): the engine
        arrays = {c: data[c].to_numpy() for c in present}
    elif isinstance(data, Mapping):
        arrays = {}
        sizes = set()
        for key, value in data.items():
            arr = np.asarray(value)
            if arr.ndim != 1:
                raise ValueError(f"data[{key!r}] must be one-dimensional, got shape {arr.shape}")
            sizes.add(arr.shape[0])
            if key in model.variables:
                arrays[key] = arr
        if len(sizes) > 1:
            raise ValueError(f"data columns must have the same length, got {sorted(sizes)}")
    else:
        return None
    return arrays if all(_codable(a) for a in arrays.values()) else None


def _present_codes(
    model: BayesNet, name: str, codes: np.ndarray, uniques: Any, size: int
) -> np.ndarray:
    """Category index per row from codes into ``uniques``; only values present are looked up."""
    present = np.flatnonzero(np.bincount(codes, minlength=size))
    lut = np.full(size, _UNKNOWN, dtype=np.int64)
    for i in present.tolist():
        try:
            lut[i] = category_index(model, name, uniques(i))
        except ValueError:
            pass  # the error is raised in the engine's order by _raise_first_error
    return lut[codes]


def _column_codes(model: BayesNet, name: str, values: np.ndarray) -> np.ndarray:
    """Category index of every row; -1 for an undeclared value, -2 for a missing one."""
    kind = values.dtype.kind
    if kind == "b":
        return _present_codes(model, name, values.astype(np.int64), lambda i: bool(i), 2)
    if kind in "iuf" and values.size:
        if kind == "f":
            with np.errstate(invalid="ignore"):
                whole = values.astype(np.int64)
            integral = bool(np.array_equal(whole, values))
        else:
            integral = kind == "i" or values.dtype.itemsize < 8 or values.max() < 2**63
            whole = values.astype(np.int64) if integral else values
        if integral:
            lo, hi = int(whole.min()), int(whole.max())
            if hi - lo < _DENSE_RANGE:
                as_value = float if kind == "f" else int
                return _present_codes(
                    model, name, whole - lo, lambda i: as_value(lo + i), hi - lo + 1
                )
    if kind == "O":
        import pandas as pd

        codes, uniq = pd.factorize(values, use_na_sentinel=True)
        missing = codes < 0
        uniques = np.asarray(uniq, dtype=object)
    else:
        missing = np.isnan(values) if kind == "f" else np.zeros(values.shape, dtype=bool)
        uniques, codes = np.unique(values, return_inverse=True)
    values_of = uniques.tolist()  # Python scalars, as the engine returns them
    safe = np.where(missing, 0, codes).astype(np.int64)
    out = _present_codes(model, name, safe, values_of.__getitem__, max(len(values_of), 1))
    out[missing] = _MISSING
    return out


def _python_values(values: np.ndarray) -> list[Any]:
    """Row values as the engine returns them: Python scalars, NULL and NaN as None."""
    out = values.tolist()
    if values.dtype.kind in "fO":
        import pandas as pd

        na = pd.isna(values)
        out = [None if m else v for v, m in zip(out, na.tolist(), strict=True)]
    return out


def _raise_first_error(model: BayesNet, family: tuple[str, ...], columns: dict[str, Any]) -> None:
    """Raise the engine path's error: the first bad value in GROUP BY key order, NULL last."""
    keys = set(zip(*(_python_values(columns[c]) for c in family), strict=True))
    for key in sorted(keys, key=lambda k: tuple((v is None, v) for v in k)):
        for name, value in zip(family, key, strict=True):
            category_index(model, name, value)
    raise AssertionError("a family marked bad has no bad value")  # pragma: no cover


def _array_counts(model: BayesNet, columns: dict[str, np.ndarray]) -> BayesNetStatistics:
    codes: dict[str, np.ndarray] = {}
    counts: dict[str, np.ndarray] = {}
    n = next(iter(columns.values())).shape[0] if columns else 0
    for v in model.nodes:
        fam = model.family(v)
        missing = [c for c in fam if c not in columns]
        if missing:
            raise ValueError(f"data has no column {missing[0]!r} (model variable)")
        for c in fam:
            if c not in codes:
                codes[c] = _column_codes(model, c, columns[c])
        if any(bool(np.any(codes[c] < 0)) for c in fam):
            _raise_first_error(model, fam, columns)
        shape = model.table_shape(v)
        flat = np.ravel_multi_index(tuple(codes[c] for c in fam), shape)
        counts[v] = np.bincount(flat, minlength=math.prod(shape)).astype(np.int64).reshape(shape)
    return BayesNetStatistics(counts=counts, n=n)


def _encoded_counts(model: BayesNet, data: Mapping[str, Any]) -> BayesNetStatistics:
    """A mapping with columns the numpy path does not code: through ``model.encode``."""
    codes = model.encode(data)
    pos = {v: i for i, v in enumerate(model.nodes)}
    counts = {}
    for v in model.nodes:
        shape = model.table_shape(v)
        flat = np.ravel_multi_index(tuple(codes[:, pos[u]] for u in model.family(v)), shape)
        counts[v] = np.bincount(flat, minlength=math.prod(shape)).reshape(shape)
    return BayesNetStatistics(counts=counts, n=int(codes.shape[0]))


# ------------------------------------------------------------------------ engines


def _engine_counts(model: BayesNet, data: Any) -> BayesNetStatistics:
    """Family tables by GROUP BY in the engine that holds the data.

    Every table goes through ``dpbayes.data.open_table(data).value_counts_joint``: polars
    and Arrow frames (DuckDB scans them in place), CSV/Parquet paths (streamed by DuckDB),
    DuckDB relations, database URLs / SQLAlchemy engines wrapped in
    ``dpbayes.data.Table(url, table=...)``, Spark DataFrames, and tables bounded to k rows
    per user (``Table(data, user_column=..., max_rows_per_user=k)``; the release then
    scales its sensitivity by k). Only the counts reach Python.
    """
    from dpbayes.data import open_table

    table = open_table(data)
    columns = table.columns
    counts: dict[str, np.ndarray] = {}
    n = None
    for v in model.nodes:
        fam = model.family(v)
        missing = [c for c in fam if c not in columns]
        if missing:
            raise ValueError(f"data has no column {missing[0]!r} (model variable)")
        tab = np.zeros(model.table_shape(v), dtype=np.int64)
        for key, cnt in table.value_counts_joint(list(fam), dropna=False).items():
            idx = tuple(category_index(model, c, val) for c, val in zip(fam, key, strict=True))
            tab[idx] += int(cnt)
        counts[v] = tab
        n = int(tab.sum()) if n is None else n
    return BayesNetStatistics(counts=counts, n=n or 0)
