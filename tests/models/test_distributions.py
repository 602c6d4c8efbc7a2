"""Beta, Dirichlet and Normal against scipy.stats, HDI correctness, validation, round trips."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import stats

from dpbayes.models import Beta, Dirichlet, Normal, distribution_from_dict

BETAS = [(2.0, 5.0), (0.5, 0.5), (1.0, 1.0), (0.7, 3.0), (4.0, 0.8), (30.0, 2.0), (1e5, 2e5)]
NORMALS = [(0.0, 1.0), (-3.5, 0.2), (1e3, 50.0)]
X = np.array([0.001, 0.1, 0.25, 0.5, 0.75, 0.9, 0.999])
Q = np.array([0.001, 0.025, 0.3, 0.5, 0.8, 0.975, 0.999])


@pytest.mark.parametrize(("a", "b"), BETAS)
def test_beta_matches_scipy(a: float, b: float) -> None:
    d, ref = Beta(a, b), stats.beta(a, b)
    assert d.mean() == pytest.approx(ref.mean(), rel=1e-12)
    assert d.var() == pytest.approx(ref.var(), rel=1e-10)
    assert d.std() == pytest.approx(ref.std(), rel=1e-10)
    np.testing.assert_allclose(d.pdf(X), ref.pdf(X), rtol=1e-12)
    np.testing.assert_allclose(d.logpdf(X), ref.logpdf(X), rtol=1e-12)
    np.testing.assert_allclose(d.cdf(X), ref.cdf(X), rtol=1e-12)
    np.testing.assert_allclose(d.ppf(Q), ref.ppf(Q), rtol=1e-12)
    np.testing.assert_allclose(d.interval(0.9), ref.interval(0.9), rtol=1e-10)
    assert d.to_scipy().mean() == pytest.approx(ref.mean())


@pytest.mark.parametrize(("mu", "sd"), NORMALS)
def test_normal_matches_scipy(mu: float, sd: float) -> None:
    d, ref = Normal(mu, sd), stats.norm(mu, sd)
    x = mu + sd * np.linspace(-4, 4, 9)
    assert d.mean() == mu and d.var() == pytest.approx(sd**2) and d.std() == sd
    np.testing.assert_allclose(d.pdf(x), ref.pdf(x), rtol=1e-12)
    np.testing.assert_allclose(d.logpdf(x), ref.logpdf(x), rtol=1e-12)
    np.testing.assert_allclose(d.cdf(x), ref.cdf(x), rtol=1e-12)
    np.testing.assert_allclose(d.ppf(Q), ref.ppf(Q), rtol=1e-12)
    np.testing.assert_allclose(d.interval(0.95), ref.interval(0.95), rtol=1e-12)
    assert d.interval(0.95, kind="hdi") == d.interval(0.95)


@pytest.mark.parametrize(
    ("a", "b"), [(2.0, 5.0), (3.0, 1.5), (30.0, 2.0), (1.5, 200.0), (1e5, 2e5), (1.01, 1e6)]
)
@pytest.mark.parametrize("level", [0.5, 0.9, 0.99])
def test_beta_hdi_equal_density_and_mass(a: float, b: float, level: float) -> None:
    d = Beta(a, b)
    lo, hi = d.interval(level, kind="hdi")
    assert d.cdf(hi) - d.cdf(lo) == pytest.approx(level, abs=1e-10)
    assert d.logpdf(lo) == pytest.approx(d.logpdf(hi), abs=1e-6)
    # no interval of the same mass is narrower: compare with a grid over the lower tail
    p = np.linspace(0, 1 - level, 2001)
    widths = d.ppf(p + level) - d.ppf(p)
    assert hi - lo <= widths.min() * (1 + 1e-9)


@pytest.mark.parametrize(("a", "b"), [(2.0, 8.0), (8.0, 2.0), (1.5, 30.0)])
def test_beta_hdi_narrower_than_central_when_skewed(a: float, b: float) -> None:
    d = Beta(a, b)
    lo, hi = d.interval(0.9, kind="hdi")
    clo, chi = d.interval(0.9)
    assert hi - lo < chi - clo


def test_beta_hdi_symmetric_is_central() -> None:
    d = Beta(4.0, 4.0)
    np.testing.assert_allclose(d.interval(0.8, kind="hdi"), d.interval(0.8), atol=1e-9)


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        (0.5, 3.0, "left"),  # decreasing density: mode at 0
        (1.0, 3.0, "left"),
        (3.0, 1.0, "right"),  # increasing density: mode at 1
        (4.0, 0.5, "right"),
        (0.5, 0.9, "left"),  # U-shaped, heavier at 0: narrowest interval touches 0
        (0.9, 0.5, "right"),
    ],
)
def test_beta_hdi_boundary_modes(a: float, b: float, expected: str) -> None:
    d = Beta(a, b)
    lo, hi = d.interval(0.9, kind="hdi")
    assert d.cdf(hi) - d.cdf(lo) == pytest.approx(0.9, abs=1e-12)
    if expected == "left":
        assert lo == 0.0 and hi == pytest.approx(d.ppf(0.9))
    else:
        assert hi == 1.0 and lo == pytest.approx(d.ppf(0.1))
    p = np.linspace(0, 0.1, 1001)
    assert hi - lo <= (d.ppf(p + 0.9) - d.ppf(p)).min() * (1 + 1e-9)


def test_uniform_hdi_is_central() -> None:
    assert Beta(1.0, 1.0).interval(0.9, kind="hdi") == pytest.approx((0.05, 0.95))


def test_dirichlet_matches_scipy_and_marginals() -> None:
    alpha = np.array([2.0, 3.5, 0.7])
    d, ref = Dirichlet(alpha), stats.dirichlet(alpha)
    np.testing.assert_allclose(d.mean(), ref.mean(), rtol=1e-12)
    np.testing.assert_allclose(d.var(), ref.var(), rtol=1e-12)
    pts = np.array([[0.2, 0.5, 0.3], [0.6, 0.3, 0.1], [0.1, 0.1, 0.8]])
    np.testing.assert_allclose(d.logpdf(pts), [ref.logpdf(p) for p in pts], rtol=1e-12)
    np.testing.assert_allclose(d.pdf(pts[0]), ref.pdf(pts[0]), rtol=1e-12)
    assert d.logpdf([0.5, 0.6, -0.1]) == -np.inf
    assert d.logpdf([0.5, 0.6, 0.1]) == -np.inf
    m1 = d.marginal(1)
    assert (m1.a, m1.b) == (3.5, alpha.sum() - 3.5)
    iv = d.interval(0.9, kind="hdi")
    assert iv.shape == (3, 2)
    np.testing.assert_allclose(iv[2], Beta(0.7, 5.5).interval(0.9, kind="hdi"))
    np.testing.assert_allclose(d.interval(0.9)[0], stats.beta(2.0, 4.2).interval(0.9))


def test_dirichlet_alpha_is_read_only_and_hashable() -> None:
    src = np.array([1.0, 2.0])
    d = Dirichlet(src)
    src[0] = 5.0  # the distribution holds its own copy
    assert d.alpha[0] == 1.0
    with pytest.raises(ValueError):
        d.alpha[0] = 3.0
    assert d == Dirichlet([1.0, 2.0]) and hash(d) == hash(Dirichlet([1, 2]))
    assert d != Dirichlet([1.0, 2.5])


def test_rvs_reproducible_with_explicit_random_state() -> None:
    for d in (Beta(2, 3), Normal(1, 2), Dirichlet([1, 2, 3])):
        x1 = d.rvs(size=5, random_state=np.random.default_rng(7))
        x2 = d.rvs(size=5, random_state=np.random.default_rng(7))
        np.testing.assert_array_equal(x1, x2)
    assert Dirichlet([1, 2, 3]).rvs(random_state=3).shape == (3,)
    assert Dirichlet([1, 2, 3]).rvs(size=4, random_state=3).shape == (4, 3)


@pytest.mark.parametrize("dist", [Beta(2, 3.5), Normal(-1.0, 0.5), Dirichlet([1.0, 2.0, 3.0])])
def test_dict_round_trip(dist: object) -> None:
    d = dist.to_dict()  # type: ignore[attr-defined]
    assert json.loads(json.dumps(d)) == d
    assert distribution_from_dict(d) == dist


def test_to_dict_shapes() -> None:
    assert Beta(1, 2).to_dict() == {"family": "beta", "a": 1.0, "b": 2.0}
    assert Normal(0, 1).to_dict() == {"family": "normal", "mean": 0.0, "sd": 1.0}
    assert Dirichlet([1, 2]).to_dict() == {"family": "dirichlet", "alpha": [1.0, 2.0]}
    assert Beta(1, 2).params == {"a": 1.0, "b": 2.0}


@pytest.mark.parametrize(
    ("make", "name", "exc"),
    [
        (lambda: Beta(0, 1), "a", ValueError),
        (lambda: Beta(1, -2), "b", ValueError),
        (lambda: Beta(np.nan, 1), "a", ValueError),
        (lambda: Beta(1, np.inf), "b", ValueError),
        (lambda: Beta("1", 1), "a", TypeError),
        (lambda: Normal(np.nan, 1), "mean", ValueError),
        (lambda: Normal(0, 0), "sd", ValueError),
        (lambda: Dirichlet([1.0]), "alpha", ValueError),
        (lambda: Dirichlet([1.0, 0.0]), "alpha", ValueError),
        (lambda: Dirichlet([[1.0, 2.0]]), "alpha", ValueError),
        (lambda: Dirichlet([1.0, np.nan]), "alpha", ValueError),
        (lambda: Beta(1, 2).interval(1.0), "level", ValueError),
        (lambda: Beta(1, 2).interval(0.9, kind="hpd"), "kind", ValueError),
        (lambda: Dirichlet([1, 2]).marginal(2), "i", ValueError),
        (lambda: distribution_from_dict({"family": "gamma"}), "family", ValueError),
    ],
)
def test_bad_parameters_name_the_argument(make, name: str, exc: type) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(exc, match=name):
        make()


def test_dirichlet_has_no_cdf_or_ppf() -> None:
    assert not hasattr(Dirichlet([1, 2]), "cdf")
    assert not hasattr(Dirichlet([1, 2]), "ppf")


# Beta quantiles at large concentrations: scipy's inversion put both ends of the 95%
# interval of Beta(1e3, 1e9) at 1.9e-6, where the cdf is 1 (the interval of a coin's
# posterior after 1e9 records), and reversed the interval beyond a + b ~ 1e19.
@pytest.mark.parametrize(
    ("a", "b"),
    [(1e3, 1e9), (1e3, 1e10), (2.0, 1e12), (1e4, 1e13), (1e12, 3e12), (2e15, 1e15), (50, 60)],
)
def test_beta_intervals_hold_their_mass_at_large_concentrations(a: float, b: float) -> None:
    from scipy import special

    dist = Beta(a, b)
    lo, hi = dist.interval(0.95)
    assert 0 < lo < hi < 1
    assert special.betainc(a, b, lo) == pytest.approx(0.025, rel=1e-7)
    assert special.betaincc(a, b, hi) == pytest.approx(0.025, rel=1e-7)
    assert dist.ppf(0.025) == pytest.approx(lo, rel=1e-9)
    hlo, hhi = dist.interval(0.95, kind="hdi")
    assert special.betainc(a, b, hhi) - special.betainc(a, b, hlo) == pytest.approx(0.95, 1e-7)
    assert hhi - hlo <= (hi - lo) * (1 + 1e-12)


@pytest.mark.parametrize(("a", "b"), [(2e17, 1e17), (2e19, 1e19), (1e19, 3e19)])
def test_beta_intervals_beyond_the_incomplete_beta_function(a: float, b: float) -> None:
    """Where betainc itself is not finite, the ends are the Normal quantiles to well within
    a standard deviation (skewness ~ 1e-9 there), in order, and the HDI is the same."""
    dist = Beta(a, b)
    m, sd = dist.mean(), float(np.sqrt(dist.var()))
    lo, hi = dist.interval(0.95)
    assert lo < hi
    assert (lo - m) / sd == pytest.approx(-1.959964, abs=1e-3)
    assert (hi - m) / sd == pytest.approx(1.959964, abs=1e-3)
    hlo, hhi = dist.interval(0.95, kind="hdi")
    assert (hlo - m) / sd == pytest.approx(-1.959964, abs=1e-3)
    assert (hhi - m) / sd == pytest.approx(1.959964, abs=1e-3)
