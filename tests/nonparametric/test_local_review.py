"""Faults found by an attacker's review of the local randomisers (nonparametric), one
test each."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from dpbayes.nonparametric import LocalGaussian, LocalLaplace, privatize


@pytest.mark.parametrize("sign", [1, -1])
@pytest.mark.parametrize("mechanism", ["laplace", "gaussian"])
def test_an_integer_beyond_the_doubles_is_clipped_like_inf(sign, mechanism):
    # privatize clips +-inf to +-r ("whether a column is released must not hang on one
    # person's value"); the Python int 10**400 raised OverflowError for the whole column
    delta = 1e-6 if mechanism == "gaussian" else 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = privatize(
            [0.5, sign * 10**400], mechanism=mechanism, epsilon=1.0, r=1.0, delta=delta, rng=3
        )
        want = privatize(
            [0.5, sign * np.inf], mechanism=mechanism, epsilon=1.0, r=1.0, delta=delta, rng=3
        )
    np.testing.assert_array_equal(got.values, want.values)
    assert got.guarantee.epsilon == 1.0


def test_the_mechanism_objects_clip_it_too():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for mech in (
            LocalLaplace(epsilon=1.0, r=2.0),
            LocalGaussian(epsilon=1.0, delta=1e-6, r=2.0),
        ):
            a = mech.privatize(np.array([1, 10**400, -(10**500)], dtype=object), rng=1)
            b = mech.privatize([1.0, 2.0, -2.0], rng=1)
            np.testing.assert_array_equal(a.values, b.values)
