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

import math
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

__all__ = [
    "GRID_BITS",
    "GRID_BOUND_RANGE",
    "SCALE_BITS",
    "ExactMoments",
    "as_doubles",
    "combine_scaled_sums",
    "double_saturating",
    "exact_gram",
    "exact_moments",
    "exact_sum",
    "exact_sum_fraction",
    "grid_exponents",
    "grid_integers",
    "moments",
    "on_grid",
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


def double_saturating(v: Any) -> float:
    """float(v), or +-inf for a number beyond the double range (a Python int or Fraction
    such as 10**400): a value like +-inf, which bounds clip, not an error raised for the
    whole data set by one record's value. None is NaN, as numpy reads it."""
    if v is None:
        return math.nan  # as numpy reads None in a float array
    try:
        return float(v)
    except OverflowError:
        return math.inf if v > 0 else -math.inf


def as_doubles(values: Any) -> np.ndarray:
    """``values`` as a float64 array, numbers beyond the double range read as +-inf
    (:func:`double_saturating`; numpy refuses the Python int 10**400 with
    ``OverflowError``). Values that are not numbers raise as numpy raises."""
    try:
        return np.asarray(values, dtype=float)
    except OverflowError:
        obj = np.asarray(values, dtype=object)
        return np.array([double_saturating(v) for v in obj.ravel()], dtype=float).reshape(obj.shape)


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


# -- exact moment matrices on a public grid ------------------------------------------------
#
# A regression's sufficient statistics are sums of products v_i v_j of bounded
# coordinates. Summed in doubles their rounding grows with n (the sum's magnitude), not
# with one record, so a private release must not take them from ``x.T @ x``. Instead each
# coordinate, already inside its public bound |v_j| <= b_j, is truncated towards zero to
# the public grid 2**(e_j - GRID_BITS), e_j = ceil(log2 b_j): k_j = trunc(v_j 2**(GRID_BITS
# - e_j)) is an integer with |k_j| <= 2**GRID_BITS and |k_j 2**(e_j - GRID_BITS)| <= |v_j|
# (so every bound a release assumes of v, a box, a ball or a row norm, still holds). The
# products k_i k_j (< 2**52) and their sums are then integers, summed exactly (numpy: exact
# float64 products of 13-bit halves; SQL: HUGEINT / NUMERIC / DECIMAL(38, 0) sums), so
# numpy and every engine give the same exact statistic.

#: Bits of the public grid (relative to the power of two above each coordinate's bound).
GRID_BITS = 26
_HALF_BITS = 13
# float64 sums of products of 13-bit integers (< 2**26) stay below 2**53 for 2**26 rows
_GRAM_CHUNK = 1 << 26


#: The bounds that have a grid: its step 2**(e - GRID_BITS) and scale 2**(GRID_BITS - e)
#: are normal doubles for these.
GRID_BOUND_RANGE = (2.0**-990, 2.0**1000)


def on_grid(bounds: Any) -> bool:
    """Whether every bound is set (not None) and lies in :data:`GRID_BOUND_RANGE` (a public
    fact)."""
    if any(b is None for b in bounds):
        return False
    b = np.asarray(bounds, dtype=float).ravel()
    lo, hi = GRID_BOUND_RANGE
    return bool(np.all((b >= lo) & (b <= hi)))


def grid_exponents(bounds: Any) -> tuple[int, ...]:
    """e_j = ceil(log2 b_j) for each public bound b_j > 0 (so b_j <= 2**e_j < 2 b_j), for
    bounds in :data:`GRID_BOUND_RANGE`."""
    out = []
    for b in np.asarray(bounds, dtype=float).ravel():
        if not on_grid([b]):
            lo, hi = GRID_BOUND_RANGE
            raise ValueError(f"a grid needs bounds in [{lo:g}, {hi:g}], got {float(b)!r}")
        mant, expo = math.frexp(float(b))  # b = mant 2**expo, 0.5 <= mant < 1
        out.append(expo - 1 if mant == 0.5 else expo)
    return tuple(out)


def grid_integers(v: np.ndarray, exponents: tuple[int, ...]) -> np.ndarray:
    """k = trunc(v 2**(GRID_BITS - e)) per column, as float64 integers (``v`` within the
    bounds). A product that underflows gives 0, as the integer would (the SQL engines
    test the magnitude first, so that none of them meets an underflow)."""
    a = np.asarray(v, dtype=np.float64)
    scale = np.ldexp(1.0, GRID_BITS - np.asarray(exponents, dtype=np.int64))
    with np.errstate(under="ignore"):
        out = np.trunc(a * scale)  # a power of two: the product is exact or underflows
    if out.size and not np.max(np.abs(out)) <= 2.0**GRID_BITS:
        raise ValueError("grid_integers: a value lies outside its bound")
    return out


def exact_gram(k: np.ndarray) -> list[list[int]]:
    """K'K exactly, as Python integers, for integers |K| <= 2**GRID_BITS (any dtype).

    K = 2**13 H + L with |H| <= 2**13 and 0 <= L < 2**13, so K'K = 2**26 H'H + 2**13 (H'L
    + L'H) + L'L. Every product in these three float64 matrix products is an integer
    below 2**26 and every partial sum of a chunk of 2**26 rows is below 2**52, so BLAS
    computes each chunk exactly in whatever order it adds."""
    k = np.asarray(k, dtype=np.float64)
    m = k.shape[1]
    total = [[0] * m for _ in range(m)]
    for start in range(0, max(k.shape[0], 1), _GRAM_CHUNK):
        chunk = k[start : start + _GRAM_CHUNK]
        high = np.floor(chunk * 2.0**-_HALF_BITS)
        low = chunk - high * 2.0**_HALF_BITS
        hh, hl, ll = high.T @ high, high.T @ low, low.T @ low
        for i in range(m):
            for j in range(m):
                total[i][j] += (
                    (int(hh[i, j]) << (2 * _HALF_BITS))
                    + ((int(hl[i, j]) + int(hl[j, i])) << _HALF_BITS)
                    + int(ll[i, j])
                )
    return total


@dataclass(frozen=True)
class ExactMoments:
    """S = sum over records of v v', exactly: S_ij = ints[i][j] 2**(e_i + e_j - 2 GRID_BITS).

    ``exponents`` are the grid exponents e_j of the coordinates of v (:func:`grid_exponents`
    of their public bounds); ``ints`` the exact integer sums of k_i k_j."""

    ints: tuple[tuple[int, ...], ...]
    exponents: tuple[int, ...]

    def fraction(self, i: int, j: int) -> Fraction:
        """S_ij as an exact fraction."""
        shift = self.exponents[i] + self.exponents[j] - 2 * GRID_BITS
        v = self.ints[i][j]
        return Fraction(v << shift) if shift >= 0 else Fraction(v, 1 << -shift)

    def rounded(self) -> np.ndarray:
        """S with each entry rounded once to the nearest double (saturating)."""
        m = len(self.exponents)
        return np.array(
            [[round_saturating(self.fraction(i, j)) for j in range(m)] for i in range(m)]
        )


def moments(v: np.ndarray, bounds: Any) -> tuple[np.ndarray, ExactMoments | None]:
    """(S, exact): S = sum of v v' over the rows of ``v``. With every coordinate's bound on
    the grid (:func:`on_grid`), ``exact`` is :func:`exact_moments` and S it rounded once
    per entry; else S is the floating-point ``v.T @ v`` and ``exact`` None."""
    if on_grid(bounds):
        exact = exact_moments(v, bounds)
        return exact.rounded(), exact
    return v.T @ v, None


def exact_moments(v: np.ndarray, bounds: Any) -> ExactMoments:
    """The exact :class:`ExactMoments` of the rows of ``v`` (coordinates within ``bounds``)
    truncated to the public grid."""
    exponents = grid_exponents(bounds)
    ints = exact_gram(grid_integers(v, exponents))
    return ExactMoments(ints=tuple(tuple(r) for r in ints), exponents=exponents)
