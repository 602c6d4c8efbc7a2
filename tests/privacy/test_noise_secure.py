"""The SECURE path (rng=None, OpenDP samplers): same statistical checks at smaller sizes.

A secure draw costs ~30-700 us (more on a loaded machine), so samples are a few thousand.
These tests are random (no seed exists for the secure source): each check is a 1e-4-level
test, so a correct sampler fails one run in ~10^4 per check.
"""

from __future__ import annotations

import numpy as np
import opendp.domains as odom
import opendp.measurements as omeas
import opendp.measures as omeasures
import opendp.metrics as ometrics
import pytest
from privacy_stats import (
    check_chisquare,
    check_discrete,
    check_ks,
    check_mean_var,
    check_proportion,
)
from scipy import integrate, stats

from dpbayes.privacy import (
    ExponentialMechanism,
    GaussianMechanism,
    GeometricMechanism,
    LaplaceMechanism,
    RandomizedResponse,
    SecureNoise,
    noise_source,
)
from dpbayes.privacy import noise as noise_module

N = 3_000


def test_secure_laplace_noise():
    mech = LaplaceMechanism(epsilon=0.5, sensitivity=1.0)
    noisy = mech.release(np.zeros(N))
    assert noisy.guarantee.simulation is False
    assert noisy.simulation is False
    assert mech.release(np.zeros(3), rng=0).guarantee.simulation is True
    dist = mech.noise_distribution()
    check_mean_var(noisy.value, dist, "secure laplace")
    check_ks(noisy.value, dist, "secure laplace")


@pytest.mark.parametrize("calibration", ["analytic", "classic"])
def test_secure_gaussian_noise(calibration):
    mech = GaussianMechanism(epsilon=0.5, delta=1e-5, sensitivity=1.0, calibration=calibration)
    noisy = mech.release(np.zeros(N))
    assert noisy.guarantee.simulation is False
    dist = mech.noise_distribution()
    check_mean_var(noisy.value, dist, f"secure gaussian {calibration}")
    check_ks(noisy.value, dist, f"secure gaussian {calibration}")


@pytest.mark.parametrize(("value", "scale"), [(1e9, 1.0), (1e9, 1e-3), (1.0, 1e-9), (-5e12, 30.0)])
@pytest.mark.parametrize("kind", ["laplace", "gaussian"])
def test_secure_noise_on_large_values_and_tiny_scales(kind, value, scale):
    """The noise survives large values / tiny scales (up to rounding to the float grid)."""
    src = SecureNoise()
    n = 1_500
    out = getattr(src, kind)(np.full(n, value), scale)
    assert out.dtype == np.float64 and out.shape == (n,)
    noise = (out - value) / scale  # exact: out and value are within a factor 2 of each other
    assert np.unique(noise).size > n // 2  # not collapsed to a few values
    dist = stats.laplace() if kind == "laplace" else stats.norm()
    check_mean_var(noise, dist, f"{kind} at {value} scale {scale}")
    check_ks(noise, dist, f"{kind} at {value} scale {scale}")


def test_secure_noise_below_float_spacing_returns_the_rounded_value():
    """Noise far below the spacing of floats at the value rounds away (post-processing)."""
    out = SecureNoise().laplace(np.full(10, 1e9), 1e-12)
    assert np.all(np.abs(out - 1e9) <= np.spacing(1e9))


@pytest.mark.parametrize(("epsilon", "sensitivity"), [(1.0, 1), (0.25, 2)])
def test_secure_geometric_noise(epsilon, sensitivity):
    mech = GeometricMechanism(epsilon=epsilon, sensitivity=sensitivity)
    noisy = mech.release(np.zeros(5_000, dtype=np.int64))
    assert noisy.value.dtype == np.int64
    assert noisy.guarantee.simulation is False
    dist = stats.dlaplace(a=epsilon / sensitivity)
    check_mean_var(noisy.value, dist, "secure geometric")
    check_discrete(noisy.value, dist, "secure geometric")


def test_secure_geometric_uses_64_bit_integers():
    """Values beyond 2^31 are accepted and huge noise does not saturate at +-2^31."""
    src = SecureNoise()
    big = np.array([3_000_000_000, -3_000_000_000, 2**40], dtype=np.int64)
    out = src.discrete_laplace(big, 1.0)
    assert np.all(np.abs(out - big) < 60)  # P(|noise| >= 60) ~ e^-60
    wide = src.discrete_laplace(np.zeros(200, dtype=np.int64), 1e12)
    assert np.unique(wide).size == 200
    assert np.abs(wide).max() > 2**31  # P(all 200 within 2^31) ~ (2^31 / 1e12)^200
    with pytest.raises(TypeError, match="integers"):
        src.discrete_laplace(np.zeros(3), 1.0)


def test_secure_exponential_mechanism_frequencies():
    mech = ExponentialMechanism(epsilon=1.0, sensitivity=0.5)
    scores = np.array([0.0, 1.0, 2.0, 0.5])
    picks = [mech.release(scores) for _ in range(1_500)]
    assert all(p.guarantee.simulation is False for p in picks)
    counts = np.bincount([p.value for p in picks], minlength=scores.size)
    check_chisquare(counts, mech.probabilities(scores), "secure exponential")


def _noisy_max(measure, scale):
    noise_module._opendp()  # enables OpenDP's contrib features
    space = (
        odom.vector_domain(odom.atom_domain(T=float, nan=False)),
        ometrics.linf_distance(T=float),
    )
    return omeas.make_noisy_max(*space, measure, scale=scale)


def _exponential_noise_argmax_probs(scores, scale):
    """P(argmax_i s_i + E_i = j), E_i i.i.d. Exponential(scale): the permute-and-flip law."""
    s = np.asarray(scores, dtype=float)

    def win(j):
        def density(y):
            others = np.delete(s, j)
            cdf = np.where(y >= others, -np.expm1(-(y - others) / scale), 0.0)
            return np.exp(-(y - s[j]) / scale) / scale * np.prod(cdf)

        top = s.max()
        inner = 0.0
        if top > s[j]:
            kinks = sorted(set(s[(s > s[j]) & (s < top)]))
            inner = integrate.quad(density, s[j], top, points=kinks or None, limit=200)[0]
        return inner + integrate.quad(density, top, np.inf, limit=200)[0]

    p = np.array([win(j) for j in range(s.size)])
    return p / p.sum()


def test_opendp_noisy_max_zcdp_is_gumbel_and_pure_dp_is_permute_and_flip():
    """The claim behind SecureNoise.gumbel_argmax, checked statistically.

    make_noisy_max with zero_concentrated_divergence adds Gumbel noise: argmax has the
    exponential-mechanism law exp(s/scale) / sum. With max_divergence it adds exponential
    noise (permute-and-flip), a different law: the chi-square against exp(s/scale)
    rejects it, and it fits the exponential-noise law instead.
    """
    scores = [0.0, 1.0, 2.0]
    em = np.exp(scores) / np.exp(scores).sum()
    pf = _exponential_noise_argmax_probs(scores, 1.0)
    assert abs(pf[2] - em[2]) > 0.09  # the two laws really differ (0.766 vs 0.665)
    n = 1_500
    zcdp = _noisy_max(omeasures.zero_concentrated_divergence(), 1.0)
    counts = np.bincount([zcdp(scores) for _ in range(n)], minlength=3)
    check_chisquare(counts, em, "zCDP noisy max vs exponential mechanism")
    pure = _noisy_max(omeasures.max_divergence(), 1.0)
    counts = np.bincount([pure(scores) for _ in range(n)], minlength=3)
    check_chisquare(counts, pf, "pure-DP noisy max vs exponential-noise law")
    res = stats.chisquare(counts, n * em)
    assert res.pvalue < 1e-6, f"pure-DP noisy max unexpectedly fits the EM law (p={res.pvalue})"


@pytest.mark.parametrize(("k", "true"), [(2, 1), (4, 2)])
def test_secure_randomized_response(k, true):
    mech = RandomizedResponse(epsilon=1.0, k=k)
    n = 1_500
    noisy = mech.release(np.full(n, true))
    assert noisy.guarantee.simulation is False
    counts = np.bincount(noisy.value, minlength=k)
    assert counts.size == k
    check_proportion(int(counts[true]), n, mech.keep_probability, "secure RR keep rate")
    if k > 2:
        check_chisquare(np.delete(counts, true), np.full(k - 1, 1.0), "secure RR flips")


def test_opendp_errors_become_value_errors():
    with pytest.raises(ValueError, match=r"OpenDP .*probability must be within"):
        noise_module._opendp_call(
            "randomized response construction",
            omeas.make_randomized_response,
            [0, 1, 2],
            0.1,
        )
    with pytest.raises(ValueError, match="keep"):
        SecureNoise().randomized_response(np.array([0, 1]), 3, 0.2)
    with pytest.raises(ValueError, match="keep"):
        SecureNoise().randomized_response(np.array([0, 1]), 3, 1.0)
    with pytest.raises(ValueError, match="values"):
        SecureNoise().randomized_response(np.array([0, 3]), 3, 0.5)
    with pytest.raises(ValueError, match="scale"):
        SecureNoise().laplace(np.zeros(2), 0.0)
    with pytest.raises(ValueError, match="values"):
        SecureNoise().gaussian(np.array([np.nan]), 1.0)


def test_secure_generator_is_fresh():
    a, b = SecureNoise().generator(), SecureNoise().generator()
    assert a.integers(2**62) != b.integers(2**62)


@pytest.mark.parametrize(
    ("mech", "value"),
    [
        (LaplaceMechanism(epsilon=1, sensitivity=1), np.zeros(3)),
        (GaussianMechanism(epsilon=1, delta=1e-5, sensitivity=1), np.zeros(3)),
        (GeometricMechanism(epsilon=1, sensitivity=1), np.zeros(3, dtype=int)),
        (ExponentialMechanism(epsilon=1, sensitivity=1), np.arange(3.0)),
        (RandomizedResponse(epsilon=1, k=3), np.arange(3)),
    ],
    ids=["laplace", "gaussian", "geometric", "exponential", "randomized-response"],
)
def test_guarantee_says_whether_noise_was_simulated(mech, value):
    assert mech.release(value).guarantee.simulation is False
    assert mech.release(value, rng=7).guarantee.simulation is True
    assert mech.release(value, rng=noise_source(7).generator()).guarantee.simulation is True
    assert "SIMULATION" in mech.release(value, rng=7).guarantee.describe()
    assert "SIMULATION" not in mech.release(value).guarantee.describe()
