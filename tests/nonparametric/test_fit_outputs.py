"""Outputs of a fit: draws of P, functionals, bands, ArviZ, diagnostics and warnings."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy import stats

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


def test_density_draws_are_the_normal_kernel_mixture_of_each_draw(fit):
    """Each draw's smoothed density is sum_p w_p N(t; a_p, h^2) over its atoms (the
    compiled kernel skips the zero-weight padding of shorter draws)."""
    grid = np.linspace(-2, 2, 41)
    got = fit.density_draws(grid, bandwidth=0.3)
    w = fit.weights()
    assert np.any(w == 0.0)  # padding is present, and skipped
    want = np.einsum("cda,cdag->cdg", w, stats.norm.pdf(grid, fit.atoms[..., None], 0.3))
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)


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


def test_simultaneous_band_holds_whole_draws(fit):
    from dpbayes.nonparametric.fit import simultaneous_band

    grid = np.linspace(-1, 1, 41)
    d = fit.cdf_draws(grid).reshape(-1, grid.size)
    for level in (0.5, 0.8, 0.95):
        lo, hi = fit.cdf_band(grid, level, kind="simultaneous")
        inside = np.mean(np.all((d >= lo) & (d <= hi), axis=1))
        assert inside >= level  # by construction (more with ties between 300 draws)
        plo, phi = fit.cdf_band(grid, level)
        assert np.all(lo <= plo + 1e-12) and np.all(hi >= phi - 1e-12)
    # a random-walk ensemble: the band's content is the level up to one draw's worth
    g = np.random.default_rng(0)
    walks = np.cumsum(g.standard_normal((2000, 30)), axis=1)
    lo, hi = simultaneous_band(walks, 0.9)
    assert 0.9 <= np.mean(np.all((walks >= lo) & (walks <= hi), axis=1)) <= 0.9 + 1 / 2000 + 0.01
    with pytest.raises(ValueError, match="kind"):
        fit.cdf_band(grid, 0.9, kind="joint")


def test_cdf_median_is_the_pointwise_median(fit):
    grid = np.linspace(-1.5, 1.5, 61)
    med = fit.cdf_median(grid)
    np.testing.assert_allclose(med, np.median(fit.cdf_draws(grid), axis=(0, 1)))
    assert np.all(np.diff(med) >= 0) and 0 <= med[0] and med[-1] <= 1


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"support": "both"}, ValueError, "support"),
        ({"base_prior": "default"}, ValueError, "base_prior"),
        ({"base_prior": (0.0, 1.0)}, TypeError, "base_prior"),
        ({"alpha_prior": (0.0, 1.0)}, ValueError, "shape"),
        ({"atom_moves": -1}, ValueError, "atom_moves"),
        ({"marginal_moves": 1}, TypeError, "marginal_moves"),
        ({"base": (0.0, -1.0)}, ValueError, "sigma"),
    ],
)
def test_model_arguments_are_checked(kwargs, error, match):
    with pytest.raises(error, match=match):
        DPMixture(mechanism=LocalLaplace(epsilon=1.0, r=1.0), **kwargs)


def test_custom_mechanism_needs_base_and_real_support():
    from dpbayes.nonparametric import CustomMechanism

    mech = CustomMechanism(logpdf=lambda z, x: -np.abs(z - x))
    with pytest.raises(ValueError, match="base"):
        DPMixture(mechanism=mech)
    with pytest.raises(ValueError, match="clipping bound"):
        DPMixture(mechanism=mech, base=(0.0, 1.0), support="clipped")
    assert DPMixture(mechanism=mech, base=(0.0, 1.0)).base_prior is None


def test_base_prior_checks_and_draws():
    from dpbayes.nonparametric import BasePrior

    with pytest.raises(ValueError, match="sigma_lo"):
        BasePrior(sigma_lo=2.0, sigma_hi=1.0)
    with pytest.raises(ValueError, match="mu_sd"):
        BasePrior(mu_sd=0.0)
    prior = BasePrior.for_range(3.0)
    assert (prior.mu_sd, prior.sigma_lo, prior.sigma_hi) == (3.0, 0.15, 12.0)
    g = np.random.default_rng(0)
    draws = np.array([prior.rvs(g) for _ in range(4000)])
    # log sigma uniform on [log 0.15, log 12]: KS against that law; mu ~ N(0, 9)
    lo, hi = np.log(0.15), np.log(12.0)
    assert stats.kstest(np.log(draws[:, 1]), stats.uniform(lo, hi - lo).cdf).pvalue > 1e-4
    assert stats.kstest(draws[:, 0], stats.norm(0, 3).cdf).pvalue > 1e-4
