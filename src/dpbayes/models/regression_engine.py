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
from dpbayes.models.linear_regression import COORDINATE_CAP, check_ball_radius

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
    for name, radius in (("feature_bound", feature_bound), ("norm_bound", norm_bound)):
        if radius is not None and (clip == "ball" or name == "norm_bound"):
            check_ball_radius(radius, name)
    table = open_table(data)
    cols = [table.check_column(c) for c in [*features, target]]
    kinds = table.column_types()
    for c in cols:  # the columns' types are the schema's, a public fact
        if kinds[c] not in ("numeric", "bool"):
            raise ValueError(
                f"column {c!r} is not numeric in the database (a regression reads numbers; "
                "give the column a numeric type, or read the file with its types)"
            )
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
    present = " AND ".join(table.not_null(c) for c in cols)  # numeric columns (above)
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


def _into_ball(table: Any, xs: list[str], radius: float) -> list[str]:
    """SQL: the row ``xs`` scaled into the ball of ``radius`` (unchanged inside it).

    Written so that no engine raises on any row: PostgreSQL raises where an IEEE result
    overflows or rounds to exactly 0 from nonzero operands, so an error would depend on
    one record (an all-zero row divided by a floor of 1e-300 at radius 1e9; a subnormal
    coordinate times a scale below 1; b / norm at radius 1e-200 under a norm of 1e150).
    Outside the ball (norm > b) a coordinate is 0 if |x| < 2^-26 norm, else (x / norm) b:
    x / norm is in [2^-26, 1], so it neither overflows nor underflows, nor does the
    product for b >= 1e-140 (``MIN_BALL_RADIUS``, checked before any query), nor
    2^-26 norm. The zeroed coordinates are those whose scaled value is below 2^-26 b, at
    most the public grid's step 2^(ceil(log2 b) - 26): they give 0 on the grid either way.
    Off the grid, setting them to 0 is a map of each record alone that only shrinks it,
    so the record stays in its box and ball and the sensitivities hold.
    """
    norm = "SQRT(" + " + ".join(table.square(x) for x in xs) + ")"
    b = table.double_literal(radius)
    t = table.double_literal(2.0**-26)
    zero = table.double_literal(0.0)
    return [
        f"(CASE WHEN {norm} <= {b} THEN {x} WHEN abs({x}) < ({norm}) * {t} THEN {zero} "
        f"ELSE (({x}) / ({norm})) * {b} END)"
        for x in xs
    ]
