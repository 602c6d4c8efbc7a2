"""Linear queries over a count cube: coefficient vectors and predicates over attributes.

Paper 000 §2.4.2 (Definition 2.6): a linear query is a coefficient vector H_i over the cells;
its answer is H_i x. Lemma 2.1: adding or removing one record changes one cell by one, so
the sensitivity is max_j |H_ij|.

Predicates (``where``) are conjunctions of clauses joined by ``and``::

    age in [30, 50) and smoker = yes
    health in {good, fair}
    mdvis >= 2 and idp != 1

Operators: ``=``/``==``, ``!=``, ``<``, ``<=``, ``>``, ``>=``, ``in {a, b}`` (a set),
``not in {a, b}``, ``in [lo, hi)`` (an interval; any of ``[ ( ] )``). On a binned attribute a
numeric condition selects the bins that lie inside it and is refused if it cuts a bin
(the cube cannot answer it exactly). Values may be quoted ('a b') or bare words.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from dpbayes.answers.blue import check_coefficients, query_sensitivity
from dpbayes.privacy.validation import check_finite

if TYPE_CHECKING:
    from dpbayes.answers.cube import Axis, Cube

__all__ = ["Query", "make_query", "predicate_mask"]


@dataclass(frozen=True)
class Query:
    """A linear query: coefficients over the cube's cells (Definition 2.6).

    Queries add and scale: ``2 * cube.query("income = 10-20K") + cube.query(...)``.
    """

    coefficients: np.ndarray
    text: str = ""
    meta: dict[str, Any] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        q = np.asarray(self.coefficients, dtype=float)
        q.setflags(write=False)
        object.__setattr__(self, "coefficients", q)

    @property
    def n_cells(self) -> int:
        return int(self.coefficients.size)

    @property
    def sensitivity(self) -> float:
        """Lemma 2.1, add/remove one record: max_j |coefficient_j|."""
        return query_sensitivity(self.coefficients)

    @property
    def cells(self) -> np.ndarray:
        """Indices of the cells the query reads (non-zero coefficients)."""
        return np.flatnonzero(self.coefficients)

    def check(self, n_cells: int) -> Query:
        check_coefficients(self.coefficients, n_cells, "query")
        return self

    def __add__(self, other: Query) -> Query:
        if not isinstance(other, Query):
            return NotImplemented
        if other.n_cells != self.n_cells:
            raise ValueError(f"queries have {self.n_cells} and {other.n_cells} cells")
        return Query(self.coefficients + other.coefficients, f"({self.text}) + ({other.text})")

    def __sub__(self, other: Query) -> Query:
        return self + (-1.0) * other

    def __mul__(self, factor: float) -> Query:
        f = check_finite(factor, "factor")
        return Query(self.coefficients * f, f"{f:g} * ({self.text})")

    __rmul__ = __mul__

    def __neg__(self) -> Query:
        return (-1.0) * self

    def __repr__(self) -> str:
        return f"Query({self.text!r}, cells={self.cells.size}, sensitivity={self.sensitivity:g})"


# ---------------------------------------------------------------------- parsing
_TOKEN = re.compile(
    r"""\s*(?:
      (?P<str>'[^']*'|"[^"]*")
    | (?P<op><=|>=|!=|==|=|<|>)
    | (?P<punct>[\[\](){},])
    | (?P<word>[^\s\[\](){},<>=!'"]+)
    )""",
    re.VERBOSE,
)


@dataclass(frozen=True)
class _Clause:
    name: str
    op: str  # = != < <= > >= in notin interval
    values: tuple[Any, ...]
    closed: tuple[bool, bool] = (True, True)


def _tokens(text: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise ValueError(f"where: cannot parse near {text[pos : pos + 20]!r}")
        kind = m.lastgroup
        assert kind is not None
        val = m.group(kind)
        if kind == "str":
            val = val[1:-1]
        out.append((kind, val))
        pos = m.end()
    return out


def _parse(where: str) -> list[_Clause]:
    toks = _tokens(where)
    clauses: list[_Clause] = []
    i = 0

    def expect_value(j: int) -> tuple[Any, int]:
        if j >= len(toks) or toks[j][0] not in ("word", "str"):
            raise ValueError(f"where: expected a value in {where!r}")
        return toks[j][1], j + 1

    while i < len(toks):
        if toks[i][0] != "word":
            raise ValueError(f"where: expected an attribute name in {where!r}")
        name = toks[i][1]
        i += 1
        if i >= len(toks):
            raise ValueError(f"where: incomplete condition on {name!r}")
        kind, val = toks[i]
        if kind == "op":
            v, i = expect_value(i + 1)
            clauses.append(_Clause(name, "=" if val == "==" else val, (v,)))
        elif kind == "word" and val.lower() in ("in", "not"):
            negate = val.lower() == "not"
            if negate:
                if i + 1 >= len(toks) or toks[i + 1][1].lower() != "in":
                    raise ValueError(f"where: expected 'not in' after {name!r}")
                i += 1
            i += 1
            if i >= len(toks) or toks[i][0] != "punct" or toks[i][1] not in "[({":
                raise ValueError("where: expected a set {...} or interval [..) after 'in'")
            opener = toks[i][1]
            items: list[Any] = []
            i += 1
            while True:
                v, i = expect_value(i)
                items.append(v)
                if i >= len(toks) or toks[i][0] != "punct":
                    raise ValueError(f"where: unclosed set or interval in {where!r}")
                if toks[i][1] == ",":
                    i += 1
                    continue
                closer = toks[i][1]
                i += 1
                break
            if opener == "{" or closer == "}":
                if opener != "{" or closer != "}":
                    raise ValueError(f"where: mismatched braces in {where!r}")
                clauses.append(_Clause(name, "notin" if negate else "in", tuple(items)))
            elif len(items) == 2 and not negate and closer in ")]":
                clauses.append(
                    _Clause(name, "interval", tuple(items), (opener == "[", closer == "]"))
                )
            elif opener == "(" and closer == ")":
                clauses.append(_Clause(name, "notin" if negate else "in", tuple(items)))
            else:
                raise ValueError(
                    f"where: an interval needs exactly two bounds, e.g. {name} in [30, 50)"
                )
        else:
            raise ValueError(f"where: expected an operator after {name!r}, got {val!r}")
        if i < len(toks):
            if toks[i][0] == "word" and toks[i][1].lower() == "and":
                i += 1
                if i >= len(toks):
                    raise ValueError("where: dangling 'and'")
            elif toks[i][0] == "word" and toks[i][1].lower() == "or":
                raise ValueError(
                    "where: 'or' is not supported; write one query per alternative and add "
                    "them (queries on disjoint cells add exactly)"
                )
            else:
                raise ValueError(f"where: expected 'and' before {toks[i][1]!r}")
    return clauses


def _number(v: Any, name: str) -> float:
    if isinstance(v, str) and not v.isascii():  # float() reads any script's digits
        raise ValueError(f"where: {name} needs a number in ASCII digits, got {v!r}")
    try:
        x = float(v)
    except (TypeError, ValueError):
        raise ValueError(f"where: {name} needs a number, got {v!r}") from None
    if math.isnan(x):
        raise ValueError(f"where: {name} needs a number, got NaN")
    return x


def _interval_of(clause: _Clause) -> tuple[float, float, bool, bool]:
    """The clause as an interval (lo, hi, lo_closed, hi_closed) on the real line."""
    n = clause.name
    if clause.op == "interval":
        lo, hi = (_number(v, n) for v in clause.values)
        if lo > hi:
            raise ValueError(f"where: interval on {n!r} has lower > upper")
        return lo, hi, clause.closed[0], clause.closed[1]
    v = _number(clause.values[0], n)
    inf = math.inf
    return {
        "<": (-inf, v, False, False),
        "<=": (-inf, v, False, True),
        ">": (v, inf, False, False),
        ">=": (v, inf, True, False),
        "=": (v, v, True, True),
    }[clause.op]


def _axis_mask(axis: Axis, clause: _Clause) -> np.ndarray:
    """Which of the axis's values (categories or bins) satisfy the clause."""
    if axis.bins is None:
        labels = [str(v) for v in axis.values]
        if clause.op in ("=", "!=", "in", "notin"):
            want = {str(v) for v in clause.values}
            numeric = all(isinstance(v, int | float) for v in axis.values)
            if numeric:
                nums = {_number(v, clause.name) for v in clause.values}
                known = {float(v) for v in axis.values}
                unknown = sorted(str(v) for v in clause.values if _number(v, "") not in known)
                hit = np.array([float(v) in nums for v in axis.values])
            else:
                unknown = sorted(want - set(labels))
                hit = np.array([lab in want for lab in labels])
            if unknown:
                raise ValueError(f"where: {unknown} not in the domain of {clause.name!r}: {labels}")
            return ~hit if clause.op in ("!=", "notin") else hit
        if not all(isinstance(v, int | float) for v in axis.values):
            raise ValueError(f"where: {clause.name!r} is categorical; use =, != or in {{...}}")
        lo, hi, lc, hc = _interval_of(clause)
        x = np.array([float(v) for v in axis.values])
        return ((x > lo) | ((x == lo) & lc)) & ((x < hi) | ((x == hi) & hc))
    # binned axis: bins [a, b)
    if clause.op in ("=", "!=", "in", "notin") and all(
        str(v) in axis.labels for v in clause.values
    ):
        want = {str(v) for v in clause.values}
        hit = np.array([lab in want for lab in axis.labels])
        return ~hit if clause.op in ("!=", "notin") else hit
    if clause.op in ("!=", "in", "notin"):
        raise ValueError(
            f"where: on the binned attribute {clause.name!r} use bin labels "
            f"{list(axis.labels)} or a numeric range"
        )
    lo, hi, lc, hc = _interval_of(clause)
    edges = np.asarray(axis.bins.edges)
    a, b = edges[:-1], edges[1:]
    inside = ((a > lo) | ((a == lo) & lc)) & (b <= hi)
    outside = (b <= lo) | (a > hi) | ((a == hi) & (not hc))
    cut = ~(inside | outside)
    if np.any(cut):
        j = int(np.flatnonzero(cut)[0])
        raise ValueError(
            f"where: the condition on {clause.name!r} cuts the bin {axis.labels[j]}; use bin "
            f"edges {list(axis.bins.edges)}"
        )
    return inside


def predicate_mask(cube: Cube, where: str) -> np.ndarray:
    """Boolean array of the cube's shape: the cells whose attribute values satisfy ``where``."""
    if not isinstance(where, str):
        raise TypeError(f"where must be a string, got {type(where).__name__}")
    mask = np.ones(cube.shape, dtype=bool)
    if not where.strip():
        return mask
    names = [ax.name for ax in cube.axes]
    for clause in _parse(where):
        if clause.name not in names:
            raise ValueError(f"where: unknown attribute {clause.name!r}; the cube has {names}")
        k = names.index(clause.name)
        m = _axis_mask(cube.axes[k], clause)
        shape = [1] * len(names)
        shape[k] = m.size
        mask &= m.reshape(shape)
    return mask


def make_query(
    cube: Cube,
    where: str = "",
    *,
    weights: Mapping[str, Mapping[Any, float] | Callable[[Any], float]] | None = None,
    scale: float = 1.0,
) -> Query:
    """The query 'scale * sum over cells satisfying ``where`` of prod of attribute weights'.

    ``weights`` maps an attribute to its per-value weight (a dict keyed by category or bin
    label, or a function of it), e.g. paper 000's tax example weights income groups by the
    tax they pay. Missing keys weigh 0.
    """
    mask = predicate_mask(cube, where).astype(float)
    names = [ax.name for ax in cube.axes]
    for attr, w in (weights or {}).items():
        if attr not in names:
            raise ValueError(f"weights: unknown attribute {attr!r}; the cube has {names}")
        k = names.index(attr)
        ax = cube.axes[k]
        keys = ax.labels if ax.bins is not None else ax.values
        if callable(w):
            vals = [check_finite(w(v), f"weights[{attr!r}]") for v in keys]
        elif isinstance(w, Mapping):
            unknown = {str(x) for x in w} - {str(v) for v in keys}
            if unknown:
                raise ValueError(f"weights[{attr!r}]: unknown values {sorted(unknown)}")
            by_str = {str(x): v for x, v in w.items()}
            vals = [check_finite(by_str.get(str(v), 0.0), f"weights[{attr!r}]") for v in keys]
        else:
            raise TypeError(f"weights[{attr!r}] must be a mapping or a function")
        shape = [1] * len(names)
        shape[k] = len(vals)
        mask = mask * np.asarray(vals).reshape(shape)
    s = check_finite(scale, "scale")
    coef = (mask * s).ravel()
    text = where.strip() or "all records in the domain"
    if weights:
        text += f" weighted by {sorted(weights)}"
    if s != 1.0:
        text = f"{s:g} * ({text})"
    if not np.any(coef):
        raise ValueError(f"query {text!r} selects no cell (empty query)")
    return Query(coef, text)
