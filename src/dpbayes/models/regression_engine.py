"""A regression's sufficient statistics computed in the engine that holds the data.

Files (CSV, Parquet; streamed by DuckDB), polars/Arrow frames, DuckDB relations, databases
(``dpbayes.data.Table(url, table=...)``: PostgreSQL, SQLite, ...), Spark DataFrames and
contribution-bounded tables (``Table(data, user_column=..., max_rows_per_user=k)``) are
reduced by one aggregate query: the bounded features and label are computed per row in
SQL, exactly as the models' ``bounded`` maps do in numpy, and only the sums of their
products (the upper triangle of sum v v', v = (x, y)) reach Python. A 10^7-row table is
fitted without loading it. A row with a missing feature or label is refused (as the numpy
path refuses NaN), with a one-line error that counts such rows.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dpbayes.data.exact import ExactMoments, grid_exponents, on_grid
from dpbayes.models.linear_regression import COORDINATE_CAP

__all__ = ["engine_moments"]


def engine_moments(
    data: Any,
    features: list[str] | None,
    target: str | None,
    *,
    feature_bound: float | None,
    clip: str,
    label: str,
    label_bound: float | None = None,
    norm_bound: float | None = None,
) -> tuple[int, np.ndarray, ExactMoments | None]:
    """(n, S, exact) with S = sum over rows of v v', v = (bounded x, bounded y), in the engine.

    With a feature bound and a label bound (or ``label="sign"``) the coordinates are
    truncated to the public grid and summed exactly as integers (``exact``, an
    :class:`~dpbayes.data.exact.ExactMoments`; S is it rounded once per entry), with box
    clipping the same numbers as the numpy path's (a ball's scaling is each engine's
    floating point); without bounds S is the engine's floating-point sum and
    ``exact`` None.

    ``clip``: ``"box"`` (each feature clipped to [-B, B]) or ``"ball"`` (each row scaled
    into the ball of radius B); ``label``: ``"clip"`` (y clipped to [-label_bound,
    label_bound], or as is when None) or ``"sign"`` (labels in {0, 1} or {-1, +1} mapped
    to -1, +1; any other value is refused); ``norm_bound``: after the clip, each row of
    features scaled into the ball of that radius (None: not).
    """
    from dpbayes.data import open_table

    if features is None or target is None:
        raise ValueError("features and target must be set to read a table")
    table = open_table(data)
    cols = [table.check_column(c) for c in [*features, target]]
    raw = [table.as_double(c) for c in features]
    if feature_bound is None:
        xs = raw
    elif clip == "box":
        b = table.double_literal(float(feature_bound))
        xs = [f"LEAST(GREATEST({r}, -{b}), {b})" for r in raw]
    else:  # +-inf and huge values capped first, so that the norm does not overflow
        cap = table.double_literal(COORDINATE_CAP)
        raw = [f"LEAST(GREATEST({r}, -{cap}), {cap})" for r in raw]
        xs = _into_ball(table, raw, float(feature_bound))
    if norm_bound is not None:
        xs = _into_ball(table, xs, float(norm_bound))
    y = table.as_double(target)
    bad_label = "0"
    if label == "sign":
        bad_label = f"CASE WHEN {y} IN (-1, 0, 1) THEN 0 ELSE 1 END"
        y = f"CASE WHEN {y} > 0 THEN 1.0 ELSE -1.0 END"
    elif label_bound is not None:
        lb = table.double_literal(float(label_bound))
        y = f"LEAST(GREATEST({y}, -{lb}), {lb})"
    # a value is present when it is not NULL and, read as a double, not NaN: a column held
    # as text ('nan') is refused as a missing value too, as it is in memory
    present = " AND ".join(
        f"({table.not_null(c)} AND NOT {table.is_nan(table.as_double(c))})" for c in cols
    )
    m = len(xs) + 1
    y_bound = 1.0 if label == "sign" else label_bound
    exponents = None
    if on_grid([feature_bound, y_bound]):  # exact sums on the public grid
        exponents = grid_exponents([*([feature_bound] * len(xs)), y_bound])
        vs = [table.grid_integer(e, k) for e, k in zip([*xs, y], exponents, strict=True)]
        sums = ", ".join(table.integer_sum(f"v{i} * v{j}") for i in range(m) for j in range(i, m))
    else:
        vs = [*xs, y]
        sums = ", ".join(f"SUM(v{i} * v{j})" for i in range(m) for j in range(i, m))
    inner = ", ".join(f"{e} AS v{i}" for i, e in enumerate(vs)) + f", {bad_label} AS bad"
    sql = (
        f"SELECT COUNT(*), {sums}, SUM(bad) FROM (SELECT {inner} FROM "
        f"{table.relation} WHERE {present}) AS dpb_r"
    )
    missing_sql = f"SELECT COUNT(*) FROM {table.relation} WHERE NOT ({present})"
    missing = int(table.fetch(missing_sql)[0][0] or 0)
    if missing:
        raise ValueError(
            f"data has rows with a missing value in {cols}: drop or impute them first "
            "(a regression reads every feature and the label)"
        )
    row = table.fetch(sql)[0]
    n = int(row[0] or 0)
    if int(row[-1] or 0):
        raise ValueError("y must hold labels in {0, 1} or {-1, +1}")
    if exponents is not None:
        ints = [[0] * m for _ in range(m)]
        k = 1
        for i in range(m):
            for j in range(i, m):
                ints[i][j] = ints[j][i] = int(row[k] or 0)  # Decimal or int: exact
                k += 1
        exact = ExactMoments(ints=tuple(tuple(r) for r in ints), exponents=exponents)
        return n, exact.rounded(), exact
    s = np.zeros((m, m))
    k = 1
    for i in range(m):
        for j in range(i, m):
            s[i, j] = s[j, i] = float(row[k] or 0.0)
            k += 1
    return n, s, None


#: Coordinates below this are 0 before a row is scaled into a ball (``_into_ball``).
_NEGLIGIBLE = 1e-90


def _into_ball(table: Any, xs: list[str], radius: float) -> list[str]:
    """SQL: the row ``xs`` scaled into the ball of ``radius`` (unchanged inside it).

    Written so that no engine raises on any row: PostgreSQL raises where IEEE
    arithmetic overflows or underflows, so an error would depend on one record (an
    all-zero row divided by the old floor of 1e-300 at radius 1e9; a coordinate of 5e-324
    times a scale below 1). The scale b / norm is computed only where norm > b (so it is
    in [1e-213, 1]: b >= 1e-60, norm <= sqrt(m) 1e150), and a coordinate below 1e-90 is
    0 before the product (which is then at least 1e-303, a normal double). Such a
    coordinate gives 0 on the public grid either way (its step is at least 2^-225 at
    b >= 1e-60, and the scaled value is smaller than the coordinate), so the statistics
    are the same numbers as without this map.
    """
    norm = "SQRT(" + " + ".join(table.square(x) for x in xs) + ")"
    b = table.double_literal(radius)
    one, small = table.double_literal(1.0), table.double_literal(_NEGLIGIBLE)
    scale = f"(CASE WHEN {norm} <= {b} THEN {one} ELSE {b} / ({norm}) END)"
    zero = table.double_literal(0.0)
    return [f"(CASE WHEN abs({x}) < {small} THEN {zero} ELSE ({x}) * {scale} END)" for x in xs]
