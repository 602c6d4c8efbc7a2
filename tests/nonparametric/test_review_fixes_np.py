"""Faults found by a review of the nonparametric module, one test each."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from dpbayes import display
from dpbayes.nonparametric import ConvergenceWarning, DPMixture, LocalLaplace

FAST = dict(draws=20, warmup=10, chains=1, rng=0, diagnostics=False, progress=False)


def _fit(model, z):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return model.fit(z, **FAST)


def test_plain_array_fit_carries_no_guarantee():
    mech = LocalLaplace(epsilon=1.0, r=3.0)
    raw = np.random.default_rng(0).normal(1.0, 0.5, 60)  # not privatised at all
    fit = _fit(DPMixture(mechanism=mech), raw)
    assert fit.guarantee is None
    assert "privacy is not verified" in repr(fit)
    rows = dict(fit._display()[1])
    assert "plain array" in rows["guarantee"] and "not verified" in rows["guarantee"]
    # the seeded release of the same data keeps its guarantee and its SIMULATION flag
    col = mech.privatize(raw, rng=1)
    fit2 = _fit(DPMixture(mechanism=mech), col)
    assert fit2.guarantee is not None and fit2.guarantee.simulation is True
    assert fit2.guarantee.epsilon == 1.0
    # ... but its bare values do not
    assert _fit(DPMixture(mechanism=mech), col.values).guarantee is None
    assert display.html(fit)  # the HTML display still renders


@pytest.mark.parametrize("r", [1e308, 1e160, 1e-160, 1e-320])
def test_clipping_bound_outside_the_handled_range_is_refused_naming_r(r):
    from dpbayes.nonparametric import LocalGaussian, privatize

    with pytest.raises(ValueError, match=r"^r = .* is outside \[1e-150, 1e\+150\]"):
        LocalLaplace(epsilon=1.0, r=r)
    with pytest.raises(ValueError, match=r"^r = "):
        LocalGaussian(epsilon=1.0, delta=1e-6, r=r)
    with pytest.raises(ValueError, match=r"^r = "):
        privatize([0.0, 1.0], epsilon=1.0, r=r)


@pytest.mark.parametrize("j", [-490, 490])
def test_fit_is_scale_equivariant_at_the_ends_of_the_range(j):
    r = 2.0**j
    x = np.linspace(-0.5, 0.9, 40)
    means = []
    for scale in (1.0, r):
        mech = LocalLaplace(epsilon=1.0, r=scale)
        z = mech.privatize(x * scale, rng=3)
        means.append(_fit(DPMixture(mechanism=mech), z).mean() / scale)
    assert means[1] == pytest.approx(means[0], rel=1e-9, abs=1e-12)


def test_laplace_epsilon_beyond_the_sampler_range_is_refused_naming_epsilon():
    from dpbayes.nonparametric.sampler import LAPLACE_MAX_EPSILON

    for eps in (1420.0, 1500.0):
        with pytest.raises(ValueError, match=r"^epsilon = .* above 1400"):
            DPMixture(mechanism=LocalLaplace(epsilon=eps, r=1.0))
    mech = LocalLaplace(epsilon=LAPLACE_MAX_EPSILON, r=1.0)
    z = mech.privatize(np.linspace(-1, 1, 30), rng=1)
    assert np.isfinite(_fit(DPMixture(mechanism=mech), z).mean())


@pytest.mark.parametrize(
    "kw,name",
    [
        (dict(alpha=1e300, alpha_prior=None), r"^alpha = "),
        (dict(alpha=1e6, alpha_prior=None), r"^alpha = "),
        (dict(alpha=1e6), r"^alpha = "),
        (dict(alpha_prior=(1e-300, 1.0)), r"^alpha_prior\[0\] \(shape\)"),
        (dict(alpha_prior=(1.0, 1e-300)), r"^alpha_prior = "),
        (dict(alpha_prior=(1.0, 1e300)), r"^alpha_prior\[1\] \(rate\)"),
        (dict(base=(0.0, 1e-300), base_prior=None), r"^base\[1\] \(sigma\)"),
        (dict(base=(0.0, 1e300), base_prior=None), r"^base\[1\] \(sigma\)"),
        (dict(base=(0.0, 1e300)), r"^base\[1\] \(sigma\)"),
    ],
)
def test_hyperparameters_the_sampler_cannot_handle_are_refused_naming_them(kw, name):
    with pytest.raises(ValueError, match=name):
        DPMixture(mechanism=LocalLaplace(epsilon=1.0, r=3.0), **kw)


def test_hyperparameters_at_the_bounds_still_fit():
    mech = LocalLaplace(epsilon=1.0, r=3.0)
    z = mech.privatize(np.random.default_rng(0).normal(0, 1, 50), rng=1)
    for kw in (
        dict(alpha_prior=(0.1, 1e6)),
        dict(alpha=1e-300, alpha_prior=None),
        dict(base=(0.0, 3.1e-8), base_prior=None),
        dict(base=(0.0, 2.9e8), base_prior=None),
    ):
        assert np.isfinite(_fit(DPMixture(mechanism=mech, **kw), z).mean()), kw


def test_custom_logpdf_returning_nan_or_plus_inf_is_refused():
    from dpbayes.nonparametric import CustomMechanism

    def nan_everywhere(z, x):
        return np.full(np.broadcast(z, x).shape, np.nan)

    def inf_everywhere(z, x):
        return np.full(np.broadcast(z, x).shape, np.inf)

    for bad, what in ((nan_everywhere, "NaN"), (inf_everywhere, r"\+inf")):
        with pytest.raises(ValueError, match=rf"^logpdf returned {what}"):
            CustomMechanism(logpdf=bad)

    def nan_far_away(z, x):  # fine at the probe (z = x = 0), NaN in the fit
        d = z - x
        return np.where(np.abs(d) > 0.5, np.nan, -0.5 * d * d)

    model = DPMixture(mechanism=CustomMechanism(logpdf=nan_far_away), base=(0.0, 1.0))
    z = np.random.default_rng(0).normal(1.0, 0.5, 50)
    with pytest.raises(ValueError, match=r"^logpdf returned NaN"):
        _fit(model, z)

    def zero_density_far_away(z, x):  # -inf is a zero density: allowed
        d = z - x
        return np.where(np.abs(d) > 5.0, -np.inf, -0.5 * d * d)

    fit = _fit(DPMixture(mechanism=CustomMechanism(logpdf=zero_density_far_away), base=(0, 1)), z)
    assert np.isfinite(fit.mean())


def test_wasserstein1_needs_an_increasing_grid_of_matching_length():
    from dpbayes.nonparametric import baselines as B

    g = np.linspace(-3, 3, 7)
    f, h = B.empirical_cdf([0.0, 1.0], g), B.empirical_cdf([-1.0, 2.0], g)
    assert B.wasserstein1(f, h, g) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="grid must be strictly increasing"):
        B.wasserstein1(f[::-1], h[::-1], g[::-1])  # gave -1.0
    with pytest.raises(ValueError, match="grid must be strictly increasing"):
        B.wasserstein1(f, h, np.array([0.0, 1, 1, 2, 3, 4, 5]))
    with pytest.raises(ValueError, match="equal lengths"):
        B.wasserstein1(f[:-1], h, g)


@pytest.mark.parametrize("value", [1.0, 1e-300])
def test_zero_bandwidth_is_refused_naming_z_and_bandwidth(value):
    from dpbayes.nonparametric import baselines as B

    z = np.full(50, value)
    if value < 1:
        z[0] = 1.5 * value  # a spread of 1e-301: h underflows to 0
    with pytest.raises(ValueError, match=r"^z has .*bandwidth="):
        B.normal_reference_bandwidth(z, 1.0)
    with pytest.raises(ValueError, match=r"^z has .*bandwidth="):
        B.deconvolution_kde_laplace(z, 1.0, np.linspace(-3, 3, 7))
    assert np.all(np.isfinite(B.deconvolution_kde_laplace(z, 1.0, [0.0, 1.0], bandwidth=0.5)))


def test_density_to_cdf_needs_a_finite_increasing_grid_of_matching_length():
    from dpbayes.nonparametric import baselines as B

    g, f = np.linspace(0.0, 1.0, 5), np.ones(5)
    assert B.density_to_cdf(f, g) == pytest.approx([0.0, 0.25, 0.5, 0.75, 1.0])
    bad_grids = [
        g[::-1],  # was "density must have positive mass on grid"
        np.array([0.0, 0.5, 0.25, 0.75, 1.0]),  # was a CDF that goes down
        np.array([0.0, 0.5, 0.5, 0.75, 1.0]),
    ]
    for grid in bad_grids:
        with pytest.raises(ValueError, match=r"^grid must be strictly increasing$"):
            B.density_to_cdf(f, grid)
    with pytest.raises(ValueError, match=r"^grid must contain only finite numbers"):
        B.density_to_cdf(f, np.array([0.0, 0.5, np.nan, 0.75, 1.0]))
    for density in (np.ones(2), np.ones(6)):  # length 2 broadcast silently to a wrong CDF
        with pytest.raises(ValueError, match=r"^density and grid must have equal lengths, got"):
            B.density_to_cdf(density, g)
