"""Outward (upward) rounding of the checker's bounds (``PROOF.md`` §1, assumption A4).

Every bound the checker computes stands for a real number: a sum, product, quotient or
Euclidean norm of doubles, or a special function of them (the lemmas). A double computed
by rounding to nearest can be below that real number (``1e-162 * 1e-170`` is 0, the sum
of squares of ``(1e-170,)`` is 0), and a bound below the truth certifies too little noise.
So each rational operation here returns the *smallest double at or above* its exact
value: the exact value is a :class:`fractions.Fraction` (doubles are dyadic rationals),
and the result is rounded up from it, so exact results stay exact (1 + 1 is 2, not
2.0000000000000004) and nothing underflows to 0 or overflows to anything but infinity. A
Euclidean norm is ``math.hypot`` (scaled, no underflow or overflow) moved up until its
square is at least the exact sum of squares. A special function (``expm1``, ``erf``,
``lgamma``...) is accurate to a few ulps; its result is multiplied by ``1 + MARGIN``
(rounded up) and a positive value is at least the smallest subnormal.

Beyond ``EXACT_LIMIT`` distinct values, a sum is ``math.fsum`` (correctly rounded) moved
up one double, a norm ``math.hypot`` (error below one ulp) moved up two, and an elementwise
product or sum (rounded to nearest) moved up one: as sound, and only a few ulps looser.

All arguments are bounds: non-negative; NaN is read as infinity (no bound), and
0 * infinity is infinity (conservative: no bound times a public 0 is still no bound).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable
from fractions import Fraction

import numpy as np

__all__ = [
    "EXACT_LIMIT",
    "INF",
    "MARGIN",
    "TINY",
    "add",
    "hypot",
    "mul",
    "special",
    "sub",
    "up",
    "vec_add",
    "vec_mul",
]

INF = math.inf
TINY = math.nextafter(0.0, 1.0)  # 2^-1074, the smallest positive double
#: relative error allowed for a special function (expm1, erf, lgamma...): 2^-40 ~ 9e-13,
#: far above the few ulps (~1e-15) of the library functions the lemmas call
MARGIN = 2.0**-40
#: above this many distinct values, sums, norms and elementwise operations are not exact
#: rationals but doubles moved up by the rounding they may have lost (a few ulps looser)
EXACT_LIMIT = 4096


def _bound(x: float) -> float:
    x = float(x)
    return INF if math.isnan(x) else abs(x)


def up(q: Fraction) -> float:
    """The smallest double >= q (q >= 0); infinity above the largest double."""
    if q <= 0:
        return 0.0
    try:
        f = float(q)  # rounded to nearest
    except OverflowError:
        return INF
    if Fraction(f) < q:
        f = math.nextafter(f, INF)
    return f


def add(*xs: float) -> float:
    """x_1 + ... + x_n, rounded up."""
    vals = Counter(_bound(x) for x in xs)
    if any(math.isinf(x) for x in vals):
        return INF
    if len(vals) > EXACT_LIMIT:
        try:
            total = math.fsum(_bound(x) for x in xs)  # correctly rounded
        except OverflowError:
            return INF
        return math.nextafter(total, INF) if total > 0 else 0.0
    return up(sum((Fraction(x) * c for x, c in vals.items()), Fraction(0)))


def sub(a: float, b: float) -> float:
    """a - b for a >= b (e.g. the width of a clip range), rounded up."""
    a, b = float(a), float(b)
    if math.isnan(a) or math.isnan(b) or math.isinf(a) or math.isinf(b):
        return INF
    return up(Fraction(a) - Fraction(b))


def mul(a: float, b: float) -> float:
    """a * b, rounded up; 0 * inf is inf."""
    a, b = _bound(a), _bound(b)
    if math.isinf(a) or math.isinf(b):
        return INF
    return up(Fraction(a) * Fraction(b))


def hypot(xs: Iterable[float]) -> float:
    """sqrt(x_1^2 + ... + x_n^2), rounded up (no underflow, no overflow)."""
    xs = [_bound(x) for x in xs]
    vals = Counter(xs)
    if any(math.isinf(x) for x in vals):
        return INF
    if len(vals) > EXACT_LIMIT:
        r = math.hypot(*xs)  # error below 1 ulp (Python >= 3.10)
        return math.nextafter(math.nextafter(r, INF), INF) if r > 0 else 0.0
    exact = sum((Fraction(x) ** 2 * c for x, c in vals.items()), Fraction(0))
    if exact == 0:
        return 0.0
    # a start within a few ulps: hypot of the distinct values, each scaled by sqrt(count)
    r = math.hypot(*(x * math.sqrt(c) for x, c in vals.items()))
    if math.isinf(r) or math.isnan(r):
        return INF  # the norm is at least one of these terms, beyond the largest double
    while Fraction(r) ** 2 < exact:
        r = math.nextafter(r, INF)
        if math.isinf(r):
            return INF
    while r > 0 and Fraction(math.nextafter(r, 0.0)) ** 2 >= exact:
        r = math.nextafter(r, 0.0)  # the smallest double whose square is >= the sum
    return r


def special(x: float) -> float:
    """The result of a special function, accurate to a few ulps, made an upper bound."""
    x = _bound(x)
    if x == 0:
        return TINY
    return max(mul(x, 1.0 + MARGIN), TINY)


def _elementwise(
    a: np.ndarray,
    b: np.ndarray,
    exact: Callable[[float, float], float],
    fast: Callable[[np.ndarray, np.ndarray], np.ndarray],
) -> np.ndarray:
    """``exact`` of each pair (a_j, b_j), once per distinct pair; beyond ``EXACT_LIMIT``
    distinct pairs, ``fast`` of the arrays (rounded up by at least what it may lose)."""
    if len(set(zip(a.tolist(), b.tolist(), strict=True))) > EXACT_LIMIT:
        return fast(a, b)
    memo: dict[tuple[float, float], float] = {}
    out = np.empty(len(a))
    for j, key in enumerate(zip(a.tolist(), b.tolist(), strict=True)):
        if key not in memo:
            memo[key] = exact(*key)
        out[j] = memo[key]
    return out


def _fast_mul(w: np.ndarray, c: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        p = w * c  # rounded to nearest: the next double up is above the product
        out = np.where((w == 0) | (c == 0), 0.0, np.nextafter(p, INF))
    return np.where(np.isnan(w) | np.isnan(c) | np.isinf(w) | np.isinf(c), INF, out)


def _fast_add(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        out = np.where((a == 0) & (b == 0), 0.0, np.nextafter(a + b, INF))
    return np.where(np.isnan(a) | np.isnan(b), INF, out)


def vec_mul(w: np.ndarray, c: np.ndarray) -> np.ndarray:
    """|w_j| * c_j elementwise, each rounded up (0 * inf is inf)."""
    w, c = np.abs(np.asarray(w, dtype=float)), np.abs(np.asarray(c, dtype=float))
    return _elementwise(w, c, mul, _fast_mul)


def vec_add(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a_j + b_j elementwise, each rounded up."""
    a, b = np.abs(np.asarray(a, dtype=float)), np.abs(np.asarray(b, dtype=float))
    return _elementwise(a, b, add, _fast_add)
