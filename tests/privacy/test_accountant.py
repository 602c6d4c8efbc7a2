"""Accountant: composition, atomic charges, persistence, damage, threads and processes."""

from __future__ import annotations

import dataclasses
import json
import multiprocessing
import threading

import pytest

from dpbayes.privacy import (
    Accountant,
    BudgetExceeded,
    Guarantee,
    LaplaceMechanism,
    LedgerError,
)
from dpbayes.privacy.accountant import _checksum


def test_sequential_composition_adds():
    acc = Accountant(1.0, 1e-5)
    for _ in range(10):
        acc.spend(0.1)  # 10 x 0.1 fits exactly in 1 (float slack)
    assert acc.spent == pytest.approx((1.0, 0.0))
    assert acc.remaining == (0.0, 1e-5)
    with pytest.raises(BudgetExceeded):
        acc.spend(1e-6)
    acc2 = Accountant(1.0, 1e-5)
    acc2.spend(0.3, 4e-6)
    acc2.spend(0.3, 4e-6)
    with pytest.raises(BudgetExceeded, match="delta"):
        acc2.spend(0.1, 4e-6)  # epsilon fits, delta does not
    assert acc2.spent == pytest.approx((0.6, 8e-6))


def test_parallel_composition_costs_the_max():
    acc = Accountant(1.0)
    for cell in ("a", "b", "c"):
        acc.spend(0.5, scope=[cell])  # disjoint parts: the max, not the sum
    assert acc.spent == pytest.approx((0.5, 0.0))
    acc.spend(0.2, scope=["a", "b"])  # a and b now carry 0.7
    assert acc.spent == pytest.approx((0.7, 0.0))
    acc.spend(0.2)  # a global spend adds to every part
    assert acc.spent == pytest.approx((0.9, 0.0))
    with pytest.raises(BudgetExceeded):
        acc.spend(0.2, scope=["a"])
    acc.spend(0.3, scope=["c"])  # c carries 0.5 + 0.3, + 0.2 global = 1.0
    assert acc.spent == pytest.approx((1.0, 0.0))
    with pytest.raises(ValueError, match="scope"):
        acc.spend(0.01, scope=[])
    assert acc.spends[1].scope == ("b",)
    # A repeated label in one scope counts once.
    acc3 = Accountant(1.0)
    acc3.spend(0.6, scope=["x", "x"])
    assert acc3.spent[0] == pytest.approx(0.6)


def test_budget_exceeded_spends_nothing_and_says_what_remains():
    acc = Accountant(1.0)
    acc.spend(0.7, label="first")
    before = acc.spends
    with pytest.raises(BudgetExceeded) as info:
        acc.spend(0.5)
    message = str(info.value)
    assert "eps=0.3 " in message or "eps=0.3)" in message or "eps=0.3," in message, message
    assert "nothing was spent" in message
    assert acc.spends == before
    assert isinstance(info.value, ValueError)
    assert acc.can_spend(0.3) and not acc.can_spend(0.31)


def test_exception_inside_charge_records_nothing(tmp_path):
    for acc in (Accountant(1.0), Accountant(1.0, path=tmp_path / "ledger.json")):
        ran = []
        with pytest.raises(RuntimeError), acc.charge(0.5):
            ran.append(True)
            raise RuntimeError("release failed")
        assert ran == [True]
        assert acc.spends == () and acc.spent == (0.0, 0.0)
        if acc.path is not None:
            assert Accountant.open(acc.path).spends == ()
        with acc.charge(0.5, label="ok") as spend:
            assert spend.epsilon == 0.5
        assert len(acc.spends) == 1


def test_budget_exceeded_is_raised_before_the_block_runs():
    acc = Accountant(0.5)
    ran = []
    with pytest.raises(BudgetExceeded), acc.charge(0.6):
        ran.append(True)
    assert ran == []


def test_guarantees_are_charged_and_non_private_ones_refused():
    acc = Accountant(2.0, 1e-5)
    g = LaplaceMechanism(epsilon=0.5, sensitivity=1).guarantee()
    with acc.charge(g) as spend:
        pass
    assert spend.label == "laplace" and acc.spent[0] == 0.5
    bad = Guarantee(
        epsilon=0.1,
        delta=0.0,
        neighbours="substitute",
        mechanism="local-sensitivity exponential",
        sensitivity=1.0,
        private=False,
    )
    with pytest.raises(ValueError, match="not differentially private"):
        acc.spend(bad)
    assert len(acc.spends) == 1
    too_much_delta = Guarantee(
        epsilon=0.1, delta=1e-4, neighbours="substitute", mechanism="gaussian", sensitivity=1
    )
    with pytest.raises(BudgetExceeded):
        acc.spend(too_much_delta)


@pytest.mark.parametrize("bad", [-1.0, 0.0, float("nan"), float("inf"), "0.1", True, None])
def test_bad_costs_are_refused(bad):
    acc = Accountant(1.0)
    with pytest.raises((TypeError, ValueError), match="epsilon"):
        acc.spend(bad)
    with pytest.raises((TypeError, ValueError), match="delta"):
        acc.spend(0.1, delta=bad if bad != 0.0 else -0.5)
    assert acc.spends == ()
    with pytest.raises((TypeError, ValueError), match="epsilon"):
        Accountant(bad)


def test_nested_charge_counts_the_outer_spend(tmp_path):
    """A charge inside another charge's block sees the outer (unrecorded) spend."""
    acc = Accountant(1.0)
    with acc.charge(0.6):
        with pytest.raises(BudgetExceeded), acc.charge(0.6):
            pass
        with acc.charge(0.3):
            pass
    assert acc.spent[0] == pytest.approx(0.9)

    # File-backed: a nested charge must not deadlock on the ledger's flock.
    path = tmp_path / "nested.json"
    acc = Accountant(1.0, path=path)
    done = []

    def nested():
        with acc.charge(0.5), acc.charge(0.25):
            pass
        done.append(True)

    t = threading.Thread(target=nested, daemon=True)
    t.start()
    t.join(timeout=20)
    assert done == [True], "nested charge deadlocked"
    assert Accountant.open(path).spent[0] == pytest.approx(0.75)


def test_ledger_round_trip_and_restart(tmp_path):
    path = tmp_path / "budget.json"
    acc = Accountant(1.0, 1e-5, path=path)
    acc.spend(0.25, 1e-6, label="counts", scope=["x"])
    acc.spend(0.25, label="mean")
    restarted = Accountant.open(path)
    assert restarted.total == (1.0, 1e-5)
    assert restarted.spends == acc.spends
    assert restarted.spent == acc.spent
    restarted.spend(0.5)
    with pytest.raises(BudgetExceeded):
        restarted.spend(0.01)
    # The first object sees the second's spend when it charges (it re-reads the file).
    with pytest.raises(BudgetExceeded):
        acc.spend(0.01)
    assert len(Accountant.open(path).spends) == 3
    summary = Accountant.open(path).summary()
    assert summary["remaining"]["epsilon"] == pytest.approx(0.0, abs=1e-12)
    assert summary["spends"] == 3 and summary["path"] == str(path)


def test_creating_over_an_existing_ledger_is_refused(tmp_path):
    path = tmp_path / "budget.json"
    Accountant(1.0, path=path).spend(0.9)
    content = path.read_bytes()
    with pytest.raises(LedgerError, match="already exists"):
        Accountant(5.0, path=path)
    assert path.read_bytes() == content


def _damage(path, how):
    text = path.read_text()
    doc = json.loads(text)
    if how == "truncated":
        path.write_text(text[: len(text) // 2])
    elif how == "edited number":
        doc["total"]["epsilon"] = 100.0
        path.write_text(json.dumps(doc))
    elif how == "edited spend":
        doc["spends"][0]["epsilon"] = 0.01
        path.write_text(json.dumps(doc))
    elif how == "bad checksum":
        doc["checksum"] = "0" * 64
        path.write_text(json.dumps(doc))
    elif how == "no checksum":
        del doc["checksum"]
        path.write_text(json.dumps(doc))
    elif how == "not json":
        path.write_text("this is not a ledger")
    elif how == "binary":
        path.write_bytes(b"\x00\xff\xfe\x81garbage")
    elif how == "empty":
        path.write_bytes(b"")
    elif how == "json list":
        path.write_text("[1, 2, 3]")
    elif how == "negative spend, valid checksum":
        doc["spends"][0]["epsilon"] = -5.0
        body = {k: doc[k] for k in ("format", "version", "total", "spends")}
        doc["checksum"] = _checksum(body)
        path.write_text(json.dumps(doc))
    elif how == "spends not a list, valid checksum":
        doc["spends"] = {"a": 1}
        body = {k: doc[k] for k in ("format", "version", "total", "spends")}
        doc["checksum"] = _checksum(body)
        path.write_text(json.dumps(doc))
    elif how == "missing":
        path.unlink()
    else:  # pragma: no cover
        raise AssertionError(how)


DAMAGES = [
    "truncated",
    "edited number",
    "edited spend",
    "bad checksum",
    "no checksum",
    "not json",
    "binary",
    "empty",
    "json list",
    "negative spend, valid checksum",
    "spends not a list, valid checksum",
    "missing",
]


@pytest.mark.parametrize("how", DAMAGES)
def test_damaged_ledger_is_an_error_never_a_fresh_budget(tmp_path, how):
    path = tmp_path / "budget.json"
    acc = Accountant(1.0, path=path)
    acc.spend(0.9)
    _damage(path, how)
    with pytest.raises(LedgerError, match="ledger file"):
        Accountant.open(path)
    # An accountant that was already open re-reads the file on every charge.
    with pytest.raises(LedgerError):
        acc.spend(0.05)
    with pytest.raises(LedgerError):
        Accountant(1.0, path=path) if how != "missing" else Accountant.open(path)


def test_threads_never_overspend():
    acc = Accountant(1.0)
    results: list[bool] = []
    lock = threading.Lock()
    barrier = threading.Barrier(8)

    def worker():
        barrier.wait()
        for _ in range(50):
            try:
                with acc.charge(0.01):
                    pass
                ok = True
            except BudgetExceeded:
                ok = False
            with lock:
                results.append(ok)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 400
    assert sum(results) == 100  # exactly the budget: 100 x 0.01 = 1 (float slack 1e-9)
    assert acc.spent[0] <= 1.0 * (1 + 1e-9)
    assert len(acc.spends) == 100


def test_threads_with_two_accountants_on_one_ledger_never_overspend(tmp_path):
    path = tmp_path / "shared.json"
    Accountant(0.5, path=path)
    accs = [Accountant.open(path), Accountant.open(path)]
    ok = []
    lock = threading.Lock()

    def worker(acc):
        for _ in range(10):
            try:
                acc.spend(0.05)
                with lock:
                    ok.append(1)
            except BudgetExceeded:
                pass

    threads = [threading.Thread(target=worker, args=(accs[i % 2],)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(ok) == 10
    assert Accountant.open(path).spent[0] == pytest.approx(0.5)


def _process_worker(path, n, queue):
    acc = Accountant.open(path)
    ok = 0
    for _ in range(n):
        try:
            acc.spend(0.1)
            ok += 1
        except BudgetExceeded:
            pass
    queue.put(ok)


def test_two_processes_sharing_a_ledger_never_overspend(tmp_path):
    path = tmp_path / "shared.json"
    Accountant(1.0, path=path)
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_process_worker, args=(str(path), 8, queue)) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    successes = queue.get(timeout=5) + queue.get(timeout=5)
    assert successes == 10
    final = Accountant.open(path)
    assert len(final.spends) == 10
    assert final.spent[0] == pytest.approx(1.0)


def test_real_accountant_refuses_simulation_guarantees_and_vice_versa():
    """Issue 14, defect 5: a seeded release never spends real budget (one-line error)."""
    g = LaplaceMechanism(epsilon=0.5, sensitivity=1.0).guarantee()
    real = Accountant(1.0)
    with pytest.raises(ValueError, match="simulation release") as info:
        with real.charge(g.with_simulation(True)):
            raise AssertionError("the block must not run")
    assert "\n" not in str(info.value)
    with pytest.raises(ValueError, match="simulation release"):
        real.spend(g.with_simulation(True))
    assert real.spent == (0.0, 0.0)
    real.spend(g)
    sim = Accountant(1.0, simulation=True)
    with pytest.raises(ValueError, match="simulation accountant"):
        sim.spend(g)
    sim.spend(g.with_simulation(True))
    assert sim.simulation and not real.simulation
    assert sim.spent == real.spent == (0.5, 0.0)


def test_one_budget_protects_one_unit(tmp_path) -> None:
    """A review found a substitute and an add/remove release charged to one budget as
    0.5 + 0.5 = 1: under substitute the add/remove one costs up to 2 x 0.5 (1.5 in all),
    under add/remove the substitute one publishes n. A spend under another unit than the
    recorded ones is refused, nothing spent, also after reopening the ledger file; row
    bounds k of one user-level unit compose."""
    sub = LaplaceMechanism(epsilon=0.5, sensitivity=1.0).guarantee()
    ar = LaplaceMechanism(epsilon=0.5, sensitivity=1.0, neighbours="add-remove").guarantee()
    path = tmp_path / "book.json"
    acc = Accountant(3.0, path=path)
    acc.spend(sub)
    with pytest.raises(ValueError, match=r"protect substitute.*add/remove.*nothing was spent"):
        acc.spend(ar)
    again = Accountant.open(path)
    with pytest.raises(ValueError, match="do not add up"):
        again.spend(ar)
    assert again.spent == (0.5, 0.0) and Accountant.open(path).spent == (0.5, 0.0)
    again.spend(sub)
    again.spend(0.25)  # a bare epsilon carries no unit
    assert again.spent == (1.25, 0.0)

    user = Accountant(3.0)
    for k in (3, 5):
        g = LaplaceMechanism(epsilon=0.5, sensitivity=float(k), neighbours="add-remove")
        relation = {"privacy_unit": "user", "neighbouring_relation": f"add/remove one user ({k})"}
        user.spend(dataclasses.replace(g.guarantee(), details=relation))
    with pytest.raises(ValueError, match="one user"):
        user.spend(ar)
    assert user.spent == (1.0, 0.0)


def test_a_scoped_spend_must_be_add_remove() -> None:
    """Parallel composition over disjoint parts: a substituted record can move from one
    part to another, so a scoped substitute guarantee is refused (and priced as refused)."""
    acc = Accountant(3.0)
    sub = LaplaceMechanism(epsilon=0.5, sensitivity=1.0).guarantee()
    with pytest.raises(ValueError, match=r"scope .* needs add/remove"):
        acc.spend(sub, scope=["cell:0"])
    with pytest.raises(ValueError, match=r"scope .* needs add/remove"):
        acc.spent_after(sub, scope=["cell:0"])
    ar = LaplaceMechanism(epsilon=0.5, sensitivity=1.0, neighbours="add-remove").guarantee()
    acc.spend(ar, scope=["cell:0"])
    acc.spend(ar, scope=["cell:1"])
    assert acc.spent == (0.5, 0.0)


def test_user_level_units_are_told_apart_by_their_user_column(tmp_path) -> None:
    """A review found releases bounded per 'uid' and per 'hh' (a person, a household)
    added up on one budget. The user column is part of the unit; row bounds still
    compose. A dry run (check_unit) and a price (spent_after) refuse what a charge would."""
    import numpy as np
    import pandas as pd

    import dpbayes as dpb
    from dpbayes.data import Table
    from dpbayes.models import BetaBernoulli
    from dpbayes.release.base import plan

    frame = pd.DataFrame({"uid": np.arange(40), "hh": np.arange(40) // 2, "y": np.arange(40) % 2})
    acc = Accountant(5.0, simulation=True)
    for k in (3, 5):
        data = Table(frame, user_column="uid", max_rows_per_user=k)
        rel = dpb.release(BetaBernoulli(), data, column="y", mechanism="laplace", epsilon=1.0,
                          accountant=acc, rng=k)  # fmt: skip
        assert rel.guarantee.details["user_column"] == "uid"
    other = plan(
        BetaBernoulli(), Table(frame, user_column="hh", max_rows_per_user=5), column="y",
        mechanism="laplace", epsilon=1.0,
    ).guarantee  # fmt: skip
    with pytest.raises(ValueError, match=r"identified by 'uid'.*identified by 'hh'"):
        acc.check_unit(other)
    with pytest.raises(ValueError, match="do not add up"):
        acc.spent_after(other)
    data = Table(frame, user_column="hh", max_rows_per_user=5)
    with pytest.raises(ValueError, match="do not add up"):
        dpb.release(BetaBernoulli(), data, column="y", mechanism="laplace", epsilon=1.0,
                    accountant=acc, rng=9)  # fmt: skip
    assert acc.spent == (2.0, 0.0)


def test_units_come_from_structured_fields_and_old_ledgers_still_open(tmp_path) -> None:
    """A review found the unit read from free text: a column source (as_source) and the
    query engine recorded a bare "user" (a person and a household added up again), a
    grouped release by 'user_type' read as user level, a column named with a quote lost
    its name, and a ledger from before could not take any user-level release. Units come
    from the guarantee's fields; a user-level spend whose column was not recorded goes
    with one user column."""
    import numpy as np
    import pandas as pd

    import dpbayes as dpb
    from dpbayes.answers import Cube, QueryEngine
    from dpbayes.data import Table, as_source
    from dpbayes.models import BetaBernoulli
    from dpbayes.privacy.spend import Spend

    frame = pd.DataFrame(
        {"uid": np.arange(40), "hh": np.arange(40) // 2, "y": np.arange(40) % 2,
         "user_type": np.arange(40) % 3, "person's id": np.arange(40)}
    )  # fmt: skip
    coin = BetaBernoulli()

    def release(data, acc, seed, **kw):
        return dpb.release(coin, data, mechanism="laplace", epsilon=0.5, accountant=acc,
                           rng=seed, **kw)  # fmt: skip

    acc = Accountant(9.0, simulation=True)
    release(as_source(frame, column="y", user_column="uid", max_rows_per_user=3), acc, 1)
    release(Table(frame, user_column="uid", max_rows_per_user=2).column("y"), acc, 2)
    with pytest.raises(ValueError, match="identified by 'hh'"):
        release(as_source(frame, column="y", user_column="hh", max_rows_per_user=3), acc, 3)
    cube = Cube.from_table(frame, {"y": [0, 1]}, user_column="hh", max_rows_per_user=2)
    engine = QueryEngine(cube, accountant=acc, rng=4)
    with pytest.raises(ValueError, match="identified by 'hh'"):
        engine.ask("y = 1", half_width=30.0, confidence=0.9)
    with pytest.raises(ValueError, match='identified by "person\'s id"'):
        data = Table(frame, user_column="person's id", max_rows_per_user=2)
        release(data, acc, 5, column="y")
    assert acc.spent == (1.0, 0.0)

    grouped = Accountant(9.0, simulation=True)
    dpb.release(coin, frame, column="y", by="user_type", groups=[0, 1, 2],
                mechanism="laplace", epsilon=0.5, accountant=grouped, rng=6)  # fmt: skip
    with pytest.raises(ValueError, match="within its 'user_type' group"):
        release(as_source(frame, column="y", user_column="hh", max_rows_per_user=3), grouped, 7)

    # a ledger written before units were keyed: its user-level spend names no column
    path = tmp_path / "old.json"
    old = Accountant(5.0, path=path)
    old._spends.append(
        Spend(0.5, 0.0, "laplace", None, 0.0, unit="add/remove one user (<= 2 rows)")
    )
    old._save()
    again = Accountant.open(path)
    ar = LaplaceMechanism(epsilon=0.5, sensitivity=2.0, neighbours="add-remove").guarantee()
    user_uid = dataclasses.replace(ar, details={"privacy_unit": "user", "user_column": "uid"})
    user_hh = dataclasses.replace(ar, details={"privacy_unit": "user", "user_column": "hh"})
    again.spend(user_uid)
    with pytest.raises(ValueError, match="identified by 'uid'"):
        again.spend(user_hh)
    assert again.spent == (1.0, 0.0)


def test_old_ledger_units_keep_their_column_and_column_less_spends_are_no_wildcard(
    tmp_path,
) -> None:
    """A review found three ways round the one-unit rule: a ledger from before that
    recorded "identified by 'person'" read back as the wildcard, a grouped spend's text
    read back as no unit, and a new user-level spend naming no column (a cube from counts)
    acting as the wildcard. Only a recorded user-level spend without a column is one."""
    from dpbayes.privacy.spend import Spend

    ar = LaplaceMechanism(epsilon=0.5, sensitivity=2.0, neighbours="add-remove").guarantee()
    sub = LaplaceMechanism(epsilon=0.5, sensitivity=1.0).guarantee()

    def user(column):
        details = {"privacy_unit": "user", **({"user_column": column} if column else {})}
        return dataclasses.replace(ar, details=details)

    def ledger(name, unit):
        acc = Accountant(5.0, path=tmp_path / name)
        acc._spends.append(Spend(0.5, 0.0, "laplace", None, 0.0, unit=unit))
        acc._save()
        return Accountant.open(tmp_path / name)

    named = ledger("a.json", "add/remove one user (<= 5 rows) identified by 'person'")
    with pytest.raises(ValueError, match="identified by 'person'"):
        named.spend(user("hh"))
    named.spend(user("person"))
    grouped = ledger("b.json", "substitute one record within its 'grp' group")
    with pytest.raises(ValueError, match="within its 'grp' group"):
        grouped.spend(sub)
    odd = ledger("c.json", "some relation of a future version")
    with pytest.raises(ValueError, match="some relation"):
        odd.spend(sub)
    fresh = Accountant(5.0)
    fresh.spend(user(None))  # a cube from counts: no column named
    with pytest.raises(ValueError, match="no user column named"):
        fresh.spend(user("person"))
    fresh.spend(user(None))
    assert fresh.spent == (1.0, 0.0)


def test_a_query_history_is_not_reused_under_another_user_column(tmp_path) -> None:
    import numpy as np
    import pandas as pd

    from dpbayes.answers import Cube, QueryEngine
    from dpbayes.answers.store import JsonlStore

    frame = pd.DataFrame({"uid": np.arange(40), "hh": np.arange(40) // 2, "y": np.arange(40) % 2})
    store = JsonlStore(tmp_path / "answers.jsonl")
    by_uid = Cube.from_table(frame, {"y": [0, 1]}, user_column="uid", max_rows_per_user=3)
    QueryEngine(by_uid, accountant=Accountant(5.0, simulation=True), rng=1, store=store).ask(
        "y = 1", half_width=30.0, confidence=0.9
    )
    by_hh = Cube.from_table(frame, {"y": [0, 1]}, user_column="hh", max_rows_per_user=3)
    with pytest.raises(ValueError, match="identified by 'uid' but the cube's user"):
        QueryEngine(by_hh, accountant=Accountant(5.0, simulation=True), rng=2, store=store)


def test_raw_keys_tuple_groups_and_capitals_of_older_ledgers_read_as_their_units(tmp_path):
    """A review found a key written with a raw column (the first keyed version) raising a
    JSON error that read as a refusal, a tuple grouping column and capitalised relations
    read as unknown units."""
    from dpbayes.privacy.accountant import _SEP, _key_of, _unit_text
    from dpbayes.privacy.spend import Spend

    raw = Spend(0.5, 0.0, unit="add/remove one user (<= 5 rows)", unit_key=f"user{_SEP}uid")
    assert _key_of(raw) == f'user{_SEP}"uid"' and "identified by 'uid'" in _unit_text(raw.unit_key)
    ar = LaplaceMechanism(epsilon=0.5, sensitivity=2.0, neighbours="add-remove").guarantee()
    acc = Accountant(5.0, path=tmp_path / "k.json")
    acc._spends.append(raw)
    acc._save()
    again = Accountant.open(tmp_path / "k.json")
    again.spend(dataclasses.replace(ar, details={"privacy_unit": "user", "user_column": "uid"}))
    with pytest.raises(ValueError, match="identified by 'uid'"):
        again.spend(dataclasses.replace(ar, details={"privacy_unit": "user", "user_column": "hh"}))
    tuple_group = Spend(0.5, 0.0, unit="substitute one record within its ('a', 'b') group")
    assert _key_of(tuple_group) == f"substitute{_SEP}within{_SEP}\"('a', 'b')\""
    assert _key_of(Spend(0.5, 0.0, unit="Substitute")) == "substitute"
