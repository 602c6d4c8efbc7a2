"""Algorithm 2 of paper 004 (Laplace noise in the Fourier domain, Barak et al. 2007)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from dpbayes.models.bayes_net import BayesNet, NaiveBayes
from dpbayes.release import release
from dpbayes.release.bayes_net.fourier import (
    downward_closure,
    fourier_coefficients,
    fourier_sensitivity,
    marginal_tables,
    stealth_raise,
)

Z = float(stats.norm.isf(1e-4 / 2))


def net() -> BayesNet:
    """A non-naive network: a -> b -> c, a -> c, c -> d."""
    v = {k: [0, 1] for k in "abcd"}
    return BayesNet(v, [("a", "b"), ("b", "c"), ("a", "c"), ("c", "d")])


def data(n: int = 2000, seed: int = 0) -> pd.DataFrame:
    g = np.random.default_rng(seed)
    a = g.integers(0, 2, n)
    b = (g.random(n) < np.where(a == 1, 0.8, 0.3)).astype(int)
    c = (g.random(n) < 0.2 + 0.3 * a + 0.4 * b).astype(int)
    d = (g.random(n) < np.where(c == 1, 0.6, 0.1)).astype(int)
    return pd.DataFrame({"a": a, "b": b, "c": c, "d": d})


def test_closure_and_sensitivity() -> None:
    nb = NaiveBayes("y", [0, 1], {f"x{j}": [0, 1] for j in range(5)})
    # subsets of {y}, {y, x_j}: {}, {y}, {x_j}, {y, x_j}
    assert len(downward_closure(nb)) == 2 + 2 * 5
    assert fourier_sensitivity(nb, "substitute") == (11, 22.0)
    assert fourier_sensitivity(nb, "add-remove") == (12, 12.0)


def test_exact_roundtrip() -> None:
    """Without noise the tables rebuilt from the coefficients are the true counts."""
    bn, df = net(), data()
    s = bn.statistics(df)
    coeffs = fourier_coefficients(bn, s)
    assert coeffs[0] == len(df)
    tables = marginal_tables(bn, coeffs)
    for v in bn.nodes:
        np.testing.assert_allclose(tables[v], s.counts[v], atol=1e-9)


def _marginal(table: np.ndarray, fam: tuple[str, ...], keep: tuple[str, ...]) -> np.ndarray:
    axes = tuple(i for i, v in enumerate(fam) if v not in keep)
    kept = [v for v in fam if v in keep]
    m = table.sum(axis=axes)
    return np.transpose(m, [kept.index(v) for v in keep])


def test_released_tables_are_consistent() -> None:
    """Any two released family tables agree on the marginal of their shared variables."""
    bn, df = net(), data()
    r = release(bn, df, mechanism="fourier", epsilon=0.5, rng=3, stealth=0.0)
    tables = {v: np.asarray(t) for v, t in r.released["counts"].items()}
    checked = 0
    for v in bn.nodes:
        for u in bn.nodes:
            shared = tuple(x for x in bn.nodes if x in bn.family(v) and x in bn.family(u))
            if u == v or not shared:
                continue
            np.testing.assert_allclose(
                _marginal(tables[v], bn.family(v), shared),
                _marginal(tables[u], bn.family(u), shared),
                atol=1e-8,
            )
            checked += 1
    assert checked >= 8
    # every table sums to n (substitute: the empty-set coefficient is the public n)
    for t in tables.values():
        assert t.sum() == pytest.approx(len(df))
    # Algorithm 1's independent noise is not consistent
    r1 = release(bn, df, mechanism="laplace", epsilon=0.5, rng=3)
    t1 = {v: np.asarray(t) for v, t in r1.released["counts"].items()}
    assert not np.allclose(_marginal(t1["b"], ("a", "b"), ("a",)), t1["a"])


def test_noise_scale_statistically() -> None:
    bn, df = net(), data()
    eps = 1.0
    exact = fourier_coefficients(bn, bn.statistics(df))
    k, sens = fourier_sensitivity(bn, "substitute")
    b = sens / eps
    labels = None
    noise = []
    g = np.random.default_rng(5)
    for _ in range(200):
        r = release(bn, df, mechanism="fourier", epsilon=eps, rng=g, stealth=0.0)
        co = r.released["coefficients"]
        if labels is None:
            names = bn.nodes
            labels = {
                a: ",".join(names[i] for i in range(len(names)) if a >> i & 1) or "{}"
                for a in exact
            }
        assert co["{}"] == len(df)  # not noised under substitute
        noise.extend(co[labels[a]] - exact[a] for a in exact if a != 0)
    z = np.asarray(noise)
    assert z.size == 200 * k
    assert abs(np.abs(z).mean() - b) <= Z * b / np.sqrt(z.size)
    assert abs(z.mean()) <= Z * np.sqrt(2) * b / np.sqrt(z.size)


def test_stealth_probability_and_reporting() -> None:
    """All records identical: most cells are 0, so negativity depends on the raise."""
    bn = net()
    df = pd.DataFrame({k: [1] * 30 for k in "abcd"})
    reps = 150
    fails = 0
    for seed in range(reps):
        r = release(bn, df, mechanism="fourier", epsilon=1.0, rng=seed, stealth=0.9)
        neg = sum(int((np.asarray(t) < 0).sum()) for t in r.released["counts"].values())
        assert r.released["negative_cells"] == neg
        assert r.released["stealth"] == (neg == 0)
        fails += neg > 0
    # P(negative) <= 0.1 by construction: one-sided 1e-4 binomial bound
    assert fails / reps <= 0.1 + 3.72 * np.sqrt(0.09 / reps)
    no_raise = sum(
        not release(bn, df, mechanism="fourier", epsilon=1.0, rng=s, stealth=0.0).released[
            "stealth"
        ]
        for s in range(30)
    )
    assert no_raise > 24  # without the raise almost every release is negative somewhere


def test_stealth_raise_meets_the_probability() -> None:
    """Monte Carlo of the union bound's event: sum of |Lap| over each family <= D."""
    bn = net()
    scale = 3.0
    d = stealth_raise(bn, scale, 0.9, noise_empty=True)
    g = np.random.default_rng(0)
    sizes = [2 ** len(bn.family(v)) for v in bn.nodes]
    reps = 4000
    fail = np.zeros(reps, dtype=bool)
    for m in sizes:
        fail |= np.abs(g.laplace(0, scale, (reps, m))).sum(axis=1) > d
    assert fail.mean() <= 0.1 + 3.72 * np.sqrt(0.09 / reps)
    assert stealth_raise(bn, scale, 0.0, noise_empty=True) == 0.0


def test_errors() -> None:
    bn = BayesNet({"a": [0, 1, 2], "b": [0, 1]}, [("a", "b")])
    df = pd.DataFrame({"a": [0, 1, 2], "b": [0, 1, 1]})
    with pytest.raises(ValueError, match="binary variables; 'a' has 3 categories"):
        release(bn, df, mechanism="fourier", epsilon=1.0, rng=0)
    bn2, df2 = net(), data(50)
    with pytest.raises(ValueError, match="stealth"):
        release(bn2, df2, mechanism="fourier", epsilon=1.0, rng=0, stealth=1.0)
    with pytest.raises(ValueError, match="epsilon"):
        release(bn2, df2, mechanism="fourier", epsilon=0.0, rng=0)


def test_coefficients_by_the_fast_transform_are_the_definition() -> None:
    """c_a = sum over records of (-1)^{<a, record>} for every a in the closure, now by a
    Walsh-Hadamard transform of each family table; the tables rebuild exactly."""
    names = [f"p{i}" for i in range(9)] + ["c", "d"]
    bn = BayesNet(
        {v: [0, 1] for v in names},
        [(f"p{i}", "c") for i in range(9)] + [("p0", "d"), ("c", "d")],
    )
    g = np.random.default_rng(3)
    rows = g.integers(0, 2, (300, len(names)))
    stats_ = bn.statistics(pd.DataFrame(rows, columns=names))
    coeffs = fourier_coefficients(bn, stats_)
    assert sorted(coeffs) == downward_closure(bn)
    for a in downward_closure(bn)[::7]:
        bits = np.array([a >> i & 1 for i in range(len(names))])
        assert coeffs[a] == float(np.sum((-1.0) ** (rows @ bits)))
    tables = marginal_tables(bn, coeffs)
    for v in bn.nodes:
        np.testing.assert_allclose(tables[v], stats_.counts[v], atol=1e-9)


def test_a_node_with_too_many_parents_is_refused_in_the_plan_naming_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Over 16 parents (the family's 2^(m+1) coefficients: 14 parents took 32 s by the old
    sum over subsets) the plan refuses in one line naming the node, before it computes a
    coefficient or draws any noise; 16 parents run."""
    from dpbayes.privacy import Accountant
    from dpbayes.release.bayes_net import fourier

    def model(parents: int) -> BayesNet:
        variables = {f"p{i}": [0, 1] for i in range(parents)} | {"c": [0, 1]}
        return BayesNet(variables, [(f"p{i}", "c") for i in range(parents)])

    def no_coefficients(*args: object) -> None:
        raise AssertionError("the coefficients were computed before the refusal")

    bn = model(17)
    acc = Accountant(epsilon=1.0)
    with monkeypatch.context() as patch:
        patch.setattr(fourier, "fourier_coefficients", no_coefficients)
        for value in (0, 1):
            df = pd.DataFrame({k: [value, 1] for k in bn.nodes})
            with pytest.raises(ValueError, match="node 'c' has 17") as info:
                release(bn, df, mechanism="fourier", epsilon=1.0, rng=0, accountant=acc)
            assert "\n" not in str(info.value)
    assert acc.spent == (0.0, 0.0)
    small = model(16)
    r = release(
        small,
        pd.DataFrame({k: [0, 1] for k in small.nodes}),
        mechanism="fourier",
        epsilon=1.0,
        rng=0,
    )
    assert len(r.released["coefficients"]) == 2**17 and r.guarantee.epsilon == 1.0


def test_a_model_fourier_cannot_take_is_refused_before_the_data_are_read():
    """The public refusal (non-binary variables) comes first, also for data whose own
    check would refuse (a missing value): a refusal bound to come does not wait for it."""
    import dpbayes as dpb
    from dpbayes.models import BayesNet

    m3 = BayesNet({"a": [0, 1, 2], "b": [0, 1]}, [("a", "b")])
    for data in ({"a": [0, 1], "b": [0, 1]}, {"a": [0, None], "b": [0, 1]}):
        with pytest.raises(ValueError, match="needs binary variables"):
            dpb.release(m3, data, mechanism="fourier", epsilon=1.0)
