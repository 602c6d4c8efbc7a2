"""Discrete Bayesian networks: structure, counts, exact posterior, predictive."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from dpbayes.models.bayes_net import (
    BayesNet,
    BayesNetParameters,
    BayesNetStatistics,
    NaiveBayes,
)
from dpbayes.models.distributions import Dirichlet


def chain() -> BayesNet:
    return BayesNet(
        {"a": [0, 1], "b": ["lo", "mid", "hi"], "c": [0, 1]},
        [("a", "b"), ("b", "c"), ("a", "c")],
        alpha=0.5,
    )


def chain_data(n: int = 300, seed: int = 0) -> pd.DataFrame:
    g = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "a": g.integers(0, 2, n),
            "b": g.choice(["lo", "mid", "hi"], n),
            "c": g.integers(0, 2, n),
        }
    )


def test_structure_and_order() -> None:
    bn = BayesNet({"c": [0, 1], "b": [0, 1], "a": [0, 1]}, [("a", "b"), ("b", "c")])
    assert bn.order == ("a", "b", "c")
    assert bn.parents == {"c": ("b",), "b": ("a",), "a": ()}
    assert bn.family("c") == ("b", "c")
    assert bn.n_cells == 2 + 4 + 4
    assert bn.is_binary


@pytest.mark.parametrize(
    ("variables", "edges", "message"),
    [
        ({"a": [0, 1], "b": [0, 1]}, [("a", "b"), ("b", "a")], "cycle"),
        ({"a": [0, 1]}, [("a", "a")], "self-loop"),
        ({"a": [0, 1]}, [("a", "z")], "unknown variable 'z'"),
        ({"a": [0]}, [], "at least 2 categories"),
        ({"a": [0, 0]}, [], "repeated categories"),
    ],
)
def test_bad_structures(variables: dict, edges: list, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        BayesNet(variables, edges)


def test_cycle_message_names_the_cycle() -> None:
    with pytest.raises(
        ValueError, match=r"cycle (a -> b -> c -> a|b -> c -> a -> b|c -> a -> b -> c)"
    ):
        BayesNet({"a": [0, 1], "b": [0, 1], "c": [0, 1]}, [("a", "b"), ("b", "c"), ("c", "a")])


def test_bad_types() -> None:
    with pytest.raises(TypeError):
        BayesNet({})
    with pytest.raises(TypeError):
        BayesNet({"a": "01"})
    with pytest.raises(ValueError, match="alpha"):
        BayesNet({"a": [0, 1]}, alpha=0)


def test_counts_match_crosstab() -> None:
    bn, df = chain(), chain_data()
    s = bn.statistics(df)
    assert s.n == len(df)
    ct = df.groupby(["a", "b", "c"]).size()
    # the (a, b, c) family table of c is the full joint here
    joint = np.zeros((2, 3, 2), dtype=int)
    for (a, b, c), cnt in ct.items():
        joint[a, ["lo", "mid", "hi"].index(b), c] = cnt
    np.testing.assert_array_equal(s.counts["c"], joint)
    np.testing.assert_array_equal(s.counts["b"], joint.sum(axis=2))
    np.testing.assert_array_equal(s.counts["a"], joint.sum(axis=(1, 2)))
    vec = s.vector(bn)
    assert vec.size == bn.n_cells
    back = BayesNetStatistics.from_vector(bn, vec, s.n)
    for v in bn.nodes:
        np.testing.assert_array_equal(back.counts[v], s.counts[v])


def test_unknown_category_and_missing() -> None:
    bn, df = chain(), chain_data()
    bad = df.copy()
    bad.loc[3, "b"] = "huge"
    with pytest.raises(ValueError, match="'b' has a value that is not a category"):
        bn.statistics(bad)
    nan = df.astype({"a": float})
    nan.loc[0, "a"] = np.nan
    with pytest.raises(ValueError, match="missing"):
        bn.statistics(nan)
    with pytest.raises(ValueError, match="no column 'c'"):
        bn.statistics(df.drop(columns="c"))
    assert bn.statistics(df.iloc[:0]).n == 0  # empty data are data (zero tables)


def test_posterior_is_dirichlet_alpha_plus_counts() -> None:
    bn, df = chain(), chain_data()
    post = bn.exact_posterior(df)
    s = bn.statistics(df)
    d = post.node("c", (1, "mid"))
    assert isinstance(d, Dirichlet)
    np.testing.assert_allclose(d.alpha, 0.5 + s.counts["c"][1, 1])
    cpts = post.mean()
    np.testing.assert_allclose(cpts.cpts["b"].sum(axis=-1), 1.0)
    # logpdf equals the sum of scipy's Dirichlet log densities over all rows
    expected = 0.0
    for v in bn.nodes:
        a = post.alphas[v].reshape(-1, post.alphas[v].shape[-1])
        t = cpts.cpts[v].reshape(a.shape)
        expected += sum(stats.dirichlet.logpdf(t[i], a[i]) for i in range(a.shape[0]))
    assert post.logpdf(cpts) == pytest.approx(expected, rel=1e-10)


def test_naive_bayes_predictive_matches_bayes_rule() -> None:
    g = np.random.default_rng(1)
    n = 400
    y = g.integers(0, 2, n)
    df = pd.DataFrame(
        {
            "y": y,
            "f1": (g.random(n) < np.where(y == 1, 0.8, 0.3)).astype(int),
            "f2": g.choice(["r", "g", "b"], n),
        }
    )
    nb = NaiveBayes("y", [0, 1], {"f1": [0, 1], "f2": ["r", "g", "b"]})
    assert nb.parents["f1"] == ("y",) and nb.parents["y"] == ()
    proba = nb.exact_posterior(df).predict_proba(df)
    s = nb.statistics(df)
    py = (1 + s.counts["y"]) / (2 + n)
    p1 = (1 + s.counts["f1"]) / (2 + s.counts["f1"].sum(axis=1, keepdims=True))
    p2 = (1 + s.counts["f2"]) / (3 + s.counts["f2"].sum(axis=1, keepdims=True))
    i = 5
    f2 = ["r", "g", "b"].index(df.f2[i])
    joint = py * p1[:, df.f1[i]] * p2[:, f2]
    np.testing.assert_allclose(proba[i], joint / joint.sum(), rtol=1e-12)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    with pytest.raises(ValueError, match="'f2' has a value that is not a category"):
        nb.exact_posterior(df).predict_proba(pd.DataFrame({"f1": [0], "f2": ["purple"]}))
    with pytest.raises(ValueError, match="must not also be a feature"):
        NaiveBayes("y", [0, 1], {"y": [0, 1]})


def test_parameters_validation() -> None:
    bn = chain()
    with pytest.raises(ValueError, match="probability vectors"):
        BayesNetParameters(bn, {v: np.full(bn.table_shape(v), 0.9) for v in bn.nodes})


def test_to_dict_roundtrip_fields() -> None:
    nb = NaiveBayes("y", [0, 1], {"f": [0, 1]})
    d = nb.to_dict()
    assert d["family"] == "naive-bayes" and d["target"] == "y"
    assert d["edges"] == [["y", "f"]]


@settings(max_examples=25, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 1), st.integers(0, 2)), min_size=1, max_size=40),
    st.floats(0.01, 5.0),
)
def test_posterior_parameters_positive(rows: list, alpha: float) -> None:
    bn = BayesNet({"p": [0, 1], "q": [0, 1, 2]}, [("p", "q")], alpha=alpha)
    df = pd.DataFrame(rows, columns=["p", "q"])
    post = bn.exact_posterior(df)
    assert all(np.all(a > 0) for a in post.alphas.values())
    assert sum(float(a.sum()) for a in post.alphas.values()) == pytest.approx(
        alpha * bn.n_cells + 2 * len(rows)
    )


def test_counts_through_the_data_layer_match(tmp_path: object) -> None:
    """A CSV path is counted by GROUP BY in DuckDB: same tables as the numpy path."""
    import pathlib

    bn, df = chain(), chain_data()
    path = pathlib.Path(str(tmp_path)) / "d.csv"
    df.to_csv(path, index=False)
    a, b = bn.statistics(df), bn.statistics(str(path))
    assert a.n == b.n
    for v in bn.nodes:
        np.testing.assert_array_equal(a.counts[v], b.counts[v])
    bad = df.copy()
    bad.loc[0, "b"] = "huge"
    bad.to_csv(path, index=False)
    with pytest.raises(ValueError, match="'b' has a value that is not a category"):
        bn.statistics(str(path))
    df.drop(columns="c").to_csv(path, index=False)
    with pytest.raises(ValueError, match="no column 'c'"):
        bn.statistics(str(path))


def test_counts_from_every_duckdb_input_equal_the_crosstab(tmp_path: object) -> None:
    """pandas frame, Parquet path, DuckDB database file, Arrow table and a mapping of
    columns (numpy): the same family tables as pandas' groupby, exactly."""
    import pathlib

    import duckdb
    import pyarrow as pa

    from dpbayes.data import Table

    bn, df = chain(), chain_data(n=500, seed=4)
    d = pathlib.Path(str(tmp_path))
    df.to_parquet(d / "d.parquet", index=False)
    con = duckdb.connect(str(d / "d.duckdb"))
    con.register("src", df)
    con.execute("CREATE TABLE chain AS SELECT * FROM src")
    want = np.zeros((2, 3, 2), dtype=np.int64)
    for (a, b, c), cnt in df.groupby(["a", "b", "c"]).size().items():
        want[a, ["lo", "mid", "hi"].index(b), c] = cnt
    inputs = [
        df,
        str(d / "d.parquet"),
        d / "d.parquet",
        con.table("chain"),
        Table(str(d / "d.parquet")),
        pa.Table.from_pandas(df),
        {k: df[k].tolist() for k in df.columns},
    ]
    for data in inputs:
        s = bn.statistics(data)
        assert s.n == len(df)
        np.testing.assert_array_equal(s.counts["c"], want)
        np.testing.assert_array_equal(s.counts["b"], want.sum(axis=2))
        np.testing.assert_array_equal(s.counts["a"], want.sum(axis=(1, 2)))
    con.close()


def test_user_level_counts_and_release_from_a_parquet_path(tmp_path: object) -> None:
    """Bounded to k rows per person in DuckDB: n = sum(min(rows, k)); Algorithm 1's
    sensitivity is k * 2|I| and the guarantee is per user."""
    import pathlib

    import dpbayes as dpb
    from dpbayes.data import Table
    from dpbayes.release.bayes_net.laplace import laplace_sensitivity

    bn, df = chain(), chain_data(n=400, seed=6)
    df["person"] = np.repeat(np.arange(100), 4)[: len(df)] // np.array([1, 1, 2, 2] * 100)
    path = pathlib.Path(str(tmp_path)) / "p.parquet"
    df.to_parquet(path, index=False)
    k = 2
    table = Table(str(path), user_column="person", max_rows_per_user=k)
    s = bn.statistics(table)
    assert s.n == int(np.minimum(df.groupby("person").size(), k).sum()) < len(df)
    for v in bn.nodes:  # every family table counts the same bounded rows
        assert int(s.counts[v].sum()) == s.n
    # user level is add/remove one user (n private): k * |I| (issue 14, defect 3)
    rel = dpb.release(bn, table, mechanism="laplace", epsilon=1.0, rng=0)
    assert rel.guarantee.sensitivity == k * laplace_sensitivity(bn, "add-remove") == 6.0
    assert rel.guarantee.details["rows_per_user"] == k and rel.public["n"] is None
    assert "add/remove one user (<= 2 rows)" in rel.guarantee.describe()
    rel2 = dpb.release(bn, table, mechanism="laplace", epsilon=1.0, rng=0, neighbours="add-remove")
    assert rel2.guarantee.sensitivity == k * 3
    with pytest.raises(ValueError, match="substitute"):
        dpb.release(bn, table, mechanism="laplace", epsilon=1.0, rng=0, neighbours="substitute")
    nb = NaiveBayes("a", [0, 1], {"b": ["lo", "mid", "hi"], "c": [0, 1]})
    rel3 = dpb.release(nb, table, mechanism="laplace", epsilon=1.0, rng=0)
    assert rel3.guarantee.sensitivity == k * laplace_sensitivity(nb, "add-remove")
    # no native user-level support: group privacy, the mechanism at eps/k (release/base.py)
    rel4 = dpb.release(bn, table, mechanism="sampling", epsilon=1.0, rng=0)
    assert rel4.guarantee.epsilon == 1.0
    assert rel4.guarantee.details["per_record_epsilon"] == pytest.approx(0.5)
    assert "add/remove one user (<= 2 rows)" in rel4.guarantee.describe()


def test_user_level_laplace_noise_has_k_times_the_record_scale(tmp_path: object) -> None:
    """The user-level Laplace release's noise, over many seeded draws from one bounded table,
    is Lap(k |I| / eps) (KS; add/remove one user), and the record-level scale is rejected."""
    import pathlib

    from scipy import stats as st

    from dpbayes.data import Table
    from dpbayes.privacy.noise import noise_source
    from dpbayes.release.base import plan

    bn, df = chain(), chain_data(n=400, seed=6)
    df["person"] = np.repeat(np.arange(200), 2)
    path = pathlib.Path(str(tmp_path)) / "p.parquet"
    df.to_parquet(path, index=False)
    k, eps = 2, 20.0
    table = Table(str(path), user_column="person", max_rows_per_user=k)
    exact = bn.statistics(table)
    p = plan(bn, table, mechanism="laplace", epsilon=eps)
    scale = p.guarantee.sensitivity / eps
    assert scale == pytest.approx(k * 3 / eps)
    v = bn.nodes[0]
    cell = int(np.argmax(exact.counts[v]))  # far from the truncation at 0 and n
    assert 10 * scale < exact.counts[v].flat[cell] < exact.n - 10 * scale
    noise = np.array(
        [
            np.asarray(p.run(noise_source(seed)).released["counts"][v]).flat[cell]
            - exact.counts[v].flat[cell]
            for seed in range(1500)
        ]
    )
    assert st.kstest(noise, st.laplace(scale=scale).cdf).pvalue > 1e-4
    assert st.kstest(noise, st.laplace(scale=scale / k).cdf).pvalue < 1e-8
