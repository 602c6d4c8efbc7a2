"""Shared test data for the engine tests and a Python reference of contribution bounding."""

from __future__ import annotations

import hashlib
import math
from typing import Any

import numpy as np
import pandas as pd

from dpbayes.data.contributions import row_key_text

# clamping bounds: ordinary, and wide enough that +-1e300 cancel (a test of exact sums)
BOUNDS = [(-1.25, 2.5), (-1e301, 1e301)]
EXTREMES = [1e300, -1e300, 5e-324, 1e-310, 3.0, -2.5, 1e16, 1.0, 0.1, -0.3]


def engine_frame(n: int = 600, seed: int = 5) -> pd.DataFrame:
    """Users with 1..8 rows; ints, bools, strings, floats with NULL/NaN, extreme floats.

    Some rows of a user repeat every non-float column (ties of the row digest), so the
    float tie-breakers of bounding are exercised too.
    """
    rng = np.random.default_rng(seed)
    users = np.repeat(np.arange(n // 4), rng.integers(1, 9, n // 4))[:n]
    m = users.size
    k = pd.array(rng.integers(0, 7, m), dtype="Int64")
    k[rng.random(m) < 0.03] = pd.NA
    x = np.round(rng.standard_normal(m) * 1.7 + 0.3, 3) + rng.standard_normal(m) * 1e-9
    x[rng.random(m) < 0.05] = np.nan
    ties = rng.random(m) < 0.2  # copy the previous row's non-float columns
    frame = pd.DataFrame(
        {
            "user": users.astype(np.int64),
            "k": k,
            "b": rng.random(m) < 0.3,
            "s": rng.choice(["red", "green", "blue"], m),
            "x": x,
            "e": np.resize(np.array(EXTREMES), m) * np.where(rng.random(m) < 0.5, 1, -1),
        }
    )
    for i in np.flatnonzero(ties):
        if i > 0 and users[i] == users[i - 1]:
            frame.loc[i, ["k", "b", "s"]] = frame.loc[i - 1, ["k", "b", "s"]].to_numpy()
    return frame


def _py(v: Any) -> Any:
    if v is None or v is pd.NA:
        return None
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float) and math.isnan(v):
        return None
    return v


def _sort_key(v: Any, raw: Any) -> tuple:
    """NULLS LAST, NaN above every number (the engines' order)."""
    if raw is None or raw is pd.NA:
        return (2, 0)
    if isinstance(raw, float | np.floating) and math.isnan(raw):
        return (1, 0)
    return (0, v)


def reference_bounded(frame: pd.DataFrame, user: str, k: int, hashed: list[str]) -> pd.DataFrame:
    """Python twin of ``bound_contributions``: per user the k rows with the smallest
    md5(row text), ties broken by the row's values (NULLS LAST); rows whose user is NULL
    dropped."""
    keep: list[int] = []
    cols = list(frame.columns)
    floats = [frame[c].dtype.kind == "f" for c in hashed]
    records = frame.astype(object).to_dict("index")
    by_user: dict[Any, list[int]] = {}
    for i, rec in records.items():
        if _py(rec[user]) is not None:  # rows without a user belong to no one: dropped
            by_user.setdefault(_py(rec[user]), []).append(i)
    for rows in by_user.values():

        def order(i: int) -> tuple:
            rec = records[i]
            text = row_key_text([_py(rec[c]) for c in hashed], floats)
            digest = hashlib.md5(text.encode()).hexdigest()
            return (digest, *(_sort_key(_py(rec[c]), rec[c]) for c in cols))

        keep.extend(sorted(rows, key=order)[:k])
    return frame.loc[sorted(keep)].reset_index(drop=True)
