"""Bayesian linear regression: exact Gaussian posterior, bounds, predictive."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dpbayes.models.linear_regression import BayesianLinearRegression


def xy(n: int = 200, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    g = np.random.default_rng(seed)
    x = g.normal(size=(n, 3))
    y = x @ np.array([1.0, -2.0, 0.5]) + g.normal(scale=0.3, size=n)
    return x, y


def test_posterior_closed_form() -> None:
    x, y = xy()
    m = BayesianLinearRegression(prior_precision=2.0, noise_variance=0.09)
    post = m.exact_posterior((x, y))
    prec = 2.0 * np.eye(3) + x.T @ x / 0.09
    np.testing.assert_allclose(post.cov, np.linalg.inv(prec), rtol=1e-10)
    ridge = np.linalg.solve(x.T @ x + 2.0 * 0.09 * np.eye(3), x.T @ y)
    np.testing.assert_allclose(post.mean(), ridge, rtol=1e-10)
    lo, hi = post.interval(0.95).T
    assert np.all(lo < post.mean()) and np.all(post.mean() < hi)
    assert post.logpdf(post.mean()) > post.logpdf(post.mean() + 1)
    mean, var = m.predictive(post, x[:5])
    np.testing.assert_allclose(mean, x[:5] @ post.mean())
    assert np.all(var > 0.09)
    assert post.to_dict()["family"] == "multivariate-normal"


def test_bounds_clip_rows_and_labels() -> None:
    m = BayesianLinearRegression(feature_bound=1.0, label_bound=2.0)
    xb, yb = m.bounded(np.array([[3.0, 4.0], [0.3, 0.4]]), np.array([5.0, -1.0]))
    np.testing.assert_allclose(xb, [[0.6, 0.8], [0.3, 0.4]])
    np.testing.assert_allclose(yb, [2.0, -1.0])
    s = m.statistics((np.array([[3.0, 4.0]]), np.array([5.0])))
    np.testing.assert_allclose(s.xty, [1.2, 1.6])
    assert s.n == 1 and s.yty == 4.0


def test_dataframe_input_and_errors() -> None:
    x, y = xy(50)
    df = pd.DataFrame(x, columns=["a", "b", "c"]).assign(t=y)
    m = BayesianLinearRegression(features=["a", "b", "c"], target="t")
    np.testing.assert_allclose(m.exact_posterior(df).mean(), m.exact_posterior((x, y)).mean())
    with pytest.raises(ValueError, match="no column"):
        BayesianLinearRegression(features=["a", "zz"], target="t").statistics(df)
    with pytest.raises(ValueError, match="prior_precision"):
        BayesianLinearRegression(prior_precision=0)
    with pytest.raises(ValueError, match="y must have"):
        m.statistics((x, y[:-1]))
    with pytest.raises(TypeError):
        m.statistics([1, 2, 3])
