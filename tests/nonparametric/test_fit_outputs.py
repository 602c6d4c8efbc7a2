"""Outputs of a fit: draws of P, functionals, bands, ArviZ, diagnostics and warnings."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from dpbayes.nonparametric import ConvergenceWarning, DPMixture, LocalLaplace


@pytest.fixture(scope="module")
def fit():
    g = np.random.default_rng(0)
    x = np.clip(g.normal(0.2, 0.4, 300), -1, 1)
    mech = LocalLaplace(epsilon=2.0, r=1.0)
    z = mech.privatize(x, rng=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return DPMixture(mechanism=mech, alpha_prior=(2.0, 1.0)).fit(
            z, draws=150, warmup=50, chains=2, rng=2
        )


def test_draws_of_p_are_probability_measures(fit):
    w = fit.weights()
    assert fit.atoms.shape == (2, 150, w.shape[-1])
    np.testing.assert_allclose(w.sum(axis=-1), 1.0, atol=1e-12)
    assert np.all(w >= 0) and np.all(np.diff(fit.atoms, axis=-1) >= 0)
    assert np.all(fit.alpha > 0) and np.all(fit.n_clusters >= 1)
    assert fit.guarantee is not None and fit.guarantee.simulation is True
    assert fit.guarantee.epsilon == 2.0


def test_cdf_quantile_mean_agree(fit):
    grid = np.linspace(-3, 3, 301)
    cdf = fit.cdf(grid)
    assert np.all(np.diff(cdf) >= -1e-15) and 0 <= cdf[0] and cdf[-1] <= 1
    assert fit.cdf([1e9])[0] == pytest.approx(1.0)
    # per draw: F(q_p) >= p and F(q_p - tiny) < p
    q = fit.quantile_draws(0.3)
    assert fit.cdf_draws(grid).shape == (2, 150, grid.size)
    idx = np.argmax(fit.atoms >= q[..., None], axis=-1)  # the atom the quantile sits on
    f_at_q = np.take_along_axis(fit.cumw, idx[..., None], axis=-1)[..., 0]
    f_before = np.where(
        idx > 0,
        np.take_along_axis(fit.cumw, np.maximum(idx - 1, 0)[..., None], axis=-1)[..., 0],
        0.0,
    )
    assert np.all(f_at_q >= 0.3 - 1e-12) and np.all(f_before < 0.3)
    assert fit.mean() == pytest.approx(np.mean(np.sum(fit.weights() * fit.atoms, axis=-1)))
    lo, hi = fit.interval("mean", 0.9)
    assert lo <= fit.mean() <= hi
    assert fit.quantile([0.25, 0.75]).shape == (2,)


def test_density_integrates_to_one_and_bands_bracket(fit):
    grid = np.linspace(-6, 6, 801)
    dens = fit.density(grid, bandwidth=0.1)
    assert np.trapezoid(dens, grid) == pytest.approx(1.0, abs=2e-3)
    lo, hi = fit.density_band(grid, 0.9, bandwidth=0.1)
    assert np.all(lo <= hi + 1e-15)
    clo, chi = fit.cdf_band(grid, 0.9)
    assert np.all(clo <= chi) and np.all(np.diff(clo) >= 0) and np.all(np.diff(chi) >= 0)


def test_projection_keeps_atoms_inside_r(fit):
    p = fit.projected()
    assert p.atoms.min() >= -1.0 and p.atoms.max() <= 1.0
    assert p.cdf([1.0])[0] == pytest.approx(1.0)


def test_inference_data_and_summary(fit):
    import arviz as az

    idata = fit.to_inference_data(grid=np.linspace(-1, 1, 5))
    assert idata.posterior["mean"].shape == (2, 150)
    assert idata.posterior["cdf"].shape == (2, 150, 5)
    table = az.summary(idata, var_names=["mean", "median", "alpha"])
    assert {"r_hat", "ess_bulk"} <= set(table.columns)
    s = fit.summary()
    assert {"rhat", "ess_bulk", "ess_tail", "mean"} <= set(s.columns)
    assert {"mean", "sd", "median", "n_clusters", "alpha"} <= set(s.index)


def test_short_run_warns_about_convergence():
    mech = LocalLaplace(epsilon=1.0, r=1.0)
    z = mech.privatize(np.linspace(-1, 1, 60), rng=0)
    with pytest.warns(ConvergenceWarning, match="R-hat|ESS"):
        DPMixture(mechanism=mech).fit(z, draws=8, warmup=2, chains=2, rng=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        f = DPMixture(mechanism=mech).fit(z, draws=8, chains=2, rng=1, diagnostics=False)
    assert f.diagnostics is None


def test_diagnostics_equal_arviz():
    import arviz as az

    from dpbayes.nonparametric.diagnostics import ess_bulk, ess_tail, rhat

    g = np.random.default_rng(9)
    for shape in [(4, 400), (2, 101)]:
        x = g.standard_normal(shape).cumsum(axis=1) * 0.1 + g.standard_normal(shape)
        assert rhat(x) == pytest.approx(float(az.rhat(x)), rel=1e-10)
        assert ess_bulk(x) == pytest.approx(float(az.ess(x, method="bulk")), rel=1e-10)
        assert ess_tail(x) == pytest.approx(float(az.ess(x, method="tail")), rel=1e-10)
