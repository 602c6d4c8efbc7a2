"""Argument checks shared by every public function of dpbayes.

Each check takes the value and the argument's name, and returns the normalised value
(a Python float/int, a numpy array) or raises ``TypeError`` (wrong type) or
``ValueError`` (wrong value) with a one-line message that names the argument and the
allowed range. There is no second copy of any of these checks anywhere in dpbayes.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = [
    "check_array",
    "check_category",
    "check_delta",
    "check_epsilon",
    "check_finite",
    "check_flag",
    "check_int",
    "check_positive",
    "check_probability",
    "check_range",
    "check_rng",
]


def _real(value: Any, name: str) -> float:
    """Return ``value`` as a float, refusing bools, strings and other non-reals."""
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__} {value!r}")
    return float(value)


#: Numeric category labels must lie strictly inside (-2**53, 2**53) and be doubles exactly.
#: A column of records that mixes ints with floats (or holds an int past int64) is coded in
#: float64, which rounds the larger ints: a record's category would then depend on the other
#: records (2**53 + 1 becomes 2**53, one declared category turns into another), and the
#: counts' sensitivity would not hold. Inside the limit every int is a double and no rounded
#: one can land on a label.
CATEGORY_LIMIT = 2**53


def check_category(value: Any, name: str) -> Any:
    """A public category (or class) label: hashable, not missing (None, NaN, NA), and if a
    number, real and exactly a double of magnitude below :data:`CATEGORY_LIMIT`. A numpy
    scalar is returned as the Python value."""
    v = value.item() if isinstance(value, np.generic) else value
    if v is None or type(v).__name__ in ("NAType", "NaTType"):
        raise ValueError(f"{name} must not be missing (None, NaN or NA), got {v!r}")
    try:
        hash(v)
    except TypeError:
        raise TypeError(f"{name} must be a hashable label, got {type(v).__name__}") from None
    if isinstance(v, numbers.Number) and not isinstance(v, bool):
        if not isinstance(v, numbers.Real):
            raise TypeError(f"{name} must be a real number or a label, got {v!r}")
        f = float(v)
        if math.isnan(f):
            raise ValueError(f"{name} must not be missing (None, NaN or NA), got {v!r}")
        if not (abs(f) < CATEGORY_LIMIT and f == v):
            raise ValueError(
                f"{name} must be a double below 2**53 in magnitude, got {v!r} (larger "
                "numbers round when records mix ints and floats: pass such ids as strings)"
            )
    return v


def check_finite(value: Any, name: str) -> float:
    """A finite real number."""
    x = _real(value, name)
    if not math.isfinite(x):
        raise ValueError(f"{name} must be finite, got {x}")
    return x


def check_positive(value: Any, name: str, *, allow_zero: bool = False) -> float:
    """A finite real number > 0 (or >= 0 with ``allow_zero``)."""
    x = check_finite(value, name)
    if x < 0 or (x == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be {bound}, got {x}")
    return x


def check_flag(value: Any, name: str) -> bool:
    """True or False itself (a Python or numpy bool). Strings, numbers and None are
    refused: ``allow_non_private="False"`` is a true value to ``bool()``, and a flag that
    unlocks a non-private path must not be set by accident."""
    if not isinstance(value, bool | np.bool_):
        raise TypeError(f"{name} must be True or False, got {type(value).__name__} {value!r}")
    return bool(value)


def check_epsilon(value: Any, name: str = "epsilon") -> float:
    """A privacy parameter epsilon: finite and > 0."""
    return check_positive(value, name)


def check_delta(value: Any, name: str = "delta") -> float:
    """A privacy parameter delta in [0, 1)."""
    x = check_finite(value, name)
    if not 0.0 <= x < 1.0:
        raise ValueError(f"{name} must be in [0, 1), got {x}")
    return x


def check_probability(value: Any, name: str, *, open_interval: bool = False) -> float:
    """A probability in [0, 1] (or (0, 1) with ``open_interval``)."""
    x = check_finite(value, name)
    if open_interval and not 0.0 < x < 1.0:
        raise ValueError(f"{name} must be in (0, 1), got {x}")
    if not 0.0 <= x <= 1.0:
        raise ValueError(f"{name} must be in [0, 1], got {x}")
    return x


def check_int(value: Any, name: str, *, minimum: int | None = None) -> int:
    """An integer (Python or numpy), optionally >= ``minimum``."""
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__} {value!r}")
    x = int(value)
    if minimum is not None and x < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {x}")
    return x


def check_range(value: Any, name: str) -> tuple[float, float]:
    """A finite interval ``(lower, upper)`` with lower < upper."""
    if not isinstance(value, Sequence | np.ndarray) or len(value) != 2:
        raise TypeError(f"{name} must be a pair (lower, upper), got {value!r}")
    lo = check_finite(value[0], f"{name}[0]")
    hi = check_finite(value[1], f"{name}[1]")
    if not lo < hi:
        raise ValueError(f"{name} must have lower < upper, got ({lo}, {hi})")
    return lo, hi


def check_array(
    value: Any,
    name: str,
    *,
    ndim: int | None = 1,
    min_size: int = 1,
    finite: bool = True,
    positive: bool = False,
) -> np.ndarray:
    """A numeric numpy array (float64) with optional shape and value constraints."""
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be an array of numbers, got {type(value).__name__}") from None
    if ndim is not None and arr.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-dimensional, got shape {arr.shape}")
    if arr.size < min_size:
        raise ValueError(f"{name} must have at least {min_size} element(s), got {arr.size}")
    if finite and not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must contain only finite numbers (found NaN or infinity)")
    if positive and np.any(arr <= 0):
        raise ValueError(f"{name} must contain only positive numbers, got min {arr.min()}")
    return arr


def check_rng(rng: Any) -> np.random.Generator | None:
    """``None`` (secure sampling) or a seeded numpy Generator (simulation).

    An int seed or a ``numpy.random.SeedSequence`` becomes a Generator.
    """
    if rng is None:
        return None
    if isinstance(rng, np.random.Generator):
        return rng
    if isinstance(rng, bool | np.bool_):
        raise TypeError(f"rng must be None, an int seed or a numpy Generator, got {rng!r}")
    if isinstance(rng, numbers.Integral) and int(rng) < 0:
        raise ValueError(f"rng (seed) must be >= 0, got {int(rng)}")
    if isinstance(rng, numbers.Integral | np.random.SeedSequence):
        return np.random.default_rng(rng)  # type: ignore[arg-type]
    raise TypeError(f"rng must be None, an int seed or a numpy Generator, got {type(rng).__name__}")
