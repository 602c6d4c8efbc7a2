"""The count cube: a table's counts over nominal or binned attributes (paper 000 §2.4.1).

Each cell counts the records with one combination of attribute values; the cells,
flattened in C order, form the vector x that linear queries read. The domains (the
categories, the bin edges) must be given by the user: taken from the data they would
reveal which values occur. Records whose value lies outside the domain, or is NULL, are
in no cell.

The counts are the true, non-private data; the engine reads them only to compute a
query's true answer before adding noise.

User level: when a person may have several records, :meth:`Cube.from_table` with
``user_column`` and ``max_rows_per_user=k`` (or a table already bounded by
``dpbayes.data``) keeps at most k records per person, in the engine, before counting.
One person then changes at most k records, so ||x - x'||_1 <= k and a query's L1
sensitivity is k max_j |H_j| (Lemma 2.1 and group privacy); ``rows_per_user_bound``
tells the query engine to scale by k and to state the guarantee per user.

A record's cell depends on its own value only (Lemma 2.1 needs one record to change one
cell by one). Typed columns (Parquet, databases, typed frame columns: a public schema)
are compared exactly. Text values are matched by one fixed rule that looks at the value
alone (:func:`text_matches`), because a container whose types are guessed from the values
would let one record change every other record's cell: a CSV file's column is read as
the file's text (one record holding ``maybe`` would otherwise turn a column of booleans
into text), and a pandas ``object`` column is mapped to cells value by value in Python
(DuckDB would type it from a sample of its values).
"""

from __future__ import annotations

import math
import numbers
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpbayes.answers.queries import Query, make_query
from dpbayes.privacy.validation import check_array, check_int

__all__ = ["Axis", "Bins", "Cube", "text_matches"]


def text_matches(category: Any, text: str) -> bool:
    """Whether the text value ``text`` of a record is the category ``category``, by the
    one rule for text fields (:func:`dpbayes.data.text_values.text_value`), applied to the
    value alone: a text category matches the same text exactly; any other category the
    value the text denotes, by Python equality (``"1"``, ``"1.0"``, ``"01"`` and
    ``"true"`` are all 1, as 1, 1.0 and True are in a typed column)."""
    from dpbayes.data.text_values import text_value  # not at import: the data layer is heavy

    if isinstance(category, str):
        return category == text
    value = text_value(text)
    if isinstance(value, str):
        return False
    try:
        return bool(value == category)
    except (TypeError, ValueError, OverflowError):
        return False


@dataclass(frozen=True)
class Bins:
    """Bins [e_0, e_1), [e_1, e_2), ... of a numeric attribute (data-independent edges).

    The ends may be -inf / inf to catch every value.
    """

    edges: Sequence[float]

    def __post_init__(self) -> None:
        e = check_array(self.edges, "edges", min_size=2, finite=False)
        if np.any(np.isnan(e)):
            raise ValueError("edges must not contain NaN")
        if np.any(np.diff(e) <= 0):
            raise ValueError("edges must be strictly increasing")
        object.__setattr__(self, "edges", tuple(float(x) for x in e))

    @property
    def labels(self) -> tuple[str, ...]:
        def f(x: float) -> str:
            return f"{x:g}"

        return tuple(
            f"[{f(a)}, {f(b)})" for a, b in zip(self.edges[:-1], self.edges[1:], strict=True)
        )

    def index(self, value: float | str) -> int | None:
        """The bin of ``value``; text (a CSV field, a str in an ``object`` column) is read
        by :func:`parse_number`, so a bin never depends on the other records' values."""
        if isinstance(value, str):
            from dpbayes.data.text_values import parse_number

            parsed = parse_number(value)
            if parsed is None:
                return None
            value = parsed
        if value is None or not isinstance(value, numbers.Real) or math.isnan(float(value)):
            return None
        j = int(np.searchsorted(self.edges, float(value), side="right")) - 1
        return j if 0 <= j < len(self.edges) - 1 else None


def _scalar(v: Any) -> Any:
    if isinstance(v, np.generic):
        return v.item()
    return v


@dataclass(frozen=True)
class Axis:
    """One attribute of the cube: its categories, or its bins."""

    name: str
    values: tuple[Any, ...]
    bins: Bins | None = None

    @property
    def labels(self) -> tuple[str, ...]:
        return self.bins.labels if self.bins is not None else tuple(str(v) for v in self.values)

    @property
    def size(self) -> int:
        return len(self.values)

    def index(self, value: Any) -> int | None:
        """The cell of ``value`` on this axis, or None. Text values are matched by
        :func:`text_matches`; typed values (numbers, bools, ...) exactly."""
        if self.bins is not None:
            return self.bins.index(value)
        value = _scalar(value)
        if isinstance(value, str):
            for j, v in enumerate(self.values):
                if text_matches(v, value):
                    return j
            return None
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return None
        for j, v in enumerate(self.values):
            if isinstance(v, str):
                continue  # a text category matches text only (a typed value never)
            try:
                if v == value or (
                    isinstance(v, numbers.Real)
                    and isinstance(value, numbers.Real)
                    and float(v) == float(value)
                ):
                    return j
            except (TypeError, ValueError, OverflowError):
                continue
        return None

    def coded(self, values: Any) -> Any:
        """Each value's cell (``index``), computed in Python one value at a time, as a
        pandas nullable integer array (NA: in no cell)."""
        import pandas as pd

        memo: dict[tuple[type, Any], int | None] = {}
        out: list[int | None] = []
        for v in values:
            try:
                key = (type(v), v)
                j = memo[key] if key in memo else memo.setdefault(key, self.index(v))
            except TypeError:  # unhashable
                j = self.index(v)
            out.append(j)
        return pd.array(out, dtype="Int64")


def _axis(name: str, spec: Any) -> Axis:
    if not isinstance(name, str) or not name:
        raise TypeError(f"attribute names must be non-empty strings, got {name!r}")
    if isinstance(spec, Bins):
        return Axis(name, spec.labels, spec)
    if isinstance(spec, str) or not isinstance(spec, Sequence | np.ndarray):
        raise TypeError(
            f"attributes[{name!r}] must be a list of categories or Bins(edges), got {spec!r}"
        )
    vals = tuple(_scalar(v) for v in spec)
    if not vals:
        raise ValueError(f"attributes[{name!r}] must list at least one category")
    if len({str(v) for v in vals}) != len(vals):
        raise ValueError(f"attributes[{name!r}] has duplicate categories")
    return Axis(name, vals)


def _code_object_columns(data: Any, axes: Sequence[Axis]) -> tuple[Any, set[str]]:
    """A pandas DataFrame whose axis columns of ``object`` dtype hold each value's cell
    (computed in Python one value at a time), and the names of those columns.

    DuckDB types an ``object`` column from a sample of its values, so one record could
    make every value text (or the cast fail); mapping each value here keeps a record's
    cell a function of its own value. Other data are returned as they are.
    """
    pd = sys.modules.get("pandas")
    if pd is None or not isinstance(data, pd.DataFrame):
        return data, set()
    coded = {}
    for ax in axes:
        if ax.name in data.columns and data[ax.name].dtype == object:
            coded[ax.name] = ax.coded(data[ax.name].tolist())
    if not coded:
        return data, set()
    out = data.copy(deep=False)
    for name, codes in coded.items():
        out[name] = codes
    return out, set(coded)


def _code(value: Any, size: int) -> int | None:
    """The cell of a value coded by :func:`_code_object_columns`."""
    value = _scalar(value)
    if isinstance(value, numbers.Integral) and 0 <= int(value) < size:
        return int(value)
    return None


#: The most cells a cube may have (the product of its domains' sizes): 2^26 cells of
#: counts are 512 MiB, and each answer keeps a row over them. Three attributes of 3000,
#: 3000 and 50 values (4.5e8 cells) ended in a MemoryError traceback.
MAX_CELLS = 2**26


def check_cells(axes: Any) -> None:
    """Refuse a cube of more than :data:`MAX_CELLS` cells, naming the attributes."""
    cells = math.prod(int(ax.size) for ax in axes)
    if cells > MAX_CELLS:
        sizes = " x ".join(f"{ax.name} {ax.size:,}" for ax in axes)
        raise ValueError(
            f"attributes: the cube would have {cells:,} cells ({sizes}); at most "
            f"{MAX_CELLS:,} are supported (coarser bins, or fewer attributes)"
        )


class Cube:
    """Counts of records over the cells of the given attributes' domains (non-private).

    ``rows_per_user_bound``: ``None`` when each person has one record (record level), or
    k when the counts were made from a table with at most k records per person (then
    every query's sensitivity is k times Lemma 2.1's).
    """

    def __init__(
        self,
        axes: Sequence[Axis],
        counts: Any,
        *,
        rows_per_user_bound: int | None = None,
        user_column: str | None = None,
    ) -> None:
        self.axes = tuple(axes)
        # the column that identifies a user (budgets tell user-level units apart by it)
        self.user_column = None if rows_per_user_bound is None else user_column
        self.rows_per_user_bound = (
            None
            if rows_per_user_bound is None
            else check_int(rows_per_user_bound, "rows_per_user_bound", minimum=1)
        )
        check_cells(self.axes)
        c = np.asarray(counts)
        shape = tuple(ax.size for ax in self.axes)
        if c.shape != shape:
            raise ValueError(f"counts must have shape {shape}, got {c.shape}")
        if not np.issubdtype(c.dtype, np.integer) or np.any(c < 0):
            raise ValueError("counts must be non-negative integers")
        self.counts = c.astype(np.int64)
        self.counts.setflags(write=False)

    # ------------------------------------------------------------------ building
    @classmethod
    def from_counts(
        cls,
        attributes: Mapping[str, Any],
        counts: Any,
        *,
        rows_per_user_bound: int | None = None,
    ) -> Cube:
        """A cube from an array of counts (e.g. a published histogram)."""
        return cls(
            [_axis(n, s) for n, s in attributes.items()],
            counts,
            rows_per_user_bound=rows_per_user_bound,
        )

    @classmethod
    def from_table(
        cls,
        data: Any,
        attributes: Mapping[str, Any],
        *,
        table: str | None = None,
        schema: str | None = None,
        user_column: str | None = None,
        max_rows_per_user: int | None = None,
    ) -> Cube:
        """Count the records of ``data`` in the engine that holds them.

        ``data``: a pandas/polars frame, a CSV/Parquet path, a DuckDB relation, a
        database URL or SQLAlchemy engine with ``table`` (and ``schema``), a Spark
        DataFrame, or a ``dpbayes.data.Table`` (see ``dpbayes.data.open_table``).
        ``attributes`` maps each column to its domain: a list of categories, or
        ``Bins(edges)`` for a numeric column. The contingency table is computed by a
        GROUP BY in the engine, then mapped onto the cells.

        ``user_column`` + ``max_rows_per_user=k``: keep at most k records per person,
        chosen in the engine (``dpbayes.data.contributions``), before counting; the
        cube's ``rows_per_user_bound`` is then k (also when ``data`` is a table already
        bounded so).
        """
        if not isinstance(attributes, Mapping) or not attributes:
            raise ValueError("attributes must map at least one column to its domain")
        axes = [_axis(n, s) for n, s in attributes.items()]
        check_cells(axes)
        from dpbayes.data import open_table
        from dpbayes.data.readers import guesses_types

        # A CSV file has no types: the engine would guess each column's type from every
        # record's value, so one record could change every other record's cell. Every
        # axis is read as the file's text and matched value by value (text_matches).
        text_columns = [ax.name for ax in axes] if guesses_types(data) else []
        data, coded = _code_object_columns(data, axes)
        table_ = open_table(
            data,
            table=table,
            schema=schema,
            user_column=user_column,
            max_rows_per_user=max_rows_per_user,
            text_columns=text_columns,
        )
        joint = table_.value_counts_joint([ax.name for ax in axes])
        counts = np.zeros(tuple(ax.size for ax in axes), dtype=np.int64)
        for key, n in joint.items():
            idx = []
            for ax, v in zip(axes, key, strict=True):
                j = _code(v, ax.size) if ax.name in coded else ax.index(v)
                if j is None:
                    break
                idx.append(j)
            else:
                counts[tuple(idx)] += int(n)
        return cls(
            axes,
            counts,
            rows_per_user_bound=table_.rows_per_user_bound,
            user_column=getattr(table_, "user_column", None),
        )

    # ------------------------------------------------------------------ shape
    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(ax.size for ax in self.axes)

    @property
    def n_cells(self) -> int:
        return int(np.prod(self.shape))

    @property
    def names(self) -> list[str]:
        return [ax.name for ax in self.axes]

    def axis(self, name: str) -> Axis:
        for ax in self.axes:
            if ax.name == name:
                return ax
        raise ValueError(f"unknown attribute {name!r}; the cube has {self.names}")

    def cell_vector(self) -> np.ndarray:
        """x: the counts flattened in C order (non-private)."""
        return self.counts.ravel()

    def cell_labels(self) -> list[str]:
        """One label per cell, e.g. ``health=good|mdvis=[0, 1)`` (used as budget scopes)."""
        grids = np.indices(self.shape).reshape(len(self.axes), -1).T
        return [
            "|".join(f"{ax.name}={ax.labels[j]}" for ax, j in zip(self.axes, row, strict=True))
            for row in grids
        ]

    # ------------------------------------------------------------------ queries
    def query(self, where: str = "", **kwargs: Any) -> Query:
        """A linear query from a predicate (see :mod:`dpbayes.answers.queries`)."""
        return make_query(self, where, **kwargs)

    def true_answer(self, query: Query | Any) -> float:
        """The exact (non-private) answer H x; never shown to users by the engine."""
        q = query.coefficients if isinstance(query, Query) else np.asarray(query, dtype=float)
        return float(q @ self.cell_vector())

    def __repr__(self) -> str:
        dims = ", ".join(f"{ax.name}:{ax.size}" for ax in self.axes)
        user = "" if self.rows_per_user_bound is None else f"; <= {self.rows_per_user_bound}/user"
        return f"Cube({dims}; {self.n_cells} cells{user})"
