"""The engine at the edges of floating point: every loop terminates, answers scale exactly.

Reproductions of the issue (a query with a coefficient of 1e-300 hung the service in
``LaplaceSum.half_width``; 1e-300 with a half-width of 1e-300 divided by zero in the eps
search), the bounds of the eps search checked against an adversarial oracle, and the
time limit.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpbayes.answers import LaplaceSum, QueryEngine
from dpbayes.answers import fresh as search_mod
from dpbayes.answers.blue import COEFFICIENT_RANGE, History
from dpbayes.answers.limits import TimeLimitExceeded, check_time, time_limit
from dpbayes.answers.planning import carry_over, plan_answer, required_epsilon, still_valid
from dpbayes.answers.queries import Query
from dpbayes.privacy import Accountant
from dpbayes.privacy.noise import noise_source
from dpbayes.service.config import EngineConfig

UNIT = [np.array([1.0]), np.array([1.0, 0.5, 0.25]), np.full(4, 1.0)]
SCALES = [5e-324, 1e-300, 1e-200, 1e-150, 1.0, 1e150, 1e300]


@pytest.mark.parametrize("shape", UNIT, ids=["one", "mixed", "iid"])
@pytest.mark.parametrize("b", SCALES)
def test_laplace_sum_is_scale_equivariant_at_any_scale(shape: np.ndarray, b: float) -> None:
    """E scaled by b: half-width, probabilities and density scale exactly (the old code
    looped forever in half_width below b ~ 1e-154, where b^2 underflows)."""
    ref = LaplaceSum(shape)
    dist = LaplaceSum(shape * b)
    assert dist.prob_within(math.inf) == 1.0 and dist.prob_within(0.0) == 0.0
    assert dist.prob_within(1e308) == 1.0  # d / b overflows to inf: probability 1
    assert dist.cdf(0.0) == 0.5
    if b < 1e-300:  # 5e-324 is a subnormal (one significant bit): terminates, and is > 0
        assert all(0 < dist.half_width(p) < 1e-320 for p in (0.5, 0.9, 0.999999))
        return
    for p in (0.5, 0.9, 0.999999):
        assert dist.half_width(p) == pytest.approx(b * ref.half_width(p), rel=1e-12)
    for z in (0.3, 2.0, 9.0):
        assert dist.prob_within(z * b) == pytest.approx(ref.prob_within(z), abs=1e-12)
    assert dist.pdf(b) * b == pytest.approx(ref.pdf(1.0), rel=1e-9)
    assert dist.std == pytest.approx(b * ref.std, rel=1e-12)


def test_half_width_terminates_for_every_method_at_the_highest_level() -> None:
    scales = np.array([1.0, 0.7, 0.3, 0.3, 2.0]) * 1e-290
    for method in ("exact", "pc", "pc-direct"):
        dist = LaplaceSum(scales, method=method, accuracy=1e-6)
        d = dist.half_width(0.999999)
        assert math.isfinite(d) and d > 0
        assert dist.prob_within(d) >= 0.999999 - 1e-9


def test_combined_error_cannot_divide_by_zero() -> None:
    """The issue: coefficient 1e-300 with half-width 1e-300 raised ZeroDivisionError in
    lam = v / (var_h + v) (both variances underflow to 0)."""
    cube = EngineConfig().build_cube()
    eng = QueryEngine(cube, accountant=Accountant(1.0))
    for scale_new in (1e-300, 5e-324, 1.0, 1e300):
        dist = eng._combined(np.array([1e-300]), 0.0, scale_new)
        assert dist.half_width(0.9) > 0


def test_coefficients_outside_the_range_are_refused_naming_the_argument() -> None:
    cube = EngineConfig().build_cube()
    eng = QueryEngine(cube, accountant=Accountant(1.0))
    lo, hi = COEFFICIENT_RANGE
    for c in (5e-324, 1e-300, lo / 2, hi * 2, 1e300):
        q = np.zeros(200)
        q[0] = c
        with pytest.raises(ValueError, match=r"query: the largest \|coefficient\| must be in"):
            eng.ask(q, half_width=50.0, confidence=0.9)
    assert eng.accountant.spends == () and len(eng.history) == 0


def test_queries_at_the_edges_of_the_range_scale_exactly() -> None:
    """A query c q is answered as c times q: estimate, interval and eps (answered from
    the history for c q with half-width c d, after a fresh answer of q with d)."""
    cube = EngineConfig().build_cube()
    eng = QueryEngine(cube, accountant=Accountant(1e6))
    q = np.zeros(200)
    q[:3] = [1.0, 0.5, -0.25]
    base = eng.ask(q, half_width=40.0, confidence=0.9)
    assert base.status == "fresh"
    for c in COEFFICIENT_RANGE:
        a = eng.ask(c * q, half_width=40.0 * c, confidence=0.9)
        assert a.status == "history"
        assert a.estimate == pytest.approx(c * base.estimate, rel=1e-9)
        assert a.interval[1] - a.interval[0] == pytest.approx(
            c * (base.interval[1] - base.interval[0]), rel=1e-9
        )
    # a fresh answer at each edge: eps is the same as for q (sensitivity scales with c)
    for c in COEFFICIENT_RANGE:
        other = QueryEngine(cube, accountant=Accountant(1e6))
        a = other.ask(c * q, half_width=40.0 * c, confidence=0.9)
        assert a.status == "fresh" and a.epsilon == pytest.approx(base.epsilon, rel=1e-12)
        assert a.confidence >= 0.9 - 1e-9


@pytest.mark.parametrize("d", [5e-324, 1e-300, 1e-9, 1e9, 1e300])
@pytest.mark.parametrize("p", [0.5, 0.999999])
def test_extreme_requirements_are_answered_or_refused(d: float, p: float) -> None:
    cube = EngineConfig().build_cube()
    eng = QueryEngine(cube, accountant=Accountant(100.0))
    eng.ask("health = poor", half_width=30.0, confidence=0.9)
    for where in ("health = poor", "health = good and idp = 1"):
        a = eng.ask(where, half_width=d, confidence=p)
        assert a.status in ("history", "fresh", "refused"), a
        if a.answered:
            assert a.confidence >= p - 1e-6
            assert (a.interval[1] - a.interval[0]) / 2 <= d * (1 + 1e-9)
            assert all(math.isfinite(v) for v in (a.estimate, *a.interval))
        else:
            assert "budget exceeded" in a.reason and a.epsilon == 0.0


@pytest.mark.parametrize("noise", ["laplace", "gaussian"])
@pytest.mark.parametrize("seed", range(6))
def test_eps_search_terminates_against_any_oracle(
    seed: int, noise: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever the requirement check answers (here: at random, or never), the search
    builds a bounded number of error distributions and returns a plan."""
    gen = noise_source(seed).generator()
    calls = {"n": 0}
    real = search_mod.combined_error

    def counting(*args: object, **kw: object) -> LaplaceSum:
        calls["n"] += 1
        return real(*args, **kw)  # type: ignore[arg-type]

    never = seed == 0
    monkeypatch.setattr(search_mod, "combined_error", counting)
    monkeypatch.setattr(search_mod, "_ok", lambda *_: False if never else bool(gen.random() < 0.3))
    hist = LaplaceSum(np.array([3.0, 1.0]), gaussian_sd=0.5 if noise == "gaussian" else 0.0)
    eps, dist = required_epsilon(
        hist, hist.scales, 1.0, 3.0, 0.9, cap=math.inf, noise=noise, delta=1e-6
    )
    assert calls["n"] <= 1 + 200 + 1 + 25 + 64
    assert (eps == math.inf and dist is None) if never else eps >= 0


def test_time_limit_stops_the_numerics_and_nests() -> None:
    with time_limit(0.0), pytest.raises(TimeLimitExceeded, match="nothing was spent"):
        LaplaceSum(np.linspace(0.1, 3.0, 500), method="pc")
    with time_limit(None):
        check_time()
    with time_limit(3600.0), time_limit(-1.0), pytest.raises(TimeLimitExceeded):
        check_time()  # the inner, earlier deadline holds
    with time_limit(3600.0):
        check_time()


def test_a_plan_stays_valid_when_unrelated_answers_are_added() -> None:
    """The service commits a plan made on an older history if the query's BLUE did not
    change: answers in new directions leave it; an answer of the query itself does not."""
    n = 20
    h = History(n)
    e = np.eye(n)
    h.add(e[0] + e[1], 10.0, 0.5)
    h.add(e[0], 4.0, 0.5)
    q = Query(e[1], "cell 1")
    plan = plan_answer(h, q, 5.0, 0.9, sensitivity=1.0)
    assert plan.status == "fresh"
    newer = h.copy()
    newer.add(e[5] + e[6], 3.0, 1.0)  # a new direction
    assert still_valid(plan, newer) and still_valid(plan, h)
    newer.add(e[1] + e[0], 11.0, 1.0)  # informs cell 1
    assert not still_valid(plan, newer)
    assert len(h) == 2  # the copy did not touch the original
    lone = plan_answer(h, Query(e[9], "cell 9"), 5.0, 0.9, sensitivity=1.0)
    assert lone.history_scales is None and still_valid(lone, h)
    h.add(e[9], 1.0, 1.0)
    assert not still_valid(lone, h)
    # carried over: the same plan for a fresh answer, a history plan with the new BLUE
    assert carry_over(plan, h) is plan and carry_over(lone, h) is None
    free = plan_answer(h, Query(e[0], "cell 0"), 50.0, 0.9, sensitivity=1.0)
    assert free.status == "history"
    later = h.copy()
    later.add(e[12], 2.0, 1.0)
    moved = carry_over(free, later)
    assert moved is not None and moved.status == "history" and moved.error is free.error
    assert moved.posterior.estimate == pytest.approx(free.posterior.estimate, rel=1e-12)
    assert moved.posterior.error is free.posterior.error  # no new error distribution


def test_history_copy_and_set_noisy_answer() -> None:
    h = History(5)
    h.add([1, 0, 0, 0, 0], 3.0, 1.0)
    c = h.copy()
    i = c.add([0, 1, 0, 0, 0], 0.0, 1.0)
    c.set_noisy_answer(i, 7.0)
    assert len(h) == 1 and len(c) == 2
    assert c.blue([0, 1, 0, 0, 0]).estimate == pytest.approx(7.0)
    with pytest.raises(ValueError, match="index must be < 2"):
        c.set_noisy_answer(2, 1.0)
    with pytest.raises(ValueError, match="noisy_answer"):
        c.set_noisy_answer(0, math.nan)


def test_a_tiny_scale_answer_cannot_erase_the_weights_of_the_others() -> None:
    """An answer to a query with coefficients 1e-100 (its sd 1e-87 in answer units) gets a
    rounding-level weight of 1e83 in answer units; compared there, the weights that carry
    the target fell below 1e-13 of it and were zeroed, so every later estimate was about 0
    and was served from the history with confidence 1. Weights are now compared whitened
    (weight x sd): the target's BLUE keeps its own answer's weight, 1."""
    n = 200
    h = History(n)
    h.add(np.full(n, 1e-100), -1.02e-87, 1e-12, sensitivity=5e-100)
    e0 = np.zeros(n)
    e0[0] = 1.0
    h.add(e0, 1.86e9, 3.4657e-9, sensitivity=5.0)
    t = np.zeros(n)
    t[10:40] = 1.0
    h.add(t, 300.0, 0.1498, sensitivity=5.0)
    b = h.blue(t)
    assert b.weights[2] == pytest.approx(1.0, abs=1e-9)
    assert b.estimate == pytest.approx(300.0, abs=1e-2)  # the poison's share is ~1e-4
    assert math.sqrt(b.variance) == pytest.approx(math.sqrt(2) * 5 / 0.1498, rel=1e-6)


def test_blue_matches_an_exact_reference_on_histories_of_mixed_scales() -> None:
    """Random histories whose queries' scales span 1e-99..1e99 and eps 1e-12..10: the BLUE's
    estimate (to 1e-3 of its sd) and variance (1e-3 relative) against the minimum-variance
    weights computed in 80-digit arithmetic (u = (M M^T)^+ M t on the whitened rows M).
    Before the weights were compared whitened, 33 of 120 such histories gave an estimate
    near 0 with the right variance."""
    mp = pytest.importorskip("mpmath")
    mp.mp.dps = 80
    g = np.random.default_rng(0)
    checked = 0
    for _ in range(40):
        n, k = int(g.integers(3, 8)), int(g.integers(2, 8))
        h = History(n)
        rows, ys, sds = [], [], []
        for _ in range(k):
            scale = 10.0 ** g.uniform(-99, 99)
            coef = (g.random(n) < 0.5) * g.normal(size=n)
            coef[0] = coef[0] if coef.any() else 1.0
            coef = coef / np.abs(coef).max() * scale
            eps = 10.0 ** g.uniform(-12, 1)
            y = g.normal() * scale * 10
            h.add(coef, y, eps)
            rows.append(coef)
            ys.append(y)
            sds.append(math.sqrt(2) * scale / eps)
        t = rows[0] / np.abs(rows[0]).max()
        b = h.blue(t)
        m = mp.matrix([[mp.mpf(rows[i][j]) / mp.mpf(sds[i]) for j in range(n)] for i in range(k)])
        gram = m * m.T
        evals, evecs = mp.eigsy(gram)
        mt = m * mp.matrix([mp.mpf(x) for x in t])
        top = max(abs(e) for e in evals)
        u = mp.matrix(k, 1)
        for j in range(k):
            if abs(evals[j]) > top * mp.mpf(10) ** -60:
                u += evecs[:, j] * ((evecs[:, j].T * mt)[0] / evals[j])
        est = float(sum(u[i] * mp.mpf(ys[i]) / mp.mpf(sds[i]) for i in range(k)))
        var = float(sum(u[i] ** 2 for i in range(k)))
        assert abs(b.estimate - est) <= 1e-3 * math.sqrt(var)
        assert b.variance == pytest.approx(var, rel=1e-3)
        checked += 1
    assert checked == 40


def test_the_eps_floor_raises_cheap_answers_and_refuses_above_the_cap() -> None:
    """``floor`` of the eps search: an answer that would cost less is charged the floor,
    its error distribution is the one at the floor (and meets the requirement), with or
    without a history, for Laplace and Gaussian answers; a floor above the cap refuses."""
    s, d, p = 1.0, 1e6, 0.5
    eps, dist = search_mod.required_epsilon(None, None, s, d, p)
    assert eps < 1e-5
    eps, dist = search_mod.required_epsilon(None, None, s, d, p, floor=1e-3)
    assert eps == 1e-3 and dist is not None
    assert dist.std == pytest.approx(math.sqrt(2) * s / 1e-3, rel=1e-12)
    assert dist.prob_within(d) >= p
    eps, dist = search_mod.required_epsilon(None, None, s, d, p, floor=1e-3, cap=1e-4)
    assert eps == 1e-3 and dist is None
    eps, dist = search_mod.required_epsilon(
        None, None, s, d, p, floor=1e-3, noise="gaussian", delta=1e-6
    )
    assert eps == 1e-3 and dist is not None and dist.prob_within(d) >= p
    h = History(3)
    h.add([1.0, 1.0, 0.0], 10.0, 1e-4)
    b = h.blue(np.array([1.0, 1.0, 0.0]))
    hist = LaplaceSum(b.scales)
    eps, dist = search_mod.required_epsilon(hist, b.scales, s, 1e3, 0.99)
    assert 0 < eps < 1e-2
    floor = 5e-2
    eps, dist = search_mod.required_epsilon(hist, b.scales, s, 1e3, 0.99, floor=floor)
    assert eps == floor and dist is not None and dist.prob_within(1e3) >= 0.99
    # the history alone meets a loose requirement: free, whatever the floor
    assert search_mod.required_epsilon(hist, b.scales, s, 1e9, 0.5, floor=floor)[0] == 0.0
