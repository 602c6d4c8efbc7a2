"""Bands whose credible level is calibrated by refits on data simulated from the fitted P."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from dpbayes.nonparametric import ConvergenceWarning, CustomMechanism, DPMixture, LocalLaplace
from dpbayes.nonparametric.calibration import (
    CANDIDATE_LEVELS,
    _coverage_by_level,
    _pick_level,
    _sample_fitted_p,
    calibrate_bands,
)

GRID = np.linspace(-0.8, 0.8, 9)


@pytest.fixture(scope="module")
def small_fit():
    mech = LocalLaplace(epsilon=2.0, r=1.0)
    g = np.random.default_rng(5)
    x = np.where(g.random(150) < 0.4, g.normal(-0.5, 0.15, 150), g.normal(0.4, 0.2, 150))
    z = mech.privatize(np.clip(x, -1, 1), rng=6)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return DPMixture(mechanism=mech).fit(z, draws=80, chains=2, rng=7, progress=False)


def test_values_simulated_from_the_fit_follow_the_posterior_mean_of_p(small_fit):
    sample = _sample_fitted_p(small_fit, 40_000, np.random.default_rng(1))
    assert sample.shape == (40_000,)
    target = small_fit.cdf(GRID)  # the posterior mean of F
    ecdf = (sample[:, None] <= GRID).mean(axis=0)
    se = np.sqrt(target * (1 - target) / sample.size)
    assert np.all(np.abs(ecdf - target) <= 5 * se + 1e-12)


def test_pointwise_coverage_by_level_switches_where_the_truth_leaves_the_band():
    """Truth at the 0.9-quantile of every column: the equal-tailed band at credible level L
    holds it iff (1 + L) / 2 >= 0.9, i.e. L >= 0.8."""
    draws = np.random.default_rng(0).normal(size=(4_001, 3))
    truth = np.quantile(draws, 0.9, axis=0)
    pointwise, simultaneous = _coverage_by_level(draws, truth)
    below = CANDIDATE_LEVELS < 0.795
    above = CANDIDATE_LEVELS > 0.805
    assert np.all(pointwise[below] == 0.0) and np.all(pointwise[above] == 1.0)
    assert np.all(np.diff(pointwise) >= 0) and np.all(np.diff(simultaneous) >= 0)
    assert simultaneous[-1] == 1.0 and simultaneous[0] == 0.0


def test_the_level_picked_is_the_smallest_that_reaches_the_target():
    cov = np.linspace(0.0, 1.0, CANDIDATE_LEVELS.size)
    level, capped = _pick_level(cov, 0.95)
    j = int(np.flatnonzero(CANDIDATE_LEVELS == level)[0])
    assert cov[j] >= 0.95 and cov[j - 1] < 0.95 and not capped
    assert _pick_level(np.full(CANDIDATE_LEVELS.size, 0.5), 0.95) == (0.999, True)


def test_the_simultaneous_level_is_the_conformal_order_statistic_of_the_refits():
    """One yes/no per refit: with 20 refits at 0.95 all 20 must cover (k = ceil(0.95 x 21)),
    not 19; with too few refits for the level no candidate qualifies (capped)."""
    rng = np.random.default_rng(3)
    minimal = rng.choice(CANDIDATE_LEVELS[:-1], size=20, replace=False)
    cov = (minimal[:, None] <= CANDIDATE_LEVELS).mean(axis=0)  # fraction of refits covered
    assert _pick_level(cov, 0.95, 20) == (float(np.max(minimal)), False)
    assert _pick_level(cov, 0.90, 20) == (float(np.sort(minimal)[-2]), False)  # k = 19
    assert _pick_level(cov, 0.99, 20) == (0.999, True)  # k = 21 > 20 refits


def test_a_run_exchangeable_with_the_refits_needs_at_most_the_level_picked_at_its_rate():
    """Minimal covering levels drawn i.i.d.: a new run needs at most the simultaneous level
    picked from 20 refits with frequency >= 0.95 (k / 21 = 0.952; the rule 'fraction of
    refits >= 0.95' gave 19 / 21 = 0.905)."""
    rng = np.random.default_rng(4)
    hits = []
    for _ in range(3000):
        minimal = CANDIDATE_LEVELS[rng.integers(0, CANDIDATE_LEVELS.size - 1, size=21)]
        cov = (minimal[:20, None] <= CANDIDATE_LEVELS).mean(axis=0)
        hits.append(minimal[20] <= _pick_level(cov, 0.95, 20)[0])
    assert np.mean(hits) >= 0.94  # se 0.004 at 0.952


def test_calibrated_bands_are_the_fits_bands_at_the_levels_its_refits_choose(small_fit):
    cal = calibrate_bands(small_fit, GRID, 0.9, refits=12, draws=40, rng=11, progress=False)
    for kind, lev, cov, need in (
        ("pointwise", cal.pointwise_level, cal.coverage_pointwise, 0.9),
        ("simultaneous", cal.simultaneous_level, cal.coverage_simultaneous, 12 / 12),
    ):
        j = int(np.flatnonzero(CANDIDATE_LEVELS == lev)[0])
        assert cov[j] >= need or cal.capped
        assert j == 0 or cov[j - 1] < need
        lo, hi = small_fit.cdf_band(GRID, lev, kind=kind)
        got = cal.pointwise if kind == "pointwise" else cal.simultaneous
        np.testing.assert_array_equal(got[0], lo)
        np.testing.assert_array_equal(got[1], hi)
    assert cal.refits == 12 and cal.level == 0.9
    again = calibrate_bands(small_fit, GRID, 0.9, refits=12, draws=40, rng=11, progress=False)
    assert again.pointwise_level == cal.pointwise_level  # seeded: reproducible
    np.testing.assert_array_equal(again.coverage_simultaneous, cal.coverage_simultaneous)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"level": 1.0}, "level"),
        ({"refits": 1}, "refits"),
        ({"draws": 3}, "draws"),
        ({"chains": 0}, "chains"),
    ],
)
def test_bad_arguments_are_refused_naming_them(small_fit, kwargs, match):
    args = {"level": 0.95, "refits": 2, **kwargs}
    with pytest.raises(ValueError, match=match):
        calibrate_bands(small_fit, GRID, args.pop("level"), rng=0, progress=False, **args)


def test_a_custom_mechanism_cannot_be_simulated(small_fit):
    from dataclasses import replace

    custom = CustomMechanism(logpdf=lambda z, x: -np.abs(z - x))
    fit = replace(small_fit, model=DPMixture(mechanism=custom, base=(0.0, 1.0)))
    with pytest.raises(ValueError, match="fit: calibrate_bands simulates the local mechanism"):
        calibrate_bands(fit, GRID, refits=2, rng=0, progress=False)


def test_the_bias_corrected_target_and_the_plain_bootstrap(small_fit):
    """The target is the fitted CDF minus the refits' bias; without the correction the
    same refits (same seed) give the levels reported as uncorrected."""
    cal = calibrate_bands(small_fit, GRID, 0.9, refits=3, draws=40, rng=5, progress=False)
    fitted = small_fit.cdf(GRID)
    np.testing.assert_allclose(cal.target, np.clip(fitted - cal.bias, 0.0, 1.0))
    plain = calibrate_bands(
        small_fit, GRID, 0.9, refits=3, draws=40, rng=5, progress=False, bias_correction=False
    )
    np.testing.assert_array_equal(plain.target, fitted)
    np.testing.assert_array_equal(plain.bias, cal.bias)  # the same refits
    assert (plain.pointwise_level, plain.simultaneous_level) == cal.uncorrected_levels
