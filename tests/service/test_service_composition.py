"""The service under tight accounting (``--composition pld`` or ``rdp``): its spent budget is
the composition of its answers' spends (never below an independent computation of their
true loss), a restart recomputes the same value, older databases are migrated, and
switching composition is recorded and checked. Under ``pld`` the answers are Gaussian (a
PLD budget check is a valid filter for Gaussian spends alone).

In process (QueryService) on a SQLite file and a fresh PostgreSQL schema.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import sqlalchemy as sa
from alembic import command
from alembic.config import Config

from dpbayes.service import EngineConfig
from dpbayes.service import db as service_db
from dpbayes.service.config import digest_key
from dpbayes.service.quotes import quote
from dpbayes.service.state import QueryService

pytest.importorskip("dp_accounting")

KEY = digest_key("test-admin-key-" + "c" * 20)
BUDGET = {"epsilon": 1.0, "delta": 1e-6}
HALF_WIDTH = 2000.0  # a loose requirement: each fresh answer costs eps ~ 0.006


def _fresh_answers(svc: QueryService, k: int, seed: int = 0) -> None:
    """k fresh answers: queries in random directions over every cell, loose requirements
    (each one a small eps; a random direction is not met by the history of the others)."""
    rng = np.random.default_rng(seed)
    for i in range(k):
        c = rng.uniform(-1.0, 1.0, svc.cube.n_cells)
        r = svc.ask(
            f"a{i}", svc.make_query(None, c.tolist()), half_width=HALF_WIDTH, confidence=0.9
        )
        assert r.answer.status == "fresh", r.answer.reason


def _rows(url: str) -> list[Any]:
    eng = service_db.make_engine(url, writer=False)
    try:
        with eng.connect() as con:
            a = service_db.answers.c
            return list(con.execute(sa.select(a.epsilon, a.delta, a.gaussian_ratio)))
    finally:
        eng.dispose()


def _gaussian_epsilon(ratios: list[float], delta: float) -> float:
    """The true loss of Gaussian answers at ``delta``: k Gaussians of noise ratios r_i are
    one Gaussian with mu^2 = sum 1 / r_i^2 (exact, Balle & Wang 2018)."""
    from scipy import optimize, stats

    mu = math.sqrt(math.fsum(1 / r**2 for r in ratios))

    def gap(e: float) -> float:
        return (
            float(stats.norm.cdf(-e / mu + mu / 2))
            - math.exp(e) * float(stats.norm.cdf(-e / mu - mu / 2))
            - delta
        )

    return float(optimize.brentq(gap, 0.0, 50 * mu + 50, xtol=1e-12))


def test_pld_spent_is_the_composition_of_the_answers_and_survives_a_restart(
    db_url: str,
) -> None:
    cfg = EngineConfig(**BUDGET, composition="pld")
    svc = QueryService(cfg, db_url, digest_key=KEY)
    try:
        _fresh_answers(svc, 40)
        budget = svc.budget()
    finally:
        svc.close()
    rows = _rows(db_url)
    assert len(rows) == 40
    # under pld the default noise is Gaussian: every answer records its noise ratio
    assert all(r.delta == BUDGET["delta"] and r.gaussian_ratio is not None for r in rows)
    spent = budget["spent"]["epsilon"]
    assert budget["accounting"] == "pld"
    assert "privacy-loss-distribution" in budget["composition"]
    assert budget["spent"]["delta"] == BUDGET["delta"]
    assert spent < 0.5 * math.fsum(float(r.epsilon) for r in rows)  # tighter than basic
    truth = _gaussian_epsilon([float(r.gaussian_ratio) for r in rows], BUDGET["delta"])
    assert truth <= spent <= 1.01 * truth  # never below the true loss, and close to it
    again = QueryService(EngineConfig(**BUDGET), db_url, digest_key=KEY)  # the db's composition
    try:
        assert again.budget()["spent"] == budget["spent"]
        assert again.accountant.composition == "pld"
    finally:
        again.close()


def test_the_quote_says_what_the_spent_budget_would_become(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'q.db'}"
    svc = QueryService(EngineConfig(**BUDGET, composition="pld"), url, digest_key=KEY)
    try:
        _fresh_answers(svc, 30)
        c = np.random.default_rng(99).uniform(-1.0, 1.0, svc.cube.n_cells).tolist()
        q = svc.make_query(None, c)
        got = quote(svc, q, half_width=HALF_WIDTH, confidence=0.9)
        before = svc.budget()["spent"]["epsilon"]
        assert got.status == "fresh" and got.epsilon is not None
        assert got.spent_after_epsilon is not None
        assert before < got.spent_after_epsilon < before + got.epsilon  # PLD: less than eps
        assert "PLD composition" in got.reason
        r = svc.ask("b", q, half_width=HALF_WIDTH, confidence=0.9)
        assert r.answer.status == "fresh"
        assert r.spent_epsilon == pytest.approx(got.spent_after_epsilon, rel=1e-12)
    finally:
        svc.close()


def _alembic(url: str, revision: str) -> None:
    engine = service_db.make_engine(url)
    cfg = Config()
    cfg.set_main_option("script_location", str(Path(service_db.__file__).with_name("migrations")))
    with engine.begin() as con:
        cfg.attributes["connection"] = con
        command.downgrade(cfg, revision)
    engine.dispose()


def test_a_database_before_revision_0003_is_upgraded_and_can_switch_to_rdp(db_url: str) -> None:
    svc = QueryService(EngineConfig(**BUDGET), db_url, digest_key=KEY)
    try:
        _fresh_answers(svc, 40)
        basic = svc.budget()["spent"]
    finally:
        svc.close()
    _alembic(db_url, "0002")  # as revision 0002 left it: no composition, no delta column
    eng = service_db.make_engine(db_url, writer=False)
    with eng.connect() as con:
        assert "composition" not in {c["name"] for c in sa.inspect(con).get_columns("budget")}
    eng.dispose()
    svc = QueryService(EngineConfig(**BUDGET), db_url, digest_key=KEY)  # upgrades to 0003
    try:
        assert svc.accountant.composition == "basic"  # what the old answers were run under
        assert svc.budget()["spent"] == basic
    finally:
        svc.close()
    svc = QueryService(EngineConfig(**BUDGET, composition="rdp"), db_url, digest_key=KEY)
    try:
        tight = svc.budget()
        assert tight["accounting"] == "rdp" and tight["answers"] == 40
        assert tight["spent"]["epsilon"] < 0.9 * basic["epsilon"]
    finally:
        svc.close()


def test_laplace_answers_under_pld_are_refused_and_old_ones_counted_by_basic(
    tmp_path: Path,
) -> None:
    """A PLD budget check is no valid filter for Laplace answers chosen adaptively: a
    server with --noise laplace does not start on a pld database (nothing recorded, also
    when it would switch the database to pld), and a database that holds Laplace answers
    (recorded before this rule) counts them by basic composition under pld."""
    url = f"sqlite:///{tmp_path / 'l.db'}"
    svc = QueryService(EngineConfig(**BUDGET), url, digest_key=KEY)
    try:
        _fresh_answers(svc, 20)
        basic = svc.budget()["spent"]
    finally:
        svc.close()
    with pytest.raises(ValueError, match="--noise laplace cannot be charged under"):
        QueryService(
            EngineConfig(**BUDGET, composition="pld", noise="laplace"), url, digest_key=KEY
        )
    again = QueryService(EngineConfig(**BUDGET), url, digest_key=KEY)
    try:
        assert again.accountant.composition == "basic"  # the refused start changed nothing
    finally:
        again.close()
    svc = QueryService(EngineConfig(**BUDGET, composition="pld"), url, digest_key=KEY)
    try:
        assert svc.budget()["spent"] == basic
        _fresh_answers(svc, 1, seed=1)  # a Gaussian answer now
        assert [r.gaussian_ratio is not None for r in _rows(url)] == [False] * 20 + [True]
        spent = svc.budget()["spent"]
        assert spent["epsilon"] == pytest.approx(math.fsum(float(r.epsilon) for r in _rows(url)))
        assert spent["delta"] == BUDGET["delta"]  # basic: a second Gaussian would not fit
    finally:
        svc.close()


def test_switching_to_a_looser_composition_that_would_overspend_is_refused(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    total = {"epsilon": 0.25, "delta": 1e-3}
    svc = QueryService(EngineConfig(**total, composition="rdp"), url, digest_key=KEY)
    try:
        _fresh_answers(svc, 70)
        spent = svc.budget()["spent"]["epsilon"]
    finally:
        svc.close()
    basic = math.fsum(float(r.epsilon) for r in _rows(url))
    assert spent <= total["epsilon"] < basic
    with pytest.raises(ValueError, match=r"composition 'basic' would put the budget .* above"):
        QueryService(EngineConfig(**total, composition="basic"), url, digest_key=KEY)
    svc = QueryService(EngineConfig(**total), url, digest_key=KEY)  # unchanged: still rdp
    try:
        assert svc.accountant.composition == "rdp"
        assert svc.budget()["spent"]["epsilon"] == spent
    finally:
        svc.close()


def test_rdp_needs_a_budget_delta(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="composition='rdp' needs a budget delta > 0"):
        QueryService(
            EngineConfig(epsilon=1.0, composition="rdp"),
            f"sqlite:///{tmp_path / 'r.db'}",
            digest_key=KEY,
        )
    with pytest.raises(ValueError, match="composition must be one of"):
        EngineConfig(composition="advanced")


def test_a_budget_the_service_cannot_run_on_is_refused_and_changes_nothing(
    tmp_path: Path,
) -> None:
    """A review found PUT /api/admin/budget with delta 0 under rdp saved (500), after which
    every request and every restart failed. The new total is tried before it is written:
    409 naming it, the old total kept, the service (and a restart) working."""
    from dpbayes.service.state import Conflict

    url = f"sqlite:///{tmp_path / 'r.db'}"
    cfg = EngineConfig(epsilon=1.0, delta=1e-6, composition="rdp")
    svc = QueryService(cfg, url, digest_key=KEY)
    try:
        _fresh_answers(svc, 2)
        before = svc.budget()
        with pytest.raises(Conflict, match=r"delta=0: composition='rdp' needs a budget delta"):
            svc.set_budget(1.0, 0.0)
        assert svc.budget() == before
        svc.set_budget(2.0, 1e-6)
        _fresh_answers(svc, 1, seed=1)
    finally:
        svc.close()
    again = QueryService(cfg, url, digest_key=KEY)  # a restart reads the total back
    try:
        assert again.budget()["total"] == {"epsilon": 2.0, "delta": 1e-6}
    finally:
        again.close()
    with pytest.raises(ValueError, match="max_epsilon must be"):
        EngineConfig(max_epsilon=float("nan"))
    with pytest.raises(ValueError, match="max_epsilon must be"):
        EngineConfig(max_epsilon=-1.0)


def _ladder(svc: QueryService, where: str, rounds: int) -> list[Any]:
    """One cell's answers to requirements 3% tighter each round: a fresh answer each."""
    q = svc.make_query(where, None)
    return [
        svc.ask("a", q, half_width=300.0 * 0.97**r, confidence=0.9).answer for r in range(rounds)
    ]


def test_auto_noise_under_rdp_releases_gaussian_answers_and_accounts_them(db_url: str) -> None:
    cfg = EngineConfig(**BUDGET, composition="rdp", noise="auto")
    svc = QueryService(cfg, db_url, digest_key=KEY)
    try:
        answers = _ladder(svc, "health = poor and idp = 1 and year = 1", 60)
        budget = svc.budget()
        free = svc.ask(
            "b", svc.make_query("health = poor and idp = 1 and year = 1", None),
            half_width=400.0, confidence=0.9,
        ).answer  # fmt: skip
    finally:
        svc.close()
    noises = [a.noise for a in answers if a.status == "fresh"]
    assert noises[0] == "laplace" and "gaussian" in noises  # Gaussian once it costs less
    gauss = next(a for a in answers if a.noise == "gaussian")
    assert "chose gaussian under rdp composition" in gauss.reason
    assert gauss.guarantee is not None and gauss.guarantee.delta == BUDGET["delta"]
    assert free.status == "history" and free.guarantee is not None
    assert "Gaussian" in free.guarantee.mechanism or free.guarantee.delta > 0
    rows = _rows(db_url)
    assert len(rows) == len(noises)
    assert [r.gaussian_ratio is not None for r in rows] == [n == "gaussian" for n in noises]
    assert all((r.delta > 0) == (r.gaussian_ratio is not None) for r in rows)
    # never below an independent composition of the answers' exact PLDs, and within budget
    from dp_accounting.pld import privacy_loss_distribution as pld

    total = None
    for r in rows:
        one = (
            pld.from_gaussian_mechanism(r.gaussian_ratio, value_discretization_interval=2e-5)
            if r.gaussian_ratio is not None
            else pld.from_laplace_mechanism(1.0 / r.epsilon, value_discretization_interval=2e-5)
        )
        total = one if total is None else total.compose(one)
    assert total is not None
    truth = total.get_epsilon_for_delta(BUDGET["delta"])
    spent = budget["spent"]["epsilon"]
    assert truth <= spent + 2e-5 * len(rows) and spent <= BUDGET["epsilon"] * (1 + 1e-9)
    assert spent < math.fsum(r.epsilon for r in rows)
    again = QueryService(EngineConfig(**BUDGET), db_url, digest_key=KEY)  # Laplace server
    try:
        assert again.budget()["spent"] == budget["spent"]  # the same recount
        a = again.ask(
            "c", again.make_query("health = poor and idp = 1 and year = 1", None),
            half_width=400.0, confidence=0.9,
        ).answer  # fmt: skip
        assert a.status == "history"  # the mixed history answers it
    finally:
        again.close()


def test_gaussian_noise_needs_a_delta() -> None:
    with pytest.raises(ValueError, match="noise='gaussian' needs a budget delta"):
        EngineConfig(epsilon=1.0, noise="gaussian")
    with pytest.raises(ValueError, match="noise must be one of"):
        EngineConfig(epsilon=1.0, delta=1e-6, noise="normal")
