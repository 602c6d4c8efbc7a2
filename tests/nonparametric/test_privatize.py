"""The local-DP privatiser: clipping and noise scale (statistically), guarantees, bad input."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from dpbayes.nonparametric import (
    CustomMechanism,
    DPMixture,
    LocalGaussian,
    LocalLaplace,
    PrivatizedColumn,
    privatize,
)
from dpbayes.privacy import GaussianMechanism as PrivacyGaussian
from dpbayes.privacy import RandomizedResponse

ALPHA = 1e-4
ZB = float(stats.norm.isf(ALPHA / 2))


@pytest.mark.parametrize(
    "value, expected_centre",
    [(100.0, 3.0), (-7.5, -3.0), (1.25, 1.25), (np.inf, 3.0), (-np.inf, -3.0)],
)
def test_laplace_clips_then_adds_scale_2r_over_eps(value, expected_centre):
    eps, r, n = 1.5, 3.0, 20_000
    out = privatize(np.full(n, value), mechanism="laplace", epsilon=eps, r=r, rng=1)
    noise = stats.laplace(loc=expected_centre, scale=2 * r / eps)
    res = stats.kstest(out.values, noise.cdf)
    assert res.pvalue > ALPHA, f"KS p = {res.pvalue:.3g}"
    # variance 2 b^2 within its z-bound (Laplace kurtosis excess 3: var of s^2 ~ 5 var^2 / n)
    var = noise.var()
    assert abs(out.values.var(ddof=1) - var) <= ZB * np.sqrt(5 * var**2 / n)


def test_secure_default_path_clips_and_is_not_simulation():
    out = LocalLaplace(epsilon=1.0, r=2.0).privatize(np.full(3000, 50.0))
    assert out.guarantee.simulation is False
    # centre 2 = clip(50); scale 4: mean within a z-bound of 2
    assert abs(out.values.mean() - 2.0) <= ZB * np.sqrt(2 * 4.0**2 / 3000)


def test_gaussian_uses_the_privacy_core_sigma():
    eps, delta, r, n = 1.0, 1e-6, 2.0, 20_000
    mech = LocalGaussian(epsilon=eps, delta=delta, r=r)
    assert mech.sigma == PrivacyGaussian(epsilon=eps, delta=delta, sensitivity=2 * r).sigma
    out = privatize(np.full(n, -9.0), mechanism="gaussian", epsilon=eps, delta=delta, r=r, rng=4)
    res = stats.kstest(out.values, stats.norm(-r, mech.sigma).cdf)
    assert res.pvalue > ALPHA
    g = out.guarantee
    assert (g.epsilon, g.delta, g.sensitivity, g.sensitivity_norm) == (eps, delta, 2 * r, "L2")


def test_guarantee_is_local_and_says_simulation():
    out = privatize([0.1, 0.2], mechanism="laplace", epsilon=0.7, r=1.0, rng=0)
    g = out.guarantee
    assert isinstance(out, PrivatizedColumn) and len(out) == 2
    assert (g.epsilon, g.delta, g.sensitivity, g.simulation) == (0.7, 0.0, 2.0, True)
    assert g.details["local"] is True and g.details["r"] == 1.0
    assert g.details["scale"] == pytest.approx(2.0 / 0.7)


def test_randomized_response_keeps_with_the_right_probability():
    cats = ["excellent", "good", "fair", "poor"]
    n, eps = 20_000, 1.0
    out = privatize(
        ["good"] * n, mechanism="randomized-response", epsilon=eps, categories=cats, rng=3
    )
    keep = RandomizedResponse(epsilon=eps, k=4).keep_probability
    frac = np.mean(out.values == "good")
    assert abs(frac - keep) <= ZB * np.sqrt(keep * (1 - keep) / n)
    assert set(out.values) <= set(cats)
    assert out.guarantee.epsilon == eps


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"values": [1.0, np.nan], "epsilon": 1.0, "r": 1.0}, ValueError, "values"),
        ({"values": [1.0], "epsilon": 1.0, "r": 0.0}, ValueError, "r must be > 0"),
        ({"values": [1.0], "epsilon": 1.0, "r": -2.0}, ValueError, "r must be > 0"),
        ({"values": [1.0], "epsilon": 1.0}, ValueError, "r"),
        ({"values": [1.0], "epsilon": 0.0, "r": 1.0}, ValueError, "epsilon"),
        ({"values": [1.0], "epsilon": float("nan"), "r": 1.0}, ValueError, "epsilon"),
        ({"values": [1.0], "epsilon": "1", "r": 1.0}, TypeError, "epsilon"),
        ({"values": [1.0], "epsilon": 1.0, "r": 1.0, "delta": 0.1}, ValueError, "delta"),
        (
            {"values": [1.0], "epsilon": 1.0, "r": 1.0, "mechanism": "cauchy"},
            ValueError,
            "mechanism",
        ),
        (
            {"values": ["a"], "epsilon": 1.0, "mechanism": "randomized-response"},
            TypeError,
            "categories",
        ),
        (
            {
                "values": ["z"],
                "epsilon": 1.0,
                "mechanism": "randomized-response",
                "categories": ["a", "b"],
            },
            ValueError,
            "categories",
        ),
        ({"values": [1.0], "epsilon": 1.0, "r": 1.0, "mechanism": "gaussian"}, ValueError, "delta"),
    ],
)
def test_bad_input_is_refused(kwargs, error, match):
    with pytest.raises(error, match=match):
        privatize(**kwargs)


def test_mechanism_and_model_checks():
    with pytest.raises(ValueError, match="r must be > 0"):
        LocalLaplace(epsilon=1.0, r=0.0)
    with pytest.raises(ValueError, match="epsilon"):
        LocalLaplace(epsilon=-1.0, r=1.0)
    with pytest.raises(TypeError, match="cannot privatize"):
        CustomMechanism(logpdf=lambda z, x: -((z - x) ** 2)).privatize([1.0])
    with pytest.raises(ValueError, match="broadcast"):
        CustomMechanism(logpdf=lambda z, x: np.zeros(3))
    with pytest.raises(ValueError, match="base"):
        DPMixture(mechanism=CustomMechanism(logpdf=lambda z, x: -((z - x) ** 2)))
    mech = LocalLaplace(epsilon=1.0, r=1.0)
    with pytest.raises(ValueError, match="alpha"):
        DPMixture(mechanism=mech, alpha=0.0)
    with pytest.raises(ValueError, match="sigma"):
        DPMixture(mechanism=mech, base=(0.0, -1.0))
    with pytest.raises(ValueError, match="alpha_prior"):
        DPMixture(mechanism=mech, alpha_prior=(1.0, 0.0))
    with pytest.raises(TypeError, match="mechanism"):
        DPMixture(mechanism="laplace")  # type: ignore[arg-type]
    model = DPMixture(mechanism=mech)
    with pytest.raises(ValueError, match="z must contain only finite"):
        model.fit([0.1, np.nan], draws=2, chains=1, rng=0)
    with pytest.raises(ValueError, match="draws"):
        model.fit([0.1, 0.2], draws=0, rng=0)
    with pytest.raises(ValueError, match="chains"):
        model.fit([0.1, 0.2], draws=2, chains=0, rng=0)


@pytest.mark.parametrize(
    "other",
    [
        LocalLaplace(epsilon=2.0, r=1.0),
        LocalLaplace(epsilon=1.0, r=3.0),
        LocalGaussian(epsilon=1.0, delta=1e-5, r=1.0),
    ],
)
def test_mismatched_mechanism_is_refused(other):
    z = LocalLaplace(epsilon=1.0, r=1.0).privatize([0.1, 0.5, -0.3], rng=0)
    with pytest.raises(ValueError, match="does not match"):
        DPMixture(mechanism=other).fit(z, draws=2, chains=1, rng=0)


def test_an_infinite_value_is_clipped_and_the_other_arguments_are_checked_first():
    """A review found a whole column refused when one person's value was infinite (whether
    the column is released hung on that value) and `r=-2` reported as the data's fault.
    Infinities are clipped like any value beyond r; a NaN (missing) is refused by name."""
    out = privatize([0.5, np.inf, -np.inf], mechanism="laplace", epsilon=1.0, r=1.0, rng=1)
    assert out.values.shape == (3,) and np.all(np.isfinite(out.values))
    with pytest.raises(ValueError, match="NaN"):
        privatize([0.5, np.nan], mechanism="gaussian", epsilon=1.0, delta=1e-5, r=1.0, rng=1)
    with pytest.raises(ValueError, match="r must be > 0"):
        privatize([np.nan], mechanism="laplace", epsilon=1.0, r=-2.0, rng=1)
