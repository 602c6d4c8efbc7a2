"""A regression's statistics computed in the engine equal numpy's, and releases read them.

Parquet (DuckDB), PostgreSQL (a live server, .ci/setup.d/postgres.sh), Spark (local
mode) and contribution-bounded tables.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import dpbayes as dpb
from dpbayes.data import Table
from dpbayes.release.ssp.mechanism import sensitivity_margin

# one worker for this module: its PostgreSQL fixture replaces a shared table (two workers
# doing it at once collide in the catalog)
pytestmark = pytest.mark.xdist_group("engines")


def frame(n: int = 400, seed: int = 0) -> pd.DataFrame:
    g = np.random.default_rng(seed)
    x = g.normal(0, 0.8, (n, 3))
    y = x @ np.array([0.5, -0.3, 0.2]) + g.normal(0, 0.4, n)
    df = pd.DataFrame(x, columns=["a", "b", "c"])
    df["y"] = y
    df["label"] = (y > 0).astype(int)
    df["person"] = np.arange(n) // 4  # 4 rows per person
    return df


def linear(clip: str, norm_bound: float | None = None) -> dpb.models.BayesianLinearRegression:
    return dpb.models.BayesianLinearRegression(
        norm_bound=norm_bound,
        prior_precision=1.0,
        noise_variance=0.2,
        feature_bound=1.0,
        label_bound=1.0,
        clip=clip,
        features=["a", "b", "c"],
        target="y",
    )


LOGIT = dpb.models.BayesianLogisticRegression(
    prior_precision=1.0, feature_bound=1.0, features=["a", "b", "c"], target="label"
)


def check_linear(
    model: dpb.models.BayesianLinearRegression, data: object, df: pd.DataFrame
) -> None:
    want, got = model.statistics(df), model.statistics(data)
    assert got.n == want.n
    assert got.exact is not None and want.exact is not None
    if model.clip == "box" and model.norm_bound is None:
        # clipping is exact in every engine, so the exact sums on the grid are the same
        # integers and their rounded values the same doubles (data.exact)
        assert got.exact == want.exact
        np.testing.assert_array_equal(got.xtx, want.xtx)
    np.testing.assert_allclose(got.xtx, want.xtx, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(got.xty, want.xty, rtol=1e-10, atol=1e-10)
    assert got.yty == pytest.approx(want.yty, rel=1e-10)


@pytest.mark.parametrize("clip", ["box", "ball"])
@pytest.mark.parametrize("norm_bound", [None, 0.9])
def test_linear_statistics_in_duckdb_equal_numpy(tmp_path, clip, norm_bound) -> None:
    df = frame()
    path = tmp_path / "rows.parquet"
    df.to_parquet(path)
    check_linear(linear(clip, norm_bound), str(path), df)


def test_a_row_norm_bound_is_applied_in_the_engine(tmp_path) -> None:
    """Rows scaled into the ball after the box, in the engine as in numpy (logistic)."""
    df = frame()
    path = tmp_path / "rows.parquet"
    df.to_parquet(path)
    model = dpb.models.BayesianLogisticRegression(
        feature_bound=1.0, norm_bound=1.1, features=["a", "b", "c"], target="label"
    )
    want, got = model.statistics(df), model.statistics(str(path))
    np.testing.assert_allclose(got.t1, want.t1, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(got.t2, want.t2, rtol=1e-10, atol=1e-10)
    # every row is in the ball: the trace of X'X is at most n R^2, and some rows were cut
    assert np.trace(got.t2) <= len(df) * 1.1**2 + 1e-9
    assert not np.allclose(got.t2, LOGIT.statistics(df).t2)


def test_statistics_in_postgresql_equal_numpy(postgres_engine) -> None:
    df = frame()
    df.to_sql("regression_rows", postgres_engine, if_exists="replace", index=False)
    for clip in ("box", "ball"):
        check_linear(linear(clip), Table(postgres_engine, table="regression_rows"), df)
    check_linear(linear("box", 0.9), Table(postgres_engine, table="regression_rows"), df)
    got = LOGIT.statistics(Table(postgres_engine, table="regression_rows"))
    np.testing.assert_allclose(got.t2, LOGIT.statistics(df).t2, rtol=1e-10, atol=1e-10)
    assert got.exact == LOGIT.statistics(df).exact  # NUMERIC sums: exact


def test_statistics_in_spark_equal_numpy(spark) -> None:
    df = frame(120)
    sdf = spark.createDataFrame(df)
    check_linear(linear("ball"), sdf, df)
    got = LOGIT.statistics(sdf)
    np.testing.assert_allclose(got.t1, LOGIT.statistics(df).t1, rtol=1e-10, atol=1e-10)
    assert got.exact == LOGIT.statistics(df).exact  # DECIMAL(38, 0) sums: exact


def test_logistic_statistics_in_the_engine_equal_numpy(tmp_path) -> None:
    df = frame()
    path = tmp_path / "rows.parquet"
    df.to_parquet(path)
    want, got = LOGIT.statistics(df), LOGIT.statistics(str(path))
    assert got.n == want.n
    assert got.exact is not None and got.exact == want.exact  # HUGEINT sums: exact
    np.testing.assert_allclose(got.t1, want.t1, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(got.t2, want.t2, rtol=1e-10, atol=1e-10)


def test_a_release_from_a_file_at_user_level(tmp_path) -> None:
    df = frame()
    path = tmp_path / "rows.parquet"
    df.to_parquet(path)
    joint = {"mechanism": "ssp", "epsilon": 1.0, "rng": 0, "first_order_share": None}
    record = dpb.release(linear("box"), str(path), **joint)
    bounded = Table(str(path), user_column="person", max_rows_per_user=2)
    user = dpb.release(linear("box"), bounded, **joint)
    assert user.guarantee.details["rows_per_user"] == 2
    # the default two blocks: each block's sensitivity k times the record level's
    blocks = dpb.release(linear("box"), bounded, mechanism="ssp", epsilon=1.0, rng=0)
    assert blocks.guarantee.details["sensitivity_exact"] == 2.0
    # k times the record-level sensitivity; the allowance for the one rounding of each
    # entry is added once (PROOF.md §3c)
    rounding = record.guarantee.details["sensitivity_rounding"]
    assert user.guarantee.details["sensitivity_rounding"] == rounding
    base = record.guarantee.details["sensitivity_exact"]
    assert user.guarantee.details["sensitivity_exact"] == pytest.approx(2 * base, rel=1e-15)
    want = (2 * base + rounding) * (1 + sensitivity_margin(4))
    assert user.guarantee.sensitivity == pytest.approx(want, rel=1e-14)
    assert "user" in user.guarantee.describe()


def test_missing_values_and_bad_labels_are_refused_in_the_engine(tmp_path) -> None:
    df = frame()
    df.loc[3, "b"] = np.nan
    path = tmp_path / "rows.parquet"
    df.to_parquet(path)
    with pytest.raises(ValueError, match="rows with a missing value") as info:
        linear("box").statistics(str(path))
    assert "1" not in str(info.value)  # the count of such rows is not told
    df = frame()
    df.loc[0, "label"] = 2
    df.to_parquet(path)
    with pytest.raises(ValueError, match="labels in"):
        LOGIT.statistics(str(path))
    # columns held as text are refused by their type, before any row is read: 'nan' was
    # read as NaN and clipped to the bound, and PostgreSQL raised on '1e400' (one record)
    text = tmp_path / "text.csv"
    for rows in ("0.4,0.3,0.1,0.3", "nan,0.3,0.1,0.3", "1e400,0.3,0.1,0.3"):
        text.write_text(f"a,b,c,y\n0.5,0.1,0.2,1.0\n{rows}\n")
        with pytest.raises(ValueError, match="column 'a' is not numeric"):
            linear("box").statistics(Table(str(text), text_columns=["a"]))
    assert linear("box").statistics(str(text)).n == 2  # typed: 1e400 is inf, clipped


@pytest.mark.parametrize("clip", ["box", "ball"])
def test_infinite_values_are_bounded_alike_in_memory_and_in_the_engine(tmp_path, clip) -> None:
    """+-inf and values whose squares overflow are values like any other: with public
    bounds both paths map them into range, identically (numpy refused them while the
    engine clipped them, and the engine's ball turned an inf row into NaN sums: a
    data-dependent refusal either way). NaN stays a missing value, in both paths."""
    df = frame()
    df.loc[0, "a"], df.loc[1, "b"], df.loc[2, "c"] = np.inf, -np.inf, 1e300
    df.loc[3, "y"], df.loc[4, "y"] = np.inf, -np.inf
    path = tmp_path / "rows.parquet"
    df.to_parquet(path)
    check_linear(linear(clip), str(path), df)
    got = linear(clip).statistics(df)
    assert np.all(np.isfinite(got.xtx)) and np.isfinite(got.yty)
    if clip == "box":
        want, got = LOGIT.statistics(df), LOGIT.statistics(str(path))
        np.testing.assert_allclose(got.t2, want.t2, rtol=1e-10, atol=1e-10)
    df.loc[5, "c"] = np.nan
    df.to_parquet(path)
    for data in (df, str(path)):
        with pytest.raises(ValueError, match="rows with a missing value"):
            linear(clip).statistics(data)


def edge_frame() -> pd.DataFrame:
    """Values at the grid's edges: subnormals and tiny values that truncate to 0 (a
    PostgreSQL product that underflows would raise), values at +-the bound, just inside
    it, and ordinary ones."""
    df = frame(60, seed=3) * 1e29
    df["a"] = df["a"].astype(float)
    df.loc[0, ["a", "b", "c"]] = [5e-324, -1e-310, 1e-300]
    df.loc[1, ["a", "b", "c"]] = [1e30, -1e30, np.nextafter(1e30, 0)]
    df.loc[2, "y"] = 1e-320
    df["label"] = (df["y"] > 0).astype(int)
    return df


def test_grid_edges_give_the_same_exact_sums_in_duckdb(tmp_path) -> None:
    """Bounds 1e30 (a grid coarser than 1: the scale is 2**-74) with subnormal values:
    DuckDB's integers are numpy's, and every sum is exact."""
    df = edge_frame()
    path = tmp_path / "rows.parquet"
    df.to_parquet(path)
    model = dpb.models.BayesianLinearRegression(
        feature_bound=1e30, label_bound=1e30, clip="box", features=["a", "b", "c"], target="y"
    )
    want, got = model.statistics(df), model.statistics(str(path))
    assert got.exact == want.exact and want.exact is not None
    assert want.exact.ints[0][0] > 0


def test_grid_edges_give_the_same_exact_sums_in_postgresql(postgres_engine) -> None:
    df = edge_frame()
    df.to_sql("regression_edges", postgres_engine, if_exists="replace", index=False)
    table = Table(postgres_engine, table="regression_edges")
    model = dpb.models.BayesianLinearRegression(
        feature_bound=1e30, label_bound=1e30, clip="box", features=["a", "b", "c"], target="y"
    )
    assert model.statistics(table).exact == model.statistics(df).exact
    logit = dpb.models.BayesianLogisticRegression(
        feature_bound=1e30, features=["a", "b", "c"], target="label"
    )
    assert logit.statistics(table).exact == logit.statistics(df).exact


def ball_edge_frame() -> pd.DataFrame:
    """Rows that made PostgreSQL raise where numpy and DuckDB compute (a review): an
    all-zero row (an old floor of 1e-300 under the norm, at a radius of 1e9, overflowed)
    and a subnormal coordinate in a row scaled down (the product underflowed)."""
    df = frame(40)
    df.loc[0, ["a", "b", "c"]] = 0.0
    df.loc[1, ["a", "b", "c"]] = [5e-324, 1e9, -1e9]
    df.loc[2, ["a", "b", "c"]] = [1e-200, 0.8, 0.9]
    df.loc[3, ["a", "b", "c"]] = [-1e-95, 1e-80, 0.0]
    df.loc[4, ["a", "b", "c"]] = [0.0, 1e150, 0.0]
    df.loc[5, ["a", "b", "c"]] = [1e-89, 1e150, 0.0]
    df.loc[6, ["a", "b", "c"]] = [1e-90, 1e40, 0.0]
    return df


BALL_EDGE_MODELS = [
    ("linear", dict(feature_bound=1e9, label_bound=1.0, clip="ball")),
    ("linear", dict(feature_bound=1e-130, label_bound=1.0, clip="ball")),
    ("linear", dict(feature_bound=1e-100, label_bound=1.0, clip="ball")),
    ("linear", dict(feature_bound=1.0, label_bound=1.0, clip="box", norm_bound=1e9)),
    ("linear", dict(feature_bound=0.5, label_bound=1.0, clip="ball", norm_bound=0.3)),
    ("logistic", dict(feature_bound=1.0, norm_bound=0.5)),
    ("logistic", dict(feature_bound=1.0, norm_bound=1e9)),
]


def _ball_edge_model(kind: str, kw: dict) -> object:
    if kind == "linear":
        return dpb.models.BayesianLinearRegression(features=["a", "b", "c"], target="y", **kw)
    return dpb.models.BayesianLogisticRegression(features=["a", "b", "c"], target="label", **kw)


def _check_ball_edges(data: object, df: pd.DataFrame) -> None:
    for kind, kw in BALL_EDGE_MODELS:
        model = _ball_edge_model(kind, kw)
        want, got = model.statistics(df), model.statistics(data)  # no engine raises
        assert got.n == want.n == len(df)
        if got.exact is None:  # bounds off the public grid (1e-130): float sums
            np.testing.assert_allclose(got.xtx, want.xtx, rtol=1e-9)
            continue
        assert want.exact is not None
        # a ball's scaling is each engine's floating point: the integers may differ by
        # the rounding of a scale, never more (the sensitivity's margin covers that)
        for gi, wi in zip(got.exact.ints, want.exact.ints, strict=True):
            np.testing.assert_allclose(np.array(gi, float), np.array(wi, float), rtol=1e-9)


def test_ball_scaling_at_the_edges_in_duckdb(tmp_path) -> None:
    df = ball_edge_frame()
    path = tmp_path / "rows.parquet"
    df.to_parquet(path)
    _check_ball_edges(str(path), df)


def test_ball_scaling_at_the_edges_in_postgresql(postgres_engine) -> None:
    """Whether the statistics' query raised depended on one record (a zero row, a tiny
    coordinate, a huge one under a tiny radius): under add/remove that told neighbours
    apart before any noise."""
    df = ball_edge_frame()
    df.to_sql("regression_ball_edges", postgres_engine, if_exists="replace", index=False)
    _check_ball_edges(Table(postgres_engine, table="regression_ball_edges"), df)


@pytest.mark.parametrize(
    "kw",
    [
        dict(feature_bound=1e-250, clip="ball"),
        dict(feature_bound=1.0, clip="box", norm_bound=1e-150),
    ],
)
def test_a_ball_below_the_smallest_radius_is_refused_in_memory_and_in_the_engine(
    tmp_path, kw
) -> None:
    """A third review: under a radius of 1e-250 a row [1e-170] had a computed norm of 0
    (its square underflows) and passed through unscaled, 1e80 times outside the ball;
    nearby rows overshot by 24x. Radii below 1e-140 are refused, a public check."""
    df = frame(10)
    path = tmp_path / "rows.parquet"
    df.to_parquet(path)
    model = dpb.models.BayesianLinearRegression(
        label_bound=1.0, features=["a", "b", "c"], target="y", **kw
    )
    for data in (df, str(path)):
        with pytest.raises(ValueError, match="is below 1e-140"):
            model.statistics(data)


@pytest.mark.parametrize(
    ("model", "mechanism", "words"),
    [
        (dpb.models.BayesianLinearRegression(feature_bound=1.0), "ssp", "label_bound"),
        (dpb.models.BayesianLinearRegression(feature_bound=1.0), "sampling", "label_bound"),
        (
            dpb.models.BayesianLinearRegression(
                feature_bound=1.0, label_bound=1e-300, weight_bound=1.0
            ),
            "sampling",
            "must be in",
        ),
    ],
)
def test_missing_or_bad_bounds_are_refused_before_the_data_are_read(
    model: object, mechanism: str, words: str
) -> None:
    """A second review: the statistics were computed before the planner refused the
    model, and PostgreSQL raised on a huge unbounded label (an error of one record)
    before that refusal. Data that cannot be read at all show the order."""
    with pytest.raises(ValueError, match=words):
        dpb.release(model, object(), mechanism=mechanism, epsilon=1.0, rng=0)
