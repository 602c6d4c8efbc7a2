"""A CSV larger than DuckDB's memory limit is aggregated in a stream, exactly as numpy does."""

from __future__ import annotations

import duckdb
import numpy as np
import pandas as pd
import pytest

from dpbayes.data import as_source


@pytest.fixture(scope="module")
def big_csv(tmp_path_factory):
    rng = np.random.default_rng(2024)
    n = 300_000
    x = rng.standard_normal(n) * 3.0 + 1.0
    x[rng.random(n) < 0.01] = np.nan
    k = rng.integers(0, 5, n)
    path = tmp_path_factory.mktemp("stream") / "big.csv"
    frame = pd.DataFrame({"x": x, "k": k})
    writer = duckdb.connect()
    writer.register("frame", frame)
    # DuckDB writes doubles in shortest round-trip form: the file holds exactly x
    writer.execute(f"COPY frame TO '{path}' (HEADER)")
    writer.close()
    return path, x, k


def test_file_is_a_few_megabytes(big_csv):
    path, _, _ = big_csv
    assert path.stat().st_size > 5_000_000


def test_streamed_statistics_equal_numpy(big_csv):
    path, x, k = big_csv
    # a 4 MB memory limit with 256 KB read buffers: the ~6 MB file can only be streamed
    con = duckdb.connect()
    con.execute("SET memory_limit='4MB'")
    con.execute("SET threads=1")
    rel = con.read_csv(str(path), buffer_size=1 << 18)
    streamed = as_source(rel, "x")
    exact = as_source(x)
    assert streamed.n() == exact.n() == len(x)
    assert streamed.null_count() == exact.null_count() == int(np.isnan(x).sum())
    total = exact.clamped_sum(-2.0, 5.0)
    assert streamed.clamped_sum(-2.0, 5.0) == total
    assert streamed.clamped_sum_of_squares(-2.0, 5.0) == exact.clamped_sum_of_squares(-2.0, 5.0)
    assert (streamed.min(), streamed.max()) == (exact.min(), exact.max())
    # the default path (own connection, no memory limit) agrees too
    assert as_source(path, "x").clamped_sum(-2.0, 5.0) == total
    counts = as_source(con.read_csv(str(path), buffer_size=1 << 18), "k").value_counts()
    assert counts == as_source(k).value_counts()
    assert sum(counts.values()) == len(k)
