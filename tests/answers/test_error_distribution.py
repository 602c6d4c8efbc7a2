"""The error distribution of a BLUE: a weighted sum of independent Laplaces (paper 000 §4)."""

from __future__ import annotations

import math
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from scipy import integrate, stats

from dpbayes.answers import LaplaceSum
from dpbayes.privacy.noise import noise_source

Z4 = stats.norm.isf(0.5e-4)  # two-sided 1e-4 z-bound


def eq23_pdf(z: float, k: int, b: float) -> float:
    """Paper 000 eq. 23, written out term by term (independent of the implementation)."""
    u = abs(z) / b
    total = 0.0
    for j in range(k):
        total += (
            math.comb(k - 1 + j, j)
            * u ** (k - 1 - j)
            / (math.factorial(k - 1 - j) * 2 ** (k - 1 + j))
        )
    return math.exp(-u) / (2 * b) * total


@pytest.mark.parametrize(("k", "b"), [(1, 1.0), (2, 0.7), (5, 2.0), (12, 1.3)])
def test_iid_closed_form_matches_eq23(k: int, b: float) -> None:
    dist = LaplaceSum(np.full(k, b), method="exact")
    assert dist.details["formula"].startswith("eq. 23")
    for z in [0.1, 0.9, 2.5, 7.0]:
        mass, _ = integrate.quad(eq23_pdf, 0.0, z, args=(k, b), epsabs=1e-13, epsrel=1e-12)
        assert dist.prob_within(z) == pytest.approx(2 * mass, abs=1e-10)
        assert dist.pdf(z) == pytest.approx(eq23_pdf(z, k, b), rel=1e-10, abs=1e-14)
    assert dist.cdf(0.0) == pytest.approx(0.5)
    assert dist.var == pytest.approx(2 * k * b * b)


def test_inversion_matches_closed_form_for_iid(monkeypatch: pytest.MonkeyPatch) -> None:
    iid = LaplaceSum(np.full(8, 1.5))
    # Nearly equal scales skip the closed form and go through characteristic-function inversion.
    near = LaplaceSum(1.5 * (1 + 1e-10 * np.arange(8)), method="exact")
    assert "Gil-Pelaez" in near.details["formula"]
    z = np.linspace(-15, 15, 31)
    assert np.max(np.abs(iid.cdf(z) - near.cdf(z))) < max(near.error, 1e-8)
    assert np.max(np.abs(iid.pdf(z) - near.pdf(z))) < 1e-7


MIXED = [np.array([1.0, 0.5, 2.0, 0.3]), np.array([1.0, 1.0, 0.25, 3.0])]


def _mc_cdf(scales: np.ndarray, points: np.ndarray, n: int, seed: int) -> np.ndarray:
    """Empirical P(E <= z) from n draws, chunked and vectorised."""
    gen = noise_source(seed).generator()
    below = np.zeros(points.size)
    chunk = 1_000_000
    done = 0
    while done < n:
        c = min(chunk, n - done)
        y = gen.laplace(0.0, 1.0, size=(c, scales.size)) @ scales
        below += (y[:, None] <= points[None, :]).sum(axis=0)
        done += c
    return below / n


@pytest.mark.parametrize(("which", "n"), [(0, 2 * 10**6), (1, 10**7)])
def test_mixed_scales_against_1e7_monte_carlo(which: int, n: int) -> None:
    scales = MIXED[which]
    # MIXED[0]: partial fractions; MIXED[1] (repeated scales): characteristic-function inversion.
    dist = LaplaceSum(scales, method="exact")
    points = np.array([-6.0, -3.0, -1.0, -0.2, 0.0, 0.5, 1.5, 4.0, 8.0])
    emp = _mc_cdf(scales, points, n, seed=11 + which)
    f = dist.cdf(points)
    tol = Z4 * np.sqrt(f * (1 - f) / n) + dist.error
    assert np.all(np.abs(emp - f) <= tol)


def test_partial_fractions_and_inversion_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    scales = MIXED[0]
    pf = LaplaceSum(scales, method="exact")
    assert pf.details["formula"].startswith("partial fractions")
    monkeypatch.setattr(LaplaceSum, "_init_partial_fractions", lambda self: False)
    gp = LaplaceSum(scales, method="exact")
    z = np.linspace(0, 12, 25)
    assert np.max(np.abs(pf.prob_within(z) - gp.prob_within(z))) <= gp.error + pf.error
    assert np.max(np.abs(pf.pdf(z) - gp.pdf(z))) < 1e-7


@pytest.mark.parametrize("method", ["pc", "pc-direct"])
def test_pc_within_its_reported_error(method: str) -> None:
    scales = MIXED[1]
    exact = LaplaceSum(scales, method="exact", accuracy=1e-10)
    pc = LaplaceSum(scales, method=method, accuracy=1e-5)
    z = np.linspace(-10, 10, 41)
    err = np.max(np.abs(pc.cdf(z) - exact.cdf(z)))
    assert err <= pc.error + exact.error
    assert pc.details["lost_mass"] < 1e-5
    assert pc.error < 1e-4


@pytest.mark.parametrize("gaussian_sd", [0.0, 0.15])
def test_pc_by_fft_keeps_its_reported_error_in_the_far_tails(gaussian_sd: float) -> None:
    """A review: at a fine grid (step 6e-5 under a scale of 5) the DFT of one discretised
    Laplace lost 1e-7 relatively near frequency 0, which spread over the 2 million grid
    points as mass 3e-14 each: P(E > 25 sd) came out 1.4e-8 where it is 1e-16, 4x the
    reported error of 5.7e-9."""
    scales = np.r_[5.0, np.random.default_rng(2).uniform(0.01, 0.2, 50)]
    exact = LaplaceSum(scales, gaussian_sd=gaussian_sd, method="exact", accuracy=1e-13)
    pc = LaplaceSum(scales, gaussian_sd=gaussian_sd, method="pc", accuracy=1e-9)
    z = np.linspace(0, 40, 161) * pc.std
    err = np.abs(pc.sf(z) - exact.sf(z))
    assert np.max(err) <= pc.error + exact.error
    assert np.max(err[z > 8 * pc.std]) < 1e-11


def test_mc_error_measures() -> None:
    scales = MIXED[0]
    exact = LaplaceSum(scales)
    mc = LaplaceSum(scales, method="mc", n_samples=200_000, rng=3)
    z = np.linspace(-6, 6, 25)
    assert np.max(np.abs(mc.cdf(z) - exact.cdf(z))) <= mc.error * Z4 / 3
    # eq. 27: sum of variances of the probability mass vector, <= 1/n.
    assert 0 < mc.details["eq27_error"] <= 1.0 / 200_000
    assert mc.details["simulation"] is True


def test_auto_meets_accuracy_and_is_deterministic() -> None:
    gen = noise_source(5).generator()
    scales = gen.exponential(size=300)
    a = LaplaceSum(scales, accuracy=1e-6)
    b = LaplaceSum(scales, accuracy=1e-6)
    assert a.method in ("exact", "pc")
    assert a.error <= 1e-6
    assert a.prob_within(3.0) == b.prob_within(3.0)


def test_dominant_scale_falls_back_or_stays_accurate() -> None:
    scales = np.concatenate([[1.0], np.full(200, 1e-3) * (1 + np.arange(200) * 1e-3)])
    d = LaplaceSum(scales, accuracy=1e-6)
    assert d.error <= 1e-6
    lap = stats.laplace(scale=1.0)
    # The tiny scales barely matter: close to a single Laplace.
    assert abs(d.cdf(1.0) - lap.cdf(1.0)) < 1e-3


@pytest.mark.parametrize("p", [0.5, 0.9, 0.95, 0.99])
def test_half_width_is_the_narrowest_symmetric_interval(p: float) -> None:
    d = LaplaceSum(MIXED[1])
    h = d.half_width(p)
    assert d.prob_within(h) == pytest.approx(p, abs=1e-9)
    lo, hi = d.interval(p)
    assert lo == -hi
    assert d.ppf(0.5 + p / 2) == pytest.approx(h)
    # Chebyshev (Thm 3.2) is looser.
    assert h <= math.sqrt(d.var / (1 - p))


def test_single_laplace_closed_form() -> None:
    d = LaplaceSum([2.0])
    z = np.array([-5.0, -1.0, 0.3, 4.0])
    np.testing.assert_allclose(d.cdf(z), stats.laplace(scale=2.0).cdf(z), atol=1e-14)
    assert d.half_width(0.95) == pytest.approx(2.0 * math.log(20.0))


@pytest.mark.parametrize(
    ("kwargs", "exc"),
    [
        ({"scales": [1.0, -1.0]}, ValueError),
        ({"scales": [1.0, float("nan")]}, ValueError),
        ({"scales": [0.0, 0.0]}, ValueError),
        ({"scales": []}, ValueError),
        ({"scales": "abc"}, TypeError),
        ({"scales": [1.0], "method": "magic"}, ValueError),
        ({"scales": [1.0], "accuracy": 0.5}, ValueError),
        ({"scales": [1.0], "accuracy": -1.0}, ValueError),
    ],
)
def test_bad_arguments(kwargs: dict, exc: type) -> None:
    with pytest.raises(exc):
        LaplaceSum(**kwargs)


def test_auto_moves_to_pc_when_a_level_near_one_needs_too_many_nodes() -> None:
    """A query service's history (found by a review): one dominant scale, one small and
    169 tiny ones. ``auto`` chose the inversion, whose nodes for |z| <= 3 sd were fine;
    a 0.99999 requirement needed them out to 11 sd, past the inversion's limit, and the
    request failed (the service refused it as beyond its numerics). ``auto`` now moves
    to PC there; ``exact`` asked for by name still raises. (With its default
    ``max_scales`` ``auto`` rounds the 171 scales up to a few distinct ones and the
    inversion copes: the move is checked with the rounding off.)"""
    scales = np.r_[1.0, 1e-4, np.geomspace(1e-9, 1e-5, 169)]
    rounded = LaplaceSum(scales, accuracy=1e-6)
    assert rounded.rounding_ratio > 1.0 and np.unique(rounded.scales).size <= 48
    assert rounded.half_width(0.99999) == pytest.approx(-math.log(1e-5), abs=1e-3)
    d = LaplaceSum(scales, accuracy=1e-6, max_scales=None)
    assert d.method == "exact"
    h = d.half_width(0.99999)
    assert d.method == "pc" and d.details["moved_to_pc_at"] > 3 * d.std
    # the tiny scales move a Laplace(1)'s quantile by far less than the accuracy allows
    assert h == pytest.approx(-math.log(1e-5), abs=1e-3)
    assert d.error <= d.accuracy
    assert d.prob_within(h) == pytest.approx(0.99999, abs=2e-6)
    assert d.pdf(h) == pytest.approx(0.5 * math.exp(-h), rel=1e-2)
    assert d.cdf(0.0) == 0.5 and d.cdf(1.0) == pytest.approx(1 - 0.5 * math.exp(-1), abs=2e-6)
    e = LaplaceSum(scales, accuracy=1e-6, method="exact")
    with pytest.raises(ValueError, match="use method='pc'"):
        e.half_width(0.99999)


def test_extended_nodes_keep_the_dropped_scales_error() -> None:
    """A second review: extending the inversion's nodes for a level near 1 reported the
    inversion's error alone, without the dropped tiny scales' share."""
    scales = np.r_[1.0, np.geomspace(1e-3, 0.5, 20), np.geomspace(1e-12, 1e-9, 13)]
    d = LaplaceSum(scales, gaussian_sd=0.15, accuracy=1.5e-9)
    assert d.method == "exact" and d._dropped_error > 0
    zmax = d._quad.zmax
    d.half_width(1 - 1e-9)
    q = d._quad
    assert q.zmax > zmax  # the nodes were extended
    zs = np.linspace(0.25, 1.0, 4) * q.zmax
    inversion = q.tail + np.abs(d._gp_within(zs) - d._gp_within(zs, lo_order=True)).max()
    assert d.error >= inversion + d._dropped_error


def test_threads_extend_the_nodes_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A review: two threads asking one distribution for a level near 1 at once each
    rebuilt the nodes (the last build won; its error could differ from the first's)."""
    scales = np.r_[1.0, np.geomspace(1e-3, 0.5, 20)]
    d = LaplaceSum(scales, gaussian_sd=0.15, accuracy=1e-9)
    assert d.method == "exact" and d._quad is not None
    zmax = d._quad.zmax
    builds: list[float] = []
    build = LaplaceSum._build_quadrature

    def counted(self: LaplaceSum, z: float) -> None:
        builds.append(z)
        time.sleep(0.05)  # hold the build long enough for the other threads to arrive
        build(self, z)

    monkeypatch.setattr(LaplaceSum, "_build_quadrature", counted)
    barrier = threading.Barrier(6)

    def ask() -> float:
        barrier.wait()
        return float(d.prob_within(3.0 * zmax * d._unit))

    with ThreadPoolExecutor(6) as pool:
        answers = list(pool.map(lambda _: ask(), range(6)))
    assert len(builds) == 1 and len(set(answers)) == 1
