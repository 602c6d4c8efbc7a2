"""The utility-driven query engine (paper 000 §5)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dpbayes.answers import (
    AnswerRecord,
    Cube,
    JsonlStore,
    LaplaceSum,
    MemoryStore,
    QueryEngine,
)
from dpbayes.privacy import Accountant, LedgerError, Neighbours


def make_cube() -> Cube:
    counts = np.array([[120, 30, 4], [0, 57, 9], [310, 2, 44]])
    return Cube.from_counts({"a": ["x", "y", "z"], "b": [1, 2, 3]}, counts)


def engine(eps: float = 5.0, **kw) -> QueryEngine:
    return QueryEngine(
        make_cube(), accountant=Accountant(eps, simulation=True), rng=kw.pop("rng", 0), **kw
    )


def test_fresh_answer_spends_the_closed_form_epsilon() -> None:
    eng = engine()
    a = eng.ask("a = x", half_width=10.0, confidence=0.9)
    assert a.status == "fresh"
    # A single Laplace answer: P(|Lap(1/eps)| <= d) = 1 - e^{-d eps} = p.
    assert a.epsilon == pytest.approx(math.log(10.0) / 10.0)
    assert a.guarantee is not None
    assert a.guarantee.neighbours is Neighbours.ADD_REMOVE
    assert a.guarantee.epsilon == pytest.approx(a.epsilon)
    assert a.guarantee.simulation is True
    assert a.confidence == pytest.approx(0.9, abs=1e-9)
    assert a.interval[1] - a.interval[0] == pytest.approx(20.0, rel=1e-6)
    assert eng.accountant.spent[0] == pytest.approx(a.epsilon)


def test_history_answer_spends_nothing() -> None:
    eng = engine()
    first = eng.ask("a = x", half_width=5.0, confidence=0.95)
    again = eng.ask("a = x", half_width=10.0, confidence=0.9)
    assert again.status == "history" and again.epsilon == 0.0
    assert again.estimate == pytest.approx(first.estimate)
    assert again.guarantee is not None and again.guarantee.details["new_spend"] == 0.0
    assert eng.accountant.spent[0] == pytest.approx(first.epsilon)
    assert len(eng.accountant.spends) == 1


def test_required_epsilon_is_minimal_given_the_history() -> None:
    eng = engine()
    eng.ask("a = x and b = 1", half_width=20.0, confidence=0.9)
    eng.ask("a = x and b = 2", half_width=20.0, confidence=0.9)
    eng.ask("a = x and b = 3", half_width=20.0, confidence=0.9)
    q = eng.cube.query("a = x")
    d, p = 5.0, 0.9
    eps = eng.required_epsilon(q, half_width=d, confidence=p)
    alone = math.log(1 / (1 - p)) / d
    assert 0 < eps < alone  # the history helps
    blue = eng.history.blue(q.coefficients)

    def conf(e: float) -> float:
        return eng._combined(blue.scales, blue.variance, 1.0 / e).prob_within(d)

    assert conf(eps) >= p
    assert conf(eps * 0.995) < p
    a = eng.ask(q, half_width=d, confidence=p)
    assert a.status == "fresh" and a.epsilon == pytest.approx(eps)
    assert a.confidence >= p - 1e-9


def test_parallel_composition_over_disjoint_cells() -> None:
    eng = engine(eps=1.0)
    eps_each = []
    for w in ["a = x", "a = y", "a = z"]:
        ans = eng.ask(w, half_width=4.0, confidence=0.95)
        eps_each.append(ans.epsilon)
    assert all(e > 0.5 for e in eps_each)  # three of them would exceed 1 sequentially
    assert eng.accountant.spent[0] == pytest.approx(max(eps_each))


def test_refusal_when_budget_is_short_spends_nothing() -> None:
    eng = engine(eps=0.1)
    a = eng.ask("a = x", half_width=1.0, confidence=0.99)
    assert a.status == "refused" and not a.answered
    assert "budget exceeded" in a.reason and a.estimate is None
    assert eng.accountant.spent[0] == 0.0 and len(eng.history) == 0
    capped = engine(eps=10.0, max_epsilon=0.5)
    b = capped.ask("a = x", half_width=1.0, confidence=0.99)
    assert b.status == "refused" and "max_epsilon" in b.reason
    assert capped.accountant.spent[0] == 0.0


@pytest.mark.parametrize(
    ("query", "kw", "exc"),
    [
        ("", {}, None),  # the whole cube is a valid query; checked below separately
        ("c = 1", {}, ValueError),  # unknown attribute
        (np.zeros(9), {}, ValueError),  # empty
        (np.ones(4), {}, ValueError),  # wrong length
        (np.r_[1.0, np.nan, np.zeros(7)], {}, ValueError),
        ("a = x", {"half_width": -1.0}, ValueError),
        ("a = x", {"half_width": float("nan")}, ValueError),
        ("a = x", {"confidence": 1.0}, ValueError),
        ("a = x", {"confidence": "high"}, TypeError),
        (42, {}, ValueError),
    ],
)
def test_bad_queries_are_refused_with_nothing_spent(query, kw, exc) -> None:
    if exc is None:
        return
    eng = engine()
    args = {"half_width": 5.0, "confidence": 0.9, **kw}
    with pytest.raises(exc):
        eng.ask(query, **args)
    assert eng.accountant.spends == () and len(eng.history) == 0


def test_whole_cube_query_is_fine() -> None:
    eng = engine()
    assert eng.ask("", half_width=5.0, confidence=0.9).status == "fresh"


def test_persistence_survives_a_restart(tmp_path: Path) -> None:
    cube = make_cube()
    eng = QueryEngine.at(tmp_path, cube, epsilon=3.0)
    a1 = eng.ask("a = x", half_width=5.0, confidence=0.9)
    eng.ask("b = 2", half_width=5.0, confidence=0.9)
    spent = eng.accountant.spent[0]
    again = QueryEngine.at(tmp_path, cube)
    assert len(again.history) == 2
    assert again.accountant.spent[0] == pytest.approx(spent)
    b = again.ask("a = x", half_width=5.0, confidence=0.9)
    assert b.status == "history" and b.estimate == pytest.approx(a1.estimate)
    with pytest.raises(ValueError, match="differs"):
        QueryEngine.at(tmp_path, cube, epsilon=4.0)
    with pytest.raises(ValueError, match="required"):
        QueryEngine.at(tmp_path / "new", cube)
    other = Cube.from_counts({"a": [1, 2]}, [1, 2])
    with pytest.raises(ValueError, match="cells"):
        QueryEngine.at(tmp_path, other)


class FailingStore(MemoryStore):
    def append(self, record: AnswerRecord) -> None:
        raise OSError("disk full")


def test_answer_never_returned_before_it_is_recorded() -> None:
    acc = Accountant(5.0, simulation=True)
    eng = QueryEngine(make_cube(), accountant=acc, store=FailingStore(), rng=0)
    with pytest.raises(OSError, match="disk full"):
        eng.ask("a = x", half_width=5.0, confidence=0.9)
    # The spend was recorded first (conservative), the lost answer is not in the history.
    assert len(acc.spends) == 1 and len(eng.history) == 0
    store = MemoryStore()
    eng2 = QueryEngine(make_cube(), accountant=Accountant(5.0, simulation=True), store=store, rng=0)
    a = eng2.ask("a = x", half_width=5.0, confidence=0.9)
    (rec,) = store.load()
    assert rec.epsilon == a.epsilon and rec.dense()[:3].tolist() == [1.0, 1.0, 1.0]


def test_jsonl_store_detects_damage_and_drops_an_interrupted_line(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    store = JsonlStore(path)
    rec = AnswerRecord.from_dense(
        np.array([1.0, 0.0, 2.0]), noisy_answer=3.5, epsilon=0.1, sensitivity=2.0
    )
    store.append(rec)
    store.append(rec)
    with open(path, "a") as fh:
        fh.write('{"record": {"cells": [0')  # a crash mid-append
    assert len(store.load()) == 2
    store.append(rec)
    assert len(store.load()) == 3
    lines = path.read_text().splitlines()
    doc = json.loads(lines[1])
    doc["record"]["noisy_answer"] = 1e6
    lines[1] = json.dumps(doc)
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(LedgerError, match="line 2"):
        store.load()


def test_secure_noise_by_default() -> None:
    eng = QueryEngine(make_cube(), accountant=Accountant(1.0))
    a = eng.ask("a = y", half_width=20.0, confidence=0.9)
    assert a.status == "fresh" and a.guarantee is not None
    assert a.guarantee.simulation is False


def test_nonnegative_integer_support_reports_integer_intervals() -> None:
    eng = engine(support="nonnegative-integers")
    a = eng.ask("a = y and b = 1", half_width=3.0, confidence=0.9)  # true count 0
    lo, hi = a.interval
    assert lo >= 0 and lo == int(lo) and hi == int(hi)


queries = st.lists(
    st.tuples(
        st.sampled_from(["a = x", "a = y", "a = z", "b = 1", "b = 2", "", "a in {x, y}"]),
        st.floats(1.0, 30.0),
        st.sampled_from([0.5, 0.8, 0.9, 0.95]),
    ),
    min_size=1,
    max_size=12,
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workload=queries, total=st.floats(0.05, 2.0), seed=st.integers(0, 1000))
def test_property_engine_never_exceeds_its_budget(workload, total, seed) -> None:
    eng = engine(eps=total, rng=seed)
    cells: dict[int, float] = {}
    for where, d, p in workload:
        a = eng.ask(where, half_width=d, confidence=p)
        if a.status == "fresh":
            for j in eng.cube.query(where).cells:
                cells[int(j)] = cells.get(int(j), 0.0) + a.epsilon
        else:
            assert a.epsilon == 0.0
        # Independent check: the worst-off record's cell has spent at most the total.
        assert max(cells.values(), default=0.0) <= total * (1 + 1e-9)
        assert eng.accountant.spent[0] <= total * (1 + 1e-9)
        if a.answered:
            assert a.confidence >= p - 1e-6


def test_combined_error_is_the_inverse_variance_mean() -> None:
    eng = engine()
    eng.ask("a = x", half_width=30.0, confidence=0.9)
    q = eng.cube.query("a = x").coefficients
    blue = eng.history.blue(q)
    fresh_scale = 2.0
    combined = eng._combined(blue.scales, blue.variance, fresh_scale)
    # Brute force: add the fresh answer to a copy of the history and recompute the BLUE.
    eng.history.add(q, 0.0, 1.0 / fresh_scale)
    b2 = eng.history.blue(q)
    assert combined.var == pytest.approx(b2.variance, rel=1e-9)
    np.testing.assert_allclose(np.sort(combined.scales), np.sort(b2.scales[b2.scales > 0]))
    assert isinstance(combined, LaplaceSum)


def test_required_epsilon_is_the_first_crossing_on_a_fine_grid() -> None:
    """P(|E| <= d) is not monotone in the fresh eps (extra Laplace noise first blunts the
    cusp of the history's error density); the engine must still find the smallest eps."""
    eng = engine(eps=50.0)
    for where in ["a = x and b = 1", "a = x and b = 2", "a = x and b = 3", "b = 1", "a = y"]:
        eng.ask(where, half_width=25.0, confidence=0.8)
    dips = 0
    for where, d, p in [("a = x", 6.0, 0.9), ("b = 1", 6.0, 0.5), ("a = x and b = 1", 4.0, 0.6)]:
        q = eng.cube.query(where)
        blue = eng.history.blue(q.coefficients)

        def conf(e: float, blue=blue, q=q, d=d) -> float:
            return eng._combined(blue.scales, blue.variance, q.sensitivity / e).prob_within(d)

        eps = eng.required_epsilon(q, half_width=d, confidence=p)
        assert conf(eps) >= p - 1e-9
        grid = np.geomspace(eps * 1e-3, eps * 0.998, 80)
        values = np.array([conf(e) for e in grid])
        assert np.all(values < p)
        dips += bool(np.any(np.diff(values) < -1e-6))
    assert dips >= 1  # the non-monotone case is exercised


def test_a_seeded_engine_never_spends_a_real_budget(tmp_path: Path) -> None:
    """Seeded (reproducible) noise is a simulation: a real budget, in memory or a ledger
    file, refuses to pay for it before anything is asked; secure noise is refused by a
    simulation accountant; every fresh answer is charged with its guarantee."""
    real = Accountant(5.0)
    with pytest.raises(ValueError, match="rng: a seeded engine"):
        QueryEngine(make_cube(), accountant=real, rng=0)
    with pytest.raises(ValueError, match="rng: a seeded engine"):
        QueryEngine.at(tmp_path, make_cube(), epsilon=3.0, rng=1)
    with pytest.raises(ValueError, match="secure noise"):
        QueryEngine(make_cube(), accountant=Accountant(5.0, simulation=True))
    assert real.spends == ()
    eng = QueryEngine(make_cube(), accountant=real)
    eng.ask("a = x", half_width=5.0, confidence=0.9)
    (s,) = real.spends
    assert s.label == "a = x" and s.unit  # the Laplace answer's guarantee was charged
