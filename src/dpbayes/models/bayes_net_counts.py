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
order, NULL last).

The path is chosen from public facts only, never from the values: the container (a
pandas DataFrame with string, distinct column names, or a mapping of columns, is counted
in memory; anything else by the engine) and the declared categories. In memory, every
column whose dtype numpy does not code natively (object, categorical, datetime, nullable
and Arrow extension dtypes) is matched as Python objects, so a value is accepted exactly
when it equals a declared category, whatever the other records hold (a column mixing
``0``, ``1`` and ``"unknown"`` is matched value by value; converting it to text first, as
a database column does, would refuse ``1`` against the declared ``1`` in some data sets
and not in others). The engine holds one type per column, so a model whose variable
declares categories of mixed types (numbers and strings, say) is refused on the engine
path before any value is read (:func:`mixed_type_variable`). A CSV file has no column
types (the engine would guess one per column from all the records): its model columns
are read as text and every field is parsed by itself
(:func:`dpbayes.data.text_values.text_value`). A family
table beyond
:data:`MAX_TABLE_CELLS` cells is refused first, from the model alone.
"""

from __future__ import annotations

import math
import numbers
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from dpbayes.models.bayes_net_posterior import BayesNetStatistics

if TYPE_CHECKING:
    from dpbayes.models.bayes_net import BayesNet

__all__ = [
    "MAX_TABLE_CELLS",
    "category_code",
    "category_index",
    "check_table_sizes",
    "column_codes",
    "family_counts",
    "in_memory_column",
    "in_memory_columns",
    "mixed_type_variable",
    "mixed_types",
]

_UNKNOWN, _MISSING = -1, -2
_DENSE_RANGE = 1 << 16  # integer columns spanning at most this many values are coded by offset

#: The most cells one family table (a node and its parents) may have: 2^22, e.g. a binary
#: node with 21 binary parents (a Laplace release of it draws 4 million secure noises, a
#: minute and a half). Beyond it tables soon do not fit in memory: 40 binary parents asked
#: numpy for 16 TiB, 70 exceeded its 64 dimensions.
MAX_TABLE_CELLS = 1 << 22


def _kind(value: Any) -> str:
    """The type group of a category: numbers (bool, int, float, Decimal) compare with
    each other, strings with strings, anything else with its own type."""
    if isinstance(value, str):
        return "str"
    if isinstance(value, bytes):
        return "bytes"
    if isinstance(value, numbers.Number) and not isinstance(value, complex):
        return "number"
    return type(value).__name__


def mixed_types(values: Any) -> bool:
    """Whether ``values`` mix types that do not compare equal (numbers and strings, say)."""
    return len({_kind(v) for v in values}) > 1


def mixed_type_variable(model: BayesNet) -> str | None:
    """The first variable whose declared categories mix types (numbers and strings, say),
    or None: a public fact of the model."""
    for name, cats in model.variables.items():
        if mixed_types(cats):
            return name
    return None


def check_table_sizes(model: BayesNet) -> None:
    """Refuse a family table of more than :data:`MAX_TABLE_CELLS` cells (public facts only)."""
    for v in model.nodes:
        cells = math.prod(model.table_shape(v))
        if cells > MAX_TABLE_CELLS:
            raise ValueError(
                f"the count table of node {v!r} (the node and its {len(model.parents[v])} "
                f"parents) has {cells:.4g} cells, more than {MAX_TABLE_CELLS:,}: "
                "give it fewer parents or categories"
            )


def category_code(categories: Sequence[Any], value: Any) -> int:
    """Position of one record's ``value`` among ``categories`` by Python equality (booleans
    as 0/1), -2 if it is missing (None, NaN, pandas NA/NaT), -1 if it is no category.

    The record's own value alone decides: this is the rule of every path that matches
    values one by one (pandas columns, lists, the engine's GROUP BY keys)."""
    if value is None or type(value).__name__ in ("NAType", "NaTType"):
        return _MISSING
    if isinstance(value, float | np.floating) and math.isnan(value):
        return _MISSING
    if isinstance(value, np.generic):  # a numpy scalar compares as its Python value
        value = value.item()
    value = int(value) if isinstance(value, bool) else value
    try:
        return list(categories).index(value)
    except (ValueError, TypeError):
        return _UNKNOWN


def category_index(model: BayesNet, name: str, value: Any) -> int:
    """Position of ``value`` among the categories of ``name``; ValueError if NULL or undeclared."""
    code = category_code(model.variables[name], value)
    if code == _MISSING:
        raise ValueError(f"data column {name!r} contains missing values")
    if code == _UNKNOWN:
        raise ValueError(  # the value itself is data: the message does not quote it
            f"data column {name!r} has a value that is not a category; "
            f"the model declares {list(model.variables[name])}"
        )
    return code


def family_counts(model: BayesNet, data: Any) -> BayesNetStatistics:
    """The family count tables of ``data`` for ``model`` (numpy or the engine, see above)."""
    check_table_sizes(model)
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


def _codable(values: np.ndarray) -> bool:
    """Whether numpy codes this column (its dtype alone decides, never its values)."""
    kind = values.dtype.kind
    return kind in "biuUO" or (kind == "f" and values.dtype.itemsize in (4, 8))


def _frame_column(column: Any) -> np.ndarray:
    """A pandas column as numpy values: its own array for a numpy dtype numpy codes,
    else its values as Python objects (categorical, datetime, nullable and Arrow
    extension dtypes), matched against the categories by Python equality."""
    if isinstance(column.dtype, np.dtype):
        values = column.to_numpy()
        if _codable(values):
            return np.asarray(values)
    return np.asarray(column.to_numpy(dtype=object), dtype=object)


def _mapping_column(value: Any) -> np.ndarray:
    """A mapping's column as a numpy array. A list mixing numbers and strings is kept as
    Python objects: numpy would turn it into text, and ``"1"`` is not the category ``1``."""
    arr = np.asarray(value)
    if arr.dtype.kind in "US" and not isinstance(value, np.ndarray):
        arr = np.asarray(value, dtype=object)
    return arr


def _list_column(data: list[Any] | tuple[Any, ...], label: str) -> np.ndarray:
    """A list's values as a 1-d array: typed when every value is of one numpy-native kind
    (bools; strings; ints and floats, whose float64 rounding never reaches a category),
    else its values as Python objects, matched one by one (numpy would turn a list of
    numbers and strings into text, and ``"1"`` is not the category ``1``)."""
    types = set(map(type, data))
    if types and (
        types <= {bool, np.bool_} or types <= {str} or types <= {int, float, np.int64, np.float64}
    ):
        try:
            arr = np.asarray(data)
        except (OverflowError, ValueError):
            arr = None
        if arr is not None and arr.ndim == 1 and arr.dtype.kind in "biufU":
            return arr
    out = np.empty(len(data), dtype=object)
    try:
        out[:] = data
    except ValueError:
        raise ValueError(f"{label} must be 1-dimensional (a flat list of values)") from None
    return out


def in_memory_column(data: Any, column: str | None) -> tuple[np.ndarray, str] | None:
    """One column of in-memory ``data`` as a 1-d array and its description, or None.

    A pandas Series (``column`` None), the string-named ``column`` of a pandas DataFrame
    with string, distinct column names, a list or tuple, or a 1-d numpy array of numbers,
    booleans, strings or objects: counted in Python, value by value
    (:func:`column_codes`), so a record's category never depends on the other records.
    None for anything else (read by the engine): public facts of the container only.
    """
    if sys.modules.get("pandas") is not None:
        import pandas as pd

        if isinstance(data, pd.Series) and column is None:
            label = f"series {data.name!r}" if data.name is not None else "series"
            return _frame_column(data), label
        if _pandas_frame(data) and isinstance(column, str):
            names = list(data.columns)
            if all(isinstance(c, str) for c in names) and len(set(names)) == len(names):
                if column in names:
                    return _frame_column(data[column]), f"column {column!r} of DataFrame"
            return None
    if column is not None:
        return None
    if isinstance(data, list | tuple):
        label = type(data).__name__
        return _list_column(data, label), label
    if isinstance(data, np.ndarray) and data.ndim == 1 and data.dtype.kind in "biufUO":
        return data, "array"
    return None


def in_memory_columns(model: BayesNet, data: Any) -> dict[str, np.ndarray] | None:
    """The model's columns of in-memory ``data`` as 1-d arrays, or None for the engine path.

    None for anything but a pandas DataFrame or a mapping of columns, and for frames the
    engine reads differently (no columns, non-string or repeated column names): public
    facts of the container, never the values. A frame's columns of other dtypes come as
    Python objects (:func:`_frame_column`); a mapping's columns numpy does not code (bytes,
    datetime, complex) return None here and are coded by ``model.encode``.
    """
    if _pandas_frame(data):
        names = list(data.columns)
        if not names or not all(isinstance(c, str) for c in names) or len(set(names)) != len(names):
            return None
        return {c: _frame_column(data[c]) for c in model.nodes if c in data.columns}
    elif isinstance(data, Mapping):
        arrays = {}
        sizes = set()
        for key, value in data.items():
            arr = _mapping_column(value)
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
    categories: Sequence[Any], codes: np.ndarray, uniques: Any, size: int
) -> np.ndarray:
    """Category index per row from codes into ``uniques``; only values present are looked up."""
    present = np.flatnonzero(np.bincount(codes, minlength=size))
    lut = np.full(size, _UNKNOWN, dtype=np.int64)
    for i in present.tolist():
        lut[i] = category_code(categories, uniques(i))
    return lut[codes]


def column_codes(categories: Sequence[Any], values: np.ndarray) -> np.ndarray:
    """Category index of every row of a 1-d column (:func:`category_code` of each value):
    -1 for an undeclared value, -2 for a missing one. A column of Python objects is
    matched value by value, so a record's code never depends on the other records.
    Raises TypeError for an unhashable value (a list, a dict: never a category)."""
    kind = values.dtype.kind
    if kind == "b":
        return _present_codes(categories, values.astype(np.int64), lambda i: bool(i), 2)
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
                    categories, whole - lo, lambda i: as_value(lo + i), hi - lo + 1
                )
    if kind == "O":
        import pandas as pd

        codes, uniq = pd.factorize(values, use_na_sentinel=True)  # TypeError: unhashable
        missing = codes < 0
        uniques = np.asarray(uniq, dtype=object)
    else:
        missing = np.isnan(values) if kind == "f" else np.zeros(values.shape, dtype=bool)
        uniques, codes = np.unique(values, return_inverse=True)
    values_of = uniques.tolist()  # Python scalars, as the engine returns them
    safe = np.where(missing, 0, codes).astype(np.int64)
    out = _present_codes(categories, safe, values_of.__getitem__, max(len(values_of), 1))
    out[missing] = _MISSING
    return out


def _column_codes(model: BayesNet, name: str, values: np.ndarray) -> np.ndarray:
    """Category index of every row of the model's column ``name`` (:func:`column_codes`)."""
    try:
        return column_codes(model.variables[name], values)
    except TypeError:  # an unhashable value (a list, a dict): never a category
        raise ValueError(
            f"data column {name!r} has a value that is not a category; "
            f"the model declares {list(model.variables[name])}"
        ) from None


def _python_values(values: np.ndarray) -> list[Any]:
    """Row values as the engine returns them: Python scalars, NULL and NaN as None."""
    out = values.tolist()
    if values.dtype.kind in "fO":
        import pandas as pd

        na = pd.isna(values)
        out = [None if m else v for v, m in zip(out, na.tolist(), strict=True)]
    return out


def _key_order(key: tuple[Any, ...]) -> tuple[Any, ...]:
    """GROUP BY order of a key: ascending values, NULL last; an object column mixing
    types sorts its numbers, strings, ... apart (they do not compare with each other)."""
    return tuple((True, "", 0) if v is None else (False, _kind(v), v) for v in key)


def _raise_first_error(model: BayesNet, family: tuple[str, ...], columns: dict[str, Any]) -> None:
    """Raise the engine path's error: the first bad value in GROUP BY key order, NULL last."""
    keys = set(zip(*(_python_values(columns[c]) for c in family), strict=True))
    try:
        ordered = sorted(keys, key=_key_order)
    except TypeError:  # values of a type without an order (complex): by their text
        ordered = sorted(keys, key=lambda k: _key_order(tuple(map(repr, k))))
    for key in ordered:
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
    from dpbayes.data.readers import guesses_types
    from dpbayes.data.text_values import text_value

    mixed = mixed_type_variable(model)
    if mixed is not None:  # public: the model and the kind of container, not the values
        raise ValueError(
            f"variable {mixed!r} declares categories of mixed types "
            f"{list(model.variables[mixed])}, which a table read by the engine (one type "
            "per column) cannot match faithfully: declare categories of one type, or pass "
            "a pandas DataFrame or a mapping of columns"
        )
    # a CSV file's columns are read as the file's text: the engine would read a column
    # as numbers when no record holds a letter (or as booleans when every record spells
    # true/false), a type chosen by all the records. Text categories match the text; a
    # text value of another variable (a CSV field, a text column, a frame's object
    # column read as text) is parsed by itself (data.text_values.text_value).
    csv = guesses_types(data)
    parsed = {v for v in model.nodes if not all(isinstance(c, str) for c in model.variables[v])}
    table = open_table(data, text_columns=list(model.nodes) if csv else [])
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
            idx = tuple(
                category_index(
                    model, c, text_value(val) if c in parsed and isinstance(val, str) else val
                )
                for c, val in zip(fam, key, strict=True)
            )
            tab[idx] += int(cnt)
        counts[v] = tab
        n = int(tab.sum()) if n is None else n
    return BayesNetStatistics(counts=counts, n=n or 0)
