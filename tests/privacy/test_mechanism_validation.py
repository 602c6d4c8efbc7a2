"""Argument validation of every mechanism, table-driven (as diffprivlib's tests do).

Every privacy parameter of every mechanism class, given a negative, zero, NaN, infinite,
string, bool or None value, raises TypeError (wrong type) or ValueError (wrong value) with
a message that names the argument.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpbayes.privacy import (
    ExponentialMechanism,
    GaussianMechanism,
    GeometricMechanism,
    LaplaceMechanism,
    RandomizedResponse,
    analytic_gaussian_sigma,
    classic_gaussian_sigma,
)

# (constructor, valid keyword arguments)
MECHANISMS = {
    "laplace": (LaplaceMechanism, {"epsilon": 1.0, "sensitivity": 1.0}),
    "gaussian-analytic": (GaussianMechanism, {"epsilon": 0.5, "delta": 1e-5, "sensitivity": 1.0}),
    "gaussian-classic": (
        GaussianMechanism,
        {"epsilon": 0.5, "delta": 1e-5, "sensitivity": 1.0, "calibration": "classic"},
    ),
    "geometric": (GeometricMechanism, {"epsilon": 1.0, "sensitivity": 1}),
    "exponential": (ExponentialMechanism, {"epsilon": 1.0, "sensitivity": 1.0}),
    "randomized-response": (RandomizedResponse, {"epsilon": 1.0, "k": 3}),
    "analytic_gaussian_sigma": (
        analytic_gaussian_sigma,
        {"epsilon": 0.5, "delta": 1e-5, "sensitivity": 1.0},
    ),
    "classic_gaussian_sigma": (
        classic_gaussian_sigma,
        {"epsilon": 0.5, "delta": 1e-5, "sensitivity": 1.0},
    ),
}

# (bad value, expected exception type); ValueError also covers wrong numbers.
BAD_VALUES = [
    (-1.0, ValueError),
    (0.0, ValueError),
    (math.nan, ValueError),
    (math.inf, ValueError),
    (-math.inf, ValueError),
    ("1", TypeError),
    (True, TypeError),
    (None, TypeError),
    (np.array([1.0, 2.0]), TypeError),
]

CASES = []
for _mname, (_ctor, _valid) in MECHANISMS.items():
    for _arg in ("epsilon", "delta", "sensitivity"):
        if _arg not in _valid:
            continue
        for _bad, _exc in BAD_VALUES:
            if _ctor is GeometricMechanism and _arg == "sensitivity" and isinstance(_bad, float):
                _exc = TypeError  # an integer sensitivity: any float is the wrong type
            CASES.append(
                pytest.param(_ctor, _valid, _arg, _bad, _exc, id=f"{_mname}-{_arg}-{_bad!r}")
            )


@pytest.mark.parametrize(("ctor", "valid", "arg", "bad", "exc"), CASES)
def test_bad_privacy_parameter_is_refused_naming_it(ctor, valid, arg, bad, exc):
    ctor(**valid)  # the valid arguments are valid
    with pytest.raises(exc) as info:
        ctor(**{**valid, arg: bad})
    assert arg in str(info.value), str(info.value)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("ctor", "valid", "arg", "bad", "exc"),
    [
        (GaussianMechanism, MECHANISMS["gaussian-analytic"][1], "delta", 1.0, ValueError),
        (GaussianMechanism, MECHANISMS["gaussian-analytic"][1], "delta", 1.5, ValueError),
        (GaussianMechanism, MECHANISMS["gaussian-classic"][1], "epsilon", 1.0, ValueError),
        (GaussianMechanism, MECHANISMS["gaussian-analytic"][1], "calibration", "tight", ValueError),
        (GeometricMechanism, MECHANISMS["geometric"][1], "sensitivity", 1.5, TypeError),
        (GeometricMechanism, MECHANISMS["geometric"][1], "sensitivity", 0, ValueError),
        (GeometricMechanism, MECHANISMS["geometric"][1], "sensitivity", -2, ValueError),
        (RandomizedResponse, MECHANISMS["randomized-response"][1], "k", 1, ValueError),
        (RandomizedResponse, MECHANISMS["randomized-response"][1], "k", 2.0, TypeError),
        (RandomizedResponse, MECHANISMS["randomized-response"][1], "k", "3", TypeError),
        (ExponentialMechanism, MECHANISMS["exponential"][1], "monotonic", "yes", TypeError),
        (LaplaceMechanism, MECHANISMS["laplace"][1], "neighbours", "cousins", ValueError),
    ],
)
def test_other_bad_parameters(ctor, valid, arg, bad, exc):
    with pytest.raises(exc, match=arg):
        ctor(**{**valid, arg: bad})


def test_numpy_scalars_and_ints_are_accepted_and_normalised():
    mech = LaplaceMechanism(epsilon=np.float32(0.5), sensitivity=np.int64(2))
    assert type(mech.epsilon) is float and mech.epsilon == 0.5
    assert type(mech.sensitivity) is float and mech.scale == 4.0
    geo = GeometricMechanism(epsilon=1, sensitivity=np.int32(3))
    assert type(geo.sensitivity) is int
    assert GaussianMechanism(epsilon=1, delta=1e-5, sensitivity=1).neighbours.value == "substitute"


def test_mechanisms_are_frozen_and_keyword_only():
    mech = LaplaceMechanism(epsilon=1.0, sensitivity=1.0)
    with pytest.raises(AttributeError):
        mech.epsilon = 2.0  # type: ignore[misc]
    with pytest.raises(TypeError):
        LaplaceMechanism(1.0, 1.0)  # type: ignore[misc]


@pytest.mark.parametrize(
    ("mech", "value"),
    [
        (LaplaceMechanism(epsilon=1, sensitivity=1), [1.0, np.nan]),
        (LaplaceMechanism(epsilon=1, sensitivity=1), [np.inf]),
        (LaplaceMechanism(epsilon=1, sensitivity=1), "abc"),
        (GaussianMechanism(epsilon=1, delta=1e-5, sensitivity=1), [np.nan]),
        (ExponentialMechanism(epsilon=1, sensitivity=1), [0.0, np.nan]),
        (ExponentialMechanism(epsilon=1, sensitivity=1), []),
        (GeometricMechanism(epsilon=1, sensitivity=1), [1.5]),
    ],
)
@pytest.mark.parametrize("rng", [None, 0])
def test_bad_values_are_refused_before_any_noise(mech, value, rng):
    with pytest.raises((TypeError, ValueError)) as info:
        mech.release(value, rng=rng)
    message = str(info.value)
    assert "value" in message or "scores" in message, message


def test_a_noise_scale_that_overflows_is_refused_before_any_noise() -> None:
    """Laplace noise of scale sensitivity / eps = inf is inf or NaN, and a release's
    post-processing (e.g. rounding a noisy count) then failed after the noise, uncharged.
    The mechanism refuses the eps instead; the counts release spends nothing."""
    import dpbayes as dpb
    from dpbayes.privacy import LaplaceMechanism

    with pytest.raises(ValueError, match="too small for this sensitivity"):
        LaplaceMechanism(epsilon=1e-310, sensitivity=1.0)
    acc = dpb.Accountant(epsilon=5.0, simulation=True)
    with pytest.raises(ValueError, match="epsilon"):
        dpb.release(
            dpb.models.BetaBernoulli(), [1, 0, 1], mechanism="laplace", epsilon=1e-310,
            neighbours="add-remove", accountant=acc, rng=0,
        )  # fmt: skip
    assert acc.spent == (0.0, 0.0)


def test_randomized_response_keep_never_exceeds_its_epsilon() -> None:
    """The float keep is what the sampler uses; its ratio keep (k - 1) / (1 - keep) must
    be at most e^eps exactly. The check in doubles passed 454 of 2,000 random (eps, k)
    whose ratio exceeded e^eps by up to 1e-16 of eps (a review); against mpmath now none."""
    import mpmath as mp

    from dpbayes.privacy.mechanisms import _rr_keep

    mp.mp.dps = 60
    g = np.random.default_rng(1)
    for _ in range(400):
        eps, k = float(g.uniform(1e-4, 40)), int(g.integers(2, 1001))
        keep = _rr_keep(eps, k)
        assert 0 < keep < 1
        assert mp.log(mp.mpf(keep) * (k - 1) / (1 - mp.mpf(keep))) <= eps, (eps, k)
        assert keep >= 1.0 / (1.0 + (k - 1) * math.exp(-eps)) * (1 - 1e-15)  # an ulp or two
