"""Gaussian answers in the query engine: calibration, accounting, noise choice, coverage."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from dpbayes.answers import Cube, JsonlStore, QueryEngine
from dpbayes.answers.planning import plan_answer, still_valid
from dpbayes.answers.queries import Query
from dpbayes.privacy import Accountant, analytic_gaussian_epsilon, analytic_gaussian_sigma
from dpbayes.privacy.composition import Event, Running


def make_cube() -> Cube:
    counts = np.array([[120, 30, 4], [0, 57, 9], [310, 2, 44]])
    return Cube.from_counts({"a": ["x", "y", "z"], "b": [1, 2, 3]}, counts)


def sim_engine(eps: float = 20.0, delta: float = 1e-5, *, composition: str = "basic", **kw):
    acc = Accountant(eps, delta, composition=composition, simulation=True)
    return QueryEngine(make_cube(), accountant=acc, rng=kw.pop("rng", 0), **kw)


def test_a_gaussian_answer_alone_is_the_analytic_calibration_at_the_budget_delta() -> None:
    eng = sim_engine(noise="gaussian")
    d, p = 10.0, 0.9
    a = eng.ask("a = x", half_width=d, confidence=p)
    assert a.status == "fresh" and a.noise == "gaussian" and a.delta == 1e-5
    # one Gaussian answer: P(|N(0, sigma^2)| <= d) = p, so sigma = d / z_{(1+p)/2}
    sigma = d / stats.norm.isf((1 - p) / 2)
    assert a.epsilon == pytest.approx(analytic_gaussian_epsilon(sigma, 1e-5, 1.0), rel=1e-9)
    assert a.confidence == pytest.approx(p, abs=1e-9)
    assert a.interval[1] - a.interval[0] == pytest.approx(2 * d, rel=1e-8)
    g = a.guarantee
    assert g is not None and g.delta == 1e-5 and g.epsilon == a.epsilon
    assert g.mechanism.startswith("gaussian (query engine)") and g.sensitivity_norm == "L2"
    assert g.details["sigma"] == pytest.approx(sigma, rel=1e-9)
    # the accountant was charged the Gaussian event: its noise ratio sigma / Delta_2
    spend = eng.accountant.spends[-1]
    assert spend.gaussian_ratio == pytest.approx(sigma / 1.0, rel=1e-9)
    assert (spend.epsilon, spend.delta) == (a.epsilon, 1e-5)
    assert spend.scope == tuple(f"cell:{j}" for j in eng.cube.query("a = x").cells)
    assert eng.history.noises == ["gaussian"]
    assert eng.history.sigmas[0] == g.details["sigma"]


def test_the_gaussian_ratio_uses_the_user_level_sensitivity() -> None:
    frame = {"a": ["x", "y", "x", "y", "x"], "person": [1, 1, 2, 3, 3]}
    cube = Cube.from_table(
        pd.DataFrame(frame), {"a": ["x", "y"]}, user_column="person", max_rows_per_user=2
    )
    acc = Accountant(10.0, 1e-6, simulation=True)
    eng = QueryEngine(cube, accountant=acc, rng=3, noise="gaussian")
    a = eng.ask("a = x", half_width=20.0, confidence=0.9)
    assert a.guarantee is not None and a.guarantee.sensitivity == 2.0
    assert a.guarantee.details["neighbouring_relation"] == "add/remove one user (<= 2 rows)"
    sigma = a.guarantee.details["sigma"]
    assert acc.spends[-1].gaussian_ratio == pytest.approx(sigma / 2.0)
    assert sigma == analytic_gaussian_sigma(a.epsilon, 1e-6, 2.0)


def test_gaussian_eps_is_minimal_given_a_mixed_history() -> None:
    eng = sim_engine(eps=50.0, gaussian_delta=1e-6)  # room for 10 Gaussian answers
    eng.ask("a = x and b = 1", half_width=20.0, confidence=0.9, noise="laplace")
    eng.ask("a = x and b = 2", half_width=20.0, confidence=0.9, noise="gaussian")
    eng.ask("a = x and b = 3", half_width=20.0, confidence=0.9, noise="laplace")
    q = eng.cube.query("a = x")
    d, p = 6.0, 0.9
    eps = eng.required_epsilon(q, half_width=d, confidence=p, noise="gaussian")
    blue = eng.history.blue(q.coefficients)
    assert blue.gaussian_sd > 0 and blue.scales.max() > 0  # the history is mixed

    def conf(e: float) -> float:
        sigma = analytic_gaussian_sigma(e, 1e-6, 1.0)
        dist = eng._combined(
            blue.scales, blue.variance, sigma, noise="gaussian", gaussian_sd_h=blue.gaussian_sd
        )
        return dist.prob_within(d)

    alone = analytic_gaussian_epsilon(d / stats.norm.isf((1 - p) / 2), 1e-6, 1.0)
    assert 0 < eps < alone  # the history helps
    assert conf(eps) >= p
    grid = np.geomspace(eps * 1e-2, eps * 0.998, 40)
    assert all(conf(e) < p for e in grid)  # and no smaller eps on a fine grid meets p
    a = eng.ask(q, half_width=d, confidence=p, noise="gaussian")
    assert a.status == "fresh" and a.epsilon == pytest.approx(eps) and a.confidence >= p - 1e-9


def test_combined_error_with_a_gaussian_answer_is_the_new_blue() -> None:
    eng = sim_engine()
    eng.ask("a = x", half_width=30.0, confidence=0.9, noise="laplace")
    eng.ask("a = x and b = 1", half_width=30.0, confidence=0.9, noise="gaussian")
    q = eng.cube.query("a = x").coefficients
    blue = eng.history.blue(q)
    for noise, scale in (("gaussian", 3.0), ("laplace", 2.0)):
        combined = eng._combined(
            blue.scales, blue.variance, scale, noise=noise, gaussian_sd_h=blue.gaussian_sd
        )
        h = eng.history.copy()  # brute force: add the fresh answer and recompute the BLUE
        if noise == "gaussian":
            h.add(q, 0.0, 1.0, noise="gaussian", sigma=scale, delta=1e-5)
        else:
            h.add(q, 0.0, 1.0 / scale)
        b2 = h.blue(q)
        assert combined.var == pytest.approx(b2.variance, rel=1e-9)
        assert combined.gaussian_sd == pytest.approx(b2.gaussian_sd, rel=1e-9)
        np.testing.assert_allclose(np.sort(combined.scales), np.sort(b2.scales[b2.scales > 0]))


def _prior_spends(acc: Accountant, n: int, eps: float = 0.1) -> None:
    for _ in range(n):
        acc.spend(eps, label="earlier releases")


def test_auto_picks_the_gaussian_under_rdp_after_many_small_answers() -> None:
    """With 40 earlier answers of eps 0.1 on the ledger, one more Laplace answer at eps 0.3
    raises the Renyi-composed eps by more than a Gaussian answer meeting the same
    requirement: auto releases the Gaussian; under basic composition the Laplace."""
    d, p = 10.0, 0.95
    lap_eps = math.log(1 / (1 - p)) / d
    sigma = d / stats.norm.isf((1 - p) / 2)
    g_eps = analytic_gaussian_epsilon(sigma, 1e-6, 1.0)
    prior = Running("rdp", 1e-6)
    for _ in range(40):
        prior = prior.plus(Event(0.1, 0.0))
    with_lap = prior.plus(Event(lap_eps, 0.0)).value[0]
    with_gauss = prior.plus(Event(g_eps, 1e-6, sigma)).value[0]
    assert with_gauss < with_lap  # the price under the ledger: the Gaussian is cheaper
    for composition, expected in (("rdp", "gaussian"), ("basic", "laplace")):
        eng = sim_engine(30.0, 1e-6, composition=composition, noise="auto")
        _prior_spends(eng.accountant, 40)
        a = eng.ask("a = x", half_width=d, confidence=p)
        assert a.status == "fresh" and a.noise == expected, a.reason
        assert f"chose {expected} under {composition} composition" in a.reason
        if expected == "gaussian":
            assert eng.accountant.spends[-1].gaussian_ratio == pytest.approx(sigma, rel=1e-9)
            assert eng.accountant.spent[0] == pytest.approx(with_gauss, rel=1e-6)
        else:
            assert a.epsilon == pytest.approx(lap_eps)
            assert eng.accountant.spent[0] == pytest.approx(4.0 + lap_eps)


def test_a_pld_ledger_gets_gaussian_answers_only() -> None:
    """A PLD budget check is a valid filter for Gaussian spends alone: under "pld" the
    engine releases Gaussian answers (auto and the default), refuses Laplace, and its
    accountant refuses a bare epsilon; nothing is spent by a refusal."""
    for noise in ("auto", None):
        eng = sim_engine(30.0, 1e-6, composition="pld", noise=noise)
        a = eng.ask("a = x", half_width=10.0, confidence=0.95)
        assert a.noise == "gaussian" and eng.accountant.spends[-1].gaussian_ratio is not None
    with pytest.raises(ValueError, match="noise='laplace' cannot be charged under"):
        sim_engine(30.0, 1e-6, composition="pld", noise="laplace")
    with pytest.raises(ValueError, match="noise='laplace' cannot be charged under"):
        eng.ask("a = x", half_width=1.0, confidence=0.95, noise="laplace")
    before = eng.accountant.spends
    with pytest.raises(ValueError, match="takes Gaussian-noise spends only"):
        eng.accountant.spend(0.1)
    assert eng.accountant.spends == before
    assert not eng.accountant.can_spend(0.1)


def test_zero_delta_budget_means_laplace_only() -> None:
    cube = make_cube()
    acc = Accountant(5.0, simulation=True)
    with pytest.raises(ValueError, match="noise='gaussian' needs a budget delta > 0"):
        QueryEngine(cube, accountant=acc, rng=0, noise="gaussian")
    eng = QueryEngine(cube, accountant=acc, rng=0, noise="auto")
    with pytest.raises(ValueError, match="noise='gaussian'"):
        eng.ask("a = x", half_width=10.0, confidence=0.9, noise="gaussian")
    assert acc.spends == () and len(eng.history) == 0
    a = eng.ask("a = x", half_width=10.0, confidence=0.9)
    assert a.noise == "laplace" and "chose" not in a.reason  # nothing else was possible


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"noise": "normal"}, "noise must be one of"),
        ({"noise": "gaussian", "gaussian_delta": 1e-3}, "gaussian_delta must be in"),
        ({"noise": "gaussian", "gaussian_delta": 0.0}, "gaussian_delta must be in"),
        ({"noise": "gaussian", "rng": None}, "rng: a seeded engine"),
    ],
)
def test_bad_noise_arguments_raise_one_line_errors(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match) as err:
        sim_engine(**kwargs)
    assert "\n" not in str(err.value)


def test_a_seeded_gaussian_engine_needs_a_simulation_accountant() -> None:
    with pytest.raises(ValueError, match=r"rng: .*simulation=True"):
        QueryEngine(make_cube(), accountant=Accountant(5.0, 1e-6), rng=1, noise="auto")


def test_refusals_and_failures_spend_nothing() -> None:
    eng = sim_engine(eps=0.5, delta=1e-6, noise="gaussian")
    a = eng.ask("a = x", half_width=1.0, confidence=0.99)  # needs eps ~ 10
    assert a.status == "refused" and "Gaussian" in a.reason and "nothing spent" in a.reason
    assert eng.accountant.spends == () and len(eng.history) == 0 and a.epsilon == 0.0
    # under basic composition a Gaussian answer at the whole budget delta leaves none
    first = eng.ask("a = x", half_width=20.0, confidence=0.9)
    assert first.status == "fresh" and eng.accountant.spent[1] == 1e-6
    spends, n = eng.accountant.spends, len(eng.history)
    second = eng.ask("b = 1", half_width=20.0, confidence=0.9)  # shares cell (x, 1)
    assert second.status == "refused" and "budget exceeded" in second.reason
    assert eng.accountant.spends == spends and len(eng.history) == n
    # bad arguments raise before anything is planned or spent
    with pytest.raises(ValueError, match="noise must be one of"):
        eng.ask("b = 2", half_width=20.0, confidence=0.9, noise="both")
    assert eng.accountant.spends == spends and len(eng.history) == n


def test_a_share_of_delta_per_gaussian_answer_under_basic_composition() -> None:
    eng = sim_engine(eps=20.0, delta=1e-5, noise="gaussian", gaussian_delta=1e-6)
    for where in ("a = x", "a = y", "a = z"):
        assert eng.ask(where, half_width=20.0, confidence=0.9).delta == 1e-6
    # parallel composition: the three read disjoint cells
    assert eng.accountant.spent[1] == pytest.approx(1e-6)
    a = eng.ask("", half_width=20.0, confidence=0.99)  # reads every cell
    assert eng.accountant.spent[1] == pytest.approx(2e-6) and a.status == "fresh"


def test_history_answers_state_the_ledger_delta_and_the_mix() -> None:
    eng = sim_engine()
    eng.ask("a = x", half_width=10.0, confidence=0.9, noise="laplace")
    eng.ask("a = y", half_width=10.0, confidence=0.9, noise="gaussian")
    a = eng.ask("a in {x, y}", half_width=30.0, confidence=0.9)
    assert a.status == "history" and a.epsilon == 0.0
    assert a.guarantee is not None and a.guarantee.delta == eng.accountant.spent[1] > 0
    assert "1 Laplace, 1 Gaussian" in a.guarantee.mechanism
    assert a.posterior is not None and a.posterior.error.gaussian_sd > 0


def test_gaussian_history_persists_across_a_restart(tmp_path: Path) -> None:
    cube = make_cube()
    acc = Accountant(10.0, 1e-5, simulation=True)
    eng = QueryEngine(cube, accountant=acc, store=JsonlStore(tmp_path / "h.jsonl"), rng=2)
    eng.ask("a = x", half_width=10.0, confidence=0.9, noise="gaussian")
    eng.ask("a = y", half_width=10.0, confidence=0.9)
    again = QueryEngine(cube, accountant=acc, store=JsonlStore(tmp_path / "h.jsonl"), rng=3)
    assert again.history.noises == ["gaussian", "laplace"]
    np.testing.assert_array_equal(again.history.variances, eng.history.variances)
    q = cube.query("a in {x, y}").coefficients
    assert again.history.blue(q).gaussian_sd == eng.history.blue(q).gaussian_sd > 0


def test_engine_at_creates_a_pld_ledger_with_delta(tmp_path: Path) -> None:
    eng = QueryEngine.at(tmp_path, make_cube(), epsilon=2.0, delta=1e-6, composition="pld")
    assert eng.accountant.total == (2.0, 1e-6) and eng.accountant.composition == "pld"
    again = QueryEngine.at(tmp_path, make_cube(), noise="auto")
    assert again.accountant.composition == "pld" and again.gaussian_delta == 1e-6
    with pytest.raises(ValueError, match=r"composition='basic' differs"):
        QueryEngine.at(tmp_path, make_cube(), composition="basic")
    with pytest.raises(ValueError, match=r"delta=0\.001 differs"):
        QueryEngine.at(tmp_path, make_cube(), delta=1e-3)


def test_a_plan_sees_new_gaussian_answers_to_its_query() -> None:
    eng = sim_engine()
    eng.ask("a = x", half_width=30.0, confidence=0.9, noise="gaussian")
    q = Query(eng.cube.query("a = x").coefficients, "a = x")
    plan = plan_answer(eng.history, q, 5.0, 0.9, sensitivity=1.0, noise="gaussian", delta=1e-5)
    assert plan.status == "fresh" and plan.noise == "gaussian" and plan.sigma is not None
    newer = eng.history.copy()
    newer.add(eng.cube.query("a = y").coefficients, 3.0, 1.0)  # another direction
    assert still_valid(plan, newer)
    newer.add(q.coefficients, 1.0, 1.0, noise="gaussian", sigma=2.0, delta=1e-5)
    assert not still_valid(plan, newer)  # a Gaussian term enters the query's error


def _mixed_run(seed: int, *, with_search: bool) -> list[tuple[str, bool]]:
    """One replication: fresh Laplace and Gaussian answers, then answers whose error mixes
    both (from the history, and with search: a fresh Gaussian answer joint with it).
    Returns (what, covered) for each answer."""
    eng = sim_engine(100.0, 1e-3, rng=seed, noise="auto", gaussian_delta=1e-5)
    truth = eng.cube.true_answer
    asks = [
        ("a = x", 10.0, 0.9, "laplace"),
        ("a = y", 10.0, 0.9, "gaussian"),
        ("b = 1", 12.0, 0.95, "gaussian"),
        ("a in {x, y}", 20.0, 0.95, None),
    ]
    if with_search:
        asks.append(("a in {x, y}", 8.0, 0.95, "gaussian"))
        asks.append(("a = x and b = 1", 10.0, 0.9, "laplace"))
    out = []
    for where, d, p, noise in asks:
        a = eng.ask(where, half_width=d, confidence=p, noise=noise)
        assert a.answered and a.interval is not None
        lo, hi = a.interval
        out.append(
            (f"{where} {a.status} {a.noise or ''}", lo <= truth(eng.cube.query(where)) <= hi)
        )
    return out


def _check_coverage(runs: list[list[tuple[str, bool]]], levels: list[float]) -> None:
    reps = len(runs)
    for j, p in enumerate(levels):
        labels = {run[j][0] for run in runs}
        assert len(labels) == 1  # the engine's choices do not depend on the noise
        covered = sum(run[j][1] for run in runs) / reps
        band = 4.0 * math.sqrt(p * (1 - p) / reps)  # binomial 4-sigma band
        assert abs(covered - p) <= band, (labels, covered, p, band)


def test_engine_intervals_cover_at_the_nominal_level_with_a_mixed_history() -> None:
    """400 seeded replications of a history with Laplace and Gaussian answers: every
    interval, in particular the one answered from the mixed history, covers the true
    answer at its nominal level within a binomial 4-sigma band."""
    runs = [_mixed_run(1000 + r, with_search=False) for r in range(400)]
    assert runs[0][3][0].startswith("a in {x, y} history")  # mixed error, from the history
    _check_coverage(runs, [0.9, 0.9, 0.95, 0.95])


@pytest.mark.slow
def test_engine_coverage_with_fresh_answers_joint_with_a_mixed_history() -> None:
    runs = [_mixed_run(5000 + r, with_search=True) for r in range(400)]
    assert runs[0][4][0] == "a in {x, y} fresh gaussian"
    _check_coverage(runs, [0.9, 0.9, 0.95, 0.95, 0.95, 0.9])
