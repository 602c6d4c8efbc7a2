"""Tight composition (PLD, RDP) in the accountant, checked against independent exact
computations: the optimal composition of k pure eps-DP guarantees (the binomial formula
of the randomized-response pair, Kairouz, Oh & Viswanath 2015) and the exact composition
of k Gaussian mechanisms (one Gaussian with mu = sqrt(k) / ratio; Balle & Wang 2018)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import optimize, special, stats

from dpbayes.privacy import Accountant, GaussianMechanism, LaplaceMechanism
from dpbayes.privacy.accountant import BudgetExceeded, LedgerError
from dpbayes.privacy.composition import Event, compose, event_of


def _delta_pure(eps: float, eps0: float, k: int) -> float:
    """Exact delta(eps) of the optimal k-fold composition of eps0-DP guarantees."""
    j = np.arange(k + 1)
    loss = (k - 2 * j) * eps0  # privacy loss when j of the k coordinates flipped
    log_p = (
        special.gammaln(k + 1)
        - special.gammaln(j + 1)
        - special.gammaln(k - j + 1)
        + (k - j) * (eps0 - np.logaddexp(0, eps0))
        - j * np.logaddexp(0, eps0)
    )
    keep = loss > eps
    terms = np.exp(log_p[keep]) * -np.expm1(eps - loss[keep])
    return float(terms.sum())


def _eps_for(delta_fn, delta: float, hi: float) -> float:  # type: ignore[no-untyped-def]
    return float(optimize.brentq(lambda e: delta_fn(e) - delta, 0.0, hi, xtol=1e-12))


def exact_pure(eps0: float, k: int, delta: float) -> float:
    return _eps_for(lambda e: _delta_pure(e, eps0, k), delta, k * eps0)


def exact_gaussian(ratio: float, k: int, delta: float) -> float:
    mu = math.sqrt(k) / ratio

    def d(e: float) -> float:
        return float(
            stats.norm.cdf(-e / mu + mu / 2) - math.exp(e) * stats.norm.cdf(-e / mu - mu / 2)
        )

    return _eps_for(d, delta, 50 * mu + 50)


@pytest.mark.parametrize("eps0,k", [(0.01, 300), (0.05, 40), (0.1, 100)])
def test_pld_of_pure_events_is_above_and_within_2_percent_of_the_exact_composition(eps0, k):
    exact = exact_pure(eps0, k, 1e-6)
    got, dlt = compose([Event(eps0, 0.0)] * k, "pld", 1e-6)
    assert dlt == 1e-6
    assert exact <= got <= 1.02 * exact, (exact, got)
    assert got < k * eps0  # and tighter than basic composition


def test_pld_of_gaussian_events_is_above_the_exact_composition_and_no_looser_than_rdp():
    mech = GaussianMechanism(epsilon=0.5, delta=1e-8, sensitivity=2.0)
    ev = event_of(0.5, 1e-8, 2.0, mech.guarantee().neighbours.value, mech.guarantee().details)
    assert ev.gaussian_ratio == pytest.approx(mech.sigma / 2.0)
    exact = exact_gaussian(mech.sigma / 2.0, 100, 1e-6)
    pld, _ = compose([ev] * 100, "pld", 1e-6)
    rdp, _ = compose([ev] * 100, "rdp", 1e-6)
    assert exact <= pld <= 1.02 * exact
    assert pld <= rdp
    assert rdp < 100 * 0.5  # both far below basic composition


def test_a_restated_gaussian_guarantee_falls_back_to_its_eps_delta():
    from dataclasses import replace

    g = GaussianMechanism(epsilon=0.5, delta=1e-8, sensitivity=1.0).guarantee()
    lifted = replace(g, epsilon=2.5, sensitivity=5.0)  # e.g. restated for a group of 5
    ev = event_of(lifted.epsilon, lifted.delta, lifted.sensitivity, "substitute", lifted.details)
    assert ev.gaussian_ratio is None


def test_rdp_needs_a_budget_delta_and_composition_is_checked():
    with pytest.raises(ValueError, match="composition='rdp' needs a budget delta"):
        Accountant(1.0, composition="rdp")
    with pytest.raises(ValueError, match="composition must be one of"):
        Accountant(1.0, 1e-6, composition="zcdp")


def _admitted(acc: Accountant, eps0: float, limit: int = 2000) -> int:
    g = LaplaceMechanism(epsilon=eps0, sensitivity=1.0).guarantee()
    for i in range(limit):
        try:
            acc.spend(g)
        except BudgetExceeded:
            return i
    return limit


def test_rdp_admits_at_least_3x_the_laplace_releases_of_basic_and_never_overspends():
    basic = _admitted(Accountant(1.0, 1e-6), 0.01)
    rdp_acc = Accountant(1.0, 1e-6, composition="rdp")
    rdp = _admitted(rdp_acc, 0.01)
    assert basic == 100
    assert rdp >= 3 * basic
    eps, dlt = rdp_acc.spent
    assert eps <= 1.0 * (1 + 1e-9) and dlt <= 1e-6
    # the true loss of what was admitted is within the budget
    assert exact_pure(0.01, rdp, 1e-6) <= 1.0


def test_pld_refuses_laplace_releases_and_admits_gaussians_by_their_pld():
    """A PLD budget check is a valid filter for Gaussian spends only (Gaussian DP): a pld
    ledger refuses a Laplace release (nothing spent), and admits Gaussian ones up to the
    budget by the Gaussian's exact composition."""
    acc = Accountant(1.0, 1e-6, composition="pld")
    with pytest.raises(ValueError, match="takes Gaussian-noise spends only"):
        acc.spend(LaplaceMechanism(epsilon=0.01, sensitivity=1.0).guarantee())
    with pytest.raises(ValueError, match="takes Gaussian-noise spends only"):
        acc.spent_after(0.01)
    with pytest.raises(ValueError, match="takes Gaussian-noise spends only"):
        acc.check_unit(LaplaceMechanism(epsilon=0.01, sensitivity=1.0).guarantee())
    assert acc.spends == () and not acc.can_spend(0.01)
    g = GaussianMechanism(epsilon=0.05, delta=1e-8, sensitivity=1.0).guarantee()
    acc.check_unit(g)
    n = 0
    while True:
        try:
            acc.spend(g)
        except BudgetExceeded:
            break
        n += 1
    sigma = acc.spends[0].gaussian_ratio
    # k Gaussians of sigma are one Gaussian of sigma / sqrt(k): the exact (eps, delta)
    assert gaussian_delta(sigma / math.sqrt(n), 1.0) <= 1e-6
    assert gaussian_delta(sigma / math.sqrt(n + 2), 1.0) > 1e-6  # the check is tight
    assert n > 3 * 20  # basic composition admits 20


def gaussian_delta(sigma: float, eps: float) -> float:
    """delta(eps) of one Gaussian of noise sigma at sensitivity 1 (Balle & Wang 2018)."""
    return float(stats.norm.cdf(0.5 / sigma - eps * sigma)) - math.exp(eps) * float(
        stats.norm.cdf(-0.5 / sigma - eps * sigma)
    )


def test_parallel_parts_compose_separately_under_pld():
    acc = Accountant(1.0, 1e-6, composition="pld")
    g = GaussianMechanism(
        epsilon=0.05, delta=1e-8, sensitivity=1.0, neighbours="add-remove"
    ).guarantee()
    for _ in range(30):
        acc.spend(g, scope=["a"])
        acc.spend(g, scope=["b"])
    ev = event_of(g.epsilon, g.delta, 1.0, g.neighbours.value, g.details)
    one_part = compose([ev] * 30, "pld", 1e-6)
    assert acc.spent == pytest.approx(one_part)


def test_the_ledger_records_composition_and_events_and_reopens_to_the_same_spent(tmp_path):
    path = tmp_path / "ledger.json"
    acc = Accountant(2.0, 1e-6, path=path, composition="pld")
    g = GaussianMechanism(epsilon=0.3, delta=1e-8, sensitivity=1.0).guarantee()
    for _ in range(20):
        acc.spend(g, source="visits.parquet")
    saved = path.read_text()
    with pytest.raises(ValueError, match="nothing was spent"):
        acc.spend(LaplaceMechanism(epsilon=0.05, sensitivity=1.0).guarantee())
    assert path.read_text() == saved
    doc = json.loads(path.read_text())
    assert doc["composition"] == "pld" and doc["version"] == 2
    first = doc["spends"][0]
    assert first["source"] == "visits.parquet" and first["gaussian_ratio"] > 0
    assert first["unit"] == "substitute" and first["time"] > 0
    again = Accountant.open(path)
    assert again.composition == "pld"
    assert again.spent == acc.spent
    assert again.spent[0] < 20 * 0.3


def test_a_version_1_ledger_opens_as_basic_composition(tmp_path):
    import hashlib

    body = {
        "format": "dpbayes-ledger",
        "version": 1,
        "total": {"epsilon": 1.0, "delta": 0.0},
        "spends": [{"epsilon": 0.25, "delta": 0.0, "label": "old", "scope": None, "time": 1.0}],
    }
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"))
    doc = {**body, "checksum": hashlib.sha256(canonical.encode()).hexdigest()}
    path = tmp_path / "old.json"
    path.write_text(json.dumps(doc))
    acc = Accountant.open(path)
    assert acc.composition == "basic" and acc.spent == (0.25, 0.0)
    acc.spend(0.25)
    assert Accountant.open(path).spent == (0.5, 0.0)
    assert json.loads(path.read_text())["version"] == 2  # rewritten in the new format
    doc["composition"] = "pld"  # a version-1 ledger cannot claim a tight composition
    path.write_text(json.dumps(doc))
    assert Accountant.open(path).composition == "basic"
    doc["version"] = 2  # nor can the version be changed without the checksum noticing
    path.write_text(json.dumps(doc))
    with pytest.raises(LedgerError, match="damaged"):
        Accountant.open(path)


@settings(max_examples=25, deadline=None)
@given(
    st.lists(
        st.tuples(st.floats(0.001, 2.0), st.sampled_from([0.0, 1e-9, 1e-7])),
        min_size=1,
        max_size=6,
    ),
    st.integers(1, 50),
)
def test_tight_composition_is_never_looser_than_basic(events, repeat):
    evs = [Event(e, d) for e, d in events] * repeat
    basic = compose(evs, "basic", 1e-5)
    for method in ("pld", "rdp"):
        eps, dlt = compose(evs, method, 1e-5)
        if basic[1] <= 1e-5:
            assert eps <= basic[0] * (1 + 1e-12)
        assert dlt <= max(basic[1], 1e-5)


def test_budget_show_lists_each_entry_with_time_mechanism_unit_and_source(tmp_path, capsys):
    from dpbayes.cli import main

    ledger = tmp_path / "L.json"
    assert (
        main(
            [
                "budget",
                "init",
                str(ledger),
                "--epsilon",
                "3",
                "--delta",
                "1e-6",
                "--composition",
                "rdp",
            ]
        )
        == 0
    )
    acc = Accountant.open(ledger)
    acc.spend(LaplaceMechanism(epsilon=0.5, sensitivity=1.0).guarantee(), source="visits.csv")
    capsys.readouterr()
    assert main(["budget", "show", str(ledger)]) == 0
    out = capsys.readouterr().out
    assert "composition: rdp" in out
    line = next(ln for ln in out.splitlines() if "visits.csv" in ln)
    assert "UTC" in line and "eps 0.5" in line and "laplace" in line and "unit: substitute" in line
    assert main(["budget", "show", str(ledger), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["composition"] == "rdp" and doc["spends"][0]["source"] == "visits.csv"


@pytest.mark.parametrize("composition", ["pld", "rdp"])
def test_running_parts_equal_a_recount_of_each_part_from_scratch(composition):
    """The accountant composes each part incrementally (one step per spend it reads); the
    value is the one composing each part's multiset from scratch gives, also after an
    unscoped spend (which reads every part) and for parts that share their history."""
    rng = np.random.default_rng(5)
    acc = Accountant(50.0, 1e-6, composition=composition)
    spends: list[tuple[float, float, list[str] | None]] = []
    gauss = GaussianMechanism(
        epsilon=0.4, delta=1e-8, sensitivity=1.0, neighbours="add-remove"
    ).guarantee()
    ratio = event_of(gauss.epsilon, gauss.delta, 1.0, gauss.neighbours.value, gauss.details)
    others = {}  # pld takes Gaussian spends only: there the others are Gaussians too
    for i in range(60):
        scope = None if i in (17, 41) else [f"c{j}" for j in rng.choice(6, 2, replace=False)]
        if i % 9 == 4:
            acc.spend(gauss, scope=scope)
            spends.append((gauss.epsilon, gauss.delta, scope))
        elif composition == "pld":
            e = round(float(rng.uniform(0.5, 2.0)), 2)
            g = GaussianMechanism(
                epsilon=e, delta=1e-7, sensitivity=1.0, neighbours="add-remove"
            ).guarantee()
            others[(e, 1e-7)] = event_of(e, 1e-7, 1.0, g.neighbours.value, g.details)
            acc.spend(g, scope=scope)
            spends.append((e, 1e-7, scope))
        else:
            e = float(rng.uniform(0.005, 0.05))
            acc.spend(e, scope=scope)
            spends.append((e, 0.0, scope))

    def event(e: float, d: float) -> Event:
        if (e, d) == (gauss.epsilon, gauss.delta):
            return ratio
        return others.get((e, d), Event(e, d))

    glob = [event(e, d) for e, d, s in spends if s is None]
    parts = {
        p: glob + [event(e, d) for e, d, s in spends if s is not None and p in s]
        for p in {p for _, _, s in spends for p in s or ()}
    }
    want = [_recount(evs, composition) for evs in parts.values()]
    got = acc.spent
    assert got[0] == pytest.approx(max(w[0] for w in want), rel=1e-9)
    assert got[1] == max(w[1] for w in want)
    # "would it fit" asks the same question without changing anything
    before = acc.spent
    after = acc.spent_after(gauss, scope=["c0"])
    assert after[0] >= before[0] and acc.spent == before
    acc.spend(gauss, scope=["c0"])
    assert acc.spent == after


def _recount(events: list[Event], composition: str) -> tuple[float, float]:
    """A part's value from scratch: its multiset composed as a filter reports it."""
    return compose(events, composition, 1e-6, adaptive=True)
