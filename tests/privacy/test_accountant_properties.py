"""Property tests (hypothesis): whatever the order and sizes of spends, with or without
scopes, the budget is never overspent, what remains is never negative, a refused spend
changes nothing, and a spend is refused exactly when it would not fit.
"""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from dpbayes.privacy import Accountant, BudgetExceeded

TOL = 1e-9  # the accountant's documented relative slack

PARTS = ["a", "b", "c", "d"]

spend_st = st.tuples(
    st.floats(min_value=1e-6, max_value=1.5, allow_nan=False, allow_infinity=False),
    st.one_of(st.just(0.0), st.floats(min_value=1e-9, max_value=5e-6)),
    st.one_of(st.none(), st.lists(st.sampled_from(PARTS), min_size=1, max_size=3)),
)


def oracle(spends):
    """spent = sum(unscoped) + max over parts of sum(scoped spends reading the part).

    Sums are exactly rounded (fsum), as the accountant's, so the fit decision at the
    boundary is the same computation and the test cannot flake on the last bit.
    """
    glob_e = math.fsum(e for e, _, s in spends if s is None)
    glob_d = math.fsum(d for _, d, s in spends if s is None)
    part_e = [math.fsum(e for e, _, s in spends if s is not None and p in s) for p in PARTS]
    part_d = [math.fsum(d for _, d, s in spends if s is not None and p in s) for p in PARTS]
    return glob_e + max(part_e), glob_d + max(part_d)


@settings(max_examples=60, deadline=None)
@given(
    total_eps=st.floats(min_value=0.05, max_value=3.0),
    total_delta=st.one_of(st.just(0.0), st.floats(min_value=1e-8, max_value=1e-5)),
    attempts=st.lists(spend_st, min_size=1, max_size=30),
)
def test_budget_invariants(total_eps, total_delta, attempts):
    acc = Accountant(total_eps, total_delta)
    accepted = []
    for eps, delta, scope in attempts:
        before_spends, before_spent = acc.spends, acc.spent
        would = oracle([*accepted, (eps, delta, scope)])
        fits = would[0] <= total_eps * (1 + TOL) and would[1] <= total_delta * (1 + TOL)
        try:
            acc.spend(eps, delta, scope=scope)
        except BudgetExceeded as exc:
            assert not fits, f"refused a spend that fits: {would} of {(total_eps, total_delta)}"
            assert acc.spends == before_spends and acc.spent == before_spent
            assert "remains" in str(exc)
        else:
            assert fits, f"accepted a spend that does not fit: {would}"
            accepted.append((eps, delta, scope))
        spent_eps, spent_delta = acc.spent
        assert spent_eps <= total_eps * (1 + TOL)
        assert spent_delta <= total_delta * (1 + TOL)
        rem_eps, rem_delta = acc.remaining
        assert rem_eps >= 0.0 and rem_delta >= 0.0
        assert math.isclose(rem_eps, max(0.0, total_eps - spent_eps), abs_tol=1e-15)
        expected = oracle(accepted) if accepted else (0.0, 0.0)
        assert math.isclose(spent_eps, expected[0], rel_tol=1e-12, abs_tol=1e-15)
        assert math.isclose(spent_delta, expected[1], rel_tol=1e-12, abs_tol=1e-21)
    assert len(acc.spends) == len(accepted)


@settings(max_examples=30, deadline=None)
@given(n=st.integers(min_value=1, max_value=200), total=st.floats(min_value=0.01, max_value=10))
def test_equal_spends_fill_the_budget_exactly(n, total):
    """n spends of total/n always fit (the float slack absorbs rounding); one more never."""
    acc = Accountant(total)
    share = total / n
    for _ in range(n):
        acc.spend(share)
    assert acc.spent[0] <= total * (1 + TOL)
    try:
        acc.spend(share)
    except BudgetExceeded:
        pass
    else:  # pragma: no cover - would be an overspend of a whole share
        raise AssertionError("overspent")
