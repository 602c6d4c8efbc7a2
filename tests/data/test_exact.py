"""Correctly rounded sums: numpy and SQL paths both equal math.fsum."""

from __future__ import annotations

import math
import sys
from fractions import Fraction

import duckdb
import numpy as np
import pandas as pd
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from dpbayes.data import exact as exact_module
from dpbayes.data.exact import (
    GRID_BITS,
    combine_scaled_sums,
    exact_gram,
    exact_moments,
    exact_sum,
    exact_sum_fraction,
    grid_exponents,
    grid_integers,
    round_saturating,
    scaled_parts_sql,
    scaled_sum_fraction,
)

# keep the exact sum inside the double range
moderate = st.floats(min_value=-1e300, max_value=1e300, allow_nan=False)

AWKWARD = np.array(
    [5e-324, -5e-324, 2.2250738585072014e-308, 0.0, -0.0, 1e308, -1e308, 0.1, 0.2, 0.3, 1e16, 1.0]
)


_CON = duckdb.connect()


def _sql_sum(values: np.ndarray) -> float:
    rel = _CON.from_df(pd.DataFrame({"x": values}))
    rows = rel.query("t", scaled_parts_sql("x", "t", "x IS NOT NULL")).fetchall()
    return combine_scaled_sums(rows)


def test_exact_sum_equals_fsum_on_awkward_values():
    assert exact_sum(AWKWARD) == math.fsum(AWKWARD)
    assert _sql_sum(AWKWARD) == math.fsum(AWKWARD)


def test_exact_sum_differs_from_naive_where_naive_is_wrong():
    x = np.array([1e16, 1.0, -1e16, 1.0] * 3)
    assert exact_sum(x) == 6.0 == _sql_sum(x)


def test_empty_sum_is_zero():
    assert exact_sum(np.array([])) == 0.0
    assert combine_scaled_sums([]) == 0.0


def test_wide_range_many_values():
    rng = np.random.default_rng(5)
    x = rng.standard_normal(20_000) * 10.0 ** rng.integers(-300, 300, 20_000)
    expected = math.fsum(x)
    assert exact_sum(x) == expected
    assert _sql_sum(x) == expected


@settings(max_examples=100, deadline=None)
@given(st.lists(moderate, min_size=1, max_size=40))
def test_numpy_sum_equals_fsum(values):
    x = np.array(values, dtype=float)
    assert exact_sum(x) == math.fsum(x)


@settings(max_examples=15, deadline=None)
@given(st.lists(moderate, min_size=1, max_size=40))
def test_sql_sum_equals_fsum(values):
    x = np.array(values, dtype=float)
    assert _sql_sum(x) == math.fsum(x)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(-1200, 1200), st.integers(-(2**70), 2**70)), max_size=8))
def test_combine_scaled_sums_is_correctly_rounded(parts):
    from fractions import Fraction

    exact = sum((Fraction(m) * Fraction(2) ** s for s, m in parts), Fraction(0))
    try:
        expected = float(exact)
    except OverflowError:
        with pytest.raises(OverflowError):
            combine_scaled_sums(parts)
    else:
        assert combine_scaled_sums(parts) == expected


def test_smallest_squarable_threshold():
    """The PostgreSQL square's underflow threshold is exactly where IEEE squares vanish."""
    import math

    from dpbayes.data.sqlalchemy_table import _SMALLEST_SQUARABLE as t

    assert t * t == 5e-324 and math.nextafter(t, 0.0) ** 2 == 0.0


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(allow_nan=False, allow_infinity=False), max_size=40))
@example([1.7e308, 1.7e308, -1.7e308])
def test_the_exact_sum_is_the_sum_of_the_values_as_fractions(values):
    """Whole double range, overflowing sums included: the fraction is the exact sum, in
    numpy and in SQL, and the double is it rounded with saturation."""
    x = np.array(values, dtype=np.float64)
    want = sum((Fraction(v) for v in values), Fraction(0))
    rel = _CON.from_df(pd.DataFrame({"x": x}))
    rows = rel.query("t", scaled_parts_sql("x", "t", "x IS NOT NULL")).fetchall()
    assert exact_sum_fraction(x) == want == scaled_sum_fraction(rows)
    assert exact_sum(x) == round_saturating(want)
    if abs(want) < Fraction(sys.float_info.max):
        # correctly rounded, as math.fsum is where it does not overflow midway (it raised
        # "intermediate overflow" at 1.7e308, 1.7e308, -1.7e308)
        assert exact_sum(x) == float(want)


def test_round_saturating_beyond_the_doubles():
    big = Fraction(sys.float_info.max) * 3
    assert round_saturating(big) == sys.float_info.max
    assert round_saturating(-big) == -sys.float_info.max


def test_grid_exponents_are_the_powers_of_two_at_or_above_the_bounds():
    assert grid_exponents([1.0, 0.5, 0.7, 3.0, 1e-60, 1e60]) == (0, -1, 0, 2, -199, 200)
    for b in (0.7, 1.0, 3.0, 1e-60, 1e60, 1e-298, 1e300):
        (e,) = grid_exponents([b])
        assert b <= math.ldexp(1.0, e) < 2 * b
    for bad in (0.0, math.inf, 5e-324, 1e-300, 1e302, math.nan):
        with pytest.raises(ValueError, match="a grid needs bounds in"):
            grid_exponents([bad])


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.floats(min_value=-1.0, max_value=1.0, allow_nan=False), min_size=1, max_size=8),
    st.sampled_from([1.0, 0.7, 1e-30, 1e30]),
)
def test_grid_integers_truncate_towards_zero_inside_the_bound(values, bound):
    """k 2**(e - G) is the largest grid point at most |v| in magnitude, of v's sign: the
    truncated record stays in every box, ball and row-norm bound the release assumes."""
    v = np.array(values)[:, None] * bound
    (e,) = grid_exponents([bound])
    k = grid_integers(v, (e,))[:, 0]
    for vi, ki in zip(v[:, 0].tolist(), k.tolist(), strict=True):
        step = Fraction(2) ** (e - GRID_BITS)
        back = Fraction(int(ki)) * step
        assert abs(back) <= abs(Fraction(vi)) < abs(back) + step
        assert back == 0 or (back > 0) == (vi > 0)
        assert abs(int(ki)) <= 2**GRID_BITS
    with pytest.raises(ValueError, match="outside its bound"):
        grid_integers(np.array([[2.5 * bound]]), (e,))


def test_exact_gram_is_exact_across_chunks(monkeypatch):
    """K'K as Python integers, equal to the products summed one by one, also when the
    rows are cut into chunks (a small chunk here) and at the extreme integers +-2**26."""
    g = np.random.default_rng(4)
    k = g.integers(-(2**GRID_BITS), 2**GRID_BITS + 1, (257, 3)).astype(float)
    k[:5] = 2.0**GRID_BITS
    k[5:9] = -(2.0**GRID_BITS)
    cols = [[int(x) for x in k[:, i]] for i in range(3)]
    want = [[sum(a * b for a, b in zip(cols[i], cols[j], strict=True)) for j in range(3)]
            for i in range(3)]  # fmt: skip
    assert exact_gram(k) == want
    monkeypatch.setattr(exact_module, "_GRAM_CHUNK", 16)
    assert exact_gram(k) == want
    # the doubles' own product is not exact here
    assert any(int(x) != want[i][j] for (i, j), x in np.ndenumerate(k.T @ k))


def test_exact_moments_round_each_entry_once():
    g = np.random.default_rng(5)
    v = np.column_stack([g.uniform(-0.7, 0.7, 1000), g.uniform(-3, 3, 1000)])
    em = exact_moments(v, [0.7, 3.0])
    assert em.exponents == (0, 2)
    k = grid_integers(v, em.exponents)
    s01 = sum(Fraction(int(a) * int(b)) for a, b in zip(k[:, 0], k[:, 1], strict=True))
    assert em.fraction(0, 1) == s01 * Fraction(2) ** (0 + 2 - 2 * GRID_BITS)
    assert em.rounded()[0, 1] == float(em.fraction(0, 1))
