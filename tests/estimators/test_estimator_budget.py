"""The estimators' budget: an accountant that every fit charges (clones included), and a
seeded fit that says it is a simulation (a review: fits spent nothing anywhere, and
``random_state`` silently made them simulations)."""

from __future__ import annotations

import copy
import pickle
import warnings
from typing import Any

import numpy as np
import pytest
from sklearn.model_selection import GridSearchCV, cross_val_score

from dpbayes.estimators import (
    PrivateBayesianLinearRegression,
    PrivateBayesianLogisticRegression,
    PrivateNaiveBayes,
)
from dpbayes.privacy import Accountant, BudgetExceeded, PrivacyLeakWarning


def data(kind: str) -> tuple[np.ndarray, np.ndarray]:
    g = np.random.default_rng(0)
    if kind == "naive-bayes":
        y = g.integers(0, 2, 300)
        return (g.random((300, 3)) < np.where(y[:, None] == 1, 0.7, 0.3)).astype(int), y
    x = g.uniform(-1, 1, (300, 3))
    if kind == "logistic":
        return x, (x @ np.array([2.0, -1.0, 0.5]) + g.logistic(size=300) > 0).astype(int)
    return x, x @ np.array([0.5, -0.3, 0.2]) + g.normal(0, 0.3, 300)


def estimator(kind: str, **kw: Any) -> Any:
    if kind == "naive-bayes":
        return PrivateNaiveBayes(categories=[0, 1], classes=[0, 1], **kw)
    if kind == "logistic":
        return PrivateBayesianLogisticRegression(feature_bounds=(-1, 1), classes=[0, 1], **kw)
    mech = "ssp" if kind == "linear-ssp" else "sampling"
    return PrivateBayesianLinearRegression(
        feature_bounds=(-1, 1), label_bounds=(-2, 2), mechanism=mech, **kw
    )


KINDS = ["naive-bayes", "logistic", "linear-ssp", "linear-sampling"]


@pytest.mark.parametrize("kind", KINDS)
def test_every_fit_charges_the_accountant_and_one_it_cannot_pay_for_draws_nothing(
    kind: str,
) -> None:
    x, y = data(kind)
    acc = Accountant(1.0)
    est = estimator(kind, epsilon=0.4, accountant=acc)
    est.fit(x, y)
    assert acc.spent[0] == pytest.approx(0.4)
    first = est.guarantee_
    est.fit(x, y)  # a refit is another release
    assert acc.spent[0] == pytest.approx(0.8) and len(acc.spends) == 2
    with pytest.raises(BudgetExceeded):
        est.fit(x, y)
    assert acc.spent[0] == pytest.approx(0.8) and len(acc.spends) == 2
    assert first.simulation is False


@pytest.mark.parametrize("kind", ["logistic", "linear-ssp"])
def test_model_selection_spends_once_per_fit_on_the_one_accountant(kind: str) -> None:
    """scikit-learn clones deep-copy parameters: the clones' fits charge this accountant."""
    x, y = data(kind)
    acc = Accountant(10.0)
    est = estimator(kind, epsilon=0.5, accountant=acc)
    assert copy.deepcopy(acc) is acc
    cross_val_score(est, x, y, cv=3)
    assert len(acc.spends) == 3 and acc.spent[0] == pytest.approx(1.5)
    GridSearchCV(est, {"epsilon": [0.25, 0.5]}, cv=2).fit(x, y)
    # 2 x 2 fits of the search, then the best one refitted on all the data
    assert len(acc.spends) == 3 + 5
    with pytest.raises(TypeError, match="cannot be sent to another process"):
        pickle.dumps(acc)  # n_jobs > 1 would lose the workers' spends


def test_a_ledger_accountant_crosses_processes_through_its_file(tmp_path: Any) -> None:
    acc = Accountant(2.0, path=tmp_path / "ledger.json")
    x, y = data("logistic")
    twin = pickle.loads(pickle.dumps(acc))  # what a worker process receives
    estimator("logistic", epsilon=0.5, accountant=twin).fit(x, y)
    # what the parent reports is the file's: the worker's spend shows before any charge here
    assert acc.spent[0] == pytest.approx(0.5) and acc.remaining[0] == pytest.approx(1.5)
    assert len(acc.spends) == 1 and acc.summary()["spends"] == 1
    assert not acc.can_spend(1.6) and acc.spent_after(1.0)[0] == pytest.approx(1.5)
    estimator("logistic", epsilon=0.5, accountant=acc).fit(x, y)  # reads the worker's spend
    assert acc.spent[0] == pytest.approx(1.0)
    assert Accountant.open(tmp_path / "ledger.json").spent[0] == pytest.approx(1.0)


@pytest.mark.parametrize("kind", KINDS)
def test_a_seeded_fit_says_it_is_a_simulation_and_a_real_budget_refuses_it(kind: str) -> None:
    x, y = data(kind)
    with pytest.warns(PrivacyLeakWarning, match="random_state=3 seeds the noise"):
        est = estimator(kind, epsilon=1.0, random_state=3).fit(x, y)
    assert est.guarantee_.simulation is True
    acc = Accountant(5.0)
    with pytest.raises(ValueError, match="simulation"):
        estimator(kind, epsilon=1.0, random_state=3, accountant=acc).fit(x, y)
    assert acc.spent[0] == 0.0
    sim = Accountant(5.0, simulation=True)  # an explicit simulation: no warning
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyLeakWarning)
        estimator(kind, epsilon=1.0, random_state=3, accountant=sim).fit(x, y)
    assert sim.spent[0] == pytest.approx(1.0)


def test_an_accountant_of_another_type_is_refused_before_anything_is_drawn() -> None:
    x, y = data("logistic")
    with pytest.raises(TypeError, match="accountant must be a dpbayes Accountant"):
        estimator("logistic", epsilon=1.0, accountant="budget").fit(x, y)


def test_the_non_private_naive_bayes_cannot_be_charged_to_an_accountant() -> None:
    x, y = data("naive-bayes")
    acc = Accountant(1.0)
    with pytest.raises(ValueError, match="cannot be charged to an accountant"):
        estimator("naive-bayes", mechanism="none", accountant=acc).fit(x, y)
    assert acc.spent[0] == 0.0


@pytest.mark.parametrize("kind", ["naive-bayes", "logistic"])
def test_labels_read_from_the_data_are_refused_under_an_accountant(kind: str) -> None:
    """They would be published in classes_ outside the guarantee that was charged."""
    x, y = data(kind)
    acc = Accountant(5.0)
    est = estimator(kind, epsilon=1.0, accountant=acc).set_params(classes=None)
    with pytest.raises(ValueError, match="pass the public classes"):
        est.fit(x, y)
    assert acc.spent[0] == 0.0 and not hasattr(est, "classes_")


def test_a_fit_at_an_eps_whose_noise_squares_overflow_completes_after_its_charge() -> None:
    """A review: at eps = 1e-80 with a fixed prior precision the noise sd (~1e81) was
    accepted by the release, which charged, and then the noise-aware posterior's
    variances overflowed and the fit raised LinAlgError: spent, nothing returned. The
    posterior at a noise beyond the doubles is its limit, the prior. (Laplace: the
    Gaussian's sd at delta > 0 stays finite, about 1.6e5 here, as eps -> 0.)"""
    x, y = data("logistic")
    acc = Accountant(epsilon=1.0, delta=1e-3)
    est = PrivateBayesianLogisticRegression(
        epsilon=1e-80, delta=0.0, prior_precision=2.0, feature_bounds=(-1, 1),
        classes=[0, 1], accountant=acc, predictive="noise-aware",
    )  # fmt: skip
    est.fit(x, y)
    assert acc.spent[0] == pytest.approx(1e-80)
    np.testing.assert_array_equal(est.noise_aware_posterior_.mean(), np.zeros(4))
    np.testing.assert_allclose(est.noise_aware_posterior_.cov, np.eye(4) / 2.0)
    assert est.predict_proba(x).shape == (300, 2)


@pytest.mark.parametrize("kind", ["naive-bayes", "logistic", "linear-ssp"])
def test_a_failed_refit_leaves_the_earlier_fit_as_it_was(kind: str) -> None:
    """A review: a refit refused for a label not in the new classes had already set the
    new classes_ (and n_features_in_, model_): predict then named the old posterior's
    predictions with the new labels."""
    x, y = data(kind)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = estimator(kind, epsilon=5.0, random_state=1).fit(x, y)
        before = est.predict(x[:20])
        fitted = {k: v for k, v in vars(est).items() if k.endswith("_")}
        bad = {"naive-bayes": {"classes": ["a", "b", "c"]}, "logistic": {"classes": ["a", "b"]}}
        if kind in bad:
            est.set_params(**bad[kind])
            with pytest.raises(ValueError, match="not in classes"):
                est.fit(x, y)
        else:
            with pytest.raises(ValueError, match="y"):
                est.fit(x, ["text"] * len(y))
    assert {k: v for k, v in vars(est).items() if k.endswith("_")}.keys() == fitted.keys()
    assert all(getattr(est, k) is v for k, v in fitted.items())
    np.testing.assert_array_equal(est.predict(x[:20]), before)
