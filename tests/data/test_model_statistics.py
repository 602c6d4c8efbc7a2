"""Bayesian-network counts and the query engine's cube from every engine: exactly equal.

pandas (an independent crosstab), a Parquet file through DuckDB, PostgreSQL and Spark
local mode give the same family count tables; bounded to k rows per person they give
the same bounded tables (the rows kept are the same in every engine), and the releases
scale the add/remove sensitivity by k and say "add/remove one user".
"""

from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pytest

import dpbayes as dpb
from dpbayes.answers import Bins, Cube
from dpbayes.data import Table
from dpbayes.models import BayesNet, NaiveBayes
from dpbayes.release.bayes_net import laplace as _alg1  # noqa: F401  (registers the mechanisms)
from dpbayes.release.bayes_net.laplace import laplace_sensitivity

# one worker for this module: its PostgreSQL fixture replaces a shared table (two workers
# doing it at once collide in the catalog)
pytestmark = pytest.mark.xdist_group("engines")

K = 2
VARIABLES = {"age": [0, 1, 2, 3], "smoker": [False, True], "health": ["poor", "fair", "good"]}
EDGES = [("age", "smoker"), ("age", "health"), ("smoker", "health")]
CUBE_ATTRS = {"health": VARIABLES["health"], "score": Bins([-np.inf, 0.0, 1.0, np.inf])}


def _frame(n_persons: int = 150, seed: int = 3) -> pd.DataFrame:
    """Persons with 1..5 rows; int, bool, string and float columns, no NULLs."""
    rng = np.random.default_rng(seed)
    rows = rng.integers(1, 6, n_persons)
    person = np.repeat(np.arange(n_persons), rows)
    m = person.size
    return pd.DataFrame(
        {
            "person": person.astype(np.int64),
            "age": rng.integers(0, 4, m).astype(np.int64),
            "smoker": rng.random(m) < 0.3,
            "health": rng.choice(VARIABLES["health"], m),
            "score": np.round(rng.standard_normal(m), 3),
        }
    )


@pytest.fixture(scope="module")
def frame() -> pd.DataFrame:
    return _frame()


@pytest.fixture(scope="module")
def parquet(frame, tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("bn") / "persons.parquet"
    frame.to_parquet(path, index=False)
    return str(path)


def _crosstab(model: BayesNet, frame: pd.DataFrame) -> dict[str, np.ndarray]:
    """The family tables by pandas groupby (independent of dpbayes.data)."""
    out = {}
    for v in model.nodes:
        fam = list(model.family(v))
        tab = np.zeros(model.table_shape(v), dtype=np.int64)
        for key, cnt in frame.groupby(fam).size().items():
            key = key if isinstance(key, tuple) else (key,)
            idx = tuple(model.variables[c].index(x) for c, x in zip(fam, key, strict=True))
            tab[idx] = cnt
        out[v] = tab
    return out


def _bounded_rows(table: Table, frame: pd.DataFrame) -> pd.DataFrame:
    """The rows a bounded DuckDB table keeps (read back only to build the reference)."""
    counts = table.value_counts_joint(list(frame.columns))
    return pd.DataFrame(
        [k for k, c in counts.items() for _ in range(c)], columns=list(frame.columns)
    ).astype(frame.dtypes.to_dict())


def _same(a, b) -> None:
    assert a.n == b.n
    assert set(a.counts) == set(b.counts)
    for v in a.counts:
        np.testing.assert_array_equal(a.counts[v], b.counts[v])


def _check_engine(
    data, frame: pd.DataFrame, bounded_ref: pd.DataFrame, *, slow_engine: bool = False
) -> None:
    """Counts of a BN and a naive Bayes model, bounded counts, release and cube.

    ``slow_engine`` (Spark: ~1 s per job): the BN only, the bounded table materialised
    once, no release (its sensitivity does not depend on the engine)."""
    bn = BayesNet(VARIABLES, EDGES)
    nb = NaiveBayes("health", VARIABLES["health"], {"age": [0, 1, 2, 3], "smoker": [0, 1]})
    for model in (bn,) if slow_engine else (bn, nb):
        stats = model.statistics(data)
        want = _crosstab(model, frame)
        assert stats.n == len(frame)
        for v in model.nodes:
            np.testing.assert_array_equal(stats.counts[v], want[v])
        _same(stats, model.statistics(frame))
    bounded = Table(data, user_column="person", max_rows_per_user=K)
    if slow_engine:
        bounded = bounded.materialize()
    assert bounded.rows_per_user_bound == K
    stats = bn.statistics(bounded)
    want = _crosstab(bn, bounded_ref)
    assert stats.n == len(bounded_ref)
    for v in bn.nodes:
        np.testing.assert_array_equal(stats.counts[v], want[v])
    if not slow_engine:
        rel = dpb.release(bn, bounded, mechanism="laplace", epsilon=1.0, rng=0)
        assert rel.guarantee.sensitivity == K * laplace_sensitivity(bn, "add-remove")
        assert "add/remove one user (<= 2 rows)" in rel.guarantee.describe()
    cube = Cube.from_table(bounded, CUBE_ATTRS)
    assert cube.rows_per_user_bound == K
    np.testing.assert_array_equal(cube.counts, Cube.from_table(bounded_ref, CUBE_ATTRS).counts)


@pytest.fixture(scope="module")
def bounded_ref(frame) -> pd.DataFrame:
    ref = _bounded_rows(Table(frame, user_column="person", max_rows_per_user=K), frame)
    assert len(ref) == int(np.minimum(frame.groupby("person").size(), K).sum())
    return ref


def test_duckdb_parquet_and_pandas(frame, parquet, bounded_ref):
    _check_engine(parquet, frame, bounded_ref)
    # the release on row-level data is record-level
    rel = dpb.release(BayesNet(VARIABLES, EDGES), parquet, mechanism="laplace", epsilon=1.0, rng=1)
    assert rel.guarantee.sensitivity == laplace_sensitivity(
        BayesNet(VARIABLES, EDGES), "substitute"
    )
    assert "rows_per_user" not in rel.guarantee.details


def test_postgres(postgres_engine, frame, bounded_ref):
    frame.to_sql("bn_persons", postgres_engine, if_exists="replace", index=False)
    url = os.environ["DPBAYES_TEST_POSTGRES_URL"]
    _check_engine(Table(url, table="bn_persons"), frame, bounded_ref)
    # a URL + table straight into the cube, bounded in PostgreSQL
    cube = Cube.from_table(
        url, CUBE_ATTRS, table="bn_persons", user_column="person", max_rows_per_user=K
    )
    np.testing.assert_array_equal(cube.counts, Cube.from_table(bounded_ref, CUBE_ATTRS).counts)
    with pytest.raises(TypeError, match="SQLAlchemyTable tables cannot be materialized"):
        Table(url, table="bn_persons").materialize()


def test_spark(spark, frame, parquet, bounded_ref):
    _check_engine(spark.read.parquet(parquet), frame, bounded_ref, slow_engine=True)


def test_materialized_bounded_table_is_the_same(frame, bounded_ref):
    table = Table(frame, user_column="person", max_rows_per_user=K)
    mat = table.materialize()
    assert mat.rows_per_user_bound == K
    cols = list(frame.columns)
    assert mat.value_counts_joint(cols) == table.value_counts_joint(cols)
    assert mat.column("score").clamped_sum(-2, 2) == table.column("score").clamped_sum(-2, 2)
