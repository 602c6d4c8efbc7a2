"""User-level cubes: k records per person, bounded in the engine; sensitivity x k."""

from __future__ import annotations

import math

import duckdb
import numpy as np
import pandas as pd
import pytest
from scipy import stats

from dpbayes.answers import Bins, Cube, QueryEngine
from dpbayes.answers.queries import Query
from dpbayes.answers.store import JsonlStore
from dpbayes.data import Table
from dpbayes.privacy import Accountant

K = 3
HEALTH = ["poor", "fair", "good"]
ATTRS = {"health": HEALTH, "visits": Bins([0, 2, 5, math.inf])}


def _persons(n_persons: int = 400, seed: int = 11) -> pd.DataFrame:
    """Persons with 1..6 rows each; health and visit bin fixed per person, so the bounded
    counts are known in closed form: a person adds min(rows, K) to one cell."""
    rng = np.random.default_rng(seed)
    rows = rng.integers(1, 7, n_persons)
    person = np.repeat(np.arange(n_persons), rows)
    health = rng.choice(HEALTH, n_persons)[person]
    base = rng.choice([0.5, 3.0, 7.0], n_persons)[person]
    return pd.DataFrame(
        {
            "person": person.astype(np.int64),
            "visit_no": np.concatenate([np.arange(r) for r in rows]).astype(np.int64),
            "health": health,
            "visits": base + rng.random(person.size) * 0.9,  # stays in the person's bin
        }
    )


@pytest.fixture(scope="module")
def frame() -> pd.DataFrame:
    return _persons()


@pytest.fixture(scope="module")
def duckdb_file(frame, tmp_path_factory):
    """An open connection to a DuckDB database file holding the table."""
    path = tmp_path_factory.mktemp("cube") / "persons.duckdb"
    con = duckdb.connect(str(path))
    con.register("src", frame)
    con.execute("CREATE TABLE persons AS SELECT * FROM src")
    con.unregister("src")
    yield con
    con.close()


def _expected(frame: pd.DataFrame, k: int | None) -> np.ndarray:
    per = frame.groupby("person").agg(
        health=("health", "first"), visits=("visits", "first"), rows=("visit_no", "size")
    )
    want = np.zeros((3, 3), dtype=np.int64)
    for h, v, r in per.itertuples(index=False):
        j = int(np.searchsorted([0, 2, 5], v, side="right")) - 1
        want[HEALTH.index(h), j] += r if k is None else min(r, k)
    return want


def test_user_level_cube_from_duckdb_file(frame, duckdb_file, tmp_path):
    con = duckdb_file
    cube = Cube.from_table(con.table("persons"), ATTRS, user_column="person", max_rows_per_user=K)
    assert cube.rows_per_user_bound == K
    np.testing.assert_array_equal(cube.counts, _expected(frame, K))
    assert "<= 3/user" in repr(cube)
    # the same from a Parquet path, and from a table already bounded by dpbayes.data
    pq = tmp_path / "persons.parquet"
    frame.to_parquet(pq)
    from_path = Cube.from_table(str(pq), ATTRS, user_column="person", max_rows_per_user=K)
    np.testing.assert_array_equal(from_path.counts, cube.counts)
    bounded = Table(frame, user_column="person", max_rows_per_user=K)
    pre = Cube.from_table(bounded, ATTRS)
    assert pre.rows_per_user_bound == K
    np.testing.assert_array_equal(pre.counts, cube.counts)
    # record level: every row counts, no bound
    row = Cube.from_table(con.table("persons"), ATTRS)
    assert row.rows_per_user_bound is None
    np.testing.assert_array_equal(row.counts, _expected(frame, None))
    assert row.counts.sum() > cube.counts.sum()


def test_bad_bounds(frame):
    with pytest.raises(TypeError, match="together"):
        Cube.from_table(frame, ATTRS, user_column="person")
    with pytest.raises(ValueError, match="max_rows_per_user"):
        Cube.from_table(frame, ATTRS, user_column="person", max_rows_per_user=0)
    with pytest.raises(ValueError, match="user_column 'nobody' not found"):
        Cube.from_table(frame, ATTRS, user_column="nobody", max_rows_per_user=2)
    with pytest.raises(ValueError, match="rows_per_user_bound"):
        Cube.from_counts({"health": HEALTH}, [1, 2, 3], rows_per_user_bound=0)


def _engine(cube: Cube, rng, store=None) -> QueryEngine:
    return QueryEngine(cube, accountant=Accountant(1e6, simulation=True), store=store, rng=rng)


def test_sensitivity_and_guarantee_are_user_level(frame):
    user = Cube.from_table(frame, ATTRS, user_column="person", max_rows_per_user=K)
    row = Cube.from_counts(ATTRS, user.counts)  # same counts, record level
    good = user.query("health == 'good'").coefficients
    q = Query(2.0 * good + user.query("visits == '[5, inf)'").coefficients, "weighted")
    assert q.sensitivity == 3.0  # the cell (good, [5, inf)) has coefficient 3
    eu, er = _engine(user, 1), _engine(row, 1)
    assert eu.sensitivity(q) == K * q.sensitivity == K * er.sensitivity(q)
    ask = {"half_width": 20.0, "confidence": 0.9}
    eps_u, eps_r = eu.required_epsilon(q, **ask), er.required_epsilon(q, **ask)
    assert eps_u == pytest.approx(K * eps_r, rel=1e-12)
    a = eu.ask(q, **ask)
    assert a.status == "fresh" and a.epsilon == pytest.approx(eps_u)
    g = a.guarantee
    assert g.sensitivity == K * q.sensitivity
    assert g.details["neighbouring_relation"] == "add/remove one user (<= 3 rows)"
    assert g.details["rows_per_user"] == K and g.details["privacy_unit"] == "user"
    assert g.details["scale"] == pytest.approx(K * q.sensitivity / eps_u)
    assert "add/remove one user (<= 3 rows)" in g.describe()
    assert "user (<= 3 rows)" in a.reason
    # answered again from the history: the post-processing guarantee is user-level too
    again = eu.ask(q, **ask)
    assert again.status == "history"
    assert again.guarantee.sensitivity == K * q.sensitivity
    assert "one user (<= 3 rows)" in again.guarantee.describe()
    rec = eu.store.load()[0]
    assert rec.sensitivity == K * q.sensitivity
    # record level stays as it was
    b = er.ask(q, **ask)
    assert b.guarantee.sensitivity == q.sensitivity
    assert "neighbouring_relation" not in b.guarantee.details
    assert "add/remove one record" in b.guarantee.describe()


def test_history_unit_must_match(frame, tmp_path):
    user = Cube.from_table(frame, ATTRS, user_column="person", max_rows_per_user=K)
    store = JsonlStore(tmp_path / "history.jsonl")
    eng = _engine(user, 3, store)
    eng.ask("health == 'poor'", half_width=30.0, confidence=0.8)
    reopened = _engine(user, 4, JsonlStore(tmp_path / "history.jsonl"))
    assert len(reopened.history) == 1
    with pytest.raises(ValueError, match="user \\(<= 3 rows\\) level but the cube is at record"):
        _engine(Cube.from_counts(ATTRS, user.counts), 5, JsonlStore(tmp_path / "history.jsonl"))


def test_noise_scale_is_k_times_row_level(frame):
    """2000 fresh releases (seeded): the noise is Lap(K S / eps), not Lap(S / eps).

    KS test against Lap(K S/eps) must not reject at 1e-4; the mean of squared noise
    (2 b^2, standard error sqrt(20 / N) b^2 for Laplace) within a 1e-4 two-sided z-bound
    (3.89); the record-level scale is rejected by KS (p < 1e-12).
    """
    user = Cube.from_table(frame, ATTRS, user_column="person", max_rows_per_user=K)
    q = user.query("visits == '[2, 5)'")
    true = user.true_answer(q)
    rng = np.random.default_rng(2024)
    n = 2000
    ask = {"half_width": 10.0, "confidence": 0.75}
    noise = np.empty(n)
    eps = None
    for i in range(n):
        a = _engine(user, rng).ask(q, **ask)
        assert a.status == "fresh"
        eps = a.epsilon if eps is None else eps
        assert a.epsilon == eps
        noise[i] = a.estimate - true
    b = K * q.sensitivity / eps
    assert stats.kstest(noise, stats.laplace(scale=b).cdf).pvalue > 1e-4
    z = (np.mean(noise**2) - 2 * b**2) / (math.sqrt(20.0 / n) * b**2)
    assert abs(z) < 3.89
    assert stats.kstest(noise, stats.laplace(scale=b / K).cdf).pvalue < 1e-12


def test_a_person_spread_over_cells_loses_no_more_than_the_accountant_charges(frame):
    """Parallel composition over cells at user level. A person's rows may lie in several
    cells (r_j rows in cell j, sum r_j <= K), so the per-cell maximum the accountant
    charges needs an argument beyond "a record lies in one part": answer q (Laplace,
    scale b_q = K S_q / eps_q) moves by |H_q . r| and loses at most |H_q . r| / b_q, a
    convex function of r, so the total loss is largest at a vertex of {r >= 0, sum r <= K}:
    all K rows in one cell, which is the record-level case (accountant module docstring).
    Exactly: every spread of K rows over the 9 cells, against the answers released on
    single cells, on sums of cells and on a weighted query."""
    import itertools

    user = Cube.from_table(frame, ATTRS, user_column="person", max_rows_per_user=K)
    eng = _engine(user, np.random.default_rng(5))
    for text, d in [
        ("health == 'poor'", 30.0),
        ("health == 'good'", 25.0),
        ("visits == '[5, inf)'", 40.0),
        ("health == 'fair' and visits == '[0, 2)'", 20.0),
        ("health == 'poor'", 12.0),
    ]:
        assert eng.ask(text, half_width=d, confidence=0.9).status == "fresh"
    weighted = 2.0 * user.query("health == 'good'").coefficients
    assert eng.ask(Query(weighted, "weighted"), half_width=15.0, confidence=0.9).status == "fresh"
    h = eng.history
    coefs = np.array([h._H[i] for i in range(len(h))])
    scales = np.array([h._sens[i] / h._eps[i] for i in range(len(h))])
    cells = coefs.shape[1]
    worst, spread = 0.0, 0.0
    for combo in itertools.combinations_with_replacement(range(cells), K):
        r = np.bincount(combo, minlength=cells).astype(float)
        loss = float(np.sum(np.abs(coefs @ r) / scales))
        worst = max(worst, loss)
        if np.count_nonzero(r) > 1:
            spread = max(spread, loss)
    spent = eng.accountant.spent[0]
    assert worst <= spent * (1 + 1e-9), (worst, spent)
    assert spread <= worst + 1e-12  # a spread person is never the worst-off
    # and the charge is not loose: the worst person has all rows in the costliest cell
    assert worst == pytest.approx(spent, rel=1e-9)
