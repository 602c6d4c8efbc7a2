"""Releases on data bounded to k rows per user: the sensitivity and the guarantee follow.

Mechanisms with native support scale the sensitivity by k; the others fall back to group
privacy (the mechanism at eps/k) in ``release/base.py`` ``plan()``.
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
from dpbayes.privacy import Accountant, GaussianMechanism, Neighbours
from dpbayes.privacy.noise import noise_source
from dpbayes.release.base import group_privacy_budget, plan
from dpbayes.release.parameters import plan_counts

CATS = ["excellent", "good", "fair", "poor"]


@pytest.fixture(scope="module")
def person_k3():
    return Table(bundled_path()).bound_contributions("person", 3)


@pytest.mark.parametrize(
    ("model", "column", "mechanism", "delta", "per_row"),
    [
        (dpb.models.BetaBernoulli(alpha=1, beta=1), "hlthp", "laplace", 0.0, 1.0),
        (dpb.models.BetaBernoulli(alpha=1, beta=1), "hlthp", "geometric", 0.0, 1.0),
        (dpb.models.BetaBernoulli(alpha=1, beta=1), "hlthp", "gaussian", 1e-6, 1.0),
        (dpb.models.DirichletCategorical(alpha=[1] * 4, categories=CATS), "health", "laplace",
         0.0, 2.0),
        (dpb.models.DirichletCategorical(alpha=[1] * 4, categories=CATS), "health", "gaussian",
         1e-6, math.sqrt(2.0)),
    ],
)  # fmt: skip
def test_sensitivity_scales_by_k(person_k3, model, column, mechanism, delta, per_row):
    rel = dpb.release(
        model, person_k3, column=column, mechanism=mechanism, epsilon=1.0, delta=delta, rng=0
    )
    g = rel.guarantee
    assert g.sensitivity == pytest.approx(3 * per_row, rel=1e-12)
    assert g.details["privacy_unit"] == "user" and g.details["rows_per_user"] == 3
    assert g.details["neighbouring_relation"] == "substitute one user (<= 3 rows)"
    assert "substitute one user (<= 3 rows)" in g.describe()
    # the statistics are those of the bounded rows: 16,952 person-years kept of 20,190
    assert rel.public["n"] == 16_952


def test_normal_mean_and_add_remove(person_k3):
    model = dpb.models.NormalMean(prior_mean=0, prior_sd=10, noise_sd=5, lower=0, upper=20)
    rel = dpb.release(model, person_k3, column="mdvis", mechanism="laplace", epsilon=1.0, rng=1)
    assert rel.guarantee.sensitivity == pytest.approx(3 * model.posterior_mean_sensitivity(16_952))
    bb = dpb.models.BetaBernoulli(alpha=1, beta=1)
    rel = dpb.release(
        bb, person_k3, column="idp", mechanism="laplace", epsilon=1.0, neighbours="add-remove",
        rng=1,
    )  # fmt: skip
    assert rel.guarantee.sensitivity == 3.0  # each of the two counts moves by <= k
    assert rel.guarantee.details["neighbouring_relation"] == "add/remove one user (<= 3 rows)"


def test_record_level_is_unchanged():
    bb = dpb.models.BetaBernoulli(alpha=1, beta=1)
    rel = dpb.release(bb, bundled_path(), column="hlthp", mechanism="laplace", epsilon=1, rng=0)
    assert rel.guarantee.sensitivity == 1.0 and "privacy_unit" not in rel.guarantee.details
    assert "substitute one record" in rel.guarantee.describe()


def test_noise_scale_is_k_over_epsilon():
    """Mean |noise| of Laplace(b) is b (sd b): 2,000 draws, a 1e-4 two-sided z-bound."""
    model = dpb.models.BetaBernoulli(alpha=1, beta=1)
    stats = CountStatistics(counts=np.array([5_000, 5_000]), n=10_000)
    plan = plan_counts(
        model, stats, epsilon=0.5, delta=0.0, neighbours=Neighbours.SUBSTITUTE, rows_per_user=4
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
# Group-privacy fallback: mechanisms without native user-level support run at eps/k.


@pytest.fixture(scope="module")
def people_k5():
    """4,000 people x 5 rows, x = 1 on every row: randomized response counts are Binomial."""
    df = pd.DataFrame({"person": np.repeat(np.arange(4_000), 5), "x": np.ones(20_000, int)})
    return as_source(df, column="x", user_column="person", max_rows_per_user=5)


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
    """Randomized response on 20,000 ones: reported ones ~ Binomial(n, p(eps/k)).

    p(eps) = e^eps / (1 + e^eps); a 1e-4 two-sided z-bound (3.89 sd) around p(1/5) = 0.550,
    while the record-level p(1) = 0.731 is 58 sd away: the test tells the two apart.
    """
    bb = dpb.models.BetaBernoulli(alpha=1, beta=1)
    planned = plan(bb, people_k5, mechanism="input", epsilon=1.0)
    rel = planned.run(noise_source(11))
    n = 20_000
    p_user = math.exp(0.2) / (1 + math.exp(0.2))
    assert rel.public["keep_probability"] == pytest.approx(p_user, rel=1e-15)
    ones = rel.released["counts"][0]
    assert abs(ones - n * p_user) < 3.89 * math.sqrt(n * p_user * (1 - p_user))
    p_record = math.exp(1.0) / (1 + math.exp(1.0))
    assert abs(ones - n * p_record) > 20 * math.sqrt(n * p_record * (1 - p_record))


def test_fallback_gaussian_sigma_and_delta(people_k5):
    """Gaussian input perturbation: sigma is the analytic one at the per-record budget."""
    model = dpb.models.NormalMean(prior_mean=0, prior_sd=10, noise_sd=1, lower=0, upper=1)
    rel = dpb.release(
        model, people_k5, mechanism="input", epsilon=1.0, delta=1e-6, rng=np.random.default_rng(2)
    )
    e, d = group_privacy_budget(1.0, 1e-6, 5)
    expected = GaussianMechanism(epsilon=e, delta=d, sensitivity=1.0).sigma
    assert rel.public["sigma"] == pytest.approx(expected, rel=1e-12)
    g = rel.guarantee
    assert (g.epsilon, g.delta) == (1.0, 1e-6)
    assert g.details["per_record_delta"] == pytest.approx(d, rel=1e-15)
    assert "per-record delta" in g.details["group_privacy"]
    # the noisy total of n values with N(0, sigma^2) each: a 1e-4 z-bound on the mean
    n = 20_000
    assert abs(rel.released["total"] - n) < 3.89 * expected * math.sqrt(n)


def test_fallback_guarantee_fields_and_describe(person_k3):
    bb = dpb.models.BetaBernoulli(alpha=1, beta=1)
    planned = plan(
        bb, person_k3, column="hlthp", mechanism="expmech", epsilon=0.9, delta=1e-6,
        sensitivity="smooth",
    )  # fmt: skip
    g = planned.guarantee
    assert (g.epsilon, g.delta, g.private) == (0.9, 1e-6, True)
    assert g.details["privacy_unit"] == "user" and g.details["rows_per_user"] == 3
    assert g.details["neighbouring_relation"] == "substitute one user (<= 3 rows)"
    assert g.details["per_record_epsilon"] == pytest.approx(0.3, rel=1e-15)
    assert g.details["per_record_delta"] == pytest.approx(1e-6 / (3 * math.exp(0.6)), rel=1e-12)
    assert g.details["group_privacy"].startswith("group privacy, k = 3, per-record eps = 0.3")
    text = g.describe()
    assert text.startswith("(0.9, 1e-06)-DP, substitute one user (<= 3 rows)")
    assert "group privacy, k = 3" in text
    rel = planned.run(noise_source(0))
    assert rel.guarantee.epsilon == 0.9 and rel.guarantee.simulation
    assert rel.public["n"] == 16_952 and rel.public["rows_per_user"] == 3
    # the release's JSON round trip keeps the user-level statement
    back = dpb.Release.from_dict(json.loads(rel.to_json()))
    assert back.guarantee == rel.guarantee


def test_fallback_noise_aware_expmech_uses_the_per_record_epsilon():
    """The recipient's posterior must model the selection at eps/k, not the stated eps."""
    df = pd.DataFrame({"person": np.repeat(np.arange(20), 3), "x": np.tile([1, 0, 0], 20)})
    src = as_source(df, column="x", user_column="person", max_rows_per_user=3)
    bb = dpb.models.BetaBernoulli(alpha=1, beta=1)
    group = dpb.release(bb, src, mechanism="expmech", epsilon=1.5, rng=4)
    g = group.guarantee
    record = dataclasses.replace(
        group,
        guarantee=dataclasses.replace(g, epsilon=0.5, details={}),
    )
    assert group.noise_aware_posterior().mean() == pytest.approx(
        record.noise_aware_posterior().mean(), rel=1e-12
    )


def test_refusals_are_one_line_and_spend_nothing(person_k3):
    acc = Accountant(epsilon=1.0)
    lr = dpb.models.BayesianLinearRegression(features=["idp"], target="lpi")
    with pytest.raises(ValueError, match="cannot read contribution-bounded") as info:
        dpb.release(lr, person_k3, mechanism="sampling", epsilon=0.5, accountant=acc, rng=0)
    assert "\n" not in str(info.value)
    bb = dpb.models.BetaBernoulli(alpha=1, beta=1)
    with pytest.raises(ValueError, match="sensitivity"):
        dpb.release(
            bb, person_k3, column="hlthp", mechanism="expmech", epsilon=0.5, accountant=acc,
            sensitivity="nosuch", rng=0,
        )  # fmt: skip
    with pytest.raises(ValueError, match="not differentially private"):
        dpb.release(
            bb, person_k3, column="hlthp", mechanism="expmech", epsilon=0.5,
            sensitivity="local", rng=0,
        )  # fmt: skip
    assert acc.spent == (0.0, 0.0) and acc.remaining[0] == 1.0


def test_accountant_charges_the_user_level_epsilon_of_the_fallback(person_k3):
    acc = Accountant(epsilon=1.0)
    bb = dpb.models.BetaBernoulli(alpha=1, beta=1)
    rel = dpb.release(
        bb, person_k3, column="hlthp", mechanism="input", epsilon=0.3, accountant=acc, rng=0
    )
    assert rel.guarantee.epsilon == 0.3
    assert acc.spent[0] == pytest.approx(0.3, rel=1e-15)
    assert acc.remaining[0] == pytest.approx(0.7)


def test_accountant_charges_the_person_level_release(person_k3):
    acc = Accountant(epsilon=1.0)
    src = as_source(bundled_path(), column="hlthp", user_column="person", max_rows_per_user=5)
    bb = dpb.models.BetaBernoulli(alpha=1, beta=1)
    rel = dpb.release(bb, src, mechanism="laplace", epsilon=0.6, accountant=acc, rng=0)
    assert rel.public["n"] == 20_190  # k = 5 keeps every person-year
    assert rel.guarantee.sensitivity == 5.0
    assert acc.remaining[0] == pytest.approx(0.4)
