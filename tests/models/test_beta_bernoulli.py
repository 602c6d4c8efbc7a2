"""Beta-Bernoulli model: conjugate update by hand, data inputs, validation, properties."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpbayes.models import Beta, BetaBernoulli, CountStatistics, model_from_dict


def test_update_by_hand() -> None:
    m = BetaBernoulli(alpha=2.0, beta=3.0)
    data = [1, 0, 1, 1, 0, 1, 1]  # k = 5 successes, 2 failures
    stats = m.statistics(data)
    assert stats == CountStatistics(counts=np.array([5, 2]), n=7)
    assert stats.counts.dtype.kind == "i"
    assert m.posterior(data) == Beta(7.0, 5.0)
    assert m.posterior_predictive(data) == pytest.approx(7 / 12)
    assert m.prior == Beta(2.0, 3.0)
    assert BetaBernoulli().prior == Beta(1.0, 1.0)


@pytest.mark.parametrize(
    "data",
    [
        [True, False, True, True],
        np.array([1, 0, 1, 1]),
        np.array([1.0, 0.0, 1.0, 1.0]),
        pd.Series([1, 0, 1, 1], name="x"),
        np.array([True, False, True, True]),
    ],
)
def test_accepted_inputs(data: object) -> None:
    assert BetaBernoulli().statistics(data).counts.tolist() == [3, 1]


def test_frame_and_csv_with_column(tmp_path) -> None:  # type: ignore[no-untyped-def]
    frame = pd.DataFrame({"flip": [1, 1, 0], "other": [5, 6, 7]})
    path = tmp_path / "flips.csv"
    frame.to_csv(path, index=False)
    m = BetaBernoulli(alpha=1.0, beta=1.0)
    assert m.posterior(frame, column="flip") == Beta(3.0, 2.0)
    assert m.posterior(path, column="flip") == Beta(3.0, 2.0)
    assert m.posterior(str(path), column="flip") == Beta(3.0, 2.0)


def test_posterior_from_noisy_real_counts() -> None:
    m = BetaBernoulli(alpha=1.0, beta=1.0)
    post = m.posterior_from(CountStatistics(counts=np.array([2.7, 0.0]), n=3))
    assert post == Beta(3.7, 1.0)
    with pytest.raises(ValueError, match=r"stats\.counts\[1\]"):
        m.posterior_from(CountStatistics(counts=np.array([2.0, -0.5]), n=3))
    with pytest.raises(ValueError, match="2 entries"):
        m.posterior_from(CountStatistics(counts=np.array([1.0, 2.0, 3.0]), n=6))
    with pytest.raises(TypeError, match="CountStatistics"):
        m.posterior_from((1, 2))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("data", "match"),
    [
        ([1, 0, np.nan], "contains missing values"),
        ([1, 2, 0], "got another value"),
        ([0.5, 1.0], "got another value"),
        (["1", "0"], "got another value"),
        ([-1, 0], "got another value"),
    ],
)
def test_bad_data(data: object, match: str) -> None:
    with pytest.raises(ValueError, match=match) as info:
        BetaBernoulli().statistics(data)
    assert not any(str(v) in str(info.value) for v in (2, 0.5, "'1'", -1))  # data: not quoted


def test_empty_data_have_zero_counts() -> None:
    # not refused: under add/remove the empty data set neighbours every one-record set
    assert BetaBernoulli().statistics([]) == CountStatistics(counts=[0, 0], n=0)


@pytest.mark.parametrize(
    ("kwargs", "exc", "name"),
    [
        ({"alpha": 0.0}, ValueError, "alpha"),
        ({"beta": -1.0}, ValueError, "beta"),
        ({"alpha": np.nan}, ValueError, "alpha"),
        ({"beta": np.inf}, ValueError, "beta"),
        ({"alpha": "1"}, TypeError, "alpha"),
    ],
)
def test_bad_prior(kwargs: dict, exc: type, name: str) -> None:
    with pytest.raises(exc, match=name):
        BetaBernoulli(**kwargs)


def test_keyword_only_and_round_trip() -> None:
    with pytest.raises(TypeError):
        BetaBernoulli(1.0, 2.0)  # type: ignore[misc]
    m = BetaBernoulli(alpha=0.5, beta=2.5)
    assert m.to_dict() == {"name": "beta-bernoulli", "alpha": 0.5, "beta": 2.5}
    assert model_from_dict(m.to_dict()) == m
    assert m.name == "beta-bernoulli"


@settings(max_examples=80, deadline=None)
@given(
    st.floats(1e-3, 1e6),
    st.floats(1e-3, 1e6),
    st.lists(st.booleans(), min_size=1, max_size=50),
)
def test_posterior_parameters_positive(alpha: float, beta: float, flips: list[bool]) -> None:
    m = BetaBernoulli(alpha=alpha, beta=beta)
    post = m.posterior(flips)
    k = sum(flips)
    assert post.a > 0 and post.b > 0
    assert post.a == pytest.approx(alpha + k) and post.b == pytest.approx(beta + len(flips) - k)
