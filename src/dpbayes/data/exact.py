"""Correctly rounded sums, identical whether computed by numpy or by an SQL engine.

Floating-point addition is not associative, so a sum computed by numpy (pairwise) and
by a parallel SQL engine (in whatever order its threads finish) differ in the last bits,
and the engine's answer can even change from run to run. A differentially private
release must not depend on such accidents, so every sum in :mod:`dpbayes.data` is the
*exact* sum of the (double precision) values, rounded once to the nearest double.

Both paths split each double ``x`` into an integer and a power of two,
``x = m * 2**s``, add the integers exactly per exponent (numpy: float64 partial sums
that stay below 2**53; SQL: ``HUGEINT``/``NUMERIC`` sums) and combine the per-exponent
totals with Python integers; a single correctly rounded division gives the result,
which therefore equals :func:`math.fsum` of the same values.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from fractions import Fraction

import numpy as np

__all__ = [
    "SCALE_BITS",
    "combine_scaled_sums",
    "exact_sum",
    "exact_sum_fraction",
    "round_saturating",
    "scaled_parts_sql",
    "scaled_sum_fraction",
]

#: SQL engines scale each value to about 2**SCALE_BITS before the integer cast; the
#: margin above 53 bits absorbs a floor(log2|x|) that is off by a few units.
SCALE_BITS = 60

# numpy path: mantissas are cut into a high and a low part of at most 27 bits; with
# chunks of 2**24 values every per-exponent float64 partial sum stays below 2**51,
# hence exact.
_CHUNK = 1 << 24
_LOW_BITS = 27
_EXP_OFFSET = 1100  # np.frexp exponents lie in [-1073, 1024]


def scaled_sum_fraction(parts: Iterable[tuple[int, int]]) -> Fraction:
    """``sum(m * 2**s for s, m in parts)`` exactly (exact integers in), as a fraction."""
    items = [(int(s), int(m)) for s, m in parts if m]
    if not items:
        return Fraction(0)
    smin = min(s for s, _ in items)
    total = sum(m << (s - smin) for s, m in items)
    return Fraction(total << smin) if smin >= 0 else Fraction(total, 1 << -smin)


def round_saturating(value: Fraction) -> float:
    """The double nearest to ``value``, or the largest finite double of its sign beyond
    the double range: the value clamped to the doubles, then rounded (clamping is a
    contraction, so any bound on how much the value moves still holds)."""
    try:
        return float(value)  # int / int inside: correctly rounded
    except OverflowError:
        return sys.float_info.max if value > 0 else -sys.float_info.max


def combine_scaled_sums(parts: Iterable[tuple[int, int]], *, saturate: bool = False) -> float:
    """The double nearest to ``sum(m * 2**s for s, m in parts)`` (exact integers in).

    Raises ``OverflowError`` if the exact sum is beyond the double range, or with
    ``saturate=True`` returns the largest finite double of its sign there
    (:func:`round_saturating`).
    """
    exact = scaled_sum_fraction(parts)
    return round_saturating(exact) if saturate else float(exact)


def _scaled_parts(values: np.ndarray) -> dict[int, int]:
    """Exact integers ``{s: m}`` with sum(values) = sum(m * 2**s), vectorised."""
    x = np.asarray(values, dtype=np.float64).ravel()
    totals: dict[int, int] = {}
    for start in range(0, x.size, _CHUNK):
        chunk = x[start : start + _CHUNK]
        mant, expo = np.frexp(chunk)  # chunk = mant * 2**expo, 0.5 <= |mant| < 1
        # multiplying by a power of two is exact (and faster than np.ldexp)
        ints = mant * 2.0**53  # exact integers, |ints| < 2**53
        high = np.floor(ints * 2.0**-_LOW_BITS)
        low = ints - high * 2.0**_LOW_BITS  # in [0, 2**27)
        index = expo + _EXP_OFFSET
        size = 2 * _EXP_OFFSET + 1
        hsum = np.bincount(index, weights=high, minlength=size)
        lsum = np.bincount(index, weights=low, minlength=size)
        for i in np.flatnonzero((hsum != 0) | (lsum != 0)):
            e = int(i) - _EXP_OFFSET - 53
            val = (int(hsum[i]) << _LOW_BITS) + int(lsum[i])
            totals[e] = totals.get(e, 0) + val
    return totals


def exact_sum_fraction(values: np.ndarray) -> Fraction:
    """The exact sum of a float64 array (finite values), as a fraction."""
    return scaled_sum_fraction(_scaled_parts(values).items())


def exact_sum(values: np.ndarray) -> float:
    """The correctly rounded sum of a float64 array (equal to ``math.fsum(values)``).

    Values must be finite; the work is vectorised (``np.frexp`` and ``np.bincount``). A sum
    beyond the double range is clamped to the largest finite double of its sign
    (``math.fsum`` raises): a sum of data never fails, so an overflow cannot show as an
    error for one data set and not its neighbour, and clamping moves no sum by more than
    the data moved it.
    """
    return round_saturating(exact_sum_fraction(values))


def scaled_parts_sql(expr: str, relation: str, where: str) -> str:
    """SQL (DuckDB dialect) returning rows ``(s, m)`` whose combination is sum(expr).

    ``expr`` must be a finite DOUBLE expression; rows are filtered by ``where``. Each
    nonzero value is multiplied by ``2**(SCALE_BITS - floor(log2|x|))`` in two exact
    power-of-two steps (no overflow even for subnormals), cast to ``HUGEINT`` (exact:
    the product is an integer below 2**63) and summed per exponent.
    """
    b = SCALE_BITS
    return (
        f"WITH dpb_v AS (SELECT {expr} AS x FROM {relation} WHERE {where}), "
        "dpb_k AS (SELECT x, CAST(floor(log2(abs(x))) AS INTEGER) AS k "
        "FROM dpb_v WHERE x <> 0) "
        f"SELECT k - {b} AS s, "
        f"SUM(CAST((x * pow(2.0, ({b} - k) // 2)) * pow(2.0, ({b} - k) - ({b} - k) // 2) "
        "AS HUGEINT)) AS m FROM dpb_k GROUP BY k"
    )
