"""The Laplace (and geometric) scale is rounded up: the real loss sensitivity / scale never
exceeds the stated eps, also by one ulp (an attacker's review: rounded to nearest it did in
about half of all (sensitivity, eps) pairs)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from dpbayes.privacy import GeometricMechanism, LaplaceMechanism
from dpbayes.privacy.mechanisms import laplace_scale


def test_the_real_loss_never_exceeds_the_stated_eps():
    g = np.random.default_rng(1)
    for _ in range(3000):
        s = float(g.choice([1, 2, 3, 6, 10, 14, 22, 30, 62]))
        eps = float(10 ** g.uniform(-3, 1))
        b = LaplaceMechanism(epsilon=eps, sensitivity=s).scale
        assert Fraction(s) / Fraction(b) <= Fraction(eps)
        assert b == laplace_scale(s, eps) and b <= s / eps * (1 + 2.3e-16)
    m = LaplaceMechanism(epsilon=0.3, sensitivity=6.0)  # 6 / fl(6 / 0.3) > 0.3 before
    assert Fraction(6) / Fraction(m.scale) <= Fraction(0.3)
    geo = GeometricMechanism(epsilon=0.3, sensitivity=6)
    assert Fraction(6) / Fraction(geo.scale) <= Fraction(0.3)


@settings(max_examples=300, deadline=None)
@given(
    st.floats(min_value=1e-300, max_value=1e300),
    st.floats(min_value=1e-300, max_value=1e300),
)
def test_the_scale_is_the_smallest_double_that_holds_eps(s, eps):
    b = laplace_scale(s, eps)
    if not 0.0 < b < float("inf"):
        return
    assert Fraction(s) <= Fraction(eps) * Fraction(b)
    below = np.nextafter(b, 0.0)
    assert below == 0.0 or Fraction(s) > Fraction(eps) * Fraction(float(below))
