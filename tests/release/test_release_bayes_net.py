"""Algorithm 1 of paper 004 (Laplace on Bayesian-network posterior updates)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from dpbayes.models.bayes_net import BayesNet, NaiveBayes
from dpbayes.privacy import Accountant, Neighbours
from dpbayes.release import mechanisms_for, release
from dpbayes.release.bayes_net import fourier, sampling  # noqa: F401  (register their mechanisms)
from dpbayes.release.bayes_net.laplace import laplace_sensitivity

Z = float(stats.norm.isf(1e-4 / 2))  # two-sided 1e-4


def nb_and_data(n: int = 3000, seed: int = 0) -> tuple[NaiveBayes, pd.DataFrame]:
    g = np.random.default_rng(seed)
    y = g.integers(0, 2, n)
    df = pd.DataFrame({"y": y})
    feats = {}
    for j in range(3):
        df[f"x{j}"] = (g.random(n) < np.where(y == 1, 0.7, 0.4)).astype(int)
        feats[f"x{j}"] = [0, 1]
    return NaiveBayes("y", [0, 1], feats), df


def test_registered_mechanisms() -> None:
    nb, _ = nb_and_data(10)
    assert {"laplace", "fourier", "sampling", "map"} <= set(mechanisms_for(nb))


def test_sensitivity_lemma1_and_add_remove() -> None:
    nb, _ = nb_and_data(10)
    assert laplace_sensitivity(nb, "substitute") == 2 * 4
    assert laplace_sensitivity(nb, "add-remove") == 4


def test_sensitivity_is_attained_by_a_substitution() -> None:
    """Changing one record moves every family table by exactly 2 in L1 when all values change."""
    nb, df = nb_and_data(50)
    other = df.copy()
    other.iloc[0] = 1 - other.iloc[0]
    a, b = nb.statistics(df).vector(nb), nb.statistics(other).vector(nb)
    assert np.abs(a - b).sum() == laplace_sensitivity(nb, "substitute")
    added = pd.concat([df, df.iloc[:1]], ignore_index=True)
    c = nb.statistics(added).vector(nb)
    assert np.abs(c - a).sum() == laplace_sensitivity(nb, "add-remove")


@pytest.mark.parametrize("neighbours", ["substitute", "add-remove"])
def test_noise_scale_statistically(neighbours: str) -> None:
    """|noise| on each count is Exp(b) with b = S / eps: mean-abs within a 1e-4 z-bound."""
    nb, df = nb_and_data()
    eps = 2.0
    exact = nb.statistics(df).vector(nb)
    noise = []
    g = np.random.default_rng(42)
    for _ in range(150):
        r = release(nb, df, mechanism="laplace", epsilon=eps, rng=g, neighbours=neighbours)
        got = np.concatenate([np.asarray(c).ravel() for c in r.released["counts"].values()])
        noise.append(got - exact)
    z = np.concatenate(noise)
    b = laplace_sensitivity(nb, neighbours) / eps
    assert r.guarantee.details["scale"] == pytest.approx(b)
    # counts are far from 0 and n, so truncation never bites here
    assert abs(np.abs(z).mean() - b) <= Z * b / np.sqrt(z.size)
    assert abs(z.mean()) <= Z * np.sqrt(2) * b / np.sqrt(z.size)
    assert r.guarantee.neighbours is Neighbours.parse(neighbours)
    assert r.simulation


def test_truncation_to_zero_and_n() -> None:
    bn = BayesNet({"a": [0, 1], "b": [0, 1, 2]}, [("a", "b")])
    df = pd.DataFrame({"a": [0] * 5, "b": [1] * 5})
    for seed in range(20):
        r = release(bn, df, mechanism="laplace", epsilon=0.1, rng=seed)
        for table in r.released["counts"].values():
            arr = np.asarray(table)
            assert arr.min() >= 0 and arr.max() <= 5


def test_secure_path_and_accountant() -> None:
    nb, df = nb_and_data(200)
    acc = Accountant(epsilon=1.5)
    r = release(nb, df, mechanism="laplace", epsilon=1.0, accountant=acc)
    assert not r.simulation and r.private
    assert r.guarantee.epsilon == 1.0
    proba = r.posterior.predict_proba(df.head(3))
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    assert r.to_dict()["guarantee"]["sensitivity"] == 8.0


@pytest.mark.parametrize("eps", [0, -1, float("nan"), float("inf")])
def test_bad_epsilon(eps: float) -> None:
    nb, df = nb_and_data(20)
    with pytest.raises(ValueError, match="epsilon"):
        release(nb, df, mechanism="laplace", epsilon=eps, rng=0)


def test_bad_options() -> None:
    nb, df = nb_and_data(20)
    with pytest.raises(ValueError, match="unknown option"):
        release(nb, df, mechanism="laplace", epsilon=1, rng=0, stealth=0.5)
    with pytest.raises(ValueError, match="delta"):
        release(nb, df, mechanism="laplace", epsilon=1, delta=1e-6, rng=0)
    with pytest.raises(ValueError, match="mechanism must be one of"):
        release(nb, df, mechanism="gaussian-magic", epsilon=1, rng=0)


def test_an_oversized_family_table_is_refused_before_any_noise() -> None:
    """40 binary parents asked numpy for 16 TiB, 70 exceeded its 64 dimensions: a one-line
    error naming the node, from the model alone, nothing spent."""
    for parents in (40, 70):
        variables = {f"p{i}": [0, 1] for i in range(parents)} | {"c": [0, 1]}
        bn = BayesNet(variables, [(f"p{i}", "c") for i in range(parents)])
        acc = Accountant(epsilon=1.0)
        for mechanism in ("laplace", "fourier", "sampling", "map"):
            # fourier's own public limit (16 parents) refuses first, naming the node too
            named = "count table of node 'c'|at most 16 parents per node; node 'c'"
            with pytest.raises(ValueError, match=named) as info:
                release(
                    bn,
                    pd.DataFrame({k: [0, 1] for k in variables}),
                    mechanism=mechanism,
                    epsilon=1.0,
                    rng=0,
                    accountant=acc,
                )
            assert "\n" not in str(info.value)
        assert acc.spent == (0.0, 0.0)


@pytest.mark.parametrize(
    ("mechanism", "kwargs", "message"),
    [
        ("fourier", {"epsilon": 1.0, "delta": 1e-6}, "delta must be 0"),
        ("fourier", {"epsilon": 1.0, "stealth": 1.0}, "stealth must be in"),
        ("fourier", {"epsilon": 1e-300}, "too small for this sensitivity"),
        ("laplace", {"epsilon": 1.0, "delta": 1e-6}, "delta must be 0"),
        ("sampling", {"epsilon": 1.0, "delta": 1e-6}, "delta must be 0"),
        ("sampling", {"epsilon": 1e6}, "too large for posterior sampling"),
        ("sampling", {"epsilon": 1e-9}, "too small for posterior sampling"),
        ("sampling", {"epsilon": 0.1, "trim": 0.01}, "more than epsilon"),
        ("sampling", {"epsilon": 1.0, "draws": 0}, "draws"),
        ("map", {"epsilon": 1.0, "delta": 1e-6}, "delta must be 0"),
        ("map", {"epsilon": 1.0, "trim": 0.7}, "trim for 'a' must be in"),
        ("map", {"epsilon": 1.0, "grid": 0}, "grid"),
        ("map", {"epsilon": 1e-12}, "too small for the MAP mechanism"),
    ],
)
def test_public_refusals_come_before_the_data_checks(mechanism, kwargs, message):
    import dpbayes as dpb
    from dpbayes.models import BayesNet

    m = BayesNet({"a": [0, 1], "b": [0, 1]}, [("a", "b")])
    for data in ({"a": [0, 1], "b": [0, 1]}, {"a": [0, None], "b": [0, 1]}):
        with pytest.raises(ValueError, match=message):
            dpb.release(m, data, mechanism=mechanism, **kwargs)
