"""Dirichlet-categorical model: labels, conjugate update by hand, validation, properties."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpbayes.models import CountStatistics, Dirichlet, DirichletCategorical, model_from_dict


def test_update_by_hand_with_labels() -> None:
    m = DirichletCategorical(alpha=[1.0, 2.0, 0.5], categories=["red", "green", "blue"])
    data = ["red", "blue", "red", "red", "green"]
    stats = m.statistics(data)
    assert stats.counts.tolist() == [3, 1, 1] and stats.n == 5
    assert m.posterior(data) == Dirichlet([4.0, 3.0, 1.5])
    np.testing.assert_allclose(m.posterior_predictive(data), np.array([4.0, 3.0, 1.5]) / 8.5)


def test_symmetric_prior_and_default_labels() -> None:
    m = DirichletCategorical(alpha=0.5, categories=("a", "b"))
    assert m.prior == Dirichlet([0.5, 0.5])
    d = DirichletCategorical(alpha=[1.0, 1.0, 1.0])
    assert d.categories == (0, 1, 2)
    assert d.statistics(np.array([2, 0, 2, 2])).counts.tolist() == [1, 0, 3]
    assert d.statistics(pd.Series([1.0, 1.0])).counts.tolist() == [0, 2, 0]


def test_numpy_labels_are_plain_and_round_trip() -> None:
    m = DirichletCategorical(alpha=[1.0, 2.0], categories=np.array(["x", "y"]))
    d = m.to_dict()
    assert d == {"name": "dirichlet-categorical", "alpha": [1.0, 2.0], "categories": ["x", "y"]}
    assert model_from_dict(d) == m


def test_frame_column() -> None:
    frame = pd.DataFrame({"c": ["a", "b", "b"], "z": [1, 2, 3]})
    m = DirichletCategorical(alpha=1.0, categories=["a", "b", "c"])
    assert m.posterior(frame, column="c") == Dirichlet([2.0, 3.0, 1.0])


def test_posterior_from_noisy_counts() -> None:
    m = DirichletCategorical(alpha=[1.0, 1.0, 1.0])
    assert m.posterior_from(CountStatistics(counts=[0.5, 2.25, 0.0], n=3)) == Dirichlet(
        [1.5, 3.25, 1.0]
    )
    with pytest.raises(ValueError, match=r"stats\.counts\[2\]"):
        m.posterior_from(CountStatistics(counts=[1.0, 1.0, -0.1], n=2))
    with pytest.raises(ValueError, match="3 entries"):
        m.posterior_from(CountStatistics(counts=[1.0, 1.0], n=2))


@pytest.mark.parametrize(
    ("data", "match"),
    [(["a", None], "missing"), (["a", "q"], "a value which"), ([1, 2], "a value which")],
)
def test_bad_data(data: object, match: str) -> None:
    m = DirichletCategorical(alpha=1.0, categories=["a", "b"])
    with pytest.raises(ValueError, match=match):
        m.statistics(data)


def test_empty_data_have_zero_counts() -> None:
    m = DirichletCategorical(alpha=1.0, categories=["a", "b", "c"])
    assert m.statistics([]) == CountStatistics(counts=[0, 0, 0], n=0)


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"alpha": [1.0]}, ValueError, "alpha"),
        ({"alpha": [1.0, 0.0]}, ValueError, "alpha"),
        ({"alpha": [1.0, np.nan]}, ValueError, "alpha"),
        ({"alpha": [[1.0, 2.0]]}, ValueError, "alpha"),
        ({"alpha": 1.0}, ValueError, "categories"),
        ({"alpha": -1.0, "categories": ["a", "b"]}, ValueError, "alpha"),
        ({"alpha": [1.0, 1.0], "categories": ["a"]}, ValueError, "categories"),
        ({"alpha": [1.0, 1.0], "categories": ["a", "a"]}, ValueError, "distinct"),
        ({"alpha": [1.0, 1.0], "categories": "ab"}, TypeError, "categories"),
        ({"alpha": [1.0, 1.0], "categories": [["a"], ["b"]]}, TypeError, "hashable"),
        ({"alpha": ["x", "y"]}, TypeError, "alpha"),
    ],
)
def test_bad_constructor(kwargs: dict, exc: type, match: str) -> None:
    with pytest.raises(exc, match=match):
        DirichletCategorical(**kwargs)


def test_alpha_read_only() -> None:
    m = DirichletCategorical(alpha=[1.0, 2.0])
    with pytest.raises(ValueError):
        m.alpha[0] = 3.0


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(1e-3, 1e6), min_size=2, max_size=6),
    st.data(),
)
def test_posterior_parameters_positive(alpha: list[float], data: st.DataObject) -> None:
    m = DirichletCategorical(alpha=alpha)
    values = data.draw(st.lists(st.integers(0, len(alpha) - 1), min_size=1, max_size=40))
    post = m.posterior(values)
    counts = np.bincount(values, minlength=len(alpha))
    assert np.all(post.alpha > 0)
    np.testing.assert_allclose(post.alpha, np.asarray(alpha) + counts)
    assert post.mean().sum() == pytest.approx(1.0)
