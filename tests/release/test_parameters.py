"""Laplace / geometric / Gaussian noise on posterior parameters (paper 002 §6.2, 004 Alg. 1)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import dpbayes as dpb
from dpbayes.privacy import Accountant, BudgetExceeded, analytic_gaussian_sigma

Z = 4.0  # two-sided z bound, P(|Z| > 4) ~ 6e-5 per check


def _mean_var_ok(x: np.ndarray, mean: float, var: float, kurtosis_excess: float) -> None:
    """Sample mean and variance within z-bounds derived from the sample size."""
    n = x.size
    assert abs(x.mean() - mean) < Z * math.sqrt(var / n), (x.mean(), mean)
    var_of_var = var**2 * (kurtosis_excess + 2) / n  # Var(s^2) ~ sigma^4 (kappa - 1) / n
    assert abs(x.var(ddof=1) - var) < Z * math.sqrt(var_of_var), (x.var(), var)


def coin(n: int, k: int) -> np.ndarray:
    return np.r_[np.ones(k, int), np.zeros(n - k, int)]


def test_beta_bernoulli_laplace_noise_scale_is_one_over_eps() -> None:
    model = dpb.models.BetaBernoulli(alpha=2, beta=3)
    data = coin(1000, 400)
    eps = 0.8
    rng = np.random.default_rng(1)
    released = np.array(
        [
            dpb.release(model, data, mechanism="laplace", epsilon=eps, rng=rng).released["counts"]
            for _ in range(4000)
        ]
    )
    # far from the truncation bounds: the success count is 400 + Lap(1/eps)
    _mean_var_ok(released[:, 0], 400.0, 2 / eps**2, kurtosis_excess=3.0)
    np.testing.assert_allclose(released.sum(axis=1), 1000.0)
    # the whole distribution, not just two moments
    ks = stats.kstest(released[:, 0] - 400, stats.laplace(scale=1 / eps).cdf)
    assert ks.pvalue > 1e-4


def test_beta_bernoulli_posterior_and_guarantee() -> None:
    model = dpb.models.BetaBernoulli(alpha=2, beta=3)
    rel = dpb.release(model, coin(50, 20), mechanism="laplace", epsilon=1.0, rng=3)
    s, f = rel.released["counts"]
    assert rel.posterior.a == pytest.approx(2 + s) and rel.posterior.b == pytest.approx(3 + f)
    g = rel.guarantee
    assert (g.epsilon, g.delta, g.sensitivity, g.neighbours.value) == (1.0, 0.0, 1.0, "substitute")
    assert g.simulation and rel.simulation and rel.private
    assert rel.public["n"] == 50


def test_truncation_to_zero_n() -> None:
    model = dpb.models.BetaBernoulli(alpha=1, beta=1)
    rng = np.random.default_rng(2)
    for k in (0, 1, 4, 5):
        for _ in range(200):
            rel = dpb.release(model, coin(5, k), mechanism="laplace", epsilon=0.05, rng=rng)
            s, f = rel.released["counts"]
            assert 0 <= s <= 5 and 0 <= f <= 5 and s + f == pytest.approx(5)
            assert rel.posterior.a > 0 and rel.posterior.b > 0


def test_dirichlet_substitute_noise_on_every_count_with_l1_sensitivity_two() -> None:
    model = dpb.models.DirichletCategorical(alpha=[1, 1, 1], categories=["a", "b", "c"])
    data = ["a"] * 300 + ["b"] * 300 + ["c"] * 400
    eps = 1.0
    rng = np.random.default_rng(3)
    rels = [
        dpb.release(model, data, mechanism="laplace", epsilon=eps, rng=rng) for _ in range(3000)
    ]
    counts = np.array([r.released["counts"] for r in rels])
    assert rels[0].guarantee.sensitivity == 2.0
    for j, true in enumerate([300, 300, 400]):
        _mean_var_ok(counts[:, j], true, 2 * (2 / eps) ** 2, kurtosis_excess=3.0)
    # coordinates are independent
    assert abs(np.corrcoef(counts[:, 0], counts[:, 1])[0, 1]) < Z / math.sqrt(len(counts))


def test_add_remove_noise_scale_one_over_eps_and_n_not_public() -> None:
    model = dpb.models.DirichletCategorical(alpha=[1, 1, 1])
    data = [0] * 200 + [1] * 300 + [2] * 500
    rng = np.random.default_rng(4)
    rels = [
        dpb.release(model, data, mechanism="laplace", epsilon=0.5, neighbours="add-remove", rng=rng)
        for _ in range(3000)
    ]
    counts = np.array([r.released["counts"] for r in rels])
    _mean_var_ok(counts[:, 2], 500, 2 * (1 / 0.5) ** 2, kurtosis_excess=3.0)
    assert rels[0].public["n"] is None and rels[0].guarantee.neighbours.value == "add-remove"


def test_geometric_counts_are_integers_with_discrete_laplace_law() -> None:
    model = dpb.models.BetaBernoulli(alpha=1, beta=1)
    rng = np.random.default_rng(5)
    eps = 0.5
    s = np.array(
        [
            dpb.release(
                model, coin(500, 250), mechanism="geometric", epsilon=eps, rng=rng
            ).released["counts"][0]
            for _ in range(4000)
        ]
    )
    assert np.all(s == np.round(s))
    law = stats.dlaplace(a=eps)
    _mean_var_ok(s, 250.0, law.var(), kurtosis_excess=law.stats(moments="k"))


def test_gaussian_counts_use_analytic_sigma() -> None:
    model = dpb.models.DirichletCategorical(alpha=[1, 1, 1])
    data = [0] * 300 + [1] * 300 + [2] * 400
    rel = dpb.release(model, data, mechanism="gaussian", epsilon=1.0, delta=1e-6, rng=0)
    sigma = analytic_gaussian_sigma(1.0, 1e-6, math.sqrt(2))
    assert rel.guarantee.details["sigma"] == pytest.approx(sigma)
    assert rel.guarantee.delta == 1e-6 and rel.guarantee.sensitivity_norm == "L2"


def test_normal_mean_sensitivity_by_brute_force_and_noise() -> None:
    model = dpb.models.NormalMean(prior_mean=1.0, prior_sd=2.0, noise_sd=3.0, lower=-1, upper=4)
    x = np.linspace(-1, 4, 41)
    worst = 0.0
    for i in range(x.size):
        for v in (-1.0, 4.0):
            y = x.copy()
            y[i] = v
            worst = max(worst, abs(model.posterior(x).mean() - model.posterior(y).mean()))
    sens = model.posterior_mean_sensitivity(x.size)
    assert worst == pytest.approx(sens, rel=1e-9)
    rng = np.random.default_rng(6)
    means = np.array(
        [
            dpb.release(model, x, mechanism="laplace", epsilon=2.0, rng=rng).released[
                "posterior_mean"
            ]
            for _ in range(4000)
        ]
    )
    _mean_var_ok(means, model.posterior(x).mean(), 2 * (sens / 2.0) ** 2, kurtosis_excess=3.0)


def test_normal_mean_clamps_data_to_bounds() -> None:
    model = dpb.models.NormalMean(prior_mean=0.0, prior_sd=1.0, noise_sd=1.0, lower=0, upper=1)
    assert model.posterior([5.0, 5.0]).mean() == pytest.approx(model.posterior([1.0, 1.0]).mean())


def test_secure_path_says_not_simulation() -> None:
    model = dpb.models.BetaBernoulli(alpha=1, beta=1)
    rel = dpb.release(model, coin(100, 30), mechanism="laplace", epsilon=1.0)
    assert rel.guarantee.simulation is False
    s, f = rel.released["counts"]
    assert 0 <= s <= 100 and s + f == pytest.approx(100)


def test_secure_path_noise_statistics() -> None:
    model = dpb.models.BetaBernoulli(alpha=1, beta=1)
    s = np.array(
        [
            dpb.release(model, coin(100, 50), mechanism="geometric", epsilon=1.0).released[
                "counts"
            ][0]
            for _ in range(400)
        ]
    )
    law = stats.dlaplace(a=1.0)
    _mean_var_ok(s, 50.0, law.var(), kurtosis_excess=law.stats(moments="k"))


def test_accountant_spends_and_refuses_without_spending() -> None:
    # a real budget takes secure-noise releases only (rng=None)
    model = dpb.models.BetaBernoulli(alpha=1, beta=1)
    acc = Accountant(1.5)
    dpb.release(model, coin(10, 3), mechanism="laplace", epsilon=1.0, accountant=acc)
    assert acc.spent == (1.0, 0.0)
    with pytest.raises(BudgetExceeded, match="remains"):
        dpb.release(model, coin(10, 3), mechanism="laplace", epsilon=1.0, accountant=acc)
    assert acc.spent == (1.0, 0.0) and len(acc.spends) == 1


def test_ledger_file_survives_restart(tmp_path) -> None:
    path = tmp_path / "ledger.json"
    model = dpb.models.BetaBernoulli(alpha=1, beta=1)
    acc = Accountant(2.0, path=path)
    dpb.release(model, coin(10, 3), mechanism="laplace", epsilon=1.5, accountant=acc)
    again = Accountant.open(path)
    assert again.spent[0] == pytest.approx(1.5)
    with pytest.raises(BudgetExceeded):
        dpb.release(model, coin(10, 3), mechanism="laplace", epsilon=1.0, accountant=again)


def test_real_accountant_refuses_a_seeded_release_and_spends_nothing(tmp_path) -> None:
    """Issue 14, defect 5: seeded noise is reproducible, so a real budget must refuse it."""
    model = dpb.models.BetaBernoulli(alpha=1, beta=1)
    path = tmp_path / "ledger.json"
    for acc in (Accountant(5.0), Accountant(5.0, path=path)):
        with pytest.raises(ValueError, match="simulation release") as info:
            dpb.release(model, coin(10, 3), mechanism="laplace", epsilon=1.0, accountant=acc, rng=0)
        assert "\n" not in str(info.value)
        assert acc.spent == (0.0, 0.0) and not acc.spends
    assert Accountant.open(path).spends == ()


def test_simulation_accountant_takes_only_simulation_releases() -> None:
    model = dpb.models.BetaBernoulli(alpha=1, beta=1)
    sim = Accountant(1.5, simulation=True)
    rel = dpb.release(model, coin(10, 3), mechanism="laplace", epsilon=1.0, accountant=sim, rng=0)
    assert rel.simulation and sim.spent == (1.0, 0.0) and sim.summary()["simulation"]
    with pytest.raises(BudgetExceeded):
        dpb.release(model, coin(10, 3), mechanism="laplace", epsilon=1.0, accountant=sim, rng=1)
    with pytest.raises(ValueError, match="simulation accountant"):
        dpb.release(model, coin(10, 3), mechanism="laplace", epsilon=0.1, accountant=sim)
    assert sim.spent == (1.0, 0.0)
    with pytest.raises(ValueError, match="path must be None"):
        Accountant(1.0, simulation=True, path="ledger.json")
    with pytest.raises(TypeError, match="simulation"):
        Accountant(1.0, simulation=1)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"epsilon": 0}, ValueError, "epsilon"),
        ({"epsilon": -1}, ValueError, "epsilon"),
        ({"epsilon": float("nan")}, ValueError, "epsilon"),
        ({"epsilon": float("inf")}, ValueError, "epsilon"),
        ({"epsilon": "1"}, TypeError, "epsilon"),
        ({"epsilon": 1, "delta": 1.0}, ValueError, "delta"),
        ({"epsilon": 1, "delta": 1e-5}, ValueError, "delta"),
        ({"epsilon": 1, "mechanism": "nope"}, ValueError, "mechanism"),
        ({"epsilon": 1, "bogus": 3}, ValueError, "bogus"),
        ({"epsilon": 1, "neighbours": "cousins"}, ValueError, "neighbours"),
        ({"epsilon": 1, "rng": "seed"}, TypeError, "rng"),
    ],
)
def test_bad_arguments_spend_nothing(kwargs, exc, match) -> None:
    model = dpb.models.BetaBernoulli(alpha=1, beta=1)
    acc = Accountant(10.0)
    args = {"mechanism": "laplace", **kwargs}
    with pytest.raises(exc, match=match):
        dpb.release(model, coin(10, 3), accountant=acc, **args)
    assert acc.spent == (0.0, 0.0)


@pytest.mark.parametrize(
    ("data", "column", "match"),
    [
        ([0, 1, float("nan")], None, "missing|NaN|NULL"),
        ([0, 1, 2], None, "0/1 or boolean"),
        (pd.DataFrame({"x": [0, 1]}), "y", "y"),
        ("/no/such/file.csv", "x", "file.csv"),
    ],
)
def test_bad_data_spends_nothing(data, column, match) -> None:
    model = dpb.models.BetaBernoulli(alpha=1, beta=1)
    acc = Accountant(10.0)
    with pytest.raises((ValueError, TypeError), match=match):
        dpb.release(model, data, column=column, mechanism="laplace", epsilon=1, accountant=acc)
    assert acc.spent == (0.0, 0.0)


def test_non_private_cannot_be_charged() -> None:
    model = dpb.models.BetaBernoulli(alpha=1, beta=1)
    with pytest.raises(ValueError, match="accountant"):
        dpb.release(
            model,
            coin(10, 3),
            mechanism="laplace",
            epsilon=1,
            accountant=Accountant(1),
            allow_non_private=True,
        )


@pytest.mark.parametrize("value", ["False", "no", "", 0, 1, None, 1.0])
def test_only_true_itself_unlocks_a_non_private_path(value) -> None:
    """``bool("False")`` is True: a flag read from a form or a config file as text once ran
    the local-sensitivity exponential mechanism (not DP) without a word. Only True or
    False (Python or numpy) is taken, at every entry point, before anything is drawn."""
    from dpbayes.audit.targets import release_mechanism
    from dpbayes.release.base import plan

    model = dpb.models.BetaBernoulli(alpha=1, beta=1)
    opts = {"mechanism": "expmech", "epsilon": 1.0, "sensitivity": "local"}
    with pytest.raises(TypeError, match="allow_non_private must be True or False"):
        dpb.release(model, coin(10, 3), rng=0, allow_non_private=value, **opts)
    with pytest.raises(TypeError, match="allow_non_private must be True or False"):
        plan(model, coin(10, 3), allow_non_private=value, **opts)
    with pytest.raises(TypeError, match="allow_non_private must be True or False"):
        release_mechanism(model, allow_non_private=value, **opts)
    rel = dpb.release(model, coin(10, 3), rng=0, allow_non_private=np.bool_(True), **opts)
    assert rel.guarantee.private is False
    with pytest.raises(ValueError, match="not differentially private"):
        dpb.release(model, coin(10, 3), rng=0, allow_non_private=np.bool_(False), **opts)


def test_release_json_round_trip() -> None:
    import json

    model = dpb.models.DirichletCategorical(alpha=[1, 2, 3], categories=["x", "y", "z"])
    rel = dpb.release(model, ["x", "y", "z", "z"], mechanism="laplace", epsilon=1, rng=0)
    doc = json.loads(rel.to_json())
    assert doc["guarantee"]["epsilon"] == 1.0 and doc["guarantee"]["simulation"] is True
    assert dpb.models.model_from_dict(doc["model"]).to_dict() == model.to_dict()
    assert len(doc["released"]["counts"]) == 3
