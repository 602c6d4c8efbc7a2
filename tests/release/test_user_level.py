"""Releases on data bounded to k rows per user: the sensitivity and the guarantee follow.

The relation is add/remove one user (<= k rows), n private (issue 14, defect 3: a
substituted user can change n, which substitute releases publish). Mechanisms with
native support scale the add/remove sensitivity by k; the others fall back to group
privacy (the mechanism at eps/k) in ``release/base.py`` ``plan()``; mechanisms that need
a public n are refused.
"""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pandas as pd
import pytest

import dpbayes as dpb
from dpbayes.data import Table, as_source, bundled_path
from dpbayes.models.statistics import CountStatistics
from dpbayes.privacy import Accountant, Neighbours
from dpbayes.privacy.noise import noise_source
from dpbayes.release.base import group_privacy_budget, plan
from dpbayes.release.counts.mechanism import plan_counts

CATS = ["excellent", "good", "fair", "poor"]


@pytest.fixture(scope="module")
def person_k3():
    return Table(bundled_path()).bound_contributions("person", 3)


@pytest.mark.parametrize(
    ("model", "column", "mechanism", "delta"),
    [
        (dpb.models.BetaBernoulli(alpha=1, beta=1), "hlthp", "laplace", 0.0),
        (dpb.models.BetaBernoulli(alpha=1, beta=1), "hlthp", "geometric", 0.0),
        (dpb.models.BetaBernoulli(alpha=1, beta=1), "hlthp", "gaussian", 1e-6),
        (dpb.models.DirichletCategorical(alpha=[1] * 4, categories=CATS), "health", "laplace",
         0.0),
        (dpb.models.DirichletCategorical(alpha=[1] * 4, categories=CATS), "health", "gaussian",
         1e-6),
    ],
)  # fmt: skip
def test_sensitivity_scales_by_k_under_add_remove_one_user(
    person_k3, model, column, mechanism, delta
):
    rel = dpb.release(
        model, person_k3, column=column, mechanism=mechanism, epsilon=1.0, delta=delta, rng=0
    )
    g = rel.guarantee
    # add/remove one record moves one count by 1 (L1 = L2 = 1); one user, k = 3 records
    assert g.sensitivity == pytest.approx(3.0, rel=1e-12)
    assert g.neighbours is Neighbours.ADD_REMOVE
    assert g.details["privacy_unit"] == "user" and g.details["rows_per_user"] == 3
    assert g.details["neighbouring_relation"] == "add/remove one user (<= 3 rows)"
    assert "add/remove one user (<= 3 rows)" in g.describe()
    # n is private: not published, every count noised
    m = len(model.statistics(person_k3, column=column).counts)
    assert rel.public["n"] is None and rel.public["noised_coordinates"] == m
    # the statistics are those of the bounded rows: 16,952 person-years kept of 20,190
    assert model.statistics(person_k3, column=column).n == 16_952


def test_substitute_is_refused_at_user_level_and_n_is_not_published(person_k3):
    """Issue 14, defect 3: replacing a user with 5 rows by one with 3 changes n; the old
    user-level "substitute one user" releases published n, telling the two apart."""
    bb = dpb.models.BetaBernoulli(alpha=1, beta=1)
    acc = Accountant(epsilon=5.0)
    with pytest.raises(ValueError, match=r"substitute.*not available on user-level") as info:
        dpb.release(
            bb, person_k3, column="hlthp", mechanism="laplace", epsilon=1.0,
            neighbours="substitute", accountant=acc,
        )  # fmt: skip
    assert "\n" not in str(info.value) and acc.spent == (0.0, 0.0)
    with pytest.raises(ValueError, match="substitute"):
        plan_counts(
            bb, CountStatistics(counts=np.array([3, 2]), n=5), epsilon=1.0, delta=0.0,
            neighbours=Neighbours.SUBSTITUTE, rows_per_user=2,
        )  # fmt: skip
    # two user-level data sets, one user holding 5 rows vs 3: n = 305 vs 303
    base = pd.DataFrame({"person": np.repeat(np.arange(100), 3), "x": np.tile([1, 0, 0], 100)})
    five = pd.concat([base, pd.DataFrame({"person": [999] * 5, "x": [1, 1, 0, 0, 0]})])
    three = pd.concat([base, pd.DataFrame({"person": [999] * 3, "x": [1, 0, 0]})])
    outs = []
    for df in (five, three):
        src = as_source(df, column="x", user_column="person", max_rows_per_user=5)
        rel = dpb.release(bb, src, mechanism="geometric", epsilon=1.0, rng=1)
        assert rel.public["n"] is None and "n" not in rel.released
        outs.append(rel.released["counts"])
    # the released counts are noised independently: their sum is not the exact n
    assert [sum(c) for c in outs] != [305, 303]


def test_normal_mean_at_user_level_noises_count_and_sum(person_k3):
    model = dpb.models.NormalMean(prior_mean=0, prior_sd=10, noise_sd=5, lower=0, upper=20)
    rel = dpb.release(model, person_k3, column="mdvis", mechanism="laplace", epsilon=1.0, rng=1)
    g = rel.guarantee
    # (n, centred sum / 10): one record moves each by <= 1, L1 2, plus 2^-16 for the one
    # rounding of the centred sum; one user 3 times that
    assert g.sensitivity == g.details["scale"] == 3 * (2.0 + 2.0**-16)
    assert g.details["neighbouring_relation"] == "add/remove one user (<= 3 rows)"
    assert rel.public["n"] is None and set(rel.released) == {"count", "centred_sum"}
    assert abs(rel.released["count"] - 16_952) < 6.0 * 20  # Laplace(6) tail ~ 2e-9
    # n is private: the noise-aware posterior states its prior on n (flat by default)
    post = rel.noise_aware_posterior()
    assert post.n_prior.kind == "flat" and post.omitted_mass < 1e-9
    lo, hi = post.interval(0.9)
    assert lo < post.mean() < hi
    gauss = dpb.release(
        model, person_k3, column="mdvis", mechanism="gaussian", epsilon=1.0, delta=1e-6, rng=1
    )
    assert gauss.guarantee.sensitivity == pytest.approx(3 * math.hypot(1, 1 + 2**-16), rel=1e-15)


def test_mechanisms_that_need_a_public_n_are_refused_at_user_level(person_k3):
    bb = dpb.models.BetaBernoulli(alpha=1, beta=1)
    for mechanism, extra in (("expmech", {}), ("input", {})):
        with pytest.raises(ValueError, match="user-level data keep n private") as info:
            dpb.release(
                bb, person_k3, column="hlthp", mechanism=mechanism, epsilon=1.0, rng=0, **extra
            )
        assert "\n" not in str(info.value)


def test_record_level_is_unchanged():
    bb = dpb.models.BetaBernoulli(alpha=1, beta=1)
    rel = dpb.release(bb, bundled_path(), column="hlthp", mechanism="laplace", epsilon=1, rng=0)
    assert rel.guarantee.sensitivity == 1.0 and "privacy_unit" not in rel.guarantee.details
    assert "substitute one record" in rel.guarantee.describe()
    assert rel.public["n"] == 20_190


def test_noise_scale_is_k_over_epsilon():
    """Mean |noise| of Laplace(b) is b (sd b): 2,000 draws, a 1e-4 two-sided z-bound."""
    model = dpb.models.BetaBernoulli(alpha=1, beta=1)
    stats = CountStatistics(counts=np.array([5_000, 5_000]), n=10_000)
    plan = plan_counts(
        model, stats, epsilon=0.5, delta=0.0, neighbours=Neighbours.ADD_REMOVE, rows_per_user=4
    )
    draws = np.array(
        [plan.run(noise_source(seed)).released["counts"][0] - 5_000 for seed in range(2_000)]
    )
    b = 4 / 0.5
    assert abs(np.abs(draws).mean() - b) < 3.89 * b / math.sqrt(draws.size)


def test_forged_bound_is_refused():
    bb = dpb.models.BetaBernoulli(alpha=1, beta=1)
    with pytest.raises(ValueError, match="rows_per_user comes from the data"):
        dpb.release(bb, [0, 1, 1], mechanism="laplace", epsilon=1.0, rows_per_user=3, rng=0)


# --------------------------------------------------------------------------------------
# Group-privacy fallback: mechanisms without native user-level support run at eps/k,
# under add/remove one record.


def binary_net() -> dpb.models.BayesNet:
    return dpb.models.BayesNet({"a": [0, 1], "b": [0, 1]}, [("a", "b")], alpha=1.0)


@pytest.fixture(scope="module")
def people_k5():
    """800 people x 5 rows of a two-node binary network."""
    g = np.random.default_rng(5)
    return Table(
        pd.DataFrame(
            {
                "person": np.repeat(np.arange(800), 5),
                "a": g.integers(0, 2, 4_000),
                "b": g.integers(0, 2, 4_000),
            }
        ),
        user_column="person",
        max_rows_per_user=5,
    )


def test_group_privacy_budget_formula():
    e, d = group_privacy_budget(1.0, 1e-6, 5)
    assert e == 0.2
    assert d == pytest.approx(1e-6 / (5 * math.exp(4 * 0.2)), rel=1e-15)
    # group privacy of (e, d) over k records: (k e, k e^{(k-1) e} d) is the asked (eps, delta)
    assert 5 * e == pytest.approx(1.0, rel=1e-15)
    assert 5 * math.exp(4 * e) * d == pytest.approx(1e-6, rel=1e-12)
    assert group_privacy_budget(0.7, 0.0, 1) == (0.7, 0.0)
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="k must be an integer >= 1"):
            group_privacy_budget(1.0, 0.0, bad)


def test_fallback_noise_runs_at_epsilon_over_k(people_k5):
    """Fourier (no native support): Lap(|T| / (eps/5)) on each coefficient, add/remove.

    |T| = 4 coefficients ({}, a, b, ab), all noised under add/remove (n private): scale
    4 * 5 / eps; over 400 seeded draws the noise on one coefficient is Laplace with that
    scale (KS) and the record-level scale 4 / eps is rejected.
    """
    from scipy import stats as st

    bn = binary_net()
    planned = plan(bn, people_k5, mechanism="fourier", epsilon=2.0, stealth=0.0)
    g = planned.guarantee
    assert (g.epsilon, g.neighbours) == (2.0, Neighbours.ADD_REMOVE)
    assert g.details["per_record_epsilon"] == pytest.approx(0.4, rel=1e-15)
    assert g.details["neighbouring_relation"] == "add/remove one user (<= 5 rows)"
    from dpbayes.release.bayes_net.fourier import fourier_coefficients

    truth = fourier_coefficients(bn, bn.statistics(people_k5))[1]  # bit 0: node "a"
    noise = np.array(
        [planned.run(noise_source(s)).released["coefficients"]["a"] - truth for s in range(400)]
    )
    scale = 4 * 5 / 2.0
    assert st.kstest(noise, st.laplace(scale=scale).cdf).pvalue > 1e-4
    assert st.kstest(noise, st.laplace(scale=4 / 2.0).cdf).pvalue < 1e-8
    assert planned.run(noise_source(0)).public["n"] is None


def test_fallback_lifts_an_eps_delta_plan_to_the_user_level_statement():
    """The (eps, delta) fallback: planned at (eps/k, delta/(k e^{(k-1)eps/k})), stated at
    (eps, delta); a planner that states more composes from what it states."""
    from dpbayes.privacy import Guarantee
    from dpbayes.release.base import Plan, _group_privacy_plan

    e, d = group_privacy_budget(0.9, 1e-6, 3)
    inner = Guarantee(epsilon=e, delta=d, neighbours="add-remove", mechanism="m", sensitivity=1.0)
    out = _group_privacy_plan(
        Plan(guarantee=inner, run=lambda src: None),  # type: ignore[arg-type,return-value]
        3, 0.9, 1e-6, e, d, Neighbours.ADD_REMOVE,
    )  # fmt: skip
    g = out.guarantee
    assert (g.epsilon, g.delta) == (0.9, 1e-6)
    assert g.details["per_record_delta"] == pytest.approx(1e-6 / (3 * math.exp(0.6)), rel=1e-12)
    assert g.details["group_privacy"].startswith("group privacy, k = 3, per-record eps = 0.3")
    assert g.describe().startswith("(0.9, 1e-06)-DP, add/remove one user (<= 3 rows)")
    more = _group_privacy_plan(
        Plan(guarantee=replace_eps(inner, 2 * e), run=lambda src: None),  # type: ignore[arg-type,return-value]
        3, 0.9, 1e-6, e, d, Neighbours.ADD_REMOVE,
    )  # fmt: skip
    assert more.guarantee.epsilon == pytest.approx(6 * e)
    with pytest.raises(ValueError, match="substitute"):
        _group_privacy_plan(
            Plan(guarantee=inner, run=lambda src: None),  # type: ignore[arg-type,return-value]
            3, 0.9, 1e-6, e, d, Neighbours.SUBSTITUTE,
        )  # fmt: skip


def replace_eps(g, eps):
    return dataclasses.replace(g, epsilon=eps)


def test_fallback_release_round_trips_its_user_level_statement(people_k5):
    rel = plan(binary_net(), people_k5, mechanism="fourier", epsilon=0.9).run(noise_source(0))
    assert rel.guarantee.epsilon == 0.9 and rel.guarantee.simulation
    assert rel.public["rows_per_user"] == 5 and rel.public["n"] is None
    assert rel.to_dict()["guarantee"]["details"]["neighbouring_relation"] == (
        "add/remove one user (<= 5 rows)"
    )
    json.loads(rel.to_json())


def test_refusals_are_one_line_and_spend_nothing(person_k3):
    acc = Accountant(epsilon=1.0)
    lr = dpb.models.BayesianLinearRegression(features=["idp"], target="lpi")
    # the engine reads a regression's bounded table now; the missing bounds are refused
    with pytest.raises(ValueError, match="must set feature_bound") as info:
        dpb.release(lr, person_k3, mechanism="sampling", epsilon=0.5, accountant=acc)
    assert "\n" not in str(info.value)
    bb = dpb.models.BetaBernoulli(alpha=1, beta=1)
    with pytest.raises(ValueError, match="sensitivity"):
        dpb.release(
            bb, person_k3, column="hlthp", mechanism="expmech", epsilon=0.5, accountant=acc,
            sensitivity="nosuch",
        )  # fmt: skip
    with pytest.raises(ValueError, match="substitute"):
        dpb.release(
            bb, person_k3, column="hlthp", mechanism="laplace", epsilon=0.5, accountant=acc,
            neighbours="substitute",
        )  # fmt: skip
    assert acc.spent == (0.0, 0.0) and acc.remaining[0] == 1.0


def test_accountant_charges_the_user_level_epsilon_of_the_fallback(people_k5):
    acc = Accountant(epsilon=1.0)
    rel = dpb.release(binary_net(), people_k5, mechanism="fourier", epsilon=0.3, accountant=acc)
    assert rel.guarantee.epsilon == 0.3 and not rel.simulation
    assert acc.spent[0] == pytest.approx(0.3, rel=1e-15)
    assert acc.remaining[0] == pytest.approx(0.7)


def test_accountant_charges_the_person_level_release():
    acc = Accountant(epsilon=1.0)
    src = as_source(bundled_path(), column="hlthp", user_column="person", max_rows_per_user=5)
    bb = dpb.models.BetaBernoulli(alpha=1, beta=1)
    rel = dpb.release(bb, src, mechanism="laplace", epsilon=0.6, accountant=acc)
    assert rel.public["n"] is None  # k = 5 keeps every person-year; n stays private
    assert rel.guarantee.sensitivity == 5.0
    assert acc.remaining[0] == pytest.approx(0.4)


def test_the_privacy_map_bounds_the_exact_loss_d_in_records_apart():
    """plan.privacy(d) is the stated guarantee at d = 1 and bounds the exact loss of data
    sets d substitutions apart (geometric noise: the output law is finite and exact)."""
    from scipy import stats

    from dpbayes.release.base import group_privacy, plan

    bb = dpb.models.BetaBernoulli(alpha=1, beta=1)
    n, eps = 40, 0.3
    p = plan(bb, [1] * 20 + [0] * 20, mechanism="geometric", epsilon=eps)
    assert p.privacy(1) == (p.guarantee.epsilon, p.guarantee.delta) == (eps, 0.0)
    scale = p.guarantee.details["scale"]
    q = math.exp(-1.0 / scale)
    z = np.arange(-400, 401)
    law = stats.dlaplace.pmf(z, -math.log(q))
    for d in (1, 2, 5):
        # released count = clip(c + Z, 0, n); data sets d substitutions apart: c and c + d
        def released(c: int) -> np.ndarray:
            out = np.zeros(n + 1)
            np.add.at(out, np.clip(c + z, 0, n), law)
            return out

        a, b = released(20), released(20 + d)
        exact = float(np.max(np.abs(np.log(a) - np.log(b))))
        assert exact <= p.privacy(d)[0] + 1e-9
        assert exact == pytest.approx(d * eps, rel=1e-6)  # tight for the coin's counts
    assert group_privacy(0.5, 1e-6, 3) == pytest.approx((1.5, 3 * math.exp(1.0) * 1e-6))
    with pytest.raises(ValueError, match="d_in"):
        p.privacy(0)
