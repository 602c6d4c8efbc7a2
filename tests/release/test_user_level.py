"""Releases on data bounded to k rows per user: the sensitivity and the guarantee follow."""

from __future__ import annotations

import math

import numpy as np
import pytest

import dpbayes as dpb
from dpbayes.data import Table, as_source, bundled_path
from dpbayes.models.statistics import CountStatistics
from dpbayes.privacy import Accountant, Neighbours
from dpbayes.privacy.noise import noise_source
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


def test_unsupported_mechanism_and_forged_bound(person_k3):
    bb = dpb.models.BetaBernoulli(alpha=1, beta=1)
    with pytest.raises(ValueError, match="does not support contribution-bounded"):
        dpb.release(bb, person_k3, column="hlthp", mechanism="expmech", epsilon=1.0, rng=0)
    with pytest.raises(ValueError, match="rows_per_user comes from the data"):
        dpb.release(bb, [0, 1, 1], mechanism="laplace", epsilon=1.0, rows_per_user=3, rng=0)


def test_accountant_charges_the_person_level_release(person_k3):
    acc = Accountant(epsilon=1.0)
    src = as_source(bundled_path(), column="hlthp", user_column="person", max_rows_per_user=5)
    bb = dpb.models.BetaBernoulli(alpha=1, beta=1)
    rel = dpb.release(bb, src, mechanism="laplace", epsilon=0.6, accountant=acc, rng=0)
    assert rel.public["n"] == 20_190  # k = 5 keeps every person-year
    assert rel.guarantee.sensitivity == 5.0
    assert acc.remaining[0] == pytest.approx(0.4)
